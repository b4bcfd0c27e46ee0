"""The sessions of an editor's workspaces: open trees, one harness each, and what they answer.

Knows nothing of LSP; the server converts requests into these calls and results into JSON.
"""

from __future__ import annotations

import os
import sys
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import msgspec

from pi_lsp.agent.approval import Approver, allow_all
from pi_lsp.agent.harness import Diagnostics, Harness
from pi_lsp.agent.tools import DISK, FileAccess
from pi_lsp.context.build import build_leaf_context, context_tokens
from pi_lsp.context.preview import (
    ContextDiff,
    LayerMessage,
    diff_contexts,
    layer_messages,
    render_markdown,
)
from pi_lsp.context.tokens import estimate_tokens
from pi_lsp.files.history import record_files
from pi_lsp.files.snapshots import store_for
from pi_lsp.providers.base import Provider
from pi_lsp.providers.factory import provider_factory
from pi_lsp.providers.wire import request_params
from pi_lsp.server.cache import LruCache
from pi_lsp.server.treeview import TreeView, TreeViews
from pi_lsp.session.catalog import (
    SessionIndex,
    SessionSummary,
    confine_session,
    followed,
    session_dirs,
    start_session,
    tree_summary,
)
from pi_lsp.session.check import check_session
from pi_lsp.session.entries import encoder, role_of
from pi_lsp.session.fork import fork_session
from pi_lsp.session.ids import iso_to_ms
from pi_lsp.session.journal import NotASessionError, Problem
from pi_lsp.session.tree import Refresh, SessionTree
from pi_lsp.settings import Settings, load_settings, settings_stamp
from pi_lsp.summarize.compaction import (
    NothingToCompactError,
    PlanSummary,
    plan_or_refusal,
    plan_summary,
)
from pi_lsp.summarize.select import choose_summarizer
from pi_lsp.trust import TrustState, resolve_trust, save_decision, untrusted_note

Layer = Literal["agent", "llm", "request"]
ChangeListener = Callable[[Path, SessionTree, Refresh], None]
ApproverFactory = Callable[[Path], Approver]
DiagnosticsFactory = Callable[[Path], Diagnostics | None]

# Memory bounds: a preview holds a whole context (tens of MB for a long session), a tree a
# whole file; only the recently used stay (a tree with a running harness always stays).
MAX_PREVIEWS = 8
MAX_PREVIEW_BYTES = 64 << 20
MAX_OPEN_TREES = 8


class Config(msgspec.Struct, rename="camel", omit_defaults=True, forbid_unknown_fields=True):
    """What an editor may set (initialization options, `workspace/didChangeConfiguration`)."""

    session_dirs: list[str] = msgspec.field(default_factory=list)
    model: str | None = None  # PROVIDER/ID for new sessions
    summary_model: str | None = None
    thinking_level: str | None = None
    tool_approval: Literal["ask", "auto"] = "ask"
    durable_leaf_moves: bool = True
    auto_compaction: bool = True
    anthropic_api_key: str | None = None
    anthropic_base_url: str | None = None
    diagnostics_feedback: bool = True
    # The editor's own trust of the window (VS Code's workspace.isTrusted): false is
    # Restricted Mode, where a folder's .pi/ files are never loaded.
    workspace_trusted: bool | None = None


class UnknownSessionError(Exception):
    def __str__(self) -> str:
        return f"no session at {self.args[0]}"


class ForeignFolderError(Exception):
    """A folder that is not one of the workspace's folders."""


class NotASessionFileError(UnknownSessionError):
    def __str__(self) -> str:
        return f"{self.args[0]} is not a pi session file ({self.args[1]})"


class Preview(msgspec.Struct, rename="camel", omit_defaults=True):
    leaf_id: str | None
    layer: str
    model: str | None
    thinking_level: str
    messages: list[LayerMessage]
    total_tokens: int
    context_window: int
    markdown: str
    request: dict[str, object] | None = None


def workspace_settings(root: Path, config: Config, project: bool) -> Settings:
    """The workspace's settings files (the project's only when `project`), with what the
    editor set on top."""
    settings = load_settings(root, project=project)
    changes: dict[str, object] = {}
    if config.model:
        provider, _, model_id = config.model.partition("/")
        changes.update(default_provider=provider, default_model=model_id)
    if config.thinking_level:
        changes["default_thinking_level"] = config.thinking_level
    if config.summary_model:
        changes["summary_model"] = config.summary_model
    if config.anthropic_api_key:
        changes["api_keys"] = {**settings.api_keys, "anthropic": config.anthropic_api_key}
    if not config.auto_compaction:
        changes["compaction"] = msgspec.structs.replace(settings.compaction, enabled=False)
    return msgspec.structs.replace(settings, **changes) if changes else settings


