"""The agent's tools, called as the loop calls them: through `execute_tool`, never raising."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import getpass
import io
import json
import logging
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import tracemalloc
import zlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lsprotocol import types
from PIL import Image
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument

from pi_lsp.agent import access, editmatch, images, readpage, shell, tools
from pi_lsp.agent.approval import allow_all, ask_approval
from pi_lsp.agent.arguments import js_to_number
from pi_lsp.agent.editmatch import EDITS_NESTING
from pi_lsp.agent.fserrors import PATH_MAX
from pi_lsp.agent.mime import image_type
from pi_lsp.agent.output import OutputTail, discard_file
from pi_lsp.agent.shell import shell_path
from pi_lsp.agent.splice import Replacement, splice, to_lf
from pi_lsp.agent.tools import (
    BASH,
    DISK,
    EDIT,
    KEY_VARIABLES,
    READ,
    WRITE,
    DiskFiles,
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    execute_tool,
    propose_change,
    thrown_result,
    write_regular,
)
from pi_lsp.fileurl import FileUrlError, file_url_path
from pi_lsp.providers.base import ToolSpec, parse_arguments
from pi_lsp.server.editor import EditorFiles
from pi_lsp.session.entries import ImageContent, TextContent, ToolCall
from tests.test_system_messages import PI16, pi16_node
from tests.users import as_a_user
from tests.waits import (
    CEILING_S,
    PROCESS_CEILING_S,
    alive,
    gone,
    needing_the_loop,
    pid_in,
    until,
)

# A 1x1 transparent PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kg"
    "AAAABJRU5ErkJggg=="
)
# A 1x1 transparent GIF.
GIF = base64.b64decode("R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7")


async def run(tool: Tool, args: dict[str, Any], root: Path, **options: Any) -> ToolResult:
    return await execute_tool(tool, tool.name, args, ToolContext(root, **options))


def text_of(result: ToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, TextContent))


def answer_text(answer: str | ToolResult | None) -> str | None:
    """What ask_approval answered as the model reads it: the refusal, or the result's text."""
    return text_of(answer) if isinstance(answer, ToolResult) else answer


@pytest.fixture
def root(tmp_path: Path) -> Path:
    workspace = tmp_path / "root"
    workspace.mkdir()
    return workspace


# -- read ----------------------------------------------------------------------------------


async def test_read_returns_the_text_as_it_is(root: Path) -> None:
    """pi's read gives the text itself; pi-lsp numbered each line ("     1\talpha"), which a
    model trained on pi's tools copied into its edits."""
    (root / "a.txt").write_text("alpha\nbeta\ngamma\n")
    result = await run(READ, {"path": "a.txt"}, root)
    assert not result.is_error
    assert text_of(result) == "alpha\nbeta\ngamma\n"


LINES_2500 = "".join(f"line {n}\n" for n in range(1, 2501))
BYTES_600 = "".join(f"{n:05} " + "z" * 94 + "\n" for n in range(600))


# What pi 1.6's read tool answers on each (the review's harness runs both on the same files).
@pytest.mark.parametrize(("data", "args", "expected"), [
    (b"", {}, ""),
    (b"a\nb\nc\n", {"offset": 4}, ""),  # the empty line after the last LF
    (b"a\nb\nc\n", {"limit": 0}, "\n\n[4 more lines in file. Use offset=1 to continue.]"),
    (b"a\nb\nc\n", {"offset": 2, "limit": 1},
     "b\n\n[2 more lines in file. Use offset=3 to continue.]"),
    (b"a\nb\nc\n", {"limit": 1.5},
     "a\n\n[2.5 more lines in file. Use offset=2.5 to continue.]"),
    (b"a\nb\nc\n", {"limit": -1},
     "a\nb\nc\n\n[5 more lines in file. Use offset=0 to continue.]"),
    (b"a\nb\nc\n", {"offset": 1.5}, "a\nb\nc\n"),
    # Lines end at LF only: CR, FF, VT, FS, NEL and U+2028 stay inside them.
    ("a\rb\x0cc\x0bd\x1ce\x85f\u2028g\nh\n".encode(), {"offset": 2}, "h\n"),
    (b"y" * 60000 + b"\nshort\n", {},
     "[Line 1 is 58.6KB, exceeds 50.0KB limit. Use bash: sed -n '1p' f.txt | head -c 51200]"),
    (b"first\n" + b"y" * 60000 + b"\n", {},
     "first\n\n[Showing lines 1-1 of 3 (50.0KB limit). Use offset=2 to continue.]"),
    (LINES_2500.encode(), {}, LINES_2500[:LINES_2500.index("line 2001")]
     + "\n[Showing lines 1-2000 of 2501. Use offset=2001 to continue.]"),
    (BYTES_600.encode(), {"offset": 3}, "".join(BYTES_600.splitlines(True)[2:508])
     + "\n[Showing lines 3-508 of 601 (50.0KB limit). Use offset=509 to continue.]"),
    (b"ok\n\xff\xfe bad \xc3\n", {}, "ok\n\ufffd\ufffd bad \ufffd\n"),
    (b"\xef\xbb\xbfbom\n", {}, "\ufeffbom\n"),
])
async def test_read_answers_as_pi_answers(root: Path, data: bytes, args: dict[str, Any],
                                          expected: str) -> None:
    """pi-lsp numbered lines, split them where str.splitlines() does (at CR, FF, NEL, U+2028:
    line numbers and offsets disagreed with grep and sed), cut long lines at 2000 characters,
    and worded its notes its own way; a session moves between pi and pi-lsp, and the model was
    trained on pi's answers."""
    (root / "f.txt").write_bytes(data)
    result = await run(READ, {"path": "f.txt", **args}, root)
    assert not result.is_error, text_of(result)
    assert text_of(result) == expected


def write_files(root: Path, files: dict[str, str]) -> None:
    """Each file of `files` (path: text) under `root`, its folder made."""
    for name, text in files.items():
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_text(text)


@pytest.mark.parametrize(("files", "path", "expected"), [
    ({"a.txt": "a\nb\nc\n"}, "a.txt", "Offset 5 is beyond end of file (4 lines total)"),
    ({}, "nope.txt", "ENOENT: no such file or directory, access '{root}/nope.txt'"),
    ({"d/x": ""}, "d", "EISDIR: illegal operation on a directory, read"),
    ({"a.txt": ""}, "a.txt/x", "ENOTDIR: not a directory, access '{root}/a.txt/x'"),
])
async def test_read_fails_as_pi_fails(root: Path, files: dict[str, str], path: str,
                                      expected: str) -> None:
    write_files(root, files)
    result = await run(READ, {"path": path, "offset": 5}, root)
    assert result.is_error
    assert text_of(result) == expected.replace("{root}", str(root))


