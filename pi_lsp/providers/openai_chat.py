"""OpenAI Chat Completions (`openai-completions`): the request for a turn and the stream read back.

Ollama, llama.cpp, vLLM, LM Studio and OpenRouter all speak this format; the model's `compat`
flags (pi's) cover where they differ from OpenAI.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pi_lsp.context.convert import adapt_to_model
from pi_lsp.providers.base import ModelRequest, ProviderEvent, ReplyBuilder
from pi_lsp.providers.registry import CHAT_API, ModelInfo
from pi_lsp.session.entries import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserBlock,
    UserMessage,
)

OUTPUT_CAP = 32_000  # pi's default output limit for a request
EFFORTS = {"minimal": "minimal", "low": "low", "medium": "medium", "high": "high",
           "xhigh": "high"}  # xhigh is clamped: few servers know it
STOP_REASONS = {"stop": "stop", "length": "length", "tool_calls": "toolUse",
                "function_call": "toolUse"}
REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")
_UNSAFE_ID = re.compile(r"[^a-zA-Z0-9_-]")


def tool_id(raw: str, provider: str) -> str:
    """A tool-call id this API accepts: the call part of a Responses id, at most 40 characters
    for OpenAI itself."""
    if "|" in raw:
        return _UNSAFE_ID.sub("_", raw.split("|", 1)[0])[:40]
    return raw[:40] if provider == "openai" else raw


def _parts(content: str | list[UserBlock], model: ModelInfo) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent):
            parts.append({"type": "text", "text": block.text})
        elif "image" in model.input:
            parts.append({"type": "image_url",
                          "image_url": {"url": f"data:{block.mime_type};base64,{block.data}"}})
    return parts


def _assistant(message: AssistantMessage, model: ModelInfo) -> dict[str, Any] | None:
    texts = [{"type": "text", "text": b.text} for b in message.content
             if isinstance(b, TextContent) and b.text.strip()]
    wire: dict[str, Any] = {"role": "assistant", "content": texts or None}
    # Thinking left after adapt_to_model is this model's own; it goes back where it came from.
    thoughts = [b for b in message.content if isinstance(b, ThinkingContent) and b.thinking.strip()]
    if thoughts and model.compat.requires_thinking_as_text:
        wire["content"] = [{"type": "text", "text": "\n\n".join(b.thinking for b in thoughts)},
                           *texts]
    elif thoughts and thoughts[0].thinking_signature in REASONING_FIELDS:
        wire[str(thoughts[0].thinking_signature)] = "\n".join(b.thinking for b in thoughts)
    calls = [b for b in message.content if isinstance(b, ToolCall)]
    if calls:
        wire["tool_calls"] = [{"id": c.id, "type": "function", "function": {
            "name": c.name, "arguments": json.dumps(c.arguments)}} for c in calls]
    return wire if wire["content"] or calls else None


def _tool_results(results: list[ToolResultMessage], model: ModelInfo) -> list[dict[str, Any]]:
    """A run of tool results: one `tool` message each, then their images as one user message."""
    wire: list[dict[str, Any]] = []
    images: list[ImageContent] = []
    for result in results:
        text = "\n".join(b.text for b in result.content if isinstance(b, TextContent))
        message = {"role": "tool", "content": text or "(see attached image)",
                   "tool_call_id": result.tool_call_id}
        if model.compat.requires_tool_result_name:
            message["name"] = result.tool_name
        wire.append(message)
        images += [b for b in result.content if isinstance(b, ImageContent)]
    if images and "image" in model.input:
        content = _parts([TextContent(text="Attached image(s) from tool result:"), *images],
                         model)
        wire.append({"role": "user", "content": content})
    return wire


def wire_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The system prompt and the conversation as Chat Completions messages."""
    model = request.model
    developer = model.reasoning and model.compat.supports_developer_role is not False
    wire: list[dict[str, Any]] = [
        {"role": "developer" if developer else "system", "content": request.system_prompt}]
    messages = adapt_to_model(request.messages, model.provider, CHAT_API, model.id,
                              lambda raw: tool_id(raw, model.provider))
    pending: list[ToolResultMessage] = []
    for message in [*messages, None]:
        if isinstance(message, ToolResultMessage):
            pending.append(message)
            continue
        if pending:
            wire += _tool_results(pending, model)
            pending = []
        if isinstance(message, UserMessage):
            content = _parts(message.content, model)
            if content:
                wire.append({"role": "user", "content": content})
        elif isinstance(message, AssistantMessage):
            assistant = _assistant(message, model)
            if assistant is not None:
                wire.append(assistant)
    return wire


