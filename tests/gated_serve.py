"""`pi-lsp serve` whose views built in a worker thread (a large session's) wait, as a slow fold
of a huge session would, until the file GATE_DIR/open exists, after making GATE_DIR/entered."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from pi_lsp.cli import main
from pi_lsp.server.treeview import TreeView, TreeViews
from tests.waits import POLL_S

GATE = Path(os.environ["GATE_DIR"])
view = TreeViews.view


def gated(views: TreeViews, *args: Any, **kwargs: Any) -> TreeView:
    """The view, built once the gate opens when built off the event loop."""
    if threading.current_thread() is not threading.main_thread():
        (GATE / "entered").touch()
        while not (GATE / "open").exists():  # a file: the test is another process
            time.sleep(POLL_S)
    return view(views, *args, **kwargs)


if __name__ == "__main__":
    TreeViews.view = gated  # type: ignore[method-assign]
    sys.exit(main(["serve"]))
