"""The diffs an `edit` result carries, as pi 1.6 makes them (edit-diff.js's generateEditDiff):
details.diff, numbered lines, `+`/`-` for the changed ones, four lines of context and `...` for
those skipped; details.patch, the same change as jsdiff's unified patch (structuredPatch's hunks,
formatPatch's text). Both are worked out by jsdiff's line diff (a port of diff 8's Myers
algorithm, so lines pair up as in pi) around each replacement only. The diff's work is
bounded: past DIFF_BUDGET each replacement's lines are shown as one block removed, then
added, with the lines between replacements kept (there pi's pairing may differ)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from pi_lsp.agent.splice import Replacement
from pi_lsp.agent.stopping import checkpoint
from pi_lsp.sequences import shared_ends

CONTEXT_LINES = 4
WINDOW_MARGIN_LINES = 32  # unchanged lines diffed on each side of a replacement
# Myers' work grows with the square of the lines changed, and it runs on the event loop: 4000
# lines rewritten took 16 s, with every request and an abort waiting. This many steps (paths
# tried and lines compared; about 0.15 s) for all of an edit's diffs still diff 300 lines
# rewritten, or 500 with a third of them changed, as pi does.
DIFF_BUDGET = 100_000


@dataclass
class Part:
    """A run of lines jsdiff found added, removed or kept."""

    count: int
    added: bool
    removed: bool
    previous: Part | None = None
    value: str = ""


@dataclass
class Budget:
    """The steps an edit's diffs may still take."""

    steps: int = DIFF_BUDGET


@dataclass
class _Path:
    old_pos: int
    last: Part | None


def _tokenize(text: str) -> list[str]:
    """jsdiff's line tokens: each line with its line break (LF or CRLF; a CRLF's CR ends the
    piece before its LF). Not its regular expression, which took 0.9 s on a 100 MB line."""
    tokens = [line + "\n" for line in text.split("\n")]
    tokens[-1] = tokens[-1][:-1]  # the text after the last line break has none
    if not tokens[-1]:
        tokens.pop()
    return tokens


def diff_lines(old: str, new: str, budget: Budget) -> list[Part] | None:
    """jsdiff's diffLines(old, new), without options; None once `budget` is spent."""
    old_tokens, new_tokens = _tokenize(old), _tokenize(new)
    old_len, new_len = len(old_tokens), len(new_tokens)

    def extract_common(path: _Path, diagonal: int) -> int:
        old_pos = path.old_pos
        new_pos = old_pos - diagonal
        common = 0
        while new_pos + 1 < new_len and old_pos + 1 < old_len and \
                old_tokens[old_pos + 1] == new_tokens[new_pos + 1]:
            new_pos, old_pos, common = new_pos + 1, old_pos + 1, common + 1
        budget.steps -= common + 1
        if common:
            path.last = Part(common, False, False, path.last)
        path.old_pos = old_pos
        return new_pos

    def values(last: Part | None) -> list[Part]:
        parts: list[Part] = []
        while last is not None:
            parts.append(last)
            last = last.previous
        parts.reverse()
        new_pos = old_pos = 0
        for part in parts:
            part.previous = None
            if part.removed:
                part.value = "".join(old_tokens[old_pos:old_pos + part.count])
                old_pos += part.count
            else:
                part.value = "".join(new_tokens[new_pos:new_pos + part.count])
                new_pos += part.count
                if not part.added:
                    old_pos += part.count
        return parts

    best: dict[int, _Path | None] = {0: _Path(-1, None)}
    start = best[0]
    assert start is not None
    new_pos = extract_common(start, 0)
    if start.old_pos + 1 >= old_len and new_pos + 1 >= new_len:
        return values(start.last)
    lowest: int | None = None  # diagonals outside [lowest, highest] need not be tried again
    highest: int | None = None
    edit_length = 1
    while edit_length <= new_len + old_len:
        diagonal = -edit_length if lowest is None else max(lowest, -edit_length)
        while diagonal <= (edit_length if highest is None else min(highest, edit_length)):
            remove_path, add_path = best.get(diagonal - 1), best.get(diagonal + 1)
            if remove_path is not None:
                best[diagonal - 1] = None
            can_add = add_path is not None and 0 <= add_path.old_pos - diagonal < new_len
            can_remove = remove_path is not None and remove_path.old_pos + 1 < old_len
            if not can_add and not can_remove:
                best[diagonal] = None
                diagonal += 2
                continue
            # From the path that went furthest in the old text.
            if add_path is not None and can_add and (remove_path is None or not can_remove
                                                     or remove_path.old_pos < add_path.old_pos):
                path = _grown(add_path, True, False, 0)
            else:
                assert remove_path is not None
                path = _grown(remove_path, False, True, 1)
            new_pos = extract_common(path, diagonal)
            if path.old_pos + 1 >= old_len and new_pos + 1 >= new_len:
                return values(path.last)
            if budget.steps < 0:
                return None
            best[diagonal] = path
            if path.old_pos + 1 >= old_len:
                highest = diagonal - 1 if highest is None else min(highest, diagonal - 1)
            if new_pos + 1 >= new_len:
                lowest = diagonal + 1 if lowest is None else max(lowest, diagonal + 1)
            diagonal += 2
        edit_length += 1
    raise AssertionError("the edit graph has no end")  # Myers always reaches it


