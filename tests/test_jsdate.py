"""Entry stamps read as pi reads them (`new Date(text).getTime()` in Node 22), checked against
tables Node wrote once (tests/fixtures/js_dates*.mjs): the CI has no Node 22."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from pi_lsp.context.build import build_session_context
from pi_lsp.session.ids import iso_to_ms, order_ms
from pi_lsp.session.jsdate import MAX_TIME_MS
from pi_lsp.session.jsontext import encoder
from pi_lsp.session.tree import SessionTree

FIXTURES = Path(__file__).parent / "fixtures"
TABLE = json.loads((FIXTURES / "js_dates.json").read_text(encoding="utf-8"))
PI = json.loads((FIXTURES / "js_dates_pi.json").read_text(encoding="utf-8"))
LEGACY = json.loads((FIXTURES / "js_legacy_dates.json").read_text(encoding="utf-8"))


def _set_zone(monkeypatch: pytest.MonkeyPatch, zone: str) -> None:
    if zone != "UTC" and not Path("/usr/share/zoneinfo", zone).exists():
        pytest.skip(f"no time zone data for {zone}")
    monkeypatch.setenv("TZ", zone)
    time.tzset()


@pytest.fixture(autouse=True)
def _restore_zone() -> Iterator[None]:
    yield
    time.tzset()  # monkeypatch has put TZ back by now; the C library must read it again


# Local times Python's clock cannot place (years 1 to 9999, a day either side for the zone):
# the one kind of time pi-lsp leaves unread where Node reads one.
PYTHON_YEARS_MS = (-62_135_596_800_000 + 2 * 86_400_000, 253_402_300_799_999 - 2 * 86_400_000)


def _left_unread(node_ms: int) -> bool:
    """Whether pi-lsp leaves a time Node reads unread on purpose: past Python's years."""
    low, high = PYTHON_YEARS_MS
    return not low <= node_ms <= high


def _misread(table: list[Any], zone: str) -> tuple[list[Any], list[str], int]:
    """The rows read as another time than Node's, those left unread though Node reads them
    within Python's years, and how many Node reads."""
    wrong = [(text, expected[zone], iso_to_ms(text)) for text, expected in table
             if iso_to_ms(text) not in (expected[zone], None)]
    unread = [text for text, expected in table if iso_to_ms(text) is None and
              expected[zone] is not None and not _left_unread(expected[zone])]
    return wrong, unread, sum(expected[zone] is not None for _, expected in table)


@pytest.mark.parametrize("zone", TABLE["zones"])
def test_every_string_reads_as_node_reads_it(monkeypatch: pytest.MonkeyPatch, zone: str) -> None:
    """ISO forms, local-time forms (DST gaps and repeats), out-of-range fields, extended years
    and generated junk: never a time Node would not give, and no time left unread but local
    times past Python's years (`_left_unread`)."""
    _set_zone(monkeypatch, zone)
    wrong, unread, read = _misread(TABLE["table"], zone)
    assert (wrong, unread) == ([], [])
    assert read > 250 and len(TABLE["table"]) > 1000


@pytest.mark.parametrize("zone", LEGACY["zones"])
def test_legacy_forms_read_as_node_reads_them(monkeypatch: pytest.MonkeyPatch, zone: str) -> None:
    """V8's legacy forms (`toUTCString()`, `toString()`, mail and locale dates, `1/2/24 3:04
    PM`) were all None, where pi reads a time: a message's timestamp became null and siblings
    moved. Node's answers on 4,768 generated strings (and mutations of them)."""
    _set_zone(monkeypatch, zone)
    wrong, unread, read = _misread(LEGACY["table"], zone)
    assert (wrong, unread) == ([], [])
    assert read > 3000


@pytest.mark.parametrize("zone", ["UTC", "America/New_York"])
def test_javascripts_own_date_texts_read_as_the_time_they_name(
        monkeypatch: pytest.MonkeyPatch, zone: str) -> None:
    """`new Date(0).toUTCString()` and `.toString()` read back as the epoch in any zone."""
    _set_zone(monkeypatch, zone)
    assert iso_to_ms("Thu, 01 Jan 1970 00:00:00 GMT") == 0
    assert iso_to_ms("Thu Jan 01 1970 00:00:00 GMT+0000 (Coordinated Universal Time)") == 0
    assert iso_to_ms("Wed Dec 31 1969 19:00:00 GMT-0500 (Eastern Standard Time)") == 0


