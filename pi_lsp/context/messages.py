"""The messages of a leaf's projection, each decoded at most once and only when read: a page
of a long context, its anchor reply and the messages after it are all the preview decodes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

import msgspec

from pi_lsp.context.projection import Projection, project_path
from pi_lsp.context.tokens import projected_anchor, projected_tokens
from pi_lsp.session.entries import ReadMessage, read_message
from pi_lsp.session.journal import Record
from pi_lsp.session.tree import SessionTree


class LazyMessages(Sequence[ReadMessage]):
    """Raw messages read as they are read (an UnreadMessage where pi-lsp has no type), each
    once."""

    def __init__(self, raws: list[msgspec.Raw]) -> None:
        self.raws = raws
        self._decoded: dict[int, ReadMessage] = {}

    def __len__(self) -> int:
        return len(self.raws)

    @overload
    def __getitem__(self, index: int) -> ReadMessage: ...

    @overload
    def __getitem__(self, index: slice) -> list[ReadMessage]: ...

    def __getitem__(self, index: int | slice) -> ReadMessage | list[ReadMessage]:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self.raws))[index]]
        index = range(len(self.raws))[index]  # negative from the end; IndexError past it
        if index not in self._decoded:
            self._decoded[index] = read_message(self.raws[index])
        return self._decoded[index]


class DecodedMessages(msgspec.Struct):
    """The projection at a leaf, its messages (raw and as read) and the entry each came from."""

    path: list[Record]
    projection: Projection
    messages: LazyMessages
    entry_ids: list[str]

    def total_tokens(self) -> int:
        """The context's size as pi 1.6 measures it for compaction."""
        return projected_tokens(self.projection, self.path, self.messages)

    def anchor(self) -> int:
        """The index of the reply whose reported usage the total starts from, or -1."""
        return projected_anchor(self.projection, self.path, self.messages)


def decode_path(tree: SessionTree, leaf_id: str | None) -> DecodedMessages:
    """The projection of the path to `leaf_id` (None: the empty context), to be read."""
    return decode_records(tree.path_to(leaf_id))


def decode_records(path: list[Record]) -> DecodedMessages:
    """The projection of `path`, to be read."""
    projection = project_path(path)
    return DecodedMessages(path, projection, LazyMessages(projection.messages),
                           projection.entry_ids())
