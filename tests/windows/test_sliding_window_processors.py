"""Sliding/tumbling window processors against a plain-Python reference, in every harness mode.

Events are ``(timestamp, key, value)`` tuples. The reference decides, item by
item, whether an item is late (its frame ends before the next window to
emit), and at each watermark emits, in order of window end, every window
that holds an accepted event and ends at or before the watermark, each key's
result being the aggregate of its accepted events in ``[start, end)``.
Within one window the order of keys is free, so outputs are compared as
multisets between watermarks (the order of windows is still checked by the
window-end order inside the reference's segments being the same bag).
"""

from __future__ import annotations

import collections
import random
from collections.abc import Callable
from typing import Any

import pytest

from jetlet import datamodel
from jetlet.aggregate import operation as agg
from jetlet.aggregate import operations
from jetlet.core import event_time
from jetlet.core import inbox as inbox_mod
from jetlet.core import processor as proc
from jetlet.core import watermark as wm
from jetlet.core.processors import windows
from jetlet.testing import TestOutbox, make_context, verify_processor

Event = tuple[int, str, int]
KeyedResult = datamodel.KeyedWindowResult[Any, Any]


def event_ts(event: Event) -> int:
    return event[0]


def event_key(event: Event) -> str:
    return event[1]


# -- aggregate operations and their plain-Python meaning ------------------------------------


def summing_without_deduct() -> agg.AggregateOperation[Any, Any]:
    return (
        agg.AggregateOperation.with_create(int)
        .and_accumulate(lambda acc, event: acc + event[2])
        .and_combine(lambda a, b: a + b)
    )


def summing_by_batch() -> agg.AggregateOperation[Any, Any]:
    """Summing whose batch function folds a whole list at once (``and_accumulate_batch``)."""
    return summing_without_deduct().and_accumulate_batch(lambda acc, events: acc + sum(e[2] for e in events))


def sorted_values() -> agg.AggregateOperation[Any, Any]:
    return operations.to_list().and_then(lambda values: sorted(e[2] for e in values))


OPS: dict[str, tuple[Callable[[], agg.AggregateOperation[Any, Any]], Callable[[list[Event]], Any]]] = {
    "counting (deduct)": (operations.counting, len),
    "summing (deduct)": (lambda: operations.summing(lambda e: e[2]), lambda es: sum(e[2] for e in es)),
    "summing (no deduct)": (summing_without_deduct, lambda es: sum(e[2] for e in es)),
    "summing (by batch)": (summing_by_batch, lambda es: sum(e[2] for e in es)),
    "to_list (no deduct)": (sorted_values, lambda es: sorted(e[2] for e in es)),
}


# -- the reference ------------------------------------------------------------------------------


def reference(
    stream: list[Any],
    policy: event_time.SlidingWindowPolicy,
    result_of: Callable[[list[Event]], Any],
    shape: Callable[[int, int, Any, Any], Any],
) -> list[Any]:
    """Expected output for ``stream`` (events and watermarks), computed without frames state."""
    size, step, offset = policy.window_size, policy.frame_size, policy.frame_offset

    def frame_end(ts: int) -> int:
        return ts - ((ts - offset) % step) + step

    accepted: list[Event] = []
    next_win: int | None = None
    out: list[Any] = []

    def emit_until(limit: int | None) -> None:
        ends = {frame_end(e[0]) + i * step for e in accepted for i in range(policy.frames_per_window)}
        for end in sorted(ends):
            if (next_win is not None and end < next_win) or (limit is not None and end > limit):
                continue
            by_key: dict[str, list[Event]] = collections.defaultdict(list)
            for e in accepted:
                if end - size <= e[0] < end:
                    by_key[e[1]].append(e)
            out.extend(shape(end - size, end, key, result_of(events)) for key, events in by_key.items())

    for element in stream:
        if isinstance(element, wm.Watermark):
            emit_until(element.timestamp)
            after = frame_end(element.timestamp)
            next_win = after if next_win is None else max(next_win, after)
            out.append(element)
        elif next_win is None or frame_end(element[0]) >= next_win:
            accepted.append(element)
    emit_until(None)
    return out


def keyed(start: int, end: int, key: Any, result: Any) -> Any:
    return datamodel.KeyedWindowResult(start, end, key, result)


def same_between_watermarks(expected: list[Any], actual: list[Any]) -> bool:
    return segments(expected) == segments(actual)


