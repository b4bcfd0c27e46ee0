"""How much output a request may ask for: pi-ai 1.6's `clampMaxTokensToContext`, which fits
max_tokens into the context window left after the input, with a margin for miscounting."""

from __future__ import annotations

import math
from typing import Any

from pi_lsp.context.tokens import FAILED, message_chars, usage_tokens, utf16_length
from pi_lsp.providers.base import ModelRequest
from pi_lsp.session.entries import AssistantMessage, ModelMessage
from pi_lsp.session.jsontext import js_double, js_string, js_to_number, stringify

CHARS_PER_TOKEN = 3.5  # pi-ai's estimate here (not the /4 pi's compaction uses)
SAFETY_TOKENS = 4096
SAFETY_RATIO = 0.15  # providers may count the input up to ~12% above the estimate
MIN_OUTPUT_WITH_RATIO = 32_768


def _tokens(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN)


def _stamp(value: Any) -> float:
    """A message's time as pi-ai compares it (JavaScript's Number(value)): a stamp pi carried
    as the file holds it may be text, a list or missing; None is pi's NaN written as null."""
    if isinstance(value, int | float):  # (a bool too: 0 or 1)
        return js_double(value)
    if isinstance(value, str | list):
        return js_to_number(js_string(value))
    return math.nan


def _anchor(messages: list[ModelMessage]) -> int:
    """The last reply whose reported usage still describes the prefix before it, or -1:
    not failed, usage reported, and nothing newer inserted before it."""
    found, newest = -1, -math.inf
    for index, message in enumerate(messages):
        # A missing stamp is pi's NaN: no comparison with it holds, from then on too.
        stamp = _stamp(message.timestamp)
        if isinstance(message, AssistantMessage) and stamp >= newest \
                and message.stop_reason not in FAILED and usage_tokens(message) > 0:
            found = index
        newest = math.nan if math.isnan(stamp) or math.isnan(newest) else max(newest, stamp)
    return found


def input_tokens(request: ModelRequest) -> int:
    """pi-ai's estimate of the input: the last good reply's usage plus what came after it,
    else every message with the system prompt and tool definitions."""
    messages = request.messages
    anchor = _anchor(messages)
    if anchor >= 0:
        reply = messages[anchor]
        assert isinstance(reply, AssistantMessage)
        return usage_tokens(reply) + sum(_tokens(message_chars(m)) for m in messages[anchor + 1:])
    tools = stringify(request.tools) if request.tools else ""
    return (_tokens(utf16_length(request.system_prompt)) + (_tokens(utf16_length(tools)) if tools
            else 0) + sum(_tokens(message_chars(m)) for m in messages))


def output_room(request: ModelRequest) -> int:
    """The output a request asks for: its own cap or the model's, fitted to the window."""
    model = request.model
    return fit_to_window(model.context_window, input_tokens(request),
                         request.max_tokens or model.max_tokens)


def fit_to_window(window: int, used: int, max_tokens: int) -> int:
    """`max_tokens` lowered to fit the window after `used` input tokens and a margin (15%,
    or only 4096 tokens when that would leave under 32768 for output)."""
    if window <= 0:
        return max(1, max_tokens)
    room = window - used - max(SAFETY_TOKENS, math.ceil(used * SAFETY_RATIO))
    if room < MIN_OUTPUT_WITH_RATIO:
        room = min(MIN_OUTPUT_WITH_RATIO, window - used - SAFETY_TOKENS)
    return min(max_tokens, max(1, room))
