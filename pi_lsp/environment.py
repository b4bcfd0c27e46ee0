"""Environment variables as pi (Node) reads them."""

from __future__ import annotations

import os


def node_variable(name: str) -> str | None:
    """The variable `name` as Node's process.env gives it: UTF-8, each invalid sequence one
    U+FFFD (os.environ holds a lone surrogate a byte, which no file name or URL can carry, and
    which names another folder than pi's); None when unset."""
    value = os.environb.get(name.encode())
    return None if value is None else value.decode("utf-8", "replace")
