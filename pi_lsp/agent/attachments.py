"""Code from the editor in a prompt: selections, whole files and `@path` mentions."""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path

import msgspec

from pi_lsp.agent.access import secret_reason
from pi_lsp.agent.splice import BOM
from pi_lsp.agent.tools import FileAccess

ATTACHMENT_CHAR_LIMIT = 100_000  # per file or selection; the rest is cut with a note
MENTION_BYTE_LIMIT = 1_000_000  # a bigger file named with @ stays a plain mention
MENTION = re.compile(r"(?<![\w@])@([\w.\-/]+[\w\-/])")
LINE_END = re.compile(r"\r\n?|\n")  # an editor's line ends (LSP), not str.splitlines'


class Range(msgspec.Struct, rename="camel"):
    """Zero-based lines, end inclusive of the line it names (LSP positions, characters ignored)."""

    start_line: int
    end_line: int


class Attachment(msgspec.Struct, rename="camel", omit_defaults=True):
    """A file or a part of one, as the editor sent it or as a mention named it."""

    path: Path
    text: str
    range: Range | None = None
    language_id: str | None = None


def render(attachment: Attachment, root: Path) -> str:
    """The attachment as the model reads it: a `<file>` element with a relative path."""
    shown = attachment.path.relative_to(root) if attachment.path.is_relative_to(root) \
        else attachment.path
    attrs = f'path="{shown}"'
    if attachment.range is not None:
        attrs += f' lines="{attachment.range.start_line + 1}-{attachment.range.end_line + 1}"'
    if attachment.language_id:
        attrs += f' language="{attachment.language_id}"'
    text = attachment.text
    if len(text) > ATTACHMENT_CHAR_LIMIT:
        text = text[:ATTACHMENT_CHAR_LIMIT] + \
            f"\n[cut: {len(text) - ATTACHMENT_CHAR_LIMIT} more characters]"
    if not text.endswith("\n"):
        text += "\n"
    return f"<file {attrs}>\n{text}</file>"


def file_content(text: str) -> str:
    """A file's text, read by pi-lsp, as pi 1.6 attaches it: less the one BOM it starts with
    (a second is the file's text); text the editor sent has none of the file's."""
    return text.removeprefix(BOM)


def line_count(text: str) -> int:
    """The text's lines as an editor counts them (LSP: each ends at \\n, \\r\\n or \\r)."""
    ends = text.count("\n") + text.count("\r") - text.count("\r\n")
    return ends + (1 if text and not text.endswith(("\n", "\r")) else 0)


def lines_of(text: str, span: Range) -> str:
    """The lines a range covers, ends kept, counted as an editor counts them: not at
    str.splitlines' ends, where a file's form feed or U+2028 would shift the lines named."""
    ends = (match.end() for match in LINE_END.finditer(text))
    starts = [0, *itertools.islice(ends, span.end_line + 1)]
    return text[starts[min(span.start_line, len(starts) - 1)]:
                starts[span.end_line + 1] if span.end_line + 1 < len(starts) else len(text)]


class Mentions(msgspec.Struct):
    found: list[Attachment]
    refused: list[str]  # why a named file was not attached, one line each


def mentions(text: str, root: Path, files: FileAccess) -> Mentions:
    """The files `@path` names in a prompt: inside the workspace and readable (a secret is
    refused as `read` refuses it); others stay text."""
    found: list[Attachment] = []
    refused: list[str] = []
    seen: set[Path] = set()
    # realpath: Path.resolve raises on a symlink loop (one a repository commits) before 3.13.
    resolved_root = Path(os.path.realpath(root))
    for match in MENTION.finditer(text):
        given = resolved_root / match.group(1)
        path = Path(os.path.realpath(given))
        if path in seen or not path.is_relative_to(resolved_root) or path.is_dir() or \
                (path.is_file() and path.stat().st_size > MENTION_BYTE_LIMIT):
            continue
        reason = secret_reason(given)
        if reason is not None:
            seen.add(path)
            refused.append(f"@{match.group(1)} was not attached: reading it is refused "
                           f"because {reason}")
            continue
        try:
            content = files.read_text(path)
        except (OSError, UnicodeDecodeError):
            continue  # not text: the mention stays plain text
        if content is None:
            continue
        seen.add(path)
        found.append(Attachment(path=path, text=file_content(content)))
    return Mentions(found, refused)
