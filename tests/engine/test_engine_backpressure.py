"""Backpressure: ten million items into a slow blocking sink keep every queue bounded and memory flat."""

from __future__ import annotations

import concurrent.futures
import threading

import psutil

import jetlet
from jetlet.core import DAG, Edge, Inbox, processors

ITEMS = 10_000_000
SINK_DELAY_S = 0.001
MAX_RSS_GROWTH = 100 * 1024 * 1024


class _SlowSink(jetlet.Processor):
    """Counts and sums what it receives, sleeping a millisecond per batch (it is not cooperative)."""

    def __init__(self, totals: list[int]) -> None:
        self._totals = totals
        self._never = threading.Event()

    def is_cooperative(self) -> bool:
        return False

    def process(self, ordinal: int, inbox: Inbox) -> None:
        batch = inbox.take_all()
        self._totals[0] += len(batch)
        self._totals[1] += sum(batch)
        self._never.wait(SINK_DELAY_S)  # the slowness under test: a blocking wait per batch


def test_given_a_slow_sink_when_ten_million_items_flow_then_queues_and_memory_stay_bounded() -> None:
    # Given a source of 10M items, a map on two processors and a slow blocking sink
    totals = [0, 0]
    dag = DAG()
    source = dag.new_vertex("source", processors.source_from_iterable(range(ITEMS)))
    double = dag.new_vertex("double", processors.map_p(lambda n: n * 2), 2)
    sink = dag.new_vertex("slow-sink", lambda: _SlowSink(totals), 1)
    dag.edge(Edge.between(source, double))
    dag.edge(Edge.between(double, sink))
    process = psutil.Process()

    with jetlet.embedded() as jet:
        start_rss = process.memory_info().rss
        job = jet.new_job(dag)
        assert job.plan is not None  # the execution: the job lets go of it once it ends
        queues = job.plan.queues
        # When it runs, sampling the resident memory until it ends
        peak_rss = start_rss
        samples = 0
        while not concurrent.futures.wait([job.future], timeout=0.05).done:
            peak_rss = max(peak_rss, process.memory_info().rss)
            samples += 1
        job.join()

    # Then every item arrived once, no queue ever held more than its capacity, and memory stayed flat
    assert totals == [ITEMS, ITEMS * (ITEMS - 1)]
    assert len(queues) == 4
    assert all(0 < q.high_water_mark <= q.capacity for q in queues), [
        (q.name, q.high_water_mark, q.capacity) for q in queues
    ]
    assert samples > 10
    assert peak_rss - start_rss < MAX_RSS_GROWTH
