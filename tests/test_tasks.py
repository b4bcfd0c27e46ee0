"""The server's background tasks at shutdown."""

from __future__ import annotations

import asyncio
from typing import Any

from pi_lsp.server.tasks import Tasks


async def test_a_task_started_as_another_ends_is_awaited_at_shutdown() -> None:
    """Shutdown (`finish`) awaited only the tasks running as it began: a large view's build
    ending in the grace starts a read of its file, replaced meanwhile (a checkout), which was
    left running after "no task is left running" (/tmp/review15-work/finish_leaves_reader.py).
    Here the first task starts one that never ends: it is cancelled after the grace and
    awaited, whether the first ended in the grace or was cancelled itself."""
    tasks = Tasks()
    building, first_may_end, gave_up = asyncio.Event(), asyncio.Event(), asyncio.Event()
    started: list[asyncio.Task[Any]] = []

    async def build() -> None:
        building.set()
        try:
            await first_may_end.wait()
        finally:  # as the build's end looks at the file: a read begins
            started.append(tasks.start(asyncio.Event().wait(), "read again"))

    tasks.start(build(), "draw")
    await building.wait()
    finishing = asyncio.ensure_future(tasks.finish(0.05, gave_up.set))
    await asyncio.sleep(0)  # one loop turn: shutdown runs up to its wait
    first_may_end.set()
    await finishing
    assert [task.done() for task in started] == [True] and gave_up.is_set()
