"""JSON cut off mid-stream read as far as it goes, as pi 1.6's StreamingJsonParser reads it
(pi-ai utils/streaming-json.js): what a tool call the stream never closed keeps as arguments."""

from __future__ import annotations

import re
from typing import Any

# An unterminated number longer than this shows nothing (pi's MAX_PENDING_SCALAR_LENGTH).
MAX_PENDING_SCALAR_LENGTH = 64
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_NUMBER_WITHOUT_EXPONENT_DIGITS = re.compile(r"(-?(?:0|[1-9]\d*)(?:\.\d+)?)[eE][+-]?")
_LITERALS = {"true": True, "false": False, "null": None}
_SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r",
                   "t": "\t"}
_HEX = frozenset("0123456789abcdefABCDEF")
_SCALAR_END = re.compile(r'[ \t\n\r,:{}\[\]"]')
_STRING_STOP = re.compile(r'["\\]')
_NOTHING = object()  # no value yet (None is JSON's null)


class _Frame:
    """An open object or array, and where its reading stands: at a key, colon, value or comma."""

    __slots__ = ("container", "key", "phase")

    def __init__(self, container: dict[str, Any] | list[Any]) -> None:
        self.container = container
        self.key: str | None = None
        self.phase = "value" if isinstance(container, list) else "key"


# Where a value goes: the open frame and its key or index, or (None, 0) for the root value.
Slot = tuple[_Frame | None, str | int]


class _Reader:
    """One pass over the text; pi's rules for what is incomplete or malformed hold throughout:
    an unterminated string shows what was read (an unfinished escape held back), a member
    whose value has not started is left out, missing commas and colons are tolerated, values
    in no valid place and unknown words are dropped, and text after the root value is ignored."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.root: Any = _NOTHING
        self.stack: list[_Frame] = []
        self.done = False

    def read(self) -> Any:
        text, at = self.text, 0
        while at < len(text) and not self.done:
            char = text[at]
            if char in "{[":
                self._open({} if char == "{" else [])
            elif char in "}]":
                self._close()
            elif char in ":,":
                self._separator(char)
            elif char == '"':
                at = self._string(at + 1)
                continue
            elif char not in " \t\n\r":
                at = self._scalar(at)
                continue
            at += 1
        return None if self.root is _NOTHING else self.root

    def _value_slot(self) -> Slot | None:
        if not self.stack:
            return (None, 0) if self.root is _NOTHING else None
        frame = self.stack[-1]
        if isinstance(frame.container, list):
            return frame, len(frame.container)
        if frame.phase in ("value", "colon") and frame.key is not None:  # `{"a" 1}` is {"a": 1}
            return frame, frame.key
        return None

    def _place(self, slot: Slot | None, value: Any) -> None:
        if slot is None:
            return
        frame, key = slot
        if frame is None:
            self.root = value
        elif isinstance(frame.container, list):
            assert isinstance(key, int)
            if key == len(frame.container):
                frame.container.append(value)
            else:
                frame.container[key] = value
        else:
            assert isinstance(key, str)
            frame.container[key] = value

    def _value_ended(self) -> None:
        if self.stack:
            self.stack[-1].phase = "comma"
        elif self.root is not _NOTHING:
            self.done = True

    def _open(self, container: dict[str, Any] | list[Any]) -> None:
        self._place(self._value_slot(), container)
        self.stack.append(_Frame(container))

    def _close(self) -> None:
        if self.stack:  # a stray closer is ignored
            self.stack.pop()
            self._value_ended()

    def _separator(self, char: str) -> None:
        frame = self.stack[-1] if self.stack else None
        if frame is None:
            return
        is_list = isinstance(frame.container, list)
        if char == ",":
            frame.phase = "value" if is_list else "key"
        elif not is_list and frame.phase == "colon":
            frame.phase = "value"

    def _string(self, start: int) -> int:
        frame = self.stack[-1] if self.stack else None
        # A string where a key or a comma is due is a key (a missing comma is tolerated).
        is_key = frame is not None and isinstance(frame.container, dict) and \
            frame.phase in ("key", "comma")
        slot = None if is_key else self._value_slot()
        value, end, closed = _string_text(self.text, start)
        if is_key:
            if closed and frame is not None:
                frame.key, frame.phase = value, "colon"
            return end
        self._place(slot, value)
        if closed:
            self._value_ended()
        return end

    def _scalar(self, start: int) -> int:
        slot = self._value_slot()
        delimiter = _SCALAR_END.search(self.text, start)
        if delimiter is None:  # unterminated: shows once what was read makes a value
            token = self.text[start:]
            if len(token) <= MAX_PENDING_SCALAR_LENGTH:
                value = _pending_scalar_value(token)
                if value is not _NOTHING:
                    self._place(slot, value)
            return len(self.text)
        value = _scalar_value(self.text[start:delimiter.start()])
        if value is not _NOTHING:
            self._place(slot, value)
        self._value_ended()
        return delimiter.start()


def _string_text(text: str, start: int) -> tuple[str, int, bool]:
    """The string starting at `start` decoded, where reading goes on, and whether it closed.
    An invalid escape (`\\d`, `\\u` without four hex digits) stays as text, as pi keeps it."""
    parts: list[str] = []
    at = start
    while True:
        stop = _STRING_STOP.search(text, at)
        if stop is None:
            parts.append(text[at:])
            return _pairs_joined(parts), len(text), False
        parts.append(text[at:stop.start()])
        at = stop.start() + 1
        if text[stop.start()] == '"':
            return _pairs_joined(parts), at, True
        if at == len(text):  # an unfinished escape is held back
            return _pairs_joined(parts), at, False
        char = text[at]
        if char in _SIMPLE_ESCAPES:
            parts.append(_SIMPLE_ESCAPES[char])
            at += 1
        elif char == "u":
            digits_end = at + 1
            while digits_end < min(at + 5, len(text)) and text[digits_end] in _HEX:
                digits_end += 1
            if digits_end == at + 5:
                parts.append(chr(int(text[at + 1:digits_end], 16)))
            elif digits_end == len(text):
                return _pairs_joined(parts), digits_end, False
            else:
                parts.append(text[at - 1:digits_end])
            at = digits_end
        else:
            parts.append("\\")  # the character after it is read as any other


def _pairs_joined(parts: list[str]) -> str:
    """The parts as one string, escaped surrogate pairs joined into their characters as
    JavaScript's strings join them; a lone surrogate is kept."""
    text = "".join(parts)
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _scalar_value(token: str) -> Any:
    if token in _LITERALS:
        return _LITERALS[token]
    return _number(token) if _NUMBER.fullmatch(token) else _NOTHING


def _pending_scalar_value(token: str) -> Any:
    for literal, value in _LITERALS.items():
        if literal.startswith(token):
            return value
    if _NUMBER.fullmatch(token):
        return _number(token)
    mantissa = _NUMBER_WITHOUT_EXPONENT_DIGITS.fullmatch(token)
    return _NOTHING if mantissa is None else _number(mantissa.group(1))


def _number(token: str) -> int | float:
    """A number as json.loads reads it, as the arguments of a finished call are read; an
    integer past Python's 4,300 digits as pi reads every number: a double (infinity)."""
    if any(char in token for char in ".eE"):
        return float(token)
    try:
        return int(token)
    except ValueError:
        return float(token)


def partial_value(text: str) -> Any:
    """The value of JSON `text` read as far as it goes; None when no value has started."""
    return _Reader(text).read()
