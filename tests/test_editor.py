"""The agent inside the editor, over stdio: unsaved buffers, `workspace/applyEdit`, code context
in prompts and the editor's diagnostics offered back to the model."""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument, Workspace
from pytest_lsp import LanguageClient, client_capabilities

from pi_lsp.agent import tools
from pi_lsp.agent.approval import allow_all
from pi_lsp.agent.attachments import render
from pi_lsp.agent.feedback import FEEDBACK_ROUNDS
from pi_lsp.agent.harness import Harness
from pi_lsp.agent.tools import EDIT, READ, WRITE, ToolContext, execute_tool
from pi_lsp.providers.anthropic import AnthropicProvider
from pi_lsp.regular import read_regular
from pi_lsp.server import editor as editor_module
from pi_lsp.server.editor import EditorFiles, attachment
from pi_lsp.server.protocol import ContextArg, PositionArg, RangeArg
from pi_lsp.server.server import PiServer, did_close, did_save
from pi_lsp.session.entries import TextContent
from pi_lsp.session.tree import SessionTree
from tests.fake_anthropic import FakeAnthropic, text_reply, tool_reply
from tests.test_server import (
    INVALID_PARAMS,
    NOTIFICATIONS,
    SERVER,
    TURN,
    Pi,
    call,
    call_error,
    hub_ready,
    init_options,
    make_workspace,
    plain,
    recorder,
    wait_events,
)
from tests.test_system_messages import PI16, pi16_node
from tests.waits import CEILING_S, PROCESS_CEILING_S, until

pytestmark = pytest.mark.asyncio(loop_scope="module")

DISK_TEXT = "LIMIT = 1\n"
UNSAVED_TEXT = "LIMIT = 2  # unsaved\n"
PROBLEM = {"range": {"start": {"line": 0, "character": 4}, "end": {"line": 0, "character": 9}},
           "severity": 1, "message": "LIMIT is never used", "source": "lint"}


class Editor:
    """What the test editor answered: applied edits and diagnostics requests."""

    def __init__(self) -> None:
        self.edits: list[dict[str, Any]] = []
        self.asked: list[list[str]] = []
        self.problems: dict[str, list[dict[str, Any]]] = {}
        self.applying = asyncio.Event()  # an edit was asked for
        self.held: asyncio.Event | None = None  # when given, edits are answered once it is set
        # Documents this editor holds, as VS Code does: an edit of one is applied to it and
        # sent back as a didChange before the answer.
        self.buffers: dict[str, TextDocument] = {}
        # What the user does while asked to approve a tool call (then allows it).
        self.while_asked: Callable[[], None] = lambda: None


@pytest_lsp.fixture(scope="module", config=SERVER)
async def client(lsp_client: LanguageClient, tmp_path_factory: pytest.TempPathFactory,
                 fake: FakeAnthropic) -> Any:
    """One server for the module; each test gets its own `Editor` record (see `editor`)."""

    @lsp_client.feature(types.WORKSPACE_APPLY_EDIT)
    async def apply_edit(params: types.ApplyWorkspaceEditParams
                         ) -> types.ApplyWorkspaceEditResult:
        editor: Editor = lsp_client.editor  # type: ignore[attr-defined]
        editor.edits.append(plain(lsp_client.protocol._converter.unstructure(params)))
        editor.applying.set()
        if editor.held is not None:
            await editor.held.wait()
        for change in params.edit.document_changes or ():
            if isinstance(change, types.TextDocumentEdit) and \
                    change.text_document.uri in editor.buffers:
                changed_in(lsp_client, editor.buffers[change.text_document.uri], change)
        return types.ApplyWorkspaceEditResult(applied=True)

    @lsp_client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
    def ask(params: types.ShowMessageRequestParams) -> types.MessageActionItem | None:
        lsp_client.editor.while_asked()  # type: ignore[attr-defined]
        return next((a for a in params.actions or [] if a.title == "Allow"), None)

    @lsp_client.feature("pi/diagnostics")
    def diagnostics(params: Any) -> dict[str, Any]:
        editor: Editor = lsp_client.editor  # type: ignore[attr-defined]
        uris = list(plain(params)["uris"])
        editor.asked.append(uris)
        return {"diagnostics": [{"uri": u, "items": editor.problems.get(u, [])} for u in uris]}

    root = make_workspace(tmp_path_factory.mktemp("editor"))
    pi = Pi(lsp_client, "visual-studio-code", root)
    for method in NOTIFICATIONS:
        lsp_client.feature(method)(recorder(pi, method))
    capabilities = client_capabilities("visual-studio-code")
    capabilities.experimental = {"piLsp": {"diagnostics": True}}
    pi.init = await asyncio.wait_for(lsp_client.initialize_session(types.InitializeParams(
        capabilities=capabilities, root_uri=pi.main.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=pi.main.as_uri(), name="main")],
        initialization_options=init_options(fake, toolApproval="auto"))), PROCESS_CEILING_S)
    await hub_ready(lsp_client)
    lsp_client.pi = pi  # type: ignore[attr-defined]
    yield
    await asyncio.wait_for(lsp_client.shutdown_session(), CEILING_S)


@pytest.fixture(scope="module")
def pi(client: LanguageClient) -> Pi:
    return client.pi  # type: ignore[attr-defined,no-any-return]


@pytest.fixture(autouse=True)
def editor(client: LanguageClient) -> Editor:
    """A new record for each test, so none sees another's edits, questions or held answers."""
    client.editor = Editor()  # type: ignore[attr-defined]
    return client.editor  # type: ignore[attr-defined,no-any-return]


async def new_session(pi: Pi) -> str:
    return str((await call(pi.client, "pi.newSession", {}))["uri"])


async def run_prompt(pi: Pi, uri: str, text: str, **extra: Any) -> list[dict[str, Any]]:
    since = pi.mark()
    answer = await call(pi.client, "pi.prompt", {"uri": uri, "text": text, **extra})
    events = await wait_events(pi, answer["turnId"], since)
    assert events[-1]["type"] == "agent_end", events[-1]
    return events


def open_unchanged(pi: Pi, path: Path, shown: str) -> str:
    """Open `path` in the editor showing `shown` (its text as the editor reads the file)."""
    uri = path.as_uri()
    pi.client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1,
                                             text=shown)))
    return uri


def open_document(pi: Pi, path: Path, text: str) -> str:
    """Open `path` in the editor with the disk's text, then type `text` without saving."""
    uri = open_unchanged(pi, path, path.read_text())
    pi.client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))
    return uri


def changed_in(client: LanguageClient, document: TextDocument,
               change: types.TextDocumentEdit) -> None:
    """Apply the edit to the editor's own copy of the document and send it as a didChange."""
    for edit in change.edits:
        assert isinstance(edit, types.TextEdit)
        document.apply_change(types.TextDocumentContentChangePartial(range=edit.range,
                                                                     text=edit.new_text))
    document.version = (document.version or 0) + 1
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=document.uri,
                                                            version=document.version),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=document.source)]))


def held_open(pi: Pi, editor: Editor, path: Path) -> TextDocument:
    """Open `path` in an editor that keeps its buffer and reads the file as VS Code and Neovim
    do: its BOM dropped (written back on save), line ends as they are."""
    shown = path.read_bytes().decode().removeprefix("\ufeff")
    document = TextDocument(open_unchanged(pi, path, shown), shown, version=1)
    editor.buffers[document.uri] = document
    return document


