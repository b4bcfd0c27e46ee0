"""Every conformance file's request body, on each wire pi-lsp speaks, held to the one pi 1.6
itself sends (tests/pi16_wire.mjs: pi's context, the level a resumed session gets, convertToLlm
and pi-ai's own provider, the body caught before sending).

The bodies are stored for machines without pi 1.6; where it is installed they are made again
and checked against the stored ones. Each body is also made for a model without image input
(`--text-only`), whose images pi-ai turns into notes. Compared less what pi-lsp leaves
different on purpose: requests the APIs refuse (results of calls not sent), a branch summary's
wording, pi's beta features, and the prompt and tools where each agent sends its own (the
session replays none)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import msgspec
import pytest

from pi_lsp.agent.prompt import agent_setup
from pi_lsp.agent.tools import ALL_TOOLS
from pi_lsp.context.convert import BRANCH_SUMMARY_PREFIX
from pi_lsp.context.layers import AgentSetup, UnsendableToolError, build_layer
from pi_lsp.context.messages import decode_path
from pi_lsp.context.replay import current_system_message
from pi_lsp.providers.models_file import ModelsFileError, load_models
from pi_lsp.providers.registry import (
    ANTHROPIC_API,
    CHAT_API,
    RESPONSES_API,
    Compat,
    ModelInfo,
    ModelRegistry,
)
from pi_lsp.providers.wire import request_params
from pi_lsp.session.entries import SystemMessage, UserMessage
from pi_lsp.session.tree import SessionTree
from tests.conftest import CONFORMANCE, conformance_files
from tests.test_system_messages import PI16, pi16_eval, pi16_node
from tests.waits import PROCESS_CEILING_S

STORED_BODIES = Path(__file__).with_name("fixtures") / "pi16-bodies.json"
MODELS = {ANTHROPIC_API: ("anthropic", "claude-sonnet-4-5"), RESPONSES_API: ("openai", "gpt-5"),
          CHAT_API: ("openai", "gpt-5")}
# A Claude that thinks adaptively at an effort and whose API hides thinking unless asked.
NEWER = "claude-opus-4-7"
# pi 1.6's default model: effort set mid-conversation, native tool changes.
DEFAULT = "claude-opus-5-5"
# pi 1.6's OpenAI default: tools in additional_tools items, efforts in configuration_update ones.
OPENAI_DEFAULT = "gpt-6.2-sol"
# A session pi 1.6 wrote on it (`pi -p` against the fake, a second run with fewer tools, another
# level and an appended prompt) up to its last request, and the body `pi -p` sent for it.
GPT_SOL_SESSION = STORED_BODIES.with_name("pi16-gpt-sol.jsonl")
GPT_SOL_REQUEST = STORED_BODIES.with_name("pi16-gpt-sol-request.json")
LEFT_OUT_BETA = "message-threads-2026-08-12"
FINE_GRAINED_BETA = "fine-grained-tool-streaming-2025-05-14"
BRANCH_SUMMARY_OPENINGS = ("The following is a summary of a branch", BRANCH_SUMMARY_PREFIX)
MADE_UP_ID = re.compile(r"msg_pi_\d+(_\d+)?")
# In the stored bodies' keys ("API text-only FILE"): the body for a model without image input.
TEXT_ONLY = "text-only"


def _files() -> list[Path]:
    return [*conformance_files(), *sorted((CONFORMANCE / "pi16").glob("*.jsonl"))]


@pytest.fixture(scope="module")
def pi_bodies() -> dict[str, Any]:
    stored: dict[str, Any] = json.loads(STORED_BODIES.read_text("utf-8"))
    node = pi16_node()
    if node is not None:
        runs = [(api, None, text_only) for api in MODELS for text_only in (False, True)]
        for api, model_id, text_only in [*runs, (ANTHROPIC_API, NEWER, False),
                                         (ANTHROPIC_API, DEFAULT, False),
                                         (RESPONSES_API, OPENAI_DEFAULT, False)]:
            run = subprocess.run([node, str(Path(__file__).with_name("pi16_wire.mjs")),
                                  str(PI16 / "@earendil-works"), api,
                                  *(["--model", model_id] if model_id else []),
                                  *(["--text-only"] if text_only else []),
                                  *map(str, _files())],
                                 capture_output=True, text=True, timeout=PROCESS_CEILING_S)
            assert run.returncode == 0, run.stderr
            for file, body in json.loads(run.stdout).items():
                key = _key(api, text_only, Path(file), model_id)
                assert body == stored[key], key  # the stored bodies are pi's
    return stored


def _key(api: str, text_only: bool, file: Path, model_id: str | None = None) -> str:
    return " ".join([api, *([model_id] if model_id else []), *([TEXT_ONLY] if text_only else []),
                     str(file.relative_to(CONFORMANCE))])


def _ours(file: Path, api: str, text_only: bool = False, model_id: str | None = None,
          model: tuple[str, str] | None = None, facts: dict[str, Any] | None = None
          ) -> tuple[dict[str, Any], bool]:
    """pi-lsp's body at the file's leaf, and whether the session replays a prompt. Given the
    session's own prompt and tools, pi-lsp's agent patches nothing, as pi's would not.
    `text_only`: for the model without image input; `model_id`: another of the API's models;
    `model`: another provider's, with `facts` laid over what pi-lsp knows of it."""
    names = model or ((MODELS[api][0], model_id) if model_id else MODELS[api])
    tree = SessionTree.open(str(file))
    replayed = current_system_message(list(decode_path(tree, tree.leaf_id).messages))
    registry = ModelRegistry()
    sections = {name: text for name, text in (replayed.sections or {}).items()
                if text is not None} if replayed is not None else {}
    tools = list(replayed.tools_added or []) if replayed is not None else []
    # Run on the model pi 1.6 sent it to, as `run --model` does: the level is clamped to it.
    agent = AgentSetup(registry, names, "medium", sections, tools, run_model=names)
    request = build_layer(tree, tree.leaf_id, "request", agent).request
    assert request is not None
    made = msgspec.structs.replace(registry.get(*names), **{"api": api, **(facts or {})})
    if text_only:
        made = msgspec.structs.replace(made, input=["text"])
    return request_params(msgspec.structs.replace(request, model=made)), replayed is not None


def _called_first(items: list[dict[str, Any]], calls: Any, answers: Any) -> list[dict[str, Any]]:
    """`items` less the answers to calls not among the items before them: a result whose call
    a compaction cut off (106, pi16/202), which pi 1.6 sends and pi-lsp leaves out."""
    called: set[str] = set()
    kept = []
    for item in items:
        called |= calls(item)
        answered = answers(item)
        if answered is not None and answered not in called:
            continue
        kept.append(item)
    return kept


def _anthropic(body: dict[str, Any], pi: bool) -> dict[str, Any]:
    body["betas"] = [beta for beta in body.get("betas", []) if beta != LEFT_OUT_BETA]
    for tool in body.get("tools", []):
        tool.pop("eager_input_streaming", None)
    if pi:  # a turn's blocks, one after the other
        blocks = [(n, block) for n, message in enumerate(body["messages"])
                  for block in (message["content"] if isinstance(message["content"], list)
                                else [])]
        kept = _called_first(
            blocks, lambda b: {b[1]["id"]} if b[1].get("type") == "tool_use" else set(),
            lambda b: b[1]["tool_use_id"] if b[1].get("type") == "tool_result" else None)
        messages = []
        for n, message in enumerate(body["messages"]):
            content = message["content"]
            if isinstance(content, list) and content:  # pi's effort markers have none
                content = [block for at, block in kept if at == n]
                if not content:
                    continue
            messages.append({**message, "content": content})
        body["messages"] = messages
    return body


def _responses(body: dict[str, Any], pi: bool) -> dict[str, Any]:
    if pi:
        body["input"] = _called_first(
            body["input"], lambda i: {i["call_id"]} if i.get("type") == "function_call" else set(),
            lambda i: i["call_id"] if i.get("type") == "function_call_output" else None)
    # pi numbers made-up ids by the messages sent, results of calls not sent among them.
    numbers: dict[str, str] = {}
    for item in body["input"]:
        if MADE_UP_ID.fullmatch(str(item.get("id"))):
            item["id"] = numbers.setdefault(item["id"], f"msg_pi_#{len(numbers)}")
    return body


def _chat(body: dict[str, Any], pi: bool) -> dict[str, Any]:
    if pi:
        body["messages"] = _called_first(
            body["messages"], lambda m: {c["id"] for c in m.get("tool_calls", [])},
            lambda m: m["tool_call_id"] if m["role"] == "tool" else None)
    return body


def _comparable(body: dict[str, Any], api: str, replayed: bool, pi: bool) -> dict[str, Any]:
    body = json.loads(json.dumps(body))
    body.pop("stream", None)
    if not replayed:  # each agent's own prompt and tools
        body.pop("system", None)
        body.pop("tools", None)
        key = "messages" if api != RESPONSES_API else "input"
        if api != ANTHROPIC_API and body[key] and body[key][0].get("role") in ("system",
                                                                                "developer"):
            body[key] = body[key][1:]
    body = {ANTHROPIC_API: _anthropic, RESPONSES_API: _responses, CHAT_API: _chat}[api](body, pi)
    return _without_summary_wording(body)


