"""Reading one session file: a tolerant, bounded-memory reader of its lines (writing is in
`appender`, reading what was appended since in `tail`)."""

from __future__ import annotations

import codecs
import itertools
import operator
import os
import re
import stat
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any, NamedTuple

import msgspec

from pi_lsp.session.entries import (
    Envelope,
    SessionHeader,
    envelope_decoder,
    header_decoder,
    loose_envelope_decoder,
)
from pi_lsp.session.jsontext import Decoder, value_decoder

BOM = b"\xef\xbb\xbf"
# Files are read a few MB at a time. Each piece is held about three times over while it is
# split and decoded (the piece, its lines, their envelopes): 8 MB pieces put 25 MB on top of
# what a read keeps, 2 MB ones 6 MB, at no cost in time.
READ_CHUNK = 2 << 20
MAX_LINE_BYTES = 64 << 20  # a longer line is skipped as damaged, never held whole
# What a message's entry holds besides the message (ids and timestamp), with room to spare: a
# message this far under MAX_LINE_BYTES can be written.
ENTRY_OVERHEAD = 4096
MAX_NESTING = 200  # deeper JSON is skipped as damaged: decoding it would exhaust the stack
PREFIX_CHECK = 512
SUFFIX_CHECK = 64
UTF8_CHUNK = 16 << 10  # small pieces keep the check's scratch strings in cache
# Past this many problems of one kind, the rest are counted, not listed: a hostile file of 2M
# damaged lines held 2M problems (~150 bytes each) to report what one line would say.
PROBLEMS_PER_KIND = 1000


class NotASessionError(Exception):
    """The file exists but holds no pi session header."""


class NotARegularFileError(NotASessionError):
    """The path is a FIFO, a device or a socket: reading it could wait forever, or never end."""


class Problem(msgspec.Struct, omit_defaults=True, rename="camel"):
    kind: str
    message: str
    line: int | None = None
    entry_id: str | None = None
    repair: str | None = None  # what a repair would do (`check` fills it in)
    more: int | None = None  # how many more of its kind this one counts, not listed one by one


class Problems(list[Problem]):
    """Problems in the order found, at most PROBLEMS_PER_KIND of each kind listed: the rest
    are counted by one more problem of the kind, at the first line not listed."""

    def __init__(self, problems: Iterable[Problem] = ()) -> None:
        super().__init__()
        self._listed: dict[str, int] = {}
        self._summaries: dict[str, Problem] = {}
        self.extend(problems)

    def append(self, problem: Problem) -> None:
        kind = problem.kind
        summary = self._summaries.get(kind)
        if summary is None and problem.more is None:
            listed = self._listed.get(kind, 0)
            if listed < PROBLEMS_PER_KIND:
                self._listed[kind] = listed + 1
                super().append(problem)
                return
        if summary is None:  # the first left out (or another list's summary)
            summary = self._summaries[kind] = Problem(kind, "", problem.line, more=0)
            super().append(summary)
        summary.more = more = (summary.more or 0) + (problem.more or 1)
        summary.message = _UNLISTED % (more, kind)

    def extend(self, problems: Iterable[Problem]) -> None:
        for problem in problems:
            self.append(problem)


_UNLISTED = (f"%d more %s problem(s) from this line on are not listed (only the first "
             f"{PROBLEMS_PER_KIND} of each kind are)")


def problem_count(problems: Iterable[Problem]) -> int:
    """How many problems `problems` stands for, those only counted included."""
    return sum(1 if problem.more is None else problem.more for problem in problems)


class Record(msgspec.Struct, gc=False):
    """One entry line: where it was, its text as read (valid UTF-8 JSON), its envelope, and
    the exact bytes on disk when reading had to repair them.

    (gc=False: a record refers only to bytes, strings and views.)"""

    line: int
    text: msgspec.Raw
    env: Envelope
    disk: bytes | None = None

    @property
    def raw(self) -> bytes:
        return bytes(self.text)

    @property
    def original(self) -> bytes:
        return self.raw if self.disk is None else self.disk


