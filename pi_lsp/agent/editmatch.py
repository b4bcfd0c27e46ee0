"""Where an `edit` call's replacements go, as pi 1.6's edit tool finds them (edit.js,
edit-diff.js): each `oldText` matched in the file's text with LF line ends, exactly or else
after the fuzzy normalisation pi applies to both sides (trailing white space, smart quotes and
dashes, special spaces, NFKC), unique, and not overlapping another; and the call's arguments as
pi prepares them (one edit object, a JSON string of edits, the older top-level
oldText/newText)."""

from __future__ import annotations

import bisect
import itertools
import json
import re
import unicodedata
from typing import Any, NamedTuple

from pi_lsp.agent.arguments import ArgumentsError, invalid_arguments
from pi_lsp.agent.splice import Replacement, splice_all, split_bom, to_lf
from pi_lsp.agent.stopping import checkpoint
from pi_lsp.providers.base import MAX_ARGUMENT_NESTING, nesting
from pi_lsp.session.jsontext import JS_WHITESPACE, refuse_constant

# pi's smart quotes, dashes and special spaces, and what it makes of them.
FUZZY_REPLACEMENTS = {
    **dict.fromkeys("\u2018\u2019\u201a\u201b", "'"),
    **dict.fromkeys("\u201c\u201d\u201e\u201f", '"'),
    **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
    **dict.fromkeys("\u00a0\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f"
                    "\u205f\u3000", " "),
}
FUZZY_CHARACTERS = re.compile(f"[{''.join(FUZZY_REPLACEMENTS)}]")
EDITS_NESTING = MAX_ARGUMENT_NESTING - 1  # `edits` sits one level into the call's arguments
# Replacements made between an abort's checks: each a slice of the text, not a copy of it.
CHECKPOINT_EVERY = 1000


class EditError(ValueError):
    """An edit pi refuses, with pi's message."""


class EditPlan(NamedTuple):
    base: str  # the file's text, BOM left out and line ends as LF: what was matched
    new: str  # `base` with the replacements made
    replacements: list[Replacement]  # in `base`, sorted
    text: str  # what the file will hold: its own line ends and BOM kept


def prepare_edit_arguments(args: dict[str, Any]) -> dict[str, Any]:
    """pi's prepareEditArguments: `edits` given as one edit or as a JSON string of them made a
    list, and a top-level oldText/newText (older sessions, some models) added as the last."""
    prepared = dict(args)  # pi changes the call's own arguments; the transcript keeps them here
    edits = prepared.get("edits")
    if isinstance(edits, str):
        parsed = _parsed_edits(edits, args)
        if isinstance(parsed, list):
            prepared["edits"] = parsed
        elif _is_single_edit(parsed):
            prepared["edits"] = [parsed]
    elif _is_single_edit(edits):
        prepared["edits"] = [edits]
    old, new = prepared.get("oldText"), prepared.get("newText")
    if not isinstance(old, str) or not isinstance(new, str):
        return prepared
    edits = prepared.get("edits")
    listed = [*edits, {"oldText": old, "newText": new}] if isinstance(edits, list) else \
        [{"oldText": old, "newText": new}]
    rest = {key: value for key, value in prepared.items() if key not in ("oldText", "newText")}
    return {**rest, "edits": listed}


def _parsed_edits(text: str, args: dict[str, Any]) -> Any:
    """`edits` given as text, as JSON.parse reads it (numbers as doubles, no NaN); None when it
    is no JSON. Nested deeper than a call's arguments may be, it is refused (pi-lsp's limit:
    Python could not decode it, or check and show it once decoded)."""
    try:
        parsed = json.loads(text, parse_int=float, parse_constant=refuse_constant)
    except ValueError:
        return None
    except RecursionError:
        raise _too_deep(args) from None
    if nesting(parsed) > EDITS_NESTING:
        raise _too_deep(args)
    return parsed


def _too_deep(args: dict[str, Any]) -> ArgumentsError:
    return invalid_arguments("edit", [("edits", f"nested more than {EDITS_NESTING} levels deep")],
                             args)


def _is_single_edit(value: object) -> bool:
    return isinstance(value, dict) and isinstance(value.get("oldText"), str) and \
        isinstance(value.get("newText"), str)


