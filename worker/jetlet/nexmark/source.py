"""``nexmark_source``: the NEXMark event stream as a distributed, replayable jetlet source.

Built with :meth:`jetlet.pipeline.SourceBuilder.timestamped_stream`. Each source processor owns
the numbers ``index, index + parallelism, index + 2 * parallelism, ...`` (its global processor
index and the total parallelism from the context), so the processors together emit every event
number exactly once. Each item is added with its event time as the native timestamp. A source
split into *lanes* by key (:func:`lane_event_source`) owns instead the numbers of its lane: every
processor passes every number, keeps its lane's and saves a
:class:`~jetlet.core.processors.sources.LanePosition` (below, with a
:class:`~jetlet.core.processors.sources.LaneCursor`).

Its state is a :class:`_Slice` around a :class:`~jetlet.core.processors.sources.StridedCursor`:
the next number to emit. A snapshot saves the cursor's
:class:`~jetlet.core.processors.sources.SlicePosition`; a restore gives every processor the
positions of every processor that saved, and the cursor resumes after exactly the numbers they
had emitted, also when the job restarts with another number of processors (the generator is a
pure function of the number, so a processor regenerates any number of its new slice).

With ``count`` the stream has events ``0 .. count - 1`` and then stays silent (it is still a
stream: the job runs until cancelled). With ``rate`` (events per second, all processors together)
the processor emits number ``n`` no earlier than ``(n - paced_from) / rate`` seconds after it
started; a restore restarts the pace at the lowest number not yet emitted, so the events missed
while the job was down do not come in a burst.

A fill never waits, paced or not, so the processor is cooperative: it runs on the cooperative
thread beside the query's processors. Each call emits the events due by the last whole
:data:`PACE_TICK_S` (up to a chunk), or returns at once when none are; a worker whose processors
all made no progress backs off (at most 1 ms, see :mod:`jetlet._execution.execution_service`). A
paced source on a thread of its own (as it was before) held the GIL a few events at a time, at
about twice the generator's cost per event, and its hand-offs took spare capacity from the query
(bench/RESULTS.md, "The paced source runs cooperatively").

The machinery is :func:`strided_event_source`, shared with
:func:`~jetlet.nexmark.fast_source.fast_nexmark_source`: it takes the batch function that turns a
processor's numbers into events (Beam's generator here, one event at a time) and, optionally, a
wall-clock pace (``paced_since``: number ``n`` is due at ``paced_since + n / rate`` seconds of
``time.time()`` on every member), which a latency benchmark needs so that an event's time is its
scheduled emission time.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from jetlet.core import processor as proc
from jetlet.core.processors.sources import LaneCursor, SlicePosition, StridedCursor
from jetlet.nexmark.generator import DEFAULT_CONFIG, GeneratorConfig, event
from jetlet.nexmark.model import Event
from jetlet.pipeline import SourceBuilder, StreamSource
from jetlet.pipeline.source_builder import BUFFER_CAPACITY, TimestampedSourceBuffer

BATCH_SIZE = BUFFER_CAPACITY
"""Most events one fill adds: a whole chunk (one outbox bucket), so every stage downstream works on
full batches."""

PACE_TICK_S = 0.001
"""A paced source emits the events due by the last whole tick: one batch per tick, not a few events
per pass of the cooperative thread (each batch costs the stages downstream a call each)."""

EventsFn = Callable[[Sequence[int]], Sequence[Event]]
"""Turns a batch of event numbers into their events, in order (a pure function of the numbers)."""
LaneEventsFn = Callable[[int, int, int, int, int], tuple[Sequence[Event], int]]
"""``(start, stop, limit, lane, lanes)``: the events of lane ``lane`` of ``lanes`` among the numbers
``start .. stop - 1``, at most ``limit`` of them, in order, and the number to go on from."""
LaneOfFn = Callable[[int, int], int]
"""``(number, lanes)``: the lane of an event number among ``lanes``."""


@dataclasses.dataclass(slots=True)
class _Slice:
    """One processor's position in its slice of the stream."""

    events_fn: EventsFn
    cursor: StridedCursor | LaneCursor
    count: int | None
    rate: float | None
    started_at: float
    paced_from: int = 0
    """The number that is due at ``started_at``."""
    clock: Callable[[], float] = time.monotonic
    """The clock of ``started_at``: monotonic, or ``time.time`` for a wall-clock pace."""
    lane_events: LaneEventsFn | None = None
    """A source split into lanes by key: the events of a lane in a run of numbers (the cursor is a
    :class:`LaneCursor`)."""

    def due_stop(self) -> int:
        """One past the last number that may be emitted now (by count, and by pace in whole ticks)."""
        stop = sys.maxsize if self.count is None else self.count
        if self.rate is not None:
            ticks = (self.clock() - self.started_at) // PACE_TICK_S
            stop = min(stop, self.paced_from + int(ticks * PACE_TICK_S * self.rate) + 1)
        return stop


def _fill(state: _Slice, buffer: TimestampedSourceBuffer[Any]) -> None:
    cursor = state.cursor
    if isinstance(cursor, LaneCursor):
        events = _lane_events(state, cursor)
    else:
        numbers = cursor.take(BATCH_SIZE, state.due_stop())
        events = state.events_fn(numbers) if numbers else ()
    if events:
        buffer.add_all(events, list(map(_date_time, events)))


