"""The PyFlink peer's queries as text: Flink SQL, the Python functions its UDFs wrap, the command line.

Theory of operation: everything of the PyFlink peer that does not need PyFlink lives here (standard
library only), so that it is imported and tested in jetlet's venv as in the peer's; the runner
(:mod:`.pyflink_runner`) wraps :data:`PYTHON_FUNCTIONS` as Flink UDFs and runs :func:`select`.

The SQL reads the ``events`` table (:func:`source_ddl`: the events file through Flink's
``filesystem`` connector and ``json`` format, the event time ``ts`` from ``date_time`` with a
watermark 1 ms behind the greatest time seen, since several events share a millisecond) through
the views :data:`VIEWS` (window functions take a table or a view, not a subquery), and writes the
canonical columns of :data:`bench.nexmark_peers.ROW_FIELDS` into ``results`` (:func:`sink_ddl`:
JSON lines); window bounds are written as epoch milliseconds (:func:`epoch_ms`, the session time
zone being UTC). :func:`canonical_rows` reads them back and drops the windows still open at the
last event.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench import nexmark_peers as peers

LONG_FIELDS = frozenset(
    (
        "id",
        "initial_bid",
        "reserve",
        "expires",
        "seller",
        "category",
        "auction",
        "bidder",
        "price",
        "date_time",
    )
)

WINDOWED_BY_END = frozenset(("q5", "q7"))
"""Queries whose first column is a window end: rows of windows open at the last event are dropped."""


# --------------------------------------------------------------------------- Python functions (per row)


def to_euro(price: int) -> int:
    """Q1: the price in euros (cents, rounded down), Beam's ``DOLLAR_TO_EURO`` of 0.89."""
    return price * 89 // 100


def sampled(auction: int | None) -> bool:
    """Q2: whether the bid is on every 123rd auction (false for the other events' null auction:
    Flink's planner may call the function before it applies the SQL filter on the kind)."""
    return auction is not None and auction % peers.AUCTION_SKIP == 0


SIDE_INPUT = {key: str(key) for key in range(peers.SIDE_INPUT_SIZE)}


def side_value(bidder: int) -> str:
    """Q13: the bounded side input's value for the bidder (the entry ``bidder % size``)."""
    return SIDE_INPUT[bidder % peers.SIDE_INPUT_SIZE]


Auction = tuple[int, int, int, int, int, int]
"""What Q4/Q6 keep of an auction: ``(id, date_time, expires, reserve, category, seller)``."""


def beats(auction: Auction, best: tuple[int, int] | None, price: int, date_time: int) -> bool:
    """Q4/Q6: whether a bid counts for ``auction`` (within its lifetime, at least the reserve) and beats
    ``best`` (``(price, date_time)``: the higher price wins, then the earlier bid)."""
    _, opened, expires, reserve, _, _ = auction
    if not (opened <= date_time < expires and price >= reserve):
        return False
    return best is None or (price, -date_time) > (best[0], -best[1])


def latest_winners(
    kept: list[tuple[int, int, int]], winner: tuple[int, int, int]
) -> list[tuple[int, int, int]]:
    """Q6: a seller's winners ``(expires, auction id, price)`` with ``winner`` added, the
    :data:`~bench.nexmark_peers.LAST_AUCTIONS` latest by ``(expires, id)`` (the closing order)."""
    return sorted([*kept, winner])[-peers.LAST_AUCTIONS :]


PYTHON_FUNCTIONS: dict[str, tuple[Callable[..., Any], str]] = {
    "to_euro": (to_euro, "BIGINT"),
    "sampled": (sampled, "BOOLEAN"),
    "side_value": (side_value, "STRING"),
}
"""The per-row Python functions by their SQL names, with their SQL result types."""


# --------------------------------------------------------------------------- SQL


def interval(ms: int) -> str:
    """A SQL interval literal of ``ms`` milliseconds (seconds with 3 decimals)."""
    return f"INTERVAL '{ms // 1000}.{ms % 1000:03d}' SECOND(6, 3)"


