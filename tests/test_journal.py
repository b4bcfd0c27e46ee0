"""The session journal: a tolerant reader, a locked appender, an incremental tail, migrations."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
import tracemalloc
from pathlib import Path
from typing import Any

import msgspec
import pytest

from pi_lsp.context.build import build_session_context
from pi_lsp.session import journal
from pi_lsp.session.appender import WriteFailedError, append_lines
from pi_lsp.session.catalog import summarize
from pi_lsp.session.check import repaired_copy
from pi_lsp.session.entries import CompactionEntry, CustomMessage, MessageEntry
from pi_lsp.session.fork import fork_session
from pi_lsp.session.journal import (
    BOM,
    MAX_NESTING,
    PROBLEMS_PER_KIND,
    LineBatch,
    NotASessionError,
    Problem,
    parse_lines,
    problem_count,
    read_file,
)
from pi_lsp.session.records import Refresh, decode_entry
from pi_lsp.session.tail import Tail
from pi_lsp.session.tree import SessionTree
from tests.test_system_messages import PI16, pi16_eval, pi16_node
from tests.waits import CEILING_S, PROCESS_CEILING_S

ROOT = Path(__file__).resolve().parent.parent
SESSION_ID = "11111111-2222-4333-8444-555555555555"
OTHER_SESSION_ID = "99999999-8888-4777-8666-555555555555"
TS = "2025-01-02T03:04:05.678Z"
MISSING = object()  # a field left out
HEX8 = re.compile(r"[0-9a-f]{8}")


# -- helpers ---------------------------------------------------------------------------------


def dumps(value: Any) -> bytes:
    """Compact JSON as JavaScript's JSON.stringify writes it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def header(session_id: str = SESSION_ID, version: int | None = 3, **extra: Any) -> bytes:
    fields: dict[str, Any] = {"type": "session"}
    if version is not None:
        fields["version"] = version
    fields.update(id=session_id, timestamp=TS, cwd="/work/project")
    fields.update(extra)
    return dumps(fields)


def custom(entry_id: str | None, parent: str | None = None, **extra: Any) -> bytes:
    """A `custom` entry line (id left out when `entry_id` is None)."""
    fields: dict[str, Any] = {"type": "custom", "customType": "test"}
    if entry_id is not None:
        fields["id"] = entry_id
    fields.update(parentId=parent, timestamp=TS)
    fields.update(extra)
    return dumps(fields)


def write_session(path: Path, lines: list[bytes], *, eol: bytes = b"\n",
                  final_eol: bool = True, bom: bool = False) -> str:
    """Write `lines` joined by `eol` (and ended by it unless `final_eol` is False)."""
    data = eol.join(lines) + (eol if final_eol else b"")
    path.write_bytes((BOM if bom else b"") + data)
    return str(path)


def kinds(problems: list[Problem]) -> list[tuple[str, int | None]]:
    return [(problem.kind, problem.line) for problem in problems]


def record_ids(tree: SessionTree) -> list[str | None]:
    return [record.env.id for record in tree.records]


def base_session(tmp_path: Path, name: str = "s.jsonl") -> str:
    """A valid v3 session with two chained entries."""
    return write_session(tmp_path / name, [header(), custom("aaaa0001"), custom("aaaa0002",
                                                                               "aaaa0001")])


# -- damaged input ---------------------------------------------------------------------------


def test_blank_line_is_reported_with_its_line_number(tmp_path: Path) -> None:
    path = write_session(tmp_path / "s.jsonl",
                         [header(), custom("aaaa0001"), b"", custom("aaaa0002", "aaaa0001")])
    snapshot = read_file(path)
    assert kinds(snapshot.problems) == [("blank", 3)]
    assert [(r.line, r.env.id) for r in snapshot.records] == [(2, "aaaa0001"), (4, "aaaa0002")]


@pytest.mark.parametrize("blank", [b" ", b"   \t  ", b"\t"])
def test_whitespace_only_line_is_reported_as_blank(tmp_path: Path, blank: bytes) -> None:
    path = write_session(tmp_path / "s.jsonl",
                         [header(), blank, custom("aaaa0001"), custom("aaaa0002", "aaaa0001")])
    tree = SessionTree.open(path)
    assert kinds(tree.problems) == [("blank", 2)]
    assert record_ids(tree) == ["aaaa0001", "aaaa0002"]
    assert tree.leaf_id == "aaaa0002"


A1, A2, A3, A4 = (custom("a1"), custom("a2", "a1"), custom("a3", "a2"), custom("a4", "a3"))


@pytest.mark.parametrize(("lines", "problems"), [
    ([A1, A2 + b" " + A3, A4], [("malformed", 3)]),  # two entries on one line
    ([A1, A2 + A3, b"", A4], [("malformed", 3), ("blank", 4)]),  # and a blank line after
    ([A1[:30], A1[30:] + A2 + b" ", A4], [("malformed", 2), ("malformed", 3)]),  # one across two
])
def test_a_line_is_one_entry_as_pi_reads_it(tmp_path: Path, lines: list[bytes],
                                            problems: list[tuple[str, int]]) -> None:
    """msgspec reads a stream of values, pi one per line: a line holding two entries, or half
    of one, is damaged, whatever the values in it; the lines after keep their numbers."""
    snapshot = read_file(write_session(tmp_path / "s.jsonl", [header(), *lines]))
    assert kinds(snapshot.problems) == problems
    whole = [n for n, line in enumerate(lines, 2) if line in (A1, A4)]
    assert [r.line for r in snapshot.records] == whole
    assert snapshot.lines_read == len(lines) + 1


@pytest.mark.parametrize(
    "junk",
    [
        b'{"type":"custom","id":',
        b"this is not json",
        b'{"type":"custom","id":"zzzz0000"} trailing',
        b'{"type":"custom",}',
        b"{'type': 'custom'}",
        b'"unterminated',
    ],
)
def test_malformed_json_line_is_reported(tmp_path: Path, junk: bytes) -> None:
    path = write_session(tmp_path / "s.jsonl",
                         [header(), custom("aaaa0001"), junk, custom("aaaa0002", "aaaa0001")])
    tree = SessionTree.open(path)
    assert kinds(tree.problems) == [("malformed", 3)]
    assert record_ids(tree) == ["aaaa0001", "aaaa0002"]


@pytest.mark.parametrize("junk", [b"[1,2", b'[{"type":"custom"', b"[", b"[1,]"])
def test_malformed_json_that_opens_an_array_is_malformed_not_non_object(
    tmp_path: Path, junk: bytes
) -> None:
    """Invalid JSON is "malformed" whatever its first character; "not-object" means valid JSON."""
    path = write_session(tmp_path / "s.jsonl",
                         [header(), custom("aaaa0001"), junk, custom("aaaa0002", "aaaa0001")])
    snapshot = read_file(path)
    assert kinds(snapshot.problems) == [("malformed", 3)]
    assert [r.env.id for r in snapshot.records] == ["aaaa0001", "aaaa0002"]


@pytest.mark.parametrize("junk", [
    b'{"type":"message","id":true,"timestamp":"2026-01-01T00:01:20.021Z",',  # cut short
    b'{"type":"custom","id":true} trailing',
    b'{"type":5,"id":"zzzz0000"}{',
])
def test_a_field_of_the_wrong_type_before_the_json_breaks_is_malformed(
        tmp_path: Path, junk: bytes) -> None:
    """msgspec.DecodeError escaped the read, on open, refresh and a torn last line: `Envelope`
    stopped at the wrong-type field, and the loose decode after it found the JSON broken."""
    path = write_session(tmp_path / "s.jsonl",
                         [junk, header(), custom("aaaa0001"), junk, custom("aaaa0002", "aaaa0001")])
    tree = SessionTree.open(path)
    assert kinds(tree.problems) == [("malformed", 1), ("malformed", 4)]
    assert record_ids(tree) == ["aaaa0001", "aaaa0002"]
    with open(path, "ab") as handle:
        handle.write(junk + b"\n" + custom("aaaa0003", "aaaa0002") + b"\n" + junk)
    assert tree.refresh() == Refresh(1, False)
    assert kinds(tree.problems)[2:] == [("malformed", 6)]
    assert kinds(SessionTree.open(path).problems)[-1] == ("torn", 8)


