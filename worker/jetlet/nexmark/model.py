"""The NEXMark events: people register, open auctions and bid on them.

Field names and meanings follow Apache Beam's ``org.apache.beam.sdk.nexmark.model`` classes, in
snake_case. Times (``date_time``, ``expires``) are epoch milliseconds, prices are in cents.

The events are values, compared and hashed by content, and must be cheap to create by the million:
they are slotted dataclasses with ``unsafe_hash`` (and the default ``eq``), *not* ``frozen``. A
frozen dataclass's ``__init__`` sets every field through ``object.__setattr__``; measured with
``timeit`` on Python 3.11 (2-core VM), creating a ``Bid`` costs about 760 ns frozen and 170 ns
this way, as much as a hand-written ``__slots__`` class. Treat them as immutable all the
same (they are hashed and shared between stages): derive a changed copy with
``dataclasses.replace``, never assign to a field.

Every class here (and the queries' state classes) pickles as its class and a tuple of its fields
(:func:`pickled_by_fields`): a slotted dataclass otherwise pickles through ``copyreg`` with a
dict of its slots, which made pickling the 10,000 open auctions of Q4's state (an auction and its
best ``Bid`` each, as the state held then) take 6.1 µs an entry instead of 3.9, and 514 bytes
instead of 321 — paid on the processing thread at every snapshot barrier. The same fields, as
``__jetlet_fields__``, let a network edge send a chunk of events as tuples of plain values
(:mod:`jetlet._network.rows`).
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Any, TypeVar

_Class = TypeVar("_Class", bound=type)


def pickled_by_fields(cls: _Class) -> _Class:
    """Make the dataclass ``cls`` pickle as ``cls(*fields)`` (see the module doc)."""
    fields = [field.name for field in dataclasses.fields(cls)]
    values = operator.attrgetter(*fields) if len(fields) > 1 else (lambda item: (getattr(item, fields[0]),))

    def __reduce__(self: Any) -> tuple[type, tuple[Any, ...]]:
        return cls, values(self)

    setattr(cls, "__reduce__", __reduce__)  # noqa: B010 (mypy refuses assigning a method)
    setattr(cls, "__jetlet_fields__", tuple(fields))  # noqa: B010 (network edges send these fields)
    return cls


@pickled_by_fields
@dataclasses.dataclass(slots=True, unsafe_hash=True)
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


@pickled_by_fields
@dataclasses.dataclass(slots=True, unsafe_hash=True)
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


@pickled_by_fields
@dataclasses.dataclass(slots=True, unsafe_hash=True)
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


@pickled_by_fields
@dataclasses.dataclass(slots=True, unsafe_hash=True)
class AuctionPrice:
    """Query 2's result: an auction and the price of one bid on it (Beam's ``AuctionPrice``)."""

    auction: int
    price: int


Event = Person | Auction | Bid
"""One NEXMark event."""


@pickled_by_fields
@dataclasses.dataclass(frozen=True, slots=True)
class AuctionBid:
    """The winning bid of a closed auction (Beam's ``AuctionBid``; queries 4 and 6).

    Beam's carries the whole bid; this one its bidder, price and time, the fields a bid keeps on
    its way to the auction (:data:`jetlet.nexmark.partial_winners.PricedBid`): no query reads the others.
    """

    auction: Auction
    bidder: int
    price: int
    date_time: int


@pickled_by_fields
@dataclasses.dataclass(frozen=True, slots=True)
class NameCityStateId:
    """Query 3's result: a seller in a chosen state and one of their auctions (Beam's ``NameCityStateId``)."""

    name: str
    city: str
    state: str
    id: int


@pickled_by_fields
@dataclasses.dataclass(frozen=True, slots=True)
class CategoryPrice:
    """Query 4's result: the average winning price of a category so far (Beam's ``CategoryPrice``)."""

    category: int
    price: int


@pickled_by_fields
@dataclasses.dataclass(frozen=True, slots=True)
class SellerPrice:
    """Query 6's result: a seller's average winning price over their last auctions (``SellerPrice``)."""

    seller: int
    price: int


@pickled_by_fields
@dataclasses.dataclass(frozen=True, slots=True)
class IdNameReserve:
    """Query 8's result: a new person and the reserve of an auction they opened (``IdNameReserve``)."""

    id: int
    name: str
    reserve: int
