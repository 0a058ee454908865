"""The NEXMark event generator, reproducing Apache Beam's ``sources.generator`` package.

Theory of operation: the stream is a pure function of the event *number*. Event number ``n``
becomes the event id ``first_event_id + adjusted(n)``, where ``adjusted`` permutes the numbers
inside groups of ``out_of_order_group_size`` (Beam's ``nextAdjustedEventNumber``; the identity for
the default group size 1). The id decides everything else:

* its kind: of every 50 ids the first is a :class:`Person`, the next 3 are :class:`Auction` and
  the last 46 are :class:`Bid` events (Beam's 1:3:46 proportions);
* its data: a Java ``java.util.Random`` seeded with the id draws the fields in Beam's order, so the
  values are those Beam generates for the same id;
* its ids: a new person or auction takes the next id ("last id" logic); a bid or auction refers to
  a hot (recent, popular) person or auction most of the time, otherwise to a random one among the
  active people or in-flight auctions, possibly a few ids ahead (Beam's ``*_ID_LEAD``);
* its time: ``base_time + adjusted(n) * inter_event_delay_us / 1000`` ms, the delay being the
  period of ``first_event_rate`` events per second (so times increase with ``n`` when events are
  in order).

Because nothing depends on earlier events, :func:`events` can produce any slice (every ``step``-th
number from ``start``), which is how parallel source processors split the stream, and a processor
restarts from a snapshot by just remembering its next number.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator

from jetlet.nexmark.model import Auction, Bid, Event, Person

FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID = 10

PERSON_PROPORTION = 1
AUCTION_PROPORTION = 3
BID_PROPORTION = 46
PROPORTION_DENOMINATOR = PERSON_PROPORTION + AUCTION_PROPORTION + BID_PROPORTION

NUM_CATEGORIES = 5
PERSON_ID_LEAD = 10
AUCTION_ID_LEAD = 10
HOT_SELLER_RATIO = 100
HOT_AUCTION_RATIO = 100
HOT_BIDDER_RATIO = 100
MIN_STRING_LENGTH = 3
OUT_OF_ORDER_MULTIPLIER = 953

US_STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
US_CITIES = (
    "Phoenix",
    "Los Angeles",
    "San Francisco",
    "Boise",
    "Portland",
    "Bend",
    "Redmond",
    "Seattle",
    "Kent",
    "Cheyenne",
)
FIRST_NAMES = ("Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter")
LAST_NAMES = ("Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris")


@dataclasses.dataclass(frozen=True, slots=True)
class GeneratorConfig:
    """What the generator needs; the defaults are those of Beam's ``NexmarkConfiguration``."""

    first_event_rate: int = 10_000
    """Events per second of the whole stream; sets the event-time gap between numbers."""
    base_time: int = 0
    """Event time (epoch ms) of event number 0."""
    first_event_id: int = 0
    num_active_people: int = 1000
    num_in_flight_auctions: int = 100
    hot_auction_ratio: int = 2
    hot_sellers_ratio: int = 4
    hot_bidders_ratio: int = 4
    avg_person_byte_size: int = 200
    avg_auction_byte_size: int = 500
    avg_bid_byte_size: int = 100
    out_of_order_group_size: int = 1
    auction_skip: int = 123
    """Query 2 keeps the bids on auctions whose id is a multiple of this."""

    def __post_init__(self) -> None:
        for name in (
            "first_event_rate",
            "num_active_people",
            "num_in_flight_auctions",
            "hot_auction_ratio",
            "hot_sellers_ratio",
            "hot_bidders_ratio",
            "out_of_order_group_size",
            "auction_skip",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"GeneratorConfig.{name} must be an int >= 1, got {value!r}")

    @property
    def inter_event_delay_us(self) -> int:
        """Microseconds between consecutive events (Beam's ``RateUnit.rateToPeriodUs``)."""
        rate = self.first_event_rate
        return (1_000_000 + rate // 2) // rate

    def timestamp(self, event_number: int) -> int:
        """The event time (epoch ms) of the event with this (adjusted) number."""
        return self.base_time + event_number * self.inter_event_delay_us // 1000

    def adjusted_number(self, event_number: int) -> int:
        """The number whose id and time event ``event_number`` carries, shuffled within its group."""
        size = self.out_of_order_group_size
        return event_number // size * size + event_number * OUT_OF_ORDER_MULTIPLIER % size

    def watermark_number(self, event_number: int) -> int:
        """The first number of the group: no later event carries an earlier time."""
        size = self.out_of_order_group_size
        return event_number // size * size


DEFAULT_CONFIG = GeneratorConfig()

_MASK_48 = (1 << 48) - 1
_MULTIPLIER = 0x5DEECE66D
_INT_31 = 1 << 31


def _to_int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def _to_int64(value: int) -> int:
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >> 63 else value


def _java_div(a: int, b: int) -> int:
    """Java's integer division, rounding towards zero."""
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b > 0) else -quotient


