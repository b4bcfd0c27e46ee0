"""The Anthropic Messages body pi-lsp sends, held to what pi 1.6 sends (except where pi's
request would be refused): message shapes, cache marks, system, tools, thinking, betas."""

from __future__ import annotations

from typing import Any

import pytest

from pi_lsp.providers.anthropic import AnthropicProvider, request_params, wire_messages
from pi_lsp.providers.base import ModelRequest, ReplyBuilder, ToolSpec
from pi_lsp.providers.registry import ModelInfo, ModelRegistry
from pi_lsp.session.entries import (
    AssistantMessage,
    ImageContent,
    LlmMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from tests.fake_anthropic import FakeAnthropic, text_reply

SONNET = "claude-sonnet-4-5"
REGISTRY = ModelRegistry()
CACHE = {"type": "ephemeral"}
PNG = "iVBORw0KGgo="


def reply(*blocks: Any) -> AssistantMessage:
    return AssistantMessage(content=list(blocks), api="anthropic-messages", provider="anthropic",
                            model=SONNET, usage=Usage(), stop_reason="toolUse", timestamp=2)


def result(call_id: str, *blocks: Any, is_error: bool = False) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call_id, tool_name="bash", content=list(blocks),
                             is_error=is_error, timestamp=3)


def image() -> ImageContent:
    return ImageContent(data=PNG, mime_type="image/png")


def call(call_id: str) -> ToolCall:
    return ToolCall(id=call_id, name="bash", arguments={"command": "x"})


def request(messages: list[LlmMessage], level: str = "off", model: str = SONNET,
            system: str = "sys", tools: list[ToolSpec] | None = None,
            info: ModelInfo | None = None, max_tokens: int | None = None) -> ModelRequest:
    return ModelRequest(model=info or REGISTRY.get("anthropic", model), system_prompt=system,
                        messages=messages, tools=tools or [], thinking_level=level,
                        max_tokens=max_tokens)


# -- tool results ------------------------------------------------------------------------------


def test_text_only_tool_result_is_one_string_of_lines() -> None:
    """pi 1.6 sends a text-only result as a string, its text blocks joined by newlines."""
    wire = wire_messages([UserMessage(content="go", timestamp=1), reply(call("c1")),
                          result("c1", TextContent(text="one"), TextContent(text="two")),
                          UserMessage(content="next", timestamp=4)], SONNET)
    assert wire[2]["content"] == [{"type": "tool_result", "tool_use_id": "c1",
                                   "content": "one\ntwo", "is_error": False}]


def test_tool_result_with_images_stays_blocks_and_images_alone_get_a_note() -> None:
    wire = wire_messages([UserMessage(content="go", timestamp=1),
                          reply(call("c1"), call("c2")),
                          result("c1", TextContent(text="see"), image()),
                          result("c2", image())], SONNET)
    first, second = wire[2]["content"]
    assert [b["type"] for b in first["content"]] == ["text", "image"]
    assert second["content"][0] == {"type": "text", "text": "(see attached image)"}
    assert second["content"][1]["type"] == "image"


def test_failed_tool_results_images_follow_all_results() -> None:
    """Anthropic refuses images inside an error result: pi 1.6 leaves a note in the result and
    sends the images after every result of the turn, each group introduced by a line."""
    wire = wire_messages([UserMessage(content="go", timestamp=1),
                          reply(call("c1"), call("c2")),
                          result("c1", TextContent(text="boom"), image(), image(),
                                 TextContent(text="end"), is_error=True),
                          result("c2", TextContent(text="ok"))], SONNET)
    content = wire[2]["content"]
    assert [b["type"] for b in content] == ["tool_result", "tool_result", "text", "image",
                                            "image"]
    assert content[0]["content"] == "boom\n(image attached after the tool results)\nend"
    assert content[0]["is_error"] is True
    assert content[1]["content"] == "ok"
    assert content[2] == {"type": "text",
                          "text": "Images from the error result of tool call c1 (bash):"}
    assert content[-1]["cache_control"] == CACHE


# -- blank content -----------------------------------------------------------------------------


