"""The folded tree view, made by walking up from the leaf, against the reference it replaced:
the whole layout, then folded; and every path the tree keeps against a fresh walk. On random
trees (reused ids, parents that come later in the file, cycles, rows that are no rows), before
and after entries are appended to a view."""

from __future__ import annotations

import gc
import itertools
import json
from functools import cmp_to_key
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pi_lsp.server.treeview import HeldView, Node, NotARowError, TreeView, TreeViews
from pi_lsp.session import fold as fold_module
from pi_lsp.session.appender import append_lines
from pi_lsp.session.fold import Folded, fold
from pi_lsp.session.ids import iso_to_ms
from pi_lsp.session.journal import Record
from pi_lsp.session.layout import Row, is_shown
from pi_lsp.session.records import LEAF_MOVE, parent_of
from pi_lsp.session.tree import SessionTree

SETTINGS = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])
HEADER = {"type": "session", "version": 3, "id": "11111111-2222-3333-4444-555555555555",
          "timestamp": "2026-12-01T00:00:00.000Z", "cwd": "/w"}
IDS = [f"{n:08x}" for n in range(1, 13)]  # few: ids are reused, parents come later
NEW = "new"  # an id of its own
CHAIN = "chain"  # the parent is the line before (the leaf, for the first line appended)
KINDS = ["message", "message", "message", "usage", "context_edit", "leaf_move", "leaf",
         "model_change", "custom", "label", "session_info"]
STAMPS = [None, "2026-12-01T00:00:01.000Z", "2026-12-01T00:00:02.000Z",
          "2026-12-01T00:00:02.500Z", "unreadable"]
_counter = itertools.count(0x1000)  # new ids, apart from IDS

Line = tuple[str, str, str | None, str | None]  # kind, id, parent (or CHAIN), timestamp
# id, depth, head, hidden, on path, branches left out after it, the rows they make
Item = tuple[str, int, bool, int, bool, int, int]
Drawn = tuple[list[Item], int, str | None]

line = st.tuples(st.sampled_from(KINDS), st.just(NEW) | st.just(NEW) | st.sampled_from(IDS),
                 st.one_of(st.none(), st.just(CHAIN), st.just(CHAIN), st.sampled_from(IDS)),
                 st.sampled_from(STAMPS))
turn = st.tuples(st.sampled_from(["message", "message", "usage"]), st.just(NEW), st.just(CHAIN),
                 st.sampled_from(STAMPS))  # a turn streaming in under the leaf
move = st.none() | st.just("") | st.sampled_from(IDS)  # None: stays, "": no leaf
move = st.none() | move  # mostly stays: views grow
unders = st.lists(st.tuples(st.sampled_from(IDS), st.integers(0, 4), st.integers(1, 5)),
                  max_size=3)


# -- the reference: the whole layout, then folded (pi-lsp's tree view before issue 19) -----

def _difference(a: Record, b: Record) -> float:
    first, second = iso_to_ms(a.env.timestamp), iso_to_ms(b.env.timestamp)
    return float("nan") if first is None or second is None else first - second


def reference_index(tree: SessionTree) -> dict[str | None, list[Record]]:
    index: dict[str | None, list[Record]] = {}
    for record in tree.by_id.values():
        parent = parent_of(record)
        index.setdefault(parent if parent in tree.by_id else None, []).append(record)
    for key, siblings in index.items():
        siblings.sort(key=lambda r: r.line)
        if key is not None:  # pi's comparator: an unreadable stamp (NaN) equals every other
            siblings.sort(key=cmp_to_key(_difference))
    return index


def reference_drawing(tree: SessionTree) -> dict[str | None, list[Record]]:
    """The index as drawn: when a loop of parent links ends the walk up from the leaf, the
    walk's top is drawn as a root, so the current path shows."""
    index = reference_index(tree)
    walked = reference_path_ids(tree, tree.leaf_id) if tree.leaf_id is not None else []
    top = tree.by_id[walked[0] or ""] if walked else None
    parent = parent_of(top) if top is not None else None
    if top is None or parent not in tree.by_id:
        return index
    index[parent] = [record for record in index[parent] if record is not top]
    if not index[parent]:
        del index[parent]
    index[None] = sorted([*index.get(None, []), top], key=lambda r: r.line)
    return index


