"""Tests of the NEXMark peers' plumbing that need no peer venv: events file, expressibility, reference.

The peers themselves (PySpark, Bytewax) need their own virtualenvs, which take minutes to install,
so they are not run here; ``bench/nexmark_peers`` runs them and compares their digests with
:func:`reference_digest`, the plain-Python computation tested below.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from jetlet.nexmark.generator import event
from jetlet.nexmark.model import Auction, Bid, Person

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

peers: ModuleType = importlib.import_module("bench.nexmark_peers")
events_file: ModuleType = importlib.import_module("bench.nexmark_peers.events_file")

EXPECTED_NOT_EXPRESSIBLE = {("pyspark", "q4"), ("pyspark", "q6"), ("bytewax", "q4"), ("bytewax", "q6")}


@pytest.fixture(scope="module")
def stream_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Given the first 3,000 Beam-generator events written to an events file (0.3 s of event time)."""
    directory = tmp_path_factory.mktemp("nexmark-peers")
    path: Path = events_file.ensure_events_file("beam", 3000, directory)
    return path


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _sha(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(sorted(lines)).encode("utf-8")).hexdigest()


def test_events_file_round_trip_equals_the_generator(stream_file: Path) -> None:
    # when the file is read back
    read_back = list(events_file.read_events(stream_file))
    # then it holds exactly the generator's events, in order, of all three kinds
    assert read_back == [event(n) for n in range(3000)]
    assert {type(e) for e in read_back} == {Person, Auction, Bid}


def test_events_file_is_reused_not_rewritten(stream_file: Path) -> None:
    # given the file's modification time
    before = stream_file.stat().st_mtime_ns
    # when the same file is asked for again
    again = events_file.ensure_events_file("beam", 3000, stream_file.parent)
    # then it is the same path, untouched
    assert again == stream_file
    assert stream_file.stat().st_mtime_ns == before


def test_record_of_a_bid_omits_unset_optional_fields() -> None:
    # given a bid without channel and url
    bid = Bid(auction=1001, bidder=1002, price=500, date_time=7, extra="x")
    # when it becomes a record and back
    record = events_file.to_record(bid)
    # then the record is flat, tagged and without the None fields, and it converts back
    assert record == {
        "kind": "bid",
        "auction": 1001,
        "bidder": 1002,
        "price": 500,
        "date_time": 7,
        "extra": "x",
    }
    assert events_file.from_record(record) == bid


@pytest.mark.parametrize("peer", ["pyspark", "bytewax"])
@pytest.mark.parametrize("query", ["q0", "q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8", "q13"])
def test_expressible_for_every_peer_and_query(peer: str, query: str) -> None:
    # when asked whether the peer can express the query
    able, note = peers.expressible(peer, query)
    # then Q4 and Q6 are marked not expressible with a reason, every other query is expressible
    assert able == ((peer, query) not in EXPECTED_NOT_EXPRESSIBLE)
    assert note
    if not able:
        assert "event-time" in note or "aggregation" in note


def test_expressible_rejects_unknown_names() -> None:
    with pytest.raises(ValueError, match="unknown peer"):
        peers.expressible("flink", "q1")
    with pytest.raises(ValueError, match="unknown query"):
        peers.expressible("bytewax", "q9")


def test_run_peer_marks_a_query_the_peer_cannot_express_without_running_it() -> None:
    # when a peer is asked to run a query it cannot express
    run = peers.run_peer("bytewax", "q4", 1000)
    # then nothing runs: no time, no results, and the note says why
    assert run == peers.PeerRun("bytewax", "q4", 1000, None, None, False, run.note)
    assert run.note.startswith("not expressible: ")


