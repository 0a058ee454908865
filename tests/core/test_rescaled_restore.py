"""Stateful built-in processors restored into another number of processors than saved their state.

Each test runs ``N`` processors of one vertex by hand (:class:`Vertex`), as
the engine would: items reach the processor that owns their key's partition
(``partition % N``), watermarks reach every processor. Midway it takes a
snapshot of every processor, throws them away (a failure right after the
snapshot), routes the saved entries to ``M`` fresh processors by the restore
rule of :mod:`jetlet.core.snapshot_keys` (a broadcast key to all of them, any
other key to the owner of its partition, ``partition % M``), feeds the rest
of the input to those, and compares everything emitted (before the snapshot
and after the restore) with a plain-Python computation over the whole input.
"""

from __future__ import annotations

import functools
import pickle
import random
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from jetlet import config, datamodel
from jetlet.aggregate import AggregateOperation, counting, summing
from jetlet.core import Inbox, Processor, Watermark, event_time, processors, snapshot_keys, snapshot_writer
from jetlet.core.processors import stateful
from jetlet.testing import TestOutbox, make_context

PARTITIONS = config.DEFAULT_PARTITION_COUNT
CAPACITY = 5
"""A small outbox, so that every processor meets a full outbox again and again."""
RESCALES = [(3, 2), (3, 4), (2, 2), (1, 3)]
"""(processors that save, processors that restore)."""

Entry = tuple[Any, Any]


class Vertex:
    """``count`` processors of one vertex, each with its own outbox, drained after every call."""

    def __init__(self, factory: Callable[[], Processor], count: int) -> None:
        self.processors = [factory() for _ in range(count)]
        self.outboxes = [TestOutbox(1, CAPACITY) for _ in range(count)]
        self.outputs: list[list[Any]] = [[] for _ in range(count)]
        for index, (processor, outbox) in enumerate(zip(self.processors, self.outboxes, strict=True)):
            context = make_context(
                vertex_name="vertex",
                global_processor_index=index,
                local_parallelism=count,
                processing_guarantee=config.ProcessingGuarantee.EXACTLY_ONCE,
            )
            processor.init(outbox, context)

    def _drain(self, index: int, snapshot: list[Entry]) -> None:
        output: list[list[Any]] = [self.outputs[index]]
        self.outboxes[index].drain(output, snapshot)

    def _until_true(self, index: int, call: Callable[[], bool], snapshot: list[Entry] | None = None) -> None:
        for _ in range(100_000):
            saved: list[Entry] = []
            done = call()
            self._drain(index, saved)
            if snapshot is not None:
                snapshot.extend(saved)
            else:
                assert not saved, "a processor offered to the snapshot outside save_to_snapshot()"
            if done:
                return
        raise AssertionError(f"{call} never returned True")

    def feed_to(self, index: int, items: Sequence[Any], ordinal: int = 0) -> None:
        inbox = Inbox(items)
        for _ in range(100_000):
            if not inbox:
                return
            self.processors[index].process(ordinal, inbox)
            self._drain(index, [])
        raise AssertionError("process() never emptied the inbox")

    def feed(
        self, items: Sequence[Any], key_fn: Callable[[Any], Any] | None = None, ordinal: int = 0
    ) -> None:
        """Items by the partition of ``key_fn(item)`` (a partitioned edge), else round robin."""
        count = len(self.processors)
        shares: list[list[Any]] = [[] for _ in range(count)]
        for position, item in enumerate(items):
            target = position if key_fn is None else snapshot_keys.partition_of(key_fn(item), PARTITIONS)
            shares[target % count].append(item)
        for index, share in enumerate(shares):
            self.feed_to(index, share, ordinal)

    def broadcast(self, items: Sequence[Any], ordinal: int = 0) -> None:
        for index in range(len(self.processors)):
            self.feed_to(index, items, ordinal)

    def watermark(self, timestamp: int) -> None:
        mark = Watermark(timestamp)
        for index, processor in enumerate(self.processors):
            self._until_true(index, functools.partial(processor.try_process_watermark, mark))

    def snapshot(self) -> list[Entry]:
        """Every processor's entries, through pickle as a snapshot store would keep them."""
        entries: list[Entry] = []
        for index, processor in enumerate(self.processors):
            self._until_true(index, processor.save_to_snapshot, entries)
        for processor in self.processors:
            processor.close()
        restored: list[Entry] = pickle.loads(pickle.dumps(snapshot_writer.read_back_lent(entries)))
        return restored

    def complete(self) -> None:
        for index, processor in enumerate(self.processors):
            self._until_true(index, processor.complete)
            processor.close()

    def items(self) -> list[Any]:
        """What every processor emitted, without watermarks."""
        return [item for output in self.outputs for item in output if not isinstance(item, Watermark)]


