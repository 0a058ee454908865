"""NEXMark queries 3, 4, 6 and 8: the queries that join people, auctions and bids.

All of them key one event stream by the id the joined events share and keep per-key state:

* **Query 3** (local item suggestion) is an *incremental* join: people and auctions keyed by the
  person id (``person.id`` / ``auction.seller``) meet in a keyed ``flat_map_stateful``, which
  remembers the person and answers every auction of theirs, including auctions that came first.
* **Winning bids** (the core of queries 4 and 6) is a broadcast join followed by a local-global
  aggregation (:mod:`jetlet.nexmark.partial_winners`): each member finds the best of its own bids
  for every auction, with the auctions broadcast to every member, and the partial winners meet by
  auction once the watermark passes its ``expires``. Bids, nearly every event, never leave their
  member. A bid is cut to a :data:`~jetlet.nexmark.partial_winners.PricedBid`, the four fields the
  join and its results read (as Flink SQL's planner prunes a join's inputs), an auction to the
  tuple of its field values, so both cross at the pickler's C speed. Beam's generator never reuses
  an auction id, but a generator with few keys (the Jet paper's, 10,000) does: a new auction on an
  id that still holds an earlier one closes the earlier one (no later bid can count for it).
* **Query 4** averages the winning prices per category (a keyed rolling average), **query 6** per
  seller over their last 10 winning bids (a keyed ``map_stateful`` holding those bids).
* **Query 8** (monitor new users) is a *window* join: people keyed by id and auctions keyed by seller
  co-aggregated into the same tumbling windows (``aggregate2``), each cut to the two fields the
  result reads.

The per-item logic is in plain module-level functions and state classes (picklable, testable alone).
Each keyed state has a ``copy_fn`` (:func:`copy_seller_state`, ``list.copy``):
events are never changed, so a copy needs new lists only, and a snapshot then costs the processing
thread a cheap copy of each state changed while the snapshot is stored instead of its pickle.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
from collections.abc import Callable, Iterable

from jetlet.aggregate import averaging, to_list
from jetlet.datamodel import KeyedWindowResult
from jetlet.nexmark import new_users
from jetlet.nexmark import partial_winners as wb
from jetlet.nexmark.generator import (
    AUCTION_PROPORTION,
    DEFAULT_CONFIG,
    PROPORTION_DENOMINATOR,
    GeneratorConfig,
)
from jetlet.nexmark.model import (
    Auction,
    AuctionBid,
    CategoryPrice,
    Event,
    IdNameReserve,
    NameCityStateId,
    Person,
    SellerPrice,
    pickled_by_fields,
)
from jetlet.pipeline import StreamStage, WindowDefinition

LOCAL_STATES = ("OR", "ID", "CA")
"""Query 3's states (Beam's)."""
LOCAL_CATEGORY = 10
"""Query 3's category (Beam's)."""
SELLER_STATE_TTL_MS = 600_000
"""How long query 3 keeps a seller's state after their latest event (Beam's ``maxAuctionsWaitingTime``)."""
LAST_AUCTIONS = 10
"""Query 6 averages over each seller's last this many winning bids."""


def java_round(value: float) -> int:
    """Java's ``Math.round``: half rounds up (Beam rounds the averages of queries 4 and 6 so)."""
    return math.floor(value + 0.5)


# --------------------------------------------------------------------------- query 3


@pickled_by_fields
@dataclasses.dataclass(slots=True)
class SellerState:
    """Query 3's state of one person id: the person once seen, and their auctions that came first."""

    person: Person | None = None
    waiting: list[Auction] = dataclasses.field(default_factory=list)


def copy_seller_state(state: SellerState) -> SellerState:
    """A copy for snapshots (``copy_fn``): the events are shared, the list is new."""
    return SellerState(state.person, list(state.waiting))


def local_person_or_auction(
    item: Event, states: tuple[str, ...] = LOCAL_STATES, category: int = LOCAL_CATEGORY
) -> Person | Auction | None:
    """A person living in one of ``states`` or an auction in ``category``; None for other events."""
    if isinstance(item, Person):
        return item if item.state in states else None
    if isinstance(item, Auction):
        return item if item.category == category else None
    return None


