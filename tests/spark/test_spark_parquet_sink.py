"""``SparkSinks.parquet``: Spark reads exactly the committed results, never a staged file.

The processor tests drive the sink in the order the engine calls it at a
snapshot (``save_to_snapshot``, ``snapshot_commit_prepare``, later
``snapshot_commit_finish``); a *crash* throws the processor away without
``close()``, and a restart restores a fresh one from the snapshot's
entries. After each step Spark itself reads the directory.
"""

from __future__ import annotations

import collections
import dataclasses
import pathlib
import re
from typing import Any

import pyarrow as pa
import pytest

import jetlet
from jetlet import AggregateOperations, JobConfig, ProcessingGuarantee
from jetlet.core import Inbox
from jetlet.pipeline import Pipeline, Sources
from jetlet.spark import SparkSinks, parquet_sink
from jetlet.testing import TestOutbox, make_context

pytestmark = pytest.mark.spark

EXACTLY_ONCE = ProcessingGuarantee.EXACTLY_ONCE
SCHEMA = pa.schema([("word", pa.string()), ("n", pa.int64())])


def _sink(
    directory: pathlib.Path, index: int = 0, count: int = 1, execution: int = 0, row_group_rows: int = 65536
) -> parquet_sink.ParquetSinkP:
    options = parquet_sink.ParquetSinkOptions(str(directory), schema=SCHEMA, row_group_rows=row_group_rows)
    processor = parquet_sink.ParquetSinkP(options)
    context = make_context("sink", index, count, processing_guarantee=EXACTLY_ONCE)
    processor.init(TestOutbox(1, 10), dataclasses.replace(context, execution_id=execution))
    return processor


def _write(processor: parquet_sink.ParquetSinkP, *words: str) -> None:
    processor.process(0, Inbox([{"word": w, "n": len(w)} for w in words]))


def _snapshot(processor: parquet_sink.ParquetSinkP) -> list[tuple[Any, Any]]:
    assert processor.save_to_snapshot()
    entries = list(processor.outbox.snapshot_bucket)
    processor.outbox.snapshot_bucket.clear()
    assert processor.snapshot_commit_prepare()
    return entries


def _spark_words(spark: Any, directory: pathlib.Path) -> collections.Counter[str]:
    if not any(directory.glob("part-*.parquet")):
        return collections.Counter()
    return collections.Counter(row.word for row in spark.read.parquet(str(directory)).collect())


def test_spark_sees_only_committed_files_across_a_crash_and_restore(
    spark: Any, tmp_path: pathlib.Path
) -> None:
    # given rows before a completed snapshot, rows before a second one that never completes, and more rows
    sink = _sink(tmp_path)
    _write(sink, "a", "b")
    _snapshot(sink)
    assert _spark_words(spark, tmp_path) == collections.Counter()  # staged, not visible
    sink.snapshot_commit_finish(True)
    _write(sink, "c")
    second = _snapshot(sink)
    _write(sink, "d")  # after the second barrier: replayed after a restore, never committed from here
    # then Spark reads exactly the rows of the completed snapshot, with staged files on disk beside them
    assert _spark_words(spark, tmp_path) == collections.Counter("ab")
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    # when the process dies and a fresh sink restores from the second snapshot (it completed everywhere)
    del sink
    restored = _sink(tmp_path)
    restored.restore_from_snapshot(Inbox(second))
    assert restored.finish_snapshot_restore()
    _write(restored, "d")  # the replayed row
    assert restored.complete()
    restored.close()
    # then every row is visible exactly once, no staged file is left, and _SUCCESS marks the end
    assert _spark_words(spark, tmp_path) == collections.Counter("abcd")
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert (tmp_path / "_SUCCESS").exists()


def test_a_sink_restored_into_fewer_processors_commits_the_files_of_the_missing_one(
    spark: Any, tmp_path: pathlib.Path
) -> None:
    sinks = [_sink(tmp_path, i, 2) for i in range(2)]
    _write(sinks[0], "a")
    _write(sinks[1], "b")
    entries = _snapshot(sinks[0]) + _snapshot(sinks[1])
    _write(sinks[1], "lost")  # after the barrier, its temporary file must be deleted on restore
    restored = _sink(tmp_path, 0, 1)
    restored.restore_from_snapshot(Inbox(entries))
    restored.finish_snapshot_restore()
    assert restored.complete()
    assert _spark_words(spark, tmp_path) == collections.Counter("ab")
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_stale_executions_rollback_leaves_the_new_executions_file_alone(
    spark: Any, tmp_path: pathlib.Path
) -> None:
    # given execution 0x51, whose sink committed a snapshot and then wrote rows after its barrier to a file
    stale = _sink(tmp_path, execution=0x51, row_group_rows=1)
    _write(stale, "a")
    entries = _snapshot(stale)
    assert stale.snapshot_commit_finish(True)
    _write(stale, "late")
    # when execution 0x52 (the same processor index) restores from that snapshot: it deletes the stale
    # temporary file as a leftover and begins its own at the lowest free sequence, the stale one's
    fresh = _sink(tmp_path, execution=0x52, row_group_rows=1)
    fresh.restore_from_snapshot(Inbox(entries))
    assert fresh.finish_snapshot_restore()
    _write(fresh, "late")  # replayed
    assert len([p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]) == 1  # the stale one's is gone
    # and the stale execution stops late, rolling back its active transaction
    stale.close()
    # then the new execution's file was not the stale one's to delete: it commits its rows
    _snapshot(fresh)
    assert fresh.snapshot_commit_finish(True)
    assert _spark_words(spark, tmp_path) == collections.Counter(["a", "late"])
    names = sorted(p.name for p in tmp_path.glob("part-*.parquet"))
    assert names == [parquet_sink.final_name(0, 0x51, 0), parquet_sink.final_name(0, 0x52, 1)]


