"""pi-lsp computes what pi computes on sessions pi wrote itself.

Two samples are in the repo: files pi 1.6 wrote (`conformance/pi16/`), and files pi 0.73.1 wrote
(`conformance/`). pi 1.6 reads the older files with 0.73.1's contexts, model layer, leaf, name and
tree, so those are held to 0.73.1's answers; their summarizer text, token estimates, compaction
plans and branch collections follow pi 1.6's rules, held to pi 1.6's answers on the same files
(`conformance/pi16-on-073/`). `PI_LSP_CONFORMANCE=DIR` runs every check on DIR's pairs instead
(files pi 1.6 wrote with its own answers, e.g. from a generator). Hand-edited files pi 1.6
still opens (`conformance/pi16-odd/`, from a differential fuzzer) are held to pi 1.6's token
estimates, compaction plans, branch collections and tree.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, get_args

import msgspec
import pytest

from pi_lsp.context.build import build_session_context
from pi_lsp.context.convert import BRANCH_SUMMARY_PREFIX, BRANCH_SUMMARY_SUFFIX, convert_to_llm
from pi_lsp.context.tokens import message_tokens
from pi_lsp.session.entries import ModelMessage, decode_message
from pi_lsp.session.jsontext import Decoder, encoder
from pi_lsp.session.outline import nested_tree
from pi_lsp.session.tree import SessionTree
from pi_lsp.summarize.branch import collect_branch_entries, fit_branch_messages
from pi_lsp.summarize.compaction import CompactionSettings, plan_summary, prepare_compaction
from pi_lsp.summarize.serialize import serialize_conversation
from tests.conftest import CONFORMANCE, ROOT, conformance_files

SAMPLES = ROOT / "tests" / "conformance"
PI16_ON_073 = SAMPLES / "pi16-on-073"
ODD = SAMPLES / "pi16-odd"
ODD_FILES = sorted(ODD.glob("*.jsonl"))


def sample_files() -> list[Path]:
    if CONFORMANCE.resolve() != SAMPLES:
        return conformance_files()
    return sorted(SAMPLES.glob("*.jsonl")) + sorted((SAMPLES / "pi16").glob("*.jsonl"))


FILES = sample_files()


@lru_cache(maxsize=4)  # tests run file by file; a generated corpus is large
def read_json(path: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(path.read_text("utf-8"))
    return result


def expected(path: Path) -> dict[str, Any]:
    """What pi computes on the file: contexts, model layer, leaf, name, tree."""
    return read_json(path.with_suffix(".expected.json"))


def expected_pi16(path: Path) -> dict[str, Any]:
    """What pi 1.6 computes on the file: serialized text, tokens, plans, branch pairs."""
    if path.parent.resolve() == SAMPLES:
        return read_json(PI16_ON_073 / f"{path.stem}.expected.json")
    return expected(path)


def as_json(value: object) -> Any:
    return json.loads(encoder.encode(value))


@pytest.fixture(scope="module", params=FILES,
                ids=[f"{f.parent.name}/{f.stem}" for f in FILES])
def session(request: pytest.FixtureRequest) -> tuple[Path, SessionTree]:
    return request.param, SessionTree.open(str(request.param))


def test_both_samples_are_in_the_repo() -> None:
    """The pi 0.73.1 files each have pi 1.6's answers beside them; pi 1.6's sample is there."""
    older = sorted(SAMPLES.glob("*.jsonl"))
    assert older and len(sorted((SAMPLES / "pi16").glob("*.jsonl"))) == 4
    assert all((PI16_ON_073 / f"{p.stem}.expected.json").exists() for p in older)


def test_file_loads_without_problems(session: tuple[Path, SessionTree]) -> None:
    _, tree = session
    assert tree.problems == []


def test_leaf_and_name(session: tuple[Path, SessionTree]) -> None:
    path, tree = session
    assert tree.leaf_id == expected(path)["leafId"]
    assert tree.name == expected(path)["name"]


def test_default_context(session: tuple[Path, SessionTree]) -> None:
    path, tree = session
    assert as_json(build_session_context(tree, tree.leaf_id)) == expected(path)["default"]


def test_tree(session: tuple[Path, SessionTree]) -> None:
    path, tree = session
    assert as_json(nested_tree(tree)) == expected(path)["tree"]


def test_context_at_every_leaf(session: tuple[Path, SessionTree]) -> None:
    path, tree = session
    for leaf, case in expected(path)["contexts"].items():
        assert as_json(build_session_context(tree, leaf)) == case["context"], leaf


def test_tokens_at_every_leaf(session: tuple[Path, SessionTree]) -> None:
    path, tree = session
    check_tokens(tree, expected_pi16(path))


def check_tokens(tree: SessionTree, want: dict[str, Any]) -> None:
    for leaf, case in want["contexts"].items():
        context = build_session_context(tree, leaf)
        assert [message_tokens(raw) for raw in context.messages] == case["tokens"], leaf


PI_BRANCH_PREFIX = (
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
)
PI_BRANCH_SUFFIX = "</summary>"


def with_our_branch_wrapper(message: dict[str, Any]) -> dict[str, Any]:
    """pi's model-layer message with pi's branch-summary wrapper swapped for the seed design's."""
    content = message["content"]
    if message["role"] != "user" or not isinstance(content, list) or len(content) != 1:
        return message
    text = content[0].get("text", "")
    if not text.startswith(PI_BRANCH_PREFIX) or not text.endswith(PI_BRANCH_SUFFIX):
        return message
    summary = text[len(PI_BRANCH_PREFIX):-len(PI_BRANCH_SUFFIX)]
    wrapped = BRANCH_SUMMARY_PREFIX + summary + BRANCH_SUMMARY_SUFFIX
    return {**message, "content": [{"type": "text", "text": wrapped}]}


