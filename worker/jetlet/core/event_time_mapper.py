"""``EventTimeMapper``: timestamps a stream's items and makes its watermarks (Jet's ``EventTimeMapper``).

The one place where event time is made. ``insert_watermarks_p`` runs it over its inbox; a source
with an event-time policy planned into it (a ``SourceBuilder`` timestamped stream followed by
``with_native_timestamps``, as Jet plans the policy into the source) runs it over each batch it
fills, which saves a processor and a queue hop per item.

For each item the mapper reads its event time with the policy's ``timestamp_fn``. An item older
than the last watermark emitted is *late*: it is dropped and counted (:attr:`late`). Any other
item is kept, wrapped by the policy's ``wrap_fn`` (by default the ``(timestamp, item)`` event; None
keeps the item as it is), and then, if the highest timestamp seen so far moved the throttled
limiting-lag watermark (see :class:`~jetlet.core.event_time.EventTimePolicy`) above the last one
emitted, the new watermark follows it. :meth:`EventTimeMapper.outputs_of` turns one chunk into
its outputs (one clock read per chunk).

A chunk in which no item can be late (none is below the watermark its highest timestamp gives)
takes a fast path with no Python bytecode per item: items are wrapped by C iterators, and the few
items that lift the watermark are found by a C scan for the first timestamp reaching the next
throttled step. Other chunks are walked item by item.

Idleness: when no item came for ``idle_timeout_ms`` (a monotonic millisecond clock, injectable for
tests), :meth:`EventTimeMapper.idle_message` gives ``IDLE_MESSAGE`` once, so that downstream
coalescing ignores this stream; the first chunk after that starts with the last watermark again,
to mark the stream active.

State for snapshots: the highest timestamp seen and the last watermark emitted
(:meth:`EventTimeMapper.saved_state`). A restore is given the states of every processor that saved
and takes the minimum of each (as Jet does), so a restored processor never emits a watermark below
one it emitted before, and never accepts an item it had declared late when one processor's state
is restored into one processor.

:func:`offer_outputs` emits outputs through an outbox: runs of items as batches, each watermark on
its own (a bucket holds no data beside a watermark).
"""

from __future__ import annotations

import itertools
import operator
import time
from collections.abc import Callable, Iterable
from itertools import repeat
from typing import Any

from jetlet.core import event_time
from jetlet.core import outbox as outbox_mod
from jetlet.core import watermark as wm

Clock = Callable[[], int]
"""A monotonic clock in milliseconds."""

SNAPSHOT_TAG = "__jetlet_insert_watermarks__"
"""The tag of the :class:`~jetlet.core.snapshot_keys.ProcessorKey` a mapper's state is saved under
(by ``insert_watermarks_p``, and by a source with the event-time policy planned into it)."""

State = tuple[int | None, int | None]
"""What a snapshot saves: (highest timestamp seen, last watermark emitted); None: none yet."""


def monotonic_ms() -> int:
    """The default clock: ``time.monotonic_ns()`` in milliseconds."""
    return time.monotonic_ns() // 1_000_000


