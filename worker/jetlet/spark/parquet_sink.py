"""The Parquet sink: every sink processor writes its own Parquet files with pyarrow, for Spark to read.

Theory of operation
-------------------
Items are rows (dicts, or tuples with ``columns``) or Arrow record batches
and tables. A processor buffers rows and writes them as a row group once
:attr:`ParquetSinkOptions.row_group_rows` are buffered (and when its file
closes), converting them with ``pa.Table.from_pylist`` (dicts) or as one
struct array (tuples, typed by the schema or by the first rows; column by
column when a later row does not fit those types); Arrow items go through
as they are. Writing blocks, so the processor is
non-cooperative.

Every file is a *transaction*: it is written under a hidden temporary name
``.part-<index>-<execution>-<sequence>.parquet.tmp`` (Spark and
:mod:`jetlet.spark.parquet_source` skip names starting with ``.``) and
becomes visible when it is renamed, atomically, to
``part-<index>-<execution>-<sequence>.parquet``. ``<index>`` is the
processor's global index (5 digits), ``<execution>`` the execution id in hex
(``context.execution_id``; 0 in one process) and ``<sequence>`` (8 digits)
is one more than the highest sequence of that index already in the
directory, final or temporary, so, per index, a later commit always has a
higher sequence (the Spark stream reader of :mod:`jetlet.spark.datasource`
uses that as its offset). The execution in the name
(:mod:`jetlet.core.processors.transaction_names`, shared with the text file
sink) keeps two executions of a job from ever sharing a name: a newer
execution deletes a stale one's temporary files as leftovers and may pick
the very sequence the stale one had; without the execution in the name the
stale one's rollback (``close()``) then deleted the newer one's open file,
whose rows were gone when it committed, and its late commit published it.

**With EXACTLY_ONCE** the files commit with the job's snapshots, as
:mod:`jetlet.core.processors.file_sink` does for text files:
``save_to_snapshot`` saves the names of the pending and active
transactions; ``snapshot_commit_prepare`` closes the active file (a
complete Parquet file, fsynced), which becomes pending;
``snapshot_commit_finish(True)`` renames the pending files into place
(after ``False`` they wait for the next complete snapshot). A restore
commits the transactions its snapshot lists for every saving processor
``k`` with ``k % total_parallelism == global_processor_index``, and before
its first new transaction that processor deletes the other temporary files
of those ``k``: no complete snapshot lists them and their items are
replayed. So Spark only ever sees files whose items are in a complete
snapshot, each once.

**Without it** (NONE, AT_LEAST_ONCE) a file commits when it holds
``max_rows_per_file`` rows, when it is older than ``roll_interval``
seconds at the next item, at each snapshot's first phase, and at the end
of the input; a failure loses the rows of the open file (NONE) or replays
them (AT_LEAST_ONCE).

**``_SUCCESS``.** When a processor's input ends it commits everything,
writes its marker ``_jetlet_sink/<index>``, and if the markers of every
processor of the vertex exist it writes ``_SUCCESS`` (the last one to
finish does; two doing it at once write the same empty file). Each
processor deletes its own marker in ``init``, and processor 0 deletes an
older ``_SUCCESS``, so the file appears only when this job's sink has
written everything, which is what a batch reader
(:meth:`~jetlet.spark.sources.SparkSources.table`) waits for.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from jetlet import config
from jetlet.core import inbox as inbox_mod
from jetlet.core import outbox as outbox_mod
from jetlet.core import processor as proc
from jetlet.core import snapshot_keys
from jetlet.core import watermark as wm
from jetlet.core.processors.transaction_names import transaction_name, transaction_pattern

SNAPSHOT_TAG = "__jetlet_parquet_sink__"
SUCCESS = "_SUCCESS"
MARKERS = "_jetlet_sink"
EXPIRED = "_jetlet_expired.json"
"""Written by the Spark stream reader when it deletes consumed files: the highest sequence per index."""

INDEX_DIGITS, SEQUENCE_DIGITS = 5, 8
FILE_NAME = re.compile(
    rf"\.?part-{transaction_pattern(index_digits=INDEX_DIGITS, sequence_digits=SEQUENCE_DIGITS)}"
    r"\.parquet(?P<temp>\.tmp)?"
)
"""A final (``part-I-E-S.parquet``) or temporary (``.part-I-E-S.parquet.tmp``) file of the sink.

