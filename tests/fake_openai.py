"""A local OpenAI-compatible server for tests: real HTTP on 127.0.0.1, scripted SSE replies for
both /v1/chat/completions (data-only chunks ending in [DONE]) and /v1/responses (named events).
Like the Anthropic fake, a reply can also be raw SSE bytes, cut, stalled, held until a file
exists, or an error status with headers of the script's choice.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fake_anthropic import FakeAnthropic

MODEL = "qwen2.5-coder:7b"


@dataclass
class Reply:
    """One scripted answer: SSE payloads, or an error status with a JSON error body (or `raw`
    as the whole body)."""

    events: list[dict[str, Any]] = field(default_factory=list)
    status: int = 200
    error: dict[str, Any] | str | None = None  # with 200: sent mid-stream after the events
    delay: float = 0.0
    raw: bytes = b""  # SSE bytes sent as they are, after the events (no [DONE] then); with an
    # error status, the body as it is (a proxy's HTML page, FastAPI's {"detail": ...})
    cut: bool = False  # close the connection after the events, mid-body
    stall: bool = False  # after the events, send nothing until the client goes away
    headers: dict[str, str] = field(default_factory=lambda: {"retry-after-ms": "5"})
    done: bool = True  # end a Chat Completions stream with [DONE]
    # After the first `held_after` frames, send nothing more until this file exists (a test's
    # event that it has done what it does mid-reply, say an abort).
    held_until: Path | None = None
    held_after: int = 0


def error_reply(status: int, kind: str, message: str, headers: dict[str, str] | None = None
                ) -> Reply:
    reply = Reply(status=status, error={"message": message, "type": kind, "code": None})
    if headers is not None:
        reply.headers = headers
    return reply


# -- Chat Completions ----------------------------------------------------------------------


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": MODEL,
            "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}


def usage_chunk(prompt: int, completion: int, cached: int = 0) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": MODEL,
            "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                     "total_tokens": prompt + completion,
                                     "prompt_tokens_details": {"cached_tokens": cached}}}


def chat_reply(*pieces: str, reasoning: str = "", calls: list[tuple[str, str, dict[str, Any]]]
               | None = None, usage: tuple[int, int, int] = (120, 30, 0), delay: float = 0.0
               ) -> Reply:
    """Reasoning (as llama.cpp's reasoning_content), text pieces, then tool calls (id, name,
    args) with their arguments split in two chunks, then usage."""
    events = [chunk({"role": "assistant", "content": ""})]
    if reasoning:
        half = len(reasoning) // 2
        events += [chunk({"reasoning_content": reasoning[:half]}),
                   chunk({"reasoning_content": reasoning[half:]})]
    events += [chunk({"content": piece}) for piece in pieces]
    for index, (call_id, name, arguments) in enumerate(calls or []):
        text = json.dumps(arguments)
        half = len(text) // 2
        events += [
            chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                   "function": {"name": name, "arguments": text[:half]}}]}),
            chunk({"tool_calls": [{"index": index, "function": {"arguments": text[half:]}}]}),
        ]
    events.append(chunk(finish="tool_calls" if calls else "stop"))
    return Reply([*events, usage_chunk(*usage)], delay=delay)


# -- Responses -----------------------------------------------------------------------------


def _event(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, **fields}


def reasoning_item(index: int, summary: str, encrypted: str = "enc") -> list[dict[str, Any]]:
    item = {"type": "reasoning", "id": f"rs_{index}", "summary": []}
    done = {**item, "summary": [{"type": "summary_text", "text": summary}],
            "encrypted_content": encrypted}
    return [
        _event("response.output_item.added", output_index=index, item=item),
        _event("response.reasoning_summary_part.added", output_index=index, item_id=item["id"],
               summary_index=0, part={"type": "summary_text", "text": ""}),
        _event("response.reasoning_summary_text.delta", output_index=index, item_id=item["id"],
               summary_index=0, delta=summary),
        _event("response.reasoning_summary_part.done", output_index=index, item_id=item["id"],
               summary_index=0, part={"type": "summary_text", "text": summary}),
        _event("response.output_item.done", output_index=index, item=done),
    ]


def message_item(index: int, *pieces: str) -> list[dict[str, Any]]:
    item = {"type": "message", "id": f"msg_{index}", "role": "assistant",
            "status": "in_progress", "content": []}
    text = "".join(pieces)
    done = {**item, "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}
    return [
        _event("response.output_item.added", output_index=index, item=item),
        _event("response.content_part.added", output_index=index, item_id=item["id"],
               content_index=0, part={"type": "output_text", "text": "", "annotations": []}),
        *(_event("response.output_text.delta", output_index=index, item_id=item["id"],
                 content_index=0, delta=piece) for piece in pieces),
        _event("response.output_item.done", output_index=index, item=done),
    ]


def call_item(index: int, call_id: str, name: str, arguments: dict[str, Any],
              namespace: str | None = None) -> list[dict[str, Any]]:
    """A function call's events; `namespace`: the one its tool is declared in (None: none)."""
    text = json.dumps(arguments)
    half = len(text) // 2
    item = {"type": "function_call", "id": f"fc_{index}", "call_id": call_id, "name": name,
            "arguments": "", "status": "in_progress",
            **({"namespace": namespace} if namespace is not None else {})}
    return [
        _event("response.output_item.added", output_index=index, item=item),
        _event("response.function_call_arguments.delta", output_index=index,
               item_id=item["id"], delta=text[:half]),
        _event("response.function_call_arguments.delta", output_index=index,
               item_id=item["id"], delta=text[half:]),
        _event("response.function_call_arguments.done", output_index=index,
               item_id=item["id"], arguments=text),
        _event("response.output_item.done", output_index=index,
               item={**item, "arguments": text, "status": "completed"}),
    ]