def reference_path(tree: SessionTree) -> set[str | None]:
    seen: set[str | None] = set()
    record = tree.by_id.get(tree.leaf_id) if tree.leaf_id is not None else None
    while record is not None and record.env.id not in seen:
        seen.add(record.env.id)
        parent = parent_of(record)
        record = tree.by_id.get(parent) if parent is not None else None
    return seen


def reference_path_ids(tree: SessionTree, leaf: str) -> list[str | None]:
    walked: list[str | None] = []
    record = tree.by_id.get(leaf)
    while record is not None and record.env.id not in walked:
        walked.append(record.env.id)
        parent = parent_of(record)
        record = tree.by_id.get(parent) if parent is not None else None
    return walked[::-1]


def check_paths(tree: SessionTree) -> None:
    """Every entry's path, then the leaf's (kept for the entries a turn appends under it)."""
    for entry_id in [*tree.by_id, tree.leaf_id]:
        if entry_id is not None:
            assert tree.path_ids(entry_id) == reference_path_ids(tree, entry_id)


def reference_layout(index: dict[str | None, list[Record]], bookkeeping: bool) -> list[Row]:
    def shown_children(parent: str | None) -> list[Record]:
        found: list[Record] = []
        stack = list(reversed(index.get(parent, [])))
        while stack:
            record = stack.pop()
            if is_shown(record, bookkeeping):
                found.append(record)
            else:
                stack.extend(reversed(index.get(record.env.id, [])))
        return found

    roots = shown_children(None)
    stack = [Row(root, 0, len(roots) > 1) for root in reversed(roots)]
    rows: list[Row] = []
    while stack:
        row = stack.pop()
        rows.append(row)
        children = shown_children(row.record.env.id)
        if len(children) == 1:
            stack.append(Row(children[0], row.depth, False))
        else:
            stack.extend(Row(child, row.depth + 1, True) for child in reversed(children))
    return rows


def branch_end(rows: list[Row], at: int) -> int:
    depth = rows[at].depth
    end = at + 1
    while end < len(rows) and (rows[end].depth > depth or
                               (rows[end].depth == depth and not rows[end].head)):
        end += 1
    return end


def reference_fold(rows: list[Row], on_path: set[str | None], keep: int | None,
                   cut: str | None) -> Drawn:
    if keep is None:
        return [(row.record.env.id or "", row.depth, row.head, 0, row.record.env.id in on_path,
                 0, 0) for row in rows], 0, None
    items: list[tuple[int, int, int]] = []
    last_at_depth: dict[int, int] = {}
    ordinal = at = 0
    while at < len(rows):
        row = rows[at]
        if row.record.env.id in on_path:
            last_at_depth[row.depth] = ordinal
            items.append((at, 0, ordinal))
            ordinal += 1
            at += 1
            continue
        end = branch_end(rows, at)
        # Another root hangs off the path's top row (ordinal 0): shown once the window has it.
        anchor = 0 if row.depth == 0 and row.head else \
            last_at_depth.get(row.depth - 1 if row.head else row.depth, -1)
        items.append((at, end - at - 1, anchor))
        at = end
    paths = [item for item in items if rows[item[0]].record.env.id in on_path]
    first = max(0, len(paths) - keep)
    # From `cut` when it is one of the path's last 2 * keep rows and leaves at least half of
    # `keep` (a window kept at its start after a move up may be shorter than `keep`).
    from_leaf = [rows[at].record.env.id for at, _hidden, _anchor in reversed(paths)]
    if cut is not None and cut in from_leaf[:2 * keep]:
        kept = from_leaf.index(cut) + 1
        if kept >= keep // 2:
            first = len(paths) - kept
    # No path row (no leaf, or a hidden one): the roots, each folded.
    shown = [item for item in items if item[2] >= first or not paths]
    earlier = len(rows) - sum(1 + hidden for _at, hidden, _anchor in shown)

    # A fork's branches: a run of off-path heads at one depth off one path row (a chain going
    # on past the leaf is one of its own). The budget goes to the forks nearest the leaf
    # first (the other roots last), one branch each at least.
    forks: list[list[int]] = []
    for n, (at, _hidden, anchor) in enumerate(shown):
        if rows[at].record.env.id in on_path:
            continue
        if forks and forks[-1][-1] == n - 1 and shown[n - 1][2] == anchor and \
                rows[shown[n - 1][0]].depth == rows[at].depth and \
                rows[shown[n - 1][0]].head and rows[at].head:
            forks[-1].append(n)
        else:
            forks.append([n])
    def nearness(branches: list[int]) -> int:
        at, _hidden, anchor = shown[branches[0]]
        return -1 if rows[at].depth == 0 and rows[at].head else anchor

    left, cut_off, more = fold_module.BRANCH_ROWS, set(), {}
    for branches in sorted(forks, key=lambda branches: -nearness(branches)):
        take = min(len(branches), max(1, left))
        left = max(0, left - take)
        cut_off.update(branches[take:])
        if take < len(branches):
            more[branches[take - 1]] = branches[take:]

    def item(n: int) -> Item:
        at, hidden, _anchor = shown[n]
        rest = more.get(n, [])
        return (rows[at].record.env.id or "", rows[at].depth, rows[at].head, hidden,
                rows[at].record.env.id in on_path, len(rest),
                sum(1 + shown[m][1] for m in rest))

    drawn = [item(n) for n in range(len(shown)) if n not in cut_off]
    return drawn, earlier, rows[paths[first][0]].record.env.id if paths else None


