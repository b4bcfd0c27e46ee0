"""Property tests: random operation sequences on a session tree, then reopen and fork it."""

from __future__ import annotations

import calendar
import itertools
import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pi_lsp.context.build import build_session_context
from pi_lsp.session.entries import (
    AssistantBlock,
    AssistantMessage,
    Cost,
    ImageContent,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserBlock,
    UserMessage,
)
from pi_lsp.session.fork import fork_session
from pi_lsp.session.jsontext import JS_WHITESPACE
from pi_lsp.session.records import starts_conversation
from pi_lsp.session.tree import SessionTree

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
ID_RE = re.compile(r"[0-9a-f]{8}")
_counter = itertools.count()

Op = tuple[Any, ...]

# -- strategies ---------------------------------------------------------------------------

# Includes characters JSON writers like to get wrong: quotes, backslashes, newlines,
# U+2028/U+2029 (which must not split a line) and a non-BMP emoji.
text = st.text(
    alphabet=st.sampled_from(list("ab z\"\\\n\t\u2028\u2029é😀{}")), max_size=12
)
selector = st.integers(min_value=0, max_value=10_000)
timestamp_ms = st.integers(min_value=0, max_value=2**41)
json_value = st.one_of(
    st.none(),
    st.integers(min_value=-(2**31), max_value=2**31),
    text,
    st.dictionaries(st.text(alphabet="abc", max_size=3), st.integers(0, 9), max_size=3),
)

user_op = st.tuples(st.just("user"), text, timestamp_ms)
assistant_op = st.tuples(
    st.just("assistant"),
    text,
    st.lists(st.tuples(st.sampled_from(["read", "write", "bash"]), text), max_size=2),
    st.sampled_from(["stop", "length", "toolUse", "error", "aborted"]),
    st.sampled_from(["anthropic", "openai"]),
    st.sampled_from(["m-1", "m-2"]),
    st.integers(min_value=0, max_value=100_000),
    timestamp_ms,
)
tool_result_op = st.tuples(st.just("tool_result"), text, st.booleans(), timestamp_ms)
model_op = st.tuples(st.just("model"), st.sampled_from(["anthropic", "google"]), text)
thinking_op = st.tuples(
    st.just("thinking"), st.sampled_from(["off", "minimal", "low", "medium", "high", "xhigh"])
)
label_op = st.tuples(st.just("label"), selector, st.one_of(st.none(), text))
name_op = st.tuples(st.just("name"), text)
custom_op = st.tuples(st.just("custom"), st.sampled_from(["ext-a", "ext-b"]), json_value)
custom_message_op = st.tuples(
    st.just("custom_message"),
    st.sampled_from(["note", "hint"]),
    st.one_of(
        text,
        st.lists(
            st.one_of(
                st.builds(TextContent, text=text),
                st.builds(ImageContent, data=st.just("AAAA"), mime_type=st.just("image/png")),
            ),
            max_size=2,
        ),
    ),
    st.booleans(),
)
compaction_op = st.tuples(
    st.just("compaction"), selector, text, st.integers(min_value=0, max_value=10**6)
)
branch_summary_op = st.tuples(st.just("branch_summary"), selector, text)
branch_op = st.tuples(st.just("branch"), selector)
reset_op = st.tuples(st.just("reset"))
move_op = st.tuples(st.just("move"), st.one_of(st.none(), selector))

first_op = st.one_of(user_op, assistant_op, model_op, custom_message_op)
any_op = st.one_of(
    user_op,
    assistant_op,
    tool_result_op,
    model_op,
    thinking_op,
    label_op,
    name_op,
    custom_op,
    custom_message_op,
    compaction_op,
    branch_summary_op,
    branch_op,
    reset_op,
    move_op,
)
operations = st.tuples(first_op, st.lists(any_op, max_size=25)).map(lambda t: [t[0], *t[1]])


# -- running operations -------------------------------------------------------------------


