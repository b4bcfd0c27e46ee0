"""Compaction and branch summaries: plans, model and extractive summaries, the harness, the CLI.

The model summarizer talks real HTTP to the fake Anthropic server; every write goes to a copy of
the example session (fork question e1afef94, dead-end branch A tip 2879d399, branch B tip
8fb6dff7 with the compaction a2b2d4fe).
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from pi_lsp.agent.events import (
    AgentEvent,
    CompactionEnd,
    CompactionStart,
    MessageEnd,
    MessageStart,
    SummaryRetryAttemptStart,
    SummaryRetryFinished,
    SummaryRetryScheduled,
)
from pi_lsp.agent.harness import BusyError, Harness
from pi_lsp.agent.loop import Aborted
from pi_lsp.agent.retry import RetrySettings
from pi_lsp.context.build import build_session_context
from pi_lsp.context.convert import convert_to_llm
from pi_lsp.providers.anthropic import AnthropicProvider
from pi_lsp.providers.base import ModelRequest, ProviderEvent, ReplyBuilder
from pi_lsp.providers.registry import ModelInfo, ModelRegistry, Price
from pi_lsp.session import appender
from pi_lsp.session.check import check_session
from pi_lsp.session.entries import (
    AssistantMessage,
    BranchSummaryEntry,
    CompactionEntry,
    Cost,
    ImageContent,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    encoder,
)
from pi_lsp.session.tree import SessionTree
from pi_lsp.summarize.branch import (
    BRANCH_SUMMARY_PREAMBLE,
    BranchOutcome,
    branch,
    branch_with_summary,
)
from pi_lsp.summarize.compaction import (
    CompactionPlan,
    CompactionSettings,
    NothingToCompactError,
    compact,
    plan_or_refusal,
    plan_summary,
    prepare_compaction,
    summarize_plan,
)
from pi_lsp.summarize.extractive import MERGED_ITEMS, ExtractiveSummarizer, extractive_summary
from pi_lsp.summarize.select import ChosenSummarizer
from pi_lsp.summarize.serialize import serialize_conversation
from pi_lsp.summarize.summarizer import (
    ModelSummarizer,
    Summarizer,
    Summary,
    SummaryError,
    SummaryRequest,
    combined,
    llm_messages,
)
from tests.conftest import EXAMPLE_WORKSPACE
from tests.fake_anthropic import (
    FakeAnthropic,
    Reply,
    error_reply,
    message_end,
    message_start,
    text_block,
    text_reply,
    tool_block,
)
from tests.test_agent import PNG, cache_marks, held_images
from tests.test_tree import msg, without, write_session
from tests.waits import CEILING_S, run_cli, until

FORK = "e1afef94"  # "OK, that makes sense. How should we fix the data layer?"
FORK_PARENT = "24652ae8"
TIP_A = "2879d399"
TIP_B = "8fb6dff7"
OLD_COMPACTION = "a2b2d4fe"
FORK_TEXT = "OK, that makes sense. How should we fix the data layer?"
FIRST_REQUEST = "GET /orders is really slow"
SPLIT_MARK = "**Turn Context (split turn):**"
HEADINGS = ["## Goal", "## Constraints & Preferences", "## Progress", "### Done",
            "### In Progress", "### Blocked", "## Key Decisions", "## Next Steps"]
HISTORY_HEADINGS = [*HEADINGS, "## Critical Context"]
BIG_BUDGET = 200_000 - 16_384

# Plans on the example, checked by test_plans_on_the_example before the others rely on them.
KEEP_A_WHOLE = 1400  # tip A: not split, kept from the fork question, 6 messages summarized
KEEP_A_SPLIT = 300  # tip A: a split turn that starts at the fork question
KEEP_B_REPEAT = 530  # tip B: not split, kept from be05c22a, after the earlier compaction


# -- fixtures and helpers ------------------------------------------------------------------



@pytest.fixture
def session(tmp_path: Path) -> Path:
    """A copy of the example session inside a workspace of its own."""
    source = next((EXAMPLE_WORKSPACE / ".pi" / "sessions").glob("*.jsonl"))
    sessions = tmp_path / "ws" / ".pi" / "sessions"
    sessions.mkdir(parents=True)
    return Path(shutil.copy(source, sessions / source.name))


@pytest.fixture
async def providers(fake: FakeAnthropic) -> AsyncIterator[Callable[[], AnthropicProvider]]:
    made: list[AnthropicProvider] = []

    def make(_name: str = "anthropic") -> AnthropicProvider:
        provider = AnthropicProvider("k", base_url=fake.url)
        made.append(provider)
        return provider

    yield make
    for provider in made:
        await provider.client.close()


@pytest.fixture
def model_summarizer(providers: Callable[[], AnthropicProvider]) -> ModelSummarizer:
    return ModelSummarizer(providers(), ModelRegistry().get("anthropic", "claude-haiku-4-5"))


def open_tree(path: Path) -> SessionTree:
    return SessionTree.open(str(path))


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()[1:]]


def plan_at(tree: SessionTree, leaf: str, keep: int) -> CompactionPlan:
    plan = prepare_compaction(tree.path_to(leaf), CompactionSettings(keep_recent_tokens=keep))
    assert plan is not None
    return plan


def user_text(body: dict[str, Any]) -> str:
    """The text of the one user message a summary request holds."""
    messages = body["messages"]
    assert len(messages) == 1 and messages[0]["role"] == "user"
    content = messages[0]["content"]
    if isinstance(content, str):
        return content
    return "".join(block["text"] for block in content if block["type"] == "text")


def system_text(body: dict[str, Any]) -> str:
    system = body.get("system", "")
    if isinstance(system, str):
        return system
    return "".join(block["text"] for block in system)


def conversation_of(text: str) -> str:
    assert text.startswith("<conversation>\n")
    return text[len("<conversation>\n"): text.index("\n</conversation>")]


def instructions_of(text: str) -> str:
    return text[text.index("</conversation>") + len("</conversation>"):]


def file_blocks(read: list[str], modified: list[str]) -> str:
    parts = []
    if read:
        parts.append("<read-files>\n" + "\n".join(read) + "\n</read-files>")
    if modified:
        parts.append("<modified-files>\n" + "\n".join(modified) + "\n</modified-files>")
    return "\n\n" + "\n\n".join(parts)


def context_bytes(tree: SessionTree, leaf: str | None) -> bytes:
    return encoder.encode(build_session_context(tree, leaf))


def message_raws(tree: SessionTree, ids: list[str]) -> list[bytes]:
    return [bytes(tree.record(i).env.message) for i in ids]


def message_ids_between(tree: SessionTree, first: str, leaf: str) -> list[str]:
    """Ids of the message entries on the path to `leaf`, from `first` on."""
    ids = [r.env.id for r in tree.path_to(leaf)]
    return [i for i in ids[ids.index(first):] if tree.record(i).env.type == "message"]


def assert_compaction_entry(path: Path, entry_id: str, parent: str, plan: CompactionPlan,
                            details: dict[str, Any]) -> CompactionEntry:
    entry = open_tree(path).entry(entry_id)
    assert isinstance(entry, CompactionEntry)
    assert entry.parent_id == parent
    assert entry.first_kept_entry_id == plan.first_kept_entry_id
    assert entry.tokens_before == plan.tokens_before
    assert entry.details == details
    assert entry.summary.endswith(
        file_blocks(plan.files.read_files, plan.files.modified_files))
    return entry


# -- the plans the tests rely on -----------------------------------------------------------


def test_plans_on_the_example(session: Path) -> None:
    tree = open_tree(session)
    assert tree.leaf_id == TIP_B

    whole = plan_at(tree, TIP_A, KEEP_A_WHOLE)
    assert (whole.first_kept_entry_id, whole.is_split_turn) == (FORK, False)
    assert whole.previous_summary is None
    assert len(whole.messages_to_summarize) == 6 and whole.turn_prefix_messages == []

    split = plan_at(tree, TIP_A, KEEP_A_SPLIT)
    assert split.is_split_turn and split.first_kept_entry_id != FORK
    assert split.messages_to_summarize and split.turn_prefix_messages
    assert isinstance(split.turn_prefix_messages[0], UserMessage)
    assert split.files.modified_files == ["app/db.py", "app/models.py"]

    repeat = plan_at(tree, TIP_B, KEEP_B_REPEAT)
    assert (repeat.first_kept_entry_id, repeat.is_split_turn) == ("be05c22a", False)
    old = tree.entry(OLD_COMPACTION)
    assert isinstance(old, CompactionEntry) and repeat.previous_summary == old.summary
    assert len(repeat.messages_to_summarize) == 4
    # The earlier compaction's file lists carry over.
    assert repeat.files.modified_files == ["app/orders.py"]
    assert "tests/test_api.py" in repeat.files.read_files


def test_a_refused_plan_says_what_leaves_nothing_to_summarize(session: Path) -> None:
    """Every refusal but two read "the whole context fits in keepRecentTokens", a path with no
    message at all too, and those two shared "the path is empty or already ends in a
    compaction": editors and the CLI now show these words, so each names its own case."""
    tree = open_tree(session)
    first = tree.path_to(TIP_B)[0].env.id  # the model_change that begins the session
    expected = {
        first: "the context has no messages",
        FORK_PARENT: "the context's 6 messages are within the kept window "
                     "(keepRecentTokens 20000)",
        TIP_B: "the context's 10 messages after the last compaction's summary are within the "
               "kept window (keepRecentTokens 20000)",
        OLD_COMPACTION: "the path already ends in a compaction",
    }
    for leaf, reason in expected.items():
        with pytest.raises(NothingToCompactError) as refused:
            plan_or_refusal(tree.path_to(leaf), CompactionSettings())
        assert str(refused.value) == f"nothing to compact: {reason}"
    with pytest.raises(NothingToCompactError, match=r"^nothing to compact: the path is empty$"):
        plan_or_refusal([], CompactionSettings())


def test_a_plan_refused_for_an_id_less_kept_entry_says_so(tmp_path: Path) -> None:
    """A cut onto an entry with no id (which no compaction can name) was refused as "the whole
    context fits in keepRecentTokens (100)", for three messages of 400 tokens or so."""
    tree = write_session(tmp_path / "s.jsonl", [
        msg("a", None, "x " * 400), msg("b", "a", "y " * 400),
        without("id", msg("c", "b", "z " * 400))])
    with pytest.raises(NothingToCompactError) as refused:
        plan_or_refusal(tree.path_to(None), CompactionSettings(keep_recent_tokens=100))
    assert str(refused.value) == \
        "nothing to compact: the first entry to keep (line 4) has no id for the compaction to name"


def test_a_plan_refused_as_no_earlier_cut_does_not_claim_the_context_fits(tmp_path: Path
                                                                          ) -> None:
    """A first message of 200 tokens or so and keepRecentTokens 100 read "the context's 2
    messages are within the kept window": over the budget, the only cut is the first message."""
    tree = write_session(tmp_path / "s.jsonl", [msg("a", None, "x " * 400), msg("b", "a")])
    path, settings = tree.path_to("b"), CompactionSettings(keep_recent_tokens=100)
    with pytest.raises(NothingToCompactError) as refused:
        plan_or_refusal(path, settings)
    assert str(refused.value) == ("nothing to compact: the newest keepRecentTokens (100) reach "
                                  "back to the first message, so there is no earlier place to cut")
    assert prepare_compaction(path, settings) is None  # as pi's prepareCompaction answers


# -- 1. model compaction -------------------------------------------------------------------


async def test_model_compaction_request_and_entry(
        session: Path, fake: FakeAnthropic, model_summarizer: ModelSummarizer) -> None:
    tree = open_tree(session)
    plan = plan_at(tree, TIP_A, KEEP_A_WHOLE)
    fake.script(text_reply("## Goal\nSpeed up ", "GET /orders."))
    result = await compact(tree, TIP_A, model_summarizer,
                           CompactionSettings(keep_recent_tokens=KEEP_A_WHOLE))

    requests = fake.message_requests()
    assert len(requests) == 1
    body = requests[0]
    assert "do not continue the conversation" in system_text(body).lower()
    text = user_text(body)
    serialized = serialize_conversation(llm_messages(plan.messages_to_summarize))
    assert text.startswith(f"<conversation>\n{serialized}\n</conversation>")
    conversation = conversation_of(text)
    assert conversation.startswith(f"[User]: {FIRST_REQUEST}")
    assert '[Assistant tool calls]: read(path="app/orders.py")' in conversation
    assert "[Tool result]: from app import db" in conversation
    assert FORK_TEXT not in conversation  # the fork question is kept, not summarized
    instructions = instructions_of(text)
    for heading in HISTORY_HEADINGS:
        assert heading in instructions
    assert "<previous-summary>" not in text and "Additional focus" not in text

    assert result.summary.startswith("## Goal\nSpeed up GET /orders.")
    assert result.first_kept_entry_id == plan.first_kept_entry_id == FORK
    assert result.tokens_before == plan.tokens_before
    details = {"readFiles": ["app/db.py", "app/orders.py"], "modifiedFiles": []}
    assert result.details == details  # no "summarizer" key for a model summary
    entry = assert_compaction_entry(session, result.entry_id, TIP_A, plan, details)
    assert "<modified-files>" not in entry.summary
    last = lines(session)[-1]
    assert last["type"] == "compaction" and last["id"] == result.entry_id
    assert last["details"] == details and last["fromHook"] is False  # written as pi 1.6 does
    assert "systemMessage" not in last  # the session has no system message to replay
    # The summary model's usage, where pi 1.6 writes it (and counts it in cost totals).
    assert list(last)[-3:] == ["details", "usage", "fromHook"]
    assert_summary_usage(last["usage"], requests=1)


