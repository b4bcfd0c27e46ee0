"""The agent loop: model call → tool calls → model call … until the model stops."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

import msgspec

from pi_lsp.agent.events import (
    AgentEnd,
    AgentEvent,
    AgentStart,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnEnd,
    TurnStart,
)
from pi_lsp.agent.tools import (
    Tool,
    ToolContext,
    ToolResult,
    execute_tool,
    thrown_result,
    unrun_result,
)
from pi_lsp.providers.base import MissingApiKeyError, ModelRequest, Provider, ReplyBuilder
from pi_lsp.providers.registry import ModelInfo
from pi_lsp.session.entries import (
    AgentMessage,
    AssistantMessage,
    StopReason,
    ToolCall,
    ToolResultMessage,
    UnsentReply,
    UserMessage,
)
from pi_lsp.session.ids import now_ms

log = logging.getLogger(__name__)

ABORTED_REPLY = "Request was aborted"
# pi 1.6's words for a call cut short by an abort, or not started after one (agent-loop.js)
ABORTED_TOOL = "Operation aborted"
# pi 1.6's words for a call of a reply cut at the output limit (failToolCallsFromTruncatedMessage)
TRUNCATED_TOOL = ('Tool call "{name}" was not executed: the response hit the output token limit, '
                  "so its arguments may be truncated. Re-issue the tool call with complete "
                  "arguments.")

T = TypeVar("T")


class Abortable(Protocol):
    """What abortable() needs: whether abort() came, and where to put the task it cancels."""

    @property
    def aborted(self) -> bool: ...

    def track(self, task: asyncio.Task[Any]) -> None: ...


class LoopHooks(Protocol):
    """What the loop needs from whoever runs it (the harness)."""

    aborted: bool

    def emit(self, event: AgentEvent) -> None: ...

    async def next_request(self) -> tuple[ModelRequest, Provider]:
        """The request at the leaf and the provider for its model (made if need be)."""
        ...

    def model(self) -> ModelInfo:
        """The model in force at the leaf: a reply no request was made for is this one's."""
        ...

    def thinking_level(self) -> str: ...

    async def take_steering(self) -> list[UserMessage]: ...

    async def take_follow_up(self) -> list[UserMessage]: ...

    async def prepare_next_turn(self) -> None:
        """Between two turns of a run, before the next turn starts (compaction may run)."""
        ...

    async def feedback(self) -> list[UserMessage]:
        """Messages to continue with when the run would stop (the editor's diagnostics)."""
        ...

    def tool(self, name: str) -> Tool | None: ...

    def tool_context(self, on_update: Callable[[str], None]) -> ToolContext: ...

    async def approve(self, call: ToolCall, ctx: ToolContext) -> str | ToolResult | None:
        """None to run the call in `ctx`, the reason it was refused, or its result where working
        out what to approve met the tool's own failure."""
        ...

    def track(self, task: asyncio.Task[Any]) -> None:
        """The task abort() must cancel right now."""
        ...

    async def retry_after(self, reply: AssistantMessage) -> bool:
        """Whether to ask again for a failed reply, having waited as long as the retry policy
        says."""
        ...

    def omit_attempt(self) -> None:
        """Leave the last reply and its tool results out of the context from here on."""
        ...


class Aborted(Exception):
    """The current step was cancelled by abort()."""

    def __str__(self) -> str:
        return "aborted"


async def abortable(hooks: Abortable, work: Coroutine[Any, Any, T]) -> T:
    """Run `work` as its own task so abort() can cancel it without cancelling the loop."""
    if hooks.aborted:  # abort() came while nothing ran that it could cancel
        work.close()
        raise Aborted()
    task = asyncio.ensure_future(work)
    hooks.track(task)
    try:
        return await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        cut = current is not None and current.cancelling() > 0
        if not task.cancelled() or (cut and not hooks.aborted):
            raise
        if current is not None and cut:
            # An aborted run cancelled itself (a shutdown's grace ran out while the step's
            # cleanup ran): the step ends as the abort's, so the run still writes what an
            # abort writes (the call's result, the aborted reply), with no wait left in it.
            current.uncancel()
        raise Aborted() from None


def _deliver(hooks: LoopHooks, messages: list[UserMessage], produced: list[AgentMessage]) -> None:
    for message in messages:
        hooks.emit(MessageStart(message=message))
        hooks.emit(MessageEnd(message=message))
        produced.append(message)


