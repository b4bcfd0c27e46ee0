"""The assistant message pi-lsp writes for a reply is the one pi 1.6 writes for the same stream,
key order included (issue 14): one prompt, `pi -p` and `pi-lsp run` each against the fakes.

pi 1.6's lines are stored for machines without it; where it is installed they are made again
and checked against the stored ones. Compared with the reply's time and duration set to 0:
both are clocks' readings (the duration has a test of its own)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest

from pi_lsp.agent.loop import stream_reply
from pi_lsp.agent.retry import is_retryable
from pi_lsp.providers.registry import CHAT_API, ModelInfo, ModelRegistry
from pi_lsp.session.entries import AssistantMessage, decode_message
from pi_lsp.session.replyorder import reply_json
from pi_lsp.session.tree import SessionTree
from tests import fake_anthropic, fake_openai
from tests.fake_anthropic import FakeAnthropic, message_end, message_start, text_block
from tests.fake_openai import FakeOpenAI, call_item, chat_reply, chunk, message_item
from tests.test_system_messages import PI16, pi16_node
from tests.waits import PROCESS_CEILING_S

ROOT = Path(__file__).resolve().parent.parent
STORED = Path(__file__).with_name("fixtures") / "pi16-replies.json"
CLI = PI16 / "@earendil-works" / "pi-coding-agent" / "dist" / "cli.js"
LAB_MODEL = "coder"  # a models.json model on Chat Completions, priced so costs show
LAB_COST = {"input": 0.5, "output": 2, "cacheRead": 0.05, "cacheWrite": 0.6}
TIMES = ("timestamp", "durationMs")  # a reply's clock readings


@dataclass
class Scene:
    """One prompt's model (`provider/id`), level and the reply the fake streams."""

    model: str
    thinking: str
    reply: fake_anthropic.Reply | fake_openai.Reply
    then: fake_openai.Reply | None = None  # the reply after its tool calls ran


def _anthropic(stop: str = "end_turn", cache_1h: int | None = None,
               thinking_tokens: int | None = None, model: str = "claude-sonnet-4-5",
               transformed: tuple[Any, Any] = (None, None)) -> fake_anthropic.Reply:
    """`transformed`: the `input_transformations` of message_start and of message_delta (None:
    that event has none)."""
    start = message_start(model, cache_read=50, cache_write=30)
    if cache_1h is not None:
        start["message"]["usage"]["cache_creation"] = {
            "ephemeral_5m_input_tokens": 30 - cache_1h, "ephemeral_1h_input_tokens": cache_1h}
    end = message_end(stop)
    if thinking_tokens is not None:
        end[0]["usage"]["output_tokens_details"] = {"thinking_tokens": thinking_tokens}
    at_start, at_delta = transformed
    if at_start is not None:
        start["message"]["input_transformations"] = at_start
    if at_delta is not None:
        end[0]["input_transformations"] = at_delta
    return fake_anthropic.Reply([start, *text_block(0, "Hi", " there"), *end])


# Anthropic's notes on the input it changed: an entry's other fields and null ones are left
# out, and message_delta's list, when it sends one, replaces message_start's.
DROPPED_IMAGE = {"type": "image", "path": "messages.0.content.1", "reason": "too_large",
                 "bytes": 9000000}


def _responses(status: str = "completed", reason: str | None = None) -> fake_openai.Reply:
    usage = {"input_tokens": 200, "output_tokens": 40, "total_tokens": 240,
             "input_tokens_details": {"cached_tokens": 50, "cache_write_tokens": 30},
             "output_tokens_details": {"reasoning_tokens": 12}}
    response = {"id": "resp_1", "object": "response", "status": status, "model": "gpt-5",
                "output": [], "usage": usage,
                **({"incomplete_details": {"reason": reason}} if reason else {})}
    return fake_openai.Reply([
        {"type": "response.created", "response": {"id": "resp_1", "object": "response",
                                                  "status": "in_progress", "output": []}},
        *message_item(0, "Hi", " there"), {"type": f"response.{status}", "response": response}])


