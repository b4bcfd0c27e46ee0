""".gitignore patterns as the npm `ignore` package (7.0) pi 1.6 uses matches them: last match
wins, case-insensitively, and nothing under an ignored folder comes back."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

# A pattern's tokens: these two, else a regular expression of one character (never these).
_STAR, _SLASH = "*", "/"
_ANY_SLASH = re.compile(r"/(?!$)")  # a slash but the last: the pattern is anchored at the top
# The end of a path or of a folder's path (`a/`): what a pattern matches needs no more after it.
_END = r"(?=\Z|/\Z)"
# The pieces `_regex` makes that match more than one character: where a match begins (at the
# top, at any depth, after any folders), `*` within a name (a whole name when last after a `/`),
# `**` between folders (at the end one or more) and a last `/**` (all within).
_TOP, _ANY_DEPTH, _ANY_FOLDERS = "^", "(?:^|/)", "^(?:.*/)?"
_NAME, _WHOLE_NAME = "[^/]*", "[^/]+"
_FOLDERS, _SOME_FOLDERS, _ALL_WITHIN = "(?:/[^/]+)*", "(?:/[^/]+)+", "/.+"
# Those between folders, taking the fewest folders first or the most, never backtracking
# into a name (a `/` always follows).
_FEWEST = {_ANY_FOLDERS: "^(?:.*?/)??", _FOLDERS: "(?:/[^/]++)*?"}
_MOST = {_FOLDERS: "(?:/[^/]++)*", _SOME_FOLDERS: "(?:/[^/]++)+"}
# POSIX's character classes, as `ignore` reads them (`graph`, `print` and `punct` leave out `/`).
_POSIX = {"alnum": "0-9A-Za-z", "alpha": "A-Za-z", "blank": " \\t", "cntrl": "\\x00-\\x1f\\x7f",
          "digit": "0-9", "graph": "!-.0-~", "lower": "a-z", "print": " -.0-~",
          "punct": "!-.:-@\\[-`{-~", "space": " \\t\\n\\r", "upper": "A-Z", "xdigit": "0-9A-Fa-f"}


@dataclass
class IgnoreRules:
    """The patterns added so far, as `ignore()` holds them: paths are relative and use `/`; a
    folder's ends in `/`."""

    rules: list[tuple[bool, re.Pattern[str]]] = field(default_factory=list)  # (negated, regex)
    # Each path's answer until rules are added: a walk asks again for the folders above each.
    known: dict[str, bool] = field(default_factory=dict)

    def add(self, patterns: Iterable[str]) -> None:
        for pattern in patterns:
            rule = _rule(pattern)
            if rule is not None:
                self.rules.append(rule)
        self.known.clear()

    def ignores(self, path: str) -> bool:
        """Whether `path` is ignored: by a folder it is in, else by the last rule matching it."""
        if path not in self.known:
            parent = _parent(path)
            self.known[path] = (bool(parent) and self.ignores(parent)) or \
                next((not negated for negated, regex in reversed(self.rules)
                      if regex.search(path)), False)
        return self.known[path]


def _parent(path: str) -> str:
    """The folder `path` is in, with its `/`; "" at the top."""
    cut = path.rstrip("/").rfind("/")
    return path[:cut + 1] if cut >= 0 else ""


def _rule(pattern: str) -> tuple[bool, re.Pattern[str]] | None:
    """A pattern's rule, or None for what `ignore` skips: blank, a comment, a lone trailing
    backslash; and, matching nothing there either, an unclosed `[` or unknown POSIX class."""
    if pattern.strip(" ") == "" or pattern.startswith("#"):
        return None
    negated = pattern.startswith("!")
    body = pattern[negated:]
    tokens = _tokens(_trimmed(body.removeprefix("\ufeff").rstrip("\r\n")))
    if tokens is None:
        return None
    return negated, re.compile(_regex(tokens, bool(_ANY_SLASH.search(body))), re.IGNORECASE)


def _trimmed(body: str) -> str:
    """Trailing spaces dropped, but one escaped with a backslash (git's rule)."""
    kept = body.rstrip(" ")
    if kept == body:
        return body
    escapes = len(kept) - len(kept.rstrip("\\"))
    return kept + " " if escapes % 2 else kept


def _tokens(body: str) -> list[str] | None:
    """`*`, `/` and literals' regular expressions (`?` and `[...]` too); None when `ignore`
    makes a pattern that matches nothing."""
    tokens: list[str] = []
    at = 0
    while at < len(body):
        char = body[at]
        if char == "\\":
            if at + 1 == len(body):
                return None
            tokens.append(_literal(body[at + 1]))
            at += 2
            continue
        if char == "[":
            bracket = _bracket(body, at)
            if bracket is None:
                return None
            source, at = bracket
            tokens.append(source)
            continue
        tokens.append(char if char in (_STAR, _SLASH) else "[^/]" if char == "?" else
                      _literal(char))
        at += 1
    return tokens


def _literal(char: str) -> str:
    return "\\/" if char == "/" else re.escape(char)