class SkippedLine(msgspec.Struct, gc=False):
    """A line the reader skipped (blank, damaged, a second header) and its bytes: pi may read
    it, so a rewrite of the whole session writes it again."""

    line: int
    original: bytes
    # Before the header: a copy writes it there, where it cannot become an entry.
    before_header: bool = False


class SkippedLines:
    """Lines kept as their bytes alone (skipped ones, id-less entries), packed: their numbers,
    ends and bytes in buffers, ~17 bytes a line beside its bytes, where a SkippedLine each
    cost ~120 (2M blank lines, 240 MB)."""

    def __init__(self) -> None:
        self._numbers = array("q")
        self._ends = array("q")  # where each line's bytes end in `_data`
        self._before_header = array("b")
        self._data = bytearray()

    def add(self, line: int, original: bytes, before_header: bool = False) -> None:
        self._numbers.append(line)
        self._data += original
        self._ends.append(len(self._data))
        self._before_header.append(before_header)

    def extend(self, other: SkippedLines) -> None:
        base = len(self._data)
        self._numbers += other._numbers
        self._ends += array("q", [end + base for end in other._ends]) if base else other._ends
        self._before_header += other._before_header
        self._data += other._data

    def __len__(self) -> int:
        return len(self._numbers)

    def numbers(self) -> array[int]:
        return self._numbers

    def count_before(self, line: int) -> int:
        """How many of the lines (added in file order) come before `line`."""
        return bisect_left(self._numbers, line)

    def __getitem__(self, index: int) -> SkippedLine:
        index = range(len(self._numbers))[index]  # (a negative one counts from the end)
        start = self._ends[index - 1] if index else 0
        return SkippedLine(self._numbers[index], bytes(self._data[start:self._ends[index]]),
                           bool(self._before_header[index]))

    def __iter__(self) -> Iterator[SkippedLine]:
        """Each line, in the order added, made anew (so only as many are held as are kept)."""
        start = 0
        data = self._data
        for line, end, before_header in zip(self._numbers, self._ends, self._before_header,
                                            strict=True):
            yield SkippedLine(line, bytes(data[start:end]), bool(before_header))
            start = end


# Id-less entries read for more than the leaf: a label or name counts, a user or assistant
# message dates the session in a listing, and a header is a second one.
_UNPACKED = ("label", "session_info", "message", "session")


@dataclass(slots=True)
class LineBatch:
    records: list[Record] = field(default_factory=list)
    problems: Problems = field(default_factory=Problems)
    skipped: SkippedLines = field(default_factory=SkippedLines)
    # Id-less entries that can change nothing but the leaf (see _UNPACKED): their bytes are
    # all a rewrite needs, and a hostile file may hold millions.
    idless: SkippedLines = field(default_factory=SkippedLines)
    header: SessionHeader | None = None
    header_raw: bytes | None = None
    pack_idless: bool = True  # False: every entry is a record (one line read again)

    def packs(self, env: Envelope) -> bool:
        """Whether an entry with `env` is kept in `idless`: it has no id and is of no type read
        for more than the leaf; and the file has ids (a version 1 file's are made up)."""
        return env.id is None and self.pack_idless and self.header is not None and \
            not self.header.version_number() < 2 and env.type not in _UNPACKED


def _classify(raw: bytes, error: Exception) -> Problem:
    if not isinstance(error, msgspec.ValidationError):
        return Problem("malformed", f"not valid JSON: {error}")
    # A field of the wrong type stops a decode before the JSON ends: the rest may not be
    # JSON (a line cut short after it, or with more after its object).
    try:
        value = value_decoder.decode(raw)
    except msgspec.ValidationError:
        # JSON that reads as no value (a ValidationError is a DecodeError too): the entry's
        # own error says what does not fit
        value = {}
    except msgspec.DecodeError as syntax:
        return Problem("malformed", f"not valid JSON: {syntax}")
    if not isinstance(value, dict):
        return Problem("not-object", "line is null, false, 0 or \"\" (JSON but not an object)")
    return Problem("invalid-entry", f"entry has a field of the wrong type: {error}")