def test_reference_q1_digest_is_the_digest_of_converted_prices(stream_file: Path) -> None:
    # given the bids, converted by hand
    bids = [r for r in _records(stream_file) if r["kind"] == "bid"]
    converted = [
        [b["auction"], b["bidder"], b["price"] * 89 // 100, b["date_time"], b["extra"]] for b in bids
    ]
    expected = _sha([json.dumps(row, separators=(",", ":")) for row in converted])
    # when the reference digest is computed
    count, digest = peers.reference_digest("q1", stream_file)
    # then it is the digest of those rows, and conversion changed some prices
    assert (count, digest) == (len(bids), expected)
    assert any(row[2] != b["price"] for row, b in zip(converted, bids, strict=True))


def test_reference_q2_keeps_only_the_bids_on_every_123rd_auction(tmp_path: Path) -> None:
    # given bids on auctions 1107 (= 9 * 123), 1108 and 1230 (= 10 * 123), and a person
    items = [
        Bid(1107, 1001, 500, 1, ""),
        Bid(1108, 1001, 600, 2, ""),
        Person(1001, "Kate Smith", "k@x.com", "1", "Boise", "ID", 3, ""),
        Bid(1230, 1002, 700, 4, ""),
    ]
    path = tmp_path / "events.jsonl"
    events_file.write_events(path, items)
    # when the reference computes Q2
    rows = peers.reference_rows("q2", path)
    # then only the bids on multiples of 123 remain, as (auction, price)
    assert rows == [(1107, 500), (1230, 700)]


def test_digest_ignores_order_but_not_content() -> None:
    # given two orders of the same rows and one changed row
    rows = [(1, "a"), (2, "b"), (3, None)]
    # then the digest is order-free and content-sensitive
    assert peers.digest(rows) == peers.digest(list(reversed(rows)))
    assert peers.digest(rows) != peers.digest([(1, "a"), (2, "b"), (3, "c")])
    assert peers.digest(rows)[0] == 3


def test_reference_q5_counts_the_hot_auction_of_each_closed_window(stream_file: Path) -> None:
    # given windows of 100 ms sliding by 20 ms over 0.3 s of events
    bids = [r for r in _records(stream_file) if r["kind"] == "bid"]
    last_time = max(r["date_time"] for r in _records(stream_file))
    # when the reference computes Q5
    rows = peers.reference_rows("q5", stream_file, window_ms=100, slide_ms=20)
    # then each closed window's row is its most-bid auction (ties: the higher id), counted by brute force
    assert [row[0] for row in sorted(rows)] == list(range(20, last_time + 1, 20))
    for end, auction, count in rows:
        in_window = [b["auction"] for b in bids if end - 100 <= b["date_time"] < end]
        best = max((in_window.count(a), a) for a in set(in_window))
        assert (count, auction) == best


def test_reference_q7_keeps_the_highest_bid_of_each_closed_window(stream_file: Path) -> None:
    rows = peers.reference_rows("q7", stream_file, window_ms=50)
    bids = [r for r in _records(stream_file) if r["kind"] == "bid"]
    assert len(rows) == 5  # windows ending at 50..250 close by the last event (299); 300 does not
    for end, auction, bidder, price, date_time in rows:
        in_window = [b for b in bids if end - 50 <= b["date_time"] < end]
        assert price == max(b["price"] for b in in_window)
        assert {"auction": auction, "bidder": bidder, "price": price, "date_time": date_time}.items() <= next(
            b for b in in_window if b["price"] == price and b["auction"] == auction and b["bidder"] == bidder
        ).items()


def test_reference_q13_joins_the_side_input_by_bidder_modulo_size(stream_file: Path) -> None:
    rows = peers.reference_rows("q13", stream_file)
    assert rows
    assert all(row[4] == str(row[1] % 500) for row in rows)


def test_reference_winning_bids_respect_reserve_and_auction_lifetime(stream_file: Path) -> None:
    # when the winning bids of the closed auctions are computed
    winners = peers.winning_bids(_records(stream_file))
    # then each winner bids on its auction, within its lifetime, at least the reserve
    assert winners
    for auction, bid in winners:
        assert bid["auction"] == auction["id"]
        assert auction["date_time"] <= bid["date_time"] < auction["expires"]
        assert bid["price"] >= auction["reserve"]


def test_fast_generator_file_round_trip(tmp_path: Path) -> None:
    # given the fast generator's first 2,000 events at the file's rate
    from jetlet.nexmark.fast_generator import FastConfig, fast_event

    expected = [fast_event(n, FastConfig(rate=events_file.FAST_RATE)) for n in range(2000)]
    # when they are written to an events file and read back
    path = events_file.ensure_events_file("fast", 2000, tmp_path)
    # then they are the same events, spanning the same event time as Beam's generator would
    assert list(events_file.read_events(path)) == expected
    assert expected[-1].date_time == event(1999).date_time
