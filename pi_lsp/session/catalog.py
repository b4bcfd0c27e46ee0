"""Finding the sessions of a workspace: its own `.pi/sessions/` and the pi CLI's folder for it."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from pi_lsp.session.entries import TextContent, UserMessage, decode_message
from pi_lsp.session.ids import iso_to_ms
from pi_lsp.session.journal import NotASessionError
from pi_lsp.session.tree import SessionTree

FIRST_MESSAGE_CHARS = 200


class SessionSummary(msgspec.Struct, rename="camel"):
    path: str
    id: str
    name: str | None
    cwd: str
    created: str
    modified: str
    entry_count: int
    first_message: str | None
    parent_session: str | None


def workspace_session_dir(workspace: str) -> Path:
    return Path(workspace) / ".pi" / "sessions"


def agent_dir() -> Path:
    configured = os.environ.get("PI_CODING_AGENT_DIR")
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".pi" / "agent"


def cli_session_dir(cwd: str) -> Path:
    """The pi CLI's folder for sessions started in `cwd`."""
    encoded = cwd[1:] if cwd[:1] in ("/", "\\") else cwd
    for char in "/\\:":
        encoded = encoded.replace(char, "-")
    return agent_dir() / "sessions" / f"--{encoded}--"


def session_dirs(workspace: str) -> list[Path]:
    root = os.path.abspath(workspace)
    return [workspace_session_dir(root), cli_session_dir(root)]


class ForeignSessionError(Exception):
    """A path that is not a session file directly inside one of the session directories."""


def confine_session(path: Path, directories: list[Path]) -> Path:
    """`path` resolved, if it is a `.jsonl` file directly inside one of `directories` once every
    symlink is followed; otherwise ForeignSessionError saying where it leads."""
    resolved = path.resolve()
    allowed = {directory.resolve() for directory in directories}
    leads = f" (it leads to {resolved})" if resolved != Path(os.path.abspath(path)) else ""
    if resolved.suffix != ".jsonl":
        raise ForeignSessionError(f"{path}{leads} is not a .jsonl file")
    if resolved.parent not in allowed:
        listed = ", ".join(sorted(map(str, allowed))) or "none"
        raise ForeignSessionError(f"{path}{leads} is not directly inside one of its session "
                                  f"directories ({listed})")
    return resolved


def session_files(directories: list[Path]) -> list[Path]:
    """The session files directly in the directories; a symlink leading out is not one."""
    files: list[Path] = []
    for directory in directories:
        if directory.is_dir():
            real = directory.resolve()
            files.extend(sorted(p for p in directory.glob("*.jsonl")
                                if p.is_file() and p.resolve().parent == real))
    return files


def first_user_text(tree: SessionTree) -> str | None:
    for record in tree.records:
        if record.env.type != "message" or b'"user"' not in bytes(record.env.message):
            continue
        message = decode_message(record.env.message)
        if isinstance(message, UserMessage):
            content = message.content
            if isinstance(content, str):
                text = content
            else:
                text = " ".join(b.text for b in content if isinstance(b, TextContent))
            return text[:FIRST_MESSAGE_CHARS]
    return None


def summarize(path: Path) -> SessionSummary:
    tree = SessionTree.open(str(path))
    modified_ms = max((iso_to_ms(r.env.timestamp) for r in tree.records), default=0)
    modified = tree.header.timestamp
    if modified_ms > iso_to_ms(tree.header.timestamp):
        modified = next(r.env.timestamp for r in reversed(tree.records)
                        if iso_to_ms(r.env.timestamp) == modified_ms) or modified
    return SessionSummary(
        path=str(path),
        id=tree.header.id,
        name=tree.name,
        cwd=tree.header.cwd,
        created=tree.header.timestamp,
        modified=modified,
        entry_count=len(tree.records),
        first_message=first_user_text(tree),
        parent_session=tree.header.parent_session,
    )


def start_session(workspace: Path, provider: str, model_id: str, thinking_level: str,
                  path: Path | None = None) -> SessionTree:
    """A new session (under the workspace's `.pi/sessions/` unless `path` is given) that
    begins as pi begins one: with its model and thinking level."""
    if path is None:
        directory = workspace_session_dir(str(workspace))
        directory.mkdir(parents=True, exist_ok=True)
        tree = SessionTree.create_in(directory, str(workspace))
    else:
        tree = SessionTree.create(str(path), str(workspace))
    tree.append_model_change(provider, model_id)
    tree.append_thinking_level_change(thinking_level)
    return tree


def list_sessions(directories: list[Path]) -> list[SessionSummary]:
    """Every readable session in the directories, newest first; other files are skipped."""
    sessions: list[SessionSummary] = []
    for path in session_files(directories):
        try:
            sessions.append(summarize(path))
        except (NotASessionError, OSError):
            continue
    sessions.sort(key=lambda s: iso_to_ms(s.modified), reverse=True)
    return sessions
