"""The runtime → model layer conversion, the provider-side transform and the size estimate."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import msgspec
import pytest

from pi_lsp.context.convert import (
    BRANCH_SUMMARY_PREFIX,
    BRANCH_SUMMARY_SUFFIX,
    NO_RESULT_TEXT,
    bash_execution_text,
    message_to_llm,
    prepare_for_provider,
)
from pi_lsp.context.preview import message_markdown
from pi_lsp.context.tokens import context_size, estimate_tokens, utf16_length
from pi_lsp.session.entries import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    LlmMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    decode_message,
    encoder,
)
from pi_lsp.session.outline import message_preview
from pi_lsp.summarize.extractive import Facts
from tests.test_system_messages import PI16, pi16_node
from tests.waits import PROCESS_CEILING_S


def bash(**fields: object) -> BashExecutionMessage:
    values: dict[str, object] = {"command": "ls", "output": "a\nb", "cancelled": False,
                                 "truncated": False, "timestamp": 1}
    values.update(fields)
    return msgspec.convert(values, BashExecutionMessage)


def assistant(*blocks: TextContent | ToolCall, stop: str = "stop", total: int = 0,
              timestamp: int = 2) -> AssistantMessage:
    return msgspec.convert({
        "content": [msgspec.to_builtins(b) for b in blocks], "api": "anthropic-messages",
        "provider": "anthropic", "model": "claude", "usage": {"totalTokens": total},
        "stopReason": stop, "timestamp": timestamp,
    }, AssistantMessage)


def call(call_id: str, name: str = "read") -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments={"path": "a.py"})


def result(call_id: str) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call_id, tool_name="read",
                             content=[TextContent(text="ok")], is_error=False, timestamp=3)


def user(text: str, timestamp: int = 4) -> UserMessage:
    return UserMessage(content=text, timestamp=timestamp)


def test_bash_execution_text_variants() -> None:
    assert bash_execution_text(bash()) == "Ran `ls`\n```\na\nb\n```"
    assert bash_execution_text(bash(output="")) == "Ran `ls`\n(no output)"
    assert bash_execution_text(bash(cancelled=True, exitCode=1)).endswith(
        "\n\n(command cancelled)")
    assert bash_execution_text(bash(exitCode=2)).endswith("\n\nCommand exited with code 2")
    assert "exited" not in bash_execution_text(bash(exitCode=0))
    truncated = bash_execution_text(bash(truncated=True, fullOutputPath="/tmp/x.log"))
    assert truncated.endswith("\n\n[Output truncated. Full output: /tmp/x.log]")
    assert "Full output" not in bash_execution_text(bash(truncated=True))


def test_excluded_bash_never_reaches_the_model() -> None:
    assert message_to_llm(bash(excludeFromContext=True)) is None


def test_custom_string_content_becomes_one_text_block() -> None:
    custom = CustomMessage(custom_type="x", content="hello", display=True, timestamp=9)
    converted = message_to_llm(custom)
    assert converted == UserMessage(content=[TextContent(text="hello")], timestamp=9)


def test_summary_wrappers() -> None:
    compaction = message_to_llm(CompactionSummaryMessage(summary="S", tokens_before=5,
                                                         timestamp=1))
    assert isinstance(compaction, UserMessage) and isinstance(compaction.content, list)
    assert compaction.content == [TextContent(text=(
        "The conversation history before this point was compacted into the following summary:"
        "\n\n<summary>\nS\n</summary>"))]
    branch = message_to_llm(BranchSummaryMessage(summary="B", from_id="x", timestamp=1))
    assert isinstance(branch, UserMessage) and isinstance(branch.content, list)
    text = branch.content[0]
    assert isinstance(text, TextContent)
    assert text.text == BRANCH_SUMMARY_PREFIX + "B" + BRANCH_SUMMARY_SUFFIX
    assert "<branch_exploration_summary>\nB\n</branch_exploration_summary>" in text.text
    assert "parallel branch" in text.text


def test_provider_transform_drops_failed_replies() -> None:
    messages: list[LlmMessage] = [
        user("a"), assistant(TextContent(text="x"), stop="error"),
        assistant(TextContent(text="y"), stop="aborted"), assistant(TextContent(text="z")),
    ]
    prepared = prepare_for_provider(messages)
    assert [m.stop_reason for m in prepared if isinstance(m, AssistantMessage)] == ["stop"]


def test_provider_transform_answers_unanswered_tool_calls_in_place() -> None:
    messages: list[LlmMessage] = [
        user("a"), assistant(call("t1"), call("t2"), stop="toolUse"), result("t1"), user("b"),
        assistant(call("t3"), stop="toolUse"),
    ]
    prepared = prepare_for_provider(messages)
    kinds = [(type(m).__name__, getattr(m, "tool_call_id", None)) for m in prepared]
    assert kinds == [
        ("UserMessage", None), ("AssistantMessage", None), ("ToolResultMessage", "t1"),
        ("ToolResultMessage", "t2"), ("UserMessage", None), ("AssistantMessage", None),
        ("ToolResultMessage", "t3"),
    ]
    synthetic = prepared[3]
    assert isinstance(synthetic, ToolResultMessage) and synthetic.is_error
    assert synthetic.content == [TextContent(text=NO_RESULT_TEXT)]


def test_a_tool_result_without_a_name_or_an_error_flag_is_read_and_shown() -> None:
    """A hand-edited result with no toolName and no isError was unreadable (a made-up error
    took its place); it is read with both absent, shown with the name JavaScript's text gives
    them (`undefined`, as pi's image caption) and not as failed."""
    raw = b'{"role":"toolResult","toolCallId":"t1","content":[{"type":"text","text":"o"}],' \
          b'"timestamp":3}'
    message = decode_message(raw)
    assert isinstance(message, ToolResultMessage)
    assert (message.tool_name, message.is_error) == (msgspec.UNSET, msgspec.UNSET)
    assert encoder.encode(message) == raw  # written back as it was
    assert message_preview(message) == "undefined: o"
    assert message_markdown(message).startswith("**undefined**\n")
    assert Facts([message]).errors == []
    failed = msgspec.structs.replace(message, is_error=True)
    assert Facts([failed]).errors == ["undefined: o"]


@pytest.mark.parametrize(("is_error", "failed"), [
    ({}, True), ([], True), ("no", True), (1, True), (0, False), ("", False), (None, False)])
def test_a_tool_results_odd_error_flag_shows_as_javascript_reads_it(is_error: Any,
                                                                   failed: bool) -> None:
    """A hand-edited isError of another type marks the result failed in pi-lsp's own views
    as pi (JavaScript) reads it: `{}` and `[]` are true, `0` and `""` false."""
    message = ToolResultMessage(tool_call_id="t1", tool_name="read",
                                content=[TextContent(text="o")], is_error=is_error, timestamp=3)
    assert message_preview(message) == ("✗ read: o" if failed else "read: o")
    assert message_markdown(message).startswith("**read (error)**" if failed else "**read**\n")
    assert Facts([message]).errors == (["read: o"] if failed else [])


def test_estimates_count_utf16_and_images() -> None:
    assert utf16_length("a🙂参") == 4
    assert estimate_tokens(user("🙂🙂")) == 1
    image = ImageContent(data="AAAA", mime_type="image/png")
    assert estimate_tokens(UserMessage(content=[image], timestamp=1)) == 1200  # pi 1.6 counts it
    with_image = ToolResultMessage(tool_call_id="t", tool_name="read", content=[image],
                                   is_error=False, timestamp=1)
    assert estimate_tokens(with_image) == 1200
    tool = assistant(ToolCall(id="t", name="read", arguments={"path": "a"}))
    assert estimate_tokens(tool) == 4  # "read" + '{"path":"a"}' = 16 chars


def test_context_size_uses_last_good_usage_plus_later_estimates() -> None:
    messages = [
        user("x" * 400), assistant(TextContent(text="ok"), total=1000),
        assistant(TextContent(text="bad"), stop="error", total=99999), user("y" * 40),
    ]
    assert context_size(list(messages)) == 1000 + 1 + 10
    assert context_size([user("x" * 400)]) == 100
    zero_total = msgspec.structs.replace(messages[1], usage=Usage(input=5, output=6))  # type: ignore[arg-type]
    assert context_size([zero_total]) == 11
    # pi 1.6: a reply that reported no usage at all is no anchor; it is estimated instead.
    silent = msgspec.structs.replace(messages[1], usage=Usage())  # type: ignore[arg-type]
    assert context_size([user("x" * 400), silent]) == 100 + 1


def test_request_layer_rows_name_their_entries_and_none_for_made_up_results() -> None:
    from pi_lsp.context.layers import AgentSetup, build_layer
    from pi_lsp.providers.registry import ModelRegistry
    from pi_lsp.session.tree import SessionTree
    from tests.conftest import conformance_files

    agent = AgentSetup(ModelRegistry(), ("anthropic", "claude-sonnet-4-5"), "off",
                       {"preamble": "hi"}, [])
    made_up = 0
    for path in conformance_files():
        tree = SessionTree.open(str(path))
        for record in tree.records[::7]:
            leaf = record.env.id
            llm = build_layer(tree, leaf, "llm").rows
            request = build_layer(tree, leaf, "request", agent)
            assert request.request is not None and len(request.rows) == \
                len(request.request.messages)
            sources = {row.entry_id for row in llm}
            rows = request.rows
            for at, row in enumerate(rows):
                if row.entry_id is None and row.role == "system":
                    # the agent's prompt, which a turn writes first, last and in place where the
                    # session's model takes system messages mid-conversation (an id gone from
                    # pi 1.6's catalog has its provider's default model's facts, as in pi)
                    assert at == len(rows) - 1
                    assert json.loads(bytes(row.message))["sections"] == {"preamble": "hi"}
                    assert request.request.model.compat.supports_mid_convo_system_messages
                elif row.entry_id is None:
                    made_up += 1
                    assert row.role == "toolResult"
                    assert NO_RESULT_TEXT.encode() in bytes(row.message)
                else:
                    assert row.entry_id in sources
    assert made_up > 0  # the samples have calls left without a result


def test_the_request_thinks_at_the_agents_default_where_the_path_sets_no_level() -> None:
    """As pi 1.6 resumes a session: the level set on the branch, else its default, and it
    thinks at that level clamped to the model, which previews report (the context itself still
    reports the branch's level or "off", as pi's buildSessionContext does). The request asked
    for the level unclamped, so its reply kept `xhigh` where pi 1.6's keeps `high`."""
    from pi_lsp.context.layers import AgentSetup, build_layer, model_at
    from pi_lsp.context.projection import context_settings
    from pi_lsp.providers.registry import ModelRegistry
    from pi_lsp.providers.thinking import clamped_level
    from pi_lsp.session.tree import SessionTree
    from tests.conftest import conformance_files

    agent = AgentSetup(ModelRegistry(), ("anthropic", "claude-sonnet-4-5"), "high",
                       {"preamble": "hi"}, [])
    seen, clamped = set(), set()
    for path in conformance_files():
        tree = SessionTree.open(str(path))
        for record in tree.records[::5]:
            settings = context_settings(tree.path_to(record.env.id))
            layer = build_layer(tree, record.env.id, "request", agent)
            assert layer.request is not None
            asked = settings.thinking_level if settings.thinking_level_set else "high"
            in_force = clamped_level(model_at(settings, agent.registry, agent.default_model),
                                     asked)
            # the request asks for the level in force, which its reply keeps, as pi 1.6's
            assert (layer.request.thinking_level, layer.thinking_level) == (in_force, in_force)
            assert build_layer(tree, record.env.id, "agent").thinking_level == \
                settings.thinking_level
            # what the server previews in any layer: the level in force for the next turn
            assert build_layer(tree, record.env.id, "agent", agent).thinking_level == in_force
            seen.add(settings.thinking_level_set)
            clamped.add(asked != in_force)
    assert seen == clamped == {True, False}  # with and without a level; clamped and not


MISSING = object()


@pytest.mark.parametrize("written", [None, 42, "extreme", MISSING])
def test_a_level_pi_cannot_read_thinks_as_little_as_the_model_allows(tmp_path, written) -> None:
    """pi takes a thinking_level_change's level as it is and clamps it: anything but a level
    gives a model its lowest one (Claude: off; GPT-5, which cannot stop reasoning: minimal)."""
    from pi_lsp.context.projection import context_settings
    from pi_lsp.providers.registry import ModelRegistry
    from pi_lsp.providers.thinking import thinking_level
    from pi_lsp.session.tree import SessionTree

    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in [
        {"type": "session", "version": 3, "id": "s", "timestamp": "2026-12-01T10:00:00.000Z",
         "cwd": "/w"},
        {"type": "thinking_level_change", "id": "a1", "parentId": None,
         "timestamp": "2026-12-01T10:00:01.000Z", "thinkingLevel": "high"},
        {"type": "thinking_level_change", "id": "a2", "parentId": "a1",
         "timestamp": "2026-12-01T10:00:02.000Z",
         **({} if written is MISSING else {"thinkingLevel": written})},
    ]) + "\n")
    tree = SessionTree.open(str(path))
    settings = context_settings(tree.path_to(tree.leaf_id))
    # Not the earlier "high"; no level at all is none set: the agent's default (as pi).
    assert settings.thinking_level_set is (written is not MISSING)
    if written is MISSING:
        return
    registry = ModelRegistry()
    assert thinking_level(registry.get("anthropic", "claude-sonnet-4-5"),
                          settings.thinking_level) is None
    assert thinking_level(registry.get("openai", "gpt-5"), settings.thinking_level) == "minimal"


