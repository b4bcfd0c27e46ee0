"""What `read` and a prompt send of an image, as pi 1.6's processImage sends it
(utils/image-process.js, image-resize-core.js): a BMP converted to PNG, an image over 2000x2000
pixels or 4.5 MB of base64 scaled down (unless settings turn that off), with pi's notes on what
was done. Pillow is imported only when an image is read: it would cost every start of the
server."""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import io
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING

from msgspec import structs

from pi_lsp.agent.readpage import to_fixed
from pi_lsp.session.entries import ImageContent, TextContent, UserMessage
from pi_lsp.session.journal import ENTRY_OVERHEAD, MAX_LINE_BYTES
from pi_lsp.session.jsontext import encoder

if TYPE_CHECKING:
    from PIL.Image import Image

MAX_SIDE = 2000
# Base64 characters: pi's headroom below Anthropic's 5 MB for one image.
MAX_BASE64 = 4718592  # 4.5 MiB
JPEG_QUALITIES = (80, 85, 70, 55, 40)  # pi's own first, then its steps, in its order
# pi's decoder gives up past 512 MiB of pixels (179 million RGB ones) and took 1.7 GB to resize
# 144 million. pi-lsp stops at Pillow's own bound (Image.MAX_IMAGE_PIXELS), enough for an 8K
# screen (33 million) or a 48 MP photo: 360 MB decoded as RGBA, and a peak of about 800 MB to
# scale it down (Pillow premultiplies alpha in a copy; RGB peaks at 455 MB, 16-bit grey at
# 625 MB). A tiny PNG that claims 50000x50000 is refused from its header, before decoding.
MAX_PIXELS = 89_478_485
TOO_MANY_PIXELS = (f"[Image omitted: more than {MAX_PIXELS} pixels, too large to decode; make a "
                   "smaller copy and read that.]")
NOT_CONVERTED = "[Image omitted: could not be converted to a supported inline image format.]"
NOT_RESIZED = "[Image omitted: could not be resized below the inline image size limit.]"
# Base64 characters of one image sent without resizing. pi 1.6 sends any size, which providers
# refuse (Anthropic past 5 MB, OpenAI past 20 MB), and past 64 MB its tool result or prompt could
# not be written at all, ending the session on a tool call with no result. The bound a prompt's
# own image data already has (protocol.ImageData).
MAX_UNRESIZED = 20_000_000
TOO_LARGE_UNRESIZED = (f"[Image omitted: over {MAX_UNRESIZED // 1_000_000} MB as base64, too "
                       "large to send without resizing; make a smaller copy and read that.]")
# Up to 20 such images of one message would pass the longest entry a session holds: the message
# could not be written and its turn failed. What an entry holds besides its blocks, and each
# image besides its data (its JSON and its notes), is kept out of the room.
IMAGE_OVERHEAD = 2048
TOO_LARGE_TOGETHER = (f"[Image omitted: with it the message would pass the {MAX_LINE_BYTES >> 20} "
                      "MB one session entry holds; send it in a message of its own.]")
# The types a model takes as they are, by the names pi knows them; pi converts the others to PNG.
SENT_TYPES = {"image/png": "image/png", "image/jpeg": "image/jpeg", "image/jpg": "image/jpeg",
              "image/gif": "image/gif", "image/webp": "image/webp"}
# The same, by the names Pillow gives what it decoded (a JPEG with more images is an "MPO").
SENT_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "MPO": "image/jpeg",
                "GIF": "image/gif", "WEBP": "image/webp"}
# What pi's decoder (Photon) reads, told by the bytes whatever type the image is said to be: a
# JPEG sent as image/png is decoded (and sent as image/png, as pi sends it); an ICO is not.
DECODED = ("PNG", "JPEG", "GIF", "WEBP", "BMP", "TIFF", "PPM")
ORIENTATION = 0x0112  # the EXIF tag


class ImageOmitted(Exception):
    """Why an image was left out, as the note `read` puts after its type."""


@dataclass(frozen=True)
class SentImage:
    data: str  # base64
    mime_type: str
    hints: list[str]


def process_image(file: IO[bytes], stated: str, *, auto_resize: bool = True) -> SentImage:
    """pi's processImage on the image in `file`, said to be of type `stated`, but sent as the
    type its bytes tell: pi keeps the stated one, and a provider refuses a JPEG sent as
    image/png, which then fails every later request of the session. Without `auto_resize`
    (pi's `images.autoResize: false`) it is only converted where it has to be."""
    from PIL import Image

    mime = stated.split(";")[0].strip().lower()
    if mime in SENT_TYPES:
        if not auto_resize and (as_is := _as_is(file, SENT_TYPES[mime])) is not None:
            return as_is
        image, kind = _decoded(file, NOT_RESIZED)
        if kind in SENT_FORMATS:
            return _fitted(image, lambda: _raw(file), SENT_FORMATS[kind], None)
        # A BMP, TIFF or PPM said to be a PNG: converted, the note naming what its bytes are.
        mime = Image.MIME.get(kind, mime)
    else:
        image, _kind = _decoded(file, NOT_CONVERTED)
    if not auto_resize:
        return SentImage(_unresized(_png(image)), "image/png", _converted(mime, "image/png"))
    return _fitted(image, lambda: _png(image), "image/png", mime)


