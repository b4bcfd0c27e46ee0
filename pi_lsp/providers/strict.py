"""Strict tools (constrained sampling), as pi-ai 1.6 asks for them: a tool that declares
`constrainedSampling: {"type": "json_schema"}` is sent strict where the model supports it and
its schema fits the strict subset (every property required, an optional one made nullable, no
extra properties); otherwise it is sent as it is."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from pi_lsp.providers.base import ToolSpec, declared_fields

# Keys the strict subset has no room for, on any API (pi's UNSUPPORTED_STRICT_SCHEMA_KEYS).
UNSUPPORTED_KEYS = ("$ref", "$defs", "definitions", "allOf", "oneOf", "patternProperties",
                    "dependentSchemas", "dependencies", "unevaluatedProperties",
                    "propertyNames", "contains", "prefixItems", "not", "if", "then", "else")
# Keyword -> whether its value is refused by one API's strict mode.
Refused = Callable[[str, Any], bool]


class NotStrict(Exception):
    """The schema does not fit the strict subset."""


def wants_strict(tool: ToolSpec) -> bool:
    """Whether the tool asks for JSON-schema constrained sampling."""
    config = tool.constrained_sampling
    return isinstance(config, dict) and config.get("type") == "json_schema"


def strict_parameters(tool: ToolSpec, supported: bool, refused: Refused | None = None
                      ) -> dict[str, Any] | None:
    """The tool's schema made strict (pi's resolveJsonSchemaStrictSampling and
    makeStrictJsonSchema), or None: not asked for, not `supported`, or it does not fit."""
    if not (supported and wants_strict(tool)):
        return None
    schema = copy.deepcopy(tool.parameters)
    try:
        _make_strict(schema, refused)
    except NotStrict:
        return None
    return schema if schema.get("type") == "object" else None


def openai_tool_schema(tool: ToolSpec, supported: bool) -> dict[str, Any]:
    """A tool's `parameters` and `strict` on the OpenAI APIs, as pi 1.6 sends them: `strict`
    only where the server takes it (`supported`), true where the schema was made strict."""
    strict = strict_parameters(tool, supported)
    return {**declared_fields(parameters=tool.parameters if strict is None else strict),
            **({"strict": strict is not None} if supported else {})}


def _is_structured(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return False
    kind = schema.get("type")
    kinds = [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else []
    return "object" in kinds or "array" in kinds or "properties" in schema or "items" in schema


def _allows_null(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return False
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if ("const" in schema and schema["const"] is None) or (
            isinstance(schema.get("enum"), list) and None in schema["enum"]):
        return True
    variants = schema.get("anyOf")
    return isinstance(variants, list) and any(_allows_null(v) for v in variants)


def _make_strict(schema: Any, refused: Refused | None) -> None:
    """pi's makeJsonSchemaNodeStrict, in place."""
    if not isinstance(schema, dict):
        raise NotStrict
    if any(key in schema for key in UNSUPPORTED_KEYS):
        raise NotStrict
    if refused is not None and any(refused(key, value) for key, value in schema.items()):
        raise NotStrict
    if "type" not in schema and "anyOf" not in schema and "enum" not in schema:
        raise NotStrict  # a bare enum counts as typed, a bare const does not
    if "anyOf" in schema:
        variants = schema["anyOf"]
        if not isinstance(variants, list) or not variants:
            raise NotStrict
        for variant in variants:
            if _is_structured(variant):
                raise NotStrict  # object and array unions
            _make_strict(variant, refused)
    if "items" in schema:
        if isinstance(schema["items"], list):
            raise NotStrict  # tuples
        _make_strict(schema["items"], refused)
    is_object = schema.get("type") == "object"
    if "properties" in schema and not is_object:
        raise NotStrict
    if not is_object:
        return
    if "additionalProperties" in schema and schema["additionalProperties"] is not False:
        raise NotStrict
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    if not isinstance(properties, dict) or not isinstance(required, list) or not all(
            isinstance(name, str) for name in required) or not set(required) <= set(properties):
        raise NotStrict
    for name, value in properties.items():
        _make_strict(value, refused)
        if name not in required and not _allows_null(value):
            properties[name] = {"anyOf": [value, {"type": "null"}]}
    schema["required"] = list(properties)
    schema["additionalProperties"] = False
