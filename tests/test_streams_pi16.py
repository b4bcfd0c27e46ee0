"""Odd and hostile provider streams are read into the reply pi 1.6 makes of them: each stream
served by the fakes to pi-lsp's provider and, where pi 1.6 is installed, to pi-ai's own
(tests/pi16_turns.mjs), whose replies are stored for machines without it.

Compared with the reply's time and duration left out: both are clocks' readings."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pi_lsp.providers.anthropic import AnthropicProvider
from pi_lsp.providers.base import ModelRequest, ReplyBuilder
from pi_lsp.providers.openai_api import OpenAIProvider
from pi_lsp.providers.registry import CHAT_API, RESPONSES_API, ModelInfo, ModelRegistry, Price
from pi_lsp.session.entries import UserMessage
from pi_lsp.session.replyorder import reply_json
from tests import fake_anthropic, fake_openai
from tests.fake_anthropic import (
    FakeAnthropic,
    message_end,
    message_start,
    text_block,
    tool_block,
)
from tests.fake_openai import (
    MODEL,
    FakeOpenAI,
    call_item,
    chat_reply,
    chunk,
    completed,
    message_item,
    reasoning_item,
)
from tests.test_system_messages import PI16, pi16_node
from tests.waits import PROCESS_CEILING_S

STORED = Path(__file__).with_name("fixtures") / "pi16-streams.json"
TURNS = Path(__file__).with_name("pi16_turns.mjs")
TIMES = ("timestamp", "durationMs")  # a reply's clock readings
# pi16_turns.mjs's models: a local one for the OpenAI APIs, claude-sonnet-4-5 for Anthropic's.
LOCAL_PRICE = Price(1, 4, 0.5, 0)
APIS = {"chat": CHAT_API, "responses": RESPONSES_API}


@dataclass
class Stream:
    """One API's stream (`chat`, `responses` or `anthropic`) as a fake serves it."""

    api: str
    reply: fake_openai.Reply | fake_anthropic.Reply


def _terminal(status: str, reason: str | None = None) -> dict[str, Any]:
    """A terminal event of `status` (response.incomplete for "incomplete", else
    response.completed), with why if said."""
    event = completed()
    event["response"]["status"] = status
    if status == "incomplete":
        event["type"] = "response.incomplete"
    if reason is not None:
        event["response"]["incomplete_details"] = {"reason": reason}
    return event


def _responses(*ending: dict[str, Any]) -> Stream:
    """A Responses stream of a message, then `ending`."""
    return Stream("responses", fake_openai.Reply([*message_item(0, "Hi"), *ending]))


def _reasoning(done: dict[str, Any], backfilled: dict[str, Any] | None = None) -> Stream:
    """A Responses stream of a reasoning item finished as `done` (its keys in their order),
    then a message; `backfilled`: an item the terminal response's output holds."""
    *streaming, _ = reasoning_item(0, "Thought")
    ending = completed()
    if backfilled is not None:
        ending["response"]["output"] = [backfilled]
    finished = {"type": "response.output_item.done", "output_index": 0, "item": done}
    return Stream("responses", fake_openai.Reply([*streaming, finished, *message_item(1, "Hi"),
                                                  ending]))


# A finished reasoning item, its keys in another order than the SDK's model of it, a field
# the model does not know, a non-ASCII summary and a number JavaScript writes otherwise.
ODD_REASONING = {"summary": [{"text": "Pensé \u2028 ✓", "type": "summary_text"}],
                 "encrypted_content": "enc", "id": "rs_0", "zeta": 1.0, "type": "reasoning",
                 "status": None}

def _chat_calls(calls: Any) -> Stream:
    """A Chat Completions stream of a read call, then a delta whose tool_calls is `calls`."""
    reply = chat_reply("Reading.", calls=[("call_r", "read", {"path": "a.txt"})])
    reply.events.insert(-2, chunk({"tool_calls": calls}))
    return Stream("chat", reply)


DEEP = 100_000  # levels: past Python's parser (about 1,000), not JSON.parse's


def _deep(event: dict[str, Any], at: int, named: bool = True) -> bytes:
    """An SSE frame of `event` with a field `deep`, arrays nested DEEP levels, if `at` is 0;
    `named`: the frame names its event (Chat Completions' do not)."""
    data = json.dumps({**event, "deep": "DEEP"} if at == 0 else event)
    data = data.replace('"DEEP"', "[" * DEEP + "]" * DEEP)
    name = f"event: {event['type']}\n" if named else ""
    return f"{name}data: {data}\n\n".encode()


def _deep_stream(api: str) -> Stream:
    """A stream of "Hi there" whose first text event has a field nested DEEP levels, which
    neither reader reads."""
    if api == "chat":
        events = chat_reply("Hi", " there").events
        frames = [_deep(e, at - 1, named=False) for at, e in enumerate(events)]
        return Stream(api, fake_openai.Reply(raw=b"".join(frames) + b"data: [DONE]\n\n"))
    if api == "responses":
        events = [*message_item(0, "Hi", " there"), completed()]
        return Stream(api, fake_openai.Reply(raw=b"".join(
            _deep(e, at - 2) for at, e in enumerate(events))))
    events = [message_start(), *text_block(0, "Hi", " there"), *message_end()]
    return Stream(api, fake_anthropic.Reply(raw=b"".join(
        _deep(e, at - 2) for at, e in enumerate(events))))


