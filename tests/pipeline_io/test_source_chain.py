"""Stateless stages planned into the source before them (the planner's source chaining).

A chained source's processor must emit exactly what the source followed by the chain's own
processor emits: the same items, late ones dropped before the chain sees them, the same
watermarks in the same places; and a job must give the same results as plain Python.
"""

from __future__ import annotations

import collections
from typing import Any

import pytest
from test_source_event_time import EVENTS, planned_source, run, stamped

import jetlet
from jetlet.aggregate import counting
from jetlet.core import Inbox
from jetlet.core.processors import chain
from jetlet.core.processors.sources import READ_METRIC
from jetlet.core.watermark import Watermark
from jetlet.errors import JobCancelledError
from jetlet.metrics import job_metrics
from jetlet.nexmark.bench import jobs
from jetlet.pipeline import Pipeline, Sinks, Sources, WindowDefinition
from jetlet.pipeline.source_builder import SourceBuilder, TimestampedSourceBuffer
from jetlet.testing import TestOutbox, make_context, wait_until

DEADLINE_S = 20


def shout_and_drop_b(batch: list[Any]) -> list[Any]:
    """A chain's batch step over events: upper-case the item, drop "b", double "c"."""
    out: list[Any] = []
    for timestamp, item in batch:
        if item != "b":
            out.extend([(timestamp, item.upper())] * (2 if item == "c" else 1))
    return out


def vertex_names(p: Pipeline) -> list[str]:
    return sorted(vertex.name for vertex in p.to_dag().vertices())


def stateless_vertices(p: Pipeline) -> int:
    """The vertices of ``p``'s plan that run stateless stages: ``map``, or a fused chain."""
    return sum(name.startswith(("map", "fused(")) for name in vertex_names(p))


def consumers(p: Pipeline, source: str) -> list[str]:
    return [edge.dest_name for edge in p.to_dag().edges() if edge.source_name == source]


def test_stateless_stages_right_after_a_timestamped_builder_source_run_inside_it() -> None:
    # given a map and a filter right after a builder source with native timestamps
    p = Pipeline()
    p.read_from(stamped()).with_native_timestamps(3).map(str.upper).filter(bool).write_to(Sinks.list("a"))
    # when it is planned, then the source feeds the sink: no fused(map, filter) vertex between
    dag = p.to_dag()
    assert sorted(vertex.name for vertex in dag.vertices()) == ["listSink(a)", "stamped"]
    assert [edge.source_name for edge in dag.inbound_edges("listSink(a)")] == ["stamped"]


def test_stages_that_cannot_run_in_their_source_keep_their_own_vertex() -> None:
    # a generator source cannot take an event-time policy, so nor can it take the map
    p = Pipeline()
    generated = Sources.stream_from_generator(lambda _context: iter(range(5)), "generated")
    p.read_from(generated).with_timestamps(lambda n: n, 0).map(str).write_to(Sinks.list("a"))
    assert stateless_vertices(p) == 1
    # a source read by two stages feeds both
    p = Pipeline()
    source = p.read_from(stamped()).with_native_timestamps(3)
    source.map(str.upper).write_to(Sinks.list("a"))
    source.map(str.lower).write_to(Sinks.list("b"))
    assert stateless_vertices(p) == 2
    # a stage with its own parallelism, or after a rebalanced source, runs apart
    p = Pipeline()
    p.read_from(stamped()).with_native_timestamps(3).map(str.upper).set_local_parallelism(3).write_to(
        Sinks.list("a")
    )
    assert consumers(p, "stamped") == ["map"]
    p = Pipeline()
    p.read_from(stamped()).with_native_timestamps(3).rebalance().map(str.upper).write_to(Sinks.list("a"))
    assert stateless_vertices(p) == 1


