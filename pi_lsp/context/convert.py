"""The model layer: runtime messages turned into user / assistant / toolResult messages."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from pi_lsp.session.entries import (
    AgentMessage,
    AssistantBlock,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    ModelMessage,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserBlock,
    UserMessage,
    decode_message,
    encoder,
    head_decoder,
)
from pi_lsp.session.jsontext import Decoder, js_string, js_truthy

COMPACTION_SUMMARY_PREFIX = (
    "The conversation history before this point was compacted into the following summary:"
    "\n\n<summary>\n"
)
COMPACTION_SUMMARY_SUFFIX = "\n</summary>"

# pi-lsp (the seed design): a left branch is marked as a side exploration, never the main line.
BRANCH_SUMMARY_PREFIX = (
    "The following summarizes a parallel branch of this conversation that was explored and "
    "then left. It describes that side exploration only: its changes and conclusions are not "
    "the current state of the work.\n\n<branch_exploration_summary>\n"
)
BRANCH_SUMMARY_SUFFIX = "\n</branch_exploration_summary>"

# pi-ai 1.6's notes for the images a model without image input is not sent
# (transform-messages.js, NON_VISION_*_IMAGE_PLACEHOLDER).
USER_IMAGE_NOTE = "(image omitted: model does not support images)"
TOOL_IMAGE_NOTE = "(tool image omitted: model does not support images)"

PASS_THROUGH_ROLES = frozenset({"system", "user", "assistant", "toolResult"})
NO_RESULT_TEXT = "No result provided"


def bash_execution_text(message: BashExecutionMessage) -> str:
    """pi's bashExecutionToText, which checks no field's type: each is tested and put into
    the text as JavaScript does (a missing command reads `undefined`, an exit code "0" shows)."""
    text = f"Ran `{js_string(message.command)}`\n"
    output = message.output
    text += f"```\n{js_string(output)}\n```" if js_truthy(output) else "(no output)"
    if js_truthy(message.cancelled):
        text += "\n\n(command cancelled)"
    elif exited_otherwise(message.exit_code):
        text += f"\n\nCommand exited with code {js_string(message.exit_code)}"
    if js_truthy(message.truncated) and js_truthy(message.full_output_path):
        text += f"\n\n[Output truncated. Full output: {js_string(message.full_output_path)}]"
    return text


def exited_otherwise(code: Any) -> bool:
    """pi's `exitCode !== null && exitCode !== undefined && exitCode !== 0`: true for any code
    but the number 0 (false and "0" are not it)."""
    if code is None or code is msgspec.UNSET:
        return False
    return isinstance(code, bool) or not (isinstance(code, int | float) and code == 0)


def _user(content: str | list[UserBlock], timestamp: int | None) -> UserMessage:
    return UserMessage(content=content, timestamp=timestamp)


def _user_text(text: str, timestamp: int | None) -> UserMessage:
    return _user([TextContent(text=text)], timestamp)


def message_to_llm(message: AgentMessage) -> ModelMessage | None:
    """One runtime message in the model layer, or None when it never reaches the model."""
    match message:
        case SystemMessage() | UserMessage() | AssistantMessage() | ToolResultMessage():
            return message
        case BashExecutionMessage():
            if js_truthy(message.exclude_from_context):
                return None
            return _user_text(bash_execution_text(message), message.timestamp)
        case CustomMessage():
            content = message.content
            if isinstance(content, str):
                content = [TextContent(text=content)]
            return _user(content, message.timestamp)
        case CompactionSummaryMessage():
            text = COMPACTION_SUMMARY_PREFIX + message.summary + COMPACTION_SUMMARY_SUFFIX
            return _user_text(text, message.timestamp)
        case BranchSummaryMessage():
            text = BRANCH_SUMMARY_PREFIX + message.summary + BRANCH_SUMMARY_SUFFIX
            return _user_text(text, message.timestamp)
    return None


def convert_with_sources(messages: list[msgspec.Raw]
                         ) -> list[tuple[int, msgspec.Raw | ModelMessage]]:
    """`convert_to_llm`, keeping the index of the runtime message each result came from: the
    raw message where it passes through, else the converted one (for the caller to encode)."""
    converted: list[tuple[int, msgspec.Raw | ModelMessage]] = []
    for index, raw in enumerate(messages):
        try:
            role = head_decoder.decode(raw).role
        except msgspec.ValidationError:
            continue
        if role in PASS_THROUGH_ROLES:
            converted.append((index, raw))
            continue
        message = decode_message(raw)
        if role == "custom" and not (isinstance(message, CustomMessage)
                                     and isinstance(message.content, str)):
            converted.append((index, custom_to_llm(raw)))
        elif message is not None:
            llm = message_to_llm(message)
            if llm is not None:  # pi passes the message's own timestamp on, whatever it is
                converted.append((index, msgspec.structs.replace(
                    llm, timestamp=_custom_body_decoder.decode(raw).timestamp)))
    return converted


class _CustomBody(msgspec.Struct):
    """A message's content and timestamp as it holds them (UNSET: missing)."""

    content: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    timestamp: Any = msgspec.UNSET