def restored(factory: Callable[[], Processor], entries: list[Entry], count: int) -> Vertex:
    """``count`` fresh processors given ``entries`` by the restore rule, a few entries per call."""
    vertex = Vertex(factory, count)
    shares: list[list[Entry]] = [[] for _ in range(count)]
    for key, value in entries:
        partition = snapshot_keys.partition_or_broadcast(key, PARTITIONS)
        for target in range(count) if partition is None else [partition % count]:
            shares[target].append((key, value))
    for index, (processor, share) in enumerate(zip(vertex.processors, shares, strict=True)):
        if not share:
            continue
        for start in range(0, len(share), 3):
            processor.restore_from_snapshot(Inbox(share[start : start + 3]))
        vertex._until_true(index, processor.finish_snapshot_restore)
    return vertex


def _key(item: tuple[Any, ...]) -> Any:
    return item[0]


def _value(item: tuple[Any, ...]) -> Any:
    return item[-1]


def _pairs(n: int, seed: int, keys: int = 30) -> list[tuple[str, int]]:
    rng = random.Random(seed)
    return [(f"k{rng.randrange(keys)}", rng.randint(1, 9)) for _ in range(n)]


# -- keyed aggregation ----------------------------------------------------------
@pytest.mark.parametrize(("saved_by", "restored_into"), RESCALES)
def test_aggregate_by_key_restores_every_key_once_into_any_parallelism(
    saved_by: int, restored_into: int
) -> None:
    # given 300 (key, value) pairs, half of them summed by key by the saving processors
    items = _pairs(300, seed=saved_by * 10 + restored_into)
    factory = processors.aggregate_by_key_p(_key, summing(_value))
    before = Vertex(factory, saved_by)
    before.feed(items[:150], _key)
    # when their state is restored into another number of processors, which sum the rest
    after = restored(factory, before.snapshot(), restored_into)
    after.feed(items[150:], _key)
    after.complete()
    # then each key's sum comes out once, equal to the sum over all the pairs
    sums: defaultdict[str, int] = defaultdict(int)
    for key, value in items:
        sums[key] += value
    assert sorted(before.items() + after.items()) == sorted(sums.items())


@pytest.mark.parametrize(("saved_by", "restored_into"), RESCALES)
def test_combine_by_key_merges_partials_restored_into_any_parallelism(
    saved_by: int, restored_into: int
) -> None:
    # given partial sums (the first stage's output) arriving by key, half before the snapshot
    partials = _pairs(200, seed=7)
    factory = processors.combine_by_key_p(summing(_value))
    before = Vertex(factory, saved_by)
    before.feed(partials[:100], _key)
    after = restored(factory, before.snapshot(), restored_into)
    after.feed(partials[100:], _key)
    after.complete()
    # then every key is combined once over all its partials
    sums: defaultdict[str, int] = defaultdict(int)
    for key, value in partials:
        sums[key] += value
    assert sorted(after.items()) == sorted(sums.items())


def _keep_first(acc: Any, item: Any) -> Any:
    return item if acc is None else acc


@pytest.mark.parametrize(("saved_by", "restored_into"), RESCALES)
def test_distinct_keeps_the_first_item_of_each_key_across_a_rescale(
    saved_by: int, restored_into: int
) -> None:
    # given the planner's distinct (keep the first item per key) over numbered items, and a rescale midway
    first = AggregateOperation.with_create(lambda: None).and_accumulate(_keep_first).and_combine(_keep_first)
    items = [(key, position) for position, (key, _) in enumerate(_pairs(120, seed=3, keys=25))]
    factory = processors.aggregate_by_key_p(_key, first)
    before = Vertex(factory, saved_by)
    before.feed(items[:60], _key)
    after = restored(factory, before.snapshot(), restored_into)
    after.feed(items[60:], _key)
    after.complete()
    # then each key yields its first item of the whole input, once
    firsts: dict[str, tuple[str, int]] = {}
    for item in items:
        firsts.setdefault(item[0], item)
    assert sorted(after.items()) == sorted(firsts.items())