class Model:
    """What the operations should have produced, tracked independently of the tree."""

    def __init__(self) -> None:
        self.labels: dict[str, str] = {}
        self.name: str | None = None
        self.durable_leaf: str | None = None
        self.tool_call_ids: list[tuple[str, str]] = []


def _ids(tree: SessionTree) -> list[str]:
    return [r.env.id for r in tree.records if r.env.id is not None]


def _pick(tree: SessionTree, index: int) -> str:
    ids = _ids(tree)
    return ids[index % len(ids)]


def _assistant(op: Op, model: Model) -> AssistantMessage:
    _, body, calls, stop, provider, model_name, tokens, ts = op
    blocks: list[AssistantBlock] = [TextContent(text=body)]
    for number, (tool, arg) in enumerate(calls):
        call_id = f"call_{len(model.tool_call_ids)}_{number}"
        model.tool_call_ids.append((call_id, tool))
        blocks.append(ToolCall(id=call_id, name=tool, arguments={"path": arg, "n": number}))
    usage = Usage(input=tokens, output=tokens // 2, total_tokens=tokens + tokens // 2,
                  cost=Cost(input=0.5, total=0.5))
    return AssistantMessage(content=blocks, api="messages", provider=provider, model=model_name,
                            usage=usage, stop_reason=stop, timestamp=ts)


def _append(tree: SessionTree, op: Op, model: Model) -> str:
    """Perform one appending operation; returns the new entry's id."""
    kind = op[0]
    if kind == "user":
        return tree.append_message(UserMessage(content=op[1], timestamp=op[2]))
    if kind == "assistant":
        return tree.append_message(_assistant(op, model))
    if kind == "tool_result":
        call_id, tool = model.tool_call_ids[-1] if model.tool_call_ids else ("call_x", "bash")
        content: list[UserBlock] = [TextContent(text=op[1])]
        return tree.append_message(ToolResultMessage(
            tool_call_id=call_id, tool_name=tool, content=content, is_error=op[2],
            timestamp=op[3],
        ))
    if kind == "model":
        return tree.append_model_change(op[1], op[2])
    if kind == "thinking":
        return tree.append_thinking_level_change(op[1])
    if kind == "label":
        target = _pick(tree, op[1])
        new_id = tree.append_label(target, op[2])
        cleaned = op[2].strip() if op[2] else ""
        if cleaned:
            model.labels[target] = cleaned
        else:
            model.labels.pop(target, None)
        return new_id
    if kind == "name":
        new_id = tree.append_session_info(op[1])
        # pi's rule: line breaks become spaces, JS-trimmed; the latest name wins, blank clears.
        model.name = re.sub(r"[\r\n]+", " ", op[1]).strip(JS_WHITESPACE) or None
        return new_id
    if kind == "custom":
        return tree.append_custom(op[1], op[2])
    if kind == "custom_message":
        return tree.append_custom_message(op[1], op[2], op[3])
    if kind == "compaction":
        return tree.append_compaction(op[2], _pick(tree, op[1]), op[3])
    if kind == "branch_summary":
        return tree.append_branch_summary(_pick(tree, op[1]), op[2])
    raise AssertionError(f"not an append: {kind}")


def run(tree: SessionTree, ops: list[Op]) -> Model:
    """Apply the operations, checking the leaf rules after each one."""
    model = Model()
    for op in ops:
        kind = op[0]
        if kind == "branch":
            target = _pick(tree, op[1])
            tree.branch(target)
            assert tree.leaf_id == target
        elif kind == "reset":
            tree.reset_leaf()
            assert tree.leaf_id is None
        elif kind == "move":
            target = None if op[1] is None else _pick(tree, op[1])
            new_id = tree.move_leaf(target, durable=True)
            record = tree.record(new_id or "")
            assert record.env.type == "custom"
            assert record.env.parent_id == target
            assert tree.leaf_id == new_id
            model.durable_leaf = new_id
        else:
            previous = tree.leaf_id
            new_id = _append(tree, op, model)
            assert tree.leaf_id == new_id, "every append becomes the leaf"
            assert tree.record(new_id).env.parent_id == previous, "child of the previous leaf"
            model.durable_leaf = new_id
    return model


