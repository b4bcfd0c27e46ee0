"""Finding the sessions of a workspace: its own `.pi/sessions/`, the pi CLI's folder for it, and
the folder pi keeps them in when `$PI_CODING_AGENT_SESSION_DIR` or a `sessionDir` setting names
one (pi's shared folder, filtered by header `cwd`)."""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import stat
import threading
import weakref
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import msgspec

from pi_lsp.environment import node_variable
from pi_lsp.fileurl import FileUrlError, file_url_path
from pi_lsp.paths import loop_error, real_folder, real_path, symlink_loop
from pi_lsp.session.entries import (
    CURRENT_VERSION,
    NO_MESSAGE,
    SessionHeader,
    SessionInfoEntry,
    TextContent,
    UserMessage,
    activity_decoder,
    decode_message,
    header_decoder,
    session_name,
)
from pi_lsp.session.ids import date_text, iso_to_ms, order_ms, stamp_text
from pi_lsp.session.journal import (
    MAX_LINE_BYTES,
    LineBatch,
    NotASessionError,
    Record,
    open_regular,
    parse_lines,
    read_file,
)
from pi_lsp.session.jsontext import Decoder
from pi_lsp.session.migrate import migrate
from pi_lsp.session.outline import shorten
from pi_lsp.session.records import decode_entry
from pi_lsp.session.sessiondir import (
    SESSION_DIR_VALUE,
    SESSION_DIR_VARIABLE,
    link_session_dir,
    session_dir_setting,
)
from pi_lsp.session.tail import Tail
from pi_lsp.session.tree import SessionTree

log = logging.getLogger(__name__)

FIRST_MESSAGE_CHARS = 200
TITLE_CHARS = 60


class SessionSummary(msgspec.Struct, rename="camel"):
    path: str
    id: str
    name: str | None
    cwd: str
    created: str
    modified: str
    entry_count: int
    first_message: str | None
    parent_session: str | None
    title: str


def session_title(name: str | None, first_message: str | None, path: str) -> str:
    """What editors and the CLI call a session: its name, else its first prompt, else its file
    name; on one line and cut, as all three may come from a repository."""
    for text in (name, first_message):
        shown = shorten(text or "", TITLE_CHARS)
        if shown:
            return shown
    return shorten(Path(path).stem, TITLE_CHARS)


def tree_title(tree: SessionTree) -> str:
    """`session_title` of an open session."""
    return session_title(tree.name, first_prompt(tree), tree.path)


# How far each open session's search for its first prompt went, in its records and in its
# id-less records (each list, the count looked at, the line and text found): every change
# notification carries the title, and a session with no text prompt in 100,000 entries took
# 0.25 s to look through again.
_Search = tuple[list[Record], int, tuple[int, str] | None]
_first_prompts: weakref.WeakKeyDictionary[SessionTree, tuple[_Search, _Search]] = \
    weakref.WeakKeyDictionary()


def first_prompt(tree: SessionTree) -> str | None:
    """The text of an open session's first user message that has any, with an id or not (as
    pi 1.6 lists it); only records added since the last call are looked at (a reload makes
    new records lists, looked through anew)."""
    lists = (tree.records, tree.idless_records)
    searches = _first_prompts.get(tree, ((tree.records, 0, None), (tree.idless_records, 0, None)))
    done = tuple(_search_on(records, search) for records, search in zip(lists, searches,
                                                                           strict=True))
    _first_prompts[tree] = (done[0], done[1])
    first = min((found for _, _, found in done if found is not None), default=None)
    return None if first is None else first[1]


def _search_on(records: list[Record], search: _Search) -> _Search:
    """`search` carried on to the end of `records` (from the start if it was another list)."""
    held, looked, found = search
    if held is not records:
        looked, found = 0, None
    if found is None:
        found = next(((r.line, text) for r in itertools.islice(records, looked, None)
                      if (text := user_text(r))), None)
    return records, len(records), found


def _line(record: Record) -> int:
    return record.line


def workspace_session_dir(workspace: str) -> Path:
    return Path(workspace) / ".pi" / "sessions"


def agent_dir() -> Path:
    configured = node_variable("PI_CODING_AGENT_DIR")  # pi's folder, named as Node names it
    if configured:
        return Path(configured).expanduser()
    return default_agent_dir()


