"""The server's background work: every task named, held until it ends, its failure logged by
one rule."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger(__name__)


class Tasks:
    def __init__(self, expected: tuple[type[Exception], ...] = ()) -> None:
        self._running: set[asyncio.Task[Any]] = set()
        # Failures the user has been told of already (server.failures.EXPECTED): logged plainly.
        self._expected = expected

    def start(self, work: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Run `work` in the background; a strong reference is kept until it ends."""
        task = asyncio.ensure_future(work)
        task.set_name(name)
        self._running.add(task)
        task.add_done_callback(self._ended)
        return task

    def _ended(self, task: asyncio.Task[Any]) -> None:
        self._running.discard(task)
        error = None if task.cancelled() else task.exception()
        if error is None:
            return
        if isinstance(error, self._expected):
            log.info("%s: %s", task.get_name(), error)
        else:
            log.error("%s failed", task.get_name(), exc_info=error)

    async def finish(self, wait_s: float, give_up: Callable[[], None]) -> None:
        """Let running tasks, and those they start meanwhile (a view's build ending starts a
        read), end for up to `wait_s`, then call `give_up` (what they wait on is waited for no
        longer), cancel the rest and await them."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while running := self._unfinished():
            _done, pending = await asyncio.wait(running,
                                                timeout=max(0.0, deadline - loop.time()))
            if pending:
                break
        else:
            return
        give_up()
        while late := self._unfinished():  # waiting on the client, say: cut, and awaited
            for task in late:
                task.cancel()
            await asyncio.wait(late)

    def _unfinished(self) -> list[asyncio.Task[Any]]:
        """The tasks not ended, those started since the last look included."""
        return [task for task in self._running if not task.done()]
