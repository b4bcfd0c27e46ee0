"""The model a session starts on when none is asked for, as pi 1.6 chooses it (model-resolver.js
findInitialModel): the saved default where its provider has a key, else pi's default model of
the first provider (in pi's order) that has a key, else the first model with a key."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from pi_lsp.settings import load_settings
from tests.conftest import ROOT
from tests.fake_openai import MODEL as LOCAL_MODEL
from tests.fake_openai import FakeOpenAI, responses_reply
from tests.test_server import call, connect, own_server, wait_events
from tests.waits import run_cli

KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")


def write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), "utf-8")


def agent() -> Path:
    return Path(os.environ["PI_CODING_AGENT_DIR"])  # each test's own (conftest.own_agent_dir)


def openai_to(oai: FakeOpenAI, agent_dir: Path) -> None:
    """OpenAI's requests to the fake (a provider with only baseUrl reroutes a built-in one)."""
    write(agent_dir / "models.json", {"providers": {"openai": {"baseUrl": f"{oai.url}/v1"}}})


def only_openai_key() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in KEYS and not k.startswith(
        ("ANTHROPIC_", "OPENAI_"))}
    return {**env, "OPENAI_API_KEY": "test",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


@pytest.mark.parametrize(("keys", "saved", "chosen"), [
    ({"OPENAI_API_KEY": "k"}, None, ("openai", "gpt-6.2-sol")),
    ({"ANTHROPIC_API_KEY": "k"}, None, ("anthropic", "claude-opus-5-5")),
    # Both: pi's order (anthropic before openai).
    ({"ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "k"}, None, ("anthropic", "claude-opus-5-5")),
    # A saved default whose provider has a key wins; one without a key is passed over.
    ({"OPENAI_API_KEY": "k"}, ("openai", "gpt-5-mini"), ("openai", "gpt-5-mini")),
    ({"OPENAI_API_KEY": "k"}, ("anthropic", "claude-haiku-4-5"), ("openai", "gpt-6.2-sol")),
    # No key anywhere: the saved default, else pi's own, whose error names the key to set.
    ({}, ("openai", "gpt-5"), ("openai", "gpt-5")),
    ({}, None, ("anthropic", "claude-opus-5-5")),
])
def test_the_initial_model_is_pi_16s(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      keys: dict[str, str], saved: tuple[str, str] | None,
                                      chosen: tuple[str, str]) -> None:
    """With only OPENAI_API_KEY pi-lsp began on anthropic/claude-opus-5-5 and refused for want
    of an Anthropic key; pi 1.6 begins on openai/gpt-6.2-sol."""
    for name in KEYS:
        monkeypatch.delenv(name, raising=False)
    for name, value in keys.items():
        monkeypatch.setenv(name, value)
    if saved is not None:
        write(agent() / "settings.json",
              {"defaultProvider": saved[0], "defaultModel": saved[1]})
    assert load_settings(tmp_path, project=False).initial_model() == chosen


def test_a_models_json_provider_with_a_key_is_chosen_when_no_built_in_one_has_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pi 1.6's last resort: the first model whose provider has a key."""
    for name in KEYS:
        monkeypatch.delenv(name, raising=False)
    write(agent() / "models.json", {"providers": {"ollama": {
        "baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions", "apiKey": "ollama",
        "models": [{"id": LOCAL_MODEL}, {"id": "other"}]}}})
    assert load_settings(tmp_path, project=False).initial_model() == ("ollama", LOCAL_MODEL)


def test_run_with_only_an_openai_key_starts_on_pis_openai_default(
        oai: FakeOpenAI, tmp_path: Path) -> None:
    """`pi-lsp run` with no settings and only OPENAI_API_KEY exited 2 ("no Anthropic API key");
    `pi -p` (pi 1.6) sends openai/gpt-6.2-sol at medium with max_output_tokens 128000."""
    agent_dir = tmp_path / "agent"
    openai_to(oai, agent_dir)
    oai.script(responses_reply("hi"))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = {**only_openai_key(), "PI_CODING_AGENT_DIR": str(agent_dir)}
    result = run_cli("run", "--new", "hello", cwd=workspace, env=env)
    assert result.returncode == 0, result.stderr
    assert "hi" in result.stdout
    [body] = oai.responses_requests()
    assert (body["model"], body["reasoning"], body["max_output_tokens"]) == (
        "gpt-6.2-sol", {"effort": "medium", "summary": "auto"}, 128_000)
    [session] = (workspace / ".pi" / "sessions").glob("*.jsonl")
    changes = [json.loads(line) for line in session.read_text("utf-8").splitlines()
               if '"model_change"' in line]
    assert [(c["provider"], c["modelId"]) for c in changes] == [("openai", "gpt-6.2-sol")]


async def test_the_server_starts_sessions_on_pis_openai_default(
        oai: FakeOpenAI, tmp_path: Path) -> None:
    """The server began new sessions on anthropic/claude-opus-5-5 and listed it as the
    default where only OPENAI_API_KEY was set, so an editor's first prompt failed."""
    agent_dir = tmp_path / "agent"
    openai_to(oai, agent_dir)
    (tmp_path / "ws").mkdir()
    env = {"OPENAI_API_KEY": "test", "PI_CODING_AGENT_DIR": str(agent_dir)}
    async with own_server(env) as client:
        pi = await connect(client, "visual-studio-code", tmp_path, {}, folders=("ws",))
        listed = await call(client, "pi.listModels", {})
        assert listed["default"] == "openai/gpt-6.2-sol"
        uri = (await call(client, "pi.newSession", {}))["uri"]
        assert await call(client, "pi.prepareTurn", {"uri": uri}) == {
            "provider": "openai", "model": "gpt-6.2-sol"}
        preview = await call(client, "pi.previewContext", {"uri": uri})
        assert preview["model"] == "openai/gpt-6.2-sol", preview["model"]
        oai.script(responses_reply("hi"))
        since = pi.mark()
        turn_id = (await call(client, "pi.prompt", {"uri": uri, "text": "hello"}))["turnId"]
        events = await wait_events(pi, turn_id, since)
        assert "error" not in [event["type"] for event in events], events
        assert [body["model"] for body in oai.responses_requests()] == ["gpt-6.2-sol"]


def test_gpt_sol_replies_keep_their_effort_and_send_it_back_as_pi_16_does(
        oai: FakeOpenAI, tmp_path: Path) -> None:
    """pi 1.6 writes a gpt-6.2-sol reply with the effort its configuration_update asked for
    (`providerThinkingLevel`) and sends it back before that reply; pi-lsp wrote none, so the
    next request lost each reply's effort (no configuration_update before it)."""
    agent_dir = tmp_path / "agent"
    openai_to(oai, agent_dir)
    oai.script(responses_reply("one", reasoning="r"), responses_reply("two"))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = {**only_openai_key(), "PI_CODING_AGENT_DIR": str(agent_dir)}
    first = run_cli("run", "--new", "--thinking", "high", "hello", cwd=workspace, env=env)
    assert first.returncode == 0, first.stderr
    [session] = (workspace / ".pi" / "sessions").glob("*.jsonl")
    again = run_cli("run", "--session", str(session), "--thinking", "low", "again",
                    cwd=workspace, env=env)
    assert again.returncode == 0, again.stderr
    replies = [entry["message"] for line in session.read_text("utf-8").splitlines()
               if (entry := json.loads(line)).get("message", {}).get("role") == "assistant"]
    assert [reply.get("providerThinkingLevel") for reply in replies] == ["high", "low"]
    updates = [item["reasoning"]["effort"] for item in oai.responses_requests()[1]["input"]
               if item.get("type") == "configuration_update"]
    assert updates == ["high", "low"]


async def test_the_server_lists_the_models_with_a_key_as_pi_does(tmp_path: Path) -> None:
    """pi.listModels listed all 65 built-in models with only OPENAI_API_KEY set, so an
    editor's picker offered Claude models whose turns fail at once; pi 1.6's model selector
    lists those with a key (getAvailable), the default first. A local server's models
    (models.json, its own apiKey) are listed too."""
    agent_dir = tmp_path / "agent"
    write(agent_dir / "models.json", {"providers": {"ollama": {
        "baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions", "apiKey": "ollama",
        "models": [{"id": LOCAL_MODEL}]}}})
    (tmp_path / "ws").mkdir()
    env = {"OPENAI_API_KEY": "test", "PI_CODING_AGENT_DIR": str(agent_dir)}
    async with own_server(env) as client:
        await connect(client, "visual-studio-code", tmp_path, {}, folders=("ws",))
        listed = await call(client, "pi.listModels", {})
    providers = [m["provider"] for m in listed["models"]]
    assert listed["default"] == "openai/gpt-6.2-sol"
    assert "/".join((listed["models"][0]["provider"], listed["models"][0]["id"])) == \
        listed["default"]
    assert set(providers) == {"openai", "ollama"} and providers.count("openai") == 47


def test_a_command_key_counts_without_running_for_the_list_and_the_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Listing models and choosing the first one ran every `!command` key (a password manager
    asked for a provider not in use), and a command that failed hid its provider though
    ANTHROPIC_API_KEY was set; pi 1.6's availability check counts such a key without running it."""
    for name in KEYS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    ran = tmp_path / "ran"
    write(agent() / "auth.json", {"openai": {"type": "api_key", "key": f"!touch {ran}; echo k"}})
    write(agent() / "models.json", {"providers": {"anthropic": {"apiKey": f"!touch {ran}; false"}}})
    settings = load_settings(tmp_path, project=False)
    providers = {model.provider for model in settings.available_models()}
    assert providers == {"anthropic", "openai"}
    assert settings.initial_model() == ("anthropic", "claude-opus-5-5")
    assert not ran.exists()
