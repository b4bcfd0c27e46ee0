"""Turns and jobs run in the background: their progress in the editor, their events as
`pi/turn` and their ends as `pi/jobDone`."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from lsprotocol import types
from pygls.lsp.server import LanguageServer

from pi_lsp.agent.events import (
    AgentEvent,
    AutoRetryStart,
    MessageUpdate,
    SummaryRetryAttemptStart,
    SummaryRetryScheduled,
    ToolExecutionStart,
)
from pi_lsp.agent.harness import Harness
from pi_lsp.agent.loop import Aborted, abortable
from pi_lsp.agent.retry import waiting_note
from pi_lsp.server.failures import failure_message
from pi_lsp.server.open_session import OpenSession
from pi_lsp.server.protocol import JOB_DONE, TURN, PromptArgs
from pi_lsp.server.tasks import Tasks
from pi_lsp.session.entries import ImageContent
from pi_lsp.session.outline import shorten

DELTA_FLUSH_S = 0.05  # text deltas are sent at most ~20 times a second per turn
PROGRESS_PROMPT_CHARS = 40  # of the prompt, in a turn's progress


def prompt_images(args: PromptArgs) -> list[ImageContent] | None:
    return [ImageContent(data=i.data, mime_type=i.mime_type) for i in args.images] or None


def progress_report(event: AgentEvent) -> str | None:
    """What a turn's or job's progress says about `event`, if anything."""
    if isinstance(event, ToolExecutionStart):
        return f"running {event.tool_name}"
    if isinstance(event, AutoRetryStart | SummaryRetryScheduled):
        return waiting_note(event)
    if isinstance(event, SummaryRetryAttemptStart):
        return resumed_summary(event)
    return None


def resumed_summary(event: SummaryRetryAttemptStart) -> str:
    """What pi 1.6's status line says again once a summary's wait is over."""
    if event.source == "branchSummary":
        return "summarizing the branch"
    if event.reason == "manual":
        return "compacting the context"
    return ("context overflow detected, " if event.reason == "overflow" else "") + \
        "auto-compacting"


class Runs:
    def __init__(self, server: LanguageServer, tasks: Tasks) -> None:
        self.server, self.tasks = server, tasks

    def start_turn(self, uri: str, session: OpenSession, harness: Harness, args: PromptArgs,
                   attachments: list[str]) -> None:
        """Run a prompt in the background, for the turn the session has claimed."""
        turn_id = session.turn_id or ""
        session.run_claim(self.tasks.start(
            self._turn(uri, session, turn_id, harness, args, attachments), f"turn {turn_id}"))

    def start_job(self, uri: str, title: str, session: OpenSession, harness: Harness,
                  work: Callable[[], Awaitable[Any]]) -> str:
        """Run a compaction or branch summary, the job the session has claimed; the job's id."""
        job_id = str(uuid.uuid4())
        session.run_claim(self.tasks.start(self._job(uri, job_id, title, session, harness, work),
                                           f"job {job_id} ({title})"))
        return job_id

    async def _turn(self, uri: str, session: OpenSession, turn_id: str, harness: Harness,
                    args: PromptArgs, attachments: list[str]) -> None:
        stream = TurnStream(self.server, uri, turn_id)
        unsubscribe = harness.subscribe(stream.on_event)
        # A status bar shows "title: message" cut from the left: a short title, and a message
        # the tool reports replace, keep what is still running in view.
        token = await self.claim_progress(session, "pi",
                                          shorten(args.text, PROGRESS_PROMPT_CHARS))
        self.abort_on_cancel(token, harness)
        stream.progress = lambda event: self.report(token, event)
        outcome = "done"
        try:
            steering, follow_ups = session.take_early()
            await harness.prompt(args.text, prompt_images(args), attachments or None,
                                 aborted=session.abort_claimed, steering=steering,
                                 follow_ups=follow_ups, resumed=True,
                                 entry_id=session.prompt_id)
        except Exception as error:  # the harness has sent it as the turn's `error` event
            outcome = failure_message(error)
            raise
        finally:
            stream.flush()
            unsubscribe()
            stream.tell_dropped(harness.take_dropped() + session.take_withdrawn())
            self.progress_end(token, outcome)
            # Now, not in the task's callback a loop step later: a steer read meanwhile found
            # the session held by a turn that no longer ran, and was refused as busy.
            session.end_turn(turn_id)

    async def _job(self, uri: str, job_id: str, title: str, session: OpenSession,
                   harness: Harness, work: Callable[[], Awaitable[Any]]) -> None:
        token = await self.claim_progress(session, title)
        self.abort_on_cancel(token, harness)
        # The job's summary tells its retries as the harness's events; only the progress shows
        # them (the job sends no events).
        unsubscribe = harness.subscribe(lambda event: self.report(token, event))
        try:
            if session.abort_claimed:
                raise Aborted()
            result = await work()
        except Exception as error:
            self.server.protocol.notify(JOB_DONE, {"jobId": job_id, "uri": uri, "ok": False,
                                                   "error": failure_message(error)})
            raise
        else:
            self.server.protocol.notify(JOB_DONE, {"jobId": job_id, "uri": uri, "ok": True,
                                                   "result": msgspec.to_builtins(result)})
        finally:
            unsubscribe()
            self.progress_end(token, "done")

    async def claim_progress(self, session: OpenSession, title: str,
                             message: str | None = None) -> str | None:
        """The claimed turn's or job's progress, None when it is aborted before the editor
        created it: the abort ended nothing while the editor had not answered (ever, if it
        never did), and shutdown lost the prompt."""
        try:
            return await abortable(session, self.progress_begin(title, message))
        except Aborted:
            return None

    async def progress_begin(self, title: str, message: str | None = None) -> str | None:
        window = self.server.client_capabilities.window
        if window is None or not window.work_done_progress:
            return None
        token = str(uuid.uuid4())
        try:
            # Not shielded: an abort cancels the request, whose late answer is then ignored.
            # A shield kept it pending, and the error an editor answered was never read.
            await self.server.work_done_progress.create_async(token)
        except Exception:
            return None  # the client does not do progress
        self.server.work_done_progress.begin(token, types.WorkDoneProgressBegin(
            title=title, message=message, cancellable=True))
        return token

    def report(self, token: str | None, event: AgentEvent) -> None:
        """What `event` changes in the progress `token` says (progress_report), if anything."""
        message = progress_report(event)
        if message and token is not None:
            with contextlib.suppress(Exception):
                self.server.work_done_progress.report(
                    token, types.WorkDoneProgressReport(message=message))

    def progress_end(self, token: str | None, message: str) -> None:
        if token is not None:
            with contextlib.suppress(Exception):
                self.server.work_done_progress.end(token,
                                                   types.WorkDoneProgressEnd(message=message))

    def abort_on_cancel(self, token: str | None, harness: Harness) -> None:
        future = self.server.work_done_progress.tokens.get(token) if token else None
        if future is not None:
            future.add_done_callback(lambda f: harness.abort() if f.cancelled() else None)