@pytest.mark.parametrize("kind", ["compaction", "branch"])
async def test_a_summary_request_marks_nothing_for_the_cache(
        session: Path, fake: FakeAnthropic, model_summarizer: ModelSummarizer, kind: str) -> None:
    """A summary carried cache breakpoints (its system prompt and its one message), so each paid
    Anthropic's cache write, 1.25x input, for a prompt no later request reads; pi 1.6 asks for
    summaries with cacheRetention "none" and marks nothing."""
    tree = open_tree(session)
    fake.script(text_reply("## Goal\nCheap."))
    if kind == "compaction":
        await compact(tree, TIP_A, model_summarizer,
                      CompactionSettings(keep_recent_tokens=KEEP_A_WHOLE))
    else:
        await branch_with_summary(tree, FORK, model_summarizer, BIG_BUDGET)
    [body] = fake.message_requests()
    assert cache_marks(body) == 0
    assert body["system"] and body["messages"][0]["content"][0]["type"] == "text"


async def test_model_compaction_with_instructions(
        session: Path, fake: FakeAnthropic, model_summarizer: ModelSummarizer) -> None:
    tree = open_tree(session)
    fake.script(text_reply("## Goal\nTests."))
    await compact(tree, TIP_A, model_summarizer,
                  CompactionSettings(keep_recent_tokens=KEEP_A_WHOLE), "focus on tests")
    (body,) = fake.message_requests()
    assert "Additional focus: focus on tests" in instructions_of(user_text(body))


async def test_repeat_model_compaction_updates_the_previous_summary(
        session: Path, fake: FakeAnthropic, model_summarizer: ModelSummarizer) -> None:
    tree = open_tree(session)
    plan = plan_at(tree, TIP_B, KEEP_B_REPEAT)
    old = tree.entry(OLD_COMPACTION)
    assert isinstance(old, CompactionEntry)
    fake.script(text_reply("## Goal\nUpdated."))
    result = await compact(tree, TIP_B, model_summarizer,
                           CompactionSettings(keep_recent_tokens=KEEP_B_REPEAT))

    (body,) = fake.message_requests()
    text = user_text(body)
    assert f"</conversation>\n\n<previous-summary>\n{old.summary}\n</previous-summary>" in text
    instructions = text.split("</previous-summary>", 1)[1]
    assert "update" in instructions.lower()
    for heading in HISTORY_HEADINGS:
        assert heading in instructions
    conversation = conversation_of(text)
    assert conversation.startswith("[User]: Can you EXPLAIN ANALYZE")
    assert "[User]: Great. Please add a regression test" not in conversation  # kept
    # The earlier summary is not summarized again as part of the conversation.
    assert "compacted into the following summary" not in conversation

    details = {"readFiles": plan.files.read_files, "modifiedFiles": plan.files.modified_files}
    assert result.details == details
    assert_compaction_entry(session, result.entry_id, TIP_B, plan, details)


def assert_summary_usage(usage: dict[str, Any], requests: int) -> None:
    """The fake's usage (100 in, 20 out per reply), summed over `requests` as pi sums it; one
    reply's is written as pi 1.6 writes Anthropic's (its 1h cache writes after the cost), two
    as its combineUsage writes them (those writes before the total, the cost not the
    provider's)."""
    one = ["input", "output", "cacheRead", "cacheWrite", "totalTokens", "cost", "cacheWrite1h"]
    two = ["input", "output", "cacheRead", "cacheWrite", "cacheWrite1h", "totalTokens", "cost"]
    assert list(usage) == (one if requests == 1 else two)
    assert usage["cost"]["totalFromProvider"] is False
    assert (usage["input"], usage["output"], usage["totalTokens"]) == (
        100 * requests, 20 * requests, 120 * requests)
    assert usage["cost"]["total"] > 0


async def test_split_turn_makes_two_requests(
        session: Path, fake: FakeAnthropic, model_summarizer: ModelSummarizer) -> None:
    tree = open_tree(session)
    plan = plan_at(tree, TIP_A, KEEP_A_SPLIT)
    assert plan.is_split_turn
    replies = ["## Goal\nFirst reply.", "## Original Request\nSecond reply."]
    fake.script(*(text_reply(r) for r in replies))
    result = await compact(tree, TIP_A, model_summarizer,
                           CompactionSettings(keep_recent_tokens=KEEP_A_SPLIT))

    requests = fake.message_requests()
    assert len(requests) == 2
    texts = [user_text(body) for body in requests]
    prefix_index = next(i for i, t in enumerate(texts) if "## Original Request" in t)
    history_index = 1 - prefix_index
    prefix, history = texts[prefix_index], texts[history_index]
    assert "## Original Request" not in history
    for heading in HISTORY_HEADINGS:
        assert heading in instructions_of(history)
    assert conversation_of(prefix).startswith(f"[User]: {FORK_TEXT}")
    assert conversation_of(history).startswith(f"[User]: {FIRST_REQUEST}")
    assert FORK_TEXT not in history
    assert conversation_of(prefix) == serialize_conversation(
        llm_messages(plan.turn_prefix_messages))

    # The fake answers requests in arrival order: history text, the split mark, prefix text.
    summary = result.summary
    assert summary.startswith(replies[history_index].split(".")[0])
    assert SPLIT_MARK in summary
    before, after = summary.split(SPLIT_MARK, 1)
    assert replies[history_index] in before and replies[prefix_index] in after
    details = {"readFiles": plan.files.read_files, "modifiedFiles": plan.files.modified_files}
    assert details["modifiedFiles"] == ["app/db.py", "app/models.py"]
    assert result.details == details
    assert_compaction_entry(session, result.entry_id, TIP_A, plan, details)
    assert_summary_usage(lines(session)[-1]["usage"], requests=2)


# -- 2. the context after a compaction -----------------------------------------------------


async def test_context_after_compaction(session: Path) -> None:
    tree = open_tree(session)
    other_before = context_bytes(tree, TIP_B)
    result = await compact(tree, TIP_A, ExtractiveSummarizer(),
                           CompactionSettings(keep_recent_tokens=KEEP_A_WHOLE))
    tree = open_tree(session)  # what the file says, not what memory says
    assert tree.leaf_id == result.entry_id

    context = build_session_context(tree, result.entry_id)
    first = json.loads(bytes(context.messages[0]))
    assert first["role"] == "compactionSummary"
    assert first["summary"] == result.summary
    assert first["tokensBefore"] == result.tokens_before
    kept = message_ids_between(tree, FORK, TIP_A)
    assert (kept[0], kept[-1], len(kept)) == (FORK, "28511eec", 12)
    assert [bytes(m) for m in context.messages[1:]] == message_raws(tree, kept)

    # Compaction is per branch: the other branch's context is untouched, byte for byte.
    assert context_bytes(tree, TIP_B) == other_before

    new_id = tree.append_message(UserMessage(content="And after that?", timestamp=1))
    after = build_session_context(open_tree(session), new_id).messages
    assert len(after) == len(context.messages) + 1
    assert [bytes(m) for m in after[:-1]] == [bytes(m) for m in context.messages]
    assert json.loads(bytes(after[-1])) == {"role": "user", "content": "And after that?",
                                     "timestamp": 1}


async def test_what_another_writer_adds_during_a_compaction_stays_in_the_context(
        session: Path) -> None:
    """The pi CLI goes on in the session while the summary is made: its exchange was left on a
    side branch beside the compaction, out of the context (found in review); it now comes
    before the compaction, among the kept messages."""
    tree = open_tree(session)
    start = tree.leaf_id

    class OtherWriterMeanwhile(ExtractiveSummarizer):
        async def summarize(self, request: SummaryRequest) -> Summary:
            if tree.leaf_id == start:  # once, though a split turn is summarized twice
                other = SessionTree.open(str(session))
                other.append_message(UserMessage(content="written by the pi CLI", timestamp=1))
                tree.refresh()  # what the server's watch does
            return await super().summarize(request)

    result = await compact(tree, start, OtherWriterMeanwhile(),
                           CompactionSettings(keep_recent_tokens=100))
    tree = open_tree(session)
    assert tree.leaf_id == result.entry_id
    added = tree.record(tree.record(result.entry_id).env.parent_id or "")
    assert added.env.parent_id == start
    context = build_session_context(tree, result.entry_id)
    assert json.loads(bytes(context.messages[-1]))["content"] == "written by the pi CLI"


@pytest.mark.parametrize("automatic", [False, True])
async def test_an_id_less_line_another_writer_adds_during_a_compaction_is_no_new_leaf(
        session: Path, automatic: bool) -> None:
    """Another writer appended an id-less line under the leaf while the summary was made: the
    compaction went "after" it, as a new root (pi-lsp's id-less leaf has none to write under)
    whose firstKeptEntryId lay off its path, so the context became the summary alone. It is
    written where it was planned, its kept messages on its path."""
    tree = open_tree(session)
    start = tree.leaf_id

    class IdlessLineMeanwhile(ExtractiveSummarizer):
        async def summarize(self, request: SummaryRequest) -> Summary:
            if tree.leaf_id == start:  # once, though a split turn is summarized twice
                line = {"type": "custom", "customType": "x", "parentId": start,
                        "timestamp": "2026-12-03T13:44:00.000Z"}
                appender.append_lines(tree.path, [json.dumps(line).encode()])
                tree.refresh()  # what the server's watch does
            return await super().summarize(request)

    result = await compact(tree, start, IdlessLineMeanwhile(),
                           CompactionSettings(keep_recent_tokens=100), automatic=automatic)
    tree = open_tree(session)
    assert tree.record(result.entry_id).env.parent_id == start
    assert result.first_kept_entry_id in tree.path_ids(result.entry_id)


@pytest.mark.parametrize(("level", "thinking"), [
    ("low", {"type": "enabled", "budget_tokens": 2048, "display": "summarized"}),
    ("off", {"type": "disabled"})])
@pytest.mark.parametrize("job", ["compact", "branch_with_summary"])
async def test_a_summary_thinks_at_the_level_in_force_where_its_path_ends(
        session: Path, fake: FakeAnthropic, providers: Callable[[], AnthropicProvider],
        model_summarizer: ModelSummarizer, job: str, level: str, thinking: dict[str, Any]
        ) -> None:
    """Summaries were asked for with thinking off whatever the session's level; pi 1.6 asks at
    the session's level (budget and max_tokens as for a turn: 2,048 within haiku's 64,000)."""
    tree = open_tree(session)
    tree.append_thinking_level_change(level)
    harness = Harness(tree, session.parents[2], providers, summarizer=model_summarizer,
                      compaction=CompactionSettings(keep_recent_tokens=KEEP_B_REPEAT))
    assert harness.thinking_level() == level
    fake.script(text_reply("## Goal\nThought."))
    await (harness.compact() if job == "compact" else harness.branch_with_summary(FORK))
    [body] = fake.message_requests()
    assert (body["thinking"], body["max_tokens"]) == (thinking, 64_000)


# -- 3. failures write nothing ------------------------------------------------------------


async def test_summary_model_error_writes_nothing(
        session: Path, fake: FakeAnthropic, model_summarizer: ModelSummarizer) -> None:
    tree = open_tree(session)
    size = session.stat().st_size
    fake.script(error_reply(500, "api_error", "the summary model is down"))
    with pytest.raises(SummaryError):
        await compact(tree, TIP_A, model_summarizer,
                      CompactionSettings(keep_recent_tokens=KEEP_A_WHOLE))
    assert len(fake.message_requests()) == 1
    assert session.stat().st_size == size
    assert open_tree(session).leaf_id == TIP_B

    fake.script(error_reply(500, "api_error", "still down"))
    with pytest.raises(SummaryError):
        await branch_with_summary(tree, FORK, model_summarizer, BIG_BUDGET)
    assert session.stat().st_size == size


HAIKU = ModelRegistry().get("anthropic", "claude-haiku-4-5")
QUICK_RETRIES = RetrySettings(base_delay_ms=1)


