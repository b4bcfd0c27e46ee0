"""`pi-lsp run --model PATTERN[:LEVEL]`, resolved as pi 1.6 resolves `--model`
(model-resolver.js, resolveCliModel): an exact id (any case, with or without `provider/`),
else a part of an id or name, aliases before dated ids, the latest first; else a custom id
of a known provider."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pi_lsp.providers.registry import ModelInfo, ModelRegistry
from pi_lsp.session.catalog import agent_dir
from pi_lsp.session.entries import THINKING_LEVELS
from pi_lsp.session.jsontext import JS_WHITESPACE

# ICU's root collation (JavaScript's localeCompare) for ASCII: punctuation and symbols in this
# order, then digits, then letters whatever their case.
_COLLATION = " _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$0123456789abcdefghijklmnopqrstuvwxyz"
_RANK = {char: rank for rank, char in enumerate(_COLLATION)}
_DATED = re.compile(r"-[0-9]{8}$")


class ModelPatternError(Exception):
    """A `--model` pattern that names no model, or models of several providers."""


@dataclass(frozen=True)
class ResolvedModel:
    provider: str
    model_id: str
    level: str | None  # the thinking level the pattern or `--thinking` asks for


@dataclass(frozen=True)
class _Found:
    model: ModelInfo
    level: str | None = None


@dataclass(frozen=True)
class _Ambiguous:
    candidates: list[ModelInfo]
    usable_count: int


_Match = _Found | _Ambiguous | None


def split_level(text: str) -> tuple[str, str] | None:
    """`text` as its id and the level after its last colon; None when no level ends it
    (levels are lower-case: `:HIGH`, `:7b` stay part of the id)."""
    base, colon, suffix = text.rpartition(":")
    return (base, suffix) if colon and suffix in THINKING_LEVELS else None


def resolve_model(registry: ModelRegistry, pattern: str, thinking: str | None,
                  usable: Callable[[str], bool]) -> ResolvedModel:
    """The model `--model PATTERN` names, and the level it asks for unless `--thinking` does.
    `usable(provider)`: a key is configured for it, which only breaks ties between providers."""
    models = registry.all()
    text = pattern.strip(JS_WHITESPACE)
    found = _resolve_text(text, models, usable) if text else None
    if isinstance(found, _Found):
        return ResolvedModel(found.model.provider, found.model.id, thinking or found.level)
    if isinstance(found, _Ambiguous):
        names = ", ".join(sorted((f"{m.provider}/{m.id}" for m in found.candidates),
                                 key=_collation_key))
        why = "No matching provider is authenticated." if found.usable_count == 0 else \
            "More than one matching provider is authenticated."
        raise ModelPatternError(f'Model "{pattern}" is ambiguous across providers: {names}. '
                                f"{why} Use provider/model.")
    split = _split_provider(text, models)
    if split is None:
        raise ModelPatternError(_not_found(pattern, text, registry))
    provider, model_text = split
    # A custom id of that provider; its level suffix is the level unless --thinking is given.
    suffix = split_level(model_text)
    if thinking or suffix is None:
        return ResolvedModel(provider, model_text, thinking)
    return ResolvedModel(provider, suffix[0], suffix[1])


def _not_found(pattern: str, text: str, registry: ModelRegistry) -> str:
    """pi 1.6's words for a pattern nothing matches, and where pi-lsp looks for models."""
    prefix, slash, _rest = text.partition("/")
    if slash and prefix and registry.provider(prefix) is None:
        return (f'Model "{pattern}" not found: provider {prefix!r} is not configured (add it '
                f'under "providers" in {agent_dir() / "models.json"} or the project\'s '
                ".pi/models.json)")
    if slash and prefix:  # configured, but pi 1.6 takes a custom id only where it has models
        return (f'Model "{pattern}" not found: provider {prefix!r} has no models; list at least '
                'one under its "models" in models.json, and other ids of it are taken as written')
    return (f'Model "{pattern}" not found. Name one of pi-lsp\'s catalog or models.json, as '
            "PROVIDER/ID or a part of its id")


