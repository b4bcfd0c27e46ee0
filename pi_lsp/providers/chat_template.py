"""A chat template's own arguments (models.json `chatTemplateKwargs`), filled in from the thinking
level as pi 1.6 fills them (openai-completions.js buildChatTemplateValues)."""

from __future__ import annotations

from typing import Any

from pi_lsp.providers.registry import ModelInfo, TemplateValue, TemplateVariable

OMITTED = object()  # a value pi leaves out (JavaScript's undefined)


def template_values(model: ModelInfo, values: dict[str, TemplateValue], level: str | None,
                    budget: int | None) -> dict[str, Any] | None:
    """`values` as sent at `level` (None: not thinking) with the level's thinking `budget`;
    None where none is left, as pi then sends no field."""
    filled = {name: _filled(model, value, level, budget) for name, value in values.items()}
    kept = {name: value for name, value in filled.items() if value is not OMITTED}
    return kept or None


def _filled(model: ModelInfo, value: TemplateValue, level: str | None, budget: int | None
            ) -> Any:
    """One value: as written, or what its `$var` names (OMITTED where pi has none)."""
    if not isinstance(value, TemplateVariable):
        return value
    if level is None and value.omit_when_off:
        return OMITTED
    if value.var == "thinking.enabled":
        return level is not None
    if value.var == "thinking.budget":
        return OMITTED if budget is None else budget
    effort = mapped_effort(model, level)
    return OMITTED if effort is None else effort


def mapped_effort(model: ModelInfo, level: str | None) -> str | None:
    """`thinking.effort` (and baseten's `reasoning_effort`): the model's map entry for the level
    (for "off" where not thinking), else the level; None for a null entry, or not thinking
    without an `off` entry."""
    key = level or "off"
    if key not in model.thinking_level_map:
        return level
    mapped = model.thinking_level_map[key]
    return mapped if isinstance(mapped, str) else None
