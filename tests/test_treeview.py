"""The tree view an editor is sent: after appends under the leaf it grows without a new layout,
and always equals the view laid out from scratch."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from pi_lsp.server import treeview
from pi_lsp.server.treeview import HeldView, TreeView, TreeViews
from pi_lsp.session.appender import append_lines
from pi_lsp.session.entries import UserMessage
from pi_lsp.session.layout import is_shown
from pi_lsp.session.tree import SessionTree

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = next((ROOT / "examples" / "workspace" / ".pi" / "sessions").glob("*.jsonl"))
EVERY_TYPE = ROOT / "tests" / "fixtures" / "every-type.jsonl"
NOID_LEAF = ROOT / "tests" / "fixtures" / "pi16-odd-envelopes" / "noid-leaf.jsonl"
EMPTY_PARENT = NOID_LEAF.with_name("empty-parent.jsonl")
FORK_PARENT = "24652ae8"


def from_scratch(tree: SessionTree) -> TreeView:
    return TreeViews().view(HeldView(), tree)


def prompt(tree: SessionTree, text: str = "more") -> None:
    tree.append_message(UserMessage(content=text, timestamp=1))


@pytest.mark.parametrize(("source", "change", "grows"), [
    (EXAMPLE, lambda tree: [prompt(tree), prompt(tree, "again")], True),
    (EVERY_TYPE, prompt, True),  # the leaf is a hidden move: the row above it grows
    (EXAMPLE, lambda tree: tree.append_label(FORK_PARENT, "x"), False),
    (EXAMPLE, lambda tree: (tree.branch(FORK_PARENT), prompt(tree)), False),  # a new fork
])
def test_a_changed_view_equals_one_laid_out_anew(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: Path,
        change: Callable[[SessionTree], object], grows: bool) -> None:
    path = Path(shutil.copy(source, tmp_path / "s.jsonl"))
    tree = SessionTree.open(str(path))
    views, held = TreeViews(), HeldView()
    before = views.view(held, tree)
    change(tree)
    laid_out: list[int] = []
    real_fold = treeview.fold
    monkeypatch.setattr(treeview, "fold", lambda *a: laid_out.append(1) or real_fold(*a))
    after = views.view(held, tree)
    assert (laid_out == []) is grows
    expected = from_scratch(tree)
    assert after.version > before.version
    assert (after.leaf_id, after.leaf_row, after.title, after.entries, after.nodes) == \
        (expected.leaf_id, expected.leaf_row, expected.title, expected.entries, expected.nodes)
    delta = views.delta(held, tree)
    assert delta is None  # nothing changed since


@pytest.mark.parametrize("limit", [None, 300])
def test_an_entry_under_an_empty_parent_id_is_drawn_as_a_root_on_the_path(
        limit: int | None) -> None:
    """`a3` ("parentId": "") tops the current path, as pi 1.6's walks stop at an empty
    parentId: the view draws it as a root of its own, the earlier entries off the path."""
    view = TreeViews().view(HeldView(), SessionTree.open(str(EMPTY_PARENT)), False, limit)
    rows = [(node.id, node.depth, node.head, node.on_path) for node in view.nodes]
    drawn = [("a1", 0, True, False), ("", 0, False, False), ("a3", 0, True, True)]
    assert rows == (drawn if limit is None else [drawn[0], drawn[2]])
    assert view.leaf_id == "a3"
    assert limit is None or view.nodes[0].hidden == 1  # the "" entry, folded under a1


@pytest.mark.parametrize("limit", [None, 300])
def test_an_idless_leaf_written_under_another_entry_changes_the_view(
        tmp_path: Path, limit: int | None) -> None:
    """An id-less line (pi's leaf) after an id-less leaf moves the path with neither the
    entries nor the leaf id changing: the view kept was sent again, its old path marked."""
    path = Path(shutil.copy(NOID_LEAF, tmp_path / "s.jsonl"))
    tree = SessionTree.open(str(path))
    views, held = TreeViews(), HeldView()
    views.view(held, tree, False, limit)
    append_lines(str(path), [json.dumps({
        "type": "message", "parentId": "aaaa0001", "timestamp": "2026-12-03T13:43:10.000Z",
        "message": {"role": "user", "content": "three", "timestamp": 1}}).encode()])
    tree.refresh()
    delta = views.delta(held, tree)
    assert delta is not None
    assert [(node.id, node.on_path) for node in views.view(held, tree, False, limit).nodes] == \
        [("aaaa0001", True), ("aaaa0002", False)]


@pytest.mark.parametrize("source", [EXAMPLE, EVERY_TYPE])
@pytest.mark.parametrize("limit", [1000, 3, 1])
def test_a_folded_view_unfolds_to_a_slice_of_the_whole(source: Path, limit: int) -> None:
    """At every leaf: the folded view with the rows under each folded row put back is the
    whole view's rows but `earlier` of them, in order; each row sent is on the path or hangs
    right off it."""
    tree = SessionTree.open(str(source))
    for record in tree.records:
        tree.branch(record.env.id or "")
        whole = from_scratch(tree).nodes
        views, held = TreeViews(), HeldView()
        folded = views.view(held, tree, False, limit)
        unfolded = []
        for node in folded.nodes:
            unfolded.append(msgspec.structs.replace(node, hidden=0))
            if node.hidden:
                under = views.rows_under(held, tree, node.id, 0, 100_000)
                assert under.total == node.hidden == len(under.nodes)
                unfolded += under.nodes
        at = whole.index(unfolded[0]) if unfolded else 0
        assert unfolded == whole[at:at + len(unfolded)]
        assert folded.earlier == len(whole) - len(unfolded)
        assert sum(node.on_path for node in folded.nodes) == \
            min(limit, sum(node.on_path for node in whole))
        path = set(tree.path_ids(tree.leaf_id))
        for node in folded.nodes:
            parent = node.parent_id  # through entries that are no rows (usage records)
            while parent is not None and parent not in path and \
                    not is_shown(tree.by_id[parent]):
                parent = tree.by_id[parent].env.parent_id
            assert node.id in path or parent in path or parent is None, node.id


def test_a_folded_window_keeps_its_start_while_it_grows_up_to_twice_its_size(
        tmp_path: Path) -> None:
    """Rows appended under the leaf widen the window; laid out again (a label), the window
    still starts where it did, so the change sent is small, until it is twice as long."""
    tree = SessionTree.open(str(shutil.copy(EXAMPLE, tmp_path / "s.jsonl")))
    views, held = TreeViews(), HeldView()
    first = views.view(held, tree, False, 3).nodes[0].id

    def path_rows() -> list[str]:
        view = views.view(held, tree, False, 3)
        return [node.id for node in view.nodes if node.on_path]

    prompt(tree)
    prompt(tree)
    tree.append_label(FORK_PARENT, "x")  # not grown: laid out again
    assert len(path_rows()) == 6 and path_rows()[0] == first
    prompt(tree)
    tree.append_label(FORK_PARENT, "y")
    assert len(path_rows()) == 3


def test_a_move_up_keeps_the_windows_start_and_sends_only_what_changed(tmp_path: Path) -> None:
    """A branch a few rows up on a path longer than the window sent the whole view again (the
    window took `keep` rows from the new leaf up, past where it started): it keeps its start,
    so the change is the rows below the new leaf folded into one."""
    tree = SessionTree.create(str(tmp_path / "s.jsonl"), cwd="/w")
    for n in range(30):
        prompt(tree, f"p{n}")
    views, held = TreeViews(), HeldView()
    before = views.view(held, tree, False, 10)
    path = tree.path_ids(tree.leaf_id)
    tree.branch(path[-4])
    delta = views.delta(held, tree)
    assert delta is not None
    assert (delta.start, delta.delete, delta.earlier) == (7, 3, before.earlier)
    assert [(node.id, node.on_path, node.hidden) for node in delta.rows] == \
        [(path[-3], False, 2)]
    tree.branch(path[-1])  # back down: the window it had
    delta = views.delta(held, tree)
    assert delta is not None and views.view(held, tree, False, 10).nodes == before.nodes
    assert (delta.start, delta.delete, len(delta.rows)) == (7, 1, 3)


def test_a_move_far_up_shows_a_whole_window_again(tmp_path: Path) -> None:
    """A window kept at its start after a move up of most of its rows shows only the few rows
    left below it (the path above the new leaf folded into "earlier"): it is formed again."""
    tree = SessionTree.create(str(tmp_path / "s.jsonl"), cwd="/w")
    for n in range(30):
        prompt(tree, f"p{n}")
    views, held = TreeViews(), HeldView()
    views.view(held, tree, False, 10)
    path = tree.path_ids(tree.leaf_id)
    tree.branch(path[-9])
    views.delta(held, tree)
    after = views.view(held, tree, False, 10)
    assert [node.id for node in after.nodes if node.on_path] == path[-18:-8]
