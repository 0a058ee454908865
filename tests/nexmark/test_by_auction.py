"""Winning bids (queries 4 and 6) on a source split by auction: lanes, their restore, forward(), the plan."""

from __future__ import annotations

import argparse
import collections
import math
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

import jetlet
from jetlet import config
from jetlet._planner.planner import PlanningError
from jetlet.aggregate import counting
from jetlet.core import processor as proc
from jetlet.core.inbox import Inbox
from jetlet.core.processors.sources import LaneCursor, LanePosition, SlicePosition, StridedCursor
from jetlet.core.snapshot_keys import ProcessorKey
from jetlet.core.watermark import Watermark
from jetlet.local_cluster import local_cluster
from jetlet.nexmark import fast_generator, joins
from jetlet.nexmark.bench import harness, jobs, plain
from jetlet.nexmark.fast_source import fast_nexmark_source
from jetlet.nexmark.model import Auction, AuctionBid, Bid, Event, Person
from jetlet.nexmark.partial_winners import SNAPSHOT_TAG, auction_fields, partial_winning_bids_p
from jetlet.pipeline import Pipeline, Sinks, Sources
from jetlet.testing import TestOutbox, make_context, wait_until

DEADLINE_S = 60.0
TTL_MS = fast_generator.max_auction_duration_ms()
# few keys, so that auction ids are reused (an auction closes early when its id reopens)
CONFIG = fast_generator.FastConfig(rate=2_000, keys=300)
COUNT = 60_000
"""30 s of event time at 2,000 events/s."""


@pytest.fixture
def jet() -> Iterator[jetlet.EmbeddedInstance]:
    with jetlet.embedded() as instance:
        yield instance


def lane_of_event(event: Event, lanes: int) -> int | None:
    """The lane an auction's or a bid's auction id belongs to (None for a person)."""
    if isinstance(event, Bid):
        return event.auction % lanes
    return event.id % lanes if isinstance(event, Auction) else None


# -- the generator's lanes ---------------------------------------------------------------------


@pytest.mark.parametrize("lanes", [1, 2, 3])
def test_the_lanes_split_the_stream_by_auction_and_together_are_the_whole_stream(lanes: int) -> None:
    # given runs of numbers that cross a block of the tables (65,536 numbers)
    start, stop = 3 * fast_generator.BLOCK - 4_000, 3 * fast_generator.BLOCK + 3_000
    everything = fast_generator.fast_events(range(start, stop), CONFIG)
    got: dict[int, list[Event]] = {}
    for lane in range(lanes):
        # when each lane is taken in calls of at most 500 events
        taken: list[Event] = []
        number = start
        while number < stop:
            events, number = fast_generator.lane_events(number, stop, 500, CONFIG, lane, lanes)
            assert len(events) <= 500
            taken.extend(events)
        got[lane] = taken
    # then each lane is the stream's events of its numbers, in order, every auction and bid of an id
    # in the lane of that id
    for lane, taken in got.items():
        numbers = [n for n in range(start, stop) if fast_generator.auction_lane(n, CONFIG, lanes) == lane]
        assert taken == [fast_generator.fast_event(n, CONFIG) for n in numbers]
        assert {lane_of_event(e, lanes) for e in taken} <= {lane, None}
    assert sum(len(taken) for taken in got.values()) == len(everything)
    assert any(isinstance(e, Person) for e in got[0])


def test_an_empty_lane_returns_at_once_and_says_how_far_it_looked() -> None:
    # given one auction id only, so that lane 1 of 2 (odd ids) holds nothing
    cfg = fast_generator.FastConfig(rate=1_000, keys=1)
    assert {fast_generator.auction_lane(n, cfg, 2) for n in range(1_000)} == {0}
    # when lane 1 is asked for the events of an unbounded run, then it looks at a bounded stretch
    events, after = fast_generator.lane_events(7, sys.maxsize, 100, cfg, 1, 2)
    assert events == [] and after == 7 + 100 * 2 * fast_generator.SCAN_FACTOR


def test_a_lane_past_stop_or_with_nothing_in_a_run_moves_on() -> None:
    # a run of one number of another lane gives nothing, and the next number to take
    number = next(n for n in range(100) if fast_generator.auction_lane(n, CONFIG, 2) == 1)
    assert fast_generator.lane_events(number, number + 1, 10, CONFIG, 0, 2) == ([], number + 1)
    assert fast_generator.lane_events(50, 50, 10, CONFIG, 0, 2) == ([], 50)


