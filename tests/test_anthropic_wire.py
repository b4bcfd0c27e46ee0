"""The Anthropic Messages body pi-lsp sends, held to what pi 1.6 sends (except where pi's
request would be refused): message shapes, cache marks, system, tools, thinking, betas; and the
stream read back as pi 1.6 reads it."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from msgspec.structs import replace as msgspec_replace

from pi_lsp.agent.retry import is_context_overflow
from pi_lsp.providers.anthropic import AnthropicProvider, request_params, wire_messages
from pi_lsp.providers.base import ModelRequest, ReplyBuilder, ToolSpec
from pi_lsp.providers.registry import ANTHROPIC_API, ModelInfo, ModelRegistry, ProviderConfig
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
from tests import fake_anthropic
from tests.fake_anthropic import (
    FakeAnthropic,
    message_start,
    sse_frame,
    text_block,
    text_reply,
)
from tests.fake_openai import FakeOpenAI
from tests.test_streams_pi16 import Stream, pi16_reply

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


@pytest.mark.asyncio
async def test_the_key_and_api_version_go_as_pi_16_sends_them(fake: FakeAnthropic) -> None:
    """pi 1.6 (its SDK's defaults, recorded from `pi -p` against the fake) sends the key as
    `x-api-key` and `anthropic-version: 2023-06-01`, the version its request bodies are written
    for. The Python SDK 2.x sent the key as a bearer token, which an Anthropic-compatible
    server reading only `x-api-key` refuses, and its own version, 2026-10-21, under which the
    API reads some fields otherwise. A provider's own headers still go over them."""
    fake.script(text_reply("done"), text_reply("done"))
    model = REGISTRY.get("anthropic", SONNET)
    for provider in (AnthropicProvider("sk-k", base_url=fake.url),
                     AnthropicProvider("sk-k", base_url=fake.url,
                                       headers={"Authorization": "Bearer tok"})):
        _ = [event async for event in provider.stream(
            request([UserMessage(content="go", timestamp=1)]), ReplyBuilder(model.api, model))]
    plain, owned = (sent.headers for sent in fake.requests)
    assert (plain["x-api-key"], plain["anthropic-version"]) == ("sk-k", "2023-06-01")
    assert "authorization" not in plain
    assert (owned["authorization"], owned["x-api-key"]) == ("Bearer tok", "sk-k")


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


def test_a_request_without_caching_has_no_cache_marks_and_its_body_otherwise() -> None:
    """A request that asks for no caching (pi's cacheRetention "none") still got breakpoints on
    its system prompt, last tool and newest message; pi 1.6 leaves all three out, the newest
    message's text as it is."""
    specs = [ToolSpec("a", "first", {})]
    messages: list[LlmMessage] = [UserMessage(content="q", timestamp=1)]
    cached = request_params(request(messages, tools=specs))
    uncached = request_params(msgspec_replace(request(messages, tools=specs),
                                                 cache_retention="none"))
    assert uncached["system"] == [{"type": "text", "text": "sys"}]
    assert uncached["tools"][-1] == {"name": "a", "description": "first",
                                     "input_schema": {"type": "object", "properties": {},
                                                      "required": []}}
    assert uncached["messages"] == [{"role": "user", "content": "q"}]
    assert [cached[key][-1]["cache_control"] for key in ("system", "tools")] == [CACHE, CACHE]
    assert cached["messages"][-1]["content"][-1]["cache_control"] == CACHE


# -- thinking, max_tokens, betas ---------------------------------------------------------------


def thinking_of(level: str, model: str = SONNET, **kwargs: Any) -> dict[str, Any]:
    params = request_params(request([UserMessage(content="q", timestamp=1)], level, model,
                                    **kwargs))
    return {key: params[key] for key in ("max_tokens", "thinking", "output_config", "betas")
            if key in params}


def test_budgets_and_max_tokens_are_pi_16s() -> None:
    """pi 1.6: budgets 1024/2048/8192/16384, max_tokens the model's cap (the budget on top
    of the output room, within the cap); xhigh is clamped to high on Claude 4.5."""
    interleaved = ["interleaved-thinking-2025-05-14"]
    for level, budget in {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384,
                          "xhigh": 16384}.items():
        assert thinking_of(level) == {"max_tokens": 64000, "betas": interleaved, "thinking": {
            "type": "enabled", "budget_tokens": budget, "display": "summarized"}}
    capped = msgspec_replace(REGISTRY.get("anthropic", SONNET), id="capped", max_tokens=32000)
    assert thinking_of("high", info=capped)["max_tokens"] == 32000
    assert thinking_of("off") == {"max_tokens": 64000, "thinking": {"type": "disabled"}}
    # a caller's own cap (summaries) is the answer room, the budget comes on top
    assert thinking_of("low", max_tokens=5000)["max_tokens"] == 7048
    assert thinking_of("off", max_tokens=5000)["max_tokens"] == 5000


def test_a_tiny_output_cap_keeps_answer_room() -> None:
    small = ModelInfo("anthropic", "small", 200_000, 10_000, REGISTRY.get("anthropic",
                                                                         SONNET).price)
    assert thinking_of("high", info=small) == {
        "max_tokens": 10_000, "betas": ["interleaved-thinking-2025-05-14"],
        "thinking": {"type": "enabled", "budget_tokens": 10_000 - 1024,
                     "display": "summarized"}}


def test_adaptive_models_get_an_effort_and_no_budget() -> None:
    """pi 1.6 lets the 4.6 models think adaptively at an effort (minimal and low: low), with
    no interleaved-thinking beta; they have max but no xhigh, which pi clamps up to max."""
    for level, effort in {"minimal": "low", "low": "low", "medium": "medium", "high": "high",
                          "xhigh": "max", "max": "max"}.items():
        assert thinking_of(level, "claude-opus-4-6") == {
            "max_tokens": 128_000, "thinking": {"type": "adaptive", "display": "summarized"},
            "output_config": {"effort": effort}}
    assert thinking_of("off", "claude-sonnet-4-6") == {"max_tokens": 128_000,
                                                       "thinking": {"type": "disabled"}}


MID_CONVERSATION_BETAS = ["mid-conversation-output-config-2026-07-01",
                          "thinking-binding-controls-2026-08-01"]


def marker(effort: str) -> dict[str, Any]:
    """pi 1.6's system message that sets the effort of the reply after it."""
    return {"role": "system", "content": [], "output_config": {"effort": effort}}


def test_a_model_with_mid_conversation_effort_is_told_each_replys_effort() -> None:
    """pi 1.6 (supportsMidConvoEffort: opus-5, opus-5-5, sonnet-5-5, haiku-5-5, fable-5-1 and
    5-2) keeps the top-level effort "low" and fixed, sets each reply's effort in a system
    message before it (its recorded providerThinkingLevel) and the next one's last, binds
    thinking blocks to their prefix, and asks for two betas. pi-lsp sent the effort at the top
    level, so a level changed mid-session changed the cached prefix and went unmarked."""
    earlier = msgspec_replace(reply(TextContent(text="a")), model="claude-opus-5-5",
                              stop_reason="stop", provider_thinking_level="high")
    other = msgspec_replace(earlier, provider="openai", api="openai-responses")
    messages: list[LlmMessage] = [UserMessage(content="q", timestamp=1), earlier,
                                  UserMessage(content="r", timestamp=3), other,
                                  UserMessage(content="s", timestamp=5)]
    params = request_params(request(messages, "medium", "claude-opus-5-5"))
    assert params["betas"] == MID_CONVERSATION_BETAS
    assert params["thinking"] == {"type": "adaptive", "display": "summarized",
                                  "block_binding": {"prefix_mismatch_behavior": "drop_block"}}
    assert params["output_config"] == {"effort": "low"}
    assert params["max_tokens"] == 128_000
    assert params["messages"] == [
        {"role": "user", "content": "q"}, marker("high"),
        {"role": "assistant", "content": [{"type": "text", "text": "a"}]},
        {"role": "user", "content": "r"},  # another provider's reply: no effort of ours
        {"role": "assistant", "content": [{"type": "text", "text": "a"}]},
        {"role": "user", "content": [{"type": "text", "text": "s", "cache_control": CACHE}]},
        marker("medium")]
    # Thinking off (where the model has it): disabled, no effort anywhere, the betas still.
    assert thinking_of("off", "claude-opus-5") == {
        "max_tokens": 128_000, "thinking": {"type": "disabled"}, "betas": MID_CONVERSATION_BETAS}
    assert request_params(request(messages, "off", "claude-opus-5"))["messages"][1] == \
        {"role": "assistant", "content": [{"type": "text", "text": "a"}]}
    # A level the map sends as another effort: the marker carries the effort sent.
    assert request_params(request(messages, "xhigh", "claude-fable-5-1"))["messages"][-1] == \
        marker("xhigh")


@pytest.mark.asyncio
async def test_a_reply_records_the_effort_it_was_asked_for(fake: FakeAnthropic) -> None:
    """pi 1.6 writes a managed-effort reply's effort as providerThinkingLevel, which marks
    that reply's effort in every later request (pi's and pi-lsp's); pi-lsp wrote none."""
    provider = AnthropicProvider("k", base_url=fake.url)
    fake.script(text_reply("done", model="claude-opus-5-5"), text_reply("done"))
    model = REGISTRY.get("anthropic", "claude-opus-5-5")
    built = ReplyBuilder(model.api, model, "high")
    _ = [e async for e in provider.stream(
        request([UserMessage(content="go", timestamp=1)], "high", "claude-opus-5-5"), built)]
    message = built.message()
    assert (message.error_message, message.provider_thinking_level) == (None, "high")
    assert b'"providerThinkingLevel":"high"' in msgspec.json.encode(message)
    [sent] = [r for r in fake.requests if r.path.startswith("/v1/messages")]
    assert sent.headers["anthropic-beta"] == ",".join(MID_CONVERSATION_BETAS)
    assert sent.body["messages"][-1] == marker("high")
    sonnet = REGISTRY.get("anthropic", SONNET)
    built = ReplyBuilder(sonnet.api, sonnet, "high")
    _ = [e async for e in provider.stream(
        request([UserMessage(content="go", timestamp=1)], "high"), built)]
    assert built.message().provider_thinking_level is None  # an effort nobody marks
    await provider.client.close()


FALLBACK_BETA = "server-side-fallback-2026-07-01"


def test_the_fable_models_name_their_server_side_fallbacks() -> None:
    """pi 1.6 (allowedFallbackModels) lets claude-fable-5 fall back to claude-opus-4-8 and
    claude-opus-5, and claude-fable-5-2 to claude-opus-5, with the server-side-fallback beta;
    pi-lsp named none, so an overloaded Fable failed where pi's request was answered."""
    params = request_params(request([UserMessage(content="q", timestamp=1)], "high",
                                    "claude-fable-5"))
    assert params["fallbacks"] == [{"model": "claude-opus-4-8"}, {"model": "claude-opus-5"}]
    assert params["betas"] == [FALLBACK_BETA]
    params = request_params(request([UserMessage(content="q", timestamp=1)], "high",
                                    "claude-fable-5-2"))
    assert params["fallbacks"] == [{"model": "claude-opus-5"}]
    assert params["betas"] == [FALLBACK_BETA, *MID_CONVERSATION_BETAS]
    assert "fallbacks" not in request_params(request([UserMessage(content="q", timestamp=1)],
                                                     "high", "claude-fable-5-1"))


@pytest.mark.asyncio
async def test_fallbacks_reach_the_server_with_their_beta(fake: FakeAnthropic) -> None:
    """Through the real SDK, also where a provider's own beta header leaves pi's betas out."""
    own = {"anthropic-beta": "context-1m-2025-08-07"}
    registry = ModelRegistry(providers=[ProviderConfig("anthropic", ANTHROPIC_API, headers=own)])
    fake.script(text_reply("done", model="claude-fable-5"), text_reply("done"))
    for model, headers in ((REGISTRY.get("anthropic", "claude-fable-5"), None),
                           (registry.get("anthropic", "claude-fable-5"), own)):
        provider = AnthropicProvider("k", base_url=fake.url, headers=headers)
        built = ReplyBuilder(model.api, model)
        _ = [e async for e in provider.stream(
            request([UserMessage(content="go", timestamp=1)], "high", info=model), built)]
        assert built.message().error_message is None
        await provider.client.close()
    plain, proxied = [r for r in fake.requests if r.path.startswith("/v1/messages")]
    assert plain.headers["anthropic-beta"] == FALLBACK_BETA
    assert proxied.headers["anthropic-beta"] == "context-1m-2025-08-07"
    for sent in (plain, proxied):
        assert sent.body["fallbacks"] == [{"model": "claude-opus-4-8"}, {"model": "claude-opus-5"}]


async def fable_reply(fake: FakeAnthropic, *events: dict[str, Any]) -> AssistantMessage:
    """The reply pi-lsp makes of `events` answering a claude-fable-5 request."""
    fake.script(fake_anthropic.Reply([*events, *fake_anthropic.message_end()]))
    provider = AnthropicProvider("k", base_url=fake.url)
    model = REGISTRY.get("anthropic", "claude-fable-5")
    built = ReplyBuilder(model.api, model)
    _ = [e async for e in provider.stream(
        request([UserMessage(content="go", timestamp=1)], "high", info=model), built)]
    await provider.client.close()
    return built.message()


FALLBACK_BLOCK = [{"type": "content_block_start", "index": 0,
                   "content_block": {"type": "fallback", "model": "claude-opus-5"}},
                  {"type": "content_block_stop", "index": 0}]


@pytest.mark.asyncio
async def test_a_fallback_models_reply_names_it_and_costs_what_it_costs(
        fake: FakeAnthropic) -> None:
    """pi 1.6 records the model that answered as responseModel when it is not the one asked
    for, and prices a fallback's reply at the fallback's cost; pi-lsp priced an Opus 5 answer
    at Fable's (twice as much) and did not say Opus 5 had answered."""
    message = await fable_reply(fake, message_start("claude-opus-5", input_tokens=1_000_000),
                                *FALLBACK_BLOCK, *text_block(1, "hi"))
    assert (message.error_message, message.response_model) == (None, "claude-opus-5")
    assert message.content == [TextContent(text="hi")]
    assert message.usage.cost.input == 5  # Opus 5's $5 a million, not Fable's $10
    assert b'"responseId":"msg_fake","responseModel":"claude-opus-5"' in \
        msgspec.json.encode(message)
    asked = await fable_reply(fake, message_start("claude-fable-5", input_tokens=1_000_000),
                              *text_block(0, "hi"))
    assert (asked.response_model, asked.usage.cost.input) == (None, 10)


@pytest.mark.asyncio
async def test_a_fallback_after_output_fails_the_reply_as_pi_16_fails_it(
        fake: FakeAnthropic) -> None:
    message = await fable_reply(fake, message_start("claude-fable-5"), *text_block(0, "hi"),
                                *[{**event, "index": 1} for event in FALLBACK_BLOCK])
    assert message.error_message == "Anthropic performed an unsupported mid-output model fallback"


PLACEHOLDER = {"name": "__pi_deferred_placeholder__",
               "description": "Reserved placeholder. Never available. Never call this.",
               "input_schema": {"type": "object", "properties": {}, "required": []},
               "defer_loading": True}


def test_models_with_native_tool_changes_declare_pis_deferred_placeholder() -> None:
    """pi 1.6 (supportsMidConvoSystemMessages and supportsMidConvoToolChanges: Opus 4.8 and
    later, Sonnet 5.5, Haiku 5.5, Fable) declares a deferred placeholder tool after the tools,
    with the inline-tools beta, so the scaffolding of a later tool change is in the cached
    prefix from the first request; pi-lsp's request for pi's default model lacked both."""
    tools = [ToolSpec("bash", "run", {"type": "object", "properties": {}})]
    params = request_params(request([UserMessage(content="q", timestamp=1)], "high",
                                    "claude-opus-4-8", tools=tools))
    assert params["tools"] == [{"name": "bash", "description": "run", "cache_control": CACHE,
                                "input_schema": {"type": "object", "properties": {},
                                                 "required": []}}, PLACEHOLDER]
    assert params["betas"] == ["inline-tools-2026-09-15"]
    params = request_params(request([UserMessage(content="q", timestamp=1)], "high",
                                    "claude-opus-5-5", tools=tools))
    assert params["betas"] == [*MID_CONVERSATION_BETAS, "inline-tools-2026-09-15"]
    assert "betas" not in request_params(request([UserMessage(content="q", timestamp=1)],
                                                 "high", "claude-opus-4-8"))  # no tools
    assert request_params(request([UserMessage(content="q", timestamp=1)], "high",
                                  "claude-opus-4-7", tools=tools))["tools"][-1]["name"] == "bash"


def test_pi_16s_max_level_is_clamped_to_what_a_model_has() -> None:
    """A session pi 1.6 set to "max": Claude 4.5 has no max, so its budget is high's; GPT-5
    has neither max nor xhigh, so it reasons at high."""
    from pi_lsp.providers import openai_responses
    from pi_lsp.providers.thinking import thinking_level

    assert thinking_of("max")["thinking"] == {"type": "enabled", "budget_tokens": 16_384,
                                              "display": "summarized"}
    gpt5 = ModelRegistry().get("openai", "gpt-5")
    assert thinking_level(gpt5, "max") == "high"
    body = openai_responses.request_params(ModelRequest(
        gpt5, "s", [UserMessage(content="q", timestamp=1)], [], "max"))
    assert body["reasoning"]["effort"] == "high"


def test_max_tokens_fits_the_context_window() -> None:
    """pi-ai 1.6 lowers max_tokens to the window left after the estimated input (3.5
    characters a token) less a 15% margin, or only 4096 when that leaves under 32768."""
    model = ModelInfo("anthropic", "m", 100_000, 64_000, REGISTRY.get("anthropic",
                                                                     SONNET).price)
    big = [UserMessage(content="x" * 200_000, timestamp=1)]
    used = 57_143 + 1  # the message's 200000 characters and the prompt "sys", each rounded up
    params = request_params(request(big, "off", info=model))
    assert params["max_tokens"] == 100_000 - used - 8_572
    fuller = [UserMessage(content="x" * 250_000, timestamp=1)]
    params = request_params(request(fuller, "off", info=model))
    assert params["max_tokens"] == 100_000 - (71_429 + 1) - 4096  # under 32768: fixed margin
    # the last good reply's reported usage stands for everything before it
    used_reply = AssistantMessage(content=[TextContent(text="a")], api="anthropic-messages",
                                  provider="anthropic", model="m", usage=Usage(total_tokens=90_000),
                                  stop_reason="stop", timestamp=2)
    params = request_params(request([*big, used_reply, UserMessage(content="q", timestamp=3)],
                                    "off", info=model))
    assert params["max_tokens"] == 100_000 - 90_001 - 4096


def test_a_models_beta_header_replaces_pis_betas() -> None:
    model = REGISTRY.get("anthropic", SONNET)
    own = msgspec_replace(model, headers={"Anthropic-Beta": "a, b,a,"})
    assert thinking_of("off", info=own)["betas"] == ["a", "b"]
    assert thinking_of("high", info=own)["betas"] == ["a", "b"]


def test_plain_models_hear_nothing_about_thinking() -> None:
    plain = ModelInfo("anthropic", "plain", 100_000, 8192, REGISTRY.get("anthropic",
                                                                       SONNET).price,
                      reasoning=False)
    assert thinking_of("high", info=plain) == {"max_tokens": 8192}


@pytest.mark.asyncio
async def test_betas_are_sent_as_the_beta_header(fake: FakeAnthropic) -> None:
    """Through the real SDK: what the preview shows as `betas` goes as `anthropic-beta`, and
    an adaptive request's effort reaches the server."""
    provider = AnthropicProvider("k", base_url=fake.url)
    fake.script(text_reply("done"), text_reply("done"))
    for model_id in (SONNET, "claude-opus-4-6"):
        model = REGISTRY.get("anthropic", model_id)
        built = ReplyBuilder(model.api, model)
        messages: list[LlmMessage] = [UserMessage(content="go", timestamp=1)]
        _ = [e async for e in provider.stream(request(messages, "medium", model_id), built)]
        assert built.error_message is None
    budgeted, adaptive = [r for r in fake.requests if r.path.startswith("/v1/messages")]
    assert budgeted.headers["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    assert "betas" not in budgeted.body
    assert budgeted.body["thinking"] == {"type": "enabled", "budget_tokens": 8192,
                                         "display": "summarized"}
    assert "anthropic-beta" not in adaptive.headers
    assert adaptive.body["output_config"] == {"effort": "medium"}
    assert adaptive.body["thinking"] == {"type": "adaptive", "display": "summarized"}


async def test_a_providers_own_beta_header_replaces_pis_betas(fake: FakeAnthropic) -> None:
    """As pi: an anthropic-beta set for the provider (models.json's headers: the 1M window's
    beta, say) is the one sent, not overridden by the interleaved-thinking beta; the preview's
    request showed that beta as `betas` where only the send path dropped it."""
    own = {"anthropic-beta": "context-1m-2025-08-07"}
    provider = AnthropicProvider("k", base_url=fake.url, headers=own)
    fake.script(text_reply("done"))
    registry = ModelRegistry(providers=[ProviderConfig("anthropic", ANTHROPIC_API, headers=own)])
    model = registry.get("anthropic", SONNET)
    built = ReplyBuilder(model.api, model)
    messages: list[LlmMessage] = [UserMessage(content="go", timestamp=1)]
    asked = request(messages, "medium", info=model)
    assert "betas" not in request_params(asked)
    _ = [e async for e in provider.stream(asked, built)]
    assert built.error_message is None
    [sent] = [r for r in fake.requests if r.path.startswith("/v1/messages")]
    assert sent.headers["anthropic-beta"] == "context-1m-2025-08-07"
    assert sent.body["thinking"] == {"type": "enabled", "budget_tokens": 8192,
                                     "display": "summarized"}


def test_a_tool_with_lone_surrogates_is_estimated_and_sent_without_them() -> None:
    """The input estimate reads tool definitions that msgspec cannot encode."""
    spec = ToolSpec("a", "d\ud800", {"properties": {"x": {"description": "\udfff"}}})
    tools = request_params(request([UserMessage(content="q", timestamp=1)], tools=[spec]))["tools"]
    assert tools[0]["description"] == "d"
    assert tools[0]["input_schema"]["properties"] == {"x": {"description": ""}}



# -- the stream read back, as pi 1.6 reads it ----------------------------------------------------


async def streamed(fake: FakeAnthropic, *events: dict[str, Any]) -> AssistantMessage:
    """The reply pi-lsp makes of `events` (then message_stop), served through the real SDK."""
    return await read_back(fake, fake_anthropic.Reply([*events, {"type": "message_stop"}]))


async def read_back(fake: FakeAnthropic, scripted: fake_anthropic.Reply) -> AssistantMessage:
    """The reply pi-lsp makes of a scripted answer, served through the real SDK."""
    fake.script(scripted)
    provider = AnthropicProvider("k", base_url=fake.url)
    model = REGISTRY.get("anthropic", SONNET)
    built = ReplyBuilder(model.api, model)
    _ = [e async for e in provider.stream(request([UserMessage(content="go", timestamp=1)]),
                                           built)]
    await provider.client.close()
    return built.message()


def stop(reason: str, **usage: int) -> dict[str, Any]:
    return {"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": None},
            "usage": usage}


@pytest.mark.asyncio
async def test_message_delta_counts_each_replace_message_starts(fake: FakeAnthropic) -> None:
    """Its cache counts were ignored, and an output count of 0 kept message_start's (`or`)."""
    usage = (await streamed(fake, message_start(input_tokens=0), *text_block(0, "Hi"),
                            stop("end_turn", input_tokens=900, output_tokens=20,
                                 cache_read_input_tokens=300,
                                 cache_creation_input_tokens=40))).usage
    assert (usage.input, usage.output, usage.cache_read, usage.cache_write) == (900, 20, 300, 40)
    usage = (await streamed(fake, message_start(input_tokens=1234, cache_read=200),
                            *text_block(0, "Hi"), stop("end_turn", output_tokens=0))).usage
    assert (usage.input, usage.output, usage.cache_read) == (1234, 0, 200)


@pytest.mark.asyncio
async def test_a_thinking_block_that_opens_with_thinking_and_a_signature_keeps_both(
        fake: FakeAnthropic) -> None:
    """Both were dropped: the reply kept only the deltas' "x", unsigned."""
    reply = await streamed(fake, message_start(), {
        "type": "content_block_start", "index": 0,
        "content_block": {"type": "thinking", "thinking": "pre", "signature": "S0"}}, {
        "type": "content_block_delta", "index": 0,
        "delta": {"type": "thinking_delta", "thinking": "x"}},
        {"type": "content_block_stop", "index": 0}, stop("end_turn"))
    assert reply.content == [ThinkingContent(thinking="prex", thinking_signature="S0")]


@pytest.mark.asyncio
async def test_redacted_thinking_reads_as_pi_writes_it(fake: FakeAnthropic) -> None:
    """It was written with an empty thinking text where pi writes "[Reasoning redacted]"."""
    reply = await streamed(fake, message_start(), {
        "type": "content_block_start", "index": 0,
        "content_block": {"type": "redacted_thinking", "data": "OPAQUE"}},
        {"type": "content_block_stop", "index": 0}, stop("end_turn"))
    assert reply.content == [ThinkingContent(thinking="[Reasoning redacted]",
                                             thinking_signature="OPAQUE", redacted=True)]


@pytest.mark.asyncio
async def test_a_refusal_says_anthropics_explanation(fake: FakeAnthropic) -> None:
    """The explanation in stop_details was dropped for pi's generic words."""
    refusal = stop("refusal", output_tokens=5)
    refusal["delta"]["stop_details"] = {"type": "refusal", "category": "cyber",
                                        "explanation": "Policy X"}
    reply = await streamed(fake, message_start(), *text_block(0, "I"), refusal)
    assert (reply.stop_reason, reply.error_message) == ("error", "Policy X")


@pytest.mark.asyncio
async def test_a_stop_reason_pi_does_not_know_ends_the_reply_as_an_overflow_can(
        fake: FakeAnthropic) -> None:
    """"Provider stopped with: model_context_window_exceeded", with the delta's usage counted:
    pi 1.6 throws "Unhandled stop reason" there, which it reads as an overflow."""
    reply = await streamed(fake, message_start(), *text_block(0, "Hel"),
                           stop("model_context_window_exceeded", output_tokens=567))
    assert reply.error_message == "Unhandled stop reason: model_context_window_exceeded"
    assert reply.stop_reason == "error" and reply.usage.output == 1  # message_start's
    assert is_context_overflow(reply.error_message)


@pytest.mark.asyncio
@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
async def test_arguments_with_nan_or_infinity_are_refused_as_json_parse_refuses_them(
        fake: FakeAnthropic, constant: str) -> None:
    """Python's json read them, so the tool ran where pi 1.6 answers "Invalid arguments"."""
    start, *_, stop_block = fake_anthropic.tool_block(0, "toolu_1", "bash", {})
    text = f'{{"command": "ls", "timeout": {constant}}}'
    delta = {"type": "content_block_delta", "index": 0,
             "delta": {"type": "input_json_delta", "partial_json": text}}
    [call] = (await streamed(fake, message_start(), start, delta, stop_block,
                             stop("tool_use"))).content
    assert isinstance(call, ToolCall) and call.arguments == {}
    assert call.arguments_error and call.arguments_error.endswith(
        f"\n\nReceived arguments:\n{text}")


@pytest.mark.asyncio
async def test_an_error_body_is_cut_as_pi_16_cuts_one(fake: FakeAnthropic) -> None:
    """An error's text was kept whole: a 500 with a 65 MB body made a reply too long for a
    session entry, so it was never written and the run failed on the write. Now it keeps
    4,000 characters, as the OpenAI path and pi 1.6 keep of a body."""
    fake.script(fake_anthropic.error_reply(400, "invalid_request_error", "x" * 5000),
                fake_anthropic.Reply(status=400, raw=b"y" * 5000, headers={}))
    provider = AnthropicProvider("k", base_url=fake.url)
    model = REGISTRY.get("anthropic", SONNET)
    errors = []
    for _ in range(2):
        built = ReplyBuilder(model.api, model)
        _ = [e async for e in provider.stream(request([UserMessage(content="go", timestamp=1)]),
                                               built)]
        errors.append(built.message().error_message)
    await provider.client.close()
    assert errors == [
        f"Anthropic 400 invalid_request_error: {'x' * 3977}... [truncated 1023 chars]",
        f"Anthropic 400: 400 {'y' * 3996}... [truncated 1025 chars]"]  # "... (path: …)"


@pytest.mark.asyncio
@pytest.mark.parametrize(("text", "arguments"), [
    ('{"command": "ls"', {"command": "ls"}),
    ('{"command": "echo \\u00', {"command": "echo "}),  # an unfinished escape held back
    ('{"command": "ls", "timeout": 1e', {"command": "ls", "timeout": 1}),
    ('{"command": "ls", "tim', {"command": "ls"}),
    ('{"path": "a\\d", "x": [1, tr', {"path": "a\\d", "x": [1, True]}),
    ('{"a" 1 "b": {"c": nul', {"a": 1, "b": {"c": None}}),
    ('["ls"', {}),
    ('{"n": -' + "1" * 5000 + ",", {"n": -math.inf})])  # a crash: int() stops at 4,300 digits
async def test_a_call_whose_block_never_ends_keeps_its_arguments_as_far_as_they_go(
        fake: FakeAnthropic, text: str, arguments: dict[str, Any]) -> None:
    """With no content_block_stop (the stream ended or broke inside the call) its arguments
    were parsed whole: {} and an argumentsError, where pi 1.6 keeps what its streaming parser
    read (the values here are pi's)."""
    start, *_ = fake_anthropic.tool_block(0, "toolu_1", "bash", {})
    [call] = (await streamed(fake, message_start(), start,
                             delta(0, type="input_json_delta", partial_json=text),
                             stop("tool_use"))).content
    assert call == ToolCall(id="toolu_1", name="bash", arguments=arguments)


@pytest.mark.asyncio
@pytest.mark.parametrize(("block", "error"), [
    ({"type": "tool_use", "name": "bash", "input": {}},
     "The model sent a tool call without a string id"),
    ({"type": "tool_use", "id": 42, "name": "bash", "input": {}},
     "The model sent a tool call without a string id (42)"),
    ({"type": "tool_use", "id": "toolu_1", "input": {}},
     "The model sent a tool call without a string name")])
async def test_a_tool_call_without_a_string_id_or_name_fails_the_reply(
        fake: FakeAnthropic, block: dict[str, Any], error: str) -> None:
    """It ran and was written with id null or 42, a line the session reader skips: the call
    and its result vanished from every later request."""
    reply = await streamed(fake, message_start(),
                           {"type": "content_block_start", "index": 0, "content_block": block},
                           {"type": "content_block_stop", "index": 0}, stop("tool_use"))
    assert (reply.stop_reason, reply.error_message, reply.content) == ("error", error, [])


def delta(index: int, **fields: Any) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": fields}


@pytest.mark.asyncio
async def test_a_delta_for_a_block_of_another_kind_is_ignored_as_pi_16_ignores_it(
        fake: FakeAnthropic) -> None:
    """The whole reply failed with an empty AssertionError or a KeyError."""
    start, *_, stop_call = fake_anthropic.tool_block(0, "toolu_1", "bash", {})
    reply = await streamed(
        fake, message_start(), start, delta(0, type="text_delta", text="stray"),
        delta(0, type="thinking_delta", thinking="stray"),
        delta(0, type="input_json_delta", partial_json='{"command": "ls"}'), stop_call,
        *text_block(1, "Hi")[:-1], delta(1, type="input_json_delta", partial_json="{}"),
        delta(1, type="signature_delta", signature="S"), *text_block(1)[-1:],
        stop("tool_use"))
    assert (reply.stop_reason, reply.error_message) == ("toolUse", None)
    assert reply.content == [ToolCall(id="toolu_1", name="bash", arguments={"command": "ls"}),
                             TextContent(text="Hi")]


@pytest.mark.asyncio
async def test_deltas_that_are_not_text_are_added_as_javascript_adds_them(
        fake: FakeAnthropic) -> None:
    """A text of 5 or a thinking of null failed the reply with a TypeError; pi writes "5" and
    "null"."""
    thinking, *_, end_thinking = fake_anthropic.thinking_block(0, "", "")
    reply = await streamed(
        fake, message_start(), thinking, delta(0, type="thinking_delta", thinking=None),
        delta(0, type="signature_delta", signature=None), end_thinking,
        *text_block(1)[:1], delta(1, type="text_delta", text=5),
        delta(1, type="text_delta", text=[1.5, None, True]), *text_block(1)[-1:],
        stop("end_turn"))
    assert reply.content == [ThinkingContent(thinking="null", thinking_signature="null"),
                             TextContent(text="51.5,,true")]


@pytest.mark.asyncio
async def test_tool_json_and_huge_numbers_that_are_not_text_are_added_as_javascript_adds_them(
        fake: FakeAnthropic) -> None:
    """A partial_json of 5 failed the reply (a TypeError joining the pieces), and a text of a
    401-digit integer overflowed float(); pi adds "5" to the JSON and writes "Infinity"."""
    start, *_, stop_call = fake_anthropic.tool_block(0, "toolu_1", "bash", {})
    reply = await streamed(
        fake, message_start(), start,
        delta(0, type="input_json_delta", partial_json='{"command": "ls", "timeout": '),
        delta(0, type="input_json_delta", partial_json=5),
        delta(0, type="input_json_delta", partial_json="}"), stop_call,
        *text_block(1)[:1], delta(1, type="text_delta", text=10**400),
        delta(1, type="text_delta", text=-10**400), *text_block(1)[-1:], stop("tool_use"))
    assert (reply.stop_reason, reply.error_message) == ("toolUse", None)
    assert reply.content == [
        ToolCall(id="toolu_1", name="bash", arguments={"command": "ls", "timeout": 5}),
        TextContent(text="Infinity-Infinity")]


# Stream events where an event, a delta or an index is of another type, and the content pi 1.6
# makes of them (/tmp/fuzz-work/pi16_turns.mjs): it reads no type of a number or text, and an
# object as an index is a key of its Map no other event's equals.
ODD_SHAPES = [sse_frame(event) for event in (
    message_start(), *text_block(0)[:1], delta(0, type="text_delta", text="Hel"),
    {"type": "content_block_delta", "index": 0, "delta": -1},
    {"type": "content_block_delta", "index": 0, "delta": "x"},
    {"type": "content_block_start", "index": {}, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": {}, "delta": {"type": "text_delta", "text": "?"}},
    {"type": "content_block_start", "index": True, "content_block": "text"},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "?"}})
] + [b"event: content_block_delta\ndata: 5\n\n"] + [sse_frame(event) for event in (
    delta(0, type="text_delta", text="lo"), *text_block(0)[-1:], stop("end_turn"),
    {"type": "message_stop"})]


