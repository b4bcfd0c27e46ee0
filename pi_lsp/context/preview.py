"""Readable context previews and the difference between two leaves."""

from __future__ import annotations

import re

import msgspec

from pi_lsp.context.build import build_leaf_context, context_tokens
from pi_lsp.context.edits import EditMark
from pi_lsp.context.layers import ContextLayer, LayerRow
from pi_lsp.context.tokens import utf16_length
from pi_lsp.session.entries import (
    AgentMessage,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    decode_message,
    encoder,
)
from pi_lsp.session.jsontext import js_string, js_truthy
from pi_lsp.session.outline import content_text, message_preview, shorten
from pi_lsp.session.systemfields import listed_tools, section_entries
from pi_lsp.session.tree import SessionTree
from pi_lsp.visible import printable


def _describe(message: AgentMessage | None) -> str:
    match message:
        case None:
            return "(a message pi-lsp cannot read)"
        case CompactionSummaryMessage():
            return "compaction summary: " + shorten(message.summary)
        case BranchSummaryMessage():
            return "branch summary: " + shorten(message.summary)
    return message_preview(message)


def edits_line(edits: list[EditMark]) -> str | None:
    """What the context edits in force do to the estimate, or None when there are none."""
    if not edits:
        return None
    omitted = sum(1 for mark in edits if mark.kind == "omitted")
    parts = [f"{count} {kind}" for count, kind in
             ((omitted, "removed"), (len(edits) - omitted, "replaced")) if count]
    before = sum(mark.tokens_before for mark in edits)
    after = sum(mark.tokens_after for mark in edits)
    return (f"context edits: {', '.join(parts)}: their messages {before:,} → {after:,} tokens "
            f"({after - before:+,})")


def total_lines(preview: ContextLayer, rows: list[LayerRow]) -> list[str]:
    """The total, and how it is made when it is not the sum of the `rows`."""
    total = preview.total_tokens
    lines = [f"{len(rows)} messages, about {total:,} tokens"]
    if preview.reported_at is not None:
        line = (f"  = {preview.reported_tokens:,}, the usage the model reported for its reply "
                f"at {preview.reported_at}")
        if preview.messages_after:
            plural = "" if preview.messages_after == 1 else "s"
            line += (f", + {total - preview.reported_tokens:,} estimated for the "
                     f"{preview.messages_after} message{plural} after it")
        lines.append(line)
    added = sum(row.tokens for row in rows)
    if added != total:
        lines.append(f"  (each row is an estimate, characters / 4: they add up to {added:,})")
    edits = edits_line(preview.edits)
    if edits is not None:
        lines.append(edits)
    return lines


def render_preview(preview: ContextLayer) -> str:
    """The layer as lines for a terminal: one per message, then the total, model and level.
    Ids, names and previews are the session's: each line is escaped."""
    rows = preview.rows
    width = max((len(row.role) for row in rows), default=4)
    lines = [f"context at {preview.leaf_id or '(empty)'} — layer {preview.layer}"]
    omitted = removed_at(preview.edits)
    for index, row in enumerate([*rows, None]):
        for mark in omitted.get(index, []):
            lines.append(f"- {mark.target_id:<8}  {mark.role:<{width}}  {0:>6} tok  "
                         f"removed by edit {mark.edit_id} (was {mark.tokens_before:,} tok: "
                         f"{mark.original})")
        if row is None:
            break
        text = _describe(decode_message(row.message))
        edited = "✎" if row.edited else " "
        lines.append(f"{edited} {row.entry_id or '-':<8}  {row.role:<{width}}  "
                     f"{row.tokens:>6} tok  {text}")
    lines += total_lines(preview, rows)
    model = preview.model
    shown = "/".join(model.names()) if model else "(none)"
    if preview.request is not None:
        shown = f"{preview.request.model.provider}/{preview.request.model.id}"
    lines.append(f"model: {shown}   thinking: {preview.thinking_level}")
    return "\n".join(map(printable, lines))


