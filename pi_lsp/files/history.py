"""Files bound to the session tree: what each turn did to the workspace, and rewinding it.

A turn that ran `write`, `edit` or `bash` is followed by a `custom` entry (customType
`pi-lsp/files`, data `{before, after, skipped?}`: snapshot tree ids). pi builds no context from
`custom` entries, so pi opens the session with the same context at every entry.

In an editor the workspace is what the editor shows: a file open there with changes not saved
counts with its buffer's text (a turn edits open files through the editor, which saves them
later, if ever), and a restore changes an open file through the editor too.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
from collections import deque
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any

import msgspec

from pi_lsp.agent.approval import ApprovalRequest, Approver
from pi_lsp.agent.events import AgentEvent, TurnEnd
from pi_lsp.agent.harness import Harness
from pi_lsp.agent.tools import DISK, Execute, FileAccess, ToolContext, ToolError, ToolResult
from pi_lsp.files.snapshots import (
    MAX_FILE_BYTES,
    OBJECT_ID,
    ChangedMeanwhile,
    FileChange,
    RestoreProgress,
    Snapshot,
    SnapshotError,
    SnapshotStore,
    some_of,
    store_for,
    unsafe_reason,
)
from pi_lsp.finish import finish
from pi_lsp.session.entries import CustomEntry
from pi_lsp.session.journal import Record
from pi_lsp.session.records import decode_entry
from pi_lsp.session.tree import SessionTree

log = logging.getLogger(__name__)

FILES_TYPE = "pi-lsp/files"
CHANGING_TOOLS = frozenset({"write", "edit", "bash"})
# A snapshot still running after this long is told to the user, once: the turn shows nothing
# while it waits, up to GIT_BUDGET_S a git run. The first snapshot of 50,000 files (200 MB) took
# 8.8 s on 2 cores at a load of 7.6, so a large workspace alone seldom gets here.
SLOW_SNAPSHOT_S = 15.0
# A session is data from anywhere: an id in it is used only if it is an object id.
ObjectId = Annotated[str, msgspec.Meta(pattern=f"^(?:{OBJECT_ID.pattern})$")]


class FilesData(msgspec.Struct, omit_defaults=True):
    """The data of a `pi-lsp/files` entry: the workspace before and after one turn."""

    before: ObjectId
    after: ObjectId
    skipped: list[str] = msgspec.field(default_factory=list)


class FileChanges(msgspec.Struct, rename="camel", omit_defaults=True):
    """How the workspace now differs from an entry's state (what a restore would do)."""

    available: bool
    files: list[FileChange] = msgspec.field(default_factory=list)
    reason: str | None = None  # why there is nothing to compare with
    # Never restored: too large to snapshot, unreadable, or ignored (now, or when the state was
    # recorded).
    skipped: list[str] = msgspec.field(default_factory=list)
    # Never restored: under .git/ or .pi/, or behind a symlink.
    refused: list[str] = msgspec.field(default_factory=list)
    # Why each skipped path that is neither ignored nor too large is.
    why: dict[str, str] = msgspec.field(default_factory=dict)
    # The git repositories in the workspace (now or then), whose files no snapshot records.
    unrecorded: list[str] = msgspec.field(default_factory=list)


class RestoreResult(msgspec.Struct, rename="camel", omit_defaults=True):
    files: list[FileChange]
    undo_id: str  # the workspace before the restore; restoring it undoes this one
    skipped: list[str]
    refused: list[str] = msgspec.field(default_factory=list)
    in_editor: list[str] = msgspec.field(default_factory=list)  # changed there, not yet saved
    why: dict[str, str] = msgspec.field(default_factory=dict)  # as in FileChanges
    unrecorded: list[str] = msgspec.field(default_factory=list)  # as in FileChanges


class ChangeCount(msgspec.Struct, rename="camel"):
    """What a restore to a branch's new leaf would do: the files it would change, and the
    paths it would leave alone (skipped, refused or unrecorded), each counted once."""

    file_changes: int = 0
    left_alone: int = 0


