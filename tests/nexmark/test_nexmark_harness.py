"""The NEXMark benchmark harness: fast generator, fast source, percentiles, runs, report, plain loops."""

from __future__ import annotations

import argparse
import collections
import math
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import jetlet
from jetlet import config
from jetlet.core import processor as proc
from jetlet.core.processors.sources import SlicePosition
from jetlet.core.snapshot_keys import ProcessorKey
from jetlet.nexmark import fast_generator, joins, queries
from jetlet.nexmark.bench import harness, jobs, latency, plain, report, throughput
from jetlet.nexmark.fast_source import fast_nexmark_source
from jetlet.nexmark.model import Auction, AuctionBid, Bid, Event, Person
from jetlet.pipeline import Pipeline, Sinks, Sources, StreamStage
from jetlet.testing import TestOutbox, make_context, verify_processor, wait_until

DEADLINE_S = 30.0


@pytest.fixture
def jet() -> Iterator[jetlet.EmbeddedInstance]:
    with jetlet.embedded() as instance:
        yield instance


# -- percentiles ------------------------------------------------------------------------------


def reference_percentile(samples: list[float], p: float) -> float:
    """The least sample with at least ``p`` % of the samples at or below it (by counting)."""
    return min(v for v in samples if sum(1 for w in samples if w <= v) * 100 >= p * len(samples))


@pytest.mark.parametrize("size", [1, 7, 100, 1_001])
def test_percentiles_are_the_nearest_rank_of_the_sorted_samples(size: int) -> None:
    # given random samples with repeats
    draw = random.Random(size)
    samples = [float(draw.randrange(50)) for _ in range(size)]
    # when summarized
    summary = latency.summarize(list(samples))
    # then every percentile is the counting reference's
    assert summary == {p: reference_percentile(samples, p) for p in latency.PERCENTILES}


def test_a_percentile_of_nothing_or_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="no samples"):
        latency.percentile([], 50)
    with pytest.raises(ValueError, match="percentile"):
        latency.percentile([1.0], 0)
    assert latency.summarize([]) == {}


# -- the fast generator -----------------------------------------------------------------------


