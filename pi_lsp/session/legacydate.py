"""V8's legacy date parser (src/date/dateparser*.h): how `new Date(text)` reads what is not in
the ISO form, as `toUTCString()` ("Thu, 01 Jan 1970 00:00:00 GMT"), `toString()` ("Thu Jan 01
1970 00:00:00 GMT+0000 (Coordinated Universal Time)"), RFC 2822 mail dates, "Jan 2, 2024",
"2024/01/02 03:04" and "1/2/24 3:04 PM" write it. A port, token for token: V8 reads an ISO
prefix, then takes numbers, words and signs as they come; its answers are Node's
(tests/fixtures/js_dates.json, js_legacy_dates.json).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pi_lsp.session.jsontext import JS_WHITESPACE

_MAX_DIGITS = 9  # V8 reads a numeral's first nine digits after its leading zeros
_SMI_MAX = 2**31 - 1

# Words by their first three letters (lower case): a month name may be longer, others not.
_MONTH, _ZONE, _T, _AM_PM, _WORD = "month", "zone", "t", "ampm", "word"
_KEYWORDS: dict[str, tuple[str, int]] = {
    **{name: (_MONTH, n) for n, name in enumerate(["jan", "feb", "mar", "apr", "may", "jun",
                                                   "jul", "aug", "sep", "oct", "nov", "dec"], 1)},
    "am": (_AM_PM, 0), "pm": (_AM_PM, 12), "ut": (_ZONE, 0), "utc": (_ZONE, 0),
    "z": (_ZONE, 0), "gmt": (_ZONE, 0), "cdt": (_ZONE, -5), "cst": (_ZONE, -6),
    "edt": (_ZONE, -4), "est": (_ZONE, -5), "mdt": (_ZONE, -6), "mst": (_ZONE, -7),
    "pdt": (_ZONE, -7), "pst": (_ZONE, -8), "t": (_T, 0),
}
_SPACES = frozenset(JS_WHITESPACE)


@dataclass(frozen=True)
class _Token:
    kind: str  # "number", "symbol", "word", "space", "end", "other"
    value: int | str = 0
    length: int = 0
    word: str = _WORD  # a word's keyword type

    def is_symbol(self, char: str) -> bool:
        return self.kind == "symbol" and self.value == char

    def is_sign(self) -> bool:
        return self.is_symbol("+") or self.is_symbol("-")

    def is_number(self, length: int | None = None) -> bool:
        return self.kind == "number" and (length is None or self.length == length)

    def is_z(self) -> bool:
        return self.kind == "word" and self.word == _ZONE and self.length == 1 and \
            self.value == 0


class _Scanner:
    """V8's DateStringTokenizer: one token ahead. A NUL ends the text, as in V8."""

    def __init__(self, text: str) -> None:
        self.text = text.split("\0", 1)[0]
        self.at = 0
        self.next_token = self._scan()

    def peek(self) -> _Token:
        return self.next_token

    def next(self) -> _Token:
        token, self.next_token = self.next_token, self._scan()
        return token

    def skip(self, char: str) -> bool:
        if self.next_token.is_symbol(char):
            self.next()
            return True
        return False

    def _scan(self) -> _Token:
        text, start = self.text, self.at
        if start >= len(text):
            return _Token("end")
        char = text[start]
        if "0" <= char <= "9":
            return self._numeral(start)
        if char in ":-+.)":
            self.at += 1
            return _Token("symbol", char)
        if char >= "A" and char not in _SPACES:
            end = start
            while end < len(text) and text[end] >= "A" and text[end] not in _SPACES:
                end += 1
            self.at = end
            return _keyword(text[start:end])
        self.at += 1
        if char in _SPACES:
            return _Token("space")
        if char == "(":  # a comment, nested ones too, to its closing parenthesis or the end
            depth = 1
            while depth and self.at < len(text):
                depth += {"(": 1, ")": -1}.get(text[self.at], 0)
                self.at += 1
        return _Token("other")

    def _numeral(self, start: int) -> _Token:
        text, end = self.text, start
        while end < len(text) and "0" <= text[end] <= "9":
            end += 1
        self.at = end
        digits = text[start:end].lstrip("0")[:_MAX_DIGITS]
        return _Token("number", int(digits or "0"), end - start)


def _keyword(text: str) -> _Token:
    # JavaScript counts UTF-16 units; V8 lower-cases ASCII letters only.
    length = len(text.encode("utf-16-le", "surrogatepass")) // 2  # half an emoji counts 1
    prefix = "".join(c.lower() if c.isascii() else c for c in text[:3])
    found = _KEYWORDS.get(prefix)
    if found is None or (length > 3 and found[0] != _MONTH):
        return _Token("word", 0, length, _WORD)
    return _Token("word", found[1], length, found[0])