def segments(items: list[Any]) -> list[collections.Counter[str]]:
    out: list[collections.Counter[str]] = [collections.Counter()]
    for item in items:
        if isinstance(item, wm.Watermark):
            out.append(collections.Counter([repr(item)]))
            out.append(collections.Counter())
        else:
            out[-1][repr(item)] += 1
    return out


def random_stream(seed: int, count: int, keys: int, disorder: int, wm_every: int) -> list[Any]:
    """Out-of-order events with watermarks at (top timestamp - lag); some events come late."""
    rng = random.Random(seed)
    stream: list[Any] = []
    top = 0
    last_wm: int | None = None
    for i in range(count):
        ts = i * 2 + rng.randint(-disorder, disorder)
        top = max(top, ts)
        stream.append((ts, f"k{rng.randrange(keys)}", rng.randint(1, 9)))
        if i % wm_every == wm_every - 1:
            mark = top - rng.randint(0, disorder)
            if last_wm is None or mark > last_wm:
                stream.append(wm.Watermark(mark))
                last_wm = mark
    return stream


POLICIES = {
    "tumbling 10": event_time.tumbling_win_policy(10),
    "sliding 30 by 10": event_time.sliding_win_policy(30, 10),
    "sliding 20 by 5 offset 3": event_time.sliding_win_policy(20, 5).with_offset(3),
}


# -- single stage -------------------------------------------------------------------------------


@pytest.mark.parametrize("op_name", list(OPS))
@pytest.mark.parametrize("policy_name", list(POLICIES))
@pytest.mark.parametrize("seed", [11, 12])
def test_single_stage_matches_the_reference(op_name: str, policy_name: str, seed: int) -> None:
    # given random out-of-order events with watermarks and several keys
    make_op, result_of = OPS[op_name]
    policy = POLICIES[policy_name]
    stream = random_stream(seed, count=60, keys=4, disorder=12, wm_every=5)
    expected = reference(stream, policy, result_of, keyed)
    # when aggregated in one stage, then every harness mode gives the reference's windows
    factory = windows.aggregate_to_sliding_window_p(event_key, event_ts, policy, make_op())
    verify_processor(factory).input(stream).output_checker(same_between_watermarks).expect_output(expected)
    assert sum(isinstance(item, datamodel.KeyedWindowResult) for item in expected) > 10


@pytest.mark.parametrize("op_name", list(OPS))
@pytest.mark.parametrize("policy_name", list(POLICIES))
def test_global_windows_fold_batches_in_one_frame_as_item_by_item(op_name: str, policy_name: str) -> None:
    # given random out-of-order events of one global key, some late, with frames of 5-10 time units
    # (the harness's batches of one item fall in one frame and are folded at once; whole batches
    # span frames and go item by item)
    make_op, result_of = OPS[op_name]
    policy = POLICIES[policy_name]
    stream = [(e[0], "g", e[2]) if isinstance(e, tuple) else e for e in random_stream(5, 80, 1, 12, 5)]

    def global_result(start: int, end: int, _key: Any, result: Any) -> Any:
        return datamodel.KeyedWindowResult(start, end, 0, result)

    expected = reference(stream, policy, result_of, global_result)
    # when aggregated in one stage by the global key, then every harness mode gives the reference
    factory = windows.aggregate_to_sliding_window_p(windows.GLOBAL_KEY, event_ts, policy, make_op())
    verify_processor(factory).input(stream).output_checker(same_between_watermarks).expect_output(expected)
    assert sum(isinstance(item, datamodel.KeyedWindowResult) for item in expected) > 5


def test_a_global_frame_folds_its_items_in_order_and_a_late_batch_is_dropped_whole() -> None:
    # given a tumbling window of 100 collecting values in arrival order, by the global key
    op = operations.to_list().and_then(lambda events: [e[2] for e in events])
    processor = windows.aggregate_to_sliding_window_p(
        windows.GLOBAL_KEY, event_ts, event_time.tumbling_win_policy(100), op
    )()
    outbox = TestOutbox(1, 100)
    processor.init(outbox, make_context())
    # when a batch within one frame (out of order inside it), a watermark, then a late batch arrive
    processor.process(0, inbox_mod.Inbox([(30, "g", 1), (10, "g", 2), (99, "g", 3)]))
    processor.process(0, inbox_mod.Inbox([(5, "g", 4)]))
    out: list[list[Any]] = [[]]
    while not processor.try_process_watermark(wm.Watermark(100)):
        outbox.drain(out, [])
    outbox.drain(out, [])
    processor.process(0, inbox_mod.Inbox([(20, "g", 6), (60, "g", 7)]))
    outbox.drain(out, [])
    # then the window holds the first frame's values in arrival order, and the late batch is counted
    assert out[0] == [datamodel.KeyedWindowResult(0, 100, 0, [1, 2, 3, 4]), wm.Watermark(100)]
    assert processor.metrics()["lateEventsDropped"] == 2


