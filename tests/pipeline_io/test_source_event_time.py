"""Event time planned into a ``SourceBuilder`` timestamped stream (no ``add-timestamps`` vertex).

The source's processor with the policy must emit exactly what the source followed by
``insert_watermarks_p`` emits: the same events, late ones dropped and counted, the same
watermarks, the idle message after the idle timeout, and a snapshot that restores the watermark.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from jetlet import config
from jetlet.core import Inbox, event_time
from jetlet.core import processor as proc
from jetlet.core.event_time_mapper import SNAPSHOT_TAG
from jetlet.core.processors import watermarks
from jetlet.core.processors.chain import BatchStep
from jetlet.core.snapshot_keys import ProcessorKey
from jetlet.core.watermark import IDLE_MESSAGE, Watermark
from jetlet.pipeline import Pipeline, Sinks, Sources
from jetlet.pipeline.source_builder import SourceBuilder, TimestampedSourceBuffer
from jetlet.pipeline.sources import StreamSource
from jetlet.testing import TestOutbox, make_context, verify_processor, wait_until

EVENTS = [(10, "a"), (8, "b"), (14, "c"), (9, "d"), (13, "e"), (30, "f"), (20, "g"), (31, "h")]
"""Out of order: with a lag of 3, "d" (9 after the watermark 11) and "g" (20 after 27) are late."""
DEADLINE_S = 10


@dataclasses.dataclass
class Feed:
    """A source's state: the events it may emit so far (the test adds more), and its position."""

    available: int = len(EVENTS)
    position: int = 0


def fill_two(feed: Feed, buffer: TimestampedSourceBuffer[str]) -> None:
    """The next two available events per fill."""
    for timestamp, item in EVENTS[feed.position : min(feed.position + 2, feed.available)]:
        buffer.add(item, timestamp)
    feed.position = min(feed.position + 2, feed.available)


def restore(feed: Feed, saved: list[int]) -> None:
    feed.position = saved[0]


def stamped() -> StreamSource[Any]:
    return (
        SourceBuilder.timestamped_stream("stamped", lambda _context: Feed())
        .fill_buffer_fn(fill_two)
        .create_snapshot_fn(lambda feed: feed.position)
        .restore_snapshot_fn(restore)
        .build()
    )


def policy(idle_timeout_ms: int = 60_000) -> event_time.EventTimePolicy:
    timestamp_fn = stamped().native_timestamps
    return event_time.EventTimePolicy(
        timestamp_fn, allowed_lag=3, wrap_fn=None, idle_timeout_ms=idle_timeout_ms
    )


def planned_source(
    outbox: TestOutbox, idle_timeout_ms: int = 60_000, step: BatchStep | None = None
) -> proc.Processor:
    """A processor of the source with the policy (and ``step`` after it) planned into it, initialised."""
    supplier = stamped().event_time_supplier
    assert supplier is not None
    context = make_context(processing_guarantee=config.ProcessingGuarantee.EXACTLY_ONCE)
    made = verify_processor(supplier(policy(idle_timeout_ms), step)).context(context).new_processor()
    made.init(outbox, context)
    return made


def run(processor: proc.Processor, outbox: TestOutbox, calls: int = 10) -> list[Any]:
    """``complete()`` ``calls`` times (a call emits what is pending, or fills and emits); everything
    emitted, watermarks in place."""
    out: list[list[Any]] = [[]]
    for _ in range(calls):
        processor.complete()
        outbox.drain(out, [])
    return out[0]


def test_a_timestamp_stage_right_after_a_builder_source_is_planned_into_it() -> None:
    # given native timestamps right after a timestamped builder source, and after a generator source
    p = Pipeline()
    p.read_from(stamped()).with_native_timestamps(3).map(str.upper).write_to(Sinks.list("a"))
    generated = Sources.stream_from_generator(lambda _context: iter(range(5)), "generated")
    p.read_from(generated).with_timestamps(lambda n: n, 0).write_to(Sinks.list("b"))
    # when it is planned
    dag = p.to_dag()
    # then the builder source has no add-timestamps vertex after it; the generator source keeps its own
    assert [v.name for v in dag.vertices() if v.name.startswith("add-timestamps")] == ["add-timestamps"]
    assert [e.source_name for e in dag.inbound_edges("add-timestamps")] == ["generated"]
    # (and the stages after it run in it too: tests/pipeline_io/test_source_chain.py)
    assert {e.dest_name for e in dag.edges() if e.source_name == "stamped"} == {"listSink(a)"}


def test_a_source_read_by_two_stages_keeps_its_add_timestamps_vertices() -> None:
    # given one builder source read with two lags (two consumers of the source)
    p = Pipeline()
    source = p.read_from(stamped())
    source.with_native_timestamps(3).write_to(Sinks.list("a"))
    source.with_native_timestamps(5).write_to(Sinks.list("b"))
    # when it is planned, then each timestamp stage has its own vertex
    names = [vertex.name for vertex in p.to_dag().vertices()]
    assert sum(name.startswith("add-timestamps") for name in names) == 2


