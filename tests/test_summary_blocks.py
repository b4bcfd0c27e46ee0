"""Branch summaries and compactions of sessions holding blocks pi 1.6 leaves out (a user's
{"type": "video"}, a tool result's thinking, "x", a result written as a text), as pi 1.6 makes
them: the text the summary model is sent, the cut, the estimates and the file lists.

The sessions are in fixtures/pi16-summary-blocks (made by hand, and two conformance files with
such blocks added); pi 1.6's answers (tests/pi16_summaries.mjs) are stored beside them and
checked against pi 1.6 itself where it is installed.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import msgspec
import pytest

from pi_lsp.context.build import build_session_context
from pi_lsp.context.convert import BRANCH_SUMMARY_PREFIX, BRANCH_SUMMARY_SUFFIX
from pi_lsp.context.tokens import decode_all, message_tokens
from pi_lsp.session.entries import ReadMessage
from pi_lsp.session.tree import SessionTree
from pi_lsp.summarize.branch import (
    BRANCH_SUMMARY_PREAMBLE,
    NO_CONTENT,
    collect_branch_entries,
    fit_branch_messages,
)
from pi_lsp.summarize.compaction import (
    CompactionSettings,
    plan_summary,
    prepare_compaction,
    summarize_plan,
)
from pi_lsp.summarize.fileops import format_file_lists
from pi_lsp.summarize.serialize import serialize_conversation
from pi_lsp.summarize.summarizer import Summary, SummaryRequest, llm_messages
from tests.test_conformance import PI_BRANCH_PREFIX, PI_BRANCH_SUFFIX
from tests.test_system_messages import PI16, pi16_node
from tests.waits import PROCESS_CEILING_S

FIXTURES = Path(__file__).with_name("fixtures") / "pi16-summary-blocks"
FILES = sorted(FIXTURES.glob("*.jsonl"))
# What pi 1.6 made of FILES (tests/pi16_summaries.mjs), for machines without it.
PI16_ANSWERS = FIXTURES / "pi16.json"
KEEPS = (1, 50, 400, 4000)
SENT = (1, 400)
BRANCH_BUDGET = 2000


def stored() -> dict[str, Any]:
    answers: dict[str, Any] = json.loads(PI16_ANSWERS.read_text("utf-8"))
    return answers


class Recorder:
    """A summary model that answers "S" and keeps the conversation each request carries."""

    extractive = False

    def __init__(self) -> None:
        self.sent: list[str] = []

    async def summarize(self, request: SummaryRequest) -> Summary:
        self.sent.append(conversation(request.messages))
        return Summary("S")


def conversation(messages: list[ReadMessage]) -> str:
    """The text of `messages` a summary request carries, with pi's branch-summary wrapper in
    place of pi-lsp's (the one difference kept on purpose: conformance README)."""
    text = serialize_conversation(llm_messages(messages))
    return text.replace(BRANCH_SUMMARY_PREFIX, PI_BRANCH_PREFIX) \
        .replace(BRANCH_SUMMARY_SUFFIX, PI_BRANCH_SUFFIX)


def children(tree: SessionTree) -> dict[str, int]:
    """How many entries name each entry as their parent (0 for a leaf)."""
    counts = {r.env.id: 0 for r in tree.records if isinstance(r.env.id, str)}
    for record in tree.records:
        if record.env.parent_id in counts:
            counts[record.env.parent_id] += 1
    return counts


def leaves(tree: SessionTree) -> list[str]:
    return [entry for entry, count in children(tree).items() if count == 0]


def forks(tree: SessionTree) -> list[str]:
    return [entry for entry, count in children(tree).items() if count > 1]


def contexts(tree: SessionTree) -> dict[str, Any]:
    made = {}
    for leaf in leaves(tree):
        messages = build_session_context(tree, leaf).messages
        made[leaf] = {"tokens": [message_tokens(raw) for raw in messages],
                      "serialized": conversation(decode_all(messages))}
    return made


def plans(tree: SessionTree) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each entry's plan at each keep, and what carrying out a leaf's sends and writes."""
    made: dict[str, Any] = {}
    sent: dict[str, Any] = {}
    ends = leaves(tree)
    for record in tree.records:
        for keep in KEEPS:
            key = f"{record.env.id}:{keep}"
            settings = CompactionSettings(keep_recent_tokens=keep)
            plan = prepare_compaction(tree.path_to(record.env.id), settings)
            made[key] = None if plan is None else \
                json.loads(msgspec.json.encode(plan_summary(plan)))
            if plan is not None and keep in SENT and record.env.id in ends:
                model = Recorder()
                summary = asyncio.run(summarize_plan(plan, model, settings, None))
                sent[key] = {"sent": model.sent, "summary": summary.text}
    return made, sent


def branch_pairs(tree: SessionTree) -> dict[str, Any]:
    """Leaving each leaf for the first entry and each fork, as `branch --summary` does."""
    made = {}
    for old in leaves(tree):
        for target in [tree.records[0].env.id, *forks(tree)]:
            collected = collect_branch_entries(tree, old, target)
            fitted = fit_branch_messages(collected.records, BRANCH_BUDGET)
            lists = fitted.files.lists()
            model = Recorder()
            summary = NO_CONTENT
            if fitted.messages:
                asyncio.run(model.summarize(SummaryRequest("branch", fitted.messages)))
                summary = BRANCH_SUMMARY_PREAMBLE + "S" + format_file_lists(lists)
            made[f"{old}>{target}"] = {
                "entries": [r.env.id for r in collected.records],
                "commonAncestorId": collected.common_ancestor_id,
                "messages": len(fitted.messages), "totalTokens": fitted.total_tokens,
                "readFiles": lists.read_files, "modifiedFiles": lists.modified_files,
                "sent": model.sent, "summary": summary}
    return made


def answers(path: Path) -> dict[str, Any]:
    tree = SessionTree.open(str(path))
    made, sent = plans(tree)
    return {"contexts": contexts(tree), "plans": made, "sent": sent,
            "branchPairs": branch_pairs(tree)}


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_summaries_of_sessions_with_blocks_pi16_leaves_out_are_pi16s(path: Path) -> None:
    want, got = stored()[path.name], answers(path)
    for part in ("contexts", "plans", "sent", "branchPairs"):
        for key in want[part]:
            assert got[part].get(key) == want[part][key], (part, key)
        assert got[part].keys() == want[part].keys(), part


def test_the_sessions_hold_blocks_pi16_leaves_out() -> None:
    """Every fixture holds a block no request carries, or a result written as a text."""
    for path in FILES:
        text = path.read_text("utf-8")
        assert '"type": "video"' in text or '"content": "' in text, path.name


def test_the_stored_answers_are_pi16s() -> None:
    node = pi16_node()
    if node is None:
        pytest.skip("pi 1.6 is not installed")
    made = subprocess.run(
        [node, str(Path(__file__).with_name("pi16_summaries.mjs")), str(PI16 / "@earendil-works"),
         *[f.name for f in FILES]], cwd=FIXTURES, capture_output=True, text=True,
        timeout=PROCESS_CEILING_S)
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout) == stored()
