"""Version 1 and 2 files brought up to version 3 in memory; the file itself is never rewritten."""

from __future__ import annotations

from typing import Any

import msgspec

from pi_lsp.session.entries import CURRENT_VERSION, envelope_decoder, header_decoder
from pi_lsp.session.ids import new_entry_id
from pi_lsp.session.journal import Record, Snapshot
from pi_lsp.session.jsontext import encoder, object_decoder


def migrate(snapshot: Snapshot) -> bool:
    """Upgrade the snapshot's records to version 3; returns whether anything changed."""
    version = snapshot.header.version or 1
    if version >= CURRENT_VERSION:
        return False
    if version < 2:
        _v1_to_v2(snapshot.records)
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
    record.env = envelope_decoder.decode(record.text)
    record.disk = None  # a copy of the session is written in its migrated form


def _v1_to_v2(records: list[Record]) -> None:
    taken: set[str] = set()
    ids: list[str] = []
    entries = [object_decoder.decode(record.raw) for record in records]
    for _ in entries:
        entry_id = new_entry_id(taken)
        taken.add(entry_id)
        ids.append(entry_id)
    previous: str | None = None
    for record, entry, entry_id in zip(records, entries, ids, strict=True):
        rebuilt: dict[str, Any] = {"type": entry.get("type"), "id": entry_id, "parentId": previous}
        rebuilt.update((k, v) for k, v in entry.items() if k not in rebuilt)
        index = rebuilt.pop("firstKeptEntryIndex", None)
        if rebuilt["type"] == "compaction" and isinstance(index, int) and 1 <= index <= len(ids):
            # The index counts the file's parsed objects with the header at 0.
            rebuilt["firstKeptEntryId"] = ids[index - 1]
        _rewrite(record, rebuilt)
        previous = entry_id


def _v2_to_v3(records: list[Record]) -> None:
    for record in records:
        if record.env.type != "message" or b"hookMessage" not in record.raw:
            continue
        entry = object_decoder.decode(record.raw)
        message = entry.get("message")
        if isinstance(message, dict) and message.get("role") == "hookMessage":
            message["role"] = "custom"
            _rewrite(record, entry)
