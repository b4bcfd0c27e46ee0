"""The tree as editors and the CLI draw it: which entries are rows, and where each row goes.

A chain of single children stays at one depth and only a fork indents, one branch per child:
without that a 500-entry session would be 500 levels deep. Entries that are not conversation
are left out as pi's `/tree` leaves them out, their children lifted to the nearest row above.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from operator import attrgetter

from pi_lsp.session.journal import Record
from pi_lsp.session.records import is_leaf_move, parent_of, path_parent
from pi_lsp.session.tree import SessionTree

# pi never shows usage records in its tree.
ALWAYS_HIDDEN = frozenset({"usage"})
_ID = attrgetter("env.id")

Index = dict[str | None, list[Record]]


@dataclass(slots=True)
class Row:
    record: Record
    depth: int  # forks above it
    head: bool  # the first entry of a branch: a fork's child, or one of several roots


def drawing_index(tree: SessionTree) -> tuple[Index, Record | None]:
    """The children index as the tree is drawn, and the entry drawn as a root that is none:
    the top of the current path when a loop of parent links ends its walk up (an id written
    again under its own descendant makes one), so the path still shows. pi 1.6 walks such a
    loop until it runs out of memory."""
    index = tree.children_index()
    top = tree.path_top(path_end(tree))
    if top is None or tree.is_root(top):
        return index, None
    key = tree.parent_key(top)
    drawn = dict(index)  # copied only for a looping path: the tree's own index stays as it is
    siblings = [record for record in index[key] if record is not top]
    if siblings:
        drawn[key] = siblings
    else:
        del drawn[key]
    drawn[None] = sorted([*index.get(None, []), top], key=lambda record: record.line)
    return drawn, top


def path_end(tree: SessionTree) -> str | None:
    """The entry the current path is drawn up from: the leaf, or the parent of an id-less
    leaf (pi's leaf when the last line has no id; no row, as no parentId can name it)."""
    if tree.leaf_id is not None or tree.idless_leaf is None:
        return tree.leaf_id
    parent = path_parent(tree.idless_leaf)
    return parent if parent in tree.by_id else None


def drawn_ancestors(tree: SessionTree, entry_id: str, loose: Record | None) -> Iterator[Record]:
    """The entry and its ancestors as drawn: the walk stops at `loose`, drawn as a root."""
    for record in tree.ancestors(entry_id):
        yield record
        if record is loose:
            return


def is_shown(record: Record, bookkeeping: bool = False) -> bool:
    """Usage records never; leaf moves and context edits (pi's "bookkeeping") when asked for."""
    if record.env.type == "message":  # most entries: decided without a look inside
        return True
    if record.env.type in ALWAYS_HIDDEN:
        return False
    return bookkeeping or not (record.env.type == "context_edit" or is_leaf_move(record))


def shown_children(index: Index, parent: str | None, bookkeeping: bool = False) -> list[Record]:
    """The rows right under an entry (None: the roots): its shown children, and the shown
    entries under its hidden ones."""
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


def rows_below(index: Index, row: Row, bookkeeping: bool = False) -> list[Row]:
    """The rows right under `row`: one continues its chain, several are a fork's branches."""
    children = shown_children(index, row.record.env.id, bookkeeping)
    if len(children) == 1:
        return [Row(children[0], row.depth, False)]
    return [Row(child, row.depth + 1, True) for child in children]


def drawn(index: Index, rows: list[Row], bookkeeping: bool = False) -> Iterator[Row]:
    """`rows` each followed by every row under it, in drawing order (depth first, children
    oldest first). Iterative throughout: a session can hold 100k entries in one chain."""
    stack = list(reversed(rows))
    while stack:
        row = stack.pop()
        yield row
        children = shown_children(index, row.record.env.id, bookkeeping)
        if len(children) == 1:  # `rows_below` inline: a chain goes on at the same depth
            stack.append(Row(children[0], row.depth, False))
        else:
            stack.extend(Row(child, row.depth + 1, True) for child in reversed(children))


def layout(tree: SessionTree, bookkeeping: bool = False) -> list[Row]:
    """Every shown entry in drawing order."""
    index, _loose = drawing_index(tree)
    roots = shown_children(index, None, bookkeeping)
    return list(drawn(index, [Row(root, 0, len(roots) > 1) for root in roots], bookkeeping))


def count_rows(index: Index, records: list[Record], bookkeeping: bool = False) -> int:
    """How many rows `records` and every entry under them make."""
    count = 0
    stack = list(records)
    while stack:
        record = stack.pop()
        while True:  # down a chain without the stack: most entries have one child
            count += record.env.type == "message" or is_shown(record, bookkeeping)
            children = index.get(record.env.id)
            if not children:
                break
            stack += children[1:]
            record = children[0]
    return count


def place(tree: SessionTree, entry_id: str, bookkeeping: bool = False,
          known: Mapping[str, tuple[int, bool]] | None = None) -> Row | None:
    """An entry's row as `layout` draws it, found by walking up from it to the top or to a
    row that is `known` (its depth and head); None when it is no row."""
    record = tree.by_id.get(entry_id)
    if record is None or not is_shown(record, bookkeeping):
        return None
    if known and entry_id in known:
        return Row(record, *known[entry_id])
    index, loose = drawing_index(tree)
    depth = 0  # forks above its row, as far as the walk came
    head: bool | None = None  # whether the row right above it forks
    child = top = record  # the last row passed, the last entry
    for top in itertools.islice(drawn_ancestors(tree, entry_id, loose), 1, None):
        if top.env.type != "message" and not is_shown(top, bookkeeping):
            continue
        # `_forks` inline for a chain, most of a long path (100k steps)
        children = index.get(top.env.id)
        fork = not (children is not None and len(children) == 1 and children[0] is child) \
            and _forks(index, top, child, bookkeeping)
        depth += fork
        head = fork if head is None else head
        found = known.get(top.env.id or "") if known else None
        if found is not None:
            return Row(record, found[0] + depth, head)
        child = top
    if not tree.is_root(top) and top is not loose:
        return None  # under a cycle off the current path: no root above it
    if head is None:  # a root row
        return Row(record, 0, len(shown_children(index, None, bookkeeping)) > 1)
    return Row(record, depth, head)


def leaving_points(index: Index, path: list[Record]) -> list[int]:
    """Where on `path` (top first) rows can leave it or hide: its last entry, and those with
    other than one child or a hidden one. Elsewhere the next entry is the one child, a
    message: a long path is mostly such a chain (80k entries), passed without a call each."""
    children = map(index.get, map(_ID, path), itertools.repeat(()))
    points = [n for n, below in enumerate(children)
              if len(below) != 1 or below[0].env.type != "message"]
    if path and points[-1:] != [len(path) - 1]:  # the leaf's one child is no path entry
        points.append(len(path) - 1)
    return points


def path_row(index: Index, path: list[Record], at: int, points: list[int],
             bookkeeping: bool = False) -> Row:
    """The row of `path[at]` as `layout` draws it, `path` being the current path from its top
    (a root, or drawn as one) and `points` its `leaving_points`: `place` without a walk up."""
    forks = {n for n in points if n < at and is_shown(path[n], bookkeeping)
             and len(shown_children(index, path[n].env.id, bookkeeping)) > 1}
    parent = next((n for n in range(at - 1, -1, -1) if is_shown(path[n], bookkeeping)), None)
    if parent is None:  # a root row
        return Row(path[at], 0, len(shown_children(index, None, bookkeeping)) > 1)
    return Row(path[at], len(forks), parent in forks)


def path_count(index: Index, path: list[Record], points: list[int],
               bookkeeping: bool = False) -> int:
    """`count_rows` of the roots, `path` being the current path from its top and `points` its
    `leaving_points`: its rows, and the rows off it counted only (most rows are on it)."""
    if not path:
        return count_rows(index, index.get(None, []), bookkeeping)
    roots = index[None]
    top = next(n for n, root in enumerate(roots) if root is path[0])
    count = count_rows(index, [*roots[:top], *roots[top + 1:]], bookkeeping)
    # Only the top and the entries below a leaving point can be hidden.
    count += len(path) - sum(not is_shown(path[n], bookkeeping)
                             for n in {0, *(n + 1 for n in points if n + 1 < len(path))})
    for n in points:
        below = path[n + 1] if n + 1 < len(path) else None
        count += count_rows(index, [record for record in index.get(path[n].env.id, [])
                                    if record is not below], bookkeeping)
    return count


def _forks(index: Index, parent: Record, child: Record, bookkeeping: bool) -> bool:
    """Whether a row forks (several rows right under it); `child`, the next row down a path,
    is one of them."""
    children = index.get(parent.env.id, [])
    if len(children) == 1 and children[0] is child:  # a chain: most of a long path
        return False
    return len(shown_children(index, parent.env.id, bookkeeping)) > 1


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
