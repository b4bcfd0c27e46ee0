"""Writing to a session: moving its leaf, labels, its name, model and thinking level."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pi_lsp.server.commands import Command
from pi_lsp.server.commands.files import with_file_changes
from pi_lsp.server.protocol import BranchArgs, LabelArgs, ModelArgs, NameArgs, ThinkingArgs
from pi_lsp.session.records import Refresh

if TYPE_CHECKING:
    from pi_lsp.server.server import PiServer


async def move_to_entry(ls: PiServer, args: BranchArgs) -> Any:
    path = await ls.open_tree(args.uri)
    harness = ls.hub.harness(path)
    outcome = harness.branch(args.target_id, durable=ls.config.durable_leaf_moves)
    if not ls.config.durable_leaf_moves:  # nothing was appended, so say where the leaf went
        ls.on_session_changed(path.resolve(), harness.tree, Refresh(0, False))
    return await with_file_changes(harness, outcome)


async def label(ls: PiServer, args: LabelArgs) -> dict[str, Any]:
    ls.hub.harness(await ls.open_tree(args.uri)).set_label(args.target_id, args.label)
    return {}


async def set_name(ls: PiServer, args: NameArgs) -> dict[str, Any]:
    ls.hub.harness(await ls.open_tree(args.uri)).set_name(args.name)
    return {}


async def set_model(ls: PiServer, args: ModelArgs) -> dict[str, Any]:
    ls.hub.harness(await ls.open_tree(args.uri)).set_model(args.provider, args.model_id)
    return {}


async def set_thinking_level(ls: PiServer, args: ThinkingArgs) -> dict[str, Any]:
    ls.hub.harness(await ls.open_tree(args.uri)).set_thinking_level(args.level)
    return {}


COMMANDS: list[Command] = [
    ("pi.branch", BranchArgs, move_to_entry),
    ("pi.label", LabelArgs, label),
    ("pi.setName", NameArgs, set_name),
    ("pi.setModel", ModelArgs, set_model),
    ("pi.setThinkingLevel", ThinkingArgs, set_thinking_level),
]