class EndTold:
    """A provider that says when each reply has ended (the summarizer decides after it)."""

    def __init__(self, provider: AnthropicProvider) -> None:
        self.provider, self.name, self.ended = provider, provider.name, asyncio.Event()

    async def stream(self, request: ModelRequest, reply: ReplyBuilder
                     ) -> AsyncIterator[ProviderEvent]:
        async for event in self.provider.stream(request, reply):
            yield event
        self.ended.set()


@pytest.mark.parametrize("kind", ["compaction", "branch"])
async def test_a_summary_that_failed_for_a_passing_reason_is_asked_again(
        session: Path, fake: FakeAnthropic, providers: Callable[[], AnthropicProvider],
        kind: str) -> None:
    """An overloaded summary model failed the compaction or branch summary at once; pi 1.6
    asks again by the settings' `retry`, as for a turn's reply (retryAssistantCall)."""
    summarizer = ModelSummarizer(providers(), HAIKU, QUICK_RETRIES)
    tree = open_tree(session)
    fake.script(error_reply(529, "overloaded_error", "Overloaded"), text_reply("## Goal\nAgain."))
    if kind == "compaction":
        summary = (await compact(tree, TIP_A, summarizer,
                                 CompactionSettings(keep_recent_tokens=KEEP_A_WHOLE))).summary
    else:
        summary = (await branch_with_summary(tree, FORK, summarizer, BIG_BUDGET)).summary or ""
    assert "## Goal\nAgain." in summary
    first, again = fake.message_requests()
    assert again == first


@pytest.mark.parametrize(("job", "attempt_start"), [
    ("compact", SummaryRetryAttemptStart(source="compaction", reason="manual")),
    ("branch", SummaryRetryAttemptStart(source="branchSummary"))])
async def test_a_summarys_retry_is_told_as_pi_tells_it(
        session: Path, fake: FakeAnthropic, providers: Callable[[], AnthropicProvider],
        job: str, attempt_start: SummaryRetryAttemptStart) -> None:
    """A summary waited to be asked again in silence; pi 1.6 tells the wait (attempt, delay,
    the failure), the attempt after it and the end of retrying, as summarization_retry_*."""
    summarizer = ModelSummarizer(providers(), HAIKU, QUICK_RETRIES)
    harness = Harness(open_tree(session), session.parents[2], providers, summarizer=summarizer,
                      compaction=CompactionSettings(keep_recent_tokens=KEEP_B_REPEAT))
    told: list[AgentEvent] = []
    harness.subscribe(told.append)
    fake.script(error_reply(503, "api_error", "Service unavailable"), text_reply("## Goal\nAgain."))
    await (harness.compact() if job == "compact" else harness.branch_with_summary(FORK))
    scheduled, *rest = told
    assert isinstance(scheduled, SummaryRetryScheduled), told
    assert (scheduled.attempt, scheduled.max_attempts, scheduled.delay_ms) == (1, 3, 1)
    assert "503" in scheduled.error_message and "Service unavailable" in scheduled.error_message
    assert rest == [attempt_start, SummaryRetryFinished()]


async def test_summary_retries_stop_where_a_turns_would(
        session: Path, fake: FakeAnthropic, providers: Callable[[], AnthropicProvider]) -> None:
    """After `retry.maxRetries` more requests, or at once for a failure that does not pass (a bad
    request), the summary fails as before, naming the last failure."""
    summarizer = ModelSummarizer(providers(), HAIKU, RetrySettings(max_retries=2,
                                                                   base_delay_ms=1))
    settings = CompactionSettings(keep_recent_tokens=KEEP_A_WHOLE)
    fake.script(*[error_reply(500, "api_error", f"down {n}") for n in range(3)],
                text_reply("## Goal\nnever asked"))
    with pytest.raises(SummaryError, match=r"down 2$"):
        await compact(open_tree(session), TIP_A, summarizer, settings)
    assert len(fake.message_requests()) == 3
    fake.script(error_reply(400, "invalid_request_error", "bad request"),
                text_reply("## Goal\nnever asked"))
    with pytest.raises(SummaryError, match=r"bad request$"):
        await compact(open_tree(session), TIP_A, summarizer, settings)
    assert len(fake.message_requests()) == 1


async def test_an_abort_while_a_summary_waits_to_be_asked_again_writes_nothing(
        session: Path, fake: FakeAnthropic, providers: Callable[[], AnthropicProvider]) -> None:
    """Stop pressed during the wait before a summary is asked again ends the compaction at
    once, as pi 1.6's retry sleep ends on its signal; nothing is written or asked again."""
    told = EndTold(providers())
    summarizer = ModelSummarizer(told, HAIKU, RetrySettings(base_delay_ms=600_000))
    harness = Harness(open_tree(session), session.parents[2], providers, summarizer=summarizer,
                      compaction=CompactionSettings(keep_recent_tokens=KEEP_B_REPEAT))
    before = session.read_bytes()
    events: list[AgentEvent] = []
    harness.subscribe(events.append)
    fake.script(error_reply(503, "api_error", "Service unavailable"), text_reply("## Goal"))
    task = asyncio.create_task(harness.compact())
    await asyncio.wait_for(told.ended.wait(), CEILING_S)
    assert harness.busy  # waiting to ask again
    assert harness.abort()
    with pytest.raises(Aborted):
        await task
    assert len(fake.message_requests()) == 1
    assert session.read_bytes() == before and not harness.busy
    # pi 1.6 tells the retry over when its wait is stopped
    assert [type(e) for e in events] == [SummaryRetryScheduled, SummaryRetryFinished]


async def test_aborting_a_slow_compaction_writes_nothing(
        session: Path, fake: FakeAnthropic, providers: Callable[[], AnthropicProvider],
        model_summarizer: ModelSummarizer) -> None:
    tree = open_tree(session)
    size = session.stat().st_size
    harness = Harness(tree, session.parents[2], providers, summarizer=model_summarizer,
                      compaction=CompactionSettings(keep_recent_tokens=KEEP_B_REPEAT))
    fake.script(text_reply("## Goal\n", "slow ", "summary", delay=0.3))
    task = asyncio.create_task(harness.compact())
    await until(fake.message_requests, "the summary request")
    assert harness.busy and harness.phase == "compaction"
    assert harness.abort()
    with pytest.raises(Aborted):
        await task
    assert session.stat().st_size == size
    assert not harness.busy
    assert all(e["type"] != "compaction" or e["id"] == OLD_COMPACTION for e in lines(session))


# -- 4. the extractive summarizer ----------------------------------------------------------


async def test_extractive_summary_is_deterministic_and_structured(session: Path) -> None:
    tree = open_tree(session)
    plan = plan_at(tree, "ce0de375", 430)  # no earlier compaction on this path
    assert not plan.is_split_turn and plan.files.modified_files == ["app/orders.py"]
    settings = CompactionSettings(keep_recent_tokens=430)
    summary = await summarize_plan(plan, ExtractiveSummarizer(), settings, None)
    assert summary == await summarize_plan(plan, ExtractiveSummarizer(), settings, None)
    assert summary.usage is None
    first = summary.text

    position = -1
    for heading in HISTORY_HEADINGS:
        assert f"\n{heading}\n" in f"\n{first}"
        assert first.index(heading) > position  # in the documented order
        position = first.index(heading)
    goal = first.split("## Goal\n", 1)[1].split("\n\n", 1)[0]
    assert FIRST_REQUEST in goal
    assert "app/orders.py" in first.split("### Done", 1)[1].split("### In Progress", 1)[0]
    assert first.endswith(file_blocks(plan.files.read_files, ["app/orders.py"]))


async def test_extractive_compaction_is_marked(session: Path) -> None:
    tree = open_tree(session)
    plan = plan_at(tree, TIP_A, KEEP_A_SPLIT)
    result = await compact(tree, TIP_A, ExtractiveSummarizer(),
                           CompactionSettings(keep_recent_tokens=KEEP_A_SPLIT))
    details = {"readFiles": plan.files.read_files, "modifiedFiles": plan.files.modified_files,
               "summarizer": "extractive"}
    assert result.details == details
    entry = assert_compaction_entry(session, result.entry_id, TIP_A, plan, details)
    assert "usage" not in lines(session)[-1]  # no model, no usage
    # A split turn: the turn's prefix (the fork question) is summarized after the mark.
    before, after = entry.summary.split(SPLIT_MARK, 1)
    assert FIRST_REQUEST in before and "## Original Request" in after
    assert FORK_TEXT[:20] in after


async def test_repeat_extractive_compaction_keeps_the_goal(session: Path) -> None:
    tree = open_tree(session)
    old = tree.entry(OLD_COMPACTION)
    assert isinstance(old, CompactionEntry)
    old_goal = old.summary.split("## Goal\n", 1)[1].split("\n\n", 1)[0]
    result = await compact(tree, TIP_B, ExtractiveSummarizer(),
                           CompactionSettings(keep_recent_tokens=KEEP_B_REPEAT))
    goal = result.summary.split("## Goal\n", 1)[1].split("\n\n", 1)[0]
    assert goal.splitlines()[0] == old_goal
    assert "EXPLAIN ANALYZE" not in goal  # the window's first request does not replace it
    assert result.details["summarizer"] == "extractive"


# -- 5. branch summaries and plain branches ------------------------------------------------


async def test_branch_with_extractive_summary(session: Path) -> None:
    tree = open_tree(session)
    assert tree.leaf_id == TIP_B
    outcome = await branch_with_summary(tree, FORK, ExtractiveSummarizer(), BIG_BUDGET)
    assert outcome.editor_text == FORK_TEXT

    tree = open_tree(session)
    assert outcome.summary_entry_id is not None
    assert tree.leaf_id == outcome.leaf_id == outcome.summary_entry_id
    entry = tree.entry(outcome.summary_entry_id)
    assert isinstance(entry, BranchSummaryEntry)
    assert entry.parent_id == FORK_PARENT
    assert entry.from_id == TIP_B
    assert entry.summary == outcome.summary
    # Files of branch B, plus those of the earlier summaries the branch holds.
    assert entry.details["summarizer"] == "extractive"
    assert "app/orders.py" in entry.details["modifiedFiles"]
    assert {"app/db.py", "app/models.py"} <= set(entry.details["modifiedFiles"])
    assert entry.summary.endswith(
        file_blocks(entry.details["readFiles"], entry.details["modifiedFiles"]))
    assert "## Critical Context" not in entry.summary  # a branch summary has no such section
    for heading in HEADINGS:
        assert heading in entry.summary

    context = build_session_context(tree, tree.leaf_id)
    last = json.loads(bytes(context.messages[-1]))
    assert last["role"] == "branchSummary"
    assert last["summary"] == entry.summary and last["fromId"] == TIP_B
    before = build_session_context(tree, FORK_PARENT).messages
    assert [bytes(m) for m in context.messages[:-1]] == [bytes(m) for m in before]
    llm = json.loads(bytes(convert_to_llm(context.messages)[-1]))
    assert llm["role"] == "user"
    text = "".join(b["text"] for b in llm["content"])
    assert f"<branch_exploration_summary>\n{entry.summary}\n</branch_exploration_summary>" \
        in text


async def test_branch_with_model_summary(
        session: Path, fake: FakeAnthropic, model_summarizer: ModelSummarizer) -> None:
    tree = open_tree(session)
    fake.script(text_reply("## Goal\nThe branch tried raw SQL."))
    outcome = await branch_with_summary(tree, FORK, model_summarizer, BIG_BUDGET)

    (body,) = fake.message_requests()
    text = user_text(body)
    conversation = conversation_of(text)
    assert "[User]: Let's not swap in an ORM." in conversation
    assert "[User]: Great. Please add a regression test" in conversation
    assert '[Assistant tool calls]: write(path="app/orders.py"' in conversation
    assert "[Tool result]:" not in conversation  # tool results are left out
    assert FORK_TEXT not in conversation  # the shared part is not summarized
    instructions = instructions_of(text)
    for heading in HEADINGS:
        assert heading in instructions
    assert "## Critical Context" not in instructions
    assert "<previous-summary>" not in text

    assert outcome.summary is not None
    assert outcome.summary.startswith(
        BRANCH_SUMMARY_PREAMBLE + "## Goal\nThe branch tried raw SQL.")
    entry = open_tree(session).entry(outcome.summary_entry_id or "")
    assert isinstance(entry, BranchSummaryEntry)
    assert entry.parent_id == FORK_PARENT and entry.from_id == TIP_B
    assert "summarizer" not in entry.details
    assert set(entry.details) == {"readFiles", "modifiedFiles"}
    written = lines(session)[-1]
    assert list(written)[-3:] == ["details", "usage", "fromHook"]
    assert_summary_usage(written["usage"], requests=1)


