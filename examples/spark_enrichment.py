"""Spark and jetlet together: Spark prepares the data, jetlet enriches a stream, Spark aggregates the result.

1. PySpark builds a dimension table (customers and their segment) and a batch
   of order events, and writes the events as Parquet files.
2. A jetlet job reads the events as a *stream* (``SparkSources.table(...,
   incremental=True)``: every new file once) and joins each order with its
   customer (a hash join whose build side is the Spark table, handed off with
   ``SparkSources.dataframe``), then writes the enriched orders with
   ``SparkSinks.parquet``: EXACTLY_ONCE, so a file becomes visible only when
   the snapshot after its rows completes. It runs on a local cluster of two
   member processes (the embedded instance takes no snapshots).
3. Once every order is committed, Spark reads the files and aggregates revenue
   per segment; the same join and aggregation done by Spark alone, over the
   original DataFrames, must give the same numbers.

Spark is never on the jetlet job's path: it writes files before and reads
files after. Needs ``pip install 'jetlet[spark]'`` and Java 17. Run it with
``python examples/spark_enrichment.py``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from jetlet import JobConfig, ProcessingGuarantee
from jetlet.local_cluster import local_cluster
from jetlet.pipeline import JoinClause, Pipeline
from jetlet.spark import SparkSinks, SparkSources

CUSTOMERS = 1_000
ORDERS = 50_000
ENRICHED = pa.schema([("order_id", pa.int64()), ("segment", pa.string()), ("amount", pa.int64())])


def spark_session() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("jetlet-spark-enrichment")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def committed_rows(directory: Path) -> int:
    """Rows in the files the Parquet sink has committed (hidden staged files are not counted)."""
    return sum(pq.ParquetFile(p).metadata.num_rows for p in directory.glob("part-*.parquet"))


def run(spark: Any, work: Path) -> bool:
    """The whole example in ``work``; True if jetlet's results match Spark's own computation."""
    # 1. Spark prepares a dimension table and a batch of events (customer 1000+ does not exist)
    customers = spark.range(CUSTOMERS).selectExpr(
        "id AS customer_id",
        "CASE id % 3 WHEN 0 THEN 'gold' WHEN 1 THEN 'silver' ELSE 'bronze' END AS segment",
    )
    orders = spark.range(ORDERS).selectExpr(
        "id AS order_id", "(id * 7919) % 1010 AS customer_id", "id % 50 + 1 AS amount"
    )
    orders.repartition(4).write.mode("overwrite").parquet(str(work / "orders"))

    # 2. jetlet joins the stream of orders with the customers, handed off by Spark as Parquet
    p = Pipeline()
    dimension = p.read_from(
        SparkSources.dataframe(
            customers, work / "customers", items="tuples", columns=["customer_id", "segment"]
        )
    )
    stream = p.read_from(
        SparkSources.table(
            work / "orders", items="tuples", columns=["order_id", "customer_id", "amount"], incremental=True
        )
    ).without_timestamps()
    enriched = stream.hash_join(
        dimension,
        JoinClause.on_keys(lambda order: order[1], lambda customer: customer[0]).project_right(
            lambda c: c[1]
        ),
        lambda order, segment: {"order_id": order[0], "segment": segment or "unknown", "amount": order[2]},
    )
    enriched.write_to(SparkSinks.parquet(work / "enriched", schema=ENRICHED))
    config = JobConfig(processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE, snapshot_interval_millis=500)
    started = time.monotonic()
    with local_cluster(2) as client:  # snapshots (and so the sink's commits) need a cluster
        job = client.new_job(p, config)
        deadline = time.monotonic() + 300
        while committed_rows(work / "enriched") < ORDERS:  # a stream never ends: wait for the commits
            if time.monotonic() > deadline:
                raise TimeoutError("the enriched orders were not all committed within 300 s")
            time.sleep(0.2)
        job.cancel()
    print(
        f"jetlet enriched {committed_rows(work / 'enriched'):,} orders in {time.monotonic() - started:.1f} s"
    )

    # 3. Spark aggregates jetlet's results, and computes the same from its own DataFrames
    totals = (
        spark.read.parquet(str(work / "enriched")).groupBy("segment").agg({"amount": "sum", "*": "count"})
    )
    from_jetlet = {r["segment"]: (r["count(1)"], r["sum(amount)"]) for r in totals.collect()}
    reference = (
        orders.join(customers, "customer_id", "left")
        .fillna({"segment": "unknown"})
        .groupBy("segment")
        .agg({"amount": "sum", "*": "count"})
    )
    from_spark = {r["segment"]: (r["count(1)"], r["sum(amount)"]) for r in reference.collect()}
    print(f"{'segment':<10}{'orders':>10}{'revenue':>12}   (Spark over jetlet's output | Spark alone)")
    for segment in sorted(from_spark):
        mine, theirs = from_jetlet.get(segment, (0, 0)), from_spark[segment]
        print(f"{segment:<10}{mine[0]:>10,}{mine[1]:>12,}   | {theirs[0]:>10,}{theirs[1]:>12,}")
    same = from_jetlet == from_spark
    print("\nrevenue per segment", "matches" if same else "DIFFERS FROM", "Spark's own join and aggregation")
    return same


def main() -> int:
    spark = spark_session()
    try:
        with tempfile.TemporaryDirectory(prefix="jetlet-spark-example-") as work:
            return 0 if run(spark, Path(work)) else 1
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
