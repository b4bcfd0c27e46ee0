"""The messages of a leaf's projection, each decoded and estimated once: every layer, the total
and the edit marks are read off this one list."""

from __future__ import annotations

import msgspec

from pi_lsp.context.projection import Projection, project_path
from pi_lsp.context.tokens import estimate_tokens, projected_tokens
from pi_lsp.session.entries import AgentMessage, decode_message
from pi_lsp.session.journal import Record
from pi_lsp.session.tree import SessionTree


class DecodedMessages(msgspec.Struct):
    """The projection at a leaf and its messages: raw, decoded (None: unreadable), the entry
    each came from and its estimate (0 when unreadable)."""

    path: list[Record]
    projection: Projection
    raws: list[msgspec.Raw]
    messages: list[AgentMessage | None]
    entry_ids: list[str]
    tokens: list[int]

    def total_tokens(self) -> int:
        """The context's size as pi 1.6 measures it for compaction."""
        return projected_tokens(self.projection, self.path, self.messages, self.tokens)


def decode_path(tree: SessionTree, leaf_id: str | None) -> DecodedMessages:
    """The projection of the path to `leaf_id` (None: the empty context), decoded."""
    path = tree.path_to(leaf_id)
    projection = project_path(path)
    raws: list[msgspec.Raw] = []
    ids: list[str] = []
    for entry in projection.entries:
        raws += entry.messages
        ids += [entry.record.env.id] * len(entry.messages)  # type: ignore[list-item]
    messages = [decode_message(raw) for raw in raws]
    tokens = [estimate_tokens(m) if m is not None else 0 for m in messages]
    return DecodedMessages(path, projection, raws, messages, ids, tokens)

