"""`pi-lsp serve`: lifecycle and the command table; the work happens in the hub and harness."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import msgspec
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams, JsonRpcRequestCancelled
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from pi_lsp.agent.harness import Harness
from pi_lsp.files.history import count_changes, file_changes, restore_files
from pi_lsp.files.snapshots import store_for
from pi_lsp.server import stdio
from pi_lsp.server.approvals import ToolApprovals
from pi_lsp.server.config import Config, read_config
from pi_lsp.server.editor import EditorFiles, editor_problems, experimental_flag, prompt_attachments
from pi_lsp.server.errors import FAILED, ExpectedErrors, as_answer, server_error
from pi_lsp.server.hub import SessionHub
from pi_lsp.server.protocol import (
    SESSION_CHANGED,
    SESSIONS_CHANGED,
    BranchArgs,
    BranchSummaryArgs,
    CompactArgs,
    DiffArgs,
    FileChangesArgs,
    ForkArgs,
    LabelArgs,
    ModelArgs,
    ModelItem,
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
    parse_args,
)
from pi_lsp.server.tasks import Tasks
from pi_lsp.server.turns import Runs, prompt_images
from pi_lsp.server.watcher import SessionWatch
from pi_lsp.session.tree import Refresh, SessionTree
from pi_lsp.summarize.branch import BranchOutcome
from pi_lsp.trust import TrustState

SHUTDOWN_WAIT_S = 1.5
A = TypeVar("A")


def uri_of(path: Path) -> str:
    return from_fs_path(str(path)) or str(path)


class PiServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("pi-lsp", "0.1.0", protocol_cls=PiProtocol, max_workers=4)
        self.config = Config()
        self.hub: SessionHub | None = None
        self.tasks = Tasks()
        self.runs = Runs(self, self.tasks)
        self.approvals = ToolApprovals(self, lambda: self.config)
        self.files = EditorFiles(self)
        self.watch = SessionWatch(lambda path: self.sessions().file_changed(path),
                                  lambda: self.protocol.notify(SESSIONS_CHANGED, {}),
                                  self.tasks.start)

    def start_io(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        """Serve stdio with framing faults survived; SIGTERM or a closed stdin ends like
        `shutdown` (running turns are aborted and saved)."""
        stdio.start_io(self, self.shutdown_work, stdin, stdout)

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

    def workspace_folders(self) -> list[Path]:
        return [Path(p) for p in (to_fs_path(f.uri) for f in self.workspace.folders.values())
                if p]

    def on_session_changed(self, path: Path, tree: SessionTree, change: Refresh) -> None:
        note: dict[str, Any] = {"uri": uri_of(path), "entries": len(tree.records),
                                "leafId": tree.leaf_id, "reloaded": change.reloaded}
        if change.relocated_from is not None:
            note["relocatedFrom"] = uri_of(Path(change.relocated_from))
            self.tell(f"{change.relocated_from} was replaced by another program; this session "
                      f"(with both sides kept) continues in {path}")
            self.protocol.notify(SESSIONS_CHANGED, {})
        self.protocol.notify(SESSION_CHANGED, note)

    def diagnostics_for(self, root: Path) -> Callable[[list[Path]], Awaitable[str | None]]:
        async def problems(paths: list[Path]) -> str | None:
            if not self.config.diagnostics_feedback or not experimental_flag(self, "diagnostics"):
                return None
            return await editor_problems(self, root, paths)
        return problems

    def tell(self, message: str) -> None:
        self.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning,
                                                         message=f"pi-lsp: {message}"))

    def take_config(self, raw: Any) -> None:
        try:
            self.config = read_config(raw)
        except msgspec.ValidationError as error:
            self.window_show_message(types.ShowMessageParams(
                type=types.MessageType.Error, message=f"pi-lsp: invalid settings ({error}); "
                "using the defaults"))
            self.config = Config()

    async def shutdown_work(self) -> None:
        """Abort every running turn (each is persisted as aborted) and stop watching; no task
        is left running."""
        for session in self.hub.open.values() if self.hub is not None else ():
            if session.harness is not None:
                session.harness.abort()
        await self.tasks.finish(SHUTDOWN_WAIT_S)
        await self.watch.stop()


server = PiServer()


def command(name: str, kind: type[A]) -> Callable[[Callable[[PiServer, A], Any]], None]:
    """Register a command taking one object argument of `kind`; every failure answers."""
    def register(handler: Callable[[PiServer, A], Any]) -> None:
        @server.command(name)
        async def run(ls: PiServer, *raw: Any) -> Any:
            try:
                result = handler(ls, parse_args(raw, kind))
                return await result if asyncio.iscoroutine(result) else result
            except asyncio.CancelledError:
                raise JsonRpcRequestCancelled(f"{name} was cancelled") from None
            except Exception as error:
                answer = as_answer(error)
                if answer is error:
                    raise
                raise answer from None
    return register


# -- lifecycle ---------------------------------------------------------------------------


@server.feature(types.INITIALIZE)
def initialize(ls: PiServer, params: types.InitializeParams) -> None:
    ls.take_config(params.initialization_options)


@server.feature(types.INITIALIZED)
async def initialized(ls: PiServer, _params: types.InitializedParams) -> None:
    folders = ls.workspace_folders()
    if not folders and ls.workspace.root_path:
        folders = [Path(ls.workspace.root_path)]
    ls.hub = SessionHub(folders, ls.config, ls.approvals.approver_for, ls.files,
                        ls.diagnostics_for)
    ls.hub.listeners.append(ls.on_session_changed)
    ls.hub.notices.append(ls.tell)
    ls.watch.follow(ls.hub.all_directories())


@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
def did_change_configuration(ls: PiServer, params: types.DidChangeConfigurationParams) -> None:
    ls.take_config(params.settings)
    if ls.hub is not None:
        ls.hub.reconfigure(ls.config)
        ls.watch.follow(ls.hub.all_directories())


@server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
def did_change_folders(ls: PiServer, _params: types.DidChangeWorkspaceFoldersParams) -> None:
    if ls.hub is not None:
        ls.hub.folders = ls.workspace_folders()
        ls.watch.follow(ls.hub.all_directories())
        ls.protocol.notify(SESSIONS_CHANGED, {})


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
    ls.watch.created(path)
    return {"uri": uri_of(path)}


async def open_tree(ls: PiServer, uri: str) -> Path:
    """The session's resolved path, its tree loaded off the event loop the first time."""
    hub = ls.sessions()
    path = hub.confine(ls.session_path(uri))  # on every command: folders and settings change
    if path not in hub.open:
        await asyncio.to_thread(hub.tree, path)
    return path