class RewindError(Exception):
    """A restore that cannot be done (no recorded state, no git, unknown undo id)."""


class StoppedPartWay(RewindError, SnapshotError):
    """A restore stopped after changing files (caught as the error that stopped it was):
    restoring `undo_id` undoes what it changed."""

    def __init__(self, message: str, undo_id: str) -> None:
        super().__init__(message)
        self.undo_id = undo_id


def files_data(record: Record) -> FilesData | None:
    if record.env.type != "custom":
        return None
    entry = decode_entry(record)
    if not isinstance(entry, CustomEntry) or entry.custom_type != FILES_TYPE:
        return None
    try:
        return msgspec.convert(entry.data, FilesData)
    except msgspec.ValidationError:
        return None


def state_at(tree: SessionTree, entry_id: str) -> Snapshot | None:
    """The workspace's snapshot at an entry, or None when no turn near it recorded one.

    The nearest `pi-lsp/files` entry on the path to it gives its state after that turn;
    with none above, the state before the nearest later turn below it.
    """
    for record in reversed(tree.path_to(entry_id)):
        data = files_data(record)
        if data is not None:
            return Snapshot(data.after, data.skipped)
    queue = deque(tree.children(entry_id))
    seen = {entry_id}  # a reused id can make the entries below a cycle
    while queue:
        record = queue.popleft()
        data = files_data(record)
        if data is not None:
            return Snapshot(data.before, data.skipped)
        if record.env.id is not None and record.env.id not in seen:
            seen.add(record.env.id)
            queue.extend(tree.children(record.env.id))
    return None


class OpenFiles(msgspec.Struct):
    """The workspace's files open in the editor (those on disk a restore may write; one
    deleted on disk stays deleted), by relative path."""

    paths: list[str]
    unsaved: dict[str, bytes]  # the text of those with changes not saved, over the disk's
    # Those whose unsaved text no snapshot holds (over MAX_FILE_BYTES, or a lone surrogate):
    # a restore would replace it with nothing to undo to.
    unheld: list[str]


def open_files(files: FileAccess, root: Path) -> OpenFiles:
    found = OpenFiles([], {}, [])
    for path, text in files.open_texts().items():
        if not path.is_relative_to(root) or not path.is_file():
            continue
        relative = path.relative_to(root).as_posix()
        if unsafe_reason(root, relative) is not None:
            continue
        found.paths.append(relative)
        try:
            content = None if text is None else text.encode()
        except UnicodeEncodeError:  # a lone surrogate from the client: the disk's stands
            found.unheld.append(relative)
            continue
        if content is not None and len(content) <= MAX_FILE_BYTES:
            found.unsaved[relative] = content
        elif content is not None:
            found.unheld.append(relative)
    found.paths.sort()
    return found


async def snapshot_of(store: SnapshotStore, files: FileAccess) -> Snapshot:
    """The workspace now, open files as the editor holds them."""
    await files.settle()
    return await store.snapshot(open_files(files, store.root).unsaved)