# custom_message contents pi 1.6 carries into the context as they are (MISSING: no content).
ODD_CUSTOM_CONTENTS: dict[str, Any] = {
    "a number": 5, "zero": 0, "true": True, "an object": {"a": 1},
    "a text block alone": {"type": "text", "text": "hi"}, "null": None, "missing": MISSING,
    "an unknown block": [{"type": "weird", "x": 1}],
    "a text block without text": [{"type": "text"}],
    "a text block with a number": [{"type": "text", "text": 5}],
    "text and an unknown block": [{"type": "text", "text": "ok"}, {"type": "weird"}],
    "scalars": [1, "x", None], "text": "a note",
}
# What pi 1.6 made of each (tests/pi16_context.mjs), for machines without it.
STORED_CUSTOM_CONTEXTS = Path(__file__).with_name("fixtures") / "pi16-custom-contents.json"


def custom_message_session(path: Path, content: Any) -> None:
    """A user message, then a custom_message holding `content`."""
    stamp = "2026-12-01T10:00:00.000Z"
    note = {"type": "custom_message", "id": "aaaa0002", "parentId": "aaaa0001",
            "timestamp": stamp, "customType": "ext", "display": True}
    path.write_text("".join(json.dumps(line) + "\n" for line in [
        {"type": "session", "version": 3, "id": "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
         "timestamp": stamp, "cwd": str(path.parent)},
        {"type": "message", "id": "aaaa0001", "parentId": None, "timestamp": stamp,
         "message": {"role": "user", "content": [{"type": "text", "text": "hi"}],
                     "timestamp": 1}},
        note if content is MISSING else {**note, "content": content},
    ]))


