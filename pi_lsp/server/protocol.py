"""The LSP surface: pygls fixes, method names, and the typed arguments of every command."""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import logging
import math
import re
from collections.abc import Generator, Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar
from urllib.parse import unquote

import cattrs
import msgspec
from cattrs.v import format_exception
from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcParseError,
    JsonRpcRequestCancelled,
)
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    LanguageServerProtocol,
    lsp_method,
)
from pygls.uris import from_fs_path

from pi_lsp.agent.images import image_bytes
from pi_lsp.providers.registry import ModelInfo
from pi_lsp.session.entries import UserBlock
from pi_lsp.session.jsontext import (
    Decoder,
    encoder,
    js_integer,
    lone_surrogates_replaced,
    surrogate_error,
)

SESSIONS_CHANGED = "pi/sessionsChanged"
SESSION_CHANGED = "pi/sessionChanged"
TURN = "pi/turn"
JOB_DONE = "pi/jobDone"
APPROVE_TOOL = "pi/approveTool"  # server → client request, when the client advertises it

T = TypeVar("T")
_any_decoder: Decoder[Any] = Decoder(Any)
log = logging.getLogger(__name__)


def uri_of(path: Path) -> str:
    return from_fs_path(str(path)) or str(path)


@dataclass(frozen=True)
class Unfit:
    """A message whose fields do not fit its method's types, which pygls leaves unanswered."""

    id: int | str | None  # a request's, to answer it; None: a notification, only logged
    method: Any
    problem: str  # naming each field by its path: "… @ $.params.position"


