"""The tree as editors ask for it first: the current path's last rows and one row per branch
off them (the other roots, once the path's top is among them; only the roots when no leaf is a
row), each branch folded to that row; past BRANCH_ROWS branches, a fork's first ones, the last
sent counting the rest.

Found by walking up from the leaf, never by laying the whole tree out: the rows of a
100k-entry session are counted, but only the few hundred sent are made."""

from __future__ import annotations

from dataclasses import dataclass

from pi_lsp.session.collector import collector_paused
from pi_lsp.session.journal import Record
from pi_lsp.session.layout import (
    Index,
    Row,
    count_rows,
    drawing_index,
    is_shown,
    layout,
    leaving_points,
    path_count,
    path_end,
    path_row,
    rows_below,
    shown_children,
)
from pi_lsp.session.tree import SessionTree

BRANCH_ROWS = 300  # branch rows a folded view sends (one per fork at least); the rest on asking

# A row, the rows folded under it, whether it is on the path, and the branches after it left out
# with the rows they make.
Shown = tuple[Row, int, bool, int, int]
# Path rows (None) and each fork's branches, by the window row they hang off (the roots: -1).
Drawing = list[tuple[int | None, list[Row]]]


@dataclass(slots=True)
class Folded:
    """The rows an editor draws first, in drawing order, each with the rows folded under it,
    whether it is on the current path, and the branches after it that were not sent."""

    earlier: int  # rows left out before the window: the path's start, branches off it
    shown: list[Shown]
    cut: str | None  # the first path row in the window


@collector_paused()  # a Row per root (1M: 1.1 s of collections holding the event loop)
def fold(tree: SessionTree, bookkeeping: bool, keep: int | None, cut: str | None = None
         ) -> Folded:
    """The current path's rows and one row per branch off them (and the other roots once the
    path's top is in; only the roots when no leaf is a row); of the path only the last
    `keep` rows (from `cut` when it is on the path and no more than 2 * `keep` rows back, so
    a window that grows, or shrinks as the leaf moves up, changes little). `keep` None: every
    row, nothing folded."""
    if keep is None:
        on_path = set(tree.path_ids(tree.leaf_id))
        return Folded(0, [(row, 0, row.record.env.id in on_path, 0, 0)
                          for row in layout(tree, bookkeeping)], None)
    index, _loose = drawing_index(tree)
    end = path_end(tree)
    path = tree.path_to(end) if end is not None else []
    points = leaving_points(index, path)  # one pass down the path, for the count and the row
    total = path_count(index, path, points, bookkeeping)
    at, window = _window(path, bookkeeping, keep, cut)
    row = path_row(index, path, at, points, bookkeeping) if window else None
    tops = shown_children(index, None, bookkeeping)
    top_rows = [Row(record, 0, len(tops) > 1) for record in tops]
    if row is None:  # no leaf row: nothing is on the path
        return _folded(index, total, [(-1, top_rows)], None, bookkeeping)
    drawing: Drawing = []
    after: Drawing = []  # branches drawn after the path's next row
    first = next((n for n, record in enumerate(tops) if record is window[0]), None)
    if first is not None:  # the window reaches the top: the other roots show
        drawing.append((-1, top_rows[:first]))
        after.append((-1, top_rows[first + 1:]))
    for at in range(len(window)):
        drawing.append((None, [row]))
        below = rows_below(index, row, bookkeeping)
        if at == len(window) - 1:  # the rows past the leaf hang off its row
            drawing.append((at, below))
            break
        split = next(n for n, child in enumerate(below) if child.record is window[at + 1])
        drawing.append((at, below[:split]))
        after.append((at, below[split + 1:]))
        row = below[split]
    drawing += reversed(after)
    return _folded(index, total, drawing, window[0].env.id, bookkeeping)


def _folded(index: Index, total: int, drawing: Drawing, cut: str | None, bookkeeping: bool
            ) -> Folded:
    """`drawing`'s rows, each branch folded and each fork's cut to its share of BRANCH_ROWS;
    the rest of the `total` rows (neither shown, folded nor cut) are earlier."""
    shown: list[Shown] = []
    sent = 0  # rows shown or folded under one
    for (anchor, rows), take in zip(drawing, _shares(drawing), strict=True):
        if anchor is None:
            shown.append((rows[0], 0, True, 0, 0))
            sent += 1
            continue
        for row in rows[:take]:
            hidden = count_rows(index, [row.record], bookkeeping) - 1
            shown.append((row, hidden, False, 0, 0))
            sent += 1 + hidden
        if take < len(rows):
            left_out = count_rows(index, [row.record for row in rows[take:]], bookkeeping)
            shown[-1] = (*shown[-1][:3], len(rows) - take, left_out)
            sent += left_out
    return Folded(total - sent, shown, cut)


def _shares(drawing: Drawing) -> list[int]:
    """How many of each fork's branches are sent: every one while BRANCH_ROWS lasts, the
    forks nearest the leaf first (the other roots last), and at least one of each (the row
    that says how many more)."""
    shares = [len(rows) for _anchor, rows in drawing]
    forks = [n for n, (anchor, _rows) in enumerate(drawing) if anchor is not None]
    left = BRANCH_ROWS
    for n in sorted(forks, key=lambda n: -(drawing[n][0] or 0)):  # stable: drawing order next
        shares[n] = min(shares[n], max(1, left))
        left = max(0, left - shares[n])
    return shares


def _window(path: list[Record], bookkeeping: bool, keep: int, cut: str | None
            ) -> tuple[int, list[Record]]:
    """Where on `path` (top first) the window starts, and its rows: the path's last `keep`,
    or from `cut` when that is one of its last 2 * `keep` and leaves at least half of `keep`
    (after a move up, the rows above the leaf are the ones sent before: the change is small)."""
    at: list[int] = []  # the rows' places on the path, from the leaf's up
    for n in range(len(path) - 1, -1, -1):
        if is_shown(path[n], bookkeeping):
            at.append(n)
            if len(at) == 2 * keep:
                break
    size = min(len(at), keep)
    # (no cut: an id-less leaf, whose id is None too, is no window's start)
    kept = next((k + 1 for k, n in enumerate(at) if path[n].env.id == cut), 0) \
        if cut is not None else 0
    if kept and kept >= keep // 2:  # far up, a few rows would hide the path above the leaf
        size = kept
    return (at[size - 1], [path[n] for n in at[size - 1::-1]]) if size else (0, [])
