"""`sessionDir` in `.pi/settings.json`: the pi CLI finds the sessions pi-lsp starts."""

from __future__ import annotations

import errno
import json
import logging
import os
from pathlib import Path

import pytest

from pi_lsp import jsonfile
from pi_lsp.session.catalog import cli_session_dir, start_session
from pi_lsp.session.entries import UserMessage
from pi_lsp.session.sessiondir import link_session_dir


def settings_path(workspace: Path) -> Path:
    return workspace / ".pi" / "settings.json"


def write_settings(workspace: Path, text: str) -> Path:
    path = settings_path(workspace)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")
    return path


def pi_continue_candidates(cwd: Path) -> list[Path]:
    """What `pi -c` run in `cwd` looks through when project settings name a sessionDir: pi reads
    `<cwd>/.pi/settings.json` and resolves a relative `sessionDir` against its cwd."""
    configured = json.loads(settings_path(cwd).read_text("utf-8"))["sessionDir"]
    directory = Path(os.path.expanduser(configured))
    if not directory.is_absolute():
        directory = cwd / directory
    return sorted(directory.glob("*.jsonl"))


def test_a_new_session_is_where_pi_continue_looks(tmp_path: Path) -> None:
    tree = start_session(tmp_path, "anthropic", "claude-sonnet-4-5", "off")
    assert settings_path(tmp_path).read_text("utf-8") == '{\n  "sessionDir": ".pi/sessions"\n}\n'
    assert pi_continue_candidates(tmp_path) == []  # as in pi: no file before the first prompt
    tree.append_message(UserMessage(content="hi", timestamp=1))
    assert pi_continue_candidates(tmp_path) == [Path(tree.path)]


def test_pointing_pi_here_says_where_its_earlier_sessions_stay(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Once `sessionDir` is set, `pi -c` and `pi --session ID` no longer look in pi's own folder
    for the workspace: the sessions pi kept there are named, once, with how to continue one."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    earlier = cli_session_dir(str(workspace.resolve()))
    earlier.mkdir(parents=True)
    (earlier / "a.jsonl").write_text(json.dumps(
        {"type": "session", "version": 3, "id": "a", "timestamp": "2026-01-01T00:00:00.000Z",
         "cwd": str(workspace.resolve())}) + "\n", "utf-8")
    with caplog.at_level(logging.WARNING):
        start_session(workspace, "anthropic", "claude-sonnet-4-5", "off")
        start_session(workspace, "anthropic", "claude-sonnet-4-5", "off")
    told = [r.getMessage() for r in caplog.records if str(earlier) in r.getMessage()]
    assert len(told) == 1
    assert "1 session" in told[0] and "pi --session" in told[0]


def test_pointing_pi_here_says_nothing_when_pi_kept_no_sessions(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        start_session(tmp_path, "anthropic", "claude-sonnet-4-5", "off")
    assert caplog.records == []


def test_a_session_at_an_explicit_path_leaves_settings_alone(tmp_path: Path) -> None:
    start_session(tmp_path, "anthropic", "claude-sonnet-4-5", "off", tmp_path / "s.jsonl")
    assert not settings_path(tmp_path).exists()


@pytest.mark.parametrize(("before", "after"), [
    ('{\n  "defaultModel": "claude-opus-4-5",\n  "compaction": {"enabled": false}\n}\n',
     '{\n  "sessionDir": ".pi/sessions",\n  "defaultModel": "claude-opus-4-5",\n'
     '  "compaction": {"enabled": false}\n}\n'),
    ('{\n\t"theme": "dark"\n}', '{\n\t"sessionDir": ".pi/sessions",\n\t"theme": "dark"\n}'),
    ('{"theme":"dark"}', '{"sessionDir": ".pi/sessions","theme":"dark"}'),
    ("{}\n", '{\n  "sessionDir": ".pi/sessions"\n}\n'),
    ("  { }  ", '  {\n  "sessionDir": ".pi/sessions"\n}  '),
])
def test_merged_into_existing_settings_in_their_layout(tmp_path: Path, before: str,
                                                        after: str) -> None:
    path = write_settings(tmp_path, before)
    link_session_dir(tmp_path)
    assert path.read_text("utf-8") == after
    merged = json.loads(after)
    assert merged == {"sessionDir": ".pi/sessions", **json.loads(before)}


def test_file_mode_is_kept(tmp_path: Path) -> None:
    path = write_settings(tmp_path, '{"theme": "dark"}')
    path.chmod(0o600)
    link_session_dir(tmp_path)
    assert path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["settings.json"]  # no temporary left


@pytest.mark.parametrize("value", [".pi/sessions", "./.pi/sessions/", "ABSOLUTE"])
def test_the_same_folder_is_left_without_a_word(tmp_path: Path, value: str,
                                                caplog: pytest.LogCaptureFixture) -> None:
    if value == "ABSOLUTE":
        value = str(tmp_path / ".pi" / "sessions")
    text = json.dumps({"sessionDir": value, "theme": "dark"}, indent=4)
    path = write_settings(tmp_path, text)
    with caplog.at_level(logging.WARNING):
        start_session(tmp_path, "anthropic", "claude-sonnet-4-5", "off")
    assert path.read_text("utf-8") == text
    assert caplog.records == []


@pytest.mark.parametrize("value", ["~/elsewhere", "/var/sessions", None, 7])
def test_another_session_dir_is_never_overwritten(tmp_path: Path, value: object,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    text = json.dumps({"sessionDir": value})
    path = write_settings(tmp_path, text)
    with caplog.at_level(logging.WARNING):
        start_session(tmp_path, "anthropic", "claude-sonnet-4-5", "off")
    assert path.read_text("utf-8") == text
    [record] = caplog.records
    assert "sessionDir is" in record.getMessage() and str(path) in record.getMessage()


@pytest.mark.parametrize(("text", "problem"), [
    ('{"theme": "dark",}', "not valid JSON"),
    ("// comment\n{}", "not valid JSON"),
    ('["sessionDir"]', "not a JSON object"),
    ("", "not valid JSON"),
])
def test_a_malformed_file_is_left_untouched(tmp_path: Path, text: str, problem: str,
                                            caplog: pytest.LogCaptureFixture) -> None:
    path = write_settings(tmp_path, text)
    with caplog.at_level(logging.WARNING):
        link_session_dir(tmp_path)
    assert path.read_text("utf-8") == text
    [record] = caplog.records
    assert str(path) in record.getMessage() and problem in record.getMessage()
    assert "left as it is" in record.getMessage()


def test_a_failed_settings_write_names_the_file(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk names no file; the error must (the CLI took one without a file name for its
    own output failing: 'cannot write the output', found in review). Nothing is left behind."""
    def full(*_args: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(jsonfile.os, "replace", full)
    with pytest.raises(OSError) as raised:
        link_session_dir(tmp_path)
    assert raised.value.errno == errno.ENOSPC
    assert raised.value.filename == str(tmp_path / ".pi" / "settings.json")
    assert list((tmp_path / ".pi").iterdir()) == []
