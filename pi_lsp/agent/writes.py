"""Writes that wait for a save point: while a session runs, changes that do not come from the
agent loop are queued and written at a turn's end, in the order they were asked for."""

from __future__ import annotations

from collections.abc import Callable


class PendingWrites:
    def __init__(self) -> None:
        self._pending: list[tuple[str, Callable[[], object]]] = []

    def __bool__(self) -> bool:
        return bool(self._pending)

    def write(self, busy: bool, kind: str, action: Callable[[], object]) -> None:
        """Now when idle, else at the next save point."""
        if busy:
            self._pending.append((kind, action))
        else:
            action()

    def flush(self, stop_at_leaf_move: bool) -> bool:
        """Write what is queued; whether anything was.

        At a turn end a leaf move (and all that came after it) waits for the run to end,
        so the running loop's next message still hangs where the loop expects.
        """
        flushed = False
        while self._pending:
            kind, action = self._pending[0]
            if stop_at_leaf_move and kind == "leaf":
                break
            self._pending.pop(0)
            action()
            flushed = True
        return flushed
