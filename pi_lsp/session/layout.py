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
