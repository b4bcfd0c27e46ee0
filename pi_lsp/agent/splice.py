"""An edit spliced into a file's own text: matched with its line ends read as LF, as pi's edit
tool matches, and written back with the file's line ends and byte order mark kept."""

from __future__ import annotations

from typing import NamedTuple

BOM = "\ufeff"


def split_bom(text: str) -> tuple[str, str]:
    """The byte order mark `text` starts with ("" when none) and the text after it."""
    return (BOM, text[1:]) if text.startswith(BOM) else ("", text)


def to_lf(text: str) -> str:
    """`text` with its CRLF and lone CR line ends made LF."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


class Replacement(NamedTuple):
    start: int  # in the text with LF line ends
    length: int
    text: str  # with LF line ends


def splice(original: str, start: int, length: int, new_text: str) -> str:
    """`original` with `length` characters of `to_lf(original)` at `start` replaced by `new_text`
    (LF line ends): the rest keeps its bytes, and the new text takes the line end of the line
    the replaced span starts on."""
    return splice_all(original, [Replacement(start, length, new_text)])


def splice_all(original: str, replacements: list[Replacement]) -> str:
    """`original` with each replacement (sorted, disjoint, at offsets of `to_lf(original)`)
    made as `splice` makes one: pi 1.6's applyReplacementsToOriginal."""
    crlfs = 0  # CRLFs before `at`: only they change length when line ends are made LF
    at = original.find("\r\n")

    def original_offset(offset: int) -> int:
        nonlocal crlfs, at
        while at != -1 and at - crlfs < offset:
            crlfs += 1
            at = original.find("\r\n", at + 2)
        return offset + crlfs

    parts: list[str] = []

    def push(part: str) -> None:
        if not part:
            return
        if parts and parts[-1].endswith("\r") and part.startswith("\n"):
            parts.append("\n")  # else the CR and the LF would read as one line break, not two
        parts.append(part)

    position = 0
    for replacement in replacements:
        begin = original_offset(replacement.start)
        push(original[position:begin])
        push(replacement.text.replace("\n", _line_end_at(original, begin)))
        position = original_offset(replacement.start + replacement.length)
    push(original[position:])
    return "".join(parts)


def _line_end_at(text: str, offset: int) -> str:
    """The line end of the line holding `offset` (an unfinished last line takes the one before
    it); a lone CR counts only in a text with no LF at all, as pi counts it."""
    line_feed = text.find("\n", offset)
    if line_feed == -1:
        line_feed = text.rfind("\n", 0, offset + 1)
    if line_feed == -1:
        return "\r" if "\r" in text else "\n"
    return "\r\n" if line_feed > 0 and text[line_feed - 1] == "\r" else "\n"
