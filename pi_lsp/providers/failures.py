"""What went wrong with a model call, in one line that says what happened.

Every failure of a call ends in the reply as an error, never as an exception: a status the
server answered with, a connection that could not be made or was cut, a timeout, a stream event
that is not JSON, or a stream that stopped before the reply was complete. The wording follows
pi's, so the same failures are retried (see pi_lsp.agent.retry).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

from pi_lsp.providers.base_url import masked_passwords
from pi_lsp.providers.deep_json import deep_loads
from pi_lsp.providers.json_errors import json_parse_error

MAX_BODY_CHARS = 4000  # pi-ai 1.6 MAX_PROVIDER_ERROR_BODY_CHARS: retries read the reason


def provider_label(name: str) -> str:
    """How a failed call's line names its provider, before the HTTP status."""
    return {"anthropic": "Anthropic", "openai": "OpenAI"}.get(name, name)


def cut_error_text(text: str) -> str:
    """A server's error text as pi 1.6 cuts an error body (pi-ai's truncateErrorText): its
    first MAX_BODY_CHARS characters and how many more there were. Whole, a 65 MB body made a
    reply too long to write."""
    if len(text) <= MAX_BODY_CHARS:
        return text
    return f"{text[:MAX_BODY_CHARS]}... [truncated {len(text) - MAX_BODY_CHARS} chars]"


class StreamEndedEarly(Exception):
    """The stream closed cleanly but without the event that completes a reply."""


class RetryDelayTooLong(Exception):
    """The server asked to wait longer than `retry.provider.maxRetryDelayMs` allows."""


class ReplyFailed(Exception):
    """The stream said the reply failed; nothing after it is read (pi 1.6 throws there too).
    The message is the reply's error as it stands."""


# pi 1.6's words (the openai SDK's) for a stream event that is not JSON: fixed, so no part of
# the event (a "timeout" in its text, Python's "Unterminated string") makes a retry pi makes not.
MALFORMED_EVENT = "Error reading response: malformed server-sent event JSON."


class MalformedEvent(Exception):
    """A stream event that is not JSON; the message is the reply's error, in pi's words."""


def parse_failure(error: json.JSONDecodeError) -> str:
    """Why JSON.parse refused an event, in its words (V8's)."""
    return json_parse_error(error.doc) or \
        f"{error.msg} in JSON at position {error.pos} (line {error.lineno} column {error.colno})"


class _Constant(ValueError):
    """NaN, Infinity or -Infinity met where JSON.parse reads no such word."""


def _refuse(name: str) -> Any:
    raise _Constant(name)


def _parsed_integer(text: str) -> int | float:
    """An integer as JSON.parse reads it, a double: exact up to 2**53, else rounded (Infinity
    past the largest double), so a reply keeps the number pi 1.6 would write and read."""
    number = float(text)  # never raises: a text past the range gives inf
    # The double's own value: 2**53 + 1 reads as 2**53, as in JavaScript.
    return int(number) if abs(number) <= 2**53 else number


def event_json(data: str) -> Any:
    """A stream event's data as pi's SDKs read it (JSON.parse): NaN and Infinity, which
    Python's json reads, make it no JSON, so the reply fails as pi's does; integers are
    doubles; any depth is read."""
    try:
        return json.loads(data, parse_constant=_refuse, parse_int=_parsed_integer)
    except RecursionError:  # nested past Python's parser, never past JSON.parse
        return deep_loads(data, _parsed_integer)
    except _Constant as error:
        # parse_constant is not told where: the first occurrence is near enough to show.
        raise json.JSONDecodeError(f"{error} is not JSON", data, data.find(str(error))
                                   ) from None


def line_text(raw: bytes, bom: bool) -> str:
    """A stream line as pi's TextDecoder reads it: bytes that are not UTF-8 become U+FFFD (by
    the same maximal-subpart rule), where the SDKs' strict decode failed the whole reply; with
    `bom`, a BOM starting it is dropped, as TextDecoder drops one starting what it decodes."""
    return raw.decode("utf-8-sig" if bom else "utf-8", "replace")