def _call_with(api: str, arguments: str) -> Stream:
    """A stream of one read call whose arguments are `arguments`, as the model wrote them."""
    if api == "chat":
        call = {"index": 0, "id": "call_1", "type": "function",
                "function": {"name": "read", "arguments": arguments}}
        return Stream(api, fake_openai.Reply([chunk({"role": "assistant", "content": None}),
                                              chunk({"tool_calls": [call]}),
                                              chunk(finish="tool_calls")]))
    if api == "responses":
        added, delta, *_, done = call_item(0, "call_1", "read", {})
        done["item"]["arguments"] = arguments
        return Stream(api, fake_openai.Reply([added, {**delta, "delta": arguments}, done,
                                              completed()]))
    start, *_, stop_block = tool_block(0, "toolu_1", "read", {})
    delta = {"type": "content_block_delta", "index": 0,
             "delta": {"type": "input_json_delta", "partial_json": arguments}}
    return Stream(api, fake_anthropic.Reply([message_start(), start, delta, stop_block,
                                             *message_end("tool_use")]))


# Arguments JSON.parse refuses, each in V8's words: cut short, a missing colon, a misspelt
# word, NaN, one pi mends first (its `\d`) and then refuses, an unexpected token shown in a
# stretch of a long text, a line and column past a line break, a character past U+FFFF, one
# nested past Python's parser (about 1,000 levels).
BAD_ARGUMENTS = {"cut short": '{"path": "a', "no colon": '{"path" "a.txt"}',
                 "a misspelt word": '{"path": tru}', "NaN": '{"path": "a", "limit": NaN}',
                 "mended, then refused": '{"path": "a\\d", "limit": }',
                 "a token in a long text": '{"path": "a.txt", "offset": 1, "limit": x10}',
                 "a line break": '{\n  "path": "a.txt"\n  "limit": 3\n}',
                 "past U+FFFF": '{"path": "\U0001F600", "x": \U0001F600}',
                 "nested 2,000 levels deep": '{"path": "a", "x": ' + "[" * 2000 + "x}"}

def _error_event(message: str) -> Stream:
    """A Responses `error` event whose message is the JSON `message`, its fields in an order
    of the server's, one the SDK does not know, a non-ASCII name and a 1.0 among them."""
    data = f'{{"type": "error", "message": {message}, "code": "c", "param": null, "z\\u00e9": 1.0}}'
    return Stream("responses", fake_openai.Reply(raw=f"event: error\ndata: {data}\n\n".encode()))



def _frame(event: dict[str, Any], end: bytes = b"\n\n") -> bytes:
    """An Anthropic SSE frame of `event`, its last line ended by `end`."""
    return f"event: {event['type']}\ndata: {json.dumps(event)}".encode() + end


def _failing_after_a_mixed_blank_line(failing: bytes) -> Stream:
    """An Anthropic stream of "Hi" whose last text event's blank line is a CRLF after an LF (no
    blank line to the SDK's chunker, one to pi's reader), then `failing`: it fails the reply."""
    start, delta, _stop = text_block(0, "Hi")
    frames = [_frame(message_start()), _frame(start), _frame(delta, b"\n\r\n")]
    return Stream("anthropic", fake_anthropic.Reply(raw=b"".join(frames) + failing))


STREAMS: dict[str, Stream] = {
    "responses, incomplete then completed": _responses(
        _terminal("incomplete", "content_filter"), _terminal("completed")),
    "responses, completed then incomplete": _responses(
        _terminal("completed"), _terminal("incomplete", "content_filter")),
    "responses, cut at length then completed": _responses(
        _terminal("incomplete", "max_output_tokens"), _terminal("completed")),
    "responses, a status pi does not know then completed": _responses(
        _terminal("weird"), _terminal("completed")),
    "responses, a reasoning item's keys in the server's order": _reasoning(ODD_REASONING),
    "responses, encrypted reasoning sent only at the end": _reasoning(
        {key: value for key, value in ODD_REASONING.items() if key != "encrypted_content"},
        {"type": "reasoning", "id": "rs_0", "encrypted_content": "late"}),
    "chat, tool_calls a text": _chat_calls("ab\U0001F600"),
    "chat, tool_calls of a number, a text, a list and true": _chat_calls([5, "x", [], True]),
    "chat, tool_calls of null": _chat_calls([None]),
    "chat, tool_calls an empty text": _chat_calls(""),
    **{f"responses, an error event whose message is {what}": _error_event(message)
       for what, message in (("a list", '["a", 1.0]'), ("empty", '""'), ("0", "0"),
                             ("an object", '{"b": "\\u00e9"}'))},
    **{f"{api}, an event nested {DEEP:,} levels deep": _deep_stream(api)
       for api in ("chat", "responses", "anthropic")},
    **{f"{api}, arguments JSON.parse refuses: {case}": _call_with(api, arguments)
       for api in ("chat", "responses", "anthropic") for case, arguments in BAD_ARGUMENTS.items()},
    # JSON.parse reads an integer past a double's range as Infinity (past Python's 4,300 digits).
    **{f"{api}, arguments JSON.parse reads: an integer of 5,000 digits": _call_with(
        api, '{"path": "a", "x": 1' + "0" * 4999 + "}")
       for api in ("chat", "responses", "anthropic")},
    "anthropic, an error event after a CRLF blank line ending an LF event":
        _failing_after_a_mixed_blank_line(
            b'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", '
            b'"message": "busy"}}\n\n'),
    "anthropic, an event without data after a CRLF blank line ending an LF event":
        _failing_after_a_mixed_blank_line(b"event: content_block_delta\ndata:\n\n"),
}