def test_file_names_never_repeat_and_grow_per_index(tmp_path: pathlib.Path) -> None:
    for _ in range(2):  # two jobs writing into the same directory
        sink = _sink(tmp_path)
        _write(sink, "x")
        _snapshot(sink)
        sink.snapshot_commit_finish(True)
        _write(sink, "y")
        sink.complete()
        sink.close()
    names = sorted(p.name for p in tmp_path.glob("part-*.parquet"))
    assert names == [parquet_sink.final_name(0, 0, s) for s in range(4)]


def _words() -> list[str]:
    text = "the quick brown fox jumps over the lazy dog the end " * 200
    return re.findall(r"\w+", text)


def test_a_job_output_read_back_by_spark_equals_a_plain_python_count(
    spark: Any, tmp_path: pathlib.Path
) -> None:
    # given a word count written as Parquet by an EXACTLY_ONCE job with snapshots
    out = tmp_path / "counts"
    p = Pipeline()
    p.read_from(Sources.items(*_words())).grouping_key(str).aggregate(AggregateOperations.counting()).map(
        lambda e: {"word": e[0], "n": e[1]}
    ).write_to(SparkSinks.parquet(out, schema=SCHEMA))
    config = JobConfig(processing_guarantee=EXACTLY_ONCE, snapshot_interval_millis=50)
    with jetlet.embedded() as jet:
        jet.new_job(p, config).join()
    # then Spark reads exactly the plain-Python counts, after _SUCCESS
    assert (out / "_SUCCESS").exists()
    got = {row.word: row.n for row in spark.read.parquet(str(out)).collect()}
    assert got == dict(collections.Counter(_words()))
    assert spark.read.parquet(str(out)).schema.simpleString() == "struct<word:string,n:bigint>"


def test_small_results_come_back_as_a_dataframe(spark: Any) -> None:
    sink = SparkSinks.dataframe("totals")
    p = Pipeline()
    p.read_from(Sources.items(*_words())).grouping_key(str).aggregate(AggregateOperations.counting()).map(
        lambda e: {"word": e[0], "n": e[1]}
    ).write_to(sink)
    with jetlet.embedded() as jet:
        jet.new_job(p).join()
        df = sink.collect(spark, jet)
    assert {row.word: row.n for row in df.collect()} == dict(collections.Counter(_words()))


def test_tuples_mixed_with_arrow_batches_and_late_types_all_land(tmp_path: pathlib.Path) -> None:
    import pyarrow.parquet as pq

    # without a schema, a column that starts with nulls cannot take ints later: a clear error says so
    guessing = parquet_sink.ParquetSinkP(
        parquet_sink.ParquetSinkOptions(str(tmp_path / "x"), columns=("w", "n"), row_group_rows=1)
    )
    guessing.init(TestOutbox(1, 10), make_context("sink", 0, 1))
    guessing.process(0, Inbox([("a", None)]))
    with pytest.raises(TypeError, match="give the sink a schema"):
        guessing.process(0, Inbox([("d", 4)]))
    guessing.close()
    # with one, tuples, Arrow batches and late values all land
    options = parquet_sink.ParquetSinkOptions(str(tmp_path / "ok"), schema=SCHEMA, row_group_rows=3)
    sink = parquet_sink.ParquetSinkP(options)
    sink.init(TestOutbox(1, 10), make_context("sink", 0, 1))
    sink.process(0, Inbox([("a", None), ("b", None), ("c", None)]))
    sink.process(0, Inbox([("d", 4), pa.record_batch({"word": ["e"], "n": [5]}, schema=SCHEMA), ("f", 6)]))
    sink.process(0, Inbox([("g", 7)]))
    assert sink.complete()
    sink.close()
    got = sorted(tuple(r.values()) for r in pq.read_table(tmp_path / "ok", columns=["word", "n"]).to_pylist())
    assert got == [("a", None), ("b", None), ("c", None), ("d", 4), ("e", 5), ("f", 6), ("g", 7)]
