"""Listing the sessions of a workspace: `.pi/sessions/` and the pi CLI's folder for it."""

from __future__ import annotations

import json
import logging
import os
import subprocess
from datetime import UTC, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pi_lsp.session import catalog
from pi_lsp.session.catalog import (
    FIRST_MESSAGE_CHARS,
    TITLE_CHARS,
    SessionIndex,
    cli_session_dir,
    list_sessions,
    of_workspaces,
    session_dirs,
    session_title,
    tree_title,
    user_text,
)
from pi_lsp.session.catalog import (
    agent_dir as configured_agent_dir,
)
from pi_lsp.session.ids import iso_to_ms
from pi_lsp.session.jsdate import read_iso
from pi_lsp.session.tree import SessionTree
from tests.test_system_messages import PI16, pi16_eval, pi16_node
from tests.waits import PROCESS_CEILING_S


@pytest.fixture
def agent_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "agent"
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(directory))
    return directory


def header(session_id: str, created: str, cwd: str, **extra: Any) -> dict[str, Any]:
    return {"type": "session", "version": 3, "id": session_id, "timestamp": created,
            "cwd": cwd, **extra}


def user_entry(entry_id: str, parent: str | None, ts: str, content: Any) -> dict[str, Any]:
    """A user message as pi writes one: its own `timestamp` (ms) the entry's moment."""
    return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": ts,
            "message": {"role": "user", "content": content, "timestamp": iso_to_ms(ts)}}


def write(path: Path, objects: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(o) + "\n" for o in objects), encoding="utf-8")
    return path


def test_cli_session_dir(agent_dir: Path) -> None:
    assert str(cli_session_dir("/home/a/proj")).endswith("sessions/--home-a-proj--")
    assert cli_session_dir("/home/a/proj") == agent_dir / "sessions" / "--home-a-proj--"
    assert cli_session_dir("C:\\work\\x").name == "--C--work-x--"


def test_cli_session_dir_default_is_home(monkeypatch: pytest.MonkeyPatch,
                                        tmp_path: Path) -> None:
    monkeypatch.delenv("PI_CODING_AGENT_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cli_session_dir("/home/a/proj") == (
        tmp_path / ".pi" / "agent" / "sessions" / "--home-a-proj--"
    )


def test_session_dirs(agent_dir: Path, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    dirs = session_dirs(str(ws))
    assert dirs[0] == ws / ".pi" / "sessions"
    assert dirs[1] == cli_session_dir(str(ws))
    assert dirs[1].parent == agent_dir / "sessions"


def set_session_dir(settings: Path, value: Any) -> None:
    """A settings.json holding `sessionDir`, as the user or a project writes it."""
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"sessionDir": value}), encoding="utf-8")


@pytest.mark.parametrize(("value", "folder"), [
    ("{tmp}/pi-sessions", "{tmp}/pi-sessions"), ("~/pi-sessions", "{home}/pi-sessions"),
    ("sessions", "{ws}/sessions"),  # relative: from pi's cwd, the workspace
    # file: URLs as Node's fileURLToPath reads them (Python's url2pathname kept the last three's
    # backslash, trailing space and escape)
    ("file://{tmp}/pi-sessions", "{tmp}/pi-sessions"), ("file://{tmp}/a\\b", "{tmp}/a/b"),
    ("file://{tmp}/s ", "{tmp}/s"), ("file://LOCALHOST{tmp}/%73", "{tmp}/s"),
    # a lone surrogate ("\ud800" in the file): Node writes it in a name as U+FFFD (PI16_FOLDER)
    ("{tmp}/s\ud800d", "{tmp}/s\ufffdd")])
