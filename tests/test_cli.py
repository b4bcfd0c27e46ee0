"""The `pi-lsp` command line, run as a user runs it: a separate process."""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pi_lsp.server import server as server_module
from pi_lsp.server.server import first_client
from pi_lsp.session.catalog import cli_session_dir
from pi_lsp.session.entries import AssistantMessage, Replacement, TextContent, Usage, UserMessage
from pi_lsp.session.tree import SessionTree
from tests.conftest import EXAMPLE_WORKSPACE, conformance_files
from tests.test_system_messages import pi16_eval
from tests.waits import CEILING_S, PROCESS_CEILING_S, run_cli, until_sync

SAMPLE = conformance_files()[0]


def expected(path: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(path.with_suffix(".expected.json").read_text("utf-8"))
    return result


def test_context_json_default_leaf_is_pis_context() -> None:
    result = run_cli("context", str(SAMPLE), "--json")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1
    assert json.loads(lines[0]) == expected(SAMPLE)["default"]


def test_context_json_one_line_per_leaf_in_order() -> None:
    cases = expected(SAMPLE)["contexts"]
    leaves = list(cases)[:3][::-1]
    args = [arg for leaf in leaves for arg in ("--leaf", leaf)]
    result = run_cli("context", str(SAMPLE), *args, "--json")
    assert result.returncode == 0, result.stderr
    printed = [json.loads(line) for line in result.stdout.splitlines()]
    assert printed == [cases[leaf]["context"] for leaf in leaves]


def test_context_llm_layer_has_only_model_roles() -> None:
    leaf = list(expected(SAMPLE)["contexts"])[-1]
    result = run_cli("context", str(SAMPLE), "--leaf", leaf, "--layer", "llm", "--json")
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    assert set(printed) == {"messages"}
    assert {m["role"] for m in printed["messages"]} <= {"user", "assistant", "toolResult"}
    assert len(printed["messages"]) == len(expected(SAMPLE)["contexts"][leaf]["llm"])


def test_context_json_of_a_long_context_is_the_context_encoded_whole(tmp_path: Path) -> None:
    # It is written a batch of messages at a time; the line must not show where batches end.
    from pi_lsp.context.build import build_session_context
    from pi_lsp.session.entries import encoder

    tree = SessionTree.create(str(tmp_path / "s.jsonl"), str(tmp_path))
    tree.append_model_change("anthropic", "claude-sonnet-4-5")
    for index in range(2_500):
        tree.append_message(UserMessage(content=f"{index} \u2028 \U0001f642", timestamp=index))
    tree = SessionTree.open(tree.path)
    result = run_cli("context", tree.path, "--json", text=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout == encoder.encode(build_session_context(tree, tree.leaf_id)) + b"\n"


def test_the_command_line_imports_a_command_s_modules_when_it_runs() -> None:
    # `pi-lsp context` is what an editor runs often: it must not wait for the other commands'.
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, pi_lsp.cli; pi_lsp.cli.build_parser(); "
         "print(sorted(m for m in sys.modules if m.startswith('pi_lsp.')))"],
        capture_output=True, text=True, timeout=PROCESS_CEILING_S, check=True)
    for module in ("pi_lsp.cli_changes", "pi_lsp.session.catalog", "pi_lsp.context.layers",
                   "pi_lsp.session.outline", "pi_lsp.context.build"):
        assert module not in loaded.stdout


def test_a_session_in_pis_own_folder_works_in_the_directory_pi_recorded(
        tmp_path: Path) -> None:
    # In pi's own session folder (~/.pi/agent/sessions/--<cwd>--/), the user's own store, the
    # folder's name and the header's cwd agree on the workspace, whichever directory the
    # command runs in. The same file anywhere else is committed data, whose header does not
    # choose the folder (this test took it from there before).
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    lines = SAMPLE.read_bytes().splitlines()
    header = json.loads(lines[0])
    header["cwd"] = str(project)
    session = cli_session_dir(str(project)) / "s.jsonl"
    session.parent.mkdir(parents=True)
    session.write_bytes(b"\n".join([json.dumps(header).encode(), *lines[1:]]) + b"\n")
    result = run_cli("context", str(session), "--layer", "request", "--json", cwd=elsewhere)
    assert result.returncode == 0, result.stderr
    assert f"<cwd>\\n{project}\\n</cwd>" in result.stdout and str(elsewhere) not in result.stdout
    shipped = tmp_path / "s.jsonl"
    shutil.copy(session, shipped)
    refused = run_cli("context", str(shipped), "--layer", "request", "--json", cwd=elsewhere)
    assert refused.returncode == 2 and not refused.stdout
    assert f"recorded in {project} (its header's cwd), but this command runs in {elsewhere}" \
        in refused.stderr
    there = run_cli("context", str(shipped), "--layer", "request", "--json", cwd=project)
    assert there.returncode == 0 and f"<cwd>\\n{project}\\n</cwd>" in there.stdout


