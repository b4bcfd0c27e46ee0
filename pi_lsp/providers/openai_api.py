"""OpenAI and OpenAI-compatible servers through the official `openai` SDK (async, streaming).

One client per provider; each request goes to Chat Completions or the Responses API by its
model's `api`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import ModuleType
from typing import Any

import openai

from pi_lsp.providers import openai_chat, openai_responses
from pi_lsp.providers.base import MissingApiKeyError, ModelRequest, ProviderEvent, ReplyBuilder
from pi_lsp.providers.failures import transport_failure, unreadable_reply
from pi_lsp.providers.registry import CHAT_API, RESPONSES_API
from pi_lsp.providers.retry import HttpFailure, ProviderRetry, with_retries


def error_text(label: str, error: openai.APIError) -> str:
    """One line for an error the server sent: a failed status, or an error event mid-stream."""
    body = error.body if isinstance(error.body, dict) else {}
    kind = body.get("type") or body.get("code") or "error"
    text = body.get("message") or error.message
    if isinstance(error, openai.APIStatusError):
        return f"{label} {error.status_code} {kind}: {text}".strip()
    return f"{label} stream {kind}: {text}".strip()


def http_failure(error: Exception) -> HttpFailure | None:
    if isinstance(error, openai.APIStatusError):
        return error.status_code, error.response.headers
    if isinstance(error, openai.APIConnectionError):
        return None, {}
    return None


class OpenAIProvider:
    def __init__(self, name: str, api_key: str | None, base_url: str | None,
                 headers: dict[str, str] | None = None,
                 retry: ProviderRetry | None = None) -> None:
        if not api_key:
            raise MissingApiKeyError(name)
        self.name = name
        self.label = "OpenAI" if name == "openai" else name
        self.retry = retry or ProviderRetry()
        # Retries are ours (pi's policy), never the SDK's: see pi_lsp.providers.retry.
        self.client = openai.AsyncOpenAI(api_key=api_key, base_url=base_url,
                                         default_headers=headers or None, max_retries=0,
                                         timeout=self.retry.timeout_s)

    async def stream(self, request: ModelRequest, reply: ReplyBuilder
                     ) -> AsyncIterator[ProviderEvent]:
        api = request.model.api
        reader: openai_chat.ChatReader | openai_responses.ResponsesReader
        # The parameters are built as plain JSON (the preview shows them), not the SDK's types.
        create: Any
        wire: ModuleType
        if api == CHAT_API:
            create, wire = self.client.chat.completions.create, openai_chat
            reader = openai_chat.ChatReader(reply, openai_chat.compat_of(request.model))
        elif api == RESPONSES_API:
            create, wire = self.client.responses.create, openai_responses
            reader = openai_responses.ResponsesReader(reply)
        else:
            reply.fail("error", f"{self.name}: api {api!r} is not an OpenAI API")
            return
        params = wire.request_params(request)
        headers = {**request.model.headers, **wire.request_headers(request)}
        answered = False
        try:
            stream = await with_retries(
                lambda: create(**params, stream=True, extra_headers=headers or None),
                self.retry, http_failure)
            answered = True
            async with stream:
                async for event in stream:
                    for produced in reader.apply(event):
                        yield produced
            for produced in reader.finish():
                yield produced
        except Exception as error:  # every failure ends in the reply, partial content kept
            reply.fail("error", self.failure_text(error, answered))

    def failure_text(self, error: Exception, answered: bool) -> str:
        described = transport_failure(error, self.label, str(self.client.base_url),
                                      self.retry.timeout_s, answered)
        if described is not None:
            return described
        if isinstance(error, openai.APIError):
            return error_text(self.label, error)
        return unreadable_reply(error, self.label)
