"""The `workspace/executeCommand` handlers, one module per concept, each with its table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# (command name, its argument struct, handler(server, arguments))
Command = tuple[str, type[Any], Callable[[Any, Any], Any]]

# The commands that read no API key: they answer while a slow `!command` key runs (the server
# runs those before every other command, off the event loop).
KEYLESS = frozenset({"pi.listSessions", "pi.getTree", "pi.diffContext", "pi.fork", "pi.check",
                     "pi.abort", "pi.editContext", "pi.undoContextEdit", "pi.trustStatus",
                     "pi.setTrust"})
