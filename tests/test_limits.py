"""Resource bounds and process lifecycle: caches, session listing, tool output, argument sizes,
framing faults, and what happens to turns and children when the server goes away."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import os
import platform
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

from pi_lsp.agent.output import UPDATE_INTERVAL_S, OutputTail, discard_file
from pi_lsp.agent.tools import BASH, ToolContext, execute_tool
from pi_lsp.server import hub as hub_module
from pi_lsp.server import stdio
from pi_lsp.server.config import Config
from pi_lsp.server.hub import SessionHub
from pi_lsp.server.memory import LARGE_ANSWER, give_back
from pi_lsp.server.protocol import (
    MAX_BATCH,
    ApproveToolResult,
    BranchArgs,
    CompactArgs,
    FileChangesArgs,
    LabelArgs,
    ModelArgs,
    NameArgs,
    NewSessionArgs,
    PreviewArgs,
    PromptArgs,
    RestoreFilesArgs,
    SessionArgs,
    parse_approval,
    parse_args,
)
from pi_lsp.server.server import server
from pi_lsp.server.stdio import FrameReader
from pi_lsp.session import catalog, journal
from pi_lsp.session.catalog import SessionIndex, summarize
from pi_lsp.session.entries import UserMessage
from pi_lsp.session.journal import read_file
from pi_lsp.session.tail import Tail
from pi_lsp.session.tree import SessionTree
from tests.conftest import conformance_files
from tests.fake_anthropic import FakeAnthropic, Reply, text_reply, tool_reply
from tests.waits import CEILING_S, PROCESS_CEILING_S, alive, gone, pid_in, until

# -- memory held by the hub ----------------------------------------------------------------


def make_chain(path: Path, messages: int) -> list[str]:
    """A session of `messages` user messages in one chain; returns their ids."""
    tree = SessionTree.create(str(path), str(path.parent))
    return [tree.append_message(UserMessage(content=f"message {i}", timestamp=i))
            for i in range(messages)]


@pytest.fixture
def root_dir(tmp_path: Path) -> Path:
    workspace = tmp_path / "root"
    workspace.mkdir()
    return workspace


@pytest.fixture
def hub(tmp_path: Path) -> SessionHub:
    folder = tmp_path / "ws"
    (folder / ".pi" / "sessions").mkdir(parents=True)
    return SessionHub([folder], Config())


def sessions_dir(hub: SessionHub) -> Path:
    return hub.folders[0] / ".pi" / "sessions"


def test_previews_of_many_leaves_keep_only_the_recent_few(hub: SessionHub) -> None:
    path = sessions_dir(hub) / "a.jsonl"
    ids = make_chain(path, 30)
    for leaf in ids:
        hub.preview(path, leaf, "agent")
    assert len(hub._previews) == hub_module.MAX_PREVIEWS
    assert list(hub._previews)[-1] == (path.resolve(), ids[-1], "agent")
    # The most recent one is still answered from the cache.
    assert hub.outline(path, ids[-1], "agent") is hub.outline(path, ids[-1], "agent")


def test_preview_cache_is_bounded_by_size(hub: SessionHub,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    path = sessions_dir(hub) / "a.jsonl"
    ids = make_chain(path, 5)
    monkeypatch.setattr(hub._previews, "max_weight", 1)  # every preview is heavier than this
    hub.preview(path, ids[-1], "agent")
    assert len(hub._previews) == 0


async def test_a_deleted_session_leaves_nothing_behind(hub: SessionHub) -> None:
    path = sessions_dir(hub) / "a.jsonl"
    other = sessions_dir(hub) / "b.jsonl"
    ids = make_chain(path, 3)
    make_chain(other, 2)
    await hub.view(path)
    await hub.view(other)
    hub.preview(path, ids[0], "agent")
    hub.preview(other, None, "llm")
    hub.harness(path)
    path.unlink()
    hub.file_changed(path)
    key = path.resolve()
    assert key not in hub.open  # its tree, harness, views and nodes were held there
    assert all(cached[0] != key for cached in hub._previews)
    assert other.resolve() in hub.open and len(hub._previews) == 1


async def test_dropping_a_session_clears_what_the_server_held_for_it(hub: SessionHub) -> None:
    path = sessions_dir(hub) / "a.jsonl"
    make_chain(path, 2)
    await hub.view(path)
    hub.harness(path)
    session = hub.claim_turn(path)
    session.allowed_tools.add("bash")
    session.release()
    path.unlink()
    hub.file_changed(path)
    make_chain(path, 2)  # a new file at the same path starts with nothing of the old one
    again = hub.sync(path)
    assert again is not session and again.allowed_tools == set()
    assert again.harness is None and again.turn_id is None and again.view.view is None


def test_a_relocated_session_keeps_all_it_held(hub: SessionHub, tmp_path: Path) -> None:
    path = sessions_dir(hub) / "a.jsonl"
    ids = make_chain(path, 2)
    harness = hub.harness(path)
    session = hub.held(path)
    session.allowed_tools.add("bash")
    replacement = tmp_path / "other.jsonl"
    make_chain(replacement, 1)
    os.replace(replacement, path)
    harness.set_label(ids[0], "kept")  # an idle append to a replaced file moves it
    moved = Path(harness.tree.path).resolve()
    assert moved != path.resolve() and hub.open[moved] is session
    assert session.harness is harness and session.allowed_tools == {"bash"}


def test_a_deleted_session_never_opened_here_is_dropped_from_the_caches(hub: SessionHub) -> None:
    path = sessions_dir(hub) / "a.jsonl"
    make_chain(path, 2)
    hub.preview(path, None, "agent")
    hub.open.clear()  # as if the session had been closed but its answers were still cached
    path.unlink()
    hub.file_changed(path)
    assert len(hub._previews) == 0


async def test_open_trees_are_bounded_but_a_running_one_stays(hub: SessionHub) -> None:
    paths = [sessions_dir(hub) / f"s{i}.jsonl" for i in range(hub_module.MAX_OPEN_TREES + 4)]
    for path in paths:
        make_chain(path, 2)
    busy = hub.harness(paths[0])
    busy.phase = "turn"  # as during a turn
    for path in paths[1:]:
        await hub.view(path)
    assert len(hub.open) == hub_module.MAX_OPEN_TREES
    assert paths[0].resolve() in hub.open and hub.open[paths[0].resolve()].harness is busy
    assert paths[1].resolve() not in hub.open  # the least recently used idle one went
    assert paths[-1].resolve() in hub.open
    busy.phase = "idle"



async def test_command_results_are_not_kept_after_the_answer() -> None:
    """pygls keeps the inner step of every executeCommand under a uuid; the server drops it."""
    protocol = server.protocol
    answers: list[object] = []

    async def command() -> dict[str, str]:
        return {"big": "result"}

    def generator_handler() -> Any:
        result = yield command, (), None
        return result

    before = set(protocol._request_futures)
    protocol._execute_handler("req-1", generator_handler,
                              lambda future: answers.append(future.result()))
    await until(lambda: answers, "the answer")
    assert answers == [{"big": "result"}]
    protocol._request_futures.pop("req-1", None)  # the answer callback does this in pygls
    assert set(protocol._request_futures) == before


async def test_the_heap_is_given_back_after_a_large_answer_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """glibc keeps the heap a whole preview grew to; the server trims it once a large answer
    is written, not after every small one (a trim walks the whole heap)."""
    trims: list[int] = []
    monkeypatch.setattr(stdio, "give_back", lambda: trims.append(len(out.getvalue())))
    out = io.BytesIO()
    writer = stdio.Writer(out, asyncio.get_running_loop())
    writer.write(b"x" * 1000)
    writer.write(b"y" * (LARGE_ANSWER + 1))
    assert trims == []  # not while pygls still holds the answer it sent
    await until(lambda: trims, "the trim after the large answer")
    assert trims == [1000 + LARGE_ANSWER + 1]  # after the answer was written, once


def resident_kb() -> int:
    status = Path(f"/proc/{os.getpid()}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmRSS")).split()[1])


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_giving_back_returns_to_the_system_what_was_freed() -> None:
    before = resident_kb()
    held = [bytes(3000) + bytes([n % 256]) for n in range(60_000)]  # ~180 MB from malloc
    grown = resident_kb()
    # Every tenth block stays, the last one among them: the freed ones are holes of whole
    # pages that the allocator keeps (it only shrinks the heap's top, which stays in use).
    kept_blocks = held[9::10]
    held.clear()
    kept = resident_kb()
    give_back()
    given_back = resident_kb()
    assert kept_blocks and kept > grown - (grown - before) // 4, "the allocator kept the holes"
    assert given_back < before + (grown - before) // 2


# -- session listing -----------------------------------------------------------------------


def count_full_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    reads: list[Path] = []
    real = catalog.read_summary

    def read_summary(path: Path) -> Any:
        reads.append(path)
        return real(path)
    monkeypatch.setattr(catalog, "read_summary", read_summary)
    return reads


def test_listing_again_reads_no_unchanged_file(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("a", "b", "c"):
        make_chain(tmp_path / f"{name}.jsonl", 3)
    index = SessionIndex()
    reads = count_full_reads(monkeypatch)
    first = index.list([tmp_path])
    assert len(reads) == 3
    assert index.list([tmp_path]) == first
    assert len(reads) == 3


def test_a_grown_session_is_read_only_from_where_it_stopped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "a.jsonl"
    ids = make_chain(path, 2)
    index = SessionIndex()
    reads = count_full_reads(monkeypatch)
    index.list([tmp_path])
    tree = SessionTree.open(str(path))
    tree.append_session_info("  renamed  ")
    tree.append_message(UserMessage(content="later", timestamp=9))
    tree.append_label(ids[0], "start")
    (listed,) = index.list([tmp_path])
    assert len(reads) == 1, "the grown file was read again from the start"
    assert listed == summarize(path)
    assert listed.name == "renamed" and listed.entry_count == 5
    assert listed.first_message == "message 0"


def test_a_rewritten_session_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    make_chain(path, 4)
    index = SessionIndex()
    index.list([tmp_path])
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:2]))  # shorter: pi rewrote or truncated it
    (listed,) = index.list([tmp_path])
    assert listed == summarize(path) and listed.entry_count == 1
    path.write_bytes(b"".join(lines).replace(b"message 0", b"MESSAGE 0"))  # same size
    (listed,) = index.list([tmp_path])
    assert listed.first_message == "MESSAGE 0" and listed.entry_count == 4


def test_a_damaged_file_is_read_again_only_once_it_changed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only summaries were kept: a file that is no session was read whole at every listing
    (a 65 MB junk `.jsonl` made each warm listing of 2,000 sessions 302-310 ms, not 11-14)."""
    make_chain(tmp_path / "a.jsonl", 1)
    junk = tmp_path / "junk.jsonl"
    junk.write_bytes(b"not a session\n" * 1000)
    index = SessionIndex()
    reads = count_full_reads(monkeypatch)
    first = index.list([tmp_path])
    assert index.list([tmp_path]) == first and len(reads) == 2
    make_chain(junk, 1)  # now a session
    assert [s.path for s in index.list([tmp_path])] == [str(junk), str(tmp_path / "a.jsonl")]
    assert len(reads) == 3


