"""The system prompt: who the agent is, its tools, where it works, and the project's notes."""

from __future__ import annotations

import codecs
import logging
import os
from collections.abc import Sequence
from datetime import date
from pathlib import Path

import msgspec

from pi_lsp.agent.access import inside, secret_reason
from pi_lsp.agent.tools import Tool, open_regular
from pi_lsp.context.layers import AgentSetup
from pi_lsp.providers.registry import ModelRegistry

log = logging.getLogger(__name__)

PROJECT_NOTES = ("AGENTS.md", "CLAUDE.md")
NOTES_LIMIT = 32 * 1024

ROLE = """You are a coding agent working inside the user's editor, on the project in the \
working directory below. Help with software tasks by reading code, running commands and making \
changes with your tools. Work in small verified steps: look before you change, and run the \
project's tests or commands to check what you did. Be brief in what you say; show paths and \
exact errors. Ask when a request is ambiguous instead of guessing at something destructive."""


def _read_notes(path: Path, root: Path) -> str | None:
    """The first NOTES_LIMIT bytes of a notes file; None (logged) when there is none, or it is
    no regular file of the project's own or looks like a secret."""
    if not os.path.lexists(path):
        return None
    # A committed symlink may lead to /proc/self/environ or ~/.aws/credentials; one within the
    # project (CLAUDE.md -> AGENTS.md) is fine.
    real = Path(os.path.realpath(path))
    reason = secret_reason(path) or (
        None if inside(real, Path(os.path.realpath(root))) else "it leads outside the project")
    if reason is None:
        try:
            file = open_regular(path)
        except OSError as error:
            reason = error.strerror or str(error)
        else:
            if file is not None:
                with file:  # not final: a character cut at the limit is dropped, not replaced
                    return codecs.getincrementaldecoder("utf-8")("replace").decode(
                        file.read(NOTES_LIMIT))
            reason = "it is not a regular file"
    log.warning("%s: not read as project notes because %s", path, reason)
    return None


def project_notes(root: Path) -> list[tuple[str, str]]:
    """The project's notes files that can be read, by name, each cut to NOTES_LIMIT bytes."""
    notes = []
    for name in PROJECT_NOTES:
        text = _read_notes(root / name, root)
        if text is not None:
            notes.append((name, text.strip()))
    return notes


def system_sections(root: Path, tools: Sequence[Tool], today: date | None = None
                    ) -> dict[str, str]:
    """The prompt as pi 1.6 keeps it in a session: named sections in pi's order, each but the
    preamble wrapped in tags of its name."""
    sections = {"tools": "\n".join(f"- {tool.name}: {tool.spec.description}" for tool in tools)}
    notes = project_notes(root)
    if notes:
        sections["project_context"] = "\n\n".join(
            f"Project instructions from {name}:\n\n{text}" for name, text in notes)
    sections["cwd"] = str(root).replace("\\", "/")
    sections["date"] = f"Today's date: {(today or date.today()).isoformat()}"
    return {"preamble": ROLE, **{name: f"<{name}>\n{text}\n</{name}>"
                                 for name, text in sections.items()}}


def agent_setup(root: Path, tools: Sequence[Tool], registry: ModelRegistry,
                default_model: tuple[str, str], default_thinking_level: str) -> AgentSetup:
    """What the agent working in `root` adds to a request: its prompt, tools and models."""
    declarations = [{"name": tool.spec.name, "description": tool.spec.description,
                     "parameters": msgspec.json.decode(msgspec.json.encode(tool.spec.parameters))}
                    for tool in tools]
    return AgentSetup(registry, default_model, default_thinking_level,
                      system_sections(root, tools), declarations)