def test_a_line_whose_reread_fails_validation_is_an_invalid_entry(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """_classify caught the re-read's DecodeError, which a ValidationError is too, and then
    read the value it never got: UnboundLocalError (dadc248's 4,301-digit integer did it)."""
    class Refusing:
        def decode(self, raw: bytes) -> Any:
            raise msgspec.ValidationError("Integer value out of range")

    monkeypatch.setattr(journal, "value_decoder", Refusing())
    path = write_session(tmp_path / "s.jsonl", [b'{"type":"custom","id":true}', header()])
    assert kinds(read_file(path).problems) == [("invalid-entry", 1)]


@pytest.mark.parametrize("junk", [b"null", b"false", b"0", b"-0.0", b'""'])
def test_non_object_json_line_is_reported(tmp_path: Path, junk: bytes) -> None:
    """pi 1.6 skips a line JavaScript takes as false."""
    path = write_session(tmp_path / "s.jsonl",
                         [header(), custom("aaaa0001"), junk, custom("aaaa0002", "aaaa0001")])
    tree = SessionTree.open(path)
    assert kinds(tree.problems) == [("not-object", 3)]
    assert record_ids(tree) == ["aaaa0001", "aaaa0002"]
    assert tree.idless == []


@pytest.mark.parametrize("junk", [b"[1,2]", b'"x"', b"42", b"true", b"[]"])
def test_a_true_non_object_line_is_an_idless_entry(tmp_path: Path, junk: bytes) -> None:
    """A line that is JSON but no object was skipped; pi 1.6 keeps one JavaScript takes as
    true as an entry with no id (last, it is the leaf)."""
    path = write_session(tmp_path / "s.jsonl",
                         [header(), custom("aaaa0001"), junk, custom("aaaa0002", "aaaa0001")])
    tree = SessionTree.open(path)
    assert kinds(tree.problems) == [("non-object-entry", 3), ("no-id", 3)]
    assert record_ids(tree) == ["aaaa0001", "aaaa0002"]
    assert [record.raw for record in tree.idless] == [junk]
    assert decode_entry(tree.idless[0]) is None  # an entry of no type


@pytest.mark.parametrize("junk", [b"1e999", b"[1e999]", b'"\\ud800"', b'["\\udc00"]'])
def test_a_true_non_object_line_msgspec_refuses_is_an_idless_entry(
        tmp_path: Path, junk: bytes) -> None:
    """A number past a double's range or a lone surrogate escape was skipped as malformed:
    JSON.parse reads it (Infinity, the one code unit), so pi 1.6 keeps the line as an entry."""
    path = write_session(tmp_path / "s.jsonl",
                         [header(), custom("aaaa0001"), junk, custom("aaaa0002", "aaaa0001")])
    tree = SessionTree.open(path)
    assert kinds(tree.problems) == [("non-object-entry", 3), ("no-id", 3)]
    assert [record.raw for record in tree.idless] == [junk]


def test_a_key_with_a_lone_surrogate_is_an_unknown_field(tmp_path: Path) -> None:
    """msgspec could not match such a key to a field: the entry was read as a line of no
    type and no id, and in a version 1 file with a `type` not text it raised from the upgrade."""
    odd = custom("aaaa0002", "aaaa0001").replace(b'"customType"', b'"\\ud83d":1,"customType"')
    path = write_session(tmp_path / "s.jsonl", [header(), custom("aaaa0001"), odd])
    tree = SessionTree.open(path)
    assert tree.problems == [] and tree.leaf_id == "aaaa0002"
    assert tree.record("aaaa0002").raw == odd and decode_entry(tree.record("aaaa0002"))
    v1 = write_session(tmp_path / "v1.jsonl", [header(version=None),
                                               dumps({"type": 5}).replace(b"{", b'{"\\ud83d":1,')])
    assert kinds(SessionTree.open(v1).problems) == [("off-type-envelope", 2)]


# pi 1.6's reading of a reply whose content block and usage each hold such a key: its text and
# input tokens (pi.SessionManager's context; checked where installed).
PI16_NESTED_KEY_REPLY = '["yo",1]'


def test_a_key_with_a_lone_surrogate_within_a_message_is_an_unknown_field(
        tmp_path: Path) -> None:
    """Only a top-level key was left out: one in a content block or usage made the message
    one pi-lsp cannot read (decode_entry gave None), where pi 1.6 reads its reply."""
    reply = {"role": "assistant", "content": [{"type": "text", "text": "yo", "KEY": 1}],
             "api": "anthropic-messages", "provider": "anthropic", "model": "m",
             "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0,
                       "totalTokens": 2, "KEY": 2, "cost": {"input": 0, "output": 0,
                                                            "cacheRead": 0, "cacheWrite": 0,
                                                            "total": 0, "KEY": 3}},
             "stopReason": "stop", "timestamp": 2}
    line = dumps({"type": "message", "id": "aaaa0002", "parentId": "aaaa0001",
                  "timestamp": TS, "message": reply}).replace(b"KEY", b"\\ud800x")
    path = write_session(tmp_path / "s.jsonl", [header(), custom("aaaa0001"), line])
    entry = decode_entry(SessionTree.open(path).record("aaaa0002"))
    assert isinstance(entry, MessageEntry)
    message = entry.message
    assert [message.content[0].text, message.usage.input] == json.loads(PI16_NESTED_KEY_REPLY)
    if pi16_node() is not None:
        assert pi16_eval(f"const s = pi.SessionManager.open({json.dumps(path)});"
                         "const m = s.buildSessionContext().messages.at(-1);"
                         "process.stdout.write(JSON.stringify([m.content[0].text, "
                         "m.usage.input]));") == PI16_NESTED_KEY_REPLY


@pytest.mark.parametrize("entry_id", [{}, {"id": 5}])
def test_an_idless_name_or_label_with_a_lone_surrogate_key_counts(
        tmp_path: Path, entry_id: dict[str, Any]) -> None:
    """Read again with an empty id, the entry was dropped (msgspec raised on the key): no
    label and no name, where pi 1.6 shows both."""
    odd = {"parentId": "aaaa0001", "KEY": 1, "timestamp": TS, **entry_id}
    label = dumps({"type": "label", **odd, "targetId": "aaaa0001", "label": "M"})
    info = dumps({"type": "session_info", **odd, "name": "N"})
    lines = [header(), custom("aaaa0001"), *(line.replace(b"KEY", b"\\udc00x")
                                             for line in (label, info)),
             custom("aaaa0002", "aaaa0001")]
    tree = SessionTree.open(write_session(tmp_path / "s.jsonl", lines))
    assert (tree.labels, tree.name, tree.leaf_id) == ({"aaaa0001": "M"}, "N", "aaaa0002")


def test_torn_last_line_is_reported_and_not_consumed(tmp_path: Path) -> None:
    torn = b'{"type":"custom","customType":"test","id":"aaaa00'
    path = write_session(tmp_path / "s.jsonl", [header(), custom("aaaa0001"), torn],
                         final_eol=False)
    size = os.path.getsize(path)
    snapshot = read_file(path)
    assert kinds(snapshot.problems) == [("torn", 3)]
    assert [r.env.id for r in snapshot.records] == ["aaaa0001"]
    # The next read starts at the torn line, so it is read again once it is finished.
    assert snapshot.offset == size - len(torn)
    assert SessionTree.open(path).leaf_id == "aaaa0001"


def test_valid_last_line_without_newline_is_an_entry(tmp_path: Path) -> None:
    path = write_session(tmp_path / "s.jsonl",
                         [header(), custom("aaaa0001"), custom("aaaa0002", "aaaa0001")],
                         final_eol=False)
    snapshot = read_file(path)
    assert snapshot.problems == []
    assert [(r.line, r.env.id) for r in snapshot.records] == [(2, "aaaa0001"), (3, "aaaa0002")]
    assert snapshot.offset == os.path.getsize(path)
    assert SessionTree.open(path).leaf_id == "aaaa0002"


@pytest.mark.parametrize("last", [b"42", b'"x"', b"[1]"])
def test_a_true_non_object_last_line_without_newline_is_the_idless_leaf(
        tmp_path: Path, last: bytes) -> None:
    """It was dropped as torn (its non-object-entry report taken for a line that does not
    parse); pi 1.6 reads the line it has so far as its id-less leaf."""
    path = write_session(tmp_path / "s.jsonl", [header(), custom("aaaa0001"), last],
                         final_eol=False)
    snapshot = read_file(path)
    assert kinds(snapshot.problems) == [("non-object-entry", 3)]
    assert snapshot.offset == os.path.getsize(path) and snapshot.unterminated
    tree = SessionTree.open(path)
    assert [record.raw for record in tree.idless] == [last]
    assert tree.idless_leaf is tree.idless[0]


def test_header_only_file_without_newline_is_an_empty_session(tmp_path: Path) -> None:
    """The header is the first line that parses; a missing final newline does not hide it."""
    path = write_session(tmp_path / "s.jsonl", [header()], final_eol=False)
    snapshot = read_file(path)
    assert snapshot.header.id == SESSION_ID
    assert snapshot.records == []
    assert snapshot.problems == []


def test_append_after_valid_unterminated_last_line_reports_nothing(tmp_path: Path) -> None:
    """The newline the appender adds ends the last line; it is not a blank line of its own."""
    path = write_session(tmp_path / "s.jsonl", [header(), custom("aaaa0001")], final_eol=False)
    tree = SessionTree.open(path)
    new_id = tree.append_custom("k", {"i": 1})
    assert tree.leaf_id == new_id
    assert [(r.line, r.env.id) for r in tree.records] == [(2, "aaaa0001"), (3, new_id)]
    assert tree.problems == []
    assert SessionTree.open(path).problems == []


@pytest.mark.parametrize("pieces", [1, 2], ids=["whole", "in-two-writes"])
def test_a_line_appended_straight_after_an_unterminated_one_is_read_as_pi_reads_it(
        tmp_path: Path, pieces: int) -> None:
    """pi 0.73 appends its next line with no newline before it: the two are one line that
    does not parse, so the entry taken from the unterminated line is gone, in the live view as
    in a fresh read, and nothing is appended under it."""
    path = write_session(tmp_path / "s.jsonl", [header(), custom("aaaa0001"),
                                                custom("aaaa0002", "aaaa0001")], final_eol=False)
    tree = SessionTree.open(path)
    assert tree.leaf_id == "aaaa0002"
    line = custom("bbbb0003", "aaaa0002") + b"\n"
    for piece in (line[:20], line[20:]) if pieces == 2 else (line,):
        with open(path, "ab") as handle:
            handle.write(piece)
        tree.refresh()
        fresh = SessionTree.open(path)
        assert (record_ids(tree), tree.leaf_id, kinds(tree.problems)) == \
            (record_ids(fresh), fresh.leaf_id, kinds(fresh.problems))
    assert (record_ids(tree), tree.leaf_id) == (["aaaa0001"], "aaaa0001")
    assert kinds(tree.problems) == [("malformed", 3)]
    new_id = tree.append_custom("k", {"i": 1})
    assert SessionTree.open(path).path_ids(new_id) == ["aaaa0001", new_id]


def test_tail_reads_again_a_last_line_extended_without_a_newline(tmp_path: Path) -> None:
    path = write_session(tmp_path / "s.jsonl", [header(), custom("aaaa0001")], final_eol=False)
    tail = Tail.after(path, read_file(path))
    with open(path, "ab") as handle:
        handle.write(custom("aaaa0002", "aaaa0001") + b"\n")
    assert tail.poll().reset


def test_crlf_line_endings_load_and_raw_drops_the_cr(tmp_path: Path) -> None:
    lines = [header(), custom("aaaa0001"), custom("aaaa0002", "aaaa0001")]
    path = write_session(tmp_path / "s.jsonl", lines, eol=b"\r\n")
    tree = SessionTree.open(path)
    assert tree.problems == []
    assert tree.header.id == SESSION_ID
    assert tree.header_raw == lines[0]
    assert [r.raw for r in tree.records] == lines[1:]
    assert tree.leaf_id == "aaaa0002"
    assert tree.path_ids("aaaa0002") == ["aaaa0001", "aaaa0002"]


def test_crlf_blank_line_is_blank(tmp_path: Path) -> None:
    path = write_session(tmp_path / "s.jsonl", [header(), b"", custom("aaaa0001")], eol=b"\r\n")
    snapshot = read_file(path)
    assert kinds(snapshot.problems) == [("blank", 2)]
    assert [r.raw for r in snapshot.records] == [custom("aaaa0001")]


def test_leading_bom_is_ignored(tmp_path: Path) -> None:
    lines = [header(), custom("aaaa0001"), custom("aaaa0002", "aaaa0001")]
    path = write_session(tmp_path / "s.jsonl", lines, bom=True)
    tree = SessionTree.open(path)
    assert tree.problems == []
    assert tree.header.id == SESSION_ID
    assert tree.header_raw == lines[0]
    assert [(r.line, r.raw) for r in tree.records] == [(2, lines[1]), (3, lines[2])]
    # The tail still works on a file that starts with a BOM.
    with open(path, "ab") as handle:
        handle.write(custom("aaaa0003", "aaaa0002") + b"\n")
    assert tree.refresh() == Refresh(1, False)
    assert tree.leaf_id == "aaaa0003"


