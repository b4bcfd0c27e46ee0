"""Environment variables as pi (Node) reads them, and PATH as pi-lsp searches it."""

from __future__ import annotations

import os
import shutil


def node_variable(name: str) -> str | None:
    """The variable `name` as Node's process.env gives it: UTF-8, each invalid sequence one
    U+FFFD (os.environ holds a lone surrogate a byte, which no file name or URL can carry, and
    which names another folder than pi's); None when unset."""
    value = os.environb.get(name.encode())
    return None if value is None else value.decode("utf-8", "replace")


def on_path(program: str) -> str | None:
    """`program` from PATH's absolute folders only: a relative entry (`.`, or an empty one)
    would find one a repository committed, in whatever folder pi-lsp runs."""
    folders = os.environ.get("PATH", os.defpath).split(os.pathsep)
    return shutil.which(program, path=os.pathsep.join(f for f in folders if os.path.isabs(f)))
