"""A model's `samplingParams` from models.json (temperature, top_p, …), and its
`samplingParamsByThinkingLevel`: fields pi 1.6 lays over each OpenAI-compatible request body
last, so they win over the ones it names itself."""

from __future__ import annotations

from typing import Any

from pi_lsp.providers.registry import ModelInfo
from pi_lsp.providers.thinking import clamped_level


def sampling_fields(model: ModelInfo, level: str) -> dict[str, Any]:
    """The fields for a request at thinking `level`: the model's, then its clamped level's."""
    by_level = model.sampling_params_by_thinking_level.get(clamped_level(model, level)) or {}
    return {**model.sampling_params, **by_level}