@pytest.mark.parametrize(
    "lines",
    [
        pytest.param([], id="empty"),
        pytest.param([b""], id="one-blank-line"),
        pytest.param([b"  ", b"garbage", b"[1]"], id="only-junk"),
        pytest.param([custom("aaaa0001"), header()], id="entry-before-header"),
        pytest.param([b'{"type":"message","id":"x"}'], id="first-object-not-header"),
        pytest.param([b'{"type":"session","timestamp":"' + TS.encode() + b'"}'],
                     id="header-without-id"),
        # pi 1.6 refuses it too: its header's id is not text (the header after it was taken).
        pytest.param([b'{"type":"session","id":5,"version":3}', header()],
                     id="first-header-id-not-text"),
    ],
)
def test_file_without_a_leading_header_is_not_a_session(
    tmp_path: Path, lines: list[bytes]
) -> None:
    path = tmp_path / "s.jsonl"
    if lines:
        write_session(path, lines)
    else:
        path.write_bytes(b"")
    with pytest.raises(NotASessionError):
        read_file(str(path))
    with pytest.raises(NotASessionError):
        SessionTree.open(str(path))


def test_a_header_with_a_text_id_and_an_odd_parent_id_is_read(tmp_path: Path) -> None:
    """pi 1.6 checks only a header's type and that its id is text: one with `"parentId": 5`
    opens, where pi-lsp refused the file ("its session header's id is not text")."""
    line = json.loads(header())
    path = write_session(tmp_path / "s.jsonl", [json.dumps({**line, "parentId": 5}).encode(),
                                                custom("aaaa0001")])
    tree = SessionTree.open(path)
    assert tree.header.id == SESSION_ID
    assert tree.leaf_id == "aaaa0001"
    assert kinds(tree.problems) == [("off-type-envelope", 1)]


def test_junk_before_the_header_is_reported_and_the_header_found(tmp_path: Path) -> None:
    path = write_session(tmp_path / "s.jsonl",
                         [b"garbage", b"", b"[1]", b"  ", header(), custom("aaaa0001")])
    tree = SessionTree.open(path)
    assert kinds(tree.problems) == [("malformed", 1), ("blank", 2), ("not-object", 3),
                                    ("blank", 4)]
    assert tree.header.id == SESSION_ID
    assert [(r.line, r.env.id) for r in tree.records] == [(6, "aaaa0001")]


def test_duplicate_id_is_reported(tmp_path: Path) -> None:
    path = write_session(tmp_path / "s.jsonl", [
        header(), custom("aaaa0001"), custom("aaaa0002", "aaaa0001"),
        custom("aaaa0001", "aaaa0002"), custom("aaaa0003", "aaaa0001"),
    ])
    tree = SessionTree.open(path)
    duplicates = [p for p in tree.problems if p.kind == "duplicate-id"]
    assert [(p.line, p.entry_id) for p in duplicates] == [(4, "aaaa0001")]
    assert len(tree.problems) == 1
    assert {"aaaa0002", "aaaa0003"} <= set(tree.by_id)
    assert tree.leaf_id == "aaaa0003"


def test_entry_without_id_is_reported(tmp_path: Path) -> None:
    path = write_session(tmp_path / "s.jsonl",
                         [header(), custom("aaaa0001"), custom(None, "aaaa0001"),
                          custom("aaaa0002", "aaaa0001")])
    tree = SessionTree.open(path)
    assert kinds(tree.problems) == [("no-id", 3)]
    assert record_ids(tree) == ["aaaa0001", "aaaa0002"]
    assert tree.leaf_id == "aaaa0002"


@pytest.mark.parametrize("leaf_id", [5, True, {"a": 1}, [1]], ids=["5", "true", "object", "list"])
def test_an_append_under_a_leaf_whose_id_is_no_text_is_refused(
        tmp_path: Path, leaf_id: Any) -> None:
    """The last line's id was a number (or another value JavaScript takes as true): pi's leaf
    is that value and pi appends under it (`"parentId":5`), but pi-lsp wrote `"parentId":null`,
    a new root, so the next turn lost the conversation. pi-lsp cannot name such a parent: it
    refuses, naming the line, and writes nothing; moved to another entry, it appends there."""
    last = dumps({"type": "custom", "customType": "test", "id": leaf_id,
                  "parentId": "aaaa0001", "timestamp": TS})
    path = write_session(tmp_path / "s.jsonl", [header(), custom("aaaa0001"), last])
    before = Path(path).read_bytes()
    tree = SessionTree.open(path)
    for append in (lambda: tree.append_label("aaaa0001", "L"),
                   lambda: tree.append_custom("test"),
                   lambda: tree.append_session_info("name")):
        with pytest.raises(WriteFailedError, match=r"leaf \(line 3\) .*not text"):
            append()
    assert Path(path).read_bytes() == before
    tree.branch("aaaa0001")
    written = tree.append_custom("test")
    assert json.loads(Path(path).read_bytes().splitlines()[-1])["parentId"] == "aaaa0001"
    assert tree.leaf_id == written


# The last line's id, and the parentId pi 1.6 writes under it (tests/pi16_append.mjs): its
# leafId as the line holds it, no key where it has none.
IDLESS_PARENTS = [(0, 0), (False, False), (None, None), (MISSING, MISSING)]


def idless_leaf_session(directory: Path, leaf_id: Any) -> str:
    fields = {"type": "custom", "customType": "test", "id": leaf_id, "parentId": "aaaa0001",
              "timestamp": TS}
    last = dumps({key: value for key, value in fields.items() if value is not MISSING})
    return write_session(directory / "s.jsonl", [header(), custom("aaaa0001"), last])


@pytest.mark.parametrize(("leaf_id", "parent"), IDLESS_PARENTS,
                         ids=["0", "false", "null", "none"])
def test_an_append_under_a_leaf_whose_id_pi_reads_as_no_parent_starts_a_root(
        tmp_path: Path, leaf_id: Any, parent: Any) -> None:
    """A last line whose id is missing, null or false-like: pi writes the next entry with that
    parentId (or none), which every reader takes as a root; so does pi-lsp. It wrote
    `"parentId":null` under each (pi: 0, false, null, no key)."""
    path = idless_leaf_session(tmp_path, leaf_id)
    SessionTree.open(path).append_custom("test")
    written = json.loads(Path(path).read_bytes().splitlines()[-1])
    assert written.get("parentId", MISSING) == parent
    assert type(written.get("parentId", MISSING)) is type(parent)
    tree = SessionTree.open(path)
    assert (tree.leaf_id, tree.path_ids(tree.leaf_id)) == (written["id"], [written["id"]])


def test_the_stored_idless_parents_are_pi16s(tmp_path: Path) -> None:
    node = pi16_node()
    if node is None:
        pytest.skip("pi 1.6 is not installed")
    files = []
    for index, (leaf_id, _) in enumerate(IDLESS_PARENTS):
        (tmp_path / str(index)).mkdir()
        files.append(idless_leaf_session(tmp_path / str(index), leaf_id))
    made = subprocess.run([node, str(Path(__file__).with_name("pi16_append.mjs")),
                           str(PI16 / "@earendil-works"), *files],
                          capture_output=True, text=True, timeout=PROCESS_CEILING_S)
    assert made.returncode == 0, made.stderr
    lines = json.loads(made.stdout)
    assert [json.loads(lines[file]).get("parentId", MISSING) for file in files] == \
        [parent for _, parent in IDLESS_PARENTS]


# A last line's id written as a zero number other than 0, and the parentId text pi 1.6 writes
# under it (tests/pi16_append.mjs): JSON.stringify's, 0 for each.
ZERO_IDS = {"0.0": "0", "-0.0": "0", "0e5": "0", "0E-3": "0"}


def zero_id_session(directory: Path, text: str) -> str:
    last = dumps({"type": "custom", "customType": "test", "id": 0, "parentId": "aaaa0001",
                  "timestamp": TS}).replace(b'"id":0', b'"id":' + text.encode())
    return write_session(directory / "s.jsonl", [header(), custom("aaaa0001"), last])


def written_parent(line: bytes) -> bytes:
    """The parentId's text in a line pi or pi-lsp wrote."""
    found = re.search(rb'"parentId":([^,]*),', line)
    assert found is not None
    return found.group(1)


@pytest.mark.parametrize("text", ZERO_IDS)
def test_a_zero_id_is_written_as_a_parent_as_json_stringify_writes_it(
        tmp_path: Path, text: str) -> None:
    """Under a last line whose id is 0.0, -0.0, 0e5 or 0E-3, pi-lsp wrote "parentId":0.0 or
    -0.0; pi 1.6 writes its leafId through JSON.stringify: 0."""
    path = zero_id_session(tmp_path, text)
    SessionTree.open(path).append_custom("test")
    assert written_parent(Path(path).read_bytes().splitlines()[-1]) == ZERO_IDS[text].encode()


def test_the_stored_zero_id_parents_are_pi16s(tmp_path: Path) -> None:
    node = pi16_node()
    if node is None:
        pytest.skip("pi 1.6 is not installed")
    files = []
    for index, text in enumerate(ZERO_IDS):
        (tmp_path / str(index)).mkdir()
        files.append(zero_id_session(tmp_path / str(index), text))
    made = subprocess.run([node, str(Path(__file__).with_name("pi16_append.mjs")),
                           str(PI16 / "@earendil-works"), *files],
                          capture_output=True, text=True, timeout=PROCESS_CEILING_S)
    assert made.returncode == 0, made.stderr
    lines = json.loads(made.stdout)
    assert [written_parent(lines[file].encode()).decode() for file in files] == \
        list(ZERO_IDS.values())


# Hand-edited sessions whose envelopes pi 1.6 reads leniently, and what it made of each
# (tests/pi16_session.mjs), for machines without it.
ODD_ENVELOPES = Path(__file__).with_name("fixtures") / "pi16-odd-envelopes"
STORED_ODD_ENVELOPES = ODD_ENVELOPES.with_suffix(".json")