def reference_after(rows: list[Row], at: int, on_path: set[str | None]) -> list[Item]:
    """The branches after the row at `at` under its fork (or among the roots), up to the
    path's, each folded."""
    found: list[Item] = []
    row, end = rows[at], branch_end(rows, at)
    while row.head and end < len(rows) and rows[end].depth == row.depth and rows[end].head \
            and rows[end].record.env.id not in on_path:
        after = branch_end(rows, end)
        found.append((rows[end].record.env.id or "", row.depth, True, after - end - 1, False, 0,
                      0))
        end = after
    return found


# -- the session and what is compared --------------------------------------------------------

def entry(kind: str, entry_id: str, parent: str | None, stamp: str | None) -> dict[str, Any]:
    common = {"id": entry_id, "parentId": parent, "timestamp": stamp}
    match kind:
        case "message":
            return {"type": "message", **common,
                    "message": {"role": "user", "content": entry_id, "timestamp": 1}}
        case "usage":
            return {"type": "usage", **common, "kind": "turn"}
        case "context_edit":
            return {"type": "context_edit", **common, "targetId": parent or entry_id,
                    "replacement": None}
        case "leaf_move":
            return {"type": "custom", **common, "customType": LEAF_MOVE,
                    "data": {"targetId": parent}}
        case "leaf":
            return {"type": "leaf", **common, "targetId": parent}
        case "model_change":
            return {"type": "model_change", **common, "provider": "p", "modelId": "m"}
        case "label":
            return {"type": "label", **common, "targetId": parent or entry_id, "label": stamp}
        case "session_info":
            return {"type": "session_info", **common, "name": entry_id}
    return {"type": "custom", **common, "customType": "ext", "data": None}


def encoded(lines: list[Line], before: str | None) -> list[bytes]:
    out = []
    for kind, entry_id, parent, stamp in lines:
        entry_id = f"{next(_counter):08x}" if entry_id == NEW else entry_id
        out.append(json.dumps(entry(kind, entry_id, before if parent == CHAIN else parent,
                                    stamp)).encode())
        before = entry_id
    return out


def drawn_fold(folded: Folded) -> Drawn:
    return ([(row.record.env.id or "", row.depth, row.head, hidden, on_path, more, more_rows)
             for row, hidden, on_path, more, more_rows in folded.shown], folded.earlier,
            folded.cut)


def drawn_node(n: Node) -> Item:
    return n.id, n.depth, n.head, n.hidden, n.on_path, n.more_branches, n.more_rows


def drawn_view(view: TreeView) -> tuple[list[Item], int]:
    return [drawn_node(n) for n in view.nodes], view.earlier


