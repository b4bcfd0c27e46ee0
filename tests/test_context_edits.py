"""Editing the context (issue 16): `context_edit` entries written as pi 1.6 writes them, refused
where pi refuses them, undone by a later edit, and shown in the preview with their token effect."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pi_lsp.context.build import build_session_context
from pi_lsp.context.edits import ContextEditError, edit_context, undo_context_edit
from pi_lsp.context.layers import build_layer
from pi_lsp.context.preview import render_markdown, render_preview
from pi_lsp.session.tree import SessionTree, UnknownEntryError
from tests.test_system_messages import PI16, pi16_eval, pi16_node
from tests.test_tree import assistant_text, assistant_with_call, entry, msg, write_session
from tests.waits import PROCESS_CEILING_S

HUGE = "line of output\n" * 2000


def big_result(call_id: str) -> dict[str, Any]:
    return {"role": "toolResult", "toolCallId": call_id, "toolName": "read",
            "content": [{"type": "text", "text": HUGE}], "isError": False, "timestamp": 3}


def session(tmp_path: Path) -> SessionTree:
    """A branch with a system message and a shell command, then the leaf's branch: question →
    call → huge result → answer → custom message → model change (the leaf)."""
    return write_session(tmp_path / "s.jsonl", [
        msg("aaaaaaaa", None, "question"),
        msg("99999999", "aaaaaaaa", "other branch"),
        entry("message", "12121212", "99999999",
              message={"role": "system", "content": "prompt", "timestamp": 4}),
        entry("message", "34343434", "12121212",
              message={"role": "bashExecution", "command": "ls", "output": "x",
                       "cancelled": False, "truncated": False, "timestamp": 5}),
        entry("message", "bbbbbbbb", "aaaaaaaa", message=assistant_with_call("call_1")),
        entry("message", "cccccccc", "bbbbbbbb", message=big_result("call_1")),
        entry("message", "dddddddd", "cccccccc", message=assistant_text("answer")),
        entry("custom_message", "eeeeeeee", "dddddddd", customType="note", content="a note",
              display=True),
        entry("model_change", "ffffffff", "eeeeeeee", provider="anthropic", modelId="m"),
    ])


def last_line(tree: SessionTree) -> str:
    return Path(tree.path).read_text().splitlines()[-1]


def contents(tree: SessionTree) -> list[Any]:
    return [json.loads(bytes(m)) for m in build_session_context(tree, tree.leaf_id).messages]


def test_an_edit_is_written_as_pi_writes_it(tmp_path: Path) -> None:
    tree = session(tmp_path)
    omit = edit_context(tree, "cccccccc", None)
    assert re.fullmatch(r'\{"type":"context_edit","id":"[0-9a-f]{8}","parentId":"ffffffff",'
                        r'"timestamp":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z",'
                        r'"targetId":"cccccccc","replacement":null\}', last_line(tree))
    assert tree.leaf_id == omit  # the next entry hangs under the edit, as in pi
    # A string is one text block for replies and tool results, and stays a string otherwise.
    edit_context(tree, "dddddddd", "short")
    assert last_line(tree).endswith('"targetId":"dddddddd",'
                                    '"replacement":{"content":[{"type":"text","text":"short"}]}}')
    edit_context(tree, "aaaaaaaa", "asked")
    edit_context(tree, "eeeeeeee", "noted")
    assert last_line(tree).endswith('"targetId":"eeeeeeee","replacement":{"content":"noted"}}')
    assert [m.get("content") for m in contents(tree)] == [
        "asked", assistant_with_call("call_1")["content"], [{"type": "text", "text": "short"}],
        "noted"]


@pytest.mark.parametrize(("target", "error", "words"), [
    ("deadbeef", UnknownEntryError, "no entry with id 'deadbeef'"),
    ("99999999", ContextEditError, "'99999999' is not on the current branch"),
    ("ffffffff", ContextEditError, "'ffffffff' is a model_change entry"),
])
def test_an_edit_pi_would_refuse_is_refused_and_writes_nothing(
        tmp_path: Path, target: str, error: type[Exception], words: str) -> None:
    tree = session(tmp_path)
    before = Path(tree.path).read_bytes()
    with pytest.raises(error, match=words):
        edit_context(tree, target, None)
    assert Path(tree.path).read_bytes() == before


# pi 1.6's answer to appendContextEdit("aaaa0001", null) on the odd-envelope fixture whose last
# line has no id, and on it with the id "": its leafId is undefined or "", so getBranch() (which
# tests the id for truth) is empty.
IDLESS_EDIT = "Entry aaaa0001 is not on the active branch"
NOID_LEAF = Path(__file__).with_name("fixtures") / "pi16-odd-envelopes" / "noid-leaf.jsonl"
IDLESS_LEAF_IDS = [None, ""]


def idless_leaf_file(tmp_path: Path, leaf_id: Any) -> Path:
    """The no-id-leaf fixture, its last line given `leaf_id` (None: left without one)."""
    lines = NOID_LEAF.read_text(encoding="utf-8").splitlines()
    if leaf_id is not None:
        entry = json.loads(lines[-1])
        lines[-1] = json.dumps({"id": leaf_id, **entry})
    path = tmp_path / "s.jsonl"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.mark.parametrize("leaf_id", IDLESS_LEAF_IDS)
def test_an_edit_at_an_id_less_leaf_is_refused_as_pi16_refuses_it(
        tmp_path: Path, leaf_id: str | None) -> None:
    """At a last line with no id (or the id ""), the context is the path up from it, but pi 1.6
    has no active branch there and refuses any edit; pi-lsp wrote one as a new root, or (at "")
    under the "" line, either way the context there became nothing (in pi's reading too)."""
    path = idless_leaf_file(tmp_path, leaf_id)
    before = path.read_bytes()
    tree = SessionTree.open(str(path))
    with pytest.raises(ContextEditError, match="'aaaa0001' is not on the current branch"):
        edit_context(tree, "aaaa0001", None)
    assert path.read_bytes() == before


@pytest.mark.parametrize("leaf_id", IDLESS_LEAF_IDS)
def test_the_stored_id_less_edit_refusal_is_pi16s(tmp_path: Path, leaf_id: str | None) -> None:
    path = idless_leaf_file(tmp_path, leaf_id)
    assert pi16_eval(f"try {{ pi.SessionManager.open({json.dumps(str(path))})"
                     ".appendContextEdit('aaaa0001', null); }"
                     "catch (error) { process.stdout.write(error.message); }") == IDLESS_EDIT


# The parentId pi 1.6 writes its appendContextEdit("aaaa0001", null) with under a last line
# whose id is 5 or true: pi has a branch there, pi-lsp cannot name its leaf.
UNNAMEABLE_EDIT_PARENTS = {5: "5", True: "true"}


@pytest.mark.parametrize("leaf_id", UNNAMEABLE_EDIT_PARENTS)
def test_an_edit_under_a_leaf_pi_lsp_cannot_name_says_so(tmp_path: Path, leaf_id: Any) -> None:
    """At a last line whose id is 5 or true, pi 1.6 writes the edit under it; pi-lsp cannot,
    and said the target was not on the current branch, which is false."""
    path = idless_leaf_file(tmp_path, leaf_id)
    before = path.read_bytes()
    tree = SessionTree.open(str(path))
    words = rf"the leaf \(line 4\) has the id {UNNAMEABLE_EDIT_PARENTS[leaf_id]}, which is not text"
    with pytest.raises(ContextEditError, match=words):
        edit_context(tree, "aaaa0001", None)
    assert path.read_bytes() == before


@pytest.mark.parametrize("leaf_id", UNNAMEABLE_EDIT_PARENTS)
def test_the_stored_unnameable_edit_parents_are_pi16s(tmp_path: Path, leaf_id: Any) -> None:
    path = idless_leaf_file(tmp_path, leaf_id)
    assert pi16_eval(f"const s = pi.SessionManager.open({json.dumps(str(path))});"
                     "s.appendContextEdit('aaaa0001', null);"
                     "process.stdout.write(JSON.stringify(s.getLeafEntry().parentId));") == \
        UNNAMEABLE_EDIT_PARENTS[leaf_id]


@pytest.mark.parametrize(("target", "kind"), [("12121212", "system"),
                                               ("34343434", "bashExecution")])
def test_only_user_assistant_tool_result_and_custom_messages_are_editable(
        tmp_path: Path, target: str, kind: str) -> None:
    tree = session(tmp_path)
    tree.branch("34343434")
    with pytest.raises(ContextEditError, match=f"is a {kind} entry: only user, assistant"):
        edit_context(tree, target, "x")


@pytest.mark.parametrize("replacement", [None, "replaced", [{"type": "text", "text": "b"}]])
@pytest.mark.parametrize("target", ["aaaaaaaa", "bbbbbbbb", "cccccccc", "eeeeeeee"])
def test_undo_gives_back_exactly_the_unedited_context(
        tmp_path: Path, target: str, replacement: Any) -> None:
    tree = session(tmp_path)
    original = contents(tree)
    edit_context(tree, target, replacement)
    assert contents(tree) != original
    undo_context_edit(tree, target)
    assert contents(tree) == original
    # nothing is left to undo, and a second undo says so instead of writing again
    with pytest.raises(ContextEditError, match="has no context edit in force"):
        undo_context_edit(tree, target)


def test_undo_refuses_a_target_without_an_edit_on_this_branch(tmp_path: Path) -> None:
    tree = session(tmp_path)
    edit_context(tree, "cccccccc", None)
    tree.branch("dddddddd")  # above the edit: the original is back already
    with pytest.raises(ContextEditError, match="'cccccccc' has no context edit in force"):
        undo_context_edit(tree, "cccccccc")


def test_undo_of_a_message_with_null_content(tmp_path: Path) -> None:
    tree = write_session(tmp_path / "s.jsonl", [
        entry("message", "aaaaaaaa", None, message={"role": "user", "content": None,
                                                     "timestamp": 1}),
        entry("custom_message", "bbbbbbbb", "aaaaaaaa", customType="note", display=True),
    ])
    original = contents(tree)
    for target in ("aaaaaaaa", "bbbbbbbb"):
        edit_context(tree, target, "filled")
        undo_context_edit(tree, target)
    assert contents(tree) == original


def test_the_preview_marks_edits_and_their_token_effect(tmp_path: Path) -> None:
    tree = session(tmp_path)
    before = build_layer(tree, tree.leaf_id, "agent")
    assert before.edits == []
    omit = edit_context(tree, "cccccccc", None)
    edit_context(tree, "dddddddd", "short")
    after = build_layer(tree, tree.leaf_id, "agent")
    assert after.total_tokens < before.total_tokens - 7000  # the huge output is gone
    removed, replaced = after.edits
    assert (removed.target_id, removed.edit_id, removed.kind, removed.role) == \
        ("cccccccc", omit, "omitted", "toolResult")
    assert removed.tokens_before == 7500 and removed.tokens_after == 0
    assert removed.position == 2  # where it stood: after the call, before the answer
    assert (replaced.kind, replaced.tokens_before, replaced.tokens_after) == ("replaced", 2, 2)
    assert [r.entry_id for r in after.rows if r.edited] == ["dddddddd"]
    text = render_preview(after)
    assert "- cccccccc  toolResult       0 tok  removed by edit" in text
    assert "✎ dddddddd" in text
    assert "context edits: 1 removed, 1 replaced: their messages 7,502 → 2 tokens (-7,500)" \
        in text
    markdown = render_markdown(after.leaf_id, "agent", [(0, after.rows)], len(after.heads),
                               after.total_tokens, 1000, "off", None, after.edits).text
    assert "## ~~toolResult~~ · removed from the context · 7,500 → 0 tokens · `cccccccc`" \
        in markdown
    assert markdown.index("`bbbbbbbb`") < markdown.index("~~toolResult~~") < \
        markdown.index("`dddddddd`")
    assert "· ✎ replaced (was 2 tokens) · `dddddddd`" in markdown
    # the llm layer marks the same edits
    assert [m.target_id for m in build_layer(tree, tree.leaf_id, "llm").edits] == \
        ["cccccccc", "dddddddd"]
    undo_context_edit(tree, "cccccccc")
    assert [m.target_id for m in build_layer(tree, tree.leaf_id, "agent").edits] == ["dddddddd"]


def test_the_preview_maps_its_headings_to_their_entries(tmp_path: Path) -> None:
    """An entry id holding a line break or a backtick was written into its heading as it was:
    the heading split over lines, or the editors' pattern read part of the id, so `dd` in
    :PiContext removed another message. Ids are one line now, and the headings are sent."""
    tree = write_session(tmp_path / "s.jsonl", [
        msg("a\n## 1. user · 1 tokens · `victim`", None, "first\n## 9. user · `fake`"),
        msg("victim", "a\n## 1. user · 1 tokens · `victim`", "second"),
        msg("x `victim`", "victim", "third"),
    ])
    edit_context(tree, "victim", None)
    layer = build_layer(tree, tree.leaf_id, "agent")
    markdown = render_markdown(layer.leaf_id, "agent", [(0, layer.rows)], len(layer.heads),
                               layer.total_tokens, 1000, "off", None, layer.edits)
    lines = markdown.text.split("\n")
    assert [(h.entry_id, h.role, h.state) for h in markdown.headings] == [
        ("a\n## 1. user · 1 tokens · `victim`", "user", "kept"), ("victim", "user", "removed"),
        ("x `victim`", "user", "kept")]
    assert [lines[h.line] for h in markdown.headings] == [
        "## 1. user · 7 tokens · `` a\\n## 1. user · 1 tokens · `victim` ``",
        "## ~~user~~ · removed from the context · 2 → 0 tokens · `victim`",
        "## 2. user · 2 tokens · `` x `victim` ``"]


def test_a_lone_carriage_return_moves_no_heading(tmp_path: Path) -> None:
    """A message with lone CRs (a progress bar's output) put every later heading as many lines
    off in VS Code, which counts a CR as a line break, and its lenses over other messages."""
    tree = write_session(tmp_path / "s.jsonl", [
        msg("aaaaaaaa", None, "progress 10%\rprogress 50%\r\ndone\r"),
        msg("bbbbbbbb", "aaaaaaaa", "next")])
    layer = build_layer(tree, tree.leaf_id, "agent")
    markdown = render_markdown(layer.leaf_id, "agent", [(0, layer.rows)], len(layer.heads),
                               layer.total_tokens, 1000, "off", None, layer.edits)
    lines = re.split("\r\n|\r|\n", markdown.text)  # as VS Code counts lines
    assert [lines[h.line] for h in markdown.headings] == [
        "## 1. user · 8 tokens · `aaaaaaaa`", "## 2. user · 1 tokens · `bbbbbbbb`"]
    assert markdown.text.split("\n") == lines  # as Neovim counts them


def test_system_rows_show_their_sections_and_tools(tmp_path: Path) -> None:
    system = {"role": "system", "content": "", "sections": {"preamble": "be brief",
                                                             "cwd": None},
              "toolsAdded": [{"name": "read", "description": "r", "parameters": {}}],
              "toolsRemoved": [{"name": "bash"}], "timestamp": 1}
    tree = write_session(tmp_path / "s.jsonl", [entry("message", "aaaaaaaa", None,
                                                      message=system)])
    layer = build_layer(tree, "aaaaaaaa", "agent")
    markdown = render_markdown("aaaaaaaa", "agent", [(0, layer.rows)], 1, 0, 1, "off", None).text
    body = markdown.split("`aaaaaaaa`", 1)[1]
    assert "- section `preamble`: 8 characters" in body
    assert "- section `cwd`: removed" in body
    assert "- tools: `read`" in body and "- tools removed: `bash`" in body


# -- pi 1.6 itself reads what pi-lsp wrote, and writes the same line ------------------------


# What pi 1.6 answered on these sessions, for machines without it (no Node >= 22.19); where pi
# 1.6 is installed the tests run it and check the stored answers against it too.
STORED = Path(__file__).with_name("fixtures") / "pi16-context-edits.json"


def stored(key: str) -> Any:
    return json.loads(STORED.read_text("utf-8"))[key]


def run_pi16(*arguments: str) -> str | None:
    """`tests/pi16_edit.mjs ARGUMENTS` run by pi 1.6's Node, or None when it is not here."""
    node = pi16_node()
    if node is None:
        return None
    run = subprocess.run([node, str(Path(__file__).with_name("pi16_edit.mjs")),
                          str(PI16 / "@earendil-works"), *arguments],
                         capture_output=True, text=True, timeout=PROCESS_CEILING_S)
    assert run.returncode == 0, run.stderr
    return run.stdout


def pi16_context(key: str, path: str) -> Any:
    """The messages pi 1.6 builds at the leaf of `path` (run, or as stored from its run)."""
    out = run_pi16(path, "context")
    if out is None:
        return stored(key)
    assert json.loads(out) == stored(key)
    return json.loads(out)


def masked(line: str) -> str:
    return re.sub(r'"(id|timestamp)":"[^"]*"', r'"\1":"…"', line)


def pi16_edit_line(key: str, theirs: Path, target: str, replacement: Any) -> str:
    """The line pi 1.6 appends to `theirs` for this edit, id and time masked (or as stored)."""
    out = run_pi16(str(theirs), "edit", target,
                   json.dumps(None if replacement is None else {"content": replacement}))
    if out is None:
        return str(stored(key))
    line = masked(theirs.read_text().splitlines()[-1])
    assert line == stored(key)
    return line


def test_pi16_reads_the_edits_and_the_undo_pi_lsp_wrote(tmp_path: Path) -> None:
    tree = session(tmp_path)
    edit_context(tree, "cccccccc", None)
    edit_context(tree, "dddddddd", "short")
    edit_context(tree, "eeeeeeee", "noted")
    assert pi16_context("edited", tree.path) == contents(tree)
    for target in ("cccccccc", "dddddddd", "eeeeeeee"):
        undo_context_edit(tree, target)
    assert pi16_context("undone", tree.path) == contents(tree)


@pytest.mark.parametrize(("target", "replacement"), [
    ("cccccccc", None), ("dddddddd", "short"), ("aaaaaaaa", "asked"),
    ("eeeeeeee", [{"type": "text", "text": "noted"}])])
def test_pi16_writes_the_same_edit_line(tmp_path: Path, target: str, replacement: Any) -> None:
    tree = session(tmp_path)
    theirs = tmp_path / "pi.jsonl"
    shutil.copyfile(tree.path, theirs)
    edit_context(tree, target, replacement)
    assert masked(last_line(tree)) == pi16_edit_line(f"edit {target}", theirs, target,
                                                     replacement)


def test_a_paged_preview_marks_the_edits_of_the_pages_it_shows(tmp_path: Path) -> None:
    tree = session(tmp_path)
    edit_context(tree, "cccccccc", None)  # stood before the 3rd message
    edit_context(tree, "eeeeeeee", "noted")  # the 4th message
    layer = build_layer(tree, tree.leaf_id, "agent")
    rows = layer.rows

    def paged(*pages: tuple[int, int]) -> str:
        return render_markdown(layer.leaf_id, "agent", [(s, rows[s:e]) for s, e in pages],
                               len(rows), layer.total_tokens, 1000, "off", None, layer.edits).text

    both = paged((0, 1), (3, 4))
    assert "~~toolResult~~" not in both  # it stood among the messages left out
    assert "_… messages 2 to 3 not shown_" in both
    assert "## 4. custom · 2 tokens · ✎ replaced (was 2 tokens) · `eeeeeeee`" in both
    middle = paged((2, 3))
    assert middle.index("## ~~toolResult~~") < middle.index("## 3. assistant")


def test_an_image_an_edit_put_in_a_reply_is_read_as_pi_reads_it(tmp_path: Path) -> None:
    """pi writes any blocks an edit gives a reply; it counts and serializes only the text, and
    its providers leave the image out (pi-lsp took the reply for unreadable: no token count,
    no serialization, no compaction plan). pi 1.6's figures for this file."""
    from pi_lsp.context.tokens import estimate_tokens
    from pi_lsp.session.entries import decode_message
    from pi_lsp.summarize.compaction import CompactionSettings, plan_summary, prepare_compaction
    from pi_lsp.summarize.serialize import serialize_conversation

    path = tmp_path / "s.jsonl"
    stamp = '"timestamp":"2026-12-03T13:00:00.000Z"'
    usage = ('{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":'
             '{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}}')
    path.write_text("\n".join([
        '{"type":"session","version":3,"id":"s1",' + stamp + ',"cwd":"/p"}',
        '{"type":"message","id":"a","parentId":null,' + stamp + ',"message":{"role":"user",'
        '"content":"hello there","timestamp":1}}',
        '{"type":"message","id":"b","parentId":"a",' + stamp + ',"message":{"role":"assistant",'
        '"content":[{"type":"text","text":"12345678"}],"api":"x","provider":"p","model":"m",'
        '"usage":' + usage + ',"stopReason":"stop","timestamp":2}}',
        '{"type":"context_edit","id":"c","parentId":"b",' + stamp + ',"targetId":"b",'
        '"replacement":{"content":[{"type":"text","text":"abcd"},'
        '{"type":"image","data":"AA==","mimeType":"image/png"}]}}',
        '{"type":"message","id":"d","parentId":"c",' + stamp + ',"message":{"role":"user",'
        '"content":"next","timestamp":1}}']) + "\n")
    tree = SessionTree.open(str(path))
    messages = [decode_message(raw) for raw in build_session_context(tree, "d").messages]
    assert [estimate_tokens(m) for m in messages if m is not None] == [3, 1, 1]
    assert serialize_conversation(messages) == (  # type: ignore[arg-type]
        "[User]: hello there\n\n[Assistant]: abcd\n\n[User]: next")
    plan = prepare_compaction(tree.path_to("c"), CompactionSettings(keep_recent_tokens=1))
    assert plan is not None
    summary = plan_summary(plan)
    assert (summary.first_kept_entry_id, summary.is_split_turn, summary.tokens_before) == (
        "b", True, 4)


# Edits a differential fuzz against pi 1.6 found pi-lsp ignoring: pi reads neither an edit's
# time nor whether its replacement has content, nor whether it is an object (pi 1.6 tests only
# `=== null`, then spreads the replacement's `content`: undefined but for an object's).
EDIT_TIME = '"timestamp":"2026-12-03T13:43:08.000Z","targetId":"aaaa0001",'
ODD_EDITS = {
    "edit stamped 0, omitting": ['"timestamp":0,"targetId":"aaaa0001","replacement":null'],
    "edit without content": [EDIT_TIME + '"replacement":{}'],
    "edit replacing with a string": [EDIT_TIME + '"replacement":"abc"'],
    "edit replacing with a number": [EDIT_TIME + '"replacement":5'],
    "edit replacing with an array": [EDIT_TIME + '"replacement":[1]'],
    "edit replacing with false": [EDIT_TIME + '"replacement":false'],
    "odd edit after an edit": [EDIT_TIME + '"replacement":{"content":"first"}',
                               EDIT_TIME + '"replacement":"odd"'],
}


@pytest.mark.parametrize("key", list(ODD_EDITS))
def test_an_edit_pi16_applies_is_applied_whatever_its_time_or_content(
        tmp_path: Path, key: str) -> None:
    """An edit whose timestamp was no text, or whose replacement had no content or was no
    object ("abc", 5, [1], false), was ignored: pi 1.6 omits the message, or leaves it without
    content, the last edit of a target winning."""
    path = tmp_path / "s.jsonl"
    path.write_text(
        '{"type":"session","version":3,"id":"01900000-0000-7000-8000-000000000001",'
        '"timestamp":"2026-12-03T13:43:06.440Z","cwd":"/home/dev/project"}\n'
        '{"type":"message","id":"aaaa0001","parentId":null,'
        '"timestamp":"2026-12-03T13:43:07.000Z","message":{"role":"user","content":"hello",'
        '"timestamp":1764769387000}}\n' + "".join(
            f'{{"type":"context_edit","id":"aaaa{n + 2:04d}",'
            f'"parentId":"aaaa{n + 1:04d}",{body}}}\n' for n, body in enumerate(ODD_EDITS[key])))
    tree = SessionTree.open(str(path))
    assert contents(tree) == pi16_context(key, str(path))
    llm = build_layer(tree, tree.leaf_id, "llm").rows
    assert [json.loads(bytes(row.message)) for row in llm] == pi16_context(key, str(path))