class EventTimeMapper:
    """See the module doc."""

    __slots__ = ("_clock", "_idle", "_last_item_at", "_policy", "_throttling", "last_wm", "late", "top_ts")

    def __init__(self, policy: event_time.EventTimePolicy, clock: Clock = monotonic_ms) -> None:
        if policy.timestamp_fn is None:
            raise ValueError("an EventTimeMapper needs an EventTimePolicy with a timestamp_fn")
        self._policy = policy
        self._clock = clock
        self._throttling = policy.throttling
        self.top_ts: int | None = None
        self.last_wm: int | None = None
        self.late = 0
        """Items dropped as late so far."""
        self._idle = False
        self._last_item_at = clock()

    def outputs_of(self, chunk: list[Any], stamps: list[int] | None = None) -> tuple[list[Any], bool]:
        """The chunk's on-time items (wrapped) with a watermark after each item that advanced it,
        and whether those outputs hold a watermark (most hold none: one batch offer then).

        ``stamps``: the items' timestamps, in order, when the caller has them (a source's buffer
        holds them beside its events); else the policy's ``timestamp_fn`` reads them."""
        self._last_item_at = self._clock()
        outputs: list[Any] = []
        watermarks = False
        if self._idle:
            self._idle = False
            if self.last_wm is not None:
                outputs.append(wm.Watermark(self.last_wm))
                watermarks = True
        if stamps is None:
            assert self._policy.timestamp_fn is not None
            stamps = list(map(self._policy.timestamp_fn, chunk))
        last_wm, top = self.last_wm, self.top_ts
        if last_wm is None or top is None:
            return outputs, self._insert_one_by_one(chunk, stamps, outputs) or watermarks
        # The watermark only rises, so none emitted for this chunk is above the one its highest
        # timestamp gives: if no item is below that one, no item is late. The lowest and highest
        # come from one sort in C: an ordered chunk is one run (5 ns an item against min and max's
        # 18), a shuffled one 12.
        ordered = sorted(stamps)
        chunk_top = ordered[-1]
        chunk_wm = max(last_wm, self._watermark_for(max(top, chunk_top)))
        if ordered[0] >= chunk_wm:
            return outputs, self._insert_on_time(chunk, stamps, chunk_top, outputs) or watermarks
        return outputs, self._insert_one_by_one(chunk, stamps, outputs) or watermarks

    def _insert_on_time(
        self, chunk: list[Any], stamps: list[int], chunk_top: int, outputs: list[Any]
    ) -> bool:
        """The fast path for a chunk without late items: no Python bytecode per item.

        Items are wrapped by C iterators. The watermark rises at the first
        item whose timestamp reaches the lowest top that lifts it (that item is
        the new top), found by a C scan; there are few such items per chunk.
        Returns whether a watermark was added.
        """
        wrap = self._policy.wrap_fn
        if wrap is None:
            events: list[Any] = chunk
        elif wrap is event_time.wrap_as_event:
            events = list(zip(stamps, chunk, strict=True))
        else:
            events = list(map(wrap, chunk, stamps))
        last_wm, start = self.last_wm, 0
        assert last_wm is not None and self.top_ts is not None
        if chunk_top < self._lowest_top_lifting(last_wm):  # most chunks: no watermark rises, no scan
            outputs.extend(events)
            self.top_ts = max(self.top_ts, chunk_top)
            return False
        while (at := _first_at_least(stamps, self._lowest_top_lifting(last_wm), start)) is not None:
            last_wm = self._watermark_for(stamps[at])
            outputs.extend(events[start : at + 1])
            outputs.append(wm.Watermark(last_wm))
            start = at + 1
        outputs.extend(events[start:])
        self.last_wm, self.top_ts = last_wm, max(self.top_ts, chunk_top)
        return True

    def _insert_one_by_one(self, chunk: list[Any], stamps: list[int], outputs: list[Any]) -> bool:
        """The general path: late items are dropped as the watermark advances within the chunk.
        Returns whether a watermark was added."""
        last_wm, top = self.last_wm, self.top_ts
        wrap, watermark_for = self._policy.wrap_fn, self._watermark_for
        late = 0
        watermarks = False
        for timestamp, item in zip(stamps, chunk, strict=True):
            if last_wm is not None and timestamp < last_wm:
                late += 1
                continue
            outputs.append(item if wrap is None else wrap(item, timestamp))
            if top is None or timestamp > top:
                top = timestamp
                new_wm = watermark_for(timestamp)
                if last_wm is None or new_wm > last_wm:
                    last_wm = new_wm
                    outputs.append(wm.Watermark(new_wm))
                    watermarks = True
        self.last_wm, self.top_ts = last_wm, top
        self.late += late
        return watermarks

    def _watermark_for(self, top: int) -> int:
        """The policy's ``watermark_for``, with its throttling frames made once."""
        return self._throttling.floor_frame_ts(top - self._policy.allowed_lag)

    def _lowest_top_lifting(self, last_wm: int) -> int:
        """The lowest top timestamp whose watermark is above ``last_wm``."""
        return self._throttling.higher_frame_ts(last_wm) + self._policy.allowed_lag

    def start(self) -> None:
        """The stream starts now: its idleness is measured from here."""
        self._last_item_at = self._clock()

    def idle_message(self) -> wm.Watermark | None:
        """``IDLE_MESSAGE`` when no item came for the policy's idle timeout (once), else None.

        Call :meth:`went_idle` once the message is emitted."""
        timeout = self._policy.idle_timeout_ms
        if self._idle or timeout <= 0 or self._clock() - self._last_item_at < timeout:
            return None
        return wm.IDLE_MESSAGE

    def went_idle(self) -> None:
        """The idle message was emitted: the next chunk starts with the last watermark again."""
        self._idle = True

    def saved_state(self) -> State:
        """What a snapshot saves (see the module doc)."""
        return (self.top_ts, self.last_wm)

    def restore(self, states: Iterable[State]) -> None:
        """Resume from the states of every processor that saved: the minimum of each."""
        saved = list(states)
        if saved:
            self.top_ts = _min_or_none(top for top, _ in saved)
            self.last_wm = _min_or_none(last for _, last in saved)