def removed_at(edits: list[EditMark]) -> dict[int, list[EditMark]]:
    """The removed targets by the row index they stood before."""
    at: dict[int, list[EditMark]] = {}
    for mark in edits:
        if mark.kind == "omitted":
            at.setdefault(mark.position, []).append(mark)
    return at


def _fenced(text: str, info: str = "") -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}{info}\n{text}\n{fence}"


def message_markdown(message: AgentMessage | None) -> str:
    """The full text of one message as Markdown; summaries get a block of their own."""
    match message:
        case None:
            return "_(a message pi-lsp cannot read)_"
        case UserMessage() | CustomMessage():
            return content_text(message.content)
        case AssistantMessage():
            parts = []
            for block in message.content:
                if isinstance(block, ThinkingContent) and block.thinking:
                    parts.append("> _thinking_\n>\n" + "\n".join(
                        f"> {line}" for line in block.thinking.splitlines()))
                elif isinstance(block, TextContent):
                    parts.append(block.text)
                elif isinstance(block, ToolCall):
                    arguments = encoder.encode(block.arguments).decode()
                    parts.append(f"**→ {block.name}**\n" + _fenced(arguments, "json"))
            if message.stop_reason in ("error", "aborted"):
                # An error is no Markdown: its `*`, `_` and links read as the provider wrote them.
                failed = f"({message.stop_reason}: {message.error_message or ''})"
                parts.append(f"_{code_span(failed)}_")
            return "\n\n".join(parts)
        case ToolResultMessage():
            flag = " (error)" if js_truthy(message.is_error) else ""
            name = js_string(message.tool_name)
            return f"**{name}{flag}**\n" + _fenced(content_text(message.content))
        case BashExecutionMessage():
            output = js_string(message.output) if js_truthy(message.output) else ""
            return _fenced(f"$ {js_string(message.command)}\n{output}", "sh")
        case CompactionSummaryMessage():
            return "**Compacted history**\n\n" + _fenced(message.summary, "markdown")
        case BranchSummaryMessage():
            return ("**Summary of a branch that was explored and left**\n\n"
                    + _fenced(message.summary, "markdown"))
        case SystemMessage():
            return system_markdown(message)
    return ""


def system_markdown(message: SystemMessage) -> str:
    """A prompt checkpoint or patch: its own text, then the sections and tools it sets."""
    lines = []
    text = content_text(message.content)
    if text:
        lines.append(_fenced(text))
    for name, section in section_entries(message):
        lines.append(f"- section `{name}`: " + (
            "removed" if section is None else f"{utf16_length(section):,} characters"))
    added = [str(tool.get("name")) if isinstance(tool, dict) else "?"
             for tool in listed_tools(message.tools_added)]
    removed = [str(tool.get("name")) if isinstance(tool, dict) else "?"
               for tool in listed_tools(message.tools_removed)]
    if added:
        lines.append("- tools: " + ", ".join(f"`{name}`" for name in added))
    if removed:
        lines.append("- tools removed: " + ", ".join(f"`{name}`" for name in removed))
    return "\n".join(lines) or "_(an empty system message)_"


_LINE_BREAK = re.compile("\r\n|\r|\n")


class Heading(msgspec.Struct, rename="camel"):
    """Where a message of an entry is headed in a preview's Markdown (its 0-based line), so an
    editor knows the entry under its cursor without reading an id back from the text."""

    line: int
    entry_id: str | None  # None: a message of no entry (it cannot be edited)
    role: str
    state: str  # "kept", "replaced" (a context edit replaced it) or "removed"


class PreviewMarkdown(msgspec.Struct):
    text: str
    headings: list[Heading]


def code_span(text: str) -> str:
    """`text` as a Markdown code span on one line: control characters spelled as escapes, the
    backticks longer than any run of them inside."""
    shown = printable(text)
    ticks = "`"
    while ticks in shown:
        ticks += "`"
    pad = " " if shown.startswith("`") or shown.endswith("`") else ""
    return f"{ticks}{pad}{shown}{pad}{ticks}"


