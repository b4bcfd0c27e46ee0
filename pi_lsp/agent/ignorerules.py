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
# A `*` pinned to stop at the first backslash, when the backslashes after it may be none: it
# may stop before, so it stays a wildcard (of names with no backslash).
_TO_BACKSLASH = "[^/\\\\]*"
_PINNED = "(?:(?!"  # how any other pinned `*` begins
_FOLDERS, _SOME_FOLDERS, _ALL_WITHIN = "(?:/[^/]+)*", "(?:/[^/]+)+", "/.+"
# Those between folders, taking the fewest folders first or the most, never backtracking
# into a name (a `/` always follows).
_FEWEST = {_ANY_FOLDERS: "^(?:.*?/)??", _FOLDERS: "(?:/[^/]++)*?"}
_MOST = {_FOLDERS: "(?:/[^/]++)*", _SOME_FOLDERS: "(?:/[^/]++)+"}
# A line `ignore` skips: one ending in a backslash but after another. A rule matching nothing.
_LONE_BACKSLASH, _NOTHING = re.compile(r"(?:[^\\]|^)\\\Z"), "(?!)"
# Backslashes, so many or more; and what `ignore` leaves unescaped after a `\\\\` (its `.` as
# JavaScript's, `$` the end, `^` a start it never meets after a backslash).
_BACKSLASHES = re.compile(r"\\\\\{(\d+),\}")
_UNESCAPED = {".": "[^\\n\\r\u2028\u2029]", "$": "\\Z", "^": _NOTHING}
# POSIX's character classes, as `ignore` reads them (`graph`, `print` and `punct` leave out `/`).
_POSIX = {"alnum": "0-9A-Za-z", "alpha": "A-Za-z", "blank": " \\t", "cntrl": "\\x00-\\x1f\\x7f",
          "digit": "0-9", "graph": "!-.0-~", "lower": "a-z", "print": " -.0-~",
          "punct": "!-.:-@\\[-`{-~", "space": " \\t\\n\\r", "upper": "A-Z", "xdigit": "0-9A-Fa-f"}


@dataclass
class IgnoreRules:
    """The patterns added so far, as `ignore()` holds them: paths are relative and use `/`; a
    folder's ends in `/`."""

    # (negated, regex, of one name: no `/` in the pattern but a last one)
    rules: list[tuple[bool, re.Pattern[str], bool]] = field(default_factory=list)
    names: int = 0  # how many rules are of one name
    # Each path's answer until rules are added: a walk asks again for the folders above each.
    known: dict[str, bool] = field(default_factory=dict)

    def add(self, patterns: Iterable[str]) -> None:
        for pattern in patterns:
            rule = _rule(pattern)
            if rule is not None:
                self.rules.append(rule)
                self.names += rule[2]
        self.known.clear()

    def ignores(self, path: str) -> bool:
        """Whether `path` is ignored: by a folder it is in, else by the last rule matching it."""
        if path not in self.known:
            parent = _parent(path)
            self.known[path] = (bool(parent) and self.ignores(parent)) or self._matched(path)
        return self.known[path]

    def _matched(self, path: str) -> bool:
        """Whether the last rule matching `path` ignores it. Rules of one name, when at least
        half are, see its last name alone, as in `ignore`: the same but where a `\\\\.` there
        would match a `/` before it."""
        name = path[len(_parent(path)):] if self.names * 2 >= len(self.rules) else path
        return next((not negated for negated, regex, one in reversed(self.rules)
                     if regex.search(name if one else path)), False)


def _parent(path: str) -> str:
    """The folder `path` is in, with its `/`; "" at the top."""
    cut = path.rstrip("/").rfind("/")
    return path[:cut + 1] if cut >= 0 else ""


