"""Streaming pipelines with event time: windows per key and global against a plain-Python reference.

The input is out of order within the allowed lag, plus a few events far
behind: those are *late* (their time is below the watermark when they
arrive), must be dropped, and must be counted in the job's
``lateEventsDropped`` metric. The reference replays the same watermark rule
(top timestamp seen minus the allowed lag) to know which events are late,
then aggregates every window by brute force.
"""

from __future__ import annotations

import collections
import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import jetlet
from jetlet.aggregate import counting, summing, to_list
from jetlet.datamodel import KeyedWindowResult, WindowResult
from jetlet.pipeline import Pipeline, Sinks, Sources, StreamStage, WindowDefinition

LAG = 400
Event = tuple[int, int, int]  # (timestamp, key, value)


def make_events(count: int = 4000, keys: int = 20, seed: int = 5) -> list[Event]:
    rng = random.Random(seed)
    events = [(i * 10 + rng.randrange(0, 300), rng.randrange(keys), rng.randrange(100)) for i in range(count)]
    for position in range(500, count, 700):  # far behind the watermark: late
        ts = events[position][0] - 5 * LAG
        events.insert(position, (ts, rng.randrange(keys), 1000))
    return events


EVENTS = make_events()


def split_late(events: list[Event], lag: int) -> tuple[list[Event], list[Event]]:
    """The watermark rule of insert_watermarks: an event below (top seen - lag) is late."""
    on_time, late = [], []
    top = None
    for event in events:
        watermark = None if top is None else top - lag
        if watermark is not None and event[0] < watermark:
            late.append(event)
            continue
        on_time.append(event)
        top = event[0] if top is None else max(top, event[0])
    return on_time, late


def sliding_reference(
    events: list[Event], size: int, slide: int, value: Callable[[Event], int], keyed: bool
) -> collections.Counter[Any]:
    """Every window containing at least one event, with its aggregated value (brute force)."""
    sums: dict[tuple[int, Any], int] = collections.defaultdict(int)
    for event in events:
        ts = event[0]
        first_start = (ts - size) // slide * slide + slide
        for start in range(first_start, ts + 1, slide):
            if start <= ts < start + size:
                sums[(start, event[1] if keyed else None)] += value(event)
    if keyed:
        return collections.Counter(KeyedWindowResult(s, s + size, k, v) for (s, k), v in sums.items())
    return collections.Counter(WindowResult(s, s + size, v) for (s, _), v in sums.items())


def session_reference(events: list[Event], gap: int) -> collections.Counter[Any]:
    by_key: dict[int, list[int]] = collections.defaultdict(list)
    for ts, key, _ in events:
        by_key[key].append(ts)
    out: collections.Counter[Any] = collections.Counter()
    for key, stamps in by_key.items():
        stamps.sort()
        start, end, count = stamps[0], stamps[0] + gap, 0
        for ts in stamps:
            if ts >= end:
                out[KeyedWindowResult(start, end, key, count)] += 1
                start, count = ts, 0
            end = max(end, ts + gap)
            count += 1
        out[KeyedWindowResult(start, end, key, count)] += 1
    return out


def source(events: list[Event]) -> Any:
    def generate(context: Any) -> Iterator[Event]:
        if context.global_processor_index == 0:
            yield from events

    return Sources.stream_from_generator(generate, name="events")


def spread(p: Pipeline, events: list[Event], lp: int) -> StreamStage[Event]:
    """``events`` timestamped by their first field (``LAG`` allowed), then spread over ``lp`` processors."""
    return (
        p.read_from(source(events))
        .with_timestamps(lambda e: e[0], allowed_lag=LAG)
        .map(lambda e: e)
        .set_local_parallelism(lp)
    )


def late_dropped(job: Any) -> int:
    return sum(counters.get("lateEventsDropped", 0) for counters in job.metrics().values())