async def test_read_offset_and_limit_with_next_offset_note(root: Path) -> None:
    (root / "a.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    result = await run(READ, {"path": "a.txt", "offset": 3, "limit": 2}, root)
    assert not result.is_error
    # What is left, so the model knows how much (the file's last LF ends an 11th, empty line).
    assert text_of(result) == "line 3\nline 4\n\n[7 more lines in file. Use offset=5 to continue.]"


async def test_read_to_the_end_has_no_note(root: Path) -> None:
    (root / "a.txt").write_text("one\ntwo\nthree\n")
    text = text_of(await run(READ, {"path": "a.txt", "offset": 2}, root))
    assert text == "two\nthree\n"


async def test_read_caps_the_size_of_huge_files(root: Path) -> None:
    line = "x" * 999
    (root / "big.txt").write_text(f"{line}\n" * 2000)  # ~2 MB, under the line limit
    result = await run(READ, {"path": "big.txt"}, root)
    assert not result.is_error
    text = text_of(result)
    # 51 lines of 1000 bytes are within 50 KB, with their LFs between them; 52 are not.
    assert text == "\n".join([line] * 51) + \
        "\n\n[Showing lines 1-51 of 2001 (50.0KB limit). Use offset=52 to continue.]"
    assert result.details["truncation"]["truncatedBy"] == "bytes"


async def test_read_missing_file_is_an_error(root: Path) -> None:
    result = await run(READ, {"path": "nope.txt"}, root)
    assert result.is_error
    assert "nope.txt" in text_of(result)


async def test_read_png_is_an_image_block(root: Path) -> None:
    (root / "dot.png").write_bytes(PNG)
    result = await run(READ, {"path": "dot.png"}, root)
    assert not result.is_error
    images = [b for b in result.content if isinstance(b, ImageContent)]
    assert len(images) == 1
    assert images[0].mime_type == "image/png"
    assert base64.b64decode(images[0].data) == PNG


LFS_POINTER = (b"version https://git-lfs.github.com/spec/v1\n"
               b"oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\n"
               b"size 12345\n")
# A 1x1 BMP, 24 bits a pixel (its header says 58 bytes, pixels from byte 54).
BMP = (b"BM" + (58).to_bytes(4, "little") + bytes(4) + (54).to_bytes(4, "little")
       + (40).to_bytes(4, "little") + (1).to_bytes(4, "little") * 2 + (1).to_bytes(2, "little")
       + (24).to_bytes(2, "little") + bytes(24) + b"\xff\xff\xff\0")


@pytest.mark.parametrize(("name", "data", "mime"), [
    ("logo.png", LFS_POINTER, None),  # a Git LFS pointer: text, whatever its name
    ("photo.jpg", PNG, "image/png"),
    ("image", PNG, "image/png"),  # no extension
    ("notes.txt", GIF, "image/gif"),
])
async def test_read_tells_an_image_by_its_bytes(root: Path, name: str, data: bytes,
                                                mime: str | None) -> None:
    """The extension decided: an LFS pointer named logo.png went to the model as an image/png
    it rejects (and every later request of the session with it), a PNG named photo.jpg as
    image/jpeg, a PNG without extension as text. pi 1.6 reads the bytes; so does pi-lsp."""
    (root / name).write_bytes(data)
    result = await run(READ, {"path": name}, root)
    assert not result.is_error, text_of(result)
    images = [b for b in result.content if isinstance(b, ImageContent)]
    if mime is None:
        assert not images and text_of(result) == LFS_POINTER.decode()
    else:
        assert text_of(result) == f"Read image file [{mime}]"
        assert [(b.mime_type, base64.b64decode(b.data)) for b in images] == [(mime, data)]


def png_chunk(kind: bytes, data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + kind + data + bytes(4)


# What pi 1.6's detectSupportedImageMimeType answers on each (checked against it).
PNG_HEAD = b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", bytes(13))
SNIFFED = [
    (PNG_HEAD + png_chunk(b"IDAT", b"x") + png_chunk(b"acTL", bytes(8)), "image/png"),
    (PNG_HEAD + png_chunk(b"acTL", bytes(8)) + png_chunk(b"IDAT", b"x"), None),  # animated
    (PNG_HEAD[:12], None),  # no IHDR
    (b"\xff\xd8\xff\xe0", "image/jpeg"),
    (b"\xff\xd8\xff\xf7", None),  # lossless JPEG
    (b"RIFF\0\0\0\0WEBPVP8 ", "image/webp"),
    (b"GIF87a", "image/gif"),
    (BMP, "image/bmp"),
    (b"BM" + bytes(60), None),  # no BMP header
    (b"", None),
]


@pytest.mark.parametrize(("head", "mime"), SNIFFED)
def test_image_types_are_told_as_pi_tells_them(head: bytes, mime: str | None) -> None:
    assert image_type(head) == mime


async def test_read_of_a_huge_file_takes_a_piece_of_it_in_memory(root: Path) -> None:
    """A committed 400 MB data file read with limit=1 took 1.5 GB and stalled the loop 2 s."""
    line = b"a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r,s,t\n"
    (root / "data.csv").write_bytes(line * (32 * 1024 * 1024 // len(line)))  # 32 MB
    tracemalloc.start()
    try:
        result = await run(READ, {"path": "data.csv", "limit": 1}, root)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    lines = 32 * 1024 * 1024 // len(line)
    assert text_of(result) == ("a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r,s,t\n\n"
                               f"[{lines} more lines in file. Use offset=2 to continue.]")
    assert peak < 8 * 1024 * 1024


async def test_read_runs_off_the_event_loop(root: Path, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    (root / "a.txt").write_text("alpha\n")
    threads: list[threading.Thread] = []
    read = tools._disk_read

    def recorded(*args: Any) -> ToolResult | None:
        threads.append(threading.current_thread())
        return read(*args)

    monkeypatch.setattr(tools, "_disk_read", recorded)
    assert text_of(await run(READ, {"path": "a.txt"}, root)) == "alpha\n"
    assert threads and threads[0] is not threading.main_thread()


async def test_an_aborted_read_stops_reading_the_file(root: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Cancelled (a turn aborted), a read of a large file stops at its next piece instead of
    reading on to the end in its thread."""
    (root / "big.txt").write_bytes(b"line\n" * 100_000)
    monkeypatch.setattr(tools, "READ_CHUNK", 4096)  # 123 pieces
    reading, resume, closed = threading.Event(), threading.Event(), threading.Event()
    reads: list[int] = []
    opened = tools.open_regular

    class Gated:
        """The file, its first read held until the call is cancelled."""

        def __init__(self, file: Any) -> None:
            self.file = file

        def read(self, size: int) -> bytes:
            reads.append(size)
            if len(reads) == 1:
                reading.set()
                resume.wait(CEILING_S)
            return self.file.read(size)  # type: ignore[no-any-return]

        def __enter__(self) -> Gated:
            return self

        def __exit__(self, *_exc: object) -> None:
            self.file.close()
            closed.set()

    monkeypatch.setattr(tools, "open_regular", lambda path: Gated(opened(path)))
    call = asyncio.ensure_future(run(READ, {"path": "big.txt"}, root))
    assert await asyncio.to_thread(reading.wait, CEILING_S)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    resume.set()
    assert await asyncio.to_thread(closed.wait, CEILING_S)
    assert len(reads) == 1


TRICKY = ("crlf\r\nlone cr\rff\x0cvt\x0bsep\u2028nel\x85" + "long" * 2000 + "\r\n"
          + "bad \udcff utf-8 é\n\n\n" + "wide 😀\n" * 3000 + "last without end")


@pytest.mark.parametrize("piece", [1, 2, 3, 7, 4096])
@pytest.mark.parametrize(("offset", "limit"), [(1, 2000), (2, 3), (5, 1), (6, 5), (2990, None),
                                               (3000, 1.5)])
async def test_read_in_pieces_shows_what_the_whole_text_shows(
        root: Path, monkeypatch: pytest.MonkeyPatch, piece: int, offset: int,
        limit: float | None) -> None:
    """The lines as pi splits the whole text (at LF only), wherever a piece ends: inside a
    \r\n, a character, or a long line."""
    (root / "t.txt").write_bytes(TRICKY.encode("utf-8", "surrogateescape"))
    whole = TRICKY.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    expected = readpage.page(lambda: [whole], "t.txt", offset, limit)[0]
    assert whole.count("\n") == 3005 and expected.startswith(whole.split("\n")[offset - 1])
    monkeypatch.setattr(tools, "READ_CHUNK", piece)
    args = {"path": "t.txt", "offset": offset, **({} if limit is None else {"limit": limit})}
    assert text_of(await run(READ, args, root)) == expected


async def test_read_through_a_symlink_inside_the_workspace(root: Path) -> None:
    (root / "AGENTS.md").write_text("notes\n")
    (root / "CLAUDE.md").symlink_to("AGENTS.md")
    assert text_of(await run(READ, {"path": "CLAUDE.md"}, root)) == "notes\n"


async def test_read_of_a_fifo_is_an_error_and_does_not_hang(root: Path) -> None:
    """Only regular files are read (on purpose: pi waits on a FIFO for a writer); a FIFO reads
    as a missing file."""
    os.mkfifo(root / "pipe")
    result = await asyncio.wait_for(run(READ, {"path": "pipe"}, root), CEILING_S)
    assert result.is_error
    assert text_of(result) == f"ENOENT: no such file or directory, access '{root}/pipe'"


# -- read: images, as pi 1.6 sends them -----------------------------------------------------


def stripes(width: int, height: int) -> Image.Image:
    """A screenshot's kind of image: flat, a stripe every 50 pixels (PNG keeps it small)."""
    image = Image.new("RGB", (width, height), (30, 60, 90))
    for x in range(0, width, 50):
        image.paste((200, 10, 10), (x, 0, x + 5, height))
    return image


def noise(width: int, height: int) -> Image.Image:
    """A photo's kind of image for an encoder: random pixels (JPEG keeps it smaller)."""
    return Image.frombytes("RGB", (width, height), random.Random(1).randbytes(width * height * 3))


def encoded(image: Image.Image, kind: str, **options: Any) -> bytes:
    out = io.BytesIO()
    image.save(out, kind, **options)
    return out.getvalue()


def turned_jpeg() -> bytes:
    """A 3000x1000 JPEG whose EXIF says to turn it 90° clockwise (a phone held upright)."""
    exif = Image.Exif()
    exif[0x0112] = 6
    return encoded(Image.new("RGB", (3000, 1000), (0, 128, 0)), "JPEG", exif=exif)


def halved(data: bytes) -> bytes:
    return data[:len(data) // 2]


IMAGES = {
    "wide.png": lambda: encoded(stripes(4000, 1001), "PNG"),  # 1001 / 2: halves round up
    "scaled.png": lambda: encoded(stripes(2250, 90), "PNG"),  # 1.125: toFixed rounds up
    "noise.png": lambda: encoded(noise(2400, 600), "PNG"),
    "heavy.png": lambda: encoded(noise(1400, 1200), "PNG"),  # 5 MB in 2000x2000
    "photo.jpg": lambda: encoded(noise(2400, 600), "JPEG", quality=95),
    "padded.png": lambda: PNG + bytes(5 * 1024 * 1024),  # 1x1, the old test's 5 MB image
    "dot.bmp": lambda: BMP,
    "wide.bmp": lambda: encoded(stripes(3000, 1000), "BMP"),
    "turned.jpg": turned_jpeg,
    "cut.png": lambda: halved(encoded(stripes(4000, 1001), "PNG")),
    "cut.bmp": lambda: halved(encoded(stripes(800, 600), "BMP")),
    "sliver.png": lambda: encoded(stripes(30000, 3), "PNG"),  # 2000x0: pi leaves it out
    "thread.png": lambda: encoded(stripes(3, 30000), "PNG"),
}
# What pi 1.6's read answered on each, for machines without it (see pi16_images).
STORED_IMAGES = Path(__file__).with_name("fixtures") / "pi16-images.json"


def sent(blocks: list[Any]) -> dict[str, Any]:
    """A read's answer as the tests compare it: its text, and its image's type, pixel size and
    whether its base64 is within the limit."""
    texts = [b if isinstance(b, str) else b.text for b in blocks
             if isinstance(b, str | TextContent)]
    shown = [(b["mimeType"], b["data"]) if isinstance(b, dict) else (b.mime_type, b.data)
             for b in blocks if isinstance(b, dict | ImageContent)]
    image = None
    for mime, data in shown:
        with Image.open(io.BytesIO(base64.b64decode(data))) as decoded:
            image = [mime, *decoded.size, len(data) < images.MAX_BASE64]
    return {"text": "\n".join(texts), "image": image}


@pytest.fixture(scope="module")
def image_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("images")
    for name, made in IMAGES.items():
        (folder / name).write_bytes(made())
    return folder


@pytest.fixture(scope="module")
def pi16_images(image_files: Path) -> dict[str, Any]:
    """What pi 1.6's read answers on each image: run where it is here (and checked against the
    stored answers), else as stored."""
    stored: dict[str, Any] = json.loads(STORED_IMAGES.read_text("utf-8"))
    node = pi16_node()
    if node is not None:
        run = subprocess.run([node, str(Path(__file__).with_name("pi16_read.mjs")),
                              str(PI16 / "@earendil-works"), str(image_files), *IMAGES],
                             capture_output=True, text=True, timeout=PROCESS_CEILING_S)
        assert run.returncode == 0, run.stderr
        assert {name: sent(blocks) for name, blocks in json.loads(run.stdout).items()} == stored
    return stored


@pytest.mark.parametrize("name", IMAGES)
async def test_read_sends_an_image_as_pi_sends_it(image_files: Path,
                                                  pi16_images: dict[str, Any],
                                                  name: str) -> None:
    """pi-lsp sent an image as it was: a 4000x3000 screenshot or a 6 MB photo went to the model,
    whose API refused it, and every later request of the session with it; a BMP was left out.
    pi 1.6 converts, turns and scales it (within 2000x2000 and 4.5 MB of base64) and says so.
    A 30000x3 one, scaled to 2000x0, failed ("read failed: height and width must be > 0")."""
    result = await run(READ, {"path": name}, image_files)
    assert not result.is_error
    assert sent(result.content) == pi16_images[name]


# The same with settings' `images.autoResize: false` (pi16_read.mjs --no-resize).
STORED_IMAGES_AS_IS = Path(__file__).with_name("fixtures") / "pi16-images-as-is.json"


@pytest.fixture(scope="module")
def pi16_images_as_is(image_files: Path) -> dict[str, Any]:
    """What pi 1.6's read answers on each image when it does not resize, as pi16_images."""
    stored: dict[str, Any] = json.loads(STORED_IMAGES_AS_IS.read_text("utf-8"))
    node = pi16_node()
    if node is not None:
        run = subprocess.run([node, str(Path(__file__).with_name("pi16_read.mjs")),
                              str(PI16 / "@earendil-works"), str(image_files), "--no-resize",
                              *IMAGES], capture_output=True, text=True, timeout=PROCESS_CEILING_S)
        assert run.returncode == 0, run.stderr
        assert {name: sent(blocks) for name, blocks in json.loads(run.stdout).items()} == stored
    return stored


@pytest.mark.parametrize("name", IMAGES)
async def test_read_sends_an_image_unscaled_when_settings_say_so(
        image_files: Path, pi16_images_as_is: dict[str, Any], name: str) -> None:
    """`images.autoResize: false` was not honoured: a 4000x1001 screenshot went scaled down to
    2000x501. pi 1.6 sends it as it is, converting only what it must (a BMP, to PNG)."""
    result = await run(READ, {"path": name}, image_files, auto_resize_images=False)
    assert not result.is_error
    assert sent(result.content) == pi16_images_as_is[name]
    if "converted" not in text_of(result):  # the file's own bytes, to the last one
        assert [base64.b64decode(b.data) for b in result.content
                if isinstance(b, ImageContent)] == [(image_files / name).read_bytes()]


async def test_read_leaves_out_an_image_too_large_to_send_unscaled(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without resizing, a 60 MB file starting with a PNG went whole into a tool result over
    the 64 MB an entry may be: it could not be written, and the session ended on a tool call
    with no result. Past MAX_UNRESIZED (400 characters here) it is left out, as is a BMP whose
    PNG would be."""
    monkeypatch.setattr(images, "MAX_UNRESIZED", 400)
    (root / "big.png").write_bytes(encoded(noise(4, 4), "PNG") + b"\0" * 300)
    (root / "big.bmp").write_bytes(encoded(noise(64, 48), "BMP"))
    (root / "small.png").write_bytes(encoded(noise(4, 4), "PNG"))
    for name, mime in (("big.png", "image/png"), ("big.bmp", "image/bmp")):
        result = await run(READ, {"path": name}, root, auto_resize_images=False)
        assert result.content == [TextContent(
            text=f"Read image file [{mime}]\n{images.TOO_LARGE_UNRESIZED}")]
    result = await run(READ, {"path": "small.png"}, root, auto_resize_images=False)
    assert [b.mime_type for b in result.content if isinstance(b, ImageContent)] == ["image/png"]


async def test_read_leaves_out_an_image_it_cannot_bring_under_the_limit(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pi's answer when no size down to 1x1 fits in any encoding (a limit of 50 characters
    here; 4.5 MB always fits a 1x1)."""
    monkeypatch.setattr(images, "MAX_BASE64", 50)
    (root / "noise.png").write_bytes(encoded(noise(64, 48), "PNG"))
    result = await run(READ, {"path": "noise.png"}, root)
    assert result.content == [TextContent(text="Read image file [image/png]\n[Image omitted: "
                                               "could not be resized below the inline image "
                                               "size limit.]")]


async def test_read_scales_16_bit_grey_as_pi_does(root: Path) -> None:
    """Pillow clips 16-bit grey to 8 bits: a scaled-down scan or depth map went all white. pi
    1.6 scales it (40000 is 156 in what it sends)."""
    Image.new("I;16", (2500, 100), 40000).save(root / "grey.png")
    result = await run(READ, {"path": "grey.png"}, root)
    [image] = [b for b in result.content if isinstance(b, ImageContent)]
    with Image.open(io.BytesIO(base64.b64decode(image.data))) as shown:
        assert shown.size == (2000, 80)
        assert shown.convert("L").getpixel((5, 5)) == 156


def png_claiming(width: int, height: int) -> bytes:
    """A PNG of a few KB whose header claims `width`x`height` (a decompression bomb's)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (len(data).to_bytes(4, "big") + kind + data
                + zlib.crc32(kind + data).to_bytes(4, "big"))

    header = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 2, 0, 0, 0])
    rows = zlib.compress(bytes((1 + 3 * width) * 100))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", rows)
            + chunk(b"IEND", b""))


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")
@pytest.mark.parametrize("side", [50000, 9500])
async def test_read_refuses_an_image_too_large_to_decode(root: Path, side: int) -> None:
    """A few KB of PNG claiming 50000x50000 pixels (7.5 GB decoded) or 9500x9500 (more than
    Pillow's bound, 89,478,485) is refused from its header, with why, before any decoding."""
    (root / "bomb.png").write_bytes(png_claiming(side, side))
    result = await run(READ, {"path": "bomb.png"}, root)
    assert result.content == [TextContent(text="Read image file [image/png]\n[Image omitted: "
                                               "more than 89478485 pixels, too large to "
                                               "decode; make a smaller copy and read that.]")]


SMALL = Image.new("RGB", (30, 20), (200, 10, 10))
RESIZED_NOTE = ("[Image: original 3000x2000, displayed at 2000x1333. Multiply coordinates by 1.50 "
                "to map to original image.]")


# What pi 1.6's processImage made of each (bytes, stated type), run from Node; but where the
# bytes tell another type than the stated one, pi-lsp sends that type (pi: the stated one).
@pytest.mark.parametrize(("data", "stated", "mime", "hints", "size", "as_given"), [
    (encoded(SMALL, "JPEG"), "image/png", "image/jpeg", [], (30, 20), True),
    (encoded(SMALL, "PNG"), "image/jpg", "image/png", [], (30, 20), True),
    (encoded(SMALL, "PNG"), " IMAGE/PNG; x=1", "image/png", [], (30, 20), True),
    (encoded(SMALL, "BMP"), "image/png", "image/png",
     ["[Image converted from image/bmp to image/png.]"], (30, 20), False),
    (encoded(SMALL, "TIFF"), "image/png", "image/png",
     ["[Image converted from image/tiff to image/png.]"], (30, 20), False),
    (encoded(SMALL, "PPM"), "image/jpeg", "image/png",
     ["[Image converted from image/x-portable-anymap to image/png.]"], (30, 20), False),
    (encoded(SMALL, "PNG", save_all=True, append_images=[Image.new("RGB", (30, 20))]),
     "image/jpeg", "image/png", [], (30, 20), True),
    (encoded(stripes(3000, 2000), "JPEG"), "image/png", "image/png", [RESIZED_NOTE],
     (2000, 1333), False),
    (encoded(SMALL, "TIFF"), "image/tiff", "image/png",
     ["[Image converted from image/tiff to image/png.]"], (30, 20), False),
    (encoded(SMALL, "PNG"), "application/octet-stream", "image/png",
     ["[Image converted from application/octet-stream to image/png.]"], (30, 20), False),
    (encoded(SMALL, "PNG"), "", "image/png", [], (30, 20), False),
], ids=["jpeg-said-png", "png-said-jpg", "png-said-with-parameters", "bmp-said-png",
        "tiff-said-png", "ppm-said-jpeg", "animated-png-said-jpeg", "large-jpeg-said-png",
        "tiff", "octet-stream", "no-type"])
def test_a_given_image_is_decoded_by_its_bytes_and_sent_as_its_type_says(
        data: bytes, stated: str, mime: str, hints: list[str], size: tuple[int, int],
        as_given: bool) -> None:
    """A prompt's image was decoded as the type the editor gave: a JPEG said to be a PNG, or an
    image/jpg, was left out. pi 1.6 decodes by the bytes and keeps the given type (normalized)
    for an image it sends as it is; pi-lsp sends the type the bytes tell, since a provider
    refuses a JPEG sent as image/png and the session then fails every later request."""
    result = images.process_image(io.BytesIO(data), stated)
    with Image.open(io.BytesIO(base64.b64decode(result.data))) as shown:
        assert (result.mime_type, result.hints, shown.size) == (mime, hints, size)
    assert (base64.b64decode(result.data) == data) is as_given


@pytest.mark.parametrize(("stated", "omitted"), [
    ("image/png", images.NOT_RESIZED), ("image/x-icon", images.NOT_CONVERTED)])
def test_a_given_image_pi_cannot_decode_is_left_out(stated: str, omitted: str) -> None:
    """An ICO, which pi 1.6's decoder does not read (Pillow does), is left out with pi's note."""
    with pytest.raises(images.ImageOmitted, match=re.escape(omitted)):
        images.process_image(io.BytesIO(encoded(SMALL, "ICO")), stated)


def test_an_image_converted_to_png_and_scaled_down_is_not_encoded_at_full_size(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Its full-size PNG was encoded first and thrown away by the resize: at Pillow's pixel
    bound, 2.9 s and 710 MB for an image stated image/tiff, against 1.2 s and 455 MB."""
    png = images._png
    encoded_sizes: list[tuple[int, int]] = []

    def noted(image: Image.Image) -> bytes:
        encoded_sizes.append(image.size)
        return png(image)

    monkeypatch.setattr(images, "_png", noted)
    result = images.process_image(io.BytesIO(encoded(stripes(3000, 2000), "TIFF")),
                                  "image/tiff")
    assert result.hints == ["[Image converted from image/tiff to image/png.]", RESIZED_NOTE]
    assert encoded_sizes == [(2000, 1333)]


def test_an_image_converted_to_a_png_past_the_size_limit_is_encoded_again_as_pi_does() -> None:
    """A 1200x1200 photo given as a BMP makes 5.8 MB of PNG base64, which was sent as it was
    (Anthropic refuses one over 5 MB). pi 1.6 holds the PNG to the limit; run from Node, it
    made this type and these notes of it."""
    result = images.process_image(io.BytesIO(encoded(noise(1200, 1200), "BMP")), "image/bmp")
    assert (result.mime_type, result.hints) == ("image/jpeg", [
        "[Image converted from image/bmp to image/jpeg.]",
        "[Image: original 1200x1200, displayed at 1200x1200. Multiply coordinates by 1.00 to "
        "map to original image.]"])
    assert len(result.data) < images.MAX_BASE64


# -- write ---------------------------------------------------------------------------------


async def test_write_creates_parent_directories(root: Path) -> None:
    result = await run(WRITE, {"path": "deep/er/new.txt", "content": "hello\n"}, root)
    assert not result.is_error, text_of(result)
    assert (root / "deep" / "er" / "new.txt").read_text() == "hello\n"


async def test_write_makes_a_thousand_missing_folders(root: Path) -> None:
    """Path.mkdir(parents=True) recursed once a missing folder and failed past ~990 of them
    ("write failed: RecursionError"); Node's mkdir -p, pi 1.6's, makes all 1,500."""
    path = root / ("d/" * 1500 + "new.txt")
    try:
        result = await run(WRITE, {"path": str(path), "content": "deep\n"}, root)
        assert not result.is_error, text_of(result)
        assert path.read_text() == "deep\n"
    finally:  # shutil.rmtree, which pytest cleans up with, recurses too
        path.unlink(missing_ok=True)
        folder = path.parent
        while folder != root:
            with contextlib.suppress(FileNotFoundError):
                folder.rmdir()
            folder = folder.parent


def test_a_deep_tree_a_killed_run_left_in_pytests_temp_fails_no_later_run(tmp_path: Path
                                                                         ) -> None:
    """A run killed in the test above (pytest-timeout's thread method skips its `finally`)
    left 1,500 folders in pytest's temp root; pytest's cleanup of it at the end of every later
    run raised RecursionError, so each exited 1 with all its tests passed."""
    root = tmp_path / "temproot" / f"pytest-of-{getpass.getuser()}"
    for number in range(1, 5):
        (root / f"pytest-{number}").mkdir(parents=True)
    deep = root / "pytest-1"
    for _ in range(1500):  # os.makedirs recurses too
        deep /= "d"
        deep.mkdir()
    try:
        ran = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
             f"{__file__}::test_write_makes_a_thousand_missing_folders"],
            cwd=Path(__file__).parent.parent, capture_output=True, text=True,
            env={**os.environ, "PYTEST_DEBUG_TEMPROOT": str(tmp_path / "temproot")},
            timeout=PROCESS_CEILING_S)
        assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
        assert not (root / "pytest-1").exists()
    finally:  # wherever it is now: pytest renames a folder to garbage-* to delete it
        remove_tree(tmp_path / "temproot")


def remove_tree(top: Path) -> None:
    """`top` and everything in it, in a loop: shutil.rmtree and os.walk recurse once a folder,
    and fail on a tree over ~1,000 deep."""
    pending = [top]
    while pending:
        folder = pending[-1]
        inner = []
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    inner.append(Path(entry.path))
                else:
                    os.unlink(entry.path)
        if inner:
            pending += inner
        else:
            folder.rmdir()
            pending.pop()


class SwappingFiles(DiskFiles):
    """The disk, where something replaces the file with a symlink to `target` just before each
    write (another session's command, a checkout)."""

    def __init__(self, target: Path) -> None:
        self.target = target

    async def write_text(self, path: Path, text: str, old: str | None,
                         seen: tuple[int, ...] | None = None) -> None:
        path.unlink()
        path.symlink_to(self.target)
        await super().write_text(path, text, old, seen)


async def test_a_write_never_follows_a_symlink_put_there_after_the_check(root: Path) -> None:
    """The path checked to be inside the workspace was opened following symlinks: a file
    replaced by a symlink to ~/.bashrc between the check and the write had ~/.bashrc
    written (a restore of a file open in the editor writes so too)."""
    outside = root.parent / "bashrc"
    outside.write_text("mine\n")
    (root / "a.txt").write_text("A\n")
    result = await run(WRITE, {"path": "a.txt", "content": "W\n"}, root,
                       files=SwappingFiles(outside))
    assert result.is_error and "ELOOP" in text_of(result), text_of(result)
    assert outside.read_text() == "mine\n"


class FolderSwappingFiles(DiskFiles):
    """The disk, where something replaces the file's folder with a symlink to `target` just
    before each write (another session's command, a checkout)."""

    def __init__(self, target: Path) -> None:
        self.target = target

    async def write_text(self, path: Path, text: str, old: str | None,
                         seen: tuple[int, ...] | None = None) -> None:
        shutil.rmtree(path.parent)
        path.parent.symlink_to(self.target, target_is_directory=True)
        await super().write_text(path, text, old, seen)


async def test_a_write_never_follows_a_folder_made_a_symlink_after_the_check(root: Path) -> None:
    """O_NOFOLLOW guarded the file's own name only: a folder on the checked path replaced by a
    symlink between the check and the write had the file written where the link leads."""
    outside = root.parent / "home"
    outside.mkdir()
    (outside / "a.txt").write_text("mine\n")
    (root / "sub").mkdir()
    (root / "sub" / "a.txt").write_text("A\n")
    result = await run(WRITE, {"path": "sub/a.txt", "content": "W\n"}, root,
                       files=FolderSwappingFiles(outside))
    # Linux refuses the link as no folder (ENOTDIR), macOS as a link (ELOOP)
    assert result.is_error and any(f"{code}: " in text_of(result) for code in
                                   ("ENOTDIR", "ELOOP")), text_of(result)
    assert (outside / "a.txt").read_text() == "mine\n"


class AncestorSwappingFiles(DiskFiles):
    """The disk, where something replaces the folder `swapped` with a symlink to `target`
    just before each write, above folders the write has still to make."""

    def __init__(self, swapped: Path, target: Path) -> None:
        self.swapped, self.target = swapped, target

    async def write_text(self, path: Path, text: str, old: str | None,
                         seen: tuple[int, ...] | None = None) -> None:
        shutil.rmtree(self.swapped)
        self.swapped.symlink_to(self.target, target_is_directory=True)
        await super().write_text(path, text, old, seen)


async def test_a_write_makes_no_folder_where_a_folder_made_a_symlink_leads(root: Path
                                                                          ) -> None:
    """The file was opened without following a swapped-in symlink, but the missing folders
    on its way were still made through it, outside the workspace, before the write failed."""
    outside = root.parent / "home"
    outside.mkdir()
    (root / "sub").mkdir()
    result = await run(WRITE, {"path": "sub/new/deeper/a.txt", "content": "W\n"}, root,
                       files=AncestorSwappingFiles(root / "sub", outside))
    assert result.is_error and any(f"{code}: " in text_of(result) for code in
                                   ("ENOTDIR", "ELOOP")), text_of(result)
    assert list(outside.iterdir()) == []


def test_a_write_goes_through_a_folder_the_user_may_enter_but_not_list() -> None:
    """Opening each folder on the way to read it (to guard against a swapped-in symlink)
    failed with EACCES under a folder of mode 711, which a path goes through unread (a shared
    host's /home); the kernel's own walk needs only the right to enter."""
    with tempfile.TemporaryDirectory() as folder:
        os.chmod(folder, 0o777)
        passage = Path(folder) / "passage"
        (passage / "ws").mkdir(parents=True, mode=0o777)
        os.chmod(passage / "ws", 0o777)
        os.chmod(passage, 0o711)
        def work() -> str:
            write_regular(passage / "ws" / "new.txt", b"hi\n")
            return "written"

        answer = as_a_user(work)
        assert answer == "written"
        assert (passage / "ws" / "new.txt").read_bytes() == b"hi\n"


@pytest.mark.parametrize(("path", "expected", "is_error"), [
    ("n.txt", "Successfully wrote to n.txt", False),
    ("@n.txt", "Successfully wrote to @n.txt", False),  # named as given, written to n.txt
    ("d", "EISDIR: illegal operation on a directory, open '{root}/d'", True),
])
async def test_write_answers_as_pi_answers(root: Path, path: str, expected: str,
                                           is_error: bool) -> None:
    """pi-lsp answered "Wrote 3 bytes to n.txt", and a folder in the way with Python's
    "write failed: [Errno 21] Is a directory" after asking to create it."""
    (root / "d").mkdir()
    args = {"path": path, "content": "hi\n"}
    if is_error:
        with pytest.raises(ToolError):
            propose_change("write", args, ToolContext(root))  # nobody is asked to approve it
    result = await run(WRITE, args, root)
    assert (text_of(result), result.is_error) == (expected.replace("{root}", str(root)), is_error)
    assert is_error or (root / "n.txt").read_text() == "hi\n"


# A call as the loop makes it (approval, then the tool), in a process for which file permissions
# hold: as root, one without the capabilities that pass them (setpriv drops them).
UNPRIVILEGED_CALL = """
import asyncio, json, sys
from pathlib import Path
from pi_lsp.agent.approval import ask_approval
from pi_lsp.agent.tools import ALL_TOOLS, ToolContext, execute_tool
from pi_lsp.session.entries import TextContent, ToolCall
name, args, root, meanwhile = json.loads(sys.argv[1])
async def main():
    ctx, shown = ToolContext(Path(root)), []
    async def approver(request):
        shown.append(request.change.diff())
        for how, name, text in meanwhile:  # what the user does while asked
            if how == "save":  # in place, as an editor saves
                Path(root, name).write_text(text)
            else:  # another file moved over it, as an editor saves by renaming
                Path(root, "moved").write_text(text)
                Path(root, "moved").chmod(0o222)
                Path(root, "moved").replace(Path(root, name))
    refusal = await ask_approval(ToolCall(id="1", name=name, arguments=args), ctx, approver)
    if refusal is not None:  # the model reads it as the call's result
        if not isinstance(refusal, str):
            refusal = "".join(b.text for b in refusal.content if isinstance(b, TextContent))
        print(json.dumps([shown, refusal, True]))
        return
    result = await execute_tool({t.name: t for t in ALL_TOOLS}[name], name, args, ctx)
    text = "".join(b.text for b in result.content if isinstance(b, TextContent))
    print(json.dumps([shown, text, result.is_error]))
asyncio.run(main())
"""


def unprivileged_call(name: str, args: dict[str, Any], root: Path,
                      meanwhile: tuple[tuple[str, str, str], ...] = ()
                      ) -> tuple[list[str], str, bool]:
    """The diffs the approval showed, the result's text (the refusal's, if refused) and whether
    it is an error, for a call made where file permissions hold; `meanwhile`'s ("save" or
    "move", file, text) are done while the user is asked."""
    command = [sys.executable, "-c", UNPRIVILEGED_CALL,
               json.dumps([name, args, str(root), meanwhile])]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("as root, file permissions hold only under setpriv (util-linux)")
        command = ["setpriv", "--inh-caps=-dac_override,-dac_read_search",
                   "--bounding-set=-dac_override,-dac_read_search", "--", *command]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run(command, capture_output=True, text=True, env=env,
                          timeout=PROCESS_CEILING_S, check=False)
    assert done.returncode == 0, done.stderr
    shown, text, is_error = json.loads(done.stdout)
    return shown, text, is_error


def test_a_file_that_cannot_be_read_is_still_overwritten(root: Path) -> None:
    """A write-only file (mode 0222) failed with "write failed: [Errno 13] Permission denied",
    unchanged: pi-lsp read it for the approval's diff. pi 1.6 never reads what it overwrites."""
    (root / "wo.txt").write_text("WO\n")
    (root / "wo.txt").chmod(0o222)
    shown, text, is_error = unprivileged_call("write", {"path": "wo.txt", "content": "N\n"}, root)
    assert (text, is_error) == ("Successfully wrote to wo.txt", False)
    path = os.path.realpath(root / "wo.txt")
    assert shown == [f"--- {path} (its text cannot be read, so it is not shown)\n+++ {path}\n"
                     "@@ -0,0 +1 @@\n+N\n"]
    (root / "wo.txt").chmod(0o644)
    assert (root / "wo.txt").read_text() == "N\n"


@pytest.mark.parametrize(("how", "user_text"), [("save", "USER'S NEW WORK\n"),
                                                ("move", "WX\n")])  # as long as "WO\n"
def test_an_unreadable_file_changed_while_asked_is_not_written(root: Path, how: str,
                                                              user_text: str) -> None:
    """A write-only file the user saved (or replaced by another, of the same size) while the
    write was being asked was overwritten: its proposal held no text, so it matched the one
    approved whatever the file had become. Its identity (inode, size, times) is held now."""
    (root / "wo.txt").write_text("WO\n")
    (root / "wo.txt").chmod(0o222)
    shown, text, is_error = unprivileged_call("write", {"path": "wo.txt", "content": "N\n"},
                                              root, ((how, "wo.txt", user_text),))
    assert len(shown) == 1
    # (Not "Read it again.": the model cannot read it.)
    assert (text, is_error) == ("wo.txt changed while the write waited for approval; nothing "
                                "was written.", True)
    (root / "wo.txt").chmod(0o644)
    assert (root / "wo.txt").read_text() == user_text


# pi 1.6's results (Node's error.message, as its agent loop passes it on), from running its
# tools on the same files.
LONG = "a" * 300
THROUGH_A_FILE = {"a.txt": "F\n", "dl": "->a.txt/zz", "chain": "->dl"}
FAILURES_AS_PI = [
    ({"afile": "F\n"}, "write", "afile/x.txt", "EEXIST: file already exists, mkdir '{root}/afile'"),
    ({"afile": "F\n"}, "write", "afile/y/x.txt",
     "ENOTDIR: not a directory, mkdir '{root}/afile/y'"),
    ({"afile": "F\n"}, "edit", "afile/x.txt",
     "Could not edit file: afile/x.txt. Error code: ENOTDIR."),
    ({}, "edit", "nope/x.txt", "Could not edit file: nope/x.txt. Error code: ENOENT."),
    ({"l1": "->l2", "l2": "->l1"}, "write", "l1",
     "ELOOP: too many symbolic links encountered, realpath '{root}/l1'"),
    ({"l1": "->l2", "l2": "->l1"}, "write", "l1/x.txt",
     "ELOOP: too many symbolic links encountered, realpath '{root}/l1/x.txt'"),
    ({"l1": "->l2", "l2": "->l1"}, "edit", "l1",
     "ELOOP: too many symbolic links encountered, realpath '{root}/l1'"),
    ({"l1": "->l2", "l2": "->l1"}, "read", "l1",
     "ELOOP: too many symbolic links encountered, access '{root}/l1'"),
    ({}, "write", f"{LONG}.txt", f"ENAMETOOLONG: name too long, realpath '{{root}}/{LONG}.txt'"),
    # A symlink whose target runs through a file: it cannot be followed (ENOTDIR), which pi
    # names at the path given, where Python named the target ("[Errno 20] …/a.txt/zz").
    (THROUGH_A_FILE, "write", "dl", "ENOTDIR: not a directory, open '{root}/dl'"),
    (THROUGH_A_FILE, "write", "chain", "ENOTDIR: not a directory, open '{root}/chain'"),
    (THROUGH_A_FILE, "write", "chain/q.txt", "ENOTDIR: not a directory, mkdir '{root}/chain'"),
    (THROUGH_A_FILE, "write", "dl/q.txt", "ENOTDIR: not a directory, mkdir '{root}/dl'"),
    (THROUGH_A_FILE, "write", "chain/sub/q.txt",
     "ENOTDIR: not a directory, mkdir '{root}/chain/sub'"),
    (THROUGH_A_FILE, "edit", "chain", "Could not edit file: chain. Error code: ENOTDIR."),
    (THROUGH_A_FILE, "edit", "chain/q.txt",
     "Could not edit file: chain/q.txt. Error code: ENOTDIR."),
    (THROUGH_A_FILE, "read", "chain", "ENOTDIR: not a directory, access '{root}/chain'"),
    (THROUGH_A_FILE, "read", "chain/q.txt",
     "ENOTDIR: not a directory, access '{root}/chain/q.txt'"),
    ({}, "edit", f"{LONG}/x.txt",
     f"ENAMETOOLONG: name too long, realpath '{{root}}/{LONG}/x.txt'"),
]


def make_files(root: Path, files: dict[str, str]) -> None:
    """Each of `files` under `root`: a symlink where its text is "->target", else a file."""
    for name, text in files.items():
        if text.startswith("->"):
            (root / name).symlink_to(text[2:])
        else:
            (root / name).write_text(text)


def call_args(name: str, path: str) -> dict[str, Any]:
    """A call of tool `name` on `path` (an edit of "F", a write of a line)."""
    if name == "edit":
        return {"path": path, "edits": [replace("F", "G")]}
    return {"path": path, "content": "N\n"} if name == "write" else {"path": path}


@pytest.mark.parametrize(("files", "name", "path", "expected"), FAILURES_AS_PI)
async def test_file_tools_fail_in_pis_words(root: Path, files: dict[str, str], name: str,
                                            path: str, expected: str) -> None:
    """A write through a file as a folder, a symlink loop or a name too long answered Python's
    "write failed: [Errno 20] Not a directory: …", and an edit through a file said ENOENT; pi
    passes Node's message on. Nothing is asked for a call that would fail."""
    make_files(root, files)
    tool = {tool.name: tool for tool in (READ, WRITE, EDIT)}[name]
    asked: list[str] = []

    async def approver(request: Any) -> None:
        asked.append(request.call.name)

    refusal = answer_text(await ask_approval(
        ToolCall(id="1", name=name, arguments=call_args(name, path)), ToolContext(root), approver))
    result = await execute_tool(tool, name, call_args(name, path), ToolContext(root))
    expected = expected.replace("{root}", str(root))
    assert (text_of(result), result.is_error) == (expected, True)
    assert (refusal, asked) == ((expected, []) if name != "read" else (None, []))
    assert sorted(os.listdir(root)) == sorted(files)


@pytest.mark.parametrize(("files", "modes", "name", "path", "expected"), [
    ({"ro.txt": "RO\n"}, {"ro.txt": 0o444}, "write", "ro.txt",
     "EACCES: permission denied, open '{root}/ro.txt'"),
    ({"rodir/.keep": ""}, {"rodir": 0o555}, "write", "rodir/new.txt",
     "EACCES: permission denied, open '{root}/rodir/new.txt'"),
    ({"rodir/.keep": ""}, {"rodir": 0o555}, "write", "rodir/sub/deeper/new.txt",
     "EACCES: permission denied, mkdir '{root}/rodir/sub'"),
    ({"nodir/a.txt": "F\n"}, {"nodir": 0}, "write", "nodir/a.txt",
     "EACCES: permission denied, realpath '{root}/nodir/a.txt'"),
    ({"nodir/a.txt": "F\n"}, {"nodir": 0}, "edit", "nodir/a.txt",
     "EACCES: permission denied, realpath '{root}/nodir/a.txt'"),
    ({"ro.txt": "F\n"}, {"ro.txt": 0o444}, "edit", "ro.txt",
     "Could not edit file: ro.txt. Error code: EACCES."),
])
def test_permission_failures_are_worded_as_pis(root: Path, files: dict[str, str],
                                               modes: dict[str, int], name: str, path: str,
                                               expected: str) -> None:
    """A file or folder the user may not write answered "write failed: [Errno 13] Permission
    denied: …"; pi names the error's code and the system call that failed, as Node does."""
    write_files(root, files)
    for folder, mode in modes.items():
        (root / folder).chmod(mode)
    try:
        _, text, is_error = unprivileged_call(name, call_args(name, path), root)
    finally:
        for folder in modes:
            (root / folder).chmod(0o755)
    assert (text, is_error) == (expected.replace("{root}", str(root)), True)


# A write where files may grow to 1 KiB at most: it fails with EFBIG as on a full disk
# (ENOSPC), the signal that would end the process ignored, as Node ignores it.
LIMITED_WRITE = """
import asyncio, json, resource, signal, sys
from pathlib import Path
from pi_lsp.agent.tools import WRITE, ToolContext, execute_tool
root, size = sys.argv[1], int(sys.argv[2])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (1024, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
args = {"path": "big.txt", "content": "x" * size}
result = asyncio.run(execute_tool(WRITE, "write", args, ToolContext(Path(root))))
print(json.dumps([result.content[0].text, result.is_error]))
"""


@pytest.mark.parametrize("size", [3000, 20000])
def test_a_write_the_disk_cannot_hold_fails_in_pis_words(root: Path, size: int) -> None:
    """A write that met a full disk (ENOSPC), a quota or the file size limit (EFBIG) when its
    buffer was flushed at close (3000 bytes; 20000 fail within the write) said "write failed:
    [Errno 27] File too large"; pi 1.6 says "EFBIG: file too large, write" for both."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-c", LIMITED_WRITE, str(root), str(size)],
                          capture_output=True, text=True, env=env, timeout=PROCESS_CEILING_S,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["EFBIG: file too large, write", True]


@pytest.mark.parametrize(("tool", "raw"), [
    (WRITE, '{"path": "keep.py", "content": "x = \\"\\ud83d\\"\\n"}'),
    (EDIT, '{"path": "keep.py", "oldText": "keep", "newText": "x = \\"\\ud83d\\""}'),
])
async def test_a_lone_surrogate_is_written_as_pi_writes_it(root: Path, tool: Tool, raw: str
                                                          ) -> None:
    """A lone surrogate (valid JSON) failed to encode after the file was truncated: the call
    failed and the file was left empty. pi writes U+FFFD in its place; so does pi-lsp now."""
    (root / "keep.py").write_text("keep\n")
    args, error = parse_arguments(raw)
    assert error is None and any("\ud83d" in value for value in args.values())
    ctx = ToolContext(root)
    ctx.approved = propose_change(tool.name, args, ctx)
    assert ctx.approved is not None and "\ud83d" not in ctx.approved.new_text  # as approved
    result = await execute_tool(tool, tool.name, args, ctx)
    assert not result.is_error, text_of(result)
    assert (root / "keep.py").read_bytes() == 'x = "\ufffd"\n'.encode()


# Calls whose path or command holds half a character (a lone surrogate, as a model streaming
# half an emoji leaves it), the files there before and after, and pi 1.6's answer: Node writes
# each lone surrogate as U+FFFD where the string becomes a path or a command, and names the path
# as given where it words the message itself.
F = "\ufffd"
PI16_LONE_SURROGATE_CALLS = [
    (READ, {"path": "\ud800.txt"}, {f"{F}.txt": "hi\n"}, {}, "hi\n"),
    (READ, {"path": "\udcff.txt"}, {f"{F}.txt": "hi\n"}, {}, "hi\n"),
    (READ, {"path": "\ud800.txt"}, {}, {},
     f"ENOENT: no such file or directory, access '{{root}}/{F}.txt'"),
    (READ, {"path": "\ud800"}, {f"{F}/a": "x"}, {},
     "EISDIR: illegal operation on a directory, read"),
    (WRITE, {"path": "\ud800.txt", "content": "N\n"}, {}, {f"{F}.txt": "N\n"},
     "Successfully wrote to \ud800.txt"),
    (WRITE, {"path": "\ud800/\udcff.txt", "content": "N\n"}, {}, {f"{F}/{F}.txt": "N\n"},
     "Successfully wrote to \ud800/\udcff.txt"),
    (EDIT, {"path": "\ud800", "edits": [{"oldText": "a", "newText": "b"}]}, {}, {},
     "Could not edit file: \ud800. Error code: ENOENT."),
    (EDIT, {"path": "\udc00.txt", "edits": [{"oldText": "b", "newText": "X"}]},
     {f"{F}.txt": "abc\n"}, {f"{F}.txt": "aXc\n"},
     "Successfully replaced 1 block(s) in \udc00.txt."),
    (EDIT, {"path": "\udc00.txt", "edits": [{"oldText": "zz", "newText": "X"}]},
     {f"{F}.txt": "abc\n"}, {}, "Could not find the exact text in \udc00.txt. The old text "
     "must match exactly including all whitespace and newlines."),
    (BASH, {"command": "echo x\ud800y"}, {}, {}, f"x{F}y\n"),
    (BASH, {"command": "printf '%s' x\udcffy | od -An -tx1"}, {}, {}, " 78 ef bf bd 79\n"),
]


@pytest.mark.parametrize(("tool", "args", "before", "changed", "expected"),
                         PI16_LONE_SURROGATE_CALLS)
async def test_half_a_character_in_a_path_or_command_is_read_as_pi_16_reads_it(
        root: Path, tool: Tool, args: dict[str, Any], before: dict[str, str],
        changed: dict[str, str], expected: str) -> None:
    """A lone surrogate failed every tool with Python's "'utf-8' codec can't encode character
    '\\ud800'", and one of \\udc80-\\udcff went to the disk or the shell as a raw byte (0xff)
    where pi 1.6 has U+FFFD (found by the differential fuzz)."""
    for name, text in before.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    ctx = ToolContext(root)
    # As the loop runs a call: a call refused while its approval is worked out is not run.
    answer = await ask_approval(ToolCall(id="t1", name=tool.name, arguments=args), ctx,
                                allow_all)
    result = thrown_result(answer) if isinstance(answer, str) else answer if answer else \
        await execute_tool(tool, tool.name, args, ctx)
    assert text_of(result) == expected.format(root=root)
    # os.walk, not Path.rglob: a name holding a raw 0xff byte reads as "\\udcff" there too
    files = {os.path.relpath(os.path.join(folder, name), root): Path(folder, name).read_text()
             for folder, _, names in os.walk(root) for name in names}
    assert files == {**before, **changed}


async def test_write_to_a_fifo_is_refused_at_once(root: Path) -> None:
    """A write to a FIFO in the workspace was proposed as a new file, then opened for writing on
    the event loop, which waited for a reader: the whole server froze, an abort included."""
    os.mkfifo(root / "out.log")
    args = {"path": "out.log", "content": "x"}
    with pytest.raises(ToolError, match=r"out\.log: it is a FIFO, not a regular file"):
        propose_change("write", args, ToolContext(root))  # nobody is asked to approve it
    result = await asyncio.wait_for(run(WRITE, args, root), CEILING_S)
    assert result.is_error
    assert "FIFO, not a regular file" in text_of(result)


async def test_a_fifo_put_in_place_of_a_file_is_not_written(root: Path) -> None:
    """A FIFO made after the change was approved is refused by the write itself, reader or
    not, without waiting."""
    fifo = root / "out.log"
    os.mkfifo(fifo)
    with pytest.raises(OSError):  # no reader: ENXIO, not a wait
        await asyncio.wait_for(DISK.write_text(fifo, "x", None), CEILING_S)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with pytest.raises(ToolError, match="is a FIFO, not a regular file"):
            await asyncio.wait_for(DISK.write_text(fifo, "x", None), CEILING_S)
        assert os.read(reader, 1) == b""  # nothing was written to it, and no writer is left
    finally:
        os.close(reader)


@pytest.mark.parametrize("where", ["absolute", "dotdot"])
async def test_write_outside_the_root_is_refused(root: Path, where: str) -> None:
    outside = root.parent / "elsewhere" / "x.txt"
    raw = str(outside) if where == "absolute" else "../elsewhere/x.txt"
    result = await run(WRITE, {"path": raw, "content": "no"}, root)
    assert result.is_error
    assert "outside the workspace" in text_of(result)
    assert not outside.exists()


async def test_write_to_literal_tmp_elsewhere_is_refused(root: Path) -> None:
    target = Path("/tmp/elsewhere/pi-lsp-test-should-not-exist.txt")
    result = await run(WRITE, {"path": str(target), "content": "no"}, root)
    assert result.is_error
    assert "outside the workspace" in text_of(result)
    assert not target.exists()


async def test_write_outside_allowed_when_configured(root: Path) -> None:
    outside = root.parent / "elsewhere" / "x.txt"
    result = await run(WRITE, {"path": "../elsewhere/x.txt", "content": "yes"}, root,
                       allow_outside_root=True)
    assert not result.is_error, text_of(result)
    assert outside.read_text() == "yes"


async def test_write_through_a_symlink_out_of_the_root_is_refused(root: Path) -> None:
    outside = root.parent / "outside"
    outside.mkdir()
    (root / "link").symlink_to(outside, target_is_directory=True)
    result = await run(WRITE, {"path": "link/x.txt", "content": "no"}, root)
    assert result.is_error
    assert "outside the workspace" in text_of(result)
    assert not (outside / "x.txt").exists()


async def test_write_through_a_dangling_symlink_into_a_missing_folder_fails_as_in_pi(
        root: Path) -> None:
    # pi 1.6 makes the link's own folder, then writeFile follows the link: ENOENT, nothing made.
    (root / "link.txt").symlink_to("sub/target.txt")
    result = await run(WRITE, {"path": "link.txt", "content": "new"}, root)
    assert result.is_error
    text = text_of(result)
    assert f"ENOENT: no such file or directory, open '{root / 'link.txt'}'" in text
    assert str(root / "sub") in text
    assert not os.path.lexists(root / "sub")


@pytest.mark.parametrize("raw", ["d/x.txt", "d/e/x.txt"])
async def test_write_through_a_dangling_folder_symlink_fails_as_in_pi(root: Path, raw: str
                                                                      ) -> None:
    # pi's mkdir -p meets the link, does not follow it to make `sub`: ENOENT/ENOTDIR.
    (root / "d").symlink_to("sub", target_is_directory=True)
    result = await run(WRITE, {"path": raw, "content": "new"}, root)
    assert result.is_error
    assert f"'{root / 'd'}'" in text_of(result)
    assert str(root / "sub") in text_of(result)
    assert not os.path.lexists(root / "sub")


@pytest.mark.parametrize("raw", ["link.txt", "d/target.txt"])
async def test_write_through_a_symlink_whose_folder_exists_writes_the_target(root: Path, raw: str
                                                                             ) -> None:
    (root / "sub").mkdir()
    (root / "link.txt").symlink_to("sub/target.txt")
    (root / "d").symlink_to("sub", target_is_directory=True)
    result = await run(WRITE, {"path": raw, "content": "new"}, root)
    assert not result.is_error, text_of(result)
    assert (root / "sub" / "target.txt").read_text() == "new"
    assert (root / "link.txt").is_symlink()


async def test_edit_through_a_symlinked_file_out_of_the_root_is_refused(root: Path) -> None:
    outside = root.parent / "secret.txt"
    outside.write_text("keep me\n")
    (root / "innocent.txt").symlink_to(outside)
    result = await run(EDIT, {"path": "innocent.txt", "oldText": "keep", "newText": "lost"}, root)
    assert result.is_error
    assert outside.read_text() == "keep me\n"


# -- paths ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "raw"), [
    ("x.txt", "@x.txt"),  # how a model names a file it was shown with @
    ("a b.txt", "a\u00a0b.txt"),  # a no-break space, as models copy names
    ("x.txt", "file://{root}/x.txt"),
    ("d/x.txt", "./d/../d//x.txt"),
    ("Shot 9.41.05\u202fAM.png", "Shot 9.41.05 AM.png"),  # macOS's names for screenshots
    ("Capture d\u2019e\u0301cran.txt", "Capture d'\u00e9cran.txt"),  # stored decomposed
])
async def test_paths_are_resolved_as_pi_resolves_them(root: Path, name: str, raw: str) -> None:
    """`@x.txt` was "no such file" to read and edit and made a file named `@x.txt` on write;
    a no-break space or a file: URL named nothing. pi 1.6 resolves them (resolveToCwd, and
    resolveReadPath's screenshot names for read); so does pi-lsp now."""
    (root / name).parent.mkdir(exist_ok=True)
    (root / name).write_text("found\n")
    raw = raw.replace("{root}", str(root))
    assert "found" in text_of(await run(READ, {"path": raw}, root))
    if "Shot" in name or "Capture" in name:
        return  # only read looks for the screenshot spellings, as in pi
    edit = await run(EDIT, {"path": raw, "oldText": "found", "newText": "y"}, root)
    assert not edit.is_error, text_of(edit)
    assert (root / name).read_text() == "y\n"
    write = await run(WRITE, {"path": raw, "content": "z\n"}, root)
    assert not write.is_error, text_of(write)
    assert (root / name).read_text() == "z\n"
    assert sorted(p.name for p in root.rglob("*") if p.is_file()) == [Path(name).name]


# -- edit ----------------------------------------------------------------------------------


async def test_edit_replaces_once_with_a_diff(root: Path) -> None:
    (root / "f.py").write_text("a = 1\nb = 2\nc = 3\n")
    result = await run(EDIT, {"path": "f.py", "oldText": "b = 2", "newText": "b = 20"}, root)
    assert not result.is_error, text_of(result)
    assert text_of(result) == "Successfully replaced 1 block(s) in f.py."
    assert (root / "f.py").read_text() == "a = 1\nb = 20\nc = 3\n"
    # pi's display diff, numbered (pi-lsp sent a unified diff), and its unified patch.
    assert result.details == {"diff": " 1 a = 1\n-2 b = 2\n+2 b = 20\n 3 c = 3",
                              "patch": "--- f.py\n+++ f.py\n@@ -1,3 +1,3 @@\n a = 1\n-b = 2\n"
                                       "+b = 20\n c = 3\n",
                              "firstChangedLine": 2}


async def test_edit_missing_text_is_an_error_and_leaves_the_file(root: Path) -> None:
    (root / "f.py").write_text("a = 1\n")
    result = await run(EDIT, {"path": "f.py", "oldText": "zzz", "newText": "y"}, root)
    assert result.is_error
    assert text_of(result) == ("Could not find the exact text in f.py. The old text must match "
                               "exactly including all whitespace and newlines.")
    assert (root / "f.py").read_text() == "a = 1\n"


async def test_edit_non_unique_text_is_an_error_with_the_count(root: Path) -> None:
    original = "x = 1\nx = 1\nx = 1\n"
    (root / "f.py").write_text(original)
    result = await run(EDIT, {"path": "f.py", "oldText": "x = 1", "newText": "x = 2"}, root)
    assert result.is_error
    assert text_of(result) == ("Found 3 occurrences of the text in f.py. The text must be unique. "
                               "Please provide more context to make it unique.")
    assert (root / "f.py").read_text() == original


async def test_edit_missing_file_is_an_error(root: Path) -> None:
    result = await run(EDIT, {"path": "nope.py", "oldText": "a", "newText": "b"}, root)
    assert result.is_error
    assert not (root / "nope.py").exists()


async def test_edit_keeps_the_files_line_ends_and_byte_order_mark(root: Path) -> None:
    (root / "f.txt").write_bytes("\ufeffone\r\ntwo\r\nthree\r\n".encode())
    args = {"path": "f.txt", "oldText": "one\ntwo", "newText": "ONE\nTWO\n2"}
    ctx = ToolContext(root)
    ctx.approved = propose_change("edit", args, ctx)  # approved as the user saw it
    result = await execute_tool(EDIT, "edit", args, ctx)
    assert not result.is_error, text_of(result)
    assert (root / "f.txt").read_bytes() == "\ufeffONE\r\nTWO\r\n2\r\nthree\r\n".encode()
    assert result.details["diff"].splitlines() == [
        "-1 one", "-2 two", "+1 ONE", "+2 TWO", "+3 2", " 3 three"]
    assert result.details["firstChangedLine"] == 1


async def test_edit_that_changes_nothing_is_refused_as_pi_refuses_it(root: Path) -> None:
    (root / "m.txt").write_bytes(b"a\r\nb\nc\n")  # mixed line ends: a splice would change them
    result = await run(EDIT, {"path": "m.txt", "oldText": "a\nb\nc", "newText": "a\nb\nc"}, root)
    assert result.is_error
    assert text_of(result).startswith("No changes made to m.txt. The replacement produced")
    assert (root / "m.txt").read_bytes() == b"a\r\nb\nc\n"


def replace(old: str, new: str) -> dict[str, str]:
    return {"oldText": old, "newText": new}


SUCCESS = "Successfully replaced 1 block(s) in f.py."
# What pi 1.6's edit tool answers and writes on each (the review's harness runs both).
PI16_EDITS = [
    # Matched after pi's fuzzy normalisation: the lines it touches are written normalized.
    ("def f():  \n    return 1\n", [replace("def f():\n    return 1", "def g():\n    return 2")],
     SUCCESS, "def g():\n    return 2\n"),
    ("say(\u201chi\u201d)\nkeep \u201cme\u201d\n", [replace('say("hi")', 'say("bye")')], SUCCESS,
     'say("bye")\nkeep \u201cme\u201d\n'),
    ("a \u2014 b\n", [replace("a - b", "a - c")], SUCCESS, "a - c\n"),
    ("a\u00a0b\n", [replace("a b", "c")], SUCCESS, "c\n"),
    ("\ufb01le\n", [replace("file", "data")], SUCCESS, "data\n"),
    ("x  \nx\n", [replace("x\n", "y\n")], "Found 2 occurrences of the text in f.py. The text "
     "must be unique. Please provide more context to make it unique.", None),
    ("a\nb\n", [replace("a", "A"), replace("b", "B")],
     "Successfully replaced 2 block(s) in f.py.", "A\nB\n"),
    ("abc\n", [replace("ab", "X"), replace("bc", "Y")], "edits[0] and edits[1] overlap in f.py. "
     "Merge them into one edit or target disjoint regions.", None),
    ("a\nb\n", [replace("a", "A"), replace("", "B")],
     "edits[1].oldText must not be empty in f.py.", None),
    ("a\nb\n", [], "Edit tool input is invalid. edits must contain at least one replacement.",
     None),
]


@pytest.mark.parametrize(("text", "edits", "expected", "written"), PI16_EDITS)
async def test_edit_answers_as_pi_answers(root: Path, text: str, edits: list[dict[str, str]],
                                          expected: str, written: str | None) -> None:
    """pi-lsp's edit took one exact oldText/newText; pi 1.6's takes `edits` (several disjoint
    replacements in one call), matches what differs only in trailing white space, quotes,
    dashes, special spaces or NFKC, counts duplicates in that normalized text, and words its
    answers its own way. The change approved is the one written."""
    (root / "f.py").write_text(text)
    args = {"path": "f.py", "edits": edits}
    ctx = ToolContext(root)
    if written is not None:
        ctx.approved = propose_change("edit", args, ctx)
        assert ctx.approved is not None and ctx.approved.new_text == written
    result = await execute_tool(EDIT, "edit", args, ctx)
    assert (text_of(result), result.is_error) == (expected, written is None)
    assert (root / "f.py").read_text() == (written or text)


@pytest.mark.parametrize(("args", "written", "diff"), [
    ({"edits": replace("a", "A")}, "A\nb\n", "-1 a\n+1 A\n 2 b"),  # one edit, not a list
    ({"edits": '[{"oldText": "b", "newText": "B"}]'}, "a\nB\n", " 1 a\n-2 b\n+2 B"),  # JSON text
    ({"oldText": "a", "newText": "A"}, "A\nb\n", "-1 a\n+1 A\n 2 b"),  # older sessions' form
])
async def test_edit_takes_the_arguments_pi_prepares(root: Path, args: dict[str, Any],
                                                    written: str, diff: str) -> None:
    """pi 1.6's prepareEditArguments: what models send instead of an `edits` list, and the
    top-level oldText/newText that pi-lsp's own older sessions hold."""
    (root / "f.py").write_text("a\nb\n")
    result = await run(EDIT, {"path": "f.py", **args}, root)
    assert text_of(result) == SUCCESS
    patch = "@@ -1,2 +1,2 @@\n-a\n+A\n b\n" if "-1" in diff else "@@ -1,2 +1,2 @@\n a\n-b\n+B\n"
    assert result.details == {"diff": diff, "patch": f"--- f.py\n+++ f.py\n{patch}",
                              "firstChangedLine": 1 if "-1" in diff else 2}
    assert (root / "f.py").read_text() == written


def patch_cases() -> list[dict[str, Any]]:
    """Edits of files of a few kinds of lines (so that jsdiff's pairing of equal lines shows),
    LF or CRLF, with or without a last line break: 1 to 3 disjoint edits of a few characters to
    many lines each; and the edges of a patch (all lines removed, a first line added)."""
    rnd = random.Random(16)
    kinds = ["}", "{", "", "  return x;", "foo();", "bar();", "// c", "end"]
    cases: list[dict[str, Any]] = [
        {"text": "a\nb\n", "edits": [replace("b", "c")]},
        {"text": "a\nb\n", "edits": [replace("a\nb\n", "")]},
        {"text": "only", "edits": [replace("only", "")]},
        {"text": "a\nb", "edits": [replace("a", "new\na")]},
        {"text": "a\nb", "edits": [replace("b", "b\n")]},
    ]
    while len(cases) < 120:
        lines = [rnd.choice(kinds) + (f" {rnd.randint(0, 3)}" if rnd.random() < 0.3 else "")
                 for _ in range(rnd.choice([3, 12, 40, 90, 150]))]
        break_ = rnd.choice(["\n", "\n", "\r\n"])
        text = break_.join(lines) + (break_ if rnd.random() < 0.8 else "")
        flat = text.replace("\r\n", "\n")  # what pi matches the edits in
        spans: list[tuple[int, int]] = []
        for _ in range(rnd.choice([1, 1, 2, 3])):
            start = rnd.randrange(len(flat))
            end = min(len(flat), start + rnd.randint(1, rnd.choice([8, 60, 400])))
            old = flat[start:end]
            if flat.count(old) == 1 and old.strip() and \
                    all(end <= a or start >= b for a, b in spans):
                spans.append((start, end))
        if not spans:
            continue
        edits = [replace(flat[a:b], "\n".join(rnd.choice(kinds) for _ in range(rnd.randint(0, 6))))
                 for a, b in spans]
        cases.append({"text": text, "edits": edits})
    return cases


STORED_PATCHES = Path(__file__).with_name("fixtures") / "pi16-edit-patches.json"


@pytest.fixture(scope="module")
def pi16_patches(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """What pi 1.6's edit tool answers on each of patch_cases(): stored (for machines without
    pi), and checked against pi itself where it is installed."""
    stored: list[dict[str, Any]] = json.loads(STORED_PATCHES.read_text("utf-8"))
    node = pi16_node()
    if node is not None:
        cases = tmp_path_factory.mktemp("patches") / "cases.json"
        cases.write_text(json.dumps(patch_cases()))
        run = subprocess.run([node, str(Path(__file__).with_name("pi16_patch.mjs")),
                              str(PI16 / "@earendil-works"), str(cases)],
                             capture_output=True, text=True, timeout=PROCESS_CEILING_S)
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout) == stored
    return stored


async def test_edit_details_carry_pis_unified_patch(root: Path,
                                                   pi16_patches: list[dict[str, Any]]) -> None:
    """A successful edit's details lacked `patch`, the unified patch pi 1.6 keeps beside the
    display diff (jsdiff's structuredPatch around each replacement, formatPatch's text): a
    session's tool result differed from pi's. Each case's details are pi's, key for key."""
    cases = patch_cases()
    assert len(cases) == len(pi16_patches)
    for case, expected in zip(cases, pi16_patches, strict=True):
        (root / "f.txt").write_bytes(case["text"].encode())
        result = await run(EDIT, {"path": "f.txt", "edits": case["edits"]}, root)
        got = {"error": text_of(result)} if result.is_error else result.details
        assert list(got.items()) == list(expected.items()), case


async def test_edit_of_a_large_block_shows_it_removed_then_added(root: Path) -> None:
    """The edit's diff, Myers' as in pi, takes time in the square of the lines changed, on the
    event loop: 4000 lines rewritten held every request and an abort for 16 s. Past a bound,
    the changed lines are one block removed, then added (here Myers pairs the kept lines)."""
    old = [f"line {i}\n" for i in range(2001)]
    new = [f"changed {i}\n" if i % 2 == 0 else line for i, line in enumerate(old)]
    (root / "f.txt").write_text("head\n" + "".join(old) + "tail\n")
    result = await run(EDIT, {"path": "f.txt", "edits": [replace("".join(old), "".join(new))]},
                       root)
    shown = result.details["diff"].splitlines()
    assert shown[:3] == ["    1 head", "-   2 line 0", "-   3 line 1"]
    assert [line[0] for line in shown] == [" "] + ["-"] * 2001 + ["+"] * 2001 + [" "]
    assert shown[2002:2004] == ["+   2 changed 0", "+   3 line 1"]
    assert result.details["firstChangedLine"] == 2


async def test_edits_past_the_diff_bound_keep_the_lines_between_them(root: Path) -> None:
    """Past the bound, a window's lines between its common start and end were one block:
    ten 30-line edits 80 lines apart showed the 500 untouched lines between them removed and
    added again (1500 lines marked; pi 1.6 marks the 600 replaced)."""
    lines = [f"value_{i} = compute({i})\n" for i in range(850)]
    blocks = ["".join(lines[25 + 80 * k:55 + 80 * k]) for k in range(10)]
    edits = [replace(block, block.replace("compute", "evaluate")) for block in blocks]
    (root / "f.py").write_text("".join(lines))
    result = await run(EDIT, {"path": "f.py", "edits": edits}, root)
    changed = [line for line in result.details["diff"].splitlines() if line[0] in "+-"]
    assert len(changed) == 600
    assert all("evaluate" in line for line in changed if line[0] == "+")


async def test_an_exact_edit_of_an_ascii_file_does_not_normalize_it(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Counting the matches normalized the whole file (NFKC and all) for every edit, planned
    twice to run it: a one-line edit of a 100 MB file took 1.8 s to propose and 3.7 s to
    run. Of ASCII text pi's normalisation only trims line ends, which a match within a line
    never reaches: the file's own matches are counted."""
    text = "".join(f"x{i} = 1  \n" for i in range(100)) + "x5 = 1\n"
    (root / "f.py").write_text(text)
    normalized: list[str] = []
    normalize = editmatch.normalize_for_fuzzy_match

    def noted(text: str) -> str:
        normalized.append(text)
        return normalize(text)

    monkeypatch.setattr(editmatch, "normalize_for_fuzzy_match", noted)
    result = await run(EDIT, {"path": "f.py", "edits": [replace("x7 = 1", "x7 = 2")]}, root)
    assert text_of(result) == SUCCESS
    assert normalized == ["x7 = 1"]
    assert (root / "f.py").read_text() == text.replace("x7 = 1", "x7 = 2")
    # pi's count is still the normalized text's: the last line is the fifth's once trimmed.
    result = await run(EDIT, {"path": "f.py", "edits": [replace("x5 = 1\n", "x5 = 2\n")]}, root)
    assert text_of(result) == ("Found 2 occurrences of the text in f.py. The text must be "
                               "unique. Please provide more context to make it unique.")


class HeldWrites(tools.DiskFiles):
    """Writes that end only once released, as an editor's applyEdit without an answer."""

    def __init__(self) -> None:
        self.started, self.released = asyncio.Event(), asyncio.Event()

    async def write_text(self, path: Path, text: str, old: str | None,
                         seen: tuple[int, ...] | None = None) -> None:
        self.started.set()
        await self.released.wait()


async def test_an_abort_while_a_write_never_ends_says_the_file_may_have_changed(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An abort waits for a write under way, so as not to answer "aborted" for a changed file;
    for an editor that never answers, only a while, and the call says what is known."""
    (root / "f.txt").write_text("a\n")
    monkeypatch.setattr(tools, "ABORTED_WRITE_WAIT_S", 0)
    files, told = HeldWrites(), []
    ctx = ToolContext(root, files=files, on_abort=told.append)
    task = asyncio.create_task(tools.edit_file({"path": "f.txt", "edits": [replace("a", "b")]},
                                               ctx))
    await asyncio.wait_for(files.started.wait(), CEILING_S)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [(text_of(result), result.is_error) for result in told] == [
        (f"Aborted while {os.path.realpath(root / 'f.txt')} was being written: it may have "
         "changed. Read it before changing it again.", True)]
    files.released.set()


@pytest.mark.parametrize(("files", "path", "expected"), [
    ({}, "nope", "Could not edit file: nope. Error code: ENOENT."),
    ({"d/x": ""}, "d", "EISDIR: illegal operation on a directory, read"),
])
async def test_edit_fails_as_pi_fails(root: Path, files: dict[str, str], path: str,
                                      expected: str) -> None:
    write_files(root, files)
    result = await run(EDIT, {"path": path, "edits": [replace("a", "b")]}, root)
    assert (text_of(result), result.is_error) == (expected, True)


async def test_edit_of_a_file_it_may_not_write_is_refused_first(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pi checks read and write access before reading (root may do anything, so the check is
    played here): a read-only file is refused as pi refuses it, not failed at the write."""
    (root / "f.py").write_text("a\n")
    monkeypatch.setattr(os, "access", lambda path, mode: not mode & os.W_OK)
    result = await run(EDIT, {"path": "f.py", "edits": [replace("a", "b")]}, root)
    assert (text_of(result), result.is_error) == \
        ("Could not edit file: f.py. Error code: EACCES.", True)
    assert (root / "f.py").read_text() == "a\n"


async def test_edit_of_a_file_that_is_not_utf8_replaces_its_bad_bytes_as_pi(root: Path) -> None:
    """pi reads the file as UTF-8 with U+FFFD for bad bytes and writes that back; pi-lsp failed
    with "'utf-8' codec can't decode byte 0xff"."""
    (root / "f.txt").write_bytes(b"ok \xff here\n")
    result = await run(EDIT, {"path": "f.txt", "edits": [replace("ok", "OK")]}, root)
    assert not result.is_error, text_of(result)
    assert (root / "f.txt").read_bytes() == "OK \ufffd here\n".encode()


# pi 1.6's applyReplacementsToOriginal on the same edits (dist/core/tools/edit-diff.js).
PI16_SPLICES = [
    ("one\r\ntwo\r\nthree\r\n", "two", "TWO", "one\r\nTWO\r\nthree\r\n"),
    ("a\nb\r\nc\n", "b", "X\nY", "a\nX\r\nY\r\nc\n"),
    ("a\rb\rc", "b", "X\nY", "a\rX\rY\rc"),
    ("a\r\nb", "b", "X\nY", "a\r\nX\r\nY"),
    ("a\rb\nc", "b\nc", "Z", "a\rZ"),
    ("x\r\n", "x\n", "\ny", "\r\ny"),
    ("k\r\nend", "\nend", "\nq", "k\r\nq"),
    ("a\rb\n", "b", "\nZ", "a\r\n\nZ\n"),
]


@pytest.mark.parametrize(("original", "old", "new", "expected"), PI16_SPLICES)
def test_splice_writes_what_pi_writes(original: str, old: str, new: str, expected: str) -> None:
    start = to_lf(original).index(old)
    assert splice(original, start, len(old), new) == expected


@settings(max_examples=300, deadline=None)
@given(st.text("ab\r\n", max_size=12), st.data())
def test_splice_changes_only_the_span(original: str, data: st.DataObject) -> None:
    text = to_lf(original)
    start = data.draw(st.integers(0, len(text)))
    length = data.draw(st.integers(0, len(text) - start))
    new = data.draw(st.text("xy\n", max_size=6))
    spliced = splice(original, start, length, new)
    assert to_lf(spliced) == text[:start] + new + text[start + length:]
    if "\r" not in original:
        assert spliced == text[:start] + new + text[start + length:]


def pis_apply_replacements(content: str, replacements: list[Replacement],
                           offset: int = 0) -> str:
    """pi 1.6's applyReplacements (dist/core/tools/edit-diff.js) as it is: the last made first,
    each on the whole text."""
    for replacement in reversed(replacements):
        start = replacement.start - offset
        content = content[:start] + replacement.text + content[start + replacement.length:]
    return content


@settings(max_examples=500, deadline=None)
@given(st.text("ab\n\u00e9", max_size=16), st.integers(0, 4), st.data())
def test_replacements_make_what_pis_make(content: str, offset: int,
                                         data: st.DataObject) -> None:
    """Sorted and disjoint as the edit tool makes them: empty ones (an oldText fuzzy matching
    nothing), several at one place, adjacent ones, at the text's ends."""
    cuts = sorted(data.draw(st.lists(st.integers(0, len(content)), max_size=12)))
    replacements = [Replacement(start + offset, end - start, data.draw(st.text("xy\n",
                                                                               max_size=3)))
                    for start, end in zip(cuts[::2], cuts[1::2], strict=False)]
    assert editmatch.apply_replacements(content, replacements, offset) == \
        pis_apply_replacements(content, replacements, offset)


class CopyCounted(str):
    """A text that counts the characters its slices and sums copy."""

    copied = 0

    def __getitem__(self, key: Any) -> CopyCounted:
        return self.counted(super().__getitem__(key))

    def __add__(self, other: str) -> CopyCounted:
        return self.counted(super().__add__(other))

    @classmethod
    def counted(cls, text: str) -> CopyCounted:
        cls.copied += len(text)
        return cls(text)


def test_many_replacements_copy_the_text_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each replacement copied the whole text (100,000 on 1 MB: 9.1 s): its pieces are joined
    once."""
    content = CopyCounted("".join(f"line {i}\n" for i in range(10_000)))
    replacements = [Replacement(start, 4, "LINE") for start in
                    range(0, len(content), len(content) // 1000)]
    monkeypatch.setattr(CopyCounted, "copied", 0)
    made = editmatch.apply_replacements(content, replacements)
    assert made == pis_apply_replacements(str(content), replacements)
    assert CopyCounted.copied <= len(content)


# -- bash ----------------------------------------------------------------------------------


async def test_bash_runs_in_the_root(root: Path) -> None:
    result = await run(BASH, {"command": "pwd"}, root)
    assert not result.is_error
    assert Path(text_of(result).strip()).resolve() == root.resolve()


async def test_bash_combines_stdout_and_stderr(root: Path) -> None:
    result = await run(BASH, {"command": "echo to-out; echo to-err >&2; echo again"}, root)
    assert not result.is_error
    assert text_of(result).splitlines() == ["to-out", "to-err", "again"]


async def test_bash_non_zero_exit_is_an_error_with_the_code(root: Path) -> None:
    result = await run(BASH, {"command": "echo partial; exit 3"}, root)
    assert result.is_error
    text = text_of(result)
    assert "partial" in text
    assert "exited with code 3" in text


async def test_bash_runs_bash(root: Path) -> None:
    """Commands ran in /bin/sh (dash on Debian), where `[[`, `{1..3}`, arrays, `$'..'` and
    `source` fail; pi 1.6 runs /bin/bash."""
    (root / "lib.sh").write_text("word=sourced\n")
    command = "source lib.sh; a=(x y); [[ $word == sourced ]] && echo {1..3} ${a[1]} $'a\\tb' $0"
    result = await run(BASH, {"command": command}, root)
    assert not result.is_error
    assert text_of(result).strip() == f"1 2 3 y a\tb {shell_path()}"
    assert shell_path() == "/bin/bash" or not os.path.exists("/bin/bash")


def test_a_bash_the_workspace_holds_is_never_the_shell(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Without /bin/bash (NixOS) bash is looked up on PATH, where `.` or an empty entry would
    find a repository's own `./bash` (or `./sh`) in the folder the command runs in."""
    real = shutil.which("bash")
    assert real is not None
    for name in ("bash", "sh"):
        (tmp_path / name).write_text("#!/bin/sh\ntouch ran\n")
        (tmp_path / name).chmod(0o755)
    exists = os.path.exists
    monkeypatch.setattr(os.path, "exists", lambda path: path != "/bin/bash" and exists(path))
    monkeypatch.chdir(tmp_path)
    for path in (f".{os.pathsep}{os.path.dirname(real)}", f"{os.pathsep}{os.path.dirname(real)}"):
        monkeypatch.setenv("PATH", path)
        assert shutil.which("bash") != real  # what a plain lookup finds
        assert shell_path() == real
    monkeypatch.setenv("PATH", ".")
    assert shell_path() == "/bin/sh"


async def test_bash_timeout(root: Path) -> None:
    result = await run(BASH, {"command": "sleep 300", "timeout": 1}, root)
    assert result.is_error
    assert "timed out" in text_of(result)


@pytest.mark.parametrize(("command", "timeout", "text"), [
    ("echo before; sleep 300", 1, "before\n\n\nCommand timed out after 1 seconds"),
    ("sleep 300", "0.5", "Command timed out after 0.5 seconds"),
    ("sleep 300", 0.00001, "Command timed out after 0.00001 seconds"),
])
async def test_bash_timeout_in_pi_s_words(root: Path, command: str, timeout: object,
                                          text: str) -> None:
    """pi-lsp said "after 1 s", and "(no output)" before it when nothing was printed."""
    result = await run(BASH, {"command": command, "timeout": timeout}, root)
    assert result.is_error
    assert text_of(result) == text


async def test_bash_timeout_says_the_shell_had_exited(root: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """pi 1.6 says when the shell exited before the timeout and its jobs kept writing.
    (The quiet spell that ends such a command, 0.1 s, is made longer than the timeout: on a
    busy machine the writer went 0.1 s without a turn and the command ended as exited.)"""
    monkeypatch.setattr(shell, "EXIT_GRACE_S", 5.0)
    command = ("bash -c 'touch writing; while :; do echo y; done' & "
               "until [ -e writing ]; do :; done; exit 4")
    result = await run(BASH, {"command": command, "timeout": 2}, root)
    assert result.is_error
    assert re.search(r"\n\nCommand timed out after 2 seconds\. The shell exited with code 4 "
                     r"after \d+(\.\d)? seconds, but background processes it started kept "
                     r"writing output until the timeout\.$", text_of(result))


async def test_an_unknown_tool_gets_pi_s_words(root: Path) -> None:
    result = await execute_tool(None, "frobnicate", {}, ToolContext(root))
    assert result.is_error and text_of(result) == "Tool frobnicate not found"


@pytest.mark.parametrize("timeout", [24 * 60 * 60 + 1, 10**20])
async def test_bash_timeout_over_a_day_is_refused_before_the_command_runs(
        root: Path, timeout: int) -> None:
    result = await run(BASH, {"command": "touch ran", "timeout": timeout}, root)
    assert result.is_error
    assert "at most 86400 seconds" in text_of(result)
    assert not (root / "ran").exists()


async def test_bash_timeout_past_a_double_is_no_number(root: Path) -> None:
    """10**400 s passed the check and failed in asyncio after the approved command started;
    then it was "at most 86400 seconds", where pi reads the JSON number as Infinity."""
    result = await run(BASH, {"command": "touch ran", "timeout": 10**400}, root)
    assert result.is_error and text_of(result) == (
        'Validation failed for tool "bash":\n  - timeout: expected number, got Infinity\n\n'
        'Received arguments:\n{\n  "command": "touch ran",\n  "timeout": null\n}')
    assert not (root / "ran").exists()


async def test_bash_has_no_default_timeout(root: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    """A command given no timeout was killed after 120 s; pi 1.6 sets none."""
    given: list[float | None] = []
    wait_for = asyncio.wait_for

    async def noted(awaitable: Any, timeout: float | None) -> Any:
        given.append(timeout)
        return await wait_for(awaitable, timeout)

    monkeypatch.setattr(asyncio, "wait_for", noted)
    result = await run(BASH, {"command": "echo done"}, root)
    assert text_of(result).strip() == "done"
    assert given == [None]


@pytest.mark.parametrize("timeout", ["2", " 2 ", 0.5, True, "1e1", "0x10", "12n", None])
async def test_bash_timeout_is_read_as_pi_reads_it(root: Path, timeout: object) -> None:
    """Only whole numbers were taken ("2" and 0.5 refused, 0 meant 120 s); pi 1.6 coerces the
    argument as its schema validation does."""
    result = await run(BASH, {"command": "echo ran", "timeout": timeout}, root)
    assert not result.is_error and text_of(result).strip() == "ran"


@pytest.mark.parametrize("timeout", [0, -1, "", "0", False])
async def test_bash_timeout_of_zero_or_less_is_refused(root: Path, timeout: object) -> None:
    result = await run(BASH, {"command": "touch ran", "timeout": timeout}, root)
    assert result.is_error
    assert text_of(result) == "Invalid timeout: must be a finite number of seconds"
    assert not (root / "ran").exists()


async def test_bash_timeout_may_be_a_fraction(root: Path) -> None:
    result = await run(BASH, {"command": "sleep 300", "timeout": "0.5"}, root)
    assert result.is_error and "timed out" in text_of(result)


@pytest.mark.parametrize(("args", "problem"), [
    ({"command": "true", "timeout": "soon"}, "timeout: expected number, got string"),
    ({"command": "true", "timeout": [3]}, "timeout: expected number, got array"),
    ({"command": "true", "timeout": "0x" + "f" * 300}, "timeout: expected number, got string"),
    ({"command": 5}, "command: expected string, got integer"),
    ({}, "command: missing"),
])
async def test_bash_arguments_of_the_wrong_type_get_pi_s_words(
        root: Path, args: dict[str, Any], problem: str) -> None:
    result = await run(BASH, args, root)
    assert result.is_error
    assert text_of(result) == f'Validation failed for tool "bash":\n  - {problem}\n\n' \
        f"Received arguments:\n{json.dumps(args, indent=2)}"


# pi 1.6's list of what does not fit in these bash calls, each misfit in its order; a command
# pi coerces (5, null) is refused by pi-lsp all the same (the README says so), beside the rest.
PI16_BASH_MISFITS = [
    ({"command": ["a"], "timeout": {}},
     ["command: expected string, got array", "timeout: expected number, got object"]),
    ({"timeout": {}, "command": ["a"]},
     ["command: expected string, got array", "timeout: expected number, got object"]),
    ({"timeout": {}}, ["command: missing", "timeout: expected number, got object"]),
    ({"command": {"a": 1}, "timeout": [1, 2]},
     ["command: expected string, got object", "timeout: expected number, got array"]),
    ({"command": ["a"], "timeout": -1}, ["command: expected string, got array"]),
    ({"command": 5, "timeout": {}},
     ["command: expected string, got integer", "timeout: expected number, got object"]),
    ({"command": None, "timeout": "x"},
     ["command: expected string, got null", "timeout: expected number, got string"]),
]


@pytest.mark.parametrize(("args", "problems"), PI16_BASH_MISFITS)
async def test_bash_lists_every_misfit_argument_as_pi_16_does(
        root: Path, args: dict[str, Any], problems: list[str]) -> None:
    """`{"command": ["a"], "timeout": {}}` was answered with the command's misfit alone, where
    pi 1.6 lists both (found by the differential fuzz re-run)."""
    result = await run(BASH, args, root)
    listed = "".join(f"  - {problem}\n" for problem in problems)
    assert result.is_error and text_of(result) == f'Validation failed for tool "bash":\n' \
        f"{listed}\nReceived arguments:\n{json.dumps(args, indent=2)}"


async def test_bash_in_a_folder_gone_gets_pi_s_words(root: Path) -> None:
    result = await run(BASH, {"command": "true"}, root / "gone")
    assert result.is_error
    assert text_of(result) == f"Working directory does not exist: {root / 'gone'}\n" \
        "Cannot execute bash commands."


async def test_bash_runs_without_the_api_keys(root: Path, monkeypatch: pytest.MonkeyPatch
                                              ) -> None:
    """An approved `npm test` runs the repository's code, which must not find the keys."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-hidden")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-hidden")
    monkeypatch.setenv("GATEWAY_TOKEN", "gateway-hidden")  # named by a models.json apiKey
    monkeypatch.setenv("PI_LSP_TEST_KEPT", "kept")
    result = await run(BASH, {"command": "env"}, root,
                       key_variables=KEY_VARIABLES | {"GATEWAY_TOKEN"})
    text = text_of(result)
    assert "PI_LSP_TEST_KEPT=kept" in text
    assert "hidden" not in text and "_API_KEY=" not in text and "GATEWAY_TOKEN" not in text


async def test_bash_huge_output_keeps_the_tail_and_saves_all(root: Path) -> None:
    result = await run(BASH, {"command": "seq 1 200000"}, root)
    full_path = Path(result.details["fullOutputPath"])
    try:
        assert not result.is_error
        text = text_of(result)
        expected = "".join(f"{n}\n" for n in range(1, 200001))
        assert len(text.encode()) < 60 * 1024
        assert text.split("\n\n[")[0].endswith("\n199999\n200000")
        lines = text.splitlines()
        assert lines[0] == "198001"  # the last 2000 lines, each whole
        assert lines[-1] == f"[Showing lines 198001-200000 of 200000. Full output: {full_path}]"
        assert full_path.read_text() == expected
    finally:
        full_path.unlink(missing_ok=True)


async def test_bash_returns_when_the_shell_exits_though_a_job_holds_the_output(root: Path
                                                                               ) -> None:
    """A command that started a background job (`npm run dev &`) waited for the job's end or
    the timeout; pi 1.6 returns once the shell has exited and the output has gone quiet, and
    the job runs on."""
    result = await run(BASH, {"command": "sleep 60 & echo $! > job; echo started"}, root)
    pid = int((root / "job").read_text())
    try:
        assert not result.is_error and text_of(result).strip() == "started"
        assert alive(pid)
    finally:
        os.kill(pid, signal.SIGKILL)


async def test_bash_setsid_in_the_foreground_returns_at_once(root: Path) -> None:
    """The shell did not lead its process group, so `setsid CMD` ran CMD in its place and the
    call waited for CMD; pi 1.6's shell leads its group, setsid forks and the call returns."""
    result = await run(BASH, {"command": "setsid sh -c 'echo $$ > job; exec sleep 60'"}, root)
    pid = await pid_in(root / "job")
    try:
        assert not result.is_error
        assert alive(pid)
    finally:
        os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a subreaper needs Linux")
async def test_bash_timeout_kills_what_the_command_left_running(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A timeout after the shell had exited killed nothing (the watcher had ended with the
    shell): jobs that kept the output going ran on, `setsid` or not (README, Safety). (The
    quiet spell that ends a command is made longer than the timeout, as in the test above.)"""
    monkeypatch.setattr(shell, "EXIT_GRACE_S", 5.0)
    command = ("setsid sh -c 'echo $$ > quiet; exec sleep 300' & sleep 300 & echo $! > job; "
               "bash -c 'echo $$ > writer; while :; do echo y; done' & "
               "until [ -s writer ] && [ -s quiet ]; do :; done")
    result = await run(BASH, {"command": command, "timeout": 1}, root)
    assert result.is_error and "timed out" in text_of(result)
    for name in ("quiet", "job", "writer"):
        await gone(int((root / name).read_text()), f"the {name} job the command left")


WATCHER_DIED = ("bash failed: the command's watcher was killed by SIGKILL before the command "
                "ended, so what became of the command is unknown; what was left of its process "
                "group has been killed")


async def test_a_watcher_the_command_kills_fails_the_call_and_the_command_dies(root: Path
                                                                              ) -> None:
    """A watcher killed while its command ran (`kill -9 $PPID`) ended the call 0.1 s later with
    `Command exited with code -9`, a code pi never gives, and the command ran on with nothing
    to stop it: no timeout, no abort."""
    command = "sleep 300 & echo $! > job; kill -9 $PPID; wait"
    result = await run(BASH, {"command": command, "timeout": 60}, root)
    await gone(int((root / "job").read_text()), "the job of the command left unwatched")
    assert result.is_error and text_of(result) == WATCHER_DIED


async def test_a_watcher_killed_from_outside_fails_the_call_and_the_command_dies(root: Path
                                                                                ) -> None:
    """As the OOM killer would: the command ran on and the call answered `code -9`."""
    command = "echo $PPID > watcher; sleep 300 & echo $! > job; wait"
    call = asyncio.ensure_future(run(BASH, {"command": command}, root))
    job = await pid_in(root / "job")
    os.kill(await pid_in(root / "watcher"), signal.SIGKILL)
    result = await asyncio.wait_for(call, CEILING_S)
    await gone(job, "the job of the command left unwatched")
    assert result.is_error and text_of(result) == WATCHER_DIED


async def test_a_watcher_killed_keeps_the_output_printed_before(root: Path) -> None:
    """The result was only the watcher's death: what the command had printed was dropped,
    where a timeout or an abort shows it with the reason."""
    result = await run(BASH, {"command": "echo a; kill -9 $PPID; sleep 300; echo b"}, root)
    assert result.is_error and text_of(result) == f"a\n\n\n{WATCHER_DIED}"
    # Output still in the pipe when the watcher's death is seen (up to a pipe's 64 KB) is read.
    result = await run(BASH, {"command": "seq 40000; kill -9 $PPID; sleep 300"}, root)
    assert result.is_error and text_of(result).split("\n\n")[0].endswith("\n39999\n40000")


async def test_bash_keeps_the_output_s_last_newline(root: Path) -> None:
    """The output's final newline was dropped; pi 1.6 shows the output as it is."""
    result = await run(BASH, {"command": "echo x; exit 3"}, root)
    assert text_of(result) == "x\n\n\nCommand exited with code 3"
    result = await run(BASH, {"command": "printf 'a\\r\\nb\\r\\n\\n'"}, root)
    assert text_of(result) == "a\r\nb\r\n\n"


# What pi 1.6's bash answers for these commands run on f.txt (a UTF-8 BOM, then "bom\nx\n"):
# its output goes through one TextDecoder, stdout and stderr alike, which drops a BOM at the
# start of the whole output only.
PI16_BOM_OUTPUTS = [
    ("cat f.txt", "bom\nx\n"),
    ("cat f.txt >&2", "bom\nx\n"),
    ("printf '\\xef\\xbb\\xbfhi'", "hi"),
    ("echo a; cat f.txt", "a\n\ufeffbom\nx\n"),
    ("cat f.txt f.txt", "bom\nx\n\ufeffbom\nx\n"),
    ("cat f.txt; exit 1", "bom\nx\n\n\nCommand exited with code 1"),
]


@pytest.mark.parametrize(("command", "expected"), PI16_BOM_OUTPUTS)
async def test_bash_output_starting_with_a_bom_reads_as_pi_16_gives_it(
        root: Path, command: str, expected: str) -> None:
    """`cat f.txt` on a file with a BOM (Windows tools, .csv, .cs) reached the model as
    "\\ufeffbom…", where pi 1.6 drops the BOM that starts the output."""
    (root / "f.txt").write_bytes(b"\xef\xbb\xbfbom\nx\n")
    assert text_of(await run(BASH, {"command": command}, root)) == expected


# Chunks as they may come from the pipe, and what Node's TextDecoder makes of them in turn
# (decode(chunk, {stream: true}) each, then decode()).
NODE_DECODED_CHUNKS = [
    ([b"\xef", b"\xbb\xbfh"], "h"),
    ([b"", b"\xef\xbb\xbfh"], "h"),
    ([b"a\n", b"\xef\xbb\xbfh"], "a\n\ufeffh"),
    ([b"\xef\xbb", b"x"], "\ufffdx"),
    ([b"\xef\xbb"], "\ufffd"),
    ([b"\xef\xbb\xbf", b"\xef\xbb\xbfa"], "\ufeffa"),
    ([b"\xff\xef\xbb\xbf"], "\ufffd\ufeff"),
]


@pytest.mark.parametrize(("chunks", "expected"), NODE_DECODED_CHUNKS)
def test_a_bom_is_dropped_only_at_the_start_of_the_output_as_node_decodes(
        chunks: list[bytes], expected: str) -> None:
    output = OutputTail()
    for chunk in chunks:
        output.write(chunk)
    output.close()
    assert output.buffer == expected
    assert output.total_bytes == len(expected.encode())  # pi counts the decoded text


async def test_bash_output_cut_by_an_unfinished_last_line_is_saved(root: Path) -> None:
    """2000 lines and an unfinished one were cut to 2000 but named "Full output: None": the
    file started only past 2000 newlines, while pi counts the unfinished line too."""
    result = await run(BASH, {"command": "seq 1 2000; printf last"}, root)
    full = Path(result.details["fullOutputPath"])
    try:
        assert text_of(result).startswith("2\n3\n") and text_of(result).endswith(
            f"\n2000\nlast\n\n[Showing lines 2-2001 of 2001. Full output: {full}]")
        assert full.read_text() == "".join(f"{n}\n" for n in range(1, 2001)) + "last"
    finally:
        full.unlink(missing_ok=True)


# pi 1.6's details.truncation for these commands (its OutputAccumulator.snapshot, which spreads
# truncateTail's result: its keys in that order, `content` the text shown), from running its bash.
PI16_TRUNCATIONS = [
    ("seq 1 2001", {
        "content": "\n".join(str(n) for n in range(2, 2002)), "truncated": True,
        "truncatedBy": "lines", "totalLines": 2001, "totalBytes": 8898, "outputLines": 2000,
        "outputBytes": 8895, "lastLinePartial": False, "firstLineExceedsLimit": False,
        "maxLines": 2000, "maxBytes": 51200}),
    ("head -c 60000 /dev/zero | tr '\\0' a; echo; printf abc", {
        "content": "abc", "truncated": True, "truncatedBy": "bytes", "totalLines": 2,
        "totalBytes": 60004, "outputLines": 1, "outputBytes": 3, "lastLinePartial": False,
        "firstLineExceedsLimit": False, "maxLines": 2000, "maxBytes": 51200}),
    ("head -c 60000 /dev/zero | tr '\\0' a", {
        "content": "a" * 51200, "truncated": True, "truncatedBy": "bytes", "totalLines": 1,
        "totalBytes": 60000, "outputLines": 1, "outputBytes": 51200, "lastLinePartial": True,
        "firstLineExceedsLimit": False, "maxLines": 2000, "maxBytes": 51200}),
]


@pytest.mark.parametrize(("command", "expected"), PI16_TRUNCATIONS)
async def test_bash_truncation_details_are_pis_key_for_key(root: Path, command: str,
                                                           expected: dict[str, Any]) -> None:
    """A cut output's details.truncation lacked `content` and `firstLineExceedsLimit`, which
    pi's snapshot spreads from truncateTail: a session's tool result differed from pi's."""
    result = await run(BASH, {"command": command}, root)
    try:
        truncation = result.details["truncation"]
        assert list(truncation.items()) == list(expected.items())  # in pi's order
        assert list(result.details) == ["truncation", "fullOutputPath"]
    finally:
        Path(result.details["fullOutputPath"]).unlink(missing_ok=True)


async def test_bash_output_is_cut_at_50kb_of_the_text_the_model_gets(root: Path) -> None:
    """Bytes that are not UTF-8 were counted raw, then each sent as U+FFFD (3 bytes): 51,000 of
    them reached the model as 153,000 bytes, no notice, no file. pi counts the decoded text."""
    result = await run(BASH, {"command": "head -c 51000 /dev/zero | tr '\\0' '\\377'"}, root)
    full = Path(result.details["fullOutputPath"])
    try:
        text, notice = text_of(result).split("\n\n")
        assert text == "\ufffd" * (50 * 1024 // 3)
        assert notice == f"[Showing last 50.0KB of line 1 (line is 149.4KB). Full output: {full}]"
        assert full.read_bytes() == b"\xff" * 51000
    finally:
        full.unlink(missing_ok=True)


async def test_cancelling_bash_kills_the_whole_process_group(root: Path) -> None:
    task = asyncio.ensure_future(
        run(BASH, {"command": "sleep 30 & echo $! > child; wait"}, root))
    pid = await pid_in(root / "child")
    assert alive(pid)
    task.cancel()
    # The child sleeps 30 s: a cancel that waited for it would reach the ceiling.
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, CEILING_S)
    await gone(pid, "the cancelled command's child")


async def test_a_command_cut_while_it_floods_its_output_ends(root: Path) -> None:
    # Nobody reads the output once the call is cut; a full pipe used to keep the kill waiting
    # forever for its end (19 hangs in 20 before the output pipe was our own).
    for _ in range(5):
        await cut_while_flooding(root)


async def cut_while_flooding(root: Path) -> None:
    updates: list[str] = []
    task = asyncio.ensure_future(run(BASH, {"command": "yes"}, root, on_update=updates.append))
    await until(lambda: updates, "the command's first output")
    task.cancel()
    await asyncio.wait([task], timeout=CEILING_S)
    assert task.cancelled(), "the cut command never ended"


# -- bad arguments -------------------------------------------------------------------------


@pytest.mark.parametrize(("tool", "args"), [
    (READ, {"path": 5}),
    (READ, {}),
    (READ, {"path": "a.txt", "offset": "x"}),
    (READ, {"path": "a.txt", "limit": [1]}),  # -1 is no error: pi reads all lines but one
    (WRITE, {"path": [5], "content": "x"}),  # pi writes a path 5 to "5"
    (WRITE, {"path": "b.txt", "content": {"n": 5}}),  # and content 5 as "5"
    (EDIT, {"path": 5, "oldText": "a", "newText": "b"}),
    (EDIT, {"path": "a.txt", "oldText": None, "newText": "b"}),
    (BASH, {"command": 5}),
    (BASH, {"command": "true", "timeout": "soon"}),
])
async def test_bad_argument_types_are_error_results(root: Path, tool: Tool,
                                                    args: dict[str, Any]) -> None:
    (root / "a.txt").write_text("a\n")
    result = await run(tool, args, root)
    assert result.is_error
    assert text_of(result)
    assert (root / "a.txt").read_text() == "a\n"
    assert not (root / "b.txt").exists()


@pytest.mark.parametrize(("tool", "args", "expected", "written"), [
    (READ, {"path": "a.txt", "offset": "2"}, "b\nc\n", None),
    (READ, {"path": "a.txt", "limit": " 2 ", "offset": None},
     "a\nb\n\n[2 more lines in file. Use offset=3 to continue.]", None),
    (READ, {"path": "a.txt", "offset": True, "limit": "0x1"},
     "a\n\n[3 more lines in file. Use offset=2 to continue.]", None),
    (READ, {"path": 5}, "ENOENT: no such file or directory, access '{root}/5'", None),
    (READ, {}, 'Validation failed for tool "read":\n  - path: missing\n\nReceived arguments:\n{}',
     None),
    (READ, {"path": "a.txt", "offset": "x", "limit": [1]},
     'Validation failed for tool "read":\n  - offset: expected number, got string\n'
     '  - limit: expected number, got array\n\nReceived arguments:\n{\n  "path": "a.txt",\n'
     '  "offset": "x",\n  "limit": [\n    1\n  ]\n}', None),
    (WRITE, {"path": "b.txt", "content": 5}, None, "5"),
    (WRITE, {"path": "b.txt", "content": 1.50}, None, "1.5"),
    (WRITE, {"path": "b.txt", "content": None}, None, "null"),
    (WRITE, {}, 'Validation failed for tool "write":\n  - path: missing\n  - content: missing\n\n'
     "Received arguments:\n{}", None),
    (WRITE, {"path": "b.txt", "content": {"x": "\ud800"}},
     'Validation failed for tool "write":\n  - content: expected string, got object\n\n'
     'Received arguments:\n{\n  "path": "b.txt",\n  "content": {\n    "x": "\\ud800"\n  }\n}',
     None),
])
async def test_arguments_are_read_as_pi_reads_them(root: Path, tool: Tool, args: dict[str, Any],
                                                   expected: str | None,
                                                   written: str | None) -> None:
    """pi 1.6 coerces a call's arguments to the tool's schema before it runs ("2" for a number
    is 2, 5 for a string is "5", a null optional is left out) and words a misfit its own way;
    pi-lsp refused "2" and 5 and answered every misfit with its own words."""
    (root / "a.txt").write_text("a\nb\nc\n")
    result = await run(tool, args, root)
    if expected is not None:
        assert text_of(result) == expected.replace("{root}", str(root))
    if written is not None:
        assert not result.is_error, text_of(result)
        assert (root / "b.txt").read_text() == written


# JavaScript's Number() of each text, as node 22 answers it (None: NaN).
JS_NUMBERS = [
    ("Infinity", math.inf), ("-Infinity", -math.inf), ("1e999", math.inf), ("-0x10", None),
    (" 12 ", 12), ("", 0), ("0b101", 5), ("0o7", 7), ("0X1F", 31), ("1_000", None),
    ("NaN", None), ("infinity", None), ("\u00a0 3 \ufeff", 3), ("\u180e1", None), (".5", 0.5),
    ("1.", 1), (".", None), ("1e", None), ("0x", None), ("00012", 12), ("0x1p3", None),
    ("\u0663", None), ("12n", None), ("0x" + "f" * 300, math.inf),
]


@pytest.mark.parametrize(("text", "number"), JS_NUMBERS)
def test_text_is_read_as_javascript_s_number_reads_it(text: str, number: float | None) -> None:
    """A hexadecimal text of more than 256 digits raised OverflowError (pi reads Infinity)."""
    read = js_to_number(text)
    assert read == number if number is not None else math.isnan(read)


@pytest.mark.parametrize(("offset", "problem", "shown"), [
    ("0x" + "f" * 300, "string", json.dumps("0x" + "f" * 300)),
    ("9007199254740993n", "string", '"9007199254740993n"'),  # past the safe integers
    (10**400, "Infinity", "null"),  # a JSON number JavaScript reads as Infinity
])
async def test_a_number_past_javascript_s_gets_pi_s_validation_error(
        root: Path, offset: object, problem: str, shown: str) -> None:
    """A 300-digit hexadecimal offset raised OverflowError out of the coercion (a traceback
    from the approval, `read failed: OverflowError` to the model), as did a 400-digit one out
    of the check; "9007199254740993n" was taken. pi reads no number in any of them."""
    (root / "a.txt").write_text("a\n")
    args = {"path": "a.txt", "offset": offset}
    expected = (f'Validation failed for tool "read":\n  - offset: expected number, got {problem}'
                f'\n\nReceived arguments:\n{{\n  "path": "a.txt",\n  "offset": {shown}\n}}')
    ctx = ToolContext(root)
    assert answer_text(await ask_approval(ToolCall(id="1", name="read", arguments=args), ctx,
                                          allow_all)) == expected
    assert text_of(await execute_tool(READ, "read", args, ctx)) == expected


@pytest.mark.parametrize("levels", [EDITS_NESTING + 1, 3000])
async def test_edits_text_nested_too_deep_is_refused(root: Path, levels: int) -> None:
    """`edits` as a JSON text 3000 levels deep raised RecursionError out of its decoding
    (`edit failed: RecursionError` to the model, a traceback from the approval). pi answers
    with the whole decoded value (18 MB for 3000 levels); pi-lsp refuses arguments nested past
    its limit, as it refuses them sent as JSON."""
    (root / "a.txt").write_text("a\n")
    args = {"path": "a.txt", "edits": "[" * levels + "]" * levels}
    expected = (f'Validation failed for tool "edit":\n  - edits: nested more than '
                f'{EDITS_NESTING} levels deep\n\nReceived arguments:\n{{\n  "path": "a.txt",\n'
                f'  "edits": "{args["edits"]}"\n}}')
    ctx = ToolContext(root)
    assert answer_text(await ask_approval(ToolCall(id="1", name="edit", arguments=args), ctx,
                                          allow_all)) == expected
    assert text_of(await execute_tool(EDIT, "edit", args, ctx)) == expected
    assert (root / "a.txt").read_text() == "a\n"


@pytest.mark.parametrize(("edits", "problem"), [
    ("[" * EDITS_NESTING + "]" * EDITS_NESTING, "edits.0: expected object, got array"),
    ("[NaN]", "edits.0: expected object, got string"),  # no JSON: the text as one edit
    ("[" + "1" * 5000 + "]", "edits.0: expected object, got Infinity"),
])
async def test_edits_text_is_read_as_json_parse_reads_it(root: Path, edits: str,
                                                         problem: str) -> None:
    """Python's json took NaN (pi's JSON.parse refuses it) and refused an integer of over 4300
    digits (Infinity to JavaScript)."""
    (root / "a.txt").write_text("a\n")
    result = await run(EDIT, {"path": "a.txt", "edits": edits}, root)
    assert text_of(result).startswith(f'Validation failed for tool "edit":\n  - {problem}\n\n')


@pytest.mark.parametrize(("tool", "args"), [
    (WRITE, {"path": "names.txt", "content": "version = 2\n"}),
    (EDIT, {"path": "names.txt", "oldText": "version = 1", "newText": "version = 2"}),
])
async def test_a_file_not_utf8_is_read_again_only_for_a_user_to_ask(
        root: Path, monkeypatch: pytest.MonkeyPatch, tool: Tool, args: dict[str, Any]) -> None:
    """Working out a change to a file that is not UTF-8 read it all again to count its bad
    bytes (4.2 s for 100 MB, on the event loop), though only an edit a user is asked about
    shows the count: a write, or any call approved automatically, never needs it."""
    (root / "names.txt").write_bytes("José Müller\nversion = 1\n".encode("latin-1"))
    reads: list[str] = []
    disk_text = tools.disk_text

    def counted(path: Path, errors: str = "strict") -> str | None:
        reads.append(errors)
        return disk_text(path, errors)

    monkeypatch.setattr(tools, "disk_text", counted)
    ctx = ToolContext(root)
    assert await ask_approval(ToolCall(id="1", name=tool.name, arguments=args), ctx,
                              allow_all) is None
    assert not (await execute_tool(tool, tool.name, args, ctx)).is_error
    assert "surrogateescape" not in reads


# Values past what Python's float, int() and json take as they are.
EXTREMES = [2**53 + 1, 10**400, -(10**4000), "1" * 5000 + "n", "[" * 3000 + "]" * 3000,
            '[{"oldText": "a", "newText": "b", "x": ' + "[" * 3000 + "]" * 3000 + "}]"]
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.floats() | st.text(max_size=8) | st.integers()
    | st.integers(0, 3000).map(lambda levels: "[" * levels + "]" * levels),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["oldText", "newText", "x"]), inner, max_size=3),
    max_leaves=8)


@settings(max_examples=500, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from([READ, WRITE, EDIT]), st.dictionaries(
    st.sampled_from(["path", "offset", "limit", "content", "edits", "oldText", "newText"]),
    st.sampled_from(["a.txt", "b.txt"]) | st.sampled_from(EXTREMES)
    | st.sampled_from([text for text, _number in JS_NUMBERS]) | JSON_VALUES, max_size=4))
def test_no_arguments_make_a_tool_fail_with_a_python_exception(
        root: Path, caplog: pytest.LogCaptureFixture, tool: Tool, args: dict[str, Any]) -> None:
    """Arguments of any JSON value, huge numbers and deep texts included, get an answer the
    model can read: the approval raised (a traceback in `pi-lsp run`) and the tool answered
    `read failed: OverflowError: …` for some."""
    (root / "a.txt").write_text("a\n")
    caplog.clear()

    async def call() -> None:
        ctx = ToolContext(root)
        if await ask_approval(ToolCall(id="1", name=tool.name, arguments=args), ctx,
                              allow_all) is None:
            await execute_tool(tool, tool.name, args, ctx)

    with caplog.at_level(logging.ERROR, "pi_lsp.agent.tools"):
        asyncio.run(call())
    assert not caplog.records  # execute_tool logs a Python exception it names to the model


@pytest.mark.parametrize(("tool", "args"), [
    (READ, {"path": "loop"}),
    (WRITE, {"path": "loop", "content": "x"}),
    (EDIT, {"path": "loop", "oldText": "a", "newText": "b"}),
])
async def test_a_committed_symlink_loop_is_an_error_result(root: Path, tool: Tool,
                                                          args: dict[str, Any]) -> None:
    """Path.resolve raises RuntimeError on a loop (Python 3.11): the call had no result. Now
    the path rules follow links as realpath does, and the loop is the call's error."""
    (root / "loop").symlink_to("loop")
    ctx = ToolContext(root)
    call = ToolCall(id="1", name=tool.name, arguments=args)
    refusal = answer_text(await ask_approval(call, ctx, allow_all))  # a read inside asks nothing
    assert (refusal is None) == (tool is READ)
    assert refusal is None or "ELOOP: too many symbolic links encountered" in refusal
    result = await execute_tool(tool, tool.name, args, ctx)
    assert result.is_error
    assert "ELOOP: too many symbolic links encountered" in text_of(result)


async def test_an_unforeseen_exception_in_a_tool_is_an_error_result(
        root: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def broken(_args: dict[str, Any], _ctx: ToolContext) -> ToolResult:
        raise RuntimeError("no result for this")

    tool = Tool(ToolSpec("broken", "", {}), broken)
    with caplog.at_level(logging.ERROR, "pi_lsp.agent.tools"):
        result = await execute_tool(tool, "broken", {}, ToolContext(root))
    # stored as pi 1.6 stores a tool's thrown error: details {}
    assert result == thrown_result("broken failed: RuntimeError: no result for this")
    assert "no result for this" in caplog.text  # a bug: logged with its traceback


async def test_unknown_tool_is_an_error_result(root: Path) -> None:
    result = await execute_tool(None, "teleport", {}, ToolContext(root))
    assert result.is_error
    assert "teleport" in text_of(result)


LONG_FOLDERS = ("d" * 200 + "/") * 21  # 4,221 characters: past PATH_MAX in any folder
# Tool calls answered as pi 1.6's agent loop answers them (tests/pi16_calls.mjs), each run in a
# folder holding CALL_FILES; "{DIR}" stands for that folder in the stored answers.
PI16_CALLS: dict[str, dict[str, Any]] = {
    "read nul": {"tool": "read", "args": {"path": "a\0b.txt"}},
    "read nul after a name": {"tool": "read", "args": {"path": "a.txt\0"}},
    "read nul absolute": {"tool": "read", "args": {"path": "/nowhere/a\0b"}},
    "read nul file url": {"tool": "read", "args": {"path": "file:///nowhere/a%00b"}},
    "read nul quoted": {"tool": "read", "args": {"path": "/nowhere/it's\0"}},
    "read nul both quotes": {"tool": "read", "args": {"path": "/nowhere/it's \"x\"\0"}},
    "read nul all quotes": {"tool": "read", "args": {"path": "/nowhere/'\"`\0"}},
    "read nul controls": {"tool": "read",
                          "args": {"path": "/nowhere/\0\t\r\b\f\v\x1b\x7f\x85\x9f\\é\ud800"}},
    "read nul long": {"tool": "read", "args": {"path": "/nowhere/" + "x" * 150 + "\0"}},
    "read nul long lines": {"tool": "read", "args": {"path": "/nowhere/" + "line\n" * 30 + "\0"}},
    "read nul cut character": {"tool": "read", "args": {"path": "/" + "a" * 125 + "😀\0"}},
    "write nul": {"tool": "write", "args": {"path": "a\0b.txt", "content": "N\n"}},
    "write nul folder": {"tool": "write", "args": {"path": "d\0/x.txt", "content": "N\n"}},
    "edit nul": {"tool": "edit", "args": {"path": "a.txt\0",
                                          "edits": [{"oldText": "F", "newText": "G"}]}},
    "read file url backslash": {"tool": "read", "args": {"path": "file:///nowhere\\a.txt"}},
    "read file url trailing space": {"tool": "read", "args": {"path": "file:///nowhere/a "}},
    "read file url upper case host": {"tool": "read",
                                      "args": {"path": "file://LOCALHOST/nowhere/a"}},
    "read file url bad escape": {"tool": "read", "args": {"path": "file:///nowhere/a%zz"}},
    "read file url host": {"tool": "read", "args": {"path": "file://host/nowhere/a"}},
    "write file url port": {"tool": "write", "args": {"path": "file://localhost:80/a",
                                                      "content": "N\n"}},
    # longer than PATH_MAX: a name longer than NAME_MAX too, folders past PATH_MAX, a file
    # past it in folders within it (pi makes them)
    "read too long name": {"tool": "read", "args": {"path": "a" * 5000}},
    "write too long name": {"tool": "write", "args": {"path": "a" * 5000, "content": "N\n"}},
    "edit too long name": {"tool": "edit", "args": {"path": "a" * 5000,
                                                    "edits": [{"oldText": "F", "newText": "G"}]}},
    "read too long folders": {"tool": "read", "args": {"path": LONG_FOLDERS + "f.txt"}},
    "write too long folders": {"tool": "write", "args": {"path": LONG_FOLDERS + "f.txt",
                                                         "content": "N\n"}},
    "edit too long folders": {"tool": "edit", "args": {
        "path": LONG_FOLDERS + "f.txt", "edits": [{"oldText": "F", "newText": "G"}]}},
    "write too long file": {"tool": "write", "args": {"path": LONG_FOLDERS[:19 * 201] + "f" * 255,
                                                      "content": "N\n"}},
    "bash timeout cut": {"tool": "bash", "args": {"command": "seq 1 3000; sleep 30",
                                                  "timeout": 1}},
    "bash timeout": {"tool": "bash", "args": {"command": "echo hi; sleep 30", "timeout": 1}},
    # through pi's agent loop, with the toolResult message it writes (test_agent.py)
    "loop read missing": {"tool": "read", "args": {"path": "missing.txt"}, "loop": {}},
    "loop edit no match": {"tool": "edit", "loop": {}, "args": {
        "path": "a.txt", "edits": [{"oldText": "nope", "newText": "x"}]}},
    "loop unknown tool": {"tool": "frobnicate", "args": {"x": 1}, "loop": {}},
    "loop bad arguments": {"tool": "edit", "args": {"path": "a.txt"}, "loop": {}},
    "loop blocked": {"tool": "bash", "args": {"command": "touch ran"},
                     "loop": {"block": "The user refused this bash call."}},
    "loop aborted": {"tool": "read", "args": {"path": "a.txt"}, "loop": {"abort": True}},
    "loop cut": {"tool": "write", "args": {"path": "w.txt", "content": "half"},
                 "loop": {"stopReason": "length"}},
    "loop exit code": {"tool": "bash", "args": {"command": "exit 3"}, "loop": {}},
    "loop ok": {"tool": "read", "args": {"path": "a.txt"}, "loop": {}},
    "loop bad bash arguments": {"tool": "bash", "args": {"command": "echo hi",
                                                         "timeout": "soon"}, "loop": {}},
}
CALL_FILES = {"a.txt": "F\n"}
TOOLS = {tool.name: tool for tool in (READ, BASH, EDIT, WRITE)}
STORED_CALLS = Path(__file__).with_name("fixtures") / "pi16-calls.json"
FULL_OUTPUT = r"/[^\s\]]*/pi(?:-lsp)?-bash-\w+\.log"  # bash's full output file, pi's or pi-lsp's


def call_folder(folder: Path) -> Path:
    for name, text in CALL_FILES.items():
        (folder / name).write_text(text)
    return folder


@pytest.fixture(scope="module")
def pi16_calls(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What pi 1.6 answers on each of PI16_CALLS: stored (for machines without pi), and checked
    against pi itself where it is installed."""
    stored: dict[str, Any] = json.loads(STORED_CALLS.read_text("utf-8"))
    node = pi16_node()
    if node is not None:
        folder = call_folder(tmp_path_factory.mktemp("calls"))
        cases = folder.parent / "calls.json"
        cases.write_text(json.dumps(PI16_CALLS))
        run = subprocess.run([node, str(Path(__file__).with_name("pi16_calls.mjs")),
                              str(PI16 / "@earendil-works"), str(folder), str(cases)],
                             capture_output=True, text=True, timeout=PROCESS_CEILING_S,
                             env={**os.environ, "TMPDIR": str(folder.parent)})  # its logs
        assert run.returncode == 0, run.stderr
        assert json.loads(full_output(run.stdout).replace(str(folder), "{DIR}")) == stored
    return stored


async def answered(name: str, root: Path) -> dict[str, Any]:
    """pi-lsp's answer to PI16_CALLS[name] as pi16_calls.mjs gives pi's."""
    call = PI16_CALLS[name]
    result = await execute_tool(TOOLS[call["tool"]], call["tool"], call["args"],
                                ToolContext(call_folder(root)))
    answer = {"text": text_of(result), "details": result.details, "isError": result.is_error}
    for named in re.findall(FULL_OUTPUT, answer["text"]):
        discard_file(named)
    return json.loads(full_output(json.dumps(answer)).replace(str(root), "{DIR}"))


def full_output(text: str) -> str:
    """`text` with bash's full output file named alike, whoever made it."""
    return re.sub(FULL_OUTPUT, "{FULL}", text)


@pytest.mark.parametrize("name", [name for name in PI16_CALLS if " nul" in name])
async def test_a_path_with_a_nul_byte_fails_in_nodes_words(root: Path,
                                                           pi16_calls: dict[str, Any],
                                                           name: str) -> None:
    """A path holding a NUL byte failed in Python's words ("read failed: embedded null byte");
    pi 1.6 passes Node's to the model (the path as util.inspect shows it, cut at 128)."""
    got, expected = await answered(name, root), pi16_calls[name]
    assert (got["text"], got["isError"]) == (expected["text"], expected["isError"])
    assert sorted(os.listdir(root)) == sorted(CALL_FILES)


class LoopOnlyFiles(DiskFiles):
    """An editor's files, read on the event loop only: its buffers change there."""

    def read_text(self, path: Path) -> str | None:
        asyncio.get_running_loop()  # a RuntimeError in a worker thread
        return super().read_text(path)

    def buffer_text(self, path: Path) -> str | None:
        asyncio.get_running_loop()
        return super().buffer_text(path)


async def test_an_edit_is_planned_and_diffed_while_the_loop_goes_on(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An edit was planned on the event loop at its approval and again, with its diff, as it
    ran (10,000 edits: 4 s, then 11 s), and the language server answered nothing meanwhile.
    Both run in worker threads; the editor's buffers are still read on the loop."""
    loop = asyncio.get_running_loop()
    for name in ("plan_edit", "edit_diff"):
        monkeypatch.setattr(tools, name, needing_the_loop(getattr(tools, name), loop))
    (root / "a.txt").write_text("one\ntwo\n")
    args = {"path": "a.txt", "edits": [{"oldText": "one", "newText": "1"}]}
    ctx = ToolContext(root, files=LoopOnlyFiles())
    assert await ask_approval(ToolCall(id="c", name="edit", arguments=args), ctx,
                              allow_all) is None
    result = await execute_tool(EDIT, "edit", args, ctx)
    assert text_of(result) == "Successfully replaced 1 block(s) in a.txt."
    assert result.details["diff"] == "-1 one\n+1 1\n 2 two"
    assert (root / "a.txt").read_text() == "1\ntwo\n"


def on_the_loop_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def disk_reads_noted(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each disk read of a file's text from now on ran on the event loop's thread."""
    on_loop: list[bool] = []
    real_read = tools.disk_text

    def noted(*read_args: Any) -> str | None:
        on_loop.append(on_the_loop_thread())
        return real_read(*read_args)
    monkeypatch.setattr(tools, "disk_text", noted)
    return on_loop


async def test_an_edit_being_asked_reads_its_file_in_the_worker(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The edit planned in a worker thread to ask the user read its file from the disk on the
    event loop, where the editor's buffers are looked up (a 50 MB file: every editor request
    waited). Only the buffer is looked up there now; the disk is read in the worker."""
    on_loop = disk_reads_noted(monkeypatch)
    (root / "a.txt").write_text("one\ntwo\n")
    args = {"path": "a.txt", "edits": [{"oldText": "one", "newText": "1"}]}
    ctx = ToolContext(root, files=LoopOnlyFiles())
    assert await ask_approval(ToolCall(id="c", name="edit", arguments=args), ctx,
                              allow_all) is None
    assert ctx.approved is not None and ctx.approved.new_text == "1\ntwo\n"
    assert on_loop == [False]


class TypedBuffers(LoopOnlyFiles):
    """An editor's open buffers, which the user types into on the event loop."""

    def __init__(self, texts: dict[Path, str]) -> None:
        self.texts = texts

    def read_text(self, path: Path) -> str | None:
        asyncio.get_running_loop()  # a RuntimeError in a worker thread
        return self.texts.get(path)

    def buffer_text(self, path: Path) -> str | None:
        return self.read_text(path)  # each buffer has changes not saved: none is on disk

    async def write_text(self, path: Path, text: str, old: str | None,
                         seen: tuple[int, ...] | None = None) -> None:
        self.texts[path] = text


async def test_an_edit_planned_while_the_user_types_keeps_what_was_typed(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An edit planned in a worker thread from the buffer as it was wrote its plan over what
    the user typed meanwhile (a didChange on the loop): the line typed was lost. The plan is
    made again where the buffer changed; the edit lands on the newer text."""
    loop = asyncio.get_running_loop()
    path = root / "a.txt"
    buffers = TypedBuffers({path: "one\ntwo\n"})

    def typing(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():
            typed = threading.Event()

            def type_a_line() -> None:
                buffers.texts[path] = "one\ntwo\nthree\n"
                typed.set()

            loop.call_soon_threadsafe(type_a_line)
            assert typed.wait(CEILING_S), "the event loop stood still"
        return real_plan(*args, **kwargs)

    real_plan = tools.plan_edit
    monkeypatch.setattr(tools, "plan_edit", typing)
    args = {"path": "a.txt", "edits": [{"oldText": "one", "newText": "1"}]}
    result = await execute_tool(EDIT, "edit", args, ToolContext(root, files=buffers))
    assert text_of(result) == "Successfully replaced 1 block(s) in a.txt."
    assert buffers.texts[path] == "1\ntwo\nthree\n"
    assert result.details["diff"] == "-1 one\n+1 1\n 2 two\n 3 three"


async def test_an_edit_tells_its_file_unchanged_since_planned_off_the_loop(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once planned in a worker thread, an edit read its file again on the event loop to see
    whether it changed meanwhile (a 50 MB file: every editor request waited). The buffer is
    looked up on the loop; the disk is read again in the worker."""
    monkeypatch.setattr(tools, "settled", lambda _info: True)  # its file changed long ago
    on_loop = disk_reads_noted(monkeypatch)
    (root / "a.txt").write_text("one\ntwo\n")
    args = {"path": "a.txt", "edits": [{"oldText": "one", "newText": "1"}]}
    result = await execute_tool(EDIT, "edit", args, ToolContext(root, files=LoopOnlyFiles()))
    assert text_of(result) == "Successfully replaced 1 block(s) in a.txt."
    assert (root / "a.txt").read_text() == "1\ntwo\n"
    assert on_loop == [False, False]


@pytest.mark.parametrize("tool,args", [
    (EDIT, {"path": "a.txt", "edits": [{"oldText": "one", "newText": "1"}]}),
    (WRITE, {"path": "a.txt", "content": "W\n"})], ids=["edit", "write"])
async def test_a_file_changed_in_the_last_2_s_is_read_again_off_the_loop(
        root: Path, monkeypatch: pytest.MonkeyPatch, tool: Tool, args: dict[str, Any]) -> None:
    """A file whose stat cannot tell its next change (changed in the last 2 s: the model's
    edits one after another) was read again whole on the event loop to tell it unchanged
    (every editor request waited), then once more by the write's own check in its thread
    (8ee142e). That check is the one read: the loop compares the stat only."""
    monkeypatch.setattr(tools, "settled", lambda _info: False)
    (root / "a.txt").write_text("one\ntwo\n")
    on_loop = disk_reads_noted(monkeypatch)
    result = await execute_tool(tool, tool.name, args, ToolContext(root, files=LoopOnlyFiles()))
    assert not result.is_error, text_of(result)
    assert on_loop == [False, False, False]


async def test_an_edit_planned_while_its_file_changes_on_disk_keeps_the_change(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file not open in the editor, changed on disk while its edit was planned (a command of
    another session): the plan is made again from the newer text, as for a buffer typed in."""
    path = root / "a.txt"
    path.write_text("one\ntwo\n")
    real_plan = tools.plan_edit

    def changing(*plan_args: Any) -> editmatch.EditPlan:
        if not on_the_loop_thread():
            path.write_text("one\ntwo\nthree\n")
        return real_plan(*plan_args)
    monkeypatch.setattr(tools, "plan_edit", changing)
    args = {"path": "a.txt", "edits": [{"oldText": "one", "newText": "1"}]}
    result = await execute_tool(EDIT, "edit", args, ToolContext(root, files=LoopOnlyFiles()))
    assert text_of(result) == "Successfully replaced 1 block(s) in a.txt."
    assert path.read_text() == "1\ntwo\nthree\n"
    assert result.details["diff"] == "-1 one\n+1 1\n 2 two\n 3 three"


async def test_a_write_reads_the_file_it_overwrites_off_the_loop(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write, once approved, read the file it overwrites again on the event loop to see it
    was the one approved (a 100 MB file: every editor request waited). It is read in a worker
    thread, and once more there after, as an edit's is; the buffer is looked up on the loop."""
    monkeypatch.setattr(tools, "settled", lambda _info: True)  # its file changed long ago
    on_loop = disk_reads_noted(monkeypatch)
    (root / "a.txt").write_text("one\n")
    args = {"path": "a.txt", "content": "W\n"}
    ctx = ToolContext(root, files=LoopOnlyFiles())
    assert await ask_approval(ToolCall(id="c", name="write", arguments=args), ctx,
                              allow_all) is None
    result = await execute_tool(WRITE, "write", args, ctx)
    assert text_of(result) == "Successfully wrote to a.txt"
    assert (root / "a.txt").read_text() == "W\n"
    assert on_loop == [False, False, False]


async def test_a_write_to_the_disk_encodes_its_text_off_the_loop(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk's write_text made its text UTF-8 on the event loop before its thread wrote it
    (100 MB: 0.06 s of every editor request's time); it is made in the thread."""
    on_loop: list[bool] = []
    real_well_formed = tools.well_formed

    def noted(text: str) -> str:
        on_loop.append(on_the_loop_thread())
        return real_well_formed(text)
    monkeypatch.setattr(tools, "well_formed", noted)
    await tools.DISK.write_text(root / "a.txt", "W\ud83d\n", None)
    assert (root / "a.txt").read_text() == "W\ufffd\n"
    assert on_loop == [False]


async def test_a_write_worked_out_while_the_user_types_writes_nothing(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The user types in the open file while its approved write is worked out again in a
    worker thread: the file is not the one approved, so nothing is written over the typing."""
    loop = asyncio.get_running_loop()
    path = root / "a.txt"
    buffers = TypedBuffers({path: "one\n"})
    ctx = ToolContext(root, files=buffers)
    args = {"path": "a.txt", "content": "W\n"}
    assert await ask_approval(ToolCall(id="c", name="write", arguments=args), ctx,
                              allow_all) is None
    real_well_formed = tools.well_formed

    def typing(text: str) -> str:
        if text == "W\n" and not on_the_loop_thread():  # the proposal, its text read
            typed = threading.Event()

            def type_a_line() -> None:
                buffers.texts[path] = "one\ntwo typed\n"
                typed.set()
            loop.call_soon_threadsafe(type_a_line)
            assert typed.wait(CEILING_S), "the event loop stood still"
        return real_well_formed(text)
    monkeypatch.setattr(tools, "well_formed", typing)
    result = await execute_tool(WRITE, "write", args, ctx)
    assert text_of(result) == ("a.txt changed while the write waited for approval; nothing "
                               "was written. Read it again.")
    assert buffers.texts[path] == "one\ntwo typed\n"


EDIT_ONE = {"path": "a.txt", "edits": [{"oldText": "one", "newText": "1"}]}
BOM_CRLF_BAD = b"\xef\xbb\xbfone\r\n\xff\n"  # a BOM, CRLF line ends, a byte not UTF-8


def changed_once_told_unchanged(monkeypatch: pytest.MonkeyPatch, path: Path,
                                meanwhile: bytes | None) -> None:
    """Make `path` hold `meanwhile` (None: deleted) in the loop turn after the tools tell it
    unchanged (`_unchanged`), before the write's first step: as another program may."""
    real_unchanged = tools._unchanged

    def change() -> None:
        if meanwhile is None:
            path.unlink()
        else:
            path.write_bytes(meanwhile)

    def unchanged(*told: Any) -> bool:
        asyncio.get_running_loop().call_soon(change)
        return real_unchanged(*told)
    monkeypatch.setattr(tools, "_unchanged", unchanged)


@pytest.mark.parametrize("tool,args,before,meanwhile", [
    (EDIT, EDIT_ONE, b"one\n", b"one\ntwo\n"),
    (WRITE, {"path": "a.txt", "content": "W\n"}, b"one\n", b"one\ntwo\n"),
    (EDIT, EDIT_ONE, b"one\n", None),
    (WRITE, {"path": "a.txt", "content": "W\n"}, b"one\n", None),
    (WRITE, {"path": "a.txt", "content": "W\n"}, None, b"theirs\n"),
    (EDIT, EDIT_ONE, BOM_CRLF_BAD, BOM_CRLF_BAD + b"two\r\n"),
], ids=["edit, changed", "write, changed", "edit, deleted", "write, deleted", "write, made",
        "edit, BOM, CRLF, not UTF-8"])
async def test_a_write_keeps_what_another_program_wrote_after_the_file_was_told_unchanged(
        root: Path, monkeypatch: pytest.MonkeyPatch, tool: Tool, args: dict[str, Any],
        before: bytes | None, meanwhile: bytes | None) -> None:
    """A file no editor has open, changed on disk (another program, or the user in another
    editor) after the tools told it unchanged on the loop and before the write's thread ran:
    the plan's text went over it, worked out from the text before. The write tells the disk
    still holds the text planned from, or writes nothing (a file deleted or made since too)."""
    path = root / "a.txt"
    if before is not None:
        path.write_bytes(before)
    changed_once_told_unchanged(monkeypatch, path, meanwhile)
    result = await execute_tool(tool, tool.name, args, ToolContext(root))
    assert text_of(result) == (f"{path} changed on disk since it was read; nothing was "
                               "written. Read it again.")
    assert result.is_error
    assert (path.read_bytes() if path.exists() else None) == meanwhile


@pytest.mark.parametrize("settled", [True, False], ids=["changed long ago", "just written"])
async def test_a_file_saved_again_unchanged_after_it_was_told_unchanged_is_written(
        root: Path, monkeypatch: pytest.MonkeyPatch, settled: bool) -> None:
    """The disk's check of the text planned from reads the file as the edit did: its BOM, CRLF
    line ends and bytes that are not UTF-8 (U+FFFD, written back so, as pi does) are the same
    text. (A file whose stat is still the one read, long after it changed, is not read again:
    test_a_write_reads_the_file_it_overwrites_off_the_loop counts the reads.)"""
    monkeypatch.setattr(tools, "settled", lambda _info: settled)
    path = root / "a.txt"
    path.write_bytes(BOM_CRLF_BAD)
    changed_once_told_unchanged(monkeypatch, path, BOM_CRLF_BAD)
    result = await execute_tool(EDIT, "edit", EDIT_ONE, ToolContext(root))
    assert text_of(result) == "Successfully replaced 1 block(s) in a.txt."
    assert path.read_bytes() == b"\xef\xbb\xbf1\r\n\xef\xbf\xbd\n"


def editor_with(path: Path, text: str) -> tuple[EditorFiles, TextDocument]:
    """An editor with `path` open and showing its file, which applies workspace edits as a
    client does (refusing one made for another version)."""
    document = TextDocument(path.as_uri(), text, version=1)

    async def apply_edit(params: types.ApplyWorkspaceEditParams) -> Any:
        (change,) = params.edit.document_changes
        if change.text_document.version != document.version:
            return types.ApplyWorkspaceEditResult(applied=False, failure_reason="version")
        (edit,) = change.edits
        document.apply_change(types.TextDocumentContentChangePartial(range=edit.range,
                                                                     text=edit.new_text))
        return types.ApplyWorkspaceEditResult(applied=True)

    server = SimpleNamespace(
        workspace=SimpleNamespace(text_documents={document.uri: document}),
        client_capabilities=SimpleNamespace(workspace=SimpleNamespace(apply_edit=True)),
        workspace_apply_edit_async=apply_edit)
    files = EditorFiles(cast(LanguageServer, server))
    files.synced(document.uri)
    return files, document


@pytest.mark.parametrize("settled", [True, False], ids=["changed long ago", "just written"])
async def test_an_edit_keeps_what_was_typed_and_saved_after_its_file_was_read_again(
        root: Path, monkeypatch: pytest.MonkeyPatch, settled: bool) -> None:
    """The user types in the open file and saves it (a didChange, a didSave) after the worker
    read the disk again, before the loop looked: the buffer has nothing unsaved, the worker's
    read said the file was unchanged, and the plan, made from the older text, was laid over
    the line typed. The loop tells the save by the file's stat (or its text, where the stat
    cannot tell)."""
    path = root / "a.txt"
    path.write_text("one\ntwo\n")
    monkeypatch.setattr(tools, "settled", lambda _info: settled)
    files, document = editor_with(path, "one\ntwo\n")
    await files.settle()  # known to show its file: the disk is its text
    loop = asyncio.get_running_loop()
    real_read_again = tools._read_again

    def type_and_save() -> None:
        document.apply_change(types.TextDocumentContentChangeWholeDocument(
            text="one\ntwo\nthree typed\n"))
        document.version = 2
        files.synced(document.uri)
        path.write_text("one\ntwo\nthree typed\n")
        files.forget(document.uri)

    def read_then_typed(change: Any, ctx: ToolContext) -> Any:
        read = real_read_again(change, ctx)
        done = threading.Event()
        loop.call_soon_threadsafe(lambda: (type_and_save(), done.set()))
        assert done.wait(CEILING_S), "the event loop stood still"
        return read
    monkeypatch.setattr(tools, "_read_again", read_then_typed)
    args = {"path": "a.txt", "edits": [{"oldText": "one", "newText": "1"}]}
    result = await execute_tool(EDIT, "edit", args, ToolContext(root, files=files))
    assert text_of(result) == "Successfully replaced 1 block(s) in a.txt."
    assert document.source == "1\ntwo\nthree typed\n"


@pytest.mark.parametrize("step", ["approval", "run"])
async def test_an_aborted_edit_stops_planning_at_its_next_replacement(
        root: Path, monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    """An edit aborted while planned in a worker thread was planned on to its end (100,000
    edits: ~11 s of CPU, 153 s at a load), holding up the server's exit and the next turn;
    nothing was written. The plan stops at its next replacement; the file is left whole."""
    text = "".join(f"line {i}\n" for i in range(1000))
    (root / "a.txt").write_text(text)
    args = {"path": "a.txt", "edits": [{"oldText": f"line {i}\n", "newText": f"L{i}\n"}
                                       for i in range(1000)]}
    reached, aborted, ended = threading.Event(), threading.Event(), threading.Event()
    looked_for: list[str] = []
    real_find, real_plan = editmatch.fuzzy_find, tools.plan_edit

    def find(content: editmatch.Matched, old: str) -> editmatch.Match | None:
        reached.set()
        assert aborted.wait(CEILING_S), "the call was never aborted"
        looked_for.append(old)
        return real_find(content, old)

    def plan(*plan_args: Any) -> editmatch.EditPlan:
        try:
            return real_plan(*plan_args)
        finally:
            ended.set()
    monkeypatch.setattr(editmatch, "fuzzy_find", find)
    monkeypatch.setattr(tools, "plan_edit", plan)
    ctx = ToolContext(root)
    call = ask_approval(ToolCall(id="c", name="edit", arguments=args), ctx, allow_all) \
        if step == "approval" else execute_tool(EDIT, "edit", args, ctx)
    task = asyncio.ensure_future(call)
    assert await asyncio.to_thread(reached.wait, CEILING_S), "the plan never started"
    task.cancel()
    await asyncio.wait([task])
    aborted.set()
    assert await asyncio.to_thread(ended.wait, CEILING_S), "the plan never ended"
    assert task.cancelled()
    assert looked_for == ["line 0\n"]
    assert (root / "a.txt").read_text() == text


@pytest.mark.parametrize("name", [name for name in PI16_CALLS if " too long " in name])
async def test_a_path_past_path_max_fails_in_nodes_words(root: Path, pi16_calls: dict[str, Any],
                                                         name: str) -> None:
    """A path no system call takes failed in Python's words for a write into folders past
    PATH_MAX ("write failed: [Errno 36] File name too long"); pi 1.6 answers as the first call
    its tool makes fails (realpath, access, mkdir or open). Nothing is made."""
    got, expected = await answered(name, root), pi16_calls[name]
    assert (got["text"], got["isError"]) == (expected["text"], expected["isError"])
    assert sorted(os.listdir(root)) == sorted(CALL_FILES)


@pytest.mark.parametrize("tool", ["read", "write", "edit"])
async def test_a_huge_path_is_refused_before_any_check_folds_it(
        root: Path, monkeypatch: pytest.MonkeyPatch, tool: str) -> None:
    """A path argument of megabytes was folded, name by name, at each check of secrets and
    protected folders, on the event loop (35 s for 10 MB, the editor frozen meanwhile); no
    system call takes it, so it is refused as the first one fails, none of it folded."""
    unfolded = access.fold

    def fold(name: str) -> str:
        assert len(name) < PATH_MAX, f"a name of {len(name)} characters was folded"
        return unfolded(name)

    monkeypatch.setattr(access, "fold", fold)
    path = "a" * 1_000_000
    args = {"read": {"path": path}, "write": {"path": path, "content": "N\n"},
            "edit": {"path": path, "edits": [{"oldText": "F", "newText": "G"}]}}[tool]
    ctx = ToolContext(call_folder(root))
    asked = await ask_approval(ToolCall(id="c", name=tool, arguments=args), ctx, allow_all)
    result = await execute_tool(TOOLS[tool], tool, args, ctx)
    syscall = "access" if tool == "read" else "realpath"
    assert asked == result == thrown_result(f"ENAMETOOLONG: name too long, {syscall} "
                                            f"'{root / path}'")


@pytest.mark.parametrize("name", ["bash timeout cut", "bash timeout"])
async def test_a_timed_out_command_stores_pis_details(root: Path, pi16_calls: dict[str, Any],
                                                      name: str) -> None:
    """A timed-out command's result kept its cut output's truncation details (or none) where
    pi 1.6 stores `{}`: its bash throws, and its agent loop's error result has empty details."""
    assert await answered(name, root) == pi16_calls[name]


@pytest.mark.parametrize("name", [name for name in PI16_CALLS if " file url " in name])
async def test_a_file_url_names_the_path_pi_reads(root: Path, pi16_calls: dict[str, Any],
                                                  name: str) -> None:
    """A file:// path was read by Python's URL rules: `\\` stayed in the name, a trailing
    space too, `LOCALHOST` was refused, `%zz` was kept; pi 1.6 reads it as Node's
    fileURLToPath does (a slash, dropped, the local host, "URI malformed")."""
    got, expected = await answered(name, root), pi16_calls[name]
    assert (got["text"], got["isError"]) == (expected["text"], expected["isError"])


# URLs whose paths Node's fileURLToPath gives (tests/node_file_urls.mjs), as stored
FILE_URLS = [
    "file:///a\\b", "file:///a ", "file:///a\x01", "file:// /a", "file://LOCALHOST/a",
    "file://localhost/a", "file://%6Cocalhost/a", "file:///a%zz", "file:///a%", "file:///a%2",
    "file:///a%%b", "file:///a%C3", "file:///a%C3%A9", "file:///%ED%A0%80", "file:///a%25b",
    "file:///a%2fb", "file:///a%2Fb", "file:///a/..%2f", "file:///a b", "file:///a?q#f",
    "file:///a?%zz", "file:///a#%2f", "file:///%2e%2e/x", "file:///a/%2e/b", "file:///a/%2E%2e/b",
    "file:///a/.%2e", "file:///a/./b/../c", "file:///a/..", "file:///a/.", "file:///..",
    "file:///é", "file:///😀", "file:///a\ud800b", "file:///a%00b", "file://", "file:///",
    "file:////a", "file://///a", "file:///a\tb", "file:///a\nb", "file://local\thost/a",
    "file:///a\\..\\b", "file://\\\\host\\a", "file:///a%5Cb", "file:///a\"b<c>d`e{f}g",
    "file:///a^b|c", "file:///x\x7f", "file:///C:/x", "file:///C|/x", "file://C:/x", "file://C|/x",
    "file://C:x", "file:///C:/..", "file:///C:/../..", "file://host/C:/x", "file://host/a",
    "file://localhost:80/a", "file://user@localhost/a", "file://local%20host/a", "file://a b/c",
    "file://\x00/a", "file://[::1]/a", "file://[::1/x", "file://[zz]/x", "file://127.0.0.1/a",
    "file://1.2.3.999/x", "file://999999999999/x", "file://0x7f.1/x", "file://1.2.3.4./x",
    "file://a.0x/x", "file://a.09/x", "file://LocalHost./a", "file://.localhost/x",
    "file://a..b/x", "file://ex%41mple/x", "file://%FF/x", "file://%C3%A9/x", "file://é/x",
    "file://日本/x", "file://xn--9ca/x", "file://xn--/a", "file://xn--zz-/x", "file://a.xn--/x",
]
STORED_FILE_URLS = Path(__file__).with_name("fixtures") / "node-file-urls.json"


@pytest.fixture(scope="module")
def node_file_urls(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Node's answer on each of FILE_URLS: stored, and checked against Node 22 where pi 1.6's
    is installed."""
    stored: dict[str, Any] = json.loads(STORED_FILE_URLS.read_text("utf-8"))
    node = pi16_node()
    if node is not None:
        urls = tmp_path_factory.mktemp("urls") / "urls.json"
        urls.write_text(json.dumps(FILE_URLS))
        run = subprocess.run([node, str(Path(__file__).with_name("node_file_urls.mjs")),
                              str(urls)], capture_output=True, text=True,
                             timeout=PROCESS_CEILING_S)
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout) == stored
    return stored


@pytest.mark.parametrize("url", FILE_URLS)
def test_a_file_url_is_read_as_nodes_file_url_to_path_reads_it(
        node_file_urls: dict[str, Any], url: str) -> None:
    """file:// URLs were parsed by Python's rules (urlsplit, unquote), where pi 1.6 uses Node's
    fileURLToPath (WHATWG parsing, then decodeURIComponent)."""
    try:
        got = {"path": file_url_path(url)}
    except FileUrlError as error:
        got = {"error": str(error)}
    assert got == node_file_urls[url]
