"""Shell commands that cannot outlive the process that started them.

A command runs under a small watcher (`subreaper.py`) in its own process group, whose stdin is a
socket only this process holds the other end of. When this process ends in any way, a SIGKILL
included, or gives up on the command (abort, timeout), the socket closes and the watcher kills
everything the command started: on Linux even what left the group with `setsid`, elsewhere the
group. A command that ended normally is released instead: what it left running in the
background runs on, as pi 1.6 leaves it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pi_lsp.agent import subreaper
from pi_lsp.environment import on_path
from pi_lsp.finish import finish

WATCHER = subreaper.__file__
KILL_WAIT_S = 10.0  # the watcher kills at once; this only bounds a watcher that hangs
# pi 1.6's EXIT_STDIO_GRACE_MS: once the shell has exited, output that stays quiet this long
# ends the command, though a background job still holds the pipe (`npm run dev &`).
EXIT_GRACE_S = 0.1
CHUNK = 65536


def shell_path() -> str:
    """The shell commands run in, chosen as pi 1.6's getShellConfig chooses on Unix: /bin/bash,
    else bash on PATH, else sh; never a repository's own `./bash` or `./sh` (a relative PATH
    entry, searched in the workspace the command runs in)."""
    if os.path.exists("/bin/bash"):
        return "/bin/bash"
    return on_path("bash") or "/bin/sh"


class WatcherDied(OSError):
    """The watcher ended before it reported the shell's exit: what became of the command is
    unknown (its process group has been killed)."""


class OutputPipe(asyncio.StreamReaderProtocol):
    """The output pipe's protocol, which notes when output last came."""

    def __init__(self) -> None:
        self.reader = asyncio.StreamReader()
        super().__init__(self.reader)
        self.last_data = time.monotonic()

    def data_received(self, data: bytes) -> None:
        self.last_data = time.monotonic()
        super().data_received(data)