# What a Responses server says of the replayed input it changed (GPT-6.2 on): pi keeps each
# removed reasoning item but the routine turn_boundary ones, with its type, id, action and reason.
WITHHELD = [{"type": "reasoning", "id": "rs_1", "action": "removed", "reason": "prefix_mismatch",
             "extra": 1},
            {"type": "reasoning", "id": "rs_2", "action": "removed", "reason": "turn_boundary"},
            {"type": "message", "id": "msg_1", "action": "removed", "reason": "prefix_mismatch"},
            {"type": "reasoning", "action": "removed", "reason": "model_mismatch"},
            {"type": "reasoning", "id": None, "action": "removed", "reason": "org_mismatch"},
            "odd", None]


def _responses_calling(namespace: str) -> fake_openai.Reply:
    """A Responses stream of one tool call, its tool declared in `namespace`."""
    reply = _responses()
    reply.events[1:-1] = call_item(0, "call_1", "read", {"path": "missing.txt"},
                                   namespace=namespace)
    return reply


def _transformed(reply: fake_openai.Reply, transformations: Any) -> fake_openai.Reply:
    """`reply` with `transformations` in its last event's response."""
    reply.events[-1]["response"]["input_transformations"] = transformations
    return reply


def _responses_ending(*ending: dict[str, Any], refusal: bool = False, **fields: Any
                      ) -> fake_openai.Reply:
    """A Responses stream whose message (a refusal, if asked) is followed by `ending` instead
    of response.completed; `fields` are the Reply's (an `error` event, a cut)."""
    text = message_item(0, "Hi", " there")
    if refusal:
        text = [{**event, "type": "response.refusal.delta"} if
                event["type"] == "response.output_text.delta" else event for event in text]
        text[-1]["item"]["content"] = [{"type": "refusal", "refusal": "I can't help"}]
    created = {"type": "response.created", "response": {"id": "resp_1", "object": "response",
                                                        "status": "in_progress", "output": []}}
    return fake_openai.Reply([created, *text, *ending], **fields)


def _failed(error: dict[str, Any] | None) -> dict[str, Any]:
    """A response.failed event, with the server's `error` (None: none)."""
    return {"type": "response.failed", "response": {
        "id": "resp_1", "object": "response", "status": "failed", "model": "gpt-5",
        "output": [], "error": error,
        "usage": {"input_tokens": 200, "output_tokens": 40, "total_tokens": 240}}}


def _chat_ending(finish: str | None, **fields: Any) -> fake_openai.Reply:
    """A Chat Completions stream of text ending with `finish` (None: no finish chunk) and
    its usage; `fields` are the Reply's (an error chunk, a cut, no [DONE])."""
    events = chat_reply("Hi", " there").events
    if finish is None:
        events = events[:-2]
    else:
        events[-2]["choices"][0]["finish_reason"] = finish
    return fake_openai.Reply(events, **fields)


def _chat(**usage: Any) -> fake_openai.Reply:
    reply = chat_reply("Hi", " there")
    last = reply.events[-1]
    last["usage"] = {**last["usage"], **usage}
    return reply


