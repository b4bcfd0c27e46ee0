"""`pi-lsp serve`: lifecycle and the command table; the work happens in the hub and harness."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import selectors
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from pi_lsp.server import stdio
from pi_lsp.server.commands import NAMES
from pi_lsp.server.config import Config, read_config
from pi_lsp.server.errors import NOT_INITIALIZED, ExpectedErrors, server_error
from pi_lsp.server.protocol import SESSIONS_CHANGED, PiProtocol
from pi_lsp.visible import printable

if TYPE_CHECKING:
    from pi_lsp.server.editor import EditorFiles
    from pi_lsp.server.hub import SessionHub
    from pi_lsp.server.turns import Runs
    from pi_lsp.server.watcher import SessionWatch
    from pi_lsp.server.workbench import Workbench

SHUTDOWN_WAIT_S = 1.5


class PiServer(LanguageServer):
    protocol: PiProtocol

    def __init__(self) -> None:
        super().__init__("pi-lsp", "0.1.0", protocol_cls=PiProtocol, max_workers=4)
        self.config = Config()
        self._workbench: Workbench | None = None
        self._finishing: asyncio.Future[None] | None = None

    def start_io(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        """Serve stdio with framing faults survived; SIGTERM or a closed stdin ends like
        `shutdown` (running turns are aborted and saved)."""
        stdio.start_io(self, self.protocol.receive, self.end, stdin, stdout)

    def start_tcp(self, host: str, port: int) -> None:
        """Serve the first client to connect as stdio is served: pygls' own TCP loop lacks
        its fixes (an `exit` there lost the running turn, and bad input logged tracebacks)."""
        try:
            with sigterm_raises():
                connection = first_client(host, port)
        except Terminated:  # nothing has started to be saved: ends as it does with a client
            return
        with connection, connection.makefile("rb") as stdin:
            stdout = connection.makefile("wb")
            try:
                self.start_io(stdin, stdout)
            finally:
                with contextlib.suppress(OSError):  # a lost client is owed what is buffered
                    stdout.close()

    @property
    def workbench(self) -> Workbench:
        """The session side; an error answer until `initialized`."""
        if self._workbench is None:
            raise server_error("the server is not initialized yet", NOT_INITIALIZED)
        return self._workbench

    @property
    def hub(self) -> SessionHub:
        """The workspace's sessions; an error answer until `initialized`."""
        return self.workbench.hub

    # The session side's parts the commands use, each an error answer until `initialized`.
    @property
    def runs(self) -> Runs:
        return self.workbench.runs

    @property
    def files(self) -> EditorFiles:
        return self.workbench.files

    @property
    def watch(self) -> SessionWatch:
        return self.workbench.watch

    @property
    def started(self) -> bool:
        return self._workbench is not None

    def start(self, folders: list[Path]) -> None:
        """Take the workspace folders: the session side is made and its directories watched."""
        # Imported here, after the `initialize` answer: the session side is most of pi-lsp's
        # own start-up, and nothing before `initialized` uses it (issue 19).
        from pi_lsp.server.workbench import Workbench
        self._workbench = Workbench(self, folders)

    def session_path(self, uri: str, field: str = "uri") -> Path:
        path = to_fs_path(uri) if uri.startswith("file:") else None
        if path is None:
            raise JsonRpcInvalidParams(
                f"invalid argument: `{field}` must be a file: URI, not {uri!r}")
        if "\0" in path:  # no file can have it (%00): say which argument, not the OS's words
            raise JsonRpcInvalidParams(
                f"invalid argument: `{field}` names a path with a NUL character: {uri!r}")
        return Path(path)

    async def open_tree(self, uri: str) -> Path:
        """The session's resolved path, its tree loaded off the event loop the first time."""
        hub = self.hub
        path = hub.confine(self.session_path(uri))  # on every command: folders, settings change
        await hub.load(path)
        return path

    def workspace_folders(self) -> list[Path]:
        return [Path(p) for p in (to_fs_path(f.uri) for f in self.workspace.folders.values())
                if p]

    def tell(self, message: str) -> None:
        """A notice on one line: the names it quotes (a session file's) a repository chose."""
        self.window_show_message(types.ShowMessageParams(
            type=types.MessageType.Warning, message=f"pi-lsp: {printable(message)}"))

    def take_config(self, raw: Any) -> None:
        """The editor's settings; each invalid one is named and left at its default."""
        self.config, refused = read_config(raw)
        if refused:
            self.window_show_message(types.ShowMessageParams(
                type=types.MessageType.Error, message="pi-lsp: invalid settings left at their "
                f"defaults: {'; '.join(refused)}"))

    async def end(self) -> None:
        """The input's end, SIGTERM or `exit`: the shutdown work, `shutdown`'s answer sent if
        one was asked (before, the end ran the work a second time beside it), and the requests
        still in flight cancelled."""
        await self.shutdown_work()
        await self.protocol.shutdown_answered()
        await self.protocol.end_in_flight()

    async def shutdown_work(self) -> None:
        """Abort every running or claimed turn and job, as `pi.abort` does (a turn is persisted
        as aborted), and stop watching; no task is left running. Done once: a second caller
        waits for the first."""
        if self._finishing is None:
            self._finishing = asyncio.ensure_future(self._finish())
        await asyncio.shield(self._finishing)

    async def _finish(self) -> None:
        if self._workbench is None:  # nothing was started
            return
        for session in self._workbench.hub.open.values():
            session.abort()
        # Past the grace the editor's answers are waited for no longer: an edit it still
        # applies ended the aborted call 5 s later (ABORTED_WRITE_WAIT_S), not at once.
        await self._workbench.tasks.finish(SHUTDOWN_WAIT_S, self.protocol.stop_asking)
        await self._workbench.watch.stop()


