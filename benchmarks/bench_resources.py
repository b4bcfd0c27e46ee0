"""Server memory after many previews, and `pi.listSessions` with one huge session or one giant line.

Usage: python benchmarks/bench_resources.py [--previews N] [--sessions N] [--huge-mb N]
                                            [--giant-mb N]
Prints (a) the server's RSS after opening a 20 MB session and previewing N different leaves
(target under 400 MB), (b) `pi.listSessions` p50/p95 over many sessions, one of them huge,
after the first call (target p95 under 50 ms), and (c) `pi.listSessions` on a workspace whose
one session is a 1 GB file without a newline (target under 5 s, server peak RSS under 300 MB).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from bench_server import RawClient, percentile  # noqa: E402
from bench_session import byte_compiled, iso, make_session  # noqa: E402

from pi_lsp.session.tree import SessionTree  # noqa: E402

SESSION_MB = 20


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """Resident memory of a process, now or at its peak (`VmHWM`) (Linux /proc, else `ps`)."""
    status = Path(f"/proc/{pid}/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    output = os.popen(f"ps -o rss= -p {pid}").read().strip()
    return int(output) / 1024


def write_small_session(path: Path, index: int) -> None:
    stamp = iso(index * 1000)
    path.write_text(
        f'{{"type":"session","version":3,"id":"s{index}","timestamp":"{stamp}","cwd":"/w"}}\n'
        f'{{"type":"message","id":"a{index:07x}","parentId":null,"timestamp":"{stamp}",'
        f'"message":{{"role":"user","content":"question number {index}","timestamp":1}}}}\n'
        f'{{"type":"session_info","id":"b{index:07x}","parentId":"a{index:07x}",'
        f'"timestamp":"{stamp}","name":"session {index}"}}\n')


def write_huge_session(path: Path, megabytes: int) -> None:
    """A long chain of ~2 KB user and assistant messages, written without building entries."""
    text = "lorem ipsum dolor sit amet " * 75
    with path.open("w") as out:
        out.write('{"type":"session","version":3,"id":"huge","timestamp":'
                  f'"{iso(0)}","cwd":"/w"}}\n')
        parent = "null"
        index = 0
        while out.tell() < megabytes * 1_000_000:
            entry_id = f"{index:08x}"
            role = "user" if index % 2 == 0 else "assistant"
            body = f'"content":"{text}"' if role == "user" else \
                f'"content":[{{"type":"text","text":"{text}"}}],"api":"anthropic-messages",' \
                '"provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":1,' \
                '"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"input":0,' \
                '"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop"'
            out.write(f'{{"type":"message","id":"{entry_id}","parentId":{parent},'
                      f'"timestamp":"{iso(index)}","message":{{"role":"{role}",{body},'
                      f'"timestamp":{index}}}}}\n')
            parent = f'"{entry_id}"'
            index += 1


async def start_server(scratch: Path, workspace: Path) -> tuple[asyncio.subprocess.Process,
                                                                RawClient]:
    byte_compiled()
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(scratch / "agent"),
           "XDG_STATE_HOME": str(scratch / "state")}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pi_lsp.cli", "serve", env=env, limit=256 << 20,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    client = RawClient(process)
    await client.request("initialize", {
        "processId": os.getpid(), "capabilities": {},
        "workspaceFolders": [{"uri": workspace.as_uri(), "name": "ws"}],
        "initializationOptions": {"anthropicApiKey": "bench", "autoCompaction": False},
    })
    client.send({"method": "initialized", "params": {}})
    return process, client


async def stop_server(process: asyncio.subprocess.Process, client: RawClient) -> None:
    await client.request("shutdown", None)
    client.send({"method": "exit"})
    await asyncio.wait_for(process.wait(), 10)
    client.reader.cancel()


async def command(client: RawClient, name: str, **args: Any) -> float:
    start = time.perf_counter()
    await client.request("workspace/executeCommand", {"command": name, "arguments": [args]})
    return (time.perf_counter() - start) * 1000


async def measure_previews(scratch: Path, previews: int) -> None:
    workspace = scratch / "previews"
    sessions = workspace / ".pi" / "sessions"
    sessions.mkdir(parents=True)
    session = sessions / "big.jsonl"
    entries = SESSION_MB * 1_000_000 // 735  # about 735 bytes an entry
    make_session(session, entries)
    tree = SessionTree.open(str(session))
    path = tree.path_ids(tree.leaf_id)
    leaves = [path[(i + 1) * (len(path) - 1) // previews] for i in range(previews)]
    del tree
    print(f"(a) session: {len(path)} entries on the main line, "
          f"{session.stat().st_size / 1e6:.1f} MB")
    process, client = await start_server(scratch, workspace)
    uri = session.as_uri()
    await command(client, "pi.getTree", uri=uri)
    opened = rss_mb(process.pid)
    for leaf in leaves:
        await command(client, "pi.previewContext", uri=uri, leafId=leaf)
    after = rss_mb(process.pid)
    print(f"    server RSS after opening: {opened:.0f} MB; after previewing {previews} "
          f"different leaves: {after:.0f} MB  (target < 400 MB)")
    await stop_server(process, client)


async def measure_listing(scratch: Path, count: int, huge_mb: int, calls: int) -> None:
    workspace = scratch / "listing"
    sessions = workspace / ".pi" / "sessions"
    sessions.mkdir(parents=True)
    for index in range(count - 1):
        write_small_session(sessions / f"s{index:04d}.jsonl", index)
    huge = sessions / "huge.jsonl"
    write_huge_session(huge, huge_mb)
    print(f"(b) {count} sessions, one of {huge.stat().st_size / 1e6:.0f} MB")
    process, client = await start_server(scratch, workspace)
    first = await command(client, "pi.listSessions")
    timings = [await command(client, "pi.listSessions") for _ in range(calls)]
    print(f"    first pi.listSessions: {first:.0f} ms; then p50 {statistics.median(timings):.1f} "
          f"ms, p95 {percentile(timings, 0.95):.1f} ms  (target p95 < 50 ms)")
    await stop_server(process, client)


def write_giant_line(path: Path, megabytes: int) -> None:
    """A session header, then one line of `megabytes` MB with no newline (a hostile file)."""
    block = b"x" * (1 << 20)
    with path.open("wb") as out:
        out.write(b'{"type":"session","version":3,"id":"giant","timestamp":"2026-01-01T00:00:00'
                  b'.000Z","cwd":"/w"}\n{"type":"message","id":"aaaa0001","parentId":null,'
                  b'"message":{"role":"user","content":"')
        for _ in range(megabytes):
            out.write(block)


async def measure_giant_line(scratch: Path, megabytes: int) -> None:
    workspace = scratch / "giant"
    sessions = workspace / ".pi" / "sessions"
    sessions.mkdir(parents=True)
    giant = sessions / "giant.jsonl"
    write_giant_line(giant, megabytes)
    print(f"(c) one session of {giant.stat().st_size / 1e6:.0f} MB, its second line without a "
          "newline")
    process, client = await start_server(scratch, workspace)
    await command(client, "pi.listModels")  # the server is up: measure the listing alone
    before = rss_mb(process.pid)
    took = await command(client, "pi.listSessions")
    peak = rss_mb(process.pid, "VmHWM")
    print(f"    pi.listSessions: {took / 1000:.2f} s  (target < 5 s); server RSS {before:.0f} MB "
          f"before, peak {peak:.0f} MB  (target < 300 MB)")
    await stop_server(process, client)
    giant.unlink()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--previews", type=int, default=40)
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--huge-mb", type=int, default=200)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--giant-mb", type=int, default=1024)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pi-lsp-bench-resources-") as scratch:
        asyncio.run(measure_previews(Path(scratch), args.previews))
        asyncio.run(measure_listing(Path(scratch), args.sessions, args.huge_mb, args.calls))
        asyncio.run(measure_giant_line(Path(scratch), args.giant_mb))


if __name__ == "__main__":
    main()
