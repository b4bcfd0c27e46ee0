"""Header values (an API key, models.json `headers`) as pi 1.6 sends them through Node's fetch:
HTTP whitespace at either end dropped, each character one byte (Latin-1)."""

from __future__ import annotations

from collections.abc import Mapping

HTTP_WHITESPACE = "\t\n\r "  # what fetch trims from each end of a value (a key's saved newline)


class Latin1Text(str):
    """A header value the HTTP client encodes as Latin-1 whatever encoding it asks for (httpx
    encodes headers as ASCII, the Anthropic SDK as UTF-8; fetch sends one byte a character)."""

    def encode(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        return str.encode(self, "latin-1", errors)


class HeaderValueError(ValueError):
    """A header value that cannot be sent; names the header, never the value (it may be a key)."""


def trimmed(value: str) -> str:
    """`value` without the HTTP whitespace at either end, as fetch sends it."""
    return value.strip(HTTP_WHITESPACE)


def blank(value: str) -> bool:
    """Whether `value` is something that fetch sends as nothing (only whitespace)."""
    return bool(value) and not trimmed(value)


def _refused(char: str) -> str | None:
    """Why `char` cannot be in a header value (None: it can)."""
    code = ord(char)
    if code > 0xFF:
        return "only characters up to U+00FF can be sent in an HTTP header"
    if (code < 0x20 and char != "\t") or code == 0x7F:
        return "a control character cannot be sent in an HTTP header"
    return None


def sendable(value: str, what: str) -> str:
    """`value` trimmed as fetch trims it; HeaderValueError naming `what` (and the character, not
    the value) if a character is left that cannot be sent."""
    value = trimmed(value)
    for char in value:
        if reason := _refused(char):
            raise HeaderValueError(f"{what} has the character U+{ord(char):04X}: {reason}")
    return value if value.isascii() else Latin1Text(value)


def sendable_headers(headers: Mapping[str, str], who: str) -> dict[str, str]:
    """Each of `headers` made `sendable`; `who` (the provider) is named in an error."""
    return {name: sendable(value, f"{who}: header {name}") for name, value in headers.items()}


def unsendable(key: str, headers: Mapping[str, str], who: str
               ) -> tuple[str | None, str, dict[str, str]]:
    """A provider's key and headers as sent, and why they cannot be (None: they can): then
    the key and headers given back are placeholders that are never sent."""
    try:
        key = sendable(key, f"{who}: the API key")
        if not key.isascii():  # the SDKs put it into a header of their own, as text
            raise HeaderValueError(f"{who}: the API key has a character that is not ASCII")
        return None, key, sendable_headers(headers, who)
    except HeaderValueError as error:
        return str(error), "unsent", {}


def with_bearer(headers: dict[str, str], key: str | None) -> dict[str, str]:
    """`headers` with `Authorization: Bearer <key>` in place of any Authorization of theirs,
    as pi 1.6 sends a provider's `authHeader` (a model's own headers still go over it)."""
    if not key:  # the provider refuses to be made without one, as pi refuses the request
        return headers
    kept = {name: value for name, value in headers.items() if name.lower() != "authorization"}
    return {**kept, "Authorization": f"Bearer {key}"}