def _bracket(body: str, start: int) -> tuple[str, int] | None:
    """The class `[...]` at `start` (`!` or `^` negating, ranges, escapes; it never matches
    `/`) and where it ends; None when it is not closed or names no POSIX class."""
    at, members, previous = start + 1, "", ""
    negated = body[at:at + 1] in ("!", "^")
    at += negated
    while True:
        if at >= len(body):
            return None
        char = body[at]
        if body.startswith("[:", at):
            close = body.find("]", at + 2)
            if close == -1:
                return None
            name = body[at + 2:close]
            if name.endswith(":"):
                if name[:-1] not in _POSIX:
                    return None
                members, previous, at = members + _POSIX[name[:-1]], "", close
            else:  # `[:` without a name: a `[`
                members, previous = members + re.escape(char), char
        elif char == "\\":
            if at + 1 >= len(body):
                return None
            char = previous = body[at + 1]
            members += re.escape(char)
            at += 1
        elif char == "-" and previous and at + 1 < len(body) and body[at + 1] != "]":
            at += 1
            end = body[at + 1] if body[at] == "\\" and at + 1 < len(body) else body[at]
            at += body[at] == "\\"
            if previous <= end:  # a backwards range is dropped, as `ignore` drops it
                members += f"-{re.escape(end)}"
            previous = ""
        else:
            members += re.escape(char)
            previous = char
        at += 1
        if body[at:at + 1] == "]":
            return (f"[^/{members}]" if negated else f"(?!/)[{members}]"), at + 1


def _regex(tokens: list[str], anchored: bool) -> str:
    """The regular expression `ignore` makes of a pattern's tokens; `anchored` when a slash
    but a trailing one ties it to the top, else it matches at any depth."""
    if not tokens:
        return ""  # `!` alone: every path
    first = 1 if tokens[0] == _SLASH else 0
    out = [_TOP if first or anchored else _ANY_DEPTH]
    while tokens[first:first + 3] == [_STAR, _STAR, _SLASH]:  # `**/`: in any folder
        first += 3
        out = [_ANY_FOLDERS]
    at = first
    while at < len(tokens):
        # What follows a `/**`, no more than tells its kind: the whole rest made each
        # pattern's reading quadratic (2 s for a 64 KB line).
        token, rest = tokens[at], tokens[at + 3:at + 5]
        if token == _SLASH and tokens[at + 1:at + 3] == [_STAR, _STAR] and \
                rest[:1] in ([], [_SLASH]):
            # `/**` at the end: all within; `/**/`: any folders between, at the end one or more
            out.append(_ALL_WITHIN if not rest else _SOME_FOLDERS if rest == [_SLASH] else
                       _FOLDERS)
            at += 3
        elif token == _STAR and at == len(tokens) - 1:  # a last `*` after a `/`: a whole name
            out.append(_WHOLE_NAME if at > first and tokens[at - 1] == _SLASH else _NAME)
            at += 1
        else:
            out.append(_NAME if token == _STAR else token)
            at += 1
    # A pattern ending in `/` matches folders only; any other, what is in it too.
    end = r"\Z" if tokens[-1] == _SLASH and out[-1] == "/" else _END
    return _linear(out[0], out[1:], end)


def _linear(start: str, pieces: list[str], end: str) -> str:
    """`start + "".join(pieces) + end` as a regular expression matching the same in polynomial
    time (the plain one backtracks exponentially on `*a*a*a*b` or `a/**/b/**/c/**/d`)."""
    blocks: list[list[str]] = [[]]  # the pieces between `**`s
    gaps = [start]  # what comes before each block
    for piece in pieces:
        if piece not in (_FOLDERS, _SOME_FOLDERS):
            blocks[-1].append(piece)
        elif not blocks[-1] and gaps[-1] == _FOLDERS:  # `**/**`: the same as one
            gaps[-1] = piece
        else:
            gaps.append(piece)
            blocks.append([])
    within = blocks[-1][-1:] == [_ALL_WITHIN]
    if within:
        blocks[-1].pop()
    out: list[str] = []
    for at, (gap, block) in enumerate(zip(gaps, blocks, strict=True)):
        # A block with a gap after it takes its leftmost match for good: a later one leaves
        # the rest less room (on paths with no empty name, `a//b`, which no walk meets: a
        # `**` never crosses one). Before a last `/**` its rightmost: `.` stops at a newline.
        if at < len(blocks) - 1:
            out.append(f"(?>{_FEWEST.get(gap, gap)}{_block(block)}(?=/))")
        elif within:
            out.append(f"(?>{_MOST.get(gap, gap)}{_block(block)}(?=/.))/.++")
        else:
            out.append(_MOST.get(gap, gap) + _block(block))
    return "".join(out) + end


def _block(pieces: list[str]) -> str:
    """The pieces of a block (no `**` between folders in it), name by name."""
    out: list[str] = []
    name: list[str] = []
    for piece in pieces:
        if piece in (_SLASH, _literal(_SLASH)):
            out += [_name(name), piece]
            name = []
        else:
            name.append(piece)
    return "".join([*out, _name(name)])


def _name(pieces: list[str]) -> str:
    """The pieces of one name: one-character ones and `*`s."""
    parts = [""]
    for piece in pieces:
        if piece in (_NAME, _WHOLE_NAME):
            parts[-1] += "[^/]" * (piece == _WHOLE_NAME)
            parts.append("")
        else:
            parts[-1] += piece
    return name_between_stars(parts)


def name_between_stars(parts: list[str]) -> str:
    """A name matching `parts` (regular expressions of fixed length, no `/`) with a `*` between
    each two: each part at its leftmost place after the one before, the last at the name's end,
    none tried again; polynomial where `*`s as `[^/]*` backtrack exponentially."""
    if len(parts) == 1:
        return parts[0]
    middle = "".join(f"(?>[^/]*?{part})" for part in parts[1:-1] if part)
    return f"(?>{parts[0]}{middle}[^/]*{parts[-1]}(?=/|\\Z))"
