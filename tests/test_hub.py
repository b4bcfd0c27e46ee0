"""The hub's open sessions when editor requests for one session arrive at once."""

from __future__ import annotations

import asyncio
import errno
import gc
import json
import logging
import os
import re
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from pi_lsp.agent import prompt
from pi_lsp.agent.harness import BusyError
from pi_lsp.agent.skills import Skill
from pi_lsp.server import hub as hub_module
from pi_lsp.server.commands import runs, sessions
from pi_lsp.server.config import Config
from pi_lsp.server.editor import PromptAttachments
from pi_lsp.server.hub import NotASessionFileError, SessionHub, UnknownSessionError
from pi_lsp.server.open_session import OpenSession
from pi_lsp.server.protocol import NoArgs, PreviewArgs, PromptArgs, TreeArgs
from pi_lsp.server.tasks import Tasks
from pi_lsp.server.treeview import TreeView, TreeViews
from pi_lsp.server.turns import Runs
from pi_lsp.session import tree as tree_module
from pi_lsp.session.catalog import ForeignSessionError, SessionDirError
from pi_lsp.session.entries import UserMessage
from pi_lsp.session.records import Refresh
from pi_lsp.session.tree import SessionTree
from tests.waits import CEILING_S, until


class HeldReads:
    """SessionTree.open held in its worker thread until `release` is set; reads counted, and
    the calls that send work to a worker thread."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reads = self.threads = 0
        self.release = threading.Event()
        read, to_thread = SessionTree.open, asyncio.to_thread

        def held(path: str) -> SessionTree:
            self.reads += 1
            self.release.wait(CEILING_S)  # a failed test leaves no thread behind
            return read(path)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.threads += 1
            return to_thread(*args, **kwargs)
        monkeypatch.setattr(SessionTree, "open", held)
        monkeypatch.setattr(asyncio, "to_thread", counted)


@pytest.fixture
def path(tmp_path: Path, example_session: Path) -> Path:
    """A session file of the workspace at `tmp_path`."""
    path = tmp_path / ".pi" / "sessions" / "s.jsonl"
    path.parent.mkdir(parents=True)
    shutil.copyfile(example_session, path)
    return path


async def second_open_waiting(hub: SessionHub, path: Path, reads: HeldReads
                              ) -> tuple[asyncio.Task[OpenSession], asyncio.Task[OpenSession]]:
    """Two opens of `path` while the first is inside its read, each as far as it goes."""
    first = asyncio.create_task(hub.load(path))
    await until(lambda: reads.reads == 1, "the first open to start reading")
    second = asyncio.create_task(hub.load(path))
    await asyncio.sleep(0)  # one loop turn: the second runs up to its first wait
    # A second open reading the file itself (the fault) is let in first, so both reads overlap.
    await until(lambda: reads.reads == reads.threads, "every worker thread to reach its read")
    return first, second


async def test_two_opens_of_one_session_share_one_tree(
        tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hub = SessionHub([tmp_path], Config())
    reads = HeldReads(monkeypatch)
    first, second = await second_open_waiting(hub, path, reads)
    reads.release.set()
    one, other = await asyncio.gather(first, second)
    assert one is other is hub.held(path) and reads.reads == 1
    one.claim_turn()  # a prompt through the first request
    with pytest.raises(BusyError):
        hub.claim_turn(path)


async def test_a_failed_open_fails_for_every_caller_and_is_tried_again(
        tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = path.read_bytes()
    path.write_bytes(b"not a session\n")
    hub = SessionHub([tmp_path], Config())
    reads = HeldReads(monkeypatch)
    first, second = await second_open_waiting(hub, path, reads)
    reads.release.set()
    errors = await asyncio.gather(first, second, return_exceptions=True)
    assert all(isinstance(error, NotASessionFileError) for error in errors)
    assert str(errors[0]) == str(errors[1]) and reads.reads == 1
    assert not hub.open
    path.write_bytes(good)
    assert await hub.load(path) is hub.held(path) and reads.reads == 2


def appended(path: Path) -> None:
    line = b'{"type":"custom","customType":"x","id":"zzzz9999","parentId":null,' \
        b'"timestamp":"2026-01-01T00:00:00.000Z"}\n'
    with path.open("ab") as handle:
        handle.write(line)


def replaced(path: Path, lines: list[bytes]) -> None:
    new = path.with_suffix(".new")
    new.write_bytes(b"".join(lines))
    os.replace(new, path)


CHANGES_DURING_READ = {
    "deleted": (Path.unlink, "no session at"),
    "appended": (appended, None),
    "replaced": (lambda path: replaced(path, path.read_bytes().splitlines(True)[:1]), None),
    "replaced by another file": (lambda path: replaced(path, [b"not a session\n"]),
                                 "is not a pi session file"),
    "replaced by a folder": (lambda path: (path.unlink(), path.mkdir()), "no session at"),
}


@pytest.mark.parametrize("change", CHANGES_DURING_READ)
async def test_a_change_while_the_first_read_runs_is_taken_in(
        tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    """The watcher reports a change made between the read and its taking in, when nothing is
    held to follow it: the tree kept is the file as it is then (before, a deleted file's
    session stayed open, and an append or a replacement went unseen until the next change)."""
    hub = SessionHub([tmp_path], Config())
    read_done, release = threading.Event(), threading.Event()
    read = SessionTree.open

    def read_then_wait(file: str) -> SessionTree:
        tree = read(file)
        read_done.set()
        release.wait(CEILING_S)
        return tree

    monkeypatch.setattr(SessionTree, "open", read_then_wait)
    load = asyncio.create_task(hub.load(path))
    await until(read_done.is_set, "the read to finish")
    make, refused = CHANGES_DURING_READ[change]
    make(path)
    hub.file_changed(path)
    release.set()
    if refused is not None:
        with pytest.raises(UnknownSessionError, match=refused):
            await load
        assert not hub.open
        return
    tree = (await load).tree
    assert [r.raw for r in tree.records] == [r.raw for r in read(str(path)).records]


async def test_a_cancelled_open_leaves_the_read_to_the_other(
        tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hub = SessionHub([tmp_path], Config())
    reads = HeldReads(monkeypatch)
    first, second = await second_open_waiting(hub, path, reads)
    first.cancel()  # the request that started the read
    with pytest.raises(asyncio.CancelledError):
        await first
    reads.release.set()
    assert await second is hub.held(path) and reads.reads == 1


async def test_a_failed_open_whose_callers_all_left_is_not_reported_unretrieved(
        tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path.write_bytes(b"not a session\n")
    hub = SessionHub([tmp_path], Config())
    reads = HeldReads(monkeypatch)
    reported: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, seen: reported.append(seen))
    waiter = asyncio.create_task(hub.load(path))
    await until(lambda: reads.reads == 1, "the open to start reading")
    load = hub._loading[path.resolve()]
    waiter.cancel()  # its request was cancelled: nobody is left to hear the failure
    with pytest.raises(asyncio.CancelledError):
        await waiter
    reads.release.set()
    await asyncio.wait([load])
    del load
    gc.collect()  # an unretrieved failure is reported when its task goes
    # (Earlier tests' garbage collected here may report its own: only this load's counts.)
    assert not [seen for seen in reported
                if isinstance(seen.get("exception"), NotASessionFileError)]


@dataclass
class AskingPrompt:
    """A pi.prompt on a bare server, held where it asks the user about an attachment."""

    task: asyncio.Task[dict[str, Any]]
    answered: asyncio.Event
    started: list[tuple[Any, ...]]  # the turns it started: (uri, session, harness, args, ...)
    opened: list[Path]  # each open of its session, as the server's open_tree: loaded


async def prompt_asking(hub: SessionHub, path: Path, monkeypatch: pytest.MonkeyPatch,
                        delivery: str = "prompt") -> AskingPrompt:
    asking, answered = asyncio.Event(), asyncio.Event()

    async def asked(*_args: Any) -> PromptAttachments:
        asking.set()
        await answered.wait()
        return PromptAttachments([], [])

    async def open_tree(_uri: str) -> Path:
        opened.append(path)
        await hub.load(path)
        return path

    started: list[tuple[Any, ...]] = []
    opened: list[Path] = []
    monkeypatch.setattr(runs, "prompt_attachments", asked)
    server = SimpleNamespace(hub=hub, files=None, tell=lambda _text: None, open_tree=open_tree,
                             runs=SimpleNamespace(start_turn=lambda *args: started.append(args)))
    task = asyncio.create_task(runs.prompt(server, PromptArgs(uri=path.as_uri(), text="hi",
                                                              delivery=delivery)))
    await asyncio.wait_for(asking.wait(), CEILING_S)
    return AskingPrompt(task, answered, started, opened)


async def test_a_prompt_whose_session_went_while_it_asked_is_not_run(
        tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pi.prompt holds the session while the user is asked about an attachment; the file is
    deleted meanwhile and the session dropped: the prompt is refused, its claim let go, and no
    turn starts on the dropped session."""
    hub = SessionHub([tmp_path], Config())
    session = await hub.load(path)
    prompt = await prompt_asking(hub, path, monkeypatch)
    assert session.turn_id is not None
    path.unlink()
    hub.file_changed(path)  # the watcher's word
    prompt.answered.set()
    with pytest.raises(UnknownSessionError, match="no session at"):
        await prompt.task
    assert prompt.started == [] and session.turn_id is None


