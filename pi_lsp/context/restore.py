"""pi 1.6's restore of a session's model on continuing it: the model its path names, or the
default model, with a warning, where that one cannot be used (sdk.js createAgentSession). The
one home of the rule: `pi-lsp run`, an editor's turn and both request previews ask here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pi_lsp.context.projection import Projection
from pi_lsp.providers.base import MissingApiKeyError
from pi_lsp.providers.models_file import ModelsFileError
from pi_lsp.providers.registry import ModelRegistry
from pi_lsp.providers.wire import UnknownProviderError


class NoUsableModelError(ValueError):
    """Neither the session's model nor the default can be used; the message names both."""


@dataclass(frozen=True)
class ModelFallback:
    """The session's model pi 1.6 would not restore (`lost`, and why) and the default used in
    its place; `unusable`: why the default cannot be used either (None: it can)."""

    lost: tuple[str, str]
    why: str
    used: tuple[str, str]
    unusable: str | None = None

    def warning(self) -> str:
        """pi 1.6's words for it ("Could not restore model X. Using Y")."""
        return f"could not restore model {'/'.join(self.lost)}; using {'/'.join(self.used)}"

    def check(self) -> ModelFallback:
        """This fallback, or NoUsableModelError naming both models when the default cannot be
        used either (pi 1.6 goes on to a model its larger catalog orders first)."""
        if self.unusable is None:
            return self
        raise NoUsableModelError(
            f"could not restore model {'/'.join(self.lost)} ({self.why}), and the default "
            f"model {'/'.join(self.used)} cannot be used either ({self.unusable})")


def model_fallback(projection: Projection, registry: ModelRegistry,
                   provider: Callable[[str], object], default: tuple[str, str]
                   ) -> ModelFallback | None:
    """The default in place of the model a path with messages names, when pi 1.6 would not
    restore that one: its catalog lacks it, or `provider` cannot make its provider
    (provider_problem); else None. `provider` may import an SDK: call it off an event loop."""
    model = projection.settings.model
    if model is None or not projection.messages:  # the default is in force already, as in pi
        return None
    names = model.names()
    why = "pi-lsp's catalog has no such model" if registry.find(*names) is None else \
        provider_problem(provider, names[0])
    if why is None:
        return None
    return ModelFallback(names, why, default, provider_problem(provider, default[0]))


def provider_problem(provider: Callable[[str], object], name: str) -> str | None:
    """Why `provider` cannot make `name`'s provider (unconfigured, or no key: pi's
    `hasConfiguredAuth` false); None when it can, and when a models.json value cannot be read
    (an unset variable, a `!command`): the model is tried, and its failure names the value."""
    try:
        provider(name)
    except (MissingApiKeyError, UnknownProviderError) as error:
        return str(error)
    except ModelsFileError:
        return None
    return None
