"""Writing one session file: whole lines appended under a lock, never a torn one left."""

from __future__ import annotations

import errno
import fcntl
import os

from pi_lsp.session.jsontext import escape_line_separators


class WriteFailedError(OSError):
    """An append did not reach the disk whole; the file was cut back to where it was."""

    def __str__(self) -> str:
        return f"could not write to {self.filename}: {self.strerror}"


def append_lines(path: str, lines: list[bytes], *, create: bool = False,
                 exclusive: bool = False) -> None:
    """Append complete lines in one `write()` under an exclusive advisory lock.

    A torn last line is terminated first so the new entries never join it. A write that fails
    part way (disk full, I/O error) is cut back off, so no torn line is left behind. Every
    session write comes here, so U+2028/U+2029 are escaped here.
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
        payload = prefix + b"".join(escape_line_separators(line) + b"\n" for line in lines)
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
