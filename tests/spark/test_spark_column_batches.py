"""The hand-off source with ``items="columns"``: Spark's data as ColumnBatches for the record-batch path.

Spark writes a DataFrame as Parquet; the members read their row groups as Arrow record batches
and emit them as :class:`~jetlet.batches.ColumnBatch` es (no step per row). Each test compares a
batch pipeline's output with plain Python over the same DataFrame's rows (``df.collect()``).
"""

from __future__ import annotations

import collections
import datetime
import pathlib
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import jetlet
from jetlet.batches import ColumnBatch
from jetlet.local_cluster import local_cluster
from jetlet.pipeline import Pipeline, Sinks, WindowDefinition
from jetlet.spark import SparkSources, parquet_source
from jetlet.testing import wait_until

pytestmark = pytest.mark.spark

ROWS = 20_000
DEADLINE_S = 60


def _bids(spark: Any, files: int) -> Any:
    """``ROWS`` bids: event time ``t`` = id ms (ascending within each file), a key, a price and a tag."""
    return spark.range(0, ROWS, 1, files).selectExpr(
        "id AS t", "id % 13 AS auction", "(id * 7919) % 1000 AS price", "concat('b', id % 3) AS tag"
    )


def _rows(batches: list[ColumnBatch]) -> list[tuple[Any, ...]]:
    return [row for batch in batches for row in batch.rows()]


def test_a_dataframe_as_column_batches_on_two_members_gives_plain_pythons_rows(
    spark: Any, tmp_path: pathlib.Path
) -> None:
    # given a DataFrame that Spark hands off as 4 Parquet files, read as ColumnBatches of <= 1,000 rows
    df = _bids(spark, 4)
    source = SparkSources.dataframe(
        df, tmp_path / "bids", items="columns", batch_rows=1000, timestamp_column="t"
    )
    expected = [
        (t, auction, price * 89 // 100, tag)
        for t, auction, price, tag in (tuple(row) for row in df.collect())
        if auction % 2 == 1
    ]
    # when two members filter and map the batches with numpy
    p = Pipeline()
    p.read_from(source).filter_batches(lambda b: b["auction"] % 2 == 1).map_batches(
        lambda b: b.with_columns(price=b["price"] * 89 // 100)
    ).write_to(Sinks.list("out"))
    with local_cluster(2) as client:
        client.new_job(p).join(DEADLINE_S)
        out = list(client.get_list("out"))
    # then every row is plain Python's, exactly once, in batches of at most 1,000 rows with int ms times
    assert collections.Counter(_rows(out)) == collections.Counter(expected)
    assert all(isinstance(b, ColumnBatch) and 0 < len(b) <= 1000 and b.timestamp == "t" for b in out)
    assert {b["t"].dtype for b in out} == {np.dtype(np.int64)}


def test_a_growing_table_as_a_stream_of_column_batches_feeds_vectorised_windows(
    spark: Any, tmp_path: pathlib.Path
) -> None:
    # given Spark's files of ascending event times, read as a stream with each batch's highest time
    df = _bids(spark, 2)
    df.write.mode("overwrite").parquet("file://" + str(tmp_path / "bids"))
    window_ms, closed_by = 1000, ROWS - 1000
    expected: dict[int, dict[int, int]] = collections.defaultdict(lambda: collections.defaultdict(int))
    for t, auction, price, _tag in (tuple(row) for row in df.collect()):
        expected[(t // window_ms + 1) * window_ms][auction] += price
    source = SparkSources.table(tmp_path / "bids", items="columns", incremental=True, timestamp_column="t")
    # when a job sums the prices per auction in tumbling windows of 1 s, vectorised
    p = Pipeline()
    p.read_from(source).with_native_timestamps(0).aggregate_batch_windows(
        WindowDefinition.tumbling(window_ms), "auction", "sum", "price"
    ).map(
        lambda w: (w.end, dict(zip(w.result["auction"].tolist(), w.result["sum"].tolist(), strict=True)))
    ).write_to(Sinks.list("windows"))
    with jetlet.embedded() as jet:
        job = jet.new_job(p)
        wait_until(
            lambda: (
                sum(end <= closed_by for end, _ in jet.get_list("windows")) >= closed_by // window_ms
                or job.future.done()
            ),
            "the closed windows",
            DEADLINE_S,
        )
        job.cancel()
        got = {end: sums for end, sums in jet.get_list("windows") if end <= closed_by}
    # then each closed window's sums are plain Python's
    assert got == {end: dict(sums) for end, sums in expected.items() if end <= closed_by}


def test_a_record_batch_becomes_a_column_batch_with_its_event_times_in_int_ms() -> None:
    start = datetime.datetime(2026, 11, 24, tzinfo=datetime.UTC)
    record_batch = pa.record_batch(
        {
            "when": pa.array(
                [start + datetime.timedelta(milliseconds=i) for i in (5, 1, 3)], pa.timestamp("us", "UTC")
            ),
            "n": pa.array([1, 2, 3], pa.int64()),
        }
    )
    # when converted with "when" as the event-time column
    batch = parquet_source.column_batch(record_batch, "when")
    # then the times are int64 ms, the batch's timestamp is the highest, and the numbers are not copied
    base = int(start.timestamp() * 1000)
    assert batch["when"].tolist() == [base + 5, base + 1, base + 3] and batch.max_timestamp() == base + 5
    assert not batch["n"].flags.owndata
    # and a column that is no event time, or has nulls, is refused naming it
    with pytest.raises(TypeError, match="'n' holds"):
        parquet_source.column_batch(pa.record_batch({"n": pa.array(["x"])}), "n")
    with pytest.raises(ValueError, match="'n' holds 1 nulls"):
        parquet_source.column_batch(pa.record_batch({"n": pa.array([1, None])}), "n")
    with pytest.raises(ValueError, match="no timestamp column 't'"):
        parquet_source.column_batch(record_batch, "t")
