"""Work in a worker thread that an abort stops: the work polls `checkpoint` between its steps
(an edit's replacements), which raises once the call that waited for it was cancelled. A
thread cannot be killed, and an aborted plan of 100,000 edits ran on ~11 s, holding up the
server's exit and the next turn."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import TypeVar

Worked = TypeVar("Worked")

# Set in the worker thread only (asyncio.to_thread runs it in a copy of the caller's context):
# the same work run on the loop is never stopped halfway.
_STOP: ContextVar[threading.Event | None] = ContextVar("stop", default=None)


class Stopped(Exception):
    """Work whose caller is gone (an abort): nobody reads what it would have made."""


def checkpoint() -> None:
    """Raise Stopped when the work running here was stopped; nothing on the loop."""
    stop = _STOP.get()
    if stop is not None and stop.is_set():
        raise Stopped


async def in_worker(work: Callable[[], Worked]) -> Worked:
    """`work` in a worker thread, stopped at its next checkpoint once the caller is cancelled."""
    stop = threading.Event()

    def run() -> Worked:
        _STOP.set(stop)
        return work()
    try:
        return await asyncio.to_thread(run)
    finally:
        stop.set()
