"""A fast NEXMark event generator for benchmarks, configured as the Jet paper's (VLDB 2021, §7.1).

Beam's generator (:mod:`jetlet.nexmark.generator`) draws every field from a Java ``Random`` seeded
with the event id and pads events with random strings: faithful, but about 33,000 events/s in
Python, far below what a benchmark has to feed a query. The Jet paper's benchmark uses a simpler
generator: "10 thousand distinct keys", keys "drawn randomly", person : auction : bid = 1 : 3 : 46,
and an event time that is a deterministic function of the event number at the configured rate.
This module is that generator; its events are the same :mod:`~jetlet.nexmark.model` classes, so
every query runs on both generators.

Theory of operation: event number ``n`` is a pure function of ``n`` and the :class:`FastConfig`.

* its kind: ``n % 50`` is 0 for a :class:`~jetlet.nexmark.model.Person`, 1 to 3 for an
  :class:`~jetlet.nexmark.model.Auction`, 4 to 49 for a :class:`~jetlet.nexmark.model.Bid`;
* its time: ``base_time + n * 1000 // rate`` epoch ms, so with ``base_time`` the wall-clock start of
  a run and a source paced at ``rate``, an event's time is its scheduled emission time (to the ms);
* its keys and values: fixed tables (seeded, the same in every process) of 65,536 random auction
  ids, person ids and prices, with ``keys`` distinct ids each. ``n``'s low 16 bits ``lo`` and high
  bits ``hi`` pick two table positions ``a = (lo + rotation_a[hi]) % 65536`` and
  ``b = (lo + rotation_b[hi]) % 65536``: a bid's auction and price are at ``a``, its bidder at
  ``b``; an auction's id and initial bid at ``a``, its seller at ``b``; a person's id at ``a``. So
  the ids are random draws among ``keys`` values and the sequence repeats only after 2**32 events.
  A person's city and state are picked by their id, and an auction's category by its id (so an id
  keeps them when it recurs), an auction's length by the price at ``b``: table values, random in
  every block. (Picked by ``a`` or ``b`` themselves they would not be: inside a block those move by
  50 from one person to the next, so a block's people would all live in one place.) The strings
  are picked from small fixed tuples, never made per event; ``extra`` is empty (the paper's
  generator does not pad events to Beam's average sizes either).

Why tables: a processor's numbers are a strided ``range`` and inside one block of 65,536 numbers
``hi`` is constant, so :func:`fast_events` gets every id and price of a batch as C-speed strided
slices of the tables and its loop only makes the objects. Cost per event, measured with
``timeit`` on the 2-core development VM (Python 3.11, a noisy machine): about 0.6 µs when each
event hashed its number (two 32-bit hashes, then ``%``), about 0.25-0.3 µs with the slices, of
which ~0.17 µs is creating the ``Bid`` (see :mod:`jetlet.nexmark.model`); Beam's generator costs
about 30 µs per event. :func:`fast_event` computes one event the slow, obvious way; the tests check
that both agree.

>>> config = FastConfig(rate=1000, base_time=0)
>>> [type(e).__name__ for e in fast_events(range(5), config)]
['Person', 'Auction', 'Auction', 'Auction', 'Bid']
>>> fast_event(4, config) == fast_events(range(4, 5), config)[0]
True
>>> fast_event(2000, config).date_time  # event 2000 at 1000 events/s: 2 s after base_time
2000
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import random
from collections.abc import Iterable, Sequence

from jetlet.nexmark.generator import FIRST_AUCTION_ID, FIRST_CATEGORY_ID, FIRST_PERSON_ID, NUM_CATEGORIES
from jetlet.nexmark.model import Auction, Bid, Event, Person

PROPORTION_DENOMINATOR = 50
"""Of every 50 numbers, 1 is a person, 3 are auctions and 46 are bids."""
FIRST_BID_KIND = 4
"""``n % 50`` at and above this is a bid; 1 to 3 an auction; 0 a person."""
DEFAULT_KEYS = 10_000
"""The Jet paper's number of distinct keys."""
BLOCK_BITS = 16
BLOCK = 1 << BLOCK_BITS
"""Numbers per block: the table size; ``hi`` (the number's bits above these) is constant in a block."""
MASK = BLOCK - 1
TABLE_SEED = 20_210_801
"""Seed of the tables: fixed, so every process generates the same events."""
MIN_PRICE_CENTS = 100
MAX_PRICE_CENTS = 100_000
AUCTION_LENGTHS_S = 10
"""An auction expires 1 to this many seconds after it opens (:func:`auction_length_ms`)."""

