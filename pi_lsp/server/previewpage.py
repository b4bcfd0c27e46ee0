"""`pi.previewContext` a page at a time: the totals, and the first and last pages at once (an
editor shows the end first), then any page by its first message. Token counts are the whole
preview's: exact per message and in total; `markdown` shows the pages sent and says what is
left out."""

from __future__ import annotations

import msgspec

from pi_lsp.context.edits import EditMark
from pi_lsp.context.layers import LayerRow
from pi_lsp.context.preview import render_markdown
from pi_lsp.server.hub import Preview


class Page(msgspec.Struct, rename="camel"):
    start: int  # the index of its first message in the whole context
    messages: list[LayerRow]


class PreviewPages(msgspec.Struct, rename="camel", omit_defaults=True):
    leaf_id: str | None
    layer: str
    model: str | None
    thinking_level: str
    total_tokens: int
    context_window: int
    total_messages: int
    pages: list[Page]  # first and last (one when they meet), or the page asked for
    markdown: str
    request: dict[str, object] | None = None
    edits: list[EditMark] = msgspec.field(default_factory=list)  # positions in the whole list


def paged(preview: Preview, size: int, start: int | None) -> PreviewPages:
    """`preview` with only the first and last `size` messages, or the `size` from `start`."""
    messages = preview.messages
    if start is not None:
        pages = [Page(start, messages[start:start + size])]
    elif len(messages) <= 2 * size:
        pages = [Page(0, messages)]
    else:
        pages = [Page(0, messages[:size]), Page(len(messages) - size, messages[-size:])]
    markdown = render_markdown(preview.leaf_id, preview.layer, messages, preview.total_tokens,
                               preview.context_window, preview.thinking_level, preview.model,
                               preview.edits, [(page.start, page.messages) for page in pages])
    return PreviewPages(preview.leaf_id, preview.layer, preview.model, preview.thinking_level,
                        preview.total_tokens, preview.context_window, len(messages), pages,
                        markdown, preview.request, preview.edits)
