"""Winning bids' first stage: each member finds the best bid of every auction among its own bids.

NEXMark's winning bids (the core of queries 4 and 6) is the highest valid bid of each auction: made
while the auction was open (``[date_time, expires)``) and at least its reserve. Keying auctions and
bids by auction id sends half of all bids to another member on a two-member cluster, and a bid is
nearly every event. So the plan is Flink SQL's broadcast join with a local-global aggregation
after it, which keeps the bids on their member (``bench/RESULTS.md``, stop 35, measures what that
gained, and what a second member still costs):

1. Every member's source events go, as :data:`AuctionOrBid`, to :class:`PartialWinningBidsP` on
   that member (a local edge: bids never cross). Its auctions are also broadcast to every
   processor of the stage on every member (input 1).
2. Each processor keeps every open auction it heard of and the best of *its* bids for it, and
   closes an auction by event time: when the watermark reaches ``expires`` (every bid made before
   it has come), it emits that partial winner (a :data:`PartialWinner`), if it saw a valid bid,
   timestamped when the auction stopped taking bids: ``expires``, or the start of a later auction
   that reused its id (below).
3. The partials meet by auction at one member (:func:`best_of_partials`, keyed by
   :func:`auction_key`), whose state closes one millisecond after that time: a partial's
   timestamp is the same on every member, so by then every member's partial has come. The best of
   them is the auction's winner, an :class:`~jetlet.nexmark.model.AuctionBid` (:func:`winner`).

Only auctions (about 6 % of events) and partial winners (one per auction and member with a valid
bid) cross between members.

**A source split by auction** (``whole``). When source processor ``i`` of ``p`` emits every bid and
the auction of the ids ``i (mod p)`` (a topic partitioned by auction id;
:func:`~jetlet.nexmark.fast_generator.auction_lane`) and forwards them to processor ``i`` of this
stage, that processor sees every event of its auctions in the source's order, as the plain loop
does: its partials are the winners, and it emits them as :class:`~jetlet.nexmark.model.AuctionBid`
with no input 1 and no combining stage. Nothing crosses between members. A bid whose auction it
does not hold is dropped, as the plain loop drops it: in the source's order no auction of its id
comes before it. On a restore it keeps the saved auctions and early bids of its own ids only, so no
winner comes out twice.

**Order and reopened ids.** A bid goes to the auction its processor holds for the id when it comes.
Local auctions reach their member's processor on input 0 with its bids, in the source's order;
the broadcast copy on input 1 then finds the auction already there and is dropped (as is any
auction copy already closed or older than the one held). Beam's generator never reuses an auction
id, but the fast generator's few keys (the Jet paper's 10,000) do: an auction reusing the id of
one still open closes that one at once (no later bid counts for it, as in the plain loop) and
starts afresh; the older one's winner comes out when the watermark passes the newer one's start,
once every member's partial for it has come. Bids that come before any auction of their id wait
for it (early bids; Beam's generator bids a few ids ahead) and are dropped once the watermark
passes them by ``ttl``, the longest auction. On one member each id's events thus meet in the
source's order, as in the plain loop. Across members, a member's bids made before a remote auction
reopened their id count for the older auction, as they should; but those it makes after that, until
the reopening auction reaches it, count for the older auction too (if made while it was open),
where the plain loop gives them to the newer one.

**Snapshots.** A processor's state is a dict of open auctions (id -> ``[auction, best price, best
time, bidder]``) and of early bids. It is saved, copied at the barrier, under a
:class:`~jetlet.core.snapshot_keys.ProcessorKey`, so that every processor of a restored job gets
every saved state (any number of members and processors): it takes every open auction, keeping
for each the latest auction of the id and the best of the bids saved for it, and every early bid.
Two processors may then hold the same partial winner; the combining stage keeps the best of equal
partials, so the duplicate changes nothing.
"""

from __future__ import annotations

import heapq
import operator
from collections.abc import Callable
from typing import Any, Final

from jetlet.core import inbox as inbox_mod
from jetlet.core import processor, snapshot_keys, snapshot_writer
from jetlet.core import watermark as wm
from jetlet.core.processors import pending
from jetlet.nexmark.model import Auction, AuctionBid, Bid, Event

