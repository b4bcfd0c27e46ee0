"""A conversation flattened to labelled text, so a summarizer reads it instead of continuing it."""

from __future__ import annotations

from pi_lsp.context.tokens import utf16_length
from pi_lsp.session.entries import (
    AssistantMessage,
    LlmMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    encoder,
)

TOOL_RESULT_MAX_CHARS = 2000


def utf16_prefix(text: str, units: int) -> str:
    """The first `units` UTF-16 code units, as JavaScript's `slice(0, units)` takes them."""
    encoded = text.encode("utf-16-le", "surrogatepass")[: units * 2]
    return encoded.decode("utf-16-le", "surrogatepass")


def truncate_for_summary(text: str, limit: int = TOOL_RESULT_MAX_CHARS) -> str:
    length = utf16_length(text)
    if length <= limit:
        return text
    return f"{utf16_prefix(text, limit)}\n\n[... {length - limit} more characters truncated]"


def _texts(content: str | list[object]) -> str:
    if isinstance(content, str):
        return content
    return "".join(block.text for block in content if isinstance(block, TextContent))


def _tool_call_text(call: ToolCall) -> str:
    arguments = ", ".join(f"{key}={encoder.encode(value).decode()}"
                          for key, value in call.arguments.items())
    return f"{call.name}({arguments})"


def serialize_conversation(messages: list[LlmMessage]) -> str:
    parts: list[str] = []
    for message in messages:
        if isinstance(message, UserMessage):
            text = _texts(message.content)  # type: ignore[arg-type]
            if text:
                parts.append(f"[User]: {text}")
        elif isinstance(message, AssistantMessage):
            texts = [b.text for b in message.content if isinstance(b, TextContent)]
            thoughts = [b.thinking for b in message.content if isinstance(b, ThinkingContent)]
            calls = [_tool_call_text(b) for b in message.content if isinstance(b, ToolCall)]
            if thoughts:
                parts.append("[Assistant thinking]: " + "\n".join(thoughts))
            if texts:
                parts.append("[Assistant]: " + "\n".join(texts))
            if calls:
                parts.append("[Assistant tool calls]: " + "; ".join(calls))
        elif isinstance(message, ToolResultMessage):
            text = _texts(message.content)  # type: ignore[arg-type]
            if text:
                parts.append(f"[Tool result]: {truncate_for_summary(text)}")
    return "\n\n".join(parts)