@pytest.mark.asyncio
async def test_events_deltas_and_indexes_of_other_types_are_skipped_as_pi_16_skips_them(
        fake: FakeAnthropic, oai: FakeOpenAI) -> None:
    """A delta or an event that was a number or text, or an index that was an object, failed
    the whole reply ("cannot read (AttributeError: 'int' object has no attribute 'type')"),
    which pi 1.6 reads on: found by fuzzing the stream."""
    stream = fake_anthropic.Reply(raw=b"".join(ODD_SHAPES))
    reply = await read_back(fake, stream)
    assert (reply.stop_reason, reply.error_message) == ("stop", None)
    assert reply.content == [TextContent(text="Hello"), TextContent(text="")]
    if (pi := pi16_reply(Stream("anthropic", stream), fake, oai)) is not None:
        assert (pi["stopReason"], pi["content"]) == (
            "stop", [{"type": "text", "text": "Hello"}, {"type": "text", "text": ""}])


@pytest.mark.asyncio
async def test_a_usage_or_message_delta_of_another_type_is_read_as_pi_16_reads_it(
        fake: FakeAnthropic, oai: FakeOpenAI) -> None:
    """A message_start whose usage was a text, or a message_delta whose delta was a number,
    failed the reply with "cannot read (AttributeError: 'str' object has no attribute
    'input_tokens')"; pi 1.6 reads no counts of the one and no stop reason of the other
    (/tmp/fuzz-work/repro: primitive_usage.bin, primitive_message_delta.bin). Found by fuzzing
    the stream."""
    start = message_start()
    start["message"]["usage"] = ""
    uncounted = [start, *text_block(0, "Hi"), stop("end_turn"), {"type": "message_stop"}]
    counted = await streamed(fake, *uncounted[:-1])
    assert (counted.stop_reason, counted.error_message) == ("stop", None)
    assert (counted.usage.input, counted.usage.output) == (0, 0)
    unsaid_events = [message_start(), *text_block(0, "Hi"), {**stop("end_turn"), "delta": 5},
                     {"type": "message_stop"}]
    unsaid = await streamed(fake, *unsaid_events[:-1])
    assert (unsaid.stop_reason, unsaid.error_message) == (
        "error", "Anthropic: stream ended without a stop reason")
    assert unsaid.content == [TextContent(text="Hi")]
    counted_pi, unsaid_pi = (pi16_reply(Stream("anthropic", fake_anthropic.Reply(events)),
                                        fake, oai) for events in (uncounted, unsaid_events))
    if counted_pi is not None and unsaid_pi is not None:  # pi's words for it are its own
        assert (counted_pi["stopReason"], counted_pi["usage"]["input"],
                counted_pi["usage"]["output"]) == ("stop", 0, 0)
        assert (unsaid_pi["stopReason"], unsaid_pi["content"]) == (
            "error", [{"type": "text", "text": "Hi"}])


