"""`pi-lsp serve` end to end: a real server process over stdio, driven as Neovim 0.11 and VS Code.

Every module-scoped test runs once per client capability set. Each set gets its own copy of the
example workspace, in two workspace folders: `main` (summaries by the configured summary model,
reached through `anthropicBaseUrl`) and `offline` (its settings turn the summary model off, so
summaries are extractive). Model turns go to a fake Anthropic server speaking real HTTP.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from PIL import Image
from pygls.exceptions import JsonRpcException
from pygls.uris import to_fs_path
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from pi_lsp.server.caps import ID_CHARS, LABEL_CHARS, NAME_CHARS, PATH_CHARS, TIMESTAMP_CHARS
from pi_lsp.server.config import read_config
from pi_lsp.server.watcher import SessionWatch
from pi_lsp.session.entries import UserMessage
from pi_lsp.session.tree import SessionTree
from pi_lsp.summarize.branch import BRANCH_SUMMARY_PREAMBLE
from tests.conftest import trust
from tests.fake_anthropic import (
    FakeAnthropic,
    Reply,
    error_reply,
    message_end,
    message_start,
    text_block,
    text_reply,
    tool_reply,
)
from tests.fake_openai import MODEL as LOCAL_MODEL
from tests.fake_openai import FakeOpenAI, chat_reply
from tests.waits import CEILING_S, POLL_S, PROCESS_CEILING_S, gone, pid_in, until

pytestmark = pytest.mark.asyncio(loop_scope="module")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "workspace"
EXAMPLE_SESSION = next((EXAMPLE / ".pi" / "sessions").glob("*.jsonl"))
EVERY_TYPE = ROOT / "tests" / "fixtures" / "every-type.jsonl"  # one entry of every type
MAIN_ID = "5f0c2a9e-3b1d-4c7e-9a51-2d8e6f4b7c10"

FORK_QUESTION = "e1afef94"  # the user message where the ORM dead end starts
FORK_PARENT = "24652ae8"  # its parent: where both branches hang
DEAD_END_TIP = "2879d399"
BRANCH_B_TIP = "8fb6dff7"  # the session's leaf
COMPACTION = "a2b2d4fe"
BRANCH_SUMMARY = "18fc1fcb"
BRANCH_B_DONE = "b45d7b19"  # a leaf on branch B before the compaction: the summary is in context

CLIENTS = ["neovim@v0.11", "visual-studio-code"]
DEFAULT_MODEL = "claude-opus-5-5"  # pi 1.6's, where nothing names a model
SUMMARY_MODEL = "claude-haiku-4-5"

SESSIONS_CHANGED = "pi/sessionsChanged"
SESSION_CHANGED = "pi/sessionChanged"
TURN = "pi/turn"
JOB_DONE = "pi/jobDone"
NOTIFICATIONS = (SESSIONS_CHANGED, SESSION_CHANGED, TURN, JOB_DONE)
INVALID_PARAMS = -32602
BUSY = -32010
FAILED = -32011

COMMANDS = {
    "pi.listSessions", "pi.newSession", "pi.getTree", "pi.previewContext", "pi.diffContext",
    "pi.branch", "pi.branchWithSummary", "pi.compact", "pi.label", "pi.fork", "pi.setName",
    "pi.setModel", "pi.setThinkingLevel", "pi.prompt", "pi.prepareTurn", "pi.abort", "pi.check",
    "pi.editContext", "pi.undoContextEdit",
}

# The server never reads the real ~/.pi: its agent directory is an empty temporary one.
AGENT_DIR = tempfile.TemporaryDirectory(prefix="pi-lsp-agent-")
SERVER_ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))},
    "PI_CODING_AGENT_DIR": AGENT_DIR.name,
    "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
}
SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "pi_lsp.cli", "serve"],
                            server_env=SERVER_ENV)


# -- the client side -------------------------------------------------------------------------


def plain(value: Any) -> Any:
    """pygls hands custom notification params over as namedtuples; make them JSON again."""
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return {key: plain(item) for key, item in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return value


@dataclass
class Pi:
    """One connected server, what it sent us, and where its workspace is."""

    client: LanguageClient
    capabilities: str
    root: Path
    notes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)
    answer: str = "Allow"  # the answer to tool approval requests
    init: types.InitializeResult | None = None

    @property
    def main(self) -> Path:
        return self.root / "main"

    @property
    def offline(self) -> Path:
        return self.root / "offline"

    @property
    def session(self) -> Path:
        return self.main / ".pi" / "sessions" / EXAMPLE_SESSION.name

    @property
    def uri(self) -> str:
        return self.session.as_uri()

    def mark(self) -> int:
        return len(self.notes)

    def of(self, method: str, since: int = 0) -> list[dict[str, Any]]:
        return [params for m, params in self.notes[since:] if m == method]


def make_workspace(root: Path) -> Path:
    """Two folders holding the example session; `offline` summarizes without a model."""
    for name, settings in (
        ("main", {"compaction": {"keepRecentTokens": 500}}),
        ("offline", {"summaryModel": None, "compaction": {"keepRecentTokens": 500}}),
    ):
        folder = root / name
        shutil.copytree(EXAMPLE, folder)
        (folder / ".pi" / "settings.json").write_text(json.dumps(settings))
    trust(root, Path(AGENT_DIR.name))  # the folders' settings are loaded
    return root


def init_options(fake: FakeAnthropic, **extra: Any) -> dict[str, Any]:
    return {"anthropicBaseUrl": fake.url, "anthropicApiKey": "test", "toolApproval": "ask",
            **extra}


def recorder(pi: Pi, method: str) -> Callable[[Any], None]:
    def record(params: Any) -> None:
        pi.notes.append((method, plain(params) or {}))
    return record


@contextlib.asynccontextmanager
async def own_server(env: dict[str, str] | None = None, command: list[str] | None = None
                     ) -> AsyncIterator[LanguageClient]:
    """A server of its own for one test (`env` over SERVER_ENV; `command` for `pi-lsp serve`),
    stopped (killed if it is still running) at the end."""
    config = SERVER if env is None and command is None else ClientServerConfig(
        server_command=command or SERVER.server_command, server_env={**SERVER_ENV, **(env or {})})
    client = await config.start()
    try:
        yield client
    finally:
        if client._server is not None and client._server.returncode is None:
            client._server.kill()
        await client.stop()


async def connect(client: LanguageClient, capabilities: str, root: Path,
                  options: dict[str, Any], folders: tuple[str, ...] = ("main", "offline")) -> Pi:
    pi = Pi(client, capabilities, root)
    for method in NOTIFICATIONS:
        client.feature(method)(recorder(pi, method))

    @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
    def ask(params: types.ShowMessageRequestParams) -> types.MessageActionItem | None:
        pi.asked.append(params.message)
        return next((a for a in params.actions or [] if a.title == pi.answer), None)

    pi.init = await asyncio.wait_for(client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities(capabilities),
        root_uri=(root / folders[0]).as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=(root / f).as_uri(), name=f)
                           for f in folders],
        initialization_options=options,
    )), PROCESS_CEILING_S)
    await hub_ready(client)
    return pi


async def hub_ready(client: LanguageClient) -> None:
    """`initialized` is a notification: wait until the server has built its hub."""
    deadline = time.monotonic() + CEILING_S
    while True:
        try:
            await call(client, "pi.listSessions", {})
            return
        except JsonRpcException:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(POLL_S)



@pytest_lsp.fixture(scope="module", params=CLIENTS, config=SERVER)
async def client(request: pytest.FixtureRequest, lsp_client: LanguageClient,
                 tmp_path_factory: pytest.TempPathFactory, fake: FakeAnthropic) -> Any:
    root = make_workspace(tmp_path_factory.mktemp("workspace"))
    lsp_client.pi = await connect(lsp_client, request.param, root,  # type: ignore[attr-defined]
                                  init_options(fake))
    yield
    await asyncio.wait_for(lsp_client.shutdown_session(), CEILING_S)


@pytest.fixture(scope="module")
def pi(client: LanguageClient) -> Pi:
    return client.pi  # type: ignore[attr-defined,no-any-return]


# -- helpers ---------------------------------------------------------------------------------


async def call(client: LanguageClient, command: str, *arguments: Any) -> Any:
    return await asyncio.wait_for(client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=command, arguments=list(arguments))), CEILING_S)


async def call_error(client: LanguageClient, command: str, *arguments: Any) -> JsonRpcException:
    with pytest.raises(JsonRpcException) as info:
        await call(client, command, *arguments)
    return info.value


async def wait_note(pi: Pi, method: str, match: Callable[[dict[str, Any]], bool] = lambda _: True,
                    since: int = 0) -> dict[str, Any]:
    deadline = time.monotonic() + CEILING_S
    while True:
        for params in pi.of(method, since):
            if match(params):
                return params
        if time.monotonic() > deadline:
            raise AssertionError(f"no matching {method} within {CEILING_S} s; "
                                 f"got {pi.of(method, since)!r}"[:3000])
        await asyncio.sleep(POLL_S)


async def caught_up(pi: Pi) -> None:
    """Return once the server has handled every message it had before this one, and so sent
    whatever it does then (what a turn does after its last event, say): it answers in order."""
    await call(pi.client, "pi.listModels", {})


async def wait_events(pi: Pi, turn_id: str, since: int) -> list[dict[str, Any]]:
    """A turn's events, once it has ended (agent_end) or failed (error)."""
    await wait_note(pi, TURN, lambda p: p["turnId"] == turn_id and
                    p["event"]["type"] in ("agent_end", "error"), since)
    await caught_up(pi)  # the turn writes what it queued and ends its progress right after
    return [p["event"] for p in pi.of(TURN, since) if p["turnId"] == turn_id]


async def wait_event(pi: Pi, turn_id: str, kind: str, since: int) -> dict[str, Any]:
    note = await wait_note(pi, TURN, lambda p: p["turnId"] == turn_id and
                           p["event"]["type"] == kind, since)
    return note["event"]  # type: ignore[no-any-return]


async def watcher_caught_up(pi: Pi) -> None:
    """Return once the server's watcher has handled every change made to session files before:
    it sees another writer's append to a session it holds after them. The append is repeated
    until seen, in case the watch had not begun (a server just started)."""
    path = pi.main / ".pi" / "sessions" / "barrier.jsonl"
    if not path.exists():
        shutil.copyfile(EXAMPLE_SESSION, path)
    count = len((await call(pi.client, "pi.getTree", {"uri": path.as_uri()}))["nodes"])
    since = pi.mark()
    deadline = time.monotonic() + CEILING_S
    while not any(path_of(p["uri"]) == path.resolve() and p["entries"] > count
                  for p in pi.of(SESSION_CHANGED, since)):
        assert time.monotonic() < deadline, "the watcher never saw an append"
        SessionTree.open(str(path)).append_custom("barrier")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wait_note(pi, SESSION_CHANGED, lambda p: path_of(p["uri"]) ==
                                             path.resolve(), since), 1)
    await caught_up(pi)  # the rest of the watcher's batch


def path_of(uri: str) -> Path:
    path = to_fs_path(uri)
    assert path is not None, uri
    return Path(path).resolve()


def lines(path: Path) -> list[dict[str, Any]]:
    """The session's entries (the header left out)."""
    return [json.loads(line) for line in path.read_text().splitlines()[1:] if line.strip()]


def copy_session(folder: Path, name: str) -> str:
    """A copy of the example session (both branches) in `folder`; its uri."""
    target = folder / ".pi" / "sessions" / f"{name}.jsonl"
    shutil.copyfile(EXAMPLE_SESSION, target)
    return target.as_uri()


async def fork(pi: Pi, leaf_id: str | None = None) -> str:
    argument = {"uri": pi.uri} if leaf_id is None else {"uri": pi.uri, "leafId": leaf_id}
    return (await call(pi.client, "pi.fork", argument))["uri"]  # type: ignore[no-any-return]


async def new_session(pi: Pi, name: str | None = None) -> str:
    result = await call(pi.client, "pi.newSession", {"name": name} if name else {})
    return result["uri"]  # type: ignore[no-any-return]


def event_types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def is_subsequence(expected: list[str], actual: list[str]) -> bool:
    rest = iter(actual)
    return all(any(item == kind for item in rest) for kind in expected)


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [block for message in body["messages"] if isinstance(message["content"], list)
            for block in message["content"] if block.get("type") == "tool_result"]


def message_roles(path: Path) -> list[str]:
    return [e["message"]["role"] for e in lines(path) if e["type"] == "message"]


def slow_text(words: int = 40, delay: float = 0.05) -> Reply:
    return text_reply(*(f"word{i} " for i in range(words)), delay=delay)


def held_text(release: Path, words: int = 20) -> Reply:
    """A reply held after its first word until `release` exists: what a test does during the
    turn happens during it, however busy the machine (a guessed pace let the turn end first)."""
    reply = text_reply(*(f"word{i} " for i in range(words)))
    reply.held_until, reply.held_after = release, 3  # start, block, word0
    return reply


# -- lifecycle and listing -------------------------------------------------------------------


async def test_initialize_advertises_every_command(pi: Pi) -> None:
    assert pi.init is not None
    provider = pi.init.capabilities.execute_command_provider
    assert provider is not None
    assert set(provider.commands) >= COMMANDS


# What the session side imports: the hub, the agent, its tools and providers, summarize, the
# file history, the settings files and the command modules.
SESSION_SIDE = ("pi_lsp.server.workbench", "pi_lsp.server.hub", "pi_lsp.server.commands.",
                "pi_lsp.server.approvals", "pi_lsp.agent.harness", "pi_lsp.agent.tools",
                "pi_lsp.providers.factory", "pi_lsp.summarize", "pi_lsp.files", "pi_lsp.settings",
                "watchfiles")


async def test_the_initialize_answer_waits_for_no_module_of_the_session_side() -> None:
    """Issue 19: `pi-lsp serve` answers `initialize` once pygls and its lifecycle are
    imported; the session side is imported at `initialized` (before, 0.1 s of pi-lsp's own
    modules came first)."""
    loaded = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", "import sys, pi_lsp.cli, pi_lsp.server.server; print(*sys.modules)"],
        env=SERVER_ENV, capture_output=True, text=True, check=True, timeout=PROCESS_CEILING_S)
    assert [name for name in loaded.stdout.split() if name.startswith(SESSION_SIDE)] == []


async def test_the_initialize_answer_names_every_command_there_is() -> None:
    from pi_lsp.server.commands import NAMES, entries, files, runs, sessions, workspace
    from pi_lsp.server.workbench import COMMANDS

    tables = (sessions.COMMANDS, entries.COMMANDS, files.COMMANDS, runs.COMMANDS,
              workspace.COMMANDS)
    # (a name in two tables would be kept once in COMMANDS: one handler silently lost)
    assert [command[0] for table in tables for command in table] == list(NAMES)
    assert tuple(COMMANDS) == NAMES


async def test_list_sessions(pi: Pi) -> None:
    result = await call(pi.client, "pi.listSessions", {})
    by_path = {path_of(s["uri"]): s for s in result["sessions"]}
    assert pi.session.resolve() in by_path, list(by_path)
    assert (pi.offline / ".pi" / "sessions" / EXAMPLE_SESSION.name).resolve() in by_path
    session = by_path[pi.session.resolve()]
    assert set(session) >= {"uri", "id", "name", "cwd", "created", "modified", "entryCount",
                            "firstMessage", "parentSession"}
    assert session["id"] == MAIN_ID
    assert session["name"] == "Fix slow order listing"
    assert session["title"] == "Fix slow order listing"
    assert session["entryCount"] == len(lines(pi.session))
    assert session["firstMessage"].startswith("GET /orders is really slow")
    assert session["parentSession"] is None
    assert isinstance(session["cwd"], str) and session["cwd"]
    assert session["created"] and session["modified"]
    # no argument at all is the same as {}
    assert len((await call(pi.client, "pi.listSessions"))["sessions"]) == len(result["sessions"])


@pytest.mark.parametrize(("folder", "refusal"), [
    ("extra\0", "a folder name with a NUL character"),
    ("extra\ud800", "a folder name with a lone surrogate, which no folder's name holds")])
async def test_a_nul_in_session_dirs_is_refused_by_name(pi: Pi, fake: FakeAnthropic, folder: str,
                                                        refusal: str) -> None:
    """A NUL in `sessionDirs` made every pi.listSessions and pi.previewContext answer -32011
    "embedded null byte", naming no setting (a lone surrogate: "UnicodeEncodeError"): that
    value is refused, named, and the rest work."""
    options = init_options(fake)
    pi.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"piLsp": {**options, "sessionDirs": [folder]}}))
    try:
        listed = (await call(pi.client, "pi.listSessions", {}))["sessions"]
        assert pi.session.resolve() in {path_of(s["uri"]) for s in listed}
        assert (await call(pi.client, "pi.previewContext", {"uri": pi.uri}))["messages"]
        assert any(f"`sessionDirs`: {refusal}" in m.message for m in pi.client.messages)
    finally:
        pi.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
            settings={"piLsp": options}))


async def test_a_lone_surrogate_in_a_setting_is_refused_by_name(pi: Pi,
                                                                fake: FakeAnthropic) -> None:
    """A lone surrogate in a literal setting or a key raised UnicodeEncodeError from msgspec:
    `initialize` answered -32603 with a traceback, a configuration change was dropped whole
    ("Error in server: UnicodeEncodeError"). Each is refused by name; the rest are taken."""
    options = init_options(fake)
    config, refused = read_config({"toolApproval": "\ud800", "\udc00": 1,
                                   "workspaceTrusted": False})
    assert config.workspace_trusted is False
    assert refused == ["`toolApproval`: Invalid enum value '\ufffd' - at `$.toolApproval` "
                       "(a lone surrogate, shown as U+FFFD)",
                       "`\udc00`: Object contains unknown field `\ufffd` "
                       "(a lone surrogate, shown as U+FFFD)"]
    pi.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"piLsp": {**options, "toolApproval": "\ud800"}}))
    try:
        assert (await call(pi.client, "pi.listSessions", {}))["sessions"]
        assert any("`toolApproval`: Invalid enum value" in m.message for m in pi.client.messages)
        assert not any("UnicodeEncodeError" in m.message for m in pi.client.messages)
    finally:
        pi.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
            settings={"piLsp": options}))


async def tree_nodes(pi: Pi, uri: str) -> list[dict[str, Any]]:
    return (await call(pi.client, "pi.getTree", {"uri": uri}))["nodes"]  # type: ignore[no-any-return]


async def test_new_session(pi: Pi) -> None:
    since = pi.mark()
    uri = await new_session(pi, "scratch")
    path = path_of(uri)
    assert not path.exists()  # as in pi, the file is written with the first prompt
    assert path.parent == (pi.main / ".pi" / "sessions").resolve()
    kinds = [n["type"] for n in await tree_nodes(pi, uri)]
    assert "model_change" in kinds and "session_info" in kinds
    settings = json.loads((pi.main / ".pi" / "settings.json").read_text("utf-8"))
    assert settings["sessionDir"] == ".pi/sessions"  # so `pi -c` finds it
    await wait_note(pi, SESSIONS_CHANGED, since=since)
    listed = (await call(pi.client, "pi.listSessions", {}))["sessions"]
    assert any(path_of(s["uri"]) == path and s["name"] == "scratch" for s in listed)


