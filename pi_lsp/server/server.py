"""`pi-lsp serve`: lifecycle and thin command handlers; the work happens in the hub and harness."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import msgspec
from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInvalidParams,
    JsonRpcRequestCancelled,
)
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from pi_lsp.agent.approval import ApprovalRequest, Approver
from pi_lsp.agent.events import AgentEvent, AutoRetryStart, MessageUpdate, ToolExecutionStart
from pi_lsp.agent.harness import BusyError, Harness, NotRunningError
from pi_lsp.agent.loop import Aborted
from pi_lsp.files.history import RewindError, count_changes, file_changes, restore_files
from pi_lsp.files.snapshots import SnapshotError, store_for
from pi_lsp.providers.base import MissingApiKeyError
from pi_lsp.server import stdio
from pi_lsp.server.approvals import NotAsked, approve_tool_params, fallback_question
from pi_lsp.server.editor import (
    EditorFiles,
    editor_problems,
    experimental_flag,
    prompt_attachments,
)
from pi_lsp.server.hub import (
    Config,
    ForeignFolderError,
    SessionHub,
    UnknownSessionError,
)
from pi_lsp.server.previewpage import paged
from pi_lsp.server.protocol import (
    APPROVE_TOOL,
    JOB_DONE,
    SESSION_CHANGED,
    SESSIONS_CHANGED,
    TURN,
    ApproveToolParams,
    BranchArgs,
    BranchSummaryArgs,
    CompactArgs,
    Decision,
    DiffArgs,
    FileChangesArgs,
    ForkArgs,
    LabelArgs,
    ModelArgs,
    NameArgs,
    NewSessionArgs,
    NoArgs,
    PiProtocol,
    PreviewArgs,
    PromptArgs,
    RestoreFilesArgs,
    SessionArgs,
    SetTrustArgs,
    ThinkingArgs,
    TreeArgs,
    client_approves_tools,
    parse_approval,
    parse_args,
)
from pi_lsp.server.watcher import DirectoryWatcher
from pi_lsp.session.catalog import ForeignSessionError, session_title, tree_title
from pi_lsp.session.entries import ImageContent
from pi_lsp.session.outline import shorten
from pi_lsp.session.tree import Refresh, SessionTree, UnknownEntryError
from pi_lsp.settings import SettingsError
from pi_lsp.summarize.branch import BranchOutcome
from pi_lsp.summarize.compaction import NothingToCompactError
from pi_lsp.summarize.summarizer import SummaryError
from pi_lsp.trust import TrustError, TrustState

log = logging.getLogger(__name__)

# In JSON-RPC's server range, clear of the codes LSP itself defines (-32001, -32002).
BUSY = -32010
FAILED = -32011
DELTA_FLUSH_S = 0.05  # text deltas are sent at most ~20 times a second per turn
SHUTDOWN_WAIT_S = 1.5
PROGRESS_PROMPT_CHARS = 40  # of the prompt, in a turn's progress
ALLOW, ALLOW_SESSION, DENY = "Allow", "Allow for this session", "Deny"
CHOICES: dict[str, Decision] = {ALLOW: "allow", ALLOW_SESSION: "allowSession"}

A = TypeVar("A")


def server_error(message: str, code: int) -> JsonRpcException:
    """A JSON-RPC error in the server range (pygls' own constructor is untyped)."""
    return JsonRpcException(message=message, code=code)


class PiServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("pi-lsp", "0.1.0", protocol_cls=PiProtocol, max_workers=4)
        self.config = Config()
        self.hub: SessionHub | None = None
        self.tasks: set[asyncio.Task[Any]] = set()
        self.watchers: dict[Path, DirectoryWatcher] = {}
        self.allowed_tools: dict[Path, set[str]] = {}
        self.known_files: set[Path] = set()
        self.turn_ids: dict[Path, str] = {}  # sessions whose turn task has been started
        self.files = EditorFiles(self)

    def start_io(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        """Serve stdio with framing faults survived; SIGTERM or a closed stdin ends like
        `shutdown` (running turns are aborted and saved)."""
        stdio.start_io(self, self.shutdown_work, stdin, stdout)

    # -- plumbing ------------------------------------------------------------------------

    def run_task(self, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Start background work and keep a strong reference until it ends."""
        task = asyncio.ensure_future(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def notify(self, method: str, params: Any) -> None:
        self.protocol.notify(method, params)

    def sessions(self) -> SessionHub:
        if self.hub is None:
            raise server_error("the server is not initialized yet", FAILED)
        return self.hub

    def session_path(self, uri: str, field: str = "uri") -> Path:
        path = to_fs_path(uri) if uri.startswith("file:") else None
        if path is None:
            raise JsonRpcInvalidParams(
                f"invalid argument: `{field}` must be a file: URI, not {uri!r}")
        return Path(path)

    # -- watching ------------------------------------------------------------------------

    def start_watching(self) -> None:
        wanted = set(self.sessions().all_directories())
        for directory in list(self.watchers):
            if directory not in wanted:
                self.run_task(self.watchers.pop(directory).stop())
        for directory in wanted - set(self.watchers):
            watcher = DirectoryWatcher(directory, self.on_file_event)
            self.watchers[directory] = watcher
            watcher.start()

    def on_file_event(self, path: Path, _change: object) -> None:
        exists = path.is_file()
        known = path in self.known_files
        if exists != known:
            (self.known_files.add if exists else self.known_files.discard)(path)
            self.notify(SESSIONS_CHANGED, {})
        self.sessions().file_changed(path)

    def on_session_changed(self, path: Path, tree: SessionTree, change: Refresh) -> None:
        note: dict[str, Any] = {
            "uri": from_fs_path(str(path)), "entries": len(tree.records),
            "leafId": tree.leaf_id, "reloaded": change.reloaded,
        }
        delta = self.sessions().views.delta(path, tree)  # for editors showing the tree
        if delta is not None:
            note["tree"] = msgspec.to_builtins(delta)
        if change.relocated_from is not None:
            note["relocatedFrom"] = uri_of(Path(change.relocated_from))
            self.window_show_message(types.ShowMessageParams(
                type=types.MessageType.Warning,
                message=f"pi-lsp: {change.relocated_from} was replaced by another program; "
                        f"this session (with both sides kept) continues in {path}"))
            self.notify(SESSIONS_CHANGED, {})
        self.notify(SESSION_CHANGED, note)

    # -- tool approval -------------------------------------------------------------------

    def approver_for(self, path: Path) -> Approver:
        async def approve(request: ApprovalRequest) -> str | None:
            name = request.call.name
            allowed = self.allowed_tools.setdefault(path, set())
            if self.config.tool_approval == "auto" or name in allowed:
                return None
            title = self.session_title(path)
            try:
                if client_approves_tools(self.client_capabilities):
                    decision = await self.ask_approve_tool(approve_tool_params(
                        request, uri_of(path), self.turn_ids.get(path), title))
                else:
                    decision = await self.ask_message(name, fallback_question(request, title))
            except NotAsked as error:
                return str(error)
            if decision == "allowSession":
                allowed.add(name)
            return None if decision != "deny" else f"the user denied running {name}"
        return approve

    async def ask_approve_tool(self, params: ApproveToolParams) -> Decision:
        # Shielded, here and below: an abort ends the wait, and a late answer still finds its
        # future (a cancelled one would make pygls fail on the answer).
        try:
            answer = await asyncio.shield(self.protocol.send_request_async(APPROVE_TOOL, params))
        except Exception as error:  # an error answer counts as a denial
            raise NotAsked(f"the user could not be asked to approve {params.tool} ({error}); "
                           "it was not run") from None
        result = parse_approval(answer)
        if result is None:
            raise NotAsked(f"the editor answered the approval request with {answer!r}, not "
                           f"allow, allowSession or deny; {params.tool} was not run")
        return result.decision

    async def ask_message(self, name: str, question: str) -> Decision:
        params = types.ShowMessageRequestParams(
            type=types.MessageType.Warning, message=question,
            actions=[types.MessageActionItem(t) for t in (ALLOW, ALLOW_SESSION, DENY)],
        )
        try:
            answer = await asyncio.shield(self.window_show_message_request_async(params))
        except Exception as error:  # a client that cannot ask counts as a denial
            raise NotAsked(f"the user could not be asked to approve {name} ({error}); "
                           "it was not run") from None
        return CHOICES.get(answer.title if answer is not None else "", "deny")

    def diagnostics_for(self, root: Path) -> Callable[[list[Path]], Awaitable[str | None]]:
        async def problems(paths: list[Path]) -> str | None:
            if not self.config.diagnostics_feedback or not experimental_flag(self, "diagnostics"):
                return None
            return await editor_problems(self, root, paths)
        return problems

    def tell(self, message: str) -> None:
        self.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning,
                                                         message=f"pi-lsp: {message}"))

    def session_title(self, path: Path) -> str:
        tree = self.hub.trees.get(path.resolve()) if self.hub else None
        return tree_title(tree) if tree else session_title(None, None, str(path))

    # -- turns and jobs ------------------------------------------------------------------

    async def progress_begin(self, title: str, message: str | None = None) -> str | None:
        window = self.client_capabilities.window
        if window is None or not window.work_done_progress:
            return None
        token = str(uuid.uuid4())
        try:
            await self.work_done_progress.create_async(token)
        except Exception:
            return None  # the client does not do progress
        self.work_done_progress.begin(token, types.WorkDoneProgressBegin(
            title=title, message=message, cancellable=True))
        return token

    def progress_end(self, token: str | None, message: str) -> None:
        if token is not None:
            with contextlib.suppress(Exception):
                self.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))

    def on_progress_cancel(self, token: str | None, harness: Harness) -> None:
        future = self.work_done_progress.tokens.get(token) if token else None
        if future is not None:
            future.add_done_callback(lambda f: harness.abort() if f.cancelled() else None)

    async def run_turn(self, uri: str, turn_id: str, harness: Harness, args: PromptArgs,
                       attachments: list[str]) -> None:
        stream = TurnStream(self, uri, turn_id)
        unsubscribe = harness.subscribe(stream.on_event)
        # A status bar shows "title: message" cut from the left: a short title, and a message
        # the tool reports replace, keep what is still running in view.
        token = await self.progress_begin("pi", shorten(args.text, PROGRESS_PROMPT_CHARS))
        self.on_progress_cancel(token, harness)
        stream.progress_token = token
        images = [ImageContent(data=i.data, mime_type=i.mime_type) for i in args.images]
        outcome = "done"
        try:
            await harness.prompt(args.text, images or None, attachments or None)
        except (MissingApiKeyError, BusyError, SettingsError, ValueError, OSError) as error:
            outcome = str(error)  # the harness has sent it as the turn's `error` event
        except Exception:
            log.exception("turn %s failed", turn_id)
            outcome = "failed"
        finally:
            stream.flush()
            unsubscribe()
            self.progress_end(token, outcome)

    async def run_job(self, uri: str, job_id: str, title: str, harness: Harness,
                      work: Callable[[], Awaitable[Any]]) -> None:
        token = await self.progress_begin(title)
        self.on_progress_cancel(token, harness)
        try:
            result = await work()
        except (SummaryError, NothingToCompactError, BusyError, Aborted, MissingApiKeyError,
                UnknownEntryError) as error:
            self.notify(JOB_DONE, {"jobId": job_id, "uri": uri, "ok": False,
                                   "error": str(error) or "cancelled"})
        except Exception as error:
            log.exception("job %s failed", job_id)
            self.notify(JOB_DONE, {"jobId": job_id, "uri": uri, "ok": False,
                                   "error": f"{type(error).__name__}: {error}"})
        else:
            self.notify(JOB_DONE, {"jobId": job_id, "uri": uri, "ok": True,
                                   "result": msgspec.to_builtins(result)})
        finally:
            self.progress_end(token, "done")

    async def shutdown_work(self) -> None:
        """Abort every running turn (each is persisted as aborted) and stop watching; no task
        is left running."""
        if self.hub is not None:
            for harness in self.hub.harnesses.values():
                harness.abort()
        running = [t for t in self.tasks if not t.done()]
        if running:
            _done, late = await asyncio.wait(running, timeout=SHUTDOWN_WAIT_S)
            for task in late:  # waiting on the client, say: cut, and awaited all the same
                task.cancel()
            if late:
                await asyncio.wait(late)
        for watcher in self.watchers.values():
            await watcher.stop()
        self.watchers.clear()


def progress_report(event: AgentEvent) -> str | None:
    """What a turn's progress says about `event`, if anything."""
    if isinstance(event, ToolExecutionStart):
        return f"running {event.tool_name}"
    if isinstance(event, AutoRetryStart):
        return f"{event.error_message}; retrying in {event.delay_ms / 1000:g}s " \
               f"({event.attempt}/{event.max_attempts})"
    return None


class TurnStream:
    """Forwards one turn's events as `pi/turn`, with text deltas coalesced."""

    def __init__(self, server: PiServer, uri: str, turn_id: str) -> None:
        self.server, self.uri, self.turn_id = server, uri, turn_id
        self.deltas: list[dict[str, Any]] = []
        self.timer: asyncio.TimerHandle | None = None
        self.progress_token: str | None = None

    def send(self, event: dict[str, Any]) -> None:
        self.server.notify(TURN, {"uri": self.uri, "turnId": self.turn_id, "event": event})

    def on_event(self, event: AgentEvent) -> None:
        if isinstance(event, MessageUpdate):
            delta = msgspec.to_builtins(event.delta)
            last = self.deltas[-1] if self.deltas else None
            if last and last["type"] == delta["type"] and \
                    last["contentIndex"] == delta["contentIndex"]:
                last["delta"] += delta["delta"]
            else:
                self.deltas.append(delta)
            if self.timer is None:
                self.timer = asyncio.get_running_loop().call_later(DELTA_FLUSH_S, self.flush)
            return
        self.flush()
        report = progress_report(event)
        if report and self.progress_token:
            with contextlib.suppress(Exception):
                self.server.work_done_progress.report(self.progress_token,
                                                      types.WorkDoneProgressReport(message=report))
        self.send(msgspec.to_builtins(event))

    def flush(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.deltas:
            deltas, self.deltas = self.deltas, []
            self.send({"type": "message_update", "deltas": deltas})


server = PiServer()


def command(name: str, kind: type[A]) -> Callable[[Callable[[PiServer, A], Any]], None]:
    """Register a command taking one object argument of `kind`; every failure answers."""
    def register(handler: Callable[[PiServer, A], Any]) -> None:
        @server.command(name)
        async def run(ls: PiServer, *raw: Any) -> Any:
            try:
                args = parse_args(raw, kind)
                result = handler(ls, args)
                if asyncio.iscoroutine(result):
                    result = await result
                return result
            except JsonRpcException:
                raise
            except (UnknownSessionError, UnknownEntryError) as error:
                raise JsonRpcInvalidParams(str(error)) from None
            except ForeignSessionError as error:
                raise JsonRpcInvalidParams(
                    f"invalid argument: `uri` is not a session of this workspace: {error}"
                ) from None
            except ForeignFolderError as error:
                raise JsonRpcInvalidParams(
                    f"invalid argument: `folderUri` is not a workspace folder: {error}") from None
            except BusyError as error:
                raise server_error(str(error), BUSY) from None
            except (NotRunningError, NothingToCompactError, SettingsError, SummaryError,
                    MissingApiKeyError, RewindError, SnapshotError, TrustError, ValueError,
                    OSError) as error:
                raise server_error(str(error), FAILED) from None
            except asyncio.CancelledError:
                raise JsonRpcRequestCancelled(f"{name} was cancelled") from None
    return register


def uri_of(path: Path) -> str:
    return from_fs_path(str(path)) or str(path)


# -- lifecycle ---------------------------------------------------------------------------


def read_config(raw: Any) -> Config:
    if isinstance(raw, dict) and isinstance(raw.get("piLsp"), dict):
        raw = raw["piLsp"]
    try:
        return msgspec.convert(raw or {}, Config)
    except msgspec.ValidationError as error:
        server.window_show_message(types.ShowMessageParams(
            type=types.MessageType.Error, message=f"pi-lsp: invalid settings ({error}); "
            "using the defaults"))
        return Config()


@server.feature(types.INITIALIZED)
async def initialized(ls: PiServer, _params: types.InitializedParams) -> None:
    folders = [Path(p) for p in (to_fs_path(f.uri) for f in ls.workspace.folders.values()) if p]
    if not folders and ls.workspace.root_path:
        folders = [Path(ls.workspace.root_path)]
    ls.hub = SessionHub(folders, ls.config, ls.approver_for, ls.files, ls.diagnostics_for)
    ls.hub.listeners.append(ls.on_session_changed)
    ls.hub.notices.append(ls.tell)
    ls.start_watching()


@server.feature(types.INITIALIZE)
def initialize(ls: PiServer, params: types.InitializeParams) -> None:
    ls.config = read_config(params.initialization_options)


@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
def did_change_configuration(ls: PiServer, params: types.DidChangeConfigurationParams) -> None:
    ls.config = read_config(params.settings)
    if ls.hub is not None:
        ls.hub.reconfigure(ls.config)
        ls.start_watching()


@server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
def did_change_folders(ls: PiServer, _params: types.DidChangeWorkspaceFoldersParams) -> None:
    if ls.hub is not None:
        ls.hub.folders = [Path(p) for p in (to_fs_path(f.uri) for f in
                                            ls.workspace.folders.values()) if p]
        ls.start_watching()
        ls.notify(SESSIONS_CHANGED, {})


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: PiServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.files.forget(params.text_document.uri)  # pygls keeps the text; registering syncs it


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: PiServer, params: types.DidChangeTextDocumentParams) -> None:
    ls.files.forget(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: PiServer, params: types.DidCloseTextDocumentParams) -> None:
    ls.files.forget(params.text_document.uri)


@server.feature(types.SHUTDOWN)
async def shutdown(ls: PiServer, _params: None) -> None:
    await ls.shutdown_work()


# -- commands ----------------------------------------------------------------------------


@command("pi.listSessions", NoArgs)
async def list_sessions(ls: PiServer, _args: NoArgs) -> dict[str, Any]:
    sessions = await asyncio.to_thread(ls.sessions().list_sessions)
    listed = []
    for session in sessions:
        item = msgspec.to_builtins(session)
        item["uri"] = uri_of(Path(item.pop("path")))
        listed.append(item)
    return {"sessions": listed}


@command("pi.newSession", NewSessionArgs)
def new_session(ls: PiServer, args: NewSessionArgs) -> dict[str, Any]:
    folder = ls.session_path(args.folder_uri, "folderUri") if args.folder_uri else None
    path = ls.sessions().new_session(args.name, folder)
    ls.known_files.add(path)
    ls.notify(SESSIONS_CHANGED, {})
    return {"uri": uri_of(path)}


async def open_tree(ls: PiServer, uri: str) -> Path:
    """The session's resolved path, its tree loaded off the event loop the first time."""
    hub = ls.sessions()
    path = hub.confine(ls.session_path(uri))  # on every command: folders and settings change
    if path not in hub.trees:
        await asyncio.to_thread(hub.tree, path)
    return path


@command("pi.getTree", TreeArgs)
async def get_tree(ls: PiServer, args: TreeArgs) -> Any:
    return ls.sessions().tree_view(await open_tree(ls, args.uri), args.bookkeeping)


@command("pi.previewContext", PreviewArgs)
async def preview_context(ls: PiServer, args: PreviewArgs) -> Any:
    preview = ls.sessions().preview(await open_tree(ls, args.uri), args.leaf_id, args.layer)
    return preview if args.page is None else paged(preview, args.page, args.start)


@command("pi.diffContext", DiffArgs)
async def diff_context(ls: PiServer, args: DiffArgs) -> Any:
    path = await open_tree(ls, args.uri)
    return ls.sessions().diff(path, args.from_leaf_id, args.to_leaf_id)


@command("pi.branch", BranchArgs)
async def branch(ls: PiServer, args: BranchArgs) -> Any:
    path = await open_tree(ls, args.uri)
    harness = ls.sessions().harness(path)
    outcome = harness.branch(args.target_id, durable=ls.config.durable_leaf_moves)
    if not ls.config.durable_leaf_moves:  # nothing was appended, so say where the leaf went
        ls.on_session_changed(path.resolve(), harness.tree, Refresh(0, False))
    return await with_file_changes(harness, outcome)


async def with_file_changes(harness: Harness, outcome: BranchOutcome) -> dict[str, Any]:
    """A branch's outcome plus `fileChanges`, the count that lets the editor offer a restore."""
    changes = await count_changes(harness.tree, store_for(harness.root), outcome.leaf_id)
    return {**msgspec.to_builtins(outcome), "fileChanges": changes}


@command("pi.fileChanges", FileChangesArgs)
async def get_file_changes(ls: PiServer, args: FileChangesArgs) -> Any:
    harness = ls.sessions().harness(await open_tree(ls, args.uri))
    return await file_changes(harness.tree, store_for(harness.root), args.entry_id)


@command("pi.restoreFiles", RestoreFilesArgs)
async def restore(ls: PiServer, args: RestoreFilesArgs) -> Any:
    if (args.entry_id is None) == (args.undo_id is None):
        raise JsonRpcInvalidParams("invalid argument: give exactly one of `entryId`, `undoId`")
    harness = ls.sessions().harness(await open_tree(ls, args.uri))
    root = harness.root.resolve()
    # Any turn running in the workspace may be writing files, not only this session's; one
    # whose task was started counts before its harness says busy.
    running = [key for key, h in ls.sessions().harnesses.items()
               if (h.busy or key in ls.turn_ids) and h.root.resolve() == root]
    if running:
        raise BusyError(f"a session in this workspace is busy ({Path(running[0]).name}); "
                        "restore files when it is idle")
    return await restore_files(harness.tree, store_for(harness.root), args.entry_id,
                               args.undo_id)


@command("pi.branchWithSummary", BranchSummaryArgs)
async def branch_with_summary(ls: PiServer, args: BranchSummaryArgs) -> dict[str, Any]:
    path = await open_tree(ls, args.uri)
    harness = ls.sessions().harness(path)
    harness.tree.record(args.target_id)
    if harness.busy:
        raise BusyError(f"the session is busy ({harness.phase})")
    job_id = str(uuid.uuid4())

    async def work() -> dict[str, Any]:
        return await with_file_changes(harness, await harness.branch_with_summary(
            args.target_id, args.instructions, durable=ls.config.durable_leaf_moves))

    ls.run_task(ls.run_job(args.uri, job_id, "pi: summarizing the branch", harness, work))
    return {"jobId": job_id}


@command("pi.compact", CompactArgs)
async def compact(ls: PiServer, args: CompactArgs) -> dict[str, Any]:
    path = await open_tree(ls, args.uri)
    if args.dry_run:
        return {"plan": ls.sessions().plan(path)}
    harness = ls.sessions().harness(path)
    if harness.busy:
        raise BusyError(f"the session is busy ({harness.phase})")
    job_id = str(uuid.uuid4())
    ls.run_task(ls.run_job(args.uri, job_id, "pi: compacting", harness,
                           lambda: harness.compact(args.instructions)))
    return {"jobId": job_id}


@command("pi.label", LabelArgs)
async def label(ls: PiServer, args: LabelArgs) -> dict[str, Any]:
    path = await open_tree(ls, args.uri)
    ls.sessions().harness(path).set_label(args.target_id, args.label)
    return {}


@command("pi.fork", ForkArgs)
async def fork(ls: PiServer, args: ForkArgs) -> dict[str, Any]:
    path = await open_tree(ls, args.uri)
    forked = ls.sessions().fork(path, args.leaf_id)
    ls.known_files.add(forked)
    ls.notify(SESSIONS_CHANGED, {})
    return {"uri": uri_of(forked)}


@command("pi.setName", NameArgs)
async def set_name(ls: PiServer, args: NameArgs) -> dict[str, Any]:
    ls.sessions().harness(await open_tree(ls, args.uri)).set_name(args.name)
    return {}


@command("pi.setModel", ModelArgs)
async def set_model(ls: PiServer, args: ModelArgs) -> dict[str, Any]:
    ls.sessions().harness(await open_tree(ls, args.uri)).set_model(args.provider, args.model_id)
    return {}


@command("pi.setThinkingLevel", ThinkingArgs)
async def set_thinking_level(ls: PiServer, args: ThinkingArgs) -> dict[str, Any]:
    ls.sessions().harness(await open_tree(ls, args.uri)).set_thinking_level(args.level)
    return {}


@command("pi.prompt", PromptArgs)
async def prompt(ls: PiServer, args: PromptArgs) -> dict[str, Any]:
    path = await open_tree(ls, args.uri)
    harness = ls.sessions().harness(path)
    attached = await prompt_attachments(ls.files, harness.root, args, harness.approve_call)
    for refusal in attached.refused:
        ls.tell(refusal)
    attachments = attached.rendered
    if args.delivery != "prompt" and harness.busy:
        images = [ImageContent(data=i.data, mime_type=i.mime_type) for i in args.images]
        deliver = harness.steer if args.delivery == "steer" else harness.follow_up
        deliver(args.text, images or None, attachments or None)
        return {"turnId": None, "queued": args.delivery}
    key = path.resolve()
    if harness.busy or key in ls.turn_ids:
        raise BusyError(f"the session is busy ({harness.phase}); steer or follow up instead")
    turn_id = str(uuid.uuid4())
    ls.turn_ids[key] = turn_id  # claimed now, so a second prompt is refused at once
    task = ls.run_task(ls.run_turn(args.uri, turn_id, harness, args, attachments))
    task.add_done_callback(lambda _t: ls.turn_ids.pop(key, None))
    return {"turnId": turn_id}


@command("pi.abort", SessionArgs)
async def abort(ls: PiServer, args: SessionArgs) -> dict[str, Any]:
    harness = ls.sessions().harnesses.get((await open_tree(ls, args.uri)).resolve())
    return {"aborted": harness.abort() if harness is not None else False}


@command("pi.listModels", NoArgs)
def list_models(ls: PiServer, _args: NoArgs) -> dict[str, Any]:
    settings = ls.sessions().folder_settings(ls.sessions().roots()[0])
    models = settings.registry().all()
    return {"models": [{"provider": m.provider, "id": m.id, "name": m.name or m.id,
                        "api": m.api, "reasoning": m.reasoning, "input": m.input,
                        "contextWindow": m.context_window, "maxTokens": m.max_tokens}
                       for m in models],
            "default": f"{settings.default_provider}/{settings.default_model}"}


def trust_json(state: TrustState) -> dict[str, Any]:
    item: dict[str, Any] = msgspec.to_builtins(state)
    item["folderUri"] = uri_of(Path(item.pop("folder")))
    return item


@command("pi.trustStatus", NoArgs)
def trust_status(ls: PiServer, _args: NoArgs) -> dict[str, Any]:
    hub = ls.sessions()
    return {"folders": [trust_json(hub.trust(folder)) for folder in hub.roots()]}


@command("pi.setTrust", SetTrustArgs)
def set_trust(ls: PiServer, args: SetTrustArgs) -> dict[str, Any]:
    if args.parent and not (args.trusted and args.save):
        raise JsonRpcInvalidParams("invalid argument: `parent` trusts the parent folder and "
                                   "needs `trusted: true` and `save: true`")
    folder = ls.session_path(args.folder_uri, "folderUri")
    return trust_json(ls.sessions().set_trust(folder, args.trusted, args.save, args.parent))


@command("pi.check", SessionArgs)
async def check(ls: PiServer, args: SessionArgs) -> dict[str, Any]:
    return {"problems": ls.sessions().check(await open_tree(ls, args.uri))}


class ExpectedErrors(logging.Filter):
    """pygls logs every error answer with a traceback; the ones pi-lsp raises on purpose (bad
    arguments, busy sessions) are answers, not faults, and stay out of the editor's log."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not (isinstance(error, JsonRpcException) and
                    error.code in (JsonRpcInvalidParams.CODE, BUSY, FAILED))


def serve(tcp: str | None = None) -> None:
    logging.basicConfig(level=logging.WARNING, format="pi-lsp: %(levelname)s %(message)s")
    logging.getLogger("pygls.protocol.json_rpc").addFilter(ExpectedErrors())
    if tcp:
        host, _, port = tcp.rpartition(":")
        server.start_tcp(host or "127.0.0.1", int(port))
    else:
        server.start_io()
