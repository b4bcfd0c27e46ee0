"""The Anthropic Messages API through the official SDK (async, streaming)."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import anthropic
import msgspec
from anthropic._models import FinalRequestOptions
from anthropic._streaming import ServerSentEvent, SSEDecoder

from pi_lsp.context.convert import adapt_to_model
from pi_lsp.context.replay import system_update_text
from pi_lsp.providers.base import MissingApiKeyError as MissingApiKeyError
from pi_lsp.providers.base import (
    ModelRequest,
    ProviderEvent,
    ReplyBuilder,
    ToolSpec,
    declared_fields,
    event_type,
    is_openrouter,
    js_member,
    repaired_json,
    reported_cost,
    safe_id,
    slot_key,
    tool_spec,
    without_lone_surrogates,
)
from pi_lsp.providers.failures import (
    MalformedEvent,
    ReplyFailed,
    StreamEndedEarly,
    cut_error_text,
    ended_stream,
    event_json,
    failure_text,
    line_text,
    parse_failure,
    provider_label,
    unmade_request,
)
from pi_lsp.providers.header_values import HeaderValueError, sendable_headers, trimmed, unsendable
from pi_lsp.providers.long_events import LONG_EVENT_CHARS, ReadAhead, let_loop_run, read_ahead
from pi_lsp.providers.models_file import ModelsFileError, request_model_headers
from pi_lsp.providers.output_room import fit_to_window, input_tokens
from pi_lsp.providers.registry import ANTHROPIC_API, ModelInfo, native_tool_changes
from pi_lsp.providers.retry import HttpFailure, ProviderRetry, with_retries
from pi_lsp.providers.strict import strict_parameters
from pi_lsp.providers.thinking import ANSWER_ROOM, THINKING_BUDGETS, thinking_level
from pi_lsp.session.entries import (
    AssistantMessage,
    ImageContent,
    ModelMessage,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserBlock,
    UserMessage,
)
from pi_lsp.session.ids import now_ms
from pi_lsp.session.jsontext import JS_WHITESPACE, js_field, js_string, js_truthy
from pi_lsp.session.systemfields import listed_tools, name_key, tool_key

API = ANTHROPIC_API
MIN_BUDGET = 1024  # Anthropic's smallest thinking budget, what pi sends when none fits
# Sent while thinking within a budget: the model may think between tool calls, as under pi.
# (pi's message-threads beta and eager_input_streaming are left out on purpose.)
INTERLEAVED_THINKING = "interleaved-thinking-2025-05-14"
# Asked for with tools where the host takes no per-tool eager_input_streaming (pi 1.6's
# supportsEagerToolInputStreaming: false): tool input streams as the older beta streams it.
FINE_GRAINED_TOOL_STREAMING = "fine-grained-tool-streaming-2025-05-14"
EFFORTS = {"minimal": "low", "low": "low", "medium": "medium", "high": "high"}
# Where a reply's effort is set mid-conversation (supportsMidConvoEffort): pi 1.6's betas, the
# top-level effort it keeps fixed, since it is part of the cached prompt ("low": an organization
# may cap effort and refuse any level above the cap), and thinking blocks a changed prefix drops.
MID_CONVERSATION_BETAS = ("mid-conversation-output-config-2026-07-01",
                          "thinking-binding-controls-2026-08-01")
FIXED_EFFORT = "low"
FALLBACK_BETA = "server-side-fallback-2026-07-01"  # with `fallbacks`: models that may answer
# pi 1.6's tool, never available, declared after the tools of a model that takes tool changes
# mid-conversation: the server's scaffolding for a tool change is then in the cached prefix
# from the first request.
INLINE_TOOLS_BETA = "inline-tools-2026-09-15"
DEFERRED_PLACEHOLDER: dict[str, Any] = {
    "name": "__pi_deferred_placeholder__",
    "description": "Reserved placeholder. Never available. Never call this.",
    "input_schema": {"type": "object", "properties": {}, "required": []},
    "defer_loading": True,
}
BLOCK_BINDING = {"prefix_mismatch_behavior": "drop_block"}
MARKED_EFFORTS = frozenset({"low", "medium", "high", "xhigh", "max"})
CACHE = {"type": "ephemeral"}
NO_PARAMETERS = ("a tool declared without parameters (a JSON schema object) cannot be sent to an "
                 "Anthropic model; pi 1.6 fails on it too")
# What Anthropic's strict tools refuse (pi 1.6's lists).
STRICT_REFUSED_KEYWORDS = frozenset({
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "maxItems",
    "uniqueItems", "minContains", "maxContains", "minProperties", "maxProperties"})
STRICT_FORMATS = frozenset({"date-time", "time", "date", "duration", "email", "hostname", "uri",
                            "ipv4", "ipv6", "uuid"})
# pi 1.6 asks every thinking model for summarized thinking (its thinkingDisplay default), so a
# model whose API default is to omit it (Opus 4.7 and later) still shows it.
DISPLAY = "summarized"
STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop",
                "max_tokens": "length", "tool_use": "toolUse"}
REFUSED = "The model refused to complete the request"  # pi's words when Anthropic gives none
MID_OUTPUT_FALLBACK = "Anthropic performed an unsupported mid-output model fallback"  # pi's
# message_delta's counts and the reply's: each one sent replaces the count so far (pi 1.6).
DELTA_COUNTS = (("input_tokens", "input"), ("output_tokens", "output"),
                ("cache_read_input_tokens", "cache_read"),
                ("cache_creation_input_tokens", "cache_write"))
SDK = "anthropic"
# As pi 1.6's SDK sends it: the API version pi's request bodies are written for, not the
# Python SDK 2.x's 2026-10-21, under which the API reads some of them otherwise.
PI_HEADERS = {"anthropic-version": "2023-06-01"}
# The events pi 1.6 reads (its ANTHROPIC_MESSAGE_EVENTS); an error event fails the reply first.
READ_EVENTS = frozenset({"message_start", "message_delta", "message_stop", "content_block_start",
                         "content_block_delta", "content_block_stop"})


def tool_id(raw: str, _source: AssistantMessage | None = None) -> str:
    """Ids from other providers made acceptable to Anthropic (letters, digits, _ and -)."""
    return safe_id(raw)[:64] or "tool"


# pi 1.6's words for the images of a failed tool call, which Anthropic refuses inside it.
ERROR_IMAGE_NOTE = "(image attached after the tool results)"
IMAGE_ONLY_NOTE = "(see attached image)"
CACHEABLE = ("text", "image", "tool_result", "tool_addition", "tool_removal")


def is_blank(text: str) -> bool:
    """Whether pi treats `text` as empty: nothing left after JavaScript's trim() (lone
    surrogates count as nothing too, since they are stripped before sending)."""
    return not without_lone_surrogates(text).strip(JS_WHITESPACE)


def _image(block: ImageContent) -> dict[str, Any]:
    source = {"type": "base64", "media_type": block.mime_type, "data": block.data}
    # A missing field is pi's undefined, which its JSON leaves out.
    return {"type": "image", "source": {key: value for key, value in source.items()
                                        if value is not msgspec.UNSET}}


def _blocks(content: list[UserBlock]) -> list[dict[str, Any]]:
    return [_image(block) if isinstance(block, ImageContent)
            else {"type": "text", "text": block.text} for block in content]


def _user_content(content: str | list[UserBlock]) -> str | list[dict[str, Any]] | None:
    """A user message's content with blank text left out (None: nothing left, not sent)."""
    if isinstance(content, str):
        return None if is_blank(content) else content
    return _blocks([block for block in content
                    if not isinstance(block, TextContent) or not is_blank(block.text)]) or None


