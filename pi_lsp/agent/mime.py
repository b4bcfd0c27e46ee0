"""Which image a file holds, told by its bytes as pi 1.6 tells it (utils/mime.js): the name says
nothing (a Git LFS pointer named logo.png is text, a PNG named photo.jpg is a PNG)."""

from __future__ import annotations

from typing import Literal

SNIFF_BYTES = 4100  # what pi reads of a file to tell
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
BMP_BITS = (1, 4, 8, 16, 24, 32)


def image_type(head: bytes) -> str | None:
    """The MIME type of the image `head` (a file's first SNIFF_BYTES) starts, among those pi
    sends a model; None for anything else (an animated PNG, a lossless JPEG, text)."""
    if head.startswith(b"\xff\xd8\xff"):
        return None if head[3:4] == b"\xf7" else "image/jpeg"
    if head.startswith(PNG_SIGNATURE):
        return "image/png" if _is_png(head) and not _is_animated_png(head) else None
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "image/webp"
    if head.startswith(b"BM") and _is_bmp(head):
        return "image/bmp"
    return None


def _uint(head: bytes, offset: int, size: int, order: Literal["big", "little"]) -> int:
    """An unsigned integer at `offset`, missing bytes read as 0 (as pi reads past the end)."""
    return int.from_bytes(head[offset:offset + size].ljust(size, b"\0"), order)


def _is_png(head: bytes) -> bool:
    return len(head) >= 16 and _uint(head, 8, 4, "big") == 13 and head[12:16] == b"IHDR"


def _is_animated_png(head: bytes) -> bool:
    """Whether an acTL chunk comes before the first IDAT (within `head`)."""
    offset = len(PNG_SIGNATURE)
    while offset + 8 <= len(head):
        kind = head[offset + 4:offset + 8]
        if kind == b"acTL":
            return True
        if kind == b"IDAT":
            return False
        following = offset + 8 + _uint(head, offset, 4, "big") + 4
        if following > len(head):
            return False
        offset = following
    return False


def _is_bmp(head: bytes) -> bool:
    if len(head) < 26:
        return False
    file_size, pixels, header = (_uint(head, at, 4, "little") for at in (2, 10, 14))
    if file_size != 0 and file_size < 26:
        return False
    if pixels < 14 + header or (file_size != 0 and pixels >= file_size):
        return False
    if header == 12:
        planes, bits = _uint(head, 22, 2, "little"), _uint(head, 24, 2, "little")
    elif 40 <= header <= 124:
        if len(head) < 30:
            return False
        planes, bits = _uint(head, 26, 2, "little"), _uint(head, 28, 2, "little")
    else:
        return False
    return planes == 1 and bits in BMP_BITS