def saved(pi: Pi, document: TextDocument, bom: bytes) -> None:
    """The user saves the buffer: the editor writes its text after the BOM it read."""
    Path(document.path).write_bytes(bom + document.source.encode())
    pi.client.text_document_did_save(types.DidSaveTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=document.uri)))


def tool_texts(events: list[dict[str, Any]]) -> dict[str, str]:
    return {e["toolCallId"]: e["result"]["content"][0]["text"]
            for e in events if e["type"] == "tool_execution_end"}


def user_texts(request: dict[str, Any]) -> list[str]:
    """The text blocks of the last user message of a model request."""
    last = [m for m in request["messages"] if m["role"] == "user"][-1]
    return [b["text"] for b in last["content"] if b.get("type") == "text"]


async def test_server_syncs_open_documents(pi: Pi) -> None:
    sync = pi.init.capabilities.text_document_sync  # type: ignore[union-attr]
    assert isinstance(sync, types.TextDocumentSyncOptions)
    assert sync.open_close and sync.change == types.TextDocumentSyncKind.Incremental


async def test_a_change_to_a_document_never_opened_shows_no_error(pi: Pi) -> None:
    """pygls' KeyError reached the user as "Error in server: KeyError: 'file:///…'" (found in
    review); the change is logged and ignored."""
    shown = len(pi.client.messages)
    pi.client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(
            uri=(pi.main / "never-opened.py").as_uri(), version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text="x = 1\n")]))
    await call(pi.client, "pi.listModels", {})  # answered in order: the change was handled
    assert pi.client.messages[shown:] == []


async def test_open_document_is_read_unsaved_and_edited_through_the_editor(
        pi: Pi, editor: Editor, fake: FakeAnthropic) -> None:
    path = pi.main / "limits.py"
    path.write_text(DISK_TEXT)
    uri = open_document(pi, path, UNSAVED_TEXT)
    editor.problems[uri] = [PROBLEM, {**PROBLEM, "severity": 3, "message": "a hint"}]
    fake.script(
        tool_reply([("r1", "read", {"path": "limits.py"})]),
        tool_reply([("e1", "edit", {"path": "limits.py", "oldText": "LIMIT = 2",
                                    "newText": "LIMIT = 3"})]),
        text_reply("Raised the limit."),
        text_reply("It is used elsewhere."),
    )
    events = await run_prompt(pi, await new_session(pi), "Raise the limit")

    results = tool_texts(events)
    assert "LIMIT = 2  # unsaved" in results["r1"]  # the buffer, not the disk
    assert results["e1"] == "Successfully replaced 1 block(s) in limits.py."
    assert len(editor.edits) == 1
    change = editor.edits[0]["edit"]["documentChanges"][0]
    assert change["textDocument"] == {"uri": uri, "version": 2}
    # Only what changed, so the cursor and undo in the editor stay where they were.
    assert change["edits"] == [{"range": {"start": {"line": 0, "character": 8},
                                          "end": {"line": 0, "character": 9}},
                                "newText": "3"}]
    assert path.read_text() == DISK_TEXT  # the disk waits for the user to save

    # The turn's end asked the editor about the file it changed, once; errors reach the model.
    assert editor.asked == [[uri]]
    requests = fake.message_requests()
    assert len(requests) == 4
    feedback = "\n".join(user_texts(requests[3]))
    assert feedback.startswith("The editor reports these problems in files you changed:")
    assert "- limits.py:1:5: error [lint]: LIMIT is never used" in feedback
    assert "a hint" not in feedback


async def test_a_later_read_sees_the_applied_edit(pi: Pi, fake: FakeAnthropic) -> None:
    path = pi.main / "later.py"
    path.write_text(DISK_TEXT)
    open_document(pi, path, UNSAVED_TEXT)
    fake.script(tool_reply([("e1", "edit", {"path": "later.py", "oldText": "LIMIT = 2",
                                            "newText": "LIMIT = 3"})]), text_reply("done"))
    await run_prompt(pi, await new_session(pi), "Raise the limit")
    fake.script(tool_reply([("r2", "read", {"path": "later.py"})]), text_reply("ok"))
    events = await run_prompt(pi, await new_session(pi), "Read it again")
    assert "LIMIT = 3  # unsaved" in tool_texts(events)["r2"]


async def test_files_not_open_are_written_on_disk(pi: Pi, editor: Editor,
                                                  fake: FakeAnthropic) -> None:
    before = len(editor.edits)
    fake.script(tool_reply([("w1", "write", {"path": "new_module.py", "content": "X = 1\n"})]),
                text_reply("written"))
    await run_prompt(pi, await new_session(pi), "Write a module")
    assert (pi.main / "new_module.py").read_text() == "X = 1\n"
    assert len(editor.edits) == before
    assert editor.asked[-1] == [(pi.main / "new_module.py").as_uri()]  # no problems: no message
    assert len(fake.message_requests()) == 2


async def test_an_open_file_with_nothing_unsaved_is_edited_as_the_disk_has_it(
        pi: Pi, editor: Editor, fake: FakeAnthropic) -> None:
    """After `bash` changed a clean buffer's file, `read` showed the disk but `edit` worked on
    the buffer's old text and applied it there: saving lost bash's change. Both see the disk,
    and the stale buffer is left for the editor to reload."""
    path = pi.main / "stale.py"
    path.write_text(DISK_TEXT)
    uri = open_unchanged(pi, path, DISK_TEXT)
    before = len(editor.edits)
    fake.script(
        tool_reply([("b1", "bash", {"command": "sed -i 's/LIMIT = 1/LIMIT = 5/' stale.py"})]),
        tool_reply([("r1", "read", {"path": "stale.py"})]),
        tool_reply([("e1", "edit", {"path": "stale.py", "oldText": "LIMIT = 5",
                                    "newText": "LIMIT = 6"})]),
        text_reply("done"))
    results = tool_texts(await run_prompt(pi, await new_session(pi), "Raise it"))
    assert results["r1"] == "LIMIT = 5\n"
    assert results["e1"] == "Successfully replaced 1 block(s) in stale.py."
    assert path.read_text() == "LIMIT = 6\n"
    assert len(editor.edits) == before

    # Once the editor reloads, its buffer is the disk's again and edited through the editor.
    pi.client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text="LIMIT = 6\n")]))
    fake.script(tool_reply([("e2", "edit", {"path": "stale.py", "oldText": "LIMIT = 6",
                                            "newText": "LIMIT = 7"})]), text_reply("done"))
    await run_prompt(pi, await new_session(pi), "Again")
    assert editor.edits[before]["edit"]["documentChanges"][0]["edits"][0]["newText"] == "7"
    assert path.read_text() == "LIMIT = 6\n"


@pytest.mark.parametrize("name,disk,shown", [
    ("bom.py", b"\xef\xbb\xbfLIMIT = 1\n", "LIMIT = 1\n"),
    ("latin.py", b"# caf\xe9\nLIMIT = 1\n", "# caf\ufffd\nLIMIT = 1\n")])