def _as_is(file: IO[bytes], stated: str) -> SentImage | None:
    """The whole file, unscaled, of the type its bytes tell (`stated` when they tell none: pi
    sends such bytes all the same), as pi sends an image it does not resize; None when its
    bytes are of a type to convert to PNG."""
    from PIL import Image

    file.seek(0)
    try:
        kind = Image.open(file, formats=DECODED).format or ""  # its header only
    except Exception:  # Pillow raises many kinds on bytes it cannot read (see _decoded)
        kind = ""
    if kind and kind not in SENT_FORMATS:
        return None
    if _base64_length(file.seek(0, io.SEEK_END)) > MAX_UNRESIZED:  # before reading it whole
        raise ImageOmitted(TOO_LARGE_UNRESIZED)
    file.seek(0)
    return SentImage(_unresized(file.read()), SENT_FORMATS.get(kind, stated), [])


def _unresized(data: bytes) -> str:
    """`data` as base64; ImageOmitted when that is too large to send."""
    if _base64_size(data) > MAX_UNRESIZED:
        raise ImageOmitted(TOO_LARGE_UNRESIZED)
    return base64.b64encode(data).decode()


def image_bytes(data: str, name: str) -> bytes:
    """The image whose base64 is `data` (called `name` in the error); ValueError when `data`
    is not base64."""
    try:
        return base64.b64decode(data, validate=True)
    except binascii.Error as error:
        raise ValueError(f"{name} is not base64 ({error})") from None


async def with_sent_images(message: UserMessage, *, auto_resize: bool = True) -> UserMessage:
    """`message` with its images as pi sends a prompt's: each processed off the event loop (a
    resize takes up to a second), one that cannot or does not fit in the entry left out, the
    notes after the text."""
    images = [block for block in message.content if isinstance(block, ImageContent)]
    first = message.content[0] if message.content else None
    if not images or not isinstance(first, TextContent):
        return message
    rest = [block for block in message.content[1:] if isinstance(block, TextContent)]
    room = _image_room([first, *rest], len(images))
    sent: list[ImageContent] = []
    hints: list[str] = []
    for image in images:
        try:
            done = await asyncio.to_thread(
                process_image, io.BytesIO(image_bytes(image.data, "an image")), image.mime_type,
                auto_resize=auto_resize)
        except ImageOmitted as omitted:
            hints.append(str(omitted))
            continue
        if len(done.data) > room:
            hints.append(TOO_LARGE_TOGETHER)
            continue
        room -= len(done.data)
        sent.append(ImageContent(data=done.data, mime_type=done.mime_type))
        hints.extend(done.hints)
    text = f"{first.text}\n\n" + "\n".join(hints) if hints else first.text
    return structs.replace(message, content=[structs.replace(first, text=text), *rest, *sent])


def _image_room(blocks: list[TextContent], images: int) -> int:
    """The base64 characters `images` images may take together in an entry beside `blocks`."""
    return MAX_LINE_BYTES - len(encoder.encode(blocks)) - ENTRY_OVERHEAD - IMAGE_OVERHEAD * images


def _decoded(file: IO[bytes], failure: str) -> tuple[Image, str]:
    """The image in `file`, upright as its EXIF orientation says, and its format as Pillow
    names it; ImageOmitted with `failure` when it does not decode, or TOO_MANY_PIXELS when it
    is too large to try."""
    from PIL import Image

    file.seek(0)
    try:
        image = Image.open(file, formats=DECODED)  # its header only
        if image.width * image.height <= MAX_PIXELS:
            image.load()
            return _resizable(_oriented(image)), image.format or ""
    except Image.DecompressionBombError:  # Pillow's own check, at twice MAX_PIXELS
        pass
    # Hostile bytes make Pillow raise many kinds (OSError, SyntaxError, ValueError,
    # struct.error, zlib.error, …); pi leaves out the image whatever its decoder threw.
    except Exception:
        raise ImageOmitted(failure) from None
    raise ImageOmitted(TOO_MANY_PIXELS)


def _resizable(image: Image) -> Image:
    """`image` in a mode Pillow scales with Lanczos (it scales a palette by nearest pixel) and
    converts as pi does (Pillow clips 16-bit grey to white; pi scales it to 8 bits, rounded)."""
    if image.mode.startswith("I;16"):
        # One 32-bit copy, mapped to 8 bits by a table (Pillow maps no 16-bit mode itself): a
        # scale, then a convert, took two and 879 MB at MAX_PIXELS.
        return image.convert("I").point(_eight_bit_table(), "L")
    return image if image.mode in ("L", "LA", "RGB", "RGBA") else image.convert("RGBA")


