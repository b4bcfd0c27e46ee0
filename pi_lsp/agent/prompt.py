"""The system prompt: who the agent is, its tools, where it works, and the project's notes."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from pathlib import Path

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


def build_system_prompt(root: Path, tools: Sequence[Tool], today: date | None = None) -> str:
    lines = [ROLE, "", "Tools:"]
    lines += [f"- {tool.name}: {tool.spec.description}" for tool in tools]
    day = (today or date.today()).isoformat()
    lines += ["", f"Working directory: {root}", f"Today's date: {day}"]
    for name, text in project_notes(root):
        lines += ["", f"Project instructions from {name}:", "", text]
    return "\n".join(lines)


def agent_setup(root: Path, tools: Sequence[Tool], registry: ModelRegistry,
                default_model: tuple[str, str]) -> AgentSetup:
    """What the agent working in `root` adds to a request: its prompt, tools and models."""
    return AgentSetup(registry, default_model, build_system_prompt(root, tools),
                      [tool.spec for tool in tools])
