"""NEXMark peers: the same queries run by PySpark Structured Streaming and Bytewax, on the same events.

Theory of operation. The harness (in jetlet's venv) calls :func:`run_peer`, which

1. makes the peer's own virtualenv from PyPI (:mod:`.venvs`; an install failure becomes a
   :class:`PeerRun` with ``expressible=False`` and pip's error as the note),
2. writes the events once to a neutral JSON-lines file (:mod:`.events_file`),
3. runs the peer's standalone runner (``pyspark_runner`` / ``bytewax_runner``) with the peer's
   interpreter, which times the processing alone (start-up reported apart) and writes a JSON
   report, read back into a :class:`PeerRun`.

The Hazelcast Jet peers (``hazelcast``: one member; ``hazelcast2``: two members in two JVMs) are
Java: :mod:`.hazelcast_runner` builds their Maven project instead of a venv (a failed build is
reported like a failed install) and runs it with ``java``; they generate Beam's events in a Jet
source (the generator ported to Java) instead of reading the events file.

The PyFlink peers (``pyflink``: parallelism 1, standing for one member; ``pyflink2``: parallelism
2) share one venv and :mod:`.pyflink_runner`, which runs the query in Flink SQL (Python scalar UDFs
where a query has a per-row function) on a local mini-cluster over the events file.

A query a peer cannot express is never skipped silently: :func:`expressible` says so, with the
reason, without running anything, and :func:`run_peer` returns that as its result.

Comparable results. Every query's results are reduced to *canonical rows* defined here, in one
place (:data:`ROW_FIELDS`), and :func:`digest` hashes the sorted rows, so jetlet, the peers and the
plain-Python :func:`reference_rows` can be compared by one sha256. The rules that make streaming
results comparable:

* windows are aligned to epoch 0, ``[start, end)``; a window's result counts only when the window
  *closed*, i.e. its end is at most the stream's last event time (a watermark at the last event
  closes it); windows still open when the input ends are dropped, whatever a peer emits for them;
* a query whose output is a stream of updates per key (Q4, Q6) is compared by each key's last
  value;
* Q7 keeps one bid per window, the greatest by ``(price, auction, bidder, date_time)``;
* Q13's bounded side input is Beam's: ``k`` maps to ``str(k)`` for ``k`` in ``range(SIDE_INPUT_SIZE)``,
  and a bid joins the entry ``bidder % SIDE_INPUT_SIZE`` (as jetlet's ``q13_bounded_side_input_join``).

This module uses only the standard library: the peer runners import it from their own venvs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]

QUERIES: tuple[str, ...] = ("q0", "q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8", "q13")
PEERS: tuple[str, ...] = ("pyspark", "bytewax", "pyflink", "pyflink2", "hazelcast", "hazelcast2")
PYFLINK_PEERS: dict[str, int] = {"pyflink": 1, "pyflink2": 2}
"""The PyFlink peers (:mod:`.pyflink_runner`, one venv) and their parallelism (as member counts)."""
HAZELCAST_PEERS: dict[str, int] = {"hazelcast": 1, "hazelcast2": 2}
"""The Hazelcast Jet peers (:mod:`.hazelcast_runner`, Java, no venv) and their member counts."""

WINDOW_MS = 10_000
SLIDE_MS = 1_000
AUCTION_SKIP = 123
Q3_STATES = ("OR", "ID", "CA")
Q3_CATEGORY = 10
SIDE_INPUT_SIZE = 500
LAST_AUCTIONS = 10

ROW_FIELDS: dict[str, tuple[str, ...]] = {
    "q0": (
        "kind",
        "id",
        "name",
        "email_address",
        "credit_card",
        "city",
        "state",
        "item_name",
        "description",
        "initial_bid",
        "reserve",
        "expires",
        "seller",
        "category",
        "auction",
        "bidder",
        "price",
        "channel",
        "url",
        "date_time",
        "extra",
    ),
    "q1": ("auction", "bidder", "price", "date_time", "extra"),
    "q2": ("auction", "price"),
    "q3": ("name", "city", "state", "auction_id"),
    "q4": ("category", "average_price"),
    "q5": ("window_end", "auction", "bids"),
    "q6": ("seller", "average_price"),
    "q7": ("window_end", "auction", "bidder", "price", "date_time"),
    "q8": ("window_start", "person_id", "name", "reserve"),
    "q13": ("auction", "bidder", "price", "date_time", "side_value"),
}
"""The canonical result row of each query: the fields, in order, every implementation reports."""

_NOT_EXPRESSIBLE: dict[tuple[str, str], str] = {
    ("pyspark", "q4"): (
        "needs a join of auctions and bids, the max per auction, then the average per category (two "
        "chained aggregations); Spark 4.3 rejects it in every output mode (checked by the runner with "
        "--verify): append: aggregation without watermark; update: 'possible correctness issue due to "
        "global watermark' (chained stateful operators); complete: stream-stream join unsupported"
    ),
    ("pyspark", "q6"): (
        "needs Q4's join and max per auction, then an average over each seller's last 10 auctions; the "
        "chained aggregations are rejected in every output mode as for Q4 (checked with --verify), and "
        "'last 10' needs arbitrary state (transformWithState), outside the DataFrame API"
    ),
    ("bytewax", "q4"): (
        "an auction closes at its own expiry time: needs a per-key event-time timer; Bytewax 0.21's "
        "windowers are fixed (tumbling/sliding/session) and StatefulBatchLogic.notify_at fires on "
        "system time, not event time"
    ),
    ("bytewax", "q6"): (
        "builds on Q4's winning bids (per-auction event-time close at expiry), which Bytewax 0.21's "
        "operators cannot express (notify_at is system time; windowers are fixed-size)"
    ),
}
_HOW: dict[tuple[str, str], str] = {
    ("pyspark", "q5"): "windowed count per auction in append mode; top per window in foreachBatch",
    ("pyspark", "q3"): "stream-stream inner join without watermark (unbounded state)",
    ("pyspark", "q8"): "stream-stream inner join on person id and tumbling window, watermark on event time",
    ("pyspark", "q13"): "stream-static join with the side input as a static DataFrame",
    ("pyspark", "q7"): "tumbling window, max of struct(price, auction, bidder, date_time)",
    ("bytewax", "q3"): "stateful_map keyed by person id (keeps the person and the unmatched auctions)",
    ("bytewax", "q5"): "count_window (sliding, EventClock), then max_window (tumbling one slide) per window",
    ("bytewax", "q7"): "max_window over a tumbling window, all bids under one key",
    ("bytewax", "q8"): (
        "collect_window (tumbling) of persons and auctions keyed by person id, pairs formed at close "
        "(join_window over two branches drops items as late)"
    ),
    ("bytewax", "q13"): "map looking the side input up in a dict (Bytewax has no side-input operator)",
    **{
        (peer, query): how
        for peer in HAZELCAST_PEERS
        for query, how in {
            "q3": "keyed flatMapStateful by person id (keeps the person and the unmatched auctions)",
            "q4": (
                "Core API processor per auction id (custom transform) closing auctions as the watermark "
                "passes their expiry, then mapStateful average per category"
            ),
            "q5": "sliding window counting() per auction, then a tumbling window of one slide with maxBy",
            "q6": (
                "Q4's closing processor, then mapStateful per seller keeping the 10 latest winners by "
                "(expires, id)"
            ),
            "q7": "tumbling window maxBy (price, auction, bidder, date_time)",
            "q8": "tumbling window aggregate2 (co-group) of persons and auctions by person id",
            "q13": "map looking the side input up in an array the function holds",
        }.items()
    },
    **{
        (peer, query): how
        for peer in PYFLINK_PEERS
        for query, how in {
            "q0": "Flink SQL projection of every field",
            "q1": "Flink SQL filter; the currency conversion a Python scalar UDF per bid",
            "q2": "Flink SQL filter on the kind; auction % 123 = 0 a Python scalar UDF",
            "q3": "Flink SQL regular join (unbounded state) of the filtered persons and auctions",
            "q5": "Flink SQL HOP window count per auction, then a window Top-N (row_number = 1)",
            "q7": "Flink SQL TUMBLE window Top-N by (price, auction, bidder, date_time)",
            "q8": "Flink SQL window join of the TUMBLE windows of persons and auctions on person id",
            "q13": "Flink SQL filter; the side-input lookup a Python scalar UDF per bid (a dict)",
            "q4": (
                "DataStream of auctions and bids (from Flink SQL) keyed by auction id: a Python "
                "KeyedProcessFunction with an event-time timer at each auction's expiry emits its "
                "winning bid, then a Python keyed function averages per category"
            ),
            "q6": (
                "Q4's Python KeyedProcessFunction per auction (event-time timer at the expiry), then a "
                "Python keyed function per seller keeping its 10 latest winners by (expires, id)"
            ),
        }.items()
    },
}


@dataclasses.dataclass
class PeerRun:
    """One peer's run of one query: its throughput and its results' digest, or why it did not run."""

    peer: str
    query: str
    events: int
    seconds: float | None
    events_per_s: float | None
    expressible: bool
    note: str
    results: int | None = None
    digest: str | None = None


def expressible(peer: str, query: str) -> tuple[bool, str]:
    """Whether ``peer`` can express ``query`` in its own API, and how (or why not)."""
    if peer not in PEERS:
        raise ValueError(f"unknown peer {peer!r}; known: {PEERS}")
    if query not in QUERIES:
        raise ValueError(f"unknown query {query!r}; known: {QUERIES}")
    reason = _NOT_EXPRESSIBLE.get((peer, query))
    if reason is not None:
        return False, reason
    return True, _HOW.get((peer, query), "map/filter")


# --------------------------------------------------------------------------- canonical results


def digest(rows: Iterable[Sequence[Any]]) -> tuple[int, str]:
    """How many rows, and the sha256 of their sorted compact JSON lines (the canonical digest)."""
    lines = sorted(json.dumps(list(row), separators=(",", ":")) for row in rows)
    return len(lines), hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


def read_records(events_file: Path) -> Iterator[dict[str, Any]]:
    """The events of an events file as plain dicts, in order."""
    with Path(events_file).open(encoding="utf-8") as lines:
        for line in lines:
            yield json.loads(line)


def max_event_time(events_file: Path) -> int:
    """The last (greatest) event time of the file; windows ending after it are still open."""
    return max((record["date_time"] for record in read_records(events_file)), default=-1)


def sliding_window_ends(timestamp: int, window_ms: int, slide_ms: int) -> range:
    """The ends of the windows (aligned to 0, ``[end - window_ms, end)``) that hold ``timestamp``."""
    first = (timestamp // slide_ms + 1) * slide_ms
    return range(first, timestamp + window_ms + 1, slide_ms)


def side_value(bidder: int) -> str:
    """Q13's side-input value for a bid by ``bidder`` (Beam's ``BoundedSideInputJoin``)."""
    return str(bidder % SIDE_INPUT_SIZE)


def average(values: Sequence[int]) -> float:
    """The mean, rounded to 6 decimals so that every engine's double agrees."""
    return round(sum(values) / len(values), 6)