def test_the_stored_odd_envelope_readings_are_pi16s() -> None:
    node = pi16_node()
    if node is None:
        pytest.skip("pi 1.6 is not installed")
    files = sorted(ODD_ENVELOPES.glob("*.jsonl"))
    made = subprocess.run([node, str(Path(__file__).with_name("pi16_session.mjs")),
                           str(PI16 / "@earendil-works"), *map(str, files)],
                          capture_output=True, text=True, timeout=PROCESS_CEILING_S)
    assert made.returncode == 0, made.stderr
    readings = json.loads(made.stdout)
    assert {path.name: readings[str(path)] for path in files} == \
        json.loads(STORED_ODD_ENVELOPES.read_text("utf-8"))


@pytest.mark.parametrize("name", sorted(json.loads(STORED_ODD_ENVELOPES.read_text("utf-8"))))
def test_an_odd_envelope_is_read_as_pi16_reads_it(name: str) -> None:
    """Entries with no `parentId` key, an off-type `type`, `id` or `parentId`, or no id were
    dropped (a compaction, a model, a name lost; the path cut short); pi 1.6 keeps them."""
    assert_read_as_pi16(SessionTree.open(str(ODD_ENVELOPES / name)), name)


def assert_read_as_pi16(tree: SessionTree, name: str) -> None:
    """`tree` has the leaf, name, labels, model, thinking level and context pi 1.6 read from
    the odd-envelope fixture `name`."""
    from pi_lsp.context.layers import build_layer

    pi = json.loads(STORED_ODD_ENVELOPES.read_text("utf-8"))[name]
    # pi16_session.mjs lists the labels of the file's entries (getLabel of each), as pi's
    # getTree shows them: a label on an entry not in the file is held by both, shown by neither.
    labels = {entry_id: label for entry_id, label in tree.labels.items() if entry_id in tree.by_id}
    assert (tree.leaf_id, tree.name, labels) == (pi["leafId"], pi["name"], pi["labels"])
    for layer in ("agent", "llm"):
        built = build_layer(tree, tree.leaf_id, layer)
        assert (msgspec.to_builtins(built.model), built.thinking_level) == \
            (pi["model"], pi["thinkingLevel"])
        assert [json.loads(bytes(row.message)) for row in built.rows] == pi[layer]


# Sessions with id-less lines that pi 1.6 counts (a name, a label, the leaf).
IDLESS_FIXTURES = ["noid-leaf.jsonl", "noid-name.jsonl", "nonobject-leaf.jsonl",
                   "odd-ids.jsonl"]


@pytest.mark.parametrize("name", IDLESS_FIXTURES)
def test_a_relocated_session_keeps_its_idless_lines(tmp_path: Path, name: str) -> None:
    """A relocation wrote only entries with an id: an id-less name, label or last line
    vanished from the new file (name None, labels {}), so pi read it differently."""
    source = ODD_ENVELOPES / name
    path = tmp_path / name
    path.write_bytes(source.read_bytes())
    tree = SessionTree.open(str(path))
    tree.hold_leaf = True  # a running turn moves away from a replaced file
    os.replace(write_session(tmp_path / "other.jsonl", [header()]), path)
    assert tree.refresh().relocated_from == str(path)
    moved = Path(tree.path).read_bytes().splitlines()
    assert moved[1:] == source.read_bytes().splitlines()[1:]
    assert_read_as_pi16(tree, name)
    assert_read_as_pi16(SessionTree.open(tree.path), name)


def test_a_relocated_session_keeps_the_lines_it_skipped(tmp_path: Path) -> None:
    """A relocation wrote only the lines it read as entries: a blank, malformed or too-deep
    line, a second header, `null` or `42` was lost for good once the file was replaced, though
    pi 1.6 reads the too-deep `custom` entry and the `42`."""
    deep = custom("aaaa0002", "aaaa0001", data=json.loads("[" * 205 + "]" * 205))
    lines = [header(), custom("aaaa0001"), b"", b'{"type":', deep, header(OTHER_SESSION_ID),
             b"null", custom("aaaa0003", "aaaa0001"), b"42"]
    path = write_session(tmp_path / "s.jsonl", lines)
    tree = SessionTree.open(path)
    tree.hold_leaf = True  # a running turn moves away from a replaced file
    os.replace(write_session(tmp_path / "other.jsonl", [header()]), path)
    assert tree.refresh().relocated_from == path
    assert Path(tree.path).read_bytes().splitlines()[1:] == lines[1:]


def test_a_relocated_session_keeps_lines_skipped_before_the_header_before_it(
        tmp_path: Path) -> None:
    """A `42` skipped before the header was written after the new header, where it is an
    id-less entry: the relocated turn's id-less leaf moved to it."""
    lines = [b"42", b"", header(), custom("aaaa0001"), custom(None, "aaaa0001")]
    path = write_session(tmp_path / "s.jsonl", lines)
    tree = SessionTree.open(path)
    tree.hold_leaf = True  # a running turn moves away from a replaced file
    os.replace(write_session(tmp_path / "other.jsonl", [header()]), path)
    assert tree.refresh().relocated_from == path
    copy = Path(tree.path).read_bytes().splitlines()
    assert copy[:2] + copy[3:] == lines[:2] + lines[3:]
    assert [record.raw for record in tree.idless] == [lines[-1]]
    assert tree.idless_leaf is tree.idless[0]


def test_a_relocated_turn_keeps_its_idless_leaf(tmp_path: Path) -> None:
    """A turn's leaf was an id-less last line when another writer appended and the file
    was then replaced: the new file's last entry is that writer's, so the relocated turn was
    left with no leaf and no context."""
    path = tmp_path / "s.jsonl"
    path.write_bytes((ODD_ENVELOPES / "noid-leaf.jsonl").read_bytes())
    tree = SessionTree.open(str(path))
    context = tree.path_ids(None)
    tree.hold_leaf = True
    append_lines(str(path), [custom("bbbb0001")])
    assert tree.refresh().added == 1 and tree.path_ids(None) == context
    os.replace(write_session(tmp_path / "other.jsonl", [header()]), path)
    assert tree.refresh().relocated_from == str(path)
    assert (tree.leaf_id, tree.path_ids(None)) == (None, context)


def test_unknown_types_and_fields_keep_their_exact_bytes(tmp_path: Path) -> None:
    unknown_type = (b'{"type":"future_thing",  "id":"aaaa0002", "parentId":"aaaa0001",'
                    b'"timestamp":"' + TS.encode() + b'","x":{"n":[1,2.50,1e3]},'
                    + '"\u00e9":"\u00fc \\u00fc"}'.encode())
    unknown_field = (b'{"type":"custom","customType":"test","id":"aaaa0003",'
                     b'"parentId":"aaaa0002","timestamp":"' + TS.encode() + b'",'
                     b'"zFuture":{"deep":[null,true]},"data":{"k":  "v"}}')
    lines = [header(extraHeaderField={"a": 1}), custom("aaaa0001"), unknown_type, unknown_field]
    path = write_session(tmp_path / "s.jsonl", lines)
    tree = SessionTree.open(path)
    assert tree.problems == []
    assert tree.header_raw == lines[0]
    assert [r.raw for r in tree.records] == lines[1:]
    assert tree.record("aaaa0002").env.type == "future_thing"
    assert tree.path_ids("aaaa0003") == ["aaaa0001", "aaaa0002", "aaaa0003"]
    assert tree.leaf_id == "aaaa0003"


def test_unicode_line_separators_do_not_split_lines(tmp_path: Path) -> None:
    odd = custom("aaaa0002", "aaaa0001", data={"text": "a\u2028b\u2029c\x0bd\x0ce\x85f"})
    assert "\u2028".encode() in odd
    path = write_session(tmp_path / "s.jsonl", [header(), custom("aaaa0001"), odd])
    tree = SessionTree.open(path)
    assert tree.problems == []
    assert [(r.line, r.raw) for r in tree.records] == [(2, custom("aaaa0001")), (3, odd)]


def test_reading_a_large_file_holds_little_beside_what_it_keeps(tmp_path: Path) -> None:
    """Each 8 MB piece read was held three times over while it was decoded: reading a 17 MB
    session peaked 25 MB above the records it kept (`context --json` on 73 MB: 162 MB)."""
    lines = [custom(f"{i:08x}", f"{i - 1:08x}" if i else None, data="x" * 1000)
             for i in range(16000)]
    path = write_session(tmp_path / "large.jsonl", [header(), *lines])
    tracemalloc.start()
    try:
        snapshot = read_file(path)
        kept, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(snapshot.records) == 16000
    assert peak - kept < 12 << 20


@pytest.mark.parametrize("opener", [b"[", b'{"a":'])
@pytest.mark.parametrize(("levels", "deep"), [(200, False), (201, True)])
def test_a_line_nested_past_the_limit_among_sound_ones_is_too_deep(
        tmp_path: Path, opener: bytes, levels: int, deep: bool) -> None:
    """Nesting is judged per line among many read at once: one level past the limit, in
    arrays or objects, is too deep, and the limit itself is read."""
    closer = b"]" if opener == b"[" else b"}"
    nested = b'{"type":"custom","customType":"test","id":"aaaa0002","parentId":"aaaa0001",' \
        b'"data":' + opener * (levels - 1) + b"0" + closer * (levels - 1) + b"}"
    path = write_session(tmp_path / "s.jsonl", [header(), custom("aaaa0001"), nested,
                                                custom("aaaa0003", "aaaa0001")])
    tree = SessionTree.open(path)
    assert kinds(tree.problems) == ([("too-deep", 3)] if deep else [])
    assert record_ids(tree) == ["aaaa0001", *([] if deep else ["aaaa0002"]), "aaaa0003"]


@pytest.mark.parametrize("damage", [b'"bad":"\xe4\xb8",', b'"deep":' + b"[" * 201 + b"]" * 201
                                    + b",", b"crlf"])