def unsent_reply(hooks: LoopHooks, reason: StopReason, text: str, unmade: bool = False
                 ) -> AssistantMessage:
    """The reply to a request never sent, ended as `reason` with `text`; `unmade`: the
    request could not be made, which pi 1.6 writes in a shape of its own."""
    model = hooks.model()
    reply = ReplyBuilder(model.api, model, hooks.thinking_level())
    reply.fail(reason, text)
    message = reply.message()
    if unmade:
        message = UnsentReply(**msgspec.structs.asdict(message))
    hooks.emit(MessageStart(message=message))
    hooks.emit(MessageEnd(message=message))
    return message


async def stream_reply(hooks: LoopHooks) -> AssistantMessage:
    try:  # abortable: making a provider the first time imports its SDK, a second or more
        request, provider = await abortable(hooks, hooks.next_request())
    except Aborted:
        return unsent_reply(hooks, "aborted", ABORTED_REPLY)
    except Exception as error:  # a model switched to mid-run with no key, no such provider…
        # …ends the run with the reason in the file, as a failed reply does.
        expected = isinstance(error, MissingApiKeyError | ValueError)
        log.warning("no request could be made: %s", error, exc_info=not expected)
        return unsent_reply(hooks, "error", str(error) or type(error).__name__, unmade=True)
    reply = ReplyBuilder(request.model.api, request.model, request.thinking_level)
    hooks.emit(MessageStart(message=reply.snapshot()))

    async def consume() -> None:
        async for delta in provider.stream(request, reply):
            hooks.emit(MessageUpdate(delta=delta))

    try:
        await abortable(hooks, consume())
    except Aborted:
        reply.fail("aborted", ABORTED_REPLY)
    await read_long_arguments(hooks, reply)
    # After the read: a stop while it ran still aborts the reply, as one seen by pi 1.6 at the
    # stream's end does (and did here when the stream itself parsed the arguments).
    if hooks.aborted and reply.stop_reason not in ("error", "aborted"):
        reply.fail("aborted", ABORTED_REPLY)
    message = reply.message()
    hooks.emit(MessageEnd(message=message))
    return message


async def read_long_arguments(hooks: LoopHooks, reply: ReplyBuilder) -> None:
    """The reply's long tool-call arguments parsed off the loop, an aborted reply's too; when a
    shutdown cancels an aborted run meanwhile, message() parses the rest, so the abort is
    still written (as abortable lets it be)."""
    try:
        await reply.read_long_arguments()
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if not hooks.aborted or current is None:
            raise
        current.uncancel()


def aborted_turn(hooks: LoopHooks) -> AssistantMessage:
    """The turn pi 1.6 starts after an aborted tool batch: its request is aborted before it is
    sent, and the aborted reply ends the session's branch (pi's next prompt then counts the
    tool results when it checks the context's size)."""
    hooks.emit(TurnStart())
    reply = unsent_reply(hooks, "aborted", ABORTED_REPLY)
    hooks.emit(TurnEnd(message=reply, tool_results=[]))
    return reply


async def run_tool(hooks: LoopHooks, call: ToolCall) -> ToolResultMessage:
    hooks.emit(ToolExecutionStart(tool_call_id=call.id, tool_name=call.name,
                                  args=call.object_arguments))
    result: ToolResult
    started: float | None = None  # when the tool began to run, if it did
    tool = hooks.tool(call.name)
    if hooks.aborted:
        result = thrown_result(ABORTED_TOOL)
    elif tool is None:  # answered at once, as pi 1.6 does: there is nothing to approve
        result = unrun_result(f"Tool {call.name} not found")
    elif call.arguments_error is not None:  # as pi 1.6 answers arguments it could not read
        result = thrown_result(f'Invalid arguments for tool "{call.name}": '
                               f"{call.arguments_error}")
    else:
        def update(text: str) -> None:
            hooks.emit(ToolExecutionUpdate(tool_call_id=call.id, tool_name=call.name,
                                           partial_result=text))
        context = hooks.tool_context(update)
        partial: list[ToolResult] = []  # what the call had to say when it was aborted
        context.on_abort = partial.append
        approving = time.monotonic()
        try:
            # Abortable too: an approval nobody answers must not hold the session.
            answer = await abortable(hooks, hooks.approve(call, context))
            if isinstance(answer, str):
                result = thrown_result(answer)  # refused, as pi's beforeToolCall: not run
            elif answer is not None:
                # the tool's failure (pi's tool throws as it runs), timed from its working out
                started, result = approving, answer
            else:
                started = time.monotonic()
                result = await abortable(hooks, execute_tool(
                    tool, call.name, call.object_arguments, context))
        except Aborted:
            result = partial[-1] if partial else thrown_result(ABORTED_TOOL)
        except Exception as error:  # a failed approval still answers the call, or no turn can
            log.exception("approving the %s call failed", call.name)
            result = thrown_result(f"{call.name} failed: {type(error).__name__}: {error}")
    duration = elapsed_ms(started) if started is not None and result.ran else None
    return end_tool(hooks, call, result, duration)


