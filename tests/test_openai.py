"""OpenAI-compatible models end to end: Harness + run_loop + OpenAIProvider (Chat Completions and
Responses) against a real-HTTP fake through the official `openai` SDK; pi's models.json; and a
session that moves between Anthropic and OpenAI-compatible models.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from pi_lsp.agent.events import MessageUpdate, ToolExecutionStart
from pi_lsp.agent.harness import Harness
from pi_lsp.agent.retry import RetrySettings, is_context_overflow, is_retryable
from pi_lsp.context.convert import TOOL_IMAGE_NOTE, USER_IMAGE_NOTE
from pi_lsp.providers import openai_chat, openai_responses
from pi_lsp.providers.base import (
    MissingApiKeyError,
    ModelRequest,
    ReplyBuilder,
    TextDelta,
    ThinkingDelta,
)
from pi_lsp.providers.factory import (
    BaseUrlError,
    ByApi,
    UnknownProviderError,
    provider_factory,
)
from pi_lsp.providers.failures import MALFORMED_EVENT
from pi_lsp.providers.models_file import ModelsFileError, load_models
from pi_lsp.providers.openai_api import OpenAIProvider
from pi_lsp.providers.registry import (
    ANTHROPIC_API,
    CHAT_API,
    RESPONSES_API,
    ModelInfo,
    ModelRegistry,
    Price,
    ProviderConfig,
)
from pi_lsp.providers.retry import ProviderRetry
from pi_lsp.providers.thinking import thinking_levels
from pi_lsp.server.config import Config, read_config
from pi_lsp.server.hub import SessionHub
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
from pi_lsp.session.tree import SessionTree
from pi_lsp.settings import SettingsError, load_settings
from tests import fake_anthropic
from tests.conftest import declare, trust
from tests.fake_anthropic import FakeAnthropic
from tests.fake_openai import (
    MODEL,
    FakeOpenAI,
    Reply,
    call_item,
    chat_reply,
    chunk,
    completed,
    error_reply,
    message_item,
    reasoning_item,
    responses_reply,
    usage_chunk,
)
from tests.test_streams_pi16 import Stream, pi16_reply
from tests.test_system_messages import pi16_eval, pi16_node
from tests.waits import CEILING_S, run_cli, until

PRICE = Price(1, 4, 0.5, 0)  # dollars per million tokens
REGISTRY_GPT5 = ModelRegistry().get("openai", "gpt-5-mini")


def local(api: str, provider: str = "ollama", reasoning: bool = False) -> ModelInfo:
    return ModelInfo(provider, MODEL, 32_000, 8_192, PRICE, reasoning=reasoning, api=api)


async def close_clients(provider: Any) -> None:
    """Close the SDK clients a provider made: an OpenAI provider has one per API, a provider
    whose models are on both SDKs' APIs one provider per SDK."""
    if isinstance(provider, ByApi):
        for each in [*provider.by_sdk.values(), *provider.by_url.values()]:
            await close_clients(each)
        return
    clients = provider.clients.values() if isinstance(provider, OpenAIProvider) else \
        [provider.client]
    for client in clients:
        await client.close()


class Rig:
    """A harness on a fresh session whose default model is an OpenAI-compatible one."""

    def __init__(self, root: Path, registry: ModelRegistry, default: tuple[str, str],
                 retry: RetrySettings, keys: dict[str, str] | None = None) -> None:
        self.root = root
        sessions = root / ".pi" / "sessions"
        sessions.mkdir(parents=True, exist_ok=True)
        self.path = str(sessions / "session.jsonl")
        self.tree = SessionTree.create(self.path, str(root))
        make = provider_factory(registry, (keys or {}).get, retry=retry.provider)
        self.harness = Harness(self.tree, root, make, registry=registry, default_model=default,
                               retry=retry)
        self.declared = declare(self.harness)  # the tests here see only their turns' messages
        self.events: list[Any] = []
        self.harness.subscribe(self.events.append)

    def messages(self) -> list[dict[str, Any]]:
        lines = Path(self.path).read_text().splitlines()[1:]
        assert json.loads(lines[0])["id"] == self.declared
        return [e["message"] for e in map(json.loads, lines[1:]) if e["type"] == "message"]

    async def close(self) -> None:
        for provider in self.harness._provider_cache.values():
            await close_clients(provider)


@pytest.fixture
async def make_rig(tmp_path: Path, oai: FakeOpenAI) -> AsyncIterator[Callable[..., Rig]]:
    rigs: list[Rig] = []

    def make(api: str = CHAT_API, reasoning: bool = False, max_retries: int = 0,
             retry: RetrySettings | None = None) -> Rig:
        """`max_retries`: provider-level retries; agent-level ones only when `retry` says."""
        registry = ModelRegistry([local(api, reasoning=reasoning)], [
            ProviderConfig("ollama", api, f"{oai.url}/v1", "ollama")])
        retry = retry or RetrySettings(enabled=False,
                                       provider=ProviderRetry(max_retries=max_retries))
        rig = Rig(tmp_path, registry, ("ollama", MODEL), retry)
        rigs.append(rig)
        return rig

    yield make
    for rig in rigs:
        await rig.close()


def streamed(rig: Rig, kind: type) -> str:
    return "".join(e.delta.delta for e in rig.events
                   if isinstance(e, MessageUpdate) and isinstance(e.delta, kind))


# -- Chat Completions ------------------------------------------------------------------------


async def test_chat_text_streams_with_usage_cost_and_wire(make_rig, oai) -> None:
    rig = make_rig()
    oai.script(chat_reply("Hel", "lo ", "there.", usage=(1200, 300, 200)))
    await rig.harness.prompt("hi")
    assert streamed(rig, TextDelta) == "Hello there."
    [_, reply] = rig.messages()
    assert reply["content"] == [{"type": "text", "text": "Hello there."}]
    assert (reply["api"], reply["provider"], reply["model"]) == (CHAT_API, "ollama", MODEL)
    assert reply["stopReason"] == "stop"
    usage = reply["usage"]
    assert (usage["input"], usage["output"], usage["cacheRead"], usage["cacheWrite"]) == (
        1000, 300, 200, 0)  # prompt_tokens counts the cached ones too
    assert usage["totalTokens"] == 1500
    assert usage["cost"]["total"] == pytest.approx((1000 * 1 + 300 * 4 + 200 * 0.5) / 1e6)
    [wire] = oai.chat_requests()
    assert oai.requests[-1].headers["authorization"] == "Bearer ollama"
    assert wire["model"] == MODEL and wire["stream"] is True
    assert wire["stream_options"] == {"include_usage": True}
    assert wire["store"] is False and wire["max_completion_tokens"] == 8192
    assert "reasoning_effort" not in wire
    system, user = wire["messages"]
    assert system["role"] == "system" and str(rig.root) in system["content"]
    assert user == {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    assert [t["function"]["name"] for t in wire["tools"]] == ["read", "bash", "edit", "write"]
    # pi 1.6: no `strict` field unless the model's compat says the host takes it
    assert all(t["type"] == "function" and "strict" not in t["function"] for t in wire["tools"])
    assert check_session(SessionTree.open(rig.path)) == []


async def test_chat_tool_calls_round_trip(make_rig, oai) -> None:
    rig = make_rig()
    (rig.root / "a.txt").write_text("alpha\n")
    oai.script(chat_reply("Reading.", calls=[("call_r", "read", {"path": "a.txt"}),
                                             ("call_b", "bash", {"command": "echo hi"})]),
               chat_reply("Done."))
    await rig.harness.prompt("look")
    roles = [m["role"] for m in rig.messages()]
    assert roles == ["user", "assistant", "toolResult", "toolResult", "assistant"]
    call = rig.messages()[1]
    assert call["stopReason"] == "toolUse"
    assert call["content"] == [
        {"type": "text", "text": "Reading."},
        {"type": "toolCall", "id": "call_r", "name": "read", "arguments": {"path": "a.txt"}},
        {"type": "toolCall", "id": "call_b", "name": "bash", "arguments": {"command": "echo hi"}},
    ]
    second = oai.chat_requests()[1]["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool", "tool"]
    assert second[2] == {"role": "assistant", "content": "Reading.",
                         "tool_calls": [
        {"id": "call_r", "type": "function",
         "function": {"name": "read", "arguments": '{"path":"a.txt"}'}},
        {"id": "call_b", "type": "function",
         "function": {"name": "bash", "arguments": '{"command":"echo hi"}'}}]}
    assert second[3]["tool_call_id"] == "call_r" and "alpha" in second[3]["content"]
    assert second[4]["tool_call_id"] == "call_b" and second[4]["content"].strip() == "hi"


async def test_chat_tool_calls_without_an_index_are_told_apart_by_id(make_rig, oai) -> None:
    """A host that numbers no tool call: both were one, the second lost and the arguments
    `{..}{..}` read as none (found in review); pi 1.6 finds them by id."""
    rig = make_rig()
    (rig.root / "a.txt").write_text("alpha\n")
    calls = [("call_r", "read", '{"path": "a.txt"}'), ("call_b", "bash", '{"command": "echo hi"}')]
    oai.script(Reply([chunk({"role": "assistant", "content": ""}),
                      *(chunk({"tool_calls": [{"id": call_id, "type": "function", "function": {
                          "name": name, "arguments": arguments}}]})
                        for call_id, name, arguments in calls),
                      chunk(finish="tool_calls"), usage_chunk(10, 5)]),
               chat_reply("Done."))
    await rig.harness.prompt("look")
    assert rig.messages()[1]["content"] == [
        {"type": "toolCall", "id": "call_r", "name": "read", "arguments": {"path": "a.txt"}},
        {"type": "toolCall", "id": "call_b", "name": "bash", "arguments": {"command": "echo hi"}},
    ]
    assert [m["role"] for m in rig.messages()][2:] == ["toolResult", "toolResult", "assistant"]


async def test_chat_a_calls_id_and_name_may_come_after_its_first_chunk(make_rig, oai) -> None:
    """A call whose first chunk had only its index and arguments (or `function: null`) was
    recorded with name "" and a made-up id `call_0`, so it ran as no tool; pi 1.6 takes the id
    and name from the chunks that bring them."""
    rig = make_rig()
    (rig.root / "a.txt").write_text("alpha\n")
    oai.script(Reply([chunk({"tool_calls": [{"index": 0, "type": "function",
                                             "function": {"arguments": '{"path":'}}]}),
                      chunk({"tool_calls": [{"index": 0, "id": "call_late", "function": {
                          "name": "read", "arguments": '"a.txt"}'}}]}),
                      chunk({"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
                                             "function": None}]}),
                      chunk({"tool_calls": [{"index": 1, "function": {
                          "name": "read", "arguments": '{"path": "a.txt"}'}}]}),
                      chunk(finish="tool_calls")]),
               chat_reply("Done."))
    await rig.harness.prompt("look")
    assert rig.messages()[1]["content"] == [
        {"type": "toolCall", "id": "call_late", "name": "read", "arguments": {"path": "a.txt"}},
        {"type": "toolCall", "id": "call_b", "name": "read", "arguments": {"path": "a.txt"}}]
    results = oai.chat_requests()[1]["messages"][3:]
    assert [r["tool_call_id"] for r in results] == ["call_late", "call_b"]
    assert all("alpha" in r["content"] for r in results)


async def test_chat_calls_sent_without_ids_get_ids_of_their_own(make_rig, oai) -> None:
    """Where pi keeps "" (see _name_anonymous_calls): two calls with the id "" could not be told
    apart, and the next request would carry one result for the two."""
    rig = make_rig()
    (rig.root / "a.txt").write_text("alpha\n")
    calls = [chunk({"tool_calls": [{"index": i, "type": "function", "function": {
        "name": "read", "arguments": '{"path": "a.txt"}'}}]}) for i in (0, 1)]
    oai.script(Reply([*calls, chunk(finish="tool_calls")]), chat_reply("Done."))
    await rig.harness.prompt("look")
    assert [b["id"] for b in rig.messages()[1]["content"]] == ["call_0", "call_1"]
    assert [m.get("tool_call_id") for m in oai.chat_requests()[1]["messages"][3:]] == [
        "call_0", "call_1"]


async def test_chat_a_reply_has_one_thinking_and_one_text_block(make_rig, oai) -> None:
    """pi 1.6 adds every piece of reasoning to one thinking block and every piece of text to
    one text block, whatever comes between them; each switch made a new block here, so the
    same reply was recorded as six blocks in arrival order."""
    rig = make_rig()
    (rig.root / "a.txt").write_text("alpha\n")

    def call(index: int, call_id: str) -> dict[str, Any]:
        return chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                      "function": {"name": "read",
                                                   "arguments": '{"path": "a.txt"}'}}]})
    oai.script(Reply([chunk({"reasoning_content": "plan1 "}), chunk({"content": "before "}),
                      call(0, "call_a"), chunk({"reasoning_content": "plan2"}),
                      chunk({"content": "after"}), call(1, "call_b"),
                      chunk(finish="tool_calls")]),
               chat_reply("Done."))
    await rig.harness.prompt("look")
    assert rig.messages()[1]["content"] == [
        {"type": "thinking", "thinking": "plan1 plan2", "thinkingSignature": "reasoning_content"},
        {"type": "text", "text": "before after"},
        {"type": "toolCall", "id": "call_a", "name": "read", "arguments": {"path": "a.txt"}},
        {"type": "toolCall", "id": "call_b", "name": "read", "arguments": {"path": "a.txt"}}]


async def test_chat_openrouter_reasoning_details_are_kept_and_sent_back(make_rig, oai) -> None:
    """OpenRouter's `reasoning_details` (signed reasoning text, encrypted reasoning) were
    dropped, so the next request could not continue the model's reasoning; pi 1.6 keeps them,
    merged, as the thinking's signature (an encrypted-only reply gets a thinking block for them)
    and sends them back in place of the reasoning field."""
    rig = make_rig(reasoning=True)
    text = {"type": "reasoning.text", "format": "anthropic-claude-v1", "index": 0}
    encrypted = {"type": "reasoning.encrypted", "data": "ENC==", "id": "rs_1",
                 "format": "openai-responses-v1", "index": 0}
    oai.script(Reply([chunk({"reasoning": "st", "reasoning_details": [{**text, "text": "st"}]}),
                      chunk({"reasoning": "ep", "reasoning_details": [{**text, "text": "ep"}]}),
                      chunk({"reasoning_details": [{**text, "text": "", "signature": "SIG"}]}),
                      chunk({"content": "one"}), chunk(finish="stop")]),
               Reply([chunk({"reasoning_details": [encrypted, {"type": "unknown"}]}),
                      chunk({"content": "two"}), chunk(finish="stop")]),
               chat_reply("three"))
    for prompt in ("a", "b", "c"):
        await rig.harness.prompt(prompt)
    signed = [{**text, "text": "step", "signature": "SIG"}]
    one, two = rig.messages()[1]["content"], rig.messages()[3]["content"]
    assert one[0] == {"type": "thinking", "thinking": "step",
                      "thinkingSignature": json.dumps(signed, separators=(",", ":"))}
    assert two == [{"type": "thinking", "thinking": "",
                    "thinkingSignature": json.dumps([encrypted], separators=(",", ":"))},
                   {"type": "text", "text": "two"}]
    sent = oai.chat_requests()[2]["messages"]
    assert sent[2] == {"role": "assistant", "content": "one", "reasoning_details": signed}
    assert sent[4] == {"role": "assistant", "content": "two", "reasoning_details": [encrypted]}


def test_chat_sends_back_encrypted_reasoning_older_pi_kept_on_tool_calls() -> None:
    """Older pi versions kept OpenRouter's encrypted reasoning on the reply's tool calls; pi 1.6
    sends it back from there when no thinking block holds details (pi-lsp sent none)."""
    encrypted = {"type": "reasoning.encrypted", "data": "ENC==", "id": "rs_1"}
    model = local(CHAT_API, reasoning=True)
    reply = AssistantMessage(content=[ToolCall(id="c1", name="bash", arguments={},
                                               thought_signature=json.dumps(encrypted))],
                             api=CHAT_API, provider="ollama", model=MODEL, usage=Usage(),
                             stop_reason="toolUse", timestamp=2)
    params = openai_chat.request_params(ModelRequest(
        model, "", [UserMessage(content="q", timestamp=1), reply], [], "off"))
    assert params["messages"][1]["reasoning_details"] == [encrypted]


def sse(*payloads: Any) -> bytes:
    """Chat Completions events as a host sends them, whatever their JSON."""
    return "".join(f"data: {json.dumps(payload)}\n\n" for payload in payloads).encode()


async def test_chat_usage_sent_in_the_choice_is_counted(make_rig, oai) -> None:
    """Moonshot puts usage in the choice, which the SDK keeps as a plain dict: it was read as
    an object's attributes and counted nothing; pi 1.6 counts it."""
    rig = make_rig()
    last = chunk(finish="stop")
    last["choices"][0]["usage"] = {"prompt_tokens": 1234, "completion_tokens": 567,
                                   "prompt_tokens_details": {"cached_tokens": 200}}
    oai.script(Reply([chunk({"content": "a"}), last]))
    await rig.harness.prompt("hi")
    usage = rig.messages()[-1]["usage"]
    assert (usage["input"], usage["output"], usage["cacheRead"]) == (1034, 567, 200)