def test_a_deleted_session_leaves_the_index(tmp_path: Path) -> None:
    make_chain(tmp_path / "a.jsonl", 1)
    make_chain(tmp_path / "b.jsonl", 1)
    index = SessionIndex()
    index.list([tmp_path])
    (tmp_path / "a.jsonl").unlink()
    assert [s.path for s in index.list([tmp_path])] == [str(tmp_path / "b.jsonl")]
    assert list(index._known) == [str(tmp_path / "b.jsonl")]


def test_the_hub_lists_through_its_index(hub: SessionHub,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    make_chain(sessions_dir(hub) / "a.jsonl", 2)
    reads = count_full_reads(monkeypatch)
    hub.list_sessions()
    hub.list_sessions()
    assert len(reads) == 1


# -- argument sizes ------------------------------------------------------------------------

URI = "file:///w/.pi/sessions/a.jsonl"


@pytest.mark.parametrize(("kind", "args", "field"), [
    (NameArgs, {"uri": URI, "name": "n" * 1025}, "$.name"),
    (LabelArgs, {"uri": URI, "targetId": "a", "label": "l" * 1025}, "$.label"),
    (ModelArgs, {"uri": URI, "provider": "anthropic", "modelId": "m" * 1025}, "$.modelId"),
    (ModelArgs, {"uri": URI, "provider": "p" * 1025, "modelId": "m"}, "$.provider"),
    (NewSessionArgs, {"name": "n" * 1025}, "$.name"),
    (SessionArgs, {"uri": "file:///" + "d/" * 2100}, "$.uri"),
    (BranchArgs, {"uri": URI, "targetId": "x" * 65_537}, "$.targetId"),
    (PreviewArgs, {"uri": URI, "leafId": "x" * 65_537}, "$.leafId"),
    (FileChangesArgs, {"uri": URI, "entryId": "x" * 65_537}, "$.entryId"),
    (RestoreFilesArgs, {"uri": URI, "undoId": "x" * 65_537}, "$.undoId"),
    (CompactArgs, {"uri": URI, "instructions": "i" * 100_001}, "$.instructions"),
    (PromptArgs, {"uri": URI, "text": "t" * 1_000_001}, "$.text"),
    (PromptArgs, {"uri": URI, "text": "t",
                  "images": [{"data": "", "mimeType": "image/png"}] * 21}, "$.images"),
    (PromptArgs, {"uri": URI, "text": "t",
                  "images": [{"data": "", "mimeType": "m" * 101}]}, "$.images[0].mimeType"),
])
def test_oversized_arguments_are_refused_naming_the_field(kind: type[Any], args: dict[str, Any],
                                                          field: str) -> None:
    with pytest.raises(JsonRpcInvalidParams) as raised:
        parse_args((args,), kind)
    assert f"at `{field}`" in str(raised.value)
    assert "length <=" in str(raised.value)


@pytest.mark.parametrize(("kind", "args", "said"), [
    (PreviewArgs, {"uri": URI, "layer": "\ud800"}, "Invalid enum value '\ufffd' - at `$.layer`"),
    (PromptArgs, {"uri": URI, "text": "t", "delivery": "\udfff"},
     "Invalid enum value '\ufffd' - at `$.delivery`"),
    (NameArgs, {"uri": URI, "name": "n", "\ud800": 1}, "Object contains unknown field `\ufffd`"),
    (PromptArgs, {"uri": URI, "text": "t", "images": [{"data": "", "mimeType": "m", "\udc00": 1}]},
     "Object contains unknown field `\ufffd` - at `$.images[0]`"),
])
def test_a_lone_surrogate_where_it_does_not_fit_is_refused_naming_the_field(
        kind: type[Any], args: dict[str, Any], said: str) -> None:
    """msgspec raised UnicodeEncodeError on a lone surrogate in a literal or a key: answered
    -32011 "'utf-8' codec can't encode character", naming no field."""
    with pytest.raises(JsonRpcInvalidParams) as raised:
        parse_args((args,), kind)
    assert str(raised.value) == f"invalid argument: {said} (a lone surrogate, shown as U+FFFD)"


@pytest.mark.parametrize("args", [{"entryId": "a"}, {"entryId": "a", "page": 1, "start": 2}])
def test_a_page_from_an_entry_needs_page_and_no_start(args: dict[str, Any]) -> None:
    """Else `entryId` was ignored (the whole preview: 92 MB at 100k entries) or overrode
    `start` without a word."""
    with pytest.raises(JsonRpcInvalidParams, match="`entryId` starts a page"):
        parse_args(({"uri": URI, **args},), PreviewArgs)


def test_arguments_at_the_limits_are_accepted() -> None:
    args = parse_args(({"uri": URI, "name": "n" * 1024},), NameArgs)
    assert len(args.name) == 1024
    prompt = parse_args(({"uri": URI, "text": "t" * 1_000_000,
                          "images": [{"data": "", "mimeType": "image/png"}] * 20},), PromptArgs)
    assert len(prompt.images) == 20
    assert len(parse_args(({"uri": URI, "targetId": "x" * 65_536},), BranchArgs).target_id) == \
        65_536


# -- framing -------------------------------------------------------------------------------


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def encoded(message: dict[str, Any]) -> bytes:
    """A JSON-RPC 2.0 message, framed."""
    return frame(json.dumps({"jsonrpc": "2.0", **message}).encode())


def bodies(data: bytes, chunk: int = 7) -> list[bytes]:
    """Every body a reader finds in `data`, fed in small pieces as a pipe would."""
    stream = io.BytesIO(data)
    reader = FrameReader(lambda n: stream.read(min(n, chunk)))
    found = []
    while (body := reader.next_body()) is not None:
        found.append(body)
    return found


GOOD = b'{"jsonrpc":"2.0","id":1,"method":"x"}'


@pytest.mark.parametrize("bad", [
    b"Content-Length: 99999999999999\r\n\r\n",  # over the limit, and never sent
    b"Content-Length: 123456789012345678901234567890\r\n\r\n",  # not even a number we take
    b'{"jsonrpc":"2.0","id":9,"method":"no header"}',
    b"garbage\r\n\r\n",
    b"Content-Length: 3\r\n\r\n" + GOOD,  # too short: the rest is garbage before the next
    b"Content-Length: 12\r\nX-Junk\r\n\r\n{}",
    b"\r\n\r\n\n",
])
def test_a_bad_frame_is_skipped_and_the_next_message_is_read(bad: bytes) -> None:
    found = bodies(bad + frame(GOOD) + frame(b'{"second":1}'))
    assert found[-2:] == [GOOD, b'{"second":1}']


def test_other_headers_and_bare_newlines_are_accepted() -> None:
    data = b"Content-Length: %d\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8" \
           b"\r\n\r\n" % len(GOOD) + GOOD + b"content-length:2\n\n{}"
    assert bodies(data) == [GOOD, b"{}"]


def test_an_oversized_message_that_is_sent_is_skipped_in_bounded_pieces(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stdio, "MAX_MESSAGE_BYTES", 1000)
    big = b'{"x":"' + b"a" * 5000 + b'"}'
    assert bodies(frame(big) + frame(GOOD), chunk=4096) == [GOOD]


def test_a_body_cut_short_by_the_end_of_input_is_dropped() -> None:
    assert bodies(frame(GOOD) + b"Content-Length: 50\r\n\r\n{") == [GOOD]


async def connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """The first connection to a server starting to listen on `port` (the one it serves)."""
    connected: list[socket.socket] = []

    def attempt() -> bool:
        with contextlib.suppress(ConnectionRefusedError):
            connected.append(socket.create_connection(("127.0.0.1", port)))
        return bool(connected)

    await until(attempt, f"the server to listen on port {port}", PROCESS_CEILING_S)
    return await asyncio.open_connection(sock=connected[0], limit=16 << 20)


@contextlib.asynccontextmanager
async def killed_on_failure(process: asyncio.subprocess.Process) -> AsyncIterator[None]:
    """Kill and reap `process` if the block fails: no one else would (`--tcp` outlives us)."""
    try:
        yield
    except BaseException:
        if process.returncode is None:
            process.kill()
        await process.wait()
        raise


async def said_port(log: Path) -> int:
    """The port `serve --tcp 127.0.0.1:0` says it bound, once the line is in its stderr `log`
    (a free port guessed beforehand could be taken by another xdist worker before it bound)."""
    said = "pi-lsp: listening on 127.0.0.1:"
    await until(lambda: log.exists() and "\n" in log.read_text(), f"{said}PORT in {log}",
                PROCESS_CEILING_S)
    line = log.read_text().split("\n", 1)[0]
    assert line.startswith(said), line
    return int(line.removeprefix(said))


class RawServer:
    """`pi-lsp serve` driven with raw bytes over stdio, or over TCP (`--tcp`)."""

    def __init__(self, process: asyncio.subprocess.Process, stream: asyncio.StreamReader,
                 sink: asyncio.StreamWriter) -> None:
        self.process, self.stream, self.sink = process, stream, sink
        self.messages: list[dict[str, Any]] = []
        self.arrived = asyncio.Event()
        self.next_id = 100
        self.reader = asyncio.ensure_future(self._read())

    @classmethod
    async def start(cls, root: Path, *, log: Path | None = None, tcp: bool = False,
                    capabilities: dict[str, Any] | None = None,
                    documents: Sequence[dict[str, Any]] = (), opened_first: bool = False,
                    **options: Any) -> RawServer:
        """Initialized with the client's `capabilities` and `options`, the `documents` opened
        in the same write (an editor's open buffers; before `initialized` if `opened_first`);
        its stderr goes to `log` if given (over TCP always to a file, where it says its
        port)."""
        env = {**os.environ, "PI_CODING_AGENT_DIR": str(root / "agent")}
        if tcp:
            log = log or root / "serve-stderr.log"
        listen = ["--tcp", "127.0.0.1:0"] if tcp else []
        with open(log, "wb") if log else contextlib.nullcontext() as stderr:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "pi_lsp.cli", "serve", *listen, env=env, limit=16 << 20,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=stderr)
        assert process.stdout is not None and process.stdin is not None
        async with killed_on_failure(process):
            server = cls(process, *(await connect(await said_port(log)) if tcp and log
                                    else (process.stdout, process.stdin)))
            (root / "ws").mkdir(exist_ok=True)
            await server.request("initialize", {
                "processId": os.getpid(), "capabilities": capabilities or {},
                "workspaceFolders": [{"uri": (root / "ws").as_uri(), "name": "ws"}],
                "initializationOptions": {"toolApproval": "auto", "autoCompaction": False,
                                          **options}}, ceiling=PROCESS_CEILING_S)
            opened = [{"method": "textDocument/didOpen", "params": {"textDocument": document}}
                      for document in documents]
            ready = [{"method": "initialized", "params": {}}]
            server.write(b"".join(map(encoded, opened + ready if opened_first
                                      else ready + opened)))
        return server

    async def _read(self) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError):
            while True:
                header = await self.stream.readuntil(b"\r\n\r\n")
                length = int(header.split(b":")[1].split(b"\r\n")[0])
                message = json.loads(await self.stream.readexactly(length))
                # a batch's answer is an array, kept whole under a key of its own
                self.messages.append(message if isinstance(message, dict) else {"batch": message})
                self.arrived.set()

    def write(self, data: bytes) -> None:
        self.sink.write(data)

    def send(self, message: dict[str, Any]) -> None:
        self.write(encoded(message))

    async def wait_for(self, match: Callable[[dict[str, Any]], bool],
                       ceiling: float = CEILING_S) -> dict[str, Any]:
        async def find() -> dict[str, Any]:
            while True:
                found = next((m for m in self.messages if match(m)), None)
                if found is not None:
                    return found
                self.arrived.clear()
                await self.arrived.wait()
        return await asyncio.wait_for(find(), ceiling)

    async def request(self, method: str, params: Any, ceiling: float = CEILING_S
                      ) -> dict[str, Any]:
        self.next_id += 1
        request_id = self.next_id
        self.send({"id": request_id, "method": method, "params": params})
        return await self.wait_for(lambda m: m.get("id") == request_id and "method" not in m,
                                   ceiling)

    async def command(self, name: str, /, **args: Any) -> dict[str, Any]:
        return await self.request("workspace/executeCommand",
                                  {"command": name, "arguments": [args]})

    async def turn_event(self, kind: str) -> dict[str, Any]:
        return await self.wait_for(lambda m: m.get("method") == "pi/turn" and
                                   m["params"]["event"]["type"] == kind)

    async def close(self) -> int:
        if self.process.returncode is None:
            self.process.kill()
        code = await self.process.wait()
        self.reader.cancel()
        return code