def _one_block(old_tokens: list[str], new_tokens: list[str]) -> list[Part]:
    """A diff that keeps only the lines both start and end with: what lies between is removed,
    then added (as jsdiff shows lines that have nothing in common)."""
    head, tail = shared_ends(old_tokens, new_tokens)
    parts = [Part(head, False, False, value="".join(old_tokens[:head])),
             Part(len(old_tokens) - head - tail, False, True,
                  value="".join(old_tokens[head:len(old_tokens) - tail])),
             Part(len(new_tokens) - head - tail, True, False,
                  value="".join(new_tokens[head:len(new_tokens) - tail])),
             Part(tail, False, False, value="".join(old_tokens[len(old_tokens) - tail:]))]
    return [part for part in parts if part.count]


class _Lines:
    """The window's lines (first, past the last) that spans of `text`, in order, lie on,
    counted on from the last span's (counting from the window's start each time took 1.9 s
    for 2000 replacements)."""

    def __init__(self, text: str, window_start: int) -> None:
        self.text, self.offset, self.line = text, window_start, 0

    def _line(self, offset: int) -> int:
        self.line += self.text.count("\n", self.offset, offset)
        self.offset = offset
        return self.line

    def touched(self, start: int, end: int) -> tuple[int, int]:
        first = self._line(start)
        at_line_start = end == 0 or self.text[end - 1] == "\n"
        return first, self._line(end) + (0 if at_line_start else 1)


def _blocks(base: str, new: str, window: _Window) -> list[Part] | None:
    """The window as each replacement's lines removed, then added (the replacements are
    known, so the lines between them stay kept), in linear time; None when lines on either
    side do not line up (replacements sharing lines in ways this cannot tell apart)."""
    old_tokens = _tokenize(base[window.old_start:window.old_end])
    new_tokens = _tokenize(new[window.new_start:window.new_end])
    old_lines, new_lines = _Lines(base, window.old_start), _Lines(new, window.new_start)
    parts: list[Part] = []
    old_at = new_at = 0
    for old_start, old_end, new_start, new_end in window.spans:
        old_first, old_stop = old_lines.touched(old_start, old_end)
        new_first, new_stop = new_lines.touched(new_start, new_end)
        old_first, new_first = max(old_first, old_at), max(new_first, new_at)
        if old_first - old_at != new_first - new_at or \
                old_tokens[old_at:old_first] != new_tokens[new_at:new_first]:
            return None
        parts.append(Part(old_first - old_at, False, False,
                          value="".join(old_tokens[old_at:old_first])))
        parts += _one_block(old_tokens[old_first:old_stop], new_tokens[new_first:new_stop])
        old_at, new_at = max(old_stop, old_at), max(new_stop, new_at)
    if old_tokens[old_at:] != new_tokens[new_at:]:
        return None
    parts.append(Part(len(old_tokens) - old_at, False, False,
                      value="".join(old_tokens[old_at:])))
    return _joined([part for part in parts if part.count])


def _joined(parts: list[Part]) -> list[Part]:
    """Adjacent parts of one kind as one, as jsdiff gives them."""
    joined: list[Part] = []
    for part in parts:
        last = joined[-1] if joined else None
        if last is not None and (last.added, last.removed) == (part.added, part.removed):
            last.count, last.value = last.count + part.count, last.value + part.value
        else:
            joined.append(part)
    return joined