class JavaRandom:
    """``java.util.Random``'s linear congruential generator, bit for bit, for what Beam draws."""

    __slots__ = ("_seed",)

    def __init__(self, seed: int) -> None:
        self._seed = (seed ^ _MULTIPLIER) & _MASK_48

    def _next(self, bits: int) -> int:
        self._seed = (self._seed * _MULTIPLIER + 0xB) & _MASK_48
        return _to_int32(self._seed >> (48 - bits))

    def next_int(self, bound: int | None = None) -> int:
        """A signed 32-bit int, or with ``bound`` one uniformly in ``[0, bound)``."""
        if bound is None:
            return self._next(32)
        if bound <= 0:
            raise ValueError(f"bound must be positive, got {bound}")
        if bound & -bound == bound:
            return (bound * self._next(31)) >> 31
        while True:
            bits = self._next(31)
            value = bits % bound
            if bits - value + (bound - 1) < _INT_31:
                return value

    def next_long(self) -> int:
        """A signed 64-bit int."""
        return _to_int64((self._next(32) << 32) + self._next(32))

    def next_double(self) -> float:
        """A float uniformly in ``[0, 1)``."""
        return ((self._next(26) << 27) + self._next(27)) * 2.0**-53


def _java_round(value: float) -> int:
    return math.floor(value + 0.5)


def _next_long_below(random: JavaRandom, bound: int) -> int:
    """Beam's ``LongGenerator.nextLong``: uniform for small bounds, skewed beyond 2**31 - 1."""
    if bound < _INT_31 - 1:
        return random.next_int(bound)
    return abs(random.next_long()) % bound


def _next_price(random: JavaRandom) -> int:
    """A price in cents, log-uniform between $1 and $1,000,000."""
    return _java_round(math.pow(10.0, random.next_double() * 6.0) * 100.0)


def _next_string(random: JavaRandom, max_length: int) -> str:
    """Letters and spaces, 3 to ``max_length - 1`` long before trimming."""
    length = MIN_STRING_LENGTH + random.next_int(max_length - MIN_STRING_LENGTH)
    chars = [" " if random.next_int(13) == 0 else chr(ord("a") + random.next_int(26)) for _ in range(length)]
    return "".join(chars).strip()


def _next_exact_string(random: JavaRandom, length: int) -> str:
    """``length`` characters, six from each 32-bit draw (Java remainder semantics kept)."""
    chars: list[str] = []
    draw = 0
    left = 0
    for _ in range(length):
        if left == 0:
            draw = random.next_int()
            left = 6
        quotient = _java_div(draw, 26)
        chars.append(chr(ord("a") + draw - quotient * 26))
        draw = quotient
        left -= 1
    return "".join(chars)


def _next_extra(random: JavaRandom, current_size: int, desired_average_size: int) -> str:
    """Padding so that an event's size averages ``desired_average_size``."""
    if current_size > desired_average_size:
        return ""
    wanted = desired_average_size - current_size
    delta = _java_round(wanted * 0.2)
    size = wanted - delta + (0 if delta == 0 else random.next_int(2 * delta))
    return _next_exact_string(random, size)


def last_base0_person_id(event_id: int) -> int:
    """The id (from 0) of the latest person at ``event_id``; the new one's if it is a person."""
    epoch, offset = divmod(event_id, PROPORTION_DENOMINATOR)
    if offset >= PERSON_PROPORTION:
        offset = PERSON_PROPORTION - 1
    return epoch * PERSON_PROPORTION + offset


def last_base0_auction_id(event_id: int) -> int:
    """The id (from 0) of the latest auction at ``event_id``; the new one's if it is an auction."""
    epoch, offset = divmod(event_id, PROPORTION_DENOMINATOR)
    if offset < PERSON_PROPORTION:
        epoch -= 1
        offset = AUCTION_PROPORTION - 1
    elif offset >= PERSON_PROPORTION + AUCTION_PROPORTION:
        offset = AUCTION_PROPORTION - 1
    else:
        offset -= PERSON_PROPORTION
    return epoch * AUCTION_PROPORTION + offset


def _next_base0_person_id(event_id: int, random: JavaRandom, config: GeneratorConfig) -> int:
    """A random active person, up to :data:`PERSON_ID_LEAD` ids ahead of the latest."""
    num_people = last_base0_person_id(event_id) + 1
    active = min(num_people, config.num_active_people)
    return num_people - active + _next_long_below(random, active + PERSON_ID_LEAD)


def _next_base0_auction_id(event_id: int, random: JavaRandom, config: GeneratorConfig) -> int:
    """A random in-flight auction, up to :data:`AUCTION_ID_LEAD` ids ahead of the latest."""
    latest = last_base0_auction_id(event_id)
    lowest = max(latest - config.num_in_flight_auctions, 0)
    return lowest + _next_long_below(random, latest - lowest + 1 + AUCTION_ID_LEAD)


