"""The agent's tools: read, write, edit and bash, confined to the workspace."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import errno
import functools
import io
import logging
import math
import os
import re
import stat
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any, Protocol, TypeVar

import msgspec

from pi_lsp.agent.access import inside, protected_reason, secret_reason
from pi_lsp.agent.arguments import (
    ArgumentsError,
    checked_arguments,
    coerced_arguments,
    invalid_arguments,
    javascript_numbers,
    js_type,
)
from pi_lsp.agent.editdiff import edit_diff
from pi_lsp.agent.editmatch import EditError, EditPlan, plan_edit, prepare_edit_arguments
from pi_lsp.agent.fserrors import (
    SyscallError,
    error_code,
    node_message,
    null_byte_message,
    realpath_error,
    too_long,
)
from pi_lsp.agent.images import ImageOmitted, process_image
from pi_lsp.agent.mime import SNIFF_BYTES, image_type
from pi_lsp.agent.output import UPDATE_INTERVAL_S, OutputTail
from pi_lsp.agent.paths import resolve_read_path, resolve_to_cwd
from pi_lsp.agent.readpage import PageError, page
from pi_lsp.agent.shell import ShellProcess, WatcherDied
from pi_lsp.agent.stopping import checkpoint, in_worker
from pi_lsp.agent.trimdiff import Span, changed_span, unified_diff
from pi_lsp.fileurl import FileUrlError
from pi_lsp.providers.base import ToolSpec
from pi_lsp.providers.registry import API_KEY_VARIABLES
from pi_lsp.regular import settled, stat_key
from pi_lsp.session.catalog import agent_dir
from pi_lsp.session.entries import ImageContent, TextContent, UserBlock
from pi_lsp.session.jsontext import js_number
from pi_lsp.throttle import Throttled

log = logging.getLogger(__name__)
Worked = TypeVar("Worked")

READ_CHUNK = 1 << 20  # a file is read this much at a time, whatever its size
# The largest change diffed for an approval: the lines it touches, old and new together, with
# their context (what both texts share at their start and end is never diffed). Diffing a few
# edits costs about 1.4 ms per 1,000 lines; difflib is quadratic in changed blocks, so 5,000 ->
# 5,000 lines with every other line changed still takes 1.1 s. Past these, 5M lines took 1.5 s
# and 0.8 GB.
DIFF_MAX_LINES = 10_000
DIFF_MAX_CHARS = 1_000_000
BASH_TIMEOUT_MAX_S = 24 * 60 * 60
# How long an abort waits for a write under way to end: an editor may never answer applyEdit.
ABORTED_WRITE_WAIT_S = 5.0
# The variables pi-lsp reads its own keys from; a command the user approves runs the project's
# code (npm test, pytest), which must not find them.
KEY_VARIABLES = frozenset(API_KEY_VARIABLES.values())
# What pi 1.6's bash sets for the session it runs in (bash.js resolveSpawnContext); inherited
# values of these names are dropped, so a nested pi's never pass for this session's.
SESSION_VARIABLES = ("PI_SESSION_ID", "PI_SESSION_FILE", "PI_PROVIDER", "PI_MODEL",
                     "PI_REASONING_LEVEL")


class ToolError(Exception):
    """A failure the model should read as an error result."""


class InvalidArguments(ToolError):
    """Arguments the tool's schema refuses: pi 1.6 checks them before its tool runs."""


class Refused(ToolError):
    """A call pi-lsp refuses where pi 1.6 would run it (a secret, `.git`, outside the
    workspace, bidi controls, a timeout over a day): answered before its tool starts."""


class ToolResult(msgspec.Struct):
    content: list[UserBlock]
    details: Any = None
    is_error: bool = False
    # False: answered without running the tool (unknown, arguments refused), which pi 1.6
    # leaves untimed (no durationMs)
    ran: bool = True


def text_result(text: str, details: Any = None, is_error: bool = False) -> ToolResult:
    return ToolResult([TextContent(text=text)], details, is_error)


def thrown_result(text: str) -> ToolResult:
    """A call that failed where pi 1.6's tool throws or its agent loop answers it unrun (unknown,
    bad arguments, refused, aborted, cut): the loop stores details `{}` (createErrorToolResult)."""
    return ToolResult([TextContent(text=text)], {}, True)


def unrun_result(text: str) -> ToolResult:
    """A call answered as thrown_result answers it, its tool never run."""
    return ToolResult([TextContent(text=text)], {}, True, ran=False)


class FileAccess(Protocol):
    """Where the file tools read and write text: the disk, or an editor's open buffers."""

    def read_text(self, path: Path) -> str | None:
        """The file's text, or None when it does not exist."""
        ...

    def buffer_text(self, path: Path) -> str | None:
        """The file's text in an editor when it has changes not saved there; None when the
        disk has its text (it is not open, or saved), which is not read here."""
        ...

    async def write_text(self, path: Path, text: str, old: str | None,
                         seen: tuple[int, ...] | None = None) -> None:
        """Write `text` over `old`, the file's text it was worked out from (None: no file);
        a ToolError, nothing written, where the buffer or the disk holds another text by then.
        `seen`: a stat at which the disk held `old` (`disk_holds`), if one is known."""
        ...

    async def delete_in_editor(self, path: Path, old: str | None) -> None:
        """Delete a file open in an editor through the editor, which drops its buffer; nothing
        when it is not open there or the editor cannot delete files (the disk is the caller's).
        A ToolError, nothing deleted, where the buffer is not `old`, the text decided on, or
        one closed since holds another text on disk."""
        ...

    def open_texts(self) -> dict[Path, str | None]:
        """The files open in an editor, by real path: the text of those with changes not yet
        saved, None for the others (the disk has their text)."""
        ...

    async def settle(self) -> None:
        """Wait until `open_texts` knows which open files show their file on disk."""
        ...


class DiskFiles:
    """File access straight to the disk."""

    def open_texts(self) -> dict[Path, str | None]:
        return {}

    async def settle(self) -> None:
        return None

    def read_text(self, path: Path) -> str | None:
        return disk_text(path)

    def buffer_text(self, path: Path) -> str | None:
        return None

    async def write_text(self, path: Path, text: str, old: str | None,
                         seen: tuple[int, ...] | None = None) -> None:
        # The disk is told to hold `old` in the thread, just before the write: the caller's
        # check on the loop (`_unchanged`) is a loop turn or more before, and an editor's save
        # or another program's write may come between. Encoded in the thread too (100 MB:
        # 0.06 s), before the file is truncated: a failure loses nothing.
        await asyncio.to_thread(write_over, path, text, old, seen)

    async def delete_in_editor(self, path: Path, old: str | None) -> None:
        return None


