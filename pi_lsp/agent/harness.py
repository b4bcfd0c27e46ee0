"""One session's agent: turn snapshots, buffered writes, save points, queues and abort."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import msgspec

from pi_lsp.agent.approval import Approver, allow_all, ask_approval
from pi_lsp.agent.events import (
    AgentEnd,
    AgentEvent,
    CompactionEnd,
    CompactionReason,
    CompactionStart,
    ErrorEvent,
    MessageEnd,
    SavePoint,
    SessionMoved,
    TurnEnd,
)
from pi_lsp.agent.feedback import Diagnostics as Diagnostics
from pi_lsp.agent.feedback import EditFeedback
from pi_lsp.agent.images import image_bytes, with_sent_images
from pi_lsp.agent.loop import Aborted, abortable, run_loop
from pi_lsp.agent.prompt import agent_setup
from pi_lsp.agent.retry import (
    Retries,
    RetrySettings,
    SummaryRetries,
    is_context_overflow,
    is_recoverable_length,
    is_silent_overflow,
)
from pi_lsp.agent.tools import ALL_TOOLS, DISK, FileAccess, Tool, ToolContext, ToolResult
from pi_lsp.agent.writes import PendingWrites
from pi_lsp.context.build import branch_path, branch_settings, context_tokens
from pi_lsp.context.layers import (
    AgentSetup,
    build_layer,
    level_in_force,
    model_at,
    system_patch_at,
    with_run_choices,
)
from pi_lsp.context.projection import ContextSettings, Projection, project_path
from pi_lsp.context.resume import Choice, differs, start_choice
from pi_lsp.providers.base import ModelRequest, Provider
from pi_lsp.providers.registry import ModelInfo, ModelRegistry
from pi_lsp.providers.thinking import clamped_level
from pi_lsp.session.entries import (
    DEFAULT_THINKING_LEVEL,
    AgentMessage,
    AssistantMessage,
    ImageContent,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserBlock,
    UserMessage,
)
from pi_lsp.session.ids import now_ms
from pi_lsp.session.journal import Record
from pi_lsp.session.tree import SessionTree
from pi_lsp.summarize.branch import (
    BranchOutcome,
    branch,
    branch_summary_budget,
    branch_with_summary,
)
from pi_lsp.summarize.compaction import (
    CompactionResult,
    CompactionSettings,
    compact,
    prepare_compaction,
)
from pi_lsp.summarize.extractive import ExtractiveSummarizer
from pi_lsp.summarize.summarizer import Summarizer

Phase = Literal["idle", "turn", "compaction", "branch_summary"]
ProviderFactory = Callable[[str], Provider]
Listener = Callable[[AgentEvent], None]


class BusyError(Exception):
    """The session is running something else; try again when it is idle."""


class NotRunningError(Exception):
    """Steering and follow-ups need a running turn."""


def last_reply(messages: list[AgentMessage]) -> AssistantMessage | None:
    return next((m for m in reversed(messages) if isinstance(m, AssistantMessage)), None)


def recovered(run: list[AgentMessage]) -> bool:
    """Whether a compacted retry got past its overflow before its last reply (a user message or
    a whole reply), which pi 1.6 takes as the recovery done: the next overflow gets its own."""
    return any(isinstance(m, UserMessage) or (
        isinstance(m, AssistantMessage) and m.stop_reason not in ("error", "length"))
        for m in run[:-1])


def auto_compaction_error(reason: CompactionReason, error: Exception) -> str:
    """pi 1.6's words for an automatic compaction that failed, by why it ran; the editors
    show them as they are."""
    if reason == "overflow":
        return f"Context overflow recovery failed: {error}"
    return f"Auto-compaction failed: {error}"


def user_message(text: str, images: list[ImageContent] | None = None,
                 attachments: list[str] | None = None) -> UserMessage:
    """The message as given; its images are processed when it is sent (with_sent_images)."""
    for number, image in enumerate(images or [], 1):  # refused before anything is written
        image_bytes(image.data, f"image {number}'s data")
    content: list[UserBlock] = [TextContent(text=text),
                                *(TextContent(text=a) for a in attachments or []),
                                *(images or [])]
    return UserMessage(content=content, timestamp=now_ms())


def prompt_text(message: UserMessage) -> str:
    """The text the user typed: the first block (`user_message` puts it there)."""
    content = message.content
    if isinstance(content, str):
        return content
    return content[0].text if content and isinstance(content[0], TextContent) else ""


class Harness:
    def __init__(
        self,
        tree: SessionTree,
        root: Path,
        providers: ProviderFactory,
        registry: ModelRegistry | None = None,
        default_model: tuple[str, str] = ("anthropic", "claude-sonnet-4-5"),
        default_thinking_level: str = DEFAULT_THINKING_LEVEL,
        level_for_model: Callable[[str, str], str | None] = lambda _provider, _model: None,
        tools: tuple[Tool, ...] = ALL_TOOLS,
        approve: Approver = allow_all,
        allow_outside_root: bool = False,
        session_dirs: tuple[Path, ...] = (),
        summarizer: Summarizer | None = None,
        compaction: CompactionSettings | None = None,
        branch_reserve_tokens: int = 16384,
        files: FileAccess = DISK,
        diagnostics: Diagnostics | None = None,
        retry: RetrySettings | None = None,
        auto_resize_images: bool = True,
        project_trusted: bool = False,
    ) -> None:
        self.tree = tree
        self._said_path = tree.path  # where listeners last heard the session is
        self.root = root
        self.registry = registry or ModelRegistry()
        self.default_model = default_model
        self.default_thinking_level = default_thinking_level
        self.level_for_model = level_for_model  # the level a model switch sets (None: stays)
        # pi's --model on a session it continues (this run's only: pi records no model_change
        # for it) and its --thinking (recorded at the prompt's start where it changes the level)
        self.run_model: tuple[str, str] | None = None
        self.run_thinking_level: str | None = None
        self.tools = {tool.name: tool for tool in tools}
        self.approve_call = approve
        self.allow_outside_root = allow_outside_root
        self.session_dirs = session_dirs
        self.summarizer: Summarizer = summarizer or ExtractiveSummarizer()
        self.compaction = compaction or CompactionSettings()
        self.branch_reserve_tokens = branch_reserve_tokens
        self.files = files
        self.edit_feedback = EditFeedback(root, diagnostics)
        self.retry = retry or RetrySettings()
        self.auto_resize_images = auto_resize_images  # pi's `images.autoResize`
        self.project_trusted = project_trusted  # the project's own prompt files count
        self.retries = Retries(self)
        self.phase: Phase = "idle"
        self.aborted = False
        self.agent: AgentSetup | None = None  # the running prompt's, kept for all its turns
        self._providers = providers
        self._provider_cache: dict[str, Provider] = {}
        self._making: dict[str, asyncio.Task[Provider]] = {}  # providers being made, by name
        self._listeners: list[Listener] = []
        self._pending = PendingWrites()
        self._steering: list[UserMessage] = []
        self._follow_up: list[UserMessage] = []
        # Steers and follow-ups an abort left unsent, (delivery, text), for the editor to put
        # back in its input as pi 1.6 does; taken with take_dropped.
        self.dropped: list[tuple[str, str]] = []
        # The id the running prompt is to be written with (the editor was told it), until it is.
        self._prompt_id: str | None = None
        self._current: asyncio.Task[Any] | None = None
        self._attempt_ids: list[str] = []  # the entries of the last reply and its results
        # pi 1.6 resumes a session only at the file's leaf: once the user moves it, a path
        # without a level stays without one (navigateTree writes none, nor does a prompt).
        self._leaf_moved = False

    # -- subscribers ---------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def emit(self, event: AgentEvent) -> None:
        try:
            self._deliver(event)
        finally:
            self._say_if_moved()

    def _say_if_moved(self) -> None:
        """SessionMoved, once, after a write found the file replaced (the session goes on in a
        new file), whichever write it was, and even when the write itself failed."""
        if self.tree.path != self._said_path:
            moved = SessionMoved(replaced_path=self._said_path, path=self.tree.path)
            self._said_path = self.tree.path
            self.emit(moved)

    def _deliver(self, event: AgentEvent) -> None:
        if isinstance(event, MessageEnd):
            wanted = None
            if isinstance(event.message, UserMessage):  # the prompt is the run's first
                wanted, self._prompt_id = self._prompt_id, None
            entry_id = self.tree.append_message(event.message, wanted)  # they land as they end
            event.entry_id = entry_id
            if isinstance(event.message, AssistantMessage):
                self._attempt_ids = [entry_id]
            elif isinstance(event.message, ToolResultMessage):
                self._attempt_ids.append(entry_id)
        self.edit_feedback.note(event)
        ended_retry = self.retries.attempt > 0 and isinstance(event, MessageEnd) and \
            isinstance(event.message, AssistantMessage) and event.message.stop_reason != "error"
        for listener in list(self._listeners):
            listener(event)
        if ended_retry:
            self.retries.end(success=True)
        if isinstance(event, TurnEnd):
            had = self._pending.flush()
            self.emit(SavePoint(had_pending_mutations=had))
        elif isinstance(event, AgentEnd) and self._pending:
            self._pending.flush()

    # -- turn state ----------------------------------------------------------------------

    def settings(self) -> ContextSettings:
        """The model and level set on the leaf's branch, with the run's own over them."""
        return with_run_choices(branch_settings(self.tree, self.tree.leaf_id),
                                self.run_model, self.run_thinking_level)

    def model(self) -> ModelInfo:
        """The model in force at the leaf, else the default."""
        return model_at(self.settings(), self.registry, self.default_model)

    def thinking_level(self) -> str:
        """The level the next turn thinks at, as pi holds it: the path's, else the default,
        clamped to the model in force."""
        return level_in_force(self.settings(), self.registry, self.default_model,
                              self.default_thinking_level)

    def agent_setup(self) -> AgentSetup:
        """The prompt sections and tools as they are now (they read the project's notes)."""
        return self.agent_builder()()

    def agent_builder(self) -> Callable[[], AgentSetup]:
        """What builds `agent_setup`: the run's model and levels read now, on the event loop;
        the project's notes and skills when called, which may be in a worker thread."""
        build = functools.partial(agent_setup, self.root, list(self.tools.values()),
                                  self.registry, self.default_model,
                                  self.default_thinking_level, self.project_trusted)
        run_model, run_level = self.run_model, self.run_thinking_level
        return lambda: msgspec.structs.replace(build(), run_model=run_model,
                                               run_thinking_level=run_level)

    async def next_request(self) -> tuple[ModelRequest, Provider]:
        """The request at the leaf as it is now (flushed writes included): the prompt and tools
        are the session's replayed ones, which the run declared at its start. Its provider is
        made off the event loop: a model switched to mid-run may be a new provider's."""
        request = build_layer(self.tree, self.tree.leaf_id, "request",
                              self.agent or self.agent_setup()).request
        assert request is not None
        return request, await self._made_provider(request.model.provider)

    def provider(self, name: str) -> Provider:
        if name not in self._provider_cache:
            self._provider_cache[name] = self._providers(name)
        return self._provider_cache[name]

    async def _made_provider(self, name: str) -> Provider:
        """`provider`, made off the event loop the first time: importing its SDK takes a second
        or more (9 s at load 8), and every editor request would wait for it."""
        if name in self._provider_cache:
            return self._provider_cache[name]
        making = self._making.get(name)
        if making is None:  # one making per name: a turn started meanwhile waits for it
            making = self._making[name] = asyncio.ensure_future(
                asyncio.to_thread(self.provider, name))
            making.add_done_callback(lambda done: self._made(name, done))
        # Shielded: a waiter cancelled (an abort, a cancelled request) leaves it to the others.
        return await asyncio.shield(making)

    def _made(self, name: str, done: asyncio.Task[Provider]) -> None:
        del self._making[name]
        if not done.cancelled():
            done.exception()  # seen here, so a failure nobody waits for any more is not logged

    async def prepare(self) -> ModelInfo:
        """The model the next turn would use, its provider made: an editor asks when a chat
        opens, as the SDK's import is most of the first reply's wait."""
        model = self.model()
        await self._made_provider(model.provider)
        return model

    # -- the loop's hooks ----------------------------------------------------------------

    async def take_steering(self) -> list[UserMessage]:
        taken, self._steering = self._steering, []
        return [await with_sent_images(message, auto_resize=self.auto_resize_images)
                for message in taken]

    async def take_follow_up(self) -> list[UserMessage]:
        taken, self._follow_up = self._follow_up, []
        return [await with_sent_images(message, auto_resize=self.auto_resize_images)
                for message in taken]

    async def prepare_next_turn(self) -> None:
        """pi 1.6's prepareNextTurn: past the threshold between two turns of a run (after tool
        results, before the next request), the context is compacted there."""
        await self._compact_if_needed("threshold")

    async def feedback(self) -> list[UserMessage]:
        """The editor's problems in the files this run changed, as a user message (capped)."""
        text = await self.edit_feedback.problems(self.aborted)
        return [] if text is None else [user_message(text)]

    def tool(self, name: str) -> Tool | None:
        return self.tools.get(name)

    def tool_context(self, on_update: Callable[[str], None]) -> ToolContext:
        return ToolContext(self.root, self.allow_outside_root, on_update, self.session_dirs,
                           files=self.files,
                           key_variables=self.registry.key_variables(),
                           session_variables=self.session_variables(),
                           auto_resize_images=self.auto_resize_images)

    def session_variables(self) -> dict[str, str]:
        """What bash tells a command of this session, as pi 1.6's: its id and file, and the
        model and level in force (a turn's: changes made meanwhile wait for its end)."""
        model = self.model()
        return {"PI_SESSION_ID": self.tree.header.id, "PI_SESSION_FILE": self.tree.path,
                "PI_PROVIDER": model.provider, "PI_MODEL": model.id,
                "PI_REASONING_LEVEL": self.thinking_level()}

    async def approve(self, call: ToolCall, ctx: ToolContext) -> str | ToolResult | None:
        return await ask_approval(call, ctx, self.approve_call)

    def track(self, task: asyncio.Task[Any]) -> None:
        self._current = task

    async def retry_after(self, reply: AssistantMessage) -> bool:
        return await self.retries.after(reply, self.retry)

    def omit_attempt(self) -> None:
        """pi 1.6's _omitRecoveryAttempt: the last reply and its tool results stay in the file
        but leave the context for good, one `context_edit` each."""
        for entry_id in self._attempt_ids:
            self.tree.append_context_edit(entry_id, None)
        self._attempt_ids = []

    # -- running -------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self.phase != "idle"

    def _require_idle(self) -> None:
        if self.busy:
            raise BusyError(f"the session is busy ({self.phase})")

    async def prompt(self, text: str, images: list[ImageContent] | None = None,
                     attachments: list[str] | None = None, *, aborted: bool = False,
                     steering: Sequence[UserMessage] = (), follow_ups: Sequence[UserMessage] = (),
                     resumed: bool = False, entry_id: str | None = None) -> list[AgentMessage]:
        """Run one prompt to completion; the returned messages are already in the session.

        The context is compacted first when it has outgrown the window, and a request the
        provider rejects as too long (or answers from truncated input, as pi 1.6 tells it) is
        compacted and retried once. A failure is told to
        subscribers as one `error` event and raised. `attachments` (code from the editor) follow
        the text as blocks of their own. `aborted`: stopped before it began, it is written as
        pi writes a prompt aborted at once (the prompt, then an aborted reply). `steering` and
        `follow_ups` were sent for it before it began: they are queued as if sent once it ran.
        `resumed`: the session is taken up at its leaf as pi 1.6 resumes one (`run`, an editor),
        so a path with messages but no level gets the level in force recorded first.
        `entry_id`: the prompt's entry is written with it (where the file has none such).
        """
        self._prompt_id = entry_id
        try:
            return await self._prompt(text, images, attachments, aborted, steering, follow_ups,
                                      resumed)
        except Exception as error:
            self.emit(ErrorEvent(message=str(error) or type(error).__name__))
            raise

    async def _prompt(self, text: str, images: list[ImageContent] | None,
                      attachments: list[str] | None, aborted: bool,
                      steering: Sequence[UserMessage], follow_ups: Sequence[UserMessage],
                      resumed: bool) -> list[AgentMessage]:
        message = user_message(text, images, attachments)
        self._require_idle()
        self.aborted, self.dropped = aborted, []
        # An abort drops what was queued, as it does mid-run.
        self._steering, self._follow_up = list(steering), list(follow_ups)
        if aborted:
            self._drop_queued()
        self.edit_feedback.restart()
        self.tree.refresh()
        try:
            if resumed:
                self._record_missing_level()
            await self._compact_if_needed("threshold")
            self._record_level()
            produced = await self._run([message])
            run, recovering = produced, False
            while (more := await self._after_run(run, recovering)) is not None:
                run, recovering = await self._run(more), not more
                produced += run
            return produced
        finally:  # nothing queued for this prompt is left for the next one
            self._steering.clear()
            self._follow_up.clear()

    def _record_missing_level(self) -> None:
        """pi 1.6 records the level in force on resuming a session whose path has messages but
        no thinking_level_change (sdk.js createAgentSession), before anything a prompt writes:
        so later prompts keep it, whatever the defaults become. pi looks for the level on its
        getBranch(), none at an id-less leaf, and for messages up from the last line."""
        leaf = self.tree.leaf_id
        if self._leaf_moved or self._branch_level_change() is not None or \
                not project_path(self.tree.path_to(leaf)).messages:
            return
        self.tree.append_thinking_level_change(self.thinking_level())
        self._say_if_moved()  # the write found the file replaced: the session goes on anew

    def _record_level(self) -> None:
        """pi 1.6's _recordThinkingLevel at a prompt's start: the level the prompt thinks at is
        written when the branch's last thinking_level_change, clamped to the model in force, is
        another one (a run's `--thinking`; a change with no level, which clamps to the lowest).
        A branch with none gets nothing, as in pi."""
        if self._branch_level_change() is None:
            return
        recorded = branch_settings(self.tree, self.tree.leaf_id).thinking_level
        level = self.thinking_level()
        if clamped_level(self.model(), recorded) != level:
            self.tree.append_thinking_level_change(level)
            self._say_if_moved()  # the write found the file replaced: the session goes on anew

    def _branch_level_change(self) -> Record | None:
        """The last thinking_level_change on pi 1.6's getBranch() at the leaf (none at an
        id-less leaf, whose path up from the line may hold one)."""
        leaf = self.tree.leaf_id
        return self.tree.settings_entries(leaf)[0] if leaf else None

    async def _after_run(self, run: list[AgentMessage], recovering: bool
                         ) -> list[UserMessage] | None:
        """pi 1.6's _handlePostAgentRun: what the next run of the prompt starts from (nothing:
        the compacted retry of an overflow; else what was queued meanwhile), or None when the
        prompt is done. `recovering`: `run` is such a retry, one overflow more gives up on it."""
        last = last_reply(run)
        # pi 1.6 recovers no aborted run (_handlePostAgentRun returns before compacting).
        if last is None or last.stop_reason == "aborted" or self.aborted:
            return None
        overflow = self._overflow(last)
        if overflow == "retry":
            if recovering and not recovered(run):
                self.emit(CompactionEnd(entry_id=None, error=self._recovery_failed(last)))
            else:
                self.omit_attempt()  # left out of the retry for good, as pi 1.6 leaves it
                if await self._compact_if_needed("overflow", force=True, will_retry=True):
                    return []
        else:
            # An answer made from truncated input is kept; its context is compacted.
            await self._compact_if_needed("overflow" if overflow else "threshold",
                                          force=overflow == "keep")
        # Steered or followed up meanwhile (a failed run leaves its steers queued): pi 1.6 goes
        # on with it, also when the overflow was not recovered (_handlePostAgentRun).
        queued = self._take_queued()
        return queued if queued and not self.aborted else None

    def _recovery_failed(self, reply: AssistantMessage) -> str:
        """pi 1.6's message when a compacted retry overflowed again, by what overflowed."""
        if reply.stop_reason == "error" or is_silent_overflow(reply,
                                                              self.model().context_window):
            return ("Context overflow recovery failed after one compact-and-retry attempt. Try "
                    "reducing context or switching to a larger-context model.")
        return "Truncated response recovery failed after one compact-and-retry attempt."

    def _take_queued(self) -> list[UserMessage]:
        """The steers, then the follow-ups, as sent: `_run` processes their images once the
        session is busy, so an abort meanwhile is not refused."""
        queued = [*self._steering, *self._follow_up]
        self._steering, self._follow_up = [], []
        return queued

    def _drop_queued(self) -> None:
        """Note the queued steers and follow-ups as dropped (pi 1.6 clears its queues on an
        abort and puts their text back in the editor)."""
        self.dropped += [(delivery, prompt_text(message))
                         for delivery, queue in (("steer", self._steering),
                                                 ("followUp", self._follow_up))
                         for message in queue]
        self._steering, self._follow_up = [], []

    def take_dropped(self) -> list[tuple[str, str]]:
        """The steers and follow-ups the last abort dropped, once."""
        dropped, self.dropped = self.dropped, []
        return dropped

    async def _run(self, prompts: list[UserMessage]) -> list[AgentMessage]:
        self.phase, self.retries.attempt = "turn", 0
        self._said_path = self.tree.path  # a move while idle was the hub's to tell
        self.tree.hold_leaf = True  # another writer's entries must not become this turn's parent
        try:
            # Busy while the images are processed (a second or more), as pi 1.6 marks the run
            # active first: an abort meanwhile stops the run before its request.
            prompts = [await with_sent_images(message, auto_resize=self.auto_resize_images)
                       for message in prompts]
            # Off the event loop: the prompt reads the project's files and skills (a tenth of
            # a second with 1,000 skills), and every editor request would wait for it.
            self.agent = await asyncio.to_thread(self.agent_builder())
            # No API key: fails before writing. Aborted before or meanwhile: the prompt is
            # written aborted at once, not after its SDK's import (seconds on a busy machine).
            with contextlib.suppress(Aborted):
                await abortable(self, self._made_provider(self.model().provider))
            patch = system_patch_at(self.tree, self.tree.leaf_id, self.agent, now_ms())
            if patch is not None:  # pi 1.6 keeps the prompt and tools in the session
                self.tree.append_message(patch)
            return await run_loop(self, prompts)
        finally:
            if self.retries.attempt:  # aborted while a retry ran
                self.retries.end(success=False, final_error="Retry cancelled")
            self.tree.hold_leaf = False
            self._pending.flush()
            self.phase, self.agent, self._current = "idle", None, None
            if self.aborted:
                self._drop_queued()
            self._say_if_moved()  # a write flushed above, or one of the run's own

    def context_tokens(self) -> int:
        return context_tokens(self.tree, self.tree.leaf_id)

    def _overflow(self, reply: AssistantMessage | None) -> Literal["retry", "keep"] | None:
        """How pi 1.6 answers a reply that outgrew the model's window (None: it did not, came
        from another model than the one in force, or compaction is off): compact and ask again
        ("retry": refused, or stopped at a length limit below the model's own), or compact and
        keep it ("keep": answered from input the server truncated)."""
        if reply is None or not self.compaction.enabled:
            return None
        model = self.model()
        # Another model's overflow, refused or silent, says nothing of this one's window: pi 1.6
        # requires the same model for every kind.
        if (reply.provider, reply.model) != (model.provider, model.id):
            return None
        if reply.stop_reason == "error":
            return "retry" if is_context_overflow(reply.error_message, reply.provider) else None
        if is_silent_overflow(reply, model.context_window):
            return "keep" if reply.stop_reason == "stop" else "retry"
        return "retry" if is_recoverable_length(reply, model.max_tokens) else None

    async def _compact_if_needed(self, reason: CompactionReason, force: bool = False,
                                 will_retry: bool = False) -> bool:
        settings = self.compaction
        window = self.model().context_window
        if not settings.enabled or self.aborted:
            return False
        if not force and self.context_tokens() <= window - settings.reserve_tokens:
            return False
        if prepare_compaction(branch_path(self.tree, self.tree.leaf_id), settings) is None:
            return False
        self.emit(CompactionStart(reason=reason))
        try:
            # Between turns the run keeps the session: its phase and its held writes.
            result = await (self._compact_branch(reason=reason) if self.phase == "turn"
                            else self.compact(reason=reason))
        except Aborted:  # pi 1.6 tells no error: its interactive mode shows a status line
            self.emit(CompactionEnd(entry_id=None, aborted=True))
            return False
        except Exception as error:
            # pi 1.6 lets no failure out (_runAutoCompaction): a full disk, say, is
            # told here and the prompt goes on; raised, it failed a prompt already answered.
            self.emit(CompactionEnd(entry_id=None, error=auto_compaction_error(reason, error)))
            return False
        self.emit(CompactionEnd(entry_id=result.entry_id, will_retry=will_retry))
        return True

    async def compact(self, instructions: str | None = None,
                      reason: CompactionReason = "manual") -> CompactionResult:
        """Compact the current branch now (`reason`: asked for, or automatic); refused while
        anything else runs."""
        self._require_idle()
        self.phase, self.aborted = "compaction", False
        try:
            return await self._compact_branch(instructions, reason)
        finally:
            self.phase, self._current = "idle", None
            self._pending.flush()  # what was set while it ran

    async def _compact_branch(self, instructions: str | None = None,
                              reason: CompactionReason = "manual") -> CompactionResult:
        return await abortable(self, compact(
            self.tree, self.tree.leaf_id, self.summarizer, self.compaction, instructions,
            self.thinking_level(), automatic=reason != "manual",
            retries=SummaryRetries(self.emit, "compaction", reason)))

    async def branch_with_summary(self, target_id: str, instructions: str | None = None,
                                  durable: bool = True) -> BranchOutcome:
        """Leave the current branch for `target_id`, summarizing it; refused while busy."""
        self._require_idle()
        self.tree.record(target_id)
        self.phase, self.aborted = "branch_summary", False
        budget = branch_summary_budget(self.tree, self.registry, self.default_model,
                                       self.branch_reserve_tokens)
        try:
            outcome = await abortable(self, branch_with_summary(
                self.tree, target_id, self.summarizer, budget, instructions, durable,
                self.thinking_level(), SummaryRetries(self.emit, "branchSummary")))
        finally:
            self.phase, self._current = "idle", None
            self._pending.flush()  # on the branch it moved to
        self._leaf_moved = True  # only once it has moved: a failed summary leaves the leaf
        return outcome

    def branch(self, target_id: str, durable: bool = True, edit: bool = False
               ) -> BranchOutcome:
        """A plain pointer move (`edit`: Edit Prompt's); refused while busy."""
        self._require_idle()
        outcome = branch(self.tree, target_id, durable, edit)
        self._leaf_moved = True
        return outcome

    def steer(self, text: str, images: list[ImageContent] | None = None,
              attachments: list[str] | None = None) -> None:
        """Delivered after the current tool batch, before the next model call."""
        if not self.busy:
            raise NotRunningError("nothing is running to steer; send a prompt instead")
        self._steering.append(user_message(text, images, attachments))

    def follow_up(self, text: str, images: list[ImageContent] | None = None,
                  attachments: list[str] | None = None) -> None:
        """Delivered when the run would otherwise stop."""
        if not self.busy:
            raise NotRunningError("nothing is running to follow up; send a prompt instead")
        self._follow_up.append(user_message(text, images, attachments))

    def abort(self) -> bool:
        """Stop the stream or tool now; the run ends and is persisted as aborted."""
        if not self.busy:
            return False
        self.aborted = True
        if self._current is not None and not self._current.done():
            self._current.cancel()
        return True

    # -- writes that wait for a save point -----------------------------------------------

    def _write(self, action: Callable[[], object]) -> None:
        self._pending.write(self.busy, action)
        if not self.busy:
            self._said_path = self.tree.path  # an idle write's move is the hub's to tell

    def set_model(self, provider: str, model_id: str) -> None:
        self._write(lambda: self._switch_model(provider, model_id))

    def set_thinking_level(self, level: str) -> tuple[str | None, bool]:
        """The level recorded (`level` clamped to the model in force) and whether it was
        written now: not when it is the level in force. None and not written when queued."""
        # A queued write clamps against the model in force when the queue is flushed, which
        # a queued setModel or a branch summary's move changes: unknown until then.
        queued = self.busy
        written: list[bool] = []  # stays empty while the write is queued
        self._write(lambda: written.append(
            self._record_thinking_level(level, self.thinking_level())))
        return None if queued else clamped_level(self.model(), level), any(written)

    def start_choice(self, projection: Projection, model: tuple[str, str] | None = None,
                     level: str | None = None) -> Choice | None:
        """The model and level pi 1.6 begins this session with on resuming it at its leaf,
        whose path is `projection` (`resume.start_choice`): None when the path has messages."""
        return start_choice(projection, self.registry, self.default_model,
                            self.level_for_model, self.provider, model, level)

    def begin_with(self, projection: Projection, choice: Choice) -> None:
        """Record `choice` on the path `projection`, as pi 1.6 records the model and level it
        resumes a session without messages with: each where the path's own is another."""
        (provider, model_id), level = choice
        model_differs, level_differs = differs(projection, choice)
        if model_differs:
            self._write(lambda: self.tree.append_model_change(provider, model_id))
        if level_differs:
            self._write(lambda: self.tree.append_thinking_level_change(level))

    def _switch_model(self, provider: str, model_id: str) -> None:
        """pi's setModel: the change, then the level for the new model (its own, else the
        default set, else the one in force), recorded when it changes."""
        current = self.thinking_level()
        self.tree.append_model_change(provider, model_id)
        level = self.level_for_model(provider, model_id)
        self._record_thinking_level(current if level is None else level, current)

    def _record_thinking_level(self, level: str, current: str) -> bool:
        """pi's setThinkingLevel: `level` clamped to the model in force, written (said by the
        answer) only when it is not the level thought at until now (`current`)."""
        clamped = clamped_level(self.model(), level)
        if clamped != current:
            self.tree.append_thinking_level_change(clamped)
        return clamped != current

    def set_label(self, target_id: str, label: str | None) -> None:
        self.tree.record(target_id)
        self._write(lambda: self.tree.append_label(target_id, label))

    def set_name(self, name: str) -> None:
        self._write(lambda: self.tree.append_session_info(name))

    def append_custom(self, custom_type: str, data: object = None) -> None:
        self._write(lambda: self.tree.append_custom(custom_type, data))