def test_damage_in_a_line_begun_in_an_earlier_piece_is_found(
        tmp_path: Path, damage: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    """A line read across pieces is split off whole from the last one: bytes that are not
    UTF-8, nesting too deep or a CR ending it are found all the same, as in a line alone."""
    line = custom("aaaa0002", "aaaa0001", data="y" * 300)
    if damage != b"crlf":
        line = line.replace(b'"data"', damage + b'"data"')
    monkeypatch.setattr(journal, "READ_CHUNK", 64)
    path = write_session(tmp_path / "s.jsonl", [header(), custom("aaaa0001"), line],
                         eol=b"\r\n" if damage == b"crlf" else b"\n")
    expected = read_lines_one_by_one(path)
    tree = SessionTree.open(path)
    assert kinds(tree.problems) == kinds(expected.problems)
    assert [r.raw for r in tree.records] == [r.raw for r in expected.records]


def read_lines_one_by_one(path: str) -> LineBatch:
    """What the careful path reads from the file's lines, each looked at alone."""
    batch = LineBatch()
    parse_lines(Path(path).read_bytes().split(b"\n")[:-1], 1, batch)
    return batch


def test_problems_past_the_cap_of_a_kind_are_counted_across_reads(tmp_path: Path) -> None:
    """Each damaged line held a problem of its own: 2M blank lines, 2M problems; those past
    PROBLEMS_PER_KIND of a kind are now counted by one, kept as lines are appended."""
    path = write_session(tmp_path / "s.jsonl", [header(), *[b""] * (PROBLEMS_PER_KIND + 10)])
    tree = SessionTree.open(path)
    assert kinds(tree.problems[-1:]) == [("blank", PROBLEMS_PER_KIND + 2)]
    with open(path, "ab") as handle:
        handle.write(b"\n" * (PROBLEMS_PER_KIND + 5) + b"x\n")
    assert tree.refresh().added == 0
    assert len(tree.problems) == PROBLEMS_PER_KIND + 2
    summary = tree.problems[-2]
    assert (summary.kind, summary.line, summary.more) == \
        ("blank", PROBLEMS_PER_KIND + 2, PROBLEMS_PER_KIND + 15)
    assert problem_count(tree.problems) == 2 * PROBLEMS_PER_KIND + 16
    assert kinds(tree.problems[-1:]) == [("malformed", 2 * PROBLEMS_PER_KIND + 17)]


def test_tree_problems_of_idless_lines_kept_as_bytes_are_in_line_order(tmp_path: Path) -> None:
    """The no-id problems of id-less lines kept as bytes came after every problem of the
    entries read as records (an id-less label, a duplicate id): out of line order."""
    label = dumps({"type": "label", "parentId": "aaaa0001", "timestamp": TS,
                   "targetId": "aaaa0001", "label": "x"})
    path = write_session(tmp_path / "s.jsonl", [
        header(), custom("aaaa0001"), custom(None, "aaaa0001"), label, custom("aaaa0001"),
        custom(None, "aaaa0001")])
    assert kinds(SessionTree.open(path).problems) == \
        [("no-id", 3), ("no-id", 4), ("duplicate-id", 5), ("no-id", 6)]


def test_the_first_no_id_problems_by_line_are_listed(tmp_path: Path) -> None:
    """An id-less message (read as a record) after PROBLEMS_PER_KIND + 100 id-less lines kept
    as bytes was listed, after a summary of all from line 1,003 on as not listed."""
    message = dumps({"type": "message", "parentId": "aaaa0001", "timestamp": TS,
                     "message": {"role": "user", "content": "x", "timestamp": 1}})
    idless = [custom(None, "aaaa0001")] * (PROBLEMS_PER_KIND + 100)
    path = write_session(tmp_path / "s.jsonl", [header(), custom("aaaa0001"), *idless, message])
    problems = SessionTree.open(path).problems
    summary = PROBLEMS_PER_KIND + 3
    assert kinds(problems) == [("no-id", line) for line in range(3, summary + 1)]
    assert problems[-1].more == 101


def open_traced(path: str) -> tuple[SessionTree, int, int]:
    """The session at `path` opened, with the memory it keeps and its peak (tracemalloc)."""
    tracemalloc.start()
    try:
        tree = SessionTree.open(path)
        kept, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return tree, kept, peak


@pytest.mark.parametrize("line", [b"", b"{oops"])
def test_many_hostile_lines_cost_little_memory(tmp_path: Path, line: bytes) -> None:
    """A file of a header and 400,000 blank or malformed lines kept 30 or 45 MB once open
    (a SkippedLine each; 60 and 125 MB with a Problem each): a cloned repository's file could
    eat the editor's memory. Skipped lines are packed now, ~17 bytes each beside their own."""
    path = write_session(tmp_path / "s.jsonl", [header(), *[line] * 400_000])
    tree, kept, peak = open_traced(path)
    assert len(tree.skipped) == 400_000
    assert kept < 16 << 20 and peak < 40 << 20


def test_a_relocation_writes_many_skipped_lines_byte_for_byte(tmp_path: Path) -> None:
    """Packed skipped lines are written again as they were, before the header or after."""
    lines = [b"", b"\xff", header(), *[b"", b"{oops", b" \t", b"[[", b"\xff{"] * 500,
             custom("aaaa0001"), b"null"]
    path = write_session(tmp_path / "s.jsonl", lines)
    tree = SessionTree.open(path)
    tree.hold_leaf = True  # a running turn moves away from a replaced file
    os.replace(write_session(tmp_path / "other.jsonl", [header()]), path)
    assert tree.refresh().relocated_from == path
    copy = Path(tree.path).read_bytes().split(b"\n")
    assert copy[:2] + copy[3:] == [*lines[:2], *lines[3:], b""]


@pytest.mark.parametrize("line", [b"42", b"{}", b'{"type":"x"}'])
def test_many_idless_entries_cost_little_memory(tmp_path: Path, line: bytes) -> None:
    """A file of a header and 100,000 id-less lines (`42`, `{}`, an unknown type) kept 35 MB
    or more once open: a Record, an Envelope and two Problems each, though only the last can
    matter (pi's leaf). They are kept as bytes now, the leaf as a record."""
    path = write_session(tmp_path / "s.jsonl", [header(), custom("aaaa0001"),
                                                *[line] * 100_000])
    tree, kept, peak = open_traced(path)
    assert (tree.leaf_id, tree.idless_leaf and tree.idless_leaf.line) == (None, 100_002)
    assert problem_count(tree.problems) >= 100_000
    assert kept < 12 << 20 and peak < 48 << 20


def test_a_relocated_turn_keeps_an_idless_leaf_among_many_idless_lines(tmp_path: Path) -> None:
    """Id-less lines kept as bytes are written again as they were, and a running turn's id-less
    leaf, no longer the last line, is the same line of the new file."""
    leaf = b'{"type":"x","parentId":"aaaa0001"}'
    lines = [header(), custom("aaaa0001"), *[b"42", b"{}", b'"\xff"', b"[1]"] * 300, leaf]
    path = write_session(tmp_path / "s.jsonl", lines)
    tree = SessionTree.open(path)
    tree.hold_leaf = True  # a running turn: another writer's lines do not move its leaf
    with open(path, "ab") as handle:
        handle.write(b'{"type":"y"}\n')
    assert tree.refresh().added == 0 and tree.idless_leaf is not None
    assert (tree.idless_leaf.line, tree.idless_leaf.raw) == (len(lines), leaf)
    os.replace(write_session(tmp_path / "other.jsonl", [header()]), path)
    assert tree.refresh().relocated_from == path
    assert Path(tree.path).read_bytes().splitlines()[1:] == [*lines[1:], b'{"type":"y"}']
    assert tree.idless_leaf is not None and tree.idless_leaf.raw == leaf
    assert [entry.env.id for entry in tree.path_to(None)] == ["aaaa0001", None]


def test_a_relocated_idless_leaf_that_grows_too_long_leaves_pi_reading_the_new_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An id-less leaf holding raw U+2028 grows as written again (escaped, 3 bytes to 6): past
    MAX_LINE_BYTES the new file reads without it, and finding the leaf there raised
    StopIteration. The leaf is now the one pi reads from the new file, its last line."""
    monkeypatch.setattr(journal, "MAX_LINE_BYTES", 400)
    monkeypatch.setattr(journal, "READ_CHUNK", 64)  # (a line within one piece is never long)
    leaf = custom(None, "aaaa0001", data="\u2028" * 80)
    path = write_session(tmp_path / "s.jsonl", [header(), custom("aaaa0001"), leaf])
    tree = SessionTree.open(path)
    assert tree.idless_leaf is not None and tree.idless_leaf.raw == leaf
    tree.hold_leaf = True  # a running turn moves away from a replaced file
    os.replace(write_session(tmp_path / "other.jsonl", [header()]), path)
    assert tree.refresh().relocated_from == path
    assert [problem.kind for problem in tree.problems] == ["too-long"]
    assert (tree.leaf_id, tree.idless_leaf, tree.idless) == ("aaaa0001", None, [])


def test_a_relocated_turn_keeps_its_idless_leaf_after_a_line_that_grows_too_long(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The id-less leaf was found again by its place among the id-less entries: one before it
    dropped from the new file as too long moved the turn's leaf to the next id-less line."""
    monkeypatch.setattr(journal, "MAX_LINE_BYTES", 400)
    monkeypatch.setattr(journal, "READ_CHUNK", 64)  # (a line within one piece is never long)
    leaf = custom(None, "aaaa0001")
    lines = [header(), custom("aaaa0001"), custom(None, "aaaa0001", data="\u2028" * 80), leaf]
    path = write_session(tmp_path / "s.jsonl", lines)
    tree = SessionTree.open(path)
    tree.hold_leaf = True  # a running turn: another writer's lines do not move its leaf
    with open(path, "ab") as handle:
        handle.write(b'{"type":"y"}\n')
    assert tree.refresh().added == 0
    os.replace(write_session(tmp_path / "other.jsonl", [header()]), path)
    assert tree.refresh().relocated_from == path
    assert tree.idless_leaf is not None and (tree.idless_leaf.line, tree.idless_leaf.raw) == \
        (4, leaf)


def test_a_rewrite_of_many_idless_lines_holds_none_of_them_as_a_record(tmp_path: Path) -> None:
    """A repaired copy or a relocation of 100,000 `42` lines read each again as a record and
    listed every line before writing (16 MB at the peak, 4 s and 10 s): a rewrite now goes a
    line at a time into the one buffer written."""
    lines = [header(), *[b"42"] * 100_000]
    path = write_session(tmp_path / "s.jsonl", lines)
    tree = SessionTree.open(path)
    tracemalloc.start()
    try:
        repaired_copy(tree, str(tmp_path / "fixed.jsonl"))
        _, repairing = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        tree.hold_leaf = True  # a running turn moves away from a replaced file
        os.replace(write_session(tmp_path / "other.jsonl", [header()]), path)
        assert tree.refresh().relocated_from == path
        _, relocating = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (tmp_path / "fixed.jsonl").read_bytes() == b"\n".join(lines) + b"\n"
    assert Path(tree.path).read_bytes().splitlines()[1:] == lines[1:]
    assert tree.idless_leaf is not None and tree.idless_leaf.line == len(lines)
    assert repairing < 4 << 20 and relocating < 12 << 20


def test_a_new_session_holds_an_idless_line_it_takes_as_its_leaf(tmp_path: Path) -> None:
    """An id-less line a new session took (a fork's path ends in one) was held for writing but
    not in memory: it was neither in `idless` nor the leaf."""
    tree = SessionTree.create(str(tmp_path / "new.jsonl"), str(tmp_path), deferred=True)
    tree.take_lines([custom("aaaa0001"), b'{"type":"x","parentId":"aaaa0001"}'])
    assert [record.line for record in tree.idless] == [3]
    assert tree.idless_leaf is not None and tree.idless_leaf.env.parent_id == "aaaa0001"
    assert tree.leaf_id is None and tree.path_ids(None) == ["aaaa0001", None]


# -- the appender ----------------------------------------------------------------------------


def test_append_lines_terminates_a_torn_last_line_first(tmp_path: Path) -> None:
    torn = b'{"type":"custom","customType":"test","id":"aaaa00'
    path = write_session(tmp_path / "s.jsonl", [header(), custom("aaaa0001"), torn],
                         final_eol=False)
    before = Path(path).read_bytes()
    new = custom("aaaa0002", "aaaa0001")
    append_lines(path, [new])
    assert Path(path).read_bytes() == before + b"\n" + new + b"\n"
    snapshot = read_file(path)
    assert kinds(snapshot.problems) == [("malformed", 3)]
    assert [(r.line, r.raw) for r in snapshot.records] == [(2, custom("aaaa0001")), (4, new)]


def test_append_lines_adds_no_newline_after_a_complete_line(tmp_path: Path) -> None:
    path = base_session(tmp_path)
    before = Path(path).read_bytes()
    new = [custom("aaaa0003", "aaaa0002"), custom("aaaa0004", "aaaa0003")]
    append_lines(path, new)
    assert Path(path).read_bytes() == before + new[0] + b"\n" + new[1] + b"\n"


def test_tree_append_after_a_torn_line_is_its_own_entry(tmp_path: Path) -> None:
    torn = b'{"type":"custom","customType":"test","id":"aaaa00'
    path = write_session(tmp_path / "s.jsonl", [header(), custom("aaaa0001"), torn],
                         final_eol=False)
    tree = SessionTree.open(path)
    assert kinds(tree.problems) == [("torn", 3)]
    new_id = tree.append_custom("k", {"i": 1})
    assert tree.leaf_id == new_id
    assert tree.record(new_id).line == 4
    assert json.loads(tree.record(new_id).raw)["parentId"] == "aaaa0001"
    assert ("malformed", 3) in kinds(tree.problems)
    reopened = SessionTree.open(path)
    assert kinds(reopened.problems) == [("malformed", 3)]
    assert record_ids(reopened) == ["aaaa0001", new_id]
    assert reopened.leaf_id == new_id


def test_create_writes_header_and_entry_on_first_append(tmp_path: Path) -> None:
    path = tmp_path / "new.jsonl"
    tree = SessionTree.create(str(path), "/work/project")
    assert not path.exists()
    assert not tree.on_disk
    entry_id = tree.append_custom("k", {"i": 0})
    assert tree.on_disk
    data = path.read_bytes()
    assert data.endswith(b"\n")
    lines = data.split(b"\n")[:-1]
    assert len(lines) == 2
    head = json.loads(lines[0], object_pairs_hook=list)
    assert [key for key, _ in head] == ["type", "version", "id", "timestamp", "cwd"]
    head_dict = dict(head)
    assert head_dict["type"] == "session"
    assert head_dict["version"] == 3
    assert head_dict["id"] == tree.header.id
    assert head_dict["cwd"] == "/work/project"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", head_dict["timestamp"])
    assert len(lines[0]) < 512
    assert lines[0] == dumps(head_dict)
    entry = json.loads(lines[1])
    assert entry["type"] == "custom"
    assert entry["id"] == entry_id
    assert HEX8.fullmatch(entry_id)
    assert entry["parentId"] is None
    assert entry["data"] == {"i": 0}
    assert lines[1] == dumps(entry)
    assert tree.leaf_id == entry_id
    assert tree.problems == []
    reopened = SessionTree.open(str(path))
    assert reopened.header.id == tree.header.id
    assert record_ids(reopened) == [entry_id]


def test_create_with_parent_session_writes_it_after_cwd(tmp_path: Path) -> None:
    path = tmp_path / "fork.jsonl"
    tree = SessionTree.create(str(path), "/work/project", parent_session="/work/a.jsonl")
    tree.append_custom("k")
    first = path.read_bytes().split(b"\n")[0]
    head = json.loads(first, object_pairs_hook=list)
    assert [key for key, _ in head] == ["type", "version", "id", "timestamp", "cwd",
                                        "parentSession"]
    assert dict(head)["parentSession"] == "/work/a.jsonl"
    assert len(first) < 512


def test_appends_chain_under_the_leaf_and_each_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "new.jsonl"
    tree = SessionTree.create(str(path), "/work/project")
    ids = [tree.append_custom("k", {"i": i}) for i in range(3)]
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    entries = [json.loads(line) for line in lines[1:-1]]
    assert [e["id"] for e in entries] == ids
    assert [e["parentId"] for e in entries] == [None, ids[0], ids[1]]
    assert len(set(ids)) == 3
    assert tree.path_ids(tree.leaf_id) == ids


# -- the tail --------------------------------------------------------------------------------


def test_refresh_takes_an_external_append(tmp_path: Path) -> None:
    path = base_session(tmp_path)
    tree = SessionTree.open(path)
    line = custom("aaaa0003", "aaaa0002")
    with open(path, "ab") as handle:
        handle.write(line + b"\n")
    assert tree.refresh() == Refresh(added=1, reloaded=False)
    assert tree.leaf_id == "aaaa0003"
    assert tree.record("aaaa0003").raw == line
    assert tree.record("aaaa0003").line == 4
    assert tree.problems == []
    assert tree.refresh() == Refresh(added=0, reloaded=False)


def test_tail_reads_only_the_appended_bytes(tmp_path: Path) -> None:
    path = base_session(tmp_path)
    snapshot = read_file(path)
    tail = Tail.after(path, snapshot)
    start = tail.offset
    assert start == os.path.getsize(path)
    appended = custom("aaaa0003", "aaaa0002") + b"\n" + custom("aaaa0004", "aaaa0003") + b"\n"
    with open(path, "ab") as handle:
        handle.write(appended)
    result = tail.poll()
    assert not result.reset
    assert result.lines == [custom("aaaa0003", "aaaa0002"), custom("aaaa0004", "aaaa0003")]
    assert result.first_line == 4
    assert tail.offset == start + len(appended)
    again = tail.poll()
    assert again.lines == []
    assert not again.reset
    assert tail.offset == start + len(appended)


def test_refresh_reports_problems_in_appended_lines_with_line_numbers(tmp_path: Path) -> None:
    path = base_session(tmp_path)
    tree = SessionTree.open(path)
    with open(path, "ab") as handle:
        handle.write(b"\n" + b"{oops\n" + custom("aaaa0003", "aaaa0002") + b"\n")
    assert tree.refresh() == Refresh(1, False)
    assert kinds(tree.problems) == [("blank", 4), ("malformed", 5)]
    assert tree.record("aaaa0003").line == 6


def test_partial_line_is_not_taken_until_its_newline_arrives(tmp_path: Path) -> None:
    path = base_session(tmp_path)
    tree = SessionTree.open(path)
    line = custom("aaaa0003", "aaaa0002")
    with open(path, "ab") as handle:
        handle.write(line[:20])
    assert tree.refresh() == Refresh(0, False)
    assert tree.leaf_id == "aaaa0002"
    assert tree.problems == []
    with open(path, "ab") as handle:
        handle.write(line[20:])
    # Complete JSON, but still no newline: a writer may not be done with it.
    assert tree.refresh() == Refresh(0, False)
    assert tree.leaf_id == "aaaa0002"
    with open(path, "ab") as handle:
        handle.write(b"\n")
    assert tree.refresh() == Refresh(1, False)
    assert tree.leaf_id == "aaaa0003"
    assert tree.record("aaaa0003").raw == line
    assert tree.record("aaaa0003").line == 4
    assert tree.problems == []


def test_tail_buffers_a_partial_line(tmp_path: Path) -> None:
    path = base_session(tmp_path)
    tail = Tail.after(path, read_file(path))
    line = custom("aaaa0003", "aaaa0002")
    with open(path, "ab") as handle:
        handle.write(line[:10])
    assert tail.poll().lines == []
    with open(path, "ab") as handle:
        handle.write(line[10:] + b"\n")
    result = tail.poll()
    assert result.lines == [line]
    assert result.first_line == 4


def test_an_unfinished_line_cut_back_is_read_again_not_a_replacement(tmp_path: Path) -> None:
    """Another writer's failed append cut back off (what `append_lines` does with a short
    write), or its unfinished line rewritten: the lines read whole are unchanged, so the file
    is the one read, and the line that comes is read from its start."""
    path = base_session(tmp_path)
    tree = SessionTree.open(path)
    whole = os.path.getsize(path)
    cut_back = custom("bbbb0003", "aaaa0002")
    with open(path, "ab") as handle:
        handle.write(cut_back[:30])
    assert tree.refresh() == Refresh(0, False)
    os.truncate(path, whole)
    assert tree.refresh() == Refresh(0, False)
    with open(path, "ab") as handle:
        handle.write(custom("bbbb0004", "aaaa0002")[:50])
    assert tree.refresh() == Refresh(0, False)
    os.truncate(path, whole)
    with open(path, "ab") as handle:  # unseen: a longer line in its place, read from its start
        handle.write(custom("aaaa0003", "aaaa0002", note="y" * 40) + b"\n")
    assert tree.refresh() == Refresh(1, False)
    assert tree.record("aaaa0003").raw == custom("aaaa0003", "aaaa0002", note="y" * 40)
    assert (tree.leaf_id, tree.problems) == ("aaaa0003", [])
    os.truncate(path, whole - 1)  # into a line read whole: a replacement
    assert tree.refresh().reloaded


def test_a_line_finished_by_a_short_write_leaves_the_file_the_one_read(
        tmp_path: Path) -> None:
    """A line read unfinished and then finished by a few bytes (a newline alone, as
    `append_lines` ends another writer's half line): what was read whole still matches the
    file, so the next look finds nothing new, and a running session appends in place."""
    path = base_session(tmp_path)
    tree = SessionTree.open(path)
    tree.hold_leaf = True  # a turn runs: a file taken as replaced would move it
    line = custom("aaaa0003", "aaaa0002")
    with open(path, "ab") as handle:
        handle.write(line)
    assert tree.refresh() == Refresh(0, False)
    with open(path, "ab") as handle:
        handle.write(b"\n")
    assert tree.refresh() == Refresh(1, False)
    assert tree.refresh() == Refresh(0, False)
    tree.append_custom("test", None)
    assert tree.path == path and len(SessionTree.open(path).records) == 4


def test_truncation_reloads(tmp_path: Path) -> None:
    path = base_session(tmp_path)
    tree = SessionTree.open(path)
    inode = os.stat(path).st_ino
    write_session(Path(path), [header(), custom("aaaa0001")])
    assert os.stat(path).st_ino == inode
    assert tree.refresh() == Refresh(1, True)
    assert record_ids(tree) == ["aaaa0001"]
    assert tree.leaf_id == "aaaa0001"
    assert "aaaa0002" not in tree.by_id


def test_a_file_cut_to_its_header_leaves_no_leaf(tmp_path: Path) -> None:
    """The old leaf is in no file any more (it was kept, and asking for its path failed)."""
    path = base_session(tmp_path)
    tree = SessionTree.open(path)
    write_session(Path(path), [header()])
    assert tree.refresh() == Refresh(0, True)
    assert tree.leaf_id is None
    assert tree.path_to(tree.leaf_id) == []
    assert tree.shown_leaf() is None


def test_replacement_by_os_replace_reloads(tmp_path: Path) -> None:
    path = base_session(tmp_path)
    tree = SessionTree.open(path)
    other = write_session(tmp_path / "other.jsonl", [
        header(OTHER_SESSION_ID), custom("bbbb0001"), custom("bbbb0002", "bbbb0001"),
        custom("bbbb0003", "bbbb0002"),
    ])
    os.replace(other, path)
    assert tree.refresh() == Refresh(3, True)
    assert tree.header.id == OTHER_SESSION_ID
    assert record_ids(tree) == ["bbbb0001", "bbbb0002", "bbbb0003"]
    assert tree.leaf_id == "bbbb0003"
    assert "aaaa0001" not in tree.by_id


def test_replacement_by_a_file_of_the_same_size_reloads(tmp_path: Path) -> None:
    path = base_session(tmp_path)
    tree = SessionTree.open(path)
    other = write_session(tmp_path / "other.jsonl", [
        header(OTHER_SESSION_ID), custom("bbbb0001"), custom("bbbb0002", "bbbb0001"),
    ])
    assert os.path.getsize(other) == os.path.getsize(path)
    os.replace(other, path)
    assert tree.refresh().reloaded
    assert tree.header.id == OTHER_SESSION_ID
    assert record_ids(tree) == ["bbbb0001", "bbbb0002"]


@pytest.mark.parametrize("grow", [False, True], ids=["same-size", "larger"])
def test_in_place_rewrite_with_a_different_header_reloads(tmp_path: Path, grow: bool) -> None:
    path = base_session(tmp_path)
    tree = SessionTree.open(path)
    size = os.path.getsize(path)
    inode = os.stat(path).st_ino
    lines = [header(OTHER_SESSION_ID), custom("aaaa0001"), custom("aaaa0002", "aaaa0001")]
    if grow:
        lines.append(custom("aaaa0003", "aaaa0002"))
    data = b"".join(line + b"\n" for line in lines)
    assert (len(data) > size) if grow else (len(data) == size)
    with open(path, "r+b") as handle:
        handle.write(data)
    assert os.stat(path).st_ino == inode
    assert os.path.getsize(path) == len(data)
    result = tree.refresh()
    assert result.reloaded
    assert result.added == len(lines) - 1
    assert tree.header.id == OTHER_SESSION_ID
    assert record_ids(tree) == [json.loads(line)["id"] for line in lines[1:]]


def test_tail_resets_when_the_file_is_deleted(tmp_path: Path) -> None:
    path = base_session(tmp_path)
    tail = Tail.after(path, read_file(path))
    os.remove(path)
    assert tail.poll().reset


# -- migrations ------------------------------------------------------------------------------


def _v1_lines() -> list[bytes]:
    return [
        header(version=None),
        dumps({"type": "message", "timestamp": TS,
               "message": {"role": "user", "content": "first", "timestamp": 1}}),
        dumps({"type": "message", "timestamp": TS,
               "message": {"role": "user", "content": "second", "timestamp": 2}}),
        dumps({"type": "thinking_level_change", "timestamp": TS, "thinkingLevel": "high"}),
        dumps({"type": "compaction", "timestamp": TS, "summary": "sum",
               "firstKeptEntryIndex": 2, "tokensBefore": 1234}),
        dumps({"type": "message", "timestamp": TS,
               "message": {"role": "user", "content": "after", "timestamp": 3}}),
    ]


def test_v1_file_becomes_a_linear_chain_in_memory(tmp_path: Path) -> None:
    path = write_session(tmp_path / "v1.jsonl", _v1_lines())
    before = Path(path).read_bytes()
    stat_before = os.stat(path)
    tree = SessionTree.open(path)
    assert tree.migrated
    assert tree.header.version == 3
    assert tree.header.id == SESSION_ID
    assert tree.problems == []
    ids = record_ids(tree)
    assert len(ids) == 5
    assert all(isinstance(i, str) and HEX8.fullmatch(i) for i in ids)
    assert len(set(ids)) == 5
    parents = [json.loads(r.raw)["parentId"] for r in tree.records]
    assert parents == [None, *ids[:-1]]
    assert [r.env.parent_id for r in tree.records] == [None, *ids[:-1]]
    assert tree.leaf_id == ids[-1]
    assert tree.path_ids(tree.leaf_id) == ids
    # Index 2 counts the header as 0, so it names the second entry ("second").
    compaction = tree.entry(ids[3])  # type: ignore[arg-type]
    assert isinstance(compaction, CompactionEntry)
    assert compaction.first_kept_entry_id == ids[1]
    assert compaction.tokens_before == 1234
    assert "firstKeptEntryIndex" not in json.loads(tree.records[3].raw)
    kept = json.loads(tree.record(compaction.first_kept_entry_id).raw)
    assert kept["message"]["content"] == "second"
    # Other fields survive the migration.
    assert json.loads(tree.records[2].raw)["thinkingLevel"] == "high"
    # Nothing is written back.
    assert Path(path).read_bytes() == before
    assert os.stat(path).st_mtime_ns == stat_before.st_mtime_ns


TOO_DEEP = b"[" * (MAX_NESTING + 1) + b"]" * (MAX_NESTING + 1)


@pytest.mark.parametrize(("index", "skipped", "kept"), [
    (2.0, None, "second"),  # JavaScript indexes entries[2.0] as entries[2]
    (2.5, None, None),
    (True, None, None),  # a boolean is no number
    (3, header(version=None), "second"),  # a second header counts
    (2, header(version=None), None),  # ... and names nothing
    (3, TOO_DEEP, "second"),  # so does a line pi-lsp skips as too deep and pi parses
    (5, None, None),  # "after" has no id yet when the compaction is upgraded
])
def test_v1_first_kept_entry_index_is_read_as_pi_reads_it(
        tmp_path: Path, index: Any, skipped: bytes | None, kept: str | None) -> None:
    """The upgrade took True as index 1, refused 2.0, counted entries without the second
    headers pi counts, and named entries pi had not given an id yet."""
    lines = _v1_lines()
    field = b'"firstKeptEntryIndex":'
    lines[4] = lines[4].replace(field + b"2", field + dumps(index))
    if skipped is not None:
        lines.insert(2, skipped)
    tree = SessionTree.open(write_session(tmp_path / "v1.jsonl", lines))
    compaction = next(decode_entry(r) for r in tree.records if r.env.type == "compaction")
    assert isinstance(compaction, CompactionEntry)
    target = compaction.first_kept_entry_id
    assert kept == (None if target is None else
                    json.loads(tree.record(target).raw)["message"]["content"])


def test_v1_migration_leaves_the_file_tailable(tmp_path: Path) -> None:
    path = write_session(tmp_path / "v1.jsonl", _v1_lines())
    tree = SessionTree.open(path)
    leaf = tree.leaf_id
    assert tree.refresh() == Refresh(0, False)
    assert tree.leaf_id == leaf


def test_a_v1_session_is_not_written_to_but_forks_to_version_3(tmp_path: Path) -> None:
    """Its ids are made up at each read (pi 1.6 makes up others when it upgrades the file),
    so a line naming them would lose what it says: writing is refused with what to do."""
    path = write_session(tmp_path / "v1.jsonl", _v1_lines())
    before = Path(path).read_bytes()
    tree = SessionTree.open(path)
    first = record_ids(tree)[0] or ""
    with pytest.raises(WriteFailedError) as caught:
        tree.append_label(first, "kept")
    message = str(caught.value)
    assert message.startswith(f"could not write to {path}: ")
    assert "open it once with pi" in message and "fork it" in message
    assert Path(path).read_bytes() == before
    fork = fork_session(tree, tree.leaf_id or "")
    fork.append_label(first, "kept")
    copy = SessionTree.open(fork.path)
    assert copy.header.version == 3 and not copy.migrated and copy.problems == []
    ids = record_ids(copy)
    assert [r.env.parent_id for r in copy.records] == [None, *ids[:-1]]
    assert copy.label(first) == "kept"
    compaction = copy.entry(ids[3] or "")
    assert isinstance(compaction, CompactionEntry) and compaction.first_kept_entry_id == ids[1]


def test_a_v2_session_keeps_its_ids_and_is_appended_to(tmp_path: Path) -> None:
    plain = dumps({"type": "message", "id": "aaaa0001", "parentId": None, "timestamp": TS,
                   "message": {"role": "user", "content": "hello", "timestamp": 4}})
    path = write_session(tmp_path / "v2.jsonl", [header(version=2), plain])
    tree = SessionTree.open(path)
    label = tree.append_label("aaaa0001", "kept")
    reopened = SessionTree.open(path)
    assert reopened.label("aaaa0001") == "kept" and reopened.leaf_id == label


def test_v2_hook_message_becomes_custom_in_memory(tmp_path: Path) -> None:
    hook = dumps({"type": "message", "id": "aaaa0002", "parentId": "aaaa0001", "timestamp": TS,
                  "message": {"role": "hookMessage", "customType": "ext", "content": "hi",
                              "display": True, "timestamp": 5}})
    plain = dumps({"type": "message", "id": "aaaa0001", "parentId": None, "timestamp": TS,
                   "message": {"role": "user", "content": "hello", "timestamp": 4}})
    path = write_session(tmp_path / "v2.jsonl", [header(version=2), plain, hook])
    before = Path(path).read_bytes()
    tree = SessionTree.open(path)
    assert tree.migrated
    assert tree.header.version == 3
    assert tree.problems == []
    assert record_ids(tree) == ["aaaa0001", "aaaa0002"]
    assert tree.record("aaaa0001").raw == plain
    migrated = json.loads(tree.record("aaaa0002").raw)
    assert migrated["message"]["role"] == "custom"
    assert migrated["parentId"] == "aaaa0001"
    entry = tree.entry("aaaa0002")
    assert isinstance(entry, MessageEntry)
    assert isinstance(entry.message, CustomMessage)
    assert entry.message.custom_type == "ext"
    assert entry.message.content == "hi"
    assert Path(path).read_bytes() == before


@pytest.mark.parametrize("odd", [b'"s"', b"42", b"true", b"[1]"])
def test_a_v1_line_that_is_no_object_is_chained_as_pi_chains_it(tmp_path: Path,
                                                               odd: bytes) -> None:
    """msgspec.ValidationError escaped the upgrade. pi 1.6 gives an array an id and a parent,
    and fails on any other value (`Cannot create property 'id' on string 's'`): read, reported."""
    v1_header, first, *rest = _v1_lines()
    path = write_session(tmp_path / "v1.jsonl", [v1_header, first, odd, *rest])
    tree = SessionTree.open(path)
    ids = record_ids(tree)
    assert tree.path_ids(tree.leaf_id) == ids and len(ids) == 6
    assert tree.records[1].raw == odd and tree.records[1].env.parent_id == ids[0]
    unmigratable = [] if odd.startswith(b"[") else [("unmigratable", 3)]
    assert kinds(tree.problems) == [("non-object-entry", 3), *unmigratable]


def test_a_fork_of_a_v1_chain_through_lines_that_are_no_object_leaves_them_out(
        tmp_path: Path) -> None:
    """Relinking such a line raised msgspec.ValidationError, and one copied as it is broke
    the fork's chain (the entry after it named its made-up id): it names no parent and gives
    no context."""
    v1_header, first, *rest = _v1_lines()
    label = dumps({"type": "label", "timestamp": TS, "targetId": "x", "label": "L"})
    path = write_session(tmp_path / "v1.jsonl", [v1_header, first, label, b'"s"', b"[1]", *rest])
    tree = SessionTree.open(path)
    fork = SessionTree.open(fork_session(tree, tree.leaf_id or "").path)
    objects = [r.env.id for r in tree.records if r.raw.startswith(b"{") and r.env.type != "label"]
    assert fork.path_ids(fork.leaf_id) == objects and fork.problems == []
    compaction = fork.entry(objects[3] or "")
    assert isinstance(compaction, CompactionEntry) and compaction.first_kept_entry_id == objects[1]


def test_an_off_type_envelope_field_is_kept_through_the_upgrades(tmp_path: Path) -> None:
    """A v1 entry's `type` or a v2 hook message's `id` that is not text raised
    msgspec.ValidationError from the upgrade: pi 1.6 keeps each, as it does in version 3."""
    numbered = dumps({"type": 5, "timestamp": TS})
    v1_header, first, *_ = _v1_lines()
    v1 = write_session(tmp_path / "v1.jsonl", [v1_header, numbered, first])
    tree = SessionTree.open(v1)
    assert [r.env.type for r in tree.records] == ["", "message"]
    assert tree.path_ids(tree.leaf_id) == record_ids(tree)
    assert kinds(tree.problems) == [("off-type-envelope", 2)]
    hook = dumps({"type": "message", "id": True, "parentId": None, "timestamp": TS,
                  "message": {"role": "hookMessage", "customType": "ext", "content": "hi",
                              "display": True, "timestamp": 5}})
    v2 = SessionTree.open(write_session(tmp_path / "v2.jsonl", [header(version=2), hook]))
    assert json.loads(v2.idless_records[0].raw)["message"]["role"] == "custom"
    assert kinds(v2.problems) == [("off-type-envelope", 2), ("no-id", 2)]


def test_v3_file_is_not_migrated(tmp_path: Path) -> None:
    hook = dumps({"type": "message", "id": "aaaa0001", "parentId": None, "timestamp": TS,
                  "message": {"role": "hookMessage", "content": "x", "timestamp": 5}})
    path = write_session(tmp_path / "v3.jsonl", [header(), hook])
    tree = SessionTree.open(path)
    assert not tree.migrated
    assert tree.record("aaaa0001").raw == hook


def _branched_lines(session_header: bytes) -> list[bytes]:
    """A user message with two replies, the last (the leaf) a version 2 hook message."""
    assistant = {"role": "assistant", "content": [{"type": "text", "text": "yo"}], "api": "x",
                 "provider": "p", "model": "m", "stopReason": "stop", "timestamp": 2,
                 "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0,
                           "totalTokens": 2, "cost": {"input": 0, "output": 0, "cacheRead": 0,
                                                      "cacheWrite": 0, "total": 0}}}
    return [session_header,
            dumps({"type": "message", "id": "u1", "parentId": None, "timestamp": TS,
                   "message": {"role": "user", "content": "hi", "timestamp": 1}}),
            dumps({"type": "message", "id": "a1", "parentId": "u1", "timestamp": TS,
                   "message": assistant}),
            dumps({"type": "message", "id": "h1", "parentId": "u1", "timestamp": TS,
                   "message": {"role": "hookMessage", "customType": "x", "content": "hook",
                               "display": True, "timestamp": 3}})]