def pi16_contexts(files: dict[str, Path]) -> dict[str, Any]:
    """What pi 1.6 itself (tests/pi16_context.mjs) makes of each file, by name; skips the test
    where pi 1.6 is not installed."""
    node = pi16_node()
    if node is None:
        pytest.skip("pi 1.6 is not installed")
    made = subprocess.run([node, str(Path(__file__).with_name("pi16_context.mjs")),
                           str(PI16 / "@earendil-works"), *map(str, files.values())],
                          capture_output=True, text=True, timeout=PROCESS_CEILING_S)
    assert made.returncode == 0, made.stderr
    contexts = json.loads(made.stdout)
    return {name: contexts[str(path)] for name, path in files.items()}


def test_the_stored_custom_contexts_are_pi16s(tmp_path: Path) -> None:
    files = {name: tmp_path / f"{index}.jsonl"
             for index, name in enumerate(ODD_CUSTOM_CONTENTS)}
    for name, path in files.items():
        custom_message_session(path, ODD_CUSTOM_CONTENTS[name])
    assert pi16_contexts(files) == json.loads(STORED_CUSTOM_CONTEXTS.read_text("utf-8"))


@pytest.mark.parametrize("name", list(ODD_CUSTOM_CONTENTS))
def test_a_custom_message_s_content_reaches_the_context_as_pi16_carries_it(
        tmp_path: Path, name: str) -> None:
    """A custom_message whose content was not text or known blocks (a number, an object,
    unknown blocks) was left out of both layers; pi 1.6 carries it as it is."""
    from pi_lsp.context.layers import build_layer
    from pi_lsp.session.tree import SessionTree

    path = tmp_path / "s.jsonl"
    custom_message_session(path, ODD_CUSTOM_CONTENTS[name])
    tree = SessionTree.open(str(path))
    pi = json.loads(STORED_CUSTOM_CONTEXTS.read_text("utf-8"))[name]
    for layer in ("agent", "llm"):
        rows = build_layer(tree, tree.leaf_id, layer).rows  # as the text view reads them
        assert [json.loads(bytes(row.message)) for row in rows] == pi[layer]


