"""Work that must run to its end once started: child processes, and the tasks that wait on them.

A cancel that lands inside `asyncio.create_subprocess_exec` (Python 3.11) leaves the process's
transport waiting for pipes that never connect, and whoever awaits it waits forever. So a child
process is never cancelled while it is being created: its creator is let finish, then what it
started is stopped (or let end) and waited for, and only then is the cancel raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
STUCK_POLL_S = 0.1  # how often a running command is looked at: only how soon a stuck one stops


class Stuck(Exception):
    """The command was stopped: it waited for something that never comes."""


class Overran(Exception):
    """The command was stopped: it ran past the time it was given."""


async def finish(task: asyncio.Future[T],
                 undo: Callable[[T], Awaitable[object]] | None = None, *,
                 pass_on: bool = False) -> T:
    """The result of `task`, awaited to its end even when the caller is cancelled meanwhile.

    The cancel is raised once the task has ended, after `undo` (if given) was run on its result;
    with `pass_on` the task is cancelled too.
    """
    cancelled = False
    while not task.done():
        try:
            await asyncio.wait([task])  # unlike awaiting the task, never cancels it
        except asyncio.CancelledError:
            cancelled = True
            if pass_on:
                task.cancel()
    if not cancelled:
        return task.result()
    if undo is not None and not task.cancelled() and task.exception() is None:
        await finish(asyncio.ensure_future(undo(task.result())))
    raise asyncio.CancelledError


async def run_to_end(command: Sequence[str], stdin: bytes | None = None,
                     stuck: Callable[[int], bool] | None = None, limit: float | None = None,
                     **options: Any) -> tuple[int, bytes, bytes]:
    """Run a short command in a process group of its own and collect its exit status, stdout
    and stderr. A cancel stops the group and is raised once the command has ended; so is Stuck
    when `stuck(pid)`, asked every STUCK_POLL_S while it runs, says it never will, and Overran
    once it has run `limit` seconds."""
    process = await finish(asyncio.ensure_future(asyncio.create_subprocess_exec(
        *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, start_new_session=True, **options)), _stop)
    output = asyncio.ensure_future(process.communicate(stdin))
    poll = None if stuck is None else STUCK_POLL_S
    deadline = None if limit is None else time.monotonic() + limit
    try:
        while not output.done():
            await asyncio.wait([output], timeout=_next_look(poll, deadline))
            if output.done():
                break
            if stuck is not None and stuck(process.pid):
                raise Stuck()
            if deadline is not None and time.monotonic() >= deadline:
                raise Overran()
    except (asyncio.CancelledError, Stuck, Overran):
        _terminate(process)
        await finish(output)
        await finish(asyncio.ensure_future(process.wait()))
        raise
    out, err = output.result()
    return await process.wait(), out, err


def _next_look(poll: float | None, deadline: float | None) -> float | None:
    """How long to wait for a running command before looking at it again (None: till it ends)."""
    if deadline is None:
        return poll
    left = max(0.0, deadline - time.monotonic())
    return left if poll is None else min(poll, left)


async def _stop(process: asyncio.subprocess.Process) -> None:
    """Stop a command started for a caller cancelled meanwhile, and wait for it to end."""
    _terminate(process)
    await process.communicate()


def _terminate(process: asyncio.subprocess.Process) -> None:
    """SIGTERM to the command's process group: git removes its lock files on it, where a
    SIGKILL would leave the store's index lock behind and every later snapshot locked out."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGTERM)