async def test_new_session_is_written_whole_at_its_first_reply(pi: Pi,
                                                              fake: FakeAnthropic) -> None:
    uri = await new_session(pi, "draft")
    path = path_of(uri)
    assert await call(pi.client, "pi.setName", {"uri": uri, "name": "final"}) == {"queued": False}
    preview = await call(pi.client, "pi.previewContext", {"uri": uri})
    assert preview["messages"] == [] and not path.exists()
    fake.script(text_reply("first reply"))
    since = pi.mark()
    turn_id = (await call(pi.client, "pi.prompt", {"uri": uri, "text": "hi"}))["turnId"]
    events = await wait_events(pi, turn_id, since)
    assert "error" not in event_types(events), events
    data = path.read_bytes()
    assert data.count(b'"type":"session"') == 1 and data.startswith(b'{"type":"session"')
    assert [e["type"] for e in lines(path)] == [
        "model_change", "thinking_level_change", "session_info", "session_info", "message",
        "message", "message"]  # the declared prompt and tools, the prompt, the reply
    assert [n["id"] for n in await tree_nodes(pi, uri)] == [e["id"] for e in lines(path)]
    listed = (await call(pi.client, "pi.listSessions", {}))["sessions"]
    assert [s["name"] for s in listed if path_of(s["uri"]) == path] == ["final"]


async def test_new_session_in_another_folder(pi: Pi) -> None:
    result = await call(pi.client, "pi.newSession", {"folderUri": pi.offline.as_uri()})
    assert path_of(result["uri"]).parent == (pi.offline / ".pi" / "sessions").resolve()


# -- reading: tree, context, diff, check ----------------------------------------------------


async def test_get_tree(pi: Pi) -> None:
    tree = await call(pi.client, "pi.getTree", {"uri": pi.uri})
    entries = lines(pi.session)
    assert tree["leafId"] == tree["leafRow"] == BRANCH_B_TIP
    assert tree["title"] == "Fix slow order listing"
    assert tree["entries"] == len(entries)
    # Every entry is a row (none is bookkeeping), in drawing order: the chain up to the fork
    # at one depth, then each branch one deeper, its first entry a head.
    assert sorted(n["id"] for n in tree["nodes"]) == sorted(e["id"] for e in entries)
    rows = [(n["id"], n["depth"], n["head"]) for n in tree["nodes"]]
    fork = [n["id"] for n in tree["nodes"]].index(FORK_PARENT)
    assert all(depth == 0 and not head for _id, depth, head in rows[:fork + 1])
    assert [row for row in rows if row[2]] == [(FORK_QUESTION, 1, True),
                                               (BRANCH_SUMMARY, 1, True)]
    assert rows[fork + 1] == (FORK_QUESTION, 1, True)
    assert all(depth == 1 for _id, depth, _head in rows[fork + 1:])
    assert rows[-1][0] == BRANCH_B_TIP
    nodes = {n["id"]: n for n in tree["nodes"]}
    assert isinstance(tree["version"], int)
    for node in tree["nodes"]:
        assert set(node) == {"id", "parentId", "depth", "head", "type", "role", "preview",
                             "label", "timestamp", "onPath", "hidden", "moreBranches",
                             "moreRows"}
    question = nodes[FORK_QUESTION]
    assert (question["type"], question["role"], question["parentId"]) == \
        ("message", "user", FORK_PARENT)
    assert question["preview"].startswith("OK, that makes sense")
    assert question["label"] == "data-layer-question"
    assert question["onPath"] is False
    assert nodes[COMPACTION]["type"] == "compaction" and nodes[COMPACTION]["onPath"] is True
    assert nodes[BRANCH_SUMMARY]["type"] == "branch_summary"
    assert nodes["c66a750f"]["label"] == "tests-green"
    assert nodes[entries[0]["id"]]["parentId"] is None
    assert all(n["timestamp"] for n in tree["nodes"])


async def test_tree_rows_for_every_entry_type(pi: Pi) -> None:
    """Usage records are never rows; leaf moves (`leaf`, custom `pi-lsp.leaf`) and context
    edits only when asked for; their children are lifted to the row above them."""
    target = pi.main / ".pi" / "sessions" / "every-type.jsonl"
    shutil.copyfile(EVERY_TYPE, target)
    tree = await call(pi.client, "pi.getTree", {"uri": target.as_uri()})
    rows = [(n["id"], n["depth"], n["head"]) for n in tree["nodes"]]
    assert rows == [("m1", 0, False), ("u1", 0, False), ("a1", 0, False),
                    ("u2", 1, True), ("a2", 1, False), ("u3", 1, False),
                    ("u4", 1, True), ("cx1", 1, False), ("lb1", 1, False), ("si1", 1, False)]
    # the leaf move (cl2) stands for its target
    assert (tree["leafId"], tree["leafRow"], tree["entries"]) == ("u3", "u3", 15)
    assert tree["title"] == "Every type"
    parents = {n["id"]: n["parentId"] for n in tree["nodes"]}
    assert parents["u2"] == "us1" and parents["u4"] == "cl1"  # the entry's own parent
    everything = await call(pi.client, "pi.getTree", {"uri": target.as_uri(),
                                                      "bookkeeping": True})
    assert [(n["id"], n["depth"], n["head"]) for n in everything["nodes"]] == [
        ("m1", 0, False), ("u1", 0, False),
        ("a1", 1, True), ("u2", 2, True), ("a2", 2, False), ("ce1", 2, False),
        ("u3", 2, False), ("cl2", 2, False),
        ("cl1", 2, True), ("u4", 2, False), ("cx1", 2, False), ("lb1", 2, False),
        ("si1", 2, False),
        ("lf1", 1, True)]
    assert everything["leafRow"] == "cl2"


async def test_an_id_written_again_under_the_leaf_leaves_the_current_path_in_the_tree(
        pi: Pi) -> None:
    """A context edit appended by hand under the leaf with an id the session had (`ce1`)
    loops the parent links (ce1 -> cl2 -> u3 -> ce1): the tree, folded as editors ask, was
    the first root alone, off the path, with no row of the current path and none marked."""
    target = pi.main / ".pi" / "sessions" / "every-type-again.jsonl"
    again = {"type": "context_edit", "id": "ce1", "parentId": "cl2",
             "timestamp": "2026-12-01T10:00:16.000Z", "targetId": "a1", "replacement": None}
    target.write_text(EVERY_TYPE.read_text() + json.dumps(again) + "\n")
    uri = target.as_uri()
    for bookkeeping, path in ((False, ["u3"]), (True, ["u3", "cl2", "ce1"])):
        tree = await call(pi.client, "pi.getTree",
                          {"uri": uri, "limit": 300, "bookkeeping": bookkeeping})
        assert (tree["leafId"], tree["leafRow"]) == ("ce1", path[-1])
        assert [(n["id"], n["onPath"]) for n in tree["nodes"]] == \
            [("m1", False), *((entry_id, True) for entry_id in path)]
        folded = tree["nodes"][0]["hidden"]
        page = await call(pi.client, "pi.getTree", {"uri": uri, "under": "m1", "limit": 100,
                                                    "bookkeeping": bookkeeping})
        assert page["total"] == folded == len(page["nodes"])
        assert not any(node["onPath"] for node in page["nodes"])
    problems = (await call(pi.client, "pi.check", {"uri": uri}))["problems"]
    assert {"duplicate-id", "cycle"} <= {problem["kind"] for problem in problems}


def patched(view: dict[str, Any], delta: dict[str, Any]) -> list[dict[str, Any]]:
    start, delete = delta["start"], delta["delete"]
    return [*view["nodes"][:start], *delta["rows"], *view["nodes"][start + delete:]]


async def test_session_changed_carries_the_tree_change(pi: Pi) -> None:
    """An editor showing the tree patches it from pi/sessionChanged: rows replaced from
    `start`, based on the version it holds; it fetches again only when it missed one."""
    uri = copy_session(pi.main, "deltas")
    path = path_of(uri)
    view = await call(pi.client, "pi.getTree", {"uri": uri})
    since = pi.mark()
    SessionTree.open(str(path)).append_message(UserMessage(content="from the pi CLI",
                                                           timestamp=1))
    note = await wait_note(pi, SESSION_CHANGED, lambda p: path_of(p["uri"]) == path, since)
    delta = note["tree"]
    assert delta["base"] == view["version"] and delta["version"] > view["version"]
    assert (delta["start"], delta["delete"], len(delta["rows"])) == (len(view["nodes"]), 0, 1)
    assert delta["rows"][0]["preview"] == "from the pi CLI"
    fresh = await call(pi.client, "pi.getTree", {"uri": uri})
    assert fresh["version"] == delta["version"]
    assert patched(view, delta) == fresh["nodes"]
    assert (delta["leafId"], delta["leafRow"], delta["entries"]) == \
        (fresh["leafId"], fresh["leafRow"], fresh["entries"])
    # A leaf move changes which rows are on the path.
    since = pi.mark()
    await call(pi.client, "pi.branch", {"uri": uri, "targetId": "28511eec"})
    moved = (await wait_note(pi, SESSION_CHANGED, lambda p: path_of(p["uri"]) == path,
                             since))["tree"]
    assert moved["base"] == fresh["version"]
    after = await call(pi.client, "pi.getTree", {"uri": uri})
    assert patched(fresh, moved) == after["nodes"] and moved["leafRow"] == "28511eec"
    # The change is to the view last fetched, of either kind: with bookkeeping rows too.
    kept = await call(pi.client, "pi.getTree", {"uri": uri, "bookkeeping": True})
    since = pi.mark()
    await call(pi.client, "pi.label", {"uri": uri, "targetId": "28511eec", "label": "x"})
    labelled = (await wait_note(pi, SESSION_CHANGED, lambda p: path_of(p["uri"]) == path,
                                since))["tree"]
    assert labelled["base"] == kept["version"]
    again = await call(pi.client, "pi.getTree", {"uri": uri, "bookkeeping": True})
    assert again["version"] == labelled["version"]
    assert patched(kept, labelled) == again["nodes"]
    assert any(node["type"] == "label" for node in labelled["rows"])


async def test_a_new_session_written_first_by_the_pi_cli_is_followed(pi: Pi) -> None:
    """A new session not written yet ignored the file `pi --session <its path>` wrote there:
    pi.getTree and pi.previewContext kept answering the empty session held in memory (titled
    with the file name) while pi.listSessions listed the CLI's, no pi/sessionChanged came, and
    a prompt from the editor failed with "another process created this file first"."""
    uri = await new_session(pi)
    path = path_of(uri)
    since = pi.mark()
    cli = SessionTree.create(str(path), str(pi.main))  # written at its first entry, as pi's
    cli.append_message(UserMessage(content="begun in the pi CLI", timestamp=1))
    note = await wait_note(pi, SESSION_CHANGED, lambda p: path_of(p["uri"]) == path, since)
    assert note["title"] == "begun in the pi CLI"
    tree = await call(pi.client, "pi.getTree", {"uri": uri})
    assert [row["preview"] for row in tree["nodes"]] == ["begun in the pi CLI"]
    preview = await call(pi.client, "pi.previewContext", {"uri": uri})
    assert [m["role"] for m in preview["messages"]] == ["user"]


async def test_an_idless_line_appended_elsewhere_moves_the_path_in_the_view(pi: Pi) -> None:
    """An id-less line (pi's leaf, in no index) added no entry, so no pi/sessionChanged was
    sent: pi.getTree showed the path moved, editors kept the old one."""
    uri = copy_session(pi.main, "idless-leaf")
    path = path_of(uri)
    view = await call(pi.client, "pi.getTree", {"uri": uri})
    since = pi.mark()
    line = {"type": "message", "parentId": DEAD_END_TIP, "timestamp": "2026-12-01T00:00:00.000Z",
            "message": {"role": "user", "content": [{"type": "text", "text": "id-less"}],
                        "timestamp": 1}}
    with path.open("ab") as file:  # as another writer appends it
        file.write(json.dumps(line).encode() + b"\n")
    delta = (await wait_note(pi, SESSION_CHANGED, lambda p: path_of(p["uri"]) == path,
                             since))["tree"]
    fresh = await call(pi.client, "pi.getTree", {"uri": uri})
    assert delta["base"] == view["version"] and delta["version"] == fresh["version"]
    assert patched(view, delta) == fresh["nodes"] and delta["leafId"] is None
    on_path = {node["id"] for node in fresh["nodes"] if node["onPath"]}
    assert DEAD_END_TIP in on_path and BRANCH_B_TIP not in on_path


async def test_the_request_preview_at_an_id_less_leaf_is_what_a_prompt_there_sends(
        pi: Pi, fake: FakeAnthropic) -> None:
    """At an id-less last line the request preview showed the conversation up from it, which
    a prompt there does not send (pi 1.6 neither: it builds each request from its session at
    the leaf, and the prompt starts a new root): it shows none of it now, as the agent layer,
    pi's context there, still does."""
    uri = copy_session(pi.main, "idless-preview")
    line = {"type": "message", "parentId": DEAD_END_TIP, "timestamp": "2026-12-01T00:00:00.000Z",
            "message": {"role": "user", "content": [{"type": "text", "text": "id-less"}],
                        "timestamp": 1}}
    with path_of(uri).open("ab") as file:
        file.write(json.dumps(line).encode() + b"\n")
    context = await call(pi.client, "pi.previewContext", {"uri": uri, "layer": "agent"})
    preview = await call(pi.client, "pi.previewContext", {"uri": uri, "layer": "request"})
    assert context["messages"][-1]["entryId"] is None and preview["messages"] == []
    fake.script(text_reply("ok"))
    since = pi.mark()
    turn_id = (await call(pi.client, "pi.prompt", {"uri": uri, "text": "new"}))["turnId"]
    assert "error" not in event_types(await wait_events(pi, turn_id, since))
    [sent] = fake.message_requests()
    assert [m["content"][0]["text"] for m in sent["messages"] if m["role"] == "user"] == ["new"]
    assert preview["request"]["model"] == sent["model"]


def without_folds(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**node, "hidden": 0} for node in nodes]


async def test_a_folded_tree_sends_the_path_and_one_row_per_branch_off_it(pi: Pi) -> None:
    """`limit`: the current path's rows and each branch off it as one row with the count of
    rows under it; `under` hands those out a page at a time, and together they are the tree."""
    uri = copy_session(pi.main, "folded")
    full = (await call(pi.client, "pi.getTree", {"uri": uri}))["nodes"]
    folded = await call(pi.client, "pi.getTree", {"uri": uri, "limit": 1000})
    assert folded["earlier"] == 0
    on_path = {n["id"] for n in full if n["onPath"]}
    assert [n["id"] for n in folded["nodes"] if n["id"] not in on_path] == [FORK_QUESTION]
    head = next(n for n in folded["nodes"] if n["id"] == FORK_QUESTION)
    assert head["parentId"] in on_path and head["hidden"] == 13
    rows: list[dict[str, Any]] = []
    while len(rows) < head["hidden"]:
        page = await call(pi.client, "pi.getTree",
                          {"uri": uri, "under": FORK_QUESTION, "start": len(rows), "limit": 5})
        assert (page["under"], page["start"], page["total"]) == (FORK_QUESTION, len(rows), 13)
        assert len(page["nodes"]) == min(5, 13 - len(rows))
        rows += page["nodes"]
    at = folded["nodes"].index(head) + 1
    assert without_folds([*folded["nodes"][:at], *rows, *folded["nodes"][at:]]) == full
    error = await call_error(pi.client, "pi.getTree", {"uri": uri, "under": "deadbeef"})
    assert error.code == INVALID_PARAMS and "deadbeef" in error.message


async def test_a_fork_with_more_branches_than_a_view_sends_counts_the_rest(pi: Pi) -> None:
    """A folded view sends at most BRANCH_ROWS (300) branch rows, the forks nearest the leaf
    first (the other roots last) and one of each at least: the last one sent of a fork counts
    the rest, and `after` hands those out a page at a time. (Before, 400 other roots and a
    700-branch fork were 1,103 rows at any `limit`.)"""
    target = pi.main / ".pi" / "sessions" / "wide.jsonl"
    stamp = "2026-12-01T10:00:00.000Z"

    def user(entry_id: str, parent: str | None) -> str:
        return json.dumps({"type": "message", "id": entry_id, "parentId": parent,
                           "timestamp": stamp, "message": {"role": "user",
                                                           "content": entry_id, "timestamp": 1}})

    entries = [user(f"o{n}", None) for n in range(400)]  # begun again 400 times
    entries += [user("r0", None), user("r1", "r0"), user("r2", "r1")]
    for n in range(700):  # 700 branches off r0, each two rows
        entries += [user(f"b{n}", "r0"), user(f"c{n}", f"b{n}")]
    header = {"type": "session", "version": 3, "id": "wide", "timestamp": stamp, "cwd": "/w"}
    target.write_text("\n".join([json.dumps(header), *entries, user("r3", "r2")]) + "\n")
    uri = target.as_uri()
    full = (await call(pi.client, "pi.getTree", {"uri": uri}))["nodes"]
    view = await call(pi.client, "pi.getTree", {"uri": uri, "limit": 300})
    nodes = view["nodes"]
    # The fork on the path keeps 300 branches, the other roots one.
    assert [n["id"] for n in nodes if n["onPath"]] == ["r0", "r1", "r2", "r3"]
    assert len(nodes) == 4 + 300 + 1 and view["earlier"] == 0
    assert [(n["id"], n["moreBranches"], n["moreRows"]) for n in nodes if n["moreBranches"]] == \
        [("o0", 399, 399), ("b299", 400, 800)]
    sent = {n["id"]: n for n in nodes}
    for host in ("o0", "b299"):
        rest: list[dict[str, Any]] = []
        while len(rest) < sent[host]["moreBranches"]:
            page = await call(pi.client, "pi.getTree",
                              {"uri": uri, "after": host, "start": len(rest), "limit": 250})
            assert (page["after"], page["start"], page["total"], page["rows"]) == \
                (host, len(rest), sent[host]["moreBranches"], sent[host]["moreRows"])
            rest += page["nodes"]
        sent.update((n["id"], n) for n in rest)
    # With the branches fetched, every row is sent or folded under one sent, once.
    heads = [n for n in full if n["onPath"] or n["head"]]
    assert sorted(sent) == sorted(n["id"] for n in heads)
    assert sum(1 + n["hidden"] for n in sent.values()) == len(full)
    for node in heads:
        assert {**sent[node["id"]], "hidden": 0, "moreBranches": 0, "moreRows": 0} == node
    error = await call_error(pi.client, "pi.getTree", {"uri": uri, "after": "r1"})
    assert error.code == INVALID_PARAMS and "r1" in error.message  # a path row: no branch
    # A view fetched meanwhile with another `limit` (VS Code's diff asks for 1) changes nothing.
    await call(pi.client, "pi.getTree", {"uri": uri, "limit": 1})
    page = await call(pi.client, "pi.getTree", {"uri": uri, "after": "b299", "limit": 1})
    assert (page["total"], [n["id"] for n in page["nodes"]]) == (400, ["b300"])
    error = await call_error(pi.client, "pi.getTree", {"uri": uri, "after": "b0", "under": "b0"})
    assert error.code == INVALID_PARAMS and "`under` or `after`" in error.message