def seller_id(item: Person | Auction) -> int:
    """The person id a person or an auction belongs to (``person.id``, ``auction.seller``)."""
    return item.id if isinstance(item, Person) else item.seller


def _name_city_state_id(person: Person, auction: Auction) -> NameCityStateId:
    return NameCityStateId(person.name, person.city, person.state, auction.id)


def join_seller(state: SellerState, _key: int, item: Person | Auction) -> list[NameCityStateId] | None:
    """Query 3's step: a person answers the auctions waiting for them, an auction its known seller."""
    if isinstance(item, Person):
        state.person = item
        matched = [_name_city_state_id(item, auction) for auction in state.waiting]
        state.waiting = []
        return matched
    if state.person is None:
        state.waiting.append(item)
        return None
    return [_name_city_state_id(state.person, item)]


def q3_local_item_suggestion(
    events: StreamStage[Event],
    states: tuple[str, ...] = LOCAL_STATES,
    category: int = LOCAL_CATEGORY,
    state_ttl_ms: int = SELLER_STATE_TTL_MS,
) -> StreamStage[NameCityStateId]:
    """Query 3: ``(name, city, state, auction id)`` of people in ``states`` selling in ``category``.

    Beam joins people and auctions incrementally in a stateful ``DoFn`` keyed by person id, holding
    auctions that arrive before their seller and clearing a person's state by an event-time timer.
    jetlet keys the filtered people and auctions by person id into a ``flat_map_stateful``
    (:func:`join_seller`); a key's state is dropped when the watermark passes its latest event by
    ``state_ttl_ms``, so an auction later than that after its seller's last event finds no seller.
    """
    selected: StreamStage[Person | Auction] = events.map(
        functools.partial(local_person_or_auction, states=states, category=category)
    )
    joined: StreamStage[NameCityStateId] = selected.grouping_key(seller_id).flat_map_stateful(
        SellerState, join_seller, ttl=state_ttl_ms, copy_fn=copy_seller_state
    )
    return joined.set_name("nexmark-q3-local-item-suggestion")


# --------------------------------------------------------------------------- winning bids


def max_auction_duration_ms(config: GeneratorConfig = DEFAULT_CONFIG) -> int:
    """An upper bound of ``expires - date_time`` of the auctions the generator makes with ``config``.

    The generator draws a length below twice the time until ``num_in_flight_auctions`` more auctions
    open (that many auctions' events, rounded up to a whole millisecond).
    """
    events_for_auctions = config.num_in_flight_auctions * PROPORTION_DENOMINATOR // AUCTION_PROPORTION
    horizon_ms = events_for_auctions * config.inter_event_delay_us // 1000 + 1
    return 2 * horizon_ms


