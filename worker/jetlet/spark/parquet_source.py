"""The hand-off source: jetlet members read, with pyarrow, the Parquet files Spark wrote.

Theory of operation
-------------------
A *table* is a directory of Parquet files (Spark's output: ``part-*.parquet``,
plus ``_SUCCESS`` when the job committed). Names that start with ``.`` or
``_`` are not data (Spark's own rule): staging files, ``_SUCCESS``,
``_temporary``. Subdirectories are walked; their files are data too
(partition columns encoded in directory names are not added to the rows).

**Splits.** The unit of work is a :class:`Split`, one row group of one
file, planned from the Parquet footers (:func:`plan_splits`). In batch mode
every processor lists the same files once ``_SUCCESS`` exists, plans the
same splits and runs the same deterministic assignment (:func:`assign`:
largest split first, to the processor with the fewest rows so far, ties to
the lowest index), so the processors share the table balanced by rows
without talking to each other. Each processor reads only its splits:
``read_row_group`` of its files, nothing else.

**Items.** ``"dicts"`` and ``"tuples"`` are rows (converted in chunks of
:data:`ROW_CHUNK` rows with ``to_pylist``), ``"batches"`` are Arrow record
batches of at most ``batch_rows`` rows, for columnar pipelines, and
``"columns"`` are the same batches as :class:`~jetlet.batches.ColumnBatch`
es, the items of the record-batch path (``map_batches``, ``filter_batches``,
``aggregate_windows``): each Arrow column becomes a numpy array, without a
copy for numbers without nulls (:func:`column_batch`), and no Python step
per row. Their ``timestamp_column``, when given, is converted to int64
milliseconds (from an Arrow timestamp, in C) and named the batch's
event-time column; a stream's native timestamp is then each batch's
highest.

**Position and replay.** The reader's position is ``{(file, row group):
rows emitted}`` for every split it has touched (a batch counts its rows).
:class:`~jetlet.core.processors.sources.ReplayableSourceP` saves it at each
snapshot after emitting what it had read, so the position is exactly after
the last emitted item. A restore merges the maps of every processor that
saved (the highest count of a split wins: one processor read it at a time),
and each processor, with its new assignment (maybe another number of
processors), starts each of its splits after the rows already emitted:
nothing is read twice, nothing is skipped.

**Incremental mode** (a stream) lists the directory every
``poll_interval`` seconds; every row group of a file it has not seen yet is
a new split, assigned to processor ``stable_hash((file, row group)) %
total_parallelism`` (the processors cannot see the same files at the same
moment, so balancing by rows is not possible; hashing is deterministic).
Each file is read once: a file that is in the position map is never
planned again. Files must appear atomically (written elsewhere and renamed
into place, as Spark's committers and :mod:`jetlet.spark.parquet_sink` do).

>>> shares = assign([Split("a", 0, 10), Split("a", 1, 6), Split("b", 0, 5)], 2)
>>> [[(s.file, s.row_group) for s in share] for share in shares]
[[('a', 0)], [('a', 1), ('b', 0)]]
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq

from jetlet.core import partitioning
from jetlet.core import processor as proc
from jetlet.core.processors import sources

if TYPE_CHECKING:
    from jetlet.batches import ColumnBatch

Items = Literal["dicts", "tuples", "batches", "columns"]
ITEM_KINDS: tuple[str, ...] = ("dicts", "tuples", "batches", "columns")

ROW_CHUNK = 8192
"""How many rows a reader converts to Python objects at a time."""

SUCCESS = "_SUCCESS"


@dataclasses.dataclass(frozen=True, slots=True, order=True)
class Split:
    """One row group of one Parquet file (``file`` relative to the table's directory)."""

    file: str
    row_group: int
    rows: int


def is_data_name(name: str) -> bool:
    """True for a name Spark would read as data (not hidden, not ``_SUCCESS``/``_temporary``)."""
    return not name.startswith((".", "_"))


def list_data_files(root: Path) -> list[str]:
    """The data files under ``root`` (relative POSIX paths, sorted), walking visible subdirectories."""
    found: list[str] = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if is_data_name(d))
        base = Path(directory).relative_to(root)
        found.extend((base / name).as_posix() for name in files if is_data_name(name))
    return sorted(found)


def plan_splits(root: Path, files: Sequence[str]) -> list[Split]:
    """Every non-empty row group of ``files``, from their footers."""
    splits: list[Split] = []
    for name in files:
        metadata = pq.ParquetFile(root / name).metadata
        for group in range(metadata.num_row_groups):
            rows = metadata.row_group(group).num_rows
            if rows:
                splits.append(Split(name, group, rows))
    return splits


