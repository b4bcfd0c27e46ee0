"""What the editor holds: its open documents (read unsaved, changed through
`workspace/applyEdit`), the code it sends with a prompt and its diagnostics for the files a
turn changed."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import msgspec
from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path
from pygls.workspace import TextDocument

from pi_lsp.agent.access import inside, secret_reason
from pi_lsp.agent.approval import ApprovalRequest, Approver
from pi_lsp.agent.attachments import (
    Attachment,
    Range,
    file_content,
    line_count,
    lines_of,
    mentions,
    render,
)
from pi_lsp.agent.feedback import FileProblems, Problem, problems_message
from pi_lsp.agent.splice import BOM
from pi_lsp.agent.tools import DISK, ToolError, disk_holds, well_formed, write_regular
from pi_lsp.jsonfile import BOM as UTF8_BOM
from pi_lsp.paths import real_path
from pi_lsp.regular import read_regular, settled, stat_key
from pi_lsp.sequences import shared_head, shared_tail
from pi_lsp.server.protocol import ContextArg, PromptArgs
from pi_lsp.session.entries import ToolCall

log = logging.getLogger(__name__)

DIAGNOSTICS = "pi/diagnostics"
DIAGNOSTICS_TIMEOUT_S = 10.0


def plain(value: Any) -> Any:
    """pygls hands custom-method results over as namedtuples; make them JSON values again."""
    if hasattr(value, "_asdict"):
        return {key: plain(item) for key, item in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return value


def experimental_flag(server: LanguageServer, name: str) -> bool:
    """Whether the client set `capabilities.experimental.piLsp.<name>` to true."""
    experimental = server.client_capabilities.experimental
    pi = experimental.get("piLsp") if isinstance(experimental, dict) else None
    return isinstance(pi, dict) and pi.get(name) is True


class EditorFiles:
    """The agent's file access in an editor.

    A document the editor has open is read as its unsaved text and written with
    `workspace/applyEdit` (so the buffer, its undo history and unsaved changes stay right; the
    user saves). Files that are not open are read and written on disk, as without an editor.
    """

    def __init__(self, server: LanguageServer) -> None:
        self.server = server
        # Text we applied, until the client's didChange for it arrives (the order of the
        # applyEdit answer and that notification is not fixed).
        self.applied: dict[str, str] = {}
        # Documents whose text differs from the disk's, as the client last sent it. The others
        # show the disk, which a turn's `bash` may change under them.
        self.unsaved: set[str] = set()
        # Whether each document showed its file, by the file's stat then: `read` and every
        # snapshot ask of all of them (10 clean 20 MB files were read whole at each: 750 ms).
        self.compared: dict[str, Comparison] = {}
        # The comparisons of didOpen and didChange, made in worker threads (a 100 MB file read
        # and compared on the event loop held it 0.26 s per keystroke); unsaved until done.
        self.comparing: dict[str, asyncio.Task[None]] = {}
        # Each of those tasks' comparison under way: what `settle` waits for (the task itself
        # goes on while the user types, and a write would wait for a pause in the typing).
        self.in_flight: dict[str, asyncio.Future[Comparison]] = {}
        # Documents saved while their comparison was under way: it may have read the disk
        # before the save, so it is made again (by the same task: one comparison at a time).
        self.resaved: set[str] = set()
        # The unsaved text of a document whose file starts with a BOM, with it (`unsaved_text`),
        # by the text it was made from: made once per change, not at each ask (50 MB: 60 ms).
        self.saved_as: dict[str, tuple[str, str]] = {}

    def document(self, path: Path) -> TextDocument | None:
        found = self.open_document(from_fs_path(str(path)) or "")
        if found is not None:
            return found
        # By each document's URI as sent, not pygls' key: that is unquoted once already, and a
        # file named `My%20Doc.txt` (a download) would be read as `My Doc.txt`.
        documents: dict[str, TextDocument] = self.server.workspace.text_documents
        for document in documents.values():
            other = file_path(document.uri)  # the client may encode URIs otherwise
            if other is not None and real_path(other) == path:
                return document
        return None

    def open_document(self, uri: str) -> TextDocument | None:
        """The document the client opened as `uri`, the key of its state here: pygls keys its
        documents by the URI unquoted (`%20` a space), which the client may not send."""
        documents: dict[str, TextDocument] = self.server.workspace.text_documents
        return documents.get(unquote(uri))

    def synced(self, uri: str) -> None:
        """The client opened or changed the document: its text is the truth again, unsaved
        when it is not the disk's as the editor shows it (an editor's reload is no edit).
        Compared in a worker thread: unsaved meanwhile, so the agent reads what was typed."""
        self.applied.pop(uri, None)
        self.compared.pop(uri, None)
        self.saved_as.pop(uri, None)
        self.unsaved.add(uri)
        path = file_path(uri)
        if path is not None and uri not in self.comparing:
            self.comparing[uri] = asyncio.ensure_future(self.compare_synced(uri, path))

    async def compare_synced(self, uri: str, path: Path) -> None:
        """Compare the document with its file until the text compared is still its text: one
        comparison at a time, of the latest text (typing fast in a 100 MB file queued one per
        keystroke, each holding its text). Closed meanwhile (`forget`), it stops."""
        task = asyncio.current_task()
        try:
            while self.comparing.get(uri) is task and \
                    (document := self.open_document(uri)) is not None:
                text = document.source
                self.resaved.discard(uri)
                comparing = self.in_flight[uri] = asyncio.ensure_future(
                    asyncio.to_thread(disk_comparison, text, path))
                comparison = await comparing
                if self.comparing.get(uri) is task and self.open_document(uri) is document \
                        and document.source is text and uri not in self.resaved:
                    self.compared[uri] = comparison
                    if comparison.same:
                        self.unsaved.discard(uri)
                        # Read meanwhile with its BOM, it is read from the disk now: a 50 MB
                        # buffer's copy (100 MB, the U+FEFF widening it) was kept till a key.
                        self.saved_as.pop(uri, None)
                    return
        finally:
            if self.comparing.get(uri) is task:
                del self.comparing[uri]
                self.in_flight.pop(uri, None)

    async def settle(self) -> None:
        """Wait for the comparisons of documents with their files (in worker threads): those
        of the last didOpen or didChange, but not past a key typed after this call (unsaved is
        what it reads as meanwhile: typing on in a 100 MB file held every write until a pause);
        and those of clean documents whose file changed."""
        called = {uri: document.source for uri in self.comparing
                  if (document := self.open_document(uri)) is not None}
        while waited := [uri for uri in self.comparing
                         if (document := self.open_document(uri)) is not None
                         and document.source is called.get(uri)]:
            pending = [self.in_flight[uri] for uri in waited
                       if uri in self.in_flight and not self.in_flight[uri].done()]
            if pending:
                await asyncio.wait(pending)
            else:  # a comparison about to start, or its result about to be taken
                await asyncio.sleep(0)
        for document in list(self.server.workspace.text_documents.values()):
            uri = document.uri
            path = file_path(uri)
            known = self.compared.get(uri)
            if path is None or uri in self.unsaved or uri in self.applied or (
                    known is not None and known.firm and self.known(uri, path) is not None):
                continue
            text = document.source
            comparison = await asyncio.to_thread(disk_comparison, text, path)
            if document.source is text:
                self.compared[uri] = comparison

    def saved(self, uri: str) -> None:
        """The client saved the document: compared with its file again, as when opened (a
        file the editor decoded otherwise, latin1 say, shows a text its disk does not hold)."""
        if uri in self.comparing:  # it may have read the disk before the save
            self.resaved.add(uri)
        self.synced(uri)

    def forget(self, uri: str) -> None:
        """The client closed the document (or saved it): the disk has its text."""
        self.applied.pop(uri, None)
        self.compared.pop(uri, None)
        self.saved_as.pop(uri, None)
        self.comparing.pop(uri, None)
        self.in_flight.pop(uri, None)
        self.resaved.discard(uri)
        self.unsaved.discard(uri)

    def open_texts(self) -> dict[Path, str | None]:
        """As FileAccess says; a stale document is left out: the disk is its file's text, and
        a restore writes it there."""
        texts: dict[Path, str | None] = {}
        for document in self.server.workspace.text_documents.values():
            path = file_path(document.uri)
            if path is None or self.stale(document, path):
                continue
            # realpath: a symlink loop is no error (Path.resolve raises on it).
            texts[Path(os.path.realpath(path))] = self.unsaved_text(document)
        return texts

    def unsaved_text(self, document: TextDocument) -> str | None:
        """The document's text when it has changes not saved, as its file holds it once saved;
        None when the disk has it."""
        if document.uri in self.applied:
            text = self.applied[document.uri]
        elif document.uri in self.unsaved:
            text = document.source
        else:
            return None
        # After the BOM the file starts with, which the editor dropped and writes back on save:
        # without it, an edit planned from the buffer was not the one planned from the disk
        # once saved (refused after approval), and was written to the disk without it.
        path = file_path(document.uri)
        if path is None or text.startswith(BOM) or not starts_with_bom(path):
            return text
        made = self.saved_as.get(document.uri)
        if made is None or made[0] is not text:
            made = self.saved_as[document.uri] = (text, BOM + text)
        return made[1]

    def shows(self, document: TextDocument, old: str | None, path: Path) -> bool:
        """Whether the document shows `old` (`holds`); by identity first with the text
        `unsaved_text` gave for it with the BOM, as `holds` with its own."""
        made = self.saved_as.get(document.uri)
        return (made is not None and made[0] is document.source and made[1] is old) or \
            holds(document.source, old, path)

    def as_shown(self, document: TextDocument, text: str, old: str | None, path: Path) -> str:
        """`text`, written over `old`, as the buffer shows it (`in_buffer`); less the BOM
        `unsaved_text` put before `old`, whatever the disk starts with by now."""
        made = self.saved_as.get(document.uri)
        if made is not None and made[1] is old and text.startswith(BOM):
            # The buffer's BOM, read with it: the disk's losing its own meanwhile (a checkout)
            # put a U+FEFF into the buffer, two BOMs once the editor saved it.
            return text[len(BOM):]
        return in_buffer(text, document.source, path)

    def read_text(self, path: Path) -> str | None:
        # A document with nothing unsaved is read from the disk, as `read` reads it: `bash` may
        # have changed the file and the editor not reloaded it yet (Neovim waits for :checktime).
        text = self.buffer_text(path)
        return DISK.read_text(path) if text is None else text

    def buffer_text(self, path: Path) -> str | None:
        document = self.document(path)
        return None if document is None else self.unsaved_text(document)

    def stale(self, document: TextDocument, path: Path) -> bool:
        """Whether the document has nothing unsaved but no longer shows the disk's text."""
        return self.unsaved_text(document) is None and not self.shows_disk(document, path)

    def shows_disk(self, document: TextDocument, path: Path) -> bool:
        """Whether the document's text is its file's, as `settle` compared them; unknown (the
        file changed since) counts as not: the disk is read, and written, as for a stale one."""
        return self.known(document.uri, path) is True

    def known(self, uri: str, path: Path) -> bool | None:
        """Whether the document showed its file when compared, if the file's stat is the same."""
        known = self.compared.get(uri)
        try:
            return known.same if known is not None and known.key == stat_key(os.stat(path)) \
                else None
        except OSError:
            return None

    def can_edit(self) -> bool:
        workspace = self.server.client_capabilities.workspace
        return workspace is not None and workspace.apply_edit is True

    def can_delete(self) -> bool:
        workspace = self.server.client_capabilities.workspace
        edits = workspace.workspace_edit if workspace is not None else None
        return self.can_edit() and edits is not None and \
            types.ResourceOperationKind.Delete in (edits.resource_operations or ())

    async def write_text(self, path: Path, text: str, old: str | None,
                         seen: tuple[int, ...] | None = None) -> None:
        text = well_formed(text)  # an editor can hold no lone surrogate; pi writes U+FFFD
        await self.settle()
        document = self.document(path)
        # A stale buffer is left for the editor to reload: an edit of it would be saved over
        # the disk's newer text, or clash with the reload. One closed since `old` was read (a
        # key typed, saved, closed; or closed unsaved) is refused by the disk's check, which
        # holds the key (or not the unsaved text); one closed as it was is written.
        if document is None or self.stale(document, path):
            await DISK.write_text(path, text, old, seen)
            return
        if not self.can_edit():
            await self.write_under(document, path, text, old, seen)
            return
        # Told here, where the edit is made at the buffer's version: a key typed since the
        # caller's check (a didChange the loop took first, or during settle) would be replaced.
        if not self.shows(document, old, path):
            raise changed_while_written(path)
        text = self.as_shown(document, text, old, path)
        # Only the changed span, so the editor's cursor, marks and undo stay where they were.
        edit = types.TextDocumentEdit(
            text_document=types.OptionalVersionedTextDocumentIdentifier(
                uri=document.uri, version=document.version),
            edits=[smallest_edit(document.source, text,
                                 document.position_codec.client_num_units)])
        await self.apply(path, types.WorkspaceEdit(document_changes=[edit]), f"pi: {path.name}")
        self.applied[document.uri] = text

    async def write_under(self, document: TextDocument, path: Path, text: str, old: str | None,
                          seen: tuple[int, ...] | None) -> None:
        """Write the disk under a buffer this editor cannot change: told to hold `old` where
        that was read from it; else `old` is the buffer's unsaved text, which stays there."""
        if self.unsaved_text(document) is None:
            await DISK.write_text(path, text, old, seen)
        else:
            await asyncio.to_thread(lambda: write_regular(path, text.encode()))

    async def delete_in_editor(self, path: Path, old: str | None) -> None:
        document = self.document(path)
        if document is None:  # closed since it was read (saved, maybe with a key typed)
            if not await asyncio.to_thread(disk_holds, path, old, None):
                raise ToolError(f"{path} changed on disk since it was read; it was not "
                                "deleted.")
            return
        if not self.can_delete():
            return
        if not self.shows(document, old, path):  # a key typed since: it would go too
            raise ToolError(f"{path} changed in the editor while it was being deleted; it was "
                            "not deleted.")
        delete = types.DeleteFile(uri=document.uri,
                                  options=types.DeleteFileOptions(ignore_if_not_exists=True))
        await self.apply(path, types.WorkspaceEdit(document_changes=[delete]),
                         f"pi: delete {path.name}")
        self.forget(document.uri)

    async def apply(self, path: Path, edit: types.WorkspaceEdit, label: str) -> None:
        try:
            answer = await self.server.workspace_apply_edit_async(
                types.ApplyWorkspaceEditParams(edit=edit, label=label))
        except JsonRpcException as error:  # an error answer (its handler threw): not applied
            raise ToolError(f"the editor did not apply the change to {path}: "
                            f"{error.message}") from None
        if not answer.applied:
            raise ToolError(f"the editor did not apply the change to {path}"
                            f"{': ' + answer.failure_reason if answer.failure_reason else ''}")


