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
import shutil
import signal
import sys
from pathlib import Path

from pi_lsp.agent import subreaper
from pi_lsp.finish import finish

WATCHER = subreaper.__file__
KILL_WAIT_S = 10.0  # the watcher kills at once; this only bounds a watcher that hangs


def shell_path() -> str:
    """The shell commands run in, chosen as pi 1.6's getShellConfig chooses on Unix: /bin/bash,
    else bash on PATH, else sh."""
    if os.path.exists("/bin/bash"):
        return "/bin/bash"
    return shutil.which("bash") or "sh"


class ShellProcess:
    """One running command and its output (stdout and stderr together); `close()` kills what
    is left of it and drops both pipes."""

    def __init__(self, process: asyncio.subprocess.Process, output: asyncio.StreamReader,
                 pipe: asyncio.ReadTransport, watch: int) -> None:
        self.process = process
        self.output = output
        self._pipe = pipe
        self._watch = watch

    @classmethod
    async def start(cls, command: str, cwd: Path, env: dict[str, str] | None = None
                    ) -> ShellProcess:
        """Start `command` in `env` (None: this process's); a cancel meanwhile lets the start
        end, then kills what it started.

        The output pipe is ours, not asyncio's: a process's `wait()` also waits for the pipes
        asyncio made to reach their end, which never comes once nobody reads a full one.
        """
        output = asyncio.StreamReader()
        out_read, out_write = os.pipe()
        read_end, write_end = os.pipe()  # not inherited: only this process holds the write end
        pipe: asyncio.ReadTransport | None = None
        given_up: ShellProcess | None = None

        async def give_up(started: asyncio.subprocess.Process) -> None:
            nonlocal given_up
            assert pipe is not None
            given_up = cls(started, output, pipe, write_end)
            await given_up.close()

        try:
            # A cancel here closes what it opened (out_read included).
            pipe, _ = await asyncio.get_running_loop().connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(output), os.fdopen(out_read, "rb", 0))
            process = await finish(asyncio.ensure_future(asyncio.create_subprocess_exec(
                sys.executable, "-I", "-S", WATCHER, shell_path(), command, cwd=cwd, env=env,
                stdin=read_end, stdout=out_write, stderr=out_write, start_new_session=True)),
                give_up)
        except BaseException:
            if given_up is None:  # else its close() has released both already
                os.close(write_end)
                if pipe is not None:
                    pipe.close()
            raise
        finally:
            os.close(read_end)
            os.close(out_write)
        return cls(process, output, pipe, write_end)

    async def close(self) -> None:
        """After the command ended or was given up on: nothing of it keeps running."""
        if self._watch >= 0:  # closed, it tells the watcher to kill all the command started
            os.close(self._watch)
            self._watch = -1
        await _stop(self.process)
        self._pipe.close()


async def _stop(process: asyncio.subprocess.Process) -> None:
    """Wait for the watcher to end; kill its group if it does not."""
    if process.returncode is not None:
        return
    ended = asyncio.ensure_future(process.wait())
    await finish(asyncio.ensure_future(asyncio.wait([ended], timeout=KILL_WAIT_S)))
    if not ended.done():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        await finish(ended)