@pytest.mark.asyncio
async def test_integers_past_2_53_are_read_as_json_parse_reads_them(fake: FakeAnthropic,
                                                                    oai: FakeOpenAI) -> None:
    """A response id of 10**30 was kept exact and written as its 31 digits, which pi 1.6
    reads as 1e+30 while pi-lsp read back the exact integer: the two read the entry
    differently (pi 1.6 writes the double it parsed). Found by fuzzing the stream."""
    start = message_start()
    start["message"]["id"] = 10**30
    events = [start, *text_block(0, "Hi"), stop("end_turn"), {"type": "message_stop"}]
    reply = await streamed(fake, *events[:-1])
    assert type(reply.response_id) is float and reply.response_id == 1e30
    assert msgspec.json.decode(msgspec.json.encode(reply))["responseId"] == 1e30
    if (pi := pi16_reply(Stream("anthropic", fake_anthropic.Reply(events)), fake, oai)
            ) is not None:
        assert pi["responseId"] == 1e30


@pytest.mark.asyncio
async def test_an_event_holding_nan_fails_the_reply_as_json_parse_refuses_it(
        fake: FakeAnthropic, oai: FakeOpenAI) -> None:
    """A text delta of a bare NaN was read by Python's json and written as the text "NaN";
    pi's SDK (JSON.parse) throws on the event and the reply fails, in V8's words (pi-lsp's
    were Python's, "NaN is not JSON in JSON at position 82 …")."""
    events = [message_start(), *text_block(0)[:1], delta(0, type="text_delta", text=float("nan")),
              *text_block(0)[-1:], stop("end_turn"), {"type": "message_stop"}]
    reply = await streamed(fake, *events[:-1])
    assert reply.stop_reason == "error" and reply.content == [TextContent(text="")]
    data = json.dumps(events[2])
    words = ("Could not parse Anthropic SSE event content_block_delta: Unexpected token 'N', "
             f'...", "text": NaN}}}}" is not valid JSON; data={data}; '
             f"raw=event: content_block_delta\\ndata: {data}")
    assert reply.error_message == words
    if (pi := pi16_reply(Stream("anthropic", fake_anthropic.Reply(events)), fake, oai)
            ) is not None:
        assert (pi["stopReason"], pi["errorMessage"]) == ("error", words)


