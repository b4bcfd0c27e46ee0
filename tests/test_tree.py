"""Example-based tests of the session tree: appends, leaf moves, ordering, labels, checks."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import inspect
import json
import math
import random
import shutil
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import msgspec
import pytest

from pi_lsp.context.build import build_session_context, settings_at
from pi_lsp.context.convert import convert_to_llm
from pi_lsp.context.projection import ModelRef, context_settings
from pi_lsp.server.treeview import HeldView, TreeViews
from pi_lsp.session import migrate as migrate_module
from pi_lsp.session.appender import WriteFailedError
from pi_lsp.session.catalog import summarize
from pi_lsp.session.check import check_session
from pi_lsp.session.entries import (
    AssistantMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    encoder,
    role_of,
)
from pi_lsp.session.fork import fork_session
from pi_lsp.session.ids import iso_to_ms
from pi_lsp.session.journal import SkippedLines
from pi_lsp.session.outline import entry_preview, nested_tree
from pi_lsp.session.records import UnknownEntryError, decode_entry
from pi_lsp.session.tree import SessionTree
from pi_lsp.summarize.branch import (
    Navigation,
    branch_with_summary,
    fit_branch_messages,
    navigation,
)
from pi_lsp.summarize.compaction import (
    CompactionSettings,
    NothingToCompactError,
    compact,
    prepare_compaction,
)
from pi_lsp.summarize.extractive import ExtractiveSummarizer
from tests.test_system_messages import PI16, pi16_eval, pi16_node
from tests.waits import CEILING_S, PROCESS_CEILING_S

HEADER: dict[str, Any] = {
    "type": "session", "version": 3, "id": "11111111-2222-3333-4444-555555555555",
    "timestamp": "2025-01-01T10:00:00.000Z", "cwd": "/home/a/proj",
}


def user(text: str, ts: int = 1) -> UserMessage:
    return UserMessage(content=text, timestamp=ts)


def new_tree(tmp_path: Path) -> SessionTree:
    return SessionTree.create(str(tmp_path / "s.jsonl"), cwd="/home/a/proj")


def write_session(path: Path, entries: list[dict[str, Any]]) -> SessionTree:
    lines = [json.dumps(HEADER), *(json.dumps(e) for e in entries)]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return SessionTree.open(str(path))


def msg(entry_id: str, parent: str | None, text: str = "hi",
        ts: str = "2025-01-01T10:00:01.000Z") -> dict[str, Any]:
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": ts,
            "message": {"role": "user", "content": text, "timestamp": 1}}


def without(key: str, entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k != key}


def ids(records: list[Any]) -> list[str]:
    return [r.env.id for r in records]


def context(tree: SessionTree, leaf: str | None) -> bytes:
    return msgspec.json.encode(build_session_context(tree, leaf))


def texts(tree: SessionTree, leaf: str | None) -> list[Any]:
    ctx = build_session_context(tree, leaf)
    return [json.loads(bytes(m)).get("content") for m in ctx.messages]


# -- appends and the leaf ---------------------------------------------------------------------


def test_every_append_becomes_the_leaf_under_the_previous_leaf(tmp_path: Path) -> None:
    tree = new_tree(tmp_path)
    assert not Path(tree.path).exists(), "the file is created with its first entry"
    appends = [
        lambda: tree.append_message(user("one")),
        lambda: tree.append_thinking_level_change("high"),
        lambda: tree.append_model_change("anthropic", "claude"),
        lambda: tree.append_custom("ext", {"k": 1}),
        lambda: tree.append_custom_message("note", "hello", True),
        lambda: tree.append_label(tree.records[0].env.id or "", "start"),
        lambda: tree.append_session_info("My session"),
        lambda: tree.append_branch_summary(tree.records[0].env.id or "", "summary"),
        lambda: tree.append_compaction("sum", tree.records[0].env.id or "", 123),
        lambda: tree.append_message(user("two")),
    ]
    previous: str | None = None
    for append in appends:
        new_id = append()
        assert tree.leaf_id == new_id
        assert tree.record(new_id).env.parent_id == previous
        previous = new_id
    reopened = SessionTree.open(tree.path)
    assert reopened.leaf_id == previous
    assert ids(reopened.path_to(previous)) == ids(tree.records)


def test_a_new_session_id_is_a_uuidv7_as_pi_makes_it(tmp_path: Path) -> None:
    """Session ids were UUIDv4; pi 1.6 writes pi-ai's uuidv7: the creation time in ms, then a
    41-bit counter stepped at each id, so ids sort in the order they were made."""
    before = time.time_ns() // 1_000_000
    made = [SessionTree.create(str(tmp_path / f"{n}.jsonl"), cwd="/home/a/proj").header.id
            for n in range(50)]
    after = time.time_ns() // 1_000_000
    ids = [uuid.UUID(text) for text in made]
    assert made == sorted(made) and len(set(made)) == len(made)
    assert {(i.version, i.variant) for i in ids} == {(7, uuid.RFC_4122)}
    assert all(before <= i.int >> 80 <= after for i in ids)
    counters = [((i.int >> 64) & 0xFFF) << 29 | ((i.int >> 33) & ((1 << 29) - 1)) for i in ids]
    assert counters == list(range(counters[0], counters[0] + len(ids)))


def test_branch_to_an_unknown_id_raises(tmp_path: Path) -> None:
    tree = new_tree(tmp_path)
    first = tree.append_message(user("one"))
    with pytest.raises(UnknownEntryError):
        tree.branch("deadbeef")
    with pytest.raises(KeyError):
        tree.move_leaf("deadbeef", durable=True)
    assert tree.leaf_id == first
    assert len(tree.records) == 1


def test_branch_then_append_makes_a_sibling(tmp_path: Path) -> None:
    tree = new_tree(tmp_path)
    a = tree.append_message(user("a"))
    b = tree.append_message(user("b"))
    tree.branch(a)
    assert tree.leaf_id == a
    c = tree.append_message(user("c"))
    assert tree.record(c).env.parent_id == a
    assert ids(tree.children(a)) == [b, c]
    assert texts(tree, c) == ["a", "c"]


def test_reset_leaf_then_append_makes_a_new_root(tmp_path: Path) -> None:
    tree = new_tree(tmp_path)
    a = tree.append_message(user("a"))
    tree.append_message(user("b"))
    tree.reset_leaf()
    assert tree.leaf_id is None
    assert build_session_context(tree, None).messages == []
    c = tree.append_message(user("c"))
    assert tree.record(c).env.parent_id is None
    tree.reset_leaf()
    d = tree.append_message(user("d"))
    assert ids(tree.roots()) == [a, c, d]
    assert ids(SessionTree.open(tree.path).roots()) == [a, c, d]
    assert texts(tree, d) == ["d"]


def test_append_message_refuses_summary_messages(tmp_path: Path) -> None:
    tree = new_tree(tmp_path)
    tree.append_message(user("a"))
    with pytest.raises(ValueError):
        tree.append_message(BranchSummaryMessage(summary="s", from_id="x", timestamp=1))
    with pytest.raises(ValueError):
        tree.append_message(CompactionSummaryMessage(summary="s", tokens_before=1, timestamp=1))
    assert len(tree.records) == 1
    assert len(Path(tree.path).read_bytes().splitlines()) == 2


def test_move_leaf_is_durable(tmp_path: Path) -> None:
    tree = new_tree(tmp_path)
    a = tree.append_message(user("a"))
    tree.append_thinking_level_change("high")
    b = tree.append_message(user("b"))
    tree.append_message(user("c"))
    expected = context(tree, b)
    move = tree.move_leaf(b, durable=True)
    # A custom entry under the target, as pi's appendCustomEntry writes it after branch(b):
    # pi 0.73.1 and 1.6 both take it as the leaf and as nothing in the context.
    line = json.loads(Path(tree.path).read_bytes().splitlines()[-1])
    assert line == {"type": "custom", "customType": "pi-lsp.leaf", "data": {"targetId": b},
                    "id": move, "parentId": b, "timestamp": line["timestamp"]}
    assert list(line) == ["type", "customType", "data", "id", "parentId", "timestamp"]
    assert tree.leaf_id == move and context(tree, move) == expected
    reopened = SessionTree.open(tree.path)
    assert reopened.leaf_id == move  # pi's getLeafId(): the last entry
    assert context(reopened, reopened.leaf_id) == expected
    assert build_session_context(reopened, move).thinking_level == "high"
    # The next append (pi's or pi-lsp's) hangs under the move, so both continue from b.
    d = reopened.append_message(user("d"))
    assert reopened.record(d).env.parent_id == move
    assert texts(reopened, d) == ["a", "b", "d"]
    assert a in reopened.path_ids(d)


def test_move_leaf_in_memory_writes_nothing(tmp_path: Path) -> None:
    tree = new_tree(tmp_path)
    a = tree.append_message(user("a"))
    tree.append_message(user("b"))
    before = Path(tree.path).read_bytes()
    assert tree.move_leaf(a, durable=False) is None
    assert tree.leaf_id == a and Path(tree.path).read_bytes() == before
    assert tree.move_leaf(None, durable=False) is None
    assert tree.leaf_id is None and Path(tree.path).read_bytes() == before


def test_move_leaf_to_none(tmp_path: Path) -> None:
    tree = new_tree(tmp_path)
    tree.append_message(user("a"))
    move = tree.move_leaf(None, durable=True)
    assert tree.leaf_id == move and tree.record(move or "").env.parent_id is None
    assert texts(tree, move) == []
    reopened = SessionTree.open(tree.path)
    assert reopened.leaf_id == move and texts(reopened, move) == []
    e = reopened.append_message(user("e"))
    assert texts(reopened, e) == ["e"]


@pytest.mark.parametrize("target", ["aaaaaaaa", None])
def test_an_old_leaf_entry_is_read_as_pi_16_reads_it(tmp_path: Path, target: str | None) -> None:
    """pi 1.6 does not know pi-lsp's old `leaf` entry: it is a node like any other, the leaf
    when last, with its target's context because it sits under it."""
    tree = write_session(tmp_path / "s.jsonl", [
        msg("aaaaaaaa", None), msg("bbbbbbbb", "aaaaaaaa"),
        entry("leaf", "cccccccc", target, targetId=target),
    ])
    assert tree.leaf_id == "cccccccc"
    assert texts(tree, tree.leaf_id) == (texts(tree, target) if target else [])
    following = tree.append_message(user("next"))
    assert tree.record(following).env.parent_id == "cccccccc"
    assert check_session(tree) == []