async def test_chat_fields_of_unexpected_types_do_not_fail_the_reply(make_rig, oai) -> None:
    """Each of these failed the whole reply ("a reply pi-lsp cannot read"): an event that is
    not an object (pi skips it), text as a list of parts, reasoning that is not text (pi
    ignores it), a call's arguments as an object, token counts as strings."""
    rig = make_rig()
    (rig.root / "a.txt").write_text("alpha\n")
    call = {"index": 0, "id": "call_r", "type": "function",
            "function": {"name": "read", "arguments": {"path": "a.txt"}}}
    usage = usage_chunk(0, 0)
    usage["usage"] = {"prompt_tokens": "12", "completion_tokens": "3"}
    oai.script(Reply(raw=sse(42, chunk({"reasoning": {"text": "x"}}),
                             chunk({"content": [{"type": "text", "text": "Rea"}]}),
                             chunk({"content": "ding."}), chunk({"tool_calls": [call]}),
                             chunk(finish="tool_calls"), usage)),
               chat_reply("Done."))
    await rig.harness.prompt("look")
    reply = rig.messages()[1]
    assert reply["stopReason"] == "toolUse" and "errorMessage" not in reply
    assert reply["content"] == [
        {"type": "text", "text": "Reading."},
        {"type": "toolCall", "id": "call_r", "name": "read", "arguments": {"path": "a.txt"}}]
    assert (reply["usage"]["input"], reply["usage"]["output"]) == (12, 3)
    assert "alpha" in rig.messages()[2]["content"][0]["text"]


async def test_chat_a_reply_from_another_model_records_it_as_pi_16_does(make_rig, oai) -> None:
    """pi 1.6 keeps the first chunk `model` that is not the id asked for as `responseModel`
    (a router's or alias's real model; openai-completions.js); pi-lsp dropped it."""
    rig = make_rig()
    aliased = [chunk({"content": "a"}), chunk({"content": "b"}), chunk(finish="stop")]
    aliased[0]["model"], aliased[1]["model"] = "", "qwen2.5-coder:7b-instruct-q4"
    aliased[2]["model"] = "other"
    oai.script(Reply(aliased), chat_reply("same"))
    await rig.harness.prompt("hi")
    await rig.harness.prompt("again")
    first, second = (m for m in rig.messages() if m["role"] == "assistant")
    assert first["responseModel"] == "qwen2.5-coder:7b-instruct-q4"
    assert first["model"] == MODEL
    assert "responseModel" not in second  # the model asked for answered


async def test_chat_reasoning_effort_and_reasoning_content_round_trip(make_rig, oai) -> None:
    rig = make_rig(reasoning=True)
    rig.harness.set_thinking_level("xhigh")
    oai.script(chat_reply("Answer.", reasoning="Think first."), chat_reply("Again."))
    await rig.harness.prompt("q")
    assert streamed(rig, ThinkingDelta) == "Think first."
    reply = rig.messages()[1]
    assert reply["content"] == [
        {"type": "thinking", "thinking": "Think first.", "thinkingSignature": "reasoning_content"},
        {"type": "text", "text": "Answer."}]
    await rig.harness.prompt("more")
    one, two = oai.chat_requests()
    assert one["reasoning_effort"] == "high"  # xhigh is clamped
    assert one["messages"][0]["role"] == "system"  # pi 1.6: developer is for OpenAI only
    assert two["messages"][2] == {"role": "assistant", "reasoning_content": "Think first.",
                                  "content": "Answer."}


async def test_chat_rate_limit_is_retried(make_rig, oai) -> None:
    rig = make_rig(max_retries=2)
    oai.script(error_reply(429, "rate_limit_exceeded", "slow down"), chat_reply("ok"))
    await rig.harness.prompt("hi")
    assert len(oai.chat_requests()) == 2
    assert rig.messages()[-1]["content"] == [{"type": "text", "text": "ok"}]


async def test_chat_server_error_is_an_error_entry(make_rig, oai) -> None:
    rig = make_rig(max_retries=0)
    oai.script(error_reply(500, "server_error", "the GPU caught fire"))
    produced = await rig.harness.prompt("hi")  # nothing escapes
    assert len(produced) == 2
    last = rig.messages()[-1]
    assert last["stopReason"] == "error" and last["content"] == []
    assert last["errorMessage"] == "ollama 500 server_error: the GPU caught fire"
    assert check_session(SessionTree.open(rig.path)) == []
    assert not rig.harness.busy


async def test_chat_error_mid_stream_keeps_the_partial_reply(make_rig, oai) -> None:
    rig = make_rig(max_retries=2)
    oai.script(Reply([chunk({"content": "partial "}), chunk({"content": "answer"})],
                     error={"message": "model crashed", "type": "server_error"}),
               chat_reply("never asked for"))
    await rig.harness.prompt("hi")
    assert len(oai.chat_requests()) == 1
    last = rig.messages()[-1]
    assert last["stopReason"] == "error"
    assert last["content"] == [{"type": "text", "text": "partial answer"}]
    assert last["errorMessage"] == "model crashed"  # as pi 1.6 writes it


async def test_chat_an_event_holding_nan_fails_the_reply_and_runs_nothing(make_rig, oai) -> None:
    """Arguments sent as an object holding a bare NaN were read by Python's json and the tool
    ran; pi's SDK (JSON.parse) finds the event malformed and the reply fails."""
    rig = make_rig()
    arguments = {"command": "echo ran > ran.txt", "timeout": float("nan")}
    oai.script(Reply([chunk({"role": "assistant", "content": "partial"}),
                      chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                             "function": {"name": "bash",
                                                          "arguments": arguments}}]}),
                      chunk(finish="tool_calls"), usage_chunk(10, 5)]), chat_reply("Done."))
    await rig.harness.prompt("go")
    reply = rig.messages()[-1]
    assert (reply["stopReason"], reply["content"]) == (
        "error", [{"type": "text", "text": "partial"}])
    assert reply["errorMessage"] == MALFORMED_EVENT
    assert not (rig.root / "ran.txt").exists() and len(oai.chat_requests()) == 1


async def test_chat_error_mid_stream_says_what_openrouters_upstream_said(make_rig, oai) -> None:
    """OpenRouter puts the upstream provider's own answer in the error's `metadata.raw`; pi 1.6
    adds it to the error message on a line of its own, pi-lsp left it out."""
    rig = make_rig()
    oai.script(Reply([chunk({"content": "a"})], error={
        "message": "Provider returned error", "code": 502,
        "metadata": {"raw": "upstream overloaded", "provider_name": "Lab"}}))
    await rig.harness.prompt("hi")
    assert rig.messages()[-1]["errorMessage"] == \
        "Provider returned error\nupstream overloaded"


OVERFLOW = ("This model's maximum context length is 8192 tokens. However, your messages "
            "resulted in 9000 tokens.")


@pytest.mark.parametrize(("api", "message", "overflow"), [
    (CHAT_API, "upstream went away", False), (CHAT_API, OVERFLOW, True),
    (RESPONSES_API, OVERFLOW, True)], ids=["chat", "chat-overflow", "responses-overflow"])
async def test_an_event_named_error_fails_the_reply_with_the_servers_message(
        make_rig, oai, api: str, message: str, overflow: bool) -> None:
    """An `error` event whose data has no `error` key was read as an ordinary chunk and dropped
    (the reply went on, or ended as cut short); pi's SDK throws on any event named error, so the
    reply fails with the server's message and an overflow is compacted, not retried."""
    rig = make_rig(api=api)
    failed = f"event: error\ndata: {json.dumps({'message': message})}\n\n".encode()
    if api == CHAT_API:
        oai.script(Reply([chunk({"content": "partial"})], raw=failed + sse(chunk(finish="stop"))))
    else:
        oai.script(Reply(message_item(0, "partial")[:3], raw=failed + sse(completed())))
    await rig.harness.prompt("hi")
    reply = rig.messages()[-1]
    assert reply["stopReason"] == "error" and message in reply["errorMessage"]
    assert reply["content"] == [{"type": "text", "text": "partial"}]
    assert is_context_overflow(reply["errorMessage"]) is overflow  # as pi 1.6 reads "message"
    assert not is_retryable(reply["errorMessage"])


async def test_a_chat_error_event_typed_error_fails_the_reply_too(make_rig, oai) -> None:
    """On Chat Completions an `error` event whose data had `type: "error"` was let by as the
    Responses API's own error event, then dropped: the cut-short reply was saved as `stop`.
    pi's SDK throws on any event named error there too."""
    rig = make_rig(api=CHAT_API)
    data = {"type": "error", "message": "upstream went away"}
    failed = f"event: error\ndata: {json.dumps(data)}\n\n".encode()
    oai.script(Reply([chunk({"content": "partial"})], raw=failed + sse(chunk(finish="stop"))))
    await rig.harness.prompt("hi")
    reply = rig.messages()[-1]
    assert (reply["stopReason"], reply["errorMessage"]) == (
        "error", "upstream went away")
    assert reply["content"] == [{"type": "text", "text": "partial"}]


@pytest.mark.parametrize(("finish", "told"), [
    ({"a": 1}, "[object Object]"), (True, "true"), (2**63, "9223372036854776000"),
    ([1, "x"], "1,x"), ([], ""), ({}, "[object Object]")])
async def test_a_finish_reason_of_another_type_is_told_as_pi_16_tells_it(
        make_rig, fake, oai, finish: Any, told: str) -> None:
    """A finish_reason that was no text was told in Python's words ("{'a': 1}", "True"), and
    an empty object or list was taken for none (the reply saved as a success); pi 1.6 writes
    it with String() and fails the reply on any it holds true (/tmp/fuzz-work/pi16_turns.mjs).
    Found by fuzzing the stream."""
    rig = make_rig()
    stream = Reply([chunk({"role": "assistant", "content": "Hi"}), chunk(finish=finish),
                    usage_chunk(1, 1)])
    oai.script(stream)
    await rig.harness.prompt("hi")
    reply = rig.messages()[-1]
    expected = ("error", f"Provider finish_reason: {told}")
    assert (reply["stopReason"], reply["errorMessage"]) == expected
    if (pi := pi16_reply(Stream("chat", stream), fake, oai)) is not None:
        assert (pi["stopReason"], pi["errorMessage"]) == expected


@pytest.mark.parametrize("calls", [7, True, {}, {"0": {"id": "call_1"}}])
async def test_tool_calls_that_are_no_list_fail_the_reply_as_pi_16_fails_it(
        make_rig, fake, oai, calls: Any) -> None:
    """A delta whose tool_calls was a number, true or an object was passed over and the
    reply's other calls were run; pi 1.6 iterates it and throws ("choice.delta.tool_calls is
    not iterable", /tmp/fuzz-work/pi16_turns.mjs). Found by fuzzing the stream."""
    rig = make_rig()
    (rig.root / "a.txt").write_text("alpha\n")
    reply = chat_reply("Reading.", calls=[("call_r", "read", {"path": "a.txt"})])
    reply.events.insert(-2, chunk({"tool_calls": calls}))
    oai.script(reply)
    await rig.harness.prompt("look")
    assert [m["role"] for m in rig.messages()] == ["user", "assistant"]  # nothing was run
    expected = ("error", "choice.delta.tool_calls is not iterable")
    assert (rig.messages()[-1]["stopReason"], rig.messages()[-1]["errorMessage"]) == expected
    if (pi := pi16_reply(Stream("chat", reply), fake, oai)) is not None:
        assert (pi["stopReason"], pi["errorMessage"]) == expected


async def test_tool_calls_that_are_no_objects_are_answered_as_calls_of_no_tool(make_rig, oai
                                                                               ) -> None:
    """Members of a delta's tool_calls that are no objects (of a text, each character) were
    passed over; pi 1.6 makes each a call of no id, name or arguments (test_streams_pi16), which
    the agent answers as a tool it does not know, and the turn goes on."""
    rig = make_rig()
    (rig.root / "a.txt").write_text("alpha\n")
    reply = chat_reply("Reading.", calls=[("call_r", "read", {"path": "a.txt"})])
    reply.events.insert(-2, chunk({"tool_calls": "ab"}))
    oai.script(reply, chat_reply("Done."))
    await rig.harness.prompt("look")
    roles = [m["role"] for m in rig.messages()]
    assert roles == ["user", "assistant", "toolResult", "toolResult", "toolResult", "assistant"]
    results = [m for m in rig.messages() if m["role"] == "toolResult"]
    assert [(m["toolCallId"], m["isError"]) for m in results] == [
        ("call_r", False), ("call_1", True), ("call_2", True)]
    assert rig.messages()[-1]["content"] == [{"type": "text", "text": "Done."}]


@pytest.mark.parametrize("api", [CHAT_API, RESPONSES_API])
@pytest.mark.parametrize("error", [{}, []])
async def test_a_chunk_with_an_empty_error_fails_the_reply_as_pi_16_fails_it(
        make_rig, fake, oai, api: str, error: Any) -> None:
    """A chunk whose `error` was {} or [] was read on (Python holds them false), and the reply
    saved as a success; pi 1.6's SDK throws on it (JavaScript holds them true) and the reply
    fails with "{}" or "[]" (/tmp/fuzz-work/pi16_turns.mjs). Found by fuzzing the stream."""
    rig = make_rig(api=api)
    odd = sse({"error": error})
    stream = Reply([chunk({"content": "partial"})], raw=odd + sse(chunk(finish="stop"))) \
        if api == CHAT_API else Reply(message_item(0, "partial")[:3], raw=odd + sse(completed()))
    oai.script(stream)
    await rig.harness.prompt("hi")
    expected = ("error", json.dumps(error), [{"type": "text", "text": "partial"}])
    reply = rig.messages()[-1]
    assert (reply["stopReason"], reply["errorMessage"], reply["content"]) == expected
    if (pi := pi16_reply(Stream("chat" if api == CHAT_API else "responses", stream), fake, oai)
            ) is not None:
        assert (pi["stopReason"], pi["errorMessage"], pi["content"]) == expected


# Not UTF-8: a lone lead byte, a surrogate's three bytes, a 4-byte character cut short; Node's
# TextDecoder makes them 1, 3 and 1 U+FFFD (maximal subparts), as Python's "replace" does.
MARK, NOT_UTF8, READ = "\u00a7", b"caf\xc3 \xed\xa0\x80 \xf0\x9f\x98!", \
    "caf\ufffd \ufffd\ufffd\ufffd \ufffd!"


@pytest.mark.parametrize("api", [CHAT_API, RESPONSES_API])
async def test_bytes_that_are_not_utf8_are_read_as_replacement_characters(
        make_rig, oai, api: str) -> None:
    """A text delta holding "caf\\xc3" failed the whole reply ("a reply pi-lsp cannot read
    (UnicodeDecodeError ...)", the SDK's strict decode); pi's TextDecoder keeps it, U+FFFD
    where the bytes are not UTF-8."""
    rig = make_rig(api=api)
    events = (chat_reply if api == CHAT_API else responses_reply)(MARK).events
    oai.script(Reply(raw=sse(*events).replace(json.dumps(MARK)[1:-1].encode(), NOT_UTF8)))
    await rig.harness.prompt("hi")
    reply = rig.messages()[-1]
    assert reply["stopReason"] == "stop" and [b["text"] for b in reply["content"]] == [READ]


async def test_a_character_cut_between_chunks_is_read_whole() -> None:
    """The stream's lines are decoded whole (split from its bytes first): decoding each chunk
    as it came would make two U+FFFD of an "é" the network cut in two."""
    async def body() -> AsyncIterator[bytes]:
        for part in (b'data: {"text": "caf\xc3', b'\xa9 \xc3"}\n', b"\n"):
            yield part

    provider = OpenAIProvider("lab", "k", None)
    decoder = provider.clients[CHAT_API]._make_sse_decoder()
    assert [sse.json() async for sse in decoder.aiter_bytes(body())] == [
        {"text": "caf\u00e9 \ufffd"}]
    await close_clients(provider)


@pytest.mark.parametrize("api", [CHAT_API, RESPONSES_API])
async def test_a_bom_starting_a_line_is_dropped_as_pi_drops_it(make_rig, oai, api: str) -> None:
    """A BOM before the stream made the first line's field "\\ufeffdata" and its event was lost
    ("Hello world" read as " world"); pi's SDK decodes each line alone, and its TextDecoder
    drops a BOM starting each (a BOM before every event here)."""
    rig = make_rig(api=api)
    events = (chat_reply if api == CHAT_API else responses_reply)("Hello", " world").events
    oai.script(Reply(raw=b"".join(b"\xef\xbb\xbf" + sse(event) for event in events)))
    await rig.harness.prompt("hi")
    reply = rig.messages()[-1]
    assert reply["stopReason"] == "stop"
    assert [b["text"] for b in reply["content"]] == ["Hello world"]