async def test_a_branch_with_nothing_to_summarize_chooses_no_summarizer(tmp_path: Path) -> None:
    """A model summarizer is chosen off the event loop at the first summary; with no message
    left behind none is written, so none is chosen (on the loop, that imported an SDK)."""
    path = tmp_path / "s.jsonl"
    lines_written = [
        {"type": "session", "version": 3, "id": "11111111-2222-4333-8444-555555555555",
         "timestamp": "2025-01-02T03:04:05.678Z", "cwd": str(tmp_path)},
        {"type": "message", "id": "m1", "parentId": None, "timestamp": "2025-01-02T03:04:05.678Z",
         "message": {"role": "user", "content": "hi", "timestamp": 1}},
        {"type": "model_change", "id": "m2", "parentId": "m1",
         "timestamp": "2025-01-02T03:04:06.000Z", "provider": "anthropic",
         "modelId": "claude-haiku-4-5"},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines_written))
    chosen: list[str] = []

    def choose() -> ExtractiveSummarizer:
        chosen.append("chosen")
        return ExtractiveSummarizer()

    outcome = await branch_with_summary(open_tree(path), "m1", ChosenSummarizer(choose),
                                        BIG_BUDGET)
    entry = open_tree(path).entry(outcome.summary_entry_id or "")
    assert isinstance(entry, BranchSummaryEntry) and entry.summary == "No content to summarize"
    assert "summarizer" not in entry.details and chosen == []


def chain_file(path: Path, messages: list[dict[str, Any]]) -> SessionTree:
    """A session of `messages`, each the child of the one before (ids m1, m2, …)."""
    stamp = "2025-01-02T03:04:05.678Z"
    lines_written: list[dict[str, Any]] = [
        {"type": "session", "version": 3, "id": "11111111-2222-4333-8444-555555555555",
         "timestamp": stamp, "cwd": str(path.parent)}]
    for n, message in enumerate(messages, 1):
        lines_written.append({"type": "message", "id": f"m{n}",
                              "parentId": f"m{n - 1}" if n > 1 else None, "timestamp": stamp,
                              "message": message})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines_written))
    return open_tree(path)


async def test_a_branch_whose_messages_do_not_fit_stores_no_file_lists(tmp_path: Path) -> None:
    """With nothing fitting the budget, the 'No content to summarize' entry kept the files of
    the reply left out; pi stores empty lists with that text."""
    write = AssistantMessage(
        content=[ToolCall(id="c1", name="write", arguments={"path": "big.txt",
                                                            "content": "x" * 400})],
        api="anthropic-messages", provider="anthropic", model="m", usage=Usage(),
        stop_reason="toolUse", timestamp=2)
    tree = chain_file(tmp_path / "s.jsonl", [{"role": "user", "content": "hi", "timestamp": 1},
                                            json.loads(encoder.encode(write))])
    outcome = await branch_with_summary(tree, "m1", ExtractiveSummarizer(), 50)
    entry = open_tree(tmp_path / "s.jsonl").entry(outcome.summary_entry_id or "")
    assert isinstance(entry, BranchSummaryEntry) and entry.summary == "No content to summarize"
    assert entry.details == {"readFiles": [], "modifiedFiles": []}


def reply(text: str, at: int) -> dict[str, Any]:
    """An assistant reply of `text`, as the raw dict a session line holds."""
    return json.loads(encoder.encode(AssistantMessage(
        content=[TextContent(text=text)], api="anthropic-messages", provider="anthropic",
        model="m", usage=Usage(), stop_reason="stop", timestamp=at)))


async def test_a_branch_with_summary_ahead_of_a_moved_leaf_writes_no_summary(
        tmp_path: Path) -> None:
    """After Branch Here moved the leaf up (a durable leaf move), Branch with Summary to the
    reply still ahead on that path summarized the move entry alone: a 'No content to summarize'
    entry that sat in every later context. pi writes none when nothing is left behind."""
    path = tmp_path / "s.jsonl"
    tree = chain_file(path, [{"role": "user", "content": "first", "timestamp": 1},
                             reply("first answer", 2),
                             {"role": "user", "content": "second", "timestamp": 3},
                             reply("second answer", 4)])
    expected = context_bytes(tree, "m4")
    assert branch(tree, "m3").leaf_id == "m2"
    outcome = await branch_with_summary(open_tree(path), "m4", ExtractiveSummarizer(),
                                        BIG_BUDGET)
    assert outcome.summary_entry_id is None and outcome.leaf_id == "m4"
    assert "branch_summary" not in [line["type"] for line in lines(path)]
    reopened = open_tree(path)
    assert reopened.shown_leaf() == "m4"
    assert context_bytes(reopened, reopened.leaf_id) == expected


async def test_a_summary_after_a_leaf_move_names_the_move_as_where_it_came_from(
        tmp_path: Path) -> None:
    """Collected from what a durable leaf move stands for, the summary's `fromId` named that
    entry; pi reading the same file takes the move entry as the leaf and records it."""
    path = tmp_path / "s.jsonl"
    tree = chain_file(path, [{"role": "user", "content": "first", "timestamp": 1},
                             reply("first answer", 2),
                             {"role": "user", "content": "second", "timestamp": 3},
                             reply("second answer", 4)])
    branch(tree, "m2")
    move = tree.leaf_id
    assert move not in (None, "m2")
    outcome = await branch_with_summary(open_tree(path), "m1", ExtractiveSummarizer(),
                                        BIG_BUDGET)
    summary = next(line for line in lines(path) if line["type"] == "branch_summary")
    assert summary["fromId"] == move and outcome.summary_entry_id == summary["id"]


async def test_a_branch_summary_to_a_prompt_gone_on_past_a_dangling_call_is_not_refused(
        tmp_path: Path) -> None:
    """A killed pi left a bash call with no result, and a prompt went on past it long ago:
    going back to that prompt with a summary was refused for ever as "another program is
    running a turn", though no turn will ever answer the call."""
    path = tmp_path / "s.jsonl"
    call = AssistantMessage(
        content=[ToolCall(id="c1", name="bash", arguments={"command": "make test"})],
        api="anthropic-messages", provider="anthropic", model="m", usage=Usage(),
        stop_reason="toolUse", timestamp=2)
    tree = chain_file(path, [{"role": "user", "content": "run the tests", "timestamp": 1},
                             json.loads(encoder.encode(call)),
                             {"role": "user", "content": "go on", "timestamp": 3},
                             reply("The tests were not run.", 4),
                             {"role": "user", "content": "plan the refactor", "timestamp": 5},
                             reply("Here is the plan.", 6)])
    outcome = await branch_with_summary(tree, "m3", ExtractiveSummarizer(), BIG_BUDGET)
    summary = next(line for line in lines(path) if line["type"] == "branch_summary")
    assert summary["parentId"] == "m2" and outcome.editor_text == "go on"


def test_branch_here_on_a_leaf_move_by_its_own_id_writes_nothing(tmp_path: Path) -> None:
    """`branch --to` the durable leaf move that is the leaf wrote one more move under it at
    each call; pi does nothing where the leaf already stands."""
    path = tmp_path / "s.jsonl"
    tree = chain_file(path, [{"role": "user", "content": "first", "timestamp": 1},
                             reply("first answer", 2),
                             {"role": "user", "content": "second", "timestamp": 3}])
    branch(tree, "m2")
    move, count = tree.leaf_id, len(lines(path))
    assert move not in (None, "m2")
    assert branch(tree, move).leaf_id == "m2"
    assert len(lines(path)) == count and tree.leaf_id == move


def test_branch_here_on_a_user_message_that_is_the_leaf_stays_there(tmp_path: Path) -> None:
    """Branch Here on the leaf when it is a user message (a prompt with no reply yet) moved the
    leaf to its parent and handed the text back; pi 1.6's /tree does nothing where the leaf
    already stands ("Already at this point"), with or without a summary."""
    path = tmp_path / "s.jsonl"
    tree = chain_file(path, [{"role": "user", "content": "first", "timestamp": 1},
                             reply("first answer", 2),
                             {"role": "user", "content": "second", "timestamp": 3}])
    before = path.read_bytes()
    outcome = branch(tree, "m3")
    assert (outcome.leaf_id, outcome.editor_text) == ("m3", None)
    summarized = asyncio.run(branch_with_summary(tree, "m3", ExtractiveSummarizer(), BIG_BUDGET))
    assert (summarized.leaf_id, summarized.editor_text) == ("m3", None)
    assert path.read_bytes() == before and tree.leaf_id == "m3"


def test_edit_prompt_on_the_leaf_still_moves_to_its_parent(tmp_path: Path) -> None:
    """Edit Prompt (`edit`) is pi-lsp's own action, not pi's /tree: on the leaf's prompt it
    still leaves it for its parent and hands its text back."""
    path = tmp_path / "s.jsonl"
    tree = chain_file(path, [{"role": "user", "content": "first", "timestamp": 1},
                             reply("first answer", 2),
                             {"role": "user", "content": "second", "timestamp": 3}])
    outcome = branch(tree, "m3", edit=True)
    assert (outcome.leaf_id, outcome.editor_text) == ("m2", "second")
    assert open_tree(path).shown_leaf() == "m2"


def test_branch_to_the_root_moves_off_an_idless_leaf(tmp_path: Path) -> None:
    """An id-less leaf is shown as no leaf, as the root is: a move to the root prompt (to the
    root) was taken as one to where the leaf stands, and nothing moved."""
    path = tmp_path / "s.jsonl"
    path.write_bytes((Path(__file__).with_name("fixtures") / "pi16-odd-envelopes" /
                      "noid-leaf.jsonl").read_bytes())
    tree = open_tree(path)
    assert tree.idless_leaf is not None
    outcome = branch(tree, "aaaa0001")
    assert (outcome.leaf_id, outcome.editor_text) == (None, "one")
    assert tree.idless_leaf is None
    assert build_session_context(tree, tree.leaf_id).messages == []


def test_moving_to_a_user_message_offers_its_text_blocks_joined_as_pi_does(
        tmp_path: Path) -> None:
    """The text offered for editing joined blocks with spaces and showed images as
    '[image]'; pi offers the text blocks alone, joined with nothing."""
    content = [{"type": "text", "text": "What is wrong in "},
               {"type": "text", "text": "this screenshot?"},
               {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}]
    tree = chain_file(tmp_path / "s.jsonl", [{"role": "user", "content": "hi", "timestamp": 1},
                                            {"role": "user", "content": content, "timestamp": 2},
                                            reply("a dark image", 3)])
    assert branch(tree, "m2").editor_text == "What is wrong in this screenshot?"


def test_plain_branch_is_one_leaf_entry(session: Path) -> None:
    tree = open_tree(session)
    count = len(lines(session))
    target = "28511eec"  # an assistant reply on branch A: the leaf lands on it
    expected = context_bytes(tree, target)
    outcome = branch(tree, target)
    written = lines(session)
    assert len(written) == count + 1
    leaf = written[-1]
    assert outcome.leaf_id == target and outcome.editor_text is None
    assert (leaf["type"], leaf["customType"], leaf["data"], leaf["parentId"]) == (
        "custom", "pi-lsp.leaf", {"targetId": target}, target)
    reopened = open_tree(session)
    assert reopened.leaf_id == leaf["id"]
    assert context_bytes(reopened, reopened.leaf_id) == expected

    # To a user message: the leaf goes to its parent and the text comes back for editing.
    expected = context_bytes(reopened, FORK_PARENT)
    outcome = branch(reopened, FORK)
    assert outcome.editor_text == FORK_TEXT
    written = lines(session)
    assert len(written) == count + 2
    assert written[-1]["parentId"] == FORK_PARENT == written[-1]["data"]["targetId"]
    assert outcome.leaf_id == FORK_PARENT
    assert written[-1]["id"] == open_tree(session).leaf_id
    assert context_bytes(open_tree(session), written[-1]["id"]) == expected


async def test_branch_here_where_the_leaf_already_stands_writes_nothing(session: Path) -> None:
    """Branch Here on the row already the leaf wrote one more leaf move each time; pi returns
    without doing anything when the target is the leaf."""
    before = session.read_bytes()
    assert branch(open_tree(session), TIP_B) == BranchOutcome(TIP_B)
    assert session.read_bytes() == before
    target = "28511eec"  # behind a durable leaf move, which stands for it
    branch(open_tree(session), target)
    moved = session.read_bytes()
    assert branch(open_tree(session), target) == BranchOutcome(target)
    outcome = await branch_with_summary(open_tree(session), target, ExtractiveSummarizer(),
                                        BIG_BUDGET)
    assert outcome == BranchOutcome(target)
    assert session.read_bytes() == moved
    # A prompt under the leaf still comes back for editing, with nothing written.
    branch(open_tree(session), FORK)
    moved = session.read_bytes()
    assert branch(open_tree(session), FORK) == BranchOutcome(FORK_PARENT, FORK_TEXT)
    assert session.read_bytes() == moved


# -- 6. the harness ------------------------------------------------------------------------


TINY = ModelInfo("anthropic", "tiny", 4000, 1000, Price(0, 0, 0, 0))