@functools.cache
def _eight_bit_table() -> list[int]:
    """Each 16-bit value scaled to 8 bits, rounded as pi rounds it (value / 257, halves up)."""
    return [(value + 128) // 257 for value in range(65536)]


def _oriented(image: Image) -> Image:
    """`image` turned upright, as pi does from a JPEG's or WebP's EXIF orientation only (told
    by the bytes: Pillow names some JPEGs "MPO")."""
    from PIL.Image import Transpose

    if image.format not in ("JPEG", "MPO", "WEBP"):
        return image
    turn = {2: Transpose.FLIP_LEFT_RIGHT, 3: Transpose.ROTATE_180, 4: Transpose.FLIP_TOP_BOTTOM,
            5: Transpose.TRANSPOSE, 6: Transpose.ROTATE_270, 7: Transpose.TRANSVERSE,
            8: Transpose.ROTATE_90}.get(image.getexif().get(ORIENTATION, 1))
    return image if turn is None else image.transpose(turn)


def _raw(file: IO[bytes]) -> bytes:
    """The file's bytes, read no further than one byte past what could be sent as it is."""
    file.seek(0)
    return file.read(MAX_BASE64 * 3 // 4 + 1)


def _fitted(image: Image, original: Callable[[], bytes], mime: str,
            converted_from: str | None) -> SentImage:
    """pi's resizeImage: `original` (the bytes of `image`, of type `mime`) when within the
    limits, else `image` scaled down and encoded as pi chooses, with pi's notes."""
    from PIL.Image import Resampling

    width, height = image.size
    # An image converted to PNG is held to the size limit too (pi checks the PNG's bytes).
    if width <= MAX_SIDE and height <= MAX_SIDE and \
            _base64_size(data := original()) < MAX_BASE64:
        return SentImage(base64.b64encode(data).decode(), mime, _converted(converted_from, mime))
    for size in _sizes(width, height):
        fit = _first_fit(_candidates(image.resize(size, Resampling.LANCZOS)))
        if fit is not None:
            sent, data = fit
            scale = to_fixed(width / size[0], 2)
            note = (f"[Image: original {width}x{height}, displayed at {size[0]}x{size[1]}. "
                    f"Multiply coordinates by {scale} to map to original image.]")
            return SentImage(base64.b64encode(data).decode(), sent,
                             [*_converted(converted_from, sent), note])
    raise ImageOmitted(NOT_RESIZED)


def _converted(source: str | None, sent: str) -> list[str]:
    return [] if not source or source == sent else [
        f"[Image converted from {source} to {sent}.]"]


def _sizes(width: int, height: int) -> Iterator[tuple[int, int]]:
    """The sizes pi tries: within MAX_SIDE, then three quarters of the last, down to 1x1; none
    when a side of the first is 0 (pi leaves such an image out)."""
    if width > MAX_SIDE:
        width, height = MAX_SIDE, _js_round(height * MAX_SIDE / width)
    if height > MAX_SIDE:
        width, height = _js_round(width * MAX_SIDE / height), MAX_SIDE
    if not width or not height:  # over 4000:1, a side rounds to 0: pi's resize throws on it
        return
    while True:
        yield width, height
        smaller = (max(1, math.floor(width * 0.75)), max(1, math.floor(height * 0.75)))
        if smaller == (width, height):
            return
        width, height = smaller


def _js_round(value: float) -> int:
    """JavaScript's Math.round: halves go up."""
    return math.floor(value + 0.5)


def _candidates(image: Image) -> Iterator[tuple[str, bytes]]:
    """pi's encodings, in its order: the smaller of PNG and JPEG at its quality (PNG when even),
    then JPEG at lower qualities. Encoded one at a time, as they are needed."""
    png, jpeg = _png(image), _jpeg(image, JPEG_QUALITIES[0])
    smaller_jpeg = _base64_size(jpeg) < _base64_size(png)
    yield from ((("image/jpeg", jpeg), ("image/png", png)) if smaller_jpeg
                else (("image/png", png), ("image/jpeg", jpeg)))
    for quality in JPEG_QUALITIES[1:]:
        yield "image/jpeg", _jpeg(image, quality)


def _first_fit(candidates: Iterator[tuple[str, bytes]]) -> tuple[str, bytes] | None:
    return next((c for c in candidates if _base64_size(c[1]) < MAX_BASE64), None)


def _png(image: Image) -> bytes:
    """`image` as a PNG with alpha, as pi's encoder writes every one."""
    out = io.BytesIO()
    image.convert("RGBA").save(out, "PNG")
    return out.getvalue()


def _jpeg(image: Image, quality: int) -> bytes:
    out = io.BytesIO()
    image.convert("RGB").save(out, "JPEG", quality=quality)
    return out.getvalue()


def _base64_size(data: bytes) -> int:
    return _base64_length(len(data))


def _base64_length(count: int) -> int:
    """The base64 characters of `count` bytes."""
    return math.ceil(count / 3) * 4
