"""Summarizers: a model behind a provider, or an offline extractive one."""

from __future__ import annotations

from typing import Literal, Protocol

import msgspec

from pi_lsp.agent.retry import RetrySettings, SummaryRetries, retried_reply
from pi_lsp.context.convert import PASS_THROUGH_ROLES, message_to_llm
from pi_lsp.providers.base import ModelRequest, Provider, ReplyBuilder
from pi_lsp.providers.registry import ModelInfo
from pi_lsp.session.entries import (
    AssistantMessage,
    Cost,
    ModelMessage,
    ReadMessage,
    TextContent,
    ToolCall,
    UnreadMessage,
    Usage,
    UserMessage,
)
from pi_lsp.session.ids import now_ms
from pi_lsp.session.jsontext import js_field
from pi_lsp.session.replyorder import usage_json
from pi_lsp.summarize import prompts
from pi_lsp.summarize.serialize import serialize_conversation

SummaryKind = Literal["history", "turn_prefix", "branch"]
# pi 1.6's names for each kind in its failures.
LABELS: dict[SummaryKind, str] = {"history": "Summarization", "turn_prefix":
                                  "Turn prefix summarization", "branch": "Branch summarization"}
SPLIT_TURN_MARK = "\n\n---\n\n**Turn Context (split turn):**"


class SummaryError(Exception):
    """The summary could not be made; nothing was written."""


class SummaryRequest(msgspec.Struct):
    kind: SummaryKind
    messages: list[ReadMessage]
    previous_summary: str | None = None
    instructions: str | None = None  # the user's focus for this summary
    # The level in force where the path summarized ends: pi 1.6 summarizes at the session's.
    thinking_level: str = "off"
    retries: SummaryRetries | None = None  # where a model summarizer tells its retries


class Summary(msgspec.Struct):
    """A summary's text and what the model spent on it (None when no model wrote it)."""

    text: str
    usage: Usage | None = None
    api: str | None = None  # of the reply `usage` is from; None: a sum of two (or none)

    def usage_json(self) -> msgspec.Raw | None:
        """`usage` as pi 1.6 writes it in the entry: in its reply's key order, or a sum's."""
        return None if self.usage is None else usage_json(self.usage, self.api)


def combined(first: Summary, second: Summary, text: str) -> Summary:
    """`text` with the two summaries' usage added up (pi's `combineUsage`, which keeps the
    optional counts either reports; a cost is the provider's only when both are)."""
    a, b = first.usage, second.usage
    if a is None or b is None:
        return Summary(text, a or b, first.api if b is None else second.api)
    return Summary(text, Usage(
        input=a.input + b.input, output=a.output + b.output,
        cache_read=a.cache_read + b.cache_read, cache_write=a.cache_write + b.cache_write,
        cache_write_1h=_summed(a.cache_write_1h, b.cache_write_1h),
        reasoning=_summed(a.reasoning, b.reasoning),
        total_tokens=a.total_tokens + b.total_tokens,
        cost=Cost(input=a.cost.input + b.cost.input, output=a.cost.output + b.cost.output,
                  cache_read=a.cost.cache_read + b.cost.cache_read,
                  cache_write=a.cost.cache_write + b.cost.cache_write,
                  total=a.cost.total + b.cost.total,
                  total_from_provider=a.cost.total_from_provider is True
                  and b.cost.total_from_provider is True)))


def _summed(a: int | msgspec.UnsetType, b: int | msgspec.UnsetType) -> int | msgspec.UnsetType:
    if a is msgspec.UNSET and b is msgspec.UNSET:
        return msgspec.UNSET
    return (0 if a is msgspec.UNSET else a) + (0 if b is msgspec.UNSET else b)


class Summarizer(Protocol):
    @property
    def extractive(self) -> bool: ...

    async def summarize(self, request: SummaryRequest) -> Summary: ...


def llm_messages(messages: list[ReadMessage]) -> list[ModelMessage | UnreadMessage]:
    """What the summarizing model reads, as pi's convertToLlm makes it: one pi-lsp cannot type
    passes as written where its role is pi's, a custom one as a user message; others drop."""
    converted: list[ModelMessage | UnreadMessage] = []
    for message in messages:
        if not isinstance(message, UnreadMessage):
            llm = message_to_llm(message)
            converted += [] if llm is None else [llm]
        elif message.role in PASS_THROUGH_ROLES:
            converted.append(message)
        elif message.role == "custom":
            converted.append(UnreadMessage({"role": "user",
                                            "content": js_field(message.value, "content")}))
    return converted


def instructions_for(request: SummaryRequest) -> str:
    if request.kind == "turn_prefix":
        base = prompts.TURN_PREFIX
    elif request.kind == "branch":
        base = prompts.BRANCH
    else:
        base = prompts.UPDATE if request.previous_summary else prompts.HISTORY
    if request.instructions:
        base += f"\n\nAdditional focus: {request.instructions}"
    return base


def summary_prompt(request: SummaryRequest) -> str:
    """The one user message a summary model receives."""
    text = f"<conversation>\n{serialize_conversation(llm_messages(request.messages))}\n" \
           "</conversation>\n\n"
    if request.previous_summary and request.kind == "history":
        text += f"<previous-summary>\n{request.previous_summary}\n</previous-summary>\n\n"
    return text + instructions_for(request)


class ModelSummarizer:
    extractive = False

    def __init__(self, provider: Provider, model: ModelInfo,
                 retry: RetrySettings | None = None) -> None:
        self.provider, self.model = provider, model
        self.retry = retry  # the settings' `retry`, as pi 1.6 retries summaries (None: never)

    async def summarize(self, request: SummaryRequest) -> Summary:
        prompt = UserMessage(content=[TextContent(text=summary_prompt(request))],
                             timestamp=now_ms())
        model_request = ModelRequest(
            model=self.model, system_prompt=prompts.SYSTEM, messages=[prompt], tools=[],
            thinking_level=request.thinking_level,
            max_tokens=self.model.max_tokens,  # pi 1.6's (its #9512)
            cache_retention="none",  # as pi 1.6 asks: no later request reads it
        )
        message = await retried_reply(lambda: self._reply(model_request), self.retry,
                                      request.retries)
        # As pi 1.6 words and refuses them (getSummarizationFailure): a cut-off summary or a
        # tool call would become the session's checkpoint.
        if message.stop_reason == "error":
            raise SummaryError(f"{LABELS[request.kind]} failed: "
                               f"{message.error_message or 'Unknown error'}")
        if message.stop_reason == "length":
            raise SummaryError(f"{LABELS[request.kind]} failed: generation hit the token cap "
                               "and the summary is incomplete")
        if any(isinstance(block, ToolCall) for block in message.content):
            raise SummaryError(f"{LABELS[request.kind]} attempted to call a tool")
        text = "\n".join(b.text for b in message.content if isinstance(b, TextContent)).strip()
        if not text:
            raise SummaryError("the summary model returned no text")
        return Summary(text, message.usage, message.api)

    async def _reply(self, request: ModelRequest) -> AssistantMessage:
        reply = ReplyBuilder(self.model.api, self.model)
        async for _ in self.provider.stream(request, reply):
            pass
        return reply.message()
