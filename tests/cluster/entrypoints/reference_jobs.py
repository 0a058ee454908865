"""Job builders in a module the job-definition tests submit by entrypoint.

This folder stands for the worker image: the tests put it on the members'
``PYTHONPATH`` (and on the test process's ``sys.path`` for the unit tests),
so ``reference_jobs:word_lengths`` is importable where the job is planned.
"""

from __future__ import annotations

from jetlet import AggregateOperations, Pipeline, Sinks, Sources
from jetlet.core import DAG, processors

NOT_A_FUNCTION = 7
"""A module attribute that an entrypoint may name but cannot call."""


def word_lengths(words: list[str], map_name: str, minimum: int = 0) -> Pipeline:
    """A Pipeline: ``{length: number of words of that length}`` of the words at least ``minimum`` long."""
    p = Pipeline()
    p.read_from(Sources.from_iterable(words)).filter(lambda w: len(w) >= minimum).grouping_key(len).aggregate(
        AggregateOperations.counting()
    ).write_to(Sinks.map(map_name))
    return p


def numbers_dag(count: int) -> DAG:
    """A DAG: one source vertex of ``count`` numbers and no sink."""
    dag = DAG()
    dag.new_vertex("numbers", processors.source_from_iterable(range(count)))
    return dag


def not_a_job() -> dict[str, int]:
    """Returns data, not a job."""
    return {"answer": 42}


def fails_to_build(reason: str) -> Pipeline:
    """Raises while building, as a user's bad builder does."""
    return _check(reason)


def _check(reason: str) -> Pipeline:
    raise ValueError(f"cannot build the job: {reason}")


def empty_pipeline() -> Pipeline:
    """A Pipeline that the planner refuses (it has no stage)."""
    return Pipeline()