def _assistant_blocks(message: AssistantMessage, empty_signatures: bool = False
                      ) -> list[dict[str, Any]]:
    """Blocks of a reply already adapted to the model: thinking left here is its own
    (unsigned, sent with an empty signature where the host takes one, else as text)."""
    blocks: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if not is_blank(block.text):
                blocks.append({"type": "text", "text": block.text})
        elif isinstance(block, ThinkingContent):
            signature = block.thinking_signature or ""
            if block.redacted and signature:
                blocks.append({"type": "redacted_thinking", "data": signature})
            elif block.redacted:
                continue  # no data to send back (pi sends the block without it: a 400)
            elif not is_blank(signature):
                blocks.append({"type": "thinking", "thinking": block.thinking,
                               "signature": signature})
            elif not is_blank(block.thinking) and empty_signatures:
                blocks.append({"type": "thinking", "thinking": block.thinking, "signature": ""})
            elif not is_blank(block.thinking):
                # Unsigned thinking cannot be replayed as thinking; it travels as plain text.
                blocks.append({"type": "text", "text": block.thinking})
        elif isinstance(block, ToolCall):
            # as written (a list, a number), but null as none (pi's `arguments ?? {}`)
            blocks.append({"type": "tool_use", "id": tool_id(block.id), "name": block.name,
                           "input": {} if block.arguments is None else block.arguments})
    return blocks


def _result_content(content: list[UserBlock]) -> str | list[dict[str, Any]]:
    """A tool result's content as pi sends it: text alone as one string (lines joined),
    otherwise blocks, with a note first when there are only images."""
    if all(isinstance(block, TextContent) for block in content):
        return "\n".join(block.text for block in content if isinstance(block, TextContent))
    blocks = _blocks(content)
    if not any(isinstance(block, TextContent) for block in content):
        blocks.insert(0, {"type": "text", "text": IMAGE_ONLY_NOTE})
    return blocks


def _without_images(content: list[UserBlock]) -> list[UserBlock]:
    """An error result's content with each run of images replaced by a note."""
    kept: list[UserBlock] = []
    for block in content:
        if isinstance(block, ImageContent):
            if not (kept and isinstance(kept[-1], TextContent)
                    and kept[-1].text == ERROR_IMAGE_NOTE):
                kept.append(TextContent(text=ERROR_IMAGE_NOTE))
        else:
            kept.append(block)
    return kept


