"""NEXMark queries 0, 1, 2 and 5 as pipeline transforms, after Apache Beam's queries and the Jet paper.

Each function takes the stage of events a :func:`~jetlet.nexmark.source.nexmark_source` produced
(after ``with_native_timestamps``) and returns the stage of its results; the per-item logic is in
plain functions (``currency_conversion``, ``selection``) that return None for events a query drops,
which is how a jetlet ``map`` filters.
"""

from __future__ import annotations

import dataclasses

from jetlet.aggregate import counting, top_n
from jetlet.datamodel import KeyedWindowResult, WindowResult
from jetlet.nexmark.generator import DEFAULT_CONFIG
from jetlet.nexmark.model import AuctionPrice, Bid, Event
from jetlet.pipeline import StreamStage, WindowDefinition

DOLLAR_TO_EURO_NUMERATOR = 89
DOLLAR_TO_EURO_DENOMINATOR = 100
"""Beam's Query 1 converts with integer arithmetic: ``price * 89 / 100``."""


def pass_through(item: Event) -> Event:
    """Query 0's step: the event itself."""
    return item


def currency_conversion(item: Event) -> Bid | None:
    """Query 1's step: a bid with its price in euro cents; None for other events."""
    if not isinstance(item, Bid):
        return None
    return dataclasses.replace(
        item, price=item.price * DOLLAR_TO_EURO_NUMERATOR // DOLLAR_TO_EURO_DENOMINATOR
    )


def selection(item: Event, auction_skip: int = DEFAULT_CONFIG.auction_skip) -> AuctionPrice | None:
    """Query 2's step: the auction and price of a bid on every ``auction_skip``-th auction, else None."""
    if not isinstance(item, Bid) or item.auction % auction_skip != 0:
        return None
    return AuctionPrice(item.auction, item.price)


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
    return events.map(lambda item: selection(item, auction_skip)).set_name("nexmark-q2-selection")


HotItems = tuple[int, list[tuple[int, int]]]
"""Query 5's result: ``(end of the sliding window, [(auction, bids), ...] best first)``."""


def _bid_auction(bid: Bid) -> int:
    return bid.auction


def _bid_or_none(item: Event) -> Bid | None:
    return item if isinstance(item, Bid) else None


def _bids_then_auction(result: KeyedWindowResult[int, int]) -> tuple[int, int]:
    return (result.result, result.key)


def _hot_items(window: WindowResult[list[KeyedWindowResult[int, int]]]) -> HotItems:
    # the tumbling window of one slide starts where the sliding windows it gathers end
    return (window.start, [(r.key, r.result) for r in window.result])


def q5_hot_items(
    events: StreamStage[Event], window_ms: int = 10_000, slide_ms: int = 1_000, top: int = 1
) -> StreamStage[HotItems]:
    """Query 5 as the Jet paper runs it: bids per auction in a sliding window, then the top auctions.

    Counts are computed from frames (one per slide) and slide in O(1); each
    step's results are gathered by a tumbling window of one slide, where
    ``top_n`` keeps the auctions with the most bids (ties: the higher id).
    """
    bids: StreamStage[Bid] = events.map(_bid_or_none)
    counts = (
        bids.grouping_key(_bid_auction)
        .window(WindowDefinition.sliding(window_ms, slide_ms))
        .aggregate(counting())
        .set_name("nexmark-q5-bids-per-auction")
    )
    best = counts.window(WindowDefinition.tumbling(slide_ms)).aggregate(top_n(top, _bids_then_auction))
    return best.map(_hot_items).set_name("nexmark-q5-hot-items")