def test_the_users_session_dir_is_listed_as_pi_resolves_it(
        agent_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str,
        folder: str) -> None:
    """A `sessionDir` in the user's settings.json, where the pi CLI keeps the sessions it
    starts, was not listed: they never showed in the editor nor in `pi-lsp sessions`."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    ws = tmp_path / "ws"
    ws.mkdir()
    set_session_dir(agent_dir / "settings.json", value.format(tmp=tmp_path))
    expected = Path(folder.format(tmp=tmp_path, home=tmp_path / "home", ws=ws))
    assert session_dirs(str(ws))[2:] == [expected]
    mine = write(expected / "a.jsonl", [header("a", "2025-01-01T00:00:00.000Z", str(ws))])
    write(expected / "b.jsonl", [header("b", "2025-01-01T00:00:00.000Z", "/other")])
    sessions = of_workspaces(list_sessions(session_dirs(str(ws))), [ws])
    assert [s.path for s in sessions] == [str(mine)]  # as pi, only those started here


# Where pi 1.6 writes a session when sessionDir is "{tmp}/s\ud800d" (its folder's name, as
# UTF-8 bytes), for machines without it.
PI16_FOLDER = "s\ufffdd".encode()


def test_pi16_writes_a_session_dir_with_a_lone_surrogate_as_u_fffd(
        agent_dir: Path, tmp_path: Path) -> None:
    """What the case above stands on: pi 1.6 reads the setting as JSON.parse does and Node
    writes the folder's name in UTF-8, the lone surrogate as U+FFFD (where pi-lsp's stat
    ended in UnicodeEncodeError, failing every listing)."""
    if pi16_node() is None:
        pytest.skip("pi 1.6 is not installed")
    set_session_dir(agent_dir / "settings.json", f"{tmp_path}/s\ud800d")
    (tmp_path / "ws").mkdir()
    pi16_eval(f"const [agent, ws] = {json.dumps([str(agent_dir), str(tmp_path / 'ws')])};"
              "const dir = pi.SettingsManager.create(ws, agent).getSessionDir();"
              "const m = pi.SessionManager.create(ws, dir);"
              "m.appendMessage({role: 'user', content: 'hi', timestamp: 1});"
              "m.appendMessage({role: 'assistant', content: [], api: 'x', provider: 'x', "
              "model: 'x', usage: {input: 0, output: 0, cacheRead: 0, cacheWrite: 0, "
              "totalTokens: 0, cost: {input: 0, output: 0, cacheRead: 0, cacheWrite: 0, "
              "total: 0}}, stopReason: 'stop', timestamp: 2});")
    made = [name for name in os.listdir(os.fsencode(tmp_path)) if name.startswith(b"s")]
    assert made == [PI16_FOLDER]
    assert session_dirs(str(tmp_path / "ws"))[2:] == [tmp_path / PI16_FOLDER.decode()]


def test_a_projects_session_dir_counts_over_the_users_only_when_trusted(
        agent_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    set_session_dir(agent_dir / "settings.json", str(tmp_path / "mine"))
    set_session_dir(ws / ".pi" / "settings.json", "project-sessions")
    assert session_dirs(str(ws))[2:] == [tmp_path / "mine"]
    assert session_dirs(str(ws), project=True)[2:] == [ws / "project-sessions"]
    set_session_dir(ws / ".pi" / "settings.json", None)  # pi: unset, its own folder
    assert len(session_dirs(str(ws), project=True)) == 2
    monkeypatch.setenv("PI_CODING_AGENT_SESSION_DIR", str(tmp_path / "variable"))
    assert session_dirs(str(ws), project=True)[2:] == [tmp_path / "variable"]  # main.js


def test_a_session_dir_variable_node_refuses_is_logged_and_left_out(
        agent_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """A file: URL Node's fileURLToPath refuses (pi 1.6 cannot start with it) names no folder;
    one it reads names the folder it reads."""
    ws = tmp_path / "ws"
    ws.mkdir()
    monkeypatch.setenv("PI_CODING_AGENT_SESSION_DIR", f"file://{tmp_path}/a\\b")
    assert session_dirs(str(ws))[2:] == [tmp_path / "a" / "b"]
    monkeypatch.setenv("PI_CODING_AGENT_SESSION_DIR", "file:///x/%zz")
    with caplog.at_level(logging.WARNING):
        assert len(session_dirs(str(ws))) == 2
    assert "PI_CODING_AGENT_SESSION_DIR 'file:///x/%zz': URI malformed" in caplog.text


def test_an_agent_dir_variable_that_is_not_utf_8_names_the_folder_pi_names(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """$PI_CODING_AGENT_DIR holding a byte that is not UTF-8 named the folder of that byte,
    where pi 1.6 (config.js getAgentDir: process.env, one U+FFFD for each invalid sequence)
    keeps its settings, keys, trust store and sessions in the folder named with U+FFFD."""
    variable = os.fsdecode(bytes(tmp_path) + b"/s\xe2\x82d")  # as os.environ holds it
    monkeypatch.setenv("PI_CODING_AGENT_DIR", variable)
    assert configured_agent_dir() == tmp_path / PI16_FOLDER.decode()


def test_a_session_dir_variable_that_is_not_utf_8_is_listed_as_node_names_it(
        agent_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """$PI_CODING_AGENT_SESSION_DIR holding a byte that is not UTF-8 was listed as the folder
    of that byte, where pi 1.6 (main.js: process.env, each invalid sequence one U+FFFD) keeps
    its sessions in the folder named with U+FFFD (PI16_FOLDER), as for the setting above."""
    ws = tmp_path / "ws"
    ws.mkdir()
    variable = os.fsdecode(bytes(tmp_path) + b"/s\xe2\x82d")  # as os.environ holds it
    monkeypatch.setenv("PI_CODING_AGENT_SESSION_DIR", variable)
    assert session_dirs(str(ws))[2:] == [tmp_path / PI16_FOLDER.decode()]


@pytest.mark.parametrize(("value", "logged"), [
    (5, "sessionDir a number is not a string"), (True, "true or false is not a string"),
    (["x"], "an array is not a string"), ({}, "an object is not a string"),
    ("", 'sessionDir "" is empty'), ("a\u0000b", "has a NUL character"),
    ("fifo", "is a FIFO, not a folder"), ("file", "is a file, not a folder"),
    ("/dev/null", "/dev/null is a device, not a folder"), ("loop", "loop is a symlink loop"),
    ("file:///x/%zz", "sessionDir 'file:///x/%zz': URI malformed"),
    ("file://host/x", 'File URL host must be "localhost" or empty on linux')])
def test_a_session_dir_naming_no_folder_is_logged_and_left_out(
        agent_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, value: Any,
        logged: str) -> None:
    """Nothing may fail, hang or be listed for a value that names no folder; each is said."""
    ws = tmp_path / "ws"
    ws.mkdir()
    os.mkfifo(ws / "fifo")
    (ws / "file").write_text("x", encoding="utf-8")
    (ws / "loop").symlink_to("loop")
    set_session_dir(agent_dir / "settings.json", value)
    with caplog.at_level(logging.WARNING):
        assert len(session_dirs(str(ws))) == 2
        assert list_sessions(session_dirs(str(ws))) == []
    assert logged in caplog.text


def test_list_sessions(agent_dir: Path, tmp_path: Path) -> None:
    """The old session's `modified` was its later name's stamp; as in pi 1.6, only user and
    assistant messages date a session, so it is its prompt's."""
    ws = tmp_path / "ws"
    own, cli = session_dirs(str(ws))
    cwd = str(ws)

    old = write(own / "old.jsonl", [
        header("id-old", "2025-01-01T10:00:00.000Z", cwd),
        user_entry("aaaaaaaa", None, "2025-01-01T10:00:01.000Z", "x" * 300),
        {"type": "session_info", "id": "bbbbbbbb", "parentId": "aaaaaaaa",
         "timestamp": "2025-01-01T10:00:02.000Z", "name": "Old one"},
    ])
    new = write(cli / "2025-03-01T09-00-00-000Z_id-new.jsonl", [
        header("id-new", "2025-03-01T09:00:00.000Z", cwd, parentSession=str(old)),
        {"type": "model_change", "id": "cccccccc", "parentId": None,
         "timestamp": "2025-03-01T09:00:01.000Z", "provider": "p", "modelId": "m"},
        user_entry("dddddddd", "cccccccc", "2025-03-02T12:30:00.500Z",
                   [{"type": "text", "text": "hello"}, {"type": "image", "data": "AA",
                                                        "mimeType": "image/png"},
                    {"type": "text", "text": "world"}]),
    ])
    middle = write(own / "middle.jsonl", [
        header("id-mid", "2025-02-01T00:00:00.000Z", "/elsewhere"),
    ])
    # Skipped: a .jsonl that is not a session, an empty one, garbage, a directory, a .json file.
    write(own / "notes.jsonl", [{"type": "message", "id": "x"}])
    (own / "empty.jsonl").write_text("")
    (own / "garbage.jsonl").write_bytes(b"not json\n\xff\xfe\n")
    (own / "dir.jsonl").mkdir()
    write(own / "other.json", [header("id-json", "2030-01-01T00:00:00.000Z", cwd)])
    write(cli / "session.txt", [header("id-txt", "2030-01-01T00:00:00.000Z", cwd)])

    sessions = list_sessions(session_dirs(str(ws)))
    assert [s.id for s in sessions] == ["id-new", "id-mid", "id-old"]
    by_id = {s.id: s for s in sessions}

    s_new = by_id["id-new"]
    assert s_new.path == str(new)
    assert s_new.name is None
    assert s_new.cwd == cwd
    assert s_new.created == "2025-03-01T09:00:00.000Z"
    assert s_new.modified == "2025-03-02T12:30:00.500Z"
    assert s_new.entry_count == 2
    assert s_new.first_message == "hello world"
    assert s_new.parent_session == str(old)

    s_old = by_id["id-old"]
    assert s_old.path == str(old)
    assert s_old.name == "Old one"
    assert s_old.created == "2025-01-01T10:00:00.000Z"
    assert s_old.modified == "2025-01-01T10:00:01.000Z"
    assert s_old.entry_count == 2
    assert s_old.first_message == "x" * FIRST_MESSAGE_CHARS
    assert s_old.parent_session is None

    s_mid = by_id["id-mid"]
    assert s_mid.path == str(middle)
    assert s_mid.cwd == "/elsewhere"
    assert s_mid.entry_count == 0
    assert s_mid.first_message is None
    assert s_mid.modified == s_mid.created == "2025-02-01T00:00:00.000Z"