def _person(event_id: int, random: JavaRandom, timestamp: int, config: GeneratorConfig) -> Person:
    name = FIRST_NAMES[random.next_int(len(FIRST_NAMES))] + " " + LAST_NAMES[random.next_int(len(LAST_NAMES))]
    email = _next_string(random, 7) + "@" + _next_string(random, 5) + ".com"
    credit_card = " ".join(f"{random.next_int(10000):04d}" for _ in range(4))
    city = US_CITIES[random.next_int(len(US_CITIES))]
    state = US_STATES[random.next_int(len(US_STATES))]
    size = 8 + len(name) + len(email) + len(credit_card) + len(city) + len(state)
    extra = _next_extra(random, size, config.avg_person_byte_size)
    person_id = last_base0_person_id(event_id) + FIRST_PERSON_ID
    return Person(person_id, name, email, credit_card, city, state, timestamp, extra)


def _auction_length_ms(adjusted: int, random: JavaRandom, timestamp: int, config: GeneratorConfig) -> int:
    """A length averaging the time until ``num_in_flight_auctions`` more auctions are opened."""
    events_for_auctions = config.num_in_flight_auctions * PROPORTION_DENOMINATOR // AUCTION_PROPORTION
    horizon_ms = config.timestamp(adjusted + events_for_auctions) - timestamp
    return 1 + _next_long_below(random, max(horizon_ms * 2, 1))


def _auction(
    adjusted: int, event_id: int, random: JavaRandom, timestamp: int, config: GeneratorConfig
) -> Auction:
    if random.next_int(config.hot_sellers_ratio) > 0:
        seller = last_base0_person_id(event_id) // HOT_SELLER_RATIO * HOT_SELLER_RATIO
    else:
        seller = _next_base0_person_id(event_id, random, config)
    category = FIRST_CATEGORY_ID + random.next_int(NUM_CATEGORIES)
    initial_bid = _next_price(random)
    expires = timestamp + _auction_length_ms(adjusted, random, timestamp, config)
    item_name = _next_string(random, 20)
    description = _next_string(random, 100)
    reserve = initial_bid + _next_price(random)
    size = 8 + len(item_name) + len(description) + 8 + 8 + 8 + 8 + 8
    extra = _next_extra(random, size, config.avg_auction_byte_size)
    return Auction(
        last_base0_auction_id(event_id) + FIRST_AUCTION_ID,
        item_name,
        description,
        initial_bid,
        reserve,
        timestamp,
        expires,
        seller + FIRST_PERSON_ID,
        category,
        extra,
    )


def _bid(event_id: int, random: JavaRandom, timestamp: int, config: GeneratorConfig) -> Bid:
    if random.next_int(config.hot_auction_ratio) > 0:
        auction = last_base0_auction_id(event_id) // HOT_AUCTION_RATIO * HOT_AUCTION_RATIO
    else:
        auction = _next_base0_auction_id(event_id, random, config)
    if random.next_int(config.hot_bidders_ratio) > 0:
        bidder = last_base0_person_id(event_id) // HOT_BIDDER_RATIO * HOT_BIDDER_RATIO + 1
    else:
        bidder = _next_base0_person_id(event_id, random, config)
    price = _next_price(random)
    extra = _next_extra(random, 8 + 8 + 8 + 8, config.avg_bid_byte_size)
    return Bid(auction + FIRST_AUCTION_ID, bidder + FIRST_PERSON_ID, price, timestamp, extra)


def event(number: int, config: GeneratorConfig = DEFAULT_CONFIG) -> Event:
    """Event number ``number`` (from 0) of the stream; the same every time it is asked for."""
    if number < 0:
        raise ValueError(f"event numbers start at 0, got {number}")
    adjusted = config.adjusted_number(number)
    event_id = config.first_event_id + adjusted
    timestamp = config.timestamp(adjusted)
    random = JavaRandom(event_id)
    kind = event_id % PROPORTION_DENOMINATOR
    if kind < PERSON_PROPORTION:
        return _person(event_id, random, timestamp, config)
    if kind < PERSON_PROPORTION + AUCTION_PROPORTION:
        return _auction(adjusted, event_id, random, timestamp, config)
    return _bid(event_id, random, timestamp, config)


def events(
    start: int, stop: int | None, step: int = 1, config: GeneratorConfig = DEFAULT_CONFIG
) -> Iterator[Event]:
    """Events ``start``, ``start + step``, ... before ``stop`` (forever when ``stop`` is None)."""
    if step < 1:
        raise ValueError(f"step must be >= 1, got {step}")
    number = start
    while stop is None or number < stop:
        yield event(number, config)
        number += step