_custom_body_decoder: Decoder[_CustomBody] = Decoder(_CustomBody)


def custom_to_llm(raw: msgspec.Raw) -> msgspec.Raw:
    """A custom message whose content is not text, as pi's convertToLlm makes it: a user
    message with that content as it is (blocks of unknown types among them, which requests
    leave out; a number, an object), and no content or timestamp key where the message has
    none (JSON.stringify drops them)."""
    body = _custom_body_decoder.decode(raw)
    fields = {"role": "user", "content": body.content, "timestamp": body.timestamp}
    return msgspec.Raw(encoder.encode(
        {key: value for key, value in fields.items() if value is not msgspec.UNSET}))


def convert_to_llm(messages: list[msgspec.Raw]) -> list[msgspec.Raw]:
    """pi's `convertToLlm`, with the branch-summary wrapper of the seed design."""
    return [body if isinstance(body, msgspec.Raw) else msgspec.Raw(encoder.encode(body))
            for _, body in convert_with_sources(messages)]


def prepare_for_provider(messages: list[ModelMessage]) -> list[ModelMessage]:
    return [message for _, message in prepare_with_sources(messages)]


def prepare_with_sources(messages: list[ModelMessage], keep_system: bool = False
                         ) -> list[tuple[int | None, ModelMessage]]:
    """Drop failed replies (with their tool results) and give every tool call a result
    before the conversation moves on, keeping the index each message came from (None for a
    result made here). System messages are left out unless `keep_system` (a model that takes
    them mid-conversation): then one after an open tool call waits until the calls are closed,
    as pi-ai's transformMessages holds it."""
    prepared: list[tuple[int | None, ModelMessage]] = []
    held: list[tuple[int | None, ModelMessage]] = []
    open_calls: list[ToolCall] = []
    answered: set[str] = set()

    def close_open_calls(timestamp: int | None) -> None:
        for call in open_calls:
            if call.id not in answered:
                prepared.append((None, ToolResultMessage(
                    tool_call_id=call.id, tool_name=call.name,
                    content=[TextContent(text=NO_RESULT_TEXT)], is_error=True,
                    timestamp=timestamp,
                )))
        open_calls.clear()
        answered.clear()
        prepared.extend(held)
        held.clear()

    for index, message in enumerate(messages):
        if isinstance(message, SystemMessage):
            if keep_system:
                (held if open_calls else prepared).append((index, message))
            continue
        if isinstance(message, AssistantMessage):
            close_open_calls(message.timestamp)
            if message.stop_reason in ("error", "aborted"):
                continue
            open_calls.extend(b for b in message.content if isinstance(b, ToolCall))
        elif isinstance(message, ToolResultMessage):
            call_id = message.call_id
            if call_id is None or call_id not in {call.id for call in open_calls} or \
                    call_id in answered:
                continue  # its call was dropped with a failed reply, or it is a repeat
            answered.add(call_id)
        else:
            close_open_calls(message.timestamp)
        prepared.append((index, message))
    if open_calls:
        close_open_calls(prepared[-1][1].timestamp)
    return prepared


