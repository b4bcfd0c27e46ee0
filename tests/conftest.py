"""Shared fixtures: where pi's conformance sessions live, and the example workspace."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fake_anthropic import FakeAnthropic
from tests.fake_openai import FakeOpenAI

ROOT = Path(__file__).resolve().parent.parent
CONFORMANCE = Path(os.environ.get("PI_LSP_CONFORMANCE", ROOT / "tests" / "conformance"))
EXAMPLE_WORKSPACE = ROOT / "examples" / "workspace"


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
