"""Tool approval as an editor sees it: `pi/approveTool`, or the fallback question."""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path

from pi_lsp.agent.access import folded, folded_inside, home_folders, inside, runs_on_its_own
from pi_lsp.agent.approval import ApprovalRequest, Approver, unshowable
from pi_lsp.agent.stopping import in_worker
from pi_lsp.paths import real_path
from pi_lsp.server.config import Config
from pi_lsp.server.open_session import OpenSession
from pi_lsp.server.protocol import (
    APPROVE_TOOL,
    ApproveToolParams,
    Decision,
    client_approves_tools,
    json_text,
    parse_approval,
)
from pi_lsp.visible import visible

SHOW_LIMIT = 2000  # the longest command or diff the fallback question shows (always in full)
ALLOW, ALLOW_SESSION, DENY = "Allow", "Allow for this session", "Deny"
CHOICES: dict[str, Decision] = {ALLOW: "allow", ALLOW_SESSION: "allowSession"}
# What "allow for this session" allows: a tool, inside or outside the workspace (True), and
# outside only what `outside_scope` covers (None: anywhere in the workspace).
Grant = tuple[str, bool, Path | None]
# How the fallback question names what a grant outside the workspace allows, by tool.
VERBS = {"read": "reading", "write": "writing", "edit": "editing"}
# Folders below the home folder where each program keeps its own folder or files (~/.config/gcloud,
# ~/.config/rclone): reading one file directly in one of them is no reason to read every
# program's tokens there, as a folder directly in the home folder is none to read its siblings.
SHARED_DIRS = (".config", ".local/share", "Library/Application Support", "Library/Preferences")


class NotAsked(Exception):
    """The user could not be asked, or gave no decision; the message is what the model reads."""


def approve_tool_params(request: ApprovalRequest, uri: str, turn_id: str | None, title: str,
                        granted: Grant | None) -> ApproveToolParams:
    """Everything the user approves: the whole command, or the whole change and its diff, and
    what "allow for this session" would allow (`granted`)."""
    call, change = request.call, request.change
    params = ApproveToolParams(uri=uri, turn_id=turn_id, tool_call_id=call.id, tool=call.name,
                               title=title, outside_workspace=request.outside_workspace,
                               allow_for_session=granted is not None)
    if granted is not None and granted[2] is not None:
        params.session_scope = str(granted[2])
    if call.name == "bash":
        params.command = str(call.object_arguments.get("command"))
    if request.attachment:
        params.attachment = True
    if request.path is not None:
        params.path = str(request.path)
    if change is not None:
        params.old_text, params.new_text, params.diff = \
            change.old_text, change.new_text, change.diff()
    return params


def fallback_question(request: ApprovalRequest, title: str) -> str:
    """The `window/showMessageRequest` text: the tool, its whole command or path, the session (a
    repository may name it, so never first), any diff. The model's and the repository's text is
    made visible (escapes for what could hide or reorder it, long white space as its length).
    NotAsked when too long to show in full."""
    name, change = request.call.name, request.change
    if change is not None and not change.diffable():  # its diff would be only its size
        raise NotAsked(f"the change is too large to show for approval; {name} was not run. "
                       "Split it into smaller steps.")
    if name == "bash":
        shown, what = visible(str(request.call.object_arguments.get("command"))), "command"
    else:
        shown, what = visible(change.diff() if change is not None else ""), "change (as a diff)"
    if len(shown) > SHOW_LIMIT:
        raise NotAsked(f"the {what} is {len(shown)} characters long, too long to show in full "
                       f"for approval (the limit is {SHOW_LIMIT}); {name} was not run. Split "
                       "it into smaller steps.")
    session = f" (session: {visible(title)})"
    if name == "bash":
        return f"pi wants to run bash: {shown}{session}"
    outside = " (outside the workspace)" if request.outside_workspace else ""
    return f"pi wants to run {name}: {visible(str(request.path))}{outside}{session}" + \
        (f"\n{shown}" if change is not None else "") + scope_question(request)


def scope_question(request: ApprovalRequest) -> str:
    """The line saying which files "allow for this session" covers, for a read, write or edit
    outside the workspace (it covers only those); empty for other calls."""
    granted = grant(request)
    scope = granted[2] if granted is not None else None
    if scope is None:
        return ""
    what = "this file" if scope == request.path else f"files in {visible(str(scope))} and below"
    return f'\n"{ALLOW_SESSION}" allows {VERBS[request.call.name]} {what} only.'


def outside_scope(path: Path) -> Path:
    """What allowing a call on `path` outside the workspace for the session covers: its folder
    and below, or the file alone where that folder holds many programs' files (`_shared`)."""
    folder = path.parent
    if folder == folder.parent or any(_shared(folder, home) for home in home_folders()):
        return path
    return folder