def child_ids(index: dict[str | None, list[Record]]) -> dict[str | None, list[str | None]]:
    return {key: [record.env.id for record in children] for key, children in index.items()}


def check(tree: SessionTree, views: TreeViews, held: HeldView, keep: int | None,
          bookkeeping: bool, cut: str | None, pages: list[tuple[str, int, int]]) -> None:
    index = reference_index(tree)
    assert child_ids(tree.children_index()) == child_ids(index)  # kept, not built again
    drawing = reference_drawing(tree)
    rows = reference_layout(drawing, bookkeeping)
    on_path = reference_path(tree)
    assert drawn_fold(fold(tree, bookkeeping, keep, cut)) == \
        reference_fold(rows, on_path, keep, cut)

    # "Earlier rows" always come into view by asking for a longer path: a window as long as
    # the tree leaves none out (the other roots included).
    assert fold(tree, bookkeeping, len(tree.records) + 1).earlier == 0

    fresh = TreeViews().view(HeldView(), tree, bookkeeping, keep)
    assert drawn_view(fresh) == reference_fold(rows, on_path, keep, None)[:2]
    # The held view was grown (its window from where it started) or folded again from its
    # cut: either way it is the view made anew with as many of the path's rows.
    view = views.view(held, tree, bookkeeping, keep)
    path_rows = sum(node.on_path for node in view.nodes)
    assert path_rows >= sum(node.on_path for node in fresh.nodes)
    wide = TreeViews().view(HeldView(), tree, bookkeeping, keep and max(keep, path_rows))
    assert msgspec.structs.replace(view, version=0) == msgspec.structs.replace(wide, version=0)
    assert drawn_view(wide) == \
        reference_fold(rows, on_path, keep and max(keep, path_rows), None)[:2]
    for node in view.nodes:  # a parent only once it is in the file, and never itself
        parent = tree.by_id[node.id].env.parent_id
        assert node.parent_id == (parent if parent in tree.by_id and parent != node.id else None)

    folded = [(node.id, 0, node.hidden) for node in view.nodes if node.hidden]
    for under, start, limit in [*pages, *folded]:
        at = next((n for n, row in enumerate(rows) if row.record.env.id == under), None)
        if at is None:
            with pytest.raises(NotARowError):
                views.rows_under(held, tree, under, start, limit, bookkeeping)
            continue
        end = branch_end(rows, at)
        page = views.rows_under(held, tree, under, start, limit, bookkeeping)
        expected = rows[at + 1 + start:min(end, at + 1 + start + limit)]
        assert page.total == end - at - 1
        assert [(n.id, n.depth, n.head, n.on_path) for n in page.nodes] == \
            [(r.record.env.id, r.depth, r.head, r.record.env.id in on_path) for r in expected]

    # Asked of the other kind of view than the one last built (the editor's setting, after the
    # session was closed and opened again): counted as asked, and the view is left as it was.
    other, before = reference_layout(drawing, not bookkeeping), held.view
    for under, start, limit in pages:
        at = next((n for n, row in enumerate(other) if row.record.env.id == under), None)
        if at is None:
            continue
        end = branch_end(other, at)
        page = views.rows_under(held, tree, under, start, limit, not bookkeeping)
        assert (page.total, [node.id for node in page.nodes]) == (end - at - 1, [
            row.record.env.id for row in other[at + 1 + start:min(end, at + 1 + start + limit)]])
        if under not in on_path:
            assert [item[0] for item in reference_after(other, at, on_path)] == [
                node.id for node in views.branches_after(held, tree, under, 0, 100,
                                                          not bookkeeping).nodes]
    assert held.view is before

    # The branches after a row, a page at a time: of the last branch a fork's row sends, the
    # ones it left out; of a row off the path anywhere, the rest of its fork's up to the path.
    sent = [node.id for node in view.nodes]
    for after in [*sent, *(under for under, _start, _limit in pages)]:
        at = next((n for n, row in enumerate(rows) if row.record.env.id == after), None)
        if at is None or after in on_path:
            with pytest.raises(NotARowError):
                views.branches_after(held, tree, after, 0, 5, bookkeeping)
            continue
        rest = reference_after(rows, at, on_path)
        node = view.nodes[sent.index(after)] if after in sent else None
        if node is not None and node.more_branches:  # each one left out, none sent after it
            assert (node.more_branches, node.more_rows) == \
                (len(rest), sum(1 + item[3] for item in rest))
            assert not set(sent) & {branch[0] for branch in rest}
        for start, limit in [(0, len(rest)), (1, 2)]:
            page = views.branches_after(held, tree, after, start, limit, bookkeeping)
            assert (page.total, page.rows) == (len(rest), sum(1 + item[3] for item in rest))
            assert [drawn_node(n) for n in page.nodes] == rest[start:start + limit]


