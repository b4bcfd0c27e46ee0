"""JSON text as pi (JavaScript) reads and writes it.

A JavaScript string may hold a lone surrogate (half an emoji a provider streamed); pi writes it
as the escape `\\udXXX` and reads it back as that one code unit. msgspec can do neither, so the
rare value or line that holds one takes the standard library's path; all else stays on msgspec.
"""

from __future__ import annotations

import json
import re
from typing import Any, Generic, TypeVar

import msgspec

T = TypeVar("T")

# An escaped backslash, an escaped surrogate pair, or a lone surrogate escape (in that order,
# so `\\ud83d`, a backslash then text, and a whole pair are never taken for a lone one).
_SURROGATE_ESCAPE = re.compile(
    rb"\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[dD][89a-fA-F][0-9a-fA-F]{2}"
)


def has_lone_surrogate(data: bytes) -> bool:
    """Whether JSON text `data` escapes a lone surrogate."""
    return b"\\u" in data and any(
        len(match.group()) == 6 for match in _SURROGATE_ESCAPE.finditer(data))


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _loads(data: bytes) -> Any:
    try:
        return json.loads(data, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as error:
        raise msgspec.DecodeError(f"JSON is malformed: {error}") from None


class Decoder(Generic[T]):
    """msgspec's JSON decoder for `kind`, which also reads lone surrogate escapes."""

    def __init__(self, kind: Any) -> None:
        self.kind = kind
        self.fast = msgspec.json.Decoder(kind)
        # Raw fields keep their JSON text; the standard library's path has to re-encode them.
        is_struct = isinstance(kind, type) and issubclass(kind, msgspec.Struct)
        fields = msgspec.structs.fields(kind) if is_struct else ()
        self._raw_fields = [f.encode_name for f in fields if f.type is msgspec.Raw]

    def decode(self, data: bytes | msgspec.Raw) -> T:
        try:
            decoded: T = self.fast.decode(data)
            return decoded
        except msgspec.DecodeError:
            if not has_lone_surrogate(bytes(data)):
                raise
        value = _loads(bytes(data))
        if isinstance(value, dict):
            for name in self._raw_fields:
                if name in value:
                    value[name] = msgspec.Raw(encoder.encode(value[name]))
        try:
            result: T = msgspec.convert(value, self.kind)
        except UnicodeEncodeError:  # msgspec's own error text cannot hold a lone surrogate
            raise msgspec.ValidationError("a lone surrogate where it does not fit") from None
        return result


def _raw_to_builtin(value: Any) -> Any:
    if isinstance(value, msgspec.Raw):
        return _loads(bytes(value))
    raise TypeError(f"cannot encode {type(value).__name__}")


class Encoder:
    """msgspec's JSON encoder, which also writes lone surrogates (as `JSON.stringify` does)."""

    def __init__(self) -> None:
        self.fast = msgspec.json.Encoder()

    def encode(self, value: Any) -> bytes:
        try:
            return self.fast.encode(value)
        except UnicodeEncodeError:
            pass
        builtins = msgspec.to_builtins(value, enc_hook=_raw_to_builtin)
        text = json.dumps(builtins, ensure_ascii=False, separators=(",", ":"))
        # Only a surrogate cannot be UTF-8; `backslashreplace` writes it as the JSON escape.
        return text.encode("utf-8", "backslashreplace")


encoder = Encoder()


def stringify(value: Any) -> str:
    """`value` as JavaScript's `JSON.stringify` writes it: compact, characters as they are."""
    return encoder.encode(value).decode()


def escape_line_separators(line: bytes) -> bytes:
    """A JSON line with U+2028/U+2029 written as escapes: the same JSON to pi, but no reader
    that splits lines on them (editors, older JavaScript) can cut it. (Outside strings JSON
    allows only ASCII, so every one found is inside a string.)"""
    if b"\xe2\x80" not in line:
        return line
    return line.replace("\u2028".encode(), b"\\u2028").replace("\u2029".encode(), b"\\u2029")
