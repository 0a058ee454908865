"""The exchange directory: how Spark hands committed batches to a running jetlet job.

Theory of operation
-------------------
The Spark data source ``"jetlet"`` (:mod:`jetlet.spark.datasource`) writes,
under the directory ``uri``::

    _staging/<key>/<batch>/<query>-p<partition>-a<attempt>-<random>.parquet
    _manifests/<query>/<batch, 12 digits>.json

A Spark task writes its rows (Arrow batches) to one staged file named by
(query, partition, attempt). ``<key>`` is ``w-<random>`` for a batch write
(drawn once on the driver, pickled with the writer) and, for a streaming
query, a hash of its checkpoint location: Spark creates a fresh writer for
each micro-batch's commit or abort, so only what the options say is known
to the tasks and to the commit alike. Staged files are not data yet: Spark
keeps the partial output of a failed attempt, and a replayed micro-batch
writes its rows again.

**Commit** (driver, :func:`commit`) writes the manifest of (query, batch)
listing the files of the winning attempts, *if it does not exist*
(``os.link`` of a complete temporary file: atomic create-if-absent), then
deletes every staged file of the batch's directory that the manifest does
not list (losing attempts). A replayed batch finds its manifest already
there: it deletes all it staged and adds nothing, so a commit is
idempotent per (query id, batch id). **Abort** (:func:`abort`) gets only
``None`` messages from Spark, so it cleans by prefix: every file of
``_staging/<key>/<batch>/`` that no manifest lists.

**Reading** (:class:`ManifestReader`, one processor in the jetlet cluster):
for each query (sorted by id) it reads the manifests whose batch is at or
after the next one it expects, in batch order, and within a manifest the
files in order. Its position is ``{query: (batch, file index, rows)}``:
every batch of the query before ``batch`` was emitted, and in ``batch``
every file before ``file index`` plus ``rows`` rows of that file. Spark
commits a query's batches in order (a batch starts only after the previous
one committed), so a manifest never appears behind the position, and a job
restored from a snapshot emits exactly the rows after it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from jetlet.core import processor as proc
from jetlet.core.processors import sources
from jetlet.spark import parquet_source

STAGING = "_staging"
MANIFESTS = "_manifests"


def new_run() -> str:
    """A fresh run id, for the staging directory of one batch write."""
    return uuid.uuid4().hex[:16]


STAGED_NAME = re.compile(r"(.+)-p\d+-a\d+-[0-9a-f]{8}\.parquet")
"""A staged file: ``<query>-p<partition>-a<attempt>-<random>.parquet``."""


def staged_path(root: Path, key: str, batch: int, query: str, partition: int, attempt: int) -> Path:
    """Where one task attempt stages its rows (the directory is created)."""
    directory = root / STAGING / key / str(batch)
    directory.mkdir(parents=True, exist_ok=True)
    return directory / f"{query}-p{partition}-a{attempt}-{uuid.uuid4().hex[:8]}.parquet"


def write_staged(path: Path, batches: Any) -> int:
    """Write an iterator of Arrow record batches to ``path``; the number of rows (0: no file)."""
    writer: pq.ParquetWriter | None = None
    rows = 0
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            if writer is None:
                writer = pq.ParquetWriter(path, batch.schema)
            writer.write_batch(batch)
            rows += batch.num_rows
    finally:
        if writer is not None:
            writer.close()
    if writer is not None:
        with path.open("rb") as file:
            os.fsync(file.fileno())
    return rows


def manifest_path(root: Path, query: str, batch: int) -> Path:
    return root / MANIFESTS / query / f"{batch:012d}.json"


def _committed_paths(root: Path, query: str, batch: int) -> set[Path]:
    """The files the manifest of (query, batch) lists (none if it does not exist)."""
    try:
        return {root / entry["path"] for entry in read_manifest(root, query, batch)["files"]}
    except FileNotFoundError:
        return set()


def _clean(root: Path, directory: Path, batch: int) -> None:
    """Delete the staged files of ``directory`` that no manifest of ``batch`` lists; then empty parents."""
    if directory.is_dir():
        listed: dict[str, set[Path]] = {}
        for path in directory.iterdir():
            match = STAGED_NAME.fullmatch(path.name)
            if match is None:
                continue
            query = match.group(1)
            if query not in listed:
                listed[query] = _committed_paths(root, query, batch)
            if path not in listed[query]:
                path.unlink(missing_ok=True)
    for empty in (directory, directory.parent):
        with contextlib.suppress(OSError):
            empty.rmdir()  # only if empty


def commit(root: Path, batch: int, messages: list[dict[str, Any] | None]) -> bool:
    """Publish the winning attempts' files of (query, batch) once; False if it was committed before.

    ``messages`` are the tasks' commit messages (dicts with ``query``,
    ``stage`` (their staging directory), ``path`` (None without rows) and
    ``rows``, paths relative to ``root``). Whether or not this call wrote
    the manifest, it then deletes every staged file of those directories
    that the manifest does not list (losing attempts, or a whole replay).
    """
    present = [m for m in messages if m is not None]
    if not present:
        return False
    query = present[0]["query"]
    files = [{"path": m["path"], "rows": m["rows"]} for m in present if m["path"] is not None]
    target = manifest_path(root, query, batch)
    target.parent.mkdir(parents=True, exist_ok=True)
    body = {"query": query, "batch": batch, "files": files, "committed_at": time.time()}
    written = False
    with tempfile.NamedTemporaryFile("w", dir=target.parent, prefix=".", suffix=".tmp", delete=False) as tmp:
        json.dump(body, tmp)
        tmp.flush()
        os.fsync(tmp.fileno())
    try:
        os.link(tmp.name, target)  # atomic create-if-absent: the first commit of (query, batch) wins
        written = True
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp.name)
    for stage in sorted({m["stage"] for m in present}):
        _clean(root, root / stage, batch)
    return written


def abort(root: Path, key: str, batch: int) -> None:
    """Delete what was staged under ``key`` for ``batch`` and is not committed (Spark gives no messages)."""
    _clean(root, root / STAGING / key / str(batch), batch)


def manifests(root: Path) -> dict[str, list[int]]:
    """The committed batches of every query, sorted."""
    found: dict[str, list[int]] = {}
    base = root / MANIFESTS
    if not base.is_dir():
        return found
    for query_dir in sorted(base.iterdir()):
        if query_dir.is_dir():
            batches = sorted(
                int(p.stem) for p in query_dir.iterdir() if p.suffix == ".json" and p.stem.isdigit()
            )
            found[query_dir.name] = batches
    return found


def read_manifest(root: Path, query: str, batch: int) -> dict[str, Any]:
    with manifest_path(root, query, batch).open(encoding="utf-8") as file:
        return json.load(file)  # type: ignore[no-any-return]


@dataclasses.dataclass(frozen=True)
class StreamReadOptions:
    root: str
    items: str = "dicts"
    batch_rows: int = 65536
    poll_interval: float = 0.2

    def __post_init__(self) -> None:
        if self.items not in parquet_source.ITEM_KINDS:
            raise ValueError(f"items must be one of {parquet_source.ITEM_KINDS}, got {self.items!r}")


class ManifestReader(sources.SourceReader):
    """Reads the committed batches of every query in order; see the module doc."""

    def __init__(self, options: StreamReadOptions, context: proc.ProcessorContext) -> None:
        self._options = options
        self._root = Path(options.root)
        self._position: dict[str, tuple[int, int, int]] = {}
        self._work: list[tuple[str, int, list[dict[str, Any]]]] = []  # (query, batch, files) to read
        self._table: pa.Table | None = None
        self._rows: list[Any] = []
        self._rows_at = 0
        self._next_poll = 0.0

    def _poll(self) -> None:
        now = time.monotonic()
        if now < self._next_poll:
            time.sleep(min(self._next_poll - now, 0.05))
            return
        self._next_poll = now + self._options.poll_interval
        for query, batches in manifests(self._root).items():
            start = self._position.get(query, (-1, 0, 0))[0]
            for batch in batches:
                if batch >= start:
                    files = read_manifest(self._root, query, batch)["files"]
                    self._work.append((query, batch, files))

    def read(self, limit: int) -> list[Any] | None:
        while True:
            if not self._work:
                self._poll()
                if not self._work:
                    return []
            query, batch, files = self._work[0]
            at_batch, file_index, done = self._position.get(query, (batch, 0, 0))
            if at_batch < batch:
                at_batch, file_index, done = batch, 0, 0
                self._position[query] = (batch, 0, 0)
            if file_index >= len(files):
                self._work.pop(0)
                self._position[query] = (batch + 1, 0, 0)
                continue
            entry = files[file_index]
            if self._table is None:
                self._table = pq.read_table(self._root / entry["path"])
                self._rows, self._rows_at = [], done
            table = self._table
            if done >= table.num_rows:
                self._table = None
                self._position[query] = (batch, file_index + 1, 0)
                continue
            if self._options.items == "batches":
                taken: list[Any] = (
                    table.slice(done, self._options.batch_rows).combine_chunks().to_batches()[:1]
                )
                count = taken[0].num_rows
            else:
                if done - self._rows_at >= len(self._rows):
                    self._rows = parquet_source.rows_of(
                        table.slice(done, parquet_source.ROW_CHUNK), self._options.items
                    )
                    self._rows_at = done
                start = done - self._rows_at
                taken = self._rows[start : start + limit]
                count = len(taken)
            self._position[query] = (batch, file_index, done + count)
            return taken

    def position(self) -> dict[str, tuple[int, int, int]]:
        return dict(self._position)

    def restore(self, positions: list[Any]) -> None:
        for position in positions:
            self._position.update(position)
        self._work = []
        self._table = None

    def close(self) -> None:
        self._table = None


def manifest_source_p(options: StreamReadOptions) -> proc.ProcessorMetaSupplier:
    """One non-cooperative processor in the cluster reading the exchange directory."""

    def make(context: proc.ProcessorContext) -> ManifestReader:
        return ManifestReader(options, context)

    return proc.ProcessorMetaSupplier.force_total_parallelism_one(
        lambda: sources.ReplayableSourceP(make, cooperative=False)
    )