def move_leaf(tree: SessionTree, to: str | None) -> None:
    if to == "":
        tree.reset_leaf()
    elif to is not None and to in tree.by_id:
        tree.branch(to)


@SETTINGS
@given(first=st.lists(line, min_size=1, max_size=24), first_move=move,
       appends=st.lists(st.tuples(st.lists(turn, min_size=1, max_size=4) |
                                  st.lists(line, max_size=6), move), max_size=3),
       keep=st.one_of(st.none(), st.integers(1, 5)), bookkeeping=st.booleans(),
       cut=st.one_of(st.none(), st.sampled_from(IDS)), pages=unders)
# A parent that comes later in the file: the entry is a root until it comes.
@example(first=[("message", IDS[1], IDS[0], None), ("message", IDS[2], None, None)],
         first_move=None, appends=[([("message", IDS[0], CHAIN, None)], None)], keep=2,
         bookkeeping=False, cut=None, pages=[])
# Begun again from the very start: the first conversation is a folded root beside the path's.
@example(first=[("message", IDS[0], None, None), ("message", IDS[1], CHAIN, None),
                ("message", IDS[2], None, None), ("message", IDS[3], CHAIN, None)],
         first_move=None, appends=[], keep=5, bookkeeping=False, cut=None, pages=[])
# No leaf (the next entry starts a new root): the roots, folded, not "earlier rows" alone.
@example(first=[("message", IDS[0], None, None), ("message", IDS[1], CHAIN, None)],
         first_move="", appends=[], keep=5, bookkeeping=False, cut=None, pages=[])
# A reused id: the entry moves to its new parent, and the old one is gone.
@example(first=[("message", IDS[0], None, None), ("message", IDS[1], CHAIN, None),
                ("message", IDS[2], IDS[0], None)],
         first_move=None, appends=[([("message", IDS[1], IDS[2], None)], None)], keep=1,
         bookkeeping=False, cut=None, pages=[(IDS[0], 0, 5)])
# A turn under a leaf that has rows under it: a fork, not a longer branch.
@example(first=[("message", IDS[0], None, None), ("message", IDS[1], CHAIN, None),
                ("message", IDS[2], CHAIN, None)],
         first_move=IDS[1], appends=[([("message", NEW, CHAIN, None)], None)], keep=2,
         bookkeeping=False, cut=None, pages=[])
# A turn under a leaf a fork above it: the new rows at its row's depth.
@example(first=[("message", IDS[0], None, None), ("message", IDS[1], CHAIN, None),
                ("message", IDS[2], IDS[0], None)],
         first_move=None, appends=[([("message", NEW, CHAIN, None), ("usage", NEW, CHAIN, None),
                                     ("message", NEW, CHAIN, None)], None)], keep=3,
         bookkeeping=False, cut=None, pages=[])
# A label on the leaf's row: it changes that row, the view does not just grow.
@example(first=[("message", IDS[0], None, None), ("message", IDS[1], CHAIN, None)],
         first_move=None, appends=[([("label", NEW, CHAIN, "x")], None)], keep=2,
         bookkeeping=False, cut=None, pages=[])
# A page under a row that was never sent, inside a folded branch with a fork in it.
@example(first=[("message", IDS[0], None, None), ("message", IDS[1], CHAIN, None),
                ("message", IDS[2], IDS[0], None), ("message", IDS[3], IDS[2], None),
                ("message", IDS[4], IDS[2], None), ("message", IDS[6], IDS[3], None),
                ("message", IDS[5], IDS[1], None)],
         first_move=None, appends=[], keep=3, bookkeeping=False, cut=None,
         pages=[(IDS[3], 0, 5)])
