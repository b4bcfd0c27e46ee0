"""JSON text as pi (JavaScript) reads and writes it.

A JavaScript string may hold a lone surrogate (half an emoji a provider streamed); pi writes it
as the escape `\\udXXX` and reads it back as that one code unit. msgspec can do neither, so the
rare value or line that holds one takes the standard library's path; all else stays on msgspec.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import operator
import re
from types import UnionType
from typing import Any, Generic, TypeVar, get_args

import msgspec

T = TypeVar("T")
NUMBER_OUT_OF_RANGE = "Number out of range"  # msgspec's words for a number past a double's
INTEGER_OUT_OF_RANGE = "Integer value out of range"  # and for an integer of 4,301 digits or more
# What JavaScript's trim() (and Number()) take for white space: Python's strip() differs (it
# keeps U+FEFF, and takes U+001C-U+001F and U+0085).
JS_WHITESPACE = ("\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
                 "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff")

# The texts JavaScript's Number() reads, once trimmed.
DECIMAL = re.compile(r"[+-]?(?:Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)")
RADIX = re.compile(r"0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+")

# An escaped backslash, an escaped surrogate pair, or a lone surrogate escape (in that order,
# so `\\ud83d`, a backslash then text, and a whole pair are never taken for a lone one).
_SURROGATE_ESCAPE = re.compile(
    rb"\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[dD][89a-fA-F][0-9a-fA-F]{2}"
)

# What may begin a surrogate escape (`\\ud800` too: the full pattern tells them apart).
_ANY_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def has_lone_surrogate(data: bytes) -> bool:
    """Whether JSON text `data` escapes a lone surrogate."""
    return b"\\u" in data and any(
        len(match.group()) == 6 for match in _SURROGATE_ESCAPE.finditer(data))


def lone_surrogates_replaced(data: bytes) -> bytes:
    """JSON text `data` with each lone surrogate escape as U+FFFD's, for a reader that refuses
    the whole text over one (Neovim's)."""
    if _ANY_SURROGATE_ESCAPE.search(data) is None:  # most bodies: one scan, no callback
        return data
    return _SURROGATE_ESCAPE.sub(
        lambda match: b"\\ufffd" if len(match.group()) == 6 else match.group(), data)


def refuse_constant(name: str) -> Any:
    """The parse_constant that refuses NaN and Infinity, as JSON.parse does."""
    raise ValueError(f"{name} is not JSON")


def js_integer(text: str) -> int | float:
    """An integer's JSON text as JSON.parse reads it: past a double's range (from 309 digits
    on, and always past Python's limit of 4,300) Infinity; else exact, as JavaScript writes it."""
    number = float(text)  # never raises: a text past the range gives inf
    return number if math.isinf(number) else int(text)


def _loads(data: bytes) -> Any:
    try:
        return json.loads(data, parse_int=js_integer, parse_constant=refuse_constant)
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
        self._raw_fields = [f.encode_name for f in fields if _holds_raw(f.type)]

    def decode(self, data: bytes | msgspec.Raw) -> T:
        try:
            decoded: T = self.fast.decode(data)
            return decoded
        except msgspec.ValidationError as error:
            # JSON.parse reads a number past a double's range (1e400, or 1 and 5,000 zeros) as
            # Infinity, as the standard library does (with js_integer); msgspec refuses it.
            if not str(error).startswith((NUMBER_OUT_OF_RANGE, INTEGER_OUT_OF_RANGE)):
                raise
        except msgspec.DecodeError:
            if not has_lone_surrogate(bytes(data)):
                raise
        value = _loads(bytes(data))
        if isinstance(value, dict):
            for name in self._raw_fields:
                if name in value:
                    value[name] = msgspec.Raw(encoder.encode(value[name]))
        result: T = convert(value, self.kind)
        return result


def _holds_raw(kind: Any) -> bool:
    """Whether a field of type `kind` may hold msgspec.Raw (`Raw`, or `Raw | UNSET`)."""
    return kind is msgspec.Raw or (isinstance(kind, UnionType) and msgspec.Raw in get_args(kind))


def convert(value: Any, kind: Any) -> Any:
    """`value` converted to `kind`; msgspec.ValidationError, naming where, when a lone surrogate
    is in the way."""
    try:
        return msgspec.convert(value, kind)
    except UnicodeEncodeError:  # msgspec can neither match a field to it nor say so in an error
        pass
    known = _known_keys(value, _type_info(kind))
    with contextlib.suppress(UnicodeEncodeError):
        return msgspec.convert(known, kind)
    raise surrogate_error(known, kind)


@functools.cache  # a few kinds, each looked at once: 1.8 ms for an entry's, at every such line
def _type_info(kind: Any) -> msgspec.inspect.Type:
    return msgspec.inspect.type_info(kind)


def _known_keys(value: Any, kind: msgspec.inspect.Type | None) -> Any:
    """`value` without the keys holding a lone surrogate where `kind` reads an object as a
    Struct, at any depth: they name no field, so are unknown keys, which JSON.parse's readers
    (and msgspec) ignore. A dict's own keys are data and stay."""
    if isinstance(kind, msgspec.inspect.UnionType):
        kind = _member_for(value, kind)
    if isinstance(value, dict):
        if isinstance(kind, msgspec.inspect.StructType) and not kind.forbid_unknown_fields:
            fields = {field.encode_name: field.type for field in kind.fields}
            return {key: _known_keys(item, fields[key]) if key in fields else item
                    for key, item in value.items() if not has_surrogate(key)}
        if isinstance(kind, msgspec.inspect.DictType):
            return {key: _known_keys(item, kind.value_type) for key, item in value.items()}
    if isinstance(value, list) and isinstance(kind, msgspec.inspect.ListType):
        return [_known_keys(item, kind.item_type) for item in value]
    return value


def _member_for(value: Any, union: msgspec.inspect.UnionType) -> msgspec.inspect.Type | None:
    """The one member of `union` that reads `value` as an object or a list (a tagged Struct
    by its tag); None where none or several might."""
    shaped = (msgspec.inspect.StructType, msgspec.inspect.DictType) if isinstance(value, dict) \
        else (msgspec.inspect.ListType,)
    members = [member for member in union.types if isinstance(member, shaped)]
    tagged = [member for member in members if isinstance(member, msgspec.inspect.StructType)
              and member.tag_field is not None and isinstance(value, dict)
              and value.get(member.tag_field) == member.tag]
    return (tagged or members)[0] if len(tagged or members) == 1 else None


def surrogate_error(value: Any, kind: Any) -> msgspec.ValidationError:
    """Why `value`, whose lone surrogate msgspec could not match to `kind` (a field's name or
    a literal), does not fit: msgspec's own words, with the path, for U+FFFD in its place."""
    try:
        msgspec.convert(json.loads(lone_surrogates_replaced(json.dumps(value).encode())), kind)
    except msgspec.ValidationError as error:
        return msgspec.ValidationError(f"{error} (a lone surrogate, shown as U+FFFD)")
    except (RecursionError, TypeError, ValueError):  # TypeError: a value JSON cannot write
        pass
    return msgspec.ValidationError("a lone surrogate where it does not fit")


def has_surrogate(text: str) -> bool:
    """Whether `text` holds a surrogate, which UTF-8 (so no file name or header) can carry."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return True
    return False


def js_utf8(text: str) -> str:
    """`text` as JavaScript writes it in UTF-8 (a file's name, Buffer.from): each lone
    surrogate as U+FFFD, which UTF-8 can carry."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


# One of each for any object, and any value, read as JSON.parse reads them.
object_decoder: Decoder[dict[str, Any]] = Decoder(dict[str, Any])
value_decoder: Decoder[Any] = Decoder(Any)


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
        builtins = _finite(msgspec.to_builtins(value, enc_hook=_raw_to_builtin))
        text = json.dumps(builtins, ensure_ascii=False, separators=(",", ":"))
        # Only a surrogate cannot be UTF-8; `backslashreplace` writes it as the JSON escape.
        return text.encode("utf-8", "backslashreplace")


def _finite(value: Any) -> Any:
    """`value` with each number JSON cannot write (1e400 read as inf) as null, as msgspec and
    JSON.stringify write it: the standard library would write `Infinity`, which is no JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


encoder = Encoder()


# Integers a double holds exactly: JavaScript writes those as they are.
_EXACT_INTEGERS = 2**53


def js_number(value: float) -> str:
    """`value` as JavaScript's Number.prototype.toString writes it (ECMAScript
    Number::toString): the shortest digits that read back as `value` (Python's repr finds the
    same), fixed notation from 1e-7 up to 1e21, else an exponent with its sign; no ".0" on a
    whole number, -0 as 0; NaN and the infinities as null (JSON.stringify's)."""
    if value != value or value in (math.inf, -math.inf):
        return "null"
    if value == 0:
        return "0"
    shortest = repr(value)
    if "e" not in shortest:  # repr is fixed from 1e-4 to 1e16: so is JavaScript, same digits
        return shortest[:-2] if shortest.endswith(".0") else shortest
    sign = "-" if value < 0 else ""
    mantissa, _, exponent = shortest.lstrip("-").partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    # value = 0.digits * 10**point (the k digits and n of ECMAScript's description)
    point = len(whole) + int(exponent or 0) - (len(whole + fraction) - len(digits))
    digits = digits.rstrip("0")
    count = len(digits)
    if count <= point <= 21:
        return sign + digits + "0" * (point - count)
    if 0 < point <= 21:
        return sign + digits[:point] + "." + digits[point:]
    if -6 < point <= 0:
        return sign + "0." + "0" * -point + digits
    power = point - 1
    shown = digits if count == 1 else digits[0] + "." + digits[1:]
    return f"{sign}{shown}e{'+' if power >= 0 else '-'}{abs(power)}"


def js_string(value: Any) -> str:
    """`String(value)` as JavaScript makes it, where pi puts a field of another type into text:
    numbers as JavaScript writes them, an object as `[object Object]`, an array's items joined
    with commas, a missing value (UNSET) as `undefined`."""
    if isinstance(value, str):
        return value
    if value is msgspec.UNSET or value is None:
        return "undefined" if value is msgspec.UNSET else "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        number = js_double(value)
        if number != number or number in (math.inf, -math.inf):
            return "NaN" if number != number else ("Infinity" if number > 0 else "-Infinity")
        return js_number(number)
    if isinstance(value, list):
        return ",".join("" if item is None else js_string(item) for item in value)
    return "[object Object]"


def js_field(value: Any, key: str) -> Any:
    """`value[key]` as JavaScript reads a field of JSON: UNSET where there is none (a text, a
    number or null holds no named field; pi's read of null's throws, pi-lsp's gives none)."""
    return value.get(key, msgspec.UNSET) if isinstance(value, dict) else msgspec.UNSET


def _array_index(key: str) -> bool:
    return key == "0" or (key[:1] in "123456789" and key.isascii() and key.isdigit()
                          and int(key) < 2**32 - 1)


def js_entries(value: Any) -> list[tuple[str, Any]]:
    """`Object.entries(value ?? {})` as JavaScript makes it: an object's keys that are array
    indexes ("0", "12") first, in order, then the rest as written; a text's UTF-16 code units
    and a list's items, each under its index; nothing of a number or a boolean."""
    if isinstance(value, str):
        units = value.encode("utf-16-le", "surrogatepass")
        return [(str(index // 2), units[index:index + 2].decode("utf-16-le", "surrogatepass"))
                for index in range(0, len(units), 2)]
    if isinstance(value, list):
        return [(str(index), item) for index, item in enumerate(value)]
    items = list(value.items()) if isinstance(value, dict) else []
    indexed = sorted((item for item in items if _array_index(item[0])), key=lambda i: int(i[0]))
    return [*indexed, *(item for item in items if not _array_index(item[0]))]


def js_truthy(value: Any) -> bool:
    """Whether JavaScript reads `value` as true (an empty list or object is)."""
    return isinstance(value, dict | list) or bool(value)


def js_to_number(text: str) -> float:
    """JavaScript's Number(text): NaN when it is no number."""
    stripped = text.strip(JS_WHITESPACE)
    if not stripped:
        return 0.0
    if RADIX.fullmatch(stripped):
        return js_double(int(stripped, 0))
    if DECIMAL.fullmatch(stripped):
        return float(stripped.replace("Infinity", "inf"))
    return math.nan


def js_double(value: int | float) -> float:
    """`value` as the double JavaScript reads it as: an integer past the largest double is
    Infinity there (float() overflows on a 401-digit one)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _js_integer(value: int) -> str:
    """An integer as JavaScript writes the double it reads it as (exact up to 2**53)."""
    if -_EXACT_INTEGERS <= value <= _EXACT_INTEGERS:
        return int.__repr__(value)
    try:
        return js_number(float(value))
    except OverflowError:  # past the largest double: Infinity to JavaScript
        return "null"


def _as_is(item: Any) -> bool:
    """A leaf msgspec writes as JavaScript does: a string, bool, None or an exact integer."""
    kind = type(item)
    return kind is str or kind is bool or item is None or (
        kind is int and -_EXACT_INTEGERS <= item <= _EXACT_INTEGERS)


def _js_numbers(value: Any) -> Any:
    """`value` with each float, and each integer JavaScript cannot hold exactly, as JavaScript
    writes it (raw JSON text); `value` itself when it has none. (Leaves are looked at in
    place: the walk is on every stringify.)"""
    kind = type(value)
    if kind is float:
        return msgspec.Raw(js_number(value).encode())
    if kind is int:
        return value if -_EXACT_INTEGERS <= value <= _EXACT_INTEGERS else \
            msgspec.Raw(_js_integer(value).encode())
    if kind is dict:
        changed = {key: new for key, item in value.items()
                   if not _as_is(item) and (new := _js_numbers(item)) is not item}
        return {**value, **changed} if changed else value
    if kind is list or kind is tuple:
        items = [item if _as_is(item) else _js_numbers(item) for item in value]
        return value if all(map(operator.is_, items, value)) else items
    if isinstance(value, msgspec.Struct):
        builtins = msgspec.to_builtins(value)
        new = _js_numbers(builtins)
        return value if new is builtins else new
    return value  # a string, bool, None, or a subclass msgspec writes as its base


# The standard library's pure-Python encoder, which takes how numbers are written (its C
# encoder does not): for the rare value with both such a number and a lone surrogate.
_iterencode = json.encoder._make_iterencode  # type: ignore[attr-defined]


def _js_dumps(value: Any) -> bytes:
    builtins = msgspec.to_builtins(value, enc_hook=_raw_to_builtin)
    chunks = _iterencode({}, _raw_to_builtin, json.encoder.py_encode_basestring, None,
                         js_number, ":", ",", False, False, True, _intstr=_js_integer)
    return "".join(chunks(builtins, 0)).encode("utf-8", "backslashreplace")


def stringify(value: Any) -> str:
    """`value` as JavaScript's `JSON.stringify` writes it: compact, characters as they are,
    numbers as JavaScript writes them (`js_number`: msgspec would write 1e-6, 1e21 or 1.0)."""
    return js_json(value).decode()


def js_json(value: Any) -> bytes:
    """`stringify`'s text as UTF-8 (a lone surrogate as its escape), for a line pi writes."""
    numbers = _js_numbers(value)
    if numbers is value:
        return encoder.encode(value)
    try:
        return encoder.fast.encode(numbers)
    except UnicodeEncodeError:
        return _js_dumps(value)


def escape_line_separators(line: bytes) -> bytes:
    """A JSON line with U+2028/U+2029 written as escapes: the same JSON to pi, but no reader
    that splits lines on them (editors, older JavaScript) can cut it. (Outside strings JSON
    allows only ASCII, so every one found is inside a string.)"""
    if b"\xe2\x80" not in line:
        return line
    return line.replace("\u2028".encode(), b"\\u2028").replace("\u2029".encode(), b"\\u2029")
