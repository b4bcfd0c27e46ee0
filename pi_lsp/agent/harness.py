"""One session's agent: turn snapshots, buffered writes, save points, queues and abort."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

import msgspec

from pi_lsp.agent.approval import Approver, allow_all, approval_request
from pi_lsp.agent.events import (
    AgentEnd,
    AgentEvent,
    AutoRetryEnd,
    AutoRetryStart,
    CompactionEnd,
    CompactionStart,
    ErrorEvent,
    MessageEnd,
    SavePoint,
    SessionMoved,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
)
from pi_lsp.agent.feedback import FEEDBACK_ROUNDS
from pi_lsp.agent.loop import Aborted, abortable, run_loop
from pi_lsp.agent.prompt import build_system_prompt
from pi_lsp.agent.retry import RetrySettings, is_passing_failure
from pi_lsp.agent.tools import ALL_TOOLS, DISK, FileAccess, Tool, ToolContext, ToolError
from pi_lsp.context.build import build_session_context, context_tokens
from pi_lsp.context.convert import convert_to_llm, prepare_for_provider
from pi_lsp.context.projection import context_settings
from pi_lsp.providers.base import ModelRequest, Provider, ToolSpec
from pi_lsp.providers.registry import ModelInfo, ModelRegistry
from pi_lsp.session.entries import (
    AgentMessage,
    AssistantMessage,
    ImageContent,
    LlmMessage,
    TextContent,
    ToolCall,
    UserBlock,
    UserMessage,
    decode_message,
)
from pi_lsp.session.ids import now_ms
from pi_lsp.session.tree import SessionTree
from pi_lsp.summarize.branch import BranchOutcome, branch, branch_with_summary
from pi_lsp.summarize.compaction import (
    CompactionResult,
    CompactionSettings,
    NothingToCompactError,
    compact,
    prepare_compaction,
)
from pi_lsp.summarize.extractive import ExtractiveSummarizer
from pi_lsp.summarize.summarizer import Summarizer, SummaryError

Phase = Literal["idle", "turn", "compaction", "branch_summary"]
ProviderFactory = Callable[[str], Provider]
Listener = Callable[[AgentEvent], None]
# Given the files a run changed, what the editor says is wrong with them (None: nothing).
Diagnostics = Callable[[list[Path]], Awaitable[str | None]]
FILE_TOOLS = frozenset({"write", "edit"})


class BusyError(Exception):
    """The session is running something else; try again when it is idle."""


class NotRunningError(Exception):
    """Steering and follow-ups need a running turn."""


class TurnState(msgspec.Struct):
    """What one model call is made from, frozen when the call is prepared."""

    messages: list[LlmMessage]
    model: ModelInfo
    thinking_level: str
    tools: list[Tool]
    system_prompt: str


_OVERFLOW = re.compile(
    r"prompt is too long|exceeds? the context window|maximum context length|context length|"
    r"context_length_exceeded|input is too long|too many (input )?tokens|request_too_large",
    re.I,
)


def is_context_overflow(error_message: str | None) -> bool:
    """Whether a provider error says the request did not fit the model's window."""
    return bool(error_message and _OVERFLOW.search(error_message))


def last_reply(messages: list[AgentMessage]) -> AssistantMessage | None:
    return next((m for m in reversed(messages) if isinstance(m, AssistantMessage)), None)


def user_message(text: str, images: list[ImageContent] | None = None,
                 attachments: list[str] | None = None) -> UserMessage:
    content: list[UserBlock] = [TextContent(text=text),
                                *(TextContent(text=a) for a in attachments or []),
                                *(images or [])]
    return UserMessage(content=content, timestamp=now_ms())


