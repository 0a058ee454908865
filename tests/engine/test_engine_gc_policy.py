"""Given jobs running, then the young GC threshold is raised, and restored after the last one ends."""

from __future__ import annotations

import gc

import jetlet
from jetlet._execution import gc_policy
from jetlet.core import DAG, Edge, processors


def test_the_threshold_is_raised_while_jobs_run_and_restored_after() -> None:
    before = gc.get_threshold()
    # given two overlapping jobs
    gc_policy.job_started()
    gc_policy.job_started()
    raised = gc.get_threshold()
    gc_policy.job_ended()
    still = gc.get_threshold()
    gc_policy.job_ended()
    # then the threshold was raised while any ran, and is back to what it was
    assert raised[0] == max(before[0], gc_policy.YOUNG_THRESHOLD) and raised[1:] == before[1:]
    assert still == raised
    assert gc.get_threshold() == before
    assert gc_policy.running_jobs() == 0


def test_a_real_job_holds_the_raised_threshold_only_while_it_runs() -> None:
    before = gc.get_threshold()
    seen: list[tuple[int, int, int]] = []
    dag = DAG()
    source = dag.new_vertex("source", processors.source_from_iterable(range(10)))
    sink = dag.new_vertex(
        "sink", processors.callback_sink_p(lambda _item: seen.append(gc.get_threshold())), 1
    )
    dag.edge(Edge.between(source, sink))
    with jetlet.embedded() as jet:
        jet.new_job(dag).join(30)
    assert seen and all(t[0] == max(before[0], gc_policy.YOUNG_THRESHOLD) for t in seen)
    assert gc.get_threshold() == before
