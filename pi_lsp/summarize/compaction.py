"""Compaction: pi's deterministic plan, and turning a plan into a compaction entry."""

from __future__ import annotations

from typing import Any

import msgspec

from pi_lsp.agent.retry import SummaryRetries
from pi_lsp.context.build import branch_path
from pi_lsp.context.projection import (
    Projection,
    entry_messages,
    message_role,
    project_path,
)
from pi_lsp.context.replay import checkpoint_of, current_system_message
from pi_lsp.context.tokens import decode_all, estimate_tokens, projected_context_size
from pi_lsp.session.check import another_turn_at
from pi_lsp.session.entries import (
    CompactionEntry,
    ContextEditEntry,
    ReadMessage,
    SystemMessage,
    UnreadMessage,
    head_decoder,
)
from pi_lsp.session.journal import Record
from pi_lsp.session.jsontext import js_string, js_truthy
from pi_lsp.session.records import decode_entry
from pi_lsp.session.tree import SessionTree
from pi_lsp.summarize.fileops import FileLists, FileOps, format_file_lists
from pi_lsp.summarize.summarizer import (
    SPLIT_TURN_MARK,
    Summarizer,
    Summary,
    SummaryRequest,
    combined,
)

NO_HISTORY = "No prior history."


class CompactionSettings(msgspec.Struct, rename="camel", omit_defaults=True):
    enabled: bool = True
    reserve_tokens: int = 16384
    keep_recent_tokens: int = 20000


class CompactionPlan(msgspec.Struct):
    first_kept_entry_id: str
    is_split_turn: bool
    tokens_before: int
    # As the previous compaction holds it, any type (UNSET: missing); None with none.
    previous_summary: Any
    messages_to_summarize: list[ReadMessage]
    turn_prefix_messages: list[ReadMessage]
    files: FileLists


class PlanSummary(msgspec.Struct, rename="camel"):
    """A plan as printed: message lists as counts."""

    first_kept_entry_id: str
    is_split_turn: bool
    tokens_before: int
    previous_summary: Any  # as in the plan (a missing one is left out, as pi prints it)
    messages_to_summarize: int
    turn_prefix_messages: int
    read_files: list[str]
    modified_files: list[str]


def plan_summary(plan: CompactionPlan) -> PlanSummary:
    return PlanSummary(
        plan.first_kept_entry_id, plan.is_split_turn, plan.tokens_before, plan.previous_summary,
        len(plan.messages_to_summarize), len(plan.turn_prefix_messages),
        plan.files.read_files, plan.files.modified_files,
    )


CUT_ROLES = frozenset({"user", "assistant", "bashExecution", "custom", "branchSummary",
                       "compactionSummary"})
TURN_START_ROLES = frozenset({"user", "bashExecution", "custom", "branchSummary",
                              "compactionSummary"})


class _Step(msgspec.Struct):
    """A projected entry with its messages read."""

    record: Record
    messages: list[ReadMessage]
    roles: list[str]
    omitted: bool  # it would contribute messages, but an edit removed them


def _role(raw: msgspec.Raw) -> str:
    try:
        return head_decoder.decode(raw).role
    except msgspec.ValidationError:
        return ""


def _steps(projection: Projection) -> list[_Step]:
    return [_Step(e.record, decode_all(e.messages), [_role(m) for m in e.messages],
                  not e.messages and e.record.env.type != "context_edit"
                  and bool(entry_messages(e.record)))
            for e in projection.entries]


def _has_role(step: _Step, roles: frozenset[str]) -> bool:
    return step.record.env.type != "compaction" and any(r in roles for r in step.roles)


def _tokens(step: _Step) -> int:
    return sum(estimate_tokens(m) for m in step.messages)


def _only_failed_attempt_after(steps: list[_Step]) -> bool:
    """Whether what follows a cut is only a failed reply (and its results) an edit omitted,
    which pi 1.6 steps over rather than keep."""
    omitted_ids = {s.record.env.id for s in steps if s.omitted}
    for step in steps:
        if step.record.env.type == "context_edit":
            edit = decode_entry(step.record)
            if isinstance(edit, ContextEditEntry) and edit.replacement is not None \
                    and edit.target_id not in omitted_ids:
                return False
    return any(s.omitted and message_role(s.record) == "assistant" for s in steps) and all(
        s.record.env.type != "compaction" and not s.messages for s in steps)