def test_context_request_of_a_model_pi_cannot_restore_is_on_the_default(
        tmp_path: Path) -> None:
    """A session whose model id pi's catalog lacks (anthropic/m): the request showed it sent
    as is, where `run`, as pi 1.6, continues on the default model."""
    session = tmp_path / "s.jsonl"
    tree = SessionTree.create(str(session), str(tmp_path))
    tree.append_model_change("anthropic", "m")
    tree.append_message(UserMessage(content="hi", timestamp=1))
    result = run_cli("context", str(session), "--layer", "request", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["model"] == "claude-opus-5-5"  # pi 1.6's default


def test_context_preview_is_readable(example_session: Path) -> None:
    result = run_cli("context", str(example_session))
    assert result.returncode == 0, result.stderr
    assert "compactionSummary" in result.stdout
    assert "tok" in result.stdout
    assert "model: anthropic/claude-opus-4-5" in result.stdout
    assert "thinking: high" in result.stdout


def test_tree_json_is_pis_tree() -> None:
    result = run_cli("tree", str(SAMPLE), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == expected(SAMPLE)["tree"]


def test_tree_json_is_the_tree_encoded_whole() -> None:
    # It is written a node at a time; the line must be msgspec's, byte for byte.
    from pi_lsp.session.entries import encoder
    from pi_lsp.session.outline import nested_tree

    result = run_cli("tree", str(SAMPLE), "--json", text=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout == encoder.encode(nested_tree(SessionTree.open(str(SAMPLE)))) + b"\n"


@pytest.mark.parametrize("line", ["42", "[1]", '"s"', "true"])
def test_tree_json_draws_a_line_that_is_no_object_as_pi(tmp_path: Path, line: str) -> None:
    """`tree --json` failed ("Expected `object`, got `int`") on a version-3 line that is JSON
    but no object; pi 1.6's getTree draws it as a root with no id (checked with pi 1.6)."""
    session = tmp_path / "s.jsonl"
    session.write_text(
        '{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00Z","cwd":"/"}\n'
        '{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:01Z",'
        '"message":{"role":"user","content":"hi","timestamp":1}}\n' + line + "\n", "utf-8")
    result = run_cli("tree", str(session), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [{"id": "a1", "label": None, "children": []},
                                         {"label": None, "children": []}]


def test_tree_json_of_a_long_chain(tmp_path: Path) -> None:
    """A chain of ~495+ entries (an ordinary long session) failed with a RecursionError:
    msgspec encodes nested children recursively."""
    count = 5_000
    lines = [{"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00Z",
              "cwd": str(tmp_path)}]
    lines += [{"type": "message", "id": f"e{i}", "parentId": f"e{i - 1}" if i else None,
               "timestamp": "2026-01-01T00:00:01Z",
               "message": {"role": "user", "content": "x", "timestamp": 1}}
              for i in range(count)]
    session = tmp_path / "s.jsonl"
    session.write_text("".join(json.dumps(line) + "\n" for line in lines), "utf-8")
    result = run_cli("tree", str(session), "--json")
    assert result.returncode == 0, result.stderr
    nodes = "".join(f'{{"id":"e{i}","label":null,"children":[' for i in range(count))
    assert result.stdout == f"[{nodes}{']}' * count}]\n"


def test_tree_json_writes_numbers_as_pi_writes_them(tmp_path: Path) -> None:
    """Labels and ids that are numbers, or hold them, were written as msgspec writes them
    (1.5e300, 1e21, 1e-6, 2.0). Expected: pi 1.6's getTree on this file, through
    JSON.stringify."""
    stamp = '"timestamp":"2026-01-01T00:00:0{}Z"'
    lines = [
        '{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00Z","cwd":"/"}',
        '{"type":"custom","customType":"note","id":"a","parentId":null,' + stamp.format(1) + "}",
        '{"type":"custom","customType":"note","id":"b","parentId":"a",' + stamp.format(2) + "}",
        '{"type":"label","id":"c","parentId":"b","targetId":"a","label":1.5e300,'
        + stamp.format(3) + "}",
        '{"type":"label","id":"d","parentId":"c","targetId":"b",'
        '"label":{"n":[1e21,0.000001,2.0,1E400]},' + stamp.format(4) + "}",
        '{"type":"custom","customType":"note","id":{"k":1e-7},"parentId":"b",'
        + stamp.format(5) + "}"]
    session = tmp_path / "s.jsonl"
    session.write_text("\n".join(lines) + "\n", "utf-8")
    result = run_cli("tree", str(session), "--json")
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        '[{"id":"a","label":1.5e+300,"children":[{"id":"b","label":{"n":[1e+21,0.000001,2,null]},'
        '"children":[{"id":"c","label":null,"children":[{"id":"d","label":null,"children":[]}]},'
        '{"id":{"k":1e-7},"label":null,"children":[]}]}]}]\n')


def test_tree_text_marks_labels_path_and_leaf(example_session: Path) -> None:
    result = run_cli("tree", str(example_session))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    leaf_lines = [line for line in lines if line.endswith("← leaf")]
    assert len(leaf_lines) == 1
    assert "[orm-dead-end]" in result.stdout
    assert any(line.lstrip("│├─ ").startswith("* ") for line in lines)
    # The dead-end branch is shown but not on the current path.
    dead_end = next(line for line in lines if "[orm-dead-end]" in line)
    assert "* " not in dead_end.split("28511eec")[0]


def test_check_clean_and_damaged(tmp_path: Path, example_session: Path) -> None:
    clean = run_cli("check", str(example_session))
    assert clean.returncode == 0, clean.stdout
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_bytes(example_session.read_bytes() + b'{"type":"message",broken\nnull\n')
    report = run_cli("check", str(damaged))
    assert report.returncode == 1
    assert "malformed" in report.stdout
    assert "not-object" in report.stdout


def test_sessions_lists_example_workspace() -> None:
    result = run_cli("sessions", str(EXAMPLE_WORKSPACE), "--json")
    assert result.returncode == 0, result.stderr
    sessions = json.loads(result.stdout)["sessions"]
    assert [s["name"] for s in sessions] == ["Fix slow order listing"]
    assert sessions[0]["entryCount"] == 56
    assert sessions[0]["firstMessage"].startswith("GET /orders is really slow")


# pi 1.6's createBranchedSession at its leaf when the last line's id is "": it finds no path.
PI16_EMPTY_ID_FORK = "Entry  not found"


def session_with_an_idless_leaf(session: Path, leaf_id: str | None) -> None:
    """A session whose last line has no id (or the id `leaf_id`)."""
    tree = SessionTree.create(str(session), str(session.parent))
    tree.append_message(UserMessage(content="hi", timestamp=1))
    idless = {"type": "message", "parentId": tree.leaf_id, "timestamp": "2026-01-01T00:00:01Z",
              "message": {"role": "user", "content": "no id", "timestamp": 1}}
    if leaf_id is not None:
        idless["id"] = leaf_id
    with session.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(idless) + "\n")


@pytest.mark.parametrize("leaf_id", [None, ""])
def test_fork_at_a_leaf_without_an_id_says_so(tmp_path: Path, leaf_id: str | None) -> None:
    """A session whose last line is an entry without an id was said to be empty; one whose
    last line's id is "" was forked, where pi 1.6 finds no path there (PI16_EMPTY_ID_FORK)."""
    session = tmp_path / "s.jsonl"
    session_with_an_idless_leaf(session, leaf_id)
    result = run_cli("fork", str(session))
    assert result.returncode == 2
    assert result.stderr == f"pi-lsp: {session}: the leaf (line 3) has no id, so no fork can " \
        "end there; name the entry to fork at with --leaf ID\n"
    assert list(tmp_path.iterdir()) == [session]


@pytest.mark.parametrize(("leaf_id", "shown"), [(5, "5"), (True, "true"), ({"a": 1}, '{"a":1}')])
def test_fork_at_a_leaf_whose_id_is_no_text_names_it(tmp_path: Path, leaf_id: Any,
                                                      shown: str) -> None:
    """pi 1.6 forks at a last line whose id is 5 or true, which pi-lsp cannot name; the
    refusal said the line had no id."""
    session = tmp_path / "s.jsonl"
    session_with_an_idless_leaf(session, leaf_id)
    result = run_cli("fork", str(session))
    assert (result.returncode, result.stderr) == (
        2, f"pi-lsp: {session}: the leaf (line 3) has the id {shown}, which is not text, so no "
           "fork can end there; name the entry to fork at with --leaf ID\n")
    assert list(tmp_path.iterdir()) == [session]


def test_the_stored_empty_id_fork_refusal_is_pi16s(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    session_with_an_idless_leaf(session, "")
    assert pi16_eval(f"const s = pi.SessionManager.open({json.dumps(str(session))});"
                     "try { s.createBranchedSession(s.getLeafId()); }"
                     "catch (error) { process.stdout.write(error.message); }") == \
        PI16_EMPTY_ID_FORK


def test_fork_prints_new_file_with_same_context(tmp_path: Path, example_session: Path) -> None:
    source = tmp_path / "sessions" / example_session.name
    source.parent.mkdir()
    source.write_bytes(example_session.read_bytes())
    result = run_cli("fork", str(source), "--leaf", "28511eec")
    assert result.returncode == 0, result.stderr
    forked = Path(result.stdout.strip())
    assert forked.parent == source.parent and forked.exists()
    header = json.loads(forked.read_text("utf-8").splitlines()[0])
    assert header["parentSession"] == str(source)
    ours = run_cli("context", str(forked), "--json").stdout
    theirs = run_cli("context", str(source), "--leaf", "28511eec", "--json").stdout
    assert json.loads(ours) == json.loads(theirs)


def test_fork_in_a_folder_whose_path_is_not_utf8_prints_the_forks_own_path(
        tmp_path: Path) -> None:
    """The fork's path was printed with U+FFFD for the byte that is not UTF-8, so
    `f=$(pi-lsp fork …)` got a path that does not exist."""
    folder = os.fsencode(tmp_path) + b"/bad\xffdir"
    os.mkdir(folder)
    session = os.fsdecode(folder + b"/s.jsonl")
    tree = SessionTree.create(session, str(tmp_path))
    tree.append_message(UserMessage(content="hi", timestamp=1))
    result = run_cli("fork", session, text=False)
    assert result.returncode == 0, result.stderr
    forked = result.stdout.removesuffix(b"\n")
    assert os.path.dirname(forked) == folder and os.path.isfile(forked)


def test_fork_in_a_folder_with_a_line_break_prints_the_forks_own_path(tmp_path: Path) -> None:
    """The line break was spelled `\\n` (meant for run's `session:` line on the terminal), so
    `f=$(pi-lsp fork …)` got a path that does not exist."""
    folder = tmp_path / "a\nb"
    folder.mkdir()
    tree = SessionTree.create(str(folder / "s.jsonl"), str(tmp_path))
    tree.append_message(UserMessage(content="hi", timestamp=1))
    result = run_cli("fork", str(folder / "s.jsonl"))
    assert result.returncode == 0, result.stderr
    forked = Path(result.stdout.removesuffix("\n"))
    assert forked.parent == folder and forked.is_file()


@pytest.mark.parametrize("command", ["context", "tree", "check", "fork"])
def test_bad_files_get_one_line_and_exit_2(tmp_path: Path, command: str) -> None:
    not_session = tmp_path / "notes.jsonl"
    not_session.write_text('{"hello": "world"}\n')
    for target in (tmp_path / "missing.jsonl", tmp_path, not_session):
        result = run_cli(command, str(target))
        assert result.returncode == 2, (target, result.stdout)
        assert result.stderr.count("\n") == 1, result.stderr
        assert "Traceback" not in result.stderr
        assert str(target) in result.stderr


def test_unknown_leaf_is_a_clear_error() -> None:
    result = run_cli("context", str(SAMPLE), "--leaf", "nope1234")
    assert result.returncode == 2
    assert "nope1234" in result.stderr and "Traceback" not in result.stderr


def test_usage_errors_exit_2() -> None:
    result = run_cli("context")
    assert result.returncode == 2
    assert result.stderr.startswith("pi-lsp:")


def written_session(workspace: Path) -> SessionTree:
    """A session file with only setup entries, as an older pi-lsp wrote them (new ones wait
    for a prompt before they have a file, as pi's do)."""
    directory = workspace / ".pi" / "sessions"
    directory.mkdir(parents=True, exist_ok=True)
    tree = SessionTree.create_in(directory, str(workspace))
    tree.append_model_change("anthropic", "claude-sonnet-4-5")
    return tree


def test_sessions_escapes_control_characters(tmp_path: Path) -> None:
    named = written_session(tmp_path)
    named.append_session_info("two\nlines\x1b[31m red")
    unnamed = written_session(tmp_path)
    unnamed.append_message(UserMessage(content="first\r\nprompt\u2028end", timestamp=1))
    result = run_cli("sessions", str(tmp_path))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 4, result.stdout  # two lines per session, whatever the names hold
    assert "\x1b" not in result.stdout and "\r" not in result.stdout
    # A title is one line of text: a name's line breaks and control characters are spaces.
    assert any(line.endswith("two lines [31m red") for line in lines), lines
    # A title is one line: the first prompt's line breaks are spaces (catalog.session_title).
    assert any(line.endswith("  first prompt end") for line in lines), lines


def test_sessions_escapes_a_header_timestamp(tmp_path: Path) -> None:
    """A committed header's stamp cleared the screen and set the clipboard (OSC 52) when
    listed (found in review). As in pi, one no Date reads is not the session's time (its
    file's is), nor its `created` (pi's toISOString throws for its Invalid Date)."""
    sessions = tmp_path / ".pi" / "sessions"
    sessions.mkdir(parents=True)
    hostile = "\x1b[2J\x1b]52;c;ZWNobw==\x07HIDDEN"
    (sessions / "s.jsonl").write_text(json.dumps({
        "type": "session", "version": 3, "id": "s", "cwd": str(tmp_path),
        "timestamp": hostile}) + "\n")
    for args in ([], ["--json"]):
        result = run_cli("sessions", str(tmp_path), *args)
        assert result.returncode == 0, result.stderr
        assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    (listed,) = json.loads(result.stdout)["sessions"]
    assert listed["created"] == ""


def test_compact_plan_says_when_compact_would_refuse(tmp_path: Path,
                                                     example_session: Path) -> None:
    example_session = Path(shutil.copy(example_session, tmp_path))
    plan = run_cli("compact", str(example_session), "--plan", "--keep-recent-tokens", "100")
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["firstKeptEntryId"]
    for extra in ([], ["--keep-recent-tokens", "100000"]):
        refused = run_cli("compact", str(example_session), "--plan", *extra)
        assert refused.returncode == 1, refused.stdout
        assert json.loads(refused.stdout) is None  # the server's dry run answers null too
        assert refused.stderr.startswith("pi-lsp: compact would refuse: nothing to compact")
        # and compact itself refuses for the same reason
        real = run_cli("compact", str(example_session), *extra)
        assert real.returncode == 2
        assert real.stderr.removeprefix("pi-lsp: ") == \
            refused.stderr.removeprefix("pi-lsp: compact would refuse: ")


def test_context_total_is_explained(example_session: Path) -> None:
    result = run_cli("context", str(example_session), "--leaf", "29ad348d")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    rows = [line for line in lines if " tok  " in line]
    total_at = next(i for i, line in enumerate(lines) if " messages, about " in line)
    total = int(lines[total_at].split("about ")[1].split()[0].replace(",", ""))
    made = re.fullmatch(r"  = ([\d,]+), the usage the model reported for its reply at (\w+), "
                        r"\+ ([\d,]+) estimated for the 1 message after it", lines[total_at + 1])
    assert made, lines[total_at + 1]
    reported, anchor, after = made.groups()
    assert int(reported.replace(",", "")) + int(after.replace(",", "")) == total
    last_row = rows[-1].split()
    assert int(after.replace(",", "")) == int(last_row[2])  # the one message after the reply
    assert any(row.split()[0] == anchor and row.split()[1] == "assistant" for row in rows)
    row_sum = sum(int(row.split()[2]) for row in rows)
    assert lines[total_at + 2] == (f"  (each row is an estimate, characters / 4: they add up "
                                   f"to {row_sum:,})")


def test_context_total_without_a_reply_is_the_sum_of_the_rows(tmp_path: Path) -> None:
    tree = written_session(tmp_path)
    tree.append_message(UserMessage(content="x" * 400, timestamp=1))
    result = run_cli("context", tree.path)
    assert result.returncode == 0, result.stderr
    assert "1 messages, about 100 tokens\nmodel:" in result.stdout


def test_context_total_after_an_edit_or_a_compaction_is_explained_as_estimated(
        tmp_path: Path) -> None:
    """After an edit, or a compaction keeping the reply, the total is all estimates, but the
    text explained it from the reply's reported usage ('+ -98 estimated')."""
    tree = written_session(tmp_path)
    question = tree.append_message(UserMessage(content="a long question " * 40, timestamp=1))
    reply = tree.append_message(AssistantMessage(
        content=[TextContent(text="answer")], api="anthropic-messages", provider="anthropic",
        model="claude-sonnet-4-5", usage=Usage(input=100, output=10, total_tokens=110),
        stop_reason="stop", timestamp=2))
    tree.append_context_edit(question, Replacement("short"))
    edited = tree.append_message(UserMessage(content="next", timestamp=3))
    tree.move_leaf(reply, durable=False)
    tree.append_compaction("summary", question, 200)
    compacted = tree.append_message(UserMessage(content="next", timestamp=3))
    for leaf in (edited, compacted):
        result = run_cli("context", tree.path, "--leaf", leaf)
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        rows = sum(int(line.split(" tok  ")[0].split()[-1]) for line in lines
                   if " tok  " in line)
        total_at = next(i for i, line in enumerate(lines) if " messages, about " in line)
        assert lines[total_at].endswith(f"about {rows:,} tokens")
        assert not lines[total_at + 1].startswith("  ="), lines[total_at + 1]


def test_version() -> None:
    from importlib.metadata import version

    result = run_cli("--version")
    assert result.returncode == 0
    assert result.stdout == f"pi-lsp {version('pi-lsp')}\n"


def test_bare_command_lists_the_commands() -> None:
    result = run_cli()
    assert result.returncode == 2
    assert result.stdout == ""
    for command in ("serve", "run", "context", "tree", "check", "sessions", "fork", "compact",
                    "branch"):
        assert f"\n    {command} " in result.stderr, result.stderr


def test_the_server_starts_without_the_model_sdks_and_pillow() -> None:
    # They were most of the time to the `initialize` answer (benchmarks/bench_startup.py); a
    # turn imports the one it needs, a read of an image Pillow, a skill file ruamel.yaml.
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, pi_lsp.cli, pi_lsp.server.server; "
         "print(sorted({m.split('.')[0] for m in sys.modules} & "
         "{'anthropic', 'openai', 'PIL', 'ruamel'}))"],
        capture_output=True, text=True, timeout=PROCESS_CEILING_S, check=True)
    assert loaded.stdout.strip() == "[]"


def test_a_harness_is_made_without_the_model_sdks(tmp_path: Path, example_session: Path) -> None:
    """Every command makes one, a label included: importing an SDK there held the server's loop
    for seconds. The turn or summary that needs one imports it off the loop."""
    sessions = tmp_path / ".pi" / "sessions"
    sessions.mkdir(parents=True)
    path = sessions / "s.jsonl"
    shutil.copyfile(example_session, path)
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys; from pathlib import Path; "
         "from pi_lsp.server.config import Config; from pi_lsp.server.hub import SessionHub; "
         f"hub = SessionHub([Path({str(tmp_path)!r})], Config()); "
         f"hub.harness(Path({str(path)!r})).set_label('456798a9', 'checked'); "
         "print(sorted({m.split('.')[0] for m in sys.modules} & {'anthropic', 'openai'}))"],
        capture_output=True, text=True, timeout=PROCESS_CEILING_S, check=True)
    assert loaded.stdout.strip() == "[]"
    assert SessionTree.open(str(path)).label("456798a9") == "checked"