def test_llm_layer_at_every_leaf(session: tuple[Path, SessionTree]) -> None:
    """Equal to pi's `convertToLlm` but for the branch-summary wrapper the seed design sets."""
    path, tree = session
    for leaf, case in expected(path)["contexts"].items():
        context = build_session_context(tree, leaf)
        ours = [json.loads(bytes(raw)) for raw in convert_to_llm(context.messages)]
        assert ours == [with_our_branch_wrapper(m) for m in case["llm"]], leaf


def test_conformance_covers_branch_summaries() -> None:
    """The wrapper swap above is exercised, so the llm test cannot pass vacuously."""
    swapped = sum(
        with_our_branch_wrapper(m) is not m
        for path in FILES for case in expected(path)["contexts"].values() for m in case["llm"]
    )
    assert swapped > 0


def test_compaction_plans(session: tuple[Path, SessionTree]) -> None:
    path, tree = session
    check_plans(tree, expected_pi16(path)["plans"])


def check_plans(tree: SessionTree, plans: dict[str, Any]) -> None:
    assert plans
    for key, want in plans.items():
        leaf, keep = key.split(":")
        plan = prepare_compaction(tree.path_to(leaf),
                                  CompactionSettings(keep_recent_tokens=int(keep)))
        assert (None if plan is None else as_json(plan_summary(plan))) == want, key


def test_branch_summary_collections(session: tuple[Path, SessionTree]) -> None:
    path, tree = session
    check_branch_pairs(tree, expected_pi16(path)["branchPairs"])


def check_branch_pairs(tree: SessionTree, pairs: dict[str, Any]) -> None:
    assert pairs
    for key, want in pairs.items():
        old, target = key.split(">")
        collected = collect_branch_entries(tree, old, target)
        fitted = fit_branch_messages(collected.records, 2000)
        lists = fitted.files.lists()
        assert {
            "entries": [r.env.id for r in collected.records],
            "commonAncestorId": collected.common_ancestor_id,
            "messages": len(fitted.messages),
            "totalTokens": fitted.total_tokens,
            "readFiles": lists.read_files,
            "modifiedFiles": lists.modified_files,
        } == want, key


