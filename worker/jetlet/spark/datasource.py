"""The Spark data source ``"jetlet"`` (PySpark's Python Data Source API, PySpark 4.0+).

Theory of operation
-------------------
Registered automatically by the top-level module ``pyspark_jetlet`` (Spark
imports every ``pyspark_*`` module with a ``DefaultSource``), or by hand
with ``spark.dataSource.register(JetletDataSource)``.

**Spark → jetlet** (``df.write.format("jetlet").mode("append").save(uri)``,
``df.writeStream.format("jetlet").option("checkpointLocation", c).start(uri)``):
each task writes its Arrow batches to a staged Parquet file named by
(query, partition, attempt) (:class:`JetletArrowWriter`,
:class:`JetletStreamArrowWriter`; on PySpark 4.0, which has no stream Arrow
writer, :class:`JetletStreamWriter` converts rows); the driver's ``commit``
writes one manifest per (query id, batch id), idempotently, and deletes the
losing attempts' files; ``abort`` deletes the run's staging by prefix
(:mod:`jetlet.spark.exchange`). A running jetlet job reads the manifests
with :meth:`~jetlet.spark.sources.SparkSources.stream`. Nothing is pushed
into running jetlet processors: a Spark task may be retried, so its rows are
only data once Spark commits.

**jetlet → Spark** (``spark.read.format("jetlet").load(uri)``,
``spark.readStream.format("jetlet").load(uri)``): reads the files that
:meth:`~jetlet.spark.sinks.SparkSinks.parquet` committed (never its staged
files). The stream offset is, per sink processor index, the highest
sequence consumed (``{"files": {"<index>": sequence}}``): the sink commits
a processor's files in sequence order, so a micro-batch is the files
between two offsets, and a restarted query resumes after its checkpointed
offset, each file once. ``read()`` yields Arrow record batches. With
``.option("expire", "true")``, ``commit(end)`` deletes the files Spark has
consumed, after recording the offset in ``_jetlet_expired.json`` so the
sink never reuses their sequences.

>>> JetletDataSource.name()
'jetlet'
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from pyspark import TaskContext
from pyspark.sql import datasource as ds
from pyspark.sql.pandas.types import from_arrow_schema

from jetlet.spark import exchange, parquet_sink

EXPIRED = parquet_sink.EXPIRED

_StreamArrowBase: Any = getattr(ds, "DataSourceStreamArrowWriter", None)


def _root(options: Any) -> Path:
    path = options.get("path")
    if not path:
        raise ValueError('the "jetlet" data source needs a path: .load(uri) or .save(uri)')
    path = str(path)
    if path.startswith("file:"):
        path = path[len("file:") :]
        while path.startswith("//"):
            path = path[1:]
    return Path(path)


def committed_files(root: Path) -> dict[int, list[tuple[int, str]]]:
    """The sink's committed files: ``{processor index: [(sequence, file name), ...]}``, sorted.

    Two executions of a job may have committed the same sequence of an index (under names that differ in
    the execution): both are listed, and both fall in the micro-batch of that sequence.
    """
    found: dict[int, list[tuple[int, str]]] = {}
    if not root.is_dir():
        return found
    for path in root.iterdir():
        match = parquet_sink.FILE_NAME.fullmatch(path.name)
        if match is not None and not match.group("temp") and not path.name.startswith("."):
            found.setdefault(int(match.group("index")), []).append((int(match.group("sequence")), path.name))
    return {index: sorted(files) for index, files in sorted(found.items())}


class FilesPartition(ds.InputPartition):
    """Some of the sink's committed files, read by one Spark task."""

    def __init__(self, files: list[str]) -> None:
        super().__init__(files)
        self.files = files


def _partitions(names: Sequence[str], per_partition: int = 4) -> list[FilesPartition]:
    return [FilesPartition(list(names[i : i + per_partition])) for i in range(0, len(names), per_partition)]


def _read_files(root: Path, partition: FilesPartition, columns: list[str]) -> Iterator[Any]:
    for name in partition.files:
        file = pq.ParquetFile(root / name)
        yield from file.iter_batches(columns=columns)


