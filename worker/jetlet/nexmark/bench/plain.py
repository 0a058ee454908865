"""The plain-Python loop peer: each query as the tight loop a careful Python programmer writes.

It is the per-item limit of the language on this machine: no engine, no queues, no threads, the
same events as jetlet's source, made the same way (:func:`~jetlet.nexmark.fast_generator.fast_events`
over batches of :data:`BATCH` consecutive numbers — generation is timed, as jetlet's source
generates its events inside the measured job). Each query is a *step* ``step(events, out)`` that
appends its results to ``out``; the timed loop counts and clears ``out`` after every batch.

* Q0: every event; Q1: every bid with ``price * 89 // 100``; Q2: ``AuctionPrice`` of the bids on
  auctions whose id is a multiple of 123 — as :mod:`jetlet.nexmark.queries`.
* Q5: frame-based, as ``bench/sliding_window_bench.py``: a dict of counts per auction for the
  current frame (one slide); when an event's time passes the frame's end, the frame is added to a
  running window dict, the window's top auction (most bids, ties to the higher id) is emitted as
  ``(window_end, [(auction, bids)])``, and the frame leaving the window is deducted. An event of any
  kind advances time (jetlet's watermark also comes from every event). jetlet's two-stage Q5 emits
  the window ending at ``E`` only when time reaches ``E + slide``; the loop emits it at ``E``.

:data:`PLAIN_QUERIES` names the queries that have a loop; the harness marks the others as having
none rather than skipping them silently.
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from collections.abc import Callable

from jetlet.nexmark import fast_generator, queries
from jetlet.nexmark.bench import jobs
from jetlet.nexmark.generator import DEFAULT_CONFIG
from jetlet.nexmark.model import AuctionPrice, Bid, Event

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


PLAIN_QUERIES: dict[str, Callable[[], Step]] = {
    "q0": lambda: q0_step,
    "q1": lambda: q1_step,
    "q2": lambda: q2_step,
    "q5": HotItemsLoop,
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

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds


def measure(query: str, seconds: float) -> PlainRun:
    """Run the loop of ``query`` over freshly generated events for about ``seconds``."""
    step = PLAIN_QUERIES[query]()
    config = fast_generator.FastConfig(base_time=0)
    generate = fast_generator.fast_events
    out: list[object] = []
    produced = 0
    number = 0
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
    return PlainRun(query, number, produced, time.perf_counter() - started)
