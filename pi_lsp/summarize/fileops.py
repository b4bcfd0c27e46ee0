"""Which files a stretch of conversation read and changed, from its tool calls."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from pi_lsp.session.entries import (
    AssistantMessage,
    ReadMessage,
    ToolCall,
    ToolResultMessage,
    UnreadMessage,
)
from pi_lsp.session.jsontext import js_field


class FileLists(msgspec.Struct, rename="camel"):
    read_files: list[str]
    modified_files: list[str]


@dataclass
class FileOps:
    read: set[str] = field(default_factory=set)
    written: set[str] = field(default_factory=set)
    edited: set[str] = field(default_factory=set)

    def add_message(self, message: ReadMessage) -> None:
        """The calls of a reply, and (pi 1.6) the calls a tool made itself."""
        if isinstance(message, AssistantMessage):
            for block in message.content:
                if isinstance(block, ToolCall):
                    self.add_call(block.name, block.arguments)
        elif isinstance(message, ToolResultMessage) and message.nested_calls is not None:
            for call in message.nested_calls.calls:
                self.add_call(call.name, call.arguments)
        elif isinstance(message, UnreadMessage) and message.role == "assistant":
            self._add_unread_calls(js_field(message.value, "content"))

    def _add_unread_calls(self, content: Any) -> None:
        """A reply's calls read off it as written, as pi 1.6 reads them: each block of type
        toolCall holding a name and arguments (an id-less call pi-lsp cannot type counts)."""
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "toolCall" \
                    and "name" in block and "arguments" in block:
                self.add_call(block["name"], block["arguments"])

    def add_call(self, name: Any, arguments: Any) -> None:
        path = arguments.get("path") if isinstance(arguments, dict) else None
        if not isinstance(path, str) or not path:
            return
        if name == "read":
            self.read.add(path)
        elif name == "write":
            self.written.add(path)
        elif name == "edit":
            self.edited.add(path)

    def add_details(self, details: Any) -> None:
        """Carry over the lists an earlier summary stored in its `details`."""
        if not isinstance(details, dict):
            return
        read, modified = details.get("readFiles"), details.get("modifiedFiles")
        if isinstance(read, list):
            self.read.update(f for f in read if isinstance(f, str))
        if isinstance(modified, list):
            self.edited.update(f for f in modified if isinstance(f, str))

    def lists(self) -> FileLists:
        modified = self.edited | self.written
        return FileLists(js_sorted(self.read - modified), js_sorted(modified))


def js_sorted(paths: set[str]) -> list[str]:
    """Sorted by UTF-16 code units, as JavaScript's default sort orders strings."""
    return sorted(paths, key=lambda p: p.encode("utf-16-be", "surrogatepass"))


def format_file_lists(lists: FileLists) -> str:
    """The `<read-files>` / `<modified-files>` blocks appended to a summary."""
    sections = []
    if lists.read_files:
        sections.append("<read-files>\n" + "\n".join(lists.read_files) + "\n</read-files>")
    if lists.modified_files:
        sections.append("<modified-files>\n" + "\n".join(lists.modified_files)
                        + "\n</modified-files>")
    return "\n\n" + "\n\n".join(sections) if sections else ""
