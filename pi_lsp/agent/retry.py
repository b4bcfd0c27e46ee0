"""pi's agent-level retry (settings `retry`): a reply that failed for a passing reason (overload,
rate limit, 5xx, a dropped connection, a timeout) is asked for again after a growing wait.

Which failures pass is read from the error message, with pi's patterns, so a failure is retried
here exactly when pi would retry it. A too-long context is not retried (compaction handles it),
and neither is an exhausted quota.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

import msgspec

from pi_lsp.agent.events import (
    AgentEvent,
    AutoRetryEnd,
    AutoRetryStart,
    CompactionReason,
    SummaryRetryAttemptStart,
    SummaryRetryFinished,
    SummaryRetryScheduled,
)
from pi_lsp.agent.loop import Aborted, LoopHooks, abortable
from pi_lsp.providers.failures import provider_label
from pi_lsp.providers.retry import ProviderRetry
from pi_lsp.session.entries import AssistantMessage

_LIMITS = re.compile("|".join([
    "GoUsageLimitError", "FreeUsageLimitError", "Monthly usage limit reached",
    "available balance", "insufficient_quota", "out of budget", "quota exceeded", "billing",
    "subscription_sharing_usage_limit_exceeded",
    "subscription_sharing_workplace_individual_usage_limit_exceeded",
    r'"code"\s*:\s*"?1308(?![0-9])',
]), re.IGNORECASE)
_PASSING = re.compile("|".join([
    "overloaded", "server_busy", "servers are currently busy",
    "currently experiencing high demand", "model is at capacity", "rate.?limit",
    "too many requests", r"(?<![a-z0-9])(?:429|500|502|503|504|520|524)(?![a-z0-9])",
    r"service.?(?:is.?)?(?:temporarily.?)?unavailable", r"server.?error", r"internal.?error",
    r"provider.?returned.?(?:an.?)?error",
    "exceeded request buffer limit while retrying upstream", "unable to forward upstream",
    r"upstream.?request.?failed", "upstream_stream_read_error", "stream was interrupted",
    r"http/?2 stream failed", r"network.?error", r"connection.?error", r"connection.?refused",
    r"connection.?lost", r"connection.?closed", "other side closed", "fetch failed",
    r"request to \S+ failed, reason:", "getaddrinfo",
    r"(?<![a-z0-9_])(?:ECONNRESET|ECONNABORTED|ECONNREFUSED|ETIMEDOUT|EPIPE)(?![a-z0-9_])",
    "connection reset by peer", "ENOTFOUND", "EAI_AGAIN", r"upstream.?connect",
    "reset before headers", "socket hang up", "socket connection was closed", "timed? out",
    "timeout", "terminated", r"websocket.?closed", r"websocket.?error",
    r"websocket.?connection.?limit.?reached", "ended without", "stream ended before message_stop",
    "stream ended before a terminal response event", "http2 request did not get a response",
    "stream disconnected before completion", "cut short after the reply had begun",
    "pending stream has been canceled", "retry delay", "you can retry your request",
    "try your request again", "please retry your request", "ResourceExhausted",
    "subscription_sharing_usage_unavailable", "subscription_sharing_user_unavailable",
]), re.IGNORECASE)


# pi 1.6's OVERFLOW_PATTERNS (pi-ai utils/overflow.js), in its order; ASCII: \d, \w and case
# as JavaScript's regular expressions (without /u) read them.
_OVERFLOW = [re.compile(pattern, re.IGNORECASE | re.ASCII) for pattern in (
    r"prompt (?:is )?too long",  # Anthropic and z.ai
    r"prompt exceeds max length",  # z.ai CN endpoint
    r"request_too_large",  # Anthropic request byte-size overflow (HTTP 413)
    r"input is too long for requested model",  # Amazon Bedrock
    r"exceeds the context window",  # OpenAI (Completions & Responses API)
    r"exceeds (?:the )?(?:model'?s )?maximum context length(?: of [\d,]+ tokens?|\s*\([\d,]+\))",
    r"context window exceeded",  # LiteLLM pre-call check
    r"input token count.*exceeds the maximum",  # Google (Gemini)
    r"maximum prompt length is \d+",  # xAI (Grok)
    r"reduce the length of the messages",  # Groq
    r"maximum context length is \d+ tokens",  # OpenRouter (most backends)
    r"exceeds (?:the )?maximum allowed input length of [\d,]+ tokens?",  # OpenRouter/Poolside
    r"input \(\d+ tokens\) is longer than the model'?s context length \(\d+ tokens\)",  # Together
    r"exceeds the limit of \d+",  # GitHub Copilot
    r"exceeds the available context size",  # llama.cpp server
    r"greater than the context length",  # LM Studio
    r"context window exceeds limit",  # MiniMax
    r"exceeded model token limit",  # Kimi For Coding
    r"too large for model with \d+ maximum context length",  # Mistral
    r"prompt has [\d,]+ tokens?, but the configured context size is [\d,]+ tokens?",  # DS4
    r"model_context_window_exceeded",  # z.ai's finish_reason, Anthropic's stop_reason
    r"prompt too long; exceeded (?:max )?context length",  # Ollama
    r"range of input length should be",  # DashScope / Qwen
    r"context[_ ]length[_ ]exceeded",  # generic
    r"too many tokens",  # generic
    r"token limit exceeded",  # generic
    # HTTP 413 is a request too large whatever the body says: pi's line for one (pi-lsp's,
    # "<provider> 413 ...", is read by _status_line).
    r"^(?:[\w -]+ API error \(413\):|413(?:\s|:|$))",
)]
# Throttling that also reads as an overflow ("Too many tokens per minute"): retried, not
# compacted (pi 1.6's NON_OVERFLOW_PATTERNS).
_NOT_OVERFLOW = re.compile(r"^(Throttling error|Service unavailable):|rate limit|too many requests",
                           re.IGNORECASE | re.ASCII)
# Cerebras answers an overflow with a bare 400 or 413: pi's "400 status code (no body)", or
# pi-lsp's "cerebras 400: " or "cerebras 400 error: " line with the openai SDK's words for no
# body ("Error code: 400"), which a server's own error text sent mid-stream is not.
_CEREBRAS_BODYLESS = re.compile(
    r"^(?:(?:cerebras 4(?:00|13)(?: error)?: )?4(?:00|13)\s*(?:status code)?\s*\(no body\)"
    r"|cerebras 4(?:00|13)(?: error)?: Error code: 4(?:00|13)$)",
    re.IGNORECASE | re.ASCII)


def _status_line(error_message: str, provider: str, status: str) -> bool:
    """Whether the line is pi-lsp's for a call `provider` answered with HTTP `status`: its
    label, then the status (a server's own text sent mid-stream may name a status too)."""
    return re.match(rf"{re.escape(provider_label(provider))} {status}(?=[ :]|$)",
                    error_message) is not None


class RetrySettings(msgspec.Struct, rename="camel", kw_only=True):
    """pi's `retry` settings, with pi's defaults."""

    enabled: bool = True
    max_retries: int = 3
    base_delay_ms: int = 2000
    max_agent_delay_ms: int = 60_000
    provider: ProviderRetry = msgspec.field(default_factory=ProviderRetry)

    def delay_ms(self, attempt: int) -> int:
        """The wait before retry `attempt` (from 1): the base delay doubling, capped."""
        delay: int = self.base_delay_ms * 2 ** max(0, attempt - 1)
        return min(delay, self.max_agent_delay_ms)


def is_passing_failure(error_message: str | None) -> bool:
    """Whether a failed reply's message names a failure worth asking again for (pi's test)."""
    if not error_message or _LIMITS.search(error_message):
        return False
    return bool(_PASSING.search(error_message))


def is_context_overflow(error_message: str | None, provider: str = "") -> bool:
    """Whether a failed reply's message says the request did not fit the model's window, as
    pi 1.6 reads it (a rate limit never does); `provider` made the reply."""
    if not error_message or _NOT_OVERFLOW.search(error_message):
        return False
    return any(pattern.search(error_message) for pattern in _OVERFLOW) or (
        _status_line(error_message, provider, "413")) or (
        provider == "cerebras" and bool(_CEREBRAS_BODYLESS.search(error_message)))


def is_silent_overflow(reply: AssistantMessage, context_window: int) -> bool:
    """pi 1.6's overflow a server did not refuse (it truncated the input instead): an answer whose
    input outgrew the window, or a length stop with nothing written and the window full."""
    used = reply.usage.input + reply.usage.cache_read
    if context_window <= 0:
        return False
    if reply.stop_reason == "stop":
        return used > context_window
    return reply.stop_reason == "length" and reply.usage.output == 0 and \
        used >= context_window * 0.99


def is_recoverable_length(reply: AssistantMessage, max_tokens: int) -> bool:
    """pi 1.6's isRecoverableLength: a length stop below the model's own output limit, so the
    limit was lowered for a full context (or the server cut it): compacting may leave room."""
    return reply.stop_reason == "length" and max_tokens > 0 and reply.usage.output < max_tokens


def is_retryable(error_message: str | None, provider: str = "") -> bool:
    """Whether pi 1.6 asks again after a failed reply: a passing failure that is no overflow
    (compaction answers that one)."""
    return is_passing_failure(error_message) and not is_context_overflow(error_message, provider)


def waiting_note(event: AutoRetryStart | SummaryRetryScheduled) -> str:
    """A retry's wait in words, for a turn's or a summary's: the failure, the wait, the try."""
    return f"{event.error_message}; retrying in {event.delay_ms / 1000:g}s " \
           f"({event.attempt}/{event.max_attempts})"


@dataclass(frozen=True)
class SummaryRetries:
    """Where a summary's retries are told (pi 1.6's summarization_retry_* events), and what
    the summary is for."""

    tell: Callable[[AgentEvent], None]
    source: Literal["compaction", "branchSummary"]
    reason: CompactionReason | None = None  # a compaction's

    def scheduled(self, attempt: int, max_attempts: int, delay_ms: int, error: str) -> None:
        self.tell(SummaryRetryScheduled(attempt=attempt, max_attempts=max_attempts,
                                        delay_ms=delay_ms, error_message=error))

    def attempt_start(self) -> None:
        self.tell(SummaryRetryAttemptStart(source=self.source, reason=self.reason))

    def finished(self) -> None:
        self.tell(SummaryRetryFinished())


async def retried_reply(ask: Callable[[], Awaitable[AssistantMessage]],
                        settings: RetrySettings | None,
                        retries: SummaryRetries | None = None) -> AssistantMessage:
    """pi 1.6's retryAssistantCall, which every summary goes through: `ask()` again after a
    reply that failed for a passing reason, with a turn's waits (no settings: asked once);
    each wait, each attempt after one and the end of retrying told to `retries`."""
    attempt = 0
    try:
        while True:
            reply = await ask()
            if reply.stop_reason != "error" or settings is None or not settings.enabled \
                    or attempt >= settings.max_retries \
                    or not is_passing_failure(reply.error_message):
                return reply
            attempt += 1
            delay_ms = settings.delay_ms(attempt)
            if retries is not None:
                retries.scheduled(attempt, settings.max_retries, delay_ms,
                                  reply.error_message or "Unknown error")
            await asyncio.sleep(delay_ms / 1000)  # an abort cancels it
            if retries is not None:
                retries.attempt_start()
    finally:  # as pi 1.6: after a retry, whether the summary came, failed or was stopped
        if attempt and retries is not None:
            retries.finished()


class Retries:
    """The current reply's retries: each wait announced, how they ended told once."""

    def __init__(self, hooks: LoopHooks) -> None:
        self.hooks = hooks
        self.attempt = 0  # retries of the current reply so far

    async def after(self, reply: AssistantMessage, settings: RetrySettings) -> bool:
        """Wait and say yes when the reply failed for a passing reason and retries are left;
        each wait is announced as an `auto_retry_start` event."""
        hooks, error = self.hooks, reply.error_message
        if hooks.aborted or not settings.enabled or self.attempt >= settings.max_retries \
                or not is_retryable(error, reply.provider):
            if self.attempt:
                self.end(success=False, final_error=error)
            return False
        self.attempt += 1
        delay_ms = settings.delay_ms(self.attempt)
        hooks.emit(AutoRetryStart(attempt=self.attempt, max_attempts=settings.max_retries,
                                  delay_ms=delay_ms, error_message=error or "Unknown error"))
        hooks.omit_attempt()  # as pi 1.6 does before it waits: the retry asks without it
        try:
            await abortable(hooks, asyncio.sleep(delay_ms / 1000))
        except Aborted:
            self.end(success=False, final_error="Retry cancelled")
            return False
        return True

    def end(self, success: bool, final_error: str | None = None) -> None:
        attempt, self.attempt = self.attempt, 0
        self.hooks.emit(AutoRetryEnd(success=success, attempt=attempt, final_error=final_error))
