"""The editor's diagnostics for files a turn changed, worded as a message to the model."""

from __future__ import annotations

from pathlib import Path

import msgspec

FEEDBACK_ROUNDS = 3  # diagnostics follow-ups per prompt, so a model that cannot fix them stops
PROBLEM_LIMIT = 30
SEVERITIES = {1: "error", 2: "warning"}  # LSP DiagnosticSeverity; hints and infos are left out


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
