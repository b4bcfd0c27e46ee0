"""Leaving a branch: what it taught, collected, fitted to a budget, summarized under the target."""

from __future__ import annotations

import msgspec

from pi_lsp.agent.retry import SummaryRetries
from pi_lsp.context.build import settings_at
from pi_lsp.context.layers import model_at
from pi_lsp.context.projection import (
    apply_edit,
    branch_summary_message,
    compaction_messages,
    entry_messages,
    latest_edits,
)
from pi_lsp.context.tokens import estimate_tokens
from pi_lsp.providers.registry import ModelRegistry
from pi_lsp.session.check import another_turn_at
from pi_lsp.session.entries import (
    BranchSummaryEntry,
    CompactionEntry,
    ContextEditEntry,
    CustomMessageEntry,
    MessageEntry,
    ReadMessage,
    TextContent,
    ToolResultMessage,
    UnreadMessage,
    UserBlock,
    UserMessage,
    decode_message,
    read_message,
)
from pi_lsp.session.journal import Record
from pi_lsp.session.jsontext import js_truthy
from pi_lsp.session.records import decode_entry, parent_of, path_parent
from pi_lsp.session.tree import SessionTree
from pi_lsp.summarize.compaction import summary_details
from pi_lsp.summarize.fileops import FileLists, FileOps, format_file_lists
from pi_lsp.summarize.summarizer import Summarizer, SummaryRequest

SUMMARY_SHARE_FLOOR = 0.9  # a summary that breaks the budget still fits below 90% of it


def branch_summary_budget(tree: SessionTree, registry: ModelRegistry,
                          default_model: tuple[str, str], reserve_tokens: int) -> int:
    """What a summary of the branch being left may read: the window of the model in force at
    its leaf (the one that summarizes it in pi), less the reserve."""
    settings = settings_at(tree, tree.leaf_id)
    return model_at(settings, registry, default_model).context_window - reserve_tokens


class BranchEntries(msgspec.Struct):
    records: list[Record]
    common_ancestor_id: str | None


class BranchMessages(msgspec.Struct):
    messages: list[ReadMessage]
    files: FileOps
    total_tokens: int


def collect_branch_entries(tree: SessionTree, old_leaf_id: str | None, target_id: str | None
                           ) -> BranchEntries:
    """From the abandoned leaf up to, not including, the deepest ancestor shared with the target."""
    if not old_leaf_id:  # pi's `if (!oldLeafId)`: a leaf whose id is "" has no branch either
        return BranchEntries([], None)
    common = tree.common_ancestor(old_leaf_id, target_id)
    records: list[Record] = []
    seen: set[str] = set()
    current: str | None = old_leaf_id
    while current is not None and current != common and current not in seen:
        record = tree.by_id.get(current)
        if record is None:
            break
        seen.add(current)
        records.append(record)
        current = path_parent(record)
    records.reverse()
    return BranchEntries(records, common)


def branch_message(record: Record, edit: ContextEditEntry | None) -> ReadMessage | None:
    """What an entry adds to a branch summary: tool results are left out, a compaction is its
    summary alone, an empty branch summary still counts, an edit applies as in the context."""
    kind = record.env.type
    if kind == "branch_summary":
        entry = decode_entry(record)
        if isinstance(entry, BranchSummaryEntry):
            return decode_message(branch_summary_message(entry))
        return None
    if kind == "compaction":
        entry = decode_entry(record)
        if isinstance(entry, CompactionEntry):
            return decode_message(compaction_messages(entry)[-1])
        return None
    if kind not in ("message", "custom_message"):
        return None
    messages = entry_messages(record)
    if edit is not None:
        messages = apply_edit(messages, edit.replacement)
    if not messages:
        return None
    message = read_message(messages[0])  # pi keeps any role but a tool result's, unread too
    if isinstance(message, ToolResultMessage) or (isinstance(message, UnreadMessage) and (
            message.role == "toolResult" or not js_truthy(message.value))):
        return None  # (pi's `if (!message) continue` passes over false, 0 and "")
    return message


def fit_branch_messages(records: list[Record], budget: int) -> BranchMessages:
    """Newest first while the estimates fit the budget (0: no limit)."""
    files = FileOps()
    for record in records:
        if record.env.type == "branch_summary":
            entry = decode_entry(record)
            if isinstance(entry, BranchSummaryEntry) and not js_truthy(entry.from_hook):
                files.add_details(entry.details)
    edits = latest_edits(records)
    messages: list[ReadMessage] = []
    total = 0
    for record in reversed(records):
        message = branch_message(record, edits.get(record.env.id))  # type: ignore[arg-type]
        if message is None:
            continue
        files.add_message(message)
        tokens = estimate_tokens(message)
        if budget > 0 and total + tokens > budget:
            is_summary = record.env.type in ("compaction", "branch_summary")
            if is_summary and total < budget * SUMMARY_SHARE_FLOOR:
                messages.insert(0, message)
                total += tokens
            break
        messages.insert(0, message)
        total += tokens
    return BranchMessages(messages, files, total)


