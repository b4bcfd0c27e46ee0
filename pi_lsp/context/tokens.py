"""Token estimates as pi makes them: UTF-16 characters / 4, rounded up."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import msgspec

from pi_lsp.context.projection import Projection
from pi_lsp.context.replay import current_system_message
from pi_lsp.session.entries import (
    AgentMessage,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    ReadMessage,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnreadMessage,
    Usage,
    UserBlock,
    UserMessage,
    read_message,
    read_usage,
)
from pi_lsp.session.journal import Record
from pi_lsp.session.jsontext import stringify
from pi_lsp.session.systemfields import section_entries

IMAGE_CHARS = 4800
FAILED = ("aborted", "error")


def utf16_length(text: str) -> int:
    """Length as JavaScript's `.length` counts it."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _js_length(value: object) -> int:
    """A field's `.length` as pi's estimate reads it, for text or a list; 0 for anything else
    (where pi's sum is NaN, or it fails on null and a missing field)."""
    if isinstance(value, str):
        return utf16_length(value)
    return len(value) if isinstance(value, list) else 0


def _block_chars(content: str | list[UserBlock]) -> int:
    if isinstance(content, str):
        return utf16_length(content)
    chars = 0
    for block in content:
        if isinstance(block, TextContent):
            chars += utf16_length(block.text)
        elif isinstance(block, ImageContent):
            chars += IMAGE_CHARS
    return chars


def message_chars(message: AgentMessage) -> int:
    match message:
        case SystemMessage():
            chars = _block_chars(message.content)
            chars += sum(utf16_length(v) for _, v in section_entries(message) if v)
            if message.tools_added is not None:
                chars += utf16_length(stringify(message.tools_added))
            return chars
        case UserMessage() | CustomMessage() | ToolResultMessage():
            return _block_chars(message.content)
        case AssistantMessage():
            chars = 0
            for block in message.content:
                if isinstance(block, TextContent):
                    chars += utf16_length(block.text)
                elif isinstance(block, ThinkingContent):
                    chars += utf16_length(block.thinking)
                elif isinstance(block, ToolCall):
                    chars += _js_length(block.name) + utf16_length(stringify(block.arguments))
            return chars
        case BashExecutionMessage():
            return _js_length(message.command) + _js_length(message.output)
        case BranchSummaryMessage() | CompactionSummaryMessage():
            return utf16_length(message.summary)
    return 0


def estimate_tokens(message: ReadMessage) -> int:
    if isinstance(message, UnreadMessage):
        return math.ceil(_unread_chars(message.value) / 4)
    return math.ceil(message_chars(message) / 4)


def _unread_chars(value: object) -> int:
    """`message_chars` read off a message as written, as far as pi reads it: a block of a type
    it does not know adds nothing, nor does a role it does not know or no object at all."""
    if not isinstance(value, dict):
        return 0
    role, content = value.get("role"), value.get("content")
    if role in ("user", "custom", "toolResult"):
        return _loose_content_chars(content)
    if role == "system":
        sections = value.get("sections")
        chars = _loose_content_chars(content)
        chars += sum(_js_length(v) for v in sections.values()) if isinstance(sections, dict) else 0
        tools = value.get("toolsAdded")
        return chars + (utf16_length(stringify(tools)) if tools is not None else 0)
    if role == "assistant":
        return sum(_loose_block_chars(block) for block in _dicts(content))
    if role == "bashExecution":
        return _js_length(value.get("command")) + _js_length(value.get("output"))
    if role in ("branchSummary", "compactionSummary"):
        return _js_length(value.get("summary"))
    return 0


def _dicts(content: object) -> list[dict[str, Any]]:
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _loose_content_chars(content: object) -> int:
    if isinstance(content, str):
        return utf16_length(content)
    chars = 0
    for block in _dicts(content):
        if block.get("type") == "text":
            chars += _js_length(block.get("text"))
        elif block.get("type") == "image":
            chars += IMAGE_CHARS
    return chars


