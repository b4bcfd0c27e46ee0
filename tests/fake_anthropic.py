"""A local Anthropic-compatible server for tests: real HTTP on 127.0.0.1, scripted SSE replies.

It runs its own event loop in a thread, so in-process async tests and subprocesses can use it.
Besides well-formed replies a script can send raw SSE bytes, cut the connection mid-reply,
stall (send nothing more until the client gives up), or answer an error status with headers of
its choice (`retry-after`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.waits import PROCESS_CEILING_S


@dataclass
class Reply:
    """One scripted answer to POST /v1/messages."""

    events: list[dict[str, Any]] = field(default_factory=list)
    delay: float = 0.0  # seconds between SSE events
    status: int = 200
    error_type: str = ""  # with status != 200: a JSON error body; with 200: an SSE error at the end
    error_message: str = ""
    raw: bytes = b""  # SSE bytes sent as they are, after the events; or the error's body
    cut: bool = False  # close the connection after the events, mid-body
    stall: bool = False  # after the events, send nothing until the client goes away
    # After the first `held_after` frames, send nothing more until this file exists (a test's
    # event that the client's far side is ready for the rest, say its reader gone).
    held_until: Path | None = None
    held_after: int = 0
    headers: dict[str, str] = field(default_factory=lambda: {"retry-after-ms": "5"})


@contextlib.contextmanager
def refused_url() -> Iterator[str]:
    """A URL on 127.0.0.1 where nothing listens, its port held bound (not listening) until the
    block ends: a port freed at once could be taken by another xdist worker's server."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{held.getsockname()[1]}"


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


def message_start(model: str = "claude-sonnet-4-5", input_tokens: int = 100,
                  cache_read: int = 0, cache_write: int = 0) -> dict[str, Any]:
    return {"type": "message_start", "message": {
        "id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": 1,
                  "cache_read_input_tokens": cache_read,
                  "cache_creation_input_tokens": cache_write}}}


def sse_frame(event: dict[str, Any]) -> bytes:
    """One event as the server sends it: named by its type."""
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


