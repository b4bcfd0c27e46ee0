"""Work that must run to its end once started: child processes, and the tasks that wait on them.

A cancel that lands inside `asyncio.create_subprocess_exec` (Python 3.11) leaves the process's
transport waiting for pipes that never connect, and whoever awaits it waits forever. So a child
process is never cancelled while it is being created: its creator is let finish, then what it
started is stopped (or let end) and waited for, and only then is the cancel raised.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


async def finish(task: asyncio.Future[T],
                 undo: Callable[[T], Awaitable[object]] | None = None) -> T:
    """The result of `task`, awaited to its end even when the caller is cancelled meanwhile.

    The cancel is raised once the task has ended, after `undo` (if given) was run on its result.
    """
    cancelled = False
    while not task.done():
        try:
            await asyncio.wait([task])  # unlike awaiting the task, never cancels it
        except asyncio.CancelledError:
            cancelled = True
    if not cancelled:
        return task.result()
    if undo is not None and not task.cancelled() and task.exception() is None:
        await finish(asyncio.ensure_future(undo(task.result())))
    raise asyncio.CancelledError


async def run_to_end(command: Sequence[str], stdin: bytes | None = None, **options: Any
                     ) -> tuple[int, bytes, bytes]:
    """Run a short command and collect its exit status, stdout and stderr; a cancel waits for
    it to end (a git command cut short would leave its index lock behind)."""
    async def run() -> tuple[int, bytes, bytes]:
        process = await asyncio.create_subprocess_exec(
            *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, **options)
        out, err = await process.communicate(stdin)
        return await process.wait(), out, err
    return await finish(asyncio.ensure_future(run()))