@pytest.mark.parametrize(("saved_by", "restored_into"), RESCALES)
def test_ungrouped_accumulate_partials_add_up_after_a_rescale(saved_by: int, restored_into: int) -> None:
    # given a first-stage count of items spread round robin, snapshot after 70 of 150
    factory = processors.accumulate_p(counting())
    before = Vertex(factory, saved_by)
    before.feed(list(range(70)))
    after = restored(factory, before.snapshot(), restored_into)
    after.feed(list(range(70, 150)))
    after.complete()
    # then the partial counts emitted (one per processor) add up to every item once
    partials = after.items()
    assert len(partials) == restored_into
    assert sum(partials) == 150


# -- windows ---------------------------------------------------------------------
BLOCK = 20


def _events(n: int, seed: int, keys: int = 7) -> list[tuple[str, int, int]]:
    """``(key, timestamp, value)`` with timestamp = position: in order, so none is late."""
    rng = random.Random(seed)
    return [(f"k{rng.randrange(keys)}", ts, rng.randint(1, 9)) for ts in range(n)]


def _timestamp(event: tuple[Any, ...]) -> int:
    ts: int = event[1]
    return ts


def _feed_blocks(vertex: Vertex, events: list[tuple[str, int, int]], first: int, stop: int) -> None:
    """Events ``first..stop-1`` in blocks, each followed by a watermark at the next block's start."""
    for start in range(first, stop, BLOCK):
        vertex.feed(events[start : min(stop, start + BLOCK)], _key)
        vertex.watermark(min(stop, start + BLOCK))


def _window_sums(
    events: list[tuple[str, int, int]], size: int, slide: int, value: Callable[[Any], int]
) -> list[datamodel.KeyedWindowResult[str, int]]:
    """Every window ``[end - size, end)`` (``end`` a multiple of ``slide``) of every key that has data."""
    sums: defaultdict[tuple[int, str], int] = defaultdict(int)
    for event in events:
        key, ts = event[0], event[1]
        first_end = ts - ts % slide + slide
        for end in range(first_end, ts + size + 1, slide):
            if end - size <= ts < end:
                sums[(end, key)] += value(event)
    return sorted(
        datamodel.KeyedWindowResult(end - size, end, key, total) for (end, key), total in sums.items()
    )


@pytest.mark.parametrize(("saved_by", "restored_into"), RESCALES)
def test_sliding_window_frames_restore_into_any_parallelism(saved_by: int, restored_into: int) -> None:
    # given a 30-wide window sliding by 10 summing values by key (the deduct path), snapshot after 110 of 240
    events = _events(240, seed=saved_by + 5 * restored_into)
    policy = event_time.sliding_win_policy(30, 10)
    factory = processors.aggregate_to_sliding_window_p(_key, _timestamp, policy, summing(_value))
    before = Vertex(factory, saved_by)
    _feed_blocks(before, events, 0, 110)
    after = restored(factory, before.snapshot(), restored_into)
    after.feed([("late", 50, 5)], _key)  # its windows were emitted before the snapshot: dropped
    _feed_blocks(after, events, 110, len(events))
    after.complete()
    # then every window of every key comes out once, with the sum over all its events
    assert sorted(before.items() + after.items()) == _window_sums(events, 30, 10, _value)
    assert sum(p.metrics()["lateEventsDropped"] for p in after.processors) == 1


@pytest.mark.parametrize(("saved_by", "restored_into"), RESCALES)
def test_tumbling_window_counts_restore_into_any_parallelism(saved_by: int, restored_into: int) -> None:
    # given 25-wide tumbling windows counting by key (the Counter path), snapshot mid-window after 130
    events = _events(260, seed=11)
    factory = processors.aggregate_to_sliding_window_p(
        _key, _timestamp, event_time.tumbling_win_policy(25), counting()
    )
    before = Vertex(factory, saved_by)
    _feed_blocks(before, events, 0, 130)
    after = restored(factory, before.snapshot(), restored_into)
    _feed_blocks(after, events, 130, len(events))
    after.complete()
    assert sorted(before.items() + after.items()) == _window_sums(events, 25, 25, lambda _e: 1)


