"""pi's auth.json (the keys a user saved with pi's /login): read as pi 1.6 reads it, for the
model a session starts on and for the key sent, and never written."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from pi_lsp.providers import key_commands
from pi_lsp.providers.base import MissingApiKeyError
from pi_lsp.providers.factory import provider_factory
from pi_lsp.settings import SettingsError, load_settings
from tests.conftest import ROOT
from tests.fake_anthropic import FakeAnthropic, text_reply
from tests.test_server import call, call_error, connect, own_server, wait_events
from tests.waits import run_cli

SAVED = "sk-ant-saved-0123456789"  # never in any message


def agent() -> Path:
    return Path(os.environ["PI_CODING_AGENT_DIR"])  # each test's own (conftest.own_agent_dir)


def save(credentials: Any, raw: str | None = None) -> Path:
    """`credentials` written as pi's /login writes auth.json (or `raw` as it is)."""
    path = agent() / "auth.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(raw if raw is not None else json.dumps(credentials, indent=2), "utf-8")
    return path


@pytest.fixture(autouse=True)
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """No key from the environment but what a test sets; commands' outputs not remembered."""
    for name in [n for n in os.environ if n.startswith(("ANTHROPIC_", "OPENAI_"))]:
        monkeypatch.delenv(name)
    key_commands.forget_outputs()


