"""Regression tests for bugs found in the Core API by its test suite (each failed before its fix)."""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import sys

import jetlet
from jetlet.aggregate import AggregateOperation
from jetlet.core import DAG, Edge, processors
from jetlet.core.processors import service as service_p
from jetlet.service import ServiceFactories
from jetlet.testing import verify_processor


def test_aggregate_p_without_combine_survives_snapshot_restore() -> None:
    # single-stage aggregation does not need combine (aggregate_by_key_p passes the same check)
    op = AggregateOperation.with_create(int).and_accumulate(lambda acc, x: acc + x)
    verify_processor(processors.aggregate_by_key_p(lambda x: "k", op)).input([1, 2, 3]).expect_output(
        [("k", 6)]
    )
    verify_processor(processors.aggregate_p(op)).input([1, 2, 3]).expect_output([6])


def test_async_service_map_with_completed_futures_passes_the_harness() -> None:
    def done(x: int) -> concurrent.futures.Future[int]:
        f: concurrent.futures.Future[int] = concurrent.futures.Future()
        f.set_result(x * 2)
        return f

    meta = service_p.map_using_service_async_p(
        ServiceFactories.non_shared_service(lambda c: None), lambda s, x: done(x)
    )
    verify_processor(meta).input([1, 2, 3]).expect_output([2, 4, 6])


def test_source_from_iterable_with_generator_and_two_processors_emits_every_item() -> None:
    out: list[int] = []
    dag = DAG()
    src = dag.new_vertex("src", processors.source_from_iterable(x for x in range(20)), local_parallelism=2)
    sink = dag.new_vertex("sink", processors.list_sink_p(out))
    dag.edge(Edge.between(src, sink))
    with jetlet.embedded() as jet:
        jet.new_job(dag).join(10)
    assert sorted(out) == list(range(20))


def test_stable_hash_of_nan_is_the_same_in_every_process() -> None:
    code = "from jetlet.core import stable_hash; print(stable_hash(float('nan')))"
    results = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(results) == 1
