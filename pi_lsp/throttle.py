"""An action run at most once an interval, its last call never lost (editors' notices)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class Throttled:
    """`action` run at once when it last ran `interval` seconds ago or more, else once at the
    end of that interval for every call made meanwhile."""

    def __init__(self, action: Callable[[], None], interval: float) -> None:
        self.action, self.interval = action, interval
        self._last = -interval
        self._later: asyncio.TimerHandle | None = None

    def __call__(self) -> None:
        if self._later is not None:
            return
        wait = self._last + self.interval - time.monotonic()
        if wait <= 0:
            self._run()
        else:
            self._later = asyncio.get_running_loop().call_later(wait, self._run)

    def cancel(self) -> None:
        if self._later is not None:
            self._later.cancel()
            self._later = None

    def _run(self) -> None:
        self._later = None
        self._last = time.monotonic()
        self.action()
