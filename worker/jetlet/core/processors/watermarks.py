"""``insert_watermarks_p``: timestamps items and inserts watermarks (Jet's ``InsertWatermarksP``).

For each item the processor reads its event time with the policy's
``timestamp_fn``. An item older than the last watermark it emitted is *late*:
it is dropped and counted (``metrics()["lateEventsDropped"]``). Any other
item is emitted, wrapped by the policy's ``wrap_fn`` (by default the
``(timestamp, item)`` event), and then, if the highest timestamp seen so far
moved the throttled limiting-lag watermark (see
:class:`~jetlet.core.event_time.EventTimePolicy`) above the last one emitted,
the new watermark follows it.

Watermarks arriving from upstream are swallowed: this processor is where
watermarks are made. When no item arrives for ``idle_timeout_ms`` (measured
by ``try_process()`` with a monotonic millisecond clock, injectable for
tests), it emits ``IDLE_MESSAGE`` once, so that downstream coalescing ignores
this stream; the first item after that is preceded by the last watermark
again, to mark the stream active.

Items are taken in chunks of the outbox's room, and a chunk's items stay in
the inbox until all its outputs are emitted, so an empty inbox means nothing
is held back (the harness and the engine take snapshots only then). A chunk
in which no item can be late (none is below the watermark its highest
timestamp gives) takes a fast path with no Python bytecode per item: items are
wrapped by C iterators, and the few items that lift the watermark are found by
a C scan for the first timestamp reaching the next throttled step. Other
chunks are walked item by item.

The snapshot holds, per processor, the highest timestamp seen and the last
emitted watermark under a :class:`~jetlet.core.snapshot_keys.ProcessorKey`, a
broadcast key: every restored processor receives the entries of every
processor that saved, whatever the new parallelism, and takes the minimum of
each (as Jet does), so a restored processor never emits a watermark below one
it emitted before, and never accepts an item it had declared late when one
processor's state is restored into one processor.
"""

from __future__ import annotations

import itertools
import operator
import time
from collections.abc import Callable, Iterable
from itertools import repeat
from typing import Any

from jetlet.core import event_time, processor, snapshot_keys
from jetlet.core import inbox as inbox_mod
from jetlet.core import outbox as outbox_mod
from jetlet.core import watermark as wm

Clock = Callable[[], int]
"""A monotonic clock in milliseconds."""

_SNAPSHOT_TAG = "__jetlet_insert_watermarks__"


def monotonic_ms() -> int:
    """The default clock: ``time.monotonic_ns()`` in milliseconds."""
    return time.monotonic_ns() // 1_000_000