def plan_edit(original: str, edits: list[dict[str, str]], path: str) -> EditPlan:
    """What the edits make of a file whose text is `original`; EditError as pi words it."""
    bom, content = split_bom(original)
    normalized = to_lf(content)
    new, replacements = apply_edits(normalized, edits, path)
    # Without a CR the normalized text is the file's own, and the new text is final.
    text = new if content == normalized else splice_all(content, replacements)
    return EditPlan(normalized, new, replacements, bom + text)


def normalize_for_fuzzy_match(text: str) -> str:
    """pi's normalizeForFuzzyMatch. Of ASCII text it only trims the lines' ends: NFKC and the
    replacements leave it as it is, and skipping them saved 1.2 s on 100 MB."""
    ascii_text = text.isascii()
    if not ascii_text:
        text = unicodedata.normalize("NFKC", text)
    text = "\n".join(line.rstrip(JS_WHITESPACE) for line in text.split("\n"))
    if ascii_text:
        return text
    # One pass for pi's four replacements (each a pass over the text).
    return FUZZY_CHARACTERS.sub(lambda match: FUZZY_REPLACEMENTS[match.group()], text)


class Matched:
    """A text edits are matched in, and its fuzzy normalisation, made once and only when asked:
    on a 100 MB file each costs a pass over it."""

    def __init__(self, text: str, fuzzy: str | None = None) -> None:
        self.text = text
        self._fuzzy = fuzzy

    def fuzzy(self) -> str:
        if self._fuzzy is None:
            self._fuzzy = normalize_for_fuzzy_match(self.text)
        return self._fuzzy

    def normalized(self) -> Matched:
        """The fuzzy normalisation as a text to match in (normalizing ASCII text again, which
        only trims line ends, leaves it as it is)."""
        fuzzy = self.fuzzy()
        return Matched(fuzzy, fuzzy if self.text.isascii() else None)


class Match(NamedTuple):
    start: int
    length: int
    fuzzy: bool


def fuzzy_find(content: Matched, old: str) -> Match | None:
    """pi's fuzzyFindText: `old` in `content` exactly, else both normalized (the offsets are
    then the normalized content's)."""
    index = content.text.find(old)
    if index != -1:
        return Match(index, len(old), False)
    fuzzy_old = normalize_for_fuzzy_match(old)
    index = content.fuzzy().find(fuzzy_old)
    return None if index == -1 else Match(index, len(fuzzy_old), True)


def _occurrences(content: Matched, old: str) -> int:
    """pi's countOccurrences: `split(old).length - 1` on both normalized."""
    part = normalize_for_fuzzy_match(old)
    if content.text.isascii() and part and "\n" not in part:
        # Normalizing ASCII text only drops white space at the lines' ends, which a match
        # within a line, itself trimmed at its end, never reaches: its matches are the text's.
        return content.text.count(part)
    text = content.fuzzy()
    if part:
        return text.count(part)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2 - 1  # split("") cuts every unit


def apply_edits(normalized: str, edits: list[dict[str, str]], path: str
                ) -> tuple[str, list[Replacement]]:
    """pi's applyEditsToNormalizedContent: the text with the edits made, and the replacements
    that make it. When any edit matches only fuzzily, all are matched in the normalized text
    and the lines they touch are written from it; the other lines keep their bytes."""
    pairs = [(to_lf(edit["oldText"]), to_lf(edit["newText"])) for edit in edits]
    many = len(pairs) > 1
    for index, (old, _new) in enumerate(pairs):
        if not old:
            raise EditError(f"edits[{index}].oldText must not be empty in {path}." if many
                            else f"oldText must not be empty in {path}.")
    content = Matched(normalized)
    fuzzy = any(match is not None and match.fuzzy
                for match in (_found(content, old) for old, _new in pairs))
    base = content.normalized() if fuzzy else content
    matched: list[tuple[int, Replacement]] = []
    for index, (old, new) in enumerate(pairs):
        match = _found(base, old)
        if match is None:
            raise EditError(
                f"Could not find edits[{index}] in {path}. The oldText must match exactly "
                "including all whitespace and newlines." if many else
                f"Could not find the exact text in {path}. The old text must match exactly "
                "including all whitespace and newlines.")
        count = _occurrences(base, old)
        if count > 1:
            raise EditError(
                f"Found {count} occurrences of edits[{index}] in {path}. Each oldText must be "
                "unique. Please provide more context to make it unique." if many else
                f"Found {count} occurrences of the text in {path}. The text must be unique. "
                "Please provide more context to make it unique.")
        matched.append((index, Replacement(match.start, match.length, new)))
    matched.sort(key=lambda item: item[1].start)
    for (before, first), (after, second) in itertools.pairwise(matched):
        if first.start + first.length > second.start:
            raise EditError(f"edits[{before}] and edits[{after}] overlap in {path}. Merge them "
                            "into one edit or target disjoint regions.")
    replacements = [replacement for _index, replacement in matched]
    if fuzzy:
        replacements = _widen_to_lines(normalized, base.text, replacements)
    new_text = apply_replacements(normalized, replacements)
    if new_text == normalized:
        raise EditError(
            f"No changes made to {path}. The replacements produced identical content." if many
            else f"No changes made to {path}. The replacement produced identical content. This "
            "might indicate an issue with special characters or the text not existing as "
            "expected.")
    return new_text, replacements


