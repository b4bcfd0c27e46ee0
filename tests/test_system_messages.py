"""pi 1.6 keeps the system prompt and the tools in the session: pi-lsp declares its own on a
session's first request, writes a patch when they change (or when another writer changed
them), and sends the replayed ones, so pi 1.6 and pi-lsp can take turns on one session."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pi_lsp.agent import prompt, skills
from pi_lsp.agent.harness import Harness
from pi_lsp.agent.ignorerules import IgnoreRules
from pi_lsp.agent.prompt import PREAMBLE, system_sections
from pi_lsp.agent.retry import RetrySettings
from pi_lsp.agent.skills import Skill, find_skills, skill
from pi_lsp.agent.tools import ALL_TOOLS
from pi_lsp.context.build import build_session_context
from pi_lsp.context.replay import current_system_message, system_text
from pi_lsp.providers.anthropic import DEFERRED_PLACEHOLDER, AnthropicProvider, tool_definitions
from pi_lsp.providers.base import tool_spec
from pi_lsp.providers.registry import ModelRegistry
from pi_lsp.providers.retry import ProviderRetry
from pi_lsp.session.entries import SystemMessage, decode_message
from pi_lsp.session.tree import SessionTree
from tests.conftest import CONFORMANCE, ROOT
from tests.fake_anthropic import FakeAnthropic, text_reply
from tests.waits import CEILING_S, PROCESS_CEILING_S, until

SECTIONS = ["preamble", "tools", "rules", "project_context", "cwd"]
TOOLS = ["read", "bash", "edit", "write"]
PI16 = Path(os.environ.get("PI_LSP_PI16", "/work/scratch/pi16")) / "node_modules"


def harness(path: Path, root: Path, fake: FakeAnthropic,
            model: tuple[str, str] = ("anthropic", "claude-sonnet-4-5")) -> Harness:
    tree = SessionTree.open(str(path)) if path.exists() else \
        SessionTree.create(str(path), str(root))

    def make(_name: str) -> AnthropicProvider:
        return AnthropicProvider("test-key", base_url=fake.url,
                                 retry=ProviderRetry(max_retries=0))

    return Harness(tree, root, make, default_model=model, retry=RetrySettings(enabled=False))


def entries(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()[1:]]


def system_entries(path: Path) -> list[dict[str, Any]]:
    return [e["message"] for e in entries(path)
            if e["type"] == "message" and e["message"]["role"] == "system"]


def replayed(path: Path) -> SystemMessage:
    tree = SessionTree.open(str(path))
    context = build_session_context(tree, tree.leaf_id)
    system = current_system_message([decode_message(m) for m in context.messages])
    assert system is not None
    return system


def sent_tools(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The session's tools a request sent: the never-available placeholder that a model with
    native tool changes gets after them (anthropic.DEFERRED_PLACEHOLDER) is the wire's."""
    return [{key: value for key, value in tool.items() if key != "cache_control"}
            for tool in request.get("tools", []) if tool["name"] != DEFERRED_PLACEHOLDER["name"]]


def as_sent(declared: list[Any], request: dict[str, Any]) -> list[dict[str, Any]]:
    """Declared tools as they go to the request's Claude (strict where both ask for it)."""
    return tool_definitions([tool_spec(tool) for tool in declared],
                            ModelRegistry().get("anthropic", request["model"]))


def assert_sent_the_replay(request: dict[str, Any], path: Path) -> None:
    system = replayed(path)
    assert [block["text"] for block in request["system"]] == [system_text(system)]
    assert sent_tools(request) == as_sent(system.tools_added or [], request)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / ".pi" / "sessions").mkdir(parents=True)
    (root / "AGENTS.md").write_text("Run the tests with make test.\n")
    return root


async def test_first_request_declares_the_prompt_and_tools_and_sends_the_replay(
        workspace: Path, fake: FakeAnthropic) -> None:
    path = workspace / ".pi" / "sessions" / "s.jsonl"
    agent = harness(path, workspace, fake)
    fake.script(text_reply("one"), text_reply("two"))
    await agent.prompt("hello")
    written = entries(path)
    assert [e["message"]["role"] for e in written] == ["system", "user", "assistant"]
    declared = written[0]["message"]
    assert list(declared) == ["role", "content", "sections", "timestamp", "toolsAdded"]
    assert declared["content"] == "" and list(declared["sections"]) == SECTIONS
    assert declared["sections"]["preamble"].startswith("You are a coding agent")
    assert declared["sections"]["project_context"] == (
        "<project_context>\nProject-specific instructions and guidelines:\n\n"
        f'<project_instructions path="{workspace / "AGENTS.md"}">\n'
        "Run the tests with make test.\n\n</project_instructions>\n</project_context>")
    assert declared["sections"]["cwd"] == f"<cwd>\n{workspace}\n</cwd>"
    assert [t["name"] for t in declared["toolsAdded"]] == TOOLS
    # as pi 1.6 declares its tools: strict where the model supports it
    assert all(list(t) == ["name", "description", "parameters", "constrainedSampling"] and
               t["constrainedSampling"] == {"type": "json_schema", "strict": "prefer"}
               for t in declared["toolsAdded"])
    reply = written[2]["message"]
    # As pi 1.6: the level the reply was asked at (none set on the branch: the default).
    assert list(reply)[-1] == "thinkingLevel" and reply["thinkingLevel"] == "medium"

    await agent.prompt("again")  # nothing changed: nothing more is declared
    assert len(system_entries(path)) == 1
    first, second = fake.message_requests()
    assert first["system"] == second["system"]
    assert_sent_the_replay(second, path)