# Sessions a differential fuzz against pi 1.6 found pi-lsp reading otherwise: replies whose
# bookkeeping fields pi never checks hold something else than text.
USAGE = {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
         "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}
REPLY = {"role": "assistant", "content": [{"type": "text", "text": "hi"}],
         "api": "openai-responses", "provider": "openai", "model": "gpt-5", "usage": USAGE,
         "stopReason": "stop", "timestamp": 1764769388000}
ODD_REPLIES: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {
    # name: (the reply's fields over REPLY's, MISSING removing one; the entries after it)
    "provider 5": ({"provider": 5}, []),
    "provider null": ({"provider": None}, []),
    "model 5": ({"model": 5}, []),
    "stopReason 7": ({"stopReason": 7}, []),
    "provider 5, edited": ({"provider": 5}, [
        {"type": "context_edit", "targetId": "aaaa0002", "replacement": {"content": "short"}}]),
    "no provider, level ''": ({"provider": MISSING, "api": "anthropic-messages",
                               "model": "claude-opus-4-1"}, [
        {"type": "thinking_level_change", "thinkingLevel": ""}]),
    "level 42": ({}, [{"type": "thinking_level_change", "thinkingLevel": 42}]),
    "no level": ({}, [{"type": "thinking_level_change"}]),
    "model change to provider 5": ({}, [{"type": "model_change", "provider": 5,
                                         "modelId": "gpt-5"}]),
}
# What pi 1.6 made of each (tests/pi16_context.mjs), for machines without it.
STORED_ODD_REPLIES = Path(__file__).with_name("fixtures") / "pi16-odd-replies.json"


def chained_session(path: Path, lines: list[dict[str, Any]], first: int) -> None:
    """A session of `lines` (each its `type` and fields), every entry under the one before,
    their ids aaaa000N counted from `first`."""
    path.write_text("".join(json.dumps(line) + "\n" for line in [
        {"type": "session", "version": 3, "id": "01900000-0000-7000-8000-000000000001",
         "timestamp": "2026-12-03T13:43:06.440Z", "cwd": "/home/dev/project"},
        *({"type": line["type"], "id": f"aaaa000{first + index}",
           "parentId": f"aaaa000{first + index - 1}" if index > 0 else None,
           "timestamp": f"2026-12-03T13:43:{index + 7:02d}.000Z",
           **{key: value for key, value in line.items() if key != "type"}}
          for index, line in enumerate(lines))]))


def odd_reply_session(path: Path, name: str) -> None:
    """A model change, a question, then the reply `name` sets out and the entries after it."""
    fields, after = ODD_REPLIES[name]
    reply = {key: value for key, value in {**REPLY, **fields}.items() if value is not MISSING}
    lines = [
        {"type": "model_change", "provider": "anthropic", "modelId": "claude-sonnet-4-5"},
        {"type": "message", "message": {"role": "user", "content": "q",
                                        "timestamp": 1764769387000}},
        {"type": "message", "message": reply}, *after]
    chained_session(path, lines, first=0)


def test_the_stored_odd_replies_are_pi16s(tmp_path: Path) -> None:
    files = {name: tmp_path / f"{index}.jsonl" for index, name in enumerate(ODD_REPLIES)}
    for name, path in files.items():
        odd_reply_session(path, name)
    assert pi16_contexts(files) == json.loads(STORED_ODD_REPLIES.read_text("utf-8"))


@pytest.mark.parametrize("name", list(ODD_REPLIES))
def test_a_reply_with_odd_bookkeeping_reaches_both_layers_as_in_pi16(
        tmp_path: Path, name: str) -> None:
    """A reply whose provider, model or stop reason was no text was left out of the model
    layer, and an edit of it was not applied; pi 1.6 keeps it and applies the edit."""
    from pi_lsp.context.layers import build_layer
    from pi_lsp.session.tree import SessionTree

    path = tmp_path / "s.jsonl"
    odd_reply_session(path, name)
    tree = SessionTree.open(str(path))
    pi = json.loads(STORED_ODD_REPLIES.read_text("utf-8"))[name]
    for layer in ("agent", "llm"):
        rows = build_layer(tree, tree.leaf_id, layer).rows
        assert [json.loads(bytes(row.message)) for row in rows] == pi[layer], layer


@pytest.mark.parametrize("name", list(ODD_REPLIES))
def test_the_model_and_level_are_reported_as_pi16_holds_them(tmp_path: Path, name: str) -> None:
    """A reply without text for its provider or model was skipped (the earlier model_change's
    was reported, or none), and a level "" or of another type was reported as "off"; pi 1.6
    reports each as the entry holds it."""
    from pi_lsp.context.build import build_session_context
    from pi_lsp.session.tree import SessionTree

    path = tmp_path / "s.jsonl"
    odd_reply_session(path, name)
    tree = SessionTree.open(str(path))
    pi = json.loads(STORED_ODD_REPLIES.read_text("utf-8"))[name]
    context = json.loads(encoder.encode(build_session_context(tree, tree.leaf_id)))
    assert {key: context[key] for key in ("thinkingLevel", "model") if key in context} == \
        {key: pi[key] for key in ("thinkingLevel", "model") if key in pi}


@pytest.mark.parametrize(("name", "named"), [
    ("provider 5", "5/gpt-5"), ("provider null", "null/gpt-5"), ("model 5", "openai/5"),
    ("no provider, level ''", "undefined/claude-opus-4-1")])
def test_a_model_named_with_no_text_is_an_unknown_one(tmp_path: Path, name: str,
                                                      named: str) -> None:
    """A turn's model is looked up by the text JavaScript makes of each part, as pi names it
    in its own message: a model no one has, whose provider is refused as not configured."""
    from pi_lsp.context.layers import AgentSetup, build_layer
    from pi_lsp.context.preview import render_preview
    from pi_lsp.providers.factory import UnknownProviderError, provider_factory
    from pi_lsp.providers.registry import ModelRegistry
    from pi_lsp.session.tree import SessionTree

    path = tmp_path / "s.jsonl"
    odd_reply_session(path, name)
    tree = SessionTree.open(str(path))
    registry = ModelRegistry()
    agent = AgentSetup(registry, ("anthropic", "claude-sonnet-4-5"), "high", {}, [])
    layer = build_layer(tree, tree.leaf_id, "request", agent)
    assert layer.request is not None
    provider, model_id = named.split("/")
    assert (layer.request.model.provider, layer.request.model.id) == (provider, model_id)
    assert f"model: {named}" in render_preview(build_layer(tree, tree.leaf_id, "agent"))
    if provider != "openai":
        with pytest.raises(UnknownProviderError, match=f"provider '{provider}' is not"):
            provider_factory(registry, lambda _name: "key")(provider)


# bashExecution messages a differential fuzz against pi 1.6 found left out of the model layer:
# fields missing or of another type. pi writes an extension's `user_bash` result as returned
# (recordBashResult), and its bashExecutionToText reads each field as JavaScript does.
BASH = {"role": "bashExecution", "command": "ls", "output": "x", "exitCode": 0,
        "cancelled": False, "truncated": False, "timestamp": 1764769388000}
ODD_BASH: dict[str, dict[str, Any]] = {  # name: the fields over BASH's (MISSING removes one)
    "no truncated": {"truncated": MISSING},
    "output and exitCode only": {"command": MISSING, "cancelled": MISSING,
                                 "truncated": MISSING, "timestamp": MISSING, "exitCode": 1},
    "output null": {"output": None},
    "output 0": {"output": 0},
    "output 5": {"output": 5},
    "output []": {"output": []},
    "command 5": {"command": 5},
    "command object": {"command": {"a": 1}},
    "exitCode '1'": {"exitCode": "1"},
    "exitCode '0'": {"exitCode": "0"},
    "exitCode true": {"exitCode": True},
    "exitCode false": {"exitCode": False},
    "exitCode 0.0": {"exitCode": 0.0},
    "exitCode null": {"exitCode": None},
    "cancelled 'yes'": {"cancelled": "yes", "exitCode": 2},
    "truncated, fullOutputPath 5": {"truncated": 1, "fullOutputPath": 5},
    "truncated, fullOutputPath []": {"truncated": True, "fullOutputPath": []},
    "excludeFromContext 'yes'": {"excludeFromContext": "yes"},
    "excludeFromContext 0": {"excludeFromContext": 0},
    "timestamp 'x'": {"timestamp": "x"},
}
# What pi 1.6 made of each (tests/pi16_context.mjs), for machines without it.
STORED_ODD_BASH = Path(__file__).with_name("fixtures") / "pi16-odd-bash.json"


def odd_bash_session(path: Path, name: str) -> None:
    """A question, then the bashExecution message `name` sets out."""
    fields = {**BASH, **ODD_BASH[name]}
    bash_message = {key: value for key, value in fields.items() if value is not MISSING}
    stamp = "2026-12-03T13:43:07.000Z"
    path.write_text("".join(json.dumps(line) + "\n" for line in [
        {"type": "session", "version": 3, "id": "01900000-0000-7000-8000-000000000001",
         "timestamp": stamp, "cwd": "/home/dev/project"},
        {"type": "message", "id": "aaaa0001", "parentId": None, "timestamp": stamp,
         "message": {"role": "user", "content": "q", "timestamp": 1764769387000}},
        {"type": "message", "id": "aaaa0002", "parentId": "aaaa0001", "timestamp": stamp,
         "message": bash_message}]))


def test_the_stored_odd_bash_executions_are_pi16s(tmp_path: Path) -> None:
    files = {name: tmp_path / f"{index}.jsonl" for index, name in enumerate(ODD_BASH)}
    for name, path in files.items():
        odd_bash_session(path, name)
    assert pi16_contexts(files) == json.loads(STORED_ODD_BASH.read_text("utf-8"))


@pytest.mark.parametrize("name", list(ODD_BASH))
def test_a_bash_execution_with_odd_fields_reaches_the_model_as_in_pi16(
        tmp_path: Path, name: str) -> None:
    """A bashExecution message with a field missing or of another type (no `truncated`, an
    extension's `{output, exitCode}`) was left out of the model and request layers, so the
    model never saw the command's output; pi 1.6 renders it as `Ran ...` regardless. Its
    estimate, the request and a summary's transcript read it too."""
    from pi_lsp.context.layers import AgentSetup, build_layer
    from pi_lsp.context.messages import decode_path
    from pi_lsp.providers.output_room import input_tokens
    from pi_lsp.providers.registry import ModelRegistry
    from pi_lsp.session.tree import SessionTree
    from pi_lsp.summarize.serialize import serialize_conversation
    from pi_lsp.summarize.summarizer import llm_messages

    path = tmp_path / "s.jsonl"
    odd_bash_session(path, name)
    tree = SessionTree.open(str(path))
    pi = json.loads(STORED_ODD_BASH.read_text("utf-8"))[name]
    for layer in ("agent", "llm"):
        rows = build_layer(tree, tree.leaf_id, layer).rows
        assert [json.loads(bytes(row.message)) for row in rows] == pi[layer], layer
    agent_rows = build_layer(tree, tree.leaf_id, "agent").rows
    assert agent_rows[1].role == "bashExecution"
    agent = AgentSetup(ModelRegistry(), ("anthropic", "claude-sonnet-4-5"), "off", {}, [])
    request = build_layer(tree, tree.leaf_id, "request", agent).request
    assert request is not None
    sent = [json.loads(encoder.encode(m))["content"] for m in request.messages]
    assert sent == [m["content"] for m in pi["llm"]]
    assert input_tokens(request) > 0  # the output room is worked out whatever the stamp
    decoded = decode_path(tree, tree.leaf_id).messages
    transcript = serialize_conversation(llm_messages([m for m in decoded if m is not None]))
    ran = [m for m in pi["llm"] if m["content"] != "q"]
    for message in ran:
        assert message["content"][0]["text"] in transcript
    if not ran:  # excluded from the context, as in pi
        assert "Ran" not in transcript


# Messages pi 1.6 turns into user messages whose rows pi-lsp wrote otherwise (found by the
# differential fuzz): pi's convertToLlm passes the message's timestamp on as it is (none: no
# key) and a custom message's content too (none: no key).
CUSTOM = {"role": "custom", "customType": "x", "content": "c", "display": True, "timestamp": 1}
SUMMARY = {"summary": "s", "timestamp": 1}
RESULT = {"role": "toolResult", "toolCallId": "c1", "toolName": "read",
          "content": [{"type": "text", "text": "ok"}], "isError": False, "timestamp": 1}
ODD_LLM_ROWS: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {
    # name: (the message of the entry after a question; the entries after it)
    "custom, no timestamp": ({**CUSTOM, "timestamp": MISSING}, []),
    "custom, timestamp 'x'": ({**CUSTOM, "timestamp": "x"}, []),
    "custom, timestamp true": ({**CUSTOM, "timestamp": True}, []),
    "custom, timestamp 1.5": ({**CUSTOM, "timestamp": 1.5}, []),
    "custom, timestamp []": ({**CUSTOM, "timestamp": []}, []),
    "custom, no content": ({**CUSTOM, "content": MISSING}, []),
    "custom, no content, timestamp 'x'": ({**CUSTOM, "content": MISSING, "timestamp": "x"}, []),
    "custom, edited to no content": (CUSTOM, [
        {"type": "context_edit", "targetId": "aaaa0002", "replacement": {}}]),
    "bash, timestamp true": ({**BASH, "timestamp": True}, []),
    "bash, timestamp []": ({**BASH, "timestamp": []}, []),
    "branchSummary, timestamp 'x'": ({"role": "branchSummary", **SUMMARY, "timestamp": "x"}, []),
    "branchSummary, timestamp 1.5": ({"role": "branchSummary", **SUMMARY, "timestamp": 1.5}, []),
    "compactionSummary, timestamp false": (
        {"role": "compactionSummary", **SUMMARY, "timestamp": False}, []),
    "compactionSummary, no timestamp": (
        {"role": "compactionSummary", **SUMMARY, "timestamp": MISSING}, []),
    "toolResult, toolCallId null": ({**RESULT, "toolCallId": None}, []),
    "toolResult, toolCallId 5": ({**RESULT, "toolCallId": 5}, []),
    "toolResult, toolCallId {}": ({**RESULT, "toolCallId": {}}, []),
}
# What pi 1.6 made of each (tests/pi16_context.mjs), for machines without it.
STORED_ODD_LLM_ROWS = Path(__file__).with_name("fixtures") / "pi16-odd-llm-rows.json"


def odd_llm_row_session(path: Path, name: str) -> None:
    """A question, then the message `name` sets out and the entries after it."""
    message, after = ODD_LLM_ROWS[name]
    lines = [{"type": "message", "message": {"role": "user", "content": "q", "timestamp": 1}},
             {"type": "message", "message": {key: value for key, value in message.items()
                                             if value is not MISSING}}, *after]
    chained_session(path, lines, first=1)


def test_the_stored_odd_llm_rows_are_pi16s(tmp_path: Path) -> None:
    files = {name: tmp_path / f"{index}.jsonl" for index, name in enumerate(ODD_LLM_ROWS)}
    for name, path in files.items():
        odd_llm_row_session(path, name)
    assert pi16_contexts(files) == json.loads(STORED_ODD_LLM_ROWS.read_text("utf-8"))


@pytest.mark.parametrize("name", list(ODD_LLM_ROWS))
def test_a_converted_message_keeps_its_timestamp_and_content_as_pi16_does(
        tmp_path: Path, name: str) -> None:
    """A custom message with no timestamp got `"timestamp":null`, one with text, true, 1.5 or
    [] got null or 0 (bash, summaries alike), and one with no content `"content":null`, where
    pi 1.6 passes each on as it is, or leaves the key out. A tool result whose toolCallId was
    no text (null, 5, {}) was a message pi-lsp could not read, left out of both layers; pi
    1.6 keeps it (a request leaves it out as a result of no call sent)."""
    from pi_lsp.context.layers import build_layer
    from pi_lsp.session.tree import SessionTree

    path = tmp_path / "s.jsonl"
    odd_llm_row_session(path, name)
    tree = SessionTree.open(str(path))
    pi = json.loads(STORED_ODD_LLM_ROWS.read_text("utf-8"))[name]
    for layer in ("agent", "llm"):
        rows = [json.loads(bytes(row.message)) for row in build_layer(tree, tree.leaf_id,
                                                                       layer).rows]
        if layer == "llm" and name.startswith("branchSummary"):  # pi-lsp's own wrapper
            assert rows[1]["content"][0]["text"].startswith(BRANCH_SUMMARY_PREFIX)
            rows[1]["content"] = pi[layer][1]["content"]
        assert rows == pi[layer], layer


@pytest.mark.parametrize("call_id", [None, 5, {}])
def test_a_tool_result_answering_no_call_is_read_as_pi16_reads_it(
        tmp_path: Path, call_id: Any) -> None:
    """A tool result whose toolCallId was no text (null, 1e400, {}) was a message pi-lsp
    could not read: `check` called it unreadable, its row had no role and no estimate. pi 1.6
    keeps it in its context; a request leaves it out (it answers no call sent)."""
    from pi_lsp.context.layers import AgentSetup, build_layer
    from pi_lsp.providers.registry import ModelRegistry
    from pi_lsp.session.check import check_session
    from pi_lsp.session.entries import role_of
    from pi_lsp.session.tree import SessionTree

    path = tmp_path / "s.jsonl"
    chained_session(path, [{"type": "message", "message": {"role": "user", "content": "q",
                                                           "timestamp": 1}},
                           {"type": "message", "message": {**RESULT, "toolCallId": call_id}}],
                    first=1)
    tree = SessionTree.open(str(path))
    assert [p.kind for p in check_session(tree)] == []
    for layer in ("agent", "llm"):
        row = build_layer(tree, tree.leaf_id, layer).rows[1]
        assert (row.role, row.tokens) == ("toolResult", 1)
    agent = AgentSetup(ModelRegistry(), ("anthropic", "claude-sonnet-4-5"), "off", {}, [])
    request = build_layer(tree, tree.leaf_id, "request", agent).request
    assert request is not None
    assert [role_of(m) for m in request.messages] == ["user"]


# Custom messages holding half a character (a lone surrogate escape) and the content pi 1.6's
# convertToLlm sends for each (tests/pi16_context.mjs).
SURROGATE_CUSTOMS: dict[str, tuple[str, list[dict[str, str]]]] = {
    "in text content": ('"content":"half \\ud83d emoji"',
                        [{"type": "text", "text": "half \ud83d emoji"}]),
    "in a text block": ('"content":[{"type":"text","text":"half \\ud83d emoji"}]',
                        [{"type": "text", "text": "half \ud83d emoji"}]),
    "in its details": ('"content":[{"type":"text","text":"ok"}],"details":{"x":"\\ud83d"}',
                       [{"type": "text", "text": "ok"}]),
}


@pytest.mark.parametrize("name", list(SURROGATE_CUSTOMS))
def test_a_custom_message_with_half_a_character_reaches_the_model_as_in_pi16(
        tmp_path: Path, name: str) -> None:
    """A lone surrogate anywhere in a custom message failed the model layer and every request
    ("a lone surrogate where it does not fit", or "Expected `raw`"): the decoder's slow path
    kept as JSON text only the fields typed Raw alone, not `Raw | UNSET`."""
    from pi_lsp.context.layers import build_layer
    from pi_lsp.session.tree import SessionTree

    fields, content = SURROGATE_CUSTOMS[name]
    path = tmp_path / "s.jsonl"
    path.write_text(
        '{"type":"session","version":3,"id":"s","timestamp":"2026-12-01T10:00:00.000Z",'
        '"cwd":"/tmp"}\n{"type":"custom_message","id":"a1","parentId":null,'
        '"timestamp":"2026-12-01T10:00:01.000Z","customType":"ext","display":true,'
        f"{fields}}}\n")
    tree = SessionTree.open(str(path))
    rows = build_layer(tree, tree.leaf_id, "llm").rows
    assert [json.loads(bytes(row.message)) for row in rows] == [
        {"role": "user", "content": content, "timestamp": 1796119201000}]


def test_a_message_with_half_a_character_and_a_number_past_a_double_builds_as_in_pi16(
        tmp_path: Path) -> None:
    """A line holding both a lone surrogate and 1e400 failed every layer of its session's
    context ("JSON is malformed: Infinity is not JSON"): the decoder's slow path wrote the
    message again with the standard library's Infinity, which no JSON reader takes. pi 1.6
    reads 1e400 as Infinity, which JSON.stringify (and msgspec) write as null."""
    from pi_lsp.context.layers import build_layer
    from pi_lsp.session.tree import SessionTree

    path = tmp_path / "s.jsonl"
    path.write_text(
        '{"type":"session","version":3,"id":"s","timestamp":"2026-12-01T10:00:00.000Z",'
        '"cwd":"/tmp"}\n{"type":"message","id":"a1","parentId":null,'
        '"timestamp":"2026-12-01T10:00:01.000Z","message":{"role":"user","content":'
        '"half \\ud83d emoji","details":{"size":1e400},"timestamp":3}}\n')
    tree = SessionTree.open(str(path))
    for layer in ("agent", "llm"):
        rows = build_layer(tree, tree.leaf_id, layer).rows
        assert [json.loads(bytes(row.message)) for row in rows] == [
            {"role": "user", "content": "half \ud83d emoji", "details": {"size": None},
             "timestamp": 3}]


def test_an_integer_past_pythons_digit_limit_reads_as_infinity_as_in_pi16(
        tmp_path: Path) -> None:
    """An integer of 5,001 digits in a line (a hostile file's timestamp) made every command on
    its session fail: msgspec and Python refuse more than 4,300 digits, and the line's problem
    was then classified from a value never read ("pi-lsp: internal error (UnboundLocalError:
    ...)"). JSON.parse reads it as Infinity, which JSON.stringify writes as null."""
    from pi_lsp.context.layers import build_layer
    from pi_lsp.session.tree import SessionTree

    big = "1" + "0" * 5000
    path = tmp_path / "s.jsonl"
    path.write_text(
        '{"type":"session","version":3,"id":"s","timestamp":"2026-12-01T10:00:00.000Z",'
        '"cwd":"/tmp"}\n{"type":"message","id":"a1","parentId":null,'
        f'"timestamp":{big},"message":{{"role":"user","content":"hi",'
        f'"details":{{"size":{big}}},"timestamp":-{big}}}}}\n')
    tree = SessionTree.open(str(path))
    assert tree.leaf_id == "a1"
    for layer in ("agent", "llm"):
        rows = build_layer(tree, tree.leaf_id, layer).rows
        assert [json.loads(bytes(row.message)) for row in rows] == [
            {"role": "user", "content": "hi", "details": {"size": None}, "timestamp": None}]


def long_integer_session(path: Path, digits: int) -> None:
    """A message with half a character (so its line takes the decoder's standard-library path)
    and integers of `digits` digits."""
    big = "1" + "0" * (digits - 1)
    path.write_text(
        '{"type":"session","version":3,"id":"s","timestamp":"2026-12-01T10:00:00.000Z",'
        '"cwd":"/tmp"}\n{"type":"message","id":"a1","parentId":null,'
        '"timestamp":"2026-12-01T10:00:01.000Z","message":{"role":"user","content":'
        f'"half \\ud83d emoji","details":{{"size":{big}}},"timestamp":-{big}}}}}\n')


# From 310 digits JSON.parse reads Infinity (4,300 is Python's own limit, 4,301 past it).
LONG_INTEGER_DIGITS = [310, 400, 4300, 4301]


@pytest.mark.parametrize("digits", LONG_INTEGER_DIGITS)
def test_an_integer_past_a_double_reads_as_infinity_as_in_pi16(tmp_path: Path,
                                                               digits: int) -> None:
    """An integer of 310 to 4,300 digits was read exactly (jsontext.js_integer took Python's
    int up to its limit), and the context held all its digits where pi 1.6 reads Infinity and
    writes null, as for 1e400 or 4,301 digits."""
    from pi_lsp.context.layers import build_layer
    from pi_lsp.session.tree import SessionTree

    path = tmp_path / "s.jsonl"
    long_integer_session(path, digits)
    tree = SessionTree.open(str(path))
    for layer in ("agent", "llm"):
        rows = build_layer(tree, tree.leaf_id, layer).rows
        assert [json.loads(bytes(row.message)) for row in rows] == [
            {"role": "user", "content": "half \ud83d emoji", "details": {"size": None},
             "timestamp": None}]


def test_pi16_reads_an_integer_past_a_double_as_infinity(tmp_path: Path) -> None:
    files = {str(digits): tmp_path / f"{digits}.jsonl" for digits in LONG_INTEGER_DIGITS}
    for digits, path in files.items():
        long_integer_session(path, int(digits))
    for context in pi16_contexts(files).values():
        assert context["agent"] == context["llm"] == [
            {"role": "user", "content": "half \ud83d emoji", "details": {"size": None},
             "timestamp": None}]


@pytest.mark.parametrize(("entry", "summary"), [
    ('"type":"compaction","summary":1e400,"firstKeptEntryId":"a1","tokensBefore":5', "Infinity"),
    ('"type":"compaction","summary":-1e400,"firstKeptEntryId":"a1"', "-Infinity"),
    ('"type":"branch_summary","fromId":"a1","summary":1e400', "Infinity"),
])
def test_a_summary_past_a_double_reaches_the_model_as_in_pi16(
        tmp_path: Path, entry: str, summary: str) -> None:
    """A compaction or branch summary that is a number past a double's range (1e400) reached
    the model as `<summary>\\nnull\\n</summary>`: pi-lsp wrote its summary message as JSON,
    where 1e400 is null. pi 1.6 carries it as Infinity, which convertToLlm writes "Infinity"
    (checked with tests/pi16_context.mjs)."""
    from pi_lsp.context.layers import build_layer
    from pi_lsp.session.tree import SessionTree

    path = tmp_path / "s.jsonl"
    path.write_text(
        '{"type":"session","version":3,"id":"s","timestamp":"2026-12-01T10:00:00.000Z",'
        '"cwd":"/tmp"}\n{"type":"message","id":"a1","parentId":null,'
        '"timestamp":"2026-12-01T10:00:01.000Z","message":{"role":"user","content":"hi",'
        f'"timestamp":1}}}}\n{{{entry},"id":"b1","parentId":"a1",'
        '"timestamp":"2026-12-01T10:00:02.000Z"}\n')
    tree = SessionTree.open(str(path))
    texts = [row["content"][0]["text"] for row in
             (json.loads(bytes(r.message)) for r in build_layer(tree, "b1", "llm").rows)
             if isinstance(row["content"], list)]
    assert len(texts) == 1
    assert texts[0].endswith(f">\n{summary}\n</summary>" if "compaction" in entry
                             else f">\n{summary}\n</branch_exploration_summary>")  # ours


def test_a_row_pi_lsp_cannot_type_shows_the_estimate_its_total_counts(tmp_path: Path) -> None:
    """An image beside a block of an unknown type: pi 1.6 estimates 1,200 tokens, which the
    total adds, so each layer's row for it shows 1,200 too (not 0)."""
    from pi_lsp.context.layers import AgentSetup, build_layer
    from pi_lsp.providers.registry import ModelRegistry
    from pi_lsp.session.tree import SessionTree

    usage = {"input": 100, "output": 50, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 150,
             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}
    image = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "hello"}], "timestamp": 1},
        {"role": "assistant", "content": [{"type": "text", "text": "hi"}],
         "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5",
         "usage": usage, "stopReason": "stop", "timestamp": 2},
        {"role": "user", "content": [image, {"type": 42}], "timestamp": 3},
        {"role": "custom", "customType": "note", "content": [image, {"type": "x"}],
         "display": True, "timestamp": 4},
    ]
    lines = [{"type": "session", "version": 3, "id": "019b2547-0000-7000-8000-000000000003",
              "timestamp": "2026-12-01T10:00:00.000Z", "cwd": str(tmp_path)}]
    lines += [{"type": "message", "id": f"e{at}", "parentId": f"e{at - 1}" if at else None,
               "timestamp": "2026-12-01T10:00:01.000Z", "message": message}
              for at, message in enumerate(messages)]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), "utf-8")
    tree = SessionTree.open(str(path))
    agent = AgentSetup(ModelRegistry(), ("anthropic", "claude-sonnet-4-5"), "off",
                       {"preamble": "hi"}, [])
    for layer in ("agent", "llm"):
        built = build_layer(tree, "e3", layer, agent)
        odd = [row.tokens for row in built.rows if row.entry_id in ("e2", "e3")]
        assert odd == [1200, 1200], layer
        assert built.total_tokens == built.reported_tokens + sum(odd) == 150 + 2400


