"""Writing one session file: whole lines appended under a lock, never a torn one left."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Callable, Iterable

from pi_lsp.session.jsontext import escape_line_separators


class WriteFailedError(OSError):
    """An append did not reach the disk whole; `strerror` says why, or what is left of it."""

    def __str__(self) -> str:
        return f"could not write to {self.filename}: {self.strerror}"


class FileReplacedError(WriteFailedError):
    """The file at the path is no longer the one the session read; nothing was written."""


def append_lines(path: str, lines: Iterable[bytes], *, create: bool = False,
                 exclusive: bool = False,
                 unchanged: Callable[[int, os.stat_result], bool] | None = None) -> None:
    """Append complete lines in one `write()` under an exclusive advisory lock.

    A torn last line is terminated first so the new entries never join it. A write that
    stores only part of the lines is not finished: the part is cut back off, or ended as a
    damaged line of its own (see `_short_write`). Every session write comes here, so
    U+2028/U+2029 are escaped here. With `unchanged`, the lines are written only while it
    says the open file is still the one read (a replacement that comes first gets nothing).
    """
    flags = os.O_RDWR | os.O_APPEND | (os.O_CREAT if create else 0) | \
        (os.O_EXCL if exclusive else 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as error:
        raise WriteFailedError(error.errno, error.strerror, path) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        opened = os.fstat(fd)
        if unchanged is not None and not unchanged(fd, opened):
            raise FileReplacedError(errno.ESTALE, "the file was replaced", path)
        size = opened.st_size
        prefix = b""
        # pi takes no lock, so this check and the write below are not one step: a line of
        # pi's seen half written here is whole by the time ours lands after it, and the
        # newline makes a blank line. That is the side to err on: a blank line is skipped
        # by every reader, while leaving the newline out when the line really is torn (pi
        # stopped mid-write) would join ours to it and lose both.
        if size and os.pread(fd, 1, size - 1) != b"\n":
            prefix = b"\n"
        payload = bytearray(prefix)
        for line in lines:  # a line at a time: a rewrite of millions is never a list of them
            payload += escape_line_separators(line)
            payload += b"\n"
        try:
            written = os.write(fd, payload)
        except OSError as error:  # a write that fails has written nothing
            raise WriteFailedError(error.errno, error.strerror, path) from None
        if written < len(payload):
            raise WriteFailedError(errno.EIO, _short_write(fd, size, payload, written), path)
    finally:
        os.close(fd)


def create_with_lines(path: str, lines: Iterable[bytes]) -> None:
    """`append_lines` into a new file made for them (one made at the path first is left alone:
    EEXIST). A failed write leaves no empty file behind to block the next try, and Ctrl-C
    none at all: it comes while the lines are built or as their one `write()` returns."""
    try:
        append_lines(path, lines, create=True, exclusive=True)
    except WriteFailedError as error:
        if error.errno != errno.EEXIST:
            with contextlib.suppress(OSError):
                if os.stat(path).st_size == 0:  # ours, cut back to nothing
                    os.unlink(path)
        raise
    except BaseException:  # the file is ours, empty or whole; the caller takes it as unwritten
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise


def _short_write(fd: int, size: int, payload: bytearray, written: int) -> str:
    """Deal with a write that stored only the first `written` bytes (disk full, file size
    limit, a signal); what is left in the file, said for the error."""
    # The rest is never written with a second `write()`: pi, which takes no lock, could
    # append a line between the two, and the halves of ours would be glued around it. Without
    # a lock pi honours, some harm stays possible between looking at the file and changing it:
    # a line pi appends after the size is checked and before the cut is cut off with our part;
    # one it appends after our part and before our newline is glued to our part; and one it
    # appended straight after our part before we looked is glued to it already, which nothing
    # in an append-only file can undo.
    if written == 0:
        return os.strerror(errno.ENOSPC)
    stored = f"only {written} of {len(payload)} bytes were written"
    end = os.fstat(fd).st_size
    if end == size + written:  # nothing else was appended since it was read: ours is last
        os.ftruncate(fd, size)
        return f"{stored}; they were cut back off"
    if os.pread(fd, 1, end - 1) != b"\n":
        # The file ends in our part (every whole line ends in a newline), or in another
        # writer's line still being written after it, which is finished before our newline
        # lands (writes to a file are serialized) and only gains a blank line. Either way our
        # part becomes a damaged line of its own and the writer's next line starts whole.
        try:
            os.write(fd, b"\n")
        except OSError as error:
            return f"{stored}, then {error.strerror}; they are left unterminated"
        return f"{stored} and another writer appended too; they are left as a damaged line"
    if payload[written - 1:written] == b"\n":
        return f"{stored} and another writer appended too; they end at a line's end"
    return f"{stored} and another writer's line was appended straight after them; both " \
        "are left as one damaged line"
