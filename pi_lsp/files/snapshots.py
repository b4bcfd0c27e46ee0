"""Snapshots of a workspace's files in a shadow git repository under `.pi/snapshots/`.

The store is its own git directory with its own index, used with `--work-tree=ROOT`, so the
user's `.git`, index and stash are never touched. It honours the workspace's `.gitignore` files
and always leaves out `.git/` and `.pi/`.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Literal

import msgspec

from pi_lsp.finish import run_to_end

STORE_DIR = Path(".pi") / "snapshots"
MAX_FILE_BYTES = 5 * 1024 * 1024  # larger files are left out of snapshots, and say so
MAX_DIFF_CHARS = 100_000  # per file, in what fileChanges returns
LOCK_RETRIES = 40  # another pi-lsp on the same workspace may hold the store's index lock
LOCK_WAIT_S = 0.05

Status = Literal["added", "modified", "deleted"]
_STATUS: dict[str, Status] = {"A": "added", "M": "modified", "D": "deleted", "T": "modified"}


class SnapshotError(Exception):
    """The store cannot do what was asked (git missing, or git failed)."""


class Snapshot(msgspec.Struct, frozen=True):
    tree: str  # a git tree id in the store
    skipped: list[str] = msgspec.field(default_factory=list)  # too large to keep


class FileChange(msgspec.Struct, rename="camel"):
    """One file a restore would change: `added` comes back, `deleted` goes, `modified` changes."""

    path: str
    status: Status
    diff: str


class SnapshotStore:
    """One workspace's snapshots; one instance per workspace per process (see `store_for`)."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.git_dir = self.root / STORE_DIR
        self.git = shutil.which("git")
        self._lock = asyncio.Lock()

    @property
    def unavailable_reason(self) -> str | None:
        if self.git is None:
            return "file snapshots need git, and git is not on PATH"
        return None

    def exists(self) -> bool:
        return (self.git_dir / "HEAD").is_file()

    # -- running git ---------------------------------------------------------------------

    async def _run(self, *args: str, stdin: bytes | None = None, literal: bool = True,
                   store: bool = True) -> bytes:
        reason = self.unavailable_reason
        if reason is not None or self.git is None:
            raise SnapshotError(reason)
        # Inherited GIT_* variables (from a hook, say) must not redirect us at the user's repo.
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env["GIT_LITERAL_PATHSPECS"] = "1" if literal else "0"
        where = [f"--git-dir={self.git_dir}", f"--work-tree={self.root}"] if store else []
        # The user's git config applies (excludes files) except what would change the result
        # or start something (line endings, an fsmonitor daemon).
        settings = ("core.quotePath=false", "core.autocrlf=false", "core.fsmonitor=false")
        command = [self.git, *where, *(f for s in settings for f in ("-c", s)), *args]
        for _attempt in range(LOCK_RETRIES):
            status, out, err = await run_to_end(command, stdin, cwd=self.root, env=env)
            if status == 0:
                return out
            message = err.decode(errors="replace").strip()
            if "index.lock" not in message:
                raise SnapshotError(f"git {args[0]} failed: {message}")
            await asyncio.sleep(LOCK_WAIT_S)
        raise SnapshotError(f"the snapshot store {self.git_dir} stayed locked")

    async def _ensure(self) -> None:
        if self.exists():
            return
        self.git_dir.mkdir(parents=True, exist_ok=True)
        await self._run("init", "--quiet", "--bare", str(self.git_dir), store=False)
        # Nothing in the store is ever unreachable on purpose, so nothing may be collected.
        for key, value in (("gc.auto", "0"), ("gc.pruneExpire", "never"),
                           ("core.bare", "false")):
            await self._run("config", key, value)
        (self.git_dir / "info").mkdir(exist_ok=True)
        (self.git_dir / "info" / "exclude").write_text("/.pi/\n")
        # The user's own git must not see the store even when `.pi/` is not ignored.
        (self.git_dir / ".gitignore").write_text("*\n")

    # -- snapshots -----------------------------------------------------------------------

    async def snapshot(self) -> Snapshot:
        """The workspace's files now, as a tree id; files over the size cap are left out."""
        async with self._lock:
            await self._ensure()
            listed = await self._run("ls-files", "-z", "--others", "--modified",
                                     "--exclude-standard")
            skipped = sorted(p for p in _split(listed) if _too_large(self.root / p))
            specs = [".", *(f":(exclude,literal){p}" for p in skipped)]
            await self._run("add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul",
                            stdin=_join(specs), literal=False)
            if skipped:  # a file that grew past the cap must not keep its old content
                await self._run("rm", "--cached", "-q", "--ignore-unmatch",
                                "--pathspec-from-file=-", "--pathspec-file-nul",
                                stdin=_join(skipped))
            tree = (await self._run("write-tree")).decode().strip()
            return Snapshot(tree, skipped)

    async def changes(self, current: str, target: str, with_diff: bool = True
                      ) -> list[FileChange]:
        """What restoring `target` over `current` would do, file by file, sorted by path."""
        async with self._lock:
            listed = _split(await self._run("diff-tree", "-r", "-z", "--no-renames",
                                            "--name-status", current, target))
            pairs = [(_STATUS.get(listed[i][:1], "modified"), listed[i + 1])
                     for i in range(0, len(listed) - 1, 2)]
            diffs: dict[str, str] = {}
            if with_diff and pairs:
                text = await self._run("diff", "--no-color", "--no-renames", "--no-ext-diff",
                                       current, target)
                diffs = _split_diff(text.decode(errors="replace"), [p for _, p in pairs])
        return [FileChange(path, status, diffs.get(path, "")) for status, path in pairs]

    async def restore(self, target: str, changes: list[FileChange]) -> None:
        """Make the listed files what they are in `target`; no other file is touched."""
        async with self._lock:
            written = [c.path for c in changes if c.status != "deleted"]
            if written:
                await self._run("checkout", target, "--pathspec-from-file=-",
                                "--pathspec-file-nul", stdin=_join(written))
            for change in changes:
                if change.status == "deleted":
                    _remove(self.root, change.path)


