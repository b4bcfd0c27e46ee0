"""Compaction: pi's deterministic plan, and turning a plan into a compaction entry."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from pi_lsp.context.build import messages_of_path
from pi_lsp.context.tokens import context_size, decode_all, estimate_tokens
from pi_lsp.session.entries import (
    AgentMessage,
    BranchSummaryEntry,
    BranchSummaryMessage,
    CompactionEntry,
    CustomMessage,
    CustomMessageEntry,
    decode_message,
    head_decoder,
)
from pi_lsp.session.ids import iso_to_ms
from pi_lsp.session.journal import Record
from pi_lsp.session.tree import SessionTree, decode_entry
from pi_lsp.summarize.fileops import FileLists, FileOps, format_file_lists
from pi_lsp.summarize.summarizer import SPLIT_TURN_MARK, Summarizer, SummaryRequest

NO_HISTORY = "No prior history."


class CompactionSettings(msgspec.Struct, rename="camel", omit_defaults=True):
    enabled: bool = True
    reserve_tokens: int = 16384
    keep_recent_tokens: int = 20000


class CompactionPlan(msgspec.Struct):
    first_kept_entry_id: str
    is_split_turn: bool
    tokens_before: int
    previous_summary: str | None
    messages_to_summarize: list[AgentMessage]
    turn_prefix_messages: list[AgentMessage]
    files: FileLists


class PlanSummary(msgspec.Struct, rename="camel"):
    """A plan as printed: message lists as counts."""

    first_kept_entry_id: str
    is_split_turn: bool
    tokens_before: int
    previous_summary: str | None
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


def record_message(record: Record) -> AgentMessage | None:
    """What an entry contributes to a summary (compactions are handled by the caller)."""
    kind = record.env.type
    if kind == "message":
        return decode_message(record.env.message)
    if kind not in ("custom_message", "branch_summary"):
        return None
    entry = decode_entry(record)
    if isinstance(entry, CustomMessageEntry):
        return CustomMessage(custom_type=entry.custom_type, content=entry.content,
                             display=entry.display, details=entry.details,
                             timestamp=iso_to_ms(entry.timestamp))
    if isinstance(entry, BranchSummaryEntry):
        return BranchSummaryMessage(summary=entry.summary, from_id=entry.from_id,
                                    timestamp=iso_to_ms(entry.timestamp))
    return None


def _role(record: Record) -> str | None:
    if record.env.type != "message":
        return None
    try:
        return head_decoder.decode(record.env.message).role or None
    except msgspec.ValidationError:
        return None


def is_cut_point(record: Record) -> bool:
    """A cut may fall on any message but a tool result, or on a summary or custom message."""
    if record.env.type in ("branch_summary", "custom_message"):
        return True
    return record.env.type == "message" and _role(record) not in (None, "toolResult")


def turn_start(path: list[Record], index: int, start: int) -> int:
    """The user (or bash, summary, custom) message that began the turn holding `index`, or -1."""
    for i in range(index, start - 1, -1):
        record = path[i]
        if record.env.type in ("branch_summary", "custom_message"):
            return i
        if record.env.type == "message" and _role(record) in ("user", "bashExecution"):
            return i
    return -1


def find_cut_point(path: list[Record], start: int, end: int, keep_recent_tokens: int
                   ) -> tuple[int, int]:
    """(first kept index, turn start index or -1), keeping about `keep_recent_tokens`."""
    cut_points = [i for i in range(start, end) if is_cut_point(path[i])]
    if not cut_points:
        return start, -1
    cut = cut_points[0]
    total = 0
    for i in range(end - 1, start - 1, -1):
        if path[i].env.type != "message":
            continue
        message = decode_message(path[i].env.message)
        total += estimate_tokens(message) if message is not None else 0
        if total >= keep_recent_tokens:
            cut = next((c for c in cut_points if c >= i), cut)
            break
    while cut > start and path[cut - 1].env.type not in ("compaction", "message"):
        cut -= 1  # settings, labels and the like travel with what follows them
    if path[cut].env.type == "message" and _role(path[cut]) == "user":
        return cut, -1
    return cut, turn_start(path, cut, start)


def prepare_compaction(path: list[Record], settings: CompactionSettings) -> CompactionPlan | None:
    """pi's `prepareCompaction`, with the repeat-compaction window starting at the kept entry."""
    if not path or path[-1].env.type == "compaction":
        return None
    previous_index = next(
        (i for i in range(len(path) - 1, -1, -1) if path[i].env.type == "compaction"), -1)
    previous: CompactionEntry | None = None
    start = 0
    if previous_index >= 0:
        entry = decode_entry(path[previous_index])
        previous = entry if isinstance(entry, CompactionEntry) else None
        kept = previous.first_kept_entry_id if previous else None
        start = next((i for i, r in enumerate(path) if r.env.id == kept), previous_index + 1)
    tokens_before = context_size(decode_all(messages_of_path(path)[0]))
    cut, turn = find_cut_point(path, start, len(path), settings.keep_recent_tokens)
    first_kept = path[cut].env.id
    if first_kept is None:
        return None
    split = turn != -1
    history_end = turn if split else cut
    to_summarize = [m for r in path[start:history_end] if (m := record_message(r)) is not None]
    prefix = [m for r in path[turn:cut] if (m := record_message(r)) is not None] if split else []
    files = FileOps()
    if previous is not None and not previous.from_hook:
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
    def __str__(self) -> str:
        return self.args[0] if self.args else \
            "nothing to compact: the path is empty or already ends in a compaction"


