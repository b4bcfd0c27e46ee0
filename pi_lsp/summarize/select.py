"""Which summarizer a workspace gets: its summary model, or the extractive one offline."""

from __future__ import annotations

from pi_lsp.providers.base import MissingApiKeyError
from pi_lsp.providers.factory import provider_factory
from pi_lsp.providers.registry import ModelRegistry
from pi_lsp.settings import Settings
from pi_lsp.summarize.extractive import ExtractiveSummarizer
from pi_lsp.summarize.summarizer import ModelSummarizer, Summarizer


def choose_summarizer(settings: Settings, registry: ModelRegistry | None = None,
                      base_url: str | None = None) -> Summarizer:
    """The configured summary model when its provider is set up with a key, else the
    extractive summarizer."""
    provider, _, model_id = (settings.summary_model or "").partition("/")
    registry = registry or settings.registry()
    if not model_id or registry.provider(provider) is None:
        return ExtractiveSummarizer()
    try:
        made = provider_factory(registry, settings.api_key, base_url,
                                settings.retry.provider)(provider)
    except (MissingApiKeyError, ValueError):
        return ExtractiveSummarizer()
    model = registry.get(provider, model_id)
    return ModelSummarizer(made, model)