async def test_the_event_loop_runs_while_a_turn_builds_its_prompt(
        workspace: Path, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> None:
    """Built on the event loop (a tenth of a second with 1,000 skills), it held every editor
    request; it is built in a worker thread now, and the turn waits for it."""
    path = workspace / ".pi" / "sessions" / "s.jsonl"
    agent = harness(path, workspace, fake)
    fake.script(text_reply("done"))
    entered, loop_ran = threading.Event(), threading.Event()
    ran_meanwhile: list[bool] = []

    def held(root: str, trusted: bool) -> list[Skill]:
        entered.set()
        ran_meanwhile.append(loop_ran.wait(CEILING_S))  # never, were this the loop's thread
        return find_skills(root, trusted)

    monkeypatch.setattr(prompt, "find_skills", held)
    run = asyncio.create_task(agent.prompt("hi"))
    await until(entered.is_set, "the prompt being built")
    loop_ran.set()
    await run
    assert ran_meanwhile == [True]
    assert "make test" in fake.message_requests()[-1]["system"][0]["text"]


async def test_a_changed_prompt_is_patched_and_the_request_has_the_change(
        workspace: Path, fake: FakeAnthropic) -> None:
    path = workspace / ".pi" / "sessions" / "s.jsonl"
    agent = harness(path, workspace, fake)
    fake.script(text_reply("one"), text_reply("two"))
    await agent.prompt("hello")
    (workspace / "AGENTS.md").write_text("Use tabs.\n")
    await agent.prompt("again")
    patch = system_entries(path)[-1]
    assert patch == {"role": "system", "content": "", "sections": {
        "project_context": "<project_context>\nProject-specific instructions and guidelines:\n\n"
                           f'<project_instructions path="{workspace / "AGENTS.md"}">\n'
                           "Use tabs.\n\n</project_instructions>\n</project_context>"},
        "timestamp": patch["timestamp"]}
    request = fake.message_requests()[-1]
    assert "Use tabs." in request["system"][0]["text"]
    assert "make test" not in request["system"][0]["text"]
    assert_sent_the_replay(request, path)


async def test_changes_reach_a_model_that_takes_them_mid_conversation_in_place(
        workspace: Path, fake: FakeAnthropic) -> None:
    """pi 1.6 tells claude-opus-5-5 (Opus 4.8 and later) of a prompt or tool change in a
    system message where the change is, the first prompt and tools left byte for byte as they
    were so the cached prefix holds; pi-lsp sent the whole new prompt and tool list, which
    rewrote the prefix from its first byte."""
    path = workspace / ".pi" / "sessions" / "s.jsonl"
    agent = harness(path, workspace, fake, ("anthropic", "claude-opus-5-5"))
    fake.script(text_reply("one"), text_reply("two"))
    await agent.prompt("hello")
    (workspace / "AGENTS.md").write_text("Use tabs.\n")
    # as pi 1.6 writes a patch: a tool removed, which pi-lsp's next turn declares again
    agent.tree.append_message(SystemMessage(content="", timestamp=1,
                                            tools_removed=[{"name": "bash"}]))
    await agent.prompt("again")
    first, second = fake.message_requests()
    assert (second["system"], second["tools"]) == (first["system"], first["tools"])
    assert "Use tabs." not in json.dumps(second["system"])
    bash = next(t for t in first["tools"] if t["name"] == "bash")
    *_, removed, patch, effort = second["messages"]
    assert second["messages"][-5:-3] == [
        {"role": "assistant", "content": [{"type": "text", "text": "one"}]},
        {"role": "user", "content": [{"type": "text", "text": "again"}]}]
    assert removed == {"role": "system", "content": [
        {"type": "tool_removal", "tool": {"type": "tool_reference", "name": "bash"}}]}
    assert patch == {"role": "system", "content": [
        {"type": "text", "text": 'Updated system prompt section "project_context":\n\n'
                                 "<project_context>\nProject-specific instructions and "
                                 "guidelines:\n\n<project_instructions path="
                                 f'"{workspace / "AGENTS.md"}">\nUse tabs.\n\n'
                                 "</project_instructions>\n</project_context>"},
        {"type": "tool_addition", "tool": {"type": "tool_definition", "definition": bash},
         "cache_control": {"type": "ephemeral"}},  # the newest message: the cache's end
    ]}
    assert effort == {"role": "system", "content": [], "output_config": {"effort": "medium"}}


async def test_what_another_writer_changed_is_patched_back_and_nothing_else(
        workspace: Path, fake: FakeAnthropic) -> None:
    path = workspace / ".pi" / "sessions" / "s.jsonl"
    agent = harness(path, workspace, fake)
    fake.script(text_reply("one"), text_reply("two"))
    await agent.prompt("hello")
    # as pi 1.6 writes a patch: a section dropped, one of its own added, a tool removed
    agent.tree.append_message(SystemMessage(
        content="", sections={"rules": None, "skills": "<skills>\nnone\n</skills>"},
        timestamp=1, tools_removed=[{"name": "bash"}]))
    await agent.prompt("again")
    patch = system_entries(path)[-1]
    bash = next(t for t in system_entries(path)[0]["toolsAdded"] if t["name"] == "bash")
    assert list(patch["sections"]) == ["rules", "skills"] and patch["sections"]["skills"] is None
    assert patch["sections"]["rules"].startswith("<rules>\n- Use bash for file operations")
    assert patch["toolsAdded"] == [bash] and "toolsRemoved" not in patch
    assert_sent_the_replay(fake.message_requests()[-1], path)
    assert list(replayed(path).sections or {}) == ["preamble", "tools", "project_context",
                                                   "cwd", "rules"]


async def test_the_tools_are_declared_byte_for_byte_as_pi_16_declares_its_own(
        workspace: Path, fake: FakeAnthropic) -> None:
    """pi and pi-lsp compare declarations by their JSON text: with `required` after
    `properties` (pi's come before), each saw the other's four tools as changed at every handoff
    and removed and re-added them all."""
    stored = (FIXTURES / "pi16-tools.jsonl").read_text("utf-8")
    node = pi16_node()
    if node is not None:  # the stored answer is pi's
        made = subprocess.run([node, str(Path(__file__).with_name("pi16_tools.mjs")),
                               str(PI16 / "@earendil-works")],
                              capture_output=True, text=True, timeout=PROCESS_CEILING_S)
        assert made.returncode == 0, made.stderr
        assert made.stdout == stored
    path = workspace / ".pi" / "sessions" / "s.jsonl"
    agent = harness(path, workspace, fake)
    fake.script(text_reply("one"))
    await agent.prompt("hello")
    pis = ",".join(stored.splitlines())
    assert f'"toolsAdded":[{pis}]' in path.read_text("utf-8")


# 201's model, claude-opus-4-1, is gone from pi 1.6's catalog, which gives it claude-opus-5-5's
# facts: that model takes prompt and tool changes in place (test_wire_pi16 checks that shape).
# Here the whole replayed prompt is sent, as to a model that takes it whole.
WHOLE_PROMPT_MODEL = ("anthropic", "claude-sonnet-4-5")


async def test_a_pi16_session_is_patched_not_declared_again(
        workspace: Path, fake: FakeAnthropic) -> None:
    path = workspace / ".pi" / "sessions" / "s.jsonl"
    shutil.copy(CONFORMANCE / "pi16" / "201.jsonl", path)
    before = replayed(path)
    assert before.sections and before.tools_added  # pi 1.6 declared its own
    agent = harness(path, workspace, fake)
    agent.set_model(*WHOLE_PROMPT_MODEL)
    fake.script(text_reply("one"), text_reply("two"))
    await agent.prompt("hello")
    added = len(system_entries(path))
    await agent.prompt("again")
    assert len(system_entries(path)) == added  # the second turn finds its own prompt
    patch = [e for e in entries(path) if e["type"] == "message"][-5]["message"]
    assert patch["role"] == "system" and patch["content"] == ""
    # pi's tools are declared otherwise (their descriptions differ): each removed and re-added
    assert [t["name"] for t in patch["toolsRemoved"]] == [t["name"] for t in
                                                          before.tools_added]
    assert [t["name"] for t in patch["toolsAdded"]] == TOOLS
    after = replayed(path)
    # a section pi had keeps its place; the new ones follow
    assert list(after.sections or {}) == ["preamble", "tools", "cwd", "rules", "project_context"]
    assert [t["name"] for t in after.tools_added or []] == TOOLS
    for request in fake.message_requests():
        assert request["system"][0]["text"] == system_text(after)
        assert sent_tools(request) == as_sent(after.tools_added or [], request)


def pi16_node() -> str | None:
    """Node ≥ 22.19 beside an installed pi 1.6, or None."""
    node = shutil.which("node", path=str(PI16 / ".bin")) or shutil.which("node")
    if node is None or not (PI16 / "@earendil-works" / "pi-coding-agent").is_dir():
        return None
    version = subprocess.run([node, "--version"], capture_output=True, text=True,
                             timeout=PROCESS_CEILING_S).stdout
    found = re.match(r"v(\d+)\.(\d+)", version)
    return node if found and (int(found[1]), int(found[2])) >= (22, 19) else None


def pi16_eval(code: str) -> str:
    """What JavaScript module `code` prints, run by pi 1.6's Node with its package as `pi`;
    the test is skipped where pi 1.6 is not installed."""
    node = pi16_node()
    if node is None:
        pytest.skip("pi 1.6 is not installed")
    package = PI16 / "@earendil-works" / "pi-coding-agent" / "dist" / "index.js"
    made = subprocess.run([node, "--input-type=module", "-e",
                           f"const pi = await import({json.dumps(str(package))});\n{code}"],
                          capture_output=True, text=True, timeout=PROCESS_CEILING_S)
    assert made.returncode == 0, made.stderr
    return made.stdout


# What pi 1.6 replayed in the test below, for machines without it, with the workspace folder (the
# only part that changes from run to run) written as a placeholder.
STORED_REPLAY = Path(__file__).with_name("fixtures") / "pi16-replay.json"


async def test_pi16_replays_what_pi_lsp_wrote(workspace: Path, fake: FakeAnthropic) -> None:
    path = workspace / ".pi" / "sessions" / "s.jsonl"
    shutil.copy(CONFORMANCE / "pi16" / "201.jsonl", path)
    agent = harness(path, workspace, fake)
    agent.set_model(*WHOLE_PROMPT_MODEL)
    fake.script(text_reply("one"))
    await agent.prompt("hello")
    stored = json.loads(STORED_REPLAY.read_text("utf-8"))
    node = pi16_node()
    if node is None:
        pi = json.loads(json.dumps(stored).replace("{{workspace}}", str(workspace)))
    else:
        read = subprocess.run([node, str(Path(__file__).with_name("pi16_replay.mjs")),
                               str(PI16 / "@earendil-works"), str(path)],
                              capture_output=True, text=True, timeout=PROCESS_CEILING_S)
        assert read.returncode == 0, read.stderr
        pi = json.loads(read.stdout)
        # the stored answer is pi's
        assert json.loads(read.stdout.replace(str(workspace), "{{workspace}}")) == stored
    [request] = fake.message_requests()
    assert pi["system"] == request["system"][0]["text"]
    assert as_sent(pi["tools"], request) == sent_tools(request)


# pi 1.6's prompt (buildSystemPromptSections, buildSystemPrompt) for pi-lsp's tools, made by
# pi16_prompt.mjs from each fixture's "input" (run with the placeholders filled in), the folders
# then written as placeholders ({{pi}}: pi's install).
FIXTURES = Path(__file__).with_name("fixtures")


def pi16_prompt(fixture: str, names: dict[str, str]) -> dict[str, Any]:
    """pi 1.6's prompt stored in `fixture`, its placeholders filled in from `names`; checked
    to be what pi16_prompt.mjs makes where Node and pi 1.6 are installed."""
    stored = (FIXTURES / fixture).read_text("utf-8")
    for placeholder, name in names.items():
        stored = stored.replace(placeholder, name)
    pi: dict[str, Any] = json.loads(stored)
    node = pi16_node()
    if node is not None:  # the stored answer is pi's
        made = subprocess.run([node, str(Path(__file__).with_name("pi16_prompt.mjs")),
                               names["{{pi}}"], json.dumps(pi["input"])],
                              capture_output=True, text=True, timeout=PROCESS_CEILING_S)
        assert made.returncode == 0, made.stderr
        assert {"input": pi["input"], **json.loads(made.stdout)} == pi
    return pi


def test_the_system_prompt_is_pi16s(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pi-lsp's prompt had each tool's whole description, no rules, its notes under other
    words and trimmed, and a date. Now it is pi 1.6's, byte for byte, but for its own preamble
    (pi's says the model runs inside pi) and no `docs` section, which points at pi's own
    documentation (README)."""
    workspace, agent = tmp_path / "ws", tmp_path / "agent"
    workspace.mkdir()
    agent.mkdir()
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    (agent / "AGENTS.md").write_text("Answer in British English.\n")
    (workspace / "AGENTS.md").write_text("\ufeffRun the tests with make test.\n")  # a BOM: off
    (workspace / "CLAUDE.md").write_text("Not read: AGENTS.md comes first.\n")
    pi = pi16_prompt("pi16-prompt.json", {"{{workspace}}": str(workspace), "{{agent}}": str(agent),
                                          "{{pi}}": str(PI16 / "@earendil-works")})
    docs = pi["sections"].pop("docs")
    sections = system_sections(workspace, ALL_TOOLS)
    assert sections["preamble"] == PREAMBLE
    assert list(sections.items()) == list({**pi["sections"], "preamble": PREAMBLE}.items())
    assert system_text(SystemMessage(content="", sections=sections, timestamp=0)) == \
        pi["text"].replace(f"\n\n{docs}", "").replace(pi["sections"]["preamble"], PREAMBLE, 1)


def test_context_files_above_the_project_are_pi16s(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pi-lsp read no context file above the project. pi 1.6 reads one from each folder up to
    the root, outermost first, whatever the project's trust; so does pi-lsp now."""
    workspace, agent = tmp_path / "up" / "mid" / "ws", tmp_path / "agent"
    workspace.mkdir(parents=True)
    agent.mkdir()
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    (agent / "AGENTS.md").write_text("Answer in British English.\n")
    (tmp_path / "up" / "AGENTS.md").write_text("The monorepo builds with make.\n")
    (tmp_path / "up" / "mid" / "CLAUDE.md").write_text("This part is in Go.\n")
    (workspace / "AGENTS.md").write_text("Run the tests with make test.\n")
    pi = pi16_prompt("pi16-prompt-above.json", {"{{tmp}}": str(tmp_path),
                                                "{{pi}}": str(PI16 / "@earendil-works")})
    assert system_sections(workspace, ALL_TOOLS)["project_context"] == \
        pi["sections"]["project_context"]


@pytest.mark.parametrize("trusted", [True, False], ids=["trusted", "untrusted"])
def test_system_md_and_append_system_md_are_pi16s(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trusted: bool) -> None:
    """SYSTEM.md and APPEND_SYSTEM.md were not read. Now as pi 1.6's loader finds them: the
    project's `.pi/` one, only when it is trusted, over your own; SYSTEM.md takes the place of
    the preamble, tools and rules, APPEND_SYSTEM.md is added as `addendum`."""
    workspace, agent = tmp_path / "ws", tmp_path / "agent"
    (workspace / ".pi").mkdir(parents=True)
    agent.mkdir()
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    (agent / "SYSTEM.md").write_text("You are the user's own agent.\n")
    (agent / "APPEND_SYSTEM.md").write_text("\ufeffSign every answer.\n")  # a BOM: off
    (workspace / ".pi" / "SYSTEM.md").write_text("You are this project's agent.\n")
    (workspace / "AGENTS.md").write_text("Run the tests with make test.\n")
    pi = pi16_prompt(f"pi16-prompt-{'trusted' if trusted else 'untrusted'}.json",
                     {"{{workspace}}": str(workspace), "{{agent}}": str(agent),
                      "{{pi}}": str(PI16 / "@earendil-works")})
    sections = system_sections(workspace, ALL_TOOLS, trusted)
    assert list(sections.items()) == list(pi["sections"].items())
    assert system_text(SystemMessage(content="", sections=sections, timestamp=0)) == pi["text"]


def skill_file(path: Path, frontmatter: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\n{frontmatter}\n---\n# Steps\n\nDo the thing.\n")


def plant_skills(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Skills in every place pi 1.6 looks (and two it does not): the workspace, in a git
    repository, its pi folder and its HOME."""
    workspace, agent, home = tmp_path / "repo" / "ws", tmp_path / "agent", tmp_path / "home"
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    skill_file(workspace / ".pi" / "skills" / "deploy" / "SKILL.md",
               "name: deploy\ndescription: |\n  Ship it: <staging> & 'prod'.\n")
    skill_file(workspace / ".pi" / "skills" / "broken" / "SKILL.md",
               "description: Use when: never (YAML refuses it)")
    skill_file(workspace / ".agents" / "skills" / "fmt" / "SKILL.md",
               "description: \"Format the code\"  # named after its folder")
    skill_file(tmp_path / "repo" / ".agents" / "skills" / "lint" / "SKILL.md",
               "name: lint\ndescription: Lint\n  the code.")
    skill_file(tmp_path / ".agents" / "skills" / "outside" / "SKILL.md",  # above the repository
               "description: Not read.")
    skill_file(agent / "skills" / "commit.md", "description: Write the commit message.")
    skill_file(agent / "skills" / "dup" / "SKILL.md",
               "name: deploy\ndescription: The project's deploy comes first.")
    skill_file(agent / "skills" / "quiet" / "SKILL.md",
               "description: Only by its command.\ndisable-model-invocation: true")
    skill_file(agent / "skills" / "nested" / "plain.md", "description: Not a skill here.")
    skill_file(home / ".agents" / "skills" / "notes" / "extra.md", "description: Take notes.")
    skill_file(home / ".agents" / "skills" / "top.md", "description: Not a skill here.")
    skill_file(home / ".agents" / "skills" / "review" / "SKILL.md",
               "name: review\ndescription: >-\n  Review a change,\n  line by line.\n")
    return workspace, agent, home


@pytest.mark.parametrize("trusted", [True, False], ids=["trusted", "untrusted"])
def test_skills_are_pi16s(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                          trusted: bool) -> None:
    """pi 1.6's skills were not listed. Now its `skills` section is pi-lsp's too, found where
    pi finds them: a trusted project's `.pi/skills` and `.agents/skills` (up to its git
    repository's top), then yours; the first of each name, hidden ones left out."""
    workspace, agent, home = plant_skills(tmp_path)
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    monkeypatch.setenv("HOME", str(home))
    pi = pi16_prompt(f"pi16-prompt-skills-{'trusted' if trusted else 'untrusted'}.json",
                     {"{{tmp}}": str(tmp_path), "{{pi}}": str(PI16 / "@earendil-works")})
    docs = pi["sections"].pop("docs")
    sections = system_sections(workspace, ALL_TOOLS, trusted)
    assert list(sections.items()) == list({**pi["sections"], "preamble": PREAMBLE}.items())
    assert system_text(SystemMessage(content="", sections=sections, timestamp=0)) == \
        pi["text"].replace(f"\n\n{docs}", "").replace(pi["sections"]["preamble"], PREAMBLE, 1)
    assert (f"{workspace}/.pi/skills" in sections["skills"]) is trusted


# Frontmatter as pi 1.6's parseFrontmatter reads it (the `yaml` package): name, description and
# disable-model-invocation of the skill, or None when pi refuses the YAML.
PI16_FRONTMATTER = [
    ("description: Use it\n  well # a comment\nname: x", ("x", "Use it well", False)),
    ("last updated: 2024\ndescription: |\n  Keep\n  lines", ("s", "Keep\nlines\n", False)),
    ("description:\n  'Quoted on the next line'", ("s", "Quoted on the next line", False)),
    ("description: |+\n  Kept\n\n", ("s", "Kept\n\n", False)),
    ("description: Padded\u00a0\u3000", ("s", "Padded\u00a0\u3000", False)),
    ("description:\tTabbed  # note", ("s", "Tabbed", False)),
    ("other: [a, b\ndescription: Unclosed elsewhere", None),
    ("description: !note Tagged", ("s", "Tagged", False)),
    ("description: 2024-01-01", ("s", "2024-01-01", False)),
    ("description: 1_000", ("s", "1_000", False)),
    ("name: yes\ndescription: On\ndisable-model-invocation: True", ("yes", "On", True)),
    ("? {a: 1}\n: c\ndescription: Ok", ("s", "Ok", False)),
    ("m: &m {a: 1}\n*m : c\n*m : d\ndescription: Ok", ("s", "Ok", False)),
    ("? [a, [b]]\n: c\n? [a, [b]]\n: d\ndescription: Ok", ("s", "Ok", False)),
    ("x: !!set {[a], {b: 1}}\n? [description]\n: c\ndescription: Ok", ("s", "Ok", False)),
    ("a: &a x\nl: [" + ",".join(["*a"] * 99) + "]\ndescription: Ok", ("s", "Ok", False)),
    ("a: &a x\nl: [" + ",".join(["*a"] * 100) + "]\ndescription: Ok", None),  # 101 uses
    ("a: &a [x, x]\nb: &b [*a, *a, *a, *a, *a]\nc: [" + ",".join(["*b"] * 15) + "]\n"
     "description: Ok", ("s", "Ok", False)),  # 16 uses of b, times a's 6 uses: 96
    ("a: &a [x, x]\nb: &b [*a, *a, *a, *a, *a]\nc: [" + ",".join(["*b"] * 16) + "]\n"
     "description: Ok", None),  # 17 uses of b, times 6: 102
    ("e: &e []\nl: [" + ",".join(["*e"] * 300) + "]\ndescription: Ok", ("s", "Ok", False)),
    # Blank as JavaScript's trim() judges it, lone surrogates still there (pi sends them as "").
    ('description: "\\ufeff"', None),
    ('description: "\\x1f"', ("s", "\x1f", False)),
    ('description: "\\ud800"', ("s", "", False)),
    ('name: "\\ud800"\ndescription: Ok', ("", "Ok", False)),
]


@pytest.mark.parametrize(("frontmatter", "read"), PI16_FRONTMATTER)
def test_skill_frontmatter_is_read_as_pi16_reads_it(
        frontmatter: str, read: tuple[str, str, bool] | None) -> None:
    """pi-lsp's own YAML subset read these otherwise than pi 1.6's `yaml` (keys pi ignores
    refused, a comment after a continued line, a value on the next line, `|+`, spaces that are
    no YAML space stripped, tabs), refused a collection as a key, which pi makes a string, or
    loaded what pi takes for an alias bomb (its maxAliasCount, 100). A YAML 1.2 library now
    reads them, with pi's core schema and alias count. A description of U+FEFF was listed and
    one of U+001F or a lone surrogate left out: Python's strip() is not JavaScript's trim()."""
    found = skill("/skills/s/SKILL.md", f"---\n{frontmatter}\n---\n# Steps\n")
    assert (found and (found.name, found.description, found.hidden)) == read


# Values a core tag does not fit and numbers too big for Python, as pi 1.6's `yaml` reads them.
PI16_MISFIT_FRONTMATTER = [
    ("description: !!int abc", ("s", "abc", False)),
    ("description: !!float .x", ("s", ".x", False)),
    ("description: !!float 5", ("s", "5", False)),
    ("description: !!null x", ("s", "x", False)),
    ("description: !!int 0x\ndisable-model-invocation: !!bool yes", ("s", "0x", False)),
    ("description: !!bool x\ndisable-model-invocation: !!bool true", ("s", "x", True)),
    ("description: !!int ''", None),
    ("description: !!timestamp 2020-99-99", None),  # pi: a date, so no description
    ("description: Big\nsize: " + "9" * 5000, ("s", "Big", False)),
    ("description: Big\nsize: !!int -" + "9" * 5000, ("s", "Big", False)),
    ("description: " + "9" * 5000, None),  # pi: Infinity
    ("meta: !!str {a: 1}\ndescription: Ok", ("s", "Ok", False)),
    ("sizes: !!int [1, 2]\ndescription: Ok", ("s", "Ok", False)),
    ("x: !!map [a, b]\ndescription: Ok", ("s", "Ok", False)),
    ("x: !!seq {a: b}\ndescription: Ok", ("s", "Ok", False)),
    ("x: !!set [a, b]\ndescription: Ok", ("s", "Ok", False)),
    ("x: !!omap {a: 1}\ndescription: Ok", ("s", "Ok", False)),
    ("x: !!str\n  a: 1\ndescription: Ok", ("s", "Ok", False)),
    ("description: !!str {a: 1}", None),  # pi: a mapping
    ("updated: !!timestamp 2001-13-99\ndescription: Ok", ("s", "Ok", False)),
    ("description: !!timestamp 2001-02-30", None),  # pi: a date, in March
    ("x: !!timestamp abc\ndescription: Ok", None),
    ("x: !!omap [a, b]\ndescription: Ok", ("s", "Ok", False)),
    ("x: !!pairs [a, {b: 1}]\ndescription: Ok", ("s", "Ok", False)),
    ("x: !!omap [a: 1, a: 2]\ndescription: Ok", None),
    ("x: !!pairs [{a: 1, b: 2}]\ndescription: Ok", None),
]


@pytest.mark.parametrize(("frontmatter", "read"), PI16_MISFIT_FRONTMATTER)
def test_a_misfit_tag_or_huge_number_in_a_skill_neither_raises_nor_differs_from_pi16(
        frontmatter: str, read: tuple[str, str, bool] | None) -> None:
    """`!!int abc`, `!!bool x`, `!!int ''`, a bad date or an integer of over 4300 digits under
    any key raised out of the skill reader, and one such file broke every system prompt;
    `!!str {a: 1}`, `!!map [a]`, `!!omap [a, b]` or a 13th month refused the skill. pi 1.6
    reads a value its tag does not fit as a string or untagged, a huge integer as Infinity."""
    found = skill("/skills/s/SKILL.md", f"---\n{frontmatter}\n---\n# Steps\n")
    assert (found and (found.name, found.description, found.hidden)) == read


def merge_bomb(levels: int) -> str:
    """Frontmatter whose every level merges nine aliases of the one before: 589 bytes at 10."""
    return "a: &a {k: v}\n" + "".join(
        f"a{i}: &a{i}\n  !!merge <<: [{','.join([f'*a{i - 1}' if i > 1 else '*a'] * 9)}]\n"
        for i in range(1, levels)) + "name: foo\ndescription: my skill"


@pytest.mark.parametrize(("frontmatter", "read"), [
    (merge_bomb(10), ("foo", "my skill", False)),
    ("base: &b {description: Merged}\n!!merge <<: *b\nname: m", None),
    ("description: Kept\nx: {!!merge <<: 5}", ("s", "Kept", False)),
])
def test_a_skill_merges_no_keys(frontmatter: str, read: tuple[str, str, bool] | None) -> None:
    """An explicit `!!merge <<` was merged, and nested merges of aliases took exponential time
    on the server's loop (10 levels in 589 bytes: ~8 minutes). It is a plain key now, as in
    YAML 1.2's core schema, so any frontmatter reads in bounded time."""
    found = skill("/skills/s/SKILL.md", f"---\n{frontmatter}\n---\n# Steps\n")
    assert (found and (found.name, found.description, found.hidden)) == read


def test_an_escaped_emoji_in_a_skill_description_reaches_the_model(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`\\ud83d\\ude80` (🚀 as JSON escapes it) in a quoted description was two lone surrogates
    in the prompt, and every request failed to encode. It is the emoji now, and a lone
    surrogate is left out, as pi 1.6 sends it (sanitizeSurrogates)."""
    agent, home = tmp_path / "agent", tmp_path / "home"
    skill_file(agent / "skills" / "rocket" / "SKILL.md",
               'description: "Launch \\ud83d\\ude80 \\ud83d!"')
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    monkeypatch.setenv("HOME", str(home))
    section = system_sections(tmp_path, ALL_TOOLS, False)["skills"]
    assert "<description>Launch \U0001f680 !</description>" in section
    section.encode("utf-8")


def test_a_build_parses_only_the_skill_files_changed_since_the_last(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every turn and preview parsed every skill file's YAML again (600 ms with 1,000 skills).
    A file is parsed again once changed, even in place keeping its size and mtime; a trusted
    build reuses nothing an untrusted one read, and trust counts at once."""
    agent, workspace = tmp_path / "agent", tmp_path / "ws"
    for name in ("one", "two"):
        skill_file(agent / "skills" / name / "SKILL.md", f"description: Old {name}.")
    skill_file(workspace / ".pi" / "skills" / "mine" / "SKILL.md", "description: Project's.")
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr("pi_lsp.regular.SETTLED_NS", -1 << 62)  # files written now are kept too
    parsed: list[str] = []

    def counted(path: str, text: str) -> Skill | None:
        parsed.append(os.path.basename(os.path.dirname(path)))
        return skill(path, text)

    monkeypatch.setattr(skills, "skill", counted)

    def build(trusted: bool) -> list[str]:
        parsed.clear()
        return [one.description for one in find_skills(str(workspace), trusted)]

    assert (build(False), parsed) == (["Old one.", "Old two."], ["one", "two"])
    assert (build(False), parsed) == (["Old one.", "Old two."], [])
    edited = agent / "skills" / "one" / "SKILL.md"
    before = edited.stat()
    edited.write_text(edited.read_text().replace("Old", "New"))
    os.utime(edited, ns=(before.st_atime_ns, before.st_mtime_ns))
    while edited.stat().st_ctime_ns == before.st_ctime_ns:  # until the file system clock ticks
        os.utime(edited, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (edited.stat().st_size, edited.stat().st_mtime_ns) == \
        (before.st_size, before.st_mtime_ns)
    assert (build(False), parsed) == (["New one.", "Old two."], ["one"])
    assert (build(True), parsed) == (["Project's.", "New one.", "Old two."],
                                     ["mine", "one", "two"])
    assert (build(False), parsed) == (["New one.", "Old two."], [])


def pi16_skills(fixture: str, tmp_path: Path, given: dict[str, Any]) -> list[list[str]]:
    """The skills pi 1.6 found for `given` (cwd, agentDir, home, trusted), stored in `fixture`
    with `tmp_path` as a placeholder; checked to be what pi16_skills.mjs finds where Node and
    pi 1.6 are installed."""
    stored = json.loads((FIXTURES / fixture).read_text("utf-8").replace("{{tmp}}", str(tmp_path)))
    assert stored["input"] == given
    node = pi16_node()
    if node is not None:  # the stored answer is pi's
        made = subprocess.run([node, str(Path(__file__).with_name("pi16_skills.mjs")),
                               str(PI16 / "@earendil-works"), json.dumps(given)],
                              capture_output=True, text=True, timeout=PROCESS_CEILING_S)
        assert made.returncode == 0, made.stderr
        assert json.loads(made.stdout) == stored["skills"]
    skills: list[list[str]] = stored["skills"]
    return skills


def test_ignore_patterns_match_as_pi16s_ignore_package() -> None:
    """pi-lsp had no reading of ignore patterns. Its matcher ignores what pi 1.6's `ignore`
    package does (fixtures/pi16-ignore.json, its verdicts): `*`, `**`, `?`, classes, a
    leading or trailing `/`, escapes, `!` and its limit, case."""
    stored = json.loads((FIXTURES / "pi16-ignore.json").read_text("utf-8"))
    node = pi16_node()
    if node is not None:  # the stored verdicts are pi's
        made = subprocess.run([node, str(Path(__file__).with_name("pi16_ignore.mjs")),
                               str(PI16 / "@earendil-works"),
                               json.dumps({"paths": stored["paths"],
                                           "cases": [case for case, _ in stored["cases"]]})],
                              capture_output=True, text=True, timeout=PROCESS_CEILING_S)
        assert made.returncode == 0, made.stderr
        assert json.loads(made.stdout) == [ignored for _, ignored in stored["cases"]]
    for patterns, ignored in stored["cases"]:
        rules = IgnoreRules()
        rules.add(patterns)
        assert [path for path in stored["paths"] if rules.ignores(path)] == ignored, patterns


def answers_in_a_worker(code: str, **env: str) -> Any:
    """What `code` prints as JSON, run in a worker process (with `env` added): a hang fails
    the test at the ceiling instead of freezing the run."""
    made = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=PROCESS_CEILING_S,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env})
    assert made.returncode == 0, made.stderr
    return json.loads(made.stdout)


def test_hostile_ignore_patterns_are_decided_at_once() -> None:
    """Patterns from a repository's ignore files backtracked exponentially: `*a*a*...*b`
    took 8.5 s on 40 `a`s and never ended on 80, and `**` chains on a deep path too, freezing
    the daemon as it listed skills. Each is now decided in polynomial time, as before."""
    deep = "a/" + "b/" * 200 + "c/" * 200
    assert answers_in_a_worker(f"""if True:
        import json
        from pi_lsp.agent.ignorerules import IgnoreRules
        stars, chain = IgnoreRules(), IgnoreRules()
        stars.add(["*a*a*a*a*a*a*a*a*b"])
        chain.add(["a/**/b/**/c/**/d", "a/**/b/**/c/**/e/**", "**/b/**/c/**/b"])
        print(json.dumps([stars.ignores(path) for path in ["a" * 80, "a" * 80 + "b"]] +
                         [chain.ignores({deep!r} + end) for end in ["x", "d", "e/f", "e/f\\n"]]))
        """) == [False, True, False, True, True, False]


def test_hostile_backslash_runs_are_decided_at_once() -> None:
    """`ignore` reads `\\\\*` before more as any number of backslashes: a pattern of many,
    each with a `?` or `*` after it, backtracks exponentially there. pi-lsp decides at once."""
    assert answers_in_a_worker("""if True:
        import json
        from pi_lsp.agent.ignorerules import IgnoreRules
        answers = []
        for pattern in ["\\\\\\\\*?" * 40 + "y", "*\\\\\\\\*?" * 40 + "y"]:
            rules = IgnoreRules()
            rules.add([pattern])
            answers += [rules.ignores("\\\\" * 250 + end) for end in ["", "y"]]
        print(json.dumps(answers))
        """) == [False, True, False, True]


def test_hostile_skill_globs_are_decided_at_once(tmp_path: Path) -> None:
    """The `skills` setting's globs backtracked exponentially too: `!*a*a*a*a*a*a*a*a*b` never
    ended on a skills folder named with 80 `a`s. It is now decided at once, as before."""
    agent, skills = tmp_path / "agent", tmp_path / "agent" / "skills"
    for name in ["a" * 80, "a" * 80 + "b"]:
        skill_file(skills / name / "SKILL.md", "description: Listed unless left out.")
    (agent / "settings.json").write_text(json.dumps({"skills": ["!*a*a*a*a*a*a*a*a*b"]}))
    assert answers_in_a_worker(f"""if True:
        import json
        from pi_lsp.agent.skills import find_skills
        print(json.dumps([one.path for one in find_skills({str(tmp_path)!r}, False)]))
        """, PI_CODING_AGENT_DIR=str(agent), HOME=str(tmp_path / "home")) == \
        [str(skills / ("a" * 80) / "SKILL.md")]


def plant_ignored_skills(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Skills folders with ignore files in them and in folders below, and skills each rule
    hides or leaves; the workspace, pi folder and HOME."""
    workspace, agent, home = tmp_path / "ws", tmp_path / "agent", tmp_path / "home"
    mine = agent / "skills"
    for name in ["commit.md", "top-only.md", "a.tmp.md", "keep.tmp.md", "#hash.md",
                 "secret name.md", "trailing.md", "drafts/wanted/SKILL.md", "caps/SKILL.md",
                 "old/SKILL.md", "deep/a/hidden/SKILL.md", "deep/a/shown/SKILL.md",
                 "deep/hidden/SKILL.md", "group/inner/SKILL.md", "group/x/inner/SKILL.md",
                 "group/beta/SKILL.md", "group/bravo/SKILL.md", "group/!bang/SKILL.md",
                 "group/zeta/SKILL.md", "group/zeta/sub/SKILL.md", "group/x/old/SKILL.md"]:
        skill_file(mine / name, f"name: {name.removesuffix('/SKILL.md').replace('/', '-')}\n"
                                "description: Listed unless ignored.")
    (mine / ".gitignore").write_text(
        "# a comment\r\ndrafts/\n/top-only.md\n*.tmp.md\n!keep.tmp.md\n\\#hash.md\n"
        "secret\\ name.md\ntrailing.md   \nCaps/\ndeep/**/hidden/\n   \n")
    (mine / ".ignore").write_text("/old/\n")  # pi drops the `/`: `old/` at any depth
    (mine / ".fdignore").write_text("!drafts/wanted/\n")  # no way back out of an ignored folder
    (mine / "group" / ".gitignore").write_text("/inner/\nb*/\n!bravo/\n\\!bang/\n")
    (mine / "group" / "zeta" / ".gitignore").write_text("SKILL.md\n")
    agents = home / ".agents" / "skills"
    for name in ["notes/extra.md", "review/SKILL.md"]:
        skill_file(agents / name, f"name: {name.split('/')[0]}\ndescription: Agents'.")
    # At the top pi takes the `\` off `\!`: the line negates there.
    (agents / ".gitignore").write_text("*/\n\\!review/\n")
    project = workspace / ".pi" / "skills"
    skill_file(project / "deploy" / "SKILL.md", "name: deploy\ndescription: Deploy.")
    skill_file(project / "docs" / "guide" / "SKILL.md", "name: guide\ndescription: Guide.")
    (project / "docs" / ".ignore").write_text("guide\n")
    return workspace, agent, home


def test_skills_follow_ignore_files_as_pi16s(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pi 1.6 skips what `.gitignore`, `.ignore` and `.fdignore` in a skills folder (or a
    folder below, its patterns put under that folder) ignore; pi-lsp listed those skills too.
    Now it skips the same ones, as pi's `ignore` package matches the patterns."""
    workspace, agent, home = plant_ignored_skills(tmp_path)
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    monkeypatch.setenv("HOME", str(home))
    pi = pi16_skills("pi16-skills-ignored.json", tmp_path, {
        "cwd": str(workspace), "agentDir": str(agent), "home": str(home), "trusted": True})
    assert [[one.name, one.path] for one in find_skills(str(workspace), True)] == pi


def test_hostile_ignore_files_neither_hang_nor_reach_outside(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ignore files are read from folders a repository commits: a FIFO there would hang the
    prompt (pi 1.6 waits on it), a huge one take its time. pi-lsp skips a FIFO, follows a
    file's first 64 KB and 512 rules, and in a project follows no symlink out of it."""
    workspace, agent, home = tmp_path / "ws", tmp_path / "agent", tmp_path / "home"
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    monkeypatch.setenv("HOME", str(home))
    project, mine = workspace / ".pi" / "skills", agent / "skills"
    for name in ["deploy", "fifo", "huge", "late"]:
        skill_file(project / name / "SKILL.md", f"description: {name}")
    (tmp_path / "outside").write_text("deploy/\nmine/\n")
    (project / ".gitignore").symlink_to(tmp_path / "outside")
    os.mkfifo(project / "fifo" / ".gitignore")
    (project / ".ignore").write_text("huge/\n" + "never-*-matches/\n" * 100_000 + "late/\n")
    skill_file(mine / "mine" / "SKILL.md", "description: Mine.")
    (mine / ".gitignore").symlink_to(tmp_path / "outside")  # yours: followed, as pi does
    assert [one.name for one in find_skills(str(workspace), True)] == ["deploy", "fifo", "late"]


def test_ignore_rules_past_their_characters_are_not_followed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each ignore rule is read into a regular expression, its folders put before it: a deep
    folder's 512 rules were 1 MB of them, 2.3 s of the prompt. Under one skills folder pi-lsp
    follows rules of 16 K characters in all."""
    agent = tmp_path / "agent"
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ["early", "late"]:
        skill_file(agent / "skills" / name / "SKILL.md", f"description: {name}")
    (agent / "skills" / ".gitignore").write_text(
        "early/\n" + f"{'never-matches-' * 4}*/\n" * 300 + "late/\n")  # 302 rules, 17.4 K
    assert [one.name for one in find_skills(str(tmp_path), True)] == ["late"]


def plant_skill_settings(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Skills named by `skills` settings, yours and the project's (in the old object form), and
    skills its entries turn off; the workspace, pi folder and HOME."""
    workspace, agent, home = tmp_path / "ws", tmp_path / "agent", tmp_path / "home"
    for path in [workspace / ".pi" / "skills" / "deploy", workspace / ".pi" / "skills" / "commit",
                 workspace / "tools" / "tidy", workspace / "tools" / "lint",
                 agent / "skills" / "kept", agent / "skills" / "gamma", home / "extra" / "alpha",
                 home / "extra" / "old", tmp_path / "shared" / "beta", tmp_path / "shared" / "keep",
                 home / ".agents" / "skills" / "review"]:
        skill_file(path / "SKILL.md", f"description: {path.name}.")
    for path in [agent / "skills" / "commit.md", home / "extra" / "top.md",
                 home / "notes.txt"]:
        skill_file(path, f"name: {path.stem}\ndescription: {path.name}.")
    skill_file(home / "one.md", "name: one\ndescription: A file named in the setting.")
    os.mkfifo(home / "pipe.md")
    (workspace / ".pi" / "settings.json").write_text(json.dumps(
        {"skills": {"customDirectories": ["../tools", "t*", "!commit"],
                    "enableSkillCommands": False}}))
    (agent / "settings.json").write_text(json.dumps({"skills": [
        "~/extra", "../shared", " ~/one.md ", "~/notes.txt", "~/missing", "/dev/zero",
        "~/pipe.md", "!old", "!commit.md", "-../shared/keep", "!alpha", "+~/extra/alpha",
        "!kept", "+skills/kept", "!**/beta/**", "!*/review", "!ga\\mma"]}))
    return workspace, agent, home


@pytest.mark.parametrize("trusted", [True, False], ids=["trusted", "untrusted"])
def test_the_skills_setting_is_followed_as_pi16_follows_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trusted: bool) -> None:
    """The `skills` setting was not read. Now its entries are pi 1.6's: paths to skills
    folders or files (`~` your HOME, relative to pi's folder or the project's `.pi`), globs
    limiting those, `!glob`, `+path` and `-path` over them and the skills folders; the
    project's only when it is trusted. A FIFO or a device named there is no skill."""
    workspace, agent, home = plant_skill_settings(tmp_path)
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    monkeypatch.setenv("HOME", str(home))
    pi = pi16_skills(f"pi16-skills-setting-{'trusted' if trusted else 'untrusted'}.json",
                     tmp_path, {"cwd": str(workspace), "agentDir": str(agent),
                                "home": str(home), "trusted": trusted})
    assert [[one.name, one.path] for one in find_skills(str(workspace), trusted)] == pi


def test_a_long_skills_setting_reads_each_glob_once_a_build(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each `skills` glob was compiled for each name of each skill file, kept 256 at most: a
    trusted project's 1,000 `!q0*a*b*c*d*e*f` entries took 42 s a build over 300 skills. Each is
    now read once a build, and a mixed list with 300 more leaves on what pi 1.6 does."""
    workspace, agent, home = plant_skill_settings(tmp_path)
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    monkeypatch.setenv("HOME", str(home))
    settings = json.loads((agent / "settings.json").read_text())
    settings["skills"] += [f"!never-{at}*a*b*c" for at in range(300)]
    (agent / "settings.json").write_text(json.dumps(settings))
    read: list[str] = []
    glob = skills._glob

    def counted(pattern: str) -> Any:
        read.append(pattern)
        return glob(pattern)

    monkeypatch.setattr(skills, "_glob", counted)
    pi = pi16_skills("pi16-skills-setting-trusted.json", tmp_path, {
        "cwd": str(workspace), "agentDir": str(agent), "home": str(home), "trusted": True})
    assert [[one.name, one.path] for one in find_skills(str(workspace), True)] == pi
    assert len(read) == len(set(read)) > 300


@pytest.mark.parametrize("filler", [["!never"] * 255, ["!never" + "-" * (16 * 1024 - 12)]],
                         ids=["entries", "characters"])
def test_a_projects_skills_setting_is_followed_for_256_entries_of_16k_characters(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        filler: list[str]) -> None:
    """A trusted project's `skills` setting was read whole: its globs are matched against each
    name of each skill file, and 3,000 of them (65 KB) took 511 s a build. pi-lsp follows 256
    entries of 16 K characters in all and says, once, what it drops."""
    workspace = tmp_path / "ws"
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in ["early", "late", "later"]:
        skill_file(workspace / ".pi" / "skills" / name / "SKILL.md", f"description: {name}")
    settings = workspace / ".pi" / "settings.json"
    settings.write_text(json.dumps({"skills": ["!early", *filler, "!late", "!later"]}))
    with caplog.at_level(logging.WARNING, logger=skills.__name__):
        assert [one.name for one in find_skills(str(workspace), True)] == ["late", "later"]
    assert [record.getMessage() for record in caplog.records] == [
        f"{settings}: skills entries past 256, or 16384 characters, not followed: "
        "2 from '!late' on"]


def test_a_folder_the_skills_setting_names_again_is_walked_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each path entry of the `skills` setting was walked, also one naming a folder named
    before (`../docs`, `../docs/.`): 248 such entries over a 4,000-file folder took 4.7 s a
    build. A folder is now walked once a build, giving the same skills."""
    workspace = tmp_path / "ws"
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    skill_file(workspace / "docs" / "guide" / "SKILL.md", "description: Guide.")
    (workspace / ".pi").mkdir()
    (workspace / ".pi" / "settings.json").write_text(json.dumps(
        {"skills": ["../docs", "../docs/.", " ../docs/", "../docs/guide/../"]}))
    walked: list[str] = []

    class CountedWalk(skills._Walk):
        def files(self, folder: str, depth: int = 0) -> Iterator[str]:
            walked.append(folder)
            return super().files(folder, depth)

    monkeypatch.setattr(skills, "_Walk", CountedWalk)
    assert [one.path for one in find_skills(str(workspace), True)] == \
        [str(workspace / "docs" / "guide" / "SKILL.md")]
    assert walked.count(str(workspace / "docs")) == 1


def test_a_projects_skills_setting_names_nothing_outside_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A trusted project's `skills` setting could name any file for its name and description
    to reach the model (pi 1.6 loads them). pi-lsp reads its entries within the project only,
    as it reads the project's skills folders."""
    workspace, agent = tmp_path / "ws", tmp_path / "agent"
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    skill_file(tmp_path / "outside" / "SKILL.md", "description: Outside.")
    skill_file(workspace / "inside" / "SKILL.md", "description: Inside.")
    (workspace / "linked").symlink_to(tmp_path / "outside")
    (workspace / ".pi").mkdir()
    (workspace / ".pi" / "settings.json").write_text(json.dumps(
        {"skills": ["../../outside", "../linked", "../inside", str(tmp_path / "outside")]}))
    assert [one.name for one in find_skills(str(workspace), True)] == ["inside"]