def source_ddl(events_file: Path) -> str:
    """The ``events`` table: the events file read by the filesystem connector as JSON lines."""
    columns = [f"`{name}` {'BIGINT' if name in LONG_FIELDS else 'STRING'}" for name in peers.ROW_FIELDS["q0"]]
    columns.append("ts AS TO_TIMESTAMP_LTZ(date_time, 3)")
    columns.append("WATERMARK FOR ts AS ts - INTERVAL '0.001' SECOND")
    return (
        "CREATE TEMPORARY TABLE events (\n  "
        + ",\n  ".join(columns)
        + f"\n) WITH ('connector' = 'filesystem', 'path' = '{events_file}', 'format' = 'json')"
    )


SINK_TYPES: dict[str, tuple[str, ...]] = {
    "q0": tuple("BIGINT" if f in LONG_FIELDS else "STRING" for f in peers.ROW_FIELDS["q0"]),
    "q1": ("BIGINT", "BIGINT", "BIGINT", "BIGINT", "STRING"),
    "q2": ("BIGINT", "BIGINT"),
    "q3": ("STRING", "STRING", "STRING", "BIGINT"),
    "q5": ("BIGINT", "BIGINT", "BIGINT"),
    "q7": ("BIGINT", "BIGINT", "BIGINT", "BIGINT", "BIGINT"),
    "q8": ("BIGINT", "BIGINT", "STRING", "BIGINT"),
    "q13": ("BIGINT", "BIGINT", "BIGINT", "BIGINT", "STRING"),
    "q4": ("BIGINT", "DOUBLE", "BIGINT"),
    "q6": ("BIGINT", "DOUBLE", "BIGINT"),
}

UPDATING = frozenset(("q4", "q6"))
"""Queries whose sink gets every update of a key, counted in an ``updates`` column: the row with the
most updates is the key's last value."""


def sink_fields(query: str) -> tuple[str, ...]:
    """The sink's columns: the canonical ones, and ``updates`` for an updating query."""
    return (*peers.ROW_FIELDS[query], "updates") if query in UPDATING else peers.ROW_FIELDS[query]


def sink_ddl(query: str, out_dir: Path) -> str:
    """The ``results`` table: JSON lines in ``out_dir``, the query's canonical columns."""
    columns = [f"`{name}` {kind}" for name, kind in zip(sink_fields(query), SINK_TYPES[query], strict=True)]
    return (
        "CREATE TEMPORARY TABLE results (\n  "
        + ",\n  ".join(columns)
        + f"\n) WITH ('connector' = 'filesystem', 'path' = '{out_dir}', 'format' = 'json')"
    )


def epoch_ms(column: str) -> str:
    """SQL: a window bound (a TIMESTAMP(3) of the UTC session) as epoch milliseconds."""
    seconds = f"CAST(TIMESTAMPDIFF(SECOND, TIMESTAMP '1970-01-01 00:00:00', {column}) AS BIGINT)"
    return f"{seconds} * 1000 + MOD(EXTRACT(MILLISECOND FROM {column}), 1000)"


VIEWS = {kind: f"SELECT * FROM events WHERE kind = '{kind[:-1]}'" for kind in ("bids", "persons", "auctions")}
"""Views over ``events`` by kind (a window function takes a table or view, not a subquery)."""