def summary_details(files: FileLists, summarizer: Summarizer) -> dict[str, Any]:
    details: dict[str, Any] = msgspec.to_builtins(files)
    if summarizer.extractive:
        details["summarizer"] = "extractive"  # so nobody mistakes it for a model's summary
    return details


async def summarize_plan(plan: CompactionPlan, summarizer: Summarizer,
                         settings: CompactionSettings, instructions: str | None) -> str:
    """The summary text of a plan, file lists included."""
    history = SummaryRequest("history", plan.messages_to_summarize,
                             int(0.8 * settings.reserve_tokens), plan.previous_summary,
                             instructions)
    if plan.is_split_turn and plan.turn_prefix_messages:
        prefix = SummaryRequest("turn_prefix", plan.turn_prefix_messages,
                                int(0.5 * settings.reserve_tokens))
        if plan.messages_to_summarize:
            history_text, prefix_text = await asyncio.gather(
                summarizer.summarize(history), summarizer.summarize(prefix))
        else:
            history_text, prefix_text = NO_HISTORY, await summarizer.summarize(prefix)
        summary = f"{history_text}{SPLIT_TURN_MARK}\n\n{prefix_text}"
    else:
        summary = await summarizer.summarize(history)
    return summary + format_file_lists(plan.files)


def plan_or_refusal(path: list[Record], settings: CompactionSettings) -> CompactionPlan:
    """The plan `compact` would carry out on `path`; NothingToCompactError when it would refuse."""
    plan = prepare_compaction(path, settings)
    if plan is None:
        raise NothingToCompactError()
    if not plan.messages_to_summarize and not plan.turn_prefix_messages:
        raise NothingToCompactError(
            f"nothing to compact: the whole context fits in keepRecentTokens "
            f"({settings.keep_recent_tokens})")
    return plan


async def compact(tree: SessionTree, leaf_id: str | None, summarizer: Summarizer,
                  settings: CompactionSettings, instructions: str | None = None
                  ) -> CompactionResult:
    """Summarize the path up to `leaf_id` and append the compaction there."""
    plan = plan_or_refusal(tree.path_to(leaf_id), settings)
    summary = await summarize_plan(plan, summarizer, settings, instructions)
    details = summary_details(plan.files, summarizer)
    if leaf_id != tree.leaf_id:
        tree.branch(leaf_id) if leaf_id is not None else tree.reset_leaf()
    entry_id = tree.append_compaction(summary, plan.first_kept_entry_id, plan.tokens_before,
                                      details)
    return CompactionResult(entry_id, summary, plan.first_kept_entry_id, plan.tokens_before,
                            details)
