"""How much of a session's own text the server sends: a name, label, id or path comes from a
file a repository may ship, and a 40 MB name made every listing 40 MB per session."""

from __future__ import annotations

from typing import overload

CUT_MARK = "…"  # ends a cut text, as a cut title or preview ends
# pi 1.6 shows a name or label on one line, cut at the terminal's width: a longer one is seen
# by nobody, and a name typed by hand is a few words.
NAME_CHARS = 1000
LABEL_CHARS = 1000
# A row's preview: a message's is cut to a line where it is made, but a name's, a label's or a
# model change's ("label <id> = <label>") holds the file's text whole.
PREVIEW_CHARS = 1200
ID_CHARS = 200  # pi writes 36-character UUIDs
TIMESTAMP_CHARS = 64  # pi writes 24-character ISO times; the editors only show them
PATH_CHARS = 4096  # Linux's PATH_MAX: no folder a session ran in has a longer name


@overload
def capped(text: str, limit: int) -> str: ...
@overload
def capped(text: None, limit: int) -> None: ...
@overload
def capped(text: str | None, limit: int) -> str | None: ...


def capped(text: str | None, limit: int) -> str | None:
    """`text` as sent: whole up to `limit` characters, else its first `limit - 1` and "…"."""
    if text is None or len(text) <= limit:
        return text
    return text[:limit - 1] + CUT_MARK


def is_cut_of(sent: str | None, whole: str | None, limit: int) -> bool:
    """Whether `sent` is `whole` as the server cut it: an editor's prefilled name or label
    confirmed unchanged, which would write the cut text over the whole one."""
    return sent is not None and whole is not None and len(whole) > limit and \
        sent == capped(whole, limit)
