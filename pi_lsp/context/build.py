"""The runtime layer: the messages, thinking level and model in force at a leaf."""

from __future__ import annotations

import msgspec

from pi_lsp.session.entries import (
    NO_MESSAGE,
    BranchSummaryEntry,
    BranchSummaryMessage,
    CompactionEntry,
    CompactionSummaryMessage,
    CustomMessage,
    CustomMessageEntry,
    ModelChangeEntry,
    ThinkingLevelChangeEntry,
    encoder,
    head_decoder,
)
from pi_lsp.session.ids import iso_to_ms
from pi_lsp.session.journal import Record
from pi_lsp.session.tree import SessionTree, decode_entry


class ModelRef(msgspec.Struct, rename="camel"):
    provider: str
    model_id: str


class SessionContext(msgspec.Struct, rename="camel"):
    """pi's `{messages, thinkingLevel, model}`; messages stay raw JSON."""

    messages: list[msgspec.Raw]
    thinking_level: str
    model: ModelRef | None


class LeafContext(msgspec.Struct):
    """A context together with the id of the entry each message came from."""

    context: SessionContext
    entry_ids: list[str]


class ContextSettings(msgspec.Struct):
    thinking_level: str
    model: ModelRef | None


def context_settings(path: list[Record]) -> ContextSettings:
    """The thinking level and model set last on the path (scanned from the leaf back)."""
    level: str | None = None
    model: ModelRef | None = None
    for record in reversed(path):
        kind = record.env.type
        if level is None and kind == "thinking_level_change":
            entry = decode_entry(record)
            if isinstance(entry, ThinkingLevelChangeEntry):
                level = entry.thinking_level
        elif model is None and kind == "model_change":
            entry = decode_entry(record)
            if isinstance(entry, ModelChangeEntry):
                model = ModelRef(entry.provider, entry.model_id)
        elif model is None and kind == "message":
            model = _assistant_model(record.env.message)
        if level is not None and model is not None:
            break
    return ContextSettings(level or "off", model)


def _assistant_model(raw: msgspec.Raw) -> ModelRef | None:
    try:
        head = head_decoder.decode(raw)
    except msgspec.ValidationError:
        return None
    if head.role != "assistant" or head.provider is None or head.model is None:
        return None
    return ModelRef(head.provider, head.model)


def entry_to_message(record: Record) -> msgspec.Raw | None:
    """The context message an entry contributes, as JSON, or None."""
    kind = record.env.type
    if kind == "message":
        return record.env.message if record.env.message is not NO_MESSAGE else None
    if kind == "custom_message":
        entry = decode_entry(record)
        if isinstance(entry, CustomMessageEntry):
            return _raw(CustomMessage(
                custom_type=entry.custom_type, content=entry.content, display=entry.display,
                details=entry.details, timestamp=iso_to_ms(entry.timestamp),
            ))
    elif kind == "branch_summary":
        entry = decode_entry(record)
        if isinstance(entry, BranchSummaryEntry) and entry.summary:
            return _raw(BranchSummaryMessage(
                summary=entry.summary, from_id=entry.from_id,
                timestamp=iso_to_ms(entry.timestamp),
            ))
    elif kind == "compaction":
        entry = decode_entry(record)
        if isinstance(entry, CompactionEntry):
            return compaction_message(entry)
    return None


def compaction_message(entry: CompactionEntry) -> msgspec.Raw:
    return _raw(CompactionSummaryMessage(
        summary=entry.summary, tokens_before=entry.tokens_before,
        timestamp=iso_to_ms(entry.timestamp),
    ))


def _raw(message: msgspec.Struct) -> msgspec.Raw:
    return msgspec.Raw(encoder.encode(message))


def last_compaction(path: list[Record]) -> tuple[int, CompactionEntry] | None:
    for index in range(len(path) - 1, -1, -1):
        if path[index].env.type == "compaction":
            entry = decode_entry(path[index])
            if isinstance(entry, CompactionEntry):
                return index, entry
    return None


def messages_of_path(path: list[Record]) -> tuple[list[msgspec.Raw], list[str]]:
    """The messages the path contributes, with the id of the entry each came from."""
    messages: list[msgspec.Raw] = []
    ids: list[str] = []
    found = last_compaction(path)
    if found is None:
        kept = path
    else:
        index, compaction = found
        messages.append(compaction_message(compaction))
        ids.append(path[index].env.id)  # type: ignore[arg-type]
        start = next(
            (i for i in range(index) if path[i].env.id == compaction.first_kept_entry_id), index
        )
        kept = path[start:index] + path[index + 1:]
    for record in kept:
        message = entry_to_message(record) if record.env.type != "compaction" else None
        if message is not None:
            messages.append(message)
            ids.append(record.env.id)  # type: ignore[arg-type]
    return messages, ids


def build_leaf_context(tree: SessionTree, leaf_id: str | None) -> LeafContext:
    """pi's `buildSessionContext` at `leaf_id` (None: the empty context), with entry ids."""
    path = tree.path_to(leaf_id)
    settings = context_settings(path)
    messages, ids = messages_of_path(path)
    return LeafContext(SessionContext(messages, settings.thinking_level, settings.model), ids)


def build_session_context(tree: SessionTree, leaf_id: str | None) -> SessionContext:
    return build_leaf_context(tree, leaf_id).context
