"""What every provider takes and gives: a neutral request, stream events, a pi-shaped reply."""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import time
from collections.abc import AsyncIterator
from typing import Any, Literal, Protocol, TypeGuard

import msgspec

from pi_lsp.providers.deep_json import deep_loads
from pi_lsp.providers.failures import ReplyFailed, cut_error_text
from pi_lsp.providers.json_errors import json_parse_error
from pi_lsp.providers.partial_json import partial_value
from pi_lsp.providers.registry import ModelInfo
from pi_lsp.session.entries import (
    AssistantBlock,
    AssistantMessage,
    Cost,
    ModelMessage,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
)
from pi_lsp.session.ids import now_ms
from pi_lsp.session.journal import ENTRY_OVERHEAD, MAX_LINE_BYTES, MAX_NESTING
from pi_lsp.session.jsontext import encoder, js_field, js_integer, js_string, refuse_constant

REDACTED_THINKING = "[Reasoning redacted]"  # pi's text for thinking the provider sent encrypted


class MissingApiKeyError(Exception):
    """No API key for a provider (args: its name, and whether pi has an OAuth login for it);
    says where one can be set."""

    def __str__(self) -> str:
        provider = self.args[0]
        if provider == "anthropic":
            where = "set ANTHROPIC_API_KEY or apiKeys.anthropic in settings"
        elif provider == "openai":
            where = "set OPENAI_API_KEY or apiKeys.openai in settings"
        else:
            where = (f"set providers.{provider}.apiKey in models.json (a local server accepts "
                     f"any value) or apiKeys.{provider} in settings")
        if self.args[1:] == (True,):
            return (f"pi has an OAuth login for {provider}, which pi-lsp cannot use; {where}, "
                    f"or save an API key with pi's /login")
        label = {"anthropic": "Anthropic API key", "openai": "OpenAI API key"}.get(
            provider, f"API key for provider {provider!r}")
        return f"no {label}: {where}"


class BlankApiKeyError(MissingApiKeyError):
    """A saved key (args: the provider, the file it is saved in) of only spaces or line
    breaks: it owns its provider, so the environment's is not used in its place."""

    def __str__(self) -> str:
        provider, path = self.args
        return (f"{path}: the API key saved for {provider} is blank (only spaces or line "
                f"breaks); save the key again, or remove it there to use another")


class ToolSpec(msgspec.Struct, omit_defaults=True):
    """A tool as the model is told of it. A session's declaration is sent as it holds it: a
    field of another type as it is, a missing one (UNSET) left out, as pi 1.6 sends them."""

    name: Any  # text (the agent's tools), or as the session declares it
    description: Any
    parameters: Any  # JSON schema of the arguments
    # pi's `constrainedSampling` ({"type": "json_schema", "strict": "prefer"}: sent strict
    # where the model supports it, providers/strict.py)
    constrained_sampling: dict[str, Any] | None = None


def tool_spec(declaration: Any) -> ToolSpec:
    """A tool as a session's system message declares it (a text in its place declares none
    of its fields, as pi 1.6 reads it)."""
    config = js_field(declaration, "constrainedSampling")
    return ToolSpec(js_field(declaration, "name"), js_field(declaration, "description"),
                    js_field(declaration, "parameters"),
                    config if isinstance(config, dict) else None)


def declared_fields(**fields: Any) -> dict[str, Any]:
    """`fields` less the ones a tool does not declare (UNSET), as JSON.stringify leaves out a
    field that is undefined."""
    return {key: value for key, value in fields.items() if value is not msgspec.UNSET}


CacheRetention = Literal["none", "short", "long"]


def cache_retention() -> CacheRetention:
    """The cache retention a request asks for unless told otherwise: pi 1.6's, long where
    PI_CACHE_RETENTION is "long" (read at each request, as pi reads it)."""
    return "long" if os.environ.get("PI_CACHE_RETENTION") == "long" else "short"


