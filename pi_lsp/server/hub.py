"""The open sessions of the editor's workspace, one record each, and what they answer.

Knows nothing of LSP; the server converts requests into these calls and results into JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec

from pi_lsp.agent.approval import Approver, allow_all
from pi_lsp.agent.harness import BusyError, Diagnostics, Harness
from pi_lsp.agent.prompt import agent_setup
from pi_lsp.agent.tools import ALL_TOOLS, DISK, FileAccess
from pi_lsp.context.layers import AgentSetup, Layer
from pi_lsp.context.preview import ContextDiff, diff_contexts
from pi_lsp.harness_factory import make_harness
from pi_lsp.paths import real_path
from pi_lsp.server.cache import LruCache
from pi_lsp.server.config import Config
from pi_lsp.server.open_session import OpenSession
from pi_lsp.server.previewpage import Outline, Preview, outline_of, outline_weight, whole
from pi_lsp.server.tasks import Tasks
from pi_lsp.server.treeview import (
    BranchesAfter,
    HeldView,
    RowsUnder,
    TreeDelta,
    TreeView,
    TreeViews,
)
from pi_lsp.server.workspace import Workspace
from pi_lsp.session.catalog import (
    SessionIndex,
    SessionSummary,
    of_workspaces,
    start_session,
    tree_summary,
)
from pi_lsp.session.check import check_session
from pi_lsp.session.fork import fork_session, leaf_fork_refusal
from pi_lsp.session.ids import order_ms
from pi_lsp.session.journal import NotASessionError, Problem
from pi_lsp.session.records import Refresh
from pi_lsp.session.tree import SessionTree
from pi_lsp.settings import SettingsStamp, settings_stamp
from pi_lsp.summarize.compaction import (
    PlanSummary,
    compaction_plan,
    plan_summary,
)
from pi_lsp.trust import TrustState

ChangeListener = Callable[[Path, SessionTree, Refresh], None]
ApproverFactory = Callable[[OpenSession], Approver]
DiagnosticsFactory = Callable[[Path], Diagnostics | None]
# A preview's agent setup, with the settings stamp taken before its settings were read.
StampedAgent = tuple[SettingsStamp, AgentSetup]

# Memory bounds: a preview's outline holds a row per message (MBs for a long session), a tree a
# whole file; only the recently used stay (a tree with a running harness always stays).
MAX_PREVIEWS = 8
MAX_PREVIEW_BYTES = 64 << 20
MAX_OPEN_TREES = 8
# A tree of more entries has a view built anew (its first getTree, one after a reload) in a
# worker thread: folding takes about 3 µs an entry, 3 s of the event loop for a million.
BACKGROUND_VIEW_ENTRIES = 20_000

log = logging.getLogger(__name__)


class UnknownSessionError(Exception):
    def __str__(self) -> str:
        return f"no session at {self.args[0]}"


class NotASessionFileError(UnknownSessionError):
    def __str__(self) -> str:
        return f"{self.args[0]} is not a pi session file ({self.args[1]})"


class HeldSessions(msgspec.Struct, frozen=True):
    """The sessions held that a listing names: started here, and new ones not written yet."""

    started: set[str]
    waiting: list[SessionSummary]


class SessionHub(Workspace):
    """The workspace's open sessions, one record each, and what they answer."""

    def __init__(self, folders: list[Path], config: Config,
                 approver_for: ApproverFactory = lambda _session: allow_all,
                 files: FileAccess = DISK,
                 diagnostics_for: DiagnosticsFactory = lambda _root: None,
                 tasks: Tasks | None = None) -> None:
        super().__init__(folders, config)
        self.tasks = Tasks() if tasks is None else tasks  # a hub of its own holds its reads
        self.approver_for = approver_for
        self.files = files
        self.diagnostics_for = diagnostics_for
        self.open: OrderedDict[Path, OpenSession] = OrderedDict()  # least recently used first
        # The folder each session this server started (or forked) was started in, by real path,
        # kept when its tree is closed: in a shared folder that lies in an outer folder, a
        # nested folder's header is not trusted as a committed file's would be.
        self.started: dict[Path, Path] = {}
        self._loading: dict[Path, asyncio.Task[OpenSession]] = {}  # files being read, by path
        # Open sessions whose file changed a lot, being read again off the event loop.
        self._reading: dict[Path, asyncio.Task[None]] = {}
        # Open sessions whose view is being built off the event loop: their trees stay as they
        # are until it is, so commands on them wait (`load`) and the watcher's word is kept.
        self._building: dict[Path, asyncio.Task[TreeView]] = {}
        self.listeners: list[ChangeListener] = []
        self.index = SessionIndex()
        self.views = TreeViews()
        # The outlines previews are read from are bounded across sessions (each may hold tens
        # of MB), so they are kept here, by session path, and dropped with their session.
        self._previews: LruCache[tuple[Path, str | None, str], tuple[object, Outline]] = \
            LruCache(MAX_PREVIEWS, MAX_PREVIEW_BYTES, lambda item: outline_weight(item[1]))

    def held_sessions(self) -> HeldSessions:
        """What `list_sessions` takes from the sessions held, read on the event loop: it
        changes them (opens, moves to the end), which a worker thread's iteration fails on."""
        return HeldSessions({str(path) for path in self.started},
                            [tree_summary(s.tree) for s in self.open.values() if s.tree.deferred])

    def list_sessions(self, held: HeldSessions | None = None) -> list[SessionSummary]:
        """The sessions on disk, and the new ones not written yet (no prompt so far); `held`:
        as `held_sessions` read them on the loop, for a call in a worker thread."""
        held = held if held is not None else self.held_sessions()
        sessions = of_workspaces(self.index.list(self.all_directories()), self.folders_or_cwd(),
                                 held.started, self.vouched())
        # One written since `held` was read (its first message) is on disk now: listed once.
        on_disk = {os.path.realpath(s.path) for s in sessions} if held.waiting else set()
        waiting = [s for s in held.waiting if os.path.realpath(s.path) not in on_disk]
        return sorted([*sessions, *waiting], key=lambda s: order_ms(s.modified), reverse=True)

    # -- open sessions -------------------------------------------------------------------

    def sync(self, path: Path) -> OpenSession:
        """Open the session file at `path`, or bring its open tree up to date with the disk;
        its record."""
        key = self.confine(path)
        session = self.open.get(key)
        if session is None:
            session = self._keep(self._read(key, path))
            self._close_unused_sessions()
        else:
            self.open.move_to_end(key)
            if key in self._reading or key in self._building:  # the tree is a worker's:
                return session  # it takes in the change after, and the held state stands
            try:
                self._catch_up(session.tree, path)
            except UnknownSessionError:  # gone, or no longer a session: nothing to hold
                self.forget(key)
                raise
        return session

    async def load(self, path: Path) -> OpenSession:
        """The session at `path`, its file read in a worker thread the first time; callers
        asking at once share one read, so there is one tree (and one turn) per file."""
        key = self.confine(path)
        # A loop, not a call per wait: builds begun one after another are waited for in turn.
        while (session := self.open.get(key)) is not None:
            building = self._building.get(key)
            if building is not None:  # its tree must not change under the worker
                await asyncio.wait([building])  # (its failure is its getTree's to report)
                continue  # and a read the builder began after is waited for
            await self._read_changes(key, path, session)
            if self.open.get(key) is session and key not in self._building and \
                    key not in self._reading:
                return session
            # else dropped as it was read (opened anew, off the loop), or a build or another
            # read began as this one ended
        loading = self._loading.get(key)
        if loading is None:
            loading = self._loading[key] = asyncio.create_task(self._load(key, path))
            loading.add_done_callback(_retrieved)
        # A caller cancelled while waiting leaves the read to the others.
        return await asyncio.shield(loading)

    async def _load(self, key: Path, path: Path) -> OpenSession:
        """Read the file off the event loop, then hold its tree; `open` changes on the loop
        only."""
        try:
            tree = await asyncio.to_thread(self._read, key, path)
        finally:
            del self._loading[key]  # a failed read is tried again by the next caller
        session = self.open.get(key)  # opened meanwhile by `sync`: that one may run a turn
        if session is None:
            self._catch_up(tree, path)  # changed as it was read, when nothing was held to follow
            session = self._keep(tree)
            self._close_unused_sessions()
        return session

    async def _read_changes(self, key: Path, path: Path, session: OpenSession) -> None:
        """Wait for a large change to the open session's file (a replacement, a long append)
        to be read off the event loop; a small one is left to `sync`, on the loop."""
        reading = self._reading.get(key)
        if reading is None:
            if not session.tree.read_in_background():
                return
            reading = self._start_reading(key, path, session)
        await asyncio.shield(reading)  # a caller cancelled leaves the read to the others

    def _start_reading(self, key: Path, path: Path, session: OpenSession) -> asyncio.Task[None]:
        """The session's one reader, owned by `tasks` (shutdown awaits or cancels it)."""
        reading = self._reading[key] = self.tasks.start(
            self._read_off_loop(key, path, session), f"read {path} again")
        return reading

    async def _read_off_loop(self, key: Path, path: Path, session: OpenSession) -> None:
        """Read what changed in a worker thread, one reading at a time, until what is left
        is small enough for the loop; a session dropped meanwhile is left alone."""
        try:
            while self.open.get(key) is session and session.tree.read_in_background():
                reading = session.tree.begin_reading()
                try:
                    with _named_errors(path):
                        await asyncio.to_thread(reading.run)
                except UnknownSessionError:
                    if self.open.get(key) is not session or session.tree.read_since(reading):
                        continue  # moved, dropped or read meanwhile: the error is stale
                    raise
                if self.open.get(key) is session:
                    session.tree.take_reading(reading)  # stale (read meanwhile): read again
            if self.open.get(key) is session:
                self._catch_up(session.tree, path)
        except UnknownSessionError:  # gone, or no longer a session: nothing to hold
            self.forget(key)
            raise
        finally:
            if self._reading.get(key) is asyncio.current_task():  # not a later session's
                del self._reading[key]

    @staticmethod
    def _catch_up(tree: SessionTree, path: Path) -> None:
        """Take in what changed on disk (appended, replaced or deleted), as named errors."""
        with _named_errors(path):
            tree.refresh()

    @staticmethod
    def _read(key: Path, path: Path) -> SessionTree:
        """The session file at `key`, read whole; named errors for a missing file or one
        that is not a session."""
        if not key.is_file():
            raise UnknownSessionError(str(path))
        try:
            return SessionTree.open(str(key))
        except (FileNotFoundError, IsADirectoryError):  # gone since the look above
            raise UnknownSessionError(str(path)) from None
        except NotASessionError as error:
            raise NotASessionFileError(str(path), str(error)) from None

    def _close_unused_sessions(self) -> None:
        """Close the least recently used sessions beyond the bound, never a running one."""
        excess = len(self.open) - MAX_OPEN_TREES
        for key, session in list(self.open.items()):
            if excess <= 0:
                break
            # A new session not written yet lives only here: never let it go.
            if not session.busy and not session.tree.deferred:
                self._drop(key)
                excess -= 1

    def _drop(self, key: Path) -> None:
        """Everything held for one session: its tree, idle harness and cached answers."""
        self.open.pop(key, None)
        self._reading.pop(key, None)  # its reader stops; the session opened next gets its own
        self._building.pop(key, None)  # the session opened next waits for no view of this one
        self._previews.drop_where(lambda cached: cached[0] == key)

    def _keep(self, tree: SessionTree) -> OpenSession:
        """Hold an open tree (one not written yet included) and follow its changes."""
        session = self.open[real_path(tree.path)] = OpenSession(tree)
        tree.listeners.append(self._changed)
        return session

    def _changed(self, tree: SessionTree, change: Refresh) -> None:
        path = real_path(tree.path)
        if change.relocated_from is not None:  # its file was replaced: it lives on elsewhere
            old = real_path(change.relocated_from)
            moved = self.open.pop(old) if old in self.open else OpenSession(tree)
            self._reading.pop(old, None)  # a reader of the file left behind reads for nobody
            self.open[path] = moved
            if old in self.started:
                self.started[path] = self.started.pop(old)
            self._previews.drop_where(lambda cached: cached[0] == old)
        session = self.open.get(path)
        if change.reloaded and session is not None:
            session.view = HeldView()
        for listener in list(self.listeners):
            listener(path, tree, change)

    def file_changed(self, path: Path) -> None:
        """The watcher saw `path` change: take in what another writer appended."""
        key = real_path(path)
        session = self.open.get(key)
        if not path.is_file():
            if session is None or not session.tree.deferred:  # a deferred one is held here only
                self.forget(path)
            return
        if session is None or key in self._reading or key in self._building:
            return  # a reader or builder in flight looks again after
        if session.tree.read_in_background():
            self._start_reading(key, path, session)
            return
        try:
            self._catch_up(session.tree, path)
        except UnknownSessionError:
            self.forget(path)

    def forget(self, path: Path) -> None:
        """The file is gone: stop its run and drop all that was held for it."""
        key = real_path(path)
        session = self.open.get(key)
        if session is not None:
            session.abort()
        self._drop(key)
        self.started.pop(key, None)

    def change_folders(self, folders: list[Path]) -> None:
        """The editor's folders changed; the sessions of a folder removed go with it."""
        self.folders = folders
        self.forget_uncovered()

    def forget_uncovered(self) -> None:
        """Stop (saved as aborted) and drop the sessions no longer in a session folder of the
        workspace: every command now refuses them, so their runs could not be aborted."""
        directories = set(self.all_directories())
        for key, session in list(self.open.items()):
            if key.parent not in directories:
                if session.busy:
                    self.tell(f"{session.title} was stopped: {key.parent} is no longer one of "
                              "the workspace's session folders")
                self.forget(key)

    def harness(self, path: Path) -> Harness:
        """The session's harness; an idle one is rebuilt when settings or models.json changed.
        An idle session is brought up to date first: a command on a file deleted meanwhile
        finds no session, as it would after the watcher's look."""
        session = self.open.get(real_path(path))
        if session is None or not session.busy:
            session = self.sync(path)
        if session.harness is not None and session.stamp is not None:
            folder, made = session.stamp
            if session.busy or made == settings_stamp(folder):  # a claimed turn's included
                return session.harness
        root = self.folder_of(path)
        folder = session.stamp[0] if session.stamp is not None else root
        stamp = settings_stamp(folder)
        session.harness = make_harness(
            session.tree, root, self.settings_for(path),
            anthropic_base_url=self.config.anthropic_base_url,
            approve=self.approver_for(session),
            session_dirs=tuple(self.all_directories()), files=self.files,
            diagnostics=self.diagnostics_for(root),
            tell=lambda message: self.tell_once(root, message, message), tell_slow=self.tell)
        session.stamp = (folder, stamp)
        return session.harness

    def folder_of(self, path: Path, cwd: str | None = None) -> Path:
        """The workspace folder a session belongs to (Workspace.folder_of), for one held by its
        header in memory: a new session has no file to read it from until its first prompt; for
        one it started, the folder it was started in while that is still one of the workspace's."""
        key = real_path(path)
        started = self.started.get(key)
        if started is not None and started in self.folders_or_cwd():
            return started
        session = self.open.get(key)
        held_cwd = session.tree.header.known_cwd() if session is not None else cwd
        return super().folder_of(path, held_cwd)

    def held(self, path: Path) -> OpenSession:
        """The open session at `path`, as it is (nothing is read)."""
        session = self.open.get(real_path(path))
        if session is None:
            raise UnknownSessionError(str(path))
        return session

    def running(self, path: Path) -> OpenSession | None:
        """The held session at `path` while a turn or job runs (or is claimed) in it, found
        without confining `path`: stopping it must work whatever the workspace says now."""
        session = self.open.get(real_path(path))
        return session if session is not None and session.busy else None

    def require_idle(self, path: Path) -> None:
        """BusyError while the session runs a turn, compaction or summary, or is about to."""
        self.held(path).require_idle()

    def claim_turn(self, path: Path) -> OpenSession:
        """Take the session for a new turn (its `turn_id`); BusyError if it is not idle."""
        session = self.held(path)
        session.claim_turn()
        return session

    def claim_job(self, path: Path, phase: str) -> OpenSession:
        """Take the session for a compaction or branch summary; BusyError if it is not idle."""
        session = self.held(path)
        session.claim_job(phase)
        return session

    def turn_open(self, path: Path) -> bool:
        """Whether a turn is claimed and not over: a steer or follow-up joins it."""
        return self.held(path).turn_open

    def require_workspace_idle(self, root: Path) -> None:
        """BusyError while any session of the workspace at `root` runs (or is about to): any
        may be writing its files."""
        root = real_path(root)
        for key, session in self.open.items():
            if session.busy and session.harness is not None and \
                    real_path(session.harness.root) == root:
                raise BusyError(f"a session in this workspace is busy ({key.name}); "
                                "restore files when it is idle")

    def set_trust(self, folder: Path, trusted: bool | None, save: bool, parent: bool
                  ) -> TrustState:
        """Decide for a folder (see Workspace.set_trust); its idle sessions take their
        settings again, and those in a `sessionDir` no longer followed are stopped."""
        state = super().set_trust(folder, trusted, save, parent)
        key = real_path(self.workspace_folder(folder))
        self._drop_idle(lambda harness: real_path(harness.root) == key)
        self.forget_uncovered()  # untrusted: the project's `sessionDir` is no longer followed
        return state

    def reconfigure(self, config: Config) -> None:
        """New settings apply to harnesses made from now on; idle ones are rebuilt."""
        self.config = config
        self._drop_idle(lambda _harness: True)
        self.forget_uncovered()  # a `sessionDirs` entry removed

    def _drop_idle(self, which: Callable[[Harness], bool]) -> None:
        for session in self.open.values():
            if session.harness is not None and not session.busy and which(session.harness):
                session.harness = session.stamp = None

    # -- answers -------------------------------------------------------------------------

    def new_session(self, name: str | None, folder: Path | None = None) -> Path:
        root = self.workspace_folder(folder) if folder is not None else self.default_folder()
        settings = self.folder_settings(root)
        provider, model_id = settings.initial_model()
        model = settings.registry().get(provider, model_id)
        tree = self._keep(start_session(root, provider, model_id,
                                        settings.new_session_thinking_level(model))).tree
        self.started[real_path(tree.path)] = root
        if name:
            tree.append_session_info(name)
        return Path(tree.path)

    async def view(self, path: Path, bookkeeping: bool = False, limit: int | None = None
                   ) -> TreeView:
        """The rows an editor draws, in order (`session/layout.py`), with what each row says;
        folded to the current path's last `limit` rows and the branches off them when given.
        A large tree's view built anew is built in a worker thread: other requests are answered
        meanwhile. A busy session's is built on the loop: its turn cannot wait."""
        key = self.confine(path)
        await self.load(path)
        session = self.sync(path)
        tree = session.tree
        if session.busy or len(tree.records) <= BACKGROUND_VIEW_ENTRIES or \
                self.views.current(session.view, tree, bookkeeping, limit):
            return self.views.view(session.view, tree, bookkeeping, limit)
        # The thread's own task holds the tree (`load` waits for it); shutdown waits for, and
        # past its grace cancels, the build, which leaves the thread (it cannot be stopped).
        drawing = self._building[key] = asyncio.ensure_future(asyncio.to_thread(
            self.views.view, session.view, tree, bookkeeping, limit))
        build = self.tasks.start(_awaited(drawing), f"draw {path}")
        drawing.add_done_callback(lambda _drawing: self._built(key, session, drawing, build))
        return await asyncio.shield(build)  # a caller cancelled leaves it to finish

    def _built(self, key: Path, session: OpenSession, drawing: asyncio.Task[TreeView],
               build: asyncio.Task[TreeView]) -> None:
        """The worker thread's build ended: the tree is the loop's again, and what the watcher
        saw meanwhile is taken in (editors are sent the change, as after any view), unless
        shutdown cancelled the build."""
        if self._building.get(key) is drawing:  # not a later session's
            del self._building[key]
        # Its failure is the build's to tell; one cancelled before it ran never reads it.
        if not drawing.cancelled():
            drawing.exception()
        if self.open.get(key) is session and not build.cancelled():
            try:  # in a callback, where no caller would hear of it: as the watcher's own word
                self.file_changed(key)
            except Exception:
                log.exception("%s changed and could not be read again", key)

    def rows_under(self, path: Path, under: str, start: int, limit: int,
                   bookkeeping: bool = False) -> RowsUnder:
        """A page of the rows folded under one row of the tree."""
        session = self.sync(path)
        return self.views.rows_under(session.view, session.tree, under, start, limit,
                                     bookkeeping)

    def branches_after(self, path: Path, after: str, start: int, limit: int,
                       bookkeeping: bool = False) -> BranchesAfter:
        """A page of the branches after one row of the tree, up to the current path's."""
        session = self.sync(path)
        return self.views.branches_after(session.view, session.tree, after, start, limit,
                                         bookkeeping)

    def tree_delta(self, path: Path, tree: SessionTree) -> TreeDelta | None:
        """The change to the tree an editor was shown, for `pi/sessionChanged`."""
        session = self.open.get(real_path(path))
        return self.views.delta(session.view, tree) if session is not None else None

    def preview(self, path: Path, leaf_id: str | None, layer: Layer,
                agent: StampedAgent | None = None) -> Preview:
        """The context at an entry in one layer, whole, read without making the session's
        agent."""
        return whole(self.outline(path, leaf_id, layer, agent))

    def outline(self, path: Path, leaf_id: str | None, layer: Layer,
                agent: StampedAgent | None = None) -> Outline:
        """What previews at an entry are read from, kept per session version and leaf: the
        next page of a long context is cut from it. `agent`: as `agent_builder(path)` builds
        it (off the event loop), else built here."""
        tree = self.sync(path).tree
        leaf = leaf_id if leaf_id is not None else tree.leaf_id
        if leaf is not None:
            tree.record(leaf)
        stamp, setup = agent if agent is not None else self.agent_builder(path)()
        key = (real_path(path), leaf, layer)
        # The settings and models files' times too: a model's window and levels come from them.
        state = (id(tree.records), len(tree.records), setup.default_model,
                 setup.default_thinking_level, setup.sections, stamp)
        cached = self._previews.get(key)
        if cached is not None and cached[0] == state:
            return cached[1]
        outline = outline_of(tree, leaf, layer, setup)
        self._previews.put(key, (state, outline))
        return outline

    def agent_builder(self, path: Path) -> Callable[[], StampedAgent]:
        """What builds the agent setup a preview of `path` shows: its folder's settings and
        trust read now, on the event loop; its prompt (the project's files and skills, a tenth
        of a second with 1,000 skills) when called, which may be in a worker thread."""
        # Stamped before the settings are read: an edit landing after it, even while the
        # prompt is built, makes the next preview rebuild rather than keep the old models.
        folder = self.folder_of(path)
        stamp = settings_stamp(folder)
        settings = self.settings_for(path)
        build = functools.partial(agent_setup, folder, ALL_TOOLS,
                                  settings.registry(),
                                  settings.initial_model(),
                                  settings.resume_thinking_level, settings.project_trusted)
        return lambda: (stamp, build())

    def diff(self, path: Path, from_leaf: str, to_leaf: str | None) -> ContextDiff:
        tree = self.sync(path).tree
        to_leaf = to_leaf if to_leaf is not None else tree.shown_leaf()
        if to_leaf is None:  # empty, or moved back before its first entry
            raise ValueError("the session has no current leaf to compare with")
        tree.record(from_leaf)
        tree.record(to_leaf)
        return diff_contexts(tree, from_leaf, to_leaf)

    def plan(self, path: Path) -> PlanSummary:
        """What a compaction would do now; NothingToCompactError, saying why, if it would refuse."""
        tree = self.sync(path).tree
        settings = self.settings_for(path)
        return plan_summary(compaction_plan(tree, tree.leaf_id, settings.compaction))

    def fork(self, path: Path, leaf_id: str | None) -> Path:
        tree = self.sync(path).tree
        leaf = leaf_id or tree.leaf_id
        refusal = None if leaf else leaf_fork_refusal(tree)
        if refusal is not None:
            raise ValueError(f"{refusal}; fork at an entry of the tree instead")
        if leaf is None:
            raise ValueError("the session is empty; there is nothing to fork")
        folder = self.folder_of(path)  # where its turns run: pi's process.cwd()
        fork = self._keep(fork_session(tree, leaf, cwd=str(folder))).tree
        self.started[real_path(fork.path)] = folder  # next to it, in its folder
        return Path(fork.path)

    def check(self, path: Path) -> list[Problem]:
        return check_session(self.sync(path).tree)


@contextlib.contextmanager
def _named_errors(path: Path) -> Iterator[None]:
    """A session file gone, or no longer a session, said as the named errors commands answer."""
    try:
        yield
    except (FileNotFoundError, IsADirectoryError):
        raise UnknownSessionError(str(path)) from None
    except NotASessionError as error:
        raise NotASessionFileError(str(path), str(error)) from None


async def _awaited(drawing: asyncio.Task[TreeView]) -> TreeView:
    """The view a worker thread builds; cancelled, the thread goes on (`_built` follows it)."""
    return await asyncio.shield(drawing)


def _retrieved(task: asyncio.Task[OpenSession]) -> None:
    """Take a load's failure off the task: its waiters report it, and when all of them were
    cancelled there is nobody to (asyncio would log it as never retrieved)."""
    if not task.cancelled():
        task.exception()