PricedBid = tuple[int, int, int, int]
"""A bid as winning bids carry it: ``(auction, bidder, price, date_time)``, the fields the join and its
results read (as Flink SQL's planner prunes a join's inputs to the columns it reads)."""
AuctionFields = tuple[int, str, str, int, int, int, int, int, int, str]
"""An auction as winning bids carry it: the values of its fields, in :class:`Auction`'s order. A plain
tuple crosses to other members at the pickler's C speed; an ``Auction`` costs a Python call to
take apart and another to rebuild, and every member receives every auction."""
AuctionOrBid = tuple[int, AuctionFields] | PricedBid
"""Winning bids' input: an auction as ``(id, fields)``, a bid as its :data:`PricedBid`."""
PartialWinner = tuple[AuctionFields, int, int, int]
"""The best bid one processor saw for an auction: ``(auction fields, bidder, price, date_time)``."""

auction_fields: Callable[[Auction], AuctionFields] = operator.attrgetter(*Auction.__jetlet_fields__)  # type: ignore[attr-defined]
"""An auction's :data:`AuctionFields`."""

_ID: Final = 0
_RESERVE: Final = 4
_DATE_TIME: Final = 5
_EXPIRES: Final = 6
_READ = ("id", "item_name", "description", "initial_bid", "reserve", "date_time", "expires")
if Auction.__jetlet_fields__[: len(_READ)] != _READ:  # type: ignore[attr-defined]
    raise ImportError("winning bids read Auction's fields by position: update the positions above")

NO_BID = -(2**63)
"""The best time of an open auction without a valid bid yet: earlier than any bid's, so that a bid at
its price to beat (the reserve - 1) never wins it by a tie."""
SNAPSHOT_TAG = "winning-bids-partial"
CLOSING_BUCKET_MS = 64
"""Open auctions wait to close in buckets of this many milliseconds of ``expires``."""


def auction_or_bid(item: Event) -> AuctionOrBid | None:
    """An auction or a bid as winning bids take it (:data:`AuctionOrBid`); None for a person."""
    if type(item) is Bid:
        return (item.auction, item.bidder, item.price, item.date_time)
    return (item.id, auction_fields(item)) if type(item) is Auction else None


def is_auction(item: AuctionOrBid) -> bool:
    """Whether winning bids' input ``item`` is an auction (``(id, fields)``)."""
    return len(item) == 2


def auction_key(partial: PartialWinner) -> tuple[int, int]:
    """The combining stage's key: the auction's id and start (a reused id opens another auction)."""
    auction = partial[0]
    return (auction[_ID], auction[_DATE_TIME])


def beats(partial: PartialWinner, best: PartialWinner | None) -> bool:
    """Beam's order of bids: the higher price wins, then the earlier bid; a full tie keeps the first."""
    return best is None or (partial[2], -partial[3]) > (best[2], -best[3])


def best_of_partials(
    state: list[PartialWinner | None], _key: tuple[int, int], partial: PartialWinner
) -> None:
    """The combining stage's step: keep the best of an auction's partial winners (emits nothing)."""
    if beats(partial, state[0]):
        state[0] = partial


def winner(state: list[PartialWinner | None], _key: tuple[int, int], _watermark: int) -> AuctionBid | None:
    """The combining stage's eviction: the auction's winner, the best of its members' partials."""
    best = state[0]
    if best is None:
        return None
    fields, bidder, price, date_time = best
    return AuctionBid(Auction(*fields), bidder, price, date_time)


def no_winner_yet() -> list[PartialWinner | None]:
    """The combining stage's state of a new auction: no partial winner yet."""
    return [None]


