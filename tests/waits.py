"""Waiting in tests: on the thing itself, with one ceiling that only a real hang reaches.

A busy 2-core machine (other test suites beside this one) makes anything slow by seconds, so no
wait may stand for a guess of how long something takes; pytest-timeout's per-test limit
(pyproject.toml) is above this ceiling, so a hang fails here with a message first.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

CEILING_S = 60.0
# A whole process: Python's start and imports took over 60 s at a load average of 15.
PROCESS_CEILING_S = 240.0
POLL_S = 0.02  # for conditions nothing announces (a file appearing, a process gone)


async def until(condition: Callable[[], object], what: str, ceiling: float = CEILING_S
                ) -> None:
    """Return once `condition()` is true; fail naming `what` after the ceiling."""
    deadline = time.monotonic() + ceiling
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {ceiling:.0f} s waiting for {what}")
        await asyncio.sleep(POLL_S)


def needing_the_loop(work: Callable[..., Any], loop: asyncio.AbstractEventLoop
                     ) -> Callable[..., Any]:
    """`work`, going on only once `loop` has run a callback meanwhile: called on the loop
    itself, it waits for itself and fails at the ceiling, naming `work`."""
    def waiting(*args: Any, **kwargs: Any) -> Any:
        ran = threading.Event()
        loop.call_soon_threadsafe(ran.set)
        assert ran.wait(CEILING_S), f"the event loop stood still while {work.__name__} ran"
        return work(*args, **kwargs)
    return waiting


def until_sync(condition: Callable[[], object], what: str, ceiling: float = CEILING_S) -> None:
    """`until` for tests without an event loop."""
    deadline = time.monotonic() + ceiling
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {ceiling:.0f} s waiting for {what}")
        time.sleep(POLL_S)


def alive(pid: int) -> bool:
    """Running, not a zombie (a killed orphan may wait for a reaper that never comes)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def pid_in(path: Path) -> int:
    """The pid a command wrote to `path`, once it has (the command is running then)."""
    await until(lambda: path.exists() and path.read_text().strip().isdigit(),
                f"a pid in {path}")
    return int(path.read_text())


async def gone(pid: int, what: str) -> None:
    """Wait for `pid` to end; one that outlives the ceiling is killed and fails the test."""
    try:
        await until(lambda: not alive(pid), f"{what} (pid {pid}) to end")
    except AssertionError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        raise


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
            text: bool = True) -> subprocess.CompletedProcess[Any]:
    """`pi-lsp ARGS` run to its end, its output captured."""
    return subprocess.run([sys.executable, "-m", "pi_lsp.cli", *args], capture_output=True,
                          text=text, cwd=cwd, env=env, timeout=PROCESS_CEILING_S)


@contextlib.contextmanager
def reaped(process: subprocess.Popen[bytes]) -> Iterator[subprocess.Popen[bytes]]:
    """`process`, killed and waited for at the end if the test left it running."""
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