class TurnRecorder:
    """Snapshots around a session's changing tools; one `pi-lsp/files` entry per turn."""

    def __init__(self, tree: SessionTree, store: SnapshotStore, files: FileAccess = DISK,
                 tell: Callable[[str], object] | None = None,
                 tell_slow: Callable[[str], object] | None = None) -> None:
        self.tree = tree
        self.store = store
        self.files = files
        self.tell = tell  # the user, besides the log
        self.tell_slow = tell_slow  # the user, of each snapshot that runs long
        self._before: asyncio.Task[Snapshot | None] | None = None
        self._after: Snapshot | None = None

    def attach(self, harness: Harness) -> None:
        """Make the harness's `write`, `edit` and `bash` snapshot around each call."""
        if self.store.unavailable_reason is not None:
            return  # the feature says so when asked; turns run as before
        for name, tool in list(harness.tools.items()):
            if name in CHANGING_TOOLS:
                harness.tools[name] = dataclasses.replace(tool, execute=self._around(tool.execute))
        harness.approve_call = self._while_asked(harness.approve_call)
        harness.subscribe(self.on_event)

    def _start_before(self) -> asyncio.Task[Snapshot | None]:
        """The turn's "before" snapshot, started once."""
        if self._before is None:
            self._before = asyncio.ensure_future(
                self._snapshot("before the turn's tool changes them"))
        return self._before

    def _while_asked(self, approve: Approver) -> Approver:
        """Take the "before" snapshot while the user is asked about a changing call; it has
        ended when the answer counts, whatever the answer, so none outlives its turn. An abort
        stops it: a call that will not run needs no snapshot."""
        async def ask(request: ApprovalRequest) -> str | None:
            if request.call.name not in CHANGING_TOOLS:
                return await approve(request)
            before = self._start_before()
            try:
                return await approve(request)
            except asyncio.CancelledError:
                before.cancel()
                raise
            finally:
                await finish(before, pass_on=True)
        return ask

    def _around(self, execute: Execute) -> Execute:
        async def run(args: dict[str, object], context: ToolContext) -> ToolResult:
            await finish(self._start_before(), pass_on=True)  # an abort stops it
            try:
                return await execute(args, context)
            finally:
                self._after = await self._snapshot("after the turn's tool changed them")
        return run

    async def _snapshot(self, when: str) -> Snapshot | None:
        """The workspace now (None when that fails); `when` names the moment to the user."""
        slow = asyncio.get_running_loop().call_later(SLOW_SNAPSHOT_S, self._told_slow, when)
        try:
            return await snapshot_of(self.store, self.files)
        except (SnapshotError, OSError) as error:  # a failed snapshot never fails the turn
            log.warning("pi-lsp: file snapshot failed: %s", error)
            if self.tell is not None:
                self.tell(f"file snapshot failed, so this turn's changes to files cannot be "
                          f"rewound: {error}")
            return None
        finally:
            slow.cancel()

    def _told_slow(self, when: str) -> None:
        """Tell the user once, naming what the snapshot waits for: another process holding the
        store, or its own git."""
        if self.tell_slow is None:
            return
        store = self.store
        why = (f"): it waits for process {store.holder()}, another pi-lsp on this folder, to "
               f"let go of its snapshot store {store.git_dir}" if store.waiting else
               ": a large workspace, or .gitignore patterns that keep git matching)")
        self.tell_slow(f"recording the files of {store.root} {when} is taking long (over "
                       f"{SLOW_SNAPSHOT_S:g} s{why}; the turn waits for it, and aborting the "
                       "turn stops it")

    def on_event(self, event: AgentEvent) -> None:
        """At a turn end, after the tool results and before any queued write, record the
        turn's files."""
        if not isinstance(event, TurnEnd):
            return
        task, after = self._before, self._after
        self._before = self._after = None
        before = task.result() if task is not None and task.done() and not task.cancelled() \
            else None
        if before is None or after is None:
            return  # no changing call ran (refused, or a snapshot failed)
        leaf = self.tree.leaf_id
        previous = state_at(self.tree, leaf) if leaf is not None else None
        if before.tree == after.tree and (previous is None or previous.tree == before.tree):
            return  # the turn changed nothing, and the tree holds nothing it contradicts
        data = FilesData(before.tree, after.tree, sorted({*before.skipped, *after.skipped}))
        self.tree.append_custom(FILES_TYPE, msgspec.to_builtins(data))


def target_of(tree: SessionTree | None, entry_id: str | None, undo_id: str | None
              ) -> Snapshot:
    """The snapshot to compare with or restore: the state at an entry, or an undo id."""
    if undo_id is not None:
        if not OBJECT_ID.fullmatch(undo_id):
            raise RewindError(f"undo id {undo_id!r} is not a snapshot id (40 or 64 hex digits)")
        return Snapshot(undo_id)
    if tree is None or entry_id is None:
        raise RewindError("name an entry or an undo id")
    tree.record(entry_id)
    target = state_at(tree, entry_id)
    if target is None:
        raise RewindError(f"no turn recorded the files at or after entry {entry_id}")
    return target