class Harness:
    def __init__(
        self,
        tree: SessionTree,
        root: Path,
        providers: ProviderFactory,
        registry: ModelRegistry | None = None,
        default_model: tuple[str, str] = ("anthropic", "claude-sonnet-4-5"),
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
    ) -> None:
        self.tree = tree
        self.root = root
        self.registry = registry or ModelRegistry()
        self.default_model = default_model
        self.tools = {tool.name: tool for tool in tools}
        self.approve_call = approve
        self.allow_outside_root = allow_outside_root
        self.session_dirs = session_dirs
        self.summarizer: Summarizer = summarizer or ExtractiveSummarizer()
        self.compaction = compaction or CompactionSettings()
        self.branch_reserve_tokens = branch_reserve_tokens
        self.files = files
        self.diagnostics = diagnostics
        self.retry = retry or RetrySettings()
        self._retry_attempt = 0  # retries of the current reply so far
        self._editing: dict[str, Path] = {}  # running write/edit calls: call id -> file
        self._touched: set[Path] = set()  # files this prompt's run changed
        self._feedback_rounds = 0
        self.phase: Phase = "idle"
        self.aborted = False
        self.state: TurnState | None = None
        self._providers = providers
        self._provider_cache: dict[str, Provider] = {}
        self._listeners: list[Listener] = []
        self._pending: list[tuple[str, Callable[[], object]]] = []
        self._steering: list[UserMessage] = []
        self._follow_up: list[UserMessage] = []
        self._current: asyncio.Task[Any] | None = None

    # -- subscribers ---------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def emit(self, event: AgentEvent) -> None:
        moved: SessionMoved | None = None
        if isinstance(event, MessageEnd):
            path = self.tree.path
            self.tree.append_message(event.message)  # loop messages land as they complete
            if self.tree.path != path:
                moved = SessionMoved(replaced_path=path, path=self.tree.path)
        self._note_edits(event)
        ended_retry = self._retry_attempt > 0 and isinstance(event, MessageEnd) and \
            isinstance(event.message, AssistantMessage) and event.message.stop_reason != "error"
        for listener in list(self._listeners):
            listener(event)
        if moved is not None:
            self.emit(moved)
        if ended_retry:
            self._end_retry(success=True)
        if isinstance(event, TurnEnd):
            had = self._flush(stop_at_leaf_move=True)
            self.emit(SavePoint(had_pending_mutations=had))
        elif isinstance(event, AgentEnd) and self._pending:
            self._flush(stop_at_leaf_move=False)

    # -- turn state ----------------------------------------------------------------------

    def model(self) -> ModelInfo:
        """The model in force at the leaf, else the default."""
        return self.model_at(self.tree.leaf_id)

    def model_at(self, leaf_id: str | None) -> ModelInfo:
        settings = context_settings(self.tree.path_to(leaf_id))
        if settings.model is not None:
            return self.registry.get(settings.model.provider, settings.model.model_id)
        return self.registry.get(*self.default_model)

    def create_turn_state(self) -> TurnState:
        """Freeze messages (built at the leaf), model, thinking level, tools and system prompt."""
        return self.turn_state_at(self.tree.leaf_id)

    def turn_state_at(self, leaf_id: str | None) -> TurnState:
        context = build_session_context(self.tree, leaf_id)
        llm = [m for m in map(decode_message, convert_to_llm(context.messages)) if m is not None]
        tools = list(self.tools.values())
        return TurnState(
            messages=prepare_for_provider(llm),  # type: ignore[arg-type]
            model=self.model_at(leaf_id),
            thinking_level=context.thinking_level,
            tools=tools,
            system_prompt=build_system_prompt(self.root, tools),
        )

    def request_for(self, state: TurnState) -> ModelRequest:
        return ModelRequest(
            model=state.model, system_prompt=state.system_prompt, messages=state.messages,
            tools=[ToolSpec(t.spec.name, t.spec.description, t.spec.parameters)
                   for t in state.tools],
            thinking_level=state.thinking_level, session_id=self.tree.header.id,
        )

    def prepare_next_turn(self) -> TurnState:
        """A new snapshot with whatever changed since the last call (flushed writes included)."""
        previous = self.state
        self.state = self.create_turn_state()
        if previous is not None:
            self.state.tools, self.state.system_prompt = previous.tools, previous.system_prompt
        return self.state

    def next_request(self) -> tuple[ModelRequest, Provider]:
        state = self.prepare_next_turn()
        return self.request_for(state), self.provider(state.model.provider)

    def provider(self, name: str) -> Provider:
        if name not in self._provider_cache:
            self._provider_cache[name] = self._providers(name)
        return self._provider_cache[name]

    # -- the loop's hooks ----------------------------------------------------------------

    def take_steering(self) -> list[UserMessage]:
        taken, self._steering = self._steering, []
        return taken

    def take_follow_up(self) -> list[UserMessage]:
        taken, self._follow_up = self._follow_up, []
        return taken

    async def feedback(self) -> list[UserMessage]:
        """The editor's problems in the files this run changed, as a user message (capped)."""
        touched, self._touched = sorted(self._touched), set()
        if self.diagnostics is None or not touched or self.aborted or \
                self._feedback_rounds >= FEEDBACK_ROUNDS:
            return []
        text = await self.diagnostics(touched)
        if text is None:
            return []
        self._feedback_rounds += 1
        return [user_message(text)]

    def _note_edits(self, event: AgentEvent) -> None:
        if isinstance(event, ToolExecutionStart) and event.tool_name in FILE_TOOLS:
            with contextlib.suppress(ToolError):  # the tool reports a bad path itself
                self._editing[event.tool_call_id] = ToolContext(self.root).given(
                    event.args.get("path")).resolve()
        elif isinstance(event, ToolExecutionEnd):
            path = self._editing.pop(event.tool_call_id, None)
            if path is not None and not event.is_error:
                self._touched.add(path)

    def tool(self, name: str) -> Tool | None:
        return self.tools.get(name)

    def tool_context(self, on_update: Callable[[str], None]) -> ToolContext:
        return ToolContext(self.root, self.allow_outside_root, on_update, self.session_dirs,
                           files=self.files)

    async def approve(self, call: ToolCall, ctx: ToolContext) -> str | None:
        try:
            request = approval_request(call, ctx)
        except ToolError as error:
            return str(error)  # refused outright: nobody is asked
        except (OSError, UnicodeError, ValueError) as error:  # as the tool itself would fail
            return f"{call.name} failed: {error}"
        if request is None:
            return None
        refusal = await self.approve_call(request)
        if refusal is None:
            ctx.approved = request.change
        return refusal

    def track(self, task: asyncio.Task[Any]) -> None:
        self._current = task

    async def retry_after(self, reply: AssistantMessage) -> bool:
        """Wait and say yes when the reply failed for a passing reason and retries are left
        (settings `retry`); each wait is announced as an `auto_retry_start` event."""
        settings, error = self.retry, reply.error_message
        if self.aborted or not settings.enabled or self._retry_attempt >= settings.max_retries \
                or is_context_overflow(error) or not is_passing_failure(error):
            if self._retry_attempt:
                self._end_retry(success=False, final_error=error)
            return False
        self._retry_attempt += 1
        delay_ms = settings.delay_ms(self._retry_attempt)
        self.emit(AutoRetryStart(attempt=self._retry_attempt, max_attempts=settings.max_retries,
                                 delay_ms=delay_ms, error_message=error or "Unknown error"))
        try:
            await abortable(self, asyncio.sleep(delay_ms / 1000))
        except Aborted:
            self._end_retry(success=False, final_error="Retry cancelled")
            return False
        return True

    def _end_retry(self, success: bool, final_error: str | None = None) -> None:
        attempt, self._retry_attempt = self._retry_attempt, 0
        self.emit(AutoRetryEnd(success=success, attempt=attempt, final_error=final_error))

    # -- running -------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self.phase != "idle"

    def _require_idle(self) -> None:
        if self.busy:
            raise BusyError(f"the session is busy ({self.phase})")

    async def prompt(self, text: str, images: list[ImageContent] | None = None,
                     attachments: list[str] | None = None) -> list[AgentMessage]:
        """Run one prompt to completion; the returned messages are already in the session.

        The context is compacted first when it has outgrown the window, and a request the
        provider rejects as too long is compacted and retried once. A failure is told to
        subscribers as one `error` event and raised. `attachments` (code from the editor) follow
        the text as blocks of their own.
        """
        try:
            return await self._prompt(text, images, attachments)
        except Exception as error:
            self.emit(ErrorEvent(message=str(error) or type(error).__name__))
            raise

    async def _prompt(self, text: str, images: list[ImageContent] | None,
                      attachments: list[str] | None) -> list[AgentMessage]:
        self._require_idle()
        self.aborted = False
        self._touched.clear()
        self._feedback_rounds = 0
        self.tree.refresh()
        await self._compact_if_needed("threshold")
        produced = await self._run([user_message(text, images, attachments)])
        last = last_reply(produced)
        if last is not None and last.stop_reason == "error" and \
                is_context_overflow(last.error_message) and self.compaction.enabled:
            if await self._compact_if_needed("overflow", force=True):
                produced += await self._run([])
        elif last is not None and last.stop_reason != "aborted":
            await self._compact_if_needed("threshold")
        return produced

    async def _run(self, prompts: list[UserMessage]) -> list[AgentMessage]:
        self.phase, self.aborted, self._retry_attempt = "turn", False, 0
        self.tree.hold_leaf = True  # another writer's entries must not become this turn's parent
        try:
            self.state = self.create_turn_state()
            self.provider(self.state.model.provider)  # a missing API key fails before any write
            return await run_loop(self, prompts)
        finally:
            if self._retry_attempt:  # aborted while a retry ran
                self._end_retry(success=False, final_error="Retry cancelled")
            self.tree.hold_leaf = False
            self._flush(stop_at_leaf_move=False)
            self.phase, self.state, self._current = "idle", None, None
            self._steering.clear()
            self._follow_up.clear()

    def context_tokens(self) -> int:
        return context_tokens(self.tree, self.tree.leaf_id)

    async def _compact_if_needed(self, reason: str, force: bool = False) -> bool:
        settings = self.compaction
        window = self.model().context_window
        if not settings.enabled or self.aborted:
            return False
        if not force and self.context_tokens() <= window - settings.reserve_tokens:
            return False
        if prepare_compaction(self.tree.path_to(self.tree.leaf_id), settings) is None:
            return False
        self.emit(CompactionStart(reason=reason))
        try:
            result = await self.compact()
        except (SummaryError, NothingToCompactError, Aborted) as error:
            self.emit(CompactionEnd(entry_id=None, error=str(error) or "aborted"))
            return False
        self.emit(CompactionEnd(entry_id=result.entry_id, will_retry=reason == "overflow"))
        return True

    async def compact(self, instructions: str | None = None) -> CompactionResult:
        """Compact the current branch now; refused while anything else runs."""
        self._require_idle()
        self.phase, self.aborted = "compaction", False
        try:
            return await abortable(self, compact(
                self.tree, self.tree.leaf_id, self.summarizer, self.compaction, instructions))
        finally:
            self.phase, self._current = "idle", None

    async def branch_with_summary(self, target_id: str, instructions: str | None = None,
                                  durable: bool = True) -> BranchOutcome:
        """Leave the current branch for `target_id`, summarizing it; refused while busy."""
        self._require_idle()
        self.tree.record(target_id)
        self.phase, self.aborted = "branch_summary", False
        budget = self.model().context_window - self.branch_reserve_tokens
        try:
            return await abortable(self, branch_with_summary(
                self.tree, target_id, self.summarizer, budget, instructions, durable))
        finally:
            self.phase, self._current = "idle", None

    def branch(self, target_id: str, durable: bool = True) -> BranchOutcome:
        """A plain pointer move; refused while busy (use move_leaf to queue one)."""
        self._require_idle()
        return branch(self.tree, target_id, durable)

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

    def _write(self, kind: str, action: Callable[[], object]) -> None:
        if self.busy:
            self._pending.append((kind, action))
        else:
            action()

    def _flush(self, stop_at_leaf_move: bool) -> bool:
        """Write queued changes in the order they were asked for.

        At a turn end a leaf move (and all that came after it) waits for the run to end,
        so the running loop's next message still hangs where the loop expects.
        """
        flushed = False
        while self._pending:
            kind, action = self._pending[0]
            if stop_at_leaf_move and kind == "leaf":
                break
            self._pending.pop(0)
            action()
            flushed = True
        return flushed

    def set_model(self, provider: str, model_id: str) -> None:
        self._write("model", lambda: self.tree.append_model_change(provider, model_id))

    def set_thinking_level(self, level: str) -> None:
        self._write("thinking", lambda: self.tree.append_thinking_level_change(level))

    def set_label(self, target_id: str, label: str | None) -> None:
        self.tree.record(target_id)
        self._write("label", lambda: self.tree.append_label(target_id, label))

    def set_name(self, name: str) -> None:
        self._write("name", lambda: self.tree.append_session_info(name))

    def append_custom(self, custom_type: str, data: object = None) -> None:
        self._write("custom", lambda: self.tree.append_custom(custom_type, data))

    def move_leaf(self, target_id: str | None, durable: bool = True) -> None:
        if target_id is not None:
            self.tree.record(target_id)

        self._write("leaf", lambda: self.tree.move_leaf(target_id, durable=durable))