DISK = DiskFiles()

SURROGATE = re.compile("[\ud800-\udfff]")


def well_formed(text: str) -> str:
    """`text` as JavaScript writes it in UTF-8: surrogates that pair up joined, a lone one as
    U+FFFD (a model's JSON may hold "\\ud83d", which pi writes so)."""
    if text.isascii() or SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def write_over(path: Path, text: str, old: str | None, seen: tuple[int, ...] | None) -> None:
    """Write `text` to the file at `path` if it still holds `old`; else a ToolError, nothing
    written."""
    data = well_formed(text).encode()
    if not disk_holds(path, old, seen):
        raise ToolError(f"{path} changed on disk since it was read; nothing was written. Read "
                        "it again.")
    write_regular(path, data)


def disk_holds(path: Path, old: str | None, seen: tuple[int, ...] | None) -> bool:
    """Whether the file at `path` still holds `old` (None: there is none), as `edit` reads it:
    told by its stat where it is `seen`, one at which it did, else read. What is no regular
    file counts as holding it: write_regular refuses it in Node's words."""
    try:
        info = _unfollowed_stat(path)
    except FileNotFoundError:
        return old is None
    except OSError:  # (EACCES; a file, or a symlink, put on its path) the write fails as pi's
        return True
    if not stat.S_ISREG(info.st_mode) or stat_key(info) == seen:
        return True
    try:
        return old is not None and _disk_text_of(path)[0] == old
    except OSError:  # unreadable now (mode 0222) and not as it was `seen`: changed
        return False


def _unfollowed_stat(path: Path) -> os.stat_result:
    """The stat of `path` reached as write_regular reaches it, following no symlink."""
    folder = open_folder(path.parent)
    try:
        return os.stat(path.name, dir_fd=folder, follow_symlinks=False)
    finally:
        os.close(folder)


def write_regular(path: Path, data: bytes) -> None:
    """Make `path` (a real path: no symlink in it) a regular file holding `data` (its folders
    too); a FIFO, device, socket or symlink there is refused, never waited on or followed. A
    failure is a SyscallError named as Node names it."""
    with _syscall("mkdir"):
        make_folders(path.parent)  # fails where Node's mkdir -p fails
    # O_NONBLOCK: opening a FIFO to write would wait for a reader (ENXIO instead); no O_TRUNC
    # until the file is known to be regular. O_NOFOLLOW: `path` was checked where its links
    # lead (a real path), so a symlink there now, or on a folder above, was put there since,
    # and may lead anywhere.
    with _syscall("open"):
        folder = open_folder(path.parent)
        try:
            fd = os.open(path.name, os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o666, dir_fd=folder)
        finally:
            os.close(folder)
    # The file's close within the tagging: its buffer is flushed there, which may meet a full
    # disk (ENOSPC, EFBIG, EDQUOT, EIO) as the writes before it may.
    with _syscall("write"), os.fdopen(fd, "wb") as file:
        kind = file_kind(os.fstat(fd).st_mode)
        if kind != "regular file":
            raise ToolError(f"{path} is a {kind}, not a regular file; nothing was written")
        os.set_blocking(fd, True)
        file.truncate()
        file.write(data)


def make_folders(folder: Path) -> None:
    """`folder` and the folders above it that are missing, as mkdir -p makes them: a loop, as
    Path.mkdir(parents=True) recurses once a folder and fails past some 990 missing (a path of
    4,000 characters may hold 2,000). Each is made in its parent opened as open_folder opens
    it: a folder swapped for a symlink since the check has none made where it leads."""
    missing: list[Path] = []
    while True:
        try:
            _make_folder(folder)
            break
        except FileNotFoundError:
            if folder.parent == folder:
                raise
            missing.append(folder)
            folder = folder.parent
        except OSError:
            if not folder.is_dir():
                raise
            break
    if not missing:
        return
    with _named(folder):
        parent = open_folder(folder)
    try:
        for each in reversed(missing):  # each in the one made before: no walk from / again
            parent = _made_in(parent, each)
    finally:
        os.close(parent)


def _make_folder(folder: Path) -> None:
    """mkdir of `folder` (absolute) in its parent reached by open_folder."""
    with _named(folder):
        parent = open_folder(folder.parent)
        try:
            os.mkdir(folder.name, dir_fd=parent)
        finally:
            os.close(parent)


def _made_in(parent: int, folder: Path) -> int:
    """`folder` made in the open folder `parent` (or found made meanwhile), opened as
    open_folder opens it; `parent` is closed once it is."""
    with _named(folder):
        with contextlib.suppress(FileExistsError):  # made meanwhile is as good
            os.mkdir(folder.name, dir_fd=parent)
        inner = os.open(folder.name, _FOLDER_OPEN | os.O_NOFOLLOW, dir_fd=parent)
    os.close(parent)
    return inner


@contextlib.contextmanager
def _named(folder: Path) -> Iterator[None]:
    """An OSError within named by `folder`, as mkdir names the folder it failed at (a call
    with dir_fd names only the last part)."""
    try:
        yield
    except OSError as error:
        raise type(error)(error.errno, error.strerror, str(folder)) from None


# O_PATH (Linux) opens a folder the user may enter but not list (mode 711), as a path
# through it needs; elsewhere a folder is opened to read.
_FOLDER_OPEN = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC


def open_folder(folder: Path) -> int:
    """`folder` (absolute) opened for `dir_fd`, each name on the way opened without following
    a symlink: ENOTDIR at one or at a file (ELOOP at a link where there is no O_PATH)."""
    fd = os.open("/", _FOLDER_OPEN)
    try:
        for name in folder.parts[1:]:
            inner = os.open(name, _FOLDER_OPEN | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def _syscall(name: str) -> Iterator[None]:
    """An OSError within, tagged with the system call `name` Node would name for it."""
    try:
        yield
    except OSError as error:
        raise SyscallError(error, name) from error


def file_kind(mode: int) -> str:
    """What a file of this mode is, as a message names it."""
    kinds = ((stat.S_ISREG, "regular file"), (stat.S_ISDIR, "folder"), (stat.S_ISFIFO, "FIFO"),
             (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "device"), (stat.S_ISBLK, "device"))
    return next((name for test, name in kinds if test(mode)), "special file")


def open_regular(path: Path) -> IO[bytes] | None:
    """`path` opened for reading if it is a regular file (through its symlinks); None when it
    does not exist or is something else (a folder, a FIFO, a device)."""
    real = os.path.realpath(path)  # Path.resolve raises on a symlink loop before Python 3.13
    try:
        # O_NOFOLLOW: `real` has no symlinks, so one put there meanwhile is not followed;
        # O_NONBLOCK: a FIFO put there does not hang the opening.
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return os.fdopen(fd, "rb")


def disk_text(path: Path, errors: str = "strict") -> str | None:
    """A regular file's UTF-8 text, line ends as they are; None when there is no such file."""
    file = open_regular(path)
    if file is None:
        return None
    with io.TextIOWrapper(file, "utf-8", errors, newline="") as text:
        return text.read()


class Undecodable(msgspec.Struct, frozen=True):
    """What of a file is not UTF-8: its bytes, read as U+FFFD (and so written back, as pi
    does), and the lines holding them."""

    bytes: int
    lines: int


class Proposal(msgspec.Struct, frozen=True):
    """What a write or edit would leave in a file, worked out before anything is written."""

    path: Path
    old_text: str | None  # None: the file does not exist yet
    new_text: str
    # An edited file with bytes that are not UTF-8 (counted only when a user is to be asked).
    not_utf8: bool = False
    # A secret overwritten: its text is kept to check it is unchanged when written, but no diff
    # shows it, nor whether there is any (the model reads a diff's length when it is too long).
    secret: bool = False
    # A file overwritten that cannot be read (mode 0222): written all the same, as pi writes it
    # without reading it; `old_text` is then empty and no diff claims to show its text.
    unreadable: bool = False
    # What can be known of such a file, to refuse the write if it changed while asked: its
    # device, inode, size, mtime and ctime (`_unread_identity`).
    identity: tuple[int, ...] | None = None

    def diff(self) -> str:
        """A unified diff of the change, with the file's path in its headers; a note of its
        size instead when it is not `diffable`."""
        before, old_name = self._old_side()
        span = changed_span(before, self.new_text)
        if not _diffable(before, self.new_text, span):
            return (f"--- {old_name}\n+++ {self.path}\nchange too large to show: "
                    f"{_line_count(before)} lines -> {_line_count(self.new_text)} lines\n")
        return unified_diff(before, self.new_text, old_name, str(self.path), span)

    def diffable(self) -> bool:
        """Whether the lines the change touches are few enough to diff (`_diffable`)."""
        before = self._old_side()[0]
        return _diffable(before, self.new_text, changed_span(before, self.new_text))

    def _old_side(self) -> tuple[str, str]:
        """The old text as the diff shows it, and its name in the diff's header."""
        if self.secret:
            return "", f"{self.path} (a secret: its text, if any, is not shown)"
        if self.unreadable:
            return "", f"{self.path} (its text cannot be read, so it is not shown)"
        return self.old_text or "", str(self.path) if self.old_text is not None else "/dev/null"


def _diffable(old: str, new: str, span: Span) -> bool:
    """Whether the lines `span` holds (with their context) are within DIFF_MAX_CHARS and
    DIFF_MAX_LINES: difflib runs on them (in a worker thread), in time and memory growing with
    both sides."""
    if span.old_end + span.new_end - 2 * span.start > DIFF_MAX_CHARS:  # checked unsplit
        return False
    old_lines = len(old[span.start:span.old_end].splitlines())
    return old_lines + len(new[span.start:span.new_end].splitlines()) <= DIFF_MAX_LINES


def _line_count(text: str) -> int:
    """Lines as an editor counts them, without splitting `text` (it may be 100 MB)."""
    return text.count("\n") + int(text != "" and not text.endswith("\n"))


def _path_arg(raw: object) -> str:
    """The path argument as the file system gets it from pi: each lone surrogate (half an
    emoji a model streamed) as U+FFFD, as Node turns a string into a path; messages that name
    the argument keep it as given."""
    if not isinstance(raw, str):
        raise ToolError("`path` must be a string")
    return well_formed(raw)


def _resolved(resolve: Callable[[str, Path], Path], raw: object, root: Path) -> Path:
    """`raw` resolved by `resolve`, refused in Node's words as pi's is: a file: URL Node does not
    take, a path holding a NUL byte (Python's words would be its own)."""
    try:
        path = resolve(_path_arg(raw), root)
        if "\0" in str(path):  # Node names the string it was given, half characters and all
            raise ToolError(null_byte_message(str(resolve(str(raw), root))))
    except FileUrlError as error:
        raise ToolError(str(error)) from None
    return path


@dataclass
class ToolContext:
    root: Path
    allow_outside_root: bool = False
    on_update: Callable[[str], None] = field(default=lambda _text: None)
    session_dirs: tuple[Path, ...] = ()  # configured session folders, never written
    approved: Proposal | None = None  # the change the user saw; only that may be written
    files: FileAccess = DISK
    key_variables: frozenset[str] = KEY_VARIABLES  # left out of bash's environment
    session_variables: dict[str, str] = field(default_factory=dict)  # SESSION_VARIABLES' values
    # Takes what a call cut short by an abort has to say (bash: the output so far, as pi 1.6
    # gives it; write and edit: what the write under way did); None: nobody records it.
    on_abort: Callable[[ToolResult], None] | None = None
    auto_resize_images: bool = True  # pi's `images.autoResize`
    # The event loop, when the context is a worker thread's (`off_loop`): `files` is read there.
    loop: asyncio.AbstractEventLoop | None = None

    def buffer_text(self, path: Path) -> str | None:
        """`files.buffer_text`, asked on the event loop from a worker thread: an editor's
        buffers change there (a didChange, a didOpen of another document)."""
        if self.loop is None:
            return self.files.buffer_text(path)
        return asyncio.run_coroutine_threadsafe(_buffer_text(self.files, path),
                                                self.loop).result()

    def given(self, raw: object) -> Path:
        """The path argument made absolute as pi makes it, symlinks not yet followed."""
        return _resolved(resolve_to_cwd, raw, self.root)

    def inside(self, path: Path) -> bool:
        return inside(path, Path(os.path.realpath(self.root)))

    def read_path(self, raw: object) -> Path:
        """The path `read` opens, as pi finds it, symlinks not yet followed."""
        return _resolved(resolve_read_path, raw, self.root)

    def readable(self, raw: object) -> Path:
        given = self.read_path(raw)
        if too_long(given):  # as pi's access fails, before any check folds its names
            raise ToolError(node_message(errno.ENAMETOOLONG, "access", given))
        reason = secret_reason(given)
        if reason is not None:
            raise Refused(f"{raw}: reading it is refused because {reason}")
        return Path(os.path.realpath(given))

    def editable(self, raw: object) -> Path:
        """`writable`, refusing secrets before anything reads them: edit's errors ("Could not
        find the exact text", "Found 2 occurrences") would tell the model what they hold."""
        path = self.writable(raw)
        reason = secret_reason(self.given(raw))
        if reason is not None:
            raise Refused(f"{raw}: editing it is refused because {reason}")
        return path

    def writable(self, raw: object) -> Path:
        given = self.given(raw)
        reason = protected_reason(given, self.root, self.session_dirs)
        if reason is not None:
            raise Refused(f"{raw}: writing it is refused because {reason}")
        failure = realpath_error(given)  # pi's first step, before it even reads
        if failure is not None:
            raise ToolError(failure)
        path = Path(os.path.realpath(given))
        if not self.allow_outside_root and not self.inside(path):
            raise Refused(f"{raw} is outside the workspace {os.path.realpath(self.root)}; "
                            "writing there is not allowed")
        return path

    def environment(self) -> dict[str, str]:
        """What bash runs with, as pi 1.6's: this process's environment without the API keys,
        with pi's bin folder on PATH and this session's PI_* variables."""
        env = {name: value for name, value in os.environ.items()
               if name not in self.key_variables and name not in SESSION_VARIABLES}
        env.update(self.session_variables)
        return with_pi_bin(env)


async def _buffer_text(files: FileAccess, path: Path) -> str | None:
    return files.buffer_text(path)


async def off_loop(work: Callable[[ToolContext], Worked], ctx: ToolContext) -> Worked:
    """`work(ctx)` in a worker thread, so the event loop goes on meanwhile (the editor's every
    request waits on it: 10,000 edits planned there held it 16 s); what it reads of the editor's
    buffers is read on the loop. Cancelled (an abort), the work stops at its next checkpoint."""
    worker_ctx = replace(ctx, loop=asyncio.get_running_loop())
    return await in_worker(lambda: work(worker_ctx))


def with_pi_bin(env: dict[str, str]) -> dict[str, str]:
    """`env` with pi's bin folder (where pi installs fd and rg) first on PATH unless already on
    it, as pi 1.6's getShellEnv."""
    key = next((name for name in env if name.lower() == "path"), "PATH")
    current = env.get(key, "")
    bin_dir = str(agent_dir() / "bin")
    if bin_dir not in current.split(os.pathsep):
        env[key] = os.pathsep.join(part for part in (bin_dir, current) if part)
    return env


Execute = Callable[[dict[str, Any], ToolContext], Awaitable[ToolResult]]


@dataclass(frozen=True)
class Tool:
    spec: ToolSpec
    execute: Execute
    snippet: str = ""  # its line in the system prompt's tool list (pi's promptSnippet)
    guidelines: tuple[str, ...] = ()  # its rules in the system prompt (pi's promptGuidelines)

    @property
    def name(self) -> str:
        return str(self.spec.name)  # the agent's own tools are named by text


def tool_arguments(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """A file tool's arguments as pi 1.6 reads them, coerced to its schema (a ToolError with
    pi's message when they do not fit); another tool's as they are."""
    spec = {tool.name: tool.spec for tool in (READ, WRITE, EDIT)}.get(name)
    if spec is None:
        return args
    try:
        return checked_arguments(name, spec.parameters,
                                 prepare_edit_arguments(args) if name == "edit" else args)
    except ArgumentsError as error:
        raise InvalidArguments(str(error)) from None


async def read_file(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    args = tool_arguments("read", args)
    raw = args["path"]
    path = ctx.readable(raw)
    shown = ctx.read_path(raw)  # as pi names it in its errors: resolved, links not followed
    offset, limit = args.get("offset"), args.get("limit")
    # The editor's text, when it is not the disk's: only this file's document is looked at
    # (open_texts compared each other open one with its file, on the event loop).
    unsaved = ctx.files.buffer_text(path)
    if unsaved is not None:
        return _text_page(lambda: iter([unsaved]), str(raw), offset, limit)
    # In a thread, a piece at a time: a 400 MB file neither stalls the loop nor fills memory.
    # A call cancelled (an abort) stops the thread at its next piece.
    stop = threading.Event()
    try:
        return await asyncio.to_thread(_disk_read, path, shown, str(raw), offset, limit, stop,
                                       ctx.auto_resize_images)
    finally:
        stop.set()


def _text_page(pieces: Callable[[], Iterator[str]], raw: str, offset: float | None,
               limit: float | None) -> ToolResult:
    try:
        text, details = page(pieces, raw, offset, limit)
    except PageError as error:
        raise ToolError(str(error)) from None
    return text_result(text, details)


def _disk_read(path: Path, shown: Path, raw: str, offset: float | None, limit: float | None,
               stop: threading.Event, auto_resize: bool) -> ToolResult:
    """What `read` shows of a file on disk: the image its bytes start, else its text (up to
    where `stop` was set)."""
    try:
        file = open_regular(path)
    except OSError as error:  # as pi's access(R_OK) fails first: EACCES, ELOOP, ENAMETOOLONG
        raise ToolError(node_message(error.errno or errno.EIO, "access", shown)) from None
    if file is None:
        raise ToolError(_unread_reason(path, shown))
    with file:
        head = file.read(SNIFF_BYTES)
        mime = image_type(head)
        if mime is None:
            return _text_page(_text_pieces(head, file, stop), raw, offset, limit)
        return _image_result(file, mime, auto_resize)


def _image_result(file: IO[bytes], mime: str, auto_resize: bool) -> ToolResult:
    """pi's answer for an image: the note on what it sends and the image (brought within the
    model's limits), or why it left the image out."""
    try:
        sent = process_image(file, mime, auto_resize=auto_resize)
    except ImageOmitted as omitted:
        return text_result(f"Read image file [{mime}]\n{omitted}")
    note = "\n".join([f"Read image file [{sent.mime_type}]", *sent.hints])
    return ToolResult([TextContent(text=note),
                       ImageContent(data=sent.data, mime_type=sent.mime_type)])


def _unread_reason(path: Path, shown: Path) -> str:
    """pi's error for a path that is no regular file: a FIFO or a device reads as missing."""
    try:
        is_folder = stat.S_ISDIR(os.stat(path).st_mode)
    except NotADirectoryError:
        return node_message(errno.ENOTDIR, "access", shown)
    except FileNotFoundError:
        is_folder = False
    if is_folder:
        return node_message(errno.EISDIR, "read")
    return node_message(errno.ENOENT, "access", shown)


def _text_pieces(head: bytes, file: IO[bytes], stop: threading.Event
                 ) -> Callable[[], Iterator[str]]:
    """The file's UTF-8 text a piece at a time, from its start (`head`, then the rest), bad
    bytes replaced as Node replaces them; each call reads it again."""
    passes = 0

    def pieces() -> Iterator[str]:
        nonlocal passes
        if passes:
            file.seek(len(head))
        passes += 1
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        chunk = head
        while chunk:
            yield decoder.decode(chunk)
            chunk = b"" if stop.is_set() else file.read(READ_CHUNK)
        yield decoder.decode(b"", final=True)
    return pieces


def _current_text(path: Path, ctx: ToolContext) -> tuple[str | None, bool]:
    """The file as the editor has it (else the disk), and whether it is not UTF-8 (read
    replaced)."""
    buffer = ctx.buffer_text(path)
    return _disk_text_of(path) if buffer is None else (buffer, False)


def _disk_text_of(path: Path) -> tuple[str | None, bool]:
    """The file's text on disk, and whether it is not UTF-8 (read replaced)."""
    try:
        return disk_text(path), False
    except UnicodeDecodeError:
        return disk_text(path, "replace"), True


def undecodable(path: Path) -> Undecodable | None:
    """What of a file is not UTF-8 (None when it is gone), read a chunk at a time with a
    checkpoint between: an abort stops it (a read of 100 MB whole, 4 s, ran on to its end)."""
    file = open_regular(path)
    if file is None:
        return None
    decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")  # bad byte: a surrogate
    bad_bytes = bad_lines = 0
    counted = False  # whether the line the last chunk ended in is counted already
    with file:
        while True:
            checkpoint()
            chunk = file.read(READ_CHUNK)
            found_bytes, found_lines, counted = _bad_in(
                decoder.decode(chunk, final=not chunk), counted)
            bad_bytes, bad_lines = bad_bytes + found_bytes, bad_lines + found_lines
            if not chunk:
                return Undecodable(bad_bytes, bad_lines)


def _bad_in(text: str, counted: bool) -> tuple[int, int, bool]:
    """The bad bytes (surrogates) in a piece of a file and the lines holding them not counted
    yet (`counted`: the line the piece starts in is), and whether its last line is counted."""
    if not SURROGATE.search(text):
        return 0, 0, counted and "\n" not in text
    bad_bytes = bad_lines = 0
    for index, line in enumerate(text.split("\n")):
        counted = counted and index == 0
        found = len(SURROGATE.findall(line))
        bad_bytes += found
        if found and not counted:
            bad_lines, counted = bad_lines + 1, True
    return bad_bytes, bad_lines, counted


def _refuse_unmade_folders(given: Path) -> None:
    """A ToolError, in pi 1.6's words, when its mkdir -p of the folders `given` needs would
    fail: a file is in their way, or a symlink leads into a folder that does not exist (pi
    makes the missing folders it names, never a link's target, and fails with nothing made)."""
    # The deepest folder on the way that is there as a name; those below it pi makes.
    folder = next(part for part in (given.parent, *given.parent.parents) if os.path.lexists(part))
    failure = _stat_error(folder)
    if failure == errno.ENOENT:  # a dangling symlink
        code = errno.ENOENT if folder == given.parent else errno.ENOTDIR
        raise ToolError(f"{node_message(code, 'mkdir', folder)}: {folder} is a symlink to "
                        f"{os.path.realpath(folder)}, which does not exist; nothing was written.")
    if failure is not None or not os.path.isdir(folder):
        # A file: Node's mkdir meets it where it names given.parent. A symlink through a file
        # cannot be followed: Node's stat of it fails (ENOTDIR), and so its mkdir.
        code = errno.EEXIST if folder == given.parent else errno.ENOTDIR
        raise ToolError(node_message(failure or code, "mkdir", given.parent))
    target = Path(os.path.realpath(given))
    if os.path.islink(given) and _stat_error(target.parent) == errno.ENOENT:
        raise ToolError(f"{node_message(errno.ENOENT, 'open', given)}: {given} is a symlink to "
                        f"{target}, whose folder {target.parent} does not exist; nothing was "
                        "written.")


def _stat_error(path: Path) -> int | None:
    """The error `path`'s stat fails with, its links followed (ENOENT: it is missing, or a link
    dangles; ENOTDIR: a link runs through a file), or None."""
    try:
        os.stat(path)
    except OSError as error:
        return error.errno
    return None


def _refuse_special(path: Path, raw: str, ctx: ToolContext) -> None:
    """A ToolError when `path` is there but no regular file: a folder fails as pi's write
    fails on it; writing a FIFO waits for a reader, and a device is no file to change."""
    try:
        kind = file_kind(os.stat(path).st_mode)
    except FileNotFoundError:
        return
    except NotADirectoryError:  # a symlink through a file: opening it fails, named as given
        raise ToolError(node_message(errno.ENOTDIR, "open", ctx.given(raw))) from None
    if kind == "folder":
        raise ToolError(node_message(errno.EISDIR, "open", ctx.given(raw)))
    if kind != "regular file":
        raise ToolError(f"Could not write {raw}: it is a {kind}, not a regular file; only "
                        "regular files are written.")


def _unread_identity(path: Path) -> tuple[int, ...] | None:
    """What tells a file that cannot be read from itself changed or replaced: its device, inode,
    size, mtime and ctime (the last two as fine as the file system keeps them); None if gone."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns


def _refuse_too_long(given: Path, written: str) -> None:
    """A ToolError when `given` is too long for any system call, in the words of the first that
    pi's write or edit makes on it (realpath, else what `written` names); the checks of secrets
    and protected folders, which fold each name, would take 35 s for a path of 10 MB."""
    if too_long(given):
        raise ToolError(realpath_error(given) or written)


def propose_write(args: dict[str, Any], ctx: ToolContext) -> Proposal:
    args = tool_arguments("write", args)
    given = ctx.given(args["path"])
    # pi's mkdir -p of the file's folder fails first, else its open of the file
    _refuse_too_long(given, node_message(errno.ENAMETOOLONG, "mkdir", given.parent)
                     if too_long(given.parent) else
                     node_message(errno.ENAMETOOLONG, "open", given))
    path = ctx.writable(args["path"])
    _refuse_unmade_folders(ctx.given(args["path"]))
    _refuse_special(path, args["path"], ctx)
    content = args["content"]
    secret = secret_reason(ctx.given(args["path"])) is not None
    try:
        old_text = _current_text(path, ctx)[0]
    except PermissionError:  # written, not read, as pi writes it: only the diff goes without
        return Proposal(path, "", well_formed(content), secret=secret, unreadable=True,
                        identity=_unread_identity(path))
    return Proposal(path, old_text, well_formed(content), secret=secret)


def propose_edit(args: dict[str, Any], ctx: ToolContext) -> Proposal:
    return _planned_edit(args, ctx)[0]


def _planned_edit(args: dict[str, Any], ctx: ToolContext) -> tuple[Proposal, EditPlan]:
    """The change an edit makes, and how: the replacements its diff shows."""
    args = tool_arguments("edit", args)
    if not args["edits"]:
        raise ToolError("Edit tool input is invalid. edits must contain at least one "
                        "replacement.")
    _refuse_too_long(ctx.given(args["path"]), f"Could not edit file: {args['path']}. Error "
                     f"code: {error_code(errno.ENAMETOOLONG)}.")  # pi's access fails
    path = ctx.editable(args["path"])
    before, not_utf8 = _edited_text(path, args["path"], ctx)
    plan = _edit_plan(before, args)
    return Proposal(path, before, well_formed(plan.text), not_utf8), plan


def _edited_text(path: Path, raw: str, ctx: ToolContext) -> tuple[str, bool]:
    """The text `edit` changes (bad UTF-8 replaced, as pi reads it) and whether it is not
    UTF-8; pi's errors when there is none (a FIFO or device is a missing file, as for read)."""
    # pi asks for read and write access first: a file it could read but not write is refused.
    # One missing from the disk may be an editor's buffer not saved yet.
    code = _access_error(path)
    if code not in (None, errno.ENOENT, errno.ENOTDIR):
        raise ToolError(f"Could not edit file: {raw}. Error code: {error_code(code)}.")
    text, not_utf8 = _current_text(path, ctx)
    if text is not None:
        return text, not_utf8
    if os.path.isdir(path):
        raise ToolError(node_message(errno.EISDIR, "read"))
    raise ToolError(f"Could not edit file: {raw}. Error code: {error_code(code or errno.ENOENT)}.")


def _access_error(path: Path) -> int | None:
    """The error pi's access(path, R_OK | W_OK) fails with (ENOENT, ENOTDIR, EACCES), or None."""
    try:
        os.stat(path)
    except OSError as error:
        return error.errno
    return None if os.access(path, os.R_OK | os.W_OK) else errno.EACCES


def _edit_plan(before: str, args: dict[str, Any]) -> EditPlan:
    try:
        return plan_edit(before, args["edits"], args["path"])
    except EditError as error:
        raise ToolError(str(error)) from None


PROPOSERS: dict[str, Callable[[dict[str, Any], ToolContext], Proposal]] = {
    "write": propose_write, "edit": propose_edit}


def propose_change(name: str, args: dict[str, Any], ctx: ToolContext) -> Proposal | None:
    """The change a `write` or `edit` call would make, computed without writing anything; None
    for tools that change no file. A call that would fail raises its ToolError here."""
    propose = PROPOSERS.get(name)
    return propose(args, ctx) if propose is not None else None


def _check_approved(change: Proposal, name: str, args: dict[str, Any], ctx: ToolContext
                    ) -> None:
    """Refuse the change to make now if it is no longer the one the user approved."""
    if ctx.approved is not None and ctx.approved != change:
        # (A file the model cannot read is not to be read again: the write is asked anew.)
        again = "" if change.unreadable else " Read it again."
        raise ToolError(f"{args['path']} changed while the {name} waited for approval; "
                        f"nothing was written.{again}")


async def write_file(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    change, on_disk = await off_loop(functools.partial(_proposed_and_read, args), ctx)
    if not _unchanged(change, on_disk, ctx):
        # as for an edit: nothing changes until the write
        change, on_disk = propose_write(args, ctx), None
    _check_approved(change, "write", args, ctx)
    raw = tool_arguments("write", args)["path"]
    return await _written(change, _seen(change, on_disk), ctx, ctx.given(raw), text_result(
        f"Successfully wrote to {raw}"))


async def edit_file(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    change, raw, result, on_disk = await off_loop(functools.partial(_edited_and_read, args),
                                                  ctx)
    if not _unchanged(change, on_disk, ctx):
        # The user typed (a didChange) while the worker planned: the plan would write over
        # the newer text. Planned again on the loop, where nothing changes until the write.
        (change, raw, result), on_disk = _edited(args, ctx), None
    return await _written(change, _seen(change, on_disk), ctx, ctx.given(raw), result)


class DiskText(msgspec.Struct, frozen=True):
    """A file's text as the disk had it (None: no such file), and its stat before the read
    (`_disk_stat`)."""

    text: str | None
    stat: tuple[int, ...]
    settled: bool  # whether the stat tells the file's next change (regular.settled)


def _proposed_and_read(args: dict[str, Any], ctx: ToolContext
                       ) -> tuple[Proposal, DiskText | None]:
    """`propose_write`, and the file's disk text read again once worked out."""
    change = propose_write(args, ctx)
    return change, _read_again(change, ctx)


def _edited_and_read(args: dict[str, Any], ctx: ToolContext
                     ) -> tuple[Proposal, str, ToolResult, DiskText | None]:
    """`_edited`, and the file's disk text read again once planned."""
    change, raw, result = _edited(args, ctx)
    return change, raw, result, _read_again(change, ctx)


def _read_again(change: Proposal, ctx: ToolContext) -> DiskText | None:
    """The file's disk text, read in the worker once `change` was worked out; None when the
    editor has it unsaved (the loop compares its buffer) or it cannot be read (the loop works
    the change out again, failing as it would)."""
    if change.unreadable or ctx.buffer_text(change.path) is not None:
        return None
    try:
        stat, firm = _disk_stat(change.path)  # before the read: a change after it makes another
        return DiskText(_disk_text_of(change.path)[0], stat, firm)
    except OSError:
        return None


def _disk_stat(path: Path) -> tuple[tuple[int, ...], bool]:
    """What tells the file's versions apart (regular.stat_key; () where there is no file), and
    whether it tells the next: not where the file changed too lately."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return (), True
    return stat_key(info), settled(info)


def _unchanged(change: Proposal, on_disk: DiskText | None, ctx: ToolContext) -> bool:
    """Whether the file is still the text `change` was worked out from, told on the loop,
    where the user types: the editor's buffer, else the disk as read again in the worker (a
    read here of 50 MB stalled every editor request), as long as its stat is still the one
    before that read (a save the loop took after it: the user's typing, saved). Where that
    stat cannot tell a later change, the write's own check reads the file (`disk_holds`). The
    same text makes the same change, however its bytes that are not UTF-8 read."""
    buffer = ctx.buffer_text(change.path)
    if buffer is not None:
        return buffer == change.old_text
    if on_disk is None or on_disk.text != change.old_text:
        return False
    try:
        return _disk_stat(change.path)[0] == on_disk.stat
    except OSError:
        return False


def _seen(change: Proposal, on_disk: DiskText | None) -> tuple[int, ...] | None:
    """A stat at which the file held the change's old text, for the write to tell it unchanged
    by without reading it again: the settled one of the worker's read, or, for a file that
    cannot be read, its identity; None where none is known (the file is read again)."""
    if change.unreadable:
        return change.identity
    if on_disk is None or not on_disk.settled or on_disk.text != change.old_text:
        return None
    return on_disk.stat


def _edited(args: dict[str, Any], ctx: ToolContext) -> tuple[Proposal, str, ToolResult]:
    """The change an edit makes (the one approved), its path argument, and its result once
    written."""
    change, plan = _planned_edit(args, ctx)
    _check_approved(change, "edit", args, ctx)
    args = tool_arguments("edit", args)
    # The diff first, as pi makes it: it cannot fail once the file is written.
    diff = edit_diff(args["path"], plan.base, plan.new, plan.replacements)
    details: dict[str, Any] = {"diff": diff.diff, "patch": diff.patch}
    if diff.first_changed is not None:
        details["firstChangedLine"] = diff.first_changed
    return change, args["path"], text_result(
        f"Successfully replaced {len(args['edits'])} block(s) in {args['path']}.", details)


async def _written(change: Proposal, seen: tuple[int, ...] | None, ctx: ToolContext,
                   given: Path, result: ToolResult) -> ToolResult:
    """`result` once `change` is written to the file named `given` (`seen`: as `_seen`); a
    failure in Node's words.
    An abort does not stop a write under way (a thread, or the editor's applyEdit): the call
    waits for it a while and hands ctx.on_abort what it did, so the model never reads
    "aborted" for a file that was changed."""
    writing = asyncio.ensure_future(ctx.files.write_text(change.path, change.new_text,
                                                         change.old_text, seen))
    try:
        await asyncio.shield(writing)
    except SyscallError as error:
        named = _named_by_pi(error, change.path, given)
        raise ToolError(node_message(error.errno or errno.EIO, error.syscall, named)) from None
    except asyncio.CancelledError:
        outcome: ToolResult | None = result
        ended = await _ended_despite_cancels(writing, ABORTED_WRITE_WAIT_S)
        if not ended:
            writing.add_done_callback(_given_up)
        # Not ended, or cut (the server ending stops waiting on the editor): nobody knows.
        if not ended or writing.cancelled():
            outcome = thrown_result(f"Aborted while {change.path} was being written: it may "
                                    "have changed. Read it before changing it again.")
        elif writing.exception() is not None:
            outcome = None  # the write failed: the abort's own words stand
        if outcome is not None and ctx.on_abort is not None:
            ctx.on_abort(outcome)
        raise
    return result


def _named_by_pi(error: SyscallError, real: Path, given: Path) -> Path | None:
    """The path pi names for a failed write to `real` (`given` as pi names it): the file for
    `open`, for `mkdir` the folder it failed at (the folders not made yet, below it, are named
    alike on both paths), none for a `write` to the open file."""
    if error.syscall == "open":
        return given
    if error.syscall != "mkdir" or error.filename is None:
        return None
    failed = Path(error.filename)
    kept = len(given.parent.parts) - (len(real.parent.parts) - len(failed.parts))
    # Past the given path's own folders only if a folder changed meanwhile: named as it is.
    return Path(*given.parent.parts[:kept]) if 0 < kept <= len(given.parent.parts) else failed


def _given_up(writing: asyncio.Future[Any]) -> None:
    """A write no call waits for any more ended: its failure is logged quietly, not by asyncio
    as a task exception never retrieved, with a traceback."""
    if not writing.cancelled() and (error := writing.exception()) is not None:
        log.info("a write an abort stopped waiting for failed: %s", error)


async def _ended_despite_cancels(task: asyncio.Future[Any], timeout: float) -> bool:
    """Whether `task` ends within `timeout` s; a further abort (the user pressing Esc again)
    cancels this wait too, and must not drop what the write did, so it waits on."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not task.done():
        left = deadline - asyncio.get_running_loop().time()
        if left <= 0:
            return False
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait([task], timeout=left)
    return True


async def run_bash(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    command, timeout = _bash_arguments(args)
    if not ctx.root.exists():
        raise ToolError(f"Working directory does not exist: {ctx.root}\n"
                        "Cannot execute bash commands.")
    output = OutputTail()
    updates = Throttled(lambda: ctx.on_update(output.tail()[0]), UPDATE_INTERVAL_S)

    def take(chunk: bytes) -> None:
        output.write(chunk)
        updates()

    try:
        # The start too: an abort while it runs (its shell may be running already) is the
        # command's, as pi 1.6 says for an abort at any point once bash has begun.
        shell = await ShellProcess.start(command, ctx.root, ctx.environment())
        status = await _run_shell(shell, timeout, take)
    except asyncio.CancelledError:
        text = output.result_text("")[0]
        _aborted(ctx, output, thrown_result(_with_status(text, "Command aborted")))
        raise
    except WatcherDied as died:  # what the command printed before is kept, as for a timeout
        text = output.result_text("")[0]
        return thrown_result(_with_status(text, f"bash failed: {died}"))
    except BaseException:
        output.discard()  # failed: no result will name the full output
        raise
    finally:
        updates.cancel()
        output.close()
    if status is None:
        text = output.result_text("")[0]
        return thrown_result(_with_status(text, _timed_out(timeout, shell)))
    text, details = output.result_text()
    if status:
        return text_result(_with_status(text, f"Command exited with code {status}"), details, True)
    return text_result(text, details)


async def _run_shell(shell: ShellProcess, timeout: float | None,
                     take: Callable[[bytes], None]) -> int | None:
    """The shell's exit status, None when `timeout` ran out first. What the command left in the
    background runs on when it ended normally (as in pi 1.6); else all it started is killed."""
    status = None
    try:
        status = await asyncio.wait_for(shell.read_until_done(take), timeout)
    except TimeoutError:
        pass
    finally:
        await shell.close(release=status is not None)
    return status


def _aborted(ctx: ToolContext, output: OutputTail, result: ToolResult) -> None:
    """Hand an aborted command's result to whoever records it; with nobody to, drop its file."""
    if ctx.on_abort is None:
        output.discard()
    else:
        ctx.on_abort(result)


def _with_status(text: str, status: str) -> str:
    return f"{text}\n\n{status}" if text else status


def _timed_out(timeout: float | None, shell: ShellProcess) -> str:
    """pi 1.6's words for a timeout, saying so when the shell had exited but background jobs
    still wrote."""
    message = f"Command timed out after {js_number(float(timeout or 0))} seconds"
    if shell.exited_after is None:
        return message
    tenths = math.floor(shell.exited_after * 10 + 0.5) / 10  # JavaScript's Math.round
    return (f"{message}. The shell exited with code {shell.status} after {js_number(tenths)} "
            "seconds, but background processes it started kept writing output until the "
            "timeout.")


def _bash_arguments(args: dict[str, Any]) -> tuple[str, float | None]:
    """The command and the timeout in seconds (None: none) bash runs with."""
    command, timeout = bash_schema_arguments(args)
    return command, _bash_timeout(timeout)


def bash_schema_arguments(args: dict[str, Any]) -> tuple[str, float | None]:
    """The command and timeout coerced and checked as pi 1.6's schema does it, every misfit
    listed in its words, but for the command, which must be a string (pi runs `5` for 5;
    pi-lsp runs no command but the one shown for approval)."""
    value, errors = coerced_arguments(BASH.spec.parameters, args)
    command = args.get("command")
    if not isinstance(command, str):
        problem = "missing" if "command" not in args else \
            f"expected string, got {js_type(javascript_numbers(command))}"
        errors = [("command", problem), *(error for error in errors if error[0] != "command")]
    if errors or not isinstance(command, str):
        raise InvalidArguments(str(invalid_arguments("bash", errors, javascript_numbers(args))))
    # As the shell gets it from pi: each lone surrogate as U+FFFD.
    return well_formed(command), value.get("timeout")


def _bash_timeout(timeout: float | None) -> float | None:
    """The timeout pi 1.6's schema let through ("2", true and 0.5 are numbers), if it is one
    pi runs: zero or less is refused. pi-lsp refuses more than a day too."""
    if timeout is None:
        return None
    if timeout <= 0:
        raise ToolError("Invalid timeout: must be a finite number of seconds")
    refuse_long_timeout(timeout)
    return timeout


def refuse_long_timeout(timeout: float | None) -> None:
    """Refused before anything runs: asyncio fails on a huge timeout once the command started."""
    if timeout is not None and timeout > BASH_TIMEOUT_MAX_S:
        raise Refused(f"`timeout` must be at most {BASH_TIMEOUT_MAX_S} seconds (24 hours)")


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    # pi's order (TypeBox's): declarations are compared by their JSON text
    return {"type": "object", "required": required, "properties": properties}


# As pi 1.6 declares its built-in tools: strict where the model supports it, else as they are.
PREFER_STRICT = {"type": "json_schema", "strict": "prefer"}


READ = Tool(ToolSpec(
    "read", "Read the contents of a file. Supports text files and images (jpg, png, gif, webp, "
    "bmp). Images are sent as attachments. For text files, output is truncated to 2000 lines or "
    "50KB (whichever is hit first). Use offset/limit for large files. When you need the full "
    "file, continue with offset until complete.", _schema({
        "path": {"type": "string",
                 "description": "Path to the file to read (relative or absolute)"},
        "offset": {"type": "number",
                   "description": "Line number to start reading from (1-indexed)"},
        "limit": {"type": "number", "description": "Maximum number of lines to read"},
    }, ["path"]), PREFER_STRICT), read_file, "Read file contents",
    ("Use read to examine files instead of cat or sed.",))
WRITE = Tool(ToolSpec(
    "write", "Write content to a file. Creates the file if it doesn't exist, overwrites if it "
    "does. Automatically creates parent directories.", _schema({
        "path": {"type": "string",
                 "description": "Path to the file to write (relative or absolute)"},
        "content": {"type": "string", "description": "Content to write to the file"},
    }, ["path", "content"]), PREFER_STRICT), write_file, "Create or overwrite files",
    ("Use write only for new files or complete rewrites.",))
EDIT = Tool(ToolSpec(
    "edit", "Edit a single file using exact text replacement. Every edits[].oldText must match a "
    "unique, non-overlapping region of the original file. If two changes affect the same block "
    "or nearby lines, merge them into one edit instead of emitting overlapping edits. Do not "
    "include large unchanged regions just to connect distant changes.", _schema({
        "path": {"type": "string",
                 "description": "Path to the file to edit (relative or absolute)"},
        "edits": {"type": "array", "items": _schema({
            "oldText": {"type": "string", "description": (
                "Exact text for one targeted replacement. It must be unique in the original "
                "file and must not overlap with any other edits[].oldText in the same call.")},
            "newText": {"type": "string",
                        "description": "Replacement text for this targeted edit."},
        }, ["oldText", "newText"]), "description": (
            "One or more targeted replacements. Each edit is matched against the original "
            "file, not incrementally. Do not include overlapping or nested edits. If two changes "
            "touch the same block or nearby lines, merge them into one edit instead.")},
    }, ["path", "edits"]), PREFER_STRICT), edit_file, "Make precise file edits with exact text "
    "replacement, including multiple disjoint edits in one call", (
        "Use edit for targeted changes. Batch changes to one file in a single call.",
        "Each edits[].oldText must exactly and uniquely match the original file. Keep matches "
        "short and non-overlapping; merge nearby changes without including large unchanged "
        "regions."))
BASH = Tool(ToolSpec("bash", "Execute a bash command in the current working directory. Returns "
                     "stdout and stderr. Output is truncated to last 2000 lines or 50KB "
                     "(whichever is hit first). If truncated, full output is saved to a temp "
                     "file. Optionally provide a timeout in seconds.", _schema({
                         "command": {"type": "string", "description": "Shell command to execute"},
                         "timeout": {"type": "number", "description": "Timeout in seconds "
                                     "(optional, no default timeout)"},
                     }, ["command"]), PREFER_STRICT), run_bash,
            "Execute bash commands (ls, grep, find, etc.)",
            ("You can inspect PI_* environment variables for current model and session "
             "details.",))
# pi 1.6's default tools in its order, which its prompt's tool list and rules follow
ALL_TOOLS: tuple[Tool, ...] = (READ, BASH, EDIT, WRITE)


async def execute_tool(tool: Tool | None, name: str, args: dict[str, Any],
                       ctx: ToolContext) -> ToolResult:
    """Run a tool; any failure comes back as an error result the model can read."""
    if tool is None:
        return unrun_result(f"Tool {name} not found")
    try:
        return await tool.execute(args, ctx)
    except InvalidArguments as error:
        return unrun_result(str(error))
    except ToolError as error:
        return thrown_result(str(error))
    except (OSError, UnicodeError, ValueError) as error:
        return thrown_result(f"{name} failed: {error}")
    except Exception as error:  # a bug, or a case not foreseen: still the call's result
        log.exception("the %s tool failed", name)
        return thrown_result(f"{name} failed: {type(error).__name__}: {error}")