def winning_bids(
    events: StreamStage[Event],
    config: GeneratorConfig = DEFAULT_CONFIG,
    *,
    ttl_ms: int | None = None,
    by_auction: bool = False,
) -> StreamStage[AuctionBid]:
    """The winning bid of each closed auction: the highest bid made while it was open, over its reserve.

    Beam's ``WinningBids`` assigns auctions and bids to custom merging windows (an auction's window is
    ``[date_time, expires)``) and picks the best bid of each auction window. jetlet finds the best bid
    of each auction on every member among that member's bids, with the auctions broadcast, and
    combines the members' partial winners by auction once the watermark passes ``expires``
    (:mod:`jetlet.nexmark.partial_winners`): bids never leave their member. Bids that come before
    their auction wait for it for ``ttl_ms`` of event time (by default
    :func:`max_auction_duration_ms` of ``config``).

    ``by_auction`` says that ``events`` come from a source split by auction: source processor ``i``
    of ``p`` emits every bid and the auction of the ids ``i (mod p)``, as a consumer of a topic
    partitioned by auction id reads its partitions
    (:func:`~jetlet.nexmark.fast_source.fast_nexmark_source` with ``by_auction``). Then nothing
    crosses between members: each source processor's events go ``forward()`` to the partial
    stage's processor of the same index, which sees all of its auctions' bids, so its partials are
    the winners. This forwards ``events`` (every stage it feeds must take its input from anywhere,
    and takes its parallelism). On any other source ``by_auction`` loses every bid that is not in
    its auction's processor.
    """
    ttl = max_auction_duration_ms(config) if ttl_ms is None else ttl_ms
    if by_auction:
        lanes: StreamStage[wb.AuctionOrBid] = events.forward().map(wb.auction_or_bid)
        winners: StreamStage[AuctionBid] = lanes.forward().custom_transform(
            "nexmark-winning-bids", wb.partial_winning_bids_p(ttl, whole=True)
        )
        return winners
    auctions_and_bids: StreamStage[wb.AuctionOrBid] = events.map(wb.auction_or_bid)
    auctions = auctions_and_bids.filter(wb.is_auction).set_name("nexmark-winning-bids-auctions").broadcast()
    partials: StreamStage[wb.PartialWinner] = auctions_and_bids.custom_transform(
        "nexmark-winning-bids-partial", wb.partial_winning_bids_p(ttl), auctions
    )
    closed: StreamStage[AuctionBid] = partials.grouping_key(wb.auction_key).map_stateful(
        wb.no_winner_yet, wb.best_of_partials, ttl=1, on_evict_fn=wb.winner, copy_fn=list.copy
    )
    return closed.set_name("nexmark-winning-bids")


# --------------------------------------------------------------------------- queries 4 and 6


def category_and_price(winner: AuctionBid) -> tuple[int, int]:
    """Query 4's input: the category of the closed auction and its winning price."""
    return (winner.auction.category, winner.price)


def _price(category_price: tuple[int, int]) -> int:
    return category_price[1]


def _first(pair: tuple[int, object]) -> int:
    return pair[0]


def to_category_price(average: tuple[int, float]) -> CategoryPrice:
    """Query 4's result from ``(category, average)``, the average rounded as Java does."""
    category, price = average
    return CategoryPrice(category, java_round(price))


def q4_average_price_by_category(
    events: StreamStage[Event],
    config: GeneratorConfig = DEFAULT_CONFIG,
    *,
    ttl_ms: int | None = None,
    by_auction: bool = False,
) -> StreamStage[CategoryPrice]:
    """Query 4: the average winning price of each category, updated as each of its auctions closes.

    Beam averages the winning prices per category in sliding windows; jetlet, as Jet's NEXMark
    benchmark, keeps a rolling average per category (``rolling_aggregate(averaging)``) over
    :func:`winning_bids` (``config``, ``ttl_ms`` and ``by_auction`` are its), emitting the category's
    new average at each closed auction.
    """
    prices: StreamStage[tuple[int, int]] = winning_bids(
        events, config, ttl_ms=ttl_ms, by_auction=by_auction
    ).map(category_and_price)
    averages: StreamStage[tuple[int, float]] = prices.grouping_key(_first).rolling_aggregate(
        averaging(_price)
    )
    return averages.map(to_category_price).set_name("nexmark-q4-average-price-by-category")


TimePrice = tuple[int, int]
"""A winning bid as query 6 keeps it: ``(date_time, price)``, in the order that makes "latest"."""


def seller_bid(winner: AuctionBid) -> tuple[int, TimePrice]:
    """Query 6's input: the seller of the closed auction and its winning bid's time and price."""
    return (winner.auction.seller, (winner.date_time, winner.price))


def last_bids_mean(last_bids: list[TimePrice], seller: int, item: tuple[int, TimePrice]) -> SellerPrice:
    """Query 6's step: add the winning bid, keep the seller's latest ones, emit their mean price.

    Like Beam's ``MovingMeanSellingPrice``, "latest" is by bid time (then price), and the mean is
    rounded as Java's ``Math.round``.
    """
    last_bids.append(item[1])
    last_bids.sort()
    del last_bids[:-LAST_AUCTIONS]
    return SellerPrice(seller, java_round(sum(price for _, price in last_bids) / len(last_bids)))