def test_a_global_frame_calls_the_batch_function_once_per_batch_and_a_spanning_batch_per_item() -> None:
    # given a tumbling window of 100 by the global key whose operation counts its calls
    calls = collections.Counter[str]()

    def one(acc: list[int], event: Event) -> list[int]:
        calls["item"] += 1
        return [*acc, event[2]]

    def batch(acc: list[int], events: list[Event]) -> list[int]:
        calls["batch"] += 1
        return [*acc, *(e[2] for e in events)]

    op = agg.AggregateOperation.with_create(list).and_accumulate(one).and_accumulate_batch(batch)
    op = op.and_combine(lambda a, b: a + b).and_export_finish(tuple)
    processor = windows.aggregate_to_sliding_window_p(
        windows.GLOBAL_KEY, event_ts, event_time.tumbling_win_policy(100), op
    )()
    outbox = TestOutbox(1, 100)
    processor.init(outbox, make_context())
    # when a batch of five items in one frame, then one of three spanning two frames, arrive
    processor.process(0, inbox_mod.Inbox([(t, "g", t) for t in (30, 10, 99, 0, 50)]))
    assert calls == {"batch": 1}
    processor.process(0, inbox_mod.Inbox([(t, "g", t) for t in (60, 120, 70)]))
    out: list[list[Any]] = [[]]
    while not processor.try_process_watermark(wm.Watermark(200)):
        outbox.drain(out, [])
    outbox.drain(out, [])
    # then the first was folded in one call, the second item by item, and both windows hold their
    # values in arrival order
    assert calls == {"batch": 1, "item": 3}
    assert out[0] == [
        datamodel.KeyedWindowResult(0, 100, 0, (30, 10, 99, 0, 50, 60, 70)),
        datamodel.KeyedWindowResult(100, 200, 0, (120,)),
        wm.Watermark(200),
    ]


def test_late_events_are_dropped_and_counted() -> None:
    # given a window of 10 that a watermark of 25 has emitted up to 20
    stream: list[Any] = [(21, "a", 1), wm.Watermark(25), (19, "a", 1), (20, "a", 1), (5, "b", 1)]
    policy = event_time.tumbling_win_policy(10)
    factory = windows.aggregate_to_sliding_window_p(event_key, event_ts, policy, operations.counting())
    # then 19 and 5 are late and 20 still counts in [20, 30)
    expected = [wm.Watermark(25), datamodel.KeyedWindowResult(20, 30, "a", 2)]
    verify_processor(factory).input(stream).expect_output(expected)
    processor, _ = run_by_hand(factory, stream)
    assert processor.metrics()["lateEventsDropped"] == 2


def test_co_aggregation_uses_each_inputs_functions() -> None:
    # given two inputs with different shapes, counted into one tuple per window
    op = (
        agg.AggregateOperation.with_create(lambda: (0, 0))
        .and_accumulate0(lambda acc, _item: (acc[0] + 1, acc[1]))
        .and_accumulate1(lambda acc, _item: (acc[0], acc[1] + 1))
        .and_combine(lambda a, b: (a[0] + b[0], a[1] + b[1]))
    )
    factory = windows.aggregate_to_sliding_window_p(
        [lambda item: item["k"], lambda item: item[1]],
        [lambda item: item["t"], lambda item: item[0]],
        event_time.tumbling_win_policy(10),
        op,
    )
    verify_processor(factory).inputs(
        [[{"t": 1, "k": "a"}, {"t": 2, "k": "a"}], [(3, "a"), (15, "b")]]
    ).output_checker(same_between_watermarks).expect_output(
        [datamodel.KeyedWindowResult(0, 10, "a", (2, 1)), datamodel.KeyedWindowResult(10, 20, "b", (0, 1))]
    )


def test_map_to_output_shapes_results_and_none_is_not_emitted() -> None:
    def shape(start: int, end: int, key: Any, result: Any, is_early: bool) -> Any:
        return None if key == "skip" else (key, start, end, result)

    factory = windows.aggregate_to_sliding_window_p(
        event_key, event_ts, event_time.tumbling_win_policy(10), operations.counting(), shape
    )
    verify_processor(factory).input([(1, "a", 0), (2, "skip", 0), wm.Watermark(10)]).expect_output(
        [("a", 0, 10, 1), wm.Watermark(10)]
    )