async def test_an_open_file_shown_as_the_editor_decodes_it_is_edited_as_the_disk_has_it(
        pi: Pi, editor: Editor, fake: FakeAnthropic, name: str, disk: bytes, shown: str
        ) -> None:
    """A clean buffer of a file with a BOM (the editors drop it) or bytes that are not UTF-8
    (U+FFFD) was taken for unsaved: after `bash` changed the file, `edit` of its old text was
    applied to the stale buffer. Once reloaded, an edit sent the BOM into the buffer."""
    path = pi.main / name
    path.write_bytes(disk)
    uri = open_unchanged(pi, path, shown)
    before = len(editor.edits)
    fake.script(
        tool_reply([("b1", "bash", {"command": f"sed -i 's/LIMIT = 1/LIMIT = 5/' {name}"})]),
        tool_reply([("r1", "read", {"path": name})]),
        tool_reply([("e1", "edit", {"path": name, "oldText": "LIMIT = 1",
                                    "newText": "LIMIT = 6"})]),
        tool_reply([("e2", "edit", {"path": name, "oldText": "LIMIT = 5",
                                    "newText": "LIMIT = 6"})]),
        text_reply("done"))
    results = tool_texts(await run_prompt(pi, await new_session(pi), "Raise it"))
    assert results["r1"].endswith("LIMIT = 5\n")
    assert results["e1"].startswith("Could not find the exact text")
    assert results["e2"] == "Successfully replaced 1 block(s) in " + name + "."
    assert path.read_bytes() == disk.replace(b"\xe9", "\ufffd".encode()).replace(b"1", b"6")
    assert len(editor.edits) == before

    pi.client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(
            text=shown.replace("1", "6"))]))
    fake.script(tool_reply([("e3", "edit", {"path": name, "oldText": "LIMIT = 6",
                                            "newText": "LIMIT = 7"})]), text_reply("done"))
    await run_prompt(pi, await new_session(pi), "Again")
    assert editor.edits[before]["edit"]["documentChanges"][0]["edits"][0]["newText"] == "7"


STORED_BOM_EDITS = Path(__file__).with_name("fixtures") / "pi16-bom-edits.json"
BOM_BYTES = b"\xef\xbb\xbf"


@pytest.fixture(scope="module")
def pi16_bom_edits(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """What pi 1.6's edit tool leaves in a file with a BOM (CRLF, LF) after the edits the tests
    below make, one call after another: stored, and checked against pi itself where it is."""
    stored: list[dict[str, Any]] = json.loads(STORED_BOM_EDITS.read_text("utf-8"))
    node = pi16_node()
    if node is not None:
        cases = tmp_path_factory.mktemp("bom") / "cases.json"
        cases.write_text(json.dumps([{"text": c["text"], "edits": c["edits"]} for c in stored]))
        run = subprocess.run([node, str(Path(__file__).with_name("pi16_bom_edits.mjs")),
                              str(PI16 / "@earendil-works"), str(cases)],
                             capture_output=True, text=True, timeout=PROCESS_CEILING_S)
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout) == [c["written"] for c in stored]
    return stored


async def read_and_edit(pi: Pi, fake: FakeAnthropic, session: str, path: Path, old: str,
                        new: str) -> str:
    """A turn in which the model reads `path`, then edits it: the edit's answer."""
    fake.script(tool_reply([("r", "read", {"path": path.name})]),
                tool_reply([("e", "edit", {"path": path.name, "oldText": old, "newText": new})]),
                text_reply("done"))
    return tool_texts(await run_prompt(pi, session, "Edit it"))["e"]


@pytest.mark.parametrize("case", [0, 2], ids=["CRLF", "LF"])
async def test_an_open_file_with_a_bom_is_edited_read_unsaved_and_saved_with_it(
        pi: Pi, editor: Editor, fake: FakeAnthropic, pi16_bom_edits: list[dict[str, Any]],
        case: int) -> None:
    """A file saved with a BOM, open in an editor (which drops the BOM from the text it sends),
    read and edited by the model: the edit applies the first time, again once the buffer holds
    it unsaved, and again once saved; saved, the file is what pi 1.6's edits leave on disk."""
    stored = pi16_bom_edits[case]
    path = pi.main / f"bom_{case}.cs"
    path.write_bytes(stored["text"].encode())
    document = held_open(pi, editor, path)
    session = await new_session(pi)
    for number, (old, new) in enumerate(stored["edits"]):
        if number == 2:
            saved(pi, document, BOM_BYTES)
        assert await read_and_edit(pi, fake, session, path, old, new) == \
            f"Successfully replaced 1 block(s) in {path.name}."
    saved(pi, document, BOM_BYTES)
    assert path.read_bytes() == bytes.fromhex(stored["written"])


@pytest.mark.parametrize("case", [1, 3], ids=["CRLF", "LF"])
async def test_an_edit_of_a_buffer_with_a_bom_saved_while_it_is_approved_is_made(
        pi: Pi, editor: Editor, fake: FakeAnthropic, pi16_bom_edits: list[dict[str, Any]],
        case: int) -> None:
    """The user saved an unsaved buffer of a file with a BOM while asked to approve an edit of
    it: the edit was refused ("changed while the edit waited for approval"), though nothing
    was typed: the change asked about was worked out from the buffer, without the BOM the
    editor drops, and the one to make from the disk, with it."""
    stored = pi16_bom_edits[case]
    path = pi.main / f"asked_{case}.cs"
    path.write_bytes(stored["text"].encode())
    document = held_open(pi, editor, path)
    session = await new_session(pi)
    (first, second) = stored["edits"]
    configure(pi, fake, toolApproval="ask")
    try:
        answers = [await read_and_edit(pi, fake, session, path, *first)]
        editor.while_asked = lambda: saved(pi, document, BOM_BYTES)
        answers.append(await read_and_edit(pi, fake, session, path, *second))
    finally:
        configure(pi, fake)
    assert answers == [f"Successfully replaced 1 block(s) in {path.name}."] * 2
    saved(pi, document, BOM_BYTES)
    assert path.read_bytes() == bytes.fromhex(stored["written"])