async def ended_stream(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """A stream's body, then a blank line: the SDKs' decoders drop an event the body ends
    without the blank line after, which pi 1.6's readers dispatch at the end of the stream."""
    async for chunk in chunks:
        yield chunk
    # The first newline ends a last line left open, the second is the blank line after it.
    yield b"\n\n"


def _kinds(error: BaseException) -> set[str]:
    # The SDKs raise httpx's transport errors (httpx2's in newer releases); both name their
    # classes alike, so the class names say what happened without importing either.
    return {cls.__name__ for cls in type(error).__mro__}


def _cause(error: BaseException) -> BaseException | None:
    cause = error.__cause__ or error.__context__
    return None if cause is None else _unwrapped(cause)


def _unwrapped(error: BaseException) -> BaseException:
    """The one error a one-member group holds: the transport's task group wraps a connect
    failure (an out-of-range port's OverflowError) in one."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


# The HTTP client's complaint about a header quotes the value, which may be the API key.
_QUOTED_HEADER = re.compile(r"(header (?:name|value)).*", re.IGNORECASE | re.DOTALL)


def _without_header_values(detail: BaseException) -> str:
    """The transport's error text, any header value it quotes left out."""
    return _QUOTED_HEADER.sub(r"\1 (not shown)", str(detail))


def transport_failure(error: BaseException, label: str, url: str, timeout_s: float,
                      answered: bool) -> str | None:
    """One line for a failure below HTTP (None if `error` is not one): a timeout, a refused or
    cut connection, a stream event that is not JSON. `answered`: the reply had begun."""
    if isinstance(error, MalformedEvent):
        return str(error)
    if isinstance(error, StreamEndedEarly | RetryDelayTooLong):
        return f"{label}: {error}"
    grouped, error = isinstance(error, BaseExceptionGroup), _unwrapped(error)
    # The SDK may wrap the transport's error in its own APIConnectionError.
    kinds, cause = _kinds(error), _cause(error)
    inner = _kinds(cause) if cause is not None and "APIConnectionError" in kinds else kinds
    detail = _without_header_values(
        cause if cause is not None and "APIConnectionError" in kinds and str(cause) else error)
    if "TimeoutException" in inner or "APITimeoutError" in inner:
        return f"{label} sent nothing for {timeout_s:g}s (timed out)"
    if "DecodingError" in inner:  # a compressed body that does not decompress
        # pi (node's fetch) reports it as "terminated", which its retry takes as passing.
        return f"{label} sent a reply that could not be decoded (terminated: {detail})"
    if inner & {"RemoteProtocolError", "ReadError", "WriteError"}:
        what = "before the reply was complete" if answered else "without answering"
        return f"{label} closed the connection {what} (connection lost: {detail})"
    if "APIConnectionError" in kinds or (grouped and not answered):  # the SDK let it by
        return f"cannot reach {label} at {url} (connection error: {detail})"
    return None


def unmade_request(error: BaseException, label: str) -> str:
    """A request that could not be made (its parameters or the SDK's set-up failed), so
    nothing was sent; the reply ends with it as pi 1.6's does with what its provider threw."""
    return masked_passwords(f"{label}: the request could not be made "
                            f"({type(error).__name__}: {_without_header_values(error)})")


def unreadable_reply(error: BaseException, label: str) -> str:
    """A stream the reader could not follow (an event of an unexpected shape)."""
    return (f"{label} sent a reply pi-lsp cannot read ({type(error).__name__}: "
            f"{_without_header_values(error)})")


def failure_text(error: BaseException, label: str, url: str, timeout_s: float, answered: bool,
                 server_error: Callable[[str, BaseException], str | None]) -> str:
    """The line a failed call ends with: the transport's failure, else the error the server
    sent (`server_error`, the SDK's reading), else a reply that could not be read. A password
    in a URL it names (a `baseUrl` with one) is masked: the line is saved in the session."""
    if isinstance(error, ReplyFailed):
        return masked_passwords(str(error))
    return masked_passwords(transport_failure(error, label, url, timeout_s, answered) or
                            server_error(label, error) or unreadable_reply(error, label))