def test_half_an_emoji_in_a_legacy_date_is_read_as_node_reads_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A lone surrogate in a stamp raised UnicodeEncodeError (counting UTF-16 units), so the
    tree of such a session failed; Node reads the word as a month name, or as no date."""
    _set_zone(monkeypatch, "UTC")
    assert iso_to_ms("Jan\ud800 1 2024") == 1704067200000
    assert iso_to_ms("x\udc00") is None
    assert iso_to_ms("Thu, 01 Jan 1970 00:00:00 GMT\ud800") is None


def test_the_table_covers_the_forms_in_question() -> None:
    rows = dict(TABLE["table"])
    assert rows["2024-01-02T24:00:00Z"]["UTC"] == 1704240000000 == iso_to_ms("2024-01-02T24:00:00Z")
    assert rows["+275760-09-13T00:00:00.000Z"]["UTC"] == MAX_TIME_MS
    assert rows["+275760-09-13T00:00:00.001Z"]["UTC"] is None
    assert rows["2024-01-02"]["America/New_York"] == rows["2024-01-02"]["UTC"]  # date only: UTC
    assert rows["2024-01-02T03:04"]["America/New_York"] != rows["2024-01-02T03:04"]["UTC"]
    assert rows["2024-02-30T00:00:00.000Z"]["UTC"] == iso_to_ms("2024-03-01T00:00:00.000Z")
    assert rows["Jan 2 2024"]["UTC"] is not None and rows["2024-W01-2"]["UTC"] is None


def test_unreadable_stamps_are_none_not_the_epoch() -> None:
    assert iso_to_ms("garbage") is None
    assert iso_to_ms(msgspec.UNSET) is None  # a missing stamp: `new Date(undefined)`
    assert iso_to_ms(None) == 0  # a JSON null: `new Date(null)` is the epoch
    assert iso_to_ms("1970-01-01T00:00:00.000Z") == 0
    assert order_ms("garbage") < order_ms("-271821-04-20T00:00:00.000Z")


@pytest.fixture
def pi_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SessionTree:
    _set_zone(monkeypatch, "UTC")  # pi's answers were taken in UTC (a local-time stamp is there)
    path = tmp_path / "s.jsonl"
    path.write_text(PI["file"], encoding="utf-8")
    return SessionTree.open(str(path))


def _as_json(value: object) -> Any:
    return json.loads(encoder.encode(value))


def test_context_with_unreadable_stamps_is_pis(pi_session: SessionTree) -> None:
    """pi stamps summaries and custom messages with `new Date(entry.timestamp).getTime()`;
    NaN is written as null (JSON.stringify), not 0."""
    tree = pi_session
    assert tree.leaf_id == PI["leafId"]
    context = _as_json(build_session_context(tree, tree.leaf_id))
    assert context == PI["context"]
    assert [m["timestamp"] for m in context["messages"]][:4] == [None] * 4


def test_siblings_are_in_pis_order(pi_session: SessionTree) -> None:
    """pi sorts children by `new Date(a) - new Date(b)`: NaN compares equal to every stamp,
    so the order is the one V8's sort makes, past 64 siblings too."""
    tree = pi_session
    index = tree.children_index()
    order = {key: [r.env.id for r in siblings] for key, siblings in index.items()
             if key is not None and len(siblings) > 1}
    assert order == PI["order"]
    assert len(PI["order"]["r0"]) > 64


def test_appends_keep_pis_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Children appended one by one end where a fresh read of the whole file puts them."""
    _set_zone(monkeypatch, "UTC")
    lines = PI["file"].splitlines(keepends=True)
    path = tmp_path / "s.jsonl"
    path.write_text("".join(lines[:3]), encoding="utf-8")
    tree = SessionTree.open(str(path))
    tree.children_index()
    with path.open("a", encoding="utf-8") as file:
        for line in lines[3:]:
            file.write(line)
            file.flush()
            tree.refresh()
    appended = {k: [r.env.id for r in v] for k, v in tree.children_index().items() if k}
    fresh = SessionTree.open(str(path))
    assert appended == {k: [r.env.id for r in v] for k, v in fresh.children_index().items() if k}
    assert {k: v for k, v in appended.items() if len(v) > 1} == PI["order"]


def test_local_time_reads_in_the_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    _set_zone(monkeypatch, "America/New_York")
    assert iso_to_ms("2024-01-02T00:00:00") == iso_to_ms("2024-01-02T05:00:00Z")
    assert iso_to_ms("2024-01-02") == iso_to_ms("2024-01-02T00:00:00Z")
    assert os.environ["TZ"] == "America/New_York"


def test_the_last_unreadable_sibling_going_leaves_them_in_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An id used again takes its entry away from its siblings: with the one unreadable stamp
    gone, the rest are sorted again, as a fresh read sorts them (found in review)."""
    _set_zone(monkeypatch, "UTC")

    def line(entry_id: str, parent: str | None, stamp: str) -> str:
        return json.dumps({"type": "message", "id": entry_id, "parentId": parent,
                           "timestamp": stamp, "message": {"role": "user", "content": "x",
                                                           "timestamp": 0}}) + "\n"

    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"type": "session", "version": 3, "id": "s1", "cwd": "/w",
                                "timestamp": "2024-01-01T00:00:00.000Z"}) + "\n" +
                    line("P", None, "2024-01-01T00:00:00.000Z") +
                    line("A", "P", "2024-01-01T00:00:03.000Z") + line("X", "P", "garbage") +
                    line("B", "P", "2024-01-01T00:00:01.000Z"))
    tree = SessionTree.open(str(path))
    assert [r.env.id for r in tree.children("P")] == ["A", "X", "B"]  # pi's order: no sort
    with path.open("a") as file:
        file.write(line("X", "A", "2024-01-01T00:00:05.000Z") +
                   line("C", "P", "2024-01-01T00:00:02.000Z"))
    tree.refresh()
    fresh = SessionTree.open(str(path))
    assert [r.env.id for r in tree.children("P")] == [r.env.id for r in fresh.children("P")] \
        == ["B", "C", "A"]


@pytest.mark.parametrize(("text", "node"), [
    ("2024-01-02 10:00:00.123456+00:00", 1704189600123),  # Python's str(datetime)
    ("2024-01-02 10:00", 1704189600000),  # local time (UTC here)
    ("2024-01-02T10:00+0000", 1704189600000),
    ("2024-01-02 24:00Z", 1704240000000),
    ("2024-06-30T24:00:00.000000001Z", None),  # past the day's end
    ("0049-01-01 00:00Z", None),  # Node: 2049; left unread rather than read as year 49
])
def test_forms_other_tools_write_read_as_node_reads_them(
        monkeypatch: pytest.MonkeyPatch, text: str, node: int | None) -> None:
    """Stamps the old reader took and the first JavaScript-like one did not (found in review);
    Node 22's answers in UTC."""
    _set_zone(monkeypatch, "UTC")
    assert iso_to_ms(text) == node