class PiProtocol(LanguageServerProtocol):
    """pygls 2.1.1 with the protocol fixes pi-lsp needs (see reference/stack.md §1.4, §1.7):
    every request is answered, a malformed one included."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._writes: set[asyncio.Future[Any]] = set()
        # The `shutdown` request's id from its arrival (pygls sets `_shutdown` only once it is
        # answered, and drops every message after that, responses included).
        self.shutdown_id: int | str | None = None
        # The result future of the generator handler whose next step is being started.
        self._stepping: Future[Any] | None = None
        # A generator handler's result future -> the step it runs now, which a cancel stops.
        self._steps: dict[Any, Any] = {}
        self.ending = False  # the requests in flight were cancelled: the server ends

    def _serialize_message(self, data: Any) -> Any:
        if isinstance(data, msgspec.Struct | msgspec.Raw):
            return _any_decoder.decode(encoder.encode(data))
        return super()._serialize_message(data)

    def _send_data(self, data: Any) -> None:
        """Responses and notifications whose payload is ours are encoded by msgspec, which is
        several times faster than `json.dumps` on large trees and previews. No message carries
        a lone surrogate (session text may hold one): Neovim would drop the whole message."""
        if not data or self.writer is None:
            super()._send_data(data)
            return
        try:
            body = _fast_body(data) or json.dumps(data, default=self._serialize_message).encode()
        except Exception as error:  # as pygls does: the request gets an error, the server goes on
            log.exception("Error sending data")
            self._server._report_server_error(error, JsonRpcInternalError)
            return
        body = lone_surrogates_replaced(body)
        header = f"Content-Length: {len(body)}\r\n\r\n".encode() if self._include_headers \
            else b""
        result = self.writer.write(header + body)
        if inspect.isawaitable(result):  # the TCP writer; stdio writes synchronously
            pending = asyncio.ensure_future(result)
            self._writes.add(pending)
            pending.add_done_callback(self._writes.discard)

    def _execute_handler(self, msg_id: Any, handler: Any, callback: Any,
                         args: tuple[Any, ...] | None = None,
                         kwargs: dict[str, Any] | None = None) -> None:
        # pygls files the inner step of a generator handler (every executeCommand) under a
        # fresh uuid and never removes it, so every command's result would be kept forever.
        super()._execute_handler(msg_id, handler, callback, args, kwargs)
        future = self._request_futures.get(msg_id)
        if future is not None:
            future.add_done_callback(lambda done: self._forget_future(msg_id, done))
            if self._stepping is not None:
                # `$/cancelRequest` names the client's id, whose future is the generator's
                # result: only this ties the command itself to it, so a cancel stops it.
                self._stepping.add_done_callback(lambda outer: _cancel_with(outer, future))
                self._step(self._stepping, future)

    def _step(self, outer: Future[Any], step: Any) -> None:
        """File `step` as the one `outer`'s generator runs now, until it ends."""
        self._steps[outer] = step
        step.add_done_callback(lambda _done: self._steps.pop(outer, None)
                               if self._steps.get(outer) is step else None)

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        """`$/cancelRequest`: a command's step is cancelled, and answers as it ends."""
        # pygls cancelled the command's result, answering "cancelled" at once, however its
        # work ended: a restore running to its end (its undo id) was told to nobody.
        step = self._steps.get(self._request_futures.get(msg_id))
        if isinstance(step, asyncio.Future):  # its work stops, and its end is the answer
            step.cancel()
            return
        super()._handle_cancel_notification(msg_id)

    def _forget_future(self, msg_id: Any, future: Any) -> None:
        if self._request_futures.get(msg_id) is future:
            del self._request_futures[msg_id]

    def _run_generator(self, future: Any, *, gen: Generator[Any, Any, Any],
                       result_future: Future[Any]) -> None:
        if result_future.cancelled() and future is not None and not future.cancelled():
            # Nobody else reads a step of a cancelled request: its JsonRpcRequestCancelled was
            # logged as "Task exception was never retrieved" with a traceback.
            error = future.exception()
            if error is not None and not isinstance(error, JsonRpcRequestCancelled):
                # Answered cancelled (the server ends), it failed after: a restore stopped
                # part-way names what it changed and its undo id, which only the log can tell.
                log.warning("a request answered cancelled failed after: %s", error)
        if future is not None and not result_future.done() and _cancelled(future):
            result_future.cancel()  # its step cancelled (`$/cancelRequest`): answered so
            return
        outer, self._stepping = self._stepping, result_future
        try:
            super()._run_generator(future, gen=gen, result_future=result_future)
        finally:
            self._stepping = outer

    def receive(self, body: bytes) -> None:
        """Handle one message as read off the wire; what is not one is answered as JSON-RPC
        says (pygls raised, which logged a traceback and answered nothing)."""
        try:
            data = json.loads(body, parse_int=js_integer)  # 5,000 digits: Infinity, as in JS
        except RecursionError:  # deeper than Python decodes: its ids are read to answer them
            if body.lstrip()[:1] == b"[":
                self._refuse_deep_batch(body)
            else:
                self._refuse_deep(next(_objects_at(body, 1), {}))
            return
        except ValueError as error:  # not JSON, or not UTF-8
            self._refuse(None, JsonRpcParseError(f"Parse error: {error}"))
            return
        if data == []:
            self._refuse(None, BATCH)
        elif isinstance(data, list):
            self._refuse_batch(_request_id(element) if isinstance(element, dict) else None
                               for element in data if _owed_an_answer(element))
        elif not (isinstance(data, dict) and data.get("jsonrpc") == "2.0"):
            # pygls leaves another version unanswered ("Unknown message")
            self._refuse(_request_id(data) if isinstance(data, dict) else None,
                         JsonRpcInvalidRequest("Invalid Request: not a JSON-RPC 2.0 message"))
        elif data.get("method", "") is None and _request_id(data) in self._result_types:
            # an answer to the server's request that also says "method": null: taken for a
            # request, it was refused and the request (a tool's approval) waited forever
            self.handle_message(self.structure_message(
                {key: value for key, value in data.items() if key != "method"}))
        elif "method" in data and not (isinstance(data["method"], str) and _fits_id(data)):
            # pygls answered -32603 with its traceback (an id it cannot file, a method it
            # cannot name); JSON-RPC answers such a message with a null id
            self._refuse(None, JsonRpcInvalidRequest("Invalid Request: `method` must be a string"
                                                     " and `id` a string, a finite number or null"))
        elif not ("method" in data or "result" in data or "error" in data) \
                and _request_id(data) not in self._result_types:
            # neither a request nor a response: pygls raised, showing the user an error
            # (an answer to the server's request with neither, a Lua client's nil, is one)
            self._refuse(_request_id(data), JsonRpcInvalidRequest(
                "Invalid Request: a request needs a `method`"))
        else:
            self.handle_message(self.structure_message(data))

    def structure_message(self, data: Any) -> Any:
        # pygls logs a traceback for a request or notification that does not structure and
        # raises, so the request is never answered; it is kept as Unfit to be answered.
        if not (isinstance(data, dict) and "jsonrpc" in data and "method" in data):
            return self._structure_response(data)
        try:
            kind = self.get_message_type(data["method"])
            if kind is None:  # an unknown method, answered -32601; params are optional
                kind = JsonRPCRequestMessage if "id" in data else JsonRPCNotification
                data = {"params": None, **data}
            return self._converter.structure(data, kind)
        except Exception as error:
            return Unfit(_request_id(data), data["method"], _problem(error))

    def _structure_response(self, data: dict[str, Any]) -> Any:
        """The client's answer to a request of the server's. pygls raised on one that does not
        fit (a traceback, "Error in server: Invalid Params" shown, and the request, a tool's
        approval say, waited forever): it fails that request instead, saying why."""
        request_id = _request_id(data)
        result_type = self._result_types.pop(request_id, None) if request_id is not None else None
        failed = data.get("error") is not None  # `"error": null` beside a result is no error
        kind = types.ResponseErrorMessage if failed else result_type or JsonRPCResponseMessage
        # No result (a Lua client encoding nil leaves it out) is the null result JSON-RPC
        # means, where the method's result may be null (workDoneProgress/create's is).
        resultless = not failed and "result" not in data
        if not failed:
            data = {"result": None, **{k: v for k, v in data.items() if k != "error"}}
        try:
            return self._converter.structure(data, kind)
        except Exception as error:
            problem = "the editor's answer has neither result nor error" if resultless else \
                f"the editor's answer does not fit: {_problem(error)}"
        log.warning("request %s failed: %s", request_id, problem)
        return types.ResponseErrorMessage(id=request_id, error=types.ResponseError(
            code=JsonRpcInvalidParams.CODE, message=problem))

    def handle_message(self, message: Any) -> None:
        request_id = getattr(message, "id", None) if hasattr(message, "method") else None
        shut = self._shutdown or self.shutdown_id is not None
        if request_id is not None and shut and message.method != types.EXIT:
            self._refuse(request_id, JsonRpcInvalidRequest(
                "the server is shut down: only `exit` is accepted"))
        elif not hasattr(message, "method") and self._gave_up_on(message.id):
            # pygls set the answer on the cancelled request, which raised InvalidStateError:
            # a traceback, and "Error in server: CANCELLED" shown in the editor.
            log.info("an answer to request %s, no longer waited for, was ignored", message.id)
        elif isinstance(message, Unfit):
            if request_id is None:
                log.warning("a %s notification was ignored: %s", message.method, message.problem)
            else:
                self._refuse(request_id, JsonRpcInvalidParams(
                    f"invalid params: {message.problem}"))
        else:
            if request_id is not None and message.method == types.SHUTDOWN:
                self.shutdown_id = request_id
            super().handle_message(message)

    def _gave_up_on(self, msg_id: Any) -> bool:
        """Whether `msg_id` is a request of the server's whose wait was cancelled (by the end's
        grace, or a wait's timeout); it is forgotten, as an answer would have it."""
        future = self._request_futures.get(msg_id)
        if future is None or not future.cancelled():
            return False
        del self._request_futures[msg_id]
        return True

    async def shutdown_answered(self) -> None:
        """Return once the `shutdown` request received (if any) is answered."""
        future = self._request_futures.get(self.shutdown_id) \
            if self.shutdown_id is not None else None
        if future is not None:
            await asyncio.wait([asyncio.wrap_future(future)])

    def _refuse(self, request_id: int | str | None, error: JsonRpcException) -> None:
        """Answer the request with `error`, with no popup and no traceback in the log; with
        a null id (which pygls' response would leave out) when none can be read."""
        self._send_data({"jsonrpc": "2.0", "id": request_id,
                         "error": {"code": error.code, "message": error.message}})

    def _refuse_deep(self, message: dict[str, Any]) -> None:
        """Answer a message too deep to decode, read as `_objects_at` reads it, if it is a
        request: a response or notification is owed nothing."""
        if _owed_an_answer(message):
            self.handle_message(Unfit(_request_id(message), None, "nested too deeply"))
        else:
            log.warning("a response or notification nested too deeply was ignored")

    def _refuse_deep_batch(self, body: bytes) -> None:
        """Answer a batch too deep to decode as a decoded one is, from the objects read in it;
        holding none, it is not a batch JSON-RPC recognises."""
        elements = _objects_at(body, 2)
        first = next(elements, None)
        if first is None:
            self._refuse(None, BATCH)
        else:
            self._refuse_batch(_request_id(element) for element
                               in itertools.chain([first], elements)
                               if _owed_an_answer(element))

    def _refuse_batch(self, ids: Iterable[int | str | None]) -> None:
        """Answer each request of a batch (LSP has none), as JSON-RPC says, one answer per
        distinct id; requests whose id cannot be read share one answer, which no client can
        match anyway, and so do all of a batch of more than MAX_BATCH requests, so the answer
        costs less than decoding the batch did however many elements it has."""
        readable: dict[int | str, None] = {}  # each id once, in order
        shared = False  # whether some request gets the id-null answer
        count = 0
        for count, request_id in enumerate(ids, 1):
            if count > MAX_BATCH:  # no id is read past this: one answer for them all
                readable, shared = {}, True
                break
            if request_id is None:
                shared = True
            else:
                readable[request_id] = None
        if not count:  # only notifications (and responses): JSON-RPC answers nothing
            log.warning("a batch of notifications was ignored: %s", BATCH.message)
            return
        error = {"code": BATCH.code, "message": BATCH.message}
        self._send_data([{"jsonrpc": "2.0", "id": request_id, "error": error}
                         for request_id in [*readable, *([None] if shared else [])]])

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams
                                      ) -> Generator[Any, Any, None]:
        # pygls raises KeyError for a document never opened, which reached the user as
        # "Error in server: KeyError: 'file:///…'": a client's slip, logged.
        if unquote(params.text_document.uri) not in self.workspace.text_documents:
            log.warning("a change to %s, which is not open, was ignored",
                        params.text_document.uri)
            return
        yield from super().lsp_text_document__did_change(params)

    @lsp_method(types.SHUTDOWN)
    def lsp_shutdown(self, *args: Any) -> Generator[Any, Any, None]:
        if (handler := self.fm.features.get(types.SHUTDOWN)) is not None:
            yield handler, args, None
        self.cancel_in_flight()
        self._shutdown = True
        return None

    def cancel_in_flight(self) -> None:
        """Cancel every request in flight but the current one: the client's are answered
        cancelled, and the server's own waited for no longer."""
        self.ending = True
        current = self.msg_id
        # pygls' shutdown iterated the dict their callbacks shrink; a copy, so a shutdown
        # during a command still answers.
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != current and not future.done():
                future.cancel()

    def send_request(self, method: str, params: Any | None = None,
                     callback: Any = None, msg_id: Any = None) -> Future[Any]:
        """A request to the client; cut at once when the server ends, as no answer may come
        (pygls drops every message after `shutdown`) and a restore running to its end must not
        wait for one forever."""
        if not self.ending:
            return super().send_request(method, params, callback, msg_id)
        cut: Future[Any] = Future()
        cut.cancel()
        return cut

    async def end_in_flight(self) -> None:
        """Cancel the requests in flight, as `shutdown` does, and let their handlers end: at
        the input's end, SIGTERM or Ctrl-C, asyncio.run cancelled them as it closed, and each
        one's JsonRpcRequestCancelled was logged with a traceback."""
        # pygls files the client's coroutine handlers, asyncio tasks, with concurrent futures.
        futures: list[Any] = list(self._request_futures.values())
        handlers = [f for f in futures if isinstance(f, asyncio.Future)]
        self.cancel_in_flight()
        if handlers:
            await asyncio.wait(handlers)

    def stop_asking(self) -> None:
        """Wait no longer for the client's answers to the server's own requests (applyEdit,
        progress, questions): each waiter is cancelled, and an answer still coming ignored."""
        for msg_id in list(self._result_types):  # pygls drops an id once answered
            future = self._request_futures.get(msg_id)
            if future is not None and not future.done():
                future.cancel()

    @lsp_method(types.EXIT)
    def lsp_exit(self, *args: Any) -> Generator[Any, Any, None]:
        # An `exit` written right after `shutdown`, before its answer, is a clean exit too:
        # pygls' exit code (1 unless `_shutdown`) read that as an exit without shutdown.
        self._shutdown = self._shutdown or self.shutdown_id is not None
        yield from super().lsp_exit(*args)


