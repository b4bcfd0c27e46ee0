"""Tool approval as an editor sees it: `pi/approveTool` params, or the fallback question."""

from __future__ import annotations

from pi_lsp.agent.approval import ApprovalRequest
from pi_lsp.server.protocol import ApproveToolParams

SHOW_LIMIT = 2000  # the longest command or diff the fallback question shows (always in full)


class NotAsked(Exception):
    """The user could not be asked, or gave no decision; the message is what the model reads."""


def approve_tool_params(request: ApprovalRequest, uri: str, turn_id: str | None, title: str
                        ) -> ApproveToolParams:
    """Everything the user approves: the whole command, or the whole change and its diff."""
    call, change = request.call, request.change
    params = ApproveToolParams(uri=uri, turn_id=turn_id, tool_call_id=call.id, tool=call.name,
                               title=title, outside_workspace=request.outside_workspace)
    if call.name == "bash":
        params.command = str(call.arguments.get("command"))
    if request.path is not None:
        params.path = str(request.path)
    if change is not None:
        params.old_text, params.new_text, params.diff = \
            change.old_text, change.new_text, change.diff()
    return params


def fallback_question(request: ApprovalRequest, title: str) -> str:
    """The `window/showMessageRequest` text: the session, the tool, and the whole command or
    diff. NotAsked when that is too long to show in full."""
    name, change = request.call.name, request.change
    if name == "bash":
        shown, what = str(request.call.arguments.get("command")), "command"
    else:
        shown, what = (change.diff() if change is not None else ""), "change (as a diff)"
    if len(shown) > SHOW_LIMIT:
        raise NotAsked(f"the {what} is {len(shown)} characters long, too long to show in full "
                       f"for approval (the limit is {SHOW_LIMIT}); {name} was not run. Split "
                       "it into smaller steps.")
    question = f"pi ({title}) wants to run {name}: "
    if name == "bash":
        return question + shown
    outside = " (outside the workspace)" if request.outside_workspace else ""
    return f"{question}{request.path}{outside}" + (f"\n{shown}" if change is not None else "")
