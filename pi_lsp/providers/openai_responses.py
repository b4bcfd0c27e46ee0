"""The OpenAI Responses API (`openai-responses`): the request for a turn and the stream read back.

Tool-call ids are pi's `call_id|item_id`; a reasoning item is kept whole (encrypted content
included) as the thinking block's signature so the same model gets it back; a message item's
id is kept as pi keeps it, `{"v":1,"id":…}` in the text block's signature.
"""

from __future__ import annotations

import json
from collections.abc import Callable
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
    event_type,
    js_member,
    safe_id,
    short_hash,
    slot_key,
    token_count,
    tool_spec,
    without_lone_surrogates,
)
from pi_lsp.providers.failures import ReplyFailed, StreamEndedEarly, cut_error_text, event_json
from pi_lsp.providers.openai_api import sent_json
from pi_lsp.providers.openai_chat import (
    PROMPT_CACHE_KEY_CHARS,
    off_effort,
)
from pi_lsp.providers.output_room import output_room
from pi_lsp.providers.registry import RESPONSES_API, Compat, ModelInfo, native_tool_changes
from pi_lsp.providers.sampling import sampling_fields
from pi_lsp.providers.strict import openai_tool_schema
from pi_lsp.providers.thinking import effort_of, thinking_level
from pi_lsp.session.entries import (
    AssistantMessage,
    ImageContent,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserBlock,
    UserMessage,
)
from pi_lsp.session.ids import now_ms
from pi_lsp.session.jsontext import js_field, js_string, js_truthy, stringify
from pi_lsp.session.systemfields import listed_tools, name_key

MIN_OUTPUT_TOKENS = 16  # OpenAI rejects less
# The top-level effort while configuration_update items carry each reply's (pi 1.6's).
CONFIGURATION_UPDATE_REQUEST_EFFORT = "medium"
# Providers whose `call|item` ids are OpenAI's own; other hosts get one plain id.
PAIRED_ID_PROVIDERS = frozenset({"openai", "openai-codex", "opencode"})
SDK = "openai"
# The statuses pi 1.6 ends a reply on as a stop, besides none (any falsy status).
STOP_STATUSES = ("completed", "in_progress", "queued")


def compat_of(model: ModelInfo) -> Compat:
    """The model's flags over the Responses defaults (pi's)."""
    openrouter = model.provider == "openrouter" or "openrouter.ai" in (model.base_url or "")
    return model.compat.over(Compat(
        supports_developer_role=True, supports_strict_mode=False, prompt_cache_key_mode="auto",
        session_affinity_format="openrouter" if openrouter else "openai"))


def _id_part(part: str) -> str:
    return safe_id(part)[:64].rstrip("_")


def tool_id(raw: str, source: AssistantMessage, model: ModelInfo) -> str:
    """Another model's tool-call id made acceptable here, as pi makes it: safe characters; for
    OpenAI a `call|fc_…` pair, with another provider's item id hashed."""
    if model.provider not in PAIRED_ID_PROVIDERS or "|" not in raw:
        return _id_part(raw)
    call, item = raw.split("|", 1)
    foreign = source.provider != model.provider or source.api != model.api
    item = f"fc_{short_hash(item)}"[:64] if foreign else _id_part(item)
    if not item.startswith("fc_"):
        item = _id_part(f"fc_{item}")
    return f"{_id_part(call)}|{item}"


def text_signature(item_id: str, phase: str | None) -> str:
    """pi's text signature: the message item's id (and phase), as JSON."""
    payload: dict[str, Any] = {"v": 1, "id": item_id}
    if phase:
        payload["phase"] = phase
    return json.dumps(payload, separators=(",", ":"))


def parse_text_signature(signature: str | None) -> tuple[str | None, str | None]:
    """The item id and phase of a text signature: pi's JSON, or a bare id (older files)."""
    if not signature:
        return None, None
    if signature.startswith("{"):
        try:
            parsed = json.loads(signature)
        except json.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict) and parsed.get("v") == 1 and \
                isinstance(parsed.get("id"), str):
            phase = parsed.get("phase")
            return parsed["id"], phase if phase in ("commentary", "final_answer") else None
    return signature, None