def _without_summary_wording(value: Any) -> Any:
    """`value` with each branch summary's text, whose wording is pi-lsp's own, as one mark."""
    if isinstance(value, str):
        return "(a branch summary)" if value.startswith(BRANCH_SUMMARY_OPENINGS) else value
    if isinstance(value, dict):
        return {key: _without_summary_wording(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_without_summary_wording(item) for item in value]
    return value


def _assert_bodies_match(pi_bodies: dict[str, Any], api: str, text_only: bool = False,
                         model_id: str | None = None) -> None:
    """pi-lsp's body for each conformance file is pi 1.6's, for at least ten files; a file pi
    makes no body for (a reply's signature it cannot parse, pi-lsp skips it) is not compared."""
    compared = 0
    for file in _files():
        pi = pi_bodies[_key(api, text_only, file, model_id)]
        if pi is None:
            continue
        ours, replayed = _ours(file, api, text_only, model_id)
        assert _comparable(ours, api, replayed, pi=False) == \
            _comparable(pi, api, replayed, pi=True), str(file.relative_to(CONFORMANCE))
        compared += 1
    assert compared >= 10


@pytest.mark.parametrize("text_only", [False, True], ids=["images", TEXT_ONLY])
@pytest.mark.parametrize("api", list(MODELS))
def test_every_conformance_body_is_the_one_pi_16_sends(api: str, text_only: bool,
                                                       pi_bodies: dict[str, Any]) -> None:
    _assert_bodies_match(pi_bodies, api, text_only)


def test_a_newer_claudes_body_is_the_one_pi_16_sends(pi_bodies: dict[str, Any]) -> None:
    """claude-opus-4-7, which pi-lsp's catalog lacked: pi 1.6 asks it to think adaptively at
    an effort (forceAdaptiveThinking), where pi-lsp sent a thinking budget it refuses."""
    _assert_bodies_match(pi_bodies, ANTHROPIC_API, model_id=NEWER)


def test_pi_16s_default_models_body_is_the_one_pi_16_sends(pi_bodies: dict[str, Any]) -> None:
    """claude-opus-5-5, on which pi 1.6 starts: each reply's effort in a system message before
    it and a fixed top-level effort, block binding, pi's betas and the deferred placeholder tool
    (pi-lsp sent the effort at the top level and none of the rest). A prompt or tool change
    mid-way is a system message in place, the first prompt and tools left as they were, so the
    cached prefix holds (pi-lsp folded every change into `system` and `tools`)."""
    _assert_bodies_match(pi_bodies, ANTHROPIC_API, model_id=DEFAULT)


def test_pi_16s_openai_default_models_body_is_the_one_pi_16_sends(
        pi_bodies: dict[str, Any]) -> None:
    """gpt-6.2-sol, on which pi 1.6 starts with only OPENAI_API_KEY: the tools in an
    `additional_tools` item at the head of the input (none at the top level), the effort in a
    `configuration_update` item before each reply of its own and at the end, `reasoning.effort`
    fixed at medium. pi-lsp sent top-level `tools` and the effort in `reasoning`."""
    _assert_bodies_match(pi_bodies, RESPONSES_API, model_id=OPENAI_DEFAULT)


def _ours_for(file: Path, model: tuple[str, str], registry: ModelRegistry | None = None
              ) -> dict[str, Any]:
    """pi-lsp's body at the file's leaf for `model` (of `registry`), given the session's own
    prompt and tools."""
    tree = SessionTree.open(str(file))
    replayed = current_system_message(list(decode_path(tree, tree.leaf_id).messages))
    assert replayed is not None
    sections = {name: text for name, text in (replayed.sections or {}).items()
                if text is not None}
    agent = AgentSetup(registry or ModelRegistry(), model, "medium", sections,
                       list(replayed.tools_added or []), run_model=model)
    request = build_layer(tree, tree.leaf_id, "request", agent).request
    assert request is not None
    return request_params(request)


@pytest.mark.parametrize(("session", "body"), [
    (GPT_SOL_SESSION, GPT_SOL_REQUEST),
    (GPT_SOL_SESSION.with_name("pi16-gpt-sol-changes.jsonl"),
     GPT_SOL_SESSION.with_name("pi16-gpt-sol-changes.json"))], ids=["pi-p", "changes"])
def test_a_gpt_sol_session_is_sent_as_pi_16_sends_it(session: Path, body: Path) -> None:
    """pi 1.6's own session on gpt-6.2-sol, at the request `pi -p` sent for its second run
    ("pi-p"), and one with more changes ("changes": a prompt and tool change while a call waits
    for its result, held until after the results; a tool added later, a redefinition and a tool
    declared again, each `additional_tools` item after the first led by pi's incremental notice
    naming the tools still taken away). Each earlier reply's effort (`providerThinkingLevel`) is
    in a `configuration_update` before it, the first `additional_tools` item stays as it was so
    the cached prefix holds. The stored bodies are pi-ai 1.6's builder's (checked where it is
    installed); pi-p's is also the one `pi -p` sent."""
    sent = json.loads(body.read_text("utf-8"))
    node = pi16_node()
    if node is not None:
        run = subprocess.run([node, str(Path(__file__).with_name("pi16_wire.mjs")),
                              str(PI16 / "@earendil-works"), RESPONSES_API, "--model",
                              OPENAI_DEFAULT, str(session)],
                             capture_output=True, text=True, timeout=PROCESS_CEILING_S)
        assert run.returncode == 0, run.stderr
        built = json.loads(run.stdout)[str(session)]
        built.pop("stream")
        assert built == sent  # the stored body is pi-ai's builder's
    assert json.dumps(_ours_for(session, ("openai", OPENAI_DEFAULT))) == \
        json.dumps(sent)  # byte for byte, key order too: the cached prefix


STORED_STRICT_TOOLS = STORED_BODIES.with_name("pi16-strict-tools.json")


@pytest.mark.parametrize("api", list(MODELS))
def test_pi_lsps_tools_go_strict_as_pi_16_sends_its_own(api: str, tmp_path: Path) -> None:
    """pi 1.6 declares its tools with `constrainedSampling` ("prefer") and sends them strict to
    every Claude of its catalog and to GPT-5: every property required, an optional one
    nullable, no extra properties. pi-lsp declared the same tools without it and sent them
    loose. pi's tools are made by pi-ai 1.6 for a session declaring pi-lsp's (stored for
    machines without it)."""
    path = tmp_path / "s.jsonl"
    tree = SessionTree.create(str(path), str(tmp_path))
    setup = agent_setup(tmp_path, ALL_TOOLS, ModelRegistry(), MODELS[api], "medium",
                        trusted=False)
    tree.append_message(SystemMessage(content="", sections=setup.sections,
                                      tools_added=setup.tools, timestamp=1))
    tree.append_message(UserMessage(content="hi", timestamp=2))
    pi_tools = json.loads(STORED_STRICT_TOOLS.read_text("utf-8"))[api]
    node = pi16_node()
    if node is not None:
        run = subprocess.run([node, str(Path(__file__).with_name("pi16_wire.mjs")),
                              str(PI16 / "@earendil-works"), api, str(path)],
                             capture_output=True, text=True, timeout=PROCESS_CEILING_S)
        assert run.returncode == 0, run.stderr
        # the stored are pi's, key order too
        assert json.dumps(json.loads(run.stdout)[str(path)]["tools"]) == json.dumps(pi_tools)
    opened = SessionTree.open(str(path))
    request = build_layer(opened, opened.leaf_id, "request", setup).request
    assert request is not None
    ours = request_params(msgspec.structs.replace(
        request, model=msgspec.structs.replace(ModelRegistry().get(*MODELS[api]), api=api)))
    assert json.dumps(ours["tools"]) == json.dumps(
        [{key: value for key, value in tool.items() if key != "eager_input_streaming"}
         for tool in pi_tools])  # byte for byte, key order too: the cached prefix


STORED_LONG_CACHE = STORED_BODIES.with_name("pi16-long-cache.json")
LONG_CACHE_FILE = CONFORMANCE / "pi16" / "201.jsonl"


@pytest.mark.parametrize(("api", "model_id"), [(ANTHROPIC_API, None), (RESPONSES_API, None),
                                               (CHAT_API, None), (RESPONSES_API, OPENAI_DEFAULT)])
def test_a_long_cache_retention_is_sent_as_pi_16_sends_it(
        api: str, model_id: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """PI_CACHE_RETENTION=long was not honoured: pi 1.6 marks Anthropic's cache breakpoints
    `ttl: "1h"`, asks OpenAI for `prompt_cache_retention: "24h"` (GPT-6.2 Sol, which sets the
    cache in `prompt_cache_options`, for `ttl: "30m"`). pi's bodies are pi-ai 1.6's builder's
    with the variable set (stored for machines without it)."""
    key = " ".join([api, *([model_id] if model_id else [])])
    pi = json.loads(STORED_LONG_CACHE.read_text("utf-8"))[key]
    node = pi16_node()
    if node is not None:
        run = subprocess.run([node, str(Path(__file__).with_name("pi16_wire.mjs")),
                              str(PI16 / "@earendil-works"), api,
                              *(["--model", model_id] if model_id else []),
                              str(LONG_CACHE_FILE)],
                             capture_output=True, text=True, timeout=PROCESS_CEILING_S,
                             env={**os.environ, "PI_CACHE_RETENTION": "long"})
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout)[str(LONG_CACHE_FILE)] == pi  # the stored body is pi's
    monkeypatch.setenv("PI_CACHE_RETENTION", "long")
    ours, replayed = _ours(LONG_CACHE_FILE, api, model_id=model_id)
    assert _comparable(ours, api, replayed, pi=False) == _comparable(pi, api, replayed, pi=True)


STORED_OPENROUTER_CLAUDE = STORED_BODIES.with_name("pi16-openrouter-claude.json")
OPENROUTER_CLAUDE = ("openrouter", "anthropic/claude-sonnet-4.5")
# pi 1.6's catalog facts for it, which pi-lsp takes from a models.json (it has no OpenRouter
# catalog); its catalog sends it to OpenRouter's Anthropic API, a models.json to Chat Completions.
OPENROUTER_CLAUDE_FACTS = {"context_window": 1_000_000, "max_tokens": 64000,
                           "input": ["text", "image"], "reasoning": True, "api": CHAT_API}
LONG = "long"  # in the stored bodies' keys: made with PI_CACHE_RETENTION=long


def _pi_openrouter_claude(files: list[Path], long: bool) -> dict[str, Any]:
    """pi-ai 1.6's Chat Completions bodies for OPENROUTER_CLAUDE at each file's leaf."""
    node = pi16_node()
    assert node is not None
    run = subprocess.run([node, str(Path(__file__).with_name("pi16_wire.mjs")),
                          str(PI16 / "@earendil-works"), CHAT_API, "--provider",
                          OPENROUTER_CLAUDE[0], "--model", OPENROUTER_CLAUDE[1], *map(str, files)],
                         capture_output=True, text=True, timeout=PROCESS_CEILING_S,
                         env={**os.environ, **({"PI_CACHE_RETENTION": "long"} if long else {})})
    assert run.returncode == 0, run.stderr
    return {" ".join([*([LONG] if long else []), str(Path(file).relative_to(CONFORMANCE))]): body
            for file, body in json.loads(run.stdout).items()}


@pytest.mark.parametrize("long", [False, True], ids=["short", LONG])
def test_an_openrouter_claude_on_chat_completions_is_sent_as_pi_16_sends_it(
        long: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenRouter's `anthropic/*` models on Chat Completions: pi 1.6 marks the system prompt,
    the last tool and the newest message's last text with Anthropic's `cache_control`
    (`ttl: "1h"` with PI_CACHE_RETENTION=long), as OpenRouter passes them on to Anthropic; pi-lsp
    sent none, so nothing was cached. The stored bodies are pi-ai 1.6's builder's (made again
    where it is installed)."""
    pi = json.loads(STORED_OPENROUTER_CLAUDE.read_text("utf-8"))
    files = _files() if not long else [LONG_CACHE_FILE]
    if pi16_node() is not None:
        made = _pi_openrouter_claude(files, long)
        assert made == {key: pi[key] for key in made}  # the stored bodies are pi's
    if long:
        monkeypatch.setenv("PI_CACHE_RETENTION", "long")
    compared = 0
    for file in files:
        body = pi[" ".join([*([LONG] if long else []), str(file.relative_to(CONFORMANCE))])]
        if body is None:
            continue
        ours, replayed = _ours(file, CHAT_API, model=OPENROUTER_CLAUDE,
                               facts=OPENROUTER_CLAUDE_FACTS)
        assert _comparable(ours, CHAT_API, replayed, pi=False) == \
            _comparable(body, CHAT_API, replayed, pi=True), str(file.relative_to(CONFORMANCE))
        compared += 1
    assert compared >= (1 if long else 10)


def _stored_pi_bodies(stored_file: Path, folder: Path, runs: list[tuple[str, str | None]],
                      text_only: bool = False) -> dict[str, Any]:
    """The bodies stored in `stored_file` for each session in `folder` on each run (API and
    model; `text_only`: the model without image input), checked against pi 1.6's own where it
    is installed."""
    stored: dict[str, Any] = json.loads(stored_file.read_text("utf-8"))
    node = pi16_node()
    if node is not None:
        for api, model_id in runs:
            run = subprocess.run([node, str(Path(__file__).with_name("pi16_wire.mjs")),
                                  str(PI16 / "@earendil-works"), api,
                                  *(["--model", model_id] if model_id else []),
                                  *(["--text-only"] if text_only else []),
                                  *map(str, sorted(folder.glob("*.jsonl")))],
                                 capture_output=True, text=True, timeout=PROCESS_CEILING_S)
            assert run.returncode == 0, run.stderr
            for file, body in json.loads(run.stdout).items():
                key = _run_key(api, model_id, Path(file), text_only)
                assert body == stored[key], key  # the stored bodies are pi's
    return stored


def _run_key(api: str, model_id: str | None, file: Path, text_only: bool = False) -> str:
    return " ".join([api, *([model_id] if model_id else []), *([TEXT_ONLY] if text_only else []),
                     file.name])


def _pi16_wire(api: str, files: list[Path], *options: str) -> dict[str, Any]:
    """pi 1.6's body on `api` for each of `files` (by name), with pi16_wire.mjs's `options`;
    none where pi 1.6 is not installed."""
    node = pi16_node()
    if node is None:
        return {}
    run = subprocess.run([node, str(Path(__file__).with_name("pi16_wire.mjs")),
                          str(PI16 / "@earendil-works"), api, *options, *map(str, files)],
                         capture_output=True, text=True, timeout=PROCESS_CEILING_S)
    assert run.returncode == 0, run.stderr
    return {Path(file).name: body for file, body in json.loads(run.stdout).items()}


def _stored_pi16_wire(stored_file: Path, api: str, files: list[Path], *options: str
                      ) -> dict[str, Any]:
    """The bodies stored in `stored_file` by session name, checked against `_pi16_wire`'s for
    the same `files` and `options` where pi 1.6 is installed."""
    stored: dict[str, Any] = json.loads(stored_file.read_text("utf-8"))
    for name, body in _pi16_wire(api, files, *options).items():
        assert body == stored[name], name  # the stored bodies are pi's
    return stored


def _with_compat(model: ModelInfo, laid: dict[str, Any], **changes: Any) -> ModelInfo:
    """`model` with `laid` over its compat, as a models.json `compat` lays it."""
    compat = msgspec.convert({**msgspec.to_builtins(model.compat), **laid}, Compat)
    return msgspec.structs.replace(model, compat=compat, **changes)


def _assert_sent_as_pi_sends(file: Path, api: str, model_id: str | None,
                             stored: dict[str, Any], text_only: bool = False) -> None:
    ours, replayed = _ours(file, api, text_only, model_id=model_id)
    pi = stored[_run_key(api, model_id, file, text_only)]
    assert _comparable(ours, api, replayed, pi=False) == _comparable(pi, api, replayed, pi=True)


# Hand-edited sessions, each with one message field of another type (found by a differential
# fuzz against pi 1.6), and the bodies pi 1.6 sends for them (stored for machines without it).
ODD_FIELDS = STORED_BODIES.with_name("pi16-odd-fields")
STORED_ODD_FIELDS = STORED_BODIES.with_name("pi16-odd-fields.json")
ODD_FIELD_RUNS = [(ANTHROPIC_API, None), (RESPONSES_API, None), (CHAT_API, None),
                  (ANTHROPIC_API, DEFAULT), (RESPONSES_API, OPENAI_DEFAULT)]


@pytest.fixture(scope="module")
def pi_odd_field_bodies() -> dict[str, Any]:
    return _stored_pi_bodies(STORED_ODD_FIELDS, ODD_FIELDS, ODD_FIELD_RUNS)


@pytest.mark.parametrize(("api", "model_id"), ODD_FIELD_RUNS,
                         ids=[" ".join(filter(None, run)) for run in ODD_FIELD_RUNS])
@pytest.mark.parametrize("name", sorted(path.name for path in ODD_FIELDS.glob("*.jsonl")))
def test_a_message_with_a_field_of_another_type_is_sent_as_pi_16_sends_it(
        name: str, api: str, model_id: str | None, pi_odd_field_bodies: dict[str, Any]) -> None:
    """A reply whose providerThinkingLevel, thinkingLevel, errorMessage, responseModel or
    diagnostics was of another type, or a tool result whose toolName or isError was or was
    missing, was left out of the request (a left-out result replaced by a made-up "No result
    provided" error); pi 1.6 sends it, using isError, toolName and (to gpt-6.2-sol)
    providerThinkingLevel as they are (a missing isError left out). Tool-call arguments that
    are no object (`[]`, `5`, a text) were sent as `{}`; pi 1.6 sends them as written (null
    as `{}` to Anthropic, `"null"` to OpenAI)."""
    _assert_sent_as_pi_sends(ODD_FIELDS / name, api, model_id, pi_odd_field_bodies)


# Sessions whose Responses tool call has the `namespace` the server sent it with, a reply of
# gpt-5's and one of gpt-6.2-sol's, and the bodies pi 1.6 sends for them.
NAMESPACES = STORED_BODIES.with_name("pi16-namespaces")
STORED_NAMESPACES = STORED_BODIES.with_name("pi16-namespaces.json")
NAMESPACE_RUNS = [(RESPONSES_API, None), (RESPONSES_API, OPENAI_DEFAULT), (ANTHROPIC_API, None),
                  (CHAT_API, None)]


@pytest.fixture(scope="module")
def pi_namespace_bodies() -> dict[str, Any]:
    return _stored_pi_bodies(STORED_NAMESPACES, NAMESPACES, NAMESPACE_RUNS)


@pytest.mark.parametrize(("api", "model_id"), NAMESPACE_RUNS,
                         ids=[" ".join(filter(None, run)) for run in NAMESPACE_RUNS])
@pytest.mark.parametrize("name", sorted(path.name for path in NAMESPACES.glob("*.jsonl")))
def test_a_tool_calls_namespace_goes_back_as_pi_16_sends_it(
        name: str, api: str, model_id: str | None, pi_namespace_bodies: dict[str, Any]) -> None:
    """pi 1.6 sends a Responses tool call's `namespace` back to the model that made it (with
    another model, or another API, it leaves it out); pi-lsp dropped it on reading."""
    _assert_sent_as_pi_sends(NAMESPACES / name, api, model_id, pi_namespace_bodies)


# Sessions whose first system message takes tools away (with tools added or none, one adding
# tools later), and the bodies pi 1.6 sends for them.
LEAD_REMOVALS = STORED_BODIES.with_name("pi16-lead-removals")
STORED_LEAD_REMOVALS = STORED_BODIES.with_name("pi16-lead-removals.json")
LEAD_REMOVAL_RUNS = [(RESPONSES_API, OPENAI_DEFAULT), (RESPONSES_API, None),
                     (ANTHROPIC_API, None), (CHAT_API, None)]


@pytest.fixture(scope="module")
def pi_lead_removal_bodies() -> dict[str, Any]:
    return _stored_pi_bodies(STORED_LEAD_REMOVALS, LEAD_REMOVALS, LEAD_REMOVAL_RUNS)


@pytest.mark.parametrize(("api", "model_id"), LEAD_REMOVAL_RUNS,
                         ids=[" ".join(filter(None, run)) for run in LEAD_REMOVAL_RUNS])
@pytest.mark.parametrize("name", sorted(path.name for path in LEAD_REMOVALS.glob("*.jsonl")))
def test_tools_the_first_system_message_takes_away_are_named_as_pi_16_names_them(
        name: str, api: str, model_id: str | None, pi_lead_removal_bodies: dict[str, Any]
        ) -> None:
    """gpt-6.2-sol (tool changes in place): pi 1.6 follows the first system message's prompt
    with its notice of the tools it takes away ("The following tools are no longer
    available…"), and names them in a later tools item's "Still unavailable"; pi-lsp said
    it only for later system messages."""
    _assert_sent_as_pi_sends(LEAD_REMOVALS / name, api, model_id, pi_lead_removal_bodies)


# Hand-edited sessions whose system message holds a field of another shape (found by a
# differential fuzz against pi 1.6), and the bodies pi 1.6 sends for them (null: it fails).
ODD_SYSTEMS = STORED_BODIES.with_name("pi16-odd-systems")
STORED_ODD_SYSTEMS = STORED_BODIES.with_name("pi16-odd-systems.json")
ODD_SYSTEM_RUNS = [(ANTHROPIC_API, None), (RESPONSES_API, None), (CHAT_API, None),
                   (ANTHROPIC_API, DEFAULT), (RESPONSES_API, OPENAI_DEFAULT)]
_ODD_SYSTEM_BODIES: dict[str, Any] = json.loads(STORED_ODD_SYSTEMS.read_text("utf-8"))


def _odd_system_cases(sent: bool) -> list[tuple[str, str, str | None]]:
    """(session, API, model) of each run pi 1.6 makes a body for (`sent`) or fails on."""
    return [(name, api, model_id) for name in sorted(p.name for p in ODD_SYSTEMS.glob("*.jsonl"))
            for api, model_id in ODD_SYSTEM_RUNS
            if (_ODD_SYSTEM_BODIES[_run_key(api, model_id, Path(name))] is not None) == sent]


@pytest.fixture(scope="module")
def pi_odd_system_bodies() -> dict[str, Any]:
    return _stored_pi_bodies(STORED_ODD_SYSTEMS, ODD_SYSTEMS, ODD_SYSTEM_RUNS)


@pytest.mark.parametrize(("name", "api", "model_id"), _odd_system_cases(sent=True))
def test_a_system_message_of_another_shape_is_sent_as_pi_16_sends_it(
        name: str, api: str, model_id: str | None, pi_odd_system_bodies: dict[str, Any]) -> None:
    """toolsAdded holding a text (`["a"]`) failed every request ("internal error
    (AttributeError: 'str' object has no attribute 'get')"), and toolsAdded that is a text
    ("x") left the system message out; pi 1.6 reads each character as a tool without fields
    and sends it to OpenAI models as one (`{"type": "function", "strict": false}`). A tool
    named by an object or a list failed ("unhashable type: 'dict'"); pi sends it. sections
    that are a text left the message (and the prompt) out too; pi 1.6 makes a section of each
    UTF-16 code unit, named by its index, and puts sections named like indexes first."""
    _assert_sent_as_pi_sends(ODD_SYSTEMS / name, api, model_id, pi_odd_system_bodies)


@pytest.mark.parametrize(("name", "api", "model_id"),
                         [case for case in _odd_system_cases(sent=False)
                          if case[1] == ANTHROPIC_API])
def test_a_tool_without_parameters_is_refused_for_claude_naming_its_line(
        name: str, api: str, model_id: str | None, pi_odd_system_bodies: dict[str, Any]) -> None:
    """pi 1.6 fails making an Anthropic request that declares a tool without parameters
    (`Cannot read properties of undefined (reading 'properties')`); pi-lsp says which line
    and field declares it, where it failed with an AttributeError."""
    assert pi_odd_system_bodies[_run_key(api, model_id, Path(name))] is None
    with pytest.raises(UnsendableToolError, match=r"^line 2: toolsAdded\[\d\] of system "
                                                  r"message s1 is (\"[ax]\"|\{\"name\":\[\"x"
                                                  r"\"\]\}), a tool without parameters, which "
                                                  r"cannot be sent to claude"):
        _ours(ODD_SYSTEMS / name, api, model_id=model_id)


# Hand-edited sessions with a content block's field of another type (found by a differential
# fuzz against pi 1.6), and the bodies pi 1.6 sends for them.
ODD_BLOCKS = STORED_BODIES.with_name("pi16-odd-blocks")
OUTPUT_LIMITS = ("max_tokens", "max_output_tokens", "max_completion_tokens", "thinking")
STORED_ODD_BLOCKS = STORED_BODIES.with_name("pi16-odd-blocks.json")


@pytest.fixture(scope="module")
def pi_odd_block_bodies() -> dict[str, Any]:
    return _stored_pi_bodies(STORED_ODD_BLOCKS, ODD_BLOCKS, ODD_FIELD_RUNS)


@pytest.mark.parametrize(("api", "model_id"), ODD_FIELD_RUNS,
                         ids=[" ".join(filter(None, run)) for run in ODD_FIELD_RUNS])
@pytest.mark.parametrize("name", sorted(path.name for path in ODD_BLOCKS.glob("*.jsonl")))
def test_a_block_with_a_field_of_another_type_is_sent_as_pi_16_sends_it(
        name: str, api: str, model_id: str | None, pi_odd_block_bodies: dict[str, Any]) -> None:
    """A thinking block whose `redacted` was 0, 1 or "yes", a tool call whose name was 5 or
    whose thoughtSignature was false, and a user image whose data was 5 left their whole
    message out of the request; a tool result text block whose text was 5, true or {} made
    the result "No result provided", losing the good block beside it. pi 1.6 sends each: the
    name and data as they are, `redacted` by its truth, the text as String() makes it.
    (Still different: pi 1.6's estimate of a text that is no text is NaN, so it asks for no
    output limit there, and the least thinking budget; pi-lsp asks for the model's.)"""
    ours, replayed = _ours(ODD_BLOCKS / name, api, model_id=model_id)
    pi = pi_odd_block_bodies[_run_key(api, model_id, Path(name))]
    if name.startswith("result-text"):
        for body in (ours, pi):
            for key in OUTPUT_LIMITS:
                body.pop(key, None)
    assert _comparable(ours, api, replayed, pi=False) == _comparable(pi, api, replayed, pi=True)


# Hand-edited sessions with an image whose type or data is missing or of another type (found by
# a differential fuzz against pi 1.6), and the bodies pi 1.6 sends for them, to models with and
# without image input.
ODD_IMAGES = STORED_BODIES.with_name("pi16-odd-images")
STORED_ODD_IMAGES = STORED_BODIES.with_name("pi16-odd-images.json")
TEXT_ONLY_RUNS = [(ANTHROPIC_API, None), (RESPONSES_API, None), (CHAT_API, None)]
ODD_IMAGE_RUNS = [*((api, model_id, False) for api, model_id in ODD_FIELD_RUNS),
                  *((api, model_id, True) for api, model_id in TEXT_ONLY_RUNS)]


@pytest.fixture(scope="module")
def pi_odd_image_bodies() -> dict[str, Any]:
    return {**_stored_pi_bodies(STORED_ODD_IMAGES, ODD_IMAGES, ODD_FIELD_RUNS),
            **_stored_pi_bodies(STORED_ODD_IMAGES, ODD_IMAGES, TEXT_ONLY_RUNS, text_only=True)}


@pytest.mark.parametrize(("api", "model_id", "text_only"), ODD_IMAGE_RUNS,
                         ids=[" ".join(filter(None, [api, model_id, TEXT_ONLY * text_only]))
                              for api, model_id, text_only in ODD_IMAGE_RUNS])
@pytest.mark.parametrize("name", sorted(path.name for path in ODD_IMAGES.glob("*.jsonl")))
def test_an_image_without_a_type_is_sent_as_pi_16_sends_it(
        name: str, api: str, model_id: str | None, text_only: bool,
        pi_odd_image_bodies: dict[str, Any]) -> None:
    """An image whose mimeType was missing, null or 5, or whose data was missing, left its whole
    message out of the request (the user's text beside it too; a tool result became "No result
    provided", a custom message was gone). pi 1.6 sends it: to a model without image input as
    its note ("(image omitted: …)"), to one with as it is (a missing field left out of
    Anthropic's source, `undefined` in OpenAI's data URL), which the API refuses, naming it."""
    _assert_sent_as_pi_sends(ODD_IMAGES / name, api, model_id, pi_odd_image_bodies, text_only)


# Hand-edited sessions with a block of a type pi-lsp does not know (`{"type": "foo"}`, `5`,
# "video"; a tool result's thinking) in a user, assistant, custom or tool result message (found by
# the wire differential against pi 1.6), and the bodies pi 1.6 sends for them, to models with and
# without image input.
UNKNOWN_BLOCKS = STORED_BODIES.with_name("pi16-unknown-blocks")
STORED_UNKNOWN_BLOCKS = STORED_BODIES.with_name("pi16-unknown-blocks.json")
UNDEFINED_IMAGE_URL = "data:undefined;base64,undefined"


@pytest.fixture(scope="module")
def pi_unknown_block_bodies() -> dict[str, Any]:
    return {**_stored_pi_bodies(STORED_UNKNOWN_BLOCKS, UNKNOWN_BLOCKS, ODD_FIELD_RUNS),
            **_stored_pi_bodies(STORED_UNKNOWN_BLOCKS, UNKNOWN_BLOCKS, TEXT_ONLY_RUNS,
                                text_only=True)}


def _is_undefined_image(block: Any) -> bool:
    """An image pi 1.6 makes of a block of an unknown type: no data, or a URL of `undefined`s."""
    if not isinstance(block, dict):
        return False
    if block.get("type") == "image":
        return "data" not in block["source"]
    return block.get("image_url") in (UNDEFINED_IMAGE_URL, {"url": UNDEFINED_IMAGE_URL})


def _without_undefined_images(body: dict[str, Any]) -> dict[str, Any]:
    """pi 1.6's body less what pi-lsp leaves out on purpose: the images of undefined fields pi
    makes of unknown blocks (which every API refuses; a cache mark on one goes to the block
    before it, a message left empty goes), and the empty line pi's Anthropic join of a tool
    result's texts leaves where such a block was."""
    key = "input" if "input" in body else "messages"
    kept = []
    for message in body[key]:
        content = message.get("content")
        if isinstance(content, list):
            blocks = []
            for block in content:
                if not _is_undefined_image(block):
                    blocks.append(block)
                elif "cache_control" in block and blocks:
                    blocks[-1]["cache_control"] = block["cache_control"]
            if content and not blocks:
                continue
            for block in blocks:
                if block.get("type") == "tool_result" and isinstance(block["content"], str):
                    block["content"] = block["content"].strip("\n")
            message = {**message, "content": blocks}
        kept.append(message)
    return {**body, key: kept}


@pytest.mark.parametrize(("api", "model_id", "text_only"), ODD_IMAGE_RUNS,
                         ids=[" ".join(filter(None, [api, model_id, TEXT_ONLY * text_only]))
                              for api, model_id, text_only in ODD_IMAGE_RUNS])
@pytest.mark.parametrize("name", sorted(path.name for path in UNKNOWN_BLOCKS.glob("*.jsonl")))
def test_a_message_with_a_block_of_an_unknown_type_is_sent_with_its_other_blocks(
        name: str, api: str, model_id: str | None, text_only: bool,
        pi_unknown_block_bodies: dict[str, Any]) -> None:
    """A block of an unknown type left its whole message out of the request (the user's text,
    a reply, a custom message), and a tool result holding one (or a thinking block) beside its
    text became "No result provided". pi 1.6 sends the rest: a reply's and a tool result's
    other blocks; a user's or custom message's too, with the block as an image of undefined
    fields, which every API refuses, so pi-lsp leaves that out."""
    ours, replayed = _ours(UNKNOWN_BLOCKS / name, api, text_only, model_id)
    pi = _without_undefined_images(
        pi_unknown_block_bodies[_run_key(api, model_id, Path(name), text_only)])
    assert _comparable(ours, api, replayed, pi=False) == _comparable(pi, api, replayed, pi=True)


# A session whose tool result holds its output as a text, not a list of blocks (an extension
# may write it so), the same session with the text as a block, and the bodies pi 1.6 sends.
RESULT_TEXT = STORED_BODIES.with_name("pi16-result-text")
STORED_RESULT_TEXT = STORED_BODIES.with_name("pi16-result-text.json")


@pytest.fixture(scope="module")
def pi_result_text_bodies() -> dict[str, Any]:
    return {**_stored_pi_bodies(STORED_RESULT_TEXT, RESULT_TEXT, ODD_FIELD_RUNS),
            **_stored_pi_bodies(STORED_RESULT_TEXT, RESULT_TEXT, TEXT_ONLY_RUNS,
                                text_only=True)}


@pytest.mark.parametrize(("api", "model_id", "text_only"), ODD_IMAGE_RUNS,
                         ids=[" ".join(filter(None, [api, model_id, TEXT_ONLY * text_only]))
                              for api, model_id, text_only in ODD_IMAGE_RUNS])
def test_a_tool_result_whose_content_is_a_text_is_sent_as_that_text(
        api: str, model_id: str | None, text_only: bool,
        pi_result_text_bodies: dict[str, Any]) -> None:
    """A tool result whose content was a text ("a string") became "No result provided". pi 1.6
    fails making the request to a model with image input, and sends a model without it
    "(no tool output)" (Anthropic: an empty line per character), though its estimate and its
    summaries read the text; a failure not worth copying. pi-lsp sends the text, as pi 1.6
    sends the same text written as a block."""
    pi_own = pi_result_text_bodies[_run_key(api, model_id, Path("result-text.jsonl"), text_only)]
    assert pi_own is None or "a string" not in json.dumps(pi_own)
    ours, replayed = _ours(RESULT_TEXT / "result-text.jsonl", api, text_only, model_id)
    pi = pi_result_text_bodies[_run_key(api, model_id, Path("result-text-block.jsonl"),
                                        text_only)]
    assert _comparable(ours, api, replayed, pi=False) == _comparable(pi, api, replayed, pi=True)


# Sessions with tool results before a user message or a reply without text, and the Chat
# Completions bodies pi 1.6 sends gpt-5 for them with each models.json `compat` flag, stored for
# machines without it.
CHAT_COMPAT = STORED_BODIES.with_name("pi16-chat-compat")
STORED_CHAT_COMPAT = STORED_BODIES.with_name("pi16-chat-compat.json")
CHAT_COMPAT_FLAGS = ["requiresAssistantAfterToolResult", "requiresNonNullAssistantContent"]


@pytest.fixture(scope="module")
def pi_chat_compat_bodies() -> dict[str, Any]:
    stored: dict[str, Any] = json.loads(STORED_CHAT_COMPAT.read_text("utf-8"))
    for flag in CHAT_COMPAT_FLAGS:
        for name, body in _pi16_wire(CHAT_API, sorted(CHAT_COMPAT.glob("*.jsonl")), "--model",
                                     "gpt-5", "--compat", json.dumps({flag: True})).items():
            assert body == stored[f"{flag} {name}"], name  # the stored bodies are pi's
    return stored


@pytest.mark.parametrize("flag", CHAT_COMPAT_FLAGS)
@pytest.mark.parametrize("name", sorted(path.name for path in CHAT_COMPAT.glob("*.jsonl")))
def test_a_hosts_flags_for_message_order_are_sent_as_pi_16_sends_them(
        name: str, flag: str, pi_chat_compat_bodies: dict[str, Any]) -> None:
    """models.json's `requiresAssistantAfterToolResult` (pi 1.6 puts "I have processed the tool
    results." as an assistant message between tool results and the user message after them, for
    hosts that refuse a user message there) and `requiresNonNullAssistantContent` (a reply
    without text goes as `"content": ""`, not null) were not read: pi-lsp sent the order and the
    null those hosts refuse, so every request after a tool call failed there."""
    laid = _with_compat(ModelRegistry().get("openai", "gpt-5"), {flag: True}).compat
    ours, replayed = _ours(CHAT_COMPAT / name, CHAT_API, facts={"compat": laid})
    pi = pi_chat_compat_bodies[f"{flag} {name}"]
    assert _comparable(ours, CHAT_API, replayed, pi=False) == \
        _comparable(pi, CHAT_API, replayed, pi=True)


# Sessions with system messages after the first, and the Chat Completions bodies pi 1.6 sends
# gpt-5 for them with models.json's `"compat": {"supportsMidConvoSystemMessages": true}`, stored
# for machines without it.
CHAT_SYSTEMS = STORED_BODIES.with_name("pi16-chat-system-messages")
STORED_CHAT_SYSTEMS = STORED_BODIES.with_name("pi16-chat-system-messages.json")
MID_CONVO = {"supportsMidConvoSystemMessages": True}


@pytest.fixture(scope="module")
def pi_chat_system_bodies() -> dict[str, Any]:
    return _stored_pi16_wire(STORED_CHAT_SYSTEMS, CHAT_API, sorted(CHAT_SYSTEMS.glob("*.jsonl")),
                             "--model", "gpt-5", "--compat", json.dumps(MID_CONVO))


@pytest.mark.parametrize("name", sorted(path.name for path in CHAT_SYSTEMS.glob("*.jsonl")))
def test_a_chat_model_taking_system_messages_mid_way_gets_them_in_place(
        name: str, pi_chat_system_bodies: dict[str, Any]) -> None:
    """A Chat Completions model whose models.json says `supportsMidConvoSystemMessages`: pi 1.6
    sends each later system message in place ("Updated system prompt section …", after the
    results of the calls before it) and the current tools at the top. pi-lsp folded them into
    the first system message, as for a model that does not take them: the model read another
    prompt than pi's, and each prompt change rewrote the cached prefix."""
    model = _with_compat(ModelRegistry().get("openai", "gpt-5"), MID_CONVO, api=CHAT_API)
    ours = _ours_for(CHAT_SYSTEMS / name, ("openai", "gpt-5"), ModelRegistry(extra=[model]))
    pi = pi_chat_system_bodies[name]
    assert _comparable(ours, CHAT_API, True, pi=False) == _comparable(pi, CHAT_API, True, pi=True)


# Sessions at three thinking levels, and the bodies pi 1.6 sends gpt-5 for them on each OpenAI
# wire with SAMPLING laid over the model (as a models.json `modelOverrides` entry lays it).
SAMPLING_SESSIONS = STORED_BODIES.with_name("pi16-sampling")
STORED_SAMPLING = STORED_BODIES.with_name("pi16-sampling.json")
SAMPLING = {"samplingParams": {"temperature": 0.6, "top_p": 0.95, "top_k": 20},
            "samplingParamsByThinkingLevel": {"high": {"temperature": 1.0, "min_p": 0.1},
                                              "minimal": {"top_k": 5}}}


@pytest.fixture(scope="module")
def pi_sampling_bodies() -> dict[str, Any]:
    stored: dict[str, Any] = json.loads(STORED_SAMPLING.read_text("utf-8"))
    for api in (RESPONSES_API, CHAT_API):
        for name, body in _pi16_wire(api, sorted(SAMPLING_SESSIONS.glob("*.jsonl")), "--model",
                                     "gpt-5", "--fields", json.dumps(SAMPLING)).items():
            assert body == stored[f"{api} {name}"], name  # the stored bodies are pi's
    return stored


@pytest.mark.parametrize("api", [RESPONSES_API, CHAT_API])
@pytest.mark.parametrize("name", sorted(path.name for path in SAMPLING_SESSIONS.glob("*.jsonl")))
def test_a_models_sampling_params_are_sent_as_pi_16_sends_them(
        name: str, api: str, pi_sampling_bodies: dict[str, Any], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """models.json's `samplingParams` and `samplingParamsByThinkingLevel` (temperature, top_p,
    top_k…, per level over them; the level clamped to the model's: gpt-5's off is minimal) were
    not read: pi 1.6 lays them over every OpenAI-compatible request body, pi-lsp sent none, so a
    local model ran at its server's sampling instead of the one its models.json asks for."""
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path))
    (tmp_path / "models.json").write_text(json.dumps(
        {"providers": {"openai": {"modelOverrides": {"gpt-5": SAMPLING}}}}), "utf-8")
    models, _ = load_models(tmp_path, project=False)
    gpt5 = next(model for model in models if model.id == "gpt-5")
    registry = ModelRegistry(extra=[msgspec.structs.replace(gpt5, api=api)])
    ours = _ours_for(SAMPLING_SESSIONS / name, ("openai", "gpt-5"), registry)
    pi = pi_sampling_bodies[f"{api} {name}"]
    assert _comparable(ours, api, False, pi=False) == _comparable(pi, api, False, pi=True)


# models.json `compat` settings of a host's reasoning cap, and the Chat Completions bodies pi
# 1.6 sends gpt-5 with each at SAMPLING_SESSIONS' three levels (stored for machines without it).
STORED_BUDGET_FIELDS = STORED_BODIES.with_name("pi16-thinking-budget-fields.json")
BUDGET_FIELDS = [{"supportsThinkingTokenBudget": True},
                 {"thinkingTokenBudgetField": "thinking_budget_tokens"}]


@pytest.fixture(scope="module")
def pi_budget_field_bodies() -> dict[str, Any]:
    stored: dict[str, Any] = json.loads(STORED_BUDGET_FIELDS.read_text("utf-8"))
    for laid in BUDGET_FIELDS:
        for name, body in _pi16_wire(CHAT_API, sorted(SAMPLING_SESSIONS.glob("*.jsonl")),
                                     "--model", "gpt-5", "--compat", json.dumps(laid)).items():
            assert body == stored[f"{json.dumps(laid)} {name}"], name  # pi's
    return stored


@pytest.mark.parametrize("laid", BUDGET_FIELDS, ids=lambda laid: next(iter(laid)))
@pytest.mark.parametrize("name", sorted(path.name for path in SAMPLING_SESSIONS.glob("*.jsonl")))
def test_a_hosts_thinking_budget_field_is_sent_as_pi_16_sends_it(
        name: str, laid: dict[str, Any], pi_budget_field_bodies: dict[str, Any]) -> None:
    """models.json's `thinkingTokenBudgetField` (or `supportsThinkingTokenBudget`, vLLM's
    `thinking_token_budget`) was not read: pi 1.6 caps a Chat Completions host's reasoning at the
    level's budget (8192 at medium, 16384 at high, 1024 at minimal), pi-lsp sent no cap, so the
    reasoning could use the whole output limit and leave no answer or tool call."""
    model = _with_compat(ModelRegistry().get("openai", "gpt-5"), laid, api=CHAT_API)
    ours = _ours_for(SAMPLING_SESSIONS / name, ("openai", "gpt-5"), ModelRegistry(extra=[model]))
    pi = pi_budget_field_bodies[f"{json.dumps(laid)} {name}"]
    assert _comparable(ours, CHAT_API, False, pi=False) == \
        _comparable(pi, CHAT_API, False, pi=True)


STORED_NO_MAX_OUTPUT = STORED_BODIES.with_name("pi16-no-max-output-tokens.json")
NO_MAX_OUTPUT = {"supportsMaxOutputTokens": False}


def test_a_responses_host_refusing_max_output_tokens_is_sent_none() -> None:
    """models.json's `"compat": {"supportsMaxOutputTokens": false}` (a Codex-protocol gateway
    that refuses the field) was not read: pi 1.6 leaves `max_output_tokens` out, pi-lsp sent it,
    so every request to such a gateway failed. pi 1.6's Responses body for gpt-5 with the flag
    is stored (checked against it where installed)."""
    file = SAMPLING_SESSIONS / "default-level.jsonl"
    pi = json.loads(STORED_NO_MAX_OUTPUT.read_text("utf-8"))
    assert _pi16_wire(RESPONSES_API, [file], "--model", "gpt-5", "--compat",
                      json.dumps(NO_MAX_OUTPUT)) in ({}, {file.name: pi})  # pi's
    model = _with_compat(ModelRegistry().get("openai", "gpt-5"), NO_MAX_OUTPUT)
    ours = _ours_for(file, ("openai", "gpt-5"), ModelRegistry(extra=[model]))
    assert "max_output_tokens" not in pi
    assert _comparable(ours, RESPONSES_API, False, pi=False) == \
        _comparable(pi, RESPONSES_API, False, pi=True)


STORED_NO_TOOL_CACHE = STORED_BODIES.with_name("pi16-no-tool-cache-control.json")
NO_TOOL_CACHE = {"supportsCacheControlOnTools": False}


@pytest.mark.parametrize("model_id", ["claude-sonnet-4-5", DEFAULT])
def test_an_anthropic_host_refusing_cache_marks_on_tools_gets_none_there(model_id: str) -> None:
    """models.json's `"compat": {"supportsCacheControlOnTools": false}` (an Anthropic-compatible
    host such as Fireworks that refuses the field on tools) was not read: pi 1.6 leaves the last
    tool's `cache_control` out (the messages' marks stay), pi-lsp sent it, so such a host
    refused every request with tools. pi 1.6's bodies are stored (checked where installed)."""
    file = CHAT_SYSTEMS / "section-updated.jsonl"
    pi = json.loads(STORED_NO_TOOL_CACHE.read_text("utf-8"))[model_id]
    assert _pi16_wire(ANTHROPIC_API, [file], "--model", model_id, "--compat",
                      json.dumps(NO_TOOL_CACHE)) in ({}, {file.name: pi})  # pi's
    model = _with_compat(ModelRegistry().get("anthropic", model_id), NO_TOOL_CACHE)
    ours = _ours_for(file, ("anthropic", model_id), ModelRegistry(extra=[model]))
    assert not any("cache_control" in tool for tool in pi["tools"])
    assert _comparable(ours, ANTHROPIC_API, True, pi=False) == \
        _comparable(pi, ANTHROPIC_API, True, pi=True)


# Sessions with tools, with every tool taken away later, and without tools, and the bodies pi
# 1.6 sends each model for them with `"compat": {"supportsEagerToolInputStreaming": false}`.
EAGER_SESSIONS = STORED_BODIES.with_name("pi16-eager-streaming")
STORED_NO_EAGER = STORED_BODIES.with_name("pi16-eager-streaming.json")
NO_EAGER = {"supportsEagerToolInputStreaming": False}


@pytest.fixture(scope="module")
def pi_no_eager_bodies() -> dict[str, Any]:
    stored: dict[str, Any] = json.loads(STORED_NO_EAGER.read_text("utf-8"))
    for model_id in stored:
        made = _pi16_wire(ANTHROPIC_API, sorted(EAGER_SESSIONS.glob("*.jsonl")), "--model",
                          model_id, "--compat", json.dumps(NO_EAGER))
        assert made in ({}, stored[model_id])  # the stored bodies are pi's
    return stored


@pytest.mark.parametrize("model_id", ["claude-sonnet-4-5", DEFAULT])
@pytest.mark.parametrize("name", sorted(path.name for path in EAGER_SESSIONS.glob("*.jsonl")))
def test_an_anthropic_host_without_eager_tool_streaming_gets_the_older_beta(
        model_id: str, name: str, pi_no_eager_bodies: dict[str, Any]) -> None:
    """models.json's `"compat": {"supportsEagerToolInputStreaming": false}` (an
    Anthropic-compatible host that takes no per-tool `eager_input_streaming`) was not read:
    pi 1.6 then asks for the fine-grained-tool-streaming-2025-05-14 beta with the tools a
    request holds at its end (none where a later system message took them all away, though
    claude-opus-5-5 still declares the first ones), so tool input streams as the host can
    stream it; pi-lsp asked for no such beta. pi 1.6's bodies are stored (checked where
    installed)."""
    model = _with_compat(ModelRegistry().get("anthropic", model_id), NO_EAGER)
    ours = _ours_for(EAGER_SESSIONS / name, ("anthropic", model_id),
                     ModelRegistry(extra=[model]))
    pi = pi_no_eager_bodies[model_id][name]
    assert (FINE_GRAINED_BETA in pi.get("betas", [])) == (name == "tools.jsonl")
    assert _comparable(ours, ANTHROPIC_API, True, pi=False) == \
        _comparable(pi, ANTHROPIC_API, True, pi=True)


# Replies of claude-sonnet-4-5 with thinking whose signature is missing, empty or blank, and
# the bodies pi 1.6 sends it with models.json's `"compat": {"allowEmptySignature": true}`.
EMPTY_SIGNATURES = STORED_BODIES.with_name("pi16-empty-signatures")
STORED_EMPTY_SIGNATURES = STORED_BODIES.with_name("pi16-empty-signatures.json")
ALLOW_EMPTY = {"allowEmptySignature": True}


@pytest.fixture(scope="module")
def pi_empty_signature_bodies() -> dict[str, Any]:
    return _stored_pi16_wire(STORED_EMPTY_SIGNATURES, ANTHROPIC_API,
                             sorted(EMPTY_SIGNATURES.glob("*.jsonl")),
                             "--compat", json.dumps(ALLOW_EMPTY))


@pytest.mark.parametrize("name", sorted(path.name for path in EMPTY_SIGNATURES.glob("*.jsonl")))
def test_unsigned_thinking_goes_back_as_thinking_where_the_host_takes_it(
        name: str, pi_empty_signature_bodies: dict[str, Any]) -> None:
    """models.json's `allowEmptySignature` (an Anthropic-compatible host that writes and takes
    back thinking with an empty signature) was not read: pi 1.6 sends the model's own unsigned
    thinking back as a thinking block with `"signature": ""`, pi-lsp sent it as the reply's
    text, so the model read its reasoning as something it had said."""
    model = _with_compat(ModelRegistry().get(*MODELS[ANTHROPIC_API]), ALLOW_EMPTY)
    ours = _ours_for(EMPTY_SIGNATURES / name, MODELS[ANTHROPIC_API], ModelRegistry(extra=[model]))
    pi = pi_empty_signature_bodies[name]
    assert _comparable(ours, ANTHROPIC_API, True, pi=False) == \
        _comparable(pi, ANTHROPIC_API, True, pi=True)


STORED_ROUTING = STORED_BODIES.with_name("pi16-openrouter-routing.json")
ROUTING = {"openRouterRouting": {"only": ["anthropic"], "data_collection": "deny", "zdr": True}}


def test_openrouter_routing_preferences_are_sent_as_pi_16_sends_them() -> None:
    """models.json's `openRouterRouting` (which upstream providers OpenRouter may route to, and
    their data policy: `data_collection: "deny"`, `zdr`) was not read: pi 1.6 sends it as the
    body's `provider`, pi-lsp sent none, so OpenRouter routed the session to any provider,
    whatever data policy the user had asked for. pi 1.6's body is stored (checked where
    installed)."""
    file = SAMPLING_SESSIONS / "default-level.jsonl"
    pi = json.loads(STORED_ROUTING.read_text("utf-8"))
    assert _pi16_wire(CHAT_API, [file], "--model", "gpt-5", "--compat",
                      json.dumps(ROUTING)) in ({}, {file.name: pi})  # pi's
    model = _with_compat(ModelRegistry().get("openai", "gpt-5"), ROUTING, api=CHAT_API)
    ours = _ours_for(file, ("openai", "gpt-5"), ModelRegistry(extra=[model]))
    assert pi["provider"] == ROUTING["openRouterRouting"]
    assert _comparable(ours, CHAT_API, False, pi=False) == \
        _comparable(pi, CHAT_API, False, pi=True)


# Routing preferences at each level of a models.json, and what pi 1.6 makes of them (stored).
STORED_ROUTING_LEVELS = STORED_BODIES.with_name("pi16-routing-levels.json")
ROUTING_LEVELS = {"providers": {
    "openrouter": {"baseUrl": "https://openrouter.ai/api/v1",
                   "compat": {"openRouterRouting": {"data_collection": "deny", "zdr": True}},
                   "models": [{"id": "my/model", "api": CHAT_API, "compat": {
                       "openRouterRouting": {"only": ["deepinfra"], "zdr": False}}}]},
    "openai": {"compat": {"openRouterRouting": {"data_collection": "deny", "order": ["a"]}},
               "modelOverrides": {"gpt-5": {"compat": {"openRouterRouting": {"order": ["b"]}}}}}}}


def test_routing_preferences_of_each_level_are_merged_as_pi_16_merges_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A model's (or a modelOverrides entry's) `openRouterRouting` replaced its provider's whole,
    where pi 1.6 merges them key by key: a provider's `data_collection: "deny"` was dropped as
    soon as a model named its `order` or `only`, and OpenRouter could route the user's prompts
    to providers that keep them. pi 1.6's merge is stored (checked where installed)."""
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path))
    (tmp_path / "models.json").write_text(json.dumps(ROUTING_LEVELS), "utf-8")
    pi = json.loads(STORED_ROUTING_LEVELS.read_text("utf-8"))
    node = pi16_node()
    if node is not None:
        run = subprocess.run([node, str(Path(__file__).with_name("pi16_compat.mjs")),
                              str(PI16 / "@earendil-works"), str(tmp_path / "models.json"),
                              *pi], capture_output=True, text=True, timeout=PROCESS_CEILING_S)
        assert run.returncode == 0, run.stderr
        assert {name: compat.get("openRouterRouting")
                for name, compat in json.loads(run.stdout).items()} == pi
    models, _ = load_models(tmp_path, project=False)
    ours = {f"{model.provider}/{model.id}": model.compat.open_router_routing for model in models}
    assert {name: ours[name] for name in pi} == pi


# A chat template's switches (vLLM or SGLang serving Qwen or GLM), filled in from the level, and
# the Chat Completions bodies pi 1.6 sends gpt-5.1 with them at SAMPLING_SESSIONS' three levels.
STORED_CHAT_TEMPLATE = STORED_BODIES.with_name("pi16-chat-template.json")
CHAT_TEMPLATE = {"thinkingFormat": "chat-template", "chatTemplateKwargs": {
    "enable_thinking": {"$var": "thinking.enabled"}, "effort": {"$var": "thinking.effort"},
    "budget": {"$var": "thinking.budget", "omitWhenOff": True}, "fixed": "x", "n": 3,
    "flag": False, "nil": None}}


@pytest.fixture(scope="module")
def pi_chat_template_bodies() -> dict[str, Any]:
    return _stored_pi16_wire(STORED_CHAT_TEMPLATE, CHAT_API,
                             sorted(SAMPLING_SESSIONS.glob("*.jsonl")),
                             "--model", "gpt-5.1", "--compat", json.dumps(CHAT_TEMPLATE))


@pytest.mark.parametrize("name", sorted(path.name for path in SAMPLING_SESSIONS.glob("*.jsonl")))
def test_a_chat_templates_kwargs_are_sent_as_pi_16_sends_them(
        name: str, pi_chat_template_bodies: dict[str, Any]) -> None:
    """models.json's `"thinkingFormat": "chat-template"` with its `chatTemplateKwargs` was
    refused as a thinkingFormat pi-lsp did not know, the whole file with it: pi 1.6 sends the
    kwargs as `chat_template_kwargs`, each written value as is and each `$var` filled in from
    the level (`thinking.enabled`, `thinking.effort` through the model's map, `thinking.budget`,
    `omitWhenOff`), so a Qwen or GLM template on vLLM is told whether and how hard to think."""
    model = _with_compat(ModelRegistry().get("openai", "gpt-5.1"), CHAT_TEMPLATE, api=CHAT_API)
    ours = _ours_for(SAMPLING_SESSIONS / name, ("openai", "gpt-5.1"), ModelRegistry(extra=[model]))
    pi = pi_chat_template_bodies[name]
    assert "chat_template_kwargs" in pi
    assert _comparable(ours, CHAT_API, False, pi=False) == \
        _comparable(pi, CHAT_API, False, pi=True)


# A chat template's kwargs and Vercel's routing at a provider and at its model, and what pi 1.6
# makes of them.
COMPAT_LEVELS = {
    "chatTemplateKwargs": ({"a": 1, "b": 2}, {"b": 3, "c": {"$var": "thinking.enabled"}},
                           {"a": 1, "b": 3, "c": {"$var": "thinking.enabled"}}),
    "vercelGatewayRouting": ({"only": ["bedrock"], "order": ["a"]}, {"order": ["b"]},
                             {"only": ["bedrock"], "order": ["b"]}),
    "chatTemplateArgs": ({"a": 1}, {"b": {"$var": "thinking.budget", "omitWhenOff": True}},
                         {"a": 1, "b": {"$var": "thinking.budget", "omitWhenOff": True}}),
}


@pytest.mark.parametrize("flag", list(COMPAT_LEVELS))
def test_a_compat_object_of_each_level_is_merged_as_pi_16_merges_it(
        flag: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A model's `chatTemplateKwargs` (or `vercelGatewayRouting`) is merged key by key over its
    provider's, as pi 1.6's mergeCompat merges them (checked against it where installed)."""
    provider, model, merged = COMPAT_LEVELS[flag]
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path))
    (tmp_path / "models.json").write_text(json.dumps({"providers": {"lab": {
        "baseUrl": "http://127.0.0.1:9/v1", "api": CHAT_API, "compat": {flag: provider},
        "models": [{"id": "m", "compat": {flag: model}}]}}}), "utf-8")
    node = pi16_node()
    if node is not None:
        run = subprocess.run([node, str(Path(__file__).with_name("pi16_compat.mjs")),
                              str(PI16 / "@earendil-works"), str(tmp_path / "models.json"),
                              "lab/m"], capture_output=True, text=True, timeout=PROCESS_CEILING_S)
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout)["lab/m"][flag] == merged
    models, _ = load_models(tmp_path, project=False)
    (ours,) = [msgspec.to_builtins(model.compat)[flag] for model in models]
    assert ours == merged


# Vercel AI Gateway's routing, and the Chat Completions bodies pi 1.6 sends gpt-5 with each (an
# empty `only` is sent; a routing without `only` or `order` sends none), stored for machines
# without it.
STORED_VERCEL_ROUTING = STORED_BODIES.with_name("pi16-vercel-routing.json")
VERCEL_ROUTING = {"both": {"only": ["bedrock"], "order": ["anthropic", "bedrock"], "sort": "price"},
                  "empty only": {"only": []}, "neither": {"sort": "price"}}


@pytest.mark.parametrize("case", list(VERCEL_ROUTING))
def test_vercel_gateway_routing_is_sent_as_pi_16_sends_it(case: str) -> None:
    """models.json's `vercelGatewayRouting` was not read: pi 1.6 sends its `only` and `order` as
    the body's `providerOptions.gateway`, so Vercel's AI Gateway keeps the session on the
    upstream providers the user chose; pi-lsp sent none, and the gateway routed it anywhere."""
    file = SAMPLING_SESSIONS / "default-level.jsonl"
    laid = {"vercelGatewayRouting": VERCEL_ROUTING[case]}
    pi = json.loads(STORED_VERCEL_ROUTING.read_text("utf-8"))[case]
    assert _pi16_wire(CHAT_API, [file], "--model", "gpt-5", "--compat",
                      json.dumps(laid)) in ({}, {file.name: pi})  # pi's
    model = _with_compat(ModelRegistry().get("openai", "gpt-5"), laid, api=CHAT_API)
    ours = _ours_for(file, ("openai", "gpt-5"), ModelRegistry(extra=[model]))
    assert _comparable(ours, CHAT_API, False, pi=False) == \
        _comparable(pi, CHAT_API, False, pi=True)


# z.ai's streamed tool-call deltas, asked for where tools are sent, and the Chat Completions
# bodies pi 1.6 sends gpt-5 with models.json's `"compat": {"zaiToolStream": true}`: a session
# with tools, and one without (stored for machines without pi 1.6).
STORED_ZAI_TOOL_STREAM = STORED_BODIES.with_name("pi16-zai-tool-stream.json")
ZAI_TOOL_STREAM = {"zaiToolStream": True}
ZAI_SESSIONS = [CHAT_SYSTEMS / "tools-changed.jsonl", SAMPLING_SESSIONS / "default-level.jsonl"]


@pytest.mark.parametrize("file", ZAI_SESSIONS, ids=["tools", "no tools"])
def test_z_ais_tool_stream_is_asked_for_as_pi_16_asks_for_it(file: Path) -> None:
    """models.json's `zaiToolStream` was not read: pi 1.6 sends `"tool_stream": true` with the
    tools, so z.ai streams a call's arguments as they are written; pi-lsp sent none, and a long
    call (a file written whole) came in one piece at the end."""
    pi = json.loads(STORED_ZAI_TOOL_STREAM.read_text("utf-8"))[file.name]
    assert _pi16_wire(CHAT_API, [file], "--model", "gpt-5", "--compat",
                      json.dumps(ZAI_TOOL_STREAM)) in ({}, {file.name: pi})  # pi's
    model = _with_compat(ModelRegistry().get("openai", "gpt-5"), ZAI_TOOL_STREAM, api=CHAT_API)
    ours = _ours_for(file, ("openai", "gpt-5"), ModelRegistry(extra=[model]))
    assert ("tool_stream" in pi) == ("tools" in pi)
    replayed = "tools" in pi
    assert _comparable(ours, CHAT_API, replayed, pi=False) == \
        _comparable(pi, CHAT_API, replayed, pi=True)


STORED_VLLM_PRIORITY = STORED_BODIES.with_name("pi16-vllm-priority.json")
VLLM_PRIORITY = {"vllmPriority": -5}


def test_a_vllm_priority_is_sent_as_pi_16_sends_it() -> None:
    """models.json's `vllmPriority` was not read: pi 1.6 sends it as the body's `priority`, so
    a vLLM server scheduling by priority serves the session ahead of (or after) others; pi-lsp
    sent none, and its requests waited at the server's default. pi 1.6's body is stored
    (checked against it where installed)."""
    file = SAMPLING_SESSIONS / "default-level.jsonl"
    pi = json.loads(STORED_VLLM_PRIORITY.read_text("utf-8"))
    assert _pi16_wire(CHAT_API, [file], "--model", "gpt-5", "--compat",
                      json.dumps(VLLM_PRIORITY)) in ({}, {file.name: pi})  # pi's
    model = _with_compat(ModelRegistry().get("openai", "gpt-5"), VLLM_PRIORITY, api=CHAT_API)
    ours = _ours_for(file, ("openai", "gpt-5"), ModelRegistry(extra=[model]))
    assert pi["priority"] == -5
    assert _comparable(ours, CHAT_API, False, pi=False) == \
        _comparable(pi, CHAT_API, False, pi=True)


# Sessions whose tools change mid-way (an addition, a removal, a name declared again, no leading
# system message), and the Chat Completions bodies pi 1.6 sends gpt-5 for them with models.json's
# supportsMidConvoSystemMessages and supportsMidConvoToolAdditions (stored for machines without it).
TOOL_ADDITIONS = STORED_BODIES.with_name("pi16-chat-tool-additions")
STORED_TOOL_ADDITIONS = STORED_BODIES.with_name("pi16-chat-tool-additions.json")
ADDITIONS = {**MID_CONVO, "supportsMidConvoToolAdditions": True}


@pytest.fixture(scope="module")
def pi_tool_addition_bodies() -> dict[str, Any]:
    return _stored_pi16_wire(STORED_TOOL_ADDITIONS, CHAT_API,
                             sorted(TOOL_ADDITIONS.glob("*.jsonl")),
                             "--model", "gpt-5", "--compat", json.dumps(ADDITIONS))


@pytest.mark.parametrize("name", sorted(path.name for path in TOOL_ADDITIONS.glob("*.jsonl")))
def test_tools_added_mid_way_are_declared_in_place_as_pi_16_declares_them(
        name: str, pi_tool_addition_bodies: dict[str, Any]) -> None:
    """models.json's `supportsMidConvoToolAdditions` (with supportsMidConvoSystemMessages, a
    Kimi model's host) was not read: pi 1.6 sends the tools in force after the last removal or
    redeclaration at the top and each later addition where it was made, as a system message of
    its own ({"role": "system", "tools": [...]}); pi-lsp sent every current tool at the top, so
    each tool added mid-session rewrote the cached prefix."""
    model = _with_compat(ModelRegistry().get("openai", "gpt-5"), ADDITIONS, api=CHAT_API)
    ours = _ours_for(TOOL_ADDITIONS / name, ("openai", "gpt-5"), ModelRegistry(extra=[model]))
    pi = pi_tool_addition_bodies[name]
    assert _comparable(ours, CHAT_API, True, pi=False) == _comparable(pi, CHAT_API, True, pi=True)


# Baseten's chat template arguments, and the Chat Completions bodies pi 1.6 sends gpt-5.1 with
# them at SAMPLING_SESSIONS' three levels (stored for machines without it).
STORED_BASETEN = STORED_BODIES.with_name("pi16-baseten.json")
BASETEN = {"thinkingFormat": "baseten", "chatTemplateArgs": {
    "enable_thinking": {"$var": "thinking.enabled"},
    "budget": {"$var": "thinking.budget", "omitWhenOff": True}, "fixed": "x"}}


@pytest.mark.parametrize("name", sorted(path.name for path in SAMPLING_SESSIONS.glob("*.jsonl")))
def test_basetens_chat_template_args_are_sent_as_pi_16_sends_them(name: str) -> None:
    """models.json's `"thinkingFormat": "baseten"` was refused as a thinkingFormat pi-lsp did
    not know, the whole file with it: pi 1.6 sends `chatTemplateArgs` as `chat_template_args`,
    filled in as chatTemplateKwargs are, and the level's effort as `reasoning_effort` (the
    map's `off` entry where the model does not think)."""
    file = SAMPLING_SESSIONS / name
    pi = json.loads(STORED_BASETEN.read_text("utf-8"))[name]
    assert _pi16_wire(CHAT_API, [file], "--model", "gpt-5.1", "--compat",
                      json.dumps(BASETEN)) in ({}, {name: pi})  # pi's
    model = _with_compat(ModelRegistry().get("openai", "gpt-5.1"), BASETEN, api=CHAT_API)
    ours = _ours_for(file, ("openai", "gpt-5.1"), ModelRegistry(extra=[model]))
    assert "chat_template_args" in pi
    assert _comparable(ours, CHAT_API, False, pi=False) == \
        _comparable(pi, CHAT_API, False, pi=True)


# The same sessions, and the Responses bodies pi 1.6 sends gpt-5 for them with models.json's
# supportsMidConvoSystemMessages and supportsToolSearch (stored for machines without it).
STORED_TOOL_SEARCH = STORED_BODIES.with_name("pi16-tool-search.json")
TOOL_SEARCH = {**MID_CONVO, "supportsToolSearch": True}


@pytest.fixture(scope="module")
def pi_tool_search_bodies() -> dict[str, Any]:
    return _stored_pi16_wire(STORED_TOOL_SEARCH, RESPONSES_API,
                             sorted(TOOL_ADDITIONS.glob("*.jsonl")),
                             "--model", "gpt-5", "--compat", json.dumps(TOOL_SEARCH))


@pytest.mark.parametrize("name", sorted(path.name for path in TOOL_ADDITIONS.glob("*.jsonl")))
def test_tools_added_mid_way_are_loaded_by_a_tool_search_as_pi_16_loads_them(
        name: str, pi_tool_search_bodies: dict[str, Any]) -> None:
    """models.json's `supportsToolSearch` (a Responses model taking system messages in place,
    without additional_tools items) was not read: pi 1.6 sends the tools in force after the last
    removal or redeclaration at the top and loads each later addition where it was made, as a
    client tool search's call and its output (the tools deferred); pi-lsp sent every current
    tool at the top, so each tool added mid-session rewrote the cached prefix."""
    model = _with_compat(ModelRegistry().get("openai", "gpt-5"), TOOL_SEARCH)
    ours = _ours_for(TOOL_ADDITIONS / name, ("openai", "gpt-5"), ModelRegistry(extra=[model]))
    pi = pi_tool_search_bodies[name]
    assert _comparable(ours, RESPONSES_API, True, pi=False) == \
        _comparable(pi, RESPONSES_API, True, pi=True)
# Routing preferences of another type than pi 1.6's schema says, at each level of a models.json,
# and the lines pi 1.6's ModelRuntime refuses each with (stored for machines without it).
STORED_ROUTING_ERRORS = STORED_BODIES.with_name("pi16-routing-errors.json")
BAD_ROUTING = {
    "provider zdr": {"openrouter": {"compat": {"openRouterRouting": {"zdr": "yes"}}}},
    "model order": {"openrouter": {"baseUrl": "https://openrouter.ai/api/v1", "models": [
        {"id": "my/model", "api": CHAT_API, "compat": {"openRouterRouting": {"order": "a"}}}]}},
    "override data_collection": {"openai": {"modelOverrides": {"gpt-5": {"compat": {
        "openRouterRouting": {"data_collection": "maybe"}}}}}},
    "only of numbers": {"openai": {"compat": {"openRouterRouting": {"only": ["a", 1]}}}},
    "sort": {"openai": {"compat": {"openRouterRouting": {"sort": 5}}}},
    "sort's by": {"openai": {"compat": {"openRouterRouting": {"sort": {"by": 1}}}}},
    "max_price": {"openai": {"compat": {"openRouterRouting": {"max_price": {"prompt": True}}}}},
    "latency": {"openai": {"compat": {"openRouterRouting": {
        "preferred_max_latency": {"p50": "x"}}}}},
    "null zdr": {"openai": {"compat": {"openRouterRouting": {"zdr": None}}}},
}
PI16_MODELS_ERROR = """
const agent = %s;
const runtime = await pi.ModelRuntime.create({modelsPath: `${agent}/models.json`,
                                              authPath: `${agent}/auth.json`});
process.stdout.write(JSON.stringify(runtime.getError() ?? null));
"""


def _pi16_models_error(folder: Path) -> list[str] | None:
    """The lines of pi 1.6's error reading `folder`'s models.json, less the file's name
    (None: it reads it)."""
    error: str | None = json.loads(pi16_eval(PI16_MODELS_ERROR % json.dumps(str(folder))))
    return None if error is None else error.split("\n\nFile: ")[0].split("\n")


@pytest.mark.parametrize("case", BAD_ROUTING)
def test_a_routing_preference_of_another_type_is_refused_naming_it(
        case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pi 1.6 refuses a models.json whose `openRouterRouting` holds a value of another type
    than its schema's ("zdr": "yes", "order": "a"), naming the field; pi-lsp sent it to
    OpenRouter as written, which refuses the request or reads no policy where the user wrote
    one. pi 1.6's lines are stored (checked where installed); pi-lsp's one error names the
    file and one of the fields pi names."""
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path))
    ours = _refused_as_pi16_refuses(tmp_path, BAD_ROUTING[case], STORED_ROUTING_ERRORS, case)
    assert ours is None, ours


STORED_FLAG_ERRORS = STORED_BODIES.with_name("pi16-compat-flag-errors.json")
LAB_PROVIDER = {"baseUrl": "http://127.0.0.1:9/v1", "api": CHAT_API, "apiKey": "k"}
BAD_FLAGS = {
    "provider's null flags": {"lab": {**LAB_PROVIDER, "models": [{"id": "m"}],
                                      "compat": {"vllmPriority": None, "supportsStore": None}}},
    "model's null flag": {"lab": {**LAB_PROVIDER, "models": [
        {"id": "m", "compat": {"thinkingFormat": None}}]}},
    "override's null flag": {"openai": {"modelOverrides": {"gpt-5": {"compat": {
        "supportsDeveloperRole": None}}}}},
    "null routing": {"openai": {"compat": {"openRouterRouting": None}}},
    "null message threads": {"anthropic": {"compat": {"supportsMessageThreads": None}}},
    "temperature of a string": {"anthropic": {"compat": {"supportsTemperature": "no"}}},
    "message threads of a number": {"anthropic": {"compat": {"supportsMessageThreads": 1}}},
}


@pytest.mark.parametrize("case", BAD_FLAGS)
def test_a_compat_flag_written_null_or_of_another_type_is_refused_naming_it(
        case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pi 1.6 refuses a models.json whose compat flag is null ("supportsStore: must be
    boolean", "openRouterRouting: must be object"), at any level, and a supportsTemperature or
    supportsMessageThreads of another type; pi-lsp read null as unset and never looked at
    those two. pi 1.6's lines are stored (checked where installed); pi-lsp's one error names
    the file and one of the fields pi names."""
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path))
    ours = _refused_as_pi16_refuses(tmp_path, BAD_FLAGS[case], STORED_FLAG_ERRORS, case)
    assert ours is None, ours


def _refused_as_pi16_refuses(folder: Path, providers: object, stored_at: Path, case: str
                             ) -> str | None:
    """None where the models.json of `providers` in `folder` is refused naming the file and one
    of the fields pi 1.6 names (its lines stored at `stored_at`, checked where installed), else
    pi-lsp's error."""
    (folder / "models.json").write_text(json.dumps({"providers": providers}), "utf-8")
    stored = json.loads(stored_at.read_text("utf-8"))[case]
    if pi16_node() is not None:
        assert _pi16_models_error(folder) == stored
    named = {line.removeprefix("  - ").partition(": ")[0] for line in stored[1:]}
    with pytest.raises(ModelsFileError) as raised:
        load_models(folder, project=False)
    where, _, ours = str(raised.value).partition(": ")
    field = re.sub(r"\[(\w+)\]", r".\1", ours.replace(": openRouterRouting", ".openRouterRouting"))
    right = where == str(folder / "models.json") and field.partition(": ")[0] in named
    return None if right else ours


def test_a_flag_pi_16_does_not_know_may_be_null(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The null rule is for the flags pi 1.6's schema knows: it reads an unknown one's null
    (checked where installed), and so does pi-lsp."""
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path))
    (tmp_path / "models.json").write_text(json.dumps({"providers": {"lab": {
        **LAB_PROVIDER, "models": [{"id": "m"}], "compat": {"noSuchFlag": None}}}}), "utf-8")
    if pi16_node() is not None:
        assert _pi16_models_error(tmp_path) is None
    models, _providers = load_models(tmp_path, project=False)
    assert [model.id for model in models if model.provider == "lab"] == ["m"]


# Every preference pi 1.6's schema knows, of each type it takes, and keys it does not know.
GOOD_ROUTING = {"allow_fallbacks": False, "require_parameters": True, "data_collection": "deny",
                "zdr": True, "enforce_distillable_text": False, "order": ["a"], "only": [],
                "ignore": ["b"], "quantizations": ["fp8"], "sort": {"by": "price",
                                                                    "partition": None, "x": 1},
                "max_price": {"prompt": 1, "completion": "2", "image": 0.5, "y": True},
                "preferred_min_throughput": 10, "preferred_max_latency": {"p50": 1, "p99": 2.5},
                "experimental": {"z": 1}}


def test_routing_preferences_pi_16_takes_are_sent_as_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check refuses only what pi 1.6 refuses: a value of each type its schema takes, and
    keys it does not know, are read and sent as written."""
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path))
    (tmp_path / "models.json").write_text(json.dumps({"providers": {"openai": {"compat": {
        "openRouterRouting": GOOD_ROUTING}}}}), "utf-8")
    if pi16_node() is not None:
        assert _pi16_models_error(tmp_path) is None
    models, _ = load_models(tmp_path, project=False)
    assert models and all(model.compat.open_router_routing == GOOD_ROUTING for model in models)
