"""Snapshots of a workspace's files in a git store of pi-lsp's own, outside the workspace.

The store is in the user's state folder (`$XDG_STATE_HOME/pi-lsp/snapshots/<key>/`, by default
under `~/.local/state`), keyed by the workspace's real path: its own git directory and index,
used with `--work-tree=ROOT`, so the user's `.git`, index and stash are never touched. Nothing in
the workspace changes how git runs there: no hooks, no system or global config, no attributes,
filters, textconv or fsmonitor, and every id is checked to be an object id before git sees it.
It leaves out what the user's own git ignores (`.gitignore` files, the repository's
`.git/info/exclude`, the user's `core.excludesFile`, read apart from any config git runs with)
and always `.git/` and `.pi/`; a file ignored now is never in a snapshot, though an earlier one
held it, and each snapshot's tree is logged with the ignored files it left out (see
`IgnoredLog`), which a restore never touches. A snapshot may take some files' content from
elsewhere than the disk (an editor's unsaved buffers).
It compares with, reads and restores only the root trees its own snapshots recorded (see
`recorded`): a session names trees by id, and a committed session is hostile.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import io
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import Literal

import msgspec

from pi_lsp.environment import on_path
from pi_lsp.files.recorded import UNBORN, UNLOGGED, IgnoredLog, TreeLog, root_trees
from pi_lsp.finish import Overran, Stuck, run_to_end
from pi_lsp.paths import real_path
from pi_lsp.regular import read_regular

LEGACY_DIR = Path(".pi") / "snapshots"  # where pi-lsp kept its store before; never run on
MAX_FILE_BYTES = 5 * 1024 * 1024  # larger files are left out of snapshots, and say so
MAX_DIFF_CHARS = 100_000  # per file, in what fileChanges returns
# The store's index lock may be held by a git that is not pi-lsp's (run by hand, or an older
# pi-lsp's): it is tried again this often, and deleted once older than GIT_BUDGET_S (a killed
# git's). pi-lsps on one workspace take turns by STORE_LOCK.
LOCK_RETRIES = 40
LOCK_WAIT_S = 0.05
# One git run, stopped past it: a committed `.gitignore` of many `**/` over deep folders keeps
# git matching for ever, holding the turn and the store's lock. The first snapshot of 50,000
# files (200 MB) took 8.8 s, 7.8 s of it one `git add`, on 2 cores at a load of 7.6: this is
# about 40 times that, some 7 GB of files to read and compress in one run.
GIT_BUDGET_S = 300.0
# In a store: the file every process using the store holds an exclusive flock on, so two
# editors' pi-lsps on one workspace take turns. Without it the other's 7 s `git add` (60,000
# files) outlasted the index lock's ~2 s of retries: snapshots failed, a restore stopped after
# its deletes, and two first snapshots both made the store (5 of 10 failed).
STORE_LOCK = "pi-lsp-lock"
STORE_LOCK_POLL_S = 0.05
# The longest wait for another process's turn on the store: each of its git runs stops at
# GIT_BUDGET_S, so one holding it longer is stopped itself (a debugger, SIGSTOP), not busy.
STORE_WAIT_S = GIT_BUDGET_S
OBJECT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
HEAD = re.compile(r"(?:ref: refs/\S+|[0-9a-f]{40}|[0-9a-f]{64})\n?")  # what git reads in HEAD
NO_REF = "its HEAD file names no ref"
# A path with one of these parts is never snapshot or restored (case-insensitively).
PRIVATE_PARTS = frozenset({".git", ".pi"})
# Pathspecs leaving those paths out, whatever a `.gitignore` says (one outranks the store's
# info/exclude, and `!.pi` there let the session files in; git refuses a `.GIT` folder's files).
NOT_PRIVATE = tuple(f":(exclude,glob,icase)**/{part}{rest}" for part in sorted(PRIVATE_PARTS)
                    for rest in ("", "/**"))
# For every file, whatever `.gitattributes` says (its macros included: this file outranks it
# attribute by attribute): no filter or textconv driver, no line-ending or encoding conversion,
# no keyword expansion. `-text` it must be: with text unspecified git reads the legacy `crlf`
# (`* crlf` is `text`), then core.autocrlf; `-text` also makes git ignore `eol`. (`-diff` would
# make every file binary to diff; `!diff` leaves git's own text detection.)
ATTRIBUTES = ("* -text !crlf !eol !filter !diff !merge !working-tree-encoding !ident "
              "!export-subst\n")
# Settings that keep git from starting anything or changing what it reads and writes.
GIT_SETTINGS = ("core.hooksPath=/dev/null", "core.fsmonitor=false", "core.attributesFile=/dev/null",
                "core.quotePath=false", "core.autocrlf=false", "core.safecrlf=false",
                "core.untrackedCache=false")
EXCLUDES_LIMIT = 1 << 20  # of a workspace's .git/info/exclude read into the store's
ADOPTED = "pi-lsp-adopted"  # in a store: the user was told of the legacy store (once)
# The object files of a legacy store looked at, past which none is copied: a real one holds a
# few hundred MB at most, and a repository could commit one that fills the disk. It was never
# packed: one snapshot of a 100,000-file workspace is that many object files (4 MB).
LEGACY_MAX_BYTES = 1 << 30
LEGACY_MAX_FILES = 1_000_000

GITLINK = "160000"  # the mode of a nested repository in a tree
SYMLINK = "120000"
REGULAR_MODES = ("100644", "100755")
NO_FILE = "000000"  # a raw diff's mode of a path that one side lacks
Status = Literal["added", "modified", "deleted"]
_STATUS: dict[str, Status] = {"A": "added", "M": "modified", "D": "deleted", "T": "modified"}


def state_home() -> Path:
    configured = os.environ.get("XDG_STATE_HOME", "")
    # The XDG spec: a relative path is invalid and ignored.
    return Path(configured) if os.path.isabs(configured) else Path.home() / ".local" / "state"


def store_dir(root: Path) -> Path:
    """The store of a workspace: named for its folder, keyed by its real path."""
    real = os.path.realpath(root)
    name = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.basename(real))[:40] or "root"
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:16]
    return state_home() / "pi-lsp" / "snapshots" / f"{name}-{digest}"


class SnapshotError(Exception):
    """The store cannot do what was asked (git missing, or git failed)."""


class Snapshot(msgspec.Struct, frozen=True):
    tree: str  # a git tree id in the store
    skipped: list[str] = msgspec.field(default_factory=list)  # too large to keep


class FileChange(msgspec.Struct, rename="camel"):
    """One file a restore would change: `added` comes back, `deleted` goes, `modified` changes."""

    path: str
    status: Status
    diff: str


class ChangedMeanwhile(SnapshotError):
    """A restore's check found `paths` changed by another program since its undo snapshot."""

    def __init__(self, message: str, paths: list[str]) -> None:
        super().__init__(message)
        self.paths = paths