@dataclass
class _Day:
    parts: list[int] = field(default_factory=list)
    month_name: int | None = None
    iso: bool = False

    def add(self, n: int) -> bool:
        if len(self.parts) == 3:
            return False
        self.parts.append(n)
        return True

    def fields(self) -> tuple[int, int, int] | None:
        """Year, month, day; None when they are no date."""
        if not self.parts:
            return None
        one, two, three = [*self.parts, 1, 1][:3]  # day and month default to 1
        if self.month_name is None:
            if self.iso or not 1 <= one <= 31:
                year, month, day = one, two, three
            else:
                year, month, day = three, one, two
        else:
            month = self.month_name
            year, day = (one, two) if not 1 <= one <= 31 else (two, one)
        if not self.iso and 0 <= year <= 99:
            year += 2000 if year <= 49 else 1900
        if year > _SMI_MAX or not 1 <= month <= 12 or not 1 <= day <= 31:
            return None
        return year, month, day


@dataclass
class _Time:
    parts: list[int] = field(default_factory=list)
    hour_offset: int | None = None

    def expecting(self, n: int) -> bool:
        index = len(self.parts)
        return (index in (1, 2) and 0 <= n <= 59) or (index == 3 and 0 <= n <= 999)

    def add(self, n: int) -> bool:
        if len(self.parts) == 4:
            return False
        self.parts.append(n)
        return True

    def add_final(self, n: int) -> bool:
        if not self.add(n):
            return False
        self.parts += [0] * (4 - len(self.parts))
        return True

    def fields(self) -> tuple[int, int, int, int] | None:
        hour, minute, second, millis = [*self.parts, 0, 0, 0, 0][:4]
        if self.hour_offset is not None:
            if not 0 <= hour <= 12:
                return None
            hour = hour % 12 + self.hour_offset
        if not (hour <= 23 and minute <= 59 and second <= 59 and millis <= 999) and \
                (hour, minute, second, millis) != (24, 0, 0, 0):
            return None
        return hour, minute, second, millis


@dataclass
class _Zone:
    sign: int | None = None
    hour: int | None = None
    minute: int | None = None

    def set(self, hours: int) -> None:
        self.sign = -1 if hours < 0 else 1
        self.hour, self.minute = abs(hours), 0

    def expecting(self, n: int) -> bool:
        return self.hour is not None and self.minute is None and 0 <= n <= 59

    def is_utc(self) -> bool:
        return self.hour == 0 and self.minute == 0

    def too_far(self) -> bool:
        return self._seconds() > _SMI_MAX  # V8 keeps an offset's seconds in a small integer

    def offset_s(self) -> int | None:
        """Seconds east of UTC; None: local time."""
        return None if self.sign is None else self._seconds() * self.sign

    def _seconds(self) -> int:
        # Unsigned 32-bit arithmetic in V8: a huge offset wraps around.
        return ((self.hour or 0) * 3600 + (self.minute or 0) * 60) % 2**32


def _milliseconds(token: _Token) -> int:
    """A fraction's first three digits, from its value and how many digits it had."""
    number, length = int(token.value), min(token.length, _MAX_DIGITS)
    scale: int = 10 ** abs(length - 3)
    return number * scale if length < 3 else number // scale


def _iso_prefix(scanner: _Scanner, day: _Day, time: _Time, zone: _Zone) -> _Token | None:
    """V8's ParseES5DateTime: the ISO form's date (and time, then to the end); the token the
    legacy reading goes on from, or None: no date at all."""
    if scanner.peek().is_sign():
        sign = scanner.next()
        if not scanner.peek().is_number(6):
            return sign
        year = int(scanner.next().value)
        if sign.value == "-" and year == 0:
            return sign
        day.add(-year if sign.value == "-" else year)
    elif scanner.peek().is_number(4):
        day.add(int(scanner.next().value))
    else:
        return scanner.next()
    if scanner.skip("-"):
        if not scanner.peek().is_number(2) or not 1 <= int(scanner.peek().value) <= 12:
            return scanner.next()
        day.add(int(scanner.next().value))
        if scanner.skip("-"):
            if not scanner.peek().is_number(2) or not 1 <= int(scanner.peek().value) <= 31:
                return scanner.next()
            day.add(int(scanner.next().value))
    if not (scanner.peek().kind == "word" and scanner.peek().word == _T):
        if scanner.peek().kind != "end":
            return scanner.next()
    elif not _iso_time(scanner, time, zone):
        return None
    if zone.hour is None and not time.parts:
        zone.set(0)  # a date alone is UTC
    day.iso = True
    return _Token("end")


