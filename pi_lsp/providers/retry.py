"""Provider-level retries (pi's `retry.provider`): the same request again after a failed
status or connection, waiting as long as the server asks (`retry-after-ms`, `retry-after`).

Off by default as in pi: the agent-level retry (pi_lsp.agent.retry) handles transient failures
and shows each wait. The SDKs' own retries are always off, since they sleep however long a
server asks and cannot say so.
"""

from __future__ import annotations

import asyncio
import math
import random
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from email.utils import parsedate_to_datetime
from typing import TypeVar

import msgspec

from pi_lsp.providers.failures import RetryDelayTooLong

T = TypeVar("T")
DEFAULT_TIMEOUT_MS = 300_000  # pi's httpIdleTimeoutMs
# A failed request as the retry sees it: its status (None: no answer) and its headers.
HttpFailure = tuple[int | None, Mapping[str, str]]


class ProviderRetry(msgspec.Struct, rename="camel", kw_only=True):
    timeout_ms: int | None = None  # None: DEFAULT_TIMEOUT_MS
    max_retries: int = 0
    max_retry_delay_ms: int = 60_000  # 0: no limit

    @property
    def timeout_s(self) -> float:
        return (self.timeout_ms or DEFAULT_TIMEOUT_MS) / 1000


def should_retry(status: int | None, headers: Mapping[str, str]) -> bool:
    """The SDKs' rule: the server's x-should-retry, else no answer, 408, 409, 429 or 5xx."""
    hint = headers.get("x-should-retry")
    if hint in ("true", "false"):
        return hint == "true"
    return status is None or status in (408, 409, 429) or status >= 500


def retry_delay_s(headers: Mapping[str, str], retry_index: int, max_delay_ms: int,
                  message: str) -> float:
    """How long to wait before retry `retry_index` (0-based): what the server asks, else 0.5s
    doubling up to 8s, less up to a quarter. A server asking more than `max_delay_ms` (0: no
    limit) fails the call instead."""
    asked_ms = _finite(_number(headers.get("retry-after-ms")))
    if asked_ms is None and headers.get("retry-after"):
        value = headers["retry-after"]
        seconds = _number(value)
        asked_ms = _finite(seconds * 1000 if seconds is not None else _date_ms(value))
    if asked_ms is not None:
        if max_delay_ms > 0 and asked_ms > max_delay_ms:
            raise RetryDelayTooLong(
                f"Server requested {-(-asked_ms // 1000):.0f}s retry delay (max: "
                f"{-(-max_delay_ms // 1000)}s). {message}")
        return max(0.0, asked_ms / 1000)
    backoff: float = min(0.5 * 2 ** retry_index, 8)
    return backoff * (1 - random.random() * 0.25)


async def with_retries(send: Callable[[], Awaitable[T]], policy: ProviderRetry,
                       classify: Callable[[Exception], HttpFailure | None]) -> T:
    """`send()`, again after each retryable failure, up to `policy.max_retries` more times;
    `classify` says whether a failure was an HTTP one (anything else is raised at once)."""
    retry_index = 0
    while True:
        try:
            return await send()
        except Exception as error:
            failure = classify(error)
            if retry_index >= policy.max_retries or failure is None or \
                    not should_retry(*failure):
                raise
            await asyncio.sleep(retry_delay_s(failure[1], retry_index,
                                              policy.max_retry_delay_ms, str(error)))
            retry_index += 1


# What JavaScript's Number.parseFloat reads: the longest decimal number at the start, in ASCII
# digits (a Unicode `\d` read "٣٠" as 30 s; parseFloat reads no number there).
_LEADING_NUMBER = re.compile(r"[+-]?(?:Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)",
                             re.ASCII)


def _number(text: str | None) -> float | None:
    """The number `text` starts with, as pi reads a header (Number.parseFloat): "30s" is 30,
    the rest ignored; None if it starts with none."""
    found = _LEADING_NUMBER.match(text.lstrip()) if text else None
    return float(found[0]) if found else None


def _date_ms(text: str) -> float | None:
    """Milliseconds from now to an HTTP date."""
    try:
        return (parsedate_to_datetime(text).timestamp() - time.time()) * 1000
    except (TypeError, ValueError, OverflowError):
        return None


def _finite(ms: float | None) -> float | None:
    """A delay the server asked that can be waited (or refused as too long): as pi, one that is
    no number or endless (`inf`, `1e400`) counts as none asked (it read "nans s" before)."""
    return ms if ms is not None and math.isfinite(ms) else None
