"""Node's words for a failed file system call, which pi 1.6 passes to the model as they are."""

from __future__ import annotations

import errno
import os
import re
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


# The longest path the kernel takes, in bytes with its NUL: it refuses a longer one
# (ENAMETOOLONG) before looking at any folder.
PATH_MAX = os.pathconf("/", "PC_PATH_MAX")


def too_long(path: Path) -> bool:
    """Whether no system call takes `path` (absolute): PATH_MAX bytes or more."""
    return len(os.fsencode(path)) >= PATH_MAX


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


def null_byte_message(path: str) -> str:
    """Node's refusal of a path holding a NUL byte (ERR_INVALID_ARG_VALUE), which it gives
    before any system call: the path as util.inspect shows it, cut at 128 characters."""
    shown = _inspect_string(path)
    if len(shown.encode("utf-16-le", "surrogatepass")) > 256:  # Node counts UTF-16 units
        shown = shown.encode("utf-16-le", "surrogatepass")[:256].decode(
            "utf-16-le", "surrogatepass") + "..."
    return ("The argument 'path' must be a string, Uint8Array, or URL without null bytes. "
            f"Received {shown}")


def _inspect_string(text: str) -> str:
    """util.inspect's text for a string: escaped and quoted, a long one split after each
    newline into pieces joined by " +" (each piece quoted on its own)."""
    if len(text.encode("utf-16-le", "surrogatepass")) // 2 > 76:  # breakLength 80, less 4
        pieces = [piece for piece in re.split("(?<=\n)", text) if piece]
        return " +\n  ".join(_quoted(piece) for piece in pieces)
    return _quoted(text)


def _quoted(text: str) -> str:
    """One string as util.inspect's strEscape writes it: in single quotes, else in double
    quotes or backticks when that spares escaping a quote; control characters escaped."""
    quote = "'"
    if "'" in text:
        if '"' not in text:
            quote = '"'
        elif "`" not in text and "${" not in text:
            quote = "`"
    escaped = "".join(_escaped(char, quote) for char in text)
    return f"{quote}{escaped}{quote}"


def _escaped(char: str, quote: str) -> str:
    point = ord(char)
    if char == "\\" or (char == "'" and quote == "'"):
        return "\\" + char
    if point < 0x20 or 0x7F <= point <= 0x9F:
        return _CONTROL_ESCAPES.get(char, f"\\x{point:02X}")
    if 0xD800 <= point <= 0xDFFF:  # half a character (a lone surrogate)
        return f"\\u{point:x}"
    return char


_CONTROL_ESCAPES = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
