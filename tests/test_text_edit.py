"""The smallest edit: what pi-lsp sends an editor to change an open file, so its cursor, marks
and undo stay where they were."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol import types

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
