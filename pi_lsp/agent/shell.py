"""Shell commands in their own process group that cannot outlive the process that started them.

The command runs under a small `sh` wrapper whose stdin is a pipe only this process can write
to. A watcher in the wrapper's group waits on that pipe; when this process ends in any way, a
SIGKILL included, the kernel closes the pipe and the watcher kills the whole group. Aborts and
timeouts kill the group directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

from pi_lsp.finish import finish

# $1 is the command. fd 3 keeps the watch pipe for the watcher alone; the command reads
# /dev/null, as before. `kill -KILL 0` is the wrapper's whole process group.
WRAPPER = """
exec 3<&0 </dev/null
( read -r _ <&3; kill -KILL 0 ) >/dev/null 2>&1 &
watcher=$!
exec 3<&-
sh -c "$1" &
wait $!
status=$?
kill $watcher 2>/dev/null
exit $status
"""


class ShellProcess:
    """One running command and its output (stdout and stderr together); `close()` kills what
    is left of its group and drops both pipes."""

    def __init__(self, process: asyncio.subprocess.Process, output: asyncio.StreamReader,
                 pipe: asyncio.ReadTransport, watch: int) -> None:
        self.process = process
        self.output = output
        self._pipe = pipe
        self._watch = watch

    @classmethod
    async def start(cls, command: str, cwd: Path) -> ShellProcess:
        """Start `command`; a cancel meanwhile lets the start end, then kills what it started.

        The output pipe is ours, not asyncio's: a process's `wait()` also waits for the pipes
        asyncio made to reach their end, which never comes once nobody reads a full one.
        """
        output = asyncio.StreamReader()
        out_read, out_write = os.pipe()
        read_end, write_end = os.pipe()  # not inherited: only this process holds the write end
        pipe: asyncio.ReadTransport | None = None
        try:
            # A cancel here closes what it opened (out_read included).
            pipe, _ = await asyncio.get_running_loop().connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(output), os.fdopen(out_read, "rb", 0))
            process = await finish(asyncio.ensure_future(asyncio.create_subprocess_exec(
                "/bin/sh", "-c", WRAPPER, "pi-bash", command, cwd=cwd, stdin=read_end,
                stdout=out_write, stderr=out_write, start_new_session=True)), _stop)
        except BaseException:
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
        await _stop(self.process)
        self._pipe.close()
        if self._watch >= 0:
            os.close(self._watch)
            self._watch = -1


async def _stop(process: asyncio.subprocess.Process) -> None:
    """Kill the process's group, if it is still running, and wait for it."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        await finish(asyncio.ensure_future(process.wait()))