BATCH = JsonRpcInvalidRequest("Invalid Request: LSP does not support batches")
# The most requests of one batch answered each by its id: a client's real batch is far smaller,
# and the answer to a larger one (millions of `{"id":0}` fit the 64 MB frame) is one id-null error.
MAX_BATCH = 100_000
# What a reader of the raw body needs to find a request's id: strings, and runs of brackets.
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[{]+|[\]}]+')
_MEMBERS = {b'"id"': "id", b'"method"': "method", b'"result"': "result", b'"error"': "error"}
_COLON = re.compile(rb"\s*:")
_ID_VALUE = re.compile(rb'\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*[,}]')


def _cancelled(step: Any) -> bool:
    """Whether a finished step was cancelled: a command's (`command`) says so by raising."""
    return bool(step.cancelled() or isinstance(step.exception(), JsonRpcRequestCancelled))


def _cancel_with(outer: Future[Any], step: Any) -> None:
    if outer.cancelled():
        step.cancel()


def _objects_at(body: bytes, level: int) -> Iterator[dict[str, Any]]:
    """The objects at `level` of nesting in `body` (1: the top), read without decoding
    anything: each holds the keys of _MEMBERS it has, its `id` (None where that does not
    decode to a number or string) and None for the others."""
    depth = 0
    found: dict[str, Any] | None = None
    for token in _TOKEN.finditer(body):
        text = token.group()
        if text[0] == ord('"'):
            if found is not None and depth == level and text in _MEMBERS \
                    and _COLON.match(body, token.end()):
                member = _MEMBERS[text]
                found[member] = _id_after(body, token.end()) if member == "id" else None
        elif text[0] in b"[{":
            if depth < level <= depth + len(text) and text[level - depth - 1] == ord("{"):
                found = {}
            depth += len(text)
        else:
            depth -= len(text)
            if depth < level and found is not None:
                yield found
                found = None


