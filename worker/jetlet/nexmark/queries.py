"""NEXMark queries 0, 1, 2, 5, 7 and 13 as pipeline transforms, after Apache Beam's queries and the Jet paper.

Each function takes the stage of events a :func:`~jetlet.nexmark.source.nexmark_source` produced
(after ``with_native_timestamps``) and returns the stage of its results; the per-item logic is in
plain functions (``currency_conversion``, ``selection``) that return None for events a query drops,
which is how a jetlet ``map`` filters. The joining queries (3, 4, 6, 8) are in
:mod:`jetlet.nexmark.joins`; :data:`QUERIES` names every query with its default parameters.
"""

from __future__ import annotations

import functools
import heapq
import operator
from collections import _count_elements  # type: ignore[attr-defined]
from collections.abc import Callable
from typing import Any

from jetlet.aggregate import AggregateOperation
from jetlet.datamodel import WindowResult
from jetlet.nexmark import joins
from jetlet.nexmark.generator import DEFAULT_CONFIG
from jetlet.nexmark.model import AuctionPrice, Bid, Event
from jetlet.pipeline import BatchStage, JoinClause, Sources, StreamStage, WindowDefinition

DOLLAR_TO_EURO_NUMERATOR = 89
DOLLAR_TO_EURO_DENOMINATOR = 100
"""Beam's Query 1 converts with integer arithmetic: ``price * 89 / 100``."""


def pass_through(item: Event) -> Event:
    """Query 0's step: the event itself."""
    return item


def currency_conversion(item: Event) -> Bid | None:
    """Query 1's step: a bid with its price in euro cents; None for other events.

    (A new ``Bid`` by its constructor: ``dataclasses.replace`` costs five times as much.)
    """
    if type(item) is not Bid:
        return None
    return Bid(
        item.auction,
        item.bidder,
        item.price * DOLLAR_TO_EURO_NUMERATOR // DOLLAR_TO_EURO_DENOMINATOR,
        item.date_time,
        item.extra,
        item.channel,
        item.url,
    )


def selection(item: Event, auction_skip: int = DEFAULT_CONFIG.auction_skip) -> AuctionPrice | None:
    """Query 2's step: the auction and price of a bid on every ``auction_skip``-th auction, else None."""
    if type(item) is not Bid or item.auction % auction_skip != 0:
        return None
    return AuctionPrice(item.auction, item.price)


def selector(auction_skip: int) -> Callable[[Event], AuctionPrice | None]:
    """:func:`selection` with ``auction_skip`` bound: one Python call per event (a lambda calling
    :func:`selection` made two, about a tenth of Q2's time per event on one member)."""

    def select(item: Event) -> AuctionPrice | None:
        if type(item) is not Bid or item.auction % auction_skip != 0:
            return None
        return AuctionPrice(item.auction, item.price)

    return select


def q0_pass_through(events: StreamStage[Event]) -> StreamStage[Event]:
    """Query 0: every event, unchanged (measures the source and the engine's overhead)."""
    passed: StreamStage[Event] = events.map(pass_through)
    return passed.set_name("nexmark-q0-pass-through")


def q1_currency_conversion(events: StreamStage[Event]) -> StreamStage[Bid]:
    """Query 1: every bid, its price converted from dollars to euros."""
    return events.map(currency_conversion).set_name("nexmark-q1-currency-conversion")


def q2_selection(
    events: StreamStage[Event], auction_skip: int = DEFAULT_CONFIG.auction_skip
) -> StreamStage[AuctionPrice]:
    """Query 2: ``(auction, price)`` of the bids on auctions whose id is a multiple of ``auction_skip``."""
    return events.map(selector(auction_skip)).set_name("nexmark-q2-selection")


HotItems = tuple[int, list[tuple[int, int]]]
"""Query 5's result: ``(end of the sliding window, [(auction, bids), ...] best first)``."""


def _is_bid(item: Event) -> bool:
    return type(item) is Bid


def _no_counts() -> dict[int, int]:
    return {}


