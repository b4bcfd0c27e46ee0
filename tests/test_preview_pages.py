"""A paged preview is the whole preview cut to its pages: random sessions (compactions, branch
summaries, pi 1.6 context edits and system messages, a branch or two) in every layer."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_lsp.context.edits import FAILURE_CHARS
from pi_lsp.context.layers import AgentSetup, Layer
from pi_lsp.context.preview import render_markdown
from pi_lsp.providers.registry import ModelRegistry
from pi_lsp.server.config import Config
from pi_lsp.server.hub import SessionHub
from pi_lsp.server.previewpage import (
    Page,
    Preview,
    PreviewPages,
    first_row,
    outline_of,
    paged,
    whole,
)
from pi_lsp.session.appender import append_lines
from tests.test_tree import msg, write_session

AGENT = AgentSetup(ModelRegistry(), ("anthropic", "claude-sonnet-4-5"), "off", {"preamble": "hi"},
                   [{"name": "read", "description": "r", "parameters": {}}])
STAMP = "2025-01-01T10:00:02.000Z"

text = st.text(alphabet=st.sampled_from(list("ab z\"\\\n😀é")), max_size=40)
content = st.one_of(text, st.lists(st.builds(lambda t: {"type": "text", "text": t}, text),
                                   max_size=2))


def _message(role: str, body: str, draw: st.DrawFn) -> dict[str, Any]:
    if role == "user":
        return {"role": "user", "content": draw(content), "timestamp": 1}
    if role == "assistant":
        calls = [{"type": "toolCall", "id": f"c{i}", "name": "read", "arguments": {"p": body}}
                 for i in range(draw(st.integers(0, 2)))]
        total = draw(st.sampled_from([0, 0, 120, 5000]))
        return {"role": "assistant", "content": [{"type": "thinking", "thinking": body},
                                                 {"type": "text", "text": body}, *calls],
                "api": "anthropic-messages", "provider": "anthropic",
                "model": draw(st.sampled_from(["claude-sonnet-4-5", "claude-opus-4-5"])),
                "usage": {"input": total, "output": 0, "cacheRead": 0, "cacheWrite": 0,
                          "totalTokens": total,
                          "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0,
                                   "total": 0}},
                "stopReason": draw(st.sampled_from(["stop", "toolUse", "error"])),
                "timestamp": 2}
    if role == "toolResult":
        return {"role": "toolResult", "toolCallId": f"c{draw(st.integers(0, 2))}",
                "toolName": "read", "content": [{"type": "text", "text": body}],
                "isError": draw(st.booleans()), "timestamp": 3}
    if role == "bashExecution":
        return {"role": "bashExecution", "command": "ls", "output": body, "exitCode": 1,
                "cancelled": False, "truncated": False, "timestamp": 4,
                "excludeFromContext": draw(st.booleans())}
    return {"role": "system", "content": body, "timestamp": 5,
            "sections": {"preamble": body, "cwd": None},
            "toolsAdded": [{"name": "read", "description": body, "parameters": {}}]}


ROLES = ["user", "assistant", "toolResult", "bashExecution", "system"]
KINDS = ["message"] * 6 + ["custom_message", "branch_summary", "compaction", "context_edit",
                           "thinking_level_change", "model_change", "unreadable"]


@st.composite
def sessions(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Entries in file order; each hangs off the last one, now and then off an earlier one."""
    entries: list[dict[str, Any]] = []
    for index in range(draw(st.integers(1, 40))):
        entry_id = f"{index:08x}"
        parent = entries[-1]["id"] if entries else None
        if entries and draw(st.integers(0, 9)) == 0:
            parent = draw(st.sampled_from(entries))["id"]
        kind = draw(st.sampled_from(KINDS))
        body = draw(text)
        earlier = draw(st.sampled_from(entries))["id"] if entries else entry_id
        fields: dict[str, Any]
        if kind == "message":
            fields = {"message": _message(draw(st.sampled_from(ROLES)), body, draw)}
        elif kind == "unreadable":
            kind, fields = "message", {"message": {"role": "user", "content": 7}}
        elif kind == "custom_message":
            fields = {"customType": "note", "content": draw(content), "display": True}
        elif kind == "branch_summary":
            fields = {"fromId": earlier, "summary": body}
        elif kind == "compaction":
            fields = {"summary": body, "firstKeptEntryId": earlier, "tokensBefore": 10}
            if draw(st.booleans()):
                fields["systemMessage"] = {"role": "system", "content": body, "timestamp": 6}
        elif kind == "context_edit":
            fields = {"targetId": earlier,
                      "replacement": draw(st.one_of(st.none(), st.builds(
                          lambda c: {"content": c}, content)))}
        elif kind == "thinking_level_change":
            fields = {"thinkingLevel": draw(st.sampled_from(["off", "high"]))}
        else:
            fields = {"provider": "anthropic", "modelId": "claude-opus-4-5"}
        entries.append({"type": kind, "id": entry_id, "parentId": parent, "timestamp": STAMP,
                        **fields})
    return entries