class JetletBatchReader(ds.DataSourceReader):
    """Every file the sink has committed."""

    def __init__(self, root: Path, schema: Any) -> None:
        self.root = root
        self.columns = list(schema.fieldNames())

    def partitions(self) -> list[FilesPartition]:
        names = [name for files in committed_files(self.root).values() for _, name in files]
        return _partitions(names)

    def read(self, partition: ds.InputPartition) -> Iterator[Any]:
        assert isinstance(partition, FilesPartition)
        return _read_files(self.root, partition, self.columns)


class JetletStreamReader(ds.DataSourceStreamReader):
    """The sink's committed files as a stream; offsets are the highest sequence per index."""

    def __init__(self, root: Path, schema: Any, expire: bool) -> None:
        self.root = root
        self.columns = list(schema.fieldNames())
        self.expire = expire

    def initialOffset(self) -> dict[str, Any]:
        return {"files": {}}

    def latestOffset(self, start: dict[str, Any] | None = None, limit: Any = None) -> dict[str, Any]:
        latest = {str(index): files[-1][0] for index, files in committed_files(self.root).items()}
        if start is not None:  # never behind the start (expired files are gone from the listing)
            for index, seq in start.get("files", {}).items():
                latest[index] = max(seq, latest.get(index, -1))
        return {"files": latest}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[FilesPartition]:
        low, high = start.get("files", {}), end.get("files", {})
        names = [
            name
            for index, files in committed_files(self.root).items()
            for seq, name in files
            if low.get(str(index), -1) < seq <= high.get(str(index), -1)
        ]
        return _partitions(names)

    def read(self, partition: ds.InputPartition) -> Iterator[Any]:
        assert isinstance(partition, FilesPartition)
        return _read_files(self.root, partition, self.columns)

    def commit(self, end: dict[str, Any]) -> None:
        if not self.expire:
            return
        consumed = {int(index): seq for index, seq in end.get("files", {}).items()}
        expired = parquet_sink.read_expired(self.root)
        for index, seq in consumed.items():
            expired[index] = max(seq, expired.get(index, -1))
        _write_json(self.root / EXPIRED, {str(k): v for k, v in expired.items()})
        for index, files in committed_files(self.root).items():
            for seq, name in files:
                if seq <= consumed.get(index, -1):
                    (self.root / name).unlink(missing_ok=True)


def _write_json(path: Path, body: Any) -> None:
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=".", suffix=".tmp", delete=False) as tmp:
        json.dump(body, tmp)
    os.replace(tmp.name, path)


@dataclasses.dataclass
class JetletCommitMessage(ds.WriterCommitMessage):
    """What a task attempt staged: its query, its file (relative to the root; None without rows)."""

    query: str
    stage: str
    path: str | None
    rows: int


def _message(root: Path, path: Path, rows: int, query: str) -> JetletCommitMessage:
    relative = path.relative_to(root)
    return JetletCommitMessage(query, relative.parent.as_posix(), relative.as_posix() if rows else None, rows)


def _as_dicts(messages: list[Any]) -> list[dict[str, Any] | None]:
    return [dataclasses.asdict(m) if m is not None else None for m in messages]


def _stream_key(options: Any) -> str:
    """The staging key of a streaming query: a hash of its checkpoint location (see exchange)."""
    checkpoint = str(options.get("checkpointLocation") or "")
    return "s-" + hashlib.sha256(checkpoint.encode("utf-8")).hexdigest()[:16]


def _task() -> tuple[int, int, Any]:
    context = TaskContext.get()
    if context is None:
        raise RuntimeError('the "jetlet" data source writer runs only inside a Spark task')
    return context.partitionId(), context.attemptNumber(), context


class JetletArrowWriter(ds.DataSourceArrowWriter):
    """``df.write.format("jetlet")``: stage per (partition, attempt), commit one manifest."""

    def __init__(self, root: Path, run: str) -> None:
        self.root = root
        self.run = run

    def write(self, iterator: Iterator[Any]) -> Any:
        partition, attempt, _ = _task()
        query = f"write-{self.run}"
        path = exchange.staged_path(self.root, f"w-{self.run}", 0, query, partition, attempt)
        rows = exchange.write_staged(path, iterator)
        return _message(self.root, path, rows, query)

    def commit(self, messages: list[Any]) -> None:
        exchange.commit(self.root, 0, _as_dicts(messages))

    def abort(self, messages: list[Any]) -> None:
        exchange.abort(self.root, f"w-{self.run}", 0)