def _tool_results(results: list[ToolResultMessage]) -> list[dict[str, Any]]:
    """One turn's tool results; a failed call's images follow all of them, each group
    introduced by a line, since Anthropic accepts only text in an error result."""
    blocks: list[dict[str, Any]] = []
    after: list[dict[str, Any]] = []
    for message in results:
        call_id = tool_id(message.tool_call_id)
        content = message.content
        images = [block for block in content if isinstance(block, ImageContent)]
        if js_truthy(message.is_error) and images:
            content = _without_images(content)
            after.append({"type": "text", "text": "Images from the error result of tool call "
                                                  f"{call_id} ({js_string(message.tool_name)}):"})
            after.extend(_image(image) for image in images)
        block = {"type": "tool_result", "tool_use_id": call_id, "content": _result_content(content)}
        if message.is_error is not msgspec.UNSET:  # pi's JSON.stringify drops an undefined one
            block["is_error"] = message.is_error
        blocks.append(block)
    return blocks + after


def _effort_marker(effort: str) -> dict[str, Any]:
    """pi 1.6's system message setting the effort of the reply after it."""
    return {"role": "system", "content": [], "output_config": {"effort": effort}}


def _marked_effort(message: AssistantMessage, provider: str) -> str | None:
    """The effort a reply of ours was asked for, where pi 1.6 marks it (None: not marked)."""
    level = message.provider_thinking_level
    mine = message.api == API and message.provider == provider
    # (a hand-edited level of another type is kept as decoded: pi's isAnthropicEffort refuses it)
    return level if mine and isinstance(level, str) and level in MARKED_EFFORTS else None


Definitions = Callable[[list[ToolSpec]], list[dict[str, Any]]]


def _system_update(message: SystemMessage, definitions: Definitions | None
                   ) -> dict[str, Any] | None:
    """A system message after the first as pi 1.6 sends it in place: its text and section
    changes framed by name, then (with `definitions`: tool changes in place) its tool removals
    and additions (None: nothing to send)."""
    blocks: list[dict[str, Any]] = []
    text = system_update_text(message)
    if text:
        blocks.append({"type": "text", "text": text})
    if definitions is not None:
        added = listed_tools(message.tools_added)
        redefined = {tool_key(tool) for tool in added}  # a new definition replaces the old
        blocks += [{"type": "tool_removal", "tool": {
                       "type": "tool_reference", **declared_fields(name=js_field(tool, "name"))}}
                   for tool in listed_tools(message.tools_removed)
                   if tool_key(tool) not in redefined]
        blocks += [{"type": "tool_addition", "tool": {"type": "tool_definition",
                                                       "definition": definition}}
                   for definition in definitions([tool_spec(tool) for tool in added])]
    return {"role": "system", "content": blocks} if blocks else None


def wire_messages(messages: list[ModelMessage], model_id: str, provider: str = "anthropic",
                  model_input: Sequence[str] = ("text", "image"),
                  cache: dict[str, Any] | None = CACHE,
                  effort: str | None = None, definitions: Definitions | None = None,
                  empty_signatures: bool = False) -> list[dict[str, Any]]:
    """Model-layer messages as Messages API turns; consecutive tool results share one turn.
    A model whose `model_input` lacks "image" gets notes for the images; `cache`: the newest
    is a cache breakpoint with this mark; `effort`: each reply's effort and the next one's are
    marked. A system message waits until just before the next reply sent (a tool result must
    follow its call), as pi 1.6 holds it; with `definitions` its tool changes are said in it.
    `empty_signatures`: the host takes unsigned thinking back as thinking."""
    wire: list[dict[str, Any]] = []
    results: list[ToolResultMessage] = []
    held: list[dict[str, Any]] = []
    for message in adapt_to_model(messages, provider, API, model_id, tool_id,
                                  model_input=model_input):
        if isinstance(message, ToolResultMessage):
            results.append(message)
            continue
        if results:
            wire.append({"role": "user", "content": _tool_results(results)})
            results = []
        if isinstance(message, SystemMessage):
            update = _system_update(message, definitions)
            held += [update] if update is not None else []
        elif isinstance(message, UserMessage):
            content = _user_content(message.content)
            if content is not None:
                wire.append({"role": "user", "content": content})
        elif isinstance(message, AssistantMessage):
            blocks = _assistant_blocks(message, empty_signatures)
            earlier = _marked_effort(message, provider) if effort is not None else None
            if blocks:
                wire += held
                held = []
            if blocks and earlier is not None:
                wire.append(_effort_marker(earlier))
            if blocks:
                wire.append({"role": "assistant", "content": blocks})
    if results:
        wire.append({"role": "user", "content": _tool_results(results)})
    wire += held
    if cache is not None:
        _mark_newest(wire, cache)
    if effort is not None:
        wire.append(_effort_marker(effort))
    return wire


def cache_control(request: ModelRequest) -> dict[str, Any] | None:
    """The mark of a cache breakpoint (None: none, for a one-off request); kept an hour for a
    long retention where the model allows it, as pi 1.6 marks it."""
    if request.cache_retention == "none":
        return None
    long = request.cache_retention == "long" and \
        request.model.compat.supports_long_cache_retention is not False
    return {**CACHE, "ttl": "1h"} if long else dict(CACHE)