def assign(splits: Sequence[Split], processors: int) -> list[list[Split]]:
    """Balance ``splits`` by rows over ``processors``, the same way in every process.

    Largest split first, to the processor with the fewest rows so far (the
    lowest index on a tie); each processor's splits come back in file order.
    """
    loads = [0] * processors
    shares: list[list[Split]] = [[] for _ in range(processors)]
    for split in sorted(splits, key=lambda s: (-s.rows, s.file, s.row_group)):
        target = min(range(processors), key=loads.__getitem__)
        loads[target] += split.rows
        shares[target].append(split)
    return [sorted(share) for share in shares]


def to_millis(value: Any) -> int:
    """An event time as epoch milliseconds: an int is taken as milliseconds, a datetime converted."""
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        return int(value.timestamp() * 1000)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise TypeError(f"an event-time column must hold ints (ms) or timestamps, got {value!r}")


def column_batch(record_batch: pa.RecordBatch, timestamp_column: str | None) -> ColumnBatch:
    """``record_batch`` as a :class:`ColumnBatch`, ``timestamp_column`` in int64 ms (see the module doc)."""
    from jetlet.batches import ColumnBatch  # numpy: only for items="columns"

    if timestamp_column is not None:
        at = record_batch.schema.get_field_index(timestamp_column)
        if at < 0:
            raise ValueError(f"no timestamp column {timestamp_column!r} among {record_batch.schema.names}")
        times = record_batch.column(at)
        if pa.types.is_timestamp(times.type):
            times = times.cast(pa.timestamp("ms", times.type.tz)).cast(pa.int64())
        elif not pa.types.is_integer(times.type):
            raise TypeError(
                f"an event-time column must hold ints (ms) or timestamps, "
                f"{timestamp_column!r} holds {times.type}"
            )
        if times.null_count:
            raise ValueError(f"the event-time column {timestamp_column!r} holds {times.null_count} nulls")
        record_batch = record_batch.set_column(at, timestamp_column, times)
    return ColumnBatch.from_arrow(record_batch, timestamp_column)


def rows_of(table: pa.Table | pa.RecordBatch, items: str) -> list[Any]:
    """The rows of ``table`` as dicts or tuples."""
    if items == "dicts":
        return list(table.to_pylist())
    return list(zip(*(column.to_pylist() for column in table.columns), strict=True))


@dataclasses.dataclass(frozen=True)
class ReadOptions:
    """How a Parquet table is read (see :class:`~jetlet.spark.sources.SparkSources`)."""

    root: str
    items: str = "dicts"
    columns: tuple[str, ...] | None = None
    batch_rows: int = 65536
    incremental: bool = False
    poll_interval: float = 0.2
    success_timeout: float | None = 600.0
    timestamp_column: str | None = None
    """With ``items="columns"``: the batches' event-time column (see the module doc)."""

    def __post_init__(self) -> None:
        if self.items not in ITEM_KINDS:
            raise ValueError(f"items must be one of {ITEM_KINDS}, got {self.items!r}")
        if not isinstance(self.batch_rows, int) or self.batch_rows < 1:
            raise ValueError(f"batch_rows must be an int >= 1, got {self.batch_rows!r}")
        if self.poll_interval <= 0:
            raise ValueError(f"poll_interval must be > 0 seconds, got {self.poll_interval!r}")


