"""One session file on disk: a tolerant reader, a locked appender and an incremental tail."""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass, field

import msgspec

from pi_lsp.session.entries import Envelope, SessionHeader, envelope_decoder, header_decoder

BOM = b"\xef\xbb\xbf"
MAX_TAIL_READ = 64 << 20
PREFIX_CHECK = 512


class NotASessionError(Exception):
    """The file exists but holds no pi session header."""


class Problem(msgspec.Struct, omit_defaults=True, rename="camel"):
    kind: str
    message: str
    line: int | None = None
    entry_id: str | None = None


@dataclass(slots=True)
class Record:
    """One entry line: where it was, its exact bytes, and its decoded envelope."""

    line: int
    raw: bytes
    env: Envelope


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
        try:
            env = decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as error:
            problem = _classify(raw, error)
            problem.line = number
            batch.problems.append(problem)
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
    batch = _parse_clean(lines, body) or LineBatch()
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


def append_lines(path: str, lines: list[bytes], *, create: bool = False) -> None:
    """Append complete lines in one `write()` under an exclusive advisory lock.

    A torn last line is terminated first so the new entries never join it.
    """
    flags = os.O_RDWR | os.O_APPEND | (os.O_CREAT if create else 0)
    fd = os.open(path, flags, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        prefix = b""
        if size and os.pread(fd, 1, size - 1) != b"\n":
            prefix = b"\n"
        payload = prefix + b"".join(line + b"\n" for line in lines)
        written = os.write(fd, payload)
        while written < len(payload):
            written += os.write(fd, payload[written:])
    finally:
        os.close(fd)


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

    @classmethod
    def after(cls, path: str, snapshot: Snapshot) -> Tail:
        prefix = snapshot.prefix[: snapshot.offset]
        return cls(path, snapshot.offset, snapshot.inode, prefix, snapshot.lines_read,
                   snapshot.unterminated)

    def poll(self) -> TailResult:
        """Complete new lines, or `reset=True` when the file must be read again from the start."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return TailResult([], 0, True)
        try:
            stat = os.fstat(fd)
            replaced = stat.st_ino != self.inode or stat.st_size < self.offset
            if replaced or not self._same_prefix(fd):
                return TailResult([], 0, True)
            if stat.st_size == self.offset:
                return TailResult([], self.lines_read + 1, False)
            data = os.pread(fd, min(stat.st_size - self.offset, MAX_TAIL_READ), self.offset)
        finally:
            os.close(fd)
        self.offset += len(data)
        if self.unterminated and data.startswith(b"\n"):
            data = data[1:]  # the newline that ends a line already taken
        self.unterminated = False
        *lines, self.partial = (self.partial + data).split(b"\n")
        first = self.lines_read + 1
        self.lines_read += len(lines)
        return TailResult(lines, first, False)

    def _same_prefix(self, fd: int) -> bool:
        """A rewrite to the same or a larger size keeps the inode; the first bytes tell."""
        return os.pread(fd, len(self.prefix), 0) == self.prefix