async def test_the_server_survives_bad_frames_and_answers_the_next_request(
        tmp_path: Path) -> None:
    server = await RawServer.start(tmp_path)
    try:
        for bad in (b"Content-Length: 99999999999999\r\n\r\n",
                    b'{"jsonrpc":"2.0","id":7,"method":"shutdown"}',
                    b"Content-Length: 5\r\n\r\nnotjs",
                    b"complete garbage\r\n\r\n",
                    frame(b'{"x":"' + b"a" * (65 << 20) + b'"}')):
            answer = await server.command("pi.listSessions")
            assert answer["result"] == {"sessions": []}
            server.write(bad)
        answer = await server.command("pi.listSessions")
        assert answer["result"] == {"sessions": []}
        answer = await server.command("pi.setName", uri=(tmp_path / "a.jsonl").as_uri(),
                                      name="n" * 2000)
        assert answer["error"]["code"] == -32602 and "`$.name`" in answer["error"]["message"]
        assert server.process.returncode is None
    finally:
        await server.close()


ODD_MESSAGE = ("Invalid Request: `method` must be a string and `id` a string, a finite number"
               " or null")


@pytest.mark.parametrize(("body", "code", "answered_id", "message"), [
    (b"notjs", -32700, None, "Parse error: Expecting value: line 1 column 1 (char 0)"),
    (b"\xff{}", -32700, None, "Parse error: "),  # not UTF-8
    (b"[]", -32600, None, "Invalid Request: LSP does not support batches"),
    (b"42", -32600, None, "Invalid Request: not a JSON-RPC 2.0 message"),
    (b'{"id":3,"method":"shutdown"}', -32600, 3, "Invalid Request: not a JSON-RPC 2.0 message"),
    (b"[" * 200_000 + b"]" * 200_000, -32600, None,
     "Invalid Request: LSP does not support batches"),
    *((b'{"jsonrpc":%s,"id":4,"method":"shutdown"}' % version, -32600, 4,
       "Invalid Request: not a JSON-RPC 2.0 message") for version in (b"2", b'"1.0"', b"null")),
    (b'{"jsonrpc":"2.0"}', -32600, None, "Invalid Request: a request needs a `method`"),
    (b'{"jsonrpc":"2.0","id":55}', -32600, 55, "Invalid Request: a request needs a `method`"),
    (b'{"jsonrpc":"2.0","id":5,"method":"no/such"}', -32601, 5, "Method Not Found: no/such"),
    (b'{"jsonrpc":"2.0","id":[1],"method":"workspace/executeCommand","params":{"command":'
     b'"pi.listSessions","arguments":[{}]}}', -32600, None, ODD_MESSAGE),
    (b'{"jsonrpc":"2.0","id":7,"method":5}', -32600, None, ODD_MESSAGE),
    (b'{"jsonrpc":"2.0","method":{}}', -32600, None, ODD_MESSAGE),
    (b'{"jsonrpc":"2.0","id":1e400,"method":"no/such"}', -32600, None, ODD_MESSAGE),
    (b'{"jsonrpc":"2.0","id":1%s,"method":"no/such"}' % (b"0" * 5000), -32600, None,
     ODD_MESSAGE),
], ids=["not JSON", "not UTF-8", "empty batch", "a number", "no jsonrpc",
        "deeply nested batch", "jsonrpc 2", "jsonrpc 1.0", "jsonrpc null", "only jsonrpc",
        "no method", "unknown method without params", "an id that is a list",
        "a method that is a number", "a notification's method that is an object",
        "an id past a double", "an id of 5,001 digits"])