async def test_chat_a_hosts_own_thinking_switch_reaches_it(oai) -> None:
    """The SDK's `create` takes only the fields it names: OpenRouter's `reasoning` (and
    DeepSeek's `thinking`, Qwen's `enable_thinking`) failed every request with a TypeError
    before anything was sent; they go in the SDK's `extra_body` now."""
    from pi_lsp.providers.base import ReplyBuilder
    from pi_lsp.providers.openai_api import OpenAIProvider
    from pi_lsp.providers.registry import Compat

    model = msgspec.structs.replace(local(CHAT_API, reasoning=True),
                                    compat=Compat(thinking_format="openrouter"))
    provider = OpenAIProvider("lab", "k", f"{oai.url}/v1")
    oai.script(chat_reply("ok"))
    reply = ReplyBuilder(CHAT_API, model)
    request = ModelRequest(model, "", [UserMessage(content="hi", timestamp=1)], [], "low")
    [_ async for _ in provider.stream(request, reply)]
    await close_clients(provider)
    assert reply.message().content == [TextContent(text="ok")], reply.error_message
    [sent] = oai.chat_requests()
    assert sent["reasoning"] == {"effort": "low"} and sent["messages"][0]["content"] == "hi"


async def test_chat_compat_flags_shape_the_request(oai) -> None:
    from pi_lsp.providers.registry import Compat

    compat = Compat(supports_store=False, supports_developer_role=False,
                    supports_reasoning_effort=False, supports_usage_in_streaming=False,
                    supports_strict_mode=False, max_tokens_field="max_tokens",
                    requires_tool_result_name=True, requires_thinking_as_text=True)
    model = ModelInfo("lab", "m", 8000, 1000, PRICE, reasoning=True, api=CHAT_API,
                      compat=compat)
    other = AssistantMessage(content=[ThinkingContent(thinking="hmm", thinking_signature="x"),
                                      ToolCall(id="c1", name="bash", arguments={})],
                             api=CHAT_API, provider="lab", model="m", usage=Usage(),
                             stop_reason="toolUse", timestamp=2)
    result = ToolResultMessage(tool_call_id="c1", tool_name="bash",
                               content=[TextContent(text="out")], is_error=False, timestamp=3)
    from pi_lsp.providers.base import ToolSpec
    params = openai_chat.request_params(ModelRequest(
        model, "sys", [UserMessage(content="q", timestamp=1), other, result],
        [ToolSpec("bash", "run", {"type": "object"})], "high"))
    assert "store" not in params and "stream_options" not in params
    assert "reasoning_effort" not in params and params["max_tokens"] == 1000
    assert params["messages"][0]["role"] == "system"
    assert params["messages"][2]["content"] == [{"type": "text", "text": "hmm"}]
    assert params["messages"][3] == {"role": "tool", "content": "out", "tool_call_id": "c1",
                                     "name": "bash"}
    assert "strict" not in params["tools"][0]["function"]


@pytest.mark.parametrize(("name", "sent"), [
    (msgspec.UNSET, msgspec.UNSET), ("", msgspec.UNSET), (None, msgspec.UNSET),
    (0, msgspec.UNSET), (False, msgspec.UNSET), (5, 5), ("bash", "bash")],
    ids=["missing", "empty", "null", "zero", "false", "a number", "text"])
def test_a_tool_results_name_goes_where_names_are_required_as_pi_16_sends_it(
        name: Any, sent: Any) -> None:
    """pi 1.6 names a tool result only when its toolName is truthy (`requiresToolResultName &&
    toolMsg.toolName`), with the value as it is: a hand-edited null, 0 or false was sent as the
    text "null", "0" or "false"."""
    from pi_lsp.providers.registry import Compat
    from pi_lsp.session.entries import decode_message

    model = ModelInfo("lab", "m", 8000, 1000, PRICE, api=CHAT_API,
                      compat=Compat(requires_tool_result_name=True))
    other = AssistantMessage(content=[ToolCall(id="c1", name="bash", arguments={})],
                             api=CHAT_API, provider="lab", model="m", usage=Usage(),
                             stop_reason="toolUse", timestamp=2)
    fields = {"role": "toolResult", "toolCallId": "c1", "content": [{"type": "text",
              "text": "out"}], "isError": False, "timestamp": 3}
    result = decode_message(msgspec.json.encode(
        fields if name is msgspec.UNSET else {**fields, "toolName": name}))
    assert isinstance(result, ToolResultMessage)
    params = openai_chat.request_params(ModelRequest(
        model, "", [UserMessage(content="q", timestamp=1), other, result], [], "off"))
    named = {} if sent is msgspec.UNSET else {"name": sent}
    assert params["messages"][-1] == {"role": "tool", "content": "out", "tool_call_id": "c1",
                                      **named}


# -- Responses -------------------------------------------------------------------------------


async def test_responses_reasoning_tool_call_round_trip(make_rig, oai) -> None:
    rig = make_rig(api=RESPONSES_API, reasoning=True)
    rig.harness.set_thinking_level("medium")
    (rig.root / "a.txt").write_text("alpha\n")
    oai.script(responses_reply("Let me read.", reasoning="Plan: read it.",
                               calls=[("call_1", "read", {"path": "a.txt"})],
                               usage=(500, 60, 100)),
               responses_reply("It says alpha."))
    await rig.harness.prompt("what is in a.txt")
    assert streamed(rig, ThinkingDelta).startswith("Plan: read it.")
    assert streamed(rig, TextDelta) == "Let me read.It says alpha."
    call = rig.messages()[1]
    assert call["api"] == RESPONSES_API and call["stopReason"] == "toolUse"
    thinking, text, tool = call["content"]
    assert thinking["thinking"] == "Plan: read it."
    item = json.loads(thinking["thinkingSignature"])
    assert item["type"] == "reasoning" and item["encrypted_content"] == "enc"
    assert text == {"type": "text", "text": "Let me read.", "textSignature": '{"v":1,"id":"msg_1"}'}
    assert tool == {"type": "toolCall", "id": "call_1|fc_2", "name": "read",
                    "arguments": {"path": "a.txt"}}
    assert (call["usage"]["input"], call["usage"]["output"], call["usage"]["cacheRead"]) == (
        400, 60, 100)
    one, two = oai.responses_requests()
    assert one["reasoning"] == {"effort": "medium", "summary": "auto"}
    assert one["include"] == ["reasoning.encrypted_content"]
    assert one["store"] is False and one["stream"] is True and one["max_output_tokens"] == 8192
    assert one["input"][0]["role"] == "developer"
    assert one["input"][1] == {"role": "user", "content": [
        {"type": "input_text", "text": "what is in a.txt"}]}
    assert one["tools"][0] == {"type": "function", "name": "read",
                               "description": one["tools"][0]["description"],
                               "parameters": one["tools"][0]["parameters"]}
    replayed = two["input"][2:]
    assert replayed[0] == item  # the reasoning item goes back whole
    assert replayed[1]["type"] == "message" and replayed[1]["id"] == "msg_1"
    assert replayed[2] == {"type": "function_call", "call_id": "call_1", "id": "fc_2",
                           "name": "read", "arguments": '{"path":"a.txt"}'}
    assert replayed[3]["type"] == "function_call_output"
    assert replayed[3]["call_id"] == "call_1" and "alpha" in replayed[3]["output"]


async def test_responses_errors_become_entries(make_rig, oai) -> None:
    rig = make_rig(api=RESPONSES_API, max_retries=1)
    oai.script(error_reply(429, "rate_limit_exceeded", "slow down"),
               responses_reply("fine"),
               Reply(message_item(0, "half")[:3], error={"code": "server_error",
                                                         "message": "stream broke"}))
    await rig.harness.prompt("one")
    assert rig.messages()[-1]["content"][0]["text"] == "fine"
    await rig.harness.prompt("two")
    last = rig.messages()[-1]
    assert last["stopReason"] == "error" and "stream broke" in last["errorMessage"]
    assert last["content"] == [{"type": "text", "text": "half"}]
    assert len(oai.responses_requests()) == 3
    rig.harness._provider_cache.clear()
    oai.script(error_reply(400, "invalid_request_error", "bad input"))
    await rig.harness.prompt("three")
    assert rig.messages()[-1]["errorMessage"] == "ollama 400 invalid_request_error: bad input"



async def test_a_failed_responses_reply_ends_there_and_its_calls_are_not_run(
        make_rig, oai) -> None:
    """An `error` event did not end the reply: the response.completed after it made the call
    that followed it a tool use, and the tool ran. A response.failed's usage was counted where
    pi 1.6 counts none."""
    rig = make_rig(api=RESPONSES_API)
    (rig.root / "a.txt").write_text("alpha\n")
    failed = completed(status="failed")
    failed["response"]["error"] = {"code": "server_error", "message": "The server had an error"}
    oai.script(Reply([*message_item(0, "Hel", "lo")[:3],
                      {"type": "error", "code": "server_error", "message": "boom", "param": None},
                      *call_item(1, "call_1", "read", {"path": "a.txt"}), completed()]),
               Reply([*message_item(0, "Hello"), failed]))
    await rig.harness.prompt("one")
    assert [m["role"] for m in rig.messages()] == ["user", "assistant"]  # no tool result
    reply = rig.messages()[-1]
    assert (reply["stopReason"], reply["errorMessage"]) == ("error", "boom")  # pi 1.6's words
    assert reply["content"] == [{"type": "text", "text": "Hel"}]
    assert reply["usage"]["totalTokens"] == 0
    assert not any(isinstance(e, ToolExecutionStart) for e in rig.events)
    await rig.harness.prompt("two")
    last = rig.messages()[-1]
    assert last["errorMessage"] == "server_error: The server had an error"
    assert (last["usage"]["input"], last["usage"]["output"], last["usage"]["totalTokens"]) == (
        0, 0, 0)
    assert len(oai.responses_requests()) == 2  # one a prompt: nothing ran, nothing followed


async def read_responses(oai: FakeOpenAI, *events: dict[str, Any], raw: bytes = b""
                         ) -> AssistantMessage:
    """The reply pi-lsp makes of Responses `events` (then `raw` SSE bytes), served through the
    real SDK."""
    model = local(RESPONSES_API)
    provider = OpenAIProvider("ollama", "k", f"{oai.url}/v1")
    oai.script(Reply(list(events), raw=raw))
    built = ReplyBuilder(RESPONSES_API, model)
    request = ModelRequest(model, "sys", [UserMessage(content="q", timestamp=1)], [], "off")
    _ = [e async for e in provider.stream(request, built)]
    await close_clients(provider)
    return built.message()


async def test_odd_fields_of_responses_events_print_no_warnings(oai) -> None:
    """An error event whose message is a list, a reasoning item whose encrypted content is a
    number, and an input transformation of the wrong shape made pydantic print "serializer
    warnings", with a line of its source, on stderr (the server's log): found by fuzzing."""
    odd = {"type": "reasoning", "id": "rs_0", "summary": [], "encrypted_content": 5}
    done = completed()
    done["response"]["input_transformations"] = [{"type": "reasoning", "id": 7,
                                                  "action": "removed", "reason": []}]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        failed = await read_responses(oai, {"type": "error", "code": [], "message": []})
        thought = await read_responses(
            oai, {"type": "response.output_item.added", "output_index": 0, "item": odd},
            {"type": "response.output_item.done", "output_index": 0, "item": odd}, done)
    assert failed.error_message == "[]"  # pi 1.6's: its message, written as JSON
    [block] = thought.content
    assert isinstance(block, ThinkingContent) and json.loads(block.thinking_signature or "") == odd
    [diagnostic] = thought.diagnostics or []
    assert diagnostic["details"] == {"transformations": [
        {"type": "reasoning", "id": 7, "action": "removed", "reason": []}]}
    assert [str(w.message) for w in caught] == []


def responses_frames(*events: Any) -> bytes:
    """Responses SSE frames, each named by its type: a number in an event's place is sent as
    an output_text delta's data."""
    return b"".join(
        f"event: {e['type'] if isinstance(e, dict) else 'response.output_text.delta'}\n"
        f"data: {json.dumps(e)}\n\n".encode() for e in events)


# Responses events where an event, an item or an output_index is of another type, and a call
# finished as a message, with the replies pi 1.6 makes of them (/tmp/fuzz-work/pi16_turns.mjs).
ODD_RESPONSES = [
    [*message_item(0, "Hel")[:3], 5, "x",
     {"type": "response.output_text.delta", "output_index": {}, "delta": "?"},
     {"type": "response.output_item.added", "output_index": [], "item": "message"},
     {"type": "response.output_item.done", "output_index": 3, "item": 7},
     *message_item(0, "Hel", "lo")[3:], completed()],
    [*call_item(0, "call_1", "read", {"path": "a.txt"})[:-1],
     {**call_item(0, "call_1", "read", {})[-1], "item": {"type": "message", "content": []}},
     completed()],
]


async def test_what_comes_after_an_item_is_done_is_not_added_to_it(fake, oai) -> None:
    """A text delta after its item's output_item.done was added to the finished text ("Hello"
    became "Hellolo"); pi 1.6 forgets the item once done, so the delta is dropped, and the
    item done again is a new one (pi 1.6's reply: /tmp/fuzz-work/pi16_turns.mjs). Found by
    fuzzing the stream (events reordered)."""
    *streaming, late, done = message_item(0, "Hel", "lo")
    events = [*streaming, done, late, done, completed()]
    reply = await read_responses(oai, *events)
    signature = '{"v":1,"id":"msg_0"}'
    assert reply.content == [TextContent(text="Hello", text_signature=signature)] * 2
    if (pi := pi16_reply(Stream("responses", Reply(events)), fake, oai)) is not None:
        assert pi["content"] == [{"type": "text", "text": "Hello", "textSignature": signature}] * 2


async def test_parts_of_a_finished_item_of_other_types_are_read_as_pi_16_reads_them(
        fake, oai) -> None:
    """A finished message or reasoning item whose part was a text or a number, or whose text
    was a number, failed the whole reply ("cannot read (AttributeError: 'str' object has no
    attribute 'type')"); pi 1.6 joins what it reads of each part (none of a text: "", 5 as
    "5"). Found by fuzzing the stream; pi 1.6's reply: /tmp/fuzz-work/pi16_turns.mjs."""
    reasoning = reasoning_item(0, "Thought")
    reasoning[-1]["item"]["summary"] = ["odd", {"type": "summary_text", "text": 5}]
    message = message_item(1, "Hello")
    message[-1]["item"]["content"] = ["odd", {"type": "output_text", "text": "Hi"}, 7,
                                      {"type": "refusal", "refusal": 0}]
    events = [*reasoning, *message, completed()]
    reply = await read_responses(oai, *events)
    assert (reply.stop_reason, reply.error_message) == ("stop", None)
    assert [getattr(block, "thinking", None) or getattr(block, "text", None)
            for block in reply.content] == ["\n\n5", "Hi0"]
    if (pi := pi16_reply(Stream("responses", Reply(events)), fake, oai)) is not None:
        assert (pi["stopReason"], [block.get("thinking") or block.get("text")
                                   for block in pi["content"]]) == ("stop", ["\n\n5", "Hi0"])


@pytest.mark.parametrize("response", ["x", 1.5, []])
async def test_a_created_event_whose_response_is_no_object_is_read_as_pi_16_reads_it(
        fake, oai, response: Any) -> None:
    """A response.created whose response was a text, a number or a list failed the whole
    reply ("cannot read (AttributeError: 'str' object has no attribute 'id')"); pi 1.6 reads
    no id of it and reads on (/tmp/fuzz-work/pi16_turns.mjs). Found by fuzzing the stream."""
    events = [{"type": "response.created", "response": response}, *message_item(0, "Hello"),
              completed()]
    reply = await read_responses(oai, *events)
    assert (reply.stop_reason, reply.error_message, reply.response_id) == ("stop", None, "resp_1")
    assert reply.content == [TextContent(text="Hello", text_signature='{"v":1,"id":"msg_0"}')]
    if (pi := pi16_reply(Stream("responses", Reply(events)), fake, oai)) is not None:
        assert (pi["stopReason"], pi.get("errorMessage"), pi["responseId"]) == (
            "stop", None, "resp_1")


async def test_odd_shapes_of_responses_events_are_read_as_pi_16_reads_them(fake, oai
                                                                          ) -> None:
    """An event or an item that was a number or a text, or an output_index that was an object,
    failed the whole reply ("cannot read (AttributeError: 'int' object has no attribute
    'type')"), which pi 1.6 reads on; and a call whose output_item.done said it was a message
    was run, where pi 1.6 refuses a call not finished as one. Found by fuzzing the stream."""
    odd = await read_responses(oai, raw=responses_frames(*ODD_RESPONSES[0]))
    assert (odd.stop_reason, odd.error_message) == ("stop", None)
    assert odd.content == [TextContent(text="Hello", text_signature='{"v":1,"id":"msg_0"}')]
    call = await read_responses(oai, raw=responses_frames(*ODD_RESPONSES[1]))
    assert call.stop_reason == "error" and call.error_message == (
        "ollama: the stream completed with an unfinished tool call: read (call_1|fc_0)")
    odd_pi, call_pi = (pi16_reply(Stream("responses", Reply(raw=responses_frames(*events))),
                                  fake, oai) for events in ODD_RESPONSES)
    if odd_pi is not None and call_pi is not None:  # pi names the API where pi-lsp the provider
        assert (odd_pi["stopReason"], odd_pi["content"]) == ("stop", [
            {"type": "text", "text": "Hello", "textSignature": '{"v":1,"id":"msg_0"}'}])
        assert (call_pi["stopReason"], call_pi["errorMessage"]) == ("error", (
            "OpenAI Responses stream completed with an unfinished tool call: read (call_1|fc_0)"))