def _count_bid(counts: dict[int, int], bid: Bid) -> dict[int, int]:
    auction = bid.auction
    counts[auction] = counts.get(auction, 0) + 1
    return counts


_AUCTION = operator.attrgetter("auction")


def _count_bids(counts: dict[int, int], bids: list[Bid]) -> dict[int, int]:
    """:func:`_count_bid` over a whole batch in one loop in C: ``Counter.update``'s counting
    (``collections._count_elements``) on the plain dict, 45 against 67 ns a bid folded one by one.
    (A ``Counter`` as the accumulator costs more: CPython specializes item access for exact dicts
    only, so the window's combine and deduct of the frames ran at half speed on one.)"""
    _count_elements(counts, map(_AUCTION, bids))
    return counts


def _add_counts(counts: dict[int, int], more: dict[int, int]) -> dict[int, int]:
    get = counts.get
    for auction, bids in more.items():
        counts[auction] = get(auction, 0) + bids
    return counts


def _deduct_counts(counts: dict[int, int], less: dict[int, int]) -> dict[int, int]:
    for auction, bids in less.items():
        left = counts[auction] - bids
        if left:
            counts[auction] = left
        else:
            del counts[auction]
    return counts


def bids_per_auction() -> AggregateOperation[dict[int, int], dict[int, int]]:
    """Bids per auction as one ``{auction: bids}`` accumulator, which frames add up and deduct.

    Q5's sliding window keeps one such dict per frame (one slide of bids) and one for the window:
    a slide adds the frame that enters and deducts the frame that leaves, so its cost is that of
    the two frames, not of the window.
    """
    return (
        AggregateOperation.with_create(_no_counts)
        .and_accumulate(_count_bid)
        .and_accumulate_batch(_count_bids)
        .and_combine(_add_counts)
        .and_deduct(_deduct_counts)
    )


def top_auctions(counts: dict[int, int], top: int) -> list[tuple[int, int]]:
    """The ``top`` auctions with the most bids, best first (ties: the higher id), as ``(auction, bids)``.

    The comparisons run in C: ``(bids, auction)`` pairs made by ``zip``, ``max`` for the top one.
    """
    ranked = zip(counts.values(), counts.keys(), strict=True)
    best = [max(ranked)] if top == 1 and counts else heapq.nlargest(top, ranked)
    return [(auction, bids) for bids, auction in best]


def q5_hot_items(
    events: StreamStage[Event], window_ms: int = 10_000, slide_ms: int = 1_000, top: int = 1
) -> StreamStage[HotItems]:
    """Query 5 as the Jet paper runs it: bids per auction in a sliding window, then the top auctions.

    One sliding-window aggregation: :func:`bids_per_auction` counts the bids of every auction in
    frames of one slide, which slide through the window in O(frame) (add the new frame, deduct the
    old one); each window's result is its :func:`top_auctions`, emitted when the watermark passes
    the window's end. (Counting per auction as a keyed window and ranking its results in a second
    window emits every auction's count at every slide — a million results a second with a 10 ms
    slide over 10,000 auctions — and reports each window one slide late.)
    """
    bids: StreamStage[Bid] = events.filter(_is_bid)  # type: ignore[assignment]  # (bids only)
    ranking = bids_per_auction().and_export_finish(functools.partial(top_auctions, top=top))
    windows = bids.window(WindowDefinition.sliding(window_ms, slide_ms)).aggregate(ranking)
    return windows.map(_hot_items).set_name("nexmark-q5-hot-items")


def _hot_items(window: WindowResult[list[tuple[int, int]]]) -> HotItems:
    return (window.end, window.result)


# --------------------------------------------------------------------------- query 7


def _keep_highest(highest: list[Bid], bid: Bid) -> list[Bid]:
    if not highest or bid.price > highest[0].price:
        return [bid]
    if bid.price == highest[0].price:
        highest.append(bid)
    return highest


def _combine_highest(left: list[Bid], right: list[Bid]) -> list[Bid]:
    if not left or not right or left[0].price != right[0].price:
        return max(left, right, key=_highest_price)
    return left + right


def _highest_price(highest: list[Bid]) -> int:
    return highest[0].price if highest else -1


