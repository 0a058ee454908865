"""Outbound collectors: unicast, isolated, broadcast, partitioned and all-to-one routing, and backpressure."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from jetlet._execution.outbound import OutboundCollector
from jetlet._execution.queues import DONE_ITEM, SpscQueue
from jetlet.core import edge, partitioning


def _queues(count: int, capacity: int = 100) -> list[SpscQueue]:
    return [SpscQueue(capacity, f"q{i}") for i in range(count)]


def _drain(queue: SpscQueue) -> list[Any]:
    """Every element in the queue: items of batches flattened, control items as they are."""
    out: list[Any] = []
    while (element := queue.poll()) is not None:
        if type(element) is list:
            out.extend(element)
        else:
            out.append(element)
    return out


def test_given_three_consumers_with_room_when_unicast_then_batches_go_round_robin() -> None:
    targets = _queues(3)
    collector = OutboundCollector(targets, edge.RoutingPolicy.UNICAST)
    for batch in ([1], [2], [3], [4]):
        collector.push(batch)
        assert collector.flush()
    assert [_drain(q) for q in targets] == [[1, 4], [2], [3]]
    assert collector.delivered == 4


def test_given_a_full_consumer_when_unicast_then_the_batch_goes_to_the_next_one_with_room() -> None:
    targets = _queues(3, capacity=1)
    targets[0].offer_batch(["full"])
    collector = OutboundCollector(targets, edge.RoutingPolicy.UNICAST)
    collector.push([1])
    assert collector.flush()
    assert [_drain(q) for q in targets] == [["full"], [1], []]


def test_given_every_consumer_full_when_unicast_then_the_batch_stays_pending_until_there_is_room() -> None:
    targets = _queues(2, capacity=2)
    for queue in targets:
        queue.offer_batch(["x", "x"])
    collector = OutboundCollector(targets, edge.RoutingPolicy.UNICAST)
    collector.push([1, 2, 3])
    assert not collector.flush()
    assert not collector.is_flushed()
    assert targets[0].poll() == ["x", "x"]
    assert not collector.flush()  # only two of the three items fit
    assert collector.delivered == 2
    assert targets[0].poll() == [1, 2]
    assert collector.flush()
    assert _drain(targets[0]) == [3]
    assert _drain(targets[1]) == ["x", "x"]
    assert collector.delivered == 3


def test_given_one_queue_when_isolated_or_all_to_one_then_every_batch_goes_to_it() -> None:
    for policy in (edge.RoutingPolicy.ISOLATED, edge.RoutingPolicy.ALL_TO_ONE):
        [queue] = targets = _queues(1)
        collector = OutboundCollector(targets, policy)
        collector.push([1, 2])
        collector.push([3])
        assert collector.flush()
        assert _drain(queue) == [1, 2, 3]


def test_given_broadcast_when_a_batch_is_pushed_then_every_consumer_gets_all_of_it() -> None:
    targets = _queues(3)
    collector = OutboundCollector(targets, edge.RoutingPolicy.BROADCAST)
    collector.push([1, 2, 3])
    assert collector.flush()
    assert [_drain(q) for q in targets] == [[1, 2, 3]] * 3


def test_given_a_partition_table_when_partitioned_then_each_item_goes_to_the_owner_of_its_key() -> None:
    partition_count = 7
    table = [p % 3 for p in range(partition_count)]
    targets = _queues(3)
    collector = OutboundCollector(
        targets, edge.RoutingPolicy.PARTITIONED, str.upper, target_of_partition=table
    )
    words = ["apple", "pear", "fig", "kiwi", "apple", "plum", "fig", "lime"]
    collector.push(list(words))
    assert collector.flush()
    expected: list[list[str]] = [[], [], []]
    for word in words:
        expected[table[partitioning.stable_hash(word.upper()) % partition_count]].append(word)
    assert [_drain(q) for q in targets] == expected


def test_given_a_custom_partitioner_when_partitioned_then_its_partitions_are_used() -> None:
    class Parity:
        def get_partition(self, key: Any, partition_count: int) -> int:
            return int(key) % 2

    targets = _queues(2)
    collector = OutboundCollector(
        targets, edge.RoutingPolicy.PARTITIONED, lambda n: n, Parity(), target_of_partition=[1, 0]
    )
    collector.push([1, 2, 3, 4])
    assert collector.flush()
    assert [_drain(q) for q in targets] == [[1, 3], [2, 4]]


def test_given_a_copy_of_the_default_partitioner_when_partitioned_then_it_routes_without_a_call_per_item(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given the default partitioner as a member has it: unpickled from the job's DAG, not the module's object
    partitioner = pickle.loads(pickle.dumps(partitioning.DEFAULT_PARTITIONER))
    assert partitioner is not partitioning.DEFAULT_PARTITIONER
    calls: list[Any] = []
    monkeypatch.setattr(
        partitioning.HashPartitioner, "get_partition", lambda self, key, count: calls.append(key)
    )
    table = [p % 2 for p in range(271)]
    targets = _queues(2)
    collector = OutboundCollector(targets, edge.RoutingPolicy.PARTITIONED, lambda n: n, partitioner, table)
    # when a batch is split
    collector.push(list(range(20)))
    assert collector.flush()
    # then each item went to the owner of stable_hash(key) % 271, and get_partition was never called
    assert [_drain(q) for q in targets] == [[n for n in range(20) if table[n] == t] for t in range(2)]
    assert calls == []


def test_given_data_pending_for_a_full_queue_when_a_control_item_is_pushed_then_it_follows_the_data() -> None:
    targets = _queues(2, capacity=1)
    collector = OutboundCollector(targets, edge.RoutingPolicy.BROADCAST)
    collector.push([1, 2])
    collector.push_control(DONE_ITEM)
    assert not collector.flush()
    assert targets[0].poll() == [1]
    assert targets[1].poll() == [1]
    assert collector.flush()
    assert [_drain(q) for q in targets] == [[2, DONE_ITEM], [2, DONE_ITEM]]


_KEYS: list[Any] = [
    0,
    1,
    270,
    271,
    10_987,
    partitioning.OWN_HASH_INTS - 1,
    partitioning.OWN_HASH_INTS,  # the first int that is not its own hash
    2**64 + 3,
    -1,
    -(2**61),
    True,
    False,
    1.0,
    2.5,
    "auction-7",
    b"bytes",
    ("a", 3),
    None,
]


@pytest.mark.parametrize("events", [False, True], ids=["items", "(timestamp, item) events"])
def test_given_keys_of_every_kind_when_partitioned_then_each_goes_where_its_stable_hash_says(
    events: bool,
) -> None:
    # given three consumers owning the 271 partitions in a scrambled order, and items keyed by a field
    table = [(p * 7) % 3 for p in range(partitioning.DEFAULT_PARTITION_COUNT)]
    items = [(key, index) for index, key in enumerate(_KEYS * 3)]
    key_fn: Any = (lambda item: item[0]) if not events else partitioning.EventKey(lambda item: item[0])
    batch = [(1000 + i, item) for i, item in enumerate(items)] if events else items
    targets = _queues(3, capacity=1000)
    collector = OutboundCollector(targets, edge.RoutingPolicy.PARTITIONED, key_fn, target_of_partition=table)
    # when one batch of them is pushed
    collector.push(batch)
    assert collector.flush()
    # then each consumer has exactly the elements of its partitions, in their order
    expected: list[list[Any]] = [[], [], []]
    for element, (key, _index) in zip(batch, items, strict=True):
        expected[table[partitioning.stable_hash(key) % len(table)]].append(element)
    assert [_drain(q) for q in targets] == expected
    assert all(expected)


def test_an_event_key_calls_the_items_key_and_pickles_with_it() -> None:
    key = partitioning.EventKey(abs)
    assert key((5, -3)) == 3
    copy = pickle.loads(pickle.dumps(key))
    assert type(copy) is partitioning.EventKey and copy.item_key is abs and copy((0, -8)) == 8
