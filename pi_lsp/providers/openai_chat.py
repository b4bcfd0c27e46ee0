"""OpenAI Chat Completions (`openai-completions`): the request for a turn and the stream read back.

Ollama, llama.cpp, vLLM, LM Studio and OpenRouter all speak this format; the model's `compat`
flags (pi's), laid over what pi detects from the host, cover where they differ from OpenAI.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from pi_lsp.context.convert import adapt_to_model
from pi_lsp.context.replay import system_update_text
from pi_lsp.providers.base import (
    ModelRequest,
    ProviderEvent,
    ReplyBuilder,
    ToolSpec,
    count_openai_usage,
    declared_fields,
    is_openrouter,
    reported_cost,
    safe_id,
    short_hash,
    token_count,
    tool_spec,
    without_lone_surrogates,
)
from pi_lsp.providers.chat_template import mapped_effort, template_values
from pi_lsp.providers.failures import ReplyFailed, StreamEndedEarly
from pi_lsp.providers.output_room import output_room
from pi_lsp.providers.registry import CHAT_API, Compat, ModelInfo, detect_compat
from pi_lsp.providers.sampling import sampling_fields
from pi_lsp.providers.strict import openai_tool_schema
from pi_lsp.providers.thinking import answer_room_budget, effort_of, thinking_level
from pi_lsp.session.entries import (
    AssistantMessage,
    ImageContent,
    StopReason,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserBlock,
    UserMessage,
)
from pi_lsp.session.jsontext import js_string, js_truthy, stringify
from pi_lsp.session.systemfields import listed_tools

STOP_REASONS: dict[str, StopReason] = {"stop": "stop", "end": "stop", "length": "length",
                                       "tool_calls": "toolUse", "function_call": "toolUse"}
REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")
PROMPT_CACHE_KEY_CHARS = 64
# pi 1.6's reply between tool results and a user message, for hosts that refuse that order.
BRIDGE = {"role": "assistant", "content": "I have processed the tool results."}
SDK = "openai"


def compat_of(model: ModelInfo) -> Compat:
    """The model's flags over pi's defaults for its host."""
    return model.compat.over(detect_compat(model.provider, model.base_url or "", model.id))


def off_effort(model: ModelInfo, default: str | None) -> str | None:
    """What is sent for thinking off: the map's `off`, else `default`; None: nothing."""
    if "off" in model.thinking_level_map:
        return model.thinking_level_map["off"]
    return default


def tool_id(raw: str, provider: str) -> str:
    """A tool-call id this API accepts: a Responses `call|item` pair joined (hashed past 40
    characters), at most 40 characters for OpenAI itself."""
    if "|" in raw:
        call, item = (safe_id(part) for part in raw.split("|", 1))
        joined = f"{call}_{item}" if item else call
        if len(joined) <= 40:
            return joined
        digest = short_hash(raw)[:8]
        return f"{call[:max(1, 40 - len(digest) - 1)]}_{digest}"
    return raw[:40] if provider == "openai" else raw


def _parts(content: str | list[UserBlock]) -> str | list[dict[str, Any]]:
    """A user message's content (images left in it are ones the model can see)."""
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent):
            if block.text:
                parts.append({"type": "text", "text": block.text})
        else:
            parts.append({"type": "image_url", "image_url": {"url": block.data_url()}})
    return parts


def _is_reasoning_detail(value: Any) -> bool:
    """pi's isOpenAIReasoningDetail: one of OpenRouter's `reasoning_details` that pi keeps and
    sends back (text with its signature, a summary, or encrypted reasoning)."""
    if not isinstance(value, dict):
        return False
    detail_id, index = value.get("id"), value.get("index", 0)
    if not (detail_id is None or isinstance(detail_id, str)) or \
            not isinstance(value.get("format", ""), str) or \
            not isinstance(index, int | float) or isinstance(index, bool):
        return False
    match value.get("type"):
        case "reasoning.summary":
            return isinstance(value.get("summary"), str)
        case "reasoning.encrypted":
            return isinstance(value.get("data"), str)
        case "reasoning.text":
            return isinstance(value.get("text"), str) and (
                value.get("signature") is None or isinstance(value["signature"], str))
    return False


