"""What two sequences share at their ends: the one measure behind the tree view's patches, the
edit diff past its work budget and the smallest edit sent to an editor's buffer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

# Items compared at once, in C, before one at a time: a 10 MB buffer compared a character at
# a time took 1 s on the event loop.
BLOCK = 1 << 14


def shared_ends(old: Sequence[T], new: Sequence[T]) -> tuple[int, int]:
    """How many items `old` and `new` share at their start, then at their end (not
    overlapping the start)."""
    head = shared_head(old, new)
    return head, shared_tail(old, new, min(len(old), len(new)) - head)


def shared_head(old: Sequence[T], new: Sequence[T]) -> int:
    """How many items `old` and `new` share at their start."""
    limit = min(len(old), len(new))
    head = 0
    while head + BLOCK <= limit and old[head:head + BLOCK] == new[head:head + BLOCK]:
        head += BLOCK
    while head < limit and old[head] == new[head]:
        head += 1
    return head


def shared_tail(old: Sequence[T], new: Sequence[T], most: int) -> int:
    """How many items, `most` at most, `old` and `new` share at their end."""
    tail = 0
    while tail + BLOCK <= most and old[len(old) - tail - BLOCK:len(old) - tail] == \
            new[len(new) - tail - BLOCK:len(new) - tail]:
        tail += BLOCK
    while tail < most and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    return tail
