"""Settings from `~/.pi/agent/settings.json` and the project's `.pi/settings.json` (it wins)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec

from pi_lsp.agent.retry import RetrySettings
from pi_lsp.jsonfile import read_object
from pi_lsp.providers.models_file import ModelsFileError, load_models, models_files
from pi_lsp.providers.registry import (
    DEFAULT_MODEL,
    DEFAULT_SUMMARY_MODEL,
    ModelInfo,
    ModelRegistry,
    ProviderConfig,
)
from pi_lsp.session.catalog import agent_dir
from pi_lsp.summarize.compaction import CompactionSettings


class SettingsError(Exception):
    """A settings file that cannot be used; the message names the file and the field."""


class BranchSummarySettings(msgspec.Struct, rename="camel"):
    reserve_tokens: int = 16384


class Settings(msgspec.Struct, rename="camel", omit_defaults=True):
    default_provider: str = "anthropic"
    default_model: str = DEFAULT_MODEL
    default_thinking_level: str = "off"
    api_keys: dict[str, str] = msgspec.field(default_factory=dict)
    models: list[ModelInfo] = msgspec.field(default_factory=list)
    allow_writes_outside_workspace: bool = False
    compaction: CompactionSettings = msgspec.field(default_factory=CompactionSettings)
    branch_summary: BranchSummarySettings = msgspec.field(default_factory=BranchSummarySettings)
    summary_model: str | None = f"anthropic/{DEFAULT_SUMMARY_MODEL}"  # None: extractive
    retry: RetrySettings = msgspec.field(default_factory=RetrySettings)
    # From pi's models.json files, not from settings.json.
    providers: list[ProviderConfig] = msgspec.field(default_factory=list)

    def api_key(self, provider: str) -> str | None:
        variable = API_KEY_VARIABLES.get(provider)
        if variable and os.environ.get(variable):
            return os.environ[variable]
        return self.api_keys.get(provider)

    def registry(self) -> ModelRegistry:
        """Built-in models, then models.json's, then the ones settings.json adds."""
        return ModelRegistry(self.models, self.providers)


API_KEY_VARIABLES = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}


def settings_files(workspace: Path) -> list[Path]:
    return [agent_dir() / "settings.json", workspace / ".pi" / "settings.json"]


def settings_stamp(workspace: Path) -> tuple[int | None, ...]:
    """When each settings and models file last changed (None: absent), to notice edits."""
    stamps: list[int | None] = []
    for path in [*settings_files(workspace), *models_files(workspace)]:
        try:
            stamps.append(path.stat().st_mtime_ns)
        except OSError:
            stamps.append(None)
    return tuple(stamps)


def load_settings(workspace: Path) -> Settings:
    merged: dict[str, Any] = {}
    for path in settings_files(workspace):
        for key, value in read_object(path, "settings", SettingsError).items():
            if isinstance(value, dict) and isinstance(merged.get(key), dict):
                merged[key] = {**merged[key], **value}  # nested sections merge key by key
            else:
                merged[key] = value
    merged.pop("providers", None)
    try:
        settings = msgspec.convert(merged, Settings)
    except msgspec.ValidationError as error:
        raise SettingsError(f"settings ({', '.join(map(str, settings_files(workspace)))}): "
                            f"{error}") from None
    try:
        models, providers = load_models(workspace)
    except ModelsFileError as error:
        raise SettingsError(str(error)) from None
    settings.models = [*models, *settings.models]
    settings.providers = providers
    return settings
