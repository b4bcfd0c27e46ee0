"""Watching session directories with watchfiles, feeding each change to a callback."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import watchfiles

from pi_lsp.session.catalog import file_key
from pi_lsp.throttle import Throttled

log = logging.getLogger(__name__)

DEBOUNCE_MS = 200
STEP_MS = 20
POLL_MS = 100
MISSING_DIR_POLL_S = 0.5
RESTART_PAUSE_S = 0.5  # between a watch watchfiles ended and the next
# The editors list every session again at each pi/sessionsChanged: a session another program
# appends to ten times a second is announced at most once a second.
LISTING_NOTICE_S = 1.0

# A batch of changed files; True when they are the files there as watching began.
Changed = Callable[[list[Path], bool], None]


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
        # Files there when watching begins are no change; those found once a missing folder
        # appears, or when a watch begins again (changed in between, maybe), are.
        initial = self.directory.is_dir()
        while not self._stop.is_set():
            if not await self._wait_for_directory():
                return
            self._report(sorted(self.directory.glob("*.jsonl")), initial)
            initial = False
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
            self._report(sorted({Path(path) for _change, path in changes}), False)

    def _report(self, paths: list[Path], initial: bool) -> None:
        """Tell of one batch; an error is logged, and the folder is still watched."""
        try:
            self.on_change(paths, initial)
        except Exception:
            log.exception("changes in %s could not be taken in", self.directory)


def _first_cause(error: BaseException) -> BaseException:
    """The error itself, not the group anyio wraps it in."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


class SessionWatch:
    """The workspace's session directories, watched, and their session files as last seen."""

    def __init__(self, on_file: Callable[[Path], None], on_listing: Callable[[], None],
                 stop_later: Callable[[Coroutine[Any, Any, None], str], object],
                 notice_interval: float = LISTING_NOTICE_S) -> None:
        self.on_file, self.stop_later = on_file, stop_later
        self.on_listing = Throttled(on_listing, notice_interval)
        self.watchers: dict[Path, DirectoryWatcher] = {}
        self.known: dict[Path, tuple[int, int, int]] = {}  # file_key

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

    def changed(self, paths: list[Path], initial: bool) -> None:
        """Take in a batch: a file that came, went or changed (an append by the pi CLI to a
        session no editor holds, say) changes the listing, told once for the whole batch."""
        listing_changed = False
        for path in paths:
            listing_changed |= self._seen(path)
            self._take(path)
        if listing_changed and not initial:
            self.on_listing()

    def created(self, path: Path) -> None:
        """A session file the server itself made; the listing has changed."""
        self._seen(path)
        self.on_listing()

    async def stop(self) -> None:
        self.on_listing.cancel()
        for watcher in self.watchers.values():
            await watcher.stop()
        self.watchers.clear()

    def _seen(self, path: Path) -> bool:
        """Note the file as it is now; whether it came, went or changed since last seen."""
        key = _file_key(path)
        if key == self.known.get(path):
            return False
        if key is None:
            del self.known[path]
        else:
            self.known[path] = key
        return True

    def _take(self, path: Path) -> None:
        """Tell of one file; one that fails to read (no longer a session, say) is logged,
        and the batch's other files are still taken in."""
        try:
            self.on_file(path)
        except Exception:
            log.exception("%s changed and could not be read again", path)


def _file_key(path: Path) -> tuple[int, int, int] | None:
    """The file's size, mtime and inode (the same for a file unchanged); None for no file."""
    try:
        return file_key(path) if path.is_file() else None
    except OSError:  # gone since
        return None