@pytest.mark.asyncio
@pytest.mark.parametrize("frame", [b"event: content_block_delta\ndata: \n\n",
                                   b"event: content_block_delta\n\n"])
async def test_an_event_with_no_data_fails_the_reply_as_pi_fails_it(
        fake: FakeAnthropic, frame: bytes) -> None:
    """A content_block_delta with empty data was skipped (the SDK's rule) and the reply ended
    as sent; pi 1.6 reads it with JSON.parse(""), which throws, and the reply fails."""
    start, text, end = text_block(0, "a")
    raw = frame + sse_frame(end) + sse_frame(stop("end_turn")) + \
        sse_frame({"type": "message_stop"})
    reply = await read_back(fake, fake_anthropic.Reply([message_start(), start, text], raw=raw))
    assert (reply.stop_reason, reply.content) == ("error", [TextContent(text="a")])
    raw = frame.decode().rstrip("\n").replace("\n", "\\n")  # pi's words, its lines whole
    assert reply.error_message == "Could not parse Anthropic SSE event content_block_delta: " \
        f"Unexpected end of JSON input; data=; raw={raw}"


@pytest.mark.asyncio
async def test_an_event_pi_does_not_know_is_skipped_unread(fake: FakeAnthropic) -> None:
    """A proxy's `event: keepalive` / `data: ok` failed the reply as not JSON, and an unknown
    event holding a message_stop ended it; pi 1.6 reads only the Messages API's events."""
    start, text, end = text_block(0, "a")
    rest = sse_frame(end) + sse_frame(stop("end_turn"))
    reply = await read_back(fake, fake_anthropic.Reply(
        [message_start(), start, text],
        raw=b"event: keepalive\ndata: ok\n\n" + rest + sse_frame({"type": "message_stop"})))
    assert (reply.stop_reason, reply.error_message) == ("stop", None)
    assert reply.content == [TextContent(text="a")]
    reply = await read_back(fake, fake_anthropic.Reply(
        [message_start(), start, text],
        raw=rest + b'event: vendor_info\ndata: {"type": "message_stop"}\n\n'))
    assert reply.error_message == "Anthropic: stream ended before message_stop"