_FIRST_NAMES = (
    "Peter",
    "Paul",
    "Luke",
    "John",
    "Saul",
    "Vicky",
    "Kate",
    "Julie",
    "Sarah",
    "Deiter",
    "Walter",
)
_LAST_NAMES = ("Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris")
_NAMES = tuple(f"{first} {last}" for first in _FIRST_NAMES for last in _LAST_NAMES)
_EMAILS = tuple(f"{first.lower()}@{last.lower()}.com" for first in _FIRST_NAMES for last in _LAST_NAMES)
_CARDS = tuple(f"{i:04d} {i * 7 % 10_000:04d} {i * 13 % 10_000:04d} {i * 31 % 10_000:04d}" for i in range(97))
_PLACES = (
    ("Phoenix", "AZ"),
    ("Los Angeles", "CA"),
    ("San Francisco", "CA"),
    ("Boise", "ID"),
    ("Portland", "OR"),
    ("Bend", "OR"),
    ("Redmond", "WA"),
    ("Seattle", "WA"),
    ("Kent", "WA"),
    ("Cheyenne", "WY"),
)
_ITEMS = tuple(f"item {i}" for i in range(101))
_DESCRIPTIONS = tuple(f"a fine item, lot {i}" for i in range(103))


@dataclasses.dataclass(frozen=True, slots=True)
class FastConfig:
    """What the fast generator needs."""

    rate: int = 1_000_000
    """Events per second of the whole stream: event ``n``'s time is ``base_time + n * 1000 // rate``."""
    base_time: int = 0
    """Event time (epoch ms) of event number 0; a benchmark sets it to the run's wall-clock start."""
    keys: int = DEFAULT_KEYS
    """Distinct ids of people and of auctions (each)."""

    def __post_init__(self) -> None:
        for name in ("rate", "keys"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"FastConfig.{name} must be an int >= 1, got {value!r}")
        if not isinstance(self.base_time, int) or isinstance(self.base_time, bool):
            raise ValueError(f"FastConfig.base_time must be an int (epoch ms), got {self.base_time!r}")

    def timestamp(self, number: int) -> int:
        """The event time (epoch ms) of event ``number``."""
        return self.base_time + number * 1000 // self.rate


@dataclasses.dataclass(frozen=True, slots=True)
class _Tables:
    """The random tables for one number of keys; the value tables are doubled so slices never wrap."""

    auctions: list[int]
    people: list[int]
    prices: list[int]
    rotation_a: list[int]
    rotation_b: list[int]


@functools.lru_cache(maxsize=4)
def _tables(keys: int) -> _Tables:
    draw = random.Random(TABLE_SEED)
    auctions = [FIRST_AUCTION_ID + draw.randrange(keys) for _ in range(BLOCK)]
    people = [FIRST_PERSON_ID + draw.randrange(keys) for _ in range(BLOCK)]
    prices = [MIN_PRICE_CENTS + draw.randrange(MAX_PRICE_CENTS) for _ in range(BLOCK)]
    rotation_a = [draw.randrange(BLOCK) for _ in range(BLOCK)]
    rotation_b = [draw.randrange(BLOCK) for _ in range(BLOCK)]
    return _Tables(auctions * 2, people * 2, prices * 2, rotation_a, rotation_b)


def auction_length_ms(draw: int) -> int:
    """How long an auction is open (``expires - date_time``) for a random table value ``draw``."""
    return 1000 * (1 + draw % AUCTION_LENGTHS_S)


