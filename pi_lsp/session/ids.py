"""Entry ids and timestamps in the forms pi writes."""

from __future__ import annotations

import time
import uuid
from collections.abc import Container
from datetime import UTC, datetime, timedelta

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


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def iso_moment(text: str | None) -> datetime:
    """The instant of an ISO timestamp to the millisecond, as JavaScript keeps it (the epoch if
    unreadable; UTC when no zone is given, where JavaScript would take local time: pi writes
    `Z`). Comparing these is cheaper than converting each to milliseconds."""
    if not text:
        return EPOCH
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return EPOCH
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    elif moment.utcoffset() % MINUTE:  # type: ignore[operator]  # a zone gives an offset
        return EPOCH  # an offset with seconds: JavaScript reads no date
    if moment.microsecond % 1000:
        moment = moment.replace(microsecond=moment.microsecond - moment.microsecond % 1000)
    return moment


def iso_to_ms(text: str | None) -> int:
    """Epoch milliseconds of an ISO timestamp, as `new Date(text).getTime()` for the ones pi
    writes (0 if unreadable)."""
    moment = iso_moment(text)
    whole = int(moment.replace(microsecond=0).timestamp())
    return whole * 1000 + moment.microsecond // 1000


def now_ms() -> int:
    """The current time in epoch milliseconds, as messages carry it."""
    return time.time_ns() // 1_000_000