class ShellProcess:
    """One running command and its output (stdout and stderr together); `close()` kills what
    is left of it, or lets its background jobs run on, and drops both pipes."""

    def __init__(self, process: asyncio.subprocess.Process, output: OutputPipe,
                 pipe: asyncio.ReadTransport, control: socket.socket) -> None:
        self.process = process
        self.output = output.reader
        self._arrivals = output
        self._pipe = pipe
        self._control = control
        self._reports = b""  # what the watcher wrote that is not yet a whole line
        self._started = time.monotonic()
        self._exited_at = 0.0  # when the shell's exit was reported
        self.status: int | None = None  # the shell's exit status, once it has exited
        self.exited_after: float | None = None  # seconds from the start to the shell's exit

    @classmethod
    async def start(cls, command: str, cwd: Path, env: dict[str, str] | None = None
                    ) -> ShellProcess:
        """Start `command` in `env` (None: this process's); a cancel meanwhile lets the start
        end, then kills what it started.

        The output pipe is ours, not asyncio's: a process's `wait()` also waits for the pipes
        asyncio made to reach their end, which never comes once nobody reads a full one.
        """
        output = OutputPipe()
        out_read, out_write = os.pipe()
        ours, theirs = socket.socketpair()  # not inherited: only this process holds `ours`
        ours.setblocking(False)
        pipe: asyncio.ReadTransport | None = None
        given_up: ShellProcess | None = None

        async def give_up(started: asyncio.subprocess.Process) -> None:
            nonlocal given_up
            assert pipe is not None
            given_up = cls(started, output, pipe, ours)
            await given_up.close()

        try:
            # A cancel here closes what it opened (out_read included).
            pipe, _ = await asyncio.get_running_loop().connect_read_pipe(
                lambda: output, os.fdopen(out_read, "rb", 0))
            process = await finish(asyncio.ensure_future(asyncio.create_subprocess_exec(
                sys.executable, "-I", "-S", WATCHER, shell_path(), command, cwd=cwd, env=env,
                stdin=theirs.fileno(), stdout=out_write, stderr=out_write, start_new_session=True)),
                give_up)
        except BaseException:
            if given_up is None:  # else its close() has released both already
                ours.close()
                if pipe is not None:
                    pipe.close()
            raise
        finally:
            theirs.close()
            os.close(out_write)
        return cls(process, output, pipe, ours)

    async def read_until_done(self, on_output: Callable[[bytes], None]) -> int:
        """Hand on the output until the shell has exited and the output has ended or stayed
        quiet for EXIT_GRACE_S (pi 1.6's waitForChildProcess); the shell's exit status."""
        exited = asyncio.ensure_future(self._exit_status())
        reading: asyncio.Future[bytes] | None = None
        try:
            while True:
                reading = reading or asyncio.ensure_future(self.output.read(CHUNK))
                waiting: list[asyncio.Future[Any]] = [reading] if exited.done() else \
                    [reading, exited]
                await asyncio.wait(waiting, timeout=self._quiet_left(exited),
                                   return_when=asyncio.FIRST_COMPLETED)
                if reading.done():
                    chunk = reading.result()
                    reading = None
                    if not chunk:
                        return await exited
                    on_output(chunk)
                elif exited.done() and self._quiet_left(exited) == 0:
                    return exited.result()
        finally:
            exited.cancel()
            if reading is not None:
                reading.cancel()

    def _quiet_left(self, exited: asyncio.Future[int]) -> float | None:
        """How much longer the output must stay quiet for the command to have ended; None while
        the shell runs. Counted from when output came, not from when it was read: a busy loop
        that reads late has not seen the output go quiet."""
        if not exited.done():
            return None
        quiet_since = max(self._exited_at, self._arrivals.last_data)
        return max(quiet_since + EXIT_GRACE_S - time.monotonic(), 0.0)

    async def _exit_status(self) -> int:
        """The status the watcher reports when the shell exits; WatcherDied when the watcher
        ends first (the OOM killer, `kill -9 $PPID`)."""
        group = await self._report()
        line = await self._report()
        if not line.isdigit():
            raise await self._watcher_died(group)
        status = int(line)
        self._exited_at = time.monotonic()
        self.status, self.exited_after = status, self._exited_at - self._started
        return status

    async def _report(self) -> bytes:
        """The watcher's next line, b"" once it has ended."""
        while b"\n" not in self._reports:
            data = await asyncio.get_running_loop().sock_recv(self._control, 64)
            if not data:
                return b""
            self._reports += data
        line, _, self._reports = self._reports.partition(b"\n")
        return line

    async def _watcher_died(self, group: bytes) -> WatcherDied:
        """Kill the command's process group, which nothing watches any more (what left it with
        `setsid` is out of reach), and say what happened."""
        if group.isdigit():
            # Still the command's group, not another that took its number: the watcher held the
            # shell's pid (running, or unreaped until the verdict) until it died just now, the
            # group's other processes hold the number while any of them lives, and a number
            # freed just now is not handed out again at once (pids are given in turn).
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(int(group), signal.SIGKILL)
        code = await self.process.wait()
        # What the command printed before is read on until the pipe ends or goes quiet, as
        # after an exit: it may still be in the pipe.
        self._exited_at = time.monotonic()
        how = f"was killed by {_signal_name(-code)}" if code < 0 else f"ended with code {code}"
        return WatcherDied(f"the command's watcher {how} before the command ended, so what "
                           "became of the command is unknown; what was left of its process "
                           "group has been killed")

    async def close(self, release: bool = False) -> None:
        """After the command ended (`release`: what it left in the background runs on) or was
        given up on (all it started is killed): nothing else of it keeps running."""
        if self._control.fileno() >= 0:
            if release:
                with contextlib.suppress(OSError):  # the watcher ended meanwhile
                    self._control.send(subreaper.RELEASE)
            self._control.close()  # closed unreleased, it tells the watcher to kill
        await _stop(self.process)
        self._pipe.close()  # a background job that still writes gets EPIPE, as in pi


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:  # a real-time signal
        return f"signal {number}"


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
