"""What an editor may set (initialization options, `workspace/didChangeConfiguration`)."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from pi_lsp.providers.base_url import url_problem
from pi_lsp.session.jsontext import has_surrogate, surrogate_error


class Config(msgspec.Struct, rename="camel", omit_defaults=True, forbid_unknown_fields=True):
    session_dirs: list[str] = msgspec.field(default_factory=list)
    model: str | None = None  # PROVIDER/ID for new sessions
    summary_model: str | None = None
    thinking_level: str | None = None
    tool_approval: Literal["ask", "auto"] = "ask"
    durable_leaf_moves: bool = True
    auto_compaction: bool = True
    anthropic_api_key: str | None = None
    anthropic_base_url: str | None = None
    diagnostics_feedback: bool = True
    # The editor's own trust of the window (VS Code's workspace.isTrusted): false is
    # Restricted Mode, where a folder's .pi/ files are never loaded; None, no decision.
    workspace_trusted: bool | None = None

    def __post_init__(self) -> None:
        if any("\0" in folder for folder in self.session_dirs):  # every listing would fail on it
            raise ValueError("a folder name with a NUL character")
        if any(map(has_surrogate, self.session_dirs)):  # so would it here (no UTF-8 name)
            raise ValueError("a folder name with a lone surrogate, which no folder's name holds")
        if self.anthropic_base_url and (problem := url_problem(self.anthropic_base_url)):
            raise ValueError(problem)
        if self.anthropic_api_key and has_surrogate(self.anthropic_api_key):
            raise ValueError("a lone surrogate, which cannot be sent in an HTTP header")


def read_config(raw: Any) -> tuple[Config, list[str]]:
    """The editor's settings, under `piLsp` or at the top, and what was refused (the key and
    why). A wrong value is refused alone and its key keeps its default: one bad value in a
    repository's .vscode/settings.json must not drop the others (`workspaceTrusted: false`)."""
    if isinstance(raw, dict) and isinstance(raw.get("piLsp"), dict):
        raw = raw["piLsp"]
    if not raw:
        return Config(), []
    if not isinstance(raw, dict):
        return Config(), [f"the settings must be an object, not {type(raw).__name__}"]
    taken: dict[str, Any] = {}
    refused: list[str] = []
    for key, value in raw.items():
        try:
            msgspec.convert({key: value}, Config)
        except msgspec.ValidationError as error:
            refused.append(f"`{key}`: {error}")
        except UnicodeEncodeError:  # in a key or a literal: msgspec cannot say where
            refused.append(f"`{key}`: {surrogate_error({key: value}, Config)}")
        else:
            taken[key] = value
    return msgspec.convert(taken, Config), refused
