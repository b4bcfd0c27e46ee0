"""What `read` shows of a text, as pi 1.6's read tool shows it (core/tools/read.js, truncate.js):
the text itself, lines split at LF only, at most 2000 lines and 50 KB of whole lines, and a note
saying where to go on. A file is taken a piece at a time, and only the lines that can be shown
are kept, so a huge file or line costs no more memory than a small one."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from pi_lsp.session.jsontext import js_number

MAX_LINES = 2000
MAX_BYTES = 50 * 1024

Number = int | float


class PageError(Exception):
    """An offset past the end, or an argument pi fails on: the model reads the message."""


def utf8_size(text: str) -> int:
    """The UTF-8 size of `text` as Node counts it (a lone surrogate as 3 bytes)."""
    return len(text.encode("utf-8", "surrogatepass"))


def format_size(size: int) -> str:
    """pi's formatSize: 512B, 50.0KB, 1.5MB (rounded half up, as JavaScript's toFixed)."""
    if size < 1024:
        return f"{size}B"
    unit, divisor = ("KB", 1024) if size < 1024 * 1024 else ("MB", 1024 * 1024)
    return f"{to_fixed(size / divisor, 1)}{unit}"


def to_fixed(value: float, digits: int) -> str:
    """JavaScript's toFixed: the exact value rounded half up (1.125 is 1.13, where Python's
    format gives 1.12)."""
    return str(Decimal(value).quantize(Decimal(1).scaleb(-digits), ROUND_HALF_UP))


def js(value: Number) -> str:
    """A number as JavaScript writes it in a message (2, 2.5, not 2.0)."""
    return js_number(value) if isinstance(value, float) else str(value)


def truncate_head(content: str) -> dict[str, Any]:
    """pi's truncateHead: the first whole lines of `content` within MAX_LINES and MAX_BYTES,
    with pi's account of what was cut (its field names)."""
    total_bytes = utf8_size(content)
    lines = content.split("\n") if content else []
    if content.endswith("\n"):
        lines.pop()
    result = {"content": content, "truncated": False, "truncatedBy": None,
              "totalLines": len(lines), "totalBytes": total_bytes, "outputLines": len(lines),
              "outputBytes": total_bytes, "lastLinePartial": False,
              "firstLineExceedsLimit": False, "maxLines": MAX_LINES, "maxBytes": MAX_BYTES}
    if len(lines) <= MAX_LINES and total_bytes <= MAX_BYTES:
        return result
    if utf8_size(lines[0]) > MAX_BYTES:
        return {**result, "content": "", "truncated": True, "truncatedBy": "bytes",
                "outputLines": 0, "outputBytes": 0, "firstLineExceedsLimit": True}
    kept: list[str] = []
    size = 0
    by = "lines"
    for index, line in enumerate(lines[:MAX_LINES]):
        line_size = utf8_size(line) + (1 if index else 0)
        if size + line_size > MAX_BYTES:
            by = "bytes"
            break
        kept.append(line)
        size += line_size
    if len(kept) >= MAX_LINES and size <= MAX_BYTES:
        by = "lines"
    shown = "\n".join(kept)
    return {**result, "content": shown, "truncated": True, "truncatedBy": by,
            "outputLines": len(kept), "outputBytes": utf8_size(shown)}


class LineSelector:
    """pi's selectLinesFromStream: lines [start, end) of a text given a piece at a time, those
    truncate_head can show kept, the rest only counted."""

    def __init__(self, start: int, limit: int | None) -> None:
        self.start = start
        self.end = math.inf if limit is None else start + limit
        self.stored: list[str] = []
        self.stored_bytes = 0
        self.stored_past_caps = False
        self.line = 0
        self.selected_lines = 0
        self.selected_bytes = 0
        self.first_line_bytes = 0
        self.last_line_empty = True
        # The selected line being read: its pieces while it is kept (None once nothing more
        # is), its size, and whether it has any text.
        self.pieces: list[str] | None = []
        self.line_bytes = 0
        self.line_has_text = False

    def selected(self) -> bool:
        return self.start <= self.line < self.end

    def _append(self, piece: str) -> None:
        self.line_has_text = True
        if self.pieces is None:
            return
        # A line over the byte cap is never shown (and a first one only measured): never keep
        # all of a 1 GB line.
        if self.line_bytes <= MAX_BYTES:
            self.pieces.append(piece)
        self.line_bytes += utf8_size(piece)

    def _finish_line(self) -> None:
        if self.pieces is not None:
            if self.selected_lines == 0:
                self.first_line_bytes = self.line_bytes
            # One line past the caps is kept: truncate_head ignores a trailing empty line, so
            # the line after the cap must be there for it to decide as on the whole text.
            if len(self.stored) > MAX_LINES or self.stored_bytes > MAX_BYTES:
                self.stored_past_caps = True
            text = "".join(self.pieces)
            self.stored_bytes += utf8_size(text) + (1 if self.stored else 0)
            self.stored.append(text)
        self.selected_lines += 1
        self.last_line_empty = not self.line_has_text
        self.pieces = None if self.stored_past_caps else []
        self.line_bytes = 0
        self.line_has_text = False

    def feed(self, text: str) -> None:
        """Take the next piece of the text."""
        position = 0
        selection_start = -1  # where the selected text of this piece starts
        while True:
            if not self.selected():
                position = self._skip(text, position)
                if position == -1:
                    break
                continue
            if selection_start == -1:
                selection_start = position
            if self.pieces is None:
                position = self._count_lines(text, position)
            newline = text.find("\n", position)
            end = len(text) if newline == -1 else newline
            if end > position:
                self._append(text[position:end])
            if newline == -1:
                break
            self._finish_line()
            if self.line + 1 == self.end:
                self.selected_bytes += utf8_size(text[selection_start:newline])
                selection_start = -1
            self.line += 1
            position = newline + 1
        if selection_start != -1:
            self.selected_bytes += utf8_size(text[selection_start:])

    def _skip(self, text: str, position: int) -> int:
        """Past lines before or after the selection, in bulk: where the first selected line
        starts in `text`, or -1 when none does."""
        ahead = text.count("\n", position)
        if self.line >= self.end or self.line + ahead < self.start:
            self.line += ahead
            return -1
        while self.line < self.start:
            position = text.index("\n", position) + 1
            self.line += 1
        return position

    def _count_lines(self, text: str, position: int) -> int:
        """Selected lines no longer kept, counted in bulk up to the one before the selection's
        last (each as _finish_line counts it); where the line after them starts."""
        ahead = text.count("\n", position)
        count = int(min(ahead, self.end - 1 - self.line))
        if count <= 0:
            return position
        if count == ahead:
            last = text.rfind("\n")
        else:
            last = position - 1
            for _ in range(count):
                last = text.index("\n", last + 1)
        before = text.rfind("\n", position, last)
        self.last_line_empty = last == before + 1 if before != -1 else \
            last == position and not self.line_has_text
        self.selected_lines += count
        self.line += count
        self.line_has_text = False
        return last + 1

    def finish(self) -> tuple[int, dict[str, Any], int]:
        """The file's line count, truncate_head's account of the selected lines, and the size
        of the first one."""
        if self.selected():
            self._finish_line()
        truncation = {**truncate_head("\n".join(self.stored)),
                      "totalLines": 0 if self.selected_bytes == 0 else
                      self.selected_lines - (1 if self.last_line_empty else 0),
                      "totalBytes": self.selected_bytes}
        return self.line + 1, truncation, self.first_line_bytes


