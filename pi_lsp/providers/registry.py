"""Known models and providers: built-in ones, pi's models.json, and models a user's settings add."""

from __future__ import annotations

from typing import Literal

import msgspec

ANTHROPIC_API = "anthropic-messages"
CHAT_API = "openai-completions"
RESPONSES_API = "openai-responses"
SUPPORTED_APIS = (ANTHROPIC_API, CHAT_API, RESPONSES_API)


class Price(msgspec.Struct, rename="camel"):
    """US dollars per million tokens."""

    input: float
    output: float
    cache_read: float
    cache_write: float


class Compat(msgspec.Struct, rename="camel", omit_defaults=True):
    """pi's `compat` flags for OpenAI-compatible servers; None means "detect from the server"."""

    supports_store: bool | None = None
    supports_developer_role: bool | None = None
    supports_reasoning_effort: bool | None = None
    supports_usage_in_streaming: bool | None = None
    supports_strict_mode: bool | None = None
    max_tokens_field: Literal["max_completion_tokens", "max_tokens"] | None = None
    requires_tool_result_name: bool | None = None
    requires_thinking_as_text: bool | None = None

    def over(self, base: Compat) -> Compat:
        """These flags, with `base` filling the ones left unset."""
        fields = {name: getattr(self, name) if getattr(self, name) is not None
                  else getattr(base, name) for name in self.__struct_fields__}
        return Compat(**fields)


class ModelInfo(msgspec.Struct, rename="camel"):
    provider: str
    id: str
    context_window: int
    max_tokens: int
    price: Price
    reasoning: bool = True
    api: str = ANTHROPIC_API
    name: str | None = None
    input: list[str] = msgspec.field(default_factory=lambda: ["text"])
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    compat: Compat = msgspec.field(default_factory=Compat)


class ProviderConfig(msgspec.Struct):
    """How to reach a provider: its endpoint, wire format, key and extra headers."""

    name: str
    api: str
    base_url: str | None = None
    api_key: str | None = None  # as written: a literal, an environment variable name, or !command
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    source: str = "built in"  # the file that configured it, for error messages
    # From a project's models.json: the key and headers are sent as written, and when it
    # changed where requests go the user's own key (environment, apiKeys) is not sent.
    literal_key: bool = False
    literal_headers: bool = False
    user_key: bool = True


def _claude(model_id: str, window: int, max_tokens: int, input_price: float,
            output_price: float) -> ModelInfo:
    # Anthropic bills cache reads at a tenth of input and five-minute cache writes at 1.25x.
    price = Price(input_price, output_price, input_price / 10, input_price * 1.25)
    return ModelInfo("anthropic", model_id, window, max_tokens, price, input=["text", "image"])


def _gpt(model_id: str, window: int, max_tokens: int, input_price: float, output_price: float,
         cached_price: float, reasoning: bool) -> ModelInfo:
    return ModelInfo("openai", model_id, window, max_tokens,
                     Price(input_price, output_price, cached_price, 0), reasoning=reasoning,
                     api=RESPONSES_API, input=["text", "image"])


BUILT_IN: tuple[ModelInfo, ...] = (
    _claude("claude-opus-4-6", 200_000, 128_000, 5, 25),
    _claude("claude-sonnet-4-6", 200_000, 64_000, 3, 15),
    _claude("claude-opus-4-5", 200_000, 64_000, 5, 25),
    _claude("claude-sonnet-4-5", 200_000, 64_000, 3, 15),
    _claude("claude-haiku-4-5", 200_000, 64_000, 1, 5),
    _claude("claude-opus-4-1", 200_000, 32_000, 15, 75),
    _claude("claude-sonnet-4", 200_000, 64_000, 3, 15),
    _gpt("gpt-5", 400_000, 128_000, 1.25, 10, 0.125, reasoning=True),
    _gpt("gpt-5-mini", 400_000, 128_000, 0.25, 2, 0.025, reasoning=True),
    _gpt("gpt-4.1", 1_047_576, 32_768, 2, 8, 0.5, reasoning=False),
)
BUILT_IN_PROVIDERS: tuple[ProviderConfig, ...] = (
    ProviderConfig("anthropic", ANTHROPIC_API),
    ProviderConfig("openai", RESPONSES_API, "https://api.openai.com/v1"),
)
DEFAULT_MODEL = "claude-sonnet-4-5"
DEFAULT_SUMMARY_MODEL = "claude-haiku-4-5"
DEFAULT_CONTEXT_WINDOW = 128_000
DEFAULT_MAX_TOKENS = 16_384


class ModelRegistry:
    def __init__(self, extra: list[ModelInfo] | None = None,
                 providers: list[ProviderConfig] | None = None) -> None:
        self._models = {(m.provider, m.id): m for m in (*BUILT_IN, *(extra or []))}
        self._providers = {p.name: p for p in (*BUILT_IN_PROVIDERS, *(providers or []))}

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
        config = self._providers.get(provider)
        return ModelInfo(provider, model_id, DEFAULT_CONTEXT_WINDOW, DEFAULT_MAX_TOKENS,
                         Price(0, 0, 0, 0), reasoning=config is None or config.api == ANTHROPIC_API,
                         api=config.api if config else ANTHROPIC_API)

    def provider(self, name: str) -> ProviderConfig | None:
        return self._providers.get(name)

    def all(self) -> list[ModelInfo]:
        return list(self._models.values())
