"""The Spark data source ``"jetlet"``, auto-registered by ``pyspark_jetlet``, against a real SparkSession.

Spark → jetlet: ``df.write.format("jetlet")`` and
``df.writeStream.format("jetlet")`` stage per task attempt and commit one
manifest per (query id, batch id); the tests inject task failures (a
``mapInArrow`` that fails on a chosen attempt), fail whole jobs, replay a
micro-batch by deleting the last commit-log entry, and restart queries
while a jetlet job consumes the stream. jetlet → Spark:
``spark.read/readStream.format("jetlet")`` over the Parquet sink's
committed files. Rows are compared with Spark's own DataFrames.
"""

from __future__ import annotations

import collections
import pathlib
import threading
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import jetlet
from jetlet.pipeline import Pipeline, Sinks, Sources
from jetlet.spark import SparkSinks, SparkSources, exchange
from jetlet.testing import wait_until

pytestmark = pytest.mark.spark


def _committed_rows(root: pathlib.Path) -> collections.Counter[tuple[Any, ...]]:
    """Every row of every file that a manifest lists (what jetlet consumes)."""
    rows: collections.Counter[tuple[Any, ...]] = collections.Counter()
    for query, batches in exchange.manifests(root).items():
        for batch in batches:
            for entry in exchange.read_manifest(root, query, batch)["files"]:
                table = pq.read_table(root / entry["path"])
                assert table.num_rows == entry["rows"]
                rows.update(zip(*(c.to_pylist() for c in table.columns), strict=True))
    return rows


def _staged_files(root: pathlib.Path) -> set[pathlib.Path]:
    return set((root / exchange.STAGING).rglob("*.parquet")) if (root / exchange.STAGING).exists() else set()


def _listed_files(root: pathlib.Path) -> set[pathlib.Path]:
    return {
        root / entry["path"]
        for query, batches in exchange.manifests(root).items()
        for batch in batches
        for entry in exchange.read_manifest(root, query, batch)["files"]
    }


