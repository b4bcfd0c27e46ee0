"""How hard a model is asked to think: a session's thinking level clamped to the levels the
model has, and the effort sent for one (both OpenAI wires and Anthropic's)."""

from __future__ import annotations

from pi_lsp.providers.registry import ModelInfo
from pi_lsp.session.entries import THINKING_LEVELS as LEVELS


def thinking_level(model: ModelInfo, level: str) -> str | None:
    """The level pi asks a model to think at (None: not at all): `level` clamped to the ones
    the model has (`thinkingLevelMap` None drops one, "off" included; xhigh and max need an
    entry)."""
    if not model.reasoning:
        return None
    levels = model.thinking_level_map

    def available(candidate: str) -> bool:
        if candidate in levels and levels[candidate] is None:
            return False
        return candidate not in ("xhigh", "max") or candidate in levels

    wanted = LEVELS.index(level) if level in LEVELS else 0  # pi: an unknown level is the lowest
    order = [*LEVELS[wanted:], *reversed(LEVELS[:wanted])]
    found = next((candidate for candidate in order if available(candidate)), None)
    return None if found == "off" else found


def clamped_level(model: ModelInfo, level: str) -> str:
    """The level pi records for a model: `level` clamped to the ones it has ("off" where it
    thinks at none)."""
    return thinking_level(model, level) or "off"


def effort_of(model: ModelInfo, level: str) -> str:
    """The effort sent for a thinking level: the model's `thinkingLevelMap` entry, or the level."""
    return model.thinking_level_map.get(level) or level
