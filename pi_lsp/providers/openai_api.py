"""OpenAI and OpenAI-compatible servers through the official `openai` SDK (async, streaming).

One client per API of a provider; each request goes to Chat Completions or the Responses API
by its model's `api`, through that API's client.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx2
import openai
from openai._models import FinalRequestOptions, construct_type
from openai._streaming import ServerSentEvent, SSEDecoder

from pi_lsp.providers.base import MissingApiKeyError, ModelRequest, ProviderEvent, ReplyBuilder
from pi_lsp.providers.failures import (
    MALFORMED_EVENT,
    MalformedEvent,
    ReplyFailed,
    cut_error_text,
    ended_stream,
    event_json,
    failure_text,
    line_text,
    provider_label,
    unmade_request,
)
from pi_lsp.providers.header_values import (
    HeaderValueError,
    Latin1Text,
    sendable_headers,
    trimmed,
    unsendable,
)
from pi_lsp.providers.long_events import ReadAhead, let_loop_run, read_ahead
from pi_lsp.providers.models_file import ModelsFileError, request_model_headers
from pi_lsp.providers.registry import CHAT_API, RESPONSES_API
from pi_lsp.providers.retry import HttpFailure, ProviderRetry, with_retries
from pi_lsp.providers.wire import WIRE_MODULES, wire_for
from pi_lsp.session.jsontext import js_truthy


def error_text(label: str, error: BaseException) -> str | None:
    """One line for an error the server sent: a failed status, or an error event mid-stream
    (None: not one)."""
    if not isinstance(error, openai.APIError):
        return None
    if not isinstance(error, openai.APIStatusError):
        # Mid-stream, pi 1.6 writes the error's message alone, as its SDK words it: no name of
        # the provider, and no type or code, which would make a retry ("server_error",
        # "rate_limit") that pi does not make.
        return cut_error_text(stream_error_message(error.body)) or error.message
    body = error.body if isinstance(error.body, dict) else {}
    kind = body.get("type") or body.get("code") or "error"
    text = body.get("message") if isinstance(body.get("message"), str) else None
    text = cut_error_text(text) if text else body_text(error.body) or error.message
    return f"{label} {error.status_code} {kind}: {text}".strip()


def _js_json(value: object) -> str:
    """`value` as JSON.stringify writes it."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def stream_error_message(error: object) -> str:
    """The text pi 1.6's SDK gives an error sent mid-stream (APIError.makeMessage without a
    status): its message, as JSON unless a string; without one, the whole error as JSON."""
    message = error.get("message") if isinstance(error, dict) else None
    if js_truthy(message):
        return message if isinstance(message, str) else _js_json(message)
    return _js_json(error) if js_truthy(error) else ""


def chat_error_text(label: str, error: BaseException) -> str | None:
    """`error_text`, then what OpenRouter's upstream answered (its `metadata.raw`) on a line of
    its own unless the text has it already, as pi 1.6's Chat Completions provider adds it."""
    text = error_text(label, error)
    body = getattr(error, "body", None)
    metadata = body.get("metadata") if isinstance(body, dict) else None
    raw = metadata.get("raw") if isinstance(metadata, dict) else None
    if text is None or not raw:
        return text
    raw_text = cut_error_text(raw) if isinstance(raw, str) else body_text(raw)
    return text if raw_text in text else f"{text}\n{raw_text}"


def body_text(body: object) -> str:
    """An error body the SDK found no message in, on one line: a string (Ollama's and TGI's
    {"error": "..."}, a proxy's HTML page) as it is, else compact JSON, cut as pi 1.6 cuts one
    (pi-ai's truncateErrorText, which keeps 4,000 characters)."""
    if body is None or body == {}:
        return ""
    text = body if isinstance(body, str) else \
        json.dumps(body, ensure_ascii=False, separators=(",", ":"), default=str)
    return cut_error_text(" ".join(text.split()))


def sdk_arguments(create: Callable[..., Any], params: dict[str, Any]) -> dict[str, Any]:
    """`params` as keyword arguments of the SDK's `create`: a field it does not name (the thinking
    switch of OpenRouter, DeepSeek, z.ai or Qwen) goes in `extra_body`, sent as it is."""
    named = inspect.signature(create).parameters
    extra = {key: value for key, value in params.items() if key not in named}
    known = {key: value for key, value in params.items() if key in named}
    return {**known, "extra_body": extra} if extra else known


