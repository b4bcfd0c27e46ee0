"""Numbers in JSON text as JavaScript's JSON.stringify writes them (Number.prototype.toString),
which `stringify` owes pi 1.6: tool-call arguments on both OpenAI wires, token estimates and the
summarizer's text all go through it. Fixed cases always; many more against node's own
JSON.stringify where pi 1.6's node is installed."""

from __future__ import annotations

import json
import math
import struct
import subprocess
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pi_lsp.session.entries import AssistantMessage, ToolCall, Usage
from pi_lsp.session.jsontext import Decoder, js_number, lone_surrogates_replaced, stringify
from pi_lsp.summarize.serialize import serialize_conversation
from tests.test_system_messages import pi16_node
from tests.waits import PROCESS_CEILING_S

# (value, what JSON.stringify writes), the right column computed with node.
CASES: list[tuple[Any, str]] = [
    (0.000001, "0.000001"), (1e-7, "1e-7"), (1.25e-7, "1.25e-7"), (0.0000125, "0.0000125"),
    (1e21, "1e+21"), (1e20, "100000000000000000000"), (1.5e300, "1.5e+300"),
    (-1e21, "-1e+21"), (1.0, "1"), (100.0, "100"), (-0.0, "0"), (0.0, "0"), (-1.5, "-1.5"),
    (0.1 + 0.2, "0.30000000000000004"), (123.456, "123.456"), (1e16, "10000000000000000"),
    (2.0**53, "9007199254740992"), (5e-324, "5e-324"),
    (1.7976931348623157e308, "1.7976931348623157e+308"),
    (1.23456789e20, "123456789000000000000"), (1.2345678901234568e21, "1.2345678901234568e+21"),
    (math.nan, "null"), (math.inf, "null"), (-math.inf, "null"),
    (12345678901234567890, "12345678901234567000"), (2**60, "1152921504606847000"),
    (10**21, "1e+21"), (10**400, "null"), (-(2**53) - 1, "-9007199254740992"), (7, "7"),
]


@pytest.mark.parametrize(("value", "written"), CASES)
def test_numbers_are_written_as_javascript_writes_them(value: Any, written: str) -> None:
    assert stringify(value) == written
    assert stringify({"a": [value, "1.0e5"]}) == f'{{"a":[{written},"1.0e5"]}}'


def test_numbers_read_from_json_are_written_back_as_pi_wrote_them() -> None:
    read = Decoder(Any).decode(b"[0.000001,1e+21,1.5e+300]")
    assert stringify(read) == "[0.000001,1e+21,1.5e+300]"


def test_a_lone_surrogate_beside_a_number_keeps_both_as_javascript_writes_them() -> None:
    assert stringify({"t": "\ud83d", "n": [1e-7, 2.0, 2**64]}) == \
        '{"t":"\\ud83d","n":[1e-7,2,18446744073709552000]}'


def test_the_summarizers_text_writes_tool_call_numbers_as_pi_does() -> None:
    """pi writes each argument with JSON.stringify (compaction/utils.js); it read `n=1e21`
    (msgspec's writing), where pi 1.6's text says `n=1e+21` (found by a differential fuzz)."""
    call = ToolCall(id="t1", name="read",
                    arguments={"path": "a.py", "n": 1e21, "t": 1e-7, "x": 0.000015})
    said = AssistantMessage(content=[call], api="anthropic-messages", provider="anthropic",
                            model="m", usage=Usage(), stop_reason="toolUse", timestamp=1)
    assert serialize_conversation([said]) == \
        '[Assistant tool calls]: read(path="a.py", n=1e+21, t=1e-7, x=0.000015)'


def test_a_value_without_such_numbers_is_written_as_msgspec_writes_it() -> None:
    value = {"path": "a1.0e5.py", "n": [1, 2, -3], "ok": True, "none": None}
    assert stringify(value) == json.dumps(value, separators=(",", ":"))