def _json(text: str | None) -> Any:
    """The JSON `text` holds (None: none, or not JSON)."""
    try:
        return json.loads(text) if text else None
    except (ValueError, RecursionError):
        return None


def _kept_details(message: AssistantMessage) -> list[dict[str, Any]] | None:
    """The reasoning details a reply keeps, to go back with it as pi sends them: a thinking
    block's signature, else (replies of older pi versions) encrypted ones on its tool calls."""
    for block in message.content:
        details = _json(block.thinking_signature) if isinstance(block, ThinkingContent) else None
        if isinstance(details, list) and details and all(map(_is_reasoning_detail, details)):
            return details
    on_calls = [_json(b.thought_signature) for b in message.content if isinstance(b, ToolCall)]
    return [d for d in on_calls if _is_reasoning_detail(d) and d["type"] == "reasoning.encrypted"
            and isinstance(d.get("id"), str) and d["id"] and d["data"]] or None


def _assistant(message: AssistantMessage, model: ModelInfo, compat: Compat
               ) -> dict[str, Any] | None:
    texts = [b.text for b in message.content if isinstance(b, TextContent) and b.text.strip()]
    # The text as one string, as pi sends it: an array of parts is mirrored back by some models.
    # (Empty once its lone surrogates go: none, as pi sends it.)
    none = "" if compat.requires_assistant_after_tool_result or \
        compat.requires_non_null_assistant_content else None
    wire: dict[str, Any] = {"role": "assistant",
                            "content": without_lone_surrogates("".join(texts)) or none}
    # Thinking left after adapt_to_model is this model's own; it goes back where it came from.
    thoughts = [b for b in message.content if isinstance(b, ThinkingContent) and b.thinking.strip()]
    details = _kept_details(message)
    if thoughts and compat.requires_thinking_as_text:
        wire["content"] = [{"type": "text", "text": "\n\n".join(b.thinking for b in thoughts)},
                           *({"type": "text", "text": text} for text in texts)]
    elif thoughts and details is None and thoughts[0].thinking_signature in REASONING_FIELDS:
        # (reasoning details stand for the thinking: pi sends them in place of this field)
        wire[str(thoughts[0].thinking_signature)] = "\n".join(b.thinking for b in thoughts)
    calls = [b for b in message.content if isinstance(b, ToolCall)]
    if calls:
        wire["tool_calls"] = [{"id": c.id, "type": "function", "function": {
            "name": c.name, "arguments": stringify(c.arguments)}} for c in calls]
    if details is not None:
        wire["reasoning_details"] = details
    if compat.requires_reasoning_content_on_assistant_messages and model.reasoning:
        wire.setdefault("reasoning_content", "")
    return wire if wire["content"] or calls else None


def _tool_results(results: list[ToolResultMessage], compat: Compat) -> list[dict[str, Any]]:
    """A run of tool results: one `tool` message each, then their images as one user message
    (images left in a result are ones the model can see)."""
    wire: list[dict[str, Any]] = []
    images: list[ImageContent] = []
    for result in results:
        text = "\n".join(b.text for b in result.content if isinstance(b, TextContent))
        has_images = any(isinstance(b, ImageContent) for b in result.content)
        message = {"role": "tool", "tool_call_id": result.tool_call_id,
                   "content": text if text.strip() else
                   "(see attached image)" if has_images else "(no tool output)"}
        if compat.requires_tool_result_name and js_truthy(result.tool_name):  # pi's `&& toolName`
            message["name"] = result.tool_name
        wire.append(message)
        images += [b for b in result.content if isinstance(b, ImageContent)]
    if images:
        if compat.requires_assistant_after_tool_result:
            wire.append(dict(BRIDGE))
        content = _parts([TextContent(text="Attached image(s) from tool result:"), *images])
        wire.append({"role": "user", "content": content})
    return wire