# -- the lane cursor's restore -------------------------------------------------------------------


def run_lanes(cursors: list[LaneCursor], stop: int, limit: int, rounds: int) -> list[int]:
    """Advance each cursor ``rounds`` times by at most ``limit`` numbers of its lane; the numbers taken."""
    taken: list[int] = []
    for _ in range(rounds):
        for cursor in cursors:
            restored = cursor.take_restored(limit, stop)
            if restored is not None:
                taken.extend(restored)
                continue
            events, after = fast_generator.lane_events(
                cursor.next, stop, limit, CONFIG, cursor.index, cursor.lanes
            )
            numbers = [
                n
                for n in range(cursor.next, after)
                if fast_generator.auction_lane(n, CONFIG, cursor.lanes) == cursor.index
            ]
            assert len(numbers) == len(events)
            taken.extend(numbers)
            cursor.advance(after)
    return taken


def lane_cursors(lanes: int, saved: list[LanePosition] | None = None) -> list[LaneCursor]:
    cursors = [
        LaneCursor(i, lanes, lambda n, k: fast_generator.auction_lane(n, CONFIG, k)) for i in range(lanes)
    ]
    for cursor in cursors:
        if saved is not None:
            cursor.restore(saved, "test")
    return cursors


@pytest.mark.parametrize("lanes", [(2, 3, 1), (3, 2, 2), (1, 2, 3)])
def test_lanes_restored_into_other_lane_counts_take_every_number_once(lanes: tuple[int, int, int]) -> None:
    # given lanes that went unevenly far (different limits per lane), then saved their positions
    first, second, third = lanes
    stop = 20_000
    cursors = lane_cursors(first)
    taken = run_lanes(cursors[:1], stop, 700, 3) + run_lanes(cursors[1:], stop, 300, 2)
    saved = [cursor.position() for cursor in cursors]
    # when another number of lanes restores them, goes on unevenly, saves, and a third one finishes
    cursors = lane_cursors(second, saved)
    taken += run_lanes(cursors[:1], stop, 500, 2) + run_lanes(cursors[1:], stop, 900, 3)
    saved = [cursor.position() for cursor in cursors]
    cursors = lane_cursors(third, saved)
    taken += run_lanes(cursors, stop, 1_000, 100)
    # then every number was taken exactly once
    assert sorted(taken) == list(range(stop))


def test_a_lane_cursor_refuses_a_strided_snapshot() -> None:
    cursor = LaneCursor(0, 2, lambda n, k: n % k)
    with pytest.raises(ValueError, match="SlicePosition"):
        cursor.restore([SlicePosition(0, 2, 10), SlicePosition(1, 2, 11)], "nexmark")
    with pytest.raises(ValueError, match="LanePosition"):
        StridedCursor(0, 2).restore([LanePosition(0, 2, 10), LanePosition(1, 2, 11)], "nexmark")


# -- the whole-auction partial stage's restore -----------------------------------------------------


def an_auction(auction_id: int, opens: int, expires: int) -> Auction:
    return Auction(auction_id, "item", "", 50, 100, opens, expires, 1, 10, "")


def test_a_restored_whole_auction_processor_keeps_only_its_own_auctions_and_emits_winners() -> None:
    # given what two processors saved: auctions 4 and 5 with best bids, and early bids for 6 and 7
    four, five = an_auction(4, 0, 1_000), an_auction(5, 0, 1_000)
    saved = [
        (ProcessorKey(SNAPSHOT_TAG, 0), ([[auction_fields(four), 300, 100, 1]], {6: [(6, 2, 500, 50)]})),
        (ProcessorKey(SNAPSHOT_TAG, 1), ([[auction_fields(five), 350, 200, 3]], {7: [(7, 2, 500, 60)]})),
    ]
    # when processor 1 of 2 (ids 1 mod 2) restores them all, then auction 7 opens and the watermark
    # passes every auction
    processor = partial_winning_bids_p(ttl=5_000, whole=True)()
    outbox = TestOutbox(1, 100)
    processor.init(outbox, make_context(global_processor_index=1, member_index=1, member_count=2))
    processor.restore_from_snapshot(Inbox(saved))
    assert processor.finish_snapshot_restore()
    seven = an_auction(7, 40, 1_000)
    processor.process(0, Inbox([(40, (7, auction_fields(seven)))]))
    outputs: list[list[Any]] = [[]]
    for _ in range(10):
        accepted = processor.try_process_watermark(Watermark(2_000))
        outbox.drain(outputs, [])
        if accepted:
            break
    # then it closed its own auction 5 and 7 (won by the early bid), as winners stamped with the
    # watermark that closed them; 4 and 6 are not its
    assert outputs[0] == [
        (2_000, AuctionBid(five, 3, 350, 200)),
        (2_000, AuctionBid(seven, 2, 500, 60)),
        Watermark(2_000),
    ]


