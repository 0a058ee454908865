"""Every NEXMark query (0-8, 13) in real jobs, checked against plain-Python references over the generator.

The references below are written from the queries' definitions (Apache Beam's NEXMark) with dicts and
loops over ``events(...)``; they share nothing with ``jetlet.nexmark``'s query code. The source
stops after ``COUNT`` events but is a stream, so a job runs until the results the test awaits are
out and is then cancelled; windows and auctions count only when the watermark surely closed them.
"""

from __future__ import annotations

import collections
import itertools
import math
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import jetlet
from jetlet.core.inbox import Inbox
from jetlet.core.snapshot_keys import ProcessorKey
from jetlet.core.watermark import Watermark
from jetlet.errors import JobCancelledError
from jetlet.local_cluster import local_cluster
from jetlet.nexmark import (
    QUERIES,
    Auction,
    AuctionBid,
    AuctionPrice,
    Bid,
    CategoryPrice,
    Event,
    GeneratorConfig,
    IdNameReserve,
    NameCityStateId,
    Person,
    events,
    max_auction_duration_ms,
    nexmark_source,
    q2_selection,
    q3_local_item_suggestion,
    q4_average_price_by_category,
    q5_hot_items,
    q6_average_price_by_seller,
    q7_highest_bid,
    q8_monitor_new_users,
    q13_bounded_side_input_join,
    winning_bids,
)
from jetlet.nexmark.partial_winners import (
    SNAPSHOT_TAG,
    AuctionOrBid,
    PartialWinner,
    PricedBid,
    auction_fields,
    auction_key,
    best_of_partials,
    no_winner_yet,
    partial_winning_bids_p,
    winner,
)
from jetlet.pipeline import Pipeline, Sinks, StreamStage
from jetlet.testing import TestOutbox, TestSupport, make_context, verify_processor, wait_until

COUNT = 5_050
"""Events 0 .. 5049: 505 ms of event time at the default 10,000 events/s."""
CLOSED_BEFORE = 500
"""Windows ending by here surely close: the watermark reaches 504 ms (the second-to-last event's time;
two source processors), mid-window, so no window ends near it."""
DEADLINE_S = 30
JOIN_TIMEOUT_S = 30
# few auctions in flight, so that they expire within the stream (durations scale with it); no hot
# auctions, sellers or bidders, so that bids, sellers and bidders spread over many ids
CONFIG = GeneratorConfig(
    num_in_flight_auctions=10, hot_auction_ratio=1, hot_sellers_ratio=1, hot_bidders_ratio=1
)
GENERATED: list[Event] = list(events(0, COUNT, 1, CONFIG))
BIDS = [item for item in GENERATED if isinstance(item, Bid)]
AUCTIONS = [item for item in GENERATED if isinstance(item, Auction)]
PEOPLE = [item for item in GENERATED if isinstance(item, Person)]
# auctions close on watermarks, which a pipeline without windows throttles to whole seconds (as Jet does):
# the winning-bids tests take 1,000 events/s, so that the same events span 5 s of event time
SLOW_CONFIG = GeneratorConfig(
    first_event_rate=1_000,
    num_in_flight_auctions=10,
    hot_auction_ratio=1,
    hot_sellers_ratio=1,
    hot_bidders_ratio=1,
)
SLOW_GENERATED: list[Event] = list(events(0, COUNT, 1, SLOW_CONFIG))
SLOW_LAST_WATERMARK = 5_000
"""The last watermark over the slow stream (5,048 ms, throttled to whole seconds)."""


@pytest.fixture
def jet() -> Iterator[jetlet.EmbeddedInstance]:
    with jetlet.embedded() as instance:
        yield instance


def event_stage(p: Pipeline, config: GeneratorConfig = CONFIG) -> StreamStage[Event]:
    """The generator's first ``COUNT`` events from two source processors, with their event times."""
    return p.read_from(nexmark_source(config, count=COUNT, local_parallelism=2)).with_native_timestamps(0)


def run_until(jet: Any, pipeline: Pipeline, done: Callable[[], bool]) -> None:
    """Run ``pipeline`` until ``done()`` holds, then cancel it (a failed job's error propagates)."""
    job = jet.new_job(pipeline)
    wait_until(lambda: done() or job.future.done(), "the job produced what the test awaits", DEADLINE_S)
    job.cancel()
    with pytest.raises(JobCancelledError):
        job.join(timeout=JOIN_TIMEOUT_S)


