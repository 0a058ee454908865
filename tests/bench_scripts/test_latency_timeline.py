"""``bench/latency_timeline.py``: results binned by arrival, and a real paced run that it bins."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType


def test_results_are_binned_by_arrival_and_those_outside_the_interval_are_left_out(
    load_bench: Callable[[str], ModuleType],
) -> None:
    # given: arrivals before, inside (two bins, one empty between) and after a 300 ms interval from 1,000
    bench = load_bench("latency_timeline")
    pairs = [(999.0, 50.0), (1000.0, 5.0), (1099.0, 9.0), (1010.0, 7.0), (1250.0, 2.0), (1300.0, 80.0)]
    # when
    bins = bench.timeline(pairs, 1000.0, 300.0, 100)
    # then
    assert [(b.start_ms, b.count, b.p50_ms, b.max_ms) for b in bins] == [(0, 3, 7.0, 9.0), (200, 1, 2.0, 2.0)]


def test_a_paced_query_on_an_embedded_instance_gives_every_bin_its_results(
    load_bench: Callable[[str], ModuleType],
) -> None:
    # given: Q1 at 20,000 events/s without snapshots, 1 s of warm-up, then 2 s binned by 500 ms
    bench = load_bench("latency_timeline")
    # when
    base, pairs = bench.run("q1", 0, 20_000, False, 1.0, 2.0)
    bins = bench.timeline(pairs, base + 1000, 2000, 500)
    # then: every bin has results (Q1 emits a result per bid), and a latency is a real one
    assert [b.start_ms for b in bins] == [0, 500, 1000, 1500]
    assert all(b.count > 1000 for b in bins)
    assert all(0 <= latency < 5000 for _, latency in pairs)
