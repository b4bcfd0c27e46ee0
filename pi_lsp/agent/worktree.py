"""A linked git worktree nested in its main repository, found as pi 1.6 finds it (findGitPaths,
findShadowedContextFile) from the `.git` pointer files a cloned repository may have crafted:
only regular files are read, and only their first GIT_FILE_LIMIT bytes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pi_lsp.agent.tools import open_regular
from pi_lsp.session.jsontext import JS_WHITESPACE

# A path is at most 4 KB on Linux: a pointer file longer than this names nothing pi could use.
GIT_FILE_LIMIT = 64 << 10
GITDIR = "gitdir: "


def _head(path: Path) -> tuple[str, bool] | None:
    """A regular file's first GIT_FILE_LIMIT bytes as text, and whether that was all of it;
    None when it is not a regular file or cannot be read (a FIFO is never waited on)."""
    try:
        file = open_regular(path)
        if file is None:
            return None
        with file:
            data = file.read(GIT_FILE_LIMIT + 1)
    except (OSError, ValueError):  # ValueError: a NUL in a crafted path
        return None
    return data[:GIT_FILE_LIMIT].decode("utf-8", "replace"), len(data) <= GIT_FILE_LIMIT


def _linked(folder: Path, pointer: str) -> tuple[Path, Path] | None:
    """`folder` and its repository's common git dir, from its `.git` file's `gitdir:` value;
    None when that names no git dir (no HEAD) or its `commondir` cannot be read."""
    git_dir = Path(os.path.normpath(os.path.join(folder, pointer.strip(JS_WHITESPACE))))
    if not os.path.exists(git_dir / "HEAD"):
        return None
    if not os.path.exists(git_dir / "commondir"):
        return folder, git_dir
    common = _head(git_dir / "commondir")
    if common is None or not common[1]:  # pi would hang on a FIFO there: no repository
        return None
    return folder, Path(os.path.normpath(os.path.join(git_dir, common[0].strip(JS_WHITESPACE))))


def git_paths(cwd: Path) -> tuple[Path, Path] | None:
    """pi 1.6's findGitPaths: from the nearest `.git` at or above `cwd` (absolute), the folder
    holding it and the repository's common git dir; None when that `.git` is no repository.
    As in pi, a `.git` that is neither a folder nor a `gitdir:` file is passed over."""
    for folder in (cwd, *cwd.parents):
        dot_git = folder / ".git"
        try:
            mode = os.stat(dot_git).st_mode
        except (OSError, ValueError):
            continue
        if stat.S_ISDIR(mode):
            return (folder, dot_git) if os.path.exists(dot_git / "HEAD") else None
        if not stat.S_ISREG(mode):
            continue
        head = _head(dot_git)
        if head is None:
            return None
        text, whole = head
        if text.lstrip(JS_WHITESPACE).startswith(GITDIR):
            # A pointer past the limit is longer than any path: as pi's failed lookup of it.
            return _linked(folder, text.strip(JS_WHITESPACE)[len(GITDIR):]) if whole else None
    return None


def canonical(path: Path) -> Path:
    """pi's canonicalizePath: the real path, or the path as it is when it cannot be had."""
    try:
        return Path(os.path.realpath(path, strict=True))
    except (OSError, ValueError):
        return path


def nested_worktree(cwd: Path) -> tuple[Path, Path] | None:
    """When `cwd` is in a linked worktree inside its main repository's folder: the worktree's
    root (as found above `cwd`) and the main root (real path). None for an ordinary repository,
    a sibling worktree, a bare layout or a submodule, as in pi 1.6."""
    found = git_paths(cwd)
    if found is None:
        return None
    folder, common_dir = found
    worktree, common = canonical(folder), canonical(common_dir)
    main = common.parent
    if main not in worktree.parents or canonical(main / ".git") != common:
        return None
    return folder, main
