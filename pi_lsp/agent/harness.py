"""One session's agent: turn snapshots, buffered writes, save points, queues and abort."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

import msgspec

from pi_lsp.agent.events import (
    AgentEnd,
    AgentEvent,
    ErrorEvent,
    MessageEnd,
    SavePoint,
    TurnEnd,
)
from pi_lsp.agent.loop import run_loop
from pi_lsp.agent.prompt import build_system_prompt
from pi_lsp.agent.tools import ALL_TOOLS, Tool, ToolContext
from pi_lsp.context.build import build_session_context, context_settings
from pi_lsp.context.convert import convert_to_llm, prepare_for_provider
from pi_lsp.providers.base import ModelRequest, Provider, ToolSpec
from pi_lsp.providers.registry import ModelInfo, ModelRegistry
from pi_lsp.session.entries import (
    AgentMessage,
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

Phase = Literal["idle", "turn", "compaction", "branch_summary"]
Approver = Callable[[ToolCall], Awaitable[str | None]]
ProviderFactory = Callable[[str], Provider]
Listener = Callable[[AgentEvent], None]


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


async def allow_all(_call: ToolCall) -> str | None:
    return None


def user_message(text: str, images: list[ImageContent] | None = None) -> UserMessage:
    content: list[UserBlock] = [TextContent(text=text), *(images or [])]
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
    ) -> None:
        self.tree = tree
        self.root = root
        self.registry = registry or ModelRegistry()
        self.default_model = default_model
        self.tools = {tool.name: tool for tool in tools}
        self.approve_call = approve
        self.allow_outside_root = allow_outside_root
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
        self._first_request = True

    # -- subscribers ---------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def emit(self, event: AgentEvent) -> None:
        if isinstance(event, MessageEnd):
            self.tree.append_message(event.message)  # loop messages land as they complete
        for listener in list(self._listeners):
            listener(event)
        if isinstance(event, TurnEnd):
            had = self._flush(stop_at_leaf_move=True)
            self.emit(SavePoint(had_pending_mutations=had))
        elif isinstance(event, AgentEnd) and self._pending:
            self._flush(stop_at_leaf_move=False)

    # -- turn state ----------------------------------------------------------------------

    def model(self) -> ModelInfo:
        """The model in force at the leaf, else the default."""
        settings = context_settings(self.tree.path_to(self.tree.leaf_id))
        if settings.model is not None:
            return self.registry.get(settings.model.provider, settings.model.model_id)
        return self.registry.get(*self.default_model)

    def create_turn_state(self) -> TurnState:
        """Freeze messages (built at the leaf), model, thinking level, tools and system prompt."""
        context = build_session_context(self.tree, self.tree.leaf_id)
        llm = [m for m in map(decode_message, convert_to_llm(context.messages)) if m is not None]
        tools = list(self.tools.values())
        return TurnState(
            messages=prepare_for_provider(llm),  # type: ignore[arg-type]
            model=self.model(),
            thinking_level=context.thinking_level,
            tools=tools,
            system_prompt=build_system_prompt(self.root, tools),
        )

    def prepare_next_turn(self) -> TurnState:
        """A new snapshot with whatever changed since the last call (flushed writes included)."""
        previous = self.state
        self.state = self.create_turn_state()
        if previous is not None:
            self.state.tools, self.state.system_prompt = previous.tools, previous.system_prompt
        return self.state

    def next_request(self) -> tuple[ModelRequest, Provider]:
        if self._first_request and self.state is not None:
            self._first_request = False
            state = self.state
        else:
            state = self.prepare_next_turn()
        request = ModelRequest(
            model=state.model, system_prompt=state.system_prompt, messages=state.messages,
            tools=[ToolSpec(t.spec.name, t.spec.description, t.spec.parameters)
                   for t in state.tools],
            thinking_level=state.thinking_level,
        )
        return request, self.provider(state.model.provider)

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

    def tool(self, name: str) -> Tool | None:
        return self.tools.get(name)

    def tool_context(self, on_update: Callable[[str], None]) -> ToolContext:
        return ToolContext(self.root, self.allow_outside_root, on_update)

    async def approve(self, call: ToolCall) -> str | None:
        return await self.approve_call(call)

    def track(self, task: asyncio.Task[Any]) -> None:
        self._current = task

    # -- running -------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self.phase != "idle"

    def _require_idle(self) -> None:
        if self.busy:
            raise BusyError(f"the session is busy ({self.phase})")

    async def prompt(self, text: str, images: list[ImageContent] | None = None
                     ) -> list[AgentMessage]:
        """Run one prompt to completion; the returned messages are already in the session."""
        self._require_idle()
        self.phase, self.aborted, self._first_request = "turn", False, True
        try:
            self.tree.refresh()
            self.state = self.create_turn_state()
            self.provider(self.state.model.provider)  # a missing API key fails before any write
            return await run_loop(self, [user_message(text, images)])
        except Exception as error:
            self.emit(ErrorEvent(message=f"{type(error).__name__}: {error}"))
            raise
        finally:
            self._flush(stop_at_leaf_move=False)
            self.phase, self.state, self._current = "idle", None, None
            self._steering.clear()
            self._follow_up.clear()

    def steer(self, text: str, images: list[ImageContent] | None = None) -> None:
        """Delivered after the current tool batch, before the next model call."""
        if not self.busy:
            raise NotRunningError("nothing is running to steer; send a prompt instead")
        self._steering.append(user_message(text, images))

    def follow_up(self, text: str, images: list[ImageContent] | None = None) -> None:
        """Delivered when the run would otherwise stop."""
        if not self.busy:
            raise NotRunningError("nothing is running to follow up; send a prompt instead")
        self._follow_up.append(user_message(text, images))

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

        def move() -> None:
            if durable:
                self.tree.move_leaf(target_id)
            elif target_id is None:
                self.tree.reset_leaf()
            else:
                self.tree.branch(target_id)

        self._write("leaf", move)