class Changes(msgspec.Struct):
    """What a restore of a snapshot would do to the workspace as it is now."""

    current: Snapshot
    in_editor: list[str]  # the files open in the editor
    files: list[FileChange]
    # Too large to snapshot, then or now (one side lacks their content), or ignored: an
    # ignored file on disk now, or one the target's snapshot left out as ignored.
    skipped: list[str]
    refused: list[str]  # under .git/ or .pi/, or behind a symlink: never restored
    why: dict[str, str]  # why each skipped path that is neither ignored nor too large is
    unrecorded: list[str]  # the nested git repositories, whose files no snapshot records
    unsaved: list[str]  # the open files `current` holds with the editor's text, not the disk's


async def changes_to(store: SnapshotStore, target: Snapshot, with_diff: bool = True,
                     files: FileAccess = DISK) -> Changes:
    """The workspace now and the files a restore of `target` would change."""
    try:
        # Before the snapshot: a session is committed data, and an id it made up must not
        # have the workspace read into a store (a header naming your home folder, say).
        await store.recorded(target.tree)
    except SnapshotError as error:
        raise RewindError(str(error)) from None
    await files.settle()
    editor = open_files(files, store.root)
    current = await store.snapshot(editor.unsaved)
    try:
        changed = await store.changes(current.tree, target.tree, with_diff)
    except SnapshotError as error:  # the store's words: a tree it never recorded, say
        raise RewindError(str(error)) from None
    skipped = sorted({*current.skipped, *target.skipped})
    changed = [f for f in changed if f.path not in skipped]
    refused = [f.path for f in changed if unsafe_reason(store.root, f.path) is not None]
    changed = [f for f in changed if f.path not in refused]
    # The target lacks a file ignored when it was made, though .gitignore may not ignore it
    # now; one ignored now holds the user's content, whatever the target held; and one ignored
    # now but not on disk (a secret the user deleted) is not brought back.
    ignored = store.ignored_in([current.tree, target.tree], [f.path for f in changed]) + \
        await store.ignored_now([f.path for f in changed if f.status == "added"])
    changed = [f for f in changed if f.path not in ignored]
    # A nested repository's files are not recorded: a restore there would overwrite its work.
    nested = await store.nested(current.tree, target.tree)
    why = _left_alone(changed, {path: f"{path} is a git repository of its own, whose files "
                                "snapshots do not record" for path in nested})
    changed = [f for f in changed if f.path not in why]
    why |= _left_alone(changed, await store.in_the_way(current.tree, changed))
    # Each, whether or not its disk differs: the buffer does, and is not restored.
    why |= {path: f"{path} has changes not saved in the editor that no snapshot can hold "
            f"(over {MAX_FILE_BYTES >> 20} MB, or not Unicode text); save it and restore again"
            for path in editor.unheld}
    return Changes(current, editor.paths, [f for f in changed if f.path not in why],
                   sorted({*skipped, *ignored, *why}), refused, why, nested,
                   sorted(editor.unsaved))


def _left_alone(changes: list[FileChange], in_the_way: dict[str, str]) -> dict[str, str]:
    """Why each change at or under a path `in_the_way` is not made: the whole of what is
    there stays as it is."""
    why: dict[str, str] = {}
    for change in changes:
        for path, reason in in_the_way.items():
            if change.path == path or change.path.startswith(f"{path}/"):
                why[change.path] = reason
    return why


async def file_changes(tree: SessionTree, store: SnapshotStore, entry_id: str,
                       with_diff: bool = True, files: FileAccess = DISK) -> FileChanges:
    """How the workspace now (open files as the editor holds them) differs from its state at
    `entry_id`."""
    tree.record(entry_id)
    target = state_at(tree, entry_id)
    reason = store.unavailable_reason
    if reason is None and target is None:
        reason = "no turn recorded the files at or after this entry"
    if reason is not None or target is None:
        return FileChanges(available=False, reason=reason)
    found = await changes_to(store, target, with_diff, files)
    return FileChanges(available=True, files=found.files, skipped=found.skipped,
                       refused=found.refused, why=found.why, unrecorded=found.unrecorded)