def q6_average_price_by_seller(
    events: StreamStage[Event],
    config: GeneratorConfig = DEFAULT_CONFIG,
    *,
    ttl_ms: int | None = None,
    by_auction: bool = False,
) -> StreamStage[SellerPrice]:
    """Query 6: each seller's average winning price over their last 10 closed auctions, at each close.

    Beam re-windows the winning bids per seller into the global window, firing at every element, with
    a combiner keeping the last 10 bids; jetlet keys :func:`winning_bids` by seller into a
    ``map_stateful`` holding those bids (:func:`last_bids_mean`). A seller's state lives for the job;
    ``config``, ``ttl_ms`` and ``by_auction`` are those of :func:`winning_bids`.
    """
    by_seller: StreamStage[tuple[int, TimePrice]] = winning_bids(
        events, config, ttl_ms=ttl_ms, by_auction=by_auction
    ).map(seller_bid)
    means: StreamStage[SellerPrice] = by_seller.grouping_key(_first).map_stateful(
        list, last_bids_mean, copy_fn=list.copy
    )
    return means.set_name("nexmark-q6-average-price-by-seller")


# --------------------------------------------------------------------------- query 8


IdName = tuple[int, str]
"""A new person as query 8 keeps them: ``(id, name)``, the fields its result reads."""
SellerReserve = tuple[int, int]
"""An auction as query 8 keeps it: ``(seller, reserve)``, the fields its result and its key read."""


def person_id_name(item: Event) -> IdName | None:
    """A person as its :data:`IdName`; None for other events."""
    return (item.id, item.name) if isinstance(item, Person) else None


def auction_seller_reserve(item: Event) -> SellerReserve | None:
    """An auction as its :data:`SellerReserve`; None for other events."""
    return (item.seller, item.reserve) if isinstance(item, Auction) else None


person_key: Callable[[IdName | SellerReserve], int] = operator.itemgetter(0)
"""Query 8's key: a person's id, an auction's seller (the first field of both)."""


def new_user_auctions(
    window: KeyedWindowResult[int, tuple[list[IdName], list[SellerReserve]]],
) -> Iterable[IdNameReserve]:
    """Query 8's output of one window and person id: each auction of a person who joined in it."""
    people, auctions = window.result
    return [IdNameReserve(person, name, reserve) for person, name in people for _, reserve in auctions]


def q8_monitor_new_users(
    events: StreamStage[Event], window_ms: int = 10_000, *, broadcast_people: bool = True
) -> StreamStage[IdNameReserve]:
    """Query 8: people who opened an auction in the tumbling window in which they registered.

    Beam co-groups people keyed by id and auctions keyed by seller in fixed windows. jetlet
    broadcasts the people, the small side, to a window join on every member that keeps the
    auctions where they are (:mod:`jetlet.nexmark.new_users`): only people cross between members.
    With ``broadcast_people=False`` it co-aggregates the two keyed stages into the same tumbling
    windows instead (``aggregate2`` of two ``to_list``) and flat-maps each window's people and
    auctions to :class:`IdNameReserve`; the results are the same, in another order. Either way, as
    in winning bids, each person and auction is cut to the fields the result reads, ``(id, name)``
    and ``(seller, reserve)``: plain tuples cross with no Python call of their own, and the windows
    hold them instead of whole events.
    """
    if broadcast_people:
        everyone = events.map(person_id_name).set_name("nexmark-q8-people").broadcast()
        own_auctions = events.map(auction_seller_reserve)
        broadcast: StreamStage[IdNameReserve] = own_auctions.custom_transform(
            "nexmark-q8-monitor-new-users",
            new_users.new_user_auctions_p(window_ms),
            everyone,
            watermark_stride=window_ms,
        )
        return broadcast
    people = events.map(person_id_name).grouping_key(person_key)
    auctions = events.map(auction_seller_reserve).grouping_key(person_key)
    windows = people.window(WindowDefinition.tumbling(window_ms)).aggregate2(to_list(), auctions, to_list())
    joined: StreamStage[IdNameReserve] = windows.flat_map(new_user_auctions)
    return joined.set_name("nexmark-q8-monitor-new-users")
