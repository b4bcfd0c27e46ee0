"""Forking: a new session file holding one root-to-leaf path of another, ids unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from pi_lsp.session.entries import LabelEntry, SessionHeader, encoder
from pi_lsp.session.ids import iso_now, new_entry_id, new_session_id
from pi_lsp.session.journal import append_lines
from pi_lsp.session.tree import SessionTree, parent_of

_dict_decoder = msgspec.json.Decoder(dict[str, Any])


def session_file_name(session_id: str, timestamp: str) -> str:
    """pi's file name: the creation time with `:` and `.` made `-`, then the session id."""
    return f"{timestamp.replace(':', '-').replace('.', '-')}_{session_id}.jsonl"


def _relinked(raw: bytes, parent_id: str | None) -> bytes:
    entry = _dict_decoder.decode(raw)
    entry["parentId"] = parent_id
    return encoder.encode(entry)


def fork_lines(source: SessionTree, leaf_id: str) -> list[bytes]:
    """The entry lines of the fork: the path without its labels, then the labels re-emitted."""
    lines: list[bytes] = []
    kept: list[str] = []
    previous: str | None = None
    for record in source.path_to(leaf_id):
        if record.env.type == "label":
            continue
        entry_id = record.env.id
        assert entry_id is not None
        if parent_of(record) == previous or (previous is None and source.is_root(record)):
            lines.append(record.raw)
        else:
            # Its parent was a dropped label: hang it on the entry kept before it.
            lines.append(_relinked(record.raw, previous))
        kept.append(entry_id)
        previous = entry_id
    taken = set(kept)
    for target in kept:
        label = source.label(target)
        if label is None:
            continue
        label_id = new_entry_id(taken)
        taken.add(label_id)
        lines.append(encoder.encode(LabelEntry(
            id=label_id, parent_id=previous, timestamp=iso_now(), target_id=target, label=label,
        )))
        previous = label_id
    return lines


def fork_session(source: SessionTree, leaf_id: str, directory: Path | None = None) -> Path:
    """Write the fork next to the source (or into `directory`) and return its path."""
    source.record(leaf_id)
    header = SessionHeader(
        version=3, id=new_session_id(), timestamp=iso_now(), cwd=source.header.cwd,
        parent_session=str(Path(source.path).resolve()),
    )
    target_dir = directory or Path(source.path).resolve().parent
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / session_file_name(header.id, header.timestamp)
    append_lines(str(target), [encoder.encode(header), *fork_lines(source, leaf_id)], create=True)
    return target
