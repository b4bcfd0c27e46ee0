"""Whether a base URL (models.json `baseUrl`, the editor's or environment's Anthropic URL) is
one requests can be sent to, checked where it is read so the error names where it was set."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

SCHEMES = ("http", "https")
# A host of four numbers is an IPv4 address to Node's URL and to the HTTP client, which refuse
# one that is no address (`999.1.1.1`): the client's refusal was an internal error.
IPV4_STYLE = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+")
# The password of a URL's userinfo (`//user:secret@host`), wherever a URL stands in a text: up
# to the authority's last `@`, as Node and urlsplit read it (a password may hold one), never
# past a quote (a URL with no path in JSON, then an address: `"…//host","a@b"`).
PASSWORD = re.compile(r"""(\b[A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s:"'<>]*:)[^/?#\s"'<>]*@""")


def masked_passwords(text: str) -> str:
    """`text` with the password of every URL in it as `***`: error texts and logs are shown,
    saved in sessions and shared; the user, host and port still say which server it was."""
    return PASSWORD.sub(r"\1***@", text)


def url_problem(url: str) -> str | None:
    """What is wrong with `url` as a base URL (None: nothing): a port that is not a number
    from 0 to 65535, an unclosed IPv6 bracket, no http(s) scheme or no host. Node's URL
    refuses each of them too. A password in it is masked."""
    shown = masked_passwords(repr(url))
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (read for the error it raises)
    except ValueError as error:  # "Port could not be cast to integer value as ':11434'"
        return f"{shown} is not a URL ({masked_passwords(str(error))})"
    if parts.scheme.lower() not in SCHEMES:
        return f"{shown} is not a URL: it must start with http:// or https://"
    if not parts.hostname:
        return f"{shown} is not a URL: it names no host"
    if IPV4_STYLE.fullmatch(parts.hostname) and not _is_ipv4(parts.hostname):
        return f"{shown} is not a URL: {parts.hostname} is no IPv4 address"
    return None


def _is_ipv4(host: str) -> bool:
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        return False
    return True