_stores: dict[Path, SnapshotStore] = {}


def store_for(root: Path) -> SnapshotStore:
    """The process's one store for a workspace, so its snapshots never race each other."""
    key = root.resolve()
    store = _stores.get(key)
    if store is None:
        store = _stores[key] = SnapshotStore(key)
    return store


def _split(raw: bytes) -> list[str]:
    return [part.decode(errors="surrogateescape") for part in raw.split(b"\0") if part]


def _join(paths: list[str]) -> bytes:
    return b"".join(p.encode(errors="surrogateescape") + b"\0" for p in paths)


def _too_large(path: Path) -> bool:
    try:
        return path.is_file() and not path.is_symlink() and \
            path.stat().st_size > MAX_FILE_BYTES
    except OSError:
        return False


def _split_diff(text: str, paths: list[str]) -> dict[str, str]:
    """Cut one `git diff` into its files, by header; a type change's two parts stay together.

    A header git had to quote matches no plain path and goes to the next path without a part
    (git prints files in the order diff-tree lists them).
    """
    parts: list[tuple[str, str]] = []
    for line in text.splitlines(keepends=True):
        if line.startswith("diff --git ") or not parts:
            parts.append((line, line))
        else:
            parts[-1] = (parts[-1][0], parts[-1][1] + line)
    by_header = {f"diff --git a/{p} b/{p}\n": p for p in paths}
    out: dict[str, str] = {}
    waiting = iter(paths)
    for header, part in parts:
        path = by_header.get(header)
        if path is None:
            path = next((p for p in waiting if p not in out), None)
            if path is None:
                break
        out[path] = out.get(path, "") + part
    return {path: _cap(part) for path, part in out.items()}


def _cap(diff: str) -> str:
    if len(diff) <= MAX_DIFF_CHARS:
        return diff
    return diff[:MAX_DIFF_CHARS] + f"\n… ({len(diff) - MAX_DIFF_CHARS} more characters)\n"


def _remove(root: Path, relative: str) -> None:
    """Delete one file, then the directories it leaves empty (never the root)."""
    path = root / relative
    if not (path.is_file() or path.is_symlink()):
        return
    path.unlink()
    parent = path.parent
    while parent != root and root in parent.parents:
        try:
            parent.rmdir()
        except OSError:
            break
        parent = parent.parent
