"""The provider for a provider name: built in (anthropic, openai) or from pi's models.json."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable

from pi_lsp.environment import node_variable
from pi_lsp.providers.base import (
    BlankApiKeyError,
    MissingApiKeyError,
    ModelRequest,
    Provider,
    ProviderEvent,
    ReplyBuilder,
)
from pi_lsp.providers.base_url import url_problem
from pi_lsp.providers.header_values import with_bearer
from pi_lsp.providers.models_file import (
    BODY_COMPAT,
    MODEL_ROUTING_FIELDS,
    ROUTING_FIELDS,
    LoneSurrogateError,
    ModelsFileError,
    provider_key,
    resolve_headers,
)
from pi_lsp.providers.registry import (
    OPENROUTER,
    SUPPORTED_APIS,
    ModelRegistry,
    ProviderConfig,
    openrouter_defaults,
)
from pi_lsp.providers.retry import ProviderRetry
from pi_lsp.providers.wire import WIRE_MODULES, wire_for
from pi_lsp.providers.wire import UnknownProviderError as UnknownProviderError
from pi_lsp.session.catalog import agent_dir
from pi_lsp.session.jsontext import js_utf8


class RedirectedKeyError(UnknownProviderError):
    """A provider a project file sends elsewhere, which has no key of its own there."""


class BaseUrlError(UnknownProviderError):
    """A base URL that requests cannot go to; names where it was set."""


def _environment_url() -> str | None:
    """ANTHROPIC_BASE_URL, which the Anthropic SDK reads without a base URL of its own, as
    Node reads it (os.environ's lone surrogate for a byte that is not UTF-8 cannot be sent);
    checked here, as models.json's are where they are read."""
    from_environment = node_variable("ANTHROPIC_BASE_URL") or None
    if from_environment and (problem := url_problem(from_environment)):
        raise BaseUrlError(f"ANTHROPIC_BASE_URL: {problem}")
    return from_environment


def _no_login(_name: str) -> bool:
    return False


def provider_factory(registry: ModelRegistry, settings_key: Callable[[str], str | None],
                     anthropic_base_url: str | None = None, retry: ProviderRetry | None = None,
                     *, oauth_login: Callable[[str], bool] = _no_login
                     ) -> Callable[[str], Provider]:
    """Makes providers by name; the key comes from settings (auth.json, your models.json,
    environment, `apiKeys`) first, then from a project's models.json `apiKey` (see
    `load_models` for what a project file gets); `retry` is settings' `retry.provider`;
    `oauth_login` tells the providers pi has an OAuth login for, which a missing key's error
    names."""

    def make(name: str) -> Provider:
        config = _config(registry, name)
        sdk = wire_for(config.api, f"provider {name!r} ({config.source})").SDK
        where = f"{config.source}: providers.{name}"
        key = _key(config, settings_key)
        if not (key or "").strip() and config.user_key and oauth_login(name):
            raise MissingApiKeyError(name, True)
        if not key and not config.user_key:
            fields = ", ".join([*ROUTING_FIELDS, *MODEL_ROUTING_FIELDS, "samplingParams",
                                *BODY_COMPAT])
            raise RedirectedKeyError(
                f"provider {name!r}: {config.source} changes where its requests go or what "
                f"they carry (one of {fields}), so your own API key is not sent there; give "
                f"it an apiKey in that file, or trust only files that leave {name} alone")
        headers = resolve_headers(config.headers, f"{where}.headers", config.literal_headers)
        if config.auth_header:
            headers = with_bearer(headers, key)
        base_url, set_in = config.base_url, f"{where}.baseUrl"
        if sdk == "anthropic":
            editors = anthropic_base_url if name == "anthropic" else None
            # The editor's as Node's URL reads it, as models.json's are (load_models).
            base_url = js_utf8(editors) if editors else config.base_url
            set_in = "the editor's anthropicBaseUrl" if editors else \
                set_in if base_url else "ANTHROPIC_BASE_URL"
            if base_url is None:
                base_url = _environment_url()
        urls = {sdk: base_url, **_other_sdks(registry, config, sdk, base_url)}
        by_sdk = {each: _reachable(functools.partial(_sdk_provider, each, name, key, url,
                                                     headers, retry), set_in)
                  for each, url in urls.items()}
        # The key and headers are the provider's: a project that set a model's URL left none
        # of yours to it (load_models).
        by_url = {route: _reachable(functools.partial(_sdk_provider, *route[:1], name, key,
                                                      route[1], headers, retry), model_set_in)
                  for route, model_set_in in _model_urls(registry, name).items()}
        if len(by_sdk) == 1 and not by_url:
            return by_sdk[sdk]
        return ByApi(name, by_sdk, by_sdk[sdk], by_url)
    return make


def _model_urls(registry: ModelRegistry, name: str) -> dict[tuple[str, str], str]:
    """The clients provider `name`'s models with a baseUrl of their own need, one per SDK and
    URL (models sharing one share it), each with where that URL was set."""
    routes: dict[tuple[str, str], str] = {}
    for model in registry.all():
        if model.provider == name and model.own_url and model.api in WIRE_MODULES:
            routes.setdefault((wire_for(model.api, model.id).SDK, model.own_url),
                              f"model {name}/{model.id}: baseUrl")
    return routes


def _sdk_provider(sdk: str, name: str, key: str | None, base_url: str | None,
                  headers: dict[str, str], retry: ProviderRetry | None) -> Provider:
    """The provider `name` through `sdk`'s client."""
    # The SDKs are imported when a provider is first made: they are most of the server's
    # start-up otherwise, and an editor waits for that to show anything.
    if sdk == "anthropic":
        from pi_lsp.providers.anthropic import AnthropicProvider

        return AnthropicProvider(key, base_url=base_url, retry=retry, headers=headers,
                                 name=name)
    from pi_lsp.providers.openai_api import OpenAIProvider

    return OpenAIProvider(name, key, base_url, headers, retry)


def _other_sdks(registry: ModelRegistry, config: ProviderConfig, sdk: str, own: str | None
                ) -> dict[str, str | None]:
    """The SDKs other than `sdk` whose APIs the provider's models are on (pi gives each model
    its own `api`), each with the base URL its client sends to (`_sdk_url`; `own`: the one the
    provider's own client sends to). None where `own` is None: the other SDK's default is
    another company's host (api.openai.com for the built-in anthropic's), and the key is not
    theirs."""
    others: dict[str, str | None] = {}
    if own is None:
        return others
    for model in registry.all():
        if model.provider == config.name and model.api in WIRE_MODULES:
            other = wire_for(model.api, model.id).SDK
            if other != sdk:
                others.setdefault(other, _sdk_url(config, model.api, own))
    return others


def _sdk_url(config: ProviderConfig, api: str, own: str) -> str:
    """The provider's base URL for a client on `api`: OpenRouter's own for that API where the
    provider is at OpenRouter's own (pi 1.6 fills each model in so), else `own`, the provider's
    client's. Never a model's base_url: a project's settings.json model may name any, and the
    key is the provider's (a models.json model's own URL has a client of its own, `_model_urls`)."""
    if config.name == OPENROUTER and config.base_url == openrouter_defaults(None, config.api)[1]:
        return openrouter_defaults(None, api)[1]
    return own


class ByApi:
    """A provider whose models go through more than one client: on the APIs of both SDKs
    (OpenRouter's Claudes on Anthropic's, its others on Chat Completions), or at a baseUrl of
    their own (`by_url`, by SDK and URL); a request goes through its model's."""

    def __init__(self, name: str, by_sdk: dict[str, Provider], own: Provider,
                 by_url: dict[tuple[str, str], Provider]) -> None:
        self.name = name
        self.by_sdk = by_sdk
        self.own = own  # the provider's API's, which fails a model of an API pi-lsp lacks
        self.by_url = by_url

    def stream(self, request: ModelRequest, reply: ReplyBuilder
               ) -> AsyncIterator[ProviderEvent]:
        model = request.model
        sdk = wire_for(model.api, self.name).SDK if model.api in WIRE_MODULES else ""
        routed = self.by_url.get((sdk, model.own_url or ""))
        return (routed or self.by_sdk.get(sdk, self.own)).stream(request, reply)


def _reachable(make: Callable[[], Provider], set_in: str) -> Provider:
    """`make()`; BaseUrlError naming `set_in` where the HTTP client refuses the base URL's
    host (IDNA allows it no U+FFFD, which a lone surrogate in it reads as, nor a symbol)."""
    import httpx2  # the SDK has loaded it by now

    try:
        return make()
    except httpx2.InvalidURL as error:
        raise BaseUrlError(f"{set_in}: {error}, so no request can go there") from None


def has_key(registry: ModelRegistry, settings_key: Callable[[str], str | None], name: str
            ) -> bool:
    """Whether provider `name` has a key (pi's `hasConfiguredAuth`): configured, on an API
    pi-lsp speaks, with a key found (a `$NAME` that is unset is none)."""
    config = registry.provider(name)
    if config is None or config.api not in SUPPORTED_APIS:
        return False
    try:
        return bool(_key(config, settings_key))
    except (BlankApiKeyError, LoneSurrogateError):  # set, as pi counts it: making the
        return True  # provider says what is wrong
    except ModelsFileError:  # `$NAME` unset: the provider has no key
        return False


def _config(registry: ModelRegistry, name: str) -> ProviderConfig:
    config = registry.provider(name)
    if config is None:
        raise UnknownProviderError(
            f"provider {name!r} is not configured: add it under \"providers\" in "
            f"{agent_dir() / 'models.json'} or the project's .pi/models.json (baseUrl, api, "
            f"apiKey, models)")
    return config


def _key(config: ProviderConfig, settings_key: Callable[[str], str | None]) -> str | None:
    """The provider's key: settings' (Settings.api_key: auth.json, your models.json,
    environment, `apiKeys`) first, then what the registry's config says (a project's)."""
    key = settings_key(config.name) if config.user_key else None
    return key or provider_key(config)
