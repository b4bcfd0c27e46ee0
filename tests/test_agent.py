"""The agent end to end: Harness + run_loop + tools + AnthropicProvider against a real-HTTP fake.

One fake Anthropic server runs for the module; each test scripts its own replies.
"""

from __future__ import annotations

import asyncio
import base64
import io
import itertools
import json
import os
import re
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from PIL import Image

from pi_lsp.agent import images, shell, tools
from pi_lsp.agent.approval import ApprovalRequest
from pi_lsp.agent.events import (
    AgentEvent,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    SavePoint,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnEnd,
)
from pi_lsp.agent.harness import BusyError, Harness, NotRunningError
from pi_lsp.agent.output import discard_file
from pi_lsp.agent.retry import RetrySettings
from pi_lsp.context.build import build_session_context
from pi_lsp.providers.anthropic import (
    THINKING_BUDGETS,
    AnthropicProvider,
    request_params,
    tool_id,
    wire_messages,
)
from pi_lsp.providers.base import MAX_ARGUMENT_NESTING, ModelRequest, ToolSpec, cost_of
from pi_lsp.providers.registry import ModelInfo, ModelRegistry, Price
from pi_lsp.providers.retry import ProviderRetry
from pi_lsp.session.check import check_session
from pi_lsp.session.entries import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    role_of,
)
from pi_lsp.session.tree import SessionTree
from tests.conftest import declare
from tests.fake_anthropic import (
    FakeAnthropic,
    Reply,
    error_reply,
    message_end,
    message_start,
    text_block,
    text_reply,
    thinking_block,
    tool_block,
    tool_reply,
)
from tests.test_tools import PI16_CALLS
from tests.waits import CEILING_S, gone, pid_in, until

SONNET = "claude-sonnet-4-5"
HAIKU = "claude-haiku-4-5"
CACHE = {"type": "ephemeral"}
# A 1x1 PNG: within every limit, it is sent as it is (one that does not decode is left out).
PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5"
       "ErkJggg==")


# -- fixtures and helpers ------------------------------------------------------------------



class Rig:
    """A harness on a fresh session in `root`, wired to the fake, recording every event."""

    def __init__(self, root: Path, url: str, max_retries: int,
                 agent_tools: tuple[tools.Tool, ...] = tools.ALL_TOOLS) -> None:
        self.root = root
        sessions = root / ".pi" / "sessions"
        sessions.mkdir(parents=True, exist_ok=True)
        self.path = str(sessions / "session.jsonl")
        self.tree = SessionTree.create(self.path, str(root))
        self.providers: list[AnthropicProvider] = []

        def make(_name: str) -> AnthropicProvider:
            provider = AnthropicProvider("test-key", base_url=url,
                                         retry=ProviderRetry(max_retries=max_retries))
            self.providers.append(provider)
            return provider

        # Agent-level retries are tested on their own (test_providers.py).
        self.harness = Harness(self.tree, root, make, retry=RetrySettings(enabled=False),
                               tools=agent_tools)
        self.declared = declare(self.harness)
        self.events: list[AgentEvent] = []
        self.harness.subscribe(self.events.append)

    def on(self, kind: type, action: Callable[[Any], None], once: bool = True) -> None:
        """Run `action(event)` on events of `kind` (the first one only, by default)."""
        fired = False

        def listener(event: AgentEvent) -> None:
            nonlocal fired
            if isinstance(event, kind) and not (once and fired):
                fired = True
                action(event)

        self.harness.subscribe(listener)

    def entries(self) -> list[dict[str, Any]]:
        """The entries after the session's declaration of the prompt and tools."""
        lines = Path(self.path).read_text().splitlines()
        assert json.loads(lines[0])["type"] == "session"
        assert json.loads(lines[1])["id"] == self.declared
        return [json.loads(line) for line in lines[2:]]

    def messages(self) -> list[dict[str, Any]]:
        return [e["message"] for e in self.entries() if e["type"] == "message"]

    def problems(self) -> list[Any]:
        return check_session(SessionTree.open(self.path))

    async def close(self) -> None:
        for provider in self.providers:
            await provider.client.close()


@pytest.fixture
async def make_rig(tmp_path: Path, fake: FakeAnthropic) -> AsyncIterator[Callable[..., Rig]]:
    rigs: list[Rig] = []

    def make(max_retries: int = 0,
             agent_tools: tuple[tools.Tool, ...] = tools.ALL_TOOLS) -> Rig:
        rig = Rig(tmp_path, fake.url, max_retries, agent_tools)
        rigs.append(rig)
        return rig

    yield make
    for rig in rigs:
        await rig.close()


async def test_the_event_loop_runs_while_the_first_provider_is_made(make_rig: Callable[..., Rig],
                                                                    fake: FakeAnthropic) -> None:
    """Making it imports its SDK (seconds on a busy machine): the editor's requests go on."""
    rig = make_rig()
    fake.script(text_reply("done"))
    make = rig.harness._providers
    entered, loop_ran = threading.Event(), threading.Event()
    ran_meanwhile: list[bool] = []

    def slow(name: str) -> AnthropicProvider:
        entered.set()
        ran_meanwhile.append(loop_ran.wait(CEILING_S))  # never, were this the loop's thread
        return make(name)

    rig.harness._providers = slow
    run = asyncio.create_task(rig.harness.prompt("hi"))
    await until(entered.is_set, "the provider being made")
    loop_ran.set()
    await run
    assert ran_meanwhile == [True]
    assert rig.messages()[-1]["content"][0]["text"] == "done"


async def test_an_abort_while_the_first_provider_is_made_sends_nothing(
        make_rig: Callable[..., Rig], fake: FakeAnthropic) -> None:
    """Nothing runs yet that abort() could cancel: the turn ends aborted without asking the
    model, as an abort right after the request would (found in review)."""
    rig = make_rig()
    fake.script(text_reply("a long answer nobody wants"))
    make = rig.harness._providers
    entered, go = threading.Event(), threading.Event()

    def slow(name: str) -> AnthropicProvider:
        entered.set()
        go.wait(CEILING_S)
        return make(name)

    rig.harness._providers = slow
    run = asyncio.create_task(rig.harness.prompt("hi"))
    await until(entered.is_set, "the provider being made")
    assert rig.harness.abort() is True
    go.set()
    produced = await asyncio.wait_for(run, CEILING_S)
    assert fake.message_requests() == []
    assert [role_of(m) for m in produced] == ["user", "assistant"]
    assert rig.entries()[-1]["message"]["stopReason"] == "aborted"
    assert not rig.harness.busy


def held_provider(rig: Rig) -> tuple[list[str], threading.Event]:
    """The rig's providers made only once `go` is set; the names asked for, as asked."""
    make = rig.harness._providers
    made: list[str] = []
    go = threading.Event()

    def slow(name: str) -> AnthropicProvider:
        made.append(name)
        go.wait(CEILING_S)
        return make(name)

    rig.harness._providers = slow
    return made, go


async def test_a_prompt_aborted_before_it_starts_is_written_without_its_provider(
        make_rig: Callable[..., Rig], fake: FakeAnthropic) -> None:
    """It waited for its SDK's import (seconds on a busy machine), so a `shutdown` just after
    a prompt's answer cut the turn off before the prompt was written (found in review)."""
    rig = make_rig()
    fake.script(text_reply("a long answer nobody wants"))
    made, go = held_provider(rig)
    run = asyncio.create_task(rig.harness.prompt("hi", aborted=True))
    try:
        await until(lambda: run.done() or made, "the prompt to end or make its provider")
        assert made == []
    finally:
        go.set()
    assert [role_of(m) for m in await run] == ["user", "assistant"]
    assert rig.entries()[-1]["message"]["stopReason"] == "aborted"
    assert fake.message_requests() == []


async def test_a_turn_started_while_prepare_makes_the_provider_uses_that_one(
        make_rig: Callable[..., Rig], fake: FakeAnthropic) -> None:
    """A chat opens (`prepare`) and the user sends at once: one provider is made, not two."""
    rig = make_rig()
    fake.script(text_reply("done"))
    made, go = held_provider(rig)
    prepared = asyncio.create_task(rig.harness.prepare())
    await until(lambda: made != [], "the provider being made")
    run = asyncio.create_task(rig.harness.prompt("hi"))
    go.set()
    model = await prepared
    await run
    assert (model.provider, model.id) == ("anthropic", SONNET)
    assert made == ["anthropic"]
    assert rig.messages()[-1]["content"][0]["text"] == "done"


async def test_a_turn_after_a_cancelled_prepare_uses_the_provider_it_was_making(
        make_rig: Callable[..., Rig], fake: FakeAnthropic) -> None:
    """The chat's request is cancelled while the SDK loads; the turn sent next waits for the
    same making, not a second one beside it (found in review)."""
    rig = make_rig()
    fake.script(text_reply("done"))
    made, go = held_provider(rig)
    prepared = asyncio.create_task(rig.harness.prepare())
    await until(lambda: made != [], "the provider being made")
    prepared.cancel()
    with pytest.raises(asyncio.CancelledError):
        await prepared
    run = asyncio.create_task(rig.harness.prompt("hi"))
    go.set()
    await run
    assert made == ["anthropic"]
    assert rig.messages()[-1]["content"][0]["text"] == "done"


