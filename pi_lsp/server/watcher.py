"""Watching session directories with watchfiles, feeding each change to a callback."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import watchfiles

log = logging.getLogger(__name__)

DEBOUNCE_MS = 200
STEP_MS = 20
POLL_MS = 100
MISSING_DIR_POLL_S = 0.5
RESTART_PAUSE_S = 0.5  # between a watch watchfiles ended and the next

Changed = Callable[[Path, watchfiles.Change], None]


def session_file_filter(change: watchfiles.Change, path: str) -> bool:
    return path.endswith(".jsonl")


class DirectoryWatcher:
    """One directory, non-recursive, `.jsonl` only; waits for it to exist, polls if it must."""

    def __init__(self, directory: Path, on_change: Changed, force_polling: bool = False) -> None:
        self.directory = directory
        self.on_change = on_change
        self.force_polling = force_polling
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"watch {self.directory}")

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(self._task, 2)
            except (TimeoutError, asyncio.CancelledError):
                pass
            except Exception:  # the watch had ended on its own: stopping the others goes on
                log.exception("watching %s had failed", self.directory)

    async def _run(self) -> None:
        while not self._stop.is_set():
            if not await self._wait_for_directory():
                return
            # Files already there when the watch begins are reported once.
            for path in sorted(self.directory.glob("*.jsonl")):
                self._report(path, watchfiles.Change.added)
            try:
                await self._watch()
            except OSError as error:
                if self.directory.is_dir() and not self.force_polling:
                    log.warning("watching %s failed (%s); polling", self.directory, error)
                    self.force_polling = True
            except Exception as error:
                # watchfiles ends its watch on an event it cannot pass on: a file named in no
                # UTF-8 ("Unable to decode path", in an ExceptionGroup). The next watch looks at
                # every file again (nothing missed is lost); the pause keeps a file touched
                # over and over from making this a busy loop.
                log.warning("watching %s stopped (%s); watching it again", self.directory,
                            _first_cause(error))
                await self._pause(RESTART_PAUSE_S)

    async def _wait_for_directory(self) -> bool:
        while not self.directory.is_dir():
            await self._pause(MISSING_DIR_POLL_S)
            if self._stop.is_set():
                return False
        return True

    async def _pause(self, seconds: float) -> None:
        """Wait `seconds`, or until the watch is stopped."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._stop.wait(), seconds)

    async def _watch(self) -> None:
        async for changes in watchfiles.awatch(
            self.directory, watch_filter=session_file_filter, debounce=DEBOUNCE_MS,
            step=STEP_MS, stop_event=self._stop, recursive=False,
            force_polling=self.force_polling or None, poll_delay_ms=POLL_MS,
        ):
            for change, path in sorted(changes, key=lambda c: c[1]):
                self._report(Path(path), change)

    def _report(self, path: Path, change: watchfiles.Change) -> None:
        """Tell of one change; a file that fails to read (no longer a session, say) is logged,
        and the folder's other files are still watched."""
        try:
            self.on_change(path, change)
        except Exception:
            log.exception("%s changed and could not be read again", path)


def _first_cause(error: BaseException) -> BaseException:
    """The error itself, not the group anyio wraps it in."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


class SessionWatch:
    """The workspace's session directories, watched, and which session files are in them."""

    def __init__(self, on_file: Callable[[Path], None], on_listing: Callable[[], None],
                 stop_later: Callable[[Coroutine[Any, Any, None], str], object]) -> None:
        self.on_file, self.on_listing, self.stop_later = on_file, on_listing, stop_later
        self.watchers: dict[Path, DirectoryWatcher] = {}
        self.known: set[Path] = set()  # the session files that exist, as last seen

    def follow(self, directories: list[Path]) -> None:
        """Watch exactly `directories` from now on."""
        wanted = set(directories)
        for directory in list(self.watchers):
            if directory not in wanted:
                self.stop_later(self.watchers.pop(directory).stop(), f"stop watching {directory}")
        for directory in wanted - set(self.watchers):
            watcher = DirectoryWatcher(directory, self.changed)
            self.watchers[directory] = watcher
            watcher.start()

    def changed(self, path: Path, _change: object) -> None:
        exists = path.is_file()
        if exists != (path in self.known):
            (self.known.add if exists else self.known.discard)(path)
            self.on_listing()
        self.on_file(path)

    def created(self, path: Path) -> None:
        """A session file the server itself made; the listing has changed."""
        self.known.add(path)
        self.on_listing()

    async def stop(self) -> None:
        for watcher in self.watchers.values():
            await watcher.stop()
        self.watchers.clear()
