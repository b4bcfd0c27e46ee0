"""Speed and memory of the session core on a 100,000-entry session, against pi when available.

Usage: python benchmarks/bench_session.py [--entries N] [--install-pi]
Prints figures; with Node and pi's npm package present it also runs pi on the same file
(open + buildSessionContext + JSON output) and prints the ratios.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pi_lsp.context.build import build_session_context
from pi_lsp.session.appender import append_lines
from pi_lsp.session.entries import (
    AssistantMessage,
    MessageEntry,
    ModelChangeEntry,
    SessionHeader,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    encoder,
)
from pi_lsp.session.tree import SessionTree

HERE = Path(__file__).resolve().parent
PI_VERSION = "0.73.1"
PI_PACKAGE = "@mariozechner/pi-coding-agent"
WORDS = ("pool", "deadlock", "ORM", "refactor", "连接池", "tests", "🙂", "layer", "query", "index")


def words(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(count))


def make_session(path: Path, entries: int, seed: int = 7, branch_every: int = 5000,
                 branch_length: int = 200) -> str:
    """A long main line with a side branch every `branch_every` entries (`branch_length` long,
    off an earlier point of the main line); returns the leaf id."""
    rng = random.Random(seed)
    lines = [encoder.encode(SessionHeader(version=3, id="bench", timestamp=iso(0), cwd="/w"))]
    parent: str | None = None
    main_tip: str | None = None
    fork_points: list[str] = []
    for index in range(entries):
        entry_id = f"{index:08x}"
        stamp = iso(index)
        on_side_branch = index > branch_every and index % branch_every < branch_length
        if on_side_branch and index % branch_every == 0:
            parent = rng.choice(fork_points)
        elif index > branch_every and index % branch_every == branch_length:
            parent = main_tip
        kind = index % 4
        if index % 997 == 0:
            entry: object = ModelChangeEntry(id=entry_id, parent_id=parent, timestamp=stamp,
                                             provider="anthropic", model_id="claude-sonnet-4-5")
        elif kind == 0:
            entry = MessageEntry(id=entry_id, parent_id=parent, timestamp=stamp,
                                 message=UserMessage(content=words(rng, 60), timestamp=index))
        elif kind in (1, 3):
            entry = MessageEntry(id=entry_id, parent_id=parent, timestamp=stamp,
                                 message=AssistantMessage(
                content=[TextContent(text=words(rng, 50)),
                         ToolCall(id=f"t{index}", name="read", arguments={"path": "src/db.py"})],
                api="anthropic-messages", provider="anthropic", model="claude-sonnet-4-5",
                usage=Usage(input=1000, output=200, total_tokens=1200), stop_reason="toolUse",
                timestamp=index))
        else:
            entry = MessageEntry(id=entry_id, parent_id=parent, timestamp=stamp,
                                 message=ToolResultMessage(
                tool_call_id=f"t{index - 1}", tool_name="read",
                content=[TextContent(text=words(rng, 70))], is_error=False, timestamp=index))
        lines.append(encoder.encode(entry))
        if not on_side_branch:
            main_tip = entry_id
            if index % max(1, branch_every // 5) == 0:
                fork_points.append(entry_id)
        parent = entry_id
    path.write_bytes(b"\n".join(lines) + b"\n")
    assert parent == main_tip
    return parent or ""


def byte_compiled() -> None:
    """pi-lsp's modules compiled as `pip install` compiles them, so a server or CLI started here
    starts as an installed one does. (A checkout run under PYTHONDONTWRITEBYTECODE compiles
    every module from source at each start: 0.1 s of a 0.5 s server start here.)"""
    compileall.compile_dir(HERE.parent / "pi_lsp", quiet=1)


def iso(index: int) -> str:
    seconds, millis = divmod(index, 1000)
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"2026-12-01T{hours:02d}:{minutes:02d}:{seconds:02d}.{millis:03d}Z"


def best_of(runs: int, action: Callable[[], object]) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times)


# A small launcher forks the measured command, so the child's peak RSS does not start from
# this (large) benchmark process's pages.
LAUNCHER = """
import os, subprocess, sys, time
start = time.perf_counter()
with open(os.devnull, "wb") as sink:
    code = subprocess.run(sys.argv[1:], stdout=sink).returncode
