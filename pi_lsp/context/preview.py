"""Readable context previews and the difference between two leaves."""

from __future__ import annotations

import msgspec

from pi_lsp.context.build import build_leaf_context, context_tokens
from pi_lsp.context.layers import ContextLayer, LayerRow
from pi_lsp.session.entries import (
    AgentMessage,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    decode_message,
    encoder,
)
from pi_lsp.session.outline import content_text, message_preview, shorten
from pi_lsp.session.tree import SessionTree


def _describe(message: AgentMessage | None) -> str:
    match message:
        case None:
            return "(a message pi-lsp cannot read)"
        case CompactionSummaryMessage():
            return "compaction summary: " + shorten(message.summary)
        case BranchSummaryMessage():
            return "branch summary: " + shorten(message.summary)
    return message_preview(message)


def total_lines(preview: ContextLayer) -> list[str]:
    """The total, and how it is made when it is not the sum of the rows."""
    total = preview.total_tokens
    lines = [f"{len(preview.rows)} messages, about {total:,} tokens"]
    if preview.reported_at is not None:
        line = (f"  = {preview.reported_tokens:,}, the usage the model reported for its reply "
                f"at {preview.reported_at}")
        if preview.messages_after:
            plural = "" if preview.messages_after == 1 else "s"
            line += (f", + {total - preview.reported_tokens:,} estimated for the "
                     f"{preview.messages_after} message{plural} after it")
        lines.append(line)
    rows = sum(row.tokens for row in preview.rows)
    if rows != total:
        lines.append(f"  (each row is an estimate, characters / 4: they add up to {rows:,})")
    return lines


def render_preview(preview: ContextLayer) -> str:
    """The layer as lines for a terminal: one per message, then the total, model and level."""
    width = max((len(row.role) for row in preview.rows), default=4)
    lines = [f"context at {preview.leaf_id or '(empty)'} — layer {preview.layer}"]
    for row in preview.rows:
        text = _describe(decode_message(row.message))
        lines.append(f"  {row.entry_id or '-':<8}  {row.role:<{width}}  "
                     f"{row.tokens:>6} tok  {text}")
    lines += total_lines(preview)
    model = preview.model
    shown = f"{model.provider}/{model.model_id}" if model else "(none)"
    if preview.request is not None:
        shown = f"{preview.request.model.provider}/{preview.request.model.id}"
    lines.append(f"model: {shown}   thinking: {preview.thinking_level}")
    return "\n".join(lines)


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
                parts.append(f"_({message.stop_reason}: {message.error_message or ''})_")
            return "\n\n".join(parts)
        case ToolResultMessage():
            flag = " (error)" if message.is_error else ""
            return f"**{message.tool_name}{flag}**\n" + _fenced(content_text(message.content))
        case BashExecutionMessage():
            return _fenced(f"$ {message.command}\n{message.output}", "sh")
        case CompactionSummaryMessage():
            return "**Compacted history**\n\n" + _fenced(message.summary, "markdown")
        case BranchSummaryMessage():
            return ("**Summary of a branch that was explored and left**\n\n"
                    + _fenced(message.summary, "markdown"))
    return ""


def render_markdown(leaf_id: str | None, layer: str, messages: list[LayerRow],
                    total: int, window: int, thinking_level: str, model: str | None,
                    pages: list[tuple[int, list[LayerRow]]] | None = None) -> str:
    """The preview as Markdown; with `pages` (first index, messages) only those messages of
    `messages`, a line for each run left out."""
    lines = [
        f"# Context at `{leaf_id or '(empty)'}` — {total:,} of {window:,} tokens",
        "",
        f"**Model** {model or '(none)'} · **Thinking** {thinking_level} · **Layer** {layer} · "
        f"{len(messages)} messages",
    ]
    shown = 0
    for first, page in pages if pages is not None else [(0, messages)]:
        if first > shown:
            lines += ["", f"_… messages {shown + 1} to {first} not shown_"]
        for number, item in enumerate(page, first + 1):
            where = f" · `{item.entry_id}`" if item.entry_id else ""
            lines += ["", f"## {number}. {item.role} · {item.tokens:,} tokens{where}", "",
                      message_markdown(decode_message(item.message))]
        shown = first + len(page)
    if shown < len(messages):
        lines += ["", f"_… messages {shown + 1} to {len(messages)} not shown_"]
    return "\n".join(lines) + "\n"


class ContextDiff(msgspec.Struct, rename="camel"):
    only_from: list[str]
    only_to: list[str]
    from_tokens: int
    to_tokens: int


def diff_contexts(tree: SessionTree, from_leaf: str, to_leaf: str) -> ContextDiff:
    """Entries whose messages are in one leaf's context and not the other's."""
    first, second = build_leaf_context(tree, from_leaf), build_leaf_context(tree, to_leaf)
    in_first, in_second = set(first.entry_ids), set(second.entry_ids)
    return ContextDiff(
        only_from=[e for e in first.entry_ids if e not in in_second],
        only_to=[e for e in second.entry_ids if e not in in_first],
        from_tokens=context_tokens(tree, from_leaf),
        to_tokens=context_tokens(tree, to_leaf),
    )