async def count_changes(tree: SessionTree, store: SnapshotStore, entry_id: str | None,
                        files: FileAccess = DISK) -> ChangeCount:
    """How many files differ from the state at `entry_id`, and how many a restore would leave
    alone; none when no state is recorded, or when comparing fails (that is logged: the
    caller's own work is done already)."""
    if entry_id is None:
        return ChangeCount()
    try:
        found = await file_changes(tree, store, entry_id, False, files)
    except (RewindError, SnapshotError, OSError) as error:
        log.warning("pi-lsp: could not compare the files with entry %s: %s", entry_id, error)
        return ChangeCount()
    return ChangeCount(len(found.files), len({*found.skipped, *found.refused, *found.unrecorded}))


async def restore_files(tree: SessionTree | None, store: SnapshotStore, entry_id: str | None,
                        undo_id: str | None = None, files: FileAccess = DISK,
                        before_changes: Callable[[str], object] = lambda _undo_id: None,
                        to_its_end: bool = False) -> RestoreResult:
    """Make the workspace what it was at `entry_id` (or at `undo_id`); returns how to undo it,
    and tells `before_changes` as the first change is about to be made (the checks passed).

    Only files that differ are written or deleted; ignored files, files too large to snapshot
    and paths under `.git/` or `.pi/` or behind a symlink are never touched. A file open in the
    editor is changed there (the user saves it), or deleted through it (its buffer goes too).
    With `to_its_end` (the server, whose client learns the undo id from the answer) a cancel
    once it begins changing files does not stop it; else (the CLI's Ctrl-C, the undo id told
    by `before_changes`) it does.
    """
    reason = store.unavailable_reason
    if reason is not None:
        raise RewindError(reason)
    target = target_of(tree, entry_id, undo_id)
    found = await changes_to(store, target, files=files)
    texts = await editor_restores(store, target, found)
    # Told once the checks pass, so the undo id is known however the restore ends (Ctrl-C, a
    # failure), and never by a refusal that changed nothing: its undo would replace what
    # another program wrote, which the refusal keeps.
    progress = RestoreProgress(on_begin=(lambda: before_changes(found.current.tree))
                               if found.files else None)
    making = _make_changes(store, target, found, texts, files, progress)
    try:
        await (_to_its_end(asyncio.ensure_future(making)) if to_its_end else making)
    except (RewindError, SnapshotError, OSError) as error:
        if not (progress.changed or progress.writing):
            raise
        # Said here, as a client told no undo id (pi.restoreFiles failed) could not undo it.
        raise _part_way(error, progress, found.current.tree) from None
    return RestoreResult(files=found.files, undo_id=found.current.tree, skipped=found.skipped,
                         refused=found.refused, in_editor=sorted(texts), why=found.why,
                         unrecorded=found.unrecorded)


async def _to_its_end(making: asyncio.Future[None]) -> None:
    """Await `making` to its end, a cancel meanwhile ($/cancelRequest, shutdown) notwithstanding:
    a restore stopped between two files leaves the workspace half one state, half the other.
    RewindError when it was cut itself: its wait for the editor (the server ending)."""
    while not making.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait([making])
    if making.cancelled():
        raise RewindError("the restore was cut short: the editor's answer was waited for no "
                          "longer, as the server ends")
    making.result()