def _mark_newest(wire: list[dict[str, Any]], control: dict[str, Any]) -> None:
    """A cache breakpoint on the newest message when it is the user's or a system message, so
    the next call reads the whole prefix (pi marks no reply: the next request adds a turn after
    it anyway)."""
    if not wire or wire[-1]["role"] not in ("user", "system"):
        return
    newest = wire[-1]
    if isinstance(newest["content"], str):
        newest["content"] = [{"type": "text", "text": newest["content"]}]
    if newest["content"] and newest["content"][-1]["type"] in CACHEABLE:
        newest["content"][-1]["cache_control"] = control


def _system(prompt: str, control: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    """The system blocks (None: an empty prompt, which pi leaves out; an empty block is a 400),
    a cache breakpoint marked `control` where there is one."""
    if not prompt:
        return None
    return [{"type": "text", "text": prompt,
             **({"cache_control": control} if control is not None else {})}]


# Root keywords of a tool's schema kept as they are: shared definitions so $refs resolve, and
# whether extra arguments are allowed. Others stay out (Anthropic 400s on a root anyOf).
KEPT_SCHEMA_KEYS = ("additionalProperties", "$defs", "definitions")


def input_schema(parameters: Any) -> dict[str, Any]:
    """A tool's parameters as the object schema Anthropic requires (pi 1.6's shape); a tool
    declared without them cannot be sent (pi 1.6 fails reading them too)."""
    if parameters is None or parameters is msgspec.UNSET:
        raise ValueError(NO_PARAMETERS)
    parameters = parameters if isinstance(parameters, dict) else {}  # a field of none
    properties = parameters.get("properties")
    required = parameters.get("required")
    schema: dict[str, Any] = {"type": "object",
                              "properties": {} if properties is None else properties,
                              "required": [] if required is None else required}
    schema.update((key, parameters[key]) for key in KEPT_SCHEMA_KEYS if key in parameters)
    return schema


def _refused_when_strict(key: str, value: Any) -> bool:
    """A keyword Anthropic's strict tools refuse with a 400 for the whole request (pi's
    isAnthropicStrictUnsupportedKeyword)."""
    if key in STRICT_REFUSED_KEYWORDS:
        return True
    if key == "minItems":
        return value not in (0, 1) or isinstance(value, bool)
    if key == "format":
        return not isinstance(value, str) or value not in STRICT_FORMATS
    return False


def tool_definitions(tools: list[ToolSpec], model: ModelInfo) -> list[dict[str, Any]]:
    """Tools as Anthropic definitions; one that asks for constrained sampling is strict on a
    model that supports it (pi's `supportsStrictTools`: every Claude in its catalog), where its
    schema fits: every property required, an optional one nullable (pi 1.6's convertTools)."""
    wire = []
    for tool in tools:
        strict = strict_parameters(tool, bool(model.compat.supports_strict_tools),
                                   _refused_when_strict)
        schema = input_schema(tool.parameters) if strict is None else \
            {**strict, **input_schema(strict)}
        wire.append({**declared_fields(name=tool.name, description=tool.description),
                     **({"strict": True} if strict is not None else {}), "input_schema": schema})
    return wire


def tool_changes_in_place(request: ModelRequest) -> bool:
    """Whether the request says tool changes in place (pi's nativeToolChanges): the model takes
    them and tools were declared first."""
    return native_tool_changes(request.model) and request.tool_changes_in_place and \
        bool(request.tools)


def _tools(request: ModelRequest) -> list[dict[str, Any]]:
    """Tool definitions; with `cache`, the last one a cache breakpoint so the tool list is cached
    too (where the host takes one there); pi's placeholder after them where tool changes are
    said in place."""
    wire = tool_definitions(request.tools, request.model)
    control = cache_control(request)
    if control is not None and request.model.compat.supports_cache_control_on_tools is not False:
        wire[-1]["cache_control"] = control
    if tool_changes_in_place(request):
        wire.append(dict(DEFERRED_PLACEHOLDER))
    return wire


def _effort(model: ModelInfo, level: str) -> str:
    """The effort an adaptive model is asked for: its `thinkingLevelMap` entry, else pi's."""
    return model.thinking_level_map.get(level) or EFFORTS.get(level, "high")


def _budget_thinking(model: ModelInfo, level: str, room: int, used: int) -> dict[str, Any]:
    """max_tokens and a thinking budget that share it, as pi 1.6 sizes them: the budget on top
    of the output room, within the model's cap and the context window (`used` input tokens),
    answer room kept."""
    budget = THINKING_BUDGETS.get(level, THINKING_BUDGETS["high"])
    max_tokens = min(room + budget, model.max_tokens)
    if max_tokens <= budget:
        budget = min(budget, max(0, max_tokens - ANSWER_ROOM))
    max_tokens = fit_to_window(model.context_window, used, max_tokens)
    budget = min(budget, max(0, max_tokens - ANSWER_ROOM)) or MIN_BUDGET
    return {"max_tokens": max_tokens,
            "thinking": {"type": "enabled", "budget_tokens": budget, "display": DISPLAY}}


def _always_on(model: ModelInfo) -> bool:
    """Whether a model is never told thinking is off (pi: its `thinkingLevelMap` drops "off")."""
    return "off" in model.thinking_level_map and model.thinking_level_map["off"] is None


def managed_effort(request: ModelRequest) -> str | None:
    """The effort pi 1.6 marks the next reply with, on a model whose effort is set
    mid-conversation (None: not one, or thinking is off, where no effort is sent)."""
    model = request.model
    if not model.compat.supports_mid_convo_effort:
        return None
    level = thinking_level(model, request.thinking_level)
    if level is None:
        return None if model.reasoning and not _always_on(model) else "high"  # pi's default
    return _effort(model, level)


def _thinking(request: ModelRequest) -> dict[str, Any]:
    """max_tokens and the thinking fields for the session's level, clamped to the model's."""
    model = request.model
    used = input_tokens(request)  # estimated once: it walks the messages after the last reply
    room = fit_to_window(model.context_window, used, request.max_tokens or model.max_tokens)
    if managed_effort(request) is not None:  # the effort goes in the messages (wire_messages)
        return {"max_tokens": room, "output_config": {"effort": FIXED_EFFORT}, "thinking": {
            "type": "adaptive", "display": DISPLAY, "block_binding": BLOCK_BINDING}}
    level = thinking_level(model, request.thinking_level)
    if level is None:
        # pi says nothing about thinking to a model without it, or whose "off" is not sent.
        quiet = not model.reasoning or _always_on(model)
        return {"max_tokens": room} if quiet else {"max_tokens": room,
                                                   "thinking": {"type": "disabled"}}
    if model.compat.force_adaptive_thinking:
        return {"max_tokens": room, "thinking": {"type": "adaptive", "display": DISPLAY},
                "output_config": {"effort": _effort(model, level)}}
    return _budget_thinking(model, level, room, used)


def _betas_of(headers: dict[str, str]) -> list[str]:
    """The betas an `anthropic-beta` header among `headers` names."""
    for name, value in headers.items():
        if name.lower() == "anthropic-beta":
            return list(dict.fromkeys(b.strip() for b in value.split(",") if b.strip()))
    return []


def has_current_tools(request: ModelRequest) -> bool:
    """Whether tools are declared at the request's end (pi's getCurrentTools): where tool
    changes are said in place, the first tools with the later system messages' changes."""
    if not tool_changes_in_place(request):
        return bool(request.tools)
    names = {name_key(tool.name) for tool in request.tools}
    for message in request.messages:
        if isinstance(message, SystemMessage):
            names.difference_update(map(tool_key, listed_tools(message.tools_removed)))
            names.update(map(tool_key, listed_tools(message.tools_added)))
    return bool(names)


def _betas(model: ModelInfo, budgeted: bool, in_place: bool, tools: bool) -> list[str]:
    """The betas asked for: one its provider's `anthropic-beta` header sets (sent with every
    request: the 1M window's beta, say) leaves none, as pi's last header wins; else one the
    model's sets replaces pi's own. `tools`: the request declares tools at its end."""
    if model.provider_beta:
        return []
    own = [FINE_GRAINED_TOOL_STREAMING] if tools and \
        model.compat.supports_eager_tool_input_streaming is False else []
    if budgeted and model.reasoning:
        own.append(INTERLEAVED_THINKING)
    if model.compat.allowed_fallback_models:
        own.append(FALLBACK_BETA)
    if model.compat.supports_mid_convo_effort:  # even with thinking off, as pi asks for them
        own.extend(MID_CONVERSATION_BETAS)
    if in_place:
        own.append(INLINE_TOOLS_BETA)
    return _betas_of(model.headers) or own


async def _sent_headers(model: ModelInfo) -> dict[str, str]:
    """The model's own headers for a request: its `anthropic-beta` left out where the
    provider's goes (pi merges the provider's after the model's)."""
    headers = await request_model_headers(model)
    if model.provider_beta:
        headers = {name: value for name, value in headers.items()
                   if name.lower() != "anthropic-beta"}
    return headers


def request_params(request: ModelRequest) -> dict[str, Any]:
    """The keyword arguments of `messages.create` (of `beta.messages.create` when it has
    `betas`) for a request."""
    model = request.model
    params: dict[str, Any] = {
        "model": model.id,
        "messages": wire_messages(request.messages, model.id, model.provider, model.input,
                                  cache_control(request), managed_effort(request),
                                  functools.partial(tool_definitions, model=model)
                                  if tool_changes_in_place(request) else None,
                                  bool(model.compat.allow_empty_signature)),
    }
    system = _system(request.system_prompt, cache_control(request))
    if system is not None:
        params["system"] = system
    if request.tools:
        params["tools"] = _tools(request)
    params.update(_thinking(request))
    betas = _betas(model, params.get("thinking", {}).get("type") == "enabled",
                   tool_changes_in_place(request), has_current_tools(request))
    if betas:
        params["betas"] = betas
    if model.compat.allowed_fallback_models:
        params["fallbacks"] = [{"model": fallback.model}
                               for fallback in model.compat.allowed_fallback_models]
    return without_lone_surrogates(params)  # type: ignore[no-any-return]


def error_text(label: str, error: BaseException) -> str | None:
    """One line for an error the server sent as a failed status, or a reply the SDK could not
    read (None: not one). An error event mid-stream is pi's own words (_JsonParseDecoder)."""
    if not isinstance(error, anthropic.APIError):
        return None
    body = error.body
    detail = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, anthropic.APIStatusError) and isinstance(detail, dict):
        kind, text = detail.get("type", "error"), detail.get("message", "")
        return f"{label} {error.status_code} {cut_error_text(f'{kind}: {text}')}".strip()
    if isinstance(error, anthropic.APIStatusError):
        return f"{label} {error.status_code}: {cut_error_text(error.message)}"
    return f"{label} stream error: {cut_error_text(error.message)}"


