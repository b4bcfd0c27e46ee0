"""Whether a base URL (models.json `baseUrl`, the editor's or environment's Anthropic URL) is
one requests can be sent to, checked where it is read so the error names where it was set."""

from __future__ import annotations

from urllib.parse import urlsplit

SCHEMES = ("http", "https")


def url_problem(url: str) -> str | None:
    """What is wrong with `url` as a base URL (None: nothing): a port that is not a number
    from 0 to 65535, an unclosed IPv6 bracket, no http(s) scheme or no host. Node's URL
    refuses each of them too."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (read for the error it raises)
    except ValueError as error:  # "Port could not be cast to integer value as ':11434'"
        return f"{url!r} is not a URL ({error})"
    if parts.scheme.lower() not in SCHEMES:
        return f"{url!r} is not a URL: it must start with http:// or https://"
    if not parts.hostname:
        return f"{url!r} is not a URL: it names no host"
    return None