@pytest.mark.parametrize(("saved_by", "restored_into"), RESCALES)
def test_two_stage_window_frames_restore_into_any_parallelism(saved_by: int, restored_into: int) -> None:
    # given the first stage (frames of 10 counted by key) and the second (windows of 3 frames), each
    # rescaled after 90 of 200 events
    events = _events(200, seed=2)
    policy = event_time.sliding_win_policy(30, 10)
    first_factory = processors.accumulate_by_frame_p(_key, _timestamp, policy, counting())
    first = Vertex(first_factory, saved_by)
    _feed_blocks(first, events, 0, 90)
    first_after = restored(first_factory, first.snapshot(), restored_into)
    _feed_blocks(first_after, events, 90, len(events))
    first_after.complete()
    frames = sorted(first.items() + first_after.items())
    # then the first stage emitted one frame per key and frame, with the count of its events
    counts = Counter((ts - ts % 10 + 10, key) for key, ts, _ in events)
    assert frames == sorted(datamodel.TimestampedEntry(end, key, n) for (end, key), n in counts.items())
    # and when the second stage combines those frames, rescaled midway, the windows equal plain Python's
    second_factory = processors.combine_to_sliding_window_p(policy, counting())
    second = Vertex(second_factory, saved_by)
    middle = [frame for frame in frames if frame.timestamp <= 100]
    second.feed(middle, _entry_key)
    second.watermark(100)
    second_after = restored(second_factory, second.snapshot(), restored_into)
    second_after.feed([frame for frame in frames if frame.timestamp > 100], _entry_key)
    second_after.complete()
    windows = sorted(second.items() + second_after.items())
    assert windows == _window_sums(events, 30, 10, lambda _e: 1)


def _entry_key(entry: datamodel.TimestampedEntry[str, int]) -> str:
    return entry.key


# -- session windows ---------------------------------------------------------------
def _session_events(n: int, seed: int) -> list[tuple[str, int, int]]:
    """``(key, timestamp, 1)``, timestamps rising by 0..6: sessions of timeout 10 break now and then."""
    rng = random.Random(seed)
    ts = 0
    events = []
    for _ in range(n):
        ts += rng.choice([0, 1, 2, 3, 6])
        events.append((f"k{rng.randrange(5)}", ts, 1))
    return events


def _sessions(
    events: list[tuple[str, int, int]], timeout: int
) -> list[datamodel.KeyedWindowResult[str, int]]:
    """Per key: runs of events less than ``timeout`` apart, as ``[first, last + timeout)`` with a count."""
    by_key: defaultdict[str, list[int]] = defaultdict(list)
    for key, ts, _ in events:
        by_key[key].append(ts)
    out = []
    for key, stamps in by_key.items():
        stamps.sort()
        start, last, count = stamps[0], stamps[0], 0
        for ts in stamps:
            if ts >= last + timeout:
                out.append(datamodel.KeyedWindowResult(start, last + timeout, key, count))
                start, count = ts, 0
            last, count = ts, count + 1
        out.append(datamodel.KeyedWindowResult(start, last + timeout, key, count))
    return sorted(out)


@pytest.mark.parametrize(("saved_by", "restored_into"), RESCALES)
def test_session_windows_restore_into_any_parallelism(saved_by: int, restored_into: int) -> None:
    # given sessions (timeout 10) counted by key, with open sessions at the snapshot after 150 of 300 events
    events = _session_events(300, seed=saved_by * 3 + restored_into)
    factory = processors.aggregate_to_session_window_p(10, _key, _timestamp, counting())
    before = Vertex(factory, saved_by)
    after_cut = 150
    for start in range(0, after_cut, BLOCK):
        block = events[start : min(after_cut, start + BLOCK)]
        before.feed(block, _key)
        before.watermark(events[min(after_cut, start + BLOCK)][1])  # the next event's time: none is late
    after = restored(factory, before.snapshot(), restored_into)
    late = ("late", events[after_cut][1] - 2 * 10, 1)  # behind the restored watermark: dropped
    after.feed([late], _key)
    for start in range(after_cut, len(events), BLOCK):
        after.feed(events[start : start + BLOCK], _key)
        if start + BLOCK < len(events):
            after.watermark(events[start + BLOCK][1])
    after.complete()
    # then every session comes out once, as plain Python splits them
    assert sorted(before.items() + after.items()) == _sessions(events, 10)
    assert sum(p.metrics()["lateEventsDropped"] for p in after.processors) == 1