def _id_after(body: bytes, end: int) -> int | str | None:
    """The `id` whose key ends at `end`; None for one that is not a number or string, or does
    not decode (an invalid escape, more digits than Python reads)."""
    value = _ID_VALUE.match(body, end)
    if value is None:
        return None
    try:
        request_id: int | str = json.loads(value.group(1))
    except ValueError:
        return None
    return request_id


def _owed_an_answer(element: Any) -> bool:
    """Whether a batch element, or a message too deep to decode, is owed an answer: neither a
    notification nor a response."""
    if not isinstance(element, dict):
        return True
    if "method" in element:
        return "id" in element
    return not ("result" in element or "error" in element)


def _fits_id(data: dict[str, Any]) -> bool:
    """Whether a message's id, if any, is one JSON-RPC allows and an answer can carry (not
    1e400, which Python reads as infinity and JSON cannot write)."""
    value = data.get("id")
    return value is None or isinstance(value, str) or (
        isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value))


def _request_id(data: dict[str, Any]) -> int | str | None:
    """A request's id if it is one a response can carry; None for a notification."""
    value = data.get("id")
    return value if isinstance(value, int | str) and not isinstance(value, bool) else None


def _problem(error: Exception) -> str:
    """What does not fit, each field named by its path."""
    if isinstance(error, cattrs.BaseValidationError):
        return "; ".join(cattrs.transform_error(error, format_exception=_described))
    return f"{type(error).__name__}: {error}"  # a `method` that is not a string, say


