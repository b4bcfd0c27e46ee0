"""What `pi.getTree` answers and `pi/sessionChanged` patches: the rows of `session/layout.py`
with what each one says, a version per view, and the change between two versions."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import msgspec

from pi_lsp.session.catalog import tree_title
from pi_lsp.session.journal import Record
from pi_lsp.session.layout import is_shown, layout, shown_entry
from pi_lsp.session.outline import entry_preview, record_role
from pi_lsp.session.records import decode_entry, is_leaf_move, parent_of
from pi_lsp.session.tree import SessionTree

# Entries that change other rows (labels, the title) or move the leaf: no growing past them.
MARKERS = frozenset({"label", "session_info", "leaf", "custom"})
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
class HeldView:
    """One session's last view and its entries' fixed parts (kept in its `OpenSession`)."""

    parts: dict[int, Parts] = field(default_factory=dict)
    state: tuple[int, int, str | None, bool] | None = None
    view: TreeView | None = None


class TreeViews:
    """Builds and patches views; numbers them across sessions."""

    def __init__(self) -> None:
        self._versions = itertools.count(1)

    def view(self, held: HeldView, tree: SessionTree, bookkeeping: bool = False) -> TreeView:
        state = (id(tree.records), len(tree.records), tree.leaf_id, bookkeeping)
        if held.view is not None and held.state == state:
            return held.view
        grown = self._grown(held, tree, bookkeeping)
        held.state, held.view = state, grown or self._build(held.parts, tree, bookkeeping)
        return held.view

    def delta(self, held: HeldView, tree: SessionTree) -> TreeDelta | None:
        """The change to the default view since it was last built; None when there is none
        to give (no view shown, or the other kind): clients then fetch the tree again."""
        if held.view is None or held.state is None or held.state[3]:
            return None
        old = held.view
        new = self.view(held, tree)
        if new is old:
            return None
        start, delete, rows = splice(old.nodes, new.nodes)
        return TreeDelta(old.version, new.version, new.leaf_id, new.leaf_row, new.title,
                         new.entries, start, delete, rows)

    def _grown(self, held: HeldView, tree: SessionTree, bookkeeping: bool) -> TreeView | None:
        """The view after entries were appended one under the other below the leaf, when the
        leaf's row ends its branch: the old rows with the new ones after it, without laying
        the whole tree out again (a turn streaming into a 100k-entry session). None otherwise."""
        old, state = held.view, held.state
        if old is None or state is None or state[0] != id(tree.records) or \
                state[3] != bookkeeping or old.leaf_row is None or \
                len(tree.by_id) != len(tree.records):  # a reused id replaces an older entry
            return None
        at = next((i for i, node in enumerate(old.nodes) if node.id == old.leaf_row), None)
        if at is None:
            return None
        row = old.nodes[at]
        after = old.nodes[at + 1] if at + 1 < len(old.nodes) else None
        if after is not None and (after.depth > row.depth or
                                  (after.depth == row.depth and not after.head)):
            return None  # the leaf's row has children: the new entries make a fork
        tip = state[2]
        leaf_row: str | None = old.leaf_row
        rows: list[Node] = []
        for record in tree.records[state[1]:]:
            if record.env.type in MARKERS or parent_of(record) != tip:
                return None
            tip = record.env.id
            if is_shown(record, bookkeeping):
                rows.append(self._node(held.parts, tree, record, row.depth, False, True))
                leaf_row = tip
        if tip != tree.leaf_id:
            return None
        return TreeView(next(self._versions), tree.shown_leaf(), leaf_row, tree_title(tree),
                        len(tree.records), [*old.nodes[:at + 1], *rows, *old.nodes[at + 1:]])

    @staticmethod
    def _node(parts: dict[int, Parts], tree: SessionTree, record: Record, depth: int,
              head: bool, on_path: bool) -> Node:
        entry_id = record.env.id or ""
        fixed = parts.get(record.line)
        if fixed is None:
            parent = record.env.parent_id
            fixed = parts[record.line] = (
                parent if parent in tree.by_id and parent != entry_id else None,
                "leaf" if is_leaf_move(record) else record.env.type, record_role(record),
                entry_preview(decode_entry(record)))
        parent, kind, role, preview = fixed
        return Node(entry_id, parent, depth, head, kind, role, preview, tree.label(entry_id),
                    record.env.timestamp, on_path)

    def _build(self, parts: dict[int, Parts], tree: SessionTree, bookkeeping: bool) -> TreeView:
        on_path = set(tree.path_ids(tree.leaf_id))
        nodes = [self._node(parts, tree, row.record, row.depth, row.head,
                            row.record.env.id in on_path) for row in layout(tree, bookkeeping)]
        return TreeView(next(self._versions), tree.shown_leaf(),
                        shown_entry(tree, tree.leaf_id, bookkeeping), tree_title(tree),
                        len(tree.records), nodes)