class RestoreProgress(msgspec.Struct):
    """What a restore has changed so far, for a failure part-way to name."""

    changed: list[str] = msgspec.field(default_factory=list)
    # Handed to git, which may have written some before it failed (it does not say which).
    writing: list[str] = msgspec.field(default_factory=list)
    # Told once, as the first change is about to be made, the checks passed (the CLI's undo id).
    on_begin: Callable[[], object] | None = None

    def begin(self) -> None:
        """The first change is about to be made: tell `on_begin`, once."""
        on_begin, self.on_begin = self.on_begin, None
        if on_begin is not None:
            on_begin()


class SnapshotStore:
    """One workspace's snapshots; one instance per workspace per process (see `store_for`)."""

    def __init__(self, root: Path) -> None:
        self.root = real_path(root)
        self.git_dir = store_dir(self.root)
        self.git = on_path("git")
        self.log = TreeLog(self.git_dir)
        self.ignored = IgnoredLog(self.git_dir)
        self.unborn = IgnoredLog(self.git_dir, UNBORN)  # nested repositories left out
        self._lock = asyncio.Lock()  # this process's tasks; STORE_LOCK, other processes
        self._excludes_file: str | None = None  # the user's git's, looked up at first snapshot
        self.waiting = False  # for another process's turn on the store (see `holder`)
        # The workspace's legacy store, once a trusted folder offered it (`adopt_legacy`).
        self.legacy: Path | None = None

    @property
    def unavailable_reason(self) -> str | None:
        if self.git is None:
            return "file snapshots need git, and git is not on PATH"
        return None

    def exists(self) -> bool:
        return (self.git_dir / "HEAD").is_file()

    # -- running git ---------------------------------------------------------------------

    async def _run(self, *args: str, stdin: bytes | None = None, literal: bool = True,
                   store: bool = True, ok: tuple[int, ...] = (0,),
                   alternate: Path | None = None) -> bytes:
        reason = self.unavailable_reason
        if reason is not None or self.git is None:
            raise SnapshotError(reason)
        # Inherited GIT_* variables (from a hook, say) must not redirect us at the user's repo,
        # and no config but the store's own applies.
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull,
                   GIT_TERMINAL_PROMPT="0", GIT_LITERAL_PATHSPECS="1" if literal else "0")
        if alternate is not None:  # objects read there too (a legacy store's, copied)
            env["GIT_ALTERNATE_OBJECT_DIRECTORIES"] = str(alternate)
        where = [f"--git-dir={self.git_dir}", f"--work-tree={self.root}"] if store else []
        settings = [*GIT_SETTINGS, *([f"core.excludesFile={self._excludes_file}"]
                                     if self._excludes_file else [])]
        command = [self.git, *where, *(f for s in settings for f in ("-c", s)), *args]
        stuck = (f"git {args[0]} waited on a named pipe (FIFO) in {self.root}, as git does on "
                 "a .gitignore or .gitattributes that is one, and was stopped; no snapshot is "
                 f"taken while it is there (`find {self.root} -type p` lists them)")
        overran = (f"git {args[0]} ran {GIT_BUDGET_S:g} s in {self.root} and was stopped; a "
                   ".gitignore pattern of many `**/` over deep folders can keep git matching "
                   "for ever")
        for _attempt in range(LOCK_RETRIES):
            status, out, err = await _git_to_end(command, stdin, self.root, env, stuck, overran)
            if status in ok:
                return out
            message = err.decode(errors="replace").strip()
            if "index.lock" not in message:
                raise SnapshotError(f"git {args[0]} failed: {message}")
            if not self._dropped_stale_index_lock():
                await asyncio.sleep(LOCK_WAIT_S)
        raise SnapshotError(f"the snapshot store {self.git_dir} stayed locked: "
                            f"{self.git_dir / 'index.lock'} is there, from a git running on it "
                            "now or one stopped before it ended; it is deleted once "
                            f"{GIT_BUDGET_S:g} s old, and you may delete it if no git runs "
                            "there")

    def _dropped_stale_index_lock(self) -> bool:
        """Delete the store's index lock if made over GIT_BUDGET_S ago: no git run of the store
        lasts that long, so its git was killed (the lock failed every snapshot after). The
        index it guarded is whole (git renames the lock over it) and only a cache."""
        lock = self.git_dir / "index.lock"
        try:
            if time.time() - lock.lstat().st_mtime <= GIT_BUDGET_S:
                return False
            lock.unlink(missing_ok=True)
        except OSError:  # gone (its git ended), or not ours to delete: tried again
            return False
        return True

    @contextlib.asynccontextmanager
    async def _held(self) -> AsyncIterator[None]:
        """Use the store alone: no other task of this process, nor other process (another
        editor's pi-lsp), runs git on it meanwhile."""
        async with self._lock:
            fd = self._open_lock()
            try:
                await self._take_turn(fd)
                yield
            finally:
                os.close(fd)  # releases the lock, a cancel while waiting for it included

    def _open_lock(self) -> int:
        try:
            self.git_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            # The store folder is the user's; still, never open through a symlink planted there.
            return os.open(self.git_dir / STORE_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW
                           | os.O_CLOEXEC, 0o600)
        except OSError as error:
            raise self._cannot_create(error) from None

    async def _take_turn(self, fd: int) -> None:
        """Lock `fd` once no other process holds the store: tried again every
        STORE_LOCK_POLL_S, never blocking the event loop, up to STORE_WAIT_S."""
        deadline = time.monotonic() + STORE_WAIT_S
        try:
            while not _try_lock(fd):
                self.waiting = True
                if time.monotonic() >= deadline:
                    raise SnapshotError(f"process {self.holder()} (another pi-lsp on "
                                        f"{self.root}) has held the snapshot store "
                                        f"{self.git_dir} for over {STORE_WAIT_S:g} s")
                await asyncio.sleep(STORE_LOCK_POLL_S)
        finally:
            self.waiting = False
        os.ftruncate(fd, 0)  # who holds it, for the message above
        os.write(fd, f"{os.getpid()}\n".encode())

    def holder(self) -> str:
        """The pid of the process holding the store, as it wrote it ("unknown" before it has)."""
        return _small_text(self.git_dir / STORE_LOCK).strip() or "unknown"

    async def _ensure(self) -> None:
        """Make the store unless it is made whole: one a kill left half-made (before its
        config, in its `git init`) failed every snapshot after, for ever."""
        wrong = self._unmade()
        if wrong is None:
            self._keep_attributes()  # a store made before
            return
        try:
            if not self._holds_snapshots():
                _empty(self.git_dir)  # stale locks and all: nothing in it is the user's yet
                await self._create()
                self.log.start([])  # a new store: no tree to scan for
                return
            await self._finish(wrong)
        except OSError as error:
            raise self._cannot_create(error) from None

    def _unmade(self) -> str | None:
        """What the store lacks of what `_create` makes (None: nothing). `info/` comes after
        the config, so a store that has it was configured."""
        head = _small_text(self.git_dir / "HEAD")
        if not head:
            return "it has no HEAD file"
        if not HEAD.fullmatch(head):
            return NO_REF
        return next((f"it has no {name}/ folder" for name in ("objects", "refs", "info")
                     if not (self.git_dir / name).is_dir()), None)

    def _holds_snapshots(self) -> bool:
        """Whether the store may hold a snapshot: a tree logged, a legacy store told of (an
        earlier pi-lsp copied all its objects then), or any object file at all (counted so,
        whatever made it)."""
        objects = self.git_dir / "objects"
        return not self.log.empty() or (self.git_dir / ADOPTED).exists() \
            or any(files for _folder, _folders, files in os.walk(objects))

    async def _finish(self, wrong: str) -> None:
        """Make what a store holding snapshots lacks, never deleting or rewriting what it holds
        (`git init` again keeps every object); SnapshotError naming what is wrong if it stays
        unusable. Its log is left: one it lacks is made by a scan of its trees."""
        if wrong == NO_REF:  # git init keeps a HEAD, and git then finds no repository there
            raise self._damaged(wrong)
        try:
            await self._create()
        except SnapshotError as error:
            raise self._damaged(f"{wrong}, and making it again failed: {error}") from None
        still = self._unmade()
        if still is not None:
            raise self._damaged(still)

    def _damaged(self, wrong: str) -> SnapshotError:
        return SnapshotError(f"the snapshot store {self.git_dir} is damaged: {wrong}. It holds "
                             "the snapshots of earlier turns (what undoes them), so it is left "
                             "as it is: repair it, or move it away and a new store is made "
                             "(earlier turns then cannot be rewound)")

    def _cannot_create(self, error: OSError) -> SnapshotError:
        """XDG_STATE_HOME a file, say: name the folder, not a bug."""
        return SnapshotError(f"cannot create the snapshot store {self.git_dir} "
                             f"({error.strerror}); it is kept under $XDG_STATE_HOME, else "
                             "~/.local/state")

    def _keep_attributes(self) -> None:
        """Bring a store made before to ATTRIBUTES, and drop its index: git does not notice
        attributes changing, so `add -A` kept the blob the old ones made (CRLF turned to LF)
        of every file whose size and times matched the index; and the index of such a store
        may hold files under `.pi/` a `.gitignore` let in then."""
        attributes = self.git_dir / "info" / "attributes"
        if _small_text(attributes) == ATTRIBUTES:
            return
        # Dropped first, so a stop in between still leaves the attributes to rewrite: the next
        # `add` then reads every file once. Only snapshots read the index; restores, diffs
        # and the logs name trees.
        (self.git_dir / "index").unlink(missing_ok=True)
        _keep_text(attributes, ATTRIBUTES)

    async def _create(self) -> None:
        await self._run("init", "--quiet", "--bare", "--template=", str(self.git_dir),
                        store=False)
        # Nothing in the store is ever unreachable on purpose, so nothing may be collected.
        for key, value in (("gc.auto", "0"), ("gc.pruneExpire", "never"),
                           ("core.bare", "false")):
            await self._run("config", key, value)
        # Made last of the store's git files: a store that has `info/` was configured.
        (self.git_dir / "info").mkdir(exist_ok=True)
        (self.git_dir / "info" / "exclude").write_text(".pi\n")
        _keep_text(self.git_dir / "info" / "attributes", ATTRIBUTES)

    # -- the trees it recorded -----------------------------------------------------------

    async def _log_ready(self) -> None:
        if self.exists() and self.log.needs_scan():
            await self._scan()

    async def _scan(self) -> None:
        """Log the root trees already in the store: the trees no other tree in it names."""
        # So a store older than the log, or given a legacy store's objects, still restores.
        listed = await self._run("cat-file", "--batch-all-objects",
                                 "--batch-check=%(objectname) %(objecttype)")
        trees = sorted({line.split(" ")[0] for line in listed.decode().splitlines()
                        if line.endswith(" tree")})
        contents = await self._run("cat-file", "--batch", stdin="".join(
            f"{t}\n" for t in trees).encode()) if trees else b""
        empty = (await self._run("hash-object", "-t", "tree", "--stdin", stdin=b"")).strip()
        roots = await asyncio.to_thread(root_trees, contents)  # a large store: seconds of parsing
        self.log.start(roots - {empty.decode()})
        (self.git_dir / UNLOGGED).unlink(missing_ok=True)

    async def _recorded(self, *trees: str) -> None:
        """SnapshotError unless every tree is a root tree this store's snapshots recorded: a
        session may name any tree its git knows (the empty one, a folder's), and restoring
        one of those deletes files."""
        await self._log_ready()
        for tree in trees:
            if not self.log.has(object_id(tree)) and not await self._taken_from_legacy(tree):
                raise SnapshotError(f"no snapshot {tree} in {self.git_dir}: that id is not a "
                                    "snapshot this store recorded")

    async def recorded(self, tree: str) -> None:
        """SnapshotError unless this store's snapshots recorded `tree`, checked before anything
        is snapshotted: an id a session names makes no store and reads no file."""
        tree = object_id(tree)
        try:
            os.stat(self.git_dir)
        except FileNotFoundError:  # no store, so nothing recorded; none is made for it
            if self.legacy is not None and _legacy_holds(self.legacy, tree):
                return await self._taken_first(tree)
            raise SnapshotError(f"no snapshot {tree} in {self.git_dir}: there is no snapshot "
                                "store for this folder yet") from None
        except OSError as error:  # XDG_STATE_HOME a file, say
            raise self._cannot_create(error) from None
        async with self._held():
            if (self.git_dir / UNLOGGED).exists():  # a legacy store's objects: scanned once made
                await self._ensure()
            await self._recorded(tree)

    # -- snapshots -----------------------------------------------------------------------

    async def snapshot(self, overrides: Mapping[str, bytes] | None = None) -> Snapshot:
        """The workspace's files now, as a tree id; files over the size cap are left out.

        `overrides` (by relative path) replace the disk's content of files the snapshot holds.
        """
        async with self._held():
            await self._ensure()
            await self._log_ready()
            await self._follow_user_excludes()
            listed = _split(await self._run("ls-files", "-z", "--others", "--modified",
                                            "--exclude-standard", "--", ".", *NOT_PRIVATE,
                                            literal=False))
            skipped = sorted(p for p in listed
                             if _unkept(self.root / p))
            # ls-files names a nested repository the index lacks as `name/`, not its files.
            repos = [p.removesuffix("/") for p in listed if p.endswith("/")]
            specs = [".", *NOT_PRIVATE, *(f":(exclude,literal){p}" for p in [*skipped, *repos])]
            await self._add_all(specs)
            unborn = await self._add_repositories(repos)
            # A file that grew past the cap must not keep its old content; one where a folder
            # was must not keep the folder's files (and `rm` refuses a folder without -r). -f:
            # without it git refuses a file whose staged content is neither the file's nor
            # HEAD's (the store has no HEAD), which the grown file's always is.
            if skipped:
                await self._run("rm", "-r", "-f", "--cached", "-q", "--ignore-unmatch",
                                "--pathspec-from-file=-", "--pathspec-file-nul",
                                stdin=_join(skipped))
            await self._untrack_ignored()
            if overrides:
                await self._override(overrides)
            tree = object_id((await self._run("write-tree")).decode().strip())
            self.log.add([tree])
            self.ignored.add(tree, await self._ignored_on_disk())
            self.unborn.add(tree, unborn)
            return Snapshot(tree, skipped)

    async def _add_all(self, specs: list[str]) -> None:
        """Stage what `specs` name, again once when a file went while git ran (a build deleting
        files): git failed the whole `add` on it ("unable to stat"), staging nothing."""
        add = ("add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul")
        try:
            await self._run(*add, stdin=_join(specs), literal=False)
        except SnapshotError as error:
            if "unable to stat" not in str(error):
                raise
            await self._run(*add, stdin=_join(specs), literal=False)  # reads the folders anew

    async def _add_repositories(self, repos: list[str]) -> list[str]:
        """Stage the nested repositories `repos` as gitlinks, and return those left out: git
        has no gitlink for one with no commit yet (`git init` alone), and failed the whole
        `add` on it, so no snapshot could be taken while it was there."""
        if not repos:
            return []
        await self._run("add", "--ignore-errors", "--pathspec-from-file=-",
                        "--pathspec-file-nul", stdin=_join(repos), ok=(0, 1))  # 1: some failed
        staged = set(_split(await self._run("ls-files", "-z", "--cached", "--", *repos)))
        return [p for p in repos if p not in staged]

    async def _follow_user_excludes(self) -> None:
        """Ignore what the user's own git ignores here: the workspace's `.git/info/exclude` and
        the user's excludes file besides `.gitignore` (more ignored only ever means fewer files
        a restore touches, whoever wrote them)."""
        _keep_text(self.git_dir / "info" / "exclude",
                   ".pi\n" + _small_text(self.root / ".git" / "info" / "exclude"))
        if self._excludes_file is None:
            self._excludes_file = await _user_excludes_file(self.git)

    async def ignored_now(self, paths: list[str]) -> list[str]:
        """The `paths` ignored now (as the last snapshot read the rules)."""
        return [p[2:] for p in await self._check_ignore([f"./{p}" for p in paths])]

    async def _untrack_ignored(self) -> None:
        """Drop the files ignored now from the index: `add -A` goes on updating a file an
        earlier snapshot held, so a secret a `.gitignore` took in later would be kept on."""
        tracked = _split(await self._run("ls-files", "-z", "--cached", "--ignored",
                                         "--exclude-standard"))
        if tracked:
            await self._run("rm", "--cached", "-q", "--ignore-unmatch",
                            "--pathspec-from-file=-", "--pathspec-file-nul", stdin=_join(tracked))

    async def _ignored_on_disk(self) -> list[str]:
        """The ignored files on disk, a folder ignored whole as one `name/` (not its files)."""
        listed = _split(await self._run("ls-files", "-z", "--others", "--ignored",
                                        "--exclude-standard", "--directory"))
        folders = [p for p in listed if p.endswith("/")]
        # ls-files also names a folder whose files are all ignored, though the folder is not:
        # its files are listed too, and a restore may delete the folder's other files.
        kept = set(await self._check_ignore([f"./{p}" for p in folders]))
        return [p for p in listed if not p.endswith("/") or f"./{p}" in kept]

    async def _check_ignore(self, paths: list[str]) -> list[str]:
        """The `paths` ignored now, as given (`./` first: check-ignore reads pathspecs and
        refuses literal ones, and a name starting with `:` would be magic)."""
        if not paths:
            return []
        return _split(await self._run("check-ignore", "--no-index", "-z", "--stdin",
                                      stdin=_join(paths), literal=False,
                                      ok=(0, 1)))  # 1: none is ignored

    def ignored_in(self, trees: list[str], paths: list[str]) -> list[str]:
        """The `paths` the snapshots that made `trees` left out as ignored: the files, and any
        path in (or at) a folder left out whole."""
        left_out: set[str] = set().union(*(self.ignored.paths(object_id(t)) for t in trees))
        return [p for p in paths if _left_out(p, left_out)]

    async def _override(self, contents: Mapping[str, bytes]) -> None:
        """Stage `contents` instead of the disk's for the regular files already staged (never
        an ignored, skipped or missing one). Their entries carry no file times, so the next
        `add` reads the disk again."""
        staged = _split(await self._run("ls-files", "-s", "-z", "--", *contents))
        entries = []
        for line in staged:
            info, path = line.split("\t", 1)
            mode = info.split(" ", 1)[0]
            if path in contents and mode in ("100644", "100755"):
                blob = await self._run("hash-object", "-w", "--stdin", stdin=contents[path])
                entries.append(f"{mode} {object_id(blob.decode().strip())}\t{path}")
        if entries:
            await self._run("update-index", "-z", "--index-info", stdin=_join(entries))

    async def read(self, tree: str, path: str) -> bytes | None:
        """The content of one regular file in a snapshot (None: no such file there)."""
        async with self._held():
            await self._recorded(tree)
            listed = _split(await self._run("ls-tree", "-z", object_id(tree), "--", path))
            info, _, name = listed[0].partition("\t") if listed else ("", "", "")
            mode, _, blob = info.partition(" blob ")
            if name != path or mode not in ("100644", "100755"):
                return None
            return await self._run("cat-file", "blob", object_id(blob))

    async def changes(self, current: str, target: str, with_diff: bool = True
                      ) -> list[FileChange]:
        """What restoring `target` over `current` would do, file by file, sorted by path."""
        ids = object_id(current), object_id(target)
        async with self._held():
            await self._recorded(*ids)
            listed = _split(await self._run("diff-tree", "-r", "-z", "--no-renames",
                                            "--name-status", "--end-of-options", *ids))
            pairs = [(_STATUS.get(listed[i][:1], "modified"), listed[i + 1])
                     for i in range(0, len(listed) - 1, 2)]
            diffs: dict[str, str] = {}
            if with_diff and pairs:
                text = await self._run("diff", "--no-color", "--no-renames", "--no-ext-diff",
                                       "--no-textconv", "--end-of-options", *ids)
                diffs = _split_diff(text.decode(errors="replace"), [p for _, p in pairs])
        return [FileChange(path, status, diffs.get(path, "")) for status, path in pairs]

    async def nested(self, *trees: str) -> list[str]:
        """The git repositories inside the workspace in these snapshots (git records one as a
        gitlink, the commit its HEAD names, never its files; one with no commit yet is left
        out), sorted."""
        found: set[str] = set()
        for tree in trees:
            found |= self.unborn.paths(object_id(tree))
            for line in _split(await self._run("ls-tree", "-r", "-z", object_id(tree))):
                info, _, path = line.partition("\t")
                if info.startswith(f"{GITLINK} "):
                    found.add(path)
        return sorted(found)

    async def in_the_way(self, current: str, changes: list[FileChange]) -> dict[str, str]:
        """The paths a restore of `changes` must leave alone, and why: what is on disk where it
        would write holds what the snapshot `current` lacks (ignored, too large, `.pi/`), which
        git would delete and no undo could bring back."""
        deleted = {c.path for c in changes if c.status == "deleted"}
        found: dict[str, str] = {}
        for change in changes:
            if change.status == "deleted":
                continue
            for folder in _folders_of(change.path):  # a file there, deleted by no change
                if folder not in deleted and _is_file(self.root / folder):
                    found[folder] = (f"{folder} is a file no snapshot holds, where a restore "
                                     f"would make a folder for {change.path}")
            untracked = await self._untracked_in(current, change.path)
            if untracked is not None:
                found[change.path] = (f"{change.path} is a folder holding {untracked}, which no "
                                      "snapshot holds, where a restore would write a file")
        return found

    async def _untracked_in(self, current: str, folder: str) -> str | None:
        """A file or symlink in the real folder `folder` on disk that the snapshot `current`
        does not hold (None: `folder` is no such folder, or holds nothing else)."""
        path = self.root / folder
        if not path.is_dir() or path.is_symlink():
            return None
        held = set(_split(await self._run("ls-tree", "-r", "-z", "--name-only",
                                          object_id(current), "--", f"{folder}/")))
        try:
            for found in _files_below(path):
                relative = Path(found).relative_to(self.root).as_posix()
                if relative not in held:
                    return relative
        except OSError as error:  # a folder it cannot read may hold anything
            return Path(error.filename or path).relative_to(self.root).as_posix()
        return None

    async def restore(self, target: str, changes: list[FileChange], over: str | None = None,
                      unchecked: Collection[str] = (), progress: RestoreProgress | None = None
                      ) -> None:
        """Make the listed files what they are in `target`; no other file is touched, and
        none under `.git/` or `.pi/` or behind a symlink (see `unsafe_reason`). With `over`,
        the snapshot restored over, each file but those `unchecked` must still be on disk as
        `over` or `target` holds it: else SnapshotError naming them, and nothing is touched.
        `progress` gets each path as it is deleted or handed to git, for a failure to name."""
        source = object_id(target)
        progress = progress or RestoreProgress()
        for change in changes:
            reason = unsafe_reason(self.root, change.path)
            if reason is not None:
                raise SnapshotError(f"{change.path}: not restored because {reason}")
        async with self._held():
            await self._recorded(source)
            if over is not None:
                await self._unchanged_since(over, source, changes, unchecked,
                                            bool(progress.changed))
            progress.begin()
            # Deletes first: a write can make a folder a symlink, and a later delete of a file
            # "in" it would go wherever it leads.
            for change in changes:
                if change.status == "deleted":
                    _remove(self.root, change.path)
                    progress.changed.append(change.path)
            progress.writing = [c.path for c in changes if c.status != "deleted"]
            if progress.writing:
                await self._run("restore", f"--source={source}", "--worktree",
                                "--pathspec-from-file=-", "--pathspec-file-nul",
                                stdin=_join(progress.writing))
            progress.changed += progress.writing
            progress.writing = []

    async def unchanged_since(self, over: str, target: str, changes: list[FileChange],
                              unchecked: Collection[str] = ()) -> None:
        """The check `restore` makes first, for a restore whose first change is made elsewhere
        (an editor's delete): SnapshotError naming the files it would not change."""
        source = object_id(target)
        async with self._held():
            await self._recorded(source)
            await self._unchanged_since(over, source, changes, unchecked)

    async def _unchanged_since(self, over: str, target: str, changes: list[FileChange],
                               unchecked: Collection[str], changed_before: bool = False) -> None:
        """ChangedMeanwhile naming the `changes` (but those `unchecked`) the disk holds neither
        as the snapshot `over` nor as `target` does: another program wrote them since, and that
        text is in no snapshot. Checked just before the restore changes them (a program may
        write at any time before); one already as `target` holds it loses nothing.
        `changed_before`: the restore changed files already (an editor's deletes)."""
        paths = [c.path for c in changes if c.path not in unchecked]
        if not paths:
            return
        # The raw diff: ":mode mode blob blob status", then the path; `over`'s side first.
        raw = _split(await self._run("diff-tree", "-r", "-z", "--no-renames",
                                     "--end-of-options", object_id(over), target))
        held = {raw[i + 1]: raw[i][1:].split(" ") for i in range(0, len(raw) - 1, 2)}
        expected = {path: ((held[path][0], held[path][2]), (held[path][1], held[path][3]))
                    for path in paths if path in held}
        changed = await asyncio.to_thread(_differing, self.root, expected)
        if not changed:
            return
        stopped = ("before writing or deleting files on disk, so what is there now is kept: "
                   "restore again to replace it")
        if changed_before:  # the caller names what it changed, and how to undo that
            stopped = "there, writing or deleting no more files, so what is there now is kept"
        raise ChangedMeanwhile(f"{some_of(changed)} changed on disk since the restore took its "
                               f"undo snapshot; the restore stopped {stopped}", changed)

    async def _taken_first(self, tree: str) -> None:
        """`recorded` where the store is not made yet but the legacy store holds `tree`."""
        async with self._held():
            await self._ensure()
            await self._recorded(tree)

    # -- a store an earlier pi-lsp kept in the workspace ---------------------------------

    async def _taken_from_legacy(self, tree: str) -> bool:
        """Whether `tree`, which this store never recorded, is a snapshot the legacy store holds
        and was taken from it: the id is looked up and the store's size checked before anything
        is copied, and only that tree's objects come in (nothing else a repository may have
        planted there). The store is made first; held."""
        legacy = self.legacy
        if legacy is None or not _legacy_holds(legacy, tree):
            return False
        objects = legacy / "objects"
        count, size = _object_files_size(objects)
        if count > LEGACY_MAX_FILES or size > LEGACY_MAX_BYTES:
            raise SnapshotError(f"snapshot {tree} is in {legacy}, but its object files are "
                                f"over the {LEGACY_MAX_FILES:,} files or "
                                f"{LEGACY_MAX_BYTES >> 20} MB pi-lsp copies from an earlier "
                                "store: nothing was copied")
        await self._ensure()
        with tempfile.TemporaryDirectory(prefix="legacy-", dir=self.git_dir) as copy:
            # Copied aside (object files only, never through a symlink: no `info/alternates`
            # leading git elsewhere), then only what `tree` holds goes into the store.
            _copy_objects(objects, Path(copy))
            kind = await self._run("cat-file", "-t", tree, alternate=Path(copy), ok=(0, 128))
            if kind.strip() != b"tree":
                return False
            try:
                held = await self._run("rev-list", "--objects", tree, alternate=Path(copy))
                await self._run("pack-objects", "--quiet", str(self.git_dir / "objects" / "pack"
                                                               / "pack"),
                                stdin=held, alternate=Path(copy))
            except SnapshotError as error:
                raise SnapshotError(f"snapshot {tree} in {legacy} could not be taken: "
                                    f"{error}") from None
        self.log.add([tree])
        return True

    def adopt_legacy(self, trusted: bool) -> str | None:
        """What to say about a store in the workspace's `.pi/snapshots/` (None: there is none,
        or it was told of already). git never runs on it and it is never deleted; in a trusted
        folder a snapshot an entry names that this store lacks is taken from it when asked for
        (`_taken_from_legacy`), so the entries recorded then still rewind."""
        legacy = self.root / LEGACY_DIR
        self.legacy = None  # until this folder's trust and the store's folders are known
        if not os.path.lexists(legacy):
            return None
        where = f"pi-lsp now keeps file snapshots in {self.git_dir}"
        # Its objects could lead to another repository's, whose trees would count as ours.
        linked = _symlinked(self.root, legacy / "objects" / "pack")
        if linked is not None or not legacy.is_dir():
            return (f"{linked or legacy} is not a folder of the workspace (a symlink, or a "
                    f"file); {legacy} was not used. {where}. You may delete it.")
        if not trusted:
            return (f"{legacy} is a snapshot store an earlier pi-lsp kept in the workspace; "
                    f"{where}. As the folder is not trusted nothing was taken from it, so files "
                    "changed by earlier turns cannot be restored unless you trust it. You may "
                    "delete it.")
        self.legacy = legacy
        return None if self._told() else (
            f"{legacy} is a snapshot store an earlier pi-lsp kept in the workspace; {where}. "
            "Rewinding to an entry recorded then takes that one snapshot from it (its object "
            "files are copied; its config and hooks are never used). You may delete it once "
            "those entries no longer matter.")

    def _told(self) -> bool:
        """Whether the user was told of the legacy store already (marked in this store)."""
        if (self.git_dir / ADOPTED).exists():
            return True
        self.git_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        (self.git_dir / ADOPTED).write_text(f"{self.root / LEGACY_DIR}\n")
        return False


