"""The tasklet that drives one processor (Jet's ``ProcessorTasklet``).

Each ``call()`` first delivers what the processor emitted: it hands every
outbox bucket to its edge's :class:`~jetlet._execution.outbound.OutboundCollector`
and flushes them into the consumers' queues. While anything is still pending
there (a consumer's queue is full) the processor is not called at all: that
is backpressure, and it bounds a tasklet's memory to one bucket per edge.

Then it makes one step of the processor's state machine::

    PROCESS_INPUT ──(every input done)──> COMPLETE ──(complete() is True)──>
    EMIT_DONE ──(output delivered)──> SEND_DONE ──(done markers delivered)──> END

In ``PROCESS_INPUT`` the order of work is: the items already in the inbox
(``process``); a coalesced watermark that advanced (``try_process_watermark``);
inputs that became exhausted (``complete_edge``); and only then new items,
read from the inputs of the highest priority (lowest number) that still has
open inputs; when nothing can be read, ``try_process()``. The inbox only ever
holds items of one ordinal.

Snapshot barriers will travel the queues as control items beside
watermarks; ``_on_control`` in :mod:`jetlet._execution.inbound` is where they
are recognised.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from jetlet._execution import inbound, outbound, queues
from jetlet._execution.progress import ProgressState, Tasklet
from jetlet.core import inbox as inbox_mod
from jetlet.core import outbox as outbox_mod
from jetlet.core import processor as proc
from jetlet.core import watermark as wm

INBOX_LIMIT = 1024
"""Stop reading into the inbox once it holds this many items."""

_NO_PROGRESS = ProgressState.NO_PROGRESS
_MADE_PROGRESS = ProgressState.MADE_PROGRESS


class _State(enum.Enum):
    PROCESS_INPUT = "PROCESS_INPUT"
    COMPLETE = "COMPLETE"
    EMIT_DONE = "EMIT_DONE"
    SEND_DONE = "SEND_DONE"
    END = "END"


class ProcessorTasklet(Tasklet):
    """Runs one processor: moves items between its queues, inbox and outbox."""

    def __init__(
        self,
        name: str,
        processor: proc.Processor,
        context: proc.ProcessorContext,
        outbox: outbox_mod.Outbox,
        inbound_streams: Sequence[inbound.InboundStream],
        collectors: Sequence[outbound.OutboundCollector],
    ) -> None:
        if outbox.bucket_count() != len(collectors):
            raise ValueError(f"{name}: {outbox.bucket_count()} outbox buckets for {len(collectors)} edges")
        self.name = name
        self.processor = processor
        self.context = context
        self.outbox = outbox
        self.inbox = inbox_mod.Inbox()
        self._collectors = list(collectors)
        priorities = sorted({s.priority for s in inbound_streams})
        self._groups = [[s for s in inbound_streams if s.priority == p] for p in priorities]
        self._group_index = 0
        self._group_next = 0
        self._inbox_ordinal = 0
        self._pending_watermark: wm.Watermark | None = None
        self._edges_to_complete: list[int] = []
        self._completed_ordinals: set[int] = set()
        self._state = _State.PROCESS_INPUT if self._groups else _State.COMPLETE
        self._closed = False
        self.received_count = 0
        self.emitted_count = 0
        self.top_observed_watermark = inbound.NO_WATERMARK
        self._cooperative = processor.is_cooperative()
        for stream in inbound_streams:
            if stream.is_done:  # a consumer that its edge's routing never feeds
                self._mark_edge_done(stream.ordinal)

    def is_cooperative(self) -> bool:
        return self._cooperative

    def init(self) -> None:
        self.processor.init(self.outbox, self.context)

    @property
    def is_done(self) -> bool:
        return self._state is _State.END

    def call(self) -> ProgressState:
        state = self._state
        if state is _State.END:
            return ProgressState.WAS_ALREADY_DONE
        moved, clear = self._deliver()
        if not clear:
            return _MADE_PROGRESS if moved else _NO_PROGRESS
        if state is _State.PROCESS_INPUT:
            progressed = self._process_input()
        elif state is _State.COMPLETE:
            progressed = self._complete()
        elif state is _State.EMIT_DONE:  # what complete() emitted is delivered: now the markers
            for collector in self._collectors:
                collector.push_control(queues.DONE_ITEM)
            self._state = _State.SEND_DONE
            self._deliver()
            return _MADE_PROGRESS
        else:  # SEND_DONE: the done markers are delivered
            self.close()
            self._state = _State.END
            return ProgressState.DONE
        if not self.outbox.is_empty():
            progressed = True
            self._deliver()
        return _MADE_PROGRESS if (moved or progressed) else _NO_PROGRESS

    # -- delivering output -------------------------------------------------
    def _deliver(self) -> tuple[bool, bool]:
        """Push buckets into collectors and flush; return (moved anything?, all delivered?)."""
        outbox = self.outbox
        moved = False
        clear = True
        for ordinal, collector in enumerate(self._collectors):
            before = collector.delivered
            if collector.flush():
                bucket = outbox.buckets[ordinal]
                if bucket:
                    outbox.buckets[ordinal] = []
                    self.emitted_count += len(bucket)
                    collector.push(bucket)
                    moved = True
                    if collector.flush():
                        control = outbox.take_control(ordinal)
                        if control is not None:
                            collector.push_control(control)
                            collector.flush()
                else:
                    control = outbox.take_control(ordinal)
                    if control is not None:
                        collector.push_control(control)
                        collector.flush()
                        moved = True
            if collector.delivered != before:
                moved = True
            if not collector.is_flushed() or outbox.buckets[ordinal] or outbox.controls[ordinal] is not None:
                clear = False
        return moved, clear

    # -- PROCESS_INPUT -----------------------------------------------------
    def _process_input(self) -> bool:
        inbox = self.inbox
        processor = self.processor
        if inbox:
            before = len(inbox)
            processor.process(self._inbox_ordinal, inbox)
            return len(inbox) != before
        if self._pending_watermark is not None:
            return self._process_watermark(self._pending_watermark)
        if self._edges_to_complete:
            ordinal = self._edges_to_complete[0]
            if processor.complete_edge(ordinal):
                self._edges_to_complete.pop(0)
                return True
            return False
        read = self._read_inputs()
        if inbox:
            self.received_count += len(inbox)
            processor.process(self._inbox_ordinal, inbox)
            return True
        if read:
            return True
        if self._group_index >= len(self._groups):
            self._state = _State.COMPLETE
            return True
        processor.try_process()
        return False

    def _process_watermark(self, watermark: wm.Watermark) -> bool:
        if watermark.is_idle_message():
            accepted = self.outbox.offer(watermark)
        else:
            accepted = self.processor.try_process_watermark(watermark)
        if accepted:
            self._pending_watermark = None
            if not watermark.is_idle_message():
                self.top_observed_watermark = watermark.timestamp
        return accepted

    def _read_inputs(self) -> bool:
        """Read from the current priority group; advance groups as they finish."""
        while self._group_index < len(self._groups):
            group = self._groups[self._group_index]
            read_any = False
            for step in range(len(group)):
                stream = group[(self._group_next + step) % len(group)]
                if stream.is_done:
                    continue
                read, advanced = stream.drain_to(self.inbox, INBOX_LIMIT)
                if stream.is_done:
                    self._mark_edge_done(stream.ordinal)
                if read:
                    read_any = True
                if self.inbox:
                    self._inbox_ordinal = stream.ordinal
                if advanced is not None:
                    self._pending_watermark = advanced
                if self.inbox or advanced is not None:
                    self._group_next = (self._group_next + step + 1) % len(group)
                    return True
            if all(s.is_done for s in group):
                self._group_index += 1
                self._group_next = 0
                if read_any:
                    return True
                continue
            return read_any
        return False

    def _mark_edge_done(self, ordinal: int) -> None:
        if ordinal not in self._completed_ordinals:
            self._completed_ordinals.add(ordinal)
            self._edges_to_complete.append(ordinal)

    # -- COMPLETE and END --------------------------------------------------
    def _complete(self) -> bool:
        if self.processor.complete():
            self._state = _State.EMIT_DONE
            return True
        return False

    def close(self) -> None:
        """Close the processor once (also after failure or cancellation)."""
        if not self._closed:
            self._closed = True
            self.processor.close()

    def __repr__(self) -> str:
        return f"ProcessorTasklet({self.name!r}, {self._state.value})"