def raw_tool_block(index: int, call_id: str, name: str, arguments_json: str
                   ) -> list[dict[str, Any]]:
    """A tool call whose arguments arrive as the model wrote them, valid JSON or not."""
    return [{"type": "content_block_start", "index": index,
             "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}}},
            {"type": "content_block_delta", "index": index,
             "delta": {"type": "input_json_delta", "partial_json": arguments_json}},
            {"type": "content_block_stop", "index": index}]


async def test_tool_arguments_are_read_and_refused_as_pi_reads_them(
        make_rig: Callable[..., Rig], fake: FakeAnthropic) -> None:
    """A regex's `\\d` or a raw line break in a string is mended, as pi 1.6 mends them (pi-lsp
    ran the tool with no arguments at all); arguments that stay unreadable are the call's
    error, kept on the call as pi keeps them (found in review)."""
    rig = make_rig()
    (rig.root / "a.txt").write_text("line one\n")
    fake.script(Reply([message_start(),
                       *raw_tool_block(0, "toolu_1", "bash", '{"command": "echo x\\d+"}'),
                       *raw_tool_block(1, "toolu_2", "read", '{"path": "a.txt'),
                       *message_end("tool_use")]),
                text_reply("done"))
    await rig.harness.prompt("count")
    calls = rig.messages()[1]["content"]
    assert calls[0]["arguments"] == {"command": "echo x\\d+"}
    assert "argumentsError" not in calls[0]
    assert calls[1]["arguments"] == {}
    assert calls[1]["argumentsError"].endswith('\n\nReceived arguments:\n{"path": "a.txt')
    results = [m for m in rig.messages() if m["role"] == "toolResult"]
    assert not results[0]["isError"]
    assert results[1]["isError"]
    assert results[1]["content"][0]["text"].startswith('Invalid arguments for tool "read": ')


async def test_tool_arguments_nested_too_deep_to_record_are_refused_and_the_reply_kept(
        make_rig: Callable[..., Rig], fake: FakeAnthropic) -> None:
    """Arguments nested past what the session reader reads back made the reply's write fail:
    the reply was lost and the write error escaped the run (found in review). Now they are the
    call's error, as unreadable arguments are; arguments just within the limit are kept."""
    rig = make_rig()
    fits = {"command": "ls", "x": nested(MAX_ARGUMENT_NESTING - 1)}
    deep = json.dumps({"command": "ls", "x": nested(MAX_ARGUMENT_NESTING)})
    fake.script(Reply([message_start(), *text_block(0, "Running it."),
                       *raw_tool_block(1, "toolu_1", "bash", json.dumps(fits)),
                       *raw_tool_block(2, "toolu_2", "bash", deep),
                       *message_end("tool_use")]),
                text_reply("done"))
    await rig.harness.prompt("hi")
    reply = rig.messages()[1]
    assert reply["content"][0]["text"] == "Running it."
    assert reply["content"][1]["arguments"] == fits
    assert reply["content"][2]["arguments"] == {}
    assert reply["content"][2]["argumentsError"] == (
        f"Tool arguments nest more than {MAX_ARGUMENT_NESTING} levels deep\n\n"
        f"Received arguments:\n{deep}")
    result = [m for m in rig.messages() if m["role"] == "toolResult"][1]
    assert result["content"][0]["text"].startswith('Invalid arguments for tool "bash": Tool '
                                                   'arguments nest more than')
    assert rig.messages()[-1]["content"][0]["text"] == "done"
    assert check_session(SessionTree.open(rig.path)) == []


def nested(levels: int) -> list[Any]:
    """An array nested `levels` deep."""
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


def kind(entry: dict[str, Any]) -> str:
    """`message:<role>` for messages, the entry type otherwise."""
    if entry["type"] == "message":
        return "message:" + entry["message"]["role"]
    return str(entry["type"])


def assert_chain(entries: list[dict[str, Any]], under: str) -> None:
    """Each entry hangs under the one written before it, the first under `under`."""
    assert entries[0]["parentId"] == under
    for previous, entry in itertools.pairwise(entries):
        assert entry["parentId"] == previous["id"], (kind(previous), kind(entry))


def outline(events: list[AgentEvent]) -> list[str]:
    """Event tags with the role / tool name; runs of message_update collapse to one."""
    out: list[str] = []
    for event in events:
        tag = str(event.__struct_config__.tag)
        if isinstance(event, ToolExecutionUpdate):
            continue
        if isinstance(event, MessageStart | MessageEnd):
            tag += ":" + role_of(event.message)
        elif isinstance(event, ToolExecutionStart | ToolExecutionEnd):
            tag += ":" + event.tool_name
        if tag == "message_update" and out and out[-1] == tag:
            continue
        out.append(tag)
    return out


def tool_results_of(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [block for message in request["messages"] if message["role"] == "user"
            and isinstance(message["content"], list)
            for block in message["content"] if block["type"] == "tool_result"]


def text_of(result: dict[str, Any]) -> str:
    """A tool result's text: pi sends text alone as one string, otherwise blocks."""
    if isinstance(result["content"], str):
        return result["content"]
    return "".join(block.get("text", "") for block in result["content"])


def cache_marks(value: Any) -> int:
    if isinstance(value, dict):
        return int("cache_control" in value) + sum(cache_marks(v) for v in value.values())
    if isinstance(value, list):
        return sum(cache_marks(v) for v in value)
    return 0


# -- 1. a full turn --------------------------------------------------------------------------


async def test_full_turn_events_entries_usage_and_wire(make_rig, fake) -> None:
    rig = make_rig()
    (rig.root / "a.txt").write_text("alpha\nbeta\n")
    fake.script(
        Reply([
            message_start(input_tokens=100, cache_read=1000, cache_write=2000),
            *thinking_block(0, "Let me think.", "sig-abc"),
            *text_block(1, "Looking."),
            *tool_block(2, "toolu_read", "read", {"path": "a.txt"}),
            *tool_block(3, "toolu_bash", "bash", {"command": "echo hi"}),
            *message_end("tool_use", output_tokens=20),
        ]),
        text_reply("All ", "done."),
    )
    rig.harness.set_thinking_level("high")
    produced = await rig.harness.prompt("look at a.txt")

    # events, in order
    assert outline(rig.events) == [
        "agent_start", "turn_start",
        "message_start:user", "message_end:user",
        "message_start:assistant", "message_update", "message_end:assistant",
        "tool_execution_start:read", "tool_execution_end:read",
        "message_start:toolResult", "message_end:toolResult",
        "tool_execution_start:bash", "tool_execution_end:bash",
        "message_start:toolResult", "message_end:toolResult",
        "turn_end", "save_point",
        "turn_start",
        "message_start:assistant", "message_update", "message_end:assistant",
        "turn_end", "save_point",
        "agent_end",
    ]
    assert [e.had_pending_mutations for e in rig.events if isinstance(e, SavePoint)] == [
        False, False]
    assert [role_of(m) for m in produced] == [
        "user", "assistant", "toolResult", "toolResult", "assistant"]

    # entries, in order, each under the previous one
    entries = rig.entries()
    assert [kind(e) for e in entries] == [
        "thinking_level_change", "message:user", "message:assistant",
        "message:toolResult", "message:toolResult", "message:assistant"]
    assert_chain(entries, rig.declared)
    first = entries[2]["message"]
    assert first["stopReason"] == "toolUse"
    assert first["content"][0] == {
        "type": "thinking", "thinking": "Let me think.", "thinkingSignature": "sig-abc"}
    assert first["content"][1] == {"type": "text", "text": "Looking."}
    assert first["content"][2:] == [
        {"type": "toolCall", "id": "toolu_read", "name": "read", "arguments": {"path": "a.txt"}},
        {"type": "toolCall", "id": "toolu_bash", "name": "bash",
         "arguments": {"command": "echo hi"}},
    ]
    read_result, bash_result = entries[3]["message"], entries[4]["message"]
    assert (read_result["toolCallId"], read_result["toolName"]) == ("toolu_read", "read")
    assert (bash_result["toolCallId"], bash_result["toolName"]) == ("toolu_bash", "bash")
    assert read_result["isError"] is False and bash_result["isError"] is False
    assert "alpha" in read_result["content"][0]["text"]
    assert "beta" in read_result["content"][0]["text"]
    assert bash_result["content"][0]["text"].strip() == "hi"
    last = entries[5]["message"]
    assert last["content"] == [{"type": "text", "text": "All done."}]
    assert last["stopReason"] == "stop"
    # each message_end names the entry its message was written as: an editor that read the
    # transcript mid-turn tells a message of no time by it (pi accepts one in a file)
    ended = [e.entry_id for e in rig.events if isinstance(e, MessageEnd)]
    assert ended == [e["id"] for e in entries if e["type"] == "message"]

    # usage and cost from the registry price ($3 / $15 per MTok; cache 0.30 / 3.75)
    usage = first["usage"]
    assert (usage["input"], usage["output"], usage["cacheRead"], usage["cacheWrite"]) == (
        100, 20, 1000, 2000)
    assert usage["totalTokens"] == 3120
    cost = usage["cost"]
    assert cost["input"] == pytest.approx(100 * 3 / 1e6)
    assert cost["output"] == pytest.approx(20 * 15 / 1e6)
    assert cost["cacheRead"] == pytest.approx(1000 * 0.3 / 1e6)
    assert cost["cacheWrite"] == pytest.approx(2000 * 3.75 / 1e6)
    assert cost["total"] == pytest.approx(0.0003 + 0.0003 + 0.0003 + 0.0075)
    assert last["usage"]["cost"]["total"] == pytest.approx(100 * 3 / 1e6 + 20 * 15 / 1e6)
    assert first["model"] == SONNET and first["provider"] == "anthropic"
    assert first["api"] == "anthropic-messages"

    # the wire
    requests = fake.message_requests()
    assert len(requests) == 2
    one, two = requests
    assert one["model"] == SONNET and one["stream"] is True
    assert isinstance(one["system"], list) and len(one["system"]) == 1
    assert one["system"][0]["type"] == "text"
    assert one["system"][0]["cache_control"] == CACHE
    assert str(rig.root) in one["system"][0]["text"]
    assert [t["name"] for t in one["tools"]] == ["read", "bash", "edit", "write"]
    assert one["tools"][-1]["cache_control"] == CACHE
    assert all("cache_control" not in t for t in one["tools"][:-1])
    # pi 1.6's high budget, on top of an answer room of the model's whole output cap
    assert one["thinking"] == {"type": "enabled", "budget_tokens": 16384, "display": "summarized"}
    assert one["max_tokens"] == 64000
    sent = [r for r in fake.requests if r.path.startswith("/v1/messages")]
    assert {r.headers.get("anthropic-beta") for r in sent} == {"interleaved-thinking-2025-05-14"}
    assert one["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "look at a.txt", "cache_control": CACHE}]}]

    assert two["thinking"] == {"type": "enabled", "budget_tokens": 16384, "display": "summarized"}
    assert len(two["messages"]) == 3
    user, assistant, results = two["messages"]
    assert user == {"role": "user", "content": [{"type": "text", "text": "look at a.txt"}]}
    assert assistant["role"] == "assistant"
    assert assistant["content"] == [
        {"type": "thinking", "thinking": "Let me think.", "signature": "sig-abc"},
        {"type": "text", "text": "Looking."},
        {"type": "tool_use", "id": "toolu_read", "name": "read", "input": {"path": "a.txt"}},
        {"type": "tool_use", "id": "toolu_bash", "name": "bash", "input": {"command": "echo hi"}},
    ]
    assert results["role"] == "user"
    assert [b["type"] for b in results["content"]] == ["tool_result", "tool_result"]
    assert [b["tool_use_id"] for b in results["content"]] == ["toolu_read", "toolu_bash"]
    assert [b["is_error"] for b in results["content"]] == [False, False]
    assert "alpha" in text_of(results["content"][0])
    assert text_of(results["content"][1]).strip() == "hi"
    # one breakpoint in the messages: the newest message's last block
    assert results["content"][-1]["cache_control"] == CACHE
    assert cache_marks(two["messages"]) == 1

    # the file reopens cleanly and builds the same context
    reopened = SessionTree.open(rig.path)
    assert check_session(reopened) == []
    assert reopened.leaf_id == entries[-1]["id"]
    context = build_session_context(reopened, reopened.leaf_id)
    assert len(context.messages) == 6  # the rig's declared prompt and tools first
    assert [json.loads(bytes(m))["role"] for m in context.messages] == [
        "system", "user", "assistant", "toolResult", "toolResult", "assistant"]
    assert context.thinking_level == "high"
    assert context.model is not None and context.model.model_id == SONNET


async def test_thinking_off_is_disabled_on_the_wire(make_rig, fake) -> None:
    rig = make_rig()
    fake.script(text_reply("ok"))
    rig.harness.set_thinking_level("off")
    await rig.harness.prompt("hi")
    [request] = fake.message_requests()
    assert request["thinking"] == {"type": "disabled"}
    assert rig.messages()[-1]["stopReason"] == "stop"


async def test_a_branch_that_sets_no_thinking_level_thinks_at_the_default(make_rig, fake) -> None:
    """pi 1.6 resumes such a session at settings.json's level, else "medium" (not "off",
    the level its context reports)."""
    rig = make_rig()
    fake.script(text_reply("ok"), text_reply("again"))
    await rig.harness.prompt("hi")
    rig.harness.default_thinking_level = "off"
    await rig.harness.prompt("and now?")
    first, second = fake.message_requests()
    assert first["thinking"]["type"] == "enabled"
    assert second["thinking"] == {"type": "disabled"}


async def test_a_prompt_records_the_level_a_change_without_one_leaves(make_rig, fake) -> None:
    """A thinking_level_change with no level thinks at the default, and pi 1.6 records that
    level when a prompt starts (what it finds recorded clamps to the model's lowest, "off"),
    before the prompt; once recorded, later prompts write none."""
    rig = make_rig()
    with open(rig.path, "a") as file:  # as another program writes it; the prompt reads it
        file.write(json.dumps({"type": "thinking_level_change", "id": "nolevel1",
                               "parentId": rig.declared,
                               "timestamp": "2026-12-01T10:00:00.000Z"}) + "\n")
    fake.script(text_reply("ok"), text_reply("again"))
    await rig.harness.prompt("hi")
    await rig.harness.prompt("and now?")
    assert [kind(e) for e in rig.entries()] == [
        "thinking_level_change", "thinking_level_change", "message:user", "message:assistant",
        "message:user", "message:assistant"]
    assert rig.entries()[1]["thinkingLevel"] == "medium"
    assert rig.entries()[2]["parentId"] == rig.entries()[1]["id"]


async def test_a_reply_keeps_the_level_it_thought_at(make_rig, fake) -> None:
    """A branch asking xhigh of Claude 4.5, which thinks at high instead: pi 1.6's reply says
    high (its agent holds the level clamped), where pi-lsp's said xhigh; nothing more is
    recorded, as xhigh clamped is the level in force."""
    rig = make_rig()
    rig.tree.append_thinking_level_change("xhigh")
    fake.script(text_reply("ok"))
    await rig.harness.prompt("hi")
    assert [kind(e) for e in rig.entries()] == [
        "thinking_level_change", "message:user", "message:assistant"]
    assert rig.messages()[-1]["thinkingLevel"] == "high"
    assert fake.message_requests()[-1]["thinking"]["budget_tokens"] == 16384


async def test_bash_tells_the_command_its_session_as_pi_does(
        make_rig, fake, monkeypatch: pytest.MonkeyPatch) -> None:
    """pi 1.6's bash sets PI_SESSION_ID, PI_SESSION_FILE, PI_PROVIDER, PI_MODEL and
    PI_REASONING_LEVEL and puts pi's bin folder first on PATH; pi-lsp's passed what it
    inherited (here a stale PI_MODEL)."""
    monkeypatch.setenv("PI_MODEL", "stale")
    rig = make_rig()
    names = "PI_SESSION_ID PI_SESSION_FILE PI_PROVIDER PI_MODEL PI_REASONING_LEVEL"
    command = f'for n in {names}; do printenv $n; done; echo "${{PATH%%:*}}"'
    fake.script(tool_reply([("t1", "bash", {"command": command})]), text_reply("ok"))
    rig.harness.set_thinking_level("high")
    await rig.harness.prompt("where am I?")
    [result] = [m for m in rig.messages() if m["role"] == "toolResult"]
    model = rig.harness.model()
    assert result["content"][0]["text"].splitlines() == [
        rig.tree.header.id, rig.path, model.provider, model.id, "high",
        os.path.join(os.environ["PI_CODING_AGENT_DIR"], "bin")]


# -- 2. provider errors ----------------------------------------------------------------------


async def test_rate_limit_is_retried_by_the_provider(make_rig, fake) -> None:
    rig = make_rig(max_retries=2)
    fake.script(error_reply(429, "rate_limit_error", "slow down"), text_reply("fine"))
    await rig.harness.prompt("hi")
    assert len(fake.message_requests()) == 2
    assert [kind(e) for e in rig.entries()] == ["message:user", "message:assistant"]
    last = rig.messages()[-1]
    assert last["stopReason"] == "stop"
    assert last["content"] == [{"type": "text", "text": "fine"}]
    assert "errorMessage" not in last


async def test_overloaded_twice_is_retried_by_the_provider(make_rig, fake) -> None:
    rig = make_rig(max_retries=2)
    fake.script(error_reply(529, "overloaded_error", "Overloaded"),
                error_reply(529, "overloaded_error", "Overloaded"), text_reply("made it"))
    await rig.harness.prompt("hi")
    assert len(fake.message_requests()) == 3
    last = rig.messages()[-1]
    assert last["stopReason"] == "stop"
    assert last["content"] == [{"type": "text", "text": "made it"}]


async def test_error_event_mid_stream_ends_the_run(make_rig, fake) -> None:
    rig = make_rig(max_retries=2)
    fake.script(Reply([message_start(), *text_block(0, "partial ", "answer")],
                      error_type="overloaded_error", error_message="Overloaded"),
                text_reply("never asked for"))
    produced = await rig.harness.prompt("hi")
    assert len(fake.message_requests()) == 1
    assert [role_of(m) for m in produced] == ["user", "assistant"]
    last = rig.entries()[-1]
    assert kind(last) == "message:assistant"
    assert last["message"]["stopReason"] == "error"
    assert "overloaded_error" in last["message"]["errorMessage"]
    assert last["message"]["content"] == [{"type": "text", "text": "partial answer"}]
    assert outline(rig.events)[-3:] == ["turn_end", "save_point", "agent_end"]
    assert rig.problems() == []


def failed_call_results(messages: list[dict[str, Any]]) -> list[str]:
    """The ids answered by a tool result whose call is not in an earlier reply that pi 1.6
    sends (it drops a failed or aborted reply with its calls): results no API accepts."""
    sent: set[str] = set()
    orphans = []
    for message in messages:
        if message["role"] == "assistant" and message["stopReason"] not in ("error", "aborted"):
            sent |= {b["id"] for b in message["content"] if b["type"] == "toolCall"}
        elif message["role"] == "toolResult" and message["toolCallId"] not in sent:
            orphans.append(message["toolCallId"])
    return orphans


async def test_error_event_after_partial_tool_call_leaves_a_consistent_file(
        make_rig, fake) -> None:
    """An errored reply that had started a tool call got a made-up result for the call, which
    pi 1.6 sent on every later prompt with no call before it (the reply dropped): 400."""
    rig = make_rig()
    partial = tool_block(1, "toolu_cut", "bash", {"command": "echo hi"})[:2]
    fake.script(Reply([message_start(), *text_block(0, "Running."), *partial],
                      error_type="overloaded_error", error_message="Overloaded"))
    await rig.harness.prompt("hi")
    assert [m["role"] for m in rig.messages()] == ["user", "assistant"]
    assistant = rig.messages()[1]
    assert assistant["stopReason"] == "error"
    assert any(b["type"] == "toolCall" for b in assistant["content"])
    assert rig.problems() == []


async def test_a_retried_reply_leaves_the_context_by_a_context_edit(make_rig, fake) -> None:
    """pi 1.6 writes a context_edit omitting each reply it retries; pi-lsp left it out only
    when converting, so pi 1.6 read the failed reply's call back into its request."""
    rig = make_rig()
    rig.harness.retry = RetrySettings(base_delay_ms=1)
    partial = tool_block(1, "toolu_cut", "bash", {"command": "echo hi"})[:2]
    fake.script(Reply([message_start(), *text_block(0, "Running."), *partial],
                      error_type="overloaded_error", error_message="Overloaded"),
                text_reply("fine"))
    await rig.harness.prompt("hi")
    entries = rig.entries()
    assert [kind(e) for e in entries] == [
        "message:user", "message:assistant", "context_edit", "message:assistant"]
    failed, edit = entries[1], entries[2]
    assert failed["message"]["stopReason"] == "error"
    assert (edit["targetId"], edit["replacement"]) == (failed["id"], None)
    # What a pi 1.6 reader makes of the file for the retry is what pi-lsp sent: the prompt.
    context = build_session_context(rig.tree, edit["id"]).messages
    assert [json.loads(bytes(m))["role"] for m in context] == ["system", "user"]
    assert [m["role"] for m in fake.message_requests()[1]["messages"]] == ["user"]
    assert rig.problems() == []


async def test_exhausted_retries_leave_no_result_for_the_last_replys_call(
        make_rig, fake) -> None:
    """Each retried reply's made-up result was omitted, but the last failure's stayed in the
    context: pi 1.6 sent it, with no call, on every later prompt of the branch."""
    rig = make_rig()
    rig.harness.retry = RetrySettings(base_delay_ms=1, max_retries=2)
    call = tool_block(1, "toolu_x", "bash", {"command": "echo hi"})
    fake.script(*[Reply([message_start(), *text_block(0, "Running."), *call],
                        error_type="overloaded_error", error_message="Overloaded")
                  for _ in range(3)])
    await rig.harness.prompt("hi")
    assert len(fake.message_requests()) == 3
    entries = rig.entries()
    assert [kind(e) for e in entries] == [
        "message:user", "message:assistant", "context_edit", "message:assistant",
        "context_edit", "message:assistant"]
    context = build_session_context(rig.tree, rig.tree.leaf_id).messages
    assert failed_call_results([json.loads(bytes(m)) for m in context]) == []
    assert failed_call_results(rig.messages()) == []
    assert rig.problems() == []


async def test_server_error_without_retries_is_a_readable_error_entry(make_rig, fake) -> None:
    rig = make_rig(max_retries=0)
    fake.script(error_reply(500, "api_error", "Internal server error"))
    produced = await rig.harness.prompt("hi")  # nothing escapes
    assert len(fake.message_requests()) == 1
    assert [role_of(m) for m in produced] == ["user", "assistant"]
    last = rig.messages()[-1]
    assert last["stopReason"] == "error"
    assert "500" in last["errorMessage"]
    assert "api_error" in last["errorMessage"]
    assert "Internal server error" in last["errorMessage"]
    assert rig.problems() == []
    assert not rig.harness.busy


# -- 3. failing tools ------------------------------------------------------------------------


async def test_failing_tools_become_error_results_and_the_loop_goes_on(make_rig, fake) -> None:
    rig = make_rig()
    (rig.root / "b.txt").write_text("hello\n")
    outside = rig.root.parent / f"outside-{rig.root.name}.txt"
    fake.script(
        tool_reply([
            ("t1", "edit", {"path": "b.txt", "oldText": "not there", "newText": "x"}),
            ("t2", "edit", {"path": "b.txt", "newText": "x"}),
            ("t3", "frobnicate", {"x": 1}),
            ("t4", "write", {"path": str(outside), "content": "nope"}),
        ]),
        text_reply("I see the errors."),
    )
    await rig.harness.prompt("break things")

    results = [m for m in rig.messages() if m["role"] == "toolResult"]
    assert [r["toolCallId"] for r in results] == ["t1", "t2", "t3", "t4"]
    assert all(r["isError"] is True for r in results)
    texts = [r["content"][0]["text"] for r in results]
    assert texts[0].startswith("Could not find the exact text in b.txt.")
    assert texts[1].startswith('Validation failed for tool "edit":\n  - edits: missing\n')
    assert texts[2] == "Tool frobnicate not found"  # pi 1.6's words
    assert "outside the workspace" in texts[3]
    assert not outside.exists()
    assert (rig.root / "b.txt").read_text() == "hello\n"

    requests = fake.message_requests()
    assert len(requests) == 2  # the loop went on to the next model call
    wire = tool_results_of(requests[1])
    assert [b["tool_use_id"] for b in wire] == ["t1", "t2", "t3", "t4"]
    assert all(b["is_error"] is True for b in wire)
    assert rig.messages()[-1]["content"] == [{"type": "text", "text": "I see the errors."}]
    assert rig.problems() == []


def not_executed(name: str) -> str:
    """pi 1.6's result for a call of a reply cut at the output limit (agent-loop.js)."""
    return (f'Tool call "{name}" was not executed: the response hit the output token limit, so '
            "its arguments may be truncated. Re-issue the tool call with complete arguments.")


async def test_calls_of_a_reply_cut_at_the_output_limit_are_not_run(make_rig, fake) -> None:
    """pi-lsp ran the calls of a reply stopped at max_tokens, whose arguments may be cut (a
    truncated file written, half a command run); pi 1.6 answers each as not executed and goes
    on to the next turn."""
    rig = make_rig()
    cut = Reply([message_start(),
                 *tool_block(0, "t1", "write", {"path": "w.txt", "content": "half a fi"}),
                 *tool_block(1, "t2", "bash", {"command": "touch ran"}),
                 *message_end("max_tokens", output_tokens=500)])
    fake.script(cut, text_reply("I will write it again."))
    await rig.harness.prompt("write w.txt")
    # Cut below the model's 64,000 yet not compacted and retried: the run went on past it, and
    # pi 1.6 checks only the reply that ends the run.

    assert not (rig.root / "w.txt").exists()
    assert not (rig.root / "ran").exists()
    entries = rig.entries()
    assert [kind(e) for e in entries] == [
        "message:user", "message:assistant", "message:toolResult", "message:toolResult",
        "message:assistant"]
    assert entries[1]["message"]["stopReason"] == "length"
    results = [e["message"] for e in entries[2:4]]
    assert [(r["toolCallId"], r["isError"], r["content"]) for r in results] == [
        ("t1", True, [{"type": "text", "text": not_executed("write")}]),
        ("t2", True, [{"type": "text", "text": not_executed("bash")}])]
    assert outline(rig.events)[outline(rig.events).index("message_end:assistant") + 1:][:9] == [
        "tool_execution_start:write", "tool_execution_end:write", "message_start:toolResult",
        "message_end:toolResult", "tool_execution_start:bash", "tool_execution_end:bash",
        "message_start:toolResult", "message_end:toolResult", "turn_end"]
    wire = tool_results_of(fake.message_requests()[1])
    assert [(b["tool_use_id"], text_of(b)) for b in wire] == [
        ("t1", not_executed("write")), ("t2", not_executed("bash"))]
    assert rig.problems() == []



async def test_a_run_aborted_after_a_reply_cut_at_the_output_limit_is_not_recovered(
        make_rig, fake) -> None:
    """Aborted while a cut reply's calls were answered, the prompt still left that reply and
    its result out of the context (two context_edits) for a retry it then did not make; pi 1.6
    recovers no aborted run (_handlePostAgentRun)."""
    rig = make_rig()
    fake.script(Reply([message_start(),
                       *tool_block(0, "t1", "write", {"path": "w.txt", "content": "half"}),
                       *message_end("max_tokens", output_tokens=500)]),
                text_reply("never asked for"))
    rig.on(ToolExecutionStart, lambda _event: rig.harness.abort())
    await rig.harness.prompt("write w.txt")
    assert [kind(e) for e in rig.entries()] == [
        "message:user", "message:assistant", "message:toolResult", "message:assistant"]
    assert rig.entries()[-1]["message"]["stopReason"] == "aborted"  # pi's unsent last turn
    assert len(fake.message_requests()) == 1
    assert rig.problems() == []

async def test_a_symlink_loop_and_a_failed_approval_still_answer_their_calls(
        make_rig, fake, caplog: pytest.LogCaptureFixture) -> None:
    """A committed symlink loop (RuntimeError from Path.resolve on Python 3.11) and an
    approver that fails left their calls without a result and failed the prompt."""
    rig = make_rig()
    (rig.root / "loop").symlink_to("loop")

    async def approve(request: ApprovalRequest) -> str | None:
        if request.call.name == "bash":
            raise RuntimeError("the editor went away")
        return None

    rig.harness.approve_call = approve
    fake.script(tool_reply([("t1", "read", {"path": "loop"}), ("t2", "bash", {"command": "true"})]),
                text_reply("I see."))
    await rig.harness.prompt("read loop, then run true")
    results = [m for m in rig.messages() if m["role"] == "toolResult"]
    assert [(r["toolCallId"], r["isError"]) for r in results] == [("t1", True), ("t2", True)]
    assert "symlink" in results[0]["content"][0]["text"]
    assert results[1]["content"][0]["text"] == "bash failed: RuntimeError: the editor went away"
    assert "the editor went away" in caplog.text
    assert rig.messages()[-1]["content"] == [{"type": "text", "text": "I see."}]
    assert rig.problems() == []


# -- 4. abort --------------------------------------------------------------------------------


async def test_abort_during_a_slow_stream(make_rig, fake, tmp_path: Path) -> None:
    rig = make_rig()
    # Held after "one " until the abort: 0.2 s between pieces let a busy machine end the
    # reply before the abort came.
    reply = Reply([message_start(), *text_block(0, "one ", "two ", "three ", "four "),
                   *message_end()])
    reply.held_until, reply.held_after = tmp_path / "aborted", 3  # start, block, "one "
    fake.script(reply)
    first_update = asyncio.Event()
    rig.on(MessageUpdate, lambda _e: first_update.set())
    task = asyncio.create_task(rig.harness.prompt("go slowly"))
    await asyncio.wait_for(first_update.wait(), CEILING_S)
    assert rig.harness.abort() is True
    reply.held_until.touch()  # the rest goes to the connection the abort closed
    produced = await asyncio.wait_for(task, CEILING_S)

    assert [role_of(m) for m in produced] == ["user", "assistant"]
    last = rig.entries()[-1]
    assert kind(last) == "message:assistant"
    assert last["message"]["stopReason"] == "aborted"
    assert last["message"]["errorMessage"]
    assert last["message"]["content"][0]["text"].startswith("one")
    assert "four" not in last["message"]["content"][0]["text"]
    assert len(fake.message_requests()) == 1
    assert rig.problems() == []
    assert not rig.harness.busy
    assert rig.harness.abort() is False  # nothing left to abort


def partial_tool_stream(release: Path) -> Reply:
    """Text, then a tool call whose JSON stops halfway until `release` exists (the abort lands
    in the middle; a guessed 0.15 s between events let a busy machine finish the call first)."""
    call = tool_block(1, "toolu_half", "bash", {"command": "echo should-not-run"})
    reply = Reply([message_start(), *text_block(0, "Running it."), *call,
                   *message_end("tool_use")])
    reply.held_until, reply.held_after = release, 6  # start, the text's 3, the call's start, half
    return reply


async def abort_on_tool_json(rig: Rig, release: Path) -> list[Any]:
    seen = asyncio.Event()

    def watch(event: MessageUpdate) -> None:
        if event.delta.__struct_config__.tag == "toolcall_delta":
            seen.set()

    rig.on(MessageUpdate, watch, once=False)
    task = asyncio.create_task(rig.harness.prompt("run it"))
    await asyncio.wait_for(seen.wait(), CEILING_S)
    rig.harness.abort()
    release.touch()
    return await asyncio.wait_for(task, CEILING_S)


async def test_abort_with_a_partial_tool_call_leaves_the_call_unanswered(make_rig, fake,
                                                                         tmp_path: Path) -> None:
    """The aborted reply's call got "Skipped: the run was aborted", which pi 1.6 sent on every
    later prompt with no call before it (it drops the aborted reply): Anthropic's 400."""
    rig = make_rig()
    fake.script(partial_tool_stream(tmp_path / "released"))
    await abort_on_tool_json(rig, tmp_path / "released")
    messages = rig.messages()
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assistant = messages[1]
    assert assistant["stopReason"] == "aborted"
    calls = [b for b in assistant["content"] if b["type"] == "toolCall"]
    assert [c["id"] for c in calls] == ["toolu_half"]
    context = build_session_context(rig.tree, rig.tree.leaf_id).messages
    assert failed_call_results([json.loads(bytes(m)) for m in context]) == []
    assert not (rig.root / "should-not-run").exists()
    assert rig.problems() == []


async def test_prompt_after_aborted_tool_call_sends_no_orphan_tool_result(
        make_rig, fake, tmp_path: Path) -> None:
    """The aborted reply is dropped from the context; its tool result must go with it.

    Anthropic rejects a tool_result whose tool_use is not in the previous assistant turn.
    """
    rig = make_rig()
    fake.script(partial_tool_stream(tmp_path / "released"))
    await abort_on_tool_json(rig, tmp_path / "released")
    fake.script(text_reply("ok"))
    await rig.harness.prompt("try something else")
    [request] = fake.message_requests()
    messages = request["messages"]
    for index, message in enumerate(messages):
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block["type"] != "tool_result":
                continue
            previous = messages[index - 1] if index else {"role": "none", "content": []}
            uses = [b["id"] for b in previous["content"] if b.get("type") == "tool_use"]
            assert previous["role"] == "assistant" and block["tool_use_id"] in uses, (
                f"orphan tool_result {block['tool_use_id']!r} in {messages}")
    assert messages[-1]["content"][-1]["text"] == "try something else"


async def test_abort_during_bash_kills_the_command(make_rig, fake) -> None:
    rig = make_rig()
    command = "echo $$ > sh.pid; sleep 30 & echo $! > sleep.pid; wait; echo never > never.txt"
    fake.script(tool_reply([("toolu_sleep", "bash", {"command": command}),
                            ("toolu_next", "read", {"path": "sh.pid"})]),
                text_reply("never asked for"))
    task = asyncio.create_task(rig.harness.prompt("sleep"))
    pids = [await pid_in(rig.root / "sh.pid"), await pid_in(rig.root / "sleep.pid")]
    assert not task.done()
    rig.harness.abort()
    await asyncio.wait_for(task, CEILING_S)

    results = [m for m in rig.messages() if m["role"] == "toolResult"]
    assert [r["toolCallId"] for r in results] == ["toolu_sleep", "toolu_next"]
    assert all(r["isError"] is True for r in results)
    # The command's words, its shell having run (the pid files), then pi's for a call not run.
    assert [r["content"] for r in results] == [[{"type": "text", "text": "Command aborted"}],
                                               [{"type": "text", "text": "Operation aborted"}]]
    assert len(fake.message_requests()) == 1  # no model call after an abort
    assert rig.problems() == []

    for pid in pids:
        await gone(pid, "a process of the aborted command")
    assert not (rig.root / "never.txt").exists()


async def test_an_aborted_bash_call_keeps_its_output(make_rig, fake) -> None:
    """An aborted call's result was "Tool execution was aborted", what it printed lost; pi 1.6
    records the output and "Command aborted"."""
    rig = make_rig()
    fake.script(tool_reply([("toolu_1", "bash", {"command": "echo before; sleep 30"})]),
                text_reply("never asked for"))
    rig.on(ToolExecutionUpdate, lambda _event: rig.harness.abort())  # once "before" is read
    await asyncio.wait_for(rig.harness.prompt("go"), CEILING_S)
    [result] = [m for m in rig.messages() if m["role"] == "toolResult"]
    assert result["isError"] is True
    assert result["content"] == [{"type": "text", "text": "before\n\n\nCommand aborted"}]
    assert result["details"] == {}  # pi's bash throws; its loop stores the error so


async def test_an_aborted_bash_call_keeps_its_full_output_file(make_rig, fake) -> None:
    """The result names the file, so it stays (it was deleted with the abort). Its details are
    pi 1.6's for a thrown error, `{}`: they held the truncation and the file's path."""
    rig = make_rig()
    fake.script(tool_reply([("toolu_1", "bash", {"command": "seq 1 3000; sleep 30"})]),
                text_reply("never asked for"))

    def abort_when_all_is_read(event: AgentEvent) -> None:
        if isinstance(event, ToolExecutionUpdate) and event.partial_result.endswith("\n3000"):
            rig.harness.abort()

    rig.harness.subscribe(abort_when_all_is_read)
    await asyncio.wait_for(rig.harness.prompt("go"), CEILING_S)
    [result] = [m for m in rig.messages() if m["role"] == "toolResult"]
    assert result["details"] == {}
    full = Path(re.findall(r"Full output: (\S+)\]", result["content"][0]["text"])[0])
    assert result["content"][0]["text"].endswith(
        f"\n3000\n\n[Showing lines 1001-3000 of 3000. Full output: {full}]\n\nCommand aborted")
    assert full.read_text() == "".join(f"{n}\n" for n in range(1, 3001))
    discard_file(str(full))


async def test_aborted_file_calls_say_operation_aborted(make_rig, fake) -> None:
    """A write aborted before it ran said "Tool execution was aborted" and the call after it
    "Skipped: the run was aborted"; pi 1.6 says "Operation aborted" for both."""
    rig = make_rig()
    asked = asyncio.Event()

    async def approve(_request: ApprovalRequest) -> str | None:
        asked.set()
        await asyncio.Event().wait()  # nobody answers: the abort ends the wait
        return None

    rig.harness.approve_call = approve
    fake.script(tool_reply([("t1", "write", {"path": "f.txt", "content": "x"}),
                            ("t2", "read", {"path": "f.txt"})]), text_reply("never asked for"))
    run = asyncio.create_task(rig.harness.prompt("go"))
    await asyncio.wait_for(asked.wait(), CEILING_S)
    assert rig.harness.abort() is True
    await asyncio.wait_for(run, CEILING_S)
    results = [m for m in rig.messages() if m["role"] == "toolResult"]
    assert [(r["toolCallId"], r["content"], r["isError"]) for r in results] == [
        (call, [{"type": "text", "text": "Operation aborted"}], True) for call in ("t1", "t2")]
    assert not (rig.root / "f.txt").exists()


def held_writes(monkeypatch: pytest.MonkeyPatch, failure: OSError | None = None
                ) -> tuple[threading.Event, threading.Event]:
    """The tools' file writes held until `go` is set (`writing` is set once one waits), then
    done, or failed with `failure`."""
    writing, go = threading.Event(), threading.Event()
    write = tools.write_regular

    def held(path: Path, data: bytes) -> None:
        writing.set()
        go.wait(CEILING_S)
        if failure is not None:
            raise failure
        write(path, data)

    monkeypatch.setattr(tools, "write_regular", held)
    return writing, go


@pytest.mark.parametrize(("name", "args", "answer"), [
    ("edit", {"path": "f.txt", "edits": [{"oldText": "one", "newText": "two"}]},
     "Successfully replaced 1 block(s) in f.txt."),
    ("write", {"path": "f.txt", "content": "two\n"}, "Successfully wrote to f.txt"),
])
async def test_an_abort_while_the_file_is_written_records_the_change(
        make_rig, fake, monkeypatch: pytest.MonkeyPatch, name: str, args: dict[str, Any],
        answer: str) -> None:
    """The write runs in a thread, which a cancel does not stop: the file changed and the
    session said "Tool execution was aborted". The write is let end and its result recorded."""
    rig = make_rig()
    (rig.root / "f.txt").write_text("one\n")
    fake.script(tool_reply([("toolu_1", name, args)]), text_reply("never asked for"))
    writing, go = held_writes(monkeypatch)
    run = asyncio.create_task(rig.harness.prompt("go"))
    await until(writing.is_set, "the write")
    assert rig.harness.abort() is True
    go.set()
    await asyncio.wait_for(run, CEILING_S)
    [result] = [m for m in rig.messages() if m["role"] == "toolResult"]
    assert (result["content"], result["isError"]) == ([{"type": "text", "text": answer}], False)
    assert (rig.root / "f.txt").read_text() == "two\n"
    assert len(fake.message_requests()) == 1  # the run still ends at the abort


async def test_a_second_abort_while_the_file_is_written_still_records_the_change(
        make_rig, fake, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second abort (Esc pressed again) cancelled the call's wait for the write, so the
    changed file's result was lost and the session said "Tool execution was aborted"."""
    rig = make_rig()
    (rig.root / "f.txt").write_text("one\n")
    fake.script(tool_reply([("toolu_1", "write", {"path": "f.txt", "content": "two\n"})]),
                text_reply("never asked for"))
    writing, go = held_writes(monkeypatch)
    wait = asyncio.wait
    waits: list[object] = []

    def seen_wait(*args: Any, **kwargs: Any) -> Any:
        waits.append(args)
        return wait(*args, **kwargs)

    monkeypatch.setattr(asyncio, "wait", seen_wait)
    run = asyncio.create_task(rig.harness.prompt("go"))
    await until(writing.is_set, "the write")
    assert rig.harness.abort() is True
    await until(lambda: waits, "the aborted call's wait for the write")
    assert rig.harness.abort() is True
    go.set()
    await asyncio.wait_for(run, CEILING_S)
    [result] = [m for m in rig.messages() if m["role"] == "toolResult"]
    assert (result["content"], result["isError"]) == (
        [{"type": "text", "text": "Successfully wrote to f.txt"}], False)
    assert (rig.root / "f.txt").read_text() == "two\n"


async def test_a_write_an_abort_stopped_waiting_for_fails_with_no_traceback(
        make_rig, fake, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write still under way when the aborted call stopped waiting for it had nobody to
    read its failure (an editor answering the edit late, with an error): asyncio logged
    "Task exception was never retrieved" with its traceback."""
    rig = make_rig()
    (rig.root / "f.txt").write_text("one\n")
    fake.script(tool_reply([("toolu_1", "write", {"path": "f.txt", "content": "two\n"})]),
                text_reply("never asked for"))
    writing, go = held_writes(monkeypatch, OSError("the disk is gone"))
    monkeypatch.setattr(tools, "ABORTED_WRITE_WAIT_S", 0.0)
    loop = asyncio.get_running_loop()
    unhandled: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: unhandled.append(context))
    try:
        run = asyncio.create_task(rig.harness.prompt("go"))
        await until(writing.is_set, "the write")
        assert rig.harness.abort() is True
        await asyncio.wait_for(run, CEILING_S)
        [write] = [t for t in asyncio.all_tasks() if t.get_coro().__name__ == "write_text"]
        go.set()
        await asyncio.wait([write], timeout=CEILING_S)
        assert write.done()
        del write  # as the server drops it: nobody holds it any more
    finally:
        loop.set_exception_handler(None)
    assert unhandled == []


async def test_a_cancel_of_the_aborted_run_still_writes_what_the_abort_writes(
        make_rig, fake, monkeypatch: pytest.MonkeyPatch) -> None:
    """A shutdown's grace that ran out while an aborted call still cleaned up (a write, the
    "after" snapshot) cancelled the run itself: that cancel went through, so the call was
    left with no result and the run with no aborted reply. They are written as after an
    abort."""
    rig = make_rig()
    (rig.root / "f.txt").write_text("one\n")
    fake.script(tool_reply([("toolu_1", "write", {"path": "f.txt", "content": "two\n"})]),
                text_reply("never asked for"))
    writing, go = held_writes(monkeypatch)
    run = asyncio.create_task(rig.harness.prompt("go"))
    await until(writing.is_set, "the write")
    assert rig.harness.abort() is True
    run.cancel()  # as the server's end does once its grace is over
    go.set()
    await asyncio.wait_for(run, CEILING_S)
    messages = rig.messages()
    assert [m["role"] for m in messages] == ["user", "assistant", "toolResult", "assistant"]
    assert messages[2]["content"] == [{"type": "text", "text": "Successfully wrote to f.txt"}]
    assert messages[-1]["stopReason"] == "aborted"


async def test_an_aborted_silent_bash_call_says_command_aborted(make_rig, fake) -> None:
    rig = make_rig()
    fake.script(tool_reply([("toolu_1", "bash", {"command": "echo $$ > sh.pid; sleep 30"})]),
                text_reply("never asked for"))
    task = asyncio.create_task(rig.harness.prompt("go"))
    pid = await pid_in(rig.root / "sh.pid")
    rig.harness.abort()
    await asyncio.wait_for(task, CEILING_S)
    [result] = [m for m in rig.messages() if m["role"] == "toolResult"]
    assert result["content"] == [{"type": "text", "text": "Command aborted"}]
    await gone(pid, "the aborted command")


def held_shell_start(monkeypatch: pytest.MonkeyPatch) -> tuple[asyncio.Event, asyncio.Event]:
    """A command's start held once its watcher was spawned (`spawned` is set then) until `go`
    is set: the moment a busy machine makes long, the shell running and the call not yet
    told that it started."""
    spawned, go = asyncio.Event(), asyncio.Event()
    create = asyncio.create_subprocess_exec

    async def held(*args: Any, **kwargs: Any) -> asyncio.subprocess.Process:
        process = await create(*args, **kwargs)
        if shell.WATCHER in args:
            spawned.set()
            await go.wait()
        return process

    monkeypatch.setattr(asyncio, "create_subprocess_exec", held)
    return spawned, go


async def test_an_abort_while_the_shell_starts_says_command_aborted(
        make_rig, fake, monkeypatch: pytest.MonkeyPatch) -> None:
    """An abort while the command's shell was being started (its shell already running: seen
    once under `-n 2` load) said "Operation aborted", pi 1.6's words for a call that never ran;
    pi 1.6's bash says "Command aborted" for an abort at any point once it has begun."""
    rig = make_rig()
    spawned, go = held_shell_start(monkeypatch)
    fake.script(tool_reply([("toolu_1", "bash", {"command": "echo $$ > sh.pid; sleep 30"})]),
                text_reply("never asked for"))
    task = asyncio.create_task(rig.harness.prompt("go"))
    await asyncio.wait_for(spawned.wait(), CEILING_S)
    pid = await pid_in(rig.root / "sh.pid")
    assert rig.harness.abort() is True
    go.set()
    await asyncio.wait_for(task, CEILING_S)
    [result] = [m for m in rig.messages() if m["role"] == "toolResult"]
    assert (result["content"], result["isError"]) == (
        [{"type": "text", "text": "Command aborted"}], True)
    await gone(pid, "the command aborted while it started")
    assert len(fake.message_requests()) == 1


async def test_an_abort_during_a_tool_call_ends_with_pis_aborted_turn(make_rig, fake) -> None:
    """pi 1.6 goes on to one more turn after an aborted tool batch, whose request is aborted
    before it is sent, so its file ends on an aborted reply; pi-lsp's ended on the tool result,
    which pi's next prompt reads differently (it sized the context from the reply's usage
    alone, leaving the tool results out of its compaction check)."""
    rig = make_rig()
    fake.script(tool_reply([("toolu_1", "bash", {"command": "echo $$ > sh.pid; sleep 30"})]),
                text_reply("never asked for"))
    task = asyncio.create_task(rig.harness.prompt("go"))
    await pid_in(rig.root / "sh.pid")
    rig.harness.abort()
    await asyncio.wait_for(task, CEILING_S)

    last = rig.messages()[-1]
    assert [m["role"] for m in rig.messages()] == ["user", "assistant", "toolResult", "assistant"]
    assert (last["content"], last["stopReason"]) == ([], "aborted")
    assert last["usage"]["totalTokens"] == 0
    assert outline(rig.events)[-8:] == [
        "turn_end", "save_point", "turn_start", "message_start:assistant",
        "message_end:assistant", "turn_end", "save_point", "agent_end"]
    assert len(fake.message_requests()) == 1
    assert rig.problems() == []

# -- 5. changes requested mid-turn ------------------------------------------------------------


async def test_model_change_mid_turn_waits_for_the_turn_end(make_rig, fake) -> None:
    rig = make_rig()
    fake.script(tool_reply([("toolu_1", "bash", {"command": "echo one"}),
                            ("toolu_2", "bash", {"command": "echo two"})]),
                text_reply("done"))
    at_turn_end: list[list[str]] = []
    at_save_point: list[list[str]] = []
    rig.on(ToolExecutionStart, lambda _e: rig.harness.set_model("anthropic", HAIKU))
    rig.on(TurnEnd, lambda _e: at_turn_end.append([kind(e) for e in rig.entries()]))
    rig.on(SavePoint, lambda _e: at_save_point.append([kind(e) for e in rig.entries()]))
    await rig.harness.prompt("two commands")

    assert "model_change" not in at_turn_end[0]
    assert at_save_point[0][-1] == "model_change"
    assert [e.had_pending_mutations for e in rig.events if isinstance(e, SavePoint)] == [
        True, False]
    entries = rig.entries()
    assert [kind(e) for e in entries] == [
        "message:user", "message:assistant", "message:toolResult", "message:toolResult",
        "model_change", "message:assistant"]
    assert_chain(entries, rig.declared)
    assert (entries[4]["provider"], entries[4]["modelId"]) == ("anthropic", HAIKU)
    assert entries[1]["message"]["model"] == SONNET
    assert entries[5]["message"]["model"] == HAIKU
    one, two = fake.message_requests()
    assert one["model"] == SONNET
    assert two["model"] == HAIKU
    assert len(tool_results_of(two)) == 2
    assert rig.problems() == []
    context = build_session_context(SessionTree.open(rig.path), entries[-1]["id"])
    assert context.model is not None and context.model.model_id == HAIKU


async def test_label_and_name_mid_turn_flush_at_turn_end_in_order(make_rig, fake) -> None:
    rig = make_rig()
    fake.script(tool_reply([("toolu_1", "bash", {"command": "echo one"})]), text_reply("done"))
    prompt_id: list[str] = []
    rig.on(MessageEnd, lambda _e: prompt_id.append(rig.tree.leaf_id))

    def mid_turn(_event: ToolExecutionStart) -> None:
        rig.harness.set_label(prompt_id[0], "start here")
        rig.harness.set_name("First name")
        rig.harness.set_name("Refactor the parser")

    labels_at_turn_end: list[dict[str, str]] = []
    rig.on(ToolExecutionStart, mid_turn)
    rig.on(TurnEnd, lambda _e: labels_at_turn_end.append(dict(rig.tree.labels)))
    await rig.harness.prompt("label me")

    assert labels_at_turn_end == [{}]
    entries = rig.entries()
    assert [kind(e) for e in entries] == [
        "message:user", "message:assistant", "message:toolResult",
        "label", "session_info", "session_info", "message:assistant"]
    assert_chain(entries, rig.declared)
    assert entries[3]["targetId"] == prompt_id[0] and entries[3]["label"] == "start here"
    assert [entries[4]["name"], entries[5]["name"]] == ["First name", "Refactor the parser"]
    reopened = SessionTree.open(rig.path)
    assert reopened.labels == {prompt_id[0]: "start here"}
    assert reopened.name == "Refactor the parser"
    assert check_session(reopened) == []
    assert len(fake.message_requests()[1]["messages"]) == 3  # markers add no messages


async def test_changes_while_idle_are_written_at_once(make_rig, fake) -> None:
    rig = make_rig()
    rig.harness.set_model("anthropic", HAIKU)
    rig.harness.set_name("Idle name")
    assert [kind(e) for e in rig.entries()] == ["model_change", "session_info"]
    fake.script(text_reply("hi"))
    await rig.harness.prompt("hello")
    assert fake.message_requests()[0]["model"] == HAIKU


def recorded(path: str, kind: str, field: str) -> list[Any]:
    """A field of every entry of one kind in the file, in order."""
    lines = Path(path).read_bytes().splitlines()[1:]
    return [entry[field] for entry in map(json.loads, lines) if entry["type"] == kind]


def test_levels_are_recorded_as_pi_records_them(tmp_path: Path) -> None:
    """pi 1.6's setThinkingLevel and setModel: a level is written clamped to the model, and
    only when it changes the one in force; a model switch takes the model's own level, else
    the default set, else keeps the level, clamped to the new model. (Before, every level was
    written as asked, and a switch kept the level unclamped.)"""
    tree = SessionTree.create(str(tmp_path / "s.jsonl"), cwd=str(tmp_path))
    own = {"openai/gpt-5": "low"}
    harness = Harness(tree, tmp_path, lambda _name: None,
                      level_for_model=lambda provider, model: own.get(f"{provider}/{model}"))
    harness.set_thinking_level("medium")  # the default, in force already: nothing
    harness.set_thinking_level("xhigh")  # claude-sonnet-4-5 goes no higher than high
    harness.set_thinking_level("high")
    harness.set_model("anthropic", "claude-opus-4-6")  # has high: kept, nothing written
    harness.set_model("openai", "gpt-5")  # its own level
    harness.set_thinking_level("off")  # gpt-5 always reasons: minimal
    harness.set_model("openai", "gpt-4.1")  # reasons at no level: off
    harness.set_model("anthropic", "claude-sonnet-4-5")  # off is a level Claude has: kept
    assert recorded(tree.path, "thinking_level_change", "thinkingLevel") == [
        "high", "low", "minimal", "off"]
    assert recorded(tree.path, "model_change", "modelId") == [
        "claude-opus-4-6", "gpt-5", "gpt-4.1", "claude-sonnet-4-5"]
    assert harness.thinking_level() == "off"


def test_a_switch_takes_the_default_set_over_the_level_in_force(tmp_path: Path) -> None:
    tree = SessionTree.create(str(tmp_path / "s.jsonl"), cwd=str(tmp_path))
    harness = Harness(tree, tmp_path, lambda _name: None, default_thinking_level="low",
                      level_for_model=lambda _provider, _model: "low")
    harness.set_thinking_level("high")
    harness.set_model("anthropic", "claude-haiku-4-5")
    assert recorded(tree.path, "thinking_level_change", "thinkingLevel") == ["high", "low"]


# -- 6. steering and follow-ups --------------------------------------------------------------


async def test_steer_and_follow_up_are_delivered_in_their_places(make_rig, fake) -> None:
    rig = make_rig()
    fake.script(tool_reply([("toolu_1", "bash", {"command": "echo a"}),
                            ("toolu_2", "bash", {"command": "echo a2"})]),
                text_reply("b checked"), text_reply("c done"))

    def during_tools(_event: ToolExecutionStart) -> None:
        rig.harness.steer("also check b")
        rig.harness.follow_up("and then c")

    rig.on(ToolExecutionStart, during_tools)
    await rig.harness.prompt("check a")

    requests = fake.message_requests()
    assert len(requests) == 3
    two = requests[1]["messages"]
    assert [m["role"] for m in two] == ["user", "assistant", "user", "user"]
    assert [b["tool_use_id"] for b in two[2]["content"]] == ["toolu_1", "toolu_2"]
    assert two[3]["content"][0]["text"] == "also check b"
    three = requests[2]["messages"]
    assert three[-1]["role"] == "user"
    assert three[-1]["content"][0]["text"] == "and then c"
    assert three[-2]["role"] == "assistant"
    assert three[-2]["content"][0]["text"] == "b checked"

    entries = rig.entries()
    assert [kind(e) for e in entries] == [
        "message:user", "message:assistant", "message:toolResult", "message:toolResult",
        "message:user", "message:assistant", "message:user", "message:assistant"]
    assert_chain(entries, rig.declared)
    assert entries[4]["message"]["content"][0]["text"] == "also check b"
    assert entries[6]["message"]["content"][0]["text"] == "and then c"
    assert entries[7]["message"]["content"] == [{"type": "text", "text": "c done"}]
    # each queued message opens a new turn after the previous one ended
    tool = ["tool_execution_start:bash", "tool_execution_end:bash",
            "message_start:toolResult", "message_end:toolResult"]
    reply = ["message_start:assistant", "message_update", "message_end:assistant"]
    delivered = ["turn_start", "message_start:user", "message_end:user", *reply,
                 "turn_end", "save_point"]
    assert outline(rig.events) == [
        "agent_start", "turn_start", "message_start:user", "message_end:user", *reply,
        *tool, *tool, "turn_end", "save_point", *delivered, *delivered, "agent_end"]
    assert rig.problems() == []


async def test_a_steer_sent_after_the_runs_last_check_for_messages_is_run(
        make_rig, fake, monkeypatch: pytest.MonkeyPatch) -> None:
    """Steered while the run waited for the editor's problems (after it last took the queues):
    the steer was answered as queued and then dropped as the run ended; pi 1.6 goes on with
    what is queued (_handlePostAgentRun), so does pi-lsp."""
    rig = make_rig()
    fake.script(text_reply("first answer"), text_reply("steered"))
    checks: list[None] = []

    async def feedback() -> list[Any]:
        if not checks:
            rig.harness.steer("LATE")
        checks.append(None)
        return []

    monkeypatch.setattr(rig.harness, "feedback", feedback)
    await rig.harness.prompt("first")

    requests = fake.message_requests()
    assert len(requests) == 2
    assert requests[1]["messages"][-1]["content"][0]["text"] == "LATE"
    assert [m["role"] for m in rig.messages()] == ["user", "assistant", "user", "assistant"]
    assert rig.problems() == []

async def test_steer_follow_up_idle_and_prompt_busy_raise(make_rig, fake, tmp_path: Path
                                                          ) -> None:
    rig = make_rig()
    with pytest.raises(NotRunningError):
        rig.harness.steer("x")
    with pytest.raises(NotRunningError):
        rig.harness.follow_up("x")
    # Held after "slow " until the second prompt was refused: 0.05 s was all that kept the
    # first turn running.
    reply = text_reply("slow ", "reply")
    reply.held_until, reply.held_after = tmp_path / "refused", 3  # start, block, "slow "
    fake.script(reply)
    updated = asyncio.Event()
    rig.on(MessageUpdate, lambda _e: updated.set())
    task = asyncio.create_task(rig.harness.prompt("first"))
    await asyncio.wait_for(updated.wait(), CEILING_S)
    with pytest.raises(BusyError):
        await rig.harness.prompt("second")
    reply.held_until.touch()
    await asyncio.wait_for(task, CEILING_S)
    texts = [m["content"][0]["text"] for m in rig.messages() if m["role"] == "user"]
    assert texts == ["first"]
    assert len(fake.message_requests()) == 1
    with pytest.raises(NotRunningError):
        rig.harness.steer("too late")


# -- 7. images -------------------------------------------------------------------------------


async def test_prompt_images_reach_the_wire_as_base64(make_rig, fake) -> None:
    rig = make_rig()
    fake.script(text_reply("a tiny image"))
    await rig.harness.prompt("what is this?", [ImageContent(data=PNG, mime_type="image/png")])
    [request] = fake.message_requests()
    content = request["messages"][0]["content"]
    assert content[0] == {"type": "text", "text": "what is this?"}
    assert content[1]["type"] == "image"
    assert content[1]["source"] == {"type": "base64", "media_type": "image/png", "data": PNG}
    stored = rig.messages()[0]["content"]
    assert stored[1] == {"type": "image", "data": PNG, "mimeType": "image/png"}


async def test_prompt_images_go_unscaled_when_settings_say_so(make_rig, fake) -> None:
    """`images.autoResize: false` was not honoured: a 3000x2000 image went as 2000x1333. pi 1.6
    sends it as it is, with no note."""
    rig = make_rig()
    rig.harness.auto_resize_images = False
    out = io.BytesIO()
    Image.new("RGB", (3000, 2000), (30, 60, 90)).save(out, "PNG")
    data = base64.b64encode(out.getvalue()).decode()
    fake.script(text_reply("a big image"))
    await rig.harness.prompt("what is this?", [ImageContent(data=data, mime_type="image/png")])
    [request] = fake.message_requests()
    text, image = request["messages"][0]["content"]
    assert text == {"type": "text", "text": "what is this?"}
    assert image["source"] == {"type": "base64", "media_type": "image/png", "data": data}


def padded_png(characters: int) -> str:
    """PNG's base64 made `characters` long by bytes after its end (an image sent unscaled is
    sent whole: only its header is read)."""
    data = base64.b64decode(PNG)
    return base64.b64encode(data + bytes(characters * 3 // 4 - len(data))).decode()


async def test_unscaled_images_past_an_entrys_size_are_left_out_with_a_note(
        make_rig, fake) -> None:
    """Up to 20 images of 20 MB each go unscaled with `images.autoResize: false`: together
    they passed the 64 MB an entry holds, the prompt could not be written and the turn failed.
    The ones past it are now left out with a note the model and the user see."""
    rig = make_rig()
    rig.harness.auto_resize_images = False
    largest = ImageContent(data=padded_png(images.MAX_UNRESIZED), mime_type="image/png")
    last = ImageContent(data=padded_png(8_000_000), mime_type="image/png")
    sent = [largest, largest, largest, last]  # 68 MB; an entry holds 64 MiB, 67.1 MB
    fake.script(text_reply("three images"))
    await rig.harness.prompt("what are these?", sent)
    [request] = fake.message_requests()
    text, *wired = request["messages"][0]["content"]
    assert text == {"type": "text", "text": f"what are these?\n\n{images.TOO_LARGE_TOGETHER}"}
    assert [image["source"]["data"] for image in wired] == [image.data for image in sent[:3]]
    stored = rig.messages()[0]["content"]
    assert stored[0]["text"] == text["text"] and len(stored) == 4
    assert rig.problems() == []


def held_images(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, threading.Event]:
    """Images processed only once `go` is set; `entered` once one is being processed."""
    process = images.process_image
    entered, go = threading.Event(), threading.Event()

    def held(file: Any, stated: str, **options: Any) -> images.SentImage:
        entered.set()
        go.wait(CEILING_S)
        return process(file, stated, **options)

    monkeypatch.setattr(images, "process_image", held)
    return entered, go


async def test_an_abort_while_the_prompts_images_are_processed_sends_nothing(
        make_rig, fake, monkeypatch: pytest.MonkeyPatch) -> None:
    """They were processed (a second or more) before the run began, the harness idle: abort()
    answered False and the model was asked anyway (found in review)."""
    rig = make_rig()
    fake.script(text_reply("an answer nobody wants"))
    entered, go = held_images(monkeypatch)
    run = asyncio.create_task(
        rig.harness.prompt("look", [ImageContent(data=PNG, mime_type="image/png")]))
    try:
        await until(entered.is_set, "the image being processed")
        assert rig.harness.abort() is True
    finally:
        go.set()
    produced = await asyncio.wait_for(run, CEILING_S)
    assert fake.message_requests() == []
    assert [role_of(m) for m in produced] == ["user", "assistant"]
    assert rig.messages()[0]["content"][1]["data"] == PNG
    assert rig.entries()[-1]["message"]["stopReason"] == "aborted"
    assert not rig.harness.busy and rig.problems() == []


async def test_prompt_image_that_is_not_base64_is_refused_before_anything_is_written(
        make_rig, fake) -> None:
    """Base64 that does not decode failed in the provider's request, after the prompt was
    written; it is refused first, naming the image."""
    rig, sent = make_rig(), len(fake.message_requests())
    bad = [ImageContent(data=PNG, mime_type="image/png"), ImageContent(data="a b!", mime_type="")]
    with pytest.raises(ValueError, match="image 2's data is not base64"):
        await rig.harness.prompt("what is this?", bad)
    assert rig.messages() == [] and len(fake.message_requests()) == sent

# -- 8. unit level ---------------------------------------------------------------------------


REGISTRY = ModelRegistry()


def request_for(level: str, model: ModelInfo | None = None, max_tokens: int | None = None,
                tools: list[ToolSpec] | None = None) -> ModelRequest:
    return ModelRequest(
        model=model or REGISTRY.get("anthropic", SONNET), system_prompt="sys",
        messages=[UserMessage(content="hi", timestamp=1)], tools=tools or [],
        thinking_level=level, max_tokens=max_tokens)


@pytest.mark.parametrize("level, budget", sorted(THINKING_BUDGETS.items()))
@pytest.mark.parametrize("max_tokens", [64_000, 32_000])
def test_request_params_thinking_budgets(level, budget, max_tokens) -> None:
    model = msgspec.structs.replace(REGISTRY.get("anthropic", SONNET), max_tokens=max_tokens)
    params = request_params(request_for(level, model))
    assert params["thinking"]["type"] == "enabled"
    assert params["thinking"]["budget_tokens"] == min(budget, params["max_tokens"] - 1)
    assert params["max_tokens"] > params["thinking"]["budget_tokens"]
    assert params["max_tokens"] <= model.max_tokens
    if budget < model.max_tokens:
        assert params["thinking"]["budget_tokens"] == budget


def test_request_params_expected_numbers() -> None:
    # pi 1.6's budgets and max_tokens (the model's cap: 64000 for Sonnet 4.5); Claude 4.5 has
    # no xhigh, so it thinks as high
    assert {level: request_params(request_for(level))["thinking"]["budget_tokens"]
            for level in (*THINKING_BUDGETS, "xhigh")} == {
        "minimal": 1024, "low": 2048, "medium": 8192, "high": 16384, "xhigh": 16384}
    assert request_params(request_for("medium"))["max_tokens"] == 64000
    assert request_params(request_for("xhigh"))["max_tokens"] == 64000
    # an explicit max_tokens gets the budget on top of it
    small = request_params(request_for("high", max_tokens=2000))
    assert small["max_tokens"] == 2000 + 16384
    assert small["thinking"]["budget_tokens"] == 16384


def test_request_params_disabled_thinking_and_tools() -> None:
    off = request_params(request_for("off"))
    assert off["thinking"] == {"type": "disabled"}
    assert off["max_tokens"] == 64000  # pi 1.6: the model's output cap
    assert "tools" not in off
    plain = ModelInfo("anthropic", "plain", 100_000, 8192, Price(1, 1, 0, 0), reasoning=False)
    # pi 1.6 says nothing about thinking to a model without it
    assert "thinking" not in request_params(request_for("high", plain))
    assert request_params(request_for("high", plain))["max_tokens"] == 8192
    specs = [ToolSpec("a", "first", {"type": "object"}), ToolSpec("b", "second", {})]
    tools = request_params(request_for("off", tools=specs))["tools"]
    # pi 1.6's object schema, whatever the parameters say (a schema without it is a 400)
    assert tools == [
        {"name": "a", "description": "first",
         "input_schema": {"type": "object", "properties": {}, "required": []}},
        {"name": "b", "description": "second",
         "input_schema": {"type": "object", "properties": {}, "required": []},
         "cache_control": CACHE}]


def assistant(blocks: list[Any], model: str = SONNET, provider: str = "anthropic"
              ) -> AssistantMessage:
    return AssistantMessage(content=blocks, api="anthropic-messages", provider=provider,
                            model=model, usage=Usage(), stop_reason="toolUse", timestamp=2)


def result(call_id: str, text: str, is_error: bool = False) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call_id, tool_name="bash",
                             content=[TextContent(text=text)], is_error=is_error, timestamp=3)


def test_wire_messages_merges_tool_results_and_normalises_ids() -> None:
    messages = [
        UserMessage(content="go", timestamp=1),
        assistant([ToolCall(id="call|1:x", name="bash", arguments={"command": "a"}),
                   ToolCall(id="call_2", name="bash", arguments={"command": "b"})]),
        result("call|1:x", "out a"),
        result("call_2", "bad b", is_error=True),
    ]
    wire = wire_messages(messages, SONNET)
    assert [m["role"] for m in wire] == ["user", "assistant", "user"]
    assert [b["id"] for b in wire[1]["content"]] == ["call_1_x", "call_2"]
    results = wire[2]["content"]
    assert [b["type"] for b in results] == ["tool_result", "tool_result"]
    assert [b["tool_use_id"] for b in results] == ["call_1_x", "call_2"]
    assert [b["is_error"] for b in results] == [False, True]
    assert results[-1]["cache_control"] == CACHE
    assert cache_marks(wire) == 1
    assert tool_id("a" * 80) == "a" * 64
    assert tool_id("") == "tool"
    assert tool_id("toolu_01-ABC") == "toolu_01-ABC"


def test_wire_messages_thinking_from_another_model_is_dropped() -> None:
    """pi 1.6: another model's thinking is not sent at all (as text it reads as the reply)."""
    thought = ThinkingContent(thinking="I reasoned", thinking_signature="sig-x")
    hidden = ThinkingContent(thinking="", thinking_signature="opaque", redacted=True)
    answer = TextContent(text="answer")
    messages = [UserMessage(content="q", timestamp=1),
                assistant([thought, hidden, answer], model="claude-opus-4-1"),
                UserMessage(content="again", timestamp=4)]
    wire = wire_messages(messages, SONNET)
    assert wire[1]["content"] == [{"type": "text", "text": "answer"}]
    other_provider = wire_messages(
        [UserMessage(content="q", timestamp=1), assistant([thought, answer], model=SONNET,
                                                          provider="bedrock")], SONNET)
    assert other_provider[1]["content"][0]["text"] == "answer"
    same = wire_messages(messages, "claude-opus-4-1")
    assert same[1]["content"][:2] == [
        {"type": "thinking", "thinking": "I reasoned", "signature": "sig-x"},
        {"type": "redacted_thinking", "data": "opaque"}]
    # a string prompt is turned into a block so it can carry the cache mark
    assert wire[-1]["content"] == [{"type": "text", "text": "again", "cache_control": CACHE}]


def test_cost_of_prices_cache_reads_and_writes() -> None:
    sonnet = REGISTRY.get("anthropic", SONNET)
    cost = cost_of(Usage(input=1_000_000, output=1_000_000, cache_read=1_000_000,
                         cache_write=1_000_000), sonnet)
    assert cost.input == pytest.approx(3)
    assert cost.output == pytest.approx(15)
    assert cost.cache_read == pytest.approx(0.30)
    assert cost.cache_write == pytest.approx(3.75)
    assert cost.total == pytest.approx(22.05)
    haiku = cost_of(Usage(cache_read=2_000_000, cache_write=400_000), REGISTRY.get(
        "anthropic", HAIKU))
    assert haiku.cache_read == pytest.approx(0.2)
    assert haiku.cache_write == pytest.approx(0.5)
    assert haiku.total == pytest.approx(0.7)
    zero = cost_of(Usage(), sonnet)
    assert zero.total == 0 and isinstance(zero.total, int)  # pi writes a zero cost as 0
    dated = REGISTRY.get("anthropic", "claude-haiku-4-5-20251001")
    assert dated.price == REGISTRY.get("anthropic", HAIKU).price



# pi 1.6's answers to calls run through its agent loop (tests/pi16_calls.mjs, checked against
# pi itself by test_tools.py where it is installed), with the toolResult message it writes
PI16_ANSWERS = json.loads((Path(__file__).with_name("fixtures") / "pi16-calls.json").read_text())


def written_result(rig: Rig, call_id: str) -> str:
    """The toolResult message of `call_id` as the session file holds it, its id "t1" and its
    time 0 as pi16_calls.mjs writes them, its folder {DIR}."""
    for line in Path(rig.path).read_text().splitlines():
        if f'"role":"toolResult","toolCallId":"{call_id}"' in line:
            message = line.split(',"message":', 1)[1][:-1]  # the entry's last key
            message = message.replace(f'"toolCallId":"{call_id}"', '"toolCallId":"t1"')
            # a call that ran is timed in whole ms (no fraction, no sign), 0 as in pi16_calls.mjs
            message = re.sub(r',"durationMs":\d+,"timestamp":', ',"durationMs":0,"timestamp":',
                             message)
            return re.sub(r'"timestamp":\d+}$', '"timestamp":0}', message).replace(
                str(rig.root), "{DIR}")
    raise AssertionError(f"no result for {call_id}")


def pi16_written(name: str) -> str:
    return str(PI16_ANSWERS[name]["message"])


async def test_failed_calls_are_written_as_pi_16_writes_them(make_rig, fake) -> None:
    """A failed call's result had no `details` where pi 1.6's agent loop writes `{}` (its
    createErrorToolResult): a tool that threw, an unknown tool, bad arguments, a refused call,
    one aborted, one of a reply cut at the output limit. A failed command keeps the tool's
    own details (none here), as in pi. Each call that ran (the thrown ones, the command, the
    read that succeeded) carries pi's `durationMs` before its timestamp; those answered
    without running (bad arguments too, which pi checks before the tool runs) carry none."""
    rig = make_rig()
    (rig.root / "a.txt").write_text("F\n")
    failing = ["loop read missing", "loop edit no match", "loop unknown tool",
               "loop bad arguments", "loop blocked", "loop exit code", "loop ok",
               "loop bad bash arguments"]

    async def approve(request: ApprovalRequest) -> str | None:
        refused = request.call.arguments.get("command") == "touch ran"
        return PI16_ANSWERS["loop blocked"]["text"] if refused else None

    rig.harness.approve_call = approve
    fake.script(tool_reply([(f"c{i}", call["tool"], call["args"]) for i, call in
                            enumerate(PI16_CALLS[name] for name in failing)]),
                text_reply("I see."))
    await rig.harness.prompt("fail")
    cut = PI16_CALLS["loop cut"]
    fake.script(Reply([message_start(), *tool_block(0, "cut", cut["tool"], cut["args"]),
                       *message_end("max_tokens", output_tokens=500)]), text_reply("Again."))
    await rig.harness.prompt("write")
    aborted = PI16_CALLS["loop aborted"]
    fake.script(tool_reply([("ab", aborted["tool"], aborted["args"])]), text_reply("never"))
    rig.on(ToolExecutionStart, lambda _event: rig.harness.abort())
    await rig.harness.prompt("read")
    written = [written_result(rig, f"c{i}") for i in range(len(failing))]
    written += [written_result(rig, "cut"), written_result(rig, "ab")]
    assert written == [pi16_written(name) for name in [*failing, "loop cut", "loop aborted"]]
    assert not (rig.root / "ran").exists()
    assert rig.problems() == []


async def test_a_call_of_a_tool_not_there_is_answered_without_asking(make_rig, fake) -> None:
    """A call of a tool the session does not have asked the user to approve it (a bash
    command shown for approval) before it was answered "Tool bash not found"; pi 1.6 answers
    it at once, before its beforeToolCall."""
    rig = make_rig(agent_tools=(tools.READ,))
    asked: list[ApprovalRequest] = []

    async def approve(request: ApprovalRequest) -> str | None:
        asked.append(request)
        return None

    rig.harness.approve_call = approve
    fake.script(tool_reply([("c0", "bash", {"command": "touch ran"})]), text_reply("I see."))
    await rig.harness.prompt("run")
    (result,) = [message for message in rig.messages() if message["role"] == "toolResult"]
    assert (result["content"], result["details"], asked) == (
        [{"type": "text", "text": "Tool bash not found"}], {}, [])
    assert "durationMs" not in result
    assert not (rig.root / "ran").exists()

async def test_a_command_with_bad_arguments_is_answered_without_asking(make_rig, fake) -> None:
    """A bash call whose arguments its schema refuses (a timeout of "soon") was shown to the
    user for approval, then failed; pi 1.6 checks the arguments before its beforeToolCall, so
    nobody is asked."""
    rig = make_rig()
    asked: list[ApprovalRequest] = []

    async def approve(request: ApprovalRequest) -> str | None:
        asked.append(request)
        return None

    rig.harness.approve_call = approve
    bad = PI16_CALLS["loop bad bash arguments"]
    fake.script(tool_reply([("c0", bad["tool"], bad["args"])]), text_reply("I see."))
    await rig.harness.prompt("run")
    assert (written_result(rig, "c0"), asked) == (pi16_written("loop bad bash arguments"), [])

async def test_pi_lsps_own_refusals_are_answered_unrun_and_pis_errors_after_asking(
        make_rig, fake) -> None:
    """A call pi-lsp refuses where pi 1.6 would run it (bidi controls, a secret, .git, outside
    the workspace, a timeout over a day) was written with a durationMs, as if it ran; pi
    answers a call stopped before its tool starts without one. A timeout of 0, which pi's
    schema lets through, is asked for first and fails as it runs, as in pi."""
    rig = make_rig()
    asked: list[str] = []

    async def approve(request: ApprovalRequest) -> str | None:
        asked.append(request.call.id)
        return None

    rig.harness.approve_call = approve
    calls = [("bidi", "bash", {"command": "echo \u202eabc"}),
             ("secret", "read", {"path": str(rig.root / ".ssh" / "id_rsa")}),
             ("git", "write", {"path": ".git/config", "content": "x"}),
             ("outside", "write", {"path": str(rig.root.parent / "zz.txt"), "content": "x"}),
             ("long", "bash", {"command": "echo hi", "timeout": 10**9}),
             ("zero", "bash", {"command": "echo hi", "timeout": 0})]
    fake.script(tool_reply(calls), text_reply("I see."))
    await rig.harness.prompt("run")
    results = {m["toolCallId"]: m for m in rig.messages() if m["role"] == "toolResult"}
    assert [(call_id, "durationMs" in results[call_id]) for call_id, _, _ in calls] == [
        ("bidi", False), ("secret", False), ("git", False), ("outside", False),
        ("long", False), ("zero", True)]
    assert all(results[call_id]["isError"] for call_id, _, _ in calls)
    assert asked == ["zero"]
    assert results["zero"]["content"][0]["text"] == \
        "Invalid timeout: must be a finite number of seconds"


async def test_a_calls_duration_spans_its_run_and_not_its_approval(make_rig, fake) -> None:
    """pi 1.6 times a call from its tool's start to its end (durationMs, whole ms): the
    approval before it is not counted. The model is never sent it (pi's providers are not)."""
    rig = make_rig()
    approved: list[float] = []

    async def approve(_request: ApprovalRequest) -> str | None:
        await asyncio.sleep(0.3)  # an approval that takes a while
        approved.append(time.monotonic())
        return None

    rig.harness.approve_call = approve
    ended: list[float] = []
    rig.on(ToolExecutionEnd, lambda _event: ended.append(time.monotonic()))
    fake.script(tool_reply([("c0", "bash", {"command": "sleep 0.2"})]), text_reply("done"))
    await rig.harness.prompt("wait")
    (result,) = [message for message in rig.messages() if message["role"] == "toolResult"]
    assert 200 <= result["durationMs"] <= (ended[0] - approved[0]) * 1000 + 1
    (_, answered) = fake.message_requests()
    assert "tool_result" in json.dumps(answered) and "durationMs" not in json.dumps(answered)