def test_the_source_with_the_policy_emits_what_insert_watermarks_emits_after_it() -> None:
    # given the source with the policy planned in, and insert_watermarks_p with the same policy
    outbox = TestOutbox(1, 100)
    planned = planned_source(outbox)
    reference = watermarks.insert_watermarks_p(policy())()
    reference_outbox = TestOutbox(1, 100)
    reference.init(reference_outbox, make_context())
    # when the source fills every event, two at a time, and the reference gets the same batches
    got = run(planned, outbox)
    want: list[list[Any]] = [[]]
    for start in range(0, len(EVENTS), 2):
        inbox = Inbox(EVENTS[start : start + 2])
        while inbox:
            reference.process(0, inbox)
            reference_outbox.drain(want, [])
    # then the outputs are the same: late events dropped and counted, limiting-lag watermarks
    assert (
        got
        == want[0]
        == [
            (10, "a"),
            Watermark(7),
            (8, "b"),
            (14, "c"),
            Watermark(11),
            (13, "e"),
            (30, "f"),
            Watermark(27),
            (31, "h"),
            Watermark(28),
        ]
    )
    assert planned.metrics() == reference.metrics() == {"lateEventsDropped": 2}


def test_the_source_emits_the_idle_message_and_then_the_last_watermark_again() -> None:
    # given the source with a 1 ms idle timeout that has emitted two events and has no more for now
    outbox = TestOutbox(1, 100)
    planned = planned_source(outbox, idle_timeout_ms=1)
    feed: Feed = planned._state  # type: ignore[attr-defined]
    feed.available = 2
    seen = run(planned, outbox)
    assert seen[:3] == [(10, "a"), Watermark(7), (8, "b")]

    def idle_seen() -> bool:
        seen.extend(run(planned, outbox, 1))
        return IDLE_MESSAGE in seen

    # when its fills stay empty past the timeout
    wait_until(idle_seen, "the idle message", DEADLINE_S)
    seen.extend(run(planned, outbox))
    # then the idle message came once, and the next event is preceded by the last watermark again
    assert seen[3:] == [IDLE_MESSAGE]
    feed.available = 4
    resumed = run(planned, outbox)
    assert resumed[:3] == [Watermark(7), (14, "c"), Watermark(11)]
    # (on a loaded machine the ten calls may outlast the 1 ms timeout again: then idle once more)
    assert resumed[3:] in ([], [IDLE_MESSAGE])


def test_the_source_saves_its_watermark_and_a_restore_takes_the_lowest() -> None:
    # given the source with the policy after four events (top 14, watermark 11)
    outbox = TestOutbox(1, 100)
    planned = planned_source(outbox)
    planned._state.available = 4  # type: ignore[attr-defined]
    run(planned, outbox)
    # when it saves a snapshot
    assert planned.save_to_snapshot()
    snapshot = list(outbox.snapshot_bucket)
    # then the snapshot holds the watermark state, then the source's position
    assert [(key.tag, key.processor_index, value) for key, value in snapshot] == [
        (SNAPSHOT_TAG, 0, (14, 11)),
        ("__jetlet_source_builder__", 0, 4),
    ]
    # and a fresh processor restored from it and another processor's older state (watermark 9)
    # resumes at the lower watermark: "d" (9), replayed, is not late, and "e" (13) lifts it to 10
    restored_outbox = TestOutbox(1, 100)
    restored = planned_source(restored_outbox)
    restored.restore_from_snapshot(Inbox([*snapshot, (ProcessorKey(SNAPSHOT_TAG, 1), (12, 9))]))
    assert restored.finish_snapshot_restore()
    restored._state.position, restored._state.available = 3, 5  # type: ignore[attr-defined]
    assert run(restored, restored_outbox) == [(9, "d"), (13, "e"), Watermark(10)]
    assert restored.metrics() == {"lateEventsDropped": 0}


def test_batches_of_ordered_and_shuffled_timestamps_give_what_insert_watermarks_gives() -> None:
    # given a source that adds batches (add_all) whose timestamps are in order, nearly in order,
    # or shuffled wide enough to make late events, and insert_watermarks_p with the same policy
    rng = random.Random(20)
    batches: list[list[tuple[int, str]]] = []
    base = 1_000
    for n in range(60):
        stamps = [base + i + rng.choice((0, 0, 0, -2, 5)) * (n % 3) for i in range(rng.randint(1, 40))]
        if n % 4 == 3:
            rng.shuffle(stamps)
        batches.append([(stamp, f"{n}:{i}") for i, stamp in enumerate(stamps)])
        base += len(stamps) - rng.randint(0, 4)

    def fill_batch(state: list[int], buffer: TimestampedSourceBuffer[str]) -> None:
        if state[0] < len(batches):
            batch = batches[state[0]]
            buffer.add_all([item for _, item in batch], [stamp for stamp, _ in batch])
            state[0] += 1

    source = (
        SourceBuilder.timestamped_stream("batched", lambda _context: [0]).fill_buffer_fn(fill_batch).build()
    )
    supplier = source.event_time_supplier
    assert supplier is not None
    outbox = TestOutbox(1, 10_000)
    planned = verify_processor(supplier(policy())).context(make_context()).new_processor()
    planned.init(outbox, make_context())
    reference = watermarks.insert_watermarks_p(policy())()
    reference_outbox = TestOutbox(1, 10_000)
    reference.init(reference_outbox, make_context())
    # when the source fills every batch and the reference gets the same batches as its inbox
    got = run(planned, outbox, calls=20 * len(batches))  # (a call emits up to one watermark)
    want: list[list[Any]] = [[]]
    for batch in batches:
        inbox = Inbox(list(batch))
        while inbox:
            reference.process(0, inbox)
            reference_outbox.drain(want, [])
    # then both emit the same events and watermarks and drop the same late events
    assert got == want[0]
    assert planned.metrics() == reference.metrics()
    assert planned.metrics()["lateEventsDropped"] > 0
    assert sum(isinstance(x, Watermark) for x in got) > 10