def _rule(pattern: str) -> tuple[bool, re.Pattern[str], bool] | None:
    """A pattern's rule, or None for what `ignore` skips: blank, a comment, a lone trailing
    backslash. An unclosed `[` or unknown POSIX class makes one matching nothing."""
    if pattern.strip(" ") == "" or pattern.startswith("#") or _LONE_BACKSLASH.search(pattern):
        return None
    negated = pattern.startswith("!")
    body = pattern[negated:]
    tokens = _tokens(_trimmed(body.removeprefix("\ufeff").rstrip("\r\n")))
    regex = _NOTHING if tokens is None else _regex(tokens, bool(_ANY_SLASH.search(body)))
    return negated, re.compile(regex, re.IGNORECASE), body.find("/") in (-1, len(body) - 1)


def _trimmed(body: str) -> str:
    """Trailing spaces dropped, but one escaped with a backslash (git's rule)."""
    kept = body.rstrip(" ")
    if kept == body:
        return body
    escapes = len(kept) - len(kept.rstrip("\\"))
    return kept + " " if escapes % 2 else kept


def _tokens(body: str) -> list[str] | None:
    """`*`, `/` and literals' regular expressions (`?`, `[...]` and backslashes' too); None
    when `ignore` makes a pattern that matches nothing."""
    tokens: list[str] = []
    at = 0
    while at < len(body):
        char = body[at]
        if body.startswith("\\\\", at):
            at = _escaped_backslashes(body, at, tokens)
            continue
        if char == "\\":
            # Only after `\\\\`s (else no rule): `ignore` reads JavaScript's `undefined` there
            tokens += map(_literal, body[at + 1:at + 2] or "undefined")
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


def _escaped_backslashes(body: str, at: int, tokens: list[str]) -> int:
    """The run of `\\\\`s at `at` as `ignore` reads it, added to `tokens`; where it ends.
    `ignore` unescapes what follows the run as well: a `*` (but a last one), `+`, `.`, `$`
    or `^` there keeps its meaning in a regular expression (`\\\\*x` is `x` after any
    number of backslashes)."""
    end = at
    while body.startswith("\\\\", end):
        end += 2
    count, char = (end - at) // 2, body[end:end + 1]
    if char == "+" or (char == "*" and body[end + 1:]):
        _add_backslashes(tokens, count - (char == "*"), True)
        return end + 1
    _add_backslashes(tokens, count, False)
    if char in _UNESCAPED:
        tokens.append(_UNESCAPED[char])
        return end + 1
    return end


def _add_backslashes(tokens: list[str], count: int, more: bool) -> None:
    """`count` backslashes (`more`: or more) after `tokens`, one token with a run before
    them that may be longer: a run of such tokens backtracked polynomially in its length."""
    if tokens and (run := _BACKSLASHES.fullmatch(tokens[-1])):
        tokens.pop()
        count, more = count + int(run[1]), True
    if not more:
        tokens += [_literal("\\")] * count
        return
    while tokens and tokens[-1] == _literal("\\"):
        tokens.pop()
        count += 1
    tokens.append(f"\\\\{{{count},}}")


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
            return _class(members, negated), at + 1


def _class(members: str, negated: bool) -> str:
    """A class never matching `/`, as `ignore` writes it: one that could is kept from it by a
    lookahead, which ends a run of pinned `*`s there."""
    if negated:
        return f"[^/{members}]"
    return f"(?!/)[{members}]" if re.fullmatch(f"[{members}]", "/") else f"[{members}]"


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
    at, trailing = first, False
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
        elif token == _STAR and tokens[at - 1] == _STAR and at > first:
            at += 1  # `**` in a name: one `*`, as `ignore` makes it (a last one with it too)
        elif token == _STAR and at == len(tokens) - 1:  # a last `*` after a `/`: a whole name
            # (an escaped `/` as well: `ignore` tells them apart no more by then)
            out.append(_WHOLE_NAME if at > first and tokens[at - 1] in (_SLASH, _literal(_SLASH))
                       else _NAME)
            at, trailing = at + 1, True
        else:
            out.append(_NAME if token == _STAR else token)
            at += 1
    # A pattern ending in `/` matches folders only; any other, what is in it too.
    end = r"\Z" if tokens[-1] == _SLASH and out[-1] == "/" else _END
    return _linear(out[0], _pinned(out[1:], trailing), end)


