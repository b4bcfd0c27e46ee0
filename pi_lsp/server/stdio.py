"""The stdio transport (`--tcp` serves its connection through it too): messages framed by
`Content-Length`, read so that no input can stop the server, and an end (stdin closed or the
connection lost, SIGTERM, `exit` without `shutdown`) that finishes like `shutdown`.

pygls' own loop exits on a huge length (it tries to allocate it) and stays deaf after a frame
without its header (every later body is glued to the next header line); this one refuses a
message over the size limit and resynchronises on the next `Content-Length:` header.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import BinaryIO

from pygls.exceptions import JsonRpcException
from pygls.io_ import StdoutWriter
from pygls.server import JsonRPCServer

from pi_lsp.server.memory import LARGE_ANSWER, give_back

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 64 << 20
MAX_LINE_BYTES = 64 << 10  # a header line longer than this is garbage, read in pieces
READ_CHUNK = 1 << 16
QUEUED_MESSAGES = 8  # read ahead at most this many messages of the event loop
# A header at the end of a line, so one glued to the tail of a bad body is still found.
HEADER = re.compile(rb"Content-Length:[ \t]*(\d{1,18})[ \t]*\r?\n\Z", re.IGNORECASE)
OTHER_HEADER = re.compile(rb"[A-Za-z][A-Za-z0-9-]*:[^\r\n]*\r?\n\Z")
CARRY = 40  # bytes of a line piece kept, so a header split across two pieces is found


class FrameReader:
    """Message bodies from a byte stream; bad framing is logged and skipped, never fatal."""

    def __init__(self, read: Callable[[int], bytes]) -> None:
        self._read = read
        self._buffer = bytearray()
        self._eof = False

    def _fill(self) -> bool:
        if self._eof:
            return False
        chunk = self._read(READ_CHUNK)
        if not chunk:
            self._eof = True
            return False
        self._buffer += chunk
        return True

    def _take(self, count: int) -> bytes:
        taken = bytes(self._buffer[:count])
        del self._buffer[:count]
        return taken

    def _line(self) -> bytes | None:
        """The next line with its newline, or a piece of at most MAX_LINE_BYTES; None at EOF."""
        searched = 0
        while True:
            newline = self._buffer.find(b"\n", searched, MAX_LINE_BYTES)
            if newline >= 0:
                return self._take(newline + 1)
            if len(self._buffer) >= MAX_LINE_BYTES:
                return self._take(MAX_LINE_BYTES)
            searched = len(self._buffer)
            if not self._fill():
                return self._take(len(self._buffer)) if self._buffer else None

    def _exactly(self, count: int) -> bytes | None:
        while len(self._buffer) < count:
            if not self._fill():
                return None
        return self._take(count)

    def next_body(self) -> bytes | None:
        """The next message's body, or None when the input has ended."""
        length: int | None = None
        carry = b""
        skipped = 0
        while True:
            line = self._line()
            if line is None:
                if skipped:
                    log.error("input ended after %d bytes that were not a message", skipped)
                return None
            if length is not None and line in (b"\r\n", b"\n"):
                if length > MAX_MESSAGE_BYTES:
                    log.error("a message of %d bytes is over the %d byte limit; it is skipped "
                              "up to the next header", length, MAX_MESSAGE_BYTES)
                    length = None
                    continue
                if skipped:
                    log.error("skipped %d bytes that were not a message", skipped)
                return self._exactly(length)
            match = HEADER.search(carry + line)
            if match is not None:
                skipped += max(0, len(line) - len(match.group(0)))
                length = int(match.group(1))
            elif length is not None and OTHER_HEADER.match(line):
                pass  # Content-Type and the like
            else:
                skipped += len(line)
                length = None
            carry = b"" if line.endswith(b"\n") else line[-CARRY:]


