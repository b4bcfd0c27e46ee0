"""Reading what was appended to a session file since the last read, by anyone."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from pi_lsp.session.journal import SUFFIX_CHECK, LineBatch, LineSplitter, Problem, Snapshot

MAX_TAIL_READ = 64 << 20


@dataclass(slots=True)
class TailResult:
    lines: list[bytes]
    first_line: int
    reset: bool
    problems: list[Problem] = field(default_factory=list)  # lines dropped as too long


@dataclass(slots=True)
class Tail:
    """Reads only what was appended since the last read; notices truncation and replacement."""

    path: str
    offset: int
    inode: int
    prefix: bytes
    lines: LineSplitter
    unterminated: bool = False
    suffix: bytes = b""

    @classmethod
    def after(cls, path: str, snapshot: Snapshot) -> Tail:
        prefix = snapshot.prefix[: snapshot.offset]
        lines = LineSplitter(snapshot.lines_read + 1, dropping=snapshot.dropping)
        return cls(path, snapshot.offset, snapshot.inode, prefix, lines, snapshot.unterminated,
                   suffix=snapshot.suffix)

    @property
    def lines_read(self) -> int:
        return self.lines.next_line - 1

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

    def holds(self, fd: int, stat: os.stat_result) -> bool:
        """Whether the open file `fd` is still the one read (appended to or not)."""
        return not self._replaced(fd, stat)

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
        if self.unterminated and not data.startswith(b"\n"):
            # The last line, taken with no newline, runs on into the new bytes (pi 0.73 appends
            # straight after it): the record taken from it is gone as pi reads the line, and
            # only a read of the whole line again says what it is now. (A session appending or
            # mid-turn then moves to a new file, as for a rewrite: it holds that record.)
            return TailResult([], 0, True)
        self.offset += len(data)
        self.suffix = (self.suffix + data[-SUFFIX_CHECK:])[-SUFFIX_CHECK:]
        if self.unterminated:
            data = data[1:]  # the newline that ends a line already taken
        self.unterminated = False
        found = self.lines.feed(data)
        dropped = LineBatch()
        self.lines.take_too_long(dropped)
        if found is None:
            return TailResult([], self.lines_read + 1, False, dropped.problems)
        return TailResult(found.lines(), found.first_line, False, dropped.problems)