# -- ordering and roots ---------------------------------------------------------------------------


async def test_a_leaf_move_whose_write_fails_leaves_the_leaf_where_it_was(tmp_path: Path
                                                                          ) -> None:
    """A durable move, a branch summary or a compaction moved the leaf in memory before its
    entry was written, and a refused write (a version 1 file) left it there: the server's
    leaf then differed from the file's (pi.fork found "the session is empty")."""
    path = tmp_path / "v1.jsonl"
    header = {key: value for key, value in HEADER.items() if key != "version"}
    lines = [header, *({"type": "message", "timestamp": HEADER["timestamp"],
                        "message": {"role": "user", "content": text * 400, "timestamp": 1}}
                       for text in "abcd")]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    tree = SessionTree.open(str(path))
    first, leaf = tree.path_ids(tree.leaf_id)[0], tree.leaf_id
    before = path.read_bytes()
    for move in (lambda: tree.move_leaf(first, durable=True),
                 lambda: tree.move_leaf(None, durable=True),
                 lambda: tree.branch_with_summary(first, leaf or "", "summary")):
        with pytest.raises(WriteFailedError):
            move()
        assert tree.leaf_id == leaf
    with pytest.raises(WriteFailedError):
        await compact(tree, tree.path_ids(leaf)[-2], ExtractiveSummarizer(),
                      CompactionSettings(keep_recent_tokens=50))
    assert tree.leaf_id == leaf and path.read_bytes() == before


def test_children_ordered_by_timestamp_ties_in_file_order(tmp_path: Path) -> None:
    tree = write_session(tmp_path / "s.jsonl", [
        msg("r0000000", None, ts="2025-01-01T10:00:00.000Z"),
        msg("c1000000", "r0000000", ts="2025-01-01T10:00:03.000Z"),
        msg("c2000000", "r0000000", ts="2025-01-01T10:00:02.000Z"),
        msg("c3000000", "r0000000", ts="2025-01-01T10:00:02.000Z"),
        msg("c4000000", "r0000000", ts="2025-01-01T10:00:01.500Z"),
        msg("c5000000", "r0000000", ts="2025-01-01T10:00:02.000Z"),
    ])
    assert ids(tree.children("r0000000")) == [
        "c4000000", "c2000000", "c3000000", "c5000000", "c1000000",
    ]


# The files a session's file is replaced by: a version 1 one (ids made up, so read-only), and
# one with a label, a name, a damaged line and an id-less last line (pi's leaf).
STAMP = "2025-01-01T10:00:00.000Z"
REPLACEMENTS = {
    "version 1": [{"type": "session", "id": "v1", "timestamp": STAMP, "cwd": "/w"},
                  {"type": "message", "timestamp": STAMP,
                   "message": {"role": "user", "content": "old", "timestamp": 1}}],
    "markers": [{**HEADER, "id": "other"}, msg("a", None),
                {"type": "label", "id": "l", "parentId": "a", "timestamp": STAMP,
                 "targetId": "a", "label": "kept"},
                {"type": "session_info", "id": "n", "parentId": "l", "timestamp": STAMP,
                 "name": "named"}, "{damaged",
                {"type": "custom", "customType": "x", "parentId": "n", "timestamp": STAMP}],
}


def held_state(tree: SessionTree) -> dict[str, Any]:
    """Everything a tree holds, its state's fields included, as comparable values; not its
    count of reads, which differs by design (a stale reading is told by it)."""
    def comparable(value: Any) -> Any:
        if isinstance(value, msgspec.Raw):  # (equal only to itself)
            return bytes(value)
        if isinstance(value, msgspec.Struct):
            value = msgspec.structs.asdict(value)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        if isinstance(value, SkippedLines | list | tuple):
            return [comparable(item) for item in value]
        if isinstance(value, dict):
            return {key: comparable(item) for key, item in value.items()}
        return value
    held = {name: comparable(value) for name, value in vars(tree).items()}
    del held["_reads"]
    return held


@pytest.mark.parametrize("replacement", REPLACEMENTS)
def test_a_replaced_file_read_off_the_loop_leaves_the_tree_as_a_read_on_the_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, replacement: str) -> None:
    """A tree read off the event loop was handed over by copying a list of the fields a load
    sets: one added to the load and not to the list was silently kept from the file before.
    Whatever a read on the loop leaves, the reading taken in leaves too."""
    # A version 1 file's ids, made up at each read, made up alike at both
    monkeypatch.setattr(migrate_module, "new_entry_id", lambda taken: f"m{len(taken)}")
    path = tmp_path / "s.jsonl"
    write_session(path, [msg("x", None), msg("y", "x")])
    on_loop, off_loop = SessionTree.open(str(path)), SessionTree.open(str(path))
    for tree in (on_loop, off_loop):
        tree.label_value("x"), tree.children_index(), tree.path_to("y")  # all built
    lines = [line if isinstance(line, str) else json.dumps(line)
             for line in REPLACEMENTS[replacement]]
    path.write_text("".join(line + "\n" for line in lines))
    reading = off_loop.begin_reading()
    reading.run()  # (in a worker thread in the server)
    assert off_loop.take_reading(reading) is not None
    on_loop.refresh()
    assert held_state(off_loop) == held_state(on_loop)
    assert off_loop.records != [] and off_loop.records is not on_loop.records


def test_building_the_children_index_sets_off_no_garbage_collection(tmp_path: Path) -> None:
    """A list per entry set the cyclic collector off every 700 entries, each run walking lists
    that hold no cycle (a third of the index's 0.08 s at 100k entries); it is paused now: at
    most the one run it owes after, and it is left on."""
    entries = [msg("r0000000", None)] + [msg(f"c{n:07d}", f"c{n - 1:07d}" if n else "r0000000")
                                         for n in range(3000)]
    tree = write_session(tmp_path / "s.jsonl", entries)
    runs: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            runs.append(info["generation"])

    gc.collect()  # the count of new objects starts from nothing
    gc.callbacks.append(count)
    try:
        index = tree.children_index()
    finally:
        gc.callbacks.remove(count)
    assert len(runs) <= 1
    assert gc.isenabled()
    assert ids(index["c0002998"]) == ["c0002999"] and ids(index[None]) == ["r0000000"]


def test_a_null_stamp_sorts_as_the_epoch_and_its_siblings_by_time(tmp_path: Path) -> None:
    """A JSON null stamp was read as NaN, which compares equal to every stamp, so its siblings
    stayed in file order (2025 before 2024); pi's `new Date(null)` is 0: it comes first."""
    tree = write_session(tmp_path / "s.jsonl", [
        msg("r0000000", None, ts="2023-01-01T00:00:00.000Z"),
        msg("c0000000", "r0000000", ts="2025-01-01T00:00:05.000Z"),
        {**msg("c1000000", "r0000000"), "timestamp": None},
        msg("c2000000", "r0000000", ts="2024-01-01T00:00:00.000Z"),
    ])
    assert ids(tree.children("r0000000")) == ["c1000000", "c2000000", "c0000000"]


def test_roots_keep_file_order_whatever_their_timestamps(tmp_path: Path) -> None:
    tree = write_session(tmp_path / "s.jsonl", [
        msg("r1000000", None, ts="2025-01-01T10:00:09.000Z"),
        msg("r2000000", None, ts="2025-01-01T10:00:01.000Z"),
        msg("r3000000", None, ts="2025-01-01T10:00:05.000Z"),
    ])
    assert ids(tree.roots()) == ["r1000000", "r2000000", "r3000000"]
    assert tree.leaf_id == "r3000000"


def test_self_parent_and_missing_parent_are_roots(tmp_path: Path) -> None:
    tree = write_session(tmp_path / "s.jsonl", [
        msg("aaaaaaaa", None, "a"),
        msg("bbbbbbbb", "bbbbbbbb", "b"),
        msg("cccccccc", "99999999", "c"),
        msg("dddddddd", "cccccccc", "d"),
    ])
    assert ids(tree.roots()) == ["aaaaaaaa", "bbbbbbbb", "cccccccc"]
    assert tree.is_root(tree.record("bbbbbbbb"))
    assert tree.is_root(tree.record("cccccccc"))
    assert ids(tree.path_to("bbbbbbbb")) == ["bbbbbbbb"]
    assert ids(tree.path_to("dddddddd")) == ["cccccccc", "dddddddd"]
    assert texts(tree, "dddddddd") == ["c", "d"]
    assert ids(tree.children("bbbbbbbb")) == []


def test_a_cycle_does_not_hang_and_is_reported(tmp_path: Path) -> None:
    tree = write_session(tmp_path / "s.jsonl", [
        msg("aaaaaaaa", "bbbbbbbb", "a"),
        msg("bbbbbbbb", "aaaaaaaa", "b"),
    ])
    result: dict[str, Any] = {}

    def walk() -> None:
        result["path"] = ids(tree.path_to("aaaaaaaa"))
        result["context"] = texts(tree, "bbbbbbbb")
        result["problems"] = check_session(tree)

    worker = threading.Thread(target=walk, daemon=True)
    worker.start()
    worker.join(timeout=CEILING_S)
    assert not worker.is_alive(), "walking a cycle hangs"
    assert result["path"] == ["bbbbbbbb", "aaaaaaaa"]
    assert result["context"] == ["a", "b"]
    kinds = [p.kind for p in result["problems"]]
    assert "cycle" in kinds
    assert kinds.count("cycle") == 1
    assert "orphan" not in kinds


