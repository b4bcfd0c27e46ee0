"""Following the symlinks of a path a repository may have made: before Python 3.13
`Path.resolve()` raises RuntimeError on a symlink loop, and a repository can commit one
(`.pi -> .pi`, `.pi/sessions -> sessions`)."""

from __future__ import annotations

import errno
import os
from pathlib import Path


def real_path(path: str | os.PathLike[str]) -> Path:
    """`path` with its symlinks followed, as `Path.resolve()` gives it, but a loop is left as
    written instead of raising: opening it fails with ELOOP, an OSError callers report."""
    return Path(os.path.realpath(path))


def real_folder(path: str | os.PathLike[str]) -> Path:
    """The real path of the folder `path` lies in: the folder where a symlinked file's link is,
    not where it points (a committed link must not choose another project's folder)."""
    return real_path(os.path.dirname(os.path.abspath(path)))


def _loops(path: Path) -> bool:
    try:
        os.stat(path)
    except OSError as error:
        return error.errno == errno.ELOOP
    return False


def symlink_loop(path: str | os.PathLike[str]) -> Path | None:
    """The first name on `path` as written (a folder on the way, or the last name) that is a
    symlink loop; None when it meets none."""
    written = Path(os.path.abspath(path))
    if not _loops(written):  # one look where there is no loop, as almost always
        return None
    return next((part for part in (*reversed(written.parents), written) if _loops(part)),
                written)


def loop_error(path: str | os.PathLike[str]) -> str | None:
    """What an error says of `path` when it meets a symlink loop, naming the loop; None when it
    meets none."""
    loop = symlink_loop(path)
    if loop is None:
        return None
    if loop == Path(os.path.abspath(path)):
        return f"{path} is a symlink loop"
    return f"{path} lies behind a symlink loop, {loop}"
