"""What `pi.getTree` answers and `pi/sessionChanged` patches: the rows of `session/layout.py`
with what each one says, a version per view, and the change between two versions."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import msgspec

from pi_lsp.server.cache import LruCache
from pi_lsp.session.catalog import tree_title
from pi_lsp.session.layout import layout, shown_entry
from pi_lsp.session.outline import entry_preview, record_role
from pi_lsp.session.tree import SessionTree, decode_entry

MAX_VIEWS = 8
T = TypeVar("T")


class Node(msgspec.Struct, rename="camel"):
    id: str
    parent_id: str | None
    depth: int
    head: bool
    type: str
    role: str | None
    preview: str
    label: str | None
    timestamp: str | None
    on_path: bool


class TreeView(msgspec.Struct, rename="camel"):
    version: int  # unique across sessions: a client patches only the version it holds
    leaf_id: str | None
    leaf_row: str | None  # the row marked as the leaf (the leaf, or the row above a hidden one)
    title: str
    entries: int
    nodes: list[Node]


class TreeDelta(msgspec.Struct, rename="camel"):
    """The default view at `version` is the one at `base` with `nodes[start:start + delete]`
    replaced by `rows`."""

    base: int
    version: int
    leaf_id: str | None
    leaf_row: str | None
    title: str
    entries: int
    start: int
    delete: int
    rows: list[Node]


def splice(old: Sequence[T], new: Sequence[T]) -> tuple[int, int, list[T]]:
    """Where `new` differs from `old`: the first index, how many of `old` go, what comes."""
    limit = min(len(old), len(new))
    start = 0
    while start < limit and old[start] == new[start]:
        start += 1
    end = 0
    while end < limit - start and old[-1 - end] == new[-1 - end]:
        end += 1
    return start, len(old) - start - end, list(new[start:len(new) - end])


Parts = tuple[str | None, str, str | None, str]  # parent, type, role, preview: fixed per line


@dataclass
class _Held:
    parts: dict[int, Parts] = field(default_factory=dict)
    state: tuple[int, int, str | None, bool] | None = None
    view: TreeView | None = None


class TreeViews:
    """The last view of each recently shown session, and each entry's fixed parts."""

    def __init__(self) -> None:
        self._held: LruCache[Path, _Held] = LruCache(MAX_VIEWS)
        self._versions = itertools.count(1)

    def drop(self, key: Path, parts: bool = True) -> None:
        """Forget a session's view (and, unless `parts` is false, what its lines said)."""
        held = self._held.get(key)
        if held is not None and not parts:
            held.state = held.view = None
        else:
            self._held.pop(key)

    def view(self, key: Path, tree: SessionTree, bookkeeping: bool = False) -> TreeView:
        held = self._held.get(key)
        if held is None:
            held = _Held()
            self._held.put(key, held)
        state = (id(tree.records), len(tree.records), tree.leaf_id, bookkeeping)
        if held.view is not None and held.state == state:
            return held.view
        held.state, held.view = state, self._build(held.parts, tree, bookkeeping)
        return held.view

    def delta(self, key: Path, tree: SessionTree) -> TreeDelta | None:
        """The change to the default view since it was last built; None when there is none
        to give (no view shown, or the other kind): clients then fetch the tree again."""
        held = self._held.get(key)
        if held is None or held.view is None or held.state is None or held.state[3]:
            return None
        old = held.view
        new = self.view(key, tree)
        if new is old:
            return None
        start, delete, rows = splice(old.nodes, new.nodes)
        return TreeDelta(old.version, new.version, new.leaf_id, new.leaf_row, new.title,
                         new.entries, start, delete, rows)

    def _build(self, parts: dict[int, Parts], tree: SessionTree, bookkeeping: bool) -> TreeView:
        on_path = set(tree.path_ids(tree.leaf_id))
        nodes = []
        for row in layout(tree, bookkeeping):
            record = row.record
            entry_id = record.env.id or ""
            fixed = parts.get(record.line)
            if fixed is None:
                parent = record.env.parent_id
                fixed = parts[record.line] = (
                    parent if parent in tree.by_id and parent != entry_id else None,
                    record.env.type, record_role(record), entry_preview(decode_entry(record)))
            parent, kind, role, preview = fixed
            nodes.append(Node(entry_id, parent, row.depth, row.head, kind, role, preview,
                              tree.label(entry_id), record.env.timestamp, entry_id in on_path))
        return TreeView(next(self._versions), tree.leaf_id,
                        shown_entry(tree, tree.leaf_id, bookkeeping), tree_title(tree),
                        len(tree.records), nodes)
