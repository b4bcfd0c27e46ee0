"""Which module speaks a model's API: the one table the request preview, the provider factory
and the OpenAI provider choose by, so a preview shows exactly the request."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from pi_lsp.providers.base import ModelRequest
from pi_lsp.providers.registry import ANTHROPIC_API, CHAT_API, RESPONSES_API, SUPPORTED_APIS

# Each module has `request_params(request)` and `SDK`, the client that sends its requests;
# the OpenAI ones also `endpoint(client)` and `reader(reply, model)`.
WIRE_MODULES = {ANTHROPIC_API: "anthropic", CHAT_API: "openai_chat",
                RESPONSES_API: "openai_responses"}


class UnknownProviderError(ValueError):
    """A provider nobody configured, or one whose wire format pi-lsp does not speak."""


def wire_for(api: str, who: str) -> ModuleType:
    """The module for `api`, imported when first needed (the Anthropic SDK is slow to load)."""
    name = WIRE_MODULES.get(api)
    if name is None:
        raise UnknownProviderError(f"{who} uses api {api!r}; pi-lsp speaks "
                                   f"{', '.join(SUPPORTED_APIS)}")
    return importlib.import_module(f"pi_lsp.providers.{name}")


def request_params(request: ModelRequest) -> dict[str, Any]:
    """The request body a provider sends for `request` (streaming aside)."""
    model = request.model
    params: dict[str, Any] = wire_for(model.api, f"model {model.provider}/{model.id}"
                                      ).request_params(request)
    return params
