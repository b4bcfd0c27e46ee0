"""Text from a repository or a model made safe to show a person: nothing in it can hide, reorder
or fake what is around it."""

from __future__ import annotations

import re
import unicodedata

# Control and format characters (bidi overrides, zero-width ones), line and paragraph separators.
UNSAFE = ("Cc", "Cf", "Zl", "Zp")
# Longer runs of white space are spelled as their length: they could push what follows out of
# sight (`git status` + 1500 spaces + `; curl … | sh`).
LONG_RUN = 40
MANY_BREAKS = 3  # line breaks in a row, past which the rest could scroll out of a small box
WHITE_RUN = re.compile(r"\s{2,}")
# Characters that make text display in another order than it runs (Trojan Source).
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                          "\u2066\u2067\u2068\u2069")


def printable(text: str) -> str:
    """`text` for one terminal line: control characters and line breaks spelled as escapes."""
    return "".join(repr(char)[1:-1] if unicodedata.category(char) in UNSAFE else char
                   for char in text)


def _spelled(run: str) -> str:
    """A run of white space as it is, or as its length when too long to show as it is."""
    if len(run) <= LONG_RUN and run.count("\n") <= MANY_BREAKS:
        return run
    kind = "spaces" if run.strip(" ") == "" else \
        "line breaks" if run.strip("\n") == "" else "white space characters"
    return f"⟨{len(run)} {kind}⟩"


def visible(text: str) -> str:
    """`text` to approve: line breaks and tabs kept, other unsafe characters spelled as escapes,
    long runs of white space as their length."""
    lines = ["\t".join(map(printable, line.split("\t"))) for line in text.split("\n")]
    return WHITE_RUN.sub(lambda match: _spelled(match.group()), "\n".join(lines))


def bidi_controls(text: str) -> list[str]:
    """The bidi control characters in `text`, as `U+202E`, in order, once each."""
    return list(dict.fromkeys(f"U+{ord(char):04X}" for char in text if char in BIDI_CONTROLS))