async def test_open_files_are_compared_with_the_disk_again_only_when_their_file_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every `read` and snapshot read each clean open file whole to see it was not stale: 10
    clean 20 MB files cost 750 ms a call, on the event loop. A stat now, until the file changes."""
    path = tmp_path / "big.py"
    path.write_text(DISK_TEXT)
    document = TextDocument(path.as_uri(), DISK_TEXT, version=1)
    files = EditorFiles(cast(LanguageServer, SimpleNamespace(
        workspace=SimpleNamespace(text_documents={document.uri: document}))))
    files.synced(document.uri)
    await files.settle()
    reads: list[Path] = []

    def counted(path: Path, limit: int = -1) -> bytes:
        reads.append(path)
        return read_regular(path, limit)
    monkeypatch.setattr(editor_module, "read_regular", counted)

    async def looked() -> dict[Path, str | None]:
        await files.settle()  # as a snapshot does
        return files.open_texts()
    # Written just now, it may change again within its timestamps' tick: compared each time.
    assert await looked() == await looked() == {path: None}
    assert reads == [path] * 2
    monkeypatch.setattr("pi_lsp.regular.SETTLED_NS", -1 << 62)  # as if written long ago
    assert [await looked() for _ in range(3)] == [{path: None}] * 3
    assert reads == [path] * 3
    path.write_text("LIMIT = 5\n")  # as `bash` changes it
    assert await looked() == await looked() == {}
    assert reads == [path] * 4


def applying_editor(document: TextDocument) -> EditorFiles:
    """EditorFiles over one open document, in an editor that applies an edit made at the
    document's version, and refuses it at another, as VS Code does; and deletes its file."""
    documents = {document.uri: document}

    async def apply_edit(params: types.ApplyWorkspaceEditParams) -> Any:
        (change,) = params.edit.document_changes
        if isinstance(change, types.DeleteFile):  # the buffer goes with its file
            Path(documents.pop(change.uri).path).unlink()
            return types.ApplyWorkspaceEditResult(applied=True)
        if change.text_document.version != document.version:
            return types.ApplyWorkspaceEditResult(applied=False, failure_reason="version")
        (edit,) = change.edits
        document.apply_change(types.TextDocumentContentChangePartial(range=edit.range,
                                                                     text=edit.new_text))
        return types.ApplyWorkspaceEditResult(applied=True)

    return EditorFiles(cast(LanguageServer, SimpleNamespace(
        workspace=SimpleNamespace(text_documents=documents),
        client_capabilities=SimpleNamespace(workspace=SimpleNamespace(
            apply_edit=True, workspace_edit=SimpleNamespace(
                resource_operations=[types.ResourceOperationKind.Delete]))),
        workspace_apply_edit_async=apply_edit)))


def typed(files: EditorFiles, document: TextDocument, text: str) -> None:
    """The user typed: the document is `text` at its next version (a didChange)."""
    document.apply_change(types.TextDocumentContentChangeWholeDocument(text=text))
    document.version = (document.version or 0) + 1
    files.synced(document.uri)


async def test_an_edit_keeps_a_key_typed_while_its_write_waits_for_the_comparisons(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """EditorFiles.write_text waits for the buffers' comparisons with their files (settle), and
    then made its edit from the buffer as it was by then, at its version then: a key typed
    meanwhile (the comparison of the key before, 0.26 s for 100 MB, is what it waits for) was
    in the buffer the plan's text replaced, so it was lost. The write now refuses, nothing
    written, where the buffer changed while it waited."""
    path = tmp_path / "a.txt"
    path.write_text("one\ntwo\n")
    document = TextDocument(path.as_uri(), "one\ntwo\n", version=1)
    files = applying_editor(document)
    loop = asyncio.get_running_loop()
    settling = threading.Event()  # write_text is waiting in settle()
    keys: list[str] = []
    real_comparison = editor_module.disk_comparison

    def type_text(text: str) -> None:
        typed(files, document, text)

    def slow_comparison(text: str, where: Path) -> Any:
        # the last key's comparison ends once the write waits for it: the next key comes first
        assert settling.wait(CEILING_S), "the write never waited for the comparisons"
        if not keys:
            keys.append("y")
            typed = threading.Event()
            loop.call_soon_threadsafe(lambda: (type_text("one\ntwo\nxy"), typed.set()))
            assert typed.wait(CEILING_S), "the event loop stood still"
        return real_comparison(text, where)
    monkeypatch.setattr(editor_module, "disk_comparison", slow_comparison)
    files.synced(document.uri)  # didOpen
    type_text("one\ntwo\nx")  # its comparison is under way when the edit is written
    real_settle = files.settle

    async def settle() -> None:
        settling.set()
        await real_settle()
    monkeypatch.setattr(files, "settle", settle)
    args = {"path": "a.txt", "edits": [{"oldText": "one", "newText": "1"}]}
    result = await execute_tool(EDIT, "edit", args, ToolContext(tmp_path, files=files))
    assert document.source == "one\ntwo\nxy"
    assert result.is_error
    assert [block.text for block in result.content if isinstance(block, TextContent)] == [
        f"{path} changed in the editor while it was being written; nothing was written. Read "
        "it again."]


@pytest.mark.parametrize("tool,args", [
    (EDIT, {"path": "a.txt", "edits": [{"oldText": "one", "newText": "1"}]}),
    (WRITE, {"path": "a.txt", "content": "1\ntwo\n"})], ids=["edit", "write"])
async def test_a_write_keeps_a_key_the_loop_took_before_the_write_began(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tool: tools.Tool, args: dict[str, Any]
        ) -> None:
    """The tools tell their file unchanged (`_unchanged`), then start write_text as a task: a
    didChange the loop held already ran first, and write_text, noting the buffer only then,
    laid the plan's text over the key typed, at the buffer's version. The buffer is told to be
    the text the write was worked out from where its edit is made, or nothing is written."""
    path = tmp_path / "a.txt"
    path.write_text("one\ntwo\n")
    document = TextDocument(path.as_uri(), "one\ntwo\nx", version=1)
    files = applying_editor(document)
    files.synced(document.uri)
    await files.settle()
    real_unchanged = tools._unchanged

    def unchanged(*told: Any) -> bool:
        # the key reaches the loop as the file is told unchanged: it runs next
        asyncio.get_running_loop().call_soon(typed, files, document, "one\ntwo\nxy")
        return real_unchanged(*told)
    monkeypatch.setattr(tools, "_unchanged", unchanged)
    result = await execute_tool(tool, tool.name, args, ToolContext(tmp_path, files=files))
    assert document.source == "one\ntwo\nxy"
    assert [block.text for block in result.content if isinstance(block, TextContent)] == [
        f"{path} changed in the editor while it was being written; nothing was written. Read "
        "it again."]
    assert result.is_error


def saved_and_closed(files: EditorFiles, document: TextDocument) -> None:
    """The user saved the document and closed it: the editor writes its text, then sends
    didSave and didClose, which the server's handlers take as they come."""
    Path(document.path).write_bytes(document.source.encode())
    did_save(cast(PiServer, SimpleNamespace(files=files, started=True)),
             types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(document.uri)))
    closed(files, document)


def closed(files: EditorFiles, document: TextDocument) -> None:
    """The user closed the document (a didClose), saved or not."""
    del files.server.workspace.text_documents[document.uri]  # as pygls drops it first
    did_close(cast(PiServer, SimpleNamespace(files=files, started=True)),
              types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(document.uri)))


@pytest.mark.parametrize("tool,args", [
    (EDIT, {"path": "a.txt", "edits": [{"oldText": "one", "newText": "1"}]}),
    (WRITE, {"path": "a.txt", "content": "1\ntwo\n"})], ids=["edit", "write"])
async def test_a_write_keeps_a_key_typed_saved_and_closed_before_the_write_began(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tool: tools.Tool, args: dict[str, Any]
        ) -> None:
    """A key typed, the file saved and closed (didChange, didSave, didClose), all in the loop
    turn between the tools' check of the buffer (`_unchanged`) and write_text's first step: no
    document was left, so the plan's text went to the disk over the text saved, key and all.
    The disk write tells its file still holds the text planned from, or writes nothing."""
    path = tmp_path / "a.txt"
    path.write_text("one\ntwo\n")
    document = TextDocument(path.as_uri(), "one\ntwo\nx", version=1)
    files = applying_editor(document)
    files.synced(document.uri)
    await files.settle()
    real_unchanged = tools._unchanged

    def unchanged(*told: Any) -> bool:
        # the three messages reach the loop as the buffer is told unchanged: they run next
        loop = asyncio.get_running_loop()
        loop.call_soon(typed, files, document, "one\ntwo\nxy")
        loop.call_soon(saved_and_closed, files, document)
        return real_unchanged(*told)
    monkeypatch.setattr(tools, "_unchanged", unchanged)
    result = await execute_tool(tool, tool.name, args, ToolContext(tmp_path, files=files))
    assert files.document(path) is None
    assert path.read_text() == "one\ntwo\nxy"
    assert [block.text for block in result.content if isinstance(block, TextContent)] == [
        f"{path} changed on disk since it was read; nothing was written. Read it again."]
    assert result.is_error


