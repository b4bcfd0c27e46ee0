"""A system message's fields as pi 1.6 reads them: whatever the session holds (tool
declarations that are text, sections that are text)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import msgspec

from pi_lsp.session.entries import SystemMessage
from pi_lsp.session.jsontext import js_entries, js_field, stringify


def listed_tools(tools: list[Any] | str | None) -> list[Any]:
    """A system message's toolsAdded or toolsRemoved as pi 1.6 walks it (`for…of`): a list's
    items, a text's characters (each a nameless tool)."""
    return list(tools or [])


def name_key(name: Any) -> Hashable:
    """A tool name as a key of pi's tool Map: a number, text, boolean, null or none by value
    (1 and 1.0 alike, true and 1 not), an object or list by its JSON (pi's Map keeps each
    one apart; two names alike in a file's tools are not worth the difference)."""
    if isinstance(name, dict | list):
        return ("object", stringify(name))
    if isinstance(name, int | float) and not isinstance(name, bool):
        return ("number", float(name))
    return (type(name).__name__, name)


def tool_key(tool: Any) -> Hashable:
    """The key pi's tool Map files a declaration under: its name (`tool.name`)."""
    return name_key(js_field(tool, "name"))


def lacks_parameters(tool: Any) -> bool:
    """Whether a declaration has no parameters to read: pi 1.6 cannot make an Anthropic
    schema of it (it reads `parameters.properties`)."""
    parameters = js_field(tool, "parameters")
    return parameters is None or parameters is msgspec.UNSET


def parameterless_tools(message: SystemMessage) -> list[tuple[int, Any]]:
    """The tools `message` adds without parameters, each with its place in toolsAdded."""
    return [(index, tool) for index, tool in enumerate(listed_tools(message.tools_added))
            if lacks_parameters(tool)]


def parameterless_problem(message: SystemMessage) -> str | None:
    """What to tell of the tools `message` adds without parameters, or None: pi 1.6 and
    pi-lsp send each to an OpenAI model as it is, and cannot send a request holding one to an
    Anthropic model."""
    found = parameterless_tools(message)
    if not found:
        return None
    text = " (a text, read as one tool per character)" if isinstance(message.tools_added, str) \
        else ""
    places = ", ".join(f"toolsAdded[{index}] {stringify(tool)[:60]}" for index, tool in found)
    return (f"a tool without parameters{text}: {places}; pi 1.6 and pi-lsp cannot send it to "
            "an Anthropic model (OpenAI models are sent it as it is)")


def section_entries(message: SystemMessage) -> list[tuple[str, str | None]]:
    """A system message's sections as pi 1.6 walks them (`Object.entries`): index-like names
    first, a text's code units one section each."""
    return js_entries(message.sections)
