"""Entry ids and timestamps in the forms pi writes."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Container

import msgspec

from pi_lsp.session.jsdate import MAX_TIME_MS, date_ms, iso_text

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


class _V7State:
    """pi-ai's uuidv7 state in this process: the last time used and the id counter."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.last_ms = -1
        self.counter: int | None = None


_V7 = _V7State()


def new_session_id() -> str:
    """A UUIDv7 (RFC 9562) as pi 1.6's createSessionId makes it with pi-ai's uuidv7: the time in
    ms (never going back), a 41-bit counter seeded at random once and stepped at each id (so ids
    made in one millisecond still sort in order), then random bits."""
    with _V7.lock:
        _V7.last_ms = ms = max(time.time_ns() // 1_000_000, _V7.last_ms)
        _V7.counter = counter = int.from_bytes(os.urandom(5)) if _V7.counter is None \
            else _V7.counter + 1
    high, low = (counter >> 29) & 0xFFF, counter & ((1 << 29) - 1)  # around the variant bits
    random_bits = int.from_bytes(os.urandom(5)) & ((1 << 33) - 1)
    value = ms << 80 | 0x7 << 76 | high << 64 | 0b10 << 62 | low << 33 | random_bits
    return str(uuid.UUID(int=value))


def iso_now() -> str:
    """The current time as JavaScript's `toISOString()` writes it."""
    return iso_text(now_ms())


def iso_to_ms(text: object) -> int | None:
    """`new Date(text).getTime()` as pi computes it: epoch milliseconds, or None for NaN (a
    missing stamp, UNSET: JavaScript's `new Date(undefined)`); null is 0, and another JSON
    value as jsdate.date_ms reads it."""
    return None if text is msgspec.UNSET else date_ms(text)


def stamp_text(stamp: object) -> str | None:
    """An entry's stamp as text: another JSON value as the time `new Date(stamp)` makes of it,
    written as JavaScript's `toISOString()` writes it (None for NaN, a missing or null
    stamp)."""
    if isinstance(stamp, str):
        return stamp
    if stamp is None or stamp is msgspec.UNSET:
        return None
    return date_text(stamp)


def date_text(stamp: object) -> str | None:
    """`new Date(stamp).toISOString()`, as pi 1.6 lists a session's times (a header's
    "2026-11-05T12:00:00+02:00" is "2026-11-05T10:00:00.000Z", one in the year 20000
    "+020000-…"); None where that throws (an Invalid Date: NaN, a missing stamp)."""
    ms = iso_to_ms(stamp)
    return None if ms is None else iso_text(ms)


def order_ms(text: str | float | None) -> int:
    """An ordering key for newest-first listings: unreadable stamps sort as the oldest."""
    ms = iso_to_ms(text)
    return -MAX_TIME_MS - 1 if ms is None else ms


def now_ms() -> int:
    """The current time in epoch milliseconds, as messages carry it."""
    return time.time_ns() // 1_000_000
