"""Node's words for a failed file system call, which pi 1.6 passes to the model as they are."""

from __future__ import annotations

import errno
import os
from pathlib import Path

# libuv's descriptions (uv_strerror, as Node 22 gives them) of the errors the file tools meet
DESCRIPTIONS = {
    errno.EACCES: "permission denied",
    errno.EBUSY: "resource busy or locked",
    errno.EEXIST: "file already exists",
    errno.EFBIG: "file too large",
    errno.EINVAL: "invalid argument",
    errno.EIO: "i/o error",
    errno.EISDIR: "illegal operation on a directory",
    errno.ELOOP: "too many symbolic links encountered",
    errno.EMFILE: "too many open files",
    errno.ENAMETOOLONG: "name too long",
    errno.ENOENT: "no such file or directory",
    errno.ENOSPC: "no space left on device",
    errno.ENOTDIR: "not a directory",
    errno.ENXIO: "no such device or address",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "read-only file system",
    errno.ETXTBSY: "text file is busy",
}


class SyscallError(OSError):
    """An OSError tagged with the system call Node names for it (`mkdir`, `open`, `write`)."""

    def __init__(self, error: OSError, syscall: str) -> None:
        super().__init__(error.errno, error.strerror, error.filename)
        self.syscall = syscall


def error_code(code: int) -> str:
    """The error's name as Node gives it in `error.code`: "EACCES"."""
    return errno.errorcode.get(code, f"Unknown system error -{code}")


def node_message(code: int, syscall: str, path: Path | str | None = None) -> str:
    """Node's `error.message`: "EACCES: permission denied, open '/a/b.txt'" (no path for a
    call on an open file, such as `read` or `write`)."""
    description = DESCRIPTIONS.get(code, os.strerror(code).lower())
    where = f" '{path}'" if path is not None else ""
    return f"{error_code(code)}: {description}, {syscall}{where}"


def realpath_error(given: Path) -> str | None:
    """What pi's write and edit fail with before anything else, or None: they find the file's
    real path first (its mutation queue's key), which fails but for a missing file or folder."""
    try:
        os.path.realpath(given, strict=True)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as error:
        return node_message(error.errno or errno.EIO, "realpath", given)
    return None
