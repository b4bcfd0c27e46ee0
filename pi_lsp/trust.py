"""Project trust, shared with pi: whether a folder's own `.pi/` files are loaded.

Decisions live in pi's store, `<agent dir>/trust.json`: canonical (real) directories mapped to
true, false or null, the nearest directory with true or false deciding for everything under it.
With no saved decision the user's `defaultProjectTrust` (`ask`, `always`, `never`; from their
own settings.json only) applies. The store is read and written under pi's own lock (the
`trust.json.lock` directory proper-lockfile makes), so pi and pi-lsp never lose each other's
decisions; a store that cannot be read is an error and is never written over.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

import msgspec

from pi_lsp.jsonfile import ABSENT, read_object, write_atomically
from pi_lsp.regular import read_regular
from pi_lsp.session.catalog import agent_dir
from pi_lsp.session.jsontext import value_decoder

TRUST_FILE = "trust.json"
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
LOCK_STALE_S = 10.0  # proper-lockfile's default: an older lock was left by a process that died
LOCK_WAIT_S = 0.02
LOCK_ATTEMPTS = 100
# What else pi 1.6 asks about (trust-manager.js TRUST_REQUIRING_PROJECT_CONFIG_RESOURCES): it
# starts MCP servers and runs extensions once a folder is trusted. pi-lsp loads none of them,
# but a decision it saves is pi's, so a folder holding them is no folder with nothing to load.
PI_ONLY = ("mcp.json", "extensions", "prompts", "themes")
# What pi-lsp would take from a folder's `.pi/`: settings, models, an old snapshot store, the
# prompt's replacement and addendum, skills (a folder holding only those is not trusted by
# default); and, as pi, `.agents/skills` in it or a folder above it (but your own).
PROJECT_FILES = ("settings.json", "models.json", "snapshots", "SYSTEM.md", "APPEND_SYSTEM.md",
                 "skills", *PI_ONLY)
AGENTS_SKILLS = os.path.join(".agents", "skills")
# Never loaded by pi-lsp, trusted or not: no note says they were left out.
LEFT_OUT_OF_NOTES = frozenset(f".pi/{name}" for name in ("snapshots", *PI_ONLY))
SMALL_FILE = 64 << 10

DefaultTrust = Literal["ask", "always", "never"]
# How the answer was reached: a one-time CLI override, VS Code's Restricted Mode, a choice made
# for this server only, pi's trust.json, the editor's own trust, `defaultProjectTrust`, no
# decision yet (`ask`), nothing to load, or a trust.json that cannot be read.
Decision = Literal["override", "restricted", "session", "saved", "client", "default",
                   "undecided", "noProjectFiles", "error"]


class TrustError(Exception):
    """pi's trust store or `defaultProjectTrust` cannot be used; the message names the file."""


class TrustState(msgspec.Struct, rename="camel", omit_defaults=True):
    """Whether a folder's `.pi/` files are loaded, and why."""

    folder: str
    trusted: bool
    decision: Decision
    project_files: list[str]
    saved_path: str | None = None  # the directory whose saved decision applies
    error: str | None = None

    @property
    def vouched(self) -> bool:
        """Trusted by someone's decision, not merely for having no `.pi/` files to load."""
        return self.trusted and self.decision != "noProjectFiles"


def trust_path() -> Path:
    return agent_dir() / TRUST_FILE


def canonical(folder: Path | str) -> str:
    """The directory as pi keys it: absolute with symlinks followed (as given if it is gone)."""
    absolute = os.path.abspath(os.path.expanduser(folder))
    try:
        return os.path.realpath(absolute, strict=True)
    except OSError:
        return absolute


def project_files(folder: Path) -> list[str]:
    """The folder's own `.pi/` files and the `.agents/skills` that pi-lsp would use, relative
    to it (a settings.json holding only the `sessionDir` pi-lsp writes for the pi CLI gives it
    nothing)."""
    return [f".pi/{name}" for name in PROJECT_FILES
            if _there(folder / ".pi" / name) and
            not (name == "settings.json" and _only_session_dir(folder / ".pi" / name))] + \
        _agents_skills(folder)


def _agents_skills(folder: Path) -> list[str]:
    """The `.agents/skills` folders pi asks about for `folder` (hasTrustRequiringProjectResources):
    in its real folder or one above, up to the root; relative to `folder`."""
    here = canonical(folder)
    mine = os.path.join(canonical(os.environ.get("HOME") or os.path.expanduser("~")),
                        AGENTS_SKILLS)
    found = []
    for above in [here, *map(str, Path(here).parents)]:
        skills = os.path.join(above, AGENTS_SKILLS)
        if skills != mine and _there(Path(skills)):
            found.append(os.path.relpath(skills, here))
    return found