@pytest.mark.parametrize("leaf", ["no id", '""', "0", "false"])
def test_every_preview_at_an_id_less_leaf_names_the_model_and_level_a_prompt_takes(
        tmp_path: Path, leaf: str) -> None:
    """The agent and llm layers (the editors' preview shows the agent layer first) named the
    path's model and level as the ones in force there (haiku at high), where a prompt there
    takes the defaults, as the request layer says (sonnet at medium); without the agent they
    are still pi's buildSessionContext's own."""
    from pi_lsp.context.layers import AgentSetup, build_layer
    from pi_lsp.providers.registry import ModelRegistry
    from pi_lsp.session.tree import SessionTree
    from tests.test_run_cli import IDLESS_LEAVES, leveled_session

    path = tmp_path / "s.jsonl"
    leveled_session(path, IDLESS_LEAVES[leaf])
    tree = SessionTree.open(str(path))
    agent = AgentSetup(ModelRegistry(), ("anthropic", "claude-sonnet-4-5"), "medium", {}, [])
    shown = {layer: build_layer(tree, tree.leaf_id, layer, agent)  # type: ignore[arg-type]
             for layer in ("agent", "llm", "request")}
    assert {(c.model.model_id if c.model else None, c.thinking_level)
            for c in shown.values()} == {(None, "medium")}
    own = build_layer(tree, tree.leaf_id, "agent")
    assert own.model is not None and (own.model.model_id, own.thinking_level) == \
        ("claude-haiku-4-5", "high")


