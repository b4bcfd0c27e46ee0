"""Files bound to the tree: snapshots per turn, the state at an entry, restore and undo.

Turns run through the real harness against the local fake Anthropic server; the workspace is a
user's git repository whose `.git`, index and stash must come out untouched.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.workspace import TextDocument
from pytest_lsp import LanguageClient

from pi_lsp.agent.approval import ApprovalRequest, Approver, allow_all
from pi_lsp.agent.events import ToolExecutionStart
from pi_lsp.agent.harness import Harness
from pi_lsp.agent.tools import DISK, DiskFiles, make_folders
from pi_lsp.context.build import build_session_context
from pi_lsp.files import history, snapshots
from pi_lsp.files.history import (
    FILES_TYPE,
    ChangeCount,
    RewindError,
    StoppedPartWay,
    TurnRecorder,
    changes_to,
    count_changes,
    file_changes,
    record_files,
    restore_files,
    state_at,
)
from pi_lsp.files.recorded import LOG
from pi_lsp.files.snapshots import FileChange, Snapshot, SnapshotError, SnapshotStore, store_for
from pi_lsp.providers.anthropic import AnthropicProvider
from pi_lsp.providers.retry import ProviderRetry
from pi_lsp.server.editor import EditorFiles
from pi_lsp.server.server import PiServer
from pi_lsp.session.check import check_session
from pi_lsp.session.entries import UserMessage, encoder
from pi_lsp.session.journal import Record
from pi_lsp.session.tree import SessionTree
from tests.conftest import pi_lsp_with
from tests.fake_anthropic import FakeAnthropic, text_reply, tool_reply
from tests.test_editor import applying_editor, closed, saved_and_closed, typed
from tests.test_server import (
    BUSY,
    CLIENTS,
    INVALID_PARAMS,
    JOB_DONE,
    SERVER,
    Pi,
    call,
    call_error,
    connect,
    init_options,
    lines,
    own_server,
    path_of,
    wait_events,
    wait_note,
)
from tests.users import NOBODY, as_a_user
from tests.waits import (
    CEILING_S,
    POLL_S,
    PROCESS_CEILING_S,
    gone,
    pid_in,
    reaped,
    run_cli,
    until,
)

FAILED = -32011


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                          check=True).stdout


def user_repo(root: Path) -> Path:
    """A user's repository with a commit, a stash, a staged change and ignored files."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q")
    git(root, "config", "user.email", "u@example.com")
    git(root, "config", "user.name", "U")
    (root / ".gitignore").write_text("*.log\nbuild/\n")
    (root / "app.py").write_text("print('v0')\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")
    (root / "app.py").write_text("print('stashed')\n")
    git(root, "stash", "-q")
    (root / "staged.txt").write_text("staged\n")
    git(root, "add", "staged.txt")
    (root / "debug.log").write_text("ignored\n")
    (root / "build").mkdir()
    (root / "build" / "out.bin").write_text("ignored too\n")
    return root


def repo_state(root: Path) -> tuple[bytes, str, str, str]:
    """What must never change: the index bytes, the stash, HEAD and the refs."""
    return ((root / ".git" / "index").read_bytes(), git(root, "stash", "list"),
            git(root, "rev-parse", "HEAD"), git(root, "for-each-ref"))


@dataclass
class Rig:
    root: Path
    tree: SessionTree
    harness: Harness
    providers: list[AnthropicProvider]

    def entries(self) -> list[dict[str, Any]]:
        lines = Path(self.tree.path).read_text().splitlines()[1:]
        return [json.loads(line) for line in lines]

    def files_entries(self) -> list[dict[str, Any]]:
        return [e for e in self.entries() if e["type"] == "custom"
                and e["customType"] == FILES_TYPE]

    def last_assistant(self) -> str:
        return next(e["id"] for e in reversed(self.entries()) if e["type"] == "message"
                    and e["message"]["role"] == "assistant")


APPROVER: list[Approver] = [allow_all]  # how the rig's harness approves calls


@pytest.fixture
async def rig(tmp_path: Path, fake: FakeAnthropic) -> AsyncIterator[Rig]:
    root = user_repo(tmp_path / "ws")
    sessions = root / ".pi" / "sessions"
    sessions.mkdir(parents=True)
    tree = SessionTree.create(str(sessions / "s.jsonl"), str(root))
    providers: list[AnthropicProvider] = []

    def make(_name: str) -> AnthropicProvider:
        providers.append(AnthropicProvider("k", base_url=fake.url))
        return providers[-1]

    harness = Harness(tree, root, make, approve=lambda request: APPROVER[0](request))
    record_files(harness)
    yield Rig(root, tree, harness, providers)
    APPROVER[0] = allow_all
    for provider in providers:
        await provider.client.close()


def write(call_id: str, path: str, content: str) -> tuple[str, str, dict[str, Any]]:
    return (call_id, "write", {"path": path, "content": content})


async def two_turns(rig: Rig, fake: FakeAnthropic) -> tuple[str, str]:
    """Prompt 1 writes notes.txt (v1); prompt 2 rewrites it and makes new/deep.txt by bash.

    Returns the final assistant ids of both prompts.
    """
    fake.script(tool_reply([write("c1", "notes.txt", "v1\n")]), text_reply("wrote v1"))
    await rig.harness.prompt("write notes")
    first = rig.last_assistant()
    fake.script(
        tool_reply([write("c2", "notes.txt", "v2\n"),
                    ("c3", "bash", {"command": "mkdir -p new && echo deep > new/deep.txt"})]),
        text_reply("wrote v2"))
    await rig.harness.prompt("change notes")
    return first, rig.last_assistant()


# -- recording ---------------------------------------------------------------------------


async def test_a_changing_turn_is_followed_by_one_files_entry(rig: Rig, fake: FakeAnthropic
                                                              ) -> None:
    await two_turns(rig, fake)
    entries = rig.entries()
    kinds = [e["message"]["role"] if e["type"] == "message" else e["type"] for e in entries]
    assert kinds == ["system", "user", "assistant", "toolResult", "custom", "assistant",
                     "user", "assistant", "toolResult", "toolResult", "custom", "assistant"]
    by_id = {e["id"]: e for e in entries}
    for files in rig.files_entries():
        # after the turn's last result, and the next reply hangs under it
        assert by_id[files["parentId"]]["message"]["role"] == "toolResult"
        child = next(e for e in entries if e["parentId"] == files["id"])
        assert child["message"]["role"] == "assistant"
        assert set(files["data"]) <= {"before", "after", "skipped"}
    assert check_session(SessionTree.open(rig.tree.path)) == []
    first, second = rig.files_entries()
    assert first["data"]["before"] != first["data"]["after"]
    assert second["data"]["before"] == first["data"]["after"]


async def test_the_context_at_every_entry_is_unchanged_by_files_entries(
        rig: Rig, fake: FakeAnthropic, tmp_path: Path) -> None:
    await two_turns(rig, fake)
    entries = rig.entries()
    files_parent = {e["id"]: e["parentId"] for e in entries if e["type"] == "custom"}
    # The same session without them: each child hangs under the custom entry's parent.
    stripped = tmp_path / "stripped.jsonl"
    header = Path(rig.tree.path).read_text().splitlines()[0]
    kept = []
    for entry in entries:
        if entry["id"] in files_parent:
            continue
        parent = entry["parentId"]
        while parent in files_parent:
            parent = files_parent[parent]
        kept.append(json.dumps({**entry, "parentId": parent}))
    stripped.write_text("\n".join([header, *kept]) + "\n")
    plain = SessionTree.open(str(stripped))
    recorded = SessionTree.open(rig.tree.path)
    assert recorded.leaf_id == plain.leaf_id
    for entry in entries:
        same_as = files_parent.get(entry["id"], entry["id"])
        while same_as in files_parent:
            same_as = files_parent[same_as]
        assert json.loads(encoder.encode(build_session_context(recorded, entry["id"]))) == \
            json.loads(encoder.encode(build_session_context(plain, same_as))), entry["type"]


async def test_a_turn_that_changes_nothing_writes_no_entry(rig: Rig, fake: FakeAnthropic
                                                           ) -> None:
    fake.script(tool_reply([write("c1", "a.txt", "a\n")]), text_reply("ok"))
    await rig.harness.prompt("one")
    fake.script(tool_reply([("c2", "bash", {"command": "true"})]), text_reply("ok"))
    await rig.harness.prompt("two")
    assert len(rig.files_entries()) == 1
    fake.script(tool_reply([("c3", "read", {"path": "a.txt"})]), text_reply("ok"))
    await rig.harness.prompt("three")
    assert len(rig.files_entries()) == 1


async def test_a_quiet_turn_records_user_edits_made_since_the_last_entry(
        rig: Rig, fake: FakeAnthropic) -> None:
    fake.script(tool_reply([write("c1", "a.txt", "a\n")]), text_reply("ok"))
    await rig.harness.prompt("one")
    (rig.root / "a.txt").write_text("edited by hand\n")
    fake.script(tool_reply([("c2", "bash", {"command": "true"})]), text_reply("ok"))
    await rig.harness.prompt("two")
    one, two = rig.files_entries()
    assert two["data"]["before"] == two["data"]["after"] != one["data"]["after"]
    assert state_at(rig.tree, rig.last_assistant()) == Snapshot(two["data"]["after"])


async def test_the_files_entry_comes_before_writes_queued_during_the_turn(
        rig: Rig, fake: FakeAnthropic) -> None:
    def change_model(event: object) -> None:
        if isinstance(event, ToolExecutionStart):
            rig.harness.set_model("anthropic", "claude-haiku-4-5")

    rig.harness.subscribe(change_model)
    fake.script(tool_reply([write("c1", "a.txt", "a\n")]), text_reply("ok"))
    await rig.harness.prompt("go")
    kinds = [e["message"]["role"] if e["type"] == "message" else e["type"]
             for e in rig.entries()]
    assert kinds == ["system", "user", "assistant", "toolResult", "custom", "model_change",
                     "assistant"]