async def test_a_page_is_counted_as_the_view_it_is_asked_for(pi: Pi) -> None:
    """`under` and `after` pages count bookkeeping rows as asked (`bookkeeping`), whichever
    kind of view the server built last (another editor's, or none since the session was
    closed): before, a page took the last view's kind, and its count disagreed with the row."""
    target = pi.main / ".pi" / "sessions" / "kinds.jsonl"
    stamp = "2026-12-01T10:00:00.000Z"
    user = {"role": "user", "content": "q", "timestamp": 1}

    def message(entry_id: str, parent: str | None) -> dict[str, Any]:
        return {"type": "message", "id": entry_id, "parentId": parent, "timestamp": stamp,
                "message": user}

    entries = [message("r0", None), message("b0", "r0"),
               {"type": "context_edit", "id": "e0", "parentId": "b0", "timestamp": stamp,
                "targetId": "b0", "replacement": None},
               message("b1", "r0"), message("r1", "r0")]
    header = {"type": "session", "version": 3, "id": "kinds", "timestamp": stamp, "cwd": "/w"}
    target.write_text("\n".join(json.dumps(line) for line in [header, *entries]) + "\n")
    uri = target.as_uri()
    shown = await call(pi.client, "pi.getTree", {"uri": uri, "limit": 300, "bookkeeping": True})
    assert {n["id"]: n["hidden"] for n in shown["nodes"]}["b0"] == 1  # the edit, as a row
    await call(pi.client, "pi.getTree", {"uri": uri, "limit": 300})  # another editor's view
    page = await call(pi.client, "pi.getTree", {"uri": uri, "under": "b0", "bookkeeping": True})
    assert (page["total"], [n["id"] for n in page["nodes"]]) == (1, ["e0"])
    page = await call(pi.client, "pi.getTree", {"uri": uri, "after": "b0", "bookkeeping": True})
    assert (page["total"], page["rows"]) == (1, 1)
    page = await call(pi.client, "pi.getTree", {"uri": uri, "under": "b0"})
    assert (page["total"], page["nodes"]) == (0, [])
    error = await call_error(pi.client, "pi.getTree", {"uri": uri, "under": "b0", "start": 2**64})
    assert error.code == INVALID_PARAMS and "start" in error.message


async def test_a_long_path_is_sent_from_the_leaf_end(pi: Pi) -> None:
    """Of a path longer than `limit`, the last rows; `earlier` counts the rest, which a larger
    `limit` shows (with the branches off it folded)."""
    uri = copy_session(pi.main, "window")
    full = (await call(pi.client, "pi.getTree", {"uri": uri}))["nodes"]
    tail = await call(pi.client, "pi.getTree", {"uri": uri, "limit": 4})
    assert tail["nodes"] == full[-4:] and tail["earlier"] == len(full) - 4
    wider = await call(pi.client, "pi.getTree", {"uri": uri, "limit": 40})  # of 42 path rows
    assert wider["earlier"] == 2 and wider["nodes"][0] == full[2]
    assert [n["id"] for n in wider["nodes"] if n["hidden"]] == [FORK_QUESTION]


async def test_a_folded_tree_is_patched_from_session_changed(pi: Pi) -> None:
    """The change in pi/sessionChanged is to the folded view the editor holds: patched, it
    equals the view fetched again, for an append and for a leaf move into a folded branch."""
    uri = copy_session(pi.main, "folded-deltas")
    path = path_of(uri)
    view = await call(pi.client, "pi.getTree", {"uri": uri, "limit": 4})
    since = pi.mark()
    SessionTree.open(str(path)).append_message(UserMessage(content="from the pi CLI",
                                                           timestamp=1))
    delta = (await wait_note(pi, SESSION_CHANGED, lambda p: path_of(p["uri"]) == path,
                             since))["tree"]
    assert (delta["base"], delta["start"], delta["delete"], len(delta["rows"])) == \
        (view["version"], 4, 0, 1)
    fresh = await call(pi.client, "pi.getTree", {"uri": uri, "limit": 4})
    assert fresh["version"] == delta["version"] and fresh["earlier"] == delta["earlier"]
    assert patched(view, delta) == fresh["nodes"]
    since = pi.mark()
    await call(pi.client, "pi.branch", {"uri": uri, "targetId": "28511eec"})
    moved = (await wait_note(pi, SESSION_CHANGED, lambda p: path_of(p["uri"]) == path,
                             since))["tree"]
    after = await call(pi.client, "pi.getTree", {"uri": uri, "limit": 4})
    assert moved["base"] == fresh["version"] and moved["version"] == after["version"]
    assert patched(fresh, moved) == after["nodes"] and moved["earlier"] == after["earlier"]
    # The rows past the leaf fold into the first of them.
    assert [(n["id"], n["hidden"]) for n in after["nodes"][-2:]] == \
        [("28511eec", 0), ("904492e1", 1)]


@pytest.mark.parametrize("layer", ["agent", "llm", "request"])
async def test_preview_context_layers(pi: Pi, layer: str) -> None:
    preview = await call(pi.client, "pi.previewContext",
                         {"uri": pi.uri, "leafId": BRANCH_B_DONE, "layer": layer})
    assert preview["leafId"] == BRANCH_B_DONE
    assert preview["model"] == "anthropic/claude-sonnet-4-5"
    assert preview["contextWindow"] > 0
    assert preview["totalTokens"] > 0
    messages = preview["messages"]
    assert messages
    for message in messages:
        assert set(message) >= {"entryId", "role", "tokens", "message"}
        assert isinstance(message["tokens"], int) and isinstance(message["message"], dict)
    assert messages[0]["entryId"] == "e0c67744"
    assert BRANCH_SUMMARY in [m["entryId"] for m in messages]
    assert BRANCH_SUMMARY in preview["markdown"]
    if layer == "agent":
        assert [m["role"] for m in messages if m["entryId"] == BRANCH_SUMMARY] == ["branchSummary"]
    else:
        assert "<branch_exploration_summary>" in preview["markdown"]
        assert {m["role"] for m in messages} <= {"user", "assistant", "toolResult"}
    if layer == "request":
        assert preview["request"]["model"] == "claude-sonnet-4-5"  # the session's
        assert preview["request"]["messages"]


async def test_preview_context_in_pages(pi: Pi) -> None:
    """The totals with the first and last pages at once; any page by its first message; the
    token counts those of the whole preview."""
    whole = await call(pi.client, "pi.previewContext", {"uri": pi.uri})
    messages = whole["messages"]
    assert len(messages) > 8
    first = await call(pi.client, "pi.previewContext", {"uri": pi.uri, "page": 4})
    assert "messages" not in first
    # The Markdown of the pages sent, and a line for the messages left out between them.
    header, *sections = re.split(r"\n\n(?=## \d+\. )", whole["markdown"].rstrip("\n"))
    count = len(sections)
    assert count == len(messages)
    gap = f"_… messages 5 to {count - 4} not shown_"
    assert first["markdown"] == "\n\n".join(
        [header, *sections[:4], gap, *sections[-4:]]) + "\n"
    more = await call(pi.client, "pi.previewContext", {"uri": pi.uri, "page": 4, "start": 4})
    assert more["markdown"].startswith(header + "\n\n_… messages 1 to 4 not shown_\n\n## 5.")
    assert (first["totalMessages"], first["totalTokens"]) == (len(messages), whole["totalTokens"])
    assert [(p["start"], p["messages"]) for p in first["pages"]] == \
        [(0, messages[:4]), (len(messages) - 4, messages[-4:])]
    assert [(p["start"], p["messages"]) for p in more["pages"]] == [(4, messages[4:8])]
    small = await call(pi.client, "pi.previewContext", {"uri": pi.uri, "page": len(messages)})
    assert [(p["start"], p["messages"]) for p in small["pages"]] == [(0, messages)]
    error = await call_error(pi.client, "pi.previewContext", {"uri": pi.uri, "page": 0})
    assert error.code == INVALID_PARAMS and "page" in str(error)


async def test_a_page_of_the_request_layer_leaves_the_body_to_the_whole_preview(pi: Pi) -> None:
    """The body is the whole context again in the provider's form (41 MB at 100k entries)."""
    whole = await call(pi.client, "pi.previewContext", {"uri": pi.uri, "layer": "request"})
    page = await call(pi.client, "pi.previewContext",
                      {"uri": pi.uri, "layer": "request", "page": 2})
    assert whole["request"]["messages"] and "request" not in page
    assert page["totalMessages"] == len(whole["messages"])
    assert page["pages"][0]["messages"] == whole["messages"][:2]


async def test_preview_context_defaults_to_the_leaf(pi: Pi) -> None:
    preview = await call(pi.client, "pi.previewContext", {"uri": pi.uri})
    assert preview["leafId"] == BRANCH_B_TIP
    assert preview["model"] == "anthropic/claude-opus-4-5"
    assert preview["thinkingLevel"] == "high"
    # the branch summary is behind the compaction here; the compaction summary stands for it
    assert preview["messages"][0]["entryId"] == COMPACTION
    assert BRANCH_SUMMARY not in [m["entryId"] for m in preview["messages"]]
    assert "<branch_exploration_summary>" not in preview["markdown"]
    assert preview["markdown"].startswith(f"# Context at `{BRANCH_B_TIP}`")


async def test_diff_context_between_the_tips(pi: Pi) -> None:
    diff = await call(pi.client, "pi.diffContext",
                      {"uri": pi.uri, "fromLeafId": DEAD_END_TIP, "toLeafId": BRANCH_B_TIP})
    assert {FORK_QUESTION, "28511eec"} <= set(diff["onlyFrom"])
    assert {COMPACTION, "c66a750f"} <= set(diff["onlyTo"])
    assert not set(diff["onlyFrom"]) & set(diff["onlyTo"])
    dead_end = await call(pi.client, "pi.previewContext",
                          {"uri": pi.uri, "leafId": DEAD_END_TIP, "layer": "llm"})
    tip = await call(pi.client, "pi.previewContext", {"uri": pi.uri, "layer": "llm"})
    assert diff["fromTokens"] == dead_end["totalTokens"]
    assert diff["toTokens"] == tip["totalTokens"]
    backwards = await call(pi.client, "pi.diffContext",
                           {"uri": pi.uri, "fromLeafId": BRANCH_B_TIP, "toLeafId": DEAD_END_TIP})
    assert (backwards["onlyFrom"], backwards["onlyTo"]) == (diff["onlyTo"], diff["onlyFrom"])
    assert (diff["toLeafId"], backwards["toLeafId"]) == (BRANCH_B_TIP, DEAD_END_TIP)


async def test_diff_context_with_the_current_leaf(pi: Pi) -> None:
    # Without `toLeafId`, the leaf compared with is the current one, and the answer names it:
    # an editor asks once, and does not fetch the tree (replacing the view it holds) for it.
    uri = copy_session(pi.main, "diff-current")
    leaf = (await call(pi.client, "pi.branch", {"uri": uri, "targetId": DEAD_END_TIP}))["leafId"]
    diff = await call(pi.client, "pi.diffContext", {"uri": uri, "fromLeafId": BRANCH_B_TIP})
    assert diff["toLeafId"] == leaf == (await call(pi.client, "pi.getTree", {"uri": uri}))["leafId"]
    explicit = await call(pi.client, "pi.diffContext",
                          {"uri": uri, "fromLeafId": BRANCH_B_TIP, "toLeafId": leaf})
    assert diff == explicit and FORK_QUESTION in diff["onlyTo"]
    empty = pi.main / ".pi" / "sessions" / "header-only.jsonl"
    empty.write_text(path_of(uri).read_text().splitlines()[0] + "\n")
    error = await call_error(pi.client, "pi.diffContext",
                             {"uri": empty.as_uri(), "fromLeafId": "x"})
    assert "no current leaf" in str(error)
    # Moved back before its first entry (editing the first prompt): no leaf, yet not empty.
    question = next(entry for entry in lines(path_of(uri)) if entry["type"] == "message")
    with empty.open("a") as file:
        file.write(json.dumps({**question, "parentId": None}) + "\n")
    moved = await call(pi.client, "pi.branch",
                       {"uri": empty.as_uri(), "targetId": question["id"], "edit": True})
    assert moved["leafId"] is None
    error = await call_error(pi.client, "pi.diffContext",
                             {"uri": empty.as_uri(), "fromLeafId": question["id"]})
    assert "no current leaf" in str(error) and "empty" not in str(error)
    error = await call_error(pi.client, "pi.diffContext",
                             {"uri": uri, "fromLeafId": leaf, "toLeafId": ""})
    assert "no entry with id ''" in str(error)


async def test_check(pi: Pi) -> None:
    assert await call(pi.client, "pi.check", {"uri": pi.uri}) == {"problems": []}
    broken = copy_session(pi.main, "broken")
    with path_of(broken).open("a") as file:
        file.write("{this is not json\n")
    problems = (await call(pi.client, "pi.check", {"uri": broken}))["problems"]
    assert problems and problems[0]["line"] == len(lines(pi.session)) + 2


async def test_compact_dry_run_writes_nothing(pi: Pi) -> None:
    before = pi.session.read_bytes()
    result = await call(pi.client, "pi.compact", {"uri": pi.uri, "dryRun": True})
    plan = result["plan"]
    assert plan is not None
    assert plan["firstKeptEntryId"] in {e["id"] for e in lines(pi.session)}
    assert plan["messagesToSummarize"] > 0
    assert plan["tokensBefore"] > 0
    assert plan["previousSummary"]  # the compaction already on the path
    assert pi.session.read_bytes() == before


# -- writing: branch, summaries, compaction, labels, forks, settings -------------------------


async def test_branch_to_a_user_message(pi: Pi) -> None:
    uri = copy_session(pi.main, "branching")
    await call(pi.client, "pi.getTree", {"uri": uri})
    since = pi.mark()
    result = await call(pi.client, "pi.branch", {"uri": uri, "targetId": FORK_QUESTION})
    question = next(e for e in lines(path_of(uri)) if e["id"] == FORK_QUESTION)
    move = lines(path_of(uri))[-1]  # durable leaf moves are the default: one entry under it
    assert (move["type"], move["customType"], move["parentId"]) == (
        "custom", "pi-lsp.leaf", FORK_PARENT)
    assert result["leafId"] == FORK_PARENT  # editors are shown the target, the move is hidden
    assert result["editorText"] == question["message"]["content"][0]["text"]
    note = await wait_note(pi, SESSION_CHANGED, lambda p: path_of(p["uri"]) == path_of(uri),
                           since)
    assert note["leafId"] == FORK_PARENT
    assert note["entries"] == len(lines(path_of(uri)))
    tree = await call(pi.client, "pi.getTree", {"uri": uri})
    assert tree["leafId"] == FORK_PARENT
    assert tree["leafRow"] == FORK_PARENT  # the move itself is no row
    assert move["id"] not in [n["id"] for n in tree["nodes"]]
    shown = await call(pi.client, "pi.getTree", {"uri": uri, "bookkeeping": True})
    assert shown["nodes"][-1]["id"] == move["id"] and shown["nodes"][-1]["type"] == "leaf"
    # any other entry becomes the leaf itself, with no text to edit
    moved = await call(pi.client, "pi.branch", {"uri": uri, "targetId": "d9977f3d"})
    assert moved["leafId"] == "d9977f3d" and moved.get("editorText") is None


async def test_branch_here_on_the_leaf_row_is_answered_and_writes_nothing(pi: Pi) -> None:
    """Branch Here (with or without a summary) on the row already the leaf wrote one more leaf
    move; as in pi nothing changes, and the editors are answered the leaf as for any move."""
    uri = copy_session(pi.offline, "branch-on-the-leaf")
    await call(pi.client, "pi.branch", {"uri": uri, "targetId": DEAD_END_TIP})
    before = path_of(uri).read_bytes()
    result = await call(pi.client, "pi.branch", {"uri": uri, "targetId": DEAD_END_TIP})
    assert result["leafId"] == DEAD_END_TIP and result.get("editorText") is None
    assert isinstance(result["fileChanges"], int)
    since = pi.mark()
    job_id = (await call(pi.client, "pi.branchWithSummary",
                         {"uri": uri, "targetId": DEAD_END_TIP}))["jobId"]
    done = await wait_note(pi, JOB_DONE, lambda p: p["jobId"] == job_id, since)
    assert done["ok"] is True, done
    assert done["result"]["leafId"] == DEAD_END_TIP and "summaryEntryId" not in done["result"]
    assert path_of(uri).read_bytes() == before
    assert (await call(pi.client, "pi.getTree", {"uri": uri}))["leafId"] == DEAD_END_TIP


async def test_branch_here_on_a_prompt_that_is_the_leaf_stays_and_edit_prompt_moves(
        pi: Pi) -> None:
    """Branch Here on the leaf when it is a user message (no reply yet) moved the leaf to its
    parent and put the prompt in the chat input; pi 1.6's /tree does nothing there ("Already
    at this point"). Edit Prompt (`edit`) still leaves it for its parent with its text."""
    uri = copy_session(pi.offline, "prompt-leaf")
    tree = SessionTree.open(str(path_of(uri)))
    tree.append_message(UserMessage(content="no reply yet", timestamp=1))
    prompt = tree.leaf_id
    parent = tree.record(prompt or "").env.parent_id
    before = path_of(uri).read_bytes()
    result = await call(pi.client, "pi.branch", {"uri": uri, "targetId": prompt})
    assert result["leafId"] == prompt and result.get("editorText") is None
    assert path_of(uri).read_bytes() == before
    edited = await call(pi.client, "pi.branch", {"uri": uri, "targetId": prompt, "edit": True})
    assert (edited["leafId"], edited["editorText"]) == (parent, "no reply yet")


async def test_branch_without_durable_leaf_moves_is_announced(pi: Pi, fake: FakeAnthropic
                                                               ) -> None:
    """With `durableLeafMoves: false` nothing is written, but editors still learn the leaf."""
    uri = copy_session(pi.main, "in-memory-branch")
    pi.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"piLsp": init_options(fake, durableLeafMoves=False)}))
    try:
        await call(pi.client, "pi.getTree", {"uri": uri})
        before = path_of(uri).read_bytes()
        since = pi.mark()
        result = await call(pi.client, "pi.branch", {"uri": uri, "targetId": FORK_QUESTION})
        assert result["leafId"] == FORK_PARENT
        assert path_of(uri).read_bytes() == before  # a pointer move only
        assert (await call(pi.client, "pi.getTree", {"uri": uri}))["leafId"] == FORK_PARENT
        note = await wait_note(pi, SESSION_CHANGED, lambda p: path_of(p["uri"]) == path_of(uri),
                               since)
        assert note["leafId"] == FORK_PARENT
    finally:
        pi.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
            settings={"piLsp": init_options(fake)}))
        await call(pi.client, "pi.check", {"uri": pi.uri})


async def test_branch_with_summary_extractive(pi: Pi) -> None:
    uri = copy_session(pi.offline, "summarized")
    since = pi.mark()
    result = await call(pi.client, "pi.branchWithSummary",
                        {"uri": uri, "targetId": FORK_QUESTION, "instructions": "be brief"})
    job_id = result["jobId"]
    assert isinstance(job_id, str) and job_id
    done = await wait_note(pi, JOB_DONE, lambda p: p["jobId"] == job_id, since)
    assert done["ok"] is True, done
    assert path_of(done["uri"]) == path_of(uri)
    outcome = done["result"]
    assert outcome["leafId"] == outcome["summaryEntryId"]
    assert outcome["summary"]
    assert outcome["editorText"].startswith("OK, that makes sense")
    entry = lines(path_of(uri))[-1]
    assert entry["type"] == "branch_summary" and entry["id"] == outcome["summaryEntryId"]
    assert entry["parentId"] == FORK_PARENT and entry["fromId"] == BRANCH_B_TIP
    assert entry["details"]["summarizer"] == "extractive"
    tree = await call(pi.client, "pi.getTree", {"uri": uri})
    assert tree["leafId"] == outcome["summaryEntryId"]


async def test_branch_summary_uses_the_configured_model_endpoint(pi: Pi, fake: FakeAnthropic
                                                                 ) -> None:
    """`anthropicBaseUrl` and `anthropicApiKey` apply to the summary model as to turns."""
    fake.script(text_reply("The dead end tried an ORM and was dropped."))
    uri = copy_session(pi.main, "model-summary")
    since = pi.mark()
    job_id = (await call(pi.client, "pi.branchWithSummary",
                         {"uri": uri, "targetId": FORK_QUESTION}))["jobId"]
    done = await wait_note(pi, JOB_DONE, lambda p: p["jobId"] == job_id, since)
    requests = fake.message_requests()
    assert [r["model"] for r in requests] == [SUMMARY_MODEL], done
    assert done["ok"] is True, done
    assert done["result"]["summary"].startswith(
        BRANCH_SUMMARY_PREAMBLE + "The dead end tried an ORM and was dropped.")