class ModelRequest(msgspec.Struct):
    """`system_prompt` and `tools` go first; `messages` has system messages after them only
    for a model that takes them mid-conversation (registry.keeps_system_messages)."""

    model: ModelInfo
    system_prompt: str
    messages: list[ModelMessage]
    tools: list[ToolSpec]
    thinking_level: str
    max_tokens: int | None = None
    session_id: str | None = None  # for prompt caching and session affinity, as pi sends it
    # "none": no cache breakpoints (as for pi's summaries: a one-off request would pay a cache
    # write no later request reads); "long": the prompt kept longer, where the server can.
    cache_retention: CacheRetention = msgspec.field(default_factory=cache_retention)
    # Tool changes said in place (pi's nativeToolChanges) where the model takes them: False
    # when the transcript declared no tools first, so `tools` are the current ones.
    tool_changes_in_place: bool = True
    # The tools the system message `system_prompt` and `tools` came from takes away, as it
    # holds them: pi 1.6 names them after the prompt where tool changes are in place (Responses).
    tools_removed: list[Any] = msgspec.field(default_factory=list)
    # Chat Completions with tool additions in place (registry.tool_additions_in_place): the
    # system messages of `messages` from this one on (counted among them) declare the tools they
    # add where they are, the earlier ones' being in `tools`. None: none do.
    additions_from: int | None = None


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


_UNSAFE_ID = re.compile(r"[^a-zA-Z0-9_-]")


def safe_id(raw: str) -> str:
    """A tool-call id with every character a provider may refuse (all but letters, digits,
    `_` and `-`) turned into `_`."""
    return _UNSAFE_ID.sub("_", raw)


def token_count(value: Any) -> int:
    """A token count as sent: a number, or one in a string (a few proxies quote them, and pi's
    arithmetic reads them as numbers); anything else counts none."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    try:
        return int(float(value)) if isinstance(value, float | str) else 0
    except (ValueError, OverflowError):  # "many", NaN, infinity
        return 0


def count_openai_usage(usage: Usage, prompt: int, output: int, cached: int, written: int,
                       reasoning: int) -> None:
    """OpenAI's counts as pi keeps them: the prompt's cached and cache-written tokens are not
    counted again as input; the reasoning tokens are part of the output's."""
    usage.input = max(0, prompt - cached - written)
    usage.output = output
    usage.cache_read, usage.cache_write = cached, written
    usage.reasoning = reasoning


def is_openrouter(model: ModelInfo) -> bool:
    """Whether pi 1.6 takes the cost a reply reports as OpenRouter's bill (isOpenRouterModel)."""
    return model.provider == "openrouter" or "openrouter.ai" in (model.base_url or "")


def _valid_cost(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) \
        and math.isfinite(value) and value >= 0


def reported_cost(raw: Any) -> int | float | None:
    """The total OpenRouter billed for a reply, from the usage it sent (pi 1.6's
    applyOpenRouterReportedCost): its own cost, plus the upstream one for a key of the
    user's own (BYOK); None where the accounting is missing or incomplete."""
    cost = raw.get("cost") if isinstance(raw, dict) else None
    if not _valid_cost(cost):
        return None
    if raw.get("is_byok") is False:
        return cost
    details = raw.get("cost_details")
    if raw.get("is_byok") is not True or not isinstance(details, dict):
        return None
    upstream = details.get("upstream_inference_cost")
    if upstream is None and "upstream_inference_cost" in details:
        prompt = details.get("upstream_inference_prompt_cost")
        completion = details.get("upstream_inference_completions_cost")
        if not (_valid_cost(prompt) and _valid_cost(completion)):
            return None
        upstream = prompt + completion
    return cost + upstream if _valid_cost(upstream) else None


def js_member(value: Any, name: str) -> Any:
    """A field of an SDK event (or of its part) as pi 1.6 reads it: none of a number, text or
    list sent in its place, which pi's readers skip; reading one of null throws, as there."""
    if value is None:
        raise TypeError(f"Cannot read properties of null (reading '{name}')")
    return value.get(name) if isinstance(value, dict) else getattr(value, name, None)


def event_type(value: Any) -> Any:
    """An SDK event's (or its part's) `type` as pi 1.6 reads it (js_member)."""
    return js_member(value, "type")


def slot_key(value: Any) -> Any:
    """An index the server sent, as a key of pi 1.6's Map of open blocks: an object or array
    (each event's its own) matches no other key, and `true` is not 1."""
    if isinstance(value, bool):
        return ("boolean", value)
    try:
        hash(value)
    except TypeError:
        return object()
    return value