async def test_an_item_done_without_its_start_is_kept(oai) -> None:
    """Its output_item.added never came, and the reply was left empty."""
    reply = await read_responses(oai, message_item(0, "Hello")[-1], completed())
    assert reply.content == [TextContent(text="Hello", text_signature='{"v":1,"id":"msg_0"}')]


async def test_arguments_sent_whole_at_the_end_are_the_calls(oai) -> None:
    """function_call_arguments.done was ignored: the call ran with no arguments."""
    added, *_, done_event, item_done = call_item(0, "call_1", "read", {"path": "z"})
    item_done["item"]["arguments"] = ""
    reply = await read_responses(oai, added, done_event, item_done, completed())
    assert reply.stop_reason == "toolUse"
    assert reply.content == [ToolCall(id="call_1|fc_0", name="read", arguments={"path": "z"})]


async def test_a_call_without_a_name_fails_the_reply(oai) -> None:
    """It ran as "Tool None not found" and was written with name null, a line the session
    reader skips: the call and its result vanished from every later request."""
    events = call_item(0, "call_1", "read", {"path": "z"})
    for event in (events[0], events[-1]):
        del event["item"]["name"]
    reply = await read_responses(oai, *events, completed())
    assert (reply.stop_reason, reply.error_message, reply.content) == (
        "error", "The model sent a tool call without a string name", [])


async def test_a_delta_for_an_item_of_another_kind_is_ignored_as_pi_16_ignores_it(oai) -> None:
    """The whole reply failed with an empty AssertionError or a KeyError."""
    def stray(kind: str, index: int, text: str) -> dict[str, Any]:
        return {"type": kind, "output_index": index, "item_id": "x", "content_index": 0,
                "summary_index": 0, "delta": text}

    call = call_item(0, "call_1", "read", {"path": "z"})
    message = message_item(1, "Hi")
    reply = await read_responses(
        oai, call[0], stray("response.output_text.delta", 0, "stray"),
        stray("response.reasoning_summary_text.delta", 0, "stray"), *call[1:], *message[:-1],
        stray("response.function_call_arguments.delta", 1, "{}"), message[-1], completed())
    assert (reply.stop_reason, reply.error_message) == ("toolUse", None)
    assert reply.content == [
        ToolCall(id="call_1|fc_0", name="read", arguments={"path": "z"}),
        TextContent(text="Hi", text_signature='{"v":1,"id":"msg_1"}')]


async def test_encrypted_reasoning_sent_only_with_the_finished_response_is_kept(oai) -> None:
    """Azure's way: the item finished without it, and the reasoning went back unusable."""
    *events, done = reasoning_item(0, "Plan")
    del done["item"]["encrypted_content"]
    finished = completed()
    finished["response"]["output"] = [{**done["item"], "encrypted_content": "AZ=="}]
    [thinking] = (await read_responses(oai, *events, done, finished)).content
    assert isinstance(thinking, ThinkingContent) and thinking.thinking_signature
    assert json.loads(thinking.thinking_signature)["encrypted_content"] == "AZ=="


async def test_a_message_finished_with_no_content_has_no_text(oai) -> None:
    """The streamed text was kept where pi 1.6 writes the finished item's, here none."""
    *streamed_text, done = message_item(0, "streamed")
    done["item"]["content"] = []
    reply = await read_responses(oai, *streamed_text, done, completed())
    assert reply.content == [TextContent(text="", text_signature='{"v":1,"id":"msg_0"}')]


async def test_the_servers_total_is_kept_even_when_missing(oai) -> None:
    """A missing total_tokens was made the sum of the counts where pi 1.6 writes 0 (pi keeps
    the server's total)."""
    finished = completed(input_tokens=200, output_tokens=40)
    finished["response"]["usage"]["total_tokens"] = 250  # the server's count, not the sum
    assert (await read_responses(oai, finished)).usage.total_tokens == 250
    del finished["response"]["usage"]["total_tokens"]
    usage = (await read_responses(oai, finished)).usage
    assert (usage.input, usage.output, usage.total_tokens) == (200, 40, 0)

async def test_counts_sent_as_strings_are_counted_as_pi_16_counts_them(oai) -> None:
    """A complete reply failed with a TypeError; pi's arithmetic reads "200" as 200."""
    finished = completed()
    finished["response"]["usage"] = {
        "input_tokens": "200", "output_tokens": "40", "total_tokens": "240",
        "input_tokens_details": {"cached_tokens": "50"}, "output_tokens_details": None}
    reply = await read_responses(oai, *message_item(0, "Hi"), finished)
    assert (reply.stop_reason, reply.error_message) == ("stop", None)
    usage = reply.usage
    assert (usage.input, usage.output, usage.cache_read, usage.total_tokens) == (150, 40, 50, 240)


async def test_a_status_pi_16_does_not_know_fails_the_reply(oai) -> None:
    """A response.completed of status "weird" was a normal stop (here a tool use, whose call
    then ran); pi 1.6 stops only on completed, in_progress and queued, and fails the rest."""
    finished = completed()
    finished["response"]["status"] = "weird"
    reply = await read_responses(oai, *call_item(0, "call_1", "read", {"path": "z"}), finished)
    assert (reply.stop_reason, reply.error_message) == ("error", "Unhandled stop reason: weird")
    for status in ("queued", 0, False):  # pi's `if (!status)`: any falsy status is a stop
        finished["response"]["status"] = status
        assert (await read_responses(oai, *message_item(0, "Hi"), finished)).stop_reason == "stop"


def test_responses_tool_ids_are_made_acceptable() -> None:
    gpt = REGISTRY_GPT5
    own = AssistantMessage(content=[], api=RESPONSES_API, provider="openai", model="gpt-5-mini",
                           usage=Usage(), stop_reason="toolUse", timestamp=1)
    claude = msgspec.structs.replace(own, api="anthropic-messages", provider="anthropic")
    assert openai_responses.tool_id("call_1|fc_2", own, gpt) == "call_1|fc_2"
    assert openai_responses.tool_id("call+/1|item=9", own, gpt) == "call__1|fc_item_9"
    # another provider's item id is hashed as pi hashes it (same value as pi's shortHash)
    assert openai_responses.tool_id("call_1|fc_2", claude, gpt) == "call_1|fc_x08lfqt1kfj7"
    assert openai_responses.tool_id("toolu_01", claude, gpt) == "toolu_01"
    lab = local(RESPONSES_API)  # not OpenAI: one plain id
    assert openai_responses.tool_id("call_1|fc_2", claude, lab) == "call_1_fc_2"
    assert openai_chat.tool_id("call_1|fc_2", "lab") == "call_1_fc_2"
    assert openai_chat.tool_id("call_1|fc_" + "x" * 400, "lab") == "call_1_1cu2suqq"
    assert openai_chat.tool_id("a" * 50, "openai") == "a" * 40
    assert openai_chat.tool_id("a" * 50, "lab") == "a" * 50


# -- models.json -----------------------------------------------------------------------------


def write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    agent, workspace = tmp_path / "agent", tmp_path / "ws"
    agent.mkdir()
    workspace.mkdir()
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    return agent, workspace


def test_models_json_global_and_project_merge(dirs, monkeypatch) -> None:
    agent, workspace = dirs
    monkeypatch.setenv("LAB_KEY", "secret-from-env")
    write(agent / "models.json", {"providers": {
        "ollama": {"baseUrl": "http://localhost:11434/v1", "api": "openai-completions",
                   "apiKey": "ollama", "models": [{"id": "llama3.1:8b"},
                                                  {"id": "qwen", "contextWindow": 1000}]},
        "lab": {"baseUrl": "http://lab/v1", "api": "openai-responses", "apiKey": "$LAB_KEY",
                "headers": {"x-team": "core"},
                "compat": {"supportsDeveloperRole": False},
                "models": [{"id": "big", "name": "Big One", "reasoning": True,
                            "input": ["text", "image"], "contextWindow": 262144,
                            "maxTokens": 65536, "cost": {"input": 0.6, "output": 3},
                            "compat": {"maxTokensField": "max_tokens"}}]},
        "openai": {"modelOverrides": {"gpt-5": {"name": "GPT-5 (team)", "maxTokens": 1000,
                                                "thinkingLevelMap": {"low": None,
                                                                     "xhigh": "xhigh"}}}},
    }})
    # A project that moves a provider names its key too: the user's never goes where a
    # project points (tests/test_trust.py).
    write(workspace / ".pi" / "models.json", {"providers": {
        "ollama": {"baseUrl": "http://gpu-box:11434/v1", "apiKey": "ollama",
                   "models": [{"id": "qwen", "contextWindow": 64000, "reasoning": True}]}}})
    settings = load_settings(workspace, project=True)
    registry = settings.registry()
    qwen = registry.get("ollama", "qwen")
    assert (qwen.context_window, qwen.reasoning, qwen.api) == (64000, True, CHAT_API)
    llama = registry.get("ollama", "llama3.1:8b")
    assert (llama.context_window, llama.max_tokens, llama.reasoning) == (128000, 16384, False)
    assert llama.price == Price(0, 0, 0, 0) and llama.input == ["text"]
    ollama = registry.provider("ollama")
    assert ollama is not None and ollama.base_url == "http://gpu-box:11434/v1"  # project wins
    assert ollama.api == CHAT_API and ollama.source == str(workspace / ".pi" / "models.json")
    big = registry.get("lab", "big")
    assert (big.name, big.api, big.context_window, big.max_tokens) == (
        "Big One", RESPONSES_API, 262144, 65536)
    assert big.price == Price(0.6, 3, 0, 0) and big.input == ["text", "image"]
    assert big.compat.supports_developer_role is False  # the provider's flags
    assert big.compat.max_tokens_field == "max_tokens"  # and the model's own
    gpt5 = registry.get("openai", "gpt-5")
    assert (gpt5.name, gpt5.max_tokens, gpt5.context_window) == ("GPT-5 (team)", 1000, 400_000)
    # an override's thinkingLevelMap is merged over the built-in one, as pi merges it
    assert thinking_levels(gpt5) == ["minimal", "medium", "high", "xhigh"]
    listed = {(m.provider, m.id) for m in registry.all()}
    assert {("ollama", "qwen"), ("ollama", "llama3.1:8b"), ("lab", "big"),
            ("anthropic", "claude-sonnet-4-5")} <= listed
    # keys: an environment variable's value, or the literal
    made = provider_factory(registry, settings.api_key)
    lab = made("lab")
    lab_client = lab.clients[RESPONSES_API]  # type: ignore[attr-defined]
    assert lab_client.api_key == "secret-from-env"
    assert lab_client.default_headers["x-team"] == "core"
    assert made("ollama").clients[CHAT_API].api_key == "ollama"  # type: ignore[attr-defined]


def test_a_project_that_moves_a_provider_gets_none_of_the_users_headers(dirs, monkeypatch) -> None:
    agent, workspace = dirs
    monkeypatch.setenv("GATEWAY_TOKEN", "user-gateway-secret")
    write(agent / "models.json", {"providers": {
        "gateway": {"baseUrl": "http://gateway/v1", "api": "openai-completions", "apiKey": "k",
                    "headers": {"cf-aig-authorization": "$GATEWAY_TOKEN"},
                    "models": [{"id": "m1", "headers": {"x-model-secret": "user-model-secret"}}]},
        "anthropic": {"headers": {"x-user": "$GATEWAY_TOKEN"}, "modelOverrides": {
            "claude-sonnet-4-5": {"headers": {"x-override": "user-override-secret"}}}},
        "lab": {"baseUrl": "http://lab/v1", "api": "openai-completions", "apiKey": "k",
                "headers": {"x-team": "$GATEWAY_TOKEN"}, "models": [{"id": "big"}]},
    }})
    write(workspace / ".pi" / "models.json", {"providers": {
        # baseUrl: moved; its own model keeps the headers the project wrote
        "gateway": {"baseUrl": "http://project-host/v1", "apiKey": "dummy",
                    "models": [{"id": "m2", "headers": {"x-project": "p"}}]},
        # headers: moved too; the project's override keeps its headers
        "anthropic": {"headers": {"x-project": "p"}, "apiKey": "dummy", "modelOverrides": {
            "claude-opus-4-5": {"headers": {"x-project-override": "p"}}}},
        # a model added, nothing moved: the user's host still gets the user's headers
        "lab": {"models": [{"id": "small"}]},
    }})
    models, providers = load_models(workspace, project=True)
    by_provider = {p.name: p for p in providers}
    model_headers = {(m.provider, m.id): m.headers for m in models}
    assert by_provider["gateway"].headers == {}
    assert model_headers[("gateway", "m1")] == {}
    assert model_headers[("gateway", "m2")] == {"x-project": "p"}
    assert by_provider["anthropic"].headers == {"x-project": "p"}
    assert model_headers[("anthropic", "claude-sonnet-4-5")] == {}
    assert model_headers[("anthropic", "claude-opus-4-5")] == {"x-project-override": "p"}
    assert by_provider["lab"].headers == {"x-team": "$GATEWAY_TOKEN"}
    made = provider_factory(ModelRegistry(models, providers), lambda name: None)
    gateway, lab = made("gateway").clients, made("lab").clients  # type: ignore[attr-defined]
    assert "cf-aig-authorization" not in gateway[CHAT_API].default_headers
    assert lab[CHAT_API].default_headers["x-team"] == "user-gateway-secret"


def test_your_models_json_values_are_pi_templates(dirs, monkeypatch) -> None:
    """pi 1.6 reads `$NAME` and `${NAME}` in apiKey and header values; pi-lsp sent
    `$CORP_KEY` as written and left CORP_KEY and GW_TOKEN in bash's environment."""
    agent, workspace = dirs
    for name in ("CORP_KEY", "GW_TOKEN", "PLAIN"):
        monkeypatch.setenv(name, f"{name.lower()}-secret")
    write(agent / "models.json", {"providers": {"corp": {
        "baseUrl": "http://corp/v1", "api": "openai-completions", "apiKey": "$CORP_KEY",
        "headers": {"x-gw": "Bearer ${GW_TOKEN}", "x-price": "$$5", "x-team": "PLAIN"},
        "models": [{"id": "m"}]}}})
    registry = load_settings(workspace, project=False).registry()
    made = provider_factory(registry, lambda name: None)
    client = made("corp").clients[CHAT_API]  # type: ignore[attr-defined]
    assert client.api_key == "corp_key-secret"
    assert client.default_headers["x-gw"] == "Bearer gw_token-secret"
    assert client.default_headers["x-price"] == "$5"
    assert client.default_headers["x-team"] == "PLAIN"  # a bare word is literal, as in pi 1.6
    # earlier pi-lsp read a bare name as the variable: it stays out of bash's environment
    assert {"CORP_KEY", "GW_TOKEN", "PLAIN"} <= registry.key_variables()
    monkeypatch.delenv("GW_TOKEN")  # pi 1.6 fails the request rather than send a blank
    with pytest.raises(ModelsFileError, match=r"headers\.x-gw: environment variable GW_TOKEN"):
        made("corp")


async def test_your_models_headers_are_resolved_and_kept_from_bash(
        dirs, oai: FakeOpenAI, fake: FakeAnthropic, monkeypatch) -> None:
    """A model's own headers (`models[].headers`, `modelOverrides`') went out as written,
    `$MODEL_TOKEN` and all, and their variables stayed in bash's environment."""
    from pi_lsp.summarize.select import choose_summarizer
    from pi_lsp.summarize.summarizer import SummaryError, SummaryRequest

    async def summarize(model: str) -> None:
        write(agent / "settings.json", {"summaryModel": model})
        summarizer = choose_summarizer(load_settings(workspace, project=False),
                                       base_url=fake.url)
        try:
            await summarizer.summarize(SummaryRequest("history", [UserMessage(content="x",
                                                                             timestamp=1)]))
        finally:
            await close_clients(summarizer.provider)

    agent, workspace = dirs
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    monkeypatch.setenv("MODEL_TOKEN", "model-secret")
    monkeypatch.setenv("OVERRIDE_TOKEN", "override-secret")
    write(agent / "models.json", {"providers": {
        "lab": {"baseUrl": f"{oai.url}/v1", "api": "openai-completions", "apiKey": "k",
                "models": [{"id": "m", "headers": {"x-model": "Bearer $MODEL_TOKEN"}}]},
        "anthropic": {"modelOverrides": {"claude-haiku-4-5": {
            "headers": {"x-override": "${OVERRIDE_TOKEN}"}}}}}})
    oai.script(chat_reply("## Goal"))
    fake.script(fake_anthropic.text_reply("## Goal"))
    for model in ("lab/m", "anthropic/claude-haiku-4-5"):
        await summarize(model)
    assert oai.requests[-1].headers["x-model"] == "Bearer model-secret"
    assert fake.requests[-1].headers["x-override"] == "override-secret"
    registry = load_settings(workspace, project=False).registry()
    assert {"MODEL_TOKEN", "OVERRIDE_TOKEN"} <= registry.key_variables()
    # an unset variable fails the request, as in pi 1.6, and nothing is sent
    sent = len(oai.requests), len(fake.requests)
    for model, name in (("lab/m", "MODEL_TOKEN"), ("anthropic/claude-haiku-4-5", "OVERRIDE_TOKEN")):
        monkeypatch.delenv(name)
        with pytest.raises(SummaryError, match=f"environment variable {name} is not set"):
            await summarize(model)
    assert (len(oai.requests), len(fake.requests)) == sent


