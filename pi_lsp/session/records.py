"""What one record of a session file is: its typed entry, its parent, and the kinds of record
the tree treats specially."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice

import msgspec

from pi_lsp.session.entries import (
    CustomEntry,
    Entry,
    MessageHead,
    entry_decoder,
    head_decoder,
)
from pi_lsp.session.journal import Record
from pi_lsp.session.jsontext import convert, object_decoder

LEAF_MOVE = "pi-lsp.leaf"  # the customType of a durable leaf move


class UnknownEntryError(KeyError):
    """An entry id that is not in the session."""

    def __str__(self) -> str:
        said = f"no entry with id {self.args[0]!r} in this session"
        if "\ufffd" in str(self.args[0]):
            # Editors are sent U+FFFD for half a character (a lone surrogate) in an id, and
            # cannot send the id back as it is.
            said += ("; if its id holds half a character (shown as \ufffd), it cannot be named "
                     "from an editor")
        return said


@dataclass(slots=True)
class Refresh:
    """What a refresh found: entries added, whether the file had to be read again, the path
    the session was moved away from when its file was replaced under a running write, and
    whether the leaf moved with no entry added (to an id-less line, which is in no index)."""

    added: int
    reloaded: bool
    relocated_from: str | None = None
    moved: bool = False


def decode_entry(record: Record) -> Entry | None:
    """The typed entry of a record, or None for unknown types and unreadable bodies."""
    try:
        return entry_decoder.decode(record.text)
    except msgspec.ValidationError:
        return _decode_as_pi_reads(record)


def _decode_as_pi_reads(record: Record) -> Entry | None:
    """An entry pi reads though a field is off, or None. An id missing or not text is read as
    an empty one: pi reads such an entry's name, label or context all the same (the tree never
    indexes it by that id). A context edit's `replacement` that is no object and not null is
    read as `{}`: pi 1.6 tests only `=== null`, then spreads its (undefined) `content`."""
    if record.env.id is not None and record.env.type != "context_edit":
        return None  # neither case: not decoded again (unknown types reach here at every read)
    try:
        fields = object_decoder.decode(record.text)
    except msgspec.ValidationError:  # no object (42, [1]): an entry of no type
        return None
    odd_edit = fields.get("type") == "context_edit" and \
        not isinstance(fields.get("replacement", {}), dict | None)
    if record.env.id is not None and not odd_edit:
        return None
    if record.env.id is None:
        fields["id"] = ""
    if odd_edit:
        fields["replacement"] = {}
    try:
        entry: Entry = convert(fields, Entry)
    except msgspec.ValidationError:
        return None
    return entry


def starts_conversation(record: Record) -> bool:
    """Whether the entry is a user or assistant message: the first one makes pi 1.6 write a
    new session (setup entries alone leave no file)."""
    if record.env.type != "message":
        return False
    try:
        return head_decoder.decode(record.env.message).role in ("user", "assistant")
    except msgspec.ValidationError:
        return False


def assistant_head(record: Record) -> MessageHead | None:
    """The head of an assistant `message` entry (None for other entries and unreadable ones)."""
    if record.env.type != "message":
        return None
    try:
        head = head_decoder.decode(record.env.message)
    except msgspec.ValidationError:
        return None
    return head if head.role == "assistant" else None


def last_level_change(records: list[Record], start: int = 0) -> Record | None:
    """The last thinking_level_change among `records[start:]`."""
    # Often none but at the root, so this reads the whole path: a loop that tests one type
    # per entry is the cheapest way to do it.
    for record in islice(reversed(records), len(records) - start):
        if record.env.type == "thinking_level_change":
            return record
    return None


def last_model_source(records: list[Record], start: int = 0) -> Record | None:
    """The last entry among `records[start:]` that names the model pi's context reports: a
    model_change, or an assistant message."""
    for record in islice(reversed(records), len(records) - start):
        if record.env.type == "model_change" or assistant_head(record) is not None:
            return record
    return None


def is_leaf_move(record: Record) -> bool:
    """A durable leaf move: pi-lsp's `custom` entry, or its older `leaf` entry."""
    if record.env.type == "leaf":
        return True
    if record.env.type != "custom" or LEAF_MOVE.encode() not in record.raw:
        return False
    entry = decode_entry(record)
    return isinstance(entry, CustomEntry) and entry.custom_type == LEAF_MOVE


def parent_of(record: Record) -> str | None:
    """The parent id, with a self-parent read as a root."""
    parent = record.env.parent_id
    return None if parent == record.env.id else parent


def path_parent(record: Record) -> str | None:
    """The parent a path walk goes up to: pi's `parentId ? byId.get(parentId) : undefined`
    takes an empty parentId as none, though an entry may have the id "" (getTree still draws
    the entry under it, as `parent_of` does)."""
    return parent_of(record) or None