def _stream_write(writer: Any, batches: Iterator[Any]) -> JetletCommitMessage:
    partition, attempt, context = _task()
    query = context.getLocalProperty("sql.streaming.queryId") or "unknown-query"
    batch = int(context.getLocalProperty("streaming.sql.batchId") or 0)
    path = exchange.staged_path(writer.root, writer.key, batch, query, partition, attempt)
    rows = exchange.write_staged(path, batches)
    return _message(writer.root, path, rows, query)


def _rows_to_batches(rows: Iterator[Any], schema: Any, size: int = 8192) -> Iterator[Any]:
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_schema = to_arrow_schema(schema)
    names = arrow_schema.names
    chunk: list[dict[str, Any]] = []
    for row in rows:
        chunk.append(dict(zip(names, row, strict=True)))
        if len(chunk) >= size:
            yield pa.RecordBatch.from_pylist(chunk, schema=arrow_schema)
            chunk = []
    if chunk:
        yield pa.RecordBatch.from_pylist(chunk, schema=arrow_schema)


class JetletStreamWriter(ds.DataSourceStreamWriter):
    """``df.writeStream.format("jetlet")`` on PySpark 4.0 (rows, converted to Arrow)."""

    def __init__(self, root: Path, key: str, schema: Any) -> None:
        self.root = root
        self.schema = schema
        self.key = key

    def write(self, iterator: Iterator[Any]) -> Any:
        return _stream_write(self, _rows_to_batches(iterator, self.schema))

    def commit(self, messages: list[Any], batchId: int) -> None:
        exchange.commit(self.root, batchId, _as_dicts(messages))

    def abort(self, messages: list[Any], batchId: int) -> None:
        exchange.abort(self.root, self.key, batchId)


if _StreamArrowBase is not None:

    class JetletStreamArrowWriter(_StreamArrowBase):  # type: ignore[misc]
        """``df.writeStream.format("jetlet")`` on PySpark 4.1+ (Arrow batches)."""

        def __init__(self, root: Path, key: str) -> None:
            self.root = root
            self.key = key

        def write(self, iterator: Iterator[Any]) -> Any:
            return _stream_write(self, iterator)

        def commit(self, messages: list[Any], batchId: int) -> None:
            exchange.commit(self.root, batchId, _as_dicts(messages))

        def abort(self, messages: list[Any], batchId: int) -> None:
            exchange.abort(self.root, self.key, batchId)


class JetletDataSource(ds.DataSource):
    """The data source ``"jetlet"``; see the module doc."""

    def __init__(self, options: Any) -> None:
        super().__init__(options)
        # Drawn where Spark creates the data source on the driver and pickled with it to a batch write's
        # tasks and to its commit, so they agree on the staging directory (not so for streams: see exchange).
        self.run = exchange.new_run()

    @classmethod
    def name(cls) -> str:
        return "jetlet"

    def schema(self) -> Any:
        root = _root(self.options)
        files = committed_files(root)
        for index_files in files.values():
            arrow = pq.read_schema(root / index_files[0][1])
            return from_arrow_schema(arrow, prefer_timestamp_ntz=False)
        raise ValueError(
            f"jetlet data source: no committed file in {str(root)!r} to take the schema from; "
            "give one with .schema(...)"
        )

    def reader(self, schema: Any) -> JetletBatchReader:
        return JetletBatchReader(_root(self.options), schema)

    def streamReader(self, schema: Any) -> JetletStreamReader:
        expire = str(self.options.get("expire", "false")).lower() == "true"
        return JetletStreamReader(_root(self.options), schema, expire)

    def writer(self, schema: Any, overwrite: bool) -> JetletArrowWriter:
        if overwrite:
            raise ValueError('the "jetlet" data source only appends: use .mode("append")')
        return JetletArrowWriter(_root(self.options), self.run)

    def streamWriter(self, schema: Any, overwrite: bool) -> Any:
        if _StreamArrowBase is not None:
            return JetletStreamArrowWriter(_root(self.options), _stream_key(self.options))
        return JetletStreamWriter(_root(self.options), _stream_key(self.options), schema)
