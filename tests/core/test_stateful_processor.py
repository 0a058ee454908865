"""Stateful map/filter/flat-map: per-key state, timestamps, TTL eviction by watermark, on-evict, snapshots."""

from __future__ import annotations

import random
import sys
import threading
from typing import Any

import pytest

from jetlet.core import Inbox, Outbox, Watermark, snapshot_writer
from jetlet.core.processors import stateful
from jetlet.testing import make_context, verify_processor


def _events(n: int = 60, seed: int = 21) -> list[tuple[str, int]]:
    rng = random.Random(seed)
    return [(rng.choice("abcd"), rng.randint(1, 9)) for _ in range(n)]


def _key(item: tuple[str, int]) -> str:
    return item[0]


def _running_sum(state: list[int], key: str, item: tuple[str, int]) -> tuple[str, int]:
    state[0] += item[1]
    return (key, state[0])


def test_given_keyed_running_sum_when_stateful_map_then_matches_reference() -> None:
    events = _events()
    totals: dict[str, int] = {}
    expected = []
    for key, value in events:
        totals[key] = totals.get(key, 0) + value
        expected.append((key, totals[key]))
    factory = stateful.stateful_p(stateful.MAP, _key, lambda: [0], _running_sum)
    verify_processor(factory).input(events).expect_output(expected)


def test_given_no_key_when_stateful_map_then_one_global_state_and_fn_gets_state_and_item() -> None:
    values = [v for _, v in _events(30)]
    expected = [sum(values[: i + 1]) for i in range(len(values))]

    def add(state: list[int], item: int) -> int:
        state[0] += item
        return state[0]

    verify_processor(stateful.stateful_p(stateful.MAP, None, lambda: [0], add)).input(values).expect_output(
        expected
    )


def test_given_map_returning_none_when_stateful_map_then_nothing_is_emitted_for_it() -> None:
    def every_second(state: list[int], key: str, item: Any) -> Any:
        state[0] += 1
        return item if state[0] % 2 == 0 else None

    events = _events(40)
    seen: dict[str, int] = {}
    expected = []
    for event in events:
        seen[event[0]] = seen.get(event[0], 0) + 1
        if seen[event[0]] % 2 == 0:
            expected.append(event)
    verify_processor(stateful.stateful_p(stateful.MAP, _key, lambda: [0], every_second)).input(
        events
    ).expect_output(expected)


def test_given_dedup_filter_when_stateful_filter_then_first_occurrence_per_key_passes() -> None:
    def first_time(state: set[int], key: str, item: tuple[str, int]) -> bool:
        new = item[1] not in state
        state.add(item[1])
        return new

    events = _events(80)
    seen: set[tuple[str, int]] = set()
    expected = []
    for event in events:
        if event not in seen:
            seen.add(event)
            expected.append(event)
    verify_processor(stateful.stateful_p(stateful.FILTER, _key, set, first_time)).input(events).expect_output(
        expected
    )


def test_given_flat_map_when_stateful_flat_map_then_emits_the_iterables_in_order() -> None:
    def repeat_by_count(state: list[int], key: str, item: tuple[str, int]) -> list[str]:
        state[0] += 1
        return [key] * state[0]

    events = _events(20)
    counts: dict[str, int] = {}
    expected: list[str] = []
    for key, _ in events:
        counts[key] = counts.get(key, 0) + 1
        expected.extend([key] * counts[key])
    verify_processor(stateful.stateful_p(stateful.FLAT_MAP, _key, lambda: [0], repeat_by_count)).input(
        events
    ).expect_output(expected)


def test_given_timestamped_events_when_stateful_map_then_results_keep_their_timestamps() -> None:
    events = [(ts, item) for ts, item in enumerate(_events(20))]
    totals: dict[str, int] = {}
    expected = []
    for ts, (key, value) in events:
        totals[key] = totals.get(key, 0) + value
        expected.append((ts, (key, totals[key])))
    factory = stateful.stateful_p(stateful.MAP, _key, lambda: [0], _running_sum, timestamped=True)
    verify_processor(factory).input(events).expect_output(expected)


