"""The Anthropic Messages API through the official SDK (async, streaming)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic

from pi_lsp.context.convert import adapt_to_model
from pi_lsp.providers.base import MissingApiKeyError as MissingApiKeyError
from pi_lsp.providers.base import (
    ModelRequest,
    ProviderEvent,
    ReplyBuilder,
    safe_id,
    without_lone_surrogates,
)
from pi_lsp.providers.failures import StreamEndedEarly, failure_text
from pi_lsp.providers.registry import ANTHROPIC_API
from pi_lsp.providers.retry import HttpFailure, ProviderRetry, with_retries
from pi_lsp.session.entries import (
    AssistantMessage,
    LlmMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserBlock,
    UserMessage,
)

API = ANTHROPIC_API
THINKING_BUDGETS = {"minimal": 1024, "low": 4096, "medium": 10240, "high": 20480, "xhigh": 32000}
DEFAULT_MAX_TOKENS = 16_384
ANSWER_ROOM = 4096  # output kept free beyond the thinking budget
CACHE = {"type": "ephemeral"}
STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop",
                "max_tokens": "length", "tool_use": "toolUse"}
SDK = "anthropic"


def tool_id(raw: str, _source: AssistantMessage | None = None) -> str:
    """Ids from other providers made acceptable to Anthropic (letters, digits, _ and -)."""
    return safe_id(raw)[:64] or "tool"


def _user_blocks(content: str | list[UserBlock]) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    blocks: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent):
            blocks.append({"type": "text", "text": block.text})
        else:
            blocks.append({"type": "image", "source": {
                "type": "base64", "media_type": block.mime_type, "data": block.data}})
    return blocks


def _assistant_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    """Blocks of a reply already adapted to the model: thinking left here is its own."""
    blocks: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text:
                blocks.append({"type": "text", "text": block.text})
        elif isinstance(block, ThinkingContent):
            if block.redacted and block.thinking_signature:
                blocks.append({"type": "redacted_thinking", "data": block.thinking_signature})
            elif block.thinking_signature:
                blocks.append({"type": "thinking", "thinking": block.thinking,
                               "signature": block.thinking_signature})
            elif block.thinking and not block.redacted:
                # Unsigned thinking cannot be replayed as thinking; it travels as plain text.
                blocks.append({"type": "text", "text": block.thinking})
        elif isinstance(block, ToolCall):
            blocks.append({"type": "tool_use", "id": tool_id(block.id), "name": block.name,
                           "input": block.arguments})
    return blocks


def _tool_result(message: ToolResultMessage) -> dict[str, Any]:
    content = _user_blocks(message.content)
    return {"type": "tool_result", "tool_use_id": tool_id(message.tool_call_id),
            "content": content or [{"type": "text", "text": "(no output)"}],
            "is_error": message.is_error}


def wire_messages(messages: list[LlmMessage], model_id: str, provider: str = "anthropic"
                  ) -> list[dict[str, Any]]:
    """Model-layer messages as Messages API turns; consecutive tool results share one turn."""
    wire: list[dict[str, Any]] = []
    for message in adapt_to_model(messages, provider, API, model_id, tool_id):
        if isinstance(message, UserMessage):
            wire.append({"role": "user", "content": _user_blocks(message.content)})
        elif isinstance(message, AssistantMessage):
            blocks = _assistant_blocks(message)
            if blocks:
                wire.append({"role": "assistant", "content": blocks})
        else:
            result = _tool_result(message)
            last = wire[-1] if wire else None
            if last and last["role"] == "user" and isinstance(last["content"], list) and \
                    last["content"] and last["content"][-1].get("type") == "tool_result":
                last["content"].append(result)
            else:
                wire.append({"role": "user", "content": [result]})
    _mark_newest(wire)
    return wire


def _mark_newest(wire: list[dict[str, Any]]) -> None:
    """A cache breakpoint on the newest message, so the next call reads the whole prefix."""
    if not wire:
        return
    newest = wire[-1]
    if isinstance(newest["content"], str):
        newest["content"] = [{"type": "text", "text": newest["content"]}]
    if newest["content"]:
        newest["content"][-1]["cache_control"] = CACHE


def request_params(request: ModelRequest) -> dict[str, Any]:
    """The keyword arguments of `messages.create` for a request."""
    model = request.model
    max_tokens = request.max_tokens or min(model.max_tokens, DEFAULT_MAX_TOKENS)
    params: dict[str, Any] = {
        "model": model.id,
        "system": [{"type": "text", "text": request.system_prompt, "cache_control": CACHE}],
        "messages": wire_messages(request.messages, model.id, model.provider),
    }
    if request.tools:
        tools = [{"name": t.name, "description": t.description, "input_schema": t.parameters}
                 for t in request.tools]
        tools[-1]["cache_control"] = CACHE
        params["tools"] = tools
    budget = THINKING_BUDGETS.get(request.thinking_level)
    if budget and model.reasoning:
        max_tokens = max(max_tokens, min(budget + ANSWER_ROOM, model.max_tokens))
        params["thinking"] = {"type": "enabled", "budget_tokens": min(budget, max_tokens - 1)}
    else:
        params["thinking"] = {"type": "disabled"}
    params["max_tokens"] = max_tokens
    return without_lone_surrogates(params)  # type: ignore[no-any-return]


def error_text(label: str, error: BaseException) -> str | None:
    """One line for an error the server sent: a failed status, or an error event mid-stream
    (None: not one)."""
    if not isinstance(error, anthropic.APIError):
        return None
    body = error.body
    detail = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, anthropic.APIStatusError) and isinstance(detail, dict):
        kind, text = detail.get("type", "error"), detail.get("message", "")
        status = error.status_code if error.status_code != 200 else "stream"
        return f"{label} {status} {kind}: {text}".strip()
    if isinstance(error, anthropic.APIStatusError):
        return f"{label} {error.status_code}: {error.message}"
    return f"{label} stream error: {error.message}"


def http_failure(error: Exception) -> HttpFailure | None:
    if isinstance(error, anthropic.APIStatusError) and error.status_code != 200:
        return error.status_code, error.response.headers
    if isinstance(error, anthropic.APIConnectionError):
        return None, {}
    return None


class AnthropicProvider:
    name = "anthropic"

    def __init__(self, api_key: str | None, base_url: str | None = None,
                 retry: ProviderRetry | None = None, headers: dict[str, str] | None = None,
                 name: str = "anthropic") -> None:
        if not api_key:
            raise MissingApiKeyError(name)
        self.name = name
        self.label = "Anthropic" if name == "anthropic" else name
        self.retry = retry or ProviderRetry()
        # base_url None leaves the SDK's own ANTHROPIC_BASE_URL handling in place; retries are
        # ours (pi's policy), never the SDK's.
        self.client = anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url,
                                               max_retries=0, timeout=self.retry.timeout_s,
                                               default_headers=headers or None)

    async def stream(self, request: ModelRequest, reply: ReplyBuilder
                     ) -> AsyncIterator[ProviderEvent]:
        params = request_params(request)
        answered = started = stopped = reasoned = False
        try:
            stream = await with_retries(
                lambda: self.client.messages.create(
                    **params, stream=True, extra_headers=request.model.headers or None),
                self.retry, http_failure)
            answered = True
            slots: dict[int, int] = {}  # the API's block index -> the reply's block index
            async with stream:
                async for event in stream:
                    started = started or event.type == "message_start"
                    stopped = stopped or event.type == "message_stop"
                    reasoned = reasoned or (event.type == "message_delta"
                                            and bool(event.delta.stop_reason))
                    for produced in self._apply(event, reply, slots):
                        yield produced
            if started and not stopped:
                raise StreamEndedEarly("stream ended before message_stop")
            if not reasoned:
                raise StreamEndedEarly("stream ended without a stop reason")
        except Exception as error:  # every failure ends in the reply, partial content kept
            reply.fail("error", failure_text(error, self.label, str(self.client.base_url),
                                             self.retry.timeout_s, answered, error_text))

    def _apply(self, event: Any, reply: ReplyBuilder, slots: dict[int, int]
               ) -> list[ProviderEvent]:
        kind = event.type
        if kind == "message_start":
            reply.response_id = event.message.id
            usage = event.message.usage
            reply.usage.input = usage.input_tokens or 0
            reply.usage.output = usage.output_tokens or 0
            reply.usage.cache_read = usage.cache_read_input_tokens or 0
            reply.usage.cache_write = usage.cache_creation_input_tokens or 0
        elif kind == "content_block_start":
            block = event.content_block
            if block.type == "text":
                slots[event.index] = index = reply.start_text()
                return [reply.add_text(index, block.text)] if block.text else []
            if block.type == "thinking":
                slots[event.index] = reply.start_thinking()
            elif block.type == "redacted_thinking":
                slots[event.index] = reply.start_thinking(redacted_data=block.data)
            elif block.type == "tool_use":
                slots[event.index] = reply.start_tool_call(block.id, block.name)
        elif kind == "content_block_delta" and event.index in slots:
            return self._apply_delta(event.delta, reply, slots[event.index])
        elif kind == "content_block_stop" and event.index in slots:
            return [reply.end_block(slots[event.index])]
        elif kind == "message_delta":
            reason = event.delta.stop_reason
            if reason == "refusal":
                reply.fail("error", "The model refused to complete the request")
            elif reason in STOP_REASONS:
                reply.stop_reason = STOP_REASONS[reason]  # type: ignore[assignment]
            elif reason:
                reply.fail("error", f"Provider stopped with: {reason}")
            usage = event.usage
            if usage is not None:
                reply.usage.output = usage.output_tokens or reply.usage.output
                reply.usage.input = getattr(usage, "input_tokens", None) or reply.usage.input
        return []

    def _apply_delta(self, delta: Any, reply: ReplyBuilder, index: int) -> list[ProviderEvent]:
        if delta.type == "text_delta":
            return [reply.add_text(index, delta.text)]
        if delta.type == "thinking_delta":
            return [reply.add_thinking(index, delta.thinking)]
        if delta.type == "signature_delta":
            reply.add_signature(index, delta.signature)
        elif delta.type == "input_json_delta":
            return [reply.add_tool_json(index, delta.partial_json)]
        return []