def find_cut_point(steps: list[_Step], start: int, keep_recent_tokens: int) -> tuple[int, int]:
    """(first kept index, turn start index or -1), keeping about `keep_recent_tokens`."""
    end = len(steps)
    cut_points = [i for i in range(start, end) if _has_role(steps[i], CUT_ROLES)]
    if not cut_points:
        return start, -1
    cut, total, exceeded = cut_points[0], 0, False
    for i in range(end - 1, start - 1, -1):
        tokens = _tokens(steps[i])
        if tokens == 0:
            continue
        total += tokens
        if total >= keep_recent_tokens:
            exceeded = True
            cut = next((c for c in cut_points if c >= i), cut_points[-1])
            break
    if exceeded and _only_failed_attempt_after(steps[cut + 1:]):
        cut += 1
    while cut > start and steps[cut - 1].record.env.type != "compaction" \
            and not steps[cut - 1].messages:
        cut -= 1  # settings, labels, omitted entries and the like travel with what follows
    if _has_role(steps[cut], TURN_START_ROLES):
        return cut, -1
    turn = next((i for i in range(cut, start - 1, -1)
                 if _has_role(steps[i], TURN_START_ROLES)), -1)
    return cut, turn


def _summary_messages(steps: list[_Step]) -> list[ReadMessage]:
    """The conversation to summarize: pi keeps every message but system ones, whatever its
    role (the compaction carries the system messages' replay)."""
    return [m for s in steps if s.record.env.type != "compaction"
            for m in s.messages if not _is_system(m)]


def _is_system(message: ReadMessage) -> bool:
    return isinstance(message, SystemMessage) or \
        (isinstance(message, UnreadMessage) and message.role == "system")


def prepare_compaction(path: list[Record], settings: CompactionSettings) -> CompactionPlan | None:
    """pi 1.6's `prepareCompaction` over the projection; None when nothing would be summarized."""
    plan = _plan_or_reason(path, settings)
    return plan if isinstance(plan, CompactionPlan) else None


def _all_kept(steps: list[_Step], after_summary: bool, settings: CompactionSettings) -> str:
    """Why nothing is summarized when the cut keeps every message of `steps`."""
    count = len(_summary_messages(steps))
    where = " after the last compaction's summary" if after_summary else ""
    keep = settings.keep_recent_tokens
    if count == 0:
        return f"nothing to compact: the context has no messages{where}"
    if sum(_tokens(step) for step in steps) >= keep:
        # Over the budget, yet the only place to cut is the first message (one message
        # outweighs it, say): find_cut_point never cuts inside a message.
        return (f"nothing to compact: the newest keepRecentTokens ({keep}) reach back to the "
                f"first message{where}, so there is no earlier place to cut")
    noun, verb = ("message", "is") if count == 1 else ("messages", "are")
    return (f"nothing to compact: the context's {count} {noun}{where} {verb} within the kept "
            f"window (keepRecentTokens {keep})")


def _plan_or_reason(path: list[Record], settings: CompactionSettings) -> CompactionPlan | str:
    """prepare_compaction's plan, or the reason (NothingToCompactError's words) there is none."""
    if not path:
        return "nothing to compact: the path is empty"
    if path[-1].env.type == "compaction":
        return "nothing to compact: the path already ends in a compaction"
    projection = project_path(path)
    steps = _steps(projection)
    previous: CompactionEntry | None = None
    if steps and steps[0].record.env.type == "compaction" and steps[0].messages:
        entry = decode_entry(steps[0].record)
        previous = entry if isinstance(entry, CompactionEntry) else None
    start = 1 if previous is not None else 0
    tokens_before = projected_context_size(projection, path)
    cut, turn = find_cut_point(steps, start, settings.keep_recent_tokens)
    if cut >= len(steps):
        return _all_kept(steps[start:], previous is not None, settings)
    first_kept = steps[cut].record.env.id
    split = turn != -1
    to_summarize = _summary_messages(steps[start:turn if split else cut])
    prefix = _summary_messages(steps[turn:cut]) if split else []
    if not (to_summarize or prefix):
        return _all_kept(steps[start:], previous is not None, settings)
    if first_kept is None:
        return (f"nothing to compact: the first entry to keep (line {steps[cut].record.line}) "
                "has no id for the compaction to name")
    files = FileOps()
    if previous is not None and not js_truthy(previous.from_hook):
        files.add_details(previous.details)
    for message in (*to_summarize, *prefix):
        files.add_message(message)
    return CompactionPlan(
        first_kept_entry_id=first_kept, is_split_turn=split, tokens_before=tokens_before,
        previous_summary=previous.summary if previous else None,
        messages_to_summarize=to_summarize, turn_prefix_messages=prefix, files=files.lists(),
    )


class CompactionResult(msgspec.Struct, rename="camel"):
    entry_id: str
    summary: str
    first_kept_entry_id: str
    tokens_before: int
    details: dict[str, Any]


class NothingToCompactError(Exception):
    """A compaction refused, in words that say why."""


def summary_details(files: FileLists, summarizer: Summarizer | None) -> dict[str, Any]:
    """pi's file lists, and which summarizer wrote the summary (None: none did)."""
    details: dict[str, Any] = msgspec.to_builtins(files)
    if summarizer is not None and summarizer.extractive:
        details["summarizer"] = "extractive"  # so nobody mistakes it for a model's summary
    return details