def http_failure(error: Exception) -> HttpFailure | None:
    if isinstance(error, anthropic.APIStatusError) and error.status_code != 200:
        return error.status_code, error.response.headers
    if isinstance(error, anthropic.APIConnectionError):
        return None, {}
    return None


def mended_event_json(data: str) -> Any:
    """An event's data as pi 1.6 reads an Anthropic event (parseJsonWithRepair): as JSON (see
    event_json), else once more with its strings mended by `repaired_json` if that changes it."""
    try:
        return event_json(data)
    except json.JSONDecodeError:
        repaired = repaired_json(data)
        if repaired == data:
            raise
        return event_json(repaired)


RAW_JOIN = "\\n"  # pi joins an event's lines with a backslash and an n, not a newline


class _JsonParseEvent(ReadAhead, ServerSentEvent):
    def read(self) -> Any:
        try:
            return mended_event_json(self.data)
        except json.JSONDecodeError as error:
            raise MalformedEvent(unparsed_event_text(self, parse_failure(error))) from None


def unparsed_event_text(sse: ServerSentEvent, reason: str) -> str:
    """pi 1.6's words for an event it could not parse: the event's data and lines whole (its
    lines joined by a backslash and n, as pi joins them)."""
    raw = RAW_JOIN.join(sse.raw)
    return f"Could not parse Anthropic SSE event {sse.event}: {reason}; data={sse.data}; raw={raw}"