def _bids(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["kind"] == "bid"]


def _q0(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [tuple(r.get(field) for field in ROW_FIELDS["q0"]) for r in records]


def _q1(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (b["auction"], b["bidder"], b["price"] * 89 // 100, b["date_time"], b["extra"])
        for b in _bids(records)
    ]


def _q2(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(b["auction"], b["price"]) for b in _bids(records) if b["auction"] % AUCTION_SKIP == 0]


def _q3(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    persons = [r for r in records if r["kind"] == "person" and r["state"] in Q3_STATES]
    auctions = [r for r in records if r["kind"] == "auction" and r["category"] == Q3_CATEGORY]
    return [
        (p["name"], p["city"], p["state"], a["id"])
        for p in persons
        for a in auctions
        if a["seller"] == p["id"]
    ]


def winning_bids(records: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """``(auction, winning bid)`` of the auctions closed by the last event, in closing order.

    A bid counts if it falls in ``[auction.date_time, auction.expires)`` and reaches the reserve;
    the winner has the highest price, then the earliest time (Beam's ``WinningBids``).
    """
    last_time = max((r["date_time"] for r in records), default=-1)
    auctions = [r for r in records if r["kind"] == "auction" and r["expires"] <= last_time]
    winners = []
    for auction in sorted(auctions, key=lambda a: (a["expires"], a["id"])):
        best = None
        for bid in _bids(records):
            valid = (
                bid["auction"] == auction["id"]
                and auction["date_time"] <= bid["date_time"] < auction["expires"]
                and bid["price"] >= auction["reserve"]
            )
            if valid and (
                best is None or (bid["price"], -bid["date_time"]) > (best["price"], -best["date_time"])
            ):
                best = bid
        if best is not None:
            winners.append((auction, best))
    return winners


def _q4(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    prices: dict[int, list[int]] = defaultdict(list)
    for auction, bid in winning_bids(records):
        prices[auction["category"]].append(bid["price"])
    return [(category, average(values)) for category, values in prices.items()]


def _q6(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    prices: dict[int, list[int]] = defaultdict(list)
    for auction, bid in winning_bids(records):
        prices[auction["seller"]].append(bid["price"])
    return [(seller, average(values[-LAST_AUCTIONS:])) for seller, values in prices.items()]


def _q5(records: list[dict[str, Any]], window_ms: int, slide_ms: int) -> list[tuple[Any, ...]]:
    last_time = max((r["date_time"] for r in records), default=-1)
    counts: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for bid in _bids(records):
        for end in sliding_window_ends(bid["date_time"], window_ms, slide_ms):
            counts[end][bid["auction"]] += 1
    rows = []
    for end, per_auction in counts.items():
        if end <= last_time:
            bids, auction = max((n, a) for a, n in per_auction.items())
            rows.append((end, auction, bids))
    return rows


def _q7(records: list[dict[str, Any]], window_ms: int) -> list[tuple[Any, ...]]:
    last_time = max((r["date_time"] for r in records), default=-1)
    best: dict[int, tuple[int, int, int, int]] = {}
    for bid in _bids(records):
        end = (bid["date_time"] // window_ms + 1) * window_ms
        candidate = (bid["price"], bid["auction"], bid["bidder"], bid["date_time"])
        best[end] = max(best.get(end, candidate), candidate)
    return [(end, a, b, p, t) for end, (p, a, b, t) in best.items() if end <= last_time]


def _q8(records: list[dict[str, Any]], window_ms: int) -> list[tuple[Any, ...]]:
    persons = [r for r in records if r["kind"] == "person"]
    auctions = [r for r in records if r["kind"] == "auction"]
    return [
        (p["date_time"] // window_ms * window_ms, p["id"], p["name"], a["reserve"])
        for p in persons
        for a in auctions
        if a["seller"] == p["id"] and a["date_time"] // window_ms == p["date_time"] // window_ms
    ]


def _q13(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (b["auction"], b["bidder"], b["price"], b["date_time"], side_value(b["bidder"]))
        for b in _bids(records)
    ]


def reference_rows(
    query: str, events_file: Path, window_ms: int = WINDOW_MS, slide_ms: int = SLIDE_MS
) -> list[tuple[Any, ...]]:
    """The canonical rows of ``query`` over the file, by plain loops (slow, for checking)."""
    records = list(read_records(events_file))
    simple = {"q0": _q0, "q1": _q1, "q2": _q2, "q3": _q3, "q4": _q4, "q6": _q6, "q13": _q13}
    if query in simple:
        return simple[query](records)
    if query == "q5":
        return _q5(records, window_ms, slide_ms)
    if query == "q7":
        return _q7(records, window_ms)
    if query == "q8":
        return _q8(records, window_ms)
    raise ValueError(f"unknown query {query!r}; known: {QUERIES}")


def reference_digest(
    query: str, events_file: Path, window_ms: int = WINDOW_MS, slide_ms: int = SLIDE_MS
) -> tuple[int, str]:
    """How many canonical rows ``query`` has over the file, and their :func:`digest`."""
    return digest(reference_rows(query, events_file, window_ms, slide_ms))


# --------------------------------------------------------------------------- running a peer


def _not_run(peer: str, query: str, events: int, note: str) -> PeerRun:
    return PeerRun(peer, query, events, None, None, False, note)


def runner_command(
    python: str,
    peer: str,
    query: str,
    events_file: Path,
    out_json: Path,
    window_ms: int = WINDOW_MS,
    slide_ms: int = SLIDE_MS,
) -> list[str]:
    """The command running ``peer``'s runner module on ``query`` with the interpreter ``python``."""
    runner = "pyflink" if peer in PYFLINK_PEERS else peer
    command = [python, "-m", f"bench.nexmark_peers.{runner}_runner", "--query", query]
    command += ["--events-file", str(events_file), "--out-json", str(out_json)]
    command += ["--window-ms", str(window_ms), "--slide-ms", str(slide_ms)]
    if peer in PYFLINK_PEERS:
        command += ["--parallelism", str(PYFLINK_PEERS[peer])]
    return command


def run_peer_on_file(
    peer: str,
    query: str,
    events_file: Path,
    events: int,
    timeout_s: float = 600.0,
    window_ms: int = WINDOW_MS,
    slide_ms: int = SLIDE_MS,
) -> PeerRun:
    """Run ``query`` on ``peer`` over an existing events file (its venv made first if needed)."""
    from . import venvs

    able, how = expressible(peer, query)
    if not able:
        return _not_run(peer, query, events, f"not expressible: {how}")
    try:
        venvs.ensure_venv(peer)
    except venvs.PeerInstallError as error:
        return _not_run(peer, query, events, f"not installed: {error}")
    python = str(venvs.venv_python(peer))
    out_json = Path(events_file).with_name(f"peer-{peer}-{query}-{os.getpid()}.json")
    command = runner_command(python, peer, query, events_file, out_json, window_ms, slide_ms)
    env = {
        **os.environ,
        "PYSPARK_PYTHON": python,
        "PYSPARK_DRIVER_PYTHON": python,
        "PYTHONPATH": str(REPO_ROOT),
    }
    try:
        done = subprocess.run(
            command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        return PeerRun(peer, query, events, None, None, True, f"{how}; timed out after {timeout_s:.0f} s")
    if done.returncode != 0 or not out_json.exists():
        tail = (done.stdout + done.stderr).strip()[-2000:]
        return PeerRun(peer, query, events, None, None, True, f"{how}; runner failed: {tail}")
    report = json.loads(out_json.read_text(encoding="utf-8"))
    out_json.unlink()
    return PeerRun(
        peer=peer,
        query=query,
        events=int(report["events"]),
        seconds=report["seconds"],
        events_per_s=report["events_per_s"],
        expressible=bool(report["expressible"]),
        note=str(report["note"]),
        results=report["results"],
        digest=report["digest"],
    )


def run_peer(
    peer: str, query: str, events: int, timeout_s: float = 600.0, generator: str = "beam"
) -> PeerRun:
    """Run ``query`` on ``peer`` over the first ``events`` events of ``generator``."""
    able, how = expressible(peer, query)
    if not able:
        return _not_run(peer, query, events, f"not expressible: {how}")
    if peer in HAZELCAST_PEERS:
        if generator != "beam":
            return _not_run(peer, query, events, f"not run: only Beam's generator is ported to Java ({how})")
        from . import hazelcast_runner

        return hazelcast_runner.run(peer, query, events, how, timeout_s)
    from .events_file import ensure_events_file

    return run_peer_on_file(peer, query, ensure_events_file(generator, events), events, timeout_s)


def write_report(out_json: Path, report: dict[str, Any]) -> None:
    """Write a runner's JSON report (the fields of :class:`PeerRun` plus start-up and versions)."""
    Path(out_json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
