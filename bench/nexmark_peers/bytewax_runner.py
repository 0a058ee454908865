"""Run one NEXMark query on Bytewax over an events file; a JSON report of its throughput and results.

Theory of operation: run with the Bytewax venv's interpreter (``python -m
bench.nexmark_peers.bytewax_runner --query q5 --events-file F --out-json R``). It builds a Bytewax
dataflow: ``FileSource`` (lines) -> ``json.loads`` -> the query's operators -> ``TestingSink``
(a Python list), and times ``run_main`` (one worker, in this process). Start-up (interpreter,
imports, building the flow) is reported apart as ``startup_s``; parsing the JSON lines is part of
the processing time, as it is Bytewax's way to read the file.

Event time: an ``EventClock`` on each event's ``date_time`` with no wait, whose "system time" is
frozen (``now_getter`` constant, ``to_system_utc`` None), so the watermark is exactly the greatest
event time seen: Bytewax's default clock adds the system time elapsed since the last item, which on
a replayed file slower than its event rate would declare later events late and drop them.

Results are mapped to the canonical rows of :data:`bench.nexmark_peers.ROW_FIELDS` after the
timed run; windows still open at the end of the input (Bytewax closes every window at EOF) are
dropped, as the canonical rules say.
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()

import argparse  # noqa: E402
import json  # noqa: E402
from datetime import UTC, datetime, timedelta  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import bytewax  # noqa: E402
import bytewax.operators as op  # noqa: E402
import bytewax.operators.windowing as win  # noqa: E402
from bench import nexmark_peers as peers  # noqa: E402
from bytewax.connectors.files import FileSource  # noqa: E402
from bytewax.dataflow import Dataflow, Stream  # noqa: E402
from bytewax.testing import TestingSink, run_main  # noqa: E402

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
Record = dict[str, Any]


def event_time(record: Record) -> datetime:
    """The event's ``date_time`` (epoch ms) as an aware UTC datetime."""
    return EPOCH + timedelta(milliseconds=record["date_time"])


def _frozen_now() -> datetime:
    return EPOCH


def _never_wake(_close_time: datetime) -> None:
    return None


def clock(ts_getter: Any = event_time) -> win.EventClock[Any]:
    """An event-time clock whose watermark is the greatest time seen (no system-time drift)."""
    return win.EventClock(ts_getter, timedelta(0), now_getter=_frozen_now, to_system_utc=_never_wake)


def ms(window_id: int, length_ms: int) -> int:
    """The start (epoch ms) of window ``window_id`` of a windower aligned to 0 with this offset."""
    return window_id * length_ms


def _is(kind: str) -> Any:
    return lambda record: record["kind"] == kind


def q0(flow: Dataflow, events: Stream[Record], args: argparse.Namespace) -> Stream[Any]:
    """Every event, as its q0 row."""
    fields = peers.ROW_FIELDS["q0"]
    return op.map("q0", events, lambda r: tuple(r.get(f) for f in fields))


