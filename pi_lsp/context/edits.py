"""Editing the context as pi 1.6 does: `context_edit` entries that omit a message or replace its
content from here on the branch, an undo that restores the original by a later edit, and the
marks a preview shows for the edits in force."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from pi_lsp.context.projection import (
    ProjectedEntry,
    apply_edit,
    context_entries,
    entry_messages,
    latest_edits,
    message_role,
)
from pi_lsp.context.tokens import estimate_tokens
from pi_lsp.session.entries import (
    AgentMessage,
    AssistantMessage,
    CustomMessageEntry,
    MessageEntry,
    Replacement,
    decode_message,
)
from pi_lsp.session.journal import Record
from pi_lsp.session.jsontext import value_decoder
from pi_lsp.session.outline import message_preview
from pi_lsp.session.records import decode_entry
from pi_lsp.session.tree import SessionTree

EDITABLE_MESSAGE_ROLES = ("user", "assistant", "toolResult")
# A failed reply's preview is cut here, not at a line's width: its error is all the chat shows of
# why the reply failed. pi-ai keeps 4,000 characters of a provider's error body, so an error pi
# 1.6 or pi-lsp wrote is whole; a session's hostile 65 MB one is not sent with every page.
FAILURE_CHARS = 8000


class ContextEditError(ValueError):
    """An edit pi would refuse, or an undo with nothing to undo."""


class EditMark(msgspec.Struct, rename="camel"):
    """An edit in force at a leaf: what it did to its target and to the token estimate.
    `position` is where the target's messages would be among the layer's rows."""

    target_id: str
    edit_id: str
    kind: Literal["omitted", "replaced"]
    role: str
    tokens_before: int
    tokens_after: int
    original: str  # a one-line preview of the target as written
    position: int = 0
    failure: str | None = None  # a failed or aborted reply's preview up to FAILURE_CHARS


def editable_role(record: Record) -> str | None:
    """The role an editable target has (`custom` for a custom message), else None."""
    if record.env.type == "custom_message":
        return "custom"
    role = message_role(record)
    return role if role in EDITABLE_MESSAGE_ROLES else None


def _editable_target(tree: SessionTree, target_id: str) -> tuple[Record, str]:
    """The target on the current branch and its role; refused as pi refuses it."""
    record = tree.record(target_id)
    unnamed = tree.unnameable_leaf()  # pi would write the edit there; pi-lsp cannot
    if unnamed is not None:
        raise ContextEditError(f"entry {target_id!r} cannot be edited here: {unnamed}")
    # pi's active branch (getBranch) is the path up from its leafId: none at an id-less leaf,
    # whose context is the path up from that line, but whose next entry starts a root, and at
    # one whose id is "" (getBranch tests the id for truth).
    if not tree.leaf_id or target_id not in tree.path_ids(tree.leaf_id):
        raise ContextEditError(f"entry {target_id!r} is not on the current branch; go to a "
                               "leaf below it to edit its context")
    role = editable_role(record)
    if role is None:
        kind = message_role(record) or record.env.type
        raise ContextEditError(f"entry {target_id!r} is a {kind} entry: only user, assistant "
                               "and tool result messages and custom messages can be edited")
    return record, role


def edit_context(tree: SessionTree, target_id: str, content: str | list[Any] | None) -> str:
    """Append pi's `context_edit` for `target_id` at the leaf: None omits it from the context,
    otherwise `content` replaces its content (a string becomes one text block for replies and
    tool results, as pi writes it). The edit entry's id."""
    _, role = _editable_target(tree, target_id)
    if content is None:
        return tree.append_context_edit(target_id, None)
    if isinstance(content, str) and role in ("assistant", "toolResult"):
        content = [{"type": "text", "text": content}]
    return tree.append_context_edit(target_id, Replacement(content))


def original_content(record: Record) -> str | list[Any]:
    """The target's content as written, as the context reads it (a missing one is `[]`)."""
    entry = decode_entry(record)
    if isinstance(entry, CustomMessageEntry):
        content: Any = msgspec.to_builtins(entry.content)
    elif isinstance(entry, MessageEntry):
        content = value_decoder.decode(record.env.message).get("content")
    else:
        content = None
    if content is None:
        return []
    if not isinstance(content, str | list):
        raise ContextEditError(f"entry {record.env.id!r} has content pi cannot write back "
                               f"({type(content).__name__}); its edit cannot be undone")
    return content


def undo_context_edit(tree: SessionTree, target_id: str) -> str:
    """Append an edit that gives `target_id` its original content back (pi has no other way
    to take an edit back: the latest edit of a target wins). The new edit's id."""
    record, _ = _editable_target(tree, target_id)
    path = tree.path_to(tree.leaf_id)
    records = context_entries(path)
    edit = latest_edits(records).get(target_id)
    unedited = entry_messages(record)
    if record not in records or edit is None or \
            _values(apply_edit(unedited, edit.replacement)) == _values(unedited):
        raise ContextEditError(f"entry {target_id!r} has no context edit in force on the "
                               "current branch")
    return tree.append_context_edit(target_id, Replacement(original_content(record)))


def _values(messages: list[msgspec.Raw]) -> list[Any]:
    return [value_decoder.decode(raw) for raw in messages]


def _tokens(messages: list[msgspec.Raw]) -> int:
    total = 0
    for raw in messages:
        message = decode_message(raw)
        if message is not None:
            total += estimate_tokens(message)
    return total


def failure_preview(message: AgentMessage | None) -> str | None:
    """A failed or aborted reply's `[error] <its error>` and calls, on one line, whole up to
    FAILURE_CHARS; None for any other message."""
    if isinstance(message, AssistantMessage) and message.stop_reason in ("error", "aborted"):
        return message_preview(message, FAILURE_CHARS)
    return None


def edit_marks(entries: list[ProjectedEntry]) -> list[EditMark]:
    """The edits in force among projected entries that change what their target contributes."""
    marks = []
    for entry in entries:
        if entry.edit is None:
            continue
        unedited = entry_messages(entry.record)
        if _values(entry.messages) == _values(unedited):
            continue  # restored: the context is as written
        first = decode_message(unedited[0]) if unedited else None
        marks.append(EditMark(
            target_id=entry.record.env.id or "", edit_id=entry.edit.id,
            kind="omitted" if not entry.messages else "replaced",
            role=editable_role(entry.record) or message_role(entry.record) or
            entry.record.env.type,
            tokens_before=_tokens(unedited), tokens_after=_tokens(entry.messages),
            original=message_preview(first) if first is not None else "",
            failure=None if entry.messages else failure_preview(first),
        ))
    return marks