def test_newest_first_by_modified_not_created(agent_dir: Path, tmp_path: Path) -> None:
    """Its messages once carried `timestamp: 1`, which pi 1.6 takes as their time (1 ms past
    1970): they carry their entries' moment now, as pi writes them."""
    directory = tmp_path / "ws" / ".pi" / "sessions"
    write(directory / "a.jsonl", [
        header("early-but-active", "2025-01-01T00:00:00.000Z", "/w"),
        user_entry("aaaaaaaa", None, "2025-06-01T00:00:00.000Z", "late"),
    ])
    write(directory / "b.jsonl", [
        header("late-but-idle", "2025-05-01T00:00:00.000Z", "/w"),
        user_entry("bbbbbbbb", None, "2025-05-01T00:00:01.000Z", "early"),
    ])
    write(directory / "c.jsonl", [header("middle", "2025-05-15T00:00:00.000Z", "/w")])
    sessions = list_sessions([directory])
    assert [s.id for s in sessions] == ["early-but-active", "middle", "late-but-idle"]


def test_sessions_of_one_time_list_the_latest_name_first(agent_dir: Path,
                                                        tmp_path: Path) -> None:
    """A fork made at the leaf copies its source's stamps, so both have one `modified`: pi 1.6
    lists the later name (the fork) first, sorting names descending before its stable sort by
    time (listSessionsFromDir, listAll); pi-lsp listed the source first, folder by folder."""
    ws = tmp_path / "ws"
    own, cli = session_dirs(str(ws))
    for folder, name in [(own, "2025-01-01T00-00-00-000Z_source"),
                         (own, "2025-01-02T00-00-00-000Z_fork"),
                         (cli, "2025-01-03T00-00-00-000Z_other")]:
        write(folder / f"{name}.jsonl", [
            header(name.split("_")[1], "2025-01-01T00:00:00.000Z", str(ws)),
            user_entry("aaaaaaaa", None, "2025-01-01T00:00:01.000Z", "hi")])
    assert [s.id for s in list_sessions(session_dirs(str(ws)))] == ["other", "fork", "source"]
    index = SessionIndex()
    assert [s.id for s in index.list(session_dirs(str(ws)))] == ["other", "fork", "source"]


