"""Run one NEXMark query on PySpark Structured Streaming over an events file; a JSON report.

Theory of operation: run with the PySpark venv's interpreter (``python -m
bench.nexmark_peers.pyspark_runner --query q5 --events-file F --out-json R``). It starts a local
SparkSession (``local[2]``, 2 shuffle partitions for the 2 cores, UI off) and reports that
start-up (JVM included) apart. The timed part is one streaming query from ``start()`` to its end:
Spark's file source reads the JSON lines against a declared schema (parsing in the JVM is Spark's
cost), the query runs in the DataFrame API, and a ``foreachBatch`` sink collects each micro-batch
into the driver as Arrow (``toArrow``), the cheapest way into Python (Bytewax's sink is a list).
The query runs with ``trigger(availableNow=True)``: all of the file, then the no-data batch that
lets the watermark (event time, no delay) close the windows that ended by the last event.

Per query: Q0-Q2 select/filter; Q3 a stream-stream join without watermark; Q5 a windowed count per
auction in append mode, the top auction per window taken in ``foreachBatch`` (all counts of a
window arrive in the batch that closes it); Q7 a tumbling window with the max of a struct; Q8 a
stream-stream join on person id and window with watermarks; Q13 a stream-static join. Q4 and Q6
are not expressible: ``--verify`` builds them (join, then two aggregations) and records the
AnalysisException Spark raises in each output mode.
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()

import argparse  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pyarrow as pa  # noqa: E402
import pyspark  # noqa: E402
from bench import nexmark_peers as peers  # noqa: E402
from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql.types import LongType, StringType, StructField, StructType  # noqa: E402

LONG_FIELDS = {
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
}
SCHEMA = StructType(
    [StructField("kind", StringType())]
    + [
        StructField(name, LongType() if name in LONG_FIELDS else StringType())
        for name in peers.ROW_FIELDS["q0"]
        if name != "kind"
    ]
)


def session() -> SparkSession:
    """A local SparkSession sized for this machine (2 cores)."""
    return (
        SparkSession.builder.master("local[2]")
        .appName("nexmark-peer")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "100000")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )


def read_events(spark: SparkSession, events_file: Path) -> DataFrame:
    """The events file as a stream, with ``ts`` (event time) and a watermark without delay."""
    stream = (
        spark.readStream.schema(SCHEMA)
        .option("pathGlobFilter", events_file.name)
        .option("maxFilesPerTrigger", 1)
        .json(str(events_file.parent))
    )
    return stream.withColumn("ts", F.timestamp_millis("date_time")).withWatermark("ts", "0 seconds")


def _bids(events: DataFrame) -> DataFrame:
    return events.where(F.col("kind") == "bid")


def _duration(ms: int) -> str:
    return f"{ms} milliseconds"


def q0(events: DataFrame, args: argparse.Namespace) -> DataFrame:
    """Every event, all fields."""
    return events.select(*peers.ROW_FIELDS["q0"])


def q1(events: DataFrame, args: argparse.Namespace) -> DataFrame:
    """Bids, the price in euros."""
    price = F.expr("price * 89 div 100").alias("price")
    return _bids(events).select("auction", "bidder", price, "date_time", "extra")


def q2(events: DataFrame, args: argparse.Namespace) -> DataFrame:
    """``(auction, price)`` of the bids on every 123rd auction."""
    return _bids(events).where(F.col("auction") % peers.AUCTION_SKIP == 0).select("auction", "price")


def q3(events: DataFrame, args: argparse.Namespace) -> DataFrame:
    """Persons of OR/ID/CA joined with their category-10 auctions (stream-stream join, no watermark)."""
    persons = events.where((F.col("kind") == "person") & F.col("state").isin(*peers.Q3_STATES))
    persons = persons.select(F.col("id").alias("person_id"), "name", "city", "state")
    auctions = events.where((F.col("kind") == "auction") & (F.col("category") == peers.Q3_CATEGORY))
    auctions = auctions.select(F.col("id").alias("auction_id"), "seller")
    joined = persons.join(auctions, F.col("person_id") == F.col("seller"))
    return joined.select("name", "city", "state", "auction_id")


def q5(events: DataFrame, args: argparse.Namespace) -> DataFrame:
    """Bids per auction in sliding windows (append mode); the top per window comes in foreachBatch."""
    window = F.window("ts", _duration(args.window_ms), _duration(args.slide_ms))
    return _bids(events).groupBy(window.alias("window"), "auction").count()


def q5_top(batch: DataFrame) -> DataFrame:
    """The top auction (most bids, then the higher id) of each window of a batch of final counts."""
    best = batch.groupBy("window").agg(F.max(F.struct("count", "auction")).alias("best"))
    return best.select(
        F.unix_millis(F.col("window.end")).alias("window_end"),
        F.col("best.auction").alias("auction"),
        F.col("best.count").alias("bids"),
    )


def q7(events: DataFrame, args: argparse.Namespace) -> DataFrame:
    """The highest bid of each tumbling window (greatest ``(price, auction, bidder, date_time)``)."""
    best = F.max(F.struct("price", "auction", "bidder", "date_time")).alias("best")
    windows = _bids(events).groupBy(F.window("ts", _duration(args.window_ms)).alias("window")).agg(best)
    return windows.select(
        F.unix_millis(F.col("window.end")).alias("window_end"),
        "best.auction",
        "best.bidder",
        "best.price",
        "best.date_time",
    )


def q8(events: DataFrame, args: argparse.Namespace) -> DataFrame:
    """Persons who opened an auction in the same tumbling window (stream-stream join on the window)."""
    length = _duration(args.window_ms)
    persons = events.where(F.col("kind") == "person").select(
        F.window("ts", length).alias("person_window"), F.col("id").alias("person_id"), "name"
    )
    auctions = events.where(F.col("kind") == "auction").select(
        F.window("ts", length).alias("auction_window"), "seller", "reserve"
    )
    condition = (F.col("person_id") == F.col("seller")) & (F.col("person_window") == F.col("auction_window"))
    joined = persons.join(auctions, condition)
    return joined.select(
        F.unix_millis(F.col("person_window.start")).alias("window_start"), "person_id", "name", "reserve"
    )


def q13(events: DataFrame, args: argparse.Namespace) -> DataFrame:
    """Bids joined with the bounded side input, a static DataFrame (stream-static join)."""
    spark = events.sparkSession
    side = spark.createDataFrame(
        [(key, str(key)) for key in range(peers.SIDE_INPUT_SIZE)], "side_key long, side_value string"
    )
    bids = _bids(events).withColumn("side_key", F.col("bidder") % peers.SIDE_INPUT_SIZE)
    joined = bids.join(side, "side_key")
    return joined.select("auction", "bidder", "price", "date_time", "side_value")


BUILDERS = {"q0": q0, "q1": q1, "q2": q2, "q3": q3, "q5": q5, "q7": q7, "q8": q8, "q13": q13}


def _winning_prices(events: DataFrame) -> DataFrame:
    auctions = events.where(F.col("kind") == "auction").select(
        F.col("id").alias("auction_id"),
        "seller",
        "category",
        "reserve",
        F.col("ts").alias("opened"),
        F.timestamp_millis("expires").alias("closes"),
    )
    bids = _bids(events).select("auction", "price", F.col("ts").alias("bid_time"))
    condition = (
        (F.col("auction_id") == F.col("auction"))
        & (F.col("bid_time") >= F.col("opened"))
        & (F.col("bid_time") < F.col("closes"))
        & (F.col("price") >= F.col("reserve"))
    )
    joined = auctions.join(bids, condition)
    return joined.groupBy("auction_id", "seller", "category").agg(F.max("price").alias("price"))


def verify_not_expressible(spark: SparkSession, query: str, events_file: Path, checkpoints: Path) -> str:
    """Build Q4 or Q6 in the DataFrame API and say what Spark answers in each output mode."""
    winners = _winning_prices(read_events(spark, events_file))
    key = "category" if query == "q4" else "seller"
    averages = winners.groupBy(key).agg(F.avg("price").alias("average_price"))
    answers = []
    for mode in ("append", "update", "complete"):
        writer = averages.writeStream.outputMode(mode).format("memory").queryName(f"verify_{query}_{mode}")
        try:
            started = writer.option("checkpointLocation", str(checkpoints / mode)).start()
        except Exception as error:
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            answers.append(f"{mode}: {type(error).__name__}: {first_line[:300]}")
        else:
            started.stop()
            answers.append(f"{mode}: accepted")
    return "; ".join(answers)


def run_query(spark: SparkSession, args: argparse.Namespace, checkpoint: Path) -> tuple[float, list[Any]]:
    """Run the query over the file; its seconds and its canonical rows."""
    frame = BUILDERS[args.query](read_events(spark, args.events_file), args)
    tables: list[pa.Table] = []

    def collect(batch: DataFrame, _batch_id: int) -> None:
        tables.append((q5_top(batch) if args.query == "q5" else batch).toArrow())

    writer = frame.writeStream.outputMode("append").foreachBatch(collect).trigger(availableNow=True)
    began = time.perf_counter()
    writer.option("checkpointLocation", str(checkpoint)).start().awaitTermination()
    seconds = time.perf_counter() - began
    fields = peers.ROW_FIELDS[args.query]
    rows = [tuple(row[f] for f in fields) for table in tables for row in table.to_pylist()]
    return seconds, rows


def parse_args() -> argparse.Namespace:
    """The command line: ``--query``, ``--events-file``, ``--out-json``, window sizes, ``--verify``."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--query", required=True, choices=peers.QUERIES)
    parser.add_argument("--events-file", required=True, type=Path)
    parser.add_argument("--out-json", required=True, type=Path)
    parser.add_argument("--window-ms", type=int, default=peers.WINDOW_MS)
    parser.add_argument("--slide-ms", type=int, default=peers.SLIDE_MS)
    parser.add_argument("--verify", action="store_true", help="for Q4/Q6: show Spark's answer")
    return parser.parse_args()


