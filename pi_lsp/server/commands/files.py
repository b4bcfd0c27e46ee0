"""The workspace files a session's turns changed, and restoring them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec
from pygls.exceptions import JsonRpcInvalidParams

from pi_lsp.agent.harness import Harness
from pi_lsp.files.history import count_changes, file_changes, restore_files
from pi_lsp.files.snapshots import store_for
from pi_lsp.server.commands import Command
from pi_lsp.server.protocol import FileChangesArgs, RestoreFilesArgs
from pi_lsp.summarize.branch import BranchOutcome

if TYPE_CHECKING:
    from pi_lsp.server.server import PiServer


async def with_file_changes(harness: Harness, outcome: BranchOutcome) -> dict[str, Any]:
    """A branch's outcome plus `fileChanges` and `leftAlone`, the counts that let the editor
    offer a restore."""
    counts = await count_changes(harness.tree, store_for(harness.root), outcome.leaf_id,
                                 harness.files)
    return {**msgspec.to_builtins(outcome), **msgspec.to_builtins(counts)}


async def get_file_changes(ls: PiServer, args: FileChangesArgs) -> Any:
    harness = ls.hub.harness(await ls.open_tree(args.uri))
    return await file_changes(harness.tree, store_for(harness.root), args.entry_id,
                              files=harness.files)


async def restore(ls: PiServer, args: RestoreFilesArgs) -> Any:
    if (args.entry_id is None) == (args.undo_id is None):
        raise JsonRpcInvalidParams("invalid argument: give exactly one of `entryId`, `undoId`")
    harness = ls.hub.harness(await ls.open_tree(args.uri))
    ls.hub.require_workspace_idle(harness.root)
    return await restore_files(harness.tree, store_for(harness.root), args.entry_id,
                               args.undo_id, harness.files, to_its_end=True)


COMMANDS: list[Command] = [
    ("pi.fileChanges", FileChangesArgs, get_file_changes),
    ("pi.restoreFiles", RestoreFilesArgs, restore),
]