def _described(error: BaseException, kind: type | None) -> str:
    if kind is None and type(error) is ValueError:  # lsprotocol's validators say what they want
        return f"invalid value ({error})"
    return format_exception(error, kind)


def _fast_body(data: Any) -> bytes | None:
    if getattr(data, "error", None) is not None:
        return None
    if hasattr(data, "result") and hasattr(data, "id"):
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": data.id, "result": data.result}
    elif hasattr(data, "method") and hasattr(data, "params") and not hasattr(data, "id"):
        message = {"jsonrpc": "2.0", "method": data.method, "params": data.params}
    else:
        return None
    payload = message.get("result", message.get("params"))
    if not isinstance(payload, msgspec.Struct | dict):
        return None
    try:
        return encoder.encode(message)
    except (TypeError, msgspec.EncodeError):
        return None  # something only pygls' own serializer knows (attrs types)


# Size limits on command arguments (in characters; lists in items), so one request cannot make
# the server hold or write something absurd. Generous for any real use.
Uri = Annotated[str, msgspec.Meta(max_length=4096)]
# pi writes 8-character ids, but a session file may hold any: far longer ones must stay nameable
# (a planted message with a 300-character id could not be edited out of the context).
Id = Annotated[str, msgspec.Meta(max_length=65_536)]
Short = Annotated[str, msgspec.Meta(max_length=1024)]  # names, labels, providers, model ids
Instructions = Annotated[str, msgspec.Meta(max_length=100_000)]
PromptText = Annotated[str, msgspec.Meta(max_length=1_000_000)]
ImageData = Annotated[str, msgspec.Meta(max_length=20_000_000)]  # base64
MAX_IMAGES = 20
MAX_CONTEXT = 50  # code attachments of one prompt
MAX_BLOCKS = 100  # content blocks of a replacement