def test_an_id_written_again_under_its_own_descendant_leaves_the_path_in_the_tree(
        tmp_path: Path) -> None:
    """An id written again under its own child loops the parent links, and the walk up from
    the leaf (pi's byId: the later entry) ends in the loop, at no root: the tree drew no row
    of the current path and marked none, folded it was the first root alone."""
    tree = write_session(tmp_path / "s.jsonl", [
        msg("aaaaaaaa", None, "a"), msg("bbbbbbbb", "aaaaaaaa", "b"),
        msg("cccccccc", "bbbbbbbb", "c"), msg("bbbbbbbb", "cccccccc", "b again"),
    ])
    assert (tree.leaf_id, tree.path_ids(tree.leaf_id)) == ("bbbbbbbb", ["cccccccc", "bbbbbbbb"])
    assert texts(tree, tree.leaf_id) == ["c", "b again"]
    # The path's top is drawn as a root, after the roots before it in the file.
    rows = [("aaaaaaaa", 0, True, False), ("cccccccc", 0, True, True),
            ("bbbbbbbb", 0, False, True)]
    for limit in (None, 10):  # as `pi-lsp tree` draws it, and folded as editors ask
        view = TreeViews().view(HeldView(), tree, limit=limit)
        assert view.leaf_row == "bbbbbbbb"
        assert [(n.id, n.depth, n.head, n.on_path) for n in view.nodes] == rows
    assert {p.kind for p in check_session(tree)} == {"duplicate-id", "cycle"}


def test_walks_up_end_where_a_walk_that_remembers_every_id_ends(tmp_path: Path) -> None:
    """Walks up trust ever earlier lines not to cycle; parents written later, self-parents,
    missing parents, reused ids and cycles entered after such a stretch end them as a walk
    that keeps every id it passed does."""
    rng = random.Random(19)
    for trial in range(200):
        names = [f"{n:08x}" for n in range(rng.randint(1, 12))]
        entries = []
        for line, name in enumerate(names):
            pick = rng.random()
            parent = (None if pick < 0.1 else "ffffffff" if pick < 0.15
                      else rng.choice(names[:line]) if pick < 0.75 and line
                      else rng.choice(names))
            entries.append(msg(rng.choice(names) if rng.random() < 0.1 else name, parent))
        tree = write_session(tmp_path / f"s{trial}.jsonl", entries)
        for start in tree.by_id:
            expected, seen = [], set()
            record = tree.by_id.get(start)
            while record is not None and record.env.id not in seen:
                seen.add(record.env.id)
                expected.append(record.env.id)
                parent = record.env.parent_id
                record = None if parent == record.env.id else tree.by_id.get(parent or "")
            assert ids(list(tree.ancestors(start))) == expected, (entries, start)


def test_a_walk_up_taken_step_by_step_ends_when_the_tree_changes_under_it(
        tmp_path: Path) -> None:
    """A walk paused while an id is used again (making a cycle with the entry it started at)
    still ends: its careful part guards against the changed tree too."""
    tree = write_session(tmp_path / "s.jsonl", [
        msg("xxxxxxxx", None), msg("rrrrrrrr", "xxxxxxxx"), msg("aaaaaaaa", "rrrrrrrr"),
        msg("ssssssss", "aaaaaaaa")])
    # R's parent written after it: the walk from S turns careful at R
    tree.by_id["rrrrrrrr"].env.parent_id = "xxxxxxxx"
    tree.by_id["xxxxxxxx"].line = 9
    walk = tree.ancestors("ssssssss")
    assert [next(walk).env.id for _ in range(3)] == ["ssssssss", "aaaaaaaa", "rrrrrrrr"]
    tree.by_id["aaaaaaaa"] = msgspec.structs.replace(tree.by_id["aaaaaaaa"], line=11, env=(
        msgspec.structs.replace(tree.by_id["aaaaaaaa"].env, parent_id="ssssssss")))
    rest: list[str] = []
    worker = threading.Thread(target=lambda: rest.extend(r.env.id for r in walk), daemon=True)
    worker.start()
    worker.join(timeout=CEILING_S)
    assert not worker.is_alive(), "the walk does not end"
    assert rest == ["xxxxxxxx"]


def test_a_paused_walk_whose_turning_entry_was_written_again_still_reaches_the_root(
        tmp_path: Path) -> None:
    """The entry where a paused walk turned careful is replaced by an equal one under its id:
    the walk goes on above it, to the root."""
    tree = write_session(tmp_path / "s.jsonl", [
        msg("xxxxxxxx", None), msg("rrrrrrrr", "xxxxxxxx"), msg("aaaaaaaa", "rrrrrrrr"),
        msg("ssssssss", "aaaaaaaa")])
    tree.by_id["rrrrrrrr"].env.parent_id = "xxxxxxxx"
    tree.by_id["xxxxxxxx"].line = 9  # R's parent written after it: the walk turns careful at R
    walk = tree.ancestors("ssssssss")
    assert [next(walk).env.id for _ in range(3)] == ["ssssssss", "aaaaaaaa", "rrrrrrrr"]
    tree.by_id["rrrrrrrr"] = msgspec.structs.replace(tree.by_id["rrrrrrrr"], line=12)
    assert [record.env.id for record in walk] == ["xxxxxxxx"]


# -- labels and names -----------------------------------------------------------------------------


def test_labels_latest_wins_and_empty_clears(tmp_path: Path) -> None:
    tree = new_tree(tmp_path)
    a = tree.append_message(user("a"))
    b = tree.append_message(user("b"))
    tree.append_label(a, "first")
    tree.append_label(a, "  second  ")
    tree.append_label(b, "bee")
    assert tree.label(a) == "second"
    assert tree.labels == {a: "second", b: "bee"}
    tree.append_label(b, None)
    assert tree.label(b) is None
    tree.append_label(a, "   ")
    assert tree.label(a) is None
    tree.append_label(a, "third")
    assert SessionTree.open(tree.path).labels == {a: "third"}
    with pytest.raises(UnknownEntryError):
        tree.append_label("deadbeef", "x")


def test_hand_written_label_without_label_clears(tmp_path: Path) -> None:
    label = {"type": "label", "parentId": "aaaaaaaa", "timestamp": "2025-01-01T10:00:02.000Z",
             "targetId": "aaaaaaaa"}
    tree = write_session(tmp_path / "s.jsonl", [
        msg("aaaaaaaa", None),
        {**label, "id": "l1111111", "label": "old"},
        {**label, "id": "l2222222", "parentId": "l1111111", "label": "new"},
    ])
    assert tree.labels == {"aaaaaaaa": "new"}
    tree = write_session(tmp_path / "t.jsonl", [
        msg("aaaaaaaa", None),
        {**label, "id": "l1111111", "label": "old"},
        {**label, "id": "l2222222", "parentId": "l1111111"},
    ])
    assert tree.labels == {}
    tree = write_session(tmp_path / "u.jsonl", [
        msg("aaaaaaaa", None),
        {**label, "id": "l1111111", "label": "old"},
        {**label, "id": "l2222222", "parentId": "l1111111", "label": None},
    ])
    assert tree.labels == {}
    tree = write_session(tmp_path / "v.jsonl", [
        msg("aaaaaaaa", None),
        {**label, "id": "l1111111", "label": "old"},
        {**label, "id": "l2222222", "parentId": "l1111111", "label": ""},
    ])
    assert tree.labels == {}


@pytest.mark.parametrize(("value", "shown"), [
    (5, "5"), ({"a": 1}, '{"a":1}'), ([], "[]"), (True, "true"), (1.5, "1.5"), (0, None),
    ("", None)])
def test_a_label_of_another_type_labels_its_entry_as_pi_labels_it(
        tmp_path: Path, value: Any, shown: str | None) -> None:
    """A label entry whose label was no text could not be read: its target showed no label.
    pi 1.6 labels it with any value JavaScript reads as true (`if (entry.label)`), gives it as
    it is in getTree and a fork; editors show its JSON text."""
    tree = write_session(tmp_path / "s.jsonl", [
        msg("aaaaaaaa", None),
        entry("label", "bbbbbbbb", "aaaaaaaa", targetId="aaaaaaaa", label=value)])
    assert tree.label("aaaaaaaa") == shown
    held = value if shown is not None else None
    assert nested_tree(tree)[0].label == held
    (node,) = [n for n in TreeViews().view(HeldView(), tree).nodes if n.id == "aaaaaaaa"]
    assert node.label == shown
    fork = SessionTree.open(fork_session(tree, "aaaaaaaa").path)
    assert fork.label_value("aaaaaaaa") == held


def test_a_fork_writes_the_lines_it_changes_with_pis_numbers(tmp_path: Path) -> None:
    """A relinked entry and a label a fork writes again had their numbers in msgspec's form
    (1e-6, 1e21); pi 1.6's createBranchedSession writes them with JSON.stringify's (its lines
    on this file, but for the label's new id)."""
    tree = write_session(tmp_path / "s.jsonl", [
        msg("aaaaaaaa", None),
        entry("label", "bbbbbbbb", "aaaaaaaa", targetId="aaaaaaaa", label=1e21),
        {**msg("cccccccc", "bbbbbbbb"), "message": {"role": "user", "content": "hi",
                                                    "timestamp": 1e-6}}])
    lines = Path(fork_session(tree, "cccccccc").path).read_text("utf-8").splitlines()
    assert lines[2] == ('{"type":"message","id":"cccccccc","parentId":"aaaaaaaa","timestamp":'
                        '"2025-01-01T10:00:01.000Z","message":{"role":"user","content":"hi",'
                        '"timestamp":0.000001}}')
    assert lines[3].endswith('"targetId":"aaaaaaaa","label":1e+21}')