async def test_a_body_that_is_not_a_message_is_answered_as_json_rpc_says(
        tmp_path: Path, body: bytes, code: int, answered_id: int | None, message: str) -> None:
    """A body that was not JSON, a batch (LSP has none) or not a JSON-RPC object went unanswered
    and pygls logged a traceback for it; so did another `jsonrpc` version, a deeply nested
    batch, and a message with neither a method nor a result (which also showed an error); an
    unknown method without params was answered -32602, not -32601. An id that is a list, or a
    method that is no string, was answered -32603 with pygls' traceback; an id of 1e400 was
    answered with `Infinity`, which is not JSON."""
    log = tmp_path / "stderr.log"
    server = await RawServer.start(tmp_path, log=log)
    try:
        seen = len(server.messages)
        server.write(frame(body))
        assert (await server.command("pi.listSessions"))["result"] == {"sessions": []}
        errors = [m for m in server.messages[seen:] if "error" in m]
        assert len(errors) == 1 and errors[0]["id"] == answered_id, errors
        assert errors[0]["error"]["code"] == code
        assert errors[0]["error"]["message"].startswith(message)
        assert [m for m in server.messages[seen:] if m.get("method") == "window/showMessage"] \
            == []
        assert "Traceback" not in log.read_text()
    finally:
        await server.close()


async def test_an_integer_past_pythons_digit_limit_is_refused_by_its_field(
        tmp_path: Path) -> None:
    """A request holding an integer of 5,001 digits was answered -32700 with a null id, so
    its client waited forever, and with Python's words ("use sys.set_int_max_str_digits()").
    JSON.parse reads it as Infinity: the field is named, in the request's own answer."""
    log = tmp_path / "stderr.log"
    server = await RawServer.start(tmp_path, log=log)
    try:
        server.write(frame(b'{"jsonrpc":"2.0","id":9,"method":"workspace/executeCommand",'
                           b'"params":{"command":"pi.getTree","arguments":[{"uri":"file:///s.jsonl",'
                           b'"limit":1' + b"0" * 5000 + b'}]}}'))
        answer = await server.wait_for(lambda m: m.get("id") == 9)
        assert answer["error"] == {"code": -32602, "message": "invalid argument: Expected "
                                   "`int | null`, got `float` - at `$.limit`"}
        assert "Traceback" not in log.read_text()
    finally:
        await server.close()


BATCH_REFUSED = {"code": -32600, "message": "Invalid Request: LSP does not support batches"}


async def batch_answer(server: RawServer, batch: bytes) -> list[dict[str, Any]]:
    """The server's answer to `batch`, an array."""
    server.write(frame(batch))
    found = await server.wait_for(lambda m: "batch" in m)
    server.messages.remove(found)
    answers: list[dict[str, Any]] = found["batch"]
    return answers


async def test_each_request_of_a_batch_is_answered(tmp_path: Path) -> None:
    """A batch (LSP has none) got one -32600 with id null, so a client waited forever for the
    ids it sent. Now each request is answered as JSON-RPC says, and a huge batch costs one
    answer for all its requests without an id."""
    log = tmp_path / "stderr.log"
    server = await RawServer.start(tmp_path, log=log)
    refused = BATCH_REFUSED

    async def answer(batch: bytes) -> list[dict[str, Any]]:
        return await batch_answer(server, batch)

    try:
        assert await answer(json.dumps([
            {"jsonrpc": "2.0", "id": 1, "method": "shutdown"},
            {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 1}},
            {"jsonrpc": "2.0", "id": "two", "method": "workspace/executeCommand",
             "params": {"command": "pi.listSessions", "arguments": [{}]}},
            {"jsonrpc": "2.0", "id": 3, "result": None},  # a response: answers nothing
            7, {"id": 4.5}, {"jsonrpc": "2.0"},  # no id a response can carry: one answer
        ]).encode()) == [{"jsonrpc": "2.0", "id": 1, "error": refused},
                         {"jsonrpc": "2.0", "id": "two", "error": refused},
                         {"jsonrpc": "2.0", "id": None, "error": refused}]
        many = await answer(json.dumps([{"jsonrpc": "2.0", "id": n, "method": "shutdown"}
                                        for n in range(100_000)]).encode())
        assert [a["id"] for a in many] == list(range(100_000))
        assert await answer(b"[" + b"1," * 10_000_000 + b"1]") == [
            {"jsonrpc": "2.0", "id": None, "error": refused}]
        # Deeper than Python decodes: the ids of its requests are still found.
        assert await answer(b'[{"jsonrpc":"2.0","method":"x","params":' + b"[" * 200_000 +
                            b"]" * 200_000 + b',"id":9}]') == [
            {"jsonrpc": "2.0", "id": 9, "error": refused}]
        server.write(frame(b'[{"jsonrpc":"2.0","method":"initialized","params":{}}]'))
        assert (await server.command("pi.listSessions"))["result"] == {"sessions": []}
        assert [m for m in server.messages if "error" in m or "batch" in m] == []
        assert "Traceback" not in log.read_text()
    finally:
        await server.close()


async def test_a_message_too_deep_to_decode_is_answered_as_a_decoded_one_is(
        tmp_path: Path) -> None:
    """Every `id` read in a batch too deep to decode was answered, so a response's (a client's
    answer to the server) came back as an error carrying the id of the client's own request,
    and a batch of notifications got an id-null error; a single deep response was answered
    too. Now only requests are, as when decoded; one whose id does not decode shares the
    id-null answer (that id raised in the RecursionError handler)."""
    log = tmp_path / "stderr.log"
    server = await RawServer.start(tmp_path, log=log)
    deep = b"[" * 200_000 + b"]" * 200_000
    try:
        assert await batch_answer(server, b"[" + b",".join([
            b'{"jsonrpc":"2.0","id":1,"result":%s}' % deep,
            b'{"jsonrpc":"2.0","id":2,"error":{"code":1,"message":"m"}}',
            b'{"jsonrpc":"2.0","method":"x","params":{}}',
            b'{"jsonrpc":"2.0","id":3,"method":"x"}',
            rb'{"jsonrpc":"2.0","id":"\q","method":"x"}',
            b'{"jsonrpc":"2.0","id":%s,"method":"x"}' % (b"9" * 5000),
            b'{"jsonrpc":"2.0","id":3,"method":"y"}']) + b"]") == [
            {"jsonrpc": "2.0", "id": 3, "error": BATCH_REFUSED},
            {"jsonrpc": "2.0", "id": None, "error": BATCH_REFUSED}]
        for silent in (b'[{"jsonrpc":"2.0","id":1,"result":%s}]' % deep,
                       b'[{"jsonrpc":"2.0","method":"x","params":%s}]' % deep,
                       b'{"jsonrpc":"2.0","id":1,"result":%s}' % deep):
            server.write(frame(silent))
        assert (await server.command("pi.listSessions"))["result"] == {"sessions": []}
        assert [m for m in server.messages if "error" in m or "batch" in m] == []
        assert "Traceback" not in log.read_text()
    finally:
        await server.close()