@pytest.mark.parametrize("tool,args", [
    (EDIT, {"path": "a.txt", "edits": [{"oldText": "one", "newText": "1"}]}),
    (WRITE, {"path": "a.txt", "content": "1\ntwo\n"})], ids=["edit", "write"])
async def test_a_buffer_closed_unchanged_as_the_write_begins_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tool: tools.Tool, args: dict[str, Any]
        ) -> None:
    """A buffer showing its file, closed with nothing typed while the write settled the
    editor's comparisons: the write was refused ("changed in the editor while it was being
    written"), though neither the buffer nor the disk had changed. The disk's check tells a
    buffer closed since (a key typed and saved, or closed unsaved) from one closed as it was."""
    path = tmp_path / "a.txt"
    path.write_text("one\ntwo\n")
    document = TextDocument(path.as_uri(), "one\ntwo\n", version=1)
    files = applying_editor(document)
    files.synced(document.uri)
    await files.settle()
    real_settle = files.settle

    async def closed_as_settled() -> None:
        closed(files, document)
        await real_settle()
    monkeypatch.setattr(files, "settle", closed_as_settled)
    result = await execute_tool(tool, tool.name, args, ToolContext(tmp_path, files=files))
    assert not result.is_error, result.content
    assert path.read_text() == "1\ntwo\n"


async def test_an_editor_that_cannot_apply_edits_has_the_disk_written_under_its_buffer(
        tmp_path: Path) -> None:
    """Without `workspace/applyEdit` an edit planned from an unsaved buffer is written on disk,
    which holds another text (the last save): the disk's check of the text planned from is the
    buffer's to make, and the buffer, which this editor keeps, holds what was typed."""
    path = tmp_path / "a.txt"
    path.write_text("one\ntwo\n")
    document = TextDocument(path.as_uri(), "one\ntwo\nx", version=1)
    files = EditorFiles(cast(LanguageServer, SimpleNamespace(
        workspace=SimpleNamespace(text_documents={document.uri: document}),
        client_capabilities=SimpleNamespace(workspace=None))))
    files.synced(document.uri)
    await files.settle()
    args = {"path": "a.txt", "edits": [{"oldText": "one", "newText": "1"}]}
    result = await execute_tool(EDIT, "edit", args, ToolContext(tmp_path, files=files))
    assert not result.is_error
    assert path.read_text() == "1\ntwo\nx"
    assert document.source == "one\ntwo\nx"


@pytest.mark.parametrize("line_end", ["\r\n", "\n"], ids=["CRLF", "LF"])
async def test_an_editor_that_cannot_apply_edits_keeps_the_bom_of_the_file_under_its_buffer(
        tmp_path: Path, line_end: str) -> None:
    """An edit planned from an unsaved buffer of a file with a BOM, which the editor dropped,
    was written on disk without it; the disk now keeps its BOM, as pi 1.6's edit keeps it."""
    path = tmp_path / "a.txt"
    path.write_bytes(b"\xef\xbb\xbf" + f"one{line_end}two{line_end}".encode())
    document = TextDocument(path.as_uri(), f"one{line_end}two{line_end}x", version=1)
    files = EditorFiles(cast(LanguageServer, SimpleNamespace(
        workspace=SimpleNamespace(text_documents={document.uri: document}),
        client_capabilities=SimpleNamespace(workspace=None))))
    files.synced(document.uri)
    await files.settle()
    args = {"path": "a.txt", "edits": [{"oldText": "one", "newText": "1\n2"}]}
    result = await execute_tool(EDIT, "edit", args, ToolContext(tmp_path, files=files))
    assert not result.is_error, result.content
    assert path.read_bytes() == b"\xef\xbb\xbf" + f"1{line_end}2{line_end}two{line_end}x".encode()



