"""Which paths the agent's tools may touch: secrets are never read, pi's own files never written,
and nothing is written that git or pi would run on their own."""

from __future__ import annotations

import fnmatch
import os
import unicodedata
from collections.abc import Iterable, Iterator
from pathlib import Path

from pi_lsp.session.catalog import agent_dir, default_agent_dir, session_dirs

# Every name below is compared folded (see `fold`), as macOS's and Windows' file systems compare
# names: there `.SSH/config` and `.PI/settings.json` are the protected files themselves.

# Folders of credentials: any path through one of these is a secret.
SECRET_DIRS = frozenset({".ssh", ".aws", ".gnupg", ".azure", ".password-store"})
# File names (shell patterns) that hold keys, passwords or tokens.
SECRET_FILES = ("id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", "*.pem", "*.key", "*.p12",
                "*.pfx", ".netrc", "_netrc", ".git-credentials", ".pypirc", ".npmrc",
                ".env", ".env.*", ".envrc", "credentials", "credentials.json",
                "credentials.toml", ".pgpass", ".vault-token", "*.tfvars", "*.tfvars.json",
                ".yarnrc.yml", ".dockercfg")
# Files known by their folder as well as their name (`hosts.yml` alone is an Ansible inventory;
# a project's `.docker/` and `.kube/` hold Dockerfiles and manifests): gh's, Docker's and
# kubectl's tokens, and git's config, whose remote URLs may carry them.
SECRET_RUNS = ((".git", "config"), ("gh", "hosts.yml"), (".docker", "config.json"),
               (".kube", "config"))
SECRET_PATHS = frozenset({Path("/etc/shadow"), Path("/etc/gshadow")})
# The kernel's views of processes and devices: /proc/self/environ holds every secret in the
# environment, and neither holds source code.
KERNEL_DIRS = (Path("/proc"), Path("/sys"))
# Templates of `.env` files, which by convention hold no values.
ENV_TEMPLATES = frozenset({".env.example", ".env.sample", ".env.template"})
# pi's own files under `.pi/` that may hold keys: settings, model definitions and MCP servers
# (their `env`, `headers` and `clientSecret` may be tokens as written).
PI_FILES = frozenset({"settings.json", "models.json", "mcp.json"})
# pi's credentials in its agent folder besides those: its logins' keys, MCP servers' OAuth
# tokens, and the OAuth logins of pi before auth.json, which pi 1.6 copies into auth.json and
# leaves where they were, renamed (migrateAuthToAuthJson).
AGENT_CREDENTIALS = ("auth.json", "mcp-auth.json", "oauth.json", "oauth.json.migrated")
# What pi loads from a project's `.pi/` once the project is trusted (pi 1.6's security.md):
# settings (which name packages), MCP servers, extensions and installed packages (code that
# runs), skills, prompts, themes and system prompts. The user trusted them as they were; the
# agent must not change them behind the trust.
PI_PROJECT = frozenset({"settings.json", "models.json", "mcp.json", "system.md",
                        "append_system.md", "extensions", "skills", "prompts", "themes", "npm",
                        "git"})
# Project folders pi loads, and what it loads from each (`.agents/skills`, from any ancestor).
PROJECT_DIRS = {".pi": PI_PROJECT, ".agents": frozenset({"skills"})}


# Editor settings that run programs when the user next opens a terminal or the folder
# (terminal profiles, interpreter paths, tasks, launch configurations, exrc): a change to one
# is asked for every time, never covered by "allow for this session".
EDITOR_CONFIG_DIRS = frozenset({".vscode", ".idea", ".zed", ".helix"})
EDITOR_CONFIG_FILES = frozenset({".nvim.lua", ".nvimrc", ".exrc"})
# A repository's hooks outside .git, which run on the next commit as .git/hooks do: pre-commit's
# configuration, husky's hooks, and lefthook's configuration (any of its names, main or local)
# and script folders. Asked for every time, as an editor's settings are.
COMMIT_HOOK_DIRS = frozenset({".husky", ".lefthook", ".lefthook-local"})
COMMIT_HOOK_FILES = frozenset({".pre-commit-config.yaml"}) | frozenset(
    f"{dot}lefthook{local}.{ext}" for dot in ("", ".") for local in ("", "-local")
    for ext in ("yml", "yaml", "toml", "json", "jsonc"))
