"""A session as a tree: index, leaf, paths, labels, name; reading and writing its file."""

from __future__ import annotations

import contextlib
import errno
import os
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from functools import cmp_to_key
from heapq import merge
from itertools import chain
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec

from pi_lsp.paths import real_path
from pi_lsp.session.appender import (
    FileReplacedError,
    WriteFailedError,
    append_lines,
    create_with_lines,
)
from pi_lsp.session.appends import EntryAppends
from pi_lsp.session.collector import collector_paused
from pi_lsp.session.entries import (
    Entry,
    LabelEntry,
    MessageLine,
    SessionHeader,
    SessionInfoEntry,
    encoder,
    label_text,
    session_name,
)
from pi_lsp.session.ids import (
    iso_now,
    iso_to_ms,
    new_session_id,
    session_file_name,
)
from pi_lsp.session.journal import (
    MAX_LINE_BYTES,
    MAX_NESTING,
    LineBatch,
    Problem,
    Problems,
    Record,
    SkippedLine,
    SkippedLines,
    Snapshot,
    idless_record,
    parse_lines,
    read_file,
    repair_line,
    too_deep,
    written_id,
)
from pi_lsp.session.jsontext import escape_line_separators, js_truthy, stringify
from pi_lsp.session.migrate import ids_made_up, migrate
from pi_lsp.session.records import (
    LEAF_MOVE,
    Refresh,
    UnknownEntryError,
    decode_entry,
    is_leaf_move,
    last_level_change,
    last_model_source,
    parent_of,
    path_parent,
    starts_conversation,
)
from pi_lsp.session.tail import Tail, TailResult

IDS_IN_MEMORY = ("its entries have no ids in the file (a version 1 session), so nothing written "
                 "could name them; open it once with pi (1.6 upgrades the file) or fork it into "
                 "a new session")
# What a new session holds before its first prompt that a file begun elsewhere may stand for.
SETUP_TYPES = frozenset({"model_change", "thinking_level_change"})
CREATED_MEANWHILE = ("another process created this file first; nothing was written to it, and "
                     "this session is still only in memory: start a new session")
NOT_READ_BACK = ("another writer's line was being written at the same moment and the two ran "
                 "together, so the entry is not in the session")
REPLACED_AS_WRITTEN = ("the file was replaced as the entry was written; this session goes on in "
                       "a new file, without it")
FOLDER_LEFT = "nothing was written there, and this session's entries are kept in memory"
# More than this to read (a large append, a replaced file) is read off the event loop: about
# 10 ms of parsing, where a 42 MB file read again on the loop held every request 1.1 to 2.4 s.
BACKGROUND_READ_BYTES = 256 << 10
UNREADABLE = (f"the entry nests more than {MAX_NESTING} levels deep or is longer than "
              f"{MAX_LINE_BYTES >> 20} MB: pi-lsp could not read it back, so it was not written")


def real_cwd(cwd: str) -> str:
    """`cwd` as pi records one: its real path, as Node's process.cwd() gives it. pi compares a
    header's cwd with its own as strings, never following symlinks, so a symlinked name would
    hide the session from `pi -c`. A relative or empty one (pi never writes one) is kept."""
    return os.path.realpath(cwd) if os.path.isabs(cwd) else cwd


def _file_order(record: Record | SkippedLine) -> int:
    return record.line


def _problem_line(problem: Problem) -> int:
    return problem.line or 0  # (a tree's problems all have one)


def _age(record: Record) -> tuple[int, int]:
    ms = iso_to_ms(record.env.timestamp)
    return 0 if ms is None else ms, record.line  # callers keep unreadable stamps away


def _js_difference(a: Record, b: Record) -> int:
    """pi's comparator, `new Date(a.timestamp) - new Date(b.timestamp)`; NaN when either is
    unreadable, given as 0: sorts test only `< 0`, where NaN and 0 are alike."""
    first, second = iso_to_ms(a.env.timestamp), iso_to_ms(b.env.timestamp)
    return 0 if first is None or second is None else first - second


def _unreadable(record: Record) -> bool:
    return iso_to_ms(record.env.timestamp) is None


def _as_leaf(record: Record) -> Record | None:
    """An id-less last line as pi's leaf: None for `"id": null`, which pi takes as the leafId
    null (an empty context, the next entry a root); a missing id or one of another type leaves
    pi's context the path up from that line."""
    return None if written_id(record) is None else record


def order_children(siblings: list[Record]) -> None:
    """pi's order: oldest first, ties in file order; an unreadable stamp compares equal to
    every other, so then the order is the one V8's sort makes of the file order (V8's sort is
    CPython's TimSort, so `list.sort` with the same comparator leaves the same order)."""
    if any(map(_unreadable, siblings)):
        siblings.sort(key=_file_order)
        siblings.sort(key=cmp_to_key(_js_difference))
    else:
        siblings.sort(key=_age)