def _failing_partition_1(first_attempt_only: bool) -> Any:
    """A mapInArrow function failing partition 1 after its first batch (a closure: pickled by value)."""

    def fail(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        for batch in batches:
            yield batch
            if context.partitionId() == 1 and (context.attemptNumber() == 0 or not first_attempt_only):
                raise RuntimeError("injected failure of partition 1")

    return fail


def _rows(df: Any) -> collections.Counter[tuple[Any, ...]]:
    return collections.Counter(tuple(row) for row in df.collect())


def test_a_batch_write_with_a_failed_task_attempt_delivers_exactly_n_rows(
    spark: Any, tmp_path: pathlib.Path
) -> None:
    # given 3000 rows in 2 partitions whose partition 1 fails after its first batch on its first attempt
    df = spark.range(3000).selectExpr("id", "id % 5 AS k").repartition(2)
    flaky = df.mapInArrow(_failing_partition_1(first_attempt_only=True), df.schema)
    # when Spark writes it with format("jetlet") (found without registering: pyspark_jetlet)
    flaky.write.format("jetlet").mode("append").save(str(tmp_path))
    # then exactly Spark's rows were committed, in one manifest, and only the winning attempts' files remain
    assert _committed_rows(tmp_path) == _rows(df)
    assert len(exchange.manifests(tmp_path)) == 1
    assert _staged_files(tmp_path) == _listed_files(tmp_path)
    assert any("-p1-a1-" in path.name for path in _listed_files(tmp_path))


def test_a_failed_write_job_cleans_its_staging_and_commits_nothing(
    spark: Any, tmp_path: pathlib.Path
) -> None:
    df = spark.range(3000).selectExpr("id", "id % 5 AS k").repartition(2)
    failing = df.mapInArrow(_failing_partition_1(first_attempt_only=False), df.schema)
    with pytest.raises(Exception, match="injected failure"):
        failing.write.format("jetlet").mode("append").save(str(tmp_path))
    assert exchange.manifests(tmp_path) == {}
    assert _staged_files(tmp_path) == set()


def _input_file(directory: pathlib.Path, name: str, ids: range) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": list(ids)}), directory / f".{name}.tmp")
    (directory / f".{name}.tmp").rename(directory / name)


def _run_stream(spark: Any, source: pathlib.Path, target: pathlib.Path, checkpoint: pathlib.Path) -> str:
    """One run of a streaming query from ``source`` into format("jetlet") over what is there now."""
    stream = spark.readStream.schema("id long").parquet(str(source))
    query = (
        stream.selectExpr("id", "id * 2 AS twice")
        .writeStream.format("jetlet")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start(str(target))
    )
    query.awaitTermination(180)
    assert query.exception() is None
    query.stop()  # deregisters it: the next run of the same checkpoint may start
    return str(query.id)


def _forget_last_commit(checkpoint: pathlib.Path) -> int:
    """Delete the last commit-log entry (and its checksum), as if the driver died before writing it."""
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    (checkpoint / "commits" / str(last)).unlink()
    (checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)
    return last


def test_a_replayed_micro_batch_adds_nothing(spark: Any, tmp_path: pathlib.Path) -> None:
    source, target, checkpoint = tmp_path / "in", tmp_path / "out", tmp_path / "checkpoint"
    _input_file(source, "a.parquet", range(0, 500))
    query_id = _run_stream(spark, source, target, checkpoint)
    before = _committed_rows(target)
    assert sum(before.values()) == 500
    # when the last commit-log entry is deleted (as after a driver crash) and the query restarts
    last = _forget_last_commit(checkpoint)
    assert _run_stream(spark, source, target, checkpoint) == query_id  # same query, batch replayed
    # then the replay committed nothing new and left no staged file behind
    assert exchange.manifests(target) == {query_id: [last]}
    assert _committed_rows(target) == before
    assert _staged_files(target) == _listed_files(target)


def test_a_running_jetlet_job_counts_every_row_once_across_restarts_of_the_spark_query(
    spark: Any, tmp_path: pathlib.Path
) -> None:
    source, target, checkpoint = tmp_path / "in", tmp_path / "out", tmp_path / "checkpoint"
    target.mkdir()
    seen: list[tuple[int, int]] = []
    lock = threading.Lock()

    def collect(row: dict[str, Any]) -> None:
        with lock:
            seen.append((row["id"], row["twice"]))

    p = Pipeline()
    p.read_from(SparkSources.stream(target, poll_interval=0.05)).without_timestamps().write_to(
        Sinks.from_callback(collect)
    )
    with jetlet.embedded() as jet:
        job = jet.new_job(p)
        # the Spark query runs three times: new data, a replay of its last batch, new data again
        _input_file(source, "a.parquet", range(0, 300))
        _run_stream(spark, source, target, checkpoint)
        _input_file(source, "b.parquet", range(300, 700))
        _run_stream(spark, source, target, checkpoint)
        _forget_last_commit(checkpoint)
        _run_stream(spark, source, target, checkpoint)  # replays b's batch: must add nothing
        _input_file(source, "c.parquet", range(700, 800))
        _run_stream(spark, source, target, checkpoint)
        # the reader takes a query's batches in order: once c's rows are in, a replayed b's would be too
        wait_until(lambda: len(seen) >= 800, "the rows of all three files", 60)
        job.cancel()
    assert collections.Counter(seen) == collections.Counter((i, 2 * i) for i in range(800))


def test_spark_reads_the_parquet_sink_as_a_stream_each_segment_once_across_a_restart(
    spark: Any, tmp_path: pathlib.Path
) -> None:
    segments, out, checkpoint = tmp_path / "segments", tmp_path / "spark-out", tmp_path / "checkpoint"

    def jetlet_writes(ids: range) -> None:
        p = Pipeline()
        p.read_from(Sources.items(*ids)).map(lambda i: {"id": i, "k": i % 3}).write_to(
            SparkSinks.parquet(segments)
        )
        with jetlet.embedded() as jet:
            jet.new_job(p).join()

    def spark_reads() -> None:
        query = (
            spark.readStream.format("jetlet")
            .load(str(segments))
            .writeStream.format("parquet")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start(str(out))
        )
        query.awaitTermination(180)
        assert query.exception() is None
        query.stop()

    jetlet_writes(range(0, 400))
    spark_reads()
    assert sum(1 for _ in spark.read.parquet(str(out)).collect()) == 400
    jetlet_writes(range(400, 1000))
    spark_reads()  # the restarted query resumes after its checkpointed offset
    got = _rows(spark.read.parquet(str(out)).select("id", "k"))
    assert got == collections.Counter((i, i % 3) for i in range(1000))
    # and a batch read of the same segments gives the same rows
    assert _rows(spark.read.format("jetlet").load(str(segments)).select("id", "k")) == got