@command("pi.getTree", SessionArgs)
async def get_tree(ls: PiServer, args: SessionArgs) -> Any:
    return ls.sessions().tree_view(await open_tree(ls, args.uri))


@command("pi.previewContext", PreviewArgs)
async def preview_context(ls: PiServer, args: PreviewArgs) -> Any:
    return ls.sessions().preview(await open_tree(ls, args.uri), args.leaf_id, args.layer)


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
    ls.sessions().require_workspace_idle(harness.root)
    return await restore_files(harness.tree, store_for(harness.root), args.entry_id,
                               args.undo_id)


@command("pi.branchWithSummary", BranchSummaryArgs)
async def branch_with_summary(ls: PiServer, args: BranchSummaryArgs) -> dict[str, Any]:
    path = await open_tree(ls, args.uri)
    harness = ls.sessions().harness(path)
    harness.tree.record(args.target_id)
    ls.sessions().require_idle(path)

    async def work() -> dict[str, Any]:
        return await with_file_changes(harness, await harness.branch_with_summary(
            args.target_id, args.instructions, durable=ls.config.durable_leaf_moves))

    return {"jobId": ls.runs.start_job(args.uri, "pi: summarizing the branch", harness, work)}


@command("pi.compact", CompactArgs)
async def compact(ls: PiServer, args: CompactArgs) -> dict[str, Any]:
    path = await open_tree(ls, args.uri)
    if args.dry_run:
        return {"plan": ls.sessions().plan(path)}
    harness = ls.sessions().harness(path)
    ls.sessions().require_idle(path)
    return {"jobId": ls.runs.start_job(args.uri, "pi: compacting", harness,
                                       lambda: harness.compact(args.instructions))}


@command("pi.label", LabelArgs)
async def label(ls: PiServer, args: LabelArgs) -> dict[str, Any]:
    ls.sessions().harness(await open_tree(ls, args.uri)).set_label(args.target_id, args.label)
    return {}


@command("pi.fork", ForkArgs)
async def fork(ls: PiServer, args: ForkArgs) -> dict[str, Any]:
    forked = ls.sessions().fork(await open_tree(ls, args.uri), args.leaf_id)
    ls.watch.created(forked)
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
    if args.delivery != "prompt" and harness.busy:
        deliver = harness.steer if args.delivery == "steer" else harness.follow_up
        deliver(args.text, prompt_images(args), attached.rendered or None)
        return {"turnId": None, "queued": args.delivery}
    session = ls.sessions().claim_turn(path)
    ls.runs.start_turn(args.uri, session, harness, args, attached.rendered)
    return {"turnId": session.turn_id}


@command("pi.abort", SessionArgs)
async def abort(ls: PiServer, args: SessionArgs) -> dict[str, Any]:
    harness = ls.sessions().running(await open_tree(ls, args.uri))
    return {"aborted": harness.abort() if harness is not None else False}


@command("pi.listModels", NoArgs)
def list_models(ls: PiServer, _args: NoArgs) -> dict[str, Any]:
    settings = ls.sessions().default_settings()
    return {"models": [ModelItem.of(m) for m in settings.registry().all()],
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


def serve(tcp: str | None = None) -> None:
    logging.basicConfig(level=logging.WARNING, format="pi-lsp: %(levelname)s %(message)s")
    logging.getLogger("pygls.protocol.json_rpc").addFilter(ExpectedErrors())
    if tcp:
        host, _, port = tcp.rpartition(":")
        server.start_tcp(host or "127.0.0.1", int(port))
    else:
        server.start_io()