def tiny_session(root: Path) -> SessionTree:
    """A fresh session without a model of its own, holding about 4000 tokens of context."""
    sessions = root / ".pi" / "sessions"
    sessions.mkdir(parents=True)
    tree = SessionTree.create(str(sessions / "tiny.jsonl"), str(root))
    for n in range(3):
        tree.append_message(UserMessage(content=f"Step {n}: " + "please refactor. " * 60,
                                        timestamp=1000 + n))
        tree.append_message(AssistantMessage(
            content=[TextContent(text=f"Done with step {n}. " + "refactored code. " * 60)],
            api="anthropic-messages", provider="anthropic", model="tiny",
            usage=Usage(input=1200 * (n + 1), output=100, total_tokens=1200 * (n + 1) + 100),
            stop_reason="stop", timestamp=1001 + n))
    return tree


async def test_auto_compaction_at_the_threshold(
        tmp_path: Path, fake: FakeAnthropic, providers: Callable[[], AnthropicProvider]) -> None:
    tree = tiny_session(tmp_path)
    harness = Harness(tree, tmp_path, providers, registry=ModelRegistry([TINY]),
                      default_model=("anthropic", "tiny"),
                      compaction=CompactionSettings(reserve_tokens=1000, keep_recent_tokens=300))
    assert harness.model().context_window == 4000
    assert harness.context_tokens() > 4000 - 1000
    events: list[AgentEvent] = []
    harness.subscribe(events.append)
    fake.script(text_reply("Step 3 done."))
    await harness.prompt("Now step 3.")

    kinds = [e for e in events if isinstance(e, CompactionStart | CompactionEnd)]
    assert len(kinds) == 2
    start, end = kinds
    assert isinstance(start, CompactionStart) and start.reason == "threshold"
    assert isinstance(end, CompactionEnd) and end.entry_id is not None and end.error is None
    assert events.index(start) < events.index(end)

    written = lines(Path(tree.path))
    compaction = next(i for i, e in enumerate(written) if e["type"] == "compaction")
    assert written[compaction]["id"] == end.entry_id
    # the session had no system message: the prompt and tools are declared after it
    declared, user = written[compaction + 1:compaction + 3]
    assert declared["message"]["role"] == "system" and declared["parentId"] == end.entry_id
    assert user["type"] == "message" and user["message"]["role"] == "user"
    assert user["message"]["content"][0]["text"] == "Now step 3."
    assert user["parentId"] == declared["id"]
    assert written[-1]["message"]["role"] == "assistant"
    assert [e["type"] for e in written].count("compaction") == 1

    (body,) = fake.message_requests()  # the extractive summarizer asks no model
    first = "".join(b["text"] for b in body["messages"][0]["content"])
    assert "compacted into the following summary" in first


async def test_a_runs_level_is_recorded_after_the_compaction_before_its_prompt(
        tmp_path: Path, fake: FakeAnthropic, providers: Callable[[], AnthropicProvider]) -> None:
    """pi 1.6 records the level a run thinks at (`--thinking` on a session it continues) where
    its _startRun does: after the compaction its prompt began with, before the prompt's system
    message and the prompt itself."""
    tree = tiny_session(tmp_path)
    tree.append_thinking_level_change("medium")
    harness = Harness(tree, tmp_path, providers, registry=ModelRegistry([TINY]),
                      default_model=("anthropic", "tiny"),
                      compaction=CompactionSettings(reserve_tokens=1000, keep_recent_tokens=300))
    harness.run_thinking_level = "high"
    fake.script(text_reply("Step 3 done."))
    await harness.prompt("Now step 3.")
    written = lines(Path(tree.path))
    compaction = next(i for i, e in enumerate(written) if e["type"] == "compaction")
    change, declared, user = written[compaction + 1:compaction + 4]
    assert change["type"] == "thinking_level_change" and change["thinkingLevel"] == "high"
    assert change["parentId"] == written[compaction]["id"]
    assert declared["message"]["role"] == "system" and declared["parentId"] == change["id"]
    assert user["message"]["role"] == "user" and user["parentId"] == declared["id"]
    assert [e["type"] for e in written].count("thinking_level_change") == 2


async def test_abort_during_the_compaction_before_a_prompt_stops_the_prompt(
        tmp_path: Path, fake: FakeAnthropic, providers: Callable[[], AnthropicProvider]) -> None:
    """Stop pressed while the context is compacted ahead of the model call stops the prompt
    too: it is written as aborted and the model is not asked (it was asked regardless). The
    compaction ends aborted with no error, as pi 1.6 tells it (it ended with an error)."""
    tree = tiny_session(tmp_path)
    harness = Harness(tree, tmp_path, providers, registry=ModelRegistry([TINY]),
                      default_model=("anthropic", "tiny"),
                      compaction=CompactionSettings(reserve_tokens=1000, keep_recent_tokens=300))
    events: list[AgentEvent] = []
    harness.subscribe(events.append)
    loop = asyncio.get_running_loop()
    # Once the compaction's step is under way (scheduled right after its start is told).
    harness.subscribe(lambda e: loop.call_soon(harness.abort)
                      if isinstance(e, CompactionStart) else None)
    fake.script(text_reply("Step 3 done."))
    await harness.prompt("Now step 3.")

    [end] = [e for e in events if isinstance(e, CompactionEnd)]
    assert end.entry_id is None and end.aborted and end.error is None
    written = lines(Path(tree.path))
    assert "compaction" not in [e["type"] for e in written]
    assert written[-1]["message"]["stopReason"] == "aborted"
    assert written[-2]["message"]["content"][0]["text"] == "Now step 3."
    assert fake.message_requests() == []


async def test_a_follow_up_sent_during_the_compaction_after_a_reply_is_answered_in_its_prompt(
        tmp_path: Path, fake: FakeAnthropic, providers: Callable[[], AnthropicProvider]) -> None:
    """The reply fills the window, so the prompt compacts after it; what the user follows up
    with meanwhile is sent in that prompt, as pi 1.6 goes on (it waited for the next prompt)."""
    tree = tiny_session(tmp_path)
    roomy = ModelInfo("anthropic", "tiny", 8000, 1000, Price(0, 0, 0, 0))
    harness = Harness(tree, tmp_path, providers, registry=ModelRegistry([roomy]),
                      default_model=("anthropic", "tiny"),
                      compaction=CompactionSettings(reserve_tokens=1000, keep_recent_tokens=300))
    assert harness.context_tokens() < 8000 - 1000  # no compaction before the prompt
    loop = asyncio.get_running_loop()
    harness.subscribe(lambda e: loop.call_soon(harness.follow_up, "LATE")
                      if isinstance(e, CompactionStart) else None)
    fake.script(Reply([message_start(input_tokens=7500), *text_block(0, "Step 3 done."),
                       *message_end()]), text_reply("Late answer."))
    produced = await harness.prompt("Now step 3.")

    written = lines(Path(tree.path))
    kinds = [e["message"]["role"] if e["type"] == "message" else e["type"] for e in written]
    assert kinds[-5:] == ["user", "assistant", "compaction", "user", "assistant"]
    assert written[-2]["message"]["content"][0]["text"] == "LATE"
    assert written[-1]["message"]["content"][0]["text"] == "Late answer."
    assert [type(m).__name__ for m in produced][-2:] == ["UserMessage", "AssistantMessage"]
    assert len(fake.message_requests()) == 2


async def test_a_follow_up_left_by_an_aborted_prompt_is_not_sent_with_the_next(
        tmp_path: Path, fake: FakeAnthropic, providers: Callable[[], AnthropicProvider]) -> None:
    tree = tiny_session(tmp_path)
    roomy = ModelInfo("anthropic", "tiny", 8000, 1000, Price(0, 0, 0, 0))
    harness = Harness(tree, tmp_path, providers, registry=ModelRegistry([roomy]),
                      default_model=("anthropic", "tiny"),
                      compaction=CompactionSettings(reserve_tokens=1000, keep_recent_tokens=300))
    loop = asyncio.get_running_loop()

    def follow_up_then_stop(event: AgentEvent) -> None:
        if isinstance(event, CompactionStart):
            loop.call_soon(harness.follow_up, "LATE")
            loop.call_soon(harness.abort)

    unsubscribe = harness.subscribe(follow_up_then_stop)
    fake.script(Reply([message_start(input_tokens=7500), *text_block(0, "Step 3 done."),
                       *message_end()]), text_reply("Next answer."))
    await harness.prompt("Now step 3.")
    unsubscribe()
    await harness.prompt("NEXT")
    assert "LATE" not in json.dumps(fake.message_requests()[-1])
    assert "LATE" not in Path(tree.path).read_text()

async def test_an_abort_while_a_follow_ups_image_is_processed_after_the_compaction_stops_it(
        tmp_path: Path, fake: FakeAnthropic, providers: Callable[[], AnthropicProvider],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The follow-up's images were processed after the compaction with the harness idle: the
    abort was refused (False) and the model asked anyway (found in review)."""
    tree = tiny_session(tmp_path)
    roomy = ModelInfo("anthropic", "tiny", 8000, 1000, Price(0, 0, 0, 0))
    harness = Harness(tree, tmp_path, providers, registry=ModelRegistry([roomy]),
                      default_model=("anthropic", "tiny"),
                      compaction=CompactionSettings(reserve_tokens=1000, keep_recent_tokens=300))
    entered, go = held_images(monkeypatch)
    loop = asyncio.get_running_loop()
    image = [ImageContent(data=PNG, mime_type="image/png")]
    harness.subscribe(lambda e: loop.call_soon(harness.follow_up, "LATE", image)
                      if isinstance(e, CompactionStart) else None)
    fake.script(Reply([message_start(input_tokens=7500), *text_block(0, "Step 3 done."),
                       *message_end()]), text_reply("An answer nobody wants."))
    run = asyncio.create_task(harness.prompt("Now step 3."))
    try:
        await until(entered.is_set, "the follow-up's image being processed")
        assert harness.abort() is True
    finally:
        go.set()
    await run

    written = lines(Path(tree.path))
    kinds = [e["message"]["role"] if e["type"] == "message" else e["type"] for e in written]
    assert kinds[-3:] == ["compaction", "user", "assistant"]
    assert written[-2]["message"]["content"][0]["text"] == "LATE"
    assert written[-1]["message"]["stopReason"] == "aborted"
    assert len(fake.message_requests()) == 1
    assert not harness.busy and check_session(SessionTree.open(tree.path)) == []


async def test_a_tool_loop_past_the_threshold_is_compacted_between_its_turns(
        tmp_path: Path, fake: FakeAnthropic, providers: Callable[[], AnthropicProvider]) -> None:
    """pi 1.6 checks the threshold before each next turn of a run (prepareNextTurn) and compacts
    there; pi-lsp checked only around the prompt, so a tool loop went on to a full window.
    Steering sent while it compacts goes with the next request, as pi takes it after."""
    tree = tiny_session(tmp_path)
    roomy = ModelInfo("anthropic", "tiny", 8000, 1000, Price(0, 0, 0, 0))
    (tmp_path / "notes.txt").write_text("hello\n")
    harness = Harness(tree, tmp_path, providers, registry=ModelRegistry([roomy]),
                      default_model=("anthropic", "tiny"),
                      compaction=CompactionSettings(reserve_tokens=1000, keep_recent_tokens=300))
    assert harness.context_tokens() < 8000 - 1000  # no compaction before the prompt
    events: list[AgentEvent] = []
    harness.subscribe(events.append)
    loop = asyncio.get_running_loop()
    harness.subscribe(lambda e: loop.call_soon(harness.steer, "LATE")
                      if isinstance(e, CompactionStart) else None)
    fake.script(Reply([message_start(input_tokens=7500),
                       *tool_block(0, "c1", "read", {"path": "notes.txt"}),
                       *message_end("tool_use")]), text_reply("Read it."))
    await harness.prompt("Read the notes.")

    written = lines(Path(tree.path))
    kinds = [e["message"]["role"] if e["type"] == "message" else e["type"] for e in written]
    assert kinds[-6:] == ["user", "assistant", "toolResult", "compaction", "user", "assistant"]
    assert written[-2]["message"]["content"][0]["text"] == "LATE"
    names = [type(e).__name__ for e in events]
    at = names.index("CompactionStart")  # after the tool turn, before the next one starts
    assert names[at - 2:at + 3] == [
        "TurnEnd", "SavePoint", "CompactionStart", "CompactionEnd", "TurnStart"]
    start, end = events[at], events[at + 1]
    assert isinstance(start, CompactionStart) and start.reason == "threshold"
    assert isinstance(end, CompactionEnd) and not end.will_retry
    assert end.entry_id == written[-3]["id"]
    requests = fake.message_requests()
    assert len(requests) == 2
    assert "compacted into the following summary" in json.dumps(requests[1]["messages"][0])
    assert "LATE" in json.dumps(requests[1]["messages"][-1])


async def test_overflow_compacts_and_retries_once(
        session: Path, fake: FakeAnthropic, providers: Callable[[], AnthropicProvider]) -> None:
    tree = open_tree(session)
    harness = Harness(tree, session.parents[2], providers,
                      compaction=CompactionSettings(keep_recent_tokens=KEEP_B_REPEAT))
    events: list[AgentEvent] = []
    harness.subscribe(events.append)
    fake.script(
        error_reply(400, "invalid_request_error",
                    "prompt is too long: 250000 tokens > 200000 maximum"),
        text_reply("Recovered."),
    )
    count = len(lines(session))
    await harness.prompt("Document the query.")

    new = lines(session)[count:]
    assert [e["type"] for e in new] == [
        "message", "message", "message", "context_edit", "compaction", "message"]
    declared, user, failed, edit, compaction, reply = new
    assert declared["message"]["role"] == "system"  # the compaction keeps it for the retry
    assert user["message"]["role"] == "user"
    assert failed["message"]["role"] == "assistant"
    assert failed["message"]["stopReason"] == "error"
    assert "prompt is too long" in failed["message"]["errorMessage"]
    # Left out of the retry for good, as pi 1.6 writes it before compacting.
    assert (edit["targetId"], edit["replacement"]) == (failed["id"], None)
    assert compaction["parentId"] == edit["id"]
    assert reply["parentId"] == compaction["id"]
    assert reply["message"]["stopReason"] == "stop"
    assert reply["message"]["content"][0]["text"] == "Recovered."

    starts = [e for e in events if isinstance(e, CompactionStart)]
    ends = [e for e in events if isinstance(e, CompactionEnd)]
    assert [e.reason for e in starts] == ["overflow"]
    assert len(ends) == 1 and ends[0].entry_id == compaction["id"] and ends[0].will_retry

    requests = fake.message_requests()
    assert len(requests) == 2  # the failed call and exactly one retry
    retried = "".join(b["text"] for b in requests[1]["messages"][0]["content"])
    assert "compacted into the following summary" in retried


async def test_overflow_recovery_stays_on_the_turns_branch_when_another_writer_appends(
        session: Path, fake: FakeAnthropic, providers: Callable[[], AnthropicProvider]) -> None:
    """A leaf moved to another writer's entry as the run ended (before pi's post-run recovery)
    put the omission, the compaction and the retry on that writer's branch: the retry sent its
    prompt, not the user's. pi 1.6 recovers on its own leaf."""
    tree = open_tree(session)
    harness = Harness(tree, session.parents[2], providers,
                      compaction=CompactionSettings(keep_recent_tokens=KEEP_B_REPEAT))
    other = {"type": "message", "id": "0ther001", "parentId": TIP_B,
             "timestamp": "2026-12-01T10:00:00.000Z",
             "message": {"role": "user", "content": [{"type": "text", "text": "pi's prompt"}],
                         "timestamp": 1796119202000}}

    def other_writer(event: AgentEvent) -> None:
        if isinstance(event, MessageEnd) and isinstance(event.message, AssistantMessage) and \
                event.message.stop_reason == "error":
            with open(session, "ab") as handle:
                handle.write(json.dumps(other).encode() + b"\n")
            tree.refresh()  # the watcher's look, while the turn still runs

    harness.subscribe(other_writer)
    fake.script(error_reply(400, "invalid_request_error",
                            "prompt is too long: 250000 tokens > 200000 maximum"),
                text_reply("Recovered."))
    count = len(lines(session))
    await harness.prompt("Document the query.")
    new = [e for e in lines(session)[count:] if e["id"] != other["id"]]
    failed = next(e for e in new if e["type"] == "message" and
                  e["message"].get("stopReason") == "error")
    edit = next(e for e in new if e["type"] == "context_edit")
    assert edit["parentId"] == failed["id"]
    assert other["id"] not in tree.path_ids(new[-1]["id"])
    retried = fake.message_requests()[-1]["messages"][-1]
    assert "Document the query." in json.dumps(retried)