Groups ``index``, ``execution`` (None in a name from before the execution was in it), ``sequence``
and ``temp``.
"""


_ARROW_TYPES = frozenset({pa.RecordBatch, pa.Table})


def read_expired(root: Path) -> dict[int, int]:
    """The highest expired sequence per sink processor index (see :mod:`jetlet.spark.datasource`)."""
    try:
        with (root / EXPIRED).open(encoding="utf-8") as file:
            return {int(k): int(v) for k, v in json.load(file).items()}
    except FileNotFoundError:
        return {}


def final_name(index: int, execution: int, sequence: int) -> str:
    """The committed file of transaction ``sequence`` of processor ``index`` in execution ``execution``."""
    name = transaction_name(
        index, execution, sequence, index_digits=INDEX_DIGITS, sequence_digits=SEQUENCE_DIGITS
    )
    return f"part-{name}.parquet"


def temp_name(name: str) -> str:
    return f".{name}.tmp"


@dataclasses.dataclass(frozen=True)
class ParquetSinkOptions:
    """How the sink writes; see :meth:`~jetlet.spark.sinks.SparkSinks.parquet`."""

    directory: str
    schema: pa.Schema | None = None
    columns: tuple[str, ...] | None = None
    row_group_rows: int = 65536
    max_rows_per_file: int = 1_000_000
    roll_interval: float = 10.0
    compression: str = "snappy"

    def __post_init__(self) -> None:
        for name in ("row_group_rows", "max_rows_per_file"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"SparkSinks.parquet: {name} must be an int >= 1, got {value!r}")
        if self.roll_interval <= 0:
            raise ValueError(f"SparkSinks.parquet: roll_interval must be > 0, got {self.roll_interval!r}")
        if self.schema is not None and self.columns is not None and list(self.columns) != self.schema.names:
            raise ValueError("SparkSinks.parquet: columns and schema name different columns")


class _Transaction:
    """One Parquet file under its temporary name, committed by renaming it."""

    def __init__(self, directory: Path, name: str) -> None:
        self.name = name
        self.final = directory / name
        self.temp = directory / temp_name(name)
        self.writer: pq.ParquetWriter | None = None
        self.rows = 0
        self.started = time.monotonic()
        self._identity: tuple[int, int] | None = None

    def write(self, table: pa.Table, compression: str) -> None:
        if self.writer is None:
            self.writer = pq.ParquetWriter(self.temp, table.schema, compression=compression)
            created = os.stat(self.temp)
            self._identity = (created.st_dev, created.st_ino)
        elif table.schema != self.writer.schema:
            try:
                table = table.cast(self.writer.schema)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
                raise TypeError(
                    f"SparkSinks.parquet: rows of types {table.schema} do not fit the types the first rows "
                    f"gave the file, {self.writer.schema}; give the sink a schema=pyarrow.schema([...])"
                ) from exc
        self.writer.write_table(table)
        self.rows += table.num_rows

    def prepare(self) -> None:
        """Close the file and make it durable; after this it only commits."""
        if self.writer is not None:
            self.writer.close()
            self.writer = None
            with self.temp.open("rb") as file:
                os.fsync(file.fileno())

    def commit(self) -> None:
        self.prepare()
        if self.temp.exists():
            os.replace(self.temp, self.final)

    def discard(self) -> None:
        """Close the file and delete it, if its name still names it.

        A later run with the same execution id (in one process) may have deleted it as a leftover and
        begun its own file under the same name: that file is not this transaction's to delete. The check
        runs while the file is still open, so that its inode cannot have been reused for the newer file.
        """
        try:
            found = os.stat(self.temp)
        except FileNotFoundError:
            found = None
        if found is not None and (found.st_dev, found.st_ino) == self._identity:
            self.temp.unlink(missing_ok=True)
        if self.writer is not None:
            self.writer.close()
            self.writer = None


class ParquetSinkP(proc.Processor):
    """See the module doc."""

    def __init__(self, options: ParquetSinkOptions) -> None:
        self._options = options
        self._directory = Path(options.directory)
        self._exactly_once = False
        self._rows: list[Any] = []
        self._inferred: pa.Schema | None = None
        self._active: _Transaction | None = None
        self._pending: list[_Transaction] = []
        self._sequence: int | None = None
        self._leftovers_deleted = False
        self._snapshot_in_progress = False

    def is_cooperative(self) -> bool:
        return False

    def init(self, outbox: outbox_mod.Outbox, context: proc.ProcessorContext) -> None:
        super().init(outbox, context)
        self._exactly_once = context.processing_guarantee is config.ProcessingGuarantee.EXACTLY_ONCE
        (self._directory / MARKERS).mkdir(parents=True, exist_ok=True)
        (self._directory / MARKERS / str(context.global_processor_index)).unlink(missing_ok=True)
        if context.global_processor_index == 0:
            (self._directory / SUCCESS).unlink(missing_ok=True)

    # -- items ---------------------------------------------------------------
    def process(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        items = inbox.take_all()
        if _ARROW_TYPES.isdisjoint(map(type, items)):  # rows only: the common case, checked in C
            self._rows.extend(items)
        else:
            for item in items:
                if type(item) in _ARROW_TYPES:
                    self._flush_rows()
                    self._write(item if isinstance(item, pa.Table) else pa.Table.from_batches([item]))
                else:
                    self._rows.append(item)
        if len(self._rows) >= self._options.row_group_rows:
            self._flush_rows()
        active = self._active
        if not self._exactly_once and active is not None:
            expired = time.monotonic() - active.started > self._options.roll_interval
            if expired or active.rows >= self._options.max_rows_per_file:
                self._flush_rows()
                self._roll()

    def try_process_watermark(self, watermark: wm.Watermark) -> bool:
        return True

    def _flush_rows(self) -> None:
        if self._rows:
            rows, self._rows = self._rows, []
            self._write(self._to_table(rows))

    def _to_table(self, rows: list[Any]) -> pa.Table:
        options = self._options
        if isinstance(rows[0], dict):
            return pa.Table.from_pylist(rows, schema=options.schema)
        names = options.columns or (tuple(options.schema.names) if options.schema is not None else None)
        if names is None:
            raise TypeError(
                f"{self.context.vertex_name}: rows that are not dicts need column names "
                "(SparkSinks.parquet(..., columns=[...]) or a schema)"
            )
        schema = options.schema or self._inferred
        if schema is None:  # the types of the first rows decide, as for dicts
            sample = rows[:1024]
            schema = pa.Table.from_arrays(
                [pa.array(c) for c in zip(*sample, strict=True)], names=list(names)
            ).schema
            if not any(pa.types.is_null(field.type) for field in schema):
                self._inferred = schema
        try:  # tuples as one struct array: converted in one pass in C, ~6x faster than column by column
            return pa.Table.from_struct_array(pa.array(rows, type=pa.struct(list(schema))))
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            arrays = [pa.array(column) for column in zip(*rows, strict=True)]
            return pa.Table.from_arrays(arrays, names=list(names))

    def _write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        if self._active is None:
            self._delete_leftovers()
            self._active = _Transaction(self._directory, self._new_name())
        self._active.write(table, self._options.compression)

    def _roll(self) -> None:
        if self._active is not None:
            self._active.commit()
            self._active = None

    def complete(self) -> bool:
        if self._snapshot_in_progress:
            return False  # the second phase decides about what is pending: wait for it
        self._flush_rows()
        self._delete_leftovers()
        if self._active is not None:
            self._pending.append(self._active)
            self._active = None
        for transaction in self._pending:
            transaction.commit()
        self._pending = []
        self._mark_done()
        return True

    def _mark_done(self) -> None:
        markers = self._directory / MARKERS
        (markers / str(self.context.global_processor_index)).touch()
        total = self.context.total_parallelism
        if all((markers / str(index)).exists() for index in range(total)):
            temp = self._directory / f".{SUCCESS}.{self.context.global_processor_index}.tmp"
            temp.touch()
            os.replace(temp, self._directory / SUCCESS)

    def close(self) -> None:
        if self._active is not None:
            self._active.discard()
            self._active = None
        for transaction in self._pending:  # kept on disk for a restore to commit
            if transaction.writer is not None:
                transaction.writer.close()
                transaction.writer = None
        self._pending = []
        self._rows = []

    # -- naming and leftovers ------------------------------------------------
    def _new_name(self) -> str:
        index, execution = self.context.global_processor_index, self.context.execution_id
        if self._sequence is None:
            highest = read_expired(self._directory).get(index, -1)
            for path in self._directory.iterdir():
                match = FILE_NAME.fullmatch(path.name)
                if match is not None and int(match.group("index")) == index:
                    highest = max(highest, int(match.group("sequence")))
            self._sequence = highest + 1
        while True:
            name = final_name(index, execution, self._sequence)
            self._sequence += 1
            if not (self._directory / name).exists() and not (self._directory / temp_name(name)).exists():
                return name

    def _owns(self, saver_index: int) -> bool:
        return saver_index % self.context.total_parallelism == self.context.global_processor_index

    def _delete_leftovers(self) -> None:
        """Delete, once, the temporary files of the processors this one recovers (see the module doc)."""
        if self._leftovers_deleted or not self._exactly_once:
            return
        self._leftovers_deleted = True
        for path in self._directory.iterdir():
            match = FILE_NAME.fullmatch(path.name)
            if match is not None and match.group("temp") and self._owns(int(match.group("index"))):
                path.unlink(missing_ok=True)

    # -- snapshots -------------------------------------------------------------
    def save_to_snapshot(self) -> bool:
        names: tuple[str, ...] = ()
        if self._exactly_once:
            self._flush_rows()
            names = tuple(t.name for t in self._pending)
            if self._active is not None:
                names += (self._active.name,)
        key = snapshot_keys.ProcessorKey(SNAPSHOT_TAG, self.context.global_processor_index)
        return self.outbox.offer_to_snapshot(key, names)

    def snapshot_commit_prepare(self) -> bool:
        self._flush_rows()
        if not self._exactly_once:
            self._roll()
            return True
        if self._active is not None:
            self._active.prepare()
            self._pending.append(self._active)
            self._active = None
        self._snapshot_in_progress = True
        return True

    def snapshot_commit_finish(self, success: bool) -> bool:
        self._snapshot_in_progress = False
        if self._exactly_once and success:
            for transaction in self._pending:
                transaction.commit()
            self._pending = []
        return True

    def restore_from_snapshot(self, inbox: inbox_mod.Inbox) -> None:
        for key, names in inbox.take_all():
            if not (isinstance(key, snapshot_keys.ProcessorKey) and key.tag == SNAPSHOT_TAG):
                raise ValueError(f"{self.context.vertex_name}: a Parquet sink cannot restore {key!r}")
            if self._exactly_once and self._owns(key.processor_index):
                for name in names:
                    temp, final = self._directory / temp_name(name), self._directory / name
                    if temp.exists():
                        os.replace(temp, final)
                    elif not final.exists():
                        self.context.logger.warning(
                            "%s: neither the temporary nor the final file of %s exists; its rows may be lost",
                            self.context.vertex_name,
                            name,
                        )


def parquet_sink_p(options: ParquetSinkOptions) -> proc.ProcessorMetaSupplier:
    """Sink processors writing Parquet files into ``options.directory`` (see the module doc)."""
    return proc.ProcessorMetaSupplier.of(lambda: ParquetSinkP(options))