def _instructions(role: str, systems: list[SystemMessage], tools_from: int, compat: Compat
                  ) -> list[dict[str, Any]]:
    """System messages after the first, in place, as pi 1.6 sends them to a model that takes
    them mid-conversation: each one's update (an empty one left out), and from `tools_from` on
    (counted among `systems`) the tools it adds before it, in a system message of their own."""
    wire: list[dict[str, Any]] = []
    for index, message in enumerate(systems):
        added = listed_tools(message.tools_added) if index >= tools_from else []
        if added:
            wire.append({"role": "system", "tools": _tools(map(tool_spec, added), compat)})
        if text := system_update_text(message):
            wire.append({"role": role, "content": text})
    return wire


def _tools(tools: Iterable[ToolSpec], compat: Compat) -> list[dict[str, Any]]:
    """Tool declarations as Chat Completions functions."""
    return [{"type": "function", "function": {
        **declared_fields(name=t.name, description=t.description),
        **openai_tool_schema(t, bool(compat.supports_strict_mode))}} for t in tools]


def wire_messages(request: ModelRequest, compat: Compat) -> list[dict[str, Any]]:
    """The system prompt and the conversation as Chat Completions messages."""
    model = request.model
    role = "developer" if model.reasoning and compat.supports_developer_role else "system"
    wire: list[dict[str, Any]] = [
        {"role": role, "content": request.system_prompt}] if request.system_prompt else []
    messages = adapt_to_model(request.messages, model.provider, CHAT_API, model.id,
                              lambda raw, _source: tool_id(raw, model.provider),
                              model_input=model.input)
    pending: list[ToolResultMessage] = []
    last = None  # the role of the last message sent, as pi's lastRole counts it
    # A system message after a reply's calls waits until their results are in (pi's
    # transformMessages holds it the same way).
    held: list[SystemMessage] = []
    calling = False
    # system messages sent so far, against the first whose added tools go in place
    sent_systems = 0
    additions_from = len(messages) if request.additions_from is None else request.additions_from
    for message in [*messages, None]:
        if isinstance(message, ToolResultMessage):
            pending.append(message)
            continue
        if isinstance(message, SystemMessage) and calling:
            held.append(message)
            continue
        if pending:
            wire += _tool_results(pending, compat)
            last = "user" if wire[-1]["role"] == "user" else "tool"
            pending = []
        if held or isinstance(message, SystemMessage):
            systems = [*held, *([message] if isinstance(message, SystemMessage) else [])]
            wire += _instructions(role, systems, additions_from - sent_systems, compat)
            sent_systems += len(systems)
            last, held = "system", []
        calling = False  # (until a reply with calls)
        if isinstance(message, UserMessage):
            # (before a user message left out too, as pi bridges before it looks)
            if compat.requires_assistant_after_tool_result and last == "tool":
                wire.append(dict(BRIDGE))
            content = _parts(message.content)
            if content or isinstance(content, str):  # pi sends even an empty text
                wire.append({"role": "user", "content": content})
                last = "user"
        elif isinstance(message, AssistantMessage):
            assistant = _assistant(message, model, compat)
            if assistant is not None:
                wire.append(assistant)
                last = "assistant"
            calling = any(isinstance(block, ToolCall) for block in message.content)
    return wire


def _has_tool_history(request: ModelRequest) -> bool:
    return any(isinstance(m, ToolResultMessage) or (isinstance(m, AssistantMessage) and any(
        isinstance(b, ToolCall) for b in m.content)) for m in request.messages)