def new_tree(tmp_path: Path) -> SessionTree:
    directory = tmp_path / f"case{next(_counter)}"
    directory.mkdir()
    return SessionTree.create(str(directory / "s.jsonl"), cwd="/home/a/proj")


def context_bytes(tree: SessionTree, leaf: str | None) -> bytes:
    return msgspec.json.encode(build_session_context(tree, leaf))


def children_ids(tree: SessionTree) -> dict[str | None, list[str | None]]:
    return {key: [r.env.id for r in kids] for key, kids in tree.children_index().items()}


def _ms(text: str) -> int:
    moment = datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ")
    return calendar.timegm(moment.timetuple()) * 1000 + moment.microsecond // 1000


def reference_context(file: Path, leaf: str | None) -> dict[str, Any]:
    """The spec's build_session_context, written independently over the file's JSON."""
    entries = {e["id"]: e for e in map(json.loads, file.read_bytes().splitlines()[1:])}
    path: list[dict[str, Any]] = []
    seen: set[str] = set()
    current = entries.get(leaf) if leaf is not None else None
    while current is not None and current["id"] not in seen:
        seen.add(current["id"])
        path.append(current)
        parent = current.get("parentId")
        current = None if parent in (None, current["id"]) else entries.get(parent)
    path.reverse()

    level, model = "off", None
    for e in path:
        if e["type"] == "thinking_level_change":
            level = e["thinkingLevel"]
        elif e["type"] == "model_change":
            model = {"provider": e["provider"], "modelId": e["modelId"]}
        elif e["type"] == "message" and e["message"]["role"] == "assistant":
            model = {"provider": e["message"]["provider"], "modelId": e["message"]["model"]}

    def message_of(e: dict[str, Any]) -> dict[str, Any] | None:
        if e["type"] == "message":
            return dict(e["message"])
        if e["type"] == "custom_message":
            out = {"role": "custom", "customType": e["customType"], "content": e["content"],
                   "display": e["display"], "timestamp": _ms(e["timestamp"])}
            if e.get("details") is not None:
                out["details"] = e["details"]
            return out
        if e["type"] == "branch_summary" and e["summary"]:
            return {"role": "branchSummary", "summary": e["summary"], "fromId": e["fromId"],
                    "timestamp": _ms(e["timestamp"])}
        return None

    compactions = [i for i, e in enumerate(path) if e["type"] == "compaction"]
    if compactions:
        at = compactions[-1]
        compaction = path[at]
        messages: list[dict[str, Any] | None] = [{
            "role": "compactionSummary", "summary": compaction["summary"],
            "tokensBefore": compaction["tokensBefore"], "timestamp": _ms(compaction["timestamp"]),
        }]
        before = [e["id"] for e in path[:at]]
        start = before.index(compaction["firstKeptEntryId"]) if (
            compaction["firstKeptEntryId"] in before) else at
        messages += [message_of(e) for e in path[start:at] + path[at + 1:]]
    else:
        messages = [message_of(e) for e in path]
    return {"messages": [m for m in messages if m is not None], "thinkingLevel": level,
            "model": model}


# -- properties ---------------------------------------------------------------------------


@SETTINGS
@given(ops=operations)
def test_reopen_gives_the_same_tree(tmp_path: Path, ops: list[Op]) -> None:
    tree = new_tree(tmp_path)
    model = run(tree, ops)
    reopened = SessionTree.open(tree.path)

    assert reopened.leaf_id == model.durable_leaf
    assert reopened.labels == tree.labels == model.labels
    assert reopened.name == tree.name == model.name
    assert _ids(reopened) == _ids(tree)
    assert children_ids(reopened) == children_ids(tree)
    assert reopened.problems == []
    for entry_id in [None, *_ids(tree)]:
        assert context_bytes(reopened, entry_id) == context_bytes(tree, entry_id), entry_id
    assert context_bytes(reopened, reopened.leaf_id) == context_bytes(tree, model.durable_leaf)