async def test_an_overflow_error_from_the_model_switched_from_is_not_compacted_and_retried(
        session: Path, fake: FakeAnthropic, providers: Callable[[], AnthropicProvider]) -> None:
    """The user switched models while the request failed: pi 1.6 requires the same model for
    every overflow (the new one may have room); pi-lsp compacted and asked the new one again."""
    harness = Harness(open_tree(session), session.parents[2], providers,
                      compaction=CompactionSettings(keep_recent_tokens=KEEP_B_REPEAT))
    events: list[AgentEvent] = []
    harness.subscribe(events.append)
    harness.subscribe(lambda e: harness.set_model("anthropic", "claude-haiku-4-5")
                      if isinstance(e, MessageStart) and isinstance(e.message, AssistantMessage)
                      else None)
    fake.script(error_reply(400, "invalid_request_error",
                            "prompt is too long: 250000 tokens > 200000 maximum"),
                text_reply("Asked again."))
    count = len(lines(session))
    await harness.prompt("Document the query.")

    new = lines(session)[count:]
    assert [e["type"] for e in new] == ["message", "message", "message", "model_change"]
    assert new[2]["message"]["stopReason"] == "error"
    assert not [e for e in events if isinstance(e, CompactionStart)]
    assert len(fake.message_requests()) == 1


async def test_an_answer_from_input_past_the_window_is_kept_and_compacted_as_overflow(
        session: Path, fake: FakeAnthropic, providers: Callable[[], AnthropicProvider]) -> None:
    """A server that truncates instead of refusing (usage input 250,000 > the 200,000 window):
    pi 1.6 counts that as an overflow, compacts and keeps the answer; pi-lsp saw no overflow."""
    harness = Harness(open_tree(session), session.parents[2], providers,
                      compaction=CompactionSettings(keep_recent_tokens=KEEP_B_REPEAT))
    events: list[AgentEvent] = []
    harness.subscribe(events.append)
    fake.script(Reply([message_start(input_tokens=250_000), *text_block(0, "Answered."),
                       *message_end()]))
    count = len(lines(session))
    await harness.prompt("Document the query.")

    new = lines(session)[count:]
    assert [e["type"] for e in new] == ["message", "message", "message", "compaction"]
    assert new[2]["message"]["content"][0]["text"] == "Answered."
    assert [e.reason for e in events if isinstance(e, CompactionStart)] == ["overflow"]
    ends = [e for e in events if isinstance(e, CompactionEnd)]
    assert len(ends) == 1 and ends[0].entry_id == new[3]["id"] and not ends[0].will_retry
    assert len(fake.message_requests()) == 1  # a complete answer is not asked for again


TOO_LONG = "prompt is too long: 250000 tokens > 200000 maximum"


async def test_an_overflow_again_after_the_retry_ends_as_pi_reports_it(
        session: Path, fake: FakeAnthropic, providers: Callable[[], AnthropicProvider]) -> None:
    """The compacted retry overflowed too: pi 1.6 tells it as a failed compaction_end with its
    own message, leaves the second reply in the context and asks no more; pi-lsp said nothing."""
    harness = Harness(open_tree(session), session.parents[2], providers,
                      compaction=CompactionSettings(keep_recent_tokens=KEEP_B_REPEAT))
    events: list[AgentEvent] = []
    harness.subscribe(events.append)
    fake.script(error_reply(400, "invalid_request_error", TOO_LONG),
                error_reply(400, "invalid_request_error", TOO_LONG))
    count = len(lines(session))
    await harness.prompt("Document the query.")

    new = lines(session)[count:]
    assert [e["type"] for e in new] == [
        "message", "message", "message", "context_edit", "compaction", "message"]
    assert new[5]["message"]["stopReason"] == "error"  # no context_edit: it stays, as in pi
    assert [e.reason for e in events if isinstance(e, CompactionStart)] == ["overflow"]
    ends = [e for e in events if isinstance(e, CompactionEnd)]
    assert [(e.entry_id, e.will_retry) for e in ends] == [(new[4]["id"], True), (None, False)]
    assert ends[1].error == (
        "Context overflow recovery failed after one compact-and-retry attempt. Try reducing "
        "context or switching to a larger-context model.")
    assert len(fake.message_requests()) == 2
    assert not harness.busy


def steer_during_reply(harness: Harness, nth: int, text: str) -> None:
    """Steer with `text` once the prompt's `nth` reply has begun (its request under way)."""
    replies: list[MessageStart] = []

    def steer(event: AgentEvent) -> None:
        if isinstance(event, MessageStart) and isinstance(event.message, AssistantMessage):
            replies.append(event)
            if len(replies) == nth:
                harness.steer(text)

    harness.subscribe(steer)


async def test_a_steer_sent_during_a_retry_that_overflows_again_is_sent(
        session: Path, fake: FakeAnthropic, providers: Callable[[], AnthropicProvider]) -> None:
    """The compacted retry overflowed too: pi 1.6 still sends what was steered meanwhile
    (_handlePostAgentRun returns hasQueuedMessages); pi-lsp ended the prompt and dropped it."""
    harness = Harness(open_tree(session), session.parents[2], providers,
                      compaction=CompactionSettings(keep_recent_tokens=KEEP_B_REPEAT))
    steer_during_reply(harness, 2, "LATE")  # the compacted retry's
    fake.script(error_reply(400, "invalid_request_error", TOO_LONG),
                error_reply(400, "invalid_request_error", TOO_LONG),
                text_reply("Late answer."))
    await harness.prompt("Document the query.")

    written = lines(session)
    assert written[-2]["message"]["content"][0]["text"] == "LATE"
    assert written[-1]["message"]["content"][0]["text"] == "Late answer."
    assert len(fake.message_requests()) == 3


async def test_a_steer_sent_during_an_overflow_whose_compaction_fails_is_sent(
        session: Path, fake: FakeAnthropic, providers: Callable[[], AnthropicProvider],
        model_summarizer: ModelSummarizer) -> None:
    """The overflow's compaction failed: pi 1.6 sends what was steered meanwhile
    (_runAutoCompaction returns false, then hasQueuedMessages); pi-lsp dropped it."""
    harness = Harness(open_tree(session), session.parents[2], providers,
                      summarizer=model_summarizer,
                      compaction=CompactionSettings(keep_recent_tokens=KEEP_B_REPEAT))
    steer_during_reply(harness, 1, "LATE")
    events: list[AgentEvent] = []
    harness.subscribe(events.append)
    fake.script(error_reply(400, "invalid_request_error", TOO_LONG),
                error_reply(500, "api_error", "the summary model is down"),
                text_reply("Late answer."))
    await harness.prompt("Document the query.")

    ends = [e for e in events if isinstance(e, CompactionEnd)]
    assert len(ends) == 1 and ends[0].entry_id is None and ends[0].error
    written = lines(session)
    assert written[-2]["message"]["content"][0]["text"] == "LATE"
    assert written[-1]["message"]["content"][0]["text"] == "Late answer."
    assert len(fake.message_requests()) == 3


async def test_a_cut_reply_again_after_the_retry_is_told_as_pis_truncated_recovery(
        session: Path, fake: FakeAnthropic, providers: Callable[[], AnthropicProvider]) -> None:
    """A reply cut below the model's output limit twice: pi 1.6 gives up with its truncated-
    response message; pi-lsp said nothing."""
    harness = Harness(open_tree(session), session.parents[2], providers,
                      compaction=CompactionSettings(keep_recent_tokens=KEEP_B_REPEAT))
    events: list[AgentEvent] = []
    harness.subscribe(events.append)
    cut = Reply([message_start(), *text_block(0, "Half an ans"),
                 *message_end("max_tokens", output_tokens=500)])
    fake.script(cut, cut)
    await harness.prompt("Document the query.")

    ends = [e for e in events if isinstance(e, CompactionEnd)]
    assert [e.error for e in ends] == [
        None, "Truncated response recovery failed after one compact-and-retry attempt."]
    assert len(fake.message_requests()) == 2


async def test_a_failed_threshold_compaction_is_told_as_pis_auto_compaction_failure(
        tmp_path: Path, fake: FakeAnthropic, providers: Callable[[], AnthropicProvider],
        model_summarizer: ModelSummarizer) -> None:
    """pi 1.6 says "Auto-compaction failed: …"; pi-lsp sent the bare error, which the editors
    showed as "Compaction failed: …". The error is pi's too: "Summarization failed: …" (it was
    the model's bare error)."""
    harness = Harness(tiny_session(tmp_path), tmp_path, providers, summarizer=model_summarizer,
                      registry=ModelRegistry([TINY]), default_model=("anthropic", "tiny"),
                      compaction=CompactionSettings(reserve_tokens=1000, keep_recent_tokens=300))
    events: list[AgentEvent] = []
    harness.subscribe(events.append)
    fake.script(error_reply(400, "invalid_request_error", "no summary today"),
                text_reply("Step 3 done."))
    await harness.prompt("Now step 3.")

    [end] = [e for e in events if isinstance(e, CompactionEnd)]
    assert (end.entry_id, end.error) == (
        None, "Auto-compaction failed: Summarization failed: Anthropic 400 invalid_request_error: "
              "no summary today")