def whole_outputs(events: list[Any], watermark: int) -> list[Any]:
    """What a whole-auction processor (processor 0 of 1) emits for ``events``, then ``watermark``."""
    processor = partial_winning_bids_p(ttl=5_000, whole=True)()
    outbox = TestOutbox(1, 100)
    processor.init(outbox, make_context())
    processor.process(0, Inbox(events))
    outputs: list[list[Any]] = [[]]
    for _ in range(10):
        accepted = processor.try_process_watermark(Watermark(watermark))
        outbox.drain(outputs, [])
        if accepted:
            break
    return outputs[0]


def opened(auction: Auction) -> tuple[int, tuple[int, Any]]:
    return (auction.date_time, (auction.id, auction_fields(auction)))


def test_a_whole_auction_processor_reopens_an_id_in_the_same_millisecond_and_drops_early_bids() -> None:
    # given a bid for auction 3 before any auction of its id (in the millisecond the auction opens),
    # auction 3 with a bid, and another auction 3 in the same millisecond with a bid of its own
    first, second = an_auction(3, 100, 900), Auction(3, "other", "", 50, 100, 100, 800, 2, 10, "")
    events = [(100, (3, 2, 999, 100)), opened(first), (100, (3, 2, 300, 100)), opened(second)]
    events.append((150, (3, 2, 200, 150)))
    # then the bid before the auctions counted for none (as in the plain loop), the second auction
    # closed the first at once (stamped with its start), and the second won its own bid when the
    # watermark passed its expires (stamped with that watermark)
    assert whole_outputs(events, 1_000) == [
        (100, AuctionBid(first, 2, 300, 100)),
        (1_000, AuctionBid(second, 2, 200, 150)),
        Watermark(1_000),
    ]


# -- forward() ----------------------------------------------------------------------------------


def test_forward_connects_processor_i_to_processor_i_and_gives_the_next_stage_its_parallelism() -> None:
    p = Pipeline()
    source = p.read_from(Sources.items(list(range(10)))).set_local_parallelism(3)
    source.forward().map(str).write_to(Sinks.list("out"))
    dag = p.to_dag()
    (edge,) = [e for e in dag.edges() if e.dest_name == "map"]
    assert edge.routing_policy.value == "isolated" and not edge.is_distributed
    assert {v.name: v.local_parallelism for v in dag.vertices()}["map"] == 3


def test_forward_into_a_stage_that_asks_for_another_parallelism_is_a_planning_error() -> None:
    p = Pipeline()
    source = p.read_from(Sources.items(list(range(10)))).set_local_parallelism(3)
    source.forward().map(str).set_local_parallelism(2).write_to(Sinks.list("out"))
    wanted = r"whose local parallelism is 2: forward\(\) needs the forwarded stage's, 3"
    with pytest.raises(PlanningError, match=wanted):
        p.to_dag()
    # nor into a stage whose supplier prefers one processor, from a stage on the default
    p = Pipeline()
    one = proc.ProcessorMetaSupplier.of(lambda: proc.Processor(), preferred_local_parallelism=1)
    forwarded = p.read_from(Sources.items(list(range(10)))).map(str).forward()
    forwarded.custom_transform("one", one).write_to(Sinks.list("out"))
    with pytest.raises(PlanningError, match=r"forward\(\) needs the forwarded stage's, the default"):
        p.to_dag()


def test_forward_into_a_keyed_stage_is_a_planning_error() -> None:
    p = Pipeline()
    source = p.read_from(Sources.items(list(range(10))))
    source.forward().grouping_key(str).aggregate(counting()).write_to(Sinks.list("out"))
    with pytest.raises(PlanningError, match=r"routes its input partitioned: forward\(\) feeds only"):
        p.to_dag()