# -- stateful map with a TTL ---------------------------------------------------------
TTL = 15


def _count_item(state: list[int], key: str, item: tuple[str, int]) -> tuple[str, int]:
    state[0] += 1
    return (key, state[0])


def _on_evict(state: list[int], key: str, watermark: int) -> tuple[str, str, int]:
    return (key, "evicted", state[0])


def _stateful_reference(steps: list[tuple[str, Any]]) -> Counter[Any]:
    """The outputs of a running count per key with eviction ``TTL`` after a key's latest event."""
    states: dict[str, list[int]] = {}  # key -> [count, latest timestamp]
    out: Counter[Any] = Counter()
    for kind, value in steps:
        if kind == "events":
            for ts, (key, _) in value:
                slot = states.setdefault(key, [0, ts])
                slot[0], slot[1] = slot[0] + 1, max(slot[1], ts)
                out[(ts, (key, slot[0]))] += 1
        else:
            for key in [k for k, slot in states.items() if slot[1] < value - TTL]:
                out[(value, (key, "evicted", states.pop(key)[0]))] += 1
    return out


@pytest.mark.parametrize(("saved_by", "restored_into"), RESCALES)
def test_stateful_map_with_ttl_restores_into_any_parallelism(saved_by: int, restored_into: int) -> None:
    # given timestamped events whose keys go quiet for a while, and watermarks that evict quiet keys
    rng = random.Random(saved_by + restored_into)
    steps: list[tuple[str, Any]] = []
    ts = 0
    for block in range(12):
        keys = [f"k{k}" for k in range(12) if (k + block) % 4 != 0]  # a key skips every fourth block
        events = []
        for _ in range(15):
            ts += rng.randint(0, 1)
            events.append((ts, (rng.choice(keys), 1)))
        steps += [("events", events), ("watermark", ts)]
    factory = stateful.stateful_p(
        stateful.MAP, _key, lambda: [0], _count_item, timestamped=True, ttl=TTL, on_evict_fn=_on_evict
    )

    def run(vertex: Vertex, part: list[tuple[str, Any]]) -> None:
        for kind, value in part:
            if kind == "events":
                vertex.feed(value, lambda event: event[1][0])
            else:
                vertex.watermark(value)

    # when half of the steps run before the snapshot, and the rest after a rescale
    before = Vertex(factory, saved_by)
    run(before, steps[:12])
    after = restored(factory, before.snapshot(), restored_into)
    run(after, steps[12:])
    after.complete()
    # then running counts continue across the restore and each quiet key is evicted once
    assert Counter(before.items() + after.items()) == _stateful_reference(steps)


# -- hash join, sort, insert watermarks ----------------------------------------------
@pytest.mark.parametrize(("saved_by", "restored_into"), RESCALES)
def test_hash_join_build_side_restores_one_table_per_processor(saved_by: int, restored_into: int) -> None:
    # given a build side with repeated keys (a many-to-many join) broadcast to every processor
    rng = random.Random(4)
    users = [(rng.randrange(20), f"name{n}") for n in range(40)]
    orders = [(f"o{n}", rng.randrange(25)) for n in range(90)]
    factory = processors.hash_join_p(
        processors.JoinClause.join_map_entries(_value), lambda order, name: (order[0], name)
    )
    before = Vertex(factory, saved_by)
    before.broadcast(users, ordinal=1)
    before.feed(orders[:30], ordinal=0)
    # when the tables are restored into another number of processors, which join the rest
    after = restored(factory, before.snapshot(), restored_into)
    after.feed(orders[30:], ordinal=0)
    after.complete()
    # then each order is joined with each matching user once (an outer join: None without one)
    names: defaultdict[int, list[str | None]] = defaultdict(list)
    for user_id, name in users:
        names[user_id].append(name)
    expected = [(order, name) for order, user in orders for name in names.get(user) or [None]]
    assert sorted(before.items() + after.items(), key=repr) == sorted(expected, key=repr)