def test_context_shows_the_edits_in_force(tmp_path: Path, example_session: Path) -> None:
    from pi_lsp.context.edits import edit_context

    path = tmp_path / "s.jsonl"
    shutil.copyfile(example_session, path)
    tree = SessionTree.open(str(path))
    omit = edit_context(tree, "145bca81", None)
    edit_context(tree, "456798a9", "I added the test.")
    result = run_cli("context", str(path))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    removed = next(i for i, line in enumerate(lines) if line.startswith("- 145bca81"))
    assert lines[removed - 1].split()[0] == "a562cc8e"  # in its place, after its call
    assert f"0 tok  removed by edit {omit} (was 301 tok: bash: QUERY PLAN" in lines[removed]
    assert any(line.startswith("✎ 456798a9  assistant") and " 5 tok  I added the test." in line
               for line in lines)
    assert "context edits: 1 removed, 1 replaced: their messages 700 → 5 tokens (-695)" in lines



# What a committed session can hold: OSC 52 (set the clipboard), a clear screen, bidi controls
# (Trojan Source) and a line break before text that would pass for a line of the output.
HOSTILE = "\x1b]52;c;cm0gLXJmIH4K\x07\x1b[2J\u202e\u2066\nFORGED"
SPELLED = "\\x1b]52;c;cm0gLXJmIH4K\\x07\\x1b[2J\\u202e\\u2066"
RAW = ("\x1b", "\x07", "\u202e", "\u2066")