# The headers pi 1.6's ModelRegistry gives lab/m of auth_header_models (getApiKeyAndHeaders),
# each name once as its SDKs send them (the last of a name, any case): the key as Bearer in
# place of the provider's own Authorization, the model's headers after it.
PI16_AUTH_HEADERS = {"x-a": "1", "authorization": "Bearer k", "x-m": "2"}


def auth_header_models(url: str) -> dict[str, Any]:
    """A models.json whose provider lab (an Anthropic-compatible gateway at `url`) sets
    `authHeader`, with an Authorization header of its own that it replaces."""
    return {"providers": {"lab": {
        "baseUrl": url, "api": "anthropic-messages", "apiKey": "k", "authHeader": True,
        "headers": {"x-a": "1", "authorization": "Basic zzz"},
        "models": [{"id": "m", "headers": {"x-m": "2"}}]}}}


async def test_a_providers_auth_header_sends_the_key_as_a_bearer_token(
        dirs, fake: FakeAnthropic) -> None:
    """models.json's provider-level `authHeader` was not read: pi 1.6 sends the key as
    `Authorization: Bearer` too (over the provider's own Authorization header, under the
    model's headers), so a gateway in front of an Anthropic-compatible API that reads that
    header refused every pi-lsp request that pi 1.6 got through. pi 1.6's headers are stored
    (checked where it is installed)."""
    from pi_lsp.summarize.select import choose_summarizer
    from pi_lsp.summarize.summarizer import SummaryRequest

    agent, workspace = dirs
    write(agent / "models.json", auth_header_models(fake.url))
    if pi16_node() is not None:
        pi = json.loads(pi16_with_lab_model(agent, "process.stdout.write(JSON.stringify((await "
                                            "new pi.ModelRegistry(runtime).getApiKeyAndHeaders("
                                            "model)).headers));"))
        assert {name.lower(): value for name, value in pi.items()} == PI16_AUTH_HEADERS
    settings = msgspec.structs.replace(load_settings(workspace, project=False),
                                       summary_model="lab/m")
    summarizer = choose_summarizer(settings)
    fake.script(fake_anthropic.text_reply("## Goal"))
    try:
        await summarizer.summarize(SummaryRequest("history", [UserMessage(content="x",
                                                                         timestamp=1)]))
    finally:
        await close_clients(summarizer.provider)
    sent = fake.requests[-1].headers
    assert {name: sent.get(name) for name in PI16_AUTH_HEADERS} == PI16_AUTH_HEADERS
    assert sent["x-api-key"] == "k"  # the SDK's own, as pi 1.6's Anthropic SDK sends it


LAB = {"baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions", "apiKey": "k",
       "models": [{"id": "m"}]}
# A key or header holding a lone surrogate (JSON's "\ud800"): the files (by name under the
# agent folder), and the refusal's file (under it) and key path.
LONE_SURROGATES = {
    "header": ({"models.json": {"providers": {"lab": {**LAB, "headers": {"X-Foo": "v\ud800"}}}}},
               "models.json: providers.lab.headers.X-Foo"),
    "header name": ({"models.json": {"providers": {"lab": {**LAB, "headers": {"X-\ud800": "v"}}}}},
                    "models.json: providers.lab.headers.X-\\ud800"),
    "model header": ({"models.json": {"providers": {"lab": {
        **LAB, "models": [{"id": "m", "headers": {"X-Foo": "v\ud800"}}]}}}},
        "models.json: providers.lab.models[0].headers.X-Foo"),
    "apiKey": ({"models.json": {"providers": {"lab": {**LAB, "apiKey": "k\ud800"}}}},
               "models.json: providers.lab.apiKey"),
    "apiKey command": ({"models.json": {"providers": {"lab": {**LAB, "apiKey": "!echo \ud800"}}}},
                       "models.json: providers.lab.apiKey"),
    "auth.json key": ({"models.json": {"providers": {"lab": {k: v for k, v in LAB.items()
                                                             if k != "apiKey"}}},
                       "auth.json": {"lab": {"type": "api_key", "key": "k\ud800"}}},
                      "auth.json: lab.key"),
    "auth.json env": ({"models.json": {"providers": {"lab": {k: v for k, v in LAB.items()
                                                            if k != "apiKey"}}},
                       "auth.json": {"lab": {"type": "api_key", "key": "$LAB_KEY",
                                             "env": {"LAB_KEY": "k\ud800"}}}},
                      "auth.json: lab.env.LAB_KEY"),
    "settings apiKeys": ({"models.json": {"providers": {"lab": {k: v for k, v in LAB.items()
                                                                if k != "apiKey"}}},
                          "settings.json": {"apiKeys": {"lab": "k\ud800"}}},
                         "settings.json: apiKeys.lab"),
}
# What pi 1.6 does with the files above (PI16_SENT), for machines without it: it reads them,
# and its fetch refuses the request's headers. ("apiKey command" it runs; "settings apiKeys"
# is pi-lsp's own.)
STORED_LONE_SURROGATES = Path(__file__).with_name("fixtures") / "pi16-lone-surrogate-headers.json"
PI16_SENT = """
const agent = %s;
const runtime = await pi.ModelRuntime.create({modelsPath: `${agent}/models.json`,
                                              authPath: `${agent}/auth.json`});
const registry = new pi.ModelRegistry(runtime);
const auth = await registry.getApiKeyAndHeaders(registry.find("lab", "m"));
let sent = "sent";
try {
  new Headers({...auth.headers, Authorization: `Bearer ${auth.apiKey}`});
} catch (error) {
  sent = error.message;
}
process.stdout.write(JSON.stringify({errors: [runtime.getError()].filter(Boolean),
                                     ok: auth.ok, sent}));
"""


@pytest.mark.parametrize("case", LONE_SURROGATES)
async def test_a_key_or_header_with_a_lone_surrogate_is_refused_by_its_key_path(
        dirs, oai: FakeOpenAI, case: str) -> None:
    """pi 1.6 reads such a file and its fetch refuses the request ("Cannot convert argument to
    a ByteString"); pi-lsp said "lab: header X-Foo has the character U+D800" (no file), and of
    a header name or a `!command` key, "lab sent a reply pi-lsp cannot read
    (UnicodeEncodeError ...)". Now the one value is refused, naming the file and the key path;
    the provider still counts as having a key, and no file is written."""
    from pi_lsp.summarize.select import choose_summarizer
    from pi_lsp.summarize.summarizer import SummaryError, SummaryRequest

    agent, workspace = dirs
    files, where = LONE_SURROGATES[case]
    for name, data in files.items():
        write(agent / name, data)  # json.dumps writes "\ud800", as a person would
    written = {name: (agent / name).read_text() for name in files}
    stored = json.loads(STORED_LONE_SURROGATES.read_text())
    if pi16_node() is not None and case in stored:
        assert json.loads(pi16_eval(PI16_SENT % json.dumps(str(agent)))) == stored[case]
    settings = msgspec.structs.replace(load_settings(workspace, project=False),
                                       summary_model="lab/m")
    assert "lab/m" in [f"{m.provider}/{m.id}" for m in settings.available_models()]
    refusal = f"{agent / where} holds a lone surrogate, which cannot be sent in an HTTP header"
    sent = len(oai.requests)  # the fake serves the whole module
    with pytest.raises(SummaryError, match=re.escape(refusal)):
        summarizer = choose_summarizer(settings, base_url=oai.url)
        try:
            await summarizer.summarize(SummaryRequest("history", [UserMessage(content="x",
                                                                             timestamp=1)]))
        finally:
            await close_clients(summarizer.provider)
    assert len(oai.requests) == sent
    assert {name: (agent / name).read_text() for name in files} == written


# The path pi 1.6 requests for the baseUrl "…/v1\ud800" (its registry's baseUrl read by
# Node's URL, as its SDK joins it), for machines without it.
PI16_SURROGATE_PATH = "/v1%EF%BF%BD/chat/completions"


def pi16_with_lab_model(agent: Path, then: str) -> str:
    """What `then` writes, run by pi 1.6 with `model` its reading of lab/m from `agent`'s files."""
    return pi16_eval(
        f"const agent = {json.dumps(str(agent))};"
        "const runtime = await pi.ModelRuntime.create({modelsPath: `${agent}/models.json`, "
        "authPath: `${agent}/auth.json`});"
        "const model = new pi.ModelRegistry(runtime).find('lab', 'm');" + then)


async def test_a_base_url_with_a_lone_surrogate_is_read_as_node_reads_it(
        dirs, oai: FakeOpenAI) -> None:
    """Making the provider ended in UnicodeEncodeError (the HTTP client cannot quote the
    unit); pi 1.6's URL reads a lone surrogate as U+FFFD and sends it percent-encoded."""
    from pi_lsp.summarize.select import choose_summarizer
    from pi_lsp.summarize.summarizer import SummaryRequest

    agent, workspace = dirs
    write(agent / "models.json", {"providers": {"lab": {**LAB, "baseUrl": f"{oai.url}/v1\ud800"}}})
    if pi16_node() is not None:
        assert pi16_with_lab_model(
            agent, "process.stdout.write(new URL(`${model.baseUrl}/chat/completions`).pathname);"
        ) == PI16_SURROGATE_PATH
    settings = msgspec.structs.replace(load_settings(workspace, project=False),
                                       summary_model="lab/m")
    summarizer = choose_summarizer(settings)
    oai.script(chat_reply("## Goal"))
    try:
        await summarizer.summarize(SummaryRequest("history", [UserMessage(content="x",
                                                                         timestamp=1)]))
    finally:
        await close_clients(summarizer.provider)
    assert oai.requests[-1].path == PI16_SURROGATE_PATH


# What pi 1.6's URL says of the baseUrl "http://loc\ud800al:9/v1" (its host is "loc\ufffdal"
# to Node), for machines without it.
PI16_SURROGATE_HOST = "Invalid URL"


async def test_the_editors_anthropic_base_url_with_a_lone_surrogate_is_read_as_node_reads_it(
        fake: FakeAnthropic) -> None:
    """Making the provider ended in UnicodeEncodeError, as models.json's baseUrl did before
    f4ba6cd: the editor's is read as Node's URL reads it too (PI16_SURROGATE_PATH's U+FFFD)."""
    config, refused = read_config({"anthropicBaseUrl": f"{fake.url}/v1\ud800"})
    assert refused == []
    made = provider_factory(ModelRegistry(), lambda _: "k", config.anthropic_base_url)
    provider = made("anthropic")
    assert await _path_of_a_reply(provider, fake) == "/v1%EF%BF%BD/v1/messages"


async def _path_of_a_reply(provider: Any, fake: FakeAnthropic) -> str:
    """The path claude-sonnet-4-5's request went to through `provider`, its reply complete."""
    model = ModelRegistry().get("anthropic", "claude-sonnet-4-5")
    fake.script(fake_anthropic.text_reply("hello"))
    built = ReplyBuilder(model.api, model)
    try:
        request = ModelRequest(model, "", [UserMessage(content="x", timestamp=1)], [], "off")
        _ = [event async for event in provider.stream(request, built)]
    finally:
        await close_clients(provider)
    assert built.message().stop_reason == "stop"
    return fake.requests[-1].path


@pytest.mark.parametrize(("tail", "host"), [(b"\x80", b""), (b"", b"\xe2\x82")],
                         ids=["path", "host"])
async def test_an_anthropic_base_url_variable_that_is_not_utf_8_is_read_as_node_reads_it(
        fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch, tail: bytes, host: bytes) -> None:
    """ANTHROPIC_BASE_URL holding a byte that is not UTF-8 (os.environ's lone surrogate) ended
    in "internal error (UnicodeEncodeError ...)" for every turn: it is read as Node reads a
    variable (U+FFFD), so the request goes to its path (PI16_SURROGATE_PATH's %EF%BF%BD) and a
    host holding one is refused naming the variable, as Node shows it."""
    url = fake.url.encode() + b"/v1" + tail
    if host:
        url = b"http://loc" + host + b"al:9/v1"
    monkeypatch.setenv("ANTHROPIC_BASE_URL", os.fsdecode(url))  # as os.environ holds it
    made = provider_factory(ModelRegistry(), lambda _: "k")
    if host:
        with pytest.raises(BaseUrlError, match=re.escape(
                "ANTHROPIC_BASE_URL: Invalid IDNA hostname: 'loc\ufffdal', so no request can "
                "go there")):
            made("anthropic")
        return
    provider = made("anthropic")
    assert await _path_of_a_reply(provider, fake) == "/v1%EF%BF%BD/v1/messages"


def test_a_base_url_host_with_a_lone_surrogate_is_refused_naming_its_key_path(dirs) -> None:
    """Making the provider ended in "internal error (InvalidURL: Invalid IDNA hostname:
    'loc\ufffdal')" (`pi-lsp run`), naming no file; pi 1.6's URL refuses that host too."""
    agent, workspace = dirs
    write(agent / "models.json", {"providers": {"lab": {**LAB,
                                                        "baseUrl": "http://loc\ud800al:9/v1"}}})
    if pi16_node() is not None:
        assert pi16_with_lab_model(
            agent, "try { new URL(model.baseUrl); } catch (error) { "
            "process.stdout.write(error.message); }"
        ) == PI16_SURROGATE_HOST
    made = provider_factory(load_settings(workspace, project=False).registry(), lambda _: "k")
    with pytest.raises(BaseUrlError, match=re.escape(
            f"{agent / 'models.json'}: providers.lab.baseUrl: Invalid IDNA hostname: "
            "'loc\ufffdal', so no request can go there")):
        made("lab")


def test_a_settings_model_header_with_a_lone_surrogate_names_its_key_path(dirs) -> None:
    """settings.json's `models` (pi-lsp's own) were named by the model ("model lab/m:
    headers.X-Foo"); "headersWhere" written in the file is not taken for where."""
    from pi_lsp.providers.models_file import LoneSurrogateError, model_headers

    agent, workspace = dirs
    model = {"provider": "lab", "id": "m", "contextWindow": 1000, "maxTokens": 100,
             "price": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
             "headersWhere": "x", "headers": {"X-Foo": "v\ud800"}}
    write(agent / "settings.json", {"models": [model]})
    write(workspace / ".pi" / "settings.json", {"models": [{**model, "id": "other"}, model]})
    for project, written_in, index in ((False, agent / "settings.json", 0),
                                       (True, workspace / ".pi" / "settings.json", 1)):
        read = load_settings(workspace, project=project).registry().get("lab", "m")
        with pytest.raises(LoneSurrogateError, match=re.escape(
                f"{written_in}: models[{index}].headers.X-Foo holds a lone surrogate")):
            model_headers(read)


def test_a_model_override_header_with_a_lone_surrogate_names_its_key_path(dirs) -> None:
    """It was named by the model ("model anthropic/claude-haiku-4-5: headers.X-Foo"), not
    the file and key path the user has to fix."""
    from pi_lsp.providers.models_file import LoneSurrogateError, model_headers

    agent, workspace = dirs
    write(agent / "models.json", {"providers": {"anthropic": {"modelOverrides": {
        "claude-haiku-4-5": {"headers": {"X-Foo": "v\ud800"}}}}}})
    model = load_settings(workspace, project=False).registry().get("anthropic",
                                                                   "claude-haiku-4-5")
    with pytest.raises(LoneSurrogateError, match=re.escape(
            f"{agent / 'models.json'}: providers.anthropic.modelOverrides.claude-haiku-4-5."
            "headers.X-Foo holds a lone surrogate")):
        model_headers(model)