def is_utf8(data: bytes, start: int = 0, end: int | None = None) -> bool:
    """Whether `data[start:end]` is valid UTF-8, checked in pieces so no large string is
    built."""
    if data.isascii():
        return True
    view = memoryview(data)[start:end]
    decode = codecs.utf_8_decode
    done = 0
    try:
        while len(view) - done > UTF8_CHUNK:
            # A piece may end inside a character (at most 3 bytes): the next one reads it again.
            done += decode(view[done:done + UTF8_CHUNK], None, False)[1]
        decode(view[done:], None, True)
    except UnicodeDecodeError:
        return False
    return True


_JSON_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_NOT_OPENERS = bytes(b for b in range(256) if b not in b"[{\n")
_BRACKET_AS_BRACE = bytes.maketrans(b"[", b"{")
_MANY_OPENERS = b"{" * (MAX_NESTING + 1)


def may_be_too_deep(data: bytes) -> bool:
    """Whether some line of `data` opens enough arrays and objects to nest too deep (a quick
    test of many lines at once; `too_deep` decides for one). Its openers, all as `{`, and its
    newlines are left: a row of too many is found by a substring search, which skips ahead."""
    return _MANY_OPENERS in data.translate(_BRACKET_AS_BRACE, _NOT_OPENERS)


def too_deep(raw: bytes) -> bool:
    """Whether the JSON in `raw` nests arrays and objects more than MAX_NESTING levels deep."""
    if raw.count(b"[") + raw.count(b"{") <= MAX_NESTING:
        return False
    brackets = _JSON_STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    depth = 0
    for char in brackets:
        depth += 1 if char in b"[{" else -1
        if depth > MAX_NESTING:
            return True
    return False


def repair_line(raw: bytes) -> tuple[bytes, list[Problem]]:
    """Read a line as pi (JavaScript) reads it: invalid UTF-8 becomes U+FFFD.

    Node replaces each maximal invalid subpart with one U+FFFD, as Python's `errors="replace"`
    does. (A lone surrogate escape is valid JSON that pi keeps; `jsontext` reads it.)
    """
    if raw.isascii():
        return raw, []
    try:
        raw.decode()
    except UnicodeDecodeError as error:
        return raw.decode(errors="replace").encode(), [Problem(
            "invalid-utf8", f"bytes that are not UTF-8 ({error.reason} at byte {error.start}); "
            "read as U+FFFD, as pi reads them")]
    return raw, []


def parse_lines(lines: list[bytes], first_line: int, batch: LineBatch) -> None:
    """Decode complete lines into `batch`; the header is taken from the first object that parses."""
    decode = envelope_decoder.decode
    records = batch.records
    skip = batch.skipped.add
    for offset, raw in enumerate(lines):
        number = first_line + offset
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        disk = raw
        if not raw or raw.isspace():
            batch.problems.append(Problem("blank", "blank line", number))
            skip(number, disk, batch.header is None)
            continue
        if too_deep(raw):
            batch.problems.append(Problem("too-deep", f"JSON nested more than {MAX_NESTING} "
                                          "levels deep", number))
            skip(number, disk, batch.header is None)
            continue
        raw, repairs = repair_line(raw)
        try:
            env = decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as error:
            loose = _read_loosely(raw, number, batch) \
                if isinstance(error, msgspec.ValidationError) else None
            if loose is None:
                problem = _classify(raw, error)
                problem.line = number
                batch.problems.append(problem)
                skip(number, disk, batch.header is None)
                continue
            env = loose
        for repair in repairs:
            repair.line, repair.entry_id = number, env.id
        batch.problems.extend(repairs)
        if batch.packs(env):
            batch.idless.add(number, disk)
            continue
        if repairs and batch.header is not None:
            records.append(Record(number, msgspec.Raw(raw), env, disk))
            continue
        if batch.header is None:
            batch.header = _decode_header(raw, env)
            batch.header_raw = raw
            continue
        if env.type == "session":
            batch.problems.append(Problem("extra-header", "a second session header", number))
            skip(number, disk)
            continue
        records.append(Record(number, msgspec.Raw(raw), env))


