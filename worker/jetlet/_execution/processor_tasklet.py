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

Snapshots (:mod:`jetlet._execution.snapshots`) add two detours. A job
that starts from a snapshot first gives the processor its share of the
saved state (``restore_from_snapshot`` in inbox-sized batches, then
``finish_snapshot_restore`` until True). And a snapshot is taken when the
barrier is aligned on every input (in ``PROCESS_INPUT``, once the inbox and
any pending watermark are handled) or, for a tasklet without open inputs,
when the coordinator has requested one newer than its last (in
``COMPLETE``, before ``complete()`` is called again)::

    SAVE (save_to_snapshot until True; its entries are collected) ──>
    PREPARE (snapshot_commit_prepare until True) ──> the barrier goes out

after which the tasklet returns to the state it left. Before any other
work, a tasklet runs the second phase (``snapshot_commit_finish``) of a
snapshot the coordinator has declared complete or failed. After a terminal
snapshot's barrier a tasklet without inputs emits nothing more.

With exactly-once, two gates of :mod:`jetlet._execution.snapshots` (*Ending*)
keep a restart from a snapshot exact: a tasklet without inputs whose
``complete()`` returned True waits in ``AWAIT_END`` (still taking snapshots)
until the execution is granted its ``end``, and only then sends its done
markers; a sink (inputs, no outputs) that received items calls
``complete()``, where it commits its last transactions, only once the
``final_commit`` is granted.
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Sequence
from typing import Any

from jetlet._execution import inbound, outbound, queues, snapshots
from jetlet._execution.progress import ProgressState, Tasklet, call_times
from jetlet._execution.sizing import item_bytes, rows_of
from jetlet.core import inbox as inbox_mod
from jetlet.core import outbox as outbox_mod
from jetlet.core import processor as proc
from jetlet.core import snapshot_writer
from jetlet.core import watermark as wm
from jetlet.metrics import user_metrics

INBOX_LIMIT = 1024
"""Stop reading into the inbox once it holds this many items."""
FINAL_STATE_CALLS = 1000
"""Calls of ``save_to_snapshot()`` a source that ended gets to save its final state in."""
SINK_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
"""Upper bounds, in seconds, of a sink's ``sinkLatency`` histogram."""

_BOUND = user_metrics.BOUND
_NO_PROGRESS = ProgressState.NO_PROGRESS
_MADE_PROGRESS = ProgressState.MADE_PROGRESS