def http_failure(error: Exception) -> HttpFailure | None:
    if isinstance(error, openai.APIStatusError):
        return error.status_code, error.response.headers
    if isinstance(error, openai.APIConnectionError):
        return None, {}
    return None


def thrown_error(data: Any, text: str, api: str) -> Any:
    """An `error` event's data as a chunk the SDK raises on: pi's SDK throws on any event named
    error (`data.error ?? data`), the Python SDK only on a chunk with an `error`. The Responses
    error event (`type: error`) is left as it is: its reader fails the reply in pi's words."""
    if api == RESPONSES_API and isinstance(data, dict) and data.get("type") == "error":
        return data
    error = data.get("error") if isinstance(data, dict) else None
    return {"error": error or data or text}  # never empty: the SDK passes a falsy one by


class _JsonParseEvent(ReadAhead, ServerSentEvent):
    def __init__(self, api: str, **fields: Any) -> None:
        super().__init__(**fields)
        self.api = api

    def read(self) -> Any:
        try:
            data = event_json(self.data)
        except json.JSONDecodeError:
            raise MalformedEvent(MALFORMED_EVENT) from None
        if self.event == "error":
            return thrown_error(data, self.data, self.api)
        if isinstance(data, dict) and data.get("error") in ({}, []):
            # pi's SDK throws on a chunk whose `error` JavaScript holds true; the SDK here
            # passes an empty object or list by (Python holds them false).
            raise ReplyFailed(cut_error_text(stream_error_message(data["error"])))
        return data


class _JsonParseDecoder(SSEDecoder):
    """The SDK's event decoder for one API's stream, its events read as pi's SDK reads them (see
    event_json), the last one kept when the body ends without the blank line after it."""

    def __init__(self, api: str) -> None:
        super().__init__()
        self.api = api

    def aiter_bytes(self, iterator: AsyncIterator[bytes]) -> AsyncIterator[ServerSentEvent]:
        return read_ahead(super().aiter_bytes(ended_stream(iterator)))

    def _decode_lines(self, lines: Iterator[bytes]) -> Iterator[ServerSentEvent]:
        # The SDK's, each line read by line_text: its lines are split from the bytes first, so
        # a character cut between two chunks is whole here. pi's SDK decodes each line alone,
        # so a BOM starting any line is dropped (a BOM before the stream lost its first event).
        for raw_line in lines:
            if sse := self.decode(line_text(raw_line, bom=True)):
                yield sse

    def decode(self, line: str) -> ServerSentEvent | None:
        if not line and not self._event and not self._data:
            # Nothing to dispatch, as pi's SDK sees it: an id alone would make an empty event
            # of the blank line ended_stream adds after a body that ended with its own.
            return None
        sse = super().decode(line)
        return None if sse is None else _JsonParseEvent(self.api, event=sse.event, data=sse.data,
                                                        id=sse.id, retry=sse.retry)


# The JSON each streamed event still held was built from (by the event's id: the SDK's
# models are unhashable): the models put their keys in their own order, where pi writes some
# parts (a reasoning item) in the order the server sent them.
_SENT: dict[int, Any] = {}


def _remember(event: openai.BaseModel, data: object) -> None:
    _SENT[id(event)] = data
    weakref.finalize(event, _SENT.pop, id(event), None)  # gone with it, before its id is reused


def sent_json(event: Any) -> Any:
    """The JSON a streamed event was built from, as the server sent it (None: not known)."""
    return _SENT.get(id(event))


class _Client(openai.AsyncOpenAI):
    """The SDK's client for one API: its decoder must know which (see thrown_error)."""

    def __init__(self, api: str, **options: Any) -> None:
        super().__init__(**options)
        self.api = api

    # The SDK's hook for the decoder its streams read events with.
    def _make_sse_decoder(self) -> SSEDecoder:
        return _JsonParseDecoder(self.api)

    # The SDK's hook that builds each streamed event from its JSON.
    def _process_response_data(self, *, data: object, cast_to: Any,
                               response: httpx2.Response) -> Any:
        built = super()._process_response_data(data=data, cast_to=cast_to, response=response)
        if isinstance(built, openai.BaseModel):
            _remember(built, data)
        return built

    # The SDK's hook for a request's headers: it hands them to httpx again as text, which
    # httpx encodes as ASCII; read as Latin-1, each goes out as the bytes it was (as fetch's).
    def _build_headers(self, options: FinalRequestOptions, *, retries_taken: int = 0
                       ) -> httpx2.Headers:
        headers = super()._build_headers(options, retries_taken=retries_taken)
        return _Latin1Headers(headers.raw, encoding="iso-8859-1")


