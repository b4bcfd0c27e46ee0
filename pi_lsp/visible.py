"""Text from a repository or a model made safe to show a person: nothing in it can hide, reorder
or fake what is around it."""

from __future__ import annotations

import re
import unicodedata

# Control characters, line and paragraph separators: spelled as escapes in a terminal line.
UNSAFE = ("Cc", "Zl", "Zp")
# Characters that make text display in another order than it runs (Trojan Source): overrides,
# embeddings and isolates (the marks, U+200E/U+200F, only place neutral characters).
BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# Longer runs of white space in a line are spelled as their length: they could push what
# follows out of sight (`git status` + 1500 spaces + `; curl … | sh`).
LONG_RUN = 40
MANY_BREAKS = 3  # line breaks in a row, past which the rest could scroll out of a small box
SPACE_RUN = re.compile(rf"[^\S\n]{{{LONG_RUN + 1},}}")
BREAK_RUN = re.compile(rf"\n(?:[^\S\n]*\n){{{MANY_BREAKS},}}")


def printable(text: str) -> str:
    """`text` for one terminal line: control characters, line breaks and bidi controls spelled
    as escapes (joiners and other format characters stay: emoji and scripts need them)."""
    return "".join(repr(char)[1:-1] if char in BIDI_CONTROLS or
                   unicodedata.category(char) in UNSAFE else char for char in text)


def _escaped(text: str) -> str:
    """`printable`, with every format character (zero-width ones too) spelled as well."""
    return "".join(repr(char)[1:-1] if unicodedata.category(char) == "Cf" else char
                   for char in printable(text))


def _spaces(run: str) -> str:
    return f"⟨{len(run)} {'spaces' if run.strip(' ') == '' else 'white space characters'}⟩"


def visible(text: str) -> str:
    """`text` to approve: line breaks and tabs kept, other unsafe characters spelled as escapes,
    long runs of white space in a line, and of blank lines, as their length."""
    lines = ["\t".join(map(_escaped, line.split("\t"))) for line in text.split("\n")]
    text = BREAK_RUN.sub(lambda run: f"⟨{run.group().count(chr(10))} line breaks⟩",
                         "\n".join(lines))
    return SPACE_RUN.sub(lambda run: _spaces(run.group()), text)


def bidi_controls(text: str) -> list[str]:
    """The bidi control characters in `text`, as `U+202E`, in order, once each."""
    return list(dict.fromkeys(f"U+{ord(char):04X}" for char in text if char in BIDI_CONTROLS))