def request_params(request: ModelRequest) -> dict[str, Any]:
    """The keyword arguments of `chat.completions.create` for a request (`stream` aside)."""
    model, compat = request.model, request.model.compat
    params: dict[str, Any] = {"model": model.id, "messages": wire_messages(request)}
    if compat.supports_usage_in_streaming is not False:
        params["stream_options"] = {"include_usage": True}
    if compat.supports_store is not False:
        params["store"] = False
    max_tokens = request.max_tokens or min(model.max_tokens, OUTPUT_CAP)
    params[compat.max_tokens_field or "max_completion_tokens"] = max_tokens
    if request.tools:
        strict = {"strict": False} if compat.supports_strict_mode is not False else {}
        params["tools"] = [{"type": "function", "function": {
            "name": t.name, "description": t.description, "parameters": t.parameters, **strict}}
            for t in request.tools]
    effort = EFFORTS.get(request.thinking_level)
    if effort and model.reasoning and compat.supports_reasoning_effort is not False:
        params["reasoning_effort"] = effort
    return params


class ChatReader:
    """Turns streamed chunks into reply blocks: text, reasoning, and tool calls by index."""

    def __init__(self, reply: ReplyBuilder) -> None:
        self.reply = reply
        self.current: tuple[str, int] | None = None  # (kind, reply block index)
        self.calls: dict[int, int] = {}  # the stream's tool-call index -> reply block index

    def _switch(self, kind: str, start: Any) -> tuple[list[ProviderEvent], int]:
        """End the open block unless it is of `kind`; start one of `kind` if needed."""
        if self.current is not None and self.current[0] == kind:
            return [], self.current[1]
        ended = self._close()
        index = start()
        self.current = (kind, index)
        return ended, index

    def _close(self) -> list[ProviderEvent]:
        """End the open text or thinking block; tool calls stay open (their arguments may
        still arrive by index) until the stream ends."""
        if self.current is None:
            return []
        (kind, index), self.current = self.current, None
        return [] if kind == "tool" else [self.reply.end_block(index)]

    def apply(self, chunk: Any) -> list[ProviderEvent]:
        reply = self.reply
        events: list[ProviderEvent] = []
        if chunk.usage is not None:
            details = chunk.usage.prompt_tokens_details
            cached = (details.cached_tokens or 0) if details else 0
            reply.usage.input = (chunk.usage.prompt_tokens or 0) - cached
            reply.usage.output = chunk.usage.completion_tokens or 0
            reply.usage.cache_read = cached
        if not chunk.choices:
            return events
        choice = chunk.choices[0]
        delta = choice.delta
        if delta is not None:
            events += self._reasoning(delta)
            if delta.content:
                ended, index = self._switch("text", reply.start_text)
                events += [*ended, reply.add_text(index, delta.content)]
            for call in delta.tool_calls or []:
                events += self._tool_call(call)
        if choice.finish_reason == "content_filter":
            reply.fail("error", "the server stopped the reply (content_filter)")
        elif choice.finish_reason:
            reply.stop_reason = STOP_REASONS.get(choice.finish_reason, "stop")  # type: ignore[assignment]
        return events

    def _reasoning(self, delta: Any) -> list[ProviderEvent]:
        # llama.cpp sends reasoning_content, others reasoning; the first one present is used.
        field = next((f for f in REASONING_FIELDS if getattr(delta, f, None)), None)
        if field is None:
            return []

        def start() -> int:
            index = self.reply.start_thinking()
            self.reply.add_signature(index, field)  # pi keeps the field name to send it back
            return index
        ended, index = self._switch("thinking", start)
        return [*ended, self.reply.add_thinking(index, str(getattr(delta, field)))]

    def _tool_call(self, call: Any) -> list[ProviderEvent]:
        events: list[ProviderEvent] = []
        index = self.calls.get(call.index)
        if index is None:
            function = call.function
            events += self._close()
            index = self.reply.start_tool_call(call.id or f"call_{call.index}",
                                               (function.name if function else None) or "")
            self.calls[call.index] = index
            self.current = ("tool", index)
        arguments = call.function.arguments if call.function else None
        if arguments:
            events.append(self.reply.add_tool_json(index, arguments))
        return events

    def finish(self) -> list[ProviderEvent]:
        ended = [*self._close(), *(self.reply.end_block(i) for i in self.calls.values())]
        if self.reply.stop_reason == "stop" and self.calls:
            self.reply.stop_reason = "toolUse"
        return ended