def usage() -> dict[str, Any]:
    cost = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}
    return {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
            "cost": cost}


def entry(kind: str, entry_id: str, parent: str | None, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "id": entry_id, "parentId": parent,
            "timestamp": "2026-12-02T12:05:00.728Z", **fields}


def hostile_session(path: Path) -> None:
    """Every value the CLI prints from a session, each ending in `HOSTILE`."""
    user = "u1" + HOSTILE
    reply = [{"type": "text", "text": f"reply{HOSTILE} " + "y" * 400},
             {"type": "toolCall", "id": "c1", "name": "bash" + HOSTILE, "arguments": {}}]
    rows = [
        {"type": "session", "version": 3, "id": "s", "timestamp": "2026-12-02T12:05:00.727Z",
         "cwd": str(path.parent)},
        entry("model_change", "m1", None, provider="anthropic" + HOSTILE, modelId="x" + HOSTILE),
        entry("thinking_level_change", "t1", "m1", thinkingLevel="high" + HOSTILE),
        entry("message", user, "t1", message={
            "role": "user", "content": f"hi{HOSTILE} " + "x" * 400, "timestamp": 1}),
        entry("label", "l1", user, targetId=user, label="lab" + HOSTILE),
        entry("session_info", "n1", "l1", name="name" + HOSTILE),
        entry("message", "a1", "n1", message={
            "role": "assistant", "content": reply, "api": "anthropic-messages",
            "provider": "anthropic", "model": "m", "usage": usage(), "stopReason": "toolUse",
            "timestamp": 2}),
        entry("message", "u2", "a1", message={"role": "user", "content": "next" + HOSTILE,
                                              "timestamp": 3}),
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def without_a_model(tmp_path: Path) -> dict[str, str]:
    """An environment whose summaries are extractive: the session's own text."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return {**env, "PI_CODING_AGENT_DIR": str(tmp_path / "agent")}


@pytest.mark.parametrize("args", [["tree"], ["context"], ["check"],
                                  ["compact", "--keep-recent-tokens", "5"],
                                  ["branch", "--to", "t1", "--summarize"]])
def test_session_text_reaches_the_terminal_escaped(tmp_path: Path, args: list[str]) -> None:
    """Ids, labels, names, models, levels, tool names and summaries set the clipboard, cleared
    the screen and reordered lines (found in review)."""
    session = tmp_path / "hostile.jsonl"
    hostile_session(session)
    result = run_cli(args[0], str(session), *args[1:], cwd=tmp_path,
                     env=without_a_model(tmp_path))  # where its header says it ran
    assert result.returncode in (0, 1), result.stderr
    printed = result.stdout + result.stderr
    assert not [char for char in RAW if char in printed], repr(printed)
    assert SPELLED in result.stdout
    if args[0] in ("tree", "context", "check"):  # one line per row: no line of the session's
        assert not [line for line in printed.splitlines() if line.startswith("FORGED")]


def test_a_prompt_to_resend_keeps_its_lines_and_spells_the_rest(tmp_path: Path) -> None:
    session = tmp_path / "hostile.jsonl"
    hostile_session(session)
    result = run_cli("branch", str(session), "--to", "u1" + HOSTILE)
    assert result.returncode == 0, result.stderr
    assert not [char for char in RAW if char in result.stdout], repr(result.stdout)
    assert result.stdout.startswith(f"leaf is now t1\nprompt to edit and resend:\nhi{SPELLED}\n"
                                    f"FORGED xxx")


def test_one_line_previews_hold_no_bidi_controls() -> None:
    from pi_lsp.session.outline import shorten

    # Joiners stay: emoji and scripts need them.
    assert shorten("a\u202eb\u2066c\u2069\u202ad\u200de\u2028f\x9b") == "a b c d\u200de f"


def nested_forks(path: Path, forks: int) -> None:
    """Each user message forks: a reply that ends there, and the next user message."""
    rows: list[dict[str, Any]] = [{"type": "session", "version": 3, "id": "s",
                                   "timestamp": "2026-12-02T12:05:00.727Z",
                                   "cwd": str(path.parent)}]
    for n in range(forks):
        user = {"role": "user", "content": f"prompt {n}", "timestamp": 1}
        rows.append(entry("message", f"u{n}", f"u{n - 1}" if n else None, message=user))
        rows.append(entry("message", f"a{n}", f"u{n}", message={
            "role": "assistant", "content": [{"type": "text", "text": "ok"}],
            "api": "anthropic-messages", "provider": "anthropic", "model": "m",
            "usage": usage(), "stopReason": "stop", "timestamp": 2}))
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_a_deep_tree_prints_in_a_bounded_width(tmp_path: Path) -> None:
    """2,000 nested forks printed 8 MB of indentation: each fork indented every row under it
    by two more spaces (found in review: 10,000 made 200 MB)."""
    session = tmp_path / "deep.jsonl"
    forks = 2000
    nested_forks(session, forks)
    result = run_cli("tree", str(session))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1 + 2 * forks  # the title, and a row for every entry
    assert max(map(len, lines)) < 160, max(map(len, lines))  # 32 forks deep at most, and a mark
    # Rows keep their depth up to the cap, and spell it past there.
    assert lines[5] == "    ├─ * u2 user: prompt 2"
    assert [line.lstrip(" ") for line in lines[-2:]] == [
        f"⟨depth {forks - 1}⟩ ├─ * u{forks - 1} user: prompt {forks - 1}",
        f"⟨depth {forks - 1}⟩ * a{forks - 1} assistant: ok  ← leaf"]


# -- the ways a command ends -----------------------------------------------------------------

CONFORMANCE = SAMPLE.parent


def shell(script: str) -> subprocess.CompletedProcess[str]:
    """`script` in bash, with Python's default buffered stdout (not the tests' unbuffered)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True,
                          timeout=PROCESS_CEILING_S)


