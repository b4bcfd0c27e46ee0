"""A conversation flattened to labelled text, so a summarizer reads it instead of continuing it."""

from __future__ import annotations

from pi_lsp.context.tokens import utf16_length
from pi_lsp.session.entries import (
    AssistantMessage,
    ModelMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from pi_lsp.session.jsontext import js_entries, stringify

TOOL_RESULT_MAX_CHARS = 2000


def utf16_head(text: str, units: int) -> str:
    """The first `units` code units, one fewer when the cut would split a surrogate pair."""
    encoded = text.encode("utf-16-le", "surrogatepass")
    if 0 < units < len(encoded) // 2:
        last = int.from_bytes(encoded[units * 2 - 2:units * 2], "little")
        following = int.from_bytes(encoded[units * 2:units * 2 + 2], "little")
        if 0xD800 <= last <= 0xDBFF and 0xDC00 <= following <= 0xDFFF:
            units -= 1
    return encoded[: units * 2].decode("utf-16-le", "surrogatepass")


def truncate_for_summary(text: str, limit: int = TOOL_RESULT_MAX_CHARS) -> str:
    length = utf16_length(text)
    if length <= limit:
        return text
    # pi 1.6 reports the count as if the cut had kept `limit` units.
    return f"{utf16_head(text, limit)}\n\n[... {length - limit} more characters truncated]"


def _texts(content: str | list[object]) -> str:
    if isinstance(content, str):
        return content
    return "".join(block.text for block in content if isinstance(block, TextContent))


def _tool_call_text(call: ToolCall) -> str:
    arguments = ", ".join(f"{key}={stringify(value)}" for key, value in js_entries(call.arguments))
    return f"{call.name}({arguments})"


def serialize_conversation(messages: list[ModelMessage]) -> str:
    """pi 1.6's text: thinking and system messages are left out."""
    parts: list[str] = []
    for message in messages:
        if isinstance(message, UserMessage):
            text = _texts(message.content)  # type: ignore[arg-type]
            if text:
                parts.append(f"[User]: {text}")
        elif isinstance(message, AssistantMessage):
            texts = [b.text for b in message.content if isinstance(b, TextContent)]
            calls = [_tool_call_text(b) for b in message.content if isinstance(b, ToolCall)]
            if texts:
                parts.append("[Assistant]: " + "\n".join(texts))
            if calls:
                parts.append("[Assistant tool calls]: " + "; ".join(calls))
        elif isinstance(message, ToolResultMessage):
            text = _texts(message.content)  # type: ignore[arg-type]
            if text:
                parts.append(f"[Tool result]: {truncate_for_summary(text)}")
    return "\n\n".join(parts)