elapsed = time.perf_counter() - start
import resource
print(code, elapsed, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def run_measured(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one child process, its output discarded."""
    result = subprocess.run([sys.executable, "-c", LAUNCHER, *command], env=env,
                            capture_output=True, text=True, check=True)
    code, elapsed, max_rss_kb = result.stdout.split()
    if code != "0":
        raise RuntimeError(f"{command[0]} failed with exit code {code}")
    return float(elapsed), int(max_rss_kb) / 1024


def median_run(command: list[str], runs: int, env: dict[str, str] | None = None
               ) -> tuple[float, float]:
    results = [run_measured(command, env) for _ in range(runs)]
    return statistics.median(r[0] for r in results), max(r[1] for r in results)


def pi_modules(install: bool, scratch: Path) -> Path | None:
    configured = os.environ.get("PI_NODE_MODULES")
    if configured:
        return Path(configured)
    if shutil.which("node") is None:
        return None
    prefix = HERE / "out" / "pi-node"
    modules = prefix / "node_modules"
    if (modules / PI_PACKAGE).is_dir():
        return modules
    if not install or shutil.which("npm") is None:
        return None
    subprocess.run(
        ["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--no-progress",
         "--loglevel=error", f"{PI_PACKAGE}@{PI_VERSION}"],
        check=True, stdin=subprocess.DEVNULL,
    )
    return modules


def pi_label(modules: Path) -> str:
    """The package pi_context.mjs runs (PI_PACKAGE picks pi 1.6's), with its version."""
    package = os.environ.get("PI_PACKAGE", PI_PACKAGE)
    try:
        version = json.loads((modules / package / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        version = "(version unknown)"
    return f"{package} {version}"


def depth_scaling(directory: Path) -> list[tuple[int, float]]:
    """Context build time at growing depths: O(depth) shows as a constant time per entry."""
    figures = []
    for depth in (10_000, 40_000, 160_000):
        path = directory / f"depth-{depth}.jsonl"
        leaf = make_session(path, depth, seed=depth)
        tree = SessionTree.open(str(path))
        seconds = best_of(3, lambda tree=tree, leaf=leaf: build_session_context(tree, leaf))
        figures.append((depth, seconds))
        path.unlink()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--install-pi", action="store_true",
                        help=f"npm install {PI_PACKAGE}@{PI_VERSION} under benchmarks/out")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="pi-lsp-bench-"))
    try:
        report(scratch, args.entries, args.install_pi)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def report(scratch: Path, entries: int, install_pi: bool) -> None:
    path = scratch / "big.jsonl"
    leaf = make_session(path, entries)
    size_mb = path.stat().st_size / 1e6
    print(f"session: {entries} entries, {size_mb:.1f} MB, leaf {leaf}")

    open_build = best_of(3, lambda: build_session_context(SessionTree.open(str(path)), leaf))
    print(f"open + build context at leaf (in process, best of 3): {open_build * 1000:.0f} ms")

    cli = [sys.executable, "-m", "pi_lsp.cli", "context", str(path), "--json"]
    ours_s, ours_mb = median_run(cli, 5)
    print(f"`pi-lsp context FILE --json` whole process (median of 5): {ours_s * 1000:.0f} ms, "
          f"peak RSS {ours_mb:.0f} MB")

    tree = SessionTree.open(str(path))
    append_s = best_of(20, lambda: tree.append_custom("bench", {"n": 1}))
    print(f"one append (write + fsync-free tail of it), best of 20: {append_s * 1e6:.0f} µs")

    line = encoder.encode(ModelChangeEntry(id="ffffffff", parent_id=tree.leaf_id,
                                           timestamp=iso(1), provider="p", model_id="m"))
    append_lines(str(path), [line])
    start = time.perf_counter()
    refreshed = tree.refresh()
    tail_s = time.perf_counter() - start
    assert refreshed.added == 1 and not refreshed.reloaded
    print(f"tail one entry appended by another writer: {tail_s * 1e6:.0f} µs "
          f"(reads {len(line) + 1} bytes of {path.stat().st_size})")

    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process (generator + trees): {peak_mb:.0f} MB")

    for depth, seconds in depth_scaling(scratch):
        print(f"build context at depth {depth:>7}: {seconds * 1000:7.1f} ms "
              f"({seconds / depth * 1e6:.2f} µs/entry)")

    modules = pi_modules(install_pi, scratch)
    if modules is None:
        print("pi: not run (no Node or no pi package; --install-pi or PI_NODE_MODULES=...)")
        return
    env = {**os.environ, "PI_NODE_MODULES": str(modules)}
    pi_path = scratch / "pi-copy.jsonl"  # pi may rewrite what it opens; give it a copy
    shutil.copy(path, pi_path)
    pi_cmd = ["node", str(HERE / "pi_context.mjs"), str(pi_path)]
    pi_s, pi_mb = median_run(pi_cmd, 3, env)
    ours_s, ours_mb = median_run([*cli[:-2], str(pi_path), "--json"], 3)
    print(f"{pi_label(modules)} open + buildSessionContext + JSON (median of 3): "
          f"{pi_s * 1000:.0f} ms, peak RSS {pi_mb:.0f} MB")
    print(f"ratio time  pi-lsp / pi: {ours_s / pi_s:.3f}  (target <= 0.2)")
    print(f"ratio memory pi-lsp / pi: {ours_mb / pi_mb:.3f}  (target <= 0.5)")


if __name__ == "__main__":
    main()