def test_idle_message_is_forwarded_without_emitting_windows() -> None:
    factory = windows.aggregate_to_sliding_window_p(
        event_key, event_ts, event_time.tumbling_win_policy(10), operations.counting()
    )
    _, out = run_by_hand(factory, [(1, "a", 0), wm.IDLE_MESSAGE], complete=False)
    assert out == [wm.IDLE_MESSAGE]


# -- two stages -------------------------------------------------------------------------------


@pytest.mark.parametrize("op_name", list(OPS))
@pytest.mark.parametrize("policy_name", list(POLICIES))
def test_two_stages_match_the_reference(op_name: str, policy_name: str) -> None:
    make_op, result_of = OPS[op_name]
    policy = POLICIES[policy_name]
    stream = random_stream(21, count=60, keys=4, disorder=12, wm_every=5)

    # given stage 1, which emits each frame's accumulator per key as the watermark passes it
    def frame_entry(start: int, end: int, key: Any, events: list[Event]) -> Any:
        acc = make_op().create_fn()
        for event in events:
            acc = make_op().accumulate_fn(0)(acc, event)
        return datamodel.TimestampedEntry(end, key, acc)

    frames = reference_frames(stream, policy, frame_entry)
    stage1 = windows.accumulate_by_frame_p(event_key, event_ts, policy, make_op())
    verify_processor(stage1).input(stream).output_checker(same_frames).expect_output(frames)
    # when stage 2 combines those frames, then it gives the same windows as one stage
    _, frames_out = run_by_hand(stage1, stream)
    expected = reference(stream, policy, result_of, keyed)
    stage2 = windows.combine_to_sliding_window_p(policy, make_op())
    verify_processor(stage2).input(frames_out).output_checker(same_between_watermarks).expect_output(expected)


def test_a_first_stage_whose_input_turns_idle_sends_its_frames_before_the_idle_message() -> None:
    # given stage 1 of a 100 ms tumbling count: items of frame 200, a watermark of 100 (the frame
    # stays open), the input turning idle, then items of frames 200 and 300 and a watermark of 300
    policy = event_time.tumbling_win_policy(100)
    stage1 = windows.accumulate_by_frame_p(event_key, event_ts, policy, operations.counting())
    stream = [(120, "a", 0), (150, "b", 0), wm.Watermark(100), wm.IDLE_MESSAGE]
    stream += [(190, "a", 0), (210, "c", 0), wm.Watermark(300)]
    entry = datamodel.TimestampedEntry
    # then (through snapshots and a full outbox) frame 200 goes before the idle message: stage 2,
    # which leaves an idle input out of its watermark, would otherwise close its windows without
    # it (it did); the later item of frame 200 goes in a second accumulator of that frame
    expected = [wm.Watermark(100), entry(200, "a", 1), entry(200, "b", 1), wm.IDLE_MESSAGE]
    expected += [entry(200, "a", 1), entry(300, "c", 1), wm.Watermark(300)]
    verify_processor(stage1).input(stream).output_checker(same_between_watermarks).expect_output(expected)
    # and stage 2 adds the two accumulators of frame 200 into one window result
    _, frames_out = run_by_hand(stage1, stream)
    stage2 = windows.combine_to_sliding_window_p(policy, operations.counting())
    _, results = run_by_hand(stage2, [f for f in frames_out if f is not wm.IDLE_MESSAGE])
    counts = {(r.end, r.key): r.result for r in results if isinstance(r, datamodel.KeyedWindowResult)}
    assert counts == {(200, "a"): 2, (200, "b"): 1, (300, "c"): 1}


def reference_frames(
    stream: list[Any], policy: event_time.SlidingWindowPolicy, frame_entry: Callable[..., Any]
) -> list[Any]:
    return reference(stream, policy.to_tumbling_by_frame(), lambda events: events, frame_entry)


def same_frames(expected: list[Any], actual: list[Any]) -> bool:
    """Frame entries compared with sorted to_list accumulators (arrival order within a frame is free)."""
    return same_between_watermarks(normalize(expected), normalize(actual))


def normalize(items: list[Any]) -> list[Any]:
    def fix(item: Any) -> Any:
        if isinstance(item, datamodel.TimestampedEntry) and isinstance(item.value, list):
            return datamodel.TimestampedEntry(item.timestamp, item.key, sorted(item.value))
        return item

    return [fix(item) for item in items]