class InsertWatermarksP(processor.Processor):
    """See the module doc."""

    def __init__(self, policy: event_time.EventTimePolicy, clock: Clock) -> None:
        if policy.timestamp_fn is None:
            raise ValueError("insert_watermarks_p needs an EventTimePolicy with a timestamp_fn")
        self._timestamp_fn: Callable[[Any], int] = policy.timestamp_fn
        self._policy = policy
        self._clock = clock
        self._top_ts: int | None = None
        self._last_wm: int | None = None
        self._late = 0
        self._idle = False
        self._last_item_at = 0
        self._throttling = policy.throttling
        self._pending: list[Any] = []
        self._pending_watermarks = False
        """Whether ``_pending`` holds a watermark (most chunks hold none: one batch offer then)."""
        self._chunk_size = 0
        self._restored: list[tuple[int | None, int | None]] = []

    def init(self, outbox: outbox_mod.Outbox, context: processor.ProcessorContext) -> None:
        super().init(outbox, context)
        self._last_item_at = self._clock()

    def process(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        # A chunk of items is turned into outputs at once (one clock read per
        # chunk); the chunk stays in the inbox until its outputs are all
        # emitted, so an empty inbox always means nothing is held here.
        if self._pending:
            if not self._flush():
                return
            _remove(inbox, self._chunk_size)
        while inbox:
            count = min(len(inbox), max(1, self.outbox.room()))
            chunk = list(inbox) if count == len(inbox) else list(itertools.islice(inbox, count))
            self._last_item_at = self._clock()
            self._pending, self._chunk_size = self._outputs_of(chunk), count
            if not self._flush():
                return
            _remove(inbox, count)

    def _outputs_of(self, chunk: list[Any]) -> list[Any]:
        """The chunk's on-time items (wrapped) with a watermark after each item that advanced it."""
        outputs: list[Any] = []
        self._pending_watermarks = False
        if self._idle:
            self._idle = False
            if self._last_wm is not None:
                outputs.append(wm.Watermark(self._last_wm))
                self._pending_watermarks = True
        stamps = list(map(self._timestamp_fn, chunk))
        last_wm, top = self._last_wm, self._top_ts
        if last_wm is None or top is None:
            self._insert_one_by_one(chunk, stamps, outputs)
            return outputs
        # The watermark only rises, so none emitted for this chunk is above the one its highest
        # timestamp gives: if no item is below that one, no item is late (min and max run in C).
        chunk_top = max(stamps)
        chunk_wm = max(last_wm, self._watermark_for(max(top, chunk_top)))
        if min(stamps) >= chunk_wm:
            self._insert_on_time(chunk, stamps, chunk_top, outputs)
        else:
            self._insert_one_by_one(chunk, stamps, outputs)
        return outputs

    def _insert_on_time(
        self, chunk: list[Any], stamps: list[int], chunk_top: int, outputs: list[Any]
    ) -> None:
        """The fast path for a chunk without late items: no Python bytecode per item.

        Items are wrapped by C iterators. The watermark rises at the first
        item whose timestamp reaches the lowest top that lifts it (that item is
        the new top), found by a C scan; there are few such items per chunk.
        """
        wrap = self._policy.wrap_fn
        if wrap is None:
            events: list[Any] = chunk
        elif wrap is event_time.wrap_as_event:
            events = list(zip(stamps, chunk, strict=True))
        else:
            events = list(map(wrap, chunk, stamps))
        last_wm, start = self._last_wm, 0
        assert last_wm is not None and self._top_ts is not None
        if chunk_top < self._lowest_top_lifting(last_wm):  # most chunks: no watermark rises, no scan
            outputs.extend(events)
            self._top_ts = max(self._top_ts, chunk_top)
            return
        while (at := _first_at_least(stamps, self._lowest_top_lifting(last_wm), start)) is not None:
            last_wm = self._watermark_for(stamps[at])
            outputs.extend(events[start : at + 1])
            outputs.append(wm.Watermark(last_wm))
            self._pending_watermarks = True
            start = at + 1
        outputs.extend(events[start:])
        self._last_wm, self._top_ts = last_wm, max(self._top_ts, chunk_top)

    def _insert_one_by_one(self, chunk: list[Any], stamps: list[int], outputs: list[Any]) -> None:
        """The general path: late items are dropped as the watermark advances within the chunk."""
        last_wm, top = self._last_wm, self._top_ts
        wrap, watermark_for = self._policy.wrap_fn, self._watermark_for
        late = 0
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
                    self._pending_watermarks = True
        self._last_wm, self._top_ts = last_wm, top
        self._late += late

    def _watermark_for(self, top: int) -> int:
        """The policy's ``watermark_for``, with its throttling frames made once."""
        return self._throttling.floor_frame_ts(top - self._policy.allowed_lag)

    def _lowest_top_lifting(self, last_wm: int) -> int:
        """The lowest top timestamp whose watermark is above ``last_wm``."""
        return self._throttling.higher_frame_ts(last_wm) + self._policy.allowed_lag

    def _flush(self) -> bool:
        """Offer the pending outputs: runs of items in batches, each watermark on its own."""
        pending = self._pending
        outbox = self.outbox
        if not self._pending_watermarks:
            taken = outbox.offer_batch(pending)
            self._pending = pending[taken:] if taken < len(pending) else []
            return not self._pending
        start = 0
        while start < len(pending):
            first = pending[start]
            if type(first) is wm.Watermark:
                if not outbox.offer(first):
                    break
                start += 1
                continue
            end = _next_watermark(pending, start + 1)
            taken = outbox.offer_batch(pending[start:end])
            start += taken
            if start < end:
                break
        self._pending = pending[start:] if start < len(pending) else []
        return not self._pending

    def try_process_watermark(self, watermark: wm.Watermark) -> bool:
        return True

    def try_process(self) -> bool:
        timeout = self._policy.idle_timeout_ms
        if self._idle or timeout <= 0 or self._clock() - self._last_item_at < timeout:
            return True
        if not self.outbox.offer(wm.IDLE_MESSAGE):
            return False
        self._idle = True
        return True

    def save_to_snapshot(self) -> bool:
        key = snapshot_keys.ProcessorKey(_SNAPSHOT_TAG, self.context.global_processor_index)
        return self.outbox.offer_to_snapshot(key, (self._top_ts, self._last_wm))

    def restore_from_snapshot(self, inbox: inbox_mod.Inbox) -> None:
        for key, value in inbox.take_all():
            if not (isinstance(key, snapshot_keys.ProcessorKey) and key.tag == _SNAPSHOT_TAG):
                raise ValueError(f"insert_watermarks_p cannot restore the snapshot entry {key!r}")
            self._restored.append(value)

    def finish_snapshot_restore(self) -> bool:
        if self._restored:
            self._top_ts = _min_or_none(top for top, _ in self._restored)
            self._last_wm = _min_or_none(last for _, last in self._restored)
            self._restored = []
        return True

    def metrics(self) -> dict[str, int]:
        return {"lateEventsDropped": self._late}


def _first_at_least(values: list[int], threshold: int, start: int) -> int | None:
    """The index of the first of ``values[start:]`` that is ``>= threshold``, or None; scanned in C."""
    at_least = map(operator.le, repeat(threshold), itertools.islice(values, start, None))
    return next(itertools.compress(itertools.count(start), at_least), None)


def _next_watermark(outputs: list[Any], start: int) -> int:
    """The index of the first watermark in ``outputs[start:]``, or ``len(outputs)``; scanned in C."""
    is_watermark = map(operator.is_, map(type, itertools.islice(outputs, start, None)), repeat(wm.Watermark))
    return next(itertools.compress(itertools.count(start), is_watermark), len(outputs))


def _remove(inbox: inbox_mod.Inbox, count: int) -> None:
    """Remove the first ``count`` items (a chunk whose outputs were all emitted)."""
    if count == len(inbox):
        inbox.clear()
    else:
        for _ in range(count):
            inbox.remove()


def _min_or_none(values: Iterable[int | None]) -> int | None:
    """The minimum, where None ("nothing seen yet") is below every number."""
    known: list[int] = []
    for value in values:
        if value is None:
            return None
        known.append(value)
    return min(known)


def insert_watermarks_p(
    policy: event_time.EventTimePolicy, clock: Clock = monotonic_ms
) -> processor.ProcessorFactory:
    """A factory of processors that timestamp items and insert watermarks (see the module doc).

    >>> from jetlet.testing import verify_processor
    >>> policy = event_time.EventTimePolicy(timestamp_fn=lambda x: x, allowed_lag=1)
    >>> _ = verify_processor(insert_watermarks_p(policy)).input([5, 3, 7]).expect_output(
    ...     [(5, 5), wm.Watermark(4), (7, 7), wm.Watermark(6)]
    ... )
    """
    if not isinstance(policy, event_time.EventTimePolicy):
        raise TypeError(f"insert_watermarks_p needs an EventTimePolicy, got {type(policy).__qualname__}")
    if policy.timestamp_fn is None:
        raise ValueError("insert_watermarks_p needs an EventTimePolicy with a timestamp_fn")
    return lambda: InsertWatermarksP(policy, clock)
