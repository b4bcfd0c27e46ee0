"""One session file on disk: a tolerant reader, a locked appender and an incremental tail."""

from __future__ import annotations

import codecs
import errno
import fcntl
import os
import re
from dataclasses import dataclass, field

import msgspec

from pi_lsp.session.entries import Envelope, SessionHeader, envelope_decoder, header_decoder

BOM = b"\xef\xbb\xbf"
MAX_TAIL_READ = 64 << 20
PREFIX_CHECK = 512
SUFFIX_CHECK = 64
UTF8_CHUNK = 16 << 10  # small pieces keep the check's scratch strings in cache

# An escaped backslash, a surrogate pair, or a lone surrogate escape (JSON allows all three).
_SURROGATE_ESCAPE = re.compile(
    rb"\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[dD][89a-fA-F][0-9a-fA-F]{2}"
)


class NotASessionError(Exception):
    """The file exists but holds no pi session header."""


class WriteFailedError(OSError):
    """An append did not reach the disk whole; the file was cut back to where it was."""

    def __str__(self) -> str:
        return f"could not write to {self.filename}: {self.strerror}"


class Problem(msgspec.Struct, omit_defaults=True, rename="camel"):
    kind: str
    message: str
    line: int | None = None
    entry_id: str | None = None
    repair: str | None = None  # what a repair would do (`check` fills it in)


@dataclass(slots=True)
class Record:
    """One entry line: where it was, its bytes as read (valid UTF-8 JSON), its envelope, and
    the exact bytes on disk when reading had to repair them."""

    line: int
    raw: bytes
    env: Envelope
    disk: bytes | None = None

    @property
    def original(self) -> bytes:
        return self.raw if self.disk is None else self.disk


@dataclass(slots=True)
class LineBatch:
    records: list[Record] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    header: SessionHeader | None = None
    header_raw: bytes | None = None


def _classify(raw: bytes, error: Exception) -> Problem:
    if not isinstance(error, msgspec.ValidationError):
        return Problem("malformed", f"not valid JSON: {error}")
    if not raw.lstrip().startswith(b"{"):
        try:
            msgspec.json.decode(raw)
        except msgspec.DecodeError as syntax:
            return Problem("malformed", f"not valid JSON: {syntax}")
        return Problem("not-object", "line is JSON but not an object")
    return Problem("invalid-entry", f"entry has a field of the wrong type: {error}")


def is_utf8(data: bytes) -> bool:
    """Whether `data` is valid UTF-8, checked in pieces so no large string is built."""
    if data.isascii():
        return True
    decode = codecs.getincrementaldecoder("utf-8")().decode
    view = memoryview(data)
    try:
        for start in range(0, len(data), UTF8_CHUNK):
            decode(view[start:start + UTF8_CHUNK])
        decode(b"", True)
    except UnicodeDecodeError:
        return False
    return True


def _replace_lone_surrogate(match: re.Match[bytes]) -> bytes:
    text = match.group()
    return text if len(text) != 6 else "\ufffd".encode()


def repair_line(raw: bytes) -> tuple[bytes, list[Problem]]:
    """Read a line as pi (JavaScript) reads it: invalid UTF-8 and lone surrogates become U+FFFD.

    Node replaces each maximal invalid subpart with one U+FFFD, as Python's `errors="replace"`
    does; a lone surrogate survives JSON.parse but is written out as U+FFFD.
    """
    problems: list[Problem] = []
    if not raw.isascii():
        try:
            raw.decode()
        except UnicodeDecodeError as error:
            raw = raw.decode(errors="replace").encode()
            problems.append(Problem("invalid-utf8", f"bytes that are not UTF-8 ({error.reason} "
                                    f"at byte {error.start}); read as U+FFFD, as pi reads them"))
    if b"\\u" in raw:
        repaired = _SURROGATE_ESCAPE.sub(_replace_lone_surrogate, raw)
        if repaired != raw:
            raw = repaired
            problems.append(Problem("lone-surrogate", "an unpaired UTF-16 surrogate escape (a cut "
                                    "emoji); read as U+FFFD, as pi writes it out"))
    return raw, problems


def parse_lines(lines: list[bytes], first_line: int, batch: LineBatch) -> None:
    """Decode complete lines into `batch`; the header is taken from the first object that parses."""
    decode = envelope_decoder.decode
    records = batch.records
    for offset, raw in enumerate(lines):
        number = first_line + offset
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        if not raw or raw.isspace():
            batch.problems.append(Problem("blank", "blank line", number))
            continue
        disk = raw
        raw, repairs = repair_line(raw)
        try:
            env = decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as error:
            problem = _classify(raw, error)
            problem.line = number
            batch.problems.append(problem)
            continue
        for repair in repairs:
            repair.line, repair.entry_id = number, env.id
        batch.problems.extend(repairs)
        if repairs and batch.header is not None:
            records.append(Record(number, raw, env, disk))
            continue
        if batch.header is None:
            batch.header = _decode_header(raw, env)
            batch.header_raw = raw
            continue
        if env.type == "session":
            batch.problems.append(Problem("extra-header", "a second session header", number))
            continue
        records.append(Record(number, raw, env))


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
    problems: list[Problem]
    offset: int
    inode: int
    lines_read: int
    prefix: bytes
    suffix: bytes  # the last bytes before `offset`: a rewrite that keeps the size changes them
    unterminated: bool  # the last line parsed but has no newline yet


