"""The tree as people see it: one-line previews of entries, nested nodes, an indented outline."""

from __future__ import annotations

from collections.abc import Iterator
from heapq import merge
from typing import Any

import msgspec

from pi_lsp.session.entries import (
    AgentMessage,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryEntry,
    CompactionEntry,
    ContextEditEntry,
    CustomEntry,
    CustomMessage,
    CustomMessageEntry,
    Entry,
    Envelope,
    LabelEntry,
    LeafEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionInfoEntry,
    SystemMessage,
    TextContent,
    ThinkingLevelChangeEntry,
    ToolCall,
    ToolResultMessage,
    UserBlock,
    UserMessage,
    label_text,
    role_of,
)
from pi_lsp.session.journal import Record
from pi_lsp.session.jsontext import Decoder, js_number, js_string, js_truthy
from pi_lsp.session.layout import layout, shown_entry
from pi_lsp.session.records import decode_entry
from pi_lsp.session.systemfields import section_entries
from pi_lsp.session.tree import SessionTree, order_children
from pi_lsp.visible import UNSAFE, printable

PREVIEW_CHARS = 72
# Forks past which the outline indents no further: each one indents every row under it, and
# 10,000 nested forks made 200 MB of spaces. pi's own tree draws every level and cuts each line
# at the terminal's width; a deeper row here spells its depth out instead.
MAX_INDENT = 32


class TreeNode(msgspec.Struct):
    id: Any  # as pi's getTree gives it: UNSET (no key) for an entry with no id
    label: Any  # as pi's getTree gives it: text, or another JSON value a label entry held
    children: list[TreeNode]


