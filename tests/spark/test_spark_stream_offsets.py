"""The ``"jetlet"`` stream reader's offsets over the Parquet sink's files, and expiry, without a JVM.

Spark calls ``latestOffset``, ``partitions(start, end)``, ``read`` and
``commit(end)`` on the driver and executors; these tests call them in the
same order on the files that jetlet jobs commit, and check that each file is
planned exactly once across offsets, that expired files are deleted, and
that the sink never reuses an expired file's name.
"""

from __future__ import annotations

import pathlib
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import LongType, StructField, StructType

import jetlet
from jetlet.pipeline import Pipeline, Sources
from jetlet.spark import SparkSinks, datasource, parquet_sink

pytestmark = pytest.mark.spark

SCHEMA = StructType([StructField("n", LongType())])


def _jetlet_writes(directory: pathlib.Path, numbers: range) -> None:
    p = Pipeline()
    p.read_from(Sources.items(*numbers)).map(lambda n: {"n": n}).write_to(SparkSinks.parquet(directory))
    with jetlet.embedded() as jet:
        jet.new_job(p).join()


def _micro_batch(
    reader: datasource.JetletStreamReader, start: dict[str, Any]
) -> tuple[list[int], dict[str, Any]]:
    end = reader.latestOffset(start, None)
    rows: list[int] = []
    for partition in reader.partitions(start, end):
        for batch in reader.read(partition):
            rows += pa.Table.from_batches([batch]).column("n").to_pylist()
    reader.commit(end)
    return sorted(rows), end


@pytest.mark.parametrize("expire", [False, True])
def test_each_committed_file_is_read_once_across_micro_batches(tmp_path: pathlib.Path, expire: bool) -> None:
    reader = datasource.JetletStreamReader(tmp_path, SCHEMA, expire=expire)
    offset = reader.initialOffset()
    _jetlet_writes(tmp_path, range(0, 50))
    first, offset = _micro_batch(reader, offset)
    assert first == list(range(50))
    assert _micro_batch(reader, offset)[0] == []  # nothing new: an empty micro-batch
    _jetlet_writes(tmp_path, range(50, 80))
    second, offset = _micro_batch(reader, offset)
    assert second == list(range(50, 80))
    files = sorted(p.name for p in tmp_path.glob("part-*.parquet"))
    if expire:
        # the consumed files are gone, and the sink's next names come after the expired ones
        assert files == []
        expired = parquet_sink.read_expired(tmp_path)
        _jetlet_writes(tmp_path, range(80, 90))
        (new,) = tmp_path.glob("part-*.parquet")
        match = parquet_sink.FILE_NAME.fullmatch(new.name)
        assert match is not None and int(match.group("sequence")) > expired[int(match.group("index"))]
        assert _micro_batch(reader, offset)[0] == list(range(80, 90))
    else:
        assert len(files) >= 2
        batch = datasource.JetletBatchReader(tmp_path, SCHEMA)
        everything = [
            n
            for partition in batch.partitions()
            for b in batch.read(partition)
            for n in pa.Table.from_batches([b]).column("n").to_pylist()
        ]
        assert sorted(everything) == list(range(80))