def select(query: str, window_ms: int, slide_ms: int) -> str:
    """The query's SELECT over ``events``, producing the canonical columns in order."""
    size, slide = interval(window_ms), interval(slide_ms)
    window_end_ms = epoch_ms("window_end")
    if query == "q0":
        return "SELECT " + ", ".join(f"`{f}`" for f in peers.ROW_FIELDS["q0"]) + " FROM events"
    if query == "q1":
        return "SELECT auction, bidder, to_euro(price), date_time, extra FROM bids"
    if query == "q2":
        return "SELECT auction, price FROM bids WHERE sampled(auction)"
    if query == "q3":
        states = ", ".join(f"'{state}'" for state in peers.Q3_STATES)
        return (
            "SELECT P.name, P.city, P.state, A.id FROM "
            f"(SELECT id, seller FROM auctions WHERE category = {peers.Q3_CATEGORY}) A "
            f"JOIN (SELECT id, name, city, state FROM persons WHERE state IN ({states})) P "
            "ON A.seller = P.id"
        )
    if query == "q5":
        counts = (
            "SELECT window_start, window_end, auction, COUNT(*) AS bids "
            f"FROM TABLE(HOP(TABLE bids, DESCRIPTOR(ts), {slide}, {size})) "
            "GROUP BY window_start, window_end, auction"
        )
        ranked = (
            "SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end "
            f"ORDER BY bids DESC, auction DESC) AS rn FROM ({counts})"
        )
        return f"SELECT {window_end_ms}, auction, bids FROM ({ranked}) WHERE rn = 1"
    if query == "q7":
        ranked = (
            "SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end "
            "ORDER BY price DESC, auction DESC, bidder DESC, date_time DESC) AS rn "
            f"FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), {size}))"
        )
        return f"SELECT {window_end_ms}, auction, bidder, price, date_time FROM ({ranked}) WHERE rn = 1"
    if query == "q8":
        persons = (
            "SELECT id, name, window_start, window_end "
            f"FROM TABLE(TUMBLE(TABLE persons, DESCRIPTOR(ts), {size}))"
        )
        auctions = (
            "SELECT seller, reserve, window_start, window_end "
            f"FROM TABLE(TUMBLE(TABLE auctions, DESCRIPTOR(ts), {size}))"
        )
        start_ms = epoch_ms("P.window_start")
        return (
            f"SELECT {start_ms}, P.id, P.name, A.reserve FROM ({persons}) P JOIN ({auctions}) A "
            "ON P.id = A.seller AND P.window_start = A.window_start AND P.window_end = A.window_end"
        )
    if query == "q13":
        return "SELECT auction, bidder, price, date_time, side_value(bidder) FROM bids"
    raise ValueError(f"the PyFlink runner has no SQL for {query!r}")


WINNING_BIDS_INPUT = (
    "SELECT kind, id, auction, price, date_time, expires, reserve, category, seller, ts "
    "FROM events WHERE kind IN ('auction', 'bid')"
)
"""Q4/Q6: the auctions and bids (with the event time) that become the keyed DataStream."""


# --------------------------------------------------------------------------- reading back, command line


def read_rows(query: str, out_dir: Path) -> Iterator[tuple[Any, ...]]:
    """The rows the sink wrote (every committed file under ``out_dir``), in the canonical order."""
    fields = sink_fields(query)
    for path in sorted(out_dir.rglob("*")):
        if path.is_file() and not path.name.startswith((".", "_")):
            for line in path.read_text(encoding="utf-8").splitlines():
                record = json.loads(line)
                yield tuple(record.get(field) for field in fields)


def canonical_rows(query: str, out_dir: Path, events_file: Path) -> tuple[int, list[tuple[Any, ...]]]:
    """How many rows the sink wrote, and the canonical ones (windows open at the last event dropped)."""
    rows = list(read_rows(query, out_dir))
    if query in UPDATING:
        last: dict[Any, tuple[Any, ...]] = {}
        for row in rows:
            if row[0] not in last or row[-1] > last[row[0]][-1]:
                last[row[0]] = row
        return len(rows), [row[:-1] for row in last.values()]
    if query not in WINDOWED_BY_END:
        return len(rows), rows
    last_time = peers.max_event_time(events_file)
    return len(rows), [row for row in rows if row[0] <= last_time]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line: the harness's flags (as the other runners) and ``--parallelism``."""
    parser = argparse.ArgumentParser(
        description="Run one NEXMark query on PyFlink over an events file.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--query", required=True, choices=peers.QUERIES)
    parser.add_argument("--events-file", required=True, type=Path)
    parser.add_argument("--out-json", required=True, type=Path)
    parser.add_argument("--window-ms", type=int, default=peers.WINDOW_MS)
    parser.add_argument("--slide-ms", type=int, default=peers.SLIDE_MS)
    parser.add_argument(
        "--parallelism", type=int, default=1, help="Flink tasks per operator: 1 = one member, 2 = two"
    )
    parser.add_argument(
        "--python-mode",
        choices=("thread", "process"),
        default="thread",
        help="python.execution-mode: thread (embedded, the default here) or process (Flink's default)",
    )
    args = parser.parse_args(argv)
    if args.parallelism < 1:
        parser.error(f"--parallelism must be at least 1, got {args.parallelism}")
    return args
