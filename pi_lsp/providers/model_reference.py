"""A model named on the command line, `PROVIDER/ID[:LEVEL]`, read as pi 1.6 reads `--model`
(model-resolver.js, resolveCliModel): a known id first, else a thinking level after it."""

from __future__ import annotations

from pi_lsp.providers.registry import ModelRegistry
from pi_lsp.session.entries import THINKING_LEVELS


def split_level(text: str) -> tuple[str, str] | None:
    """`text` as its id and the level after its last colon; None when no level ends it
    (levels are lower-case: `:HIGH`, `:7b` stay part of the id)."""
    base, colon, suffix = text.rpartition(":")
    return (base, suffix) if colon and suffix in THINKING_LEVELS else None


def known_id(registry: ModelRegistry, provider: str, text: str) -> str | None:
    """The catalog id `text` names, level suffixes taken off until one is known (`x:7b:low`
    is `x:7b`); the whole text first, so an id that ends in a level stays whole."""
    if registry.find(provider, text) is not None:
        return text
    split = split_level(text)
    return known_id(registry, provider, split[0]) if split else None


def model_and_level(registry: ModelRegistry, provider: str, text: str, thinking: str | None
                    ) -> tuple[str, str | None]:
    """The model id and thinking level `--model PROVIDER/TEXT` with `--thinking` (or None)
    asks for. `--thinking` wins over a suffix; beside it, an id the catalog lacks keeps its
    suffix (pi sends `custom:high` then), and without it the suffix is the level."""
    known = known_id(registry, provider, text)
    split = split_level(text)
    if known is not None:
        return known, thinking or (split[1] if known != text and split else None)
    if split is None or thinking:
        return text, thinking
    return split[0], split[1]
