"""Reading what was appended to a session file since the last read, by anyone."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field

from pi_lsp.session.journal import SUFFIX_CHECK, LineBatch, LineSplitter, Problem, Snapshot

MAX_TAIL_READ = 64 << 20
# O_NONBLOCK: a FIFO put at the path opens at once (and is then a replacement), never waits.
READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(slots=True)
class TailResult:
    lines: list[bytes]
    first_line: int
    reset: bool
    problems: list[Problem] = field(default_factory=list)  # lines dropped as too long
    gone: bool = False  # reset because there is no file at the path


@dataclass(slots=True)
class Tail:
    """Reads only what was appended since the last read; notices truncation and replacement.

    Lines read whole are the file as read: a change to them is a replacement. The unfinished
    line after them is another writer's, still being written: it may be cut back (a failed
    write) or change, and is then read again from its start."""

    path: str
    offset: int  # how far the file was read
    inode: int
    prefix: bytes
    lines: LineSplitter
    unterminated: bool = False
    suffix: bytes = b""  # the last bytes of the whole lines read
    end: int = 0  # where the whole lines read end (the unfinished line starts)
    torn: bytes = b""  # the last bytes read of the unfinished line

    @classmethod
    def after(cls, path: str, snapshot: Snapshot) -> Tail:
        prefix = snapshot.prefix[: snapshot.offset]
        lines = LineSplitter(snapshot.lines_read + 1, dropping=snapshot.dropping)
        return cls(path, snapshot.offset, snapshot.inode, prefix, lines, snapshot.unterminated,
                   suffix=snapshot.suffix, end=snapshot.offset)

    @property
    def lines_read(self) -> int:
        return self.lines.next_line - 1

    def copy(self) -> Tail:
        """A tail of its own at the same place: polling it moves this one nowhere."""
        lines = self.lines
        return dataclasses.replace(self, lines=dataclasses.replace(
            lines, pending=list(lines.pending), too_long=list(lines.too_long)))

    def unread(self) -> int:
        """How many bytes a poll would read now: those appended since, or the whole file
        once it was replaced or its last line, taken with no newline, runs on (0 for none at
        the path)."""
        try:
            fd = os.open(self.path, READ_FLAGS)
        except OSError:  # none, or none to read: the poll says which
            return 0
        try:
            stat = os.fstat(fd)
            if self._replaced(fd, stat) or self._runs_on(fd, stat):
                return stat.st_size
            return max(0, stat.st_size - self.offset)
        finally:
            os.close(fd)

    def _runs_on(self, fd: int, stat: os.stat_result) -> bool:
        """Whether the last line, taken with no newline, runs on into bytes appended since
        (`poll` then reads the whole file again)."""
        return self.unterminated and stat.st_size > self.offset and \
            os.pread(fd, 1, self.offset) != b"\n"

    def replaced(self) -> bool:
        """Whether the file at the path is no longer the one read (gone, another inode, cut
        short, or rewritten: its first or last known bytes differ)."""
        try:
            fd = os.open(self.path, READ_FLAGS)
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
        if stat.st_ino != self.inode or stat.st_size < self.end:
            return True
        if os.pread(fd, len(self.prefix), 0) != self.prefix:
            return True
        return os.pread(fd, len(self.suffix), self.end - len(self.suffix)) != self.suffix

    def _torn_changed(self, fd: int, stat: os.stat_result) -> bool:
        """Whether the unfinished line read so far was cut back or rewritten since."""
        return stat.st_size < self.offset or \
            os.pread(fd, len(self.torn), self.offset - len(self.torn)) != self.torn

    def poll(self) -> TailResult:
        """Complete new lines, or `reset=True` when the file must be read again from the start."""
        try:
            fd = os.open(self.path, READ_FLAGS)
        except FileNotFoundError:
            return TailResult([], 0, True, gone=True)
        try:
            stat = os.fstat(fd)
            if self._replaced(fd, stat):
                return TailResult([], 0, True)
            if self.offset > self.end and self._torn_changed(fd, stat):
                self.offset, self.torn = self.end, b""
                self.lines.forget_unfinished()
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
        self._advance(data)
        if self.unterminated:
            data = data[1:]  # the newline that ends a line already taken
        self.unterminated = False
        found = self.lines.feed(data)
        dropped = LineBatch()
        self.lines.take_too_long(dropped)
        if found is None:
            return TailResult([], self.lines_read + 1, False, dropped.problems)
        return TailResult(found.lines, found.first_line, False, dropped.problems)

    def _advance(self, data: bytes) -> None:
        """Move past `data`, just read: the whole lines it ends and the unfinished one after."""
        cut = data.rfind(b"\n") + 1
        if cut:  # the line read unfinished so far ends here: its bytes are whole-line bytes now
            self.end = self.offset + cut
            self.suffix = (self.suffix + self.torn + data[:cut][-SUFFIX_CHECK:])[-SUFFIX_CHECK:]
            self.torn = b""
        self.torn = (self.torn + data[cut:][-SUFFIX_CHECK:])[-SUFFIX_CHECK:]
        self.offset += len(data)
