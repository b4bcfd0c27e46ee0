"""Thinking levels and models written as pi 1.6 writes them: the same steps (levels asked for,
models switched to) under several settings, on a resumed session, against the entries pi 1.6's
own CLI appends (tests/pi16_levels.mjs, in RPC mode).

pi's entries are stored for machines without pi 1.6; where it is installed they are made again
and checked against the stored ones."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pi_lsp.harness_factory import make_harness
from pi_lsp.session.tree import SessionTree
from pi_lsp.settings import load_settings
from tests.test_system_messages import PI16, pi16_node
from tests.waits import PROCESS_CEILING_S

STORED = Path(__file__).with_name("fixtures") / "pi16-levels.json"
STEPS: list[list[str]] = [
    ["level", "medium"], ["level", "xhigh"], ["level", "high"],
    ["model", "anthropic", "claude-opus-4-6"], ["model", "openai", "gpt-5"], ["level", "off"],
    ["model", "openai", "gpt-4.1"], ["model", "anthropic", "claude-sonnet-4-5"],
    ["level", "max"], ["model", "anthropic", "claude-opus-4-6"], ["level", "max"],
    ["model", "anthropic", "claude-haiku-4-5"], ["level", "bogus"], ["level", "minimal"],
]
SETTINGS: dict[str, dict[str, Any]] = {
    "none": {},
    "default": {"defaultThinkingLevel": "low"},
    "per model": {"modelThinkingLevels": {"openai/gpt-5": "high",
                                          "anthropic/claude-opus-4-6": "xhigh"}},
    "both": {"defaultThinkingLevel": "minimal",
             "modelThinkingLevels": {"openai/gpt-4.1": "high",
                                     "anthropic/claude-haiku-4-5": "max"}},
}
STAMP = "2026-12-01T10:00:00.000Z"


def resumed_session(path: Path, cwd: Path) -> None:
    """A session pi resumes without writing anything: a model, a level and one exchange."""
    usage = {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}
    entries = [
        {"type": "session", "version": 3, "id": "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
         "timestamp": STAMP, "cwd": str(cwd)},
        {"type": "model_change", "id": "aaaa0001", "parentId": None, "timestamp": STAMP,
         "provider": "anthropic", "modelId": "claude-sonnet-4-5"},
        {"type": "thinking_level_change", "id": "aaaa0002", "parentId": "aaaa0001",
         "timestamp": STAMP, "thinkingLevel": "medium"},
        {"type": "message", "id": "aaaa0003", "parentId": "aaaa0002", "timestamp": STAMP,
         "message": {"role": "user", "content": [{"type": "text", "text": "hi"}], "timestamp": 1}},
        {"type": "message", "id": "aaaa0004", "parentId": "aaaa0003", "timestamp": STAMP,
         "message": {"role": "assistant", "content": [{"type": "text", "text": "hello"}],
                     "api": "anthropic-messages", "provider": "anthropic",
                     "model": "claude-sonnet-4-5", "usage": usage, "stopReason": "stop",
                     "timestamp": 2}},
    ]
    path.write_text("".join(json.dumps(entry) + "\n" for entry in entries))


def written(path: Path) -> list[list[str]]:
    """The entries appended after the resumed session's five: [type, level or provider/id]."""
    appended = [json.loads(line) for line in path.read_text().splitlines()[5:]]
    return [[e["type"], e["thinkingLevel"] if "thinkingLevel" in e
             else f"{e['provider']}/{e['modelId']}"] for e in appended]


def scene(tmp_path: Path, name: str) -> tuple[Path, Path, Path]:
    """The session file, its folder and an agent folder with the scenario's settings."""
    cwd, agent = tmp_path / "cwd", tmp_path / "agent"
    cwd.mkdir()
    agent.mkdir()
    (agent / "settings.json").write_text(json.dumps(SETTINGS[name]))
    session = tmp_path / "session.jsonl"
    resumed_session(session, cwd)
    return session, cwd, agent


@pytest.fixture(scope="module")
def pi_written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    stored: dict[str, Any] = json.loads(STORED.read_text("utf-8"))
    node = pi16_node()
    if node is not None:
        steps = tmp_path_factory.mktemp("steps") / "steps.json"
        steps.write_text(json.dumps(STEPS))
        cli = PI16 / "@earendil-works" / "pi-coding-agent" / "dist" / "cli.js"
        for name in SETTINGS:
            session, cwd, agent = scene(tmp_path_factory.mktemp("pi"), name)
            run = subprocess.run([node, str(Path(__file__).with_name("pi16_levels.mjs")),
                                  str(cli), str(session), str(cwd), str(agent), str(steps)],
                                 capture_output=True, text=True, timeout=PROCESS_CEILING_S)
            assert run.returncode == 0, run.stderr
            assert written(session) == stored[name], name  # the stored entries are pi's
    return stored


@pytest.mark.parametrize("name", SETTINGS)
def test_levels_and_models_are_written_as_pi_writes_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pi_written: dict[str, Any],
        name: str) -> None:
    session, cwd, agent = scene(tmp_path, name)
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    harness = make_harness(SessionTree.open(str(session)), cwd,
                           load_settings(cwd, project=False))
    for kind, first, *second in STEPS:
        if kind == "level":
            harness.set_thinking_level(first)
        else:
            harness.set_model(first, second[0])
    assert written(session) == pi_written[name]
