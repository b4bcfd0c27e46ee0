"""The `workspace/executeCommand` handlers, one module per concept, each with its table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# (command name, its argument struct, handler(server, arguments))
Command = tuple[str, type[Any], Callable[[Any, Any], Any]]

# Every command's name, in the order of the modules' tables: the `initialize` answer lists
# them (executeCommandProvider) before the modules, which import most of pi-lsp, are imported
# at `initialized` (server.workbench; issue 19). test_server checks it against the tables.
NAMES = (
    "pi.listSessions", "pi.newSession", "pi.getTree", "pi.previewContext", "pi.diffContext",
    "pi.fork", "pi.check",
    "pi.branch", "pi.label", "pi.setName", "pi.setModel", "pi.setThinkingLevel",
    "pi.editContext", "pi.undoContextEdit",
    "pi.fileChanges", "pi.restoreFiles",
    "pi.prompt", "pi.prepareTurn", "pi.abort", "pi.compact", "pi.branchWithSummary",
    "pi.listModels", "pi.trustStatus", "pi.setTrust",
)