def elapsed_ms(started: float) -> int:
    """The whole ms since `started` (monotonic), rounded as pi 1.6's Math.round rounds."""
    return math.floor((time.monotonic() - started) * 1000 + 0.5)


def truncated_tool(hooks: LoopHooks, call: ToolCall) -> ToolResultMessage:
    """A call of a reply cut at the output limit, answered without running, as pi 1.6 does:
    its arguments may be cut too (a file's content, half a command)."""
    hooks.emit(ToolExecutionStart(tool_call_id=call.id, tool_name=call.name,
                                  args=call.object_arguments))
    return end_tool(hooks, call, thrown_result(TRUNCATED_TOOL.format(name=call.name)))


def end_tool(hooks: LoopHooks, call: ToolCall, result: ToolResult,
             duration_ms: int | None = None) -> ToolResultMessage:
    """The call's result message, told as ended and written; `duration_ms` is how long its
    tool ran (None: it did not)."""
    message = ToolResultMessage(
        tool_call_id=call.id, tool_name=call.name, content=result.content, details=result.details,
        is_error=result.is_error, duration_ms=duration_ms, timestamp=now_ms(),
    )
    hooks.emit(ToolExecutionEnd(tool_call_id=call.id, tool_name=call.name, result=message,
                                is_error=result.is_error))
    hooks.emit(MessageStart(message=message))
    hooks.emit(MessageEnd(message=message))
    return message


async def next_turn(hooks: LoopHooks, pending: list[UserMessage]) -> list[UserMessage]:
    """Start the next turn of a run, as pi-agent-core does: the turn is prepared first, then
    steering sent while that ran is taken (unless messages already wait)."""
    await hooks.prepare_next_turn()
    if not pending:
        pending = await hooks.take_steering()
    hooks.emit(TurnStart())
    return pending


def tool_calls(message: AssistantMessage) -> list[ToolCall]:
    return [block for block in message.content if isinstance(block, ToolCall)]


async def run_loop(hooks: LoopHooks, prompts: list[UserMessage]) -> list[AgentMessage]:
    """Run prompts to completion; returns every message the run produced, in order."""
    produced: list[AgentMessage] = []
    hooks.emit(AgentStart())
    hooks.emit(TurnStart())
    _deliver(hooks, prompts, produced)
    pending = await hooks.take_steering()
    while True:
        more_tools = True
        while more_tools or pending:
            _deliver(hooks, pending, produced)
            reply = await stream_reply(hooks)
            produced.append(reply)
            calls = tool_calls(reply)
            results: list[ToolResultMessage] = []
            if reply.stop_reason == "aborted" or reply.stop_reason == "error":
                # Its calls get no result, as pi 1.6's agent-loop gives none: requests drop the
                # reply, so a result of one of its calls would reach the API with no call.
                hooks.emit(TurnEnd(message=reply, tool_results=[]))
                if reply.stop_reason == "error" and await hooks.retry_after(reply):
                    # The failed reply stays in the file; the next request leaves it out.
                    hooks.emit(TurnStart())
                    more_tools, pending = True, []
                    continue
                hooks.emit(AgentEnd(messages=produced))
                return produced
            for call in calls:
                results.append(truncated_tool(hooks, call) if reply.stop_reason == "length"
                               else await run_tool(hooks, call))
            produced.extend(results)
            hooks.emit(TurnEnd(message=reply, tool_results=results))
            if hooks.aborted:
                if calls:
                    produced.append(aborted_turn(hooks))
                hooks.emit(AgentEnd(messages=produced))
                return produced
            more_tools = bool(calls)
            pending = await hooks.take_steering()
            if more_tools or pending:
                pending = await next_turn(hooks, pending)
        pending = await hooks.take_follow_up() or await hooks.feedback()
        if not pending:
            break
        pending = await next_turn(hooks, pending)
    hooks.emit(AgentEnd(messages=produced))
    return produced