def _there(path: Path) -> bool:
    """Whether a project file is there to need trust: not where reading finds none (ABSENT,
    so a folder trusted for having nothing to load never fails to read it), but a symlink to
    nothing is (what it names may be made)."""
    try:
        os.stat(path)
    except OSError as error:
        return error.errno not in ABSENT or (error.errno == errno.ENOENT and
                                             os.path.islink(path))
    return True


def _only_session_dir(path: Path) -> bool:
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > SMALL_FILE:
            return False  # not what pi-lsp writes: it may hold anything
        return set(read_object(path, "settings", TrustError)) <= {"sessionDir"}
    except (TrustError, OSError):
        return False


# -- pi's store ------------------------------------------------------------------------------


def read_store(path: Path) -> dict[str, bool | None]:
    """The store's decisions, {} when there is none; TrustError naming what is wrong."""
    try:
        data = read_regular(path)
    except FileNotFoundError:
        return {}
    except OSError as error:
        raise TrustError(f"{path}: cannot read pi's trust store ({error.strerror})") from None
    try:
        text = data.decode("utf-8", "replace").removeprefix("\ufeff")  # as Node reads it
        parsed = value_decoder.decode(text.encode())
    except msgspec.DecodeError as error:
        raise TrustError(f"{path}: pi's trust store is not valid JSON ({error}); fix or delete "
                         "it") from None
    except RecursionError:  # msgspec's limit on nesting
        raise TrustError(f"{path}: pi's trust store is not valid JSON (nested too deeply); fix "
                         "or delete it") from None
    if not isinstance(parsed, dict):
        raise TrustError(f"{path}: pi's trust store must be a JSON object of folders")
    for key, value in parsed.items():
        if _LONE_SURROGATE.search(key):
            # No folder's name reads as one in pi (Node gives U+FFFD for a byte that is not
            # UTF-8), and written back it could become another folder's key.
            raise TrustError(f"{path}: the folder {key!r} in pi's trust store holds a lone "
                             "surrogate, so it names no folder; fix or delete that entry")
        if not (value is True or value is False or value is None):
            raise TrustError(f"{path}: the decision for {key!r} must be true, false or null, "
                             f"not {json.dumps(value)}")
    return parsed


