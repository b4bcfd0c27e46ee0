"""Shared fixtures: where pi's conformance sessions live, and the example workspace."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest

from pi_lsp.agent.harness import Harness
from pi_lsp.context.layers import system_patch_at
from pi_lsp.trust import save_decision
from tests.fake_anthropic import FakeAnthropic
from tests.fake_openai import FakeOpenAI

ROOT = Path(__file__).resolve().parent.parent
CONFORMANCE = Path(os.environ.get("PI_LSP_CONFORMANCE", ROOT / "tests" / "conformance"))
EXAMPLE_WORKSPACE = ROOT / "examples" / "workspace"

# Nothing a test runs may read or write the user's own pi folder or state folder (snapshot
# stores): both point at throwaway folders for the whole run, servers and CLIs included.
_SCRATCH = tempfile.mkdtemp(prefix="pi-lsp-tests-")
atexit.register(shutil.rmtree, _SCRATCH, True)
os.environ["XDG_STATE_HOME"] = os.path.join(_SCRATCH, "state")
os.environ["PI_CODING_AGENT_DIR"] = os.path.join(_SCRATCH, "agent")
os.environ.pop("PI_CODING_AGENT_SESSION_DIR", None)  # pi-lsp lists its sessions too


@pytest.fixture(autouse=True)
def own_agent_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test its own pi folder, so trust decisions never pass from one test to another."""
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))


@pytest.hookimpl(hookwrapper=True)
def pytest_sessionfinish() -> Iterator[None]:
    """pytest deletes old temp folders here with shutil.rmtree, which recurses once a folder
    in Python 3.11: a tree over ~1,000 deep that a killed run left (a thousand-folder write
    test) raised RecursionError, and every later run exited 1 with all its tests passed."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20_000))
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)


def trust(folder: Path, agent: Path, trusted: bool = True) -> None:
    """Save a decision for `folder` in the trust store of the pi folder `agent`, as pi's
    /trust does."""
    with mock.patch.dict(os.environ, {"PI_CODING_AGENT_DIR": str(agent)}):
        save_decision(folder, trusted)


def pi_lsp_with(setup: str, *args: str) -> list[str]:
    """The command `pi-lsp ARGS` with the Python `setup` run first in its process: a module's
    constant lowered there, as monkeypatch lowers it in this one."""
    return [sys.executable, "-c", f"import sys; {setup}; from pi_lsp.cli import main; "
            "sys.exit(main(sys.argv[1:]))", *args]


def conformance_files() -> list[Path]:
    files = sorted(CONFORMANCE.glob("*.jsonl"))
    if not files:
        raise RuntimeError(f"no conformance sessions under {CONFORMANCE}")
    return files


@pytest.fixture
def example_session() -> Path:
    return next((EXAMPLE_WORKSPACE / ".pi" / "sessions").glob("*.jsonl"))


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeAnthropic]:
    """The local fake Anthropic server, one per test module; each test scripts its replies."""
    server = FakeAnthropic()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def oai() -> Iterator[FakeOpenAI]:
    """The local fake OpenAI-compatible server (both APIs), one per test module."""
    server = FakeOpenAI()
    server.start()
    yield server
    server.stop()


def declare(harness: Harness) -> str:
    """Write the harness's prompt and tools into its session, as its first prompt would, and
    give the entry's id: tests of turns then see only what their turns write (declaring is
    tested in test_system_messages.py)."""
    patch = system_patch_at(harness.tree, harness.tree.leaf_id, harness.agent_setup(), 0)
    assert patch is not None
    return harness.tree.append_message(patch)
