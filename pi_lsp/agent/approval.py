"""What the user is asked before a tool call runs, worked out without running anything."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from pathlib import Path

import msgspec

from pi_lsp.agent.tools import (
    InvalidArguments,
    Proposal,
    Refused,
    ToolContext,
    ToolError,
    ToolResult,
    bash_schema_arguments,
    off_loop,
    propose_change,
    refuse_long_timeout,
    thrown_result,
    tool_arguments,
    undecodable,
    unrun_result,
)
from pi_lsp.session.entries import ToolCall
from pi_lsp.visible import bidi_controls


class ApprovalRequest(msgspec.Struct, frozen=True):
    """One call to approve: a bash command as a whole, a read outside the workspace, or a
    write or edit with the exact change it would make."""

    call: ToolCall
    outside_workspace: bool
    path: Path | None = None
    change: Proposal | None = None
    # A prompt's file (`context`) rather than a tool call: it waits for its message, which may
    # be queued behind a turn that ends meanwhile, not for that turn.
    attachment: bool = False


# None to run the call, or the reason it was refused (the model reads it as the tool's result).
Approver = Callable[[ApprovalRequest], Awaitable[str | None]]


async def allow_all(_request: ApprovalRequest) -> str | None:
    return None


def refuse_bidi_controls(command: str) -> None:
    """Refused when `command` holds bidi controls: they make it display in another order
    than the shell reads it, so no one could approve what it does."""
    controls = bidi_controls(command)
    if controls:
        raise Refused(f"the command holds bidirectional control characters "
                      f"({', '.join(controls)}), which show it in another order than it "
                      "runs; it was not run. Write them as escapes (printf '\\u202e') "
                      "if they are needed.")


def unshowable(request: ApprovalRequest) -> str | None:
    """Why the change cannot be shown as it would be written (the model reads it), or None. An
    edit writes a file's bytes that are not UTF-8 back as U+FFFD, as pi does, on lines the diff
    shows unchanged (both sides read them so): the user would approve what they cannot see."""
    change = request.change
    if change is None or not change.not_utf8:
        return None
    # Counted here, not when the change is worked out: a read of the whole file again (4 s
    # for 100 MB) that a write, or an edit under automatic approval, never needs.
    bad = undecodable(change.path)
    if bad is None:
        return None  # gone since: the call fails as it runs
    return (f"{change.path} is not UTF-8: {_count(bad.bytes, 'byte')} on "
            f"{_count(bad.lines, 'line')} would be written as U+FFFD, which no approval can "
            f"show, so the {request.call.name} was not run and the user was not asked. Convert "
            "the file to UTF-8 first (with bash: iconv), or write it whole.")


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def approval_request(call: ToolCall, ctx: ToolContext) -> ApprovalRequest | None:
    """What must be approved before `call` runs, or None when it needs no approval (reads in
    the workspace, unknown tools). A call refused outright raises its ToolError (arguments
    the tool's schema refuses: InvalidArguments; pi-lsp's own refusals: Refused)."""
    if call.name == "bash":
        # checked first, as pi 1.6 does: nobody is asked
        _, timeout = bash_schema_arguments(call.object_arguments)
        refuse_long_timeout(timeout)
        refuse_bidi_controls(str(call.object_arguments.get("command")))
        return ApprovalRequest(call, outside_workspace=False)
    if call.name == "read":
        path = ctx.readable(tool_arguments("read", call.object_arguments)["path"])
        return None if ctx.inside(path) else ApprovalRequest(call, True, path)
    change = propose_change(call.name, call.object_arguments, ctx)
    if change is None:
        return None
    return ApprovalRequest(call, not ctx.inside(change.path), change.path, change)


async def ask_approval(call: ToolCall, ctx: ToolContext, approver: Approver
                       ) -> str | ToolResult | None:
    """None to run `call` in `ctx` (with the approved change noted in it), why the user
    refused it, or its result where working out what to ask already failed (nobody is asked):
    arguments its schema refuses (pi 1.6 runs no tool then), or a failure as the tool's own."""
    try:
        request = await off_loop(functools.partial(approval_request, call), ctx)
    except (InvalidArguments, Refused) as error:
        return unrun_result(str(error))
    except ToolError as error:
        return thrown_result(str(error))
    except (OSError, UnicodeError, ValueError) as error:  # as the tool itself would fail
        return thrown_result(f"{call.name} failed: {error}")
    if request is None:
        return None
    refusal = await approver(request)
    if refusal is None:
        ctx.approved = request.change
    return refusal