def default_agent_dir() -> Path:
    """pi's agent folder when PI_CODING_AGENT_DIR is not set."""
    return Path.home() / ".pi" / "agent"


def cli_session_dir(cwd: str) -> Path:
    """The pi CLI's folder for sessions started in `cwd`."""
    encoded = cwd[1:] if cwd[:1] in ("/", "\\") else cwd
    for char in "/\\:":
        encoded = encoded.replace(char, "-")
    return agent_dir() / "sessions" / f"--{encoded}--"


def pi_path(value: str, base: str) -> str:
    """`value` resolved as pi 1.6 resolves a path it is given (utils/paths.js resolvePath): `~`
    and `~/…` from the home folder, a `file://` URL as its path (FileUrlError where Node refuses
    it), a relative one from `base`; no symlink followed."""
    if value == "~" or value.startswith("~/"):
        value = os.path.expanduser("~") + value[1:]
    elif value.startswith("file://"):
        value = file_url_path(value)
    return os.path.normpath(os.path.join(base, value))


def _named_folder(value: str, workspace: str, name: str) -> Path | None:
    """The folder a session-folder setting or variable names, from the workspace's real path;
    None (logged) for a file: URL Node refuses, with which pi 1.6 does not start."""
    try:
        return Path(pi_path(value, os.path.realpath(workspace)))
    except FileUrlError as error:
        _not_listed(f"{name} {value!r}: {error}; no sessions are listed from it")
        return None


def variable_session_dir(workspace: str) -> Path | None:
    """The folder $PI_CODING_AGENT_SESSION_DIR names, where the pi CLI keeps every project's
    sessions (over a project's `sessionDir`); None when unset. A relative one is taken from the
    workspace's real path, pi's process.cwd(): from a symlink's name `..` leads elsewhere.
    Read as Node reads a variable: a byte that is not UTF-8 as U+FFFD, as pi names its folder."""
    value = node_variable(SESSION_DIR_VARIABLE)
    return _named_folder(value, workspace, SESSION_DIR_VARIABLE) if value else None


def shared_session_dir(workspace: str, project: bool = False) -> Path | None:
    """Where the pi CLI run in `workspace` keeps its sessions when not in its default folder
    (main.js, sessionDir: `--session-dir`, else the variable, else the `sessionDir` setting, the
    project's counting only when `project`); None when neither is set. A setting is resolved as
    the variable is; one that names a file, a FIFO or a device is left out (logged)."""
    variable = variable_session_dir(workspace)
    if variable is not None:
        return variable
    root = Path(workspace)
    value = session_dir_setting(agent_dir() / "settings.json", root / ".pi" / "settings.json",
                                project)
    if value is None:
        return None
    folder = _named_folder(value, workspace, "sessionDir")
    return folder if folder is not None and _may_be_folder(folder, value) else None


def _may_be_folder(folder: Path, value: str) -> bool:
    """Whether `folder` is a folder or may become one (it is not there yet); else logged."""
    try:
        mode = os.stat(folder).st_mode  # stat opens nothing: a FIFO cannot block it
    except FileNotFoundError:
        return True
    except OSError as error:
        why = loop_error(folder) or error.strerror
    else:
        if stat.S_ISDIR(mode):
            return True
        why = f"{folder} is {_kind(mode)}, not a folder"
    _not_listed(f"sessionDir {value!r}: {why}; no sessions are listed from it")
    return False


def own_session_dirs(workspace: str) -> list[Path]:
    """The workspace's `.pi/sessions/`, named as given (the confinement checks compare it with
    the workspace's name), and the pi CLI's folder for its real path: pi's cwd is Node's
    process.cwd(), which never names a symlink."""
    root = os.path.abspath(workspace)
    return [workspace_session_dir(root), cli_session_dir(os.path.realpath(root))]


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a socket" if stat.S_ISSOCK(mode) else "a file"


def session_dirs(workspace: str, project: bool = False) -> list[Path]:
    """The workspace's own session folders, and pi's shared folder when one is set (by the
    project's `sessionDir` only when `project`: a trusted folder)."""
    own = own_session_dirs(workspace)
    shared = shared_session_dir(workspace, project)
    if shared is None or os.path.realpath(shared) in map(os.path.realpath, own):
        return own
    return [*own, shared]