def cli_words(*args: str) -> str:
    return shlex.join([sys.executable, "-m", "pi_lsp.cli", *args])


@pytest.mark.parametrize(("args", "code"), [
    (["tree", str(CONFORMANCE / "101.jsonl")], 0),  # all of it buffered: it fails at the end
    (["check", str(CONFORMANCE / "104.jsonl")], 1),  # which keeps the command's own code
    (["--version"], 0),
    (["tree", str(CONFORMANCE / "102.jsonl")], 141),  # more than a buffer: cut short midway
    (["context", str(CONFORMANCE / "101.jsonl"), "--json"], 141),
])
def test_a_reader_that_stops_early_ends_the_command_quietly(args: list[str], code: int) -> None:
    """`pi-lsp tree s.jsonl | head -1`: Python's "Exception ignored ... BrokenPipeError" and
    exit 120 came at the flush at exit. 141 is 128 + SIGPIPE, what `cat` gives there."""
    result = shell(f'{cli_words(*args)} | true; echo "rc=${{PIPESTATUS[0]}}"')
    assert result.stderr == ""
    assert result.stdout == f"rc={code}\n"


@pytest.mark.parametrize(("redirect", "reason"), [("> /dev/full", "No space left on device"),
                                                  (">&-", "Bad file descriptor")])