async def test_compact(pi: Pi) -> None:
    uri = copy_session(pi.offline, "compacted")
    plan = (await call(pi.client, "pi.compact", {"uri": uri, "dryRun": True}))["plan"]
    since = pi.mark()
    result = await call(pi.client, "pi.compact", {"uri": uri, "instructions": "tests"})
    done = await wait_note(pi, JOB_DONE, lambda p: p["jobId"] == result["jobId"], since)
    assert done["ok"] is True, done
    compaction = done["result"]
    assert compaction["firstKeptEntryId"] == plan["firstKeptEntryId"]
    assert compaction["summary"]
    entry = lines(path_of(uri))[-1]
    assert entry["type"] == "compaction" and entry["id"] == compaction["entryId"]
    assert entry["details"]["summarizer"] == "extractive"
    preview = await call(pi.client, "pi.previewContext", {"uri": uri})
    assert preview["messages"][0]["entryId"] == compaction["entryId"]
    # a second compaction right away has nothing left to summarize: the job says so
    since = pi.mark()
    again = await call(pi.client, "pi.compact", {"uri": uri})
    failed = await wait_note(pi, JOB_DONE, lambda p: p["jobId"] == again["jobId"], since)
    assert failed["ok"] is False and "nothing to compact" in failed["error"]


async def test_compact_dry_run_says_why_it_would_refuse(pi: Pi) -> None:
    """A refused dry run answered a bare null, and each editor guessed the reason in its own
    words; it now carries the refusal's own, the words a compaction job fails with."""
    uri = await new_session(pi)
    dry = await call(pi.client, "pi.compact", {"uri": uri, "dryRun": True})
    assert dry["plan"] is None and dry["reason"].startswith("nothing to compact: "), dry
    since = pi.mark()
    job = await call(pi.client, "pi.compact", {"uri": uri})
    failed = await wait_note(pi, JOB_DONE, lambda p: p["jobId"] == job["jobId"], since)
    assert failed["ok"] is False and failed["error"] == dry["reason"], failed


# Another program's turn, as it writes it: a bash call, then (the tool done) its result.
OTHERS_CALL, OTHERS_RESULT = "f0ca11ed", "f0ca11ee"
BASH_CALL = {"role": "assistant", "api": "anthropic-messages", "provider": "anthropic",
             "model": "claude-sonnet-4-5", "stopReason": "toolUse", "timestamp": 1,
             "content": [{"type": "toolCall", "id": "toolu_others", "name": "bash",
                          "arguments": {"command": "make test"}}]}
BASH_RESULT = {"role": "toolResult", "toolCallId": "toolu_others", "toolName": "bash",
               "content": [{"type": "text", "text": "ok"}], "isError": False, "timestamp": 2}
ANOTHER_TURN = ("another program is running a turn in this session: its tool call bash has no "
                "result yet; try again when it ends")


async def written_by_another_turn(pi: Pi, uri: str, entry_id: str, parent_id: str,
                                  message: dict[str, Any]) -> None:
    """Append a message entry as another program's turn writes it; return once the server
    has read it (its watcher must be running: `watcher_caught_up`)."""
    line = {"type": "message", "id": entry_id, "parentId": parent_id,
            "timestamp": "2026-12-01T00:00:00.000Z", "message": message}
    since = pi.mark()
    with path_of(uri).open("ab") as file:
        file.write(json.dumps(line).encode() + b"\n")
    await wait_note(pi, SESSION_CHANGED, lambda p: path_of(p["uri"]) == path_of(uri), since)


async def job_done(pi: Pi, command: str, argument: dict[str, Any]) -> dict[str, Any]:
    since = pi.mark()
    job_id = (await call(pi.client, command, argument))["jobId"]
    return await wait_note(pi, JOB_DONE, lambda p: p["jobId"] == job_id, since)


async def test_jobs_wait_for_another_programs_tool_call(pi: Pi, fake: FakeAnthropic) -> None:
    """Another program's turn had written a tool call and was running the tool: a compaction
    went under the call (the leaf follows the other writer), so the call's result came as its
    sibling and the compaction sat on a dead branch, told done; a branch summary to the call
    went there too."""
    uri = copy_session(pi.main, "others-call")
    leaf = (await call(pi.client, "pi.getTree", {"uri": uri}))["leafId"]
    await watcher_caught_up(pi)
    await written_by_another_turn(pi, uri, OTHERS_CALL, leaf, BASH_CALL)
    fake.script(text_reply("the summary"), text_reply("the split turn's start"))
    refused = await job_done(pi, "pi.compact", {"uri": uri})
    assert refused["ok"] is False and ANOTHER_TURN in refused["error"], refused
    await call(pi.client, "pi.branch", {"uri": uri, "targetId": DEAD_END_TIP})
    before = path_of(uri).read_bytes()
    refused = await job_done(pi, "pi.branchWithSummary", {"uri": uri, "targetId": OTHERS_CALL})
    assert refused["ok"] is False and ANOTHER_TURN in refused["error"], refused
    assert path_of(uri).read_bytes() == before and fake.message_requests() == []
    await written_by_another_turn(pi, uri, OTHERS_RESULT, OTHERS_CALL, BASH_RESULT)
    done = await job_done(pi, "pi.compact", {"uri": uri})
    assert done["ok"] is True, done
    assert lines(path_of(uri))[-1]["parentId"] == OTHERS_RESULT


async def test_a_dry_run_says_a_compaction_would_wait_for_another_programs_tool_call(
        pi: Pi, fake: FakeAnthropic) -> None:
    """Under another program's tool call with no result, the dry run showed a plan the job
    then refused, in a disk error's words ("could not write to <file>: …"); a branch summary
    to the call was refused in those words too."""
    uri = copy_session(pi.main, "plan-others-call")
    leaf = (await call(pi.client, "pi.getTree", {"uri": uri}))["leafId"]
    await watcher_caught_up(pi)
    await written_by_another_turn(pi, uri, OTHERS_CALL, leaf, BASH_CALL)
    fake.script()  # neither job gets as far as a request
    dry = await call(pi.client, "pi.compact", {"uri": uri, "dryRun": True})
    assert dry["plan"] is None and dry["reason"].startswith(ANOTHER_TURN), dry
    failed = await job_done(pi, "pi.compact", {"uri": uri})
    assert failed["ok"] is False and failed["error"] == dry["reason"], failed
    await call(pi.client, "pi.branch", {"uri": uri, "targetId": DEAD_END_TIP})
    refused = await job_done(pi, "pi.branchWithSummary", {"uri": uri, "targetId": OTHERS_CALL})
    assert refused["ok"] is False and refused["error"] == dry["reason"], refused
    assert fake.message_requests() == []


async def test_a_compaction_refuses_a_tool_call_written_while_it_summarized(
        pi: Pi, fake: FakeAnthropic, tmp_path: Path) -> None:
    """Another program's turn wrote a tool call while the summary was being written: the
    compaction followed the leaf onto the call and was appended under it."""
    uri = copy_session(pi.main, "call-meanwhile")
    leaf = (await call(pi.client, "pi.getTree", {"uri": uri}))["leafId"]
    await watcher_caught_up(pi)
    fake.script(held_text(tmp_path / "written", words=5), text_reply("the split turn's start"))
    since = pi.mark()
    job_id = (await call(pi.client, "pi.compact", {"uri": uri}))["jobId"]
    await until(lambda: fake.message_requests(), "the summary being asked for")
    await written_by_another_turn(pi, uri, OTHERS_CALL, leaf, BASH_CALL)
    before = path_of(uri).read_bytes()
    (tmp_path / "written").touch()
    done = await wait_note(pi, JOB_DONE, lambda p: p["jobId"] == job_id, since)
    assert done["ok"] is False and ANOTHER_TURN in done["error"], done
    assert path_of(uri).read_bytes() == before


async def test_label_set_and_clear(pi: Pi) -> None:
    uri = await fork(pi)
    await call(pi.client, "pi.getTree", {"uri": uri})
    assert await call(pi.client, "pi.label",
                      {"uri": uri, "targetId": COMPACTION, "label": "checkpoint"}) == {}
    nodes = {n["id"]: n for n in (await call(pi.client, "pi.getTree", {"uri": uri}))["nodes"]}
    assert nodes[COMPACTION]["label"] == "checkpoint"
    assert await call(pi.client, "pi.label",
                      {"uri": uri, "targetId": COMPACTION, "label": None}) == {}
    nodes = {n["id"]: n for n in (await call(pi.client, "pi.getTree", {"uri": uri}))["nodes"]}
    assert nodes[COMPACTION]["label"] is None
    assert nodes["c66a750f"]["label"] == "tests-green"  # the fork kept the other labels


async def test_own_append_is_announced_once(pi: Pi) -> None:
    uri = await fork(pi)
    count = len((await call(pi.client, "pi.getTree", {"uri": uri}))["nodes"])
    await watcher_caught_up(pi)  # it has seen the new file
    since = pi.mark()
    await call(pi.client, "pi.label", {"uri": uri, "targetId": COMPACTION, "label": "once"})
    await watcher_caught_up(pi)  # it sees the write too; it must not announce it again
    notes = [p for p in pi.of(SESSION_CHANGED, since) if path_of(p["uri"]) == path_of(uri)]
    assert len(notes) == 1, notes
    assert notes[0]["entries"] == count + 1 and notes[0]["reloaded"] is False


async def test_fork(pi: Pi) -> None:
    since = pi.mark()
    uri = await fork(pi, "28511eec")
    path = path_of(uri)
    assert path != pi.session.resolve() and path.is_file()
    await wait_note(pi, SESSIONS_CHANGED, since=since)
    source = {n["id"]: n for n in (await call(pi.client, "pi.getTree", {"uri": pi.uri}))["nodes"]}
    tree = await call(pi.client, "pi.getTree", {"uri": uri})
    kept = [n["id"] for n in tree["nodes"] if n["type"] != "label"]
    assert kept[-1] == "28511eec" and set(kept) <= set(source)
    assert COMPACTION not in kept and BRANCH_SUMMARY not in kept
    labels = {n["id"]: n["label"] for n in tree["nodes"] if n["label"]}
    assert labels == {FORK_QUESTION: "data-layer-question", "28511eec": "orm-dead-end"}
    listed = (await call(pi.client, "pi.listSessions", {}))["sessions"]
    forked = next(s for s in listed if path_of(s["uri"]) == path)
    assert forked["id"] != MAIN_ID and forked["parentSession"]


async def test_set_name(pi: Pi) -> None:
    uri = await fork(pi)
    assert await call(pi.client, "pi.setName", {"uri": uri, "name": "Renamed fork"}) == \
        {"queued": False}
    assert lines(path_of(uri))[-1]["type"] == "session_info"
    listed = (await call(pi.client, "pi.listSessions", {}))["sessions"]
    assert next(s for s in listed if path_of(s["uri"]) == path_of(uri))["name"] == "Renamed fork"
    assert await call(pi.client, "pi.setName", {"uri": uri, "name": "  "}) == \
        {"queued": False}  # clears it
    listed = (await call(pi.client, "pi.listSessions", {}))["sessions"]
    assert next(s for s in listed if path_of(s["uri"]) == path_of(uri))["name"] is None


async def test_a_name_set_while_busy_is_said_queued_and_its_title_arrives(
        pi: Pi, fake: FakeAnthropic, tmp_path: Path) -> None:
    """pi.setName answered `{}` while a turn ran, so editors said the session was named at once,
    and pi/sessionChanged carried no title: a chat showing no tree kept the old one."""
    uri = await fork(pi)
    fake.script(held_text(tmp_path / "named"))
    since = pi.mark()
    turn_id = (await call(pi.client, "pi.prompt", {"uri": uri, "text": "go"}))["turnId"]
    await wait_event(pi, turn_id, "message_update", since)
    assert await call(pi.client, "pi.setName", {"uri": uri, "name": "Named late"}) == \
        {"queued": True}
    (tmp_path / "named").touch()
    note = await wait_note(pi, SESSION_CHANGED, lambda p: p.get("title") == "Named late", since)
    assert path_of(note["uri"]) == path_of(uri)
    assert lines(path_of(uri))[-1]["name"] == "Named late"  # written at the turn's end
    await wait_events(pi, turn_id, since)


async def test_set_model_and_thinking_level(pi: Pi) -> None:
    uri = await fork(pi)
    assert await call(pi.client, "pi.setModel",
                      {"uri": uri, "provider": "anthropic", "modelId": SUMMARY_MODEL}) == {}
    assert await call(pi.client, "pi.setThinkingLevel", {"uri": uri, "level": "low"}) == \
        {"level": "low", "written": True, "queued": False}
    entries = lines(path_of(uri))
    assert [e["type"] for e in entries[-2:]] == ["model_change", "thinking_level_change"]
    preview = await call(pi.client, "pi.previewContext", {"uri": uri, "layer": "request"})
    assert preview["model"] == f"anthropic/{SUMMARY_MODEL}"
    assert preview["thinkingLevel"] == "low"
    assert preview["request"]["model"] == SUMMARY_MODEL
    # the levels a picker offers: the model's, as pi's (no xhigh or max on Claude 4.5)
    assert preview["thinkingLevels"] == ["off", "minimal", "low", "medium", "high"]
    for provider, model, levels in (
            ("anthropic", "claude-opus-4-6", ["off", "minimal", "low", "medium", "high", "max"]),
            ("openai", "gpt-5", ["minimal", "low", "medium", "high"]),
            ("openai", "gpt-4.1", ["off"])):
        await call(pi.client, "pi.setModel", {"uri": uri, "provider": provider, "modelId": model})
        paged = await call(pi.client, "pi.previewContext", {"uri": uri, "page": 1})
        assert paged["thinkingLevels"] == levels, model


def levelless_session(folder: Path, name: str) -> Path:
    """A session with two exchanges and no model or thinking level entry (an older or
    hand-made one), as pi 1.6 resumes it: its level is the default's."""
    header = json.loads(EXAMPLE_SESSION.read_text().splitlines()[0])
    usage = {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}
    entries: list[dict[str, Any]] = [{**header, "id": name, "cwd": str(folder)}]
    parent = None
    for number in (1, 2):
        for role, content in (("user", [{"type": "text", "text": f"question {number}"}]),
                              ("assistant", [{"type": "text", "text": f"answer {number}"}])):
            stamp = f"2026-01-01T00:00:0{len(entries)}.000Z"
            message: dict[str, Any] = {"role": role, "content": content,
                                       "timestamp": 1767225600000 + len(entries) * 1000}
            if role == "assistant":
                message |= {"api": "anthropic-messages", "provider": "anthropic",
                            "model": DEFAULT_MODEL, "usage": usage, "stopReason": "stop"}
            entry_id = f"{role[0]}{number}{name[:6]}"
            entries.append({"type": "message", "id": entry_id, "parentId": parent,
                            "timestamp": stamp, "message": message})
            parent = entry_id
    path = folder / ".pi" / "sessions" / f"{name}.jsonl"
    path.write_text("".join(json.dumps(entry) + "\n" for entry in entries))
    return path


async def test_the_prompt_is_written_with_the_id_its_answer_names(
        pi: Pi, fake: FakeAnthropic) -> None:
    """pi.prompt's answer names the id its prompt's entry is written with (promptId): an editor
    whose server stopped before the turn's events reached it finds the prompt by it, by the
    head of its line, however much code and how many images the line holds past it."""
    path = levelless_session(pi.main, "promptid")
    uri = path.as_uri()
    before = len(lines(path))
    fake.script(text_reply("noted"))
    since = pi.mark()
    answer = await call(pi.client, "pi.prompt", {"uri": uri, "text": "find me"})
    assert "error" not in event_types(await wait_events(pi, answer["turnId"], since))
    [prompt] = [e for e in lines(path)[before:] if e["type"] == "message"
                and e["message"]["role"] == "user"]
    assert prompt["id"] == answer["promptId"]
    head = f'{{"type":"message","id":"{answer["promptId"]}",'
    assert any(line.startswith(head) for line in path.read_text().splitlines()[before:])


async def test_a_prompt_on_a_path_with_no_level_records_it_first_as_pi_resumes_one(
        pi: Pi, fake: FakeAnthropic) -> None:
    """A prompt on a path with messages but no thinking_level_change wrote none, where pi 1.6
    records the level in force on resuming such a session there (sdk.js: appendThinkingLevel-
    Change when the branch has none), before its prompt: so does `pi-lsp run`. pi resumes only
    at the file's leaf: after a move (navigateTree writes no level, nor does its prompt on a
    path without one) none is written, as at the top of a session (no message on the path),
    where the server keeps the session's own, as the README says."""
    path = levelless_session(pi.main, "levelless")
    uri = path.as_uri()

    async def prompt(text: str) -> list[dict[str, Any]]:
        before = len(lines(path))
        level = (await call(pi.client, "pi.previewContext", {"uri": uri}))["thinkingLevel"]
        fake.script(text_reply(f"reply to {text}"))
        since = pi.mark()
        turn_id = (await call(pi.client, "pi.prompt", {"uri": uri, "text": text}))["turnId"]
        assert "error" not in event_types(await wait_events(pi, turn_id, since))
        written = lines(path)[before:]
        for entry in written:
            if entry["type"] == "thinking_level_change":
                assert entry["thinkingLevel"] == level
        return written

    def kinds(entries: list[dict[str, Any]]) -> list[str]:
        return [e["message"]["role"] if e["type"] == "message" else e["type"] for e in entries]

    leaf = lines(path)[-1]["id"]
    written = await prompt("go on")  # the system prompt is declared, as at any first prompt
    assert kinds(written) == ["thinking_level_change", "system", "user", "assistant"]
    assert written[0]["parentId"] == leaf
    assert kinds(await prompt("and again")) == ["user", "assistant"]
    await call(pi.client, "pi.branch", {"uri": uri, "targetId": "u2levell"})  # to question 2
    move = lines(path)[-1]
    written = await prompt("instead")
    assert kinds(written) == ["system", "user", "assistant"]  # the path declares no prompt
    assert written[0]["parentId"] == move["id"]  # the leaf move under answer 1
    await call(pi.client, "pi.branch", {"uri": uri, "targetId": "u1levell"})  # the top
    assert "thinking_level_change" not in kinds(await prompt("from the top"))


async def test_a_failed_branch_summary_leaves_the_leaf_where_pi_would_resume(
        pi: Pi, fake: FakeAnthropic) -> None:
    """A branch summary that failed counted as a move of the leaf, so the next prompt, still
    at the file's leaf, recorded no level where pi 1.6 (resuming there) records one."""
    path = levelless_session(pi.main, "unmoved")
    uri = path.as_uri()
    fake.script(error_reply(400, "invalid_request_error", "no summary today"))
    failed = await job_done(pi, "pi.branchWithSummary", {"uri": uri, "targetId": "u2unmove"})
    assert failed["ok"] is False, failed
    before = len(lines(path))
    fake.script(text_reply("answer 3"))
    since = pi.mark()
    turn_id = (await call(pi.client, "pi.prompt", {"uri": uri, "text": "go on"}))["turnId"]
    assert "error" not in event_types(await wait_events(pi, turn_id, since))
    assert lines(path)[before]["type"] == "thinking_level_change"