def shared_folders(workspaces: list[Path], vouched: Collection[Path] = ()
                   ) -> dict[str, list[Path]]:
    """pi's shared folder (its real path) unless it is one of the workspaces' own (pi does not
    filter its default folder, and pi-lsp lists all of `.pi/sessions/`), with the workspaces a
    session there may belong to: the one it lies in (a relative one is each project's own, so a
    committed header must not claim another folder, with that folder's trust), else all.
    `vouched`: the workspaces whose own `sessionDir` counts."""
    own = {os.path.realpath(d) for w in workspaces for d in own_session_dirs(str(w))}
    shared = {os.path.realpath(d) for w in workspaces
              if (d := shared_session_dir(str(w), w in vouched)) is not None} - own
    return {folder: _holding(folder, workspaces) or list(workspaces) for folder in shared}


def _holding(folder: str, workspaces: list[Path]) -> list[Path]:
    """The deepest of the workspaces `folder` lies in, if any."""
    inside = [w for w in workspaces if folder == (root := os.path.realpath(w)) or
              folder.startswith(root + os.sep)]
    return [max(inside, key=lambda w: len(os.path.realpath(w)))] if inside else []


def started_in(cwd: str, workspaces: list[Path]) -> Path | None:
    """The workspace a header's `cwd` names as pi compares them: resolved from pi's cwd there
    (the workspace's real path) but no symlink followed, equal to that real path."""
    for workspace in workspaces:
        real = os.path.realpath(workspace)
        try:
            if cwd and pi_path(cwd, real) == real:
                return workspace
        except FileUrlError:  # a hand-written `file:` cwd Node refuses names no folder
            return None
    return None


def of_workspaces(sessions: list[SessionSummary], workspaces: list[Path],
                  started: Collection[str] = (), vouched: Collection[Path] = ()
                  ) -> list[SessionSummary]:
    """`sessions` less those in pi's shared folder that another project started: there, as in
    pi, a session belongs to the workspace its header's cwd names (or, for the paths in
    `started`, the one the server started it in). `vouched` as for `shared_folders`."""
    shared = shared_folders(workspaces, vouched)
    if not shared:
        return sessions
    owners = {folder: shared.get(os.path.realpath(folder))  # a few, for hundreds of files
              for folder in {os.path.dirname(s.path) for s in sessions}}
    return [s for s in sessions if (among := owners[os.path.dirname(s.path)]) is None or
            started_in(s.cwd, among) is not None or s.path in started]


def shared_owner(path: Path, shared: dict[str, list[Path]], cwd: str | None = None
                 ) -> Path | None:
    """For a session in pi's shared folder (`shared`, as `shared_folders` gives it), the
    workspace its header's cwd names (`cwd` when the header is known: a new session's file is
    written only at its first prompt); else None."""
    among = shared.get(os.path.dirname(os.path.realpath(path)))
    if among is None:
        return None
    if cwd is None:
        cwd = _header_cwd(path)
    return started_in(cwd, among) if cwd is not None else None


def _header_cwd(path: Path) -> str | None:
    """The cwd the session file's header records; None if it cannot be read."""
    try:
        with open_regular(str(path)) as file:
            return header_decoder.decode(file.readline(MAX_LINE_BYTES)).known_cwd()
    except (OSError, NotASessionError, msgspec.DecodeError):
        return None


class SessionDirError(ValueError):
    """A workspace's session folder that is a symlink leading out of the workspace, or that
    cannot be made (a symlink loop or a file in its place)."""


def leads_out(directory: Path, workspace: Path) -> bool:
    """Whether `directory`, written inside `workspace`, is really somewhere else (a symlink on
    its way leads out): a repository must not point pi-lsp at another project's sessions."""
    written = Path(os.path.abspath(directory))
    real_root = Path(os.path.realpath(workspace))
    # Written under the workspace's name or its real path (a relative shared folder is).
    if not any(root == written or root in written.parents
               for root in (Path(os.path.abspath(workspace)), real_root)):
        return False  # configured outside the workspace: the user's own choice
    real = Path(os.path.realpath(written))
    return real != real_root and real_root not in real.parents


def followed(directories: list[Path], workspace: Path) -> list[Path]:
    """The session folders that are listed and written: not one that leads out."""
    return [d for d in directories if not leads_out(d, workspace)]