@pytest.mark.parametrize("args", [["tree", str(SAMPLE)], ["context", str(SAMPLE), "--json"],
                                  ["--version"]])
def test_output_that_cannot_be_written_is_one_line(args: list[str], redirect: str,
                                                   reason: str) -> None:
    """A full or a closed stdout (`>&-`: Python leaves sys.stdout None, and writing to it was a
    traceback)."""
    result = shell(f"{cli_words(*args)} {redirect}")
    assert result.returncode == 2
    assert result.stderr == f"pi-lsp: cannot write the output ({reason})\n"


def test_a_closed_stderr_keeps_errors_out_of_stdout(tmp_path: Path) -> None:
    """`2>&-`: Python leaves sys.stderr None, and `print(file=None)` wrote the error into
    stdout, among the JSON a script reads there."""
    result = shell(f"{cli_words('tree', str(tmp_path / 'gone.jsonl'), '--json')} 2>&-")
    assert result.returncode == 2
    assert result.stdout == ""


@pytest.mark.parametrize("command", ["context", "tree", "check", "fork", "compact"])
def test_a_fifo_is_refused_at_once(tmp_path: Path, command: str) -> None:
    """Opening a FIFO waits for a writer: every command hung on one."""
    fifo = tmp_path / "f.jsonl"
    os.mkfifo(fifo)
    result = run_cli(command, str(fifo))
    assert result.returncode == 2
    assert result.stderr == f"pi-lsp: {fifo}: not a pi session file (it is a FIFO, not a " \
        "regular file)\n"