@pytest.mark.parametrize(("data", "expected"), [
    ("{not json", "cannot read models"),
    ([1, 2], "must be a JSON object"),
    ({"providers": {"ollama": {"baseUrl": "http://x/v1", "api": "openai-completions",
                               "models": [{"id": "m", "contextWindow": "big"}]}}},
     "providers.ollama.models[0].contextWindow"),
    ({"providers": {"ollama": {"api": "openai-completions", "models": [{"id": "m"}]}}},
     "providers.ollama.baseUrl is required"),
    ({"providers": {"ollama": {"baseUrl": "http://x/v1", "models": [{"id": "m"}]}}},
     "providers.ollama.api is required"),
    ({"providers": {"ollama": {"baseUrl": "http://x/v1", "api": "openai-completions",
                               "models": [{"name": "no id"}]}}},
     "providers.ollama.models[0]"),
    # "internal error (InvalidURL …)" from `run`, a -32603 traceback from pi.prepareTurn:
    ({"providers": {"ollama": {"baseUrl": "http://localhost::11434/v1", "api": "openai-completions",
                               "models": [{"id": "m"}]}}},
     "providers.ollama.baseUrl: 'http://localhost::11434/v1' is not a URL (Port could not"),
    ({"providers": {"anthropic": {"baseUrl": "http://[::1/v1"}}},
     "providers.anthropic.baseUrl: 'http://[::1/v1' is not a URL (Invalid IPv6 URL)"),
    ({"providers": {"anthropic": {"baseUrl": "http://999.1.1.1/v1"}}},
     "providers.anthropic.baseUrl: 'http://999.1.1.1/v1' is not a URL: 999.1.1.1 is no IPv4"),
    ({"providers": {"ollama": {"baseUrl": "localhost:11434/v1", "api": "openai-completions",
                               "models": [{"id": "m"}]}}},
     "must start with http:// or https://"),
    # pi 1.6: "providers.lab.authHeader: must be boolean"
    ({"providers": {"lab": {**LAB, "authHeader": "yes"}}},
     "providers.lab.authHeader: Expected `bool`, got `str`"),
    # pi 1.6: "providers.lab.models.0.compat.chatTemplateKwargs.a: must be string" (…)
    ({"providers": {"lab": {**LAB, "models": [{"id": "m", "compat": {
        "chatTemplateKwargs": {"a": {"$var": "nope"}}}}]}}},
     "providers.lab.models[0].compat.chatTemplateKwargs[...].$var: Invalid enum value 'nope'"),
    # pi 1.6: "providers.lab.compat.zaiToolStream: must be boolean"
    ({"providers": {"lab": {**LAB, "compat": {"zaiToolStream": "yes"}}}},
     "providers.lab.compat.zaiToolStream: Expected `bool | null`, got `str`"),
    # pi 1.6: "providers.lab.compat.vllmPriority: must be number"
    ({"providers": {"lab": {**LAB, "compat": {"vllmPriority": "high"}}}},
     "providers.lab.compat.vllmPriority: Expected `int | float | null`, got `str`"),
    # pi 1.6: "providers.lab.compat.supportsMidConvoToolAdditions: must be boolean"
    ({"providers": {"lab": {**LAB, "compat": {"supportsMidConvoToolAdditions": 1}}}},
     "providers.lab.compat.supportsMidConvoToolAdditions: Expected `bool | null`, got `int`"),
    # pi 1.6: "providers.lab.compat.supportsToolSearch: must be boolean"
    ({"providers": {"lab": {**LAB, "compat": {"supportsToolSearch": "yes"}}}},
     "providers.lab.compat.supportsToolSearch: Expected `bool | null`, got `str`"),
    # pi 1.6: "providers.lab.compat.vercelGatewayRouting.only: must be array"
    ({"providers": {"lab": {**LAB, "compat": {"vercelGatewayRouting": {"only": "bedrock"}}}}},
     "providers.lab.compat.vercelGatewayRouting.only: Expected `array | null`, got `str`"),
])
def test_a_bad_models_json_is_a_clear_error(dirs, data, expected) -> None:
    _agent, workspace = dirs
    path = write(workspace / ".pi" / "models.json", data)
    with pytest.raises(SettingsError) as info:
        load_settings(workspace, project=True)
    assert str(path) in str(info.value) and expected in str(info.value), str(info.value)


# OpenRouter models a models.json gives without api or baseUrl, and what pi 1.6's ModelRuntime
# fills in for each (stored for machines without it).
STORED_OPENROUTER_DEFAULTS = Path(__file__).with_name("fixtures") / "pi16-openrouter-defaults.json"
OPENROUTER_ENTRIES = {
    "neither": {"compat": {"openRouterRouting": {"zdr": True}}, "models": [
        {"id": "my/model"}, {"id": "anthropic/claude-sonnet-4.5"},
        {"id": "x/y", "api": "anthropic-messages"}, {"id": "x/z", "api": "openai-responses"},
        {"id": "x/c", "compat": {"supportsStore": False}}]},
    "the provider's api": {"api": "anthropic-messages", "models": [{"id": "my/model"}]},
    "the provider's baseUrl": {"baseUrl": "http://proxy.local/v1", "models": [
        {"id": "my/model"}, {"id": "anthropic/claude-sonnet-4.5"}]},
}
PI16_MODELS = """
const agent = %s;
const runtime = await pi.ModelRuntime.create({modelsPath: `${agent}/models.json`,
                                              authPath: `${agent}/auth.json`});
const found = {};
for (const model of runtime.getModels().filter((model) => model.provider === "openrouter"
                                               && %s.includes(model.id))) {
  found[model.id] = {api: model.api, baseUrl: model.baseUrl, compat: model.compat ?? {}};
}
process.stdout.write(JSON.stringify({error: runtime.getError() ?? null, found}));
"""


@pytest.mark.parametrize("case", OPENROUTER_ENTRIES)
def test_an_openrouter_model_takes_pi_16s_api_and_base_url(dirs, case: str) -> None:
    """pi 1.6 fills in a model of its built-in openrouter provider given no `api` or `baseUrl`
    from that provider's catalog: Chat Completions at https://openrouter.ai/api/v1, or, for an
    id it lists on Anthropic's API (or `api: anthropic-messages`), https://openrouter.ai/api;
    no headers, the compat the file gives. pi-lsp refused the file ("providers.openrouter.api is
    required for models"). pi 1.6's answers are stored (checked where installed)."""
    agent, workspace = dirs
    entry = OPENROUTER_ENTRIES[case]
    write(agent / "models.json", {"providers": {"openrouter": entry}})
    ids = [model["id"] for model in entry["models"]]
    pi = json.loads(STORED_OPENROUTER_DEFAULTS.read_text())[case]
    if pi16_node() is not None:
        assert json.loads(pi16_eval(PI16_MODELS % (json.dumps(str(agent)), json.dumps(ids)))) \
            == {"error": None, "found": pi}
    registry = load_settings(workspace, project=False).registry()
    ours = {model_id: registry.get("openrouter", model_id) for model_id in ids}
    assert {model_id: {"api": model.api, "baseUrl": model.base_url,
                       "compat": msgspec.to_builtins(model.compat)}
            for model_id, model in ours.items()} == pi
    assert all(not model.headers for model in ours.values())


def test_an_openrouter_model_takes_its_key_from_openrouter_api_key(
        dirs, monkeypatch: pytest.MonkeyPatch) -> None:
    """pi 1.6 reads OpenRouter's key from OPENROUTER_API_KEY (env-api-keys.js); pi-lsp loaded a
    models.json `openrouter` model with no apiKey and then found no key for it. The variable is
    one of those bash's environment leaves out, as the other keys are."""
    agent, workspace = dirs
    write(agent / "models.json", {"providers": {"openrouter": {"models": [{"id": "my/model"}]}}})
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-from-env")
    settings = load_settings(workspace, project=False)
    assert settings.api_key("openrouter") == "sk-or-from-env"
    assert "OPENROUTER_API_KEY" in settings.registry().key_variables()


def test_a_projects_openrouter_model_sent_elsewhere_gets_no_key_of_yours(dirs) -> None:
    """A project's OpenRouter model now loads without api or baseUrl; it keeps your key only
    where it goes to OpenRouter: one whose provider baseUrl the project changes gets none."""
    agent, workspace = dirs
    write(agent / "auth.json", {"openrouter": {"type": "api_key", "key": "sk-or-yours"}})
    for base_url, yours in ((None, True), ("https://elsewhere.example/v1", False)):
        write(workspace / ".pi" / "models.json", {"providers": {"openrouter": {
            **({"baseUrl": base_url} if base_url else {}), "models": [{"id": "my/model"}]}}})
        settings = load_settings(workspace, project=True)
        config = settings.registry().provider("openrouter")
        assert config is not None
        assert (config.base_url, config.user_key) == \
            (base_url or "https://openrouter.ai/api/v1", yours)
        made = provider_factory(settings.registry(), settings.api_key)
        if yours:
            assert made("openrouter").name == "openrouter"
        else:
            with pytest.raises(UnknownProviderError, match="your own API key is not sent"):
                made("openrouter")


async def test_an_openrouter_claude_goes_through_anthropics_api(
        dirs, fake: FakeAnthropic, oai: FakeOpenAI, monkeypatch) -> None:
    """pi 1.6 sends each OpenRouter model through its own API: a Claude it lists on
    Anthropic's to https://openrouter.ai/api, the others on Chat Completions to .../api/v1.
    pi-lsp made one client per provider, on the provider's API, so the Claude's request failed
    ("openrouter: api 'anthropic-messages' is not an OpenAI API"). OpenRouter's two URLs are
    the fakes here."""
    from pi_lsp.providers import registry as registry_module

    agent, workspace = dirs
    monkeypatch.setattr(registry_module, "OPENROUTER_URLS",
                        {ANTHROPIC_API: fake.url, CHAT_API: f"{oai.url}/v1"})
    write(agent / "models.json", {"providers": {"openrouter": {"apiKey": "sk-or", "models": [
        {"id": "my/model"}, {"id": "anthropic/claude-sonnet-4.5"}]}}})
    registry = load_settings(workspace, project=False).registry()
    rig = Rig(workspace, registry, ("openrouter", "my/model"), RetrySettings(enabled=False))
    try:
        oai.script(chat_reply("from chat"))
        await rig.harness.prompt("one")
        rig.harness.set_model("openrouter", "anthropic/claude-sonnet-4.5")
        fake.script(fake_anthropic.text_reply("from claude"))
        await rig.harness.prompt("two")
    finally:
        await rig.close()
    assert [message.get("errorMessage") for message in rig.messages()
            if message["role"] == "assistant"] == [None, None]
    assert oai.chat_requests()[-1]["model"] == "my/model"
    claude = fake.message_requests()[-1]
    assert claude["model"] == "anthropic/claude-sonnet-4.5"
    assert claude["messages"][-1]["content"][-1]["text"] == "two"


async def test_a_projects_model_on_another_api_never_takes_your_key_elsewhere(
        dirs, oai: FakeOpenAI, monkeypatch) -> None:
    """A provider's client for its models on the other SDK's API sends to the provider's URL,
    never a model's: a project's settings.json model may say any `baseUrl`, and your key for
    the provider would go there with it. (Your proxy for Anthropic's API: the provider's URL;
    without one there is no client of the other SDK, test_a_projects_model_on_another_api_never_
    sends_your_key_to_that_apis_host.)"""
    _agent, workspace = dirs
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-yours")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/proxy")
    write(workspace / ".pi" / "settings.json", {"models": [{
        "provider": "anthropic", "id": "x", "api": CHAT_API, "baseUrl": f"{oai.url}/v1",
        "contextWindow": 1000, "maxTokens": 100,
        "price": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}]})
    settings = load_settings(workspace, project=True)
    provider = provider_factory(settings.registry(), settings.api_key)("anthropic")
    try:
        assert isinstance(provider, ByApi)
        chat = provider.by_sdk["openai"]
        assert isinstance(chat, OpenAIProvider)
        assert not str(chat.clients[CHAT_API].base_url).startswith(oai.url)
        assert str(chat.clients[CHAT_API].base_url) == "http://127.0.0.1:9/proxy/"
    finally:
        await close_clients(provider)


# A models.json whose models have a baseUrl of their own, and where pi 1.6 sends each (stored
# for machines without it).
STORED_MODEL_URLS = Path(__file__).with_name("fixtures") / "pi16-model-base-urls.json"
MODEL_URLS = {"providers": {
    "lab": {"baseUrl": "http://provider.local/v1", "api": CHAT_API, "apiKey": "k", "models": [
        {"id": "own", "baseUrl": "http://model.local/v1"}, {"id": "theirs"},
        {"id": "claude", "api": ANTHROPIC_API, "baseUrl": "http://claude.local"}]},
    "openrouter": {"models": [{"id": "my/model", "baseUrl": "http://proxy.local/v1"},
                              {"id": "anthropic/claude-sonnet-4.5"}]},
}}
PI16_MODEL_URLS = """
const agent = %s;
const runtime = await pi.ModelRuntime.create({modelsPath: `${agent}/models.json`,
                                              authPath: `${agent}/auth.json`});
const found = {};
for (const model of runtime.getModels()) {
  const name = `${model.provider}/${model.id}`;
  if (%s.includes(name)) found[name] = {api: model.api, baseUrl: model.baseUrl};
}
process.stdout.write(JSON.stringify({error: runtime.getError() ?? null, found}));
"""


def test_a_models_own_base_url_is_where_pi_16_sends_it(dirs) -> None:
    """pi 1.6 reads a model's own `baseUrl` ("Overrides the provider baseUrl"), under any
    provider; pi-lsp ignored it, and gave the model its provider's. pi 1.6's answers are stored
    (checked where installed)."""
    agent, workspace = dirs
    write(agent / "models.json", MODEL_URLS)
    pi = json.loads(STORED_MODEL_URLS.read_text("utf-8"))
    ours = {f"{provider}/{model['id']}": (provider, model["id"])
            for provider, spec in MODEL_URLS["providers"].items() for model in spec["models"]}
    if pi16_node() is not None:
        assert json.loads(pi16_eval(PI16_MODEL_URLS % (
            json.dumps(str(agent)), json.dumps(list(ours))))) == pi
    registry = load_settings(workspace, project=False).registry()
    assert {name: {"api": (model := registry.get(*key)).api, "baseUrl": model.base_url}
            for name, key in ours.items()} == pi["found"]


async def test_a_models_requests_go_to_its_own_base_url(dirs, oai: FakeOpenAI) -> None:
    """A model with a baseUrl of its own is sent there, with its provider's key; its provider's
    other models to the provider's (pi-lsp sent every one to the provider's)."""
    agent, workspace = dirs
    write(agent / "models.json", {"providers": {"lab": {
        "baseUrl": f"{oai.url}/provider/v1", "api": CHAT_API, "apiKey": "sk-lab",
        "models": [{"id": "own", "baseUrl": f"{oai.url}/model/v1"}, {"id": "theirs"}]}}})
    registry = load_settings(workspace, project=False).registry()
    rig = Rig(workspace, registry, ("lab", "own"), RetrySettings(enabled=False))
    sent = []
    try:
        for model_id, text in (("own", "one"), ("theirs", "two")):
            rig.harness.set_model("lab", model_id)
            oai.script(chat_reply(f"from {model_id}"))  # a new script clears the requests
            await rig.harness.prompt(text)
            sent += [(r.path, r.body["model"], r.headers["authorization"])
                     for r in oai.requests]
    finally:
        await rig.close()
    assert [message.get("errorMessage") for message in rig.messages()
            if message["role"] == "assistant"] == [None, None]
    assert sent == [("/model/v1/chat/completions", "own", "Bearer sk-lab"),
                    ("/provider/v1/chat/completions", "theirs", "Bearer sk-lab")]


def test_a_projects_model_url_never_takes_your_key_or_headers(dirs, monkeypatch) -> None:
    """A model baseUrl a project's .pi/models.json sets counts as rerouting its provider, as
    the provider's own baseUrl does: none of your keys or headers go with it, only what the
    project file gives. A project's settings.json model's baseUrl sends nothing anywhere."""
    agent, workspace = dirs
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-yours")
    write(agent / "models.json", {"providers": {"lab": {
        "baseUrl": "http://provider.local/v1", "api": CHAT_API, "apiKey": "sk-yours",
        "headers": {"X-Secret": "yours"}, "models": [{"id": "m"}]}}})
    elsewhere = {"id": "x", "baseUrl": "https://elsewhere.example/v1"}
    for provider in ("lab", "anthropic"):
        write(workspace / ".pi" / "models.json",
              {"providers": {provider: {"models": [elsewhere]}}})
        settings = load_settings(workspace, project=True)
        assert settings.registry().get(provider, "x").own_url == elsewhere["baseUrl"]
        with pytest.raises(UnknownProviderError, match="your own API key is not sent"):
            provider_factory(settings.registry(), settings.api_key)(provider)
    write(workspace / ".pi" / "models.json", {"providers": {"lab": {
        "apiKey": "sk-project", "models": [elsewhere]}}})
    settings = load_settings(workspace, project=True)
    config = settings.registry().provider("lab")
    assert config is not None and (config.user_key, config.headers) == (False, {})
    write(workspace / ".pi" / "models.json", {})
    write(workspace / ".pi" / "settings.json", {"models": [{
        "provider": "lab", "id": "x", "api": CHAT_API, "baseUrl": elsewhere["baseUrl"],
        "ownUrl": elsewhere["baseUrl"], "contextWindow": 1000, "maxTokens": 100,
        "price": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}]})
    settings = load_settings(workspace, project=True)
    assert settings.registry().get("lab", "x").own_url is None


async def test_a_models_own_url_gets_a_client_made_with_the_others(dirs) -> None:
    """The clients for models' own URLs are made when the provider is (off the event loop),
    one per URL and SDK: two models at one URL share one."""
    agent, workspace = dirs
    shared = "http://model.local/v1"
    write(agent / "models.json", {"providers": {"lab": {
        "baseUrl": "http://provider.local/v1", "api": CHAT_API, "apiKey": "k", "models": [
            {"id": "a", "baseUrl": shared}, {"id": "b", "baseUrl": shared},
            {"id": "c", "api": ANTHROPIC_API, "baseUrl": "http://claude.local"}, {"id": "d"}]}}})
    settings = load_settings(workspace, project=False)
    provider = provider_factory(settings.registry(), settings.api_key)("lab")
    try:
        assert isinstance(provider, ByApi)
        assert set(provider.by_url) == {("openai", shared), ("anthropic", "http://claude.local")}
        chat = provider.by_url[("openai", shared)]
        assert isinstance(chat, OpenAIProvider)
        assert str(chat.clients[CHAT_API].base_url).startswith(shared)
    finally:
        await close_clients(provider)