def _found(content: Matched, old: str) -> Match | None:
    """fuzzy_find, once an abort has not stopped the planning (100,000 edits: ~11 s)."""
    checkpoint()
    return fuzzy_find(content, old)


def apply_replacements(content: str, replacements: list[Replacement], offset: int = 0) -> str:
    """pi's applyReplacements (each made on the text, the last first) of sorted, disjoint
    replacements (offsets relative to `offset` in `content`), the text's pieces joined once."""
    pieces: list[str] = []
    position = 0
    for index, replacement in enumerate(replacements):
        if index % CHECKPOINT_EVERY == 0:
            checkpoint()
        start = replacement.start - offset
        pieces += (content[position:start], replacement.text)
        position = start + replacement.length
    pieces.append(content[position:])
    return "".join(pieces)


class LineSpans:
    """pi's getLineSpans of a text (`[^\n]*\n|[^\n]+`), each worked out when asked: making
    them all, as pi does, took 1.9 s on 100 MB."""

    def __init__(self, content: str) -> None:
        pieces = content.split("\n")
        if not pieces[-1]:
            pieces.pop()  # nothing after the last line break is no line
        self._lengths = list(itertools.accumulate(map(len, pieces)))  # line breaks left out
        self._size = len(content)

    def __len__(self) -> int:
        return len(self._lengths)

    def start(self, index: int) -> int:
        return 0 if index == 0 else self.end(index - 1)

    def end(self, index: int) -> int:
        return min(self._lengths[index] + index + 1, self._size)

    def holding(self, offset: int) -> int | None:
        """The line `offset` is in."""
        index = bisect.bisect_right(range(len(self)), offset, key=self.end)
        return index if index < len(self) else None


def _line_range(lines: LineSpans, replacement: Replacement) -> tuple[int, int]:
    """The lines (first, after last) a replacement touches."""
    start, end = replacement.start, replacement.start + replacement.length
    first = lines.holding(start)
    last = first if first is None or lines.end(first) >= end else lines.holding(end - 1)
    if first is None or last is None:
        raise EditError("Replacement range is outside the base content.")
    return first, last + 1


def _widen_to_lines(original: str, base: str, replacements: list[Replacement]
                    ) -> list[Replacement]:
    """pi's widenReplacementsToLines: replacements matched in `base` (a normalized view of
    `original`) as replacements of `original`'s whole lines they touch, rewritten from `base`."""
    original_lines, base_lines = LineSpans(original), LineSpans(base)
    if len(original_lines) != len(base_lines):
        raise EditError("Cannot preserve unchanged lines because the base content has a "
                        "different line count.")
    groups: list[tuple[int, int, list[Replacement]]] = []
    for replacement in sorted(replacements, key=lambda r: r.start):
        first, after = _line_range(base_lines, replacement)
        if groups and first < groups[-1][1]:
            start, end, members = groups[-1]
            groups[-1] = (start, max(end, after), [*members, replacement])
        else:
            groups.append((first, after, [replacement]))
    widened = []
    for first, after, members in groups:
        base_start, base_end = base_lines.start(first), base_lines.end(after - 1)
        start = original_lines.start(first)
        widened.append(Replacement(start, original_lines.end(after - 1) - start,
                                   apply_replacements(base[base_start:base_end], members,
                                                      base_start)))
    return widened
