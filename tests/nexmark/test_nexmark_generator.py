"""The NEXMark generator: Beam's proportions, id logic and timing, as pure functions of the number."""

from __future__ import annotations

import pickle

import pytest

from jetlet.nexmark import Auction, Bid, GeneratorConfig, Person, event, events
from jetlet.nexmark.generator import AUCTION_ID_LEAD, PERSON_ID_LEAD, JavaRandom
from jetlet.nexmark.joins import SellerState

COUNT = 50_000
CONFIG = GeneratorConfig()


@pytest.fixture(scope="module")
def stream() -> list[Person | Auction | Bid]:
    return list(events(0, COUNT, 1, CONFIG))


def test_java_random_reproduces_java_util_random() -> None:
    # given generators seeded as Java programs seed theirs, when drawn, then Java's known values come out
    assert JavaRandom(42).next_int() == -1170105035
    assert JavaRandom(0).next_int() == -1155484576
    assert JavaRandom(42).next_double() == pytest.approx(0.7275636800328681, abs=1e-16)
    assert JavaRandom(42).next_int(10) == 0
    assert [JavaRandom(7).next_int(16) for _ in range(2)] == [JavaRandom(7).next_int(16)] * 2


def test_the_same_number_gives_the_same_event() -> None:
    # given some event numbers, when generated twice (also inside a range), then the events are equal
    numbers = [0, 1, 4, 49, 50, 777, 12_345]
    assert [event(n, CONFIG) for n in numbers] == [event(n, CONFIG) for n in numbers]
    assert list(events(40, 60, 1, CONFIG)) == [event(n, CONFIG) for n in range(40, 60)]
    # and different numbers give different bids
    assert event(10, CONFIG) != event(11, CONFIG)


def test_every_block_of_50_has_one_person_three_auctions_and_46_bids(
    stream: list[Person | Auction | Bid],
) -> None:
    # given 50,000 events, when their kinds are read per block of 50, then each block is P, A x 3, B x 46
    expected = [Person] + [Auction] * 3 + [Bid] * 46
    for block in range(COUNT // 50):
        assert [type(e) for e in stream[block * 50 : block * 50 + 50]] == expected


def test_new_ids_are_consecutive_and_references_use_the_last_id_logic(
    stream: list[Person | Auction | Bid],
) -> None:
    # given the stream in order, tracking the last person and auction seen (a plain-Python reference)
    first_id = 1000
    last_person, last_auction = first_id - 1, first_id - 1
    existing_auctions = existing_bidders = bids = 0
    for item in stream:
        if isinstance(item, Person):
            # then a new person takes the next id
            assert item.id == last_person + 1
            last_person = item.id
        elif isinstance(item, Auction):
            assert item.id == last_auction + 1
            last_auction = item.id
            # and a seller is an existing person or at most PERSON_ID_LEAD ahead
            assert first_id <= item.seller <= last_person + PERSON_ID_LEAD
            assert 10 <= item.category < 15 and item.reserve >= item.initial_bid >= 1
        else:
            assert first_id <= item.auction <= last_auction + AUCTION_ID_LEAD
            assert first_id <= item.bidder <= last_person + PERSON_ID_LEAD
            assert item.auction >= last_auction - CONFIG.num_in_flight_auctions - 100
            assert item.bidder >= last_person - CONFIG.num_active_people - 100
            bids += 1
            existing_auctions += item.auction <= last_auction
            existing_bidders += item.bidder <= last_person
    # and nearly every bid refers to an auction and a bidder that exist already
    assert existing_auctions / bids > 0.9 and existing_bidders / bids > 0.9
    assert last_person == first_id + COUNT // 50 - 1 and last_auction == first_id + COUNT // 50 * 3 - 1


def test_event_times_follow_the_number_at_the_configured_rate(stream: list[Person | Auction | Bid]) -> None:
    # given the default rate of 10,000 events/s (100 us apart), then event n happens at base + n * 0.1 ms
    times = [item.date_time for item in stream]
    assert times == [n * 100 // 1000 for n in range(COUNT)]
    assert times == sorted(times)
    # and at another rate and base time the same holds with that gap
    slow = GeneratorConfig(first_event_rate=1000, base_time=1_700_000_000_000)
    assert [event(n, slow).date_time for n in range(0, 500, 7)] == [
        1_700_000_000_000 + n for n in range(0, 500, 7)
    ]
    # and auctions expire after they open
    assert all(item.expires > item.date_time for item in stream if isinstance(item, Auction))


def test_two_slices_cover_every_event_once() -> None:
    # given the slices of 2 processors (every 2nd number from 0 and from 1)
    count = 5_001
    first = list(events(0, count, 2, CONFIG))
    second = list(events(1, count, 2, CONFIG))
    # when interleaved, then they are the whole stream, each event once
    merged = [first[n // 2] if n % 2 == 0 else second[n // 2] for n in range(count)]
    assert len(first) + len(second) == count
    assert merged == list(events(0, count, 1, CONFIG))


def test_out_of_order_groups_shuffle_events_within_each_group() -> None:
    # given groups of 10 events delivered out of order
    config = GeneratorConfig(out_of_order_group_size=10)
    count = 1_000
    shuffled = list(events(0, count, 1, config))
    in_order = list(events(0, count, 1, CONFIG))
    # then each group holds the same events as in order, but not in the same order
    for start in range(0, count, 10):
        group = shuffled[start : start + 10]
        assert sorted(map(repr, group)) == sorted(map(repr, in_order[start : start + 10]))
        # and no event of a group is earlier than the group's watermark number's time
        assert min(item.date_time for item in group) >= config.timestamp(config.watermark_number(start))
    assert shuffled != in_order


def test_unbounded_events_and_invalid_arguments() -> None:
    # given no stop, then the iterator keeps going
    endless = events(3, None, 5, CONFIG)
    assert [next(endless) for _ in range(3)] == [event(3), event(8), event(13)]
    # and bad arguments are refused with a reason
    with pytest.raises(ValueError, match="first_event_rate must be an int >= 1"):
        GeneratorConfig(first_event_rate=0)
    with pytest.raises(ValueError, match="step must be >= 1"):
        next(events(0, 10, 0))
    with pytest.raises(ValueError, match="event numbers start at 0"):
        event(-1)


def test_events_and_query_state_pickle_as_their_fields(stream: list[Person | Auction | Bid]) -> None:
    # given events of every kind and the queries' mutable state classes
    person = next(e for e in stream if isinstance(e, Person))
    auctions = [e for e in stream[:200] if isinstance(e, Auction)]
    state = SellerState(person, auctions[:2])
    values = [*stream[:100], state, SellerState()]
    # when pickled and loaded, then each is equal to the original and a separate object
    loaded = [pickle.loads(pickle.dumps(value, protocol=5)) for value in values]
    assert loaded == values
    assert all(a is not b for a, b in zip(loaded, values, strict=True))
    # and the mutable state's list is copied, not shared
    assert loaded[100].waiting is not state.waiting
    # and the reduced form is the class and the field values, not a dict of slots
    assert state.__reduce__() == (SellerState, (person, auctions[:2]))