async def test_the_compaction_before_a_prompt_goes_on_past_a_crashed_writers_tool_call(
        tmp_path: Path, fake: FakeAnthropic, providers: Callable[[], AnthropicProvider]) -> None:
    """The leaf is a call an earlier pi left with no result (killed while bash ran): the
    threshold compaction refused it as another program's running turn, and every prompt
    failed with "could not write to …" though a prompt goes on past such a call."""
    tree = tiny_session(tmp_path)
    tree.append_message(AssistantMessage(
        content=[ToolCall(id="toolu_1", name="bash", arguments={"command": "make test"})],
        api="anthropic-messages", provider="anthropic", model="tiny",
        usage=Usage(input=4000, output=10, total_tokens=4010), stop_reason="toolUse",
        timestamp=2000))
    harness = Harness(tree, tmp_path, providers, registry=ModelRegistry([TINY]),
                      default_model=("anthropic", "tiny"),
                      compaction=CompactionSettings(reserve_tokens=1000, keep_recent_tokens=300))
    events: list[AgentEvent] = []
    harness.subscribe(events.append)
    fake.script(text_reply("Going on."))
    await harness.prompt("go on")

    [end] = [e for e in events if isinstance(e, CompactionEnd)]
    assert end.entry_id is not None and end.error is None
    written = lines(Path(tree.path))
    assert written[-1]["message"]["content"][0]["text"] == "Going on."
    [body] = fake.message_requests()
    assert "No result provided" in json.dumps(body["messages"])


class DiskFullWhileSummarizing(ExtractiveSummarizer):
    """Extractive, but the disk fills up while the summary is written."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.monkeypatch = monkeypatch

    async def summarize(self, request: SummaryRequest) -> Summary:
        def no_space(fd: int, data: bytes) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.monkeypatch.setattr(appender.os, "write", no_space)
        return await super().summarize(request)


async def test_a_prompt_at_an_id_less_leaf_over_the_threshold_tells_no_compaction(
        tmp_path: Path, fake: FakeAnthropic, providers: Callable[[], AnthropicProvider]) -> None:
    """At a last line with no id, the context (the path up from it) is over the threshold, but
    pi 1.6 has no branch there and compacts nothing before the prompt; the harness must not
    start one there, which the compaction itself refuses, and tell its error."""
    tree = tiny_session(tmp_path)
    line = {"type": "custom", "customType": "x", "parentId": tree.leaf_id,
            "timestamp": "2026-12-01T00:00:00.000Z"}
    appender.append_lines(tree.path, [json.dumps(line).encode()])
    tree.refresh()
    harness = Harness(tree, tmp_path, providers, registry=ModelRegistry([TINY]),
                      default_model=("anthropic", "tiny"),
                      compaction=CompactionSettings(reserve_tokens=1000, keep_recent_tokens=300))
    assert tree.idless_leaf is not None and harness.context_tokens() > 4000 - 1000
    events: list[AgentEvent] = []
    harness.subscribe(events.append)
    fake.script(text_reply("Step 3 done."))
    await harness.prompt("Now step 3.")
    assert [e for e in events if isinstance(e, CompactionStart | CompactionEnd)] == []
    assert lines(Path(tree.path))[-1]["message"]["content"][0]["text"] == "Step 3 done."


async def compacted_after_a_full_reply(
        tree: SessionTree, root: Path, fake: FakeAnthropic,
        providers: Callable[[], AnthropicProvider], summarizer: Summarizer
        ) -> tuple[Harness, CompactionEnd]:
    """A prompt whose reply fills the window, so `summarizer` compacts after it; the harness
    and how that compaction ended."""
    roomy = ModelInfo("anthropic", "tiny", 8000, 1000, Price(0, 0, 0, 0))
    harness = Harness(tree, root, providers, registry=ModelRegistry([roomy]),
                      default_model=("anthropic", "tiny"), summarizer=summarizer,
                      compaction=CompactionSettings(reserve_tokens=1000, keep_recent_tokens=300))
    events: list[AgentEvent] = []
    harness.subscribe(events.append)
    fake.script(Reply([message_start(input_tokens=7500), *text_block(0, "Step 3 done."),
                       *message_end()]))
    await harness.prompt("Now step 3.")
    [end] = [e for e in events if isinstance(e, CompactionEnd)]
    return harness, end


async def test_a_compaction_after_a_reply_that_cannot_be_written_is_told_not_raised(
        tmp_path: Path, fake: FakeAnthropic, providers: Callable[[], AnthropicProvider],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk filled up during the compaction after a reply: the prompt raised
    WriteFailedError though its answer was written, and the compaction's start had no end.
    pi 1.6 lets no automatic compaction's failure out of the prompt."""
    tree = tiny_session(tmp_path)
    harness, end = await compacted_after_a_full_reply(
        tree, tmp_path, fake, providers, DiskFullWhileSummarizing(monkeypatch))
    assert (end.entry_id, end.error) == (
        None, f"Auto-compaction failed: could not write to {tree.path}: No space left on device")
    assert lines(Path(tree.path))[-1]["message"]["content"][0]["text"] == "Step 3 done."
    assert not harness.busy


class AnotherWriterCallsMeanwhile(ExtractiveSummarizer):
    """Extractive, but another program writes a tool call under the leaf while it summarizes
    (the watcher takes it in)."""

    def __init__(self, tree: SessionTree) -> None:
        self.tree = tree

    async def summarize(self, request: SummaryRequest) -> Summary:
        call = {"type": "message", "id": "f0ca11ed", "parentId": self.tree.leaf_id,
                "timestamp": "2026-12-01T00:00:00.000Z", "message": {
                    "role": "assistant", "api": "anthropic-messages", "provider": "anthropic",
                    "model": "tiny", "stopReason": "toolUse", "timestamp": 1, "content": [
                        {"type": "toolCall", "id": "toolu_o", "name": "bash",
                         "arguments": {"command": "make test"}}]}}
        appender.append_lines(self.tree.path, [json.dumps(call).encode()])
        self.tree.refresh()
        return await super().summarize(request)


async def test_a_compaction_after_a_reply_is_not_written_under_a_call_another_program_made(
        tmp_path: Path, fake: FakeAnthropic, providers: Callable[[], AnthropicProvider]) -> None:
    """Another program's tool call came under the reply while the compaction after it was
    summarized: the compaction was written under that call, before its result (DESIGN rule 7)."""
    tree = tiny_session(tmp_path)
    _harness, end = await compacted_after_a_full_reply(
        tree, tmp_path, fake, providers, AnotherWriterCallsMeanwhile(tree))
    assert end.entry_id is None and end.error is not None
    assert "another program is running a turn" in end.error
    assert [w["type"] for w in lines(Path(tree.path))[-2:]] == ["message", "message"]
    assert lines(Path(tree.path))[-1]["id"] == "f0ca11ed"


async def test_a_failed_overflow_compaction_is_told_as_pis_overflow_recovery_failure(
        session: Path, fake: FakeAnthropic, providers: Callable[[], AnthropicProvider],
        model_summarizer: ModelSummarizer) -> None:
    """pi 1.6 says "Context overflow recovery failed: …"; pi-lsp sent the bare error, which the
    editors showed as "Compaction failed: …". The error is pi's "Summarization failed: …" too."""
    harness = Harness(open_tree(session), session.parents[2], providers,
                      summarizer=model_summarizer,
                      compaction=CompactionSettings(keep_recent_tokens=KEEP_B_REPEAT))
    events: list[AgentEvent] = []
    harness.subscribe(events.append)
    fake.script(error_reply(400, "invalid_request_error", TOO_LONG),
                error_reply(400, "invalid_request_error", "no summary today"))
    await harness.prompt("Document the query.")

    [end] = [e for e in events if isinstance(e, CompactionEnd)]
    assert (end.entry_id, end.error) == (None, "Context overflow recovery failed: Summarization "
                                               "failed: Anthropic 400 invalid_request_error: no "
                                               "summary today")
    assert len(fake.message_requests()) == 2  # nothing compacted, so not asked again


async def test_an_overflow_after_a_good_turn_of_the_retry_is_recovered_again(
        session: Path, fake: FakeAnthropic, providers: Callable[[], AnthropicProvider]) -> None:
    """The retry made two tool calls, then its next turn overflowed: pi 1.6 counts a good reply
    as the end of a recovery and compacts and retries again; pi-lsp ended the prompt."""
    # Long enough that the second compaction has something to summarize.
    (session.parents[2] / "notes.txt").write_text("hello\n" * 2000)
    harness = Harness(open_tree(session), session.parents[2], providers,
                      compaction=CompactionSettings(keep_recent_tokens=KEEP_B_REPEAT))
    events: list[AgentEvent] = []
    harness.subscribe(events.append)
    fake.script(error_reply(400, "invalid_request_error", TOO_LONG),
                *(Reply([message_start(), *tool_block(0, call, "read", {"path": "notes.txt"}),
                         *message_end("tool_use")]) for call in ("c1", "c2")),
                error_reply(400, "invalid_request_error", TOO_LONG),
                text_reply("Recovered twice."))
    await harness.prompt("Document the query.")

    assert [e.will_retry for e in events if isinstance(e, CompactionEnd)] == [True, True]
    assert lines(session)[-1]["message"]["content"][0]["text"] == "Recovered twice."
    assert len(fake.message_requests()) == 5


def assert_cut_left_out_and_asked_again(new: list[dict[str, Any]], events: list[AgentEvent],
                                        fake: FakeAnthropic, answer: str) -> None:
    """As pi 1.6 recovers from a cut reply: it is left out by a context edit, the context is
    compacted (once, to ask again), and the second request ends on the user's message."""
    assert [e["type"] for e in new] == [
        "message", "message", "message", "context_edit", "compaction", "message"]
    cut = new[2]
    assert cut["message"]["stopReason"] == "length"
    assert (new[3]["targetId"], new[3]["replacement"]) == (cut["id"], None)
    assert new[5]["message"]["content"][0]["text"] == answer
    ends = [e for e in events if isinstance(e, CompactionEnd)]
    assert len(ends) == 1 and ends[0].will_retry
    requests = fake.message_requests()
    assert len(requests) == 2 and requests[1]["messages"][-1]["role"] == "user"


async def test_a_length_stop_with_the_window_full_and_nothing_written_is_retried(
        session: Path, fake: FakeAnthropic, providers: Callable[[], AnthropicProvider]) -> None:
    """A server that fills the window with truncated input and stops at the length limit with no
    output: pi 1.6 leaves the reply out, compacts and asks again; pi-lsp stopped there."""
    harness = Harness(open_tree(session), session.parents[2], providers,
                      compaction=CompactionSettings(keep_recent_tokens=KEEP_B_REPEAT))
    events: list[AgentEvent] = []
    harness.subscribe(events.append)
    fake.script(Reply([message_start(input_tokens=199_000),
                       *message_end("max_tokens", output_tokens=0)]),
                text_reply("Recovered."))
    count = len(lines(session))
    await harness.prompt("Document the query.")

    assert_cut_left_out_and_asked_again(lines(session)[count:], events, fake, "Recovered.")


async def test_a_length_stop_below_the_models_output_limit_is_compacted_and_retried(
        session: Path, fake: FakeAnthropic, providers: Callable[[], AnthropicProvider]) -> None:
    """A reply cut at 500 output tokens where the model writes up to 64,000 (the limit lowered
    for a full context): pi 1.6 (isRecoverableLength) leaves it out, compacts and asks again
    once; pi-lsp ended the prompt on the cut reply."""
    harness = Harness(open_tree(session), session.parents[2], providers,
                      compaction=CompactionSettings(keep_recent_tokens=KEEP_B_REPEAT))
    assert harness.model().max_tokens == 64_000
    events: list[AgentEvent] = []
    harness.subscribe(events.append)
    fake.script(Reply([message_start(), *text_block(0, "Half an ans"),
                       *message_end("max_tokens", output_tokens=500)]),
                text_reply("Whole answer."))
    count = len(lines(session))
    await harness.prompt("Document the query.")

    assert_cut_left_out_and_asked_again(lines(session)[count:], events, fake, "Whole answer.")
    assert [e.reason for e in events if isinstance(e, CompactionStart)] == ["overflow"]
    assert "Half an ans" not in json.dumps(fake.message_requests()[1])


async def test_busy_harness_refuses_summaries(
        session: Path, fake: FakeAnthropic, providers: Callable[[], AnthropicProvider]) -> None:
    tree = open_tree(session)
    harness = Harness(tree, session.parents[2], providers)
    fake.script(text_reply("slow", " reply", delay=0.1))
    task = asyncio.create_task(harness.prompt("Take your time."))
    await until(lambda: harness.busy, "the turn to start")
    assert harness.phase == "turn"
    with pytest.raises(BusyError):
        await harness.compact()
    with pytest.raises(BusyError):
        await harness.branch_with_summary(FORK)
    with pytest.raises(BusyError):
        harness.branch(FORK)
    await task
    kinds = [e["type"] for e in lines(session)]
    assert kinds.count("compaction") == 1 and kinds.count("branch_summary") == 1
    assert lines(session)[-1]["message"]["content"][0]["text"] == "slow reply"


