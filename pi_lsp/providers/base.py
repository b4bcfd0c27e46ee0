"""What every provider takes and gives: a neutral request, stream events, a pi-shaped reply."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, Protocol

import msgspec

from pi_lsp.providers.registry import ModelInfo
from pi_lsp.session.entries import (
    AssistantBlock,
    AssistantMessage,
    Cost,
    LlmMessage,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
)
from pi_lsp.session.ids import now_ms


class MissingApiKeyError(Exception):
    """No API key for a provider; says where one can be set."""

    def __str__(self) -> str:
        provider = self.args[0]
        if provider == "anthropic":
            return "no Anthropic API key: set ANTHROPIC_API_KEY or apiKeys.anthropic in settings"
        if provider == "openai":
            return "no OpenAI API key: set OPENAI_API_KEY or apiKeys.openai in settings"
        return (f"no API key for provider {provider!r}: set providers.{provider}.apiKey in "
                f"models.json (a local server accepts any value) or apiKeys.{provider} in "
                f"settings")


class ToolSpec(msgspec.Struct):
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments


class ModelRequest(msgspec.Struct):
    model: ModelInfo
    system_prompt: str
    messages: list[LlmMessage]
    tools: list[ToolSpec]
    thinking_level: str
    max_tokens: int | None = None


class StreamEvent(msgspec.Struct, tag_field="type", rename="camel", kw_only=True):
    """A change to the reply being assembled; `content_index` names the block."""

    content_index: int = 0


class TextDelta(StreamEvent, tag="text_delta", kw_only=True):
    delta: str


class ThinkingDelta(StreamEvent, tag="thinking_delta", kw_only=True):
    delta: str


class ToolCallDelta(StreamEvent, tag="toolcall_delta", kw_only=True):
    delta: str


class BlockEnd(StreamEvent, tag="block_end", kw_only=True):
    pass


ProviderEvent = TextDelta | ThinkingDelta | ToolCallDelta | BlockEnd


class Provider(Protocol):
    name: str

    def stream(self, request: ModelRequest, reply: ReplyBuilder) -> AsyncIterator[ProviderEvent]:
        """Yield events while filling `reply`; errors end up in the reply, never raised."""
        ...


def cost_of(usage: Usage, model: ModelInfo) -> Cost:
    price = model.price

    def dollars(tokens: int, per_million: float) -> int | float:
        value = tokens * per_million / 1_000_000
        return int(value) if value == int(value) else value

    parts = (
        dollars(usage.input, price.input),
        dollars(usage.output, price.output),
        dollars(usage.cache_read, price.cache_read),
        dollars(usage.cache_write, price.cache_write),
    )
    total = sum(parts)
    return Cost(*parts, total=int(total) if total == int(total) else total)


class ReplyBuilder:
    """Assembles an assistant message from stream pieces, the way pi stores it."""

    def __init__(self, api: str, model: ModelInfo) -> None:
        self.api = api
        self.model = model
        self.blocks: list[AssistantBlock] = []
        self._tool_json: dict[int, str] = {}
        self.usage = Usage()
        self.stop_reason: StopReason = "stop"
        self.error_message: str | None = None
        self.timestamp = now_ms()

    def start_text(self) -> int:
        self.blocks.append(TextContent(text=""))
        return len(self.blocks) - 1

    def start_thinking(self, redacted_data: str | None = None) -> int:
        if redacted_data is None:
            self.blocks.append(ThinkingContent(thinking=""))
        else:
            self.blocks.append(ThinkingContent(thinking="", thinking_signature=redacted_data,
                                               redacted=True))
        return len(self.blocks) - 1

    def start_tool_call(self, call_id: str, name: str) -> int:
        self.blocks.append(ToolCall(id=call_id, name=name, arguments={}))
        self._tool_json[len(self.blocks) - 1] = ""
        return len(self.blocks) - 1

    def add_text(self, index: int, delta: str) -> TextDelta:
        block = self.blocks[index]
        assert isinstance(block, TextContent)
        block.text += delta
        return TextDelta(content_index=index, delta=delta)

    def add_thinking(self, index: int, delta: str) -> ThinkingDelta:
        block = self.blocks[index]
        assert isinstance(block, ThinkingContent)
        block.thinking += delta
        return ThinkingDelta(content_index=index, delta=delta)

    def add_signature(self, index: int, signature: str) -> None:
        block = self.blocks[index]
        assert isinstance(block, ThinkingContent)
        block.thinking_signature = (block.thinking_signature or "") + signature

    def add_tool_json(self, index: int, delta: str) -> ToolCallDelta:
        self._tool_json[index] += delta
        return ToolCallDelta(content_index=index, delta=delta)

    def tool_json(self, index: int) -> str:
        """The arguments JSON received so far for an open tool call."""
        return self._tool_json.get(index, "")

    def end_block(self, index: int) -> BlockEnd:
        """Parse a tool call's arguments once its JSON is complete."""
        text = self._tool_json.pop(index, None)
        block = self.blocks[index]
        if text is not None and isinstance(block, ToolCall):
            block.arguments = parse_arguments(text)
        return BlockEnd(content_index=index)

    def fail(self, reason: StopReason, message: str) -> None:
        self.stop_reason = reason
        self.error_message = message

    def snapshot(self) -> AssistantMessage:
        """The reply so far, for progress; unfinished tool arguments show as empty."""
        return self._assemble([msgspec.structs.replace(b) for b in self.blocks])

    def message(self) -> AssistantMessage:
        """The finished reply; unfinished tool arguments are parsed as far as they go."""
        for index in list(self._tool_json):
            self.end_block(index)
        return self._assemble(list(self.blocks))

    def _assemble(self, blocks: list[AssistantBlock]) -> AssistantMessage:
        usage = msgspec.structs.replace(self.usage)
        usage.total_tokens = usage.input + usage.output + usage.cache_read + usage.cache_write
        usage.cost = cost_of(usage, self.model)
        return AssistantMessage(
            content=blocks, api=self.api, provider=self.model.provider,
            model=self.model.id, usage=usage, stop_reason=self.stop_reason,
            timestamp=self.timestamp, error_message=self.error_message,
        )


def parse_arguments(text: str) -> dict[str, Any]:
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}
