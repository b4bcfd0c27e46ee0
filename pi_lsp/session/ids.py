"""Entry ids and timestamps in the forms pi writes."""

from __future__ import annotations

import time
import uuid
from collections.abc import Container
from datetime import UTC, datetime, timedelta

import msgspec

from pi_lsp.session.jsdate import MAX_TIME_MS, date_ms

_MAX_SHORT_TRIES = 100
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


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
    return _iso(datetime.now(UTC))


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def iso_to_ms(text: object) -> int | None:
    """`new Date(text).getTime()` as pi computes it: epoch milliseconds, or None for NaN (a
    missing stamp, UNSET: JavaScript's `new Date(undefined)`); null is 0, and another JSON
    value as jsdate.date_ms reads it."""
    return None if text is msgspec.UNSET else date_ms(text)


def stamp_text(stamp: object) -> str | None:
    """An entry's stamp as text: another JSON value as the time `new Date(stamp)` makes of it,
    written as JavaScript's `toISOString()` writes it (None for NaN, a missing or null stamp or
    one out of Python's range of dates)."""
    if isinstance(stamp, str):
        return stamp
    if stamp is None or stamp is msgspec.UNSET:
        return None
    ms = date_ms(stamp)
    try:
        return None if ms is None else _iso(_EPOCH + timedelta(milliseconds=ms))
    except OverflowError:
        return None


def order_ms(text: str | float | None) -> int:
    """An ordering key for newest-first listings: unreadable stamps sort as the oldest."""
    ms = iso_to_ms(text)
    return -MAX_TIME_MS - 1 if ms is None else ms


def now_ms() -> int:
    """The current time in epoch milliseconds, as messages carry it."""
    return time.time_ns() // 1_000_000