class ForeignSessionError(Exception):
    """A path that is not a session file directly inside one of the session directories."""


def confine_session(path: Path, directories: list[Path]) -> Path:
    """`path` resolved, if it is a `.jsonl` file directly inside one of `directories` once every
    symlink is followed; otherwise ForeignSessionError saying where it leads (or which symlink
    on the way is a loop)."""
    loop = loop_error(path)
    if loop is not None:
        raise ForeignSessionError(loop)
    resolved = real_path(path)
    allowed = {real_path(directory) for directory in directories}
    leads = f" (it leads to {resolved})" if resolved != Path(os.path.abspath(path)) else ""
    if resolved.suffix != ".jsonl":
        raise ForeignSessionError(f"{path}{leads} is not a .jsonl file")
    if resolved.parent not in allowed:
        listed = ", ".join(sorted(map(str, allowed))) or "none"
        raise ForeignSessionError(f"{path}{leads} is not directly inside one of its session "
                                  f"directories ({listed})")
    return resolved


def session_workspace(path: Path, folders: dict[Path, list[Path]], fallback: Path) -> Path:
    """The workspace a session file belongs to: the deepest of `folders` (each with its session
    directories) holding it, else the parent of the `.pi/sessions/` it is in, else `fallback`;
    a symlinked file is where its link is, not where it leads."""
    resolved = real_folder(path) / os.path.basename(path)
    for folder in sorted(folders, key=lambda f: len(str(f)), reverse=True):
        if any(resolved.parent == real_path(d) for d in folders[folder]) or \
                real_path(folder) in resolved.parents:
            return folder
    if resolved.parent.parts[-2:] == (".pi", "sessions"):
        return resolved.parent.parent.parent
    return fallback


def _session_files(directories: list[Path]) -> list[str]:
    """The session files directly in the directories, a symlink leading out not being one,
    latest name first; as strings, since hundreds of Path objects cost more than the listing."""
    files: list[str] = []
    for directory in directories:
        try:
            real = os.path.realpath(directory)
            with os.scandir(directory) as entries:
                if not _named_in_utf8(str(directory), "its sessions are not listed, its path "
                                      "is not UTF-8 (rename the folder to open them)"):
                    continue  # said once for the folder, not as each file's own name
                files.extend(e.path for e in entries
                             if _is_session_file(e, real) and _named_in_utf8(e.path))
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as error:  # a symlink loop a repository committed: the rest is listed
            why = loop_error(directory) or f"{directory}: {error.strerror}"
            _not_listed(f"{why}; its sessions are not listed")
    # Sessions of one time (a fork at the leaf copies its source's stamps) keep this order in
    # the stable sort by time, as pi 1.6 lists them: names descending, whatever their folder.
    return sorted(files, key=os.path.basename, reverse=True)


def _is_session_file(entry: os.DirEntry[str], folder: str) -> bool:
    """A `.jsonl` file, through a symlink only if it stays in `folder` (the folder's real
    path); a symlink loop is skipped as a dangling symlink is."""
    if not entry.name.endswith(".jsonl"):
        return False
    try:
        if not entry.is_file():
            return False
    except OSError:  # a symlink loop: is_file raises ELOOP where a dangling one gives False
        return False
    return not entry.is_symlink() or os.path.dirname(os.path.realpath(entry.path)) == folder


