"""``SparkSources``: Spark's data as jetlet sources, handed off through Parquet files.

Theory of operation
-------------------
Pulling a DataFrame through Spark into Python costs 1.3-2.9 M rows per
CPU-second at best (``toArrow()``), while pyarrow reads the Parquet files
Spark writes at ~16 M. So jetlet never pulls rows through Spark: Spark
writes Parquet where the members can read it (a shared file system), and
the members read it with pyarrow (:mod:`jetlet.spark.parquet_source`).

* :meth:`SparkSources.dataframe` has Spark write the DataFrame (on the
  process that builds the pipeline, before the job is submitted: Spark is
  never on the job's path) and returns :meth:`SparkSources.table` of it.
* :meth:`SparkSources.table` reads a Parquet directory: a batch source
  that waits for ``_SUCCESS`` and splits the row groups among the source's
  processors, or, with ``incremental=True``, a stream source that reads
  each new file once.
* :meth:`SparkSources.stream` consumes what a Spark query writes with
  ``df.write.format("jetlet")`` or ``df.writeStream.format("jetlet")``
  (:mod:`jetlet.spark.exchange`), one committed micro-batch at a time.

Only this package imports pyspark and pyarrow; pyspark is imported only
where a DataFrame is handled, so the members need pyarrow alone.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from jetlet.pipeline import sources as sources_mod
from jetlet.spark import exchange, parquet_source


def _path(what: str, uri: str | os.PathLike[str]) -> str:
    if not isinstance(uri, str | os.PathLike) or not os.fspath(uri):
        raise ValueError(f"{what}: uri must be a non-empty path, got {uri!r}")
    path = os.fspath(uri)
    if path.startswith("file://"):
        path = path[len("file://") :]
    elif "://" in path:
        raise ValueError(f"{what}: only local or shared file system paths are supported, got {path!r}")
    return os.path.abspath(path)


class SparkSources:
    """Factories of the Spark sources."""

    @staticmethod
    def dataframe(
        df: Any,
        uri: str | os.PathLike[str],
        items: str = "dicts",
        columns: Sequence[str] | None = None,
        batch_rows: int = 65536,
        files: int | None = None,
        timestamp_column: str | None = None,
    ) -> sources_mod.BatchSource[Any]:
        """Spark writes ``df`` as Parquet to ``uri`` (replacing it) now; the source reads it on the members.

        ``uri`` must be a directory every member can read. ``files`` sets the
        number of files Spark writes (``repartition``); by default Spark's
        own partitioning decides. ``items``, ``columns``, ``batch_rows`` and
        (with ``items="columns"``) ``timestamp_column`` are as in :meth:`table`.

        Example (needs a SparkSession ``spark`` and a shared directory)::

            df = spark.range(1000).withColumnRenamed("id", "n")
            p = Pipeline()
            p.read_from(SparkSources.dataframe(df, "/shared/in", items="tuples")).write_to(Sinks.list("out"))
        """
        path = _path("SparkSources.dataframe", uri)
        if files is not None:
            df = df.repartition(files)
        df.write.mode("overwrite").parquet("file://" + path)
        source: sources_mod.BatchSource[Any] = SparkSources.table(
            path, items=items, columns=columns, batch_rows=batch_rows, timestamp_column=timestamp_column
        )
        return source

    @staticmethod
    def table(
        uri: str | os.PathLike[str],
        items: str = "dicts",
        columns: Sequence[str] | None = None,
        batch_rows: int = 65536,
        incremental: bool = False,
        poll_interval: float = 0.2,
        success_timeout: float | None = 600.0,
        timestamp_column: str | None = None,
    ) -> Any:
        """The rows of the Parquet table in directory ``uri``, read by the members with pyarrow.

        ``items``: ``"dicts"`` (``{column: value}``), ``"tuples"`` (values in
        column order), ``"batches"`` (``pyarrow.RecordBatch`` of at most
        ``batch_rows`` rows) or ``"columns"`` (the same batches as
        :class:`~jetlet.batches.ColumnBatch` es of numpy columns, for
        ``map_batches`` and the other record-batch stages; with
        ``timestamp_column``, that column in int64 ms is the batches'
        event-time column). ``columns`` reads only those columns, in that
        order.

        Batch mode (the default) returns a ``BatchSource``: it waits (up to
        ``success_timeout`` seconds) for ``_SUCCESS``, then splits the row
        groups among the source's processors (one per member), balanced by
        rows. Snapshots save rows read per row group, so a restore, also into
        another number of members, reads every row exactly once.

        ``incremental=True`` returns a ``StreamSource`` that never ends: it
        looks for new files every ``poll_interval`` seconds and reads each
        once. ``timestamp_column`` (rows only; ints in ms or timestamps) gives
        the stream native timestamps, for ``with_native_timestamps(lag)``
        (rows, or ``"columns"``: each batch's highest time).

        >>> import pyarrow as pa, pyarrow.parquet as pq, tempfile, pathlib, jetlet
        >>> from jetlet.pipeline import Pipeline, Sinks
        >>> from jetlet.spark import SparkSources
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> pq.write_table(pa.table({"n": [1, 2, 3]}), d / "part-0.parquet")
        >>> (d / "_SUCCESS").touch()
        >>> p = Pipeline()
        >>> _ = p.read_from(SparkSources.table(d, items="tuples")).write_to(Sinks.list("rows"))
        >>> with jetlet.embedded() as jet:
        ...     jet.new_job(p).join()
        ...     sorted(jet.get_list("rows"))
        [(1,), (2,), (3,)]
        """
        path = _path("SparkSources.table", uri)
        options = parquet_source.ReadOptions(
            root=path,
            items=items,
            columns=tuple(columns) if columns is not None else None,
            batch_rows=batch_rows,
            incremental=incremental,
            poll_interval=poll_interval,
            success_timeout=success_timeout,
            timestamp_column=timestamp_column if items == "columns" else None,
        )
        supplier = parquet_source.parquet_source_p(options)
        if not incremental:
            if timestamp_column is not None and items != "columns":
                raise ValueError(
                    "SparkSources.table: timestamp_column needs incremental=True (a stream) "
                    "or items='columns'"
                )
            return sources_mod.BatchSource(f"sparkTable({path})", supplier)
        timestamps = None
        if timestamp_column is not None:
            if items == "tuples" and columns is None:
                raise ValueError("SparkSources.table: with items='tuples', a timestamp_column needs columns")
            timestamps = parquet_source.timestamp_fn(items, list(columns or ()), timestamp_column)
        return sources_mod.StreamSource(f"sparkTableStream({path})", supplier, native_timestamps=timestamps)

    @staticmethod
    def stream(
        uri: str | os.PathLike[str],
        items: str = "dicts",
        batch_rows: int = 65536,
        poll_interval: float = 0.2,
    ) -> sources_mod.StreamSource[Any]:
        """What Spark writes to ``uri`` with ``format("jetlet")``, each committed batch once, in order.

        Spark's side: ``df.write.format("jetlet").mode("append").save(uri)`` or
        ``df.writeStream.format("jetlet").option("checkpointLocation", c).start(uri)``
        (see :mod:`jetlet.spark.datasource`). Each Spark commit writes one
        manifest per (query id, batch id); this source reads the manifests of
        each query in batch order, on one processor in the cluster, and saves
        (query, batch, file, row) in its snapshots: a job restored from a
        snapshot resumes exactly after the last emitted row.

        Example (needs a running Spark query writing to ``/shared/x``)::

            p = Pipeline()
            p.read_from(SparkSources.stream("/shared/x")).without_timestamps().write_to(Sinks.list("rows"))
        """
        path = _path("SparkSources.stream", uri)
        options = exchange.StreamReadOptions(path, items, batch_rows, poll_interval)
        return sources_mod.StreamSource(f"sparkStream({path})", exchange.manifest_source_p(options))
