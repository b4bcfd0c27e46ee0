"""Providers as dependable as pi's (issue 18): every failure an error entry, pi 1.6's request
shapes, pi's sessions continued, pi's retries. Streams are raw SSE bytes from the fakes."""

from __future__ import annotations

import asyncio
import io
import itertools
import json
import logging
import re
import socket
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, ClassVar

import h11
import httpx2
import msgspec
import openai
import pytest

from pi_lsp.agent.events import (
    AgentEnd,
    AutoRetryEnd,
    AutoRetryStart,
    SummaryRetryAttemptStart,
    SummaryRetryFinished,
    SummaryRetryScheduled,
    ToolExecutionStart,
)
from pi_lsp.agent.harness import Harness
from pi_lsp.agent.headless import TerminalPrinter
from pi_lsp.agent.retry import (
    RetrySettings,
    is_context_overflow,
    is_passing_failure,
    is_retryable,
)
from pi_lsp.cli_common import OneLineRecord
from pi_lsp.providers import anthropic as anthropic_provider
from pi_lsp.providers import base, openai_api, openai_chat, openai_responses
from pi_lsp.providers.anthropic import AnthropicProvider
from pi_lsp.providers.base import MAX_TOKENS, ModelRequest, ReplyBuilder, TextDelta, ToolSpec
from pi_lsp.providers.base_url import masked_passwords, url_problem
from pi_lsp.providers.factory import provider_factory
from pi_lsp.providers.failures import MALFORMED_EVENT, event_json, transport_failure
from pi_lsp.providers.long_events import LONG_EVENT_CHARS
from pi_lsp.providers.openai_api import OpenAIProvider
from pi_lsp.providers.registry import (
    ANTHROPIC_API,
    CHAT_API,
    RESPONSES_API,
    Compat,
    ModelInfo,
    ModelRegistry,
    Price,
    ProviderConfig,
)
from pi_lsp.providers.retry import ProviderRetry, retry_delay_s
from pi_lsp.server.turns import progress_report
from pi_lsp.session import entries, tree
from pi_lsp.session.check import check_session
from pi_lsp.session.entries import (
    AssistantMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from pi_lsp.session.jsontext import encoder
from pi_lsp.session.tree import SessionTree
from pi_lsp.settings import Settings, load_settings
from tests import fake_anthropic
from tests.fake_anthropic import FakeAnthropic, refused_url
from tests.fake_openai import (
    MODEL,
    FakeOpenAI,
    Reply,
    chat_reply,
    chunk,
    completed,
    error_reply,
    message_item,
    responses_reply,
)
from tests.test_openai import close_clients
from tests.test_system_messages import pi16_eval, pi16_node
from tests.waits import CEILING_S

PRICE = Price(1, 4, 0.5, 0)
FAST = RetrySettings(base_delay_ms=1)  # pi's policy with waits too short to notice
NO_RETRY = RetrySettings(enabled=False)


def sse(*events: dict[str, Any]) -> bytes:
    """Chat Completions SSE: data lines only."""
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)


def named_sse(*events: dict[str, Any]) -> bytes:
    """Responses SSE: each event named by its type."""
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def local(api: str = CHAT_API, reasoning: bool = False, provider: str = "lab",
          base_url: str = "http://127.0.0.1:8080/v1", **fields: Any) -> ModelInfo:
    return ModelInfo(provider, MODEL, 32_000, 8_192, PRICE, reasoning=reasoning, api=api,
                     base_url=base_url, **fields)


def request(model: ModelInfo, *messages: Any, level: str = "off", tools: bool = True,
            session: str | None = "0193-session") -> ModelRequest:
    specs = [ToolSpec("bash", "run", {"type": "object"})] if tools else []
    return ModelRequest(model, "sys", [UserMessage(content="q", timestamp=1), *messages], specs,
                        level, session_id=session)


def reply(content: list[Any], api: str = CHAT_API, provider: str = "lab", model: str = MODEL,
          stop: str = "stop") -> AssistantMessage:
    return AssistantMessage(content=content, api=api, provider=provider, model=model,
                            usage=Usage(), stop_reason=stop, timestamp=2)  # type: ignore[arg-type]


class Rig:
    """A harness on a fresh session whose model is `lab/MODEL` on the fake (or `url`)."""

    def __init__(self, root: Path, url: str, api: str, retry: RetrySettings,
                 reasoning: bool) -> None:
        sessions = root / ".pi" / "sessions"
        sessions.mkdir(parents=True, exist_ok=True)
        self.path = str(sessions / "session.jsonl")
        self.tree = SessionTree.create(self.path, str(root))
        registry = ModelRegistry([local(api, reasoning, base_url=url)],
                                 [ProviderConfig("lab", api, url, "lab-key")])
        self.make = provider_factory(registry, lambda _n: None, retry=retry.provider)
        self.harness = Harness(self.tree, root, self.make, registry=registry,
                               default_model=("lab", MODEL), retry=retry)
        self.events: list[Any] = []
        self.harness.subscribe(self.events.append)

    def messages(self) -> list[dict[str, Any]]:
        lines = Path(self.path).read_text().splitlines()[1:]
        return [e["message"] for e in map(json.loads, lines) if e["type"] == "message"]

    def last(self) -> dict[str, Any]:
        return self.messages()[-1]


@pytest.fixture
async def rig(tmp_path: Path, oai: FakeOpenAI) -> AsyncIterator[Callable[..., Rig]]:
    made: list[Rig] = []

    def make(api: str = CHAT_API, retry: RetrySettings = NO_RETRY, reasoning: bool = False,
             url: str | None = None) -> Rig:
        made.append(Rig(tmp_path, url or f"{oai.url}/v1", api, retry, reasoning))
        return made[-1]

    yield make
    for one in made:
        for provider in one.harness._provider_cache.values():
            await close_clients(provider)


# -- 1. every failure is an error entry that keeps the partial reply -------------------------


async def test_a_malformed_sse_line_ends_as_an_error_entry_with_the_partial_text(
        rig, oai) -> None:
    one = rig()
    oai.script(Reply(raw=sse(chunk({"role": "assistant", "content": "partial "}),
                             chunk({"content": "text"})) + b"data: {not json\n\n"))
    await one.harness.prompt("hi")  # nothing escapes
    last = one.last()
    assert last["stopReason"] == "error"
    assert last["content"] == [{"type": "text", "text": "partial text"}]
    # pi 1.6's words (the openai SDK's): it said "lab sent a stream event that is not JSON
    # (...): '{not json'", which pi's retry patterns could match.
    assert last["errorMessage"] == MALFORMED_EVENT
    assert check_session(SessionTree.open(one.path)) == []


async def test_a_reply_too_long_for_a_session_entry_is_an_error_entry_without_content(
        rig, oai, monkeypatch) -> None:
    """A reply whose entry would pass the longest line a session holds (one text of 65 MB)
    was refused by the write: Harness.prompt raised WriteFailedError, the run had no AgentEnd
    and nothing of the reply was recorded. The line limit is 20,000 bytes here."""
    monkeypatch.setattr(base, "MAX_LINE_BYTES", 20_000)
    monkeypatch.setattr(tree, "MAX_LINE_BYTES", 20_000)
    one = rig()
    oai.script(chat_reply("y" * 30_000, calls=[("call_1", "bash", {"command": "touch ran"})]),
               chat_reply("fine"))
    await one.harness.prompt("hi")
    last = one.last()
    assert (last["stopReason"], last["content"], last["usage"]["output"]) == ("error", [], 30)
    assert re.fullmatch(r"The reply's content was left out: its session entry would take "
                        r"3\d{4} bytes, more than the 20000 one line holds \(pi-lsp could not "
                        r"read it back\)", last["errorMessage"])
    assert isinstance(one.events[-1], AgentEnd)
    assert not any(isinstance(e, ToolExecutionStart) for e in one.events)  # its call never ran
    await one.harness.prompt("again")
    assert one.last()["content"] == [{"type": "text", "text": "fine"}]
    assert check_session(SessionTree.open(one.path)) == []


async def test_a_value_nested_too_deep_to_write_fails_the_reply_without_it(rig, oai) -> None:
    """A finish_reason nested 100,000 levels deep, read now as JSON.parse reads it (the event
    failed as one pi-lsp could not read), would be kept in the reply as it came: too deep to
    write (msgspec's RecursionError escaped the turn) or to read back. The reply is failed
    without it, and the session stays whole."""
    one = rig()
    deep = "[" * 100_000 + "]" * 100_000
    frames = sse(chunk({"role": "assistant", "content": "Hi"}), chunk(finish="DEEP"))
    oai.script(Reply(raw=frames.replace(b'"DEEP"', deep.encode()) + b"data: [DONE]\n\n"),
               chat_reply("fine"))
    await one.harness.prompt("hi")
    last = one.last()
    assert (last["stopReason"], last["content"], "rawStopReason" in last) == ("error", [], False)
    assert last["errorMessage"].startswith(
        "The reply was left out: the server sent a value for it nested more than 196 levels "
        "deep (pi-lsp could not read it back); it had failed: ")
    assert isinstance(one.events[-1], AgentEnd)
    await one.harness.prompt("again")
    assert one.last()["content"] == [{"type": "text", "text": "fine"}]
    assert check_session(SessionTree.open(one.path)) == []


async def test_a_cut_connection_is_said_to_be_cut_not_unreachable(rig, oai) -> None:
    one = rig()
    oai.script(Reply([chunk({"content": "half an "}), chunk({"content": "answer"})], cut=True))
    await one.harness.prompt("hi")
    last = one.last()
    assert last["stopReason"] == "error"
    assert last["content"] == [{"type": "text", "text": "half an answer"}]
    assert "closed the connection before the reply was complete" in last["errorMessage"]
    assert "cannot reach" not in last["errorMessage"]


async def test_a_body_that_does_not_decompress_is_said_to_be_undecodable(rig, oai) -> None:
    """A 200 with a corrupt gzip body was "cannot reach lab (connection error ...)"; pi sees the
    body "terminated", which its retry takes as passing, and so does pi-lsp's."""
    oai.script(Reply(raw=b"\x1f\x8b\x08garbage", headers={"content-encoding": "gzip"}))
    one = rig()
    await one.harness.prompt("hi")
    message = one.last()["errorMessage"]
    assert message.startswith("lab sent a reply that could not be decoded (terminated: ")
    assert is_passing_failure(message)


async def test_a_stalled_stream_times_out_with_the_partial_reply(rig, oai) -> None:
    # Long enough that a busy machine never takes it for the stall; the stall itself is endless.
    one = rig(retry=RetrySettings(enabled=False, provider=ProviderRetry(timeout_ms=3000)))
    oai.script(Reply([chunk({"content": "so far"})], stall=True))
    await one.harness.prompt("hi")
    last = one.last()
    assert last["stopReason"] == "error" and last["content"][0]["text"] == "so far"
    assert "sent nothing for 3s (timed out)" in last["errorMessage"]


def test_the_refused_url_keeps_its_port_from_other_servers() -> None:
    """refused_url freed the port it found: another xdist worker's server could bind it before
    the test connected, and the connection was then not refused."""
    with refused_url() as url, socket.socket() as other, pytest.raises(
            OSError, match="Address already in use"):
        other.bind(("127.0.0.1", int(url.rsplit(":", 1)[1])))


