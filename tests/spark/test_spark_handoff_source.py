"""The hand-off source: Spark writes Parquet, jetlet members read their row groups with pyarrow.

Each test compares what jetlet emits with what Spark itself computes over
the same DataFrame (``df.collect()``), as a multiset: every row exactly
once. The replay tests drive the reader the way the source processor does
(read, snapshot its position, restore fresh readers from the positions of
every processor) and also on a real 3-member cluster with a member killed
mid-read under EXACTLY_ONCE.
"""

from __future__ import annotations

import collections
import os
import pathlib
import random
import signal
import time
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import jetlet
from jetlet import JobConfig, ProcessingGuarantee
from jetlet.client import Client
from jetlet.core.processors import sources as core_sources
from jetlet.local_cluster import local_cluster
from jetlet.pipeline import Pipeline, Sinks
from jetlet.spark import SparkSinks, SparkSources, parquet_source
from jetlet.testing import make_context, verify_processor, wait_until

pytestmark = pytest.mark.spark

FAST_FAILURE = ["--heartbeat-interval-millis", "100", "--failure-timeout-millis", "1500"]
COLUMNS = ["id", "k", "name"]


def _events(spark: Any, rows: int, files: int) -> Any:
    return spark.range(rows).selectExpr("id", "id % 7 AS k", "concat('n', id) AS name").repartition(files)


def _spark_rows(df: Any) -> collections.Counter[tuple[Any, ...]]:
    return collections.Counter(tuple(row) for row in df.select(*COLUMNS).collect())


def test_a_dataframe_read_on_one_member_gives_exactly_sparks_rows(spark: Any, tmp_path: pathlib.Path) -> None:
    # given a DataFrame that Spark hands off as 4 Parquet files
    df = _events(spark, 3000, 4)
    source = SparkSources.dataframe(df, tmp_path / "events", items="tuples", columns=COLUMNS)
    assert (tmp_path / "events" / "_SUCCESS").exists()
    # when an embedded jetlet job reads it as tuples and as dicts
    p = Pipeline()
    p.read_from(source).write_to(Sinks.list("tuples"))
    p.read_from(SparkSources.table(tmp_path / "events")).write_to(Sinks.list("dicts"))
    with jetlet.embedded() as jet:
        jet.new_job(p).join()
        tuples, dicts = list(jet.get_list("tuples")), list(jet.get_list("dicts"))
    # then both are exactly Spark's rows
    expected = _spark_rows(df)
    assert collections.Counter(tuples) == expected
    assert collections.Counter(tuple(d[c] for c in COLUMNS) for d in dicts) == expected


def test_a_dataframe_read_on_three_members_gives_exactly_sparks_rows_as_rows_and_batches(
    spark: Any, tmp_path: pathlib.Path
) -> None:
    df = _events(spark, 4000, 6)
    table = tmp_path / "events"
    SparkSources.dataframe(df, table)
    p = Pipeline()
    p.read_from(SparkSources.table(table, items="tuples", columns=COLUMNS)).write_to(
        SparkSinks.parquet(tmp_path / "rows", columns=COLUMNS)
    )
    # Arrow batches of at most 300 rows, counted per member
    p.read_from(SparkSources.table(table, items="batches", batch_rows=300)).map(
        lambda batch: {"rows": batch.num_rows, "ids": sum(batch.column("id").to_pylist())}
    ).write_to(SparkSinks.parquet(tmp_path / "batches"))
    with local_cluster(3) as client:
        client.new_job(p).join(120)
    assert (tmp_path / "rows" / "_SUCCESS").exists()
    assert _spark_rows(spark.read.parquet(str(tmp_path / "rows"))) == _spark_rows(df)
    batches = pq.read_table(tmp_path / "batches").to_pylist()
    assert sum(b["rows"] for b in batches) == 4000 and sum(b["ids"] for b in batches) == sum(range(4000))
    assert max(b["rows"] for b in batches) <= 300