def file_path(uri: str) -> Path | None:
    """The file a document's URI names; None for another scheme, or a NUL (`%00`), which no
    file name holds (the OS refuses it: a stat raised in the comparison's task)."""
    path = to_fs_path(uri) if uri.startswith("file:") else None
    return None if path is None or "\0" in path else Path(path)


class Comparison(msgspec.Struct, frozen=True):
    """Whether a document's text was its file's, at the file's stat then."""

    key: tuple[int, ...] | None  # None: the file was gone
    firm: bool  # else the file may change within that stat: compared again at each `settle`
    same: bool


def disk_comparison(text: str, path: Path) -> Comparison:
    """Whether an editor showing its file would show `text`, at the file's stat."""
    try:
        info = os.stat(path)  # before the read: a change after it makes another stat
    except OSError:
        return Comparison(None, False, False)
    same = same_as_disk(text, path)
    return Comparison(stat_key(info), settled(info), same)


def same_as_disk(text: str, path: Path) -> bool:
    """Whether an editor that read the file as UTF-8 shows `text`: VS Code and Neovim drop its
    BOM (and write it back on save), and show a byte that is not UTF-8 as U+FFFD."""
    replaced = "\ufffd" in text
    try:
        content = text.encode()
        # Only a text with U+FFFD can differ in size from its bytes: typing in any other is
        # no read of its file.
        if not replaced and os.stat(path).st_size - len(content) not in (0, len(UTF8_BOM)):
            return False
        data = read_regular(path)
    except (OSError, UnicodeEncodeError):
        return False
    if data.startswith(UTF8_BOM) and not text.startswith(BOM):
        data = data[len(UTF8_BOM):]
    return data == content or (replaced and data.decode("utf-8", "replace") == text)


