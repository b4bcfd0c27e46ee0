"""Pointing the pi CLI at the workspace's `.pi/sessions/`: `sessionDir` in `.pi/settings.json`.

pi reads the project's settings from `<cwd>/.pi/settings.json` and resolves a relative
`sessionDir` against its cwd, so `.pi/sessions` makes `pi -c` and `pi --session ID`, run in the
workspace root, use the folder pi-lsp writes to.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import msgspec

from pi_lsp.jsonfile import write_atomically
from pi_lsp.regular import read_regular

log = logging.getLogger(__name__)

SESSION_DIR_VALUE = ".pi/sessions"
SESSION_DIR_VARIABLE = "PI_CODING_AGENT_SESSION_DIR"  # pi 1.6's config.js ENV_SESSION_DIR
NEW_SETTINGS = b'{\n  "sessionDir": ".pi/sessions"\n}\n'


def _same_dir(value: str, workspace: Path) -> bool:
    configured = Path(os.path.expanduser(value))
    if not configured.is_absolute():
        configured = workspace / configured
    return os.path.abspath(configured) == os.path.abspath(workspace / SESSION_DIR_VALUE)


def _with_key(text: bytes) -> bytes:
    """`text` (a JSON object) with `sessionDir` inserted as its first key, in its own layout."""
    opening = text.index(b"{") + 1
    rest = text[opening:]
    body = rest.lstrip()
    if body.startswith(b"}"):
        return text[:opening] + b'\n  "sessionDir": ".pi/sessions"\n' + body
    spacing = rest[: len(rest) - len(body)]  # what sits before the first key: "\n  " or " "
    return text[:opening] + spacing + b'"sessionDir": ".pi/sessions",' + rest


def link_session_dir(workspace: Path) -> None:
    """Set `sessionDir` in the workspace's `.pi/settings.json` unless it names a folder already.

    Other keys and the file's layout are kept; a file that is not a JSON object is left alone.
    """
    path = workspace / ".pi" / "settings.json"
    folder = path.parent
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        # A repository's `.pi` symlink would have pi-lsp write wherever it leads.
        log.warning("%s is a symlink or not a folder; settings.json left alone, so `pi -c` "
                    "will not see pi-lsp's sessions", folder)
        return
    if path.is_symlink():  # it may lead to anything (the user's own settings, /dev/zero)
        log.warning("%s is a symlink; left alone, so `pi -c` will not see pi-lsp's sessions "
                    "(add \"sessionDir\": %r to share them)", path, SESSION_DIR_VALUE)
        return
    try:
        text = read_regular(path)
    except FileNotFoundError:
        folder.mkdir(parents=True, exist_ok=True)
        write_atomically(path, NEW_SETTINGS)
        return
    except OSError as error:
        log.warning("%s: cannot read (%s); sessionDir not set, so `pi -c` will not see "
                    "pi-lsp's sessions", path, error.strerror)
        return
    try:
        settings: Any = msgspec.json.decode(text)
    except msgspec.DecodeError as error:
        settings, problem = None, f"not valid JSON ({error})"
    except RecursionError:  # msgspec's limit on nesting
        settings, problem = None, "not valid JSON (nested too deeply)"
    else:
        problem = "not a JSON object"
    if not isinstance(settings, dict):
        log.warning("%s: %s; left as it is, so `pi -c` will not see pi-lsp's sessions "
                    "(add \"sessionDir\": %r to share them)", path, problem, SESSION_DIR_VALUE)
        return
    if "sessionDir" not in settings:
        write_atomically(path, _with_key(text))
        return
    current = settings["sessionDir"]
    if not (isinstance(current, str) and _same_dir(current, workspace)):
        log.warning("%s: sessionDir is %r, so `pi -c` looks there and not in %s where pi-lsp "
                    "keeps its sessions; left as it is", path, current, SESSION_DIR_VALUE)
