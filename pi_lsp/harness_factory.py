"""The one way a Harness is made from settings, for the server and for `pi-lsp run`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pi_lsp.agent.approval import Approver, allow_all
from pi_lsp.agent.harness import Diagnostics, Harness
from pi_lsp.agent.tools import DISK, FileAccess
from pi_lsp.files.history import record_files
from pi_lsp.providers.factory import provider_factory
from pi_lsp.session.tree import SessionTree
from pi_lsp.settings import Settings
from pi_lsp.summarize.select import ChosenSummarizer, choose_summarizer


def make_harness(tree: SessionTree, root: Path, settings: Settings, *,
                 anthropic_base_url: str | None = None, approve: Approver = allow_all,
                 session_dirs: tuple[Path, ...] = (), files: FileAccess = DISK,
                 diagnostics: Diagnostics | None = None,
                 tell: Callable[[str], object] | None = None,
                 tell_slow: Callable[[str], object] | None = None) -> Harness:
    """A harness for `tree` in workspace `root` as `settings` say, its file changes recorded
    (`tell` is told when they cannot be, `tell_slow` when recording them runs long)."""
    registry = settings.registry()
    harness = Harness(
        tree, root,
        provider_factory(registry, settings.api_key, anthropic_base_url, settings.retry.provider,
                         oauth_login=settings.oauth_login),
        registry=registry,
        default_model=settings.initial_model(),
        default_thinking_level=settings.resume_thinking_level,
        level_for_model=settings.thinking_level_for,
        approve=approve,
        allow_outside_root=settings.allow_writes_outside_workspace,
        session_dirs=session_dirs,
        summarizer=ChosenSummarizer(
            lambda: choose_summarizer(settings, base_url=anthropic_base_url)),
        compaction=settings.compaction,
        branch_reserve_tokens=settings.branch_summary.reserve_tokens,
        files=files,
        diagnostics=diagnostics,
        retry=settings.retry,
        auto_resize_images=settings.images.auto_resize,
        project_trusted=settings.project_trusted,
    )
    record_files(harness, tell, tell_slow)
    return harness