def _content(content: str | list[UserBlock]) -> list[dict[str, Any]]:
    """A user message's content (images left in it are ones the model can see)."""
    blocks = [TextContent(text=content)] if isinstance(content, str) else content
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, TextContent):
            parts.append({"type": "input_text", "text": block.text})
        else:
            parts.append({"type": "input_image", "detail": "auto",
                          "image_url": block.data_url()})
    return parts


def _assistant(message: AssistantMessage, model: ModelInfo, index: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    same_api = message.provider == model.provider and message.api == model.api
    same_model = same_api and message.model == model.id
    other_model = same_api and not same_model
    texts = 0
    for block in message.content:
        if isinstance(block, ThinkingContent):
            if block.thinking_signature:  # this model's reasoning item, replayed as it came
                try:
                    items.append(json.loads(block.thinking_signature))
                except json.JSONDecodeError:
                    continue
        elif isinstance(block, TextContent):
            item_id, phase = parse_text_signature(block.text_signature)
            if not item_id:
                item_id = f"msg_pi_{index}" if texts == 0 else f"msg_pi_{index}_{texts}"
            elif len(item_id) > 64:
                item_id = f"msg_{short_hash(item_id)}"
            texts += 1
            text: dict[str, Any] = {"type": "message", "role": "assistant", "content": [
                {"type": "output_text", "text": block.text, "annotations": []}],
                "status": "completed", "id": item_id}
            if phase:
                text["phase"] = phase
            items.append(text)
        elif isinstance(block, ToolCall):
            call_id, _, item_id = block.id.partition("|")
            call: dict[str, Any] = {"type": "function_call"}
            # Another model's item ids were paired with its own reasoning; leave them out.
            if item_id.startswith("fc_") and not other_model:
                call["id"] = item_id
            call.update(call_id=call_id, name=block.name, arguments=stringify(block.arguments))
            if same_model and block.namespace is not msgspec.UNSET:
                call["namespace"] = block.namespace
            items.append(call)
    return items


def _tool_result(result: ToolResultMessage) -> dict[str, Any]:
    """A tool result's output item (images left in it are ones the model can see)."""
    text = "\n".join(b.text for b in result.content if isinstance(b, TextContent))
    images = [b for b in result.content if isinstance(b, ImageContent)]
    output: str | list[dict[str, Any]]
    if images:
        output = [{"type": "input_text", "text": text}] if text.strip() else []
        output += [{"type": "input_image", "detail": "auto",
                    "image_url": b.data_url()} for b in images]
    else:
        output = text if text.strip() else "(no tool output)"
    return {"type": "function_call_output", "call_id": result.tool_call_id.partition("|")[0],
            "output": output}


def configuration_effort(request: ModelRequest) -> str | None:
    """The effort pi 1.6 sends in `configuration_update` items on a model whose effort is set
    mid-conversation, and marks the reply with (None: not one, or thinking is off)."""
    model = request.model
    level = thinking_level(model, request.thinking_level)
    if not compat_of(model).supports_mid_convo_effort or level is None:
        return None
    return effort_of(model, level)


def _configuration_update(effort: str) -> dict[str, Any]:
    return {"type": "configuration_update", "reasoning": {"effort": effort}}


def tool_changes_in_place(request: ModelRequest) -> bool:
    """Whether every tool goes in `additional_tools` items, each change where it was made."""
    return native_tool_changes(request.model) and request.tool_changes_in_place


def wire_tools(tools: list[ToolSpec], model: ModelInfo) -> list[dict[str, Any]]:
    """Tools as Responses function tools, strict where the model and the tool's schema allow."""
    strict = bool(compat_of(model).supports_strict_mode)
    return [{"type": "function", **declared_fields(name=t.name, description=t.description),
             **openai_tool_schema(t, strict)} for t in tools]


class _Instructions:
    """A request's system messages as pi 1.6 sends them to a model that takes them in place:
    a developer message each, and with tool changes in place an `additional_tools` item for the
    tools each adds (after the first, led by pi's notice that it is an increment) and a notice
    of the ones it takes away."""

    def __init__(self, request: ModelRequest) -> None:
        model = request.model
        self.model = model
        self.role = "developer" if model.reasoning and \
            compat_of(model).supports_developer_role else "system"
        self.in_place = tool_changes_in_place(request)
        # (with tool additions in place) the first of `request.messages`' system messages that
        # loads the tools it adds, and how many went before this one
        self.additions_from = request.additions_from
        self.systems = 0
        self.declared = False  # an additional_tools item went before
        self.unavailable: dict[str, None] = {}  # tools taken away and not declared again

    def lead(self, prompt: str, tools: list[ToolSpec], removed: list[Any]
             ) -> list[dict[str, Any]]:
        """The first system message's: its prompt whole, then (as after any) its removals."""
        items = self._additions(tools) if self.in_place else []
        return self._said(items, [prompt], tools, removed)

    def update(self, message: SystemMessage, index: int) -> list[dict[str, Any]]:
        """A later system message's items; `index`: its place among the messages after the
        lead, as pi numbers them."""
        added = [tool_spec(tool) for tool in listed_tools(message.tools_added)]
        loads = self.additions_from is not None and self.systems >= self.additions_from
        self.systems += 1
        items = self._additions(added) if self.in_place else \
            self._search(added, index) if loads and added else []
        return self._said(items, [system_update_text(message)], added,
                          listed_tools(message.tools_removed))

    def _search(self, tools: list[ToolSpec], index: int) -> list[dict[str, Any]]:
        """pi 1.6's tool search that loads `tools` (`supportsToolSearch`): a call the client
        made, and its output holding them, deferred, under an id of the message's place."""
        names = [tool.name if isinstance(tool.name, str) else "" for tool in tools]
        seed = f"system:{index}:" + ",".join(names)
        call = {"call_id": f"pi_tool_load_{short_hash(seed)}", "execution": "client",
                "status": "completed"}
        return [{"type": "tool_search_call", **call,
                 "arguments": {"query": " ".join(names), "limit": len(names)}},
                {"type": "tool_search_output", **call,
                 "tools": [{**tool, "defer_loading": True}
                           for tool in wire_tools(tools, self.model)]}]

    def _said(self, items: list[dict[str, Any]], parts: list[str], added: list[ToolSpec],
              removed: list[Any]) -> list[dict[str, Any]]:
        """`items`, then one message of `parts` and, with tool changes in place, the notice of
        the tools taken away (and not redefined: a redefinition is no removal)."""
        if self.in_place:
            names = {name_key(tool.name) for tool in added}
            gone = [name for tool in removed
                    if isinstance(name := js_field(tool, "name"), str)
                    and name_key(name) not in names]
            if gone:
                parts.append("The following tools are no longer available. Do not call them:\n"
                             + "\n".join(f"- {name}" for name in gone))
            self.unavailable.update(dict.fromkeys(gone))
        text = "\n\n".join(part for part in parts if part)
        return [*items, *([{"role": self.role, "content": text}] if text else [])]

    def _additions(self, tools: list[ToolSpec]) -> list[dict[str, Any]]:
        for tool in tools:
            if isinstance(tool.name, str):  # only names said go in the notice
                self.unavailable.pop(tool.name, None)
        if not tools:
            return []
        items = [{"role": self.role, "content": incremental_notice(list(self.unavailable))}
                 ] if self.declared else []
        self.declared = True
        return [*items, {"type": "additional_tools", "role": "developer",
                         "tools": wire_tools(tools, self.model)}]


def incremental_notice(unavailable: list[str]) -> str:
    """pi 1.6's words before each additional_tools item after the first: without them a model
    takes the latest item for the whole tool set."""
    notice = ("This is an incremental tools update. Previously declared tools remain available "
              "unless explicitly marked unavailable. A tool declared again here is available "
              "again, and its latest definition replaces the earlier one.")
    return f"{notice}\nStill unavailable: {', '.join(unavailable)}." if unavailable else notice


def wire_input(request: ModelRequest) -> list[dict[str, Any]]:
    """The system prompt and the conversation as Responses input items; on a model whose effort
    is set mid-conversation, each of its replies led by the effort it was asked for and the
    next one's last."""
    model = request.model
    instructions = _Instructions(request)
    items = instructions.lead(request.system_prompt, request.tools, request.tools_removed)
    effort = configuration_effort(request)
    messages = adapt_to_model(request.messages, model.provider, RESPONSES_API, model.id,
                              lambda raw, source: tool_id(raw, source, model),
                              model_input=model.input)
    sent = 0  # messages after the lead: pi numbers its made-up item ids by them
    # A system message after a reply's calls waits for the next message that is not a result:
    # a call's results follow it (pi's transformMessages holds it the same way).
    held: list[SystemMessage] = []
    calling = False
    for message in messages:
        if isinstance(message, SystemMessage):  # kept in place: counted even when empty
            if calling:
                held.append(message)  # (counted where it goes, after the results)
            else:
                items += instructions.update(message, sent)
                sent += 1
            continue
        if isinstance(message, ToolResultMessage):
            items.append(_tool_result(message))
            sent += 1
            continue
        for system in held:
            items += instructions.update(system, sent)
            sent += 1
        held, calling = [], False
        if isinstance(message, UserMessage):
            made = [{"role": "user", "content": content}] \
                if (content := _content(message.content)) else []
        else:
            made = _assistant(message, model, sent)
            calling = any(isinstance(block, ToolCall) for block in message.content)
            earlier = message.provider_thinking_level
            if made and effort is not None and earlier is not None and \
                    (message.provider, message.api, message.model) == \
                    (model.provider, RESPONSES_API, model.id):
                made.insert(0, _configuration_update(earlier))
        items += made
        sent += bool(made)
    for at, system in enumerate(held, sent):
        items += instructions.update(system, at)
    return [*items, *([_configuration_update(effort)] if effort is not None else [])]


def request_params(request: ModelRequest) -> dict[str, Any]:
    """The keyword arguments of `responses.create` for a request (`stream` aside)."""
    model, compat = request.model, compat_of(request.model)
    params: dict[str, Any] = {"model": model.id, "input": wire_input(request)}
    if request.session_id and compat.prompt_cache_key_mode != "disabled":
        params["prompt_cache_key"] = request.session_id[:PROMPT_CACHE_KEY_CHARS]
    long = request.cache_retention == "long" and compat.supports_long_cache_retention is not False
    if compat.supports_explicit_prompt_cache_mode and request.cache_retention == "none":
        # pi 1.6's cacheRetention "none" (a summary): a one-off request caches nothing.
        params["prompt_cache_options"] = {"mode": "explicit"}
    elif compat.supports_explicit_prompt_cache_mode and long:
        params["prompt_cache_options"] = {"ttl": "30m"}
    elif long:
        params["prompt_cache_retention"] = "24h"
    params["store"] = False
    if compat.supports_max_output_tokens is not False:
        params["max_output_tokens"] = max(output_room(request), MIN_OUTPUT_TOKENS)
    if request.tools and not tool_changes_in_place(request):
        params["tools"] = wire_tools(request.tools, model)
    level = thinking_level(model, request.thinking_level)
    if level:
        # Where the items carry the effort, the top-level one stays fixed (pi 1.6's).
        effort = effort_of(model, level) if configuration_effort(request) is None else \
            CONFIGURATION_UPDATE_REQUEST_EFFORT
        params["reasoning"] = {"effort": effort, "summary": "auto"}
        params["include"] = ["reasoning.encrypted_content"]
    elif model.reasoning and (off := off_effort(model, "none")) is not None:
        # Without it the server's default effort applies: "off" would still reason.
        params["reasoning"] = {"effort": off}
    params.update(sampling_fields(model, request.thinking_level))
    return without_lone_surrogates(params)  # type: ignore[no-any-return]


def request_headers(request: ModelRequest) -> dict[str, str]:
    """pi's session-affinity headers, so a session's requests reach the same cache."""
    session = request.session_id
    if not session:
        return {}
    affinity = compat_of(request.model).session_affinity_format
    if affinity == "openrouter":
        return {"x-session-id": session}
    headers = {"session-id": session} if affinity == "openai" else {}
    return {**headers, "x-client-request-id": session}


def endpoint(client: Any) -> Any:
    """The SDK call that streams this API's replies."""
    return client.responses.create


def reader(reply: ReplyBuilder, _model: ModelInfo) -> ResponsesReader:
    return ResponsesReader(reply)


def failure_of(response: Any) -> str:
    """A failed response's error, in pi's words."""
    error, details = response.error, response.incomplete_details
    if error:
        return f"{error.code or 'unknown'}: {error.message or 'no message'}"
    if details and details.reason:
        return f"incomplete: {details.reason}"
    return "Unknown error (no error details in response)"


def error_event_text(event: Any) -> str:
    """An `error` event's failure as pi 1.6 words it (its SDK throws on the event): the message
    alone, else the event as JSON, cut as an error body is. Its code stays out: "server_error:
    boom" would be retried, and pi's "boom" is not. A message of another type that JavaScript
    holds true is written as JSON, and the event as the server sent it (pi's APIError)."""
    sent = sent_json(event)
    message = sent.get("message") if isinstance(sent, dict) else getattr(event, "message", None)
    if js_truthy(message):
        return cut_error_text(message if isinstance(message, str) else stringify(message))
    # No warnings: pydantic prints one on stderr, the log, for each field of an odd type.
    return cut_error_text(stringify(event.to_dict(warnings=False) if sent is None else sent))


def reasoning_removals(transformations: Any) -> list[dict[str, Any]]:
    """The replayed reasoning items the server withheld and why (GPT-6.2 on: an edit before
    them, another model's), as pi 1.6 keeps them; turn_boundary ones are routine and left out
    (pi's appendReasoningRemovals). Anything malformed is skipped, as pi skips it."""
    if not isinstance(transformations, list):
        return []
    # The SDK makes its models of the entries it can read; others stay as they came.
    entries = [item.to_dict(warnings=False) if hasattr(item, "to_dict") else item
               for item in transformations]
    return [{key: item[key] for key in ("type", "id", "action", "reason") if key in item}
            for item in entries
            if isinstance(item, dict) and item.get("type") == "reasoning" and
            item.get("action") == "removed" and item.get("reason") != "turn_boundary"]


def _text(part: Any) -> Any:
    return js_member(part, "text")


def _said(part: Any) -> Any:
    """A message part's text, or its refusal (pi's `c.type === "output_text" ? c.text :
    c.refusal`)."""
    return _text(part) if event_type(part) == "output_text" else js_member(part, "refusal")


def _joined(parts: list[Any], separator: str, read: Callable[[Any], Any]) -> str:
    """What `read` reads of each part, joined as pi 1.6's Array.join joins it: none (a part
    that is a number or text has none) as "", anything else as String() makes it."""
    return separator.join("" if (value := read(part)) is None else js_string(value)
                          for part in parts)


class ResponsesReader:
    """Turns Responses stream events into reply blocks, one per output item."""

    def __init__(self, reply: ReplyBuilder) -> None:
        self.reply = reply
        self.items: dict[Any, int] = {}  # output_index (slot_key) -> reply block index
        self.unfinished: set[int] = set()  # tool calls whose item never completed
        self.reasoning: dict[str, int] = {}  # a finished reasoning item's id -> its block
        self.terminal = False  # a completed or incomplete event arrived

    def apply(self, event: Any) -> list[ProviderEvent]:
        reply, kind = self.reply, event_type(event)
        key = slot_key(getattr(event, "output_index", None))  # None: none sent, as pi's undefined
        index = self.items.get(key)
        if kind == "response.created":
            reply.response_id = js_member(event.response, "id")
        elif kind == "response.output_item.added":
            return self._added(key, event.item)
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta") \
                and index is not None:
            return reply.add_thinking(index, event.delta)
        elif kind == "response.reasoning_summary_part.done" and index is not None:
            return reply.add_thinking(index, "\n\n")
        elif kind in ("response.output_text.delta", "response.refusal.delta") and \
                index is not None:
            return reply.add_text(index, event.delta)
        elif kind == "response.function_call_arguments.delta" and index is not None:
            return reply.add_tool_json(index, event.delta)
        elif kind == "response.function_call_arguments.done" and index in self.unfinished:
            return self._arguments_done(index, event.arguments)
        elif kind == "response.output_item.done":
            sent = sent_json(event)
            return self._done(key, event.item, sent.get("item") if isinstance(sent, dict) else None)
        elif kind in ("response.completed", "response.incomplete"):
            self.terminal = True
            self._finished(event.response)
        # A failed reply ends here, as pi 1.6 ends it: nothing after (a response.completed
        # that would make its calls tool uses, usage) is read.
        elif kind == "response.failed":
            self.reply.raw_stop_reason = getattr(event.response, "status", None)
            raise ReplyFailed(failure_of(event.response))
        elif kind == "error":
            raise ReplyFailed(error_event_text(event))
        return []

    def _added(self, key: Any, item: Any) -> list[ProviderEvent]:
        kind = event_type(item)
        if kind == "reasoning":
            self.items[key] = self.reply.start_thinking()
        elif kind == "message":
            self.items[key] = self.reply.start_text()
        elif kind == "function_call":
            index = self.reply.start_tool_call(f"{item.call_id}|{item.id}", item.name)
            self.items[key] = index
            self.unfinished.add(index)
            self._take_namespace(index, item)
            if item.arguments:
                return self.reply.add_tool_json(index, item.arguments)
        return []

    def _arguments_done(self, index: int, text: str) -> list[ProviderEvent]:
        """A call's whole arguments: what was missing, or all of them when they differ from
        the text so far (pi's ToolCallArgumentsStream.replace)."""
        so_far = self.reply.tool_json(index)
        if not text.startswith(so_far):
            self.reply.replace_tool_json(index, text)
            return []
        return self.reply.add_tool_json(index, text[len(so_far):]) if text != so_far else []

    def _done(self, key: Any, item: Any, sent: Any) -> list[ProviderEvent]:
        """A finished item (`sent`: its JSON as the server sent it, if known); one whose start
        never came is started now (pi's getOrCreateSlot). An item finishes only as the kind it
        began as: a call finished as another stays unfinished, and the reply fails at its end,
        as pi 1.6's does."""
        started = [] if key in self.items else self._added(key, item)
        index = self.items.get(key)
        if index is None:
            return started  # an item of a kind pi-lsp does not keep
        block, kind = self.reply.block(index), event_type(item)
        if isinstance(block, ThinkingContent) and kind == "reasoning":
            # The finished item is the truth: its summary parts, and itself to send back.
            summary = _joined(getattr(item, "summary", None) or [], "\n\n", _text)
            content = _joined(getattr(item, "content", None) or [], "\n\n", _text)
            block.thinking = summary or content or block.thinking
            # pi's JSON.stringify of the item: its keys in the server's order.
            block.thinking_signature = stringify(
                item.to_dict(warnings=False) if sent is None else sent)
            self.reasoning[item.id] = index
        elif isinstance(block, TextContent) and kind == "message":
            # Even when it has none: pi writes the item's text, not what was streamed.
            block.text = _joined(getattr(item, "content", None) or [], "", _said)
            block.text_signature = text_signature(item.id, getattr(item, "phase", None))
        elif isinstance(block, ToolCall) and kind == "function_call":
            self.unfinished.discard(index)
            if item.arguments and item.arguments != self.reply.tool_json(index):
                self.reply.replace_tool_json(index, item.arguments)
            self._take_namespace(index, item)
        else:
            return started
        # Finished: what comes for its output_index after (a late delta, the item done again)
        # is another item's, as pi 1.6 forgets the slot there.
        del self.items[key]
        return [*started, self.reply.end_block(index)]

    def _take_namespace(self, index: int, item: Any) -> None:
        """The call's namespace, where its item has one (null too, as pi 1.6 keeps it)."""
        if "namespace" in item.model_fields_set:
            block = self.reply.block(index)
            assert isinstance(block, ToolCall)
            block.namespace = item.namespace

    def _finished(self, response: Any) -> None:
        reply, usage = self.reply, response.usage
        reply.response_id = response.id or reply.response_id
        self._backfill(getattr(response, "output", None) or [])
        removals = reasoning_removals(getattr(response, "input_transformations", None))
        if removals:
            reply.diagnostics.append({"type": "openai_input_transformations",
                                      "timestamp": now_ms(),
                                      "details": {"transformations": removals}})
        if usage is not None:
            details = usage.input_tokens_details
            count_openai_usage(reply.usage, token_count(usage.input_tokens),
                               token_count(usage.output_tokens),
                               token_count(getattr(details, "cached_tokens", None)),
                               token_count(getattr(details, "cache_write_tokens", None)),
                               token_count(getattr(usage.output_tokens_details,
                                                   "reasoning_tokens", None)))
            reply.total_tokens = getattr(usage, "total_tokens", None) or 0  # pi keeps the server's
        reply.priced = True  # pi prices even a reply the server gave no usage for
        status = response.status
        reason = getattr(response.incomplete_details, "reason", None)
        # pi's raw reason: the status, and why it is incomplete where the server said.
        reply.raw_stop_reason = f"{status}.{reason}" if isinstance(reason, str) else status
        # A later terminal event's status replaces an earlier one's, as pi 1.6 takes the last.
        reply.stop_reason, reply.error_message = "stop", None
        if status == "failed":
            reply.fail("error", failure_of(response))
        elif status == "incomplete":
            if reason == "max_output_tokens":
                reply.stop_reason = "length"
            else:
                reply.fail("error", f"Response incomplete: {reason}" if reason else
                           "Response incomplete without a provider reason")
        elif status == "cancelled":
            reply.fail("error", "the reply was cancelled by the server")
        elif status and status not in STOP_STATUSES:  # pi 1.6 throws there: nothing after is read
            raise ReplyFailed(f"Unhandled stop reason: {status}")
        elif any(isinstance(b, ToolCall) for b in reply.blocks):
            reply.stop_reason = "toolUse"

    def _backfill(self, output: list[Any]) -> None:
        """Encrypted reasoning Azure sends only in the finished response goes into its block's
        signature, so the item goes back whole (pi's backfillReasoningSignatures)."""
        for item in output:
            encrypted = getattr(item, "encrypted_content", None)
            index = self.reasoning.get(item.id) if item.type == "reasoning" and encrypted else None
            if index is None:
                continue
            block = self.reply.block(index)
            assert isinstance(block, ThinkingContent) and block.thinking_signature
            stored = event_json(block.thinking_signature)
            if not stored.get("encrypted_content"):
                block.thinking_signature = stringify({**stored, "encrypted_content": encrypted})

    def finish(self) -> list[ProviderEvent]:
        """After the stream: a reply with no terminal event, or with a call whose item never
        completed, is not complete."""
        if not self.terminal:
            raise StreamEndedEarly("the stream ended before a terminal response event")
        if self.reply.stop_reason == "toolUse" and self.unfinished:
            call = self.reply.block(min(self.unfinished))
            assert isinstance(call, ToolCall)
            raise StreamEndedEarly(f"the stream completed with an unfinished tool call: "
                                   f"{call.name} ({call.id})")
        return []
