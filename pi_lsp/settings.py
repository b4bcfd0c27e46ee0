"""Settings from `~/.pi/agent/settings.json` and, in a trusted folder, the project's
`.pi/settings.json` (it wins for the keys a project may set)."""

from __future__ import annotations

import logging
import os
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import msgspec

from pi_lsp.agent.retry import RetrySettings
from pi_lsp.jsonfile import read_object
from pi_lsp.providers.auth_file import AuthFileError, Credentials, auth_path, load_credentials
from pi_lsp.providers.base import BlankApiKeyError
from pi_lsp.providers.factory import has_key
from pi_lsp.providers.header_values import blank
from pi_lsp.providers.initial import initial_model
from pi_lsp.providers.models_file import (
    BODY_COMPAT,
    BODY_FIELDS,
    ModelsFileError,
    load_models,
    models_files,
    no_lone_surrogate,
    provider_key,
)
from pi_lsp.providers.registry import (
    API_KEY_VARIABLES,
    DEFAULT_SUMMARY_MODEL,
    ModelInfo,
    ModelRegistry,
    ProviderConfig,
)
from pi_lsp.providers.thinking import clamped_level
from pi_lsp.session.catalog import agent_dir
from pi_lsp.session.entries import DEFAULT_THINKING_LEVEL
from pi_lsp.session.jsontext import convert
from pi_lsp.summarize.compaction import CompactionSettings
from pi_lsp.trust import project_files, trust_path

log = logging.getLogger(__name__)


class SettingsError(Exception):
    """A settings file that cannot be used; the message names the file and the field."""


class BranchSummarySettings(msgspec.Struct, rename="camel"):
    reserve_tokens: int = 16384


class ImageSettings(msgspec.Struct, rename="camel"):
    auto_resize: bool = True  # False: images are sent at their own size, as pi 1.6 sends them