def has_sizes(jet: Any, sizes: dict[str, int]) -> Callable[[], bool]:
    return lambda: all(len(jet.get_list(name)) >= size for name, size in sizes.items())


def java_round(value: float) -> int:
    return math.floor(value + 0.5)


# --------------------------------------------------------------------------- queries 0, 1, 2, 13


def test_the_registry_names_every_query_and_builds_it_with_defaults() -> None:
    # given a pipeline of events
    p = Pipeline()
    stage = event_stage(p)
    # when every registered query is applied with its default parameters
    results = {name: query(stage) for name, query in QUERIES.items()}
    # then there is one per query, each a stream stage, and the pipeline plans into a DAG
    assert sorted(results, key=lambda name: int(name[1:])) == [
        f"q{n}" for n in (0, 1, 2, 3, 4, 5, 6, 7, 8, 13)
    ]
    assert all(isinstance(result, StreamStage) for result in results.values())
    for name, result in results.items():
        result.write_to(Sinks.list(name))
    assert len(p.to_dag().vertices()) > len(QUERIES)


def test_stateless_queries_0_1_2_and_13_match_plain_python(jet: jetlet.EmbeddedInstance) -> None:
    # given the references: every event, bids in euros, bids on every 7th auction, bids with side values
    skip, side_size = 7, 13
    expected = {
        "q0": collections.Counter(GENERATED),
        "q1": collections.Counter(
            Bid(b.auction, b.bidder, b.price * 89 // 100, b.date_time, b.extra) for b in BIDS
        ),
        "q2": collections.Counter(AuctionPrice(b.auction, b.price) for b in BIDS if b.auction % skip == 0),
        "q13": collections.Counter(
            Bid(b.auction, b.bidder, b.price, b.date_time, str(b.bidder % side_size)) for b in BIDS
        ),
    }
    assert expected["q2"], "the test needs some selected bids"
    # and the four queries over one stream (query 13's side input is its default one, of side_size rows)
    p = Pipeline()
    stage = event_stage(p)
    QUERIES["q0"](stage).write_to(Sinks.list("q0"))
    QUERIES["q1"](stage).write_to(Sinks.list("q1"))
    q2_selection(stage, skip).write_to(Sinks.list("q2"))
    q13_bounded_side_input_join(stage, side_input_size=side_size).write_to(Sinks.list("q13"))
    # when they run until every result arrived
    run_until(jet, p, has_sizes(jet, {name: counter.total() for name, counter in expected.items()}))
    # then each produced exactly the reference's results
    for name, counter in expected.items():
        assert collections.Counter(jet.get_list(name)) == counter, name


def test_query_13_joins_a_side_input_stage_it_is_given(jet: jetlet.EmbeddedInstance) -> None:
    # given a side input of 3 rows whose values name the row, keyed by bidder modulo 3
    rows = [(0, "zero"), (1, "one"), (2, "two")]
    expected = collections.Counter(
        Bid(b.auction, b.bidder, b.price, b.date_time, rows[b.bidder % 3][1]) for b in BIDS
    )
    p = Pipeline()
    side = p.read_from(jetlet.pipeline.Sources.items(*rows))
    q13_bounded_side_input_join(event_stage(p), side, side_input_size=3).write_to(Sinks.list("q13"))
    # when it runs until every bid came out
    run_until(jet, p, has_sizes(jet, {"q13": expected.total()}))
    # then every bid carries its row's value
    assert collections.Counter(jet.get_list("q13")) == expected


# --------------------------------------------------------------------------- query 3


def plain_local_item_suggestion() -> collections.Counter[NameCityStateId]:
    """Query 3 by nested loops: people in OR, ID or CA with their auctions in category 10."""
    found: collections.Counter[NameCityStateId] = collections.Counter()
    for person in PEOPLE:
        if person.state not in ("OR", "ID", "CA"):
            continue
        for auction in AUCTIONS:
            if auction.seller == person.id and auction.category == 10:
                found[NameCityStateId(person.name, person.city, person.state, auction.id)] += 1
    return found


def test_query_3_local_item_suggestion_matches_plain_python(jet: jetlet.EmbeddedInstance) -> None:
    # given the reference (the stream is far shorter than the state's TTL, so nothing is forgotten)
    expected = plain_local_item_suggestion()
    assert expected.total() >= 5, "the test needs some local sellers"
    p = Pipeline()
    q3_local_item_suggestion(event_stage(p)).write_to(Sinks.list("q3"))
    # when it runs until that many results arrived
    run_until(jet, p, has_sizes(jet, {"q3": expected.total()}))
    # then they are the reference's, each once, also those whose auction came before its seller
    assert collections.Counter(jet.get_list("q3")) == expected


# --------------------------------------------------------------------------- winning bids, queries 4 and 6


def plain_winners(generated: list[Event]) -> dict[int, Bid]:
    """Each auction's winner: the highest (then earliest) of its bids made while open, >= its reserve."""
    winners: dict[int, Bid] = {}
    bids = [item for item in generated if isinstance(item, Bid)]
    for auction in (item for item in generated if isinstance(item, Auction)):
        valid = [
            b
            for b in bids
            if b.auction == auction.id
            and auction.date_time <= b.date_time < auction.expires
            and b.price >= auction.reserve
        ]
        if valid:
            winners[auction.id] = max(valid, key=lambda b: (b.price, -b.date_time))
    return winners


def surely_closed(generated: list[Event], ttl: int) -> set[int]:
    """Auctions the watermark surely evicts within the stream: by their latest event on the id + ttl."""
    latest: dict[int, int] = {}
    for item in generated:
        if isinstance(item, Auction | Bid):
            key = item.id if isinstance(item, Auction) else item.auction
            latest[key] = max(latest.get(key, item.date_time), item.date_time)
    auctions = [item for item in generated if isinstance(item, Auction)]
    return {auction.id for auction in auctions if latest[auction.id] + ttl < SLOW_LAST_WATERMARK - 10}


def test_winning_bids_and_queries_4_and_6_match_plain_python(jet: jetlet.EmbeddedInstance) -> None:
    check_winning_bids_and_queries_4_and_6(jet)


def test_winning_bids_and_queries_4_and_6_on_a_two_member_cluster_match_plain_python() -> None:
    # auctions and bids cross to the member owning their auction id as plain tuples (rows), and
    # winners to the owner of their category and seller
    with local_cluster(2) as client:
        check_winning_bids_and_queries_4_and_6(client)


def check_winning_bids_and_queries_4_and_6(jet: Any) -> None:
    """Winning bids, query 4 and query 6 on ``jet`` equal what plain Python computes."""
    # given the reference winners, and the auctions that surely close within the stream
    winners = plain_winners(SLOW_GENERATED)
    auction_by_id = {a.id: a for a in SLOW_GENERATED if isinstance(a, Auction)}
    closed = surely_closed(SLOW_GENERATED, max_auction_duration_ms(SLOW_CONFIG)) & winners.keys()
    assert len(closed) >= 20, "the test needs closed auctions with winners"
    p = Pipeline()
    stage = event_stage(p, SLOW_CONFIG)
    winning_bids(stage, SLOW_CONFIG).write_to(Sinks.list("winners"))
    q4_average_price_by_category(stage, SLOW_CONFIG).write_to(Sinks.list("q4"))
    q6_average_price_by_seller(stage, SLOW_CONFIG).write_to(Sinks.list("q6"))

    def closed_and_averaged() -> bool:
        got = jet.get_list("winners")
        ids = {w.auction.id for w in got}
        return closed <= ids and len(jet.get_list("q4")) == len(jet.get_list("q6")) == len(got)

    # when it runs until the closed auctions' winners and one average per winner are out
    run_until(jet, p, closed_and_averaged)
    got = list(jet.get_list("winners"))
    # then the winners are those of the reference: each once, with the auction and a winning price
    ids = [w.auction.id for w in got]
    assert len(ids) == len(set(ids))
    assert closed <= set(ids) <= winners.keys()
    for won in got:
        assert won.auction == auction_by_id[won.auction.id]
        reference = winners[won.auction.id]
        assert (won.bidder, won.price, won.date_time) == (
            reference.bidder,
            reference.price,
            reference.date_time,
        )
    # and query 4 gave one rolling average per closed auction of each category, ending at the full average
    check_rolling(
        jet.get_list("q4"),
        lambda result: (result.category, result.price),
        {c: [w for w in got if w.auction.category == c] for c in {w.auction.category for w in got}},
        lambda bids: java_round(sum(b.price for b in bids) / len(bids)),
    )
    # and query 6 likewise per seller, ending at the mean of the seller's 10 latest winning bids
    check_rolling(
        jet.get_list("q6"),
        lambda result: (result.seller, result.price),
        {s: [w for w in got if w.auction.seller == s] for s in {w.auction.seller for w in got}},
        lambda bids: java_round(
            sum(b.price for b in sorted(bids, key=lambda b: (b.date_time, b.price))[-10:])
            / min(len(bids), 10)
        ),
    )


def check_rolling(
    results: list[Any],
    key_and_price: Callable[[Any], tuple[int, int]],
    bids_by_key: dict[int, list[AuctionBid]],
    final: Callable[[list[AuctionBid]], int],
) -> None:
    """Per key: one result per winning bid, each within the bids' prices, one of them the final mean."""
    prices: dict[int, list[int]] = collections.defaultdict(list)
    for result in results:
        key, price = key_and_price(result)
        prices[key].append(price)
    assert prices.keys() == bids_by_key.keys()
    for key, bids in bids_by_key.items():
        assert len(prices[key]) == len(bids), key
        assert all(min(b.price for b in bids) <= price <= max(b.price for b in bids) for price in prices[key])
        assert final(bids) in prices[key], key


def an_auction(auction_id: int, opens: int, expires: int, reserve: int = 100) -> Auction:
    return Auction(auction_id, "item", "", reserve // 2, reserve, opens, expires, 1, 10, "")


def a_bid(auction_id: int, price: int, date_time: int) -> PricedBid:
    return (auction_id, 2, price, date_time)


def partial_winners(*inputs: list[Any]) -> TestSupport:
    """A verification of winning bids' partial stage over ``inputs`` (local events, broadcast auctions)."""
    support = verify_processor(partial_winning_bids_p(ttl=5_000))
    return support.inputs(inputs, priorities=[1, 0]).disable_complete_call()


def opened(auction: Auction) -> tuple[int, tuple[int, AuctionOrBid]]:
    """``auction`` as winning bids' input, timestamped."""
    return (auction.date_time, (auction.id, auction_fields(auction)))


def partial(auction: Auction, price: int, date_time: int) -> PartialWinner:
    return (auction_fields(auction), 2, price, date_time)


def test_an_auction_reusing_an_id_closes_the_earlier_auction_and_starts_afresh() -> None:
    # given an auction with a valid best bid, a bid for the next auction of its id that came early
    # (only early for the state: made while the first auction was open) and a bid under the reserve
    first, second = an_auction(7, 0, 1_000), an_auction(7, 500, 2_000, reserve=300)
    bids = [a_bid(7, 150, 100), a_bid(7, 400, 200), a_bid(7, 90, 300)]
    # when the next auction of the id comes before the first expires, then a bid for it, and the
    # watermark passes both
    events = [opened(first), *((b[3], b) for b in bids), opened(second), (600, a_bid(7, 350, 600))]
    # then the first auction closed at once with its best bid, timestamped when the second opened
    # (no later bid counts for it), the second started with no best bid of its own (the first's 400
    # would win it) and closed at its expires
    expected = [(500, partial(first, 400, 200)), (2_000, partial(second, 350, 600)), Watermark(2_000)]
    partial_winners([*events, Watermark(2_000)], []).expect_output(expected)


def test_early_bids_still_count_and_a_reopened_auction_without_a_valid_bid_closes_silently() -> None:
    # given bids that came before any auction of the id: one before the auction, one at its own time
    early = [(40, a_bid(3, 500, 40)), (50, a_bid(3, 350, 50))]
    # when the auction comes, then two more auctions of the id, with no bid in between
    first, second, third = an_auction(3, 50, 900, 300), an_auction(3, 60, 900), an_auction(3, 70, 900)
    # then the early bid at the auction's time won the first, the second and third closed with nothing
    partial_winners(early + [opened(a) for a in (first, second, third)] + [Watermark(900)], []).expect_output(
        [(60, partial(first, 350, 50)), Watermark(900)]
    )


def test_an_auction_opens_once_however_many_copies_come_and_a_closed_one_not_again() -> None:
    # given auctions 1 and 2 broadcast (read first), auction 1 also among the local events with bids
    # for both, and a copy of auction 3 after the watermark passed its expires
    one, two, three = an_auction(1, 0, 1_000), an_auction(2, 0, 1_000), an_auction(3, 0, 300)
    broadcast = [opened(one), opened(two)]
    local = [opened(one), (10, a_bid(1, 200, 10)), (20, a_bid(2, 300, 20)), Watermark(500)]
    late = [opened(three), (400, a_bid(3, 900, 290))]
    # when the watermark passes the auctions' expires
    events = local + late + [Watermark(1_000)]
    # then each auction with a valid bid closed once with it; the late copy of auction 3 opened nothing
    partial_winners(events, broadcast).expect_output(
        [Watermark(500), (1_000, partial(one, 200, 10)), (1_000, partial(two, 300, 20)), Watermark(1_000)]
    )


def test_a_restored_processor_merges_what_every_processor_saved_and_closes_reopened_auctions() -> None:
    # given what three processors saved: one still holding auction 7 with a best bid of 300, one
    # that saw auction 7 reopened (at 500) and holds the newer one with 350, one holding the newer
    # one with 380 (made earlier) and an early bid for an auction that never came
    first, second = an_auction(7, 0, 1_000), an_auction(7, 500, 2_000)
    old, new = auction_fields(first), auction_fields(second)
    saved = [
        (ProcessorKey(SNAPSHOT_TAG, 0), ([[old, 300, 100, 1]], {})),
        (ProcessorKey(SNAPSHOT_TAG, 1), ([[new, 350, 600, 3]], {})),
        (ProcessorKey(SNAPSHOT_TAG, 2), ([[new, 380, 550, 5]], {9: [a_bid(9, 500, 50)]})),
    ]
    processor = partial_winning_bids_p(ttl=5_000)()
    outbox = TestOutbox(1, 100)
    processor.init(outbox, make_context())
    # when one processor restores them all, and the watermark passes both auctions
    processor.restore_from_snapshot(Inbox(saved[::-1]))  # in any order
    assert processor.finish_snapshot_restore()
    done = Watermark(2_000)
    outputs: list[list[Any]] = [[]]
    for _ in range(10):  # the outbox takes the watermark once the outputs before it are drained
        accepted = processor.try_process_watermark(done)
        outbox.drain(outputs, [])
        if accepted:
            break
    # then the older auction closed as its id was reopened, with its saved best, and the newer one
    # at its expires with the best of the two saved for it; the early bid won nothing
    assert outputs[0] == [(500, (old, 1, 300, 100)), (2_000, (new, 5, 380, 550)), done]


def test_the_best_of_the_members_partial_winners_wins_and_ties_go_to_the_earlier_bid() -> None:
    # given partial winners of one auction from three members, two at the top price
    auction = an_auction(5, 0, 1_000)
    fields = auction_fields(auction)
    partials = [(fields, 1, 300, 90), (fields, 2, 400, 80), (fields, 3, 400, 70)]
    # when the combining step folds them in any order
    for order in itertools.permutations(partials):
        state = no_winner_yet()
        for one in order:
            best_of_partials(state, auction_key(one), one)
        # then the winner is the earlier of the two at the top price, with the whole auction
        assert winner(state, (5, 0), 1_001) == AuctionBid(auction, 3, 400, 70)


def test_query_4_runs_on_a_two_member_cluster() -> None:
    # given the reference winners, the surely closed auctions among them, and a cluster of two members
    winners = plain_winners(SLOW_GENERATED)
    category_of = {a.id: a.category for a in SLOW_GENERATED if isinstance(a, Auction)}
    closed = surely_closed(SLOW_GENERATED, max_auction_duration_ms(SLOW_CONFIG)) & winners.keys()
    closed_per_category = collections.Counter(category_of[a] for a in closed)
    prices: dict[int, list[int]] = collections.defaultdict(list)
    for auction, bid in winners.items():
        prices[category_of[auction]].append(bid.price)
    with local_cluster(2) as client:
        p = Pipeline()
        q4_average_price_by_category(event_stage(p, SLOW_CONFIG), SLOW_CONFIG).write_to(Sinks.list("q4"))
        # when query 4 runs until one result per surely closed auction is out
        run_until(client, p, has_sizes(client, {"q4": len(closed)}))
        got: list[CategoryPrice] = list(client.get_list("q4"))
    # then each category had at least its surely closed auctions averaged, within its winning prices
    per_category = collections.Counter(result.category for result in got)
    assert all(per_category[c] >= n for c, n in closed_per_category.items())
    assert all(min(prices[r.category]) <= r.price <= max(prices[r.category]) for r in got)


# --------------------------------------------------------------------------- queries 5, 7 and 8


def plain_hot_items(window_ms: int, slide_ms: int) -> dict[int, list[tuple[int, int]]]:
    """Query 5 by brute force: per window end, the auction with the most bids (ties: the higher id)."""
    counts: dict[int, collections.Counter[int]] = collections.defaultdict(collections.Counter)
    for bid in BIDS:
        first_end = bid.date_time - bid.date_time % slide_ms + slide_ms
        for end in range(first_end, first_end + window_ms, slide_ms):
            counts[end][bid.auction] += 1
    return {end: [max((n, a) for a, n in c.items())[::-1]] for end, c in counts.items()}


def plain_highest_bids(window_ms: int) -> dict[int, collections.Counter[Bid]]:
    """Query 7 by brute force: per window start, the bids at the window's highest price."""
    windows: dict[int, list[Bid]] = collections.defaultdict(list)
    for bid in BIDS:
        windows[bid.date_time - bid.date_time % window_ms].append(bid)
    return {
        start: collections.Counter(b for b in bids if b.price == max(b.price for b in bids))
        for start, bids in windows.items()
    }


def plain_new_users(window_ms: int) -> collections.Counter[IdNameReserve]:
    """Query 8 by nested loops over the closed windows: people with the auctions they opened in them."""
    found: collections.Counter[IdNameReserve] = collections.Counter()
    for person in PEOPLE:
        window = person.date_time // window_ms
        if (window + 1) * window_ms > CLOSED_BEFORE:
            continue
        for auction in AUCTIONS:
            if auction.seller == person.id and auction.date_time // window_ms == window:
                found[IdNameReserve(person.id, person.name, auction.reserve)] += 1
    return found


def test_window_queries_5_7_and_8_match_plain_python(jet: jetlet.EmbeddedInstance) -> None:
    # given the references over the windows that surely close within the stream
    window_5, slide_5, window_7, window_8 = 100, 20, 20, 100
    hot = {end: best for end, best in plain_hot_items(window_5, slide_5).items() if end <= CLOSED_BEFORE}
    highest = {s: c for s, c in plain_highest_bids(window_7).items() if s + window_7 <= CLOSED_BEFORE}
    new_users = plain_new_users(window_8)
    assert len(hot) >= 10 and len(highest) >= 20 and new_users.total() >= 5
    p = Pipeline()
    stage = event_stage(p)
    q5_hot_items(stage, window_5, slide_5).write_to(Sinks.list("q5"))
    q7_highest_bid(stage, window_7).write_to(Sinks.list("q7"))
    q8_monitor_new_users(stage, window_8).write_to(Sinks.list("q8"))
    expected_7 = sum(highest.values(), collections.Counter[Bid]())
    # when they run until those windows' results are out
    run_until(jet, p, has_sizes(jet, {"q5": len(hot), "q7": expected_7.total(), "q8": new_users.total()}))
    # then query 5 named each window's hottest auction
    assert {end: best for end, best in jet.get_list("q5") if end <= CLOSED_BEFORE} == hot
    # and query 7 gave each closed window's highest bids, and nothing of a window still open
    assert collections.Counter(jet.get_list("q7")) == expected_7
    # and query 8 each new person's auctions of their window
    assert collections.Counter(jet.get_list("q8")) == new_users


@pytest.mark.parametrize("broadcast_people", [True, False], ids=["people broadcast", "keyed both ways"])
def test_query_8_on_a_two_member_cluster_matches_plain_python(broadcast_people: bool) -> None:
    # given the reference over the windows that surely close, and a cluster of two members, where
    # either the people go to every member's join of its own auctions, or query 8's window runs in
    # one stage (to_list collects its items) and people and auctions of one person cross to the
    # member that owns their key
    window_8 = 100
    new_users = plain_new_users(window_8)
    assert new_users.total() >= 5
    with local_cluster(2) as client:
        p = Pipeline()
        q8_monitor_new_users(event_stage(p), window_8, broadcast_people=broadcast_people).write_to(
            Sinks.list("q8")
        )
        assert not [v.name for v in p.to_dag().vertices() if v.name.endswith("-prepare")]
        # when it runs until those windows' results are out
        run_until(client, p, has_sizes(client, {"q8": new_users.total()}))
        got = collections.Counter(client.get_list("q8"))
    # then each new person's auctions of their window came out once, and nothing else
    assert got == new_users
