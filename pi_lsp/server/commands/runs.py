"""Prompts, aborts, compactions and branch summaries: the work that runs in the background."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from pi_lsp.server.commands import Command
from pi_lsp.server.commands.files import with_file_changes
from pi_lsp.server.editor import prompt_attachments
from pi_lsp.server.hub import UnknownSessionError
from pi_lsp.server.protocol import BranchSummaryArgs, CompactArgs, PromptArgs, SessionArgs
from pi_lsp.server.turns import prompt_images
from pi_lsp.session.entries import UserMessage
from pi_lsp.session.outline import message_preview
from pi_lsp.summarize.compaction import NothingToCompactError

if TYPE_CHECKING:
    from pi_lsp.server.server import PiServer


async def prompt(ls: PiServer, args: PromptArgs) -> dict[str, Any]:
    path = await ls.open_tree(args.uri)
    harness = ls.hub.harness(path)
    # Claimed before the attachments, which may wait on the user: prompts start in the order
    # sent, and one sent while the session is busy is refused at once, not after a question.
    queue = args.delivery != "prompt" and ls.hub.turn_open(path)
    session = None if queue else ls.hub.claim_turn(path)
    gathering = asyncio.ensure_future(
        prompt_attachments(ls.files, harness.root, args, harness.approve_call))
    behind = ls.hub.held(path) if queue else None
    if behind is not None:
        behind.asking[gathering] = (args.delivery, args.text)
    try:
        attached = await gathering
        if session is not None and ls.hub.held(path) is not session:  # its file went meanwhile
            raise UnknownSessionError(str(path))
    except BaseException as error:
        if withdrawn(error, gathering):  # the turn it was sent behind was aborted
            return {"turnId": None, "dropped": args.delivery}
        if session is not None:
            tell_dropped(ls, session.take_early())
            session.release()
        raise
    finally:
        if behind is not None:
            behind.asking.pop(gathering, None)
    for refusal in attached.refused:
        ls.tell(refusal)
    if behind is not None and not behind.turn_open:  # a turn of its own: not on a tree a
        await ls.open_tree(args.uri)  # worker folds for a view (`load` waits for that)
    if behind is not None and behind.turn_open:  # wherever its file went while it was asked
        behind.join_turn(args.delivery, args.text, prompt_images(args),
                         attached.rendered or None)
        return {"turnId": None, "queued": args.delivery}
    if behind is not None and ls.hub.held(path) is not behind:  # not into another session
        raise UnknownSessionError(str(path))
    if session is None:  # the run it was for ended meanwhile (its harness may be made anew)
        session, harness = ls.hub.claim_turn(path), ls.hub.harness(path)
    ls.runs.start_turn(args.uri, session, harness, args, attached.rendered)
    return {"turnId": session.turn_id, "promptId": session.prompt_id}


def withdrawn(error: BaseException, gathering: asyncio.Future[Any]) -> bool:
    """The attachments' wait was withdrawn by an abort (OpenSession.withdraw_asking), not this
    command cancelled."""
    task = asyncio.current_task()
    return isinstance(error, asyncio.CancelledError) and gathering.cancelled() and \
        task is not None and not task.cancelling()


def tell_dropped(ls: PiServer, held: tuple[list[UserMessage], list[UserMessage]]) -> None:
    """Name the steers and follow-ups answered "queued" for a prompt that failed before its
    turn began: they are not sent (they steered a prompt that never ran, often one the user
    just refused), and their senders were told they would be."""
    steers, follow_ups = held
    named = [f"{kind} {message_preview(message)!r}"
             for kind, messages in (("steer", steers), ("follow-up", follow_ups))
             for message in messages]
    if named:
        ls.tell(f"the prompt failed before its turn began, so its queued {', '.join(named)} "
                "were not sent")


async def prepare_turn(ls: PiServer, args: SessionArgs) -> dict[str, Any]:
    """Answered once the session's next turn could start at once (its provider made)."""
    model = await ls.hub.harness(await ls.open_tree(args.uri)).prepare()
    return {"provider": model.provider, "model": model.id}


async def abort(ls: PiServer, args: SessionArgs) -> dict[str, Any]:
    # A run is stopped even in a folder the workspace no longer covers: stopping opens and
    # writes nothing new, and refusing it left the agent running.
    session = ls.hub.running(ls.session_path(args.uri))
    if session is None:
        session = ls.hub.held(await ls.open_tree(args.uri))
    return {"aborted": session.abort()}


async def compact(ls: PiServer, args: CompactArgs) -> dict[str, Any]:
    path = await ls.open_tree(args.uri)
    if args.dry_run:
        try:
            return {"plan": ls.hub.plan(path)}
        except NothingToCompactError as refusal:
            # Its own words, so no editor guesses why (they each did, and could be wrong).
            return {"plan": None, "reason": str(refusal)}
    harness = ls.hub.harness(path)
    session = ls.hub.claim_job(path, "compaction")
    return {"jobId": ls.runs.start_job(args.uri, "pi: compacting", session, harness,
                                       lambda: harness.compact(args.instructions))}


async def branch_with_summary(ls: PiServer, args: BranchSummaryArgs) -> dict[str, Any]:
    path = await ls.open_tree(args.uri)
    harness = ls.hub.harness(path)
    harness.tree.record(args.target_id)
    session = ls.hub.claim_job(path, "branch_summary")

    async def work() -> dict[str, Any]:
        return await with_file_changes(harness, await harness.branch_with_summary(
            args.target_id, args.instructions, durable=ls.config.durable_leaf_moves))

    return {"jobId": ls.runs.start_job(args.uri, "pi: summarizing the branch", session, harness,
                                       work)}


COMMANDS: list[Command] = [
    ("pi.prompt", PromptArgs, prompt),
    ("pi.prepareTurn", SessionArgs, prepare_turn),
    ("pi.abort", SessionArgs, abort),
    ("pi.compact", CompactArgs, compact),
    ("pi.branchWithSummary", BranchSummaryArgs, branch_with_summary),
]
