"""An integrity report for one session: damaged lines, broken links, unanswered tool calls."""

from __future__ import annotations

from itertools import chain
from typing import Any

import msgspec

from pi_lsp.session.appender import create_with_lines
from pi_lsp.session.entries import (
    AssistantMessage,
    CompactionEntry,
    ContextEditEntry,
    LabelEntry,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    decode_message,
    unsent_blocks,
)
from pi_lsp.session.fork import non_object, relinked
from pi_lsp.session.journal import Problem, Problems, Record
from pi_lsp.session.records import decode_entry, parent_of
from pi_lsp.session.systemfields import parameterless_problem
from pi_lsp.session.tree import SessionTree

ANOTHER_TURN = ("another program is running a turn in this session: its tool call {} has no "
                "result yet; try again when it ends (if none is running, that turn stopped "
                "before the result: a prompt goes on past the call)")

# What a repair would do about each kind of problem; `check` only reports, it never rewrites.
REPAIRS = {
    "blank": "drop the blank line (pi skips it too)",
    "malformed": "drop the line; it is not JSON and pi skips it too",
    "not-object": "drop the line; pi skips it too (it skips null, false, 0 and \"\")",
    "non-object-entry": "drop the line or make it an entry; it is kept, as pi keeps it (the "
                        "leaf when last)",
    "invalid-entry": "drop the line or fix the field's type",
    "extra-header": "drop the second header",
    "no-id": "give the entry an id, or drop it",
    "unmigratable": "drop the line (or make it an object); pi 1.6 fails to upgrade the file "
                    "while it is there",
    "off-type-envelope": "give the field text; the line is kept, as pi keeps it",
    "torn": "cut the incomplete last line off (the next append ends it with a newline "
            "first, so it stays a malformed line of its own)",
    "invalid-utf8": "write the line again with U+FFFD for the invalid bytes, as pi reads it",
    "too-long": "drop the line; pi-lsp skips lines over 64 MB",
    "too-deep": "drop the line; pi-lsp skips JSON nested more than 200 levels deep",
    "duplicate-id": "give the later entry a new id (readers keep the later one)",
    "orphan": "point parentId at an entry that exists, or leave it a root as pi shows it",
    "cycle": "break the loop by making one of its entries a root",
    "dangling-reference": "point the reference at an entry that exists",
    "edit-off-path": "drop the edit, or point its targetId at an entry above it (an edit "
                     "applies only to its own path)",
    "unreadable-edit": "give the edit a `replacement` (null omits the target, {content} "
                       "replaces it) or drop the line; pi 1.6 fails on such a context",
    "unreadable-message": "fix the message's role or content (the field's type), or drop the "
                          "line; pi-lsp leaves it out of the context and the tree",
    "unsent-block": "give the block a type its message holds (text, image; an assistant's "
                    "thinking or toolCall too), or drop it; the model is sent the rest",
    "parameterless-tool": "give the tool its `parameters` (a JSON schema object), or drop it "
                          "from toolsAdded",
    "missing-tool-result": "add a toolResult (isError) under the call so the next request "
                           "answers every tool call",
    "unwritten": "nothing to repair: pi writes a new session at its first user message",
}


def check_session(tree: SessionTree) -> list[Problem]:
    """Every problem found, in line order, each with what a repair would do."""
    problems = Problems(msgspec.structs.replace(p) for p in tree.problems)
    problems.extend(orphans(tree))
    problems.extend(cycles(tree))
    problems.extend(dangling_references(tree))
    problems.extend(context_edit_problems(tree))
    problems.extend(unreadable_messages(tree))
    problems.extend(messages_with_unsent_blocks(tree))
    problems.extend(parameterless_tools(tree))
    problems.extend(unanswered_tool_calls(tree))
    if tree.deferred:
        problems.append(Problem("unwritten", "a new session with no user message yet; "
                                "it has no file until its first prompt"))
    for problem in problems:
        problem.repair = REPAIRS.get(problem.kind)
    problems.sort(key=lambda p: p.line or 0)
    return problems


LINE_REPAIRS = {"blank", "malformed", "not-object", "invalid-entry", "extra-header", "torn",
                "invalid-utf8", "too-long", "too-deep"}


Links = dict[str | None, str | None]  # keyed by a parentId, which may be None


