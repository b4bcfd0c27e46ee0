"""What every `pi-lsp` command shares: its exit codes, its one error, opening the session file it
is given, and writing JSON lines."""

from __future__ import annotations

import io
import logging
import os
import re
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, TextIO

import msgspec

from pi_lsp.providers.base_url import masked_passwords
from pi_lsp.session.entries import encoder
from pi_lsp.session.journal import NotASessionError
from pi_lsp.session.jsontext import js_json
from pi_lsp.session.tree import SessionTree
from pi_lsp.visible import printable, printable_lines

if TYPE_CHECKING:
    from pi_lsp.session.outline import TreeNode

EXIT_PROBLEMS = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command Ctrl-C stopped
EXIT_READER_GONE = 141  # 128 + SIGPIPE: the reader stopped before the output was all written


class CliError(Exception):
    """A problem with what the user asked for; printed as one line, escaped (it may quote a
    session, a settings file or a model's error)."""

    def __str__(self) -> str:
        return printable(super().__str__())


def open_session(path: str) -> SessionTree:
    if not os.path.exists(path):
        raise CliError(f"{path}: no such file")
    if os.path.isdir(path):
        raise CliError(f"{path}: is a directory, not a session file")
    try:
        return SessionTree.open(path)
    except NotASessionError as error:
        raise CliError(f"{path}: not a pi session file ({error})") from None
    except OSError as error:
        raise CliError(f"{path}: cannot read ({error.strerror})") from None


def write_line(value: object) -> None:
    """One JSON line; the newline is written apart so a large context is not copied again."""
    sys.stdout.buffer.write(encoder.encode(value))
    sys.stdout.buffer.write(b"\n")


def write_path_line(stream: TextIO, path: str, before: str = "", after: str = "") -> None:
    """A line naming a file, its path as its bytes: as text, a byte that is not UTF-8 prints as
    U+FFFD, naming a file that does not exist (`f=$(pi-lsp fork …)`)."""
    stream.flush()  # the text printed before it comes first
    stream.buffer.write(before.encode() + os.fsencode(path) + after.encode() + b"\n")


# A C1 control byte outside UTF-8, as surrogateescape decodes it (\x9b is CSI to some terminals).
C1_BYTES = re.compile("[\udc80-\udc9f]")


class EscapingWriter(io.BufferedIOBase):
    """The bytes of a terminal stream, control characters and bidi controls spelled as escapes
    (`printable_lines`: tab and newline kept); other bytes, a path's not in UTF-8, as they are."""

    def __init__(self, stream: io.TextIOWrapper) -> None:
        super().__init__()
        # The stream is held, not only its buffer: collected, it would close the buffer.
        self.stream, self.target, self.encoding = stream, stream.buffer, stream.encoding

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        text = printable_lines(bytes(data).decode(self.encoding, "surrogateescape"))
        text = C1_BYTES.sub(lambda byte: f"\\x{ord(byte.group()) - 0xDC00:02x}", text)
        self.target.write(text.encode(self.encoding, "surrogateescape"))
        return len(data)

    def flush(self) -> None:
        self.target.flush()

    def fileno(self) -> int:
        return self.target.fileno()

    def isatty(self) -> bool:
        return self.target.isatty()


class OneLineRecord(logging.LogRecord):
    """A log record whose message is one line: a name it quotes (a skill folder's, a session
    file's) may hold a line break, which the escaping stream keeps; a traceback keeps its lines.
    A password in a URL it quotes (a `baseUrl`'s) is masked."""

    def getMessage(self) -> str:
        return printable(masked_passwords(super().getMessage()))


def escape_stderr() -> None:
    """Make stderr spell what could drive the terminal: every message, error and log line of a
    command can name what a repository chose (a file, a folder, a provider), so none is printed
    raw, whichever code wrote it (a print, a log record, a path line)."""
    logging.setLogRecordFactory(OneLineRecord)  # whichever handler writes it, the server's too
    err = sys.stderr
    if type(err) is not io.TextIOWrapper or isinstance(err.buffer, EscapingWriter):
        return  # a test's capture, not a terminal; or escaped already (main run again)
    sys.stderr = io.TextIOWrapper(EscapingWriter(err), err.encoding, err.errors,
                                  line_buffering=True, write_through=True)


MESSAGES_BATCH = 1000


def write_messages(value: object, messages: list[msgspec.Raw]) -> None:
    """One JSON line: `value`, whose first field is an empty `messages`, with `messages` written
    in its place a batch at a time, as they are (a long context is tens of MB: never one copy)."""
    head, tail = encoder.encode(value).split(b"[]", 1)
    out = sys.stdout.buffer
    out.write(head + b"[")
    for start in range(0, len(messages), MESSAGES_BATCH):
        if start:
            out.write(b",")
        out.write(b",".join(messages[start:start + MESSAGES_BATCH]))
    out.write(b"]" + tail + b"\n")


def write_tree(roots: Sequence[TreeNode]) -> None:
    """One JSON line: the nested tree, written a node at a time without recursion (msgspec
    encodes nesting recursively, and an ordinary session is a chain thousands deep)."""
    out = sys.stdout.buffer
    out.write(b"[")
    pending: list[Iterator[TreeNode]] = [iter(roots)]
    first = True  # the next node opens its list: no comma before it
    while pending:
        node = next(pending[-1], None)
        if node is None:  # a list is done: close it, and the node it was the children of
            pending.pop()
            out.write(b"]}" if pending else b"]")
            first = False
            continue
        if not first:
            out.write(b",")
        # `children` is the node's last field: its encoding ends `[]}`; keep it through `[`.
        head = msgspec.structs.replace(node, id=_as_js(node.id), label=_as_js(node.label),
                                       children=[])
        out.write(encoder.encode(head)[:-2])
        pending.append(iter(node.children))
        first = True
    out.write(b"\n")


def _as_js(value: Any) -> Any:
    """A node's id or label with its numbers as pi's `JSON.stringify` writes them (1.5e+300,
    1e+21, 0.000001, 2): msgspec writes 1.5e300, 1e21, 1e-6 and 2.0."""
    if value is None or value is msgspec.UNSET or isinstance(value, str | msgspec.Raw):
        return value  # (UNSET: an entry with no id, whose row pi writes without one)
    return msgspec.Raw(js_json(value))


def discard_output(stream: TextIO | None = None) -> None:
    """Point stdout (or `stream`) at /dev/null (Python's documented way out of a reader gone):
    what is still buffered goes nowhere, so the flush at exit cannot fail and print a Python
    error."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, (stream or sys.stdout).fileno())
    os.close(devnull)