def test_a_header_stamp_that_is_no_text_never_counts_as_modified(tmp_path: Path) -> None:
    """A header stamped with a number (2100 in ms) outranked the session's real activity
    (2025), listing it first; pi 1.6 counts a header's time for `modified` only when it is
    text (`typeof header.timestamp === "string"`), and else, with no activity, the file's."""
    def said(entry_id: str, stamp: str) -> dict[str, Any]:
        entry = user_entry(entry_id, None, stamp, "hi")  # the message's own time agreeing
        entry["message"]["timestamp"] = iso_to_ms(stamp)
        return entry

    directory = tmp_path / "s"
    write(directory / "a.jsonl", [header("number-stamped", 4102444800000, "/w"),  # type: ignore[arg-type]
                                  said("aaaaaaaa", "2025-01-01T00:00:00.000Z")])
    write(directory / "b.jsonl", [header("text-stamped", "2025-06-01T00:00:00.000Z", "/w"),
                                  said("bbbbbbbb", "2025-06-01T00:00:00.000Z")])
    idle = write(directory / "c.jsonl", [header("idle", 4102444800000, "/w")])  # type: ignore[arg-type]
    os.utime(idle, (0, 1_700_000_000))
    sessions = list_sessions([directory])
    by_id = {s.id: s for s in sessions}
    assert [s.id for s in sessions] == ["text-stamped", "number-stamped", "idle"]
    assert by_id["number-stamped"].modified == "2025-01-01T00:00:00.000Z"
    assert by_id["number-stamped"].created == "2100-01-01T00:00:00.000Z"
    assert by_id["idle"].modified == "2023-11-14T22:13:20.000Z"  # the file's mtime


def test_a_header_stamp_no_date_reads_leaves_the_files_time_as_modified(tmp_path: Path) -> None:
    """A header stamped "someday" with no dated activity kept that text as `modified` and was
    listed last; pi 1.6 takes the file's time when `new Date(header.timestamp)` is NaN."""
    directory = tmp_path / "s"
    someday = write(directory / "a.jsonl", [header("someday", "someday", "/w"),
                                            user_entry("aaaaaaaa", None, "someday", "hi")])
    os.utime(someday, (0, 1_700_000_000))
    write(directory / "b.jsonl", [header("dated", "2020-01-01T00:00:00.000Z", "/w"),
                                  user_entry("bbbbbbbb", None, "2021-01-01T00:00:00.000Z", "hi")])
    sessions = list_sessions([directory])
    assert [s.id for s in sessions] == ["someday", "dated"]
    assert sessions[0].modified == "2023-11-14T22:13:20.000Z"  # the file's mtime
    assert sessions[0].created == ""  # pi's toISOString throws for its Invalid Date


@pytest.mark.parametrize(("stamp", "listed"), [
    ("2026-11-05T12:00:00+02:00", "2026-11-05T10:00:00.000Z"),
    ("Thu Nov 05 2026 09:00:00 GMT+0000", "2026-11-05T09:00:00.000Z"),
    ("2026-11-05", "2026-11-05T00:00:00.000Z"),
    ("0050-01-01T00:00:00Z", "0050-01-01T00:00:00.000Z"),
])
def test_a_header_time_is_listed_as_pi_writes_it(tmp_path: Path, stamp: str, listed: str
                                                ) -> None:
    """`created` and `modified` repeated the header's text as written, where pi 1.6 lists
    `new Date(text)`, written by toISOString (session-manager.js buildSessionInfo)."""
    write(tmp_path / "s" / "a.jsonl", [header("a", stamp, "/w")])
    (session,) = list_sessions([tmp_path / "s"])
    assert (session.created, session.modified) == (listed, listed)


def test_the_files_time_is_rounded_to_the_ms_as_node_does(tmp_path: Path) -> None:
    """A file written at 0.9999 s past a second dated its session a millisecond early (.999);
    Node's `stats.mtime`, which pi 1.6 takes, rounds to the nearest millisecond (1.000)."""
    idle = write(tmp_path / "s" / "a.jsonl", [header("idle", "someday", "/w")])
    os.utime(idle, ns=(0, 1_700_000_000_999_900_000))
    (listed,) = list_sessions([idle.parent])
    assert listed.modified == "2023-11-14T22:13:21.000Z"


def dated(entry_id: str, ts: Any, role: str = "user", **message: Any) -> dict[str, Any]:
    """A message entry stamped `ts` whose message has `role` and the given fields."""
    return {"type": "message", "id": entry_id, "parentId": None, "timestamp": ts,
            "message": {"role": role, **message}}