async def test_a_huge_batch_costs_no_more_to_answer_than_it_was_to_send(
        tmp_path: Path) -> None:
    """One error per element of a batch of `{"id":0}` (6.6M of them fit a frame) made a 765 MB
    answer, 61 s with the event loop blocked and 5 GB resident. Now each distinct id is answered
    once, and a batch of more than MAX_BATCH requests gets the one id-null answer."""
    server = await RawServer.start(tmp_path)
    try:
        same = b"[" + b",".join([b'{"id":0}'] * 1000 + [b'{"id":"0"}']) + b"]"
        assert await batch_answer(server, same) == [
            {"jsonrpc": "2.0", "id": 0, "error": BATCH_REFUSED},
            {"jsonrpc": "2.0", "id": "0", "error": BATCH_REFUSED}]
        for ids in ([0] * (MAX_BATCH + 1), range(MAX_BATCH + 1)):
            batch = json.dumps([{"id": n} for n in ids]).encode()
            answers = await batch_answer(server, batch)
            assert answers == [{"jsonrpc": "2.0", "id": None, "error": BATCH_REFUSED}]
            assert len(json.dumps(answers)) < len(batch)
    finally:
        await server.close()


async def test_a_request_whose_params_do_not_fit_is_answered_naming_what_is_wrong(
        tmp_path: Path) -> None:
    """pygls answered none of these (an `initialize` with `capabilities: null` never finished
    starting the client), logged a cattrs traceback for each and showed "Error in server:
    Invalid Params" naming no field; found in review. A deep one whose id does not decode
    raised while its id was read."""
    log = tmp_path / "stderr.log"
    server = await RawServer.start(tmp_path, log=log)
    try:
        for method, params, named in (
            ("workspace/executeCommand", None, "ExecuteCommandParams @ $.params"),
            ("initialize", {"processId": None, "rootUri": None, "capabilities": None},
             "@ $.params.capabilities"),
            ("textDocument/hover", {"textDocument": {"uri": "file:///a.py"},
                                    "position": {"line": -1, "character": 0}},
             "(Position.line should be in range [0:2147483647], but was -1.) @ $.params.position"),
        ):
            answer = await server.request(method, params)
            assert answer["error"]["code"] == -32602, answer
            assert named in answer["error"]["message"], answer
        # Deeper than Python decodes: its id, after the nesting, is still found to answer it.
        server.write(frame(b'{"jsonrpc":"2.0","method":"workspace/executeCommand","params":'
                           b'{"command":"pi.getTree","arguments":[' + b"[" * 200_000 +
                           b"]" * 200_000 + b']},"id":7}'))
        answer = await server.wait_for(lambda m: m.get("id") == 7)
        assert answer["error"] == {"code": -32602, "message": "invalid params: nested too deeply"}
        # One whose id does not decode cannot be answered: it is logged, as a notification is.
        server.write(frame(b'{"jsonrpc":"2.0","method":"x","params":' + b"[" * 200_000 +
                           b"]" * 200_000 + rb',"id":"\q"}'))
        server.send({"method": "$/cancelRequest", "params": {}})
        assert (await server.command("pi.listSessions"))["result"] == {"sessions": []}
        assert [m for m in server.messages if m.get("method") == "window/showMessage"] == []
        assert "Traceback" not in log.read_text()
    finally:
        await server.close()


# -- tool output ---------------------------------------------------------------------------