def count_lines(pieces: Iterable[str]) -> int:
    """How many lines pi counts in a text: its LFs and one."""
    return sum(piece.count("\n") for piece in pieces) + 1


def _slice_bound(value: Number, length: int) -> int:
    """Array.prototype.slice's reading of a start or end."""
    if value == -math.inf:
        return 0
    whole = value if value == math.inf else math.trunc(value)
    return int(max(length + whole, 0) if whole < 0 else min(whole, length))


def is_streamable(offset: Number | None, limit: Number | None) -> bool:
    """pi's isStreamableRange: whole offsets and whole non-negative limits are read a piece at
    a time; others (a fraction, a negative limit) as JavaScript's slicing of all lines reads
    them, which the first pass's line count stands in for here."""
    return (offset is None or float(offset).is_integer()) and \
        (limit is None or (float(limit).is_integer() and limit >= 0))


def page(pieces: Callable[[], Iterable[str]], path: str, offset: Number | None,
         limit: Number | None) -> tuple[str, dict[str, Any] | None]:
    """What `read` answers for the text `pieces()` yields (called twice for an unusual range):
    the text and the details pi gives (`truncation` when it cut), as pi's read tool words
    them. `path` is the argument as the model gave it."""
    start = max(0, offset - 1) if offset else 0
    if is_streamable(offset, limit):
        selector = LineSelector(int(start), None if limit is None else int(limit))
    else:
        total = count_lines(pieces())
        first = _slice_bound(start, total)
        end = total if limit is None else _slice_bound(min(start + limit, total), total)
        selector = LineSelector(first, max(end - first, 0))
    for piece in pieces():
        selector.feed(piece)
    total_lines, truncation, first_line_bytes = selector.finish()
    return _answer(path, offset, limit, start, total_lines, truncation, first_line_bytes)


def _answer(path: str, offset: Number | None, limit: Number | None, start: Number, total: int,
            truncation: dict[str, Any], first_line_bytes: int
            ) -> tuple[str, dict[str, Any] | None]:
    """pi's wording of a selection: the lines, and how to go on."""
    if start >= total:
        raise PageError(f"Offset {js(offset or 0)} is beyond end of file ({total} lines total)")
    shown = start + 1
    if truncation["firstLineExceedsLimit"]:
        if not float(start).is_integer():  # pi's allLines[startLine] is undefined then
            raise PageError('The "string" argument must be of type string or an instance of '
                            "Buffer or ArrayBuffer. Received undefined")
        return (f"[Line {js(shown)} is {format_size(first_line_bytes)}, exceeds "
                f"{format_size(MAX_BYTES)} limit. Use bash: sed -n '{js(shown)}p' {path} | "
                f"head -c {MAX_BYTES}]", {"truncation": truncation})
    content: str = truncation["content"]
    if truncation["truncated"]:
        last = shown + truncation["outputLines"] - 1
        cap = "" if truncation["truncatedBy"] == "lines" else f" ({format_size(MAX_BYTES)} limit)"
        return (f"{content}\n\n[Showing lines {js(shown)}-{js(last)} of {total}{cap}. "
                f"Use offset={js(last + 1)} to continue.]", {"truncation": truncation})
    if limit is not None:
        limited = min(start + limit, total) - start
        if start + limited < total:
            return (f"{content}\n\n[{js(total - (start + limited))} more lines in file. "
                    f"Use offset={js(start + limited + 1)} to continue.]", None)
    return content, None