class _Latin1Headers(httpx2.Headers):
    """Headers whose values, taken out as text, are encoded as Latin-1 when sent."""

    def multi_items(self) -> list[tuple[str, str]]:
        return [(name, Latin1Text(value)) for name, value in super().multi_items()]


_responses_ready = False
_readying = threading.Lock()


async def sdk_endpoint(wire: Any, client: _Client) -> Any:
    """The SDK call that streams the wire's replies; the first of the Responses API is made in
    a worker thread, with the SDK's models of its events: the SDK imports its Responses code at
    the first call (0.14 s) and builds the models of all its events at the first event it
    reads (0.42 s), which held every editor request."""
    global _responses_ready
    if client.api != RESPONSES_API or _responses_ready:
        return wire.endpoint(client)
    create = await asyncio.to_thread(_responses_endpoint, wire, client)
    _responses_ready = True
    return create


def _responses_endpoint(wire: Any, client: _Client) -> Any:
    from openai.types.responses import ResponseStreamEvent

    with _readying:  # two first turns at once make them one after the other
        construct_type(type_=ResponseStreamEvent,
                       value={"type": "response.created", "response": {"output": []}})
        return wire.endpoint(client)


class OpenAIProvider:
    def __init__(self, name: str, api_key: str | None, base_url: str | None,
                 headers: dict[str, str] | None = None,
                 retry: ProviderRetry | None = None) -> None:
        api_key = trimmed(api_key or "")
        if not api_key:
            raise MissingApiKeyError(name)
        self.name = name
        self.label = provider_label(name)
        self.retry = retry or ProviderRetry()
        # A key or header that cannot be sent fails each request (as in pi), not the provider.
        self.unsendable, api_key, headers = unsendable(api_key, headers or {}, self.label)
        # Retries are ours (pi's policy), never the SDK's: see pi_lsp.providers.retry. Both
        # clients are made here, as the provider is made off the event loop (a client's SSL
        # context takes 20-40 ms), not at the first request of each API.
        self.clients = {api: _Client(api, api_key=api_key, base_url=base_url,
                                     default_headers=headers or None, max_retries=0,
                                     timeout=self.retry.timeout_s)
                        for api in (CHAT_API, RESPONSES_API)}

    async def stream(self, request: ModelRequest, reply: ReplyBuilder
                     ) -> AsyncIterator[ProviderEvent]:
        # The parameters are built as plain JSON (the preview shows them), not the SDK's types.
        api = request.model.api
        wire = wire_for(api, self.name) if api in WIRE_MODULES else None
        if wire is None or wire.SDK != "openai":
            reply.fail("error", f"{self.name}: api {api!r} is not an OpenAI API")
            return
        client = self.clients[api]
        try:  # a failure making the request ends the reply too, as pi 1.6's does
            create, reader = await sdk_endpoint(wire, client), wire.reader(reply, request.model)
            params = sdk_arguments(create, wire.request_params(request))
            if api == RESPONSES_API:  # a configuration_update's effort, kept if the call fails
                reply.provider_thinking_level = wire.configuration_effort(request)
        except Exception as error:
            reply.fail("error", unmade_request(error, self.label))
            return
        try:
            if self.unsendable:
                raise HeaderValueError(self.unsendable)
            headers = sendable_headers({**await request_model_headers(request.model),
                                        **wire.request_headers(request)}, self.label)
        except (ModelsFileError, HeaderValueError) as error:  # pi 1.6 fails too
            reply.fail("error", str(error))
            return
        answered = False
        try:
            stream = await with_retries(
                lambda: create(**params, stream=True, extra_headers=headers or None),
                self.retry, http_failure)
            answered = True
            async with stream:
                async for event in stream:
                    await let_loop_run()
                    for produced in reader.apply(event):
                        yield produced
            for produced in reader.finish():
                yield produced
        except Exception as error:  # every failure ends in the reply, partial content kept
            server_error = chat_error_text if api == CHAT_API else error_text
            reply.fail("error", failure_text(error, self.label, str(client.base_url),
                                             self.retry.timeout_s, answered, server_error))