def test_forwarded_stateless_stages_fuse_and_run_in_a_source_that_takes_them() -> None:
    # given a source forwarded through two maps, then forwarded into a custom stage
    p = Pipeline()
    source = p.read_from(Sources.items(list(range(10)))).set_local_parallelism(3)
    last = source.forward().map(str).forward().map(len).forward()
    end = last.custom_transform("end", proc.ProcessorMetaSupplier.of(lambda: proc.Processor()))
    end.write_to(Sinks.list("out"))
    dag = p.to_dag()
    # then the maps run as one vertex, isolated between the source and the custom stage, with the
    # source's parallelism
    assert {v.name: v.local_parallelism for v in dag.vertices() if v.name != "listSink(out)"} == {
        "items": 3,
        "fused(map, map)": 3,
        "end": 3,
    }
    assert {e.dest_name: e.routing_policy.value for e in dag.edges() if e.dest_name != "listSink(out)"} == {
        "fused(map, map)": "isolated",
        "end": "isolated",
    }
    # and winning bids by auction runs its first map inside the NEXMark source, as the strided plan does
    p = Pipeline()
    events = p.read_from(fast_nexmark_source(CONFIG, 10, local_parallelism=2, by_auction=True))
    winners = joins.winning_bids(events.with_native_timestamps(0), ttl_ms=TTL_MS, by_auction=True)
    winners.write_to(Sinks.list("w"))
    edges = {(e.source_name, e.dest_name): e.routing_policy.value for e in p.to_dag().edges()}
    assert edges[("fast-nexmark", "nexmark-winning-bids")] == "isolated"


# -- the queries end to end --------------------------------------------------------------------------


def winner(auction: Auction, bid: Bid) -> AuctionBid:
    return AuctionBid(auction, bid.bidder, bid.price, bid.date_time)


def reference(cfg: fast_generator.FastConfig, count: int) -> tuple[int, dict[AuctionBid, float]]:
    """The time of the last of the first ``count`` events, and the plain loop's winners of all their
    auctions with the event time each auction stopped taking bids (its ``expires``, or the start of
    the next auction of its id)."""
    events = fast_generator.fast_events(range(count), cfg)
    late = Person(0, "", "", "", "", "", events[-1].date_time + 100_000, "")
    step, out = plain.WinningBidsLoop(winner), list[object]()
    everything = [*events, late]
    for start in range(0, len(everything), plain.BATCH):
        step(everything[start : start + plain.BATCH], out)
    reopened: dict[tuple[int, int], int] = {}
    last: dict[int, Auction] = {}
    for event in events:
        if isinstance(event, Auction):
            earlier = last.get(event.id)
            if earlier is not None:
                reopened[(earlier.id, earlier.date_time)] = event.date_time
            last[event.id] = event
    closes: dict[AuctionBid, float] = {}
    for won in out:
        assert isinstance(won, AuctionBid)
        key = (won.auction.id, won.auction.date_time)
        closes[won] = min(won.auction.expires, reopened.get(key, math.inf))
    return events[-1].date_time, closes


def by_auction_pipeline(cfg: fast_generator.FastConfig, count: int, paced: bool = False) -> Pipeline:
    """Winning bids, Q4 and Q6 on the first ``count`` events, read by two lanes per member."""
    p = Pipeline()
    source = fast_nexmark_source(cfg, count, paced, local_parallelism=2, by_auction=True)
    events = p.read_from(source).with_native_timestamps(0)
    joins.winning_bids(events, ttl_ms=TTL_MS, by_auction=True).write_to(Sinks.list("winners"))
    joins.q4_average_price_by_category(events, ttl_ms=TTL_MS, by_auction=True).write_to(Sinks.list("q4"))
    joins.q6_average_price_by_seller(events, ttl_ms=TTL_MS, by_auction=True).write_to(Sinks.list("q6"))
    return p


def closed(closes: dict[AuctionBid, float], by: int) -> set[AuctionBid]:
    return {won for won, at in closes.items() if at <= by}


def check_averages(winners: list[AuctionBid], results: list[Any], key: str) -> None:
    """Query 4 (``key`` category) or 6 (seller): one average per winner of each key, among them the
    mean of the key's winners (Q6: of its latest 10)."""
    prices: dict[int, list[int]] = collections.defaultdict(list)
    for result in results:
        prices[getattr(result, key)].append(result.price)
    per_key: dict[int, list[AuctionBid]] = collections.defaultdict(list)
    for won in winners:
        per_key[getattr(won.auction, key)].append(won)
    assert {k: len(v) for k, v in prices.items()} == {k: len(v) for k, v in per_key.items()}
    for k, won in per_key.items():
        if key == "seller":
            won = sorted(won, key=lambda w: (w.date_time, w.price))[-joins.LAST_AUCTIONS :]
        assert joins.java_round(sum(w.price for w in won) / len(won)) in prices[k], (key, k)