def _pinned(pieces: list[str], trailing: bool) -> list[str]:
    """The pieces with each `*` but the last of a run (between `**`s, an end, a class that
    could match `/`; across `/`s) pinned, as `ignore` 7.0.8 does: `trailing` when the last
    piece is a last `*`, which is no wildcard of a run there."""
    out, run = list(pieces), list[int]()
    for at, piece in enumerate([*pieces[:len(pieces) - trailing], _NOTHING]):
        if piece in (_FOLDERS, _SOME_FOLDERS, _UNESCAPED["$"], _NOTHING) or \
                piece.startswith("(?!/)"):
            for star in run[:-1]:
                out[star] = _pin(pieces[star + 1])
            run = []
        elif piece == _NAME:
            run.append(at)
    return out


def _pin(following: str) -> str:
    """A `*` stopping at the first character that could start `following`, the piece after
    it: `*ab*c` is `ab` at the first `a` (then `c` anywhere after), not at any `ab`."""
    run = _BACKSLASHES.fullmatch(following)
    if run and run[1] == "0":
        return _TO_BACKSLASH
    head = _literal("\\") if run else following
    # No shorter stop leaves `following` a character it matches: none is tried again.
    return f"{_PINNED}{head})[^/])*+"


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
    """The pieces of one name: one-character ones, runs of backslashes and `*`s."""
    parts, stars = [""], []
    for piece in _possessive(pieces):
        if piece in (_NAME, _WHOLE_NAME, _TO_BACKSLASH):
            parts[-1] += "[^/]" * (piece == _WHOLE_NAME)
            parts.append("")
            stars.append(piece[:-1])  # the character it repeats
        else:
            parts[-1] += piece
    return name_between_stars(parts, stars)


def _possessive(pieces: list[str]) -> list[str]:
    """The pieces with each run of backslashes taking its fewest before a `*` (which takes the
    rest), all there are before what cannot be a backslash, and its fewest after another run
    a piece between may take a backslash from: a name is matched in polynomial time."""
    out, shared = list(pieces), False  # whether a run before shares out the backslashes
    for at, piece in enumerate(pieces):
        run = _BACKSLASHES.fullmatch(piece)
        after = pieces[at + 1] if at + 1 < len(pieces) else ""
        if run and after in (_NAME, _WHOLE_NAME):
            out[at] = f"\\\\{{{run[1]}}}"
        elif run and not _may_be_backslash(after):
            out[at] += "+"
        elif run and shared:
            out[at] = f"\\\\{{{run[1]}}}"
        elif run:  # its fewest first: between `*`s a part is taken where it ends soonest
            out[at] += "?"
        # A row of pieces that may all be backslashes has its first run backtracked into, no
        # other (`\\\\*?` over and over backtracks exponentially in `ignore`): that misses only
        # where a piece in the row takes something else and a later run needs more.
        shared = (shared or bool(run)) and piece not in (_NAME, _WHOLE_NAME) and \
            _may_be_backslash(piece)
    return out


def _may_be_backslash(piece: str) -> bool:
    # A pinned `*` takes a backslash, or stops there for the piece after it to.
    return piece.startswith(_PINNED) or re.fullmatch(piece, "\\", re.IGNORECASE) is not None


def name_between_stars(parts: list[str], stars: list[str] | None = None) -> str:
    """A name matching `parts` (regular expressions within a name) with a `*` between
    each two (repeating `stars`' characters, else `[^/]`): each part at its leftmost place after
    the one before, the last at the name's end, none tried again; polynomial where `*`s as
    `[^/]*` backtrack exponentially."""
    if len(parts) == 1:
        return parts[0]
    stars = stars or ["[^/]"] * (len(parts) - 1)
    middle = "".join(f"(?>{star}*?{part})"
                     for star, part in zip(stars[:-1], parts[1:-1], strict=True) if part)
    return f"(?>{parts[0]}{middle}{stars[-1]}*{parts[-1]}(?=/|\\Z))"
