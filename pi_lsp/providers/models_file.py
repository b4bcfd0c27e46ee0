"""pi's models.json: custom providers and models (Ollama, llama.cpp, vLLM, LM Studio, proxies).

Read from `~/.pi/agent/models.json` (or `$PI_CODING_AGENT_DIR/models.json`) and, in a trusted
folder, the project's `.pi/models.json`; the project's file wins per provider field and per model
id (`compat` flag by flag), but never gets the user's key or headers (see `load_models`).
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from pi_lsp.jsonfile import read_object
from pi_lsp.providers.base import BlankApiKeyError
from pi_lsp.providers.base_url import url_problem
from pi_lsp.providers.header_values import blank
from pi_lsp.providers.key_commands import COMMAND_TIMEOUT_S, command_output, is_command, may_run
from pi_lsp.providers.registry import (
    BUILT_IN,
    BUILT_IN_PROVIDERS,
    DEFAULT_CONTEXT_WINDOW,
    DEFAULT_MAX_TOKENS,
    OPENROUTER,
    SUPPORTED_APIS,
    Compat,
    ModelInfo,
    Price,
    ProviderConfig,
    openrouter_defaults,
)
from pi_lsp.session.catalog import agent_dir
from pi_lsp.session.jsontext import convert, has_surrogate, js_utf8


class ModelsFileError(ValueError):
    """A models.json that cannot be used; the message names the file and the field."""


class UnsetVariableError(ModelsFileError):
    """A value names an environment variable that is unset: to pi 1.6, no key."""


class LoneSurrogateError(ModelsFileError):
    """A key or a header (its name or value), in any file, holding a lone surrogate: JSON.parse
    reads it, but no HTTP header can carry it (pi 1.6's fetch refuses it too)."""


def no_lone_surrogate(text: str, what: str) -> str:
    """`text`; LoneSurrogateError naming `what` (the file and the key's path, as JSON spells
    it) where it holds a lone surrogate."""
    if has_surrogate(text):
        spelled = what.encode("utf-8", "backslashreplace").decode()  # a key may hold one
        raise LoneSurrogateError(f"{spelled} holds a lone surrogate, which cannot be sent in "
                                 "an HTTP header")
    return text


class CostSpec(msgspec.Struct, rename="camel"):
    input: float = 0
    output: float = 0
    cache_read: float = 0
    cache_write: float = 0


class ModelSpec(msgspec.Struct, rename="camel"):
    id: str
    name: str | None = None
    api: str | None = None
    base_url: str | None = None  # pi 1.6: "Overrides the provider baseUrl"
    reasoning: bool = False
    input: list[str] = msgspec.field(default_factory=lambda: ["text"])
    context_window: int = DEFAULT_CONTEXT_WINDOW
    max_tokens: int = DEFAULT_MAX_TOKENS
    cost: CostSpec = msgspec.field(default_factory=CostSpec)
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    compat: Compat = msgspec.field(default_factory=Compat)
    thinking_level_map: dict[str, str | None] = msgspec.field(default_factory=dict)
    sampling_params: dict[str, Any] = msgspec.field(default_factory=dict)
    sampling_params_by_thinking_level: dict[str, dict[str, Any]] = msgspec.field(
        default_factory=dict)


class OverrideSpec(msgspec.Struct, rename="camel"):
    """Changes to a built-in model (`modelOverrides`); unset fields stay as built in."""

    name: str | None = None
    reasoning: bool | None = None
    input: list[str] | None = None
    context_window: int | None = None
    max_tokens: int | None = None
    cost: dict[str, float] | None = None
    headers: dict[str, str] | None = None
    compat: Compat | None = None
    thinking_level_map: dict[str, str | None] | None = None  # merged over the built-in one
    # merged over the built-in ones (by level, each level's fields), as pi 1.6 merges them
    sampling_params: dict[str, Any] | None = None
    sampling_params_by_thinking_level: dict[str, dict[str, Any]] | None = None


class ProviderSpec(msgspec.Struct, rename="camel"):
    base_url: str | None = None
    api: str | None = None
    api_key: str | None = None
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    auth_header: bool = False  # the key also goes as `Authorization: Bearer`, as pi 1.6 sends it
    compat: Compat = msgspec.field(default_factory=Compat)
    models: list[ModelSpec] = msgspec.field(default_factory=list)
    model_overrides: dict[str, OverrideSpec] = msgspec.field(default_factory=dict)


class ModelsFile(msgspec.Struct):
    providers: dict[str, ProviderSpec] = msgspec.field(default_factory=dict)


def models_files(workspace: Path) -> list[Path]:
    return [agent_dir() / "models.json", workspace / ".pi" / "models.json"]


def _read(path: Path) -> dict[str, Any]:
    """One file's JSON, checked against the schema so errors name this file."""
    data = read_object(path, "models", ModelsFileError, comments=True)
    providers = data.get("providers", {})
    if not isinstance(providers, dict):
        raise ModelsFileError(f"{path}: providers must be an object of providers by name")
    for name, spec in providers.items():
        overrides = spec.get("modelOverrides") if isinstance(spec, dict) else None
        # Each override alone first: msgspec names a key of an object `[...]`, not its model.
        for model_id, override in (overrides if isinstance(overrides, dict) else {}).items():
            _convert(override, OverrideSpec, f"{path}: providers.{name}.modelOverrides.{model_id}")
        _refuse_null_flags(spec, f"{path}: providers.{name}")
        _convert(spec, ProviderSpec, f"{path}: providers.{name}")
    return data


def _refuse_null_flags(spec: Any, where: str) -> None:
    """A ModelsFileError naming the first `compat` flag, at any level of a provider's entry,
    written as null: pi 1.6 refuses it ("must be boolean"), where msgspec reads it as unset."""
    if not isinstance(spec, dict):
        return  # the schema names what is wrong
    models, overrides = spec.get("models"), spec.get("modelOverrides")
    levels = [(where, spec),
              *((f"{where}.models[{index}]", model)
                for index, model in enumerate(models if isinstance(models, list) else [])),
              *((f"{where}.modelOverrides.{model_id}", override) for model_id, override in
                (overrides if isinstance(overrides, dict) else {}).items())]
    for at, entry in levels:
        compat = entry.get("compat") if isinstance(entry, dict) else None
        for flag, value in (compat if isinstance(compat, dict) else {}).items():
            if value is None and flag in Compat.__struct_encode_fields__:
                raise ModelsFileError(f"{at}.compat.{flag}: must not be null (leave it out "
                                      "to leave it unset)")


def _convert(value: Any, kind: type, what: str) -> None:
    """Check `value` is a `kind`; a ModelsFileError naming `what` (the file and key path) and
    the field within it where it is not."""
    try:
        convert(value, kind)
    except msgspec.ValidationError as error:
        # msgspec says "... - at `$.models[0].id`", then any note ("(a lone surrogate, ...)").
        text, _, where = str(error).partition(" - at `$")
        where, _, note = where.partition("`")
        raise ModelsFileError(f"{what}{where}: {text}{note}") from None


def _check(merged: ModelsFile, sources: dict[str, str]) -> None:
    """What the schema cannot say; a provider split over both files is checked as one."""
    # pi 1.6 fills in a model's api and baseUrl from its OpenRouter provider's too.
    built_in = {*(p.name for p in BUILT_IN_PROVIDERS), OPENROUTER}
    for name, spec in merged.providers.items():
        where = f"{sources[name]}: providers.{name}"
        for index, model in enumerate(spec.models):
            if not (model.api or spec.api or name in built_in):
                raise ModelsFileError(f"{where}.api is required for models (one of "
                                      f"{', '.join(SUPPORTED_APIS)}), at models[{index}]")
        # pi 1.6 asks it of each model: its own, else its provider's.
        if not spec.base_url and name not in built_in and \
                any(not model.base_url for model in spec.models):
            raise ModelsFileError(f"{where}.baseUrl is required when a provider defines models "
                                  "without a baseUrl of their own")
        if spec.base_url and (problem := url_problem(spec.base_url)):
            raise ModelsFileError(f"{where}.baseUrl: {problem}")
        for index, model in enumerate(spec.models):
            if not model.id:
                raise ModelsFileError(f"{where}.models[{index}].id must not be empty")
            if model.base_url is not None and (problem := url_problem(model.base_url)):
                raise ModelsFileError(f"{where}.models[{index}].baseUrl: {problem}")


def _merge(files: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Providers from all files; a later file wins per provider field and per model id (per
    `compat` flag)."""
    merged: dict[str, dict[str, Any]] = {}
    for data in files:
        for name, spec in (data.get("providers") or {}).items():
            into = merged.setdefault(name, {})
            models = {m["id"]: m for m in into.get("models", [])}
            models.update({m["id"]: _laid_over(models.get(m["id"]), m)
                           for m in spec.get("models", [])})
            earlier = into.get("modelOverrides", {})
            overrides = {**earlier, **{model_id: _laid_over(earlier.get(model_id), override)
                                       for model_id, override in
                                       spec.get("modelOverrides", {}).items()}}
            into.update(_laid_over(into, spec))
            into["models"], into["modelOverrides"] = list(models.values()), overrides
    return merged


def _laid_over(earlier: dict[str, Any] | None, later: dict[str, Any]) -> dict[str, Any]:
    """`later`, a later file's entry, with the `compat` flags of `earlier` (the same provider's,
    model's or override's) it does not set: one flag for a project's host kept none of yours,
    your OpenRouter data policy (openRouterRouting) among them, while your key was still sent."""
    compat = {**((earlier or {}).get("compat") or {}), **(later.get("compat") or {})}
    return {**later, "compat": compat} if compat else later


# Fields that decide where a provider's requests go and what they carry: a project file that
# sets one of them gets no key or headers but the ones it names itself; a model's own baseUrl
# too (MODEL_ROUTING_FIELDS: it sends that model's requests elsewhere with the provider's key).
ROUTING_FIELDS = ("baseUrl", "api", "headers")
MODEL_ROUTING_FIELDS = ("models[].baseUrl",)
# A model's or override's fields laid over the body as written (any field: `model`, `n`,
# `store`, `service_tier`).
BODY_FIELDS = ("samplingParams", "samplingParamsByThinkingLevel")
# `compat` flags, at any level, that lay what they hold into the body: OpenRouter's and Vercel's
# routing (your data policy, which upstream providers see your prompts), a chat template's
# kwargs or args (any name and value), Anthropic's fallbacks (the models that may answer in
# place of yours, billed to you, at the price the file says).
BODY_COMPAT = ("openRouterRouting", "vercelGatewayRouting", "chatTemplateKwargs",
               "chatTemplateArgs", "allowedFallbackModels")


def load_models(workspace: Path, *, project: bool
                ) -> tuple[list[ModelInfo], list[ProviderConfig]]:
    """The models and providers pi's models.json files describe for `workspace`: the user's,
    and with `project` (a trusted folder) the project's over them.

    A project file's `apiKey` and headers are sent as written (never an environment
    variable's value), and a provider whose baseUrl, api or headers it changes, or whose
    requests' body it sets (`_sets_the_body`), gets only the key and headers the project file
    itself gives: the user's key and header values never go where a project points.
    """
    files = models_files(workspace)[:2 if project else 1]
    raw = [_read(path) for path in files]
    try:
        merged: ModelsFile = convert({"providers": _merge(raw)}, ModelsFile)
    except msgspec.ValidationError as error:  # a lone surrogate in a key within a provider
        raise ModelsFileError(f"{', '.join(map(str, files))}: {error}") from None
    sources = {name: str(path) for path, data in zip(files, raw, strict=True)
               for name in data.get("providers") or {}}
    _check(merged, sources)
    from_project: dict[str, dict[str, Any]] = raw[1].get("providers") or {} if project else {}
    user_variables = {name: _named_variables(spec)
                      for name, spec in (raw[0].get("providers") or {}).items()}
    built_in = {p.name: p for p in BUILT_IN_PROVIDERS}
    models: list[ModelInfo] = []
    providers: list[ProviderConfig] = []
    for name, spec in merged.providers.items():
        base = built_in.get(name)
        api, base_url = openrouter_defaults(None, spec.api) if name == OPENROUTER else \
            (base.api, base.base_url) if base else ("", None)
        api = spec.api or api
        own = from_project.get(name, {})
        rerouted = any(field in own for field in ROUTING_FIELDS) or _sets_the_body(own) or \
            any("baseUrl" in model for model in own.get("models", []))
        if rerouted:
            spec = _project_headers_only(spec, own)
        # As Node's URL reads it: a lone surrogate as U+FFFD (percent-encoded in a path).
        base_url = js_utf8(spec.base_url) if spec.base_url else base_url
        if base_url is None and spec.models and not base:
            # Every model has its own: an id it lacks takes the first's facts, its URL among
            # them, as pi 1.6 gives it them (stand_in); never an SDK's default host.
            base_url = js_utf8(spec.models[0].base_url or "")
        providers.append(ProviderConfig(
            name, api, base_url,
            spec.api_key if "apiKey" in own or not rerouted else None,
            str(files[1] if "apiKey" in own else files[0]), spec.headers,
            sources[name], literal_key="apiKey" in own, literal_headers="headers" in own,
            user_key=not rerouted, key_variables=user_variables.get(name, frozenset()),
            auth_header=spec.auth_header))
        project_models = {model["id"] for model in own.get("models", [])}
        models += _overridden(name, spec, set(own.get("modelOverrides", {})), files)
        for model in spec.models:
            mine = model.id not in project_models
            models.append(_model(name, api, spec, model, mine,
                                 _model_where(files, raw, name, model.id, mine)))
    return models, providers


def _model_where(files: list[Path], raw: list[dict[str, Any]], provider: str, model_id: str,
                 from_user: bool) -> str:
    """Where a model's headers were written: its file and key path (`models[0].headers`; the
    last entry of that id, which wins)."""
    which = 0 if from_user else 1
    listed = raw[which]["providers"][provider]["models"]
    index = max(i for i, entry in enumerate(listed) if entry["id"] == model_id)
    return f"{files[which]}: providers.{provider}.models[{index}].headers"


def _sets_the_body(own: dict[str, Any]) -> bool:
    """Whether a project's entry for a provider lays its own fields into the requests' body: a
    model's or override's `samplingParams`, or a BODY_COMPAT flag at any level. Sent with your
    key, they would bill it for 8 answers (`n`), another model, or undo your routing."""
    entries = [*own.get("models", []), *own.get("modelOverrides", {}).values()]
    return any(field in entry for entry in entries for field in BODY_FIELDS) or any(
        flag in (entry.get("compat") or {}) for entry in [own, *entries] for flag in BODY_COMPAT)


def _named_variables(spec: dict[str, Any]) -> frozenset[str]:
    """The environment variables a provider's entry in the user's file may name: its `apiKey`
    and its, its models' and its `modelOverrides`' header values."""
    models, overrides = spec.get("models", []), spec.get("modelOverrides", {}).values()
    headers = [spec.get("headers", {}), *(model.get("headers", {}) for model in models),
               *(override.get("headers") or {} for override in overrides)]
    values = [spec.get("apiKey") or "", *(value for each in headers for value in each.values())]
    return frozenset(name for value in values for name in variable_names(value))


def _project_headers_only(spec: ProviderSpec, own: dict[str, Any]) -> ProviderSpec:
    """`spec` with only the headers the project file (`own`: its entry for this provider) wrote.

    Users authenticate gateways by header (`cf-aig-authorization`, Azure's `api-key`), often
    from an environment variable, so the user's provider headers, model headers and
    `modelOverrides` headers are as secret as the key. A project's entry replaces a provider's
    `headers` and a model or override of the same id whole (`_merge`), so whatever it names
    is the project's own.
    """
    own_models = {model["id"] for model in own.get("models", [])}
    own_overrides = own.get("modelOverrides", {})
    return msgspec.structs.replace(
        spec,
        headers=spec.headers if "headers" in own else {},
        models=[model if model.id in own_models else msgspec.structs.replace(model, headers={})
                for model in spec.models],
        model_overrides={
            model_id: override if model_id in own_overrides
            else msgspec.structs.replace(override, headers=None)
            for model_id, override in spec.model_overrides.items()},
    )


def _model(provider: str, api: str, spec: ProviderSpec, model: ModelSpec, from_user: bool,
           headers_where: str) -> ModelInfo:
    """`model` as the registry holds it; `from_user`: your own file wrote it, not a project."""
    cost = model.cost
    # As Node's URL reads it; None: its provider's.
    own_url = js_utf8(model.base_url) if model.base_url else None
    base_url = own_url
    if provider == OPENROUTER:
        api, url = openrouter_defaults(model.id, model.api or spec.api)
        base_url = own_url or (None if spec.base_url else url)
    return ModelInfo(
        provider, model.id, model.context_window, model.max_tokens,
        Price(cost.input, cost.output, cost.cache_read, cost.cache_write),
        reasoning=model.reasoning, api=model.api or spec.api or api, name=model.name,
        input=model.input, base_url=base_url, own_url=own_url,
        headers=model.headers, resolve_headers=from_user, headers_where=headers_where,
        compat=model.compat.over(spec.compat), thinking_level_map=model.thinking_level_map,
        sampling_params=model.sampling_params,
        sampling_params_by_thinking_level=model.sampling_params_by_thinking_level,
    )


def _overridden(provider: str, spec: ProviderSpec, from_project: set[str], files: list[Path]
                ) -> list[ModelInfo]:
    """Built-in models of `provider` with the file's `modelOverrides` and `compat` applied;
    `from_project`: the ids whose override a project's file wrote (`files`: the user's, the
    project's)."""
    changed: list[ModelInfo] = []
    for model in BUILT_IN:
        override = spec.model_overrides.get(model.id)
        if model.provider != provider or (override is None and spec.compat == Compat()):
            continue
        changes: dict[str, Any] = {"compat": spec.compat.over(model.compat)}
        if override is not None:
            price = msgspec.to_builtins(model.price)
            price.update(override.cost or {})
            changes.update({key: value for key, value in {
                "name": override.name, "reasoning": override.reasoning, "input": override.input,
                "context_window": override.context_window, "max_tokens": override.max_tokens,
                "headers": override.headers,
            }.items() if value is not None})
            changes["price"] = msgspec.convert(price, Price)
            if override.headers is not None:
                changes["resolve_headers"] = model.id not in from_project
                written_in = files[1] if model.id in from_project else files[0]
                changes["headers_where"] = \
                    f"{written_in}: providers.{provider}.modelOverrides.{model.id}.headers"
            if override.thinking_level_map is not None:
                changes["thinking_level_map"] = {**model.thinking_level_map,
                                                 **override.thinking_level_map}
            if override.compat is not None:
                changes["compat"] = override.compat.over(changes["compat"])
            changes.update(_sampling_changes(model, override))
        changed.append(msgspec.structs.replace(model, **changes))
    return changed


def _sampling_changes(model: ModelInfo, override: OverrideSpec) -> dict[str, Any]:
    """An override's sampling fields merged over the model's, as pi 1.6 merges them."""
    changes: dict[str, Any] = {}
    if override.sampling_params:
        changes["sampling_params"] = {**model.sampling_params, **override.sampling_params}
    if override.sampling_params_by_thinking_level is not None:
        levels = dict(model.sampling_params_by_thinking_level)
        for level, fields in override.sampling_params_by_thinking_level.items():
            if fields:
                levels[level] = {**levels.get(level, {}), **fields}
        changes["sampling_params_by_thinking_level"] = levels
    return changes


# pi 1.6's templates (resolve-config-value.js): `$$` and `$!` escape, `${NAME}` and `$NAME`
# name a variable; anything else, a `$` included, is literal text.
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TEMPLATE = re.compile(r"\$(?:([$!])|\{([^}]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def _named(match: re.Match[str]) -> str | None:
    """The variable a template's `$` reference names; None for an escape or a bad name."""
    _escaped, braced, bare = match.groups()
    name = braced if braced is not None else bare
    return name if name is not None and _VARIABLE.fullmatch(name) else None


def variable_names(value: str) -> list[str]:
    """The environment variables a value of the user's names: its template's, and a bare name
    (pi 1.6 sends it as written; earlier pi-lsp read it as the variable, so it stays hidden)."""
    if value.startswith("!"):
        return []
    if _VARIABLE.fullmatch(value):
        return [value]
    return [name for match in _TEMPLATE.finditer(value) if (name := _named(match))]


class UnsetVariable(LookupError):
    """A template names a variable that is unset or empty; its name is the argument."""


def expand(value: str, lookup: Callable[[str], str | None]) -> str:
    """pi 1.6's template (resolveTemplate): `$NAME` and `${NAME}` become `lookup`'s value
    (UnsetVariable where it has none or ""), `$$` and `$!` a `$` and a `!`."""

    def substitute(match: re.Match[str]) -> str:
        name = _named(match)
        if name is None:
            return match.group(1) or match.group(0)
        found = lookup(name)
        if not found:
            raise UnsetVariable(name)
        return found

    return _TEMPLATE.sub(substitute, value)


def resolve_api_key(value: str, what: str, written_in: Path, literal: bool = False,
                    run: bool = True) -> str:
    """A provider's `apiKey` as pi 1.6 resolves it: a `!command` is run where the file it
    was written in may run one (key_commands.may_run), its output the key (without `run`,
    the command itself); else as resolve_value reads it."""
    no_lone_surrogate(value, what)  # a command holding one could not be run either
    if not (is_command(value) and may_run(written_in)):
        return resolve_value(value, what, literal)
    return _command_value(value, what) if run else value


def _command_value(value: str, what: str) -> str:
    """What `!command` (`value`) prints (key_commands.command_output); a ModelsFileError naming
    `what` and the command where it gives nothing, as pi fails the request ("Failed to resolve
    … from shell command")."""
    output = command_output(value)
    if output is None:
        raise ModelsFileError(f"{what}: the command {value[1:]!r} failed, printed nothing or "
                              f"ran past {COMMAND_TIMEOUT_S} s")
    return output


def provider_key(config: ProviderConfig, run: bool = True) -> str | None:
    """The provider's `apiKey` from models.json, resolved (resolve_api_key); None where the
    files give none; BlankApiKeyError where it is only whitespace."""
    if config.api_key is None:
        return None
    written_in = Path(config.key_file or config.source)
    key = resolve_api_key(config.api_key, f"{written_in}: providers.{config.name}.apiKey",
                          written_in, config.literal_key, run)
    if blank(key):
        raise BlankApiKeyError(config.name, written_in)
    return key


def resolve_value(value: str, what: str, literal: bool = False) -> str:
    """pi 1.6's value resolution: `$NAME` and `${NAME}` become the variable's value (an error
    when it is unset or empty, as in pi), `$$` a `$`, `!command` what the command prints (your
    own models.json's values: blocks, so the server calls it off its loop); as written when
    `literal` (a project file's values), where a `!command` is refused, never run."""
    no_lone_surrogate(value, what)
    if is_command(value):
        if not literal:  # your own models.json's: a project file's values are literal
            return _command_value(value, what)
        raise ModelsFileError(f"{what}: shell commands (\"!…\") are not run here, only in "
                              f"your own models.json or auth.json (in {agent_dir()}); put the "
                              f"value in an environment variable and name it instead")
    if literal:
        return value
    try:
        return expand(value, os.environ.get)
    except UnsetVariable as unset:
        raise UnsetVariableError(f"{what}: environment variable {unset.args[0]} is not set") \
            from None


def resolve_headers(headers: dict[str, str], where: str, literal: bool) -> dict[str, str]:
    """`headers` (`where`: the file and their key's path) with each value resolved as
    resolve_value resolves it; a name holding a lone surrogate is refused by name."""
    return {no_lone_surrogate(name, f"{where}.{name}"):
            resolve_value(value, f"{where}.{name}", literal) for name, value in headers.items()}


def model_headers(model: ModelInfo) -> dict[str, str]:
    """The headers a request to `model` carries (`models[].headers`, `modelOverrides`'), read
    as the provider's are: templates and commands from your own models.json, else as written
    (a `!command` refused)."""
    where = model.headers_where or f"model {model.provider}/{model.id}: headers"
    return resolve_headers(model.headers, where, not model.resolve_headers)


async def request_model_headers(model: ModelInfo) -> dict[str, str]:
    """`model_headers` for a request being sent: a `!command` value is run in a worker thread,
    as a password manager may keep it seconds, and the event loop answers editors meanwhile."""
    if model.resolve_headers and any(map(is_command, model.headers.values())):
        return await asyncio.to_thread(model_headers, model)
    return model_headers(model)
