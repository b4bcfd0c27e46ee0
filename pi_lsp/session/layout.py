"""The tree as editors and the CLI draw it: which entries are rows, and where each row goes.

A chain of single children stays at one depth and only a fork indents, one branch per child:
without that a 500-entry session would be 500 levels deep. Entries that are not conversation
are left out as pi's `/tree` leaves them out, their children lifted to the nearest row above.
"""

from __future__ import annotations

from dataclasses import dataclass

from pi_lsp.session.journal import Record
from pi_lsp.session.records import is_leaf_move, parent_of
from pi_lsp.session.tree import SessionTree

# pi never shows usage records in its tree.
ALWAYS_HIDDEN = frozenset({"usage"})


@dataclass(slots=True)
class Row:
    record: Record
    depth: int  # forks above it
    head: bool  # the first entry of a branch: a fork's child, or one of several roots


def is_shown(record: Record, bookkeeping: bool = False) -> bool:
    """Usage records never; leaf moves and context edits (pi's "bookkeeping") when asked for."""
    if record.env.type == "message":  # most entries: decided without a look inside
        return True
    if record.env.type in ALWAYS_HIDDEN:
        return False
    return bookkeeping or not (record.env.type == "context_edit" or is_leaf_move(record))


def layout(tree: SessionTree, bookkeeping: bool = False) -> list[Row]:
    """Every shown entry in drawing order (depth first, children oldest first).

    Iterative throughout: a session can hold 100k entries in one chain."""
    index = tree.children_index()

    def shown_children(parent: str | None) -> list[Record]:
        children = index.get(parent)
        if not children:
            return []
        if len(children) == 1 and is_shown(children[0], bookkeeping):
            return children  # a chain: most entries
        found: list[Record] = []
        stack = list(reversed(children))
        while stack:
            record = stack.pop()
            if is_shown(record, bookkeeping):
                found.append(record)
            else:
                stack.extend(reversed(index.get(record.env.id, [])))
        return found

    roots = shown_children(None)
    several = len(roots) > 1
    stack = [Row(root, 0, several) for root in reversed(roots)]
    rows: list[Row] = []
    while stack:
        row = stack.pop()
        rows.append(row)
        children = shown_children(row.record.env.id)
        if len(children) == 1:
            stack.append(Row(children[0], row.depth, False))
        else:
            stack.extend(Row(child, row.depth + 1, True) for child in reversed(children))
    return rows


def shown_entry(tree: SessionTree, entry_id: str | None, bookkeeping: bool = False) -> str | None:
    """The row that stands for an entry: itself, or the nearest shown entry above it (a leaf
    move is the leaf, and editors mark the entry it moved to)."""
    seen: set[str] = set()
    record = tree.by_id.get(entry_id) if entry_id is not None else None
    while record is not None and record.env.id not in seen:
        if is_shown(record, bookkeeping):
            return record.env.id
        seen.add(record.env.id or "")
        parent = parent_of(record)
        record = tree.by_id.get(parent) if parent is not None else None
    return None


def branch_end(rows: list[Row], at: int) -> int:
    """The index after the rows that hang under `rows[at]`: the rest of its branch, the forks
    off it included."""
    depth = rows[at].depth
    end = at + 1
    while end < len(rows) and (rows[end].depth > depth or
                               (rows[end].depth == depth and not rows[end].head)):
        end += 1
    return end


@dataclass(slots=True)
class Folded:
    """The rows an editor draws first: `shown` as (index in the layout, rows folded under it)."""

    earlier: int  # layout rows left out before the window: the path's start, branches off it
    shown: list[tuple[int, int]]
    cut: str | None  # the first path row in the window


def fold(rows: list[Row], on_path: set[str], keep: int | None, cut: str | None = None
         ) -> Folded:
    """The current path's rows and one row per branch off it, each folded to that row; of
    the path only the last `keep` rows (from `cut` when it is on the path and no more than
    2 * `keep` rows back, so a growing window changes little), with the branches off those.
    `keep` None: every row, nothing folded."""
    if keep is None:
        return Folded(0, [(at, 0) for at in range(len(rows))], None)
    items: list[tuple[int, int, int]] = []  # index, folded rows, the path row it hangs off
    last_at_depth: dict[int, int] = {}  # the path ordinal of the latest path row per depth
    ordinal = at = 0
    while at < len(rows):
        row = rows[at]
        if row.record.env.id in on_path:
            last_at_depth[row.depth] = ordinal
            items.append((at, 0, ordinal))
            ordinal += 1
            at += 1
            continue
        # A branch off the path (its fork is the latest path row a level up) or the rows past
        # the leaf (hanging off the leaf's row at its own depth).
        end = branch_end(rows, at)
        anchor = last_at_depth.get(row.depth - 1 if row.head else row.depth, -1)
        items.append((at, end - at - 1, anchor))
        at = end
    paths = [item for item in items if rows[item[0]].record.env.id in on_path]
    first = max(0, len(paths) - keep)
    if cut is not None and cut in on_path:  # the window grew: keep it up to twice its size
        first = min(first, next((n for n, item in enumerate(paths)
                                 if rows[item[0]].record.env.id == cut and
                                 n >= len(paths) - 2 * keep), first))
    shown = [(at, hidden) for at, hidden, anchor in items if anchor >= first]
    earlier = len(rows) - sum(1 + hidden for _at, hidden in shown)
    return Folded(earlier, shown, rows[paths[first][0]].record.env.id if paths else None)