def cut(preview: Preview, size: int, start: int | None) -> PreviewPages:
    """The whole preview sliced to the pages `paged` sends, as the preview was paged before
    (the request's body left to the whole preview)."""
    messages = preview.messages
    if start is not None:
        pages = [Page(start, messages[start:start + size])]
    elif len(messages) <= 2 * size:
        pages = [Page(0, messages)]
    else:
        pages = [Page(0, messages[:size]), Page(len(messages) - size, messages[-size:])]
    markdown = render_markdown(preview.leaf_id, preview.layer,
                               [(page.start, page.messages) for page in pages], len(messages),
                               preview.total_tokens, preview.context_window,
                               preview.thinking_level, preview.model, preview.edits)
    return PreviewPages(preview.leaf_id, preview.layer, preview.model, preview.thinking_level,
                        preview.thinking_levels, preview.total_tokens, preview.context_window,
                        len(messages), pages, markdown.text, preview.edits, markdown.headings)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries=sessions(), leaf=st.integers(0, 100), layer=st.sampled_from(["agent", "llm",
                                                                            "request"]),
       size=st.integers(1, 6), start=st.one_of(st.none(), st.integers(0, 30)))
def test_a_page_is_the_whole_preview_sliced(entries: list[dict[str, Any]], leaf: int,
                                            layer: Layer, size: int, start: int | None) -> None:
    with tempfile.TemporaryDirectory() as folder:
        tree = write_session(Path(folder) / "s.jsonl", entries)
        leaf_id = entries[leaf % len(entries)]["id"]
        outline = outline_of(tree, leaf_id, layer, AGENT)
        expected = cut(whole(outline_of(tree, leaf_id, layer, AGENT)), size, start)
        assert msgspec.json.encode(paged(outline, size, start)) == msgspec.json.encode(expected)


def test_the_next_page_comes_from_the_outline_until_the_session_changes(tmp_path: Path) -> None:
    sessions = tmp_path / ".pi" / "sessions"
    sessions.mkdir(parents=True)
    path = sessions / "s.jsonl"
    write_session(path, [msg(f"{i:08x}", f"{i - 1:08x}" if i else None, f"m{i}")
                         for i in range(9)])
    hub = SessionHub([tmp_path], Config())
    first = hub.outline(path, None, "agent")
    assert paged(first, 2, None).total_messages == 9
    assert hub.outline(path, None, "agent") is first
    append_lines(str(path), [json.dumps(msg("00000009", "00000008", "m9")).encode()])
    hub.file_changed(path)
    again = hub.outline(path, None, "agent")
    assert again is not first and paged(again, 2, 8).pages[0].messages[-1].entry_id == \
        "00000009"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries=sessions(), leaf=st.integers(0, 100), layer=st.sampled_from(["agent", "llm",
                                                                            "request"]))
def test_a_page_from_an_entry_starts_at_its_first_message(entries: list[dict[str, Any]],
                                                          leaf: int, layer: Layer) -> None:
    """What a context edit's Replace prefills from: one page, not the whole preview (an empty
    one for an entry with no message here, a removed one say)."""
    with tempfile.TemporaryDirectory() as folder:
        tree = write_session(Path(folder) / "s.jsonl", entries)
        leaf_id = entries[leaf % len(entries)]["id"]
        outline = outline_of(tree, leaf_id, layer, AGENT)
        rows = whole(outline).messages
        for entry in entries:
            first = [row for row in rows if row.entry_id == entry["id"]][:1]
            page = paged(outline, 1, first_row(outline, entry["id"])).pages[0]
            assert msgspec.json.encode(page.messages) == msgspec.json.encode(first)
            assert page.start == (rows.index(first[0]) if first else len(rows))


def failed_reply(error: str) -> dict[str, Any]:
    """A reply the provider refused, as pi 1.6 writes one: no content, its error."""
    return {"role": "assistant", "content": [], "api": "anthropic-messages",
            "provider": "anthropic", "model": "claude-sonnet-4-5", "stopReason": "error",
            "errorMessage": error, "timestamp": 2}


