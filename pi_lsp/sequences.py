"""What two sequences share at their ends: the one measure behind the tree view's patches and
the edit diff past its work budget."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def shared_ends(old: Sequence[T], new: Sequence[T]) -> tuple[int, int]:
    """How many items `old` and `new` share at their start, then at their end (not
    overlapping the start)."""
    limit = min(len(old), len(new))
    head = 0
    while head < limit and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < limit - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    return head, tail