_stores: dict[Path, SnapshotStore] = {}


def store_for(root: Path) -> SnapshotStore:
    """The process's one store for a workspace, so its snapshots never race each other."""
    key = real_path(root)
    store = _stores.get(key)
    if store is None:
        store = _stores[key] = SnapshotStore(key)
    return store


def _split(raw: bytes) -> list[str]:
    return [part.decode(errors="surrogateescape") for part in raw.split(b"\0") if part]


def _join(paths: list[str]) -> bytes:
    return b"".join(p.encode(errors="surrogateescape") + b"\0" for p in paths)


async def _user_excludes_file(git: str | None) -> str:
    """The excludes file the user's git reads (its system and global config, never a repo's:
    looked up outside any); "" when git's default, which the store's git reads too."""
    if git is None:
        return ""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    # Run under the store's lock (a snapshot's first step), so stopped as its every git is: a
    # config file that is a FIFO held every pi-lsp on the workspace for ever.
    status, out, _err = await _git_to_end(
        [git, "config", "--path", "--get", "core.excludesFile"], None, "/", env,
        stuck="git config waited on a named pipe (FIFO), as git does on a config file that is "
              "one (~/.gitconfig, ~/.config/git/config, or one they include), and was stopped; "
              "no snapshot is taken while it is there",
        overran=f"git config ran {GIT_BUDGET_S:g} s reading the user's git config and was "
                "stopped")
    return os.fsdecode(out).strip() if status == 0 else ""


