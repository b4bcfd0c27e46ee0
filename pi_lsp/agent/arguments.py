"""A tool call's arguments as pi 1.6 reads them before its tool runs (pi-ai's
validateToolArguments, pi-schema's parse with coercion): coerced towards the tool's schema
(`"2"` for a number is 2, 5 for a string is "5", a null optional property is left out, a single
value for an array is a one-item array), then checked, a failure worded as pi words it. Only
the schema shapes the file tools declare are known: objects, arrays, strings and numbers."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from pi_lsp.session.jsontext import js_double, js_number, js_to_number

# TypeBox's bigint text; one of more than 16 digits is past the safe integers in any case.
BIGINT = re.compile(r"-?(?:0|[1-9][0-9]{0,15})n")
MAX_SAFE_INTEGER = 2**53 - 1
SURROGATE = re.compile("[\ud800-\udfff]")


class ArgumentsError(ValueError):
    """Arguments the schema refuses, with pi's message."""


def checked_arguments(tool: str, schema: dict[str, Any], args: dict[str, Any]
                      ) -> dict[str, Any]:
    """`args` coerced to `schema` as pi coerces them; ArgumentsError, with pi's message, when
    they still do not fit."""
    value, errors = coerced_arguments(schema, args)
    if errors:
        raise invalid_arguments(tool, errors, javascript_numbers(args))
    return value


def coerced_arguments(schema: dict[str, Any], args: dict[str, Any]
                      ) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """`args` coerced to `schema` as pi coerces them, and every way they still do not fit,
    as (dotted path, problem) in pi's order."""
    args = javascript_numbers(args)
    value: dict[str, Any] = _coerce_types(
        _convert(_drop_optional_nulls(args, schema), schema), schema)
    return value, _errors(value, schema, "")


def invalid_arguments(tool: str, errors: list[tuple[str, str]], args: dict[str, Any]
                      ) -> ArgumentsError:
    """pi's words for arguments that do not fit: each (dotted path, problem), then the call's
    arguments."""
    lines = "\n".join(f"  - {path or 'root'}: {message}" for path, message in errors)
    return ArgumentsError(f'Validation failed for tool "{tool}":\n{lines}\n\n'
                          f"Received arguments:\n{js_pretty(args)}")


def javascript_numbers(value: Any) -> Any:
    """`value` with each integer a double cannot hold made the double JavaScript reads from
    its JSON (an infinity past the largest), as pi has it: a 400-digit `offset` is Infinity."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if abs(value) <= 2**53 else js_double(value)
    if isinstance(value, list):
        return [javascript_numbers(item) for item in value]
    if isinstance(value, dict):
        return {key: javascript_numbers(item) for key, item in value.items()}
    return value


def _drop_optional_nulls(value: Any, schema: dict[str, Any]) -> Any:
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_drop_optional_nulls(item, schema["items"]) for item in value]
    if not isinstance(value, dict):
        return value
    properties, required = schema.get("properties", {}), schema.get("required", [])
    return {key: _drop_optional_nulls(item, properties[key]) if key in properties else item
            for key, item in value.items()
            if not (item is None and key in properties and key not in required)}


def _convert(value: Any, schema: dict[str, Any]) -> Any:
    """TypeBox's Value.Convert, as pi-schema ports it, for these shapes."""
    kind = schema.get("type")
    if kind == "string":
        converted = _to_string(value)
        return value if converted is None else converted
    if kind == "number":
        number = to_number(value)
        return value if number is None else number
    if kind == "array":
        items = schema.get("items")
        if not isinstance(value, list):
            return [_convert(value, items) if isinstance(items, dict) else value]
        return [_convert(item, items) for item in value] if isinstance(items, dict) else value
    if kind == "object" and isinstance(value, dict):
        properties = schema.get("properties", {})
        return {key: _convert(item, properties[key]) if key in properties else item
                for key, item in value.items()}
    return value


def _coerce_types(value: Any, schema: dict[str, Any]) -> Any:
    """The primitive coercion left after conversion (Ajv's coerceTypes): a number that is no
    finite one still becomes a string."""
    kind = schema.get("type")
    if kind == "string" and isinstance(value, float):
        return js_number(value) if math.isfinite(value) else \
            "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if kind == "array" and isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_coerce_types(item, schema["items"]) for item in value]
    if kind == "object" and isinstance(value, dict):
        properties = schema.get("properties", {})
        return {key: _coerce_types(item, properties[key]) if key in properties else item
                for key, item in value.items()}
    return value


def _to_string(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)):
        return js_number(value) if isinstance(value, float) else str(value)
    if value is None:
        return "null"
    return value if isinstance(value, str) else None


def to_number(value: object) -> int | float | None:
    """`value` made a number as pi 1.6 coerces an argument to one (TypeBox's TryNumber:
    booleans, null as 0, text as JavaScript's Number() reads it, "true", "12n"); None when it
    is no finite number."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)):
        return value
    if value is None:
        return 0
    if not isinstance(value, str):
        return None
    number = js_to_number(value)
    if math.isfinite(number):
        return _whole(number)
    if value.lower() in ("false", "true"):
        return int(value.lower() == "true")
    if BIGINT.fullmatch(value) and abs(int(value[:-1])) <= MAX_SAFE_INTEGER:
        return int(value[:-1])
    return None


def _whole(number: float) -> int | float:
    """A whole number as an int, as JSON would have given it."""
    return int(number) if number.is_integer() and abs(number) <= 2**53 else number


def _errors(value: Any, schema: dict[str, Any], path: str) -> list[tuple[str, str]]:
    """pi-schema's account of why `value` does not fit: (dotted path, message), in its order."""
    kind = schema.get("type")
    if kind is not None and not _is(value, kind):
        return [(path, f"expected {kind}, got {js_type(value)}")]
    errors: list[tuple[str, str]] = []
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        errors += [(_join(path, key), "missing") for key in schema.get("required", [])
                   if key not in value]
        for key, item_schema in properties.items():
            if key in value:
                errors += _errors(value[key], item_schema, _join(path, key))
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            errors += _errors(item, schema["items"], _join(path, str(index)))
    return errors


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _is(value: Any, kind: str) -> bool:
    if kind == "number":
        return not isinstance(value, bool) and isinstance(value, int | float) and \
            math.isfinite(value)
    checks = {"string": str, "array": list, "object": dict}
    return isinstance(value, checks[kind]) if kind in checks else True


def js_type(value: Any) -> str:
    """pi-schema's name for the type of a value it refused."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    names = {float: "number", str: "string", list: "array", dict: "object"}
    return names.get(type(value), "object")


def js_pretty(value: Any, indent: str = "") -> str:
    """`value` as JavaScript's JSON.stringify(value, null, 2) writes it."""
    inner = indent + "  "
    if isinstance(value, dict):
        if not value:
            return "{}"
        members = ",\n".join(f"{inner}{_js_string(str(key))}: {js_pretty(item, inner)}"
                             for key, item in value.items())
        return f"{{\n{members}\n{indent}}}"
    if isinstance(value, list):
        if not value:
            return "[]"
        items = ",\n".join(f"{inner}{js_pretty(item, inner)}" for item in value)
        return f"[\n{items}\n{indent}]"
    if isinstance(value, str):
        return _js_string(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return js_number(value) if isinstance(value, float) else str(value)


def _js_string(text: str) -> str:
    """A JSON string as JSON.stringify writes it: a lone surrogate as its escape."""
    return SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(text, ensure_ascii=False))