class _JsonParseDecoder(SSEDecoder):
    """The SDK's event decoder, its events read as pi's reader reads them (mended_event_json):
    a BOM before the first line dropped, the last event kept when the body ends without the
    blank line after it, others than READ_EVENTS (a proxy's keepalive) skipped unread, one of
    them with no data a failure."""

    def aiter_bytes(self, iterator: AsyncIterator[bytes]) -> AsyncIterator[ServerSentEvent]:
        return read_ahead(self._events(iterator))

    async def _events(self, iterator: AsyncIterator[bytes]) -> AsyncIterator[ServerSentEvent]:
        # The SDK's, each line read by line_text: its events are split from the bytes first,
        # so a character cut between two chunks is whole here. pi's reader decodes the body as
        # one stream, so only a BOM starting the body is dropped.
        first = True
        async for chunk in self._aiter_chunks(ended_stream(iterator)):
            # A long event's lines are split and decoded off the loop (40 MB: 0.12 s).
            events, error = await asyncio.to_thread(self._decoded, chunk, first) \
                if len(chunk) > LONG_EVENT_CHARS else self._decoded(chunk, first)
            first = False
            for sse in events:
                yield sse
            if error is not None:
                raise error

    def _decoded(self, chunk: bytes, first: bool
                 ) -> tuple[list[ServerSentEvent], Exception | None]:
        """The events `chunk`'s lines end (`first`: it starts the body), and the error a line
        raised, to be raised once the events before it are passed on."""
        events = []
        # A chunk may hold two events (the SDK's chunker sees no blank line in "\\n\\r\\n"):
        # pi 1.6 reads the first before the second fails the reply.
        try:
            for raw_line in chunk.splitlines():
                sse, first = self.decode(line_text(raw_line, bom=first)), False
                if sse:
                    events.append(sse)
        except Exception as error:
            return events, error
        return events, None

    async def _aiter_chunks(self, iterator: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """The SDK's: each event's bytes, up to the blank line that ends it. Its lines are
        joined once, where the SDK added each to the event's bytes, copying them whole every
        time (one 40 MB line: 6.5 s of the event loop)."""
        lines: list[bytes] = []
        tail = b""  # the event's last bytes: enough to see the blank line
        async for chunk in iterator:
            for line in chunk.splitlines(keepends=True):
                lines.append(line)
                tail = (tail + line[-4:])[-4:]
                if tail.endswith((b"\r\r", b"\n\n", b"\r\n\r\n")):
                    yield b"".join(lines)
                    lines, tail = [], b""
        if lines:
            yield b"".join(lines)

    def decode(self, line: str) -> ServerSentEvent | None:
        sse = super().decode(line)
        if sse is not None and sse.event == "error":
            # pi 1.6's reader fails the reply with the event's data as it came (not the SDK's
            # reading of it), so the session says what the server said, retried as pi retries.
            raise ReplyFailed(cut_error_text(sse.data))
        if sse is None or sse.event not in READ_EVENTS:
            return None
        if not sse.data:  # the SDK skips it; pi 1.6's JSON.parse("") fails the reply
            raise MalformedEvent(unparsed_event_text(sse, "Unexpected end of JSON input"))
        return _JsonParseEvent(event=sse.event, data=sse.data, id=sse.id, retry=sse.retry,
                               raw=sse.raw)


class _Client(anthropic.AsyncAnthropic):
    # The SDK's hook for the decoder its streams read events with (its Bedrock client's too).
    def _make_sse_decoder(self, options: FinalRequestOptions | None = None) -> SSEDecoder:
        return _JsonParseDecoder()

    @property
    def auth_headers(self) -> dict[str, str]:
        """The key as pi 1.6's SDK sends it, `x-api-key` (the Python SDK 2.x sends a bearer
        token, which an Anthropic-compatible server reading only `x-api-key` refuses)."""
        return {"X-Api-Key": self.api_key} if self.api_key else {}


def _as_json(value: Any) -> Any:
    """An SDK object as the JSON the server sent, fields the SDK does not know included."""
    return value.to_dict(warnings=False) if hasattr(value, "to_dict") else value


def _long_writes(usage: Any) -> Any:
    """The usage's cache writes kept an hour; None where it does not say."""
    return _member(_member(usage, "cache_creation"), "ephemeral_1h_input_tokens")


def _member(value: Any, name: str) -> Any:
    """A field of a JSON object as the SDK gives it (a typed object, or a dict for a field it
    does not know); None where there is none."""
    return value.get(name) if isinstance(value, dict) else getattr(value, name, None)


def _transformations(event: Any, kind: Any) -> list[Any] | None:
    """The `input_transformations` list a message_start's message or a message_delta carries
    (None: none, or not a list)."""
    holder = event.message if kind == "message_start" else \
        event if kind == "message_delta" else None
    sent = _as_json(_member(holder, "input_transformations"))
    return sent if isinstance(sent, list) else None


def _transformations_note(transformations: list[Any]) -> dict[str, Any]:
    """pi 1.6's note on a reply whose input the server changed (an image dropped, say): each
    change's type, path and reason where given; only a reply that ended well has one."""
    changes = [{key: value for key in ("type", "path", "reason")
                if (value := _member(_as_json(change), key)) is not None}
               for change in transformations]
    return {"type": "anthropic_input_transformations", "timestamp": now_ms(),
            "details": {"transformations": changes}}


class AnthropicProvider:
    name = "anthropic"

    def __init__(self, api_key: str | None, base_url: str | None = None,
                 retry: ProviderRetry | None = None, headers: dict[str, str] | None = None,
                 name: str = "anthropic") -> None:
        api_key = trimmed(api_key or "")
        if not api_key:
            raise MissingApiKeyError(name)
        self.name = name
        self.label = provider_label(name)
        self.retry = retry or ProviderRetry()
        # A key or header that cannot be sent fails each request (as in pi), not the provider.
        self.unsendable, api_key, headers = unsendable(api_key, headers or {}, self.label)
        # base_url None leaves the SDK's own ANTHROPIC_BASE_URL handling in place; retries are
        # ours (pi's policy), never the SDK's.
        self.client = _Client(api_key=api_key, base_url=base_url, max_retries=0,
                              timeout=self.retry.timeout_s,
                              default_headers={**PI_HEADERS, **(headers or {})})

    async def stream(self, request: ModelRequest, reply: ReplyBuilder
                     ) -> AsyncIterator[ProviderEvent]:
        try:  # a failure making the request ends the reply too, as pi 1.6's does
            params = request_params(request)
            reply.provider_thinking_level = managed_effort(request)  # kept if the call fails
        except Exception as error:
            reply.fail("error", unmade_request(error, self.label))
            return
        try:
            if self.unsendable:
                raise HeaderValueError(self.unsendable)
            headers = sendable_headers(await _sent_headers(request.model), self.label)
        except (ModelsFileError, HeaderValueError) as error:  # pi 1.6 fails too
            reply.fail("error", str(error))
            return
        answered = started = stopped = reasoned = False
        try:
            # Betas go through the SDK's beta client, which sends them as `anthropic-beta`;
            # only it takes `fallbacks` (a provider's own beta header may have left no betas).
            beta = "betas" in params or "fallbacks" in params
            messages = self.client.beta.messages if beta else self.client.messages
            stream = await with_retries(
                lambda: messages.create(
                    **params, stream=True, extra_headers=headers or None),
                self.retry, http_failure)
            answered = True
            slots: dict[Any, int] = {}  # the API's block index (slot_key) -> the reply's
            transformations: list[Any] = []  # the last list the server sent
            async with stream:
                async for event in stream:
                    await let_loop_run()
                    kind = event_type(event)
                    sent = _transformations(event, kind)
                    transformations = transformations if sent is None else sent
                    started = started or kind == "message_start"
                    stopped = stopped or kind == "message_stop"
                    reasoned = reasoned or (kind == "message_delta"
                                            and bool(js_member(event.delta, "stop_reason")))
                    for produced in self._apply(event, reply, slots):
                        yield produced
            if started and not stopped:
                raise StreamEndedEarly("stream ended before message_stop")
            if not reasoned:
                raise StreamEndedEarly("stream ended without a stop reason")
            if transformations and reply.stop_reason not in ("error", "aborted"):
                reply.diagnostics.append(_transformations_note(transformations))
        except Exception as error:  # every failure ends in the reply, partial content kept
            reply.fail("error", failure_text(error, self.label, str(self.client.base_url),
                                             self.retry.timeout_s, answered, error_text))

    def _apply(self, event: Any, reply: ReplyBuilder, slots: dict[Any, int]
               ) -> list[ProviderEvent]:
        kind, key = event_type(event), slot_key(_member(event, "index"))
        if kind == "message_start":
            reply.response_id = event.message.id
            answering = getattr(event.message, "model", None)
            # Another model answered (a server-side fallback, say): pi 1.6 records which.
            # (A name that is not a string is not kept: its line could not be read back.)
            reply.response_model = answering if isinstance(answering, str) \
                and answering != reply.model.id else None
            usage = event.message.usage
            # A usage that is a number or text holds no counts (pi reads each as undefined).
            reply.usage.input = js_member(usage, "input_tokens") or 0
            reply.usage.output = js_member(usage, "output_tokens") or 0
            reply.usage.cache_read = js_member(usage, "cache_read_input_tokens") or 0
            reply.usage.cache_write = js_member(usage, "cache_creation_input_tokens") or 0
            reply.usage.cache_write_1h = _long_writes(usage) or 0
            reply.priced = True
        elif kind == "content_block_start":
            block = event.content_block
            block_type = event_type(block)
            if block_type == "fallback" and reply.blocks:
                raise ReplyFailed(MID_OUTPUT_FALLBACK)
            if block_type == "text":
                slots[key] = index = reply.start_text()
                return reply.add_text(index, block.text) if block.text else []
            if block_type == "thinking":
                slots[key] = index = reply.start_thinking()
                # The block may open with thinking and a signature already (pi keeps both).
                reply.add_signature(index, getattr(block, "signature", None) or "")
                thinking = getattr(block, "thinking", None) or ""
                return reply.add_thinking(index, thinking) if thinking else []
            if block_type == "redacted_thinking":
                data = getattr(block, "data", None)
                slots[key] = reply.start_thinking(data, redacted=True)
            elif block_type == "tool_use":
                slots[key] = reply.start_tool_call(block.id, block.name)
        elif kind == "content_block_delta" and key in slots:
            return self._apply_delta(event.delta, reply, slots[key])
        elif kind == "content_block_stop" and key in slots:
            return [reply.end_block(slots[key])]
        elif kind == "message_delta":
            self._stop(event.delta, reply)
            for sent, kept in DELTA_COUNTS:
                count = getattr(event.usage, sent, None)  # the delta may carry no usage
                if count is not None:
                    setattr(reply.usage, kept, count)
            self._delta_usage(event.usage, reply)
        return []

    def _delta_usage(self, usage: Any, reply: ReplyBuilder) -> None:
        """What pi 1.6 reads of a message_delta's usage besides the counts: the 1h cache
        writes (a gateway sends them here), the thinking tokens, OpenRouter's bill."""
        long_writes = _long_writes(usage)
        if long_writes is not None:
            reply.usage.cache_write_1h = long_writes
        thinking = _member(_member(usage, "output_tokens_details"), "thinking_tokens")
        if thinking is not None:
            reply.usage.reasoning = thinking
        # pi prices the reply again at each delta, with the bill where OpenRouter sent one.
        reply.billed = reported_cost(_as_json(usage)) \
            if is_openrouter(reply.model) and usage is not None else None

    def _stop(self, delta: Any, reply: ReplyBuilder) -> None:
        """The stop reason as pi 1.6 maps it; one pi does not know ends the reply there."""
        reason = js_member(delta, "stop_reason")
        if reason:
            reply.raw_stop_reason = reason
        if reason == "refusal":
            details = getattr(delta, "stop_details", None)
            reply.fail("error", getattr(details, "explanation", None) or REFUSED)
        elif reason == "sensitive":  # flagged by safety filters
            reply.fail("error", "Provider stopped with: sensitive")
        elif reason in STOP_REASONS:
            reply.stop_reason = STOP_REASONS[reason]  # type: ignore[assignment]
        elif reason:
            raise ReplyFailed(f"Unhandled stop reason: {reason}")

    def _apply_delta(self, delta: Any, reply: ReplyBuilder, index: int) -> list[ProviderEvent]:
        kind = event_type(delta)
        if kind == "text_delta":
            return reply.add_text(index, delta.text)
        if kind == "thinking_delta":
            return reply.add_thinking(index, delta.thinking)
        if kind == "signature_delta":
            reply.add_signature(index, delta.signature)
        elif kind == "input_json_delta":
            return reply.add_tool_json(index, delta.partial_json)
        return []