_LONE_SURROGATE = re.compile(
    r"[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]")


def without_lone_surrogates(value: Any) -> Any:
    """`value` (a request body) with unpaired surrogates removed from its strings, as pi sends
    text: they cannot be encoded, and servers reject them."""
    if isinstance(value, str):
        return value if value.isascii() else _LONE_SURROGATE.sub("", value)
    if isinstance(value, dict):
        return {key: without_lone_surrogates(item) for key, item in value.items()}
    if isinstance(value, list):
        return [without_lone_surrogates(item) for item in value]
    return value


def _joined(pieces: list[str]) -> str:
    """The pieces (stream deltas) as one string, a surrogate pair split between two of them
    joined into its character (as JavaScript's strings join it); a lone surrogate is kept."""
    parts: list[str] = []  # the last never empty: parts[-1][-1] is the last character
    for piece in pieces:
        if parts and piece and "\ud800" <= parts[-1][-1] <= "\udbff" \
                and "\udc00" <= piece[0] <= "\udfff":
            high, low = ord(parts[-1][-1]) - 0xD800, ord(piece[0]) - 0xDC00
            parts[-1] = parts[-1][:-1]
            parts.append(chr(0x10000 + (high << 10) + low))
            piece = piece[1:]
        if piece:
            parts.append(piece)
    return "".join(parts)


def short_hash(text: str) -> str:
    """pi's `shortHash` (two 32-bit multiplicative hashes in base 36), so ids it shortens come
    out the same here."""
    def imul(a: int, b: int) -> int:
        return (a * b) & 0xFFFFFFFF

    h1, h2 = 0xDEADBEEF, 0x41C6CE57
    units = text.encode("utf-16-le", "surrogatepass")
    for index in range(0, len(units), 2):
        unit = units[index] | units[index + 1] << 8
        h1, h2 = imul(h1 ^ unit, 2654435761), imul(h2 ^ unit, 1597334677)
    h1 = imul(h1 ^ h1 >> 16, 2246822507) ^ imul(h2 ^ h2 >> 13, 3266489909)
    h2 = imul(h2 ^ h2 >> 16, 2246822507) ^ imul(h1 ^ h1 >> 13, 3266489909)
    return _base36(h2) + _base36(h1)