def _write_store(path: Path, data: dict[str, bool | None]) -> None:
    """pi's layout: keys sorted (as JavaScript sorts strings), two-space indent, a newline."""
    ordered = {key: data[key] for key in sorted(data, key=lambda k: k.encode("utf-16-be",
                                                                          "surrogatepass"))}
    text = json.dumps(ordered, indent=2, ensure_ascii=False) + "\n"
    target = Path(os.path.realpath(path))  # a symlinked store stays a symlink
    write_atomically(target, text.encode("utf-8", "surrogateescape"))


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """pi's lock on its trust store: a `.lock` directory; one older than 10 s is stale."""
    lock = path.with_name(path.name + ".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    for _attempt in range(LOCK_ATTEMPTS):
        try:
            os.mkdir(lock)
            break
        except FileExistsError:
            try:
                stale = os.stat(lock).st_mtime < time.time() - LOCK_STALE_S
            except FileNotFoundError:
                continue  # released meanwhile
            if stale:
                with contextlib.suppress(FileNotFoundError):
                    os.rmdir(lock)
                continue
            time.sleep(LOCK_WAIT_S)
        except OSError as error:
            raise TrustError(f"{lock}: cannot lock pi's trust store ({error.strerror})") from None
    else:
        raise TrustError(f"{lock}: pi's trust store stayed locked by another process; if no "
                         "pi is running, delete that folder")
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(lock)


def saved_decisions() -> dict[str, bool | None]:
    path = trust_path()
    if not path.exists():
        return {}  # nothing to lock (and no agent folder made just to read nothing)
    with _locked(path):
        return read_store(path)


def nearest_decision(data: dict[str, bool | None], folder: Path | str
                     ) -> tuple[str, bool] | None:
    """The saved decision for `folder`: its own or its nearest parent's true or false."""
    current = canonical(folder)
    while True:
        for key, value in data.items():
            if value is not None and os.path.abspath(key) == current:
                return key, value
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def save_decision(folder: Path, trusted: bool | None, parent: bool = False) -> None:
    """Save a decision for `folder` (None removes its own); `parent` trusts its parent
    folder instead and removes the folder's own decision, as pi's "Trust parent folder"."""
    key = canonical(folder)
    opened = os.path.abspath(os.path.expanduser(folder))
    if (trusted or parent) and opened.startswith(os.path.join(key, "")):
        # A symlink in a repository (`examples -> ..`) would have trust saved for a folder
        # holding it, and so for every project under that folder.
        raise TrustError(f"{opened} leads to {key}, a folder that contains it: trusting it "
                         f"would trust every project in {key}. Open {key} itself to trust it.")
    if parent and canonical(os.path.dirname(opened)) != os.path.dirname(key):
        # The editor offers the opened folder's parent; a link elsewhere (`pkg -> ../../.config`)
        # has another, which may hold every project (the home folder).
        raise TrustError(f"{opened} leads to {key}: its parent there is "
                         f"{os.path.dirname(key)}, not the folder {opened} is in. Open {key} "
                         f"itself to trust its parent.")
    updates = [(os.path.dirname(key), True), (key, None)] if parent else [(key, trusted)]
    path = trust_path()
    with _locked(path):
        data = read_store(path)
        for directory, decision in updates:
            for existing in [k for k in data if os.path.abspath(k) == directory]:
                del data[existing]
            if decision is not None:
                data[directory] = decision
        _write_store(path, data)


def default_project_trust() -> DefaultTrust:
    """`defaultProjectTrust` from the user's own settings.json (never a project's)."""
    path = agent_dir() / "settings.json"
    value = read_object(path, "settings", TrustError).get("defaultProjectTrust", "ask")
    if value not in ("ask", "always", "never"):
        raise TrustError(f"{path}: defaultProjectTrust must be \"ask\", \"always\" or "
                         f"\"never\", not {json.dumps(value)}")
    return value  # type: ignore[no-any-return]


# -- the decision ----------------------------------------------------------------------------


def resolve_trust(folder: Path, *, override: bool | None = None, client: bool | None = None,
                  session: bool | None = None) -> TrustState:
    """Whether `folder`'s `.pi/` files are loaded: a one-time override first, then the editor's
    Restricted Mode (never trusted), a choice for this server, pi's saved decision, the editor's
    trust, and `defaultProjectTrust` (`ask` loads nothing until someone decides)."""
    files = project_files(folder)

    def state(trusted: bool, decision: Decision, **extra: str) -> TrustState:
        return TrustState(str(folder), trusted, decision, files, **extra)

    if override is not None:
        return state(override, "override")
    if client is False:
        return state(False, "restricted")
    if session is not None:
        return state(session, "session")
    try:
        saved = nearest_decision(saved_decisions(), folder)
        default = default_project_trust()
    except TrustError as error:
        return state(False, "error", error=str(error))
    if saved is not None:
        return state(saved[1], "saved", saved_path=saved[0])
    if client:
        return state(True, "client")
    if not files:
        return state(True, "noProjectFiles")
    if default != "ask":
        return state(default == "always", "default")
    return state(False, "undecided")


def untrusted_note(state: TrustState) -> str | None:
    """What the user is told once about a folder whose settings or models are not loaded;
    None when nothing is left out."""
    files = [f for f in state.project_files if f not in LEFT_OUT_OF_NOTES]
    if state.trusted or not files:
        return None
    why = {
        "restricted": "the editor is in Restricted Mode",
        "saved": f"pi's trust store says not to trust {state.saved_path}",
        "session": "you chose not to trust it for now",
        "default": "defaultProjectTrust is \"never\"",
        "undecided": "it is not trusted yet",
        "override": "--no-approve was given",
        "error": state.error or "pi's trust store cannot be read",
    }.get(state.decision, "it is not trusted")
    return (f"{state.folder}: {' and '.join(files)} not loaded because {why}; turns use your "
            "own settings. "
            "To trust the folder: pi's /trust, :PiTrust in Neovim, \"pi: Trust This Folder\" in "
            "VS Code, or --approve on the command line.")


def decide_without_asking(folder: Path, override: bool | None,
                          report: Callable[[str], None]) -> TrustState:
    """The decision where nobody can be asked (the command line, as pi's print mode):
    `--approve`/`--no-approve`, else saved, else `defaultProjectTrust` with `ask` as no."""
    state = resolve_trust(folder, override=override)
    note = untrusted_note(state)
    if note is not None:
        report(note)
    return state
