"""What a `message` entry puts in the context, against the standard library's reading of it:
a null or missing content emptied for the roles that have one, on JSON spelled in any valid
way (whitespace, escaped keys, repeated keys, nulls nested deeper, lone surrogates); and the
context's messages alone, as the CLI takes them, against the whole projection."""

from __future__ import annotations

import json
from typing import Any

import msgspec
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pi_lsp.context.projection import (
    CONTENT_ROLES,
    entry_messages,
    project_messages,
    project_path,
    with_content,
)
from pi_lsp.session.entries import envelope_decoder
from pi_lsp.session.journal import Record
from pi_lsp.session.tree import SessionTree
from tests.conftest import ROOT


class Pairs(list[tuple[str, Any]]):
    """A JSON object as written: its members in order, repeated keys kept."""


def expected(message: bytes) -> bytes:
    """The old reading, spelled out: msgspec rejects the head when any `role` is not a string,
    and otherwise takes the last of each key."""
    value = json.loads(message, object_pairs_hook=Pairs)
    if not isinstance(value, Pairs):
        return message
    roles = [v for k, v in value if k == "role"]
    contents = [v for k, v in value if k == "content"]
    if not all(isinstance(role, str) for role in roles) or (contents and contents[-1] is not None):
        return message
    role = roles[-1] if roles else ""
    if role == "system":
        return bytes(with_content(msgspec.Raw(message), ""))
    if role in CONTENT_ROLES:
        return bytes(with_content(msgspec.Raw(message), []))
    return message


def record_of(message: bytes) -> Record:
    """A `message` entry as loading reads it (a line with a lone surrogate is read again by the
    standard library, which writes its message anew)."""
    line = b'{"type":"message","id":"aaaaaaaa","parentId":null,"message":' + message + b"}"
    return Record(1, msgspec.Raw(line), envelope_decoder.decode(line))


WHITESPACE = st.sampled_from(["", " ", "\t", "\n", "\r\n", "  \t"])
KEYS = st.sampled_from(["role", "content", "arguments", "null", "text"])
ROLES = st.sampled_from(["user", "assistant", "toolResult", "system", "custom", "bashExecution"])
TEXT = st.text(alphabet=st.sampled_from(list('nul "\\:,}{\n😀\ud83d')), max_size=10)
LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-9, 9), TEXT, ROLES)


def _objects(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Pairs]:
    return st.lists(st.tuples(KEYS, children), max_size=4).map(Pairs)


VALUES = st.recursive(LEAVES, lambda c: st.one_of(st.lists(c, max_size=3), _objects(c)),
                      max_leaves=10)
MEMBERS = st.one_of(st.tuples(st.just("role"), st.one_of(ROLES, st.integers(0, 1))),
                    st.tuples(st.just("content"), st.one_of(st.none(), VALUES)),
                    st.tuples(KEYS, VALUES))


@st.composite
def spelled(draw: st.DrawFn, value: Any) -> str:
    """`value` as JSON text, with whitespace between tokens and keys sometimes escaped."""
    ws = draw(WHITESPACE)
    if isinstance(value, Pairs):
        members = [f"{ws}{draw(_key(key))}{draw(WHITESPACE)}:{draw(WHITESPACE)}"
                   f"{draw(spelled(item))}{draw(WHITESPACE)}" for key, item in value]
        return "{" + ",".join(members) + ws + "}"
    if isinstance(value, list):
        return "[" + ",".join(f"{ws}{draw(spelled(item))}" for item in value) + ws + "]"
    if isinstance(value, str):  # only as an escape is a lone surrogate writable
        lone = any(0xD800 <= ord(char) <= 0xDFFF for char in value)
        return json.dumps(value, ensure_ascii=lone or draw(st.booleans()))
    return json.dumps(value)


@st.composite
def _key(draw: st.DrawFn, key: str) -> str:
    if draw(st.booleans()):
        return '"' + "".join(f"\\u{ord(char):04x}" for char in key) + '"'
    return json.dumps(key)


@st.composite
def messages(draw: st.DrawFn) -> bytes:
    value = Pairs(draw(st.lists(MEMBERS, max_size=5)))
    return draw(spelled(value)).encode()


@settings(max_examples=300, deadline=None)
@given(messages())
@example(b'{"role":"user","content":null}')
@example(b'{ "role" : "user" ,\n "content" : null }')
@example(b'{"role":"system","content"\t:\tnull,"timestamp":1}')
@example(b'{"role":"assistant"}')
@example(b'{"role":"toolResult","arguments":{"content":null},"content":"x"}')
@example(b'{"role":"user","arguments":{"content":"x"}}')
@example(b'{"role":"user","text":"\\"content\\":[]"}')
@example(b'{"role":"user","\\u0063ontent":null}')
@example(b'{"role":"user","content":[],"content":null}')
@example(b'{"role":"user","content":null,"content":"x"}')
@example(b'{"role":1,"role":"user"}')
@example(b'{"role":"user","content":"\\ud83d","text":null}')
@example(b'{"role":"assistant","content":null,"text":"\\udc00 null"}')
@example(b'["role","content",null]')
def test_a_message_in_the_context_agrees_with_its_plain_reading(message: bytes) -> None:
    record = record_of(message)
    in_context = [bytes(raw) for raw in entry_messages(record)]
    assert in_context == [expected(bytes(record.env.message))]


def test_the_messages_alone_are_the_projections_at_every_entry() -> None:
    samples = ROOT / "tests" / "conformance"
    for path in sorted(samples.glob("*.jsonl")) + sorted((samples / "pi16").glob("*.jsonl")):
        tree = SessionTree.open(str(path))
        for record in tree.records:
            on_path = tree.path_to(record.env.id)
            projection = project_path(on_path)
            assert project_messages(on_path) == (projection.messages, projection.settings), \
                (path.name, record.env.id)