def preview_weight(preview: Preview) -> int:
    """Roughly the bytes a cached preview holds (a str may take 4 bytes a character)."""
    return sys.getsizeof(preview.markdown) + sum(len(m.message) for m in preview.messages)


class SessionHub:
    def __init__(self, folders: list[Path], config: Config,
                 approver_for: ApproverFactory = lambda _path: allow_all,
                 files: FileAccess = DISK,
                 diagnostics_for: DiagnosticsFactory = lambda _root: None) -> None:
        self.folders = folders
        self.config = config
        self.approver_for = approver_for
        self.files = files
        self.diagnostics_for = diagnostics_for
        self.trees: OrderedDict[Path, SessionTree] = OrderedDict()  # least recently used first
        self.harnesses: dict[Path, Harness] = {}
        self.listeners: list[ChangeListener] = []
        self.index = SessionIndex()
        # Views are pure functions of a tree's state; keep the last one per session.
        self.views = TreeViews()
        self._previews: LruCache[tuple[Path, str | None, str], tuple[object, Preview]] = \
            LruCache(MAX_PREVIEWS, MAX_PREVIEW_BYTES, lambda item: preview_weight(item[1]))
        # Per session: its folder and its settings files' times when its harness was made.
        self._stamps: dict[Path, tuple[Path, tuple[int | None, ...]]] = {}
        self.session_trust: dict[Path, bool] = {}  # decisions for this server only, by folder
        self.notices: list[Callable[[str], None]] = []  # what the user must be told
        self._told: set[tuple[Path, str]] = set()

    # -- where sessions are --------------------------------------------------------------

    def directories(self, folder: Path) -> list[Path]:
        extra = [Path(d) if os.path.isabs(d) else folder / d for d in self.config.session_dirs]
        return followed([*session_dirs(str(folder)), *extra], folder)

    def roots(self) -> list[Path]:
        """The workspace folders; the current directory when the editor named none."""
        return self.folders or [Path.cwd()]

    def all_directories(self) -> list[Path]:
        seen: dict[Path, None] = {}
        for folder in self.roots():
            for directory in self.directories(folder):
                seen.setdefault(directory.resolve(), None)
        return list(seen)

    def folder_of(self, path: Path) -> Path:
        """The workspace folder a session belongs to (the deepest one holding it)."""
        resolved = path.resolve()
        for folder in sorted(self.folders, key=lambda f: len(str(f)), reverse=True):
            if any(resolved.parent == d for d in map(Path.resolve, self.directories(folder))):
                return folder
            if folder.resolve() in resolved.parents:
                return folder
        return self.folders[0] if self.folders else resolved.parent

    def confine(self, path: Path) -> Path:
        """`path` resolved, if it is a session file of the workspace as its folders are now."""
        return confine_session(path, self.all_directories())

    def list_sessions(self) -> list[SessionSummary]:
        """The sessions on disk, and the new ones not written yet (no reply so far)."""
        sessions = self.index.list(self.all_directories())
        waiting = [tree_summary(t) for t in self.trees.values() if t.deferred]
        return sorted([*sessions, *waiting], key=lambda s: iso_to_ms(s.modified), reverse=True)

    # -- open sessions -------------------------------------------------------------------

    def tree(self, path: Path) -> SessionTree:
        """The open tree of a session file, brought up to date with the disk."""
        key = self.confine(path)
        tree = self.trees.get(key)
        if tree is None:
            if not key.is_file():
                raise UnknownSessionError(str(path))
            try:
                tree = SessionTree.open(str(key))
            except NotASessionError as error:
                raise NotASessionFileError(str(path), str(error)) from None
            self._keep(tree)
            self._close_unused_trees()
        else:
            self.trees.move_to_end(key)
            tree.refresh()
        return tree

    def _close_unused_trees(self) -> None:
        """Close the least recently used trees beyond the bound, never one that is running."""
        excess = len(self.trees) - MAX_OPEN_TREES
        for key in list(self.trees):
            if excess <= 0:
                break
            harness = self.harnesses.get(key)
            # A new session not written yet lives only here: never let it go.
            if (harness is None or not harness.busy) and not self.trees[key].deferred:
                self._drop(key)
                excess -= 1

    def _drop(self, key: Path) -> None:
        """Everything held for one session: its tree, idle harness and cached answers."""
        self.trees.pop(key, None)
        self.harnesses.pop(key, None)
        self._stamps.pop(key, None)
        self.views.drop(key)
        self._previews.drop_where(lambda cached: cached[0] == key)

    def _keep(self, tree: SessionTree) -> SessionTree:
        """Hold an open tree (one not written yet included) and follow its changes."""
        self.trees[Path(tree.path).resolve()] = tree
        tree.listeners.append(self._changed)
        return tree

    def _changed(self, tree: SessionTree, change: Refresh) -> None:
        path = Path(tree.path).resolve()
        if change.relocated_from is not None:  # its file was replaced: it lives on elsewhere
            old = Path(change.relocated_from).resolve()
            self.trees.pop(old, None)
            self.trees[path] = tree
            harness = self.harnesses.pop(old, None)
            if harness is not None:
                self.harnesses[path] = harness
        if change.reloaded:
            self.views.drop(path)
        for listener in list(self.listeners):
            listener(path, tree, change)

    def file_changed(self, path: Path) -> None:
        """The watcher saw `path` change: take in what another writer appended."""
        if not path.exists():
            self.forget(path)
            return
        tree = self.trees.get(path.resolve())
        if tree is not None:
            tree.refresh()

    def forget(self, path: Path) -> None:
        """The file is gone: stop its run and drop all that was held for it."""
        key = path.resolve()
        harness = self.harnesses.get(key)
        if harness is not None:
            harness.abort()
        self._drop(key)

    def settings_for(self, path: Path) -> Settings:
        return self.folder_settings(self.folder_of(path))

    # -- trust ---------------------------------------------------------------------------

    def trust(self, folder: Path) -> TrustState:
        return resolve_trust(folder, client=self.config.workspace_trusted,
                             session=self.session_trust.get(folder.resolve()))

    def folder_settings(self, folder: Path) -> Settings:
        """A folder's settings: its own `.pi/` files only when it is trusted (if they are
        left out, the user is told once, as about an old snapshot store in it)."""
        state = self.trust(folder)
        note = untrusted_note(state)
        if note is not None:
            self.tell_once(folder, "trust", note)
        legacy = store_for(folder).adopt_legacy(state.trusted)
        if legacy is not None:
            self.tell_once(folder, f"snapshots {state.trusted}", legacy)
        return workspace_settings(folder, self.config, state.trusted)

    def set_trust(self, folder: Path, trusted: bool | None, save: bool, parent: bool
                  ) -> TrustState:
        """Decide for a folder: saved in pi's trust store, or for this server only (None
        forgets the decision); idle sessions of the folder take their settings again."""
        folder = self.workspace_folder(folder)
        key = folder.resolve()
        if save:
            save_decision(folder, trusted, parent)
            self.session_trust.pop(key, None)
        elif trusted is None:
            self.session_trust.pop(key, None)
        else:
            self.session_trust[key] = trusted
        self._told.discard((key, "trust"))  # a folder left untrusted is told again
        self._drop_idle(lambda harness: harness.root.resolve() == key)
        return self.trust(folder)

    def tell_once(self, folder: Path, topic: str, message: str) -> None:
        if (folder.resolve(), topic) in self._told:
            return
        self._told.add((folder.resolve(), topic))
        for notice in list(self.notices):
            notice(message)

    def harness(self, path: Path) -> Harness:
        key = path.resolve()
        harness = self.harnesses.get(key)
        folder, made = self._stamps.get(key) or (self.folder_of(key), None)
        stamp = settings_stamp(folder)
        if harness is not None and not harness.busy and made != stamp:
            harness = None  # settings or models.json changed: an idle harness is rebuilt
        if harness is None:
            settings = self.settings_for(key)
            harness = Harness(
                self.tree(key), self.folder_of(key), self.provider_factory(settings),
                registry=settings.registry(),
                default_model=(settings.default_provider, settings.default_model),
                approve=self.approver_for(key),
                allow_outside_root=settings.allow_writes_outside_workspace,
                session_dirs=tuple(self.all_directories()),
                summarizer=choose_summarizer(settings, base_url=self.config.anthropic_base_url),
                compaction=settings.compaction,
                branch_reserve_tokens=settings.branch_summary.reserve_tokens,
                files=self.files,
                diagnostics=self.diagnostics_for(self.folder_of(key)),
                retry=settings.retry,
            )
            record_files(harness)
            self.harnesses[key] = harness
            self._stamps[key] = (folder, stamp)
        return harness

    def provider_factory(self, settings: Settings) -> Callable[[str], Provider]:
        return provider_factory(settings.registry(), settings.api_key,
                                self.config.anthropic_base_url, settings.retry.provider)

    def reconfigure(self, config: Config) -> None:
        """New settings apply to harnesses made from now on; idle ones are rebuilt."""
        self.config = config
        self._drop_idle(lambda _harness: True)

    def _drop_idle(self, which: Callable[[Harness], bool]) -> None:
        for key, harness in list(self.harnesses.items()):
            if not harness.busy and which(harness):
                del self.harnesses[key]

    # -- answers -------------------------------------------------------------------------

    def workspace_folder(self, folder: Path) -> Path:
        """`folder` if it is one of the workspace's folders (symlinks followed), else an error."""
        resolved = folder.resolve()
        for candidate in self.roots():
            if candidate.resolve() == resolved:
                return candidate
        listed = ", ".join(str(f) for f in self.roots())
        raise ForeignFolderError(f"{folder} is not one of its folders ({listed})")

    def new_session(self, name: str | None, folder: Path | None = None) -> Path:
        root = self.workspace_folder(folder) if folder is not None else self.roots()[0]
        settings = self.folder_settings(root)
        tree = self._keep(start_session(root, settings.default_provider, settings.default_model,
                                        settings.default_thinking_level))
        if name:
            tree.append_session_info(name)
        return Path(tree.path)

    def tree_view(self, path: Path, bookkeeping: bool = False) -> TreeView:
        """The rows an editor draws, in order (`session/layout.py`), with what each row says."""
        return self.views.view(path.resolve(), self.tree(path), bookkeeping)

    def preview(self, path: Path, leaf_id: str | None, layer: Layer) -> Preview:
        tree = self.tree(path)
        leaf = leaf_id if leaf_id is not None else tree.leaf_id
        if leaf is not None:
            tree.record(leaf)
        key = (path.resolve(), leaf, layer)
        state = (id(tree.records), len(tree.records), self.harness(path).model_at(leaf).id)
        cached = self._previews.get(key)
        if cached is not None and cached[0] == state:
            return cached[1]
        preview = self._build_preview(path, tree, leaf, layer)
        self._previews.put(key, (state, preview))
        return preview

    def _build_preview(self, path: Path, tree: SessionTree, leaf: str | None, layer: Layer
                       ) -> Preview:
        built = build_leaf_context(tree, leaf)
        context = built.context
        harness = self.harness(path)
        model_info = harness.model_at(leaf)
        request = None
        if layer == "request":
            state = harness.turn_state_at(leaf)
            request = request_params(harness.request_for(state))
            messages = [LayerMessage(entry_id=None, role=role_of(m),
                                     tokens=estimate_tokens(m),
                                     message=msgspec.Raw(encoder.encode(m)))
                        for m in state.messages]
            self._attach_entry_ids(messages, layer_messages(built, "llm"))
        else:
            messages = layer_messages(built, layer)
        total = context_tokens(tree, leaf)
        model = f"{model_info.provider}/{model_info.id}"
        return Preview(
            leaf_id=leaf, layer=layer, model=model, thinking_level=context.thinking_level,
            messages=messages, total_tokens=total, context_window=model_info.context_window,
            markdown=render_markdown(leaf, layer, messages, total, model_info.context_window,
                                     context.thinking_level, model),
            request=request,
        )

    @staticmethod
    def _attach_entry_ids(prepared: list[LayerMessage], llm: list[LayerMessage]) -> None:
        """Give provider-layer messages the entry ids of the model-layer messages they match."""
        by_body = {bytes(m.message): m.entry_id for m in llm}
        for message in prepared:
            message.entry_id = by_body.get(bytes(message.message))

    def diff(self, path: Path, from_leaf: str, to_leaf: str) -> ContextDiff:
        tree = self.tree(path)
        tree.record(from_leaf)
        tree.record(to_leaf)
        return diff_contexts(tree, from_leaf, to_leaf)

    def plan(self, path: Path) -> PlanSummary | None:
        """What a compaction would do now, or None when it would refuse (nothing to summarize)."""
        tree = self.tree(path)
        settings = self.settings_for(path)
        try:
            return plan_summary(plan_or_refusal(tree.path_to(tree.leaf_id), settings.compaction))
        except NothingToCompactError:
            return None

    def fork(self, path: Path, leaf_id: str | None) -> Path:
        tree = self.tree(path)
        leaf = leaf_id or tree.leaf_id
        if leaf is None:
            raise ValueError("the session is empty; there is nothing to fork")
        return Path(self._keep(fork_session(tree, leaf)).path)

    def check(self, path: Path) -> list[Problem]:
        return check_session(self.tree(path))