def _context_roles(tree: SessionTree) -> list[str]:
    built = build_session_context(tree, tree.leaf_id)
    return [json.loads(bytes(message))["role"] for message in built.messages]


@pytest.mark.parametrize(("session_header", "cwd"), [
    pytest.param(b'{"type":"session","version":3,"id":"s1","cwd":"/tmp"}', "/tmp",
                 id="no-timestamp"),
    pytest.param(header(cwd=None), "", id="cwd-null"),
    pytest.param(header(cwd=5), "", id="cwd-number"),
    pytest.param(header(parentSession=5), "/work/project", id="parent-session-number"),
])
def test_a_header_with_fields_of_other_types_opens_as_pi_opens_it(
        tmp_path: Path, session_header: bytes, cwd: str) -> None:
    """Such a file was "not a pi session file": pi 1.6 checks only the header's type and that
    its id is text, reads a cwd of another type as unknown (a fork's was a TypeError) and no
    other field when opening."""
    path = write_session(tmp_path / "s.jsonl", _branched_lines(session_header))
    tree = SessionTree.open(path)
    assert tree.problems == [] and tree.header_raw == session_header
    assert _context_roles(tree) == ["user", "hookMessage"]  # pi 1.6's, a version 3 file's
    listed = summarize(Path(path))
    assert (listed.cwd, listed.parent_session) == (cwd, None)
    # A fork records pi's own cwd where the header's is unknown (createBranchedSession).
    assert fork_session(tree, "h1").header.known_cwd() == (cwd or os.getcwd())
    repaired_copy(tree, str(tmp_path / "fixed.jsonl"))
    assert (tmp_path / "fixed.jsonl").read_bytes().split(b"\n")[0] == session_header


