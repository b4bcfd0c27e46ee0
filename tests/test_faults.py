"""Faults that must not lose or corrupt a session: bad bytes, new files, two writers, full disks."""

from __future__ import annotations

import asyncio
import errno
import json
import math
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_lsp.agent import harness as harness_module
from pi_lsp.agent.events import (
    AgentEvent,
    AgentStart,
    ErrorEvent,
    MessageEnd,
    SavePoint,
    SessionMoved,
    ToolExecutionStart,
    TurnEnd,
)
from pi_lsp.agent.harness import Harness
from pi_lsp.cli import main
from pi_lsp.context.build import build_session_context
from pi_lsp.context.replay import current_system_message, current_tools, system_text
from pi_lsp.context.tokens import estimate_tokens
from pi_lsp.providers.anthropic import AnthropicProvider
from pi_lsp.server.config import Config
from pi_lsp.server.hub import SessionHub
from pi_lsp.session import appender, journal
from pi_lsp.session import tree as tree_module
from pi_lsp.session.appender import WriteFailedError
from pi_lsp.session.catalog import start_session, summarize
from pi_lsp.session.check import check_session
from pi_lsp.session.entries import (
    AssistantMessage,
    TextContent,
    ToolCall,
    Usage,
    UserMessage,
    decode_message,
    encoder,
    read_message,
)
from pi_lsp.session.fork import fork_session
from pi_lsp.session.journal import PROBLEMS_PER_KIND, is_utf8, read_file, repair_line
from pi_lsp.session.records import Refresh
from pi_lsp.session.tail import Tail
from pi_lsp.session.tree import SessionTree
from pi_lsp.summarize.branch import branch_with_summary
from pi_lsp.summarize.extractive import ExtractiveSummarizer
from pi_lsp.summarize.serialize import serialize_conversation
from pi_lsp.summarize.summarizer import llm_messages
from tests.fake_anthropic import FakeAnthropic, text_reply, tool_reply
from tests.test_journal import IDLESS_FIXTURES, ODD_ENVELOPES, assert_read_as_pi16
from tests.waits import run_cli

HEADER = {"type": "session", "version": 3, "id": "f00d", "timestamp": "2025-01-01T10:00:00.000Z",
          "cwd": "/w"}


def stamp(n: int) -> str:
    return f"2025-01-01T10:00:{n:02d}.000Z"


def user_line(entry_id: str, parent: str | None, text: str, n: int) -> bytes:
    return json.dumps({"type": "message", "id": entry_id, "parentId": parent,
                       "timestamp": stamp(n),
                       "message": {"role": "user", "content": text, "timestamp": n}},
                      ensure_ascii=False).encode()


def reply_line(entry_id: str, parent: str | None, text: str, n: int) -> bytes:
    message = {"role": "assistant", "content": [{"type": "text", "text": text}],
               "api": "anthropic-messages", "provider": "anthropic", "model": "m",
               "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0,
                         "totalTokens": 2, "cost": {"input": 0, "output": 0, "cacheRead": 0,
                                                    "cacheWrite": 0, "total": 0}},
               "stopReason": "stop", "timestamp": n}
    return json.dumps({"type": "message", "id": entry_id, "parentId": parent,
                       "timestamp": stamp(n), "message": message}, ensure_ascii=False).encode()


def write(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"".join(line + b"\n" for line in [json.dumps(HEADER).encode(), *lines]))
    return path


def pi_lsp(*args: str) -> subprocess.CompletedProcess[bytes]:
    return run_cli(*args, text=False)


def texts(tree: SessionTree, leaf: str | None) -> list[str]:
    """The text of each message in the context at `leaf`, as a JSON reader sees it."""
    context = json.loads(msgspec.json.encode(build_session_context(tree, leaf)))
    found = []
    for message in context["messages"]:
        content = message["content"]
        found.append(content if isinstance(content, str) else content[0]["text"])
    return found


def kinds(problems: list[journal.Problem]) -> list[tuple[str, int | None]]:
    return [(p.kind, p.line) for p in problems]


# -- 1. invalid UTF-8 ------------------------------------------------------------------------

# What Node's Buffer.toString("utf8") makes of each byte string (measured with node 20): one
# U+FFFD per maximal invalid subpart.
NODE_DECODES = {
    "e4b8": [0xFFFD],
    "ff": [0xFFFD],
    "eda080": [0xFFFD] * 3,
    "f09f98": [0xFFFD],
    "c0af": [0xFFFD] * 2,
    "e080af": [0xFFFD] * 3,
    "f4908080": [0xFFFD] * 4,
    "61e4b862": [0x61, 0xFFFD, 0x62],
    "e4b8e4b8ad": [0xFFFD, 0x4E2D],
    "f8888080af": [0xFFFD] * 5,
}


@pytest.mark.parametrize("hex_bytes", list(NODE_DECODES))
def test_invalid_utf8_becomes_what_node_reads(hex_bytes: str) -> None:
    raw = b'{"text":"' + bytes.fromhex(hex_bytes) + b'"}'
    repaired, problems = repair_line(raw)
    assert [ord(c) for c in json.loads(repaired)["text"]] == NODE_DECODES[hex_bytes]
    assert [p.kind for p in problems] == ["invalid-utf8"]


def test_is_utf8_checks_across_its_pieces() -> None:
    emoji = "🙂".encode()
    valid = b"a" * (journal.UTF8_CHUNK - 2) + emoji + b"b"  # the emoji straddles two pieces
    assert is_utf8(valid)
    assert not is_utf8(valid[:-2])  # cut inside the emoji
    assert is_utf8(b"plain ascii")
    assert not is_utf8(b"ok \xff")


def damaged_session(tmp_path: Path) -> Path:
    """Four messages; the second holds a Latin-1 byte and a cut three-byte character."""
    damaged = user_line("aaaa0002", "aaaa0001", "cafE9 CUT ok", 2).replace(
        b"E9", b"\xe9").replace(b"CUT", b"\xe4\xb8")
    return write(tmp_path / "bad.jsonl", [
        user_line("aaaa0001", None, "first", 1), damaged,
        reply_line("aaaa0003", "aaaa0002", "reply", 3),
        user_line("aaaa0004", "aaaa0003", "last", 4),
    ])


def test_invalid_utf8_line_is_kept_and_read_as_pi_reads_it(tmp_path: Path) -> None:
    path = damaged_session(tmp_path)
    assert b"caf\xe9 \xe4\xb8 ok" in path.read_bytes()
    tree = SessionTree.open(str(path))
    assert tree.path_ids(tree.leaf_id) == ["aaaa0001", "aaaa0002", "aaaa0003", "aaaa0004"]
    assert texts(tree, tree.leaf_id) == ["first", "caf\ufffd \ufffd ok", "reply", "last"]
    assert kinds(tree.problems) == [("invalid-utf8", 3)]
    assert tree.problems[0].entry_id == "aaaa0002"
    assert tree.record("aaaa0002").original == path.read_bytes().split(b"\n")[2]


def test_invalid_utf8_through_the_command_line(tmp_path: Path) -> None:
    path = damaged_session(tmp_path)
    context = pi_lsp("context", str(path), "--json")
    assert context.returncode == 0, context.stderr
    decoded = json.loads(context.stdout.decode("utf-8"))  # valid UTF-8 and valid JSON
    assert decoded["messages"][1]["content"] == "caf\ufffd \ufffd ok"
    readable = pi_lsp("context", str(path))
    assert readable.returncode == 0, readable.stderr
    check = pi_lsp("check", str(path))
    assert check.returncode == 1
    assert b":line 3: invalid-utf8 [aaaa0002]" in check.stdout
    assert b"repair: " in check.stdout


def test_fork_copies_a_damaged_line_byte_for_byte(tmp_path: Path) -> None:
    path = damaged_session(tmp_path)
    fork = fork_session(SessionTree.open(str(path)), "aaaa0004")
    assert fork.on_disk
    copied = Path(fork.path).read_bytes().split(b"\n")
    assert path.read_bytes().split(b"\n")[2] in copied
    assert texts(SessionTree.open(fork.path), "aaaa0004")[1] == "caf\ufffd \ufffd ok"