# The user's configuration under the home folder: every dot-file and dot-folder directly in it
# (the shells' startup files, git's config, ~/.ssh, ~/.config, ~/.local with its .pth files,
# every editor's settings) and macOS's ~/Library. Much of it runs programs or lets someone in,
# and a list of names always missed some (~/.bash_aliases, ~/.vim, VSCodium's settings): a
# write anywhere there is asked for every time, as an editor's settings are.
HOME_CONFIG_DIRS = frozenset({"library"})  # folded, as `fold` gives it
# Read at each check of a path: joined once.
RUNS_ON_ITS_OWN_FILES = EDITOR_CONFIG_FILES | COMMIT_HOOK_FILES
RUNS_ON_ITS_OWN_DIRS = EDITOR_CONFIG_DIRS | COMMIT_HOOK_DIRS
# Where cron reads the jobs it runs.
CRONTABS = (Path("/etc/crontab"), Path("/etc/cron.d"), Path("/var/spool/cron"))


def inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def fold(name: str) -> str:
    """`name` as case-insensitive file systems compare it: case folded, composed, without the
    invisible characters HFS+ ignores or the trailing dots and spaces Windows drops."""
    visible = "".join(char for char in name if unicodedata.category(char) != "Cf")
    return unicodedata.normalize("NFC", visible.casefold()).rstrip(". ") or name


def folded(path: Path) -> tuple[str, ...]:
    return tuple(fold(part) for part in path.parts)


def folded_inside(path: Path, folder: Path) -> bool:
    """`inside`, with names compared folded."""
    parts, prefix = folded(path), folded(folder)
    return parts[:len(prefix)] == prefix


def _as_written(path: Path) -> Path:
    """The absolute path as given, `..` folded but symlinks not followed."""
    return Path(os.path.normpath(os.path.abspath(path)))


def _candidates(path: Path) -> tuple[Path, Path]:
    """`path` as written and where its symlinks lead: a rule must hold for both. (realpath:
    Path.resolve raises on a symlink loop before Python 3.13, and a repository can commit one.)"""
    return _as_written(path), _real(path)


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _has_run(parts: tuple[str, ...], run: tuple[str, ...]) -> bool:
    return any(parts[i:i + len(run)] == run for i in range(len(parts) - len(run) + 1))


def _secret_name(name: str) -> bool:
    name = fold(name)
    return name not in ENV_TEMPLATES and \
        any(fnmatch.fnmatchcase(name, pattern) for pattern in SECRET_FILES)


def _agent_dirs() -> set[Path]:
    """pi's agent folder and ~/.pi/agent, as written and where links lead: with
    PI_CODING_AGENT_DIR naming another, ~/.pi/agent still holds the logins of a pi run without."""
    return {c for folder in (agent_dir(), default_agent_dir()) for c in _candidates(folder)}


def secret_reason(path: Path) -> str | None:
    """Why `path` (as written, or where its symlinks lead) looks like a secret; None if not."""
    agents = _agent_dirs()
    for candidate in _candidates(path):
        parts = folded(candidate)
        if any(inside(candidate, folder) for folder in KERNEL_DIRS):
            return "it is in /proc or /sys, which show the environment and secrets of processes"
        if SECRET_DIRS & set(parts[:-1]):
            return "it is inside a folder of credentials"
        if candidate in SECRET_PATHS or _secret_name(candidate.name):
            return "its name is that of a key, password, token or environment file"
        if any(_has_run(parts, run) for run in SECRET_RUNS):
            return "it is a file of tokens, or git's config, whose remote URLs may hold them"
        if folded(candidate.parent) in {folded(agent) for agent in agents} and \
                parts[-1] in (*AGENT_CREDENTIALS, *PI_FILES):
            return "it holds pi's credentials"
        if parts[-1] in PI_FILES and ((len(parts) > 1 and parts[-2] == ".pi") or any(
                folded(folder) == folded(candidate.parent)
                for folder, loaded in _project_folders(candidate) if loaded is PI_PROJECT)):
            return f"it is pi's {candidate.name}, which may hold API keys"
    return None