def _ttl_reference(stream: list[Any], ttl: int) -> list[Any]:
    """Count per key; a watermark W evicts the keys last seen before W - ttl.

    Each eviction emits ``(W, ("evicted", key, count))`` before the watermark itself.
    """
    states: dict[str, list[int]] = {}
    out: list[Any] = []
    for element in stream:
        if isinstance(element, Watermark):
            for key in [k for k, (_, last) in states.items() if last < element.timestamp - ttl]:
                count, _ = states.pop(key)
                out.append((element.timestamp, ("evicted", key, count)))
            out.append(element)
            continue
        ts, (key, _) = element
        slot = states.setdefault(key, [0, ts])
        slot[0] += 1
        slot[1] = max(slot[1], ts)
        out.append((ts, (key, slot[0])))
    return out


def _ttl_stream(seed: int) -> list[Any]:
    rng = random.Random(seed)
    stream: list[Any] = []
    ts = 0
    for i in range(60):
        ts += rng.randint(0, 3)
        stream.append((ts, (rng.choice("abcdef"), i)))
        if i % 7 == 6:
            stream.append(Watermark(ts - rng.randint(0, 4)))
    return stream


def _count(state: list[int], key: str, item: Any) -> tuple[str, int]:
    state[0] += 1
    return (key, state[0])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_given_ttl_and_watermarks_when_stateful_map_then_idle_keys_are_evicted_with_on_evict_output(
    seed: int,
) -> None:
    # given events and watermarks, and a TTL of 5 event-time units
    stream = _ttl_stream(seed)
    expected = _ttl_reference(stream, ttl=5)
    assert any(isinstance(x, tuple) and x[1][0] == "evicted" for x in expected)  # the data exercises eviction
    factory = stateful.stateful_p(
        stateful.MAP,
        _key,
        lambda: [0],
        _count,
        timestamped=True,
        ttl=5,
        on_evict_fn=lambda state, key, wm: ("evicted", key, state[0]),
    )
    # when / then
    verify_processor(factory).input(stream).expect_output(expected)


def test_given_ttl_and_evicted_key_when_it_returns_then_state_starts_fresh() -> None:
    factory = stateful.stateful_p(stateful.MAP, _key, lambda: [0], _count, timestamped=True, ttl=2)
    stream = [(1, ("k", 0)), (2, ("k", 0)), Watermark(10), (11, ("k", 0))]
    verify_processor(factory).input(stream).expect_output(
        [(1, ("k", 1)), (2, ("k", 2)), Watermark(10), (11, ("k", 1))]
    )


def test_given_flat_map_on_evict_when_evicting_then_each_result_gets_the_watermark_timestamp() -> None:
    factory = stateful.stateful_p(
        stateful.FLAT_MAP,
        _key,
        list,
        lambda state, key, item: state.append(item[1]),
        timestamped=True,
        ttl=1,
        on_evict_fn=lambda state, key, wm: [(key, v) for v in state],
    )
    stream = [(1, ("a", 5)), (1, ("a", 6)), (3, ("b", 7)), Watermark(4)]
    verify_processor(factory).input(stream).expect_output([(4, ("a", 5)), (4, ("a", 6)), Watermark(4)])


def test_given_no_ttl_when_watermark_arrives_then_nothing_is_evicted() -> None:
    factory = stateful.stateful_p(stateful.MAP, _key, lambda: [0], _count, timestamped=True)
    stream = [(1, ("k", 0)), Watermark(1000), (2, ("k", 0))]
    verify_processor(factory).input(stream).expect_output([(1, ("k", 1)), Watermark(1000), (2, ("k", 2))])


def test_given_ttl_without_timestamps_when_created_then_value_error() -> None:
    with pytest.raises(ValueError, match="ttl needs timestamps"):
        stateful.StatefulP(stateful.MAP, None, list, lambda s, i: i, timestamped=False, ttl=5)


def test_given_unknown_kind_when_created_then_value_error() -> None:
    with pytest.raises(ValueError, match="unknown stateful kind 'reduce'"):
        stateful.StatefulP("reduce", None, list, lambda s, i: i, timestamped=False)


