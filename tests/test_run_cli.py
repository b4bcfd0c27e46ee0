"""`pi-lsp run` as a user runs it: a separate process, talking HTTP to a fake Anthropic server."""

from __future__ import annotations

import errno
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pi_lsp import cli, jsonfile
from pi_lsp.session.entries import UserMessage
from pi_lsp.session.tree import SessionTree
from tests.conftest import conformance_files, pi_lsp_with, trust
from tests.fake_anthropic import (
    FakeAnthropic,
    Reply,
    error_reply,
    message_start,
    text_block,
    text_reply,
    tool_reply,
)
from tests.fake_openai import MODEL as LOCAL_MODEL
from tests.fake_openai import FakeOpenAI, chat_reply, chunk, responses_reply
from tests.fake_openai import Reply as OpenAIReply
from tests.fake_openai import error_reply as openai_error
from tests.test_rewind import endless_ignore_rules
from tests.waits import CEILING_S, PROCESS_CEILING_S, reaped, run_cli, until_sync

ROOT = Path(__file__).resolve().parent.parent
SESSION_NAME = re.compile(
    r"^(\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z)_"
    r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$"
)



SONNET_DEFAULT = {"defaultProvider": "anthropic", "defaultModel": "claude-sonnet-4-5"}


@pytest.fixture(scope="module")
def agent_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("agent")
    # pi's retry policy, with waits too short to notice; the model these tests were written on
    # (a thinking budget), where pi 1.6's default would be claude-opus-5-5.
    (path / "settings.json").write_text(json.dumps({"retry": {"baseDelayMs": 1},
                                                    **SONNET_DEFAULT}))
    return path


@pytest.fixture
def env(fake: FakeAnthropic, agent_dir: Path) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    return {**base, "ANTHROPIC_BASE_URL": fake.url, "ANTHROPIC_API_KEY": "test",
            "PI_CODING_AGENT_DIR": str(agent_dir),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


@pytest.fixture
def workspace(tmp_path: Path, agent_dir: Path) -> Path:
    # Trusted, as pi's /trust saves it: these tests run turns with project models.json files;
    # untrusted folders have tests of their own (test_trust.py).
    path = tmp_path / "ws"
    path.mkdir()
    trust(path, agent_dir)
    return path


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "pi_lsp.cli", *args]