def test_stage_two_refuses_frames_of_another_policy() -> None:
    stage2 = windows.combine_to_sliding_window_p(event_time.sliding_win_policy(20, 10), operations.counting())
    with pytest.raises(ValueError, match="not a frame boundary"):
        run_by_hand(stage2, [datamodel.TimestampedEntry(15, "a", 1)])


def test_operations_that_cannot_combine_are_refused_for_sliding_windows() -> None:
    op = agg.AggregateOperation.with_create(int).and_accumulate(lambda acc, _e: acc + 1)
    with pytest.raises(ValueError, match="combine"):
        windows.aggregate_to_sliding_window_p(event_key, event_ts, event_time.sliding_win_policy(20, 10), op)
    with pytest.raises(ValueError, match="combine"):
        windows.combine_to_sliding_window_p(event_time.tumbling_win_policy(10), op)
    # but a tumbling window needs no combine
    factory = windows.aggregate_to_sliding_window_p(
        event_key, event_ts, event_time.tumbling_win_policy(10), op
    )
    verify_processor(factory).input([(1, "a", 0), (2, "a", 0)]).expect_output(
        [datamodel.KeyedWindowResult(0, 10, "a", 2)]
    )


# -- early results -------------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def test_early_results_are_emitted_once_per_period_for_incomplete_windows() -> None:
    # given a sliding window of 20 by 10 with early results every 100 ms
    clock = FakeClock()
    policy = event_time.sliding_win_policy(20, 10)
    factory = windows.aggregate_to_sliding_window_p(
        event_key, event_ts, policy, operations.counting(), early_results_period_ms=100, clock=clock
    )
    stream: list[Any] = [(1, "a", 0), (12, "a", 0), (13, "b", 0), wm.Watermark(10)]
    processor, out = run_by_hand(factory, stream, complete=False)
    assert out == [datamodel.KeyedWindowResult(-10, 10, "a", 1), wm.Watermark(10)]
    # when less than a period passes, then nothing
    clock.now = 99
    assert drain_try_process(processor, out) == []
    # when a period passes, then the incomplete windows [0, 20) and [10, 30) come early
    clock.now = 100
    early = drain_try_process(processor, out)
    expected_early = [
        datamodel.KeyedWindowResult(0, 20, "a", 2, is_early=True),
        datamodel.KeyedWindowResult(0, 20, "b", 1, is_early=True),
        datamodel.KeyedWindowResult(10, 30, "a", 1, is_early=True),
        datamodel.KeyedWindowResult(10, 30, "b", 1, is_early=True),
    ]
    assert sorted(map(repr, early)) == sorted(map(repr, expected_early))
    # and only once per period
    clock.now = 150
    assert drain_try_process(processor, out) == []
    # when the watermark passes, then the final results follow
    final = feed(processor, [wm.Watermark(30)])
    expected_final = [replace_final(result) for result in expected_early]
    assert sorted(map(repr, final[:-1])) == sorted(map(repr, expected_final))
    assert final[-1] == wm.Watermark(30)


def replace_final(result: KeyedResult) -> KeyedResult:
    return datamodel.KeyedWindowResult(result.start, result.end, result.key, result.result)


def drain_try_process(processor: proc.Processor, out: list[Any]) -> list[Any]:
    emitted: list[Any] = []
    outbox = processor.outbox
    assert isinstance(outbox, TestOutbox)
    for _ in range(1000):
        done = processor.try_process()
        outbox.drain([emitted], [])
        if done:
            break
    out.extend(emitted)
    return emitted


def test_early_results_with_a_small_outbox_resume_and_then_let_items_in() -> None:
    # given early results that do not fit a 1-item outbox
    clock = FakeClock()
    factory = windows.aggregate_to_sliding_window_p(
        event_key, event_ts, event_time.tumbling_win_policy(10), operations.counting(),
        early_results_period_ms=10, clock=clock,
    )  # fmt: skip
    processor = factory()
    outbox = TestOutbox(1, 1)
    processor.init(outbox, make_context())
    processor.process(0, inbox_mod.Inbox([(1, "a", 0), (2, "b", 0), (3, "c", 0)]))
    clock.now = 10
    emitted: list[Any] = []
    # when try_process is called until done
    calls = 0
    while not processor.try_process():
        outbox.drain([emitted], [])
        calls += 1
    outbox.drain([emitted], [])
    # then all three early results came out, one per call: two calls found the outbox full,
    # the third emitted the last result and was done
    assert calls == 2
    assert sorted(r.key for r in emitted) == ["a", "b", "c"]
    assert all(r.is_early for r in emitted)
    # and items and watermarks then go on as usual
    final = feed(processor, [(4, "a", 0), wm.Watermark(10)])
    assert sorted((r.key, r.result, r.is_early) for r in final[:-1]) == [
        ("a", 2, False),
        ("b", 1, False),
        ("c", 1, False),
    ]