def repaired_copy(tree: SessionTree, target: str) -> tuple[int, list[Problem]]:
    """Write the session to a new file `target` with its line-level problems repaired (damaged
    lines dropped, bad text read as U+FFFD); returns the entries written and the problems
    repaired."""
    before, after = _non_object_gaps(tree)
    lines = tree.kept_texts(lambda record: _linked_past(record, before, after))
    create_with_lines(target, chain([tree.header_raw], lines))
    # Every non-object line of a version 1 file is on its chain, so left out.
    kinds = LINE_REPAIRS | {"non-object-entry"} if before else LINE_REPAIRS
    written = len(tree.records) - len(before) + len(tree.idless_records) + len(tree.idless_lines)
    return written, Problems(p for p in tree.problems if p.kind in kinds)


def _non_object_gaps(tree: SessionTree) -> tuple[Links, dict[str, str | None]]:
    """For each non-object line on a version 1 file's chain (its id made up in memory, so a
    copy cannot keep it): the entry before it and the entry after it, which take its place."""
    before: Links = {}
    after: dict[str, str | None] = {}
    waiting: list[str] = []
    for record in tree.records:  # a version 1 chain runs in file order
        entry_id = record.env.id or ""
        if non_object(record):
            parent = parent_of(record)
            before[entry_id] = before.get(parent, parent)
            waiting.append(entry_id)
            continue
        after.update(dict.fromkeys(waiting, entry_id))
        waiting = []
    after.update(dict.fromkeys(waiting, None))
    return before, after


def _linked_past(record: Record, before: Links, after: dict[str, str | None]) -> bytes | None:
    """The record's line with links to a non-object line moved past it (None for such a line),
    as a fork does."""
    if not before:
        return record.raw
    if non_object(record):
        return None
    parent = parent_of(record)
    return relinked(record, before.get(parent, parent), after)


def orphans(tree: SessionTree) -> list[Problem]:
    found = []
    for record in tree.records:
        parent = parent_of(record)
        if parent is not None and parent not in tree.by_id:
            found.append(Problem("orphan", f"parent {parent!r} is not in the file",
                                 record.line, record.env.id))
    return found


def cycles(tree: SessionTree) -> list[Problem]:
    """Entries whose ancestry loops back on itself (pi would walk them forever)."""
    state: dict[str, int] = {}  # 1: on the current walk, 2: known to reach a root
    found: list[Problem] = []
    for start in tree.by_id:
        walk: list[str] = []
        entry_id: str | None = start
        while entry_id is not None and entry_id in tree.by_id and entry_id not in state:
            state[entry_id] = 1
            walk.append(entry_id)
            entry_id = parent_of(tree.by_id[entry_id])
        if entry_id is not None and state.get(entry_id) == 1:
            loop = walk[walk.index(entry_id):]
            record = tree.by_id[entry_id]
            found.append(Problem("cycle", "parent links loop: " + " -> ".join(loop),
                                 record.line, entry_id))
        for visited in walk:
            state[visited] = 2
    return found


def dangling_references(tree: SessionTree) -> list[Problem]:
    found = []
    for record in tree.records:
        if record.env.type not in ("compaction", "label"):
            continue
        entry = decode_entry(record)
        target: Any = None
        field = ""
        if isinstance(entry, CompactionEntry):
            target, field = entry.first_kept_entry_id, "firstKeptEntryId"
        elif isinstance(entry, LabelEntry):
            target, field = entry.target_id, "targetId"
        # A number or object names no entry (pi keeps nothing for it): dangling too.
        if target is not None and (not isinstance(target, str) or target not in tree.by_id):
            found.append(Problem("dangling-reference", f"{field} {target!r} is not in the file",
                                 record.line, record.env.id))
    return found


def unreadable_messages(tree: SessionTree) -> list[Problem]:
    """Message entries pi-lsp cannot read, so leaves out of every context (a reply and its
    tool calls with them)."""
    return [Problem("unreadable-message", "a message pi-lsp cannot read (its role or a "
                    "content field of another type)", record.line, record.env.id)
            for record in tree.records
            if record.env.type == "message" and decode_message(record.env.message) is None]