class _Args(msgspec.Struct, rename="camel", forbid_unknown_fields=True, kw_only=True):
    pass


class NoArgs(_Args):
    pass


class NewSessionArgs(_Args):
    name: Short | None = None
    folder_uri: Uri | None = None


class SessionArgs(_Args):
    uri: Uri


class TreeArgs(SessionArgs):
    bookkeeping: bool = False  # leaf moves and context edits as rows too
    # Folded: the current path's last `limit` rows and one row per branch off them; with
    # `under`, the `limit` rows from `start` folded under that row; with `after`, the `limit`
    # branches from `start` left out after that one.
    limit: Annotated[int, msgspec.Meta(ge=1, le=100_000)] | None = None
    under: Id | None = None
    after: Id | None = None
    start: Count = 0

    def __post_init__(self) -> None:
        if self.under is not None and self.after is not None:
            raise ValueError("give `under` or `after`, not both")


class PreviewArgs(SessionArgs):
    leaf_id: Id | None = None
    layer: Literal["agent", "llm", "request"] = "agent"
    # Paged: `page` messages from `start`, or from `entry_id`'s first message, or (neither)
    # the first and the last page.
    page: Annotated[int, msgspec.Meta(ge=1, le=10_000)] | None = None
    start: Count | None = None
    entry_id: Id | None = None

    def __post_init__(self) -> None:
        if self.entry_id is not None and (self.page is None or self.start is not None):
            raise ValueError("`entryId` starts a page: give it with `page` and without `start`")