async def test_a_refused_connection_is_an_error_entry(rig) -> None:
    with refused_url() as base_url:
        url = f"{base_url}/v1"
        one = rig(url=url)
        await one.harness.prompt("hi")
    last = one.last()
    assert last["stopReason"] == "error" and last["content"] == []
    assert f"cannot reach lab at {url}" in last["errorMessage"]
    assert is_passing_failure(last["errorMessage"])  # pi retries a connection error



@pytest.mark.parametrize(("text", "shown"), [
    # A server's JSON error naming a URL with no path, then an address: no password there.
    ('{"detail":"see https://console.example.com","contact":"billing@example.com"}', None),
    ('{"baseUrl":"http://localhost:11434","x":"a@b"}', None),
    # A password holding `@`: up to the authority's last one, as Node and urlsplit read it.
    ("'http://me:hunter@2secret@127.0.0.1:99999/v1'", "'http://me:***@127.0.0.1:99999/v1'"),
    ("http://u:p@[::1]:8/x?q=a@b", "http://u:***@[::1]:8/x?q=a@b"),
])
def test_only_a_urls_own_password_is_masked(text: str, shown: str | None) -> None:
    """The masking took text between a URL and a later `@` for a password (a provider's JSON
    error lost `"billing` to `***` in the session's errorMessage), and stopped at a password's
    own `@`, printing the rest of it."""
    assert masked_passwords(text) == (text if shown is None else shown)


async def test_a_password_in_the_base_url_is_masked_in_the_error(rig, tmp_path: Path) -> None:
    """`baseUrl: http://user:secret@host` was written whole into the session's errorMessage when
    the host could not be reached (session files get committed and shared): its password is
    masked there and in the models.json error; the user, host and port still say which server."""
    with refused_url() as base_url:
        url = base_url.replace("http://", "http://me:s3cret-pw@") + "/v1"
        one = rig(url=url)
        await one.harness.prompt("hi")
        tree = SessionTree.create(str(tmp_path / "s.jsonl"), str(tmp_path))
        provider = AnthropicProvider("k", base_url=url)
        harness = Harness(tree, tmp_path, lambda _n: provider, retry=NO_RETRY)
        try:
            [_, reply] = await harness.prompt("hi")
        finally:
            await provider.client.close()
    masked = url.replace("s3cret-pw", "***")
    assert isinstance(reply, AssistantMessage) and reply.error_message is not None
    for said in (one.last()["errorMessage"], reply.error_message):
        assert "s3cret-pw" not in said and f"at {masked}" in said, said
    problem = url_problem("ftp://me:s3cret-pw@host:21/")
    assert problem is not None and "s3cret-pw" not in problem and "me:***@host:21" in problem
    logged = OneLineRecord("pi_lsp", logging.WARNING, __file__, 1, "no request could be made: %s",
                           (f"{url} refused",), None)
    assert logged.getMessage() == f"no request could be made: {masked} refused"


async def test_an_openai_compatible_error_body_the_sdk_does_not_parse_is_still_shown(
        rig, oai) -> None:
    """Ollama's and TGI's {"error": "..."}, FastAPI's {"detail": ...}, a proxy's HTML page: the
    SDK finds no message in them, and the reply said only "Error code: 400"."""
    one = rig()
    page = b"<html>\n<head><title>502 Bad Gateway</title></head>\n<body>nginx</body>\n</html>"
    oai.script(Reply(status=400, error="model 'qwen3:8b' not found, try pulling it first"),
               Reply(status=422, raw=b'{"detail": [{"loc": ["body"], "msg": "field required"}]}'),
               Reply(status=502, raw=page, headers={}),
               Reply(status=400, raw=b"x" * 5000, headers={}),  # pi 1.6 keeps 4,000
               error_reply(400, "invalid_request_error", "z" * 5000))  # of a message too
    shown = []
    for _ in range(5):
        await one.harness.prompt("hi")
        shown.append(one.last()["errorMessage"])
    assert shown[0] == "lab 400 error: model 'qwen3:8b' not found, try pulling it first"
    assert shown[1] == 'lab 422 error: {"detail":[{"loc":["body"],"msg":"field required"}]}'
    assert shown[2] == ("lab 502 error: <html> <head><title>502 Bad Gateway</title></head> "
                        "<body>nginx</body> </html>")
    assert shown[3] == f"lab 400 error: {'x' * 4000}... [truncated 1000 chars]"
    assert shown[4] == f"lab 400 invalid_request_error: {'z' * 4000}... [truncated 1000 chars]"


@pytest.mark.parametrize(("provider", "reason"), [
    ("openai", "no OpenAI API key"), ("nowhere", "provider 'nowhere' is not configured")])