def _project_folders(candidate: Path, *roots: Path) -> Iterator[tuple[Path, frozenset[str]]]:
    """The linked project folders pi would load for `candidate`: `.pi` and `.agents` in `roots`
    and in each folder above the candidate, where their symlinks lead (a repository may commit
    `.pi -> conf`, making `conf/settings.json` pi's settings)."""
    for folder in {*roots, *candidate.parents}:
        for name, loaded in PROJECT_DIRS.items():
            linked = folder / name
            try:
                if linked.is_symlink():
                    yield _real(linked), loaded  # a loop leads nowhere pi could load from
            except OSError:
                continue


def _git_or_project_reason(candidate: Path, root: Path) -> str | None:
    """Why `candidate` is in `.git/` or among the project files pi loads; None if not."""
    parts = folded(candidate)
    if ".git" in parts:
        return ("it is inside .git, whose config and hooks git runs as commands (the next "
                "`git status` would run them without any approval)")
    for i, part in enumerate(parts[:-1]):
        if part in PROJECT_DIRS and parts[i + 1] in PROJECT_DIRS[part]:
            return (f"pi loads {part}/{candidate.parts[i + 1]} in a trusted project (its "
                    "settings, extensions, packages, skills or prompts), and the agent may not "
                    "change what the user trusted")
    for folder, loaded in _project_folders(candidate, root):
        prefix = folded(folder)
        rest = parts[len(prefix):]
        if parts[:len(prefix)] == prefix and rest and rest[0] in loaded:
            return (f"it is in {folder}, which a symlink makes a folder pi loads in a trusted "
                    "project, and the agent may not change what the user trusted")
    return None


def protected_reason(path: Path, root: Path, extra_session_dirs: Iterable[Path] = ()
                     ) -> str | None:
    """Why the tools must not write `path`: pi's session folders, pi's agent folder, anything
    in `.git/`, and the project files pi loads (`.pi/settings.json`, `.pi/extensions/`, …).
    None when it may be written."""
    folders = [*session_dirs(str(root)), *extra_session_dirs]
    sessions = {d for folder in folders for d in (_as_written(folder), _real(folder))}
    agents = _agent_dirs()
    for candidate in _candidates(path):
        if any(folded_inside(candidate, folder) for folder in sessions):
            return "it is in a session folder; session files are written by pi only"
        if any(folded_inside(candidate, folder) for folder in agents):
            return "it is in pi's agent folder"
        reason = _git_or_project_reason(candidate, root)
        if reason is not None:
            return reason
    return None


def runs_on_its_own(path: Path) -> bool:
    """Whether a write to `path` changes what runs by itself: an editor's settings, a commit's
    hooks, the user's configuration under the home folder or crontabs (see EDITOR_CONFIG_DIRS
    and below them), named folded, as written or where its links lead."""
    return any(_runs_on_its_own(candidate) for candidate in _candidates(path))


def _runs_on_its_own(candidate: Path) -> bool:
    if fold(candidate.name) in RUNS_ON_ITS_OWN_FILES or \
            RUNS_ON_ITS_OWN_DIRS & set(folded(candidate.parent)):
        return True
    return _in_home_config(candidate) or any(folded_inside(candidate, run) for run in CRONTABS)


def home_folders() -> set[Path]:
    """The home folder as written and where its links lead: a rule about it holds for both."""
    return set(_candidates(Path.home()))


def _in_home_config(candidate: Path) -> bool:
    """Whether `candidate` is in a dot-file or dot-folder directly in the home folder, or in
    ~/Library."""
    parts = folded(candidate)
    for home in home_folders():
        first = parts[len(home.parts):len(home.parts) + 1]
        if first and folded_inside(candidate, home) and \
                (first[0].startswith(".") or first[0] in HOME_CONFIG_DIRS):
            return True
    return False