def test_the_fast_generator_keeps_1_3_46_its_keys_and_its_times() -> None:
    # given 50,000 consecutive events from number 40,000 (crossing the block boundary at 65,536)
    cfg = fast_generator.FastConfig(rate=10_000, base_time=1_000_000, keys=100)
    numbers = range(40_000, 90_000)
    events = fast_generator.fast_events(numbers, cfg)
    # then the kinds are 1:3:46, every id is one of the 100 keys and all keys occur
    kinds = collections.Counter(type(e) for e in events)
    assert kinds == {Person: 1_000, Auction: 3_000, Bid: 46_000}
    bids = [e for e in events if isinstance(e, Bid)]
    auctions = {b.auction for b in bids}
    bidders = {b.bidder for b in bids}
    assert auctions == set(range(1000, 1100)) and bidders == set(range(1000, 1100))
    assert all(1000 <= e.id < 1100 for e in events if isinstance(e, Person | Auction))
    # and the event time is the deterministic function of the number
    assert [e.date_time for e in events] == [1_000_000 + n * 1000 // 10_000 for n in numbers]


@pytest.mark.parametrize("step", [1, 3])
def test_fast_events_equal_event_by_event_generation_and_are_deterministic(step: int) -> None:
    # given a strided slice crossing a block boundary
    cfg = fast_generator.FastConfig()
    numbers = range(65_000 + step - 1, 67_000, step)
    # when made in a batch, twice, and one at a time
    batch = fast_generator.fast_events(numbers, cfg)
    # then all agree (a list of numbers takes the slow path, which must agree too)
    assert batch == fast_generator.fast_events(numbers, cfg)
    assert batch == [fast_generator.fast_event(n, cfg) for n in numbers]
    assert batch == fast_generator.fast_events(list(numbers), cfg)


def test_the_fast_config_refuses_bad_values() -> None:
    with pytest.raises(ValueError, match="rate"):
        fast_generator.FastConfig(rate=0)
    with pytest.raises(ValueError, match="keys"):
        fast_generator.FastConfig(keys=-1)


# -- the fast source --------------------------------------------------------------------------


def test_the_fast_source_processors_cover_every_number_once(jet: jetlet.EmbeddedInstance) -> None:
    # given 3 source processors over 5,000 events
    cfg = fast_generator.FastConfig(rate=1_000)
    p = Pipeline()
    p.read_from(fast_nexmark_source(cfg, count=5_000, local_parallelism=3)).with_native_timestamps(
        0
    ).write_to(Sinks.list("out"))
    # when the job has emitted them all
    job = jet.new_job(p)
    wait_until(lambda: len(jet.get_list("out")) >= 5_000, "every event", DEADLINE_S)
    jobs.stop(job)
    # then each event came exactly once
    expected = fast_generator.fast_events(range(5_000), cfg)
    assert collections.Counter(jet.get_list("out")) == collections.Counter(expected)


def new_source_processor(supplier: proc.ProcessorMetaSupplier, outbox: TestOutbox) -> proc.Processor:
    context = make_context(
        global_processor_index=1,
        local_parallelism=2,
        processing_guarantee=config.ProcessingGuarantee.EXACTLY_ONCE,
    )
    made = verify_processor(supplier).context(context).new_processor()
    made.init(outbox, context)
    return made


def drain(outbox: TestOutbox, into: list[Any]) -> None:
    into.extend(outbox.buckets[0])
    outbox.buckets[0] = []


def test_the_fast_source_resumes_its_slice_from_a_snapshot() -> None:
    # given processor 1 of 2 of a 6,000-event source, part of the way through an outbox of 5
    cfg = fast_generator.FastConfig(rate=1_000)
    supplier = fast_nexmark_source(cfg, count=6_000, local_parallelism=2).supplier
    outbox = TestOutbox(1, 5)
    first = new_source_processor(supplier, outbox)
    emitted: list[Any] = []
    for _ in range(20):
        first.complete()
        drain(outbox, emitted)
    # when it saves a snapshot and a fresh processor restores it (with processor 0's position)
    while not first.save_to_snapshot():
        drain(outbox, emitted)
    drain(outbox, emitted)
    snapshot = list(outbox.snapshot_bucket)
    first.close()
    ((key, position),) = snapshot
    assert 1 < position.next < 6_000
    second = new_source_processor(supplier, outbox)
    second.restore_from_snapshot(
        jetlet.core.Inbox([*snapshot, (ProcessorKey(key.tag, 0), SlicePosition(0, 2, 5_998))])
    )
    assert second.finish_snapshot_restore()
    for _ in range(2_000):
        second.complete()
        drain(outbox, emitted)
        if len(emitted) >= 3_000:
            break
    second.close()
    # then its slice came out once, in order, each event with its time
    assert emitted == [(e.date_time, e) for e in fast_generator.fast_events(range(1, 6_000, 2), cfg)]


# -- runs -------------------------------------------------------------------------------------


def test_the_fast_source_is_cooperative_paced_or_not_and_the_unpaced_one_fills_whole_chunks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given the fast source unpaced, and paced to start 10 s from now (nothing is due yet)
    cfg = fast_generator.FastConfig(rate=1_000)
    later = fast_generator.FastConfig(rate=1_000, base_time=int((time.time() + 10) * 1000))
    outbox = TestOutbox(1, 4096)
    paced_outbox = TestOutbox(1, 4096)
    unpaced = new_source_processor(fast_nexmark_source(cfg, local_parallelism=2).supplier, outbox)
    paced = new_source_processor(fast_nexmark_source(later, paced=True).supplier, paced_outbox)
    # when each fills once, where nothing may sleep
    monkeypatch.setattr(time, "sleep", _no_sleep)
    unpaced.complete()
    paced.complete()
    # then both run on the cooperative thread: the unpaced one filled a whole chunk, and the paced
    # one returned at once with nothing
    assert unpaced.is_cooperative() and paced.is_cooperative()
    assert len(outbox.buckets[0]) == 1024
    assert paced_outbox.buckets[0] == []
    unpaced.close()
    paced.close()


def _no_sleep(seconds: float) -> None:
    raise AssertionError(f"a cooperative source slept {seconds} s")


def test_a_bounded_job_counts_every_event_and_every_result(jet: jetlet.EmbeddedInstance) -> None:
    # given query 1 over 20,000 events (18,400 bids)
    cfg = fast_generator.FastConfig()
    job = jet.new_job(jobs.build_pipeline("q1", cfg, paced=False, slide_ms=1000, list_name="l", count=20_000))

    def results() -> int:
        return jobs.counter(job.metrics(), jobs.RECORDER_NAME, jobs.RESULT_COUNT)

    # when every result arrived
    wait_until(lambda: results() >= 18_400, "every result", DEADLINE_S)
    metrics = job.metrics()
    jobs.stop(job)
    # then the source read exactly the events generated (query 1's map runs in it and lets the
    # bids out) and the recorder counted every bid
    assert jobs.events_read(metrics) == 20_000
    assert jobs.counter(metrics, jobs.SOURCE_NAME, "emittedCount") == 18_400
    assert jobs.counter(metrics, jobs.RECORDER_NAME, jobs.RESULT_COUNT) == 18_400


def test_a_tiny_throughput_run_is_sane(jet: jetlet.EmbeddedInstance) -> None:
    # when query 2 runs unpaced for half a second after a short warm-up
    run = throughput.measure(jet, "q2", 0, seconds=0.5, warmup_s=0.3)
    # then events were counted over about that time, and results are a small part of them
    assert run.events > 0 and 0.4 < run.seconds < 2.0
    assert 0 <= run.results < run.events
    assert run.events_per_s_per_member == run.events_per_s


def test_a_tiny_latency_run_keeps_one_sample_per_result_of_the_interval(jet: jetlet.EmbeddedInstance) -> None:
    # when query 1 runs at 10,000 events/s and measures 1 s after a warm-up of 0.5 s
    run, samples = latency.measure(jet, "q1", 0, 10_000, seconds=1.0, warmup_s=0.5, snapshots=False)
    # then there is one sample per bid scheduled in the interval (10,000 numbers, 46 of every 50 bids)
    assert run.samples == len(samples) == 9_200
    assert run.results >= run.samples
    # and latencies are non-negative, sorted, and the percentiles are theirs
    assert samples == sorted(samples) and samples[0] >= 0
    assert run.percentiles[50.0] == latency.percentile(samples, 50.0)
    assert not run.enough


# -- report -----------------------------------------------------------------------------------


def test_the_results_section_is_replaced_and_the_rest_kept() -> None:
    # given a results file with other sections
    text = "# Results\n\n## Other\n\nkept\n"
    # when the section is added, then replaced
    once = report.replace_section(text, f"{report.BEGIN}\nfirst\n{report.END}\n")
    twice = report.replace_section(once, f"{report.BEGIN}\nsecond\n{report.END}\n")
    # then the rest stays, and only the newest section is there, once
    assert once.startswith(text) and "first" in once
    assert twice == once.replace("first", "second")
    assert twice.count(report.BEGIN) == 1 and "kept" in twice


def test_the_section_has_the_header_and_a_row_per_run() -> None:
    results = report.Results("jetlet bench nexmark --quick")
    results.throughputs.append(throughput.Throughput("q1", 1, 1_000_000, 900_000, 2.0))
    results.plain_runs.append(plain.PlainRun("q1", 2_000_000, 1_840_000, 1.0))
    text = report.section(results, "abc123")
    assert "`jetlet bench nexmark --quick`" in text and "abc123" in text
    row = next(line for line in text.splitlines() if line.startswith("| q1"))
    assert "500,000" in row and "2,000,000" in row and "0.25" in row


# -- the plain loops against jetlet -----------------------------------------------------------


STATELESS_AND_Q5 = ("q0", "q1", "q2", "q5")
"""The plain loops checked on the fast source's stream (the others below, on a list stream)."""


def test_each_plain_loop_equals_the_jetlet_query(jet: jetlet.EmbeddedInstance) -> None:
    # given 30,000 events at 1,000 events/s (30 s of event time, Q5's 10 s windows sliding by 1 s)
    cfg = fast_generator.FastConfig(rate=1_000)
    count = 30_000
    events = fast_generator.fast_events(range(count), cfg)
    expected = {q: plain.results(q, events) for q in STATELESS_AND_Q5}
    last_time = events[-1].date_time
    slide = jobs.THROUGHPUT_SLIDE_MS
    expected["q5"] = [r for r in expected["q5"] if r[0] + slide < last_time]
    assert all(expected.values()), "every query needs results"
    # when jetlet runs every query over the same events
    p = Pipeline()
    stage = p.read_from(fast_nexmark_source(cfg, count=count)).with_native_timestamps(0)
    for query in STATELESS_AND_Q5:
        jobs.query_fn(query, slide)(stage).write_to(Sinks.list(query))
    job = jet.new_job(p)
    wait_until(
        lambda: all(len(jet.get_list(q)) >= len(expected[q]) for q in expected), "every result", DEADLINE_S
    )
    jobs.stop(job)
    # then the results are the same (Q5: every window closed well before the last event)
    for query in ("q0", "q1", "q2"):
        assert collections.Counter(jet.get_list(query)) == collections.Counter(expected[query]), query
    q5 = sorted(r for r in jet.get_list("q5") if r[0] + slide < last_time)
    assert q5 == expected["q5"]
    assert math.isclose(len(q5), last_time // slide - 1, abs_tol=1)


# -- the plain loops of the joining and windowed queries against jetlet -----------------------

FIRST_30_S = range(30_000)
"""30 s of events at 1,000 events/s from a fresh fast generator."""
SENTINEL_DELAY_MS = 100_000
"""How long after the last event a sentinel person comes, to close every auction (Q4, Q6)."""
QueryFn = Callable[[StreamStage[Any]], StreamStage[Any]]


def stream_results(
    jet: jetlet.EmbeddedInstance, events: list[Event], query_fns: dict[str, QueryFn], wanted: dict[str, int]
) -> dict[str, list[Any]]:
    """Each query's results over ``events`` as one stream timestamped by ``date_time``.

    The job stops once every query has at least its ``wanted`` results.
    """
    p = Pipeline()

    def generate(context: proc.ProcessorContext) -> list[Event]:
        return events if context.global_processor_index == 0 else []

    stage = p.read_from(Sources.stream_from_generator(generate, "events")).with_timestamps(_event_time, 0)
    for name, query_fn in query_fns.items():
        query_fn(stage).write_to(Sinks.list(name))
    job = jet.new_job(p)
    wait_until(lambda: all(len(jet.get_list(q)) >= wanted[q] for q in wanted), "every result", DEADLINE_S)
    jobs.stop(job)
    return {name: list(jet.get_list(name)) for name in query_fns}


def _event_time(event: Event) -> int:
    return event.date_time


def test_the_join_window_and_side_input_loops_equal_the_jetlet_queries(jet: jetlet.EmbeddedInstance) -> None:
    # given 30 s of events (Q7 in the benchmark's windows: 1 s and 10 ms), then a person at the next
    # 10 s boundary: the loops close the windows before it, jetlet all windows as its source ends
    events = fast_generator.fast_events(FIRST_30_S, fast_generator.FastConfig(rate=1_000))
    last_time = events[-1].date_time
    events.append(sentinel(last_time - last_time % jobs.WINDOW_MS + jobs.WINDOW_MS))
    steps: dict[str, plain.Step] = {
        "q3": plain.LocalItemSuggestionLoop(),
        "q7": plain.HighestBidLoop(window_ms=1_000),
        "q7-latency": plain.HighestBidLoop(window_ms=jobs.LATENCY_SLIDE_MS),
        "q8": plain.NewUsersLoop(),
        "q13": plain.q13_step,
    }
    expected: dict[str, list[object]] = {q: [] for q in steps}
    for start in range(0, len(events), plain.BATCH):
        for query, step in steps.items():
            step(events[start : start + plain.BATCH], expected[query])
    assert len(expected["q3"]) >= 10 and len(expected["q7"]) >= 29 and len(expected["q8"]) >= 10
    assert len(expected["q7-latency"]) >= 2_999
    # when jetlet runs the same queries over the same events, Q7 as the benchmark sets it
    query_fns: dict[str, QueryFn] = {
        "q3": joins.q3_local_item_suggestion,
        "q7": jobs.query_fn("q7", jobs.THROUGHPUT_SLIDE_MS),
        "q7-latency": jobs.query_fn("q7", jobs.LATENCY_SLIDE_MS),
        "q8": joins.q8_monitor_new_users,
        "q13": queries.q13_bounded_side_input_join,
    }
    actual = stream_results(jet, events, query_fns, {q: len(r) for q, r in expected.items()})
    # then each has the same results
    for query in steps:
        assert collections.Counter(actual[query]) == collections.Counter(expected[query]), query


def sentinel(date_time: int) -> Person:
    """A person at ``date_time`` that no query answers: out of Q3's states, with no auctions."""
    return Person(0, "sentinel", "", "", "", "WY", date_time, "")


def reference_winners(events: list[Event]) -> list[tuple[Auction, Bid]]:
    """Each auction that closed by the last event, with its winning bid, by brute force.

    An auction closes when the time reaches its ``expires`` or a later auction reuses its id. A bid
    counts for the latest auction of its id opened at or before it, if it came while that auction
    was open and at least its reserve; the highest wins, the earliest of equal ones.
    """
    last_time = events[-1].date_time
    winners: list[tuple[Auction, Bid]] = []
    for index, auction in enumerate(events):
        if not isinstance(auction, Auction):
            continue
        bids: list[Bid] = []
        reopened = False
        for later in events[index + 1 :]:
            if isinstance(later, Auction) and later.id == auction.id:
                reopened = True
                break
            if isinstance(later, Bid) and later.auction == auction.id and later.date_time < auction.expires:
                bids.append(later)
        if auction.expires > last_time and not reopened:
            continue
        valid = [b for b in bids if b.price >= auction.reserve]
        if valid:
            winners.append((auction, max(valid, key=lambda b: (b.price, -b.date_time))))
    return winners


def test_the_winning_bids_loop_closes_each_auction_at_expires_or_reopening_with_its_best_valid_bid() -> None:
    # given 30 s of events from the first block, auction ids reopened as the generator does
    events = fast_generator.fast_events(range(30_000), fast_generator.FastConfig(rate=1_000))
    # when the Q4 loop runs over them in batches
    step, out = plain.PLAIN_QUERIES["q4"](), []
    for start in range(0, len(events), plain.BATCH):
        step(events[start : start + plain.BATCH], out)
    # then each category's count and last average are those of the brute-force winners
    by_category: dict[int, list[int]] = collections.defaultdict(list)
    for auction, bid in reference_winners(events):
        by_category[auction.category].append(bid.price)
    assert len(out) == sum(len(p) for p in by_category.values()) > 100
    last = {r.category: r.price for r in out}
    assert last == {c: joins.java_round(sum(p) / len(p)) for c, p in by_category.items()}


def test_the_q4_and_q6_loops_equal_the_jetlet_queries(jet: jetlet.EmbeddedInstance) -> None:
    # given 30 s of raw fast-generator events (auction ids reopened), then a person long after to
    # close every auction
    events = fast_generator.fast_events(FIRST_30_S, fast_generator.FastConfig(rate=1_000))
    events.append(sentinel(events[-1].date_time + SENTINEL_DELAY_MS))
    expected = {q: plain.results(q, events) for q in ("q4", "q6")}
    expected["winners"] = plain_winners(events)
    assert len(expected["q4"]) == len(expected["q6"]) == len(expected["winners"]) > 100
    # when jetlet runs both as the benchmark sets them (the fast generator's auction TTL)
    query_fns: dict[str, QueryFn] = {
        "q4": jobs.query_fn("q4"),
        "q6": jobs.query_fn("q6"),
        "winners": lambda stage: joins.winning_bids(stage, ttl_ms=fast_generator.max_auction_duration_ms()),
    }
    actual = stream_results(jet, events, query_fns, {q: len(r) for q, r in expected.items()})
    # then the winners are the same; they may close in another order (the loop at ``expires`` in
    # event order, jetlet at the watermark, a second of event time at a time), so each category and
    # seller had as many updates and ends with the same average
    assert collections.Counter(actual["winners"]) == collections.Counter(expected["winners"])
    assert collections.Counter(r.category for r in actual["q4"]) == collections.Counter(
        r.category for r in expected["q4"]
    )
    assert {r.category: r.price for r in actual["q4"]} == {r.category: r.price for r in expected["q4"]}
    assert collections.Counter(r.seller for r in actual["q6"]) == collections.Counter(
        r.seller for r in expected["q6"]
    )
    assert {r.seller: r.price for r in actual["q6"]} == {r.seller: r.price for r in expected["q6"]}


def winner(auction: Auction, bid: Bid) -> AuctionBid:
    return AuctionBid(auction, bid.bidder, bid.price, bid.date_time)


def plain_winners(events: list[Event]) -> list[object]:
    """The winning bids loop's closed auctions over ``events`` in batches, as ``AuctionBid``."""
    step, out = plain.WinningBidsLoop(winner), list[object]()
    for start in range(0, len(events), plain.BATCH):
        step(events[start : start + plain.BATCH], out)
    return out


def test_the_benchmark_bounds_q4_and_q6_state_by_the_fast_generators_longest_auction() -> None:
    # given a long stretch of fast-generator auctions
    events = fast_generator.fast_events(range(200_000), fast_generator.FastConfig(rate=1_000))
    lengths = {e.expires - e.date_time for e in events if isinstance(e, Auction)}
    # then the bound is the longest of them, and far above the Beam-config default
    assert fast_generator.max_auction_duration_ms() == max(lengths) == 10_000
    assert joins.max_auction_duration_ms() < max(lengths)


def test_a_windowed_querys_latency_run_is_stretched_to_ten_thousand_samples_and_no_further() -> None:
    # given 100 window results a second (a 10 ms slide), then 10,000 samples need about 100 s
    stretched = latency.seconds_for("q5", 15.0)
    assert stretched * 1000 / jobs.LATENCY_SLIDE_MS >= latency.MIN_SAMPLES
    assert stretched <= latency.LONGEST_RUN_S
    # a longer run asked for is kept, and a query whose results depend on the data is not stretched
    assert latency.seconds_for("q7", 300.0) == 300.0
    assert latency.seconds_for("q1", 15.0) == 15.0


def test_throughput_repeats_default_to_three_and_must_be_positive() -> None:
    # given the harness's flags
    parser = argparse.ArgumentParser()
    harness.add_arguments(parser)
    # when parsed with no --repeats, with --quick, and with a bad value
    assert harness.settings_from(parser.parse_args([])).repeats == 3
    assert harness.settings_from(parser.parse_args(["--quick"])).repeats == 1
    # then zero is refused, naming the flag
    with pytest.raises(ValueError, match="--repeats must be at least 1, got 0"):
        harness.settings_from(parser.parse_args(["--repeats", "0"]))


def test_each_run_is_logged_with_the_load_the_kernel_gave_before_it(tmp_path: Path) -> None:
    # given a load file as Linux writes it, and a path that does not exist
    loadavg = tmp_path / "loadavg"
    loadavg.write_text("1.62 1.80 1.75 3/412 98765\n", encoding="ascii")
    # then the 1-, 5- and 15-minute averages are read, and a missing file says so
    assert report.load_average(str(loadavg)) == "1.62 1.80 1.75"
    assert report.load_average(str(tmp_path / "none")) == "not known"
