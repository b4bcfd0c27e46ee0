"""The editor's diagnostics for files a turn changed, worded as a message to the model."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import msgspec

from pi_lsp.agent.events import AgentEvent, ToolExecutionEnd, ToolExecutionStart
from pi_lsp.agent.tools import ToolContext, ToolError

FEEDBACK_ROUNDS = 3  # diagnostics follow-ups per prompt, so a model that cannot fix them stops
PROBLEM_LIMIT = 30
SEVERITIES = {1: "error", 2: "warning"}  # LSP DiagnosticSeverity; hints and infos are left out
FILE_TOOLS = frozenset({"write", "edit"})
# Given the files a run changed, what the editor says is wrong with them (None: nothing).
Diagnostics = Callable[[list[Path]], Awaitable[str | None]]


class Position(msgspec.Struct):
    line: int
    character: int


class Span(msgspec.Struct):
    start: Position
    end: Position


class Problem(msgspec.Struct, omit_defaults=True):
    range: Span
    message: str
    severity: int | None = None
    source: str | None = None


class FileProblems(msgspec.Struct):
    path: Path
    items: list[Problem]


def problems_message(reports: list[FileProblems], root: Path) -> str | None:
    """Errors and warnings, errors first, capped; None when there are none."""
    lines: list[str] = []
    listed = total = 0
    for report in reports:
        shown = report.path.relative_to(root) if report.path.is_relative_to(root) \
            else report.path
        wanted = sorted((p for p in report.items if (p.severity or 1) in SEVERITIES),
                        key=lambda p: (p.severity or 1, p.range.start.line))
        total += len(wanted)
        for problem in wanted:
            if listed == PROBLEM_LIMIT:
                break
            listed += 1
            source = f" [{problem.source}]" if problem.source else ""
            lines.append(f"- {shown}:{problem.range.start.line + 1}:"
                         f"{problem.range.start.character + 1}: "
                         f"{SEVERITIES[problem.severity or 1]}{source}: {problem.message}")
    if not lines:
        return None
    if total > listed:
        lines.append(f"- … and {total - listed} more")
    return "The editor reports these problems in files you changed:\n" + "\n".join(lines)


class EditFeedback:
    """The files a prompt's write and edit calls changed, and the editor's problems in them
    for the model (at most FEEDBACK_ROUNDS times a prompt)."""

    def __init__(self, root: Path, diagnostics: Diagnostics | None) -> None:
        self.root = root
        self.diagnostics = diagnostics
        self._editing: dict[str, Path] = {}  # running write/edit calls: call id -> file
        self._touched: set[Path] = set()  # files this prompt's run changed
        self._rounds = 0

    def restart(self) -> None:
        """A new prompt: nothing changed yet, every round left."""
        self._touched.clear()
        self._rounds = 0

    def note(self, event: AgentEvent) -> None:
        if isinstance(event, ToolExecutionStart) and event.tool_name in FILE_TOOLS:
            with contextlib.suppress(ToolError, ValueError):  # the tool reports a bad path
                # realpath: Path.resolve raises on a symlink loop before Python 3.13.
                self._editing[event.tool_call_id] = Path(os.path.realpath(
                    ToolContext(self.root).given(event.args.get("path"))))
        elif isinstance(event, ToolExecutionEnd):
            path = self._editing.pop(event.tool_call_id, None)
            if path is not None and not event.is_error:
                self._touched.add(path)

    async def problems(self, aborted: bool) -> str | None:
        """The editor's problems in the files changed since the last call, if a round is left."""
        touched, self._touched = sorted(self._touched), set()
        if self.diagnostics is None or not touched or aborted or \
                self._rounds >= FEEDBACK_ROUNDS:
            return None
        text = await self.diagnostics(touched)
        if text is not None:
            self._rounds += 1
        return text
