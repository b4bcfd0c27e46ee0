"""The least any Python reader of a pi session does before it can answer: read the file, check
its UTF-8, and find each line's one JSON value (msgspec, nothing kept). Prints nothing; timed
by the benchmark as a whole process, beside `pi-lsp context --json`."""

import codecs
import sys

import msgspec

CHUNK = 8 << 20


def main(path: str) -> None:
    check = codecs.getincrementaldecoder("utf-8")().decode
    decode = msgspec.json.Decoder(msgspec.Raw).decode
    rest = b""
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            for start in range(0, len(chunk), 16 << 10):
                check(chunk[start:start + (16 << 10)])
            for _ in map(decode, filter(None, lines)):
                pass
    check(b"", True)
    if rest:
        decode(rest)


if __name__ == "__main__":
    main(sys.argv[1])
