"""Readable context previews and the difference between two leaves."""

from __future__ import annotations

import msgspec

from pi_lsp.context.build import LeafContext, build_leaf_context, context_tokens
from pi_lsp.context.convert import convert_with_sources
from pi_lsp.context.tokens import (
    decode_all,
    estimate_tokens,
    last_reported,
    usage_tokens,
)
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
    role_of,
)
from pi_lsp.session.outline import content_text, message_preview, shorten
from pi_lsp.session.tree import SessionTree


class PreviewMessage(msgspec.Struct, rename="camel"):
    entry_id: str
    role: str
    tokens: int
    text: str


class ContextPreview(msgspec.Struct, rename="camel"):
    leaf_id: str | None
    layer: str
    messages: list[PreviewMessage]
    total_tokens: int
    thinking_level: str
    model: str | None
    reported_at: str | None  # the reply whose reported usage the total starts from
    reported_tokens: int
    messages_after: int  # estimated one by one, after that reply


def _describe(message: AgentMessage | None) -> str:
    match message:
        case None:
            return "(a message pi-lsp cannot read)"
        case CompactionSummaryMessage():
            return "compaction summary: " + shorten(message.summary)
        case BranchSummaryMessage():
            return "branch summary: " + shorten(message.summary)
    return message_preview(message)


def preview_context(tree: SessionTree, leaf_id: str | None, layer: str) -> ContextPreview:
    """Each message of the layer with its source entry and token estimate, and the total."""
    built: LeafContext = build_leaf_context(tree, leaf_id)
    context = built.context
    pairs: list[tuple[int, msgspec.Raw]]
    if layer == "llm":
        pairs = convert_with_sources(context.messages)
    else:
        pairs = list(enumerate(context.messages))
    decoded = [decode_message(raw) for _, raw in pairs]
    messages = [
        PreviewMessage(
            entry_id=built.entry_ids[source],
            role=role_of(message) if message is not None else "?",
            tokens=estimate_tokens(message) if message is not None else 0,
            text=_describe(message),
        )
        for (source, _), message in zip(pairs, decoded, strict=True)
    ]
    model = context.model
    agent_messages = decode_all(context.messages)
    anchor = last_reported(agent_messages)
    reply = agent_messages[anchor] if anchor >= 0 else None
    return ContextPreview(
        leaf_id=leaf_id,
        layer=layer,
        messages=messages,
        total_tokens=context_tokens(tree, leaf_id),
        thinking_level=context.thinking_level,
        model=f"{model.provider}/{model.model_id}" if model else None,
        reported_at=built.entry_ids[anchor] if reply is not None else None,
        reported_tokens=usage_tokens(reply) if isinstance(reply, AssistantMessage) else 0,
        messages_after=len(agent_messages) - anchor - 1,
    )


def total_lines(preview: ContextPreview) -> list[str]:
    """The total, and how it is made when it is not the sum of the rows."""
    total = preview.total_tokens
    lines = [f"{len(preview.messages)} messages, about {total:,} tokens"]
    if preview.reported_at is not None:
        line = (f"  = {preview.reported_tokens:,}, the usage the model reported for its reply "
                f"at {preview.reported_at}")
        if preview.messages_after:
            plural = "" if preview.messages_after == 1 else "s"
            line += (f", + {total - preview.reported_tokens:,} estimated for the "
                     f"{preview.messages_after} message{plural} after it")
        lines.append(line)
    rows = sum(m.tokens for m in preview.messages)
    if rows != total:
        lines.append(f"  (each row is an estimate, characters / 4: they add up to {rows:,})")
    return lines


def render_preview(preview: ContextPreview) -> str:
    width = max((len(m.role) for m in preview.messages), default=4)
    lines = [f"context at {preview.leaf_id or '(empty)'} — layer {preview.layer}"]
    for message in preview.messages:
        lines.append(f"  {message.entry_id:<8}  {message.role:<{width}}  "
                     f"{message.tokens:>6} tok  {message.text}")
    lines += total_lines(preview)
    lines.append(f"model: {preview.model or '(none)'}   thinking: {preview.thinking_level}")
    return "\n".join(lines)


class LayerMessage(msgspec.Struct, rename="camel"):
    """One message of a context layer, with the entry it came from and its estimate."""

    entry_id: str | None
    role: str
    tokens: int
    message: msgspec.Raw


def layer_messages(built: LeafContext, layer: str) -> list[LayerMessage]:
    """The messages of the `agent` or `llm` layer of a built context."""
    messages = built.context.messages
    pairs = convert_with_sources(messages) if layer == "llm" else list(enumerate(messages))
    result = []
    for source, raw in pairs:
        message = decode_message(raw)
        result.append(LayerMessage(
            entry_id=built.entry_ids[source],
            role=role_of(message) if message is not None else "?",
            tokens=estimate_tokens(message) if message is not None else 0,
            message=raw,
        ))
    return result


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


def render_markdown(leaf_id: str | None, layer: str, messages: list[LayerMessage],
                    total: int, window: int, thinking_level: str, model: str | None) -> str:
    lines = [
        f"# Context at `{leaf_id or '(empty)'}` — {total:,} of {window:,} tokens",
        "",
        f"**Model** {model or '(none)'} · **Thinking** {thinking_level} · **Layer** {layer} · "
        f"{len(messages)} messages",
    ]
    for number, item in enumerate(messages, 1):
        where = f" · `{item.entry_id}`" if item.entry_id else ""
        lines += ["", f"## {number}. {item.role} · {item.tokens:,} tokens{where}", "",
                  message_markdown(decode_message(item.message))]
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