def test_given_snapshot_with_key_twice_when_restored_then_value_error_names_key() -> None:
    p = stateful.StatefulP(stateful.MAP, _key, list, _count, timestamped=False)
    p.init(Outbox(1), make_context())
    with pytest.raises(ValueError, match="key 'a' twice"):
        p.restore_from_snapshot(Inbox([("a", [[1], 0]), ("a", [[2], 0])]))


def test_given_state_when_saved_and_restored_elsewhere_then_new_processor_continues_from_it() -> None:
    # given a processor with state for two keys
    first = stateful.StatefulP(stateful.MAP, _key, lambda: [0], _count, timestamped=False)
    first.init(Outbox(1), make_context())
    first.process(0, Inbox([("a", 0), ("b", 0), ("a", 0)]))
    snapshot_outbox = Outbox(1, capacity=1)
    first.init(snapshot_outbox, make_context())
    saved: list[tuple[Any, Any]] = []
    while not first.save_to_snapshot():
        saved.extend(snapshot_outbox.snapshot_bucket)
        snapshot_outbox.snapshot_bucket.clear()
    saved.extend(snapshot_outbox.snapshot_bucket)
    assert len(saved) == 1  # one entry lends every key's state, even through an outbox of capacity 1
    read = _frozen_and_thawed(saved)
    assert [key for key, _ in read] == ["a", "b"]
    # when restored into a fresh processor
    second = stateful.StatefulP(stateful.MAP, _key, lambda: [0], _count, timestamped=False)
    outbox = Outbox(1)
    second.init(outbox, make_context())
    second.restore_from_snapshot(Inbox(read))
    second.process(0, Inbox([("a", 0), ("b", 0)]))
    # then the counts continue
    assert outbox.buckets == [[("a", 3), ("b", 2)]]


