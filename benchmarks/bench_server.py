"""Request latency of `pi.getTree` and `pi.previewContext` on a large session while a turn streams.

Usage: python benchmarks/bench_server.py [--entries N] [--requests N]
Prints p50/p95 per command; the target is p95 under 50 ms.
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

import msgspec

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from bench_session import make_session  # noqa: E402

from pi_lsp.session.tree import SessionTree  # noqa: E402
from tests.fake_anthropic import FakeAnthropic, text_reply  # noqa: E402

KEPT_ENTRIES = 300


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


class Reply(msgspec.Struct):
    """A message's frame: the result is received in full but not turned into Python objects,
    so the figures are the server's and the pipe's, not a Python client's dict building
    (an editor parses with C or JavaScript)."""

    id: int | None = None
    method: str | None = None
    params: msgspec.Raw = msgspec.Raw(b"null")  # msgspec cannot make Raw optional
    error: dict[str, Any] | None = None


reply_decoder = msgspec.json.Decoder(Reply)
event_decoder = msgspec.json.Decoder(dict[str, Any])


class RawClient:
    """A minimal JSON-RPC client over stdio."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.events: list[str] = []
        self.next_id = 0
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        while True:
            header = await stream.readuntil(b"\r\n\r\n")
            length = next(int(line.split(b":")[1]) for line in header.split(b"\r\n")
                          if line.lower().startswith(b"content-length"))
            message = reply_decoder.decode(await stream.readexactly(length))
            if message.id is not None and message.method is None:
                self.pending.pop(message.id).set_result(message)
            elif message.method == "pi/turn":
                self.events.append(event_decoder.decode(message.params)["event"]["type"])

    def send(self, message: dict[str, Any]) -> None:
        body = msgspec.json.encode({"jsonrpc": "2.0", **message})
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    async def request(self, method: str, params: Any) -> None:
        self.next_id += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = future
        self.send({"id": self.next_id, "method": method, "params": params})
        reply: Reply = await asyncio.wait_for(future, 60)
        if reply.error is not None:
            raise RuntimeError(reply.error["message"])


async def measure(entries: int, requests: int) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="pi-lsp-bench-server-"))
    sessions = scratch / "ws" / ".pi" / "sessions"
    sessions.mkdir(parents=True)
    session = sessions / "big.jsonl"
    leaf = make_session(session, entries)
    # As a long real session would be: compacted, so the context at the leaf fits the window.
    tree = SessionTree.open(str(session))
    kept = tree.path_ids(leaf)[-KEPT_ENTRIES]
    tree.append_compaction("## Goal\nKeep the benchmark honest.", kept, 150_000)
    print(f"session: {len(tree.records)} entries, {session.stat().st_size / 1e6:.1f} MB, "
          f"context at the leaf: {KEPT_ENTRIES} kept entries after a compaction")

    fake = FakeAnthropic()
    url = fake.start()
    fake.script(text_reply(*(f"word{i} " for i in range(600)), delay=0.01))
    env = {**os.environ, "PI_CODING_AGENT_DIR": str(scratch / "agent")}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pi_lsp.cli", "serve", env=env, limit=64 << 20,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    client = RawClient(process)
    await client.request("initialize", {
        "processId": os.getpid(), "capabilities": {},
        "workspaceFolders": [{"uri": (scratch / "ws").as_uri(), "name": "ws"}],
        "initializationOptions": {"anthropicBaseUrl": url, "anthropicApiKey": "bench",
                                  "toolApproval": "auto", "autoCompaction": False},
    })
    client.send({"method": "initialized", "params": {}})
    uri = session.as_uri()

    async def call(name: str, **args: Any) -> float:
        start = time.perf_counter()
        await client.request("workspace/executeCommand",
                             {"command": name, "arguments": [{"uri": uri, **args}]})
        return (time.perf_counter() - start) * 1000

    first_tree = await call("pi.getTree")
    first_preview = await call("pi.previewContext")
    print(f"first pi.getTree (opens the file): {first_tree:.0f} ms; "
          f"first pi.previewContext: {first_preview:.0f} ms")

    await call("pi.prompt", text="stream something long")
    while "message_update" not in client.events:
        await asyncio.sleep(0.01)
    timings: dict[str, list[float]] = {"pi.getTree": [], "pi.previewContext": []}
    for _ in range(requests):
        for name, values in timings.items():
            values.append(await call(name))
    streaming = "agent_end" not in client.events
    for name, values in timings.items():
        print(f"{name:<18} while a turn streams: p50 {statistics.median(values):6.1f} ms, "
              f"p95 {percentile(values, 0.95):6.1f} ms  (target p95 < 50 ms)")
    print(f"the turn was still streaming at the end of the measurement: {streaming}; "
          f"pi/turn notifications so far: {len(client.events)}")
    await client.request("shutdown", None)
    client.send({"method": "exit"})
    await asyncio.wait_for(process.wait(), 5)
    client.reader.cancel()
    fake.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=20_000)
    parser.add_argument("--requests", type=int, default=40)
    args = parser.parse_args()
    asyncio.run(measure(args.entries, args.requests))


if __name__ == "__main__":
    main()
