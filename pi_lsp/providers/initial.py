"""The model a session starts on when none is asked for, chosen as pi 1.6 chooses it
(model-resolver.js findInitialModel)."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from pi_lsp.providers.registry import DEFAULT_MODEL, DEFAULT_MODEL_PER_PROVIDER, ModelRegistry


def initial_model(registry: ModelRegistry, has_key: Callable[[str], bool],
                  saved: tuple[str, str] | None) -> tuple[str, str]:
    """The saved default (settings' `defaultProvider`/`defaultModel`, an editor's model) where
    its provider has a key; else pi's default of the first provider in its order with a key;
    else the first model with a key; where none has one, the saved default or pi's own."""
    if saved is not None and has_key(saved[0]):
        return saved
    usable = cache(has_key)  # each provider's key looked up once
    for provider, model_id in DEFAULT_MODEL_PER_PROVIDER.items():
        if registry.find(provider, model_id) is not None and usable(provider):
            return provider, model_id
    first = next((model for model in registry.all() if usable(model.provider)), None)
    if first is not None:
        return first.provider, first.id
    return saved or ("anthropic", DEFAULT_MODEL)