ODD_ACTIVITY: dict[str, list[dict[str, Any]]] = {
    # a label, a model change and a name after the prompt do not date the session
    "labelled-later": [
        dated("a1", "2025-01-01T00:00:00.000Z", content="hi", timestamp=1735689600000),
        {"type": "label", "id": "a2", "parentId": "a1", "timestamp": "2025-12-01T00:00:00.000Z",
         "targetId": "a1", "label": "x"},
        {"type": "model_change", "id": "a3", "parentId": "a2",
         "timestamp": "2025-12-02T00:00:00.000Z", "provider": "p", "modelId": "m"},
        {"type": "session_info", "id": "a4", "parentId": "a3",
         "timestamp": "2025-12-03T00:00:00.000Z", "name": "n"}],
    # the message's own time when it is a number, its entry's when text or missing
    "own-time": [dated("b1", "2025-12-04T00:00:00.000Z", "assistant", content=[],
                       timestamp=1740787200000)],  # 2025-03-01
    "text-own-time": [dated("c1", "2025-02-01T00:00:00.000Z", content="hi",
                            timestamp="2025-12-05T00:00:00.000Z")],
    "no-own-time": [dated("d1", "2025-02-02T00:00:00.000Z", content="hi")],
    # other roles, a message without content, or not an object, never count
    "other-roles": [dated("e1", "2025-12-06T00:00:00.000Z", "custom", content="x"),
                    dated("e2", "2025-12-06T00:00:00.000Z", "toolResult", content=[]),
                    dated("e3", "2025-12-06T00:00:00.000Z", "bashExecution", content="x"),
                    dated("e4", "2025-12-06T00:00:00.000Z", timestamp=1),
                    dated("e5", "2025-12-06T00:00:00.000Z", None, content="x"),
                    {"type": "message", "id": "e6", "parentId": None,
                     "timestamp": "2025-12-06T00:00:00.000Z", "message": "user"}],
    # a fraction of a ms is cut; a time before 1970 or unreadable leaves the header's
    "fraction": [dated("f1", "2025-01-02T00:00:00.000Z", content="", timestamp=1735776000000.9)],
    "lone-surrogate": [dated("j1", "2025-01-04T00:00:00.000Z", content="cut \ud83d",
                             timestamp=1736035200000)],  # 2025-01-05
    "before-1970": [dated("g1", "2025-12-07T00:00:00.000Z", content="x", timestamp=-5)],
    "unreadable": [dated("h1", "someday", content="x")],
    # the prompt's time over a later header's; a line without an id counts too
    "later-header": [{"type": "message", "timestamp": "2025-01-03T00:00:00.000Z",
                      "message": {"role": "user", "content": "x"}}],
}
ODD_MODIFIED = {
    "labelled-later": "2025-01-01T00:00:00.000Z", "own-time": "2025-03-01T00:00:00.000Z",
    "text-own-time": "2025-02-01T00:00:00.000Z", "no-own-time": "2025-02-02T00:00:00.000Z",
    "other-roles": "2024-06-01T00:00:00.000Z", "fraction": "2025-01-02T00:00:00.000Z",
    "before-1970": "2024-06-02T00:00:00.000Z", "unreadable": "2024-06-03T00:00:00.000Z",
    "later-header": "2025-01-03T00:00:00.000Z", "lone-surrogate": "2025-01-05T00:00:00.000Z",
}


def write_odd_activity(directory: Path, cwd: str) -> None:
    """A session per ODD_ACTIVITY case, its header stamped with its ODD_MODIFIED time where no
    message dates it (else 2024-06-01; 2026 for `later-header`), and `infinite`, whose message's
    time is past a Date's range (1e400)."""
    for session_id, entries in ODD_ACTIVITY.items():
        created = {"later-header": "2026-01-01T00:00:00.000Z", "before-1970": ODD_MODIFIED[
            "before-1970"], "unreadable": ODD_MODIFIED["unreadable"]}.get(
                session_id, "2024-06-01T00:00:00.000Z")
        write(directory / f"{session_id}.jsonl", [header(session_id, created, cwd), *entries])
    (directory / "infinite.jsonl").write_text(
        json.dumps(header("infinite", "2024-06-01T00:00:00.000Z", cwd)) + "\n" +
        '{"type":"message","id":"i1","parentId":null,"timestamp":"2025-01-01T00:00:00.000Z",'
        '"message":{"role":"user","content":"x","timestamp":1e400}}\n')


def test_only_user_and_assistant_messages_date_a_session(tmp_path: Path) -> None:
    """Every entry's stamp dated a session, so a later label or model change listed it first,
    where pi 1.6 (and its /resume) counts only user and assistant messages, by their own time."""
    write_odd_activity(tmp_path, "/w")
    sessions = list_sessions([tmp_path])
    assert {s.id: s.modified for s in sessions} == {**ODD_MODIFIED, "infinite": ""}
    assert [s.id for s in sessions if s.id != "infinite"] == \
        sorted(ODD_MODIFIED, key=ODD_MODIFIED.__getitem__, reverse=True)


def test_first_message_is_the_first_user_message_in_the_file(tmp_path: Path) -> None:
    directory = tmp_path / "s"
    write(directory / "a.jsonl", [
        header("a", "2025-01-01T00:00:00.000Z", "/w"),
        {"type": "message", "id": "aaaaaaaa", "parentId": None,
         "timestamp": "2025-01-01T00:00:01.000Z",
         "message": {"role": "custom", "customType": "user", "content": "not me",
                     "display": True, "timestamp": 1}},
        user_entry("bbbbbbbb", "aaaaaaaa", "2025-01-01T00:00:02.000Z", "first"),
        user_entry("cccccccc", "bbbbbbbb", "2025-01-01T00:00:03.000Z", "second"),
    ])
    (session,) = list_sessions([directory])
    assert session.first_message == "first"
    assert session.entry_count == 3