@pytest.mark.parametrize("lp", [1, 4])
@pytest.mark.parametrize(("size", "slide"), [(1000, 1000), (2000, 250)])
def test_keyed_sliding_and_tumbling_windows_count_like_the_reference(
    jet: jetlet.EmbeddedInstance, lp: int, size: int, slide: int
) -> None:
    # given out-of-order events with a few late ones
    p = Pipeline()
    (
        spread(p, EVENTS, lp)
        .grouping_key(lambda e: e[1])
        .window(WindowDefinition.sliding(size, slide))
        .aggregate(counting())
        .write_to(Sinks.list("windows"))
    )
    # when the job runs to the end of the stream
    job = jet.new_job(p)
    job.join(timeout=60)
    # then every window of every key holds the count of its on-time events
    on_time, late = split_late(EVENTS, LAG)
    assert late, "the input must contain late events for this test to mean something"
    expected = sliding_reference(on_time, size, slide, lambda e: 1, keyed=True)
    assert collections.Counter(jet.get_list("windows")) == expected
    # and the late events were dropped and counted
    assert late_dropped(job) == len(late)


@pytest.mark.parametrize("lp", [1, 4])
def test_global_window_sums_like_the_reference(jet: jetlet.EmbeddedInstance, lp: int) -> None:
    p = Pipeline()
    (
        spread(p, EVENTS, lp)
        .window(WindowDefinition.sliding(3000, 1000))
        .aggregate(summing(lambda e: e[2]))
        .write_to(Sinks.list("windows"))
    )
    jet.new_job(p).join(timeout=60)
    on_time, _ = split_late(EVENTS, LAG)
    assert collections.Counter(jet.get_list("windows")) == sliding_reference(
        on_time, 3000, 1000, lambda e: e[2], keyed=False
    )


@pytest.mark.parametrize("lp", [1, 4])
def test_session_windows_per_key_like_the_reference(jet: jetlet.EmbeddedInstance, lp: int) -> None:
    sparse = make_events(count=1500, keys=30, seed=9)
    p = Pipeline()
    (
        spread(p, sparse, lp)
        .grouping_key(lambda e: e[1])
        .window(WindowDefinition.session(150))
        .aggregate(counting())
        .write_to(Sinks.list("sessions"))
    )
    jet.new_job(p).join(timeout=60)
    on_time, _ = split_late(sparse, LAG)
    assert collections.Counter(jet.get_list("sessions")) == session_reference(on_time, 150)


