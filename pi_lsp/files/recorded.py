"""The log of the root trees a snapshot store recorded itself: the only trees it compares with,
reads or restores, whatever id a (possibly committed, so hostile) session names."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

LOG = "pi-lsp-recorded-trees"  # in the store's git dir: one root tree id a line, append-only
# In the store's git dir while objects copied in (a legacy store's) may hold roots not logged.
UNLOGGED = "pi-lsp-unlogged-trees"
SUBTREE_MODE = b"40000"


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
