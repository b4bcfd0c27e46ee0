"""The log of the root trees a snapshot store recorded itself: the only trees it compares with,
reads or restores, whatever id a (possibly committed, so hostile) session names. And per tree,
the ignored files its snapshots left out, which a restore of it must never delete."""

from __future__ import annotations

import hashlib
import os
import tempfile
import zlib
from collections.abc import Iterable
from pathlib import Path

LOG = "pi-lsp-recorded-trees"  # in the store's git dir: one root tree id a line, append-only
# In the store's git dir while objects copied in (a legacy store's) may hold roots not logged.
UNLOGGED = "pi-lsp-unlogged-trees"
SUBTREE_MODE = b"40000"
# In the store's git dir: per root tree a file naming its list, the lists (NUL-separated paths,
# compressed) named by their digest.
IGNORED = "pi-lsp-ignored"
# In the store's git dir, kept as `IGNORED` is: per root tree the nested repositories with no
# commit yet, which git cannot record even as a gitlink, so its snapshots left them out.
UNBORN = "pi-lsp-unborn-repositories"
LIST = ".z"


class TreeLog:
    """The root tree ids a store's snapshots made, read from its log and appended to it."""

    def __init__(self, git_dir: Path) -> None:
        self.path = git_dir / LOG
        self._ids: set[str] | None = None

    def needs_scan(self) -> bool:
        """Whether the store may hold root trees the log lacks (made before it, or copied)."""
        return not self.path.exists() or (self.path.parent / UNLOGGED).exists()

    def has(self, tree: str) -> bool:
        if self._ids is None or tree not in self._ids:
            self._ids = self._read()  # another process on the store may have logged it
        return tree in self._ids

    def empty(self) -> bool:
        """Whether the log names no tree (or there is none)."""
        return not self._read()

    def add(self, trees: Iterable[str]) -> None:
        """Append the trees not logged yet, in one write (O_APPEND: other processes append too)."""
        if self._ids is None:
            self._ids = self._read()
        new = [t for t in dict.fromkeys(trees) if t not in self._ids]
        if not new:
            return
        # The store folder is the user's; still, never write through a symlink planted there.
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, "".join(f"{t}\n" for t in new).encode())
        finally:
            os.close(fd)
        self._ids.update(new)

    def start(self, trees: Iterable[str]) -> None:
        """Make the log with `trees` whole at once (a reader never sees part of it), or add
        them to the one another process made first."""
        listed = sorted(set(trees))
        fd, temporary = tempfile.mkstemp(prefix=f".{LOG}-", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w") as file:
                file.write("".join(f"{t}\n" for t in listed))
            try:
                os.link(temporary, self.path)
            except FileExistsError:
                self.add(listed)
                return
        finally:
            os.unlink(temporary)
        self._ids = set(listed)

    def _read(self) -> set[str]:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return set()
        with os.fdopen(fd, "rb") as file:
            return set(file.read().decode(errors="replace").split())


class IgnoredLog:
    """Per root tree, the ignored files and folders (`name/`) on disk when a snapshot made it:
    left out of the tree, so a restore of it must not take them for files that were not there.
    A tree names its list by digest, so a list many snapshots share (most do) is kept once."""

    def __init__(self, git_dir: Path, folder: str = IGNORED) -> None:
        self.folder = git_dir / folder

    def add(self, tree: str, paths: Iterable[str]) -> None:
        """Add to a tree's paths: a tree made again may have left out others, and all count."""
        known = self.paths(tree)
        merged = known | set(paths)
        if merged == known:
            return
        data = zlib.compress(b"".join(p.encode(errors="surrogateescape") + b"\0"
                                      for p in sorted(merged)))
        digest = hashlib.sha256(data).hexdigest()
        self.folder.mkdir(mode=0o700, exist_ok=True)
        if not os.path.lexists(self.folder / f"{digest}{LIST}"):  # named by its content
            self._replace(f"{digest}{LIST}", data)
        self._replace(tree, digest.encode())

    def paths(self, tree: str) -> set[str]:
        """The tree's paths; none for a tree made before this log was kept."""
        try:
            digest = self._read(tree).decode("ascii")
            data = zlib.decompress(self._read(f"{digest}{LIST}"))
        except (FileNotFoundError, UnicodeDecodeError, zlib.error):
            return set()
        return {p.decode(errors="surrogateescape") for p in data.split(b"\0") if p}

    def _read(self, name: str) -> bytes:
        with os.fdopen(self._open(name, os.O_RDONLY), "rb") as file:
            return file.read()

    def _replace(self, name: str, data: bytes) -> None:
        """Write a file whole, so a crash leaves the old one or the new one, never a part."""
        partial = f".{name}.{os.getpid()}"
        with os.fdopen(self._open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as file:
            file.write(data)
        folder = self._folder()
        try:
            os.replace(partial, name, src_dir_fd=folder, dst_dir_fd=folder)
        finally:
            os.close(folder)

    def _open(self, name: str, flags: int) -> int:
        """Open a file of the log, never through a symlink planted in the store (as `TreeLog`)."""
        folder = self._folder()
        try:
            return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=folder)
        finally:
            os.close(folder)

    def _folder(self) -> int:
        return os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)


def root_trees(batch: bytes) -> set[str]:
    """The trees in `git cat-file --batch` output of trees that none of them names as a
    subtree (a tree's entries are `<mode> <name>\\0<binary id>`)."""
    trees: set[str] = set()
    named: set[str] = set()
    at = 0
    while at < len(batch):
        end = batch.index(b"\n", at)
        header = batch[at:end].decode().split(" ")
        if len(header) != 3:  # "<id> missing": gone since it was listed
            at = end + 1
            continue
        oid, kind, size = header
        at, stop = end + 1, end + 1 + int(size)
        if kind == "tree":
            trees.add(oid)
            width = len(oid) // 2
            while at < stop:
                space, nul = batch.index(b" ", at), batch.index(b"\0", at)
                if batch[at:space] == SUBTREE_MODE:
                    named.add(batch[nul + 1:nul + 1 + width].hex())
                at = nul + 1 + width
        at = stop + 1  # the newline after each object
    return trees - named
