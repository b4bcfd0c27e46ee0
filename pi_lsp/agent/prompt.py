"""The system prompt: who the agent is, its tools, where it works, and the project's notes."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from pathlib import Path

import msgspec

from pi_lsp.agent.tools import Tool
from pi_lsp.context.layers import AgentSetup
from pi_lsp.providers.registry import ModelRegistry

PROJECT_NOTES = ("AGENTS.md", "CLAUDE.md")
NOTES_LIMIT = 32 * 1024

ROLE = """You are a coding agent working inside the user's editor, on the project in the \
working directory below. Help with software tasks by reading code, running commands and making \
changes with your tools. Work in small verified steps: look before you change, and run the \
project's tests or commands to check what you did. Be brief in what you say; show paths and \
exact errors. Ask when a request is ambiguous instead of guessing at something destructive."""


def project_notes(root: Path) -> list[tuple[str, str]]:
    notes = []
    for name in PROJECT_NOTES:
        path = root / name
        if path.is_file():
            text = path.read_text("utf-8", errors="replace")[:NOTES_LIMIT]
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
                default_model: tuple[str, str]) -> AgentSetup:
    """What the agent working in `root` adds to a request: its prompt, tools and models."""
    declarations = [{"name": tool.spec.name, "description": tool.spec.description,
                     "parameters": msgspec.json.decode(msgspec.json.encode(tool.spec.parameters))}
                    for tool in tools]
    return AgentSetup(registry, default_model, system_sections(root, tools), declarations)
