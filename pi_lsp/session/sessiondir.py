"""pi's `sessionDir` setting: read where the pi CLI keeps a workspace's sessions, and point
the pi CLI at the workspace's `.pi/sessions/` by setting it in `.pi/settings.json`.

pi reads the project's settings from `<cwd>/.pi/settings.json` and resolves a relative
`sessionDir` against its cwd, so `.pi/sessions` makes `pi -c` and `pi --session ID`, run in the
workspace root, use the folder pi-lsp writes to.
"""

from __future__ import annotations

import json
import logging
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import msgspec

from pi_lsp.jsonfile import read_object, write_atomically
from pi_lsp.regular import read_regular
from pi_lsp.session.jsontext import js_utf8, value_decoder

log = logging.getLogger(__name__)

SESSION_DIR_VALUE = ".pi/sessions"
SESSION_DIR_VARIABLE = "PI_CODING_AGENT_SESSION_DIR"  # pi 1.6's config.js ENV_SESSION_DIR
NEW_SETTINGS = b'{\n  "sessionDir": ".pi/sessions"\n}\n'


class _Unreadable(Exception):
    """A settings file pi would read as no settings."""


_UNSET = object()  # a settings file without `sessionDir`
_JSON_TYPES = {bool: "true or false", int: "a number", float: "a number", list: "an array",
               dict: "an object"}


def session_dir_setting(user: Path, project: Path, trusted: bool) -> str | None:
    """The `sessionDir` pi 1.6 takes (settings-manager.js getSessionDir): the project's
    settings.json over the user's, as deepMergeObjects merges them (a null too), the project's
    only when `trusted`; None when unset or not a usable value (which is logged)."""
    source, value = user, _setting(user)
    own = _UNSET
    if project.is_symlink():  # as for writing: it may lead to anything
        _warn_once(f"{project} is a symlink; its sessionDir is not followed")
    else:
        own = _setting(project)
    if own is not _UNSET and trusted:
        source, value = project, own
    elif own not in (_UNSET, SESSION_DIR_VALUE):
        _warn_once(f"{project}: sessionDir {_shown(own)} is not followed, so its sessions "
                   "are not listed: the folder is not trusted")
    return None if value is _UNSET else _usable(source, value)


def _setting(path: Path) -> object:
    """The file's `sessionDir`; _UNSET without one, or where pi reads no settings (a file it
    cannot read or parse, logged)."""
    try:
        return read_object(path, "settings", _Unreadable).get("sessionDir", _UNSET)
    except _Unreadable as error:
        _warn_once(f"{error}; its sessionDir is not followed")
        return _UNSET


def _usable(source: Path, value: object) -> str | None:
    """`value` if it can name a folder, as Node names it (a lone surrogate as U+FFFD). pi takes
    null as unset, and "" too (logged here: it names nothing), and fails on a value that is
    not text or has a NUL (logged, left out)."""
    if value is None:
        return None
    if isinstance(value, str) and value and "\0" not in value:
        return js_utf8(value)
    why = "is empty" if value == "" else "has a NUL character" if isinstance(value, str) \
        else "is not a string"
    _warn_once(f"{source}: sessionDir {_shown(value)} {why}; it names no folder, so no "
               "sessions are listed from it")
    return None


def _shown(value: object) -> str:
    """A setting's value for a log line: a string quoted and cut, else what JSON type it is."""
    if isinstance(value, str):
        return json.dumps(value[:200])
    return "null" if value is None else _JSON_TYPES.get(type(value), "a value")


@lru_cache(maxsize=64)  # once per file and problem, not at every listing
def _warn_once(message: str) -> None:
    log.warning("%s", message)


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


def link_session_dir(workspace: Path) -> bool:
    """Set `sessionDir` in the workspace's `.pi/settings.json` unless it names a folder already;
    whether it was set now. Other keys and the file's layout are kept; a file that is not a
    JSON object is left alone."""
    path = workspace / ".pi" / "settings.json"
    folder = path.parent
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        # A repository's `.pi` symlink would have pi-lsp write wherever it leads.
        log.warning("%s is a symlink or not a folder; settings.json left alone, so `pi -c` "
                    "will not see pi-lsp's sessions", folder)
        return False
    if path.is_symlink():  # it may lead to anything (the user's own settings, /dev/zero)
        log.warning("%s is a symlink; left alone, so `pi -c` will not see pi-lsp's sessions "
                    "(add \"sessionDir\": %r to share them)", path, SESSION_DIR_VALUE)
        return False
    try:
        text = read_regular(path)
    except FileNotFoundError:
        folder.mkdir(parents=True, exist_ok=True)
        write_atomically(path, NEW_SETTINGS)
        return True
    except OSError as error:
        log.warning("%s: cannot read (%s); sessionDir not set, so `pi -c` will not see "
                    "pi-lsp's sessions", path, error.strerror)
        return False
    try:
        settings: Any = value_decoder.decode(text)
    except msgspec.DecodeError as error:
        settings, problem = None, f"not valid JSON ({error})"
    except RecursionError:  # msgspec's limit on nesting
        settings, problem = None, "not valid JSON (nested too deeply)"
    else:
        problem = "not a JSON object"
    if not isinstance(settings, dict):
        log.warning("%s: %s; left as it is, so `pi -c` will not see pi-lsp's sessions "
                    "(add \"sessionDir\": %r to share them)", path, problem, SESSION_DIR_VALUE)
        return False
    if "sessionDir" not in settings:
        write_atomically(path, _with_key(text))
        return True
    current = settings["sessionDir"]
    if not (isinstance(current, str) and _same_dir(current, workspace)):
        log.warning("%s: sessionDir is %r, so `pi -c` looks there and not in %s where pi-lsp "
                    "keeps its sessions; left as it is", path, current, SESSION_DIR_VALUE)
    return False
