"""JSON.parse's error messages (V8's, in pi 1.6's Node), which pi keeps as a tool call's
`argumentsError`: pi-lsp's json_parse_error says the same of each text. pi 1.6's Node's words
are stored for machines without it, and checked against it where it is installed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pi_lsp.providers.base import parse_arguments
from pi_lsp.providers.json_errors import MAX_WORDED_CHARS, json_parse_error
from tests.test_system_messages import pi16_eval, pi16_node

STORED = Path(__file__).with_name("fixtures") / "pi16-json-parse-errors.json"
LONG = '{"path": "a.txt", "n": [1, -2.5e3, true, false, null], "o": {"k": "v\\u00e9\\n"}}'
# Texts JSON.parse refuses, a few it reads (None), each kind of V8's message: where a value,
# a name, a colon, a comma or the end is due; in a number, a word or a string; NaN and the
# other texts V8 names whole; an unexpected token shown whole, or in a stretch of 10
# characters either side at the start, middle and end of a long text; lines and columns after
# \n, \r and \r\n; characters past U+FFFF (two UTF-16 units each).
TEXTS = ["", " ", "{", "[", "{}", "[1]", '"s"', "NaN", "Infinity", "undefined", "[object Object]",
         "-Infinity", "-", "0", "01", "-01", "1.", "1.e3", "1e", "1e+", "1E-x", "tru", "t", "nul",
         "fals", "trux", "t1", 't"', '"', '"\\', '"\\u12"', '"\\u1', '"\\q"', '"\\\u00e9"',
         '"\\\U0001F600"', '"\x01"', '{"a" 1}', '{"a": }', '{"a": 1,}', "{,}", "[1,]", "[,1]",
         "[1 2]", '{"a": 1 "b": 2}', "1 2", "\ufeff{}", "{}x", "{path: 1}", "{'a': 1}",
         '{"a": "\U0001F600" x}', '{"a": \U0001F600}', "\U0001F600", LONG,
         LONG.replace("true", "tru"), LONG.replace("{", "x", 1), LONG[:-1] + "x",
         LONG.replace('"n"', '"n" '), LONG[:-3], '{\r\n "a": 1,\n\t"b": [\r 2 x]\n}',
         '{\r\n "a": 1\r\r "b": 2}', "[" * 50 + "1" + "]" * 49]


def _v8_messages() -> list[str | None]:
    """JSON.parse's message for each text, from pi 1.6's Node."""
    code = (f"process.stdout.write(JSON.stringify({json.dumps(TEXTS)}.map((text) => {{ "
            "try { JSON.parse(text); return null; } catch (error) { return error.message; } "
            "})));")
    return json.loads(pi16_eval(code))  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def v8_messages() -> list[str | None]:
    stored: list[str | None] = json.loads(STORED.read_text("utf-8"))
    if pi16_node() is not None:
        assert _v8_messages() == stored
    return stored


@pytest.mark.parametrize("at", range(len(TEXTS)))
def test_a_text_json_parse_refuses_is_said_to_be_refused_in_its_words(
        at: int, v8_messages: list[str | None]) -> None:
    """pi-lsp said it in Python's json's words ("Expecting ',' delimiter: line 1 column 8
    (char 7)"), where pi keeps V8's ("Expected ',' or '}' after property value in JSON at
    position 7 (line 1 column 8)")."""
    assert json_parse_error(TEXTS[at]) == v8_messages[at]


def test_a_refused_text_past_the_cap_is_told_in_pythons_words() -> None:
    """V8's words are worked out a character at a time on the event loop: 10 MB of refused
    arguments held it 12.8 s. Past MAX_WORDED_CHARS the reply says Python's words at once."""
    text = '{"a": [' + "1, " * (MAX_WORDED_CHARS // 3) + "x"
    assert json_parse_error(text[:MAX_WORDED_CHARS]) is not None
    assert json_parse_error(text) is None
    arguments, error = parse_arguments(text)
    assert arguments == {} and error is not None and \
        error.startswith("Expecting value: line 1 column")


def test_a_refused_text_past_the_cap_and_past_pythons_depth_is_refused_not_too_deep() -> None:
    """Past the cap json_parse_error says nothing, and a text nested past Python's parser was
    then called too deep, though JSON.parse refuses it for its token (pi 1.6: "Unexpected
    token 'x'"). Python's words say so; a readable one is still too deep."""
    refused = '{"a": ' + " " * MAX_WORDED_CHARS + "[" * 2_000 + "x"
    error = parse_arguments(refused)[1]
    assert error is not None and error.startswith("Expecting value: line 1 column")
    readable = '{"a": ' + " " * MAX_WORDED_CHARS + "[" * 2_000 + "]" * 2_000 + "}"
    error = parse_arguments(readable)[1]
    assert error is not None and error.startswith("Tool arguments nest more than")