@pytest.mark.parametrize(("saved_by", "restored_into"), [*RESCALES, (1, 1)])
def test_sort_restores_each_item_once_and_sorts_each_share(saved_by: int, restored_into: int) -> None:
    # given items collected round robin by the saving processors
    rng = random.Random(6)
    items = [rng.randrange(1000) for _ in range(3000)]  # more than one snapshot chunk per processor
    factory = processors.sort_p()
    before = Vertex(factory, saved_by)
    before.feed(items[:2500])
    after = restored(factory, before.snapshot(), restored_into)
    after.feed(items[2500:])
    after.complete()
    # then every item comes out once, and each processor emits its share in order
    assert not before.items()
    assert Counter(after.items()) == Counter(items)
    assert all(output == sorted(output) for output in after.outputs)
    if restored_into == 1:
        assert after.outputs[0] == sorted(items)


def _insert_reference(top: int | None, last: int | None, stamps: list[int], lag: int) -> list[Any]:
    """What one insert-watermarks processor emits for ``stamps`` from state ``(top, last)``."""
    out: list[Any] = []
    for ts in stamps:
        if last is not None and ts < last:
            continue
        out.append((ts, ts))
        if top is None or ts > top:
            top = ts
            if last is None or ts - lag > last:
                last = ts - lag
                out.append(Watermark(last))
    return out


@pytest.mark.parametrize(("saved_by", "restored_into"), [(3, 2), (3, 4), (2, 2)])
def test_insert_watermarks_resume_from_the_lowest_saved_watermark(saved_by: int, restored_into: int) -> None:
    # given processors that saw different times, so their watermarks differ (lag 2)
    policy = event_time.EventTimePolicy(timestamp_fn=lambda ts: ts, allowed_lag=2)
    factory = processors.insert_watermarks_p(policy)
    before = Vertex(factory, saved_by)
    for index in range(saved_by):
        before.feed_to(index, [10 * (index + 1), 10 * (index + 1) - 5])
    tops = [10 * (index + 1) for index in range(saved_by)]
    # when restored into another number of processors, which get old and new times
    after = restored(factory, before.snapshot(), restored_into)
    later = [[5, 7, 9, 8, 12, 30 + index, 31] for index in range(restored_into)]
    for index, stamps in enumerate(later):
        after.feed_to(index, stamps)
    # then each resumes from the lowest saved top and watermark: nothing below it, nothing emitted twice
    for index, stamps in enumerate(later):
        assert after.outputs[index] == _insert_reference(min(tops), min(tops) - 2, stamps, 2)


def test_a_first_stage_processor_without_a_watermark_keeps_its_frame_across_a_restore() -> None:
    # given two first-stage processors (frames of 10 counted by key) when the first snapshot is taken:
    # processor 0 had its watermark and emitted frame 10; processor 1 (its member slow to start) holds
    # frame 10 and has seen no watermark yet
    factory = processors.accumulate_by_frame_p(
        _key, _timestamp, event_time.tumbling_win_policy(10), counting()
    )
    before = Vertex(factory, 2)
    before.feed_to(0, [("a", 1, 1), ("a", 2, 1)])
    before.feed_to(1, [("a", 3, 1), ("b", 4, 1)])
    mark = Watermark(10)
    before._until_true(0, functools.partial(before.processors[0].try_process_watermark, mark))
    # when the job restarts from that snapshot on one processor
    after = restored(factory, before.snapshot(), 1)
    after.watermark(10)
    after.complete()
    # then processor 1's part of frame 10 comes out too: every event counted once
    # (before: the restore took next_win 20 from processor 0 alone and dropped processor 1's frame)
    entry = datamodel.TimestampedEntry
    frames = sorted(before.items() + after.items(), key=repr)
    assert frames == sorted([entry(10, "a", 2), entry(10, "a", 1), entry(10, "b", 1)], key=repr)
