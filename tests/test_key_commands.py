"""`!command` keys and header values while the server runs: a command (a password manager
waiting for a fingerprint, up to 10 s) runs off the event loop, once for everyone who needs it,
and a request cancelled meanwhile neither kills it nor has it run again."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from pi_lsp.providers import key_commands
from pi_lsp.summarize.extractive import ExtractiveSummarizer
from pi_lsp.summarize.select import ChosenSummarizer
from pi_lsp.summarize.summarizer import Summarizer, SummaryRequest
from tests.conftest import trust
from tests.fake_openai import FakeOpenAI, chat_reply
from tests.test_auth_file import agent, save
from tests.test_server import Pi, call, connect, own_server, wait_events
from tests.waits import CEILING_S, alive, until

KEY = "sk-ant-held-0123456789"


class HeldCommand:
    """A `!command` that writes each run's pid to `runs`, then holds until the test releases
    it (a FIFO it reads) and prints `output`."""

    def __init__(self, folder: Path, output: str) -> None:
        self.runs, self.hold = folder / "runs", folder / "hold"
        os.mkfifo(self.hold)
        self.value = f"!echo $$ >> {self.runs}; cat {self.hold} > /dev/null; echo {output}"

    def pids(self) -> list[int]:
        text = self.runs.read_text() if self.runs.exists() else ""
        return [int(line) for line in text.split()]

    async def started(self) -> int:
        """The first run's pid, once it runs."""
        await until(self.pids, f"the command to start (pid in {self.runs})")
        return self.pids()[0]

    async def release(self) -> None:
        """Every run reading the FIFO now ends (opening waits for a reader)."""
        await asyncio.to_thread(lambda: open(self.hold, "w").close())


@contextlib.asynccontextmanager
async def held(folder: Path, output: str) -> AsyncIterator[HeldCommand]:
    """A HeldCommand whose runs are killed at the end if a failed test left them holding."""
    command = HeldCommand(folder, output)
    try:
        yield command
    finally:
        for pid in command.pids():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)  # its own session: the shell and its cat


@pytest.fixture(autouse=True)
def fresh_outputs() -> None:
    key_commands.forget_outputs()


async def test_a_key_command_runs_once_off_the_loop_for_every_request_that_needs_it(
        tmp_path: Path) -> None:
    """While a key command holds, the server answers (a tree), a request that needed it and
    was cancelled leaves it running, and another session's turn waits for the same run: the
    password manager asks once (a new harness ran the command again)."""
    async with held(tmp_path, KEY) as command:
        save({"anthropic": {"type": "api_key", "key": command.value}})
        (tmp_path / "ws").mkdir()
        async with own_server({"PI_CODING_AGENT_DIR": str(agent())}) as client:
            await connect(client, "visual-studio-code", tmp_path, {}, folders=("ws",))
            first = (await call(client, "pi.newSession", {}))["uri"]
            second = (await call(client, "pi.newSession", {}))["uri"]
            cancelled = asyncio.ensure_future(client.protocol.send_request_async(
                types.WORKSPACE_EXECUTE_COMMAND,
                types.ExecuteCommandParams("pi.prepareTurn", [{"uri": first}]), msg_id="held"))
            pid = await command.started()
            client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="held"))
            with pytest.raises(JsonRpcException):
                await asyncio.wait_for(cancelled, CEILING_S)
            waiting = asyncio.ensure_future(call(client, "pi.prepareTurn", {"uri": second}))
            assert (await call(client, "pi.getTree", {"uri": first}))["nodes"] is not None
            # Answered while the command still runs: it is not on the loop, nor was it killed.
            assert alive(pid) and not waiting.done()
            await command.release()
            assert (await waiting)["provider"] == "anthropic"
            assert await call(client, "pi.prepareTurn", {"uri": first}) == await waiting
            assert command.pids() == [pid]


def waiting_in_command_output(thread: threading.Thread) -> bool:
    """Whether `thread` has asked for a command's output and waits for it: running the command
    itself (`_run`) or blocked on the run of another thread (innermost in command_output)."""
    frame = sys._current_frames().get(thread.ident or 0)
    names = []
    while frame is not None:
        names.append(frame.f_code.co_name)
        frame = frame.f_back
    return "_run" in names or names[:1] == ["command_output"]


async def test_a_command_two_threads_ask_for_runs_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server asks from worker threads (two sessions' turns, a summarizer's pick): each
    ran the command while the other's run was waiting for the password manager."""
    agent().mkdir(parents=True)  # where the command runs
    monkeypatch.setattr(key_commands, "COMMAND_TIMEOUT_S", CEILING_S)
    async with held(tmp_path, KEY) as command:
        outputs: list[str | None] = []
        threads = [threading.Thread(target=lambda: outputs.append(
            key_commands.command_output(command.value))) for _ in range(2)]
        threads[0].start()
        pid = await command.started()
        threads[1].start()
        await until(lambda: waiting_in_command_output(threads[1]),
                    "the second thread to ask for the output")
        await command.release()
        for thread in threads:
            await asyncio.to_thread(thread.join, CEILING_S)
        assert outputs == [KEY, KEY] and command.pids() == [pid]