# Sessions with a block of a type pi-lsp does not know in a user, assistant, custom, tool result
# or system message, and pi 1.6's estimate of each message of their context
# (tests/pi16_estimates.mjs).
UNKNOWN_BLOCKS = Path(__file__).with_name("fixtures") / "pi16-unknown-blocks"
STORED_UNKNOWN_BLOCK_ESTIMATES = UNKNOWN_BLOCKS.with_name("pi16-unknown-blocks-estimates.json")


def test_the_stored_estimates_of_messages_with_unknown_blocks_are_pi16s() -> None:
    node = pi16_node()
    if node is None:
        pytest.skip("pi 1.6 is not installed")
    files = sorted(UNKNOWN_BLOCKS.glob("*.jsonl"))
    made = subprocess.run([node, str(Path(__file__).with_name("pi16_estimates.mjs")),
                           str(PI16 / "@earendil-works"), *map(str, files)],
                          capture_output=True, text=True, timeout=PROCESS_CEILING_S)
    assert made.returncode == 0, made.stderr
    estimates = {Path(file).name: tokens for file, tokens in json.loads(made.stdout).items()}
    assert estimates == json.loads(STORED_UNKNOWN_BLOCK_ESTIMATES.read_text("utf-8"))


@pytest.mark.parametrize("name", sorted(path.name for path in UNKNOWN_BLOCKS.glob("*.jsonl")))
def test_check_names_the_blocks_no_request_carries(name: str) -> None:
    """Since such a message is read without its unknown blocks, `check` said nothing of them
    (it had named the message unreadable): a user message whose only block is a video showed
    as an empty message, and its words were never sent, with no sign of it."""
    from pi_lsp.session.check import check_session
    from pi_lsp.session.tree import SessionTree

    tree = SessionTree.open(str(UNKNOWN_BLOCKS / name))
    [problem] = check_session(tree)
    entry = json.loads(UNKNOWN_BLOCKS.joinpath(name).read_text("utf-8").splitlines()[
        problem.line - 1])
    blocks = entry["content"] if entry["type"] == "custom_message" else \
        entry["message"]["content"]
    known = {"text", "image", *(("thinking", "toolCall") if entry.get("message", {}).get(
        "role") == "assistant" else ())}
    unsent = [b for b in blocks if not (isinstance(b, dict) and b.get("type") in known)]
    assert (problem.kind, problem.entry_id) == ("unsent-block", entry["id"])
    assert problem.message.startswith(f"{len(unsent)} content block(s) of a type its ")