async def test_set_thinking_level_answers_the_level_recorded(pi: Pi, fake: FakeAnthropic,
                                                             tmp_path: Path) -> None:
    """The answer was `{}`, so the editors said the level asked for ("max") while pi's clamped
    level ("high": Claude 4.5 offers no max) was the one recorded."""
    uri = await fork(pi)
    await call(pi.client, "pi.setThinkingLevel", {"uri": uri, "level": "low"})
    assert await call(pi.client, "pi.setThinkingLevel", {"uri": uri, "level": "max"}) == \
        {"level": "high", "written": True, "queued": False}
    assert lines(path_of(uri))[-1]["thinkingLevel"] == "high"
    assert await call(pi.client, "pi.setThinkingLevel", {"uri": uri, "level": "xhigh"}) == \
        {"level": "high", "written": False, "queued": False}  # in force already
    fake.script(held_text(tmp_path / "asked"))
    since = pi.mark()
    turn_id = (await call(pi.client, "pi.prompt", {"uri": uri, "text": "go"}))["turnId"]
    await wait_event(pi, turn_id, "message_update", since)
    assert await call(pi.client, "pi.setThinkingLevel", {"uri": uri, "level": "max"}) == \
        {"level": None, "written": False, "queued": True}  # the turn's end decides it
    await call(pi.client, "pi.abort", {"uri": uri})
    (tmp_path / "asked").touch()
    await wait_events(pi, turn_id, since)


async def test_a_queued_thinking_level_after_a_queued_model_is_not_promised(
        pi: Pi, fake: FakeAnthropic, tmp_path: Path) -> None:
    """During a turn, `medium` after a queued setModel to gpt-4.1 was answered `medium` (the
    model of now), while its write at the turn's end clamped against gpt-4.1: `off`."""
    uri = await fork(pi)
    fake.script(held_text(tmp_path / "queued"))
    since = pi.mark()
    turn_id = (await call(pi.client, "pi.prompt", {"uri": uri, "text": "go"}))["turnId"]
    await wait_event(pi, turn_id, "message_update", since)
    await call(pi.client, "pi.setModel", {"uri": uri, "provider": "openai", "modelId": "gpt-4.1"})
    assert await call(pi.client, "pi.setThinkingLevel", {"uri": uri, "level": "medium"}) == \
        {"level": None, "written": False, "queued": True}
    (tmp_path / "queued").touch()
    await wait_events(pi, turn_id, since)
    written = [e for e in lines(path_of(uri)) if e["type"] == "thinking_level_change"]
    assert written[-1]["thinkingLevel"] == "off"  # what the queue wrote: gpt-4.1 offers no other


async def test_set_model_refuses_a_model_that_exists_nowhere(pi: Pi) -> None:
    """Any provider and id was written as a model_change ("" and "" too), and the next turn
    failed "provider '' is not configured": refused with pi 1.6's words, nothing written."""
    uri = await fork(pi)
    before = await tree_nodes(pi, uri)
    for provider, model in (("nope", "nope"), ("", ""), ("anthropic", "")):
        error = await call_error(pi.client, "pi.setModel",
                                 {"uri": uri, "provider": provider, "modelId": model})
        assert (error.code, error.message) == (INVALID_PARAMS,
                                               f"Model not found: {provider}/{model}")
    assert await tree_nodes(pi, uri) == before
    # A known model whose provider has no key yet is taken (no OpenAI key here).
    assert await call(pi.client, "pi.setModel",
                      {"uri": uri, "provider": "openai", "modelId": "gpt-4.1"}) == {}


async def test_set_model_takes_an_id_the_catalog_lacks(pi: Pi) -> None:
    """The editors let a user type any provider/id ("Other…", `:PiModel`), as `run --model`
    takes one; refusing ids outside the catalog broke a model newer than it or a dated id."""
    uri = await fork(pi)
    assert await call(pi.client, "pi.setModel", {
        "uri": uri, "provider": "anthropic", "modelId": "claude-3-7-sonnet-20250219"}) == {}
    preview = await call(pi.client, "pi.previewContext", {"uri": uri, "layer": "request"})
    assert preview["request"]["model"] == "claude-3-7-sonnet-20250219"


async def test_edit_context_remove_replace_and_undo(pi: Pi) -> None:
    uri = copy_session(pi.main, "edits")
    before = await call(pi.client, "pi.previewContext", {"uri": uri})
    since = pi.mark()
    removed = await call(pi.client, "pi.editContext",
                         {"uri": uri, "targetId": "145bca81", "replacement": None})
    last = lines(path_of(uri))[-1]
    assert last == {"type": "context_edit", "id": removed["editId"], "parentId": before["leafId"],
                    "timestamp": last["timestamp"], "targetId": "145bca81",
                    "replacement": None}
    await wait_note(pi, SESSION_CHANGED, lambda p: path_of(p["uri"]) == path_of(uri) and
                    p["leafId"] == removed["editId"], since)
    replaced = await call(pi.client, "pi.editContext", {
        "uri": uri, "targetId": "456798a9", "replacement": {"content": "I added the test."}})
    assert lines(path_of(uri))[-1]["replacement"] == {
        "content": [{"type": "text", "text": "I added the test."}]}
    preview = await call(pi.client, "pi.previewContext", {"uri": uri})
    assert "145bca81" not in [m["entryId"] for m in preview["messages"]]
    assert preview["totalTokens"] < before["totalTokens"]
    assert [(e["targetId"], e["editId"], e["kind"], e["tokensBefore"], e["tokensAfter"])
            for e in preview["edits"]] == [
        ("145bca81", removed["editId"], "omitted", 301, 0),
        ("456798a9", replaced["editId"], "replaced", 399, 5)]
    assert [m["entryId"] for m in preview["messages"] if m.get("edited")] == ["456798a9"]
    paged = await call(pi.client, "pi.previewContext", {"uri": uri, "page": 2})
    assert paged["edits"] == preview["edits"]  # positions in the whole list, as the pages' starts
    assert "## ~~toolResult~~ · removed from the context · 301 → 0 tokens · `145bca81`" in \
        preview["markdown"]
    undone = await call(pi.client, "pi.undoContextEdit", {"uri": uri, "targetId": "145bca81"})
    assert lines(path_of(uri))[-1]["id"] == undone["editId"]
    preview = await call(pi.client, "pi.previewContext", {"uri": uri})
    assert [e["targetId"] for e in preview["edits"]] == ["456798a9"]
    assert "145bca81" in [m["entryId"] for m in preview["messages"]]
    written = path_of(uri).read_bytes()
    for argument, words in (
            ({"targetId": COMPACTION, "replacement": None}, "is a compaction entry"),
            ({"targetId": FORK_QUESTION, "replacement": None}, "not on the current branch")):
        error = await call_error(pi.client, "pi.editContext", {"uri": uri, **argument})
        assert error.code == FAILED and words in error.message, error.message
    error = await call_error(pi.client, "pi.undoContextEdit",
                             {"uri": uri, "targetId": "145bca81"})
    assert error.code == FAILED and "no context edit in force" in error.message
    assert path_of(uri).read_bytes() == written


# -- bad input -------------------------------------------------------------------------------

MISSING = "file:///nonexistent/pi-lsp/none.jsonl"

BAD_INPUT: list[tuple[str, str, Callable[[str], list[Any]], str]] = [
    ("missing-uri", "pi.getTree", lambda uri: [{}], "uri"),
    ("missing-uri-branch", "pi.branch", lambda uri: [{"targetId": FORK_QUESTION}], "uri"),
    ("uri-not-a-string", "pi.getTree", lambda uri: [{"uri": 42}], "uri"),
    ("target-not-a-string", "pi.label",
     lambda uri: [{"uri": uri, "targetId": 7, "label": "x"}], "targetId"),
    ("dry-run-not-a-bool", "pi.compact", lambda uri: [{"uri": uri, "dryRun": "yes"}], "dryRun"),
    ("unknown-layer", "pi.previewContext", lambda uri: [{"uri": uri, "layer": "wire"}], "layer"),
    ("unknown-level", "pi.setThinkingLevel", lambda uri: [{"uri": uri, "level": "extra"}], "level"),
    ("unknown-delivery", "pi.prompt",
     lambda uri: [{"uri": uri, "text": "hi", "delivery": "later"}], "delivery"),
    ("label-missing", "pi.label", lambda uri: [{"uri": uri, "targetId": COMPACTION}], "label"),
    ("extra-key", "pi.getTree", lambda uri: [{"uri": uri, "leafID": "x"}], "leafID"),
    ("snake-case-key", "pi.diffContext",
     lambda uri: [{"uri": uri, "from_leaf_id": DEAD_END_TIP, "toLeafId": BRANCH_B_TIP}],
     "from_leaf_id"),
    ("extra-key-no-args", "pi.listSessions", lambda uri: [{"verbose": True}], "verbose"),
    ("not-an-object", "pi.getTree", lambda uri: [uri], "object"),
    ("two-arguments", "pi.getTree", lambda uri: [{"uri": uri}, {"uri": uri}], "one"),
    ("unknown-branch-target", "pi.branch", lambda uri: [{"uri": uri, "targetId": "deadbeef"}],
     "deadbeef"),
    ("unknown-summary-target", "pi.branchWithSummary",
     lambda uri: [{"uri": uri, "targetId": "deadbeef"}], "deadbeef"),
    ("unknown-label-target", "pi.label",
     lambda uri: [{"uri": uri, "targetId": "deadbeef", "label": "x"}], "deadbeef"),
    ("unknown-preview-leaf", "pi.previewContext",
     lambda uri: [{"uri": uri, "leafId": "deadbeef"}], "deadbeef"),
    ("unknown-diff-leaf", "pi.diffContext",
     lambda uri: [{"uri": uri, "fromLeafId": "deadbeef", "toLeafId": BRANCH_B_TIP}], "deadbeef"),
    ("unknown-fork-leaf", "pi.fork", lambda uri: [{"uri": uri, "leafId": "deadbeef"}],
     "deadbeef"),
    ("diff-leaf-missing", "pi.diffContext",
     lambda uri: [{"uri": uri, "toLeafId": DEAD_END_TIP}], "fromLeafId"),
    ("image-without-type", "pi.prompt",
     lambda uri: [{"uri": uri, "text": "see", "images": [{"data": "AAAA"}]}], "mimeType"),
    ("image-not-base64", "pi.prompt", lambda uri: [{"uri": uri, "text": "see", "images": [
        {"data": "AAAA", "mimeType": "image/png"}, {"data": "a b!", "mimeType": "image/png"}]}],
     "`data` is not base64 (Only base64 data is allowed) - at `$.images[1]`"),
    ("not-a-file-uri", "pi.getTree", lambda uri: [{"uri": "untitled:Untitled-1"}], "uri"),
    ("folder-not-a-file-uri", "pi.newSession", lambda uri: [{"folderUri": "untitled:x"}],
     "folderUri"),
    ("http-uri", "pi.check", lambda uri: [{"uri": "https://example.com/s.jsonl"}], "uri"),
    ("nul-in-uri", "pi.getTree", lambda uri: [{"uri": uri.replace(".jsonl", "%00.jsonl")}],
     "`uri`"),
    ("missing-file", "pi.getTree", lambda uri: [{"uri": MISSING}], "none.jsonl"),
    ("missing-file-prompt", "pi.prompt", lambda uri: [{"uri": MISSING, "text": "hi"}],
     "none.jsonl"),
    ("missing-file-abort", "pi.abort", lambda uri: [{"uri": MISSING}], "none.jsonl"),
    ("unknown-edit-target", "pi.editContext",
     lambda uri: [{"uri": uri, "targetId": "deadbeef", "replacement": None}], "deadbeef"),
    ("unknown-undo-target", "pi.undoContextEdit",
     lambda uri: [{"uri": uri, "targetId": "deadbeef"}], "deadbeef"),
    ("edit-without-replacement", "pi.editContext",
     lambda uri: [{"uri": uri, "targetId": "145bca81"}], "replacement"),
    ("edit-content-not-text", "pi.editContext",
     lambda uri: [{"uri": uri, "targetId": "145bca81", "replacement": {"content": 7}}],
     "content"),
    ("edit-unknown-block", "pi.editContext",
     lambda uri: [{"uri": uri, "targetId": "145bca81",
                   "replacement": {"content": [{"type": "toolCall"}]}}], "content"),
]


@pytest.mark.parametrize(("command", "arguments", "named"),
                         [case[1:] for case in BAD_INPUT], ids=[case[0] for case in BAD_INPUT])
async def test_bad_input_is_invalid_params(pi: Pi, command: str,
                                           arguments: Callable[[str], list[Any]],
                                           named: str) -> None:
    before = pi.session.read_bytes()
    error = await call_error(pi.client, command, *arguments(pi.uri))
    assert error.code == INVALID_PARAMS, (error.code, error.message)
    assert named in error.message
    assert pi.session.read_bytes() == before
    # and the server keeps answering
    assert await call(pi.client, "pi.check", {"uri": pi.uri}) == {"problems": []}


async def test_a_file_that_is_not_a_session_is_named_plainly(pi: Pi) -> None:
    notes = pi.main / ".pi" / "sessions" / "notes.jsonl"
    notes.write_text('{"hello": "world"}\n', "utf-8")
    for command in ("pi.getTree", "pi.previewContext", "pi.prompt"):
        arguments = {"uri": notes.as_uri(), "text": "hi"} if command == "pi.prompt" \
            else {"uri": notes.as_uri()}
        error = await call_error(pi.client, command, arguments)
        assert error.code == INVALID_PARAMS, (error.code, error.message)
        assert error.message == f"{notes} is not a pi session file (it has no session header)"
    assert notes.read_text("utf-8") == '{"hello": "world"}\n'


async def test_unknown_command_answers_an_error(pi: Pi) -> None:
    with pytest.raises(JsonRpcException):
        await call(pi.client, "pi.noSuchCommand", {})
    assert (await call(pi.client, "pi.getTree", {"uri": pi.uri}))["leafId"] == BRANCH_B_TIP


# -- other writers ---------------------------------------------------------------------------

APPEND = textwrap.dedent("""
    import sys
    from pi_lsp.session.tree import SessionTree
    SessionTree.open(sys.argv[1]).append_custom("external", {"from": "another process"})
""")


async def appended_elsewhere(pi: Pi, uri: str) -> dict[str, Any]:
    """Append to the session from another process; the `pi/sessionChanged` that tells of it."""
    since = pi.mark()
    done = await asyncio.to_thread(subprocess.run, [sys.executable, "-c", APPEND,
                                                    str(path_of(uri))],
                                   env=SERVER_ENV, capture_output=True, text=True,
                                   timeout=PROCESS_CEILING_S)
    assert done.returncode == 0, done.stderr
    return await wait_note(pi, SESSION_CHANGED, lambda p: path_of(p["uri"]) == path_of(uri),
                           since)


async def test_external_append_is_seen(pi: Pi) -> None:
    uri = await fork(pi)
    count = len((await call(pi.client, "pi.getTree", {"uri": uri}))["nodes"])
    await watcher_caught_up(pi)
    note = await appended_elsewhere(pi, uri)
    assert note["entries"] == count + 1 and note["reloaded"] is False
    tree = await call(pi.client, "pi.getTree", {"uri": uri})
    assert tree["nodes"][-1]["type"] == "custom" and len(tree["nodes"]) == count + 1


async def test_deleted_session_is_forgotten(pi: Pi) -> None:
    uri = copy_session(pi.main, "doomed")
    await call(pi.client, "pi.getTree", {"uri": uri})
    await watcher_caught_up(pi)
    since = pi.mark()
    path_of(uri).unlink()
    await wait_note(pi, SESSIONS_CHANGED, since=since)
    error = await call_error(pi.client, "pi.getTree", {"uri": uri})
    assert error.code == INVALID_PARAMS and "doomed.jsonl" in error.message
    listed = (await call(pi.client, "pi.listSessions", {}))["sessions"]
    assert all(not s["uri"].endswith("doomed.jsonl") for s in listed)


async def test_rewritten_session_is_reloaded(pi: Pi) -> None:
    uri = copy_session(pi.main, "rewritten")
    assert len((await call(pi.client, "pi.getTree", {"uri": uri}))["nodes"]) == 56
    await watcher_caught_up(pi)
    since = pi.mark()
    shorter = EXAMPLE_SESSION.read_text().splitlines(keepends=True)[:10]
    path_of(uri).write_text("".join(shorter))  # another writer replaced the file
    note = await wait_note(pi, SESSION_CHANGED, lambda p: path_of(p["uri"]) == path_of(uri),
                           since)
    assert note["reloaded"] is True and note["entries"] == 9
    tree = await call(pi.client, "pi.getTree", {"uri": uri})
    assert len(tree["nodes"]) == 9 and tree["leafId"] == tree["nodes"][-1]["id"]


async def test_a_session_overwritten_with_garbage_leaves_the_folder_watched(pi: Pi) -> None:
    """Reading it again raised out of the watch, which ended: nothing another writer did in
    that folder was seen until a restart (found in review)."""
    uri = copy_session(pi.main, "garbled")
    await call(pi.client, "pi.getTree", {"uri": uri})
    await watcher_caught_up(pi)
    path_of(uri).write_text("not json at all\n")
    since = pi.mark()
    later = copy_session(pi.main, "later")
    await wait_note(pi, SESSIONS_CHANGED, since=since)
    listed = (await call(pi.client, "pi.listSessions", {}))["sessions"]
    assert any(s["uri"].endswith("later.jsonl") for s in listed)
    count = len((await call(pi.client, "pi.getTree", {"uri": later}))["nodes"])
    note = await appended_elsewhere(pi, later)
    assert note["entries"] == count + 1


async def test_a_file_named_in_no_utf8_stops_neither_the_listing_nor_the_watch(
        tmp_path: Path, fake: FakeAnthropic) -> None:
    """`bad\\xff.jsonl` made pi.listSessions fail whole, and the first event on it ended the
    folder's watch for good (watchfiles: "Unable to decode path"): no session made after it was
    announced."""
    shutil.copytree(EXAMPLE, tmp_path / "main")
    folder = tmp_path / "main" / ".pi" / "sessions"
    bad = Path(os.fsdecode(os.fsencode(folder) + b"/bad\xff.jsonl"))
    shutil.copyfile(EXAMPLE_SESSION, bad)
    async with own_server() as client:
        pi = await connect(client, CLIENTS[0], tmp_path, init_options(fake), folders=("main",))
        listed = (await call(client, "pi.listSessions", {}))["sessions"]
        assert [path_of(s["uri"]) for s in listed] == [folder / EXAMPLE_SESSION.name]
        await watcher_caught_up(pi)
        with bad.open("ab") as handle:  # an event on it
            handle.write(b"\n")
        since = pi.mark()
        later = copy_session(pi.main, "later")
        await wait_note(pi, SESSIONS_CHANGED, since=since)
        listed = (await call(client, "pi.listSessions", {}))["sessions"]
        assert later in [s["uri"] for s in listed]
        await asyncio.wait_for(client.shutdown_session(), CEILING_S)