async def _git_to_end(command: list[str], stdin: bytes | None, cwd: Path | str,
                      env: dict[str, str], stuck: str, overran: str) -> tuple[int, bytes, bytes]:
    """Run one of the store's gits: its status, stdout and stderr. SnapshotError(`stuck`) once
    it waits on a named pipe, SnapshotError(`overran`) once it has run GIT_BUDGET_S."""
    try:
        return await run_to_end(command, stdin, _waits_on_a_pipe, GIT_BUDGET_S, cwd=cwd, env=env)
    except Stuck:
        raise SnapshotError(stuck) from None
    except Overran:
        raise SnapshotError(overran) from None


def _try_lock(fd: int) -> bool:
    """Take an exclusive flock on `fd` unless another open file holds one."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _waits_on_a_pipe(pid: int) -> bool:
    """Whether a thread of process `pid` waits for the other end of a named pipe to open, as
    Linux's /proc tells (elsewhere nothing tells it, and only an abort stops such a git).

    git opens every `.gitignore` and `.gitattributes` on its way with a plain blocking open, and
    no option changes that; this wait is the one no git that is merely slow (a large
    repository) is ever in, so such a git is stopped at once, not at the end of GIT_BUDGET_S.
    """
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    return any(_wchan(f"/proc/{pid}/task/{thread}/wchan") == "wait_for_partner"
               for thread in threads)


def _wchan(path: str) -> str:
    """Where in the kernel a thread sleeps ("" when that cannot be read)."""
    try:
        with open(path) as file:
            return file.read()
    except OSError:
        return ""


def _small_text(path: Path) -> str:
    """A regular file's text, at most EXCLUDES_LIMIT bytes; "" for anything else."""
    try:
        return read_regular(path, EXCLUDES_LIMIT).decode(errors="surrogateescape")
    except OSError:
        return ""