def messages_with_unsent_blocks(tree: SessionTree) -> list[Problem]:
    """Messages holding content blocks of a type their role does not hold: the context shows
    and the model is sent the rest, so a block, or all a message said, goes unseen."""
    found = []
    for record in tree.records:
        if record.env.type == "custom_message":
            role, count = unsent_blocks(record.text, "custom")
        elif record.env.type == "message" and record.env.message is not None:
            role, count = unsent_blocks(record.env.message)
        else:
            continue
        if count:
            found.append(Problem("unsent-block", f"{count} content block(s) of a type its {role} "
                                 "message does not hold, which no request carries",
                                 record.line, record.env.id))
    return found


def parameterless_tools(tree: SessionTree) -> list[Problem]:
    """System messages declaring a tool without parameters, which no request to an Anthropic
    model can hold (pi 1.6 fails on one too)."""
    found = []
    for record in tree.records:
        if record.env.type != "message":
            continue
        message = decode_message(record.env.message)
        said = parameterless_problem(message) if isinstance(message, SystemMessage) else None
        if said is not None:
            found.append(Problem("parameterless-tool", said, record.line, record.env.id))
    return found


def context_edit_problems(tree: SessionTree) -> list[Problem]:
    """Context edits that change nothing: a target not in the file or not on the edit's
    path, or no readable `replacement`."""
    found = []
    for record in tree.records:
        if record.env.type != "context_edit":
            continue
        entry = decode_entry(record)
        if not isinstance(entry, ContextEditEntry):
            found.append(Problem("unreadable-edit", "context_edit without a readable "
                                 "targetId and replacement", record.line, record.env.id))
        elif entry.target_id not in tree.by_id:
            found.append(Problem("dangling-reference", f"targetId {entry.target_id!r} is "
                                 "not in the file", record.line, record.env.id))
        elif entry.target_id not in tree.path_ids(entry.id):
            found.append(Problem("edit-off-path", f"targetId {entry.target_id!r} is not on "
                                 "the edit's path, so it edits nothing", record.line,
                                 record.env.id))
    return found


def _tool_results_below(tree: SessionTree, record: Record) -> set[str]:
    """Ids answered by the run of toolResult messages directly under an assistant entry."""
    answered: set[str] = set()
    frontier = list(tree.children(record.env.id or ""))
    while frontier:
        child = frontier.pop()
        if child.env.type != "message" or b'"toolResult"' not in bytes(child.env.message):
            continue
        message = decode_message(child.env.message)
        if isinstance(message, ToolResultMessage) and message.call_id is not None:
            answered.add(message.call_id)
            frontier.extend(tree.children(child.env.id or ""))
    return answered


def calls_without_result(tree: SessionTree, record: Record) -> list[ToolCall]:
    """The tool calls of an assistant entry that no toolResult under it answers (yet)."""
    if record.env.type != "message" or b'"toolCall"' not in bytes(record.env.message):
        return []
    message = decode_message(record.env.message)
    # pi 1.6 answers no call of a failed or aborted reply: requests leave the reply out,
    # and a result for one of its calls would reach the API with no call before it.
    if not isinstance(message, AssistantMessage) or message.stop_reason in ("error", "aborted"):
        return []
    answered = _tool_results_below(tree, record)
    return [block for block in message.content
            if isinstance(block, ToolCall) and block.id not in answered]


def unanswered_tool_calls(tree: SessionTree) -> list[Problem]:
    return [Problem("missing-tool-result", f"tool call {call.id!r} ({call.name}) has no result",
                    record.line, record.env.id)
            for record in tree.records for call in calls_without_result(tree, record)]


def another_turn_at(tree: SessionTree, entry_id: str | None) -> str | None:
    """Why no entry may be appended under `entry_id` now, or None. An entry there would come
    between a tool call and its result (DESIGN rule 7): nothing is under the call yet, so another
    program's turn is running the tool, or stopped before its result (the file cannot tell)."""
    if tree.hold_leaf or entry_id not in tree.by_id:
        return None  # a running turn's own leaf: its calls are its own to answer
    if tree.children(entry_id):
        return None  # its result or a prompt gone on past it: no turn waits there on the tool
    calls = calls_without_result(tree, tree.by_id[entry_id])
    return ANOTHER_TURN.format(calls[0].name) if calls else None
