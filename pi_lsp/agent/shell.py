"""Shell commands that cannot outlive the process that started them.

A command runs under a small watcher (`subreaper.py`) in its own process group, whose stdin is a
pipe only this process can write to. When this process ends in any way, a SIGKILL included, or
gives up on the command (abort, timeout), the pipe closes and the watcher kills everything the
command started: on Linux even what left the group with `setsid`, elsewhere the group.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

from pi_lsp.agent import subreaper

WATCHER = subreaper.__file__
KILL_WAIT_S = 10.0  # the watcher kills at once; this only bounds a watcher that hangs


class ShellProcess:
    """One running command; `close()` kills what is left of it and drops the pipe."""

    def __init__(self, process: asyncio.subprocess.Process, watch: int) -> None:
        self.process = process
        self._watch = watch

    @classmethod
    async def start(cls, command: str, cwd: Path) -> ShellProcess:
        read_end, write_end = os.pipe()  # not inherited: only this process holds the write end
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-I", "-S", WATCHER, command, cwd=cwd, stdin=read_end,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                start_new_session=True)
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        return cls(process, write_end)

    def kill(self) -> None:
        """Tell the watcher to kill the command and all it started (it closes the pipe)."""
        if self._watch >= 0:
            os.close(self._watch)
            self._watch = -1

    async def close(self) -> None:
        """After the command ended or was given up on: nothing of it keeps running."""
        running = self.process.returncode is None
        self.kill()
        if running:
            with contextlib.suppress(Exception):
                await asyncio.shield(asyncio.wait_for(self.process.wait(), KILL_WAIT_S))
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)  # a watcher that did not
