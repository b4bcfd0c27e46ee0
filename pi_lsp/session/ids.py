"""Entry ids and timestamps in the forms pi writes."""

from __future__ import annotations

import time
import uuid
from collections.abc import Container
from datetime import UTC, datetime

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


def iso_to_ms(text: str | None) -> int:
    """Epoch milliseconds of an ISO timestamp, as `new Date(text).getTime()` (0 if unreadable)."""
    if not text:
        return 0
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return 0
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    whole = int(moment.replace(microsecond=0).timestamp())
    return whole * 1000 + moment.microsecond // 1000


def now_ms() -> int:
    """The current time in epoch milliseconds, as messages carry it."""
    return time.time_ns() // 1_000_000