# -- 7. the command line -------------------------------------------------------------------


def cli_in(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    env["PI_CODING_AGENT_DIR"] = str(tmp_path / "agent")
    return run_cli(*args, cwd=tmp_path, env=env)


def test_cli_compact_plan_writes_nothing(tmp_path: Path, session: Path) -> None:
    before = session.read_bytes()
    done = cli_in(tmp_path, "compact", str(session), "--plan",
                   "--keep-recent-tokens", str(KEEP_B_REPEAT))
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert set(printed) == {"firstKeptEntryId", "isSplitTurn", "tokensBefore",
                            "previousSummary", "messagesToSummarize", "turnPrefixMessages",
                            "readFiles", "modifiedFiles"}
    plan = plan_at(open_tree(session), TIP_B, KEEP_B_REPEAT)
    assert printed == json.loads(encoder.encode(plan_summary(plan)))
    assert printed["firstKeptEntryId"] == "be05c22a" and printed["messagesToSummarize"] == 4
    assert session.read_bytes() == before


def test_cli_compact_plan_says_it_would_wait_for_a_tool_call_with_no_result(
        tmp_path: Path) -> None:
    """`compact --plan` showed a plan that `compact` then refused as "could not write to
    <file>: another program is running a turn …", a disk error's words; `branch --summarize`
    to the call was refused in those words too."""
    path = tmp_path / "s.jsonl"
    call = AssistantMessage(
        content=[ToolCall(id="c1", name="bash", arguments={"command": "make test"})],
        api="anthropic-messages", provider="anthropic", model="m", usage=Usage(),
        stop_reason="toolUse", timestamp=4)
    chain_file(path, [{"role": "user", "content": "first " * 200, "timestamp": 1},
                      reply("first answer " * 200, 2),
                      {"role": "user", "content": "run the tests", "timestamp": 3},
                      json.loads(encoder.encode(call))])
    before = path.read_bytes()
    plan = cli_in(tmp_path, "compact", str(path), "--plan", "--keep-recent-tokens", "100")
    assert plan.returncode == 1 and json.loads(plan.stdout) is None, plan
    reason = plan.stderr.removeprefix("pi-lsp: compact would refuse: ")
    assert reason.startswith("another program is running a turn in this session: its tool "
                             "call bash has no result yet"), plan.stderr
    done = cli_in(tmp_path, "compact", str(path), "--keep-recent-tokens", "100")
    assert (done.returncode, done.stderr) == (2, f"pi-lsp: {reason}")
    assert path.read_bytes() == before
    tree = open_tree(path)
    branch(tree, "m2")
    tree.append_message(UserMessage(content="another way", timestamp=5))
    before = path.read_bytes()
    summary = cli_in(tmp_path, "branch", str(path), "--to", "m4", "--summarize")
    assert (summary.returncode, summary.stderr) == (2, f"pi-lsp: {reason}")
    assert path.read_bytes() == before


def test_cli_compact_appends_an_extractive_compaction(tmp_path: Path, session: Path) -> None:
    count = len(lines(session))
    done = cli_in(tmp_path, "compact", str(session), "--keep-recent-tokens", "300", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    written = lines(session)
    assert len(written) == count + 1
    entry = written[-1]
    assert entry["type"] == "compaction" and entry["id"] == result["entryId"]
    assert entry["parentId"] == TIP_B
    assert entry["details"]["summarizer"] == "extractive"
    assert entry["summary"] == result["summary"]
    assert entry["firstKeptEntryId"] == result["firstKeptEntryId"]

    check = cli_in(tmp_path, "check", str(session))
    assert check.returncode == 0, check.stdout
    assert "0 problem(s)" in check.stdout


def test_cli_branch_with_summary(tmp_path: Path, session: Path) -> None:
    done = cli_in(tmp_path, "branch", str(session), "--to", FORK, "--summarize", "--json")
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["editorText"] == FORK_TEXT
    assert printed["leafId"] == printed["summaryEntryId"]
    entry = lines(session)[-1]
    assert entry["type"] == "branch_summary" and entry["id"] == printed["summaryEntryId"]
    assert entry["parentId"] == FORK_PARENT and entry["fromId"] == TIP_B
    assert entry["details"]["summarizer"] == "extractive"


def test_cli_branch_summary_reads_within_the_window_of_the_model_at_the_leaf(
        tmp_path: Path, session: Path) -> None:
    """As the server does: the default model's window (a tiny one here) does not matter."""
    plain = session.with_name("plain.jsonl")
    shutil.copy(session, plain)
    baseline = cli_in(tmp_path, "branch", str(plain), "--to", FORK, "--summarize", "--json")
    assert baseline.returncode == 0, baseline.stderr
    agent = tmp_path / "agent"
    agent.mkdir(exist_ok=True)
    (agent / "settings.json").write_text(json.dumps({"defaultModel": "tiny", "models": [{
        "provider": "anthropic", "id": "tiny", "contextWindow": 16_400, "maxTokens": 1024,
        "price": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}]}))
    done = cli_in(tmp_path, "branch", str(session), "--to", FORK, "--summarize", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)["summary"]
    assert "Let's not swap in an ORM" in summary  # the default's window had room for nothing
    assert summary == json.loads(baseline.stdout)["summary"]


def test_cli_branch_to_an_unknown_entry(tmp_path: Path, session: Path) -> None:
    before = session.read_bytes()
    done = cli_in(tmp_path, "branch", str(session), "--to", "nope")
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1
    assert "nope" in done.stderr and "Traceback" not in done.stderr
    assert session.read_bytes() == before


def test_an_extractive_summary_carried_through_many_compactions_stays_bounded() -> None:
    """Each compaction merged every earlier line and added a focus line: 40 of them made a
    42K-character summary with 40 focus lines (found in review)."""
    summary = None
    for n in range(40):
        messages: list[Any] = []
        for i in range(10):
            messages.append(UserMessage(content=f"round {n} task {i}: you must keep it short",
                                        timestamp=1))
            messages.append(AssistantMessage(
                content=[TextContent(text=f"r{n}.{i} done, decided to use X{n}{i}.")], api="a",
                provider="p", model="m", usage=Usage(), stop_reason="stop", timestamp=1))
        summary = extractive_summary(SummaryRequest("history", messages, summary,
                                                    f"focus on round {n}"))
    assert summary is not None and len(summary) < 4000
    assert summary.count("Focus: ") == 1 and "Focus: focus on round 39" in summary
    decisions = summary.split("## Key Decisions\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(decisions) == MERGED_ITEMS and "X399" in decisions[-1]


# -- refused and held summaries (found in review) -------------------------------------------


@pytest.mark.parametrize("reply", ["cut off", "tool call"])
@pytest.mark.parametrize("kind", ["compaction", "branch summary"])
async def test_a_summary_pi_would_refuse_writes_nothing(
        session: Path, fake: FakeAnthropic, model_summarizer: ModelSummarizer, reply: str,
        kind: str) -> None:
    """A summary cut off at the token cap, or one that calls a tool, was written whole (the file
    lists added) and the leaf moved onto it; pi 1.6 refuses both (getSummarizationFailure)."""
    tree = open_tree(session)
    before = session.read_bytes()
    if reply == "cut off":
        fake.script(Reply([message_start(), *text_block(0, "## Goal\nhalf a sum"),
                           *message_end("max_tokens")]))
    else:
        fake.script(Reply([message_start(), *text_block(0, "## Goal\nlet me look"),
                           *tool_block(1, "c1", "read", {"path": "x"}),
                           *message_end("tool_use")]))
    label = "Summarization" if kind == "compaction" else "Branch summarization"
    why = "failed: generation hit the token cap" if reply == "cut off" \
        else "attempted to call a tool"
    with pytest.raises(SummaryError, match=f"^{label} {why}"):
        if kind == "compaction":
            await compact(tree, TIP_A, model_summarizer,
                          CompactionSettings(keep_recent_tokens=KEEP_A_WHOLE))
        else:
            await branch_with_summary(tree, FORK, model_summarizer, BIG_BUDGET)
    assert session.read_bytes() == before and open_tree(session).leaf_id == TIP_B
    [request] = fake.message_requests()
    assert request["max_tokens"] == model_summarizer.model.max_tokens  # pi 1.6's (#9512)


async def test_the_focus_reaches_a_split_turns_summary(
        tmp_path: Path, fake: FakeAnthropic, model_summarizer: ModelSummarizer) -> None:
    """One long turn: its start is the only thing summarized, and the user's focus was left out
    of that request (pi 1.6 adds it to the turn prefix's too)."""
    tree = SessionTree.create(str(tmp_path / "one.jsonl"), str(tmp_path))
    tree.append_message(UserMessage(content="Refactor the data layer.", timestamp=1))
    for n in range(6):
        tree.append_message(AssistantMessage(
            content=[TextContent(text="working " * 200),
                     ToolCall(id=f"c{n}", name="read", arguments={"path": f"f{n}.py"})],
            api="anthropic-messages", provider="anthropic", model="claude-sonnet-4-5",
            usage=Usage(), stop_reason="toolUse", timestamp=2 + n))
        tree.append_message(ToolResultMessage(tool_call_id=f"c{n}", tool_name="read",
                                              content=[TextContent(text="x" * 800)],
                                              is_error=False, timestamp=2 + n))
    fake.script(text_reply("## Original Request\nrefactor"))
    await compact(tree, tree.leaf_id, model_summarizer,
                  CompactionSettings(keep_recent_tokens=600), "keep the SQL details")
    [body] = fake.message_requests()
    assert "Additional focus: keep the SQL details" in body["messages"][0]["content"][0]["text"]


@pytest.mark.parametrize("job", ["compact", "branch_with_summary"])
async def test_settings_changed_during_a_summary_are_written_when_it_ends(
        session: Path, providers: Callable[[], AnthropicProvider], job: str) -> None:
    """pi.setModel and pi.setName during a compaction or branch summary were queued for a save
    point no job reaches: the next prompt went to the old model."""
    tree = open_tree(session)
    harness = Harness(tree, session.parents[2], providers,
                      compaction=CompactionSettings(keep_recent_tokens=300))
    count = len(lines(session))
    work = asyncio.create_task(harness.compact() if job == "compact"
                               else harness.branch_with_summary(FORK))
    while harness.phase == "idle":  # its first step: the job holds the session
        await asyncio.sleep(0)
    harness.set_model("anthropic", "claude-haiku-4-5")
    harness.set_name("renamed")
    assert len(lines(session)) == count  # held while the job runs
    await work
    kinds = [e["type"] for e in lines(session)[count:]]
    assert kinds[-2:] == ["model_change", "session_info"], kinds
    assert harness.model().id == "claude-haiku-4-5"


# pi 1.6's combineUsage (dist/core/usage-totals.js) on the same two usages, as it writes them.
_ONE_1H = Usage(input=100, output=20, total_tokens=120, cache_write_1h=0,
                cost=Cost(input=1, output=2, total=3, total_from_provider=False))
_SUMS_BY_PI = [
    ((_ONE_1H, _ONE_1H),
     '{"input":200,"output":40,"cacheRead":0,"cacheWrite":0,"cacheWrite1h":0,"totalTokens":240,'
     '"cost":{"input":2,"output":4,"cacheRead":0,"cacheWrite":0,"total":6,'
     '"totalFromProvider":false}}'),
    ((_ONE_1H, Usage(input=100, output=20, total_tokens=120, cache_write_1h=0, reasoning=5,
                      cost=Cost(input=1, output=2, total=3, total_from_provider=False))),
     '{"input":200,"output":40,"cacheRead":0,"cacheWrite":0,"cacheWrite1h":0,"reasoning":5,'
     '"totalTokens":240,"cost":{"input":2,"output":4,"cacheRead":0,"cacheWrite":0,"total":6,'
     '"totalFromProvider":false}}'),
    ((Usage(input=1, output=2, total_tokens=3), Usage(input=1, output=2, total_tokens=3)),
     '{"input":2,"output":4,"cacheRead":0,"cacheWrite":0,"totalTokens":6,"cost":{"input":0,'
     '"output":0,"cacheRead":0,"cacheWrite":0,"total":0,"totalFromProvider":false}}'),
]


@pytest.mark.parametrize(("usages", "written"), _SUMS_BY_PI)
def test_two_summaries_usage_is_summed_as_pi_sums_it(usages: tuple[Usage, Usage],
                                                     written: str) -> None:
    """A split turn's two summaries summed their usage without the 1h cache writes and the
    reasoning tokens either reported, and left out whether the cost was the provider's; pi
    1.6's combineUsage keeps them, in its own key order."""
    first, second = (Summary("t", usage, "anthropic-messages") for usage in usages)
    summed = combined(first, second, "t").usage_json()
    assert summed is not None and bytes(summed).decode() == written
