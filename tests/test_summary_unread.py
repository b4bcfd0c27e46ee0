"""Messages pi-lsp cannot type (a text block whose text is no text) or reads less a block of an
unknown type reach a summarizer as pi 1.6's do: serializeConversation(convertToLlm(messages)),
with only unknown roles dropped."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import msgspec
import pytest

from pi_lsp.session.entries import (
    ReadMessage,
    TextContent,
    UnreadMessage,
    UserMessage,
    encoder,
    read_message,
)
from pi_lsp.summarize.extractive import Facts
from pi_lsp.summarize.serialize import serialize_conversation
from pi_lsp.summarize.summarizer import SummaryRequest, llm_messages, summary_prompt
from tests.test_system_messages import PI16, pi16_node
from tests.waits import PROCESS_CEILING_S

FIXTURES = Path(__file__).with_name("fixtures")
MESSAGES = FIXTURES / "unread-messages.json"
# What pi 1.6 made of MESSAGES (tests/pi16_serialize.mjs), for machines without it.
PI16_TEXT = FIXTURES / "unread-messages-pi16.json"


def messages() -> list[ReadMessage]:
    values = json.loads(MESSAGES.read_text("utf-8"))
    return [read_message(msgspec.Raw(encoder.encode(value))) for value in values]


def test_the_sample_holds_messages_pi_lsp_cannot_type() -> None:
    """A block of an unknown type is left out on reading, as pi 1.6 sends its message: those
    messages are typed; a text block whose text is no text, and an unknown role, are not."""
    read = messages()
    assert isinstance(read[0], UserMessage) and read[0].content == [TextContent(text="SECRET")]
    assert [m.role for m in read if isinstance(m, UnreadMessage)] == ["hookMessage", "user"]


def test_a_summarizer_reads_such_messages_as_pi16_serializes_them() -> None:
    expected = json.loads(PI16_TEXT.read_text("utf-8"))
    assert serialize_conversation(llm_messages(messages())) == expected
    prompt = summary_prompt(SummaryRequest(kind="history", messages=messages()))
    assert prompt.startswith(f"<conversation>\n{expected}\n</conversation>")
    assert "[User]: SECRET" in prompt and "HIDDEN" not in prompt


def test_the_stored_text_is_pi16s() -> None:
    node = pi16_node()
    if node is None:
        pytest.skip("pi 1.6's node is not installed")
    made = subprocess.run(
        [node, str(Path(__file__).with_name("pi16_serialize.mjs")),
         str(PI16 / "@earendil-works")], input=MESSAGES.read_text("utf-8"),
        capture_output=True, text=True, timeout=PROCESS_CEILING_S)
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout) == json.loads(PI16_TEXT.read_text("utf-8"))


def test_the_offline_summarizer_takes_their_requests_and_replies() -> None:
    facts = Facts(messages())
    assert facts.requests[0] == "SECRET"
    assert "A1 A2" in facts.replies