def changed_while_written(path: Path) -> ToolError:
    """The refusal of a write whose file the user changed in the editor since it was read."""
    return ToolError(f"{path} changed in the editor while it was being written; nothing was "
                     "written. Read it again.")


def holds(buffer: str, old: str | None, path: Path) -> bool:
    """Whether a buffer shows `old`, its file's text as read (None: no file, an empty buffer);
    by identity first, as `compare_synced` tells a 100 MB text unchanged."""
    return buffer is old or buffer == in_buffer(old or "", buffer, path)


def in_buffer(text: str, buffer: str, path: Path) -> str:
    """`text`, read from the disk, as a buffer shows it: less the BOM its file starts with, which
    the editor writes back on save (in the buffer it would be a second one)."""
    if not text.startswith(BOM) or buffer.startswith(BOM):
        return text
    return text[len(BOM):] if starts_with_bom(path) else text


def starts_with_bom(path: Path) -> bool:
    """Whether the file at `path` starts with a UTF-8 BOM (False when it cannot be read)."""
    try:
        return read_regular(path, len(UTF8_BOM)) == UTF8_BOM
    except OSError:
        return False


def smallest_edit(old: str, new: str, units: Callable[[str], int] = len) -> types.TextEdit:
    """The one edit that turns `old` into `new`: the span between their common prefix and
    suffix; `units` counts a line's characters as the client does."""
    start = shared_head(old, new)
    if start and old[start - 1] == "\r":  # never split a CRLF: a lone CR breaks a line too
        start -= 1
    kept = shared_tail(old, new, min(len(old), len(new)) - start)
    if kept and old[-kept] == "\n" and "\r" in (old[-kept - 1:-kept], new[-kept - 1:-kept]):
        kept -= 1
    return types.TextEdit(range=types.Range(position_at(old, start, units),
                                            position_at(old, len(old) - kept, units)),
                          new_text=new[start:len(new) - kept])