async def test_a_mid_run_switch_to_a_model_that_cannot_be_asked_ends_with_an_error_reply(
        rig, oai, monkeypatch, tmp_path, provider, reason) -> None:
    """The switch lands at the save point after the tool; the provider for the next request
    could not be made, and that escaped Harness.prompt with no reply and no agent_end."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    one = rig()
    (tmp_path / "a.txt").write_text("x\n")
    oai.script(chat_reply(calls=[("c1", "read", {"path": "a.txt"})]))

    def switch(event: Any) -> None:
        if isinstance(event, ToolExecutionStart):
            one.harness.set_model(provider, "gpt-5-mini")

    one.harness.subscribe(switch)
    await one.harness.prompt("hi")
    last = one.last()
    assert (last["role"], last["stopReason"]) == ("assistant", "error")
    assert (last["provider"], last["model"]) == (provider, "gpt-5-mini")
    assert reason in last["errorMessage"]
    assert [m["role"] for m in one.messages()][-4:] == ["user", "assistant", "toolResult",
                                                       "assistant"]
    assert isinstance(one.events[-1], AgentEnd)
    assert check_session(SessionTree.open(one.path)) == []


async def test_an_abort_while_a_switched_to_provider_is_made_ends_the_run_at_once(
        rig, oai, tmp_path) -> None:
    """The new provider is made off the event loop (its SDK's import takes seconds), and an
    abort meanwhile ends the run without waiting for it."""
    one = rig()
    (tmp_path / "a.txt").write_text("x\n")
    oai.script(chat_reply(calls=[("c1", "read", {"path": "a.txt"})]))
    loop, making, release = asyncio.get_running_loop(), asyncio.Event(), threading.Event()
    make = one.harness._providers

    def slow(name: str) -> Any:
        if name == "other":
            loop.call_soon_threadsafe(making.set)
            assert threading.current_thread() is not threading.main_thread(), "made on the loop"
            release.wait()
        return make("lab")

    one.harness._providers = slow
    one.harness.subscribe(lambda event: isinstance(event, ToolExecutionStart) and
                          one.harness.set_model("other", MODEL))
    run = asyncio.ensure_future(one.harness.prompt("hi"))
    await making.wait()
    one.harness.abort()
    try:
        await run
    finally:
        release.set()
    await one.harness._made_provider("other")  # made meanwhile, so the rig closes its client
    last = one.last()
    assert (last["stopReason"], last["errorMessage"]) == ("aborted", "Request was aborted")
    assert isinstance(one.events[-1], AgentEnd)


async def test_a_port_out_of_range_cannot_be_reached(rig, tmp_path: Path) -> None:
    """The transport's task group wraps the connect failure: the openai SDK let the group by
    ("a reply pi-lsp cannot read (ExceptionGroup: ...)", not retried), and Anthropic's reason
    was the group's "unhandled errors in a TaskGroup"."""
    url = "http://127.0.0.1:99999"
    one = rig(url=f"{url}/v1")
    await one.harness.prompt("hi")
    tree = SessionTree.create(str(tmp_path / "s.jsonl"), str(tmp_path))
    provider = AnthropicProvider("k", base_url=url)
    harness = Harness(tree, tmp_path, lambda _n: provider, retry=NO_RETRY)
    try:
        [_, reply] = await harness.prompt("hi")
    finally:
        await provider.client.close()
    assert isinstance(reply, AssistantMessage)
    reason = "(connection error: connect(): port must be 0-65535.)"
    assert one.last()["errorMessage"] == f"cannot reach lab at {url}/v1/ {reason}"
    assert reply.error_message == f"cannot reach Anthropic at {url} {reason}"
    assert is_passing_failure(one.last()["errorMessage"])  # retried, as pi retries one


async def test_a_chat_stream_that_stops_without_finish_reason_is_incomplete(rig, oai) -> None:
    one = rig()
    oai.script(Reply(raw=sse(chunk({"content": "trailing off"}))))  # no finish_reason, no [DONE]
    await one.harness.prompt("hi")
    last = one.last()
    assert last["stopReason"] == "error" and last["content"][0]["text"] == "trailing off"
    assert "ended without finish_reason" in last["errorMessage"]


async def test_a_responses_stream_without_a_terminal_event_is_incomplete(rig, oai) -> None:
    one = rig(api=RESPONSES_API)
    oai.script(Reply(raw=named_sse(*message_item(0, "unfinished"))))
    await one.harness.prompt("hi")
    last = one.last()
    assert last["stopReason"] == "error" and last["content"][0]["text"] == "unfinished"
    assert "terminal response event" in last["errorMessage"]


async def test_an_unknown_finish_reason_is_an_error_as_in_pi(rig, oai) -> None:
    one = rig()
    oai.script(Reply(raw=sse(chunk({"content": "x"}), chunk(finish="network_error")) +
                     b"data: [DONE]\n\n"))
    await one.harness.prompt("hi")
    assert one.last()["errorMessage"] == "Provider finish_reason: network_error"


async def test_anthropic_cut_mid_reply_keeps_the_partial_text(
        tmp_path: Path, fake: FakeAnthropic) -> None:
    tree = SessionTree.create(str(tmp_path / "s.jsonl"), str(tmp_path))
    provider = AnthropicProvider("k", base_url=fake.url)
    harness = Harness(tree, tmp_path, lambda _n: provider, retry=NO_RETRY)
    fake.script(fake_anthropic.Reply([fake_anthropic.message_start(),
                                      *fake_anthropic.text_block(0, "cut ", "short")[:3]],
                                     cut=True),
                fake_anthropic.Reply([fake_anthropic.message_start(),
                                      *fake_anthropic.text_block(0, "no stop")]))
    [_, first] = await harness.prompt("one")
    assert isinstance(first, AssistantMessage) and first.stop_reason == "error"
    assert first.content == [TextContent(text="cut short")]
    assert "Anthropic closed the connection before the reply was complete" in \
        (first.error_message or "")
    [_, second] = await harness.prompt("two")
    assert isinstance(second, AssistantMessage)
    assert second.error_message == "Anthropic: stream ended before message_stop"
    assert second.response_id == "msg_fake"
    await provider.client.close()


def _broken(*_args: Any, **_kwargs: Any) -> Any:
    raise RuntimeError("models could not be built")


@pytest.mark.parametrize("api", [CHAT_API, RESPONSES_API, ANTHROPIC_API])
async def test_a_request_that_cannot_be_made_ends_the_turn_as_an_error_reply(
        rig, tmp_path: Path, fake: FakeAnthropic, monkeypatch, api: str) -> None:
    """A failure making the request (the SDK's set-up, its parameters) escaped the provider:
    the prompt raised and the session kept the prompt with no reply; pi 1.6 ends it as an
    error reply, as any failed call."""
    if api == ANTHROPIC_API:
        monkeypatch.setattr(anthropic_provider, "request_params", _broken)
        provider = AnthropicProvider("k", base_url=fake.url)
        tree = SessionTree.create(str(tmp_path / "s.jsonl"), str(tmp_path))
        harness = Harness(tree, tmp_path, lambda _n: provider, retry=NO_RETRY)
        label = "Anthropic"
    else:
        if api == RESPONSES_API:  # the first Responses call, made ready in a worker thread
            monkeypatch.setattr(openai_api, "_responses_ready", False)
            monkeypatch.setattr(openai_api, "construct_type", _broken)
        else:
            monkeypatch.setattr(openai_chat, "endpoint", _broken)
        one = rig(api=api)
        harness, tree, label = one.harness, one.tree, "lab"
    [_, answer] = await harness.prompt("hi")
    assert isinstance(answer, AssistantMessage) and answer.stop_reason == "error"
    assert answer.error_message == \
        f"{label}: the request could not be made (RuntimeError: models could not be built)"
    [*_, written] = [e["message"] for e in map(json.loads, Path(tree.path).read_text(
        ).splitlines()[1:]) if e["type"] == "message"]
    assert (written["role"], written["stopReason"]) == ("assistant", "error")
    # Written as pi 1.6 writes what its provider threw: the error after the timestamp.
    assert list(written).index("errorMessage") > list(written).index("timestamp")
    assert not harness.busy
    if api == ANTHROPIC_API:
        await provider.client.close()


# -- a lone surrogate never crashes a provider -----------------------------------------------


async def test_surrogates_in_a_stream_are_kept_as_pi_keeps_them(oai) -> None:
    model = local(base_url=f"{oai.url}/v1")
    provider = OpenAIProvider("lab", "k", f"{oai.url}/v1")
    # An emoji split between two events, then a lone high surrogate.
    oai.script(Reply(raw=b'data: {"choices":[{"index":0,"delta":{"content":"a\\ud83d"}}]}\n\n'
                         b'data: {"choices":[{"index":0,"delta":{"content":"\\ude48 b\\ud800"}}]}'
                         b'\n\ndata: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}'
                         b'\n\ndata: [DONE]\n\n'))
    built = ReplyBuilder(CHAT_API, model)
    deltas = [e async for e in provider.stream(request(model), built)]
    message = built.message()
    assert message.stop_reason == "stop"
    assert message.content == [TextContent(text="a\U0001f648 b\ud800")]
    # It goes back to a model without the lone half, and the body can be encoded.
    params = openai_chat.request_params(request(model, message))
    json.dumps(params, ensure_ascii=False).encode()
    assert params["messages"][-1]["content"] == "a\U0001f648 b"
    # The terminal shows the emoji whole and the lone half as U+FFFD, without crashing.
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    printer = TerminalPrinter(out, io.StringIO())
    for delta in deltas:
        if isinstance(delta, TextDelta):
            printer.write_text(delta.delta)
    printer.end_line()
    out.flush()
    assert out.buffer.getvalue().decode() == "a\U0001f648 b\ufffd\n"  # type: ignore[attr-defined]
    await close_clients(provider)


# -- 3. continuing a Responses session pi wrote ----------------------------------------------


async def test_a_responses_session_written_by_pi_continues(rig, oai) -> None:
    one = rig(api=RESPONSES_API)
    pi_reply = reply([TextContent(text="From pi.", text_signature='{"v":1,"id":"msg_5"}'),
                      TextContent(text="Older.", text_signature="msg_6")], api=RESPONSES_API)
    one.tree.append_message(UserMessage(content="earlier", timestamp=1))
    one.tree.append_message(pi_reply)
    oai.script(responses_reply("Next."))
    await one.harness.prompt("go on")
    [sent] = oai.responses_requests()
    texts = [i for i in sent["input"] if i.get("type") == "message"]
    assert [t["id"] for t in texts] == ["msg_5", "msg_6"]  # pi's form and the bare id
    written = one.last()["content"][0]
    assert written["textSignature"] == '{"v":1,"id":"msg_0"}'  # pi's form
    assert one.last()["responseId"] == "resp_1"


# -- 4. Chat Completions history as pi sends it ----------------------------------------------


def test_chat_assistant_text_goes_back_as_one_string() -> None:
    model = local()
    params = openai_chat.request_params(request(
        model, reply([TextContent(text="Hello "), TextContent(text="  "),
                      TextContent(text="there.")])))
    assert params["messages"][2] == {"role": "assistant", "content": "Hello there."}
    as_text = local(compat=Compat(requires_thinking_as_text=True), reasoning=True)
    params = openai_chat.request_params(request(as_text, reply(
        [ThinkingContent(thinking="hmm"), TextContent(text="Yes.")])))
    assert params["messages"][2]["content"] == [{"type": "text", "text": "hmm"},
                                                {"type": "text", "text": "Yes."}]


def test_another_models_thinking_is_not_sent(oai) -> None:
    claude = reply([ThinkingContent(thinking="private", thinking_signature="sig"),
                    TextContent(text="Visible.")], api="anthropic-messages",
                   provider="anthropic", model="claude-sonnet-4-5")
    for api, module in ((CHAT_API, openai_chat), (RESPONSES_API, openai_responses)):
        params = module.request_params(request(local(api), claude))
        assert "private" not in json.dumps(params) and "Visible." in json.dumps(params)


# -- 5. models.json as pi reads it ------------------------------------------------------------


def test_models_json_with_comments_and_trailing_commas_is_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    (agent / "models.json").write_bytes(b"\xef\xbb\xbf" + b"""{
  // a local llama.cpp
  "providers": {
    "llama": {
      "baseUrl": "http://127.0.0.1:8080/v1", // the // in the URL stays
      "api": "openai-completions",
      "apiKey": "none",
      "models": [{"id": "qwen", "thinkingLevelMap": {"off": "none",},},],
    },
  },
}""")
    (agent / "settings.json").write_bytes(
        b"\xef\xbb\xbf" + b'{"defaultProvider": "llama", "defaultModel": "qwen"}')
    settings = load_settings(tmp_path, project=True)
    assert (settings.default_provider, settings.default_model) == ("llama", "qwen")
    qwen = settings.registry().get("llama", "qwen")
    assert qwen.base_url == "http://127.0.0.1:8080/v1"
    assert qwen.thinking_level_map == {"off": "none"}


# -- 6. thinking off on a Responses reasoning model ------------------------------------------


def test_responses_thinking_off_sends_effort_none() -> None:
    params = openai_responses.request_params(request(local(RESPONSES_API, reasoning=True)))
    assert params["reasoning"] == {"effort": "none"}
    assert "include" not in params
    gpt5 = ModelRegistry().get("openai", "gpt-5")  # pi's catalog: GPT-5 has no "off"
    # pi 1.6 clamps off to the least effort GPT-5 has (measured against pi-ai 1.6)
    assert openai_responses.request_params(request(gpt5))["reasoning"] == {
        "effort": "minimal", "summary": "auto"}
    assert openai_responses.request_params(request(gpt5, level="xhigh"))["reasoning"] == {
        "effort": "high", "summary": "auto"}
    plain = local(RESPONSES_API)
    assert "reasoning" not in openai_responses.request_params(request(plain))


# -- 7. ids, responseId, cache key and affinity, tools ---------------------------------------


def test_other_providers_tool_ids_are_normalized_for_responses() -> None:
    claude = reply([ToolCall(id="toolu_01Xy.Z", name="bash", arguments={})],
                   api="anthropic-messages", provider="anthropic", model="claude-sonnet-4-5",
                   stop="toolUse")
    result = ToolResultMessage(tool_call_id="toolu_01Xy.Z", tool_name="bash",
                               content=[TextContent(text="ok")], is_error=False, timestamp=3)
    items = openai_responses.request_params(request(local(RESPONSES_API), claude, result))
    call = next(i for i in items["input"] if i.get("type") == "function_call")
    output = next(i for i in items["input"] if i.get("type") == "function_call_output")
    assert call["call_id"] == output["call_id"] == "toolu_01Xy_Z"


async def test_responses_sends_the_cache_key_and_session_affinity(rig, oai) -> None:
    one = rig(api=RESPONSES_API)
    oai.script(responses_reply("ok"))
    await one.harness.prompt("hi")
    session_id = one.tree.header.id
    [sent] = oai.responses_requests()
    assert sent["prompt_cache_key"] == session_id
    headers = oai.requests[-1].headers
    assert headers["session-id"] == headers["x-client-request-id"] == session_id
    assert "session_id" not in headers  # pi 0.73's name


async def test_chat_replies_carry_the_response_id(rig, oai) -> None:
    one = rig()
    oai.script(chat_reply("ok"))
    await one.harness.prompt("hi")
    assert one.last()["responseId"] == "chatcmpl-1"
    assert "prompt_cache_key" not in oai.chat_requests()[-1]  # only api.openai.com gets one


def test_tools_are_left_out_when_none_are_active() -> None:
    call = reply([ToolCall(id="c1", name="bash", arguments={})], stop="toolUse")
    result = ToolResultMessage(tool_call_id="c1", tool_name="bash",
                               content=[TextContent(text="ok")], is_error=False, timestamp=3)
    plain = openai_chat.request_params(request(local(), call, result, tools=False))
    assert "tools" not in plain
    proxy = local(compat=Compat(requires_tools_with_tool_history=True))
    assert openai_chat.request_params(request(proxy, call, result, tools=False))["tools"] == []
    assert "tools" not in openai_chat.request_params(request(proxy, tools=False))
    assert "tools" not in openai_responses.request_params(request(local(RESPONSES_API),
                                                                  tools=False))


# -- 8. retries ------------------------------------------------------------------------------


async def test_a_rate_limit_is_retried_at_the_agent_level_and_each_wait_announced(
        rig, oai) -> None:
    one = rig(retry=FAST)
    oai.script(error_reply(429, "rate_limit_exceeded", "slow down"),
               error_reply(500, "server_error", "busy"), chat_reply("at last"))
    await one.harness.prompt("hi")
    assert len(oai.chat_requests()) == 3
    starts = [e for e in one.events if isinstance(e, AutoRetryStart)]
    assert [(s.attempt, s.max_attempts, s.delay_ms) for s in starts] == [(1, 3, 1), (2, 3, 2)]
    assert "429" in starts[0].error_message and "slow down" in starts[0].error_message
    [end] = [e for e in one.events if isinstance(e, AutoRetryEnd)]
    assert (end.success, end.attempt) == (True, 2)
    stops = [m["stopReason"] for m in one.messages() if m["role"] == "assistant"]
    assert stops == ["error", "error", "stop"]  # the failures stay in the file
    # The retried request left the failed replies out.
    assert [m["role"] for m in oai.chat_requests()[-1]["messages"]] == ["system", "user"]
    assert check_session(SessionTree.open(one.path)) == []


async def test_retries_stop_after_max_retries(rig, oai) -> None:
    one = rig(retry=FAST)
    oai.script(*[error_reply(503, "unavailable", "down") for _ in range(6)])
    await one.harness.prompt("hi")
    assert len(oai.chat_requests()) == 4  # the request and pi's 3 retries
    [end] = [e for e in one.events if isinstance(e, AutoRetryEnd)]
    assert (end.success, end.attempt) == (False, 3) and "down" in (end.final_error or "")
    assert one.last()["stopReason"] == "error"


async def test_an_exhausted_quota_and_a_bad_request_are_not_retried(rig, oai) -> None:
    one = rig(retry=FAST)
    for error in (error_reply(429, "insufficient_quota", "You exceeded your current quota"),
                  error_reply(400, "invalid_request_error", "bad input")):
        oai.script(error)
        await one.harness.prompt("again")
        assert len(oai.requests) == 1 and one.last()["stopReason"] == "error"
    assert not any(isinstance(e, AutoRetryStart) for e in one.events)


async def test_provider_retries_honour_retry_after(rig, oai) -> None:
    provider = RetrySettings(enabled=False, provider=ProviderRetry(max_retries=1))
    one = rig(retry=provider)
    oai.script(error_reply(429, "rate_limit_exceeded", "wait", {"retry-after": "0.01"}),
               chat_reply("fine"))
    await one.harness.prompt("hi")
    assert len(oai.chat_requests()) == 2 and one.last()["content"][0]["text"] == "fine"
    oai.script(error_reply(429, "rate_limit_exceeded", "come back later",
                           {"retry-after": "120"}))
    await one.harness.prompt("again")
    assert len(oai.chat_requests()) == 1  # asked for more than 60s: not waited for
    message = one.last()["errorMessage"]
    assert message.startswith("lab: Server requested 120s retry delay (max: 60s).")
    assert is_passing_failure(message)  # the agent-level retry may take it from there


@pytest.mark.parametrize(("header", "value"), [("retry-after", "120s"),
                                                ("retry-after-ms", "120000ms")])
async def test_a_delay_with_a_unit_after_its_number_is_read_as_pi_reads_it(
        rig, oai, header: str, value: str) -> None:
    """"120s" was no number to float(), so the call was retried at once; pi's
    Number.parseFloat reads the leading 120 and refuses to wait that long."""
    one = rig(retry=RetrySettings(enabled=False, provider=ProviderRetry(max_retries=1)))
    oai.script(error_reply(429, "rate_limit_exceeded", "later", {header: value}))
    await one.harness.prompt("hi")
    assert len(oai.chat_requests()) == 1
    assert one.last()["errorMessage"].startswith(
        "lab: Server requested 120s retry delay (max: 60s).")
    assert retry_delay_s({"retry-after": " 2.5e0 seconds"}, 0, 60_000, "") == 2.5
    assert retry_delay_s({"retry-after-ms": "-Infinity", "retry-after": ".5x"}, 0, 60_000,
                         "") == 0.5


def test_retry_delays_follow_pi() -> None:
    assert retry_delay_s({"retry-after-ms": "250"}, 0, 60_000, "") == 0.25
    assert retry_delay_s({"retry-after": "2"}, 0, 60_000, "") == 2
    assert retry_delay_s({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0, 60_000, "") == 0
    assert retry_delay_s({"retry-after": "90"}, 0, 0, "") == 90  # 0: no limit
    assert 0.375 <= retry_delay_s({}, 0, 60_000, "") <= 0.5
    assert 6 <= retry_delay_s({}, 9, 60_000, "") <= 8
    # An endless or unreadable delay counts as none asked, as in pi (it read "nans" before);
    # retry-after-ms that is no number leaves retry-after to say.
    for endless in ({"retry-after-ms": "inf"}, {"retry-after-ms": "1e400"},
                    {"retry-after": "1e306"}, {"retry-after-ms": "nan"}):
        assert 0.375 <= retry_delay_s(endless, 0, 60_000, "") <= 0.5, endless
    assert retry_delay_s({"retry-after-ms": "soon", "retry-after": "3"}, 0, 60_000, "") == 3
    settings = RetrySettings()
    assert [settings.delay_ms(n) for n in (1, 2, 3, 7)] == [2000, 4000, 8000, 60_000]


def test_a_delay_in_other_digits_is_no_number_as_in_pi() -> None:
    """Arabic-Indic "٣٠" was read as a 30 s wait; pi's Number.parseFloat reads ASCII digits
    only, so it counts as no delay asked and the backoff applies."""
    assert 0.375 <= retry_delay_s({"retry-after": "\u0663\u0660"}, 0, 60_000, "") <= 0.5
    assert 0.375 <= retry_delay_s({"retry-after-ms": "\u0663\u0660"}, 0, 60_000, "") <= 0.5


def test_a_retry_wait_is_shown_in_the_editors_progress() -> None:
    event = AutoRetryStart(attempt=1, max_attempts=3, delay_ms=2000,
                           error_message="lab 429 rate_limit_exceeded: slow down")
    assert progress_report(event) == \
        "lab 429 rate_limit_exceeded: slow down; retrying in 2s (1/3)"


def test_a_summarys_retry_wait_and_the_attempt_after_it_are_in_the_progress() -> None:
    """In a summary's words as pi 1.6's status line has them: the wait as a turn's, then what
    is asked again (its CompactionStatusIndicator and BranchSummaryStatusIndicator)."""
    wait = SummaryRetryScheduled(attempt=2, max_attempts=3, delay_ms=4000,
                                 error_message="lab 503: busy")
    assert progress_report(wait) == "lab 503: busy; retrying in 4s (2/3)"
    again = [progress_report(SummaryRetryAttemptStart(source="compaction", reason=reason))
             for reason in ("manual", "threshold", "overflow")]
    assert again == ["compacting the context", "auto-compacting",
                     "context overflow detected, auto-compacting"]
    assert progress_report(SummaryRetryAttemptStart(source="branchSummary")) == \
        "summarizing the branch"
    assert progress_report(SummaryRetryFinished()) is None


# -- 10. pi 1.6's per-host defaults ----------------------------------------------------------


def test_instructions_go_as_system_except_to_openai() -> None:
    thinking = local(reasoning=True)
    assert openai_chat.request_params(request(thinking))["messages"][0]["role"] == "system"
    hosted = local(reasoning=True, base_url="https://api.openai.com/v1")
    params = openai_chat.request_params(request(hosted))
    assert params["messages"][0]["role"] == "developer"
    assert params["prompt_cache_key"] == "0193-session"
    told = local(reasoning=True, compat=Compat(supports_developer_role=True))
    assert openai_chat.request_params(request(told))["messages"][0]["role"] == "developer"
    kept_off = local(RESPONSES_API, reasoning=True, compat=Compat(supports_developer_role=False))
    assert openai_responses.request_params(request(kept_off))["input"][0]["role"] == "system"


def test_hosts_get_pi_16s_detected_compat() -> None:
    previous = reply([TextContent(text="a")])
    deepseek = local(reasoning=True, provider="ds", base_url="https://api.deepseek.com/v1")
    params = openai_chat.request_params(request(deepseek, previous, level="high"))
    assert params["max_tokens"] == 8192 and "store" not in params
    assert params["thinking"] == {"type": "enabled"} and params["reasoning_effort"] == "high"
    assert params["messages"][2]["reasoning_content"] == ""
    off = openai_chat.request_params(request(deepseek))
    assert off["thinking"] == {"type": "disabled"} and "reasoning_effort" not in off
    router = local(reasoning=True, provider="openrouter", base_url="https://openrouter.ai/api/v1")
    assert openai_chat.request_params(request(router))["reasoning"] == {"effort": "none"}
    assert openai_chat.request_params(request(router, level="low"))["reasoning"] == {
        "effort": "low"}
    assert openai_chat.request_headers(request(router)) == {"x-session-id": "0193-session"}
    together = local(reasoning=True, base_url="https://api.together.xyz/v1")
    params = openai_chat.request_params(request(together, level="low"))
    assert params["reasoning"] == {"enabled": True} and "reasoning_effort" not in params
    assert params["max_tokens"] == 8192
    local_server = openai_chat.request_params(request(local(reasoning=True), level="low"))
    assert local_server["store"] is False and local_server["max_completion_tokens"] == 8192
    assert local_server["reasoning_effort"] == "low"
    assert openai_chat.request_headers(request(local())) == {}
    explicit = local(reasoning=True, base_url="https://api.deepseek.com/v1",
                     compat=Compat(max_tokens_field="max_completion_tokens",
                                   thinking_format="qwen"))
    params = openai_chat.request_params(request(explicit, level="low"))
    assert params["max_completion_tokens"] == 8192 and params["enable_thinking"] is True


def test_token_counts_a_server_sends_are_made_ones_a_reply_can_hold() -> None:
    """10**400 input tokens overflowed the cost outside the provider's error handling, and the
    turn failed (found in review); negative and fractional counts are kept out too."""
    model = ModelRegistry().get("anthropic", "claude-sonnet-4-5")
    assert model is not None
    reply = ReplyBuilder(model.api, model)
    reply.usage.input, reply.usage.output, reply.usage.cache_read = 10**400, -5, 1.5  # type: ignore[assignment]
    usage = reply.message().usage
    assert (usage.input, usage.output, usage.cache_read) == (MAX_TOKENS, 0, 1)
    assert usage.total_tokens == MAX_TOKENS + 1 and usage.cost.total > 0


def test_a_total_past_exact_integers_is_the_sum_pi_16_makes() -> None:
    """Counts near MAX_TOKENS were added exactly: the line's totalTokens 9007199254741021 is
    read by pi 1.6 (a double) as 9007199254741020, the sum it makes itself, so pi-lsp and pi
    read the entry differently (found by fuzzing the streams)."""
    model = ModelRegistry().get("anthropic", "claude-sonnet-4-5")
    assert model is not None
    reply = ReplyBuilder(model.api, model)
    reply.usage.input, reply.usage.output = MAX_TOKENS, 30
    line = encoder.encode(reply.message())
    assert json.loads(line)["usage"]["totalTokens"] == 9007199254741020 == float(MAX_TOKENS) + 30


# What servers answer a request too long for the model's window (pi-ai 1.6's examples).
OVERFLOW_BODIES = {
    "Groq": (400, {"error": {"message": "Please reduce the length of the messages or completion.",
                             "type": "invalid_request_error", "code": "context_length_exceeded"}}),
    "llama.cpp": (400, {"error": {"code": 400, "type": "exceed_context_size_error", "message":
                                  "the request exceeds the available context size, try "
                                  "increasing it"}}),
    "z.ai": (400, {"error": {"code": "1261", "message": "Prompt too long"}}),
    "Kimi": (400, {"error": {"message": "Your request exceeded model token limit: 262144 "
                                        "(requested: 300000)"}}),
    "MiniMax": (400, {"base_resp": {"status_code": 2013,
                                    "status_msg": "invalid params, context window exceeds limit"}}),
    "Qwen": (400, {"error": {"message": "Range of input length should be [1, 129024]",
                             "code": "invalid_parameter_error"}}),
    "xAI": (400, {"code": "Client specified an invalid argument", "error":
                  "This model's maximum prompt length is 131072 but the request contains 537812 "
                  "tokens."}),
    "Copilot": (400, {"error": {"message": "prompt token count of 140000 exceeds the limit of "
                                           "128000", "code": "model_max_prompt_tokens_exceeded"}}),
    "DS4": (400, {"error": {"message": "Prompt has 300,000 tokens, but the configured context "
                                       "size is 262,144 tokens"}}),
    "Gemini": (400, {"error": {"message": "The input token count (1196265) exceeds the maximum "
                                          "number of tokens allowed (1048575)."}}),
    "a bare 413": (413, None),
}


@pytest.mark.parametrize("server", list(OVERFLOW_BODIES))
async def test_overflows_are_told_as_pi_16_tells_them(oai, server: str) -> None:
    """pi-lsp's own patterns missed all of these, so the context was not compacted."""
    status, body = OVERFLOW_BODIES[server]
    model = local(base_url=f"{oai.url}/v1")
    provider = OpenAIProvider("lab", "k", f"{oai.url}/v1")
    oai.script(Reply(status=status, raw=json.dumps(body).encode() if body else b" ", headers={}))
    built = ReplyBuilder(CHAT_API, model)
    _ = [e async for e in provider.stream(request(model), built)]
    assert is_context_overflow(built.message().error_message, "lab")
    await close_clients(provider)


@pytest.mark.parametrize(("text", "provider"), [
    ("Request failed with status 413: payload too large", "ollama"),
    ("HTTP 413 Payload Too Large", "lab"),
    ("upstream returned 413", "anthropic"),
    ("Error code: 400", "cerebras"),
    ("Error code: 413", "cerebras"),
])
def test_a_servers_own_error_text_with_a_status_is_no_overflow(text: str, provider: str) -> None:
    """An error a server sends mid-stream is written as it came, as pi 1.6 writes it, and pi's
    patterns do not read these as an overflow; pi-lsp's own ones for its "<provider> 413" and
    Cerebras's "Error code: 400" lines did, so the context was compacted and asked again."""
    assert not is_context_overflow(text, provider)
    assert is_context_overflow("OpenAI 413: Request Entity Too Large", "openai")
    assert is_context_overflow("lab 413", "lab")
    assert is_context_overflow("413 status code (no body)", "lab")  # pi's own line


def test_a_rate_limit_or_a_window_too_small_for_the_kept_tokens_is_no_overflow() -> None:
    """pi-lsp took any "context length" and "too many tokens" for an overflow (pi 1.6 excludes
    rate limits and reads LM Studio's too-small window as none); Cerebras's bare 400 is one."""
    assert not is_context_overflow("lab 429 tokens: Rate limit reached: Too many tokens per minute")
    assert not is_context_overflow(
        "lab 400 error: Trying to keep the first 5000 tokens when context the overflows. However, "
        "the model is loaded with context length of only 4096 tokens, which is not enough.")
    assert not is_context_overflow("lab 400 error: Error code: 400", "lab")
    assert is_context_overflow("cerebras 400 error: Error code: 400", "cerebras")


async def test_a_rate_limit_on_tokens_is_retried_not_compacted(rig, oai) -> None:
    """A 429 "Too many tokens per minute" read as an overflow: it was neither retried nor
    compacted, and the prompt failed."""
    one = rig(retry=FAST)
    oai.script(error_reply(429, "tokens", "Rate limit reached: Too many tokens per minute"),
               chat_reply("fine"))
    await one.harness.prompt("hi")
    assert len(oai.chat_requests()) == 2 and one.last()["content"][0]["text"] == "fine"
    assert [e.attempt for e in one.events if isinstance(e, AutoRetryStart)] == [1]


def _anthropic_error(status: int, kind: str, message: str) -> fake_anthropic.Reply:
    return fake_anthropic.Reply(status=status, error_type=kind, error_message=message, headers={})


def _anthropic_event(kind: str, message: str) -> fake_anthropic.Reply:
    """A reply begun, then an `error` event."""
    return fake_anthropic.Reply([fake_anthropic.message_start(),
                                 *fake_anthropic.text_block(0, "half")], error_type=kind,
                                error_message=message)


def _openai_error(status: int, kind: str, message: str) -> Reply:
    return error_reply(status, kind, message, headers={})


def _responses_failed(code: str, message: str) -> Reply:
    failed = completed(status="failed")
    failed["response"]["error"] = {"code": code, "message": message}
    return Reply([*message_item(0, "half")[:3], failed])


ANTHROPIC_HALF = [fake_anthropic.message_start(), *fake_anthropic.text_block(0, "half")]
HALF_CHUNK, HALF_ITEM = [chunk({"content": "half"})], message_item(0, "half")[:3]
# Each failure as pi-lsp's providers meet it, what pi 1.6 made of the same bytes (its own
# provider against the same fake server), and whether pi asks again (isRetryableAssistantError,
# an overflow excluded).
RETRY_TABLE: dict[str, tuple[str, Any, str, bool]] = {
    "anthropic 529 overloaded": (ANTHROPIC_API, _anthropic_error(529, "overloaded_error",
                                                                 "Overloaded"),
        '529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}', True),
    "anthropic 500": (ANTHROPIC_API, _anthropic_error(500, "api_error", "boom"),
        '500 {"type":"error","error":{"type":"api_error","message":"boom"}}', True),
    "anthropic 408": (ANTHROPIC_API, _anthropic_error(408, "timeout_error", "slow"),
        '408 {"type":"error","error":{"type":"timeout_error","message":"slow"}}', True),
    "anthropic 501": (ANTHROPIC_API, _anthropic_error(501, "api_error", "boom"),
        '501 {"type":"error","error":{"type":"api_error","message":"boom"}}', False),
    "anthropic 409": (ANTHROPIC_API, _anthropic_error(409, "conflict_error", "x"),
        '409 {"type":"error","error":{"type":"conflict_error","message":"x"}}', False),
    "anthropic 400": (ANTHROPIC_API, _anthropic_error(400, "invalid_request_error", "bad input"),
        '400 {"type":"error","error":{"type":"invalid_request_error","message":"bad input"}}',
        False),
    "anthropic too long": (ANTHROPIC_API, _anthropic_error(
        400, "invalid_request_error", "prompt is too long: 250000 tokens > 200000 maximum"),
        '400 {"type":"error","error":{"type":"invalid_request_error","message":"prompt is too '
        'long: 250000 tokens > 200000 maximum"}}', False),
    "anthropic event overloaded": (ANTHROPIC_API, _anthropic_event("overloaded_error",
                                                                   "Overloaded"),
        '{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}', True),
    "anthropic event closed": (ANTHROPIC_API, _anthropic_event("api_error", "Connection closed."),
        '{"type": "error", "error": {"type": "api_error", "message": "Connection closed."}}', True),
    "anthropic event api_error": (ANTHROPIC_API, _anthropic_event("api_error", "boom"),
        '{"type": "error", "error": {"type": "api_error", "message": "boom"}}', False),
    "anthropic cut": (ANTHROPIC_API, fake_anthropic.Reply(ANTHROPIC_HALF, cut=True),
        "terminated: other side closed (UND_ERR_SOCKET)", True),
    "anthropic ended early": (ANTHROPIC_API, fake_anthropic.Reply(ANTHROPIC_HALF),
        "Anthropic stream ended before message_stop", True),
    "anthropic not json": (ANTHROPIC_API, fake_anthropic.Reply(
        ANTHROPIC_HALF, raw=b"event: content_block_start\ndata: {nope\n\n"),
        "Could not parse Anthropic SSE event content_block_start: Expected property name or '}' "
        "in JSON at position 1 (line 1 column 2); data={nope; raw=event: content_block_start"
        "\\ndata: {nope", False),
    "chat 429": (CHAT_API, _openai_error(429, "rate_limit_exceeded", "slow down"),
        '429: {"message":"slow down","type":"rate_limit_exceeded","code":null}', True),
    "chat 429 quota": (CHAT_API, _openai_error(429, "insufficient_quota", "You exceeded your "
                                                "current quota"),
        '429: {"message":"You exceeded your current quota","type":"insufficient_quota",'
        '"code":null}', False),
    "chat 500": (CHAT_API, _openai_error(500, "server_error", "boom"),
        '500: {"message":"boom","type":"server_error","code":null}', True),
    "chat 501": (CHAT_API, _openai_error(501, "error", "boom"),
        '501: {"message":"boom","type":"error","code":null}', False),
    "chat 400": (CHAT_API, _openai_error(400, "invalid_request_error", "bad input"),
        '400: {"message":"bad input","type":"invalid_request_error","code":null}', False),
    "chat stream server_error": (CHAT_API, Reply(HALF_CHUNK, error={
        "message": "boom", "type": "server_error"}), "boom", False),
    "chat stream rate_limit": (CHAT_API, Reply(HALF_CHUNK, error={
        "message": "slow", "type": "rate_limit"}), "slow", False),
    "chat stream code 502": (CHAT_API, Reply(HALF_CHUNK, error={"message": "boom", "code": 502}),
        "boom", False),
    "chat stream says so": (CHAT_API, Reply(HALF_CHUNK, error={
        "message": "Internal server error", "type": "error"}), "Internal server error", True),
    "chat stream no message": (CHAT_API, Reply(HALF_CHUNK, error={"type": "server_error"}),
        '{"type":"server_error"}', True),
    "chat ended early": (CHAT_API, Reply(HALF_CHUNK, done=False),
        "Stream ended without finish_reason", True),
    "chat finish network_error": (CHAT_API, Reply([*HALF_CHUNK, chunk(finish="network_error")]),
        "Provider finish_reason: network_error", True),
    "chat cut": (CHAT_API, Reply(HALF_CHUNK, cut=True),
        "terminated: other side closed (UND_ERR_SOCKET)", True),
    "responses 502": (RESPONSES_API, _openai_error(502, "bad_gateway", "boom"),
        'lab API error (502): {"message":"boom","type":"bad_gateway","code":null}', True),
    "responses 400": (RESPONSES_API, _openai_error(400, "invalid_request_error", "bad"),
        'lab API error (400): {"message":"bad","type":"invalid_request_error","code":null}', False),
    "responses event server_error": (RESPONSES_API, Reply(HALF_ITEM, error={
        "code": "server_error", "message": "boom", "param": None}), "boom", False),
    "responses event says so": (RESPONSES_API, Reply(HALF_ITEM, error={
        "code": "server_error", "message": "Please retry your request", "param": None}),
        "Please retry your request", True),
    "responses event no message": (RESPONSES_API, Reply(HALF_ITEM, error={
        "code": "server_error", "message": "", "param": None}),
        '{"type":"error","code":"server_error","message":"","param":null}', True),
    "responses event too long": (RESPONSES_API, Reply(HALF_ITEM, error={
        "code": "context_length_exceeded", "message": "too long", "param": None}),
        "too long", False),
    "responses failed server_error": (RESPONSES_API, _responses_failed("server_error", "boom"),
        "server_error: boom", True),
    "responses failed invalid_prompt": (RESPONSES_API, _responses_failed("invalid_prompt", "bad"),
        "invalid_prompt: bad", False),
    "responses ended early": (RESPONSES_API, Reply(HALF_ITEM),
        "OpenAI Responses stream ended before a terminal response event", True),
    "responses cut": (RESPONSES_API, Reply(HALF_ITEM, cut=True),
        "terminated: other side closed (UND_ERR_SOCKET)", True),
    # An event that is not JSON: pi's words for it are fixed on the OpenAI APIs, so neither
    # Python's "Unterminated string" nor a "timeout" in the event made a retry pi makes not.
    "chat event not json": (CHAT_API, Reply(HALF_CHUNK, raw=b'data: {"error": "timeout'
                                                            b'"\n\n'), MALFORMED_EVENT, False),
    "chat event unterminated": (CHAT_API, Reply(HALF_CHUNK, raw=b'data: {"content": "x\n\n'),
        MALFORMED_EVENT, False),
    "responses event not json": (RESPONSES_API, Reply(HALF_ITEM, raw=(
        b'event: response.output_text.delta\ndata: {"delta": "overloaded 502"\n\n')),
        MALFORMED_EVENT, False),
    # pi's Anthropic words hold the event (V8's reason, the data, the lines) as pi-lsp's do.
    "anthropic event not json": (ANTHROPIC_API, fake_anthropic.Reply(ANTHROPIC_HALF, raw=(
        b"event: content_block_delta\ndata: {not json}\n\n")),
        "Could not parse Anthropic SSE event content_block_delta: Expected property name or '}' "
        "in JSON at position 1 (line 1 column 2); data={not json}; raw=event: "
        "content_block_delta\\ndata: {not json}", False),
    "anthropic event unterminated": (ANTHROPIC_API, fake_anthropic.Reply(ANTHROPIC_HALF, raw=(
        b'event: content_block_delta\ndata: {"x": "y\n\n')),
        "Could not parse Anthropic SSE event content_block_delta: Unterminated string in JSON at "
        'position 8 (line 1 column 9); data={"x": "y; raw=event: content_block_delta\\ndata: '
        '{"x": "y', True),
}


@pytest.mark.parametrize("case", list(RETRY_TABLE))
async def test_a_failure_is_retried_when_pi_16_retries_it(fake, oai, case: str) -> None:
    """An OpenAI error mid-stream was worded with its code ("server_error: boom"), which pi's
    patterns retry; pi 1.6 words it with the message alone ("boom") and does not."""
    api, scripted, pi_words, retried = RETRY_TABLE[case]
    words = (await streamed(fake, oai, api, scripted)).error_message
    provider = "anthropic" if api == ANTHROPIC_API else "lab"
    assert (is_retryable(pi_words), is_retryable(words)) == (retried, retried), words
    assert is_context_overflow(words, provider) == is_context_overflow(pi_words)


async def streamed(fake: FakeAnthropic, oai: FakeOpenAI, api: str, scripted: Any
                   ) -> AssistantMessage:
    """The reply one provider call makes of `scripted`: Anthropic's own on the Anthropic fake,
    the OpenAI APIs as a local model's on the OpenAI fake."""
    if api == ANTHROPIC_API:
        model, provider = ModelRegistry().get("anthropic", "claude-sonnet-4-5"), \
            AnthropicProvider("k", base_url=fake.url)
        assert model is not None
        fake.script(scripted)
    else:
        model, provider = local(api, base_url=f"{oai.url}/v1"), \
            OpenAIProvider("lab", "k", f"{oai.url}/v1")
        oai.script(scripted)
    built = ReplyBuilder(api, model)
    _ = [e async for e in provider.stream(request(model, tools=False), built)]
    await close_clients(provider)
    return built.message()


def open_ended(event: dict[str, Any], named: bool = True) -> bytes:
    """`event` as a body's last SSE frame, without the blank line that ends it."""
    return (named_sse(event) if named else sse(event)).removesuffix(b"\n\n")


ANTHROPIC_DELTA, ANTHROPIC_STOP = fake_anthropic.message_end()
HALF_RESPONSE = [*message_item(0, "half"), completed()]
# Each API's reply whose body ends right after its last event's data line.
OPEN_ENDED: dict[str, tuple[str, Any]] = {
    "anthropic": (ANTHROPIC_API, fake_anthropic.Reply([*ANTHROPIC_HALF, ANTHROPIC_DELTA],
                                                      raw=open_ended(ANTHROPIC_STOP))),
    "chat": (CHAT_API, Reply(HALF_CHUNK, raw=open_ended(chunk(finish="stop"), named=False))),
    "responses": (RESPONSES_API, Reply(HALF_RESPONSE[:-1], raw=open_ended(HALF_RESPONSE[-1]))),
    # Ended with its blank line, each event with an id: no empty event is made at the end.
    "responses with ids": (RESPONSES_API, Reply(raw=b"".join(
        b"id: %d\n%s" % (n, named_sse(event)) for n, event in enumerate(HALF_RESPONSE)))),
}


@pytest.mark.parametrize("case", list(OPEN_ENDED))
async def test_a_last_event_without_the_blank_line_after_it_is_read(fake, oai, case: str
                                                                      ) -> None:
    """It was dropped: the reply failed ("stream ended before message_stop", "without
    finish_reason", "before a terminal response event") and was retried to the limit, where
    pi 1.6 reads the pending event when the stream ends."""
    api, scripted = OPEN_ENDED[case]
    message = await streamed(fake, oai, api, scripted)
    assert (message.stop_reason, message.error_message) == ("stop", None)
    [text] = message.content
    assert isinstance(text, TextContent) and text.text == "half"


def test_cost_is_pi_16s_to_the_last_bit() -> None:
    """pi-lsp priced tokens * rate / 1e6 where pi prices rate / 1e6 * tokens: a fifth of the
    costs (and their totals) differed from pi's in the last bits."""
    model = ModelInfo("anthropic", "sonnet", 200_000, 64_000, Price(3, 15, 0.3, 3.75))
    reply = ReplyBuilder(model.api, model)
    reply.usage.input, reply.usage.output = 1000, 1234
    reply.usage.cache_read, reply.usage.cache_write = 200, 1000
    cost = reply.message().usage.cost  # as pi-ai 1.6's calculateCost makes them:
    assert (cost.input, cost.output, cost.cache_read, cost.cache_write, cost.total) == (
        0.003, 0.018510000000000002, 0.000059999999999999995, 0.00375, 0.025320000000000002)


def test_tool_arguments_from_many_small_deltas_are_assembled_whole() -> None:
    """The arguments are kept in pieces and joined once (each delta was added to one string,
    copied whole every time; benchmarks/bench_reply.py measures it): the pieces make them."""
    reply = ReplyBuilder(CHAT_API, local())
    index = reply.start_tool_call("call_1", "write")
    reply.add_tool_json(index, '{"path": "big.txt", "content": "')
    for number in range(20_000):
        reply.add_tool_json(index, f"{number:016d}")
    reply.add_tool_json(index, '"}')
    reply.end_block(index)
    [call] = reply.message().content
    assert isinstance(call, ToolCall)
    assert call.arguments["content"] == "".join(f"{number:016d}" for number in range(20_000))


def test_text_from_many_small_deltas_is_assembled_whole() -> None:
    """Text and thinking are kept in pieces and joined when asked for (each delta was added to
    the block's string, copied whole every time): an emoji split between deltas, around an
    empty one or a snapshot, is still one character, and a lone half stays as it came."""
    reply = ReplyBuilder(CHAT_API, local())
    thinking, text = reply.start_thinking(), reply.start_text()
    for number in range(20_000):
        reply.add_thinking(thinking, f"{number:016d}")
        reply.add_text(text, f"{number:016d}")
    for delta in ("a\ud83d", "", "\ude48", " b\ud83d"):
        reply.add_text(text, delta)
    reply.add_thinking(thinking, "\ud800")
    reply.snapshot()  # joins what came so far; the next delta completes the emoji after it
    reply.add_text(text, "\ude48\ude48")
    reply.add_thinking(thinking, "\udc00\ud83d")
    numbers = "".join(f"{number:016d}" for number in range(20_000))
    assert reply.message().content == [
        ThinkingContent(thinking=numbers + "\U00010000\ud83d"),
        TextContent(text=numbers + "a\U0001f648 b\U0001f648\ude48")]


def test_a_default_provider_set_without_its_model_is_left_out_as_pi_leaves_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pi 1.6 takes the saved defaultProvider only with a defaultModel; pi-lsp paired it with
    its built-in model and sent `claude-opus-5-5` to OpenAI."""
    agent = tmp_path / "agent"
    agent.mkdir()
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    (agent / "settings.json").write_text(json.dumps({"defaultProvider": "openai"}))
    settings = load_settings(tmp_path, project=False)
    assert (settings.default_provider, settings.default_model) == (
        Settings().default_provider, Settings().default_model)
    (agent / "settings.json").write_text(
        json.dumps({"defaultProvider": "openai", "defaultModel": "gpt-4o"}))
    settings = load_settings(tmp_path, project=False)
    assert (settings.default_provider, settings.default_model) == ("openai", "gpt-4o")


# -- keys and header values as pi 1.6 (Node's fetch) sends them ------------------------------


async def sent_with(fake: FakeAnthropic, oai: FakeOpenAI, api: str, key: str,
                    headers: dict[str, str] | None = None) -> tuple[AssistantMessage, Any]:
    """The reply one call with `key` and provider `headers` makes, and the request received."""
    if api == ANTHROPIC_API:
        model, provider, server = ModelRegistry().get("anthropic", "claude-sonnet-4-5"), \
            AnthropicProvider(key, base_url=fake.url, headers=headers), fake
        fake.script(fake_anthropic.text_reply("hello"))
    else:
        model, provider, server = local(api, base_url=f"{oai.url}/v1"), \
            OpenAIProvider("lab", key, f"{oai.url}/v1", headers), oai
        oai.script(chat_reply("hello") if api == CHAT_API else responses_reply("hello"))
    assert model is not None
    built = ReplyBuilder(api, model)
    _ = [e async for e in provider.stream(request(model, tools=False), built)]
    await close_clients(provider)
    return built.message(), (server.requests[-1] if server.requests else None)


EVERY_API = [ANTHROPIC_API, CHAT_API, RESPONSES_API]


@pytest.mark.parametrize("api", EVERY_API)
@pytest.mark.parametrize("key", ["sk-test\n", "sk-test\r\n", " sk-test\t"])
async def test_a_key_saved_with_a_newline_is_sent_trimmed_as_fetch_sends_it(
        fake, oai, api: str, key: str) -> None:
    """Every request failed "cannot reach … Illegal header value b'Bearer sk-test\\n'" (the key
    in the error, on stderr and in the session), retried 3 times; pi 1.6's fetch trims it."""
    message, received = await sent_with(fake, oai, api, key, {"X-Title": "bot\r\n"})
    assert (message.stop_reason, message.error_message) == ("stop", None)
    sent = (received.headers["x-api-key"] if api == ANTHROPIC_API  # as pi 1.6 sends it
            else received.headers["authorization"].removeprefix("Bearer "))
    assert sent == "sk-test"
    assert received.headers["x-title"] == "bot"


@pytest.mark.parametrize("api", EVERY_API)
async def test_a_key_that_cannot_be_sent_fails_without_showing_it(fake, oai, api: str) -> None:
    message, received = await sent_with(fake, oai, api, "sk-se\ncret")
    assert received is None  # nothing sent, and not a failure pi's retry takes as passing
    assert message.stop_reason == "error" and "cret" not in (message.error_message or "")
    assert "the API key has the character U+000A" in (message.error_message or "")
    assert not is_retryable(message.error_message or "")


@pytest.mark.parametrize("api", EVERY_API)
async def test_a_latin_1_header_value_is_sent_as_node_sends_it(fake, oai, api: str) -> None:
    """`"X-Title": "Café Bot"` failed before any request ("sent a reply pi-lsp cannot read
    (UnicodeEncodeError …)") on the OpenAI APIs, and went as UTF-8 to Anthropic; Node's fetch
    sends each character up to U+00FF as one byte."""
    message, received = await sent_with(fake, oai, api, "k", {"X-Title": "Café Bot"})
    assert (message.stop_reason, message.error_message) == ("stop", None)
    assert received.headers["x-title"] == "Café Bot"  # read as Latin-1 by the fake


@pytest.mark.parametrize("api", EVERY_API)
async def test_a_header_value_above_latin_1_is_a_clear_error(fake, oai, api: str) -> None:
    message, received = await sent_with(fake, oai, api, "k", {"X-Title": "Bot \u2713"})
    label = "Anthropic" if api == ANTHROPIC_API else "lab"
    assert received is None and message.error_message == (
        f"{label}: header X-Title has the character U+2713: only characters up to U+00FF can "
        f"be sent in an HTTP header")


@pytest.mark.parametrize("api", EVERY_API)
async def test_a_key_that_is_not_ascii_is_a_clear_error(fake, oai, api: str) -> None:
    """The SDKs write the key into their own header as text: the openai SDK's failed "sent a
    reply pi-lsp cannot read (UnicodeEncodeError …)", Anthropic's went as UTF-8."""
    message, received = await sent_with(fake, oai, api, "sk-café")
    label = "Anthropic" if api == ANTHROPIC_API else "lab"
    assert received is None
    assert message.error_message == f"{label}: the API key has a character that is not ASCII"


def test_a_transport_error_never_shows_a_header_value() -> None:
    """The HTTP client's refusal quotes the value, the key with it."""
    error = openai.APIConnectionError(request=httpx2.Request("POST", "http://h/v1"))
    error.__cause__ = h11.LocalProtocolError("Illegal header value b'Bearer sk-secret\\x01'")
    text = transport_failure(error, "lab", "http://h/v1", 1, False)
    assert text == "cannot reach lab at http://h/v1 (connection error: Illegal header value " \
        "(not shown))"


# -- a server's id of another type is written as pi 1.6 writes it, and read back -------------


def anthropic_call_with(start: dict[str, Any], redacted: object) -> fake_anthropic.Reply:
    """A reply (this `message_start`) with a redacted thinking block (`redacted` its data), a
    tool call, and a tool_use stop."""
    return fake_anthropic.Reply([
        start, {"type": "content_block_start", "index": 0,
                "content_block": {"type": "redacted_thinking", "data": redacted}},
        {"type": "content_block_stop", "index": 0},
        *fake_anthropic.tool_block(1, "toolu_1", "bash", {"command": "true"}),
        *fake_anthropic.message_end("tool_use")])


async def test_a_numeric_anthropic_id_keeps_the_reply_and_its_call_in_context(
        tmp_path: Path, fake: FakeAnthropic) -> None:
    """`"id":123` was written into a line pi-lsp could not read back: the reply and its tool
    call dropped out of the next request (pi 1.6 keeps them), and `check` found nothing."""
    start = fake_anthropic.message_start()
    start["message"]["id"] = 123
    fake.script(anthropic_call_with(start, 123), fake_anthropic.text_reply("done"))
    path = tmp_path / "s.jsonl"
    provider = AnthropicProvider("k", base_url=fake.url)
    harness = Harness(SessionTree.create(str(path), str(tmp_path)), tmp_path,
                      lambda _n: provider, retry=NO_RETRY)
    try:
        await harness.prompt("hi")
    finally:
        await provider.client.close()
    [reply] = [e["message"] for e in map(json.loads, path.read_text().splitlines()[1:])
               if e.get("message", {}).get("role") == "assistant"][:1]
    assert reply["responseId"] == 123  # as pi 1.6 writes it
    # pi writes the redacted block's data 123 too; pi-lsp keeps no data nothing could send back.
    assert reply["content"][0] == {"type": "thinking", "thinking": "[Reasoning redacted]",
                                   "redacted": True}
    [_, resent] = fake.message_requests()
    assert [b["type"] for b in resent["messages"][1]["content"]] == ["tool_use"]
    assert check_session(SessionTree.open(str(path))) == []


async def test_numeric_responses_ids_keep_the_reply_in_context(rig, oai) -> None:
    one = rig(api=RESPONSES_API)
    created = {"type": "response.created", "response": {"id": 123, "object": "response",
                                                          "status": "in_progress", "output": []}}
    done = completed()
    done["response"]["id"] = 456
    oai.script(Reply(raw=named_sse(created, *message_item(0, "hello"), done)),
               responses_reply("again"))
    await one.harness.prompt("hi")
    assert one.last()["responseId"] == 456
    await one.harness.prompt("more")
    sent = oai.responses_requests()[-1]["input"]
    assert any(item.get("role") == "assistant" for item in sent), sent
    assert check_session(SessionTree.open(one.path)) == []


def test_a_pi_written_signature_of_another_type_reads_without_it() -> None:
    """pi 1.6 writes a redacted block's data as the server sent it (here 123)."""
    line = json.dumps({"role": "assistant", "api": ANTHROPIC_API, "provider": "anthropic",
                       "model": "m", "usage": {}, "stopReason": "stop", "timestamp": 1,
                       "responseId": {"n": 1}, "content": [
                           {"type": "thinking", "thinking": "x", "thinkingSignature": 123,
                            "redacted": True}, {"type": "text", "text": "t"}]})
    message = entries.decode_message(line.encode())
    assert isinstance(message, AssistantMessage) and message.response_id == {"n": 1}
    assert message.content == [ThinkingContent(thinking="x", redacted=True),
                               TextContent(text="t")]


def test_check_reports_a_message_pi_lsp_cannot_read(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    tree = SessionTree.create(str(path), str(tmp_path))
    tree.append_message(UserMessage(content="q", timestamp=1))
    unreadable = {"type": "message", "id": "abcd1234", "parentId": tree.leaf_id,
                  "timestamp": "2026-01-01T00:00:00.000Z",
                  "message": {"role": "assistant", "content": [{"type": "toolCall", "id": 5,
                                                                "name": "bash"}]}}
    with path.open("a") as file:
        file.write(json.dumps(unreadable) + "\n")
    [problem] = check_session(SessionTree.open(str(path)))
    assert (problem.kind, problem.entry_id, problem.line) == ("unreadable-message", "abcd1234", 3)


def test_a_long_cache_retention_goes_only_where_the_host_keeps_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """PI_CACHE_RETENTION=long asks a local server for a 24h cache under the session's key, as
    pi 1.6 asks it, and Together, which pi knows keeps none, for neither."""
    monkeypatch.setenv("PI_CACHE_RETENTION", "long")
    lab = openai_chat.request_params(request(local()))
    together = openai_chat.request_params(request(local(
        provider="together", base_url="https://api.together.xyz/v1")))
    assert (lab["prompt_cache_key"], lab["prompt_cache_retention"]) == ("0193-session", "24h")
    assert "prompt_cache_key" not in together and "prompt_cache_retention" not in together


def test_a_huge_mid_stream_error_text_is_cut_as_an_error_body_is() -> None:
    """OpenRouter's upstream text (metadata.raw) and a Responses `error` event's message were
    written whole: a 1 MB one made a reply line of 1 MB. They are cut as error bodies are."""
    import httpx2
    import openai

    from pi_lsp.providers.failures import MAX_BODY_CHARS
    from pi_lsp.providers.openai_api import chat_error_text
    from pi_lsp.providers.openai_responses import error_event_text

    huge = "x" * 1_000_000
    error = openai.APIError("Provider returned error", httpx2.Request("POST", "http://h/v1"),
                            body={"message": "Provider returned error",
                                  "metadata": {"raw": huge}})
    text = chat_error_text("openrouter", error)
    assert text is not None and len(text) < MAX_BODY_CHARS + 200, len(text or "")
    assert text.endswith(f"[truncated {1_000_000 - MAX_BODY_CHARS} chars]")

    class Event:
        message = huge

    assert len(error_event_text(Event())) < MAX_BODY_CHARS + 100


# Integers at the edge of a double's exact range, and JSON.parse's reading of them as
# JSON.stringify writes it (pi 1.6's Node: `JSON.stringify(JSON.parse(text))`).
EDGE_INTEGERS = "[9007199254740991,9007199254740992,9007199254740993,-9007199254740993]"
EDGE_INTEGERS_READ = "[9007199254740991,9007199254740992,9007199254740992,-9007199254740992]"


def test_an_integer_just_past_2_53_is_read_as_the_double_json_parse_makes() -> None:
    """2**53 + 1 was kept exact (it rounds to 2**53, which the bound let through), so a reply
    held a number pi 1.6's SDK never has: pi 1.6 reads it as 9007199254740992, pi-lsp wrote
    9007199254740993. Found in the review of 10b8b1d."""
    assert msgspec.json.encode(event_json(EDGE_INTEGERS)).decode() == EDGE_INTEGERS_READ
    if pi16_node() is not None:
        assert pi16_eval(f"process.stdout.write(JSON.stringify(JSON.parse({EDGE_INTEGERS!r})))"
                         ) == EDGE_INTEGERS_READ


# JSON texts and errors in them, each read by the deep reader as json.loads reads it.
DEEP_JSON = 10_000  # levels, past json.loads' recursion
SHALLOW_JSON = ['{"a": [1, 2.5, -3e2, "x\\u00e9\\ud800", true, false, null, {}, [], {"b": []}],'
                ' "a": 0, "c": 9007199254740993}', "[]", ' [ 1 , [ ] , { "k" : "v" } ] ', '"s"',
                "12", "[1,]", "[1 2]", '{"a"}', '{"a":}', "[", "01", "[NaN]", '"\t"', '{"a":1}x',
                "[-]", "1.", "[1e]", "{,}", "[,1]", '["\\x"]', "]"]


@pytest.mark.parametrize("text", SHALLOW_JSON)
def test_json_nested_past_pythons_parser_is_read_as_json_parse_reads_it(text: str) -> None:
    """An event nested past about 1,000 levels failed the reply (json.loads' RecursionError,
    "a reply pi-lsp cannot read"), where JSON.parse reads any depth: it is read without
    recursion, as json.loads reads what it can (test_streams_pi16 has the streams)."""
    deep = "[" * DEEP_JSON + text + "]" * DEEP_JSON
    try:
        expected: Any = event_json(text)
    except ValueError:
        with pytest.raises(ValueError):
            event_json(deep)
        return
    read = event_json(deep)
    for _ in range(DEEP_JSON):
        [read] = read
    assert msgspec.json.encode(read) == msgspec.json.encode(expected)


# -- a long reply is read without holding the event loop (the editor's requests) -------------


def parses_recorded(monkeypatch, *names: str) -> list[tuple[str, int, bool]]:
    """Each call of base's `names` (argument parsers): its name, the text's length, and
    whether it ran on the event loop's thread."""
    seen: list[tuple[str, int, bool]] = []

    def recorder(name: str, parse: Callable[[str], Any]) -> Callable[[str], Any]:
        def recorded(text: str) -> Any:
            seen.append((name, len(text), threading.current_thread() is threading.main_thread()))
            return parse(text)
        return recorded

    for name in names:
        monkeypatch.setattr(base, name, recorder(name, getattr(base, name)))
    return seen


async def test_long_tool_arguments_are_parsed_in_a_worker_thread(rig, oai, monkeypatch) -> None:
    """A finished call's arguments of 10 MB that JSON refuses went through repaired_json and
    V8's wording on the event loop, holding every editor request 2.5-4.3 s; past
    INLINE_ARGUMENT_CHARS they are parsed in a worker thread, to the same result."""
    one = rig()
    refused = '{"command": "grep \\d' + " x" * 10_000 + '" oops}'
    mended = '{"pattern": "\\d+' + " y" * 10_000 + '"}'
    texts = [refused, mended, '{"short": 1}']
    parse = base.parse_arguments
    seen = parses_recorded(monkeypatch, "parse_arguments")
    oai.script(Reply([*(chunk({"tool_calls": [{"index": i, "id": f"c{i}", "type": "function",
                                               "function": {"name": "nope", "arguments": text}}]})
                        for i, text in enumerate(texts)), chunk(finish="tool_calls")]),
               chat_reply("done"))
    await one.harness.prompt("hi")
    calls = [block for message in one.messages() for block in message["content"]
             if block["type"] == "toolCall"]
    assert [(call["arguments"], call.get("argumentsError")) for call in calls] == [
        parse(text) for text in texts]
    assert calls[1]["arguments"]["pattern"].startswith("\\d+ y")  # mended, as pi 1.6 mends it
    assert sorted(seen[:3]) == [("parse_arguments", 12, True),
                                ("parse_arguments", len(mended), False),
                                ("parse_arguments", len(refused), False)]


async def test_a_long_unfinished_call_is_read_in_a_worker_thread(rig, oai, monkeypatch) -> None:
    """A call the stream broke inside keeps what its arguments hold so far, read as pi 1.6's
    streaming parser reads them: past INLINE_ARGUMENT_CHARS, in a worker thread."""
    one = rig()
    text = '{"items": [' + "1, " * 10_000
    seen = parses_recorded(monkeypatch, "partial_arguments")
    oai.script(Reply([chunk({"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                                             "function": {"name": "nope", "arguments": text}}]})],
                     cut=True))
    await one.harness.prompt("hi")
    assert seen == [("partial_arguments", len(text), False)]
    assert one.last()["content"][0]["arguments"] == {"items": [1] * 10_000}



@pytest.mark.parametrize("cancelled", [False, True], ids=["stop", "shutdown past its grace"])
async def test_a_stop_while_long_arguments_are_read_aborts_the_reply(
        rig, oai, monkeypatch, cancelled: bool) -> None:
    """A stop while a finished reply's long arguments were read in the worker thread left the
    reply written as toolUse, its call answered "Operation aborted" and an aborted turn after
    it; pi 1.6 sees the stop at the stream's end and aborts the reply, its calls unanswered."""
    one = rig()
    entered, release = threading.Event(), threading.Event()
    parse = base.parse_arguments

    def gated(text: str) -> Any:
        entered.set()
        release.wait(CEILING_S)
        return parse(text)

    monkeypatch.setattr(base, "parse_arguments", gated)
    text = '{"path": "' + "x" * base.INLINE_ARGUMENT_CHARS + '"}'
    oai.script(Reply([chunk({"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                                             "function": {"name": "read", "arguments": text}}]}),
                      chunk(finish="tool_calls")]), chat_reply("done"))
    turn = asyncio.ensure_future(one.harness.prompt("hi"))
    assert await asyncio.to_thread(entered.wait, CEILING_S)
    assert one.harness.abort()
    if cancelled:  # as Tasks.finish cancels an aborted turn still running at the grace's end
        turn.cancel()
    release.set()
    await turn
    assert [(message["role"], message.get("stopReason")) for message in one.messages()] == [
        ("system", None), ("user", None), ("assistant", "aborted")]
    assert one.last()["content"][0]["arguments"] == {"path": "x" * base.INLINE_ARGUMENT_CHARS}


def events_read_recorded(monkeypatch) -> list[tuple[int, bool]]:
    """Each stream event's JSON read by the two SDKs' decoders: the data's length, and whether
    it was read on the event loop's thread."""
    seen: list[tuple[int, bool]] = []

    def recorder(read: Callable[[str], Any]) -> Callable[[str], Any]:
        def recorded(data: str) -> Any:
            seen.append((len(data), threading.current_thread() is threading.main_thread()))
            return read(data)
        return recorded

    monkeypatch.setattr(openai_api, "event_json", recorder(openai_api.event_json))
    monkeypatch.setattr(anthropic_provider, "mended_event_json",
                        recorder(anthropic_provider.mended_event_json))
    return seen


async def test_a_long_chat_event_is_read_in_a_worker_thread(oai, monkeypatch) -> None:
    """An event of 50 MB (one SSE line) was read as JSON on the event loop; one whose data
    passes LONG_EVENT_CHARS is read in a worker thread, and the reply is the same."""
    model = local(base_url=f"{oai.url}/v1")
    provider = OpenAIProvider("lab", "k", f"{oai.url}/v1")
    long_text = "y" * (LONG_EVENT_CHARS + 1)
    seen = events_read_recorded(monkeypatch)
    oai.script(Reply([chunk({"content": "short "}), chunk({"content": long_text}),
                      chunk(finish="stop")]))
    built = ReplyBuilder(CHAT_API, model)
    [_ async for _ in provider.stream(request(model), built)]
    assert built.message().content == [TextContent(text="short " + long_text)]
    assert [on_loop for length, on_loop in seen] == [length <= LONG_EVENT_CHARS
                                                     for length, _ in seen]
    assert [on_loop for _, on_loop in seen].count(False) == 1
    await close_clients(provider)


async def test_a_long_anthropic_event_is_mended_in_a_worker_thread(
        fake: FakeAnthropic, monkeypatch) -> None:
    """An Anthropic event JSON refuses (a raw tab in a string) is mended by repaired_json as
    pi 1.6 mends it: 10 MB of it held the event loop 2.2 s; past LONG_EVENT_CHARS it is read in
    a worker thread, and the reply is the same."""
    provider = AnthropicProvider("k", base_url=fake.url)
    model = local(api=ANTHROPIC_API, provider="anthropic", base_url=fake.url)
    long_text = "a\tb" * (LONG_EVENT_CHARS // 3 + 1)
    frames = b"".join(map(fake_anthropic.sse_frame, [
        fake_anthropic.message_start(), *fake_anthropic.text_block(0, "TEXT"),
        *fake_anthropic.message_end()]))
    seen = events_read_recorded(monkeypatch)
    fake.script(fake_anthropic.Reply(raw=frames.replace(b"TEXT", long_text.encode())))
    built = ReplyBuilder(ANTHROPIC_API, model)
    [_ async for _ in provider.stream(request(model), built)]
    assert built.message().content == [TextContent(text=long_text)]
    assert [(length > LONG_EVENT_CHARS, on_loop) for length, on_loop in seen].count(
        (True, False)) == 1
    assert all(on_loop for length, on_loop in seen if length <= LONG_EVENT_CHARS)
    await provider.client.close()


async def loop_turns_between_deltas(provider: Any, model: ModelInfo) -> list[int]:
    """How many times a task ticking on the event loop ran between each two deltas the
    provider's stream gave."""
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    at: list[int] = []
    async for _ in provider.stream(request(model), ReplyBuilder(model.api, model)):
        at.append(ticks)
    ticking.cancel()
    return [after - before for before, after in itertools.pairwise(at)]


async def test_the_loop_runs_between_two_chat_events_of_one_read(oai) -> None:
    """The SDK hands out the events of one network read without a pause: a server sending
    millions of tiny deltas held the event loop 0.25 to 0.45 s a read. The loop runs now
    between any two events."""
    model = local(base_url=f"{oai.url}/v1")
    provider = OpenAIProvider("lab", "k", f"{oai.url}/v1")
    oai.script(Reply(raw=sse(*[chunk({"content": "y"})] * 300, chunk(finish="stop"))
                     + b"data: [DONE]\n\n"))
    turns = await loop_turns_between_deltas(provider, model)
    assert len(turns) >= 299 and min(turns) >= 1
    await close_clients(provider)


async def test_the_loop_runs_between_two_anthropic_events_of_one_read(fake) -> None:
    provider = AnthropicProvider("k", base_url=fake.url)
    model = local(api=ANTHROPIC_API, provider="anthropic", base_url=fake.url)
    fake.script(fake_anthropic.Reply(raw=b"".join(map(fake_anthropic.sse_frame, [
        fake_anthropic.message_start(), *fake_anthropic.text_block(0, *["y"] * 300),
        *fake_anthropic.message_end()]))))
    turns = await loop_turns_between_deltas(provider, model)
    assert len(turns) >= 299 and min(turns) >= 1
    await provider.client.close()


class CopiedBytes(bytes):
    """A piece of a streamed body that counts the bytes added before it (`data += piece`
    copies them again), in `copied`; its lines are such pieces too."""

    copied: ClassVar[list[int]]

    def splitlines(self, keepends: bool = False) -> list[bytes]:  # type: ignore[override]
        return [type(self)(line) for line in super().splitlines(keepends)]

    def __radd__(self, other: bytes) -> bytes:
        self.copied.append(len(other))
        return bytes(other) + bytes(self)


async def test_a_long_anthropic_line_is_gathered_without_copying_it_again(fake) -> None:
    """The Anthropic SDK's decoder added each piece of an event to the bytes before it, copying
    them whole every time: a 40 MB line took the event loop 6.5 s. Nothing received is copied
    again now, and the event is the same."""
    class Piece(CopiedBytes):
        copied: ClassVar[list[int]] = []

    text = "y" * 300_000
    body = b"".join(map(fake_anthropic.sse_frame, [
        fake_anthropic.message_start(), *fake_anthropic.text_block(0, text),
        *fake_anthropic.message_end()]))

    async def pieces() -> AsyncIterator[bytes]:
        for at in range(0, len(body), 1000):
            yield Piece(body[at:at + 1000])

    decoder = anthropic_provider.AnthropicProvider("k", base_url=fake.url).client \
        ._make_sse_decoder()
    events = [json.loads(sse.data) async for sse in decoder.aiter_bytes(pieces())]
    assert [event["delta"].get("text") for event in events
            if event["type"] == "content_block_delta"] == [text]
    assert sum(Piece.copied) <= 4 * len(Piece.copied)  # a line's end at most, never the event


async def test_the_first_responses_call_is_made_ready_in_a_worker_thread(
        oai, monkeypatch) -> None:
    """The SDK imports its Responses code at the first call and builds the models of all the
    API's events at the first event it reads: 0.6 to 0.8 s on the event loop at a process's
    first Responses reply. The first call is made, and the models built, in a worker thread."""
    monkeypatch.setattr(openai_api, "_responses_ready", False)
    built: list[bool] = []

    def recorded(**fields: Any) -> Any:
        built.append(threading.current_thread() is threading.main_thread())
        return construct(**fields)

    construct = openai_api.construct_type
    monkeypatch.setattr(openai_api, "construct_type", recorded)
    model = local(api=RESPONSES_API, base_url=f"{oai.url}/v1")
    provider = OpenAIProvider("lab", "k", f"{oai.url}/v1")
    oai.script(responses_reply("hi"), responses_reply("again"))
    for _ in range(2):
        reply = ReplyBuilder(RESPONSES_API, model)
        [_ async for _ in provider.stream(request(model), reply)]
        assert reply.message().content[0].text in ("hi", "again")  # type: ignore[union-attr]
    assert built == [False]  # once, in a worker thread
    await close_clients(provider)


async def test_a_long_anthropic_event_is_decoded_in_a_worker_thread(
        fake: FakeAnthropic, monkeypatch) -> None:
    """A long event's lines were split and decoded on the event loop (one 40 MB line: 0.12 s
    more there); past LONG_EVENT_CHARS they are decoded in a worker thread, to the same reply."""
    decoded: list[tuple[int, bool]] = []

    def recorded(raw: bytes, bom: bool) -> str:
        decoded.append((len(raw), threading.current_thread() is threading.main_thread()))
        return line_text(raw, bom)

    line_text = anthropic_provider.line_text
    monkeypatch.setattr(anthropic_provider, "line_text", recorded)
    provider = AnthropicProvider("k", base_url=fake.url)
    model = local(api=ANTHROPIC_API, provider="anthropic", base_url=fake.url)
    text = "y" * LONG_EVENT_CHARS
    fake.script(fake_anthropic.Reply([fake_anthropic.message_start(),
                                      *fake_anthropic.text_block(0, "short ", text)]))
    built = ReplyBuilder(ANTHROPIC_API, model)
    [_ async for _ in provider.stream(request(model), built)]
    assert built.message().content == [TextContent(text="short " + text)]
    assert {on_loop for length, on_loop in decoded if length > LONG_EVENT_CHARS} == {False}
    assert (0, True) in decoded  # a short event's blank line, on the loop
    await provider.client.close()