def _no_bids() -> list[Bid]:
    return []


def highest_bids() -> AggregateOperation[list[Bid], list[Bid]]:
    """The bids with the highest price (all of them on a tie), as an aggregate operation."""
    return (
        AggregateOperation.with_create(_no_bids).and_accumulate(_keep_highest).and_combine(_combine_highest)
    )


def _window_bids(window: WindowResult[list[Bid]]) -> list[Bid]:
    return window.result


def q7_highest_bid(events: StreamStage[Event], window_ms: int = 10_000) -> StreamStage[Bid]:
    """Query 7: the bids with the highest price of each tumbling window of ``window_ms``.

    Beam computes each window's maximum price as a side input and keeps the bids at that price; jetlet
    aggregates each window with :func:`highest_bids` (the bids at the running maximum, combined
    across processors) and flat-maps the window's result to its bids.
    """
    bids: StreamStage[Bid] = events.filter(_is_bid)  # type: ignore[assignment]  # (bids only)
    windows = bids.window(WindowDefinition.tumbling(window_ms)).aggregate(highest_bids())
    return windows.flat_map(_window_bids).set_name("nexmark-q7-highest-bid")


# --------------------------------------------------------------------------- query 13

SIDE_INPUT_SIZE = 500
"""Rows of query 13's side input (Beam's ``sideInputRowCount``)."""


def side_input_rows(size: int = SIDE_INPUT_SIZE) -> list[tuple[int, str]]:
    """Query 13's side input as Beam prepares it: ``(i, str(i))`` for ``i`` in ``0 .. size - 1``."""
    return [(key, str(key)) for key in range(size)]


def side_input_key(size: int = SIDE_INPUT_SIZE) -> Callable[[Bid], int]:
    """The key function of a side input of ``size`` rows: a bid's bidder modulo ``size`` (Beam's key).

    A closure rather than a ``functools.partial`` with a keyword: it runs once per bid.

    >>> side_input_key(500)(Bid(auction=1, bidder=1234, price=10, date_time=0, extra=""))
    234
    """

    def key(bid: Bid) -> int:
        return bid.bidder % size

    return key


def with_side_value(bid: Bid, value: str | None) -> Bid:
    """Query 13's result: the bid with the side input's value as its ``extra`` (kept with no row)."""
    return Bid(bid.auction, bid.bidder, bid.price, bid.date_time, bid.extra if value is None else value)


def q13_bounded_side_input_join(
    events: StreamStage[Event],
    side_input: BatchStage[tuple[int, str]] | None = None,
    side_input_size: int = SIDE_INPUT_SIZE,
) -> StreamStage[Bid]:
    """Query 13: each bid enriched with the value of its row of a bounded side input.

    Beam reads the side input as a map view and looks up ``bid.bidder % size`` for each bid; jetlet
    loads the side input (``(key, value)`` items; by default :func:`side_input_rows` read from
    ``Sources.items``) into a ``hash_join`` table and joins every bid on that key.
    """
    if side_input is None:
        side_input = events.pipeline.read_from(Sources.items(*side_input_rows(side_input_size)))
    bids: StreamStage[Bid] = events.filter(_is_bid)  # type: ignore[assignment]  # (bids only)
    clause = JoinClause.join_map_entries(side_input_key(side_input_size))
    joined: StreamStage[Bid] = bids.hash_join(side_input, clause, with_side_value)
    return joined.set_name("nexmark-q13-bounded-side-input-join")


QUERIES: dict[str, Callable[[StreamStage[Event]], StreamStage[Any]]] = {
    "q0": q0_pass_through,
    "q1": q1_currency_conversion,
    "q2": q2_selection,
    "q3": joins.q3_local_item_suggestion,
    "q4": joins.q4_average_price_by_category,
    "q5": q5_hot_items,
    "q6": joins.q6_average_price_by_seller,
    "q7": q7_highest_bid,
    "q8": joins.q8_monitor_new_users,
    "q13": q13_bounded_side_input_join,
}
"""Every query by its short name, called with its default parameters: ``QUERIES["q5"](events)``."""