def _slow(row: tuple[Any, ...]) -> tuple[Any, ...]:
    time.sleep(0.0005)
    return row


def test_every_row_is_read_exactly_once_when_a_member_is_killed_mid_read(
    spark: Any, tmp_path: pathlib.Path
) -> None:
    # given a table of 12 files read by 3 members, slowly (4 s each) so that one dies mid-read; the map is
    # slow per row, not per batch, so that a snapshot barrier waits only ~0.5 s behind a queue of rows
    df = _events(spark, 24000, 12)
    table, out = tmp_path / "events", tmp_path / "out"
    SparkSources.dataframe(df, table)
    p = Pipeline()
    p.read_from(SparkSources.table(table, items="tuples", columns=COLUMNS)).map(_slow).write_to(
        SparkSinks.parquet(out, columns=COLUMNS)
    )
    config = JobConfig(processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE, snapshot_interval_millis=200)
    rng = random.Random(7)
    with local_cluster(3, FAST_FAILURE) as client:
        survivor = Client(client.addresses[0], client.token)
        job = client.new_job(p, config)
        wait_until(lambda: any(out.glob("part-*.parquet")), "a snapshot that committed rows", 60)
        time.sleep(rng.uniform(0.0, 0.5))  # an arbitrary moment (seeded), not a condition
        assert job.status is jetlet.JobStatus.RUNNING, "the job ended before the member could be killed"
        os.kill(client.pids[2], signal.SIGKILL)
        handle = survivor.get_job(job.id)
        assert handle is not None
        handle.join(120)
        assert handle.status is jetlet.JobStatus.COMPLETED
    # then Spark reads back exactly its own rows: none lost, none twice, no staged file visible
    assert _spark_rows(spark.read.parquet(str(out))) == _spark_rows(df)
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]


# -- the reader's replay, driven by hand ---------------------------------------------------------


def _table(directory: pathlib.Path, files: int, rows_per_group: int, groups: int) -> list[tuple[int, int]]:
    """Parquet files of ``groups`` row groups each, and ``_SUCCESS``; returns every row."""
    directory.mkdir(parents=True)
    everything = []
    n = 0
    for f in range(files):
        ids = list(range(n, n + rows_per_group * groups))
        n += len(ids)
        pq.write_table(
            pa.table({"id": ids, "f": [f] * len(ids)}),
            directory / f"part-{f}.parquet",
            row_group_size=rows_per_group,
        )
        everything += [(i, f) for i in ids]
    (directory / "_SUCCESS").touch()
    return everything


def _readers(root: pathlib.Path, count: int, items: str = "tuples") -> list[parquet_source.ParquetReader]:
    options = parquet_source.ReadOptions(str(root), items=items)
    return [
        parquet_source.ParquetReader(options, make_context("src", i, local_parallelism=count))
        for i in range(count)
    ]


def _rows(items: list[Any]) -> list[Any]:
    flat: list[Any] = []
    for item in items:
        flat += parquet_source.rows_of(item, "tuples") if isinstance(item, pa.RecordBatch) else [item]
    return flat


@pytest.mark.parametrize(
    ("before", "after", "items"), [(2, 3, "tuples"), (3, 1, "tuples"), (2, 2, "batches")]
)
def test_a_restore_into_another_parallelism_reads_every_row_once(
    tmp_path: pathlib.Path, before: int, after: int, items: str
) -> None:
    # given a table of 5 files x 3 row groups and readers that read part of it, then snapshot
    expected = _table(tmp_path / "t", 5, 100, 3)
    emitted: list[Any] = []
    first = _readers(tmp_path / "t", before, items)
    for reader in first:
        for _ in range(4):
            emitted += reader.read(70) or []
    positions = [reader.position() for reader in first]
    # when fresh readers of another parallelism restore from every processor's position
    second = _readers(tmp_path / "t", after, items)
    for reader in second:
        reader.restore(positions)
        while (batch := reader.read(70)) is not None:
            emitted += batch
    # then every row was emitted exactly once
    assert collections.Counter(_rows(emitted)) == collections.Counter(expected)