class ParquetReader(sources.SourceReader):
    """One processor's share of a Parquet table; see the module doc."""

    def __init__(self, options: ReadOptions, context: proc.ProcessorContext) -> None:
        self._options = options
        self._root = Path(options.root)
        self._index = context.global_processor_index
        self._parallelism = context.total_parallelism
        self._name = context.vertex_name
        self._offsets: dict[tuple[str, int], int] = {}
        self._queue: list[Split] | None = None  # my splits still to read, in order
        self._seen_files: set[str] = set()
        self._waiting_since = time.monotonic()
        self._next_poll = 0.0
        self._files: dict[str, pq.ParquetFile] = {}
        self._table: pa.Table | None = None  # the current split's row group
        self._rows: list[Any] = []  # converted rows of the current split, from ``_rows_at``
        self._rows_at = 0

    # -- planning ------------------------------------------------------------
    def _plan_batch(self) -> bool:
        """Plan once ``_SUCCESS`` exists; False while waiting for it."""
        if not (self._root / SUCCESS).exists():
            timeout = self._options.success_timeout
            if timeout is not None and time.monotonic() - self._waiting_since > timeout:
                raise TimeoutError(
                    f"source {self._name!r}: no {SUCCESS} in {str(self._root)!r} after {timeout} s; "
                    "did the Spark job that writes it fail? (SparkSources.table(..., incremental=True) "
                    "reads files as they appear)"
                )
            time.sleep(min(self._options.poll_interval, 0.05))
            return False
        splits = plan_splits(self._root, list_data_files(self._root))
        self._queue = self._unfinished(assign(splits, self._parallelism)[self._index])
        return True

    def _poll_incremental(self) -> None:
        now = time.monotonic()
        if now < self._next_poll:
            if self._queue is not None and not self._queue:
                time.sleep(min(self._next_poll - now, 0.05))
            return
        self._next_poll = now + self._options.poll_interval
        if self._queue is None:
            self._queue = []
        if not self._root.is_dir():
            return
        known = self._seen_files | {file for file, _ in self._offsets}
        new = [name for name in list_data_files(self._root) if name not in known]
        self._seen_files.update(new)
        mine = [
            split
            for split in plan_splits(self._root, new)
            if partitioning.stable_hash((split.file, split.row_group)) % self._parallelism == self._index
        ]
        self._queue.extend(self._unfinished(mine))

    def _unfinished(self, splits: list[Split]) -> list[Split]:
        return [s for s in splits if self._offsets.get((s.file, s.row_group), 0) < s.rows]

    # -- reading -------------------------------------------------------------
    def read(self, limit: int) -> list[Any] | None:
        if self._options.incremental:
            self._poll_incremental()
        elif self._queue is None and not self._plan_batch():
            return []
        assert self._queue is not None
        if not self._queue:
            return [] if self._options.incremental else None
        split = self._queue[0]
        key = (split.file, split.row_group)
        done = self._offsets.get(key, 0)
        if self._table is None:
            file = self._files.get(split.file)
            if file is None:
                file = self._files[split.file] = pq.ParquetFile(self._root / split.file)
            columns = list(self._options.columns) if self._options.columns is not None else None
            self._table = file.read_row_group(split.row_group, columns=columns)
            self._rows, self._rows_at = [], done
        table = self._table
        if self._options.items in ("batches", "columns"):
            batch = table.slice(done, self._options.batch_rows).combine_chunks().to_batches()
            taken: list[Any] = batch[:1]
            count = taken[0].num_rows if taken else 0
            if self._options.items == "columns":
                taken = [column_batch(record_batch, self._options.timestamp_column) for record_batch in taken]
        else:
            if done - self._rows_at >= len(self._rows):
                self._rows = rows_of(table.slice(done, ROW_CHUNK), self._options.items)
                self._rows_at = done
            start = done - self._rows_at
            taken = self._rows[start : start + limit]
            count = len(taken)
        self._offsets[key] = done + count
        if done + count >= split.rows:
            self._queue.pop(0)
            self._table = None
            self._rows = []
            if not any(s.file == split.file for s in self._queue):
                self._files.pop(split.file, None)
        return taken

    def position(self) -> dict[tuple[str, int], int]:
        return dict(self._offsets)

    def restore(self, positions: list[Any]) -> None:
        for offsets in positions:
            for key, rows in offsets.items():
                self._offsets[key] = max(rows, self._offsets.get(key, 0))
        self._queue = None if not self._options.incremental else self._queue
        self._table = None

    def close(self) -> None:
        self._files.clear()
        self._table = None


def parquet_source_p(options: ReadOptions) -> proc.ProcessorMetaSupplier:
    """The source processors of a Parquet table: one per member, non-cooperative (it reads files)."""

    def make(context: proc.ProcessorContext) -> ParquetReader:
        return ParquetReader(options, context)

    return sources.replayable_source_p(make, cooperative=False)


def timestamp_fn(items: str, columns: Sequence[str], column: str) -> Callable[[Any], int]:
    """Reads an item's event time from ``column``: a row's value, or a ColumnBatch's highest."""
    if items == "columns":
        from jetlet.batches import ColumnBatch  # numpy: only for items="columns"

        return ColumnBatch.max_timestamp
    if items == "dicts":
        return lambda row: to_millis(row[column])
    if items == "tuples":
        at = list(columns).index(column)
        return lambda row: to_millis(row[at])
    raise ValueError("an event-time column needs rows or ColumnBatches (items='columns'), not Arrow batches")