async def test_a_summarizer_pick_is_made_once_though_its_summary_is_cancelled() -> None:
    """The pick (its key's command) is made in a thread: a summary cancelled meanwhile (an
    abort) left it to be made again by the next, the command run again."""
    started, release = threading.Event(), threading.Event()
    picks: list[Summarizer] = []

    def choose() -> Summarizer:
        started.set()
        release.wait(CEILING_S)
        picks.append(ExtractiveSummarizer())
        return picks[-1]

    chosen = ChosenSummarizer(choose)
    request = SummaryRequest("history", [])
    first = asyncio.ensure_future(chosen.summarize(request))
    await asyncio.to_thread(started.wait, CEILING_S)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    second = asyncio.ensure_future(chosen.summarize(request))
    release.set()
    await second
    assert len(picks) == 1 and chosen.extractive


def lab_models(folder: Path, base_url: str, headers: dict[str, str],
               model_headers: dict[str, str]) -> None:
    """A models.json in `folder` whose provider `lab` (model `m`) sends these headers, and
    settings there that start sessions on it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "models.json").write_text(json.dumps({"providers": {"lab": {
        "baseUrl": f"{base_url}/v1", "api": "openai-completions", "apiKey": "k",
        "headers": headers, "models": [{"id": "m", "headers": model_headers}]}}}))
    (folder / "settings.json").write_text(json.dumps({"defaultProvider": "lab",
                                                      "defaultModel": "m"}))


async def answered_while_held(pi: Pi, uri: str, command: HeldCommand) -> None:
    """A tree is answered while `command` holds (it runs off the loop), which then goes on."""
    pid = await command.started()
    assert (await call(pi.client, "pi.getTree", {"uri": uri}))["nodes"] is not None
    assert alive(pid)
    await command.release()


async def test_your_models_json_header_commands_run_off_the_loop(
        oai: FakeOpenAI, tmp_path: Path) -> None:
    """pi 1.6 runs a `!command` header value (resolveHeaders) as it runs an apiKey's; pi-lsp
    refused it. A provider's and a model's, in your own models.json, now run as the key's do,
    off the loop, and are sent."""
    (tmp_path / "provider").mkdir()
    (tmp_path / "model").mkdir()
    async with held(tmp_path / "provider", "gw-token") as provider, \
            held(tmp_path / "model", "model-token") as model:
        lab_models(agent(), oai.url, {"x-gateway": provider.value}, {"x-model": model.value})
        (tmp_path / "ws").mkdir()
        async with own_server({"PI_CODING_AGENT_DIR": str(agent())}) as client:
            pi = await connect(client, "visual-studio-code", tmp_path, {}, folders=("ws",))
            uri = (await call(client, "pi.newSession", {}))["uri"]
            oai.script(chat_reply("hi"))
            sent = len(oai.requests)
            since = pi.mark()
            turn_id = (await call(client, "pi.prompt", {"uri": uri, "text": "hello"}))["turnId"]
            await answered_while_held(pi, uri, provider)  # the provider's, as it is made
            await answered_while_held(pi, uri, model)  # the model's, as the request is sent
            events = await wait_events(pi, turn_id, since)
            assert "error" not in [event["type"] for event in events], events
            [request] = oai.requests[sent:]
            assert (request.headers["x-gateway"], request.headers["x-model"]) == \
                ("gw-token", "model-token")


@pytest.mark.parametrize("where", ["provider", "model"])
async def test_a_workspaces_header_command_is_never_run(
        oai: FakeOpenAI, tmp_path: Path, where: str) -> None:
    """A trusted project's `.pi/models.json` header value `!command` is refused naming it, never
    run (pi runs it; a repository's file must not run code), wherever it is written."""
    ran = tmp_path / "ran"
    command = f"!touch {ran}; echo v"
    workspace = tmp_path / "ws"
    lab_models(workspace / ".pi", oai.url, {"x-gateway": command} if where == "provider" else {},
               {"x-model": command} if where == "model" else {})
    trust(workspace, agent())
    async with own_server({"PI_CODING_AGENT_DIR": str(agent())}) as client:
        pi = await connect(client, "visual-studio-code", tmp_path, {}, folders=("ws",))
        uri = (await call(client, "pi.newSession", {}))["uri"]
        sent = len(oai.requests)
        since = pi.mark()
        turn_id = (await call(client, "pi.prompt", {"uri": uri, "text": "hello"}))["turnId"]
        events = await wait_events(pi, turn_id, since)
        # The provider's fails the turn as it is made, the model's its reply (as pi's would).
        said = json.dumps(events)
        header = "x-gateway" if where == "provider" else "x-model"
        assert f"headers.{header}: shell commands" in said and "not run" in said, said
        assert not ran.exists() and len(oai.requests) == sent