def position_at(text: str, offset: int, units: Callable[[str], int]) -> types.Position:
    """The LSP position of `text[offset]` (lines end at CR, LF or CRLF, as LSP counts them)."""
    line = text.count("\n", 0, offset) + text.count("\r", 0, offset) - \
        text.count("\r\n", 0, offset)
    line_start = max(text.rfind("\n", 0, offset), text.rfind("\r", 0, offset)) + 1
    return types.Position(line, units(text[line_start:offset]))


class UriProblems(msgspec.Struct):
    uri: str
    items: list[Problem]


class DiagnosticsReply(msgspec.Struct):
    diagnostics: list[UriProblems]


async def editor_problems(server: LanguageServer, root: Path, paths: list[Path]) -> str | None:
    """Ask the editor (`pi/diagnostics`) about the files; its errors and warnings as a message."""
    uris = [from_fs_path(str(p)) or str(p) for p in paths]
    try:
        raw = await asyncio.wait_for(server.protocol.send_request_async(
            DIAGNOSTICS, {"uris": uris}), DIAGNOSTICS_TIMEOUT_S)
        reply = msgspec.convert(plain(raw), DiagnosticsReply)
        reports = [FileProblems(Path(to_fs_path(r.uri) or r.uri), r.items)
                   for r in reply.diagnostics]
    except Exception as error:  # no answer is no feedback, never a failed turn
        log.warning("pi/diagnostics failed: %s", error)
        return None
    return problems_message(reports, root)


