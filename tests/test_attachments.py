"""Code context and diagnostics feedback, without a server: `@path` mentions, the problems
message offered to the model."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pi_lsp.agent.attachments import MENTION_BYTE_LIMIT, Attachment, Range, mentions, render
from pi_lsp.agent.events import ToolExecutionEnd, ToolExecutionStart
from pi_lsp.agent.feedback import (
    PROBLEM_LIMIT,
    EditFeedback,
    FileProblems,
    Position,
    Problem,
    Span,
    problems_message,
)
from pi_lsp.agent.tools import DiskFiles
from pi_lsp.session.entries import ToolResultMessage
from tests.test_system_messages import PI16, pi16_node
from tests.waits import PROCESS_CEILING_S


def test_problems_are_errors_first_and_capped(tmp_path: Path) -> None:
    def problem(line: int, severity: int, message: str) -> Problem:
        return Problem(Span(Position(line, 0), Position(line, 1)), message, severity)

    items = [problem(i, 2, f"warn {i}") for i in range(5)] + \
        [problem(i, 1, f"err {i}") for i in range(PROBLEM_LIMIT)] + [problem(0, 4, "hint")]
    text = problems_message([FileProblems(tmp_path / "a.py", items)], tmp_path)
    assert text is not None
    lines = text.splitlines()
    assert lines[1] == "- a.py:1:1: error: err 0"
    assert len(lines) == 1 + PROBLEM_LIMIT + 1 and lines[-1] == "- … and 5 more"
    assert "hint" not in text and "warn" not in text
    assert problems_message([FileProblems(tmp_path / "a.py", [problem(0, 3, "info")])],
                            tmp_path) is None


def test_mentions_name_workspace_files_only(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.md").write_text("A\n")
    (tmp_path / "secret.txt").write_text("no\n")
    (root / "big.log").write_text("z" * (MENTION_BYTE_LIMIT + 1))
    found = mentions("see @docs/a.md, @docs and @../secret.txt or mail me@docs.md; "
                     "@docs/a.md again, not @big.log", root, DiskFiles()).found
    assert [(a.path, a.text) for a in found] == [((root / "docs" / "a.md").resolve(), "A\n")]


def test_a_mentioned_symlink_loop_stays_text(tmp_path: Path) -> None:
    """Path.resolve raised RuntimeError on it (Python 3.11), failing the whole prompt."""
    (tmp_path / "loop").symlink_to("loop")
    (tmp_path / "a.md").write_text("A\n")
    found = mentions("look at @loop and @a.md", tmp_path, DiskFiles())
    assert [a.path.name for a in found.found] == ["a.md"] and found.refused == []


def test_a_write_to_a_symlink_loop_is_noted_without_raising(tmp_path: Path) -> None:
    (tmp_path / "loop").symlink_to("loop")
    feedback = EditFeedback(tmp_path, None)
    feedback.note(ToolExecutionStart(tool_call_id="1", tool_name="write",
                                     args={"path": "loop", "content": "x"}))
    feedback.note(ToolExecutionEnd(tool_call_id="1", tool_name="write", result=ToolResultMessage(
        tool_call_id="1", tool_name="write", content=[], is_error=True, timestamp=0),
        is_error=True))
    assert feedback._touched == set()


def test_attachments_render_relative_paths_and_cut_long_text(tmp_path: Path) -> None:
    inside = Attachment(path=tmp_path / "src" / "a.py", text="x = 1", range=Range(9, 19),
                        language_id="python")
    assert render(inside, tmp_path) == \
        '<file path="src/a.py" lines="10-20" language="python">\nx = 1\n</file>'
    long = render(Attachment(path=Path("/elsewhere/b.txt"), text="y" * 100_005), tmp_path)
    assert long.startswith('<file path="/elsewhere/b.txt">\n')
    assert long.endswith("\n[cut: 5 more characters]\n</file>")


# What pi 1.6 attaches of a file with a BOM named by an `@file` argument (processFileArguments),
# its path written as a placeholder; checked against pi 1.6 below where it is installed.
STORED_FILE_ARGUMENT = Path(__file__).with_name("fixtures") / "pi16-bom-file-argument.json"
# A file starting with two: pi 1.6 takes one off and keeps the second, the file's text.
STORED_TWO_BOMS = Path(__file__).with_name("fixtures") / "pi16-two-bom-file-argument.json"
PI16_FILE_ARGUMENT = """
const { processFileArguments } = await import(process.argv[1]);
process.stdout.write(JSON.stringify((await processFileArguments([process.argv[2]])).text));
"""


@pytest.mark.parametrize("fixture", [STORED_FILE_ARGUMENT, STORED_TWO_BOMS],
                         ids=["one BOM", "two BOMs"])
def test_a_file_with_a_bom_is_attached_without_it_as_pi_16_attaches_it(
        tmp_path: Path, fixture: Path) -> None:
    """A file sent with a prompt (`@path`, or `context` read from the disk) that starts with a
    UTF-8 BOM reached the model with it, "\\ufeff" first in its `<file>` element; pi 1.6 leaves
    it out of a file it attaches, and an editor shows none."""
    stored = json.loads(fixture.read_text("utf-8"))
    path = tmp_path / "notes.md"
    path.write_bytes(stored["file"].encode())
    attached = stored["attached"].replace("{path}", str(path))
    node = pi16_node()
    if node is not None:
        module = PI16 / "@earendil-works" / "pi-coding-agent" / "dist" / "cli" / "file-processor.js"
        run = subprocess.run([node, "--input-type=module", "-e", PI16_FILE_ARGUMENT,
                              str(module), str(path)],
                             capture_output=True, text=True, timeout=PROCESS_CEILING_S)
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout) == attached
    head, tail = f'<file name="{path}">\n', "\n</file>\n"
    assert attached.startswith(head) and attached.endswith(tail)
    (found,) = mentions("see @notes.md", tmp_path, DiskFiles()).found
    assert render(found, tmp_path) == \
        f'<file path="notes.md">\n{attached[len(head):-len(tail)]}</file>'


def test_text_the_editor_sent_is_rendered_as_sent(tmp_path: Path) -> None:
    """render took a U+FEFF off any text whose range starts at line 0, one the user's text holds
    in a selection the editor sent (which has none of the file's BOM) too; the BOM is taken off
    where pi-lsp reads the file (test_editor), as pi 1.6 takes one off a file it reads."""
    for start in (0, 2):
        sent = Attachment(tmp_path / "a.txt", "\ufeffc", Range(start, start))
        assert render(sent, tmp_path) == \
            f'<file path="a.txt" lines="{start + 1}-{start + 1}">\n\ufeffc\n</file>'
