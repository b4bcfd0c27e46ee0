"""The server's session side, made at `initialized` from the workspace's folders: the hub, the
turns and jobs, the editor's files, tool approvals, the watch of the session directories and
the commands. It imports most of pi-lsp (the agent, providers, summarize: about 0.06 s), so
the server imports it only then: its `initialize` answer waits for none of it (issue 19)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
from pygls.exceptions import JsonRpcRequestCancelled

from pi_lsp.server.approvals import ToolApprovals
from pi_lsp.server.commands import Command, entries, files, runs, sessions, workspace
from pi_lsp.server.editor import EditorFiles, editor_problems, experimental_flag
from pi_lsp.server.failures import EXPECTED, as_answer
from pi_lsp.server.hub import SessionHub
from pi_lsp.server.protocol import SESSION_CHANGED, SESSIONS_CHANGED, parse_args, uri_of
from pi_lsp.server.tasks import Tasks
from pi_lsp.server.turns import Runs
from pi_lsp.server.watcher import SessionWatch
from pi_lsp.session.catalog import tree_title

if TYPE_CHECKING:
    from pi_lsp.server.server import PiServer
    from pi_lsp.session.records import Refresh
    from pi_lsp.session.tree import SessionTree

COMMANDS: dict[str, Command] = {command[0]: command for table in (
    sessions.COMMANDS, entries.COMMANDS, files.COMMANDS, runs.COMMANDS, workspace.COMMANDS)
    for command in table}


class Workbench:
    """The session side of one server, for the folders `initialized` found."""

    def __init__(self, server: PiServer, folders: list[Path]) -> None:
        self.server = server
        self.tasks = Tasks(EXPECTED)
        self.runs = Runs(server, self.tasks)
        self.approvals = ToolApprovals(server, lambda: server.config)
        self.files = EditorFiles(server)
        # Opened before `initialized`: synced as at didOpen, by the URI as the client sent it.
        for document in server.workspace.text_documents.values():
            self.files.synced(document.uri)
        self.watch = SessionWatch(lambda path: self.hub.file_changed(path),
                                  lambda: server.protocol.notify(SESSIONS_CHANGED, {}),
                                  self.tasks.start)
        self.hub = SessionHub(folders, server.config, self.approvals.approver_for, self.files,
                              self.diagnostics_for, self.tasks)
        self.hub.listeners.append(self.on_session_changed)
        self.hub.notices.append(server.tell)
        self.watch.follow(self.hub.all_directories())

    async def run(self, name: str, raw: tuple[Any, ...]) -> Any:
        """Command `name` on its one object argument; every failure answers."""
        _, kind, handler = COMMANDS[name]
        try:
            result = handler(self.server, parse_args(raw, kind))
            return await result if asyncio.iscoroutine(result) else result
        except asyncio.CancelledError:
            raise JsonRpcRequestCancelled(f"{name} was cancelled") from None
        except Exception as error:
            answer = as_answer(error)
            if answer is error:
                raise
            raise answer from None

    def on_session_changed(self, path: Path, tree: SessionTree, change: Refresh) -> None:
        # The title too: a name written (a queued one at the turn's end, the CLI's) reaches
        # chats that show no tree, so carry no tree delta.
        note: dict[str, Any] = {"uri": uri_of(path), "entries": len(tree.records),
                                "leafId": tree.shown_leaf(), "title": tree_title(tree),
                                "reloaded": change.reloaded}
        delta = self.hub.tree_delta(path, tree)  # for editors showing the tree
        if delta is not None:
            note["tree"] = msgspec.to_builtins(delta)
        protocol = self.server.protocol
        if change.relocated_from is not None:
            note["relocatedFrom"] = uri_of(Path(change.relocated_from))
            self.server.tell(f"{change.relocated_from} was replaced by another program; this "
                             f"session (with both sides kept) continues in {path}")
            protocol.notify(SESSIONS_CHANGED, {})
        protocol.notify(SESSION_CHANGED, note)

    def diagnostics_for(self, root: Path) -> Callable[[list[Path]], Awaitable[str | None]]:
        server = self.server

        async def problems(paths: list[Path]) -> str | None:
            if not server.config.diagnostics_feedback or not experimental_flag(server,
                                                                               "diagnostics"):
                return None
            return await editor_problems(server, root, paths)
        return problems
