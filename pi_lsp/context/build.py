"""The runtime layer: the messages, thinking level and model in force at a leaf."""

from __future__ import annotations

from typing import Any

import msgspec

from pi_lsp.context.messages import decode_path
from pi_lsp.context.projection import (
    ContextSettings,
    ModelRef,
    project_messages,
    project_path,
    settings_of,
)
from pi_lsp.session.journal import Record
from pi_lsp.session.tree import SessionTree


class SessionContext(msgspec.Struct, rename="camel"):
    """pi's `{messages, thinkingLevel, model}`; messages stay raw JSON."""

    messages: list[msgspec.Raw]
    thinking_level: Any  # as pi's: the path's level as its entry holds it (UNSET: missing)
    model: ModelRef | None


class LeafContext(msgspec.Struct):
    """A context together with the id of the entry each message came from."""

    context: SessionContext
    entry_ids: list[str]


def build_leaf_context(tree: SessionTree, leaf_id: str | None) -> LeafContext:
    """pi's `buildSessionContext` at `leaf_id` (None: the empty context), with entry ids."""
    projection = project_path(tree.path_to(leaf_id))
    context = _session_context(projection.messages, settings_at(tree, leaf_id))
    return LeafContext(context, projection.entry_ids())


def build_session_context(tree: SessionTree, leaf_id: str | None) -> SessionContext:
    """pi's `buildSessionContext` at `leaf_id` (None: the empty context)."""
    return _session_context(*project_messages(tree.path_to(leaf_id)))


def settings_at(tree: SessionTree, leaf_id: str | None) -> ContextSettings:
    """`context_settings` of the path to `leaf_id`, from the entries the tree keeps for it."""
    return settings_of(*tree.settings_entries(leaf_id))


def branch_path(tree: SessionTree, leaf_id: str | None) -> list[Record]:
    """pi 1.6's getBranch() at `leaf_id`, what a turn or a compaction there starts from: none
    at an id-less leaf (or one whose id is "", which pi tests for truth), though pi's context
    there is the path up from that line."""
    return tree.path_to(leaf_id) if leaf_id else []


def branch_settings(tree: SessionTree, leaf_id: str | None) -> ContextSettings:
    """The model and level on pi 1.6's getBranch() at `leaf_id`, which a turn there starts
    from: none at an id-less leaf (createAgentSession), though its context is the path up."""
    return settings_at(tree, leaf_id) if leaf_id else settings_of(None, None)


def _session_context(messages: list[msgspec.Raw], settings: ContextSettings) -> SessionContext:
    return SessionContext(messages, settings.stored_level, settings.model)


def context_tokens(tree: SessionTree, leaf_id: str | None) -> int:
    """The context's size at `leaf_id` as pi 1.6 measures it for compaction."""
    return decode_path(tree, leaf_id).total_tokens()
