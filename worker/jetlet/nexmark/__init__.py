"""NEXMark: the auction-site benchmark's event generator (after Apache Beam's) and its queries.

* :mod:`~jetlet.nexmark.model`: the ``Person``, ``Auction`` and ``Bid`` events and the queries' results.
* :mod:`~jetlet.nexmark.generator`: ``GeneratorConfig`` and ``event(number, config)``, a pure function
  of the event number, so any processor can generate any slice of the stream and replay it.
* :mod:`~jetlet.nexmark.source`: ``nexmark_source(config, count, rate)``, a distributed timestamped
  stream source.
* :mod:`~jetlet.nexmark.queries`: queries 0, 1, 2, 5, 7 and 13 over a stage of events, and
  ``QUERIES``, every query by name; :mod:`~jetlet.nexmark.joins`: the joining queries 3, 4, 6 and 8
  and ``winning_bids``.
"""

from jetlet.nexmark.generator import GeneratorConfig, event, events
from jetlet.nexmark.joins import (
    max_auction_duration_ms,
    q3_local_item_suggestion,
    q4_average_price_by_category,
    q6_average_price_by_seller,
    q8_monitor_new_users,
    winning_bids,
)
from jetlet.nexmark.model import (
    Auction,
    AuctionBid,
    AuctionPrice,
    Bid,
    CategoryPrice,
    Event,
    IdNameReserve,
    NameCityStateId,
    Person,
    SellerPrice,
)
from jetlet.nexmark.queries import (
    QUERIES,
    q0_pass_through,
    q1_currency_conversion,
    q2_selection,
    q5_hot_items,
    q7_highest_bid,
    q13_bounded_side_input_join,
)
from jetlet.nexmark.source import nexmark_source

__all__ = [
    "QUERIES",
    "Auction",
    "AuctionBid",
    "AuctionPrice",
    "Bid",
    "CategoryPrice",
    "Event",
    "GeneratorConfig",
    "IdNameReserve",
    "NameCityStateId",
    "Person",
    "SellerPrice",
    "event",
    "events",
    "max_auction_duration_ms",
    "nexmark_source",
    "q0_pass_through",
    "q1_currency_conversion",
    "q2_selection",
    "q3_local_item_suggestion",
    "q4_average_price_by_category",
    "q5_hot_items",
    "q6_average_price_by_seller",
    "q7_highest_bid",
    "q8_monitor_new_users",
    "q13_bounded_side_input_join",
    "winning_bids",
]
