"""insert_watermarks_p: wrapping, limiting-lag watermarks, throttling, late items, idleness, snapshots."""

from __future__ import annotations

import random
from typing import Any

import pytest

from jetlet.core import event_time
from jetlet.core import inbox as inbox_mod
from jetlet.core import watermark as wm
from jetlet.core.processors import watermarks
from jetlet.testing import TestOutbox, make_context, verify_processor


def policy_of(lag: int, throttle: int = 1, **kwargs: Any) -> event_time.EventTimePolicy:
    return event_time.EventTimePolicy(
        timestamp_fn=lambda item: item[0], allowed_lag=lag, watermark_throttling_frame_size=throttle, **kwargs
    )


def reference(items: list[tuple[int, str]], lag: int, throttle: int) -> tuple[list[Any], int]:
    """What insert_watermarks_p should emit, and how many items are late, computed plainly."""
    out: list[Any] = []
    top: int | None = None
    last: int | None = None
    late = 0
    for item in items:
        ts = item[0]
        if last is not None and ts < last:
            late += 1
            continue
        out.append((ts, item))
        top = ts if top is None else max(top, ts)
        candidate = ((top - lag) // throttle) * throttle
        if last is None or candidate > last:
            last = candidate
            out.append(wm.Watermark(candidate))
    return out, late


def random_items(seed: int, count: int) -> list[tuple[int, str]]:
    rng = random.Random(seed)
    return [(i * 3 + rng.randint(-20, 20), f"e{i}") for i in range(count)]


def test_in_order_items_are_wrapped_and_followed_by_watermarks() -> None:
    items = [(10, "a"), (12, "b"), (15, "c")]
    verify_processor(watermarks.insert_watermarks_p(policy_of(lag=2))).input(items).expect_output(
        [
            (10, (10, "a")),
            wm.Watermark(8),
            (12, (12, "b")),
            wm.Watermark(10),
            (15, (15, "c")),
            wm.Watermark(13),
        ]
    )


def test_items_behind_the_watermark_are_dropped_and_out_of_order_items_within_the_lag_kept() -> None:
    # given a lag of 5: 8 is within the lag of 10, 3 is behind the watermark 5
    items = [(10, "a"), (8, "b"), (3, "c"), (11, "d")]
    verify_processor(watermarks.insert_watermarks_p(policy_of(lag=5))).input(items).expect_output(
        [(10, (10, "a")), wm.Watermark(5), (8, (8, "b")), (11, (11, "d")), wm.Watermark(6)]
    )


@pytest.mark.parametrize(("seed", "lag", "throttle"), [(1, 0, 1), (2, 10, 1), (3, 15, 10), (4, 40, 7)])
def test_random_out_of_order_input_matches_the_reference(seed: int, lag: int, throttle: int) -> None:
    # given shuffled-ish timestamps, when run through every harness mode
    items = random_items(seed, 120)
    expected, late = reference(items, lag, throttle)
    verify_processor(watermarks.insert_watermarks_p(policy_of(lag, throttle))).input(items).expect_output(
        expected
    )
    # then the late count is the reference's too
    processor, _ = run_by_hand(policy_of(lag, throttle), items)
    assert processor.metrics() == {"lateEventsDropped": late}
    assert late > 0 or lag >= 20


def test_throttled_watermarks_are_at_most_one_per_frame() -> None:
    items = [(ts, "x") for ts in range(0, 50, 3)]
    expected, _ = reference(items, 0, 10)
    watermarks_out = [w.timestamp for w in expected if isinstance(w, wm.Watermark)]
    assert watermarks_out == [0, 10, 20, 30, 40]
    verify_processor(watermarks.insert_watermarks_p(policy_of(0, 10))).input(items).expect_output(expected)


def test_wrap_fn_none_emits_items_unchanged_and_upstream_watermarks_are_swallowed() -> None:
    policy = event_time.EventTimePolicy(timestamp_fn=lambda x: x, allowed_lag=0, wrap_fn=None)
    verify_processor(watermarks.insert_watermarks_p(policy)).input([4, wm.Watermark(100), 6]).expect_output(
        [4, wm.Watermark(4), 6, wm.Watermark(6)]
    )


def test_policy_without_timestamp_fn_is_refused() -> None:
    with pytest.raises(ValueError, match="timestamp_fn"):
        watermarks.insert_watermarks_p(event_time.EventTimePolicy(timestamp_fn=None, allowed_lag=0))


class FakeClock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def run_by_hand(
    policy: event_time.EventTimePolicy, items: list[Any], clock: FakeClock | None = None
) -> tuple[watermarks.InsertWatermarksP, TestOutbox]:
    factory = watermarks.insert_watermarks_p(policy, clock or FakeClock())
    processor = factory()
    assert isinstance(processor, watermarks.InsertWatermarksP)
    outbox = TestOutbox(1, 10_000)
    processor.init(outbox, make_context())
    feed(processor, outbox, items)
    return processor, outbox


def feed(processor: watermarks.InsertWatermarksP, outbox: TestOutbox, items: list[Any]) -> list[Any]:
    """Process ``items`` to the end, draining the outbox as the engine would; return what came out."""
    emitted: list[Any] = []
    inbox = inbox_mod.Inbox(items)
    for _ in range(10 * len(items) + 10):
        if not inbox:
            break
        processor.process(0, inbox)
        outbox.drain([emitted], [])
    assert not inbox
    return emitted


def test_idle_message_is_emitted_once_after_the_timeout_and_the_watermark_resumes_the_stream() -> None:
    # given a processor with an idle timeout of 100 ms and a fake clock
    clock = FakeClock()
    processor, outbox = run_by_hand(policy_of(lag=0, idle_timeout_ms=100), [], clock)
    out: list[Any] = []
    out += feed(processor, outbox, [(5, "a")])
    # when 99 ms pass, then nothing happens
    clock.now = 99
    assert processor.try_process()
    outbox.drain([out], [])
    assert out == [(5, (5, "a")), wm.Watermark(5)]
    # when 100 ms pass, then IDLE_MESSAGE is emitted, once
    clock.now = 100
    assert processor.try_process()
    clock.now = 500
    assert processor.try_process()
    outbox.drain([out], [])
    assert out[2:] == [wm.IDLE_MESSAGE]
    # when an item arrives again, then the last watermark precedes it
    out += feed(processor, outbox, [(4, "late"), (6, "b")])
    assert out[3:] == [wm.Watermark(5), (6, (6, "b")), wm.Watermark(6)]
    assert processor.metrics() == {"lateEventsDropped": 1}


def test_zero_idle_timeout_never_declares_idleness() -> None:
    clock = FakeClock()
    processor, outbox = run_by_hand(policy_of(lag=0, idle_timeout_ms=0), [], clock)
    clock.now = 10**9
    assert processor.try_process()
    out: list[Any] = []
    outbox.drain([out], [])
    assert out == []


def test_restore_takes_the_minimum_of_the_saved_watermarks_and_never_regresses() -> None:
    # given two processors with different progress
    policy = policy_of(lag=0)
    first, first_box = run_by_hand(policy, [(10, "a")])
    second, second_box = run_by_hand(policy, [(30, "b")])
    saved: list[tuple[Any, Any]] = []
    for processor, outbox in ((first, first_box), (second, second_box)):
        assert processor.save_to_snapshot()
        outbox.drain([[]], saved)
    # when both states are restored into one fresh processor
    restored = watermarks.insert_watermarks_p(policy, FakeClock())()
    outbox = TestOutbox(1, 100)
    restored.init(outbox, make_context())
    restored.restore_from_snapshot(inbox_mod.Inbox(saved))
    assert restored.finish_snapshot_restore()
    assert isinstance(restored, watermarks.InsertWatermarksP)
    # then it resumes from the lower watermark: 9 is late, 12 advances to 12
    out = feed(restored, outbox, [(9, "late"), (12, "c")])
    assert out == [(12, (12, "c")), wm.Watermark(12)]
    assert restored.metrics() == {"lateEventsDropped": 1}


def jittered_items(seed: int, count: int, jitter: int) -> list[tuple[int, str]]:
    """Items in time order, each up to ``jitter`` late: none is late for a lag above the jitter."""
    rng = random.Random(seed)
    return [(i * 3 + rng.randrange(jitter), f"e{i}") for i in range(count)]


@pytest.mark.parametrize(
    ("lag", "throttle", "chunk"), [(100, 1, 16), (100, 10, 16), (100, 7, 5), (15, 10, 64)]
)
def test_chunks_without_late_items_match_the_reference(lag: int, throttle: int, chunk: int) -> None:
    # given out-of-order items that are never behind the watermark, in chunks of the outbox's size
    # (chunks spanning less than the lag take the fast path, some lifting the watermark twice)
    items = jittered_items(5, 600, jitter=12)
    expected, late = reference(items, lag, throttle)
    assert late == 0
    processor = watermarks.insert_watermarks_p(policy_of(lag, throttle), FakeClock())()
    outbox = TestOutbox(1, chunk)
    processor.init(outbox, make_context())
    # when processed in two inbox loads
    emitted = feed(processor, outbox, items[:300]) + feed(processor, outbox, items[300:])
    # then the output is the reference's, item by item and watermark by watermark
    assert emitted == expected
    assert processor.metrics() == {"lateEventsDropped": 0}


def test_a_late_item_in_a_chunk_is_dropped_after_the_watermark_the_chunk_lifted() -> None:
    # given one chunk where 3 arrives after the watermark 10 emitted for the item 20 before it
    items = [(12, "a"), (20, "b"), (3, "c"), (21, "d")]
    processor, _ = run_by_hand(policy_of(10), items)
    # then it is dropped and counted, and everything else keeps its order
    assert processor.metrics() == {"lateEventsDropped": 1}
    expected, _ = reference(items, 10, 1)
    verify_processor(watermarks.insert_watermarks_p(policy_of(10))).input(items).expect_output(expected)


def test_a_custom_wrap_fn_wraps_every_item_of_an_on_time_chunk() -> None:
    # given a wrap function other than the default event
    policy = event_time.EventTimePolicy(
        timestamp_fn=lambda item: item[0], allowed_lag=5, wrap_fn=lambda item, ts: {"ts": ts, "item": item}
    )
    items = jittered_items(6, 50, jitter=4)
    expected, _ = reference(items, 5, 1)
    assert sum(isinstance(e, wm.Watermark) for e in expected) > 10
    # then each item is wrapped by it, and watermarks sit where the reference puts them
    wrapped = [e if isinstance(e, wm.Watermark) else {"ts": e[0], "item": e[1]} for e in expected]
    verify_processor(watermarks.insert_watermarks_p(policy)).input(items).expect_output(wrapped)
