"""sort_p: collect everything, emit it sorted on completion (stable, in outbox-sized chunks)."""

from __future__ import annotations

import random
from typing import Any

import pytest

import jetlet
from jetlet.core import DAG, Edge, Inbox, ProcessorMetaSupplier, processors
from jetlet.core.processors.sort import sort_p
from jetlet.testing import TestOutbox, make_context, verify_processor


def _first(pair: tuple[int, int]) -> int:
    return pair[0]


def test_given_numbers_when_sorted_then_natural_order() -> None:
    verify_processor(sort_p()).input([5, 3, 9, 1, 3]).expect_output([1, 3, 3, 5, 9])


def test_given_reverse_when_sorted_then_descending_order() -> None:
    verify_processor(sort_p(reverse=True)).input([5, 3, 9, 1]).expect_output([9, 5, 3, 1])


def test_given_no_items_when_sorted_then_nothing_is_emitted() -> None:
    verify_processor(sort_p()).input([]).expect_output([])


@pytest.mark.parametrize("seed", range(5))
def test_given_random_pairs_and_a_key_when_sorted_then_stable_order_equals_sorted(seed: int) -> None:
    # given: many equal keys, so stability (arrival order within a key) is visible
    rng = random.Random(seed)
    items = [(rng.randrange(10), n) for n in range(rng.randrange(0, 300))]
    # when / then: every harness mode, snapshots included, keeps arrival order among equal keys
    verify_processor(sort_p(_first)).input(items).expect_output(sorted(items, key=_first))


def test_given_more_items_than_one_outbox_when_sorted_then_emission_resumes_where_it_stopped() -> None:
    # given: far more items than the roomy outbox's 1024
    items = list(range(5000, 0, -1))
    # when / then
    verify_processor(sort_p()).input(items).disable_snapshots().expect_output(sorted(items))


def test_given_a_non_callable_key_when_making_the_processor_then_it_is_refused() -> None:
    with pytest.raises(TypeError, match="callable"):
        sort_p(key_fn=3)  # type: ignore[arg-type]


@pytest.mark.parametrize("parallelism", [1, 4])
def test_given_a_dag_with_all_to_one_edge_when_run_then_output_is_sorted(parallelism: int) -> None:
    # given: a parallel upstream stage and a sort of total parallelism one
    rng = random.Random(parallelism)
    items = [rng.randrange(1_000_000) for _ in range(5000)]
    out: list[Any] = []
    dag = DAG()
    source = dag.new_vertex("source", processors.source_from_iterable(items))
    double = dag.new_vertex("double", processors.map_p(lambda x: x * 2), parallelism)
    sort = dag.new_vertex("sort", ProcessorMetaSupplier.force_total_parallelism_one(sort_p()), 1)
    sink = dag.new_vertex("sink", processors.list_sink_p(out), 1)
    dag.edge(Edge.between(source, double))
    dag.edge(Edge.between(double, sort).all_to_one().distributed())
    dag.edge(Edge.between(sort, sink))
    # when
    with jetlet.embedded() as jet:
        jet.new_job(dag).join(timeout=60)
    # then
    assert out == sorted(x * 2 for x in items)


def test_given_a_snapshot_in_the_middle_of_emission_when_restored_then_the_rest_follows_in_order() -> None:
    # given: a processor that emitted the first 3 of 10 sorted items into an outbox of 3
    items = [7, 2, 9, 4, 0, 5, 8, 1, 6, 3]
    first = sort_p()()
    outbox = TestOutbox(1, 3)
    first.init(outbox, make_context())
    first.process(0, Inbox(items))
    assert not first.complete()
    emitted: list[list[Any]] = [[]]
    outbox.drain(emitted, [])
    # when: it is saved and a fresh processor restored from the snapshot
    saved: list[tuple[Any, Any]] = []
    while not first.save_to_snapshot():
        outbox.drain(emitted, saved)
    outbox.drain(emitted, saved)
    second = sort_p()()
    second_outbox = TestOutbox(1, 100)
    second.init(second_outbox, make_context())
    second.restore_from_snapshot(Inbox(saved))
    assert second.finish_snapshot_restore()
    assert second.complete()
    second_outbox.drain(emitted, [])
    # then: the first processor's 3 items and the second's rest make the whole sorted list
    assert emitted[0] == sorted(items)