SCENES: dict[str, Scene] = {
    "anthropic, 1h cache writes and thinking tokens": Scene(
        "anthropic/claude-sonnet-4-5", "medium", _anthropic(cache_1h=20, thinking_tokens=7)),
    "anthropic, cut at max_tokens": Scene("anthropic/claude-sonnet-4-5", "off",
                                          _anthropic("max_tokens")),
    "anthropic, effort set mid-conversation": Scene("anthropic/claude-opus-5-5", "high",
                                                    _anthropic(model="claude-opus-5-5")),
    "anthropic, input transformations": Scene(
        "anthropic/claude-sonnet-4-5", "off",
        _anthropic(transformed=([DROPPED_IMAGE, {"type": "thinking", "path": None}], None))),
    "anthropic, input transformations replaced at message_delta": Scene(
        "anthropic/claude-sonnet-4-5", "off",
        _anthropic(transformed=([DROPPED_IMAGE], [{"reason": "other"}, DROPPED_IMAGE]))),
    "anthropic, no input transformations": Scene(
        "anthropic/claude-sonnet-4-5", "off", _anthropic(transformed=([], "none"))),
    "anthropic, an error event mid-stream": Scene(
        "anthropic/claude-sonnet-4-5", "off", fake_anthropic.Reply(
            [message_start("claude-sonnet-4-5"), *text_block(0, "Hi", " there")],
            error_type="overloaded_error", error_message="Overloaded")),
    "responses, cache writes and reasoning tokens": Scene("openai/gpt-5", "medium",
                                                          _responses()),
    "responses, incomplete": Scene("openai/gpt-5", "low",
                                   _responses("incomplete", "max_output_tokens")),
    "responses, effort set mid-conversation": Scene("openai/gpt-6.2-sol", "high",
                                                    _responses()),
    "responses, input transformations": Scene(
        "openai/gpt-5", "medium", _transformed(_responses(), WITHHELD)),
    "responses, only routine input transformations": Scene(
        "openai/gpt-5", "medium", _transformed(_responses(), WITHHELD[1:3])),
    "responses, input transformations on a filtered reply": Scene(
        "openai/gpt-5", "low",
        _transformed(_responses("incomplete", "content_filter"), WITHHELD[:1])),
    "responses, incomplete for content_filter": Scene(
        "openai/gpt-5", "low", _responses("incomplete", "content_filter")),
    "responses, failed": Scene("openai/gpt-5", "low", _responses_ending(
        _failed({"code": "server_error", "message": "The model failed"}))),
    "responses, failed without details": Scene("openai/gpt-5", "low",
                                               _responses_ending(_failed(None))),
    "responses, error event mid-stream": Scene("openai/gpt-5", "low", _responses_ending(
        error={"code": "invalid_prompt", "message": "Bad prompt", "param": None})),
    "responses, an error event of another shape": Scene("openai/gpt-5", "low", _responses_ending(
        raw=b'event: error\ndata: {"error": {"message": "Upstream failed", "code": 502}}\n\n')),
    "responses, a refusal": Scene("openai/gpt-5", "low", _responses_ending(
        *_responses().events[-1:], refusal=True)),
    "responses, cut before the end": Scene("openai/gpt-5", "low",
                                           _responses_ending(cut=True)),
    "responses, a tool call in a namespace": Scene(
        "openai/gpt-5", "low", _responses_calling("functions"), then=_responses()),
    "chat, cut at length": Scene(f"lab/{LAB_MODEL}", "off", _chat_ending("length")),
    "chat, content_filter": Scene(f"lab/{LAB_MODEL}", "off", _chat_ending("content_filter")),
    "chat, no [DONE]": Scene(f"lab/{LAB_MODEL}", "off", _chat_ending("stop", done=False)),
    "chat, cut before the finish": Scene(f"lab/{LAB_MODEL}", "off",
                                         _chat_ending(None, cut=True)),
    "chat, an error chunk": Scene(f"lab/{LAB_MODEL}", "off", _chat_ending(
        None, error={"message": "Upstream failed", "type": "server_error", "code": 502})),
    "chat, an error chunk without a message": Scene(f"lab/{LAB_MODEL}", "off", _chat_ending(
        None, error={"type": "server_error", "code": 502})),
    "chat, an error chunk of a string": Scene(f"lab/{LAB_MODEL}", "off", _chat_ending(
        None, error="Upstream failed")),
    "chat, an error chunk from OpenRouter's upstream": Scene(
        f"lab/{LAB_MODEL}", "off", _chat_ending(None, error={
            "message": "Provider returned error", "code": 502,
            "metadata": {"raw": "upstream overloaded", "provider_name": "Lab"}})),
    "chat, cache writes and reasoning tokens": Scene(
        f"lab/{LAB_MODEL}", "off",
        _chat(prompt_tokens_details={"cached_tokens": 20, "cache_write_tokens": 10},
              completion_tokens_details={"reasoning_tokens": 9})),
    "chat, no usage": Scene(f"lab/{LAB_MODEL}", "off", fake_openai.Reply(
        [chunk({"role": "assistant", "content": "Hi"}), chunk(finish="stop")])),
    "chat, cost from the provider": Scene(
        f"openrouter/{LAB_MODEL}", "off", _chat(cost=0.0123, is_byok=False)),
}


