"""difflib.unified_diff run only on the lines two texts do not share at their start and end:
a one-line edit of a 100 MB file costs a comparison of its characters, not difflib's time and
memory over all its lines. Where a line repeats, difflib over the whole texts may pair it
differently; the shared ends kept whole (as git does) make a diff as valid."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from typing import NamedTuple

# Lines kept on each side of the change: pi 1.6 keeps 32 (DIFF_WINDOW_MARGIN_LINES) so that its
# diff pairs repeated lines within the window as it would over the whole file; with difflib's
# own 3, `x y a a a a b` given one more `a` showed the insertion elsewhere, without context.
MARGIN_LINES = 32
# Characters compared at a time (memcmp): halving a 100 MB text would copy 50 MB per slice.
BLOCK = 1 << 16
# What str.splitlines ends a line at; "\r\n" is one end, counted twice below.
LINE_ENDS = ("\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")
HUNK_HEADER = re.compile(r"@@ -(\d+)(,\d+|) \+(\d+)(.*)", re.DOTALL)


class Span(NamedTuple):
    """The part of two texts a diff needs: from `start` (a line start, the same in both, with
    context lines before the first change) to `old_end` and `new_end`."""

    start: int
    old_end: int
    new_end: int


def changed_span(old: str, new: str) -> Span:
    """Where `old` and `new` differ, cut at line starts after "\\n" (the only line end whose
    next character always starts a line), widened by MARGIN_LINES on each side."""
    limit = min(len(old), len(new))
    start = old.rfind("\n", 0, _shared_length(lambda i, j: old[i:j] == new[i:j], limit)) + 1
    shared_end = _shared_length(
        lambda i, j: old[len(old) - j:len(old) - i] == new[len(new) - j:len(new) - i],
        limit - start)
    end = _line_end(old, len(old) - shared_end)
    for _ in range(MARGIN_LINES):
        start = old.rfind("\n", 0, max(start - 1, 0)) + 1
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
        low += BLOCK
    high = min(low + BLOCK, limit)
    while low < high:
        middle = (low + high + 1) // 2
        if same(low, middle):
            low = middle
        else:
            high = middle - 1
    return low


def _line_end(text: str, position: int) -> int:
    """Where the line holding `position` ends, after its "\\n" (or the text's end)."""
    found = text.find("\n", position)
    return found + 1 if found >= 0 else len(text)


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
