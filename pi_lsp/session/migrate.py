"""Version 1 and 2 files brought up to version 3 in memory; the file itself is never rewritten."""

from __future__ import annotations

from heapq import merge
from typing import Any

import msgspec

from pi_lsp.session.entries import (
    CURRENT_VERSION,
    envelope_decoder,
    header_decoder,
    loose_envelope_decoder,
)
from pi_lsp.session.ids import new_entry_id
from pi_lsp.session.journal import (
    Problem,
    Problems,
    Record,
    SkippedLine,
    SkippedLines,
    Snapshot,
    repair_line,
    too_deep,
)
from pi_lsp.session.jsontext import encoder, object_decoder, value_decoder


def migrate(snapshot: Snapshot) -> bool:
    """Upgrade the snapshot's records to version 3; returns whether anything changed."""
    version = snapshot.header.version_number()
    # As in pi, NaN (a version that is an object) passes neither test below: nothing runs.
    if not version < CURRENT_VERSION:
        return False
    if version < 2:
        _v1_to_v2(snapshot.records, snapshot.skipped, snapshot.problems)
    _v2_to_v3(snapshot.records)
    header = object_decoder.decode(snapshot.header_raw)
    header["version"] = CURRENT_VERSION
    snapshot.header_raw = encoder.encode(header)
    snapshot.header = header_decoder.decode(snapshot.header_raw)
    return True


def ids_made_up(snapshot: Snapshot) -> bool:
    """Whether the entries' ids are made up in memory (version 1 files hold none): a line
    written that names them could not be matched by a later read, which makes up others."""
    return snapshot.header.version_number() < 2


def _rewrite(record: Record, entry: dict[str, Any]) -> None:
    record.text = msgspec.Raw(encoder.encode(entry))
    try:
        record.env = envelope_decoder.decode(record.text)
    except msgspec.ValidationError:  # a type, id or parentId that is not text, kept as pi keeps it
        record.env = loose_envelope_decoder.decode(record.text).as_pi_reads_it()
    record.disk = None  # a copy of the session is written in its migrated form


def _v1_to_v2(records: list[Record], skipped: SkippedLines, problems: Problems) -> None:
    taken: set[str] = set()
    ids: list[str] = []
    entries = [value_decoder.decode(record.raw) for record in records]
    for _ in entries:
        entry_id = new_entry_id(taken)
        taken.add(entry_id)
        ids.append(entry_id)
    indexed = _indexed_lines(records, ids, skipped)
    previous: str | None = None
    for record, entry, entry_id in zip(records, entries, ids, strict=True):
        if not isinstance(entry, dict):
            _chain_non_object(record, entry, entry_id, previous, problems)
            previous = entry_id
            continue
        rebuilt: dict[str, Any] = {"type": entry.get("type"), "id": entry_id, "parentId": previous}
        rebuilt.update((k, v) for k, v in entry.items() if k not in rebuilt)
        if rebuilt["type"] == "compaction":
            _index_to_id(rebuilt, record.line, indexed)
        _rewrite(record, rebuilt)
        previous = entry_id


def _indexed_lines(records: list[Record], ids: list[str], skipped: SkippedLines
                   ) -> list[tuple[int, str | None]]:
    """The lines pi 1.6 counts in a firstKeptEntryIndex, after the header at 0, with the id each
    is given: every entry and every second header (which it gives none)."""
    entries = ((record.line, entry_id) for record, entry_id in zip(records, ids, strict=True))
    headers = ((line.line, None) for line in skipped if _parsed_by_pi(line))
    return list(merge(entries, headers))


def _parsed_by_pi(line: SkippedLine) -> bool:
    """Whether pi 1.6 keeps a line pi-lsp skipped after the header: a second header, or one
    nested too deep for pi-lsp (which names nothing here)."""
    if line.before_header:
        return False
    if too_deep(line.original):
        return True
    try:
        return isinstance(value_decoder.decode(repair_line(line.original)[0]), dict)
    except msgspec.DecodeError:
        return False


def _index_to_id(compaction: dict[str, Any], line: int,
                 indexed: list[tuple[int, str | None]]) -> None:
    """`firstKeptEntryIndex` made `firstKeptEntryId` as pi 1.6 does: for a number alone (not a
    boolean), indexing JavaScript's way (2.0 is 2), naming only an entry given its id by then."""
    index = compaction.get("firstKeptEntryIndex")
    if not isinstance(index, int | float) or isinstance(index, bool):
        return  # pi leaves it there
    del compaction["firstKeptEntryIndex"]
    if isinstance(index, float):
        if not index.is_integer():
            return
        index = int(index)
    if not 1 <= index <= len(indexed):
        return
    target_line, target_id = indexed[index - 1]
    if target_id is not None and target_line <= line:  # ids are given in file order
        compaction["firstKeptEntryId"] = target_id


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