def test_check_finds_no_unsent_block_in_sessions_pi_wrote() -> None:
    from pi_lsp.session.check import check_session
    from pi_lsp.session.tree import SessionTree
    from tests.conftest import conformance_files

    for path in conformance_files():
        tree = SessionTree.open(str(path))
        assert "unsent-block" not in [p.kind for p in check_session(tree)], path


@pytest.mark.parametrize("name", sorted(path.name for path in UNKNOWN_BLOCKS.glob("*.jsonl")))
def test_a_message_with_a_block_of_an_unknown_type_shows_and_counts_its_other_blocks(
        name: str) -> None:
    """Such a message showed in every layer, the CLI's and the preview's, as "a message pi-lsp
    cannot read" (role `?`), and the request layer left it out; it shows the blocks the model
    is sent, each row counted as pi 1.6's estimate counts the message (the block as nothing)."""
    from pi_lsp.context.layers import AgentSetup, build_layer
    from pi_lsp.context.preview import render_preview
    from pi_lsp.providers.registry import ModelRegistry
    from pi_lsp.session.tree import SessionTree

    tree = SessionTree.open(str(UNKNOWN_BLOCKS / name))
    agent = AgentSetup(ModelRegistry(), ("anthropic", "claude-sonnet-4-5"), "off",
                       {"preamble": "hi"}, [])
    pi = json.loads(STORED_UNKNOWN_BLOCK_ESTIMATES.read_text("utf-8"))[name]
    sent = [row.entry_id for row in build_layer(tree, tree.leaf_id, "agent").rows
            if row.role != "system"]
    for layer in ("agent", "llm", "request"):
        built = build_layer(tree, tree.leaf_id, layer, agent)
        rows = built.rows
        assert "?" not in [row.role for row in rows], layer
        assert "cannot read" not in render_preview(built), layer
        assert not any("cannot read" in message_markdown(decode_message(row.message))
                       for row in rows), layer
        tokens = {row.entry_id: row.tokens for row in rows}
        assert [tokens.get(row.entry_id, count) for row, count
                in zip(build_layer(tree, tree.leaf_id, "agent").rows, pi, strict=True)] == pi
    assert [row.entry_id for row in built.rows if row.role != "system"] == sent