def _base36(number: int) -> str:
    digits = ""
    while True:
        number, digit = divmod(number, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[digit] + digits
        if not number:
            return digits


def cost_of(usage: Usage, model: ModelInfo) -> Cost:
    """The reply's cost in dollars, with pi 1.6's arithmetic (calculateCost): the rate per token
    first, then times the tokens; floating point gives another last bit in the other order."""
    price = model.price.for_input(usage.input + usage.cache_read + usage.cache_write)
    # Writes kept an hour cost twice the input rate (pi 1.6).
    long_writes = usage.cache_write_1h if isinstance(usage.cache_write_1h, int) else 0
    parts = (
        price.input / 1_000_000 * usage.input,
        price.output / 1_000_000 * usage.output,
        price.cache_read / 1_000_000 * usage.cache_read,
        # pi multiplies first here: (rate * writes + 1h writes' price) / 1e6, in doubles.
        (float(price.cache_write) * (usage.cache_write - long_writes)
         + float(price.input) * 2 * long_writes) / 1_000_000,
    )
    total = parts[0] + parts[1] + parts[2] + parts[3]
    prices = [_js_number(value) for value in parts]
    return Cost(prices[0], prices[1], prices[2], prices[3], _js_number(total))


def _js_number(value: float) -> int | float:
    """A whole number as an int, so it is written as JavaScript writes it (`0`, not `0.0`)."""
    return int(value) if value == int(value) else value


class ReplyBuilder:
    """Assembles an assistant message from stream pieces, the way pi stores it."""

    def __init__(self, api: str, model: ModelInfo, thinking_level: str | None = None) -> None:
        self.api = api
        self.model = model
        self.thinking_level = thinking_level  # the level thought at, kept in the reply (pi 1.6)
        # A text or thinking block still streaming is behind its deltas: read or change one
        # through block(index).
        self.blocks: list[AssistantBlock] = []
        # Text and thinking deltas not yet in their block, joined when it is asked for: adding
        # each to the block's string copied it whole every time (8 s for 2 MB of text).
        self._pieces: dict[int, list[str]] = {}
        # An open call's arguments JSON in pieces, joined once: adding each delta to one string
        # copied it whole every time (49 s for 2 MB of arguments in 16-character deltas).
        self._tool_json: dict[int, list[str]] = {}
        # Ended calls whose arguments are too long to read on the event loop, left for
        # read_long_arguments (a worker thread): 10 MB of them held the loop up to 4 s.
        self._unread: dict[int, str] = {}
        self.usage = Usage()
        self.total_tokens: int | None = None  # the server's total, when pi keeps that one
        self.stop_reason: StopReason = "stop"
        self.raw_stop_reason: Any = None  # the provider's own, as sent
        # Whether pi 1.6 prices the reply (its provider code computed the cost: its
        # `totalFromProvider` is written), and the total the provider billed, if it said.
        self.priced = False
        self.billed: int | float | None = None
        self.error_message: str | None = None
        self.response_id: Any = None  # as the server sent it (pi writes any JSON value)
        self.provider_thinking_level: str | None = None  # the effort asked for, where marked
        self.response_model: str | None = None  # the model that answered, if another
        self.diagnostics: list[dict[str, Any]] = []  # pi's notes on the reply
        self.timestamp = now_ms()
        self._started = time.monotonic()  # the reply is timed from here, as pi times its stream

    def start_text(self) -> int:
        self.blocks.append(TextContent(text=""))
        return len(self.blocks) - 1

    def start_thinking(self, redacted_data: object = None, redacted: bool = False) -> int:
        """Open a thinking block; `redacted`: the provider's encrypted thinking, `redacted_data`
        its payload (one that is not a string is not kept: nothing could send it back)."""
        if not redacted:
            self.blocks.append(ThinkingContent(thinking=""))
        else:
            data = redacted_data if isinstance(redacted_data, str) else None
            self.blocks.append(ThinkingContent(thinking=REDACTED_THINKING,
                                               thinking_signature=data, redacted=True))
        return len(self.blocks) - 1

    def start_tool_call(self, call_id: str, name: str) -> int:
        """Open a tool call; one without a string id or name fails the reply, since a session
        line holding it would be skipped on reading (the call and its result lost)."""
        for field, value in (("id", call_id), ("name", name)):
            if not isinstance(value, str):
                raise ReplyFailed(f"The model sent a tool call without a string {field}"
                                  f"{'' if value is None else f' ({value!r})'}")
        self.blocks.append(ToolCall(id=call_id, name=name, arguments={}))
        self._tool_json[len(self.blocks) - 1] = []
        return len(self.blocks) - 1

    # A delta for a block of another kind is ignored, as pi 1.6 ignores it (a stray or
    # hostile server's); one that is not text is taken as JavaScript's `+=` takes it.

    def add_text(self, index: int, delta: object) -> list[ProviderEvent]:
        return self._add_piece(index, TextContent, delta, TextDelta)

    def add_thinking(self, index: int, delta: object) -> list[ProviderEvent]:
        return self._add_piece(index, ThinkingContent, delta, ThinkingDelta)

    def _add_piece(self, index: int, kind: type, delta: object,
                   event: type[TextDelta] | type[ThinkingDelta]) -> list[ProviderEvent]:
        if not isinstance(self.blocks[index], kind):
            return []
        text = js_string(delta)
        self._pieces.setdefault(index, []).append(text)
        return [event(content_index=index, delta=text)]

    def block(self, index: int) -> AssistantBlock:
        """A block with every delta received so far in it."""
        block = self.blocks[index]
        pieces = self._pieces.pop(index, None)
        if isinstance(block, TextContent) and pieces:
            block.text = _joined([block.text, *pieces])
        elif isinstance(block, ThinkingContent) and pieces:
            block.thinking = _joined([block.thinking, *pieces])
        return block

    def add_signature(self, index: int, signature: object) -> None:
        block = self.blocks[index]
        if isinstance(block, ThinkingContent):
            block.thinking_signature = (block.thinking_signature or "") + js_string(signature)

    def add_tool_json(self, index: int, delta: object) -> list[ProviderEvent]:
        if index not in self._tool_json:  # not an open tool call
            return []
        text = js_string(delta)
        self._tool_json[index].append(text)
        return [ToolCallDelta(content_index=index, delta=text)]

    def replace_tool_json(self, index: int, text: str) -> None:
        """The complete arguments JSON, when the server sends it whole at the end."""
        self._tool_json[index] = [text]

    def tool_json(self, index: int) -> str:
        """The arguments JSON received so far for an open tool call."""
        return "".join(self._tool_json.get(index, []))

    def end_block(self, index: int) -> BlockEnd:
        """Parse a tool call's arguments once its JSON is complete; long ones are left for
        read_long_arguments."""
        pieces = self._tool_json.pop(index, None)
        block = self.blocks[index]
        if pieces is not None and isinstance(block, ToolCall):
            text = "".join(pieces)
            if len(text) > INLINE_ARGUMENT_CHARS:
                self._unread[index] = text
            else:
                block.arguments, block.arguments_error = parse_arguments(text)
        return BlockEnd(content_index=index)

    async def read_long_arguments(self) -> None:
        """Parse, in a worker thread, the long arguments of calls that ended and of calls whose
        end never came (the stream is over): on the loop, every request would wait for them."""
        for index in list(self._tool_json):
            if sum(map(len, self._tool_json[index])) > INLINE_ARGUMENT_CHARS:
                text = "".join(self._tool_json[index])
                read = await asyncio.to_thread(partial_arguments, text)
                self._set_arguments(index, read)
                del self._tool_json[index]  # only once read: an abort meanwhile leaves it
        for index in list(self._unread):
            self._set_arguments(index, await asyncio.to_thread(parse_arguments,
                                                               self._unread[index]))
            del self._unread[index]

    def _set_arguments(self, index: int, read: tuple[dict[str, Any], str | None]) -> None:
        block = self.blocks[index]
        if isinstance(block, ToolCall):
            block.arguments, block.arguments_error = read

    def _end_unfinished_call(self, index: int) -> None:
        """A call whose end never came (the stream ended or broke inside it) keeps what its
        arguments hold so far, as pi 1.6 keeps the partial arguments it streamed: it parses
        them whole, and finds them malformed, only when the call ends."""
        self._set_arguments(index, partial_arguments("".join(self._tool_json.pop(index))))

    def fail(self, reason: StopReason, message: str) -> None:
        """End the reply as failed; the first failure is the one reported."""
        if self.stop_reason not in ("error", "aborted"):
            self.stop_reason = reason
            self.error_message = message

    def snapshot(self) -> AssistantMessage:
        """The reply so far, for progress; unfinished tool arguments show as empty."""
        return self._assemble([msgspec.structs.replace(self.block(index))
                               for index in range(len(self.blocks))])

    def message(self) -> AssistantMessage:
        """The finished reply, fitted to a session entry; unfinished tool arguments are parsed
        as far as they go."""
        for index in list(self._tool_json):
            self._end_unfinished_call(index)
        for index in list(self._unread):  # read_long_arguments was not awaited
            self._set_arguments(index, parse_arguments(self._unread.pop(index)))
        message = self._assemble([self.block(index) for index in range(len(self.blocks))])
        # Rounded as JavaScript's Math.round rounds (a half up).
        message.duration_ms = math.floor((time.monotonic() - self._started) * 1000 + 0.5)
        return fitted_to_entry(message)

    def _answering_model(self) -> ModelInfo:
        """The model priced: a fallback the server answered with at its own cost (pi 1.6)."""
        fallback = next((f for f in self.model.compat.allowed_fallback_models or []
                         if (f.provider, f.model) == (self.model.provider, self.response_model)
                         and f.cost is not None), None)
        if fallback is None or fallback.cost is None:
            return self.model
        return msgspec.structs.replace(self.model, id=fallback.model, price=fallback.cost)

    def _assemble(self, blocks: list[AssistantBlock]) -> AssistantMessage:
        usage = msgspec.structs.replace(
            self.usage, input=_counted(self.usage.input), output=_counted(self.usage.output),
            cache_read=_counted(self.usage.cache_read),
            cache_write=_counted(self.usage.cache_write))
        for name in ("reasoning", "cache_write_1h"):  # where the provider reported them
            if getattr(usage, name) is not msgspec.UNSET:
                setattr(usage, name, _counted(getattr(usage, name)))
        usage.total_tokens = _js_sum(usage.input, usage.output, usage.cache_read,
                                     usage.cache_write) \
            if self.total_tokens is None else _counted(self.total_tokens)
        usage.cost = cost_of(usage, self._answering_model())
        if self.billed is not None:
            usage.cost.total, usage.cost.total_from_provider = self.billed, True
        elif self.priced:
            usage.cost.total_from_provider = False
        return AssistantMessage(
            content=blocks, api=self.api, provider=self.model.provider,
            model=self.model.id, usage=usage, stop_reason=self.stop_reason,
            timestamp=self.timestamp, provider_thinking_level=self.provider_thinking_level,
            response_id=self.response_id, response_model=self.response_model,
            diagnostics=self.diagnostics or None, raw_stop_reason=self.raw_stop_reason,
            error_message=self.error_message, thinking_level=self.thinking_level,
        )


REPLY_LEFT_OUT = ("The reply's content was left out: its session entry would take {size} bytes, "
                  "more than the {limit} one line holds (pi-lsp could not read it back)")


REPLY_TOO_DEEP = ("The reply was left out: the server sent a value for it nested more than "
                  "{limit} levels deep (pi-lsp could not read it back)")


def _too_deep(message: AssistantMessage) -> bool:
    """Whether a value the server sent, kept as it came (an id, a stop reason, a diagnostic, a
    call's name or namespace), nests past what a session line holds: read at any depth (as
    JSON.parse reads it), it could be neither written nor read back."""
    kept = [message.response_id, message.raw_stop_reason, message.diagnostics,
            *[[block.name, block.namespace] for block in message.content
              if isinstance(block, ToolCall)]]
    return nesting(kept) > MAX_ARGUMENT_NESTING


def fitted_to_entry(message: AssistantMessage) -> AssistantMessage:
    """`message`, or when its entry would pass the longest line a session holds, the reply
    failed with its size and without its content: unwritable, it was lost and the run ended
    in the write's error. The content is dropped, not cut to fit: a failed reply never goes
    back to the model, its calls never run, and most of 64 MB on one line would only slow
    every reading of the session. A failure it had already is kept after the size. A reply
    holding a value nested too deep to write is failed, without it, the same way."""
    if _too_deep(message):
        return _left_out(msgspec.structs.replace(
            message, response_id=None, raw_stop_reason=None, diagnostics=None),
            REPLY_TOO_DEEP.format(limit=MAX_ARGUMENT_NESTING))
    size = len(encoder.encode(message))
    if size <= MAX_LINE_BYTES - ENTRY_OVERHEAD:
        return message
    return _left_out(message, REPLY_LEFT_OUT.format(size=size, limit=MAX_LINE_BYTES))


def _left_out(message: AssistantMessage, reason: str) -> AssistantMessage:
    """`message` failed for `reason`, without its content; a failure it had is kept after."""
    if message.error_message:
        reason = f"{reason}; it had failed: {cut_error_text(message.error_message)}"
    stop = "aborted" if message.stop_reason == "aborted" else "error"
    return msgspec.structs.replace(message, content=[], stop_reason=stop, error_message=reason)


MAX_TOKENS = 2**53 - 1  # the largest count a JavaScript number holds exactly


def _counted(tokens: object) -> int:
    """A token count as a provider reported it, made one a reply can hold and price: a broken
    or hostile server may send a negative, fractional or astronomical one (10**400 overflowed
    the cost, outside the provider's error handling)."""
    try:
        whole: int = int(tokens)  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError):
        return 0
    return min(max(whole, 0), MAX_TOKENS)