def main() -> None:
    """Start Spark, time and report one query."""
    args = parse_args()
    args.events_file = args.events_file.resolve()
    able, how = peers.expressible("pyspark", args.query)
    events = sum(1 for _ in args.events_file.open(encoding="utf-8"))
    report: dict[str, Any] = {"peer": "pyspark", "query": args.query, "expressible": able, "events": events}
    report["versions"] = {"pyspark": pyspark.__version__, "pyarrow": pa.__version__}
    report.update(seconds=None, events_per_s=None, results=None, digest=None, note=f"not expressible: {how}")
    if able or args.verify:
        spark = session()
        report["startup_s"] = time.perf_counter() - STARTED
        with tempfile.TemporaryDirectory(prefix="nexmark-spark-") as checkpoints:
            if not able:
                report["note"] += "; Spark says: " + verify_not_expressible(
                    spark, args.query, args.events_file, Path(checkpoints)
                )
            else:
                seconds, rows = run_query(spark, args, Path(checkpoints))
                count, digest = peers.digest(rows)
                report.update(
                    seconds=seconds,
                    events_per_s=events / seconds if seconds > 0 else None,
                    results=count,
                    digest=digest,
                    note=f"{how}; start-up {report['startup_s']:.1f} s (JVM + SparkSession), sink: "
                    "foreachBatch toArrow",
                )
        spark.stop()
    peers.write_report(args.out_json, report)


if __name__ == "__main__":
    main()
