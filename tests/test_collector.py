"""The cyclic collector's pause taken by several threads at once."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from pi_lsp.session.collector import collector_paused
from tests.waits import CEILING_S


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    """A failure here leaves the rest of the run collecting all the same."""
    gc.enable()
    yield
    gc.enable()


def paused_until(entered: threading.Event, leave: threading.Event, name: str
                 ) -> threading.Thread:
    """A thread holding a pause (a fold) from `entered` until `leave` is set."""
    def fold() -> None:
        with collector_paused():
            entered.set()
            leave.wait(CEILING_S)
    thread = threading.Thread(target=fold, name=name)
    thread.start()
    return thread


def test_a_pause_ending_as_another_thread_begins_its_own_leaves_the_collector_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A large view is folded in a worker thread while the loop folds small ones, each under
    the pause. Each looked whether the collector was on, then turned it off: a pause ending
    between another's look and turn-off left it off for good (4 of 300 worker folds beside a
    loop folding, /tmp/review15-work/gc_race_realistic.py). Here the worker's pause ends just
    as the loop's begins."""
    worker_in, worker_leave = threading.Event(), threading.Event()
    loop_reached, loop_go, loop_leave = threading.Event(), threading.Event(), threading.Event()
    isenabled = gc.isenabled

    def looked() -> bool:
        found = isenabled()
        if threading.current_thread().name == "loop":  # between its look and its turn-off
            loop_reached.set()
            loop_go.wait(CEILING_S)
        return found
    monkeypatch.setattr(gc, "isenabled", looked)

    worker = paused_until(worker_in, worker_leave, "worker")
    assert worker_in.wait(CEILING_S)
    loop = paused_until(loop_reached, loop_leave, "loop")  # reached: looked, or in its pause
    assert loop_reached.wait(CEILING_S)
    worker_leave.set()
    worker.join(CEILING_S)
    loop_go.set()
    loop_leave.set()
    loop.join(CEILING_S)
    assert isenabled()


def test_the_collector_stays_paused_until_the_last_of_two_builds_ends() -> None:
    """Two builds in two threads: the first to end turned the collector on under the second,
    still building, which then ran with it on; it comes back on only when both have ended."""
    first, second = collector_paused(), collector_paused()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    try:
        assert not gc.isenabled()
    finally:
        second.__exit__(None, None, None)
    assert gc.isenabled()