class TurnStream:
    """Forwards one turn's events as `pi/turn`, with text deltas coalesced."""

    def __init__(self, server: LanguageServer, uri: str, turn_id: str) -> None:
        self.server, self.uri, self.turn_id = server, uri, turn_id
        self.deltas: list[dict[str, Any]] = []
        self.timer: asyncio.TimerHandle | None = None
        # What the turn's progress says of an event, once the editor has made the progress.
        self.progress: Callable[[AgentEvent], None] = lambda _event: None

    def send(self, event: dict[str, Any]) -> None:
        self.server.protocol.notify(TURN, {"uri": self.uri, "turnId": self.turn_id,
                                           "event": event})

    def tell_dropped(self, dropped: list[tuple[str, str]]) -> None:
        """`queue_dropped`: the steers and follow-ups an abort left unsent (with any still asked
        about an attachment, whose questions the editor closes), as pi 1.6's clearQueue returns
        them for its editor."""
        if dropped:
            self.send({"type": "queue_dropped",
                       "steering": [text for delivery, text in dropped if delivery == "steer"],
                       "followUp": [text for delivery, text in dropped if delivery != "steer"]})

    def on_event(self, event: AgentEvent) -> None:
        if isinstance(event, MessageUpdate):
            delta = msgspec.to_builtins(event.delta)
            last = self.deltas[-1] if self.deltas else None
            if last and last["type"] == delta["type"] and "delta" in delta and \
                    last["contentIndex"] == delta["contentIndex"]:  # a block's end has no text
                last["delta"] += delta["delta"]
            else:
                self.deltas.append(delta)
            if self.timer is None:
                self.timer = asyncio.get_running_loop().call_later(DELTA_FLUSH_S, self.flush)
            return
        self.flush()
        self.progress(event)
        self.send(msgspec.to_builtins(event))

    def flush(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.deltas:
            deltas, self.deltas = self.deltas, []
            self.send({"type": "message_update", "deltas": deltas})