class DiffArgs(SessionArgs):
    from_leaf_id: Id
    to_leaf_id: Id | None = None  # the current leaf


class BranchArgs(SessionArgs):
    target_id: Id


class MoveArgs(BranchArgs):
    edit: bool = False  # Edit Prompt: the leaf's own prompt too is left for its parent


class BranchSummaryArgs(BranchArgs):
    instructions: Instructions | None = None


class CompactArgs(SessionArgs):
    instructions: Instructions | None = None
    dry_run: bool = False


class ReplacementArg(_Args):
    content: PromptText | Annotated[list[UserBlock], msgspec.Meta(max_length=MAX_BLOCKS)]


class EditContextArgs(BranchArgs):
    replacement: ReplacementArg | None  # null: remove the target from the context


class LabelArgs(BranchArgs):
    label: Short | None


class ForkArgs(SessionArgs):
    leaf_id: Id | None = None


class NameArgs(SessionArgs):
    name: Short


class ModelArgs(SessionArgs):
    provider: Short
    model_id: Short


class ThinkingArgs(SessionArgs):
    level: Literal["off", "minimal", "low", "medium", "high", "xhigh", "max"]


class FileChangesArgs(SessionArgs):
    entry_id: Id


class RestoreFilesArgs(SessionArgs):
    entry_id: Id | None = None
    undo_id: Id | None = None


class SetTrustArgs(_Args):
    folder_uri: Uri
    trusted: bool | None  # null forgets the folder's own decision
    save: bool = True  # in pi's trust store; false: for this server only
    parent: bool = False  # trust the parent folder instead (pi's "Trust parent folder")


class ImageArg(_Args):
    data: ImageData
    mime_type: Annotated[str, msgspec.Meta(max_length=100)]

    def __post_init__(self) -> None:
        image_bytes(self.data, "`data`")  # refused here, not in the turn after `{turnId}`


Count = Annotated[int, msgspec.Meta(ge=0, le=2**53 - 1)]  # up to JavaScript's safe integers


class PositionArg(_Args):
    line: Count
    character: Count


class RangeArg(_Args):
    start: PositionArg
    end: PositionArg

    def __post_init__(self) -> None:
        if (self.end.line, self.end.character) < (self.start.line, self.start.character):
            raise ValueError("`end` is before `start`")


class ContextArg(_Args):
    """Code sent with a prompt: a selection (`text` and `range`) or a whole file."""

    uri: Uri
    text: PromptText | None = None
    range: RangeArg | None = None
    language_id: Short | None = None


class PromptArgs(SessionArgs):
    text: PromptText
    images: Annotated[list[ImageArg], msgspec.Meta(max_length=MAX_IMAGES)] = \
        msgspec.field(default_factory=list)
    context: Annotated[list[ContextArg], msgspec.Meta(max_length=MAX_CONTEXT)] = \
        msgspec.field(default_factory=list)
    delivery: Literal["prompt", "steer", "followUp"] = "prompt"


class ModelItem(msgspec.Struct, rename="camel"):
    """A model as `pi.listModels` lists it."""

    provider: str
    id: str
    name: str | None
    api: str
    reasoning: bool
    input: list[str]
    context_window: int
    max_tokens: int

    def __post_init__(self) -> None:
        self.name = self.name or self.id

    @classmethod
    def of(cls, model: ModelInfo) -> ModelItem:
        return msgspec.convert(model, cls, from_attributes=True)


