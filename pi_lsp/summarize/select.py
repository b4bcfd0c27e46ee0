"""Which summarizer a workspace gets: its summary model, or the extractive one offline."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from pi_lsp.providers.base import MissingApiKeyError
from pi_lsp.providers.factory import provider_factory
from pi_lsp.providers.models_file import ModelsFileError
from pi_lsp.providers.registry import ModelRegistry
from pi_lsp.settings import Settings
from pi_lsp.summarize.extractive import ExtractiveSummarizer
from pi_lsp.summarize.summarizer import (
    ModelSummarizer,
    Summarizer,
    Summary,
    SummaryError,
    SummaryRequest,
)


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
    except ModelsFileError as error:  # a key or header set but unreadable, as a turn says
        raise SummaryError(f"summaryModel {settings.summary_model}: {error}") from None
    except (MissingApiKeyError, ValueError):  # no key it may use, or nowhere to send it
        return ExtractiveSummarizer()
    model = registry.get(provider, model_id)
    return ModelSummarizer(made, model, settings.retry)


class ChosenSummarizer:
    """`choose_summarizer`'s pick, made at the first summary and off the event loop: a model
    summarizer imports its provider's SDK (seconds), and any command makes a harness."""

    def __init__(self, choose: Callable[[], Summarizer]) -> None:
        self._choose = choose
        self._chosen: Summarizer | None = None
        self._making: asyncio.Future[Summarizer] | None = None

    @property
    def extractive(self) -> bool:
        """The pick's; read before any summary, the pick is made here, on the caller's thread."""
        if self._chosen is None:
            self._chosen = self._choose()
        return self._chosen.extractive

    async def summarize(self, request: SummaryRequest) -> Summary:
        """The pick's summary, the pick made first in a worker thread (its key's `!command`
        may wait seconds for a password manager)."""
        if self._chosen is None:
            if self._making is None:  # one making: a summary asked for meanwhile waits for it
                self._making = asyncio.ensure_future(asyncio.to_thread(self._choose))
                self._making.add_done_callback(self._made)
            # Shielded: an aborted summary leaves the pick to the next, not to be made again.
            self._chosen = await asyncio.shield(self._making)
        return await self._chosen.summarize(request)

    def _made(self, done: asyncio.Future[Summarizer]) -> None:
        self._making = None
        if not done.cancelled() and done.exception() is None:
            self._chosen = done.result()  # kept though every waiter was cancelled
