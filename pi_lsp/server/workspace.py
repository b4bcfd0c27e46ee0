"""The editor's workspace: its folders, where their sessions are, their trust and settings."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import msgspec

from pi_lsp.files.snapshots import store_for
from pi_lsp.paths import real_path
from pi_lsp.server.config import Config
from pi_lsp.session.catalog import (
    confine_session,
    followed,
    session_dirs,
    session_workspace,
    shared_folders,
    shared_owner,
)
from pi_lsp.settings import Settings, load_settings
from pi_lsp.trust import TrustState, resolve_trust, save_decision, untrusted_note


def editor_settings(root: Path, config: Config, project: bool) -> Settings:
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


class ForeignFolderError(Exception):
    """A folder that is not one of the workspace's folders."""


class Workspace:
    def __init__(self, folders: list[Path], config: Config) -> None:
        self.folders = folders
        self.config = config
        self.session_trust: dict[Path, bool] = {}  # decisions for this server only, by folder
        self.notices: list[Callable[[str], None]] = []  # what the user must be told
        self._told: set[tuple[Path, str]] = set()

    # -- where sessions are --------------------------------------------------------------

    def directories(self, folder: Path) -> list[Path]:
        extra = [Path(d) if os.path.isabs(d) else folder / d for d in self.config.session_dirs]
        own = session_dirs(str(folder), self.trust(folder).vouched)
        return followed([*own, *extra], folder)

    def vouched(self) -> list[Path]:
        """The folders whose own `sessionDir` is followed: trusted by a decision, not merely for
        having nothing to load (a settings.json with only a sessionDir is that)."""
        return [folder for folder in self.folders_or_cwd() if self.trust(folder).vouched]

    def folders_or_cwd(self) -> list[Path]:
        """The workspace folders; the current directory when the editor named none."""
        return self.folders or [Path.cwd()]

    def all_directories(self) -> list[Path]:
        seen: dict[Path, None] = {}
        for folder in self.folders_or_cwd():
            for directory in self.directories(folder):
                seen.setdefault(real_path(directory), None)
        return list(seen)

    def folder_of(self, path: Path, cwd: str | None = None) -> Path:
        """The workspace folder a session belongs to: in pi's shared folder, the one its header
        (or `cwd`, the header of one held) names; else the deepest one holding it."""
        workspaces = self.folders_or_cwd()  # as the sessions were listed
        # Read once: each reading reads the settings files that may name a `sessionDir`.
        shared = shared_folders(workspaces, self.vouched())
        owner = shared_owner(path, shared, cwd)
        if owner is not None:
            return owner
        # Every folder lists pi's shared folder: it says nothing of whose a session there is.
        folders = {folder: [d for d in self.directories(folder)
                            if os.path.realpath(d) not in shared] for folder in workspaces}
        return session_workspace(path, folders, workspaces[0])

    def confine(self, path: Path) -> Path:
        """`path` resolved, if it is a session file of the workspace as its folders are now."""
        return confine_session(path, self.all_directories())

    def workspace_folder(self, folder: Path) -> Path:
        """`folder` if it is one of the workspace's folders (symlinks followed), else an error."""
        resolved = real_path(folder)
        for candidate in self.folders_or_cwd():
            if real_path(candidate) == resolved:
                return candidate
        listed = ", ".join(str(f) for f in self.folders_or_cwd())
        raise ForeignFolderError(f"{folder} is not one of its folders ({listed})")

    def default_folder(self) -> Path:
        """Where new sessions go unless a folder is named: the first one."""
        return self.folders_or_cwd()[0]

    def default_settings(self) -> Settings:
        """The settings of the default folder."""
        return self.folder_settings(self.default_folder())

    def settings_for(self, path: Path) -> Settings:
        return self.folder_settings(self.folder_of(path))

    # -- trust ---------------------------------------------------------------------------

    def trust(self, folder: Path) -> TrustState:
        return resolve_trust(folder, client=self.config.workspace_trusted,
                             session=self.session_trust.get(real_path(folder)))

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
        return editor_settings(folder, self.config, state.trusted)

    def set_trust(self, folder: Path, trusted: bool | None, save: bool, parent: bool
                  ) -> TrustState:
        """Decide for a folder: saved in pi's trust store, or for this server only (None
        forgets the decision)."""
        folder = self.workspace_folder(folder)
        key = real_path(folder)
        if save:
            save_decision(folder, trusted, parent)
            self.session_trust.pop(key, None)
        elif trusted is None:
            self.session_trust.pop(key, None)
        else:
            self.session_trust[key] = trusted
        self._told.discard((key, "trust"))  # a folder left untrusted is told again
        return self.trust(folder)

    def tell_once(self, folder: Path, topic: str, message: str) -> None:
        if (real_path(folder), topic) in self._told:
            return
        self._told.add((real_path(folder), topic))
        self.tell(message)

    def tell(self, message: str) -> None:
        """Tell the user, through every listener of `notices`."""
        for notice in list(self.notices):
            notice(message)
