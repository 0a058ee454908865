"""The exchange directory without Spark: commits are idempotent per (query, batch), and the jetlet reader
of the manifests replays exactly from its snapshot position.

The files are staged and committed the way the ``"jetlet"`` data source's
tasks and driver do (:mod:`jetlet.spark.exchange`), including a losing
attempt and a replayed batch; the reader is driven as the source processor
drives it (read, save the position, restore a fresh reader from it).
"""

from __future__ import annotations

import collections
import pathlib
from typing import Any

import pyarrow as pa
import pytest

from jetlet.spark import exchange
from jetlet.testing import make_context

pytestmark = pytest.mark.spark


def _stage(
    root: pathlib.Path, key: str, query: str, batch: int, partition: int, attempt: int, ids: range
) -> Any:
    path = exchange.staged_path(root, key, batch, query, partition, attempt)
    rows = exchange.write_staged(path, iter(pa.table({"id": list(ids)}).to_batches(max_chunksize=7)))
    relative = path.relative_to(root)
    return {"query": query, "stage": relative.parent.as_posix(), "path": relative.as_posix(), "rows": rows}


def _spark_batch(root: pathlib.Path, query: str, batch: int, ids: range) -> bool:
    """Two tasks, the second with a failed first attempt whose partial file stays behind; then commit."""
    half = ids.start + len(ids) // 2
    first = _stage(root, "s-key", query, batch, 0, 0, range(ids.start, half))
    _stage(root, "s-key", query, batch, 1, 0, range(half, half + 3))  # the losing attempt's partial output
    second = _stage(root, "s-key", query, batch, 1, 1, range(half, ids.stop))
    return exchange.commit(root, batch, [first, second])


def _reader(root: pathlib.Path) -> exchange.ManifestReader:
    options = exchange.StreamReadOptions(str(root), items="tuples", poll_interval=0.001)
    return exchange.ManifestReader(options, make_context("stream"))


def _drain(reader: exchange.ManifestReader, calls: int, limit: int = 10) -> list[Any]:
    got: list[Any] = []
    for _ in range(calls):
        got += reader.read(limit) or []
    return got


def test_commit_is_idempotent_and_keeps_only_the_winning_attempts(tmp_path: pathlib.Path) -> None:
    assert _spark_batch(tmp_path, "q1", 0, range(0, 40))
    staged = sorted(p.name for p in (tmp_path / exchange.STAGING).rglob("*.parquet"))
    assert len(staged) == 2 and not any("-p1-a0-" in name for name in staged)
    # a replay of batch 0 (same query, same batch id) adds nothing and deletes what it staged
    assert not _spark_batch(tmp_path, "q1", 0, range(0, 40))
    assert sorted(p.name for p in (tmp_path / exchange.STAGING).rglob("*.parquet")) == staged
    # an abort with no messages deletes what no manifest lists, and only that
    _stage(tmp_path, "s-key", "q1", 1, 0, 0, range(5))
    exchange.abort(tmp_path, "s-key", 1)
    assert sorted(p.name for p in (tmp_path / exchange.STAGING).rglob("*.parquet")) == staged


def test_the_reader_emits_every_committed_row_once_across_a_restore(tmp_path: pathlib.Path) -> None:
    expected = collections.Counter((i,) for i in range(0, 300))
    _spark_batch(tmp_path, "q1", 0, range(0, 100))
    _spark_batch(tmp_path, "q1", 1, range(100, 150))
    _spark_batch(tmp_path, "q2", 0, range(150, 200))
    reader = _reader(tmp_path)
    emitted = _drain(reader, 12)  # part of the way
    position = reader.position()
    # the process dies; more batches are committed meanwhile (one of them replayed: it adds nothing)
    _spark_batch(tmp_path, "q1", 2, range(200, 260))
    _spark_batch(tmp_path, "q1", 1, range(100, 150))
    _spark_batch(tmp_path, "q2", 1, range(260, 300))
    restored = _reader(tmp_path)
    restored.restore([position])
    emitted += _drain(restored, 200)
    assert collections.Counter(emitted) == expected