class AttachmentRefused(ValueError):
    """A file sent with a prompt that `read` would not read, or that the user did not allow."""


class PromptAttachments(msgspec.Struct):
    rendered: list[str]  # as the model reads them
    refused: list[str]  # `@path` mentions left as text, and why


async def prompt_attachments(files: EditorFiles, root: Path, args: PromptArgs,
                             approve: Approver) -> PromptAttachments:
    """The prompt's code context and `@path` mentions, under `read`'s rules: a secret is never
    attached, and a file outside the workspace only if the user allows it."""
    found = [await attachment(files, item, i, root, approve) for i, item in enumerate(args.context)]
    named = {a.path for a in found if a.range is None}
    mentioned = mentions(args.text, root, files)
    found += [a for a in mentioned.found if a.path not in named]
    return PromptAttachments([render(a, root) for a in found], mentioned.refused)


async def attachment(files: EditorFiles, item: ContextArg, index: int, root: Path,
                     approve: Approver) -> Attachment:
    """One `context` item: its text as sent, else the file's (open documents unsaved)."""
    field = f"`context[{index}].uri`"
    raw = to_fs_path(item.uri) if item.uri.startswith("file:") else None
    if raw is None:
        raise JsonRpcInvalidParams(f"invalid argument: {field} must be a file: URI, "
                                   f"not {item.uri!r}")
    if "\0" in raw:  # no file can have it (%00): say which argument, not the OS's words
        raise JsonRpcInvalidParams(f"invalid argument: {field} names a path with a NUL "
                                   f"character: {item.uri!r}")
    reason = secret_reason(Path(raw))
    if reason is not None:
        raise AttachmentRefused(f"{raw} (context[{index}]) is not attached: reading it is "
                                f"refused because {reason}")
    path = Path(os.path.realpath(raw))  # Path.resolve raises on a symlink loop (< 3.13)
    if not inside(path, Path(os.path.realpath(root))):
        call = ToolCall(id=f"context-{index}", name="read", arguments={"path": str(path)})
        refusal = await approve(ApprovalRequest(call, outside_workspace=True, path=path,
                                                 attachment=True))
        if refusal is not None:
            raise AttachmentRefused(f"{raw} (context[{index}]) is outside the workspace and "
                                    f"was not attached: {refusal}")
    span = None
    if item.range is not None:
        end = item.range.end
        # A selection of whole lines ends at the start of the next line.
        last = end.line - 1 if end.character == 0 and end.line > item.range.start.line \
            else end.line
        span = Range(item.range.start.line, last)
    text = item.text
    if text is None:
        try:
            text = await file_text(files, path)
        except (OSError, UnicodeDecodeError) as error:
            raise JsonRpcInvalidParams(
                f"invalid argument: {field} cannot be read ({error})") from None
        if text is None:
            raise JsonRpcInvalidParams(f"invalid argument: {field} names no file: {item.uri}")
        text = file_content(text)
        if span is not None:
            text = lines_in(text, span, f"`context[{index}].range`")
    return Attachment(path=path, text=text, range=span, language_id=item.language_id)


async def file_text(files: EditorFiles, path: Path) -> str | None:
    """The file's text as `read_text` gives it, the disk read in a worker thread: a prompt
    sending a 1 GB file by its URI held every editor request for the read."""
    text = files.buffer_text(path)
    return await asyncio.to_thread(DISK.read_text, path) if text is None else text


def lines_in(text: str, span: Range, field: str) -> str:
    """The lines of a file a range covers; a range past its end is refused, naming `field`
    (it would be sent as lines the file does not have, with no text)."""
    count = line_count(text)
    if span.end_line >= count:
        raise JsonRpcInvalidParams(f"invalid argument: {field} ends at line {span.end_line + 1}, "
                                   f"past the end of the file ({count} lines)")
    return lines_of(text, span)