def completed(input_tokens: int = 200, output_tokens: int = 40, cached: int = 0,
              status: str = "completed") -> dict[str, Any]:
    return _event(f"response.{status}", response={
        "id": "resp_1", "object": "response", "status": status, "model": MODEL, "output": [],
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                  "total_tokens": input_tokens + output_tokens,
                  "input_tokens_details": {"cached_tokens": cached},
                  "output_tokens_details": {"reasoning_tokens": 0}}})


def responses_reply(*pieces: str, reasoning: str = "", calls: list[tuple[str, str,
                    dict[str, Any]]] | None = None, usage: tuple[int, int, int] = (200, 40, 0),
                    delay: float = 0.0) -> Reply:
    events = [_event("response.created", response={"id": "resp_1", "object": "response",
                                                   "status": "in_progress", "output": []})]
    index = 0
    if reasoning:
        events += reasoning_item(index, reasoning)
        index += 1
    if pieces:
        events += message_item(index, *pieces)
        index += 1
    for call_id, name, arguments in calls or []:
        events += call_item(index, call_id, name, arguments)
        index += 1
    return Reply([*events, completed(*usage)], delay=delay)


class FakeOpenAI(FakeAnthropic):
    """Serves scripted replies in order, whichever of the two APIs is asked, and records every
    request."""

    def chat_requests(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.path.endswith("/chat/completions")]

    def responses_requests(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.path.endswith("/responses")]

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        request = await self._read_request(reader)
        reply = self.replies.pop(0) if self.replies else error_reply(
            500, "server_error", "the fake server has no scripted reply left")
        assert isinstance(reply, Reply), "script FakeOpenAI with tests.fake_openai replies"
        if reply.status != 200 and reply.raw:
            return await self._error(writer, reply.status, reply.headers, reply.raw, "text/html")
        if reply.status != 200:
            return await self._error(writer, reply.status, reply.headers, {"error": reply.error})
        chat = request.path.endswith("/chat/completions")
        frames = [f"data: {json.dumps(e)}\n\n" if chat else
                  f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in reply.events]
        if reply.error is not None:
            frames.append(f"data: {json.dumps({'error': reply.error})}\n\n" if chat else
                          f"event: error\ndata: {json.dumps({'type': 'error', **reply.error})}\n\n")
        elif chat and reply.done and not (reply.raw or reply.cut or reply.stall):
            frames.append("data: [DONE]\n\n")
        return await self._stream(reader, writer, reply, [f.encode() for f in frames])
