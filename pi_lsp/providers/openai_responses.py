"""The OpenAI Responses API (`openai-responses`): the request for a turn and the stream read back.

Tool-call ids are pi's `call_id|item_id`; a reasoning item is kept whole (encrypted content
included) as the thinking block's signature so the same model gets it back.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pi_lsp.context.convert import adapt_to_model
from pi_lsp.providers.base import ModelRequest, ProviderEvent, ReplyBuilder
from pi_lsp.providers.openai_chat import EFFORTS, OUTPUT_CAP
from pi_lsp.providers.registry import RESPONSES_API, ModelInfo
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

_UNSAFE_ID = re.compile(r"[^a-zA-Z0-9_-]")


def tool_id(raw: str) -> str:
    """A `call_id|item_id` pair made acceptable (safe characters, item ids start with fc)."""
    if "|" not in raw:
        return raw
    call, item = (_UNSAFE_ID.sub("_", part) for part in raw.split("|", 1))
    item = item if item.startswith("fc") else f"fc_{item}"
    return f"{call[:64].rstrip('_')}|{item[:64].rstrip('_')}"


def _content(content: str | list[UserBlock], model: ModelInfo) -> list[dict[str, Any]]:
    blocks = [TextContent(text=content)] if isinstance(content, str) else content
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, TextContent):
            parts.append({"type": "input_text", "text": block.text})
        elif "image" in model.input:
            parts.append({"type": "input_image", "detail": "auto",
                          "image_url": f"data:{block.mime_type};base64,{block.data}"})
    return parts


def _assistant(message: AssistantMessage, model: ModelInfo, index: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ThinkingContent):
            if block.thinking_signature:  # this model's reasoning item, replayed as it came
                try:
                    items.append(json.loads(block.thinking_signature))
                except json.JSONDecodeError:
                    continue
        elif isinstance(block, TextContent):
            item_id = block.text_signature or f"msg_{index}"
            items.append({"type": "message", "role": "assistant", "status": "completed",
                          "id": item_id if len(item_id) <= 64 else f"msg_{index}",
                          "content": [{"type": "output_text", "text": block.text,
                                       "annotations": []}]})
        elif isinstance(block, ToolCall):
            call_id, _, item_id = block.id.partition("|")
            call: dict[str, Any] = {"type": "function_call", "call_id": call_id,
                                    "name": block.name, "arguments": json.dumps(block.arguments)}
            # Another model's fc_ item ids were paired with its own reasoning; leave them out.
            if item_id and not (message.model != model.id and item_id.startswith("fc_")):
                call["id"] = item_id
            items.append(call)
    return items


def _tool_result(result: ToolResultMessage, model: ModelInfo) -> list[dict[str, Any]]:
    text = "\n".join(b.text for b in result.content if isinstance(b, TextContent))
    items: list[dict[str, Any]] = [{"type": "function_call_output",
                                    "call_id": result.tool_call_id.partition("|")[0],
                                    "output": text or "(see attached image)"}]
    images = [b for b in result.content if isinstance(b, ImageContent)]
    if images and "image" in model.input:
        content = _content([TextContent(text="Attached image(s) from tool result:"), *images],
                           model)
        items.append({"role": "user", "content": content})
    return items


def wire_input(request: ModelRequest) -> list[dict[str, Any]]:
    """The system prompt and the conversation as Responses input items."""
    model = request.model
    items: list[dict[str, Any]] = [{"role": "developer" if model.reasoning else "system",
                                    "content": request.system_prompt}]
    messages = adapt_to_model(request.messages, model.provider, RESPONSES_API, model.id, tool_id)
    for index, message in enumerate(messages):
        if isinstance(message, UserMessage):
            content = _content(message.content, model)
            if content:
                items.append({"role": "user", "content": content})
        elif isinstance(message, AssistantMessage):
            items += _assistant(message, model, index)
        else:
            items += _tool_result(message, model)
    return items


def request_params(request: ModelRequest) -> dict[str, Any]:
    """The keyword arguments of `responses.create` for a request (`stream` aside)."""
    model = request.model
    params: dict[str, Any] = {
        "model": model.id, "input": wire_input(request), "store": False,
        "max_output_tokens": request.max_tokens or min(model.max_tokens, OUTPUT_CAP),
    }
    if request.tools:
        params["tools"] = [{"type": "function", "name": t.name, "description": t.description,
                            "parameters": t.parameters, "strict": False} for t in request.tools]
    effort = EFFORTS.get(request.thinking_level)
    if effort and model.reasoning:
        params["reasoning"] = {"effort": effort, "summary": "auto"}
        params["include"] = ["reasoning.encrypted_content"]
    return params


class ResponsesReader:
    """Turns Responses stream events into reply blocks, one per output item."""

    def __init__(self, reply: ReplyBuilder) -> None:
        self.reply = reply
        self.items: dict[int, int] = {}  # output_index -> reply block index
        self.has_calls = False

    def apply(self, event: Any) -> list[ProviderEvent]:
        reply, kind = self.reply, event.type
        index = self.items.get(getattr(event, "output_index", -1))
        if kind == "response.output_item.added":
            return self._added(event.output_index, event.item)
        if kind == "response.reasoning_summary_text.delta" and index is not None:
            return [reply.add_thinking(index, event.delta)]
        if kind == "response.reasoning_summary_part.done" and index is not None:
            return [reply.add_thinking(index, "\n\n")]
        if kind in ("response.output_text.delta", "response.refusal.delta") and \
                index is not None:
            return [reply.add_text(index, event.delta)]
        if kind == "response.function_call_arguments.delta" and index is not None:
            return [reply.add_tool_json(index, event.delta)]
        if kind == "response.output_item.done" and index is not None:
            return self._done(index, event.item)
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            self._finished(event.response)
        elif kind == "error":
            reply.fail("error", f"{getattr(event, 'code', None) or 'error'}: {event.message}")
        return []

    def _added(self, output_index: int, item: Any) -> list[ProviderEvent]:
        if item.type == "reasoning":
            self.items[output_index] = self.reply.start_thinking()
        elif item.type == "message":
            self.items[output_index] = self.reply.start_text()
        elif item.type == "function_call":
            self.has_calls = True
            index = self.reply.start_tool_call(f"{item.call_id}|{item.id}", item.name)
            self.items[output_index] = index
            if item.arguments:
                return [self.reply.add_tool_json(index, item.arguments)]
        return []

    def _done(self, index: int, item: Any) -> list[ProviderEvent]:
        block = self.reply.blocks[index]
        if isinstance(block, ThinkingContent):
            # The finished item is the truth: its summary parts, and itself to send back.
            block.thinking = "\n\n".join(part.text for part in item.summary or [])
            block.thinking_signature = json.dumps(item.to_dict(), separators=(",", ":"))
        elif isinstance(block, TextContent):
            block.text_signature = item.id
        elif isinstance(block, ToolCall) and not block.arguments and item.arguments and \
                not self.reply.tool_json(index):
            self.reply.add_tool_json(index, item.arguments)
        return [self.reply.end_block(index)]

    def _finished(self, response: Any) -> None:
        reply, usage = self.reply, response.usage
        if usage is not None:
            details = usage.input_tokens_details
            cached = (details.cached_tokens or 0) if details else 0
            reply.usage.input = (usage.input_tokens or 0) - cached
            reply.usage.output = usage.output_tokens or 0
            reply.usage.cache_read = cached
        if response.status == "failed":
            error = response.error
            reply.fail("error", f"{error.code}: {error.message}" if error else "the reply failed")
        elif response.status == "incomplete":
            reply.stop_reason = "length"
        elif response.status == "cancelled":
            reply.fail("error", "the reply was cancelled by the server")
        elif self.has_calls:
            reply.stop_reason = "toolUse"
