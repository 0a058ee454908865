"""Spark connectors: rows per CPU-second of jetlet's hand-off paths next to PySpark's direct paths.

Every path moves the same table (``--rows`` rows of ``id long, k long,
name string, value double``, written by Spark as Parquet) in the same run:

* into Python: PySpark's best direct path, ``spark.read.parquet(t).toArrow()``
  (``maxRecordsPerBatch`` 100,000; and the same made into Python tuples,
  what a pipeline of rows needs), against jetlet's hand-off source
  ``SparkSources.table(t)`` on 1 and 2 members, as rows (tuples) and as
  Arrow batches, into a no-op sink; and pyarrow reading the same files in
  this process (the ceiling);
* out of Python into Spark: ``spark.createDataFrame(arrow_table)`` (through
  the driver), against jetlet's Parquet sink (members read the table as
  Arrow batches or rows and write it with ``SparkSinks.parquet``) and the
  Spark data source writer ``df.write.format("jetlet")`` (Spark → jetlet's
  exchange directory);
* Spark writing the table as Parquet, the Spark half of
  ``SparkSources.dataframe``.

CPU is the user + system time of every process involved, measured with
psutil before and after: this process and its descendants (the Spark JVM
and its Python workers) for Spark's paths, and the member processes plus
this one for jetlet's. Each figure is the best of ``--repeats`` runs (by
rows per CPU-second); wall-clock rows/s is shown too.

Run: ``python bench/run_all.py --only spark_bench`` (or this file alone:
``python bench/spark_bench.py [--repeats N] [--rows N]``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psutil

try:
    from bench._common import markdown_table
except ImportError:  # run from bench/ by run_all.py
    from _common import markdown_table  # type: ignore[no-redef]


def _tree(pids: Sequence[int]) -> list[psutil.Process]:
    found: dict[int, psutil.Process] = {}
    for pid in pids:
        try:
            process = psutil.Process(pid)
            found[pid] = process
            for child in process.children(recursive=True):
                found[child.pid] = child
        except psutil.NoSuchProcess:
            continue
    return list(found.values())


def _cpu(processes: list[psutil.Process]) -> dict[int, float]:
    times: dict[int, float] = {}
    for process in processes:
        try:
            t = process.cpu_times()
            times[process.pid] = t.user + t.system
        except psutil.NoSuchProcess:
            continue
    return times


def measure(run: Callable[[], int], pids: Callable[[], Sequence[int]]) -> tuple[int, float, float]:
    """Run once: (rows, wall seconds, CPU seconds of the process trees of ``pids()``)."""
    before_tree = _tree(pids())
    before = _cpu(before_tree)
    start = time.perf_counter()
    rows = run()
    wall = time.perf_counter() - start
    after = _cpu(_tree(pids()))
    cpu = sum(after[pid] - before.get(pid, 0.0) for pid in after)
    return rows, wall, cpu


def best(run: Callable[[], int], pids: Callable[[], Sequence[int]], repeats: int) -> tuple[int, float, float]:
    """The run with the most rows per CPU-second of ``repeats``."""
    runs = [measure(run, pids) for _ in range(repeats)]
    return max(runs, key=lambda r: r[0] / max(r[2], 1e-9))


def _fmt(value: float) -> str:
    return f"{float(f'{value:.3g}'):,.0f}"


def main(argv: Sequence[str] = ()) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rows", type=int, default=2_000_000)
    args = parser.parse_args(list(argv))
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    worker = str(Path(__file__).resolve().parents[1] / "worker")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (worker, os.environ.get("PYTHONPATH", "")) if p)

    import pyarrow.parquet as pq
    from pyspark.sql import SparkSession

    from jetlet.local_cluster import local_cluster
    from jetlet.pipeline import Pipeline, Sinks
    from jetlet.spark import SparkSinks, SparkSources

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("jetlet-spark-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "100000")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="jetlet-spark-bench-"))
    me = [os.getpid()]
    rows_out: list[list[str]] = []
    n = args.rows

    def row(name: str, result: tuple[int, float, float], baseline: float | None) -> float:
        rows, wall, cpu = result
        per_cpu = rows / cpu
        ratio = f"{per_cpu / baseline:.2f}" if baseline else "1.00"
        rows_out.append([name, f"{rows:,}", _fmt(rows / wall), _fmt(per_cpu), ratio])
        return per_cpu

    try:
        table = work / "table"
        df = spark.range(n).selectExpr(
            "id", "id % 1000 AS k", "concat('name-', id % 5000) AS name", "id * 0.5 AS value"
        )
        df = df.repartition(4)

        def spark_writes() -> int:
            df.write.mode("overwrite").parquet(str(table))
            return n

        spark_writes()  # the first run warms the JVM up and leaves the table for the others
        write_result = best(spark_writes, lambda: me, args.repeats)
        source = spark.read.parquet(str(table))
        columns = ["id", "k", "name", "value"]

        def to_arrow() -> int:
            return int(source.toArrow().num_rows)

        to_arrow_per_cpu = row(
            "into Python: `toArrow()` (PySpark)", best(to_arrow, lambda: me, args.repeats), None
        )

        def to_arrow_rows() -> int:
            table = source.toArrow()
            return len(list(zip(*(column.to_pylist() for column in table.columns), strict=True)))

        row(
            "into Python: `toArrow()`, then rows as tuples (PySpark)",
            best(to_arrow_rows, lambda: me, args.repeats),
            to_arrow_per_cpu,
        )

        def pyarrow_reads() -> int:
            return int(pq.read_table(table).num_rows)

        row(
            "into Python: pyarrow reads the files (ceiling)",
            best(pyarrow_reads, lambda: me, args.repeats),
            to_arrow_per_cpu,
        )
        for members in (1, 2):
            with local_cluster(members) as client:
                member_pids = list(client.pids)
                tree = lambda member_pids=member_pids: [*me, *member_pids]  # noqa: E731

                def read_job(items: str, client: Any = client) -> int:
                    p = Pipeline()
                    p.read_from(SparkSources.table(table, items=items, columns=columns)).write_to(
                        Sinks.noop()
                    )
                    client.new_job(p).join(600)
                    return n

                for items, label in (("batches", "Arrow batches"), ("tuples", "rows (tuples)")):
                    result = best(lambda items=items: read_job(items), tree, args.repeats)
                    row(
                        f"into Python: hand-off source, {members} member(s), {label}",
                        result,
                        to_arrow_per_cpu,
                    )
                if members == 2:
                    sink_results = []
                    for items, label in (("batches", "Arrow batches"), ("tuples", "rows (tuples)")):
                        out = work / f"sink-{items}"

                        def sink_job(items: str = items, out: Path = out, client: Any = client) -> int:
                            shutil.rmtree(out, ignore_errors=True)
                            p = Pipeline()
                            p.read_from(SparkSources.table(table, items=items, columns=columns)).write_to(
                                SparkSinks.parquet(out, columns=columns)
                            )
                            client.new_job(p).join(600)
                            return n

                        sink_results.append((label, best(sink_job, tree, args.repeats)))
        arrow_table = pq.read_table(table)

        def create_df() -> int:
            spark.createDataFrame(arrow_table).write.format("noop").mode("overwrite").save()
            return n

        create_per_cpu = row(
            "out of Python: `createDataFrame(arrow)` (PySpark, through the driver)",
            best(create_df, lambda: me, args.repeats),
            None,
        )
        for label, result in sink_results:
            row(
                f"out of Python: Parquet sink, 2 members, reading {label} (read + write)",
                result,
                create_per_cpu,
            )
        exchange_dir = work / "exchange"

        def datasource_write() -> int:
            shutil.rmtree(exchange_dir, ignore_errors=True)
            source.write.format("jetlet").mode("append").save(str(exchange_dir))
            return n

        row(
            'Spark → jetlet: `df.write.format("jetlet")` (Arrow batch writer)',
            best(datasource_write, lambda: me, args.repeats),
            to_arrow_per_cpu,
        )
        row(
            "Spark writes the table as Parquet (the Spark half of `SparkSources.dataframe`)",
            write_result,
            None,
        )
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    headers = ["path", "rows", "rows/s (wall)", "rows per CPU-second", "vs PySpark's direct path"]
    body = (
        f"## Spark connectors\n\n{n:,} rows (`id long, k long, name string, value double`), 4 Parquet files "
        "written by Spark. CPU: user + system time of every process involved (this process, the Spark JVM "
        "and its Python workers; or the jetlet members and this process). Best of "
        f"{args.repeats} by rows per CPU-second. `vs PySpark's direct path` divides by `toArrow()` for paths "
        "into Python and Spark → jetlet, by `createDataFrame` for paths out of Python.\n\n"
        + markdown_table(headers, rows_out)
    )
    return body


if __name__ == "__main__":
    print(main(sys.argv[1:]))