def shorten(text: str, limit: int = PREVIEW_CHARS) -> str:
    """`text` on one line (control characters, bidi controls and runs of whitespace as one
    space), cut: a committed session's text can neither fake a line nor reorder one."""
    flat = " ".join(UNSAFE.sub(" ", text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def content_text(content: str | list[UserBlock]) -> str:
    if isinstance(content, str):
        return content
    parts = [b.text if isinstance(b, TextContent) else "[image]" for b in content]
    return " ".join(parts)


def message_preview(message: AgentMessage, limit: int = PREVIEW_CHARS) -> str:
    """A message on one line, cut at `limit` characters."""
    match message:
        case UserMessage():
            return shorten(content_text(message.content), limit)
        case AssistantMessage():
            text = " ".join(b.text for b in message.content if isinstance(b, TextContent))
            calls = [b for b in message.content if isinstance(b, ToolCall)]
            tools = ", ".join(_call_preview(call) for call in calls)
            if message.stop_reason in ("error", "aborted"):
                text = f"[{message.stop_reason}] {message.error_message or text}"
            return shorten(" ".join(part for part in (text, tools and f"→ {tools}") if part), limit)
        case ToolResultMessage():
            marker = "✗ " if js_truthy(message.is_error) else ""
            name = js_string(message.tool_name)
            return shorten(f"{marker}{name}: {content_text(message.content)}", limit)
        case BashExecutionMessage():
            return shorten(f"$ {js_string(message.command)}", limit)
        case CustomMessage():
            return shorten(f"{message.custom_type}: {content_text(message.content)}", limit)
        case SystemMessage():
            # A patch may carry no text: the sections it changes say what it is.
            sections = ", ".join(name for name, _ in section_entries(message))
            return shorten(content_text(message.content) or (sections and f"sections: {sections}"),
                           limit)
    return ""


def _call_preview(call: ToolCall) -> str:
    arguments = call.object_arguments
    target = arguments.get("path") or arguments.get("command") or ""
    return f"{call.name}({shorten(str(target), 32)})"


def _tokens_before(entry: CompactionEntry) -> str:
    """' (N tokens before)', or nothing where an extension's compaction gave no number."""
    count = entry.tokens_before
    if isinstance(count, bool) or not isinstance(count, int | float):
        return ""
    return f" ({js_number(count)} tokens before)"


def entry_preview(entry: Entry | None) -> str:
    """A one-line description of an entry for tree views."""
    match entry:
        case MessageEntry():
            return message_preview(entry.message)
        case ModelChangeEntry():
            return f"model → {entry.provider}/{entry.model_id}"
        case ThinkingLevelChangeEntry():
            return f"thinking → {entry.thinking_level}"
        case CompactionEntry():
            return f"compaction{_tokens_before(entry)}: {shorten(js_string(entry.summary), 40)}"
        case BranchSummaryEntry():
            return f"branch summary: {shorten(js_string(entry.summary), 56)}"
        case CustomMessageEntry():
            return shorten(f"{js_string(entry.custom_type)}: "
                           f"{content_text(entry.content or [])}")
        case CustomEntry():
            return f"custom {entry.custom_type}"
        case LabelEntry():
            if js_truthy(entry.label):
                return f"label {entry.target_id} = {label_text(entry.label)}"
            return f"label {entry.target_id} cleared"
        case SessionInfoEntry():
            return f"name = {entry.name or ''}"
        case LeafEntry():
            return f"leaf → {entry.target_id}"
        case ContextEditEntry():
            edit = "omit" if entry.replacement is None else "replace"
            return shorten(f"context {edit}: {entry.target_id}")
    return ""


def record_role(record: Record) -> str | None:
    if record.env.type != "message":
        return None
    entry = decode_entry(record)
    return role_of(entry.message) if isinstance(entry, MessageEntry) else None


def record_kind(record: Record) -> str:
    """The entry type, or the message role for message entries."""
    return record_role(record) or record.env.type


class _Links(msgspec.Struct, rename="camel"):
    """An entry's `id` and `parentId` as written: missing (UNSET), null, or of any type."""

    id: Any = msgspec.UNSET
    parent_id: Any = msgspec.UNSET


# Read as the journal reads lines: a lone surrogate escape elsewhere in the line is pi's text.
_links_decoder: Decoder[_Links] = Decoder(_Links)


def _links(record: Record) -> _Links:
    """The entry's links; neither, for a line that is JSON but no object (42, [1], "s"): pi
    reads `42.id` and `42.parentId` as undefined."""
    try:
        return _links_decoder.decode(record.text)
    except msgspec.ValidationError:
        return _Links()

# A key of pi's `nodeMap` (a JavaScript Map): values alike by `===`; an object is itself alone.
_Key = tuple[Any, ...]


def _js_key(value: Any, line: int, field: str) -> _Key:
    if value is msgspec.UNSET or value is None or isinstance(value, str | bool):
        return (type(value).__name__, value)
    if isinstance(value, int | float):
        return ("number", float(value))  # JSON.parse reads every number as a double
    return ("object", line, field)


def _js_id(value: Any) -> Any:
    """An id as `JSON.stringify` writes pi's: absent left out (UNSET), 5.0 as 5."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


class _Group(msgspec.Struct):
    """The entries with no text id that pi's `nodeMap` holds under one key: one node, the
    last entry's, stands at every one's place."""

    last: Record
    id: Any


def nested_tree(tree: SessionTree) -> list[TreeNode]:
    """pi's `getTree()`: roots in file order, children oldest first (built without recursion);
    id-less entries too, as pi places them (see `_idless_places`)."""
    index, places = _idless_places(tree)
    idless_labels = _idless_labels(tree) if places else {}

    def node(record: Record, ancestors: frozenset[_Key]) -> tuple[TreeNode, Any, frozenset[_Key]]:
        group = places.get(id(record))
        if group is None:
            entry_id = record.env.id or ""
            return TreeNode(entry_id, tree.label_value(entry_id), []), entry_id, ancestors
        key, shared = group
        # pi would loop forever on a node under itself: its children are left out there.
        below = None if key in ancestors else key
        return TreeNode(_js_id(shared.id), idless_labels.get(key), []), below, \
            ancestors | {key}

    roots = [node(r, frozenset()) for r in index.get(None, [])]
    stack = list(roots)
    while stack:
        parent, key, ancestors = stack.pop()
        for child in index.get(key, []) if key is not None else []:
            built = node(child, ancestors)
            parent.children.append(built[0])
            stack.append(built)
    return [root for root, _, _ in roots]


def _idless_places(tree: SessionTree) -> tuple[dict[Any, list[Record]],
                                               dict[int, tuple[_Key, _Group]]]:
    """The children index with pi's places for id-less entries, and those places' records by
    `id()`. pi keys its nodes by `entry.id`, so the entries of one key (no id, null, 5)
    share the last one's node, sorted by its timestamp; an entry whose `parentId` is that key
    (an absent `parentId` names the id-less node) is that node's child."""
    index: dict[Any, list[Record]] = tree.children_index()
    idless = tree.idless
    if not idless:
        return index, {}
    links = {id(r): _links(r) for r in idless}
    groups: dict[_Key, _Group] = {}
    for record in idless:
        raw = links[id(record)]
        groups[_js_key(raw.id, record.line, "id")] = _Group(record, raw.id)
    index = {key: list(siblings) for key, siblings in index.items()}
    moved: set[Any] = set()
    roots: list[Record] = []
    for root in index.get(None, []):
        # A parentId absent or not text may name an id-less node.
        named = _named_group(root, groups) if root.env.parent_id is None else None
        if named is None:
            roots.append(root)
        else:
            index.setdefault(named, []).append(root)
            moved.add(named)
    index[None] = roots
    places: dict[int, tuple[_Key, _Group]] = {}
    for record in idless:
        raw = links[id(record)]
        key = _js_key(raw.id, record.line, "id")
        parent = _js_key(raw.parent_id, record.line, "parentId")
        group = groups[key]
        place = Record(record.line, group.last.text, Envelope(
            group.last.env.type, None, None, group.last.env.timestamp))
        places[id(place)] = (key, group)
        if raw.parent_id is None or parent == key:
            under: Any = None
        elif isinstance(raw.parent_id, str) and raw.parent_id in tree.by_id:
            under = raw.parent_id
        else:
            under = parent if parent in groups else None
        index.setdefault(under, []).append(place)
        moved.add(under)
    for key in moved:  # pi pushes in file order, then sorts all but the roots by timestamp
        if key is None:
            index[key].sort(key=lambda record: record.line)
        else:
            order_children(index[key])  # (by file order where its stamps are unreadable)
    return index, places


class _LabelLink(msgspec.Struct, rename="camel"):
    """A label entry's `targetId` as written (missing: UNSET) and its label."""

    target_id: Any = msgspec.UNSET
    label: Any = None


_label_link_decoder: Decoder[_LabelLink] = Decoder(_LabelLink)


def _idless_labels(tree: SessionTree) -> dict[_Key, Any]:
    """The labels whose `targetId` is not text (missing, null, a number), by pi's key: pi's
    labelsById is a Map too, and getTree gives an id-less node the label of its key."""
    labels: dict[_Key, Any] = {}
    for record in merge(tree.records, tree.idless, key=lambda record: record.line):
        if record.env.type != "label":
            continue
        link = _label_link_decoder.decode(record.text)
        if isinstance(link.target_id, str):
            continue  # in tree.labels
        key = _js_key(link.target_id, record.line, "targetId")
        if js_truthy(link.label):  # pi's `if (entry.label)`
            labels[key] = link.label
        else:
            labels.pop(key, None)
    return labels


def _named_group(record: Record, groups: dict[_Key, _Group]) -> _Key | None:
    """The key of the id-less node whose child an entry's `parentId` makes it, if any."""
    raw = _links(record)
    key = _js_key(raw.parent_id, record.line, "parentId")
    return key if raw.parent_id is not None and key in groups else None


def indent(depth: int) -> str:
    """A row's indentation: two spaces a fork, up to `MAX_INDENT`, then its depth as a mark."""
    if depth <= MAX_INDENT:
        return "  " * depth
    return f"{'  ' * MAX_INDENT}⟨depth {depth}⟩ "


def outline_lines(tree: SessionTree) -> Iterator[str]:
    """An indented outline of the tree's layout for a terminal, a line at a time; a chain stays
    at one depth, only forks indent. Ids, labels and names are the session's: escaped."""
    on_path = set(tree.path_ids(tree.leaf_id))
    leaf_row = shown_entry(tree, tree.leaf_id)
    for row in layout(tree):
        record = row.record
        entry_id = record.env.id or ""
        marks = "*" if entry_id in on_path else " "
        label = tree.label(entry_id)
        text = f"{indent(row.depth)}{'├─ ' if row.head else ''}{marks} {entry_id} "
        text += f"{record_kind(record)}: {entry_preview(decode_entry(record))}"
        if label:
            text += f"  [{label}]"
        if entry_id == leaf_row:
            text += "  ← leaf"
        yield printable(text)
