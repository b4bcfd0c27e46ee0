"""Token estimates as pi makes them: UTF-16 characters / 4, rounded up."""

from __future__ import annotations

import math

import msgspec

from pi_lsp.session.entries import (
    AgentMessage,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserBlock,
    UserMessage,
    decode_message,
    encoder,
)

IMAGE_CHARS = 4800
FAILED = ("aborted", "error")


def utf16_length(text: str) -> int:
    """Length as JavaScript's `.length` counts it."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _block_chars(content: str | list[UserBlock], count_images: bool) -> int:
    if isinstance(content, str):
        return utf16_length(content)
    chars = 0
    for block in content:
        if isinstance(block, TextContent):
            chars += utf16_length(block.text)
        elif count_images and isinstance(block, ImageContent):
            chars += IMAGE_CHARS
    return chars


def message_chars(message: AgentMessage) -> int:
    match message:
        case UserMessage():
            return _block_chars(message.content, count_images=False)
        case AssistantMessage():
            chars = 0
            for block in message.content:
                if isinstance(block, TextContent):
                    chars += utf16_length(block.text)
                elif isinstance(block, ThinkingContent):
                    chars += utf16_length(block.thinking)
                elif isinstance(block, ToolCall):
                    arguments = encoder.encode(block.arguments).decode()
                    chars += utf16_length(block.name) + utf16_length(arguments)
            return chars
        case CustomMessage() | ToolResultMessage():
            return _block_chars(message.content, count_images=True)
        case BashExecutionMessage():
            return utf16_length(message.command) + utf16_length(message.output)
        case BranchSummaryMessage() | CompactionSummaryMessage():
            return utf16_length(message.summary)
    return 0


def estimate_tokens(message: AgentMessage) -> int:
    return math.ceil(message_chars(message) / 4)


def usage_tokens(message: AssistantMessage) -> int:
    usage = message.usage
    if usage.total_tokens:
        return usage.total_tokens
    return usage.input + usage.output + usage.cache_read + usage.cache_write


def last_reported(messages: list[AgentMessage | None]) -> int:
    """The index of the last reply whose usage counts (not failed), or -1."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, AssistantMessage) and message.stop_reason not in FAILED:
            return index
    return -1


def context_size(messages: list[AgentMessage | None]) -> int:
    """The last good reply's reported usage plus estimates of everything after it."""
    last_good = last_reported(messages)
    total = 0
    if last_good >= 0:
        anchor = messages[last_good]
        assert isinstance(anchor, AssistantMessage)
        total = usage_tokens(anchor)
    for message in messages[last_good + 1:]:
        if message is not None:
            total += estimate_tokens(message)
    return total


def decode_all(messages: list[msgspec.Raw]) -> list[AgentMessage | None]:
    return [decode_message(raw) for raw in messages]
