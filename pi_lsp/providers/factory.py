"""The provider for a provider name: built in (anthropic, openai) or from pi's models.json."""

from __future__ import annotations

from collections.abc import Callable

from pi_lsp.environment import node_variable
from pi_lsp.providers.base import BlankApiKeyError, MissingApiKeyError, Provider
from pi_lsp.providers.base_url import url_problem
from pi_lsp.providers.header_values import with_bearer
from pi_lsp.providers.models_file import (
    BODY_COMPAT,
    ROUTING_FIELDS,
    LoneSurrogateError,
    ModelsFileError,
    provider_key,
    resolve_headers,
)
from pi_lsp.providers.registry import SUPPORTED_APIS, ModelRegistry, ProviderConfig
from pi_lsp.providers.retry import ProviderRetry
from pi_lsp.providers.wire import UnknownProviderError as UnknownProviderError
from pi_lsp.providers.wire import wire_for
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
            fields = ", ".join([*ROUTING_FIELDS, "samplingParams", *BODY_COMPAT])
            raise RedirectedKeyError(
                f"provider {name!r}: {config.source} changes where its requests go or what "
                f"they carry (one of {fields}), so your own API key is not sent there; give "
                f"it an apiKey in that file, or trust only files that leave {name} alone")
        headers = resolve_headers(config.headers, f"{where}.headers", config.literal_headers)
        if config.auth_header:
            headers = with_bearer(headers, key)
        # The SDKs are imported when a provider is first made: they are most of the server's
        # start-up otherwise, and an editor waits for that to show anything.
        if sdk == "anthropic":
            from pi_lsp.providers.anthropic import AnthropicProvider

            editors = anthropic_base_url if name == "anthropic" else None
            # The editor's as Node's URL reads it, as models.json's are (load_models).
            base_url = js_utf8(editors) if editors else config.base_url
            set_in = "the editor's anthropicBaseUrl" if editors else \
                f"{where}.baseUrl" if base_url else "ANTHROPIC_BASE_URL"
            if base_url is None:
                base_url = _environment_url()
            return _reachable(lambda: AnthropicProvider(key, base_url=base_url, retry=retry,
                                                        headers=headers, name=name), set_in)
        from pi_lsp.providers.openai_api import OpenAIProvider

        return _reachable(lambda: OpenAIProvider(name, key, config.base_url, headers, retry),
                          f"{where}.baseUrl")
    return make


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