def _named_in_utf8(path: str, left_out: str = "not listed, its name is not UTF-8 (rename it "
                                              "to open it)") -> bool:
    """Whether the path is UTF-8: VS Code reads a file: URI's bytes as UTF-8 and pi (Node) a
    file name, so neither could open a file whose name is not; it is left out, and logged."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(path).decode("utf-8", "backslashreplace")
        _not_listed(f"{shown}: {left_out}")
        return False
    return True


@lru_cache(maxsize=64)  # once per folder or file, not at every listing
def _not_listed(message: str) -> None:
    log.warning("%s", message)


def user_text(record: Record) -> str | None:
    """The text of a user message record, cut for a listing; None for anything else."""
    if record.env.type != "message" or b'"user"' not in bytes(record.env.message):
        return None
    message = decode_message(record.env.message)
    if not isinstance(message, UserMessage):
        return None
    content = message.content
    if isinstance(content, str):
        return content[:FIRST_MESSAGE_CHARS]
    return " ".join(b.text for b in content if isinstance(b, TextContent))[:FIRST_MESSAGE_CHARS]


class UnlistedNameError(NotASessionError):
    """A session whose `session_info` names it with no text (a number, an object): pi 1.6's
    listing leaves it out."""


class _NameField(msgspec.Struct):
    name: Any = None


_name_decoder: Decoder[_NameField] = Decoder(_NameField)


def _text_or_null_name(record: Record) -> bool:
    """Whether a `session_info` line's name is text or null, read as JSON.parse reads it (a
    lone surrogate escape, 1e400); a line msgspec cannot fit to the field is no text either."""
    try:
        return isinstance(_name_decoder.decode(record.text).name, str | None)
    except msgspec.ValidationError:
        return False


@dataclass
class SummaryFold:
    """A session's summary built one batch of records at a time, so appends extend it."""

    header: SessionHeader
    name: str | None = None
    entry_count: int = 0
    first_message: str | None = None
    latest: float | None = None  # pi's lastActivityTime: the Math.max of activity_time

    def add(self, records: Iterable[Record]) -> None:
        """Count what a tree indexes: entries with an id. The name (the last wins, blank
        clears), the first prompt and the date come from every line, id or not, as pi 1.6's
        buildSessionInfo reads them; only user and assistant messages date the session."""
        for record in records:
            kind = record.env.type
            if record.env.id is not None:
                self.entry_count += 1
            if kind == "session_info":
                entry = decode_entry(record)
                if isinstance(entry, SessionInfoEntry):
                    self.name = session_name(entry)
                elif not _text_or_null_name(record):
                    # pi 1.6's `name?.trim()` throws there, and its listing drops the session.
                    raise UnlistedNameError(f"not listed: line {record.line}'s session_info "
                                            "name is not text, and pi 1.6 lists no such session")
            elif kind == "message":
                if (time := activity_time(record)) is not None:
                    self.latest = max(0 if self.latest is None else self.latest, time)
                if self.first_message is None:
                    # pi 1.6 skips a user message without text (an image alone) for the next.
                    self.first_message = user_text(record) or None

    def summary(self, path: Path) -> SessionSummary:
        header = self.header
        # pi's created is `new Date(timestamp)` whatever the header holds, written by its
        # toISOString, which throws for an Invalid Date: "" then.
        created = date_text(header.timestamp) or ""
        # pi 1.6's buildSessionInfo: the last activity after 1970 (a time past a Date's range
        # is its Invalid Date, "" as for `created`), else the header's time when it is text a
        # Date reads, else the file's.
        stamp = header.timestamp
        parent = header.parent_session
        parent = parent if isinstance(parent, str) else None  # editors are sent text or null
        if self.latest is not None and self.latest > 0:
            modified = date_text(self.latest) or ""
        elif isinstance(stamp, str) and (header_time := date_text(stamp)) is not None:
            modified = header_time
        else:
            modified = _file_time(path) or created
        return SessionSummary(
            path=str(path), id=header.id, name=self.name, cwd=header.known_cwd(),
            created=created, modified=modified, entry_count=self.entry_count,
            first_message=self.first_message, parent_session=parent,
            title=session_title(self.name, self.first_message, str(path)),
        )


def activity_time(record: Record) -> float | None:
    """When a message entry counts as the session's activity (pi 1.6's getMessageActivityTime):
    a user or assistant message with content, at its own `timestamp` when that is a number (as
    JavaScript holds it: 1e400 is Infinity), else at its entry's stamp; None otherwise or NaN."""
    try:
        head = activity_decoder.decode(record.env.message)
    except msgspec.ValidationError:  # not an object, or its role not text
        return None
    if head.content is NO_MESSAGE or head.role not in ("user", "assistant"):
        return None
    own = bytes(head.timestamp)
    if own[:1] in _NUMBER_STARTS:
        return float(own)
    return iso_to_ms(record.env.timestamp)


_NUMBER_STARTS = {bytes([c]) for c in b"-0123456789"}