def test_sessions_skips_a_fifo_in_the_sessions_folder(tmp_path: Path) -> None:
    tree = written_session(tmp_path)
    os.mkfifo(Path(tree.path).with_name("f.jsonl"))
    result = run_cli("sessions", str(tmp_path), "--json")
    assert result.returncode == 0, result.stderr
    assert [s["path"] for s in json.loads(result.stdout)["sessions"]] == [tree.path]


@pytest.mark.parametrize("args", [
    ["fork", "S", "--leaf", ""], ["compact", "S", "--leaf", "", "--plan"],
    ["context", "S", "--leaf", ""], ["check", "S", "--repair", ""],
    ["branch", "S", "--to", ""], ["rewind", "S", "--undo", ""],
    ["run", "--session", "", "hi"], ["run", "--model", "", "hi"]])
def test_an_empty_option_value_is_refused_not_taken_as_absent(
        tmp_path: Path, args: list[str]) -> None:
    """An unset shell variable (`--leaf "$LEAF"`) must not quietly mean the default: fork and
    compact used the current leaf, check skipped the repair."""
    session = tmp_path / "s.jsonl"  # a copy: a fork made by mistake lands beside it
    shutil.copyfile(SAMPLE, session)
    result = run_cli(*[str(session) if arg == "S" else arg for arg in args], cwd=tmp_path)
    assert result.returncode == 2
    option = next(arg for arg in args if arg.startswith("--"))
    assert result.stderr == f"pi-lsp: argument {option}: must not be empty\n"
    assert result.stdout == ""
    assert list(tmp_path.iterdir()) == [session]


