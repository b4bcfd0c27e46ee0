"""The editors on a long session: a real headless Neovim with the plugin, and the VS Code
extension on its offline stand-in for the VS Code API (as its tests run it), each open the tree
and the chat of a `--entries` session (one long main line, a side branch every 50 entries, as
issue 19's table, compacted to its last 300 entries); then a turn streams a long reply from a
fake server into it while the tree follows.

Prints how long each view took to show and how long the editor's loop stalled (the longest gap
of a timer due every 5 ms, and how many gaps passed 50 ms): a stall is keys that do not answer.

Usage: python benchmarks/bench_editors.py [--entries N] [--pieces N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from bench_session import byte_compiled, make_session  # noqa: E402

from pi_lsp.session.tree import SessionTree  # noqa: E402
from tests.fake_anthropic import FakeAnthropic, text_reply  # noqa: E402
from tests.test_nvim import nvim_binary  # noqa: E402

PIECE_DELAY_S = 0.01
KEPT_ENTRIES = 300
VSCODE = ROOT / "editors" / "vscode"


def neovim(scratch: Path, session: Path, url: str, pieces: int) -> dict[str, Any]:
    """Run the Lua script in a headless Neovim on the session; its figures."""
    env = {
        **os.environ,
        "PI_LSP_PYTHON": sys.executable,
        "PI_LSP_WORKSPACE": str(session.parent.parent.parent),
        "PI_LSP_FAKE_URL": url,
        "PI_LSP_SESSION": str(session),
        "PI_LSP_LAST_PIECE": f"word{pieces - 1}",
        "PI_CODING_AGENT_DIR": str(scratch / "agent"),
        "HOME": str(scratch / "home"),
        "XDG_STATE_HOME": str(scratch / "state"),
    }
    env.pop("ANTHROPIC_API_KEY", None)
    script = ROOT / "benchmarks" / "nvim_long_session.lua"
    result = subprocess.run([nvim_binary(), "--headless", "--clean", "-u", "NONE", "-l",
                             str(script)], cwd=env["PI_LSP_WORKSPACE"], env=env,
                            capture_output=True, text=True, timeout=600, check=False)
    if result.returncode != 0:
        sys.exit(f"the Neovim script failed (exit {result.returncode}):\n{result.stdout}\n"
                 f"{result.stderr}")
    return json.loads(result.stdout.splitlines()[0])


def vscode(scratch: Path, session: Path, pieces: int) -> dict[str, Any]:
    """Build the extension and run the Node script on the session; its figures."""
    if not (VSCODE / "node_modules").is_dir():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=VSCODE, check=True)
    subprocess.run(["npm", "run", "--silent", "build"], cwd=VSCODE, check=True)
    env = {**os.environ, "PI_PYTHON": sys.executable, "PI_LSP_SESSION": str(session),
           "PI_LSP_PIECES": str(pieces), "PI_LSP_PIECE_DELAY_MS": str(PIECE_DELAY_S * 1000),
           "HOME": str(scratch / "home")}
    result = subprocess.run(["node", str(ROOT / "benchmarks" / "vscode_long_session.js")],
                            env=env, capture_output=True, text=True, timeout=900, check=False)
    if result.returncode != 0:
        sys.exit(f"the VS Code script failed (exit {result.returncode}):\n{result.stdout}\n"
                 f"{result.stderr}")
    return json.loads(result.stdout.splitlines()[-1])


def stall_line(figures: dict[str, float]) -> str:
    return (f"longest stall {figures['longest_ms']:.0f} ms, "
            f"{figures['over_50ms']:.0f} stalls over 50 ms")


def turn_lines(figures: dict[str, Any], pieces: int) -> None:
    print(f"  prompt to the first piece      {figures['first_piece_ms']:6.0f} ms "
          f"(the first turn imports the model SDK): {stall_line(figures['waiting'])}")
    print(f"  {pieces} pieces, one every {PIECE_DELAY_S * 1000:.0f} ms, streamed in "
          f"{figures['stream_ms']:.0f} ms: {stall_line(figures['streaming'])}")
    print(f"  after the last piece: the tree showed the reply as its leaf in "
          f"{figures['tree_follow_ms']:.0f} ms, the chat re-read the transcript in "
          f"{figures['chat_reload_ms']:.0f} ms: {stall_line(figures['settling'])}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--pieces", type=int, default=300, help="text deltas of the streamed reply")
    args = parser.parse_args()
    byte_compiled()
    scratch = Path(tempfile.mkdtemp(prefix="pi-lsp-bench-editors-"))
    fake = FakeAnthropic()
    try:
        pristine = scratch / "long.jsonl"  # each editor gets its own copy
        leaf = make_session(pristine, args.entries, branch_every=50, branch_length=10)
        # As a long real session would be: compacted, so the context at the leaf fits the window.
        tree = SessionTree.open(str(pristine))
        kept = tree.path_ids(leaf)[-KEPT_ENTRIES]
        tree.append_compaction("## Goal\nKeep the benchmark honest.", kept, 150_000)
        session = scratch / "ws" / ".pi" / "sessions" / pristine.name
        session.parent.mkdir(parents=True)
        shutil.copyfile(pristine, session)
        print(f"session: {args.entries} entries, {session.stat().st_size / 1e6:.1f} MB; "
              f"load average {os.getloadavg()[0]:.1f}")
        url = fake.start()
        fake.script(text_reply(*(f"word{i} " for i in range(args.pieces)), delay=PIECE_DELAY_S))
        started = time.perf_counter()
        figures = neovim(scratch, session, url, args.pieces)
        print(f"Neovim ({time.perf_counter() - started:.1f} s in all):")
        print(f"  server initialized             {figures['initialize_ms']:6.0f} ms")
        print(f"  tree shown (the path's end)    {figures['tree_ms']:6.0f} ms, "
              f"{figures['tree_lines']} lines")
        print(f"  chat shown (its transcript)    {figures['chat_ms']:6.0f} ms")
        print(f"  while opening both: {stall_line(figures['opening'])}")
        turn_lines(figures, args.pieces)
        started = time.perf_counter()
        figures = vscode(scratch, pristine, args.pieces)
        print(f"VS Code ({time.perf_counter() - started:.1f} s in all):")
        print(f"  activated, the session listed {figures['activate_ms']:6.0f} ms")
        print(f"  Sessions view shows its rows   {figures['view_ms']:6.0f} ms, "
              f"{figures['view_rows']} rows at the top")
        print(f"  chat shown (its transcript)    {figures['chat_ms']:6.0f} ms")
        print(f"  while opening both: {stall_line(figures['opening'])}")
        turn_lines(figures, args.pieces)
    finally:
        fake.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
