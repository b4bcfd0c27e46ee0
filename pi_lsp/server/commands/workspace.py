"""The workspace's models and its folders' trust."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
from pygls.exceptions import JsonRpcInvalidParams

from pi_lsp.server.commands import Command
from pi_lsp.server.protocol import SESSIONS_CHANGED, ModelItem, NoArgs, SetTrustArgs, uri_of
from pi_lsp.trust import TrustState

if TYPE_CHECKING:
    from pi_lsp.server.server import PiServer


def list_models(ls: PiServer, _args: NoArgs) -> dict[str, Any]:
    """The models with a key, as pi 1.6's model selector lists them (getAvailable), the
    default first (the rest in the catalog's order: pi's, then models.json's). An editor
    still takes any model typed in (pi.setModel)."""
    settings = ls.hub.default_settings()
    default = settings.initial_model()
    models = sorted(settings.available_models(), key=lambda m: (m.provider, m.id) != default)
    return {"models": [ModelItem.of(m) for m in models], "default": "/".join(default)}


def trust_json(state: TrustState) -> dict[str, Any]:
    item: dict[str, Any] = msgspec.to_builtins(state)
    item["folderUri"] = uri_of(Path(item.pop("folder")))
    return item


def trust_status(ls: PiServer, _args: NoArgs) -> dict[str, Any]:
    hub = ls.hub
    return {"folders": [trust_json(hub.trust(folder)) for folder in hub.folders_or_cwd()]}


def set_trust(ls: PiServer, args: SetTrustArgs) -> dict[str, Any]:
    if args.parent and not (args.trusted and args.save):
        raise JsonRpcInvalidParams("invalid argument: `parent` trusts the parent folder and "
                                   "needs `trusted: true` and `save: true`")
    folder = ls.session_path(args.folder_uri, "folderUri")
    state = trust_json(ls.hub.set_trust(folder, args.trusted, args.save, args.parent))
    # Trust decides whether the project's own sessionDir is followed.
    ls.watch.follow(ls.hub.all_directories())
    ls.protocol.notify(SESSIONS_CHANGED, {})
    return state


COMMANDS: list[Command] = [
    ("pi.listModels", NoArgs, list_models),
    ("pi.trustStatus", NoArgs, trust_status),
    ("pi.setTrust", SetTrustArgs, set_trust),
]
