"""Forking: a new session file holding one root-to-leaf path of another, ids unchanged."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec

from pi_lsp.paths import real_path
from pi_lsp.session.entries import CompactionEntry, LabelEntry
from pi_lsp.session.ids import new_entry_id
from pi_lsp.session.journal import Record, written_id
from pi_lsp.session.jsontext import Decoder, js_json, js_truthy, object_decoder, stringify
from pi_lsp.session.records import decode_entry
from pi_lsp.session.tree import SessionTree


def leaf_fork_refusal(tree: SessionTree) -> str | None:
    """Why no fork can end at the leaf, whose line has no text id pi-lsp can name: pi 1.6 finds
    no path at one with no id or "", and forks at 5 or true, which pi-lsp cannot name."""
    line = tree.idless_leaf_line()
    if line is None:
        return None
    held = written_id(line)
    what = f"the id {stringify(held)}, which is not text" if held is not msgspec.UNSET and \
        js_truthy(held) else "no id"
    return f"the leaf (line {line.line}) has {what}, so no fork can end there"


def fork_lines(source: SessionTree, leaf_id: str) -> list[bytes]:
    """The entry lines of the fork: the path without its labels, then its labels re-emitted.
    A line that is no object (on a version 1 file's chain) is left out too: it can name no
    parent, and gives no context.

    References to a dropped line are moved to the entries around it: parents to the entry
    before it, a compaction's first kept entry to the entry after it.
    """
    path = source.path_to(leaf_id)
    kept = [record for record in path if not _dropped(record)]
    kept_ids = [record.env.id or "" for record in kept]
    after: dict[str, str | None] = {}
    waiting: list[str] = []
    for record in path:
        entry_id = record.env.id or ""
        if _dropped(record):
            waiting.append(entry_id)
            continue
        for dropped in waiting:
            after[dropped] = entry_id
        waiting = []
    lines: list[bytes] = []
    for index, record in enumerate(kept):
        lines.append(relinked(record, kept_ids[index - 1] if index else None, after))
    on_path, taken = set(kept_ids), set(kept_ids)
    tail = kept_ids[-1] if kept_ids else None
    # In pi 1.6's order: the order the labels were set in (one cleared and set again goes last)
    for target, label in list(source.labels.items()):
        if target not in on_path:
            continue
        label_id = new_entry_id(taken)
        taken.add(label_id)
        # pi 1.6 keeps the time the label was set, as the entry that set it holds it
        lines.append(js_json(LabelEntry(
            id=label_id, parent_id=tail, timestamp=source.label_stamps[target], target_id=target,
            label=label,
        )))
        tail = label_id
    return lines


def _dropped(record: Record) -> bool:
    """A label (re-emitted after the path) or a line that is JSON but no object."""
    return record.env.type == "label" or non_object(record)


def non_object(record: Record) -> bool:
    """A line that is JSON but no object: with an id only on a version 1 file's chain."""
    return not record.raw.lstrip().startswith(b"{")


class _WrittenParent(msgspec.Struct, rename="camel"):
    parent_id: Any = msgspec.UNSET  # as written, of any type; UNSET: no key


_written_parent_decoder: Decoder[_WrittenParent] = Decoder(_WrittenParent)


def relinked(record: Record, parent: str | None, after: dict[str, str | None]) -> bytes:
    """The record's line, rewritten only where its `parentId` is not `parent`: it points at a
    dropped label or a cycle, or it is the root and holds no null (pi 1.6 writes the fork's
    root with `"parentId":null`, also over a missing parent, a number or no key at all)."""
    written = _written_parent_decoder.decode(record.text).parent_id
    changes: dict[str, str | None] = {} if written == parent else {"parentId": parent}
    entry = decode_entry(record)
    if isinstance(entry, CompactionEntry) and isinstance(entry.first_kept_entry_id, str) and \
            entry.first_kept_entry_id in after:
        changes["firstKeptEntryId"] = after[entry.first_kept_entry_id]
    if not changes:
        return record.original
    fields = object_decoder.decode(record.raw)
    fields.update(changes)
    return js_json(fields)  # as pi writes the entry: JSON.stringify's numbers


def fork_cwd(source: SessionTree, own: str) -> str:
    """The cwd pi 1.6 writes in a fork (createBranchedSession's `this.cwd`): the source's,
    resolved from the cwd pi runs in, which stands for one that is empty or not text."""
    return os.path.join(own, source.header.known_cwd())  # (made real as every header's is)


def fork_session(source: SessionTree, leaf_id: str, directory: Path | None = None,
                 cwd: str | None = None) -> SessionTree:
    """The fork, next to the source (or in `directory`), run from `cwd` (this process's by
    default). As in pi 1.6, its file is written only if the path holds a user or assistant
    message; otherwise it waits, in memory, for one."""
    source.record(leaf_id)
    target_dir = directory or real_path(source.path).parent
    target_dir.mkdir(parents=True, exist_ok=True)
    fork = SessionTree.create_in(target_dir, fork_cwd(source, cwd or os.getcwd()),
                                 parent_session=str(real_path(source.path)), deferred=True)
    fork.take_lines(fork_lines(source, leaf_id))
    return fork