def _insert(index: dict[str | None, list[Record]], key: str | None, record: Record) -> None:
    """Roots in file order; children oldest first, ties in file order."""
    siblings = index.setdefault(key, [])
    if key is None:
        insort(siblings, record, key=_file_order)
    elif siblings and (_unreadable(record) or any(map(_unreadable, siblings))):
        siblings.append(record)  # no consistent order to insert into: sort as pi does
        order_children(siblings)
    else:
        insort(siblings, record, key=_age)


def _remove(index: dict[str | None, list[Record]], key: str | None, record: Record) -> None:
    siblings = index[key]
    del siblings[next(n for n, sibling in enumerate(siblings) if sibling is record)]
    if not siblings:
        del index[key]
    elif key is not None and (_unreadable(record) or any(map(_unreadable, siblings))):
        order_children(siblings)  # pi sorts what is left afresh: the rest may move


@dataclass(slots=True)
class HeldPath:
    """The last path asked for: `records` up to `leaf`, valid while `epoch` holds; records
    read after the one on `last_line` came later, so none of them is on it."""

    leaf: str
    epoch: int
    last_line: int
    records: list[Record]
    # The last thinking_level_change and model source among the first `settings_known`
    # records: a turn asks for them a dozen times, and finding the level reads the whole path.
    settings_known: int = 0
    level_change: Record | None = None
    model_source: Record | None = None


@dataclass(slots=True)
class Reading:
    """What changed on disk, read by `run` (in a worker thread) without touching the tree it is
    for: a copy of its tail polled and the lines appended parsed, or a replaced file read into
    a tree of its own. `SessionTree.take_reading` takes it in on the event loop."""

    reads: int  # the tree's `_reads` as it began: a read of its own since makes this stale
    path: str
    tail: Tail
    header: SessionHeader
    header_raw: bytes
    appended: LineBatch | None = None
    fresh: SessionTree | None = None

    def run(self) -> None:
        """Read it; the errors a read on the loop raises (a file gone, or no session)."""
        result = self.tail.poll()
        if result.reset:
            self.fresh = SessionTree.open(self.path)
        else:
            self.appended = _parsed(result, self.header, self.header_raw)


def _parsed(result: TailResult, header: SessionHeader, header_raw: bytes) -> LineBatch | None:
    """The lines a poll found, parsed as lines after `header`; None when it found nothing."""
    if not result.lines and not result.problems:
        return None
    batch = LineBatch(header=header, header_raw=header_raw, problems=Problems(result.problems))
    parse_lines(result.lines, result.first_line, batch)
    return batch


@dataclass(slots=True)
class TreeState:
    """What reading a session file makes (`SessionTree._load`) and appends keep up to date: a
    tree read off the event loop hands its state over whole, so nothing read is left behind."""

    header: SessionHeader
    header_raw: bytes
    records: list[Record] = field(default_factory=list)
    # Entries with no id (or an off-type one): out of `records`, as no parentId can name
    # them, yet lines of the session that a rewrite must keep. Those that can change only
    # the leaf are kept as bytes (`idless_lines`), the others as records.
    idless_records: list[Record] = field(default_factory=list)
    idless_lines: SkippedLines = field(default_factory=SkippedLines)
    # Lines the reader skipped: pi may read some (a `custom` entry nested too deep for
    # pi-lsp), and after a relocation the new file is their only copy.
    skipped: SkippedLines = field(default_factory=SkippedLines)
    by_id: dict[str, Record] = field(default_factory=dict)
    problems: Problems = field(default_factory=Problems)
    labels: dict[str, Any] = field(default_factory=dict)  # as the label entries hold them
    # The timestamp of the label entry that set each label, as it holds it (a fork keeps it)
    label_stamps: dict[str, Any] = field(default_factory=dict)
    name: str | None = None
    leaf_id: str | None = None
    # pi's leaf when the last line has no id (leafId undefined): its context is the path
    # up from that line, and what is appended next starts a root (leaf_id is None). None
    # when that id is null: pi's leafId null, whose context is empty.
    idless_leaf: Record | None = None
    migrated: bool = False
    # A version 1 file's ids are made up at each read: writing would name ones no later
    # read (pi's or ours) can match, so such a session is read-only.
    ids_in_memory: bool = False
    children: dict[str | None, list[Record]] | None = None  # built when first asked for
    tail: Tail | None = None  # None: not read from a file


def _in_state(name: str) -> Any:
    """A tree attribute kept in its `TreeState`, read and set as the tree's own."""
    return property(attrgetter(f"state.{name}"),
                    lambda tree, value: setattr(tree.state, name, value))


