"""Which summarizer a workspace gets: its summary model, or the extractive one offline."""

from __future__ import annotations

from pi_lsp.providers.anthropic import AnthropicProvider
from pi_lsp.providers.registry import ModelRegistry
from pi_lsp.settings import Settings
from pi_lsp.summarize.extractive import ExtractiveSummarizer
from pi_lsp.summarize.summarizer import ModelSummarizer, Summarizer


def choose_summarizer(settings: Settings, registry: ModelRegistry | None = None,
                      base_url: str | None = None) -> Summarizer:
    """The configured summary model when its API key is set, else the extractive summarizer."""
    provider, _, model_id = (settings.summary_model or "").partition("/")
    key = settings.api_key(provider)
    if provider != "anthropic" or not model_id or not key:
        return ExtractiveSummarizer()
    model = (registry or ModelRegistry(settings.models)).get(provider, model_id)
    return ModelSummarizer(AnthropicProvider(key, base_url=base_url), model)
