"""Distributed edges between members: sender and receiver tasklets with flow control.

These tests check the engine's logic of distributed edges: N member plans
of one job built in this process, each with its own execution service, whose
``RemoteLinks`` hand messages straight to each other (a fake network that
passes objects). The real network carries the same messages as bytes over
TCP between member processes (tests/cluster). Results are compared with
plain-Python references.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from jetlet import config, word_count
from jetlet._execution import execution_plan, execution_service
from jetlet._network import tasklets as remote
from jetlet.aggregate import counting
from jetlet.core import DAG, Edge, processors
from jetlet.core import processor as proc


class InProcessCluster:
    """N members of one job in one process; messages between them are passed as objects."""

    def __init__(self, members: int, settings: remote.FlowSettings | None = None) -> None:
        self.members = members
        self.settings = settings or remote.FlowSettings()
        self.links: list[remote.RemoteLinks] = []
        self.services = [execution_service.TaskletExecutionService(1) for _ in range(members)]
        self.messages = collections.Counter[str]()
        self._lock = threading.Lock()

    def _send_from(self, source: int) -> remote.Send:
        def send(member: int, message: object) -> None:
            with self._lock:
                self.messages[type(message).__name__] += 1
            self.links[member].deliver(message)

        return send

    def run(self, make_dag: Callable[[int], DAG], timeout: float = 60) -> None:
        self.links = [
            remote.RemoteLinks(1, m, self._send_from(m), self.settings) for m in range(self.members)
        ]
        plans = [
            execution_plan.build(
                make_dag(m),
                1,
                "job",
                config.JobConfig(),
                config.InstanceConfig(),
                member_index=m,
                member_count=self.members,
                remote=self.links[m],
            )
            for m in range(self.members)
        ]
        trackers = [execution_service.ExecutionTracker(f"member-{m}") for m in range(self.members)]
        for plan, tracker, service in zip(plans, trackers, self.services, strict=True):
            service.submit(plan.all_tasklets(), tracker)
        for tracker in trackers:
            tracker.future.result(timeout)

    def close(self) -> None:
        for service in self.services:
            service.shutdown()


@pytest.fixture
def cluster3() -> Iterator[InProcessCluster]:
    cluster = InProcessCluster(3)
    yield cluster
    cluster.close()


def _first(entry: tuple[str, int]) -> str:
    return entry[0]


def _identity(word: str) -> str:
    return word


def word_count_dag(lines: list[str], sink: list[tuple[str, int]], member: int) -> DAG:
    """Every member reads its third of the lines (the source splits by global index); counts meet on
    the member that owns each word."""
    dag = DAG()
    source = dag.new_vertex("source", processors.source_from_iterable(lines))
    tokens = dag.new_vertex("tokenize", processors.flat_map_p(word_count.tokenize), 2)
    accumulate = dag.new_vertex("accumulate", processors.accumulate_by_key_p(_identity, counting()), 2)
    combine = dag.new_vertex("combine", processors.combine_by_key_p(counting()), 2)
    out = dag.new_vertex("sink", processors.list_sink_p(sink), 1)
    dag.edge(Edge.between(source, tokens))
    dag.edge(Edge.between(tokens, accumulate).partitioned(_identity))
    dag.edge(Edge.between(accumulate, combine).partitioned(_first).distributed())
    dag.edge(Edge.between(combine, out))
    return dag


def test_word_count_across_three_members_equals_counter(cluster3: InProcessCluster) -> None:
    # given the bundled text split over 3 members, combined over a distributed partitioned edge
    lines = word_count.bundled_text().splitlines() * 5
    sinks: list[list[tuple[str, int]]] = [[], [], []]
    # when the job runs on all three
    cluster3.run(lambda m: word_count_dag(lines, sinks[m], m))
    # then the union of the members' results is exactly Counter's answer, each word on one member only
    merged = [entry for sink in sinks for entry in sink]
    assert len(merged) == len({word for word, _ in merged})
    assert dict(merged) == collections.Counter(w for line in lines for w in word_count.tokenize(line))
    # and every member both sent and received items, and what was sent was received
    stats = [links.metrics() for links in cluster3.links]
    sent = sum(v.get("distributedItemsOut", 0) for s in stats for v in s.values())
    received = sum(v.get("distributedItemsIn", 0) for s in stats for v in s.values())
    assert sent == received > 0
    assert all(any(v.get("distributedItemsOut", 0) for v in s.values()) for s in stats)
    assert cluster3.messages["Packet"] > 0 and cluster3.messages["Ack"] > 0


@pytest.mark.parametrize("routing", ["unicast", "broadcast", "all_to_one"])
def test_routing_policies_across_members(cluster3: InProcessCluster, routing: str) -> None:
    # given 3 members whose sources emit 3000 numbers between them, feeding sinks over a distributed edge
    sinks: list[list[int]] = [[], [], []]

    def make(member: int) -> DAG:
        dag = DAG()
        source = dag.new_vertex("source", processors.source_from_iterable(range(3000)))
        sink = dag.new_vertex("sink", processors.list_sink_p(sinks[member]), 2)
        edge = Edge.between(source, sink).distributed()
        getattr(edge, routing)()
        dag.edge(edge)
        return dag

    # when it runs
    cluster3.run(make)
    everything = list(range(3000))
    # then unicast delivers each item once somewhere, broadcast everywhere, all-to-one to member 0 only
    if routing == "unicast":
        assert sorted(sinks[0] + sinks[1] + sinks[2]) == everything
    elif routing == "broadcast":
        assert all(sorted(sink) == sorted(everything * 2) for sink in sinks)  # 2 sink processors per member
    else:
        assert sorted(sinks[0]) == everything and sinks[1] == [] and sinks[2] == []


class _SlowSink(proc.Processor):
    """Takes at most ``per_call`` items per call and waits a little: slower than its producers."""

    def __init__(self, out: list[Any], per_call: int) -> None:
        self._out = out
        self._per_call = per_call

    def is_cooperative(self) -> bool:
        return False

    def process(self, ordinal: int, inbox: Any) -> None:
        for _ in range(min(self._per_call, len(inbox))):
            self._out.append(inbox.poll())
        time.sleep(0.0005)  # the slowness under test (a sink waiting on I/O), not synchronisation


def _owner_key(n: int) -> int:
    """Partition 0 (member 0) or 1 (member 1); each member's source emits both kinds."""
    return (n // 2) % 2


def test_flow_control_bounds_every_senders_in_flight_items_by_the_receive_window() -> None:
    # given 2 members, a small window, and one slow consumer on member 1 fed by both members' producers
    settings = remote.FlowSettings(
        flow_control_period_millis=10, receive_window_multiplier=3, packet_size_limit=256, initial_window=512
    )
    cluster = InProcessCluster(2, settings)
    out: list[list[int]] = [[], []]
    count = 60_000

    def make(member: int) -> DAG:
        dag = DAG()
        source = dag.new_vertex("source", processors.source_from_iterable(range(count)))
        if member == 1:
            sink = dag.new_vertex("sink", lambda: _SlowSink(out[1], 200), 1)
        else:
            sink = dag.new_vertex("sink", processors.list_sink_p(out[0]), 1)
        dag.edge(Edge.between(source, sink).partitioned(_owner_key).distributed())
        return dag

    # when the job runs (key 1 is owned by member 1, so both members' sources feed its slow consumer)
    try:
        cluster.run(make)
    finally:
        cluster.close()
    # then the results are complete and correct
    assert sorted(out[0] + out[1]) == list(range(count))
    assert all(_owner_key(n) == 1 for n in out[1])
    # and no sender ever had more items in flight than the largest window its receiver granted
    for links in cluster.links:
        for (edge_id, dest), sender in links.senders.items():
            receiver = cluster.links[dest].receivers[(edge_id, links.member_index)]
            assert 0 < sender.max_in_flight <= receiver.max_window