class Settings(msgspec.Struct, rename="camel", omit_defaults=True):
    default_provider: str = "anthropic"
    default_model: str | None = None  # None: pi's choice (initial_model)
    default_thinking_level: str | None = None
    model_thinking_levels: dict[str, str] = msgspec.field(default_factory=dict)
    api_keys: dict[str, str] = msgspec.field(default_factory=dict)
    models: list[ModelInfo] = msgspec.field(default_factory=list)
    allow_writes_outside_workspace: bool = False
    compaction: CompactionSettings = msgspec.field(default_factory=CompactionSettings)
    branch_summary: BranchSummarySettings = msgspec.field(default_factory=BranchSummarySettings)
    summary_model: str | None = f"anthropic/{DEFAULT_SUMMARY_MODEL}"  # None: extractive
    retry: RetrySettings = msgspec.field(default_factory=RetrySettings)
    images: ImageSettings = msgspec.field(default_factory=ImageSettings)
    # From pi's models.json files, not from settings.json.
    providers: list[ProviderConfig] = msgspec.field(default_factory=list)
    # Whether the project's own `.pi/` files were loaded (its folder trusted): the prompt's
    # SYSTEM.md and APPEND_SYSTEM.md follow. Set by load_settings, never from a file.
    project_trusted: bool = False
    # What pi's /login saved (auth.json), not from settings.json.
    credentials: Credentials = msgspec.field(default_factory=Credentials)

    def api_key(self, provider: str, run: bool = True) -> str | None:
        """The user's key for `provider`, in pi 1.6's order: auth.json's (a saved key owns its
        provider), then your models.json's `apiKey`, then the environment's, then settings'
        `apiKeys` (pi-lsp's own). A models.json key that cannot be read is a ModelsFileError,
        as pi fails then too (any file's key holding a lone surrogate a LoneSurrogateError);
        a saved key of only whitespace a BlankApiKeyError. Without `run`, a `!command` key is
        its command, not run."""
        saved = self.credentials.api_key(provider, run)
        if saved and blank(saved):
            raise BlankApiKeyError(provider, auth_path())
        if saved:
            return saved
        own = self._own_models_key(provider, run)
        if own:
            return own
        variable = API_KEY_VARIABLES.get(provider)
        if variable and os.environ.get(variable):
            return os.environ[variable]
        key = self.api_keys.get(provider)
        where = f"{agent_dir() / 'settings.json'}: apiKeys.{provider}"
        return key and no_lone_surrogate(key, where)

    def _own_models_key(self, provider: str, run: bool) -> str | None:
        """Your own models.json's `apiKey` for `provider` (a project's comes after your keys:
        pi reads none, and a repository must not swap your key for its own)."""
        config = next((c for c in self.providers if c.name == provider), None)
        if config is None or config.literal_key or not config.user_key:
            return None
        return provider_key(config, run)

    def oauth_login(self, provider: str) -> bool:
        """Whether pi has an OAuth login for `provider`, which pi-lsp cannot refresh or use."""
        return provider in self.credentials.oauth

    @property
    def resume_thinking_level(self) -> str:
        """The level a session that sets none thinks at (pi resumes it so): the default set,
        else medium."""
        return self.default_thinking_level or DEFAULT_THINKING_LEVEL

    def thinking_level_for(self, provider: str, model_id: str) -> str | None:
        """The level pi switches to with a model: the model's own (`modelThinkingLevels`),
        else the default set; None: neither is set (the level stays)."""
        return self.model_thinking_levels.get(f"{provider}/{model_id}",
                                              self.default_thinking_level)

    def new_session_thinking_level(self, model: ModelInfo) -> str:
        """The level pi starts a session with: the model's own, else the default set, else
        medium; clamped to the model."""
        return clamped_level(model, self.thinking_level_for(model.provider, model.id)
                             or DEFAULT_THINKING_LEVEL)

    def initial_model(self) -> tuple[str, str]:
        """The model a session starts on when none is asked for, as pi 1.6 chooses it: the
        saved default where its provider has a key, else the first provider's with one."""
        registry = self.registry()
        saved = (self.default_provider, self.default_model) if self.default_model else None
        return initial_model(registry, lambda name: self._has_key(registry, name), saved)

    def available_models(self) -> list[ModelInfo]:
        """The models whose provider has a key, in the catalog's order (pi 1.6's
        getAvailable, which its model selector lists)."""
        registry = self.registry()
        usable = cache(lambda name: self._has_key(registry, name))  # once a provider
        return [model for model in registry.all() if usable(model.provider)]

    def _has_key(self, registry: ModelRegistry, provider: str) -> bool:
        """Whether `provider` has a key, a `!command` one counted without running it: pi's
        check does not run it, and a password manager must not ask for a provider not used."""
        return has_key(registry, lambda name: self.api_key(name, run=False), provider)

    def registry(self) -> ModelRegistry:
        """Built-in models, then models.json's, then the ones settings.json adds; the
        variables auth.json's keys name are keys too."""
        return ModelRegistry(self.models, self.providers, self.credentials.variables())


# What a project's `.pi/settings.json` may set. Keys, permissions, trust and where sessions go
# (`apiKeys`, `allowWritesOutsideWorkspace`, `defaultProjectTrust`, ...) are the user's alone.
PROJECT_KEYS = frozenset({"defaultProvider", "defaultModel", "defaultThinkingLevel",
                          "modelThinkingLevels",
                          "compaction", "branchSummary", "summaryModel", "models", "retry",
                          "images"})


# Fields load_settings fills from other files, never from a settings.json.
COMPUTED = ("providers", "projectTrusted", "credentials")

# Keys pi-lsp reads that only the user's settings.json may set (others it does not read).
USER_KEYS = frozenset({f.encode_name for f in msgspec.structs.fields(Settings)} - PROJECT_KEYS -
                      set(COMPUTED) | {"defaultProjectTrust"})


def settings_files(workspace: Path) -> list[Path]:
    return [agent_dir() / "settings.json", workspace / ".pi" / "settings.json"]


# When each settings, models, trust and auth file last changed (None: absent), and which project
# files trust is asked about are there.
SettingsStamp = tuple[tuple[int | None, ...], tuple[str, ...]]


def settings_stamp(workspace: Path) -> SettingsStamp:
    """What settings, keys and trust were decided from, to notice edits (pi's /trust and
    /login included) and project files that appear: a folder trusted for having none is no
    longer trusted then."""
    stamps: list[int | None] = []
    for path in [*settings_files(workspace), *models_files(workspace), trust_path(),
                 auth_path()]:
        try:
            stamps.append(path.stat().st_mtime_ns)
        except OSError:
            stamps.append(None)
    return tuple(stamps), tuple(project_files(workspace))


