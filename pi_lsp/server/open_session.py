"""One open session: everything held for it, so dropping or moving it is one operation."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import msgspec

from pi_lsp.agent.harness import BusyError, Harness, user_message
from pi_lsp.server.treeview import HeldView
from pi_lsp.session.catalog import tree_title
from pi_lsp.session.entries import ImageContent, UserMessage
from pi_lsp.session.ids import new_entry_id
from pi_lsp.session.tree import SessionTree
from pi_lsp.settings import SettingsStamp


class OpenSession(msgspec.Struct):
    tree: SessionTree
    harness: Harness | None = None
    # The folder its harness was made for and its settings files' times and project files then.
    stamp: tuple[Path, SettingsStamp] | None = None
    view: HeldView = msgspec.field(default_factory=HeldView)  # the tree as last shown
    # "allow for this session": tools, each inside or outside the workspace (True), and for a
    # read outside the folder or file it covers (approvals.Grant)
    allowed_tools: set[tuple[str, bool, Path | None]] = msgspec.field(default_factory=set)
    turn_id: str | None = None  # claimed by a prompt, from before its harness says busy
    # The id the claimed turn's prompt is to be written with: the editor is told it, and finds
    # by it in the file whether a prompt whose turn it did not see start was written.
    prompt_id: str | None = None
    job: str | None = None  # "compaction" or "branch_summary", claimed the same way
    # pi.abort came while a claim had not started yet: it starts aborted.
    abort_claimed: bool = False
    # What the claim waits for before it starts (the editor's progress): an abort ends it.
    waiting: asyncio.Task[Any] | None = None
    # Steers and follow-ups sent while the claimed turn had not begun, for it to take; None
    # when no turn is claimed or it has begun (its harness holds them from then).
    early: list[tuple[str, UserMessage]] | None = None
    # Steers and follow-ups whose attachments the user is being asked about, (delivery, text)
    # by the wait: an abort of the turn they were sent behind withdraws them (withdrawn).
    asking: dict[asyncio.Future[Any], tuple[str, str]] = msgspec.field(default_factory=dict)
    withdrawn: list[tuple[str, str]] = msgspec.field(default_factory=list)

    @property
    def title(self) -> str:
        return tree_title(self.tree)

    @property
    def busy(self) -> bool:
        return self.turn_id is not None or self.job is not None or \
            (self.harness is not None and self.harness.busy)

    def require_idle(self, hint: str = "") -> None:
        """BusyError when a turn, compaction or summary is running or about to."""
        if self.busy:
            phase = self.harness.phase if self.harness is not None and self.harness.busy \
                else self.job or "turn"
            raise BusyError(f"the session is busy ({phase}){hint}")

    def claim_turn(self) -> str:
        """Take the session for a new turn now, so a second prompt is refused at once."""
        self.require_idle("; steer or follow up instead" if self.turn_id is not None else "")
        self.turn_id, self.abort_claimed, self.early = str(uuid.uuid4()), False, []
        self.prompt_id = new_entry_id(self.tree.by_id)
        return self.turn_id

    @property
    def turn_open(self) -> bool:
        """A turn is claimed and not over: a steer or follow-up joins it."""
        return self.turn_id is not None and (
            self.early is not None or (self.harness is not None and self.harness.busy))

    def join_turn(self, delivery: str, text: str, images: list[ImageContent] | None,
                  attachments: list[str] | None) -> None:
        """Queue a steer or follow-up for the open turn, held for it until it begins."""
        if self.early is not None:
            self.early.append((delivery, user_message(text, images, attachments)))
        elif self.harness is not None:
            queue = self.harness.steer if delivery == "steer" else self.harness.follow_up
            queue(text, images, attachments)

    def take_early(self) -> tuple[list[UserMessage], list[UserMessage]]:
        """The steers and the follow-ups sent before the turn began; later ones go to its
        harness."""
        early, self.early = self.early or [], None
        return [m for d, m in early if d == "steer"], [m for d, m in early if d != "steer"]

    def take_withdrawn(self) -> list[tuple[str, str]]:
        """The messages whose questions the last abort withdrew, once."""
        withdrawn, self.withdrawn = self.withdrawn, []
        return withdrawn

    def claim_job(self, phase: str) -> None:
        """Take the session for a compaction or branch summary now, as `claim_turn` does."""
        self.require_idle()
        self.job, self.abort_claimed = phase, False

    def abort(self) -> bool:
        """Stop the running turn or job (saved as aborted), or have a claimed one start
        aborted; False when nothing runs or is claimed."""
        if (self.harness is not None and self.harness.abort()) or self.abort_claim():
            self.withdraw_asking()
            return True
        return False

    def withdraw_asking(self) -> None:
        """Stop the attachment questions of messages sent behind the aborted turn: pi 1.6
        drops what is queued on an abort, so none may start a turn once answered. One already
        answered is about to be queued, so it is not named as withdrawn."""
        for wait, message in self.asking.items():
            if wait.cancel():
                self.withdrawn.append(message)
        self.asking.clear()

    def abort_claim(self) -> bool:
        """Have a claimed turn or job start aborted, now; False when nothing is claimed."""
        self.abort_claimed = self.turn_id is not None or self.job is not None
        if self.abort_claimed and self.waiting is not None:
            self.waiting.cancel()  # the editor's answer may be late, or never come
        return self.abort_claimed

    @property
    def aborted(self) -> bool:
        """Whether the claim is to start aborted (for `abortable`)."""
        return self.abort_claimed

    def track(self, task: asyncio.Task[Any]) -> None:
        """`task` is what the claim waits for before it starts (for `abortable`)."""
        self.waiting = task

    def run_claim(self, task: asyncio.Task[Any]) -> None:
        """`task` runs the claimed turn or job; the claim ends with it, unless its turn let go
        at its end (`end_turn`) and another one took the session since."""
        turn_id = self.turn_id
        task.add_done_callback(lambda _task: self.end_turn(turn_id))

    def end_turn(self, turn_id: str | None) -> None:
        """Let go of the session if turn `turn_id` (None: a job) still holds it."""
        if self.turn_id == turn_id:
            self.release()

    def release(self) -> None:
        """Let go of the claim and what it held. Its withdrawn messages go with it: each was
        answered `dropped` (given back then), and only its own turn's queue_dropped names them."""
        self.turn_id = self.job = self.early = self.waiting = None
        self.abort_claimed, self.withdrawn = False, []