def pi_run(workspace: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("run", *args, cwd=workspace, env=env)


def check(path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_cli("check", str(path), env=env)


def sessions(workspace: Path) -> list[Path]:
    return sorted((workspace / ".pi" / "sessions").glob("*.jsonl"))


def entries(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()[1:]]


def kinds(path: Path) -> list[str]:
    return [e["message"]["role"] if e["type"] == "message" else e["type"] for e in entries(path)]


def user_texts(path: Path) -> list[str]:
    return [e["message"]["content"][0]["text"] for e in entries(path)
            if e["type"] == "message" and e["message"]["role"] == "user"]


def problem_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("pi-lsp:")]


def test_new_session_streams_the_reply_and_writes_the_session(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    fake.script(text_reply("Hel", "lo, ", "wor", "ld!"))
    result = pi_run(workspace, env, "--new", "hello")
    assert result.returncode == 0, result.stderr
    assert "Hello, world!" in result.stdout
    assert "Traceback" not in result.stderr
    [path] = sessions(workspace)
    match = SESSION_NAME.match(path.name)
    assert match, path.name
    header = json.loads(path.read_text("utf-8").splitlines()[0])
    assert header["type"] == "session"
    assert header["id"] == match.group(2)
    assert header["timestamp"].replace(":", "-").replace(".", "-") == match.group(1)
    assert header["cwd"] == str(workspace)
    assert kinds(path) == ["model_change", "thinking_level_change", "system", "user",
                           "assistant"]
    assistant = entries(path)[-1]["message"]
    assert assistant["content"] == [{"type": "text", "text": "Hello, world!"}]
    assert assistant["stopReason"] == "stop"
    [request] = fake.message_requests()
    assert request["messages"][-1]["content"][0]["text"] == "hello"
    assert request["model"] == "claude-sonnet-4-5"
    # No thinkingLevel in settings.json: pi 1.6's default, written down and sent.
    assert entries(path)[1]["thinkingLevel"] == "medium"
    assert request["thinking"]["type"] == "enabled"
    checked = check(path, env)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_run_with_no_model_configured_is_on_pi_16s_default_model(
        fake: FakeAnthropic, tmp_path: Path, env: dict[str, str]) -> None:
    """pi 1.6 starts on claude-opus-5-5 where nothing names a model (model-resolver.js,
    defaultModelPerProvider.anthropic), so sessions people start with pi today run on it;
    pi-lsp started on claude-sonnet-4-5, with other output caps, prices and request shapes."""
    agent, workspace = tmp_path / "agent", tmp_path / "ws"
    workspace.mkdir()
    trust(workspace, agent)  # and no settings.json naming a model
    fake.script(text_reply("on the default", model="claude-opus-5-5"))
    result = pi_run(workspace, {**env, "PI_CODING_AGENT_DIR": str(agent)}, "--new", "hello")
    assert result.returncode == 0, result.stderr
    [path] = sessions(workspace)
    change = entries(path)[0]
    assert (change["provider"], change["modelId"]) == ("anthropic", "claude-opus-5-5")
    [request] = fake.message_requests()
    assert (request["model"], request["max_tokens"]) == ("claude-opus-5-5", 128_000)
    assert request["thinking"]["type"] == "adaptive"
    assert request["messages"][-1] == {"role": "system", "content": [],
                                       "output_config": {"effort": "medium"}}


def test_run_continues_the_newest_session_or_the_named_one(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    fake.script(text_reply("first"))
    assert pi_run(workspace, env, "--new", "one").returncode == 0
    [first] = sessions(workspace)
    fake.script(text_reply("second"))
    assert pi_run(workspace, env, "--new", "two").returncode == 0
    [second] = [p for p in sessions(workspace) if p != first]

    fake.script(text_reply("again to you"))
    result = pi_run(workspace, env, "again")
    assert result.returncode == 0, result.stderr
    assert "again to you" in result.stdout
    assert len(sessions(workspace)) == 2
    assert user_texts(second) == ["two", "again"]
    assert user_texts(first) == ["one"]
    assert kinds(second)[-2:] == ["user", "assistant"]
    # The model saw the earlier turn of the session it continued.
    [request] = fake.message_requests()
    wire = [m["content"] if isinstance(m["content"], str) else m["content"][0]["text"]
            for m in request["messages"]]
    assert wire == ["two", "second", "again"]

    fake.script(text_reply("back in one"))
    result = pi_run(workspace, env, "--session", str(first), "third")
    assert result.returncode == 0, result.stderr
    assert user_texts(first) == ["one", "third"]
    assert user_texts(second) == ["two", "again"]
    assert len(sessions(workspace)) == 2
    assert check(first, env).returncode == 0


def test_run_continues_where_pi_does_with_a_shared_session_folder(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str], tmp_path: Path) -> None:
    """With $PI_CODING_AGENT_SESSION_DIR set, a run continued only `.pi/sessions`, not the
    shared folder `pi -c` continues from (nor another project's session there)."""
    shared = tmp_path / "pi-sessions"
    env = {**env, "PI_CODING_AGENT_SESSION_DIR": str(shared)}
    fake.script(text_reply("first"))
    assert pi_run(workspace, env, "--new", "one").returncode == 0
    [mine] = shared.glob("*.jsonl")
    theirs = shared / "another-project.jsonl"  # newer, started elsewhere
    theirs.write_text(json.dumps({"type": "session", "version": 3, "id": "0199aaaa-0000-7000-"
                                  "8000-000000000001", "timestamp": "2099-01-01T00:00:00.000Z",
                                  "cwd": str(tmp_path / "other")}) + "\n", "utf-8")
    fake.script(text_reply("again to you"))
    result = pi_run(workspace, env, "again")
    assert result.returncode == 0, result.stderr
    assert user_texts(mine) == ["one", "again"]
    assert sorted(shared.glob("*.jsonl")) == sorted([mine, theirs]) and sessions(workspace) == []


@pytest.mark.parametrize("decided", [None, False], ids=["nobody-decided", "not-trusted"])
def test_a_folder_nobody_trusted_has_its_sessions_left_alone(
        fake: FakeAnthropic, tmp_path: Path, agent_dir: Path, env: dict[str, str],
        decided: bool | None) -> None:
    """A cloned repository's session (a history it made up) is not continued: a run's tools
    do not ask. Naming it with --session still works."""
    workspace = tmp_path / "cloned"
    workspace.mkdir()
    if decided is not None:
        trust(workspace, agent_dir, decided)
    fake.script(text_reply("first"))
    assert pi_run(workspace, env, "--new", "planted history").returncode == 0
    [planted] = sessions(workspace)
    fake.script(text_reply("fresh"))
    result = pi_run(workspace, env, "hello")
    assert result.returncode == 0, result.stderr
    assert "none of its sessions is continued" in result.stderr
    assert user_texts(planted) == ["planted history"]
    [fresh] = [p for p in sessions(workspace) if p != planted]
    assert user_texts(fresh) == ["hello"]
    assert [m["content"][0]["text"] for m in fake.message_requests()[-1]["messages"]] == \
        ["hello"]


def test_a_lone_surrogate_in_the_stream_is_stored_as_pi_stores_it(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    """A provider can stream half an emoji; pi keeps it (as `\\ud83d`) and sends it again
    without it. Once this crashed the run before the reply was written."""
    fake.script(text_reply("bad \ud83d", " end"))
    result = pi_run(workspace, env, "--new", "hi")
    assert result.returncode == 0, result.stderr
    assert "bad \ufffd end" in result.stdout  # the terminal shows U+FFFD
    [path] = sessions(workspace)
    assert b'"text":"bad \\ud83d end"' in path.read_bytes()
    assert entries(path)[-1]["message"]["content"] == [{"type": "text", "text": "bad \ud83d end"}]
    assert check(path, env).returncode == 0
    fake.script(text_reply("ok"))
    assert pi_run(workspace, env, "again").returncode == 0
    [request] = fake.message_requests()
    assert request["messages"][1]["content"][0]["text"] == "bad  end"


def test_tool_turn_writes_the_file_and_reports_the_tool(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    fake.script(
        tool_reply([("toolu_1", "write", {"path": "out/hello.txt", "content": "hi there\n"})],
                   text="Writing it."),
        text_reply("All done."),
    )
    result = pi_run(workspace, env, "--new", "write a file")
    assert result.returncode == 0, result.stderr
    assert (workspace / "out" / "hello.txt").read_text() == "hi there\n"
    assert "write" in result.stderr
    assert "out/hello.txt" in result.stderr
    assert "All done." in result.stdout
    assert "out/hello.txt" not in result.stdout  # tool activity stays off stdout
    first, second = fake.message_requests()
    assert first["tools"] and {t["name"] for t in first["tools"]} >= {"read", "write", "edit",
                                                                      "bash"}
    results = [b for b in second["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert [r["tool_use_id"] for r in results] == ["toolu_1"]
    assert results[0]["is_error"] is False
    [path] = sessions(workspace)
    assert kinds(path)[-5:] == ["user", "assistant", "toolResult", "custom", "assistant"]
    assert check(path, env).returncode == 0


def test_a_snapshot_that_runs_long_is_told_on_stderr(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    """A run whose snapshot's git ran on (up to 300 s a run) printed nothing meanwhile: each
    such snapshot now says so on stderr once, as the server tells the editor."""
    endless_ignore_rules(workspace)
    fake.script(tool_reply([("c1", "write", {"path": "a.txt", "content": "a\n"})]),
                text_reply("ok"))
    run = pi_lsp_with("from pi_lsp.files import history, snapshots; "
                      "history.SLOW_SNAPSHOT_S = 0.1; snapshots.GIT_BUDGET_S = 1.0",
                      "run", "--new", "write")
    result = subprocess.run(run, capture_output=True, text=True, cwd=workspace, env=env,
                            timeout=PROCESS_CEILING_S)
    assert result.returncode == 0, result.stderr
    assert (workspace / "a.txt").read_text() == "a\n"
    told = [line for line in result.stderr.splitlines() if "is taking long" in line]
    assert [line.split(" the turn's tool ")[0] for line in told] == [  # before and after it
        f"pi-lsp: note: recording the files of {workspace} {when}" for when in ("before", "after")]
    assert all(line.endswith("aborting the turn stops it") for line in told)


def test_bash_gets_no_api_key_of_the_environment_or_of_models_json(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str], agent_dir: Path,
        tmp_path: Path) -> None:
    """A command the run allows runs the repository's code (`npm test`), which read the keys
    pi-lsp reads: ANTHROPIC_API_KEY, OPENAI_API_KEY and those your models.json names."""
    own = tmp_path / "agent"
    own.mkdir()
    (own / "settings.json").write_text((agent_dir / "settings.json").read_text())
    (own / "models.json").write_text(json.dumps({"providers": {"gateway": {
        "baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions",
        "apiKey": "GATEWAY_TOKEN", "headers": {"X-Team": "GATEWAY_TEAM"},
        "models": [{"id": "m"}]}}}))
    trust(workspace, own)
    keys = {"ANTHROPIC_API_KEY": "sk-ant-hidden", "OPENAI_API_KEY": "sk-openai-hidden",
            "GATEWAY_TOKEN": "gateway-hidden", "GATEWAY_TEAM": "team-hidden"}
    fake.script(tool_reply([("t1", "bash", {"command": "env"})]), text_reply("Done."))
    result = pi_run(workspace, {**env, **keys, "PI_CODING_AGENT_DIR": str(own),
                                "PI_LSP_TEST_KEPT": "kept"}, "--new", "show the environment")
    assert result.returncode == 0, result.stderr
    [output] = [b for b in fake.message_requests()[1]["messages"][-1]["content"]
                if b["type"] == "tool_result"]
    text = json.dumps(output)
    assert "PI_LSP_TEST_KEPT=kept" in text
    assert "hidden" not in text and not [name for name in keys if name in text]


def test_reply_text_and_tool_lines_reach_the_terminal_without_escape_sequences(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    """OSC 52 in a reply set the clipboard; SGR 8 in a command hid it in the `→ bash` line."""
    command = "\x1b]0;innocent\x07\x1b[8mecho pwned\x1b[0m; echo ok"
    fake.script(tool_reply([("t1", "bash", {"command": command})], text="Run\x1b[2K\r it."),
                text_reply("Done.\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2gK\x07\ttabbed\x9b2J"))
    result = pi_run(workspace, env, "--new", "go")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Run[2K it.\nDone.]52;c;Y3VybCBldmlsLnNoIHwgc2gK\ttabbed2J\n"
    assert "→ bash \\x1b]0;innocent\\x07\\x1b[8mecho pwned\\x1b[0m; echo ok\n" in \
        result.stderr
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr


def test_model_flag_changes_the_wire_model_and_is_recorded(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    fake.script(text_reply("ok", model="claude-haiku-4-5"))
    result = pi_run(workspace, env, "--new", "--model", "anthropic/claude-haiku-4-5", "hi")
    assert result.returncode == 0, result.stderr
    [request] = fake.message_requests()
    assert request["model"] == "claude-haiku-4-5"
    [path] = sessions(workspace)
    changes = [e for e in entries(path) if e["type"] == "model_change"]
    assert changes[-1]["provider"] == "anthropic"
    assert changes[-1]["modelId"] == "claude-haiku-4-5"
    assert entries(path)[-1]["message"]["model"] == "claude-haiku-4-5"


def test_thinking_flag_enables_thinking(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    fake.script(text_reply("pondered"))
    result = pi_run(workspace, env, "--new", "--thinking", "high", "think")
    assert result.returncode == 0, result.stderr
    [request] = fake.message_requests()
    assert request["thinking"]["type"] == "enabled"
    assert request["thinking"]["budget_tokens"] > 0
    assert request["max_tokens"] > request["thinking"]["budget_tokens"]
    [path] = sessions(workspace)
    levels = [e["thinkingLevel"] for e in entries(path) if e["type"] == "thinking_level_change"]
    assert levels[-1] == "high"


def test_thinking_flag_on_a_continued_session_is_recorded_as_pi_records_it(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    """pi 1.6 records the level a run thinks at, at its start (before its prompt), when the
    branch's last one, clamped to the run's model, is another: `--thinking xhigh` on haiku
    writes `high`, which the next plain run keeps (16,384 budget tokens, not the session's
    8,192 again); its `--model` is recorded by no model_change, the session's model following
    its last reply. pi-lsp recorded nothing and the next run fell back to the old level."""
    fake.script(text_reply("first"))
    assert pi_run(workspace, env, "--new", "hi").returncode == 0
    [path] = sessions(workspace)
    before = kinds(path)
    fake.script(text_reply("pondered", model="claude-haiku-4-5"))
    result = pi_run(workspace, env, "--model", "anthropic/claude-haiku-4-5", "--thinking", "xhigh",
                    "think hard")
    assert result.returncode == 0, result.stderr
    flagged = fake.message_requests()[-1]
    assert flagged["model"] == "claude-haiku-4-5"
    assert flagged["thinking"]["budget_tokens"] == 16384
    assert kinds(path) == [*before, "thinking_level_change", "user", "assistant"]
    assert entries(path)[-3]["thinkingLevel"] == "high"  # clamped to the model
    assert entries(path)[-1]["message"]["thinkingLevel"] == "high"
    fake.script(text_reply("again", model="claude-haiku-4-5"))
    assert pi_run(workspace, env, "and again").returncode == 0
    plain = fake.message_requests()[-1]
    assert plain["model"] == "claude-haiku-4-5"
    assert plain["thinking"] == flagged["thinking"], "the level the flag recorded"
    assert kinds(path) == [*before, "thinking_level_change", "user", "assistant", "user",
                           "assistant"]


@pytest.mark.parametrize(("flags", "thinks_at"), [
    (("--thinking", "medium"), "medium"),  # the level recorded
    (("--model", "anthropic/claude-haiku-4-5"), "medium"),  # a model alone: no model_change
    (("--model", "anthropic/plain-1", "--thinking", "high"), "off"),  # a model that thinks at none
    (("--model", "anthropic/claude-haiku-4-5", "--thinking", "low"), "low"),
])
def test_flags_pi_records_nothing_for_on_a_continued_session(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str], flags: tuple[str, ...],
        thinks_at: str) -> None:
    """As pi 1.6 writes (run against it): nothing but the prompt and its reply where the
    run's level is the branch's clamped to the run's model, and never a model_change; the
    last flags differ (`low`), so that one records `low`."""
    (workspace / ".pi").mkdir()
    (workspace / ".pi" / "models.json").write_text(json.dumps({"providers": {"anthropic": {
        "apiKey": "test", "models": [{"id": "plain-1", "api": "anthropic-messages"}]}}}))
    fake.script(text_reply("first"))
    assert pi_run(workspace, env, "--new", "hi").returncode == 0
    [path] = sessions(workspace)
    before = kinds(path)
    fake.script(text_reply("flagged"))
    assert pi_run(workspace, env, *flags, "next").returncode == 0
    written = kinds(path)[len(before):]
    # The reply keeps the level it thought at ("off" on a model that thinks at none), as pi
    # 1.6's does.
    assert entries(path)[-1]["message"]["thinkingLevel"] == thinks_at
    if flags[-1] == "low":
        assert written == ["thinking_level_change", "user", "assistant"]
        assert entries(path)[-3]["thinkingLevel"] == "low"
    else:
        assert written == ["user", "assistant"]


def test_a_clamped_level_is_not_recorded_over_the_one_asked_for(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    """pi 1.6 compares the branch's level clamped to the run's model: xhigh recorded on a model
    that has it, a run on haiku (which thinks at high instead), with or without `--thinking
    xhigh`, writes no level, and the model that has it thinks at xhigh again after."""
    (workspace / ".pi").mkdir()
    (workspace / ".pi" / "models.json").write_text(json.dumps({"providers": {"anthropic": {
        "apiKey": "test", "modelOverrides": {
            "claude-sonnet-4-5": {"thinkingLevelMap": {"xhigh": "xhigh"}}}}}}))
    fake.script(text_reply("first"))
    assert pi_run(workspace, env, "--new", "--thinking", "xhigh", "hi").returncode == 0
    [path] = sessions(workspace)
    before = kinds(path)
    assert [e["thinkingLevel"] for e in entries(path)
            if e["type"] == "thinking_level_change"] == ["xhigh"]
    haiku = ("--model", "anthropic/claude-haiku-4-5")
    for flags in (haiku, (*haiku, "--thinking", "xhigh"), ("--model",
                                                          "anthropic/claude-sonnet-4-5")):
        fake.script(text_reply("ok"))
        assert pi_run(workspace, env, *flags, "next").returncode == 0
    assert kinds(path) == [*before, *["user", "assistant"] * 3]
    # Each reply keeps the level it thought at, as pi 1.6's do (pi-lsp's kept xhigh on haiku).
    assert [m["message"]["thinkingLevel"] for m in entries(path)[-5::2]] == \
        ["high", "high", "xhigh"]


def test_a_continued_session_that_sets_no_level_records_the_runs(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    # pi 1.6 records the level a continued session thinks at when its branch sets none (an
    # older session's): the flag's, if given, which later runs then keep.
    fake.script(text_reply("first"))
    assert pi_run(workspace, env, "--new", "hi").returncode == 0
    [path] = sessions(workspace)
    lines = path.read_text("utf-8").splitlines()
    unset = [line if json.loads(line).get("type") != "thinking_level_change" else
             json.dumps({**json.loads(line), "type": "custom", "customType": "note"})
             for line in lines]
    path.write_text("\n".join(unset) + "\n", "utf-8")
    fake.script(text_reply("low"))
    assert pi_run(workspace, env, "--thinking", "low", "think").returncode == 0
    assert kinds(path)[-3:] == ["thinking_level_change", "user", "assistant"]
    assert entries(path)[-3]["thinkingLevel"] == "low"
    flagged = fake.message_requests()[-1]
    fake.script(text_reply("again"))
    assert pi_run(workspace, env, "again").returncode == 0
    assert fake.message_requests()[-1]["thinking"] == flagged["thinking"]
    assert kinds(path)[-3:] == ["assistant", "user", "assistant"]
    # A branch whose thinking_level_change has no level yet has one: pi looks at the type.
    lines = path.read_text("utf-8").splitlines()
    levelless = [line if json.loads(line).get("type") != "thinking_level_change" else
                 json.dumps({k: v for k, v in json.loads(line).items() if k != "thinkingLevel"})
                 for line in lines]
    path.write_text("\n".join(levelless) + "\n", "utf-8")
    fake.script(text_reply("once more"))
    assert pi_run(workspace, env, "once more").returncode == 0
    # It thinks at the default level, and pi 1.6 records that one at the run's start, as the
    # missing level, clamped, is the model's lowest ("off"): pi-lsp wrote nothing.
    assert kinds(path)[-4:] == ["assistant", "thinking_level_change", "user", "assistant"]
    assert entries(path)[-3]["thinkingLevel"] == "medium"


def test_an_unknown_model_id_is_used_with_a_note(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    fake.script(text_reply("ok"), text_reply("ok"))
    result = pi_run(workspace, env, "--new", "--model", "anthropic/claude-typo-9", "hi")
    assert result.returncode == 0, result.stderr
    assert "has no 'anthropic' model 'claude-typo-9': it is sent as written" in result.stderr
    assert fake.message_requests()[-1]["model"] == "claude-typo-9"
    known = pi_run(workspace, env, "--model", "anthropic/claude-haiku-4-5", "hi")
    assert known.returncode == 0, known.stderr
    assert "catalog has no" not in known.stderr


def test_an_unknown_anthropic_id_gets_the_facts_pi_16_copies(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    """pi 1.6 gives an id its catalog lacks a copy of the provider's default model
    (model-resolver.js buildFallbackModel: claude-opus-5-5's) under that id; pi-lsp sent it
    with generic facts: max_tokens 16384, budget thinking, no placeholder tool, other betas.
    The request below is what `pi --model anthropic/claude-unknown-9 -p hi` sent the fake."""
    fake.script(text_reply("ok"))
    result = pi_run(workspace, env, "--new", "--model", "anthropic/claude-unknown-9", "hi")
    assert result.returncode == 0, result.stderr
    assert "it is sent as written, with the facts of anthropic/claude-opus-5-5" in result.stderr
    body = fake.message_requests()[-1]
    assert (body["model"], body["max_tokens"], body["thinking"], body["output_config"]) == (
        "claude-unknown-9", 128_000, {"type": "adaptive", "display": "summarized",
                                      "block_binding": {"prefix_mismatch_behavior": "drop_block"}},
        {"effort": "low"})
    assert [tool["name"] for tool in body["tools"]][-1] == "__pi_deferred_placeholder__"
    assert fake.requests[-1].headers["anthropic-beta"] == (
        "mid-conversation-output-config-2026-07-01,thinking-binding-controls-2026-08-01,"
        "inline-tools-2026-09-15")


@pytest.mark.parametrize(("model_id", "flags", "max_output_tokens", "reasoning"), [
    ("gpt-4o", ("--thinking", "off"), 16_384, None),
    ("gpt-4o", (), 16_384, None),
    ("o3", (), 100_000, {"effort": "medium", "summary": "auto"})])
def test_an_openai_model_of_pi_16s_catalog_is_sent_with_its_own_facts(
        oai: FakeOpenAI, workspace: Path, env: dict[str, str], model_id: str,
        flags: tuple[str, ...], max_output_tokens: int, reasoning: dict[str, str] | None) -> None:
    """pi-lsp's catalog had 4 of pi 1.6's 47 OpenAI models: gpt-4o took gpt-6.2-sol's facts
    (a reasoning effort OpenAI refuses for it, max_output_tokens 128000) even with --thinking
    off. What `pi --model openai/gpt-4o -p hi` sent: `{"model":"gpt-4o","stream":true,
    "store":false,"max_output_tokens":16384}` (no reasoning); for o3, 100000 at effort medium."""
    (workspace / ".pi").mkdir(exist_ok=True)
    (workspace / ".pi" / "models.json").write_text(json.dumps({"providers": {"openai": {
        "baseUrl": f"{oai.url}/v1", "apiKey": "test"}}}))
    oai.script(responses_reply("ok"))
    result = pi_run(workspace, env, "--new", "--model", f"openai/{model_id}", *flags, "hi")
    assert result.returncode == 0, result.stderr
    assert "catalog has no" not in result.stderr
    body = oai.responses_requests()[-1]
    assert (body["model"], body["max_output_tokens"], body.get("reasoning")) == (
        model_id, max_output_tokens, reasoning)
    assert ("include" in body) == (reasoning is not None)


def run_as_sent(fake: FakeAnthropic, workspace: Path, env: dict[str, str], name: str,
                *flags: str) -> tuple[object, ...]:
    """What a run on a new session `name` with `flags` sent and recorded: the wire's model and
    thinking, the session's model and level, and its notes."""
    fake.script(text_reply("ok"))
    path = workspace / name
    result = pi_run(workspace, env, "--session", str(path), *flags, "hi")
    assert result.returncode == 0, result.stderr
    request = fake.message_requests()[-1]
    recorded = [(e.get("modelId"), e.get("thinkingLevel")) for e in entries(path)
                if e["type"] in ("model_change", "thinking_level_change")]
    return (request["model"], request.get("thinking"), recorded,
            [line for line in problem_lines(result.stderr)])


@pytest.mark.parametrize(("shorthand", "longhand"), [
    (("--model", "anthropic/claude-haiku-4-5:high"),
     ("--model", "anthropic/claude-haiku-4-5", "--thinking", "high")),
    (("--model", "anthropic/claude-haiku-4-5:off"),
     ("--model", "anthropic/claude-haiku-4-5", "--thinking", "off")),
    # --thinking wins over a known model's suffix
    (("--model", "anthropic/claude-haiku-4-5:high", "--thinking", "low"),
     ("--model", "anthropic/claude-haiku-4-5", "--thinking", "low")),
    # an id the catalog lacks: its suffix is the level, but stays in the id beside --thinking
    (("--model", "anthropic/claude-typo-9:high"),
     ("--model", "anthropic/claude-typo-9", "--thinking", "high")),
    # levels are lower-case: `:HIGH` (like `:turbo`) is part of the id, sent with a note
    (("--model", "anthropic/claude-haiku-4-5:HIGH"),
     ("--model", "anthropic/claude-haiku-4-5:HIGH")),
])
def test_a_thinking_level_after_the_model_is_read_as_pi_reads_it(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str], shorthand: tuple[str, ...],
        longhand: tuple[str, ...]) -> None:
    """pi 1.6 reads `--model PROVIDER/ID:LEVEL` as `--model PROVIDER/ID --thinking LEVEL`
    (model-resolver.js, resolveCliModel; checked against it); pi-lsp sent `ID:LEVEL` as the
    model id, with a note that its catalog had no such model."""
    assert run_as_sent(fake, workspace, env, "short.jsonl", *shorthand) == \
        run_as_sent(fake, workspace, env, "long.jsonl", *longhand)


def test_a_custom_ids_suffix_stays_in_the_id_beside_the_thinking_flag(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    # As pi 1.6: an id its catalog lacks keeps `:high` when --thinking names the level.
    model, _thinking, recorded, notes = run_as_sent(
        fake, workspace, env, "s.jsonl", "--model", "anthropic/claude-typo-9:high",
        "--thinking", "low")
    assert model == "claude-typo-9:high"
    assert recorded == [("claude-typo-9:high", None), (None, "low")]
    assert any("'claude-typo-9:high': it is sent as written" in note for note in notes)


def test_a_models_json_id_with_a_colon_takes_a_level_after_it(
        oai: FakeOpenAI, workspace: Path, env: dict[str, str]) -> None:
    """`ollama/qwen2.5-coder:7b:low` is that model at `low`; an id that is itself `NAME:LEVEL`
    in models.json is that model, as pi 1.6 finds the whole string first."""
    (workspace / ".pi").mkdir()
    (workspace / ".pi" / "models.json").write_text(json.dumps({"providers": {"ollama": {
        "baseUrl": f"{oai.url}/v1", "api": "openai-completions", "apiKey": "ollama",
        "models": [{"id": LOCAL_MODEL, "reasoning": True},
                   {"id": "odd:high", "reasoning": True}]}}}))
    oai.script(chat_reply("a"), chat_reply("b"))
    first = pi_run(workspace, env, "--new", "--model", f"ollama/{LOCAL_MODEL}:low", "hi")
    assert first.returncode == 0, first.stderr
    second = pi_run(workspace, env, "--new", "--model", "ollama/odd:high", "hi")
    assert second.returncode == 0, second.stderr
    assert "catalog has no" not in first.stderr + second.stderr
    [low, odd] = oai.chat_requests()
    assert (low["model"], low["reasoning_effort"]) == (LOCAL_MODEL, "low")
    assert (odd["model"], odd.get("reasoning_effort")) == ("odd:high", "medium")


def test_bad_model_is_a_usage_error(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    fake.script(text_reply("never"))
    result = pi_run(workspace, env, "--model", "nonsense", "hi")
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "--model" in lines[0]
    assert "Traceback" not in result.stderr
    assert fake.message_requests() == []


@pytest.mark.parametrize(("pattern", "model", "level"), [
    ("sonnet", "claude-sonnet-5-5", None),  # a part of an id: the latest alias
    ("opus-4-5", "claude-opus-4-5", None),  # the alias before its dated id
    ("Anthropic/Claude-Haiku-4-5", "claude-haiku-4-5", None),  # any case
    ("anthropic/haiku-4-5:low", "claude-haiku-4-5", "low"),  # a part after the provider
    ("Claude Haiku 4.5", "claude-haiku-4-5", None),  # a part of a name
    ("claude-opus-4-5-20251101", "claude-opus-4-5-20251101", None),  # a dated id, whole
    ("haiku:high", "claude-haiku-5-5", "high"),
])
def test_a_model_pattern_is_resolved_as_pi_resolves_it(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str], pattern: str, model: str,
        level: str | None) -> None:
    """pi 1.6 takes `--model sonnet`, `opus-4-5`, `Anthropic/Claude-Haiku-4-5` (model-
    resolver.js, resolveCliModel); pi-lsp refused a pattern without `PROVIDER/` and sent any
    other as written, with a note that its catalog had no such model."""
    sent, _thinking, recorded, notes = run_as_sent(fake, workspace, env, "s.jsonl",
                                                   "--model", pattern)
    assert sent == model and notes == []
    assert recorded[0] == (model, None)
    if level is not None:
        assert recorded[1] == (None, level)


def test_a_pattern_nothing_matches_or_several_providers_match_is_refused(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    """pi 1.6's words for no match and for the same id on two providers with keys; naming the
    provider chooses. Nothing is written and no model is called."""
    (workspace / ".pi").mkdir()
    (workspace / ".pi" / "models.json").write_text(json.dumps({"providers": {"mirror": {
        "baseUrl": fake.url, "api": "anthropic-messages", "apiKey": "mirror",
        "models": [{"id": "claude-haiku-4-5"}]}, "bare": {
        "baseUrl": fake.url, "api": "anthropic-messages", "apiKey": "bare"}}}))
    fake.script(text_reply("ok"))
    refusals = {}
    for pattern in ("nonsense", "claude-haiku-4-5", "bare/some-model"):
        result = pi_run(workspace, env, "--new", "--model", pattern, "hi")
        assert result.returncode == 2
        [refusals[pattern]] = result.stderr.splitlines()
    assert refusals["nonsense"].startswith('pi-lsp: --model: Model "nonsense" not found.')
    # Named as PROVIDER/ID of a configured provider: the refusal says why (it has no models).
    assert refusals["bare/some-model"] == (
        "pi-lsp: --model: Model \"bare/some-model\" not found: provider 'bare' has no models; "
        'list at least one under its "models" in models.json, and other ids of it are taken '
        "as written")
    assert refusals["claude-haiku-4-5"] == (
        'pi-lsp: --model: Model "claude-haiku-4-5" is ambiguous across providers: '
        "anthropic/claude-haiku-4-5, mirror/claude-haiku-4-5. More than one matching provider "
        "is authenticated. Use provider/model.")
    assert sessions(workspace) == [] and fake.message_requests() == []
    chosen = pi_run(workspace, env, "--new", "--model", "mirror/claude-haiku-4-5", "hi")
    assert chosen.returncode == 0, chosen.stderr
    assert entries(sessions(workspace)[0])[-1]["message"]["provider"] == "mirror"


PI16_RESOLVE = """
const [resolver, input] = process.argv.slice(1);
const { resolveCliModel } = await import(resolver);
const { models, usable, cases } = JSON.parse(input);
const modelRuntime = { getModels: () => models, hasConfiguredAuth: (p) => usable.includes(p) };
const answers = cases.map(([cliModel, cliThinking]) => {
  const { model, thinkingLevel, error } = resolveCliModel({ cliModel, cliThinking, modelRuntime });
  return model ? [model.provider, model.id, cliThinking ?? thinkingLevel ?? null] : error;
});
process.stdout.write(JSON.stringify(answers));
"""


def test_model_patterns_resolve_as_pi16_resolves_them_on_the_same_catalog() -> None:
    """pi 1.6's own resolveCliModel, given pi-lsp's catalog (and a second provider with some of
    its ids), picks the model and level pi-lsp picks, and refuses the same patterns."""
    from pi_lsp.providers.model_reference import ModelPatternError, resolve_model
    from pi_lsp.providers.registry import ModelInfo, ModelRegistry, Price
    from tests.test_system_messages import PI16, pi16_node

    node = pi16_node()
    if node is None:
        pytest.skip("pi 1.6 is not installed")
    extra = [ModelInfo("mirror", model_id, 1000, 100, Price(0, 0, 0, 0), name=name)
             for model_id, name in (("claude-haiku-4-5", None), ("gpt-5", "GPT-5 mirrored"),
                                    ("qwen2.5-coder:7b", None), ("Sonnet-Local", None))]
    registry = ModelRegistry(extra)
    cases = [(pattern, thinking) for pattern in (
        "sonnet", "opus", "opus-4-5", "OPUS-4-5", "haiku", "haiku-4-5", "claude-haiku-4-5",
        "anthropic/claude-haiku-4-5", "mirror/claude-haiku-4-5", "mirror/haiku", "gpt",
        "gpt-5", "GPT-5", "mirrored", "gpt-4.1:off", "sonnet:high", "sonnet:HIGH",
        "anthropic/claude-typo-9", "anthropic/claude-typo-9:high", "mirror/x:low",
        "qwen2.5-coder:7b", "qwen2.5-coder:7b:low", "coder", "nonsense", "nope/x", " sonnet ",
        "sonnet-local", "Claude Haiku 4.5", "20251101", "anthropic/", "/sonnet", "4-5",
    ) for thinking in (None, "low")]
    for usable in ([], ["anthropic"], ["anthropic", "mirror"], ["mirror"]):
        models = [{"provider": m.provider, "id": m.id, "name": m.name} for m in registry.all()]
        resolver = PI16 / "@earendil-works" / "pi-coding-agent" / "dist" / "core" / \
            "model-resolver.js"
        done = subprocess.run(
            [node, "--input-type=module", "-e", PI16_RESOLVE, resolver.as_uri(),
             json.dumps({"models": models, "usable": usable, "cases": cases})],
            capture_output=True, text=True, timeout=PROCESS_CEILING_S)
        assert done.returncode == 0, done.stderr
        for (pattern, thinking), pi in zip(cases, json.loads(done.stdout), strict=True):
            try:
                chosen = resolve_model(registry, pattern, thinking, usable.__contains__)
            except ModelPatternError as error:
                # pi's first sentence; the rest says where pi-lsp looks instead of --list-models
                assert isinstance(pi, str), (pattern, thinking, usable, pi)
                first = pi.replace(" Use --provider or provider/model.", " Use provider/model.")
                assert str(error).startswith(first.split(". Use --list-models")[0]), \
                    (pattern, error, pi)
                continue
            assert [chosen.provider, chosen.model_id, chosen.level] == pi, \
                (pattern, thinking, usable)


def test_bad_model_leaves_no_session_behind(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    fake.script()
    result = pi_run(workspace, env, "--new", "--model", "nonsense", "hi")
    assert result.returncode == 2
    assert sessions(workspace) == [], "a rejected command line still created a session file"


def test_a_models_json_model_runs_and_an_unknown_provider_is_a_usage_error(
        oai: FakeOpenAI, workspace: Path, env: dict[str, str]) -> None:
    (workspace / ".pi").mkdir()
    (workspace / ".pi" / "models.json").write_text(json.dumps({"providers": {"ollama": {
        "baseUrl": f"{oai.url}/v1", "api": "openai-completions", "apiKey": "ollama",
        "models": [{"id": LOCAL_MODEL}]}}}))
    oai.script(chat_reply("local ", "answer"))
    result = pi_run(workspace, env, "--new", "--model", f"ollama/{LOCAL_MODEL}", "hi")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "local answer\n"
    [path] = sessions(workspace)
    reply = entries(path)[-1]["message"]
    assert (reply["provider"], reply["api"]) == ("ollama", "openai-completions")
    assert [r["model"] for r in oai.chat_requests()] == [LOCAL_MODEL]
    unknown = pi_run(workspace, env, "--model", "google/gemini-2.5-pro", "hi")
    assert unknown.returncode == 2
    [line] = unknown.stderr.splitlines()
    assert "'google' is not configured" in line and "models.json" in line


def test_missing_api_key_is_one_line_and_writes_nothing(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    fake.script(text_reply("never"))
    no_key = {k: v for k, v in env.items() if k != "ANTHROPIC_API_KEY"}
    result = pi_run(workspace, no_key, "--new", "hello")
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "ANTHROPIC_API_KEY" in lines[0]
    assert "Traceback" not in result.stderr
    assert fake.message_requests() == []
    written = {p.name: p.read_text() for p in sessions(workspace)}
    assert written == {}, "a run that could not start wrote a session file"


def test_the_session_line_names_a_path_that_is_not_utf8_as_its_bytes(
        fake: FakeAnthropic, tmp_path: Path, env: dict[str, str]) -> None:
    """In a folder `bad\xffdir`, `session: PATH` printed U+FFFD for the byte, naming a file
    that does not exist."""
    folder = os.fsencode(tmp_path) + b"/bad\xffdir"
    os.mkdir(folder)
    fake.script(text_reply("ok"))
    result = subprocess.run(command("run", "--new", "hi"), capture_output=True,
                            cwd=folder, env=env, timeout=PROCESS_CEILING_S)
    assert result.returncode == 0, result.stderr
    [path] = [line.removeprefix(b"session: ") for line in result.stderr.splitlines()
              if line.startswith(b"session: ")]
    assert os.path.dirname(path) == folder + b"/.pi/sessions" and os.path.isfile(path)


def test_an_empty_prompt_is_refused_and_sends_nothing(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    """`run ""` sent an empty prompt to the model and wrote it; pi 1.6's `pi -p ""` sends and
    writes nothing."""
    fake.script(text_reply("never"))
    result = pi_run(workspace, env, "--new", "")
    assert result.returncode == 2
    assert result.stderr == "pi-lsp: argument prompt: must not be empty\n"
    assert fake.message_requests() == []
    assert sessions(workspace) == []


def test_missing_api_key_leaves_an_existing_session_untouched(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    fake.script(text_reply("first"))
    assert pi_run(workspace, env, "--new", "one").returncode == 0
    [path] = sessions(workspace)
    before = path.read_bytes()
    fake.script(text_reply("never"))
    no_key = {k: v for k, v in env.items() if k != "ANTHROPIC_API_KEY"}
    result = pi_run(workspace, no_key, "again")
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert "ANTHROPIC_API_KEY" in result.stderr
    assert sessions(workspace) == [path]
    assert path.read_bytes() == before


def session_answered_by(path: Path, provider: str | None, model_id: str | None) -> None:
    """A session whose one reply names `provider`/`model_id` (None: the field left out)."""
    reply: dict[str, Any] = {"role": "assistant", "content": [{"type": "text", "text": "ok"}],
                             "api": "anthropic-messages", "stopReason": "stop", "timestamp": 1,
                             "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0,
                                       "totalTokens": 2, "cost": {"input": 0, "output": 0,
                                                                  "cacheRead": 0, "cacheWrite": 0,
                                                                  "total": 0}}}
    reply |= {k: v for k, v in (("provider", provider), ("model", model_id)) if v is not None}
    lines = [{"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00Z",
              "cwd": str(path.parent)},
             {"type": "message", "id": "u", "parentId": None, "timestamp": "2026-01-01T00:00:01Z",
              "message": {"role": "user", "content": "hi", "timestamp": 1}},
             {"type": "message", "id": "a", "parentId": "u", "timestamp": "2026-01-01T00:00:02Z",
              "message": reply}]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), "utf-8")


@pytest.mark.parametrize(("provider", "model_id"), [
    ("nosuch", "x"), ("openai", "gpt-4o"), (None, None), ("anthropic", "m")])
def test_a_session_model_that_cannot_be_restored_falls_back_to_the_default(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str], provider: str | None,
        model_id: str | None) -> None:
    """A session's model that is unknown, has no key (OPENAI_API_KEY) or is missing exited 2
    ("provider 'undefined'"), and an id the catalog lacks was sent as is; pi 1.6 warns "Could
    not restore model X. Using Y" and runs on the default (sdk.js)."""
    session = workspace / ".pi" / "sessions" / "s.jsonl"
    session_answered_by(session, provider, model_id)
    fake.script(text_reply("on the default"))
    no_openai = {k: v for k, v in env.items() if k != "OPENAI_API_KEY"}
    result = pi_run(workspace, no_openai, "--session", str(session), "next")
    assert result.returncode == 0, result.stderr
    names = f"{provider or 'undefined'}/{model_id or 'undefined'}"
    assert problem_lines(result.stderr) == [
        f"pi-lsp: warning: could not restore model {names}; using anthropic/claude-sonnet-4-5"]
    assert [r["model"] for r in fake.message_requests()] == ["claude-sonnet-4-5"]
    assert "model_change" not in kinds(session)  # for this run only, as pi writes none


def test_a_session_model_and_a_default_that_both_cannot_be_used_are_both_named(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    """With no key for the session's model (openai) nor for the default (anthropic), the error
    named only OPENAI_API_KEY, as if setting it were the one way on; pi 1.6 goes on to another
    model with a key, in an order pi-lsp's catalog cannot follow, so both are named."""
    session = workspace / ".pi" / "sessions" / "s.jsonl"
    session_answered_by(session, "openai", "gpt-5")
    before = session.read_bytes()
    fake.script(text_reply("never"))
    no_keys = {k: v for k, v in env.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    result = pi_run(workspace, no_keys, "--session", str(session), "next")
    assert result.returncode == 2, result.stderr
    [problem] = problem_lines(result.stderr)
    assert problem.startswith("pi-lsp: could not restore model openai/gpt-5 (no OpenAI API "
                              "key: set OPENAI_API_KEY"), problem
    assert ("the default model anthropic/claude-sonnet-4-5 cannot be used either (no Anthropic "
            "API key: set ANTHROPIC_API_KEY") in problem
    assert fake.message_requests() == []
    assert session.read_bytes() == before


@pytest.mark.parametrize("where", [["--new"], ["--session", "new/s.jsonl"]])
def test_a_run_with_no_key_leaves_the_workspace_as_it_was(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str], where: list[str]) -> None:
    """It said "no Anthropic API key" (exit 2) after making the session's folder, and
    `.pi/settings.json` pointing pi there, for a session never written (found in review)."""
    fake.script()  # nothing to answer, and no request an earlier test left counted
    no_key = {k: v for k, v in env.items() if k != "ANTHROPIC_API_KEY"}
    result = pi_run(workspace, no_key, *where, "hello")
    assert result.returncode == 2, result.stderr
    [problem] = problem_lines(result.stderr)
    assert problem.startswith("pi-lsp: no Anthropic API key: set ANTHROPIC_API_KEY"), problem
    assert list(workspace.iterdir()) == []
    assert fake.message_requests() == []


def test_provider_error_after_retries_exits_1(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    fake.script(*[error_reply(500, "api_error", "the fake is broken") for _ in range(10)])
    result = pi_run(workspace, env, "--new", "hello")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    problems = problem_lines(result.stderr)
    assert len(problems) == 1, result.stderr
    assert "500" in problems[0]
    assert "the fake is broken" in problems[0]
    assert len(fake.message_requests()) == 4  # pi's agent-level retry: 3 more
    [path] = sessions(workspace)
    last = entries(path)[-1]["message"]
    assert last["role"] == "assistant"
    assert last["stopReason"] == "error"
    assert "the fake is broken" in last["errorMessage"]
    assert check(path, env).returncode == 0


# A provider's error text is the server's: OSC 0 (window title), a clear screen, a bidi override.
HOSTILE_ERROR = "bad\x1b]0;PWNED\x07\x1b[2J\u202erequest"
SPELLED_ERROR = "bad\\x1b]0;PWNED\\x07\\x1b[2J\\u202erequest"


def test_the_final_provider_error_reaches_the_terminal_escaped(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    """Found in review: the retry line was escaped, the error `run` ended with was not."""
    fake.script(*[error_reply(400, "invalid_request_error", HOSTILE_ERROR) for _ in range(5)])
    result = pi_run(workspace, env, "--new", "hello")
    assert result.returncode == 1, result.stderr
    [problem] = problem_lines(result.stderr)
    assert SPELLED_ERROR in problem
    assert not [char for char in "\x1b\x07\u202e" if char in result.stderr], result.stderr


def test_a_summary_model_error_reaches_the_terminal_escaped(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str], tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    shutil.copy(conformance_files()[0], session)
    fake.script(*[error_reply(400, "invalid_request_error", HOSTILE_ERROR) for _ in range(10)])
    result = run_cli("compact", str(session), "--keep-recent-tokens", "1000", cwd=workspace,
                     env=env)
    assert result.returncode == 2, result.stderr
    [problem] = problem_lines(result.stderr)
    assert SPELLED_ERROR in problem
    assert not [char for char in "\x1b\x07\u202e" if char in result.stderr], result.stderr


HOSTILE_NAME = "x\x1b]52;c;cm0gLXJmIH4K\x07\x1b[2J\u202e"  # a name a repository may commit
SPELLED_NAME = "x\\x1b]52;c;cm0gLXJmIH4K\\x07\\x1b[2J\\u202e"


def test_names_a_repository_chose_reach_the_terminal_escaped(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str], tmp_path: Path) -> None:
    """`run` printed repository-chosen names raw on stderr (found in review): the session file's
    name, a skill folder's in a warning, a models.json provider's in an error, and a symlinked
    `.pi/sessions`' target in the refusal. A committed session set the clipboard and cleared
    the screen; a line break in a file name forged a line of its own."""
    def escaped(result: subprocess.CompletedProcess[str]) -> str:
        assert not [char for char in "\x1b\x07\u202e" if char in result.stderr], result.stderr
        assert SPELLED_NAME in result.stderr
        return result.stderr

    sessions_dir = workspace / ".pi" / "sessions"
    sessions_dir.mkdir(parents=True)
    named = sessions_dir / f"2099-01-01T00-00-00-000Z_{HOSTILE_NAME}\nFORGED.jsonl"
    tree = SessionTree.create(str(named), str(workspace))
    tree.append_message(UserMessage(content="hi", timestamp=1))
    skill = workspace / ".pi" / "skills" / HOSTILE_NAME
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: [unclosed\n---\nbody\n")
    fake.script(text_reply("ok"))
    result = pi_run(workspace, env, "again")
    assert result.returncode == 0, result.stderr
    said = escaped(result)
    assert f"/.pi/skills/{SPELLED_NAME}/SKILL.md: not loaded as a skill" in said
    assert f"session: {named}".replace(HOSTILE_NAME, SPELLED_NAME).replace("\n", "\\n") \
        in said.splitlines()
    assert not [line for line in said.splitlines() if line.startswith("FORGED")]

    (workspace / ".pi" / "models.json").write_text(json.dumps({"providers": {HOSTILE_NAME: {
        "baseUrl": "http://127.0.0.1:9", "api": "openai-completions", "apiKey": "!cat ~/.key",
        "models": [{"id": "m"}]}}}))
    refused = pi_run(workspace, env, "--model", "m", "hi")
    assert refused.returncode == 2
    assert f"providers.{SPELLED_NAME}.apiKey: shell commands" in escaped(refused)

    linked = tmp_path / "linked"
    (linked / ".pi").mkdir(parents=True)
    (linked / ".pi" / "sessions").symlink_to(tmp_path / HOSTILE_NAME)
    outside = pi_run(linked, env, "hi")
    assert outside.returncode == 2
    assert f"leads to {tmp_path}/{SPELLED_NAME}, outside the workspace" in escaped(outside)


def test_mid_stream_error_exits_1(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    # Overloaded is retried (pi's policy): the same failure every time ends the run.
    fake.script(*[Reply([message_start(), *text_block(0, "partial ")],
                        error_type="overloaded_error", error_message="Overloaded")
                  for _ in range(4)])
    result = pi_run(workspace, env, "--new", "hello")
    assert result.returncode == 1, result.stderr
    assert "partial" in result.stdout
    assert "Traceback" not in result.stderr
    problems = problem_lines(result.stderr)
    assert len(problems) == 1, result.stderr
    assert "overloaded" in problems[0].lower()
    [path] = sessions(workspace)
    assert entries(path)[-1]["message"]["stopReason"] == "error"


def test_ctrl_c_aborts_and_records_the_abort(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    pieces = [f"piece{n} " for n in range(40)]
    fake.script(text_reply(*pieces, delay=0.3))
    process = subprocess.Popen(command("run", "--new", "go slowly"), cwd=workspace, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    with reaped(process):
        assert process.stdout is not None
        seen = b""
        selector = selectors.DefaultSelector()
        selector.register(process.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + CEILING_S
        while b"piece0" not in seen and time.monotonic() < deadline:
            if selector.select(timeout=0.1):
                chunk = os.read(process.stdout.fileno(), 4096)
                if not chunk:
                    break
                seen += chunk
        assert b"piece0" in seen, "the stream never started"
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=PROCESS_CEILING_S)
        stdout, stderr = process.communicate(timeout=PROCESS_CEILING_S)
    assert code == 130, stderr.decode()
    assert b"Traceback" not in stderr
    assert b"piece39" not in seen + stdout
    [path] = sessions(workspace)
    last = entries(path)[-1]
    assert last["type"] == "message"
    assert last["message"]["role"] == "assistant"
    assert last["message"]["stopReason"] == "aborted"
    assert last["message"]["content"][0]["text"].startswith("piece0")
    checked = check(path, env)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_session_and_new_together_is_a_usage_error(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    fake.script(text_reply("never"))
    result = pi_run(workspace, env, "--session", str(workspace / "s.jsonl"), "--new", "hi")
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert "--new" in result.stderr
    assert fake.message_requests() == []
    assert not (workspace / "s.jsonl").exists()
    assert sessions(workspace) == []


# -- OpenAI-compatible models (issue 18) ------------------------------------------------------


def local_models(workspace: Path, url: str, api_key: str = "ollama") -> None:
    (workspace / ".pi").mkdir(exist_ok=True)
    (workspace / ".pi" / "models.json").write_text(json.dumps({"providers": {"ollama": {
        "baseUrl": f"{url}/v1", "api": "openai-completions", "apiKey": api_key,
        "models": [{"id": LOCAL_MODEL}]}}}))


def without_anthropic_key(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k != "ANTHROPIC_API_KEY"}


def test_a_malformed_stream_event_is_an_error_entry_and_exit_1(
        oai: FakeOpenAI, workspace: Path, env: dict[str, str]) -> None:
    local_models(workspace, oai.url)
    bad = OpenAIReply(raw=b'data: {"choices":[{"index":0,"delta":{"content":"partial "}}]}\n\n'
                          b"data: {oops\n\n")
    model = f"ollama/{LOCAL_MODEL}"
    oai.script(bad)
    result = pi_run(workspace, env, "--new", "--model", model, "hi")
    assert result.returncode == 1, result.stderr
    assert result.stdout.startswith("partial ")
    [problem] = problem_lines(result.stderr)
    assert problem == "pi-lsp: Error reading response: malformed server-sent event JSON."
    [path] = sessions(workspace)
    assert kinds(path)[-2:] == ["user", "assistant"]
    last = entries(path)[-1]["message"]
    assert last["stopReason"] == "error"
    assert last["content"] == [{"type": "text", "text": "partial "}]
    # On an existing session the prompt gets its (error) reply too.
    oai.script(OpenAIReply(raw=bad.raw))
    again = pi_run(workspace, env, "again")
    assert again.returncode == 1, again.stderr
    assert kinds(path)[-4:] == ["user", "assistant", "user", "assistant"]
    assert check(path, env).returncode == 0


def test_a_cut_stream_is_said_to_be_cut(
        oai: FakeOpenAI, workspace: Path, env: dict[str, str]) -> None:
    local_models(workspace, oai.url)
    (workspace / ".pi" / "settings.json").write_text(json.dumps({"retry": {"enabled": False}}))
    oai.script(OpenAIReply([chunk({"content": "half"})], cut=True))
    result = pi_run(workspace, env, "--new", "--model", f"ollama/{LOCAL_MODEL}", "hi")
    assert result.returncode == 1, result.stderr
    [problem] = problem_lines(result.stderr)
    assert "closed the connection before the reply was complete" in problem
    [path] = sessions(workspace)
    assert entries(path)[-1]["message"]["content"] == [{"type": "text", "text": "half"}]


def session_without_messages(path: Path, model: tuple[str, str] = ("anthropic",
                                                                    "claude-haiku-4-5")) -> None:
    """A session whose path sets a model and a level but holds no message yet."""
    lines = [{"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00Z",
              "cwd": str(path.parent)},
             {"type": "model_change", "id": "m", "parentId": None,
              "timestamp": "2026-01-01T00:00:01Z", "provider": model[0], "modelId": model[1]},
             {"type": "thinking_level_change", "id": "t", "parentId": "m",
              "timestamp": "2026-01-01T00:00:02Z", "thinkingLevel": "high"}]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), "utf-8")


@pytest.mark.parametrize(("flags", "model_id", "level"), [
    ((), "claude-sonnet-4-5", "medium"),
    (("--model", "anthropic/claude-opus-4-5", "--thinking", "low"), "claude-opus-4-5", "low")])
def test_a_session_without_messages_starts_on_the_default_model_as_pi_resumes_it(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str], flags: tuple[str, ...],
        model_id: str, level: str) -> None:
    """A session whose path has a model_change but no message ran on that model (haiku, at
    high); pi 1.6 resumes such a session as a new one (sdk.js createAgentSession: restoring
    is for a session with messages): on --model, else the settings' default, at --thinking,
    else the model's or default level, and records both (checked with pi 1.6's own
    createAgentSession on the same file)."""
    session = workspace / ".pi" / "sessions" / "s.jsonl"
    session_without_messages(session)
    fake.script(text_reply("on the default", model=model_id))
    result = pi_run(workspace, env, "--session", str(session), *flags, "hi")
    assert result.returncode == 0, result.stderr
    assert [r["model"] for r in fake.message_requests()] == [model_id]
    assert kinds(session) == ["model_change", "thinking_level_change", "model_change",
                              "thinking_level_change", "system", "user", "assistant"]
    change, chosen = entries(session)[2:4]
    assert (change["provider"], change["modelId"], chosen["thinkingLevel"]) == \
        ("anthropic", model_id, level)
    assert entries(session)[-1]["message"]["model"] == model_id


def test_a_session_without_messages_keeps_its_model_when_the_default_has_no_key(
        oai: FakeOpenAI, workspace: Path, env: dict[str, str]) -> None:
    """With no Anthropic key the default cannot run: pi 1.6 then looks for a model that has a
    key, and `run` keeps the session's own (a local one), as before, where it stopped with
    "no Anthropic API key"; the request preview shows that model too."""
    local_models(workspace, oai.url)
    session = workspace / ".pi" / "sessions" / "s.jsonl"
    session_without_messages(session, ("ollama", LOCAL_MODEL))
    keyless = without_anthropic_key(env)
    assert request_shown(session, "t", workspace, keyless)["model"] == LOCAL_MODEL
    oai.script(chat_reply("local"))
    result = pi_run(workspace, keyless, "--session", str(session), "hi")
    assert result.returncode == 0, result.stderr
    assert entries(session)[-1]["message"]["model"] == LOCAL_MODEL


def test_context_request_layer_of_a_path_without_messages_is_on_the_default_model(
        workspace: Path, env: dict[str, str]) -> None:
    """The request preview at a path with a model_change but no message showed that model
    (haiku, at high), where `run` from there sends the default's, at its level."""
    session = workspace / ".pi" / "sessions" / "s.jsonl"
    session_without_messages(session)
    shown = request_shown(session, "t", workspace, env)
    assert (shown["model"], shown["thinking"]["budget_tokens"]) == ("claude-sonnet-4-5", 8192)


def test_model_flag_needs_no_default_provider_and_only_the_choice_is_written(
        oai: FakeOpenAI, workspace: Path, env: dict[str, str]) -> None:
    local_models(workspace, oai.url)
    oai.script(chat_reply("local"))
    result = pi_run(workspace, without_anthropic_key(env), "--new", "--model",
                    f"ollama/{LOCAL_MODEL}", "--thinking", "low", "hi")
    assert result.returncode == 0, result.stderr
    [path] = sessions(workspace)
    assert kinds(path) == ["model_change", "thinking_level_change", "system", "user",
                           "assistant"]
    change, level = entries(path)[:2]
    assert (change["provider"], change["modelId"]) == ("ollama", LOCAL_MODEL)
    assert level["thinkingLevel"] == "off"  # as pi 1.6 records it: the model thinks at none
    # Continuing it needs no Anthropic key either: its model is the local one.
    oai.script(chat_reply("still local"))
    again = pi_run(workspace, without_anthropic_key(env), "--thinking", "low", "more")
    assert again.returncode == 0, again.stderr
    # nothing re-set, nothing declared again
    assert kinds(path)[2:] == ["system", "user", "assistant", "user", "assistant"]


def test_a_shell_command_api_key_is_a_clear_usage_error(
        oai: FakeOpenAI, workspace: Path, env: dict[str, str]) -> None:
    local_models(workspace, oai.url, api_key="!pass show ollama")
    oai.script()
    result = pi_run(workspace, env, "--new", "--model", f"ollama/{LOCAL_MODEL}", "hi")
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert "providers.ollama.apiKey: shell commands" in line and "internal error" not in line
    assert sessions(workspace) == []


def test_retry_waits_are_shown_and_the_run_recovers(
        oai: FakeOpenAI, workspace: Path, env: dict[str, str]) -> None:
    local_models(workspace, oai.url)
    oai.script(openai_error(429, "rate_limit_exceeded", "slow down"), chat_reply("recovered"))
    result = pi_run(workspace, env, "--new", "--model", f"ollama/{LOCAL_MODEL}", "hi")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "recovered\n"
    assert "ollama 429 rate_limit_exceeded: slow down; retrying in 0.001s (1/3)" in result.stderr
    [path] = sessions(workspace)
    assert [e["message"]["stopReason"] for e in entries(path)
            if e["type"] == "message" and e["message"]["role"] == "assistant"] == ["error", "stop"]


SUMMARY_WAIT = "Anthropic 503 api_error: Service unavailable; retrying in 0.001s (1/3)"


@pytest.mark.parametrize("args", [["compact", "--keep-recent-tokens", "1000"],
                                  ["branch", "--to", "ID", "--summarize"]])
def test_a_summarys_retry_waits_are_shown(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str], tmp_path: Path,
        args: list[str]) -> None:
    """`compact` and `branch --summarize` said nothing while a summary waited to be asked
    again; each wait is now a `↻` line on stderr, as a turn's is in `run`."""
    session = tmp_path / "s.jsonl"
    shutil.copyfile(conformance_files()[0], session)
    first = entries(session)[1]["id"]  # a branch point well above the leaf
    fake.script(error_reply(503, "api_error", "Service unavailable"),
                *[text_reply("## Goal\nsummarized") for _ in range(2)])
    args = [first if arg == "ID" else arg for arg in args]
    result = run_cli(args[0], str(session), *args[1:], cwd=workspace, env=env)
    assert result.returncode == 0, result.stderr
    assert f"  ↻ {SUMMARY_WAIT}\n" in result.stderr


def test_a_compaction_before_the_prompt_shows_its_retry_waits_in_run(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str], example_session: Path
        ) -> None:
    """The compaction `run` makes before a prompt when the window is nearly full waited
    silently to retry its summary; the wait is a `↻` line, as a turn's retry is."""
    (workspace / ".pi").mkdir(exist_ok=True)
    (workspace / ".pi" / "settings.json").write_text(json.dumps(
        {"compaction": {"keepRecentTokens": 500}}))
    session = workspace / "full.jsonl"
    session.write_text(example_session.read_text().replace('"totalTokens":8124',
                                                           '"totalTokens":199000'))
    fake.script(error_reply(503, "api_error", "Service unavailable"),
                *[text_reply("## Goal\nsummarized") for _ in range(3)])
    result = pi_run(workspace, env, "--session", str(session), "NEXT")
    assert result.returncode == 0, result.stderr
    assert f"  ↻ {SUMMARY_WAIT}\n" in result.stderr
    assert "compaction" in [e["type"] for e in entries(session)]


def request_shown(path: Path, leaf: str, workspace: Path, env: dict[str, str]) -> Any:
    """What `context --layer request --json` shows at `leaf`, read."""
    shown = run_cli("context", str(path), "--leaf", leaf, "--layer", "request", "--json",
                    cwd=workspace, env=env)
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def sent_to(fake: FakeAnthropic) -> tuple[dict[str, Any], Any]:
    """The one messages request the fake was sent (its body but `stream`), and its headers."""
    [sent] = fake.message_requests()
    [headers] = [r.headers for r in fake.requests if r.path.startswith("/v1/messages")]
    return {k: v for k, v in sent.items() if k != "stream"}, headers


def test_context_request_layer_is_the_request_run_sent(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    fake.script(text_reply("Hello!"))
    assert pi_run(workspace, env, "--new", "hello").returncode == 0
    [path] = sessions(workspace)
    asked = next(e["id"] for e in entries(path)
                 if e["type"] == "message" and e["message"]["role"] == "user")
    sent, headers = sent_to(fake)
    # The Anthropic SDK sends the preview's `betas` as the anthropic-beta header.
    sent = {**sent, "betas": headers["anthropic-beta"].split(",")}
    assert request_shown(path, asked, workspace, env) == sent
    rows = run_cli("context", str(path), "--leaf", asked, "--layer", "request", cwd=workspace,
                   env=env)
    assert rows.returncode == 0, rows.stderr
    assert f"{asked}  user" in rows.stdout and "model: anthropic/claude-sonnet-4-5" in rows.stdout


@pytest.mark.parametrize(("anthropic", "beta"), [
    ({"headers": {"anthropic-beta": "context-1m-2025-08-07"}}, "context-1m-2025-08-07"),
    ({"headers": {"anthropic-beta": "prov-beta-1"}, "modelOverrides": {
        "claude-sonnet-4-5": {"headers": {"anthropic-beta": "model-beta-1"}}}}, "prov-beta-1"),
])
def test_a_providers_beta_header_is_sent_and_shown_as_sent(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str], anthropic: dict[str, Any],
        beta: str) -> None:
    """With models.json's provider headers setting anthropic-beta, the request layer showed
    pi's interleaved-thinking beta, which the run left out to send the provider's; with the
    model's set too (`modelOverrides`), the model's was sent, where pi merges the provider's
    headers last."""
    (workspace / ".pi").mkdir()
    (workspace / ".pi" / "models.json").write_text(json.dumps({"providers": {"anthropic": {
        "apiKey": "test", **anthropic}}}))
    fake.script(text_reply("Hello!"))
    assert pi_run(workspace, env, "--new", "--thinking", "high", "hello").returncode == 0
    [path] = sessions(workspace)
    asked = next(e["id"] for e in entries(path)
                 if e["type"] == "message" and e["message"]["role"] == "user")
    sent, headers = sent_to(fake)
    assert headers["anthropic-beta"] == beta
    assert request_shown(path, asked, workspace, env) == sent


def test_context_request_layer_is_on_the_default_model_where_run_falls_back(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    """A session on openai/gpt-5 with no OPENAI_API_KEY: the request layer showed gpt-5's
    request, where `run`, as pi 1.6, sent the default model's (only a model the catalog
    lacks was shown on the default)."""
    session = workspace / ".pi" / "sessions" / "s.jsonl"
    session_answered_by(session, "openai", "gpt-5")
    fake.script(text_reply("on the default"))
    no_openai = {k: v for k, v in env.items() if k != "OPENAI_API_KEY"}
    assert pi_run(workspace, no_openai, "--session", str(session), "next").returncode == 0
    asked = [e["id"] for e in entries(session)
             if e["type"] == "message" and e["message"]["role"] == "user"][-1]
    sent, headers = sent_to(fake)
    sent = {**sent, "betas": headers["anthropic-beta"].split(",")}
    assert request_shown(session, asked, workspace, no_openai) == sent


def test_context_request_layer_keeps_a_model_whose_key_models_json_cannot_give(
        oai: FakeOpenAI, workspace: Path, env: dict[str, str]) -> None:
    """`run` stops on a key it cannot read (a `!command`), naming it, and falls back to no
    model: the request layer shows the session's own, rather than failing."""
    local_models(workspace, oai.url, api_key="!pass show ollama")
    session = workspace / ".pi" / "sessions" / "s.jsonl"
    session_answered_by(session, "ollama", LOCAL_MODEL)
    shown = run_cli("context", str(session), "--layer", "request", "--json", cwd=workspace,
                    env=env)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["model"] == LOCAL_MODEL
    ran = pi_run(workspace, env, "--session", str(session), "next")
    assert ran.returncode == 2 and "providers.ollama.apiKey" in ran.stderr, ran.stderr


# -- the ways a run ends ----------------------------------------------------------------------


def shell_run(workspace: Path, env: dict[str, str], script: str
              ) -> subprocess.CompletedProcess[str]:
    """`script` in bash with `RUN` set to the command, with Python's default buffered stdout."""
    env = {k: v for k, v in env.items() if k != "PYTHONUNBUFFERED"}
    return subprocess.run(["bash", "-c", script.replace("RUN", " ".join(command("run")))],
                          cwd=workspace, env=env, capture_output=True, text=True,
                          timeout=PROCESS_CEILING_S)


def aborted_reply(workspace: Path) -> str:
    [path] = sessions(workspace)
    last = entries(path)[-1]
    assert last["message"]["role"] == "assistant", last
    assert last["message"]["stopReason"] == "aborted"
    text: str = last["message"]["content"][0]["text"]
    return text


# Takes the first 20 bytes, closes its end, then says so: the reply's rest meets a reader gone.
READER_OF_20 = "(head -c 20; exec 0<&-; touch reader-gone)"


def gated_reply(workspace: Path) -> Reply:
    """A reply whose first text (30 bytes) comes at once and the rest once the reader is gone."""
    reply = text_reply("twenty bytes or more, at once ", *[f"piece{n} " for n in range(40)])
    reply.held_until, reply.held_after = workspace / "reader-gone", 3  # start, block, first text
    return reply


def test_a_reader_that_stops_early_aborts_the_run_and_keeps_the_reply(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    """`pi-lsp run "..." | head -c 20`: the failed write went up through the run's events,
    cut the turn short before its reply was saved, and the run exited 0. As a writer whose
    reader is gone stops (SIGPIPE), the run stops as for Ctrl-C: the reply so far is saved as
    aborted and a running command killed, since nobody sees what it would go on to do."""
    fake.script(gated_reply(workspace))
    result = shell_run(workspace, env,
                       f'RUN --new go | {READER_OF_20}; echo " rc=${{PIPESTATUS[0]}}"')
    assert result.stdout == "twenty bytes or more rc=141\n"
    assert "pi-lsp: aborted: the reply's reader stopped reading; the reply so far is saved\n" \
        in result.stderr
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr
    assert aborted_reply(workspace).startswith("twenty bytes or more, at once ")


def test_a_reader_of_the_tool_lines_that_stops_early_keeps_the_turn(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    """`pi-lsp run "..." 2>&1 >/dev/null | head -n 1`: the next tool line's failed write went up
    through the run's events, the tool's result was never saved, and Python's failed flush of
    stderr made the exit 120 (found in review). It stops as for stdout's reader."""
    # The command finishes once the reader has closed its end, so the next line meets it.
    command = "until [ -e reader-gone ]; do sleep 0.05; done; echo hi > made.txt"
    fake.script(tool_reply([("toolu_1", "bash", {"command": command})], text="Running."),
                text_reply("All done."))
    result = shell_run(workspace, env, "RUN --new go 2>&1 >/dev/null | "
                       '(head -n 1; exec 0<&-; touch reader-gone); echo "rc=${PIPESTATUS[0]}"')
    assert result.stdout.startswith("→ bash ") and result.stdout.endswith("\nrc=141\n")
    assert (workspace / "made.txt").exists()
    [path] = sessions(workspace)
    assert "toolResult" in kinds(path)  # the turn is saved up to where it stopped


def test_a_reader_of_the_reply_and_tool_lines_on_one_pipe_that_stops_early(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    """`2>&1 | head -c 20`: the run's last lines on stderr met the same broken pipe, and
    Python's failed flush of stderr made the exit 120 (found in review)."""
    fake.script(gated_reply(workspace))
    result = shell_run(workspace, env,
                       f'RUN --new go 2>&1 | {READER_OF_20}; echo " rc=${{PIPESTATUS[0]}}"')
    assert result.stdout == "twenty bytes or more rc=141\n"
    assert aborted_reply(workspace).startswith("twenty bytes or more, at once ")


def test_a_full_disk_at_the_settings_file_is_one_line_naming_it(
        workspace: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Starting a session writes sessionDir into .pi/settings.json; a full disk there said
    'internal error (OSError …)' (found in review)."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(workspace)

    def full(*_args: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(jsonfile.os, "replace", full)
    assert cli.main(["run", "--new", "--approve", "hi"]) == 2
    assert capsys.readouterr().err == \
        f"pi-lsp: {workspace / '.pi' / 'settings.json'}: No space left on device\n"


def test_a_read_only_workspace_names_the_settings_file_not_a_temporary_one(
        workspace: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A read-only `.pi/` said "…/.pi/.settings.json.3978lymu.tmp: Read-only file system", the
    random temporary file the settings are written through (found in review). As root no mode
    keeps a folder from being written, so the refusal is the one mkstemp makes there."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(workspace)

    def read_only(*_args: object, dir: Path, **_kwargs: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system", str(dir / ".settings.json.x.tmp"))

    monkeypatch.setattr(jsonfile.tempfile, "mkstemp", read_only)
    assert cli.main(["run", "--new", "--approve", "hi"]) == 2
    assert capsys.readouterr().err == \
        f"pi-lsp: {workspace / '.pi' / 'settings.json'}: Read-only file system\n"


@pytest.mark.parametrize(("redirect", "reason"), [("> /dev/full", "No space left on device"),
                                                  (">&-", "Bad file descriptor")])
def test_a_reply_that_cannot_be_written_aborts_the_run(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str], redirect: str,
        reason: str) -> None:
    """A full or closed stdout (`>&-`: writing the reply to Python's None stdout was an internal
    error that ended the session at the prompt, with no reply saved) aborts, the reply kept."""
    fake.script(text_reply(*[f"piece{n} " for n in range(40)], delay=0.3))
    result = shell_run(workspace, env, f"RUN --new go {redirect}")
    assert result.returncode == 2, result.stderr
    assert problem_lines(result.stderr) == [
        f"pi-lsp: aborted: cannot write the reply ({reason}); the reply so far is saved"]
    assert aborted_reply(workspace).startswith("piece0")


def bad_session(kind: str, path: Path) -> str:
    """A --session FILE that is not a session to continue, and the one line that says so."""
    if kind == "not a session":
        path.write_text('{"hello": "world"}\n')
        return f"pi-lsp: {path}: not a pi session file (it has no session header)"
    if kind == "FIFO":
        os.mkfifo(path)
        return f"pi-lsp: {path}: not a pi session file (it is a FIFO, not a regular file)"
    if kind == "unreadable":
        path.write_text("")
        path.chmod(0)
        return f"pi-lsp: {path}: cannot read (Permission denied)"
    path.symlink_to(path.with_name("gone.jsonl"))
    return f"pi-lsp: {path}: a symlink to nothing; name the session file itself"


@pytest.mark.parametrize("kind", ["not a session", "FIFO", "unreadable", "dangling symlink"])
def test_a_session_file_that_cannot_be_continued_is_named(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str], kind: str) -> None:
    """Each was an "internal error", or a hang (a FIFO), or for a dangling symlink "another
    process created this file first"."""
    if kind == "unreadable" and os.geteuid() == 0:
        pytest.skip("root reads any file")
    path = workspace / "s.jsonl"
    said = bad_session(kind, path)
    fake.script(text_reply("never"))
    result = pi_run(workspace, env, "--session", str(path), "hi")
    assert result.returncode == 2
    assert result.stderr == said + "\n"
    assert fake.message_requests() == [] and sessions(workspace) == []


def test_a_new_session_file_in_a_missing_folder_makes_the_folder(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    """`--session DIR/new.jsonl` with DIR missing said "the session folder … is gone; … kept in
    memory" and wrote nothing; pi 1.6 makes the folder (SessionManager: mkdirSync)."""
    path = workspace / "new" / "folder" / "s.jsonl"
    fake.script(text_reply("made"))
    result = pi_run(workspace, env, "--session", str(path), "hi")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "made\n"
    assert kinds(path)[-2:] == ["user", "assistant"]


@pytest.mark.parametrize("args", [["compact", "--keep-recent-tokens", "1000"],
                                  ["branch", "--to", "ID", "--summarize"]])
def test_ctrl_c_while_a_summary_is_awaited_is_one_line(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str], tmp_path: Path,
        args: list[str]) -> None:
    from tests.conftest import conformance_files

    session = tmp_path / "s.jsonl"
    shutil.copyfile(conformance_files()[0], session)
    before = session.read_bytes()
    first = entries(session)[1]["id"]  # a branch point well above the leaf
    fake.script(Reply([message_start()], stall=True))
    args = [first if arg == "ID" else arg for arg in args]
    process = subprocess.Popen(command(args[0], str(session), *args[1:]), cwd=workspace,
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with reaped(process):
        until_sync(fake.message_requests, "the summary to be asked for", PROCESS_CEILING_S)
        process.send_signal(signal.SIGINT)
        _stdout, stderr = process.communicate(timeout=PROCESS_CEILING_S)
    assert process.returncode == 130, stderr
    assert stderr.decode().endswith("pi-lsp: interrupted\n") and b"Traceback" not in stderr
    assert session.read_bytes() == before


def test_a_line_break_in_a_name_forges_no_line_of_its_own(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str]) -> None:
    """A skill folder's name holding a line break (`.pi/skills/"x\\nFORGED …"`) started a line of
    its own in `run`'s warning on stderr (escape_stderr keeps the line breaks of the text it is
    given): every log record's message is now one line, its breaks spelled `\\n`."""
    forged = "FORGED: pi-lsp: all checks passed"
    skill = workspace / ".pi" / "skills" / f"x\n{forged}"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: [unclosed\n---\nbody\n")
    fake.script(text_reply("ok"))
    result = pi_run(workspace, env, "hi")
    assert result.returncode == 0, result.stderr
    assert f"/.pi/skills/x\\n{forged}/SKILL.md: not loaded as a skill" in result.stderr
    assert not [line for line in result.stderr.splitlines() if line.startswith("FORGED")], \
        result.stderr


# A prompt at a leaf whose last line has no id pi can use (none, "", 0, false): pi 1.6 loads the
# conversation up from that line, but each request is its session's projection at the leaf as
# it is then (agent-session.js _installAgentRequestProjection): the prompt is written as a new
# root, so only it is sent. The model and level come from getBranch(), empty there: the
# defaults, and the level is recorded as on resuming a path with none. At a null id pi's
# context is empty, and the session starts as a new one (a model_change too). A text id ("a3")
# sends the conversation, as a contrast. tests/pi16_idless_turn.mjs made the fixture.
IDLESS_TURN = Path(__file__).parent / "fixtures" / "pi16-idless-turn.json"
IDLESS_LEAVES = {"no id": {}, '""': {"id": ""}, "0": {"id": 0}, "false": {"id": False},
                 "null": {"id": None}, "a3": {"id": "a3"}}


def leveled_session(path: Path, leaf: dict[str, Any]) -> None:
    """A session on haiku at a high level whose last line (a prompt) holds `leaf`'s id field."""
    usage = {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}
    lines = [
        {"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00Z",
         "cwd": str(path.parent)},
        {"type": "thinking_level_change", "id": "t1", "parentId": None,
         "timestamp": "2026-01-01T00:00:00Z", "thinkingLevel": "high"},
        {"type": "model_change", "id": "m1", "parentId": "t1", "timestamp": "2026-01-01T00:00:00Z",
         "provider": "anthropic", "modelId": "claude-haiku-4-5"},
        {"type": "message", "id": "a1", "parentId": "m1", "timestamp": "2026-01-01T00:00:01Z",
         "message": {"role": "user", "content": "first", "timestamp": 1}},
        {"type": "message", "id": "a2", "parentId": "a1", "timestamp": "2026-01-01T00:00:02Z",
         "message": {"role": "assistant", "content": [{"type": "text", "text": "reply one"}],
                     "api": "anthropic-messages", "provider": "anthropic",
                     "model": "claude-haiku-4-5", "usage": usage, "stopReason": "stop",
                     "timestamp": 2}},
        {"type": "message", "parentId": "a2", "timestamp": "2026-01-01T00:00:03Z",
         "message": {"role": "user", "content": "second", "timestamp": 3}, **leaf}]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), "utf-8")


def written_lines(lines: list[str]) -> list[dict[str, Any]]:
    """Lines a prompt wrote, as tests/pi16_idless_turn.mjs shows them (ids are new each run)."""
    shown = []
    for index, line in enumerate(lines):
        entry = json.loads(line)
        parent = entry.get("parentId", "<missing>")
        if index and "parentId" in entry and parent == json.loads(lines[index - 1])["id"]:
            parent = "<previous>"
        shown.append({"type": entry["type"], "role": entry.get("message", {}).get("role"),
                      "thinkingLevel": entry.get("thinkingLevel"), "parent": parent})
    return shown


def sent_bodies(fake: FakeAnthropic) -> list[dict[str, Any]]:
    return [{key: body.get(key) for key in ("model", "thinking", "messages")}
            for body in fake.message_requests()]


@pytest.mark.parametrize("leaf", IDLESS_LEAVES)
def test_a_prompt_at_an_id_less_leaf_sends_and_writes_what_pi16_does(
        fake: FakeAnthropic, workspace: Path, env: dict[str, str], leaf: str) -> None:
    """pi-lsp recorded no level where the path up from the id-less line held one (pi 1.6
    records the default there, as its getBranch() holds none), and sent the same request."""
    session = workspace / ".pi" / "sessions" / "s.jsonl"
    leveled_session(session, IDLESS_LEAVES[leaf])
    before = len(session.read_text("utf-8").splitlines())
    fake.script(text_reply("ok"))
    result = pi_run(workspace, env, "--session", str(session), "new prompt")
    assert result.returncode == 0, result.stderr
    expected = json.loads(IDLESS_TURN.read_text("utf-8"))[leaf]
    assert sent_bodies(fake) == expected["requests"]
    assert written_lines(session.read_text("utf-8").splitlines()[before:]) == expected["written"]


def test_pi16_sends_and_writes_at_an_id_less_leaf_what_is_stored(tmp_path: Path) -> None:
    from tests.test_system_messages import PI16, pi16_node

    node = pi16_node()
    if node is None:
        pytest.skip("pi 1.6 is not installed")
    files = {leaf: tmp_path / f"{index}.jsonl" for index, leaf in enumerate(IDLESS_LEAVES)}
    for leaf, path in files.items():
        leveled_session(path, IDLESS_LEAVES[leaf])
    made = subprocess.run([node, str(ROOT / "tests" / "pi16_idless_turn.mjs"),
                           str(PI16 / "@earendil-works"), *map(str, files.values())],
                          capture_output=True, text=True, timeout=PROCESS_CEILING_S)
    assert made.returncode == 0, made.stderr
    answers = json.loads(made.stdout)
    assert {leaf: answers[str(path)] for leaf, path in files.items()} == \
        json.loads(IDLESS_TURN.read_text("utf-8"))


def without_cache_marks(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` without cache_control, which marks the last message (its text as a block):
    the preview's last is the request's last but one."""
    def blocks(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{"type": "text", "text": content}] if isinstance(content, str) else content

    return [{**message, "content": [{k: v for k, v in block.items() if k != "cache_control"}
                                    for block in blocks(message["content"])]}
            for message in messages]


@pytest.mark.parametrize("leaf", IDLESS_LEAVES)
def test_the_request_preview_at_an_id_less_leaf_is_what_a_prompt_there_sends(
        workspace: Path, env: dict[str, str], leaf: str) -> None:
    """The preview at an id-less leaf showed the conversation up from the line on its model
    and level (haiku at high), none of which a prompt there sends (pi 1.6 sends the prompt
    alone on the default model and level): it now shows the request the prompt is added to."""
    session = workspace / ".pi" / "sessions" / "s.jsonl"
    leveled_session(session, IDLESS_LEAVES[leaf])
    shown = run_cli("context", str(session), "--layer", "request", "--json", cwd=workspace,
                    env=env)
    assert shown.returncode == 0, shown.stderr
    preview = json.loads(shown.stdout)
    [sent] = json.loads(IDLESS_TURN.read_text("utf-8"))[leaf]["requests"]
    assert (preview["model"], preview["thinking"]) == (sent["model"], sent["thinking"])
    assert without_cache_marks(preview["messages"]) == without_cache_marks(sent["messages"][:-1])