def _frozen_and_thawed(saved: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """What a member stores (lent values frozen off the processing thread) and a restore reads back."""
    return snapshot_writer.read_back_lent(saved)


class PickleCountingState:
    """A running list of values that counts how often each key's state is pickled (copied or frozen)."""

    pickled: dict[str, int] = {}

    def __init__(self, key: str = "", values: list[int] | None = None) -> None:
        self.key = key
        self.values = values if values is not None else []

    def __reduce__(self) -> tuple[Any, ...]:
        PickleCountingState.pickled[self.key] = PickleCountingState.pickled.get(self.key, 0) + 1
        return PickleCountingState, (self.key, list(self.values))


def _append(state: PickleCountingState, key: str, item: tuple[str, int]) -> tuple[str, list[int]]:
    state.key = key
    state.values.append(item[1])
    return (key, list(state.values))


def _save(processor: stateful.StatefulP) -> list[tuple[Any, Any]]:
    outbox = Outbox(1, capacity=100_000)
    processor.init(outbox, make_context())
    assert processor.save_to_snapshot()
    saved = list(outbox.snapshot_bucket)
    processor.init(Outbox(1, capacity=100_000), make_context())
    return saved


def test_given_snapshot_not_yet_stored_when_items_change_lent_states_then_it_keeps_barrier_state() -> None:
    # given a processor with states for keys a, b and c, saved to a snapshot that is not stored yet
    PickleCountingState.pickled.clear()
    before = [("a", 1), ("b", 2), ("c", 3), ("a", 4)]
    after = [("a", 5), ("c", 6), ("a", 7)]
    processor = stateful.StatefulP(stateful.MAP, _key, PickleCountingState, _append, timestamped=False)
    processor.init(Outbox(1, capacity=1_000), make_context())
    processor.process(0, Inbox(list(before)))
    saved = _save(processor)
    assert PickleCountingState.pickled == {}  # lent, not pickled at the barrier
    # when items after the barrier change a's and c's states before the member stores the snapshot
    processor.process(0, Inbox(list(after)))
    # then the stored snapshot holds the states as they were at the barrier (plain-Python reference)
    reference: dict[str, list[int]] = {}
    for key, value in before:
        reference.setdefault(key, []).append(value)
    stored = {key: (state.values, ts) for key, (state, ts) in _frozen_and_thawed(saved)}
    assert stored == {key: (values, 0) for key, values in reference.items()}
    # and each state was pickled once: a and c by the processor before it changed them, b when stored
    assert PickleCountingState.pickled == {"a": 1, "b": 1, "c": 1}
    # and once the snapshot is stored, states change with no pickling
    processor.process(0, Inbox([("a", 8), ("b", 9)]))
    assert PickleCountingState.pickled == {"a": 1, "b": 1, "c": 1}
    # and the processor's own results went on from the changed states
    for key, value in [*after, ("a", 8), ("b", 9)]:
        reference.setdefault(key, []).append(value)
    restored = {key: state.values for key, (state, _) in _frozen_and_thawed(_save(processor))}
    assert restored == reference


def test_given_lent_state_when_evicted_and_changed_by_on_evict_then_snapshot_keeps_barrier_state() -> None:
    # given a timestamped processor with a TTL whose on_evict_fn changes the state it gets
    def close(state: list[int], key: str, watermark: int) -> tuple[str, list[int]]:
        state.append(-1)
        return (key, list(state))

    processor = stateful.StatefulP(
        stateful.MAP, _key, list, lambda state, key, item: state.append(item[1]), True, 2, close
    )
    outbox = Outbox(1, capacity=1_000)
    processor.init(outbox, make_context())
    processor.process(0, Inbox([(1, ("k", 10)), (1, ("k", 11))]))
    saved = _save(processor)
    # when the key is evicted before the snapshot is stored
    eviction_outbox = Outbox(1, capacity=1_000)
    processor.init(eviction_outbox, make_context())
    emitted: list[Any] = []
    for _ in range(3):  # the eviction's result goes out, then the watermark
        done = processor.try_process_watermark(Watermark(10))
        emitted.extend(eviction_outbox.buckets[0])
        eviction_outbox.buckets[0].clear()
        emitted.extend(c for c in [eviction_outbox.take_control(0)] if c is not None)
        if done:
            break
    # then on_evict changed the state, and the snapshot holds the state at the barrier
    assert emitted == [(10, ("k", [10, 11, -1])), Watermark(10)]
    assert _frozen_and_thawed(saved) == [("k", [[10, 11], 1])]


def test_given_store_thread_freezing_while_processor_changes_states_then_snapshot_is_barrier_state() -> None:
    # given 20,000 keys' states lent to a snapshot, and 60,000 more items over those keys
    rng = random.Random(5)
    keys = [f"k{i}" for i in range(20_000)]
    before = [(key, rng.randint(1, 9)) for key in keys]
    after = [(rng.choice(keys), rng.randint(1, 9)) for _ in range(60_000)]
    processor = stateful.StatefulP(stateful.MAP, _key, list, lambda s, k, i: s.append(i[1]), False)
    processor.init(Outbox(1, capacity=100_000), make_context())
    processor.process(0, Inbox(list(before)))
    saved = _save(processor)
    # when a store thread freezes the snapshot while the processor goes on, in chunks, on this thread
    stored: list[tuple[Any, Any]] = []
    store = threading.Thread(target=lambda: stored.extend(_frozen_and_thawed(saved)))
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # the threads take turns often, so both freeze some of the states
    try:
        store.start()
        for start in range(0, len(after), 100):
            processor.init(Outbox(1, capacity=100_000), make_context())
            processor.process(0, Inbox(after[start : start + 100]))
        store.join(timeout=60)
    finally:
        sys.setswitchinterval(switch_interval)
    # then the snapshot holds every key's state at the barrier, whichever thread froze it
    assert not store.is_alive()
    assert dict(stored) == {key: [[value], 0] for key, value in before}
    # and the processor's states went on from there (plain-Python reference)
    reference = {key: [value] for key, value in before}
    for key, value in after:
        reference[key].append(value)
    assert {key: slot[0] for key, slot in _frozen_and_thawed(_save(processor))} == reference