@pytest.mark.parametrize(("version", "roles"), [
    # pi 1.6 compares `header.version ?? 1` with JavaScript's >= and <, each made a number
    # (the roles are its contexts): 3 or more runs no upgrade, nor does NaN; under 2, both.
    (b"3.0", ["user", "hookMessage"]), (b'"3"', ["user", "hookMessage"]),
    (b"[3]", ["user", "hookMessage"]), (b'"0x3"', ["user", "hookMessage"]),
    (b"1e400", ["user", "hookMessage"]), (b"{}", ["user", "hookMessage"]),
    (b'"x"', ["user", "hookMessage"]),
    (b'"2"', ["user", "custom"]), (b"2.5", ["user", "custom"]),
    (b"true", ["user", "assistant", "custom"]), (b"null", ["user", "assistant", "custom"]),
    (b"false", ["user", "assistant", "custom"]), (b"[]", ["user", "assistant", "custom"]),
])
def test_a_version_of_another_type_is_compared_as_pi_compares_it(
        tmp_path: Path, version: bytes, roles: list[str]) -> None:
    """A version that was no integer made the file "not a pi session file"; pi 1.6 opens it
    and upgrades it as JavaScript's comparisons of that value with 2 and 3 decide."""
    session_header = b'{"type":"session","version":' + version + b',"id":"s1","timestamp":"' \
        + TS.encode() + b'","cwd":"/tmp"}'
    path = write_session(tmp_path / "s.jsonl", _branched_lines(session_header))
    tree = SessionTree.open(path)
    assert tree.problems == [] and _context_roles(tree) == roles
    assert summarize(Path(path)).entry_count == 3


