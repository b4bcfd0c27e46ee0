"""A summarizer that needs no model: the structured headings filled from the entries themselves.

Deterministic: the same messages always give the same summary.
"""

from __future__ import annotations

import re

from pi_lsp.context.convert import exited_otherwise
from pi_lsp.session.entries import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    ReadMessage,
    TextContent,
    ToolResultMessage,
    UnreadMessage,
    UserMessage,
)
from pi_lsp.session.jsontext import js_field, js_string, js_truthy
from pi_lsp.session.outline import content_text
from pi_lsp.summarize.fileops import FileOps
from pi_lsp.summarize.serialize import loose_texts
from pi_lsp.summarize.summarizer import SPLIT_TURN_MARK, Summary, SummaryRequest

NONE = "(none)"
REQUEST_CHARS = 300
REPLY_CHARS = 400
MAX_ITEMS = 8
MERGED_ITEMS = 2 * MAX_ITEMS  # a section carried through compactions keeps its newest lines
FOCUS = "Focus: "
_CONSTRAINT = re.compile(
    r"\b(must|should|don't|do not|never|always|keep|prefer|avoid|without|only)\b", re.I)
_DECISION = re.compile(
    r"\b(instead|decided|decide|will use|going with|switch(ed)? to|rather than|chose|choose)\b",
    re.I)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_FILE_BLOCK = re.compile(r"<(read-files|modified-files)>.*?</\1>", re.S)


def _short(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s.strip()]


class Facts:
    """What the messages say, sorted into the summary's sections."""

    def __init__(self, messages: list[ReadMessage]) -> None:
        self.requests: list[str] = []
        self.replies: list[str] = []
        self.errors: list[str] = []
        self.earlier: list[str] = []
        self.files = FileOps()
        for message in messages:
            self._take(message)

    def _take(self, message: ReadMessage) -> None:
        self.files.add_message(message)
        match message:
            case UserMessage():
                text = content_text(message.content).strip()
                if text:
                    self.requests.append(text)
            case AssistantMessage():
                text = " ".join(b.text for b in message.content if isinstance(b, TextContent))
                if message.stop_reason == "error" and message.error_message:
                    self.errors.append(f"model error: {_short(message.error_message, 160)}")
                elif text.strip():
                    self.replies.append(text.strip())
            case ToolResultMessage() if js_truthy(message.is_error):
                first = content_text(message.content).strip().splitlines()
                name = js_string(message.tool_name)
                self.errors.append(f"{name}: {_short(first[0] if first else '', 160)}")
            case BashExecutionMessage() if exited_otherwise(message.exit_code):
                self.errors.append(f"`{js_string(message.command)}` exited with code "
                                   f"{js_string(message.exit_code)}")
            case BranchSummaryMessage() | CompactionSummaryMessage():
                self.earlier.append(_short(message.summary, REPLY_CHARS))
            case UnreadMessage(role="user" | "assistant"):
                # A text block whose text is no text beside texts: the model saw the texts.
                text = loose_texts(js_field(message.value, "content"), " ").strip()
                if text:
                    (self.requests if message.role == "user" else self.replies).append(text)

    def constraints(self) -> list[str]:
        found = [s for r in self.requests for s in _sentences(r) if _CONSTRAINT.search(s)]
        return [f"- {_short(s, 200)}" for s in found[:MAX_ITEMS]]

    def decisions(self) -> list[str]:
        found = [s for r in self.replies for s in _sentences(r) if _DECISION.search(s)]
        return [f"- {_short(s, 200)}" for s in found[-MAX_ITEMS:]]

    def done(self) -> list[str]:
        lists = self.files.lists()
        items = [f"- [x] Changed `{path}`" for path in lists.modified_files]
        items += [f"- [x] {_short(r, 160)}" for r in self.requests[:-1][-MAX_ITEMS:]]
        return items

    def in_progress(self) -> list[str]:
        return [f"- [ ] {_short(self.requests[-1], 200)}"] if self.requests else []

    def blocked(self) -> list[str]:
        return [f"- {e}" for e in self.errors[-MAX_ITEMS:]]

    def context(self) -> list[str]:
        lists = self.files.lists()
        items = []
        if lists.read_files:
            items.append("- Files read: " + ", ".join(f"`{p}`" for p in lists.read_files))
        items += [f"- Earlier summary: {e}" for e in self.earlier[-2:]]
        if self.replies:
            items.append(f"- Last reply: {_short(self.replies[-1], REPLY_CHARS)}")
        return items


def _section(heading: str, lines: list[str]) -> str:
    return f"{heading}\n" + ("\n".join(lines) if lines else NONE)


def _previous_sections(summary: str | None) -> dict[str, list[str]]:
    """The lines under each heading of an earlier summary, without its file lists."""
    text = (summary or "").split(SPLIT_TURN_MARK, 1)[0]
    text = _FILE_BLOCK.sub("", text)
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        if line.startswith("#"):
            current = line.strip()
            sections.setdefault(current, [])
        elif current and line.strip() and line.strip() != NONE:
            sections[current].append(line.rstrip())
    return sections


def _merged(previous: dict[str, list[str]], heading: str, lines: list[str]) -> list[str]:
    """A section's earlier lines and its new ones, the newest MERGED_ITEMS: a summary carried
    through every compaction of a long session must not grow with each (40 made 42K chars)."""
    earlier = previous.get(heading, [])
    return [*earlier, *(line for line in lines if line not in earlier)][-MERGED_ITEMS:]


class ExtractiveSummarizer:
    extractive = True

    async def summarize(self, request: SummaryRequest) -> Summary:
        return Summary(extractive_summary(request))


def extractive_summary(request: SummaryRequest) -> str:
    facts = Facts(request.messages)
    if request.kind == "turn_prefix":
        return "\n\n".join([
            _section("## Original Request",
                     [_short(facts.requests[0], REQUEST_CHARS)] if facts.requests else []),
            _section("## Early Progress", facts.done() + facts.blocked()),
            _section("## Context for Suffix", facts.context()),
        ])
    previous = _previous_sections(request.previous_summary)
    goal = previous.get("## Goal") or (
        [_short(facts.requests[0], REQUEST_CHARS)] if facts.requests else [])
    if request.instructions:  # this summary's focus, in place of an earlier one
        goal = [*(line for line in goal if not line.startswith(FOCUS)),
                f"{FOCUS}{_short(request.instructions, 200)}"]
    next_steps = [f"1. Continue with: {_short(facts.requests[-1], 200)}"] if facts.requests else []
    parts = [
        _section("## Goal", goal),
        _section("## Constraints & Preferences",
                 _merged(previous, "## Constraints & Preferences", facts.constraints())),
        "## Progress\n" + _section("### Done", _merged(previous, "### Done", facts.done())),
        _section("### In Progress", facts.in_progress()),
        _section("### Blocked", _merged(previous, "### Blocked", facts.blocked())),
        _section("## Key Decisions", _merged(previous, "## Key Decisions", facts.decisions())),
        _section("## Next Steps", next_steps),
    ]
    if request.kind == "history":
        parts.append(_section("## Critical Context",
                              _merged(previous, "## Critical Context", facts.context())))
    return "\n\n".join(parts)