def q1(flow: Dataflow, events: Stream[Record], args: argparse.Namespace) -> Stream[Any]:
    """Bids with the price in euros."""
    bids = op.filter("bids", events, _is("bid"))
    return op.map(
        "q1", bids, lambda b: (b["auction"], b["bidder"], b["price"] * 89 // 100, b["date_time"], b["extra"])
    )


def q2(flow: Dataflow, events: Stream[Record], args: argparse.Namespace) -> Stream[Any]:
    """``(auction, price)`` of the bids on every 123rd auction."""
    skip = peers.AUCTION_SKIP
    return op.filter_map(
        "q2",
        events,
        lambda r: (r["auction"], r["price"]) if r["kind"] == "bid" and r["auction"] % skip == 0 else None,
    )


def _q3_join(state: tuple[Record | None, list[Record]] | None, record: Record) -> tuple[Any, list[Any]]:
    person, waiting = state if state is not None else (None, [])
    if record["kind"] == "person":
        matched = [(record["name"], record["city"], record["state"], a["id"]) for a in waiting]
        return (record, []), matched
    if person is None:
        return (None, [*waiting, record]), []
    return (person, waiting), [(person["name"], person["city"], person["state"], record["id"])]


def q3(flow: Dataflow, events: Stream[Record], args: argparse.Namespace) -> Stream[Any]:
    """Persons of OR/ID/CA joined with their category-10 auctions (unbounded state)."""
    states, category = peers.Q3_STATES, peers.Q3_CATEGORY
    wanted = op.filter(
        "q3-filter",
        events,
        lambda r: (
            (r["kind"] == "person" and r["state"] in states)
            or (r["kind"] == "auction" and r["category"] == category)
        ),
    )
    keyed = op.key_on("q3-key", wanted, lambda r: str(r["id"] if r["kind"] == "person" else r["seller"]))
    joined = op.stateful_flat_map("q3-join", keyed, _q3_join)
    return op.key_rm("q3-unkey", joined)


def q5(flow: Dataflow, events: Stream[Record], args: argparse.Namespace) -> Stream[Any]:
    """Bids per auction in sliding windows, then the top auction of each window."""
    window_ms, slide_ms = args.window_ms, args.slide_ms
    bids = op.filter("bids", events, _is("bid"))
    sliding = win.SlidingWindower(timedelta(milliseconds=window_ms), timedelta(milliseconds=slide_ms), EPOCH)
    counts = win.count_window("count", bids, clock(), sliding, lambda b: str(b["auction"]))
    # (auction, (window id, bids)) -> (window end, (bids, auction))
    per_window = op.map(
        "by-window",
        counts.down,
        lambda kv: (ms(kv[1][0], slide_ms) + window_ms, (kv[1][1], int(kv[0]))),
    )
    keyed = op.key_on("window-key", per_window, lambda item: str(item[0]))
    ends_clock = clock(lambda item: EPOCH + timedelta(milliseconds=item[0]))
    tumbling = win.TumblingWindower(timedelta(milliseconds=slide_ms), EPOCH)
    best = win.max_window("top", keyed, ends_clock, tumbling, by=lambda item: item[1])
    return op.map("q5", best.down, lambda kv: (int(kv[0]), kv[1][1][1][1], kv[1][1][1][0]))


def q7(flow: Dataflow, events: Stream[Record], args: argparse.Namespace) -> Stream[Any]:
    """The highest bid of each tumbling window."""
    window_ms = args.window_ms
    bids = op.filter("bids", events, _is("bid"))
    keyed = op.key_on("all", bids, lambda _b: "all")
    tumbling = win.TumblingWindower(timedelta(milliseconds=window_ms), EPOCH)
    best = win.max_window(
        "max", keyed, clock(), tumbling, by=lambda b: (b["price"], b["auction"], b["bidder"], b["date_time"])
    )
    return op.map(
        "q7",
        best.down,
        lambda kv: (
            ms(kv[1][0], window_ms) + window_ms,
            kv[1][1]["auction"],
            kv[1][1]["bidder"],
            kv[1][1]["price"],
            kv[1][1]["date_time"],
        ),
    )


def _q8_pairs(kv: tuple[str, tuple[int, list[Record]]]) -> list[tuple[Any, ...]]:
    key, (window_id, members) = kv
    persons = [r for r in members if r["kind"] == "person"]
    reserves = [r["reserve"] for r in members if r["kind"] == "auction"]
    return [(window_id, int(key), person["name"], reserve) for person in persons for reserve in reserves]


def q8(flow: Dataflow, events: Stream[Record], args: argparse.Namespace) -> Stream[Any]:
    """Persons who opened an auction in the same tumbling window.

    ``join_window`` over two branches (persons, auctions) loses items as late: Bytewax interleaves
    the branches' batches, not their event times, so one side's watermark closes windows the other
    side still feeds. The join is therefore a ``collect_window`` over the one stream of persons and
    auctions keyed by person id, and the pairs of each window are formed when it closes.
    """
    window_ms = args.window_ms
    wanted = op.filter("q8-filter", events, lambda r: r["kind"] in ("person", "auction"))
    keyed = op.key_on("q8-key", wanted, lambda r: str(r["id"] if r["kind"] == "person" else r["seller"]))
    tumbling = win.TumblingWindower(timedelta(milliseconds=window_ms), EPOCH)
    gathered = win.collect_window("gather", keyed, clock(), tumbling)
    pairs = op.flat_map("q8", gathered.down, _q8_pairs)
    return op.map("q8-start", pairs, lambda row: (ms(row[0], window_ms), *row[1:]))


def q13(flow: Dataflow, events: Stream[Record], args: argparse.Namespace) -> Stream[Any]:
    """Bids joined with the bounded side input (a dict the map closes over)."""
    side = {key: str(key) for key in range(peers.SIDE_INPUT_SIZE)}
    size = peers.SIDE_INPUT_SIZE
    bids = op.filter("bids", events, _is("bid"))
    return op.map(
        "q13",
        bids,
        lambda b: (b["auction"], b["bidder"], b["price"], b["date_time"], side[b["bidder"] % size]),
    )


BUILDERS = {"q0": q0, "q1": q1, "q2": q2, "q3": q3, "q5": q5, "q7": q7, "q8": q8, "q13": q13}
WINDOWED_BY_END = {"q5", "q7"}


def build(args: argparse.Namespace, sink_list: list[Any]) -> Dataflow:
    """The dataflow of ``args.query`` reading ``args.events_file`` into ``sink_list``."""
    flow = Dataflow(f"nexmark-{args.query}")
    lines = op.input("events", flow, FileSource(args.events_file))
    events = op.map("parse", lines, json.loads)
    op.output("out", BUILDERS[args.query](flow, events, args), TestingSink(sink_list))
    return flow


def parse_args() -> argparse.Namespace:
    """The command line: ``--query``, ``--events-file``, ``--out-json``, window sizes."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--query", required=True, choices=peers.QUERIES)
    parser.add_argument("--events-file", required=True, type=Path)
    parser.add_argument("--out-json", required=True, type=Path)
    parser.add_argument("--window-ms", type=int, default=peers.WINDOW_MS)
    parser.add_argument("--slide-ms", type=int, default=peers.SLIDE_MS)
    return parser.parse_args()


def main() -> None:
    """Build, time and report one query."""
    args = parse_args()
    able, how = peers.expressible("bytewax", args.query)
    report: dict[str, Any] = {"peer": "bytewax", "query": args.query, "expressible": able}
    report["versions"] = {"bytewax": bytewax.__version__} if hasattr(bytewax, "__version__") else {}
    events = sum(1 for _ in args.events_file.open(encoding="utf-8"))
    report["events"] = events
    if not able:
        report.update(
            seconds=None, events_per_s=None, results=None, digest=None, note=f"not expressible: {how}"
        )
        peers.write_report(args.out_json, report)
        return
    out: list[Any] = []
    flow = build(args, out)
    startup = time.perf_counter() - STARTED
    began = time.perf_counter()
    run_main(flow)
    seconds = time.perf_counter() - began
    rows = out
    if args.query in WINDOWED_BY_END:
        last_time = peers.max_event_time(args.events_file)
        rows = [row for row in out if row[0] <= last_time]
    count, digest = peers.digest(rows)
    note = f"{how}; start-up {startup:.2f} s (interpreter start excluded); sink: in-memory list"
    report.update(
        seconds=seconds,
        events_per_s=events / seconds if seconds > 0 else None,
        results=count,
        digest=digest,
        startup_s=startup,
        emitted=len(out),
        note=note,
    )
    peers.write_report(args.out_json, report)


if __name__ == "__main__":
    main()