def test_a_tool_results_duration_is_kept_where_pi_writes_it(tmp_path: Path) -> None:
    """pi 1.6 writes `durationMs` on the result of each call it ran, before its timestamp: a
    result read back and written again (its message encoded) dropped it. A result without one
    (older files, calls not run) is read and written without one; a fork keeps both."""
    def result(entry_id: str, parent: str, **timed: Any) -> dict[str, Any]:
        return {**msg(entry_id, parent), "message": {
            "role": "toolResult", "toolCallId": "t1", "toolName": "read",
            "content": [{"type": "text", "text": "F"}], "isError": False, **timed,
            "timestamp": 5}}

    tree = write_session(tmp_path / "s.jsonl", [
        msg("aaaaaaaa", None),
        entry("label", "bbbbbbbb", "aaaaaaaa", targetId="aaaaaaaa", label="x"),
        result("cccccccc", "bbbbbbbb", durationMs=7),
        entry("label", "dddddddd", "cccccccc", targetId="aaaaaaaa", label="y"),
        result("eeeeeeee", "dddddddd")])
    lines = Path(fork_session(tree, "eeeeeeee").path).read_text("utf-8").splitlines()
    written = [line.split('"toolName":"read",', 1)[1] for line in lines if "toolResult" in line]
    assert written == [
        '"content":[{"type":"text","text":"F"}],"isError":false,"durationMs":7,"timestamp":5}}',
        '"content":[{"type":"text","text":"F"}],"isError":false,"timestamp":5}}']
    assert [json.loads(line)["parentId"] for line in lines if "toolResult" in line] == [
        "aaaaaaaa", "cccccccc"]  # both written again
    for line in written:
        message = '{"role":"toolResult","toolCallId":"t1","toolName":"read",' + line[:-1]
        decoded = msgspec.json.decode(message, type=ToolResultMessage)
        assert encoder.encode(decoded).decode() == message


# Sessions whose first path entry is a root that does not say null, and pi 1.6's fork of each
# at its leaf (tests/pi16_fork.mjs: the entry lines, for machines without pi).
FORK_ROOTS = Path(__file__).with_name("fixtures") / "pi16-fork-roots"
STORED_FORK_ROOTS = FORK_ROOTS.with_suffix(".json")


def test_the_stored_fork_roots_are_pi16s() -> None:
    node = pi16_node()
    if node is None:
        pytest.skip("pi 1.6 is not installed")
    files = sorted(FORK_ROOTS.glob("*.jsonl"))
    made = subprocess.run([node, str(Path(__file__).with_name("pi16_fork.mjs")),
                           str(PI16 / "@earendil-works"), *map(str, files)],
                          capture_output=True, text=True, timeout=PROCESS_CEILING_S)
    assert made.returncode == 0, made.stderr
    forks = json.loads(made.stdout)
    assert {path.name: forks[str(path)] for path in files} == \
        json.loads(STORED_FORK_ROOTS.read_text("utf-8"))


@pytest.mark.parametrize("name", sorted(json.loads(STORED_FORK_ROOTS.read_text("utf-8"))))
def test_a_forks_root_says_null_as_pi16_writes_it(tmp_path: Path, name: str) -> None:
    """A fork kept its root's line as the source held it (a parent not in the file, 5, false,
    "", no key), where pi 1.6's createBranchedSession writes every copied entry with the
    parent it has in the fork, `"parentId":null` for the root (a missing key added last)."""
    source = tmp_path / name
    shutil.copy(FORK_ROOTS / name, source)
    fork = fork_session(SessionTree.open(str(source)), "bbbbbbbb")
    assert Path(fork.path).read_text("utf-8").splitlines()[1:] == \
        json.loads(STORED_FORK_ROOTS.read_text("utf-8"))[name]


def test_a_fork_keeps_each_labels_timestamp_in_the_order_pi_sets_them(tmp_path: Path) -> None:
    """A fork stamped every label with the time of the fork, in path order; pi 1.6 keeps the
    timestamp of the label entry that set it as it is (a number, null, none) and writes the
    labels in the order they were set (one cleared and set again goes last)."""
    def label(entry_id: str, parent: str, target: str, text: str, **stamp: Any) -> dict[str, Any]:
        return {"type": "label", "id": entry_id, "parentId": parent, "targetId": target,
                "label": text, **stamp}

    tree = write_session(tmp_path / "s.jsonl", [
        msg("aaaaaaaa", None), msg("bbbbbbbb", "aaaaaaaa"), msg("cccccccc", "bbbbbbbb"),
        label("l0000001", "cccccccc", "cccccccc", "on c", timestamp=12345),
        label("l0000002", "l0000001", "aaaaaaaa", "on a", timestamp="2025-01-01T10:00:02.000Z"),
        label("l0000003", "l0000002", "bbbbbbbb", "on b"),
        label("l0000004", "l0000003", "cccccccc", "c again", timestamp={"odd": 1}),
        label("l0000005", "l0000004", "aaaaaaaa", ""),
        label("l0000006", "l0000005", "aaaaaaaa", "a again", timestamp=None),
        msg("dddddddd", "l0000006"),
    ])
    fork = fork_session(tree, "dddddddd")
    lines = [json.loads(line) for line in Path(fork.path).read_text("utf-8").splitlines()]
    assert [(e["targetId"], e["label"], e.get("timestamp", "none")) for e in lines
            if e["type"] == "label"] == [
        ("cccccccc", "c again", {"odd": 1}), ("bbbbbbbb", "on b", "none"),
        ("aaaaaaaa", "a again", None)]


def test_tree_places_id_less_entries_as_pi_s_get_tree_does(tmp_path: Path) -> None:
    """`tree --json` left out entries with no id, which pi 1.6's getTree holds: keyed by id,
    those of one key (none, null, 5) share the last one's node, its timestamp and children,
    and an absent parentId names that node; a node with no id has no `id` key, as
    JSON.stringify writes pi's. Expected: pi 1.6's getTree on this file."""
    tree = write_session(tmp_path / "s.jsonl", [
        msg("a", None), msg("x", "a", ts="2025-01-01T10:00:02.000Z"),
        without("id", msg("", "a", ts="2025-01-01T10:00:09.000Z")),
        without("parentId", msg("b", "x", ts="2025-01-01T10:00:03.000Z")),
        {**msg("", "a", ts="2025-01-01T10:00:04.000Z"), "id": 5},
        {**msg("", "", ts="2025-01-01T10:00:05.000Z"), "id": None, "parentId": 5},
        {"type": "custom", "customType": "note", "parentId": None,
         "timestamp": "2025-01-01T10:00:00.500Z"}])
    def node(entry_id: str | int | None, *children: dict[str, Any]) -> dict[str, Any]:
        return {"id": entry_id, "label": None, "children": list(children)}
    def idless(*children: dict[str, Any]) -> dict[str, Any]:
        return {"label": None, "children": list(children)}
    assert json.loads(msgspec.json.encode(nested_tree(tree))) == [
        node("a", idless(node("b")), node("x"), node(5, node(None))), idless(node("b"))]


def test_tree_labels_id_less_entries_as_pi_s_get_tree_does(tmp_path: Path) -> None:
    """A label whose targetId is missing, null, 0 (or -0) or false labels the entries of that
    id in pi 1.6's getTree (labelsById is a Map, keyed as its nodes are); `tree --json` gave
    them none. An object targetId matches no object id. Expected: pi 1.6's getTree."""
    def note(entry_id: Any, second: int) -> dict[str, Any]:
        return {"type": "custom", "customType": "n", "id": entry_id, "parentId": "a",
                "timestamp": f"2025-01-01T10:00:0{second}.000Z"}
    def label(entry_id: str, target: Any, text: str) -> dict[str, Any]:
        return {**entry("label", entry_id, "a", targetId=target, label=text),
                "timestamp": "2025-01-01T10:00:09.000Z"}
    tree = write_session(tmp_path / "s.jsonl", [
        msg("a", None), without("id", note(None, 2)), note(None, 3), note(0, 4), note(False, 5),
        note({}, 6), without("targetId", label("l1", None, "missing")),
        label("l2", None, "null"), label("l3", -0.0, "zero"), label("l4", False, "false"),
        label("l5", {}, "object")])
    def node(entry_id: Any, text: str | None) -> dict[str, Any]:
        return {"id": entry_id, "label": text, "children": []}
    assert json.loads(msgspec.json.encode(nested_tree(tree)))[0]["children"] == [
        {"label": "missing", "children": []}, node(None, "null"), node(0, "zero"),
        node(False, "false"), node({}, None), *(node(f"l{i}", None) for i in range(1, 6))]


def test_an_id_less_node_under_itself_is_shown_once(tmp_path: Path) -> None:
    """pi 1.6's getTree loops forever when the id-less node is its own descendant (its child
    `a` has no parentId, and one id-less entry hangs under `a`); the tree cuts it there."""
    tree = write_session(tmp_path / "s.jsonl", [
        without("parentId", msg("a", None)),
        {"type": "custom", "customType": "note", "parentId": None},
        {"type": "custom", "customType": "note", "parentId": "a"}])
    leaf = {"label": None, "children": []}  # no id: no `id` key, as JSON.stringify writes pi's
    assert json.loads(msgspec.json.encode(nested_tree(tree))) == [
        {"label": None, "children": [
            {"id": "a", "label": None, "children": [leaf]}]}]


def test_session_name_is_the_latest_and_a_blank_one_clears(tmp_path: Path) -> None:
    tree = new_tree(tmp_path)
    tree.append_message(user("a"))
    assert tree.name is None
    tree.append_session_info("first")
    tree.append_session_info(" second\r\nline\ufeff")
    assert tree.name == "second line"
    assert SessionTree.open(tree.path).name == "second line"
    tree.append_session_info("  \u2028 ")  # pi 0.73.1 and 1.6 both clear on a blank name
    assert tree.name is None
    assert json.loads(Path(tree.path).read_text("utf-8").splitlines()[-1])["name"] == ""
    assert SessionTree.open(tree.path).name is None


