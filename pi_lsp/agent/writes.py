"""Writes that wait for a save point: while a session runs, changes that do not come from the
agent loop are queued and written at a turn's end, in the order they were asked for."""

from __future__ import annotations

from collections.abc import Callable


class PendingWrites:
    def __init__(self) -> None:
        self._pending: list[Callable[[], object]] = []

    def __bool__(self) -> bool:
        return bool(self._pending)

    def write(self, busy: bool, action: Callable[[], object]) -> None:
        """Now when idle, else at the next save point."""
        if busy:
            self._pending.append(action)
        else:
            action()

    def flush(self) -> bool:
        """Write what is queued; whether anything was."""
        flushed = False
        while self._pending:
            self._pending.pop(0)()
            flushed = True
        return flushed
