"""``insert_watermarks_p``: timestamps items and inserts watermarks (Jet's ``InsertWatermarksP``).

The processor runs an :class:`~jetlet.core.event_time_mapper.EventTimeMapper` over its inbox: each
on-time item is emitted wrapped by the policy's ``wrap_fn`` (by default the ``(timestamp, item)``
event), followed by a watermark whenever the highest timestamp moved the throttled limiting-lag
watermark; late items are dropped and counted (``metrics()["lateEventsDropped"]``); after
``idle_timeout_ms`` without items (measured by ``try_process()``) it emits ``IDLE_MESSAGE`` once.

Watermarks arriving from upstream are swallowed: this processor is where
watermarks are made.

Items are taken in chunks of the outbox's room, and a chunk's items stay in
the inbox until all its outputs are emitted, so an empty inbox means nothing
is held back (the harness and the engine take snapshots only then).

The snapshot holds, per processor, the mapper's state (the highest timestamp seen and the last
emitted watermark) under a :class:`~jetlet.core.snapshot_keys.ProcessorKey`, a broadcast key:
every restored processor receives the entries of every processor that saved, whatever the new
parallelism, and takes the minimum of each (as Jet does).
"""

from __future__ import annotations

import itertools
from typing import Any

from jetlet.core import event_time, processor, snapshot_keys
from jetlet.core import event_time_mapper as mapper_mod
from jetlet.core import inbox as inbox_mod
from jetlet.core import outbox as outbox_mod
from jetlet.core import watermark as wm
from jetlet.core.event_time_mapper import SNAPSHOT_TAG, Clock, monotonic_ms


class InsertWatermarksP(processor.Processor):
    """See the module doc."""

    def __init__(self, policy: event_time.EventTimePolicy, clock: Clock) -> None:
        self._mapper = mapper_mod.EventTimeMapper(policy, clock)
        self._pending: list[Any] = []
        self._pending_watermarks = False
        """Whether ``_pending`` holds a watermark (most chunks hold none: one batch offer then)."""
        self._chunk_size = 0
        self._restored: list[mapper_mod.State] = []

    def init(self, outbox: outbox_mod.Outbox, context: processor.ProcessorContext) -> None:
        super().init(outbox, context)
        self._mapper.start()

    def process(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        # A chunk of items is turned into outputs at once (one clock read per
        # chunk); the chunk stays in the inbox until its outputs are all
        # emitted, so an empty inbox always means nothing is held here.
        if self._pending:
            if not self._flush():
                return
            inbox.discard(self._chunk_size)
        while inbox:
            count = min(len(inbox), max(1, self.outbox.room()))
            chunk = list(inbox) if count == len(inbox) else list(itertools.islice(inbox, count))
            self._pending, self._pending_watermarks = self._mapper.outputs_of(chunk)
            self._chunk_size = count
            if not self._flush():
                return
            inbox.discard(count)

    def _flush(self) -> bool:
        """Offer the pending outputs; True once all are out."""
        self._pending = mapper_mod.offer_outputs(self.outbox, self._pending, self._pending_watermarks)
        return not self._pending

    def try_process_watermark(self, watermark: wm.Watermark) -> bool:
        return True

    def try_process(self) -> bool:
        message = self._mapper.idle_message()
        if message is None:
            return True
        if not self.outbox.offer(message):
            return False
        self._mapper.went_idle()
        return True

    def save_to_snapshot(self) -> bool:
        key = snapshot_keys.ProcessorKey(SNAPSHOT_TAG, self.context.global_processor_index)
        return self.outbox.offer_to_snapshot(key, self._mapper.saved_state())

    def restore_from_snapshot(self, inbox: inbox_mod.Inbox) -> None:
        for key, value in inbox.take_all():
            if not (isinstance(key, snapshot_keys.ProcessorKey) and key.tag == SNAPSHOT_TAG):
                raise ValueError(f"insert_watermarks_p cannot restore the snapshot entry {key!r}")
            self._restored.append(value)

    def finish_snapshot_restore(self) -> bool:
        self._mapper.restore(self._restored)
        self._restored = []
        return True

    def metrics(self) -> dict[str, int]:
        return {"lateEventsDropped": self._mapper.late}


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
