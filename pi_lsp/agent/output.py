"""A command's output as pi keeps it: the tail in memory, everything in a temp file once long.

Memory stays bounded however much a command prints: a rolling buffer of at most twice the byte
limit, and the full output goes to a temp file as soon as it outgrows either limit. The files
are deleted when the process exits (the result that names one may be read by the model until
then); a file no result names (an aborted run) is deleted at once. Short outputs never get one.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import tempfile
import time
from collections.abc import Callable
from typing import Any, BinaryIO

MAX_LINES = 2000
MAX_BYTES = 50 * 1024
UPDATE_INTERVAL_S = 0.25  # a running command's output is sent at most this often

_spilled: set[str] = set()


def _remove_spilled() -> None:
    for path in list(_spilled):
        discard_file(path)


atexit.register(_remove_spilled)


def discard_file(path: str) -> None:
    _spilled.discard(path)
    with contextlib.suppress(OSError):
        os.unlink(path)


def format_size(size: int) -> str:
    if size < 1024:
        return f"{size}B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f}KB"
    return f"{size / (1024 * 1024):.1f}MB"


class OutputTail:
    """Collects a command's output; `tail()` is what the model sees."""

    def __init__(self, max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES) -> None:
        self.max_lines, self.max_bytes = max_lines, max_bytes
        self.buffer = bytearray()  # the end of the output; all of it until the file starts
        self.total_bytes = 0
        self.newlines = 0
        self.last_newline = -1  # offset in the whole output
        self.full_path: str | None = None
        self._file: BinaryIO | None = None

    def write(self, chunk: bytes) -> None:
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            self.last_newline = self.total_bytes + newline
            self.newlines += chunk.count(b"\n")
        self.total_bytes += len(chunk)
        self.buffer += chunk
        if self._file is None and (self.total_bytes > self.max_bytes or
                                   self.newlines > self.max_lines):
            handle, self.full_path = tempfile.mkstemp(prefix="pi-lsp-bash-", suffix=".log")
            _spilled.add(self.full_path)
            self._file = os.fdopen(handle, "wb")
            self._file.write(self.buffer)
        elif self._file is not None:
            self._file.write(chunk)
        if len(self.buffer) > 2 * self.max_bytes:
            del self.buffer[:len(self.buffer) - self.max_bytes - 1]

    def close(self) -> None:
        if self._file is not None:
            self._file.close()

    def discard(self) -> None:
        """No result will name the full output: delete it now."""
        self.close()
        if self.full_path is not None:
            discard_file(self.full_path)

    @property
    def total_lines(self) -> int:
        ends_open = self.total_bytes > 0 and self.last_newline != self.total_bytes - 1
        return self.newlines + ends_open

    def tail(self) -> tuple[str, dict[str, Any] | None]:
        """The last whole lines within both limits, and pi's truncation details if cut."""
        data = bytes(self.buffer)
        if data.endswith(b"\n"):
            data = data[:-1]
        lines = data.split(b"\n")
        whole = len(self.buffer) == self.total_bytes
        if not whole and len(lines) > 1:
            lines = lines[1:]  # the first kept line has lost its start
        shown: list[bytes] = []
        size = 0
        by = None
        for line in reversed(lines):
            cost = len(line) + (1 if shown else 0)
            if len(shown) == self.max_lines:
                by = "lines"
                break
            if size + cost > self.max_bytes:
                by = "bytes"
                break
            shown.append(line)
            size += cost
        partial = not shown and bool(lines)
        if partial:
            shown = [lines[-1][-self.max_bytes:]]
        shown.reverse()
        text = b"\n".join(shown).decode("utf-8", errors="replace")
        total = self.total_lines
        if by is None and whole:
            return text, None
        return text, {
            "truncated": True, "truncatedBy": by or "bytes", "totalLines": total,
            "totalBytes": self.total_bytes, "outputLines": len(shown),
            "outputBytes": len(text.encode()), "lastLinePartial": partial,
            "maxLines": self.max_lines, "maxBytes": self.max_bytes,
        }

    def result_text(self) -> tuple[str, dict[str, Any] | None]:
        """The tail with pi's notice of what was cut and where the rest is."""
        text, truncation = self.tail()
        if truncation is None:
            return text or "(no output)", None
        total, shown = truncation["totalLines"], truncation["outputLines"]
        where = f"Full output: {self.full_path}"
        if truncation["lastLinePartial"]:
            line_size = self.total_bytes - self.last_newline - 1 \
                if self.last_newline < self.total_bytes - 1 else 0
            notice = f"[Showing last {format_size(truncation['outputBytes'])} of line {total} " \
                     f"(line is {format_size(line_size)}). {where}]"
        elif truncation["truncatedBy"] == "lines":
            notice = f"[Showing lines {total - shown + 1}-{total} of {total}. {where}]"
        else:
            notice = f"[Showing lines {total - shown + 1}-{total} of {total} " \
                     f"({format_size(self.max_bytes)} limit). {where}]"
        return f"{text}\n\n{notice}", {"truncation": truncation, "fullOutputPath": self.full_path}


class ThrottledUpdates:
    """Sends the current output (made by `snapshot`) at most every UPDATE_INTERVAL_S; a change
    inside the interval is sent when it ends, so the last state is never held back."""

    def __init__(self, snapshot: Callable[[], str], send: Callable[[str], None]) -> None:
        self.snapshot, self.send = snapshot, send
        self.last = -UPDATE_INTERVAL_S
        self.timer: asyncio.TimerHandle | None = None

    def changed(self) -> None:
        if self.timer is not None:
            return
        wait = self.last + UPDATE_INTERVAL_S - time.monotonic()
        if wait <= 0:
            self._send()
        else:
            self.timer = asyncio.get_running_loop().call_later(wait, self._send)

    def _send(self) -> None:
        self.timer = None
        self.last = time.monotonic()
        self.send(self.snapshot())

    def stop(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