def _shared(folder: Path, home: Path) -> bool:
    """Whether `folder` is the home folder or above it, directly in it, or a folder below it
    that programs share (SHARED_DIRS): its files are not one thing's, as ~/projects/x's are."""
    return folded_inside(home, folder) or folded(folder.parent) == folded(home) or \
        any(folded(folder) == folded(home / name) for name in SHARED_DIRS)


def grant(request: ApprovalRequest) -> Grant | None:
    """What "allow for this session" allows: the tool, inside or outside the workspace only,
    and outside only in its `outside_scope` (allowing one read or write outside must not allow
    reading or writing anything anywhere). None, asked every time, for a change to what runs
    on its own (`runs_on_its_own`) and for a prompt's attachment: the user's own file allows
    the model's tools nothing."""
    if request.attachment or (request.change is not None and
                              runs_on_its_own(request.change.path)):
        return None
    name, outside, path = request.call.name, request.outside_workspace, request.path
    return name, outside, outside_scope(path) if outside and path is not None else None


def covers(granted: Grant, request: ApprovalRequest) -> bool:
    """Whether a grant the user gave allows `request` (whose own `grant` is not None)."""
    name, outside, scope = granted
    return (name, outside) == (request.call.name, request.outside_workspace) and (
        scope is None or (request.path is not None and inside(request.path, scope)))


class ToolApprovals:
    """Asks the editor's user before a tool runs, unless approval is automatic or the tool
    was allowed for the session."""

    def __init__(self, server: LanguageServer, config: Callable[[], Config]) -> None:
        self.server, self.config = server, config

    def approver_for(self, session: OpenSession) -> Approver:
        async def approve(request: ApprovalRequest) -> str | None:
            name = request.call.name
            granted = grant(request)
            if self.config().tool_approval == "auto" or (granted is not None and any(
                    covers(given, request) for given in session.allowed_tools)):
                return None
            # In worker threads, as all that reads or diffs a whole file: the loop goes on, and
            # an abort stops them.
            refusal = await in_worker(functools.partial(unshowable, request))
            if refusal is not None:
                return refusal
            try:
                if client_approves_tools(self.server.client_capabilities):
                    # The file the session is in now: another program cutting it short
                    # mid-turn moves the session (and its harness) to a new file.
                    path = str(real_path(session.tree.path))
                    decision = await self.ask_approve_tool(await in_worker(functools.partial(
                        approve_tool_params, request, from_fs_path(path) or path,
                        session.turn_id, session.title, granted)))
                else:
                    question = await in_worker(functools.partial(fallback_question, request,
                                                                 session.title))
                    decision = await self.ask_message(name, question, granted is not None)
            except NotAsked as error:
                return str(error)
            # An editor that offers it regardless (older than `allowForSession`) gets a plain
            # allow for such a call: nothing is remembered.
            if decision == "allowSession" and granted is not None:
                session.allowed_tools.add(granted)
            return None if decision != "deny" else f"the user denied running {name}"
        return approve

    async def ask(self, method: str, params: Any) -> Any:
        """The editor's answer to request `method`. An abort ends the wait and cancels the
        request (`$/cancelRequest`, which pygls never sends itself): the question goes."""
        msg_id = str(uuid.uuid4())
        answer = self.server.protocol.send_request_async(method, params, msg_id=msg_id)
        try:
            # Not shielded: an abort cancels the request, whose late answer is then ignored.
            # A shield kept it pending, and the error an editor answered was never read.
            return await answer
        except asyncio.CancelledError:
            if answer.cancelled():  # not answered before the abort
                self.server.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
            raise

    async def ask_approve_tool(self, params: ApproveToolParams) -> Decision:
        try:
            answer = await self.ask(APPROVE_TOOL, params)
        except Exception as error:  # an error answer counts as a denial
            raise NotAsked(f"the user could not be asked to approve {params.tool} ({error}); "
                           "it was not run") from None
        result = parse_approval(answer)
        if result is None:
            raise NotAsked(f"the editor answered the approval request with {json_text(answer)}, "
                           f"not allow, allowSession or deny; {params.tool} was not run")
        return result.decision

    async def ask_message(self, name: str, question: str, for_session: bool) -> Decision:
        # Offered only where it is remembered (`grant`): otherwise it would read as a promise
        # not to ask again, and the next call would ask anyway.
        titles = (ALLOW, ALLOW_SESSION, DENY) if for_session else (ALLOW, DENY)
        params = types.ShowMessageRequestParams(
            type=types.MessageType.Warning, message=question,
            actions=[types.MessageActionItem(t) for t in titles],
        )
        try:
            answer = await self.ask(types.WINDOW_SHOW_MESSAGE_REQUEST, params)
        except Exception as error:  # a client that cannot ask counts as a denial
            raise NotAsked(f"the user could not be asked to approve {name} ({error}); "
                           "it was not run") from None
        return CHOICES.get(answer.title if answer is not None else "", "deny")