async def summarize_plan(plan: CompactionPlan, summarizer: Summarizer,
                         settings: CompactionSettings, instructions: str | None,
                         thinking_level: str = "off", retries: SummaryRetries | None = None
                         ) -> Summary:
    """The summary of a plan, file lists included, with the usage of every request made; the
    model thinks at `thinking_level` and tells its retries to `retries`."""
    # pi writes the previous summary into the prompt as JavaScript's `${previousSummary}`.
    previous = js_string(plan.previous_summary) if js_truthy(plan.previous_summary) else None
    history = SummaryRequest("history", plan.messages_to_summarize, previous, instructions,
                             thinking_level, retries)
    if plan.is_split_turn and plan.turn_prefix_messages:
        prefix = SummaryRequest("turn_prefix", plan.turn_prefix_messages,
                                instructions=instructions, thinking_level=thinking_level,
                                retries=retries)
        # pi 1.6: one request after the other, and the previous summary survives a split turn
        # that adds no history.
        earlier = await summarizer.summarize(history) if plan.messages_to_summarize \
            else Summary(previous or NO_HISTORY)
        turn = await summarizer.summarize(prefix)
        summary = combined(earlier, turn, f"{earlier.text}{SPLIT_TURN_MARK}\n\n{turn.text}")
    else:
        summary = await summarizer.summarize(history)
    return msgspec.structs.replace(summary, text=summary.text + format_file_lists(plan.files))


def plan_or_refusal(path: list[Record], settings: CompactionSettings) -> CompactionPlan:
    """The plan `compact` would carry out on `path`; NothingToCompactError when it would refuse."""
    plan = _plan_or_reason(path, settings)
    if isinstance(plan, str):
        raise NothingToCompactError(plan)
    return plan


def refuse_open_call(tree: SessionTree, entry_id: str | None) -> None:
    """NothingToCompactError, saying why, when a compaction under `entry_id` would come between
    another program's tool call and its result (`another_turn_at`)."""
    reason = another_turn_at(tree, entry_id)
    if reason is not None:
        raise NothingToCompactError(reason)


def compaction_plan(tree: SessionTree, leaf_id: str | None,
                    settings: CompactionSettings) -> CompactionPlan:
    """The plan a compaction asked for at `leaf_id` would carry out; NothingToCompactError, in
    the words that job would fail with, when it would refuse."""
    refuse_open_call(tree, leaf_id)
    # pi compacts under a leaf like 5 or true, which pi-lsp cannot name: say so first.
    refusal = None if leaf_id else tree.unnameable_leaf() or tree.branchless_leaf()
    if refusal is not None:
        raise NothingToCompactError(f"nothing to compact: {refusal}")
    return plan_or_refusal(branch_path(tree, leaf_id), settings)


async def compact(tree: SessionTree, leaf_id: str | None, summarizer: Summarizer,
                  settings: CompactionSettings, instructions: str | None = None,
                  thinking_level: str = "off", *, automatic: bool = False,
                  retries: SummaryRetries | None = None) -> CompactionResult:
    """Summarize the path up to `leaf_id` (at `thinking_level`, the one in force there) and
    append the compaction there (or, when another writer went on from there meanwhile, after
    what it wrote: that stays in the context). Refused under another writer's tool call with
    nothing under it yet (`refuse_open_call`); `automatic`, only under one written while it
    summarized: the prompt it runs for goes on past one that was there before. The summary's
    retries are told to `retries`."""
    before = tree.leaf_id
    # Checked before the summary is paid for, and again where it is written.
    plan = (plan_or_refusal(branch_path(tree, leaf_id), settings) if automatic
            else compaction_plan(tree, leaf_id, settings))
    summary = await summarize_plan(plan, summarizer, settings, instructions, thinking_level,
                                   retries)
    details = summary_details(plan.files, summarizer)
    # Grown only to an entry with an id: under an id-less line pi-lsp could only start a root,
    # its kept messages off its path, so it writes where it planned.
    grown = bool(tree.leaf_id) and leaf_id == before != tree.leaf_id and \
        leaf_id in tree.path_ids(tree.leaf_id)
    parent = tree.leaf_id if grown else leaf_id
    if not automatic or parent != leaf_id:  # another program went on meanwhile: its call
        refuse_open_call(tree, parent)
    with tree.leaf_moved(parent):
        system = current_system_message(
            decode_all(project_path(tree.path_to(tree.leaf_id)).messages))
        entry_id = tree.append_compaction(
            summary.text, plan.first_kept_entry_id, plan.tokens_before, details,
            summary.usage_json(),
            from_hook=False, system_message=checkpoint_of(system) if system else None)
    return CompactionResult(entry_id, summary.text, plan.first_kept_entry_id, plan.tokens_before,
                            details)