def max_auction_duration_ms() -> int:
    """The longest an auction of this generator is open, whatever the :class:`FastConfig`.

    A bound for the state time-to-live of queries 4 and 6
    (:func:`jetlet.nexmark.joins.winning_bids`' ``ttl_ms``).
    """
    return max(auction_length_ms(draw) for draw in range(AUCTION_LENGTHS_S))


def _person(a: int, b: int, timestamp: int, tables: _Tables) -> Person:
    person_id = tables.people[a]
    city, state = _PLACES[person_id % len(_PLACES)]
    return Person(
        person_id,
        _NAMES[b % len(_NAMES)],
        _EMAILS[a % len(_EMAILS)],
        _CARDS[b % len(_CARDS)],
        city,
        state,
        timestamp,
        "",
    )


def _auction(a: int, b: int, timestamp: int, tables: _Tables) -> Auction:
    initial_bid = tables.prices[a]
    auction_id = tables.auctions[a]
    return Auction(
        auction_id,
        _ITEMS[a % len(_ITEMS)],
        _DESCRIPTIONS[b % len(_DESCRIPTIONS)],
        initial_bid,
        initial_bid * 2,
        timestamp,
        timestamp + auction_length_ms(tables.prices[b]),
        tables.people[b],
        FIRST_CATEGORY_ID + auction_id % NUM_CATEGORIES,
        "",
    )


def fast_event(number: int, config: FastConfig) -> Event:
    """Event ``number``, computed on its own (the reference :func:`fast_events` must agree with)."""
    tables = _tables(config.keys)
    low, high = number & MASK, (number >> BLOCK_BITS) & MASK
    a = (low + tables.rotation_a[high]) & MASK
    b = (low + tables.rotation_b[high]) & MASK
    timestamp = config.timestamp(number)
    kind = number % PROPORTION_DENOMINATOR
    if kind >= FIRST_BID_KIND:
        return Bid(tables.auctions[a], tables.people[b], tables.prices[a], timestamp, "")
    if kind:
        return _auction(a, b, timestamp, tables)
    return _person(a, b, timestamp, tables)


def _block_segments(numbers: range) -> Iterable[range]:
    """``numbers`` (step > 0) cut where ``hi`` changes: each part lies in one block."""
    while numbers:
        first = numbers[0]
        block_end = ((first >> BLOCK_BITS) + 1) << BLOCK_BITS
        count = (block_end - first + numbers.step - 1) // numbers.step
        yield numbers[:count]
        numbers = numbers[count:]