# A connection cut mid-reply: pi's errorMessage is its transport's own words (Node's undici:
# "terminated: other side closed (UND_ERR_SOCKET)"), pi-lsp's names the provider and what
# happened in Python's. The line is held to pi's but for that text; both are retried.
TRANSPORT_WORDED = {"responses, cut before the end", "chat, cut before the finish"}


def _agent_folder(root: Path, fake: FakeAnthropic, oai: FakeOpenAI) -> Path:
    """A pi folder whose models.json sends each provider to a fake."""
    agent = root / "agent"
    agent.mkdir()
    lab = {"api": "openai-completions", "baseUrl": f"{oai.url}/v1", "apiKey": "lab",
           "models": [{"id": LAB_MODEL, "cost": LAB_COST}]}
    (agent / "models.json").write_text(json.dumps({"providers": {
        "anthropic": {"baseUrl": fake.url}, "openai": {"baseUrl": f"{oai.url}/v1"},
        "lab": lab, "openrouter": lab}}))
    # A failed reply is the scene: no retry's reply after it.
    (agent / "settings.json").write_text(json.dumps({"retry": {"enabled": False}}))
    return agent


def _reply_line(command: list[str], scene: Scene, root: Path, fake: FakeAnthropic,
                oai: FakeOpenAI) -> tuple[dict[str, Any], float]:
    """The assistant message `command` (an agent's one-prompt run) wrote for the scene's
    reply, as read in key order, and how long the run took in ms."""
    (fake if isinstance(scene.reply, fake_anthropic.Reply) else oai).script(
        scene.reply, *([scene.then] if scene.then is not None else []))
    workspace = root / "ws"
    workspace.mkdir()
    session = workspace / "s.jsonl"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))},
           "PI_CODING_AGENT_DIR": str(_agent_folder(root, fake, oai)), "PI_OFFLINE": "1",
           "ANTHROPIC_API_KEY": "test", "OPENAI_API_KEY": "test",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    began = time.monotonic()
    run = subprocess.run([*command, "--session", str(session), "--model", scene.model,
                          "--thinking", scene.thinking, "hello"], cwd=workspace, env=env,
                         capture_output=True, text=True, timeout=PROCESS_CEILING_S)
    took = (time.monotonic() - began) * 1000
    assert "Traceback" not in run.stderr, run.stderr
    reply, *after = [entry["message"] for entry in map(json.loads, session.read_text().splitlines())
                     if entry.get("message", {}).get("role") == "assistant"]
    assert len(after) == (scene.then is not None)
    return reply, took


def _untimed(reply: dict[str, Any]) -> dict[str, Any]:
    """The reply with its clock readings, its diagnostics' too, set to 0."""
    untimed = {key: 0 if key in TIMES else value for key, value in reply.items()}
    if "diagnostics" in untimed:
        untimed["diagnostics"] = [{**note, "timestamp": 0} for note in untimed["diagnostics"]]
    return untimed


def _without(reply: dict[str, Any], key: str) -> dict[str, Any]:
    return {name: value for name, value in reply.items() if name != key}