class Navigation(msgspec.Struct):
    """Where the leaf goes when the user picks `target_id`, and text to offer for editing."""

    leaf_id: str | None
    editor_text: str | None


def editor_text(content: str | list[UserBlock]) -> str:
    """pi's `contentText(content, "")`: the text blocks alone, joined with nothing."""
    if isinstance(content, str):
        return content
    return "".join(block.text for block in content if isinstance(block, TextContent))


def navigation(tree: SessionTree, target_id: str, edit: bool = False) -> Navigation:
    """Picking a user (or custom) message moves to its parent and hands back its text; picking
    the leaf stays there, as pi's /tree does ("Already at this point"), unless `edit` (Edit
    Prompt) asks for its text."""
    record = tree.record(target_id)
    if not edit and tree.idless_leaf is None and target_id in (tree.shown_leaf(), tree.leaf_id):
        return Navigation(target_id, None)
    entry = decode_entry(record)
    if isinstance(entry, MessageEntry) and isinstance(entry.message, UserMessage):
        return Navigation(parent_of(record), editor_text(entry.message.content))
    if isinstance(entry, CustomMessageEntry):
        return Navigation(parent_of(record), editor_text(entry.content or []))
    return Navigation(target_id, None)


NO_CONTENT = "No content to summarize"
# pi's opening lines, so pi and pi-lsp summaries read the same in either tool.
BRANCH_SUMMARY_PREAMBLE = ("The user explored a different conversation branch before returning "
                           "here.\nSummary of that exploration:\n\n")


class BranchRefusedError(Exception):
    """A branch summary refused, in words that say why."""


class BranchOutcome(msgspec.Struct, rename="camel", omit_defaults=True):
    leaf_id: str | None
    editor_text: str | None = None
    summary_entry_id: str | None = None
    summary: str | None = None


async def branch_with_summary(tree: SessionTree, target_id: str, summarizer: Summarizer,
                              budget: int, instructions: str | None = None,
                              durable: bool = True, thinking_level: str = "off",
                              retries: SummaryRetries | None = None) -> BranchOutcome:
    """Move to `target_id`, leaving a summary of the abandoned branch where the leaf lands
    (made at `thinking_level`, the one in force at the leaf left; its retries told to
    `retries`).

    Nothing is written until the summary is ready, so a cancelled summary leaves no trace.
    When no entry is left behind (the target is ahead of the leaf), pi writes no summary and
    only moves the leaf, and so does this (`durable` as for a plain move).
    """
    move = navigation(tree, target_id)
    # Collected from what a durable leaf move stands for (the move is no content of the
    # branch); `fromId` is the leaf itself, as pi reading the file records it.
    from_id = tree.leaf_id
    collected = collect_branch_entries(tree, tree.shown_leaf(), target_id)
    if not collected.records:
        return branch(tree, target_id, durable)
    # The target can only gain results meanwhile: checked once, before the summary is paid for.
    another_turn = another_turn_at(tree, move.leaf_id)
    if another_turn is not None:
        raise BranchRefusedError(another_turn)
    fitted = fit_branch_messages(collected.records, budget)
    lists = fitted.files.lists()
    writer: Summarizer | None = None  # the fixed text when there is nothing to summarize
    if fitted.messages:
        request = SummaryRequest("branch", fitted.messages, instructions=instructions,
                                 thinking_level=thinking_level, retries=retries)
        written, writer = await summarizer.summarize(request), summarizer
        summary, usage = BRANCH_SUMMARY_PREAMBLE + written.text + format_file_lists(lists), \
            written.usage_json()
    else:  # pi returns no lists with this text, and stores empty ones
        summary, usage, lists = NO_CONTENT, None, FileLists([], [])
    entry_id = tree.branch_with_summary(move.leaf_id, from_id or "root", summary,
                                        summary_details(lists, writer), from_hook=False,
                                        usage=usage)
    return BranchOutcome(tree.leaf_id, move.editor_text, entry_id, summary)


def branch(tree: SessionTree, target_id: str, durable: bool = True,
           edit: bool = False) -> BranchOutcome:
    """Move to `target_id` without a summary: an O(1) pointer move (`durable`: plus one
    entry); none where the leaf already stands, as in pi (`edit`: see `navigation`)."""
    move = navigation(tree, target_id, edit)
    # (An id-less leaf is shown as none too, and a move to the root moves off it; a durable
    # leaf move named by its own id is where the leaf stands too.)
    if tree.idless_leaf is not None or move.leaf_id not in (tree.shown_leaf(), tree.leaf_id):
        tree.move_leaf(move.leaf_id, durable=durable)
    return BranchOutcome(tree.shown_leaf(), move.editor_text)