def _untimed(reply: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in reply.items() if key not in TIMES}


def _ids_named(reply: dict[str, Any]) -> dict[str, Any]:
    """pi's reply with the ids pi-lsp gives the calls a stream names none, on purpose:
    `call_N`, N their place among the calls (pi keeps "", and two such calls are one to it)."""
    calls = [block for block in reply["content"] if block["type"] == "toolCall"]
    named = {id(call): f"call_{number}" for number, call in enumerate(calls) if not call["id"]}
    content = [{**block, "id": named[id(block)]} if id(block) in named else block
               for block in reply["content"]]
    return {**reply, "content": content}


def _pi16_read(node: str, streams: list[Stream], fake: FakeAnthropic, oai: FakeOpenAI
               ) -> list[dict[str, Any]]:
    """pi 1.6's reply to each stream, untimed, all read by one run of pi16_turns.mjs."""
    pairs: list[str] = []
    for stream in streams:
        pairs += [stream.api, (fake if stream.api == "anthropic" else oai).url]
    fake.script(*[s.reply for s in streams if isinstance(s.reply, fake_anthropic.Reply)])
    oai.script(*[s.reply for s in streams if isinstance(s.reply, fake_openai.Reply)])
    run = subprocess.run([node, str(TURNS), str(PI16 / "@earendil-works"), *pairs],
                         capture_output=True, text=True, timeout=PROCESS_CEILING_S)
    assert run.returncode == 0, run.stderr
    return [_untimed(reply) for reply in json.loads(run.stdout)]


def _pi16_replies(node: str, fake: FakeAnthropic, oai: FakeOpenAI) -> dict[str, Any]:
    return dict(zip(STREAMS, _pi16_read(node, list(STREAMS.values()), fake, oai), strict=True))


def pi16_reply(stream: Stream, fake: FakeAnthropic, oai: FakeOpenAI) -> dict[str, Any] | None:
    """pi 1.6's reply to `stream` as it writes it, untimed (None: pi 1.6 is not installed),
    for tests that hold pi-lsp to answers of pi's stored by hand."""
    node = pi16_node()
    return None if node is None else _pi16_read(node, [stream], fake, oai)[0]


@pytest.fixture(scope="module")
def pi_streams(fake: FakeAnthropic, oai: FakeOpenAI) -> dict[str, Any]:
    stored: dict[str, Any] = json.loads(STORED.read_text("utf-8"))
    node = pi16_node()
    if node is not None:
        live = _pi16_replies(node, fake, oai)
        for name in STREAMS:  # the stored replies are pi's, keys in its order
            assert json.dumps(live[name]) == json.dumps(stored[name]), name
    return stored


def _model(api: str) -> ModelInfo:
    if api == "anthropic":
        return ModelRegistry().get("anthropic", "claude-sonnet-4-5")
    return ModelInfo("ollama", MODEL, 32_000, 8_192, LOCAL_PRICE, api=APIS[api])


async def lsp_reply(stream: Stream, fake: FakeAnthropic, oai: FakeOpenAI) -> dict[str, Any]:
    """The reply pi-lsp writes for `stream`, untimed, read through the real SDKs."""
    model = _model(stream.api)
    provider: AnthropicProvider | OpenAIProvider
    if stream.api == "anthropic":
        fake.script(stream.reply)
        provider = AnthropicProvider("k", base_url=fake.url)
    else:
        oai.script(stream.reply)
        provider = OpenAIProvider("ollama", "k", f"{oai.url}/v1")
    built = ReplyBuilder(model.api, model)
    request = ModelRequest(model, "sys", [UserMessage(content="q", timestamp=1)], [], "off")
    _ = [event async for event in provider.stream(request, built)]
    clients = [provider.client] if isinstance(provider, AnthropicProvider) else \
        provider.clients.values()
    for client in clients:
        await client.close()
    return _untimed(json.loads(bytes(reply_json(built.message()))))


@pytest.mark.parametrize("name", STREAMS)
async def test_a_stream_is_read_as_pi_16_reads_it(name: str, fake: FakeAnthropic,
                                                  oai: FakeOpenAI, pi_streams: dict[str, Any]
                                                  ) -> None:
    reply = await lsp_reply(STREAMS[name], fake, oai)
    assert json.dumps(reply) == json.dumps(_ids_named(pi_streams[name]))
