"""Inbound streams and watermark coalescing: how a tasklet reads its inputs.

An :class:`InboundStream` is one input ordinal of one consumer: the queues
from every producer of that edge. ``drain_to`` takes batches round-robin from
those queues into the inbox, until the inbox holds a batch's worth, a queue
brings a watermark that advances the coalesced watermark (the data before it
must be processed first), or nothing is left.

A consumer's :class:`WatermarkCoalescer` keeps the latest watermark of every
input queue (all ordinals together, as in Jet). The coalesced watermark is
the minimum over queues that are neither done nor idle; when every live queue
is idle, it is :data:`~jetlet.core.watermark.IDLE_MESSAGE`. When the last
queue finishes, the highest watermark any queue brought is released (no
producer is left to send anything late), so the outcome does not depend on
the order in which producers finish. It only moves forward.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jetlet._execution import queues, snapshots
from jetlet._execution.sizing import rows_of
from jetlet.core import inbox as inbox_mod
from jetlet.core import watermark as wm

NO_WATERMARK = -(1 << 63)


class WatermarkCoalescer:
    """The coalesced watermark over a fixed set of input queues."""

    def __init__(self, queue_count: int) -> None:
        self._tops = [NO_WATERMARK] * queue_count
        self._idle = [False] * queue_count
        self._done = [False] * queue_count
        self.last_emitted = NO_WATERMARK
        self._idle_emitted = False

    @property
    def top_observed(self) -> int:
        """The highest watermark any input queue brought (Jet's ``topObservedWm``)."""
        return max(self._tops, default=NO_WATERMARK)

    def observe(self, queue_index: int, watermark: wm.Watermark) -> wm.Watermark | None:
        """Record a watermark from a queue; return the new coalesced one if it advanced."""
        if watermark.is_idle_message():
            self._idle[queue_index] = True
        else:
            self._idle[queue_index] = False
            if watermark.timestamp > self._tops[queue_index]:
                self._tops[queue_index] = watermark.timestamp
        return self._advance()

    def queue_done(self, queue_index: int) -> wm.Watermark | None:
        """A queue finished: it no longer holds the watermark back."""
        self._done[queue_index] = True
        return self._advance()

    def _advance(self) -> wm.Watermark | None:
        live = [i for i in range(len(self._tops)) if not self._done[i]]
        if not live:
            # Every producer is done, so nothing can come late any more: what any of them
            # promised holds. Without this, a watermark that was held back by a producer
            # which then finished without one would be lost, depending on arrival order.
            top = max(self._tops, default=NO_WATERMARK)
            if top > self.last_emitted:
                self.last_emitted = top
                return wm.Watermark(top)
            return None
        active = [self._tops[i] for i in live if not self._idle[i]]
        if not active:
            if self._idle_emitted:
                return None
            self._idle_emitted = True
            return wm.IDLE_MESSAGE
        low = min(active)
        if low > self.last_emitted:
            self.last_emitted = low
            self._idle_emitted = False
            return wm.Watermark(low)
        return None


class InboundStream:
    """One input ordinal of a consumer: the queues from all its producers."""

    def __init__(
        self,
        ordinal: int,
        priority: int,
        source_queues: Sequence[queues.SpscQueue],
        coalescer: WatermarkCoalescer,
        first_queue_index: int,
        aligner: snapshots.BarrierAligner | None = None,
    ) -> None:
        self.ordinal = ordinal
        self.priority = priority
        self.queues = list(source_queues)
        self.coalescer = coalescer
        self._aligner = aligner or snapshots.BarrierAligner(first_queue_index + len(self.queues), False)
        self._first = first_queue_index
        self._done = [False] * len(self.queues)
        self._remaining = len(self.queues)
        self._next = 0
        self.received_items = 0
        """Rows read from this input (Jet's ``receivedCount`` of the ordinal; a record batch counts its
        rows, see :mod:`~jetlet._execution.sizing`), counted per batch."""
        self.received_batches = 0
        """Batches read from this input (Jet's ``receivedBatches``)."""

    @property
    def is_done(self) -> bool:
        return self._remaining == 0

    def drain_to(self, inbox: inbox_mod.Inbox, limit: int) -> tuple[bool, wm.Watermark | None]:
        """Move batches into ``inbox``; return (anything read?, advanced watermark or None).

        ``limit`` counts items, record batches too: the rows an inbox can take are bounded by the
        queues' capacities in rows already, and one batch per processor call would cost the
        tasklet's per-call work per batch.

        Stops early when the coalesced watermark advances, so the data that
        preceded it can be processed before the watermark is, and when a
        snapshot barrier completes its alignment. A queue whose barrier came
        is not read while exactly-once alignment blocks it.
        """
        made_progress = False
        count = len(self.queues)
        if count == 0:
            return False, None
        idle_rounds = 0
        aligner = self._aligner
        while idle_rounds < count and len(inbox) < limit:
            index = self._next
            self._next = (index + 1) % count
            if self._done[index] or aligner.is_blocked(self._first + index):
                idle_rounds += 1
                continue
            element = self.queues[index].poll()
            if element is None:
                idle_rounds += 1
                continue
            made_progress = True
            idle_rounds = 0
            if type(element) is list:
                inbox.add_batch(element)
                self.received_items += rows_of(element)
                self.received_batches += 1
                continue
            advanced = self._on_control(index, element)
            if advanced is not None:
                return True, advanced
            if aligner.aligned:
                return True, None
        return made_progress, None

    def queued(self) -> tuple[int, int]:
        """(elements waiting in this input's queues, their capacity): Jet's ``queuesSize`` and
        ``queuesCapacity``, read from another thread (an approximate, never a torn, number)."""
        return sum(q.size() for q in self.queues), sum(q.capacity for q in self.queues)

    def _on_control(self, index: int, element: Any) -> wm.Watermark | None:
        if element is queues.DONE_ITEM:
            self._done[index] = True
            self._remaining -= 1
            self._aligner.queue_done(self._first + index)
            return self.coalescer.queue_done(self._first + index)
        if type(element) is wm.Watermark:
            return self.coalescer.observe(self._first + index, element)
        if type(element) is snapshots.SnapshotBarrier:
            self._aligner.arrived(self._first + index, element)
            return None
        raise TypeError(f"unexpected control item {element!r} on input {self.ordinal}")
