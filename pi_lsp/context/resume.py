"""What pi 1.6 begins a resumed session with when its path holds no message yet: restoring the
session's model and level is for a session with messages (sdk.js createAgentSession), so such
a session starts as a new one does. `pi-lsp run` and its request preview ask here (the server
does not: in an editor such a path is most often the top of a session the user moved back to)."""

from __future__ import annotations

from collections.abc import Callable

from pi_lsp.context.layers import provider_problem
from pi_lsp.context.projection import Projection
from pi_lsp.providers.registry import ModelRegistry
from pi_lsp.providers.thinking import clamped_level
from pi_lsp.session.entries import DEFAULT_THINKING_LEVEL

Choice = tuple[tuple[str, str], str]  # (provider, model id), thinking level


def start_choice(projection: Projection, registry: ModelRegistry,
                 default_model: tuple[str, str],
                 level_for_model: Callable[[str, str], str | None],
                 provider: Callable[[str], object],
                 model: tuple[str, str] | None = None, level: str | None = None
                 ) -> Choice | None:
    """The model and level pi 1.6 gives a session it resumes at a path with no message:
    `model` (a run's --model), else the default; `level` (--thinking), else the model's own
    or the default set (`level_for_model`), else medium; clamped to the model. None on a path
    with messages, whose own pi restores, and where `provider` cannot make the default's
    (pi would look for another model with a key: the session's own is kept)."""
    if projection.messages:
        return None
    if model is None and provider_problem(provider, default_model[0]) is not None:
        return None
    chosen = model or default_model
    asked = level or level_for_model(*chosen) or DEFAULT_THINKING_LEVEL
    return chosen, clamped_level(registry.get(*chosen), asked)


def differs(projection: Projection, choice: Choice) -> tuple[bool, bool]:
    """Whether the path's own model and level are not `choice`'s (or it sets none): what
    must be recorded for the path to hold the choice, as pi records it on resuming."""
    settings = projection.settings
    model = settings.model.names() if settings.model is not None else None
    level = settings.thinking_level if settings.thinking_level_set else None
    return model != choice[0], level != choice[1]
