"""NEXMark: the auction-site benchmark's event generator (after Apache Beam's) as a jetlet source.

* :mod:`~jetlet.nexmark.model`: the ``Person``, ``Auction`` and ``Bid`` events.
* :mod:`~jetlet.nexmark.generator`: ``GeneratorConfig`` and ``event(number, config)``, a pure function
  of the event number, so any processor can generate any slice of the stream and replay it.
* :mod:`~jetlet.nexmark.source`: ``nexmark_source(config, count, rate)``, a distributed timestamped
  stream source.
* :mod:`~jetlet.nexmark.queries`: the first NEXMark queries over a stage of events.
"""

from jetlet.nexmark.generator import GeneratorConfig, event, events
from jetlet.nexmark.model import Auction, AuctionPrice, Bid, Event, Person
from jetlet.nexmark.queries import q0_pass_through, q1_currency_conversion, q2_selection, q5_hot_items
from jetlet.nexmark.source import nexmark_source

__all__ = [
    "Auction",
    "AuctionPrice",
    "Bid",
    "Event",
    "GeneratorConfig",
    "Person",
    "event",
    "events",
    "nexmark_source",
    "q0_pass_through",
    "q1_currency_conversion",
    "q2_selection",
    "q5_hot_items",
]