def _empty(folder: Path) -> None:
    """Delete all in a store holding no snapshot but the lock file (held: another process then
    locks the same file, not a new one); never through a symlink."""
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name == STORE_LOCK:
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)


def _keep_text(path: Path, text: str) -> None:
    """Make the file at `path` hold `text`, writing only when it holds anything else."""
    if _small_text(path) != text:
        path.write_text(text, errors="surrogateescape")


def _left_out(path: str, left_out: set[str]) -> bool:
    """Whether `path` is one of the files `left_out`, or is or is in one of its `name/`s."""
    parts = path.split("/")
    return path in left_out or any("/".join(parts[:i]) + "/" in left_out
                                   for i in range(1, len(parts) + 1))


def _folders_of(path: str) -> list[str]:
    """The folders a relative path is in, outermost first: `a/b/c` is in `a` and `a/b`."""
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def _files_below(folder: Path) -> Iterator[str]:
    """Everything below `folder` but folders (files, symlinks), folders not followed through
    links; an OSError for one it cannot read. A loop with a stack: os.walk recurses on Python
    3.11, and fails some 990 folders down."""
    folders = [str(folder)]
    while folders:
        with os.scandir(folders.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    folders.append(entry.path)
                else:
                    yield entry.path


def some_of(paths: list[str]) -> str:
    """The first five `paths`, and how many more: a message's list of files."""
    return ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")


def _differing(root: Path, expected: Mapping[str, tuple[tuple[str, str], ...]]) -> list[str]:
    """The paths whose disk is none of what snapshots hold there: (mode, blob)s by path."""
    return [path for path, held in expected.items()
            if all(_disk_differs(root, path, mode, blob) for mode, blob in held)]


def _disk_differs(root: Path, path: str, mode: str, blob: str) -> bool:
    """Whether the disk at `path` is not a file of `mode` holding the object `blob` (mode
    000000: nothing there, and a folder, which no snapshot holds, counts as nothing)."""
    try:
        info = os.lstat(root / path)
    except (FileNotFoundError, NotADirectoryError):
        return mode != NO_FILE
    except OSError:
        return True
    if stat.S_ISDIR(info.st_mode):
        return mode != NO_FILE
    if mode == NO_FILE:
        return True
    try:
        if stat.S_ISLNK(info.st_mode):
            return mode != SYMLINK or _blob_id(os.fsencode(os.readlink(root / path)),
                                               blob) != blob
        return mode not in REGULAR_MODES or _blob_id(
            read_regular(root / path, MAX_FILE_BYTES + 1), blob) != blob
    except OSError:  # a FIFO, a device, unreadable now: not what the snapshot read
        return True


def _blob_id(content: bytes, like: str) -> str:
    """The id git gives a blob of `content`, in the hash of the object id `like`."""
    digest = hashlib.sha1(usedforsecurity=False) if len(like) == 40 else hashlib.sha256()
    digest.update(b"blob %d\0" % len(content))
    digest.update(content)
    return digest.hexdigest()


def _is_file(path: Path) -> bool:
    """Whether something other than a folder or a symlink is at `path`."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISDIR(mode) and not stat.S_ISLNK(mode)


def _unkept(path: Path) -> bool:
    """Whether `path` is a file no snapshot keeps: over the cap, or one this process may not
    read or even stat (in a folder it may list but not enter), on which `git add` would fail,
    and with it the whole snapshot (a root-owned file of a container's in a user's project)."""
    try:
        info = os.lstat(path)
    except PermissionError:
        return True
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and (
        info.st_size > MAX_FILE_BYTES or not os.access(path, os.R_OK))


def _split_diff(text: str, paths: list[str]) -> dict[str, str]:
    """Cut one `git diff` into its files, by header; a type change's two parts stay together.

    A header git had to quote matches no plain path and goes to the next path without a part
    (git prints files in the order diff-tree lists them).
    """
    parts: list[tuple[str, str]] = []
    # Lines end at "\n" only: str.splitlines also breaks at a file's own \r, \x85 or U+2028,
    # where the file could then write another file's header.
    for line in io.StringIO(text, newline="\n"):
        if line.startswith("diff --git ") or not parts:
            parts.append((line, line))
        else:
            parts[-1] = (parts[-1][0], parts[-1][1] + line)
    by_header = {f"diff --git a/{p} b/{p}\n": p for p in paths}
    out: dict[str, str] = {}
    waiting = iter(paths)
    for header, part in parts:
        path = by_header.get(header)
        if path is None:
            path = next((p for p in waiting if p not in out), None)
            if path is None:
                break
        out[path] = out.get(path, "") + part
    return {path: _cap(part) for path, part in out.items()}


def _cap(diff: str) -> str:
    if len(diff) <= MAX_DIFF_CHARS:
        return diff
    return diff[:MAX_DIFF_CHARS] + f"\n… ({len(diff) - MAX_DIFF_CHARS} more characters)\n"


def object_id(value: str) -> str:
    """`value` if it is a git object id (40 or 64 lowercase hex digits), else SnapshotError."""
    if not OBJECT_ID.fullmatch(value):
        raise SnapshotError(f"{value[:80]!r} is not a snapshot id (40 or 64 hex digits)")
    return value


def unsafe_reason(root: Path, relative: str) -> str | None:
    """Why a restore must not write or delete `relative` under `root`: it is under `.git/` or
    `.pi/`, leaves the root, or a folder on its way is a symlink. None when it may."""
    parts = relative.split("/")
    if relative.startswith("/") or any(p in ("", ".", "..") for p in parts):
        return "it is not a plain path inside the workspace"
    if any(p.lower() in PRIVATE_PARTS for p in parts):
        return "it is under .git/ or .pi/, which are never restored"
    folder = root
    for part in parts[:-1]:
        folder = folder / part
        try:
            mode = os.lstat(folder).st_mode
        except FileNotFoundError:
            return None  # the rest is made as folders
        if stat.S_ISLNK(mode):
            return f"{folder.relative_to(root)} is a symlink, which a restore never goes through"
    return None


def _symlinked(root: Path, path: Path) -> Path | None:
    """The first folder on the way from `root` (left out) to `path` that is a symlink."""
    folder = root
    for part in path.relative_to(root).parts:
        folder = folder / part
        if folder.is_symlink():
            return folder
    return None


def _legacy_holds(legacy: Path, tree: str) -> bool:
    """Whether the legacy store has an object `tree`: its loose file, or a pack index listing
    it (read as data, never through a symlink); git has not looked at the store yet."""
    objects, tree = legacy / "objects", object_id(tree)
    try:
        loose = (objects / tree[:2] / tree[2:]).lstat()
    except OSError:
        loose = None
    if loose is not None and stat.S_ISREG(loose.st_mode):
        return True
    return any(_pack_lists(index, bytes.fromhex(tree)) for index in _files(objects / "pack")
               if index.suffix == ".idx")


def _pack_lists(index: Path, wanted: bytes) -> bool:
    """Whether a pack index (version 2, or 1) lists the object `wanted`; False if unreadable."""
    try:
        data = read_regular(index, LEGACY_MAX_BYTES)
    except (OSError, ValueError):
        return False
    fanout = 8 if data[:8] == b"\xfftOc\x00\x00\x00\x02" else 0
    names, size = fanout + 1024, len(wanted)
    stride, skip = (size, 0) if fanout else (size + 4, 4)  # version 1: an offset before each
    if len(data) < names:
        return False

    def counted(byte: int) -> int:
        return int.from_bytes(data[fanout + 4 * byte:fanout + 4 * byte + 4], "big")
    low, high = counted(wanted[0] - 1) if wanted[0] else 0, counted(wanted[0])
    while low < high:
        middle = (low + high) // 2
        at = names + middle * stride + skip
        name = data[at:at + size]
        if name == wanted:
            return True
        low, high = (middle + 1, high) if name < wanted else (low, middle)
    return False


def _object_files_size(objects: Path) -> tuple[int, int]:
    """How many object files `_copy_objects` would copy from `objects`, and their bytes;
    counting stops once past the limits."""
    count = size = 0
    loose = [d for d in _subdirs(objects) if re.fullmatch(r"[0-9a-f]{2}", d.name)]
    for folder in [*loose, objects / "pack"]:
        for file in _files(folder):
            with contextlib.suppress(OSError):
                size += file.lstat().st_size
            count += 1
            if count > LEGACY_MAX_FILES or size > LEGACY_MAX_BYTES:
                return count, size
    return count, size


def _copy_objects(source: Path, target: Path) -> int:
    """Copy git object files (loose objects and packs, by their names; regular files only)."""
    copied = 0
    loose = re.compile(r"[0-9a-f]{38}|[0-9a-f]{62}")
    pack = re.compile(r"pack-(?:[0-9a-f]{40}|[0-9a-f]{64})\.(?:pack|idx)")
    for folder, names in [(d, loose) for d in _subdirs(source) if re.fullmatch(
            r"[0-9a-f]{2}", d.name)] + [(source / "pack", pack)]:
        for file in _files(folder):
            if names.fullmatch(file.name) is None:
                continue
            destination = target / folder.name / file.name if names is loose \
                else target / "pack" / file.name
            if destination.exists():
                continue
            destination.parent.mkdir(parents=True, exist_ok=True)
            _copy_file(file, destination)
            copied += 1
    return copied


def _subdirs(folder: Path) -> list[Path]:
    try:
        return [Path(e.path) for e in os.scandir(folder) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _files(folder: Path) -> list[Path]:
    try:
        return [Path(e.path) for e in os.scandir(folder) if e.is_file(follow_symlinks=False)]
    except OSError:
        return []


def _copy_file(source: Path, target: Path) -> None:
    """Copy one file's bytes, never through a symlink at the source."""
    fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as reader, open(target, "xb") as writer:
        shutil.copyfileobj(reader, writer)


def _remove(root: Path, relative: str) -> None:
    """Delete one file (a symlink itself, never what it leads to), then the folders it leaves
    empty (never the root); checked again just before, as folders may have changed since."""
    reason = unsafe_reason(root, relative)
    if reason is not None:
        raise SnapshotError(f"{relative}: not deleted because {reason}")
    path = root / relative
    if path.is_dir() and not path.is_symlink():
        return
    path.unlink(missing_ok=True)  # an editor may have deleted it
    parent = path.parent
    while parent != root and root in parent.parents:
        try:
            parent.rmdir()
        except OSError:
            break
        parent = parent.parent
