"""What `pi.getTree` answers and `pi/sessionChanged` patches: the rows of `session/layout.py`
with what each one says, a version per view, and the change between two versions.

A view asked with `limit` is folded (`session/fold.py`): the current path's last rows and one row
per branch off it carrying the count of rows under it, which `rows_under` hands out a page at a
time; a fork with more branches than the view sends counts the rest on its last one sent, and
`branches_after` hands them out. Only the rows sent are made and described (label, preview): a
100k-entry session costs a walk up its path and a count of its rows, not 100k rows."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import msgspec

from pi_lsp.sequences import shared_ends
from pi_lsp.server.caps import LABEL_CHARS, PREVIEW_CHARS, TIMESTAMP_CHARS, capped
from pi_lsp.session.catalog import tree_title
from pi_lsp.session.fold import fold
from pi_lsp.session.ids import stamp_text
from pi_lsp.session.journal import Record
from pi_lsp.session.layout import (
    Row,
    count_rows,
    drawing_index,
    drawn,
    drawn_ancestors,
    is_shown,
    path_end,
    place,
    rows_below,
    shown_children,
    shown_entry,
)
from pi_lsp.session.outline import entry_preview, record_role
from pi_lsp.session.records import UnknownEntryError, decode_entry, is_leaf_move, parent_of
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
    hidden: int = 0  # rows folded under this one (a branch off the path): `under` fetches them
    more_branches: int = 0  # its fork's branches after it not sent: `after` fetches them
    more_rows: int = 0  # the rows those branches make


class TreeView(msgspec.Struct, rename="camel"):
    version: int  # unique across sessions: a client patches only the version it holds
    leaf_id: str | None
    leaf_row: str | None  # the row marked as the leaf (the leaf, or the row above a hidden one)
    title: str
    entries: int
    nodes: list[Node]
    earlier: int = 0  # rows before the window (a folded view): a larger `limit` shows them


class TreeDelta(msgspec.Struct, rename="camel"):
    """The view at `version` is the one at `base` with `nodes[start:start + delete]` replaced
    by `rows`."""

    base: int
    version: int
    leaf_id: str | None
    leaf_row: str | None
    title: str
    entries: int
    earlier: int
    start: int
    delete: int
    rows: list[Node]


class RowsUnder(msgspec.Struct, rename="camel"):
    """A page of the rows folded under `under`, in drawing order."""

    under: str
    start: int
    total: int
    nodes: list[Node]


class BranchesAfter(msgspec.Struct, rename="camel"):
    """A page of the branches after the row `after` under its fork (up to the current path),
    each folded: of the last branch a view sends, the ones it left out."""

    after: str
    start: int
    total: int
    rows: int  # the rows all `total` branches make
    nodes: list[Node]


class NotARowError(UnknownEntryError):
    def __str__(self) -> str:
        return f"no row with id {self.args[0]!r} in this session's tree"


def splice(old: Sequence[T], new: Sequence[T]) -> tuple[int, int, list[T]]:
    """Where `new` differs from `old`: the first index, how many of `old` go, what comes."""
    start, end = shared_ends(old, new)
    return start, len(old) - start - end, list(new[start:len(new) - end])


Parts = tuple[str, str | None, str]  # type, role, preview: fixed per line
# records, count, leaf, bookkeeping, limit, and the path's end: an id-less leaf moves it with
# neither records nor the leaf id changing
State = tuple[int, int, str | None, bool, int | None, str | None]


@dataclass
class HeldView:
    """One session's last view and its entries' fixed parts (in its `OpenSession`)."""

    parts: dict[int, Parts] = field(default_factory=dict)
    state: State | None = None
    view: TreeView | None = None
    cut: Record | None = None  # the entry the folded view's window starts at, kept while it grows


class TreeViews:
    """Builds and patches views; numbers them across sessions."""

    def __init__(self) -> None:
        self._versions = itertools.count(1)

    def view(self, held: HeldView, tree: SessionTree, bookkeeping: bool = False,
             limit: int | None = None) -> TreeView:
        state = _state(tree, bookkeeping, limit)
        if held.view is not None and held.state == state:
            return held.view
        grown = self._grown(held, tree, bookkeeping, limit)
        if grown is None:
            same_kind = held.state is not None and held.state[3:5] == (bookkeeping, limit)
            grown = self._build(held, tree, bookkeeping, limit,
                                _kept_cut(held, tree) if same_kind else None)
        held.state, held.view = state, grown
        return held.view

    @staticmethod
    def current(held: HeldView, tree: SessionTree, bookkeeping: bool, limit: int | None
                ) -> bool:
        """Whether the view held is the one asked for of the tree as it is: nothing to build."""
        return held.view is not None and held.state == _state(tree, bookkeeping, limit)

    def delta(self, held: HeldView, tree: SessionTree) -> TreeDelta | None:
        """The change to the view last built (of its kind and length) since; None when there
        is none to give. A client holding another version fetches again."""
        if held.view is None or held.state is None:
            return None
        old = held.view
        new = self.view(held, tree, held.state[3], held.state[4])
        if new is old:
            return None
        start, delete, rows = splice(old.nodes, new.nodes)
        return TreeDelta(old.version, new.version, new.leaf_id, new.leaf_row, new.title,
                         new.entries, new.earlier, start, delete, rows)

    def rows_under(self, held: HeldView, tree: SessionTree, under: str, start: int,
                   limit: int, bookkeeping: bool = False) -> RowsUnder:
        """The rows `limit` at a time from `start` that hang under the row `under` (a folded
        branch) in the tree as drawn with or without `bookkeeping` rows."""
        sent = self._sent(held, tree, bookkeeping)
        row = place(tree, under, bookkeeping, _places(sent))
        if row is None:
            raise NotARowError(under)
        index, _loose = drawing_index(tree)
        below = rows_below(index, row, bookkeeping)
        page = list(itertools.islice(drawn(index, below, bookkeeping), start, start + limit))
        # Nothing under a row sent off the path is on it (no walk up a 100k-entry path).
        node = sent.get(under)
        on_path = _path_below(tree, under) if node is None or node.on_path else set()
        return RowsUnder(under, start, count_rows(index, [row.record], bookkeeping) - 1,
                         [self._node(held.parts, tree, row, 0, row.record.env.id in on_path)
                          for row in page])

    def branches_after(self, held: HeldView, tree: SessionTree, after: str, start: int,
                       limit: int, bookkeeping: bool = False) -> BranchesAfter:
        """The branches `limit` at a time from `start` that follow the row `after` (off the
        current path) under its fork or among the roots, up to the current path's."""
        sent = self._sent(held, tree, bookkeeping)
        row = place(tree, after, bookkeeping, _places(sent))
        # A row sent is one off a path row sent, which is the path's next row among its fork's.
        on_path = {entry_id for entry_id, node in sent.items() if node.on_path} \
            if after in sent else set(tree.path_ids(tree.leaf_id))
        if row is None or after in on_path:
            raise NotARowError(after)
        index, loose = drawing_index(tree)
        above = next((record for record in
                      itertools.islice(drawn_ancestors(tree, after, loose), 1, None)
                      if is_shown(record, bookkeeping)), None)
        siblings = shown_children(index, above.env.id if above else None, bookkeeping)
        at = next((n for n, record in enumerate(siblings) if record is row.record), None)
        if at is None:  # (placed, it is among them; guarded all the same)
            raise NotARowError(after)
        rest = list(itertools.takewhile(lambda record: record.env.id not in on_path,
                                        siblings[at + 1:]))
        return BranchesAfter(after, start, len(rest),
                             count_rows(index, rest, bookkeeping), [
            self._node(held.parts, tree, Row(record, row.depth, row.head),
                       count_rows(index, [record], bookkeeping) - 1, False)
            for record in rest[start:start + limit]])

    def _sent(self, held: HeldView, tree: SessionTree, bookkeeping: bool) -> dict[str, Node]:
        """The rows of the view last shown (brought up to date), when it is of this kind."""
        if held.state is None or held.state[3] != bookkeeping:
            return {}
        return {node.id: node for node in self.view(held, tree, bookkeeping,
                                                    held.state[4]).nodes}

    def _grown(self, held: HeldView, tree: SessionTree, bookkeeping: bool, limit: int | None
               ) -> TreeView | None:
        """The view after entries were appended one under the other below the leaf, when the
        leaf's row ends its branch: the old rows with the new ones after it, without folding
        the tree again (a turn streaming into a 100k-entry session). None otherwise."""
        old, state = held.view, held.state
        if old is None or state is None or state[0] != id(tree.records) or \
                state[3:5] != (bookkeeping, limit) or old.leaf_row is None or \
                len(tree.by_id) != len(tree.records):  # a reused id replaces an older entry
            return None
        shown_at = next((n for n in range(len(old.nodes) - 1, -1, -1)
                         if old.nodes[n].id == old.leaf_row), None)
        added = tree.records[state[1]:]
        if shown_at is None or not _chain_below(tree, state[2], added):
            return None
        new = [record for record in added if is_shown(record, bookkeeping)]
        index = tree.children_index()
        if shown_children(index, old.leaf_row, bookkeeping) != new[:1]:
            return None  # the leaf's row has other rows under it: the new entries make a fork
        depth = old.nodes[shown_at].depth
        nodes = [self._node(held.parts, tree, Row(record, depth, False), 0, True)
                 for record in new]
        return TreeView(next(self._versions), tree.shown_leaf(),
                        new[-1].env.id if new else old.leaf_row, tree_title(tree),
                        len(tree.records), [*old.nodes[:shown_at + 1], *nodes,
                                            *old.nodes[shown_at + 1:]], old.earlier)

    @staticmethod
    def _node(parts: dict[int, Parts], tree: SessionTree, row: Row, hidden: int,
              on_path: bool, more: int = 0, more_rows: int = 0) -> Node:
        record = row.record
        entry_id = record.env.id or ""
        fixed = parts.get(record.line)
        if fixed is None:
            fixed = parts[record.line] = (
                "leaf" if is_leaf_move(record) else record.env.type, record_role(record),
                capped(entry_preview(decode_entry(record)), PREVIEW_CHARS))
        kind, role, preview = fixed
        # Not fixed: a parent that comes later in the file is no parent until it comes.
        parent = record.env.parent_id
        parent = parent if parent != entry_id and parent in tree.by_id else None
        label = capped(tree.label(entry_id), LABEL_CHARS)
        return Node(entry_id, parent, row.depth, row.head, kind, role, preview, label,
                    capped(stamp_text(record.env.timestamp), TIMESTAMP_CHARS), on_path, hidden,
                    more, more_rows)

    def _build(self, held: HeldView, tree: SessionTree, bookkeeping: bool, limit: int | None,
               cut: str | None) -> TreeView:
        folded = fold(tree, bookkeeping, limit, cut)
        held.cut = tree.by_id.get(folded.cut) if folded.cut is not None else None
        nodes = [self._node(held.parts, tree, row, hidden, on_path, more, more_rows)
                 for row, hidden, on_path, more, more_rows in folded.shown]
        return TreeView(next(self._versions), tree.shown_leaf(),
                        shown_entry(tree, tree.leaf_id, bookkeeping), tree_title(tree),
                        len(tree.records), nodes, folded.earlier)