RESULT_TEXT = Path(__file__).with_name("fixtures") / "pi16-result-text" / "result-text.jsonl"
PI16_RESULT_TEXT_ESTIMATES = [84, 1, 5, 2]  # pi 1.6's estimateTokens of its context's messages


def test_a_tool_result_whose_content_is_a_text_shows_and_counts_that_text() -> None:
    """A tool result whose content was a text showed as "a message pi-lsp cannot read" (role
    `?`), and the request layer held "No result provided" in its place; every layer shows the
    text, counted as pi 1.6's estimate counts it (checked against pi 1.6 where installed)."""
    from pi_lsp.context.layers import AgentSetup, build_layer
    from pi_lsp.context.preview import render_preview
    from pi_lsp.providers.registry import ModelRegistry
    from pi_lsp.session.tree import SessionTree

    node = pi16_node()
    if node is not None:
        made = subprocess.run([node, str(Path(__file__).with_name("pi16_estimates.mjs")),
                               str(PI16 / "@earendil-works"), str(RESULT_TEXT)],
                              capture_output=True, text=True, timeout=PROCESS_CEILING_S)
        assert made.returncode == 0, made.stderr
        assert json.loads(made.stdout)[str(RESULT_TEXT)] == PI16_RESULT_TEXT_ESTIMATES
    tree = SessionTree.open(str(RESULT_TEXT))
    agent = AgentSetup(ModelRegistry(), ("anthropic", "claude-sonnet-4-5"), "off",
                       {"preamble": "hi"}, [])
    for layer in ("agent", "llm", "request"):
        built = build_layer(tree, tree.leaf_id, layer, agent)
        result = [row for row in built.rows if row.entry_id == "e0000003"]
        assert [(row.role, row.tokens) for row in result] == [("toolResult", 2)], layer
        assert "bash: a string" in render_preview(built), layer
        assert "a string" in message_markdown(decode_message(result[0].message)), layer
