"""pi's JSON configuration files (settings.json, models.json): one object per file, or none.

They are read as pi reads them: a leading byte-order mark is skipped, and models.json may have
`//` line comments and trailing commas (pi's `stripJsonComments`; settings.json may not).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import Any

import msgspec

from pi_lsp.regular import read_regular
from pi_lsp.session.jsontext import value_decoder

# A string literal (kept as it is) or what is taken out: a `//` comment, or a comma before a
# closing bracket (its whitespace and bracket kept).
_COMMENT = re.compile(rb'"(?:\\.|[^"\\])*"|//[^\n]*')
_TRAILING_COMMA = re.compile(rb'"(?:\\.|[^"\\])*"|,(\s*[}\]])')
BOM = b"\xef\xbb\xbf"
# A name no file can be read at: none there, a folder on the way that is a file (a committed
# `.pi` file), a symlink loop (`.pi -> .pi`). pi's existsSync says false to each; trust counts
# none of them either (trust.project_files).
ABSENT = frozenset({errno.ENOENT, errno.ENOTDIR, errno.ELOOP})


def strip_comments(data: bytes) -> bytes:
    """JSON with comments and trailing commas as plain JSON; string literals are untouched."""
    data = _COMMENT.sub(lambda m: m[0] if m[0].startswith(b'"') else b"", data)
    return _TRAILING_COMMA.sub(lambda m: m[1] if m[1] is not None else m[0], data)


def read_object(path: Path, what: str, error: type[Exception], comments: bool = False
                ) -> dict[str, Any]:
    """The object in `path`, {} when no file can be there (ABSENT); `error` names the file and
    what is wrong. `comments`: the file may have `//` comments and trailing commas."""
    try:
        data = read_regular(path).removeprefix(BOM)
        # As JSON.parse reads it: 1e400 as Infinity, a lone surrogate escape as that unit.
        data = value_decoder.decode(strip_comments(data) if comments else data)
    except OSError as fault:
        if fault.errno in ABSENT:
            return {}
        raise error(f"{path}: cannot read {what} ({fault})") from None
    except msgspec.DecodeError as fault:
        raise error(f"{path}: cannot read {what} ({fault})") from None
    except RecursionError:  # msgspec's limit on nesting: a file no one writes by hand
        raise error(f"{path}: cannot read {what} (JSON nested too deeply)") from None
    if not isinstance(data, dict):
        raise error(f"{path}: {what} must be a JSON object")
    return data


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so a reader never sees half a file, through a new temporary
    file beside it: a name the folder already holds (a committed symlink) is never followed."""
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp",
                                             dir=path.parent)
    except OSError as error:  # it names its random temporary file, which the user never asked for
        raise OSError(error.errno, error.strerror, str(path)) from None
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            with contextlib.suppress(FileNotFoundError):
                # The replaced file's permissions are kept; a new file stays private (0600).
                current = os.lstat(path).st_mode
                if stat.S_ISREG(current):
                    os.fchmod(file.fileno(), stat.S_IMODE(current))
        os.replace(temporary, path)
    except BaseException as error:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        if isinstance(error, OSError) and error.filename is None:  # a write's says no file
            raise OSError(error.errno, error.strerror, str(path)) from None
        raise