def _pi_command(node: str) -> list[str]:
    return [node, str(CLI), "-p"]


PI_LSP = [sys.executable, "-m", "pi_lsp.cli", "run"]


@pytest.fixture(scope="module")
def pi_replies(tmp_path_factory: pytest.TempPathFactory, fake: FakeAnthropic,
               oai: FakeOpenAI) -> dict[str, Any]:
    stored: dict[str, Any] = json.loads(STORED.read_text("utf-8"))
    node = pi16_node()
    if node is not None:
        for name, scene in SCENES.items():
            reply, _ = _reply_line(_pi_command(node), scene, tmp_path_factory.mktemp("pi"),
                                   fake, oai)
            # The stored lines are pi's, keys in its order.
            assert json.dumps(_untimed(reply)) == json.dumps(stored[name]), name
    return stored


@pytest.mark.parametrize("name", SCENES)
def test_a_reply_is_written_as_pi_16_writes_it(name: str, tmp_path: Path, fake: FakeAnthropic,
                                               oai: FakeOpenAI, pi_replies: dict[str, Any]
                                               ) -> None:
    reply, took = _reply_line(PI_LSP, SCENES[name], tmp_path, fake, oai)
    expected = pi_replies[name]
    if name in TRANSPORT_WORDED:
        assert "closed the connection before the reply was complete" in reply["errorMessage"]
        assert is_retryable(reply["errorMessage"]) and is_retryable(expected["errorMessage"])
        reply["errorMessage"] = expected["errorMessage"]  # in its place: the order is held
    assert json.dumps(_untimed(reply)) == json.dumps(expected)
    assert 0 <= reply["durationMs"] <= took


OLD_REPLY = {"role": "assistant", "content": [{"type": "text", "text": "Hi"}],
             "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
             "usage": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0,
                       "totalTokens": 3, "cost": {"input": 0, "output": 0, "cacheRead": 0,
                                                  "cacheWrite": 0, "total": 0}},
             "stopReason": "stop", "timestamp": 1764769388000}


@pytest.mark.parametrize("name", [*SCENES, "written before pi 1.6"])
def test_a_reply_read_back_is_written_again_as_it_was(name: str) -> None:
    """The new fields survive a reading (they were dropped), and a reply without them gains
    none."""
    stored = OLD_REPLY if name not in SCENES else json.loads(STORED.read_text("utf-8"))[name]
    message = decode_message(json.dumps(stored).encode())
    assert isinstance(message, AssistantMessage)
    assert json.dumps(json.loads(bytes(reply_json(message)))) == json.dumps(stored)


PACED_S = 0.05  # the fake's pause after each event of the paced reply


def test_a_replys_duration_spans_its_stream(tmp_path: Path, fake: FakeAnthropic,
                                            oai: FakeOpenAI) -> None:
    """durationMs runs from the request's start to the stream's end, as pi 1.6 times it: a
    reply whose server pauses before each event lasts at least the pauses (pi-lsp wrote
    none). Checked on pi 1.6 too where it is installed."""
    reply = _anthropic()
    paced = Scene("anthropic/claude-sonnet-4-5", "off",
                  fake_anthropic.Reply(reply.events, delay=PACED_S))
    pauses_ms = PACED_S * 1000 * (len(reply.events) - 1)  # those before the last event
    commands = [PI_LSP, *([_pi_command(node)] if (node := pi16_node()) else [])]
    for at, command in enumerate(commands):
        root = tmp_path / str(at)
        root.mkdir()
        written, took = _reply_line(command, paced, root, fake, oai)
        assert pauses_ms <= written["durationMs"] <= took, command[0]


# A request never sent: pi 1.6's provider could not be set up (its key command failed), as
# pi-lsp's cannot be made for a model switched to mid-run without a key. (provider/id, level)
UNSENT: dict[str, tuple[str, str]] = {"anthropic": ("anthropic/claude-sonnet-4-5", "off"),
                                      "responses": ("openai/gpt-5", "minimal"),
                                      "chat": (f"lab/{LAB_MODEL}", "off")}
