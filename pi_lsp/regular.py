"""Reading a file a repository may have planted: only a regular file is read, and anything else
(a FIFO, a device, a socket, a folder) is refused at once instead of waited on or read forever."""

from __future__ import annotations

import errno
import os
import stat
import time
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


# A file changed within its file system's timestamp granularity (a clock tick; 2 s on FAT) may
# change again keeping its size and times: what was learnt of one changed that recently is not
# kept, as git reads a "racily clean" file again.
SETTLED_NS = 2_000_000_000


def stat_key(info: os.stat_result) -> tuple[int, ...]:
    """What tells a file's versions apart, for a cache of what was learnt from reading it."""
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def settled(info: os.stat_result) -> bool:
    """Whether the file last changed long enough ago for `stat_key` to tell its next change."""
    return time.time_ns() - max(info.st_mtime_ns, info.st_ctime_ns) > SETTLED_NS