# Branches after the path's next row, off two rows of the window: the deeper ones first.
@example(first=[("message", IDS[0], None, None), ("message", IDS[1], CHAIN, None),
                ("message", IDS[2], CHAIN, None), ("message", IDS[3], IDS[0], None),
                ("message", IDS[4], IDS[1], None)],
         first_move=IDS[2], appends=[], keep=3, bookkeeping=False, cut=None, pages=[])
# A window that grew keeps its start while it is at most twice as long.
@example(first=[("message", IDS[n], CHAIN, None) for n in range(6)],
         first_move=None, appends=[], keep=2, bookkeeping=False, cut=IDS[2], pages=[])
# The missing parent of the kept path's top comes: the path goes on up through it.
@example(first=[("message", NEW, IDS[0], None)], first_move=None,
         appends=[([("message", IDS[0], None, None)], None)], keep=1, bookkeeping=False,
         cut=None, pages=[])
# A chain right above the window under a fork: its top row is no branch's head.
@example(first=[("message", IDS[0], None, None), ("message", IDS[1], CHAIN, None),
                ("message", IDS[2], CHAIN, None), ("message", IDS[3], CHAIN, None),
                ("message", IDS[4], CHAIN, None), ("message", IDS[5], IDS[1], None)],
         first_move=IDS[4], appends=[], keep=2, bookkeeping=False, cut=None, pages=[])
# A message above the window whose one child is hidden, with two rows under that: a fork.
@example(first=[("message", IDS[0], None, None), ("message", IDS[1], CHAIN, None),
                ("usage", IDS[2], CHAIN, None), ("message", IDS[3], CHAIN, None),
                ("message", IDS[4], IDS[2], None), ("message", IDS[5], IDS[3], None),
                ("message", IDS[6], CHAIN, None)],
         first_move=None, appends=[], keep=2, bookkeeping=False, cut=None, pages=[])
# Other roots and a fork on the path's top row, more than the budget (2): the fork's first.
@example(first=[("message", IDS[0], None, None), ("message", IDS[1], None, None),
                ("message", IDS[2], None, None), ("message", IDS[3], IDS[2], None),
                ("message", IDS[4], IDS[2], None), ("message", IDS[5], IDS[2], None)],
         first_move=None, appends=[], keep=2, bookkeeping=False, cut=None, pages=[])
# An id written again under its own descendant: the walk up from the leaf ends in a loop of
# parent links, and the path's top is drawn as a root.
@example(first=[("message", IDS[0], None, None), ("message", IDS[1], CHAIN, None),
                ("message", IDS[2], CHAIN, None), ("message", IDS[1], IDS[2], None)],
         first_move=None, appends=[], keep=2, bookkeeping=False, cut=None,
         pages=[(IDS[0], 0, 5)])
@example(first=[("message", NEW, None, None), ("message", IDS[0], CHAIN, None)],
         first_move=None, appends=[], keep=2, bookkeeping=False, cut=IDS[0], pages=[])
# The path's top written again under the leaf: the path is that one entry now.
@example(first=[("message", IDS[0], None, None), ("message", NEW, CHAIN, None)],
         first_move=None, appends=[([("message", IDS[0], CHAIN, None)], None)], keep=2,
         bookkeeping=False, cut=None, pages=[])
def test_a_folded_view_is_the_whole_layout_folded(
        tmp_path_factory: pytest.TempPathFactory, first: list[Line], first_move: str | None,
        appends: list[tuple[list[Line], str | None]], keep: int | None, bookkeeping: bool,
        cut: str | None, pages: list[tuple[str, int, int]]) -> None:
    path = tmp_path_factory.mktemp(f"fold{next(_counter)}") / "s.jsonl"
    path.write_bytes(b"\n".join([json.dumps(HEADER).encode(), *encoded(first, None)]) + b"\n")
    tree = SessionTree.open(str(path))
    move_leaf(tree, first_move)
    views, held = TreeViews(), HeldView()
    with pytest.MonkeyPatch.context() as patch:
        # The branch budget as small as the window, so that these small trees' forks are cut.
        patch.setattr(fold_module, "BRANCH_ROWS", keep or 1)
        check(tree, views, held, keep, bookkeeping, cut, pages)
        check_paths(tree)
        for lines, to in appends:
            append_lines(str(path), encoded(lines, tree.leaf_id))
            tree.refresh()
            move_leaf(tree, to)
            check(tree, views, held, keep, bookkeeping, cut, pages)
            check_paths(tree)
    assert child_ids(tree.children_index()) == child_ids(SessionTree.open(str(path))
                                                         .children_index())