@pytest.fixture
def temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where temp files go, so a test sees exactly the ones it made."""
    directory = tmp_path / "tmp"
    directory.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    return directory


def test_output_memory_stays_bounded_and_the_file_has_everything(temp_dir: Path) -> None:
    output = OutputTail()
    line = b"x" * 99 + b"\n"
    for _ in range(100_000):  # 10 MB
        output.write(line)
        assert len(output.buffer) <= 4 * output.max_bytes  # pi's window: cut back at 4x
    output.close()
    text, details = output.result_text()
    assert details is not None and details["truncation"]["truncatedBy"] == "bytes"
    shown = text.split("\n\n[")[0].split("\n")
    assert all(s == "x" * 99 for s in shown) and len("\n".join(shown)) <= output.max_bytes
    assert text.endswith(f"[Showing lines {100_000 - len(shown) + 1}-100000 of 100000 "
                         f"(50.0KB limit). Full output: {details['fullOutputPath']}]")
    assert Path(details["fullOutputPath"]).stat().st_size == 10_000_000
    output.discard()
    assert list(temp_dir.iterdir()) == []


def test_many_short_lines_are_cut_by_count_and_saved(temp_dir: Path) -> None:
    output = OutputTail()
    output.write(b"".join(b"%d\n" % n for n in range(1, 3001)))  # 14 KB, 3000 lines
    output.close()
    text, details = output.result_text()
    assert details is not None
    assert text.startswith("1001\n") and "[Showing lines 1001-3000 of 3000. Full output:" in text
    assert Path(details["fullOutputPath"]).read_bytes().count(b"\n") == 3000
    output.discard()


def test_one_huge_line_shows_its_end(temp_dir: Path) -> None:
    output = OutputTail()
    output.write(b"a" * 200_000 + b"END")
    output.close()
    text, details = output.result_text()
    assert details is not None and details["truncation"]["lastLinePartial"]
    assert text.startswith("a" * 100) and "END\n\n[Showing last 50.0KB of line 1 (line is " \
        "195.3KB)" in text
    output.discard()


def test_short_output_leaves_no_file(temp_dir: Path) -> None:
    output = OutputTail()
    output.write(b"hello\nworld\n")
    output.close()
    assert output.result_text() == ("hello\nworld\n", None)  # as pi, the last newline kept
    assert output.full_path is None and list(temp_dir.iterdir()) == []


async def test_bash_updates_are_few_and_small(root_dir: Path, temp_dir: Path) -> None:
    updates: list[str] = []
    started = time.monotonic()
    result = await execute_tool(BASH, "bash", {"command": "seq 1 3000000"},
                                ToolContext(root_dir, on_update=updates.append))
    elapsed = time.monotonic() - started
    assert not result.is_error
    assert len(updates) <= elapsed / UPDATE_INTERVAL_S + 2
    assert all(len(u.encode()) <= 50 * 1024 for u in updates)
    assert updates
    full = Path(result.details["fullOutputPath"])
    assert full.stat().st_size == sum(len(str(n)) + 1 for n in range(1, 3_000_001))
    discard_file(str(full))


async def test_an_aborted_command_leaves_no_file(root_dir: Path, temp_dir: Path) -> None:
    task = asyncio.ensure_future(execute_tool(
        BASH, "bash", {"command": "seq 1 100000; sleep 30"}, ToolContext(root_dir)))
    await until(lambda: list(temp_dir.iterdir()), "the output to be spilled")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert list(temp_dir.iterdir()) == []


def test_full_output_files_are_deleted_when_the_process_exits(tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import asyncio, pathlib, sys
        from pi_lsp.agent.tools import BASH, ToolContext, execute_tool
        result = asyncio.run(execute_tool(BASH, "bash", {"command": "seq 1 100000"},
                                          ToolContext(pathlib.Path("."))))
        path = result.details["fullOutputPath"]
        assert pathlib.Path(path).exists()
        print(path)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=tmp_path, check=True, timeout=PROCESS_CEILING_S)
    path = Path(done.stdout.strip())
    assert path.name.startswith("pi-lsp-bash-") and not path.exists()


# -- the server going away -----------------------------------------------------------------


def session_lines(uri: str) -> list[dict[str, Any]]:
    path = Path(uri.removeprefix("file://"))
    return [json.loads(line) for line in path.read_text().splitlines()]




async def start_turn(tmp_path: Path, fake: FakeAnthropic, *replies: Reply,
                     log: Path | None = None, tcp: bool = False) -> tuple[RawServer, str]:
    fake.script(*replies)
    server = await RawServer.start(tmp_path, log=log, tcp=tcp, anthropicBaseUrl=fake.url,
                                   anthropicApiKey="test-key")
    async with killed_on_failure(server.process):
        uri = (await server.command("pi.newSession"))["result"]["uri"]
        answer = await server.command("pi.prompt", uri=uri, text="go")
        assert "turnId" in answer["result"], answer
    return server, uri


@pytest.mark.parametrize(("first", "again"), [(False, False), (False, True), (True, False)],
                         ids=["once", "initialized twice", "opened before initialized"])
async def test_a_document_opened_with_initialized_is_read_as_its_unsaved_text(
        first: bool, again: bool, tmp_path: Path, fake: FakeAnthropic) -> None:
    """`initialized` made the session side in a task of its own, so the didOpen read with it
    (an editor's open buffers, Neovim's after :LspRestart) was handled first: "Error in
    server: ... not initialized" was shown and logged, and the agent read the disk, not the
    buffer's unsaved text. A second `initialized` made a second session side, which knew of
    no unsaved buffer, and the first one's watch ran on. A client that did not wait for
    `initialized` before its didOpen (LSP says to) was shown the error too (found in
    review)."""
    log = tmp_path / "stderr.log"
    typed = tmp_path / "ws" / "my wörk" / "typed.txt"  # its URI percent-encoded
    typed.parent.mkdir(parents=True)
    typed.write_text("on disk\n")
    fake.script(text_reply("ok"))
    server = await RawServer.start(
        tmp_path, log=log, anthropicBaseUrl=fake.url, anthropicApiKey="test-key",
        documents=[{"uri": typed.as_uri(), "languageId": "text", "version": 1,
                    "text": "typed, not saved\n"}], opened_first=first)
    try:
        if again:
            server.send({"method": "initialized", "params": {}})
        uri = (await server.command("pi.newSession"))["result"]["uri"]
        answer = await server.command("pi.prompt", uri=uri, text="go",
                                      context=[{"uri": typed.as_uri()}])
        assert "turnId" in answer["result"], answer
        await server.turn_event("agent_end")
        assert "typed, not saved" in json.dumps(fake.requests[-1].body)
        assert [m for m in server.messages if m.get("method") == "window/showMessage"] == []
    finally:
        await server.close()
    assert "ERROR" not in log.read_text()


def end_server(process: asyncio.subprocess.Process, how: str) -> int:
    """End the server as `how` says (SIGTERM, its input closed, Ctrl-C); the exit code it
    ends with."""
    if how == "sigterm":
        process.send_signal(signal.SIGTERM)
    elif how == "ctrl-c":
        process.send_signal(signal.SIGINT)
    else:
        assert process.stdin is not None
        process.stdin.close()
    return 130 if how == "ctrl-c" else 0


@pytest.mark.parametrize("how", ["sigterm", "stdin closed", "ctrl-c"])
async def test_ending_the_server_mid_reply_saves_it_as_aborted(
        how: str, tmp_path: Path, fake: FakeAnthropic) -> None:
    """Ctrl-C cancelled the turn with the loop, so the reply streamed so far was lost (SIGTERM
    and a closed stdin saved it)."""
    server, uri = await start_turn(
        tmp_path, fake, text_reply(*(f"word{i} " for i in range(400)), delay=0.05))
    try:
        await server.turn_event("message_update")
        code = end_server(server.process, how)
        assert await asyncio.wait_for(server.process.wait(), CEILING_S) == code
        last = session_lines(uri)[-1]
        assert last["message"]["role"] == "assistant"
        assert last["message"]["stopReason"] == "aborted"
        assert "word0" in json.dumps(last["message"]["content"])
    finally:
        await server.close()


@pytest.mark.parametrize("how", ["sigterm", "stdin closed", "ctrl-c"])
async def test_ending_the_server_with_a_command_in_flight_logs_no_traceback(
        how: str, tmp_path: Path) -> None:
    """Only `shutdown` cancelled the requests in flight: on the other ends asyncio.run
    cancelled their handlers as it closed, and each one's JsonRpcRequestCancelled was logged
    with a traceback (twice: by pygls, and as unhandled during asyncio.run's shutdown)."""
    log = tmp_path / "stderr.log"
    server = await RawServer.start(tmp_path, log=log, toolApproval="ask")
    try:
        uri = (await server.command("pi.newSession"))["result"]["uri"]
        outside = tmp_path / "outside.txt"
        outside.write_text("far away\n")
        server.send({"id": 1, "method": "workspace/executeCommand", "params": {
            "command": "pi.prompt", "arguments": [{"uri": uri, "text": "go", "context": [
                {"uri": outside.as_uri()}]}]}})
        await server.wait_for(lambda m: m.get("method") == "window/showMessageRequest")
        code = end_server(server.process, how)
        assert await asyncio.wait_for(server.process.wait(), CEILING_S) == code
        assert "Traceback" not in log.read_text()
    finally:
        await server.close()


@pytest.mark.parametrize("transport", ["stdio", "tcp"])
async def test_ctrl_c_with_a_client_connected_says_interrupted_and_exits_130(
        transport: str, tmp_path: Path) -> None:
    """The stdio loop swallowed KeyboardInterrupt, so Ctrl-C while serving a client exited 0
    without a word (README: "pi-lsp: interrupted" and 130)."""
    log = tmp_path / "stderr.log"
    server = await RawServer.start(tmp_path, log=log, tcp=transport == "tcp")
    try:
        assert (await server.command("pi.listSessions"))["result"] == {"sessions": []}
        server.process.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(server.process.wait(), CEILING_S) == 130
        said = log.read_text()
        if transport == "tcp":  # after the line `--tcp` says once it listens
            listening, said = said.split("\n", 1)
            assert listening.startswith("pi-lsp: listening on 127.0.0.1:")
        assert said == "pi-lsp: interrupted\n"
    finally:
        await server.close()


@pytest.mark.parametrize(("signum", "code", "said"), [
    (signal.SIGTERM, 0, ""), (signal.SIGINT, 130, "pi-lsp: interrupted\n")],
    ids=["sigterm", "ctrl-c"])
async def test_ending_serve_tcp_before_a_client_connects_ends_as_with_one(
        tmp_path: Path, signum: signal.Signals, code: int, said: str) -> None:
    """SIGTERM to `serve --tcp` before any client connected killed it (exit -15, no word),
    where with a client connected it ends as `shutdown` does, exit 0 (Ctrl-C: 130, said)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pi_lsp.cli", "serve", "--tcp", "127.0.0.1:0",
        env={**os.environ, "PI_CODING_AGENT_DIR": str(tmp_path / "agent")},
        stdin=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    assert process.stderr is not None
    try:
        line = await asyncio.wait_for(process.stderr.readline(), PROCESS_CEILING_S)
        listening, port = line.decode().rsplit(":", 1)
        assert listening == "pi-lsp: listening on 127.0.0.1" and int(port) > 0
        process.send_signal(signum)
        assert await asyncio.wait_for(process.wait(), CEILING_S) == code
        assert (await process.stderr.read()).decode() == said
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_a_tcp_server_that_failed_to_start_is_not_left_running(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """RawServer.start left `serve --tcp` running for ever (an orphan of init) when connecting
    or `initialize` failed: the test's own cleanup only begins once start returns."""
    spawned: list[asyncio.subprocess.Process] = []
    spawn = asyncio.create_subprocess_exec

    async def recorded(*args: Any, **kwargs: Any) -> asyncio.subprocess.Process:
        spawned.append(await spawn(*args, **kwargs))
        return spawned[-1]

    async def refused(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        raise ConnectionRefusedError(port)

    monkeypatch.setattr(asyncio, "create_subprocess_exec", recorded)
    monkeypatch.setitem(globals(), "connect", refused)
    with pytest.raises(ConnectionRefusedError):
        await RawServer.start(tmp_path, tcp=True)
    (process,) = spawned
    async with killed_on_failure(process):
        assert process.returncode is not None


@pytest.mark.parametrize("transport", ["stdio", "tcp"])
@pytest.mark.parametrize("when", ["at the prompt's answer", "mid reply"])
async def test_exit_without_shutdown_during_a_turn_saves_it_and_exits_1(
        when: str, transport: str, tmp_path: Path, fake: FakeAnthropic) -> None:
    """pygls' `exit` escaped the loop: the turn was cancelled, not aborted (its reply never
    saved), the code was 0, and what the turn still sent went to the stdout `exit` had closed
    (thousands of tracebacks, and a write that failed on it lost the prompt); found in review.
    Over TCP pygls' own loop still did so after that fix."""
    log = tmp_path / "stderr.log"
    server, uri = await start_turn(
        tmp_path, fake, text_reply(*(f"word{i} " for i in range(400)), delay=0.05), log=log,
        tcp=transport == "tcp")
    try:
        if when == "mid reply":
            await server.turn_event("message_update")
        server.send({"method": "exit"})
        assert await asyncio.wait_for(server.process.wait(), CEILING_S) == 1  # no `shutdown`
        messages = [e["message"] for e in session_lines(uri) if e["type"] == "message"]
        assert [(m["role"], m.get("stopReason")) for m in messages][-2:] == [
            ("user", None), ("assistant", "aborted")]
        assert "Traceback" not in log.read_text()
    finally:
        await server.close()


@pytest.mark.parametrize("then", ["exit", "stdin closed"])
async def test_shutdown_followed_at_once_by_the_end_exits_0_once(
        then: str, tmp_path: Path, fake: FakeAnthropic) -> None:
    """`shutdown` (here during a turn) marked the server shut down only once its work was
    done, so the input's end at once after it ran that work again beside it (a traceback, and
    -32603 or no answer), and an `exit` written with it exited 1."""
    log = tmp_path / "stderr.log"
    server, _uri = await start_turn(
        tmp_path, fake, text_reply(*(f"word{i} " for i in range(400)), delay=0.05), log=log)
    try:
        await server.turn_event("message_update")
        server.send({"id": 99, "method": "shutdown"})
        if then == "exit":
            server.send({"method": "exit"})
        else:
            assert server.process.stdin is not None
            server.process.stdin.close()
        assert await asyncio.wait_for(server.process.wait(), CEILING_S) == 0
        await server.reader
        if then == "stdin closed":
            assert [m for m in server.messages if m.get("id") == 99] == [
                {"jsonrpc": "2.0", "id": 99, "result": None}]
        assert "Traceback" not in log.read_text()
    finally:
        await server.close()


async def test_a_tcp_client_gone_mid_reply_ends_the_server_as_a_closed_stdin_does(
        tmp_path: Path, fake: FakeAnthropic) -> None:
    """A reset connection logged a traceback (its read's ConnectionResetError) and exited 2
    with "cannot listen (Broken pipe)" (closing the socket's writer flushed to it)."""
    log = tmp_path / "stderr.log"
    server, uri = await start_turn(
        tmp_path, fake, text_reply(*(f"word{i} " for i in range(400)), delay=0.05), log=log,
        tcp=True)
    try:
        await server.turn_event("message_update")
        connection = server.sink.get_extra_info("socket")
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        server.sink.transport.abort()  # closed with no linger: a reset
        assert await asyncio.wait_for(server.process.wait(), CEILING_S) == 0
        last = session_lines(uri)[-1]
        assert (last["message"]["role"], last["message"]["stopReason"]) == (
            "assistant", "aborted")
        said = log.read_text()
        assert "the connection to the client is lost" in said and "Traceback" not in said
    finally:
        await server.close()


async def start_sleeping_tool(tmp_path: Path, fake: FakeAnthropic) -> tuple[RawServer, str, int]:
    pid_file = tmp_path / "ws" / "sleep.pid"
    command = f"sleep 30 & echo $! > {pid_file}; wait"
    server, uri = await start_turn(
        tmp_path, fake, tool_reply([("call-1", "bash", {"command": command})]),
        text_reply("done"))
    return server, uri, await pid_in(pid_file)


async def test_sigterm_mid_tool_kills_the_command_and_pairs_the_call(
        tmp_path: Path, fake: FakeAnthropic) -> None:
    server, uri, pid = await start_sleeping_tool(tmp_path, fake)
    try:
        assert alive(pid)
        server.process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(server.process.wait(), CEILING_S) == 0
        await gone(pid, "the command, after the server")
        entries = session_lines(uri)
        calls = [e for e in entries if e["type"] == "message" and
                 e["message"]["role"] == "assistant"]
        results = [e for e in entries if e["type"] == "message" and
                   e["message"]["role"] == "toolResult"]
        assert [r["message"]["toolCallId"] for r in results] == ["call-1"]
        assert results[0]["message"]["isError"] and calls
    finally:
        await server.close()


async def test_an_end_while_the_editor_applies_an_edit_pairs_the_call(
        tmp_path: Path, fake: FakeAnthropic) -> None:
    """An edit the editor had not applied outlasted the end's grace, which cancelled the
    aborted turn in its wait for the edit: the call was left with no result and no aborted
    reply, after waiting 5 s more on an editor whose input was closed."""
    fake.script(tool_reply([("call-1", "edit", {"path": "a.txt", "edits": [
        {"oldText": "hello", "newText": "HELLO"}]})]), text_reply("never asked for"))
    server = await RawServer.start(
        tmp_path, capabilities={"workspace": {"applyEdit": True,
                                              "workspaceEdit": {"documentChanges": True}}},
        anthropicBaseUrl=fake.url, anthropicApiKey="test-key")
    try:
        edited = tmp_path / "ws" / "a.txt"
        edited.write_text("hello world\n")
        server.send({"method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": edited.as_uri(), "languageId": "plaintext", "version": 1,
            "text": "hello world\n"}}})
        uri = (await server.command("pi.newSession"))["result"]["uri"]
        await server.command("pi.prompt", uri=uri, text="go")
        await server.wait_for(lambda m: m.get("method") == "workspace/applyEdit")
        assert server.process.stdin is not None
        server.process.stdin.close()  # the editor never answers the edit
        assert await asyncio.wait_for(server.process.wait(), CEILING_S) == 0
        messages = [e["message"] for e in session_lines(uri) if e["type"] == "message"]
        assert [m["role"] for m in messages][-3:] == ["assistant", "toolResult", "assistant"]
        assert "it may have changed" in messages[-2]["content"][0]["text"]
        assert messages[-1]["stopReason"] == "aborted"
    finally:
        await server.close()