@SETTINGS
@given(ops=operations)
@example(ops=[
    ("user", "a", 1), ("thinking", "high"), ("model", "google", "g"),
    ("assistant", "b", [("read", "p")], "toolUse", "openai", "m-1", 10, 2),
    ("tool_result", "r", False, 3), ("thinking", "low"), ("model", "anthropic", "c"),
    ("compaction", 3, "sum", 9), ("branch_summary", 0, ""), ("branch_summary", 1, "bs"),
    ("custom_message", "note", "hi", False), ("custom", "ext-a", {"a": 1}), ("user", "z", 4),
])
def test_context_matches_the_spec_at_every_entry(tmp_path: Path, ops: list[Op]) -> None:
    tree = new_tree(tmp_path)
    run(tree, ops)
    for entry_id in [None, *_ids(tree)]:
        built = json.loads(context_bytes(tree, entry_id))
        assert built == reference_context(Path(tree.path), entry_id), entry_id


@SETTINGS
@given(ops=operations)
def test_paths_run_from_a_root_to_the_entry(tmp_path: Path, ops: list[Op]) -> None:
    tree = new_tree(tmp_path)
    run(tree, ops)
    for entry_id in _ids(tree):
        path = tree.path_to(entry_id)
        ids = [r.env.id for r in path]
        assert ids[-1] == entry_id
        first_parent = path[0].env.parent_id
        assert first_parent is None or first_parent not in tree.by_id
        assert tree.is_root(path[0])
        assert len(set(ids)) == len(ids)
        for parent, child in itertools.pairwise(path):
            assert child.env.parent_id == parent.env.id
    assert tree.path_to(None) == []


@SETTINGS
@given(ops=operations)
def test_ids_and_lines(tmp_path: Path, ops: list[Op]) -> None:
    tree = new_tree(tmp_path)
    run(tree, ops)
    data = Path(tree.path).read_bytes()
    assert data.endswith(b"\n")
    lines = data.split(b"\n")[:-1]
    objects = [json.loads(line) for line in lines]
    assert objects[0]["type"] == "session"
    assert objects[0]["version"] == 3
    entries = objects[1:]
    ids = [entry["id"] for entry in entries]
    assert all(ID_RE.fullmatch(entry_id) for entry_id in ids), ids
    assert len(set(ids)) == len(ids)
    assert ids == _ids(tree)
    for entry in entries:
        assert "parentId" in entry
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", entry["timestamp"])
        assert None not in (v for k, v in entry.items() if k != "parentId" and k != "targetId")


@SETTINGS
@given(ops=operations, where=selector)
# Two labels re-emitted: they must chain one after the other.
@example(
    ops=[("user", "a", 0), ("user", "b", 0), ("label", 0, "x"), ("label", 1, "y")], where=3
)
# Found by hypothesis: a path that is a single root label entry; the fork holds no entries.
@example(ops=[("user", "", 0), ("reset",), ("label", 0, None)], where=1)
# Found by hypothesis: a U+2028 in a fork held in memory (no prompt yet) must be held as it
# will be written, escaped, or the fork's context differs from the source's by bytes.
@example(ops=[("user", "", 0), ("user", "", 0), ("user", "", 0), ("move", None),
              ("model", "anthropic", ""), ("label", 0, None),
              ("tool_result", "\u2028", False, 0), ("user", "", 0), ("user", "", 0)],
         where=2202)
