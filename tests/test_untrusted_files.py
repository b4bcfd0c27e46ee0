"""What a cloned repository commits is hostile: its notes files, `.pi/` names, deep JSON and
session names may not leak secrets, write outside the workspace, crash pi-lsp or spoof a
question to the user."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from pi_lsp.agent.prompt import NOTES_LIMIT, project_notes, system_sections

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