def _lane_events(state: _Slice, cursor: LaneCursor) -> Sequence[Event]:
    stop = state.due_stop()
    restored = cursor.take_restored(BATCH_SIZE, stop)
    if restored is not None:
        return state.events_fn(restored) if restored else ()
    if cursor.next >= stop:
        return ()
    assert state.lane_events is not None
    events, after = state.lane_events(cursor.next, stop, BATCH_SIZE, cursor.index, cursor.lanes)
    cursor.advance(after)
    return events


_date_time = operator.attrgetter("date_time")


def _snapshot(state: _Slice) -> SlicePosition:
    return state.cursor.position()


def _restore(state: _Slice, saved: list[SlicePosition]) -> None:
    state.cursor.restore(saved, "nexmark")
    state.started_at = state.clock()
    state.paced_from = state.cursor.resumed_from


def _beam_events(config: GeneratorConfig, numbers: Sequence[int]) -> list[Event]:
    return [event(number, config) for number in numbers]


def nexmark_source(
    config: GeneratorConfig = DEFAULT_CONFIG,
    count: int | None = None,
    rate: float | None = None,
    *,
    local_parallelism: int = 1,
) -> StreamSource[Any]:
    """A timestamped stream of NEXMark events, ``local_parallelism`` processors per member.

    ``count`` bounds the events (all of them unbounded when None); ``rate`` paces the emission to
    that many events per second (as fast as possible when None).
    """
    events_fn = functools.partial(_beam_events, config)
    return strided_event_source("nexmark", events_fn, count, rate, local_parallelism=local_parallelism)


def strided_event_source(
    name: str,
    events_fn: EventsFn,
    count: int | None = None,
    rate: float | None = None,
    *,
    local_parallelism: int = 1,
    paced_since: float | None = None,
) -> StreamSource[Any]:
    """The source behind :func:`nexmark_source`, for any pure ``events_fn`` of the event numbers.

    ``count`` and ``rate`` as in :func:`nexmark_source`. With ``paced_since`` (a ``time.time()``
    value; needs ``rate``) number ``n`` is due at ``paced_since + n / rate`` by the wall clock, the
    same instant on every member; without it each processor paces from the moment it started.
    """
    _check(count, rate, paced_since)

    def strided(context: proc.ProcessorContext) -> StridedCursor:
        return StridedCursor(context.global_processor_index, context.total_parallelism)

    return _build(name, _slices(strided, events_fn, count, rate, paced_since), local_parallelism)


def lane_event_source(
    name: str,
    events_fn: EventsFn,
    lane_events: LaneEventsFn,
    lane_of: LaneOfFn,
    count: int | None = None,
    rate: float | None = None,
    *,
    local_parallelism: int = 1,
    paced_since: float | None = None,
) -> StreamSource[Any]:
    """:func:`strided_event_source` split into lanes by key instead of by stride.

    Processor ``i`` of ``p`` emits the numbers of lane ``i`` (``lane_of(n, p) == i``), which
    ``lane_events`` finds in each run of numbers; ``events_fn`` makes the events of numbers given
    one by one (after a restore, below the highest saved position). A generator whose lanes follow
    a key (all events of one auction in one lane) gives each processor all of its keys' events, as a
    topic partitioned by that key gives each consumer its partitions: a stage keyed the same way
    then needs no exchange between members. Every processor passes every number, so each lane's
    generator must skip the others' cheaply. ``count``, ``rate`` and ``paced_since`` as in
    :func:`strided_event_source`; snapshots and restores as there, with a :class:`LaneCursor`.
    """
    _check(count, rate, paced_since)

    def lane(context: proc.ProcessorContext) -> LaneCursor:
        return LaneCursor(context.global_processor_index, context.total_parallelism, lane_of)

    create = _slices(lane, events_fn, count, rate, paced_since, lane_events)
    return _build(name, create, local_parallelism)


def _slices(
    cursor_of: Callable[[proc.ProcessorContext], StridedCursor | LaneCursor],
    events_fn: EventsFn,
    count: int | None,
    rate: float | None,
    paced_since: float | None,
    lane_events: LaneEventsFn | None = None,
) -> Callable[[proc.ProcessorContext], _Slice]:
    """Each processor's :class:`_Slice`: its cursor, paced from its start, or by the wall clock from
    ``paced_since``."""

    def create(context: proc.ProcessorContext) -> _Slice:
        cursor = cursor_of(context)
        if paced_since is None:
            return _Slice(events_fn, cursor, count, rate, time.monotonic(), lane_events=lane_events)
        return _Slice(events_fn, cursor, count, rate, paced_since, clock=time.time, lane_events=lane_events)

    return create


def _check(count: int | None, rate: float | None, paced_since: float | None) -> None:
    if count is not None and count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    if rate is not None and rate <= 0:
        raise ValueError(f"rate must be > 0, got {rate}")
    if paced_since is not None and rate is None:
        raise ValueError("paced_since needs a rate")


def _build(
    name: str, create: Callable[[proc.ProcessorContext], _Slice], local_parallelism: int
) -> StreamSource[Any]:
    return (
        SourceBuilder.timestamped_stream(name, create)
        .fill_buffer_fn(_fill)
        .create_snapshot_fn(_snapshot)
        .restore_snapshot_fn(_restore)
        .distributed(local_parallelism)
        .cooperative()
        .build()
    )