def test_queries_4_and_6_by_auction_on_two_members_equal_the_plain_loop() -> None:
    # given the reference winners of 30 s of events; the watermark passes all but the last second
    last_time, closes = reference(CONFIG, COUNT)
    wanted = closed(closes, last_time - 1_001)
    assert len(wanted) > 500
    # when two members run winning bids, Q4 and Q6 on the source split by auction (two lanes each)
    with local_cluster(2) as client:
        job = client.new_job(by_auction_pipeline(CONFIG, COUNT))
        wait_until(
            lambda: (
                set(client.get_list("winners")) >= wanted
                and len(client.get_list("q4"))
                == len(client.get_list("q6"))
                == len(client.get_list("winners"))
            ),
            "the winners of the closed auctions and their averages",
            DEADLINE_S,
        )
        jobs.stop(job)
        got = list(client.get_list("winners"))
        q4, q6 = list(client.get_list("q4")), list(client.get_list("q6"))
    # then the winners are the plain loop's, each once, and the averages theirs
    assert len(got) == len(set(got))
    assert set(got) <= closes.keys()
    check_averages(got, q4, "category")
    check_averages(got, q6, "seller")


def test_winning_bids_by_auction_come_out_right_through_a_restart_from_a_snapshot() -> None:
    # given 5 s of events paced at 20,000 events/s from a second from now, their reference, and a
    # snapshot every 200 ms
    cfg = fast_generator.FastConfig(rate=20_000, keys=300, base_time=int(time.time() * 1000) + 1_000)
    count = 100_000
    last_time, closes = reference(cfg, count)
    wanted = closed(closes, last_time - 1_001)
    assert len(wanted) > 500
    p = Pipeline()
    source = fast_nexmark_source(cfg, count, paced=True, local_parallelism=2, by_auction=True)
    events = p.read_from(source).with_native_timestamps(0)
    joins.winning_bids(events, ttl_ms=TTL_MS, by_auction=True).write_to(Sinks.list("winners"))
    guarantee = config.ProcessingGuarantee.EXACTLY_ONCE
    with local_cluster(2) as client:
        job = client.new_job(
            p, config.JobConfig(processing_guarantee=guarantee, snapshot_interval_millis=200)
        )
        # when the job restarts from its last snapshot a quarter of the way through (a snapshot taken
        # after 400 winners came out: it holds hundreds of open auctions)
        wait_until(lambda: len(client.get_list("winners")) >= 400, "400 winners", DEADLINE_S)
        taken = job.snapshot.get("count", 0)
        wait_until(lambda: job.snapshot.get("count", 0) > taken, "a snapshot after them", DEADLINE_S)
        job.restart()
        wait_until(
            lambda: set(client.get_list("winners")) >= wanted, "the closed auctions' winners", DEADLINE_S
        )
        jobs.stop(job)
        got = list(client.get_list("winners"))
    # then every winner is the plain loop's, and each auction came out with one winner, at most
    # twice: a winner emitted after the snapshot comes again after the restore (the list sink is not
    # transactional), but no processor emits an auction of another lane from a restored state
    assert set(got) <= closes.keys()
    assert max(collections.Counter(got).values()) <= 2
    per_auction = collections.defaultdict(set)
    for won in got:
        per_auction[(won.auction.id, won.auction.date_time)].add(won)
    assert all(len(winners) == 1 for winners in per_auction.values())


def test_the_benchmark_reads_q4_and_q6_split_by_auction_unless_told_stride(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # the queries that read the source split by auction, by default and with --source-split stride
    assert [q for q in ("q1", "q4", "q5", "q6", "q8") if jobs.by_auction(q)] == ["q4", "q6"]
    assert not any(jobs.by_auction(q, "stride") for q in ("q4", "q6"))
    with pytest.raises(ValueError, match="source split must be one of auto, stride, got 'keys'"):
        jobs.by_auction("q4", "keys")
    # and the harness's flag
    parser = argparse.ArgumentParser()
    harness.add_arguments(parser)
    assert harness.settings_from(parser.parse_args([])).source_split == "auto"
    assert harness.settings_from(parser.parse_args(["--source-split", "stride"])).source_split == "stride"
    with pytest.raises(SystemExit):
        parser.parse_args(["--source-split", "keys"])
    assert "invalid choice: 'keys'" in capsys.readouterr().err