def request_params(request: ModelRequest) -> dict[str, Any]:
    """The keyword arguments of `chat.completions.create` for a request (`stream` aside)."""
    model, compat = request.model, compat_of(request.model)
    params: dict[str, Any] = {"model": model.id, "messages": wire_messages(request, compat)}
    # A long retention (PI_CACHE_RETENTION=long) is asked for, with a key, where the host
    # keeps one, as pi 1.6 asks.
    long = request.cache_retention == "long" and bool(compat.supports_long_cache_retention)
    cache_key = compat.prompt_cache_key_mode == "enabled" or (
        compat.prompt_cache_key_mode == "auto" and
        ("api.openai.com" in (model.base_url or "") or long))
    if cache_key and request.session_id and request.cache_retention != "none":
        params["prompt_cache_key"] = request.session_id[:PROMPT_CACHE_KEY_CHARS]
    if long:
        params["prompt_cache_retention"] = "24h"
    if compat.supports_usage_in_streaming:
        params["stream_options"] = {"include_usage": True}
    if compat.supports_store:
        params["store"] = False
    params[compat.max_tokens_field or "max_completion_tokens"] = output_room(request)
    if request.tools:
        params["tools"] = _tools(request.tools, compat)
        if compat.zai_tool_stream:
            params["tool_stream"] = True
    elif compat.requires_tools_with_tool_history and _has_tool_history(request):
        params["tools"] = []
    control = _cache_control(request, compat)
    if control is not None:
        _mark_cache(params["messages"], params.get("tools"), control)
    if compat.vllm_priority is not None:
        params["priority"] = compat.vllm_priority
    level = thinking_level(model, request.thinking_level)
    budget = _thinking_budget(params, model, level)
    if model.reasoning:
        params.update(_thinking_params(model, compat, level, budget))
    if (field := _budget_field(compat)) and budget is not None:
        params[field] = budget
    if model.compat.open_router_routing is not None:
        params["provider"] = model.compat.open_router_routing
    gateway = model.compat.vercel_gateway_routing
    if gateway is not None and (gateway.only is not None or gateway.order is not None):
        params["providerOptions"] = {"gateway": msgspec.to_builtins(gateway)}
    params.update(sampling_fields(model, request.thinking_level))
    return without_lone_surrogates(params)  # type: ignore[no-any-return]


def _budget_field(compat: Compat) -> str | None:
    """The top-level field that caps the host's reasoning (None: none is sent)."""
    return compat.thinking_token_budget_field or (
        "thinking_token_budget" if compat.supports_thinking_token_budget else None)


def _thinking_budget(params: dict[str, Any], model: ModelInfo, level: str | None) -> int | None:
    """The level's thinking budget as pi 1.6 sends it (a cap, a template's `thinking.budget`):
    leaving the answer its room under the output limit (without it reasoning can use all of
    it); None where the model does not think or no budget fits."""
    if level is None:
        return None
    ceiling = params.get("max_tokens", params.get("max_completion_tokens", model.max_tokens))
    budget = answer_room_budget(level, ceiling)
    return budget if budget > 0 else None


def _cache_control(request: ModelRequest, compat: Compat) -> dict[str, Any] | None:
    """The Anthropic cache mark pi 1.6 sends a host that takes them (None: none)."""
    if compat.cache_control_format != "anthropic" or request.cache_retention == "none":
        return None
    long = request.cache_retention == "long" and bool(compat.supports_long_cache_retention)
    return {"type": "ephemeral", **({"ttl": "1h"} if long else {})}


def _mark_cache(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                control: dict[str, Any]) -> None:
    """Mark the system prompt, the last tool and the newest message with text, as pi 1.6's
    applyAnthropicCacheControl does: the cached prefix ends at each."""
    system = next((m for m in messages if m["role"] in ("system", "developer")), None)
    if system is not None:
        _mark_text(system, control)
    if tools:
        tools[-1]["cache_control"] = control
    for message in reversed(messages):
        if message["role"] in ("user", "assistant", "tool") and _mark_text(message, control):
            return


def _mark_text(message: dict[str, Any], control: dict[str, Any]) -> bool:
    """Mark the message's last text part (a text content becomes one); False: it has none."""
    content = message.get("content")  # (a tools message has none, and takes no mark)
    if isinstance(content, str):
        if not content:
            return False
        message["content"] = [{"type": "text", "text": content, "cache_control": control}]
        return True
    parts = [part for part in content if part.get("type") == "text"] \
        if isinstance(content, list) else []
    if parts:
        parts[-1]["cache_control"] = control
    return bool(parts)


