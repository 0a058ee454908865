"""Parquet files as a source of ColumnBatches: every row once, also across a snapshot and a restore."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import jetlet
from jetlet.batches.parquet import parquet_batches
from jetlet.core import processor as proc
from jetlet.pipeline import Pipeline, Sinks
from jetlet.testing import TestOutbox, make_context

ROWS_PER_FILE = 1_000


def write_files(directory: Path, files: int = 3) -> list[tuple[int, int]]:
    rows = []
    for f in range(files):
        ids = list(range(f * ROWS_PER_FILE, (f + 1) * ROWS_PER_FILE))
        table = pa.table({"id": ids, "t": [i * 10 for i in ids]})
        pq.write_table(table, directory / f"part-{f}.parquet")
        rows.extend(zip(ids, [i * 10 for i in ids], strict=True))
    (directory / "notes.txt").write_text("not parquet")
    return rows


def test_a_job_reads_every_row_of_every_file_once(tmp_path: Path) -> None:
    rows = write_files(tmp_path)
    p = Pipeline()
    source = parquet_batches(tmp_path, timestamp="t", batch_rows=128, local_parallelism=2)
    p.read_from(source).filter_batches(lambda b: b["id"] % 3 == 0).write_to(Sinks.list("rows"))
    with jetlet.embedded() as jet:
        jet.new_job(p).join(timeout=60)
        got = [row for batch in jet.get_list("rows") for row in batch.rows()]
        assert all(batch.timestamp == "t" and len(batch) <= 128 for batch in jet.get_list("rows"))
    assert sorted(got) == [row for row in rows if row[0] % 3 == 0]


def new_processor(supplier: Any, outbox: TestOutbox) -> proc.Processor:
    processor = proc.as_meta_supplier(supplier, "test").get(0).get(1)[0]
    processor.init(outbox, make_context())
    return processor


def drain(outbox: TestOutbox, emitted: list[Any]) -> None:
    emitted.extend(outbox.buckets[0])
    outbox.buckets[0] = []


def test_a_restored_source_resumes_after_the_last_batch_it_emitted(tmp_path: Path) -> None:
    # given a source that emitted a few batches (into a second file) and saved a snapshot
    rows = write_files(tmp_path, files=2)
    supplier = parquet_batches(tmp_path, batch_rows=300).supplier
    outbox = TestOutbox(1, 1)
    first = new_processor(supplier, outbox)
    emitted: list[Any] = []
    for _ in range(5):
        first.complete()
        drain(outbox, emitted)
    while not first.save_to_snapshot():
        drain(outbox, emitted)
    drain(outbox, emitted)
    snapshot = list(outbox.snapshot_bucket)
    outbox.snapshot_bucket.clear()
    first.close()
    assert snapshot[0][1] == {"part-0.parquet": 4, "part-1.parquet": 1}  # 4 batches of file 0, then 1
    # when a fresh processor restores from it and runs to the end
    second = new_processor(supplier, outbox)
    second.restore_from_snapshot(jetlet.core.Inbox(snapshot))
    assert second.finish_snapshot_restore()
    while not second.complete():
        drain(outbox, emitted)
    drain(outbox, emitted)
    second.close()
    # then every row came out once, in order
    assert [row for batch in emitted for row in batch.rows()] == rows