def _read_loosely(raw: bytes, number: int, batch: LineBatch) -> Envelope | None:
    """The envelope pi 1.6 reads from a line `Envelope` refuses, reported in `batch`; None for
    a line pi skips. Before the header only a session header is read: pi 1.6 checks its type
    and that its id is text, and refuses the file when it is not (NotASessionError)."""
    try:
        loose = loose_envelope_decoder.decode(raw)
    except msgspec.ValidationError:
        return _read_non_object(raw, number, batch) if batch.header is not None else None
    except msgspec.DecodeError:  # not JSON: `Envelope` stopped at a field before its end
        return None
    if batch.header is None:
        if loose.type != "session":
            return None
        if not isinstance(loose.id, str):  # pi 1.6 takes it as the header, and refuses the file
            raise NotASessionError("its session header's id is not text")
    env = loose.as_pi_reads_it()
    batch.problems.append(Problem("off-type-envelope", "; ".join(
        f"{name} is not text: read as {reading}, as pi reads it"
        for name, reading in loose.off_type().items()), number, env.id))
    return env


# Any JSON value, read as JSON.parse reads it: 1e999 as Infinity, a lone surrogate escape kept.
_FALSY = (None, False, 0, "")  # JavaScript's falsy JSON values (0 matches 0.0 and -0.0 too)


def _read_non_object(raw: bytes, number: int, batch: LineBatch) -> Envelope | None:
    """A line that is JSON but no object: pi 1.6 keeps every value JavaScript takes as true
    (42, [1], "x", true) as an entry with no type and no id, the leaf when last."""
    try:
        value = value_decoder.decode(raw)
    except msgspec.DecodeError:
        return None
    if value in _FALSY:
        return None
    batch.problems.append(Problem("non-object-entry", "line is JSON but not an object; pi reads "
                                  "it as an entry with no type and no id", number))
    return Envelope("")


def _decode_header(raw: bytes, env: Envelope) -> SessionHeader:
    if env.type != "session":
        raise NotASessionError("its first entry is not a session header")
    try:
        return header_decoder.decode(raw)
    except msgspec.ValidationError as error:
        raise NotASessionError(f"its session header is invalid: {error}") from None


@dataclass(slots=True)
class Snapshot:
    """Everything read from one file, plus where the next read should start."""

    header: SessionHeader
    header_raw: bytes
    records: list[Record]
    problems: Problems
    skipped: SkippedLines
    idless: SkippedLines  # id-less entries kept as bytes (`LineBatch.idless`)
    offset: int
    inode: int
    lines_read: int
    prefix: bytes
    suffix: bytes  # the last bytes before `offset`: a rewrite that keeps the size changes them
    unterminated: bool  # the last line parsed but has no newline yet
    dropping: bool = False  # the file ends inside a line too long to keep; it is being skipped


class Run(NamedTuple):
    """Complete lines in a row: the number of the first, and the lines. `data[start:end]`, the
    piece they were split from, holds every line but the first, which may have begun in an
    earlier piece (the checks of the fast path read the piece, not each line)."""

    first_line: int
    lines: list[bytes]
    data: bytes
    start: int
    end: int


