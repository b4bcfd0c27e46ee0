"""Which paths the agent's tools may touch: secrets are never read, pi's own files never written."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable
from pathlib import Path

from pi_lsp.session.catalog import agent_dir, session_dirs

# Folders of credentials: any path through one of these is a secret.
SECRET_DIRS = frozenset({".ssh", ".aws", ".gnupg", ".azure", ".kube", ".docker",
                         ".password-store"})
# File names (shell patterns, matched case-insensitively) that hold keys or passwords.
SECRET_FILES = ("id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", "*.pem", "*.key", "*.p12",
                "*.pfx", ".netrc", "_netrc", ".git-credentials", ".pypirc", ".npmrc",
                ".env", ".env.*", ".envrc")
SECRET_PATHS = frozenset({Path("/etc/shadow"), Path("/etc/gshadow")})
# The kernel's views of processes and devices: /proc/self/environ holds every secret in the
# environment, and neither holds source code.
KERNEL_DIRS = (Path("/proc"), Path("/sys"))
# Templates of `.env` files, which by convention hold no values.
ENV_TEMPLATES = frozenset({".env.example", ".env.sample", ".env.template"})
# pi's own files under `.pi/`: settings (permissions, keys) and model definitions.
PI_FILES = frozenset({"settings.json", "models.json"})


def inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _as_written(path: Path) -> Path:
    """The absolute path as given, `..` folded but symlinks not followed."""
    return Path(os.path.normpath(os.path.abspath(path)))


def _secret_name(name: str) -> bool:
    lowered = name.lower()
    return lowered not in ENV_TEMPLATES and \
        any(fnmatch.fnmatchcase(lowered, pattern) for pattern in SECRET_FILES)


def secret_reason(path: Path) -> str | None:
    """Why `path` (as written, or where its symlinks lead) looks like a secret; None if not."""
    agent = agent_dir().resolve()
    for candidate in (_as_written(path), path.resolve()):
        if any(inside(candidate, folder) for folder in KERNEL_DIRS):
            return "it is in /proc or /sys, which show the environment and secrets of processes"
        if SECRET_DIRS & set(candidate.parts[:-1]):
            return "it is inside a folder of credentials"
        if candidate in SECRET_PATHS or _secret_name(candidate.name):
            return "its name is that of a key, password or environment file"
        if candidate.parent in (agent, _as_written(agent_dir())) and \
                candidate.name in ("auth.json", *PI_FILES):
            return "it holds pi's credentials"
        if candidate.parent.name == ".pi" and candidate.name in PI_FILES:
            return f"it is pi's {candidate.name}, which may hold API keys"
    return None


def protected_reason(path: Path, root: Path, extra_session_dirs: Iterable[Path] = ()
                     ) -> str | None:
    """Why the tools must not write `path`: pi's session folders, pi's agent folder, and
    `.pi/settings.json` or `.pi/models.json` anywhere. None when it may be written."""
    folders = [*session_dirs(str(root)), *extra_session_dirs]
    sessions = {d for folder in folders for d in (_as_written(folder), folder.resolve())}
    agent = {_as_written(agent_dir()), agent_dir().resolve()}
    for candidate in (_as_written(path), path.resolve()):
        if any(inside(candidate, folder) for folder in sessions):
            return "it is in a session folder; session files are written by pi only"
        if any(inside(candidate, folder) for folder in agent):
            return "it is in pi's agent folder"
        if candidate.parent.name == ".pi" and candidate.name in PI_FILES:
            return f"it is pi's {candidate.name}, which the agent may not change"
    return None
