"""Entry ids and timestamps in the forms pi writes."""

from __future__ import annotations

import time
import uuid
from collections.abc import Container
from datetime import UTC, datetime

from pi_lsp.session.jsdate import MAX_TIME_MS, parse_ms

_MAX_SHORT_TRIES = 100


def new_entry_id(taken: Container[str]) -> str:
    """Eight lowercase hex characters not yet used in the file (a full UUID after 100 clashes)."""
    for _ in range(_MAX_SHORT_TRIES):
        candidate = uuid.uuid4().hex[:8]
        if candidate not in taken:
            return candidate
    return str(uuid.uuid4())


def session_file_name(session_id: str, timestamp: str) -> str:
    """pi's file name: the creation time with `:` and `.` made `-`, then the session id."""
    return f"{timestamp.replace(':', '-').replace('.', '-')}_{session_id}.jsonl"


def new_session_id() -> str:
    return str(uuid.uuid4())


def iso_now() -> str:
    """The current time as JavaScript's `toISOString()` writes it."""
    moment = datetime.now(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def iso_to_ms(text: str | None) -> int | None:
    """`new Date(text).getTime()` as pi computes it: epoch milliseconds, or None for NaN (a
    missing stamp included: JavaScript's `new Date(undefined)`)."""
    return None if text is None else parse_ms(text)


def order_ms(text: str | None) -> int:
    """An ordering key for newest-first listings: unreadable stamps sort as the oldest."""
    ms = iso_to_ms(text)
    return -MAX_TIME_MS - 1 if ms is None else ms


def now_ms() -> int:
    """The current time in epoch milliseconds, as messages carry it."""
    return time.time_ns() // 1_000_000
