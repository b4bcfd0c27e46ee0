"""Typed shapes of pi session files (version 3): header, entries, messages, content blocks.

Field order in each Struct is the order pi writes, so encoded lines match pi's byte for byte.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

import msgspec

from pi_lsp.session.jsontext import (
    JS_WHITESPACE,
    Decoder,
    js_double,
    js_string,
    js_to_number,
    js_truthy,
    object_decoder,
    stringify,
    value_decoder,
)
from pi_lsp.session.jsontext import encoder as encoder  # pi's JSON text, for every writer

CURRENT_VERSION = 3

THINKING_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh", "max")  # pi 1.6's
DEFAULT_THINKING_LEVEL = "medium"  # pi 1.6's, where settings.json names none
StopReason = Literal["stop", "length", "toolUse", "error", "aborted"]


class _Block(msgspec.Struct, tag_field="type", rename="camel", omit_defaults=True, kw_only=True):
    pass


class TextContent(_Block, tag="text", kw_only=True):
    text: str
    text_signature: str | None = None


class ThinkingContent(_Block, tag="thinking", kw_only=True):
    thinking: str
    thinking_signature: str | None = None
    redacted: bool | None = None


class ImageContent(_Block, tag="image", kw_only=True):
    # base64 text and its type; a hand-edited one of another type kept as decoded, a missing
    # one as UNSET (pi 1.6 sends them so)
    data: Any = msgspec.UNSET
    mime_type: Any = msgspec.UNSET

    def data_url(self) -> str:
        """The image as the data URL pi writes for OpenAI: each field as `String()` makes it."""
        return f"data:{js_string(self.mime_type)};base64,{js_string(self.data)}"


# Tool-call arguments as a session holds them: pi 1.6 sends what is written (a list, a number).
Arguments = dict[str, Any] | list[Any] | str | int | float | bool | None


class ToolCall(_Block, tag="toolCall", kw_only=True):
    id: str
    # text; a hand-edited one of another type kept as decoded (pi 1.6 sends it so)
    name: Any
    arguments: Arguments  # a live reply's are always an object (parse_arguments)
    # The Responses namespace its tool was declared in, as the server sent it (pi 1.6 records
    # it there and sends it back to the model that made the call); kept as decoded.
    namespace: Any = msgspec.UNSET
    thought_signature: str | None = None
    arguments_error: str | None = None  # pi 1.6: why the arguments sent could not be read

    @property
    def object_arguments(self) -> dict[str, Any]:
        """The arguments as a tool takes them (a session's of another type give none)."""
        return self.arguments if isinstance(self.arguments, dict) else {}


UserBlock = TextContent | ImageContent
AssistantBlock = TextContent | ThinkingContent | ToolCall | ImageContent


class Cost(msgspec.Struct, rename="camel"):
    # int | float: pi writes a zero cost as `0`, which a float would re-encode as `0.0`.
    input: int | float = 0
    output: int | float = 0
    cache_read: int | float = 0
    cache_write: int | float = 0
    total: int | float = 0
    # pi 1.6: whether `total` is what the provider billed (OpenRouter) rather than computed;
    # unset where pi never priced the reply (a stream that reported no usage).
    total_from_provider: bool | msgspec.UnsetType = msgspec.UNSET


class Usage(msgspec.Struct, rename="camel"):
    """Token counts and cost; pi 1.6 writes the optional ones where an API reports them
    (session/replies.py has the key order of each API)."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int | msgspec.UnsetType = msgspec.UNSET  # output tokens spent thinking
    total_tokens: int = 0
    cost: Cost = msgspec.field(default_factory=Cost)
    # The cache writes kept an hour (Anthropic), priced at twice the input rate.
    cache_write_1h: int | msgspec.UnsetType = msgspec.field(default=msgspec.UNSET,
                                                            name="cacheWrite1h")


class _Message(msgspec.Struct, tag_field="role", rename="camel", omit_defaults=True, kw_only=True):
    pass


class UserMessage(_Message, tag="user", kw_only=True):
    content: str | list[UserBlock]
    timestamp: int | None  # None: pi's NaN (an unreadable entry stamp), written as null


class AssistantMessage(_Message, tag="assistant", kw_only=True):
    content: list[AssistantBlock]
    api: str
    provider: str
    model: str
    usage: Usage
    stop_reason: StopReason
    timestamp: int
    # The effort a model that takes it mid-conversation was asked for (pi 1.6): later requests
    # mark this reply with it. Kept as decoded: pi 1.6 sends a hand-edited one of another type
    # as it is where it sends any (gpt-6.2-sol's configuration_update).
    provider_thinking_level: Any = None
    # The server's id for the reply, as it sent it: pi 1.6 writes a number or object as it is.
    response_id: Any = None
    response_model: str | None = None  # the model that answered, when not the one asked
    # pi 1.6's notes on the reply (replayed reasoning the server withheld), kept as decoded.
    diagnostics: list[Any] | None = None
    # pi 1.6: the stop reason as the provider sent it, and the ms from the request's start to
    # the stream's end; kept as decoded (nothing reads them, so an odd one drops no reply).
    raw_stop_reason: Any = None
    error_message: str | None = None
    duration_ms: Any = None
    thinking_level: str | None = None  # the level requested (pi 1.6 writes it last)


class UnsentReply(AssistantMessage, tag="assistant", kw_only=True):
    """The reply to a request that could not be made (no key, no such provider): pi 1.6
    writes its error before its time. Read back, it is an AssistantMessage."""


class NestedCall(msgspec.Struct, rename="camel"):
    """A tool call a tool made itself (pi 1.6); only what file lists need."""

    name: str
    arguments: Any = None


class NestedCalls(msgspec.Struct):
    calls: list[NestedCall]


class ToolResultMessage(_Message, tag="toolResult", kw_only=True):
    # Text as pi writes it; a hand-edited one of another type (null, 1e400) kept as decoded:
    # pi 1.6 keeps the result in its context, and it answers no call (`call_id`).
    tool_call_id: Any
    # Text as pi writes it; a hand-edited one of another type kept as decoded, a missing one
    # UNSET: pi 1.6 sends such a result all the same, naming it (a caption, a Chat Completions
    # `name`) with the value as it is, read as text (js_string) or truth (js_truthy) there.
    tool_name: Any = msgspec.UNSET
    content: list[UserBlock]
    details: Any = None
    # A bool as pi writes it; a hand-edited one of another type kept as decoded, a missing one
    # UNSET: pi 1.6 sends it to Anthropic as it is (leaving out a missing one), and elsewhere
    # reads it as true or false as JavaScript does (js_truthy).
    is_error: Any = msgspec.UNSET
    # pi 1.6: the whole ms its tool ran (none for a call answered without running); kept as
    # decoded (nothing reads it, so an odd one drops no result), and never sent to a model.
    duration_ms: Any = None
    timestamp: int | None  # None: pi's NaN (an unreadable entry stamp), written as null
    nested_calls: NestedCalls | None = None

    @property
    def call_id(self) -> str | None:
        """The id of the call it answers; None where it is no text (it answers none, so a
        request leaves it out as a result of a call not sent)."""
        return self.tool_call_id if isinstance(self.tool_call_id, str) else None


class BashExecutionMessage(_Message, tag="bashExecution", kw_only=True):
    """A `!command` and its output. pi checks none of these fields (an extension's `user_bash`
    result is written as it returned it, `{output, exitCode}` say): each is carried as the
    message holds it (UNSET: missing) and read as JavaScript does (convert.bash_execution_text)."""

    command: Any = msgspec.UNSET
    output: Any = msgspec.UNSET
    exit_code: Any = msgspec.UNSET
    cancelled: Any = msgspec.UNSET
    truncated: Any = msgspec.UNSET
    timestamp: Any = msgspec.UNSET
    full_output_path: Any = msgspec.UNSET
    exclude_from_context: Any = msgspec.UNSET


class CustomMessage(_Message, tag="custom", kw_only=True):
    custom_type: str  # read as text when of another type (js_string)
    content: str | list[UserBlock]
    display: Any = msgspec.UNSET  # as its entry holds it (see there)
    details: Any = None
    timestamp: int | None  # None: pi's NaN (an unreadable entry stamp), written as null


class SystemMessage(_Message, tag="system", kw_only=True):
    """pi 1.6's prompt checkpoint or patch: text, named sections (None removes one), tools."""

    content: str | list[UserBlock]
    # (a text in their place is read as pi reads it: one section per UTF-16 code unit)
    sections: dict[str, str | None] | str | None = None
    timestamp: int
    # Declarations stay as decoded, so their JSON text (counted in estimates) is pi's; a text
    # in their place is walked as pi walks it (`for…of`: character by character).
    tools_added: list[Any] | str | None = None
    tools_removed: list[Any] | str | None = None


class SystemCheckpoint(_Message, tag="system", kw_only=True):
    """The replayed system message a compaction carries, keys in the order pi writes them."""

    content: str
    sections: dict[str, str] | None = None
    tools_added: list[Any] | None = None
    timestamp: int


class BranchSummaryMessage(_Message, tag="branchSummary", kw_only=True):
    """In memory only: made from a `branch_summary` entry."""

    summary: str  # read as pi's convertToLlm writes one of another type (js_string)
    from_id: Any = msgspec.UNSET  # as its entry holds it
    timestamp: int | None  # None: pi's NaN (an unreadable entry stamp), written as null


class CompactionSummaryMessage(_Message, tag="compactionSummary", kw_only=True):
    """In memory only: made from a `compaction` entry."""

    summary: str  # read as pi's convertToLlm writes one of another type (js_string)
    tokens_before: Any = msgspec.UNSET  # as its compaction entry holds it (see there)
    timestamp: int | None  # None: pi's NaN (an unreadable entry stamp), written as null


AgentMessage = (
    SystemMessage
    | UserMessage
    | AssistantMessage
    | ToolResultMessage
    | BashExecutionMessage
    | CustomMessage
    | BranchSummaryMessage
    | CompactionSummaryMessage
)
LlmMessage = UserMessage | AssistantMessage | ToolResultMessage  # what a provider is sent
ModelMessage = SystemMessage | LlmMessage  # pi 1.6's model layer keeps system messages


class SessionHeader(msgspec.Struct, tag_field="type", tag="session", rename="camel",
                    omit_defaults=True, kw_only=True):
    # pi 1.6 opens any header with a text id: it checks the type of no other field, so each
    # is carried as it is (UNSET: missing). Read them through the methods below.
    version: Any = None
    id: str
    timestamp: Any = msgspec.UNSET  # pi reads any JSON value (NaN for most that are not text)
    cwd: Any = ""
    parent_session: Any = None

    def version_number(self) -> float:
        """The version as pi's `(header.version ?? 1) >= 3` and `< 2` see it: JavaScript
        makes it a number ("2" is 2, [3] is 3, true is 1, an object NaN, which passes none)."""
        version = self.version
        if version is None or version is msgspec.UNSET:
            return 1.0
        if isinstance(version, bool | int | float):
            return js_double(version)
        if isinstance(version, str | list):
            return js_to_number(js_string(version))
        return math.nan

    def known_cwd(self) -> str:
        """The cwd pi reads from the header: one that is not text is unknown (""), as pi's
        getSessionHeaderCwd reads it as undefined."""
        return self.cwd if isinstance(self.cwd, str) else ""


# pi reads a missing parentId as a root, as it reads null (the spec allows both), and one
# that is not text (0, false) as the end of the path. The tree reads parents from the
# envelope; here the value is only carried, as it is (UNSET: missing, encoded so again).
ParentId = Any


class _Entry(msgspec.Struct, tag_field="type", rename="camel", omit_defaults=True, kw_only=True):
    pass


class MessageEntry(_Entry, tag="message", kw_only=True):
    # pi checks no entry's timestamp type: it reads any JSON value as `new Date(timestamp)`
    # (jsdate.date_ms; UNSET: missing), so none is dropped for one.
    id: str
    parent_id: ParentId = msgspec.UNSET
    timestamp: Any = msgspec.UNSET
    message: AgentMessage


class MessageLine(_Entry, tag="message", kw_only=True):
    """A message entry to write whose message is JSON text already (a reply in pi's order)."""

    id: str
    parent_id: ParentId = msgspec.UNSET
    timestamp: Any = msgspec.UNSET
    message: msgspec.Raw


class ThinkingLevelChangeEntry(_Entry, tag="thinking_level_change", kw_only=True):
    id: str
    parent_id: ParentId = msgspec.UNSET
    timestamp: Any = msgspec.UNSET
    thinking_level: str


class ModelChangeEntry(_Entry, tag="model_change", kw_only=True):
    id: str
    parent_id: ParentId = msgspec.UNSET
    timestamp: Any = msgspec.UNSET
    provider: str
    model_id: str


class CompactionEntry(_Entry, tag="compaction", kw_only=True):
    # pi checks none of the types of the fields below: it carries each as the entry holds it
    # (UNSET: missing), so a hand-edited or extension's entry must not be dropped for one.
    id: str
    parent_id: ParentId = msgspec.UNSET
    timestamp: Any = msgspec.UNSET  # read as `new Date(timestamp)` (jsdate.date_ms)
    summary: Any = msgspec.UNSET
    # An extension's compaction may leave both out or give a fractional count, and pi carries
    # the count as given; a kept entry that is none (or no string) keeps nothing.
    first_kept_entry_id: Any = None
    tokens_before: Any = msgspec.UNSET
    details: Any = None
    usage: Any = None
    from_hook: Any = None  # pi tests it as JavaScript does (`!fromHook`), whatever it holds
    # pi 1.6: the replayed system message at the compaction, first in the context after it.
    system_message: Any = None


class BranchSummaryEntry(_Entry, tag="branch_summary", kw_only=True):
    # As in a compaction, pi carries these fields as the entry holds them (UNSET: missing).
    id: str
    parent_id: ParentId = msgspec.UNSET
    timestamp: Any = msgspec.UNSET
    from_id: Any = msgspec.UNSET
    summary: Any = msgspec.UNSET
    details: Any = None
    usage: Any = None
    from_hook: Any = None  # tested as JavaScript does (`!fromHook`), whatever it holds


class CustomEntry(_Entry, tag="custom", kw_only=True):
    custom_type: str
    data: Any = None
    id: str
    parent_id: ParentId = msgspec.UNSET
    timestamp: Any = msgspec.UNSET


class CustomMessageEntry(_Entry, tag="custom_message", kw_only=True):
    custom_type: Any = msgspec.UNSET  # carried by pi as the entry holds it (UNSET: missing)
    content: str | list[UserBlock] | None = None  # pi 1.6 reads a missing one as []
    # Only for pi's display: an extension may leave it out, and pi carries it as given.
    display: Any = msgspec.UNSET
    details: Any = None
    id: str
    parent_id: ParentId = msgspec.UNSET
    timestamp: Any = msgspec.UNSET


class LabelEntry(_Entry, tag="label", kw_only=True):
    id: str
    parent_id: ParentId = msgspec.UNSET
    timestamp: Any = msgspec.UNSET
    target_id: str
    label: Any = None  # pi labels the entry with any value JavaScript reads as true


def label_text(label: Any) -> str:
    """A label as editors show it: one that is no text as its JSON text (`5`, `{"a":1}`)."""
    return label if isinstance(label, str) else stringify(label)


class SessionInfoEntry(_Entry, tag="session_info", kw_only=True):
    id: str
    parent_id: ParentId = msgspec.UNSET
    timestamp: Any = msgspec.UNSET
    name: str | None = None


def session_name(entry: SessionInfoEntry) -> str | None:
    """The name a `session_info` entry sets; an empty or blank one clears it (pi's rule)."""
    return (entry.name or "").strip(JS_WHITESPACE) or None


def clean_session_name(name: str) -> str:
    """A name as pi writes it: line breaks become spaces, then trimmed ("" clears)."""
    return re.sub(r"[\r\n]+", " ", name).strip(JS_WHITESPACE)


class LeafEntry(_Entry, tag="leaf", kw_only=True):
    """pi-lsp's old durable leaf move: an entry type pi does not know, so (as pi) it is read
    as a plain node under its target; pi-lsp now writes a `custom` entry instead."""

    id: str
    parent_id: ParentId = msgspec.UNSET
    timestamp: str
    target_id: str | None


class Replacement(msgspec.Struct):
    # Read as stored: pi puts it in the context as it is (UNSET: missing, which pi spreads as
    # `undefined`, so the message is left without content).
    content: Any = msgspec.UNSET


class ContextEditEntry(_Entry, tag="context_edit", kw_only=True):
    """pi 1.6: from here on the path, `targetId` contributes `replacement` (None: nothing)."""

    id: str
    parent_id: ParentId = msgspec.UNSET
    timestamp: Any = msgspec.UNSET  # pi never reads an edit's time, so any value will do
    target_id: str
    replacement: Replacement | None


class UsageEntry(_Entry, tag="usage", kw_only=True):
    """pi 1.6: tokens spent outside a reply (a summary, a title); no context, counted in cost."""

    id: str
    parent_id: ParentId = msgspec.UNSET
    timestamp: str
    kind: str
    provider: str
    model: str
    usage: Any = None
    note: str | None = None


Entry = (
    MessageEntry
    | ThinkingLevelChangeEntry
    | ModelChangeEntry
    | CompactionEntry
    | BranchSummaryEntry
    | CustomEntry
    | CustomMessageEntry
    | LabelEntry
    | SessionInfoEntry
    | LeafEntry
    | ContextEditEntry
    | UsageEntry
)


NO_MESSAGE = msgspec.Raw(b"null")


class Envelope(msgspec.Struct, rename="camel", gc=False):
    """What every line is decoded to on load; the body stays raw until needed."""

    type: str
    id: str | None = None
    parent_id: str | None = None
    timestamp: Any = msgspec.UNSET  # any JSON value, read as `new Date(timestamp)`
    message: msgspec.Raw = NO_MESSAGE


class LooseEnvelope(msgspec.Struct, rename="camel", gc=False):
    """A hand-edited line's envelope, read when `Envelope` refuses it: pi 1.6 keeps every
    line, whatever the types of its `type`, `id` and `parentId`."""

    type: Any = None
    id: Any = None
    parent_id: Any = None
    timestamp: Any = msgspec.UNSET
    message: msgspec.Raw = NO_MESSAGE

    def off_type(self) -> dict[str, str]:
        """The envelope fields that are not text, each with what pi reads it as: a type never
        is; an id or parentId when given (a missing id is a problem of its own, and a root's
        parentId may be null)."""
        readings = {"type": "no entry type", "id": "no id", "parentId": "a root"}
        values = {"type": self.type, "id": self.id, "parentId": self.parent_id}
        return {name: readings[name] for name, value in values.items()
                if not isinstance(value, str) and (value is not None or name == "type")}

    def as_pi_reads_it(self) -> Envelope:
        """The envelope pi's reading gives: a type that is not text matches no entry type, an
        id that is not text names nothing a parentId can reach, and a parentId that is not
        text ends the path walk (pi's `parentId ? byId.get(parentId) : undefined`)."""
        def text(value: Any) -> str | None:
            return value if isinstance(value, str) else None
        return Envelope(text(self.type) or "", text(self.id), text(self.parent_id),
                        self.timestamp, self.message)


class MessageHead(msgspec.Struct, rename="camel"):
    """The few message fields the settings scan and the tree view need."""

    role: str = ""
    # Of any type: pi never checks them, and one that is no text must not hide the message.
    provider: Any = msgspec.UNSET
    model: Any = msgspec.UNSET


class ActivityHead(msgspec.Struct):
    """What pi 1.6's session list reads of a message to date a session (the rest stays raw)."""

    role: str  # a role that is not text makes pi skip the message, as a failed decode does
    content: msgspec.Raw = NO_MESSAGE  # plain Raw fields: lone surrogates are read into them
    timestamp: msgspec.Raw = NO_MESSAGE


envelope_decoder: Decoder[Envelope] = Decoder(Envelope)
loose_envelope_decoder: Decoder[LooseEnvelope] = Decoder(LooseEnvelope)
entry_decoder: Decoder[Entry] = Decoder(Entry)
message_decoder: Decoder[AgentMessage] = Decoder(AgentMessage)
head_decoder: Decoder[MessageHead] = Decoder(MessageHead)
activity_decoder: Decoder[ActivityHead] = Decoder(ActivityHead)
header_decoder: Decoder[SessionHeader] = Decoder(SessionHeader)


def decode_message(raw: msgspec.Raw | bytes) -> AgentMessage | None:
    """The typed message, or None for a role or shape pi-lsp does not know."""
    try:
        return message_decoder.decode(raw)
    except msgspec.ValidationError:
        return _read_leniently(raw)


class UnreadMessage(msgspec.Struct, frozen=True):
    """A message pi-lsp cannot give a type (a role it does not know, a badly typed field, no
    object at all), as written: pi keeps it in compaction plans and branch summaries."""

    value: Any  # as JSON.parse reads it

    @property
    def role(self) -> Any:
        """The role as written; None where the message is no object or has none."""
        return self.value.get("role") if isinstance(self.value, dict) else None


ReadMessage = AgentMessage | UnreadMessage


def read_message(raw: msgspec.Raw) -> ReadMessage:
    """The typed message, or the message as written where pi-lsp has no type for it."""
    message = decode_message(raw)
    if message is not None:
        return message
    return UnreadMessage(value_decoder.decode(raw))


# What a message's bookkeeping fields read as when they are absent or of another type: pi
# (JavaScript) never checks them, so a hand-edited `"timestamp": "x"` or `"usage": null` leaves
# the message in pi's context, and pi's estimates treat them as these values do.
_FALLBACKS: dict[str, Any] = {"timestamp": 0, "api": "", "provider": "", "model": "",
                              "usage": {}, "stopReason": "stop"}
# Text fields pi uses whatever their type (convertToLlm's `prefix + summary`): read as the text
# JavaScript makes of them, `undefined` for a missing one.
_TEXT_FIELDS: dict[str, tuple[str, ...]] = {
    "branchSummary": ("summary",), "compactionSummary": ("summary",), "custom": ("customType",)}
_SIGNATURES = ("thinkingSignature", "textSignature", "thoughtSignature")
_MESSAGE_TYPES = {kind.__struct_config__.tag: kind for kind in AgentMessage.__args__}
# The block types each role's content holds; pi 1.6's estimates, views and requests pass over a
# block of another type (a tool result's thinking, a reply's `{"type": "video"}`).
_USER_BLOCKS = ("text", "image")
_KNOWN_BLOCKS = {"user": _USER_BLOCKS, "custom": _USER_BLOCKS, "toolResult": _USER_BLOCKS,
                 "system": _USER_BLOCKS, "assistant": ("text", "thinking", "toolCall", "image")}


def _fits(value: Any, kind: Any) -> bool:
    try:
        msgspec.convert(value, kind)
    except (msgspec.ValidationError, UnicodeEncodeError):  # (a lone surrogate in the error)
        return False
    return True


def _fitting_part(value: dict[str, Any], kind: type[msgspec.Struct]) -> dict[str, Any]:
    """An object's keys whose values fit `kind`'s fields (pi reads the rest of a `usage` whose
    `cost` is null, say)."""
    types = {field.encode_name: field.type for field in msgspec.structs.fields(kind)}
    return {key: item for key, item in value.items() if _fits(item, types.get(key, Any))}


def read_usage(value: Any) -> Usage:
    """A reply's `usage` as written, read as a typed reply's is: the parts that fit, the rest
    as none (nothing at all for one that is no object)."""
    return msgspec.convert(_fitting_part(value, Usage) if isinstance(value, dict) else {}, Usage)


def _read_leniently(raw: msgspec.Raw | bytes) -> AgentMessage | None:
    """A message whose bookkeeping or optional fields pi-lsp cannot read as their types, read
    with those as absent; None when its role or content is what is wrong."""
    try:
        fields = object_decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    role = fields.get("role")
    kind = _MESSAGE_TYPES.get(role) if isinstance(role, str) else None
    if kind is None:
        return None
    for name in _TEXT_FIELDS.get(str(role), ()):
        fields[name] = js_string(fields.get(name, msgspec.UNSET))
    for field in msgspec.structs.fields(kind):
        name = field.encode_name
        if _fits(fields.get(name, field.default), field.type):
            continue
        if name not in _FALLBACKS:
            # An optional field pi uses only when it holds what pi writes: read as absent.
            if not field.required:
                fields.pop(name, None)
        elif name == "usage" and isinstance(fields.get(name), dict):
            fields[name] = _fitting_part(fields[name], Usage)
        elif _fits(None, field.type):
            fields[name] = None
        elif name != "timestamp" or name in fields:  # pi skips a system message without one
            fields[name] = _FALLBACKS[name]
    if role == "toolResult" and isinstance(fields.get("content"), str):
        # A result's output as a text: pi 1.6's estimate and summaries read it as its text
        # (its providers fail on it; pi-lsp sends the text, as one block).
        fields["content"] = [{"type": "text", "text": fields["content"]}]
    if "content" in fields:
        fields["content"] = _known_blocks(fields["content"], str(role))
    content = fields.get("content")
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict):
            _read_block_as_pi_does(block, str(role))
    try:
        message: AgentMessage = msgspec.convert(fields, AgentMessage)
    except (msgspec.ValidationError, UnicodeEncodeError):
        return None
    return message