def _file_time(path: Path) -> str | None:
    """When the file was last written, to the nearest ms as Node's `stats.mtime` rounds it,
    written as JavaScript writes a time; None if it is gone."""
    try:
        return stamp_text((os.stat(path).st_mtime_ns + 500_000) // 1_000_000)
    except OSError:
        return None


class _NeedsMigration(Exception):
    """A version 1 or 2 file: its summary needs the whole file, migrated."""


def read_summary(path: Path) -> tuple[SummaryFold, Tail]:
    """A session file's summary and where reading stopped, read a chunk at a time so a file
    of any size costs little memory; a version 1 or 2 file is read whole (it must be
    migrated)."""
    fold: SummaryFold | None = None

    def take(batch: LineBatch) -> None:
        nonlocal fold
        if fold is None and batch.header is not None:
            if batch.header.version_number() < CURRENT_VERSION:
                raise _NeedsMigration
            fold = SummaryFold(batch.header)
        if fold is not None:
            fold.add(batch.records)

    try:
        snapshot = read_file(str(path), take)
    except _NeedsMigration:
        return _read_whole(path)
    assert fold is not None  # read_file raises when there is no header
    return fold, Tail.after(str(path), snapshot)


def _read_whole(path: Path) -> tuple[SummaryFold, Tail]:
    snapshot = read_file(str(path))
    migrate(snapshot)
    fold = SummaryFold(snapshot.header)
    fold.add(snapshot.records)
    return fold, Tail.after(str(path), snapshot)


def summarize(path: Path) -> SessionSummary:
    return read_summary(path)[0].summary(path)


def file_key(path: str | Path) -> tuple[int, int, int]:
    stat = os.stat(path)
    return stat.st_size, stat.st_mtime_ns, stat.st_ino


@dataclass
class _Known:
    key: tuple[int, int, int]
    fold: SummaryFold
    tail: Tail
    summary: SessionSummary


class SessionIndex:
    """Summaries kept across listings: an unchanged file (same size, mtime and inode) is not
    read again, a grown one only from where the last read stopped, anything else in full; a
    file that is no session is not read again until it changes."""

    def __init__(self) -> None:
        self._known: dict[str, _Known] = {}
        self._refused: dict[str, tuple[tuple[int, int, int], NotASessionError]] = {}
        self._lock = threading.Lock()  # listings run in worker threads

    def summary(self, path: str) -> SessionSummary:
        key = file_key(path)
        refused = self._refused.get(path)
        if refused is not None and refused[0] == key:
            raise refused[1].with_traceback(None)  # a traceback each time would pile up
        try:
            summary = self._summary(path, key)
        except NotASessionError as error:
            self._known.pop(path, None)
            self._refused[path] = key, error
            raise
        self._refused.pop(path, None)
        return summary

    def _summary(self, path: str, key: tuple[int, int, int]) -> SessionSummary:
        known = self._known.get(path)
        if known is not None and known.key == key:
            return known.summary
        if known is not None and key[2] == known.key[2] and key[0] > known.key[0]:
            result = known.tail.poll()
            if not result.reset:
                batch = LineBatch(header=known.fold.header, header_raw=b"")
                parse_lines(result.lines, result.first_line, batch)
                known.fold.add(batch.records)
                known.key, known.summary = key, known.fold.summary(Path(path))
                return known.summary
        fold, tail = read_summary(Path(path))
        self._known[path] = _Known(key, fold, tail, fold.summary(Path(path)))
        return self._known[path].summary

    def list(self, directories: list[Path]) -> list[SessionSummary]:
        with self._lock:
            files = _session_files(directories)
            for gone in set(self._known) - set(files):
                del self._known[gone]
            for gone in set(self._refused) - set(files):
                del self._refused[gone]
            return _newest_first(files, self.summary)


def tree_summary(tree: SessionTree) -> SessionSummary:
    """The summary of a session held in memory (a new one not written yet)."""
    fold = SummaryFold(tree.header)
    fold.add(heapq.merge(tree.records, tree.idless_records, key=_line))
    return fold.summary(Path(tree.path))


def start_folder(workspace: Path) -> Path:
    """Where pi 1.6 run in `workspace` starts (and `pi -c` continues) sessions: the folder
    $PI_CODING_AGENT_SESSION_DIR names (main.js takes it over any `sessionDir` setting), else
    `.pi/sessions` (the `sessionDir` pi-lsp sets there), else pi's own folder for the workspace
    where `.pi` is a file or a symlink loop, since pi then reads no project settings."""
    shared = variable_session_dir(str(workspace))
    if shared is not None:
        return shared
    dot_pi = workspace / ".pi"
    if os.path.lexists(dot_pi) and not os.path.isdir(dot_pi):
        return cli_session_dir(os.path.realpath(workspace))
    return workspace_session_dir(str(workspace))


def continuable(workspace: Path) -> list[SessionSummary]:
    """The sessions `pi -c` in `workspace` picks the newest of: those in `start_folder`, of pi's
    shared folder only those started in the workspace (SessionManager.continueRecent)."""
    return of_workspaces(list_sessions(followed([start_folder(workspace)], workspace)),
                         [workspace])


def start_session(workspace: Path, provider: str, model_id: str, thinking_level: str,
                  path: Path | None = None) -> SessionTree:
    """A new session (in `start_folder` unless `path` is given) that begins as pi begins one:
    with its model and thinking level, and no file until its first assistant message. `pi -c`
    in the workspace continues it (the header records the workspace's real path, which is
    pi's cwd there); a session in `.pi/sessions` points the pi CLI there first."""
    if path is None:
        directory = start_folder(workspace)
        if leads_out(directory, workspace):
            raise SessionDirError(
                f"{directory} leads to {os.path.realpath(directory)}, outside the workspace; "
                "pi-lsp does not follow it. Remove the symlink (or make it a folder) to "
                "start sessions here.")
        _make_session_dir(directory)
        if directory == workspace_session_dir(str(workspace)) and link_session_dir(workspace):
            _name_earlier_sessions(workspace)
        tree = SessionTree.create_in(directory, str(workspace), deferred=True)
    else:
        _make_session_dir(path.parent)  # as pi 1.6 makes a named session's (SessionManager)
        tree = SessionTree.create(str(path), str(workspace), deferred=True)
    tree.append_model_change(provider, model_id)
    tree.append_thinking_level_change(thinking_level)
    return tree


def _name_earlier_sessions(workspace: Path) -> None:
    """Once `sessionDir` points the pi CLI at `.pi/sessions`, `pi -c` and `pi --session ID` no
    longer look in pi's own folder for the workspace: say where the sessions kept there stay."""
    earlier = cli_session_dir(os.path.realpath(workspace))
    count = len(_session_files([earlier]))
    if count:
        log.warning("%s: the %d session(s) the pi CLI kept there for %s stay there and are "
                    "still listed here; the pi CLI now starts and continues sessions in %s "
                    "(`pi -c`, `pi --session ID`), so continue one of those with "
                    "`pi --session FILE`", earlier, count, workspace, SESSION_DIR_VALUE)


def _make_session_dir(directory: Path) -> None:
    """Make the folder a session starts in; SessionDirError naming what stands in its way
    where the OS would say only `File exists`."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        why = _in_the_way(directory) or error.strerror
        raise SessionDirError(f"cannot start a session in {directory}: {why}") from None


def _in_the_way(directory: Path) -> str | None:
    """What a repository put where the folder or one above it must be: a symlink loop, or a
    file (a committed `.pi` or `.pi/sessions`)."""
    loop = symlink_loop(directory)
    if loop is not None:
        return f"{loop} is a symlink loop"
    file = next((part for part in (*reversed(directory.parents), directory)
                 if os.path.lexists(part) and not os.path.isdir(part)), None)
    return f"{file} is not a folder" if file is not None else None


def list_sessions(directories: list[Path]) -> list[SessionSummary]:
    """Every readable session in the directories, newest first; other files are skipped."""
    return _newest_first(_session_files(directories), lambda file: summarize(Path(file)))


def _newest_first(files: list[str], summary: Callable[[str], SessionSummary]
                  ) -> list[SessionSummary]:
    sessions: list[SessionSummary] = []
    for path in files:
        try:
            sessions.append(summary(path))
        except UnlistedNameError as error:
            _not_listed(f"{path}: {error}")
        except (NotASessionError, OSError):
            continue
    sessions.sort(key=lambda s: _modified_ms(s.modified), reverse=True)
    return sessions


_modified_ms = lru_cache(maxsize=4096)(order_ms)  # listings sort the same stamps again