def test_the_settings_kept_for_a_path_follow_moves_and_appends(tmp_path: Path) -> None:
    """The level and model in force were read off the whole path at each ask (2.7 ms at 100k
    entries, a dozen times a turn); kept per path now, they must follow a move to another leaf,
    an append and another writer's append as a scan of the path does."""
    tree = new_tree(tmp_path)

    def in_force(leaf: str | None) -> tuple[Any, ModelRef | None]:
        settings = settings_at(tree, leaf)
        assert settings == context_settings(tree.path_to(leaf))
        return settings.stored_level, settings.model

    tree.append_message(user("u1"))
    assert in_force(tree.leaf_id) == ("off", None)
    tree.append_thinking_level_change("high")
    reply = tree.append_message(AssistantMessage(
        content=[TextContent(text="a")], api="messages", provider="anthropic", model="m",
        usage=Usage(), stop_reason="stop", timestamp=2))
    assert in_force(tree.leaf_id) == ("high", ModelRef("anthropic", "m"))
    tree.append_thinking_level_change("low")
    main = tree.append_message(user("u2"))
    assert in_force(main) == ("low", ModelRef("anthropic", "m"))
    tree.branch(reply)
    tree.append_model_change("openai", "gpt-5")
    assert in_force(tree.leaf_id) == ("high", ModelRef("openai", "gpt-5"))
    tree.branch(main)
    assert in_force(tree.leaf_id) == ("low", ModelRef("anthropic", "m"))
    other = SessionTree.open(tree.path)
    other.branch(main)
    other.append_thinking_level_change("medium")
    tree.refresh()
    assert in_force(tree.leaf_id) == ("medium", ModelRef("anthropic", "m"))
    assert in_force(reply) == ("high", ModelRef("anthropic", "m"))


def idless_leaf_chain(tmp_path: Path, leaf_id: Any = None) -> SessionTree:
    """Six messages of 100 words each, the last one's line without an id (or with `leaf_id`)."""
    entries = [msg(f"m000000{n}", f"m000000{n - 1}" if n else None, "word " * 100)
               for n in range(6)]
    if leaf_id is None:
        del entries[-1]["id"]
    else:
        entries[-1]["id"] = leaf_id
    return write_session(tmp_path / "s.jsonl", entries)


@pytest.mark.parametrize("leaf_id", [None, ""])
@pytest.mark.parametrize("automatic", [False, True])
def test_a_compaction_at_an_id_less_leaf_is_refused(tmp_path: Path, automatic: bool,
                                                    leaf_id: str | None) -> None:
    """At a last line with no id (or the id ""), a compaction was written as a new root (at "",
    under the "" line), its first kept entry off its own path: the context there became the
    summary alone. pi 1.6 compacts its getBranch(), which is empty there (it tests the leaf's
    id for truth), so it compacts nothing."""
    tree = idless_leaf_chain(tmp_path, leaf_id)
    before = Path(tree.path).read_bytes()
    words = "line 7\\) has no id" if not automatic else "the path is empty"
    with pytest.raises(NothingToCompactError, match=words):
        asyncio.run(compact(tree, tree.leaf_id, ExtractiveSummarizer(),
                            CompactionSettings(keep_recent_tokens=150), automatic=automatic))
    assert Path(tree.path).read_bytes() == before


@pytest.mark.parametrize(("leaf_id", "words"), [
    (5, "the leaf \\(line 7\\) has the id 5, which is not text"),
    (True, "the leaf \\(line 7\\) has the id true, which is not text"),
    (0, "the leaf \\(line 7\\) has no id pi can use \\(0\\), so pi has no branch there"),
    (False, "the leaf \\(line 7\\) has no id pi can use \\(false\\)"),
    ("", 'the leaf \\(line 7\\) has no id pi can use \\(""\\)')])
def test_a_compaction_refused_at_a_leaf_says_what_its_id_is(tmp_path: Path, leaf_id: Any,
                                                            words: str) -> None:
    """At a last line whose id is 5 or true pi compacts (pi-lsp cannot name that leaf); at 0,
    false or "" pi has no branch. Each was refused as a leaf with "no id"."""
    tree = idless_leaf_chain(tmp_path, leaf_id)
    with pytest.raises(NothingToCompactError, match=words):
        asyncio.run(compact(tree, tree.leaf_id, ExtractiveSummarizer(),
                            CompactionSettings(keep_recent_tokens=150)))


@pytest.mark.parametrize("leaf_id", [None, "", 0, False])
def test_pi16_has_no_branch_at_an_id_less_leaf(tmp_path: Path, leaf_id: Any) -> None:
    """What the refusal above stands on: pi 1.6's getBranch() there is empty, though its
    context holds the six messages."""
    path = idless_leaf_chain(tmp_path, leaf_id).path
    assert pi16_eval(f"const s = pi.SessionManager.open({json.dumps(path)});"
                     "process.stdout.write(JSON.stringify([s.getBranch().length, "
                     "s.buildSessionContext().messages.length]));") == "[0,6]"


@pytest.mark.parametrize("leaf_id", [None, ""])
def test_a_branch_with_summary_from_an_id_less_leaf_summarizes_nothing(
        tmp_path: Path, leaf_id: Any) -> None:
    """pi 1.6 collects nothing to summarize from a leaf whose id is not true (`if
    (!oldLeafId)`), so it only moves; from a leaf whose id is "" pi-lsp summarized the path up
    from it and wrote a branch_summary with "fromId":"root"."""
    tree = idless_leaf_chain(tmp_path, leaf_id)
    outcome = asyncio.run(branch_with_summary(tree, "m0000002", ExtractiveSummarizer(), 10_000))
    assert (outcome.leaf_id is not None, outcome.summary_entry_id) == (True, None)
    written = [json.loads(line)["type"] for line in Path(tree.path).read_bytes().splitlines()]
    assert "branch_summary" not in written


@pytest.mark.parametrize("leaf_id", [None, ""])
def test_pi16_collects_no_branch_entries_from_an_id_less_leaf(tmp_path: Path,
                                                              leaf_id: Any) -> None:
    path = idless_leaf_chain(tmp_path, leaf_id).path
    assert pi16_eval(f"const s = pi.SessionManager.open({json.dumps(path)});"
                     "const found = pi.collectEntriesForBranchSummary(s, s.getLeafId(), "
                     "'m0000002');"
                     "process.stdout.write(JSON.stringify(found.entries.length));") == "0"


def test_context_after_a_compaction(tmp_path: Path) -> None:
    tree = new_tree(tmp_path)
    tree.append_message(user("u1"))
    u2 = tree.append_message(user("u2"))
    tree.append_thinking_level_change("low")
    tree.append_message(user("u3"))
    tree.append_compaction("summary one", u2, 42)
    tree.append_message(user("u4"))
    ctx = build_session_context(tree, tree.leaf_id)
    messages = [json.loads(bytes(m)) for m in ctx.messages]
    assert [m["role"] for m in messages] == ["compactionSummary", "user", "user", "user"]
    assert messages[0]["summary"] == "summary one"
    assert messages[0]["tokensBefore"] == 42
    assert [m.get("content") for m in messages[1:]] == ["u2", "u3", "u4"]
    assert ctx.thinking_level == "low"
    # A second compaction wins; its firstKeptEntryId not on the path keeps nothing before it.
    tree.append_compaction("summary two", "deadbeef", 7)
    tree.append_message(user("u5"))
    messages = [json.loads(bytes(m)) for m in build_session_context(tree, tree.leaf_id).messages]
    assert [m.get("summary") or m.get("content") for m in messages] == ["summary two", "u5"]
    # One that keeps from the path's first entry keeps every message before it; the level set
    # near the root and the model set last are both in force.
    first = tree.path_ids(tree.leaf_id)[0]
    tree.append_model_change("openai", "gpt-5")
    tree.append_compaction("summary three", first, 9)
    ctx = build_session_context(tree, tree.leaf_id)
    messages = [json.loads(bytes(m)) for m in ctx.messages]
    assert [m.get("summary") or m.get("content") for m in messages] == \
        ["summary three", "u1", "u2", "u3", "u4", "u5"]
    assert ctx.thinking_level == "low" and ctx.model is not None
    assert (ctx.model.provider, ctx.model.model_id) == ("openai", "gpt-5")


# -- common ancestor --------------------------------------------------------------------------


def test_an_extensions_compaction_without_a_whole_count_still_compacts(tmp_path: Path) -> None:
    """An extension's compaction with no tokensBefore, or 1234.5, or no firstKeptEntryId was
    unreadable, so the whole history came back; pi reads every compaction as it is."""
    head = [msg("aaaaaaaa", None, "old"), entry("message", "bbbbbbbb", "aaaaaaaa",
                                                message=assistant_text("old answer")),
            msg("cccccccc", "bbbbbbbb", "kept")]
    for fields, count in (({"firstKeptEntryId": "cccccccc"}, None),
                          ({"firstKeptEntryId": "cccccccc", "tokensBefore": 1234.5}, 1234.5),
                          ({"tokensBefore": 500}, 500)):
        tree = write_session(tmp_path / "s.jsonl", [
            *head, entry("compaction", "dddddddd", "cccccccc", summary="S", fromHook=True,
                         **fields),
            msg("eeeeeeee", "dddddddd", "new"),
            entry("message", "ffffffff", "eeeeeeee", message=assistant_text("new answer"))])
        messages = [json.loads(bytes(m)) for m in
                    build_session_context(tree, "eeeeeeee").messages]
        kept = ["kept"] if "firstKeptEntryId" in fields else []
        assert [m.get("summary") or m["content"] for m in messages] == ["S", *kept, "new"]
        assert messages[0].get("tokensBefore") == count
        assert check_session(tree) == []
        assert entry_preview(decode_entry(tree.by_id["dddddddd"])) == (
            "compaction: S" if count is None else f"compaction ({count} tokens before): S")
        plan = prepare_compaction(tree.path_to("ffffffff"),
                                  CompactionSettings(keep_recent_tokens=1))
        assert plan is not None and plan.previous_summary == "S"


