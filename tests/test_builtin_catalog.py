"""pi-lsp's built-in models are pi 1.6's: every Anthropic and OpenAI model pi-ai 1.6 lists, with
pi's facts (tests/fixtures/pi16-catalog.json, taken from pi-ai's providers/data files and checked
against them where pi 1.6 is installed, as is pi_lsp/providers/pi16_models.py, written from them
by tests/pi16_catalog.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from pi_lsp.providers.base import cost_of
from pi_lsp.providers.registry import (
    BUILT_IN,
    OPENROUTER_ANTHROPIC_MODELS,
    OPENROUTER_URLS,
    ModelInfo,
    ModelRegistry,
)
from pi_lsp.session.entries import Usage
from tests.pi16_catalog import DATA, TARGET, pi_models, source
from tests.test_system_messages import PI16

STORED = Path(__file__).with_name("fixtures") / "pi16-catalog.json"
PI_DATA = PI16 / DATA
KEPT = ("id", "name", "reasoning", "input", "cost", "contextWindow", "maxTokens",
        "thinkingLevelMap")


# pi's compat flags that shape a request (each False where the catalog leaves it out).
FLAGS = {"supportsStrictMode": "supports_strict_mode",
         "supportsStrictTools": "supports_strict_tools",
         "forceAdaptiveThinking": "force_adaptive_thinking",
         "supportsMidConvoEffort": "supports_mid_convo_effort",
         "supportsMidConvoSystemMessages": "supports_mid_convo_system_messages",
         "supportsMidConvoToolChanges": "supports_mid_convo_tool_changes"}


def _facts(model: dict[str, Any]) -> dict[str, Any]:
    facts = {key: model[key] for key in KEPT if key in model}
    facts.update((flag, bool(model.get("compat", {}).get(flag))) for flag in FLAGS)
    facts["allowedFallbackModels"] = model.get("compat", {}).get("allowedFallbackModels", [])
    return facts


@pytest.fixture(scope="module")
def pi_catalog() -> dict[str, list[dict[str, Any]]]:
    stored: dict[str, list[dict[str, Any]]] = json.loads(STORED.read_text("utf-8"))
    if PI_DATA.is_dir():  # the stored facts are pi's own
        anthropic = json.loads((PI_DATA / "anthropic.json").read_text("utf-8"))
        openai = json.loads((PI_DATA / "openai.json").read_text("utf-8"))["openai-responses"]
        assert stored == {
            "anthropic": [_facts(m) for m in anthropic["anthropic-messages"].values()],
            "openai": [_facts(m) for m in openai.values()]}
    return stored


def test_the_written_catalog_is_pi_16s_list() -> None:
    """pi16_models.py is what tests/pi16_catalog.py writes from pi's lists, not edited."""
    if not PI_DATA.is_dir():
        pytest.skip("pi 1.6 is not installed")
    assert TARGET.read_text("utf-8") == source(pi_models(PI16))


def _ours(model: ModelInfo) -> dict[str, Any]:
    """A built-in model's facts as pi's catalog writes them."""
    cost = msgspec.to_builtins(model.price)
    if not cost.get("tiers"):
        cost.pop("tiers", None)
    facts: dict[str, Any] = {
        "id": model.id, "name": model.name, "reasoning": model.reasoning, "input": model.input,
        "cost": cost, "contextWindow": model.context_window, "maxTokens": model.max_tokens}
    if model.thinking_level_map:
        facts["thinkingLevelMap"] = model.thinking_level_map
    facts.update((flag, bool(getattr(model.compat, name))) for flag, name in FLAGS.items())
    facts["allowedFallbackModels"] = msgspec.to_builtins(model.compat.allowed_fallback_models or [])
    return facts


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_the_built_in_models_are_pi_16s(provider: str,
                                        pi_catalog: dict[str, list[dict[str, Any]]]) -> None:
    """pi-lsp stopped at Claude 4.6: a session pi 1.6 started on its default claude-opus-5-5
    could not be continued on it, and claude-opus-4-7 was sent budget thinking. It had 4 of
    pi's 47 OpenAI models: gpt-4o or o3 took gpt-6.2-sol's facts (a reasoning effort, 128000
    output tokens)."""
    ours = [_ours(model) for model in BUILT_IN if model.provider == provider]
    assert sorted(ours, key=lambda f: f["id"]) == sorted(pi_catalog[provider],
                                                         key=lambda f: f["id"])


def test_a_tiered_price_applies_above_its_input_tokens() -> None:
    """pi 1.6's calculateCost: the tier with the highest threshold the input (cache reads and
    writes included) is above prices every part of the reply."""
    haiku = ModelRegistry().get("anthropic", "claude-haiku-5-5")
    small = cost_of(Usage(input=60_000, cache_read=40_000, output=1_000), haiku)
    assert (small.input, small.cache_read, small.output) == (0.006, 0.0004, 0.0005)
    large = cost_of(Usage(input=60_001, cache_read=40_000, output=1_000), haiku)
    assert (large.input, large.cache_read, large.output) == (0.0300005, 0.002, 0.0025)


def test_openrouters_models_on_anthropics_api_are_pi_16s() -> None:
    """registry.OPENROUTER_ANTHROPIC_MODELS, which decide the API and URL a models.json
    OpenRouter model of theirs takes, are the ones pi 1.6's data file lists there."""
    if not PI_DATA.is_dir():
        pytest.skip("pi 1.6 is not installed")
    data = json.loads((PI_DATA / "openrouter.json").read_text("utf-8"))
    listed = {model["id"] for model in data["anthropic-messages"].values()}
    assert listed == OPENROUTER_ANTHROPIC_MODELS
    assert {api: {model["baseUrl"] for model in data[api].values()}
            for api in OPENROUTER_URLS} == {api: {url} for api, url in OPENROUTER_URLS.items()}
