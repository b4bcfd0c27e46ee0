"""Sessions move between pi-lsp and the pi CLI in one workspace: the cwd pi-lsp records and the
pi CLI's folders it lists are those pi 1.6 uses, also for a workspace opened through a symlink
and with $PI_CODING_AGENT_SESSION_DIR set."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pi_lsp.agent.access import protected_reason
from pi_lsp.server.config import Config
from pi_lsp.server.hub import SessionHub
from pi_lsp.session.catalog import (
    SessionDirError,
    cli_session_dir,
    continuable,
    list_sessions,
    pi_path,
    session_dirs,
    start_session,
)
from pi_lsp.session.entries import UserMessage
from pi_lsp.session.fork import fork_session
from pi_lsp.session.tree import SessionTree
from tests.test_catalog import write, write_odd_activity
from tests.test_system_messages import PI16, pi16_node
from tests.waits import PROCESS_CEILING_S, run_cli

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


def written_by_hand(path: Path, cwd: Any, session_id: str = "0199aaaa-0000-7000-8000-000000000001"
                    ) -> Path:
    """A session file whose header names `cwd` (as pi-lsp wrote one before it used real
    paths)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [{"type": "session", "version": 3, "id": session_id,
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


@pytest.mark.parametrize(("cwd", "recorded"), [(5, ""), (None, ""), ("", ""), ("rel", "rel")])
def test_a_fork_of_a_session_with_no_cwd_records_the_one_it_runs_in(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cwd: Any, recorded: str) -> None:
    """A fork of a session whose header cwd was not text (or empty) recorded "" (a relative one
    as it was); pi 1.6's createBranchedSession records its own cwd, the source's resolved
    from it: pi.fork the session's workspace folder, `pi-lsp fork` its current directory."""
    folder, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    elsewhere.mkdir()
    path = written_by_hand(folder / ".pi" / "sessions" / "a.jsonl", cwd)
    monkeypatch.chdir(elsewhere)
    hub = SessionHub([folder], Config())
    assert header_cwd(str(hub.fork(path, "aaaa0001"))) == str(folder / recorded)
    fork = fork_session(SessionTree.open(str(path)), "aaaa0001")
    assert header_cwd(fork.path) == str(elsewhere / recorded)


@pytest.mark.parametrize("id_field", ["", '"id":"",'])
def test_the_servers_fork_at_an_id_less_leaf_says_so(tmp_path: Path, id_field: str) -> None:
    """pi.fork with no leaf on a session whose last line has no id said "the session is
    empty" (the command line said why already); with the id "" it forked, where pi 1.6 finds
    no path (tests/test_cli.py PI16_EMPTY_ID_FORK)."""
    folder = tmp_path / "project"
    path = written_by_hand(folder / ".pi" / "sessions" / "a.jsonl", str(folder))
    with path.open("a", encoding="utf-8") as handle:
        handle.write('{"type":"custom",' + id_field + '"customType":"note",'
                     '"parentId":"aaaa0001"}\n')
    with pytest.raises(ValueError, match=r"the leaf \(line \d+\) has no id"):
        SessionHub([folder], Config()).fork(path, None)


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


# The folder pi's main.js gives SessionManager: `--session-dir` (pi-lsp passes none), else the
# variable, else the `sessionDir` setting (a project's read before trust; None: pi's default).
PI_SESSION_DIR = f"""
    const {{ ENV_SESSION_DIR, expandTildePath, getAgentDir }} = await import(
        {json.dumps(str(PI16_INDEX.parent / "config.js"))});
    const {{ SettingsManager }} = await import({json.dumps(str(PI16_INDEX))});
    const envDir = process.env[ENV_SESSION_DIR];
    const dir = (envDir ? expandTildePath(envDir) : undefined) ??
        SettingsManager.create(process.cwd(), getAgentDir()).getSessionDir();
"""


def pi16(cwd: Path, body: str, **env: str) -> Any:
    """What a script using pi 1.6's SessionManager prints (JSON), run in `cwd` as `pi` is."""
    node = pi16_node()
    if node is None:
        pytest.skip("pi 1.6 is not installed")
    script = f"const {{ SessionManager }} = await import({json.dumps(str(PI16_INDEX))});\n{body}"
    env = {"PATH": "/usr/bin:/bin", "PI_CODING_AGENT_DIR": os.environ["PI_CODING_AGENT_DIR"],
           **env}
    done = subprocess.run([node, "--input-type=module", "-e", script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=PROCESS_CEILING_S)
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


# -- $PI_CODING_AGENT_SESSION_DIR -----------------------------------------------------------------

CWDS = {"here": "{real}", "through the link": "{link}", "relative": ".", "from home": "~/real",
        "another project": "{other}", "none": "", "lexically": "{real}/sub/.."}


@pytest.fixture
def shared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """pi's shared session folder, set in the environment, and the home folder as `tmp_path`."""
    monkeypatch.setenv("HOME", str(tmp_path))
    directory = tmp_path / "pi-sessions"
    monkeypatch.setenv("PI_CODING_AGENT_SESSION_DIR", str(directory))
    return directory


def one_per_cwd(directory: Path, real: Path, link: Path) -> dict[str, Path]:
    """A session in `directory` for each of CWDS."""
    other = real.parent / "other"
    return {name: written_by_hand(directory / f"{name.replace(' ', '-')}.jsonl",
                                  cwd.format(real=real, link=link, other=other),
                                  f"0199aaaa-0000-7000-8000-00000000000{n}")
            for n, (name, cwd) in enumerate(CWDS.items())}


def listed(workspace: Path) -> set[str]:
    return {s.path for s in SessionHub([workspace], Config()).list_sessions()}


def test_the_shared_folder_is_one_of_the_session_folders(shared: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    ws = tmp_path / "ws"
    assert session_dirs(str(ws))[2:] == [shared]
    monkeypatch.setenv("PI_CODING_AGENT_SESSION_DIR", "sessions")  # pi takes it from its cwd
    assert session_dirs(str(ws))[2:] == [ws / "sessions"]
    monkeypatch.setenv("PI_CODING_AGENT_SESSION_DIR", str(ws / ".pi" / "sessions"))
    assert len(session_dirs(str(ws))) == 2  # listed once
    monkeypatch.setenv("PI_CODING_AGENT_SESSION_DIR", "")  # pi ignores it empty
    assert len(session_dirs(str(ws))) == 2


@pytest.mark.parametrize(("value", "resolved"), [
    ("~", "{home}"), ("~/s", "{home}/s"), ("~s", "{base}/~s"), ("s/../t", "{base}/t"),
    ("/a//b/", "/a/b"), ("file:///a%20b/c", "/a b/c")])
def test_paths_are_resolved_as_pi_resolves_them(shared: Path, tmp_path: Path, value: str,
                                                resolved: str) -> None:
    base = str(tmp_path / "ws")
    assert pi_path(value, base) == resolved.format(home=tmp_path, base=base)


def test_the_shared_folders_sessions_of_the_workspace_are_listed(
        shared: Path, linked: tuple[Path, Path]) -> None:
    real, link = linked
    sessions = one_per_cwd(shared, real, link)
    mine = {str(sessions[name]) for name in ("here", "relative", "from home", "lexically")}
    assert listed(real) == listed(link) == mine
    assert set(map(str, sessions.values())) - mine  # others are in the folder, not listed
    done = run_cli("sessions", str(link), "--json")  # the variable inherited
    assert done.returncode == 0, done.stderr
    assert {s["path"] for s in json.loads(done.stdout)["sessions"]} == mine


def test_the_workspaces_own_folders_are_not_filtered(shared: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """pi does not filter its default folder; pi-lsp lists all of `.pi/sessions/`."""
    ws = tmp_path / "ws"
    ws.mkdir()
    own = written_by_hand(ws / ".pi" / "sessions" / "a.jsonl", "/elsewhere")
    monkeypatch.setenv("PI_CODING_AGENT_SESSION_DIR", str(ws / ".pi" / "sessions"))
    assert listed(ws) == {str(own)}
    cli = written_by_hand(cli_session_dir(str(ws)) / "b.jsonl", "/elsewhere")
    monkeypatch.setenv("PI_CODING_AGENT_SESSION_DIR", str(cli.parent))
    assert listed(ws) == {str(own), str(cli)}


def test_a_session_in_the_shared_folder_belongs_to_the_folder_it_names(
        shared: Path, tmp_path: Path) -> None:
    first, second = tmp_path / "first-with-a-longer-name", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    session = written_by_hand(shared / "s.jsonl", str(second))
    hub = SessionHub([first, second], Config())
    assert [s.path for s in hub.list_sessions()] == [str(session)]
    assert hub.folder_of(session) == second  # not the deepest folder holding the shared one


def test_a_new_session_runs_its_tools_in_the_folder_it_was_started_in(
        shared: Path, tmp_path: Path) -> None:
    """Before its first prompt a new session in the shared folder has no file to read the header
    from: it was taken for the folder with the longest name, and its tools wrote there."""
    first, second = tmp_path / "first-with-a-longer-name", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    hub = SessionHub([first, second], Config(workspace_trusted=True))
    path = hub.new_session(None, second)
    assert path.parent == shared and not path.exists()
    assert hub.folder_of(path) == second
    assert hub.harness(path).root == second
    forked = hub.fork(path, None)  # not written either: its header names the folder
    assert not forked.exists() and hub.folder_of(forked) == second


@pytest.mark.parametrize("started", ["inner", "outer"])
def test_a_new_session_in_nested_folders_keeps_the_folder_it_was_started_in(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, started: str) -> None:
    """With the shared folder inside one of two nested folders, only the deepest folder holding
    it could own a session there: one started in the other ran its tools in, and was listed
    for, the wrong folder (found in review)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    outer = tmp_path / "outer"
    inner = outer / "inner"
    inner.mkdir(parents=True)
    # The shared folder lies in the folder the session is not started in.
    holder = outer if started == "inner" else inner
    monkeypatch.setenv("PI_CODING_AGENT_SESSION_DIR", str(holder / ".shared-sessions"))
    folder = inner if started == "inner" else outer
    hub = SessionHub([outer, inner], Config(workspace_trusted=True))
    path = hub.new_session(None, folder)
    assert hub.folder_of(path) == folder and hub.harness(path).root == folder
    prompted(hub.held(path).tree)  # its file is written
    forked = hub.fork(path, None)
    hub.open.clear()  # closed as unused: what was read from the file decides no more
    assert hub.folder_of(path) == hub.folder_of(forked) == folder
    assert {s.path for s in hub.list_sessions()} == {str(path), str(forked)}


def test_a_shared_session_started_in_no_folder_goes_to_the_first(
        shared: Path, tmp_path: Path) -> None:
    """One started elsewhere (opened by its path) was taken for the folder with the longest
    name, since every folder lists the shared one; it is the first, where new ones go."""
    second, first = tmp_path / "second-with-a-longer-name", tmp_path / "first"
    first.mkdir()
    second.mkdir()
    session = written_by_hand(shared / "s.jsonl", str(tmp_path / "elsewhere"))
    assert SessionHub([first, second], Config()).folder_of(session) == first


def test_a_relative_shared_folder_that_leads_out_is_not_followed(
        shared: Path, linked: tuple[Path, Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The variable is the user's; a repository's symlink where it points is not."""
    real, _link = linked
    elsewhere = tmp_path / "elsewhere"
    written_by_hand(elsewhere / "s.jsonl", str(real))
    (real / "sessions").symlink_to(elsewhere)
    monkeypatch.setenv("PI_CODING_AGENT_SESSION_DIR", "sessions")
    assert listed(real) == listed(_link) == set()


def test_a_relative_shared_folder_is_taken_from_the_real_path(
        shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pi resolves it from process.cwd(), the workspace's real path: with `..` and the workspace
    opened through a symlink in another folder, pi-lsp started and listed sessions elsewhere."""
    real, link = tmp_path / "b" / "real", tmp_path / "a" / "link"
    real.mkdir(parents=True)
    link.parent.mkdir()
    link.symlink_to(real)
    monkeypatch.setenv("PI_CODING_AGENT_SESSION_DIR", "../shared")
    tree = prompted(start_session(link, "anthropic", "claude-sonnet-4-5", "off"))
    assert Path(tree.path).parent == tmp_path / "b" / "shared"
    assert listed(link) == {tree.path}
    found = pi_continues(link, HOME=os.environ["HOME"], PI_CODING_AGENT_SESSION_DIR="../shared")
    assert os.path.normpath(real / found["continued"]) == tree.path


def test_the_tools_do_not_write_the_shared_folder(shared: Path, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    assert protected_reason(shared / "s.jsonl", ws) is not None


def test_a_new_session_starts_in_the_shared_folder(shared: Path, linked: tuple[Path, Path]
                                                  ) -> None:
    """pi-lsp started it in `.pi/sessions` (and only warned) while pi, taking the variable over
    any `sessionDir`, looked in the shared folder: `pi -c` never continued the editor's session."""
    real, link = linked
    tree = prompted(start_session(link, "anthropic", "claude-sonnet-4-5", "off"))
    assert Path(tree.path).parent == shared and header_cwd(tree.path) == str(real)
    assert not (real / ".pi").exists()  # no `sessionDir` written: pi would not read it
    another = written_by_hand(shared / "another.jsonl", str(real.parent / "other"))
    assert listed(link) == {tree.path} and str(another) not in listed(link)
    assert [s.path for s in continuable(link)] == [tree.path]  # what `pi-lsp run` continues


def test_a_new_session_never_follows_a_relative_shared_folder_out(
        shared: Path, linked: tuple[Path, Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The variable is the user's; a repository's symlink where it points is not written
    through, as it is not listed."""
    real, _link = linked
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (real / "sessions").symlink_to(elsewhere)
    monkeypatch.setenv("PI_CODING_AGENT_SESSION_DIR", "sessions")
    with pytest.raises(SessionDirError, match="outside the workspace; pi-lsp does not follow"):
        start_session(real, "anthropic", "claude-sonnet-4-5", "off")
    assert list(elsewhere.iterdir()) == []


def test_pi_lists_in_the_shared_folder_what_pi_lsp_lists(
        shared: Path, linked: tuple[Path, Path]) -> None:
    """pi's own choice and filter (main.js: `--session-dir`, else the variable, else the
    setting; SessionManager.list filters a folder other than its default by cwd)."""
    real, link = linked
    one_per_cwd(shared, real, link)
    config = PI16_INDEX.parent / "config.js"
    found = pi16(link, f"""
        const {{ ENV_SESSION_DIR, expandTildePath }} = await import({json.dumps(str(config))});
        const dir = expandTildePath(process.env[ENV_SESSION_DIR]);
        const listed = await SessionManager.list(process.cwd(), dir);
        process.stdout.write(JSON.stringify(listed.map((s) => s.path)));""",
                 HOME=os.environ["HOME"], PI_CODING_AGENT_SESSION_DIR=str(shared))
    assert set(found) == listed(link) != set()


@pytest.mark.parametrize("variable", ["sessions", "ABSOLUTE"])
def test_a_session_committed_in_one_folder_never_claims_another(
        shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    """A shared folder inside a workspace folder (a relative variable is each project's own,
    or an absolute one that lies in a clone) holds that folder's sessions: a committed header
    naming the user's trusted folder must not run its tools there (found in review)."""
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    mine, repo = tmp_path / "mine", tmp_path / "cloned-repo"
    mine.mkdir()
    repo.mkdir()
    monkeypatch.setenv("PI_CODING_AGENT_SESSION_DIR",
                       str(repo / "sessions") if variable == "ABSOLUTE" else variable)
    for cwd, listed in ((".", True), (str(mine), False)):  # pi in the clone lists the first
        committed = written_by_hand(repo / "sessions" / "evil.jsonl", cwd)
        hub = SessionHub([mine, repo], Config())
        assert (str(committed) in [s.path for s in hub.list_sessions()]) is listed
        assert hub.folder_of(committed) == repo, cwd  # its root, settings and trust


def test_a_shared_folder_in_the_home_workspace_lists_only_its_sessions(
        shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """~/pi-sessions with ~ open lists the sessions started in ~, as pi run there does, not
    every project's (found in review of the fix above)."""
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "agent"))
    project = tmp_path / "project"
    project.mkdir()
    written_by_hand(shared / "p.jsonl", str(project))  # another project's
    mine = written_by_hand(shared / "h.jsonl", str(tmp_path),
                           "0199aaaa-0000-7000-8000-000000000002")
    hub = SessionHub([tmp_path], Config())  # `shared` lies in the home folder, tmp_path
    assert [s.path for s in hub.list_sessions()] == [str(mine)]
    assert hub.folder_of(mine) == tmp_path


def test_with_no_folder_a_listed_shared_session_runs_in_the_servers_cwd(
        shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An editor window with no folder lists the sessions of the server's cwd: one of them in
    pi's shared folder is that folder's, not the shared folder's (found in review)."""
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    session = written_by_hand(shared / "s.jsonl", str(project))
    hub = SessionHub([], Config())
    assert [s.path for s in hub.list_sessions()] == [str(session)]
    assert hub.folder_of(session) == project


def pi_continues(cwd: Path, **env: str) -> Any:
    """The session files `pi -c`, `pi -r` (this folder's list) and pi's `--session ID` for the
    newest of them find, run in `cwd` with `env`, as main.js chooses its folder."""
    return pi16(cwd, PI_SESSION_DIR + """
        const listed = await SessionManager.list(process.cwd(), dir);
        const continued = SessionManager.continueRecent(process.cwd(), dir).getSessionFile();
        const id = listed.length ? listed[0].id : "none";
        process.stdout.write(JSON.stringify({continued, listed: listed.map((s) => s.path),
            byId: SessionManager.findById(process.cwd(), id, dir) ?? null}));""", **env)


def test_pi_continues_the_session_pi_lsp_starts_in_the_shared_folder(
        shared: Path, linked: tuple[Path, Path]) -> None:
    real, link = linked
    tree = prompted(start_session(link, "anthropic", "claude-sonnet-4-5", "off"))
    written_by_hand(shared / "another.jsonl", str(real.parent / "other"))  # newer, not ours
    found = pi_continues(link, HOME=os.environ["HOME"], PI_CODING_AGENT_SESSION_DIR=str(shared))
    assert found["continued"] == found["byId"] == tree.path
    assert found["listed"] == [tree.path]


@pytest.fixture(params=["a .pi file", ".pi -> .pi"])
def no_project_settings(request: pytest.FixtureRequest, linked: tuple[Path, Path]
                        ) -> tuple[Path, Path]:
    """A workspace (and its symlink) whose `.pi` cannot hold pi's settings."""
    real, link = linked
    if request.param == "a .pi file":
        (real / ".pi").write_text("not a folder\n")
    else:
        (real / ".pi").symlink_to(".pi")
    return real, link


def test_where_pi_reads_no_project_settings_sessions_start_in_its_own_folder(
        no_project_settings: tuple[Path, Path]) -> None:
    """A `.pi` file or symlink loop made every new session an error (`… is not a folder`, `…
    is a symlink loop`), while pi, reading no `sessionDir` there, uses its default folder."""
    real, link = no_project_settings
    hub = SessionHub([link], Config())
    path = hub.new_session("from the editor")
    assert path.parent == cli_session_dir(str(real))
    assert hub.held(path).tree.header.cwd == str(real)
    tree = prompted(start_session(link, "anthropic", "claude-sonnet-4-5", "off"))
    assert Path(tree.path).parent == cli_session_dir(str(real))
    assert [s.path for s in continuable(link)] == [tree.path]  # the unprompted one unwritten


def test_pi_continues_the_session_pi_lsp_starts_where_pi_reads_no_project_settings(
        no_project_settings: tuple[Path, Path]) -> None:
    _real, link = no_project_settings
    tree = prompted(start_session(link, "anthropic", "claude-sonnet-4-5", "off"))
    found = pi_continues(link)
    assert found["continued"] == found["byId"] == tree.path
    assert found["listed"] == [tree.path]


def test_sessions_are_dated_and_ordered_as_pi_lists_them(linked: tuple[Path, Path]) -> None:
    """pi-lsp dated a session by any entry's stamp (a later label or model change listed it
    first, the CLI and editors ordering sessions unlike pi's /resume): pi 1.6's
    SessionManager.list on the same odd files gives the same times and order."""
    real, _link = linked
    directory = real / ".pi" / "sessions"
    write_odd_activity(directory, str(real))
    idle = write(directory / "idle.jsonl", [  # a header stamp that is not text: the file's time
        {"type": "session", "version": 3, "id": "idle", "timestamp": 1, "cwd": str(real)}])
    os.utime(idle, (0, 1_700_000_000))
    ours = {s.id: s.modified for s in list_sessions([directory])}
    # An Invalid Date makes pi's sort unordered, so the order is compared without it.
    found = pi16(real, """
        const { unlinkSync } = await import('node:fs');
        const dated = async () => (await SessionManager.list(process.cwd(), '.pi/sessions'))
            .map((s) => [s.id, Number.isNaN(s.modified.getTime()) ? '' : s.modified.toISOString()]);
        const all = await dated();
        unlinkSync('.pi/sessions/infinite.jsonl');
        process.stdout.write(JSON.stringify({all, ordered: await dated()}));""")
    assert dict(found["all"]) == ours
    assert [s.id for s in list_sessions([directory])] == [i for i, _ in found["ordered"]]
