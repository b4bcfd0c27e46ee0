"""A tool's `path` argument made absolute as pi 1.6 makes it (core/tools/path-utils.js), so a
call means the same file in pi and in pi-lsp: `@x` is `x`, a no-break space is a space."""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path

from pi_lsp.fileurl import file_url_path

UNICODE_SPACES = re.compile("[\u00a0\u2000-\u200a\u202f\u205f\u3000]")
SCREENSHOT_TIME = re.compile(r" (AM|PM)\.", re.IGNORECASE)


def resolve_to_cwd(raw: str, cwd: Path) -> Path:
    """`raw` as pi's resolveToCwd resolves it: Unicode spaces as spaces, one leading `@`
    dropped, `~` and `~/` at home, a file: URL as its path (FileUrlError if Node refuses it),
    then joined to `cwd` and normalized without following links."""
    text = UNICODE_SPACES.sub(" ", raw)
    text = text.removeprefix("@")
    home = os.path.expanduser("~")
    if text == "~":
        text = home
    elif text.startswith("~/"):
        text = os.path.join(home, text[2:])
    elif text.startswith("file://"):
        text = file_url_path(text)
    joined = os.path.normpath(os.path.join(cwd, text))
    return Path("/" + joined.lstrip("/"))  # node's resolve makes a leading "//" one slash too


def resolve_read_path(raw: str, cwd: Path) -> Path:
    """The path `read` opens, as pi's resolveReadPath finds it: `raw` resolved, else the first
    of macOS's spellings of a screenshot's name that exists (a narrow no-break space before
    AM/PM, decomposed accents, a curly apostrophe)."""
    resolved = resolve_to_cwd(raw, cwd)
    if os.path.exists(resolved):
        return resolved
    text = str(resolved)
    decomposed = unicodedata.normalize("NFD", text)
    variants = (SCREENSHOT_TIME.sub("\u202f\\1.", text), decomposed,
                text.replace("'", "\u2019"), decomposed.replace("'", "\u2019"))
    for variant in variants:
        if variant != text and os.path.exists(variant):
            return Path(variant)
    return resolved