class ApproveToolParams(msgspec.Struct, rename="camel", kw_only=True):
    """`pi/approveTool`: one tool call for the user to allow or deny, shown in full."""

    uri: str  # the session
    turn_id: str | None
    tool_call_id: str
    tool: str
    title: str  # catalog.session_title
    outside_workspace: bool
    # False where "allow for this session" would not be remembered (approvals.grant), so that
    # editors do not offer it only to ask again next time
    allow_for_session: bool
    # What "allow for this session" covers outside the workspace (approvals.outside_scope): a
    # folder and below, or `path` alone; unset where it covers the tool in the whole workspace
    session_scope: str | msgspec.UnsetType = msgspec.UNSET
    # true: a prompt's file outside the workspace, not a tool call, so editors keep the question
    # open when the `turn_id` turn ends (a follow-up queued behind it then starts a turn)
    attachment: bool | msgspec.UnsetType = msgspec.UNSET
    command: str | msgspec.UnsetType = msgspec.UNSET  # bash: the whole command
    path: str | msgspec.UnsetType = msgspec.UNSET  # read, write, edit: absolute
    old_text: str | msgspec.UnsetType | None = msgspec.UNSET  # write, edit; null: a new file
    new_text: str | msgspec.UnsetType = msgspec.UNSET  # write, edit: the whole new content
    diff: str | msgspec.UnsetType = msgspec.UNSET  # write, edit: unified, path in the headers


Decision = Literal["allow", "allowSession", "deny"]


class ApproveToolResult(msgspec.Struct):
    decision: Decision


def client_approves_tools(capabilities: types.ClientCapabilities) -> bool:
    """Whether the client said `experimental.piLsp.approveTool: true` in `initialize`."""
    value: Any = capabilities.experimental
    for key in ("piLsp", "approveTool"):
        value = value.get(key) if isinstance(value, dict) else getattr(value, key, None)
    return value is True


def json_text(answer: Any) -> str:
    """An editor's answer as JSON spells it (null, not Python's None), for an error naming it."""
    try:
        return msgspec.json.encode(_as_sent(answer)).decode()
    except (msgspec.EncodeError, TypeError, ValueError, RecursionError):  # a lone surrogate
        return repr(answer)


def _as_sent(value: Any) -> Any:
    """An answer as the editor sent it: pygls hands each object over as a namedtuple, which
    would encode as a list."""
    if hasattr(value, "_asdict"):
        return {key: _as_sent(item) for key, item in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [_as_sent(item) for item in value]
    return value


def parse_approval(answer: Any) -> ApproveToolResult | None:
    """The client's answer to `pi/approveTool` (pygls hands it over as a namedtuple); None
    when it is not one of the three decisions."""
    try:
        return msgspec.convert(_as_sent(answer), ApproveToolResult)
    except (msgspec.ValidationError, UnicodeEncodeError):  # msgspec's, on a lone surrogate
        return None


def parse_args(args: tuple[Any, ...], kind: type[T]) -> T:
    """The one object argument of a command, validated; bad input names the field."""
    if len(args) > 1:
        raise JsonRpcInvalidParams(f"expected one object argument, got {len(args)} arguments")
    value = args[0] if args else {}
    if value is None or value == []:
        value = {}  # Lua encodes an empty table as a list
    if not isinstance(value, dict):
        raise JsonRpcInvalidParams(f"the argument must be an object, not {type(value).__name__}")
    try:
        return msgspec.convert(value, kind)
    except msgspec.ValidationError as error:
        raise JsonRpcInvalidParams(f"invalid argument: {error}") from None
    except UnicodeEncodeError:  # in a key or a literal: msgspec cannot say where
        raise JsonRpcInvalidParams(
            f"invalid argument: {surrogate_error(value, kind)}") from None