async def test_an_edit_of_a_buffer_read_with_a_bom_puts_none_in_it_when_the_disk_loses_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An unsaved buffer of a file with a BOM is read with it; the disk losing its BOM as the
    write settled (a checkout, after the tools' check) made the buffer's edit keep it: a U+FEFF
    typed into the buffer, two BOMs once the editor saved it. The BOM read is taken off."""
    path = tmp_path / "a.txt"
    path.write_bytes(b"\xef\xbb\xbfone\ntwo\n")
    document = TextDocument(path.as_uri(), "one\ntwo\nx", version=1)
    files = applying_editor(document)
    files.synced(document.uri)
    await files.settle()
    real_settle = files.settle

    async def settle() -> None:
        path.write_bytes(b"one\ntwo\n")  # the BOM gone from the disk, the buffer unsaved
        await real_settle()
    monkeypatch.setattr(files, "settle", settle)
    args = {"path": "a.txt", "edits": [{"oldText": "one", "newText": "1"}]}
    result = await execute_tool(EDIT, "edit", args, ToolContext(tmp_path, files=files))
    assert not result.is_error, result.content
    assert document.source == "1\ntwo\nx"


async def test_a_buffer_read_with_a_bom_as_it_was_compared_keeps_no_copy_once_it_is_the_disks(
        tmp_path: Path) -> None:
    """A buffer of a file with a BOM read while its comparison ran (unsaved meanwhile: a
    snapshot, a read) kept its copy with the BOM, twice its size, once the comparison found it
    the disk's text (a key typed and undone), until the next key or its close."""
    path = tmp_path / "a.txt"
    path.write_bytes(b"\xef\xbb\xbfone\n")
    document = TextDocument(path.as_uri(), "one\n", version=1)
    files = applying_editor(document)
    files.synced(document.uri)  # the key undone: the disk's text, compared in a worker
    assert files.open_texts() == {path.resolve(): "\ufeffone\n"}  # unsaved meanwhile
    await files.settle()
    assert files.open_texts() == {path.resolve(): None}
    assert document.uri not in files.saved_as

async def test_typing_in_an_open_file_compares_it_with_its_file_off_the_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each didOpen, and each didChange keeping the file's size, compared the document with its
    file on the event loop (100 MB: 0.26 s per keystroke, every request waiting); so did a
    snapshot for a file changed since. A worker thread does, and an older text's result is
    dropped: the newer text's decides."""
    path = tmp_path / "big.py"
    path.write_text(DISK_TEXT)
    document = TextDocument(path.as_uri(), DISK_TEXT, version=1)
    files = EditorFiles(cast(LanguageServer, SimpleNamespace(
        workspace=SimpleNamespace(text_documents={document.uri: document}))))
    loop_thread = threading.get_ident()
    threads: list[bool] = []
    texts: list[str] = []  # the first character of each text compared
    release = threading.Event()
    same_as_disk = editor_module.same_as_disk

    def compared(text: str, path: Path) -> bool:
        threads.append(threading.get_ident() != loop_thread)
        texts.append(text[:1])
        if text.startswith("X"):  # the typed text's comparison waits: the user types on
            assert release.wait(CEILING_S), "the test never let the comparison go on"
        return same_as_disk(text, path)
    monkeypatch.setattr(editor_module, "same_as_disk", compared)
    files.synced(document.uri)
    await until(lambda: threads, "the didOpen's comparison")
    assert all(threads), "compared on the event loop"
    await files.settle()
    assert files.open_texts() == {path: None}
    document._source = "X" + DISK_TEXT[1:]  # one character typed over: the file's size
    files.synced(document.uri)
    assert files.buffer_text(path) == document.source  # unsaved until compared
    await until(lambda: "X" in texts, "the typed text's comparison")
    document._source = "Y" + DISK_TEXT[1:]  # typed on, and back, before the comparison ended
    files.synced(document.uri)
    document._source = DISK_TEXT
    files.synced(document.uri)
    release.set()
    await files.settle()  # the older text's result is dropped; the newer text is compared
    assert files.open_texts() == {path: None}
    assert "Y" not in texts  # only the latest text is compared once the one running ended
    path.write_text("LIMIT = 5\n")  # as `bash` changes it: compared again at the snapshot
    await files.settle()
    assert files.open_texts() == {}
    assert threads and all(threads), "compared on the event loop"


async def test_saving_an_open_file_again_and_again_compares_it_one_time_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each didSave dropped the comparison under way and started another (`forget`, then
    `synced`), its worker thread still reading: three :w of a 100 MB file while it was compared
    held four reads at once (200 MB each) and the worker threads every tool reads with. The
    comparison under way is made again once it ends, a read from before the save not taken."""
    path = tmp_path / "big.txt"
    path.write_text("old\n")
    document = TextDocument(path.as_uri(), "new\n", version=1)
    files = EditorFiles(cast(LanguageServer, SimpleNamespace(
        workspace=SimpleNamespace(text_documents={document.uri: document}))))
    reads: list[bool] = []
    release = threading.Event()
    same_as_disk = editor_module.same_as_disk

    def compared(text: str, path: Path) -> bool:
        same = same_as_disk(text, path)
        reads.append(same)
        if len(reads) == 1:  # the didOpen's read, made before the save, ends after it
            assert release.wait(CEILING_S), "the test never let the comparison go on"
        return same
    monkeypatch.setattr(editor_module, "same_as_disk", compared)
    files.synced(document.uri)
    await until(lambda: reads, "the didOpen's comparison")
    first = files.in_flight[document.uri]
    path.write_text("new\n")  # :w, three times
    try:
        for _ in range(3):
            did_save(cast(PiServer, SimpleNamespace(files=files, started=True)),
                     types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(document.uri)))
            await asyncio.sleep(0)  # one loop turn: a comparison the didSave started begins
            assert files.in_flight.get(document.uri) is first, "a second comparison began"
    finally:
        release.set()
    await files.settle()
    assert files.open_texts() == {path: None}  # the disk has its text
    assert reads[:2] == [False, True]  # the read from before the save was made again


async def test_a_read_compares_no_other_open_document_with_its_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`read` of a file the editor does not have open asked for every open document's text,
    which read each clean one whole to see it was not stale, on the event loop (a 100 MB one
    changed since: 0.4 s, every request waiting). Only the file read is looked up now."""
    open_path = tmp_path / "big.py"
    open_path.write_text(DISK_TEXT)  # written just now: compared with its file at each look
    document = TextDocument(open_path.as_uri(), DISK_TEXT, version=1)
    files = EditorFiles(cast(LanguageServer, SimpleNamespace(
        workspace=SimpleNamespace(text_documents={document.uri: document}))))
    files.synced(document.uri)
    await files.settle()
    (tmp_path / "notes.txt").write_text("not open\n")
    reads: list[Path] = []

    def counted(path: Path, limit: int = -1) -> bytes:
        reads.append(path)
        return read_regular(path, limit)
    monkeypatch.setattr(editor_module, "read_regular", counted)
    result = await execute_tool(READ, "read", {"path": "notes.txt"},
                                ToolContext(tmp_path, files=files))
    assert [block.text for block in result.content if isinstance(block, TextContent)] == \
        ["not open\n"]
    assert reads == []


async def test_a_file_sent_with_a_prompt_is_read_off_the_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A prompt's `context` item sent by URI alone had its file read whole on the event loop
    (1 GB: every editor request waited). The editor's buffer is looked up there; the disk is
    read in a worker thread."""
    on_loop: list[bool] = []
    real_read = tools.disk_text

    def noted(*read_args: Any) -> str | None:
        on_loop.append(threading.current_thread() is threading.main_thread())
        return real_read(*read_args)
    monkeypatch.setattr(tools, "disk_text", noted)
    (tmp_path / "orders.py").write_text("def a():\n    pass\n")
    files = EditorFiles(cast(LanguageServer, SimpleNamespace(
        workspace=SimpleNamespace(text_documents={}))))
    item = ContextArg(uri=(tmp_path / "orders.py").as_uri())
    found = await attachment(files, item, 0, tmp_path, allow_all)
    assert found.text == "def a():\n    pass\n"
    assert on_loop == [False]


async def test_selection_file_and_mentions_reach_the_model(pi: Pi, fake: FakeAnthropic) -> None:
    code = pi.main / "orders.py"
    code.write_text("def a():\n    pass\n\ndef b():\n    return 2\n")
    (pi.main / "notes.md").write_text("Remember the index.\n")
    limits = pi.main / "limits.py"
    limits.write_text(DISK_TEXT)
    open_document(pi, limits, "LIMIT = 3  # unsaved\n")
    selection = {"uri": code.as_uri(), "range": {"start": {"line": 3, "character": 0},
                                                 "end": {"line": 5, "character": 0}},
                 "languageId": "python"}
    fake.script(text_reply("Seen."))
    uri = await new_session(pi)
    await run_prompt(pi, uri, "Why is b slow? See @notes.md and ask @nobody",
                     context=[selection, {"uri": limits.as_uri()}])
    blocks = user_texts(fake.message_requests()[0])
    assert blocks[0] == "Why is b slow? See @notes.md and ask @nobody"
    assert blocks[1] == ('<file path="orders.py" lines="4-5" language="python">\n'
                         "def b():\n    return 2\n</file>")
    assert blocks[2] == '<file path="limits.py">\nLIMIT = 3  # unsaved\n</file>'
    assert blocks[3] == '<file path="notes.md">\nRemember the index.\n</file>'
    assert len(blocks) == 4  # @nobody names no file and stays text

    preview = await call(pi.client, "pi.previewContext", {"uri": uri})
    assert '<file path="orders.py" lines="4-5" language="python">' in preview["markdown"]


async def test_context_text_sent_by_the_editor_is_used_as_is(pi: Pi, fake: FakeAnthropic
                                                            ) -> None:
    fake.script(text_reply("Seen."))
    selection = {"uri": (pi.main / "orders.py").as_uri(), "text": "typed but not saved",
                 "range": {"start": {"line": 0, "character": 0},
                           "end": {"line": 0, "character": 19}}}
    await run_prompt(pi, await new_session(pi), "This?", context=[selection])
    assert user_texts(fake.message_requests()[0])[1] == \
        '<file path="orders.py" lines="1-1">\ntyped but not saved\n</file>'


@pytest.mark.parametrize(("context", "field"), [
    ([{"uri": "untitled:Untitled-1"}], "`context[0].uri`"),
    ([{"uri": "file:///nowhere/missing.py"}], "`context[0].uri`"),
    ([{"uri": "file:///x.py", "range": {"start": {"line": -1, "character": 0},
                                         "end": {"line": 0, "character": 0}}}], "line"),
    # Both answered -32011: "embedded null byte"; a range sent as lines="6-2".
    ([{"uri": "file:///tmp/%00x.py"}], "`context[0].uri` names a path with a NUL character"),
    ([{"uri": "file:///x.py", "text": "given", "range": {"start": {"line": 5, "character": 0},
                                                         "end": {"line": 1, "character": 0}}}],
     "`end` is before `start` - at `$.context[0].range`"),
])
async def test_bad_context_is_invalid_params(pi: Pi, context: list[dict[str, Any]],
                                             field: str) -> None:
    uri = await new_session(pi)
    error = await call_error(pi.client, "pi.prompt", {"uri": uri, "text": "x",
                                                      "context": context})
    assert error.code == INVALID_PARAMS
    assert field in str(error)


async def test_a_range_past_the_end_of_a_file_is_invalid_params(pi: Pi) -> None:
    """A range past a file's last line (the server reading the file) was sent to the model as
    lines="1000001-1000005" with no text."""
    code = pi.main / "short.py"
    code.write_text("one\ntwo\n")
    for first, last in ((10**6, 10**6 + 4), (1, 2)):
        error = await call_error(pi.client, "pi.prompt", {
            "uri": await new_session(pi), "text": "x", "context": [{
                "uri": code.as_uri(), "range": {"start": {"line": first, "character": 0},
                                                "end": {"line": last, "character": 1}}}]})
        assert (error.code, error.message) == (INVALID_PARAMS, (
            f"invalid argument: `context[0].range` ends at line {last + 1}, past the end of "
            "the file (2 lines)"))


@pytest.mark.parametrize("separator", ["\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\u2029"])
async def test_a_range_counts_lines_as_the_editor_does(tmp_path: Path, separator: str) -> None:
    """A range sent without text was cut from the file at str.splitlines' line ends, which are
    no line ends to an editor (LSP: \\n, \\r\\n, \\r): a form feed or U+2028 in a line
    above sent the model a line the user never selected ("hidden" for line 2)."""
    (tmp_path / "a.py").write_text(f"one{separator}hidden\r\ntwo\rthree\nfour", newline="")
    files = EditorFiles(cast(LanguageServer, SimpleNamespace(
        workspace=SimpleNamespace(text_documents={}))))
    item = ContextArg(uri=(tmp_path / "a.py").as_uri(),
                      range=RangeArg(PositionArg(1, 0), PositionArg(2, 5)))
    found = await attachment(files, item, 0, tmp_path, allow_all)
    assert found.text == "two\rthree\n"


@pytest.mark.parametrize("boms", [1, 2])
async def test_a_file_read_for_a_prompt_is_attached_less_one_bom_the_editors_text_as_sent(
        tmp_path: Path, boms: int) -> None:
    """render took a U+FEFF off any text from line 0, a selection's the editor sent (which
    has none of the file's BOM) too. It is taken off where pi-lsp reads the file, from the disk
    or an unsaved buffer (`unsaved_text` gives its BOM back): one, as pi 1.6 takes off
    (test_attachments' fixtures)."""
    path = tmp_path / "a.txt"
    path.write_bytes(b"\xef\xbb\xbf" * boms + b"one\ntwo\n")
    kept = "\ufeff" * (boms - 1)  # a second BOM is the file's text
    first_line = RangeArg(PositionArg(0, 0), PositionArg(1, 0))
    whole, line = '<file path="a.txt">\n{}</file>', '<file path="a.txt" lines="1-1">\n{}</file>'
    cases = [(EditorFiles(cast(LanguageServer, SimpleNamespace(
        workspace=SimpleNamespace(text_documents={})))), f"{kept}one\ntwo\n")]
    if boms == 1:  # an editor showing a second BOM is told from one that kept the first by none
        document = TextDocument(path.as_uri(), "one\ntwo\nx\n", version=1)
        buffer = applying_editor(document)
        buffer.synced(document.uri)
        await buffer.settle()
        assert buffer.buffer_text(path) == "\ufeffone\ntwo\nx\n"
        cases.append((buffer, "one\ntwo\nx\n"))
    for files, text in cases:
        for item, shown in ((ContextArg(uri=path.as_uri()), whole.format(text)),
                            (ContextArg(uri=path.as_uri(), range=first_line),
                             line.format(f"{kept}one\n")),
                            (ContextArg(uri=path.as_uri(), text="\ufeffc", range=first_line),
                             line.format("\ufeffc\n"))):
            assert render(await attachment(files, item, 0, tmp_path, allow_all),
                          tmp_path) == shown


def configure(pi: Pi, fake: FakeAnthropic, **extra: Any) -> None:
    """Send the module's settings with `extra` over them, as the editor does when they change."""
    pi.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"piLsp": {**init_options(fake), "toolApproval": "auto", **extra}}))


