"""Writing to a session: moving its leaf, labels, its name, model and thinking level, and
context edits."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec
from pygls.exceptions import JsonRpcInvalidParams

from pi_lsp.context.edits import edit_context, undo_context_edit
from pi_lsp.paths import real_path
from pi_lsp.server.caps import LABEL_CHARS, NAME_CHARS, is_cut_of
from pi_lsp.server.commands import Command
from pi_lsp.server.commands.files import with_file_changes
from pi_lsp.server.protocol import (
    BranchArgs,
    EditContextArgs,
    LabelArgs,
    ModelArgs,
    MoveArgs,
    NameArgs,
    ThinkingArgs,
)
from pi_lsp.session.records import Refresh

if TYPE_CHECKING:
    from pi_lsp.server.server import PiServer


async def move_to_entry(ls: PiServer, args: MoveArgs) -> Any:
    path = await ls.open_tree(args.uri)
    harness = ls.hub.harness(path)
    ls.hub.require_idle(path)  # a turn or job claimed and not started yet counts
    outcome = harness.branch(args.target_id, durable=ls.config.durable_leaf_moves,
                             edit=args.edit)
    if not ls.config.durable_leaf_moves:  # nothing was appended, so say where the leaf went
        ls.workbench.on_session_changed(real_path(path), harness.tree, Refresh(0, False))
    return await with_file_changes(harness, outcome)


async def label(ls: PiServer, args: LabelArgs) -> dict[str, Any]:
    """Nothing written for a long label sent back as the tree showed it, cut."""
    harness = ls.hub.harness(await ls.open_tree(args.uri))
    if not is_cut_of(args.label, harness.tree.label(args.target_id), LABEL_CHARS):
        harness.set_label(args.target_id, args.label)
    return {}


async def set_name(ls: PiServer, args: NameArgs) -> dict[str, Any]:
    """`queued`: written when the running turn ends, so the editor's title waits for that.
    Nothing is written for a long name sent back as the listing showed it, cut."""
    harness = ls.hub.harness(await ls.open_tree(args.uri))
    if is_cut_of(args.name, harness.tree.name, NAME_CHARS):
        return {"queued": False}
    harness.set_name(args.name)
    return {"queued": harness.busy}


async def set_model(ls: PiServer, args: ModelArgs) -> dict[str, Any]:
    """A model of a provider that exists, in pi 1.6's words when none does ("Model not found",
    nothing written). An id the catalog lacks is taken, as `run --model` takes it and the
    editors offer to type one (a model newer than the catalog, a dated id); so is a model whose
    provider has no key yet."""
    harness = ls.hub.harness(await ls.open_tree(args.uri))
    if not args.model_id or harness.registry.provider(args.provider) is None:
        raise JsonRpcInvalidParams(f"Model not found: {args.provider}/{args.model_id}")
    harness.set_model(args.provider, args.model_id)
    return {}


async def set_thinking_level(ls: PiServer, args: ThinkingArgs) -> dict[str, Any]:
    """The level recorded, clamped to the model as pi does (`max` asked of a model without it
    is `high`), for the editor to say rather than the level asked for; null when queued."""
    harness = ls.hub.harness(await ls.open_tree(args.uri))
    level, written = harness.set_thinking_level(args.level)
    return {"level": level, "written": written, "queued": harness.busy}


async def edit_context_command(ls: PiServer, args: EditContextArgs) -> dict[str, Any]:
    path = await ls.open_tree(args.uri)
    ls.hub.require_idle(path)
    content = None if args.replacement is None else \
        msgspec.to_builtins(args.replacement.content)
    return {"editId": edit_context(ls.hub.sync(path).tree, args.target_id, content)}


async def undo_context_edit_command(ls: PiServer, args: BranchArgs) -> dict[str, Any]:
    path = await ls.open_tree(args.uri)
    ls.hub.require_idle(path)
    return {"editId": undo_context_edit(ls.hub.sync(path).tree, args.target_id)}


COMMANDS: list[Command] = [
    ("pi.branch", MoveArgs, move_to_entry),
    ("pi.label", LabelArgs, label),
    ("pi.setName", NameArgs, set_name),
    ("pi.setModel", ModelArgs, set_model),
    ("pi.setThinkingLevel", ThinkingArgs, set_thinking_level),
    ("pi.editContext", EditContextArgs, edit_context_command),
    ("pi.undoContextEdit", BranchArgs, undo_context_edit_command),
]