def test_a_damaged_line_appended_by_another_writer_is_read_too(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", [user_line("aaaa0001", None, "first", 1)])
    tree = SessionTree.open(str(path))
    with open(path, "ab") as handle:
        handle.write(user_line("aaaa0002", "aaaa0001", "x", 2).replace(b'"x"', b'"\xff"')
                     + b"\n")
    assert tree.refresh() == Refresh(1, False)
    assert texts(tree, tree.leaf_id) == ["first", "\ufffd"]
    assert kinds(tree.problems) == [("invalid-utf8", 3)]


# -- 2. lone surrogates ----------------------------------------------------------------------


def surrogate_session(tmp_path: Path) -> Path:
    """A cut emoji (`\\ud83d`) in the middle entry, with entries below it."""
    cut = user_line("aaaa0002", "aaaa0001", "cut here: EMOJI!", 2).replace(b"EMOJI", b"\\ud83d")
    paired = user_line("aaaa0004", "aaaa0003", "whole: EMOJI", 4).replace(
        b"EMOJI", b"\\ud83d\\ude00")
    literal = user_line("aaaa0005", "aaaa0004", "not an escape: \\ud83d", 5)
    assert b"\\\\ud83d" in literal
    return write(tmp_path / "cut.jsonl", [
        user_line("aaaa0001", None, "first", 1), cut, reply_line("aaaa0003", "aaaa0002", "ok", 3),
        paired, literal,
    ])


def test_lone_surrogate_is_read_as_pi_reads_it(tmp_path: Path) -> None:
    """pi keeps a cut emoji as its one code unit (a provider can stream one); so does pi-lsp."""
    path = surrogate_session(tmp_path)
    tree = SessionTree.open(str(path))
    assert tree.path_ids(tree.leaf_id) == [f"aaaa000{n}" for n in range(1, 6)]
    assert texts(tree, tree.leaf_id) == [
        "first", "cut here: \ud83d!", "ok", "whole: \U0001f600", "not an escape: \\ud83d"]
    assert tree.problems == [] and check_session(tree) == []
    assert tree.record("aaaa0002").original == path.read_bytes().split(b"\n")[2]


def strings_in(value: Any) -> str:
    """Every string in a JSON value, joined by newlines."""
    if isinstance(value, dict):
        return "\n".join(strings_in(v) for v in value.values())
    if isinstance(value, list):
        return "\n".join(strings_in(v) for v in value)
    return value if isinstance(value, str) else ""


def test_lone_surrogate_output_is_valid_utf8_json(tmp_path: Path) -> None:
    sessions = tmp_path / ".pi" / "sessions"  # where the server may open sessions
    sessions.mkdir(parents=True)
    path = surrogate_session(sessions)
    for layer in ("agent", "llm"):
        result = pi_lsp("context", str(path), "--json", "--layer", layer)
        assert result.returncode == 0, result.stderr
        assert b"cut here: \\ud83d!" in result.stdout and is_utf8(result.stdout)
        assert "cut here: \ud83d!" in json.loads(result.stdout)["messages"][1]["content"]
    text = pi_lsp("context", str(path))
    assert text.returncode == 0, text.stderr
    assert "cut here: \ufffd!" in text.stdout.decode("utf-8")  # a terminal shows U+FFFD
    hub = SessionHub([tmp_path], Config())
    for layer in ("agent", "llm", "request"):
        preview = hub.preview(path, None, layer)  # type: ignore[arg-type]
        assert "cut here: \ud83d!" in strings_in(json.loads(encoder.encode(preview)))


def test_a_lone_surrogate_is_written_as_pi_writes_it(tmp_path: Path) -> None:
    """Escaped as `\\udXXX` (JSON.stringify's form); read back as the same code unit, counted
    as pi counts it (the escape's six characters inside a tool call's JSON arguments)."""
    tree = SessionTree.create(str(tmp_path / "s.jsonl"), "/w")
    tree.append_message(UserMessage(content="bad \ud83d end", timestamp=1))
    call = ToolCall(id="t1", name="read", arguments={"path": "x\udc00"})
    tree.append_message(AssistantMessage(content=[call], api="anthropic-messages",
                                         provider="anthropic", model="m", usage=Usage(),
                                         stop_reason="toolUse", timestamp=2))
    data = tmp_path.joinpath("s.jsonl").read_bytes()
    assert b'"content":"bad \\ud83d end"' in data and b'"path":"x\\udc00"' in data
    assert is_utf8(data)
    again = SessionTree.open(tree.path)
    assert again.problems == []
    assert texts(again, again.records[0].env.id) == ["bad \ud83d end"]
    reply = decode_message(again.record(again.leaf_id or "").env.message)
    assert isinstance(reply, AssistantMessage) and reply.content == [call]
    assert estimate_tokens(reply) == math.ceil((len("read") + len('{"path":"x\\udc00"}')) / 4)


# -- 3. no file before the first prompt ------------------------------------------------------


def reply(text: str = "hello") -> AssistantMessage:
    return AssistantMessage(content=[TextContent(text=text)], api="anthropic-messages",
                            provider="anthropic", model="m", usage=Usage(),
                            stop_reason="stop", timestamp=2)


def test_a_new_session_is_written_at_its_first_user_message(tmp_path: Path) -> None:
    """pi 1.6's rule: setup entries alone leave no file; the prompt writes them all, so it is
    kept even when its reply never comes."""
    tree = start_session(tmp_path, "anthropic", "claude-sonnet-4-5", "high")
    path = Path(tree.path)
    assert path.parent == tmp_path / ".pi" / "sessions"
    tree.append_session_info("draft")
    tree.append_custom_message("note", "context", display=False)
    assert not path.exists() and not tree.on_disk
    assert tree.name == "draft"
    assert [p.kind for p in check_session(tree)] == ["unwritten"]
    changes: list[Refresh] = []
    tree.listeners.append(lambda _tree, change: changes.append(change))
    first = tree.append_message(UserMessage(content="hi", timestamp=1))
    assert tree.on_disk and changes == [Refresh(5, True)] and tree.leaf_id == first
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    assert json.loads(lines[0])["id"] == tree.header.id
    assert [json.loads(line)["type"] for line in lines[1:-1]] == [
        "model_change", "thinking_level_change", "session_info", "custom_message", "message"]
    assert check_session(SessionTree.open(str(path))) == []  # no reply yet is no problem
    answer = tree.append_message(reply())
    reopened = SessionTree.open(str(path))
    assert reopened.path_ids(reopened.leaf_id) == tree.path_ids(answer)
    assert path.read_bytes().count(b'"type":"session"') == 1  # the header is written once


async def test_the_hub_holds_a_new_session_until_its_first_prompt(tmp_path: Path) -> None:
    hub = SessionHub([tmp_path], Config())
    path = hub.new_session("scratch")
    assert not path.exists()
    assert hub.sync(path).tree.name == "scratch"
    assert [n.type for n in (await hub.view(path)).nodes] == [
        "model_change", "thinking_level_change", "session_info"]
    assert hub.preview(path, None, "agent").messages == []
    listed = {Path(s.path): s for s in hub.list_sessions()}
    assert listed[path].name == "scratch"
    hub.harness(path).set_name("renamed")
    assert hub.sync(path).tree.name == "renamed" and not path.exists()
    hub.sync(path).tree.append_message(UserMessage(content="hi", timestamp=1))
    assert path.is_file()
    assert summarize(path).name == "renamed"
    assert [p.kind for p in hub.check(path)] == []


def test_a_new_session_never_writes_into_a_file_created_meanwhile(tmp_path: Path) -> None:
    """pi 1.6 creates a session file with "wx"; a file another process made at the path
    first is left as it was, and this session's entries stay in memory."""
    path = tmp_path / "new.jsonl"
    tree = start_session(tmp_path, "anthropic", "m", "off", path)
    other = write(path, [user_line("bbbb0001", None, "other process", 1)]).read_bytes()
    with pytest.raises(WriteFailedError) as caught:
        tree.append_message(UserMessage(content="mine", timestamp=2))
    assert caught.value.errno == errno.EEXIST
    assert str(caught.value).startswith(f"could not write to {path}: another process created")
    assert path.read_bytes() == other
    assert tree.deferred and not tree.on_disk
    assert [r.env.type for r in tree.records] == ["model_change", "thinking_level_change"]


def test_a_new_session_stays_in_memory_when_its_path_gets_no_session(tmp_path: Path) -> None:
    """A file at a new session's path that is not a session (or not yet whole) is no session
    to follow: reading it failed after the session had let go of its unwritten lines, so its
    first prompt appended a header and the prompt to that file, under a parent never written."""
    path = tmp_path / "new.jsonl"
    tree = start_session(tmp_path, "anthropic", "m", "off", path)
    path.write_bytes(b"notes, not a session\n")
    with pytest.raises(journal.NotASessionError):
        tree.refresh()
    assert tree.deferred and not tree.on_disk
    with pytest.raises(WriteFailedError) as caught:
        tree.append_message(UserMessage(content="mine", timestamp=2))
    assert caught.value.errno == errno.EEXIST
    assert path.read_bytes() == b"notes, not a session\n"
    assert [r.env.type for r in tree.records] == ["model_change", "thinking_level_change"]


def test_a_failed_first_write_leaves_the_new_session_as_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "new.jsonl"
    tree = start_session(tmp_path, "anthropic", "m", "off", path)
    before = tree.path_ids(tree.leaf_id)
    failing_write(monkeypatch, errno.ENOSPC)
    with pytest.raises(WriteFailedError):
        tree.append_message(UserMessage(content="lost prompt", timestamp=1))
    monkeypatch.undo()
    assert not path.exists()  # no empty file left behind
    assert tree.deferred and tree.path_ids(tree.leaf_id) == before
    again = tree.append_message(UserMessage(content="again", timestamp=2))
    reopened = SessionTree.open(str(path))
    assert reopened.path_ids(again) == [*before, again]
    assert texts(reopened, again) == ["again"]
    assert b"lost prompt" not in path.read_bytes()


def model_change_line(entry_id: str, n: int) -> bytes:
    return json.dumps({"type": "model_change", "id": entry_id, "parentId": None,
                       "timestamp": stamp(n), "provider": "anthropic", "modelId": "m"}).encode()


def test_a_fork_with_no_prompt_waits_in_memory(tmp_path: Path) -> None:
    sessions = tmp_path / ".pi" / "sessions"
    sessions.mkdir(parents=True)
    source = write(sessions / "s.jsonl", [model_change_line("aaaa0001", 1),
                                          user_line("aaaa0002", "aaaa0001", "two", 2)])
    hub = SessionHub([tmp_path], Config())
    forked = hub.fork(source, "aaaa0001")
    assert not forked.exists()
    assert hub.sync(forked).tree.path_ids(hub.sync(forked).tree.leaf_id) == ["aaaa0001"]
    assert hub.sync(forked).tree.header.parent_session == str(source.resolve())
    hub.sync(forked).tree.append_message(UserMessage(content="other", timestamp=3))
    lines = forked.read_bytes().split(b"\n")[:-1]
    assert [json.loads(line).get("id") for line in lines[1:]] == [
        "aaaa0001", hub.sync(forked).tree.leaf_id]
    assert hub.fork(source, "aaaa0002").is_file()  # a prompt on the path: written at once


def test_cli_fork_refuses_a_path_with_no_prompt(tmp_path: Path) -> None:
    source = write(tmp_path / "s.jsonl", [model_change_line("aaaa0001", 1),
                                          user_line("aaaa0002", "aaaa0001", "two", 2)])
    result = pi_lsp("fork", str(source), "--leaf", "aaaa0001")
    assert result.returncode == 2
    assert b"nothing written" in result.stderr and b"no user or assistant" in result.stderr
    assert result.stderr.count(b"\n") == 1
    assert sorted(tmp_path.iterdir()) == [source]
    written = pi_lsp("fork", str(source), "--leaf", "aaaa0002")
    assert written.returncode == 0, written.stderr
    assert Path(written.stdout.decode().strip()).is_file()


# -- 4. two writers --------------------------------------------------------------------------


def foreign_line(entry_id: str, parent: str | None) -> bytes:
    return json.dumps({"type": "custom", "customType": "other-writer", "id": entry_id,
                       "parentId": parent, "timestamp": stamp(30)}).encode()


def test_a_held_leaf_ignores_another_writers_appends(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", [user_line("aaaa0001", None, "one", 1)])
    tree = SessionTree.open(str(path))
    tree.hold_leaf = True
    call = tree.append_message(reply("calling a tool"))
    with open(path, "ab") as handle:
        handle.write(foreign_line("f0000001", "aaaa0001") + b"\n")
    assert tree.refresh() == Refresh(1, False)  # the watcher takes it in...
    assert tree.leaf_id == call  # ...but it does not become the turn's parent
    result = tree.append_message(UserMessage(content="result", timestamp=3))
    assert tree.record(result).env.parent_id == call
    assert "f0000001" in tree.by_id


def test_listeners_see_a_held_sessions_new_entry_as_its_leaf(tmp_path: Path) -> None:
    """A turn holds its leaf; each entry it writes is told with that entry as the leaf (the
    editors patch their trees from it and would mark the entry before as the leaf)."""
    path = write(tmp_path / "s.jsonl", [user_line("aaaa0001", None, "one", 1)])
    tree = SessionTree.open(str(path))
    tree.hold_leaf = True
    seen: list[tuple[str | None, int]] = []
    tree.listeners.append(lambda told, _change: seen.append((told.leaf_id, len(told.records))))
    call = tree.append_message(reply("calling a tool"))
    result = tree.append_message(UserMessage(content="result", timestamp=3))
    assert seen == [(call, 2), (result, 3)]


def test_entries_written_just_before_an_append_are_taken_in_first(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", [user_line("aaaa0001", None, "one", 1)])
    tree = SessionTree.open(str(path))
    with open(path, "ab") as handle:  # not refreshed: the append must notice it
        handle.write(foreign_line("f0000001", "aaaa0001") + b"\n")
    mine = tree.append_message(UserMessage(content="two", timestamp=2))
    assert tree.record(mine).env.parent_id == "aaaa0001"
    assert tree.record("f0000001").line == 3 and tree.record(mine).line == 4
    assert tree.leaf_id == mine


@pytest.fixture
async def rig_harness(tmp_path: Path, fake: FakeAnthropic
                      ) -> AsyncIterator[tuple[Harness, list[AgentEvent]]]:
    sessions = tmp_path / ".pi" / "sessions"
    sessions.mkdir(parents=True)
    path = write(sessions / "s.jsonl", [user_line("aaaa0001", None, "one", 1),
                                        reply_line("aaaa0002", "aaaa0001", "two", 2)])
    provider = AnthropicProvider("k", base_url=fake.url)
    harness = Harness(SessionTree.open(str(path)), tmp_path, lambda _name: provider)
    events: list[AgentEvent] = []
    harness.subscribe(events.append)
    yield harness, events
    await provider.client.close()


def entries(path: str) -> dict[str, dict[str, Any]]:
    lines = Path(path).read_bytes().split(b"\n")[1:-1]
    return {e["id"]: e for e in map(json.loads, lines)}


async def test_another_writer_during_a_tool_call(
        rig_harness: tuple[Harness, list[AgentEvent]], fake: FakeAnthropic) -> None:
    """The pi CLI appends while a tool runs; the watcher reads it in at once."""
    harness, _events = rig_harness
    tree = harness.tree
    foreign = foreign_line("f0000001", "aaaa0002").decode().replace("'", "")
    command = f"printf '%s\\n' '{foreign}' >> {tree.path}"
    fake.script(tool_reply([("toolu_1", "bash", {"command": command})]), text_reply("done"))
    harness.subscribe(lambda e: tree.refresh() if type(e).__name__ == "ToolExecutionEnd" else 0)
    await harness.prompt("go")
    on_disk = entries(tree.path)
    assert "f0000001" in on_disk and "f0000001" in tree.by_id
    messages = [e for e in on_disk.values() if e["type"] == "message"]
    calls = [e for e in messages if e["message"].get("stopReason") == "toolUse"]
    results = [e for e in messages if e["message"]["role"] == "toolResult"]
    assert len(calls) == 1 and len(results) == 1
    assert results[0]["parentId"] == calls[0]["id"]
    final = tree.record(tree.leaf_id or "")
    assert final.env.parent_id == results[0]["id"]
    assert [p.kind for p in check_session(tree)] == []


async def test_a_file_replaced_mid_turn_keeps_both_sides(
        rig_harness: tuple[Harness, list[AgentEvent]], fake: FakeAnthropic,
        tmp_path: Path) -> None:
    harness, events = rig_harness
    tree = harness.tree
    original = tree.path
    other = write(tmp_path / "other.jsonl", [user_line("bbbb0001", None, "someone else", 1)])
    replacement = other.read_bytes()
    command = f"cp {other} {original}.tmp && mv {original}.tmp {original}"
    fake.script(tool_reply([("toolu_1", "bash", {"command": command})]), text_reply("done"))
    await harness.prompt("go")
    assert Path(original).read_bytes() == replacement  # the other program's file, untouched
    moved = [e for e in events if isinstance(e, SessionMoved)]
    assert len(moved) == 1 and moved[0].replaced_path == original
    assert tree.path == moved[0].path != original
    assert Path(tree.path).parent == Path(original).parent
    rescued = SessionTree.open(tree.path)
    assert rescued.header.parent_session == str(Path(original).resolve())
    path = rescued.path_ids(rescued.leaf_id)
    # the declared prompt and tools, user, call, result, reply
    assert path[:2] == ["aaaa0001", "aaaa0002"] and len(path) == 7
    assert [p.kind for p in check_session(rescued)] == []
    assert any(isinstance(e, ToolExecutionStart) for e in events)


async def test_a_turn_whose_session_folder_is_swapped_reports_it(
        rig_harness: tuple[Harness, list[AgentEvent]], fake: FakeAnthropic,
        tmp_path: Path) -> None:
    """The model's command swaps `.pi/sessions` for a symlink leading out (a checkout): the
    turn ends with an error naming where it leads, and nothing is written there (before,
    the whole session was)."""
    harness, events = rig_harness
    sessions, outside = tmp_path / ".pi" / "sessions", tmp_path / "outside"
    outside.mkdir()
    command = f"rm -r {sessions} && ln -s {outside} {sessions}"
    fake.script(tool_reply([("toolu_1", "bash", {"command": command})]), text_reply("done"))
    with pytest.raises(WriteFailedError):
        await harness.prompt("go")
    [error] = [e for e in events if isinstance(e, ErrorEvent)]
    assert f"now leads elsewhere, to {outside};" in error.message
    assert list(outside.iterdir()) == []
    assert harness.tree.path_ids(harness.tree.leaf_id)[:2] == ["aaaa0001", "aaaa0002"]


@dataclass
class Moving:
    """A harness on a session whose file `other` will replace, and the events it sent."""

    path: Path
    other: Path
    harness: Harness
    events: list[AgentEvent]

    def moves(self) -> list[tuple[str, str]]:
        return [(e.replaced_path, e.path) for e in self.events if isinstance(e, SessionMoved)]

    def moved_once(self) -> bool:
        """Listeners heard of the one move, from the file to where the session is now."""
        path = self.harness.tree.path
        return path != str(self.path) and self.moves() == [(str(self.path), path)]


def moving(tmp_path: Path) -> Moving:
    path = write(tmp_path / "s.jsonl", [user_line("aaaa0001", None, "one", 1)])
    other = write(tmp_path / "other.jsonl", [user_line("bbbb0001", None, "someone else", 1)])
    harness = Harness(SessionTree.open(str(path)), tmp_path, lambda _name: None)
    events: list[AgentEvent] = []
    harness.subscribe(events.append)
    return Moving(path, other, harness, events)


TURN_END = TurnEnd(message=AssistantMessage(
    content=[], api="anthropic-messages", provider="anthropic", model="m", usage=Usage(),
    stop_reason="stop", timestamp=2), tool_results=[])


def test_a_message_lost_in_a_move_still_says_where_the_session_went(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The file is replaced as a turn's message is written: the session moves to a new file
    without it and the write fails, and listeners still learn the new path (before, the
    failure skipped SessionMoved)."""
    rig = moving(tmp_path)
    real = tree_module.append_lines

    def replaced_as_written(file: str, lines: list[bytes], **options: Any) -> None:
        real(file, lines, **options)
        if file == str(rig.path):
            os.replace(rig.other, rig.path)

    monkeypatch.setattr(tree_module, "append_lines", replaced_as_written)
    rig.harness.tree.hold_leaf = True  # a turn runs
    with pytest.raises(WriteFailedError, match="replaced as the entry was written"):
        rig.harness.emit(MessageEnd(message=UserMessage(content="lost", timestamp=2)))
    assert rig.moved_once()


def test_a_move_found_by_a_write_queued_for_the_turns_end_is_said(tmp_path: Path) -> None:
    """A label asked for during a turn is written at its end, and finds the file replaced:
    the session moves, and listeners learn it (before, only a message's write said so)."""
    rig = moving(tmp_path)
    rig.harness.phase, rig.harness.tree.hold_leaf = "turn", True  # a turn runs
    rig.harness.set_label("aaaa0001", "queued")
    os.replace(rig.other, rig.path)
    rig.harness.emit(TURN_END)
    assert rig.moved_once() and rig.harness.tree.label("aaaa0001") == "queued"


def test_a_move_found_during_a_nested_event_is_said_once(tmp_path: Path) -> None:
    """A listener writes at the save point a turn's end makes (an event inside an event) and
    finds the file replaced: one SessionMoved, not one per event that was under way."""
    rig = moving(tmp_path)
    rig.harness.subscribe(lambda event: rig.harness.tree.append_custom("at-save-point", None)
                          if isinstance(event, SavePoint) else None)
    rig.harness.phase, rig.harness.tree.hold_leaf = "turn", True
    os.replace(rig.other, rig.path)
    rig.harness.emit(TURN_END)
    assert rig.moved_once()


async def test_a_move_found_as_a_cut_short_run_flushes_is_said(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run aborted before its end still writes what was queued; that write finds the file
    replaced, and listeners hear where the session went."""
    rig = moving(tmp_path)

    async def cut_short(_hooks: Any, _prompts: Any) -> list[Any]:
        rig.harness.set_label("aaaa0001", "queued")
        os.replace(rig.other, rig.path)
        raise asyncio.CancelledError

    monkeypatch.setattr(harness_module, "run_loop", cut_short)
    monkeypatch.setattr(harness_module, "system_patch_at", lambda *_args: None)
    with pytest.raises(asyncio.CancelledError):
        await rig.harness._run([])
    assert rig.moved_once() and rig.harness.tree.label("aaaa0001") == "queued"


async def test_a_move_an_idle_write_found_is_not_said_by_a_later_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An idle write (a name) finds the file replaced: the hub tells editors where the
    session went (relocatedFrom); the next run, much later, does not say it again."""
    rig = moving(tmp_path)
    os.replace(rig.other, rig.path)
    rig.harness.set_name("renamed while idle")
    assert rig.harness.tree.path != str(rig.path)

    async def one_event(_hooks: Any, _prompts: Any) -> list[Any]:
        rig.harness.emit(AgentStart())
        return []

    monkeypatch.setattr(harness_module, "run_loop", one_event)
    monkeypatch.setattr(harness_module, "system_patch_at", lambda *_args: None)
    monkeypatch.setattr(rig.harness, "_made_provider", lambda _name: asyncio.sleep(0))
    await rig.harness._run([])
    assert rig.moves() == []


def test_a_rewrite_of_the_same_size_is_noticed(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", [user_line("aaaa0001", None, "one " * 200, 1),
                                        user_line("aaaa0002", "aaaa0001", "two", 2)])
    tail = Tail.after(str(path), read_file(str(path)))
    assert not tail.replaced()
    data = path.read_bytes()
    assert data.endswith(b'"timestamp": 2}}\n') and len(data) > journal.PREFIX_CHECK
    with open(path, "r+b") as handle:  # same inode, same size, same first 512 bytes
        handle.seek(len(data) - 4)
        handle.write(b"9")
    assert path.read_bytes()[:-4] == data[:-4]
    assert tail.replaced()
    assert tail.poll().reset


def test_an_idle_append_to_a_replaced_file_moves_to_a_new_file(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", [user_line("aaaa0001", None, "one", 1)])
    tree = SessionTree.open(str(path))
    changes: list[Refresh] = []
    tree.listeners.append(lambda _tree, change: changes.append(change))
    replacement = write(tmp_path / "new.jsonl", [user_line("cccc0001", None, "new", 1)])
    os.replace(replacement, path)
    label = tree.append_label("aaaa0001", "kept")
    assert path.read_bytes().count(b"\n") == 2  # the replacement is left as it was
    assert changes[0].relocated_from == str(path)
    assert tree.path != str(path) and tree.label("aaaa0001") == "kept"
    assert label in entries(tree.path) and "aaaa0001" in entries(tree.path)


@pytest.mark.parametrize("hold_leaf", [False, True])
def test_an_append_to_a_deleted_file_brings_it_back_only_for_a_running_turn(
        tmp_path: Path, hold_leaf: bool) -> None:
    """A deleted session is not made again by a label or a name (the command finds no file);
    a running turn's entries, which must not be lost, go on in a new file beside it."""
    path = write(tmp_path / "s.jsonl", [user_line("aaaa0001", None, "one", 1)])
    tree = SessionTree.open(str(path))
    tree.hold_leaf = hold_leaf
    path.unlink()
    if not hold_leaf:
        with pytest.raises(FileNotFoundError):
            tree.append_label("aaaa0001", "kept")
        assert list(tmp_path.iterdir()) == []
        return
    label = tree.append_label("aaaa0001", "kept")
    [moved] = tmp_path.iterdir()
    assert tree.path == str(moved) and {label, "aaaa0001"} <= set(entries(tree.path))


def in_sessions_folder(tmp_path: Path) -> tuple[Path, SessionTree]:
    """A session in a workspace's `.pi/sessions`, held by a running turn."""
    sessions = tmp_path / "ws" / ".pi" / "sessions"
    sessions.mkdir(parents=True)
    tree = SessionTree.open(str(write(sessions / "s.jsonl", [user_line("aaaa0001", None, "one",
                                                                       1)])))
    tree.hold_leaf = True
    return sessions, tree


@pytest.mark.parametrize("swap", ["symlink", "gone"])
def test_a_running_turn_never_moves_through_a_symlink_put_in_its_folders_place(
        tmp_path: Path, swap: str) -> None:
    """A checkout puts a symlink leading out where the session folder was (or removes it):
    before, the turn's next entry moved the whole session into the folder it leads to."""
    sessions, tree = in_sessions_folder(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.rmtree(sessions)
    if swap == "symlink":
        sessions.symlink_to(outside)
    with pytest.raises(WriteFailedError) as caught:
        tree.append_label("aaaa0001", "kept")
    what = f"now leads elsewhere, to {outside};" if swap == "symlink" else "is gone;"
    assert f"the session folder {sessions} {what}" in str(caught.value)
    assert "entries are kept in memory" in str(caught.value)
    assert list(outside.iterdir()) == []
    assert tree.path == str(sessions / "s.jsonl") and list(tree.by_id) == ["aaaa0001"]


def new_session_in(sessions: Path, how: str) -> SessionTree:
    """A session in `sessions` with no file yet: one begun as pi.newSession begins it, a fork
    of a path with no message, or one written at once with its first entry."""
    if how == "started":
        return start_session(sessions.parent.parent, "anthropic", "m", "off")
    if how == "forked":
        change = {"type": "model_change", "id": "aaaa0001", "parentId": None,
                  "timestamp": stamp(1), "provider": "anthropic", "modelId": "m"}
        source = SessionTree.open(str(write(sessions / "s.jsonl", [json.dumps(change).encode()])))
        return fork_session(source, "aaaa0001")
    return SessionTree.create(str(sessions / "new.jsonl"), str(sessions.parent.parent))


@pytest.mark.parametrize("how", ["started", "forked", "written at once"])
def test_a_new_sessions_first_write_never_goes_through_a_symlink_in_its_folders_place(
        tmp_path: Path, how: str) -> None:
    """A checkout puts a symlink leading out where a new session's folder was before its first
    message: before, the session's file was created in the folder it leads to."""
    sessions, outside = tmp_path / "ws" / ".pi" / "sessions", tmp_path / "outside"
    sessions.mkdir(parents=True)
    outside.mkdir()
    tree = new_session_in(sessions, how)
    shutil.rmtree(sessions)
    sessions.symlink_to(outside)
    with pytest.raises(WriteFailedError) as caught:
        tree.append_message(UserMessage(content="secret", timestamp=1))
    assert f"the session folder {sessions} now leads elsewhere, to {outside};" in str(
        caught.value)
    assert "entries are kept in memory" in str(caught.value)
    assert list(outside.iterdir()) == [] and not tree.on_disk


def test_a_session_file_replaced_by_a_symlink_moves_on_beside_it(tmp_path: Path) -> None:
    """The session file (not its folder) is replaced by a symlink leading out: the session
    goes on in its own folder, its parentSession the old file as it was (before, both named
    the folder the symlink leads to)."""
    sessions, tree = in_sessions_folder(tmp_path)
    outside = write(tmp_path / "outside.jsonl", [user_line("bbbb0001", None, "other", 1)])
    (sessions / "s.jsonl").unlink()
    (sessions / "s.jsonl").symlink_to(outside)
    label = tree.append_label("aaaa0001", "kept")
    assert Path(tree.path).parent == sessions and {label, "aaaa0001"} <= set(entries(tree.path))
    assert SessionTree.open(tree.path).header.parent_session == str(sessions / "s.jsonl")
    assert list(entries(str(outside))) == ["bbbb0001"]


@pytest.mark.parametrize("in_place", [False, True])
@pytest.mark.parametrize("hold_leaf", [False, True])
def test_an_entry_is_never_written_into_a_replacement(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_place: bool, hold_leaf: bool) -> None:
    """The file is replaced (renamed over, or rewritten in place as some editors save) after
    the append read what others wrote, before it wrote: the replacement is left as it was,
    and the session moves to a new file with the entry."""
    path = write(tmp_path / "s.jsonl", [user_line("aaaa0001", None, "one", 1)])
    tree = SessionTree.open(str(path))
    tree.hold_leaf = hold_leaf
    real = appender.append_lines

    def replace_first(target: str, lines: list[bytes], **flags: Any) -> None:
        other = write(tmp_path / "new.jsonl", [user_line("cccc0001", None, "new", 1)])
        if in_place:
            path.write_bytes(other.read_bytes())  # truncates and writes: the same inode
        else:
            os.replace(other, path)
        monkeypatch.setattr(tree_module, "append_lines", real)
        real(target, lines, **flags)
    monkeypatch.setattr(tree_module, "append_lines", replace_first)
    mine = tree.append_message(UserMessage(content="two", timestamp=2))
    assert list(entries(str(path))) == ["cccc0001"]
    assert tree.path != str(path) and tree.leaf_id == mine
    assert tree.path_ids(tree.leaf_id) == ["aaaa0001", mine] and mine in entries(tree.path)


def test_an_entry_pi_lsp_could_not_read_back_is_not_written(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", [user_line("aaaa0001", None, "one", 1)])
    before = path.read_bytes()
    tree = SessionTree.open(str(path))
    deep: Any = []
    for _ in range(250):
        deep = [deep]
    with pytest.raises(WriteFailedError, match="nests more than 200 levels deep"):
        tree.append_custom("x", deep)
    assert path.read_bytes() == before and tree.leaf_id == "aaaa0001"


def test_an_entry_run_together_with_another_writers_line_is_an_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another writer (no lock) has half a line out as ours lands whole after it: the two are
    one damaged line, so the append fails, and the leaf stays on an entry the tree holds."""
    path = write(tmp_path / "s.jsonl", [user_line("aaaa0001", None, "one", 1)])
    tree = SessionTree.open(str(path))
    real = os.write

    def foreign_half_first(fd: int, data: bytes) -> int:
        monkeypatch.setattr(appender.os, "write", real)
        with open(path, "ab") as handle:
            handle.write(foreign_line("f0000001", "aaaa0001")[:30])
        return real(fd, data)
    monkeypatch.setattr(appender.os, "write", foreign_half_first)
    with pytest.raises(WriteFailedError, match="ran together"):
        tree.append_message(UserMessage(content="two", timestamp=2))
    assert tree.leaf_id == "aaaa0001" and tree.path_ids(tree.leaf_id) == ["aaaa0001"]


# -- 5. a write that fails part way ----------------------------------------------------------


def failing_write(monkeypatch: pytest.MonkeyPatch, error: int | None) -> None:
    """The next os.write writes nothing and fails with `error` (None: returns 0)."""
    def write_nothing(fd: int, data: bytes) -> int:
        if error is None:
            return 0
        raise OSError(error, os.strerror(error))
    monkeypatch.setattr(appender.os, "write", write_nothing)


@pytest.mark.parametrize("error", [errno.ENOSPC, errno.EIO, None])
def test_a_failed_append_leaves_the_file_as_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: int | None) -> None:
    path = write(tmp_path / "s.jsonl", [user_line("aaaa0001", None, "one", 1)])
    before = path.read_bytes()
    tree = SessionTree.open(str(path))
    failing_write(monkeypatch, error)
    with pytest.raises(WriteFailedError) as caught:
        tree.append_message(UserMessage(content="two " * 100, timestamp=2))
    assert path.read_bytes() == before
    reason = os.strerror(error or errno.ENOSPC)
    assert str(caught.value) == f"could not write to {path}: {reason}"
    monkeypatch.undo()
    assert tree.refresh() == Refresh(0, False)
    again = tree.append_message(UserMessage(content="three", timestamp=3))
    assert SessionTree.open(str(path)).path_ids(again) == ["aaaa0001", again]


def test_a_failed_move_to_a_new_root_keeps_the_id_less_leaf(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A durable move to a new root that failed (disk full) put the leaf id back but not the
    id-less last line it stood at: the context there held no entries, and the next entry was
    written with "parentId":null where pi 1.6 writes 0 (its leafId as the line holds it)."""
    last = json.dumps({"type": "custom", "customType": "test", "id": 0, "parentId": "aaaa0001",
                       "timestamp": stamp(2)}).encode()
    path = write(tmp_path / "s.jsonl", [user_line("aaaa0001", None, "one", 1), last])
    tree = SessionTree.open(str(path))
    before = tree.path_to(tree.leaf_id)
    failing_write(monkeypatch, errno.ENOSPC)
    with pytest.raises(WriteFailedError):
        tree.move_leaf(None, durable=True)
    monkeypatch.undo()
    assert tree.path_to(tree.leaf_id) == before and len(before) == 2
    tree.append_label("aaaa0001", "L")
    assert json.loads(path.read_bytes().splitlines()[-1])["parentId"] == 0


def short_write(monkeypatch: pytest.MonkeyPatch, path: Path, before: bytes = b"",
                after: bytes = b"") -> list[bytes]:
    """The next os.write stores only the first half of its bytes (disk full, a signal), and
    another writer (pi takes no lock) appends `before` just before it and `after` just after;
    returns the bytes the write was given."""
    real = os.write
    given = []

    def write_half(fd: int, data: bytes) -> int:
        monkeypatch.setattr(appender.os, "write", real)
        given.append(data)
        with path.open("ab") as handle:
            handle.write(before)
        count = real(fd, data[: len(data) // 2])
        with path.open("ab") as handle:
            handle.write(after)
        return count
    monkeypatch.setattr(appender.os, "write", write_half)
    return given


def test_a_short_write_is_cut_back_not_finished(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "s.jsonl", [user_line("aaaa0001", None, "one", 1)])
    before = path.read_bytes()
    tree = SessionTree.open(str(path))
    given = short_write(monkeypatch, path)
    with pytest.raises(WriteFailedError) as caught:
        tree.append_message(UserMessage(content="two " * 100, timestamp=2))
    assert path.read_bytes() == before
    total = len(given[0])
    assert str(caught.value) == (f"could not write to {path}: only {total // 2} of {total} "
                                 "bytes were written; they were cut back off")
    assert tree.refresh() == Refresh(0, False)
    again = tree.append_message(UserMessage(content="three", timestamp=3))
    assert SessionTree.open(str(path)).path_ids(again) == ["aaaa0001", again]


def test_another_instances_short_write_cut_back_leaves_a_running_session_in_place(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two editor windows on one file: one runs a turn, the other's append stores half its
    line (disk full) and cuts it back off, and the first had read the half meanwhile. The
    file is the one it read, so its turn goes on in it (before, it moved to a new file)."""
    path = write(tmp_path / "s.jsonl", [user_line("aaaa0001", None, "one", 1)])
    running, other = SessionTree.open(str(path)), SessionTree.open(str(path))
    running.hold_leaf = True
    real = os.write

    def half_seen(fd: int, data: bytes) -> int:
        monkeypatch.setattr(appender.os, "write", real)
        count = real(fd, data[: len(data) // 2])
        assert running.refresh() == Refresh(0, False)  # its watcher fires now
        return count

    monkeypatch.setattr(appender.os, "write", half_seen)
    with pytest.raises(WriteFailedError, match="they were cut back off"):
        other.append_label("aaaa0001", "from the other window")
    assert running.refresh() == Refresh(0, False)
    turn = running.append_message(UserMessage(content="the turn goes on", timestamp=2))
    assert running.path == str(path)
    assert SessionTree.open(str(path)).path_ids(turn) == ["aaaa0001", turn]


PI_LINE = user_line("bbbb0002", "aaaa0001", "pi's", 2) + b"\n"


def torn_beside_pi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **where: bytes
                   ) -> tuple[Path, SessionTree, bytes, bytes, pytest.ExceptionInfo[Any]]:
    """An append whose write stores half its bytes, pi's line landing `before` or `after`
    them: the file, its tree, the bytes before, the half written and the error raised."""
    path = write(tmp_path / "s.jsonl", [user_line("aaaa0001", None, "one", 1)])
    before = path.read_bytes()
    tree = SessionTree.open(str(path))
    given = short_write(monkeypatch, path, **where)
    with pytest.raises(WriteFailedError) as caught:
        tree.append_message(UserMessage(content="two " * 100, timestamp=3))
    return path, tree, before, given[0][: len(given[0]) // 2], caught


def test_a_short_write_after_another_writers_line_is_a_damaged_line_of_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pi's line landed before our part: a newline ends the part, and pi's next line is whole
    instead of glued to it."""
    path, tree, before, part, caught = torn_beside_pi(tmp_path, monkeypatch, before=PI_LINE)
    assert path.read_bytes() == before + PI_LINE + part + b"\n"
    assert "another writer appended too; they are left as a damaged line" in str(caught.value)
    later = user_line("bbbb0003", "bbbb0002", "pi's next", 4) + b"\n"
    with path.open("ab") as handle:
        handle.write(later)
    tree.refresh()
    fresh = SessionTree.open(str(path))
    assert kinds(fresh.problems) == [("malformed", 4)]
    assert fresh.path_ids(fresh.leaf_id) == ["aaaa0001", "bbbb0002", "bbbb0003"]
    assert (tree.leaf_id, kinds(tree.problems)) == (fresh.leaf_id, kinds(fresh.problems))


def test_a_short_write_is_not_finished_after_another_writers_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pi's line landed straight after our part: they are one damaged line now, which nothing
    can undo, but the rest is not written after it (where it would be a third damaged line)
    and the caller is told."""
    path, _tree, before, part, caught = torn_beside_pi(tmp_path, monkeypatch, after=PI_LINE)
    assert path.read_bytes() == before + part + PI_LINE
    assert str(caught.value).endswith("another writer's line was appended straight after "
                                      "them; both are left as one damaged line")


def test_a_file_that_cannot_be_opened_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "gone" / "s.jsonl"
    with pytest.raises(WriteFailedError) as caught:
        appender.append_lines(str(missing), [b"{}"], create=True)
    assert str(caught.value) == f"could not write to {missing}: No such file or directory"


def test_a_failed_append_is_one_line_from_the_command_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "s.jsonl", [user_line("aaaa0001", None, "one", 1),
                                        reply_line("aaaa0002", "aaaa0001", "two", 2)])
    before = path.read_bytes()
    failing_write(monkeypatch, errno.ENOSPC)
    # Back to the first prompt (the leaf goes before it): a move that writes, unlike one to
    # the leaf itself.
    assert main(["branch", str(path), "--to", "aaaa0001"]) != 0
    err = capsys.readouterr().err
    assert err == f"pi-lsp: could not write to {path}: No space left on device\n"
    assert path.read_bytes() == before


@pytest.mark.parametrize("error", [errno.ENOSPC, None])
def test_a_failed_repair_leaves_no_empty_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        error: int | None) -> None:
    """`check --repair OUT` made OUT, then left it empty when the write failed (`fork` and a
    new session already remove theirs)."""
    path = write(tmp_path / "s.jsonl", [user_line("aaaa0001", None, "one", 1)])
    out = tmp_path / "repaired.jsonl"
    failing_write(monkeypatch, error)
    assert main(["check", str(path), "--repair", str(out)]) == 2
    assert capsys.readouterr().err.startswith(f"pi-lsp: could not write to {out}")
    assert not out.exists()


@pytest.mark.parametrize("whole", [False, True])
@pytest.mark.parametrize("command", ["check", "fork"])
def test_ctrl_c_while_a_copy_is_written_leaves_no_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, whole: bool) -> None:
    """Ctrl-C while `check --repair OUT` built its copy left a 0-byte OUT that blocked the retry
    ("already exists"), and `fork` an empty session file; Ctrl-C as the one write returns (it
    is not cut short) left the whole copy, though the command said it was interrupted."""
    path = write(tmp_path / "s.jsonl", [user_line("aaaa0001", None, "one", 1)])
    real_write = os.write

    def interrupted(fd: int, data: bytes) -> int:
        if whole:
            real_write(fd, data)
        raise KeyboardInterrupt

    monkeypatch.setattr(appender.os, "write", interrupted)
    out = tmp_path / "repaired.jsonl"
    args = ["check", str(path), "--repair", str(out)] if command == "check" else \
        ["fork", str(path)]
    assert main(args) == 130
    assert list(tmp_path.iterdir()) == [path]


# -- 6. session names ------------------------------------------------------------------------


def test_an_empty_name_clears_the_name_as_in_pi(tmp_path: Path) -> None:
    """pi's getSessionName (0.73.1 and 1.6) is the latest session_info's trimmed name; an empty
    or blank one clears it."""
    def info(entry_id: str, parent: str, name: str, n: int) -> bytes:
        return json.dumps({"type": "session_info", "id": entry_id, "parentId": parent,
                           "timestamp": stamp(n), "name": name}).encode()
    path = write(tmp_path / "s.jsonl", [user_line("aaaa0001", None, "one", 1),
                                        info("aaaa0002", "aaaa0001", "  Named  ", 2)])
    assert SessionTree.open(str(path)).name == "Named"
    assert summarize(path).name == "Named"
    with path.open("ab") as handle:
        handle.write(info("aaaa0003", "aaaa0002", "", 3) + b"\n")
    assert SessionTree.open(str(path)).name is None
    assert summarize(path).name is None


# -- 7. a branch summary with nothing left behind --------------------------------------------


async def test_summarizing_toward_a_descendant_writes_no_summary(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", [user_line("aaaa0001", None, "one", 1),
                                        reply_line("aaaa0002", "aaaa0001", "two", 2),
                                        user_line("aaaa0003", "aaaa0002", "three", 3),
                                        reply_line("aaaa0004", "aaaa0003", "four", 4)])
    tree = SessionTree.open(str(path))
    tree.branch("aaaa0002")
    before = path.read_bytes()
    outcome = await branch_with_summary(tree, "aaaa0004", ExtractiveSummarizer(), 10_000,
                                        durable=False)
    assert outcome.summary_entry_id is None and outcome.summary is None
    assert tree.leaf_id == "aaaa0004"
    assert path.read_bytes() == before  # pi only moves the leaf
    tree.branch("aaaa0002")
    durable = await branch_with_summary(tree, "aaaa0004", ExtractiveSummarizer(), 10_000)
    assert durable.summary_entry_id is None
    assert [r.env.type for r in SessionTree.open(str(path)).records][-1] == "custom"


# -- 8. check says what a repair would do ----------------------------------------------------


def test_every_problem_kind_has_a_repair_hint(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", [
        b"", b"not json", b"null", b"[1]", b'{"type":"message","id":5}',
        user_line("aaaa0001", None, "one", 1), user_line("aaaa0001", None, "dup", 2),
        user_line("aaaa0002", "gone", "orphan", 3),
        json.dumps({"type": "label", "id": "aaaa0003", "parentId": "aaaa0001",
                    "timestamp": stamp(4), "targetId": "nowhere", "label": "x"}).encode(),
        user_line("aaaa0004", "aaaa0001", "x", 5).replace(b'"x"', b'"\xff"'),
        user_line("aaaa0005", "aaaa0004", "LONE", 6).replace(b"LONE", b"\\udc00"),
    ])
    with open(path, "ab") as handle:
        handle.write(b'{"type":"mess')
    # An entry pi keeps is read whatever its envelope's types; only one before the header
    # is still an invalid entry.
    path.write_bytes(b'{"type":5}\n' + path.read_bytes())
    problems = check_session(SessionTree.open(str(path)))
    found = {p.kind for p in problems}
    assert found >= {"blank", "malformed", "not-object", "invalid-entry", "duplicate-id",
                     "orphan", "dangling-reference", "invalid-utf8", "torn",
                     "off-type-envelope", "non-object-entry"}
    assert all(p.repair for p in problems), [p for p in problems if not p.repair]


def test_repair_writes_a_repaired_copy_and_leaves_the_file(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", [
        user_line("aaaa0001", None, "one", 1), b"not json", b"",
        user_line("aaaa0002", "aaaa0001", "x", 2).replace(b'"x"', b'"\xff"'),
        user_line("aaaa0003", "aaaa0002", "LONE", 3).replace(b"LONE", b"\\ud83d"),
        reply_line("aaaa0004", "aaaa0003", "four", 4),
    ])
    with open(path, "ab") as handle:
        handle.write(b'{"type":"mess')
    before = path.read_bytes()
    copy = tmp_path / "fixed.jsonl"
    result = pi_lsp("check", str(path), "--repair", str(copy))
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(b"\n") == 5  # four repaired lines, then the summary
    assert path.read_bytes() == before
    assert check_session(SessionTree.open(str(copy))) == []
    assert is_utf8(copy.read_bytes())
    fixed = SessionTree.open(str(copy))
    assert texts(fixed, fixed.leaf_id) == ["one", "\ufffd", "\ud83d", "four"]
    assert copy.read_bytes().split(b"\n")[1] == before.split(b"\n")[1]  # good lines as they were
    again = pi_lsp("check", str(path), "--repair", str(copy))
    assert again.returncode == 2 and b"already exists" in again.stderr


@pytest.mark.parametrize("name", IDLESS_FIXTURES)
def test_repair_keeps_idless_lines(tmp_path: Path, name: str) -> None:
    """`check --repair` copied only entries with an id: it dropped an id-less name, label
    or last line without a word ("0 damaged line(s) repaired"), so pi read the copy
    differently."""
    source = ODD_ENVELOPES / name
    copy = tmp_path / "fixed.jsonl"
    result = pi_lsp("check", str(source), "--repair", str(copy))
    assert result.returncode == 0, result.stderr
    assert copy.read_bytes() == source.read_bytes()
    entries = source.read_bytes().count(b"\n") - 1
    assert f": {entries} entries, 0 damaged".encode() in result.stdout
    assert_read_as_pi16(SessionTree.open(str(copy)), name)


def test_repair_of_a_version_1_file_leaves_out_its_non_object_lines(tmp_path: Path) -> None:
    """`check --repair` kept a version 1 file's `[1]` line as it was, yet the next entry's
    parentId named the id made up for it in memory: the copy's path lost "one", and the
    command said "0 damaged line(s) repaired"."""
    header = json.dumps({"type": "session", "id": "old", "timestamp": stamp(0), "cwd": "/w"})
    one, two = (json.dumps({"type": "message", "timestamp": stamp(n), "message": {
        "role": "user", "content": text, "timestamp": n}}).encode() for n, text in
        [(1, "one"), (2, "two")])
    path = tmp_path / "v1.jsonl"
    path.write_bytes(b"\n".join([header.encode(), one, b"[1]", b'"s"', two, b""]))
    copy = tmp_path / "fixed.jsonl"
    result = pi_lsp("check", str(path), "--repair", str(copy))
    assert result.returncode == 0, result.stderr
    assert b": 2 entries, 2 damaged line(s) repaired" in result.stdout
    source, fixed = SessionTree.open(str(path)), SessionTree.open(str(copy))
    assert texts(fixed, fixed.leaf_id) == texts(source, source.leaf_id) == ["one", "two"]
    assert check_session(fixed) == []


def test_check_lists_the_first_problems_of_a_kind_and_counts_the_rest(tmp_path: Path) -> None:
    """A file of 2M blank lines held 2M problems (a third of the ~400 MB it took to open), to
    list 2M times what one line says."""
    path = write(tmp_path / "s.jsonl", [user_line("aaaa0001", None, "one", 1),
                                        *[b""] * (PROBLEMS_PER_KIND + 500), b"not json"])
    result = pi_lsp("check", str(path))
    assert result.returncode == 1, result.stderr
    *listed, summary, malformed, total = result.stdout.decode().splitlines()
    assert len(listed) == PROBLEMS_PER_KIND and all(": blank: " in line for line in listed)
    first_unlisted = PROBLEMS_PER_KIND + 3
    assert f":line {first_unlisted}: blank: 500 more blank problem(s)" in summary
    assert ": malformed: " in malformed
    assert total == f"1 entries, {PROBLEMS_PER_KIND + 501} problem(s)"
    copy = tmp_path / "fixed.jsonl"
    repaired = pi_lsp("check", str(path), "--repair", str(copy))
    assert f"{PROBLEMS_PER_KIND + 501} damaged line(s) repaired" in repaired.stdout.decode()
    assert copy.read_bytes().count(b"\n") == 2


def test_a_fork_of_an_old_version_file_with_a_damaged_line_is_version_3(tmp_path: Path) -> None:
    """Migrated lines are copied in their migrated form, repaired or not."""
    header = json.dumps({"type": "session", "id": "old", "timestamp": stamp(0), "cwd": "/w"})
    user = json.dumps({"type": "message", "timestamp": stamp(1),
                       "message": {"role": "user", "content": "caf_", "timestamp": 1}})
    answer = json.loads(reply_line("x", None, "ok", 2))
    del answer["id"], answer["parentId"]
    path = tmp_path / "v1.jsonl"
    path.write_bytes(b"\n".join([header.encode(), user.encode().replace(b"_", b"\xe9"),
                                 json.dumps(answer).encode(), b""]))
    source = SessionTree.open(str(path))
    assert source.migrated and kinds(source.problems) == [("invalid-utf8", 2)]
    fork = fork_session(source, source.leaf_id or "")
    reopened = SessionTree.open(fork.path)
    assert texts(reopened, reopened.leaf_id) == ["caf\ufffd", "ok"]
    assert reopened.path_ids(reopened.leaf_id) == source.path_ids(source.leaf_id)


def test_check_reports_a_line_cut_after_a_wrong_type_id_as_malformed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`check` printed `internal error (DecodeError: Input data was truncated)`: the line
    failed type checking before its JSON ended (pi's JSON.parse throws, and pi skips it)."""
    cut = b'{"type":"message","id":true,"timestamp":"2026-01-01T00:01:20.021Z",'
    path = write(tmp_path / "s.jsonl", [user_line("aaaa0001", None, "one", 1), cut])
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    assert ":line 3: malformed: not valid JSON: Input data was truncated" in out
    assert out.endswith("1 entries, 1 problem(s)\n")


# -- 9. U+2028/U+2029 are written escaped ---------------------------------------------------

SEPARATORS = "x\u2028y\u2029z"


def test_line_separators_are_written_escaped_on_every_write_path(tmp_path: Path) -> None:
    """Raw U+2028/U+2029 are valid JSON, but a reader that splits lines on them (editors,
    older JavaScript) would cut the line; pi reads the escapes the same."""
    raw = "\u2028".encode(), "\u2029".encode()
    pi_line = user_line("aaaa0001", None, SEPARATORS, 1)  # pi writes them raw
    assert all(r in pi_line for r in raw)
    path = write(tmp_path / "s.jsonl", [pi_line])
    tree = SessionTree.open(str(path))
    tree.append_message(UserMessage(content=SEPARATORS, timestamp=2))  # append
    tree.append_session_info(SEPARATORS)
    forked = fork_session(tree, tree.leaf_id or "")  # fork
    forked.append_message(reply())
    repaired = tmp_path / "repaired.jsonl"
    assert pi_lsp("check", str(path), "--repair", str(repaired)).returncode == 0  # repair
    other = write(tmp_path / "other.jsonl", [pi_line]).read_bytes()
    os.replace(tmp_path / "other.jsonl", path)
    tree.append_label("aaaa0001", "kept")  # relocate: the file was replaced under the session
    written = [Path(tree.path), Path(forked.path), repaired]
    assert len(set(written)) == 3 and Path(tree.path) != path
    for copy in written:
        data = copy.read_bytes()
        assert not any(r in data for r in raw), copy
        assert data.count(b"x\\u2028y\\u2029z") >= 2, copy
        again = SessionTree.open(str(copy))
        assert again.name == SEPARATORS
        assert texts(again, "aaaa0001") == [SEPARATORS]
    assert path.read_bytes() == other  # another writer's file is left as it was


# -- 10. messages with hand-edited bookkeeping fields ------------------------------------------
# pi never checks the type of a message's timestamp, usage or model fields: a message where one
# is wrong stays in its context. The figures are what pi 1.6 computes on these lines.

def message_line(entry_id: str, parent: str | None, message: dict[str, Any]) -> bytes:
    return json.dumps({"type": "message", "id": entry_id, "parentId": parent,
                       "timestamp": "2026-12-03T13:00:00.097Z", "message": message}).encode()


ONE = {"role": "user", "content": "one", "timestamp": 1}
REPLY = {"role": "assistant", "content": [{"type": "text", "text": "x"}], "api": "x",
         "provider": "p", "model": "m", "usage": None, "stopReason": "stop", "timestamp": 2}


@pytest.mark.parametrize(("second", "tokens", "conversation"), [
    ({"role": "user", "content": "two", "timestamp": "x"}, [1, 1], "[User]: one\n\n[User]: two"),
    (REPLY, [1, 1], "[User]: one\n\n[Assistant]: x"),
    ({key: value for key, value in REPLY.items() if key not in ("api", "provider", "model")},
     [1, 1], "[User]: one\n\n[Assistant]: x"),
])
def test_a_message_with_a_wrongly_typed_field_stays_in_the_context(
        tmp_path: Path, second: dict[str, Any], tokens: list[int], conversation: str) -> None:
    path = write(tmp_path / "s.jsonl", [message_line("a", None, ONE),
                                        message_line("b", "a", second)])
    tree = SessionTree.open(str(path))
    messages = [decode_message(raw) for raw in build_session_context(tree, "b").messages]
    assert None not in messages
    assert [estimate_tokens(m) for m in messages if m is not None] == tokens
    assert serialize_conversation(llm_messages([m for m in messages if m is not None])) == \
        conversation


def test_a_system_message_with_a_wrongly_typed_timestamp_still_gives_the_prompt_and_tools(
        tmp_path: Path) -> None:
    system = {"role": "system", "content": "base prompt", "timestamp": "x",
              "toolsAdded": [{"name": "read", "description": "d", "parameters": {}}]}
    path = write(tmp_path / "s.jsonl", [message_line("a", None, system),
                                        message_line("b", "a", ONE)])
    messages = [decode_message(raw)
                for raw in build_session_context(SessionTree.open(str(path)), "b").messages]
    head = current_system_message(messages)
    assert head is not None and system_text(head) == "base prompt"
    assert [tool["name"] for tool in current_tools(messages)] == ["read"]
    assert [estimate_tokens(m) for m in messages if m is not None] == [16, 1]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=8)
message_fields = st.sampled_from(["role", "content", "timestamp", "usage", "api", "provider",
                                  "model", "stopReason", "toolCallId", "toolName", "isError"])


@settings(max_examples=300, deadline=None)
@given(role=st.sampled_from(["user", "assistant", "toolResult", "system", "custom"]) | json_values,
       fields=st.dictionaries(message_fields, json_values, max_size=6))
def test_any_message_object_is_read_or_refused_never_raises(role: Any,
                                                            fields: dict[str, Any]) -> None:
    message = decode_message(json.dumps({**fields, "role": role}).encode())
    assert message is None or estimate_tokens(message) >= 0


@pytest.mark.parametrize("raw", [
    rb'{"role":"user","content":5,"timestamp":"\ud800"}',
    rb'{"role":"user","content":"a","timestamp":"x","\ud800":1}',
    rb'{"role":"assistant","content":[],"usage":"\udc00","timestamp":2}',
])
def test_a_lone_surrogate_in_a_message_that_does_not_fit_is_refused_not_raised(raw: bytes) -> None:
    message = decode_message(raw)
    assert message is None or estimate_tokens(message) >= 0


def test_a_usage_with_one_odd_field_keeps_the_others() -> None:
    """pi 1.6 counts this reply's reported 5,000 tokens (its `cost` is null)."""
    usage = {"input": 4000, "output": 1000, "totalTokens": 5000, "cost": None}
    reply = decode_message(json.dumps({**REPLY, "usage": usage}).encode())
    assert isinstance(reply, AssistantMessage) and reply.usage.total_tokens == 5000


def test_a_system_message_without_a_timestamp_gives_no_prompt_as_in_pi() -> None:
    """pi 1.6 takes a system message with no timestamp and no tools for no prompt at all."""
    messages = [decode_message(b'{"role":"system","content":"base prompt"}'),
                decode_message(json.dumps(ONE).encode())]
    assert current_system_message(messages) is None



@pytest.mark.parametrize("name", [5, None, {"a": 1}, ["x"], True])
def test_a_tool_call_named_by_no_text_is_estimated_not_an_internal_error(
        tmp_path: Path, name: Any) -> None:
    """A hand-edited call whose name is no text, sent as pi 1.6 sends it since c1b9a8a, failed
    `context`, compaction plans and branch summaries ("'int' object has no attribute
    'isascii'" in the estimate): its name counts no characters, as pi's `.length` of it adds
    none that is a number (pi's sum is NaN there)."""
    reply = json.loads(reply_line("bbbb0002", "aaaa0001", "ok", 2))
    reply["message"]["content"].append(
        {"type": "toolCall", "id": "c1", "name": name, "arguments": {"a": "b"}})
    path = write(tmp_path / "s.jsonl", [user_line("aaaa0001", None, "hello", 1),
                                        json.dumps(reply).encode(),
                                        user_line("cccc0003", "bbbb0002", "next", 3)])
    assert pi_lsp("context", str(path)).returncode == 0
    # Every message is estimated for the kept window: it holds them all
    kept = pi_lsp("compact", "--plan", "--keep-recent-tokens", "4000", str(path))
    assert (kept.returncode, kept.stderr.decode()) == (1, (
        "pi-lsp: compact would refuse: nothing to compact: the context's 3 messages are within "
        "the kept window (keepRecentTokens 4000)\n"))
    branched = pi_lsp("branch", "--to", "aaaa0001", "--summarize", "--json", str(path))
    assert branched.returncode == 0, branched.stderr
    reply_tokens = estimate_tokens(read_message(msgspec.Raw(json.dumps(reply["message"]))))
    assert reply_tokens == math.ceil(len('ok{"a":"b"}') / 4)
