"""Pausing the cyclic garbage collector while a session's many acyclic objects are made."""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_pauses = 0  # how many threads are inside collector_paused now
_was_on = False  # whether the collector was on when the first of them came in


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off: an object per entry (100k) would set it off again and
    again to walk objects that hold no cycle, holding every thread (the event loop too)."""
    global _pauses, _was_on
    with _lock:  # counted: one thread ending must not turn it on under another still building
        if _pauses == 0:
            _was_on = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _lock:
            _pauses -= 1
            if _pauses == 0 and _was_on:
                gc.enable()