def _thinking_params(model: ModelInfo, compat: Compat, level: str | None, budget: int | None
                     ) -> dict[str, Any]:
    """How a reasoning model is asked to think at `level` (None: not; `budget`: its thinking
    budget), in the host's format."""
    effort = effort_of(model, level) if level else None
    effort_field = {"reasoning_effort": effort} if effort and compat.supports_reasoning_effort \
        else {}
    off = off_effort(model, "none")
    match compat.thinking_format:
        case "zai":
            thinking = {"type": "enabled", "clear_thinking": False} if effort else \
                {"type": "disabled"}
            return {"thinking": thinking, **effort_field}
        case "qwen":
            return {"enable_thinking": bool(effort), **effort_field}
        case "qwen-chat-template":
            return {"chat_template_kwargs": {"enable_thinking": bool(effort),
                                             "preserve_thinking": True}}
        case "chat-template":
            kwargs = template_values(model, compat.chat_template_kwargs or {}, level, budget)
            return {"chat_template_kwargs": kwargs} if kwargs else {}
        case "baseten":
            arguments = template_values(model, compat.chat_template_args or {}, level, budget)
            mapped = mapped_effort(model, level) if compat.supports_reasoning_effort else None
            return {**({"chat_template_args": arguments} if arguments else {}),
                    **({"reasoning_effort": mapped} if mapped is not None else {})}
        case "deepseek":
            if effort:
                return {"thinking": {"type": "enabled"}, **effort_field}
            return {"thinking": {"type": "disabled"}} if off is not None else {}
        case "openrouter":
            if effort:
                return {"reasoning": {"effort": effort}}
            return {"reasoning": {"effort": off}} if off is not None else {}
        case "ant-ling":  # only levels the model's map names
            mapped = model.thinking_level_map.get(level) if level else None
            return {"reasoning": {"effort": mapped}} if mapped else {}
        case "together":
            return {"reasoning": {"enabled": bool(effort)}, **effort_field}
        case "string-thinking":
            if effort:
                return {"thinking": effort}
            return {"thinking": off} if off is not None else {}
    if effort:
        return effort_field
    mapped_off = off_effort(model, None)
    return {"reasoning_effort": mapped_off} if mapped_off and compat.supports_reasoning_effort \
        else {}


def request_headers(request: ModelRequest) -> dict[str, str]:
    """Session-affinity headers, for hosts that route a session to one server (OpenRouter)."""
    compat, session = compat_of(request.model), request.session_id
    if not session or not compat.send_session_affinity_headers:
        return {}
    if compat.session_affinity_format == "openrouter":
        return {"x-session-id": session}
    headers = {"x-client-request-id": session, "x-session-affinity": session}
    if compat.session_affinity_format == "openai":
        headers["session_id"] = session
    return headers


def _object(value: Any) -> dict[str, Any]:
    """`value` if it is a JSON object, else an empty one (a field of another type is skipped)."""
    return value if isinstance(value, dict) else {}


def _usage(raw: dict[str, Any], reply: ReplyBuilder) -> None:
    """pi's reading of usage: cached tokens wherever the host puts them, not counted as input."""
    details = _object(raw.get("prompt_tokens_details"))
    cached = next((value for value in (details.get("cached_tokens"),
                                       raw.get("prompt_cache_hit_tokens"),
                                       raw.get("cached_tokens")) if value is not None), 0)
    reasoning = _object(raw.get("completion_tokens_details")).get("reasoning_tokens") \
        or raw.get("reasoning_tokens")
    count_openai_usage(reply.usage, token_count(raw.get("prompt_tokens")),
                       token_count(raw.get("completion_tokens")), token_count(cached),
                       token_count(details.get("cache_write_tokens")), token_count(reasoning))
    reply.priced = True
    reply.billed = reported_cost(raw) if is_openrouter(reply.model) else None


