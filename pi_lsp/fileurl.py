"""A file: URL's path as pi 1.6 reads it: Node's `fileURLToPath`, which parses the URL by the
WHATWG rules (`new URL`) and then percent-decodes its path with `decodeURIComponent`."""

from __future__ import annotations

import ipaddress
import re

# What the WHATWG parser strips from the ends of its input, and removes anywhere in it.
_ENDS = "".join(chr(code) for code in range(0x21))
_TAB_OR_NEWLINE = re.compile("[\t\n\r]")
# Characters no domain may hold (the WHATWG "forbidden domain code points").
_FORBIDDEN_IN_HOST = re.compile(r"[\x00-\x20#%/:<>?@\[\\\]^|\x7f]")
_DRIVE_LETTER = re.compile("[A-Za-z][:|]")
_ESCAPES = re.compile(r"(?:%[0-9A-Fa-f]{2})+")
_DOUBLE_DOT = {"..", ".%2e", "%2e.", "%2e%2e"}
_SINGLE_DOT = {".", "%2e"}


class FileUrlError(ValueError):
    """A file: URL Node refuses, with Node's message ("Invalid URL", "URI malformed", ...)."""


def file_url_path(url: str) -> str:
    """The path Node's fileURLToPath(url) gives on Linux for a URL that starts with file://."""
    text = _TAB_OR_NEWLINE.sub("", url.strip(_ENDS))[len("file://"):]
    host = re.split(r"[/\\?#]", text, maxsplit=1)[0]
    rest = text[len(host):]
    if _DRIVE_LETTER.fullmatch(host):  # file://C:/x is the path /C:/x
        host, rest = "", "/" + host + rest
    if _host(host) not in ("", "localhost"):
        raise FileUrlError('File URL host must be "localhost" or empty on linux')
    pathname = _pathname(re.split(r"[?#]", rest, maxsplit=1)[0])
    if re.search("%2f", pathname, re.IGNORECASE):
        raise FileUrlError("File URL path must not include encoded / characters")
    return _decode_uri_component(pathname)


def _host(text: str) -> str:
    """The host the WHATWG host parser makes of `text` (lower case, percent-decoded); a host
    it refuses is Node's "Invalid URL"."""
    if not text:
        return ""
    if text.startswith("["):
        try:
            ipaddress.IPv6Address(text.removeprefix("[").removesuffix("]"))
        except ValueError:
            raise FileUrlError("Invalid URL") from None
        if not text.endswith("]"):
            raise FileUrlError("Invalid URL")
        return text
    raw = re.sub(rb"%([0-9A-Fa-f]{2})", lambda escape: bytes([int(escape[1], 16)]),
                 text.encode("utf-8", "surrogatepass"))
    try:
        domain = raw.decode("utf-8").lower()
        domain = domain if domain.isascii() else domain.encode("idna").decode("ascii")
    except UnicodeError:
        raise FileUrlError("Invalid URL") from None
    if _FORBIDDEN_IN_HOST.search(domain) or (_ends_in_number(domain) and not _ipv4(domain)) \
            or not all(_punycode(label) for label in domain.split(".") if label[:4] == "xn--"):
        raise FileUrlError("Invalid URL")
    return domain


def _punycode(label: str) -> bool:
    """Whether an `xn--` label holds a name (IDNA refuses one that does not)."""
    try:
        return label[4:].encode("ascii").decode("punycode") != ""
    except UnicodeError:
        return False


def _ends_in_number(domain: str) -> bool:
    labels = domain.split(".")
    last = labels[-2] if labels[-1] == "" and len(labels) > 1 else labels[-1]
    return last.isdigit() or re.fullmatch("0[xX][0-9A-Fa-f]*", last) is not None


def _ipv4(domain: str) -> bool:
    """Whether the WHATWG IPv4 parser takes `domain` (decimal, octal or hex parts)."""
    parts = domain.split(".")
    if parts[-1] == "" and len(parts) > 1:
        parts.pop()
    numbers = []
    for part in parts:
        found = re.fullmatch(r"0[xX]([0-9A-Fa-f]*)|(0[0-7]*)|([1-9][0-9]*)", part)
        if found is None:
            return False
        hexadecimal, octal, decimal = found.groups()
        numbers.append(int(hexadecimal or "0", 16) if hexadecimal is not None
                       else int(octal, 8) if octal is not None else int(decimal))
    return len(numbers) <= 4 and all(n <= 255 for n in numbers[:-1]) \
        and numbers[-1] < 256 ** (5 - len(numbers))


def _pathname(text: str) -> str:
    """The URL's path as the WHATWG path state leaves it: backslashes are slashes, dot segments
    (also written %2e) removed, a first drive letter's `|` made `:`."""
    segments = re.split(r"[/\\]", text[1:] if text[:1] in ("/", "\\") else text)
    path: list[str] = []
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        lowered = segment.lower()
        if lowered in _DOUBLE_DOT:
            if path and not (len(path) == 1 and re.fullmatch("[A-Za-z]:", path[0])):
                path.pop()
            if last:
                path.append("")
        elif lowered in _SINGLE_DOT:
            if last:
                path.append("")
        else:
            if not path and _DRIVE_LETTER.fullmatch(segment):
                segment = segment[0] + ":"
            # A lone surrogate is written as UTF-8 in the URL, so it reads back as U+FFFD.
            path.append(re.sub("[\ud800-\udfff]", "\ufffd", segment))
    return "/" + "/".join(path)


def _decode_uri_component(text: str) -> str:
    """JavaScript's decodeURIComponent: every `%` must start an escape, and each run of
    escapes must be UTF-8 (no surrogates, no overlong forms), else "URI malformed"."""
    if re.search("%(?![0-9A-Fa-f]{2})", text):
        raise FileUrlError("URI malformed")
    try:
        return _ESCAPES.sub(lambda run: _unescaped(run[0]).decode("utf-8"), text)
    except UnicodeDecodeError:
        raise FileUrlError("URI malformed") from None


def _unescaped(run: str) -> bytes:
    return bytes(int(run[i + 1:i + 3], 16) for i in range(0, len(run), 3))