def test_a_compaction_whose_from_hook_is_no_boolean_still_compacts(tmp_path: Path) -> None:
    """A hand-edited fromHook ("yes") made the compaction unreadable and the whole history came
    back; pi reads it, and takes its file lists into the next plan only when it is falsy."""
    for from_hook, carried in (("yes", []), ("", ["a.py"]), ([], [])):
        tree = write_session(tmp_path / "s.jsonl", [
            msg("aaaaaaaa", None, "old"),
            entry("compaction", "bbbbbbbb", "aaaaaaaa", summary="S", firstKeptEntryId="bbbbbbbb",
                  tokensBefore=10, fromHook=from_hook,
                  details={"readFiles": ["a.py"], "modifiedFiles": []}),
            msg("cccccccc", "bbbbbbbb", "new"),
            entry("message", "dddddddd", "cccccccc", message=assistant_text("new answer"))])
        assert texts(tree, "cccccccc") == [None, "new"]
        plan = prepare_compaction(tree.path_to("dddddddd"),
                                  CompactionSettings(keep_recent_tokens=1))
        assert plan is not None and plan.files.read_files == carried


def test_common_ancestor(tmp_path: Path) -> None:
    tree = new_tree(tmp_path)
    root = tree.append_message(user("root"))
    a = tree.append_message(user("a"))
    b = tree.append_message(user("b"))
    tree.branch(a)
    c = tree.append_message(user("c"))
    d = tree.append_message(user("d"))
    tree.branch(root)
    e = tree.append_message(user("e"))
    tree.reset_leaf()
    other = tree.append_message(user("other"))
    assert tree.common_ancestor(b, d) == a
    assert tree.common_ancestor(d, b) == a
    assert tree.common_ancestor(b, c) == a
    assert tree.common_ancestor(b, e) == root
    assert tree.common_ancestor(b, b) == b
    assert tree.common_ancestor(a, d) == a
    assert tree.common_ancestor(b, other) is None
    assert tree.common_ancestor(None, b) is None


# -- check_session ------------------------------------------------------------------------------


def assistant_with_call(call_id: str) -> dict[str, Any]:
    message = AssistantMessage(
        content=[TextContent(text="t"), ToolCall(id=call_id, name="read", arguments={"p": 1})],
        api="messages", provider="anthropic", model="m", usage=Usage(), stop_reason="toolUse",
        timestamp=2,
    )
    return json.loads(msgspec.json.encode(message))


def tool_result(call_id: str) -> dict[str, Any]:
    message = ToolResultMessage(tool_call_id=call_id, tool_name="read",
                                content=[TextContent(text="ok")], is_error=False, timestamp=3)
    return json.loads(msgspec.json.encode(message))


def entry(kind: str, entry_id: str, parent: str | None, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "id": entry_id, "parentId": parent,
            "timestamp": "2025-01-01T10:00:02.000Z", **fields}


def test_check_clean_file_reports_nothing(tmp_path: Path) -> None:
    tree = write_session(tmp_path / "s.jsonl", [
        msg("aaaaaaaa", None),
        entry("message", "bbbbbbbb", "aaaaaaaa", message=assistant_with_call("call_1")),
        entry("message", "cccccccc", "bbbbbbbb", message=tool_result("call_1")),
        entry("compaction", "dddddddd", "cccccccc", summary="s", firstKeptEntryId="bbbbbbbb",
              tokensBefore=10),
        entry("label", "eeeeeeee", "dddddddd", targetId="aaaaaaaa", label="x"),
        entry("leaf", "ffffffff", "bbbbbbbb", targetId="bbbbbbbb"),
    ])
    assert check_session(tree) == []


def test_check_reports_each_problem(tmp_path: Path) -> None:
    tree = write_session(tmp_path / "s.jsonl", [
        msg("aaaaaaaa", None),
        msg("bbbbbbbb", "99999999"),
        entry("compaction", "cccccccc", "aaaaaaaa", summary="s", firstKeptEntryId="88888888",
              tokensBefore=10),
        entry("label", "dddddddd", "cccccccc", targetId="77777777", label="x"),
        entry("message", "eeeeeeee", "dddddddd", message=assistant_with_call("call_9")),
        entry("message", "ffffffff", "eeeeeeee",
              message=json.loads(msgspec.json.encode(user("not a result")))),
    ])
    problems = check_session(tree)
    found = {(p.kind, p.entry_id) for p in problems}
    assert ("orphan", "bbbbbbbb") in found
    assert ("dangling-reference", "cccccccc") in found
    assert ("dangling-reference", "dddddddd") in found
    assert ("missing-tool-result", "eeeeeeee") in found
    by_entry = {p.entry_id: p for p in problems}
    assert "firstKeptEntryId" in by_entry["cccccccc"].message
    assert "targetId" in by_entry["dddddddd"].message
    assert "call_9" in by_entry["eeeeeeee"].message
    assert len(problems) == 4
    assert [p.line for p in problems] == sorted(p.line or 0 for p in problems)


def test_check_asks_no_result_for_the_calls_of_a_failed_or_aborted_reply(tmp_path: Path) -> None:
    """Such calls were reported without a result, and the repair said to add one: pi 1.6 would
    send that result with no call before it (its requests drop the reply), which APIs refuse."""
    failed = {**assistant_with_call("call_1"), "stopReason": "error", "errorMessage": "boom"}
    aborted = {**assistant_with_call("call_2"), "stopReason": "aborted"}
    tree = write_session(tmp_path / "s.jsonl", [
        msg("aaaaaaaa", None),
        entry("message", "bbbbbbbb", "aaaaaaaa", message=failed),
        entry("message", "cccccccc", "bbbbbbbb", message=aborted),
    ])
    assert check_session(tree) == []


# -- pi 1.6: context edits, system messages, compaction checkpoints -------------------------------


def assistant_text(text: str) -> dict[str, Any]:
    return json.loads(msgspec.json.encode(AssistantMessage(
        content=[TextContent(text=text)], api="messages", provider="anthropic", model="m",
        usage=Usage(), stop_reason="stop", timestamp=2)))


def edit(entry_id: str, parent: str, target: str, replacement: Any) -> dict[str, Any]:
    return entry("context_edit", entry_id, parent, targetId=target, replacement=replacement)


def test_context_edits_apply_on_their_own_path_only(tmp_path: Path) -> None:
    tree = write_session(tmp_path / "s.jsonl", [
        msg("aaaaaaaa", None, "huge output"),
        entry("message", "bbbbbbbb", "aaaaaaaa", message=assistant_text("answer")),
        edit("cccccccc", "bbbbbbbb", "aaaaaaaa", None),
        edit("dddddddd", "cccccccc", "bbbbbbbb", {"content": "short"}),
        msg("eeeeeeee", "dddddddd", "next"),
        msg("ffffffff", "bbbbbbbb", "other branch"),
    ])
    # The omitted user message is gone; a string replaces a reply's content as one text block.
    assert texts(tree, "eeeeeeee") == [[{"type": "text", "text": "short"}], "next"]
    built = build_session_context(tree, "eeeeeeee")
    assert json.loads(bytes(built.messages[0]))["model"] == "m"  # only the content changed
    # On another branch, and above the edits, the originals are back.
    assert texts(tree, "ffffffff") == ["huge output", [{"type": "text", "text": "answer"}],
                                       "other branch"]
    assert texts(tree, "cccccccc") == [[{"type": "text", "text": "answer"}]]


def test_latest_edit_wins_and_restores_the_original(tmp_path: Path) -> None:
    tree = write_session(tmp_path / "s.jsonl", [
        msg("aaaaaaaa", None, "original"),
        edit("bbbbbbbb", "aaaaaaaa", "aaaaaaaa", None),
        edit("cccccccc", "bbbbbbbb", "aaaaaaaa", {"content": "original"}),
    ])
    assert texts(tree, "bbbbbbbb") == []
    assert texts(tree, "cccccccc") == ["original"]


def test_system_messages_reach_the_model_layer_and_compactions_put_theirs_first(
        tmp_path: Path) -> None:
    system = {"role": "system", "content": "", "sections": {"preamble": "be brief"},
              "timestamp": 1, "toolsAdded": [{"name": "read", "description": "r",
                                              "parameters": {}}]}
    checkpoint = {**system, "sections": {"preamble": "be briefer"}, "timestamp": 5}
    tree = write_session(tmp_path / "s.jsonl", [
        entry("message", "aaaaaaaa", None, message=system),
        msg("bbbbbbbb", "aaaaaaaa", "one"),
        entry("message", "cccccccc", "bbbbbbbb", message={**system, "timestamp": 3}),
        msg("dddddddd", "cccccccc", "two"),
        entry("compaction", "eeeeeeee", "dddddddd", summary="s", firstKeptEntryId="bbbbbbbb",
              tokensBefore=10, systemMessage=checkpoint),
        entry("compaction", "ffffffff", "eeeeeeee", summary="t", firstKeptEntryId="ffffffff",
              tokensBefore=10),
    ])
    before = build_session_context(tree, "dddddddd").messages
    assert [json.loads(bytes(m))["role"] for m in convert_to_llm(before)] == \
        ["system", "user", "system", "user"]
    roles = [(m["role"], m.get("timestamp")) for m in
             (json.loads(bytes(raw)) for raw in build_session_context(tree, "eeeeeeee").messages)]
    # The checkpoint first, then the summary, then the kept range without its system message.
    assert roles[:2] == [("system", 5), ("compactionSummary", iso_to_ms(
        "2025-01-01T10:00:02.000Z"))]
    assert [r for r, _ in roles[2:]] == ["user", "user"]
    # A compaction that keeps nothing (its own id) and carries no checkpoint: summary only.
    assert [json.loads(bytes(m))["role"] for m in
            build_session_context(tree, "ffffffff").messages] == ["compactionSummary"]


