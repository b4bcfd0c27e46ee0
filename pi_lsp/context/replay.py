"""pi 1.6's replay of system messages: the prompt and tools in force after a list of them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from msgspec import UNSET

from pi_lsp.session.entries import (
    ReadMessage,
    SystemCheckpoint,
    SystemMessage,
    TextContent,
    encoder,
)
from pi_lsp.session.jsontext import js_entries, js_field
from pi_lsp.session.systemfields import listed_tools, section_entries, tool_key


def system_content_text(message: SystemMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    return "\n".join(b.text for b in message.content if isinstance(b, TextContent))


def current_tools(messages: Sequence[ReadMessage | None]) -> list[Any]:
    """Tool declarations after every add and remove, in first-declared order."""
    tools: dict[Any, Any] = {}
    for message in messages:
        if isinstance(message, SystemMessage):
            for tool in listed_tools(message.tools_removed):
                tools.pop(tool_key(tool), None)
            for tool in listed_tools(message.tools_added):
                tools[tool_key(tool)] = tool  # a redefinition keeps its place
    return list(tools.values())


def additive_prefix(systems: Sequence[SystemMessage], lead: bool) -> int:
    """How many of a request's system messages pi 1.6 folds into its top-level tools where later
    additions are declared in place (resolveTranscriptTools "additions"): the leading one
    (`lead`), and through the last that takes a tool away or declares a name again, which an
    addition cannot say (a name once removed counts too, as pi counts it)."""
    declared: set[Any] = set()
    last = -1
    for index, message in enumerate(systems):
        if listed_tools(message.tools_removed):
            last = index
        for tool in listed_tools(message.tools_added):
            if tool_key(tool) in declared:
                last = index
            declared.add(tool_key(tool))
    return max(1 if lead else 0, last + 1)


def current_system_message(messages: Sequence[ReadMessage | None]) -> SystemMessage | None:
    """All system messages folded into one (pi's `getCurrentSystemMessage`), or None."""
    texts: list[str] = []
    sections: dict[str, str | None] = {}
    timestamp: int | None = None
    for message in messages:
        if not isinstance(message, SystemMessage):
            continue
        if timestamp is None:
            timestamp = message.timestamp
        text = system_content_text(message)
        if text:
            texts.append(text)
        for name, value in section_entries(message):
            if value is None:
                sections.pop(name, None)
            else:
                sections[name] = value
    tools = current_tools(messages)
    if timestamp is None and not tools:
        return None
    # kept as pi's Object.fromEntries keeps them: index-like names first
    folded = dict(js_entries(sections))
    return SystemMessage(content="\n\n".join(texts), sections=folded or None,
                         tools_added=tools or None, timestamp=timestamp or 0)


def checkpoint_of(message: SystemMessage) -> SystemCheckpoint:
    """A folded system message as a compaction stores it (the writer sets its time)."""
    sections = {k: v for k, v in section_entries(message) if v is not None}
    return SystemCheckpoint(content=system_content_text(message), sections=sections or None,
                            tools_added=listed_tools(message.tools_added) or None,
                            timestamp=message.timestamp)


def system_text(message: SystemMessage) -> str:
    """The prompt a provider sends for a replayed system message: content, then sections."""
    parts = [system_content_text(message), *(v for _, v in section_entries(message) if v)]
    return "\n\n".join(part for part in parts if part)


def system_update_text(message: SystemMessage) -> str:
    """A system message after the first as the text a model taking it in place is sent (pi's
    renderSystemMessageUpdate): its own text, then each section change framed by name."""
    parts = [text] if (text := system_content_text(message)) else []
    parts += [f'Removed system prompt section "{name}".' if value is None
              else f'Updated system prompt section "{name}":\n\n{value}'
              for name, value in section_entries(message)]
    return "\n\n".join(parts)


def declaration(tool: Any) -> dict[str, Any]:
    """A tool as the model is told of it (pi's `toToolDeclaration`): missing keys left out."""
    tool = tool if isinstance(tool, dict) else {}
    keys = ("name", "description", "parameters", "constrainedSampling")
    return {key: tool[key] for key in keys if tool.get(key) is not None}


def _declared(tools: list[Any]) -> dict[Any, bytes]:
    return {tool_key(tool): encoder.encode(declaration(tool)) for tool in tools}


def system_patch(replayed: SystemMessage | None, sections: dict[str, str],
                 tools: list[dict[str, Any]], timestamp: int) -> SystemMessage | None:
    """The system message that turns the replayed prompt and tools into `sections` and `tools`
    (pi's `diffSystemPromptSections` and `getToolStateChanges`): changed and new sections,
    `None` for the ones to drop; a redefined tool is removed and added. None: nothing to say."""
    before = {k: v for k, v in section_entries(replayed) if v is not None} \
        if replayed is not None else {}
    patch: dict[str, str | None] = {k: v for k, v in sections.items() if before.get(k) != v}
    patch.update({name: None for name in before if name not in sections})
    old_tools = listed_tools(replayed.tools_added) if replayed is not None else []
    old, new = _declared(old_tools), _declared(tools)
    added = [declaration(t) for t in tools if old.get(tool_key(t)) != new[tool_key(t)]]
    # a nameless tool's removal is `{}`, as pi writes `{name: undefined}`
    removed = [{} if (name := js_field(t, "name")) is UNSET else {"name": name} for t in old_tools
               if new.get(tool_key(t)) != old[tool_key(t)]]
    if not (patch or added or removed):
        return None
    return SystemMessage(content="", sections=patch or None, timestamp=timestamp,
                         tools_added=added or None, tools_removed=removed or None)
