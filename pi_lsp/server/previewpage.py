"""`pi.previewContext` whole or a page at a time: the totals, and the first and last pages at
once (an editor shows the end first), then any page by its first message. Both are read off
one outline of the layer (each message decoded and estimated once); a page encodes and renders
only its own messages. Token counts are the whole preview's: exact per message and in total;
a page's `markdown` shows the pages sent and says what is left out."""

from __future__ import annotations

import msgspec

from pi_lsp.context.edits import EditMark
from pi_lsp.context.layers import AgentSetup, ContextLayer, Layer, LayerRow, build_layer, model_at
from pi_lsp.context.preview import Heading, PreviewMarkdown, render_markdown
from pi_lsp.context.projection import ContextSettings
from pi_lsp.providers.thinking import thinking_levels
from pi_lsp.providers.wire import request_params
from pi_lsp.session.tree import SessionTree

HEAD_BYTES = 200  # roughly what a row's outline holds beside its message


class Outline(msgspec.Struct):
    """A layer at a leaf as the previews read it: its rows without their text, the totals and
    the model it goes to."""

    context: ContextLayer
    model: str
    context_window: int
    thinking_levels: list[str]  # the ones the model offers


class Preview(msgspec.Struct, rename="camel", omit_defaults=True):
    leaf_id: str | None
    layer: str
    model: str | None
    thinking_level: str
    thinking_levels: list[str]  # the levels the model offers (pi's picker shows these)
    messages: list[LayerRow]
    total_tokens: int
    context_window: int
    markdown: str
    request: dict[str, object] | None = None
    edits: list[EditMark] = msgspec.field(default_factory=list)  # context edits in force
    headings: list[Heading] = msgspec.field(default_factory=list)  # the messages in `markdown`


class Page(msgspec.Struct, rename="camel"):
    start: int  # the index of its first message in the whole context
    messages: list[LayerRow]


class PreviewPages(msgspec.Struct, rename="camel", omit_defaults=True):
    leaf_id: str | None
    layer: str
    model: str | None
    thinking_level: str
    thinking_levels: list[str]
    total_tokens: int
    context_window: int
    total_messages: int
    pages: list[Page]  # first and last (one when they meet), or the page asked for
    markdown: str
    edits: list[EditMark] = msgspec.field(default_factory=list)  # positions in the whole list
    headings: list[Heading] = msgspec.field(default_factory=list)  # the messages in `markdown`


def outline_of(tree: SessionTree, leaf_id: str | None, layer: Layer, agent: AgentSetup
               ) -> Outline:
    context = build_layer(tree, leaf_id, layer, agent)
    info = model_at(ContextSettings(context.thinking_level, context.model), agent.registry,
                    agent.default_model)
    return Outline(context, f"{info.provider}/{info.id}", info.context_window,
                   thinking_levels(info))


def outline_weight(outline: Outline) -> int:
    """Roughly the bytes an outline adds to its session's: its rows point into the session's
    own messages, but the request layer holds them decoded (about 4 bytes a token each)."""
    context = outline.context
    made = context.total_tokens if context.request is not None else 0
    return HEAD_BYTES * len(context.heads) + 8 * made


def _markdown(outline: Outline, pages: list[Page]) -> PreviewMarkdown:
    context = outline.context
    return render_markdown(context.leaf_id, context.layer,
                           [(page.start, page.messages) for page in pages], len(context.heads),
                           context.total_tokens, outline.context_window,
                           context.thinking_level, outline.model, context.edits)


def whole(outline: Outline) -> Preview:
    """Every message of the layer, the Markdown of them all and, in the request layer, the
    request's body."""
    context = outline.context
    rows = context.rows
    request = request_params(context.request) if context.request is not None else None
    markdown = _markdown(outline, [Page(0, rows)])
    return Preview(context.leaf_id, context.layer, outline.model, context.thinking_level,
                   outline.thinking_levels, rows, context.total_tokens, outline.context_window,
                   markdown.text, request, context.edits, markdown.headings)


def first_row(outline: Outline, entry_id: str) -> int:
    """Where the first message of `entry_id` is in the layer; past its end when the entry has
    none there (an edit removed it, or it is not on the path), so its page is empty."""
    heads = outline.context.heads
    return next((index for index, head in enumerate(heads) if head.entry_id == entry_id),
                len(heads))


def paged(outline: Outline, size: int, start: int | None) -> PreviewPages:
    """The first and last `size` messages, or the `size` from `start`; a page leaves out the
    request's body (at 100k entries, 41 MB made in 2.6 s): the whole preview has it."""
    context = outline.context
    count = len(context.heads)
    if start is not None:
        spans = [(start, min(start + size, count))]
    elif count <= 2 * size:
        spans = [(0, count)]
    else:
        spans = [(0, size), (count - size, count)]
    pages = [Page(first, context.rows_between(first, stop)) for first, stop in spans]
    markdown = _markdown(outline, pages)
    return PreviewPages(context.leaf_id, context.layer, outline.model, context.thinking_level,
                        outline.thinking_levels, context.total_tokens, outline.context_window,
                        count, pages, markdown.text, context.edits, markdown.headings)
