"""Partitioned batch edges: a ColumnBatch split by hashing a key column, as the row path partitions keys.

The splitter is checked row by row against the row path's mapping (``stable_hash(key) %
partition_count`` through the edge's partition table), through an engine collector, and in a keyed
window aggregation on two members against plain Python.
"""

from __future__ import annotations

import collections
import random
from typing import Any

import numpy as np
import pytest

import jetlet
from jetlet._execution.outbound import OutboundCollector
from jetlet._execution.queues import SpscQueue
from jetlet.batches import ColumnBatch
from jetlet.batches import partitioning as bp
from jetlet.batches import windows as bw
from jetlet.core import RoutingPolicy
from jetlet.core.edge import Edge
from jetlet.core.partitioning import stable_hash
from jetlet.core.snapshot_keys import ProcessorKey
from jetlet.local_cluster import local_cluster
from jetlet.pipeline import Pipeline, Sinks, SourceBuilder, WindowDefinition
from jetlet.testing import TestOutbox, make_context, wait_until

COUNT = 271
EDGE_VALUES = [
    0,
    1,
    -1,
    -2,
    2,
    (1 << 61) - 1,
    (1 << 61) - 2,
    1 << 61,
    -((1 << 61) - 1),
    (1 << 63) - 1,
    -(1 << 63),
]


def _keys(kind: str, n: int, seed: int) -> np.ndarray[Any, Any]:
    draw = random.Random(seed)
    if kind == "int":
        return np.array(EDGE_VALUES + [draw.randrange(-(1 << 63), 1 << 63) for _ in range(n)], dtype=np.int64)
    if kind == "small int":
        return np.array([draw.randrange(-50, 50) for _ in range(n)], dtype=np.int32)
    if kind == "bool":
        return np.array([draw.random() < 0.5 for _ in range(n)])
    if kind == "uint":
        return np.array([draw.randrange(1 << 64) for _ in range(n)], dtype=np.uint64)
    return np.array([f"key-{draw.randrange(300)}" for _ in range(n)])


@pytest.mark.parametrize("kind", ["int", "small int", "bool", "uint", "str"])
def test_key_partitions_are_the_row_paths_stable_hash_partitions(kind: str) -> None:
    keys = _keys(kind, 2_000, 1)
    assert bp.key_partitions(keys, COUNT).tolist() == [stable_hash(k) % COUNT for k in keys.tolist()]


@pytest.mark.parametrize("kind", ["int", "small int", "str"])
def test_the_splitter_puts_every_row_in_exactly_one_sub_batch_that_of_its_keys_consumer(kind: str) -> None:
    # given a batch of keys and row numbers, and a partition table over three consumers
    keys = _keys(kind, 3_000, 2)
    rows = np.arange(len(keys))
    batch = ColumnBatch({"key": keys, "row": rows, "t": rows * 2}, "t")
    table = [partition % 3 for partition in range(COUNT)]
    # when the splitter splits the event (timestamp, batch)
    parts = bp.KeyColumnSplitter("key").bind(table)((5_998, batch))
    # then every row is in exactly one sub-batch, in its order, each with the batch's timestamp
    assert sorted(np.concatenate([part["row"] for _, (_, part) in parts]).tolist()) == rows.tolist()
    assert all(ts == 5_998 and part.timestamp == "t" for _, (ts, part) in parts)
    assert all(np.all(np.diff(part["row"]) > 0) for _, (_, part) in parts)
    # and each row went to the consumer the row path sends its key to: the same key, the same consumer
    for target, (_, part) in parts:
        assert [table[stable_hash(k) % COUNT] for k in part["key"].tolist()] == [target] * len(part)
    assert len({target for target, _ in parts}) == len(parts) == 3


def test_a_batch_of_one_consumers_keys_is_sent_whole_and_an_edge_partitions_by_split() -> None:
    batch = ColumnBatch({"key": np.array([5, 5, 5]), "t": np.array([1, 2, 3])}, "t")
    table = [partition % 2 for partition in range(COUNT)]
    [(target, whole)] = bp.KeyColumnSplitter("key").bind(table)(batch)
    assert whole is batch and target == table[stable_hash(5) % COUNT]
    # and a collector of an edge with a splitter sends each consumer its part, then the control items
    edge = Edge.between("a", "b").partitioned_split(bp.KeyColumnSplitter("key"))
    assert edge.routing_policy is RoutingPolicy.PARTITIONED and edge.key_fn is None
    queues = [SpscQueue(100), SpscQueue(100)]
    collector = OutboundCollector(
        queues, edge.routing_policy, target_of_partition=table, splitter=edge.splitter
    )
    mixed = ColumnBatch({"key": np.arange(40), "t": np.arange(40)}, "t")
    collector.push([(39, mixed)])
    assert collector.flush()
    got = {i: [x for element in iter(queue.poll, None) for x in element] for i, queue in enumerate(queues)}
    assert sorted(k for items in got.values() for _, part in items for k in part["key"].tolist()) == list(
        range(40)
    )
    assert all(
        table[stable_hash(k) % COUNT] == i
        for i, items in got.items()
        for _, p in items
        for k in p["key"].tolist()
    )
    assert edge.broadcast().splitter is None


