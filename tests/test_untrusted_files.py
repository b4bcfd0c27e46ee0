"""What a cloned repository commits is hostile: its notes files, `.pi/` names, deep JSON and
session names may not leak secrets, write outside the workspace, crash pi-lsp or spoof a
question to the user."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from pi_lsp.agent.prompt import NOTES_LIMIT, project_notes, system_sections
from pi_lsp.session.sessiondir import link_session_dir
from pi_lsp.trust import save_decision, saved_decisions, trust_path

# -- project notes (AGENTS.md, CLAUDE.md) ----------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A repository under a home folder that holds credentials."""
    (tmp_path / "home" / ".aws").mkdir(parents=True)
    (tmp_path / "home" / ".aws" / "credentials").write_text("aws_secret_access_key = AWS-SECRET\n")
    root = tmp_path / "home" / "src" / "repo"
    root.mkdir(parents=True)
    return root


def test_notes_symlinks_to_secrets_are_not_read(project: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    (project / "AGENTS.md").symlink_to("/proc/self/environ")
    (project / "CLAUDE.md").symlink_to("../../.aws/credentials")
    with caplog.at_level(logging.WARNING):
        assert project_notes(project) == []
    assert "project_context" not in system_sections(project, [])
    assert "AGENTS.md: not read as project notes" in caplog.text
    assert "CLAUDE.md: not read as project notes" in caplog.text


def test_notes_that_lead_out_of_the_project_or_to_a_secret_in_it_are_not_read(
        project: Path) -> None:
    (project.parent / "other.md").write_text("a neighbour's notes\n")
    (project / "AGENTS.md").symlink_to("../other.md")
    (project / ".env").write_text("TOKEN=env-secret\n")
    (project / "CLAUDE.md").symlink_to(".env")
    assert project_notes(project) == []


def test_notes_within_the_project_are_read(project: Path) -> None:
    (project / "AGENTS.md").write_text("Run make test.\n")
    (project / "CLAUDE.md").symlink_to("AGENTS.md")  # a common layout
    assert project_notes(project) == [("AGENTS.md", "Run make test."),
                                      ("CLAUDE.md", "Run make test.")]


def test_notes_that_are_no_regular_file_are_skipped(project: Path) -> None:
    (project / "AGENTS.md").mkdir()
    os.mkfifo(project / "CLAUDE.md")  # opening it for reading must not wait for a writer
    assert project_notes(project) == []


def test_notes_are_read_up_to_the_limit_in_bytes(project: Path) -> None:
    (project / "AGENTS.md").write_text("a" + "é" * NOTES_LIMIT, "utf-8")  # 2 bytes a character
    ((_, text),) = project_notes(project)
    assert len(text.encode("utf-8")) <= NOTES_LIMIT
    assert text == "a" + "é" * ((NOTES_LIMIT - 1) // 2)  # the character cut in two is dropped


# -- temporary files in `.pi/` ---------------------------------------------------------------


def test_a_committed_symlink_at_the_temporary_name_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / ".bashrc"
    victim.write_text("user shell config\n")
    workspace = tmp_path / "repo"
    (workspace / ".pi").mkdir(parents=True)
    planted = workspace / ".pi" / f".settings.json.{os.getpid()}.tmp"
    planted.symlink_to(victim)
    link_session_dir(workspace)
    assert victim.read_text() == "user shell config\n"
    settings = workspace / ".pi" / "settings.json"
    assert json.loads(settings.read_text()) == {"sessionDir": ".pi/sessions"}
    assert not settings.is_symlink()
    assert sorted(p.name for p in (workspace / ".pi").iterdir()) == [planted.name,
                                                                     "settings.json"]


def test_settings_keep_their_permissions_when_rewritten(tmp_path: Path) -> None:
    settings = tmp_path / ".pi" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"theme": "dark"}')
    settings.chmod(0o640)
    link_session_dir(tmp_path)
    assert json.loads(settings.read_text())["sessionDir"] == ".pi/sessions"
    assert settings.stat().st_mode & 0o7777 == 0o640


@pytest.mark.parametrize("kind", ["symlink", "file"])
def test_a_pi_folder_that_is_no_folder_is_left_alone(tmp_path: Path, kind: str,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    workspace = tmp_path / "repo"
    workspace.mkdir()
    if kind == "symlink":
        (workspace / ".pi").symlink_to(outside)
    else:
        (workspace / ".pi").write_text("not a folder\n")
    with caplog.at_level(logging.WARNING):
        link_session_dir(workspace)
    assert list(outside.iterdir()) == []
    assert f"{workspace / '.pi'} is a symlink or not a folder" in caplog.text


def test_the_trust_store_is_written_without_following_a_planted_name(tmp_path: Path) -> None:
    store = trust_path()
    store.parent.mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_text("kept\n")
    (store.parent / f".{store.name}.{os.getpid()}.tmp").symlink_to(victim)
    save_decision(tmp_path / "repo", True)
    assert victim.read_text() == "kept\n"
    assert list(saved_decisions().values()) == [True]


