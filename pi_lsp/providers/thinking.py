"""How hard a model is asked to think: a session's thinking level clamped to the levels the
model has, and the effort sent for one (both OpenAI wires and Anthropic's)."""

from __future__ import annotations

from pi_lsp.providers.registry import ModelInfo
from pi_lsp.session.entries import THINKING_LEVELS as LEVELS

# pi 1.6's budgets; xhigh and max (only on models that list them) think as high does.
THINKING_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384}
ANSWER_ROOM = 1024  # output always kept free beyond the thinking budget (pi's MIN_ANSWER_TOKENS)


def _has(model: ModelInfo, level: str) -> bool:
    """Whether a reasoning model has a level (`thinkingLevelMap` None drops one, "off"
    included; xhigh and max need an entry)."""
    levels = model.thinking_level_map
    if level in levels and levels[level] is None:
        return False
    return level not in ("xhigh", "max") or level in levels


def thinking_levels(model: ModelInfo) -> list[str]:
    """The levels pi offers for a model (getSupportedThinkingLevels): "off" alone where it
    does not reason."""
    return [level for level in LEVELS if _has(model, level)] if model.reasoning else ["off"]


def thinking_level(model: ModelInfo, level: str) -> str | None:
    """The level pi asks a model to think at (None: not at all): `level` clamped to the ones
    the model has."""
    if not model.reasoning:
        return None
    wanted = LEVELS.index(level) if level in LEVELS else 0  # pi: an unknown level is the lowest
    order = [*LEVELS[wanted:], *reversed(LEVELS[:wanted])]
    found = next((candidate for candidate in order if _has(model, candidate)), None)
    return None if found == "off" else found


def clamped_level(model: ModelInfo, level: str) -> str:
    """The level pi records for a model: `level` clamped to the ones it has ("off" where it
    thinks at none)."""
    return thinking_level(model, level) or "off"


def effort_of(model: ModelInfo, level: str) -> str:
    """The effort sent for a thinking level: the model's `thinkingLevelMap` entry, or the level."""
    return model.thinking_level_map.get(level) or level


def answer_room_budget(level: str, ceiling: int) -> int:
    """The thinking budget for `level` that leaves the answer its room under `ceiling` (pi's
    clampThinkingBudgetToAnswerRoom); 0 where none fits."""
    budget = THINKING_BUDGETS.get(level, THINKING_BUDGETS["high"])
    return min(budget, max(0, ceiling - ANSWER_ROOM))