def load_settings(workspace: Path, *, project: bool) -> Settings:
    """The user's settings, with the project's `.pi/settings.json` and `.pi/models.json` over
    them when `project` (a trusted folder); a project file sets only PROJECT_KEYS."""
    user, project_file = settings_files(workspace)
    merged = read_object(user, "settings", SettingsError)
    own = _project_settings(project_file) if project else {}
    for key, value in own.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}  # nested sections merge key by key
        else:
            merged[key] = value
    for computed in COMPUTED:
        merged.pop(computed, None)
    if "defaultModel" not in merged:
        # pi 1.6 takes a saved provider only with its model (findInitialModel); paired with
        # the built-in model, `"defaultProvider": "openai"` sent claude-opus-5-5 to OpenAI.
        merged.pop("defaultProvider", None)
    merged["images"] = {"autoResize": _auto_resize(merged.get("images"))}
    try:
        settings: Settings = convert(merged, Settings)
    except msgspec.ValidationError as error:
        files = [user, project_file] if project else [user]
        raise SettingsError(f"settings ({', '.join(map(str, files))}): {error}") from None
    try:
        models, providers = load_models(workspace, project=project)
    except ModelsFileError as error:
        raise SettingsError(str(error)) from None
    added = _settings_models(settings.models, project_file if "models" in own else user)
    settings.models = [*models, *added]
    settings.providers = providers
    settings.project_trusted = project
    try:
        settings.credentials = load_credentials()
    except AuthFileError as error:
        raise SettingsError(str(error)) from None
    return settings


def _settings_models(models: list[ModelInfo], written_in: Path) -> list[ModelInfo]:
    """settings.json's `models` (`written_in` that file) as the registry holds them: header
    values sent as written (a project's could otherwise be read as templates), and named by
    the file and key path where one cannot be sent."""
    # own_url: a project's settings.json may name any URL, which your key would go to.
    return [msgspec.structs.replace(model, resolve_headers=False, own_url=None,
                                    headers_where=f"{written_in}: models[{index}].headers")
            for index, model in enumerate(models)]


def _auto_resize(images: Any) -> bool:
    """`images.autoResize` as pi 1.6 reads it, whatever the files hold: `images?.autoResize ??
    true` taken as a condition (pi validates neither, so no value refuses your commands)."""
    value = images.get("autoResize") if isinstance(images, dict) else None
    # JavaScript's falsy JSON values: false, 0 and "" (null is `?? true`); "false" is truthy.
    return value is None or value not in (0, "")


def _project_settings(path: Path) -> dict[str, Any]:
    """The keys a project's settings.json may set; the others are left out (and those pi-lsp
    reads are logged)."""
    data = read_object(path, "settings", SettingsError)
    ignored = sorted(set(data) & USER_KEYS)
    models = data.get("models")
    if isinstance(models, list):
        ignored += sorted({name for model in models for name in _body_fields_in(model)})
        data["models"] = [_project_model(model) for model in models]
    if ignored:
        _log_ignored(str(path), tuple(ignored))
    return {key: value for key, value in data.items() if key in PROJECT_KEYS}


def _body_fields_in(model: Any) -> list[str]:
    """What a project's `models` entry would lay into requests sent with your key as written
    (`samplingParams`: any field, `n` or `store`; `openRouterRouting`: your data policy; the
    rest of BODY_COMPAT)."""
    if not isinstance(model, dict):
        return []
    compat = model.get("compat")
    flags = [flag for flag in BODY_COMPAT if isinstance(compat, dict) and flag in compat]
    return [f"models[].{key}" for key in BODY_FIELDS if key in model] + \
        [f"models[].compat.{flag}" for flag in flags]


def _project_model(model: Any) -> Any:
    """A project's `models` entry without what `_body_fields_in` names."""
    if not _body_fields_in(model):
        return model  # a model of another type too: the schema names what is wrong
    kept = {key: value for key, value in model.items() if key not in BODY_FIELDS}
    if isinstance(kept.get("compat"), dict):
        kept["compat"] = {key: value for key, value in kept["compat"].items()
                          if key not in BODY_COMPAT}
    return kept


@lru_cache(maxsize=64)  # once per file and set of keys, not at every load
def _log_ignored(path: str, keys: tuple[str, ...]) -> None:
    log.warning("%s: %s left out: only your own settings.json may set %s", path,
                ", ".join(keys), "them" if len(keys) > 1 else "it")