LLM_DECODER: Decoder[list[ModelMessage]] = Decoder(list[ModelMessage])


def model_layer(messages: list[Any]) -> list[ModelMessage]:
    """Model-layer messages as pi-lsp's types: decoded whole where they fit (as everything pi
    writes does), else each as pi-lsp reads a message of a session (a hand-edited `timestamp`
    or block type), leaving out those it cannot read. The text never shows a timestamp: a
    missing one (pi's model layer passes a reply on as it is) reads as 0."""
    try:
        return LLM_DECODER.decode(json.dumps(messages).encode())
    except msgspec.ValidationError:
        read = (decode_message(json.dumps({"timestamp": 0, **m} if isinstance(m, dict) else m)
                               .encode()) for m in messages)
        return [m for m in read if isinstance(m, get_args(ModelMessage))]


def test_serialization_of_pis_model_layer(session: tuple[Path, SessionTree]) -> None:
    """Our serializer on pi's own model-layer messages gives pi's text exactly."""
    path, _ = session
    serialized = expected_pi16(path)["contexts"]
    for leaf, case in expected(path)["contexts"].items():
        messages = model_layer(case["llm"])
        assert serialize_conversation(messages) == serialized[leaf]["serialized"], leaf


def test_serialization_of_our_model_layer(session: tuple[Path, SessionTree]) -> None:
    """From the session itself, only the branch-summary wrapper differs from pi's text."""
    path, tree = session
    for leaf, case in expected(path)["contexts"].items():
        context = build_session_context(tree, leaf)
        ours = model_layer([json.loads(bytes(raw)) for raw in convert_to_llm(context.messages)])
        theirs = [with_our_branch_wrapper(m) for m in case["llm"]]
        assert serialize_conversation(ours) == serialize_conversation(model_layer(theirs)), leaf


@pytest.fixture(scope="module", params=ODD_FILES, ids=[f.stem for f in ODD_FILES])
def odd(request: pytest.FixtureRequest) -> tuple[dict[str, Any], SessionTree]:
    """A hand-edited file pi 1.6 opens (a message or line pi-lsp cannot type), with pi's answers."""
    return expected(request.param), SessionTree.open(str(request.param))


def test_hand_edited_files_estimate_as_pi16(odd: tuple[dict[str, Any], SessionTree]) -> None:
    """pi counts what it can read of a message pi-lsp cannot type (0 for none of it)."""
    want, tree = odd
    check_tokens(tree, want)


def test_hand_edited_files_plan_and_collect_as_pi16(
        odd: tuple[dict[str, Any], SessionTree]) -> None:
    """pi keeps such a message in compaction plans and branch collections."""
    want, tree = odd
    if want["plans"]:
        check_plans(tree, want["plans"])
    if want["branchPairs"]:
        check_branch_pairs(tree, want["branchPairs"])


def test_hand_edited_files_draw_pis_tree(odd: tuple[dict[str, Any], SessionTree]) -> None:
    """A line that is JSON but no object is a root row with no id, as pi's getTree draws it."""
    want, tree = odd
    assert as_json(nested_tree(tree)) == want["tree"]


def test_a_section_that_is_no_text_counts_as_none() -> None:
    """pi 1.6 adds a system message's section of another type (`"cwd": 42`) as undefined and
    estimates NaN, which breaks its cut (its bug); pi-lsp counts nothing for it: the expected
    file is pi 1.6's answers on this file with that section left out."""
    path = ODD / "pis-nan" / "section-not-text.jsonl"
    assert '"sections": {"cwd": 42}' in path.read_text("utf-8")
    want, tree = expected(path), SessionTree.open(str(path))
    check_tokens(tree, want)
    check_plans(tree, want["plans"])
    check_branch_pairs(tree, want["branchPairs"])