def test_null_content_and_custom_message_without_content_read_as_empty(tmp_path: Path) -> None:
    tree = write_session(tmp_path / "s.jsonl", [
        entry("message", "aaaaaaaa", None, message={"role": "user", "content": None,
                                                     "timestamp": 1}),
        entry("custom_message", "bbbbbbbb", "aaaaaaaa", customType="note", display=True),
    ])
    assert texts(tree, "bbbbbbbb") == [[], []]


def test_a_custom_message_without_display_is_in_the_context(tmp_path: Path) -> None:
    """A custom_message an extension wrote without `display` was dropped from the context,
    the compaction and branch-summary inputs and the estimates; pi puts it in the context."""
    tree = write_session(tmp_path / "s.jsonl", [
        msg("aaaaaaaa", None, "run the linter"),
        entry("message", "bbbbbbbb", "aaaaaaaa", message=assistant_text("ok")),
        entry("custom_message", "cccccccc", "bbbbbbbb", customType="lint", content="3 errors"),
        msg("dddddddd", "cccccccc", "fix them"),
        entry("message", "eeeeeeee", "dddddddd", message=assistant_text("done")),
    ])
    messages = [json.loads(bytes(m)) for m in build_session_context(tree, "dddddddd").messages]
    assert messages[2] == {"role": "custom", "customType": "lint", "content": "3 errors",
                           "timestamp": iso_to_ms("2025-01-01T10:00:02.000Z")}
    plan = prepare_compaction(tree.path_to("eeeeeeee"), CompactionSettings(keep_recent_tokens=1))
    assert plan is not None
    assert [role_of(m) for m in plan.messages_to_summarize] == ["user", "assistant", "custom"]
    branch = fit_branch_messages(tree.path_to("dddddddd"), 0)
    assert [role_of(m) for m in branch.messages] == ["user", "assistant", "custom", "user"]


STAMP_MS = iso_to_ms("2025-01-01T10:00:02.000Z")
LATER_MS = 1735725700000  # 2025-01-01T10:01:40.000Z, later than every other stamp


def llm_text(raw: msgspec.Raw) -> str:
    """The text of the one model message `raw` becomes."""
    (converted,) = convert_to_llm([raw])
    return str(json.loads(bytes(converted))["content"][0]["text"])


def test_branch_summaries_with_fields_of_other_types_are_read_as_pi_reads_them(
        tmp_path: Path) -> None:
    """A branch_summary whose fromHook was no boolean, whose fromId was missing, null or a
    number, or whose summary was a number or an object was unreadable and left out; pi 1.6
    carries each field as it is (a summary into the model's text as JavaScript writes it) and
    takes its file lists unless fromHook is true to JavaScript (an empty object is)."""
    for fields, text, carried in (({"fromHook": "yes"}, "S", []), ({"fromHook": {}}, "S", []),
                                  ({"fromHook": 0}, "S", ["a.py"]),
                                  ({"fromId": None}, "S", ["a.py"]),
                                  ({"summary": 5, "fromId": 7}, "5", ["a.py"]),
                                  ({"summary": {"a": 1}}, "[object Object]", ["a.py"])):
        fields = {"summary": "S", **fields}  # no fromId unless given
        tree = write_session(tmp_path / "s.jsonl", [
            msg("aaaaaaaa", None),
            entry("branch_summary", "bbbbbbbb", "aaaaaaaa",
                  details={"readFiles": ["a.py"], "modifiedFiles": []}, **fields),
            msg("cccccccc", "bbbbbbbb", "back")])
        raw = build_session_context(tree, "cccccccc").messages[1]
        shown = {key: fields[key] for key in ("summary", "fromId") if key in fields}
        assert json.loads(bytes(raw)) == {"role": "branchSummary", **shown, "timestamp": STAMP_MS}
        assert llm_text(raw).endswith(f"<branch_exploration_summary>\n{text}\n"
                                      "</branch_exploration_summary>"), fields
        branch = fit_branch_messages(tree.path_to("cccccccc"), 0)
        assert len(branch.messages) == 3 and branch.files.lists().read_files == carried, fields
        assert entry_preview(decode_entry(tree.by_id["bbbbbbbb"])) == f"branch summary: {text}"


def test_compactions_with_fields_of_other_types_are_read_as_pi_reads_them(
        tmp_path: Path) -> None:
    """A compaction whose summary was missing, null, a number or an object, whose
    firstKeptEntryId was a number or an object, whose tokensBefore was past a double's range
    (1e400: msgspec's "Number out of range") or whose timestamp was a number, null or missing
    was unreadable: the whole history came back, and the plan had no previous summary. pi 1.6
    carries each as it is: the number names no kept entry, 1e400 is Infinity (null in JSON),
    and the stamp reads as `new Date(timestamp)` does."""
    head = [msg("aaaaaaaa", None, "old"),
            entry("message", "bbbbbbbb", "aaaaaaaa", message=assistant_text("old answer")),
            msg("cccccccc", "bbbbbbbb", "kept")]
    missing = object()
    for changes, stamp, kept in (({"summary": missing}, STAMP_MS, ["kept"]),
                                 ({"summary": None}, STAMP_MS, ["kept"]),
                                 ({"summary": 5}, STAMP_MS, ["kept"]),
                                 ({"summary": {"a": 1}}, STAMP_MS, ["kept"]),
                                 ({"firstKeptEntryId": 123}, STAMP_MS, []),
                                 ({"firstKeptEntryId": {}}, STAMP_MS, []),
                                 ({"tokensBefore": math.inf}, STAMP_MS, ["kept"]),
                                 ({"timestamp": LATER_MS}, LATER_MS, ["kept"]),
                                 ({"timestamp": None}, 0, ["kept"]),
                                 ({"timestamp": missing}, None, ["kept"])):
        fields = {"summary": "S", "firstKeptEntryId": "cccccccc", "tokensBefore": 10,
                  "details": {"readFiles": ["a.py"], "modifiedFiles": []}, **changes}
        compaction = {key: value for key, value in
                      entry("compaction", "dddddddd", "cccccccc", **fields).items()
                      if value is not missing}
        path = tmp_path / "s.jsonl"
        write_session(path, [
            *head, compaction, msg("eeeeeeee", "dddddddd", "new"),
            entry("message", "ffffffff", "eeeeeeee", message=assistant_text("new answer"))])
        path.write_text(path.read_text().replace("Infinity", "1e400"))  # json.dumps' word
        tree = SessionTree.open(str(path))
        assert tree.problems == [], changes
        messages = [json.loads(bytes(m)) for m in
                    build_session_context(tree, "eeeeeeee").messages]
        summary = {key: compaction[key] for key in ("summary", "tokensBefore") if key in compaction}
        if summary["tokensBefore"] == math.inf:
            summary["tokensBefore"] = None  # JSON.stringify(Infinity)
        assert messages[0] == {"role": "compactionSummary", **summary, "timestamp": stamp}
        assert [m["content"] for m in messages[1:]] == [*kept, "new"], changes
        plan = prepare_compaction(tree.path_to("ffffffff"),
                                  CompactionSettings(keep_recent_tokens=1))
        assert plan is not None and plan.files.read_files == ["a.py"]
        assert plan.previous_summary == compaction.get("summary", msgspec.UNSET)
        entry_preview(decode_entry(tree.by_id["dddddddd"]))  # no error
        assert [p.kind for p in check_session(tree)] == \
            ([] if kept else ["dangling-reference"]), changes
        fork_session(tree, "ffffffff")  # no error
        (node,) = [n for n in TreeViews().view(HeldView(), tree).nodes if n.id == "dddddddd"]
        shown = "2025-01-01T10:01:40.000Z" if stamp == LATER_MS else compaction.get("timestamp")
        assert node.timestamp == shown  # the editor's row
        # The session's time is its messages' own (2 ms, the answer's), whatever the
        # compaction's stamp: pi 1.6 dates a session by user and assistant messages alone.
        assert summarize(path).modified == "1970-01-01T00:00:00.002Z", changes


def test_custom_messages_with_a_custom_type_of_another_type_are_in_the_context(
        tmp_path: Path) -> None:
    """A custom_message whose customType was missing or no string was unreadable and left out
    of the context; pi 1.6 carries it as it is."""
    for changes in ({}, {"customType": None}, {"customType": 5}, {"customType": {"a": 1}}):
        tree = write_session(tmp_path / "s.jsonl", [
            msg("aaaaaaaa", None),
            entry("custom_message", "bbbbbbbb", "aaaaaaaa", content="3 errors", **changes)])
        (raw,) = build_session_context(tree, "bbbbbbbb").messages[1:]
        assert json.loads(bytes(raw)) == {"role": "custom", **changes, "content": "3 errors",
                                          "timestamp": STAMP_MS}
        assert llm_text(raw) == "3 errors"
        entry_preview(decode_entry(tree.by_id["bbbbbbbb"]))  # no error


def test_a_custom_message_s_null_details_stay_in_the_context(tmp_path: Path) -> None:
    """`"details": null` was left out of the custom message, as a missing one is; pi 1.6's
    createCustomMessage carries it as it is (a missing one is undefined, left out)."""
    for changes in ({}, {"details": None}, {"details": 0}):
        tree = write_session(tmp_path / "s.jsonl", [
            msg("aaaaaaaa", None),
            entry("custom_message", "bbbbbbbb", "aaaaaaaa", customType="x", content="c",
                  display=True, **changes)])
        (raw,) = build_session_context(tree, "bbbbbbbb").messages[1:]
        assert json.loads(bytes(raw)) == {"role": "custom", "customType": "x", "content": "c",
                                          "display": True, **changes, "timestamp": STAMP_MS}