@pytest.mark.parametrize("address", ["nonsense", "127.0.0.1:99999", "127.0.0.1:65536", "host:",
                                     "127.0.0.1:\uff18\uff10"])  # fullwidth 80: int() takes it
def test_serve_checks_its_tcp_address_first(address: str) -> None:
    result = run_cli("serve", "--tcp", address)
    assert result.returncode == 2
    assert result.stderr == f"pi-lsp: argument --tcp: {address!r} is not HOST:PORT with a " \
        "port from 0 to 65535\n"


def test_serve_listens_on_every_address_of_its_host(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`--tcp localhost:PORT` listened only on the first of localhost's addresses, so a
    client connecting to the other (::1 where /etc/hosts names both) was refused. Port 0 was
    refused (a test had to guess a free port, which another worker could take first)."""
    def both(_host: str, port: int, **_kwargs: Any) -> list[tuple[Any, ...]]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port)),
                (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::1", port, 0, 0))]

    bound: list[socket.socket] = []  # to let a first_client that said a wrong port return
    bind = server_module.bind
    monkeypatch.setattr(socket, "getaddrinfo", both)
    monkeypatch.setattr(server_module, "bind", lambda listener, address: (
        bind(listener, address), bound.append(listener)))
    clients: list[socket.socket] = []
    said: list[str] = []

    def connect(family: socket.AddressFamily, address: str, port: int) -> bool:
        client = socket.socket(family)  # not create_connection: it looks up as patched
        try:
            client.connect((address, port))
        except ConnectionRefusedError:
            client.close()
            return False
        clients.append(client)
        return True

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        accepted = pool.submit(first_client, "localhost", 0)
        try:
            until_sync(lambda: said.append(capsys.readouterr().err) or "\n" in "".join(said),
                       "the line that says the port")
            listening, port = "".join(said).removesuffix("\n").rsplit(":", 1)
            assert listening == "pi-lsp: listening on localhost" and int(port) > 0
            until_sync(lambda: connect(socket.AF_INET6, "::1", int(port)),
                       f"a listener on [::1]:{port}")
            with accepted.result(CEILING_S) as connection:
                assert connection.getpeername()[:2] == clients[0].getsockname()[:2]
        finally:
            if not accepted.done():  # its listeners are up: let it return
                connect(socket.AF_INET, "127.0.0.1", bound[0].getsockname()[1])
            for client in clients:
                client.close()


def test_serve_says_when_it_cannot_listen() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli("serve", "--tcp", f"127.0.0.1:{port}")
    assert result.returncode == 2
    assert result.stderr.startswith(f"pi-lsp: --tcp 127.0.0.1:{port}: cannot listen (")
    assert "address already in use" in result.stderr and result.stderr.count("\n") == 1