def offer_outputs(outbox: outbox_mod.Outbox, outputs: list[Any], watermarks: bool) -> list[Any]:
    """Offer ``outputs`` (items and watermarks, in order) to every ordinal; return what was not taken.

    ``watermarks`` says whether ``outputs`` may hold a watermark (if not: one batch offer).
    """
    if not watermarks:
        taken = outbox.offer_batch(outputs)
        return outputs[taken:] if taken < len(outputs) else []
    start = 0
    while start < len(outputs):
        first = outputs[start]
        if type(first) is wm.Watermark:
            if not outbox.offer(first):
                break
            start += 1
            continue
        end = _next_watermark(outputs, start + 1)
        taken = outbox.offer_batch(outputs[start:end])
        start += taken
        if start < end:
            break
    return outputs[start:] if start < len(outputs) else []


def _first_at_least(values: list[int], threshold: int, start: int) -> int | None:
    """The index of the first of ``values[start:]`` that is ``>= threshold``, or None; scanned in C."""
    at_least = map(operator.le, repeat(threshold), itertools.islice(values, start, None))
    return next(itertools.compress(itertools.count(start), at_least), None)


def map_data_runs(outputs: list[Any], step: Callable[[list[Any]], list[Any]]) -> list[Any]:
    """``outputs`` (items and watermarks, in order) with ``step`` applied to each run of items between
    watermarks; the watermarks stay where they were.

    >>> map_data_runs([1, 2, wm.Watermark(5), 3], lambda items: [i * 10 for i in items if i != 2])
    [10, Watermark(timestamp=5), 30]
    """
    mapped: list[Any] = []
    start = 0
    while start < len(outputs):
        first = outputs[start]
        if type(first) is wm.Watermark:
            mapped.append(first)
            start += 1
            continue
        end = _next_watermark(outputs, start + 1)
        mapped.extend(step(outputs[start:end]))
        start = end
    return mapped


def _next_watermark(outputs: list[Any], start: int) -> int:
    """The index of the first watermark in ``outputs[start:]``, or ``len(outputs)``; scanned in C."""
    is_watermark = map(operator.is_, map(type, itertools.islice(outputs, start, None)), repeat(wm.Watermark))
    return next(itertools.compress(itertools.count(start), is_watermark), len(outputs))


def _min_or_none(values: Iterable[int | None]) -> int | None:
    """The minimum, where None ("nothing seen yet") is below every number."""
    known: list[int] = []
    for value in values:
        if value is None:
            return None
        known.append(value)
    return min(known)