# What the editor holds when the turn is aborted: the turn's progress, or a tool's approval
# (asked with the client's capabilities and options, after the model's reply).
HELD: dict[str, tuple[dict[str, Any], dict[str, Any], Reply, str]] = {
    "progress": ({"window": {"workDoneProgress": True}}, {}, text_reply("never asked for"),
                 "window/workDoneProgress/create"),
    "approval": ({"experimental": {"piLsp": {"approveTool": True}}}, {"toolApproval": "ask"},
                 tool_reply([("call-1", "bash", {"command": "echo never"})]), "pi/approveTool"),
}


@pytest.mark.parametrize("held", list(HELD))
async def test_a_request_the_editor_refuses_after_an_abort_logs_nothing(
        held: str, tmp_path: Path, fake: FakeAnthropic) -> None:
    """An abort while the editor held the turn's window/workDoneProgress/create (or a tool's
    pi/approveTool) left nobody to read the error it answered later: asyncio logged "Task
    exception was never retrieved" with the request's traceback (or "Future exception")."""
    capabilities, options, reply, method = HELD[held]
    log = tmp_path / "stderr.log"
    fake.script(reply)
    server = await RawServer.start(tmp_path, log=log, capabilities=capabilities,
                                   anthropicBaseUrl=fake.url, anthropicApiKey="test-key",
                                   **options)
    try:
        uri = (await server.command("pi.newSession"))["result"]["uri"]
        await server.command("pi.prompt", uri=uri, text="go")
        asked = await server.wait_for(lambda m: m.get("method") == method)
        await server.command("pi.abort", uri=uri)
        await server.turn_event("agent_end")
        server.send({"id": asked["id"], "error": {"code": -32800, "message": "cancelled"}})
        assert server.process.stdin is not None
        server.process.stdin.close()
        assert await asyncio.wait_for(server.process.wait(), CEILING_S) == 0
        assert "ERROR" not in log.read_text()
    finally:
        await server.close()


@pytest.mark.parametrize("answer", [{"result": {"applied": True}},
                                    {"error": {"code": -32603, "message": "editor closing"}}],
                         ids=["result", "error"])
