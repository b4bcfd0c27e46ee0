"""Text from a repository or a model made safe to show a person: nothing in it can hide, reorder
or fake what is around it."""

from __future__ import annotations

import re
import unicodedata

# Characters that make text display in another order than it runs (Trojan Source): overrides,
# embeddings and isolates (the marks, U+200E/U+200F, only place neutral characters).
BIDI = r"\u202a-\u202e\u2066-\u2069"
BIDI_CONTROL = re.compile(f"[{BIDI}]")
# What no terminal line may hold as it is: control characters (Unicode's Cc: escape sequences),
# line and paragraph separators (Zl, Zp: a line of its own) and the bidi controls. All that
# renders text for a person (`printable`, `printable_lines`, `outline.shorten`) uses this one set.
UNSAFE = re.compile(rf"[\x00-\x1f\x7f-\x9f\u2028\u2029{BIDI}]")
# Longer runs of white space in a line are spelled as their length: they could push what
# follows out of sight (`git status` + 1500 spaces + `; curl … | sh`).
LONG_RUN = 40
MANY_BREAKS = 3  # line breaks in a row, past which the rest could scroll out of a small box
SPACE_RUN = re.compile(rf"[^\S\n]{{{LONG_RUN + 1},}}")
BREAK_RUN = re.compile(rf"\n(?:[^\S\n]*\n){{{MANY_BREAKS},}}")


def _spelled(unsafe: re.Match[str]) -> str:
    return repr(unsafe.group())[1:-1]


def printable(text: str) -> str:
    """`text` for one terminal line: control characters, line breaks and bidi controls spelled
    as escapes (joiners and other format characters stay: emoji and scripts need them)."""
    return UNSAFE.sub(_spelled, text)


def printable_lines(text: str) -> str:
    """`text` of several lines for a terminal (a summary, a prompt): `printable`, its line
    breaks and tabs kept."""
    return UNSAFE.sub(lambda unsafe: unsafe.group() if unsafe.group() in "\n\t"
                      else _spelled(unsafe), text)


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
    return list(dict.fromkeys(f"U+{ord(char):04X}" for char in BIDI_CONTROL.findall(text)))
