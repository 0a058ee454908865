"""``parquet_batches``: Parquet files as a batch source of :class:`~jetlet.batches.ColumnBatch` es.

Each processor of the source reads its share of the matching files (every ``total_parallelism``-th
of them, sorted by name), one file after another, with pyarrow's ``ParquetFile.iter_batches``:
each Arrow record batch becomes one ``ColumnBatch`` (numeric columns without nulls are not
copied). One fill of the source buffer adds one batch, so a snapshot, which the source builder
takes only once a fill's items are out, always falls at a batch boundary: its state is, per file,
how many batches were emitted. A restore merges the counts that every processor saved (so a job
restored with another number of processors skips exactly the batches emitted before, whoever read
them) and reopens the current file, skipping those batches. The source ends when its files do.

pyarrow is imported when a processor starts reading (it is an optional dependency).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
from pathlib import Path
from typing import Any

from jetlet.batches.column_batch import ColumnBatch
from jetlet.core import processor as proc
from jetlet.pipeline import BatchSource, SourceBuilder

DEFAULT_BATCH_ROWS = 8192
"""Rows per batch read (pyarrow's ``batch_size``)."""


@dataclasses.dataclass(slots=True)
class _Reader:
    """One processor's files, where it is in them, and the open file's batch iterator."""

    files: list[Path]
    timestamp: str | None
    batch_rows: int
    done: dict[str, int] = dataclasses.field(default_factory=dict)
    """Batches emitted per file name (across every processor of a restored snapshot)."""
    current: int = 0
    batches: Any = None


def _open(reader: _Reader) -> Any:
    import pyarrow.parquet  # optional: imported only by a processor that reads

    path = reader.files[reader.current]
    batches = pyarrow.parquet.ParquetFile(path).iter_batches(batch_size=reader.batch_rows)
    for _ in range(reader.done.get(path.name, 0)):
        next(batches, None)
    return batches


def _fill(reader: _Reader, buffer: Any) -> None:
    while reader.current < len(reader.files):
        if reader.batches is None:
            reader.batches = _open(reader)
        record_batch = next(reader.batches, None)
        if record_batch is None:
            reader.current += 1
            reader.batches = None
            continue
        name = reader.files[reader.current].name
        reader.done[name] = reader.done.get(name, 0) + 1
        if record_batch.num_rows:
            buffer.add(ColumnBatch.from_arrow(record_batch, reader.timestamp))
            return
    buffer.close()


def _snapshot(reader: _Reader) -> dict[str, int]:
    return dict(reader.done)


def _restore(reader: _Reader, saved: list[dict[str, int]]) -> None:
    for done in saved:
        for name, count in done.items():
            reader.done[name] = max(reader.done.get(name, 0), count)
    reader.current, reader.batches = 0, None


def parquet_batches(
    directory: str | os.PathLike[str],
    glob: str = "*.parquet",
    timestamp: str | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    *,
    local_parallelism: int = 1,
) -> BatchSource[ColumnBatch]:
    """The rows of the Parquet files in ``directory`` matching ``glob``, as batches of ``batch_rows``.

    ``timestamp`` names the batches' event-time column, if any. Needs pyarrow.
    """
    root = Path(directory)
    if batch_rows < 1:
        raise ValueError(f"batch_rows must be >= 1, got {batch_rows}")

    def create(context: proc.ProcessorContext) -> _Reader:
        if not root.is_dir():
            raise FileNotFoundError(f"parquet_batches: {str(root)!r} is not a directory")
        names = sorted(p for p in root.iterdir() if p.is_file() and fnmatch.fnmatch(p.name, glob))
        mine = names[context.global_processor_index :: context.total_parallelism]
        return _Reader(mine, timestamp, batch_rows)

    return (
        SourceBuilder.batch("parquet-batches", create)
        .fill_buffer_fn(_fill)
        .create_snapshot_fn(_snapshot)
        .restore_snapshot_fn(_restore)
        .distributed(local_parallelism)
        .build()
    )
