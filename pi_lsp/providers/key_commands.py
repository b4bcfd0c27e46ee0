"""`!command` keys: an API key whose value is a shell command pi runs for its output (pi 1.6's
resolveConfigValue). Which files may have one run, and running it.

One policy: a file the user owns, in pi's own folder (`~/.pi/agent/auth.json`,
`~/.pi/agent/models.json`), may have its command run, in that folder; a file a repository can
commit (a workspace's `.pi/`) never does.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path

from pi_lsp.session.catalog import agent_dir

COMMAND_TIMEOUT_S = 10  # pi's for a `!command` key
OWN_FILES = ("auth.json", "models.json")  # the user's own, in pi's folder

# What each command printed, by command and folder: pi runs one once per process.
_outputs: dict[tuple[str, Path], str | None] = {}
# One lock a command: the server asks from worker threads (a turn's provider, a summarizer's,
# two sessions'), and a password manager must be asked once, not once a thread.
_locks: dict[tuple[str, Path], threading.Lock] = {}
_locks_lock = threading.Lock()


def is_command(value: str) -> bool:
    return value.startswith("!")


def may_run(path: Path) -> bool:
    """Whether a `!command` written in `path` is run: only in pi's own auth.json or
    models.json, never in a file a repository could have committed (pi keeps git packages
    under its folder, so being inside it is not enough)."""
    real = os.path.realpath(path)
    return any(real == os.path.realpath(agent_dir() / name) for name in OWN_FILES)


def command_output(value: str) -> str | None:
    """What `!command` (`value`) prints, trimmed, run once per process in pi's folder; None
    where it fails, prints nothing or runs past COMMAND_TIMEOUT_S (all it started killed).
    Blocks: the server calls it in a worker thread, and a thread asking while the command
    runs waits for that run's output."""
    key = (value[1:], agent_dir())
    with _locks_lock:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        if key not in _outputs:
            _outputs[key] = _run(*key)
        return _outputs[key]


def forget_outputs() -> None:
    """Run each command again when next asked (its key may have changed)."""
    _outputs.clear()


def _run(command: str, folder: Path) -> str | None:
    try:
        # In pi's folder, not the workspace (pi runs it in the project's): `!./key.sh` must
        # not find a repository's key.sh.
        process = subprocess.Popen(command, shell=True, cwd=folder, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                   start_new_session=True)
    except OSError:
        return None
    try:
        output, _ = process.communicate(timeout=COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return None
    return _printed(process.returncode, output)


def _printed(returncode: int | None, output: bytes) -> str | None:
    if returncode != 0:
        return None
    return output.decode("utf-8", "replace").strip() or None
