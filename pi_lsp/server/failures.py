"""How failures become answers: the one list of expected errors and their words. It imports
every module that raises one, so the server imports it at `initialized`, not before its
`initialize` answer (server.workbench)."""

from __future__ import annotations

from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

from pi_lsp.agent.harness import BusyError, NotRunningError
from pi_lsp.agent.loop import Aborted
from pi_lsp.files.history import RewindError, StoppedPartWay
from pi_lsp.files.snapshots import SnapshotError
from pi_lsp.providers.base import MissingApiKeyError
from pi_lsp.server.errors import BUSY, FAILED, server_error
from pi_lsp.server.hub import UnknownSessionError
from pi_lsp.server.workspace import ForeignFolderError
from pi_lsp.session.catalog import ForeignSessionError
from pi_lsp.session.records import UnknownEntryError
from pi_lsp.settings import SettingsError
from pi_lsp.summarize.branch import BranchRefusedError
from pi_lsp.summarize.compaction import NothingToCompactError
from pi_lsp.summarize.summarizer import SummaryError
from pi_lsp.trust import TrustError
from pi_lsp.visible import printable

# Failures that are answers, not faults: the user is told their message, and no traceback is
# logged. Anything else is a bug.
EXPECTED: tuple[type[Exception], ...] = (
    UnknownSessionError, UnknownEntryError, ForeignSessionError, ForeignFolderError, BusyError,
    NotRunningError, Aborted, NothingToCompactError, BranchRefusedError, SettingsError,
    SummaryError, MissingApiKeyError, RewindError, SnapshotError, TrustError, ValueError, OSError,
)


def failure_message(error: BaseException) -> str:
    """What the user reads about a failed turn or job: an expected error's own words, on one
    line (they may quote a name a repository chose: a session file, a models.json provider)."""
    if isinstance(error, EXPECTED):
        return printable(str(error)) or "cancelled"
    return printable(f"{type(error).__name__}: {error}")


def as_answer(error: Exception) -> Exception:
    """The JSON-RPC error a command answers with, its message on one line (as
    `failure_message`); an unexpected error is returned as it is."""
    if isinstance(error, JsonRpcException):
        return error
    said = printable(str(error))
    if isinstance(error, (UnknownSessionError, UnknownEntryError)):
        return JsonRpcInvalidParams(said)
    if isinstance(error, ForeignSessionError):
        return JsonRpcInvalidParams(
            f"invalid argument: `uri` is not a session of this workspace: {said}")
    if isinstance(error, ForeignFolderError):
        return JsonRpcInvalidParams(
            f"invalid argument: `folderUri` is not a workspace folder: {said}")
    if isinstance(error, BusyError):
        return server_error(said, BUSY)
    if isinstance(error, StoppedPartWay):  # so an editor's Undo can undo what it changed
        return server_error(said, FAILED, {"undoId": error.undo_id})
    if isinstance(error, EXPECTED):
        return server_error(said, FAILED)
    return error