def unsent_blocks(raw: msgspec.Raw | bytes, role: str | None = None) -> tuple[str, int]:
    """A message's role (`role`: a custom_message entry's) and how many of its content blocks
    are of a type that role does not hold: read without them, no request carries them."""
    try:
        fields = object_decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return "", 0
    role, content = role or fields.get("role"), fields.get("content")
    if not isinstance(role, str) or not isinstance(content, list) or role not in _KNOWN_BLOCKS:
        return "", 0
    return role, len(content) - len(_known_blocks(content, role))


def _known_blocks(content: Any, role: str) -> Any:
    """`content` less its blocks of a type the role does not hold (`{"type": "video"}`,
    `{"type": 5}`, `"x"`: no object has none): pi 1.6 sends the rest of the message (the
    blocks it makes an image of undefined fields, which every API refuses, are left out:
    README, Hand-edited messages)."""
    known = _KNOWN_BLOCKS.get(role)
    if known is None or not isinstance(content, list):
        return content
    return [block for block in content
            if isinstance(block, dict) and block.get("type") in known]


def _read_block_as_pi_does(block: dict[str, Any], role: str) -> None:
    """A content block's fields of another type, read as pi 1.6 uses them: a tool result's
    text as the text JavaScript makes of it, `redacted` by its truth."""
    kind = block.get("type")
    if kind == "text" and role == "toolResult" and "text" in block:
        block["text"] = js_string(block["text"])  # pi joins the texts: String(value)
    elif kind == "thinking" and block.get("redacted") is not None:
        block["redacted"] = js_truthy(block["redacted"])  # pi's `if (block.redacted)`
    # A signature of another type (pi 1.6 writes a redacted block's data as sent): the block
    # is read without it, as one nothing can send back.
    for name in _SIGNATURES:
        if block.get(name) is not None and not isinstance(block[name], str):
            del block[name]


def role_of(message: AgentMessage) -> str:
    """The `role` tag a message is written with."""
    return str(message.__struct_config__.tag)