# Node's own JSON.stringify of each double (bits as hex) and each integer read by JSON.parse.
NODE_SCRIPT = """
const input = JSON.parse(require("fs").readFileSync(0, "utf8"));
const view = new DataView(new ArrayBuffer(8));
const doubles = input.doubles.map((hex) => {
  view.setBigUint64(0, BigInt("0x" + hex));
  return JSON.stringify(view.getFloat64(0));
});
const integers = input.integers.map((text) => JSON.stringify(JSON.parse(text)));
process.stdout.write(JSON.stringify({ doubles, integers }));
"""
NODE = pi16_node()


def _bits(value: float) -> str:
    return struct.pack(">d", value).hex()


@pytest.mark.skipif(NODE is None, reason="pi 1.6's node is not installed")
@settings(max_examples=25, deadline=None)
@given(doubles=st.lists(st.floats() | st.floats(min_value=-1e-5, max_value=1e-5)
                        | st.floats(min_value=1e19, max_value=1e23)
                        | st.integers(-(10**25), 10**25).map(float),
                        min_size=1, max_size=400),
       integers=st.lists(st.integers(-(10**30), 10**30), max_size=100))
@example(doubles=[c for c, _ in CASES if isinstance(c, float)],
         integers=[c for c, _ in CASES if isinstance(c, int)])
def test_numbers_are_written_as_node_writes_them(doubles: list[float], integers: list[int]
                                                 ) -> None:
    assert NODE is not None
    run = subprocess.run([NODE, "-e", NODE_SCRIPT], capture_output=True, text=True,
                         timeout=PROCESS_CEILING_S, input=json.dumps(
                             {"doubles": [_bits(d) for d in doubles],
                              "integers": [str(i) for i in integers]}))
    assert run.returncode == 0, run.stderr
    node = json.loads(run.stdout)
    assert [js_number(d) for d in doubles] == node["doubles"]
    assert stringify(doubles) == f"[{','.join(node['doubles'])}]"
    assert stringify(integers) == f"[{','.join(node['integers'])}]"


def test_only_lone_surrogate_escapes_are_replaced_for_the_editors() -> None:
    """What the server sends an editor: a lone surrogate escape becomes U+FFFD's; a whole pair,
    an escaped backslash before `ud800` and other escapes stay as they were."""
    sent = (rb'{"a":"x\ud83d","b":"\ud83d\ude00","c":"\\ud800","d":"\udc00\u001b",'
            rb'"e":"\\\udfff"}')
    assert lone_surrogates_replaced(sent) == (
        rb'{"a":"x\ufffd","b":"\ud83d\ude00","c":"\\ud800","d":"\ufffd\u001b",'
        rb'"e":"\\\ufffd"}')
    assert json.loads(lone_surrogates_replaced(sent))["c"] == "\\ud800"


def test_keys_with_a_lone_surrogate_inspect_each_type_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Leaving such keys out reads the type (msgspec.inspect: 1.8 ms for a session entry's):
    read again for every such line, a session of 20,000 of them took 70 s to show its context
    (2.7 s before those lines were read, 3.1 s now)."""
    from pi_lsp.session import jsontext
    from pi_lsp.session.entries import Entry

    inspected: list[Any] = []
    inspect = jsontext.msgspec.inspect.type_info
    monkeypatch.setattr(jsontext.msgspec.inspect, "type_info",
                        lambda kind: inspected.append(kind) or inspect(kind))
    for index in range(3):
        line = {"type": "message", "id": f"m{index}", "parentId": None,
                "timestamp": "2099-01-01T00:00:01.000Z",
                "message": {"role": "user", "timestamp": 1,
                            "content": [{"type": "text", "text": "hi", "x\ud800": 1}]}}
        assert jsontext.convert(line, Entry).message.content[0].text == "hi"
    assert inspected in ([], [Entry])  # [] where an earlier test had it read