def test_blank_text_is_left_out_as_javascript_trim_sees_it() -> None:
    """pi 1.6 drops text that JavaScript's trim() empties (U+FEFF, U+2028 included, unlike
    Python's strip()) and user messages left with nothing; U+001C is not JS whitespace."""
    wire = wire_messages([
        UserMessage(content=" \ufeff\u2028", timestamp=1),
        UserMessage(content=[TextContent(text="\r"), TextContent(text="")], timestamp=1),
        UserMessage(content=[TextContent(text="\u3000"), image()], timestamp=1),
        reply(TextContent(text="\u2029 "), TextContent(text="answer"),
              ThinkingContent(thinking=" \n")),
        UserMessage(content="\x1c", timestamp=4),
    ], SONNET)
    assert [m["role"] for m in wire] == ["user", "assistant", "user"]
    assert [b["type"] for b in wire[0]["content"]] == ["image"]
    assert wire[1]["content"] == [{"type": "text", "text": "answer"}]
    assert wire[2]["content"] == [{"type": "text", "text": "\x1c", "cache_control": CACHE}]


def test_blank_unsigned_thinking_is_dropped_and_unsigned_thinking_is_text() -> None:
    """pi 1.6: unsigned thinking goes as text, blank unsigned thinking not at all, and a
    blank signature counts as none."""
    wire = wire_messages([UserMessage(content="q", timestamp=1),
                          reply(ThinkingContent(thinking="\t", thinking_signature=" "),
                                ThinkingContent(thinking="plan", thinking_signature="\n"),
                                TextContent(text="a")),
                          UserMessage(content="again", timestamp=4)], SONNET)
    assert wire[1]["content"] == [{"type": "text", "text": "plan"}, {"type": "text", "text": "a"}]


# -- cache marks -------------------------------------------------------------------------------


def test_a_final_reply_carries_no_cache_mark() -> None:
    """pi 1.6 marks the newest message only when it is the user's."""
    wire = wire_messages([UserMessage(content="q", timestamp=1), reply(TextContent(text="a"))],
                         SONNET)
    assert wire[-1] == {"role": "assistant", "content": [{"type": "text", "text": "a"}]}
    assert wire[0] == {"role": "user", "content": "q"}


@pytest.mark.asyncio
async def test_sent_tool_result_is_a_string(fake: FakeAnthropic) -> None:
    """Through the real SDK: the body that reaches the server has the string result."""
    fake.script(text_reply("done"))
    provider = AnthropicProvider("k", base_url=fake.url)
    model = REGISTRY.get("anthropic", SONNET)
    messages: list[LlmMessage] = [UserMessage(content="go", timestamp=1), reply(call("c1")),
                                  result("c1", TextContent(text="a"), TextContent(text="b"))]
    built = ReplyBuilder(model.api, model)
    _ = [event async for event in provider.stream(request(messages), built)]
    sent = fake.message_requests()[-1]
    assert sent["messages"][2]["content"][0]["content"] == "a\nb"


# -- system prompt and tools -------------------------------------------------------------------


def test_an_empty_system_prompt_is_left_out() -> None:
    """pi 1.6 sends no `system` for an empty prompt; an empty text block is a 400."""
    messages: list[LlmMessage] = [UserMessage(content="q", timestamp=1)]
    assert "system" not in request_params(request(messages, system=""))
    assert request_params(request(messages, system=" "))["system"] == [
        {"type": "text", "text": " ", "cache_control": CACHE}]


def test_tool_schemas_are_object_schemas() -> None:
    """pi 1.6 always sends {type: object, properties, required}, keeping $defs, definitions
    and additionalProperties; other root keywords (a root anyOf is a 400) stay out."""
    specs = [ToolSpec("a", "first", {}),
             ToolSpec("b", "second", {"anyOf": [{"type": "string"}], "required": ["x"],
                                      "properties": {"x": {"$ref": "#/$defs/X"}},
                                      "$defs": {"X": {"type": "string"}},
                                      "additionalProperties": False, "definitions": {}})]
    tools = request_params(request([UserMessage(content="q", timestamp=1)], tools=specs))["tools"]
    assert tools == [
        {"name": "a", "description": "first",
         "input_schema": {"type": "object", "properties": {}, "required": []}},
        {"name": "b", "description": "second",
         "input_schema": {"type": "object", "properties": {"x": {"$ref": "#/$defs/X"}},
                          "required": ["x"], "additionalProperties": False,
                          "$defs": {"X": {"type": "string"}}, "definitions": {}},
         "cache_control": CACHE}]
