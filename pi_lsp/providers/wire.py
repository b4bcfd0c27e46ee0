"""What a provider sends for a request, by the model's API: the same functions the providers
call, so a preview shows exactly the request."""

from __future__ import annotations

from typing import Any

from pi_lsp.providers import openai_chat, openai_responses
from pi_lsp.providers.base import ModelRequest
from pi_lsp.providers.registry import ANTHROPIC_API, CHAT_API, RESPONSES_API, SUPPORTED_APIS


def request_params(request: ModelRequest) -> dict[str, Any]:
    """The request body a provider sends for `request` (streaming aside)."""
    api = request.model.api
    if api == ANTHROPIC_API:
        from pi_lsp.providers import anthropic  # with its SDK, kept off the server's start

        return anthropic.request_params(request)
    if api == CHAT_API:
        return openai_chat.request_params(request)
    if api == RESPONSES_API:
        return openai_responses.request_params(request)
    raise ValueError(f"model {request.model.provider}/{request.model.id} uses api {api!r}; "
                     f"pi-lsp speaks {', '.join(SUPPORTED_APIS)}")
