"""Reading a file a repository may have planted: only a regular file is read, and anything else
(a FIFO, a device, a socket, a folder) is refused at once instead of waited on or read forever."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


def read_regular(path: Path, limit: int = -1) -> bytes:
    """The bytes of the regular file at `path` (through symlinks), at most `limit` of them
    unless it is -1; OSError for anything else."""
    # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # before fdopen, which names a folder by its fd
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    with os.fdopen(fd, "rb") as file:
        return file.read(limit)