def _segment_events(numbers: range, config: FastConfig, tables: _Tables, out: list[Event]) -> None:
    """Append the events of ``numbers``, which lie in one block: ids and prices are table slices."""
    step, first = numbers.step, numbers[0]
    low, high = first & MASK, (first >> BLOCK_BITS) & MASK
    a0 = low + tables.rotation_a[high]
    b0 = low + tables.rotation_b[high]
    span = (len(numbers) - 1) * step + 1
    auctions = tables.auctions[a0 : a0 + span : step]
    bidders = tables.people[b0 : b0 + span : step]
    prices = tables.prices[a0 : a0 + span : step]
    base, rate = config.base_time, config.rate
    append = out.append
    for number, auction, bidder, price in zip(numbers, auctions, bidders, prices, strict=True):
        if number % PROPORTION_DENOMINATOR >= FIRST_BID_KIND:
            append(Bid(auction, bidder, price, base + number * 1000 // rate, ""))
        else:
            append(fast_event(number, config))


def fast_events(numbers: Sequence[int], config: FastConfig) -> list[Event]:
    """The events of ``numbers``, in their order: the batch form a source calls once per fill.

    A ``range`` with a positive step (what a source's cursor hands out) takes the fast path of
    table slices; any other sequence (a cursor restored from a snapshot may skip numbers) is made
    event by event with :func:`fast_event`.
    """
    out: list[Event] = []
    if isinstance(numbers, range) and numbers.step > 0:
        tables = _tables(config.keys)
        for segment in _block_segments(numbers):
            _segment_events(segment, config, tables, out)
    else:
        out.extend(fast_event(number, config) for number in numbers)
    return out


# --------------------------------------------------------------------------- lanes by auction


def auction_lane(number: int, config: FastConfig, lanes: int) -> int:
    """The lane (of ``lanes``) that event ``number`` belongs to when the stream is split by auction.

    An event's *auction slot* is the auction table's value at its position ``a``: a bid's auction, an
    auction's id (a person, which has no auction, is spread by it too). Its lane is that slot modulo
    ``lanes``: every bid and the auction of one id are in one lane, as in a topic partitioned by
    auction id.
    """
    tables = _tables(config.keys)
    low, high = number & MASK, (number >> BLOCK_BITS) & MASK
    return tables.auctions[(low + tables.rotation_a[high]) & MASK] % lanes


@dataclasses.dataclass(frozen=True, slots=True)
class _Lane:
    """The table positions of one lane, doubled as the tables are, with their auctions and prices."""

    positions: list[int]
    auctions: list[int]
    prices: list[int]


SCAN_FACTOR = 16
"""A call of :func:`lane_events` passes at most ``limit * lanes`` times this many numbers: with few keys
a lane may hold far fewer than its share of them (or none), and the caller goes on from where it
stopped."""


@functools.lru_cache(maxsize=64)
def _lane(keys: int, lane: int, lanes: int) -> _Lane:
    tables = _tables(keys)
    positions = [p for p in range(2 * BLOCK) if tables.auctions[p] % lanes == lane]
    return _Lane(positions, [tables.auctions[p] for p in positions], [tables.prices[p] for p in positions])


def lane_events(
    start: int, stop: int, limit: int, config: FastConfig, lane: int, lanes: int
) -> tuple[list[Event], int]:
    """The events of lane ``lane`` of ``lanes`` (:func:`auction_lane`) among numbers ``start`` up to
    ``stop``, at most ``limit`` of them, in order; and the number to go on from (it passes at most
    :data:`SCAN_FACTOR` ``* limit * lanes`` numbers).

    Inside a block a number's position is ``a0 + (number - first)``, so the lane's numbers in a run
    of numbers are a slice of the lane's sorted positions (found by bisection), and their auctions
    and prices slices of its tables: a number outside the lane costs nothing.

    >>> config = FastConfig(rate=1000, base_time=0)
    >>> events, after = lane_events(0, 500, 1024, config, 0, 2)
    >>> everything = fast_events(range(500), config)
    >>> after, events == [e for n, e in enumerate(everything) if auction_lane(n, config, 2) == 0]
    (500, True)
    """
    if lanes == 1:  # every number is the lane's: the strided path's slices
        end = min(stop, start + limit)
        return fast_events(range(start, end), config), max(start, end)
    stop = min(stop, start + limit * lanes * SCAN_FACTOR)  # a call stays short, even in an empty lane
    tables = _tables(config.keys)
    own = _lane(config.keys, lane, lanes)
    positions, auctions_of, prices_of = own.positions, own.auctions, own.prices
    people = tables.people
    base, rate = config.base_time, config.rate
    out: list[Event] = []
    append = out.append
    number = start
    while number < stop and len(out) < limit:
        low, high = number & MASK, (number >> BLOCK_BITS) & MASK
        end = min(stop, ((number >> BLOCK_BITS) + 1) << BLOCK_BITS)
        a0 = low + tables.rotation_a[high]
        first = bisect.bisect_left(positions, a0)
        last = bisect.bisect_left(positions, a0 + end - number, first)
        if last - first > limit - len(out):
            last = first + limit - len(out)
            end = positions[last - 1] - a0 + number + 1
        to_number = number - a0
        to_bidder = low + tables.rotation_b[high] - a0
        for position, auction, price in zip(
            positions[first:last], auctions_of[first:last], prices_of[first:last], strict=True
        ):
            at = position + to_number
            if at % PROPORTION_DENOMINATOR >= FIRST_BID_KIND:
                append(Bid(auction, people[position + to_bidder], price, base + at * 1000 // rate, ""))
            else:
                append(fast_event(at, config))
        number = end
    return out, number
