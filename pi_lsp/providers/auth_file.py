"""pi's auth.json: the API keys and OAuth logins a user saved with pi's `/login`, read as pi 1.6
reads them (auth-storage.js, pi-ai's resolveProviderAuth) and never written.

It lives only in pi's own folder (`~/.pi/agent`, or `$PI_CODING_AGENT_DIR`), never in a
project, so a key that is a `!command` is run as pi runs it (key_commands.may_run).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import msgspec

from pi_lsp.jsonfile import ABSENT, BOM
from pi_lsp.providers.key_commands import command_output, is_command, may_run
from pi_lsp.providers.models_file import (
    UnsetVariable,
    expand,
    no_lone_surrogate,
    variable_names,
)
from pi_lsp.regular import read_regular
from pi_lsp.session.catalog import agent_dir
from pi_lsp.session.jsontext import value_decoder


class AuthFileError(ValueError):
    """An auth.json that cannot be used; the message names the file and the provider, never
    a value."""


class SavedKey(msgspec.Struct, frozen=True):
    """An `api_key` entry as written: its key (a literal, a `$NAME` template or `!command`)
    and the variables it gives its templates before the environment's."""

    key: str | None
    env: dict[str, str]


class Credentials(msgspec.Struct, frozen=True):
    """What auth.json holds: keys by provider, and the providers pi has an OAuth login for."""

    keys: dict[str, SavedKey] = msgspec.field(default_factory=dict)
    oauth: frozenset[str] = frozenset()

    def __repr__(self) -> str:  # never a key in a log
        return f"Credentials(keys={sorted(self.keys)}, oauth={sorted(self.oauth)})"

    def variables(self) -> frozenset[str]:
        """The environment variables the saved keys may be read from."""
        return frozenset(name for saved in self.keys.values()
                         for name in variable_names(saved.key or ""))

    def api_key(self, provider: str, run: bool = True) -> str | None:
        """The provider's saved key resolved as pi resolves it (resolveConfigValue); None
        where there is none, or it comes to nothing (pi then reads the environment). Without
        `run`, a `!command` key is its command, not run."""
        saved = self.keys.get(provider)
        if saved is None or not saved.key:
            return None
        no_lone_surrogate(saved.key, f"{auth_path()}: {provider}.key")
        if is_command(saved.key):
            if not may_run(auth_path()):
                return None
            return command_output(saved.key) if run else saved.key
        try:
            return expand(saved.key, lambda name: self._variable(provider, name))
        except UnsetVariable:
            return None

    def _variable(self, provider: str, name: str) -> str | None:
        """The value `name` has in a template of `provider`'s saved key: the entry's `env`
        (LoneSurrogateError, naming it, where it holds a lone surrogate), else the
        environment's."""
        value = self.keys[provider].env.get(name)
        if value:
            return no_lone_surrogate(value, f"{auth_path()}: {provider}.env.{name}")
        return os.environ.get(name)


def auth_path() -> Path:
    return agent_dir() / "auth.json"


def load_credentials(path: Path | None = None) -> Credentials:
    """auth.json's API keys and OAuth logins; what pi-lsp cannot use is passed over, as pi's
    AuthStorage passes over it (a refusal would stop keys set elsewhere too)."""
    path = path or auth_path()
    keys: dict[str, SavedKey] = {}
    oauth: set[str] = set()
    for provider, entry in _entries(path).items():
        kind = entry.get("type") if isinstance(entry, dict) else None
        if kind == "api_key" and _valid_key(entry):
            keys[provider] = SavedKey(entry.get("key"), entry.get("env", {}))
        elif kind == "oauth" and _valid_login(entry):
            oauth.add(provider)
    return Credentials(keys, frozenset(oauth))


def _entries(path: Path) -> dict[str, Any]:
    """auth.json's object, read as pi's AuthStorage reads it: none for no file, an empty one
    or a value that is no object; a file that is not JSON is refused, as pi refuses it."""
    try:
        data = read_regular(path)
    except OSError as fault:
        if fault.errno in ABSENT:
            return {}
        raise AuthFileError(f"{path}: cannot read pi's credentials ({fault})") from None
    try:
        value = value_decoder.decode(data.removeprefix(BOM)) if data else {}
    except msgspec.DecodeError as fault:
        raise AuthFileError(f"{path}: cannot read pi's credentials ({fault})") from None
    except RecursionError:  # msgspec's limit on nesting: a file no one writes by hand
        raise AuthFileError(f"{path}: cannot read pi's credentials (JSON nested too deeply)"
                            ) from None
    return value if isinstance(value, dict) else {}


def _valid_key(entry: dict[str, Any]) -> bool:
    env = entry.get("env", {})  # either may be left out, neither be null
    return isinstance(entry.get("key", ""), str) and isinstance(env, dict) and all(
        isinstance(value, str) for value in env.values())


def _valid_login(entry: dict[str, Any]) -> bool:
    expires = entry.get("expires")
    return isinstance(entry.get("access"), str) and isinstance(entry.get("refresh"), str) \
        and isinstance(expires, int | float) and not isinstance(expires, bool) \
        and math.isfinite(expires)