def test_splits_are_balanced_by_rows_and_the_same_in_every_processor(tmp_path: pathlib.Path) -> None:
    _table(tmp_path / "t", 4, 50, 2)
    pq.write_table(pa.table({"id": list(range(400)), "f": [9] * 400}), tmp_path / "t" / "part-big.parquet")
    splits = parquet_source.plan_splits(tmp_path / "t", parquet_source.list_data_files(tmp_path / "t"))
    shares = parquet_source.assign(splits, 3)
    assert shares == parquet_source.assign(list(reversed(splits)), 3)
    loads = sorted(sum(s.rows for s in share) for share in shares)
    assert loads == [200, 200, 400]


def test_batch_mode_waits_for_success_and_incremental_mode_reads_new_files_once(
    tmp_path: pathlib.Path,
) -> None:
    root = tmp_path / "t"
    root.mkdir()
    pq.write_table(pa.table({"id": [1, 2]}), root / "part-0.parquet")
    (batch_reader,) = _readers(root, 1)
    assert batch_reader.read(10) == []  # no _SUCCESS yet: nothing, not the end
    options = parquet_source.ReadOptions(str(root), items="tuples", incremental=True, poll_interval=0.01)
    stream = parquet_source.ParquetReader(options, make_context("src", 0))
    got: list[Any] = []
    wait_until(lambda: got.extend(stream.read(10) or []) or len(got) >= 2, "the first file", 10)
    pq.write_table(pa.table({"id": [3]}), root / ".part-1.parquet.tmp")  # hidden: not data
    os.replace(root / ".part-1.parquet.tmp", root / "part-1.parquet")
    wait_until(lambda: got.extend(stream.read(10) or []) or len(got) >= 3, "the new file", 10)
    for _ in range(5):
        got += stream.read(10) or []
    assert sorted(got) == [(1,), (2,), (3,)]
    (root / "_SUCCESS").touch()
    read: list[Any] = []
    while (batch := batch_reader.read(10)) is not None:
        read += batch
    assert sorted(read) == [(1,), (2,), (3,)]


def test_the_source_processor_passes_the_processor_harness(tmp_path: pathlib.Path) -> None:
    """jetlet.testing runs it with a refusing outbox and with a snapshot and restore after every call."""
    expected = _table(tmp_path / "t", 2, 40, 2)
    options = parquet_source.ReadOptions(str(tmp_path / "t"), items="tuples")
    supplier = core_sources.replayable_source_p(lambda c: parquet_source.ParquetReader(options, c), False)
    verify_processor(supplier).unordered().expect_output(expected).verify()


def test_an_incremental_table_gives_event_time_from_a_column(tmp_path: pathlib.Path) -> None:
    import datetime

    root = tmp_path / "t"
    root.mkdir()
    moment = datetime.datetime(2026, 11, 24, 0, 0, 1, tzinfo=datetime.UTC)
    pq.write_table(
        pa.table({"id": [1], "ts": pa.array([moment], pa.timestamp("ms", tz="UTC"))}), root / "p.parquet"
    )
    (root / "_SUCCESS").touch()
    dicts = SparkSources.table(root, incremental=True, timestamp_column="ts")
    tuples = SparkSources.table(
        root, items="tuples", columns=["id", "ts"], incremental=True, timestamp_column="ts"
    )
    (row,) = _readers(root, 1, "dicts")[0].read(10) or []
    assert dicts.native_timestamps is not None and dicts.native_timestamps(row) == int(
        moment.timestamp() * 1000
    )
    assert (
        tuples.native_timestamps is not None
        and tuples.native_timestamps((1, moment)) == 1_795_478_401_000 == row["ts"].timestamp() * 1000
    )
    assert tuples.native_timestamps((1, 42)) == 42  # ints are milliseconds already
    with pytest.raises(ValueError, match="incremental=True"):
        SparkSources.table(root, timestamp_column="ts")