def _pump(reader: FrameReader, loop: asyncio.AbstractEventLoop,
          queue: asyncio.Queue[bytes | None], room: threading.Semaphore) -> None:
    """The reading thread: blocking reads, bodies handed to the event loop, at most a few
    ahead of it. A daemon thread, so a read that never returns cannot hold up the exit."""
    try:
        while True:
            room.acquire()
            body = reader.next_body()
            loop.call_soon_threadsafe(queue.put_nowait, body)
            if body is None:
                return
    except RuntimeError:
        return  # the event loop is closed: the server has ended
    except ConnectionError:  # a TCP client gone: its input has ended
        log.error("the connection to the client is lost; shutting down")
        loop.call_soon_threadsafe(queue.put_nowait, None)
    except Exception:
        log.exception("reading stdin failed")
        loop.call_soon_threadsafe(queue.put_nowait, None)


async def serve(server: JsonRPCServer, receive: Callable[[bytes], None], stdin: BinaryIO,
                stdout: BinaryIO, on_end: Callable[[], Awaitable[None]]) -> int | None:
    """Hand each message's body to `receive` until stdin ends, SIGTERM or `exit` arrives or
    the server shuts down; then run `on_end` (abort and save running work, or wait for
    `shutdown`'s). `exit`'s process exit code, if it came."""
    loop = asyncio.get_running_loop()
    server.protocol.set_writer(Writer(stdout, loop))
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()
    room = threading.Semaphore(QUEUED_MESSAGES)
    fd = stdin.fileno()
    reader = FrameReader(lambda count: os.read(fd, count))
    threading.Thread(target=_pump, args=(reader, loop, queue, room), daemon=True,
                     name="pi-lsp-stdin").start()

    def terminate() -> None:
        loop.remove_signal_handler(signal.SIGTERM)  # a second SIGTERM ends the process at once
        queue.put_nowait(None)

    loop.add_signal_handler(signal.SIGTERM, terminate)
    stopped = server._stop_event
    code: int | None = None
    while stopped is None or not stopped.is_set():
        try:
            body = await queue.get()
        except asyncio.CancelledError:
            # Ctrl-C: asyncio.run cancels this task, and raises KeyboardInterrupt once it ends
            # so; the running turns are saved first, as at SIGTERM.
            await on_end()
            raise
        room.release()
        if body is None:
            break
        try:
            receive(body)
        except SystemExit as end:  # `exit`: pygls has closed stdout and asks for this code
            code = end.code if isinstance(end.code, int) else 1
            break
        except Exception as error:
            log.exception("unable to handle a message")
            server.report_server_error(error, JsonRpcException)
    await on_end()
    return code


class Writer(StdoutWriter):
    """pygls' stdout writer that gives the memory back once a large answer is sent."""

    def __init__(self, stdout: BinaryIO, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(stdout)
        self._loop = loop
        self._lost = False

    def write(self, data: bytes) -> None:
        if self._stdout.closed or self._lost:  # by `exit`, or the client is gone: what
            return  # aborting turns still say goes nowhere
        try:
            super().write(data)
        except ConnectionError:  # the input's end (EOF, a reset) is what ends the server
            self._lost = True
            return
        if len(data) > LARGE_ANSWER:
            # Soon, not now: the answer is freed only when pygls' send returns.
            self._loop.call_soon_threadsafe(give_back)


def start_io(server: JsonRPCServer, receive: Callable[[bytes], None],
             on_end: Callable[[], Awaitable[None]], stdin: BinaryIO | None = None,
             stdout: BinaryIO | None = None) -> None:
    """pygls' `start_io` with this module's reader; returns when the server is done, or ends
    the process with LSP's code after `exit` (0 after `shutdown`, else 1), as pygls does."""
    server._stop_event = threading.Event()
    code = None
    try:
        code = asyncio.run(serve(server, receive, stdin or sys.stdin.buffer,
                                 stdout or sys.stdout.buffer, on_end))
    except ConnectionError:  # a broken pipe, or a TCP connection reset
        log.error("the connection to the client is lost; shutting down")
    finally:  # Ctrl-C goes on to the CLI's "pi-lsp: interrupted" and 130
        server.shutdown()  # type: ignore[no-untyped-call]
    if code is not None:
        sys.exit(code)