def test_check_reports_context_edits_that_edit_nothing(tmp_path: Path) -> None:
    tree = write_session(tmp_path / "s.jsonl", [
        msg("aaaaaaaa", None),
        msg("bbbbbbbb", "aaaaaaaa"),
        msg("cccccccc", "aaaaaaaa"),
        edit("dddddddd", "cccccccc", "bbbbbbbb", None),
        edit("eeeeeeee", "dddddddd", "99999999", None),
        entry("context_edit", "ffffffff", "eeeeeeee", targetId="aaaaaaaa"),
        edit("abababab", "ffffffff", "aaaaaaaa", {"content": "fine"}),
    ])
    found = {(p.kind, p.entry_id) for p in check_session(tree)}
    assert found == {("edit-off-path", "dddddddd"), ("dangling-reference", "eeeeeeee"),
                     ("unreadable-edit", "ffffffff")}


async def test_a_compaction_carries_the_replayed_system_message(tmp_path: Path) -> None:
    first = {"role": "system", "content": "", "sections": {"preamble": "be brief", "cwd": "x"},
             "timestamp": 1, "toolsAdded": [{"name": "read", "description": "r",
                                             "parameters": {}},
                                            {"name": "bash", "description": "b",
                                             "parameters": {}}]}
    patch = {"role": "system", "content": "", "sections": {"cwd": None}, "timestamp": 2,
             "toolsRemoved": [{"name": "bash"}]}
    tree = write_session(tmp_path / "s.jsonl", [
        entry("message", "aaaaaaaa", None, message=first),
        msg("bbbbbbbb", "aaaaaaaa", "x" * 400),
        entry("message", "cccccccc", "bbbbbbbb", message=patch),
        entry("message", "dddddddd", "cccccccc", message=assistant_text("y" * 400)),
        msg("eeeeeeee", "dddddddd", "z" * 400),
    ])
    result = await compact(tree, "eeeeeeee", ExtractiveSummarizer(),
                           CompactionSettings(keep_recent_tokens=50))
    line = json.loads(Path(tree.path).read_text("utf-8").splitlines()[-1])
    assert line["fromHook"] is False
    assert list(line)[-2:] == ["fromHook", "systemMessage"]
    # The prompt and tools in force, folded into one, stamped with the compaction's time.
    assert line["systemMessage"] == {
        "role": "system", "content": "", "sections": {"preamble": "be brief"},
        "toolsAdded": [first["toolsAdded"][0]], "timestamp": iso_to_ms(line["timestamp"])}
    assert list(line["systemMessage"]) == ["role", "content", "sections", "toolsAdded",
                                           "timestamp"]
    roles = [json.loads(bytes(m))["role"] for m in
             build_session_context(tree, result.entry_id).messages]
    assert roles[:2] == ["system", "compactionSummary"] and "system" not in roles[2:]


@pytest.mark.parametrize(("stamp", "shown"), [
    (LATER_MS, "2025-01-01T10:01:40.000Z"), (None, None), (True, "1970-01-01T00:00:00.001Z"),
    ([2020], "2020-01-01T00:00:00.000Z"), ({}, None)])
def test_typed_entries_with_a_stamp_of_another_type_are_read_as_pi_reads_them(
        tmp_path: Path, stamp: Any, shown: str | None) -> None:
    """A message, model or thinking level change, label, name or custom entry whose timestamp
    was no string was unreadable: its model not used, label and name lost, a prompt's row blank
    and navigation to it failing. pi 1.6 reads any stamp as `new Date(timestamp)`."""
    path = tmp_path / "s.jsonl"
    entries = [
        {**HEADER, "timestamp": 5},  # NaN to pi, which still opens and lists it
        {**entry("custom", "99999999", None, customType="ext"), "timestamp": stamp},
        {**msg("aaaaaaaa", "99999999", "the prompt"), "timestamp": stamp},
        {**entry("model_change", "bbbbbbbb", "aaaaaaaa", provider="openai", modelId="gpt-5"),
         "timestamp": stamp},
        {**entry("thinking_level_change", "cccccccc", "bbbbbbbb", thinkingLevel="high"),
         "timestamp": stamp},
        {**entry("label", "dddddddd", "cccccccc", targetId="aaaaaaaa", label="start"),
         "timestamp": stamp},
        {**entry("session_info", "eeeeeeee", "dddddddd", name="named"), "timestamp": stamp}]
    path.write_text("".join(json.dumps(line) + "\n" for line in entries), encoding="utf-8")
    tree = SessionTree.open(str(path))
    assert tree.problems == [] and tree.leaf_id == "eeeeeeee"
    built = build_session_context(tree, "eeeeeeee")
    assert (built.model, built.thinking_level) == (ModelRef("openai", "gpt-5"), "high")
    assert navigation(tree, "aaaaaaaa") == Navigation("99999999", "the prompt")
    assert tree.label("aaaaaaaa") == "start"
    (node,) = [n for n in TreeViews().view(HeldView(), tree).nodes if n.id == "aaaaaaaa"]
    assert (node.role, node.preview, node.timestamp) == ("user", "the prompt", shown)
    listed = summarize(path)
    assert (listed.name, listed.created) == ("named", "1970-01-01T00:00:00.005Z")


def test_system_messages_and_context_edits_say_what_they_are_in_the_tree(tmp_path: Path
                                                                         ) -> None:
    """pi 1.6's system entries and context edits were drawn as bare rows ("system: " and
    nothing): the prompt's text, the sections a patch changes, and what an edit does."""
    tree = write_session(tmp_path / "s.jsonl", [
        entry("message", "aaaaaaaa", None, message={
            "role": "system", "content": "You are\npi.", "timestamp": 1}),
        entry("message", "bbbbbbbb", "aaaaaaaa", message={
            "role": "system", "content": "", "sections": {"skills": "x", "tools": None},
            "timestamp": 2}),
        msg("cccccccc", "bbbbbbbb", "question"),
        entry("context_edit", "dddddddd", "cccccccc", targetId="cccccccc", replacement=None),
        entry("context_edit", "eeeeeeee", "dddddddd", targetId="cc\u202ecc",
              replacement={"content": "shorter"})])
    previews = [entry_preview(decode_entry(tree.by_id[entry_id]))
                for entry_id in ("aaaaaaaa", "bbbbbbbb", "dddddddd", "eeeeeeee")]
    assert previews == ["You are pi.", "sections: skills, tools", "context omit: cccccccc",
                        "context replace: cc cc"]


def test_an_id_an_editor_cannot_send_back_is_named_so() -> None:
    """Editors are sent U+FFFD for a lone surrogate in an id; the id they send back named no
    entry and said only that, though the entry is in the session."""
    assert "cannot be named from an editor" in str(UnknownEntryError("tip\ufffd"))
    assert str(UnknownEntryError("tip")) == "no entry with id 'tip' in this session"


def test_id_less_nodes_beside_half_an_emoji_are_placed(tmp_path: Path) -> None:
    """`tree --json` failed ("JSON is malformed") on a session with an id-less entry when a line
    it reads for links held a lone surrogate escape, which pi writes and reads."""
    tree = write_session(tmp_path / "s.jsonl", [
        msg("a", None, "half \ud800 pair"),
        {"type": "custom", "customType": "note", "parentId": "a", "data": "half \udc00"}])
    assert json.loads(msgspec.json.encode(nested_tree(tree))) == [
        {"id": "a", "label": None, "children": [{"label": None, "children": []}]}]


def paths_asked_while_a_worker_waits(tree: SessionTree, line: int, worker_leaf: str,
                                     loop_leaf: str) -> tuple[list[str], list[str]]:
    """The path to `loop_leaf` asked on this thread while a worker thread asking the path to
    `worker_leaf` is held at `line` of SessionTree._held; then the worker's path."""
    at_line, go = threading.Event(), threading.Event()
    got: list[list[str]] = []

    def paused_at_line(frame: Any, event: str, _arg: Any) -> Any:
        if frame.f_code is SessionTree._held.__code__ and event == "line" and \
                frame.f_lineno == line:
            at_line.set()
            go.wait(CEILING_S)  # a failed test leaves no thread behind
        return paused_at_line

    def worker() -> None:
        sys.settrace(paused_at_line)
        try:
            got.append(tree.path_ids(worker_leaf))
        finally:
            sys.settrace(None)
    thread = threading.Thread(target=worker)
    thread.start()
    assert at_line.wait(CEILING_S)
    on_loop = tree.path_ids(loop_leaf)
    go.set()
    thread.join()
    return on_loop, got[0]


def test_a_path_asked_in_a_worker_thread_is_the_one_asked_while_the_loop_asks_another(
        tmp_path: Path) -> None:
    """A large view is folded in a worker thread (hub.view) while the loop answers a preview
    or a diff of the same tree: the worker, handed the path it kept, must not read back the
    one the loop kept meanwhile (the path to the previewed entry drawn as the current one)."""
    tree = write_session(tmp_path / "s.jsonl", [msg("a", None), msg("b", "a"), msg("c", "a")])
    lines, first = inspect.getsourcelines(SessionTree._held)
    returned = first + len(lines) - 1  # its last line: the new path kept is returned
    assert paths_asked_while_a_worker_waits(tree, returned, "b", "c") == (["a", "c"], ["a", "b"])


def test_a_path_handed_to_a_worker_thread_is_not_extended_by_the_loop(tmp_path: Path) -> None:
    """The kept path was extended in place when a later entry under its leaf was asked for: a
    worker folding a view, handed the path to "b", copied it after the loop's preview of "c"
    (appended under "b") had grown it, and drew the path to "c" as the current one."""
    path = tmp_path / "s.jsonl"
    tree = write_session(path, [msg("a", None), msg("b", "a")])
    assert tree.path_ids("b") == ["a", "b"]  # kept
    with path.open("a", encoding="utf-8") as file:
        file.write(json.dumps(msg("c", "b")) + "\n")
    tree.refresh()
    lines, first = inspect.getsourcelines(SessionTree._held)
    kept = first + next(at for at, line in enumerate(lines) if line.strip() == "return held")
    assert paths_asked_while_a_worker_waits(tree, kept, "b", "c") == (
        ["a", "b", "c"], ["a", "b"])