def test_a_provider_whose_models_each_have_a_url_needs_none(dirs) -> None:
    """pi 1.6 reads a provider without a baseUrl whose models each have their own (checked
    where installed); pi-lsp refused the file ("providers.lab.baseUrl is required"). An id
    the file lacks goes where the first model does, never to the SDK's default host."""
    agent, workspace = dirs
    write(agent / "models.json", {"providers": {"lab": {"api": CHAT_API, "apiKey": "k",
                                                        "models": [
        {"id": "m", "baseUrl": "http://model.local/v1"}]}}})
    if pi16_node() is not None:
        assert json.loads(pi16_eval(PI16_MODEL_URLS % (json.dumps(str(agent)), '["lab/m"]'))) \
            == {"error": None, "found": {"lab/m": {"api": CHAT_API,
                                                   "baseUrl": "http://model.local/v1"}}}
    registry = load_settings(workspace, project=False).registry()
    assert registry.get("lab", "m").base_url == "http://model.local/v1"
    config = registry.provider("lab")
    assert config is not None and config.base_url == "http://model.local/v1"


def test_a_models_base_url_that_is_no_url_is_a_clear_error(dirs) -> None:
    """Checked as a provider's is, naming the model's key path."""
    agent, workspace = dirs
    path = write(agent / "models.json", {"providers": {"lab": {
        "baseUrl": "http://provider.local/v1", "api": CHAT_API,
        "models": [{"id": "m", "baseUrl": "localhost:1/v1"}]}}})
    with pytest.raises(SettingsError, match=re.escape(
            f"{path}: providers.lab.models[0].baseUrl: 'localhost:1/v1' is not a URL: it must")):
        load_settings(workspace, project=False)


@pytest.mark.parametrize("where", ["models.json", "settings.json"])
async def test_a_projects_model_on_another_api_never_sends_your_key_to_that_apis_host(
        dirs, oai: FakeOpenAI, monkeypatch, where: str) -> None:
    """The built-in anthropic provider has no base URL of its own (the Anthropic SDK's default),
    so its client for a project's model on Chat Completions was made without one: the OpenAI
    SDK's default, api.openai.com (OPENAI_BASE_URL: the fake here), got your Anthropic key. The
    other SDK's client goes where the provider's own goes, or is not made."""
    _agent, workspace = dirs
    monkeypatch.setenv("OPENAI_BASE_URL", f"{oai.url}/v1")
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    model = {"id": "x", "api": CHAT_API}
    if where == "models.json":
        write(workspace / ".pi" / "models.json", {"providers": {"anthropic": {"models": [model]}}})
    else:
        write(workspace / ".pi" / "settings.json", {"models": [{
            **model, "provider": "anthropic", "contextWindow": 1000, "maxTokens": 100,
            "price": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}]})
    registry = load_settings(workspace, project=True).registry()
    rig = Rig(workspace, registry, ("anthropic", "x"), RetrySettings(enabled=False),
              {"anthropic": "sk-ant-yours"})
    oai.requests.clear()
    try:
        await rig.harness.prompt("hello")
    finally:
        await rig.close()
    assert [request.headers.get("authorization") for request in oai.requests] == []


def test_an_anthropic_base_url_that_is_no_url_is_a_clear_error(dirs, monkeypatch) -> None:
    """The editor's anthropicBaseUrl is refused as a setting is; ANTHROPIC_BASE_URL fails the
    provider naming the variable (it failed each request with a bare "Invalid port")."""
    _agent, workspace = dirs
    config, refused = read_config({"anthropicBaseUrl": "http://localhost::1/"})
    assert config.anthropic_base_url is None
    assert refused == ["`anthropicBaseUrl`: 'http://localhost::1/' is not a URL (Port could not "
                       "be cast to integer value as ':1')"]
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://[::1/v1")
    made = provider_factory(load_settings(workspace, project=True).registry(), lambda _: "k")
    with pytest.raises(UnknownProviderError, match=r"^ANTHROPIC_BASE_URL: 'http://\[::1/v1' is "
                       r"not a URL \(Invalid IPv6 URL\)$"):
        made("anthropic")


def test_an_editor_api_key_with_a_lone_surrogate_is_refused_alone() -> None:
    """It was taken, and each request failed naming no setting ("Anthropic: the API key has
    the character U+D800"); now it is refused as a setting is, the rest taken."""
    config, refused = read_config({"anthropicApiKey": "sk-\ud800", "model": "lab/m"})
    assert (config.anthropic_api_key, config.model) == (None, "lab/m")
    assert refused == ["`anthropicApiKey`: a lone surrogate, which cannot be sent in an HTTP "
                       "header"]


def test_an_unknown_provider_names_the_models_json_read(dirs) -> None:
    """The error named ~/.pi/agent/models.json whatever PI_CODING_AGENT_DIR said, so a user
    who moved pi's folder was sent to a file that is never read."""
    agent, workspace = dirs
    made = provider_factory(load_settings(workspace, project=True).registry(), lambda _: None)
    with pytest.raises(UnknownProviderError) as raised:
        made("mistral")
    assert f"{agent / 'models.json'} or the project's" in str(raised.value)


def test_unknown_and_unusable_providers_are_clear_errors(dirs) -> None:
    agent, workspace = dirs
    write(agent / "models.json", {"providers": {
        "google": {"baseUrl": "http://g", "api": "google-generative-ai", "apiKey": "k",
                   "models": [{"id": "gemini"}]},
        "vault": {"baseUrl": "http://v/v1", "api": "openai-completions",
                  "apiKey": "!op read secret", "models": [{"id": "m"}]},
        "keyless": {"baseUrl": "http://k/v1", "api": "openai-completions",
                    "models": [{"id": "m"}]},
    }})
    settings = load_settings(workspace, project=True)
    made = provider_factory(settings.registry(), settings.api_key)
    with pytest.raises(UnknownProviderError, match=r"'mistral' is not configured.*models\.json"):
        made("mistral")
    with pytest.raises(UnknownProviderError, match="google-generative-ai"):
        made("google")
    # Your own file's command runs, as pi 1.6 runs it; `op` is not installed here.
    with pytest.raises(ValueError, match=r"providers\.vault\.apiKey: the command 'op read "
                                         r"secret' failed"):
        made("vault")
    with pytest.raises(MissingApiKeyError, match=r"providers\.keyless\.apiKey"):
        made("keyless")
    assert load_models(workspace, project=True)[1][0].source == str(agent / "models.json")


# -- a session across providers --------------------------------------------------------------


async def test_session_moves_from_anthropic_to_openai_compatible_and_back(
        tmp_path: Path, fake: FakeAnthropic, oai: FakeOpenAI, monkeypatch) -> None:
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    trust(tmp_path, tmp_path / "agent")  # its models.json is loaded
    write(tmp_path / ".pi" / "settings.json", {"defaultModel": "claude-sonnet-4-5"})
    write(tmp_path / ".pi" / "models.json", {"providers": {
        "ollama": {"baseUrl": f"{oai.url}/v1", "api": "openai-completions", "apiKey": "ollama",
                   "models": [{"id": MODEL, "reasoning": True}]},
        "lab": {"baseUrl": f"{oai.url}/v1", "api": "openai-responses", "apiKey": "LAB",
                "models": [{"id": "big"}]}}})
    hub = SessionHub([tmp_path], Config(anthropic_base_url=fake.url, anthropic_api_key="test"))
    path = hub.new_session(None, tmp_path)
    harness = hub.harness(path)
    (tmp_path / "a.txt").write_text("alpha\n")

    # 1. Anthropic thinks, calls a tool, answers.
    harness.set_thinking_level("low")
    fake.script(fake_anthropic.tool_reply([("toolu_01", "read", {"path": "a.txt"})],
                                          thinking=("Claude thinks.", "sig-claude")),
                fake_anthropic.text_reply("It says alpha."))
    await harness.prompt("read a.txt")
    # A reply from some other tool left a call without a result before the next prompt.
    harness.tree.append_message(AssistantMessage(
        content=[ToolCall(id="toolu_lost", name="bash", arguments={"command": "ls"})],
        api="anthropic-messages", provider="anthropic", model="claude-sonnet-4-5",
        usage=Usage(), stop_reason="toolUse", timestamp=5))

    # 2. The same session on a local model over Chat Completions.
    harness.set_model("ollama", MODEL)
    oai.script(chat_reply("Local thinks so too.", reasoning="Local reasoning."))
    await harness.prompt("agree?")
    [chat] = oai.chat_requests()
    assert chat["model"] == MODEL and chat["reasoning_effort"] == "low"
    assert [m["role"] for m in chat["messages"]] == [
        "system", "user", "assistant", "tool", "assistant", "assistant", "tool", "user"]
    claude_call = chat["messages"][2]
    assert claude_call["content"] is None  # pi 1.6: another model's thinking is not sent
    assert "Claude thinks." not in json.dumps(chat) and "sig-claude" not in json.dumps(chat)
    assert claude_call["tool_calls"][0]["id"] == "toolu_01"
    assert chat["messages"][3]["tool_call_id"] == "toolu_01"
    assert chat["messages"][6] == {"role": "tool", "content": "No result provided",
                                   "tool_call_id": "toolu_lost"}

    # 3. On a Responses model, which makes a call with a pi-style `call|item` id.
    harness.set_model("lab", "big")
    oai.script(responses_reply(calls=[("call_9", "bash", {"command": "echo hi"})]),
               responses_reply("Ran it."))
    await harness.prompt("run echo")
    first = oai.responses_requests()[0]["input"]
    assert "Local reasoning." not in json.dumps(first)  # the local model's, dropped
    assert not any(i.get("type") == "reasoning" for i in first)
    calls = [i for i in first if i.get("type") == "function_call"]
    assert [c["call_id"] for c in calls] == ["toolu_01", "toolu_lost"]
    assert all("id" not in c for c in calls)
    before_last_responses_call = harness.tree.path_ids(harness.tree.leaf_id)[-2]

    # 4. Back on Anthropic: other models' thinking is dropped, ids are Anthropic-safe, paired.
    harness.set_model("anthropic", "claude-sonnet-4-5")
    fake.script(fake_anthropic.text_reply("Back."))
    await harness.prompt("summarize")
    claude = fake.message_requests()[-1]
    # pi 1.6's setModel: "big" thinks at no level, so the switch to it recorded "off", and the
    # switch back keeps the level in force (none is configured): Claude no longer thinks.
    levels = [json.loads(line).get("thinkingLevel") for line in Path(path).read_bytes().split(
        b"\n") if b'"thinking_level_change"' in line]
    assert levels == ["medium", "low", "off"], levels
    assert claude["thinking"] == {"type": "disabled"}
    blocks = [b for m in claude["messages"] for b in m["content"] if isinstance(b, dict)]
    assert {"type": "thinking", "thinking": "Claude thinks.", "signature": "sig-claude"} in [
        {k: v for k, v in b.items() if k != "cache_control"} for b in blocks]  # its own, kept
    assert "Local reasoning." not in json.dumps(claude)
    uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
    results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
    assert uses == ["toolu_01", "toolu_lost", "call_9_fc_0"]
    assert results == uses
    assert all(set(i) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
               for i in uses)
    problems = check_session(SessionTree.open(str(path)))
    assert [p.message for p in problems] == ["tool call 'toolu_lost' (bash) has no result"]

    # The request preview at a leaf is exactly what that leaf's provider received; the
    # Anthropic SDK sends the preview's `betas` as the anthropic-beta header.
    claude_headers = [r.headers for r in fake.requests if r.path.startswith("/v1/messages")][-1]
    assert "anthropic-beta" not in claude_headers  # no thinking: no interleaved-thinking beta
    claude_sent = claude
    for leaf, sent in ((before_last_responses_call, oai.responses_requests()[-1]),
                       (harness.tree.path_ids(harness.tree.leaf_id)[-2], claude_sent)):
        preview = hub.preview(path, leaf, "request")
        assert preview.request == {k: v for k, v in sent.items() if k != "stream"}
    for provider in harness._provider_cache.values():
        await close_clients(provider)


def test_an_edited_models_json_reaches_open_sessions(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    trust(tmp_path, tmp_path / "agent")  # its models.json is loaded
    hub = SessionHub([tmp_path], Config())
    path = hub.new_session(None, tmp_path)
    before = hub.harness(path)
    assert hub.harness(path) is before  # nothing changed: the same harness
    assert before.registry.provider("ollama") is None
    write(tmp_path / ".pi" / "models.json", {"providers": {"ollama": {
        "baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions", "apiKey": "ollama",
        "models": [{"id": MODEL, "contextWindow": 4096}]}}})
    after = hub.harness(path)
    assert after is not before
    after.set_model("ollama", MODEL)
    preview = hub.preview(path, None, "request")
    assert preview.model == f"ollama/{MODEL}" and preview.context_window == 4096
    assert preview.request is not None and preview.request["messages"][0]["role"] == "system"
    # Edited again, with the session as it was: previews (kept per session version) follow it.
    assert hub.preview(path, None, "agent").thinking_levels == ["off"]
    write(tmp_path / ".pi" / "models.json", {"providers": {"ollama": {
        "baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions", "apiKey": "ollama",
        "models": [{"id": MODEL, "contextWindow": 8192, "reasoning": True,
                    "thinkingLevelMap": {"minimal": None, "xhigh": "xhigh"}}]}}})
    edited = (tmp_path / ".pi" / "models.json").stat()  # a time of its own, however quick
    os.utime(tmp_path / ".pi" / "models.json",
             ns=(edited.st_atime_ns, edited.st_mtime_ns + 1_000_000_000))
    again = hub.preview(path, None, "agent")
    assert again.context_window == 8192
    assert again.thinking_levels == ["off", "low", "medium", "high", "xhigh"]


async def test_abort_mid_stream_saves_the_partial_reply(make_rig, oai, tmp_path: Path) -> None:
    """The abort had to come within 2.8 s of word3 (60 words 0.05 s apart), or word59 was in:
    on a busy machine it could come later. The reply is now held after word3 until it has."""
    import asyncio

    rig = make_rig()
    reply = chat_reply(*(f"word{i} " for i in range(60)))
    reply.held_until, reply.held_after = tmp_path / "aborted", 5  # the role, word0 to word3
    oai.script(reply)
    task = asyncio.create_task(rig.harness.prompt("talk"))
    await until(lambda: "word3" in streamed(rig, TextDelta), "word3 to stream")
    rig.harness.abort()
    await asyncio.wait_for(task, CEILING_S)
    reply.held_until.touch()  # the rest goes to the connection the abort closed
    last = rig.messages()[-1]
    assert last["stopReason"] == "aborted"
    assert last["content"][0]["text"].startswith("word0 word1 word2 word3")
    assert "word59" not in last["content"][0]["text"]
    assert check_session(SessionTree.open(rig.path)) == []


def test_images_reach_both_apis_only_for_image_models() -> None:
    from pi_lsp.session.entries import ImageContent

    image = ImageContent(data="iVBORw0K", mime_type="image/png")
    prompt = UserMessage(content=[TextContent(text="see"), image, image], timestamp=1)
    for api, reader in ((CHAT_API, openai_chat), (RESPONSES_API, openai_responses)):
        seeing = ModelInfo("lab", "v", 8000, 1000, PRICE, api=api, input=["text", "image"])
        blind = ModelInfo("lab", "t", 8000, 1000, PRICE, api=api)
        with_images = json.dumps(reader.request_params(ModelRequest(seeing, "s", [prompt], [],
                                                                   "off")))
        without = reader.request_params(ModelRequest(blind, "s", [prompt], [], "off"))
        assert "data:image/png;base64,iVBORw0K" in with_images
        assert "iVBORw0K" not in json.dumps(without)
        # pi-ai's note in place of the run of two images, after the text.
        kind = "text" if api == CHAT_API else "input_text"
        sent = without["messages" if api == CHAT_API else "input"][-1]
        assert sent == {"role": "user", "content": [{"type": kind, "text": "see"},
                                                    {"type": kind, "text": USER_IMAGE_NOTE}]}


# A session with images in prompts and a tool result, held to the bodies pi 1.6 sends for it
# to a model without image input (tests/pi16_wire.mjs --text-only).
IMAGE = {"type": "image", "data": "iVBORw0KGgoAAAANSUhEUg==", "mimeType": "image/png"}
ZERO_USAGE = {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
              "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}
IMAGE_SESSION = [
    {"type": "session", "version": 3, "id": "0199a000-0000-7000-8000-000000000002",
     "timestamp": "2026-12-03T13:43:06.440Z", "cwd": "/tmp"},
    {"type": "message", "id": "b0000001", "parentId": None,
     "timestamp": "2026-12-03T13:43:06.441Z",
     "message": {"role": "user", "content": [
         {"type": "text", "text": "what is in this screenshot?"}, IMAGE], "timestamp": 1}},
    {"type": "message", "id": "b0000002", "parentId": "b0000001",
     "timestamp": "2026-12-03T13:43:07.441Z",
     "message": {"role": "assistant", "content": [
         {"type": "toolCall", "id": "call_abc", "name": "read", "arguments": {"path": "a.png"}}],
         "api": "openai-completions", "provider": "openai", "model": "gpt-5",
         "usage": ZERO_USAGE, "stopReason": "toolUse", "timestamp": 2}},
    {"type": "message", "id": "b0000003", "parentId": "b0000002",
     "timestamp": "2026-12-03T13:43:08.441Z",
     "message": {"role": "toolResult", "toolCallId": "call_abc", "toolName": "read",
                 "content": [{"type": "text", "text": "Read image file [image/png]"}, IMAGE],
                 "isError": False, "timestamp": 3}},
    {"type": "message", "id": "b0000004", "parentId": "b0000003",
     "timestamp": "2026-12-03T13:43:09.441Z",
     "message": {"role": "user", "content": [IMAGE], "timestamp": 4}},
]
QUESTION = "what is in this screenshot?"
TOOL_TEXT = f"Read image file [image/png]\n{TOOL_IMAGE_NOTE}"


def _text_only_body(tmp_path: Path, api: str, image_session: list[dict[str, Any]] | None = None
                    ) -> dict[str, Any]:
    from pi_lsp.context.layers import AgentSetup, build_layer
    from pi_lsp.providers.wire import request_params

    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in image_session or IMAGE_SESSION))
    tree = SessionTree.open(str(path))
    registry = ModelRegistry()
    setup = AgentSetup(registry, ("openai", "gpt-5"), "medium", {}, [])
    request = build_layer(tree, tree.leaf_id, "request", setup).request
    assert request is not None
    known = ("anthropic", "claude-sonnet-4-5") if api == ANTHROPIC_API else ("openai", "gpt-5")
    model = msgspec.structs.replace(registry.get(*known), api=api, input=["text"])
    return request_params(msgspec.structs.replace(request, model=model))