def test_a_turn_streaming_under_the_leaf_grows_the_view_without_folding_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The case the growth is for, on a folded view: entries one under the other below the
    leaf are added after its row, and the tree is not walked or counted again."""
    from pi_lsp.server import treeview

    path = tmp_path / "s.jsonl"
    lines: list[Line] = [("message", IDS[0], None, None), ("message", IDS[1], CHAIN, None),
                         ("message", IDS[2], IDS[0], None), ("message", IDS[3], IDS[1], None)]
    path.write_bytes(b"\n".join([json.dumps(HEADER).encode(), *encoded(lines, None)]) + b"\n")
    tree = SessionTree.open(str(path))
    views, held = TreeViews(), HeldView()
    before = views.view(held, tree, False, 2)
    folds: list[int] = []
    real_fold = treeview.fold
    monkeypatch.setattr(treeview, "fold", lambda *a: folds.append(1) or real_fold(*a))
    append_lines(str(path), encoded([("usage", IDS[4], CHAIN, None),
                                     ("message", IDS[5], CHAIN, None)], tree.leaf_id))
    tree.refresh()
    after = views.view(held, tree, False, 2)
    assert folds == []
    assert [node.id for node in after.nodes] == [*(node.id for node in before.nodes), IDS[5]]
    assert after.leaf_row == IDS[5] and after.earlier == before.earlier


def test_a_turn_extends_the_kept_path_without_walking_it_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A turn asks for the path at each step: each entry it writes under the leaf extends the
    kept path (a walk up a 100k-entry path is about 0.1 s)."""
    path = tmp_path / "s.jsonl"
    lines = encoded([("message", NEW, CHAIN, None)] * 50, None)
    path.write_bytes(b"\n".join([json.dumps(HEADER).encode(), *lines]) + b"\n")
    tree = SessionTree.open(str(path))
    tree.hold_leaf = True
    first = tree.path_ids(tree.leaf_id)

    def no_walk(self: SessionTree, entry_id: str | None) -> None:
        raise AssertionError(f"walked up from {entry_id}")

    monkeypatch.setattr(SessionTree, "ancestors", no_walk)
    added = [tree.append_custom("ext", {"n": n}) for n in range(3)]
    assert tree.path_ids(tree.leaf_id) == [*first, *added]


def test_a_folded_view_takes_its_window_and_its_top_row_from_the_kept_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The window was found by a walk up from the leaf and its top row placed by another, to
    the top (80k entries twice on a 100k-entry session), with the path already kept."""
    path = tmp_path / "s.jsonl"
    lines: list[Line] = [("message", IDS[0], None, None), ("message", IDS[1], CHAIN, None),
                         ("message", IDS[2], IDS[0], None), ("usage", IDS[3], IDS[1], None),
                         ("message", IDS[4], CHAIN, None), ("message", IDS[5], CHAIN, None)]
    path.write_bytes(b"\n".join([json.dumps(HEADER).encode(), *encoded(lines, None)]) + b"\n")
    tree = SessionTree.open(str(path))
    expected = drawn_fold(fold(tree, False, 1))

    def no_walk(self: SessionTree, entry_id: str | None) -> None:
        raise AssertionError(f"walked up from {entry_id}")

    monkeypatch.setattr(SessionTree, "ancestors", no_walk)
    assert drawn_fold(fold(tree, False, 1)) == expected
    assert expected[0][-1][:3] == (IDS[5], 1, False)  # in a branch of the fork at IDS[0]


def test_a_folded_view_counts_only_the_rows_off_the_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows were counted from the roots down, the path's too (80k of a 100k-entry
    session), though the path is walked for the window's top row all the same."""
    from pi_lsp.session import layout

    path = tmp_path / "s.jsonl"
    lines: list[Line] = [("message", IDS[0], None, None), ("message", IDS[1], CHAIN, None),
                         ("message", IDS[2], IDS[0], None), ("usage", IDS[3], IDS[1], None),
                         ("message", IDS[4], CHAIN, None), ("message", IDS[5], CHAIN, None),
                         ("message", IDS[6], None, None)]
    path.write_bytes(b"\n".join([json.dumps(HEADER).encode(), *encoded(lines, None)]) + b"\n")
    tree = SessionTree.open(str(path))
    tree.branch(IDS[5])
    on_path = set(tree.path_ids(IDS[5]))
    counted: list[str | None] = []
    real_count = layout.count_rows

    def count_rows(index: dict[str | None, list[Record]], records: list[Record],
                   bookkeeping: bool = False) -> int:
        counted.extend(record.env.id for record in records)
        return real_count(index, records, bookkeeping)

    monkeypatch.setattr(layout, "count_rows", count_rows)
    monkeypatch.setattr(fold_module, "count_rows", count_rows)
    folded = fold(tree, False, 1)
    assert counted and on_path.isdisjoint(counted)
    assert folded.earlier == 5  # every row but the window's one (IDS[3] is no row)