async def test_diagnostics_feedback_can_be_turned_off(pi: Pi, editor: Editor,
                                                      fake: FakeAnthropic) -> None:
    path = pi.main / "quiet.py"
    path.write_text(DISK_TEXT)
    open_document(pi, path, "LIMIT = 3  # unsaved\n")
    configure(pi, fake, diagnosticsFeedback=False)
    try:
        asked = len(editor.asked)
        fake.script(tool_reply([("e2", "edit", {"path": "quiet.py", "oldText": "LIMIT = 3",
                                                "newText": "LIMIT = 4"})]), text_reply("done"))
        since = pi.mark()
        await run_prompt(pi, await new_session(pi), "Again")
        assert len(editor.asked) == asked and len(fake.message_requests()) == 2
        assert not [p for p in pi.of(TURN, since) if p["event"]["type"] == "error"]
    finally:
        configure(pi, fake)  # the other tests' turns are offered the editor's problems


async def test_a_lone_surrogate_reaches_the_editor_as_pi_writes_it(pi: Pi, editor: Editor,
                                                                  fake: FakeAnthropic) -> None:
    """A model's "\\ud83d" (valid JSON) went to the editor as a lone surrogate, which no
    editor can hold or save; pi writes U+FFFD in its place, and so does the edit sent now."""
    path = pi.main / "faces.py"
    path.write_text("FACE = 1\n")
    open_document(pi, path, "FACE = 2\n")
    before = len(editor.edits)
    fake.script(tool_reply([("s1", "edit", {"path": "faces.py", "oldText": "2",
                                            "newText": "'\ud83d'"})]), text_reply("done"))
    events = await run_prompt(pi, await new_session(pi), "Smile")
    assert not [e for e in events if e["type"] == "tool_execution_end" and e["isError"]]
    change = editor.edits[before]["edit"]["documentChanges"][0]
    assert change["edits"][0]["newText"] == "'\ufffd'"
    assert path.read_text() == "FACE = 1\n"  # the disk waits for the user to save