@pytest.mark.asyncio
@pytest.mark.parametrize(("sent", "read"), [(b"a\tb", "a\tb"), (b"a\x01", "a\x01"),
                                            (b"\\d+", "\\d+")])
async def test_a_raw_control_character_or_bad_escape_in_an_event_is_mended_as_pi_mends_it(
        fake: FakeAnthropic, sent: bytes, read: str) -> None:
    """A literal TAB or a regex's `\\d` in a text delta failed the reply as not JSON, unretried;
    pi 1.6 reads each Anthropic event with parseJsonWithRepair."""
    start, end = text_block(0)
    event = b'{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", ' \
        b'"text": "' + sent + b'"}}'
    raw = b"event: content_block_delta\ndata: " + event + b"\n\n" + sse_frame(end) + \
        sse_frame(stop("end_turn")) + sse_frame({"type": "message_stop"})
    reply = await read_back(fake, fake_anthropic.Reply([message_start(), start], raw=raw))
    assert (reply.stop_reason, reply.content) == ("stop", [TextContent(text=read)])


@pytest.mark.asyncio
async def test_a_bom_before_the_stream_is_dropped_as_pi_drops_it(fake: FakeAnthropic) -> None:
    """The BOM made the first line's field "\ufeffevent", so message_start was lost with the
    reply's id and input count; pi's TextDecoder drops it."""
    reply = await read_back(fake, fake_anthropic.Reply(
        raw=b"\xef\xbb\xbf" + b"".join(map(sse_frame, text_reply("Hi").events))))
    assert (reply.response_id, reply.usage.input) == ("msg_fake", 100)
    assert reply.content == [TextContent(text="Hi")]