async def test_the_before_snapshot_runs_while_the_user_is_asked(
        rig: Rig, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> None:
    store = store_for(rig.root)
    taken = asyncio.Event()
    snapshot = store.snapshot

    async def noted(overrides: Mapping[str, bytes] | None = None) -> Snapshot:
        result = await snapshot(overrides)
        taken.set()
        return result

    monkeypatch.setattr(store, "snapshot", noted)

    async def slow_user(request: ApprovalRequest) -> str | None:
        # Answers only once a snapshot is taken: one that waited for the answer never is.
        await asyncio.wait_for(taken.wait(), CEILING_S)
        taken.clear()
        return None if request.call.id == "c1" else "denied"

    APPROVER[0] = slow_user
    fake.script(tool_reply([write("c1", "a.txt", "a\n")]), text_reply("ok"))
    await rig.harness.prompt("one")
    assert len(rig.files_entries()) == 1
    # A refused call changes nothing and records nothing.
    fake.script(tool_reply([write("c2", "a.txt", "b\n")]), text_reply("ok"))
    await rig.harness.prompt("two")
    assert (rig.root / "a.txt").read_text() == "a\n"
    assert len(rig.files_entries()) == 1


async def denied_write(root: Path, fake: FakeAnthropic) -> list[str]:
    """One turn whose write is denied at once; the tasks still pending when it has ended."""
    (root / ".pi" / "sessions").mkdir(parents=True)
    tree = SessionTree.create(str(root / ".pi" / "sessions" / "s.jsonl"), str(root))
    provider = AnthropicProvider("k", base_url=fake.url, retry=ProviderRetry(max_retries=0))

    async def deny(_request: ApprovalRequest) -> str | None:
        return "denied"

    harness = Harness(tree, root, lambda _name: provider, approve=deny)
    record_files(harness)
    fake.script(tool_reply([write("c1", "a.txt", "a\n")]), text_reply("ok"))
    await harness.prompt("write")
    await provider.client.close()
    return [repr(t.get_coro()) for t in asyncio.all_tasks() if t is not asyncio.current_task()]


def test_a_denied_write_leaves_no_snapshot_running(tmp_path: Path, fake: FakeAnthropic) -> None:
    # The "before" snapshot started as the call appeared used to be dropped when the call was
    # denied; cancelled while git was starting (the loop closing), it hung forever (issue 15).
    for attempt in range(50):
        with asyncio.Runner() as runner:
            left = runner.run(denied_write(tmp_path / str(attempt), fake))
        assert left == [], f"attempt {attempt}: {left}"
        assert not (tmp_path / str(attempt) / "a.txt").exists()


async def test_snapshots_leave_the_users_git_alone_and_honour_gitignore(
        rig: Rig, fake: FakeAnthropic) -> None:
    before = repo_state(rig.root)
    await two_turns(rig, fake)
    assert repo_state(rig.root) == before
    store = store_for(rig.root)
    tree = rig.files_entries()[-1]["data"]["after"]
    files = subprocess.run(["git", f"--git-dir={store.git_dir}", "ls-tree", "-r", "--name-only",
                            tree], capture_output=True, text=True, check=True).stdout.split()
    assert sorted(files) == [".gitignore", "app.py", "new/deep.txt", "notes.txt", "staged.txt"]
    # the store itself never shows up in the user's status
    status = git(rig.root, "status", "--porcelain", "--untracked-files=all")
    assert sorted(status.splitlines()) == [
        "?? .pi/sessions/s.jsonl", "?? new/deep.txt", "?? notes.txt", "A  staged.txt"]


async def test_files_over_the_cap_are_left_out_and_named(
        rig: Rig, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshots, "MAX_FILE_BYTES", 100)
    fake.script(tool_reply([write("c1", "big.txt", "x" * 500), write("c2", "small.txt", "s")]),
                text_reply("ok"))
    await rig.harness.prompt("big")
    data = rig.files_entries()[-1]["data"]
    assert data["skipped"] == ["big.txt"]
    first = rig.last_assistant()
    (rig.root / "big.txt").write_text("y" * 600)
    result = await restore_files(rig.tree, store_for(rig.root), first)
    assert [f.path for f in result.files] == []
    assert result.skipped == ["big.txt"]
    assert (rig.root / "big.txt").read_text() == "y" * 600  # never overwritten
    # Small now, but too large when the entry was recorded: the entry does not know it, so
    # a restore must not take it for a file that did not exist then.
    (rig.root / "big.txt").write_text("tiny")
    result = await restore_files(rig.tree, store_for(rig.root), first)
    assert [f.path for f in result.files] == [] and result.skipped == ["big.txt"]
    assert (rig.root / "big.txt").read_text() == "tiny"


async def test_snapshots_go_on_when_a_file_over_the_cap_replaces_a_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's index held the folder's files, and `git rm` of the big file's path refused
    the folder (found in review: every later snapshot failed until the file was gone)."""
    monkeypatch.setattr(snapshots, "MAX_FILE_BYTES", 100)
    (tmp_path / "y").mkdir()
    (tmp_path / "y" / "a.txt").write_text("a\n")
    store = SnapshotStore(tmp_path)
    first = await store.snapshot()
    shutil.rmtree(tmp_path / "y")
    (tmp_path / "y").write_text("Y" * 500)
    second = await store.snapshot()
    assert second.skipped == ["y"] and await store.read(second.tree, "y/a.txt") is None
    (tmp_path / "other.txt").write_text("x\n")
    third = await store.snapshot()
    assert await store.read(third.tree, "other.txt") == b"x\n"
    assert await store.read(first.tree, "y/a.txt") == b"a\n"


async def test_snapshots_go_on_when_a_file_grows_past_the_cap(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file a snapshot held that grew past the cap (a log, a build's output) failed every
    snapshot while it stayed large: `git rm --cached` refused its staged content ("staged
    content different from both the file and the HEAD"), so no turn could be rewound."""
    monkeypatch.setattr(snapshots, "MAX_FILE_BYTES", 100)
    (tmp_path / "log.txt").write_text("small\n")
    store = SnapshotStore(tmp_path)
    first = await store.snapshot()
    (tmp_path / "log.txt").write_text("x" * 500)
    second = await store.snapshot()
    assert second.skipped == ["log.txt"] and await store.read(second.tree, "log.txt") is None
    assert await store.read(first.tree, "log.txt") == b"small\n"


def snapshots_as_a_user(root: Path, steps: Callable[[SnapshotStore], Any]) -> str:
    """What `steps` (async, given the store of `root`) returns, run as a user who is not root:
    its repr, or the error."""
    def work() -> str:
        os.environ["XDG_STATE_HOME"] = str(root.parent / "state")
        return repr(asyncio.run(steps(SnapshotStore(root))))

    return as_a_user(work)


def test_snapshots_leave_out_a_file_they_cannot_read() -> None:
    """A file the user may not read (a container's, owned by root, mode 600) failed every
    snapshot ("git add failed: error: open(...): Permission denied"), so no turn's changes
    could be rewound; it is left out, named in `skipped`, as a file over the cap is, and so is
    one a snapshot held that became unreadable."""
    async def steps(store: SnapshotStore) -> tuple[list[str], list[str], bytes | None]:
        first = await store.snapshot()
        os.chmod(store.root / "held.txt", 0)
        second = await store.snapshot()
        return first.skipped, second.skipped, await store.read(second.tree, "ok.txt")

    # Not in tmp_path: pytest's folder is root's alone, which nobody may not enter.
    with tempfile.TemporaryDirectory() as folder:
        os.chmod(folder, 0o777)
        root = Path(folder) / "ws"
        root.mkdir(mode=0o777)
        for name in ("ok.txt", "held.txt", "locked.txt"):
            (root / name).write_text(name)
        if os.geteuid() == 0:  # the user's own files, which they may chmod
            for path in (root, *root.iterdir()):
                os.chown(path, NOBODY, NOBODY)
        os.chmod(root / "locked.txt", 0)
        try:
            said = snapshots_as_a_user(root, steps)
        finally:
            for name in ("held.txt", "locked.txt"):
                os.chmod(root / name, 0o644)
    assert said == repr((["locked.txt"], ["held.txt", "locked.txt"], b"ok.txt"))


def test_snapshots_leave_out_a_file_in_a_folder_they_may_list_but_not_enter() -> None:
    """A folder the user may list but not enter (mode 644) failed every snapshot ("git add
    failed: fatal: unable to stat 'shut/f.txt': Permission denied"): its files, which cannot
    even be stat'ed, are left out and named in `skipped` as unreadable ones are."""
    async def steps(store: SnapshotStore) -> tuple[list[str], bytes | None]:
        snapshot = await store.snapshot()
        return snapshot.skipped, await store.read(snapshot.tree, "ok.txt")

    with tempfile.TemporaryDirectory() as folder:
        os.chmod(folder, 0o777)
        root = Path(folder) / "ws"
        (root / "shut").mkdir(mode=0o777, parents=True)
        os.chmod(root, 0o777)
        for name in ("ok.txt", "shut/f.txt"):
            (root / name).write_text(name)
        if os.geteuid() == 0:
            for path in (root, root / "ok.txt"):
                os.chown(path, NOBODY, NOBODY)
        os.chmod(root / "shut", 0o644)
        try:
            said = snapshots_as_a_user(root, steps)
        finally:
            os.chmod(root / "shut", 0o755)
    assert said == repr((["shut/f.txt"], b"ok.txt"))


async def test_without_git_turns_run_and_the_feature_says_it_is_unavailable(
        tmp_path: Path, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # a PATH with no git on it
    root = tmp_path / "nogit"
    (root / ".pi" / "sessions").mkdir(parents=True)
    tree = SessionTree.create(str(root / ".pi" / "sessions" / "s.jsonl"), str(root))
    provider = AnthropicProvider("k", base_url=fake.url)
    harness = Harness(tree, root, lambda _n: provider)
    store = SnapshotStore(root)
    from pi_lsp.files.history import TurnRecorder
    TurnRecorder(tree, store).attach(harness)
    fake.script(tool_reply([write("c1", "a.txt", "a")]), text_reply("ok"))
    await harness.prompt("go")
    await provider.client.close()
    assert (root / "a.txt").read_text() == "a"
    assert not store.git_dir.exists() and not (root / ".pi" / "snapshots").exists()
    leaf = tree.leaf_id
    assert leaf is not None
    changes = await file_changes(tree, store, leaf)
    assert not changes.available and changes.reason and "git" in changes.reason
    with pytest.raises(RewindError, match="git"):
        await restore_files(tree, store, leaf)


async def test_diffs_go_to_their_files_even_when_git_quotes_the_name(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path)
    names = ["a b.txt", 'q"x.txt', "z.txt"]
    for name in names:
        (tmp_path / name).write_text(f"old {name}\n")
    old = await store.snapshot()
    for name in names:
        (tmp_path / name).write_text(f"new {name}\n")
    new = await store.snapshot()
    changes = await store.changes(new.tree, old.tree)
    assert [c.path for c in changes] == names
    for change in changes:
        assert f"-new {change.path}" in change.diff and f"+old {change.path}" in change.diff


@pytest.mark.parametrize("breaks", ["\u2028", "\x85", "\x0c", "\x1c", "\r"])
async def test_a_files_line_never_starts_another_files_diff(tmp_path: Path, breaks: str) -> None:
    """git's diff is cut into files at its header lines: only a line break ends a line there. A
    file's line holding another break Python's splitlines knows and then another file's header
    took that file's part (its real diff pushed behind the cap by what followed)."""
    store = SnapshotStore(tmp_path)
    (tmp_path / "a.txt").write_text("a\n")
    (tmp_path / "b.txt").write_text("then\n")
    old = await store.snapshot()
    (tmp_path / "a.txt").write_text(f"a\nx{breaks}diff --git a/b.txt b/b.txt\n+all fine\n",
                                    newline="")
    (tmp_path / "b.txt").write_text("now\n")
    new = await store.snapshot()
    a, b = await store.changes(new.tree, old.tree)
    assert "+all fine" in a.diff and "+all fine" not in b.diff
    assert b.diff.startswith("diff --git a/b.txt b/b.txt\nindex ")


def test_a_git_the_workspace_holds_is_never_run(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """With `.` or an empty entry on PATH, a repository's own `git` would be found first."""
    import shutil

    real = shutil.which("git")
    assert real is not None
    (tmp_path / "git").write_text("#!/bin/sh\ntouch ran\n")
    (tmp_path / "git").chmod(0o755)
    monkeypatch.chdir(tmp_path)
    for path in (f".{os.pathsep}{os.path.dirname(real)}", f"{os.pathsep}{os.path.dirname(real)}"):
        monkeypatch.setenv("PATH", path)
        assert shutil.which("git") != real  # what a plain lookup finds
        assert SnapshotStore(tmp_path).git == real


async def test_a_store_locked_by_another_process_is_waited_for(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path)
    (tmp_path / "a.txt").write_text("a")
    first = await store.snapshot()
    lock = store.git_dir / "index.lock"
    lock.write_text("")
    (tmp_path / "a.txt").write_text("b")
    asyncio.get_running_loop().call_later(0.3, lock.unlink)
    second = await store.snapshot()
    assert second.tree != first.tree


async def test_an_index_lock_a_killed_git_left_is_dropped_once_stale(tmp_path: Path) -> None:
    """A git of the store killed in its `add` (OOM, `kill -9`, a crash; it runs in a session of
    its own, so it outlives pi-lsp) left `index.lock`: every later snapshot failed, for ever,
    with "stayed locked". No git run of the store outlasts GIT_BUDGET_S, so an older lock is
    no live git's; the index is only a cache of the snapshots."""
    store = SnapshotStore(tmp_path)
    (tmp_path / "a.txt").write_text("a")
    await store.snapshot()
    lock = store.git_dir / "index.lock"
    lock.write_text("")
    (tmp_path / "a.txt").write_text("b")
    with pytest.raises(SnapshotError) as failed:  # it may be a live git's: only named
        await store.snapshot()
    assert str(failed.value) == (
        f"the snapshot store {store.git_dir} stayed locked: {lock} is there, from a git "
        "running on it now or one stopped before it ended; it is deleted once "
        f"{snapshots.GIT_BUDGET_S:g} s old, and you may delete it if no git runs there")
    made = lock.stat().st_mtime - snapshots.GIT_BUDGET_S - 1
    os.utime(lock, (made, made))
    second = await store.snapshot()
    assert await store.read(second.tree, "a.txt") == b"b"
    assert not lock.exists()


# git, but its COMMAND waits, its pid in MARKER, until the file GO is there; then it runs.
PAUSED_GIT = """#!/bin/sh
for arg in "$@"; do
  if [ "$arg" = COMMAND ]; then
    echo $$ > "MARKER"
    while [ ! -e "GO" ]; do sleep 0.01; done
    break
  fi
done
exec GIT "$@"
"""
# Another editor's pi-lsp on the workspace argv[1]: a process taking a snapshot of it.
OTHER_SNAPSHOT = ("import asyncio, sys; from pathlib import Path; "
                  "from pi_lsp.files.snapshots import SnapshotStore; "
                  "print(asyncio.run(SnapshotStore(Path(sys.argv[1])).snapshot()).tree)")


@contextlib.asynccontextmanager
async def another_process_snapshot(root: Path, tmp_path: Path, command: str
                                   ) -> AsyncIterator[tuple[Path, subprocess.Popen[str]]]:
    """Another process's snapshot of `root`, paused in its git `command` (running when this
    yields) until the file yielded is made; its tree is the last line it prints."""
    git_path = shutil.which("git")
    assert git_path is not None
    marker, go = tmp_path / "paused.pid", tmp_path / "go"
    bin_dir = tmp_path / "other-bin"
    bin_dir.mkdir()
    script = PAUSED_GIT.replace("COMMAND", command).replace("MARKER", str(marker))
    (bin_dir / "git").write_text(script.replace("GO", str(go)).replace("GIT", git_path))
    (bin_dir / "git").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    other = subprocess.Popen([sys.executable, "-c", OTHER_SNAPSHOT, str(root)], env=env,
                             stdout=subprocess.PIPE, text=True)
    try:
        await pid_in(marker)
        yield go, other
    finally:
        go.touch()
        await asyncio.to_thread(other.wait, PROCESS_CEILING_S)


def found_held(monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """Set once this process finds the store held by another."""
    held = asyncio.Event()
    try_lock = snapshots._try_lock

    def spy(fd: int) -> bool:
        taken = try_lock(fd)
        if not taken:
            held.set()
        return taken
    monkeypatch.setattr(snapshots, "_try_lock", spy)
    return held


async def waits_its_turn(task: asyncio.Future[Any], held: asyncio.Event) -> None:
    """Fail unless `task` waits for the store another process holds, rather than going on."""
    found = asyncio.ensure_future(held.wait())
    await asyncio.wait([task, found], timeout=CEILING_S, return_when=asyncio.FIRST_COMPLETED)
    found.cancel()
    assert not task.done(), "it went on while another process used the store"
    assert held.is_set()


async def test_a_restore_waits_for_another_process_on_the_store_before_deleting(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two editors' pi-lsps shared the store with only git's index lock between them: a restore
    deleted its files, then `git restore` found the index held by the other's `git add` (7 s of
    60,000 files) past its 2 s of retries and gave up, new files gone and the old not back."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "keep.txt").write_text("version 1\n")
    store = SnapshotStore(root)
    target = await store.snapshot()
    (root / "keep.txt").write_text("version 2\n")
    (root / "new.txt").write_text("made by a turn\n")
    found = await changes_to(store, target)
    held = found_held(monkeypatch)
    async with another_process_snapshot(root, tmp_path, "add") as (go, other):
        restore = asyncio.ensure_future(store.restore(target.tree, found.files))
        await waits_its_turn(restore, held)
        assert (root / "new.txt").exists()
        assert (root / "keep.txt").read_text() == "version 2\n"
        go.touch()
        await restore
    assert other.returncode == 0
    assert not (root / "new.txt").exists()
    assert (root / "keep.txt").read_text() == "version 1\n"


async def test_two_processes_first_snapshots_take_turns(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two editors' first snapshots of a workspace both made the store: one found HEAD but no
    `info/` yet, or both set its config ("could not lock config file"); 5 of 10 failed."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    held = found_held(monkeypatch)
    async with another_process_snapshot(root, tmp_path, "init") as (go, other):
        snapshot = asyncio.ensure_future(SnapshotStore(root).snapshot())
        await waits_its_turn(snapshot, held)
        go.touch()
        ours = await snapshot
        assert other.stdout is not None
        theirs = await asyncio.to_thread(other.stdout.read)
    assert other.returncode == 0
    assert theirs.split() == [ours.tree]


def store_config(store: SnapshotStore, key: str) -> str:
    """A setting in the store's own config file ("" when unset)."""
    return subprocess.run(["git", "config", "--file", str(store.git_dir / "config"), key],
                          capture_output=True, text=True).stdout.strip()


def store_files(store: SnapshotStore) -> dict[str, bytes]:
    """Every regular file in the store but its lock, by path, with its bytes."""
    return {str(p.relative_to(store.git_dir)): p.read_bytes() for p in store.git_dir.rglob("*")
            if p.is_file() and p.name != snapshots.STORE_LOCK}


async def test_a_store_whose_making_was_killed_is_made_again(tmp_path: Path) -> None:
    """A pi-lsp killed between the store's `git init` and its config left a store with a HEAD
    but no config nor `info/`: every later snapshot of the workspace failed ("No such file or
    directory: .../info/attributes"), for ever, until the user deleted the store."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    store = SnapshotStore(root)
    async with another_process_snapshot(root, tmp_path, "config") as (_go, other):
        other.kill()
        await asyncio.to_thread(other.wait, PROCESS_CEILING_S)
        os.kill(await pid_in(tmp_path / "paused.pid"), signal.SIGKILL)  # its `git config`
    assert store.exists() and not (store.git_dir / "info").exists()  # as the kill left it
    tree = (await store.snapshot()).tree
    assert await store.read(tree, "a.txt") == b"a\n"
    assert [store_config(store, key) for key in ("gc.auto", "gc.pruneExpire", "core.bare")] \
        == ["0", "never", "false"]


def killed_in_git_init(git_dir: Path) -> None:
    """As git 2.39's `init` leaves a store when killed once it wrote HEAD: its objects folder
    and config come after."""
    shutil.rmtree(git_dir / "objects")
    (git_dir / "config").unlink()


def killed_writing_head(git_dir: Path) -> None:
    """As git's `init` leaves a store when killed while it held HEAD's lock."""
    killed_in_git_init(git_dir)
    (git_dir / "HEAD").rename(git_dir / "HEAD.lock")


def killed_in_git_config(git_dir: Path) -> None:
    """As the store's first `git config` leaves it when killed while it held the config's lock."""
    shutil.copy(git_dir / "config", git_dir / "config.lock")


@pytest.mark.parametrize("kill", [killed_in_git_init, killed_writing_head, killed_in_git_config])
async def test_a_store_git_left_half_made_is_made_again(tmp_path: Path,
                                                        kill: Callable[[Path], None]) -> None:
    """A store whose `git init` or first `git config` was killed is not one git can use, nor
    finish ("could not lock config file"): no snapshot was ever taken there again."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    store = SnapshotStore(root)
    subprocess.run(["git", "init", "-q", "--bare", "--template=", str(store.git_dir)], check=True)
    kill(store.git_dir)
    tree = (await store.snapshot()).tree
    assert await store.read(tree, "a.txt") == b"a\n"
    assert store_config(store, "gc.auto") == "0"


async def test_a_half_made_store_holding_snapshots_is_finished_in_place(tmp_path: Path) -> None:
    """A store holding snapshots (a legacy store's objects copied in before its `git init`, say)
    whose making was killed is finished, never emptied: its snapshots still restore, those of a
    store older than the log of its trees included."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    store = SnapshotStore(root)
    first = (await store.snapshot()).tree
    shutil.rmtree(store.git_dir / "info")
    (store.git_dir / LOG).unlink()
    subprocess.run(["git", "config", "--file", str(store.git_dir / "config"), "--unset",
                    "gc.auto"], check=True)
    (root / "a.txt").write_text("b\n")
    second = (await store.snapshot()).tree
    assert await store.read(first, "a.txt") == b"a\n"
    assert await store.read(second, "a.txt") == b"b\n"
    assert store_config(store, "gc.auto") == "0"


def head_overwritten(git_dir: Path) -> str:
    (git_dir / "HEAD").write_text("not a ref\n")
    return "its HEAD file names no ref"


def config_locked(git_dir: Path) -> str:
    shutil.rmtree(git_dir / "info")
    (git_dir / "config.lock").write_text("")
    return ("it has no info/ folder, and making it again failed: git init failed: error: "
            f"could not lock config file {git_dir}/config: File exists")


@pytest.mark.parametrize("damage", [head_overwritten, config_locked])
async def test_a_damaged_store_holding_snapshots_is_never_emptied(
        tmp_path: Path, damage: Callable[[Path], str]) -> None:
    """The snapshots of a store are the user's undo history: a damaged store holding them fails
    each snapshot naming the store and what is wrong, and is never deleted or emptied."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    store = SnapshotStore(root)
    await store.snapshot()
    wrong = damage(store.git_dir)
    kept = store_files(store)
    with pytest.raises(SnapshotError) as failed:
        await store.snapshot()
    # git's own words (the lock's) go on with its advice, over lines.
    assert str(failed.value).startswith(f"the snapshot store {store.git_dir} is damaged: {wrong}")
    assert str(failed.value).endswith(
        ". It holds the snapshots of earlier turns (what undoes them), so it is left as it is: "
        "repair it, or move it away and a new store is made (earlier turns then cannot be "
        "rewound)")
    assert {path: data for path, data in store_files(store).items()
            if path in kept} == kept  # nothing deleted or changed
    assert not {path for path in store_files(store) if path.startswith("objects/")} - set(kept)


async def test_a_wait_for_another_process_on_the_store_stops_at_an_abort(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The wait for another editor's snapshot must stop when the turn is aborted, holding
    nothing after."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    store = SnapshotStore(root)
    await store.snapshot()
    held = found_held(monkeypatch)
    async with another_process_snapshot(root, tmp_path, "add") as (go, _other):
        snapshot = asyncio.ensure_future(store.snapshot())
        await waits_its_turn(snapshot, held)
        snapshot.cancel()
        await asyncio.wait([snapshot], timeout=CEILING_S)
        assert snapshot.cancelled()
        go.touch()
    (root / "a.txt").write_text("b\n")
    assert await store.read((await store.snapshot()).tree, "a.txt") == b"b\n"


async def test_another_process_holding_the_store_too_long_is_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process holding the store past STORE_WAIT_S (each of its git runs stops at
    GIT_BUDGET_S) is stopped itself: it is named, not waited for without end."""
    monkeypatch.setattr(snapshots, "STORE_WAIT_S", 0.0)
    root = tmp_path / "ws"
    root.mkdir()
    store = SnapshotStore(root)
    async with another_process_snapshot(root, tmp_path, "add") as (_go, other):
        with pytest.raises(SnapshotError) as failed:
            await store.snapshot()
    assert str(failed.value) == (f"process {other.pid} (another pi-lsp on {root}) has held the "
                                 f"snapshot store {store.git_dir} for over 0 s")


# git, but its first `add -A` (FAILED not there yet) deletes the file GONE and fails on it, as
# git 2.39 does on a file deleted after it listed it; its later runs are git's.
VANISHING_GIT = """#!/bin/sh
for arg in "$@"; do
  if [ "$arg" = -A ] && [ ! -e "FAILED" ]; then
    rm "GONE" && touch "FAILED"
    echo "fatal: unable to stat 'gone.txt': No such file or directory" >&2
    exit 128
  fi
done
exec GIT "$@"
"""


async def test_a_snapshot_goes_on_when_a_file_goes_while_git_adds_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """git fails the whole `add` on a file that went after it listed it ("unable to stat"):
    a build deleting files while a snapshot ran failed the snapshot."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "kept.txt").write_text("kept\n")
    (root / "gone.txt").write_text("gone\n")
    git_path = shutil.which("git")
    assert git_path is not None
    script = VANISHING_GIT.replace("GONE", str(root / "gone.txt"))
    (tmp_path / "git").write_text(script.replace("FAILED", str(tmp_path / "failed"))
                                  .replace("GIT", git_path))
    (tmp_path / "git").chmod(0o755)
    store = SnapshotStore(root)
    monkeypatch.setattr(store, "git", str(tmp_path / "git"))
    tree = (await store.snapshot()).tree
    assert (tmp_path / "failed").exists()
    assert await store.read(tree, "kept.txt") == b"kept\n"
    assert await store.read(tree, "gone.txt") is None


def release(pipe: Path) -> None:
    """Let a git waiting to read the named pipe `pipe` go on (it reads nothing)."""
    with contextlib.suppress(OSError):  # nobody waits for it yet
        os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))


async def ends(task: asyncio.Future[Any], pipe: Path) -> bool:
    """Whether `task` ends by itself within the ceiling; if not, its gits waiting on `pipe` are
    let go on until it does (the test fails then, without hanging)."""
    done, _ = await asyncio.wait([task], timeout=CEILING_S)
    while not task.done():
        release(pipe)
        await asyncio.wait([task], timeout=POLL_S)
    return bool(done)


@pytest.mark.parametrize("name", [".gitignore", ".gitattributes"])
async def test_a_named_pipe_git_would_wait_on_fails_the_snapshot(tmp_path: Path, name: str
                                                                  ) -> None:
    """git opens every `.gitignore` and `.gitattributes` on its way with a blocking open: one
    that is a FIFO held the snapshot (the turn, the store's lock) forever."""
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "f.txt").write_text("f\n")
    pipe = root / "sub" / name
    os.mkfifo(pipe)
    snapshot = asyncio.ensure_future(SnapshotStore(root).snapshot())
    assert await ends(snapshot, pipe), "the snapshot waited on the pipe"
    with pytest.raises(SnapshotError, match=f"waited on a named pipe \\(FIFO\\) in {root}"):
        snapshot.result()


async def test_a_git_config_that_is_a_named_pipe_fails_the_snapshot(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's excludes file is looked up (`git config`) under the store's lock, with no
    FIFO check and no time limit: a ~/.gitconfig that is a FIFO held the snapshot for ever, and
    every other pi-lsp on the workspace failed its snapshots after STORE_WAIT_S."""
    home = tmp_path / "home"
    home.mkdir()
    pipe = home / ".gitconfig"
    os.mkfifo(pipe)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    snapshot = asyncio.ensure_future(SnapshotStore(root).snapshot())
    assert await ends(snapshot, pipe), "the snapshot waited on the pipe"
    with pytest.raises(SnapshotError, match=r"^git config waited on a named pipe \(FIFO\)"):
        snapshot.result()
    pipe.unlink()
    assert await SnapshotStore(root).read((await SnapshotStore(root).snapshot()).tree,
                                          "a.txt") == b"a\n"


async def test_a_cancelled_snapshot_stops_its_git_and_leaves_no_lock(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cancelled snapshot waited for its git to end: forever for one waiting on a named pipe
    (a `.gitattributes` that is a FIFO). Stopped, git must not leave the store's index lock."""
    monkeypatch.setattr(snapshots, "_waits_on_a_pipe", lambda _pid: False)  # as off Linux
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("a\n")
    store = SnapshotStore(root)
    await store.snapshot()
    pipe = root / "sub" / ".gitattributes"
    os.mkfifo(pipe)
    (root / "sub" / "g.txt").write_text("g\n")  # new: only `add` reads its attributes
    snapshot = asyncio.ensure_future(store.snapshot())
    lock = store.git_dir / "index.lock"
    try:
        await until(lock.exists, "git add to take the index lock (it then waits on the pipe)")
    finally:
        snapshot.cancel()
        ended = await ends(snapshot, pipe)
    assert ended, "the cancel waited for a git that never ends"
    assert snapshot.cancelled()
    assert not lock.exists()
    pipe.unlink()
    assert await store.read((await store.snapshot()).tree, "sub/g.txt") == b"g\n"


def endless_ignore_rules(root: Path) -> Path:
    """A workspace whose committed `.gitignore` of twenty `**/` over a 40-deep folder keeps
    `git ls-files` matching for ever."""
    (root / ".pi" / "sessions").mkdir(parents=True)
    (root / ".gitignore").write_text("**/" * 20 + "z\n")
    deep = root.joinpath(*["a"] * 40)
    deep.mkdir(parents=True)
    (deep / "x").write_text("x\n")
    return root


async def turn_that_writes(root: Path, fake: FakeAnthropic, **tell: Callable[[str], object]
                           ) -> SessionTree:
    """The tree of a new session in `root` after one turn writing a.txt, its files recorded by
    a TurnRecorder told through `tell`; the turn must end within the ceiling."""
    tree = SessionTree.create(str(root / ".pi" / "sessions" / "s.jsonl"), str(root))
    provider = AnthropicProvider("k", base_url=fake.url)
    harness = Harness(tree, root, lambda _n: provider)
    TurnRecorder(tree, SnapshotStore(root), **tell).attach(harness)
    fake.script(tool_reply([write("c1", "a.txt", "a\n")]), text_reply("ok"))
    prompt = asyncio.ensure_future(harness.prompt("write"))
    done, _ = await asyncio.wait([prompt], timeout=CEILING_S)
    if not done:
        harness.abort()  # stops the snapshot's git, so the test ends, failing
    await prompt
    await provider.client.close()
    assert done, "the turn waited for a snapshot's git that never ends"
    return tree


def files_entries(tree: SessionTree) -> list[Record]:
    return [e for e in tree.path_to(tree.leaf_id) if e.env.type == "custom"]


async def test_a_snapshot_git_that_runs_on_is_stopped_and_the_turn_goes_on(
        tmp_path: Path, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> None:
    """A committed `.gitignore` of many `**/` over a deep folder kept `git ls-files` matching for
    ever, holding the turn and the store's lock (so pi.branch and pi.fileChanges) with it."""
    monkeypatch.setattr(snapshots, "GIT_BUDGET_S", 1.0)
    root = endless_ignore_rules(tmp_path / "ws")
    told: list[str] = []
    tree = await turn_that_writes(root, fake, tell=told.append)
    assert (root / "a.txt").read_text() == "a\n"
    assert len(told) == 2  # the snapshots before and after the write
    assert all(re.search(r"cannot be rewound: git ls-files ran 1 s in .* and was stopped; a "
                         r"\.gitignore pattern of many `\*\*/`", message) for message in told)
    assert files_entries(tree) == []


async def test_a_snapshot_that_runs_long_is_told_once_while_it_runs(
        tmp_path: Path, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> None:
    """A snapshot's git that ran on (up to 300 s a run) showed a turn doing nothing, and the
    user was told nothing until it failed: each such snapshot now says so once, as it runs."""
    monkeypatch.setattr(snapshots, "GIT_BUDGET_S", 1.0)
    monkeypatch.setattr(history, "SLOW_SNAPSHOT_S", 0.1)
    root = endless_ignore_rules(tmp_path / "ws")
    told: list[str] = []
    tree = await turn_that_writes(root, fake, tell=told.append, tell_slow=told.append)
    assert (root / "a.txt").read_text() == "a\n"
    assert files_entries(tree) == []
    # The notice of each snapshot comes while it runs, before its failure.
    assert [message.split(" ")[0] for message in told] == ["recording", "file"] * 2, told
    assert told[0] == (f"recording the files of {root} before the turn's tool changes them is "
                       "taking long (over 0.1 s: a large workspace, or .gitignore patterns "
                       "that keep git matching); the turn waits for it, and aborting the turn "
                       "stops it")
    assert told[2].startswith(f"recording the files of {root} after the turn's tool changed "
                              "them is taking long")


async def test_a_snapshot_waiting_for_another_pi_lsp_names_it_once(
        tmp_path: Path, fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> None:
    """A snapshot waiting its turn on the store another pi-lsp holds (its `git add` of 60,000
    files, or one stopped in a debugger) was told as a large workspace or `.gitignore` patterns
    keeping git matching: the one notice named neither the other process nor its lock."""
    monkeypatch.setattr(history, "SLOW_SNAPSHOT_S", 0.1)
    root = tmp_path / "ws"
    (root / ".pi" / "sessions").mkdir(parents=True)
    told: list[str] = []
    store = SnapshotStore(root)
    async with another_process_snapshot(root, tmp_path, "add") as (go, other):
        def slow(message: str) -> None:
            told.append(message)
            go.touch()  # the other process ends its turn on the store once this is told
            # The snapshot after the tool waits for nobody: on a busy machine it too may take
            # 0.1 s, which is not what this test is about.
            monkeypatch.setattr(history, "SLOW_SNAPSHOT_S", 3600.0)
        tree = await turn_that_writes(root, fake, tell=told.append, tell_slow=slow)
    assert told == [f"recording the files of {root} before the turn's tool changes them is "
                    f"taking long (over 0.1 s): it waits for process {other.pid}, another "
                    f"pi-lsp on this folder, to let go of its snapshot store {store.git_dir}; "
                    "the turn waits for it, and aborting the turn stops it"]
    assert len(files_entries(tree)) == 1


async def test_a_snapshot_that_ends_soon_tells_nothing(tmp_path: Path, fake: FakeAnthropic
                                                       ) -> None:
    root = tmp_path / "ws"
    (root / ".pi" / "sessions").mkdir(parents=True)
    told: list[str] = []
    tree = await turn_that_writes(root, fake, tell=told.append, tell_slow=told.append)
    assert told == []
    assert len(files_entries(tree)) == 1


# git, but its COMMAND waits, its pid in MARKER, until it is killed.
HELD_GIT = """#!/bin/sh
for arg in "$@"; do
  if [ "$arg" = COMMAND ]; then echo $$ > "MARKER"; exec sleep 600; fi
done
exec GIT "$@"
"""


def held_git(bin_dir: Path, marker: Path, command: str) -> str:
    """A git whose `command` waits, its pid in `marker`, until it is killed; git otherwise."""
    git_path = shutil.which("git")
    assert git_path is not None
    bin_dir.mkdir(exist_ok=True)
    script = HELD_GIT.replace("COMMAND", command).replace("MARKER", str(marker))
    (bin_dir / "git").write_text(script.replace("GIT", git_path))
    (bin_dir / "git").chmod(0o755)
    return str(bin_dir / "git")


async def test_an_abort_ends_a_turn_whose_snapshot_never_ends(
        rig: Rig, fake: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pi.abort answered, but the turn went on waiting for its "before" snapshot's git: one
    that never ended kept the session busy (every prompt refused) for the server's life."""
    held = tmp_path / "held.pid"
    monkeypatch.setattr(store_for(rig.root), "git", held_git(tmp_path / "bin", held, "ls-files"))
    fake.script(tool_reply([write("c1", "a.txt", "a\n")]))
    prompt = asyncio.ensure_future(rig.harness.prompt("write"))
    git_pid = await pid_in(held)
    assert rig.harness.abort()
    done, _ = await asyncio.wait([prompt], timeout=CEILING_S)
    if not done:
        os.kill(git_pid, signal.SIGKILL)  # so the test ends, failing
    await prompt
    assert done, "the aborted turn waited for its snapshot's git"
    await gone(git_pid, "the aborted snapshot's git")
    *_, result, last = [e["message"] for e in rig.entries() if e["type"] == "message"]
    assert result["role"] == "toolResult" and result["isError"]
    assert last["stopReason"] == "aborted"  # pi 1.6's turn after an aborted tool batch
    assert "aborted" in json.dumps(result["content"])
    assert not (rig.root / "a.txt").exists() and rig.files_entries() == []


async def test_the_editor_is_told_of_a_snapshot_that_runs_long(tmp_path: Path,
                                                              fake: FakeAnthropic) -> None:
    """While a snapshot's git ran on (up to 300 s a run) the editor showed a turn doing
    nothing: it is told once, naming the folder, and pi.abort stops it, as it says."""
    root = user_repo(tmp_path / "ws")
    (root / ".pi" / "sessions").mkdir(parents=True)
    held = tmp_path / "held.pid"
    git_path = held_git(tmp_path / "bin", held, "ls-files")
    env = {"PATH": f"{Path(git_path).parent}{os.pathsep}{os.environ['PATH']}"}
    serve = pi_lsp_with("from pi_lsp.files import history; history.SLOW_SNAPSHOT_S = 0.1",
                        "serve")
    async with own_server(env, serve) as client:
        pi = await connect(client, CLIENTS[1], tmp_path, init_options(fake, toolApproval="auto"),
                           folders=("ws",))

        def notices() -> list[str]:
            return [m.message for m in client.messages if "is taking long" in m.message]

        uri = (await call(client, "pi.newSession", {}))["uri"]
        fake.script(tool_reply([write("c1", "a.txt", "a\n")]))
        since = pi.mark()
        turn = (await call(client, "pi.prompt", {"uri": uri, "text": "write"}))["turnId"]
        git_pid = await pid_in(held)
        try:
            await until(notices, "the notice of a long snapshot")
        finally:
            aborted = await call(client, "pi.abort", {"uri": uri})  # the git stops either way
        assert aborted["aborted"]
        assert (await wait_events(pi, turn, since))[-1]["type"] == "agent_end"
        await gone(git_pid, "the aborted snapshot's git")
        [notice] = notices()
        assert notice.startswith(f"pi-lsp: recording the files of {root} before the turn's "
                                 "tool changes them is taking long")
        assert notice.endswith("aborting the turn stops it")
        assert not (root / "a.txt").exists()
        await asyncio.wait_for(client.shutdown_session(), CEILING_S)


async def test_a_snapshot_takes_open_files_over_the_disk(tmp_path: Path) -> None:
    root = user_repo(tmp_path / "ws")
    store = SnapshotStore(root)
    disk = await store.snapshot()
    held = await store.snapshot({"app.py": b"unsaved\n", "debug.log": b"ignored, open\n",
                                 "gone.txt": b"open, never saved\n"})
    assert await store.read(held.tree, "app.py") == b"unsaved\n"
    assert await store.read(disk.tree, "app.py") == b"print('v0')\n"
    # Only what the snapshot holds anyway: never an ignored file or one missing on disk.
    assert await store.read(held.tree, "debug.log") is None
    assert await store.read(held.tree, "gone.txt") is None
    # The next snapshot reads the disk again, though the file's times did not change.
    assert (await store.snapshot()).tree == disk.tree


# Bytes git would change on add or checkout under a committed `.gitattributes`.
BYTES = {"win.bat": b"line1\r\nline2\r\n", "unix.txt": b"a\nb\n", "mixed.txt": b"a\r\nb\n",
         "img.png": b"\x89PNG\r\n\x1a\n\x00\x00\r\n\xff", "id.txt": b"$Id$\r\n"}


@pytest.mark.parametrize("attributes", [
    "* crlf", "* -crlf", "* crlf=input", "* text", "* text=auto", "* text eol=crlf",
    "* eol=crlf", "* eol=lf", "* binary", "* ident", "* text working-tree-encoding=UTF-16",
    "[attr]mine text eol=crlf\n* mine"])
async def test_snapshots_and_restores_keep_every_byte_whatever_gitattributes_says(
        tmp_path: Path, attributes: str) -> None:
    """`!text` left text unspecified, and git fell back to the legacy `crlf` attribute: with a
    committed `* crlf`, snapshots stored CRLF files (binary ones too) as LF, and a restore
    wrote LF over the user's bytes."""
    (tmp_path / ".gitattributes").write_text(f"{attributes}\n")
    for name, content in BYTES.items():
        (tmp_path / name).write_bytes(content)
    store = SnapshotStore(tmp_path)
    then = await store.snapshot()
    for name, content in BYTES.items():
        (tmp_path / name).write_bytes(content + b"more\r\nlines\n")
    restored = await restore_files(None, store, None, undo_id=then.tree)
    assert {f.path for f in restored.files} == set(BYTES)
    assert {name: (tmp_path / name).read_bytes() for name in BYTES} == BYTES
    await restore_files(None, store, None, undo_id=restored.undo_id)
    assert {name: (tmp_path / name).read_bytes() for name in BYTES} == {
        name: content + b"more\r\nlines\n" for name, content in BYTES.items()}


async def test_a_store_made_before_keeps_every_byte_too(tmp_path: Path) -> None:
    """A store keeps the attributes it was made with: one an earlier pi-lsp made held
    `!text`, and went on turning CRLF into LF under a committed `* crlf`."""
    store = SnapshotStore(tmp_path)
    await store.snapshot()
    (store.git_dir / "info" / "attributes").write_text("* !filter !diff !merge !text !eol\n")
    (tmp_path / ".gitattributes").write_text("* crlf\n")
    (tmp_path / "win.bat").write_bytes(b"line1\r\n")
    then = await store.snapshot()
    assert await store.read(then.tree, "win.bat") == b"line1\r\n"


async def test_a_file_an_earlier_store_snapshot_keeps_every_byte_after_the_upgrade(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's index kept the blob `!text` had turned to LF: git does not notice that
    attributes changed, so `add -A` skipped the unchanged file, and a restore wrote LF over it."""
    (tmp_path / ".gitattributes").write_text("* crlf\n")
    (tmp_path / "win.bat").write_bytes(b"line1\r\n")
    # Older than the index will be, so git trusts the index's entry over the file.
    hour_ago = (tmp_path / "win.bat").stat().st_mtime - 3600
    os.utime(tmp_path / "win.bat", (hour_ago, hour_ago))
    store = SnapshotStore(tmp_path)
    with monkeypatch.context() as earlier:  # a snapshot an earlier pi-lsp took
        earlier.setattr(snapshots, "ATTRIBUTES", "* !filter !diff !merge !text !eol "
                        "!working-tree-encoding !ident !export-subst\n")
        old = await store.snapshot()
    assert await store.read(old.tree, "win.bat") == b"line1\n"
    then = await store.snapshot()
    (tmp_path / "win.bat").write_bytes(b"changed\r\n")
    await restore_files(None, store, None, undo_id=then.tree)
    assert (tmp_path / "win.bat").read_bytes() == b"line1\r\n"


async def test_pi_and_git_folders_stay_out_whatever_gitignore_says(tmp_path: Path) -> None:
    """`.pi/` was left out only by the store's info/exclude, which a committed `.gitignore`
    outranks: with `!.pi` there every snapshot held the session files, listed as refused
    (and a `.GIT` folder, which git refuses to add, failed every snapshot)."""
    root = tmp_path
    (root / ".gitignore").write_text("!.pi\n!.PI\n!.git\n")
    for private in ("a.txt", ".pi/sessions/s.jsonl", "sub/.pi/x", "sub/.PI/y", "sub/.GIT/z"):
        (root / private).parent.mkdir(parents=True, exist_ok=True)
        (root / private).write_text("private\n")
    (root / ".pi" / "big.jsonl").write_bytes(b"x" * (snapshots.MAX_FILE_BYTES + 1))
    store = SnapshotStore(root)
    await store.snapshot()
    # What a snapshot made before this fix left in the store's index (its attributes older).
    await store._run("add", "-f", "--", ".pi/sessions/s.jsonl", "sub/.pi/x")
    (store.git_dir / "info" / "attributes").write_text("* !filter !diff !merge !text !eol\n")
    snapshot = await store.snapshot()
    held = (await store._run("ls-tree", "-r", "--name-only", snapshot.tree)).decode().split()
    assert sorted(held) == [".gitignore", "a.txt"]
    assert snapshot.skipped == []


# -- the state at an entry, changes, restore ---------------------------------------------


async def test_state_at_entries(rig: Rig, fake: FakeAnthropic) -> None:
    first, second = await two_turns(rig, fake)
    entries = rig.entries()
    one, two = rig.files_entries()
    assert state_at(rig.tree, first) == Snapshot(one["data"]["after"])
    assert state_at(rig.tree, second) == Snapshot(two["data"]["after"])
    # before any turn recorded files: the state before the first one below
    assert state_at(rig.tree, entries[0]["id"]) == Snapshot(one["data"]["before"])


async def test_changes_restore_and_undo(rig: Rig, fake: FakeAnthropic) -> None:
    first, _second = await two_turns(rig, fake)
    store = store_for(rig.root)
    before = repo_state(rig.root)
    changes = await file_changes(rig.tree, store, first)
    assert changes.available
    assert [(f.path, f.status) for f in changes.files] == [
        ("new/deep.txt", "deleted"), ("notes.txt", "modified")]
    notes = changes.files[1].diff
    assert "-v2" in notes and "+v1" in notes and notes.startswith("diff --git a/notes.txt")
    assert "-deep" in changes.files[0].diff

    result = await restore_files(rig.tree, store, first)
    assert [f.path for f in result.files] == ["new/deep.txt", "notes.txt"]
    assert (rig.root / "notes.txt").read_text() == "v1\n"
    assert not (rig.root / "new").exists()  # the directory it left empty goes too
    assert (rig.root / "debug.log").read_text() == "ignored\n"
    assert (rig.root / "build" / "out.bin").exists()
    assert (await file_changes(rig.tree, store, first)).files == []

    undone = await restore_files(None, store, None, result.undo_id)
    assert [(f.path, f.status) for f in undone.files] == [
        ("new/deep.txt", "added"), ("notes.txt", "modified")]
    assert (rig.root / "notes.txt").read_text() == "v2\n"
    assert (rig.root / "new" / "deep.txt").read_text() == "deep\n"
    assert repo_state(rig.root) == before


async def test_restore_takes_back_user_edits_made_since(rig: Rig, fake: FakeAnthropic) -> None:
    first, _ = await two_turns(rig, fake)
    (rig.root / "mine.txt").write_text("mine\n")
    (rig.root / "app.py").write_text("print('edited')\n")
    result = await restore_files(rig.tree, store_for(rig.root), first)
    assert {f.path: f.status for f in result.files}["mine.txt"] == "deleted"
    assert not (rig.root / "mine.txt").exists()
    assert (rig.root / "app.py").read_text() == "print('v0')\n"
    await restore_files(None, store_for(rig.root), None, result.undo_id)
    assert (rig.root / "mine.txt").read_text() == "mine\n"
    assert (rig.root / "app.py").read_text() == "print('edited')\n"


# -- ignored files: never deleted, written or reverted ------------------------------------


async def test_restore_never_deletes_a_file_that_was_ignored_then(rig: Rig, fake: FakeAnthropic
                                                                   ) -> None:
    """A file absent from the entry's snapshot because it was ignored then is no file to
    delete, though .gitignore no longer ignores it (found in review: it was deleted)."""
    (rig.root / "logs").mkdir()
    (rig.root / "logs" / "a.log").write_text("mine\n")  # a folder with only ignored files
    fake.script(tool_reply([write("c1", "notes.txt", "v1\n")]), text_reply("ok"))
    await rig.harness.prompt("write notes")
    first = rig.last_assistant()
    fake.script(tool_reply([write("c2", ".gitignore", "build/\n"),
                            write("c3", "logs/new.txt", "new\n")]), text_reply("ok"))
    await rig.harness.prompt("stop ignoring logs")
    store = store_for(rig.root)
    changes = await file_changes(rig.tree, store, first)
    assert [(f.path, f.status) for f in changes.files] == [
        (".gitignore", "modified"), ("logs/new.txt", "deleted")]
    assert changes.skipped == ["debug.log", "logs/a.log"]
    result = await restore_files(rig.tree, store, first)
    assert [f.path for f in result.files] == [".gitignore", "logs/new.txt"]
    assert result.skipped == ["debug.log", "logs/a.log"]
    assert (rig.root / "debug.log").read_text() == "ignored\n"
    assert (rig.root / "logs" / "a.log").read_text() == "mine\n"
    assert not (rig.root / "logs" / "new.txt").exists()  # the folder is not ignored whole
    assert (rig.root / ".gitignore").read_text() == "*.log\nbuild/\n"


async def test_restore_never_touches_a_file_ignored_then_and_now(rig: Rig, fake: FakeAnthropic
                                                                  ) -> None:
    """A file snapshot before a .gitignore took it in drops out of later snapshots, and a
    restore of the earlier state leaves the user's newer version alone (found in review: the
    store's index kept it, and a restore put its old content back)."""
    (rig.root / ".env").write_text("A=1\n")
    fake.script(tool_reply([write("c1", ".gitignore", "*.log\nbuild/\n.env\n")]),
                text_reply("ok"))
    await rig.harness.prompt("ignore .env")
    start, first = rig.entries()[0]["id"], rig.last_assistant()
    (rig.root / ".env").write_text("A=1\nB=2\n")
    fake.script(tool_reply([write("c2", "notes.txt", "v1\n")]), text_reply("ok"))
    await rig.harness.prompt("write notes")
    store = store_for(rig.root)
    for data in (e["data"] for e in rig.files_entries()):
        assert await store.read(data["after"], ".env") is None  # the secret is kept no more
    result = await restore_files(rig.tree, store, first)
    assert [f.path for f in result.files] == ["notes.txt"]
    assert (rig.root / ".env").read_text() == "A=1\nB=2\n"
    # Before the first turn .env was not ignored and the snapshot holds it; it is ignored now.
    before = state_at(rig.tree, start)
    assert before is not None and await store.read(before.tree, ".env") == b"A=1\n"
    changes = await file_changes(rig.tree, store, start)
    assert ".env" not in [f.path for f in changes.files] and ".env" in changes.skipped
    result = await restore_files(rig.tree, store, start)
    assert ".env" in result.skipped
    assert (rig.root / ".env").read_text() == "A=1\nB=2\n"
    assert (rig.root / ".gitignore").read_text() == "*.log\nbuild/\n"

async def test_restore_ignores_what_the_users_git_ignores(
        rig: Rig, fake: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Besides .gitignore: the repository's .git/info/exclude and the user's core.excludesFile
    (which the user's git reads instead of ~/.config/git/ignore). Found in review: the store
    read neither, so a file only they ignore was deleted by a restore."""
    home = tmp_path / "home"
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".config" / "git" / "ignore").write_text("*.bak\n")  # not read: a file is set
    (home / "global-ignore").write_text("*.swp\n")
    (home / ".gitconfig").write_text(f"[core]\n\texcludesFile = {home / 'global-ignore'}\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    (rig.root / ".git" / "info").mkdir(exist_ok=True)
    (rig.root / ".git" / "info" / "exclude").write_text("scratch.md\n")
    fake.script(tool_reply([write("c1", "notes.txt", "v1\n")]), text_reply("ok"))
    await rig.harness.prompt("write notes")
    first = rig.last_assistant()
    for name in ("scratch.md", "x.swp", "y.bak"):
        (rig.root / name).write_text("mine\n")
    assert git(rig.root, "check-ignore", "scratch.md", "x.swp", "y.bak", "--no-index").split() \
        == ["scratch.md", "x.swp"]  # as the user's git sees them, y.bak not
    result = await restore_files(rig.tree, store_for(rig.root), first)
    assert [(f.path, f.status) for f in result.files] == [("y.bak", "deleted")]
    assert (rig.root / "scratch.md").exists() and (rig.root / "x.swp").exists()


async def test_restore_never_brings_back_a_file_ignored_now(rig: Rig, fake: FakeAnthropic
                                                            ) -> None:
    """A secret snapshot before it was ignored, then ignored and deleted by the user, stays
    gone (found in review: the restore wrote it back)."""
    (rig.root / ".env").write_text("OLD_SECRET=1\n")
    fake.script(tool_reply([write("c1", "notes.txt", "v1\n")]), text_reply("ok"))
    await rig.harness.prompt("write notes")
    first = rig.last_assistant()
    (rig.root / ".gitignore").write_text("*.log\nbuild/\n.env\n")
    (rig.root / ".env").unlink()
    result = await restore_files(rig.tree, store_for(rig.root), first)
    assert ".env" in result.skipped and ".env" not in [f.path for f in result.files]
    assert not (rig.root / ".env").exists()


async def test_snapshots_keep_one_list_of_the_ignored_files_they_share(
        rig: Rig, fake: FakeAnthropic) -> None:
    """Each tool call's snapshot notes the ignored files it left out; an unchanged list is
    kept once, not again per snapshot (found in review: megabytes a call in a built tree)."""
    fake.script(*(tool_reply([write(f"c{n}", "notes.txt", f"v{n}\n")]) for n in range(3)),
                text_reply("ok"))
    await rig.harness.prompt("write notes three times")
    folder = store_for(rig.root).git_dir / "pi-lsp-ignored"
    trees = {e["data"]["after"] for e in rig.files_entries()}
    assert len(trees) >= 3
    assert len([f for f in folder.iterdir() if f.name.endswith(".z")]) == 1
    assert all(store_for(rig.root).ignored_in([t], ["debug.log"]) == ["debug.log"] for t in trees)


async def test_undoing_a_restore_never_deletes_a_file_ignored_before_it(
        rig: Rig, fake: FakeAnthropic) -> None:
    """An undo id names no session entry: what its snapshot left out as ignored is kept by
    the store, so undoing a restore that changed .gitignore deletes no ignored file."""
    fake.script(tool_reply([write("c1", ".gitignore", "build/\n")]), text_reply("ok"))
    await rig.harness.prompt("stop ignoring logs")
    first = rig.last_assistant()
    fake.script(tool_reply([write("c2", ".gitignore", "*.log\nbuild/\n")]), text_reply("ok"))
    await rig.harness.prompt("ignore logs again")
    (rig.root / "debug.log").write_text("ignored\nmine\n")
    store = store_for(rig.root)
    result = await restore_files(rig.tree, store, first)
    assert [f.path for f in result.files] == [".gitignore"] and "debug.log" in result.skipped
    assert (rig.root / "debug.log").read_text() == "ignored\nmine\n"
    undone = await restore_files(None, store, None, result.undo_id)
    assert [f.path for f in undone.files] == [".gitignore"] and "debug.log" in undone.skipped
    assert (rig.root / "debug.log").read_text() == "ignored\nmine\n"
    assert (rig.root / ".gitignore").read_text() == "*.log\nbuild/\n"


async def test_folders_ignored_whole_are_noted_whatever_their_names(tmp_path: Path) -> None:
    """check-ignore reads pathspecs: a folder named like pathspec magic must not fail it."""
    names = ["out", ":(top)out1", ":out2", ":!out3", "out[4]"]
    for name in names:
        (tmp_path / name).mkdir()
        (tmp_path / name / "f").write_text("ignored\n")
    (tmp_path / "logs").mkdir()  # a folder that only holds ignored files is not ignored
    (tmp_path / "logs" / "a.out").mkdir()
    (tmp_path / "logs" / "a.out" / "f").write_text("ignored\n")
    (tmp_path / ".gitignore").write_text("out*/\n:*/\n*.out/\n")
    store = SnapshotStore(tmp_path)
    snapshot = await store.snapshot()
    assert store.ignored.paths(snapshot.tree) == {*(f"{n}/" for n in names), "logs/a.out/"}
    assert store.ignored_in([snapshot.tree], ["out/f", ":out2", "logs/new.txt", "outer"]) == [
        "out/f", ":out2"]


class OpenOnDisk(DiskFiles):
    """An editor with files open and nothing unsaved that cannot delete files."""

    def __init__(self, *paths: Path) -> None:
        self.paths = paths

    def open_texts(self) -> dict[Path, str | None]:
        return {path.resolve(): None for path in self.paths}


async def test_an_open_file_an_editor_cannot_delete_is_deleted_on_disk(
        rig: Rig, fake: FakeAnthropic) -> None:
    first, _ = await two_turns(rig, fake)
    deep = rig.root / "new" / "deep.txt"
    result = await restore_files(rig.tree, store_for(rig.root), first, files=OpenOnDisk(deep))
    assert {f.path: f.status for f in result.files}["new/deep.txt"] == "deleted"
    assert not (rig.root / "new").exists()  # the file, and the folder it left empty
    assert result.in_editor == []


async def unsaved_buffer_over(tmp_path: Path, then: str | None
                              ) -> tuple[Path, SnapshotStore, Snapshot, TextDocument,
                                         EditorFiles]:
    """ws/a.txt recorded as `then` (None: no file), now "one\n" on disk and open in an editor
    that applies edits, with unsaved text: its path, the store, the recorded snapshot, the
    document and the editor."""
    root = tmp_path / "ws"
    root.mkdir()
    path = root / "a.txt"
    if then is not None:
        path.write_text(then)
    store = SnapshotStore(root)
    target = await store.snapshot()
    path.write_text("one\n")
    document = TextDocument(path.as_uri(), "one\nunsaved\n", version=1)
    files = applying_editor(document)
    files.synced(document.uri)
    await files.settle()
    return path, store, target, document, files


@pytest.mark.parametrize("then,refusal", [
    ("one\n", "changed in the editor while it was being written; nothing was written. Read "
     "it again."),
    (None, "changed in the editor while it was being deleted; it was not deleted.")],
    ids=["written", "deleted"])
async def test_a_restore_keeps_a_key_typed_in_an_open_file_while_it_runs(
        tmp_path: Path, then: str | None, refusal: str) -> None:
    """A restore took its undo snapshot of an open buffer, then awaited (git, the other files'
    writes) before writing the buffer, or deleting its file through the editor: a key typed
    meanwhile was in neither the buffer nor the undo snapshot. The restore refuses where the
    buffer is not the undo snapshot's text."""
    path, store, target, document, files = await unsaved_buffer_over(tmp_path, then)
    with pytest.raises(RewindError) as refused:
        await restore_files(None, after_undo_snapshot(store, lambda: typed(
            files, document, "one\nunsaved\nTYPED\n")), None, target.tree, files=files)
    assert str(refused.value) == f"a.txt was not restored: {path} {refusal}"
    assert files.document(path) is document  # still open
    assert document.source == "one\nunsaved\nTYPED\n"
    assert path.read_text() == "one\n"


@pytest.mark.parametrize("saved", [True, False], ids=["typed and saved", "closed unsaved"])
@pytest.mark.parametrize("then,refusal", [
    ("then\n", "nothing was written. Read it again."), (None, "it was not deleted.")],
    ids=["written", "deleted"])
async def test_a_restore_keeps_a_key_typed_saved_and_closed_while_it_runs(
        tmp_path: Path, then: str | None, refusal: str, saved: bool) -> None:
    """As above, the file saved and closed after the key (didSave, didClose), or closed
    unsaved, before the restore wrote or deleted it: no buffer was left to tell, and the undo
    snapshot's text went to the disk over the text saved, or the file was deleted on disk (the
    disk's text, in no snapshot, with it). The disk is told to hold the undo snapshot's text,
    or nothing is written or deleted."""
    path, store, target, document, files = await unsaved_buffer_over(tmp_path, then)

    def typed_saved_and_closed() -> None:
        if saved:
            typed(files, document, "one\nunsaved\nTYPED\n")
            saved_and_closed(files, document)
        else:
            closed(files, document)
    with pytest.raises(RewindError) as refused:
        await restore_files(None, after_undo_snapshot(store, typed_saved_and_closed), None,
                            target.tree, files=files)
    assert str(refused.value) == (f"a.txt was not restored: {path} changed on disk since it "
                                  f"was read; {refusal}")
    assert path.read_text() == ("one\nunsaved\nTYPED\n" if saved else "one\n")


@pytest.mark.parametrize("then,now", [("then\n", "now\n"), (None, "now\n"), ("then\n", None)],
                         ids=["written", "deleted", "made"])
async def test_a_restore_keeps_what_another_program_wrote_after_its_undo_snapshot(
        tmp_path: Path, then: str | None, now: str | None) -> None:
    """A file no editor has open, written (or made) by another program after the restore took
    its undo snapshot: `git restore` wrote over it, or it was deleted, and that text was in no
    snapshot. The disk is told to hold the undo snapshot's files first, or nothing is changed
    on disk; the other file is left too."""
    root = tmp_path / "ws"
    root.mkdir()
    path, other = root / "a.txt", root / "b.txt"
    other.write_text("b then\n")
    if then is not None:
        path.write_text(then)
    store = SnapshotStore(root)
    target = await store.snapshot()
    other.write_text("b now\n")
    path.unlink(missing_ok=True)
    if now is not None:
        path.write_text(now)

    def written_meanwhile() -> None:
        path.write_text(f"{now or ''}THEIRS\n")
    with pytest.raises(SnapshotError) as refused:
        await restore_files(None, after_undo_snapshot(store, written_meanwhile), None, target.tree)
    assert str(refused.value) == (
        "a.txt changed on disk since the restore took its undo snapshot; the restore stopped "
        "before writing or deleting files on disk, so what is there now is kept: restore again "
        "to replace it")
    assert path.read_text() == f"{now or ''}THEIRS\n"
    assert other.read_text() == "b now\n"


async def test_a_restore_keeps_what_a_program_wrote_to_an_open_file_it_restores_on_disk(
        tmp_path: Path) -> None:
    """An open file whose restored content is not UTF-8 is restored on disk: the buffer holds
    the disk's text, so the disk is told to hold it as any closed file's is."""
    root = tmp_path / "ws"
    root.mkdir()
    path = root / "a.txt"
    path.write_bytes(b"then \xff\n")
    store = SnapshotStore(root)
    target = await store.snapshot()
    path.write_text("now\n")
    document = TextDocument(path.as_uri(), "now\n", version=1)
    files = applying_editor(document)
    files.synced(document.uri)
    await files.settle()
    with pytest.raises(SnapshotError, match=r"^a\.txt changed on disk since the restore took"):
        await restore_files(None, after_undo_snapshot(
            store, lambda: path.write_text("now\nTHEIRS\n")), None, target.tree, files=files)
    assert path.read_text() == "now\nTHEIRS\n"


def after_undo_snapshot(store: SnapshotStore, act: Callable[[], object]) -> SnapshotStore:
    """`store`, whose restore runs `act` once it has taken its undo snapshot and compared it
    with the target, before it checks the disk: a program writing, a key typed meanwhile."""
    changes = store.changes

    async def then_act(*args: Any, **kwargs: Any) -> list[FileChange]:
        found = await changes(*args, **kwargs)
        act()
        return found
    store.changes = then_act  # type: ignore[method-assign]
    return store


async def open_file_a_restore_deletes(tmp_path: Path) -> tuple[
        Path, Path, SnapshotStore, Snapshot, TextDocument, EditorFiles]:
    """ws/a.txt, made since a recorded snapshot and open (nothing unsaved) in an editor that
    deletes files, and ws/b.txt, "b then\n" then and "b now\n" now: their paths, the store, the
    recorded snapshot, the document and the editor."""
    root = tmp_path / "ws"
    root.mkdir()
    path, other = root / "a.txt", root / "b.txt"
    other.write_text("b then\n")
    store = SnapshotStore(root)
    target = await store.snapshot()
    path.write_text("mine\n")
    other.write_text("b now\n")
    document = TextDocument(path.as_uri(), "mine\n", version=1)
    files = applying_editor(document)
    files.synced(document.uri)
    await files.settle()
    return path, other, store, target, document, files


async def second_open_file(files: EditorFiles, root: Path) -> tuple[Path, TextDocument]:
    """c.txt under `root`, made since the snapshot too and open beside a.txt: its path and
    document."""
    made = root / "c.txt"
    made.write_text("c\n")
    second = TextDocument(made.as_uri(), "c\n", version=1)
    files.server.workspace.text_documents[second.uri] = second
    files.synced(second.uri)
    await files.settle()
    return made, second


@pytest.mark.parametrize("editor", [False, True], ids=["on disk", "an open file to delete"])
async def test_a_restore_refused_by_the_disk_check_tells_no_undo_id(tmp_path: Path,
                                                                     editor: bool) -> None:
    """`before_changes` (the CLI's "restoring; should it not finish, undo with: … --undo X") was
    told before the disk check, so a refusal that changed nothing showed it too, and following
    it replaced what another program wrote after the undo snapshot, which the refusal said "is
    kept". It is told only once the checks pass, the first change about to be made."""
    path, other, store, target, _document, files = await open_file_a_restore_deletes(
        tmp_path)
    undo: list[str] = []
    with pytest.raises(SnapshotError, match=r"^b\.txt changed on disk since the restore took"):
        await restore_files(None, after_undo_snapshot(
            store, lambda: other.write_text("b now\nTHEIRS\n")), None, target.tree,
            files=files if editor else DISK, before_changes=undo.append)
    assert undo == []
    assert path.read_text() == "mine\n" and other.read_text() == "b now\nTHEIRS\n"


@pytest.mark.parametrize("written", ["b.txt", "a.txt"], ids=["another file", "the open file"])
async def test_a_restore_stopped_by_the_disk_deletes_no_open_file_first(
        tmp_path: Path, written: str) -> None:
    """An open file the restore deletes went through the editor before the disk was told: a
    program writing another file meanwhile stopped the restore with "what is there now is
    kept", the open file and its buffer gone; one writing the open file itself (its buffer,
    with nothing unsaved, not reloaded yet) lost that text, as the editor deleted it and the
    disk, then as the restore makes it, passed. The disk is told first: nothing is deleted."""
    path, other, store, target, document, files = await open_file_a_restore_deletes(
        tmp_path)
    theirs = path.parent / written
    before = theirs.read_text()
    with pytest.raises(SnapshotError) as refused:
        await restore_files(None, after_undo_snapshot(store, lambda: theirs.write_text(
            f"{before}THEIRS\n")), None, target.tree, files=files)
    assert str(refused.value) == (
        f"{written} changed on disk since the restore took its undo snapshot; the restore "
        "stopped before writing or deleting files on disk, so what is there now is kept: "
        "restore again to replace it")
    assert files.document(path) is document  # still open
    assert path.read_text() == ("mine\nTHEIRS\n" if written == "a.txt" else "mine\n")
    assert other.read_text() == ("b now\nTHEIRS\n" if written == "b.txt" else "b now\n")


async def test_a_restore_stopped_by_the_disk_after_deleting_an_open_file_says_how_to_undo(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk is told again after the editor's deletes, as a program may write while the
    editor deletes: a refusal then names the open files deleted already and the undo snapshot
    that holds them (pi.restoreFiles tells the client no undo id otherwise)."""
    path, other, store, target, _document, files = await open_file_a_restore_deletes(
        tmp_path)
    deleting = files.delete_in_editor

    async def written_while_deleted(deleted: Path, old: str | None) -> None:
        await deleting(deleted, old)
        other.write_text("b now\nTHEIRS\n")
    monkeypatch.setattr(files, "delete_in_editor", written_while_deleted)
    undo: list[str] = []
    with pytest.raises(SnapshotError) as refused:
        await restore_files(None, store, None, target.tree, files=files,
                            before_changes=undo.append)
    # It said "the restore stopped before writing or deleting files on disk" beside "but the
    # restore had changed a.txt", and not that the undo it told replaces the kept b.txt too.
    assert str(refused.value) == (
        "b.txt changed on disk since the restore took its undo snapshot; the restore stopped "
        "there, writing or deleting no more files, so what is there now is kept; but the "
        f"restore had changed a.txt already: restore the undo snapshot {undo[0]} to undo that "
        "(it replaces b.txt too: keep a copy first)")
    assert not path.exists()
    assert await store.read(undo[0], "a.txt") == b"mine\n"
    assert other.read_text() == "b now\nTHEIRS\n"


async def test_a_restore_failing_after_an_editor_delete_names_it_and_the_undo_snapshot(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two open files the restore deletes through the editor, a key typed in the second while
    the first went: the refusal of the second said only that, the first deleted with its
    buffer, and pi.restoreFiles told no undo id. It names what was changed and the undo id."""
    path, other, store, target, _document, files = await open_file_a_restore_deletes(
        tmp_path)
    made, second = await second_open_file(files, path.parent)
    deleting = files.delete_in_editor

    async def typed_while_deleted(deleted: Path, old: str | None) -> None:
        await deleting(deleted, old)
        if deleted == path:
            typed(files, second, "c\nTYPED\n")
    monkeypatch.setattr(files, "delete_in_editor", typed_while_deleted)
    undo: list[str] = []
    with pytest.raises(RewindError) as refused:
        await restore_files(None, store, None, target.tree, files=files,
                            before_changes=undo.append)
    assert str(refused.value) == (
        f"c.txt was not restored: {made} changed in the editor while it was being deleted; it "
        f"was not deleted; but the restore had changed a.txt already: restore the undo "
        f"snapshot {undo[0]} to undo that")
    assert not path.exists() and made.read_text() == "c\n" and other.read_text() == "b now\n"
    assert second.source == "c\nTYPED\n"
    assert await store.read(undo[0], "a.txt") == b"mine\n"


async def test_a_restore_whose_editor_answers_an_error_names_what_it_changed(
        tmp_path: Path) -> None:
    """An editor answering workspace/applyEdit with an error (its handler threw: VS Code's
    client answers so) for the second open file's delete: the JsonRpcException came out bare,
    the first file and its buffer gone, nothing named and pi.restoreFiles told no undo id."""
    path, other, store, target, _document, files = await open_file_a_restore_deletes(
        tmp_path)
    made, second = await second_open_file(files, path.parent)
    applying = files.server.workspace_apply_edit_async

    async def second_fails(params: types.ApplyWorkspaceEditParams) -> Any:
        if params.edit.document_changes[0].uri == second.uri:
            raise JsonRpcException(message="Request workspace/applyEdit failed", code=-32603)
        return await applying(params)
    files.server.workspace_apply_edit_async = second_fails  # type: ignore[misc]
    undo: list[str] = []
    with pytest.raises(RewindError) as refused:
        await restore_files(None, store, None, target.tree, files=files,
                            before_changes=undo.append)
    assert str(refused.value) == (
        f"c.txt was not restored: the editor did not apply the change to {made}: Request "
        f"workspace/applyEdit failed; but the restore had changed a.txt already: restore the "
        f"undo snapshot {undo[0]} to undo that")
    assert not path.exists() and made.exists() and other.read_text() == "b now\n"


async def second_delete_waits(tmp_path: Path, answer: Callable[[], Any]) -> tuple[
        Path, Path, SnapshotStore, Snapshot, EditorFiles, asyncio.Event]:
    """open_file_a_restore_deletes with c.txt made and open too, in an editor whose answer to
    c.txt's delete is `answer()` awaited: a.txt, c.txt, the store, the snapshot, the editor,
    and the event set as c.txt's delete is asked."""
    path, _other, store, target, _document, files = await open_file_a_restore_deletes(
        tmp_path)
    made, second = await second_open_file(files, path.parent)
    applying = files.server.workspace_apply_edit_async
    asked = asyncio.Event()

    async def second_waits(params: types.ApplyWorkspaceEditParams) -> Any:
        if params.edit.document_changes[0].uri == second.uri:
            asked.set()
            await answer()
        return await applying(params)
    files.server.workspace_apply_edit_async = second_waits  # type: ignore[misc]
    return path, made, store, target, files, asked


async def test_a_restore_cancelled_part_way_runs_to_its_end(tmp_path: Path) -> None:
    """pi.restoreFiles cancelled ($/cancelRequest, which pi-lsp ties to the command) while the
    editor deletes its second open file stopped there: a.txt and its buffer gone, a bare
    CancelledError naming nothing, no undo id told. It runs to its end and answers so."""
    answered = asyncio.Event()
    path, made, store, target, files, asked = await second_delete_waits(tmp_path,
                                                                       answered.wait)
    restoring = asyncio.ensure_future(restore_files(None, store, None, target.tree,
                                                    files=files, to_its_end=True))
    await asked.wait()
    restoring.cancel()
    answered.set()  # the editor answers after the cancel
    result = await restoring
    assert [(f.path, f.status) for f in result.files] == [
        ("a.txt", "deleted"), ("b.txt", "modified"), ("c.txt", "deleted")]
    assert not path.exists() and not made.exists()
    assert await store.read(result.undo_id, "a.txt") == b"mine\n"


async def test_a_restore_cut_part_way_as_the_server_ends_names_what_it_changed(
        tmp_path: Path) -> None:
    """The server ending cancels pi.restoreFiles and cuts its wait for the editor's answer
    (cancel_in_flight): a restore cut at its second open file's delete said nothing of a.txt,
    deleted with its buffer, nor of the undo id. It names both, as any restore stopped
    part-way."""
    cut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    path, made, store, target, files, asked = await second_delete_waits(tmp_path, lambda: cut)
    undo: list[str] = []
    restoring = asyncio.ensure_future(restore_files(
        None, store, None, target.tree, files=files, before_changes=undo.append,
        to_its_end=True))
    await asked.wait()
    restoring.cancel()
    cut.cancel()
    with pytest.raises(RewindError) as stopped:
        await restoring
    assert str(stopped.value) == (
        "the restore was cut short: the editor's answer was waited for no longer, as the "
        "server ends; but the restore had changed a.txt already: restore the "
        f"undo snapshot {undo[0]} to undo that")
    assert isinstance(stopped.value, StoppedPartWay) and stopped.value.undo_id == undo[0]
    assert not path.exists() and made.exists()


def test_a_request_to_the_editor_once_the_server_ends_is_cut_at_once() -> None:
    """A restore runs to its end through a cancel; one going on to an open file as the server
    ends sent its applyEdit after the requests in flight were cut, and waited forever for an
    answer pygls drops after `shutdown` (or that a closed input never brings): the server
    never exited. Such a request is cut at once, and the restore names what it changed."""
    protocol = PiServer().protocol
    sent: list[Any] = []
    protocol._send_data = sent.append  # type: ignore[method-assign]
    protocol.cancel_in_flight()  # as `shutdown` and the server's end do
    asked = protocol.send_request(types.WORKSPACE_APPLY_EDIT,
                                  types.ApplyWorkspaceEditParams(edit=types.WorkspaceEdit()))
    assert asked.cancelled() and sent == []


async def test_a_restore_failing_on_disk_after_an_editor_delete_names_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An OSError deleting a file on disk (a folder not writable) after an open file went
    through the editor came as it was, naming neither."""
    path, other, store, target, _document, files = await open_file_a_restore_deletes(
        tmp_path)
    made = path.parent / "c.txt"
    made.write_text("c\n")

    def unwritable(root: Path, relative: str) -> None:
        raise PermissionError(13, "Permission denied", str(root / relative))
    monkeypatch.setattr(snapshots, "_remove", lambda root, relative: unwritable(root, relative)
                        if relative == "c.txt" else None)
    undo: list[str] = []
    with pytest.raises(RewindError) as refused:
        await restore_files(None, store, None, target.tree, files=files,
                            before_changes=undo.append)
    assert str(refused.value) == (
        f"[Errno 13] Permission denied: '{made}'; but the restore had changed a.txt already: "
        f"restore the undo snapshot {undo[0]} to undo that")
    assert not path.exists() and made.exists() and other.read_text() == "b now\n"


async def test_a_restore_failing_in_git_names_the_files_it_deleted_on_disk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`git restore` failing after the open file went through the editor and another was
    deleted on disk: the refusal named only the open file, not the one deleted on disk."""
    path, _other, store, target, _document, files = await open_file_a_restore_deletes(
        tmp_path)
    made = path.parent / "c.txt"
    made.write_text("c\n")
    run = store._run

    async def failing(*args: str, **kwargs: Any) -> bytes:
        if args[0] == "restore":
            raise SnapshotError("git restore failed: error: unable to create file b.txt")
        return await run(*args, **kwargs)
    monkeypatch.setattr(store, "_run", failing)
    undo: list[str] = []
    with pytest.raises(SnapshotError) as refused:
        await restore_files(None, store, None, target.tree, files=files,
                            before_changes=undo.append)
    assert str(refused.value) == (
        "git restore failed: error: unable to create file b.txt; but the restore had changed "
        f"a.txt, c.txt and may have written b.txt already: restore the undo snapshot {undo[0]} "
        "to undo that")
    assert not path.exists() and not made.exists()


async def test_a_restore_failing_in_git_before_any_delete_still_gives_the_undo_snapshot(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`git restore` writing a.txt, then failing on b.txt (a read-only file, a full disk), in a
    restore that deleted nothing: the bare git error gave no undo id, which pi.restoreFiles
    tells a client no other way, with a.txt already written."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("a then\n")
    (root / "b.txt").write_text("b then\n")
    store = SnapshotStore(root)
    target = await store.snapshot()
    (root / "a.txt").write_text("a now\n")
    (root / "b.txt").write_text("b now\n")
    run = store._run

    async def failing(*args: str, **kwargs: Any) -> bytes:
        if args[0] == "restore":  # as git does: a.txt written, b.txt failed
            (root / "a.txt").write_text("a then\n")
            raise SnapshotError("git restore failed: error: unable to create file b.txt")
        return await run(*args, **kwargs)
    monkeypatch.setattr(store, "_run", failing)
    undo: list[str] = []
    with pytest.raises(SnapshotError) as refused:
        await restore_files(None, store, None, target.tree, before_changes=undo.append)
    assert str(refused.value) == (
        "git restore failed: error: unable to create file b.txt; but the restore may have "
        f"written a.txt, b.txt already: restore the undo snapshot {undo[0]} to undo that")
    monkeypatch.undo()  # git works again
    await restore_files(None, store, None, undo[0])
    assert (root / "a.txt").read_text() == "a now\n" and (root / "b.txt").read_text() == "b now\n"


async def test_a_restore_failing_in_the_editor_after_the_disk_names_what_it_changed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An open file written last, through the editor, refused (a key typed while the disk was
    restored): the files restored on disk before were named nowhere, nor the undo id."""
    path, store, target, document, files = await unsaved_buffer_over(tmp_path, "one\n")
    other = path.parent / "b.txt"
    other.write_text("b now\n")
    restore = store.restore

    async def typed_while_restored(*args: Any) -> None:
        await restore(*args)
        typed(files, document, "one\nunsaved\nTYPED\n")
    monkeypatch.setattr(store, "restore", typed_while_restored)
    undo: list[str] = []
    with pytest.raises(RewindError) as refused:
        await restore_files(None, store, None, target.tree, files=files,
                            before_changes=undo.append)
    assert str(refused.value) == (
        f"a.txt was not restored: {path} changed in the editor while it was being written; "
        f"nothing was written. Read it again; but the restore had changed b.txt already: "
        f"restore the undo snapshot {undo[0]} to undo that")
    assert not other.exists() and document.source == "one\nunsaved\nTYPED\n"


async def test_a_restore_goes_on_where_a_file_is_already_as_it_makes_it(tmp_path: Path) -> None:
    """A file the restore deletes, deleted since its undo snapshot (by an editor, or a build),
    loses nothing: the restore goes on."""
    root = tmp_path / "ws"
    root.mkdir()
    path, other = root / "a.txt", root / "b.txt"
    other.write_text("b then\n")
    store = SnapshotStore(root)
    target = await store.snapshot()
    path.write_text("now\n")
    other.write_text("b now\n")
    await restore_files(None, after_undo_snapshot(store, path.unlink), None, target.tree)
    assert not path.exists()
    assert other.read_text() == "b then\n"


async def test_a_restore_writes_over_a_file_written_again_with_the_same_text(
        tmp_path: Path) -> None:
    """Only what a file holds counts: one written again unchanged since the undo snapshot (a
    formatter, a build touching it) is restored."""
    root = tmp_path / "ws"
    root.mkdir()
    path = root / "a.txt"
    path.write_text("then\n")
    store = SnapshotStore(root)
    target = await store.snapshot()
    path.write_text("now\n")

    def touched() -> None:
        path.write_text("now\n")
        os.utime(path, (1, 1))
    result = await restore_files(None, after_undo_snapshot(store, touched), None, target.tree)
    assert path.read_text() == "then\n"
    assert await store.read(result.undo_id, "a.txt") == b"now\n"


@pytest.mark.parametrize("meanwhile", [None, "theirs"], ids=["as it was", "led elsewhere"])
async def test_a_restore_tells_a_symlink_by_where_it_leads(tmp_path: Path, meanwhile: str | None
                                                          ) -> None:
    """A symlink the undo snapshot holds is restored while it still leads where it did then;
    one led elsewhere since is left as it is."""
    root = tmp_path / "ws"
    root.mkdir()
    link = root / "link"
    link.symlink_to("then")
    store = SnapshotStore(root)
    target = await store.snapshot()
    link.unlink()
    link.symlink_to("now")

    def led_elsewhere() -> None:
        if meanwhile is not None:
            link.unlink()
            link.symlink_to(meanwhile)
    if meanwhile is None:
        await restore_files(None, after_undo_snapshot(store, led_elsewhere), None, target.tree)
        assert os.readlink(link) == "then"
        return
    with pytest.raises(SnapshotError, match=r"^link changed on disk since the restore took"):
        await restore_files(None, after_undo_snapshot(store, led_elsewhere), None, target.tree)
    assert os.readlink(link) == meanwhile


@pytest.mark.parametrize("buffer", ["x" * (snapshots.MAX_FILE_BYTES + 1), "one\n\ud800\n"],
                         ids=["over the cap", "lone surrogate"])
async def test_a_restore_leaves_alone_an_open_file_whose_unsaved_text_no_snapshot_holds(
        tmp_path: Path, buffer: str) -> None:
    """Such a buffer is in no undo snapshot: the restore used to start, then refuse at that
    file in the words of a key typed meanwhile, the other files already restored."""
    root = tmp_path / "ws"
    root.mkdir()
    path, other = root / "a.txt", root / "b.txt"
    path.write_text("old\n")
    other.write_text("b old\n")
    store = SnapshotStore(root)
    target = await store.snapshot()
    path.write_text("one\n")
    other.write_text("b new\n")
    document = TextDocument(path.as_uri(), buffer, version=1)
    files = applying_editor(document)
    files.synced(document.uri)
    await files.settle()
    preview = await changes_to(store, target, files=files)
    result = await restore_files(None, store, None, target.tree, files=files)
    for found in (preview, result):
        assert [f.path for f in found.files] == ["b.txt"]
        assert found.why == {"a.txt": "a.txt has changes not saved in the editor that no "
                             "snapshot can hold (over 5 MB, or not Unicode text); save it and "
                             "restore again"}
    assert other.read_text() == "b old\n"
    assert document.source == buffer and path.read_text() == "one\n"
    path.write_text("old\n")  # the disk as the target has it: only the buffer differs
    files.synced(document.uri)
    await files.settle()
    result = await restore_files(None, store, None, target.tree, files=files)
    assert (result.files, list(result.why)) == ([], ["a.txt"])
    assert document.source == buffer


async def test_restore_refuses_what_it_cannot_do(rig: Rig, fake: FakeAnthropic) -> None:
    store = store_for(rig.root)
    fake.script(text_reply("just talk"))
    await rig.harness.prompt("hello")
    leaf = rig.last_assistant()
    assert not (await file_changes(rig.tree, store, leaf)).available
    with pytest.raises(RewindError, match="no turn recorded"):
        await restore_files(rig.tree, store, leaf)
    with pytest.raises(RewindError, match="not a snapshot id"):
        await restore_files(None, store, None, "HEAD")
    with pytest.raises(RewindError, match="no snapshot"):
        await restore_files(None, store, None, "0" * 40)


# -- trees a session names that the store never recorded ----------------------------------

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # every git knows it


def planted(root: Path, tree: str) -> tuple[SessionTree, str]:
    """A committed session whose `pi-lsp/files` entry names `tree` before and after."""
    (root / ".pi" / "sessions").mkdir(parents=True, exist_ok=True)
    session = SessionTree.create(str(root / ".pi" / "sessions" / "planted.jsonl"), str(root))
    session.append_custom(FILES_TYPE, {"before": tree, "after": tree})
    assert session.leaf_id is not None
    return session, session.leaf_id


async def workspace_with_a_snapshot(root: Path) -> tuple[SnapshotStore, Snapshot]:
    root.mkdir(parents=True)
    (root / "top.txt").write_text("top\n")
    (root / "src").mkdir()
    (root / "src" / "a.py").write_text("a\n")
    (root / "src" / "b.py").write_text("b\n")
    store = SnapshotStore(root)
    return store, await store.snapshot()


def subtree(store: SnapshotStore, tree: str, folder: str) -> str:
    return subprocess.run(["git", f"--git-dir={store.git_dir}", "rev-parse", f"{tree}:{folder}"],
                          capture_output=True, text=True, check=True).stdout.strip()


def logged(store: SnapshotStore) -> set[str]:
    return set((store.git_dir / LOG).read_text().split())


async def refused_everywhere(store: SnapshotStore, tree: str) -> None:
    """Every way to compare with, read or restore `tree` fails with the clear error and no
    file changes."""
    files = {p: p.read_bytes() for p in store.root.rglob("*") if p.is_file()
             and ".pi" not in p.parts}
    session, entry = planted(store.root, tree)
    clear = f"no snapshot {tree} in .*: that id is not a snapshot this store recorded"
    with pytest.raises(RewindError, match=clear):
        await file_changes(session, store, entry)
    with pytest.raises(RewindError, match=clear):
        await restore_files(session, store, entry)
    with pytest.raises(RewindError, match=clear):
        await restore_files(None, store, None, tree)
    assert await count_changes(session, store, entry) == ChangeCount()
    current = await store.snapshot()
    for attempt in (store.changes(current.tree, tree), store.changes(tree, current.tree),
                    store.read(tree, "top.txt"),
                    store.restore(tree, [FileChange("top.txt", "deleted", "")])):
        with pytest.raises(SnapshotError, match=clear):
            await attempt
    cli = run_cli("rewind", session.path, "--to", entry)
    assert cli.returncode == 2 and "not a snapshot this store recorded" in cli.stderr
    assert {p: p.read_bytes() for p in store.root.rglob("*") if p.is_file()
            and ".pi" not in p.parts} == files


async def test_a_session_naming_gits_empty_tree_deletes_nothing(tmp_path: Path) -> None:
    """Restoring git's empty tree would delete every file the store tracks."""
    store, _ = await workspace_with_a_snapshot(tmp_path / "ws")
    await refused_everywhere(store, EMPTY_TREE)


async def test_an_id_a_session_names_is_checked_before_the_workspace_is_snapshotted(
        tmp_path: Path) -> None:
    """A made-up id was refused only after a snapshot of the whole workspace (up to 300 s of
    git); a folder with no store yet got one, with its files in it, for a dry run."""
    store, first = await workspace_with_a_snapshot(tmp_path / "ws")
    (store.root / "new.txt").write_text("never read into the store\n")
    before = logged(store)
    with pytest.raises(RewindError, match="not a snapshot this store recorded"):
        await changes_to(store, Snapshot(EMPTY_TREE))
    assert logged(store) == before and first.tree in before
    bare = SnapshotStore(tmp_path / "no-store-yet")
    (tmp_path / "no-store-yet").mkdir()
    with pytest.raises(RewindError, match="there is no snapshot store for this folder yet"):
        await changes_to(bare, Snapshot(EMPTY_TREE))
    assert not bare.git_dir.exists()


async def test_a_session_naming_a_snapshots_subtree_is_refused(tmp_path: Path) -> None:
    """A folder's tree id is predictable; restoring it would delete the rest and move the
    folder's files to the root."""
    store, snapshot = await workspace_with_a_snapshot(tmp_path / "ws")
    await refused_everywhere(store, subtree(store, snapshot.tree, "src"))


async def test_a_snapshot_of_an_empty_workspace_restores(tmp_path: Path) -> None:
    """The empty tree is refused only when no snapshot recorded it."""
    root = tmp_path / "ws"
    root.mkdir()
    store = SnapshotStore(root)
    empty = await store.snapshot()
    assert empty.tree == EMPTY_TREE
    (root / "later.txt").write_text("later\n")
    result = await restore_files(None, store, None, empty.tree)
    assert [(f.path, f.status) for f in result.files] == [("later.txt", "deleted")]
    assert not (root / "later.txt").exists()


async def test_a_store_older_than_its_log_restores_its_snapshots_and_only_those(
        tmp_path: Path) -> None:
    store, first = await workspace_with_a_snapshot(tmp_path / "ws")
    (store.root / "top.txt").write_text("changed\n")
    (store.root / "src" / "new.py").write_text("new\n")
    second = await store.snapshot()
    (store.git_dir / LOG).unlink()  # as a store made before the log was
    older = SnapshotStore(store.root)
    # The log is filled once with the store's root trees: its snapshots', no subtree.
    assert await older.changes(second.tree, first.tree, with_diff=False)
    assert logged(older) == {first.tree, second.tree}
    await refused_everywhere(older, EMPTY_TREE)
    await refused_everywhere(older, subtree(older, first.tree, "src"))
    result = await restore_files(None, older, None, first.tree)
    assert {(f.path, f.status) for f in result.files} == {("top.txt", "modified"),
                                                          ("src/new.py", "deleted")}
    assert (store.root / "top.txt").read_text() == "top\n"
    assert not (store.root / "src" / "new.py").exists()
    await restore_files(None, older, None, result.undo_id)
    assert (store.root / "top.txt").read_text() == "changed\n"
    assert EMPTY_TREE not in logged(older)


@pytest.mark.parametrize("open_in_editor", [False, True], ids=["on-disk", "open"])
async def test_a_restore_that_makes_a_folder_a_symlink_deletes_nothing_outside(
        tmp_path: Path, open_in_editor: bool) -> None:
    """A snapshot may hold a symlink where a folder is now: the folder's files are deleted
    before the symlink is written, never through it (found in review: a committed session
    naming such a tree deleted a file outside the workspace)."""
    root, outside = tmp_path / "ws", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "victim.txt").write_text("precious\n")
    (root / "x").symlink_to(outside)
    store = SnapshotStore(root)
    with_link = await store.snapshot()
    (root / "x").unlink()
    (root / "x").mkdir()
    (root / "x" / "victim.txt").write_text("decoy\n")
    files = OpenOnDisk(root / "x" / "victim.txt") if open_in_editor else DiskFiles()
    result = await restore_files(None, store, None, with_link.tree, files=files)
    assert {(f.path, f.status) for f in result.files} == {("x", "added"),
                                                          ("x/victim.txt", "deleted")}
    assert (root / "x").is_symlink()
    assert (outside / "victim.txt").read_text() == "precious\n"


async def test_a_folder_holding_what_no_snapshot_holds_is_never_replaced_by_a_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file of the target is now a folder holding ignored, too large and .pi/ files: it is
    left whole and named with why (found in review: git cleared the folder for the file, and
    undo brought back only its tracked file)."""
    monkeypatch.setattr(snapshots, "MAX_FILE_BYTES", 100)
    root = tmp_path / "ws"
    root.mkdir()
    (root / ".gitignore").write_text("*.log\n")
    (root / "x").write_text("old file x\n")
    store = SnapshotStore(root)
    first = await store.snapshot()
    (root / "x").unlink()
    contents = {"x/user.txt": "user notes\n", "x/build.log": "ignored\n", "x/big.bin": "B" * 500,
                "x/.pi/precious.jsonl": "session\n"}
    for path, text in contents.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    changes = await changes_to(store, first)
    assert changes.files == [] and changes.skipped == ["x", "x/big.bin", "x/user.txt"]
    assert re.search(r"x is a folder holding x/\S+, which no snapshot holds", changes.why["x"])
    result = await restore_files(None, store, None, first.tree)
    assert result.files == [] and result.skipped == changes.skipped and "x" in result.why
    assert {path: (root / path).read_text() for path in contents} == contents


async def test_a_folder_deeper_than_python_recurses_is_still_searched(tmp_path: Path) -> None:
    """A file of the target is now a folder whose only file, ignored, is 1,200 folders down:
    it is found and the folder left whole (os.walk recursed, and failed past some 990)."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / ".gitignore").write_text("*.log\n")
    (root / "x").write_text("old file x\n")
    store = SnapshotStore(root)
    first = await store.snapshot()
    (root / "x").unlink()
    deepest = root / "x" / "/".join(["d"] * 1200)
    make_folders(deepest)
    (deepest / "deep.log").write_text("ignored\n")
    try:
        changes = await changes_to(store, first)
        assert changes.files == [] and changes.skipped == ["x"]
        assert re.search(r"x is a folder holding x/(d/){1200}deep\.log, which no snapshot "
                         "holds", changes.why["x"])
        result = await restore_files(None, store, None, first.tree)
        assert result.files == [] and (deepest / "deep.log").read_text() == "ignored\n"
    finally:  # pytest's clean-up (shutil.rmtree) recurses as os.walk does
        subprocess.run(["rm", "-rf", str(root / "x")], check=True)


async def test_a_file_no_snapshot_holds_is_never_replaced_by_a_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder of the target is now a file too large to snapshot: it is left as it is."""
    monkeypatch.setattr(snapshots, "MAX_FILE_BYTES", 100)
    root = tmp_path / "ws"
    (root / "z").mkdir(parents=True)
    (root / "z" / "a.txt").write_text("a\n")
    store = SnapshotStore(root)
    first = await store.snapshot()
    shutil.rmtree(root / "z")
    (root / "z").write_text("Z" * 500)
    result = await restore_files(None, store, None, first.tree)
    assert result.files == [] and result.skipped == ["z", "z/a.txt"]
    assert "z is a file no snapshot holds" in result.why["z/a.txt"]
    assert (root / "z").read_text() == "Z" * 500


def nested_repo(folder: Path) -> None:
    """A user's repository with one (empty) commit."""
    git(folder, "init", "-q")
    git(folder, "-c", "user.name=U", "-c", "user.email=u@example.com", "commit", "-q",
        "--allow-empty", "-m", "one")


async def test_a_restore_never_touches_a_nested_repository(tmp_path: Path) -> None:
    """A nested repository is a gitlink in a snapshot, never its files: a restore leaves it and
    all in it alone and says why (found in review: it wrote the target's file over the nested
    repository's uncommitted work, and a gitlink showed as a file to add or delete)."""
    root = tmp_path / "ws"
    (root / "x").mkdir(parents=True)
    (root / "x" / "a.txt").write_text("then\n")
    (root / "gone").mkdir()
    nested_repo(root / "gone")
    store = SnapshotStore(root)
    first = await store.snapshot()
    assert await store.nested(first.tree) == ["gone"]
    shutil.rmtree(root / "gone")
    shutil.rmtree(root / "x")
    await store.snapshot()  # with x/a.txt still in the store's index, x would be a folder
    (root / "x").mkdir()
    nested_repo(root / "x")
    (root / "x" / "a.txt").write_text("uncommitted work\n")
    result = await restore_files(None, store, None, first.tree)
    assert result.files == [] and result.skipped == ["gone", "x", "x/a.txt"]
    assert result.why["x/a.txt"] == "x is a git repository of its own, whose files snapshots " \
        "do not record"
    assert (root / "x" / "a.txt").read_text() == "uncommitted work\n"
    assert git(root / "x", "log", "--format=%s") == "one\n"
    assert not (root / "gone").exists()


async def test_a_nested_repository_with_no_commit_is_left_out_and_named(tmp_path: Path) -> None:
    """A `git init` with no commit yet in the workspace made every snapshot fail (git add: "does
    not have a commit checked out"), so no turn could be rewound; it is left out and named."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "main.txt").write_text("one\n")
    store = SnapshotStore(root)
    first = await store.snapshot()
    (root / "x").mkdir()
    (root / "x" / "work.txt").write_text("uncommitted work\n")
    git(root / "x", "init", "-q")
    marker = tmp_path / "ran"
    with (root / "x" / ".git" / "config").open("a") as config:  # its config is hostile
        config.write(f"[core]\n\tfsmonitor = touch {marker}\n")
    second = await store.snapshot()
    assert await store.nested(second.tree) == ["x"]
    (root / "main.txt").write_text("two\n")
    result = await restore_files(None, store, None, first.tree)
    assert [(f.status, f.path) for f in result.files] == [("modified", "main.txt")]
    assert result.unrecorded == ["x"] and (root / "main.txt").read_text() == "one\n"
    assert (root / "x" / "work.txt").read_text() == "uncommitted work\n"
    assert not marker.exists()


async def test_a_hostile_nested_repository_runs_nothing(tmp_path: Path) -> None:
    """A committed clone in the workspace is hostile: its config's fsmonitor, hooks, filters
    and textconv, and its `.gitattributes`, must run nothing when snapshots record it (as a
    gitlink) or diff it."""
    root = tmp_path / "ws"
    (root / "p").mkdir(parents=True)
    (root / "p" / "a.txt").write_text("a\n")
    (root / "p" / ".gitattributes").write_text("* filter=x diff=x\n")
    nested_repo(root / "p")
    marker = tmp_path / "ran"
    with (root / "p" / ".git" / "config").open("a") as config:
        config.write(f"[core]\n\tfsmonitor = touch {marker}\n\thooksPath = {tmp_path}\n"
                     f"[filter \"x\"]\n\tclean = touch {marker}\n\tsmudge = touch {marker}\n"
                     f"[diff \"x\"]\n\ttextconv = touch {marker}\n")
    for hook in ("pre-commit", "post-index-change", "reference-transaction"):
        (tmp_path / hook).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (tmp_path / hook).chmod(0o755)
    store = SnapshotStore(root)
    first = await store.snapshot()
    (root / "p" / "a.txt").write_text("changed\n")
    tame = ("core.fsmonitor=false", "core.hooksPath=/dev/null", "user.name=U",
            "user.email=u@example.com")  # the user's own git, told to run nothing
    git(root / "p", *(f for setting in tame for f in ("-c", setting)), "commit", "-q",
        "--allow-empty", "-m", "two")
    second = await store.snapshot()
    changes = await store.changes(first.tree, second.tree)
    # The gitlink's commit, never a.txt: a nested repository's files are not recorded.
    assert [(c.status, c.path) for c in changes] == [("modified", "p")]
    assert await store.nested(first.tree, second.tree) == ["p"]
    assert not marker.exists()


async def test_changes_and_restores_name_the_nested_repositories_they_do_not_record(
        rig: Rig, fake: FakeAnthropic) -> None:
    """A workspace holding clones: what changed in them is neither recorded nor restored, and
    the user is told so (found in review: proj/a.py's change was silently left out)."""
    (rig.root / "proj").mkdir()
    nested_repo(rig.root / "proj")
    first, _ = await two_turns(rig, fake)
    (rig.root / "proj" / "a.py").write_text("agent change\n")
    store = store_for(rig.root)
    changes = await file_changes(rig.tree, store, first)
    assert changes.unrecorded == ["proj"] and "proj/a.py" not in changes.skipped
    dry = run_cli("rewind", rig.tree.path, "--to", first, "--dry-run")
    assert "whose changes are not recorded or restored: proj" in dry.stderr
    result = await restore_files(rig.tree, store, first)
    assert result.unrecorded == ["proj"] and (rig.root / "notes.txt").read_text() == "v1\n"
    assert (rig.root / "proj" / "a.py").read_text() == "agent change\n"


def test_the_state_below_an_entry_in_a_cycle_is_found_or_not_without_end(tmp_path: Path) -> None:
    """A reused id can make the entries below an entry a cycle; the walk down ends."""
    path = tmp_path / "s.jsonl"
    lines = [{"type": "session", "version": 3, "id": "cccccccc-cccc-cccc-cccc-cccccccccccc",
              "timestamp": "2026-12-01T00:00:00.000Z", "cwd": str(tmp_path)}]
    for entry_id, parent in (("u1", None), ("a1", "u1"), ("u1", "a1")):
        lines.append({"type": "message", "id": entry_id, "parentId": parent,
                      "timestamp": "2026-12-01T00:00:01.000Z",
                      "message": {"role": "user", "content": "hi", "timestamp": 1}})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert state_at(SessionTree.open(str(path)), "a1") is None


# -- the command line --------------------------------------------------------------------


async def test_cli_rewind(rig: Rig, fake: FakeAnthropic) -> None:
    first, _ = await two_turns(rig, fake)
    session = rig.tree.path
    dry = run_cli("rewind", session, "--to", first, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "+v1" in dry.stdout and "-v2" in dry.stdout
    assert "2 file(s) in " in dry.stderr and " would change" in dry.stderr
    assert (rig.root / "notes.txt").read_text() == "v2\n"

    done = run_cli("rewind", session, "--to", first)
    assert done.returncode == 0, done.stderr
    assert "deleted   new/deep.txt" in done.stdout and "modified  notes.txt" in done.stdout
    assert (rig.root / "notes.txt").read_text() == "v1\n"
    undo = done.stdout.strip().splitlines()[-1].split("--undo ")[1]
    back = run_cli("rewind", session, "--undo", undo)
    assert back.returncode == 0, back.stderr
    assert (rig.root / "notes.txt").read_text() == "v2\n"

    missing = run_cli("rewind", session, "--to", "nope")
    assert missing.returncode == 2 and "no entry with id 'nope'" in missing.stderr
    neither = run_cli("rewind", session)
    assert neither.returncode == 2 and "--to" in neither.stderr


async def test_rewind_prints_no_escape_sequence_a_file_holds(rig: Rig, fake: FakeAnthropic
                                                               ) -> None:
    """File names and contents come from the repository; the terminal gets them as text."""
    first, _ = await two_turns(rig, fake)
    (rig.root / "evil\x1b]0;pwned\x07.txt").write_text("tab\there \x1b[2J\n")
    dry = run_cli("rewind", rig.tree.path, "--to", first, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "\x1b" not in dry.stdout + dry.stderr and "\x07" not in dry.stdout
    assert "+tab\there \\x1b[2J" in dry.stdout or "-tab\there \\x1b[2J" in dry.stdout
    done = run_cli("rewind", rig.tree.path, "--to", first)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "deleted   evil\\x1b]0;pwned\\x07.txt" in done.stdout


async def test_a_cli_rewind_stopped_midway_has_said_how_to_undo_it(
        rig: Rig, fake: FakeAnthropic, tmp_path: Path) -> None:
    """The undo id was printed at the end only: Ctrl-C midway (a traceback then) left the
    user's files half restored, their edits recoverable only by digging in the store."""
    first, _ = await two_turns(rig, fake)
    held, bin_dir = tmp_path / "held.pid", tmp_path / "bin"
    held_git(bin_dir, held, "restore")
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    process = subprocess.Popen([sys.executable, "-m", "pi_lsp.cli", "rewind", rig.tree.path,
                                "--to", first], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    with reaped(process):
        await pid_in(held)  # deletes done, writes not yet
        # Ctrl-C reaches pi-lsp alone (its git has a process group of its own), which
        # stops git.
        process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=PROCESS_CEILING_S)
    assert process.returncode == 130, err
    said = err.decode().splitlines()
    assert said[-1] == "pi-lsp: interrupted"
    assert said[-2].startswith("pi-lsp: note: restoring; should it not finish, undo with: "
                               f"pi-lsp rewind {rig.tree.path} --undo ")
    assert not (rig.root / "new" / "deep.txt").exists()  # midway indeed
    back = run_cli("rewind", rig.tree.path, "--undo", said[-2].split("--undo ")[1])
    assert back.returncode == 0, back.stderr
    assert (rig.root / "new" / "deep.txt").read_text() == "deep\n"
    assert (rig.root / "notes.txt").read_text() == "v2\n"


async def test_a_cli_rewind_with_no_place_for_its_store_says_so(
        rig: Rig, fake: FakeAnthropic, tmp_path: Path) -> None:
    first, _ = await two_turns(rig, fake)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = run_cli("rewind", rig.tree.path, "--to", first,
                     env={**os.environ, "XDG_STATE_HOME": str(blocker)})
    assert result.returncode == 2
    assert re.fullmatch(f"pi-lsp: cannot create the snapshot store {blocker}/pi-lsp/snapshots/"
                        r"\S+ \(Not a directory\); it is kept under \$XDG_STATE_HOME, else "
                        r"~/.local/state\n", result.stderr), result.stderr


def test_the_command_line_never_takes_a_relative_cwd_as_the_workspace(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session shipped in a repository could name `../other-project` and have `rewind` change
    files there; pi writes absolute paths, so a relative one means the current directory."""
    from pi_lsp.cli_changes import session_root

    (tmp_path / "other-project").mkdir()
    (tmp_path / "repo" / "docs").mkdir(parents=True)
    path = tmp_path / "repo" / "docs" / "example.jsonl"
    for cwd in ("../other-project", str(tmp_path / "repo")):
        path.write_text(json.dumps({"type": "session", "version": 3, "cwd": cwd,
                                    "id": "eeeeeeee-eeee-eeee-eeee-eeeeeeeeeeee",
                                    "timestamp": "2026-12-01T00:00:00.000Z"}) + "\n")
        monkeypatch.chdir(tmp_path / "repo")
        assert session_root(SessionTree.open(str(path))).resolve() == (tmp_path / "repo").resolve()


def test_a_session_file_outside_a_session_folder_does_not_choose_the_folder(
        tmp_path: Path) -> None:
    """A repository's `docs/demo.jsonl` whose header names your home folder: `rewind --dry-run`
    git-added the whole of it (ssh keys and all) into a new store. Its cwd is committed data:
    the command runs in the current directory, and refuses, naming both, where they differ."""
    home, repo, state = tmp_path / "home", tmp_path / "repo", tmp_path / "state"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    (repo / "docs").mkdir(parents=True)
    demo = repo / "docs" / "demo.jsonl"
    session = SessionTree.create(str(demo), str(home))
    session.append_message(UserMessage(content="hi", timestamp=1))
    first = session.leaf_id
    assert first is not None
    session.append_custom(FILES_TYPE, {"before": EMPTY_TREE, "after": EMPTY_TREE})
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    for args in (["rewind", "docs/demo.jsonl", "--to", first, "--dry-run"],
                 ["rewind", "docs/demo.jsonl", "--to", first],
                 ["compact", "docs/demo.jsonl", "--plan"],
                 ["context", "docs/demo.jsonl", "--layer", "request"]):
        refused = run_cli(*args, cwd=repo, env=env)
        assert refused.returncode == 2, refused.stderr
        assert refused.stderr == (
            f"pi-lsp: docs/demo.jsonl was recorded in {home} (its header's cwd), but this "
            f"command runs in {repo}; a session file does not choose the folder whose files "
            f"and settings are used: run the command in {home} to use that folder\n")
    # Run there, the id is still one no store of that folder recorded: refused before any
    # snapshot, so no store is made.
    there = run_cli("rewind", str(demo), "--to", first, "--dry-run", cwd=home, env=env)
    assert there.returncode == 2 and "there is no snapshot store for this folder yet" in \
        there.stderr, there.stderr
    assert not state.exists()



def test_a_symlinked_session_file_does_not_choose_the_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A repository's `.pi/sessions/evil.jsonl`, a symlink into another project's
    `.pi/sessions/` (or into pi's own folder for your home folder), took that project (or your
    home folder) as the folder `rewind`, `compact` and `branch --summarize` work in: the folder
    is the one the link lies in, whatever it points at."""
    from pi_lsp.cli_changes import session_root
    from pi_lsp.session.catalog import cli_session_dir, session_workspace

    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    home, other, repo = tmp_path / "home", tmp_path / "other", tmp_path / "repo"
    home.mkdir()
    (repo / ".pi" / "sessions").mkdir(parents=True)
    (other / ".pi" / "sessions").mkdir(parents=True)
    targets = [other / ".pi" / "sessions" / "theirs.jsonl", cli_session_dir(str(home)) / "h.jsonl"]
    for number, target in enumerate(targets):
        target.parent.mkdir(parents=True, exist_ok=True)
        SessionTree.create(str(target), str(home if number else other)).append_message(
            UserMessage(content="hi", timestamp=1))
        link = repo / ".pi" / "sessions" / f"evil{number}.jsonl"
        link.symlink_to(target)
        for cwd in (repo, tmp_path):
            monkeypatch.chdir(cwd)
            assert session_root(SessionTree.open(str(link))).resolve() == repo.resolve()
        assert session_workspace(link, {}, tmp_path) == repo.resolve()


# -- the language server -----------------------------------------------------------------


class Buffers:
    """The test editor's open documents: `workspace/applyEdit` changes them (never the disk)
    and is answered after the didChange it causes, as editors do."""

    def __init__(self, client: LanguageClient) -> None:
        self.client = client
        self.texts: dict[str, str] = {}
        self.versions: dict[str, int] = {}
        self.edits: list[types.ApplyWorkspaceEditParams] = []
        self.refusing: set[str] = set()  # documents whose edits the user turns down

    def open(self, path: Path) -> str:
        uri = path.as_uri()
        self.texts[uri], self.versions[uri] = path.read_text(), 1
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            types.TextDocumentItem(uri, "python", 1, self.texts[uri])))
        return uri

    def reload(self, uri: str) -> None:
        """Take the disk's text, as an editor does when a file changes under a clean buffer."""
        self.texts[uri] = path_of(uri).read_text()
        self.send_change(uri)

    def send_change(self, uri: str) -> None:
        self.versions[uri] += 1
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(self.versions[uri], uri),
            [types.TextDocumentContentChangeWholeDocument(self.texts[uri])]))

    def close(self, uri: str) -> None:
        del self.texts[uri]
        self.client.text_document_did_close(types.DidCloseTextDocumentParams(
            types.TextDocumentIdentifier(uri)))

    def apply(self, params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        self.edits.append(params)
        for change in params.edit.document_changes or []:
            if isinstance(change, types.DeleteFile):  # the file goes, and its buffer with it
                path_of(change.uri).unlink()
                self.close(change.uri)
                continue
            assert isinstance(change, types.TextDocumentEdit), change
            uri = change.text_document.uri
            if uri in self.refusing:
                return types.ApplyWorkspaceEditResult(applied=False, failure_reason="refused")
            if uri not in self.texts or change.text_document.version != self.versions[uri]:
                return types.ApplyWorkspaceEditResult(applied=False, failure_reason="stale")
            for edit in change.edits:
                assert isinstance(edit, types.TextEdit), edit
                self.texts[uri] = replaced(self.texts[uri], edit.range, edit.new_text)
            self.send_change(uri)
        return types.ApplyWorkspaceEditResult(applied=True)


def replaced(text: str, span: types.Range, new_text: str) -> str:
    """`text` with `span` (ASCII text: any position encoding) replaced by `new_text`."""
    lines = text.splitlines(keepends=True)

    def offset(position: types.Position) -> int:
        return sum(map(len, lines[:position.line])) + position.character

    return text[:offset(span.start)] + new_text + text[offset(span.end):]


@pytest_lsp.fixture(scope="module", params=CLIENTS, config=SERVER)
async def lsp_server(request: pytest.FixtureRequest, lsp_client: LanguageClient,
                     tmp_path_factory: pytest.TempPathFactory, fake: FakeAnthropic) -> Any:
    top = tmp_path_factory.mktemp("lsp")
    root = user_repo(top / "ws")
    (root / ".pi" / "sessions").mkdir(parents=True)
    buffers = lsp_client.buffers = Buffers(lsp_client)  # type: ignore[attr-defined]

    @lsp_client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        return buffers.apply(params)

    lsp_client.pi = await connect(  # type: ignore[attr-defined]
        lsp_client, request.param, top, init_options(fake, toolApproval="auto"),
        folders=("ws",))
    yield
    await asyncio.wait_for(lsp_client.shutdown_session(), CEILING_S)


@pytest.fixture(scope="module")
def lsp(lsp_server: LanguageClient) -> Pi:
    return lsp_server.pi  # type: ignore[attr-defined,no-any-return]


@pytest.fixture(scope="module")
def buffers(lsp_server: LanguageClient) -> Buffers:
    return lsp_server.buffers  # type: ignore[attr-defined,no-any-return]


async def lsp_prompt(pi: Pi, uri: str, text: str) -> None:
    since = pi.mark()
    turn = (await call(pi.client, "pi.prompt", {"uri": uri, "text": text}))["turnId"]
    events = await wait_events(pi, turn, since)
    assert events[-1]["type"] == "agent_end", events[-1]


@pytest.mark.asyncio(loop_scope="module")
async def test_server_file_changes_branch_restore_and_undo(lsp: Pi, fake: FakeAnthropic
                                                           ) -> None:
    pi, root = lsp, lsp.root / "ws"
    uri = (await call(pi.client, "pi.newSession", {}))["uri"]
    fake.script(tool_reply([write("c1", "notes.txt", "v1\n")]), text_reply("wrote v1"))
    await lsp_prompt(pi, uri, "write notes")
    first = next(e["id"] for e in reversed(lines(path_of(uri))) if e["type"] == "message")
    fake.script(tool_reply([write("c2", "notes.txt", "v2\n")]), text_reply("wrote v2"))
    await lsp_prompt(pi, uri, "change notes")
    assert sum(e["type"] == "custom" for e in lines(path_of(uri))) == 2

    changes = await call(pi.client, "pi.fileChanges", {"uri": uri, "entryId": first})
    assert changes["available"] is True
    assert [(f["path"], f["status"]) for f in changes["files"]] == [("notes.txt", "modified")]
    assert "+v1" in changes["files"][0]["diff"]

    branched = await call(pi.client, "pi.branch", {"uri": uri, "targetId": first})
    assert branched["fileChanges"] == 1
    assert (root / "notes.txt").read_text() == "v2\n"  # branching alone never touches files

    restored = await call(pi.client, "pi.restoreFiles", {"uri": uri, "entryId": first})
    assert [f["path"] for f in restored["files"]] == ["notes.txt"]
    assert (root / "notes.txt").read_text() == "v1\n"
    again = await call(pi.client, "pi.branch", {"uri": uri, "targetId": first})
    assert again["fileChanges"] == 0

    undone = await call(pi.client, "pi.restoreFiles", {"uri": uri, "undoId": restored["undoId"]})
    assert [f["path"] for f in undone["files"]] == ["notes.txt"]
    assert (root / "notes.txt").read_text() == "v2\n"


@pytest.mark.asyncio(loop_scope="module")
async def test_server_branch_with_summary_counts_file_changes(lsp: Pi, fake: FakeAnthropic
                                                              ) -> None:
    pi, root = lsp, lsp.root / "ws"
    uri = (await call(pi.client, "pi.newSession", {}))["uri"]
    fake.script(tool_reply([write("s1", "summed.txt", "one\n")]), text_reply("wrote one"))
    await lsp_prompt(pi, uri, "write summed")
    first = next(e["id"] for e in reversed(lines(path_of(uri))) if e["type"] == "message")
    fake.script(tool_reply([write("s2", "summed.txt", "two\n")]), text_reply("wrote two"))
    await lsp_prompt(pi, uri, "change summed")

    fake.script(text_reply("## Goal\nchange summed"))
    since = pi.mark()
    job = await call(pi.client, "pi.branchWithSummary", {"uri": uri, "targetId": first})
    done = await wait_note(pi, JOB_DONE, lambda p: p["jobId"] == job["jobId"], since)
    assert done["ok"] is True, done
    assert done["result"]["leafId"] == done["result"]["summaryEntryId"]
    assert done["result"]["fileChanges"] == 1
    assert (root / "summed.txt").read_text() == "two\n"  # branching alone never touches files


@pytest.mark.asyncio(loop_scope="module")
async def test_server_branch_counts_what_a_restore_would_leave_alone(lsp: Pi,
                                                                     fake: FakeAnthropic) -> None:
    """A branch counted only the files a restore changes, so where only a file it leaves alone
    differs (one over the snapshot cap) the editors said nothing of it: `leftAlone` counts it."""
    pi, root = lsp, lsp.root / "ws"
    uri = (await call(pi.client, "pi.newSession", {}))["uri"]
    fake.script(tool_reply([write("a1", "kept.txt", "one\n")]), text_reply("wrote kept"))
    await lsp_prompt(pi, uri, "write kept")
    reply = lines(path_of(uri))[-1]["id"]
    branched = await call(pi.client, "pi.branch", {"uri": uri, "targetId": reply})
    assert (branched["fileChanges"], branched["leftAlone"]) == (0, 0)
    big = root / "big.bin"
    big.write_bytes(b"x" * (snapshots.MAX_FILE_BYTES + 1))
    try:
        branched = await call(pi.client, "pi.branch", {"uri": uri, "targetId": reply})
        assert (branched["fileChanges"], branched["leftAlone"]) == (0, 1)
        changes = await call(pi.client, "pi.fileChanges", {"uri": uri, "entryId": reply})
        assert changes["skipped"] == ["big.bin"] and "files" not in changes
    finally:
        big.unlink()


@pytest.mark.asyncio(loop_scope="module")
async def test_server_rewind_errors(lsp: Pi, fake: FakeAnthropic, tmp_path: Path) -> None:
    pi = lsp
    assert pi.init is not None and pi.init.capabilities.execute_command_provider is not None
    assert {"pi.fileChanges", "pi.restoreFiles"} <= \
        set(pi.init.capabilities.execute_command_provider.commands)
    uri = (await call(pi.client, "pi.newSession", {}))["uri"]
    fake.script(text_reply("hello"))
    await lsp_prompt(pi, uri, "hi")
    leaf = lines(path_of(uri))[-1]["id"]
    quiet = await call(pi.client, "pi.fileChanges", {"uri": uri, "entryId": leaf})
    assert quiet["available"] is False and "no turn recorded" in quiet["reason"]
    branched = await call(pi.client, "pi.branch", {"uri": uri, "targetId": leaf})
    assert branched["fileChanges"] == 0

    for bad, field in (({"uri": uri}, "exactly one of"),
                       ({"uri": uri, "entryId": leaf, "undoId": "0" * 40}, "exactly one of"),
                       ({"uri": uri, "entryId": 5}, "entryId"),
                       ({"uri": uri, "entryId": "nope"}, "nope")):
        error = await call_error(pi.client, "pi.restoreFiles", bad)
        assert error.code == INVALID_PARAMS and field in str(error), (bad, error)
    error = await call_error(pi.client, "pi.fileChanges", {"uri": uri})
    assert error.code == INVALID_PARAMS and "entryId" in str(error)
    error = await call_error(pi.client, "pi.restoreFiles", {"uri": uri, "undoId": "HEAD"})
    assert error.code == FAILED and "not a snapshot id" in str(error)
    error = await call_error(pi.client, "pi.restoreFiles", {"uri": uri, "entryId": leaf})
    assert error.code == FAILED and "no turn recorded" in str(error)

    # A turn of another session in the same workspace may be writing files too.
    other = (await call(pi.client, "pi.newSession", {}))["uri"]
    # Its reply is held after its first event until the check is done: a reply streamed over a
    # guessed 2 s could end first on a busy machine.
    slow = text_reply(*(f"w{i} " for i in range(40)))
    slow.held_until, slow.held_after = tmp_path / "checked", 1
    fake.script(slow)
    since = pi.mark()
    turn = (await call(pi.client, "pi.prompt", {"uri": other, "text": "slow"}))["turnId"]
    error = await call_error(pi.client, "pi.restoreFiles", {"uri": uri, "entryId": leaf})
    assert error.code == BUSY and "busy" in str(error)
    slow.held_until.touch()
    await wait_events(pi, turn, since)


@pytest.mark.asyncio(loop_scope="module")
async def test_server_rewinds_a_turn_that_edited_an_open_unsaved_buffer(
        lsp: Pi, buffers: Buffers, fake: FakeAnthropic) -> None:
    pi, path = lsp, lsp.root / "ws" / "opened.py"
    path.write_text("LIMIT = 1\n")
    uri = (await call(pi.client, "pi.newSession", {}))["uri"]
    doc = buffers.open(path)
    try:
        fake.script(tool_reply([("e1", "edit", {"path": "opened.py", "oldText": "LIMIT = 1",
                                                "newText": "LIMIT = 2"})]),
                    text_reply("raised it"))
        await lsp_prompt(pi, uri, "raise the limit")
        assert buffers.texts[doc] == "LIMIT = 2\n"
        assert path.read_text() == "LIMIT = 1\n"  # the user has not saved
        asked = next(e["id"] for e in lines(path_of(uri)) if e["type"] == "message")

        # Before the turn the buffer said LIMIT = 1: the diff is against the buffer (the disk
        # says so already).
        changes = await call(pi.client, "pi.fileChanges", {"uri": uri, "entryId": asked})
        assert changes["available"] is True, changes
        assert [(f["path"], f["status"]) for f in changes["files"]] == [("opened.py", "modified")]
        assert "-LIMIT = 2" in changes["files"][0]["diff"]
        assert "+LIMIT = 1" in changes["files"][0]["diff"]
        branched = await call(pi.client, "pi.branch", {"uri": uri, "targetId": asked})
        assert branched["fileChanges"] == 1

        edits = len(buffers.edits)
        restored = await call(pi.client, "pi.restoreFiles", {"uri": uri, "entryId": asked})
        assert [f["path"] for f in restored["files"]] == ["opened.py"]
        assert restored["inEditor"] == ["opened.py"]
        assert len(buffers.edits) == edits + 1  # through the editor, where it can be undone
        # Only the digit changes, so the cursor and undo there stay put.
        assert buffers.edits[-1].edit.document_changes == (types.TextDocumentEdit(
            types.OptionalVersionedTextDocumentIdentifier(doc, buffers.versions[doc] - 1),
            (types.TextEdit(types.Range(types.Position(0, 8), types.Position(0, 9)), "1"),)),)
        assert buffers.texts[doc] == "LIMIT = 1\n"
        assert path.read_text() == "LIMIT = 1\n"
        again = await call(pi.client, "pi.fileChanges", {"uri": uri, "entryId": asked})
        assert again == {"available": True}  # no file differs

        undone = await call(pi.client, "pi.restoreFiles",
                            {"uri": uri, "undoId": restored["undoId"]})
        assert undone["inEditor"] == ["opened.py"]
        assert buffers.texts[doc] == "LIMIT = 2\n"
        assert path.read_text() == "LIMIT = 1\n"
    finally:
        buffers.close(doc)


@pytest.mark.asyncio(loop_scope="module")
async def test_server_restores_a_file_with_a_bom_from_its_unsaved_buffer_with_the_bom(
        lsp: Pi, buffers: Buffers, fake: FakeAnthropic) -> None:
    """A snapshot took an unsaved buffer of a file with a BOM without it (the editor drops it
    from the text it sends, and writes it back on save): once the buffer was saved and closed,
    the restore told the file changed at its first line and wrote it without its BOM."""
    pi, path = lsp, lsp.root / "ws" / "bom.cs"
    path.write_bytes(b"\xef\xbb\xbfA = 1\r\nB = 1\r\n")
    uri = (await call(pi.client, "pi.newSession", {}))["uri"]
    doc = path.as_uri()
    buffers.texts[doc], buffers.versions[doc] = "A = 1\r\nB = 1\r\n", 1
    pi.client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(doc, "csharp", 1, buffers.texts[doc])))
    for name in "AB":
        fake.script(tool_reply([(f"e{name}", "edit", {"path": "bom.cs", "oldText": f"{name} = 1",
                                                      "newText": f"{name} = 2"})]),
                    text_reply("raised it"))
        await lsp_prompt(pi, uri, f"raise {name}")
    assert buffers.texts[doc] == "A = 2\r\nB = 2\r\n"
    path.write_bytes(b"\xef\xbb\xbf" + buffers.texts[doc].encode())  # saved, then closed
    pi.client.text_document_did_save(types.DidSaveTextDocumentParams(
        types.TextDocumentIdentifier(doc)))
    buffers.close(doc)
    asked = [e["id"] for e in lines(path_of(uri)) if e["type"] == "message"
             and e["message"]["role"] == "user"][-1]
    changes = await call(pi.client, "pi.fileChanges", {"uri": uri, "entryId": asked})
    assert [(f["path"], f["status"]) for f in changes["files"]] == [("bom.cs", "modified")]
    assert "-\ufeff" not in changes["files"][0]["diff"], changes["files"][0]["diff"]
    await call(pi.client, "pi.restoreFiles", {"uri": uri, "entryId": asked})
    assert path.read_bytes() == b"\xef\xbb\xbfA = 2\r\nB = 1\r\n"


async def written_twice(pi: Pi, fake: FakeAnthropic, disk: Path, opened: Path
                        ) -> tuple[str, str]:
    """A new session whose two turns each write `disk` and `opened` (one, then two): its uri
    and the first turn's reply, to restore to."""
    uri = (await call(pi.client, "pi.newSession", {}))["uri"]
    reply = ""
    for n, text in enumerate(("one", "two")):
        fake.script(tool_reply([write(f"w{n}a", disk.name, f"{text}\n"),
                                write(f"w{n}b", opened.name, f"ONE = {n + 1}\n")]),
                    text_reply("wrote"))
        await lsp_prompt(pi, uri, f"write {text}")
        reply = reply or lines(path_of(uri))[-1]["id"]
    return uri, reply


@pytest.mark.asyncio(loop_scope="module")
async def test_server_tells_the_undo_id_of_a_restore_stopped_part_way(
        lsp: Pi, buffers: Buffers, fake: FakeAnthropic) -> None:
    """A restore that wrote a file on disk, then was refused by the editor for an open one, told
    its undo id only in words ("restore the undo snapshot X"), which no editor could take; the
    error's data carries it, and restoring it undoes what was done."""
    pi, root = lsp, lsp.root / "ws"
    disk, opened = root / "partdisk.txt", root / "partopen.py"
    uri, reply = await written_twice(pi, fake, disk, opened)
    doc = buffers.open(opened)
    buffers.refusing.add(doc)
    try:
        error = await call_error(pi.client, "pi.restoreFiles", {"uri": uri, "entryId": reply})
        assert error.code == FAILED and isinstance(error.data, dict), error
        undo_id = error.data["undoId"]
        assert str(error).endswith(
            f"but the restore had changed partdisk.txt already: restore the undo snapshot "
            f"{undo_id} to undo that"), error
        assert disk.read_text() == "one\n" and buffers.texts[doc] == "ONE = 2\n"
        undone = await call(pi.client, "pi.restoreFiles", {"uri": uri, "undoId": undo_id})
        assert [f["path"] for f in undone["files"]] == ["partdisk.txt"]
        assert disk.read_text() == "two\n"
    finally:
        buffers.refusing.clear()
        buffers.close(doc)


@pytest.mark.asyncio(loop_scope="module")
async def test_server_records_what_bash_did_to_an_open_file_with_nothing_unsaved(
        lsp: Pi, buffers: Buffers, fake: FakeAnthropic) -> None:
    pi, path = lsp, lsp.root / "ws" / "clean.py"
    path.write_text("A = 1\n")
    uri = (await call(pi.client, "pi.newSession", {}))["uri"]
    doc = buffers.open(path)
    try:
        fake.script(tool_reply([("b1", "bash", {"command": "sed -i s/1/2/ clean.py"})]),
                    text_reply("bumped"))
        await lsp_prompt(pi, uri, "bump A")
        assert path.read_text() == "A = 2\n"
        asked = next(e["id"] for e in lines(path_of(uri)) if e["type"] == "message")
        # The buffer had nothing unsaved: the disk's text is the file's, before and after.
        changes = await call(pi.client, "pi.fileChanges", {"uri": uri, "entryId": asked})
        assert [(f["path"], f["status"]) for f in changes["files"]] == [("clean.py", "modified")]
        assert "-A = 2" in changes["files"][0]["diff"] and "+A = 1" in changes["files"][0]["diff"]

        buffers.reload(doc)  # the editor shows the disk's new text: no edit of the user's
        restored = await call(pi.client, "pi.restoreFiles", {"uri": uri, "entryId": asked})
        assert restored["inEditor"] == ["clean.py"]
        assert buffers.texts[doc] == "A = 1\n" and path.read_text() == "A = 2\n"
        again = await call(pi.client, "pi.fileChanges", {"uri": uri, "entryId": asked})
        assert again == {"available": True}  # the unsaved buffer is what the user has now
    finally:
        buffers.close(doc)


@pytest.mark.asyncio(loop_scope="module")
async def test_server_restores_on_disk_an_open_file_the_editor_has_not_reloaded(
        lsp: Pi, buffers: Buffers, fake: FakeAnthropic) -> None:
    """A clean buffer still showing the text from before `bash` changed its file is not what
    the workspace holds: the restore writes the disk, and names no file open in the editor."""
    pi, path = lsp, lsp.root / "ws" / "unreloaded.py"
    path.write_text("B = 1\n")
    uri = (await call(pi.client, "pi.newSession", {}))["uri"]
    doc = buffers.open(path)
    try:
        fake.script(tool_reply([("b1", "bash", {"command": "sed -i s/1/2/ unreloaded.py"})]),
                    text_reply("bumped"))
        await lsp_prompt(pi, uri, "bump B")
        asked = next(e["id"] for e in lines(path_of(uri)) if e["type"] == "message")
        edits = len(buffers.edits)
        restored = await call(pi.client, "pi.restoreFiles", {"uri": uri, "entryId": asked})
        assert [f["path"] for f in restored["files"]] == ["unreloaded.py"]
        assert "inEditor" not in restored and len(buffers.edits) == edits
        assert path.read_text() == "B = 1\n" == buffers.texts[doc]
    finally:
        buffers.close(doc)


@pytest.mark.asyncio(loop_scope="module")
async def test_server_deletes_an_open_file_the_turn_made_through_the_editor(
        lsp: Pi, buffers: Buffers, fake: FakeAnthropic) -> None:
    pi, path = lsp, lsp.root / "ws" / "made" / "new.py"
    uri = (await call(pi.client, "pi.newSession", {}))["uri"]
    fake.script(tool_reply([write("m1", "made/new.py", "NEW = 1\n")]), text_reply("made it"))
    await lsp_prompt(pi, uri, "make a module")
    asked = next(e["id"] for e in lines(path_of(uri)) if e["type"] == "message")
    doc = buffers.open(path)  # the user looks at what the turn made, and types in it
    buffers.texts[doc] = "NEW = 2  # unsaved\n"
    buffers.send_change(doc)

    edits = len(buffers.edits)
    restored = await call(pi.client, "pi.restoreFiles", {"uri": uri, "entryId": asked})
    assert [(f["path"], f["status"]) for f in restored["files"]] == [("made/new.py", "deleted")]
    assert [e.edit.document_changes for e in buffers.edits[edits:]] == [(types.DeleteFile(
        doc, options=types.DeleteFileOptions(ignore_if_not_exists=True)),)]
    assert doc not in buffers.texts  # no buffer is left holding the deleted file
    assert not path.parent.exists()  # nor the folder it leaves empty

    # Not open any more: the undo writes it on disk, as the buffer held it.
    await call(pi.client, "pi.restoreFiles", {"uri": uri, "undoId": restored["undoId"]})
    assert path.read_text() == "NEW = 2  # unsaved\n"


async def test_a_folder_where_git_keeps_its_excludes_does_not_stop_snapshots(
        tmp_path: Path) -> None:
    """A folder at `.git/info/exclude` failed every snapshot with "Is a directory: 6" (the
    store opened it as a file before looking at what it is); it is read as no excludes."""
    root = tmp_path / "ws"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    exclude = root / ".git" / "info" / "exclude"
    if exclude.exists():
        exclude.unlink()
    exclude.mkdir(parents=True)
    (root / "a.txt").write_text("a")
    store = SnapshotStore(root)
    snapshot = await store.snapshot()
    assert await store.read(snapshot.tree, "a.txt") == b"a"


@pytest.mark.asyncio(loop_scope="module")
async def test_server_restore_cancelled_part_way_tells_its_undo_id(
        lsp: Pi, buffers: Buffers, fake: FakeAnthropic) -> None:
    """pi.restoreFiles cancelled ($/cancelRequest) as the editor applies its open file's edit
    runs to its end, yet pygls answered "cancelled" at once: no editor learnt the undo id of
    the files it changed. The cancel goes to the command, whose end is the answer."""
    pi, root = lsp, lsp.root / "ws"
    disk, opened = root / "cancdisk.txt", root / "cancopen.py"
    uri, reply = await written_twice(pi, fake, disk, opened)
    doc = buffers.open(opened)
    applying = buffers.apply
    client = pi.client

    def cancel_then_apply(params: types.ApplyWorkspaceEditParams) -> Any:
        for msg_id in list(client.protocol._request_futures):  # the executeCommand in flight
            client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
        return applying(params)
    buffers.apply = cancel_then_apply  # type: ignore[method-assign]
    try:
        result = await call(pi.client, "pi.restoreFiles", {"uri": uri, "entryId": reply})
        assert disk.read_text() == "one\n" and buffers.texts[doc] == "ONE = 1\n"
        assert [f["path"] for f in result["files"]] == ["cancdisk.txt", "cancopen.py"]
        assert result["undoId"] and result["inEditor"] == ["cancopen.py"]
    finally:
        buffers.apply = applying  # type: ignore[method-assign]
        buffers.close(doc)


async def test_a_restore_cut_as_the_server_shuts_down_logs_its_undo_id(
        tmp_path: Path, fake: FakeAnthropic, capsys: pytest.CaptureFixture[str]) -> None:
    """`shutdown` as the editor applies a restore's open file edit: the restore, cut there after
    writing cut.txt on disk, was answered cancelled, and its part-way error, naming cut.txt and
    the undo id, went nowhere. The log tells it."""
    root = user_repo(tmp_path / "ws")
    (root / ".pi" / "sessions").mkdir(parents=True)
    async with own_server() as client:
        buffers, asked, release = Buffers(client), asyncio.Event(), asyncio.Event()

        @client.feature(types.WORKSPACE_APPLY_EDIT)
        async def apply_edit(params: types.ApplyWorkspaceEditParams) -> Any:
            asked.set()
            await release.wait()  # answered once the server no longer reads it
            return buffers.apply(params)

        pi = await connect(client, "visual-studio-code", tmp_path,
                           init_options(fake, toolApproval="auto"), folders=("ws",))
        uri = (await call(client, "pi.newSession", {}))["uri"]
        replies = []
        for text in ("one", "two"):
            fake.script(tool_reply([write(f"{text}1", "cut.txt", f"{text}\n"),
                                    write(f"{text}2", "cutopen.py", f"{text}\n")]),
                        text_reply("wrote"))
            await lsp_prompt(pi, uri, f"write {text}")
            replies.append(lines(path_of(uri))[-1]["id"])
        buffers.open(root / "cutopen.py")
        restoring = asyncio.ensure_future(call(client, "pi.restoreFiles",
                                               {"uri": uri, "entryId": replies[0]}))
        await asyncio.wait_for(asked.wait(), CEILING_S)
        await asyncio.wait_for(client.shutdown_async(None), CEILING_S)
        release.set()
        with pytest.raises(JsonRpcException) as cancelled:
            await restoring
        assert cancelled.value.code == types.LSPErrorCodes.RequestCancelled
        client.exit(None)
        assert client._server is not None and client._stderr_forwarder is not None
        assert await asyncio.wait_for(client._server.wait(), CEILING_S) == 0
        await asyncio.wait_for(client._stderr_forwarder, CEILING_S)  # all the log read
    assert (root / "cut.txt").read_text() == "one\n"
    logged = capsys.readouterr().err
    assert re.search(r"a request answered cancelled failed after: the restore was cut short: "
                     r"the editor's answer was waited for no longer, as the server ends; but "
                     r"the restore had changed cut.txt already: restore the undo snapshot "
                     r"[0-9a-f]{40} to undo that\n", logged), logged
