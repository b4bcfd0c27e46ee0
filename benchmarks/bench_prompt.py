"""The system prompt's build (context files, SYSTEM.md, skills), as every turn and preview runs it.

Usage: python benchmarks/bench_prompt.py [--counts 10,100,1000] [--repeats N]
Prints, for a trusted project with N skills (half in its `.pi/skills`, half in your agent
folder's) and a context file in each folder above it, the first build and the median of the
repeated builds that follow, nothing having changed between them. The files are planted more
than SETTLED_NS before (skills are rarely written the second before a turn): one changed more
recently is parsed again at each build.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pi_lsp.agent.prompt import system_sections  # noqa: E402
from pi_lsp.agent.skills import SETTLED_NS  # noqa: E402
from pi_lsp.agent.tools import ALL_TOOLS  # noqa: E402


def plant(base: Path, skills: int) -> Path:
    """A trusted-looking project under `base` with `skills` skills, half of them yours."""
    project = base / "a" / "b" / "project"
    agent = base / "agent"
    for folder in (base / "a", base / "a" / "b", project, agent):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "AGENTS.md").write_text(f"Notes of {folder.name}.\n" * 20)
    (project / ".gitignore").write_text("node_modules\n")
    for index in range(skills):
        top = project / ".pi" / "skills" if index % 2 else agent / "skills"
        folder = top / f"skill-{index:04d}"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: skill-{index:04d}\ndescription: Does task number {index} when asked, "
            f"with care.\nlicense: MIT\n---\n\n# Skill {index}\n\n" + "Step.\n" * 50)
    os.environ["PI_CODING_AGENT_DIR"] = str(agent)
    return project


def timed(project: Path) -> float:
    start = time.perf_counter()
    system_sections(project, ALL_TOOLS, trusted=True)
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="10,100,1000")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    print(f"{'skills':>7} {'first build':>12} {'repeated (median)':>18}")
    for count in (int(text) for text in args.counts.split(",")):
        with tempfile.TemporaryDirectory() as temp:
            project = plant(Path(temp), count)
            time.sleep(SETTLED_NS / 1e9)
            first = timed(project)
            repeated = statistics.median(timed(project) for _ in range(args.repeats))
            print(f"{count:>7} {first:>10.1f} ms {repeated:>15.2f} ms")


if __name__ == "__main__":
    main()
