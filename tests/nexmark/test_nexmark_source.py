"""``nexmark_source`` and queries 0-2 in real jobs, checked against the generator in plain Python."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import jetlet
from jetlet import config
from jetlet import job as job_mod
from jetlet.core import processor as proc
from jetlet.core.processors.sources import SlicePosition, StridedCursor
from jetlet.core.snapshot_keys import ProcessorKey
from jetlet.errors import JobCancelledError
from jetlet.nexmark import (
    AuctionPrice,
    Bid,
    GeneratorConfig,
    events,
    nexmark_source,
    q0_pass_through,
    q1_currency_conversion,
    q2_selection,
    q5_hot_items,
    source,
)
from jetlet.pipeline import Pipeline, Sinks
from jetlet.testing import TestOutbox, make_context, verify_processor, wait_until

COUNT = 3_000
JOIN_TIMEOUT_S = 30
DEADLINE_S = 30
# a small auction skip and no hot auctions (with consecutive seeds, Java's first draw stays the same over
# thousands of ids, as in Beam), so that query 2 selects a fair number of bids from a few thousand events
SKIP = 7
CONFIG = GeneratorConfig(auction_skip=SKIP, hot_auction_ratio=1)


@pytest.fixture
def jet() -> Iterator[jetlet.EmbeddedInstance]:
    with jetlet.embedded() as instance:
        yield instance


def wait_while_running(job: job_mod.Job, condition: Callable[[], bool]) -> None:
    """Wait until ``condition`` is false or the job ends (the test then checks what it produced)."""
    wait_until(
        lambda: not condition() or job.future.done(), "the job produced what the test awaits", DEADLINE_S
    )


def run_until(jet: jetlet.EmbeddedInstance, pipeline: Pipeline, sizes: dict[str, int]) -> None:
    """Run ``pipeline`` until every named list has its size, then cancel it (the source is a stream)."""
    job = jet.new_job(pipeline)
    wait_while_running(job, lambda: any(len(jet.get_list(name)) < size for name, size in sizes.items()))
    job.cancel()
    with pytest.raises(JobCancelledError):
        job.join(timeout=JOIN_TIMEOUT_S)


def test_queries_0_1_2_over_a_distributed_source_match_plain_python(jet: jetlet.EmbeddedInstance) -> None:
    # given the expected results, computed in plain Python over the generator's events
    generated = list(events(0, COUNT, 1, CONFIG))
    bids = [item for item in generated if isinstance(item, Bid)]
    expected_q1 = [Bid(b.auction, b.bidder, b.price * 89 // 100, b.date_time, b.extra) for b in bids]
    expected_q2 = [AuctionPrice(b.auction, b.price) for b in bids if b.auction % SKIP == 0]
    assert expected_q2, "the test needs some selected bids"
    # and a pipeline reading 2 source processors with native timestamps into the three queries
    p = Pipeline()
    stage = p.read_from(nexmark_source(CONFIG, count=COUNT, local_parallelism=2)).with_native_timestamps(0)
    q0_pass_through(stage).write_to(Sinks.list("q0"))
    q1_currency_conversion(stage).write_to(Sinks.list("q1"))
    q2_selection(stage, SKIP).write_to(Sinks.list("q2"))
    # when it runs until every result arrived
    run_until(jet, p, {"q0": COUNT, "q1": len(expected_q1), "q2": len(expected_q2)})
    # then each query produced exactly the plain-Python results, each once
    assert collections.Counter(jet.get_list("q0")) == collections.Counter(generated)
    assert collections.Counter(jet.get_list("q1")) == collections.Counter(expected_q1)
    assert collections.Counter(jet.get_list("q2")) == collections.Counter(expected_q2)


def test_a_paced_source_emits_no_faster_than_its_rate(jet: jetlet.EmbeddedInstance) -> None:
    # given a source of 300 events paced at 1,500 events per second (at least 0.2 s)
    p = Pipeline()
    p.read_from(nexmark_source(count=300, rate=1500)).with_native_timestamps(0).write_to(Sinks.list("out"))
    # when it runs until every event arrived
    started = time.monotonic()
    run_until(jet, p, {"out": 300})
    elapsed = time.monotonic() - started
    # then it took at least the paced time, and emitted the events in number order
    assert elapsed >= 0.19
    assert jet.get_list("out") == list(events(0, 300))


def test_a_paced_slice_lets_out_the_events_due_by_the_last_whole_tick() -> None:
    # given a slice of 1 of 1 paced at 100,000 events per second, on a clock we move
    now = [0.0]
    paced = source._Slice(lambda numbers: [], StridedCursor(0, 1), None, 100_000.0, 0.0, clock=lambda: now[0])
    # then at the start only number 0 is due; within the first tick no more; after one tick 100 more
    assert paced.due_stop() == 1
    now[0] = source.PACE_TICK_S * 0.99
    assert paced.due_stop() == 1
    now[0] = source.PACE_TICK_S * 1.01
    assert paced.due_stop() == 101
    now[0] = source.PACE_TICK_S * 250.5
    assert paced.due_stop() == 25_001
    # and a count bounds it whatever the time
    bounded = source._Slice(lambda numbers: [], StridedCursor(0, 1), 7, 100_000.0, 0.0, clock=lambda: now[0])
    assert bounded.due_stop() == 7


def new_processor(supplier: proc.ProcessorMetaSupplier, outbox: TestOutbox) -> proc.Processor:
    context = make_context(
        global_processor_index=1,
        local_parallelism=2,
        processing_guarantee=config.ProcessingGuarantee.EXACTLY_ONCE,
    )
    made = verify_processor(supplier).context(context).new_processor()
    made.init(outbox, context)
    return made


def run_calls(
    call: Callable[[], bool], outbox: TestOutbox, emitted: list[Any], times: int, until_size: int = -1
) -> None:
    """Call ``call`` ``times`` times, until it returns True or ``emitted`` has ``until_size`` items."""
    for _ in range(times):
        done = call()
        emitted.extend(outbox.buckets[0])
        outbox.buckets[0] = []
        if done or len(emitted) == until_size:
            return


def test_the_source_resumes_its_slice_from_a_snapshot() -> None:
    # given processor 1 of 2 of a 2,400-event source, run part of the way through an outbox of 3
    supplier = nexmark_source(count=2_400, local_parallelism=2).supplier
    outbox = TestOutbox(1, 3)
    first = new_processor(supplier, outbox)
    emitted: list[Any] = []
    run_calls(first.complete, outbox, emitted, 10)
    # when it saves a snapshot, and a fresh processor restores from it and another processor's entry
    run_calls(first.save_to_snapshot, outbox, emitted, 1_000)
    snapshot = list(outbox.snapshot_bucket)
    outbox.snapshot_bucket.clear()
    first.close()
    ((key, position),) = snapshot
    assert key == ProcessorKey(key.tag, 1) and 1 < position.next < 2_400
    second = new_processor(supplier, outbox)
    other = (ProcessorKey(key.tag, 0), SlicePosition(0, 2, 2_398))
    second.restore_from_snapshot(jetlet.core.Inbox([*snapshot, other]))
    assert second.finish_snapshot_restore()
    run_calls(second.complete, outbox, emitted, 1_000, until_size=1_200)
    second.close()
    # then its slice came out once, with no gap or repeat, each event with its event time
    assert emitted == [(item.date_time, item) for item in events(1, 2_400, 2)]


def plain_hot_items(
    bids: list[Bid], window_ms: int, slide_ms: int, top: int
) -> dict[int, list[tuple[int, int]]]:
    """Query 5 by brute force: for each window end, the ``top`` auctions by bids (ties: the higher id)."""
    ends: dict[int, collections.Counter[int]] = collections.defaultdict(collections.Counter)
    for bid in bids:
        first_end = bid.date_time - bid.date_time % slide_ms + slide_ms
        for end in range(first_end, first_end + window_ms, slide_ms):
            ends[end][bid.auction] += 1
    return {
        end: [(auction, n) for n, auction in sorted(((n, a) for a, n in counts.items()), reverse=True)[:top]]
        for end, counts in ends.items()
    }


def test_query_5_hot_items_matches_plain_python(jet: jetlet.EmbeddedInstance) -> None:
    # given 3,000 events (0.3 s of event time), a 100 ms window sliding by 20 ms, the top 3 auctions
    window_ms, slide_ms, top = 100, 20, 3
    bids = [item for item in events(0, COUNT, 1, CONFIG) if isinstance(item, Bid)]
    expected = plain_hot_items(bids, window_ms, slide_ms, top)
    # the stream does not end, so only windows the watermark closes come out: those of whole slides
    last_time = max(b.date_time for b in bids)
    closed = {
        end: best for end, best in expected.items() if end + slide_ms <= last_time - last_time % slide_ms
    }
    assert len(closed) >= 5
    p = Pipeline()
    stage = p.read_from(nexmark_source(CONFIG, count=COUNT, local_parallelism=2)).with_native_timestamps(0)
    q5_hot_items(stage, window_ms, slide_ms, top).write_to(Sinks.list("q5"))
    # when it runs until those windows are out
    run_until(jet, p, {"q5": len(closed)})
    # then each closed window's top auctions are the plain-Python ones
    got = dict(jet.get_list("q5"))
    assert {end: got[end] for end in closed} == closed
