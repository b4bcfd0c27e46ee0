"""Giving freed memory back to the system: glibc keeps the heap a large answer grew to (a
whole preview at 100k entries peaks at 650 MB) long after the answer is freed."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from functools import cache

LARGE_ANSWER = 4 << 20  # bytes: smaller answers leave too little behind to be worth a trim


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's `malloc_trim`, found once."""
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):  # TypeError: Windows takes no None
        return None  # not glibc (macOS, musl, Windows): their allocators give memory back


def give_back() -> None:
    """Return the heap's free pages to the system."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
