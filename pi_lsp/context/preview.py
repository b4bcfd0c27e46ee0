"""Readable context previews and the difference between two leaves."""

from __future__ import annotations

import msgspec

from pi_lsp.context.build import LeafContext, build_leaf_context
from pi_lsp.context.convert import convert_with_sources
from pi_lsp.context.tokens import context_size, decode_all, estimate_tokens
from pi_lsp.session.entries import (
    AgentMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    decode_message,
    role_of,
)
from pi_lsp.session.outline import message_preview, shorten
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
    return ContextPreview(
        leaf_id=leaf_id,
        layer=layer,
        messages=messages,
        total_tokens=context_size(decode_all(context.messages)),
        thinking_level=context.thinking_level,
        model=f"{model.provider}/{model.model_id}" if model else None,
    )


def render_preview(preview: ContextPreview) -> str:
    width = max((len(m.role) for m in preview.messages), default=4)
    lines = [f"context at {preview.leaf_id or '(empty)'} — layer {preview.layer}"]
    for message in preview.messages:
        lines.append(f"  {message.entry_id:<8}  {message.role:<{width}}  "
                     f"{message.tokens:>6} tok  {message.text}")
    lines.append(f"{len(preview.messages)} messages, about {preview.total_tokens} tokens")
    lines.append(f"model: {preview.model or '(none)'}   thinking: {preview.thinking_level}")
    return "\n".join(lines)