@pytest.mark.asyncio
async def test_bytes_that_are_not_utf8_are_read_as_replacement_characters(
        fake: FakeAnthropic) -> None:
    """A text delta holding "caf\\xc3" failed the whole reply ("a reply pi-lsp cannot read
    (UnicodeDecodeError ...)", the SDK's strict decode); pi's TextDecoder keeps it, U+FFFD
    where the bytes are not UTF-8 (a surrogate's three bytes: three, as Node makes them)."""
    raw = b"".join(map(sse_frame, text_reply("\u00a7").events))
    reply = await read_back(fake, fake_anthropic.Reply(
        raw=raw.replace(b"\\u00a7", b"caf\xc3 \xed\xa0\x80!")))
    assert (reply.stop_reason, reply.content) == (
        "stop", [TextContent(text="caf\ufffd \ufffd\ufffd\ufffd!")])


@pytest.mark.asyncio
async def test_a_character_cut_between_chunks_is_read_whole() -> None:
    """The stream's lines are decoded whole (split from its bytes first): decoding each chunk
    as it came would make two U+FFFD of an "é" the network cut in two."""
    async def body() -> AsyncIterator[bytes]:
        for part in (b'event: content_block_delta\ndata: {"text": "caf\xc3',
                     b'\xa9 \xc3"}\n', b"\n"):
            yield part

    provider = AnthropicProvider("k")
    decoder = provider.client._make_sse_decoder()
    assert [sse.json() async for sse in decoder.aiter_bytes(body())] == [
        {"text": "caf\u00e9 \ufffd"}]
    await provider.client.close()


# -- the fake server itself ----------------------------------------------------------------------


def test_a_fake_server_that_never_listens_fails_its_start(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """FakeAnthropic.start dropped its wait's result: a server not bound within 5 s started
    with the URL "", and its tests failed later, far from the cause."""
    monkeypatch.setattr(FakeAnthropic, "_run", lambda self: None)  # a thread that never binds
    monkeypatch.setattr(fake_anthropic, "PROCESS_CEILING_S", 0.1)
    fake = FakeAnthropic()
    with pytest.raises(RuntimeError, match="was not listening after"):
        fake.start()
    fake._loop.close()  # no thread runs it