def _iso_time(scanner: _Scanner, time: _Time, zone: _Zone) -> bool:
    """'T'HH:mm[:ss[.sss]][Z|±hh:mm] to the end of the text."""
    scanner.next()

    def two(low: int, high: int) -> int | None:
        token = scanner.peek()
        if not token.is_number(2) or not low <= int(token.value) <= high:
            return None
        return int(scanner.next().value)

    hour = two(0, 24)
    if hour is None or not scanner.skip(":"):
        return False
    limit = 0 if hour == 24 else 59
    minute = two(0, limit)
    if minute is None:
        return False
    time.add(hour)
    time.add(minute)
    if scanner.skip(":"):
        second = two(0, limit)
        if second is None:
            return False
        time.add(second)
        if scanner.skip("."):
            if not scanner.peek().is_number() or (hour == 24 and int(scanner.peek().value)):
                return False
            time.add(_milliseconds(scanner.next()))
    if scanner.peek().is_z():
        scanner.next()
        zone.set(0)
    elif scanner.peek().is_sign():
        zone.sign = -1 if scanner.next().value == "-" else 1
        hours = two(0, 23)
        if hours is None or not scanner.skip(":"):
            return False
        minutes = two(0, 59)
        if minutes is None:
            return False
        zone.hour, zone.minute = hours, minutes
    return scanner.peek().kind == "end"


def legacy_fields(text: str) -> tuple[tuple[int, int, int, int, int, int, int], int | None
                                      ] | None:
    """What V8's DateParser reads in `text`: (year, month, day, hour, minute, second, ms) and
    the offset east of UTC in seconds (None: local time); None where it reads no date."""
    scanner, day, time, zone = _Scanner(text), _Day(), _Time(), _Zone()
    token = _iso_prefix(scanner, day, time, zone)
    if token is None:
        return None
    read_number = bool(day.parts)
    while token.kind != "end":
        if token.kind == "number":
            read_number = True
            if not _number(scanner, int(token.value), day, time, zone):
                return None
        elif token.kind == "word":
            if not _word(scanner, token, day, time, zone, read_number):
                return None
        elif token.is_sign() and (zone.is_utc() or time.parts):
            read_number = True
            if not _offset(scanner, token, zone):
                return None
        elif (token.is_sign() or token.is_symbol(")")) and read_number:
            return None  # a sign or ')' after a number that starts nothing
        token = scanner.next()
    date, clock = day.fields(), time.fields()
    if date is None or clock is None or zone.too_far():
        return None
    return (*date, *clock), zone.offset_s()


def _number(scanner: _Scanner, n: int, day: _Day, time: _Time, zone: _Zone) -> bool:
    """A number: an hour or minute before ':', seconds before '.', an offset's minutes, the
    time's next field, else the date's."""
    if scanner.skip(":"):
        if scanner.skip(":"):  # n::
            if time.parts:
                return False
            time.add(n)
            time.add(0)
        elif not time.add(n):
            return False
        elif scanner.peek().is_symbol("."):
            scanner.next()
        return True
    if scanner.skip(".") and time.expecting(n):  # (V8 takes the '.' either way)
        time.add(n)
        if not scanner.peek().is_number():
            return False
        time.add_final(_milliseconds(scanner.next()))
    elif zone.expecting(n):
        zone.minute = n
    elif time.expecting(n):
        time.add_final(n)
        peek = scanner.peek()  # a time's last number ends it
        if peek.kind not in ("end", "space") and not peek.is_z() and not peek.is_sign():
            return False
    else:
        if not day.add(n):
            return False
        scanner.skip("-")
    return True


def _word(scanner: _Scanner, token: _Token, day: _Day, time: _Time, zone: _Zone,
          read_number: bool) -> bool:
    """AM/PM after a time, a month name, a zone name after a number; another word only
    before the first number, and apart from it."""
    value = int(token.value)
    if token.word == _AM_PM and time.parts:
        time.hour_offset = value
    elif token.word == _MONTH:
        day.month_name = value
        scanner.skip("-")
    elif token.word == _ZONE and read_number:
        zone.set(value)
    elif read_number or scanner.peek().is_number():
        return False
    return True


def _offset(scanner: _Scanner, sign: _Token, zone: _Zone) -> bool:
    """An offset after a time or UTC: ±h, ±hh, ±hmm, ±hhmm, or ±hh: (its minutes next)."""
    zone.sign = -1 if sign.value == "-" else 1
    n, length = 0, 0
    if scanner.peek().is_number():
        number = scanner.next()
        n, length = int(number.value), number.length
    if scanner.peek().is_symbol(":"):
        zone.hour, zone.minute = n, None
    elif length in (1, 2):
        zone.hour, zone.minute = n, 0
    elif length in (3, 4):
        zone.hour, zone.minute = n // 100, n % 100
    else:
        return False
    return True