def _grown(path: _Path, added: bool, removed: bool, old_step: int) -> _Path:
    """jsdiff's addToPath: `path` one insertion or removal longer."""
    last = path.last
    if last is not None and last.added == added and last.removed == removed:
        return _Path(path.old_pos + old_step,
                     Part(last.count + 1, added, removed, last.previous))
    return _Path(path.old_pos + old_step, Part(1, added, removed, last))


def _line_feeds(text: str, start: int, end: int) -> int:
    return text.count("\n", start, end)


def _display(parts: list[Part], old_line: int, new_line: int, width: int
             ) -> tuple[list[str], int | None]:
    """pi's formatDisplayDiff: the parts as numbered lines, from these 1-based line numbers;
    and the first changed line of the new text."""
    output: list[str] = []
    first_changed: int | None = None
    last_was_change = False

    def context(lines: list[str]) -> None:
        nonlocal old_line, new_line
        for line in lines:
            output.append(f" {str(old_line).rjust(width)} {line}")
            old_line, new_line = old_line + 1, new_line + 1

    def skip(count: int) -> None:
        nonlocal old_line, new_line
        output.append(f" {''.rjust(width)} ...")
        old_line, new_line = old_line + count, new_line + count

    for index, part in enumerate(parts):
        lines = part.value.split("\n")
        if lines[-1] == "":
            lines.pop()
        if part.added or part.removed:
            if first_changed is None:
                first_changed = new_line
            for line in lines:
                if part.added:
                    output.append(f"+{str(new_line).rjust(width)} {line}")
                    new_line += 1
                else:
                    output.append(f"-{str(old_line).rjust(width)} {line}")
                    old_line += 1
            last_was_change = True
            continue
        next_is_change = index < len(parts) - 1 and (parts[index + 1].added or
                                                     parts[index + 1].removed)
        if last_was_change and next_is_change:
            if len(lines) <= CONTEXT_LINES * 2:
                context(lines)
            else:
                context(lines[:CONTEXT_LINES])
                skip(len(lines) - 2 * CONTEXT_LINES)
                context(lines[-CONTEXT_LINES:])
        elif last_was_change:
            context(lines[:CONTEXT_LINES])
            if len(lines) > CONTEXT_LINES:
                skip(len(lines) - CONTEXT_LINES)
        elif next_is_change:
            skipped = max(0, len(lines) - CONTEXT_LINES)
            if skipped:
                skip(skipped)
            context(lines[skipped:])
        else:
            old_line, new_line = old_line + len(lines), new_line + len(lines)
        last_was_change = False
    return output, first_changed


@dataclass
class _Window:
    old_start: int
    old_end: int
    old_line: int
    new_start: int
    new_end: int
    new_line: int
    # Each replacement's (old start, old end, new start, new end) offsets in the whole texts.
    spans: list[tuple[int, int, int, int]] = field(default_factory=list)


def _line_start_before(text: str, offset: int) -> int:
    return 0 if offset == 0 else text.rfind("\n", 0, offset) + 1


def _windows(base: str, replacements: list[Replacement]) -> list[_Window]:
    """pi's getDiffWindows: whole lines around each replacement, with a margin; windows that
    overlap merge."""
    windows: list[_Window] = []
    offset_delta = line_delta = cursor_offset = cursor_line = 0
    for replacement in replacements:
        checkpoint()  # an abort stops the diff of 100,000 replacements too
        match_end = replacement.start + replacement.length
        start = _line_start_before(base, replacement.start)
        for _ in range(WINDOW_MARGIN_LINES):
            if start <= 0:
                break
            start = _line_start_before(base, start - 1)
        end = match_end
        for step in range(WINDOW_MARGIN_LINES + 1):
            if end >= len(base):
                break
            line_feed = base.find("\n", max(match_end - 1, replacement.start) if step == 0
                                  else end)
            end = len(base) if line_feed == -1 else line_feed + 1
        offset_change = len(replacement.text) - replacement.length
        line_change = replacement.text.count("\n") - _line_feeds(base, replacement.start,
                                                                 match_end)
        if windows and start <= windows[-1].old_end:
            previous = windows[-1]
            previous.old_end = max(previous.old_end, end)
            previous.new_end = previous.old_end + offset_delta + offset_change
        else:
            cursor_line += _line_feeds(base, cursor_offset, start)
            cursor_offset = start
            windows.append(_Window(start, end, cursor_line, start + offset_delta,
                                   end + offset_delta + offset_change, cursor_line + line_delta))
        new_start = replacement.start + offset_delta
        windows[-1].spans.append((replacement.start, match_end, new_start,
                                  new_start + len(replacement.text)))
        offset_delta += offset_change
        line_delta += line_change
    return windows


