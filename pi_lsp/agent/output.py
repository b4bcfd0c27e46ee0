"""A command's output as pi keeps it: the tail in memory, everything in a temp file once long.

Memory stays bounded however much a command prints: a rolling buffer of at most four times the
byte limit (pi's), and the full output goes to a temp file as soon as it outgrows either limit.
The files are deleted when the process exits (the result that names one may be read by the
model until then); a file no result names (a run cut short that nobody records) is deleted at
once. Short outputs never get one.
"""

from __future__ import annotations

import atexit
import codecs
import contextlib
import os
import tempfile
from typing import Any, BinaryIO, NamedTuple

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


class Cut(NamedTuple):
    """What pi 1.6's truncateTail keeps of a text."""

    text: str
    by: str | None  # "lines" or "bytes"; None: nothing was cut
    lines: int
    size: int  # of `text`, in UTF-8
    partial: bool  # `text` is the end of one line longer than the byte limit


def _lines(text: str) -> list[str]:
    """The text's lines, a final newline ending the last one rather than starting another."""
    lines = text.split("\n") if text else []
    if text.endswith("\n"):
        lines.pop()
    return lines


def _end_bytes(text: str, limit: int) -> str:
    """The end of `text` within `limit` UTF-8 bytes, starting on a whole character."""
    data = text.encode()
    start = len(data) - limit
    if start <= 0:
        return text
    while start < len(data) and data[start] & 0xC0 == 0x80:
        start += 1
    return data[start:].decode()


def truncate_tail(text: str, max_lines: int, max_bytes: int) -> Cut:
    """The last whole lines of `text` within both limits, as pi 1.6's truncateTail: the text as
    it is when it fits, else those lines joined (no final newline), or the end of the last line
    when that line alone is over the byte limit."""
    lines = _lines(text)
    size = len(text.encode())
    if len(lines) <= max_lines and size <= max_bytes:
        return Cut(text, None, len(lines), size, False)
    shown: list[str] = []
    size, by, partial = 0, "lines", False
    for line in reversed(lines):
        if len(shown) >= max_lines:
            break
        cost = len(line.encode()) + (1 if shown else 0)
        if size + cost > max_bytes:
            by = "bytes"
            if not shown:
                shown.append(_end_bytes(line, max_bytes))
                partial = True
            break
        shown.append(line)
        size += cost
    if len(shown) >= max_lines and size <= max_bytes:
        by = "lines"
    kept = "\n".join(reversed(shown))
    return Cut(kept, by, len(shown), len(kept.encode()), partial)


