"""NEXMark queries 0 to 2 as pipeline transforms, after Apache Beam's ``Query0`` .. ``Query2``.

Each function takes the stage of events a :func:`~jetlet.nexmark.source.nexmark_source` produced
(after ``with_native_timestamps``) and returns the stage of its results; the per-item logic is in
plain functions (``currency_conversion``, ``selection``) that return None for events a query drops,
which is how a jetlet ``map`` filters.
"""

from __future__ import annotations

import dataclasses

from jetlet.nexmark.generator import DEFAULT_CONFIG
from jetlet.nexmark.model import AuctionPrice, Bid, Event
from jetlet.pipeline import StreamStage

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