async def test_names_labels_ids_and_paths_a_session_file_holds_are_sent_cut(
        tmp_path: Path, fake: FakeAnthropic) -> None:
    """pi.listSessions sent each session's name, id, cwd and parentSession whole, and pi.getTree
    each label and timestamp: eight sessions named with 40 MB names (312 KB as a .tar.gz) made
    every listing 305 MB. They are cut past what a real one holds, marked with "…"; the file
    keeps them, also when an editor sends a cut name or label back unchanged."""
    big = 3_000_000
    header = {"type": "session", "version": 3, "id": "i" * big,
              "timestamp": "2026-11-01T00:00:00.000Z", "cwd": "/c" * big,
              "parentSession": "/p" * big}
    entries = [{"type": "message", "id": "u1", "parentId": None,
                "timestamp": "2026-11-01T00:00:01.000Z" + "t" * big,
                "message": {"role": "user", "content": "hi", "timestamp": 1761955201000}},
               {"type": "session_info", "id": "n1", "parentId": "u1",
                "timestamp": "2026-11-01T00:00:02.000Z", "name": "N" * big},
               {"type": "label", "id": "l1", "parentId": "n1", "targetId": "u1",
                "timestamp": "2026-11-01T00:00:03.000Z", "label": "L" * big},
               {"type": "label", "id": "l2", "parentId": "l1", "targetId": "n1",
                "timestamp": "2026-11-01T00:00:04.000Z", "label": "l" * LABEL_CHARS}]
    shutil.copytree(EXAMPLE, tmp_path / "main")
    path = tmp_path / "main" / ".pi" / "sessions" / "huge.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in (header, *entries)))
    written = path.read_bytes()
    async with own_server() as client:
        await connect(client, CLIENTS[0], tmp_path, init_options(fake), folders=("main",))
        listed = (await call(client, "pi.listSessions", {}))["sessions"]
        huge = next(s for s in listed if path_of(s["uri"]) == path.resolve())
        assert len(json.dumps(listed)) < 50_000
        assert (huge["name"], huge["id"]) == ("N" * (NAME_CHARS - 1) + "…",
                                              "i" * (ID_CHARS - 1) + "…")
        assert huge["cwd"] == ("/c" * PATH_CHARS)[:PATH_CHARS - 1] + "…"
        assert huge["parentSession"] == ("/p" * PATH_CHARS)[:PATH_CHARS - 1] + "…"
        tree = await call(client, "pi.getTree", {"uri": path.as_uri()})
        labels = {n["id"]: n["label"] for n in tree["nodes"]}
        assert len(json.dumps(tree)) < 50_000, [len(json.dumps(n)) for n in tree["nodes"]]
        assert labels["u1"] == "L" * (LABEL_CHARS - 1) + "…"
        assert labels["n1"] == "l" * LABEL_CHARS  # as long as a label is sent whole
        stamp = next(n["timestamp"] for n in tree["nodes"] if n["id"] == "u1")
        assert stamp == ("2026-11-01T00:00:01.000Z" + "t" * big)[:TIMESTAMP_CHARS - 1] + "…"
        # Both editors prefill Rename and Label with what was sent: confirmed unchanged, the
        # cut text would be written over the whole one.
        await call(client, "pi.setName", {"uri": path.as_uri(), "name": huge["name"]})
        await call(client, "pi.label", {"uri": path.as_uri(), "targetId": "u1",
                                        "label": labels["u1"]})
        await asyncio.wait_for(client.shutdown_session(), CEILING_S)
    assert path.read_bytes() == written


async def test_an_append_to_a_session_no_editor_holds_changes_the_listing(
        tmp_path: Path, fake: FakeAnthropic) -> None:
    """The pi CLI naming a session no editor had open sent nothing: both editors kept its old
    title, entry count and place in the list (only a file that came or went was told)."""
    shutil.copytree(EXAMPLE, tmp_path / "main")
    session = tmp_path / "main" / ".pi" / "sessions" / EXAMPLE_SESSION.name
    async with own_server() as client:
        pi = await connect(client, CLIENTS[0], tmp_path, init_options(fake), folders=("main",))
        since, names, deadline = pi.mark(), 0, time.monotonic() + CEILING_S
        while not pi.of(SESSIONS_CHANGED, since):  # again until seen: the watch may not be on
            assert time.monotonic() < deadline, "the append was never announced"
            names += 1
            SessionTree.open(str(session)).append_session_info(f"Named by the CLI {names}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wait_note(pi, SESSIONS_CHANGED, since=since), 1)
        listed = (await call(client, "pi.listSessions", {}))["sessions"]
        assert [(s["title"], s["entryCount"]) for s in listed] == [
            (f"Named by the CLI {names}", len(lines(session)))]
        await asyncio.wait_for(client.shutdown_session(), CEILING_S)


async def watch_recorded(folder: Path, notice_interval: float
                         ) -> tuple[SessionWatch, list[Path], list[list[Path]]]:
    """A watch of `folder`, once it has taken in the files there; the files it took in, and
    those taken in by each listing told."""
    seen: list[Path] = []
    told: list[list[Path]] = []
    watch = SessionWatch(seen.append, lambda: told.append(list(seen)), lambda *_: None,
                         notice_interval)
    watch.follow([folder])
    there = len(list(folder.glob("*.jsonl")))
    await until(lambda: len(seen) >= there, "the files there to be taken in")
    return watch, seen, told


async def appended_and_seen(path: Path, seen: list[Path]) -> None:
    """Append to the session, again until the watch takes it in (it may not have begun)."""
    before = len(seen)
    while path not in seen[before:]:
        SessionTree.open(str(path)).append_custom("external")
        with contextlib.suppress(AssertionError):
            await until(lambda: path in seen[before:], "the append", ceiling=1)


async def test_sessions_there_when_watching_begins_are_no_change(tmp_path: Path) -> None:
    """Each file in the folder when the watch began was told as one that came: 1,987
    pi/sessionsChanged for 2,000 sessions at start, each making the editors list again."""
    for n in range(20):
        shutil.copyfile(EXAMPLE_SESSION, tmp_path / f"old-{n}.jsonl")
    watch, seen, told = await watch_recorded(tmp_path, notice_interval=0)
    try:
        await appended_and_seen(tmp_path / "old-0.jsonl", seen)
        await until(lambda: told, "the append to be told")
        assert len(told[0]) > 20, "told before the change"
    finally:
        await watch.stop()


async def test_changes_come_to_the_editors_at_most_once_an_interval(tmp_path: Path) -> None:
    """Each file that came was told on its own (copying 500 sessions sent 500
    pi/sessionsChanged), and a session appended to every 100 ms would make the editors list
    ten times a second: one batch is told once, and nothing more until the interval ends."""
    session = tmp_path / "streamed.jsonl"
    shutil.copyfile(EXAMPLE_SESSION, session)
    watch, seen, told = await watch_recorded(tmp_path, notice_interval=CEILING_S)
    try:
        await appended_and_seen(session, seen)  # told at once, and the interval begins
        copies = [tmp_path / f"copy-{n}.jsonl" for n in range(50)]
        for copy in copies:
            shutil.copyfile(EXAMPLE_SESSION, copy)
        await until(lambda: set(copies) <= set(seen), "the copies to be taken in")
        for _ in range(5):
            await appended_and_seen(session, seen)
        assert len(told) == 1, told
    finally:
        await watch.stop()


async def test_the_last_change_of_an_interval_is_told_when_it_ends(tmp_path: Path) -> None:
    """What changed while announcements wait reaches the editors at the interval's end."""
    session = tmp_path / "streamed.jsonl"
    shutil.copyfile(EXAMPLE_SESSION, session)
    watch, seen, told = await watch_recorded(tmp_path, notice_interval=0.5)
    try:
        await appended_and_seen(session, seen)
        await until(lambda: told, "the first append to be told")
        await appended_and_seen(session, seen)
        last = len(seen)
        await until(lambda: len(told[-1]) >= last, "the last append to be told")
    finally:
        await watch.stop()


@pytest.mark.parametrize("named_by", ["the user", "a project trusted later"])
async def test_the_session_dir_pi_uses_is_listed_and_followed(tmp_path: Path, fake: FakeAnthropic,
                                                              named_by: str) -> None:
    """The folder a `sessionDir` names (the user's settings.json, a trusted project's), where the
    pi CLI keeps the sessions it starts, was neither listed nor watched: none of them showed in
    the editor. One named once the server runs is watched from the next listing, or trust."""
    shutil.copytree(EXAMPLE, tmp_path / "main")
    agent, folder = tmp_path / "agent", tmp_path / "pi-sessions"  # pi makes the folder later
    agent.mkdir()
    async with own_server({"PI_CODING_AGENT_DIR": str(agent)}) as client:
        pi = await connect(client, CLIENTS[0], tmp_path, init_options(fake), folders=("main",))
        settings = agent if named_by == "the user" else pi.main / ".pi"
        (settings / "settings.json").write_text(json.dumps({"sessionDir": str(folder)}))
        if named_by == "the user":
            await call(client, "pi.listSessions", {})
        else:
            await call(client, "pi.setTrust", {"folderUri": pi.main.as_uri(), "trusted": True,
                                               "save": False})
        since = pi.mark()
        folder.mkdir()
        session, header, *rest = folder / "by-pi.jsonl", *EXAMPLE_SESSION.read_text().splitlines()
        started_here = json.dumps({**json.loads(header), "cwd": str(pi.main.resolve())})
        session.write_text("\n".join([started_here, *rest]) + "\n")
        await wait_note(pi, SESSIONS_CHANGED, since=since)
        listed = (await call(client, "pi.listSessions", {}))["sessions"]
        assert session in [path_of(s["uri"]) for s in listed]
        count = len((await call(client, "pi.getTree", {"uri": session.as_uri()}))["nodes"])
        since = pi.mark()
        SessionTree.open(str(session)).append_custom("pi wrote this")
        await wait_note(pi, SESSION_CHANGED, lambda p: path_of(p["uri"]) == session and
                        p["entries"] == count + 1, since)
        await asyncio.wait_for(client.shutdown_session(), CEILING_S)


async def test_two_servers_see_each_other(pi: Pi, fake: FakeAnthropic) -> None:
    uri = await fork(pi)
    other_client = await SERVER.start()
    try:
        other = await connect(other_client, pi.capabilities, pi.root, init_options(fake))
        count = len((await call(other.client, "pi.getTree", {"uri": uri}))["nodes"])
        await call(pi.client, "pi.getTree", {"uri": uri})
        await watcher_caught_up(other)
        since_other, since_pi = other.mark(), pi.mark()
        await call(pi.client, "pi.label", {"uri": uri, "targetId": COMPACTION, "label": "one"})
        seen = await wait_note(other, SESSION_CHANGED, lambda p: path_of(p["uri"]) ==
                               path_of(uri) and p["entries"] == count + 1, since_other)
        assert seen["reloaded"] is False
        await call(other.client, "pi.setName", {"uri": uri, "name": "shared"})
        await wait_note(pi, SESSION_CHANGED, lambda p: path_of(p["uri"]) == path_of(uri) and
                        p["entries"] == count + 2, since_pi)
        nodes = (await call(pi.client, "pi.getTree", {"uri": uri}))["nodes"]
        assert [n["type"] for n in nodes[-2:]] == ["label", "session_info"]
        other_nodes = (await call(other.client, "pi.getTree", {"uri": uri}))["nodes"]
        assert other_nodes == nodes
    finally:
        await asyncio.wait_for(other_client.shutdown_session(), CEILING_S)
        await other_client.stop()


# -- turns -----------------------------------------------------------------------------------

TOOL_TURN_ORDER = [
    "agent_start", "turn_start", "message_start", "message_end",  # the prompt
    "message_start", "message_update", "message_end",  # the reply with the call
    "tool_execution_start", "tool_execution_end", "message_start", "message_end",
    "turn_end", "save_point", "turn_start",
    "message_start", "message_update", "message_end", "turn_end", "save_point", "agent_end",
]


async def test_prompt_runs_a_tool_turn_with_approval(pi: Pi, fake: FakeAnthropic) -> None:
    uri = await new_session(pi)
    fake.script(
        tool_reply([("toolu_1", "bash", {"command": "echo hello-from-bash"})], text="Running."),
        text_reply("It printed ", "hello-from-bash."),
    )
    pi.answer, asked = "Allow", len(pi.asked)
    entries_before = len(await tree_nodes(pi, uri))
    since = pi.mark()
    result = await call(pi.client, "pi.prompt", {"uri": uri, "text": "say hello"})
    turn_id = result["turnId"]
    assert isinstance(turn_id, str) and turn_id
    events = await wait_events(pi, turn_id, since)
    kinds = event_types(events)
    assert "error" not in kinds, events
    assert is_subsequence(TOOL_TURN_ORDER, kinds), kinds
    assert kinds[0] == "agent_start" and kinds[-1] == "agent_end" and kinds.count("agent_end") == 1
    assert all(p["uri"] == uri for p in pi.of(TURN, since) if p["turnId"] == turn_id)
    updates = [e for e in events if e["type"] == "message_update"]
    assert all(e["deltas"] for e in updates)
    streamed = "".join(d["delta"] for e in updates for d in e["deltas"]
                       if d["type"] == "text_delta")
    assert "Running." in streamed and "It printed hello-from-bash." in streamed
    start = next(e for e in events if e["type"] == "tool_execution_start")
    end = next(e for e in events if e["type"] == "tool_execution_end")
    assert start["toolName"] == "bash" and start["args"] == {"command": "echo hello-from-bash"}
    assert end["isError"] is False
    assert len(pi.asked) == asked + 1 and "echo hello-from-bash" in pi.asked[-1]
    save_points = [e for e in events if e["type"] == "save_point"]
    assert len(save_points) == 2
    # persisted: the declared prompt and tools, the prompt, the call, its result, the answer
    assert message_roles(path_of(uri)) == ["system", "user", "assistant", "toolResult",
                                           "assistant"]
    entries = [e["message"] for e in lines(path_of(uri)) if e["type"] == "message"]
    assert [m.get("stopReason") for m in entries] == [None, None, "toolUse", None, "stop"]
    requests = fake.message_requests()
    assert len(requests) == 2
    [result_block] = tool_results(requests[1])
    assert result_block["tool_use_id"] == "toolu_1"
    assert not result_block.get("is_error")
    assert "hello-from-bash" in json.dumps(result_block["content"])
    tree = await call(pi.client, "pi.getTree", {"uri": uri})
    assert [n["role"] for n in tree["nodes"] if n["type"] == "message"] == \
        ["system", "user", "assistant", "toolResult", "assistant"]
    # one pi/sessionChanged per entry the turn wrote (the declared prompt and tools, the
    # prompt, the call, its result, the answer); the watcher adds none
    await watcher_caught_up(pi)
    counts = [p["entries"] for p in pi.of(SESSION_CHANGED, since)
              if path_of(p["uri"]) == path_of(uri)]
    assert counts == list(range(entries_before + 1, entries_before + 6)), counts
    # the turn is also a work-done progress: begun with the prompt, a report per tool, ended
    reports = next(r for r in pi.client.progress_reports.values()
                   if r and isinstance(r[0], types.WorkDoneProgressBegin)
                   and r[0].title == "pi" and r[0].message == "say hello")
    assert isinstance(reports[-1], types.WorkDoneProgressEnd)
    assert any(isinstance(r, types.WorkDoneProgressReport) and r.message == "running bash"
               for r in reports)


async def test_denied_tool_is_an_error_the_model_sees(pi: Pi, fake: FakeAnthropic) -> None:
    uri = await new_session(pi)
    marker = pi.main / "denied-marker"
    fake.script(
        tool_reply([("toolu_2", "bash", {"command": f"touch {marker}"})]),
        text_reply("Understood."),
    )
    pi.answer = "Deny"
    try:
        since = pi.mark()
        turn_id = (await call(pi.client, "pi.prompt", {"uri": uri, "text": "touch it"}))["turnId"]
        events = await wait_events(pi, turn_id, since)
    finally:
        pi.answer = "Allow"
    assert "error" not in event_types(events), events
    end = next(e for e in events if e["type"] == "tool_execution_end")
    assert end["isError"] is True
    assert not marker.exists()
    requests = fake.message_requests()
    assert len(requests) == 2
    [result_block] = tool_results(requests[1])
    assert result_block["tool_use_id"] == "toolu_2" and result_block["is_error"] is True
    assert "denied" in json.dumps(result_block["content"])
    assert message_roles(path_of(uri)) == ["system", "user", "assistant", "toolResult",
                                           "assistant"]


async def test_abort_during_a_slow_stream(pi: Pi, fake: FakeAnthropic, tmp_path: Path) -> None:
    uri = await new_session(pi)
    assert await call(pi.client, "pi.abort", {"uri": uri}) == {"aborted": False}
    fake.script(held_text(tmp_path / "aborted", words=60))
    since = pi.mark()
    turn_id = (await call(pi.client, "pi.prompt", {"uri": uri, "text": "talk slowly"}))["turnId"]
    await wait_event(pi, turn_id, "message_update", since)
    assert await call(pi.client, "pi.abort", {"uri": uri}) == {"aborted": True}
    (tmp_path / "aborted").touch()
    events = await wait_events(pi, turn_id, since)
    assert event_types(events)[-1] == "agent_end"
    last = lines(path_of(uri))[-1]
    assert last["type"] == "message" and last["message"]["role"] == "assistant"
    assert last["message"]["stopReason"] == "aborted"
    # the session is idle again: a new prompt is accepted
    fake.script(text_reply("again"))
    since = pi.mark()
    turn_id = (await call(pi.client, "pi.prompt", {"uri": uri, "text": "again"}))["turnId"]
    assert event_types(await wait_events(pi, turn_id, since))[-1] == "agent_end"


async def test_abort_during_a_tool(pi: Pi, fake: FakeAnthropic) -> None:
    uri = await new_session(pi)
    pid_file, marker = pi.root / "slow-tool.pid", pi.root / "slow-tool-finished"  # not in main
    command = f"sleep 300 & echo $! > {pid_file}; wait; touch {marker}"
    fake.script(tool_reply([("toolu_4", "bash", {"command": command})]))
    since = pi.mark()
    turn_id = (await call(pi.client, "pi.prompt", {"uri": uri, "text": "wait"}))["turnId"]
    sleeping = await pid_in(pid_file)
    assert await call(pi.client, "pi.abort", {"uri": uri}) == {"aborted": True}
    events = await wait_events(pi, turn_id, since)
    assert event_types(events)[-1] == "agent_end"
    end = next(e for e in events if e["type"] == "tool_execution_end")
    assert end["isError"] is True
    assert message_roles(path_of(uri)) == ["system", "user", "assistant", "toolResult",
                                           "assistant"]
    *_, result, last = lines(path_of(uri))
    assert result["message"]["content"] == [{"type": "text", "text": "Command aborted"}]
    assert last["message"]["stopReason"] == "aborted"  # pi 1.6's turn after the aborted tool
    await gone(sleeping, "the aborted command")  # stopped, not left running
    assert not marker.exists()  # its shell went with it


def offline_in_workspace(pi: Pi, present: bool) -> None:
    """Add the `offline` folder to the workspace, or remove it."""
    folder = [types.WorkspaceFolder(uri=pi.offline.as_uri(), name="offline")]
    pi.client.workspace_did_change_workspace_folders(types.DidChangeWorkspaceFoldersParams(
        event=types.WorkspaceFoldersChangeEvent(added=folder if present else [],
                                                removed=[] if present else folder)))


async def stopped_when(pi: Pi, fake: FakeAnthropic, uri: str,
                       change: Callable[[], Awaitable[object] | None]) -> None:
    """A slow turn in the session `uri` ends aborted, and saved so, once `change` is made."""
    fake.script(slow_text(words=400, delay=0.05))  # 20 s when nothing stops it
    since = pi.mark()
    turn_id = (await call(pi.client, "pi.prompt", {"uri": uri, "text": "talk slowly"}))["turnId"]
    await wait_event(pi, turn_id, "message_update", since)
    made = change()
    if made is not None:
        await made
    assert event_types(await wait_events(pi, turn_id, since))[-1] == "agent_end"
    last = lines(path_of(uri))[-1]
    assert (last["message"]["role"], last["message"]["stopReason"]) == ("assistant", "aborted")
    error = await call_error(pi.client, "pi.abort", {"uri": uri})
    assert error.code == INVALID_PARAMS  # no longer the workspace's, and nothing runs there
    assert any(f"{path_of(uri).parent} is no longer one of the workspace's session folders"
               in m.message for m in pi.client.messages)


async def test_a_turn_stops_when_its_folder_leaves_the_workspace(pi: Pi,
                                                                 fake: FakeAnthropic) -> None:
    """A folder removed from the workspace (or a `sessionDirs` entry from the settings) left
    its sessions' turns running, tools approved and all, and `pi.abort` refused them as not
    the workspace's: they are now aborted, saved and dropped."""
    try:
        await stopped_when(pi, fake, copy_session(pi.offline, "folder-removed"),
                           lambda: offline_in_workspace(pi, False))
    finally:
        offline_in_workspace(pi, True)
    extra = pi.main / "extra"
    extra.mkdir()
    (extra / "dir-removed.jsonl").write_bytes(EXAMPLE_SESSION.read_bytes())
    options = init_options(fake)
    pi.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"piLsp": {**options, "sessionDirs": ["extra"]}}))
    await stopped_when(pi, fake, (extra / "dir-removed.jsonl").as_uri(),
                       lambda: pi.client.workspace_did_change_configuration(
                           types.DidChangeConfigurationParams(settings={"piLsp": options})))