def _loose_block_chars(block: dict[str, Any]) -> int:
    """A reply's block as pi's estimate counts it."""
    kind = block.get("type")
    if kind == "text":
        return _js_length(block.get("text"))
    if kind == "thinking":
        return _js_length(block.get("thinking"))
    if kind == "toolCall" and "arguments" in block:
        return _js_length(block.get("name")) + utf16_length(stringify(block["arguments"]))
    return 0


def message_tokens(raw: msgspec.Raw) -> int:
    """pi's estimate of a message as written."""
    return estimate_tokens(read_message(raw))


def usage_tokens(message: AssistantMessage) -> int:
    """The reply's reported context size: `totalTokens`, else the sum of its parts."""
    return _usage_total(message.usage)


def _usage_total(usage: Usage) -> int:
    if usage.total_tokens:
        return usage.total_tokens
    return usage.input + usage.output + usage.cache_read + usage.cache_write


def _reply_usage(message: ReadMessage) -> Usage | None:
    """The usage a reply that did not fail reports; a reply pi-lsp cannot type (an id-less tool
    call) is read as written, as pi 1.6 reads any message of role assistant."""
    if isinstance(message, AssistantMessage):
        return None if message.stop_reason in FAILED else message.usage
    if isinstance(message, UnreadMessage) and message.role == "assistant" \
            and message.value.get("stopReason") not in FAILED:
        return read_usage(message.value.get("usage"))
    return None


def last_reported(messages: Sequence[ReadMessage]) -> int:
    """The index of the last reply whose usage counts (not failed, not all zero), or -1."""
    for index in range(len(messages) - 1, -1, -1):
        usage = _reply_usage(messages[index])
        if usage is not None and _usage_total(usage) > 0:
            return index
    return -1


def context_size(messages: Sequence[ReadMessage]) -> int:
    """The last good reply's reported usage plus estimates of everything after it."""
    last_good = last_reported(messages)
    total = 0
    if last_good >= 0:
        usage = _reply_usage(messages[last_good])
        assert usage is not None
        total = _usage_total(usage)
    return total + sum(estimate_tokens(message) for message in messages[last_good + 1:])


def decode_all(messages: list[msgspec.Raw]) -> list[ReadMessage]:
    return [read_message(raw) for raw in messages]


def projected_context_size(projection: Projection, path: list[Record]) -> int:
    """pi 1.6's `estimateProjectedContextTokens` at the end of `path`."""
    return projected_tokens(projection, path, decode_all(projection.messages))


def projected_tokens(projection: Projection, path: list[Record],
                     messages: Sequence[ReadMessage]) -> int:
    """The same over the projection's messages as read: a reply's reported usage counts only
    when no edit or compaction came after it on the path (then only the messages after it
    are read); otherwise everything is estimated, system messages once, as the replayed one."""
    if projected_anchor(projection, path, messages) >= 0:
        return context_size(messages)
    system = current_system_message(messages)
    total = estimate_tokens(system) if system is not None else 0
    return total + sum(estimate_tokens(m) for m in messages
                       if not isinstance(m, SystemMessage))


def projected_anchor(projection: Projection, path: list[Record],
                     messages: Sequence[ReadMessage]) -> int:
    """The index of the reply whose reported usage `projected_tokens` starts from, or -1 when
    it estimates everything (no such reply, or an edit or compaction after it on the path)."""
    last_good = last_reported(messages)
    if last_good >= 0 and _holds(path, _source(projection, last_good, len(messages))):
        return last_good
    return -1


def _source(projection: Projection, message_index: int, count: int) -> Record:
    """The entry the message at `message_index` of `count` came from (found from the end,
    where the anchor reply usually is)."""
    after = count
    for entry in reversed(projection.entries):
        after -= len(entry.messages)
        if message_index >= after:
            return entry.record
    raise IndexError(message_index)


def _holds(path: list[Record], source: Record) -> bool:
    """Whether no edit or compaction comes after `source` on the path."""
    for record in reversed(path):
        if record is source:
            return True
        if record.env.type in ("context_edit", "compaction"):
            return False
    return False
