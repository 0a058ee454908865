"""Given jobs running, then the automatic collector is off, the heap's growth triggers collections,
and the collector is as it was after the last job ends."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

import jetlet
from jetlet._execution import gc_policy
from jetlet.core import DAG, Edge, processors
from jetlet.testing import wait_until


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_the_collector_is_off_while_jobs_run_and_as_it_was_after(collector_on: None) -> None:
    # given two overlapping jobs
    gc_policy.job_started()
    gc_policy.job_started()
    during = gc.isenabled()
    gc_policy.job_ended()
    still = gc.isenabled()
    gc_policy.job_ended()
    # then the collector was off while any ran, and is back on
    assert not during and not still
    assert gc.isenabled()
    assert gc_policy.running_jobs() == 0
    # and one that was off before stays off
    gc.disable()
    gc_policy.job_started()
    gc_policy.job_ended()
    assert not gc.isenabled()


def test_a_collection_is_due_once_the_heap_doubled_and_grew_by_the_minimum() -> None:
    minimum = gc_policy.MIN_GROWTH_BLOCKS
    assert not gc_policy.should_collect(1_000, 10)  # doubled, but by less than the minimum
    assert not gc_policy.should_collect(3 * minimum - 1, 2 * minimum)  # grew by half
    assert gc_policy.should_collect(4 * minimum, 2 * minimum)
    assert gc_policy.should_collect(minimum + 10, 10)


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_cyclic_garbage_that_grows_the_heap_is_collected_while_a_job_runs(
    collector_on: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a job running, and a watcher that looks often and collects at a small growth
    monkeypatch.setattr(gc_policy, "WATCH_INTERVAL_S", 0.02)
    monkeypatch.setattr(gc_policy, "HEAP_GROWTH", 1.0)
    monkeypatch.setattr(gc_policy, "MIN_GROWTH_BLOCKS", 20_000)
    collected_before = gc_policy.collections
    gc_policy.job_started()
    try:
        # when a pair of objects that point at each other is dropped, and more such garbage follows
        first = _Node()
        watched = weakref.ref(first)
        first.other = _Node()
        first.other.other = first
        del first

        def more_garbage_until_collected() -> bool:
            for _ in range(10_000):
                node = _Node()
                node.other = _Node()
                node.other.other = node
            return watched() is None

        # then the watcher collects it (only a collection frees a cycle), with the collector off
        wait_until(more_garbage_until_collected, "the watcher collected the first cycle", 30.0)
        wait_until(lambda: gc_policy.collections > collected_before, "the watcher counted it", 30.0)
        assert not gc.isenabled()
    finally:
        gc_policy.job_ended()


def test_a_real_job_holds_the_collector_off_only_while_it_runs(collector_on: None) -> None:
    seen: list[bool] = []
    dag = DAG()
    source = dag.new_vertex("source", processors.source_from_iterable(range(10)))
    sink = dag.new_vertex("sink", processors.callback_sink_p(lambda _item: seen.append(gc.isenabled())), 1)
    dag.edge(Edge.between(source, sink))
    with jetlet.embedded() as jet:
        jet.new_job(dag).join(30)
    assert seen and not any(seen)
    wait_until(lambda: gc_policy.running_jobs() == 0, "the job's end reached the policy", 30.0)
    assert gc.isenabled()
