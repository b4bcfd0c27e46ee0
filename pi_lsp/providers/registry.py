"""Known models: context windows, output limits and prices, plus any a user's settings add."""

from __future__ import annotations

import msgspec


class Price(msgspec.Struct, rename="camel"):
    """US dollars per million tokens."""

    input: float
    output: float
    cache_read: float
    cache_write: float


class ModelInfo(msgspec.Struct, rename="camel"):
    provider: str
    id: str
    context_window: int
    max_tokens: int
    price: Price
    reasoning: bool = True


def _claude(model_id: str, window: int, max_tokens: int, input_price: float,
            output_price: float) -> ModelInfo:
    # Anthropic bills cache reads at a tenth of input and five-minute cache writes at 1.25x.
    price = Price(input_price, output_price, input_price / 10, input_price * 1.25)
    return ModelInfo("anthropic", model_id, window, max_tokens, price)


BUILT_IN: tuple[ModelInfo, ...] = (
    _claude("claude-opus-4-6", 200_000, 128_000, 5, 25),
    _claude("claude-sonnet-4-6", 200_000, 64_000, 3, 15),
    _claude("claude-opus-4-5", 200_000, 64_000, 5, 25),
    _claude("claude-sonnet-4-5", 200_000, 64_000, 3, 15),
    _claude("claude-haiku-4-5", 200_000, 64_000, 1, 5),
    _claude("claude-opus-4-1", 200_000, 32_000, 15, 75),
    _claude("claude-sonnet-4", 200_000, 64_000, 3, 15),
)
DEFAULT_MODEL = "claude-sonnet-4-5"
DEFAULT_SUMMARY_MODEL = "claude-haiku-4-5"
DEFAULT_CONTEXT_WINDOW = 128_000


class ModelRegistry:
    def __init__(self, extra: list[ModelInfo] | None = None) -> None:
        self._models = {(m.provider, m.id): m for m in (*BUILT_IN, *(extra or []))}

    def find(self, provider: str, model_id: str) -> ModelInfo | None:
        found = self._models.get((provider, model_id))
        if found is None and provider == "anthropic":
            # Dated snapshots (claude-haiku-4-5-20251001) price like their alias.
            alias = model_id.rsplit("-", 1)[0]
            found = self._models.get((provider, alias)) if model_id[-8:].isdigit() else None
        return found

    def get(self, provider: str, model_id: str) -> ModelInfo:
        """The model's facts; an unknown model gets a conservative window and no price."""
        found = self.find(provider, model_id)
        if found is not None:
            return found
        return ModelInfo(provider, model_id, DEFAULT_CONTEXT_WINDOW, 16_384, Price(0, 0, 0, 0))

    def all(self) -> list[ModelInfo]:
        return list(self._models.values())
