"""A conversation flattened to labelled text, so a summarizer reads it instead of continuing it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from pi_lsp.context.tokens import utf16_length
from pi_lsp.session.entries import (
    AssistantMessage,
    ModelMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UnreadMessage,
    UserMessage,
)
from pi_lsp.session.jsontext import js_entries, js_field, js_string, stringify

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
    return f"{call.name}({_arguments_text(call.arguments)})"


def loose_texts(content: Any, separator: str) -> str:
    """pi-ai's contentText of content as written: its text blocks' `text`s joined (Array.join
    writes null or a missing one as nothing). Content that is neither text nor a list gives
    nothing (pi's serializeConversation throws there)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = [js_field(block, "text") for block in content if js_field(block, "type") == "text"]
    return separator.join("" if t is None or t is msgspec.UNSET else js_string(t) for t in texts)


def _unread_parts(message: UnreadMessage) -> list[str]:
    """pi 1.6's text of a message pi-lsp has no type for, read off it as written."""
    content = js_field(message.value, "content")
    if message.role == "user":
        text = loose_texts(content, "")
        return [f"[User]: {text}"] if text else []
    if message.role == "toolResult":
        text = loose_texts(content, "")
        return [f"[Tool result]: {truncate_for_summary(text)}"] if text else []
    if message.role != "assistant" or not isinstance(content, list):
        return []
    parts = []
    if any(js_field(block, "type") == "text" for block in content):
        parts.append("[Assistant]: " + loose_texts(content, "\n"))
    calls = [f"{js_string(js_field(b, 'name'))}({_arguments_text(js_field(b, 'arguments'))})"
             for b in content if js_field(b, "type") == "toolCall"]
    if calls:
        parts.append("[Assistant tool calls]: " + "; ".join(calls))
    return parts


def _arguments_text(arguments: Any) -> str:
    return ", ".join(f"{key}={stringify(value)}" for key, value in js_entries(arguments))


def serialize_conversation(messages: Sequence[ModelMessage | UnreadMessage]) -> str:
    """pi 1.6's text: thinking and system messages are left out."""
    parts: list[str] = []
    for message in messages:
        if isinstance(message, UnreadMessage):
            parts.extend(_unread_parts(message))
        elif isinstance(message, UserMessage):
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
