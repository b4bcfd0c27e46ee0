"""Version 1 and 2 files brought up to version 3 in memory; the file itself is never rewritten."""

from __future__ import annotations

from typing import Any

import msgspec

from pi_lsp.session.entries import (
    CURRENT_VERSION,
    envelope_decoder,
    header_decoder,
    loose_envelope_decoder,
)
from pi_lsp.session.ids import new_entry_id
from pi_lsp.session.journal import Problem, Problems, Record, Snapshot
from pi_lsp.session.jsontext import encoder, object_decoder, value_decoder


def migrate(snapshot: Snapshot) -> bool:
    """Upgrade the snapshot's records to version 3; returns whether anything changed."""
    version = snapshot.header.version or 1
    if version >= CURRENT_VERSION:
        return False
    if version < 2:
        _v1_to_v2(snapshot.records, snapshot.problems)
    _v2_to_v3(snapshot.records)
    header = object_decoder.decode(snapshot.header_raw)
    header["version"] = CURRENT_VERSION
    snapshot.header_raw = encoder.encode(header)
    snapshot.header = header_decoder.decode(snapshot.header_raw)
    return True


def ids_made_up(snapshot: Snapshot) -> bool:
    """Whether the entries' ids are made up in memory (version 1 files hold none): a line
    written that names them could not be matched by a later read, which makes up others."""
    return (snapshot.header.version or 1) < 2


def _rewrite(record: Record, entry: dict[str, Any]) -> None:
    record.text = msgspec.Raw(encoder.encode(entry))
    try:
        record.env = envelope_decoder.decode(record.text)
    except msgspec.ValidationError:  # a type, id or parentId that is not text, kept as pi keeps it
        record.env = loose_envelope_decoder.decode(record.text).as_pi_reads_it()
    record.disk = None  # a copy of the session is written in its migrated form


def _v1_to_v2(records: list[Record], problems: Problems) -> None:
    taken: set[str] = set()
    ids: list[str] = []
    entries = [value_decoder.decode(record.raw) for record in records]
    for _ in entries:
        entry_id = new_entry_id(taken)
        taken.add(entry_id)
        ids.append(entry_id)
    previous: str | None = None
    for record, entry, entry_id in zip(records, entries, ids, strict=True):
        if not isinstance(entry, dict):
            _chain_non_object(record, entry, entry_id, previous, problems)
            previous = entry_id
            continue
        rebuilt: dict[str, Any] = {"type": entry.get("type"), "id": entry_id, "parentId": previous}
        rebuilt.update((k, v) for k, v in entry.items() if k not in rebuilt)
        index = rebuilt.pop("firstKeptEntryIndex", None)
        if rebuilt["type"] == "compaction" and isinstance(index, int) and 1 <= index <= len(ids):
            # The index counts the file's parsed objects with the header at 0.
            rebuilt["firstKeptEntryId"] = ids[index - 1]
        _rewrite(record, rebuilt)
        previous = entry_id


def _chain_non_object(record: Record, value: Any, entry_id: str, parent: str | None,
                      problems: Problems) -> None:
    """A line that is JSON but no object (one JavaScript takes as true) gets its id and parent
    in memory alone, its text kept: pi 1.6 sets them on an array, and fails on any other value
    (`Cannot create property 'id' on string`), so it cannot open the file at all."""
    record.env = msgspec.structs.replace(record.env, id=entry_id, parent_id=parent)
    if not isinstance(value, list):
        problems.append(Problem(
            "unmigratable", "pi 1.6 cannot open this version 1 file: it fails to give this "
            "line, JSON but neither an object nor an array, an id (pi-lsp reads it as an "
            "entry of no type on the chain)", record.line, entry_id))


def _v2_to_v3(records: list[Record]) -> None:
    for record in records:
        if record.env.type != "message" or b"hookMessage" not in record.raw:
            continue
        entry = object_decoder.decode(record.raw)
        message = entry.get("message")
        if isinstance(message, dict) and message.get("role") == "hookMessage":
            message["role"] = "custom"
            _rewrite(record, entry)
