"""pi 1.6's session projection: what each entry on a path puts in the context, edits applied.

The context, the compaction plan and the context size are all read off this one list, so an
edit, a compaction's prompt checkpoint or an omitted entry is seen the same way by each.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import msgspec

from pi_lsp.session.entries import (
    NO_MESSAGE,
    BranchSummaryEntry,
    CompactionEntry,
    ContextEditEntry,
    Replacement,
    encoder,
    head_decoder,
)
from pi_lsp.session.journal import Record
from pi_lsp.session.jsdate import date_ms
from pi_lsp.session.jsontext import Decoder, js_string, js_truthy, object_decoder
from pi_lsp.session.records import (
    assistant_head,
    decode_entry,
    last_level_change,
    last_model_source,
)

_JSON_NULL = msgspec.Raw(b"null")
CONTENT_ROLES = frozenset({"user", "assistant", "toolResult"})
EDITABLE_ROLES = frozenset({"user", "assistant", "toolResult", "custom"})


class ModelRef(msgspec.Struct, rename="camel"):
    """A model as the path names it: each part as its entry holds it, of any type, as pi
    reports it (UNSET: missing, which pi's JSON leaves out)."""

    provider: Any = msgspec.UNSET
    model_id: Any = msgspec.UNSET

    def names(self) -> tuple[str, str]:
        """The provider and id to look up: a part that is no text is read as the text
        JavaScript makes of it (`undefined/claude-opus-4-1`, as pi's own message names it),
        a provider and model no one has."""
        return js_string(self.provider), js_string(self.model_id)


class ContextSettings(msgspec.Struct):
    thinking_level: str  # the level the agent asks for: "off" when none is set or it is no text
    model: ModelRef | None
    thinking_level_set: bool = False  # else pi's agent thinks at its default level
    # pi's context value: the level as the last change on the path holds it, of any type
    # (UNSET: missing), "off" when there is none.
    stored_level: Any = "off"


class ProjectedEntry(msgspec.Struct, gc=False):
    """One entry of the context list and the messages it contributes (none when omitted)."""

    # gc=False: an entry refers only to a record, raw messages and a decoded edit, none of
    # which can refer back to it, and a long path makes tens of thousands of them at once.

    record: Record
    messages: list[msgspec.Raw]
    edit: ContextEditEntry | None = None  # the edit in force on this entry, if any


class Projection(msgspec.Struct):
    entries: list[ProjectedEntry]
    path: list[Record]  # the raw path it was made of

    @property
    def settings(self) -> ContextSettings:
        """The path's settings, read only when asked: most projections need none, and finding
        the level reads the whole path (a caller with the tree asks `settings_at`)."""
        return context_settings(self.path)

    @property
    def messages(self) -> list[msgspec.Raw]:
        messages: list[msgspec.Raw] = []
        for entry in self.entries:
            messages += entry.messages  # one extend per entry, not a step per message
        return messages

    def entry_ids(self) -> list[str]:
        """The id of the entry each message came from, in the order of `messages`."""
        return [entry.record.env.id for entry in self.entries  # type: ignore[misc]
                for _ in entry.messages]


class _ContentHead(msgspec.Struct):
    role: str = ""
    content: msgspec.Raw = NO_MESSAGE


_content_head_decoder: Decoder[_ContentHead] = Decoder(_ContentHead)


class _CustomMessageFields(msgspec.Struct, rename="camel"):
    """A custom_message entry's fields as pi carries them: its content as written, of any type
    (pi puts a number or an unknown block in the context as it is)."""

    custom_type: Any = msgspec.UNSET
    content: msgspec.Raw = NO_MESSAGE  # null or missing: pi reads it as []
    display: Any = msgspec.UNSET
    details: Any = msgspec.UNSET  # null is kept, as pi keeps it; only a missing one is left out
    timestamp: Any = msgspec.UNSET


_custom_message_decoder: Decoder[_CustomMessageFields] = Decoder(_CustomMessageFields)


class _LevelHead(msgspec.Struct, rename="camel"):
    thinking_level: Any = msgspec.UNSET


_level_decoder: Decoder[_LevelHead] = Decoder(_LevelHead)


class _ModelChangeHead(msgspec.Struct, rename="camel"):
    """A model_change's model as pi reads it: each part as the entry holds it."""

    provider: Any = msgspec.UNSET
    model_id: Any = msgspec.UNSET


_model_change_decoder: Decoder[_ModelChangeHead] = Decoder(_ModelChangeHead)


def context_settings(path: list[Record]) -> ContextSettings:
    """The thinking level and model set last on the raw path (scanned from the leaf back)."""
    return settings_of(last_level_change(path), last_model_source(path))


def settings_of(level_change: Record | None, model_source: Record | None) -> ContextSettings:
    """The settings a path's last thinking_level_change and model source set."""
    model = None if model_source is None else _model(model_source)
    if level_change is None:
        return ContextSettings("off", model)
    # pi takes the level as the entry holds it: none at all leaves the agent's default, and
    # one that is not text thinks as "off" does (pi's clamp gives either a model's lowest).
    level = _level_decoder.decode(level_change.text).thinking_level
    return ContextSettings(level if isinstance(level, str) else "off", model,
                           level is not msgspec.UNSET, level)


def _model(source: Record) -> ModelRef:
    """The model a model_change or an assistant message names."""
    head = assistant_head(source)
    if head is not None:
        return ModelRef(head.provider, head.model)
    change = _model_change_decoder.decode(source.text)
    return ModelRef(change.provider, change.model_id)


def message_role(record: Record) -> str | None:
    """The role of a `message` entry (None for other entries and unreadable messages)."""
    if record.env.type != "message":
        return None
    try:
        return head_decoder.decode(record.env.message).role or None
    except msgspec.ValidationError:
        return None


def with_content(raw: msgspec.Raw, content: Any) -> msgspec.Raw:
    """The message with only its content replaced, every other key kept in place (UNSET:
    removed, as JSON.stringify drops an `undefined` one)."""
    message = object_decoder.decode(raw)
    if content is msgspec.UNSET:
        message.pop("content", None)
    else:
        message["content"] = content
    return msgspec.Raw(encoder.encode(message))


def _message(fields: dict[str, Any]) -> msgspec.Raw:
    """A message pi makes of an entry's fields, each as the entry holds it; a missing one
    (UNSET) is left out, as JSON.stringify leaves out `undefined`. A summary past a double's
    range stays one (`1e400`, as the file holds it): pi carries it as Infinity, and
    convertToLlm writes it "Infinity" (other such fields are null, as pi's JSON has them)."""
    summary = fields.get("summary")
    marks = {"summary": _INFINITIES[summary > 0]} \
        if isinstance(summary, float) and math.isinf(summary) else {}
    text = encoder.encode({key: marks.get(key, value) for key, value in fields.items()
                           if value is not msgspec.UNSET})
    for mark in marks.values():
        text = text.replace(encoder.encode(mark), mark.encode())
    return msgspec.Raw(text)


# What an infinite field is written as: a JSON number JSON.parse reads as ±Infinity.
_INFINITIES = {True: "1e400", False: "-1e400"}


def compaction_messages(entry: CompactionEntry) -> list[msgspec.Raw]:
    """A compaction's prompt checkpoint (pi 1.6) and its summary."""
    summary = _message({"role": "compactionSummary", "summary": entry.summary,
                        "tokensBefore": entry.tokens_before,
                        "timestamp": date_ms(entry.timestamp)})
    if js_truthy(entry.system_message):
        return [msgspec.Raw(encoder.encode(entry.system_message)), summary]
    return [summary]


def branch_summary_message(entry: BranchSummaryEntry) -> msgspec.Raw:
    """The message a branch summary makes (pi's createBranchSummaryMessage)."""
    return _message({"role": "branchSummary", "summary": entry.summary,
                     "fromId": entry.from_id, "timestamp": date_ms(entry.timestamp)})


def custom_message(record: Record) -> msgspec.Raw:
    """The message a custom_message entry makes (pi's createCustomMessage)."""
    entry = _custom_message_decoder.decode(record.text)
    return _message({
        "role": "custom", "customType": entry.custom_type,
        "content": entry.content if entry.content != _JSON_NULL else [],
        "display": entry.display,
        "details": entry.details,
        "timestamp": date_ms(entry.timestamp)})


def entry_messages(record: Record) -> list[msgspec.Raw]:
    """The messages an entry contributes before edits (pi's `sessionEntryToContextMessages`)."""
    kind = record.env.type
    if kind == "message":
        raw = record.env.message
        if raw is NO_MESSAGE:
            return []
        try:
            head = _content_head_decoder.decode(raw)
        except msgspec.ValidationError:
            return [raw]
        if head.content == _JSON_NULL:  # null or missing; Raw compares without a copy
            if head.role == "system":
                return [with_content(raw, "")]
            if head.role in CONTENT_ROLES:
                return [with_content(raw, [])]
        return [raw]
    if kind == "custom_message":
        return [custom_message(record)]
    elif kind == "branch_summary":
        entry = decode_entry(record)
        if isinstance(entry, BranchSummaryEntry) and js_truthy(entry.summary):
            return [branch_summary_message(entry)]
    elif kind == "compaction":
        entry = decode_entry(record)
        if isinstance(entry, CompactionEntry):
            return compaction_messages(entry)
    return []


def apply_edit(messages: list[msgspec.Raw], replacement: Replacement | None
               ) -> list[msgspec.Raw]:
    """An entry's messages under an edit: omitted, or with the content of editable roles
    replaced (a string becomes one text block for replies and tool results)."""
    if replacement is None:
        return []
    edited = []
    for raw in messages:
        try:
            role = head_decoder.decode(raw).role
        except msgspec.ValidationError:
            role = ""
        if role not in EDITABLE_ROLES:
            edited.append(raw)
            continue
        content = replacement.content
        if role in ("assistant", "toolResult") and isinstance(content, str):
            content = [{"type": "text", "text": content}]
        edited.append(with_content(raw, content))
    return edited


def last_compaction(path: list[Record]) -> tuple[int, CompactionEntry] | None:
    for index in range(len(path) - 1, -1, -1):
        if path[index].env.type == "compaction":
            entry = decode_entry(path[index])
            if isinstance(entry, CompactionEntry):
                return index, entry
    return None


def context_entries(path: list[Record]) -> list[Record]:
    """The entries the context is made of: the last compaction, its kept range without system
    messages (none when the kept entry is not before it), then everything after it."""
    found = last_compaction(path)
    if found is None:
        return path
    index, compaction = found
    first_kept = compaction.first_kept_entry_id
    # Sought from the compaction back, a few entries and not the whole path before them: ids
    # on a path are unique (the tree's walk up stops at a repeated one), so it is the same one.
    start = next((i for i in range(index - 1, -1, -1) if path[i].env.id == first_kept), index)
    kept = [r for r in path[start:index] if message_role(r) != "system"]
    return [path[index], *kept, *path[index + 1:]]


def latest_edits(records: list[Record]) -> dict[str, ContextEditEntry]:
    """The last readable edit per target among `records`."""
    edits: dict[str, ContextEditEntry] = {}
    for record in records:
        if record.env.type == "context_edit":
            entry = decode_entry(record)
            if isinstance(entry, ContextEditEntry):
                edits[entry.target_id] = entry
    return edits


def project_path(path: list[Record]) -> Projection:
    """pi 1.6's `buildSessionProjection` over a root-to-leaf path."""
    return Projection(list(_projected(context_entries(path))), path)


def project_messages(path: list[Record]) -> tuple[list[msgspec.Raw], ContextSettings]:
    """The messages and settings of `project_path`, without keeping an entry per record: a
    whole long context needs no more (each entry is freed as soon as its messages are taken)."""
    messages: list[msgspec.Raw] = []
    for entry in _projected(context_entries(path)):
        messages += entry.messages
    return messages, context_settings(path)


def _projected(records: list[Record]) -> Iterator[ProjectedEntry]:
    edits = latest_edits(records)
    for index, record in enumerate(records):
        edit = None
        if record.env.type == "compaction" and index > 0:
            messages: list[msgspec.Raw] = []  # an older compaction inside the kept range
        else:
            messages = entry_messages(record)
            edit = edits.get(record.env.id)  # type: ignore[arg-type]
            if edit is not None:
                messages = apply_edit(messages, edit.replacement)
        yield ProjectedEntry(record, messages, edit)