def _resolve_text(text: str, models: Sequence[ModelInfo], usable: Callable[[str], bool]
                  ) -> _Match:
    """pi 1.6's resolveText, strict: the whole text first, then without a level suffix."""
    found = _select_reference(text, models, usable) or \
        _select_fuzzy(_fuzzy_matches(text, models), usable)
    if found is not None:
        return found
    split = split_level(text)
    if split is None:  # a suffix that is no level stays in the id: nothing matches
        return None
    inner = _resolve_text(split[0], models, usable)
    return _Found(inner.model, split[1]) if isinstance(inner, _Found) else inner


def _split_provider(text: str, models: Sequence[ModelInfo]) -> tuple[str, str] | None:
    """`provider/rest` for the longest known provider `text` begins with (any case)."""
    lower = text.lower()
    best: tuple[str, str] | None = None
    for model in models:
        prefix = model.provider.strip(JS_WHITESPACE).lower()
        if not prefix or (best is not None and len(best[0]) >= len(model.provider)):
            continue
        slash = lower.find("/", len(prefix))
        if slash == -1 or lower[:slash].strip(JS_WHITESPACE) != prefix:
            continue
        rest = text[slash + 1:].strip(JS_WHITESPACE)
        if rest:
            best = (model.provider, rest)
    return best


def _select_reference(text: str, models: Sequence[ModelInfo], usable: Callable[[str], bool]
                      ) -> _Match:
    """An exact id (any case), on the named provider first; pi 1.6's selectReference."""
    lower = text.lower()
    raw = [m for m in models if m.id.lower() == lower]
    named: ModelInfo | None = None
    split = _split_provider(text, models)
    if split is not None:
        provider, rest = split
        own = [m for m in models if m.provider == provider]
        named = next((m for m in own if m.id.lower() == rest.lower()), None) or \
            next((m for m in raw if m.provider == provider), None) or \
            _best_fuzzy(_fuzzy_matches(rest, own))
    others = [m for m in raw if m is not named]
    candidates = [named, *others] if named is not None else others
    if not candidates:
        return None
    if len({m.provider for m in candidates}) == 1:
        return _Found(candidates[0])
    if named is not None and usable(named.provider):
        return _Found(named)
    usable_others = [m for m in others if usable(m.provider)]
    if len(usable_others) == 1:
        return _Found(usable_others[0])
    if not usable_others and named is not None:
        return _Found(named)
    return _Ambiguous(candidates, len(usable_others))


def _fuzzy_matches(text: str, models: Sequence[ModelInfo]) -> list[ModelInfo]:
    lower = text.lower()
    return [m for m in models
            if lower in m.id.lower() or (m.name is not None and lower in m.name.lower())]


def _select_fuzzy(matches: list[ModelInfo], usable: Callable[[str], bool]) -> _Match:
    """The best partial match, among those with a key when providers differ; ambiguous when
    the same id is on several providers."""
    if not matches:
        return None
    several = len({m.provider for m in matches}) > 1
    usable_matches = [m for m in matches if usable(m.provider)] if several else []
    pool = usable_matches or matches
    best = _best_fuzzy(pool)
    assert best is not None  # pool is not empty
    tied = [m for m in pool if m.id == best.id]
    if len({m.provider for m in tied}) == 1:
        return _Found(best)
    return _Ambiguous(tied, len(tied) if usable_matches else 0)


def _best_fuzzy(matches: list[ModelInfo]) -> ModelInfo | None:
    """Aliases (`claude-sonnet-4-5`) over dated ids (`claude-sonnet-4-5-20250929`), then the
    latest: the last in JavaScript's localeCompare order, the first of equal ids."""
    aliases = [m for m in matches if m.id.endswith("-latest") or not _DATED.search(m.id)]
    pool = aliases or matches
    return max(pool, key=lambda m: _collation_key(m.id)) if pool else None


def _collation_key(text: str) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """An approximation of ICU's root collation: characters (accents and case aside), then
    accents, then case, lower-case first."""
    bases = [unicodedata.normalize("NFD", char) for char in text]
    primary = tuple(_RANK.get(base[0].lower(), len(_COLLATION) + ord(base[0].lower()))
                    for base in bases)
    accents = tuple(len(base) - 1 for base in bases)
    case = tuple(int(char != char.lower()) for char in text)
    return primary, accents, case