def test_a_failed_reply_left_out_shows_its_error_whole(tmp_path: Path) -> None:
    """A failed reply that pi left out of the context (an overflow, a retry) came to the chats
    only as its 72-character preview: 'prompt is too …', not why it failed. Its mark's `failure`
    holds it whole, a hostile error cut at FAILURE_CHARS; the preview row and the request stay."""
    error = ("Anthropic 400 invalid_request_error: prompt is too long: 250000 tokens > 200000 "
             "maximum")
    for said, shown in ((error, f"[error] {error}"),
                        ("x" * 100_000, "[error] " + "x" * (FAILURE_CHARS - 9) + "…")):
        tree = write_session(tmp_path / "s.jsonl", [
            msg("aaaaaaaa", None, "p400"),
            {"type": "message", "id": "bbbbbbbb", "parentId": "aaaaaaaa", "timestamp": STAMP,
             "message": failed_reply(said)},
            {"type": "context_edit", "id": "cccccccc", "parentId": "bbbbbbbb",
             "timestamp": STAMP, "targetId": "bbbbbbbb", "replacement": None}])
        for layer in ("agent", "request"):
            pages = paged(outline_of(tree, "cccccccc", layer, AGENT), 50, None)
            (mark,) = pages.edits
            assert (mark.target_id, mark.kind, mark.failure) == ("bbbbbbbb", "omitted", shown)
            assert len(mark.original) == 72  # the one-line preview, as the tree and CLI show it
            assert [row.entry_id for row in pages.pages[0].messages] == ["aaaaaaaa"]
    sent = whole(outline_of(tree, "cccccccc", "request", AGENT)).request
    assert "x" * 100 not in json.dumps(sent)  # pi 1.6 sends no left-out reply


def code_span_text(line: str) -> str:
    """The text a line of one code span between `_`s shows (CommonMark): what its backticks
    hold, one space off each end when both have one."""
    inner = line.removeprefix("_").removesuffix("_")
    ticks = "`" * (len(inner) - len(inner.lstrip("`")))
    assert ticks and inner.endswith(ticks), f"no code span: {line}"
    text = inner[len(ticks):-len(ticks)]
    assert len(ticks) not in map(len, re.findall("`+", text)), f"closed early: {line}"
    both = text.startswith(" ") and text.endswith(" ") and text.strip()
    return text[1:-1] if both else text


def test_a_failed_replys_error_reads_as_written_in_the_preview(tmp_path: Path) -> None:
    """The preview (:PiContext, VS Code's) wrapped a failed reply's error in `_(error: …)_`
    Markdown: its backticks, `*`, `_`, brackets and links were markup, shown changed."""
    error = ("OpenAI 400: `model` must be one of *gpt-5* or _mini_ [docs](https://x.y/a_b) "
             "\\_raw\\_ <https://x.y> (``a``) [error] &amp; `")
    tree = write_session(tmp_path / "s.jsonl", [
        msg("aaaaaaaa", None, "hello"),
        {"type": "message", "id": "bbbbbbbb", "parentId": "aaaaaaaa", "timestamp": STAMP,
         "message": failed_reply(error)}])
    text = paged(outline_of(tree, "bbbbbbbb", "agent", AGENT), 50, None).markdown
    (line,) = [line for line in text.split("\n") if "must be one of" in line]
    assert code_span_text(line) == f"(error: {error})"


def test_a_removed_messages_preview_reads_as_written_in_the_preview(tmp_path: Path) -> None:
    """The preview's "_Removed by the context edit …: <preview>_" put the removed message's
    preview in Markdown: its `*`, `_`, backticks and links were markup, shown changed."""
    said = "grep: `*.py` m*o*d[e](l) _a_ \\_b\\_"
    tree = write_session(tmp_path / "s.jsonl", [
        msg("aaaaaaaa", None, said),
        {"type": "context_edit", "id": "cccccccc", "parentId": "aaaaaaaa",
         "timestamp": STAMP, "targetId": "aaaaaaaa", "replacement": None}])
    text = paged(outline_of(tree, "cccccccc", "agent", AGENT), 50, None).markdown
    (line,) = [line for line in text.split("\n") if line.startswith("_Removed by")]
    head = "_Removed by the context edit `cccccccc`: "
    assert line.startswith(head)
    assert code_span_text("_" + line.removeprefix(head)) == said


def test_the_model_reads_as_written_in_the_preview() -> None:
    """The preview's "**Model** <model>" put a model name (a custom provider's, a hand-edited
    session's) in Markdown: its `*`, `_`, brackets and links were markup, shown changed."""
    model = "p/m*o*d[e](l)_x_"
    text = render_markdown("aaaaaaaa", "agent", [], 0, 0, 1000, "off", model).text
    (line,) = [line for line in text.split("\n") if line.startswith("**Model** ")]
    span = line.removeprefix("**Model** ").split(" · ")[0]
    assert code_span_text("_" + span + "_") == model


def test_a_failed_reply_replaced_sends_no_failure(tmp_path: Path) -> None:
    """A replaced reply is shown as its replacement: its error, up to FAILURE_CHARS a mark, is
    sent to nobody who shows it."""
    tree = write_session(tmp_path / "s.jsonl", [
        msg("aaaaaaaa", None, "p400"),
        {"type": "message", "id": "bbbbbbbb", "parentId": "aaaaaaaa", "timestamp": STAMP,
         "message": failed_reply("x" * 100_000)},
        {"type": "context_edit", "id": "cccccccc", "parentId": "bbbbbbbb",
         "timestamp": STAMP, "targetId": "bbbbbbbb", "replacement": {"content": "fine"}}])
    (mark,) = paged(outline_of(tree, "cccccccc", "agent", AGENT), 50, None).edits
    assert (mark.kind, mark.failure) == ("replaced", None)