# -- cost of sliding ----------------------------------------------------------------------------


class CallCounter:
    def __init__(self) -> None:
        self.combine = 0
        self.deduct = 0

    def op(self, with_deduct: bool) -> agg.AggregateOperation[Any, Any]:
        def combine(a: int, b: int) -> int:
            self.combine += 1
            return a + b

        def deduct(a: int, b: int) -> int:
            self.deduct += 1
            return a - b

        op = (
            agg.AggregateOperation.with_create(int)
            .and_accumulate(lambda acc, _e: acc + 1)
            .and_combine(combine)
        )
        return op.and_deduct(deduct) if with_deduct else op


def count_calls(frames_per_window: int, with_deduct: bool, events: list[Any]) -> tuple[CallCounter, int, int]:
    counter = CallCounter()
    policy = event_time.sliding_win_policy(10 * frames_per_window, 10)
    windows_emitted: set[int] = set()

    def shape(start: int, end: int, key: Any, result: Any, is_early: bool) -> None:
        windows_emitted.add(end)

    factory = windows.aggregate_to_sliding_window_p(
        event_key, event_ts, policy, counter.op(with_deduct), shape
    )
    run_by_hand(factory, events)
    frame_entries = len(
        {(policy.higher_frame_ts(e[0]), e[1]) for e in events if not isinstance(e, wm.Watermark)}
    )
    return counter, len(windows_emitted), frame_entries


def cost_events() -> list[Any]:
    """10,000 keys, one event per 10 ms frame over 12 s, then a watermark past everything."""
    rng = random.Random(7)
    events: list[Any] = [(ts, f"key{rng.randrange(10_000)}", 1) for ts in range(0, 12_000, 10)]
    events.append(wm.Watermark(30_000))
    return events


def test_sliding_with_deduct_costs_constant_combines_per_window_whatever_the_window_length() -> None:
    # given 10,000 keys and windows sliding by 10 ms, of 100 ms and of 10 s (1000 frames)
    events = cost_events()
    short, short_windows, entries = count_calls(10, True, events)
    long, long_windows, _ = count_calls(1000, True, events)
    # then every frame accumulator is combined in once and deducted once, for both lengths
    assert short.combine <= entries and short.deduct <= entries
    assert long.combine <= entries and long.deduct <= entries
    assert long_windows > 2000 and short_windows > 1000
    per_window_short = (short.combine + short.deduct) / short_windows
    per_window_long = (long.combine + long.deduct) / long_windows
    assert per_window_long <= per_window_short <= 2
    # while recomputing without deduct costs a combine per frame of each window
    recompute, _, _ = count_calls(10, False, events)
    assert recompute.combine >= 9 * entries


# -- helpers -------------------------------------------------------------------------------------


def run_by_hand(
    factory: proc.ProcessorFactory, stream: list[Any], complete: bool = True
) -> tuple[proc.Processor, list[Any]]:
    """Run a processor with a roomy outbox, draining as the engine would; return it and its output."""
    processor = factory()
    processor.init(TestOutbox(1, 4096), make_context())
    out = feed(processor, stream)
    if complete:
        outbox = processor.outbox
        assert isinstance(outbox, TestOutbox)
        while not processor.complete():
            outbox.drain([out], [])
        outbox.drain([out], [])
    return processor, out


def feed(processor: proc.Processor, stream: list[Any]) -> list[Any]:
    outbox = processor.outbox
    assert isinstance(outbox, TestOutbox)
    out: list[Any] = []
    for element in stream:
        if element is wm.IDLE_MESSAGE:
            while not processor.try_process_idle():
                outbox.drain([out], [])
        elif isinstance(element, wm.Watermark):
            while not processor.try_process_watermark(element):
                outbox.drain([out], [])
        else:
            inbox = inbox_mod.Inbox([element])
            while inbox:
                processor.process(0, inbox)
                outbox.drain([out], [])
        outbox.drain([out], [])
    return out