# -- concurrency -----------------------------------------------------------------------------

WORKER = textwrap.dedent(
    """
    import os, sys, time
    from pi_lsp.session.tree import SessionTree

    path, name, ready, go = sys.argv[1:5]
    tree = SessionTree.open(path)
    open(ready, "w").close()
    deadline = time.monotonic() + 60
    while not os.path.exists(go):
        if time.monotonic() > deadline:
            sys.exit("no go signal")
        time.sleep(0.001)
    for i in range(1000):
        tree.append_custom("k", {"i": i, "w": name})
    print(len(tree.problems))
    """
)


def test_two_processes_append_to_one_file_without_tearing(tmp_path: Path) -> None:
    path = write_session(tmp_path / "s.jsonl", [header()])
    go = tmp_path / "go"
    readies = [tmp_path / f"ready-{name}" for name in ("a", "b")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, path, name, str(ready), str(go)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=str(ROOT),
        )
        for name, ready in zip(("a", "b"), readies, strict=True)
    ]
    try:
        deadline = time.monotonic() + CEILING_S
        while not all(ready.exists() for ready in readies):
            assert time.monotonic() < deadline, "workers did not start"
            assert all(w.poll() is None for w in workers), "a worker died early"
            time.sleep(0.005)
        go.touch()
        outputs = [w.communicate(timeout=PROCESS_CEILING_S) for w in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    for worker, (out, err) in zip(workers, outputs, strict=True):
        assert worker.returncode == 0, err.decode()
        assert out.decode().strip() == "0", "a writer saw problems while tailing"

    data = Path(path).read_bytes()
    assert data.endswith(b"\n")
    lines = data.split(b"\n")[:-1]
    assert len(lines) == 2001
    parsed = [json.loads(line) for line in lines]
    assert all(isinstance(value, dict) for value in parsed)
    assert parsed[0]["type"] == "session"
    for name in ("a", "b"):
        seen = [p["data"]["i"] for p in parsed[1:] if p["data"]["w"] == name]
        assert seen == list(range(1000))
    snapshot = read_file(path)
    assert snapshot.problems == []
    assert len(snapshot.records) == 2000
    tree = SessionTree.open(path)
    assert tree.problems == []
    assert len(tree.records) == 2000
    assert len(tree.by_id) == 2000