async def test_a_prompt_asking_about_its_attachment_keeps_the_sessions_harness(
        tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A harness is made anew when settings change, but not while a prompt holds the session:
    the turn runs on the harness that pi.abort and queued writes reach."""
    hub = SessionHub([tmp_path], Config())
    await hub.load(path)
    prompt = await prompt_asking(hub, path, monkeypatch)
    monkeypatch.setattr(hub_module, "settings_stamp", lambda _folder: ("edited",))
    assert hub.harness(path) is hub.held(path).harness  # another command meanwhile
    prompt.answered.set()
    await prompt.task
    assert [args[2] for args in prompt.started] == [hub.held(path).harness]


async def test_a_follow_up_whose_run_ended_as_it_asked_starts_on_the_sessions_harness(
        tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A follow-up sent while a run goes is asked about its attachment; the run ends and
    settings change meanwhile, so the session's harness is made anew: the turn it starts
    runs on that one (the one pi.abort reaches), not the one the follow-up began with."""
    hub = SessionHub([tmp_path], Config())
    await hub.load(path)
    running = hub.harness(path)
    hub.claim_turn(path)
    running.phase = "turn"
    prompt = await prompt_asking(hub, path, monkeypatch, delivery="followUp")
    running.phase = "idle"  # the run ends
    hub.held(path).release()
    monkeypatch.setattr(hub_module, "settings_stamp", lambda _folder: ("edited",))
    assert hub.harness(path) is not running
    prompt.answered.set()
    await prompt.task
    assert [args[2] for args in prompt.started] == [hub.held(path).harness]


async def test_a_steer_sent_as_its_turn_ends_runs_as_a_new_prompt(
        tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A steer that came in the loop step between a turn's end and the task callback that let
    the session go found it claimed by a turn that no longer ran, and was refused as busy; it
    now runs as a new prompt, as pi 1.6 runs a message sent while nothing streams."""
    hub = SessionHub([tmp_path], Config())
    await hub.load(path)
    harness = hub.harness(path)
    prompted: list[str] = []
    steer: list[asyncio.Task[dict[str, Any]]] = []
    go = asyncio.Event()

    async def no_attachments(*_args: Any) -> PromptAttachments:
        return PromptAttachments([], [])

    async def open_tree(_uri: str) -> Path:
        return path

    async def run_prompt(text: str, *_args: Any, **_kwargs: Any) -> list[Any]:
        prompted.append(text)
        if not steer:  # sent now, its request is read once this turn's task has ended
            steer.append(asyncio.create_task(runs.prompt(server, PromptArgs(
                uri=path.as_uri(), text="STEER", delivery="steer"))))
        else:
            await go.wait()
        return []

    monkeypatch.setattr(runs, "prompt_attachments", no_attachments)
    monkeypatch.setattr(harness, "prompt", run_prompt)
    server = SimpleNamespace(hub=hub, files=None, tell=lambda _text: None, open_tree=open_tree,
                             client_capabilities=SimpleNamespace(window=None))
    server.runs = Runs(cast(Any, server), Tasks())
    await runs.prompt(cast(Any, server), PromptArgs(uri=path.as_uri(), text="first"))
    await until(lambda: prompted == ["first", "STEER"], "the steer's turn to start")
    # The first turn's task has ended since: the steer's turn still holds the session.
    assert hub.held(path).turn_id == (await steer[0])["turnId"] is not None
    go.set()
    await until(lambda: hub.held(path).turn_id is None, "the steer's turn to end")
    assert prompted == ["first", "STEER"]

def test_a_folder_in_an_open_sessions_place_is_no_session(
        tmp_path: Path, path: Path, example_session: Path) -> None:
    """Commands and the watcher find a folder where an open session's file was: it is
    forgotten and said to be no session, not a raw error."""
    hub = SessionHub([tmp_path], Config())
    for found_by in ("a command", "the watcher"):
        hub.sync(path)
        path.unlink()
        path.mkdir()
        if found_by == "a command":
            with pytest.raises(UnknownSessionError, match="no session at"):
                hub.sync(path)
        else:
            hub.file_changed(path)
        assert not hub.open, found_by
        path.rmdir()
        shutil.copyfile(example_session, path)


def test_a_symlink_loop_in_a_sessions_place_is_no_session(tmp_path: Path, path: Path) -> None:
    """The watcher reports a committed `loop.jsonl -> loop.jsonl` at every start, and forgetting
    it raised RuntimeError (Path.resolve on a loop, logged with a traceback); a command on it
    was an internal error."""
    hub = SessionHub([tmp_path], Config())
    loop = path.with_name("loop.jsonl")
    loop.symlink_to(loop.name)
    hub.file_changed(loop)
    with pytest.raises(ForeignSessionError, match=f"^{re.escape(str(loop))} is a symlink loop$"):
        hub.sync(loop)
    hub.sync(path)
    path.unlink()
    path.symlink_to(path.name)  # the open session's file replaced by a loop
    hub.file_changed(path)
    assert not hub.open


def test_a_sessions_folder_that_is_a_symlink_loop_is_named(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A committed `.pi/sessions -> sessions` made every listing and every command on a session
    an internal error (RuntimeError from Path.resolve, with its traceback), and a new session
    failed with `File exists`."""
    folder = tmp_path / ".pi" / "sessions"
    folder.parent.mkdir()
    folder.symlink_to("sessions")
    hub = SessionHub([tmp_path], Config())
    with caplog.at_level(logging.WARNING):
        assert hub.list_sessions() == []
    assert f"{folder} is a symlink loop; its sessions are not listed" in caplog.text
    inside = folder / "s.jsonl"
    with pytest.raises(ForeignSessionError, match=re.escape(
            f"{inside} lies behind a symlink loop, {folder}")):
        hub.sync(inside)
    with pytest.raises(SessionDirError, match=re.escape(
            f"cannot start a session in {folder}: {folder} is a symlink loop")):
        hub.new_session(None)


@pytest.mark.parametrize("error", [FileNotFoundError, IsADirectoryError])
def test_a_session_gone_between_the_look_and_the_read_is_no_session(
        tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch,
        error: type[OSError]) -> None:
    def gone(_file: str) -> SessionTree:
        raise error(2, "gone", str(path))

    monkeypatch.setattr(SessionTree, "open", gone)
    with pytest.raises(UnknownSessionError, match="no session at"):
        SessionHub([tmp_path], Config()).sync(path)


async def test_a_fifo_in_a_sessions_folder_never_blocks_the_server(tmp_path: Path, path: Path
                                                                   ) -> None:
    """Opening a FIFO for reading waits for a writer: listing, opening and following the
    sessions folder must refuse one at once (each step hung before)."""
    hub = SessionHub([tmp_path], Config())
    fifo = path.with_name("pipe.jsonl")
    os.mkfifo(fifo)
    assert [s.path for s in hub.list_sessions()] == [str(path)]
    with pytest.raises(UnknownSessionError):
        hub.sync(fifo)
    hub.sync(path)
    path.unlink()
    os.mkfifo(path)  # the open session's file replaced by a FIFO
    with pytest.raises(NotASessionFileError, match="a FIFO, not a regular file"):
        hub.sync(path)
    assert not hub.open


async def test_the_event_loop_runs_while_a_preview_builds_its_prompt(
        tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pi.previewContext built the system prompt on the event loop (a tenth of a second with
    1,000 skills), holding every other editor request; it is built in a worker thread now."""
    hub = SessionHub([tmp_path], Config())
    (tmp_path / "AGENTS.md").write_text("Run the tests with make test.\n")
    entered, loop_ran = threading.Event(), threading.Event()
    ran_meanwhile: list[bool] = []
    find = prompt.find_skills

    def held(root: str, trusted: bool) -> list[Skill]:
        entered.set()
        ran_meanwhile.append(loop_ran.wait(CEILING_S))  # never, were this the loop's thread
        return find(root, trusted)

    async def open_tree(_uri: str) -> Path:
        return path

    monkeypatch.setattr(prompt, "find_skills", held)
    server = cast(Any, SimpleNamespace(hub=hub, open_tree=open_tree))
    preview = asyncio.create_task(sessions.preview_context(
        server, PreviewArgs(uri=path.as_uri(), layer="request")))
    await until(entered.is_set, "the prompt being built")
    loop_ran.set()
    answer = await preview
    assert ran_meanwhile == [True]
    assert "make test" in answer.request["system"][0]["text"]


def local_models(agent: Path, window: int, mtime_s: float) -> None:
    """pi's models.json with one local model of `window` tokens, saved at `mtime_s`."""
    agent.mkdir(exist_ok=True)
    models = agent / "models.json"
    models.write_text(json.dumps({"providers": {"local": {
        "baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions", "apiKey": "x",
        "models": [{"id": "m1", "contextWindow": window, "maxTokens": 100}]}}}))
    os.utime(models, (mtime_s, mtime_s))


async def test_models_json_saved_while_a_preview_builds_is_seen_by_the_next(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The settings stamp a preview was cached under was read after its prompt's worker
    thread, its models before: a models.json saved meanwhile was never seen (1000 tokens)."""
    local_models(tmp_path / "agent", 1000, 1_000_000)
    path = tmp_path / ".pi" / "sessions" / "s.jsonl"
    path.parent.mkdir(parents=True)
    stamp = "2025-12-03T13:43:07.000Z"
    path.write_text("".join(json.dumps(entry) + "\n" for entry in [
        {"type": "session", "version": 3, "id": "0199d3c4-0000-7000-8000-000000000000",
         "timestamp": stamp, "cwd": str(tmp_path)},
        {"type": "model_change", "id": "m0", "parentId": None, "timestamp": stamp,
         "provider": "local", "modelId": "m1"}]))
    hub = SessionHub([tmp_path], Config())

    async def open_tree(_uri: str) -> Path:
        return path

    server = cast(Any, SimpleNamespace(hub=hub, open_tree=open_tree))
    args = PreviewArgs(uri=path.as_uri())
    assert (await sessions.preview_context(server, args)).context_window == 1000
    entered, saved = threading.Event(), threading.Event()
    find = prompt.find_skills

    def held(root: str, trusted: bool) -> list[Skill]:
        entered.set()
        saved.wait(CEILING_S)
        return find(root, trusted)

    monkeypatch.setattr(prompt, "find_skills", held)
    during = asyncio.create_task(sessions.preview_context(server, args))
    await until(entered.is_set, "the prompt being built")
    local_models(tmp_path / "agent", 200_000, 2_000_000)
    saved.set()
    await during
    assert (await sessions.preview_context(server, args)).context_window == 200_000


# -- a large change to an open session's file, read again off the event loop ---------------


class GatedReadings:
    """Readings (Reading.run) held in their worker thread: `before` until `start` is set, or
    `after` the file was read until `release` is set; reads on the loop counted."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, after: bool = False) -> None:
        self.entered, self.start, self.release = threading.Event(), threading.Event(), \
            threading.Event()
        self.runs = 0
        self.loop_reads = 0
        run, refresh = tree_module.Reading.run, SessionTree.refresh

        def gated(reading: tree_module.Reading) -> None:
            self.runs += 1
            self.entered.set()
            if not after:
                self.start.wait(CEILING_S)
            run(reading)
            if after:
                self.release.wait(CEILING_S)

        def counted(tree: SessionTree) -> Any:
            self.loop_reads += 1
            return refresh(tree)
        monkeypatch.setattr(tree_module.Reading, "run", gated)
        monkeypatch.setattr(SessionTree, "refresh", counted)


def entries(count: int, prefix: str) -> list[bytes]:
    """`count` custom entry lines, ids `prefix`0 …, each a root (`count` 3,000: 400 KB)."""
    return [(f'{{"type":"custom","customType":"x","id":"{prefix}{n}","parentId":null,'
             f'"timestamp":"2026-01-01T00:00:00.000Z","data":{{"pad":"{"p" * 40}"}}}}\n'
             ).encode() for n in range(count)]


LARGE = 3000  # entries over tree.BACKGROUND_READ_BYTES


def replaced_by_large(path: Path) -> None:
    """The session's file replaced by one of the same header and LARGE new entries (a checkout)."""
    replaced(path, [path.read_bytes().splitlines(True)[0], *entries(LARGE, "new")])


def append_lines_to(path: Path, lines: list[bytes]) -> None:
    with path.open("ab") as handle:
        handle.write(b"".join(lines))


def as_read_now(path: Path) -> list[bytes]:
    return [record.raw for record in SessionTree.open(str(path)).records]


async def held_session(tmp_path: Path, path: Path) -> tuple[SessionHub, OpenSession,
                                                             list[Refresh]]:
    hub = SessionHub([tmp_path], Config())
    session = await hub.load(path)
    await hub.view(path, limit=300)
    changes: list[Refresh] = []
    hub.listeners.append(lambda _path, _tree, change: changes.append(change))
    return hub, session, changes


async def test_a_request_is_answered_while_a_large_replaced_file_is_read_again(
        tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session file replaced (a git checkout) was read again on the event loop: a 42 MB one
    held every request 2.4 s. It is read in a worker thread; requests meanwhile are answered
    from the tree held, whole, and the new one is taken in at once when read."""
    hub, session, changes = await held_session(tmp_path, path)
    old = [record.raw for record in session.tree.records]
    replaced_by_large(path)
    gate = GatedReadings(monkeypatch)
    hub.file_changed(path)  # the watcher's word
    await until(gate.entered.is_set, "the file to be read in a worker thread")
    reading = hub._reading[path.resolve()]
    assert reading in hub.tasks._running  # owned: shutdown awaits or cancels it
    preview = hub.preview(path, None, "agent")  # a request meanwhile, answered from the loop
    assert [record.raw for record in session.tree.records] == old and preview.messages
    hub.file_changed(path)  # a second word while it reads: no second reader
    assert gate.runs == 1 and gate.loop_reads == 0
    gate.start.set()
    await reading
    assert [record.raw for record in session.tree.records] == as_read_now(path)
    assert [(c.added, c.reloaded) for c in changes] == [(LARGE, True)]


async def test_a_large_append_is_read_off_the_loop_and_sent_as_an_append(
        tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What editors are sent is what a read on the loop sent: entries added, no reload."""
    hub, session, changes = await held_session(tmp_path, path)
    gate = GatedReadings(monkeypatch)
    append_lines_to(path, entries(LARGE, "a"))
    hub.file_changed(path)
    await until(gate.entered.is_set, "the append to be read in a worker thread")
    gate.start.set()
    await hub._reading[path.resolve()]
    assert [record.raw for record in session.tree.records] == as_read_now(path)
    assert [(c.added, c.reloaded) for c in changes] == [(LARGE, False)]
    assert session.tree.leaf_id == f"a{LARGE - 1}"


@pytest.mark.parametrize("large", [False, True])
async def test_appends_made_while_a_replaced_file_is_read_are_taken_in_after_it(
        tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch, large: bool) -> None:
    """The file changes again once the worker has read it: the tree ends as the file ends,
    the replacement first and the appends after it, in order; never a mix of two files."""
    hub, session, changes = await held_session(tmp_path, path)
    replaced_by_large(path)
    gate = GatedReadings(monkeypatch, after=True)
    hub.file_changed(path)
    await until(gate.entered.is_set, "the replaced file to be read")
    append_lines_to(path, entries(LARGE if large else 1, "b"))
    append_lines_to(path, entries(1, "c"))
    hub.file_changed(path)
    gate.release.set()
    await hub._reading[path.resolve()]
    assert [record.raw for record in session.tree.records] == as_read_now(path)
    assert session.tree.leaf_id == "c0"
    added = LARGE + 1 if large else 2
    assert [(c.added, c.reloaded) for c in changes][1:] in ([(added, False)], [
        (LARGE, False), (1, False)])
    assert changes[0].reloaded and gate.runs == (2 if large else 1)


async def test_a_reading_overtaken_by_a_read_on_the_loop_is_read_again(
        tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write (a turn, a label) reads the file on the loop while the worker reads it: what
    the worker read is stale and dropped, and the file read again, never both taken in."""
    hub, session, changes = await held_session(tmp_path, path)
    gate = GatedReadings(monkeypatch, after=True)
    append_lines_to(path, entries(LARGE, "a"))
    hub.file_changed(path)
    await until(gate.entered.is_set, "the append to be read")
    session.tree.refresh()  # a write takes in what was appended first
    append_lines_to(path, entries(LARGE, "b"))
    gate.release.set()
    await hub._reading[path.resolve()]
    assert [record.raw for record in session.tree.records] == as_read_now(path)
    assert gate.runs == 2 and [c.added for c in changes] == [LARGE, LARGE]


async def test_a_request_waits_for_the_large_change_it_came_after(
        tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A command opening the session (before the watcher's word, say) is answered from the
    file as replaced, not from the tree held (a prompt would move away from the new file)."""
    hub, session, _changes = await held_session(tmp_path, path)
    replaced_by_large(path)
    gate = GatedReadings(monkeypatch)
    load = asyncio.create_task(hub.load(path))
    await until(gate.entered.is_set, "the replaced file to be read")
    second = asyncio.create_task(hub.load(path))
    await asyncio.sleep(0)  # one loop turn: the second request runs up to its first wait
    assert not load.done() and not second.done() and gate.runs == 1
    gate.start.set()
    assert await load is await second is session
    assert [record.raw for record in session.tree.records] == as_read_now(path)


@pytest.mark.parametrize("change", ["not a session", "deleted"])
async def test_a_large_file_no_longer_a_session_is_refused_as_before(
        tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    """Read off the loop, a replacement that is no session (or a file gone as it is read) is
    refused in the words a read on the loop used, and the session is dropped."""
    hub, _session, _changes = await held_session(tmp_path, path)
    replaced(path, [b"not a session\n", *entries(LARGE, "x")])
    gate = GatedReadings(monkeypatch)
    load = asyncio.create_task(hub.load(path))
    await until(gate.entered.is_set, "the replaced file to be read")
    if change == "deleted":
        path.unlink()
    gate.start.set()
    said = "is not a pi session file \\(its first entry is not a session header\\)" \
        if change == "not a session" else "no session at"
    with pytest.raises(UnknownSessionError, match=said):
        await load
    assert not hub.open


async def test_a_session_opened_again_while_its_old_reader_reads_follows_its_file(
        tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session dropped while its file was read (closed as unused, or its file gone and back)
    and opened again: its changes were left to the old reader, which reads for nobody, so an
    append was neither taken in nor sent until some later command. Found in the review."""
    hub, session, _changes = await held_session(tmp_path, path)
    replaced_by_large(path)
    gate = GatedReadings(monkeypatch)
    hub.file_changed(path)
    await until(gate.entered.is_set, "the replaced file to be read")
    old_reader = hub._reading[path.resolve()]
    hub._drop(path.resolve())  # as _close_unused_sessions drops it
    again = await hub.load(path)
    assert again is not session
    seen: list[Refresh] = []
    hub.listeners.append(lambda _path, _tree, change: seen.append(change))
    append_lines_to(path, entries(1, "late"))
    hub.file_changed(path)  # the watcher's word for the append
    assert [(c.added, c.reloaded) for c in seen] == [(1, False)]
    assert [record.raw for record in hub.sync(path).tree.records] == as_read_now(path)
    gate.start.set()
    await old_reader
    assert hub.open[path.resolve()] is again and len(seen) == 1


async def test_a_request_waiting_for_a_read_answers_the_session_held_after_it(
        tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A command waited for its session's file to be read; the session was dropped meanwhile
    (closed as unused) and load answered the dropped one, so the command's next look read the
    whole file again on the event loop. Found in the review."""
    hub, session, _changes = await held_session(tmp_path, path)
    replaced_by_large(path)
    gate = GatedReadings(monkeypatch)
    load = asyncio.create_task(hub.load(path))
    await until(gate.entered.is_set, "the replaced file to be read")
    hub._drop(path.resolve())
    read, on_loop = SessionHub._read, []

    def whole_read(key: Path, at: Path) -> SessionTree:
        on_loop.append(threading.current_thread() is threading.main_thread())
        return read(key, at)
    monkeypatch.setattr(SessionHub, "_read", staticmethod(whole_read))
    gate.start.set()
    got = await load
    assert got is not session and got is hub.open[path.resolve()]
    assert hub.sync(path) is got and on_loop == [False]  # read again in a worker thread
    assert [record.raw for record in got.tree.records] == as_read_now(path)


async def test_a_large_file_read_again_as_its_unterminated_last_line_ran_on_is_read_off_the_loop(
        tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its last line had no newline (as pi 0.73 leaves one) and was appended to straight after
    (as pi 0.73 appends): the file is read again whole, which Tail.unread counted as the bytes
    appended only, so a 4.8 MB file was read again on the event loop. Found in the review."""
    header = path.read_bytes().splitlines(True)[0]
    path.write_bytes(header + b"".join(entries(LARGE, "e")).rstrip(b"\n"))
    hub, session, changes = await held_session(tmp_path, path)
    gate = GatedReadings(monkeypatch)
    append_lines_to(path, entries(1, "late"))  # runs on from the last line
    hub.file_changed(path)
    await until(gate.entered.is_set, "the file to be read again in a worker thread")
    gate.start.set()
    await hub._reading[path.resolve()]
    assert [record.raw for record in session.tree.records] == as_read_now(path)
    assert [(c.added, c.reloaded) for c in changes] == [(LARGE - 1, True)] and \
        gate.loop_reads == 1  # the catch-up after it, with nothing left to read


# -- a large tree's view built off the event loop ------------------------------------------


class GatedViews:
    """Views built in a worker thread (a large tree's, built anew) held there until `release`
    is set; those built on the loop go on at once."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entered, self.release = threading.Event(), threading.Event()
        view = TreeViews.view

        def gated(views: TreeViews, *args: Any, **kwargs: Any) -> TreeView:
            if threading.current_thread() is not threading.main_thread():
                self.entered.set()
                self.release.wait(CEILING_S)
            return view(views, *args, **kwargs)
        monkeypatch.setattr(TreeViews, "view", gated)


async def test_a_request_is_answered_while_a_large_sessions_first_view_is_built(
        tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first getTree of a 1,000,000-entry session held the event loop 2.9 s while its view
    was built (its file read in a worker thread since): every other request waited. The view
    is built in a worker thread: a request to another session is answered meanwhile, a
    command on this one waits (its tree must not change under the worker), and what the
    watcher saw meanwhile is taken in after."""
    large = path.with_name("large.jsonl")
    count = hub_module.BACKGROUND_VIEW_ENTRIES + 1
    large.write_bytes(b"".join([path.read_bytes().splitlines(True)[0],
                                *entries(count, "e")]))
    hub = SessionHub([tmp_path], Config())

    async def open_tree(uri: str) -> Path:
        opened = large if uri == large.as_uri() else path
        await hub.load(opened)
        return opened

    server = cast(Any, SimpleNamespace(hub=hub, open_tree=open_tree))
    gate = GatedViews(monkeypatch)
    first = asyncio.create_task(sessions.get_tree(server, TreeArgs(large.as_uri(), limit=300)))
    await until(gate.entered.is_set, "the large tree's view to be built in a worker thread")
    other = await sessions.get_tree(server, TreeArgs(path.as_uri(), limit=300))
    assert other.nodes  # answered while the large view is being built
    changes: list[Refresh] = []
    hub.listeners.append(lambda _path, _tree, change: changes.append(change))
    append_lines_to(large, entries(1, "late"))
    hub.file_changed(large)  # the watcher's word meanwhile
    command = asyncio.create_task(open_tree(large.as_uri()))  # as every command opens it
    await asyncio.sleep(0)  # one loop turn: the command runs up to its wait
    assert not command.done() and changes == []
    gate.release.set()
    view = await first
    assert view.entries == count and view.nodes[-1].id == f"e{count - 1}"
    await command
    assert hub.held(large).tree.leaf_id == "late0"
    assert [(c.added, c.reloaded) for c in changes] == [(1, False)]


async def test_a_session_opened_again_while_its_old_view_is_built_waits_for_none(
        tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session dropped while its view is built and opened again is a tree of its own: a
    command on it does not wait for the old tree's view."""
    large = path.with_name("large.jsonl")
    large.write_bytes(b"".join([path.read_bytes().splitlines(True)[0],
                                *entries(hub_module.BACKGROUND_VIEW_ENTRIES + 1, "e")]))
    hub = SessionHub([tmp_path], Config())
    gate = GatedViews(monkeypatch)
    first = asyncio.create_task(hub.view(large, limit=300))
    await until(gate.entered.is_set, "the large tree's view to be built in a worker thread")
    hub.forget(large)  # (as when it is closed as unused)
    session = await hub.load(large)
    command = asyncio.create_task(hub.load(large))
    await until(command.done, "a command on the session opened again")
    assert command.result() is session and not first.done()
    gate.release.set()
    await first


async def test_a_preview_while_a_large_view_is_built_leaves_the_tree_to_the_builder(
        tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests answered from the tree held (a preview, a check) bring it up to date with the
    disk first; while a worker builds its view that would change the tree under the worker
    (appended lines, the CLI writing as the editor opens the session). They answer from the
    tree as it is; the builder takes in the change when done."""
    large = path.with_name("large.jsonl")
    count = hub_module.BACKGROUND_VIEW_ENTRIES + 1
    large.write_bytes(b"".join([path.read_bytes().splitlines(True)[0],
                                *entries(count, "e")]))
    hub = SessionHub([tmp_path], Config())
    gate = GatedViews(monkeypatch)
    first = asyncio.create_task(hub.view(large, limit=300))
    await until(gate.entered.is_set, "the large tree's view to be built in a worker thread")
    append_lines_to(large, entries(1, "late"))
    tree = hub.held(large).tree
    assert hub.check(large) == [] and hub.outline(large, None, "agent") is not None
    assert len(tree.records) == count  # the worker's tree did not change under it
    gate.release.set()
    await first
    assert tree.leaf_id == "late0" and len(tree.records) == count + 1


async def test_a_large_session_not_written_yet_is_kept_after_its_view_is_built(
        tmp_path: Path) -> None:
    """A session not written yet (a fork at an entry whose path holds no message: pi 1.6
    writes it at its first) lives only here. Its first view of more than 20,000 entries, built
    in a worker thread, then had its file looked at (`file_changed`), which is not there yet:
    the session was forgotten, its entries lost. The watcher's word on its path alike."""
    hub = SessionHub([tmp_path], Config())
    new = hub.new_session(None)
    count = hub_module.BACKGROUND_VIEW_ENTRIES + 1
    tree = hub.held(new).tree
    tree.take_lines(entries(count, "e"))  # after its model and thinking level
    view = await hub.view(new, limit=300)
    hub.file_changed(new)
    assert view.entries == len(tree.records) > count and hub.held(new).tree is tree


async def test_a_follow_up_whose_run_ended_as_a_large_view_is_built_waits_for_the_view(
        tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A follow-up asked about its attachment finds its run ended and claims a turn of its
    own; a getTree meanwhile (the editor drawing the ended run) builds the large view in a
    worker thread. The turn starts once the view is built, not while the worker folds the
    tree it would append to."""
    large = path.with_name("large.jsonl")
    large.write_bytes(b"".join([path.read_bytes().splitlines(True)[0],
                                *entries(hub_module.BACKGROUND_VIEW_ENTRIES + 1, "e")]))
    hub = SessionHub([tmp_path], Config())
    await hub.load(large)
    running = hub.harness(large)
    hub.claim_turn(large)
    running.phase = "turn"
    prompt = await prompt_asking(hub, large, monkeypatch, delivery="followUp")
    running.phase = "idle"  # the run ends
    hub.held(large).release()
    gate = GatedViews(monkeypatch)
    drawn = asyncio.create_task(hub.view(large, limit=300))
    await until(gate.entered.is_set, "the large tree's view to be built in a worker thread")
    prompt.answered.set()
    await until(lambda: prompt.task.done() or len(prompt.opened) == 2,
                "the prompt to start its turn or open its session again")
    assert prompt.started == []  # no turn appends to the tree the worker folds
    gate.release.set()
    await drawn
    await prompt.task
    assert len(prompt.started) == 1


async def test_a_command_waiting_for_a_large_view_waits_for_the_read_the_builder_began(
        tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A command on a session whose view a worker builds waits for it (`load`). The file is
    replaced meanwhile (a checkout): the builder, done, looks at it and reads it again off the
    loop; the command waits for that read too, as it waits for any, rather than write into the
    new file from the old tree."""
    large = path.with_name("large.jsonl")
    large.write_bytes(b"".join([path.read_bytes().splitlines(True)[0],
                                *entries(hub_module.BACKGROUND_VIEW_ENTRIES + 1, "e")]))
    hub = SessionHub([tmp_path], Config())
    views, readings = GatedViews(monkeypatch), GatedReadings(monkeypatch)
    first = asyncio.create_task(hub.view(large, limit=300))
    await until(views.entered.is_set, "the large tree's view to be built in a worker thread")
    replaced_by_large(large)
    command = asyncio.create_task(hub.load(large))  # as every command opens it
    views.release.set()
    await first  # the command's wait ended with the build, a loop step before this one's
    assert not command.done()
    readings.start.set()
    session = await command
    assert [record.raw for record in session.tree.records] == as_read_now(large)


async def test_a_build_cancelled_at_shutdown_holds_the_tree_until_its_thread_ends(
        tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Shutdown cancels a view's build past its grace, but not its worker thread, which cannot
    be stopped: a label waiting behind the build was then written into the tree the thread
    still folded. The tree stays the thread's until it ends; the watcher's word is not taken."""
    large = path.with_name("large.jsonl")
    count = hub_module.BACKGROUND_VIEW_ENTRIES + 1
    large.write_bytes(b"".join([path.read_bytes().splitlines(True)[0],
                                *entries(count, "e")]))
    hub = SessionHub([tmp_path], Config())
    gate = GatedViews(monkeypatch)
    drawn = asyncio.create_task(hub.view(large, limit=300))
    await until(gate.entered.is_set, "the large tree's view to be built in a worker thread")
    append_lines_to(large, entries(1, "late"))
    hub.file_changed(large)  # the watcher's word meanwhile
    command = asyncio.create_task(hub.load(large))  # as every command opens it (pi.label)
    await hub.tasks.finish(0.0, lambda: None)  # as shutdown, its grace over: the build cancelled
    assert not command.done()  # (it was done: its wait ended with the build's task, first)
    assert len(hub.held(large).tree.records) == count
    gate.release.set()
    await command
    assert drawn.cancelled() and len(hub.sync(large).tree.records) == count + 1  # the command's



async def test_a_build_cancelled_before_it_ran_leaves_its_threads_failure_retrieved(
        tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Shutdown cancelling a view's build before the build first ran (a getTree taken in the
    loop turn of finish's next round): nothing awaited its worker thread, whose failure was
    reported "Task exception was never retrieved" as its task went. `_built` takes it."""
    large = path.with_name("large.jsonl")
    large.write_bytes(b"".join([path.read_bytes().splitlines(True)[0],
                                *entries(hub_module.BACKGROUND_VIEW_ENTRIES + 1, "e")]))
    hub = SessionHub([tmp_path], Config())
    await hub.load(large)
    ended = threading.Event()

    def failing(*_args: Any, **_kwargs: Any) -> TreeView:
        ended.set()
        raise RuntimeError("the fold failed")
    monkeypatch.setattr(hub.views, "view", failing)
    started: list[asyncio.Task[Any]] = []
    start = hub.tasks.start
    monkeypatch.setattr(hub.tasks, "start", lambda work, name: started.append(start(work, name))
                        or started[-1])
    reported: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, seen: reported.append(seen))
    drawn = asyncio.create_task(hub.view(large, limit=300))
    await asyncio.sleep(0)  # the view began its build, which has not run yet
    started.pop().cancel()  # as Tasks.finish cancels it, in this loop turn
    await until(lambda: ended.is_set() and not hub._building, "the worker thread to end")
    with pytest.raises(asyncio.CancelledError):
        await drawn
    del drawn
    gc.collect()  # an unretrieved failure is reported when its task goes
    assert not [seen for seen in reported if isinstance(seen.get("exception"), RuntimeError)]

async def test_sessions_are_listed_while_the_loop_opens_another(
        tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pi.listSessions reads the disk in a worker thread; it iterated the sessions held there
    too, which the loop changes (a session opened, one moved to the end by any request):
    "OrderedDict mutated during iteration". They are read on the loop, the disk in the thread."""
    hub = SessionHub([tmp_path], Config())
    new = hub.new_session(None)  # not written yet: listed from memory
    await hub.load(path)
    other = path.with_name("other.jsonl")
    shutil.copyfile(path, other)
    paused, resume = threading.Event(), threading.Event()
    summary = hub_module.tree_summary

    def held(tree: SessionTree) -> Any:
        if threading.current_thread() is not threading.main_thread():
            paused.set()
            resume.wait(CEILING_S)
        return summary(tree)
    monkeypatch.setattr(hub_module, "tree_summary", held)
    server = cast(Any, SimpleNamespace(hub=hub, watch=SimpleNamespace(follow=lambda _: None)))
    listing = asyncio.create_task(sessions.list_sessions(server, NoArgs()))
    await until(lambda: paused.is_set() or listing.done(), "the held sessions to be read")
    await hub.load(other)  # a request meanwhile opens another session
    resume.set()
    listed = await listing
    assert new.as_uri() in [item["uri"] for item in listed["sessions"]]


async def test_a_new_session_written_while_the_sessions_are_listed_is_listed_once(
        tmp_path: Path) -> None:
    """The sessions held are read on the loop before the worker lists the disk: a new one
    whose first message is written between the two was listed from memory and from its file."""
    hub = SessionHub([tmp_path], Config())
    new = hub.new_session(None)
    held = hub.held_sessions()  # as pi.listSessions reads it, on the loop
    hub.sync(new).tree.append_message(UserMessage(content="hi", timestamp=1))
    listed = await asyncio.to_thread(hub.list_sessions, held)
    assert [summary.path for summary in listed] == [str(new)]


async def test_a_command_waits_for_any_number_of_view_builds_in_turn(
        tmp_path: Path, path: Path) -> None:
    """`load` called itself once per view build it waited for: getTree asked again and again
    (another editor, other limits) began build after build, and a label waiting behind 1,000
    of them ended in RecursionError. Each build here begins as the last one ends."""
    hub = SessionHub([tmp_path], Config())
    session = await hub.load(path)
    key = path.resolve()
    loop = asyncio.get_running_loop()

    def begin(left: int) -> None:
        if not left:
            del hub._building[key]
            return
        build = loop.create_future()
        build.add_done_callback(lambda _build: begin(left - 1))  # before the waiter's
        hub._building[key] = cast(Any, build)
        loop.call_soon(build.set_result, None)

    begin(2_000)
    assert await hub.load(path) is session and key not in hub._building


async def test_a_file_that_fails_to_read_after_a_build_is_logged_not_raised_in_a_callback(
        tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """The look at the file once a worker thread's build ends runs in a done callback: an
    OSError reading it again (EIO) was raised there, which asyncio reports as "Exception in
    callback" with nobody to tell. It is logged as the watcher logs a file it cannot read."""
    large = path.with_name("large.jsonl")
    large.write_bytes(b"".join([path.read_bytes().splitlines(True)[0],
                                *entries(hub_module.BACKGROUND_VIEW_ENTRIES + 1, "e")]))
    hub = SessionHub([tmp_path], Config())
    gate = GatedViews(monkeypatch)
    reported: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, seen: reported.append(seen))
    drawn = asyncio.create_task(hub.view(large, limit=300))
    await until(gate.entered.is_set, "the build in its worker thread")

    def failing(_self: SessionTree, *_args: Any, **_kwargs: Any) -> Any:
        raise OSError(errno.EIO, "Input/output error", str(large))
    monkeypatch.setattr(SessionTree, "refresh", failing)
    monkeypatch.setattr(SessionTree, "read_in_background", lambda _self: False)
    gate.release.set()
    await drawn
    await until(lambda: not hub._building, "the build to end")
    assert reported == []
    assert "could not be read again" in caplog.text and "Input/output error" in caplog.text