class SessionTree(EntryAppends):
    """One session file held in memory; every write goes through the journal first."""

    header: SessionHeader = _in_state("header")
    header_raw: bytes = _in_state("header_raw")
    records: list[Record] = _in_state("records")
    idless_records: list[Record] = _in_state("idless_records")
    idless_lines: SkippedLines = _in_state("idless_lines")
    skipped: SkippedLines = _in_state("skipped")
    by_id: dict[str, Record] = _in_state("by_id")
    problems: Problems = _in_state("problems")
    labels: dict[str, Any] = _in_state("labels")
    label_stamps: dict[str, Any] = _in_state("label_stamps")
    name: str | None = _in_state("name")
    leaf_id: str | None = _in_state("leaf_id")
    idless_leaf: Record | None = _in_state("idless_leaf")
    migrated: bool = _in_state("migrated")
    ids_in_memory: bool = _in_state("ids_in_memory")
    _children: dict[str | None, list[Record]] | None = _in_state("children")
    _tail: Tail | None = _in_state("tail")

    def __init__(self, path: str, header: SessionHeader, header_raw: bytes) -> None:
        self.path = path
        # The real folder the file is in as it is read or created: a relocation writes only
        # there, never through a symlink put in its place since (a git checkout mid-turn).
        self.folder = real_path(os.path.dirname(path))
        self.state = TreeState(header, header_raw)
        # A deferred session is written, header and all, at its first user or assistant message
        # (pi 1.6's rule); until then its entries are only in `_unwritten` and in memory.
        self.deferred = False
        self._unwritten: list[bytes] = []
        # While a turn runs, entries another writer appends do not move the leaf, so the
        # turn's entries keep chaining to the turn's own last entry.
        self.hold_leaf = False
        # Bumped when records can change under a path: a reload, an id used again.
        self._epoch = 0
        self._held_path: HeldPath | None = None
        self._reads = 0  # counts reads of the file: a Reading begun before another is stale
        self.listeners: list[Callable[[SessionTree, Refresh], None]] = []

    # -- loading -------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str) -> SessionTree:
        snapshot = read_file(path)
        tree = cls(path, snapshot.header, snapshot.header_raw)
        tree._load(snapshot)
        return tree

    @classmethod
    def create(cls, path: str, cwd: str, parent_session: str | None = None, *,
               deferred: bool = False) -> SessionTree:
        """A new session; the file is written with its first entry, or (`deferred`) as pi
        writes one: header and entries together at its first user or assistant message."""
        header = SessionHeader(
            version=3, id=new_session_id(), timestamp=iso_now(), cwd=real_cwd(cwd),
            parent_session=parent_session,
        )
        tree = cls(path, header, encoder.encode(header))
        tree.deferred = deferred
        return tree

    @classmethod
    def create_in(cls, directory: Path, cwd: str, parent_session: str | None = None, *,
                  deferred: bool = False) -> SessionTree:
        """A new session in `directory`, named as pi names its files."""
        tree = cls.create(str(directory / "unnamed.jsonl"), cwd, parent_session,
                          deferred=deferred)
        tree.path = str(directory / session_file_name(tree.header.id, tree.header.timestamp))
        return tree

    @property
    def on_disk(self) -> bool:
        return self._tail is not None

    def _load(self, snapshot: Snapshot) -> None:
        self._reads += 1
        ids_in_memory = ids_made_up(snapshot)  # before `migrate` makes them up
        migrated = migrate(snapshot)
        self.state = TreeState(snapshot.header, snapshot.header_raw, skipped=snapshot.skipped,
                               problems=snapshot.problems, migrated=migrated,
                               ids_in_memory=ids_in_memory)
        self._epoch += 1
        self._take(snapshot.records, snapshot.idless)
        self._tail = Tail.after(self.path, snapshot)

    def _take(self, records: list[Record], idless: SkippedLines) -> None:
        """Entries read together, as records and as id-less lines kept as bytes; their problems
        go in by line, so a kind's cap lists its first lines and counts the rest from there."""
        found = self._add(records)
        if idless:
            self.idless_lines.extend(idless)
            last = idless[-1]  # pi's leaf when it comes after the records
            if not records or last.line > records[-1].line:
                self.leaf_id, self.idless_leaf = None, _as_leaf(idless_record(last))
        no_id = (Problem("no-id", "entry has no id", number) for number in idless.numbers())
        self.problems.extend(merge(found, no_id, key=_problem_line))

    def _add(self, records: list[Record]) -> Problems:
        """Index `records`; the problems found, in line order (capped: 2M id-less entries would
        each hold one)."""
        found = Problems()
        state = self.state  # its fields, not the tree's properties: once per entry
        by_id, indexed = state.by_id, state.records
        held = self._held_path
        # The parent the kept path's top names, missing when the path was walked.
        above_held = held.records[0].env.parent_id if held and held.records else None
        for record in records:
            entry_id = record.env.id
            if entry_id is None:
                found.append(Problem("no-id", "entry has no id", record.line))
                self._take_idless(record)
                continue
            replaced = by_id.get(entry_id)
            if replaced is not None:
                self._epoch += 1
                found.append(
                    Problem("duplicate-id", f"id {entry_id!r} is used twice", record.line, entry_id)
                )
            elif entry_id == above_held:
                self._epoch += 1  # the kept path goes on up through it now
            by_id[entry_id] = record
            if state.children is not None:
                self._index(state.children, record, replaced)
            indexed.append(record)
            # pi's leaf is the last entry, whatever its type (a leaf move included).
            state.leaf_id = entry_id
            kind = record.env.type
            if kind == "label" or kind == "session_info":
                self._apply_marker(record)
        if records and records[-1].env.id is not None:
            state.idless_leaf = None
        return found

    def _take_idless(self, record: Record) -> None:
        """An entry with no id: pi indexes it all the same, so its name or label counts and,
        last, it is the leaf; no parentId can name it, so it is in no other path."""
        self.leaf_id, self.idless_leaf = None, _as_leaf(record)
        self.idless_records.append(record)
        if record.env.type in ("label", "session_info"):
            self._apply_marker(record)

    def _apply_marker(self, record: Record) -> None:
        entry = decode_entry(record)
        if isinstance(entry, LabelEntry):
            if js_truthy(entry.label):  # pi's `if (entry.label)`
                self.labels[entry.target_id] = entry.label
                self.label_stamps[entry.target_id] = entry.timestamp
            else:
                self.labels.pop(entry.target_id, None)
                self.label_stamps.pop(entry.target_id, None)
        elif isinstance(entry, SessionInfoEntry):
            self.name = session_name(entry)

    def refresh(self) -> Refresh:
        """Take in whatever was appended since the last read (by anyone); tell listeners."""
        return self._notify(self._read_new(relocate=self.hold_leaf))

    def _notify(self, change: Refresh) -> Refresh:
        if change.added or change.reloaded or change.moved:
            for listener in list(self.listeners):
                listener(self, change)
        return change

    def _read_new(self, relocate: bool) -> Refresh:
        """New lines from the tail; a replaced file is read again, or with `relocate` left
        alone while this session moves to a new file (see `_relocate`)."""
        self._reads += 1
        if self._tail is None:
            if not os.path.exists(self.path) or (self.deferred and not self._holds_only_setup()):
                return Refresh(0, False)
            # Another program (`pi --session` given this path) began the session here first:
            # the file is the session now, its model and level standing for the ones held;
            # only once read: a file that is no session leaves this one as it was.
            snapshot = read_file(self.path)
            self._unwritten, self.deferred = [], False
            self._load(snapshot)
            return Refresh(len(self.records), True)
        result = self._tail.poll()
        # A deleted file is moved away from only by a running turn, which must not lose its
        # work; anything else finds no file (FileNotFoundError), not a new one made for it.
        if result.reset and relocate and (self.hold_leaf or not result.gone):
            return self._relocate()
        if result.reset:
            self._load(read_file(self.path))
            return Refresh(len(self.records), True)
        return self._take_appended(_parsed(result, self.header, self.header_raw))

    def _holds_only_setup(self) -> bool:
        """Whether a new session not written yet holds nothing but model and thinking level
        choices: a name or a fork's lines would be lost if its file were read instead."""
        return all(record.env.type in SETUP_TYPES for record in self.records)

    def _take_appended(self, batch: LineBatch | None) -> Refresh:
        """Take in the lines appended since the last read, parsed (None: nothing new)."""
        if batch is None:
            return Refresh(0, False)
        # A torn last line is either finished now or reported again as malformed.
        self.problems = Problems(p for p in self.problems if p.kind != "torn")
        self.problems.extend(batch.problems)
        self.skipped.extend(batch.skipped)
        before, leaf, idless = len(self.records), self.leaf_id, self.idless_leaf
        self._take(batch.records, batch.idless)
        if self.hold_leaf:
            self.leaf_id, self.idless_leaf = leaf, idless
        added = len(self.records) - before
        moved = not added and (self.leaf_id != leaf or self.idless_leaf is not idless)
        return Refresh(added, False, moved=moved)

    def read_in_background(self) -> bool:
        """Whether a refresh now has so much to read (a large append, a replaced file) that it
        is better read off the event loop; never while a turn runs, which moves away from a
        replaced file by writing one."""
        return self._tail is not None and not self.hold_leaf and \
            self._tail.unread() > BACKGROUND_READ_BYTES

    def begin_reading(self) -> Reading:
        """A read of what changed on disk since the last, to `run` off the event loop."""
        if self._tail is None:
            raise ValueError("a session not read from a file has nothing to read again")
        return Reading(self._reads, self.path, self._tail.copy(), self.header, self.header_raw)

    def read_since(self, reading: Reading) -> bool:
        """Whether this tree read its file itself since `reading` began (which is then stale)."""
        return reading.reads != self._reads

    def take_reading(self, reading: Reading) -> Refresh | None:
        """Take in a reading run off the event loop, and tell listeners; None, taking nothing,
        when this tree read its file itself since the reading began, or now moves away from a
        replaced one (a turn started)."""
        if self.read_since(reading) or (reading.fresh is not None and self.hold_leaf):
            return None
        self._reads += 1
        if reading.fresh is None:
            self._tail = reading.tail
            return self._notify(self._take_appended(reading.appended))
        self.state = reading.fresh.state
        self._epoch += 1
        return self._notify(Refresh(len(self.records), True))

    def _relocate(self) -> Refresh:
        """The file was replaced (or cut short) under this session: neither side may be lost,
        so everything known here is written, byte for byte, to a new file in the folder it was
        read from, whose header names the old file as `parentSession`; this session continues
        there. A folder whose path now leads elsewhere, or is gone, gets nothing."""
        old = self.path
        self._refuse_moved_folder()
        header = SessionHeader(version=3, id=new_session_id(), timestamp=iso_now(),
                               cwd=real_cwd(self.header.known_cwd()),
                               parent_session=str(self.folder / os.path.basename(old)))
        target = self.folder / session_file_name(header.id, header.timestamp)
        # A line skipped before the header stays before it: after it, `42` would be an entry.
        before = (line.original for line in self.skipped if line.before_header)
        lines = chain(before, [encoder.encode(header)],
                      (line.original for line in self.every_line()))
        append_lines(str(target), lines, create=True)
        leaf, idless_at = self.leaf_id, self._idless_leaf_at()
        self.path = str(target)
        self._load(read_file(self.path))
        # A line that grew past MAX_LINE_BYTES as written (U+2028 escaped, 3 bytes to 6) is
        # not in the new file: with the id-less leaf gone, pi's reading of that file stands.
        idless = None if idless_at is None else self._idless_entry(idless_at)
        if (leaf is None or leaf in self.by_id) and (idless_at is None or idless is not None):
            self.leaf_id, self.idless_leaf = leaf, idless
        return Refresh(len(self.records), True, relocated_from=old)

    def _refuse_moved_folder(self) -> None:
        """WriteFailedError when the session's folder is no longer where its path leads, so
        nothing is written through a symlink put in its place."""
        now = real_path(os.path.dirname(self.path))
        if now != self.folder:
            moved = f"the session folder {self.folder} now leads elsewhere, to {now}"
        elif not now.is_dir():
            moved = f"the session folder {self.folder} is gone"
        else:
            return
        raise WriteFailedError(errno.EPERM, f"{moved}; {FOLDER_LEFT}", self.path)

    def _idless_leaf_at(self) -> int | None:
        """The id-less leaf's line in a copy of every line under a new header (`_relocate`);
        None: there is none. Lines the copy drops as too long keep their numbers."""
        leaf = self.idless_leaf
        if leaf is None:
            return None
        line = leaf.line
        return 2 + bisect_left(self.records, line, key=_file_order) + \
            bisect_left(self.idless_records, line, key=_file_order) + \
            self.idless_lines.count_before(line) + self.skipped.count_before(line)

    def _idless_entry(self, line: int) -> Record | None:
        """The id-less entry on `line` (read again when kept as bytes); None if there is none."""
        records = self.idless_records
        at = bisect_left(records, line, key=_file_order)
        if at < len(records) and records[at].line == line:
            return records[at]
        at = self.idless_lines.count_before(line)
        if at < len(self.idless_lines) and self.idless_lines.numbers()[at] == line:
            return idless_record(self.idless_lines[at])
        return None

    # -- reading -------------------------------------------------------------------------

    @property
    def idless(self) -> list[Record]:
        """The id-less entries in file order, those kept as bytes read again (the leaf's is
        the leaf)."""
        leaf = self.idless_leaf
        lines = (leaf if leaf is not None and leaf.line == line.line else idless_record(line)
                 for line in self.idless_lines)
        return list(merge(self.idless_records, lines, key=_file_order))

    def kept_texts(self, rewrite: Callable[[Record], bytes | None] | None = None
                   ) -> Iterator[bytes]:
        """Every entry line kept, id-less ones included, in file order, as read (bytes that
        are not UTF-8 as U+FFFD) or as `rewrite` gives an entry's (None leaves it out): what a
        repaired rewrite of the whole session writes."""
        lines = (SkippedLine(line.line, repair_line(line.original)[0])
                 for line in self.idless_lines)
        entries: list[Iterable[Record | SkippedLine]] = [self.records, self.idless_records, lines]
        for kept in merge(*entries, key=_file_order):
            if not isinstance(kept, Record):
                yield kept.original
                continue
            text = kept.raw if rewrite is None else rewrite(kept)
            if text is not None:
                yield text

    def every_line(self) -> Iterator[Record | SkippedLine]:
        """Every line read after the header, skipped ones included, in file order: what a
        copy that must lose nothing writes (lines over MAX_LINE_BYTES were never held)."""
        after = (line for line in self.skipped if not line.before_header)
        return merge(self.records, self.idless_records, self.idless_lines, after,
                     key=_file_order)

    def record(self, entry_id: str) -> Record:
        try:
            return self.by_id[entry_id]
        except KeyError:
            raise UnknownEntryError(entry_id) from None

    def entry(self, entry_id: str) -> Entry | None:
        return decode_entry(self.record(entry_id))

    def ancestors(self, entry_id: str | None) -> Iterator[Record]:
        """The entry, its parent, and so on up; a missing parent or a cycle ends the walk."""
        if entry_id is None:
            return
        by_id = self.by_id
        record = self.record(entry_id)
        # A walk to ever earlier lines cannot cycle, so no set of the ids passed is needed
        # until a parent comes at or after its child (a hostile or merged file): 100k steps.
        while True:
            yield record
            parent = by_id.get(record.env.parent_id or None)  # type: ignore[arg-type]
            if parent is None:
                return
            if parent.line >= record.line:
                break
            record = parent
        seen: set[str | None] = set()
        walked: Record | None = self.record(entry_id)  # the ids yielded: walked again
        while walked is not None and walked.env.id != record.env.id and \
                walked.env.id not in seen:
            seen.add(walked.env.id)  # (the tree may have changed since: guarded all the same)
            walked = by_id.get(walked.env.parent_id or None)  # type: ignore[arg-type]
        above: Record | None = record
        while above is not None and above.env.id not in seen:
            seen.add(above.env.id)
            if above is not record:
                yield above
            parent_id = path_parent(above)
            above = by_id.get(parent_id) if parent_id is not None else None

    def path_to(self, leaf_id: str | None) -> list[Record]:
        """Root-to-leaf records; a missing parent or a cycle ends the walk."""
        if leaf_id is None:
            return self._idless_path()
        return list(self._held(leaf_id).records)

    def settings_entries(self, leaf_id: str | None) -> tuple[Record | None, Record | None]:
        """The last thinking_level_change and the last model source (`last_model_source`) on
        the path to `leaf_id`; read from the kept path, only its new records scanned."""
        if leaf_id is None:
            path = self._idless_path()
            return last_level_change(path), last_model_source(path)
        held = self._held(leaf_id)
        records, known = held.records, held.settings_known
        if known < len(records):
            held.level_change = last_level_change(records, known) or held.level_change
            held.model_source = last_model_source(records, known) or held.model_source
            held.settings_known = len(records)
        return held.level_change, held.model_source

    def _idless_path(self) -> list[Record]:
        """The path to an id-less leaf (pi's buildSessionPath from the last line), else none."""
        leaf = self.idless_leaf
        if leaf is None:
            return []
        parent = path_parent(leaf)
        return [*(self.path_to(parent) if parent in self.by_id else []), leaf]

    def _held(self, leaf_id: str) -> HeldPath:
        """The path to `leaf_id`, kept: a turn asks for it at each step (a walk up 100k
        entries takes about 0.1 s), and entries new under the kept leaf extend it."""
        held = self._held_path
        if held is not None and held.epoch == self._epoch:
            if held.leaf == leaf_id:
                return held
            added = self._added_under(held, self.record(leaf_id))
            if added is not None:  # a new one: the worker folding a view may hold the old
                held = self._held_path = replace(
                    held, leaf=leaf_id, last_line=self.records[-1].line,
                    records=[*held.records, *reversed(added)])
                return held
        path = list(self.ancestors(leaf_id))
        path.reverse()
        # Its own, not the attribute read back: a view folded in a worker thread asks for paths
        # while the loop keeps others (a preview, a diff).
        held = self._held_path = HeldPath(leaf_id, self._epoch, self.records[-1].line, path)
        return held

    def _added_under(self, held: HeldPath, record: Record) -> list[Record] | None:
        """`record` and its ancestors up to the kept leaf, when all came after the kept path
        (so none is on it); None when the walk leaves them first."""
        added: list[Record] = []
        ids: set[str | None] = set()
        while record.line > held.last_line and record.env.id not in ids:
            added.append(record)
            ids.add(record.env.id)
            parent = path_parent(record)
            if parent == held.leaf:
                return added
            found = self.by_id.get(parent) if parent is not None else None
            if found is None:
                return None
            record = found
        return None

    def path_top(self, leaf_id: str | None) -> Record | None:
        """Where the walk up from `leaf_id` ends: a root, or an entry whose parent is on the
        path below it (a loop of parent links)."""
        if leaf_id is None:
            return None
        records = self._held(leaf_id).records
        return records[0] if records else None

    def path_ids(self, leaf_id: str | None) -> list[str]:
        return [record.env.id for record in self.path_to(leaf_id)]  # type: ignore[misc]

    def is_root(self, record: Record) -> bool:
        return self.parent_key(record) is None

    def parent_key(self, record: Record) -> str | None:
        """Where the children index holds a record: under its parent, or (None) as a root."""
        parent = parent_of(record)
        return parent if parent in self.by_id else None

    def children_index(self) -> dict[str | None, list[Record]]:
        """Children of every entry (roots under None), oldest first, ties in file order;
        built once, then kept up to date by every append."""
        if self._children is None:
            index: dict[str | None, list[Record]] = {}
            by_id = self.by_id
            with collector_paused():  # a list per entry: a third of the build
                for record in by_id.values():  # `parent_key` inline: 100k entries
                    parent = record.env.parent_id
                    key = parent if parent in by_id and parent != record.env.id else None
                    siblings = index.get(key)
                    if siblings is None:
                        index[key] = [record]
                    else:
                        siblings.append(record)
            for key, siblings in index.items():
                if len(siblings) > 1:  # most entries have one child: no sort (100k calls)
                    if key is None:
                        siblings.sort(key=_file_order)
                    else:
                        order_children(siblings)
            self._children = index
        return self._children

    def _index(self, index: dict[str | None, list[Record]], record: Record,
               replaced: Record | None) -> None:
        """Place an appended record (already in `by_id`) where a fresh index would have it."""
        entry_id = record.env.id
        if replaced is not None:  # a reused id: the older entry is gone, its children stay
            _remove(index, self.parent_key(replaced), replaced)
        else:  # entries that named it as their parent before it came are roots no more
            for orphan in [r for r in index.get(None, []) if parent_of(r) == entry_id]:
                _remove(index, None, orphan)
                _insert(index, entry_id, orphan)
        _insert(index, self.parent_key(record), record)

    def children(self, entry_id: str) -> list[Record]:
        return self.children_index().get(entry_id, [])

    def roots(self) -> list[Record]:
        return self.children_index().get(None, [])

    def common_ancestor(self, first: str | None, second: str | None) -> str | None:
        """The deepest entry on both paths, or None when they share nothing."""
        on_first = set(self.path_ids(first))
        common = None
        for entry_id in self.path_ids(second):
            if entry_id in on_first:
                common = entry_id
        return common

    def label(self, entry_id: str) -> str | None:
        """The entry's label as editors show it: one that is no text as its JSON text."""
        value = self.labels.get(entry_id)
        return None if value is None else label_text(value)

    def label_value(self, entry_id: str) -> Any:
        """The entry's label as pi holds it (getTree, a fork's copy): of any JSON type."""
        return self.labels.get(entry_id)

    # -- moving the leaf -----------------------------------------------------------------

    def shown_leaf(self) -> str | None:
        """The leaf as editors show it: a durable leaf move (pi's leaf when last) stands for
        its target, which has the same context."""
        if self.leaf_id is None:
            return None
        record = self.by_id[self.leaf_id]
        return parent_of(record) if is_leaf_move(record) else self.leaf_id

    def branch(self, entry_id: str) -> None:
        """Move the leaf in memory (O(1)); the next append hangs under `entry_id`."""
        self.record(entry_id)
        self.leaf_id = entry_id

    def reset_leaf(self) -> None:
        """The next append starts a new root."""
        self.leaf_id, self.idless_leaf = None, None

    def move_leaf(self, entry_id: str | None, *, durable: bool) -> str | None:
        """Go to `entry_id` (None: the next append starts a new root): in memory only, or
        `durable`: recorded as a `pi-lsp.leaf` custom entry under it, which pi (0.73.1 and
        1.6) takes as the leaf and as nothing in the context; returns that entry's id."""
        with self.leaf_moved(entry_id):
            return self.append_custom(LEAF_MOVE, {"targetId": entry_id}) if durable else None

    @contextlib.contextmanager
    def leaf_moved(self, entry_id: str | None) -> Iterator[None]:
        """The leaf at `entry_id` (None: a new root) for what is appended under it; an append
        that fails puts it back, so memory keeps the leaf the file has."""
        before = self.leaf_id, self.idless_leaf  # together: reset_leaf clears both
        if entry_id is None:
            self.reset_leaf()
        else:
            self.branch(entry_id)
        moved = self.idless_leaf
        try:
            yield
        except BaseException:
            # Not moved on to another writer's entries read since (an id-less one included).
            if self.leaf_id == entry_id and self.idless_leaf is moved:
                self.leaf_id, self.idless_leaf = before
            raise

    # -- appending -----------------------------------------------------------------------

    def _append(self, entry: Entry | MessageLine) -> str:
        """Write one entry. Another writer's entries are taken in first; a file replaced since
        it was read is left alone and this session moves to a new file (`_relocate`), as it
        does from a deleted one while a turn runs."""
        if self.ids_in_memory:
            raise WriteFailedError(errno.EPERM, IDS_IN_MEMORY, self.path)
        unnamed = self.unnameable_leaf()
        if unnamed is not None:
            raise WriteFailedError(errno.EPERM, unnamed, self.path)
        line = encoder.encode(entry)
        if len(line) > MAX_LINE_BYTES or too_deep(line):
            raise WriteFailedError(errno.EINVAL, UNREADABLE, self.path)
        if self._tail is None and self.deferred:
            self._keep_unwritten([line])
            return entry.id
        if self._tail is None:
            self._refuse_moved_folder()
            append_lines(self.path, [self.header_raw, line], create=True)
            self.refresh()
            return entry.id
        self._notify(self._read_new(relocate=True))
        try:
            append_lines(self.path, [line], unchanged=self._tail.holds)
        except FileReplacedError:  # replaced since the read above: move away, write there
            self._notify(self._read_new(relocate=True))
            append_lines(self.path, [line], unchanged=self._tail.holds)
        change = self._read_new(relocate=self.hold_leaf)
        # The new entry is this session's position even if another writer's came after it,
        # once read back; listeners are told after, so they never see the entry beside the
        # leaf it replaced.
        written = entry.id in self.by_id
        if written:
            self.leaf_id = entry.id
        self._notify(change)
        if not written:
            raise WriteFailedError(errno.EIO, REPLACED_AS_WRITTEN if change.relocated_from
                                   else NOT_READ_BACK, self.path)
        return entry.id

    def idless_leaf_line(self) -> Record | None:
        """The leaf's line when it has no id pi-lsp can name (none, or ""), else None."""
        if self.leaf_id:
            return None
        return self.idless_leaf if self.leaf_id is None else self.by_id[self.leaf_id]

    def branchless_leaf(self) -> str | None:
        """Why pi 1.6 has no branch at the leaf (getBranch() tests its id for truth: a last line
        with no id, or the id "", 0, false, null), naming the line and the id; None when it has
        one (an id like 5 or true counts: see `unnameable_leaf`)."""
        leaf = self.idless_leaf_line()
        if leaf is None:
            return None
        held = written_id(leaf)
        if held is not msgspec.UNSET and js_truthy(held):  # pi has a branch there
            return None
        what = "no id" if held is msgspec.UNSET else f"no id pi can use ({stringify(held)})"
        return (f"the leaf (line {leaf.line}) has {what}, so pi has no branch there; move to an "
                "entry first")

    def unnameable_leaf(self) -> str | None:
        """Why nothing can be appended at the leaf, when pi would append under it and pi-lsp
        cannot: the last line's id is a value JavaScript takes as true but no text (5, true,
        an object). pi writes it as the parentId; pi-lsp writing none would start a new root,
        which loses the conversation. A missing, null, 0 or false id is no parent to pi."""
        leaf = self.idless_leaf
        if self.leaf_id is not None or leaf is None:
            return None
        leaf_id = written_id(leaf)
        if leaf_id is msgspec.UNSET or not js_truthy(leaf_id):
            return None
        return (f"the leaf (line {leaf.line}) has the id {stringify(leaf_id)}, which is not "
                "text: pi would write the next entry under it, and pi-lsp cannot name it as a "
                "parent; move to another entry first, or give that line a text id")

    def _create_file(self, lines: list[bytes]) -> None:
        """Write a new session's first lines into a file made for them: one another process
        created at the path meanwhile is left alone (pi 1.6 creates with "wx" too), and a
        failed write leaves no empty file behind."""
        self._refuse_moved_folder()
        try:
            create_with_lines(self.path, lines)
        except WriteFailedError as error:
            if error.errno == errno.EEXIST:
                raise WriteFailedError(errno.EEXIST, CREATED_MEANWHILE, self.path) from None
            raise

    def _keep_unwritten(self, lines: list[bytes]) -> None:
        """Hold a deferred session's new lines in memory; at its first user or assistant
        message write the header and every held line together, as pi does."""
        lines = [escape_line_separators(line) for line in lines]  # held as they will be written
        batch = LineBatch(header=self.header, header_raw=self.header_raw)
        parse_lines(lines, len(self._unwritten) + 2, batch)
        if not any(map(starts_conversation, batch.records)):
            self._unwritten.extend(lines)
            self._take(batch.records, batch.idless)
            self._notify(Refresh(len(batch.records), False))
            return
        # Held only once written: lines whose write failed are not part of the session.
        self._create_file([self.header_raw, *self._unwritten, *lines])
        self._unwritten, self.deferred = [], False
        self._load(read_file(self.path))
        self._notify(Refresh(len(self.records), True))

    def take_lines(self, lines: list[bytes]) -> None:
        """Entry lines made elsewhere (a fork's path) for a new deferred session: held, or
        written with the header at once when one of them is a user or assistant message."""
        if not self.deferred:
            raise ValueError("only a new session not yet written takes ready-made lines")
        self._keep_unwritten(lines)

    def branch_with_summary(self, target_id: str | None, from_id: str, summary: str,
                            details: Any = None, from_hook: bool | None = None,
                            usage: msgspec.Raw | None = None) -> str:
        """Move to `target_id` and record what the abandoned branch taught under it."""
        with self.leaf_moved(target_id):
            return self.append_branch_summary(from_id, summary, details, from_hook, usage)

    def append_label(self, target_id: str, label: str | None) -> str:
        """Set a label on an entry; None or an empty label clears it."""
        self.record(target_id)
        text = label.strip() if label else None
        return self._append(LabelEntry(**self._common(), target_id=target_id,
                                       label=text or None))