def test_fork_copies_the_path(tmp_path: Path, ops: list[Op], where: int) -> None:
    source = new_tree(tmp_path)
    run(source, ops)
    leaf = _pick(source, where)
    fork = _forked(source, leaf)
    fork_path = Path(fork.path)

    assert fork_path.parent == Path(source.path).resolve().parent
    assert Path(fork.header.parent_session or "").resolve() == Path(source.path).resolve()
    header = json.loads(fork.header_raw)
    assert header["parentSession"] == str(Path(source.path).resolve())
    assert header["id"] != source.header.id

    # Entries keep their ids (the path without its label entries), in path order.
    kept = [r for r in source.path_to(leaf) if r.env.type != "label"]
    kept_ids = [r.env.id for r in kept]
    non_labels = [r for r in fork.records if r.env.type != "label"]
    assert [r.env.id for r in non_labels] == kept_ids
    # Copied entries are unchanged apart from their parent link, and from references to
    # dropped labels, which move to a copied entry.
    dropped = {r.env.id for r in source.path_to(leaf) if r.env.type == "label"}
    copied = set(kept_ids)
    for original, copy in zip(kept, non_labels, strict=True):
        before, after = json.loads(original.raw), json.loads(copy.raw)
        before.pop("parentId", None)
        after.pop("parentId", None)
        for key in ("targetId", "firstKeptEntryId"):
            if before.get(key) in dropped and key in after:
                assert after[key] is None or after[key] in copied
                before.pop(key)
                after.pop(key)
        assert before == after

    # Label entries only at the end: exactly the re-emitted labels of copied entries.
    kinds = [r.env.type for r in fork.records]
    first_label = kinds.index("label") if "label" in kinds else len(kinds)
    assert all(kind == "label" for kind in kinds[first_label:])
    assert "label" not in kinds[:first_label]
    expected_labels = {i: source.labels[i] for i in kept_ids if i in source.labels}
    assert fork.labels == expected_labels
    assert len(kinds) - first_label == len(expected_labels)

    # The fork is one chain, and it builds the same context as the source at the fork point.
    for parent, child in itertools.pairwise(fork.records):
        assert child.env.parent_id == parent.env.id
    assert not fork.records or fork.records[0].env.parent_id is None
    assert fork.leaf_id is None or fork.leaf_id in fork.by_id
    assert context_bytes(fork, fork.leaf_id) == context_bytes(source, leaf)


# Cases hypothesis found that 60 random examples rarely reach; they are kept as plain tests so
# the random phase of the property above still runs while they fail.


def _forked(source: SessionTree, leaf: str) -> SessionTree:
    """The fork as read back from its file, or, with no user or assistant message on the path,
    as held in memory: pi 1.6 writes no file for it until its first one."""
    fork = fork_session(source, leaf)
    started = any(starts_conversation(record) for record in source.path_to(leaf))
    assert fork.on_disk == started == Path(fork.path).exists()
    return SessionTree.open(fork.path) if started else fork


def _fork_and_compare(tmp_path: Path, ops: list[Op], where: int) -> None:
    source = new_tree(tmp_path)
    run(source, ops)
    leaf = _pick(source, where)
    fork = _forked(source, leaf)
    assert fork.leaf_id is None or fork.leaf_id in fork.by_id, "the fork's leaf is in the fork"
    assert context_bytes(fork, fork.leaf_id) == context_bytes(source, leaf)


def test_fork_keeps_context_when_first_kept_entry_is_a_label(tmp_path: Path) -> None:
    """A compaction whose firstKeptEntryId is a label entry on the path (the fork drops it)."""
    ops: list[Op] = [
        ("user", "a", 0), ("label", 0, "L"), ("user", "b", 0), ("compaction", 1, "sum", 5),
    ]
    _fork_and_compare(tmp_path, ops, where=3)


def test_fork_at_a_leaf_entry_under_a_label(tmp_path: Path) -> None:
    """move_leaf(label) writes a custom entry under the label, which the fork drops."""
    ops: list[Op] = [("user", "a", 0), ("label", 0, None), ("move", 1)]
    _fork_and_compare(tmp_path, ops, where=2)