class Terminated(Exception):
    """SIGTERM, while the server waits for its client."""


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """SIGTERM raises Terminated in here, as Ctrl-C raises KeyboardInterrupt: its default
    ended the process at once (-15, no word) where with a client it ends as `shutdown` does."""
    def terminated(_signal: int, _frame: object) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def first_client(host: str, port: int) -> socket.socket:
    """The first connection to PORT on any of HOST's addresses, each listened on (as pygls'
    asyncio listener did: `localhost` is both 127.0.0.1 and ::1 where /etc/hosts says so).
    The port said is the one bound, so a client of port 0 learns it without guessing."""
    listeners = listening(host, port)
    bound = listeners[0].getsockname()[1]
    print(f"pi-lsp: listening on {host}:{bound}", file=sys.stderr, flush=True)
    with contextlib.ExitStack() as stack, selectors.DefaultSelector() as selector:
        for listener in listeners:
            stack.enter_context(listener)
            selector.register(listener, selectors.EVENT_READ, listener)
        while True:
            for key, _ in selector.select():
                ready: socket.socket = key.data
                with contextlib.suppress(BlockingIOError):  # that client left before accept
                    connection, _ = ready.accept()
                    connection.setblocking(True)
                    return connection


def listening(host: str, port: int) -> list[socket.socket]:
    """A non-blocking socket listening on each of HOST's addresses at PORT; a failure to bind
    worded as asyncio's (as pygls' listener said it)."""
    addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    listeners: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(addresses):
            if listeners:  # port 0 picks one for the first address: the others take it too
                address = (address[0], listeners[0].getsockname()[1], *address[2:])
            listeners.append(listener := socket.socket(family, kind, proto))
            bind(listener, address)
    except OSError:
        for listener in listeners:
            listener.close()
        raise
    return listeners


def bind(listener: socket.socket, address: Any) -> None:
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if listener.family == socket.AF_INET6:  # else :: would hold 0.0.0.0's port too
        listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    listener.setblocking(False)
    try:
        listener.bind(address)
        listener.listen()
    except OSError as error:
        raise OSError(error.errno, f"error while attempting to bind on address {address!r}: "
                                   f"{(error.strerror or '').lower()}") from None


server = PiServer()


def command(name: str) -> None:
    """Register a command: the session side runs it once `initialized` has made it."""
    @server.command(name)
    async def run(ls: PiServer, *raw: Any) -> Any:
        return await ls.workbench.run(name, raw)


# -- lifecycle ---------------------------------------------------------------------------


@server.feature(types.INITIALIZE)
def initialize(ls: PiServer, params: types.InitializeParams) -> None:
    ls.take_config(params.initialization_options)


# Not a coroutine: pygls would run it as a task, after the messages read with `initialized`
# (an editor's didOpen of its open buffers), which found no session side to tell.
@server.feature(types.INITIALIZED)
def initialized(ls: PiServer, _params: types.InitializedParams) -> None:
    # LSP sends it once: a second made another session side, blind to the first's buffers and
    # turns, the first's watch left running.
    if ls.started:
        return
    folders = ls.workspace_folders()
    if not folders and ls.workspace.root_path:
        folders = [Path(ls.workspace.root_path)]
    ls.start(folders)


@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
def did_change_configuration(ls: PiServer, params: types.DidChangeConfigurationParams) -> None:
    ls.take_config(params.settings)
    if ls.started:
        before = set(ls.hub.all_directories())
        ls.hub.reconfigure(ls.config)
        ls.watch.follow(ls.hub.all_directories())
        if set(ls.hub.all_directories()) != before:  # `sessionDirs` changed: so did the listing
            ls.protocol.notify(SESSIONS_CHANGED, {})


@server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
def did_change_folders(ls: PiServer, _params: types.DidChangeWorkspaceFoldersParams) -> None:
    if ls.started:
        ls.hub.change_folders(ls.workspace_folders())
        ls.watch.follow(ls.hub.all_directories())
        ls.protocol.notify(SESSIONS_CHANGED, {})


# Before `initialized` (a client that did not wait for it) pygls keeps the documents, and the
# session side syncs them once it is made.
@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: PiServer, params: types.DidOpenTextDocumentParams) -> None:
    if ls.started:
        ls.files.synced(params.text_document.uri)  # pygls keeps the text; registering syncs it


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: PiServer, params: types.DidChangeTextDocumentParams) -> None:
    if ls.started:
        ls.files.synced(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: PiServer, params: types.DidSaveTextDocumentParams) -> None:
    if ls.started:
        ls.files.saved(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: PiServer, params: types.DidCloseTextDocumentParams) -> None:
    if ls.started:
        ls.files.forget(params.text_document.uri)


@server.feature(types.SHUTDOWN)
async def shutdown(ls: PiServer, _params: None) -> None:
    await ls.shutdown_work()


# -- commands ----------------------------------------------------------------------------

for name in NAMES:
    command(name)


def serve(tcp: str | None = None) -> None:
    logging.basicConfig(level=logging.WARNING, format="pi-lsp: %(levelname)s %(message)s")
    logging.getLogger("pygls.protocol.json_rpc").addFilter(ExpectedErrors())
    if tcp:
        host, _, port = tcp.rpartition(":")
        server.start_tcp(host or "127.0.0.1", int(port))
    else:
        server.start_io()