def _sliced_source(rows: list[tuple[str, int, int]], per_batch: int) -> Any:
    """Each source processor (one per member) reads every n-th batch of ``rows`` (key, value, time)."""

    def create(context: Any) -> list[ColumnBatch]:
        index, total = context.global_processor_index, context.total_parallelism
        batches = [rows[i : i + per_batch] for i in range(0, len(rows), per_batch)]
        return [ColumnBatch.from_rows(("k", "v", "t"), b, "t") for b in batches[index::total]]

    def fill(remaining: list[ColumnBatch], buffer: Any) -> None:
        if remaining:
            batch = remaining.pop(0)
            buffer.add(batch, batch.max_timestamp())

    return SourceBuilder.timestamped_stream("sliced", create).fill_buffer_fn(fill).distributed(1).build()


def test_a_keyed_batch_window_sum_on_two_members_is_plain_pythons_each_key_on_one_member() -> None:
    # given rows (string key, value, time) read by one source processor per member
    draw = random.Random(4)
    rows = [(f"k{draw.randrange(60)}", draw.randrange(100), t) for t in range(0, 6_000, 2)]
    p = Pipeline()
    stage = p.read_from(_sliced_source(rows, 50)).with_native_timestamps(100)
    windows = stage.aggregate_batch_windows(WindowDefinition.sliding(1_000, 500), "k", "sum", "v")
    windows.write_to(Sinks.list("sums"))
    expected: dict[int, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for key, value, t in rows:
        for end in (t - t % 500 + 500, t - t % 500 + 1_000):
            expected[end][key] += value
    closed = {end: dict(sums) for end, sums in expected.items() if end <= 5_000}
    with local_cluster(2) as client:
        job = client.new_job(p)
        # when the windows up to 5,000 ms are out
        wait_until(
            lambda: {w.end for w in client.get_list("sums")} >= closed.keys() or job.future.done(),
            "every closed window",
            60,
        )
        metrics = job.metrics()
        job.cancel()
        windows_out = list(client.get_list("sums"))
    got = {w.end: dict(w.result.rows()) for w in windows_out if w.end <= 5_000}
    # then each window's sums are plain Python's, once per window (keys ascending)
    assert got == closed
    assert all(list(w.result["k"]) == sorted(w.result["k"]) for w in windows_out)
    # and the combine processors on both members had keys to combine
    combines = {k.split("/")[0] for k, v in metrics.items() if "-combine#" in k and v.get("receivedCount")}
    assert combines == {"m1", "m2"}


def test_a_combine_snapshot_is_saved_by_partition_and_restored_to_the_partitions_owner() -> None:
    # given a combine processor's frames of int keys
    spec = bw.Spec(size=20, slide=10, key="k", op="sum", value="v", name="sum")
    combine = bw.CombineToWindowsP(spec)
    outbox = TestOutbox(1, 1_000)
    combine.init(outbox, make_context())
    keys = np.arange(-30, 30)
    given = [(10, bw.Partial(keys, keys * 2)), (20, bw.Partial(keys[:5], keys[:5]))]
    combine.process(0, jetlet.core.Inbox(list(given)))
    # when it saves its state
    assert combine.save_to_snapshot()
    entries: list[tuple[Any, Any]] = []
    outbox.drain([[]], entries)
    # then each entry holds one partition's keys, keyed so that it is restored by that partition
    keyed = [(key, value) for key, value in entries if isinstance(key, bw.PartitionFrames)]
    assert keyed
    for key, frames in keyed:
        for partial in frames.values():
            assert {stable_hash(k) % COUNT for k in partial.keys.tolist()} == {key.partition}
    restored: dict[int, dict[int, int]] = collections.defaultdict(dict)
    for _key, frames in keyed:
        for end, partial in frames.items():
            restored[end].update(zip(partial.keys.tolist(), partial.values.tolist(), strict=True))
    assert restored == {end: dict(zip(p.keys.tolist(), p.values.tolist(), strict=True)) for end, p in given}
    # and its next window end is saved for every processor (a broadcast key)
    assert [v for k, v in entries if isinstance(k, ProcessorKey)] == [combine.next_end]
