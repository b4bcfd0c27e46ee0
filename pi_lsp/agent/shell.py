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
    """One running command; `close()` kills what is left of its group and drops the pipe."""

    def __init__(self, process: asyncio.subprocess.Process, watch: int) -> None:
        self.process = process
        self._watch = watch

    @classmethod
    async def start(cls, command: str, cwd: Path) -> ShellProcess:
        """Start `command`; a cancel meanwhile lets the start end, then kills what it started."""
        read_end, write_end = os.pipe()  # not inherited: only this process holds the write end
        try:
            process = await finish(asyncio.ensure_future(asyncio.create_subprocess_exec(
                "/bin/sh", "-c", WRAPPER, "pi-bash", command, cwd=cwd, stdin=read_end,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                start_new_session=True)), lambda started: cls(started, -1).close())
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        return cls(process, write_end)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)

    async def close(self) -> None:
        """After the command ended or was given up on: nothing of it keeps running."""
        if self.process.returncode is None:
            self.kill()
            await finish(asyncio.ensure_future(self.process.wait()))
        if self._watch >= 0:
            os.close(self._watch)
            self._watch = -1