def images_noted(content: list[UserBlock], note: str) -> list[UserBlock]:
    """`content` with each run of images as one `note` text block: pi-ai 1.6's
    replaceImagesWithPlaceholder, which also counts a text block that reads `note` as the start
    of a run (an image right after it adds no second note). Other blocks stay as they are."""
    noted: list[UserBlock] = []
    after_note = False
    for block in content:
        if isinstance(block, ImageContent):
            if not after_note:
                noted.append(TextContent(text=note))
            after_note = True
            continue
        noted.append(block)
        after_note = block.text == note
    return noted


def downgrade_images(messages: list[ModelMessage], model_input: Sequence[str]
                     ) -> list[ModelMessage]:
    """The messages a model without image input (`"image"` not in `model_input`) is sent:
    pi-ai 1.6's downgradeUnsupportedImages, which every provider applies first. In a user
    message (with block content) and a tool result each run of images becomes a note, so an
    image-only prompt still reaches the model, as the note."""
    if "image" in model_input:
        return messages
    downgraded: list[ModelMessage] = []
    for message in messages:
        if isinstance(message, UserMessage) and not isinstance(message.content, str) and any(
                isinstance(block, ImageContent) for block in message.content):
            message = msgspec.structs.replace(
                message, content=images_noted(message.content, USER_IMAGE_NOTE))
        elif isinstance(message, ToolResultMessage) and any(
                isinstance(block, ImageContent) for block in message.content):
            message = msgspec.structs.replace(
                message, content=images_noted(message.content, TOOL_IMAGE_NOTE))
        downgraded.append(message)
    return downgraded


def adapt_to_model(messages: list[ModelMessage], provider: str, api: str, model_id: str,
                   normalize_id: Callable[[str, AssistantMessage], str] | None = None,
                   *, model_input: Sequence[str]) -> list[ModelMessage]:
    """pi's cross-provider transform (transformMessages): images a model without image input
    cannot see become notes (`downgrade_images`); another model's replies lose their thinking
    (it was that model's, and as text it would read as part of the visible reply), redacted
    thinking and signatures, and get tool-call ids this provider accepts
    (`normalize_id(id, reply)`)."""
    renamed: dict[str, str] = {}
    adapted: list[ModelMessage] = []
    for message in downgrade_images(messages, model_input):
        if isinstance(message, AssistantMessage) and not (
                message.provider == provider and message.api == api and message.model == model_id):
            blocks = [b for b in (_foreign_block(b, message, normalize_id, renamed)
                                  for b in message.content) if b is not None]
            message = msgspec.structs.replace(message, content=blocks)
        elif isinstance(message, ToolResultMessage) and message.call_id in renamed:
            message = msgspec.structs.replace(message,
                                              tool_call_id=renamed[message.tool_call_id])
        adapted.append(message)
    return adapted


def _foreign_block(block: AssistantBlock, message: AssistantMessage,
                   normalize_id: Callable[[str, AssistantMessage], str] | None,
                   renamed: dict[str, str]) -> AssistantBlock | None:
    """One block of another model's reply, as this model may see it."""
    if isinstance(block, ThinkingContent):
        return None
    if isinstance(block, TextContent):
        return TextContent(text=block.text)
    if not isinstance(block, ToolCall):
        return block  # an image a context edit put in a reply: every provider leaves it out
    new_id = normalize_id(block.id, message) if normalize_id else block.id
    if new_id != block.id:
        renamed[block.id] = new_id
    return ToolCall(id=new_id, name=block.name, arguments=block.arguments)
