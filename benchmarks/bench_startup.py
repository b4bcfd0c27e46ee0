"""Start-up: from process start to the `initialize` answer, and `pi-lsp --version`; then the
first reply of a new server.

Usage: python benchmarks/bench_startup.py [--runs N]
Each row is timed N times, the rows interleaved so that all share the machine's load; `node -e 0`
and `python -c pass` are the floors, measured in the same run. Prints the median and the fastest
run per row. The editor shows nothing until `initialize` is answered.
The first reply is `pi.prompt` to the first streamed text from a local fake Anthropic server, in
a new server: cold, and after `pi.prepareTurn` was answered (what both editors ask when a chat
opens, while the user types).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
PYTHON = sys.executable

from bench_server import event_decoder, start_server, stop_server  # noqa: E402
from bench_session import byte_compiled  # noqa: E402

from tests.fake_anthropic import FakeAnthropic, text_reply  # noqa: E402


def frame(message: dict[str, object]) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", **message}).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def time_command(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def time_initialize(workspace: Path, env: dict[str, str]) -> float:
    """Seconds from spawning `pi-lsp serve` to reading its answer to `initialize` (sent at once,
    as an editor does: the server reads it as soon as it is ready)."""
    request = frame({"id": 1, "method": "initialize", "params": {
        "processId": os.getpid(), "rootUri": workspace.as_uri(), "capabilities": {},
        "workspaceFolders": [{"uri": workspace.as_uri(), "name": "ws"}]}})
    started = time.perf_counter()
    process = subprocess.Popen([PYTHON, "-m", "pi_lsp.cli", "serve"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, env=env, cwd=workspace)
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(request)
    process.stdin.flush()
    header = b""
    while not header.endswith(b"\r\n\r\n"):
        byte = process.stdout.read(1)
        if not byte:
            raise RuntimeError("the server ended before answering initialize")
        header += byte
    length = next(int(line.split(b":")[1]) for line in header.split(b"\r\n")
                  if line.lower().startswith(b"content-length"))
    answer = json.loads(process.stdout.read(length))
    elapsed = time.perf_counter() - started
    assert answer.get("id") == 1 and "result" in answer, answer
    process.stdin.close()  # a closed stdin ends the server like `shutdown`
    process.wait(timeout=60)
    return elapsed


async def first_reply(prepared: bool) -> float:
    """Seconds from `pi.prompt` to the first streamed text, in a new server on a new session."""
    with tempfile.TemporaryDirectory(prefix="pi-lsp-bench-") as tmp:
        (Path(tmp) / "ws").mkdir()
        fake = FakeAnthropic()
        client, _started = await start_server(Path(tmp), fake.start())
        fake.script(text_reply("hello", " there"))
        await client.command("pi.newSession")
        uri = event_decoder.decode(client.last)["uri"]
        if prepared:
            await client.command("pi.prepareTurn", uri=uri)
        started = time.perf_counter()
        await client.command("pi.prompt", uri=uri, text="hi")
        while "message_update" not in client.events:
            await asyncio.sleep(0.001)
        elapsed = time.perf_counter() - started
        await stop_server(client)
        fake.stop()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    byte_compiled()
    node = shutil.which("node")
    with tempfile.TemporaryDirectory(prefix="pi-lsp-bench-") as tmp:
        workspace = Path(tmp) / "ws"
        (workspace / ".pi" / "sessions").mkdir(parents=True)
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")},
               "PI_CODING_AGENT_DIR": str(Path(tmp) / "agent")}
        rows: dict[str, Callable[[], float]] = {
            "python -c pass (floor)": lambda: time_command([PYTHON, "-c", "pass"]),
            "pi-lsp --version": lambda: time_command([PYTHON, "-m", "pi_lsp.cli", "--version"]),
            "pi-lsp serve → initialize answered":
                lambda: time_initialize(workspace, env),
        }
        if node is not None:
            rows = {"node -e 0 (floor)": lambda: time_command([node, "-e", "0"]), **rows}
        else:
            print("node is not on PATH: no node floor", file=sys.stderr)
        times: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(runs):
            for name, measure in rows.items():
                times[name].append(measure())
    replies: dict[str, list[float]] = {"first reply, cold": [],
                                       "first reply after pi.prepareTurn": []}
    for _ in range(max(3, runs // 3)):
        for name, values in replies.items():
            values.append(asyncio.run(first_reply(prepared=name != "first reply, cold")))
    print(f"start-up, {runs} runs each (load average {os.getloadavg()[0]:.1f})")
    for name, values in {**times, **replies}.items():
        print(f"  {name:38} median {statistics.median(values) * 1000:6.0f} ms   "
              f"fastest {min(values) * 1000:6.0f} ms")


if __name__ == "__main__":
    main()
