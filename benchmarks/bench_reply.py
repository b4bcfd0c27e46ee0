"""A model's reply assembled from many small stream deltas, as a provider's reader builds it.

Usage: python benchmarks/bench_reply.py [--megabytes N]
Prints the time to assemble N MB of tool-call arguments, and of text, sent in 16-character
deltas (servers stream a few characters at a time). Both are kept in pieces and joined once
(linear: 0.05 s each at 2 MB); adding each delta to one string copied it whole every time
(quadratic: text took 0.45 s at 0.5 MB, a long reply, and 8 s at 2 MB).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pi_lsp.providers.base import ReplyBuilder  # noqa: E402
from pi_lsp.providers.registry import CHAT_API, ModelInfo, Price  # noqa: E402

DELTA = "x" * 16
MODEL = ModelInfo("local", "model", 200_000, 32_000, Price(0, 0, 0, 0), api=CHAT_API)


def arguments(size: int) -> float:
    reply = ReplyBuilder(CHAT_API, MODEL)
    start = time.perf_counter()
    index = reply.start_tool_call("call_1", "write")
    reply.add_tool_json(index, '{"content": "')
    for _ in range(size // len(DELTA)):
        reply.add_tool_json(index, DELTA)
    reply.add_tool_json(index, '"}')
    reply.end_block(index)
    reply.message()
    return time.perf_counter() - start


def text(size: int) -> float:
    reply = ReplyBuilder(CHAT_API, MODEL)
    start = time.perf_counter()
    index = reply.start_text()
    for _ in range(size // len(DELTA)):
        reply.add_text(index, DELTA)
    reply.message()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=2.0)
    size = int(parser.parse_args().megabytes * 1_000_000)
    print(f"reply of {size / 1e6:g} MB in {len(DELTA)}-character deltas")
    print(f"  tool-call arguments  {arguments(size):7.3f} s")
    print(f"  text                 {text(size):7.3f} s")


if __name__ == "__main__":
    main()
