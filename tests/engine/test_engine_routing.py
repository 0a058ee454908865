"""Edges end to end: each routing policy delivers every item to the consumers it names, and jobs finish."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import jetlet
from jetlet.config import DEFAULT_PARTITION_COUNT
from jetlet.core import DAG, Edge, Inbox, processors, stable_hash

ITEMS = 5000
CONSUMERS = 3


class _ByConsumer(jetlet.Processor):
    """Records what each consumer (by local index) received."""

    def __init__(self, received: dict[int, list[Any]]) -> None:
        self._received = received

    def process(self, ordinal: int, inbox: Inbox) -> None:
        self._received.setdefault(self.context.local_processor_index, []).extend(inbox.take_all())


def _run(route: Callable[[Edge], Edge], producers: int) -> dict[int, list[Any]]:
    received: dict[int, list[Any]] = {}
    dag = DAG()
    source = dag.new_vertex("source", processors.source_from_iterable(range(ITEMS)))
    relay = dag.new_vertex("relay", processors.map_p(lambda n: n), producers)
    sink = dag.new_vertex("sink", lambda: _ByConsumer(received), CONSUMERS)
    dag.edge(Edge.between(source, relay))
    dag.edge(route(Edge.between(relay, sink)))
    with jetlet.embedded() as jet:
        jet.new_job(dag).join(10)
    return received


@pytest.mark.parametrize("producers", [1, 2])
def test_given_a_broadcast_edge_then_every_consumer_receives_every_item(producers: int) -> None:
    received = _run(Edge.broadcast, producers)
    assert {i: sorted(items) for i, items in received.items()} == {i: list(range(ITEMS)) for i in range(3)}


@pytest.mark.parametrize("producers", [1, 2])
def test_given_an_all_to_one_edge_then_one_consumer_receives_everything(producers: int) -> None:
    received = _run(Edge.all_to_one, producers)
    assert {i: sorted(items) for i, items in received.items()} == {0: list(range(ITEMS))}


def test_given_an_isolated_edge_with_more_consumers_than_producers_then_unfed_consumers_still_complete() -> (
    None
):
    received = _run(Edge.isolated, 1)
    assert {i: sorted(items) for i, items in received.items()} == {0: list(range(ITEMS))}


@pytest.mark.parametrize("producers", [1, 2])
def test_given_a_partitioned_edge_then_each_key_goes_to_the_owner_of_its_partition(producers: int) -> None:
    def key(n: int) -> str:
        return f"key-{n % 37}"

    received = _run(lambda edge: edge.partitioned(key), producers)
    expected: dict[int, list[int]] = {}
    for n in range(ITEMS):
        owner = (stable_hash(key(n)) % DEFAULT_PARTITION_COUNT) % CONSUMERS
        expected.setdefault(owner, []).append(n)
    assert {i: sorted(items) for i, items in received.items()} == expected


@pytest.mark.parametrize("producers", [1, 2])
def test_given_a_unicast_edge_then_every_item_arrives_exactly_once(producers: int) -> None:
    received = _run(Edge.unicast, producers)
    assert sorted(item for items in received.values() for item in items) == list(range(ITEMS))