def _conversation(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` less the agent's own system prompt, if any."""
    return messages[1:] if messages and messages[0].get("role") in ("system", "developer") \
        else messages


def test_chat_completions_text_only_model_gets_notes_for_images(tmp_path: Path) -> None:
    assert _conversation(_text_only_body(tmp_path, CHAT_API)["messages"]) == [
        {"role": "user", "content": [{"type": "text", "text": QUESTION},
                                     {"type": "text", "text": USER_IMAGE_NOTE}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_abc", "type": "function",
             "function": {"name": "read", "arguments": "{\"path\":\"a.png\"}"}}]},
        {"role": "tool", "tool_call_id": "call_abc", "content": TOOL_TEXT},
        # An image-only prompt is still sent (before: left out, the request ended on the call).
        {"role": "user", "content": [{"type": "text", "text": USER_IMAGE_NOTE}]}]


def test_responses_text_only_model_gets_notes_for_images(tmp_path: Path) -> None:
    assert _conversation(_text_only_body(tmp_path, RESPONSES_API)["input"]) == [
        {"role": "user", "content": [{"type": "input_text", "text": QUESTION},
                                     {"type": "input_text", "text": USER_IMAGE_NOTE}]},
        {"type": "function_call", "call_id": "call_abc", "name": "read",
         "arguments": "{\"path\":\"a.png\"}"},
        {"type": "function_call_output", "call_id": "call_abc", "output": TOOL_TEXT},
        {"role": "user", "content": [{"type": "input_text", "text": USER_IMAGE_NOTE}]}]


def test_anthropic_text_only_model_gets_notes_for_images(tmp_path: Path) -> None:

    body = _text_only_body(tmp_path, ANTHROPIC_API)
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": QUESTION},
                                     {"type": "text", "text": USER_IMAGE_NOTE}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "call_abc", "name": "read", "input": {"path": "a.png"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_abc",
                                      "content": TOOL_TEXT, "is_error": False}]},
        {"role": "user", "content": [{"type": "text", "text": USER_IMAGE_NOTE,
                                      "cache_control": {"type": "ephemeral"}}]}]
    # pi-ai sizes max_tokens on the context as it stands, images and all (the same here).
    assert body["max_tokens"] == 64000


def test_a_failed_calls_image_for_a_text_only_anthropic_model_is_a_note_in_the_result(
        tmp_path: Path) -> None:
    """pi notes the images before it moves a failed call's images after the results, so
    there is nothing left to move."""

    session = json.loads(json.dumps(IMAGE_SESSION[:4]))
    session[3]["message"]["isError"] = True
    session[3]["message"]["content"] = [IMAGE, IMAGE]
    assert _text_only_body(tmp_path, ANTHROPIC_API, session)["messages"][-1] == {
        "role": "user", "content": [{
            "type": "tool_result", "tool_use_id": "call_abc", "is_error": True,
            "content": TOOL_IMAGE_NOTE, "cache_control": {"type": "ephemeral"}}]}


def test_images_become_one_note_a_run_as_pi_ai_notes_them() -> None:
    from pi_lsp.context.convert import downgrade_images
    from pi_lsp.session.entries import ImageContent

    image = ImageContent(data="iVBORw0K", mime_type="image/png")
    text = TextContent(text="t")
    messages: list[Any] = [
        UserMessage(content=[image, image, text, image], timestamp=1),
        UserMessage(content=[TextContent(text=USER_IMAGE_NOTE), image, text], timestamp=1),
        UserMessage(content="plain", timestamp=1),
        ToolResultMessage(tool_call_id="c", tool_name="read", content=[text, image, image],
                          is_error=False, timestamp=1),
        # A tool result's note is not a user message's: an image after it gets its own.
        ToolResultMessage(tool_call_id="c", tool_name="read",
                          content=[TextContent(text=USER_IMAGE_NOTE), image],
                          is_error=False, timestamp=1),
    ]
    user_note, tool_note = TextContent(text=USER_IMAGE_NOTE), TextContent(text=TOOL_IMAGE_NOTE)
    assert [m.content for m in downgrade_images(messages, ["text"])] == [
        [user_note, text, user_note], [user_note, text], "plain", [text, tool_note],
        [user_note, tool_note]]
    assert downgrade_images(messages, ["text", "image"]) == messages


def test_an_unknown_model_takes_images_as_its_providers_models_do() -> None:
    """pi 1.6 copies a model of the provider for an id its catalog lacks."""
    registry = ModelRegistry()
    assert registry.get("anthropic", "claude-next").input == ["text", "image"]
    assert registry.get("openai", "gpt-next").input == ["text", "image"]
    assert registry.get("nowhere", "m").input == ["text"]


async def test_a_models_json_summary_model_summarizes(dirs, oai) -> None:
    from pi_lsp.summarize.select import choose_summarizer
    from pi_lsp.summarize.summarizer import ModelSummarizer, SummaryRequest

    _agent, workspace = dirs
    write(workspace / ".pi" / "models.json", {"providers": {"ollama": {
        "baseUrl": f"{oai.url}/v1", "api": "openai-completions", "apiKey": "ollama",
        "models": [{"id": MODEL}]}}})
    write(workspace / ".pi" / "settings.json", {"summaryModel": f"ollama/{MODEL}"})
    summarizer = choose_summarizer(load_settings(workspace, project=True))
    assert isinstance(summarizer, ModelSummarizer)
    assert summarizer.model.api == CHAT_API
    oai.script(chat_reply("## Goal\nShip it."))
    summary = await summarizer.summarize(SummaryRequest(
        "history", [UserMessage(content="build the thing", timestamp=1)]))
    assert summary.text == "## Goal\nShip it." and summary.usage is not None
    [request] = oai.chat_requests()[-1:]
    # pi 1.6 asks for the model's output limit (its #9512)
    assert request["model"] == MODEL
    assert request["max_completion_tokens"] == summarizer.model.max_tokens
    assert "build the thing" in json.dumps(request["messages"])
    await close_clients(summarizer.provider)


async def test_a_summary_cut_mid_reply_is_asked_again_by_the_settings_retry(dirs, oai) -> None:
    """A summary stream cut mid-reply failed the compaction; pi 1.6 retries summaries by the
    settings' `retry` (here 1 ms waits), as it retries a turn's reply."""
    from pi_lsp.summarize.select import choose_summarizer
    from pi_lsp.summarize.summarizer import SummaryRequest

    _agent, workspace = dirs
    write(workspace / ".pi" / "models.json", {"providers": {"lab": {
        "baseUrl": f"{oai.url}/v1", "api": "openai-completions", "apiKey": "k",
        "models": [{"id": MODEL}]}}})
    write(workspace / ".pi" / "settings.json", {"summaryModel": f"lab/{MODEL}",
                                                "retry": {"baseDelayMs": 1}})
    summarizer = choose_summarizer(load_settings(workspace, project=True))
    oai.script(Reply([chunk({"role": "assistant", "content": ""}), chunk({"content": "## Go"})],
                     cut=True), chat_reply("## Goal\nShip it."))
    try:
        summary = await summarizer.summarize(SummaryRequest(
            "history", [UserMessage(content="build the thing", timestamp=1)]))
    finally:
        await close_clients(summarizer.provider)
    assert summary.text == "## Goal\nShip it."
    first, again = oai.chat_requests()
    assert again == first


def test_cli_compact_summarizes_at_the_sessions_thinking_level(dirs, oai) -> None:
    """`pi-lsp compact` asked a reasoning summary model for effort "none" where the session
    thinks at high; pi 1.6 summarizes at the session's level (createSummarizationOptions)."""
    agent, workspace = dirs
    write(agent / "models.json", {"providers": {"lab": {
        "baseUrl": f"{oai.url}/v1", "api": "openai-responses", "apiKey": "k",
        "models": [{"id": MODEL, "reasoning": True}]}}})
    write(agent / "settings.json", {"summaryModel": f"lab/{MODEL}"})
    sessions = workspace / ".pi" / "sessions"
    sessions.mkdir(parents=True)
    tree = SessionTree.create(str(sessions / "s.jsonl"), str(workspace))
    tree.append_model_change("lab", MODEL)
    tree.append_thinking_level_change("high")
    for n in range(3):
        tree.append_message(UserMessage(content=f"step {n} " + "word " * 400, timestamp=n))
        tree.append_message(AssistantMessage(
            content=[TextContent(text="done " * 400)], api=RESPONSES_API, provider="lab",
            model=MODEL, usage=Usage(), stop_reason="stop", timestamp=n))
    oai.script(responses_reply("## Goal\nShip it."))
    done = run_cli("compact", tree.path, "--keep-recent-tokens", "600", "--json", cwd=workspace)
    assert done.returncode == 0, done.stderr
    [body] = oai.responses_requests()
    assert body["reasoning"] == {"effort": "high", "summary": "auto"}


# -- the wire as pi 1.6 writes it (differences found against pi-ai 1.6's own providers) ------


def _reply(*content: Any) -> AssistantMessage:
    return AssistantMessage(content=list(content), api=RESPONSES_API, provider="openai",
                            model="gpt-5-mini", usage=Usage(), stop_reason="toolUse", timestamp=1)


def _bodies(messages: list[Any], level: str = "medium", prompt: str = "be brief"
            ) -> dict[str, dict[str, Any]]:
    """The Chat Completions and Responses bodies for one conversation with GPT-5 mini."""
    chat = msgspec.structs.replace(REGISTRY_GPT5, api=CHAT_API)
    return {api: reader.request_params(ModelRequest(model, prompt, messages, [], level))
            for api, reader, model in ((CHAT_API, openai_chat, chat),
                                       (RESPONSES_API, openai_responses, REGISTRY_GPT5))}


def test_tool_call_arguments_are_written_as_json_stringify_writes_them() -> None:
    call = ToolCall(id="call_1|fc_1", name="bash", arguments={"command": "ls é", "n": [1, 2]})
    bodies = _bodies([UserMessage(content="go", timestamp=1), _reply(call)])
    expected = '{"command":"ls é","n":[1,2]}'
    assert bodies[CHAT_API]["messages"][2]["tool_calls"][0]["function"]["arguments"] == expected
    assert bodies[RESPONSES_API]["input"][2]["arguments"] == expected


def test_an_empty_prompt_sends_no_instruction_message() -> None:
    for body in _bodies([UserMessage(content="hi", timestamp=1)], prompt="").values():
        items = body.get("messages", body.get("input"))
        assert [item.get("role") for item in items] == ["user"]


def test_made_up_item_ids_count_only_the_messages_sent() -> None:
    """pi numbers `msg_pi_N` by the messages that gave items: an empty user message gives none."""
    silent = UserMessage(content=[], timestamp=1)
    body = _bodies([silent, _reply(TextContent(text="hello"))])[RESPONSES_API]
    assert [item.get("id") for item in body["input"]] == [None, "msg_pi_0"]


def test_chat_sends_an_empty_user_text_and_no_text_made_only_of_a_lone_surrogate() -> None:
    call = ToolCall(id="call_1", name="bash", arguments={})
    body = _bodies([UserMessage(content="", timestamp=1),
                    _reply(TextContent(text="\ud800"), call)])[CHAT_API]
    assert body["messages"][1] == {"role": "user", "content": ""}
    assert body["messages"][2]["content"] is None


def test_thinking_off_asks_gpt_5_for_its_least_effort() -> None:
    """GPT-5 cannot stop reasoning (its thinkingLevelMap has no "off"): pi clamps off to minimal,
    where sending nothing would leave the server's default, medium."""
    bodies = _bodies([UserMessage(content="hi", timestamp=1)], level="off")
    assert bodies[CHAT_API]["reasoning_effort"] == "minimal"
    assert bodies[RESPONSES_API]["reasoning"] == {"effort": "minimal", "summary": "auto"}


def test_the_output_limit_is_the_models_fitted_to_the_window() -> None:
    """pi 1.6 asks for the model's whole output, less only where the input nears the window."""
    window, cap = REGISTRY_GPT5.context_window, REGISTRY_GPT5.max_tokens
    short = _bodies([UserMessage(content="hi", timestamp=1)])
    assert short[CHAT_API]["max_completion_tokens"] == cap
    assert short[RESPONSES_API]["max_output_tokens"] == cap
    # 3.5 characters a token, as pi-ai estimates the input; 4096 tokens of margin kept
    near_full = _bodies([UserMessage(content="x" * int((window - 10_000) * 3.5), timestamp=1)])
    assert near_full[RESPONSES_API]["max_output_tokens"] == \
        near_full[CHAT_API]["max_completion_tokens"] < 10_000


@pytest.mark.parametrize("number", [float("inf"), float("-inf")])
async def test_responses_an_event_holding_infinity_fails_the_reply(oai, number: float) -> None:
    """A text delta of a bare Infinity was read by Python's json and kept as text; pi's SDK
    (JSON.parse) refuses the event."""
    *start, done = message_item(0, "Hi")
    start[-1]["delta"] = number
    reply = await read_responses(oai, *start, done, completed())
    assert reply.stop_reason == "error" and reply.error_message == MALFORMED_EVENT


async def test_a_summary_on_gpt_sol_asks_for_the_explicit_cache_mode(
        dirs, oai, monkeypatch) -> None:
    """pi 1.6 summarizes with cacheRetention "none", which it sends to a model of the explicit
    prompt cache (gpt-6.2-sol, `supportsExplicitPromptCacheMode`) as `prompt_cache_options:
    {"mode": "explicit"}`, so nothing is cached for a one-off request; pi-lsp sent nothing."""
    from pi_lsp.summarize.select import choose_summarizer
    from pi_lsp.summarize.summarizer import SummaryRequest

    agent, workspace = dirs
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    write(agent / "models.json", {"providers": {"openai": {"baseUrl": f"{oai.url}/v1"}}})
    write(agent / "settings.json", {"summaryModel": "openai/gpt-6.2-sol"})
    summarizer = choose_summarizer(load_settings(workspace, project=False))
    oai.script(responses_reply("## Goal\nShip it."))
    try:
        await summarizer.summarize(SummaryRequest(
            "history", [UserMessage(content="build the thing", timestamp=1)]))
    finally:
        await close_clients(summarizer.provider)
    [body] = oai.responses_requests()
    assert body["prompt_cache_options"] == {"mode": "explicit"}
    assert "prompt_cache_key" not in body


async def test_reasoning_the_server_withheld_is_written_as_pi_16_writes_it(oai) -> None:
    """From GPT-6.2 on, a response tells which replayed reasoning items the server withheld
    (`input_transformations`); pi 1.6 writes each removal but the routine turn_boundary ones in
    the reply's `diagnostics` (appendReasoningRemovals). pi-lsp dropped them."""
    finished = completed()
    finished["response"]["input_transformations"] = [
        {"type": "reasoning", "id": "rs_1", "action": "removed", "reason": "prefix_mismatch",
         "extra": 1},
        {"type": "reasoning", "id": "rs_2", "action": "removed", "reason": "turn_boundary"},
        {"type": "message", "id": "msg_1", "action": "removed", "reason": "prefix_mismatch"},
        {"type": "reasoning", "action": "removed", "reason": "model_mismatch"}, "odd"]
    reply = await read_responses(oai, *message_item(0, "Hi"), finished)
    [diagnostic] = reply.diagnostics or []
    assert isinstance(diagnostic.pop("timestamp"), int)
    assert diagnostic == {"type": "openai_input_transformations", "details": {
        "transformations": [
            {"type": "reasoning", "id": "rs_1", "action": "removed", "reason": "prefix_mismatch"},
            {"type": "reasoning", "action": "removed", "reason": "model_mismatch"}]}}
    keys = list(json.loads(msgspec.json.encode(reply)))
    assert keys.index("diagnostics") == keys.index("responseId") + 1  # as pi writes them
    plain = await read_responses(oai, *message_item(0, "Hi"), completed())
    assert "diagnostics" not in json.loads(msgspec.json.encode(plain))
