"""The smallest edit: what pi-lsp sends an editor to change an open file, so its cursor, marks
and undo stay where they were."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol import types

from pi_lsp import sequences
from pi_lsp.server import editor
from pi_lsp.server.editor import smallest_edit


def utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def applied(text: str, edit: types.TextEdit, units: Callable[[str], int]) -> str:
    """`text` after `edit`, positions read as an editor reads them (lines end at CRLF, CR or
    LF; characters counted by `units`)."""
    lines = re.split(r"(?<=\r\n)|(?<=\r)(?!\n)|(?<=\n)", text)

    def offset(position: types.Position) -> int:
        start = sum(map(len, lines[:position.line]))
        line = lines[position.line] if position.line < len(lines) else ""
        count = 0
        while count < len(line) and units(line[:count]) < position.character:
            count += 1
        assert units(line[:count]) == position.character, (line, position)
        return start + count

    return text[:offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end):]


@pytest.mark.parametrize(("old", "new", "span", "new_text"), [
    ("LIMIT = 2\n", "LIMIT = 1\n", ((0, 8), (0, 9)), "1"),
    ("a\nb\nc\n", "a\nb\nx\nc\n", ((2, 0), (2, 0)), "x\n"),  # a line inserted
    ("a\nb\nc\n", "a\nc\n", ((1, 0), (2, 0)), ""),  # a line deleted
    ("é😀 = 1", "é😀 = 2", ((0, 6), (0, 7)), "2"),  # UTF-16: the emoji is two units
    ("x\r\ny", "x\ny", ((0, 1), (1, 0)), "\n"),  # a CRLF is replaced whole, never split
    ("a\r\nb", "a\rb", ((0, 1), (1, 0)), "\r"),
    ("same\n", "same\n", ((1, 0), (1, 0)), ""),
    ("", "new\n", ((0, 0), (0, 0)), "new\n"),
])
def test_the_smallest_edit_replaces_only_what_changed(
        old: str, new: str, span: tuple[tuple[int, int], tuple[int, int]], new_text: str
) -> None:
    edit = smallest_edit(old, new, utf16)
    (start_line, start_char), (end_line, end_char) = span
    assert edit == types.TextEdit(types.Range(types.Position(start_line, start_char),
                                              types.Position(end_line, end_char)), new_text)
    assert applied(old, edit, utf16) == new


@given(st.text("ab\r\né😀", max_size=12), st.text("ab\r\né😀", max_size=12))
@settings(max_examples=300, deadline=None)
def test_the_smallest_edit_turns_any_text_into_any_other(old: str, new: str) -> None:
    for units in (len, utf16):
        assert applied(old, smallest_edit(old, new, units), units) == new


@given(st.text("ab\r\né😀", max_size=12), st.text("ab\r\né😀", max_size=12),
       st.integers(1, 4))
@settings(max_examples=300, deadline=None)
def test_the_smallest_edit_is_the_same_compared_in_blocks(old: str, new: str,
                                                         block: int) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sequences, "BLOCK", block)
        for units in (len, utf16):
            assert applied(old, smallest_edit(old, new, units), units) == new


def lines_run(work: Callable[[], Any], *files: str) -> int:
    """How many lines of Python in `files` `work` runs: the work it does one item at a time."""
    count = 0

    def tracer(frame: FrameType, event: str, _arg: object) -> Any:
        nonlocal count
        if frame.f_code.co_filename not in files:
            return None
        count += event == "line"
        return tracer
    sys.settrace(tracer)
    try:
        work()
    finally:
        sys.settrace(None)
    return count


def test_the_smallest_edit_of_a_large_buffer_compares_it_in_blocks() -> None:
    """smallest_edit compared a buffer with its new text a character at a time, on the event
    loop: an edit of a 10 MB open file held every editor request 0.8 s (1.4 s for its first
    line). Blocks are compared at once (in C); the edit is the same."""
    old = "row\n" * 250_000
    new = old[:-8] + "ROW\nrow\n"
    edit = smallest_edit(old, new)
    assert edit == types.TextEdit(types.Range(types.Position(249_998, 0),
                                              types.Position(249_998, 3)), "ROW")
    ran = lines_run(lambda: smallest_edit(old, new), editor.__file__, sequences.__file__)
    assert ran < 100_000, ran  # a character at a time: 2,000,000
