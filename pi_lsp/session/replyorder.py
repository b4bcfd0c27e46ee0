"""The key order pi 1.6 writes an assistant message in: JavaScript keeps an object's keys in the
order they were set, and the code of each API sets a reply's keys in an order of its own."""

from __future__ import annotations

import msgspec

from pi_lsp.session.entries import AssistantMessage, UnsentReply, Usage, encoder

# The Structs' order is the OpenAI APIs' usage and Anthropic's reply. Anthropic adds the
# reasoning tokens after the cost; the Responses API sets the effort before the usage.
_ANTHROPIC_USAGE = ("input", "output", "cacheRead", "cacheWrite", "totalTokens", "cost",
                    "cacheWrite1h", "reasoning")
# pi's combineUsage: a compaction's usage when it paid for two summaries.
_SUMMED_USAGE = ("input", "output", "cacheRead", "cacheWrite", "cacheWrite1h", "reasoning",
                 "totalTokens", "cost")
_RESPONSES_LEAD = ("role", "content", "api", "provider", "model", "providerThinkingLevel")
# pi-ai's reply to a request it could not make (createSetupErrorMessage), whatever the API.
_UNSENT_LEAD = ("role", "content", "api", "provider", "model", "usage", "stopReason",
                "errorMessage", "timestamp")
# Anthropic's reply is noted once its stream has ended, after its stop reason; the agent then
# adds the duration and level.
_ANTHROPIC_TAIL = ("diagnostics", "durationMs", "thinkingLevel")


def _members(value: msgspec.Struct) -> dict[str, msgspec.Raw]:
    """The members `value` is encoded with, each as its JSON text. (Encoded one by one, not
    read back from the whole: a lone surrogate's escape is text msgspec cannot read.)"""
    config = value.__struct_config__
    members = {} if config.tag_field is None else \
        {config.tag_field: msgspec.Raw(encoder.encode(config.tag))}
    for field in msgspec.structs.fields(value):
        item = getattr(value, field.name)
        if item is msgspec.UNSET or (config.omit_defaults and item == field.default):
            continue
        members[field.encode_name] = msgspec.Raw(encoder.encode(item))
    return members


def _ordered(members: dict[str, msgspec.Raw], lead: tuple[str, ...]) -> dict[str, msgspec.Raw]:
    """`members` with the keys of `lead` first, in its order, then the others as they were."""
    first = {key: members[key] for key in lead if key in members}
    return first | {key: value for key, value in members.items() if key not in first}


def _last(members: dict[str, msgspec.Raw], tail: tuple[str, ...]) -> dict[str, msgspec.Raw]:
    """`members` with the keys of `tail` last, in its order."""
    rest = {key: value for key, value in members.items() if key not in tail}
    return rest | {key: members[key] for key in tail if key in members}


def usage_json(usage: Usage, api: str | None) -> msgspec.Raw:
    """The usage's JSON text in pi 1.6's key order: as a reply of `api` sets it, or (None) as
    combineUsage sets a sum of two."""
    if api == "anthropic-messages":
        order = _ANTHROPIC_USAGE
    elif api is None:
        order = _SUMMED_USAGE
    else:
        return msgspec.Raw(encoder.encode(usage))
    return msgspec.Raw(encoder.encode(_ordered(_members(usage), order)))


def reply_json(message: AssistantMessage) -> msgspec.Raw:
    """The reply's JSON text, keys in the order pi 1.6 writes them for its API."""
    if isinstance(message, UnsentReply):
        members = _ordered(_members(message), _UNSENT_LEAD)
        members["usage"] = usage_json(message.usage, message.api)
    elif message.api == "anthropic-messages":
        members = _last(_members(message), _ANTHROPIC_TAIL)
        members["usage"] = usage_json(message.usage, message.api)
    elif message.api == "openai-responses":
        members = _ordered(_members(message), _RESPONSES_LEAD)
    else:
        return msgspec.Raw(encoder.encode(message))
    return msgspec.Raw(encoder.encode(members))
