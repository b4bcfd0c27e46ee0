"""The `workspace/executeCommand` handlers, one module per concept, each with its table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# (command name, its argument struct, handler(server, arguments))
Command = tuple[str, type[Any], Callable[[Any, Any], Any]]
