"""The NEXMark events: people register, open auctions and bid on them.

Field names and meanings follow Apache Beam's ``org.apache.beam.sdk.nexmark.model`` classes, in
snake_case. Times (``date_time``, ``expires``) are epoch milliseconds, prices are in cents. The
classes are frozen slotted dataclasses: events are values, compared and hashed by content, and
cheap to create by the million.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, slots=True)
class Person:
    """A new person registered with the auction site."""

    id: int
    name: str
    email_address: str
    credit_card: str
    city: str
    state: str
    date_time: int
    extra: str


@dataclasses.dataclass(frozen=True, slots=True)
class Auction:
    """A new auction: ``seller`` offers an item in ``category`` until ``expires``."""

    id: int
    item_name: str
    description: str
    initial_bid: int
    reserve: int
    date_time: int
    expires: int
    seller: int
    category: int
    extra: str


@dataclasses.dataclass(frozen=True, slots=True)
class Bid:
    """A bid of ``price`` by ``bidder`` on ``auction``.

    ``channel`` and ``url`` are the optional fields of Beam's newer ``Bid``; the generator, like
    Beam's ``BidGenerator``, leaves them empty.
    """

    auction: int
    bidder: int
    price: int
    date_time: int
    extra: str
    channel: str | None = None
    url: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class AuctionPrice:
    """Query 2's result: an auction and the price of one bid on it (Beam's ``AuctionPrice``)."""

    auction: int
    price: int


Event = Person | Auction | Bid
"""One NEXMark event."""
