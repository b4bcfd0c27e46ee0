"""Why JavaScript's JSON.parse refuses a text, in V8's words (Node 22's, pi 1.6's): where pi
keeps the message (a tool call's `argumentsError`), pi-lsp keeps the same one.

Positions count UTF-16 units, as JavaScript's strings do; the text is read with a stack of
open containers, so any depth is read without recursion.
"""

from __future__ import annotations

import re

_SPACES = re.compile(r"[ \t\n\r]*")
_PLAIN = re.compile(r'[^"\\\x00-\x1f]*')  # a string's characters that need no second look
_DIGITS = "0123456789"
_LITERALS = {"t": "true", "f": "false", "n": "null"}
# V8's one-character tokens that are not "Unexpected token 'x'" where a value is due.
_NAMED_TOKENS = {'"': "string", "-": "number", **dict.fromkeys(_DIGITS, "number")}
_SPECIAL = ("[object Object]", "undefined", "Infinity", "NaN")  # V8's IsSpecialString
_CONTEXT = 10  # characters of the text shown either side of an unexpected token
_ESCAPES = frozenset('"\\/bfnrt')
_HEX_DIGITS = "0123456789abcdefABCDEF"
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")

PROPERTY_NAME_OR_BRACE = "Expected property name or '}' in JSON"
QUOTED_PROPERTY_NAME = "Expected double-quoted property name in JSON"
COLON = "Expected ':' after property name in JSON"
COMMA_OR_BRACE = "Expected ',' or '}' after property value in JSON"
COMMA_OR_BRACKET = "Expected ',' or ']' after array element in JSON"
AFTER_JSON = "Unexpected non-whitespace character after JSON"
UNTERMINATED_STRING = "Unterminated string in JSON"
CONTROL_CHARACTER = "Bad control character in string literal in JSON"
BAD_ESCAPE = "Bad escaped character in JSON"
BAD_UNICODE_ESCAPE = "Bad Unicode escape in JSON"
NO_NUMBER_AFTER_MINUS = "No number after minus sign in JSON"
UNTERMINATED_FRACTION = "Unterminated fractional number in JSON"
NO_EXPONENT_NUMBER = "Exponent part is missing a number in JSON"


class _Refused(Exception):
    """JSON.parse's error message."""


def _utf16(text: str) -> str:
    """`text` with each character past U+FFFF as its two surrogates: one unit a character."""
    return _ASTRAL.sub(lambda found: _pair(found.group()), text)


def _pair(char: str) -> str:
    code = ord(char) - 0x10000
    return chr(0xD800 + (code >> 10)) + chr(0xDC00 + (code & 0x3FF))