def test_an_answer_the_server_stopped_waiting_for_is_ignored_quietly(
        answer: dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    """An edit the editor answered after the end's grace had stopped waiting for it (held
    through `shutdown`) was set on the cancelled request: pygls raised InvalidStateError, with
    a traceback and "Error in server: CANCELLED" shown in the editor."""
    protocol = server.protocol
    asked = protocol.send_request(types.WORKSPACE_APPLY_EDIT, types.ApplyWorkspaceEditParams(
        edit=types.WorkspaceEdit()), msg_id="late-answer")
    protocol.stop_asking()
    caplog.clear()
    protocol.receive(json.dumps({"jsonrpc": "2.0", "id": "late-answer", **answer}).encode())
    assert asked.cancelled()
    assert "late-answer" not in protocol._request_futures
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


@pytest.mark.parametrize(("method", "answer", "said"), [
    (types.WINDOW_SHOW_MESSAGE_REQUEST, {"result": 5}, "expected str @ $.result.title"),
    ("pi/approveTool", {"error": {"code": "x"}},
     "expected int @ $.error.code; required field missing @ $.error.message"),
], ids=["result", "error"])
def test_an_answer_that_does_not_fit_fails_its_request(
        method: str, answer: dict[str, Any], said: str, caplog: pytest.LogCaptureFixture) -> None:
    """An editor's answer of the wrong shape to the server's request (a showMessageRequest
    answered 5) made pygls raise: a traceback, "Error in server: Invalid Params" shown, and
    the request never settled, so a turn waiting on a tool's approval hung until aborted."""
    protocol = server.protocol
    asked = protocol.send_request(method, types.ShowMessageRequestParams(
        type=types.MessageType.Warning, message="run it?"), msg_id="odd-answer")
    caplog.clear()
    protocol.receive(json.dumps({"jsonrpc": "2.0", "id": "odd-answer", **answer}).encode())
    error = asked.exception(timeout=0)
    assert isinstance(error, JsonRpcException) and error.code == JsonRpcInvalidParams.CODE
    assert str(error) == f"the editor's answer does not fit: invalid value for type, {said}"
    assert "odd-answer" not in protocol._request_futures
    assert not any(r.exc_info for r in caplog.records)


@pytest.mark.parametrize(("method", "result", "read"), [
    (types.WORKSPACE_APPLY_EDIT, {"applied": True}, types.ApplyWorkspaceEditResult(True)),
    ("pi/approveTool", {"decision": "allow"}, ApproveToolResult("allow")),
], ids=["applyEdit", "approveTool"])
def test_a_null_error_beside_a_result_keeps_the_result(method: str, result: Any,
                                                       read: Any) -> None:
    """`"error": null` beside a good result was taken for an error answer: applyEdit's result
    came back None (apply() then raised on None.applied) and an approval failed."""
    protocol = server.protocol
    asked = protocol.send_request(method, None, msg_id="null-error")
    protocol.receive(json.dumps({"jsonrpc": "2.0", "id": "null-error", "result": result,
                                 "error": None}).encode())
    answer = asked.result(timeout=0)
    assert (parse_approval(answer) if method == "pi/approveTool" else answer) == read


@pytest.mark.parametrize(("method", "read"), [
    (types.WINDOW_WORK_DONE_PROGRESS_CREATE, None),
    (types.CLIENT_REGISTER_CAPABILITY, None),
    (types.WORKSPACE_APPLY_EDIT, "the editor's answer has neither result nor error"),
    ("pi/approveTool", None),
], ids=["progress", "register", "applyEdit", "approveTool"])
def test_an_answer_with_no_result_settles_its_request(
        method: str, read: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """An answer with neither `result` nor `error` (a Lua client encoding nil) was taken for
    a request: the server's request (a tool's approval, workDoneProgress/create) waited
    forever, and the editor was sent -32600 under the server's own id."""
    protocol = server.protocol
    sent: list[Any] = []
    monkeypatch.setattr(protocol, "_send_data", sent.append)
    asked = protocol.send_request(method, None, msg_id="no-result")
    protocol.receive(b'{"jsonrpc": "2.0", "id": "no-result"}')
    if read is None:  # a null result, which the approval takes for no decision: a denial
        assert asked.result(timeout=0) is None and parse_approval(None) is None
    else:
        assert str(asked.exception(timeout=0)) == read
    assert len(sent) == 1  # the request: no error sent back


@pytest.mark.parametrize(("answer", "read"), [
    (b'{"jsonrpc": "2.0", "id": "null-method", "method": null, "result": {"decision": "deny"}}',
     ApproveToolResult("deny")),
    (b'{"jsonrpc": "2.0", "id": "null-method", "method": null}', None),
], ids=["result", "nothing"])
def test_an_answer_that_says_method_null_settles_its_request(
        answer: bytes, read: ApproveToolResult | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """An answer to the server's request that also says `"method": null` was refused as a
    request with a null id, and the request (a tool's approval) waited forever."""
    protocol = server.protocol
    sent: list[Any] = []
    monkeypatch.setattr(protocol, "_send_data", sent.append)
    asked = protocol.send_request("pi/approveTool", None, msg_id="null-method")
    protocol.receive(answer)
    assert parse_approval(asked.result(timeout=0)) == read
    assert len(sent) == 1  # the request: no error sent back


async def test_a_killed_server_leaves_no_command_running(tmp_path: Path,
                                                         fake: FakeAnthropic) -> None:
    server, _uri, pid = await start_sleeping_tool(tmp_path, fake)
    try:
        assert alive(pid)
        server.process.kill()
        await server.process.wait()
        await gone(pid, "the command, after the server killed with SIGKILL")
    finally:
        await server.close()


async def test_sigterm_to_pi_lsp_run_mid_tool_kills_the_command_and_saves_the_run(
        tmp_path: Path, fake: FakeAnthropic) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    pid_file = workspace / "sleep.pid"
    fake.script(tool_reply([("call-1", "bash",
                             {"command": f"sleep 30 & echo $! > {pid_file}; wait"})]),
                text_reply("done"))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")},
           "ANTHROPIC_BASE_URL": fake.url, "ANTHROPIC_API_KEY": "test",
           "PI_CODING_AGENT_DIR": str(tmp_path / "agent")}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pi_lsp.cli", "run", "--new", "go", cwd=workspace, env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    try:
        pid = await pid_in(pid_file)
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), CEILING_S) == 143
        await gone(pid, "the command, after `pi-lsp run`")
        (session,) = (workspace / ".pi" / "sessions").glob("*.jsonl")
        messages = [e["message"] for e in session_lines(session.as_uri())
                    if e["type"] == "message"]
        # The aborted tool batch ends on pi 1.6's aborted turn (80ea689), sent to no one.
        assert [m["role"] for m in messages] == [
            "system", "user", "assistant", "toolResult", "assistant"]
        assert messages[-1]["stopReason"] == "aborted"
        assert len(fake.message_requests()) == 1
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def tree_summary(path: Path) -> tuple[str | None, int, str | None]:
    tree = SessionTree.open(str(path))
    first = next((t for t in map(catalog.user_text, tree.records) if t is not None), None)
    return tree.name, len(tree.records), first


def damaged_sessions(directory: Path) -> list[Path]:
    """Sessions with the damage a reader must tolerate, plus pi's own conformance files."""
    directory.mkdir()
    good = make_chain(directory / "chain.jsonl", 3)
    lines = (directory / "chain.jsonl").read_bytes().splitlines(keepends=True)
    cases = {
        "bom.jsonl": b"\xef\xbb\xbf" + b"".join(lines),
        "crlf.jsonl": b"".join(line.replace(b"\n", b"\r\n") for line in lines),
        "torn.jsonl": b"".join(lines) + b'{"type":"message","id":"x',
        "unterminated.jsonl": b"".join(lines).rstrip(b"\n"),
        "damaged.jsonl": lines[0] + b"\n[1]\nnot json\n" + b"".join(lines[1:]),
        "header-only.jsonl": lines[0].rstrip(b"\n"),
        "v1.jsonl": b'{"type":"session","id":"old","timestamp":"2025-01-01T00:00:00.000Z",'
                    b'"cwd":"/w"}\n{"type":"message","timestamp":"2025-01-01T00:00:01.000Z",'
                    b'"message":{"role":"user","content":"old one","timestamp":1}}\n',
    }
    for name, data in cases.items():
        (directory / name).write_bytes(data)
    assert good
    return [*sorted(directory.iterdir()), *conformance_files()]


@pytest.mark.parametrize("chunk", [7, 1 << 20])
def test_a_summary_read_in_chunks_matches_the_tree(tmp_path: Path, chunk: int,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    for path in damaged_sessions(tmp_path / "s"):
        summary = tree_summary(path)
        expected = Tail.after(str(path), read_file(str(path)))
        with monkeypatch.context() as patch:
            patch.setattr(journal, "READ_CHUNK", chunk)
            fold, tail = catalog.read_summary(path)
        assert (fold.name, fold.entry_count, fold.first_message) == summary, path
        assert (tail.offset, tail.inode, tail.prefix, tail.lines_read, tail.unterminated) == (
            expected.offset, expected.inode, expected.prefix, expected.lines_read,
            expected.unterminated), path


def test_a_huge_session_is_summarized_without_holding_it(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.jsonl"
    make_chain(path, 2000)
    monkeypatch.setattr(journal, "READ_CHUNK", 4096)
    held: list[int] = []
    real_add = catalog.SummaryFold.add

    def add(fold: catalog.SummaryFold, records: list[Any]) -> None:
        held.append(len(records))
        real_add(fold, records)
    monkeypatch.setattr(catalog.SummaryFold, "add", add)
    fold, _tail = catalog.read_summary(path)
    assert fold.entry_count == 2000
    assert max(held) < 100, "records were gathered, not folded a chunk at a time"