def _js_sum(*counts: int) -> int:
    """The counts added as pi 1.6 adds them, in doubles: an exact sum past 2**53 (counts near
    MAX_TOKENS) is written as digits JavaScript reads as another number."""
    total = 0.0
    for count in counts:
        total += count
    return int(total)


# Arguments longer than this are parsed off the event loop (read_long_arguments): a refused
# text of 10,000 characters takes up to 12 ms to parse and word as pi does.
INLINE_ARGUMENT_CHARS = 10_000

# A call's arguments sit four levels into its entry's line, and the session reader skips a line
# nested more than MAX_NESTING levels as damaged: deeper arguments could not be written.
MAX_ARGUMENT_NESTING = MAX_NESTING - 4
TOO_DEEP = f"Tool arguments nest more than {MAX_ARGUMENT_NESTING} levels deep"


def nesting(value: object) -> int:
    """How many levels of objects and arrays `value` nests (counted without recursing)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        inner = item.values() if isinstance(item, dict) else item if isinstance(item, list) \
            else None
        if inner is not None:
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in inner)
    return deepest


def partial_arguments(text: str) -> tuple[dict[str, Any], str | None]:
    """An unfinished call's arguments as pi 1.6 keeps them: its JSON read as far as it goes,
    none when that is no object; too deep to write, none and why (as `parse_arguments`)."""
    value = partial_value(text)
    if not isinstance(value, dict):
        return {}, None
    if nesting(value) > MAX_ARGUMENT_NESTING:
        return {}, f"{TOO_DEEP}\n\nReceived arguments:\n{text}"
    return value, None


def parse_arguments(text: str) -> tuple[dict[str, Any], str | None]:
    """A finished tool call's arguments as pi 1.6 reads them: the JSON, repaired when it does not
    parse (`repaired_json`); else none, and what went wrong with the text received, which pi
    keeps as the call's `argumentsError` and reports to the model."""
    if not text.strip():
        return {}, None
    try:
        try:
            value = _js_parsed(text)
        except ValueError:
            repaired = repaired_json(text)
            if repaired == text:
                raise
            value = _js_parsed(repaired)
        if not isinstance(value, dict):
            raise ValueError("Tool arguments must be a JSON object")
        if nesting(value) > MAX_ARGUMENT_NESTING:
            raise ValueError(TOO_DEEP)
    except RecursionError:  # past Python's parser, and so past what a session line holds
        return {}, f"{TOO_DEEP}\n\nReceived arguments:\n{text}"
    except ValueError as error:
        return {}, f"{error}\n\nReceived arguments:\n{text}"
    return value, None


