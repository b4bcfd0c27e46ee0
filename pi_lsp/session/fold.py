"""The tree as editors ask for it first: the current path's last rows and one row per branch
off them (the other roots, once the path's top is among them; only the roots when no leaf is a
row), each branch folded to that row.

Found by walking up from the leaf, never by laying the whole tree out: the rows of a
100k-entry session are counted, but only the few hundred sent are made."""

from __future__ import annotations

from dataclasses import dataclass

from pi_lsp.session.journal import Record
from pi_lsp.session.layout import (
    Index,
    Row,
    count_rows,
    is_shown,
    layout,
    place,
    rows_below,
    shown_children,
)
from pi_lsp.session.tree import SessionTree


@dataclass(slots=True)
class Folded:
    """The rows an editor draws first, in drawing order, each with the rows folded under it
    and whether it is on the current path."""

    earlier: int  # rows left out before the window: the path's start, branches off it
    shown: list[tuple[Row, int, bool]]
    cut: str | None  # the first path row in the window


def fold(tree: SessionTree, bookkeeping: bool, keep: int | None, cut: str | None = None
         ) -> Folded:
    """The current path's rows and one row per branch off them (and the other roots once the
    path's top is in; only the roots when no leaf is a row); of the path only the last
    `keep` rows (from `cut` when it is on the path and no more than 2 * `keep` rows back, so
    a growing window changes little). `keep` None: every row, nothing folded."""
    if keep is None:
        on_path = set(tree.path_ids(tree.leaf_id))
        return Folded(0, [(row, 0, row.record.env.id in on_path)
                          for row in layout(tree, bookkeeping)], None)
    index = tree.children_index()
    total = count_rows(index, index.get(None, []), bookkeeping)
    window = _window(tree, bookkeeping, keep, cut)
    row = place(tree, window[0].env.id or "", bookkeeping) if window else None
    tops = shown_children(index, None, bookkeeping)
    top_rows = [Row(record, 0, len(tops) > 1) for record in tops]
    if row is None:  # no leaf row, or a cycle above it: nothing is on the path
        return _folded(total, _branches(index, top_rows, bookkeeping), None)
    shown = []
    after: list[list[tuple[Row, int, bool]]] = []  # branches drawn after the path's next row
    first = next((n for n, record in enumerate(tops) if record is window[0]), None)
    if first is not None:  # the window reaches the top: the other roots show
        shown += _branches(index, top_rows[:first], bookkeeping)
        after.append(_branches(index, top_rows[first + 1:], bookkeeping))
    for at in range(len(window)):
        shown.append((row, 0, True))
        below = rows_below(index, row, bookkeeping)
        if at == len(window) - 1:  # the rows past the leaf hang off its row
            shown += _branches(index, below, bookkeeping)
            break
        split = next(n for n, child in enumerate(below) if child.record is window[at + 1])
        shown += _branches(index, below[:split], bookkeeping)
        after.append(_branches(index, below[split + 1:], bookkeeping))
        row = below[split]
    for branches in reversed(after):
        shown += branches
    return _folded(total, shown, window[0].env.id)


def _folded(total: int, shown: list[tuple[Row, int, bool]], cut: str | None) -> Folded:
    """`shown`, with the rest of the `total` rows (neither shown nor folded) as earlier."""
    return Folded(total - sum(1 + hidden for _row, hidden, _on in shown), shown, cut)


def _window(tree: SessionTree, bookkeeping: bool, keep: int, cut: str | None) -> list[Record]:
    """The path's rows in the window, top first: its last `keep`, or from `cut` when that is
    one of its last 2 * `keep`."""
    rows: list[Record] = []  # from the leaf's row up
    for record in tree.ancestors(tree.leaf_id):
        if is_shown(record, bookkeeping):
            rows.append(record)
            if len(rows) == 2 * keep:
                break
    size = min(len(rows), keep)
    size = max(size, next((n + 1 for n, record in enumerate(rows) if record.env.id == cut), size))
    return rows[size - 1::-1] if size else []


def _branches(index: Index, rows: list[Row], bookkeeping: bool
              ) -> list[tuple[Row, int, bool]]:
    return [(row, count_rows(index, [row.record], bookkeeping) - 1, False) for row in rows]
