"""JavaScript's reading of a timestamp (`new Date(text).getTime()`) for the ISO forms: epoch
milliseconds, or None where JavaScript gets NaN (and pi writes `null`).

The ECMAScript Date Time String Format, with what V8 also takes in it: lower-case `t` and `z`,
up to 9 fraction digits, a day past the month's end rolling over, and (years 100 to 9999) a
space for the `T` and offsets without a colon, as Python's `str(datetime)` and other tools
write them. Any other text is read by V8's legacy parser (`legacydate`): `toUTCString()` and
`toString()` output, mail dates, `Jan 2 2024`, `2024/01/02` (tests/fixtures/js_dates.json
holds Node's answers).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from pi_lsp.session.jsontext import js_string
from pi_lsp.session.legacydate import legacy_fields

MAX_TIME_MS = 8_640_000_000_000_000  # a Date's range either side of the epoch
_DAY_MS = 86_400_000
_NAIVE_EPOCH = datetime(1970, 1, 1)
_EPOCH = _NAIVE_EPOCH.replace(tzinfo=UTC)

_FORM = re.compile(
    r"(\d{4}|[+-]\d{6})(?:-(\d\d)(?:-(\d\d))?)?"
    r"(?:[Tt ](\d\d):(\d\d)(?::(\d\d)(?:\.(\d{1,9}))?)?([Zz]|[+-]\d\d:?\d\d)?)?", re.ASCII)
_PI_FORM = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", re.ASCII)


def parse_ms(text: str) -> int | None:
    """`new Date(text).getTime()` for ISO forms: epoch milliseconds, or None for NaN."""
    if _PI_FORM.fullmatch(text):  # what pi writes: most stamps, read by the C library
        try:
            since = datetime.fromisoformat(text) - _EPOCH
        except ValueError:  # out of Python's range (Feb 30, 24:00), not always of JavaScript's
            return read_iso(text)
        return (since.days * 86_400 + since.seconds) * 1000 + since.microseconds // 1000
    return read_iso(text)


def date_ms(value: object) -> int | None:
    """`new Date(value).getTime()` for a JSON value of any type (an entry's stamp that is not
    text): a number as it is (within a Date's range, cut to whole milliseconds), null as 0, a
    boolean as 0 or 1, a list as its text (`String(value)`: `[2020]` is 2020-01-01); None for
    NaN, as for a missing value or an object."""
    if isinstance(value, list):
        value = js_string(value)
    if isinstance(value, str):
        return parse_ms(value)
    if value is None or isinstance(value, bool):
        return int(bool(value))
    if isinstance(value, int | float) and abs(value) <= MAX_TIME_MS:  # NaN fails this too
        return int(value)
    return None


def read_iso(text: str) -> int | None:
    """`parse_ms` without its shortcut for pi's own form (which must agree with it)."""
    match = _FORM.fullmatch(text)
    if match is None:
        return _legacy_ms(text)
    if match[1] == "-000000":
        return None
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    if (" " in text or len(zone or "") == 5) and not "0100" <= year <= "9999":
        return None  # V8's legacy reading of these forms takes years below 100 as 19xx or 20xx
    if hour == "24" and int(fraction or "0"):
        return None  # 24:00 only as the day's end, to the last fraction digit
    millis = int((fraction or "0")[:3].ljust(3, "0"))
    fields = (int(year), int(month or 1), int(day or 1), int(hour or 0), int(minute or 0),
              int(second or 0), millis)
    if zone is None and hour is not None:  # a time without a zone is local time
        return _local_ms(*fields)
    return _utc_ms(*fields, _offset_minutes(zone))


def _legacy_ms(text: str) -> int | None:
    """V8's legacy reading of a text not in the ISO form: a time without a zone is local."""
    read = legacy_fields(text)
    if read is None:
        return None
    fields, offset_s = read
    if offset_s is None:
        return _local_ms(*fields)
    wall = _wall_ms(*fields)
    return None if wall is None else _in_range(wall - offset_s * 1000)


def _offset_minutes(zone: str | None) -> int | None:
    """Minutes east of UTC (`Z` or none: 0); None when out of range."""
    if zone is None or zone in "Zz":
        return 0
    hours, minutes = int(zone[1:3]), int(zone[-2:])
    if hours > 23 or minutes > 59:
        return None
    return (hours * 60 + minutes) * (1 if zone[0] == "+" else -1)


def _wall_ms(year: int, month: int, day: int, hour: int, minute: int, second: int,
             millis: int) -> int | None:
    """Milliseconds from 1970-01-01T00:00 to a wall-clock time; None for fields out of range
    (24:00 only as the end of a day)."""
    if not (1 <= month <= 12 and 1 <= day <= 31 and minute <= 59 and second <= 59) or \
            hour > 24 or (hour == 24 and (minute or second or millis)):
        return None
    return ((_days_from_civil(year, month, day) * 24 + hour) * 60 + minute) * 60_000 + \
        second * 1000 + millis


def _utc_ms(year: int, month: int, day: int, hour: int, minute: int, second: int,
            millis: int, offset: int | None) -> int | None:
    wall = _wall_ms(year, month, day, hour, minute, second, millis)
    if wall is None or offset is None:
        return None
    return _in_range(wall - offset * 60_000)


def _local_ms(year: int, month: int, day: int, hour: int, minute: int, second: int,
              millis: int) -> int | None:
    """A local wall-clock time as UTC: a repeated hour reads as its first pass, a skipped one
    with the offset before the change, as in V8; None past the years Python's clock takes."""
    wall = _wall_ms(year, month, day, hour, minute, second, millis)
    if wall is None:
        return None
    try:
        moment = _NAIVE_EPOCH + timedelta(milliseconds=wall - millis)
        return _in_range(int(moment.timestamp()) * 1000 + millis)  # fold 0: the earlier offset
    except (OverflowError, OSError, ValueError):
        return None


def iso_text(ms: int) -> str:
    """`new Date(ms).toISOString()` for a time in a Date's range: years 0 to 9999 in four
    digits, others in six with their sign (`+020000-01-01T00:00:00.000Z`)."""
    days, of_day = divmod(ms, _DAY_MS)
    year, month, day = _civil_from_days(days)
    seconds, millis = divmod(of_day, 1000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    shown = f"{year:04d}" if 0 <= year <= 9999 else f"{year:+07d}"
    return f"{shown}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}.{millis:03d}Z"


def _civil_from_days(days: int) -> tuple[int, int, int]:
    """The proleptic Gregorian date `days` after 1970-01-01 (`_days_from_civil` undone)."""
    days += 719_468
    era = days // 146_097
    of_era = days - era * 146_097
    year_of_era = (of_era - of_era // 1460 + of_era // 36_524 - of_era // 146_096) // 365
    of_year = of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    month_index = (5 * of_year + 2) // 153  # from March
    day = of_year - (153 * month_index + 2) // 5 + 1
    month = month_index + 3 if month_index < 10 else month_index - 9
    return year_of_era + era * 400 + (month <= 2), month, day


def _in_range(ms: int) -> int | None:
    return ms if -MAX_TIME_MS <= ms <= MAX_TIME_MS else None


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to a proleptic Gregorian date; a day past the month's end rolls
    over into the next month."""
    year -= month <= 2
    era = year // 400
    of_era = year - era * 400
    of_year = (153 * (month - 3 if month > 2 else month + 9) + 2) // 5 + day - 1
    return era * 146_097 + of_era * 365 + of_era // 4 - of_era // 100 + of_year - 719_468
