"""The plain-Python loop peer: each query as the tight loop a careful Python programmer writes.

It is the per-item limit of the language on this machine: no engine, no queues, no threads, the same
events as jetlet's source, made the same way (:func:`~jetlet.nexmark.fast_generator.fast_events`
over batches of :data:`BATCH` consecutive numbers — generation is timed, as jetlet's source
generates its events inside the measured job; the first batch is untimed, as jetlet's runs have a
warm-up, so the generator's tables are not built on the clock). Each query is a *step*
``step(events, out)`` that appends its results to ``out``; the timed loop counts and clears ``out``
after every batch. A query with state is a class whose instance is the step. :func:`measure` also
counts the CPU time of this process over the loop (:mod:`.cpu`), for CPU-seconds per event beside
the rate. Event time is the events' ``date_time``, which the fast generator makes non-decreasing, so
"time passed ``t``" is "an event at or after ``t`` came" (jetlet's watermark also comes from every
event, of any kind).

* Q0: every event; Q1: every bid with ``price * 89 // 100``; Q2: ``AuctionPrice`` of the bids on
  auctions whose id is a multiple of 123 — as :mod:`jetlet.nexmark.queries`.
* Q3: two dicts, the latest local person (state OR, ID or CA) by id and the category-10 auctions
  waiting for their seller; a local person answers the auctions waiting for them, an auction its
  known seller, as :func:`~jetlet.nexmark.joins.join_seller`. Without jetlet's state TTL (600 s of
  event time, longer than any run here).
* Q4 and Q6 share :class:`WinningBidsLoop`: each auction is an :class:`OpenAuction` with its best
  valid bid (made in ``[date_time, expires)``, at least the reserve, ties to the earlier
  bid, as :mod:`jetlet.nexmark.joins`); a dict maps each auction id to its latest record (the one
  its bids go to) and a min-heap of ``(expires, sequence, record)`` closes every auction whose
  ``expires`` the event time reached, with its winning bid if it has one. Bids on no open auction
  are dropped. Q4 keeps ``[sum, count]`` per category and emits the rounded average at each close;
  Q6 keeps each seller's last 10 winning bids by ``(bid time, price)`` and emits their rounded mean.
  Bids at the auction's own millisecond but before it are dropped (jetlet keeps them; at 1,000
  events/s there are none). The fast generator draws auction ids from its ``keys`` (10,000), so
  an id is reopened while an older auction of it may still be open: the older one then closes at
  once with its best so far (no later bid can count for it), as in jetlet
  (:mod:`jetlet.nexmark.partial_winners`), and the new one starts afresh. An auction closes at
  ``expires`` here, and in jetlet when the watermark passes it.
* Q5: frame-based, as ``bench/sliding_window_bench.py``: a dict of counts per auction for the
  current frame (one slide); when an event's time passes the frame's end, the frame is added to a
  running window dict, the window's top auction (most bids, ties to the higher id) is emitted as
  ``(window_end, [(auction, bids)])``, and the frame leaving the window is deducted — the same
  algorithm as jetlet's Q5 (:func:`~jetlet.nexmark.queries.bids_per_auction`), without the engine.
* Q7: the top price and the bids at it of the current tumbling window; when time reaches the
  window's end its bids are emitted.
* Q8: per tumbling window, the window's people by id and auctions by seller; when time reaches the
  window's end, every person with auctions in the window gives an ``IdNameReserve`` per auction.
  Q7's and Q8's windows are 1 s in :data:`PLAIN_QUERIES`, as :func:`~jetlet.nexmark.bench.jobs.query_fn`
  sets them for jetlet's throughput runs (the classes default to the queries' 10 s).
* Q13: a dict of the side input (``i -> str(i)``, ``i < 500``); each bid is re-made with
  ``extra`` the value of ``bidder % 500``.

At the benchmark's default event rate (:class:`~jetlet.nexmark.fast_generator.FastConfig`:
1,000,000 events per second of event time) a run of a few million events spans a few seconds of
event time: auctions (open 1 to 10 s) close only in longer runs, so Q4 and Q6 produce few
results in short ones.

:data:`PLAIN_QUERIES` names the queries that have a loop; the harness marks the others as having
none rather than skipping them silently.
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import itertools
import time
from collections import deque
from collections.abc import Callable

from jetlet.nexmark import fast_generator, joins, queries
from jetlet.nexmark.bench import cpu, jobs
from jetlet.nexmark.generator import DEFAULT_CONFIG
from jetlet.nexmark.model import (
    Auction,
    AuctionPrice,
    Bid,
    CategoryPrice,
    Event,
    IdNameReserve,
    NameCityStateId,
    Person,
    SellerPrice,
)

BATCH = 256
"""Events per generated batch (the source's batch size)."""
CHECK_EVERY = 64
"""Batches between two looks at the clock."""

Step = Callable[[list[Event], list[object]], None]


def q0_step(events: list[Event], out: list[object]) -> None:
    """Query 0: every event."""
    out.extend(events)


def q1_step(events: list[Event], out: list[object]) -> None:
    """Query 1: every bid, its price in euro cents."""
    append = out.append
    numerator, denominator = queries.DOLLAR_TO_EURO_NUMERATOR, queries.DOLLAR_TO_EURO_DENOMINATOR
    for event in events:
        if type(event) is Bid:
            price = event.price * numerator // denominator
            append(
                Bid(
                    event.auction, event.bidder, price, event.date_time, event.extra, event.channel, event.url
                )
            )


def q2_step(events: list[Event], out: list[object]) -> None:
    """Query 2: auction and price of the bids on every 123rd auction."""
    append = out.append
    skip = DEFAULT_CONFIG.auction_skip
    for event in events:
        if type(event) is Bid and event.auction % skip == 0:
            append(AuctionPrice(event.auction, event.price))


class HotItemsLoop:
    """Query 5 as a frame loop (see the module doc); call it with each batch."""

    def __init__(self, window_ms: int = jobs.WINDOW_MS, slide_ms: int = jobs.THROUGHPUT_SLIDE_MS) -> None:
        self._window_ms = window_ms
        self._slide_ms = slide_ms
        self._frame_end: int | None = None
        self._frame: dict[int, int] = {}
        self._window: dict[int, int] = {}
        self._frames: deque[tuple[int, dict[int, int]]] = deque()

    def __call__(self, events: list[Event], out: list[object]) -> None:
        frame_end, slide = self._frame_end, self._slide_ms
        frame = self._frame
        get = frame.get
        for event in events:
            timestamp = event.date_time
            if frame_end is None:
                frame_end = timestamp - timestamp % slide + slide
            while timestamp >= frame_end:
                self._close(frame_end, frame, out)
                frame = self._frame = {}
                get = frame.get
                frame_end += slide
            if type(event) is Bid:
                auction = event.auction
                frame[auction] = get(auction, 0) + 1
        self._frame_end = frame_end

    def _close(self, end: int, frame: dict[int, int], out: list[object]) -> None:
        window = self._window
        window_get = window.get
        for auction, count in frame.items():
            window[auction] = window_get(auction, 0) + count
        self._frames.append((end, frame))
        if window:
            auction, bids = max(window.items(), key=_bids_then_auction)
            out.append((end, [(auction, bids)]))
        frames = self._frames
        while frames and frames[0][0] <= end + self._slide_ms - self._window_ms:
            for auction, count in frames.popleft()[1].items():
                left = window[auction] - count
                if left:
                    window[auction] = left
                else:
                    del window[auction]


def _bids_then_auction(entry: tuple[int, int]) -> tuple[int, int]:
    return (entry[1], entry[0])


class LocalItemSuggestionLoop:
    """Query 3 as two dicts (see the module doc); call it with each batch."""

    def __init__(self) -> None:
        self._people: dict[int, Person] = {}
        self._waiting: dict[int, list[Auction]] = {}

    def __call__(self, events: list[Event], out: list[object]) -> None:
        people, waiting = self._people, self._waiting
        append = out.append
        states, category = joins.LOCAL_STATES, joins.LOCAL_CATEGORY
        for event in events:
            if type(event) is Bid:
                continue
            if type(event) is Auction:
                if event.category == category:
                    person = people.get(event.seller)
                    if person is None:
                        waiting.setdefault(event.seller, []).append(event)
                    else:
                        append(NameCityStateId(person.name, person.city, person.state, event.id))
            elif type(event) is Person and event.state in states:
                people[event.id] = event
                for auction in waiting.pop(event.id, ()):
                    append(NameCityStateId(event.name, event.city, event.state, auction.id))


Winner = Callable[[Auction, Bid], object]
"""What a closed auction with a winning bid gives (Q4's and Q6's result)."""


class OpenAuction:
    """An open auction of :class:`WinningBidsLoop` and its best valid bid so far."""

    __slots__ = ("auction", "best", "best_price")

    def __init__(self, auction: Auction) -> None:
        self.auction = auction
        self.best: Bid | None = None
        self.best_price = auction.reserve - 1
        """Just under the reserve before the first valid bid, so one comparison checks both."""


class WinningBidsLoop:
    """The winning bids of queries 4 and 6 as a dict and a min-heap (see the module doc).

    A bid goes to the latest :class:`OpenAuction` of its auction id. It was made while that auction
    was open because the event time does not decrease (the auction came first, and auctions with
    ``expires`` at or before the bid's time were closed before it), and the earlier of two bids at
    one price wins because it came first. An auction reopening an open id closes the older one.
    ``winner`` makes the result of a closed auction that has a winning bid.
    """

    def __init__(self, winner: Winner) -> None:
        self._winner = winner
        self._open: dict[int, OpenAuction] = {}
        self._heap: list[tuple[int, int, OpenAuction]] = []
        self._sequence = itertools.count()

    def __call__(self, events: list[Event], out: list[object]) -> None:
        opened, heap, sequence = self._open, self._heap, self._sequence
        get, push = opened.get, heapq.heappush
        next_close = heap[0][0] if heap else None
        for event in events:
            if next_close is not None and event.date_time >= next_close:
                next_close = self._close_until(event.date_time, out)
            if type(event) is Bid:
                state = get(event.auction)
                if state is not None and event.price > state.best_price:
                    state.best_price = event.price
                    state.best = event
            elif type(event) is Auction:
                reopened = get(event.id)
                if reopened is not None:
                    self._close_now(reopened, out)
                state = opened[event.id] = OpenAuction(event)
                push(heap, (event.expires, next(sequence), state))
                if next_close is None or event.expires < next_close:
                    next_close = event.expires

    def _close_now(self, state: OpenAuction, out: list[object]) -> None:
        """Close ``state``, reopened before its ``expires``: its heap entry then closes nothing."""
        if state.best is not None:
            out.append(self._winner(state.auction, state.best))
            state.best = None

    def _close_until(self, now: int, out: list[object]) -> int | None:
        """Close every auction with ``expires <= now``; the next ``expires`` (None when none is open)."""
        heap, opened, winner = self._heap, self._open, self._winner
        while heap and heap[0][0] <= now:
            state = heapq.heappop(heap)[2]
            auction = state.auction
            if opened.get(auction.id) is state:
                del opened[auction.id]
            if state.best is not None:
                out.append(winner(auction, state.best))
        return heap[0][0] if heap else None


class CategoryAverages:
    """Query 4's winner: the category's running ``[sum, count]`` of winning prices, then its average."""

    def __init__(self) -> None:
        self._totals: dict[int, list[int]] = {}

    def __call__(self, auction: Auction, bid: Bid) -> CategoryPrice:
        totals = self._totals.get(auction.category)
        if totals is None:
            totals = self._totals[auction.category] = [0, 0]
        totals[0] += bid.price
        totals[1] += 1
        return CategoryPrice(auction.category, joins.java_round(totals[0] / totals[1]))


class SellerAverages:
    """Query 6's winner: the seller's last winning ``(bid time, price)`` pairs, sorted, then their mean."""

    def __init__(self) -> None:
        self._last: dict[int, list[tuple[int, int]]] = {}

    def __call__(self, auction: Auction, bid: Bid) -> SellerPrice:
        last = self._last.get(auction.seller)
        if last is None:
            last = self._last[auction.seller] = []
        bisect.insort(last, (bid.date_time, bid.price))
        if len(last) > joins.LAST_AUCTIONS:
            del last[0]
        return SellerPrice(auction.seller, joins.java_round(sum(price for _, price in last) / len(last)))


class HighestBidLoop:
    """Query 7: the top price and its bids in the current tumbling window, emitted at its end."""

    def __init__(self, window_ms: int = jobs.WINDOW_MS) -> None:
        self._window_ms = window_ms
        self._end: int | None = None
        self._top = -1
        self._bids: list[Bid] = []

    def __call__(self, events: list[Event], out: list[object]) -> None:
        if not events:
            return
        size = self._window_ms
        end = self._end
        if end is None:
            first = events[0].date_time
            end = first - first % size + size
        top, bids = self._top, self._bids
        for event in events:
            timestamp = event.date_time
            if timestamp >= end:
                out.extend(bids)
                bids, top = [], -1
                end = timestamp - timestamp % size + size
            if type(event) is Bid:
                price = event.price
                if price > top:
                    top, bids = price, [event]
                elif price == top:
                    bids.append(event)
        self._end, self._top, self._bids = end, top, bids


class NewUsersLoop:
    """Query 8: the current tumbling window's people by id and auctions by seller, joined at its end."""

    def __init__(self, window_ms: int = jobs.WINDOW_MS) -> None:
        self._window_ms = window_ms
        self._end: int | None = None
        self._people: dict[int, list[Person]] = {}
        self._auctions: dict[int, list[Auction]] = {}

    def __call__(self, events: list[Event], out: list[object]) -> None:
        if not events:
            return
        size = self._window_ms
        end = self._end
        if end is None:
            first = events[0].date_time
            end = first - first % size + size
        people, auctions = self._people, self._auctions
        for event in events:
            timestamp = event.date_time
            if timestamp >= end:
                _join_window(people, auctions, out)
                people, auctions = {}, {}
                end = timestamp - timestamp % size + size
            if type(event) is Auction:
                auctions.setdefault(event.seller, []).append(event)
            elif type(event) is Person:
                people.setdefault(event.id, []).append(event)
        self._end, self._people, self._auctions = end, people, auctions


def _join_window(
    people: dict[int, list[Person]], auctions: dict[int, list[Auction]], out: list[object]
) -> None:
    append = out.append
    for person_id, persons in people.items():
        sold = auctions.get(person_id)
        if sold:
            for person in persons:
                for auction in sold:
                    append(IdNameReserve(person_id, person.name, auction.reserve))


SIDE_VALUES: dict[int, str] = dict(queries.side_input_rows())
"""Query 13's side input as a dict."""


def q13_step(events: list[Event], out: list[object]) -> None:
    """Query 13: every bid with ``extra`` its side-input value (the row ``bidder % 500``)."""
    append = out.append
    values, size = SIDE_VALUES, queries.SIDE_INPUT_SIZE
    for event in events:
        if type(event) is Bid:
            append(
                Bid(event.auction, event.bidder, event.price, event.date_time, values[event.bidder % size])
            )


PLAIN_QUERIES: dict[str, Callable[[], Step]] = {
    "q0": lambda: q0_step,
    "q1": lambda: q1_step,
    "q2": lambda: q2_step,
    "q3": LocalItemSuggestionLoop,
    "q4": lambda: WinningBidsLoop(CategoryAverages()),
    "q5": HotItemsLoop,
    "q6": lambda: WinningBidsLoop(SellerAverages()),
    "q7": lambda: HighestBidLoop(jobs.THROUGHPUT_SLIDE_MS),
    "q8": lambda: NewUsersLoop(jobs.THROUGHPUT_SLIDE_MS),
    "q13": lambda: q13_step,
}
"""A fresh step for each query that has a plain loop."""


def results(query: str, events: list[Event]) -> list[object]:
    """Every result of the plain loop of ``query`` over ``events`` (one batch)."""
    out: list[object] = []
    PLAIN_QUERIES[query]()(events, out)
    return out


@dataclasses.dataclass(frozen=True, slots=True)
class PlainRun:
    """One query's timed plain loop."""

    query: str
    events: int
    results: int
    seconds: float
    cpu_seconds: float | None = None
    """User + system CPU seconds of this process (the driver) over the loop."""
    round: int = 0
    """The harness's round this run belongs to (see :mod:`.paired`)."""

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds

    @property
    def cpu_us_per_event(self) -> float | None:
        """CPU microseconds per event (None: not measured, or no events)."""
        if self.cpu_seconds is None or not self.events:
            return None
        return self.cpu_seconds * 1e6 / self.events


def measure(query: str, seconds: float, round_index: int = 0) -> PlainRun:
    """Run the loop of ``query`` over freshly generated events for about ``seconds``."""
    step = PLAIN_QUERIES[query]()
    meter = cpu.Meter.of()
    config = fast_generator.FastConfig(base_time=0)
    generate = fast_generator.fast_events
    out: list[object] = []
    step(generate(range(BATCH), config), out)  # untimed: the generator's tables are made once
    out.clear()
    produced = 0
    number = BATCH
    cpu0 = meter.read()
    started = time.perf_counter()
    deadline = started + seconds
    while True:
        for _ in range(CHECK_EVERY):
            step(generate(range(number, number + BATCH), config), out)
            number += BATCH
            produced += len(out)
            out.clear()
        if time.perf_counter() >= deadline:
            break
    elapsed = time.perf_counter() - started
    return PlainRun(query, number - BATCH, produced, elapsed, cpu.used(cpu0, meter.read()), round_index)
