"""``fast_nexmark_source``: the fast generator's events as a distributed, replayable jetlet source.

The same machinery as :func:`~jetlet.nexmark.source.nexmark_source`
(:func:`~jetlet.nexmark.source.strided_event_source`): processor ``i`` of ``p`` emits the numbers
``i, i + p, ...`` (or, split ``by_auction``, the numbers of its auctions:
:func:`~jetlet.nexmark.source.lane_event_source`), each fill a batch of up to 1,024 events
(strided: 1,024 numbers turned into events by :func:`~jetlet.nexmark.fast_generator.fast_events`; in a
lane: those of a run of numbers, :func:`~jetlet.nexmark.fast_generator.lane_events`; table slices, see
:mod:`~jetlet.nexmark.fast_generator`), each with its event time as the native timestamp; a
snapshot holds the processor's position and a restore resumes after exactly what was emitted.

Pacing: with ``rate`` the source paces itself by the **wall clock** from the config's
``base_time``: number ``n`` is due at ``base_time / 1000 + n / rate`` seconds of ``time.time()``
on every member, and ``rate`` is also the config's rate, so event ``n``'s time is the instant it
is scheduled to be emitted (to the millisecond) — the latency a benchmark measures from the event
time is then the latency from its scheduled emission. Without ``rate`` it emits as fast as the
pipeline takes events, the event times still spaced at ``config.rate``.
"""

from __future__ import annotations

import functools
from typing import Any

from jetlet.nexmark import fast_generator, source
from jetlet.pipeline import StreamSource


def fast_nexmark_source(
    config: fast_generator.FastConfig,
    count: int | None = None,
    paced: bool = False,
    *,
    local_parallelism: int = 1,
    by_auction: bool = False,
) -> StreamSource[Any]:
    """A timestamped stream of the fast generator's events, ``local_parallelism`` processors per member.

    ``by_auction`` splits the stream among the processors by auction instead of by stride
    (:func:`~jetlet.nexmark.fast_generator.auction_lane`): each processor emits every bid and the
    auction of its auction ids, as a topic partitioned by auction id gives each consumer its
    partitions, so that winning bids (queries 4 and 6) need no exchange between members
    (:func:`~jetlet.nexmark.joins.winning_bids` with ``by_auction``). Every processor then passes
    every event number, taking its own from table slices.

    ``count`` bounds the events (unbounded when None). ``paced`` emits them at ``config.rate``
    events per second of the whole stream, by the wall clock from ``config.base_time`` (which must
    then be an epoch time in ms, e.g. ``int(time.time() * 1000) + 2000`` for a start 2 s ahead);
    otherwise as fast as possible.

    >>> import time
    >>> config = fast_generator.FastConfig(rate=100_000, base_time=int(time.time() * 1000))
    >>> fast_nexmark_source(config, paced=True).name
    'fast-nexmark'
    """
    events_fn = functools.partial(_events, config)
    if by_auction:
        return source.lane_event_source(
            "fast-nexmark",
            events_fn,
            functools.partial(_lane_events, config),
            functools.partial(_auction_lane, config),
            count,
            config.rate if paced else None,
            local_parallelism=local_parallelism,
            paced_since=config.base_time / 1000 if paced else None,
        )
    if not paced:
        return source.strided_event_source(
            "fast-nexmark", events_fn, count, local_parallelism=local_parallelism
        )
    return source.strided_event_source(
        "fast-nexmark",
        events_fn,
        count,
        config.rate,
        local_parallelism=local_parallelism,
        paced_since=config.base_time / 1000,
    )


def _events(config: fast_generator.FastConfig, numbers: Any) -> list[Any]:
    return fast_generator.fast_events(numbers, config)


def _lane_events(
    config: fast_generator.FastConfig, start: int, stop: int, limit: int, lane: int, lanes: int
) -> tuple[list[Any], int]:
    return fast_generator.lane_events(start, stop, limit, config, lane, lanes)


def _auction_lane(config: fast_generator.FastConfig, number: int, lanes: int) -> int:
    return fast_generator.auction_lane(number, config, lanes)
