"""``SinkBuilder``: custom sinks in real jobs, checked against the items sent to them."""

from __future__ import annotations

import collections
import threading
from typing import Any

import pytest

import jetlet
from jetlet.core import processor as proc
from jetlet.errors import JobFailedError
from jetlet.pipeline import Pipeline, Sources
from jetlet.pipeline.sink_builder import SinkBuilder

JOIN_TIMEOUT_S = 30


class Target:
    """A stand-in for an outside system: per processor, what was received, flushed and released."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.flushed: dict[int, list[Any]] = collections.defaultdict(list)
        self.flush_count: collections.Counter[int] = collections.Counter()
        self.created: list[tuple[int, int]] = []
        self.destroyed: list[tuple[int, list[Any]]] = []


class Writer:
    """A sink state: items received since the last flush."""

    def __init__(self, target: Target, context: proc.ProcessorContext) -> None:
        self.target = target
        self.index = context.global_processor_index
        self.unflushed: list[Any] = []
        with target.lock:
            target.created.append((self.index, context.total_parallelism))

    def receive(self, item: Any) -> None:
        if item == "poison":
            raise ValueError("cannot write poison")
        self.unflushed.append(item)

    def flush(self) -> None:
        with self.target.lock:
            self.target.flushed[self.index].extend(self.unflushed)
            self.target.flush_count[self.index] += 1
        self.unflushed = []

    def destroy(self) -> None:
        with self.target.lock:
            self.target.destroyed.append((self.index, list(self.unflushed)))


def writer_sink(target: Target, lp: int | None = None) -> Any:
    builder = (
        SinkBuilder.sink("writer", lambda context: Writer(target, context))
        .receive_fn(Writer.receive)
        .flush_fn(Writer.flush)
        .destroy_fn(Writer.destroy)
    )
    return (builder.preferred_local_parallelism(lp) if lp is not None else builder).build()


@pytest.mark.parametrize("lp", [1, 4])
def test_builder_sink_receives_every_item_and_flushes_each_batch(
    jet: jetlet.EmbeddedInstance, lp: int
) -> None:
    # given 2000 items written to a builder sink with lp processors
    items = [f"item {n}" for n in range(2000)]
    target = Target()
    p = Pipeline()
    p.read_from(Sources.items(*items)).map(str.upper).write_to(writer_sink(target, lp))
    # when the job completes
    jet.new_job(p).join(timeout=JOIN_TIMEOUT_S)
    # then each processor made its state once, flushed everything it received, and destroyed its state
    assert sorted(target.created) == [(i, lp) for i in range(lp)]
    every = [item for flushed in target.flushed.values() for item in flushed]
    assert collections.Counter(every) == collections.Counter(item.upper() for item in items)
    assert sorted(target.destroyed) == [(i, []) for i in range(lp)]
    assert all(target.flush_count[i] >= 1 for i in target.flushed)


def test_builder_sink_defaults_to_one_processor_per_member(jet: jetlet.EmbeddedInstance) -> None:
    # given a builder sink without a preferred parallelism
    target = Target()
    p = Pipeline()
    p.read_from(Sources.items(1, 2, 3)).write_to(writer_sink(target))
    # when the job completes, then one processor received everything
    jet.new_job(p).join(timeout=JOIN_TIMEOUT_S)
    assert target.created == [(0, 1)]
    assert sorted(target.flushed[0]) == [1, 2, 3]


def test_a_failing_receive_fails_the_job_and_still_destroys_the_state(jet: jetlet.EmbeddedInstance) -> None:
    # given an item the sink cannot write
    target = Target()
    p = Pipeline()
    p.read_from(Sources.items("a", "poison", "b")).write_to(writer_sink(target))
    # when the job runs, then it fails with the sink's error and the state was destroyed anyway
    with pytest.raises(JobFailedError) as failure:
        jet.new_job(p).join(timeout=JOIN_TIMEOUT_S)
    assert "cannot write poison" in str(failure.value.__cause__)
    assert [index for index, _ in target.destroyed] == [0]


def make_nothing(_context: proc.ProcessorContext) -> None:
    return None


def test_sink_builder_arguments_are_validated() -> None:
    # given bad arguments, when the builder gets them, then the error names the argument
    with pytest.raises(ValueError, match="SinkBuilder: name must be a non-empty string"):
        SinkBuilder.sink(" ", make_nothing)
    with pytest.raises(TypeError, match="SinkBuilder 's': create_fn must be callable"):
        SinkBuilder.sink("s", None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="SinkBuilder 's': flush_fn must be callable"):
        SinkBuilder.sink("s", make_nothing).flush_fn("flush")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'s': preferred_local_parallelism must be an int >= 1, got -1"):
        SinkBuilder.sink("s", make_nothing).preferred_local_parallelism(-1)
    with pytest.raises(ValueError, match="'s': receive_fn is required before build"):
        SinkBuilder.sink("s", make_nothing).build()
