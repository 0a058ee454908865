"""aggregate_to_session_window_p: per-key session windows closed by the watermark, as Jet's SessionWindowP.

The reference sessionizes by hand: sort each key's timestamps and split where the gap is at least the
session timeout.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

import jetlet
from jetlet.aggregate import AggregateOperation, counting
from jetlet.core import DAG, Edge, Inbox, Processor, Watermark, processors
from jetlet.core.processors.session import SessionWindowP, aggregate_to_session_window_p
from jetlet.datamodel import KeyedWindowResult
from jetlet.testing import TestOutbox, make_context, verify_processor

TIMEOUT = 10

Event = tuple[str, int, int]  # (key, timestamp, value)


def _key(event: Event) -> str:
    return event[0]


def _timestamp(event: Event) -> int:
    return event[1]


def _count_and_sum(value_index: int = 2) -> AggregateOperation[tuple[int, int], tuple[int, int]]:
    """(count, sum of values): immutable accumulator, combinable."""
    return (
        AggregateOperation.with_create(lambda: (0, 0))
        .and_accumulate(lambda acc, e: (acc[0] + 1, acc[1] + e[value_index]))
        .and_combine(lambda a, b: (a[0] + b[0], a[1] + b[1]))
        .and_export_finish(lambda acc: acc)
    )


def _reference_sessions(events: list[Event], timeout: int) -> list[KeyedWindowResult[str, Any]]:
    """Sort per key, split where the gap between consecutive timestamps is >= timeout."""
    by_key: dict[str, list[Event]] = {}
    for event in events:
        by_key.setdefault(event[0], []).append(event)
    results = []
    for key, key_events in by_key.items():
        key_events.sort(key=_timestamp)
        current = [key_events[0]]
        for event in key_events[1:]:
            if event[1] - current[-1][1] >= timeout:
                results.append(_session_result(key, current, timeout))
                current = []
            current.append(event)
        results.append(_session_result(key, current, timeout))
    return results


def _session_result(key: str, events: list[Event], timeout: int) -> KeyedWindowResult[str, Any]:
    return KeyedWindowResult(
        events[0][1], events[-1][1] + timeout, key, (len(events), sum(e[2] for e in events))
    )


def _segments(output: list[Any]) -> list[tuple[list[Any], Watermark | None]]:
    """Split an output into (results, the watermark that followed them or None at the end)."""
    segments: list[tuple[list[Any], Watermark | None]] = []
    current: list[Any] = []
    for item in output:
        if isinstance(item, Watermark):
            segments.append((current, item))
            current = []
        else:
            current.append(item)
    segments.append((current, None))
    return segments


def _same_segments_as_bags(expected: list[Any], actual: list[Any]) -> bool:
    """Equal watermarks in equal places; between them equal results in any order."""
    exp, act = _segments(expected), _segments(actual)
    return len(exp) == len(act) and all(
        ew == aw and Counter(map(repr, er)) == Counter(map(repr, ar))
        for (er, ew), (ar, aw) in zip(exp, act, strict=True)
    )


def _expected_with_watermarks(stream: list[Any], timeout: int) -> list[Any]:
    """Reference output: each final session just before the first watermark at or after its end."""
    events = [item for item in stream if not isinstance(item, Watermark)]
    sessions = sorted(_reference_sessions(events, timeout), key=lambda r: r.end)
    out: list[Any] = []
    for item in stream:
        if isinstance(item, Watermark):
            while sessions and sessions[0].end <= item.timestamp:
                out.append(sessions.pop(0))
            out.append(item)
    return out + sessions


def _random_stream(rng: random.Random, lag: int, count: int = 0) -> list[Any]:
    """Events with bounded disorder and watermarks ``max seen - lag`` (so none is late)."""
    stream: list[Any] = []
    top = 0
    last_watermark = -1
    for _ in range(count or rng.randrange(1, 120)):
        top += rng.choice([0, 1, 2, 3, 5, 12, 25])
        timestamp = max(0, top - rng.randrange(lag + 1))
        stream.append((rng.choice("abcde"), max(timestamp, last_watermark), rng.randrange(100)))
        if rng.random() < 0.2 and top - lag > last_watermark:
            last_watermark = top - lag
            stream.append(Watermark(last_watermark))
    return stream


# -- the harness: every mode, including snapshot+restore and a blocked outbox of one ------------------


def test_given_two_bursts_and_a_watermark_when_aggregated_then_the_first_session_is_emitted_before_it() -> (
    None
):
    # given: "a" at 1 and 5 (one session [1, 15)), "b" at 3, "a" again at 40
    events = [("a", 1, 1), ("b", 3, 10), ("a", 5, 2), ("a", 40, 4), Watermark(20)]
    # when / then: the watermark closes [1, 15) and [3, 13); the rest comes at completion
    verify_processor(
        aggregate_to_session_window_p(TIMEOUT, _key, _timestamp, _count_and_sum())
    ).output_checker(_same_segments_as_bags).input(events).expect_output(
        [
            KeyedWindowResult(3, 13, "b", (1, 10)),
            KeyedWindowResult(1, 15, "a", (2, 3)),
            Watermark(20),
            KeyedWindowResult(40, 50, "a", (1, 4)),
        ]
    )


def test_given_an_event_bridging_two_sessions_when_aggregated_then_they_merge_into_one() -> None:
    # given: [0, 10) and [15, 25) open; an event at 8 overlaps both
    events = [("a", 0, 1), ("a", 15, 2), ("a", 8, 4), Watermark(100)]
    # when / then
    verify_processor(aggregate_to_session_window_p(TIMEOUT, _key, _timestamp, _count_and_sum())).input(
        events
    ).expect_output([KeyedWindowResult(0, 25, "a", (3, 7)), Watermark(100)])


def test_given_a_gap_equal_to_the_timeout_when_aggregated_then_the_sessions_stay_apart() -> None:
    events = [("a", 0, 1), ("a", 10, 2), Watermark(100)]
    verify_processor(aggregate_to_session_window_p(TIMEOUT, _key, _timestamp, _count_and_sum())).input(
        events
    ).expect_output(
        [KeyedWindowResult(0, 10, "a", (1, 1)), KeyedWindowResult(10, 20, "a", (1, 2)), Watermark(100)]
    )


def test_given_a_snapshot_after_a_watermark_when_restored_then_late_events_are_still_dropped() -> None:
    # given: the harness snapshots and restores after ("a", 60); ("a", 30) is late for Watermark(50)
    events = [("a", 1, 1), Watermark(50), ("a", 60, 1), ("a", 30, 1)]
    # when / then: the restored processor remembers the watermark and drops it
    verify_processor(aggregate_to_session_window_p(TIMEOUT, _key, _timestamp, _count_and_sum())).input(
        events
    ).expect_output(
        [KeyedWindowResult(1, 11, "a", (1, 1)), Watermark(50), KeyedWindowResult(60, 70, "a", (1, 1))]
    )


@pytest.mark.parametrize("seed", range(12))
def test_given_random_streams_when_aggregated_then_output_equals_the_sessionizing_reference(
    seed: int,
) -> None:
    # given
    rng = random.Random(seed)
    stream = _random_stream(rng, lag=rng.choice([0, 5, 20]))
    # when / then
    verify_processor(
        aggregate_to_session_window_p(TIMEOUT, _key, _timestamp, _count_and_sum())
    ).output_checker(_same_segments_as_bags).input(stream).expect_output(
        _expected_with_watermarks(stream, TIMEOUT)
    )


def test_given_two_inputs_when_co_aggregated_then_each_uses_its_own_key_timestamp_and_accumulate_fn() -> None:
    # given: input 0 is (key, ts) and counts; input 1 is (ts, key, value) and sums into the second field
    op = (
        AggregateOperation.with_create(lambda: (0, 0))
        .and_accumulate0(lambda acc, e: (acc[0] + 1, acc[1]))
        .and_accumulate1(lambda acc, e: (acc[0], acc[1] + e[2]))
        .and_combine(lambda a, b: (a[0] + b[0], a[1] + b[1]))
    )
    factory = aggregate_to_session_window_p(
        TIMEOUT,
        [_key, lambda e: e[1]],
        [_timestamp, lambda e: e[0]],
        op,
        lambda s, e, k, r, early: (k, s, e, r),
    )
    # when / then: "a" at 0 (input 0) and 5 (input 1) form one session
    verify_processor(factory).inputs([[("a", 0)], [(5, "a", 7), (50, "b", 1)]]).output_checker(
        _same_segments_as_bags
    ).expect_output([("a", 0, 15, (1, 7)), ("b", 50, 60, (0, 1))])


# -- late events and early results -------------------------------------------------------------------


def _driven(factory: Callable[[], Processor]) -> tuple[SessionWindowP, TestOutbox]:
    processor = factory()
    assert isinstance(processor, SessionWindowP)
    outbox = TestOutbox(1, 1024)
    processor.init(outbox, make_context())
    return processor, outbox


def _taken(outbox: TestOutbox) -> list[Any]:
    outputs: list[list[Any]] = [[]]
    outbox.drain(outputs, [])
    return outputs[0]


def _watermark_outputs(processor: SessionWindowP, outbox: TestOutbox, watermark: Watermark) -> list[Any]:
    """Call try_process_watermark until it returns True, draining the outbox between calls."""
    outputs: list[Any] = []
    for _ in range(10):
        done = processor.try_process_watermark(watermark)
        outputs.extend(_taken(outbox))
        if done:
            return outputs
    raise AssertionError("try_process_watermark never returned True")


def test_given_events_behind_the_watermark_when_processed_then_they_are_dropped_and_counted() -> None:
    # given: a watermark at 100
    processor, outbox = _driven(aggregate_to_session_window_p(TIMEOUT, _key, _timestamp, _count_and_sum()))
    assert _watermark_outputs(processor, outbox, Watermark(100)) == [Watermark(100)]
    # when: 85 + 10 <= 100 is late, 90 + 10 <= 100 is late, 95 + 10 > 100 is not
    processor.process(0, Inbox([("a", 85, 1), ("a", 90, 1), ("a", 95, 5)]))
    assert processor.complete()
    # then
    assert processor.metrics()["lateEventsDropped"] == 2
    assert _taken(outbox) == [KeyedWindowResult(95, 105, "a", (1, 5))]


def test_given_an_early_results_period_when_the_clock_passes_it_then_open_sessions_are_emitted_early() -> (
    None
):
    # given: a fake clock at 0 and a period of 1000 ms
    now = [0]
    factory = aggregate_to_session_window_p(
        TIMEOUT, _key, _timestamp, _count_and_sum(), early_results_period_ms=1000, clock=lambda: now[0]
    )
    processor, outbox = _driven(factory)
    processor.process(0, Inbox([("a", 0, 1), ("b", 3, 2), ("a", 5, 4)]))
    # when: the period has not yet passed
    now[0] = 999
    assert processor.try_process()
    # then: nothing is emitted
    assert _taken(outbox) == []
    # when: it has
    now[0] = 1000
    assert processor.try_process()
    # then: every open session, marked early, and the sessions stay open
    assert Counter(map(repr, _taken(outbox))) == Counter(
        map(
            repr,
            [
                KeyedWindowResult(0, 15, "a", (2, 5), is_early=True),
                KeyedWindowResult(3, 13, "b", (1, 2), is_early=True),
            ],
        )
    )
    processor.process(0, Inbox([("a", 7, 10)]))
    assert _watermark_outputs(processor, outbox, Watermark(20)) == [
        KeyedWindowResult(3, 13, "b", (1, 2)),
        KeyedWindowResult(0, 17, "a", (3, 15)),
        Watermark(20),
    ]
    # and: the next early results come a period later, not before
    now[0] = 1500
    assert processor.try_process()
    assert _taken(outbox) == []


def test_given_no_combine_function_when_making_the_processor_then_it_is_refused() -> None:
    op = AggregateOperation.with_create(lambda: 0).and_accumulate(lambda acc, e: acc + 1)
    with pytest.raises(ValueError, match="combine"):
        aggregate_to_session_window_p(TIMEOUT, _key, _timestamp, op)


def test_given_default_output_when_counting_then_results_are_keyed_window_results() -> None:
    verify_processor(aggregate_to_session_window_p(5, _key, _timestamp, counting())).input(
        [("k", 1, 0), ("k", 3, 0)]
    ).expect_output([KeyedWindowResult(1, 8, "k", 2)])


# -- end to end: in a real DAG on the embedded instance ------------------------------------------------


class _StreamSourceP(Processor):
    """Emits a fixed stream of events and watermarks (this test's stand-in for a timestamped source)."""

    def __init__(self, stream: list[Any]) -> None:
        self._stream = stream
        self._position = 0

    def complete(self) -> bool:
        while self._position < len(self._stream):
            if not self.outbox.offer(self._stream[self._position]):
                return False
            self._position += 1
        return True


@pytest.mark.parametrize("parallelism", [1, 4])
def test_given_a_dag_partitioned_by_key_when_run_then_sessions_equal_the_reference(parallelism: int) -> None:
    # given: a long random stream with watermarks and without late events
    stream = _random_stream(random.Random(7), lag=5, count=3000)
    out: list[Any] = []
    dag = DAG()
    source = dag.new_vertex("source", lambda: _StreamSourceP(stream), 1)
    sessions = dag.new_vertex(
        "sessions", aggregate_to_session_window_p(TIMEOUT, _key, _timestamp, _count_and_sum()), parallelism
    )
    sink = dag.new_vertex("sink", processors.list_sink_p(out), 1)
    dag.edge(Edge.between(source, sessions).partitioned(_key))
    dag.edge(Edge.between(sessions, sink))
    # when
    with jetlet.embedded() as jet:
        jet.new_job(dag).join(timeout=60)
    # then
    events = [item for item in stream if not isinstance(item, Watermark)]
    assert Counter(map(repr, out)) == Counter(map(repr, _reference_sessions(events, TIMEOUT)))


def test_given_overlapping_sessions_of_one_key_from_two_snapshots_when_restored_then_they_merge() -> None:
    # given: two processors holding overlapping sessions of key "a" (as after a rescale)
    saved: list[tuple[Any, Any]] = []
    for index, events in ((0, [("a", 0, 1)]), (1, [("a", 5, 2), ("a", 30, 4)])):
        processor, outbox = _driven(
            aggregate_to_session_window_p(TIMEOUT, _key, _timestamp, _count_and_sum())
        )
        processor.context = make_context(global_processor_index=index, local_parallelism=2)
        processor.process(0, Inbox(events))
        assert processor.save_to_snapshot()
        saved.extend(outbox.snapshot_bucket)
    # when: one processor restores both
    restored, outbox = _driven(aggregate_to_session_window_p(TIMEOUT, _key, _timestamp, _count_and_sum()))
    restored.restore_from_snapshot(Inbox(saved))
    assert restored.finish_snapshot_restore()
    assert restored.complete()
    # then: [0, 10) and [5, 15) merged; [30, 40) apart
    assert _taken(outbox) == [KeyedWindowResult(0, 15, "a", (2, 3)), KeyedWindowResult(30, 40, "a", (1, 4))]


def test_given_late_events_in_a_dag_when_run_then_job_metrics_count_them() -> None:
    # given: two events behind Watermark(100) by more than the timeout, one within it
    stream = [("a", 1, 1), Watermark(100), ("a", 50, 1), ("b", 89, 1), ("a", 95, 1)]
    out: list[Any] = []
    dag = DAG()
    source = dag.new_vertex("source", lambda: _StreamSourceP(stream), 1)
    sessions = dag.new_vertex(
        "sessions", aggregate_to_session_window_p(TIMEOUT, _key, _timestamp, _count_and_sum()), 2
    )
    sink = dag.new_vertex("sink", processors.list_sink_p(out), 1)
    dag.edge(Edge.between(source, sessions).partitioned(_key))
    dag.edge(Edge.between(sessions, sink))
    # when
    with jetlet.embedded() as jet:
        job = jet.new_job(dag)
        job.join(timeout=60)
        metrics = job.metrics()
    # then
    dropped = sum(m.get("lateEventsDropped", 0) for name, m in metrics.items() if "sessions" in name)
    assert dropped == 2
    assert Counter(map(repr, out)) == Counter(
        map(repr, [KeyedWindowResult(1, 11, "a", (1, 1)), KeyedWindowResult(95, 105, "a", (1, 1))])
    )