def _string(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _text(content: Any) -> str:
    """A delta's text: a string, or the text parts of a list of them (pi would record such a list
    as "[object Object]")."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part["text"] for part in content
                       if isinstance(part, dict) and isinstance(part.get("text"), str))
    return ""


def _arguments(function: dict[str, Any]) -> str:
    """A piece of a call's arguments JSON; arguments sent as an object are taken as its JSON (pi
    appends "[object Object]" and reports the call's arguments unreadable)."""
    arguments = function.get("arguments")
    if isinstance(arguments, dict):
        return stringify(arguments)
    return arguments if isinstance(arguments, str) else ""


def _fill(target: dict[str, Any], source: dict[str, Any], key: str,
          present: Callable[[Any], bool]) -> None:
    """JavaScript's `target[key] ||= source[key]` (`present`: truthy) or `??=` (not null),
    a key it would leave undefined left out, as JSON.stringify leaves it out."""
    if present(target.get(key)):
        return
    if key in source:
        target[key] = source[key]
    else:
        target.pop(key, None)


def _merge_reasoning_detail(details: list[dict[str, Any]], detail: dict[str, Any]) -> None:
    """pi's appendOpenAIReasoningDetail: OpenRouter streams its details in pieces; a text (or
    summary) piece continues the detail before it of its kind, an encrypted one stands alone."""
    last = details[-1] if details else {}
    field = {"reasoning.text": "text", "reasoning.summary": "summary"}.get(detail["type"])
    if field is None or last.get("type") != detail["type"]:
        details.append(dict(detail))
        return
    last[field] += detail[field]
    if field == "text":
        _fill(last, detail, "signature", bool)
    _fill(last, detail, "id", lambda value: value is not None)
    _fill(last, detail, "format", bool)
    _fill(last, detail, "index", lambda value: value is not None)


def endpoint(client: Any) -> Any:
    """The SDK call that streams this API's replies."""
    return client.chat.completions.create


def reader(reply: ReplyBuilder, model: ModelInfo) -> ChatReader:
    return ChatReader(reply, compat_of(model))


class ChatReader:
    """Turns streamed chunks into reply blocks as pi 1.6 does: one thinking block and one text
    block a reply, each added to wherever its pieces arrive, and tool calls by index or id."""

    def __init__(self, reply: ReplyBuilder, compat: Compat) -> None:
        self.reply = reply
        self.compat = compat
        self.text: int | None = None  # the reply block index of the text
        self.thinking: int | None = None  # and of the thinking
        self.details: list[dict[str, Any]] = []  # OpenRouter's reasoning details, merged
        # The stream's tool calls -> reply block index: by their index, or (hosts that send
        # none) by their id, as pi finds them; a call with neither is a new one.
        self.by_index: dict[int, int] = {}
        self.by_id: dict[str, int] = {}
        self.calls: list[int] = []  # their reply block indexes, in order
        self.finished = False  # a finish_reason arrived

    def _text_block(self) -> int:
        if self.text is None:
            self.text = self.reply.start_text()
        return self.text

    def _thinking_block(self, signature: str) -> int:
        if self.thinking is None:
            self.thinking = self.reply.start_thinking()
            self.reply.add_signature(self.thinking, signature)
        return self.thinking

    def apply(self, event: Any) -> list[ProviderEvent]:
        # The SDK builds chunks without checking them: the JSON the server sent is read instead,
        # as pi reads it, so a field of an unexpected type is passed over rather than failing the
        # reply, and fields the SDK does not know (Moonshot's usage in the choice) are found.
        chunk = event.to_dict(warnings=False) if hasattr(event, "to_dict") else event
        if not isinstance(chunk, dict):
            return []  # `data: 42`: pi skips what is not an object
        reply = self.reply
        events: list[ProviderEvent] = []
        if not reply.response_id and isinstance(chunk.get("id"), str):
            reply.response_id = chunk["id"] or None
        answering = chunk.get("model")
        # The first model named that is not the one asked for (a router's or an alias's own):
        # pi 1.6 records it as the reply's `responseModel`.
        if not reply.response_model and isinstance(answering, str) and answering \
                and answering != reply.model.id:
            reply.response_model = answering
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            _usage(usage, reply)
        choices = chunk.get("choices")
        choice = _object(choices[0]) if isinstance(choices, list) and choices else {}
        if usage is None and isinstance(choice.get("usage"), dict):
            _usage(choice["usage"], reply)  # Moonshot puts it in the choice
        delta = _object(choice.get("delta"))
        events += self._reasoning(delta)
        if text := _text(delta.get("content")):
            events.extend(reply.add_text(self._text_block(), text))
        calls = delta.get("tool_calls")
        if js_truthy(calls) and not isinstance(calls, list | str):
            # pi 1.6 iterates any it holds true: of a number, true or an object that throws.
            raise ReplyFailed("choice.delta.tool_calls is not iterable")
        # pi 1.6 reads each member (of a text, each character) as a call: one that is no
        # object is a call of no id, name or arguments, and null throws.
        for call in calls if isinstance(calls, list | str) else []:
            if call is None:
                raise ReplyFailed("Cannot read properties of null (reading 'index')")
            events += self._tool_call(_object(call))
        finish = choice.get("finish_reason")
        if js_truthy(finish):  # an empty object or list too, as pi 1.6 holds them
            reply.raw_stop_reason = finish
            self.finished = True
            stop = STOP_REASONS.get(finish) if isinstance(finish, str) else None
            if stop is None:  # told as pi writes it (String()), not as Python's repr
                reply.fail("error", f"Provider finish_reason: {js_string(finish)}")
            else:
                reply.stop_reason = stop
        return events

    def _reasoning(self, delta: dict[str, Any]) -> list[ProviderEvent]:
        # llama.cpp sends reasoning_content, others reasoning; the first text present is used
        # (pi passes over a field that is not text). OpenRouter adds `reasoning_details`, which
        # pi keeps, merged, as the thinking's signature and sends back with the reply.
        field = next((f for f in REASONING_FIELDS
                      if isinstance(delta.get(f), str) and delta[f]), None)
        # pi keeps the field's name as the signature, to send the thinking back in it
        events = [] if field is None else \
            self.reply.add_thinking(self._thinking_block(field), delta[field])
        details = delta.get("reasoning_details")
        for detail in details if isinstance(details, list) else []:
            if _is_reasoning_detail(detail):
                self._thinking_block("")  # encrypted reasoning alone still gets its block
                _merge_reasoning_detail(self.details, detail)
        return events

    def _tool_call(self, call: dict[str, Any]) -> list[ProviderEvent]:
        events: list[ProviderEvent] = []
        function = _object(call.get("function"))
        position = call.get("index")
        position = position if isinstance(position, int) and not isinstance(position, bool) \
            else None
        call_id, name = _string(call.get("id")), _string(function.get("name"))
        index = self.by_index.get(position) if position is not None else None
        if index is None and call_id:
            index = self.by_id.get(call_id)
        if index is None:
            index = self.reply.start_tool_call(call_id, name)
            self.calls.append(index)
        if position is not None and index not in self.by_index.values():
            self.by_index[position] = index  # a call first found by id keeps its first index
        if call_id:
            self.by_id[call_id] = index
        # Some hosts send the id or name only in a later chunk than the call's first (which
        # has its index and arguments, or `function: null`): pi fills them in from there.
        block = self.reply.block(index)
        assert isinstance(block, ToolCall)
        block.id, block.name = block.id or call_id, block.name or name
        if arguments := _arguments(function):
            events.extend(self.reply.add_tool_json(index, arguments))
        return events

    def finish(self) -> list[ProviderEvent]:
        """Close what is open once the stream has ended; a reply without a finish_reason is
        incomplete unless the host never sends one."""
        if self.details and self.thinking is not None:
            thinking = self.reply.block(self.thinking)
            assert isinstance(thinking, ThinkingContent)
            thinking.thinking_signature = stringify(self.details)
        ended: list[ProviderEvent] = [self.reply.end_block(index)
                                      for index in range(len(self.reply.blocks))]
        self._name_anonymous_calls()
        if not self.finished:
            if self.compat.supports_finish_reason:
                raise StreamEndedEarly("the stream ended without finish_reason")
            self.reply.stop_reason = "toolUse" if self.calls else "stop"
        return ended

    def _name_anonymous_calls(self) -> None:
        """Give a call the host sent without an id one, `call_N` (N: its place among the calls).
        pi keeps "", but two such calls cannot be told apart: the next request would carry only
        the first one's result (a repeated result id is dropped as a duplicate)."""
        for number, index in enumerate(self.calls):
            block = self.reply.block(index)
            if isinstance(block, ToolCall) and not block.id:
                block.id = f"call_{number}"