def _js_parsed(text: str) -> Any:
    """`text` as JSON.parse reads it, else a ValueError in its words (V8's)."""
    try:
        return json.loads(text, parse_int=js_integer, parse_constant=refuse_constant)
    except ValueError as error:
        raise ValueError(json_parse_error(text) or str(error)) from None
    except RecursionError:  # past Python's parser: JSON.parse may still refuse it, not its depth
        refusal = json_parse_error(text)
        if refusal is not None:
            raise ValueError(refusal) from None
        # Past MAX_WORDED_CHARS, refused in Python's words; else too deep.
        deep_loads(text, js_integer)
        raise


_ESCAPED = frozenset('"\\/bfnrt')
_CONTROL_ESCAPES = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_HEX = frozenset("0123456789abcdefABCDEF")


def repaired_json(text: str) -> str:
    """JSON as models often get it wrong, mended inside strings: raw control characters escaped,
    and a backslash that starts no valid escape (a regex's `\\d`) doubled."""
    out: list[str] = []
    in_string = False
    at = 0
    while at < len(text):
        char = text[at]
        if not in_string or char == '"':
            in_string = (char == '"') != in_string
            out.append(char)
        elif char == "\\":
            following = text[at + 1:at + 2]
            if following == "u" and len(text[at + 2:at + 6]) == 4 and \
                    set(text[at + 2:at + 6]) <= _HEX:
                out.append(text[at:at + 6])
                at += 5
            elif following and following in _ESCAPED:
                out.append(text[at:at + 2])
                at += 1
            else:
                out.append("\\\\")
        elif char < " ":
            out.append(_CONTROL_ESCAPES.get(char, f"\\u{ord(char):04x}"))
        else:
            out.append(char)
        at += 1
    return "".join(out)