class OutputTail:
    """Collects a command's output as pi 1.6's OutputAccumulator does: decoded as UTF-8 (bad
    bytes replaced, a BOM that starts the output dropped) and counted decoded, the tail kept
    in memory; `tail()` is what the model sees."""

    def __init__(self, max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES) -> None:
        self.max_lines, self.max_bytes = max_lines, max_bytes
        # pi's rolling window: the tail is cut back to this many bytes when twice as long.
        self.rolling_bytes = max(2 * max_bytes, 1)
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._decoded_any = False  # a character came: a BOM from now on is text
        self._raw: list[bytes] = []  # the output as it came, until the file starts
        self.buffer = ""  # the end of the decoded output; all of it until first cut back
        self._buffer_bytes = 0
        self._buffer_at_line_start = True
        self._raw_bytes = 0
        self.total_bytes = 0  # decoded, in UTF-8: a bad byte counts as U+FFFD's three
        self.total_lines = 0
        self._complete_lines = 0
        self._line_bytes = 0  # of the last line, when it has no newline yet
        self._open_line = False
        self.full_path: str | None = None
        self._file: BinaryIO | None = None
        self._finished = False

    def write(self, chunk: bytes) -> None:
        self._raw_bytes += len(chunk)
        self._add_text(self._decode(chunk))
        if self._file is not None or self._too_long():
            self._start_file().write(chunk)
        elif chunk:
            self._raw.append(chunk)

    def finish(self) -> None:
        """The output has ended: a character cut off at its end counts (as U+FFFD)."""
        if not self._finished:
            self._finished = True
            self._add_text(self._decode(b"", final=True))
            if self._too_long():
                self._start_file()

    def _decode(self, chunk: bytes, final: bool = False) -> str:
        """The text `chunk` completes, as Node's TextDecoder gives it: a BOM is dropped when it
        is the output's first character (stdout's or stderr's, one decoder for both), not a
        chunk's."""
        text = self._decoder.decode(chunk, final)
        if text and not self._decoded_any:
            self._decoded_any = True
            return text.removeprefix("\ufeff")
        return text

    def _too_long(self) -> bool:
        return self.max_bytes < max(self._raw_bytes, self.total_bytes) or \
            self.total_lines > self.max_lines

    def _start_file(self) -> BinaryIO:
        """The file the full output goes to, started with what came so far."""
        if self._file is None:
            handle, self.full_path = tempfile.mkstemp(prefix="pi-lsp-bash-", suffix=".log")
            _spilled.add(self.full_path)
            self._file = os.fdopen(handle, "wb")
            self._file.writelines(self._raw)
            self._raw = []
        return self._file

    def _add_text(self, text: str) -> None:
        if not text:
            return
        size = len(text.encode())
        self.total_bytes += size
        self.buffer += text
        self._buffer_bytes += size
        if self._buffer_bytes > 2 * self.rolling_bytes:
            self._cut_back()
        newlines = text.count("\n")
        if newlines:
            self._complete_lines += newlines
            rest = text[text.rindex("\n") + 1:]
            self._line_bytes, self._open_line = len(rest.encode()), bool(rest)
        else:
            self._line_bytes, self._open_line = self._line_bytes + size, True
        self.total_lines = self._complete_lines + self._open_line

    def _cut_back(self) -> None:
        """Keep the last `rolling_bytes` of the buffer, from a whole character on."""
        data = self.buffer.encode()
        start = max(len(data) - self.rolling_bytes, 0)
        while 0 < start < len(data) and data[start] & 0xC0 == 0x80:
            start += 1
        if start:
            self._buffer_at_line_start = data[start - 1] == 0x0A
            self.buffer = data[start:].decode()
        self._buffer_bytes = len(data) - start

    def _shown_text(self) -> str:
        """The buffer without its first line when that lost its start; when the buffer is the
        end of one long line, all of it."""
        if self._buffer_at_line_start:
            return self.buffer
        newline = self.buffer.find("\n")
        return (self.buffer[newline + 1:] if newline >= 0 else "") or self.buffer

    def close(self) -> None:
        """The output has ended: the full output's file, if any, is complete."""
        self.finish()
        if self._file is not None:
            self._file.close()

    def discard(self) -> None:
        """No result will name the full output: delete it now."""
        self.close()
        if self.full_path is not None:
            discard_file(self.full_path)

    def tail(self) -> tuple[str, dict[str, Any] | None]:
        """The last whole lines within both limits, and pi's truncation details if cut: its
        snapshot's, truncateTail's keys in their order (a session holds them as pi's does)."""
        cut = truncate_tail(self._shown_text(), self.max_lines, self.max_bytes)
        if self.total_lines <= self.max_lines and self.total_bytes <= self.max_bytes:
            return cut.text, None
        self._start_file()  # as pi's snapshot({persistIfTruncated}): the notice names it
        return cut.text, {
            "content": cut.text, "truncated": True,
            "truncatedBy": cut.by or ("bytes" if self.total_bytes > self.max_bytes else "lines"),
            "totalLines": self.total_lines, "totalBytes": self.total_bytes,
            "outputLines": cut.lines, "outputBytes": cut.size, "lastLinePartial": cut.partial,
            "firstLineExceedsLimit": False,  # truncateTail never sets it; pi keeps it so
            "maxLines": self.max_lines, "maxBytes": self.max_bytes,
        }

    def result_text(self, empty: str = "(no output)") -> tuple[str, dict[str, Any] | None]:
        """The tail (`empty` when there is none) with pi's notice of what was cut and where the
        rest is."""
        self.finish()
        text, truncation = self.tail()
        text = text or empty
        if truncation is None:
            return text, None
        total, shown = truncation["totalLines"], truncation["outputLines"]
        where = f"Full output: {self.full_path}"
        if truncation["lastLinePartial"]:
            notice = f"[Showing last {format_size(truncation['outputBytes'])} of line {total} " \
                     f"(line is {format_size(self._line_bytes)}). {where}]"
        elif truncation["truncatedBy"] == "lines":
            notice = f"[Showing lines {total - shown + 1}-{total} of {total}. {where}]"
        else:
            notice = f"[Showing lines {total - shown + 1}-{total} of {total} " \
                     f"({format_size(self.max_bytes)} limit). {where}]"
        return f"{text}\n\n{notice}", {"truncation": truncation, "fullOutputPath": self.full_path}