@dataclass(slots=True)
class LineSplitter:
    """Complete lines out of bytes that arrive in pieces, in linear time and bounded memory: a
    line longer than MAX_LINE_BYTES is dropped as it arrives and only its number is kept."""

    next_line: int = 1
    pending: list[bytes] = field(default_factory=list)  # the unfinished line, in pieces
    pending_size: int = 0
    dropping: bool = False  # the unfinished line is over the limit: its bytes are dropped
    too_long: list[int] = field(default_factory=list)  # numbers of the lines dropped

    def feed(self, data: bytes) -> Run | None:
        """The lines `data` completes; None when it completes none that is kept."""
        cut = data.rfind(b"\n")
        if cut < 0:
            self._hold(data)
            return None
        first_end = data.find(b"\n")
        # Split from the piece itself, its unfinished line popped off: no copy of the piece
        # is made (a join with the held line, or a slice, copied every 2 MB once more).
        lines = data.split(b"\n")
        rest = lines.pop()
        if self.dropping or self.pending_size + first_end > MAX_LINE_BYTES:
            self.too_long.append(self.next_line)
            self.next_line += 1
            del lines[0]
        elif self.pending:
            lines[0] = b"".join([*self.pending, lines[0]])
        self.pending, self.pending_size, self.dropping = [], 0, False
        self._hold(rest)
        if not lines:
            return None
        run = Run(self.next_line, lines, data, first_end + 1, cut)
        self.next_line += len(lines)
        return run

    def _hold(self, piece: bytes) -> None:
        if self.dropping or not piece:
            return
        if self.pending_size + len(piece) > MAX_LINE_BYTES:
            self.pending, self.pending_size, self.dropping = [], 0, True
            return
        self.pending.append(piece)
        self.pending_size += len(piece)

    def forget_unfinished(self) -> None:
        """Drop the unfinished line held so far: it is to be read again from its start."""
        self.pending, self.pending_size, self.dropping = [], 0, False

    def rest(self) -> bytes:
        """The unfinished line held so far (nothing while one is being dropped)."""
        return b"".join(self.pending)

    def take_too_long(self, batch: LineBatch) -> None:
        """Report the lines dropped since the last call."""
        batch.problems.extend(Problem("too-long", f"line longer than {MAX_LINE_BYTES >> 20} MB",
                                      number) for number in self.too_long)
        self.too_long.clear()


Take = Callable[[LineBatch], None]


def read_file(path: str, take: Take | None = None) -> Snapshot:
    """Read a whole session file, tolerating damaged lines, a few MB at a time.

    With `take`, each batch of records is handed over as it is read and not kept (the
    snapshot's records stay empty), so a file of any size is read in bounded memory.
    """
    batch = LineBatch()
    lines = LineSplitter()
    with open_regular(path) as handle:
        inode = os.fstat(handle.fileno()).st_ino
        prefix = b""
        size = 0
        while chunk := handle.read(READ_CHUNK):
            if size == 0 and chunk.startswith(BOM):
                prefix, size, chunk = BOM, len(BOM), chunk[len(BOM):]
            if len(prefix) < PREFIX_CHECK:
                prefix += chunk[:PREFIX_CHECK - len(prefix)]
            size += len(chunk)
            found = lines.feed(chunk)
            lines.take_too_long(batch)
            if found is not None:
                _parse_run(found, batch)
            if take is not None:
                take(batch)
                batch.records, batch.problems = [], Problems()
                batch.skipped, batch.idless = SkippedLines(), SkippedLines()
        torn = lines.rest()
        offset = size - len(torn)
        unterminated = False
        if torn:
            probe = LineBatch(header=batch.header, header_raw=batch.header_raw)
            parse_lines([torn], lines.next_line, probe)
            # Only a line that is skipped is torn: one read with a repair (a last line `42`,
            # bytes that are not UTF-8) is what pi 1.6 reads from the line it has so far.
            if not probe.skipped:
                batch.records.extend(probe.records)
                batch.idless.extend(probe.idless)
                batch.problems.extend(probe.problems)
                batch.header, batch.header_raw = probe.header, probe.header_raw
                offset, unterminated = size, True
            else:
                batch.problems.append(Problem(
                    "torn", "last line is incomplete (no newline; does not parse)",
                    lines.next_line))
        elif lines.dropping:
            batch.problems.append(Problem(
                "torn", f"last line is incomplete (no newline) and longer than "
                f"{MAX_LINE_BYTES >> 20} MB; skipped", lines.next_line))
        if take is not None:
            take(batch)
        suffix = os.pread(handle.fileno(), min(offset, SUFFIX_CHECK),
                          max(0, offset - SUFFIX_CHECK))
    if batch.header is None or batch.header_raw is None:
        raise NotASessionError("it has no session header")
    return Snapshot(
        header=batch.header,
        header_raw=batch.header_raw,
        records=batch.records if take is None else [],
        problems=batch.problems if take is None else Problems(),
        skipped=batch.skipped if take is None else SkippedLines(),
        idless=batch.idless if take is None else SkippedLines(),
        offset=offset,
        inode=inode,
        lines_read=lines.next_line - 1 + unterminated,
        prefix=prefix[:offset],
        suffix=suffix,
        unterminated=unterminated,
        dropping=lines.dropping,
    )