class PartialWinningBidsP(processor.Processor):
    """The best bid of every auction among this processor's bids, emitted when it closes (module doc).

    Input 0: ``(timestamp, AuctionOrBid)`` of this member; input 1: ``(timestamp, (id, auction))``
    broadcast from every member. Output: ``(closed at, PartialWinner)``; with ``whole`` (no input 1,
    module doc) ``(closed at, AuctionBid)``, the winners.

    A bid costs one dict lookup and one comparison unless it may win: ``_to_beat`` holds each open
    auction's price to beat (its reserve - 1, then its best price), and only a bid at or over it
    is checked against the auction's times and the best bid's time (:meth:`_offer`). Open auctions
    wait to close in buckets of :data:`CLOSING_BUCKET_MS` by ``expires`` (a list of ids each: a
    heap of every auction would hold hundreds of thousands of entries, most of them of auctions
    closed already by a reopened id, and cost a cache miss per level of each push).
    """

    def __init__(self, ttl: int, whole: bool = False) -> None:
        self._ttl = ttl
        self._whole = whole
        self._open: dict[int, list[Any]] = {}  # id -> [auction, best price, best time, bidder]
        self._to_beat: dict[int, int] = {}  # id -> the price a bid must reach to be looked at
        self._closing: dict[int, list[int]] = {}  # expires // CLOSING_BUCKET_MS -> ids (some closed since)
        self._buckets: list[int] = []  # heap of the keys of _closing
        self._early: dict[int, list[PricedBid]] = {}
        self._watermark = -(2**63)
        self._output = pending.PendingOutput()
        self._snapshot = snapshot_writer.SnapshotWriter()
        self._restored: list[list[Any]] = []

    def process(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        output = self._output
        if not output.flush(self.outbox):
            return
        items = inbox.take_all()
        out = output.items
        if ordinal == 1:
            for _, auction in items:
                self._open_auction(auction[1], out)
            output.flush(self.outbox)
            return
        to_beat = self._to_beat.get
        for element in items:
            item = element[1]
            if len(item) == 2:
                self._open_auction(item[1], out)
                continue
            price_to_beat = to_beat(item[0])
            if price_to_beat is None:
                if not self._whole:  # (``whole``: its auction came first, or there is none, module doc)
                    self._wait_for_auction(item)
            elif item[2] >= price_to_beat:
                self._offer(self._open[item[0]], item)
        output.flush(self.outbox)

    def _offer(self, state: list[Any], bid: PricedBid) -> None:
        """Make ``bid`` the best of ``state``'s auction if it was made while the auction was open and
        beats the best so far (Beam's order: the higher price, then the earlier bid)."""
        auction, best_price, best_time, _ = state
        auction_id, bidder, price, date_time = bid
        if (price > best_price or (price == best_price and date_time < best_time)) and auction[
            _DATE_TIME
        ] <= date_time < auction[_EXPIRES]:
            state[1:] = [price, date_time, bidder]
            self._to_beat[auction_id] = price

    def _wait_for_auction(self, bid: PricedBid) -> None:
        early = self._early.get(bid[0])
        if early is None:
            self._early[bid[0]] = [bid]
        else:
            early.append(bid)

    def _open_auction(self, auction: AuctionFields, out: list[Any]) -> None:
        """Hold ``auction`` unless it closed or a later auction of its id is held (or, but with ``whole``,
        one of the same start: a copy)."""
        expires = auction[_EXPIRES]
        if expires <= self._watermark:
            return
        auction_id = auction[_ID]
        held = self._open.get(auction_id)
        if held is not None:
            held_since = held[0][_DATE_TIME]
            if held_since > auction[_DATE_TIME] or (held_since == auction[_DATE_TIME] and not self._whole):
                return  # (``whole`` sees no copies: an auction of the same id and ms reopens it)
            # reopened: no later bid counts for the older one
            self._close(held, out, auction[_DATE_TIME], auction[_DATE_TIME])
        to_beat = auction[_RESERVE] - 1
        state: list[Any] = [auction, to_beat, NO_BID, -1]
        self._open[auction_id] = state
        self._to_beat[auction_id] = to_beat
        bucket = expires // CLOSING_BUCKET_MS
        ids = self._closing.get(bucket)
        if ids is None:
            self._closing[bucket] = [auction_id]
            heapq.heappush(self._buckets, bucket)
        else:
            ids.append(auction_id)
        early = self._early.pop(auction_id, None)
        if early is not None:
            for bid in early:
                if bid[2] >= to_beat:
                    self._offer(state, bid)

    def _close(self, state: list[Any], out: list[Any], closed_at: int, released_at: int) -> None:
        """Drop ``state``'s auction; its partial winner, if it has one, timestamped when it stopped
        taking bids: ``expires``, or the start of the auction that reopened its id if earlier. With
        ``whole`` the winner is final at once and is timestamped ``released_at``, the event time that
        closes it (the watermark, or the reopening auction's start), as the combining stage stamps
        what it evicts: watermarks are throttled, to a second in a pipeline without windows, so
        ``expires`` can be that far behind."""
        auction, price, date_time, bidder = state
        del self._open[auction[_ID]]
        del self._to_beat[auction[_ID]]
        if date_time != NO_BID:
            if self._whole:
                out.append((released_at, AuctionBid(Auction(*auction), bidder, price, date_time)))
            else:
                out.append((min(closed_at, auction[_EXPIRES]), (auction, bidder, price, date_time)))

    def try_process_watermark(self, watermark: wm.Watermark) -> bool:
        return self._output.watermark(self.outbox, watermark, self._advance)

    def _advance(self, watermark: int) -> list[Any]:
        """Close every auction whose ``expires`` the watermark reached (their partial winners are
        returned); drop the early bids it left behind."""
        self._watermark = watermark
        out: list[Any] = []
        buckets, closing, opened = self._buckets, self._closing, self._open
        while buckets and buckets[0] * CLOSING_BUCKET_MS <= watermark:
            bucket = buckets[0]
            waiting: list[int] = []
            for auction_id in closing[bucket]:
                state = opened.get(auction_id)
                if state is None or state[0][_EXPIRES] // CLOSING_BUCKET_MS != bucket:
                    continue  # closed already, by a reopened id
                if state[0][_EXPIRES] <= watermark:
                    self._close(state, out, state[0][_EXPIRES], watermark)
                else:
                    waiting.append(auction_id)
            if waiting:
                closing[bucket] = waiting
                break
            del closing[bucket]
            heapq.heappop(buckets)
        if self._early:
            limit = watermark - self._ttl
            for auction_id in [k for k, bids in self._early.items() if bids[-1][3] < limit]:
                del self._early[auction_id]
        return out

    def complete(self) -> bool:
        return self._output.flush(self.outbox)

    def save_to_snapshot(self) -> bool:
        return self._snapshot.write(self.outbox, self._entries)

    def _entries(self) -> list[tuple[Any, Any]]:
        states = [list(state) for state in self._open.values()]
        early = {auction_id: list(bids) for auction_id, bids in self._early.items()}
        key = snapshot_keys.ProcessorKey(SNAPSHOT_TAG, self.context.global_processor_index)
        return [(key, snapshot_writer.Copied((states, early)))]

    def restore_from_snapshot(self, inbox: inbox_mod.Inbox) -> None:
        mine = self._owns if self._whole else None
        for key, (states, early) in inbox.take_all():
            if not (isinstance(key, snapshot_keys.ProcessorKey) and key.tag == SNAPSHOT_TAG):
                raise ValueError(f"winning bids' partial stage cannot restore the snapshot entry {key!r}")
            self._restored.extend(state for state in states if mine is None or mine(state[0][_ID]))
            for auction_id, bids in early.items():
                if mine is None or mine(auction_id):
                    self._early.setdefault(auction_id, []).extend(bids)

    def _owns(self, auction_id: int) -> bool:
        """Whether this processor's source lane holds ``auction_id`` (``whole``: the source split by
        auction, :func:`~jetlet.nexmark.fast_generator.auction_lane`, forwarded here)."""
        return auction_id % self.context.total_parallelism == self.context.global_processor_index

    def finish_snapshot_restore(self) -> bool:
        """Hold every saved auction, oldest first (a later one of its id closes it as when it came),
        with the best of the bids saved for it."""
        self._restored.sort(key=lambda saved: (saved[0][_ID], saved[0][_DATE_TIME]))
        for auction, price, date_time, bidder in self._restored:
            self._open_auction(auction, self._output.items)
            held = self._open.get(auction[_ID])
            if held is not None and held[0][_DATE_TIME] == auction[_DATE_TIME] and date_time != NO_BID:
                self._offer(held, (auction[_ID], bidder, price, date_time))
        self._restored = []
        return True


def partial_winning_bids_p(ttl: int, whole: bool = False) -> processor.ProcessorFactory:
    """A factory of :class:`PartialWinningBidsP` that keeps early bids for ``ttl`` ms of event time;
    ``whole``: each processor sees every event of its auctions, and emits their winners."""
    return lambda: PartialWinningBidsP(ttl, whole)