def _state(tree: SessionTree, bookkeeping: bool, limit: int | None) -> State:
    return (id(tree.records), len(tree.records), tree.leaf_id, bookkeeping, limit,
            path_end(tree))


def _kept_cut(held: HeldView, tree: SessionTree) -> str | None:
    """Where the held window starts while that is the same entry: an id written again (a merged
    or hand-edited file) is another row elsewhere, and the window is folded anew."""
    cut = held.cut
    return cut.env.id if cut is not None and tree.by_id.get(cut.env.id or "") is cut else None


def _places(sent: dict[str, Node]) -> dict[str, tuple[int, bool]]:
    """Where rows sent are: a row's place is found by walking up to one, not to the top."""
    return {entry_id: (node.depth, node.head) for entry_id, node in sent.items()}


def _chain_below(tree: SessionTree, tip: str | None, added: list[Record]) -> bool:
    """Whether the appended entries hang one under the other below `tip`, the last one the
    leaf, none of them a marker or the parent of an entry read before it (taken in under it)."""
    for at, record in enumerate(added):
        if record.env.type in MARKERS or parent_of(record) != tip:
            return False
        tip = record.env.id
        if tree.children(tip or "") != added[at + 1:at + 2]:  # its one child is the next
            return False
    return tip == tree.leaf_id


def _path_below(tree: SessionTree, top: str) -> set[str]:
    """The current path's entries below `top` (the path the tree keeps); none when `top` is
    not on it."""
    path = tree.path_ids(tree.leaf_id)
    return set(path[path.index(top) + 1:]) if top in path else set()