async def test_a_session_folder_added_in_the_settings_is_told(tmp_path: Path,
                                                              fake: FakeAnthropic) -> None:
    """A `sessionDirs` entry added by the editor's settings listed its folder's sessions, but
    the editors were not told the list changed (its files were there when watching began)."""
    shutil.copytree(EXAMPLE, tmp_path / "main")
    (tmp_path / "main" / "extra").mkdir()
    shutil.copyfile(EXAMPLE_SESSION, tmp_path / "main" / "extra" / "in-extra.jsonl")
    async with own_server() as client:
        pi = await connect(client, CLIENTS[0], tmp_path, init_options(fake), folders=("main",))
        since = pi.mark()
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
            settings={"piLsp": {**init_options(fake), "sessionDirs": ["extra"]}}))
        await wait_note(pi, SESSIONS_CHANGED, since=since)
        listed = (await call(client, "pi.listSessions", {}))["sessions"]
        assert any(s["uri"].endswith("/extra/in-extra.jsonl") for s in listed)
        await asyncio.wait_for(client.shutdown_session(), CEILING_S)


async def in_project_session_dir(client: LanguageClient, tmp_path: Path, fake: FakeAnthropic
                                 ) -> tuple[Pi, str]:
    """A workspace trusted for this server whose `.pi/settings.json` names a `sessionDir`
    outside it, and a session pi started there; its uri."""
    shutil.copytree(EXAMPLE, tmp_path / "main")
    folder = tmp_path / "pi-sessions"
    folder.mkdir()
    pi = await connect(client, CLIENTS[0], tmp_path, init_options(fake), folders=("main",))
    (pi.main / ".pi" / "settings.json").write_text(json.dumps({"sessionDir": str(folder)}))
    await call(client, "pi.setTrust", {"folderUri": pi.main.as_uri(), "trusted": True,
                                       "save": False})
    session, header, *rest = folder / "by-pi.jsonl", *EXAMPLE_SESSION.read_text().splitlines()
    started_here = json.dumps({**json.loads(header), "cwd": str(pi.main.resolve())})
    session.write_text("\n".join([started_here, *rest]) + "\n")
    return pi, session.as_uri()


@pytest.mark.parametrize("change", ["untrusted", "settings edited"])
async def test_a_turn_stops_when_the_project_session_dir_is_dropped(
        tmp_path: Path, fake: FakeAnthropic, change: str) -> None:
    """A turn in the folder a trusted project's `sessionDir` names ran on, tools approved and
    all, once the project was untrusted or its settings.json no longer named the folder (a git
    checkout), and `pi.abort` refused it: it is now aborted, saved and dropped (at the next
    listing, for an edit)."""
    async with own_server({"PI_CODING_AGENT_DIR": str(tmp_path / "agent")}) as client:
        pi, uri = await in_project_session_dir(client, tmp_path, fake)

        async def untrust() -> None:
            await call(client, "pi.setTrust", {"folderUri": pi.main.as_uri(), "trusted": False,
                                               "save": False})

        async def edit() -> None:
            (pi.main / ".pi" / "settings.json").write_text("{}")
            await call(client, "pi.listSessions", {})

        await stopped_when(pi, fake, uri, untrust if change == "untrusted" else edit)
        await asyncio.wait_for(client.shutdown_session(), CEILING_S)


async def test_abort_stops_a_turn_whose_folder_the_workspace_left(tmp_path: Path,
                                                                  fake: FakeAnthropic) -> None:
    """`pi.abort` of a running turn was refused once its folder was no longer a session folder
    of the workspace (a settings.json edited, nothing listed since): the user could not stop
    the agent. Stopping is always allowed."""
    async with own_server({"PI_CODING_AGENT_DIR": str(tmp_path / "agent")}) as client:
        pi, uri = await in_project_session_dir(client, tmp_path, fake)
        fake.script(slow_text(words=400, delay=0.05))  # 20 s when nothing stops it
        since = pi.mark()
        turn_id = (await call(client, "pi.prompt", {"uri": uri, "text": "talk slowly"}))["turnId"]
        await wait_event(pi, turn_id, "message_update", since)
        (pi.main / ".pi" / "settings.json").write_text("{}")
        assert await call(client, "pi.abort", {"uri": uri}) == {"aborted": True}
        assert event_types(await wait_events(pi, turn_id, since))[-1] == "agent_end"
        last = lines(path_of(uri))[-1]
        assert (last["message"]["role"], last["message"]["stopReason"]) == ("assistant",
                                                                            "aborted")
        await asyncio.wait_for(client.shutdown_session(), CEILING_S)


@contextlib.contextmanager
def progress_held(client: LanguageClient) -> Iterator[asyncio.Event]:
    """The editor's answer to window/workDoneProgress/create held until the event is set (a
    busy extension host): a turn or job is claimed and answered, and has not started."""
    features = client.protocol.fm.features
    original = features[types.WINDOW_WORK_DONE_PROGRESS_CREATE]
    release = asyncio.Event()

    async def held(params: types.WorkDoneProgressCreateParams) -> None:
        await release.wait()
        original(params)

    features[types.WINDOW_WORK_DONE_PROGRESS_CREATE] = held
    try:
        yield release
    finally:
        release.set()
        features[types.WINDOW_WORK_DONE_PROGRESS_CREATE] = original


async def test_abort_before_the_turn_starts_stops_it(pi: Pi, fake: FakeAnthropic) -> None:
    uri = await new_session(pi)
    fake.script(slow_text(words=20, delay=0.05))
    since = pi.mark()
    with progress_held(pi.client) as release:
        turn_id = (await call(pi.client, "pi.prompt", {"uri": uri, "text": "OOPS"}))["turnId"]
        assert await call(pi.client, "pi.abort", {"uri": uri}) == {"aborted": True}
        release.set()
        events = await wait_events(pi, turn_id, since)
    assert event_types(events)[-1] == "agent_end"
    # Written as pi writes a prompt aborted at once; the model was never asked.
    replies = [e["message"] for e in lines(path_of(uri)) if e["type"] == "message"]
    assert [(m["role"], m.get("stopReason")) for m in replies][-2:] == [
        ("user", None), ("assistant", "aborted")]
    assert fake.message_requests() == []


async def test_abort_ends_a_turn_whose_progress_the_editor_has_not_created(
        pi: Pi, fake: FakeAnthropic) -> None:
    """`pi.abort` answered aborted but ended nothing while the editor had not answered the
    turn's window/workDoneProgress/create: no agent_end, the session busy and the prompt
    unwritten until it did (for ever, if it never did; shutdown lost the prompt)."""
    uri = await new_session(pi)
    fake.script(slow_text(words=20, delay=0.05))
    since = pi.mark()
    with progress_held(pi.client):
        turn_id = (await call(pi.client, "pi.prompt", {"uri": uri, "text": "OOPS"}))["turnId"]
        assert await call(pi.client, "pi.abort", {"uri": uri}) == {"aborted": True}
        events = await wait_events(pi, turn_id, since)  # the editor still has not answered
        replies = [e["message"] for e in lines(path_of(uri)) if e["type"] == "message"]
        assert [(m["role"], m.get("stopReason")) for m in replies][-2:] == [
            ("user", None), ("assistant", "aborted")]
        last = lines(path_of(uri))[-1]["id"]
        await call(pi.client, "pi.branch", {"uri": uri, "targetId": last})  # idle again
    assert event_types(events)[-1] == "agent_end"
    assert fake.message_requests() == []


async def test_a_turn_claimed_in_a_folder_removed_starts_aborted(pi: Pi,
                                                                 fake: FakeAnthropic) -> None:
    """A turn answered but not started yet when its folder left the workspace went on to run
    (only a running one was stopped): it starts aborted, as after `pi.abort`."""
    uri = copy_session(pi.offline, "claimed-removed")
    fake.script(slow_text(words=20, delay=0.05))
    since = pi.mark()
    try:
        with progress_held(pi.client) as release:
            turn_id = (await call(pi.client, "pi.prompt", {"uri": uri, "text": "OOPS"}))["turnId"]
            offline_in_workspace(pi, False)
            await caught_up(pi)
            release.set()
            events = await wait_events(pi, turn_id, since)
    finally:
        offline_in_workspace(pi, True)
    assert event_types(events)[-1] == "agent_end"
    replies = [e["message"] for e in lines(path_of(uri)) if e["type"] == "message"]
    assert [(m["role"], m.get("stopReason")) for m in replies][-2:] == [
        ("user", None), ("assistant", "aborted")]
    assert fake.message_requests() == []


async def test_a_job_holds_the_session_from_its_answer(pi: Pi, fake: FakeAnthropic) -> None:
    for command, argument in (("pi.compact", {}), ("pi.branchWithSummary",
                                                   {"targetId": FORK_QUESTION})):
        uri = copy_session(pi.main, f"held-{command}")
        before = path_of(uri).read_bytes()
        fake.script(slow_text(words=10, delay=0.05))
        since = pi.mark()
        with progress_held(pi.client) as release:
            job_id = (await call(pi.client, command, {"uri": uri, **argument}))["jobId"]
            for refused in (
                ("pi.prompt", {"uri": uri, "text": "NEXT"}),
                ("pi.prompt", {"uri": uri, "text": "STEER", "delivery": "steer"}),
                ("pi.branch", {"uri": uri, "targetId": DEAD_END_TIP}),
                ("pi.compact", {"uri": uri}),
            ):
                error = await call_error(pi.client, *refused)
                assert error.code == BUSY and "busy" in error.message, (command, refused)
            assert await call(pi.client, "pi.abort", {"uri": uri}) == {"aborted": True}
            release.set()
            done = await wait_note(pi, JOB_DONE, lambda p, j=job_id: p["jobId"] == j, since)
        assert done["ok"] is False and done["error"] == "aborted", done
        assert path_of(uri).read_bytes() == before
        assert fake.message_requests() == []
        await call(pi.client, "pi.branch", {"uri": uri, "targetId": DEAD_END_TIP})  # idle again


async def test_steer_during_a_compaction_is_refused(pi: Pi, fake: FakeAnthropic,
                                                   tmp_path: Path) -> None:
    uri = copy_session(pi.main, "steer-while-compacting")
    fake.script(held_text(tmp_path / "refused", words=40), text_reply("the split turn's start"))
    since = pi.mark()
    job_id = (await call(pi.client, "pi.compact", {"uri": uri}))["jobId"]
    await until(lambda: fake.message_requests(), "the summary being asked for")
    for delivery in ("steer", "followUp"):
        error = await call_error(pi.client, "pi.prompt",
                                 {"uri": uri, "text": "LOST?", "delivery": delivery})
        assert error.code == BUSY and "(compaction)" in error.message, error.message
    (tmp_path / "refused").touch()
    done = await wait_note(pi, JOB_DONE, lambda p: p["jobId"] == job_id, since)
    assert done["ok"], done
    assert "LOST?" not in path_of(uri).read_text()


async def test_an_aborted_auto_compaction_is_told_as_aborted_not_as_an_error(
        pi: Pi, fake: FakeAnthropic, tmp_path: Path) -> None:
    """Stop pressed during the compaction a prompt runs first: pi 1.6 ends it aborted with no
    error (a status line), and so does the server now (it sent an error to show)."""
    uri = copy_session(pi.main, "auto-compaction-aborted")
    path = path_of(uri)
    # The leaf's reply says the window is nearly full, so the prompt compacts first.
    path.write_text(path.read_text().replace('"totalTokens":8124', '"totalTokens":199000'))
    compactions = [e["type"] for e in lines(path)].count("compaction")
    fake.script(held_text(tmp_path / "aborted", words=40))
    since = pi.mark()
    turn_id = (await call(pi.client, "pi.prompt", {"uri": uri, "text": "NEXT"}))["turnId"]
    await wait_event(pi, turn_id, "compaction_start", since)
    assert await call(pi.client, "pi.abort", {"uri": uri}) == {"aborted": True}
    (tmp_path / "aborted").touch()
    events = await wait_events(pi, turn_id, since)
    [end] = [e for e in events if e["type"] == "compaction_end"]
    assert end["aborted"] is True and end["error"] is None and end["entryId"] is None, end
    assert "error" not in event_types(events)
    assert [e["type"] for e in lines(path)].count("compaction") == compactions


def progress_messages(pi: Pi) -> list[str]:
    """Every message the server's work-done progresses reported."""
    return [r.message for reports in pi.client.progress_reports.values() for r in reports
            if isinstance(r, types.WorkDoneProgressReport) and r.message]


async def test_a_summarys_retry_waits_are_reported_as_a_turns_are(
        tmp_path: Path, fake: FakeAnthropic) -> None:
    """pi.compact, and the compaction a prompt makes first, waited silently to ask their
    summary again; the wait is now in the job's or turn's progress, as a turn's retry is, and
    the turn sends pi 1.6's summarization_retry_* events."""
    shutil.copytree(EXAMPLE, tmp_path / "main")
    (tmp_path / "main" / ".pi" / "settings.json").write_text(json.dumps(
        {"compaction": {"keepRecentTokens": 500}, "retry": {"baseDelayMs": 1}}))
    trust(tmp_path, Path(AGENT_DIR.name))
    wait = "Anthropic 503 api_error: Service unavailable; retrying in 0.001s (1/3)"
    async with own_server() as client:
        pi = await connect(client, CLIENTS[0], tmp_path, init_options(fake), folders=("main",))
        fake.script(error_reply(503, "api_error", "Service unavailable"),
                    *[text_reply("## Goal\nsummarized") for _ in range(2)])
        since = pi.mark()
        job_id = (await call(client, "pi.compact", {"uri": copy_session(pi.main, "job")}))["jobId"]
        done = await wait_note(pi, JOB_DONE, lambda p: p["jobId"] == job_id, since)
        assert done["ok"], done
        await caught_up(pi)
        assert progress_messages(pi).count(wait) == 1, progress_messages(pi)

        uri = copy_session(pi.main, "turn")
        path = path_of(uri)  # its leaf's reply says the window is nearly full
        path.write_text(path.read_text().replace('"totalTokens":8124', '"totalTokens":199000'))
        fake.script(error_reply(503, "api_error", "Service unavailable"),
                    *[text_reply("## Goal\nsummarized") for _ in range(3)])
        since = pi.mark()
        turn_id = (await call(client, "pi.prompt", {"uri": uri, "text": "NEXT"}))["turnId"]
        events = await wait_events(pi, turn_id, since)
        assert progress_messages(pi)[-2:] == [wait, "auto-compacting"], progress_messages(pi)
        kinds = [e["type"] for e in events if e["type"].startswith(("compaction", "summar"))]
        assert kinds == ["compaction_start", "summarization_retry_scheduled",
                         "summarization_retry_attempt_start", "summarization_retry_finished",
                         "compaction_end"], kinds
        scheduled = next(e for e in events if e["type"] == "summarization_retry_scheduled")
        assert scheduled == {"type": "summarization_retry_scheduled", "attempt": 1,
                             "maxAttempts": 3, "delayMs": 1,
                             "errorMessage": "Anthropic 503 api_error: Service unavailable"}
        assert next(e for e in events if e["type"] == "summarization_retry_attempt_start") == {
            "type": "summarization_retry_attempt_start", "source": "compaction",
            "reason": "threshold"}
        await asyncio.wait_for(client.shutdown_session(), CEILING_S)


async def test_a_write_to_a_session_deleted_meanwhile_finds_no_session(pi: Pi) -> None:
    uri = copy_session(pi.main, "deleted-then-named")
    await call(pi.client, "pi.setName", {"uri": uri, "name": "first"})  # its harness is made
    folder = path_of(uri).parent
    before = set(folder.iterdir())
    path_of(uri).unlink()  # before the watcher has seen it
    for command, argument in (("pi.setName", {"name": "second"}),
                              ("pi.branch", {"targetId": DEAD_END_TIP})):
        error = await call_error(pi.client, command, {"uri": uri, **argument})
        assert error.code == types.ErrorCodes.InvalidParams and "no session" in error.message
    assert set(folder.iterdir()) == before - {path_of(uri)}  # not brought back as a new file


async def test_second_prompt_while_busy_is_refused(pi: Pi, fake: FakeAnthropic,
                                                  tmp_path: Path) -> None:
    uri = await new_session(pi)
    fake.script(held_text(tmp_path / "refused", words=40))
    since = pi.mark()
    turn_id = (await call(pi.client, "pi.prompt", {"uri": uri, "text": "first"}))["turnId"]
    error = await call_error(pi.client, "pi.prompt", {"uri": uri, "text": "second"})
    assert error.code == BUSY and "busy" in error.message
    await wait_event(pi, turn_id, "message_end", since)  # the prompt is in the session
    prompt = next(n["id"] for n in await tree_nodes(pi, uri) if n["role"] == "user")
    for command, argument in (
        ("pi.branch", {"uri": uri, "targetId": (await tree_nodes(pi, uri))[0]["id"]}),
        ("pi.branchWithSummary", {"uri": uri, "targetId": (await tree_nodes(pi, uri))[0]["id"]}),
        ("pi.compact", {"uri": uri}),
        ("pi.editContext", {"uri": uri, "targetId": prompt, "replacement": None}),
        ("pi.undoContextEdit", {"uri": uri, "targetId": prompt}),
    ):
        refused = await call_error(pi.client, command, argument)
        assert refused.code == BUSY and "busy" in refused.message, (command, refused.message)
    await call(pi.client, "pi.abort", {"uri": uri})
    (tmp_path / "refused").touch()
    await wait_events(pi, turn_id, since)
    # (the words themselves may be elsewhere: the recorded bash tool speaks of seconds)
    assert [e["message"]["content"] for e in lines(path_of(uri))
            if e["type"] == "message" and e["message"]["role"] == "user"] == \
        [[{"type": "text", "text": "first"}]]


async def test_steer_and_follow_up_are_delivered(pi: Pi, fake: FakeAnthropic,
                                                 tmp_path: Path) -> None:
    uri = await new_session(pi)
    fake.script(held_text(tmp_path / "queued"), text_reply("steered"), text_reply("followed"))
    since = pi.mark()
    turn_id = (await call(pi.client, "pi.prompt", {"uri": uri, "text": "start"}))["turnId"]
    await wait_event(pi, turn_id, "message_update", since)
    steer = await call(pi.client, "pi.prompt",
                       {"uri": uri, "text": "STEER-NOW", "delivery": "steer"})
    follow = await call(pi.client, "pi.prompt",
                        {"uri": uri, "text": "FOLLOW-LATER", "delivery": "followUp"})
    assert steer["queued"] == "steer" and follow["queued"] == "followUp"
    (tmp_path / "queued").touch()
    events = await wait_events(pi, turn_id, since)
    assert "error" not in event_types(events), events
    requests = [json.dumps(r["messages"]) for r in fake.message_requests()]
    assert len(requests) == 3, requests
    assert "STEER-NOW" not in requests[0] and "STEER-NOW" in requests[1]
    assert "FOLLOW-LATER" not in requests[1] and "FOLLOW-LATER" in requests[2]
    users = [e["message"]["content"][0]["text"] for e in lines(path_of(uri))
             if e["type"] == "message" and e["message"]["role"] == "user"]
    assert users == ["start", "STEER-NOW", "FOLLOW-LATER"]


