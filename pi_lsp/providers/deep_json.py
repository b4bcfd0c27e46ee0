"""JSON nested deeper than Python's parser goes (it recurses, about a thousand levels), read
with a stack of open containers instead, as JavaScript's JSON.parse reads any depth."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

_SPACE = re.compile(r"[ \t\n\r]*")
_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"')
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
_LITERALS = {"true": True, "false": False, "null": None}
_CLOSERS = {"[": "]", "{": "}"}


class _Reader:
    """One text read value by value; a container is placed in its parent once it closes."""

    def __init__(self, text: str, parse_int: Callable[[str], Any]) -> None:
        self.text, self.parse_int = text, parse_int
        self.at = 0

    def fail(self, what: str) -> json.JSONDecodeError:
        return json.JSONDecodeError(what, self.text, self.at)

    def space(self) -> str:
        """The next character after whitespace ("" at the end)."""
        self.at = _SPACE.match(self.text, self.at).end()  # type: ignore[union-attr]
        return self.text[self.at:self.at + 1]

    def token(self, pattern: re.Pattern[str], what: str) -> str:
        found = pattern.match(self.text, self.at)
        if found is None:
            raise self.fail(f"Expecting {what}")
        self.at = found.end()
        return found.group()

    def key(self) -> str:
        if self.space() != '"':
            raise self.fail("Expecting property name enclosed in double quotes")
        key: str = json.loads(self.token(_STRING, "string"))
        if self.space() != ":":
            raise self.fail("Expecting ':' delimiter")
        self.at += 1
        return key

    def scalar(self) -> Any:
        char = self.space()
        if char == '"':
            return json.loads(self.token(_STRING, "string"))
        for word, value in _LITERALS.items():
            if self.text.startswith(word, self.at):
                self.at += len(word)
                return value
        number = self.token(_NUMBER, "value")
        return float(number) if any(c in number for c in ".eE") else self.parse_int(number)

    def read(self) -> Any:
        open_: list[list[Any] | dict[str, Any]] = []  # innermost last
        keys: list[str] = []  # the key each open object's next value goes under
        while True:
            char = self.space()
            if char in _CLOSERS:
                self.at += 1
                container: list[Any] | dict[str, Any] = [] if char == "[" else {}
                if self.space() != _CLOSERS[char]:
                    open_.append(container)
                    if isinstance(container, dict):
                        keys.append(self.key())
                    continue
                self.at += 1
                value: Any = container
            else:
                value = self.scalar()
            while open_:  # place the value, and each container it closes
                parent = open_[-1]
                if isinstance(parent, list):
                    parent.append(value)
                else:
                    parent[keys[-1]] = value
                char = self.space()
                if char == ",":
                    self.at += 1
                    if isinstance(parent, dict):
                        keys[-1] = self.key()
                    break
                closer = "]" if isinstance(parent, list) else "}"
                if char != closer:
                    raise self.fail(f"Expecting ',' delimiter or '{closer}'")
                self.at += 1
                value = open_.pop()
                if isinstance(value, dict):
                    keys.pop()
            else:
                if self.space():
                    raise self.fail("Extra data")
                return value


def deep_loads(text: str, parse_int: Callable[[str], Any]) -> Any:
    """`text` read as `json.loads(text, parse_int=parse_int)` reads it (NaN and Infinity are
    no JSON here), at any depth."""
    return _Reader(text, parse_int).read()