class _State(enum.Enum):
    RESTORE = "RESTORE"
    PROCESS_INPUT = "PROCESS_INPUT"
    SNAPSHOT = "SNAPSHOT"
    HALTED = "HALTED"
    COMPLETE = "COMPLETE"
    AWAIT_END = "AWAIT_END"
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
        vertex_name: str = "",
        member_snapshots: snapshots.MemberSnapshots | None = None,
        index: int = 0,
        aligner: snapshots.BarrierAligner | None = None,
        restored: Sequence[tuple[Any, Any]] | None = None,
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
        self.vertex_name = vertex_name or name
        self._snapshots = member_snapshots
        self._index = index
        self._aligner = aligner
        self._snapshot_id = member_snapshots.requested.snapshot_id if member_snapshots is not None else 0
        self._commit_id = self._snapshot_id
        self._saving: snapshots.SnapshotBarrier | None = None
        self._saved: list[tuple[Any, Any]] = []
        self._saving_phase = 0
        self._resume_state = self._state
        self._restored = list(restored) if restored is not None else None
        if self._restored is not None:
            self._state = _State.RESTORE
        self._closed = False
        self.streams = list(inbound_streams)
        self.emitted = [0] * len(collectors)
        """Rows delivered to each output ordinal (Jet's ``emittedCount``; a record batch counts its
        rows), counted per batch."""
        self.bucket_bytes = 0
        """Bytes (estimated) an outbox bucket may hold: its queues' share of ``max_queued_bytes`` (0: no
        bound). Each bucket starts at one item and is fitted to its items' weight whenever it is
        delivered full (a bucket delivered before it filled up was not held back by its size)."""
        self.top_observed_watermark = inbound.NO_WATERMARK
        self.last_forwarded_watermark = inbound.NO_WATERMARK
        """The last watermark this processor emitted (Jet's ``lastForwardedWm``)."""
        self.last_forwarded_latency_ms = 0
        """Wall-clock time minus that watermark when it was emitted (``lastForwardedWmLatency``)."""
        self.user_metrics = user_metrics.ProcessorMetrics()
        """The metrics that pipeline functions and the processor register (``jetlet.metrics``)."""
        self._coalescer = inbound_streams[0].coalescer if inbound_streams else None
        self.sink_latency = (
            user_metrics.Histogram("sinkLatency", SINK_LATENCY_BUCKETS)
            if inbound_streams and not collectors
            else None
        )
        """For a sink (inputs, no outputs): wall-clock time minus each watermark it receives, in
        seconds. Every result that depends on an event at or before the watermark has reached the sink
        by then, so this is the end-to-end latency of the events at the watermark (of a window's
        result, counted from the window's end); one observation per watermark, not per item."""
        self._cooperative = processor.is_cooperative()
        for stream in inbound_streams:
            if stream.is_done:  # a consumer that its edge's routing never feeds
                self._mark_edge_done(stream.ordinal)

    def is_cooperative(self) -> bool:
        return self._cooperative

    @property
    def received_count(self) -> int:
        return sum(s.received_items for s in self.streams)

    @property
    def emitted_count(self) -> int:
        return sum(self.emitted)

    @property
    def top_observed(self) -> int:
        """The highest watermark any input queue brought (Jet's ``topObservedWm``)."""
        return self._coalescer.top_observed if self._coalescer is not None else inbound.NO_WATERMARK

    @property
    def coalesced_watermark(self) -> int:
        """The coalesced watermark of the inputs (Jet's ``coalescedWm``)."""
        return self._coalescer.last_emitted if self._coalescer is not None else inbound.NO_WATERMARK

    def init(self) -> None:
        user_metrics.bind(self.user_metrics)
        self.processor.init(self.outbox, self.context)

    @property
    def is_done(self) -> bool:
        return self._state is _State.END

    def call(self) -> ProgressState:
        state = self._state
        if state is _State.END:
            return ProgressState.WAS_ALREADY_DONE
        _BOUND.registry = self.user_metrics  # jetlet.metrics calls in the processor's code find it
        moved, clear = self._deliver()
        if not clear:
            return _MADE_PROGRESS if moved else _NO_PROGRESS
        member_snapshots = self._snapshots
        if member_snapshots is not None and member_snapshots.commit_id > self._commit_id:
            if not self.processor.snapshot_commit_finish(member_snapshots.commit_success):
                return _MADE_PROGRESS if moved else _NO_PROGRESS
            self._commit_id = member_snapshots.commit_id
            member_snapshots.committed(self._commit_id, self._index)
            moved = True
        if state is _State.PROCESS_INPUT:
            progressed = self._process_input()
        elif state is _State.COMPLETE:
            progressed = self._complete()
        elif state is _State.SNAPSHOT:
            progressed = self._take_snapshot()
        elif state is _State.RESTORE:
            progressed = self._restore()
        elif state is _State.AWAIT_END:
            progressed = self._await_end()
        elif state is _State.HALTED:
            return _MADE_PROGRESS if moved else _NO_PROGRESS
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

    def wake_on_input(self, wake: threading.Event) -> bool:
        if self._collectors or not self._groups:
            return False  # output to push on, or a source: it polls
        for group in self._groups:
            for stream in group:
                for queue in stream.queues:
                    queue.consumer_wake = wake
        return True

    def waits_for_input_alone(self) -> bool:
        # Taking input, with none held and none done: not a snapshot (the coordinator's phase-two
        # commit comes from outside the queues, so a job with snapshots never parks long), not the
        # end (complete, the final commit), not a watermark or an edge still to finish.
        return (
            self._state is _State.PROCESS_INPUT
            and self._snapshots is None
            and not self.inbox
            and self._pending_watermark is None
            and not self._edges_to_complete
            and self._group_index < len(self._groups)
        )

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
                    self.emitted[ordinal] += rows_of(bucket)
                    if self.bucket_bytes and len(bucket) >= outbox.bucket_capacity(ordinal):  # a full one
                        outbox.fit_bucket(ordinal, self.bucket_bytes // (item_bytes(bucket[0]) or 1))
                    collector.push(bucket)
                    moved = True
                    if collector.flush():
                        control = outbox.take_control(ordinal)
                        if control is not None:
                            self._forwarded(control)
                            collector.push_control(control)
                            collector.flush()
                else:
                    control = outbox.take_control(ordinal)
                    if control is not None:
                        self._forwarded(control)
                        collector.push_control(control)
                        collector.flush()
                        moved = True
            if collector.delivered != before:
                moved = True
            if not collector.is_flushed() or outbox.buckets[ordinal] or outbox.controls[ordinal] is not None:
                clear = False
        return moved, clear

    def _forwarded(self, control: object) -> None:
        if type(control) is wm.Watermark and control.timestamp != self.last_forwarded_watermark:
            self.last_forwarded_watermark = control.timestamp
            self.last_forwarded_latency_ms = int(time.time() * 1000) - control.timestamp

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
        aligner = self._aligner
        if aligner is not None and aligner.aligned:
            assert aligner.barrier is not None
            self._begin_snapshot(aligner.barrier)
            return True
        if self._edges_to_complete:
            ordinal = self._edges_to_complete[0]
            if processor.complete_edge(ordinal):
                self._edges_to_complete.pop(0)
                return True
            return False
        read = self._read_inputs()
        if inbox:
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
            accepted = self.processor.try_process_idle()
        else:
            accepted = self.processor.try_process_watermark(watermark)
        if accepted:
            self._pending_watermark = None
            if not watermark.is_idle_message():
                self.top_observed_watermark = watermark.timestamp
                if self.sink_latency is not None:
                    self.sink_latency.observe(time.time() - watermark.timestamp / 1000)
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
        member_snapshots = self._snapshots
        if member_snapshots is not None:
            requested = member_snapshots.requested
            if requested.snapshot_id > self._snapshot_id:
                self._begin_snapshot(requested)
                return True
        exactly_once = member_snapshots is not None and member_snapshots.exactly_once
        if exactly_once and self._final_commit_gated():
            assert member_snapshots is not None
            if not member_snapshots.final_commit.allows():
                return False
        if self.processor.complete():
            self._state = _State.AWAIT_END if exactly_once and not self._groups else _State.EMIT_DONE
            return True
        return False

    def _final_commit_gated(self) -> bool:
        """A sink that received items: its ``complete()`` commits output beyond every snapshot."""
        return bool(self._groups) and not self._collectors and self.received_count > 0

    def _await_end(self) -> bool:
        """A source that completed: snapshots as before, and it ends once the end is granted."""
        member_snapshots = self._snapshots
        assert member_snapshots is not None
        requested = member_snapshots.requested
        if requested.snapshot_id > self._snapshot_id:
            self._begin_snapshot(requested)
            return True
        if member_snapshots.end.allows():
            self._state = _State.EMIT_DONE
            return True
        return False

    def metrics(self) -> dict[str, int]:
        """The processor's counters with Jet's names, its call times, then the processor's own metrics.

        ``busyTimeMicros`` adds up the calls that moved something; ``longestCallMicros`` is the
        longest call so far: a cooperative processor should keep it near a millisecond, since its
        thread runs nothing else meanwhile.
        """
        return {
            "receivedCount": self.received_count,
            "emittedCount": self.emitted_count,
            "topObservedWm": self.top_observed_watermark,
            **call_times(self),
            **self.processor.metrics(),
        }

    def close(self) -> None:
        """Close the processor once (also after failure or cancellation)."""
        if not self._closed:
            self._closed = True
            user_metrics.bind(self.user_metrics)
            if self._snapshots is not None:
                final = self._final_state() if self._state is _State.SEND_DONE and not self._groups else None
                self._snapshots.tasklet_ended(self._index, self._snapshot_id, self.vertex_name, final)
            self.processor.close()

    def _final_state(self) -> list[tuple[Any, Any]] | None:
        """A source that completed: the state it ends with, which every later snapshot holds for it
        (a restore from one then knows it ended, instead of replaying it); None if it will not say."""
        assert self._snapshots is not None
        if not self._snapshots.exactly_once:
            return None
        saved: list[tuple[Any, Any]] = []
        for _ in range(FINAL_STATE_CALLS):
            done = self.processor.save_to_snapshot()
            self._drain_snapshot_bucket(saved)
            if done:
                return saved
        return None

    def _drain_snapshot_bucket(self, saved: list[tuple[Any, Any]]) -> None:
        bucket = self.outbox.snapshot_bucket
        if bucket:  # lent and copied values are frozen later, by the member storing the snapshot
            freeze, lent, copied = snapshot_writer.freeze, snapshot_writer.Lent, snapshot_writer.Copied
            saved.extend([(k, v if type(v) is lent or type(v) is copied else freeze(v)) for k, v in bucket])
            bucket.clear()

    # -- RESTORE and SNAPSHOT ------------------------------------------------
    def _restore(self) -> bool:
        restored = self._restored
        if restored:
            inbox = self.inbox
            inbox.add_batch(restored[:INBOX_LIMIT])
            del restored[:INBOX_LIMIT]
            self.processor.restore_from_snapshot(inbox)
            if inbox:
                raise RuntimeError(f"{self.name}: restore_from_snapshot() left {len(inbox)} entries unread")
            return True
        if not self.processor.finish_snapshot_restore():
            return False
        self._restored = None
        self._state = _State.PROCESS_INPUT if self._groups else _State.COMPLETE
        return True

    def _begin_snapshot(self, barrier: snapshots.SnapshotBarrier) -> None:
        self._saving = barrier
        self._saving_phase = 0
        self._saved = []
        self._resume_state = self._state
        self._state = _State.SNAPSHOT

    def _take_snapshot(self) -> bool:
        barrier = self._saving
        assert barrier is not None
        processor = self.processor
        if self._saving_phase == 0:
            done = processor.save_to_snapshot()
            self._drain_snapshot_bucket(self._saved)
            if done:  # what it emitted goes out before the barrier: the next call delivers it first
                self._saving_phase = 1
            return True
        if not processor.snapshot_commit_prepare():
            return False
        for collector in self._collectors:
            collector.push_control(barrier)
        self._snapshot_id = barrier.snapshot_id
        self._saving = None
        if self._aligner is not None:
            self._aligner.reset()
        self._state = self._resume_state
        if barrier.terminal and not self._groups:
            self._state = _State.HALTED
        if self._snapshots is not None:
            self._snapshots.saved(barrier.snapshot_id, self._index, self.vertex_name, self._saved)
        self._saved = []
        return True

    def __repr__(self) -> str:
        return f"ProcessorTasklet({self.name!r}, {self._state.value})"
