"""Listing, creating, reading and checking sessions."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from pi_lsp.server.caps import ID_CHARS, NAME_CHARS, PATH_CHARS, capped
from pi_lsp.server.commands import Command
from pi_lsp.server.previewpage import first_row, paged
from pi_lsp.server.protocol import (
    DiffArgs,
    ForkArgs,
    NewSessionArgs,
    NoArgs,
    PreviewArgs,
    SessionArgs,
    TreeArgs,
    uri_of,
)

if TYPE_CHECKING:
    from pi_lsp.server.server import PiServer
    from pi_lsp.session.catalog import SessionSummary

ROWS_UNDER_PAGE = 500


async def list_sessions(ls: PiServer, _args: NoArgs) -> dict[str, Any]:
    sessions = await asyncio.to_thread(ls.hub.list_sessions, ls.hub.held_sessions())
    # A `sessionDir` set since (in a settings file, or by trust) is watched from now on; one
    # a settings file no longer names has its sessions' runs stopped, as commands refuse them.
    ls.hub.forget_uncovered()
    ls.watch.follow(ls.hub.all_directories())
    return {"sessions": [_listed(session) for session in sessions]}


def _listed(session: SessionSummary) -> dict[str, Any]:
    """A session as `pi.listSessions` sends it: by its uri, its file's own text cut (caps.py)."""
    item: dict[str, Any] = msgspec.to_builtins(session)
    item["uri"] = uri_of(Path(item.pop("path")))
    item.update(id=capped(session.id, ID_CHARS), name=capped(session.name, NAME_CHARS),
                cwd=capped(session.cwd, PATH_CHARS),
                parentSession=capped(session.parent_session, PATH_CHARS))
    return item


def new_session(ls: PiServer, args: NewSessionArgs) -> dict[str, Any]:
    folder = ls.session_path(args.folder_uri, "folderUri") if args.folder_uri else None
    path = ls.hub.new_session(args.name, folder)
    ls.watch.created(path)
    return {"uri": uri_of(path)}


async def get_tree(ls: PiServer, args: TreeArgs) -> Any:
    path = await ls.open_tree(args.uri)
    if args.under is not None:
        return ls.hub.rows_under(path, args.under, args.start, args.limit or ROWS_UNDER_PAGE,
                                 args.bookkeeping)
    if args.after is not None:
        return ls.hub.branches_after(path, args.after, args.start,
                                     args.limit or ROWS_UNDER_PAGE, args.bookkeeping)
    return await ls.hub.view(path, args.bookkeeping, args.limit)


async def preview_context(ls: PiServer, args: PreviewArgs) -> Any:
    path = await ls.open_tree(args.uri)
    agent = await asyncio.to_thread(ls.hub.agent_builder(path))
    if args.page is None:
        return ls.hub.preview(path, args.leaf_id, args.layer, agent)
    outline = ls.hub.outline(path, args.leaf_id, args.layer, agent)
    start = args.start if args.entry_id is None else first_row(outline, args.entry_id)
    return paged(outline, args.page, start)


async def diff_context(ls: PiServer, args: DiffArgs) -> Any:
    path = await ls.open_tree(args.uri)
    return ls.hub.diff(path, args.from_leaf_id, args.to_leaf_id)


async def fork(ls: PiServer, args: ForkArgs) -> dict[str, Any]:
    forked = ls.hub.fork(await ls.open_tree(args.uri), args.leaf_id)
    ls.watch.created(forked)
    return {"uri": uri_of(forked)}


async def check(ls: PiServer, args: SessionArgs) -> dict[str, Any]:
    return {"problems": ls.hub.check(await ls.open_tree(args.uri))}


COMMANDS: list[Command] = [
    ("pi.listSessions", NoArgs, list_sessions),
    ("pi.newSession", NewSessionArgs, new_session),
    ("pi.getTree", TreeArgs, get_tree),
    ("pi.previewContext", PreviewArgs, preview_context),
    ("pi.diffContext", DiffArgs, diff_context),
    ("pi.fork", ForkArgs, fork),
    ("pi.check", SessionArgs, check),
]