class _Reader:
    """One text read as V8's JsonParser reads it, up to the first thing it refuses."""

    def __init__(self, text: str) -> None:
        self.text = _utf16(text)
        self.at = 0

    def char(self) -> str:
        """The character at the reading position ("" at the end)."""
        return self.text[self.at:self.at + 1]

    def space(self) -> str:
        """The next character after whitespace ("" at the end)."""
        self.at = _SPACES.match(self.text, self.at).end()  # type: ignore[union-attr]
        return self.char()

    def refuse(self, what: str) -> _Refused:
        """`what` went wrong at the reading position, said with where (V8's line and column:
        \\r\\n is one line break, \\r or \\n alone one too)."""
        before = self.text[:self.at]
        line = before.replace("\r\n", "\n").replace("\r", "\n")
        column = len(before) - max(before.rfind("\n"), before.rfind("\r"))
        return _Refused(f"{what} at position {self.at} "
                        f"(line {line.count(chr(10)) + 1} column {column})")

    def unexpected(self) -> _Refused:
        """The token at the reading position, where none of its kind may come."""
        char = self.char()
        if not char:
            return _Refused("Unexpected end of JSON input")
        if char in _NAMED_TOKENS:
            return self.refuse(f"Unexpected {_NAMED_TOKENS[char]} in JSON")
        text, at = self.text, self.at
        if text in _SPECIAL:
            return _Refused(f'"{text}" is not valid JSON')
        if len(text) <= 2 * _CONTEXT:
            return _Refused(f"Unexpected token '{char}', \"{text}\" is not valid JSON")
        start, end = max(at - _CONTEXT, 0), at + _CONTEXT
        lead = "..." if at >= _CONTEXT else ""
        tail = "..." if at < len(text) - _CONTEXT else ""
        return _Refused(f"Unexpected token '{char}', {lead}\"{text[start:end]}\"{tail} is not "
                        f"valid JSON")

    def expect(self, wanted: str, what: str) -> None:
        if self.space() != wanted:
            raise self.refuse(what)
        self.at += 1

    def key(self, what: str) -> None:
        if self.space() != '"':
            raise self.refuse(what)
        self.string()
        self.expect(":", COLON)

    def string(self) -> None:
        self.at += 1
        while True:
            self.at = _PLAIN.match(self.text, self.at).end()  # type: ignore[union-attr]
            char = self.char()
            if not char:
                raise self.refuse(UNTERMINATED_STRING)
            if char == '"':
                self.at += 1
                return
            if char < " ":
                raise self.refuse(CONTROL_CHARACTER)
            self.at += 1
            if char == "\\":
                self._escape()

    def _escape(self) -> None:
        char = self.char()
        if not char:
            raise self.unexpected()
        if char == "u":
            self.at += 1
            for _ in range(4):
                if not self.char() or self.char() not in _HEX_DIGITS:
                    raise self.refuse(BAD_UNICODE_ESCAPE)
                self.at += 1
        elif char in _ESCAPES:
            self.at += 1
        else:  # V8 names a character past Latin-1 as a token
            raise self.refuse(BAD_ESCAPE) if char <= "\xff" else self.unexpected()

    def digits(self) -> int:
        start = self.at
        while self.char() and self.char() in _DIGITS:
            self.at += 1
        return self.at - start

    def number(self) -> None:
        if self.char() == "-":
            self.at += 1
            if not self.char() or self.char() not in _DIGITS:
                raise self.refuse(NO_NUMBER_AFTER_MINUS)
        if self.char() == "0":
            self.at += 1
            if self.char() and self.char() in _DIGITS:
                raise self.unexpected()
        else:
            self.digits()
        if self.char() == ".":
            self.at += 1
            if not self.digits():
                raise self.refuse(UNTERMINATED_FRACTION)
        if self.char() and self.char() in "eE":
            self.at += 1
            if self.char() and self.char() in "+-":
                self.at += 1
            if not self.digits():
                raise self.refuse(NO_EXPONENT_NUMBER)

    def literal(self, word: str) -> None:
        for expected in word:
            if self.char() != expected:
                raise self.unexpected()
            self.at += 1

    def scalar(self) -> None:
        char = self.char()
        if char == '"':
            self.string()
        elif char == "-" or (char and char in _DIGITS):
            self.number()
        elif char in _LITERALS:
            self.literal(_LITERALS[char])
        else:
            raise self.unexpected()

    def read(self) -> None:
        open_: list[str] = []  # the closer each open container waits for, innermost last
        while True:
            char = self.space()
            if char in ("{", "["):
                self.at += 1
                closer = "}" if char == "{" else "]"
                if self.space() == closer:
                    self.at += 1
                else:
                    open_.append(closer)
                    if closer == "}":
                        self.key(PROPERTY_NAME_OR_BRACE)
                    continue
            else:
                self.scalar()
            if self._closed(open_):
                return

    def _closed(self, open_: list[str]) -> bool:
        """After a value: close what it ends; whether the text is read (False: a value is due)."""
        while open_:
            char, closer = self.space(), open_[-1]
            if char == ",":
                self.at += 1
                if closer == "}":
                    self.key(QUOTED_PROPERTY_NAME)
                return False
            if char != closer:
                raise self.refuse(COMMA_OR_BRACE if closer == "}" else COMMA_OR_BRACKET)
            self.at += 1
            open_.pop()
        if self.space():
            raise self.refuse(AFTER_JSON)
        return True


# The reader goes a character at a time (about 2.5 µs each, on the event loop as a reply
# streams: 10 MB of refused arguments held it 12.8 s); a longer text is told in Python's words.
MAX_WORDED_CHARS = 100_000


def json_parse_error(text: str) -> str | None:
    """The message of the SyntaxError JSON.parse throws on `text` (None: it reads it, or the
    text is longer than MAX_WORDED_CHARS)."""
    if len(text) > MAX_WORDED_CHARS:
        return None
    try:
        _Reader(text).read()
    except _Refused as refused:  # surrogates paired again, as a JavaScript string shows them
        return str(refused).encode("utf-16-le", "surrogatepass").decode("utf-16-le",
                                                                         "surrogatepass")
    return None