async def test_an_abort_while_the_editor_applies_an_edit_records_the_edit(
        pi: Pi, editor: Editor, fake: FakeAnthropic) -> None:
    """The abort stopped the wait for the editor's answer, not the edit: the buffer changed
    and the session said "Tool execution was aborted". The answer is waited for."""
    path = pi.main / "held.py"
    path.write_text("HELD = 1\n")
    open_document(pi, path, "HELD = 2\n")
    editor.applying.clear()
    editor.held = asyncio.Event()
    fake.script(tool_reply([("h1", "edit", {"path": "held.py", "oldText": "2",
                                            "newText": "3"})]), text_reply("never asked for"))
    uri = await new_session(pi)
    since = pi.mark()
    answer = await call(pi.client, "pi.prompt", {"uri": uri, "text": "Hold on"})
    await asyncio.wait_for(editor.applying.wait(), CEILING_S)
    assert await call(pi.client, "pi.abort", {"uri": uri}) == {"aborted": True}
    editor.held.set()
    editor.held = None
    events = await wait_events(pi, answer["turnId"], since)
    assert tool_texts(events)["h1"] == "Successfully replaced 1 block(s) in held.py."
    assert len(fake.message_requests()) == 1


# -- the pieces, without a server ------------------------------------------------------------


class MemoryFiles:
    """File access that never touches the disk, as an editor's would not for open buffers."""

    def __init__(self, files: dict[Path, str]) -> None:
        self.files = files

    def read_text(self, path: Path) -> str | None:
        return self.files.get(path)

    def buffer_text(self, path: Path) -> str | None:
        return self.files.get(path)  # as an open buffer not saved: the disk is never read

    async def write_text(self, path: Path, text: str, old: str | None,
                         seen: tuple[int, ...] | None = None) -> None:
        self.files[path] = text


async def test_harness_feedback_is_capped_and_edits_go_through_its_file_access(
        tmp_path: Path, fake: FakeAnthropic) -> None:
    target = (tmp_path / "app.py").resolve()
    files = MemoryFiles({target: "v0\n"})
    asked: list[list[Path]] = []

    async def diagnostics(paths: list[Path]) -> str | None:
        asked.append(paths)
        return "The editor reports these problems in files you changed:\n- app.py:1:1: error: x"

    tree = SessionTree.create(str(tmp_path / "s.jsonl"), str(tmp_path))
    provider = AnthropicProvider("test-key", base_url=fake.url)
    harness = Harness(tree, tmp_path, lambda _name: provider, files=files,
                      diagnostics=diagnostics)
    replies = []
    for n in range(FEEDBACK_ROUNDS + 1):
        replies += [tool_reply([(f"e{n}", "edit", {"path": "app.py", "oldText": f"v{n}",
                                                    "newText": f"v{n + 1}"})]),
                    text_reply(f"done {n}")]
    fake.script(*replies)
    try:
        await harness.prompt("keep fixing")
    finally:
        await provider.client.close()
    assert asked == [[target]] * FEEDBACK_ROUNDS  # the last round's problems are not offered
    assert len(fake.message_requests()) == 2 * (FEEDBACK_ROUNDS + 1)
    assert files.files[target] == f"v{FEEDBACK_ROUNDS + 1}\n"
    assert not target.exists()


async def test_a_write_waits_for_no_key_typed_after_it_began_settling(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """settle() (every write and snapshot awaits it) waited for the comparison of each text the
    user typed next, so typing on in a large file (0.26 s a comparison for 100 MB) held them
    until a pause. It waits no longer than the comparison under way: a text typed since reads
    as unsaved, which is what the buffer holds."""
    path = tmp_path / "a.txt"
    path.write_text("a\n")
    document = TextDocument(path.as_uri(), "a\n", version=1)
    files = EditorFiles(cast(LanguageServer, SimpleNamespace(
        workspace=SimpleNamespace(text_documents={document.uri: document}))))
    started: list[str] = []
    gates = {"a\nb": threading.Event(), "a\nbc": threading.Event()}
    real_comparison = editor_module.disk_comparison

    def gated(text: str, where: Path) -> Any:
        started.append(text)
        if text in gates:  # (longer than the test waits for settle, which must not wait)
            assert gates[text].wait(2 * CEILING_S), "the test never let the comparison go on"
        return real_comparison(text, where)
    monkeypatch.setattr(editor_module, "disk_comparison", gated)

    def type_text(text: str) -> None:  # a didChange
        document._source = text
        files.synced(document.uri)
    type_text("a\nb")
    await until(lambda: started == ["a\nb"], "the first key's comparison")
    settling = asyncio.ensure_future(files.settle())
    await asyncio.sleep(0)  # one turn of the loop: settle starts waiting
    type_text("a\nbc")  # typed on while a write waits
    gates["a\nb"].set()
    await until(lambda: "a\nbc" in started, "the next key's comparison")
    done, _ = await asyncio.wait([settling], timeout=CEILING_S)
    meanwhile = files.buffer_text(path)
    gates["a\nbc"].set()
    await settling
    assert done, "settle waited for the comparison of a key typed after it began"
    assert meanwhile == "a\nbc"  # unsaved meanwhile: what was typed is what is read
    await files.settle()
    assert files.buffer_text(path) == "a\nbc"


async def test_a_document_whose_uri_holds_a_nul_names_no_file(tmp_path: Path) -> None:
    """A file: URI with %00 names no file (no file name holds a NUL): its comparison's stat
    raised ValueError in a task (a traceback in the log), and open_texts raised it, so every
    snapshot failed while it was open. It is no file's text: left out, as another scheme is."""
    uri = (tmp_path / "a").as_uri() + "%00b.txt"
    document = TextDocument(uri, "x", version=1)
    files = EditorFiles(cast(LanguageServer, SimpleNamespace(
        workspace=SimpleNamespace(text_documents={uri: document}))))
    files.synced(uri)
    assert not files.comparing
    await files.settle()
    assert files.open_texts() == {}


@pytest.mark.parametrize("name", ["My%20Doc.txt", "x%41y.txt", "a b.txt", "café.txt"])
async def test_an_open_file_whose_name_holds_a_percent_escape_is_read_unsaved(
        tmp_path: Path, name: str) -> None:
    """pygls keys its documents by the URI unquoted: EditorFiles.document read those keys as
    URIs, unquoting them again, so a file named `My%20Doc.txt` (as a browser downloads it)
    named `My Doc.txt`; its buffer was never found, and the agent read and wrote the disk."""
    path = tmp_path / name
    path.write_text("disk\n")
    workspace = Workspace(tmp_path.as_uri())
    uri = path.as_uri()  # percent-encoded, as editors send it (My%2520Doc.txt)
    workspace.put_text_document(types.TextDocumentItem(uri=uri, language_id="plaintext",
                                                       version=1, text="unsaved\n"))
    files = EditorFiles(cast(LanguageServer, SimpleNamespace(workspace=workspace)))
    files.synced(uri)
    await files.settle()
    assert files.read_text(path) == "unsaved\n"
    assert files.open_texts() == {path: "unsaved\n"}