def test_a_key_saved_with_pi_login_chooses_the_initial_model(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pi 1.6 with an Anthropic key in auth.json and OPENAI_API_KEY set starts on
    anthropic/claude-opus-5-5; pi-lsp started on openai/gpt-6.2-sol."""
    save({"anthropic": {"type": "api_key", "key": SAVED}})
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    settings = load_settings(tmp_path, project=False)
    assert settings.initial_model() == ("anthropic", "claude-opus-5-5")
    assert settings.api_key("anthropic") == SAVED


@pytest.mark.parametrize(("stored", "environment", "sent"), [
    # A stored key owns the provider (pi-ai's resolveProviderAuth): before the environment.
    ({"type": "api_key", "key": SAVED}, {"ANTHROPIC_API_KEY": "env"}, SAVED),
    # pi's templates: the credential's own `env` first, then the environment.
    ({"type": "api_key", "key": "$MY_KEY"}, {"MY_KEY": "from-env"}, "from-env"),
    ({"type": "api_key", "key": "${MY_KEY}-x", "env": {"MY_KEY": "own"}}, {"MY_KEY": "e"},
     "own-x"),
    ({"type": "api_key", "key": "a$$b$!c"}, {}, "a$b!c"),
    ({"type": "api_key", "key": "ANTHROPIC_API_KEY"}, {"ANTHROPIC_API_KEY": "env"},
     "ANTHROPIC_API_KEY"),
    # A key that resolves to nothing (unset variable, empty, none) leaves the environment's.
    ({"type": "api_key", "key": "$UNSET_VARIABLE"}, {"ANTHROPIC_API_KEY": "env"}, "env"),
    ({"type": "api_key", "key": ""}, {"ANTHROPIC_API_KEY": "env"}, "env"),
    ({"type": "api_key"}, {"ANTHROPIC_API_KEY": "env"}, "env"),
    ({"type": "api_key", "key": "$UNSET_VARIABLE"}, {}, None),
])
def test_a_saved_key_is_read_as_pi_reads_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stored: dict[str, Any],
        environment: dict[str, str], sent: str | None) -> None:
    save({"anthropic": stored})
    monkeypatch.delenv("MY_KEY", raising=False)
    monkeypatch.delenv("UNSET_VARIABLE", raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert load_settings(tmp_path, project=False).api_key("anthropic") == sent


def test_a_saved_key_comes_before_settings_and_models_json(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pi: a stored credential before models.json's apiKey; settings' `apiKeys` (pi-lsp's own)
    come after the environment, so after auth.json too."""
    save({"anthropic": {"type": "api_key", "key": SAVED},
          "ollama": {"type": "api_key", "key": "saved-ollama"}})
    (agent() / "settings.json").write_text(json.dumps({"apiKeys": {"anthropic": "setting"}}))
    (agent() / "models.json").write_text(json.dumps({"providers": {"ollama": {
        "baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions", "apiKey": "file",
        "models": [{"id": "m"}]}}}))
    settings = load_settings(tmp_path, project=False)
    assert settings.api_key("anthropic") == SAVED
    made = provider_factory(settings.registry(), settings.api_key)("ollama")
    assert made.clients["openai-completions"].api_key == "saved-ollama"  # type: ignore[attr-defined]


def test_a_saved_key_is_not_sent_where_a_project_file_reroutes_its_provider(
        tmp_path: Path) -> None:
    """As with your environment's keys: a trusted project's models.json that moves anthropic
    elsewhere gets no key of yours."""
    save({"anthropic": {"type": "api_key", "key": SAVED}})
    project = tmp_path / "ws"
    (project / ".pi").mkdir(parents=True)
    (project / ".pi" / "models.json").write_text(json.dumps(
        {"providers": {"anthropic": {"baseUrl": "http://127.0.0.1:9"}}}))
    settings = load_settings(project, project=True)
    with pytest.raises(Exception) as refused:
        provider_factory(settings.registry(), settings.api_key)("anthropic")
    assert "your own API key is not sent there" in str(refused.value)


def test_a_key_that_is_a_command_runs_it_once_as_pi_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pi runs a `!command` key in your own auth.json (its docs' secret-manager recipe) once
    per process, its output trimmed; pi-lsp runs it too: the file is yours, never a
    project's."""
    runs = tmp_path / "runs"
    save({"anthropic": {"type": "api_key", "key": f"!echo x >> {runs}; printf ' {SAVED}\\n'"},
          "openai": {"type": "api_key", "key": "!exit 3"}})
    monkeypatch.setenv("OPENAI_API_KEY", "env")
    settings = load_settings(tmp_path, project=False)
    assert settings.api_key("anthropic") == SAVED
    assert settings.api_key("anthropic") == SAVED
    assert runs.read_text() == "x\n"
    # A command that fails leaves the key unresolved: the environment's is used, as in pi.
    assert settings.api_key("openai") == "env"


def test_a_key_command_runs_in_pis_folder_not_the_workspace(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative command (`!./key.sh`) ran in the server's folder, the workspace: a cloned
    repository's key.sh ran there. It runs in pi's own folder, where auth.json is."""
    workspace = tmp_path / "repo"
    workspace.mkdir()
    save({"anthropic": {"type": "api_key", "key": "!./key.sh"}})
    for folder, key in ((workspace, "from-the-repo"), (agent(), SAVED)):
        script = folder / "key.sh"
        script.write_text(f"#!/bin/sh\necho {key}\n")
        script.chmod(0o755)
    monkeypatch.chdir(workspace)
    assert load_settings(workspace, project=False).api_key("anthropic") == SAVED


def test_an_oauth_login_is_not_a_key_pi_lsp_can_use(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pi-lsp cannot refresh or send pi's OAuth logins: such a provider has no key here, and
    the error says why, naming no token."""
    save({"anthropic": {"type": "oauth", "access": "sk-ant-oat-SECRET", "refresh": "r-SECRET",
                        "expires": 1}})
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    settings = load_settings(tmp_path, project=False)
    assert settings.initial_model() == ("openai", "gpt-6.2-sol")
    with pytest.raises(MissingApiKeyError) as missing:
        provider_factory(settings.registry(), settings.api_key,
                         oauth_login=settings.oauth_login)("anthropic")
    message = str(missing.value)
    assert "OAuth login for anthropic" in message and "ANTHROPIC_API_KEY" in message
    assert "SECRET" not in message
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env")
    assert load_settings(tmp_path, project=False).api_key("anthropic") == "env"


@pytest.mark.parametrize(("raw", "fault"), [
    ('{"anthropic": {"type": "api_key", "key": "' + SAVED, "cannot read"),
    ("[" * 100_000 + "]" * 100_000, "cannot read"),
])
def test_a_broken_auth_json_is_an_error_naming_it(tmp_path: Path, raw: str, fault: str) -> None:
    """pi 1.6 refuses an auth.json that is not JSON; pi-lsp says so, naming the file, never
    the value."""
    path = save(None, raw)
    with pytest.raises(SettingsError) as refused:
        load_settings(tmp_path, project=False)
    message = str(refused.value)
    assert str(path) in message and fault in message, message
    assert SAVED not in message and "\n" not in message


@pytest.mark.parametrize("raw", [
    "",
    "[]",
    '{"anthropic": null}',
    '{"anthropic": "' + SAVED + '"}',
    '{"anthropic": {"type": "api_key", "key": ["' + SAVED + '"]}}',
    '{"anthropic": {"type": "api_key", "key": "k", "env": {"A": ["' + SAVED + '"]}}}',
    '{"anthropic": {"type": "api_key", "key": "k", "env": ["' + SAVED + '"]}}',
    '{"anthropic": {"type": "oauth", "access": "' + SAVED + '"}}',
    '{"anthropic": {"type": "bearer", "token": "' + SAVED + '"}}',
])
def test_what_auth_json_holds_that_pi_lsp_cannot_use_is_passed_over(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    """pi 1.6's AuthStorage reads an empty file or a value that is no object as no
    credentials and uses no entry it cannot; pi-lsp refused the whole file, so a working
    ANTHROPIC_API_KEY or OPENAI_API_KEY was refused too (run, pi.listModels, pi.newSession)."""
    save(None, raw)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env")
    assert load_settings(tmp_path, project=False).api_key("anthropic") == "env"


def test_an_auth_json_that_is_not_a_file_is_an_error(tmp_path: Path) -> None:
    path = agent() / "auth.json"
    path.parent.mkdir(parents=True)
    os.mkfifo(path)  # read, it would wait for a writer forever
    with pytest.raises(SettingsError, match=r"auth\.json"):
        load_settings(tmp_path, project=False)


def env_with(agent_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    return {**env, "PI_CODING_AGENT_DIR": str(agent_dir), **extra,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def test_run_sends_the_saved_key(fake: FakeAnthropic, tmp_path: Path) -> None:
    """With only auth.json pi runs and pi-lsp refused ("no Anthropic API key"); auth.json is
    read, never written."""
    path = save({"anthropic": {"type": "api_key", "key": SAVED}})
    before = path.read_bytes(), path.stat().st_mtime_ns
    fake.script(text_reply("hi"))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = env_with(agent(), ANTHROPIC_BASE_URL=fake.url)
    result = run_cli("run", "--new", "hello", cwd=workspace, env=env)
    assert result.returncode == 0, result.stderr
    [request] = fake.requests
    assert request.headers["x-api-key"] == SAVED
    assert request.body["model"] == "claude-opus-5-5"
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before


def test_run_names_an_oauth_login_and_a_broken_file(tmp_path: Path) -> None:
    save({"anthropic": {"type": "oauth", "access": SAVED, "refresh": SAVED, "expires": 1}})
    workspace = tmp_path / "ws"
    workspace.mkdir()
    result = run_cli("run", "--new", "hello", cwd=workspace, env=env_with(agent()))
    assert result.returncode == 2, result.stderr
    assert "OAuth login for anthropic" in result.stderr, result.stderr
    assert SAVED not in result.stderr + result.stdout
    path = save(None, '{"anthropic": {"type": "api_key", "key": 5')  # not JSON
    result = run_cli("run", "--new", "hello", cwd=workspace, env=env_with(agent()))
    assert result.returncode == 2, result.stderr
    assert str(path) in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert not (agent() / "auth.json.lock").exists()


async def test_the_server_starts_on_and_sends_the_saved_key(
        fake: FakeAnthropic, tmp_path: Path) -> None:
    save({"anthropic": {"type": "api_key", "key": SAVED}})
    (tmp_path / "ws").mkdir()
    env = {"OPENAI_API_KEY": "k", "ANTHROPIC_BASE_URL": fake.url,
           "PI_CODING_AGENT_DIR": str(agent())}
    async with own_server(env) as client:
        pi = await connect(client, "visual-studio-code", tmp_path, {}, folders=("ws",))
        listed = await call(client, "pi.listModels", {})
        assert listed["default"] == "anthropic/claude-opus-5-5"
        uri = (await call(client, "pi.newSession", {}))["uri"]
        fake.script(text_reply("hi"))
        since = pi.mark()
        turn_id = (await call(client, "pi.prompt", {"uri": uri, "text": "hello"}))["turnId"]
        events = await wait_events(pi, turn_id, since)
        assert "error" not in [event["type"] for event in events], events
        assert [r.headers["x-api-key"] for r in fake.requests] == [SAVED]


def test_variables_a_saved_key_names_are_left_out_of_bash(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A key saved as `$MY_SECRET` makes MY_SECRET a key: bash's commands (a repository's
    `npm test`) must not find it, as they do not find those models.json names."""
    save({"anthropic": {"type": "api_key", "key": "${MY_SECRET}"},
          "lab": {"type": "api_key", "key": "x-$LAB_TOKEN", "env": {"LAB_TOKEN": "own"}}})
    variables = load_settings(tmp_path, project=False).registry().key_variables()
    assert {"MY_SECRET", "LAB_TOKEN", "ANTHROPIC_API_KEY"} <= variables


async def test_the_server_names_a_broken_auth_json(tmp_path: Path) -> None:
    path = save(None, '{"anthropic": {"type": "api_key", "key": "' + SAVED)  # not JSON
    (tmp_path / "ws").mkdir()
    async with own_server({"PI_CODING_AGENT_DIR": str(agent())}) as client:
        await connect(client, "visual-studio-code", tmp_path, {}, folders=("ws",))
        error = await call_error(client, "pi.newSession", {})
        assert str(path) in str(error) and "cannot read" in str(error), error
        assert SAVED not in str(error) and "Traceback" not in str(error)
        assert client._server is not None and client._server.returncode is None


def models_json(folder: Path, api_key: str) -> None:
    (folder / "models.json").parent.mkdir(parents=True, exist_ok=True)
    (folder / "models.json").write_text(json.dumps({"providers": {"lab": {
        "baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions", "apiKey": api_key,
        "models": [{"id": "m"}]}}}))


def test_your_own_models_json_key_command_runs_as_auth_jsons_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A `!command` apiKey in ~/.pi/agent/models.json (your file, as auth.json is) was refused
    where pi 1.6 runs it; it runs, once, in pi's folder (a repository's key.sh is not found),
    and one that fails names the command."""
    workspace = tmp_path / "repo"
    workspace.mkdir()
    agent().mkdir(parents=True, exist_ok=True)
    for folder, key in ((workspace, "from-the-repo"), (agent(), SAVED)):
        script = folder / "key.sh"
        script.write_text(f"#!/bin/sh\necho x >> {tmp_path / 'runs'}\necho {key}\n")
        script.chmod(0o755)
    monkeypatch.chdir(workspace)
    models_json(agent(), "!./key.sh")
    settings = load_settings(workspace, project=False)
    made = provider_factory(settings.registry(), settings.api_key)
    assert made("lab").clients["openai-completions"].api_key == SAVED  # type: ignore[attr-defined]
    made("lab")
    assert (tmp_path / "runs").read_text() == "x\n"
    models_json(agent(), "!exit 3")
    settings = load_settings(workspace, project=False)
    with pytest.raises(ValueError, match=r"providers\.lab\.apiKey: the command 'exit 3' failed"):
        provider_factory(settings.registry(), settings.api_key)("lab")


@pytest.mark.parametrize("inside_pis_folder", [False, True])
def test_a_projects_models_json_key_command_never_runs(
        tmp_path: Path, inside_pis_folder: bool) -> None:
    """Anything a repository can commit (its .pi/models.json) never runs a command, trusted or
    not, even a repository opened inside pi's own folder (pi installs git packages under
    ~/.pi/agent/git/): the same key_commands.may_run says yes only to pi's own two files."""
    workspace = (agent() / "git" / "github.com" / "someone" if inside_pis_folder
                 else tmp_path) / "repo"
    ran = tmp_path / "ran"
    models_json(workspace / ".pi", f"!touch {ran}; echo key")
    settings = load_settings(workspace, project=True)
    with pytest.raises(ValueError, match=r"providers\.lab\.apiKey: shell commands"):
        provider_factory(settings.registry(), settings.api_key)("lab")
    assert not ran.exists()
    assert key_commands.may_run(agent() / "models.json")
    assert key_commands.may_run(agent() / "auth.json")
    assert not key_commands.may_run(agent() / "settings.json")
    assert not key_commands.may_run(workspace / ".pi" / "models.json")


@pytest.mark.parametrize(("saved", "environment", "sent"), [
    # pi 1.6 (provider-composer's resolve): a stored key, else models.json's, else the
    # environment's; pi-lsp sent the environment's before your models.json's.
    (None, {"ANTHROPIC_API_KEY": "env"}, "from-models-json"),
    ({"type": "api_key", "key": SAVED}, {"ANTHROPIC_API_KEY": "env"}, SAVED),
])
def test_your_models_json_key_comes_before_the_environment_as_in_pi(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, saved: dict[str, str] | None,
        environment: dict[str, str], sent: str) -> None:
    if saved is not None:
        save({"anthropic": saved})
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    agent().mkdir(parents=True, exist_ok=True)
    (agent() / "models.json").write_text(json.dumps({"providers": {"anthropic": {
        "apiKey": "from-models-json"}}}))
    (agent() / "settings.json").write_text(json.dumps({"apiKeys": {"anthropic": "settings"}}))
    settings = load_settings(tmp_path, project=False)
    assert settings.api_key("anthropic") == sent
    made = provider_factory(settings.registry(), settings.api_key)("anthropic")
    assert made.client.api_key == sent  # type: ignore[attr-defined]


def test_a_projects_models_json_key_does_not_replace_yours(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pi reads no project models.json: a trusted project's apiKey for a provider it leaves
    where it is still comes after your own keys (a repository does not swap your key for its
    own)."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env")
    (tmp_path / ".pi").mkdir()
    (tmp_path / ".pi" / "models.json").write_text(json.dumps({"providers": {"anthropic": {
        "apiKey": "the-projects"}}}))
    settings = load_settings(tmp_path, project=True)
    made = provider_factory(settings.registry(), settings.api_key)("anthropic")
    assert made.client.api_key == "env"  # type: ignore[attr-defined]


@pytest.mark.parametrize("where", ["auth.json", "models.json"])
def test_a_blank_saved_key_is_named_not_taken_for_a_missing_variable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """A saved key of only spaces or line breaks said "set OPENAI_API_KEY …" with the
    variable set: it owns the provider (pi sends it, and the server refuses it), so the
    error says the saved key is blank and names its file."""
    monkeypatch.setenv("OPENAI_API_KEY", "env")
    agent().mkdir(parents=True, exist_ok=True)
    if where == "auth.json":
        path = save({"openai": {"type": "api_key", "key": " \n"}})
    else:
        path = agent() / "models.json"
        path.write_text(json.dumps({"providers": {"openai": {"apiKey": "  "}}}))
    settings = load_settings(tmp_path, project=False)
    assert settings.initial_model() == ("openai", "gpt-6.2-sol")  # a key is set, as in pi
    with pytest.raises(MissingApiKeyError) as blank:
        provider_factory(settings.registry(), settings.api_key)("openai")
    message = str(blank.value)
    assert str(path) in message and "blank" in message and "set OPENAI_API_KEY" not in message


@pytest.mark.parametrize("broken", [
    {"apiKey": "!exit 3"}, {"headers": {"x-gw": "!exit 3"}}, {"apiKey": "$UNSET_SUMMARY_VAR"}])
async def test_a_summary_model_whose_key_cannot_be_read_is_an_error(
        tmp_path: Path, broken: dict[str, Any]) -> None:
    """A summary model whose provider's key or header cannot be read (a failed command, an
    unset variable) fails the summary naming it and the setting, as the same provider fails a
    turn; it was taken as no summary model and summarized extractively."""
    from pi_lsp.session.entries import UserMessage
    from pi_lsp.summarize.select import ChosenSummarizer, choose_summarizer
    from pi_lsp.summarize.summarizer import SummaryError, SummaryRequest

    (agent() / "models.json").parent.mkdir(parents=True, exist_ok=True)
    (agent() / "models.json").write_text(json.dumps({"providers": {"lab": {
        "baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions", "apiKey": "k",
        "models": [{"id": "m"}], **broken}}}))
    (agent() / "settings.json").write_text(json.dumps({"summaryModel": "lab/m"}))
    settings = load_settings(tmp_path, project=False)
    chosen = ChosenSummarizer(lambda: choose_summarizer(settings))
    with pytest.raises(SummaryError,
                       match=r"^summaryModel lab/m: .*providers\.lab\.(apiKey|headers\.x-gw)"):
        await chosen.summarize(SummaryRequest(
            "history", [UserMessage(content="build the thing", timestamp=1)]))


def test_compact_names_a_summary_model_key_that_cannot_be_read(
        tmp_path: Path, example_session: Path) -> None:
    """`pi-lsp compact` with such a summary model says what is wrong in one line; it printed
    "internal error (ModelsFileError …)"."""
    session = Path(shutil.copy(example_session, tmp_path))
    agent().mkdir(parents=True, exist_ok=True)
    (agent() / "models.json").write_text(json.dumps({"providers": {"lab": {
        "baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions", "apiKey": "!exit 3",
        "models": [{"id": "m"}]}}}))
    (agent() / "settings.json").write_text(json.dumps({"summaryModel": "lab/m"}))
    for command in (["compact", str(session), "--keep-recent-tokens", "100"],
                    ["branch", str(session), "--to", "29ad348d", "--summarize"]):
        result = run_cli(*command)
        assert result.returncode == 2, result.stderr
        [line] = result.stderr.splitlines()
        assert line.startswith("pi-lsp: summaryModel lab/m: ") and "apiKey" in line, line
        assert "internal error" not in line
    assert session.read_bytes() == example_session.read_bytes()


def test_a_trusted_project_redirecting_the_summary_provider_summarizes_offline(
        tmp_path: Path) -> None:
    """A trusted project that sends anthropic to its gateway without a key of its own leaves
    the default summary model with no key it may use: summaries are extractive, as without a
    key, not a failed compaction (the review of 200ab5d found every compaction failing)."""
    from pi_lsp.summarize.select import choose_summarizer

    workspace = tmp_path / "repo"
    (workspace / ".pi").mkdir(parents=True)
    (workspace / ".pi" / "models.json").write_text(json.dumps({"providers": {"anthropic": {
        "baseUrl": "https://gateway.example.com"}}}))
    assert choose_summarizer(load_settings(workspace, project=True)).extractive


def test_a_model_pattern_passes_over_a_provider_whose_key_command_fails(tmp_path: Path) -> None:
    """`run --model opus`: pi 1.6 runs auth.json's `!command` keys while it resolves the pattern
    and takes a provider whose command fails as one without a key, so a provider with a key
    is chosen, not one that then fails for want of a key."""
    from pi_lsp.agent.headless import RunOptions, read_model_flag

    save({"anthropic": {"type": "api_key", "key": "!exit 3"}})
    (agent() / "models.json").write_text(json.dumps({"providers": {"lab": {
        "baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions", "apiKey": "k",
        "models": [{"id": "a-opus-lab"}]}}}))
    settings = load_settings(tmp_path, project=False)
    assert read_model_flag(RunOptions("hi", model="opus"), settings).model == "lab/a-opus-lab"


def test_a_model_pattern_passes_over_a_provider_whose_key_variable_is_unset(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`run --model opus`: pi 1.6 takes a models.json key naming an unset variable as no key,
    so the pattern goes to a provider with one; pi-lsp chose the unset one and failed."""
    from pi_lsp.agent.headless import RunOptions, read_model_flag

    monkeypatch.delenv("UNSET_PATTERN_KEY", raising=False)
    agent().mkdir(parents=True, exist_ok=True)
    (agent() / "models.json").write_text(json.dumps({"providers": {
        "lab": {"baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions", "apiKey": "k",
                "models": [{"id": "a-opus-lab"}]},
        "lab2": {"baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions",
                 "apiKey": "$UNSET_PATTERN_KEY", "models": [{"id": "b-opus-lab2"}]}}}))
    settings = load_settings(tmp_path, project=False)
    assert read_model_flag(RunOptions("hi", model="opus"), settings).model == "lab/a-opus-lab"
    monkeypatch.setenv("UNSET_PATTERN_KEY", "k2")  # with both keys pi takes lab2, and so do we
    settings = load_settings(tmp_path, project=False)
    assert read_model_flag(RunOptions("hi", model="opus"), settings).model == "lab2/b-opus-lab2"