@pytest.mark.parametrize("lines", [
    # A fork above the leaf: the branch off the path is folded beside it.
    [("message", IDS[0], None, None), ("message", IDS[1], CHAIN, None),
     ("message", IDS[2], IDS[0], None), ("message", IDS[3], CHAIN, None)],
    # An id written again under its own descendant: the path's top is drawn as a root.
    [("message", IDS[0], None, None), ("message", IDS[1], CHAIN, None),
     ("message", IDS[2], CHAIN, None), ("message", IDS[1], IDS[2], None)],
])
def test_the_path_up_from_an_idless_leaf_is_drawn_and_marked_folded_too(
        tmp_path: Path, lines: list[Line]) -> None:
    """With an id-less last line (pi's leaf) the folded view marked no row on the path and
    folded it away, and a loop of parent links above it hid the path in every view: both
    walked up from the leaf id, which is None."""
    idless = {"type": "message", "parentId": lines[-1][1], "timestamp": None,
              "message": {"role": "user", "content": "last", "timestamp": 1}}
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"\n".join([json.dumps(HEADER).encode(), *encoded(lines, None),
                                 json.dumps(idless).encode()]) + b"\n")
    tree = SessionTree.open(str(path))
    marked = [entry_id for entry_id in tree.path_ids(tree.leaf_id) if entry_id is not None]
    views, held = TreeViews(), HeldView()
    whole = views.view(HeldView(), tree, False, None)
    folded = views.view(held, tree, False, 300)
    assert [node.id for node in whole.nodes if node.on_path] == marked
    assert [(node.id, node.on_path) for node in folded.nodes] == \
        [(node.id, node.on_path) for node in whole.nodes]
    page = views.rows_under(held, tree, marked[0], 0, 10)
    assert [node.id for node in page.nodes if node.on_path] == marked[1:]


def test_folding_a_large_tree_sets_off_no_garbage_collection(tmp_path: Path) -> None:
    """A row per root set the cyclic collector off again and again, each run a full walk of
    every object (a first getTree of 1,000,000 roots: 1.1 s of its 3.4 s, and runs of up to
    0.25 s that held the event loop while the view was built in a worker thread); it is paused
    while the tree is folded: at most the one run it owes after, and it is left on."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join([json.dumps(HEADER).encode() + b"\n", *(
        b'{"type":"custom","customType":"x","id":"r%d","parentId":null}\n' % n
        for n in range(3000))]))
    tree = SessionTree.open(str(path))
    tree.children_index()
    runs: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            runs.append(info["generation"])

    gc.collect()  # the count of new objects starts from nothing
    gc.callbacks.append(count)
    try:
        folded = fold(tree, False, 300)
    finally:
        gc.callbacks.remove(count)
    assert len(runs) <= 1
    assert gc.isenabled()
    assert folded.shown[-1][0].record.env.id == "r2999"