async def _make_changes(store: SnapshotStore, target: Snapshot, found: Changes,
                        texts: dict[str, EditorRestore], files: FileAccess,
                        progress: RestoreProgress) -> None:
    """Make `found`'s changes, `texts` through the editor, each path told to `progress` as it
    is changed (one deleted through the editor again as the disk's delete finds it gone)."""
    # Every delete comes before every write: a write can make a folder a symlink (a snapshot
    # may hold one), and a later delete of a file "in" it would go wherever it leads.
    deleted = {change.path: await shown_text(store, found.current, change.path)
               for change in found.files
               if change.status == "deleted" and change.path in found.in_editor}
    on_disk = [f for f in found.files if f.path not in texts]
    # Each told to hold the undo snapshot's text before the first change, the editor's deletes
    # included (a program may have written it since), so a refusal changes nothing; but those
    # whose undo snapshot holds an editor's text, which the disk need not.
    if deleted:
        await store.unchanged_since(found.current.tree, target.tree, on_disk, found.unsaved)
        progress.begin()
    for path, old in deleted.items():
        await _in_editor(store, path, files.delete_in_editor(store.root / path, old))
        if not os.path.lexists(store.root / path):  # an editor that cannot delete leaves it
            progress.changed.append(path)
    # On disk: what an editor could not delete, with the folders left empty, then the rest;
    # told again first, as a program may have written while the editor deleted.
    await store.restore(target.tree, on_disk, found.current.tree, found.unsaved, progress)
    for path, text in texts.items():
        await _in_editor(store, path, files.write_text(store.root / path, text.new, text.old))
        progress.changed.append(path)


def _part_way(error: Exception, progress: RestoreProgress, undo_id: str) -> StoppedPartWay:
    """`error`, which stopped a restore part-way, naming what it had changed (or may have:
    git's writes) and the undo snapshot that brings them back."""
    changed = list(dict.fromkeys(progress.changed))
    done = [f"had changed {some_of(changed)}"] if changed else []
    if progress.writing:
        done.append(f"may have written {some_of(progress.writing)}")
    # Those another program wrote are kept now; the undo snapshot holds them as they were.
    also = f" (it replaces {some_of(error.paths)} too: keep a copy first)" \
        if isinstance(error, ChangedMeanwhile) else ""
    return StoppedPartWay(f"{str(error).removesuffix('.')}; but the restore "
                          f"{' and '.join(done)} already: restore the undo snapshot {undo_id} "
                          f"to undo that{also}", undo_id)


async def _in_editor(store: SnapshotStore, path: str, change: Coroutine[Any, Any, object]
                     ) -> None:
    """Make one change through the editor, if the path is still safe to change right now."""
    reason = unsafe_reason(store.root, path)
    if reason is not None:
        change.close()
        raise RewindError(f"{path} was not restored because {reason}")
    try:
        await change
    except (ToolError, OSError) as error:
        raise RewindError(f"{path} was not restored: {error}") from None


class EditorRestore(msgspec.Struct, frozen=True):
    """The text a restore gives a file open in the editor, over `old`: the undo snapshot's."""

    new: str
    old: str | None


async def editor_restores(store: SnapshotStore, target: Snapshot, found: Changes
                          ) -> dict[str, EditorRestore]:
    """The text a restore gives each file open in the editor that it changes (one that is not
    UTF-8 text is restored on disk), and the undo snapshot's, which it replaces."""
    texts: dict[str, EditorRestore] = {}
    for change in found.files:
        if change.path not in found.in_editor or change.status != "modified":
            continue
        content = await store.read(target.tree, change.path)
        if content is None:
            continue
        try:
            new = content.decode()
        except UnicodeDecodeError:
            continue
        texts[change.path] = EditorRestore(new, await shown_text(store, found.current,
                                                                 change.path))
    return texts


async def shown_text(store: SnapshotStore, snapshot: Snapshot, path: str) -> str | None:
    """A file's text in a snapshot as an editor shows it (bytes not UTF-8 as U+FFFD): what a
    restore replaces in a buffer, which a key typed since the snapshot is not."""
    content = await store.read(snapshot.tree, path)
    return None if content is None else content.decode("utf-8", "replace")


def record_files(harness: Harness, tell: Callable[[str], object] | None = None,
                 tell_slow: Callable[[str], object] | None = None) -> None:
    """Bind the files each turn of this harness touches to its session tree; `tell` is told
    why a snapshot failed, `tell_slow` of one that runs long."""
    TurnRecorder(harness.tree, store_for(harness.root), harness.files, tell,
                 tell_slow).attach(harness)