def test_the_chained_source_emits_what_the_source_then_the_chain_emit() -> None:
    # given the source with the policy and a step planned in, and the source with the policy alone
    # followed by the chain's processor running the same step
    outbox = TestOutbox(1, 100)
    chained = planned_source(outbox, step=shout_and_drop_b)
    plain_outbox = TestOutbox(1, 100)
    plain = planned_source(plain_outbox)
    chain_outbox = TestOutbox(1, 100)
    after = chain.ChainP(shout_and_drop_b)
    after.init(chain_outbox, make_context())
    # when both sources fill every event, two at a time, and the chain takes the plain one's output
    got = run(chained, outbox)
    want: list[list[Any]] = [[]]
    for element in run(plain, plain_outbox):
        if isinstance(element, Watermark):
            want[0].append(element)
            continue
        inbox = Inbox([element])
        while inbox:
            after.process(0, inbox)
            chain_outbox.drain(want, [])
    # then the outputs are the same: late events dropped before the step, watermarks in place
    assert (
        got
        == want[0]
        == [
            (10, "A"),
            Watermark(7),
            (14, "C"),
            (14, "C"),
            Watermark(11),
            (13, "E"),
            (30, "F"),
            Watermark(27),
            (31, "H"),
            Watermark(28),
        ]
    )
    # and the source counts the events it read (all eight) beside the late ones it dropped
    assert chained.metrics() == {"lateEventsDropped": 2, READ_METRIC: len(EVENTS)}
    assert plain.metrics() == {"lateEventsDropped": 2}


def test_a_job_with_stages_in_its_source_gives_plain_pythons_windows(jet: jetlet.EmbeddedInstance) -> None:
    # given a timestamped builder source, out of order by up to 20 ms, then a flat-map and a filter
    events = [(n * 33 + (20 if n % 5 == 0 else 0), n) for n in range(300)]

    def fill(position: list[int], buffer: TimestampedSourceBuffer[int]) -> None:
        batch = events[position[0] : position[0] + 16]
        buffer.add_all([n for _, n in batch], [timestamp for timestamp, _ in batch])
        position[0] += 16

    source = SourceBuilder.timestamped_stream("numbers", lambda _context: [0]).fill_buffer_fn(fill).build()
    p = Pipeline()
    (
        p.read_from(source)
        .with_native_timestamps(allowed_lag=50)
        .flat_map(lambda n: [f"k{n % 3}", f"k{n % 4}"])
        .filter(lambda key: key != "k0")
        .grouping_key(lambda key: key)
        .window(WindowDefinition.tumbling(1000))
        .aggregate(counting())
        .write_to(Sinks.list("counts"))
    )
    assert consumers(p, "numbers") == ["sliding-window-by-key-prepare"]
    # when the job has seen every window close (the stream never ends: cancel it then)
    job = jet.new_job(p)
    keys = ("k1", "k2", "k3")
    complete = {(start, key) for start in range(0, 9000, 1000) for key in keys}
    wait_until(
        lambda: complete <= {(r.start, r.key) for r in jet.get_list("counts")} or job.future.done(),
        "every window's count",
        DEADLINE_S,
    )
    job.cancel()
    with pytest.raises(JobCancelledError):
        job.join(timeout=DEADLINE_S)
    # then each window's counts are plain Python's over the same events
    expected = collections.Counter(
        (ts // 1000 * 1000, key) for ts, n in events for key in (f"k{n % 3}", f"k{n % 4}") if key != "k0"
    )
    got = {(r.start, r.key): r.result for r in jet.get_list("counts")}
    assert {k: got[k] for k in complete} == {k: expected[k] for k in complete}
    # and the source counted what it read, not what the chain let out
    read = sum(v[READ_METRIC] for k, v in job.metrics().items() if k.startswith("numbers#"))
    emitted = sum(v["emittedCount"] for k, v in job.metrics().items() if k.startswith("numbers#"))
    assert read >= len(events) and emitted > read


def test_the_benchmark_counts_each_event_of_its_source_once() -> None:
    def measured(*values: tuple[str, str, int]) -> job_metrics.JobMetrics:
        labels = {"member": "m1", "vertex": jobs.SOURCE_NAME, "proc": "0"}
        return job_metrics.JobMetrics(
            [
                job_metrics.Measurement(name, {**labels, "ordinal": ordinal}, value)
                for name, ordinal, value in values
            ]
        )

    # a chained source counts what it read; a plain one what it emitted
    assert jobs.events_read(measured(("emittedCount", "0", 7), (READ_METRIC, "", 100))) == 100
    assert jobs.events_read(measured(("emittedCount", "0", 7))) == 7
    # and a source feeding two stages (Q8's people and auctions) emits each event on both outputs
    assert jobs.events_read(measured(("emittedCount", "0", 7), ("emittedCount", "1", 7))) == 7
