"""A finished job lets go of its execution: the instance keeps its status and metrics, not its processors."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import jetlet
from jetlet.core import DAG, Edge, Inbox, Processor, processors
from jetlet.testing import wait_until

_ITEMS = 1_000


class _Keeper(Processor):
    """A sink that keeps every item (the state a finished job must not hold on to)."""

    instances: list[weakref.ref[_Keeper]] = []

    def __init__(self) -> None:
        self.kept: list[Any] = []
        _Keeper.instances.append(weakref.ref(self))

    def process(self, ordinal: int, inbox: Inbox) -> None:
        self.kept.extend(inbox.take_all())


def test_given_finished_jobs_when_collected_then_their_processors_are_gone_and_metrics_stay() -> None:
    _Keeper.instances.clear()
    with jetlet.embedded() as jet:
        jobs = []
        for _ in range(3):
            dag = DAG()
            source = dag.new_vertex("numbers", processors.source_from_iterable(range(_ITEMS)))
            sink = dag.new_vertex("keeper", _Keeper)
            dag.edge(Edge.between(source, sink))
            job = jet.new_job(dag)
            job.join()
            jobs.append(job)
        assert len(_Keeper.instances) >= 3

        def all_collected() -> bool:
            # a worker may still hold the last tasklet for a moment after join() returns
            gc.collect()
            return all(ref() is None for ref in _Keeper.instances)

        wait_until(all_collected, "the processors of finished jobs are collected")
        for job in jobs:
            assert job.status is jetlet.JobStatus.COMPLETED
            received = sum(
                counters.get("receivedCount", 0)
                for name, counters in job.metrics().items()
                if name.startswith("keeper")
            )
            assert received == _ITEMS