def read_file(path: str) -> Snapshot:
    """Read a whole session file, tolerating damaged lines."""
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path} is a directory")
    with open(path, "rb") as handle:
        data = handle.read()
        inode = os.fstat(handle.fileno()).st_ino
    size = len(data)
    prefix = data[:PREFIX_CHECK]
    body = data[len(BOM):] if data.startswith(BOM) else data
    lines = body.split(b"\n")
    torn = lines.pop()
    unterminated = False
    batch = (_parse_clean(lines, body) if is_utf8(body) else None) or LineBatch()
    if batch.header is None:
        parse_lines(lines, 1, batch)
    offset = size
    if torn:
        torn_line = len(lines) + 1
        probe = LineBatch(header=batch.header, header_raw=batch.header_raw)
        parse_lines([torn], torn_line, probe)
        if not probe.problems:
            batch.records.extend(probe.records)
            batch.header, batch.header_raw = probe.header, probe.header_raw
            unterminated = True
        else:
            offset = size - len(torn)
            batch.problems.append(
                Problem("torn", "last line is incomplete (no newline; does not parse)", torn_line)
            )
    if batch.header is None or batch.header_raw is None:
        raise NotASessionError("it has no session header")
    return Snapshot(
        header=batch.header,
        header_raw=batch.header_raw,
        records=batch.records,
        problems=batch.problems,
        offset=offset,
        inode=inode,
        lines_read=len(lines) + unterminated,
        prefix=prefix,
        suffix=data[max(0, offset - SUFFIX_CHECK):offset],
        unterminated=unterminated,
    )


def _parse_clean(lines: list[bytes], body: bytes) -> LineBatch | None:
    """The fast path for an undamaged file: every line decoded in one call."""
    if not lines or b"\r" in body:
        return None
    try:
        envelopes = envelope_decoder.decode_lines(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None  # some line is damaged; the careful path reports which
    if len(envelopes) != len(lines) or envelopes[0].type != "session":
        return None  # blank lines were skipped, or the header is not first
    header = _decode_header(lines[0], envelopes[0])
    records = [Record(number, raw, env) for number, (raw, env)
               in enumerate(zip(lines, envelopes, strict=True), 1) if number > 1]
    if any(record.env.type == "session" for record in records):
        return None
    return LineBatch(records=records, header=header, header_raw=lines[0])


def append_lines(path: str, lines: list[bytes], *, create: bool = False,
                 exclusive: bool = False) -> None:
    """Append complete lines in one `write()` under an exclusive advisory lock.

    A torn last line is terminated first so the new entries never join it. A write that fails
    part way (disk full, I/O error) is cut back off, so no torn line is left behind.
    """
    flags = os.O_RDWR | os.O_APPEND | (os.O_CREAT if create else 0) | \
        (os.O_EXCL if exclusive else 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as error:
        raise WriteFailedError(error.errno, error.strerror, path) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        prefix = b""
        if size and os.pread(fd, 1, size - 1) != b"\n":
            prefix = b"\n"
        payload = prefix + b"".join(line + b"\n" for line in lines)
        written = 0
        try:
            while written < len(payload):
                count = os.write(fd, payload[written:])
                if count == 0:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                written += count
        except OSError as error:
            _cut_back(fd, size, written)
            raise WriteFailedError(error.errno, error.strerror, path) from None
    finally:
        os.close(fd)


def _cut_back(fd: int, size: int, written: int) -> None:
    """Undo a partial append, unless someone else (pi takes no lock) has written since."""
    if written and os.fstat(fd).st_size == size + written:
        os.ftruncate(fd, size)


@dataclass(slots=True)
class TailResult:
    lines: list[bytes]
    first_line: int
    reset: bool


@dataclass(slots=True)
class Tail:
    """Reads only what was appended since the last read; notices truncation and replacement."""

    path: str
    offset: int
    inode: int
    prefix: bytes
    lines_read: int
    unterminated: bool = False
    partial: bytes = b""
    suffix: bytes = b""

    @classmethod
    def after(cls, path: str, snapshot: Snapshot) -> Tail:
        prefix = snapshot.prefix[: snapshot.offset]
        return cls(path, snapshot.offset, snapshot.inode, prefix, snapshot.lines_read,
                   snapshot.unterminated, suffix=snapshot.suffix)

    def replaced(self) -> bool:
        """Whether the file at the path is no longer the one read (gone, another inode, cut
        short, or rewritten: its first or last known bytes differ)."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return True
        try:
            return self._replaced(fd, os.fstat(fd))
        finally:
            os.close(fd)

    def _replaced(self, fd: int, stat: os.stat_result) -> bool:
        if stat.st_ino != self.inode or stat.st_size < self.offset:
            return True
        if os.pread(fd, len(self.prefix), 0) != self.prefix:
            return True
        start = self.offset - len(self.suffix)
        return os.pread(fd, len(self.suffix), start) != self.suffix

    def poll(self) -> TailResult:
        """Complete new lines, or `reset=True` when the file must be read again from the start."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return TailResult([], 0, True)
        try:
            stat = os.fstat(fd)
            if self._replaced(fd, stat):
                return TailResult([], 0, True)
            if stat.st_size == self.offset:
                return TailResult([], self.lines_read + 1, False)
            data = os.pread(fd, min(stat.st_size - self.offset, MAX_TAIL_READ), self.offset)
        finally:
            os.close(fd)
        self.offset += len(data)
        self.suffix = (self.suffix + data[-SUFFIX_CHECK:])[-SUFFIX_CHECK:]
        if self.unterminated and data.startswith(b"\n"):
            data = data[1:]  # the newline that ends a line already taken
        self.unterminated = False
        *lines, self.partial = (self.partial + data).split(b"\n")
        first = self.lines_read + 1
        self.lines_read += len(lines)
        return TailResult(lines, first, False)
