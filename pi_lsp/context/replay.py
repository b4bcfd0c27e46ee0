"""pi 1.6's replay of system messages: the prompt and tools in force after a list of them."""

from __future__ import annotations

from typing import Any

from pi_lsp.session.entries import AgentMessage, SystemCheckpoint, SystemMessage, TextContent


def system_content_text(message: SystemMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    return "\n".join(b.text for b in message.content if isinstance(b, TextContent))


def _tool_name(tool: Any) -> Any:
    return tool.get("name") if isinstance(tool, dict) else None


def current_tools(messages: list[AgentMessage | None]) -> list[Any]:
    """Tool declarations after every add and remove, in first-declared order."""
    tools: dict[Any, Any] = {}
    for message in messages:
        if isinstance(message, SystemMessage):
            for tool in message.tools_removed or []:
                tools.pop(_tool_name(tool), None)
            for tool in message.tools_added or []:
                tools[_tool_name(tool)] = tool  # a redefinition keeps its place
    return list(tools.values())


def current_system_message(messages: list[AgentMessage | None]) -> SystemMessage | None:
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
        for name, value in (message.sections or {}).items():
            if value is None:
                sections.pop(name, None)
            else:
                sections[name] = value
    tools = current_tools(messages)
    if timestamp is None and not tools:
        return None
    return SystemMessage(content="\n\n".join(texts), sections=sections or None,
                         tools_added=tools or None, timestamp=timestamp or 0)


def checkpoint_of(message: SystemMessage) -> SystemCheckpoint:
    """A folded system message as a compaction stores it (the writer sets its time)."""
    sections = {k: v for k, v in (message.sections or {}).items() if v is not None}
    return SystemCheckpoint(content=system_content_text(message), sections=sections or None,
                            tools_added=message.tools_added, timestamp=message.timestamp)