def text_block(index: int, *pieces: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [{"type": "content_block_start", "index": index,
                                     "content_block": {"type": "text", "text": ""}}]
    events += [{"type": "content_block_delta", "index": index,
                "delta": {"type": "text_delta", "text": piece}} for piece in pieces]
    return [*events, {"type": "content_block_stop", "index": index}]


def thinking_block(index: int, thinking: str, signature: str) -> list[dict[str, Any]]:
    return [
        {"type": "content_block_start", "index": index,
         "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
        {"type": "content_block_delta", "index": index,
         "delta": {"type": "thinking_delta", "thinking": thinking}},
        {"type": "content_block_delta", "index": index,
         "delta": {"type": "signature_delta", "signature": signature}},
        {"type": "content_block_stop", "index": index},
    ]


def tool_block(index: int, call_id: str, name: str, arguments: dict[str, Any]
               ) -> list[dict[str, Any]]:
    text = json.dumps(arguments)
    half = len(text) // 2
    return [
        {"type": "content_block_start", "index": index,
         "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}}},
        {"type": "content_block_delta", "index": index,
         "delta": {"type": "input_json_delta", "partial_json": text[:half]}},
        {"type": "content_block_delta", "index": index,
         "delta": {"type": "input_json_delta", "partial_json": text[half:]}},
        {"type": "content_block_stop", "index": index},
    ]


def message_end(stop_reason: str = "end_turn", output_tokens: int = 20) -> list[dict[str, Any]]:
    return [{"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
             "usage": {"output_tokens": output_tokens}}, {"type": "message_stop"}]


def text_reply(*pieces: str, delay: float = 0.0, model: str = "claude-sonnet-4-5") -> Reply:
    return Reply([message_start(model), *text_block(0, *pieces), *message_end()], delay)


def tool_reply(calls: list[tuple[str, str, dict[str, Any]]], text: str = "",
               thinking: tuple[str, str] | None = None, delay: float = 0.0) -> Reply:
    """A reply that thinks (text, signature), says `text`, then makes the calls (id, name, args)."""
    events = [message_start()]
    index = 0
    if thinking:
        events += thinking_block(index, *thinking)
        index += 1
    if text:
        events += text_block(index, text)
        index += 1
    for call_id, name, arguments in calls:
        events += tool_block(index, call_id, name, arguments)
        index += 1
    return Reply([*events, *message_end("tool_use")], delay)


def error_reply(status: int, error_type: str, message: str) -> Reply:
    return Reply(status=status, error_type=error_type, error_message=message)


class FakeAnthropic:
    """Serves scripted replies in order and records every request."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[Request] = []
        self.disconnects = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._server: asyncio.Server | None = None
        self.url = ""

    def start(self) -> str:
        self._thread.start()
        # A URL of "" would fail the tests later, far from the cause.
        if not self._ready.wait(PROCESS_CEILING_S):
            raise RuntimeError(f"the fake Anthropic server was not listening after "
                               f"{PROCESS_CEILING_S:.0f} s")
        return self.url

    def stop(self) -> None:
        async def finish_connections() -> None:
            # A reply still streaming to an aborted client is ended here, not destroyed later.
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(finish_connections(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def script(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.requests = []

    def message_requests(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.path.startswith("/v1/messages")]

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def serve() -> None:
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
            port = self._server.sockets[0].getsockname()[1]
            self.url = f"http://127.0.0.1:{port}"
            self._ready.set()

        self._loop.run_until_complete(serve())
        self._loop.run_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await self._answer(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            self.disconnects += 1
        finally:
            writer.close()

    async def _read_request(self, reader: asyncio.StreamReader) -> Request:
        """One HTTP request, recorded."""
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")  # a header's bytes are Latin-1
        method, path, _ = lines[0].split(" ", 2)
        headers = {k.strip().lower(): v.strip()
                   for k, v in (line.split(":", 1) for line in lines[1:] if ":" in line)}
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        request = Request(method, path, headers, json.loads(body or b"{}"))
        self.requests.append(request)
        return request

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        await self._read_request(reader)
        reply = self.replies.pop(0) if self.replies else error_reply(
            500, "api_error", "the fake server has no scripted reply left")
        if reply.status != 200:
            return await self._error(writer, reply.status, reply.headers, reply.raw or {
                "type": "error", "error": {"type": reply.error_type,
                                           "message": reply.error_message}},
                kind="text/plain" if reply.raw else "application/json")
        events = list(reply.events)
        if reply.error_type:
            events.append({"type": "error", "error": {"type": reply.error_type,
                                                      "message": reply.error_message}})
        return await self._stream(reader, writer, reply, [sse_frame(e) for e in events])

    async def _error(self, writer: asyncio.StreamWriter, status: int, headers: dict[str, str],
                     body: dict[str, Any] | bytes, kind: str = "application/json") -> bool:
        payload = body if isinstance(body, bytes) else json.dumps(body).encode()
        head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        writer.write(f"HTTP/1.1 {status} Error\r\ncontent-type: {kind}\r\n{head}"
                     f"content-length: {len(payload)}\r\n\r\n".encode() + payload)
        await writer.drain()
        return True

    async def _stream(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      reply: Any, frames: list[bytes]) -> bool:
        """A 200 SSE reply in chunks, with the reply's headers: the frames, then the raw bytes;
        ended, cut or stalled."""
        head = "".join(f"{name}: {value}\r\n" for name, value in reply.headers.items())
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                     b"transfer-encoding: chunked\r\n" + head.encode() + b"\r\n")
        held_until, held_after = reply.held_until, reply.held_after  # both fakes' replies
        for sent, data in enumerate([*frames, reply.raw] if reply.raw else frames, 1):
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            await writer.drain()
            while sent == held_after and held_until is not None and not held_until.exists():
                await asyncio.sleep(0.02)
            if reply.delay:
                await asyncio.sleep(reply.delay)
        if reply.cut:
            writer.transport.abort()  # no terminating chunk: the body is incomplete
            return False
        if reply.stall:
            await reader.read()  # until the client closes the connection
            return False
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True