def test_a_first_prompt_without_text_gives_way_to_the_next(tmp_path: Path) -> None:
    """An image-only first prompt made the first message "" and the title the file's name,
    where pi 1.6 skips a user message without text for the next one that has some."""
    path = write(tmp_path / "s" / "image_first.jsonl", [
        header("a", "2025-01-01T00:00:00.000Z", "/w"),
        user_entry("aaaaaaaa", None, "2025-01-01T00:00:01.000Z",
                   [{"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}]),
        user_entry("bbbbbbbb", "aaaaaaaa", "2025-01-01T00:00:02.000Z", "why does it fail?"),
    ])
    (session,) = list_sessions([path.parent])
    assert (session.first_message, session.title) == ("why does it fail?",) * 2
    assert tree_title(SessionTree.open(str(path))) == "why does it fail?"


def test_an_open_sessions_title_looks_only_at_new_records(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every change notification carries the title: each looked through the whole session for a
    first prompt (0.25 s at 100,000 entries with none). Records looked at are not again, the
    title follows a first prompt appended later, and a reload looks anew."""
    path = write(tmp_path / "s" / "a.jsonl", [
        header("a", "2025-01-01T00:00:00.000Z", "/w"),
        user_entry("aaaaaaaa", None, "2025-01-01T00:00:01.000Z",
                   [{"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}]),
    ])
    tree = SessionTree.open(str(path))
    looked: list[str] = []

    def counted(record: Any) -> str | None:
        looked.append(record.env.id)
        return user_text(record)

    monkeypatch.setattr(catalog, "user_text", counted)
    assert (tree_title(tree), looked) == ("a", ["aaaaaaaa"])
    assert (tree_title(tree), looked) == ("a", ["aaaaaaaa"])
    with path.open("a") as file:
        file.write(json.dumps(user_entry("bbbbbbbb", "aaaaaaaa", "2025-01-01T00:00:02.000Z",
                                         "why does it fail?")) + "\n")
    tree.refresh()
    assert (tree_title(tree), looked) == ("why does it fail?", ["aaaaaaaa", "bbbbbbbb"])
    assert (tree_title(tree), looked[2:]) == ("why does it fail?", [])
    copy = path.with_suffix(".new")
    copy.write_bytes(path.read_bytes())
    copy.replace(path)  # pi rewrote it: another file, read whole
    assert tree.refresh().reloaded
    assert (tree_title(tree), looked[2:]) == ("why does it fail?", ["aaaaaaaa", "bbbbbbbb"])


def test_missing_directories_are_fine(agent_dir: Path, tmp_path: Path) -> None:
    assert list_sessions(session_dirs(str(tmp_path / "nowhere"))) == []


def test_a_symlink_loop_in_a_folder_hides_no_other_session(tmp_path: Path) -> None:
    """A committed `loop.jsonl -> loop.jsonl` raised ELOOP out of the folder's listing: none of
    its sessions was listed, `pi-lsp sessions` exited 2 and `pi-lsp run` refused to run."""
    directory = tmp_path / "ws" / ".pi" / "sessions"
    good = write(directory / "good.jsonl", [header("good", "2025-01-01T00:00:00.000Z", "/w")])
    (directory / "loop.jsonl").symlink_to("loop.jsonl")
    (directory / "dangling.jsonl").symlink_to("gone.jsonl")
    assert [s.path for s in list_sessions([directory])] == [str(good)]
    assert [s.path for s in SessionIndex().list([directory])] == [str(good)]


def test_a_session_file_named_in_no_utf8_is_left_out_and_named(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """`bad\\xff.jsonl` was listed, and the server's whole listing then failed making its name a
    file: URI ('utf-8' codec can't encode…, the file not named); VS Code and pi cannot open it."""
    directory = tmp_path / ".pi" / "sessions"
    good = write(directory / "good.jsonl", [header("good", "2025-01-01T00:00:00.000Z", "/w")])
    Path(os.fsdecode(os.fsencode(directory) + b"/bad\xff.jsonl")).write_bytes(good.read_bytes())
    with caplog.at_level(logging.WARNING):
        assert [s.path for s in list_sessions([directory])] == [str(good)]
    assert f"{directory}/bad\\xff.jsonl: not listed, its name is not UTF-8" in caplog.text


def test_a_sessions_folder_whose_path_is_not_utf8_is_named_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A folder named `bad\xffdir` had each of its sessions said to have a name that is not
    UTF-8, though only the folder's is not."""
    folder = Path(os.fsdecode(os.fsencode(tmp_path) + b"/bad\xffdir"))
    directory = folder / ".pi" / "sessions"
    write(directory / "ok.jsonl", [header("ok", "2025-01-01T00:00:00.000Z", "/w")])
    with caplog.at_level(logging.WARNING):
        assert list_sessions([directory]) == []
    shown = os.fsencode(directory).decode("utf-8", "backslashreplace")
    assert caplog.messages == [f"{shown}: its sessions are not listed, its path is not UTF-8 "
                               "(rename the folder to open them)"]


def test_session_title_one_rule() -> None:
    """The name, else the first prompt on one line and cut, else the file name."""
    path = "/w/.pi/sessions/2026-01-01T00-00-00-000Z_abc.jsonl"
    assert session_title("Named", "a prompt", path) == "Named"
    assert session_title(None, "fix\n the   bug", path) == "fix the bug"
    long = session_title(None, "word " * 40, path)
    assert len(long) == TITLE_CHARS and long.endswith("…")
    assert session_title(None, "  \n", path) == "2026-01-01T00-00-00-000Z_abc"
    assert session_title(None, None, path) == "2026-01-01T00-00-00-000Z_abc"


stamps = st.one_of(
    st.datetimes(timezones=st.one_of(st.none(), st.just(UTC),
                                     st.builds(lambda h: timezone(timedelta(hours=h)),
                                               st.integers(-12, 12)),
                                     # offsets with seconds, which JavaScript does not read
                                     st.builds(lambda s, us: timezone(timedelta(
                                         hours=1, seconds=s, microseconds=us)),
                                               st.integers(0, 59), st.integers(0, 999_999)))
                 ).map(lambda d: d.isoformat()),
    st.datetimes().map(lambda d: d.strftime("%Y-%m-%dT%H:%M:%S.")
                       + f"{d.microsecond // 1000:03d}Z"),  # as pi writes them
    st.sampled_from(["", "yesterday", "2025-02-30T00:00:00.000Z", "2025-13-01T00:00:00Z"]),
)


@settings(max_examples=300, deadline=None)  # a busy machine is no failure
@given(first=stamps)
@example(first="2024-01-01T01:00:00.000+01:00:00.000500")
@example(first="2024-02-30T00:00:00.000Z")
def test_the_fast_path_reads_stamps_as_the_full_parser(first: str) -> None:
    """Listings read 100k stamps through the shortcut for pi's own form; it must give what
    the general reading gives, unreadable stamps included."""
    assert iso_to_ms(first) == read_iso(first)


PI16_LIST = """
const { SessionManager } = await import(process.argv[1]);
const iso = (date) => Number.isNaN(date.getTime()) ? "" : date.toISOString();
const listed = await SessionManager.listAll(process.argv[2]);
process.stdout.write(JSON.stringify(Object.fromEntries(listed.map((s) => [s.id, {
    name: s.name ?? null, firstMessage: s.firstMessage, messageCount: s.messageCount,
    created: iso(s.created), modified: iso(s.modified)}]))));
"""


def pi16_listing(directory: Path) -> dict[str, Any] | None:
    """pi 1.6's own listing of `directory` (SessionManager.listAll) by session id; None where
    pi 1.6 is not installed (the expectations written in the tests were its answers)."""
    node = pi16_node()
    if node is None:
        return None
    index = PI16 / "@earendil-works" / "pi-coding-agent" / "dist" / "index.js"
    done = subprocess.run([node, "--input-type=module", "-e", PI16_LIST, str(index),
                           str(directory)], capture_output=True, text=True,
                          timeout=PROCESS_CEILING_S)
    assert done.returncode == 0, done.stderr
    listed: dict[str, Any] = json.loads(done.stdout)
    return listed


def test_idless_prompts_and_names_count_in_the_listing_as_in_pi(tmp_path: Path) -> None:
    """An id-less user message and an id-less session_info were skipped by the listing (first
    message "with id", no name), where pi 1.6's buildSessionInfo reads every line: its first
    message is the id-less one and its name the id-less one's. An open session's title too."""
    def idless(entry: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in entry.items() if k != "id"}

    path = write(tmp_path / "s" / "a.jsonl", [
        header("idless", "2025-01-01T00:00:00.000Z", "/w"),
        idless(user_entry("-", None, "2025-01-01T00:00:01.000Z", "without an id")),
        user_entry("bbbbbbbb", None, "2025-01-01T00:00:02.000Z", "with an id"),
        {"type": "session_info", "parentId": "bbbbbbbb", "timestamp": "2025-01-01T00:00:03.000Z",
         "name": "  named without an id "},
        idless(user_entry("-", None, "2025-01-01T00:00:04.000Z", "last")),
    ])
    (session,) = list_sessions([path.parent])
    pi = pi16_listing(path.parent)
    if pi is not None:
        assert (pi["idless"]["firstMessage"], pi["idless"]["name"]) == \
            ("without an id", "named without an id")
        assert pi["idless"]["modified"] == session.modified == "2025-01-01T00:00:04.000Z"
    assert (session.first_message, session.name, session.title) == \
        ("without an id", "named without an id", "named without an id")
    assert session.entry_count == 1  # entries a tree indexes: those with an id
    tree = SessionTree.open(str(path))
    assert catalog.first_prompt(tree) == "without an id"
    assert catalog.tree_summary(tree).first_message == "without an id"
    assert catalog.tree_summary(tree).modified == session.modified


def test_times_past_year_9999_or_before_year_1_are_listed_as_pi_writes_them(
        tmp_path: Path) -> None:
    """A header or message time outside years 1 to 9999 was listed as "" (out of Python's
    dates) and the session dated by its file; pi 1.6 writes it with toISOString, which gives
    such a year six digits and a sign (`+020000-…`), and year 0 as `0000`."""
    directory = tmp_path / "s"
    far = "+020000-01-01T00:00:00.000Z"
    write(directory / "a.jsonl", [header("far", far, "/w")])
    write(directory / "b.jsonl", [header("before", "-000001-06-01T00:00:00.000Z", "/w")])
    write(directory / "c.jsonl", [header("zero", "0000-01-01T00:00:00.000Z", "/w")])
    write(directory / "d.jsonl", [header("far-message", far, "/w"),
                                  user_entry("aaaaaaaa", None, "+020000-01-01T00:00:03.000Z",
                                             "x")])
    edge = write(directory / "e.jsonl", [header("edge", 8.64e15, "/w")])  # type: ignore[arg-type]
    os.utime(edge, (0, 1_700_000_000))
    listed = {s.id: (s.created, s.modified) for s in list_sessions([directory])}
    expected = {
        "far": (far, far),
        "before": ("-000001-06-01T00:00:00.000Z",) * 2,
        "zero": ("0000-01-01T00:00:00.000Z",) * 2,
        "far-message": (far, "+020000-01-01T00:00:03.000Z"),
        "edge": ("+275760-09-13T00:00:00.000Z", "2023-11-14T22:13:20.000Z"),  # the file's
    }
    pi = pi16_listing(directory)
    if pi is not None:
        assert {k: (v["created"], v["modified"]) for k, v in pi.items()} == expected
    assert listed == expected
    assert list(listed) == ["far-message", "far", "edge", "zero", "before"]


def test_a_session_named_with_a_number_past_a_double_is_left_out_not_the_listing(
        tmp_path: Path) -> None:
    """A name of 1e400 (Infinity to pi) failed msgspec's decode, and the error ended the
    whole listing (CLI and server index) instead of leaving out the one session, as pi does."""
    write(tmp_path / "s" / "plain.jsonl", [
        header("plain", "2025-01-01T00:00:00.000Z", "/w"),
        user_entry("m1", None, "2025-01-01T00:00:02.000Z", "hi")])
    for session_id, name in (("huge", "1e400"), ("nested", "[-1e400]")):
        write(tmp_path / "s" / f"{session_id}.jsonl", [
            header(session_id, "2025-01-01T00:00:00.000Z", "/w"),
            user_entry("m1", None, "2025-01-01T00:00:02.000Z", "hello")])
        with (tmp_path / "s" / f"{session_id}.jsonl").open("a") as file:
            file.write('{"type":"session_info","id":"i2","parentId":"m1",'
                       f'"timestamp":"2025-01-01T00:00:03.000Z","name":{name}}}\n')
    assert [s.id for s in list_sessions([tmp_path / "s"])] == ["plain"]
    assert [s.id for s in SessionIndex().list([tmp_path / "s"])] == ["plain"]
    pi = pi16_listing(tmp_path / "s")
    if pi is not None:
        assert list(pi) == ["plain"]


def test_a_lone_surrogate_beside_a_name_with_no_text_leaves_out_only_that_session(
        tmp_path: Path) -> None:
    """A session whose name is 5 and whose `session_info` line also holds "\\ud800" made the
    name's check (plain msgspec) raise "Input data was truncated", ending the whole listing;
    pi 1.6 drops only that session."""
    for session_id, name in (("number", "5"), ("text", '"ok"')):
        write(tmp_path / "s" / f"{session_id}.jsonl", [
            header(session_id, "2025-01-01T00:00:00.000Z", "/w"),
            user_entry("m1", None, "2025-01-01T00:00:02.000Z", "hello")])
        with (tmp_path / "s" / f"{session_id}.jsonl").open("a") as file:
            file.write('{"type":"session_info","id":"i2","parentId":"m1","timestamp":'
                       f'"2025-01-01T00:00:03.000Z","name":{name},"x":"\\ud800"}}\n')
    listed = {s.id: s.name for s in list_sessions([tmp_path / "s"])}
    assert listed == {"text": "ok"}
    assert {s.id for s in SessionIndex().list([tmp_path / "s"])} == {"text"}
    pi = pi16_listing(tmp_path / "s")
    if pi is not None:
        assert {key: value["name"] for key, value in pi.items()} == listed


def test_a_session_named_with_no_text_is_left_out_as_pi_leaves_it_out(tmp_path: Path) -> None:
    """A `session_info` whose name is a number, an object, a boolean or a list was listed under
    the name before it, where pi 1.6's buildSessionInfo throws on its `name?.trim()` and drops
    the session (null clears the name, as a blank one does). Both listings, and an index that
    reads only the appended lines."""
    names: dict[str, Any] = {"number": 5, "object": {"a": 1}, "boolean": True, "list": [],
                             "null": None, "text": " text "}
    for session_id, name in names.items():
        write(tmp_path / "s" / f"{session_id}.jsonl", [
            header(session_id, "2025-01-01T00:00:00.000Z", "/w"),
            {"type": "session_info", "id": "i1", "parentId": None,
             "timestamp": "2025-01-01T00:00:01.000Z", "name": "first"},
            user_entry("m1", "i1", "2025-01-01T00:00:02.000Z", "hello"),
            {"type": "session_info", "id": "i2", "parentId": "m1",
             "timestamp": "2025-01-01T00:00:03.000Z", "name": name},
        ])
    listed = {s.id: s.name for s in list_sessions([tmp_path / "s"])}
    pi = pi16_listing(tmp_path / "s")
    if pi is not None:
        assert {key: value["name"] for key, value in pi.items()} == listed
    assert listed == {"null": None, "text": "text"}
    index = SessionIndex()
    assert {s.id for s in index.list([tmp_path / "s"])} == {"null", "text"}
    with (tmp_path / "s" / "text.jsonl").open("a") as file:  # read from where it stopped
        file.write(json.dumps({"type": "session_info", "id": "i3", "parentId": "i2",
                               "timestamp": "2025-01-01T00:00:04.000Z", "name": 7}) + "\n")
    assert [s.id for s in index.list([tmp_path / "s"])] == ["null"]