def render_markdown(leaf_id: str | None, layer: str, pages: list[tuple[int, list[LayerRow]]],
                    count: int, total: int, window: int, thinking_level: str,
                    model: str | None, edits: list[EditMark] | None = None) -> PreviewMarkdown:
    """The preview of `count` messages as Markdown, the context edits in force marked in place:
    the `pages` (first index, messages) given, a line for each run left out; and its headings."""
    lines: list[str] = []  # each of one or more lines
    headings: list[Heading] = []
    line = 0  # where the next one starts

    def add(*texts: str) -> None:
        nonlocal line
        for text in texts:  # counted: a message or a model's name may hold line breaks
            if "\r" in text:  # VS Code breaks lines at a lone CR, Neovim does not: both at LF
                text = _LINE_BREAK.sub("\n", text)
            lines.append(text)
            line += text.count("\n") + 1

    def heading(text: str, entry_id: str | None, role: str, state: str) -> None:
        headings.append(Heading(line, entry_id, role, state))
        add(text)

    add(f"# Context at {code_span(leaf_id or '(empty)')} — {total:,} of {window:,} tokens",
        "",
        f"**Model** {code_span(model) if model else '(none)'} · **Thinking** {thinking_level} · "
        f"**Layer** {layer} · {count} messages")
    summary = edits_line(edits or [])
    if summary is not None:
        add("", f"_{summary[0].upper()}{summary[1:]}_")
    omitted = removed_at(edits or [])
    replaced = {mark.target_id: mark for mark in edits or [] if mark.kind == "replaced"}

    def removed_before(index: int) -> None:
        for mark in omitted.get(index, []):
            add("")
            heading(f"## ~~{mark.role}~~ · removed from the context · "
                    f"{mark.tokens_before:,} → 0 tokens · {code_span(mark.target_id)}",
                    mark.target_id, mark.role, "removed")
            # The preview is the message as written (a path, an output): no Markdown.
            original = code_span(mark.original) if mark.original else ""
            add("", f"_Removed by the context edit {code_span(mark.edit_id)}: {original}_")

    shown = 0
    for first, page in pages:
        if first > shown:
            add("", f"_… messages {shown + 1} to {first} not shown_")
        for number, item in enumerate(page, first + 1):
            removed_before(number - 1)
            where = f" · {code_span(item.entry_id)}" if item.entry_id else ""
            was = replaced.get(item.entry_id or "") if item.edited else None
            edited = f" · ✎ replaced (was {was.tokens_before:,} tokens)" if was else ""
            add("")
            heading(f"## {number}. {item.role} · {item.tokens:,} tokens{edited}{where}",
                    item.entry_id, item.role, "replaced" if was else "kept")
            add("", message_markdown(decode_message(item.message)))
        shown = first + len(page)
    if shown < count:
        add("", f"_… messages {shown + 1} to {count} not shown_")
    else:
        removed_before(count)
    return PreviewMarkdown("\n".join(lines) + "\n", headings)


class ContextDiff(msgspec.Struct, rename="camel"):
    only_from: list[str]
    only_to: list[str]
    from_tokens: int
    to_tokens: int
    to_leaf_id: str


def diff_contexts(tree: SessionTree, from_leaf: str, to_leaf: str) -> ContextDiff:
    """Entries whose messages are in one leaf's context and not the other's."""
    first, second = build_leaf_context(tree, from_leaf), build_leaf_context(tree, to_leaf)
    in_first, in_second = set(first.entry_ids), set(second.entry_ids)
    return ContextDiff(
        only_from=[e for e in first.entry_ids if e not in in_second],
        only_to=[e for e in second.entry_ids if e not in in_first],
        from_tokens=context_tokens(tree, from_leaf),
        to_tokens=context_tokens(tree, to_leaf),
        to_leaf_id=to_leaf,
    )