def png_base64(width: int, height: int) -> str:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (30, 90, 200)).save(out, "PNG")
    return base64.b64encode(out.getvalue()).decode()


# A pasted screenshot over the providers' 8000 px or 5 MB fails every later request of the
# session; pi 1.6 sends it scaled down, and leaves out what it cannot decode, saying so.
SCREENSHOT = {"data": png_base64(4000, 3000), "mimeType": "image/png"}
CORRUPT = {"data": base64.b64encode(b"\x89PNG\r\n\x1a\nnot really").decode(),
           "mimeType": "image/png"}
SENT_NOTES = ("\n\n[Image omitted: could not be resized below the inline image size limit.]\n"
              "[Image: original 4000x3000, displayed at 2000x1500. Multiply coordinates by 2.00 "
              "to map to original image.]")


def sent_user_content(request: dict[str, Any], text: str) -> tuple[str, list[tuple[str, int, int]]]:
    """The text of the request's user message starting with `text`, and its images (type and
    pixel size)."""
    content = next(m["content"] for m in request["messages"] if m["role"] == "user"
                   and m["content"][0]["text"].startswith(text))
    return content[0]["text"], [
        (block["source"]["media_type"],
         *Image.open(io.BytesIO(base64.b64decode(block["source"]["data"]))).size)
        for block in content if block["type"] == "image"]


async def test_prompt_images_are_sent_as_pi_sends_them(pi: Pi, fake: FakeAnthropic) -> None:
    """A 4000x3000 screenshot went to the model as it was (refused by the provider), and an
    image that does not decode too; pi 1.6 scales the first and leaves out the second."""
    uri = await new_session(pi)
    fake.script(text_reply("seen"))
    since = pi.mark()
    turn_id = (await call(pi.client, "pi.prompt",
                          {"uri": uri, "text": "see", "images": [CORRUPT, SCREENSHOT]}))["turnId"]
    events = await wait_events(pi, turn_id, since)
    assert "error" not in event_types(events), events
    assert sent_user_content(fake.message_requests()[-1], "see") == \
        ("see" + SENT_NOTES, [("image/png", 2000, 1500)])
    stored = next(e["message"]["content"] for e in lines(path_of(uri))
                  if e["type"] == "message" and e["message"]["role"] == "user")
    assert [(block["type"], block.get("mimeType")) for block in stored] == \
        [("text", None), ("image", "image/png")] and stored[0]["text"] == "see" + SENT_NOTES


async def test_steered_images_are_sent_as_pi_sends_them(pi: Pi, fake: FakeAnthropic,
                                                        tmp_path: Path) -> None:
    """A steer's images went to the model as they were; pi 1.6 processes them as a prompt's."""
    uri = await new_session(pi)
    fake.script(held_text(tmp_path / "steered"), text_reply("steered"))
    since = pi.mark()
    turn_id = (await call(pi.client, "pi.prompt", {"uri": uri, "text": "start"}))["turnId"]
    await wait_event(pi, turn_id, "message_update", since)
    await call(pi.client, "pi.prompt", {"uri": uri, "text": "STEER", "delivery": "steer",
                                        "images": [CORRUPT, SCREENSHOT]})
    (tmp_path / "steered").touch()
    events = await wait_events(pi, turn_id, since)
    assert "error" not in event_types(events), events
    assert sent_user_content(fake.message_requests()[-1], "STEER") == \
        ("STEER" + SENT_NOTES, [("image/png", 2000, 1500)])


async def test_steer_and_follow_up_before_the_turn_starts_are_delivered(
        pi: Pi, fake: FakeAnthropic) -> None:
    """Sent after `pi.prompt`'s answer but before its turn began, both were refused with
    "busy (turn); steer or follow up instead"."""
    uri = await new_session(pi)
    fake.script(text_reply("steered"), text_reply("followed"))
    since = pi.mark()
    with progress_held(pi.client) as release:
        turn_id = (await call(pi.client, "pi.prompt", {"uri": uri, "text": "start"}))["turnId"]
        for text, delivery in (("STEER-EARLY", "steer"), ("FOLLOW-EARLY", "followUp")):
            answer = await call(pi.client, "pi.prompt",
                                {"uri": uri, "text": text, "delivery": delivery})
            assert answer == {"turnId": None, "queued": delivery}
        release.set()
        events = await wait_events(pi, turn_id, since)
    assert "error" not in event_types(events), events
    # As pi delivers them: the steer before the first model call, the follow-up at its end.
    requests = [json.dumps(r["messages"]) for r in fake.message_requests()]
    assert len(requests) == 2, requests
    assert "STEER-EARLY" in requests[0] and "FOLLOW-EARLY" not in requests[0]
    assert "FOLLOW-EARLY" in requests[1]
    users = [e["message"]["content"][0]["text"] for e in lines(path_of(uri))
             if e["type"] == "message" and e["message"]["role"] == "user"]
    assert users == ["start", "STEER-EARLY", "FOLLOW-EARLY"]


async def test_model_change_during_a_turn_waits_for_its_end(pi: Pi, fake: FakeAnthropic) -> None:
    uri = await new_session(pi)
    slow_call = tool_reply([("toolu_3", "bash", {"command": "echo model"})], text="Checking.",
                           delay=0.1)
    fake.script(slow_call, text_reply("done"))
    since = pi.mark()
    turn_id = (await call(pi.client, "pi.prompt", {"uri": uri, "text": "go"}))["turnId"]
    await wait_event(pi, turn_id, "message_update", since)
    assert await call(pi.client, "pi.setModel",
                      {"uri": uri, "provider": "anthropic", "modelId": SUMMARY_MODEL}) == {}
    # not yet: the turn runs
    assert [n["type"] for n in await tree_nodes(pi, uri)].count("model_change") == 1
    events = await wait_events(pi, turn_id, since)
    assert "error" not in event_types(events), events
    kinds = [(e["type"], e["message"]["role"] if e["type"] == "message" else e.get("modelId"))
             for e in lines(path_of(uri))]
    first_user = kinds.index(("message", "user"))
    assert kinds[first_user:] == [("message", "user"), ("message", "assistant"),
                                  ("message", "toolResult"), ("model_change", SUMMARY_MODEL),
                                  ("message", "assistant")]
    first_save = next(e for e in events if e["type"] == "save_point")
    assert first_save["hadPendingMutations"] is True
    assert [r["model"] for r in fake.message_requests()] == [DEFAULT_MODEL, SUMMARY_MODEL]


# -- shutdown (a server of its own) ----------------------------------------------------------


@pytest.mark.parametrize("capabilities", CLIENTS)
async def test_shutdown_during_a_turn_aborts_it_and_exits(
        capabilities: str, tmp_path: Path, fake: FakeAnthropic) -> None:
    shutil.copytree(EXAMPLE, tmp_path / "main")
    async with own_server() as client:
        pi = await connect(client, capabilities, tmp_path, init_options(fake), folders=("main",))
        uri = await new_session(pi)
        fake.script(slow_text(words=80, delay=0.05))
        since = pi.mark()
        turn_id = (await call(client, "pi.prompt", {"uri": uri, "text": "long"}))["turnId"]
        await wait_event(pi, turn_id, "message_update", since)
        await asyncio.wait_for(client.shutdown_async(None), CEILING_S)
        client.exit(None)
        assert client._server is not None
        assert await asyncio.wait_for(client._server.wait(), CEILING_S) == 0
        last = lines(path_of(uri))[-1]
        assert last["type"] == "message" and last["message"]["role"] == "assistant"
        assert last["message"]["stopReason"] == "aborted"


async def test_shutdown_just_after_a_prompt_and_a_job_are_answered_aborts_both(
        tmp_path: Path, fake: FakeAnthropic) -> None:
    """Claimed but not started, they were left to run (the prompt was cut off unwritten after
    1.5 s, the job ran on); they end at once as `pi.abort` ends them then (found in review)."""
    async with own_server() as client:
        pi = await connect(client, "visual-studio-code", make_workspace(tmp_path),
                           init_options(fake))
        uri, compacted = await new_session(pi), copy_session(pi.main, "compact-at-shutdown")
        before = path_of(compacted).read_bytes()
        fake.script(slow_text(words=80, delay=0.05))
        since = pi.mark()
        with progress_held(client) as release:
            await call(client, "pi.prompt", {"uri": uri, "text": "KEEP ME"})
            job_id = (await call(client, "pi.compact", {"uri": compacted}))["jobId"]
            shutdown = client.protocol.send_request_async(types.SHUTDOWN, None)
            release.set()  # their progress is answered after the server has read `shutdown`
            await asyncio.wait_for(shutdown, CEILING_S)
        replies = [e["message"] for e in lines(path_of(uri)) if e["type"] == "message"]
        assert [(m["role"], m.get("stopReason")) for m in replies][-2:] == [
            ("user", None), ("assistant", "aborted")]
        done = await wait_note(pi, JOB_DONE, lambda p: p["jobId"] == job_id, since)
        assert done["ok"] is False and done["error"] == "aborted", done
        assert path_of(compacted).read_bytes() == before
        assert fake.message_requests() == []
        client.exit(None)
        assert client._server is not None
        assert await asyncio.wait_for(client._server.wait(), CEILING_S) == 0


async def test_shutdown_during_a_large_views_build_runs_no_command_on_its_tree(
        tmp_path: Path, fake: FakeAnthropic) -> None:
    """Shutdown, its grace over, cancelled a large view's build, not its worker thread (which
    cannot be stopped), and a label waiting behind the build was then written into the tree
    the thread still folded. The label is answered cancelled, as requests in flight at
    shutdown are, and nothing is written; the server ends once the thread has."""
    root = make_workspace(tmp_path / "w")
    large = root / "main" / ".pi" / "sessions" / "large.jsonl"
    header = EXAMPLE_SESSION.read_text().splitlines()[0]
    large.write_text("\n".join([header, *(json.dumps(
        {"type": "custom", "customType": "x", "id": f"e{n}", "parentId": f"e{n - 1}" if n else None,
         "timestamp": "2026-01-01T00:00:00.000Z"}) for n in range(20_001))]) + "\n")
    before = large.read_bytes()
    gate = tmp_path / "gate"
    gate.mkdir()
    gated = [sys.executable, str(Path(__file__).with_name("gated_serve.py"))]
    async with own_server(env={"GATE_DIR": str(gate)}, command=gated) as client:
        await connect(client, "neovim@v0.11", root, init_options(fake))
        tree = asyncio.ensure_future(call(client, "pi.getTree", {"uri": large.as_uri(),
                                                                 "limit": 300}))
        await until((gate / "entered").exists, "the large view to be built in a worker thread")
        # Sent (and so read) before `shutdown`: it waits behind the build as shutdown begins.
        labelled = types.ExecuteCommandParams(command="pi.label", arguments=[
            {"uri": large.as_uri(), "targetId": "e5", "label": "x"}])
        label = asyncio.wrap_future(client.protocol.send_request(
            types.WORKSPACE_EXECUTE_COMMAND, labelled))
        await asyncio.wait_for(client.shutdown_async(None), CEILING_S)
        for request in (tree, label):
            with pytest.raises(JsonRpcException) as info:
                await request
            assert info.value.code == types.LSPErrorCodes.RequestCancelled, info.value
        assert large.read_bytes() == before
        (gate / "open").touch()
        client.exit(None)
        assert client._server is not None
        assert await asyncio.wait_for(client._server.wait(), CEILING_S) == 0


async def test_a_command_before_initialize_is_server_not_initialized() -> None:
    """It answered pi-lsp's -32011 where LSP has its own code, ServerNotInitialized (found in
    review)."""
    async with own_server() as client:
        client.capabilities = types.ClientCapabilities()  # or pytest-lsp refuses to send it
        error = await call_error(client, "pi.listSessions", {})
        assert error.code == types.ErrorCodes.ServerNotInitialized, error


async def test_a_request_after_shutdown_is_refused(tmp_path: Path,
                                                   fake: FakeAnthropic) -> None:
    """pygls dropped it with a logged warning, so the client waited for an answer that never
    came; LSP answers InvalidRequest (found in review)."""
    shutil.copytree(EXAMPLE, tmp_path / "main")
    async with own_server() as client:
        await connect(client, "neovim@v0.11", tmp_path, init_options(fake), folders=("main",))
        await asyncio.wait_for(client.shutdown_async(None), CEILING_S)
        error = await call_error(client, "pi.listSessions", {})
        assert error.code == types.ErrorCodes.InvalidRequest and "shut down" in error.message
        client.exit(None)
        assert client._server is not None
        assert await asyncio.wait_for(client._server.wait(), CEILING_S) == 0


async def test_list_models(pi: Pi) -> None:
    """Every model of pi 1.6's catalog whose provider has a key (pi-ai's order: claude-fable-5
    first), the default first as pi's model selector shows it: OpenAI's are not listed, no
    OpenAI key being set."""
    listed = await call(pi.client, "pi.listModels", {})
    ids = [(m["provider"], m["id"]) for m in listed["models"]]
    assert ("anthropic", "claude-sonnet-4-5") in ids and ("openai", "gpt-4o") not in ids
    assert "/".join(ids[0]) == listed["default"] and len(set(ids)) == len(ids)
    assert all(m["contextWindow"] > 0 and m["maxTokens"] > 0 for m in listed["models"])
    assert listed["default"].startswith("anthropic/")


async def test_models_json_models_are_listed_and_run(pi: Pi, oai: FakeOpenAI) -> None:
    models_file = pi.main / ".pi" / "models.json"
    models_file.write_text(json.dumps({"providers": {"ollama": {
        "baseUrl": f"{oai.url}/v1", "api": "openai-completions", "apiKey": "ollama",
        "models": [{"id": LOCAL_MODEL, "name": "Qwen Coder", "contextWindow": 32768}]}}}))
    try:
        listed = await call(pi.client, "pi.listModels", {})
        assert [m for m in listed["models"] if m["provider"] == "ollama"] == [{
            "provider": "ollama", "id": LOCAL_MODEL, "name": "Qwen Coder",
            "api": "openai-completions", "reasoning": False, "input": ["text"],
            "contextWindow": 32768, "maxTokens": 16384}]
        uri = await new_session(pi)
        await call(pi.client, "pi.setModel",
                   {"uri": uri, "provider": "ollama", "modelId": LOCAL_MODEL})
        preview = await call(pi.client, "pi.previewContext", {"uri": uri, "layer": "request"})
        assert preview["model"] == f"ollama/{LOCAL_MODEL}" and preview["contextWindow"] == 32768
        assert preview["request"]["messages"][0]["role"] == "system"  # Chat Completions' shape
        oai.script(chat_reply("Hello from ", "the local model."))
        since = pi.mark()
        turn_id = (await call(pi.client, "pi.prompt", {"uri": uri, "text": "hello"}))["turnId"]
        events = await wait_events(pi, turn_id, since)
        assert "error" not in event_types(events), events
        streamed = "".join(d["delta"] for e in events if e["type"] == "message_update"
                           for d in e["deltas"] if d["type"] == "text_delta")
        assert streamed == "Hello from the local model."
        [request] = oai.chat_requests()
        assert request["model"] == LOCAL_MODEL
        assert request["messages"][1:] == [
            {"role": "user", "content": [{"type": "text", "text": "hello"}]}]
        assert {k: v for k, v in request.items() if k != "stream"} == preview["request"] | {
            "messages": request["messages"]}
        reply = [e["message"] for e in lines(path_of(uri)) if e["type"] == "message"][-1]
        assert (reply["provider"], reply["model"], reply["api"]) == (
            "ollama", LOCAL_MODEL, "openai-completions")
    finally:
        models_file.unlink()


async def test_a_turn_that_cannot_start_reports_one_error(pi: Pi) -> None:
    uri = await new_session(pi)
    await call(pi.client, "pi.setModel", {"uri": uri, "provider": "openai", "modelId": "gpt-5"})
    before = await tree_nodes(pi, uri)
    since = pi.mark()
    turn_id = (await call(pi.client, "pi.prompt", {"uri": uri, "text": "hello"}))["turnId"]
    events = await wait_events(pi, turn_id, since)
    errors = [e for e in events if e["type"] == "error"]
    assert len(errors) == 1 and "openai" in errors[0]["message"], events
    assert await tree_nodes(pi, uri) == before  # nothing was added for the failed turn
    assert not path_of(uri).exists()


async def test_prepare_turn_answers_the_model_its_turn_would_use(pi: Pi,
                                                                   fake: FakeAnthropic) -> None:
    """What a chat asks when it opens; a turn after it runs as usual, and a model whose
    provider has no key is reported by its name before anything is typed."""
    uri = await new_session(pi)
    assert await call(pi.client, "pi.prepareTurn", {"uri": uri}) == {
        "provider": "anthropic", "model": DEFAULT_MODEL}
    fake.script(text_reply("ready"))
    since = pi.mark()
    turn_id = (await call(pi.client, "pi.prompt", {"uri": uri, "text": "hi"}))["turnId"]
    assert event_types(await wait_events(pi, turn_id, since))[-1] == "agent_end"
    await call(pi.client, "pi.setModel", {"uri": uri, "provider": "openai", "modelId": "gpt-5"})
    error = await call_error(pi.client, "pi.prepareTurn", {"uri": uri})
    assert error.code == FAILED and "openai" in error.message, error.message


async def test_a_block_ended_twice_ends_the_turn_normally(pi: Pi, fake: FakeAnthropic) -> None:
    """A provider that sends a block's end twice: the two ends were merged as text deltas, and
    the turn failed with `'delta'`, its reply lost (found in review)."""
    uri = await new_session(pi)
    fake.script(Reply([message_start(), *text_block(0, "said once"),
                       {"type": "content_block_stop", "index": 0}, *message_end()]))
    since = pi.mark()
    turn_id = (await call(pi.client, "pi.prompt", {"uri": uri, "text": "hi"}))["turnId"]
    events = await wait_events(pi, turn_id, since)
    assert "error" not in event_types(events), events
    last = lines(path_of(uri))[-1]
    assert last["message"]["role"] == "assistant"
    assert last["message"]["content"] == [{"type": "text", "text": "said once"}]


async def test_compact_dry_run_is_null_when_a_run_would_refuse(pi: Pi) -> None:
    uri = await new_session(pi)  # nothing but settings: nothing to summarize
    assert (await call(pi.client, "pi.compact", {"uri": uri, "dryRun": True}))["plan"] is None
    assert await call(pi.client, "pi.listModels", []) != {}  # an empty Lua table is `[]`


async def test_a_lone_surrogate_in_a_reply_ends_the_turn_normally(pi: Pi,
                                                                 fake: FakeAnthropic) -> None:
    """Half an emoji streamed by the provider is stored as pi stores it (`\\ud83d`), and
    shown and previewed as U+FFFD (Neovim drops a message that holds a lone surrogate); the
    turn ends without an error."""
    uri = await new_session(pi)
    fake.script(text_reply("bad \ud83d", " end"))
    since = pi.mark()
    turn_id = (await call(pi.client, "pi.prompt", {"uri": uri, "text": "hi"}))["turnId"]
    events = await wait_events(pi, turn_id, since)
    assert "error" not in event_types(events), events
    streamed = "".join(d["delta"] for e in events if e["type"] == "message_update"
                       for d in e["deltas"] if d["type"] == "text_delta")
    assert streamed == "bad \ufffd end"
    assert b'"text":"bad \\ud83d end"' in path_of(uri).read_bytes()
    preview = await call(pi.client, "pi.previewContext", {"uri": uri})
    assert "bad \ufffd end" in json.dumps(preview, ensure_ascii=False, default=str)
    await call(pi.client, "pi.setName", {"uri": uri, "name": "cut \ud83d"})
    listed = (await call(pi.client, "pi.listSessions", {}))["sessions"]
    assert [s["name"] for s in listed if s["uri"] == uri] == ["cut \ufffd"]
