"""OpenAI and OpenAI-compatible servers through the official `openai` SDK (async, streaming).

One client per provider; each request goes to Chat Completions or the Responses API by its
model's `api`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import openai

from pi_lsp.providers import openai_chat, openai_responses
from pi_lsp.providers.base import MissingApiKeyError, ModelRequest, ProviderEvent, ReplyBuilder
from pi_lsp.providers.registry import CHAT_API, RESPONSES_API


def error_text(provider: str, error: openai.APIError) -> str:
    """One readable line for a failed call, naming the provider and what the server said."""
    label = "OpenAI" if provider == "openai" else provider
    body = error.body if isinstance(error.body, dict) else {}
    kind = body.get("type") or body.get("code") or "error"
    text = body.get("message") or error.message
    if isinstance(error, openai.APIStatusError):
        return f"{label} {error.status_code} {kind}: {text}".strip()
    if isinstance(error, openai.APIConnectionError):
        return f"cannot reach {label} at {error.request.url}: {error}"
    return f"{label} stream {kind}: {text}".strip()


class OpenAIProvider:
    def __init__(self, name: str, api_key: str | None, base_url: str | None,
                 headers: dict[str, str] | None = None, max_retries: int = 2) -> None:
        if not api_key:
            raise MissingApiKeyError(name)
        self.name = name
        self.client = openai.AsyncOpenAI(api_key=api_key, base_url=base_url,
                                         default_headers=headers or None,
                                         max_retries=max_retries)

    async def stream(self, request: ModelRequest, reply: ReplyBuilder
                     ) -> AsyncIterator[ProviderEvent]:
        api = request.model.api
        reader: openai_chat.ChatReader | openai_responses.ResponsesReader
        # The parameters are built as plain JSON (the preview shows them), not the SDK's types.
        create: Any
        if api == CHAT_API:
            create, params = self.client.chat.completions.create, openai_chat.request_params
            reader = openai_chat.ChatReader(reply)
        elif api == RESPONSES_API:
            create, params = self.client.responses.create, openai_responses.request_params
            reader = openai_responses.ResponsesReader(reply)
        else:
            reply.fail("error", f"{self.name}: api {api!r} is not an OpenAI API")
            return
        try:
            stream = await create(**params(request), stream=True,
                                  extra_headers=request.model.headers or None)
            async with stream:
                async for event in stream:
                    for produced in reader.apply(event):
                        yield produced
            if isinstance(reader, openai_chat.ChatReader):
                for produced in reader.finish():
                    yield produced
        except openai.APIError as error:
            reply.fail("error", error_text(self.name, error))