def open_regular(path: str) -> IO[bytes]:
    """`path` opened for reading; IsADirectoryError or NotARegularFileError unless it is a
    regular file. O_NONBLOCK: a FIFO is refused at once, not waited on for a writer."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    mode = os.fstat(fd).st_mode
    if stat.S_ISREG(mode):
        return os.fdopen(fd, "rb")
    os.close(fd)
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(f"{path} is a directory")
    kind = _KINDS.get(stat.S_IFMT(mode), "special file")
    raise NotARegularFileError(f"it is a {kind}, not a regular file")


_KINDS = {stat.S_IFIFO: "FIFO", stat.S_IFSOCK: "socket", stat.S_IFCHR: "device",
          stat.S_IFBLK: "device"}


def _parse_run(run: Run, batch: LineBatch) -> None:
    """Decode a run of complete lines: all at once when none is damaged, else one by one."""
    if not _parse_clean(run, batch):
        parse_lines(run.lines, run.first_line, batch)


_type_of = operator.attrgetter("type")
_id_of = operator.attrgetter("id")


def _may_be_damaged(run: Run) -> bool:
    """Whether some line of `run` has a carriage return, bytes that are not UTF-8 or nesting
    too deep (its first line on its own, the others where they are in the piece)."""
    first, data, start, end = run.lines[0], run.data, run.start, run.end
    return (b"\r" in first or not is_utf8(first) or too_deep(first)
            or data.find(b"\r", start, end) >= 0 or not is_utf8(data, start, end)
            or may_be_too_deep(data))


def _parse_clean(run: Run, batch: LineBatch) -> bool:
    """The fast path for undamaged lines: each decoded straight to its envelope, none looked
    at first; False (nothing taken) when some line needs the careful path."""
    first_line, lines = run.first_line, run.lines
    if _may_be_damaged(run):
        return False
    try:
        # A line at a time, as pi reads: one value per line, whole (a stream decoder would
        # take several values on a line, or one across lines).
        envelopes = list(map(envelope_decoder.fast.decode, lines))
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return False  # some line is damaged; the careful path reports which
    header = None
    if batch.header is None:
        if envelopes[0].type != "session":
            return False  # the header is not first
        header_raw = lines[0]
        header = _decode_header(header_raw, envelopes[0])
        lines, envelopes, first_line = lines[1:], envelopes[1:], first_line + 1
    if "session" in map(_type_of, envelopes):
        return False  # a second header: the careful path reports it
    if None in map(_id_of, envelopes):
        return False  # an id-less entry: the careful path keeps it as bytes where it may
    if header is not None:
        batch.header, batch.header_raw = header, header_raw
    # A list, not the map itself: extended by a length it knows, the list grows as before.
    batch.records += list(map(Record, itertools.count(first_line), map(msgspec.Raw, lines),
                              envelopes))
    return True


class _WrittenId(msgspec.Struct):
    id: Any = msgspec.UNSET


_written_id_decoder: Decoder[_WrittenId] = Decoder(_WrittenId)


def written_id(record: Record) -> Any:
    """The `id` an entry line holds, of any type (UNSET: none, or the line is no object):
    pi's leafId when the line is last."""
    try:
        return _written_id_decoder.decode(record.text).id
    except msgspec.ValidationError:
        return msgspec.UNSET


def idless_record(line: SkippedLine) -> Record:
    """The record of an id-less entry kept as bytes, read again."""
    batch = LineBatch(header=_ANY_HEADER, pack_idless=False)
    parse_lines([line.original], line.line, batch)
    return batch.records[0]


_ANY_HEADER = SessionHeader(version=3, id="", timestamp="", cwd="")  # (a line after it is an entry)
