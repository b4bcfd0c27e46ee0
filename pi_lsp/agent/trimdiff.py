"""difflib.unified_diff run only on the lines two texts do not share at their start and end:
a one-line edit of a 100 MB file costs a comparison of its characters, not difflib's time and
memory over all its lines. Where a line repeats, difflib over the whole texts may pair it
differently; the shared ends kept whole (as git does) make a diff as valid."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from typing import NamedTuple

from pi_lsp.agent.stopping import checkpoint

# Lines kept on each side of the change: pi 1.6 keeps 32 (DIFF_WINDOW_MARGIN_LINES) so that its
# diff pairs repeated lines within the window as it would over the whole file; with difflib's
# own 3, `x y a a a a b` given one more `a` showed the insertion elsewhere, without context.
MARGIN_LINES = 32
# Characters compared at a time (memcmp): halving a 100 MB text would copy 50 MB per slice.
BLOCK = 1 << 16
# What str.splitlines ends a line at; "\r\n" is one end, counted twice below.
LINE_ENDS = ("\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")
# Characters searched first for a line end: a text may lack one kind of end (no "\r" in most
# files, no "\n" in a classic Mac one), and searching all of a 100 MB text for it takes 20 ms.
WINDOW = 1 << 12
HUNK_HEADER = re.compile(r"@@ -(\d+)(,\d+|) \+(\d+)(.*)", re.DOTALL)


class Span(NamedTuple):
    """The part of two texts a diff needs: from `start` (a line start, the same in both, with
    context lines before the first change) to `old_end` and `new_end`."""

    start: int
    old_end: int
    new_end: int


def changed_span(old: str, new: str) -> Span:
    """Where `old` and `new` differ, cut at line starts (after "\\n", "\\r\\n" or a lone "\\r",
    the line ends pi 1.6 reads), widened by MARGIN_LINES on each side."""
    limit = min(len(old), len(new))
    start = _line_start(old, _shared_length(lambda i, j: old[i:j] == new[i:j], limit))
    shared_end = _shared_length(
        lambda i, j: old[len(old) - j:len(old) - i] == new[len(new) - j:len(new) - i],
        limit - start)
    end = _line_end(old, len(old) - shared_end)
    for _ in range(MARGIN_LINES):
        start = _line_start(old, max(start - 1, 0))
        end = _line_end(old, end)
    return Span(start, end, len(new) - (len(old) - end))


def unified_diff(old: str, new: str, old_name: str, new_name: str, span: Span) -> str:
    """difflib.unified_diff of `old` and `new` split into lines, worked out on `span` only."""
    before = _line_count_before(old, span.start)
    lines = difflib.unified_diff(old[span.start:span.old_end].splitlines(True),
                                 new[span.start:span.new_end].splitlines(True), old_name,
                                 new_name)
    return "".join(_shifted(line, before) if line.startswith("@@ ") else line
                   for line in lines)


def _shared_length(same: Callable[[int, int], bool], limit: int) -> int:
    """How many characters, up to `limit`, two texts share, given whether they agree from
    offset i to j: whole blocks first, then a binary search in the block that differs."""
    low = 0
    while low + BLOCK <= limit and same(low, low + BLOCK):
        checkpoint()  # an abort stops the diff: 100 MB are 1,600 blocks
        low += BLOCK
    high = min(low + BLOCK, limit)
    while low < high:
        middle = (low + high + 1) // 2
        if same(low, middle):
            low = middle
        else:
            high = middle - 1
    return low


def _line_start(text: str, limit: int) -> int:
    """Where the last line starting in text[:limit] starts. A "\\r" at limit - 1 is passed
    over: the next character, which says whether it ends a line, may differ between the texts."""
    high, cr_high, step = limit, limit - 1, WINDOW
    while high > 0:  # a growing window back: either end may be missing from the whole text
        low = max(high - step, 0)
        found = max(text.rfind("\n", low, high), text.rfind("\r", low, cr_high))
        if found >= 0:  # a "\r" before a "\n" in the window loses to that "\n"
            return found + (2 if text.startswith("\r\n", found) else 1)
        high = cr_high = low  # a "\r" at low - 1 ends a line: a "\n" after it was not found
        step *= 2
    return 0


def _line_end(text: str, position: int) -> int:
    """Where the line holding `position` ends, after its line end (or the text's end)."""
    low, step = position, WINDOW
    while low < len(text):  # a growing window on, as in _line_start
        high = low + step
        newline, cr = text.find("\n", low, high), text.find("\r", low, high)
        if newline >= 0 or cr >= 0:
            found = cr if newline < 0 or 0 <= cr < newline else newline
            return found + (2 if text.startswith("\r\n", found) else 1)
        low, step = high, step * 2
    return len(text)


def _line_count_before(text: str, end: int) -> int:
    """The lines str.splitlines finds in text[:end] (which ends a line), without splitting it.
    Only the line ends present are counted: a count takes 50 ms per 64 MB, a search (memchr) 5."""
    present = [line_end for line_end in LINE_ENDS if text.find(line_end, 0, end) >= 0]
    crlf = text.count("\r\n", 0, end) if "\r" in present else 0
    return sum(text.count(line_end, 0, end) for line_end in present) - crlf


def _shifted(header: str, lines: int) -> str:
    """A hunk header of the span's diff with its line numbers as they are in the whole texts."""
    match = HUNK_HEADER.match(header)
    assert match is not None  # difflib writes every header so
    old_start, old_rest, new_start, new_rest = match.groups()
    return f"@@ -{int(old_start) + lines}{old_rest} +{int(new_start) + lines}{new_rest}"
