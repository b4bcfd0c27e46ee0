"""Pausing the cyclic garbage collector while a session's many acyclic objects are made."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off: an object per entry (100k) would set it off again and
    again to walk objects that hold no cycle, holding every thread (the event loop too)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
