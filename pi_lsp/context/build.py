"""The runtime layer: the messages, thinking level and model in force at a leaf."""

from __future__ import annotations

import msgspec

from pi_lsp.context.messages import decode_path
from pi_lsp.context.projection import ModelRef, project_path
from pi_lsp.session.tree import SessionTree


class SessionContext(msgspec.Struct, rename="camel"):
    """pi's `{messages, thinkingLevel, model}`; messages stay raw JSON."""

    messages: list[msgspec.Raw]
    thinking_level: str
    model: ModelRef | None


class LeafContext(msgspec.Struct):
    """A context together with the id of the entry each message came from."""

    context: SessionContext
    entry_ids: list[str]


def build_leaf_context(tree: SessionTree, leaf_id: str | None) -> LeafContext:
    """pi's `buildSessionContext` at `leaf_id` (None: the empty context), with entry ids."""
    projection = project_path(tree.path_to(leaf_id))
    messages: list[msgspec.Raw] = []
    ids: list[str] = []
    for entry in projection.entries:
        messages += entry.messages
        ids += [entry.record.env.id] * len(entry.messages)  # type: ignore[list-item]
    settings = projection.settings
    return LeafContext(SessionContext(messages, settings.thinking_level, settings.model), ids)


def build_session_context(tree: SessionTree, leaf_id: str | None) -> SessionContext:
    return build_leaf_context(tree, leaf_id).context


def context_tokens(tree: SessionTree, leaf_id: str | None) -> int:
    """The context's size at `leaf_id` as pi 1.6 measures it for compaction."""
    return decode_path(tree, leaf_id).total_tokens()
