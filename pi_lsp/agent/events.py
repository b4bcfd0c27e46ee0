"""What a running agent tells its subscribers, named as pi names them."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from pi_lsp.providers.base import ProviderEvent
from pi_lsp.session.entries import AgentMessage, AssistantMessage, ToolResultMessage


class _Event(msgspec.Struct, tag_field="type", rename="camel", kw_only=True):
    pass


class AgentStart(_Event, tag="agent_start", kw_only=True):
    pass


class TurnStart(_Event, tag="turn_start", kw_only=True):
    pass


class MessageStart(_Event, tag="message_start", kw_only=True):
    message: AgentMessage


class MessageUpdate(_Event, tag="message_update", kw_only=True):
    """A change to the reply streaming in, without the reply: a copy at each delta would join
    its text at each delta (quadratic); `message_end` has it."""

    delta: ProviderEvent


class MessageEnd(_Event, tag="message_end", kw_only=True):
    message: AgentMessage
    # The entry the message was written as, once it is (the harness sets it): an editor that
    # read the transcript mid-turn tells by it a message of no time (pi accepts one) it holds.
    entry_id: str | None = None


class ToolExecutionStart(_Event, tag="tool_execution_start", kw_only=True):
    tool_call_id: str
    tool_name: str
    args: dict[str, Any]


class ToolExecutionUpdate(_Event, tag="tool_execution_update", kw_only=True):
    tool_call_id: str
    tool_name: str
    partial_result: str


class ToolExecutionEnd(_Event, tag="tool_execution_end", kw_only=True):
    tool_call_id: str
    tool_name: str
    result: ToolResultMessage
    is_error: bool


class TurnEnd(_Event, tag="turn_end", kw_only=True):
    message: AssistantMessage
    tool_results: list[ToolResultMessage]


class SavePoint(_Event, tag="save_point", kw_only=True):
    had_pending_mutations: bool


class AgentEnd(_Event, tag="agent_end", kw_only=True):
    messages: list[AgentMessage]


class ErrorEvent(_Event, tag="error", kw_only=True):
    message: str


class AutoRetryStart(_Event, tag="auto_retry_start", kw_only=True):
    """A failed reply will be asked for again after `delay_ms` (pi's event)."""

    attempt: int
    max_attempts: int
    delay_ms: int
    error_message: str


class AutoRetryEnd(_Event, tag="auto_retry_end", kw_only=True):
    """Retrying is over: a reply came (`success`), or the last failure stands."""

    success: bool
    attempt: int
    final_error: str | None = None


CompactionReason = Literal["manual", "threshold", "overflow"]


class SummaryRetryScheduled(_Event, tag="summarization_retry_scheduled", kw_only=True):
    """A failed summary will be asked for again after `delay_ms` (pi 1.6's event)."""

    attempt: int
    max_attempts: int
    delay_ms: int
    error_message: str


class SummaryRetryAttemptStart(_Event, tag="summarization_retry_attempt_start", kw_only=True,
                               omit_defaults=True):
    """The wait is over and the summary is asked for again (pi 1.6's event)."""

    source: Literal["compaction", "branchSummary"]
    reason: CompactionReason | None = None  # a compaction's


class SummaryRetryFinished(_Event, tag="summarization_retry_finished", kw_only=True):
    """A retried summary came, failed for good or was stopped (pi 1.6's event)."""


class SessionMoved(_Event, tag="session_moved", kw_only=True):
    """The session's file was replaced by another program mid-turn; both sides were kept and
    the session (the turn included) continues in `path`."""

    replaced_path: str
    path: str


class CompactionStart(_Event, tag="compaction_start", kw_only=True):
    reason: CompactionReason  # "threshold" or "overflow": an automatic one tells it


class CompactionEnd(_Event, tag="compaction_end", kw_only=True):
    entry_id: str | None
    error: str | None = None
    aborted: bool = False  # stopped by the user: no error, as pi 1.6 tells it
    will_retry: bool = False


AgentEvent = (
    AgentStart | TurnStart | MessageStart | MessageUpdate | MessageEnd | ToolExecutionStart
    | ToolExecutionUpdate | ToolExecutionEnd | TurnEnd | SavePoint | AgentEnd | ErrorEvent
    | CompactionStart | CompactionEnd | SessionMoved | AutoRetryStart | AutoRetryEnd
    | SummaryRetryScheduled | SummaryRetryAttemptStart | SummaryRetryFinished
)
