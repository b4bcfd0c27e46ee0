"""Sessions move between pi-lsp and the pi CLI in one workspace: the cwd pi-lsp records and the
pi CLI's folder it lists are those pi 1.6 uses, also for a workspace opened through a symlink."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pi_lsp.server.config import Config
from pi_lsp.server.hub import SessionHub
from pi_lsp.session.catalog import cli_session_dir, list_sessions, session_dirs, start_session
from pi_lsp.session.entries import UserMessage
from pi_lsp.session.fork import fork_session
from pi_lsp.session.tree import SessionTree
from tests.test_system_messages import PI16, pi16_node

PI16_INDEX = PI16 / "@earendil-works" / "pi-coding-agent" / "dist" / "index.js"


@pytest.fixture
def linked(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace folder and a symlink to it: the name an editor may open it by."""
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    return real, link


def header_cwd(path: str) -> str:
    with open(path, "rb") as file:
        return str(json.loads(file.readline())["cwd"])


def prompted(tree: SessionTree) -> SessionTree:
    """`tree` with a prompt, so its file is written."""
    tree.append_message(UserMessage(content="hello from the editor", timestamp=1))
    return tree


def written_by_hand(path: Path, cwd: str) -> Path:
    """A session file whose header names `cwd` (as pi-lsp wrote one before it used real
    paths)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [{"type": "session", "version": 3, "id": "0199aaaa-0000-7000-8000-000000000001",
              "timestamp": "2025-01-01T00:00:00.000Z", "cwd": cwd},
             {"type": "message", "id": "aaaa0001", "parentId": None,
              "timestamp": "2025-01-01T00:00:01.000Z",
              "message": {"role": "user", "content": "hi", "timestamp": 1}}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


# -- what pi-lsp records and where it looks ---------------------------------------------------


def test_a_new_session_records_the_real_path(linked: tuple[Path, Path]) -> None:
    real, link = linked
    tree = prompted(start_session(link, "anthropic", "claude-sonnet-4-5", "medium"))
    assert Path(tree.path).parent == link / ".pi" / "sessions"  # the folder as it was named
    assert tree.header.cwd == header_cwd(tree.path) == str(real)


def test_a_session_at_a_given_path_records_the_real_path(linked: tuple[Path, Path]) -> None:
    real, link = linked
    tree = prompted(start_session(link, "anthropic", "claude-sonnet-4-5", "medium",
                                  link / "mine.jsonl"))
    assert header_cwd(tree.path) == str(real)


def test_the_servers_new_session_records_the_real_path(linked: tuple[Path, Path]) -> None:
    real, link = linked
    hub = SessionHub([link], Config())
    path = hub.new_session("named")
    assert hub.held(path).tree.header.cwd == str(real)


def test_a_fork_records_the_real_path(linked: tuple[Path, Path]) -> None:
    real, link = linked
    source = SessionTree.open(str(written_by_hand(link / ".pi" / "sessions" / "a.jsonl",
                                                  str(link))))
    fork = fork_session(source, "aaaa0001")
    assert fork.on_disk and header_cwd(fork.path) == str(real)


def test_a_relocated_session_records_the_real_path(linked: tuple[Path, Path]) -> None:
    real, link = linked
    path = written_by_hand(link / ".pi" / "sessions" / "a.jsonl", str(link))
    tree = SessionTree.open(str(path))
    os.replace(written_by_hand(link / "other.jsonl", str(link)), path)
    tree.append_label("aaaa0001", "kept")  # the file was replaced: the session moves on
    assert tree.path != str(path) and header_cwd(tree.path) == str(real)


def test_a_relative_cwd_is_kept(tmp_path: Path) -> None:
    """pi never writes one; resolving it against pi-lsp's own directory would invent one."""
    assert SessionTree.create(str(tmp_path / "s.jsonl"), "").header.cwd == ""
    assert SessionTree.create(str(tmp_path / "s.jsonl"), "ws").header.cwd == "ws"


def test_the_cli_folder_is_named_after_the_real_path(linked: tuple[Path, Path]) -> None:
    real, link = linked
    assert session_dirs(str(link)) == [link / ".pi" / "sessions", cli_session_dir(str(real))]


def test_sessions_in_the_cli_folder_of_the_real_path_are_listed(
        linked: tuple[Path, Path]) -> None:
    real, link = linked
    session = written_by_hand(cli_session_dir(str(real)) / "cli.jsonl", str(real))
    assert [s.path for s in list_sessions(session_dirs(str(link)))] == [str(session)]


# -- what pi 1.6 makes of it --------------------------------------------------------------------


def pi16(cwd: Path, body: str) -> Any:
    """What a script using pi 1.6's SessionManager prints (JSON), run in `cwd` as `pi` is."""
    node = pi16_node()
    if node is None:
        pytest.skip("pi 1.6 is not installed")
    script = f"const {{ SessionManager }} = await import({json.dumps(str(PI16_INDEX))});\n{body}"
    env = {"PATH": "/usr/bin:/bin", "PI_CODING_AGENT_DIR": os.environ["PI_CODING_AGENT_DIR"]}
    done = subprocess.run([node, "--input-type=module", "-e", script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_pi_continues_finds_and_lists_a_session_started_in_a_symlinked_workspace(
        linked: tuple[Path, Path]) -> None:
    """`pi -c`, `pi --session ID` and `pi -r` there, `.pi/sessions` being pi's `sessionDir`."""
    _real, link = linked
    tree = prompted(start_session(link, "anthropic", "claude-sonnet-4-5", "medium"))
    found = pi16(link, f"""
        const dir = '.pi/sessions';
        const listed = await SessionManager.list(process.cwd(), dir);
        process.stdout.write(JSON.stringify({{
            continued: SessionManager.continueRecent(process.cwd(), dir).getSessionFile(),
            byId: SessionManager.findById(process.cwd(), {json.dumps(tree.header.id)}, dir),
            listed: listed.map((s) => s.path)}}));""")
    name = Path(tree.path).name
    assert Path(found["continued"]).name == Path(found["byId"]).name == name
    assert [Path(p).name for p in found["listed"]] == [name]


def test_pi_continues_a_fork_of_a_session_recorded_through_a_symlink(
        linked: tuple[Path, Path]) -> None:
    _real, link = linked
    source = SessionTree.open(str(written_by_hand(link / ".pi" / "sessions" / "a.jsonl",
                                                  str(link))))
    fork = fork_session(source, "aaaa0001")
    found = pi16(link, "process.stdout.write(JSON.stringify(SessionManager.continueRecent("
                       "process.cwd(), '.pi/sessions').getSessionFile()));")
    assert Path(found).name == Path(fork.path).name


def test_sessions_pi_starts_in_its_default_folder_are_listed(linked: tuple[Path, Path]) -> None:
    """`pi` run in the workspace before pi-lsp set its `sessionDir`."""
    _real, link = linked
    found = pi16(link, """
        const sm = SessionManager.create(process.cwd());
        sm.appendMessage({role: 'user', content: 'from the terminal', timestamp: 1});
        process.stdout.write(JSON.stringify({dir: sm.getSessionDir(),
                                             file: sm.getSessionFile()}));""")
    assert Path(found["dir"]) == session_dirs(str(link))[1]
    assert [s.path for s in list_sessions(session_dirs(str(link)))] == [found["file"]]