def test_windowed_co_aggregation_and_distinct(jet: jetlet.EmbeddedInstance) -> None:
    evens = [e for e in EVENTS if e[2] % 2 == 0]
    odds = [e for e in EVENTS if e[2] % 2 == 1]
    p = Pipeline()
    a = p.read_from(source(evens)).with_timestamps(lambda e: e[0], allowed_lag=10 * LAG)
    b = p.read_from(source(odds)).with_timestamps(lambda e: e[0], allowed_lag=10 * LAG)
    window = WindowDefinition.tumbling(5000)
    a.window(window).aggregate2(counting(), b, summing(lambda e: e[2])).write_to(Sinks.list("co"))
    a.map(lambda e: e[1]).window(window).distinct().write_to(Sinks.list("distinct"))
    jet.new_job(p).join(timeout=60)
    count_a = sliding_reference(evens, 5000, 5000, lambda e: 1, keyed=False)
    sum_b = sliding_reference(odds, 5000, 5000, lambda e: e[2], keyed=False)
    counts = {(w.start, w.end): w.result for w in count_a}
    sums = {(w.start, w.end): w.result for w in sum_b}
    expected = {
        bounds: (counts.get(bounds, 0), sums.get(bounds, 0)) for bounds in counts.keys() | sums.keys()
    }
    assert {(w.start, w.end): w.result for w in jet.get_list("co")} == expected
    distinct_per_window = {(s // 5000) * 5000: set() for s, _, _ in evens}
    for ts, key, _ in evens:
        distinct_per_window[ts // 5000 * 5000].add(key)
    assert collections.Counter(jet.get_list("distinct")) == collections.Counter(
        key for keys in distinct_per_window.values() for key in keys
    )


@pytest.mark.parametrize("lp", [1, 4])
@pytest.mark.parametrize(("size", "slide"), [(1000, 1000), (2000, 250)])
def test_keyed_windows_of_collected_items_run_in_one_stage_and_hold_every_on_time_item(
    jet: jetlet.EmbeddedInstance, lp: int, size: int, slide: int
) -> None:
    # given keyed windows that collect their items (to_list) and co-collect two inputs
    p = Pipeline()
    events = spread(p, EVENTS, lp)
    evens = events.filter(lambda e: e[2] % 2 == 0).grouping_key(lambda e: e[1])
    odds = events.filter(lambda e: e[2] % 2 == 1).grouping_key(lambda e: e[1])
    window = WindowDefinition.sliding(size, slide)
    events.grouping_key(lambda e: e[1]).window(window).aggregate(to_list()).write_to(Sinks.list("lists"))
    evens.window(window).aggregate2(to_list(), odds, to_list()).write_to(Sinks.list("pairs"))
    # when planned, then no window has a first stage: a frame's list would carry the same items
    names = [vertex.name for vertex in p.to_dag().vertices()]
    assert not [name for name in names if name.endswith("-prepare")], names
    # and when the job runs to the end, every window of every key holds exactly its on-time items
    job = jet.new_job(p)
    job.join(timeout=60)
    on_time, late = split_late(EVENTS, LAG)
    expected: dict[tuple[int, int], list[Event]] = collections.defaultdict(list)
    for event in on_time:
        first_start = (event[0] - size) // slide * slide + slide
        for start in range(first_start, event[0] + 1, slide):
            expected[(start, event[1])].append(event)
    lists = {(w.start, w.key): sorted(w.result) for w in jet.get_list("lists")}
    assert lists == {bounds: sorted(items) for bounds, items in expected.items()}
    pairs = {(w.start, w.key): tuple(sorted(part) for part in w.result) for w in jet.get_list("pairs")}
    assert pairs == {
        bounds: (sorted(e for e in items if e[2] % 2 == 0), sorted(e for e in items if e[2] % 2 == 1))
        for bounds, items in expected.items()
    }
    assert late_dropped(job) >= len(late)


def test_window_on_a_stage_without_timestamps_is_refused_naming_it() -> None:
    p = Pipeline()
    stage = p.read_from(source(EVENTS)).without_timestamps().map(lambda e: e).set_name("raw")
    with pytest.raises(ValueError, match="stage 'raw' has no timestamps"):
        stage.window(WindowDefinition.tumbling(10))


def test_stream_stateful_ttl_evicts_and_reports(jet: jetlet.EmbeddedInstance) -> None:
    # given per-key running counts whose state expires 1 s of event time after the key's last event
    def count(state: list[int], _key: int, _event: Event) -> None:
        state[0] += 1

    def on_evict(state: list[int], key: int, _watermark: int) -> tuple[int, int]:
        return (key, state[0])

    on_time, _ = split_late(EVENTS, LAG)
    p = Pipeline()
    (
        p.read_from(source(EVENTS))
        .with_timestamps(lambda e: e[0], allowed_lag=LAG)
        .grouping_key(lambda e: e[1] if e[0] < 20_000 else e[1] + 100)
        .map_stateful(lambda: [0], count, ttl=1000, on_evict_fn=on_evict)
        .write_to(Sinks.list("evicted"))
    )
    jet.new_job(p).join(timeout=60)
    # then keys that went quiet at 20 s were evicted, and the counts of their evicted states
    # (a key quiet for longer than the ttl is evicted, then starts afresh) add up to its events
    expected = collections.Counter(e[1] for e in on_time if e[0] < 20_000)
    evicted: collections.Counter[int] = collections.Counter()
    for key, count_ in jet.get_list("evicted"):
        if key < 100:
            evicted[key] += count_
    assert evicted == expected