class Hunk(NamedTuple):
    """One of jsdiff's patch hunks: where it starts (1-based) and how many lines it spans on
    each side, and its lines (` `, `-` or `+` first, line breaks kept)."""

    old_start: int
    old_lines: int
    new_start: int
    new_lines: int
    lines: list[str]


def _split_lines(text: str) -> list[str]:
    """jsdiff's splitLines: each line with its LF, the last without one when `text` has none."""
    lines = [line + "\n" for line in text.split("\n")]
    if text.endswith("\n"):
        lines.pop()
    else:
        lines[-1] = lines[-1][:-1]
    return lines


def _hunks(parts: list[Part], old_shift: int, new_shift: int) -> list[Hunk]:
    """jsdiff's structuredPatch hunks of a window's parts, with CONTEXT_LINES of context; their
    starts moved by the lines before the window (`old_shift`, `new_shift`)."""
    runs = [(_split_lines(part.value), part.added, part.removed) for part in parts]
    runs.append(([], False, False))  # jsdiff's closing empty part ends the last hunk
    hunks: list[Hunk] = []
    old_start = new_start = 0  # 0: no hunk open
    lines: list[str] = []
    old_line = new_line = 1
    for index, (run, added, removed) in enumerate(runs):
        if added or removed:
            if not old_start:
                lines = [" " + line for line in runs[index - 1][0][-CONTEXT_LINES:]] \
                    if index else []
                old_start, new_start = old_line - len(lines), new_line - len(lines)
            lines += [("+" if added else "-") + line for line in run]
            if added:
                new_line += len(run)
            else:
                old_line += len(run)
            continue
        if old_start:
            if len(run) <= 2 * CONTEXT_LINES and index < len(runs) - 2:
                lines += [" " + line for line in run]
            else:
                kept = min(len(run), CONTEXT_LINES)
                lines += [" " + line for line in run[:kept]]
                hunks.append(Hunk(old_start + old_shift, old_line - old_start + kept,
                                  new_start + new_shift, new_line - new_start + kept, lines))
                old_start = new_start = 0
                lines = []
        old_line, new_line = old_line + len(run), new_line + len(run)
    return hunks


def format_patch(path: str, hunks: list[Hunk]) -> str:
    """jsdiff's formatPatch with file headers only: a hunk spanning no lines on a side names
    the line before it there."""
    text = [f"--- {path}", f"+++ {path}"]
    for hunk in hunks:
        old_start = hunk.old_start - 1 if hunk.old_lines == 0 else hunk.old_start
        new_start = hunk.new_start - 1 if hunk.new_lines == 0 else hunk.new_start
        text.append(f"@@ -{old_start},{hunk.old_lines} +{new_start},{hunk.new_lines} @@")
        for line in hunk.lines:
            if line.endswith("\n"):
                text.append(line[:-1])
            else:
                text += [line, "\\ No newline at end of file"]
    return "\n".join(text) + "\n"


class EditDiff(NamedTuple):
    """What pi's generateEditDiff gives: the display diff, the unified patch and the first
    changed line of the new text (None when no line changed)."""

    diff: str
    patch: str
    first_changed: int | None


def edit_diff(path: str, base: str, new: str, replacements: list[Replacement]) -> EditDiff:
    """pi's generateEditDiff: `base` becoming `new` by these (sorted) replacements, the file
    named `path` (as the call names it) in the patch's headers."""
    width = len(str(max(base.count("\n"), new.count("\n")) + 1))
    marker = f" {''.rjust(width)} ..."
    output: list[str] = []
    hunks: list[Hunk] = []
    first_changed: int | None = None
    budget = Budget()
    for window in _windows(base, replacements):
        checkpoint()
        old, fresh = base[window.old_start:window.old_end], new[window.new_start:window.new_end]
        parts = diff_lines(old, fresh, budget)
        if parts is None:
            parts = _blocks(base, new, window) or _one_block(_tokenize(old), _tokenize(fresh))
        shown, first = _display(parts, window.old_line + 1, window.new_line + 1, width)
        if first_changed is None:
            first_changed = first
        if output and output[-1] == marker and shown and shown[0] == marker:
            shown.pop(0)  # both windows mark the lines between them: the whole diff marks once
        output.extend(shown)
        hunks += _hunks(parts, window.old_line, window.new_line)
    return EditDiff("\n".join(output), format_patch(path, hunks), first_changed)