FAILING_KEY = "!exit 1"  # a key command that fails


def _pi_unsent(node: str, model: str, level: str, root: Path) -> dict[str, Any]:
    """The reply `pi -p` writes for `model` when its key command fails, untimed."""
    agent = root / "agent"
    agent.mkdir()
    (agent / "models.json").write_text(json.dumps({"providers": {
        "anthropic": {"apiKey": FAILING_KEY}, "openai": {"apiKey": FAILING_KEY},
        "lab": {"api": "openai-completions", "baseUrl": "http://127.0.0.1:9/v1",
                "apiKey": FAILING_KEY, "models": [{"id": LAB_MODEL, "cost": LAB_COST}]}}}))
    session = root / "s.jsonl"
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("ANTHROPIC_", "OPENAI_"))}
    subprocess.run([*_pi_command(node), "--session", str(session), "--model", model,
                    "--thinking", level, "hello"], cwd=root,
                   env={**env, "PI_CODING_AGENT_DIR": str(agent), "PI_OFFLINE": "1"},
                   capture_output=True, text=True, timeout=PROCESS_CEILING_S)
    [reply] = [entry["message"] for entry in map(json.loads, session.read_text().splitlines())
               if entry.get("message", {}).get("role") == "assistant"]
    return _untimed(reply)


class _Unsendable:
    """Loop hooks whose request cannot be made: making it fails with `error`."""

    aborted = False

    def __init__(self, model: ModelInfo, level: str, error: Exception) -> None:
        self._model, self.level, self.error = model, level, error

    def emit(self, event: object) -> None:
        pass

    async def next_request(self) -> Any:
        raise self.error

    def model(self) -> ModelInfo:
        return self._model

    def thinking_level(self) -> str:
        return self.level

    def track(self, task: asyncio.Task[Any]) -> None:
        pass


def _lsp_model(name: str) -> ModelInfo:
    provider, model_id = name.split("/", 1)
    if provider == "lab":  # a models.json model on Chat Completions
        return msgspec.structs.replace(ModelRegistry().get("openai", "gpt-5"), provider="lab",
                                       id=model_id, api=CHAT_API)
    return ModelRegistry().get(provider, model_id)


@pytest.mark.parametrize("api", UNSENT)
async def test_a_reply_to_a_request_never_sent_is_written_as_pi_16_writes_it(
        api: str, tmp_path: Path) -> None:
    """pi 1.6 writes the error of a request it could not make (pi-ai's lazyStream:
    createSetupErrorMessage) before the reply's time, where a failed request's comes after
    it; pi-lsp wrote it after. Compared with pi's own error text."""
    stored = json.loads(STORED.read_text("utf-8"))[f"unsent, {api}"]
    model, level = UNSENT[api]
    node = pi16_node()
    if node is not None:
        # pi times a reply only if its timestamp does not predate its stream (pi-ai's
        # AssistantMessageEventStream, in milliseconds); lazyStream stamps a setup error just
        # before it makes the stream, so when the millisecond turns between the two the reply
        # is left untimed, which a busy machine shows now and then (2 runs in 6 here).
        live = _pi_unsent(node, model, level, tmp_path)
        assert json.dumps(live) == json.dumps(
            stored if "durationMs" in live else _without(stored, "durationMs"))
    hooks = _Unsendable(_lsp_model(model), level, ValueError(stored["errorMessage"]))
    reply = await stream_reply(hooks)  # type: ignore[arg-type]
    tree = SessionTree.create(str(tmp_path / "lsp.jsonl"), str(tmp_path))
    tree.append_message(reply)
    written = json.loads((tmp_path / "lsp.jsonl").read_text().splitlines()[-1])["message"]
    assert json.dumps(_untimed(written)) == json.dumps(stored)
