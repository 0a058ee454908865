"""Session windows: per key, bursts of events separated by gaps (Jet's ``SessionWindowP``).

Theory of operation. An event with timestamp ``ts`` covers the interval
``[ts, ts + session_timeout)``. Per key the processor keeps a list of open
*sessions*, each ``[start, end)`` with one accumulator, sorted by start and
pairwise disjoint. A new event that overlaps no session opens one; an event
that overlaps one session is accumulated into it (extending it); an event
that overlaps several bridges them, so they merge into one (accumulators are
combined with ``aggr_op.require_combine()``). Two events whose timestamps
differ by ``session_timeout`` or more, with nothing in between, are in
different sessions.

A session is final once the watermark reaches its end (no event with a
timestamp below the watermark can follow, and only such an event could still
touch the session). On each watermark the processor emits every final session
as ``map_to_output_fn(start, end, key, result, is_early=False)`` in order of
end, then forwards the watermark. A min-heap of ``(end, sequence, key)``
entries finds the final sessions without scanning every key; entries made
stale by merges are skipped when popped.

An event is *late* when ``ts + session_timeout <= watermark``: its own
interval is already behind the watermark, so it could only belong to
sessions already emitted. Late events are dropped and counted in
``metrics()["lateEventsDropped"]``.

With ``early_results_period_ms > 0``, ``try_process()`` emits, once per
period of ``clock()`` (milliseconds), the exported (``export_fn``) result of
every open session with ``is_early=True``; the sessions stay open.

When every input is done, ``complete()`` emits all sessions still open, as
if a watermark of +infinity had come (a finite stream's last sessions are
not lost).

Snapshots hold each key's sessions as ``(start, end, accumulator)`` tuples
under the key (restored to the processor that owns the key's partition
then), plus the processor's watermark under a :class:`SessionWatermarkKey`,
a broadcast key (every processor receives every saved watermark); a restore
merges overlapping sessions that meet under one key and resumes from the
lowest restored watermark, as Jet does.
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import itertools
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any

from jetlet.aggregate import operation as agg
from jetlet.core import event_time_mapper, processor, snapshot_keys, snapshot_writer
from jetlet.core import inbox as inbox_mod
from jetlet.core import outbox as outbox_mod
from jetlet.core import watermark as wm
from jetlet.core.processors import pending, windows

KeyFn = Callable[[Any], Hashable]
TimestampFn = Callable[[Any], int]
SessionOutputFn = Callable[[int, int, Any, Any, bool], Any]
"""``map_to_output_fn(start, end, key, result, is_early)``; a None result emits nothing."""

_NO_WATERMARK = -(1 << 63)
_END_OF_TIME = 1 << 63


@dataclasses.dataclass(frozen=True)
class SessionWatermarkKey(snapshot_keys.BroadcastKey):
    """Snapshot key of one processor's current watermark (restored to every processor)."""

    processor_index: int


class _Session:
    __slots__ = ("acc", "end", "start")

    def __init__(self, start: int, end: int, acc: Any) -> None:
        self.start = start
        self.end = end
        self.acc = acc


def _start_of(session: _Session) -> int:
    return session.start


class SessionWindowP(processor.Processor):
    """Aggregates events into session windows per key; see the module doc."""

    def __init__(
        self,
        session_timeout: int,
        key_fns: Sequence[KeyFn],
        timestamp_fns: Sequence[TimestampFn],
        aggr_op: agg.AggregateOperation[Any, Any],
        map_to_output_fn: SessionOutputFn,
        early_results_period_ms: int,
        clock: Callable[[], int],
    ) -> None:
        self._timeout = session_timeout
        self._key_fns = list(key_fns)
        self._timestamp_fns = list(timestamp_fns)
        self._op = aggr_op
        self._accumulate = [aggr_op.accumulate_fn(i) for i in range(len(key_fns))]
        self._combine = aggr_op.require_combine()
        self._map_to_output = map_to_output_fn
        self._early_period = early_results_period_ms
        self._clock = clock
        self._next_early = 0
        self._sessions: dict[Any, list[_Session]] = {}
        self._deadlines: list[tuple[int, int, Any]] = []
        self._sequence = itertools.count()
        self._watermark = _NO_WATERMARK
        self._restored_watermark: int | None = None
        self._late_dropped = 0
        self._output = pending.PendingOutput()
        self._completing = False
        self._snapshot = snapshot_writer.SnapshotWriter()

    def init(self, outbox: outbox_mod.Outbox, context: processor.ProcessorContext) -> None:
        super().init(outbox, context)
        if self._early_period > 0:
            self._next_early = self._clock() + self._early_period

    def metrics(self) -> dict[str, int]:
        """Jet's: ``lateEventsDropped``, the keys with open sessions (``totalKeys``) and the open
        sessions (``totalWindows``; read from another thread: ``list()`` of a dict's values is one step)."""
        sessions = list(self._sessions.values())
        return {
            "lateEventsDropped": self._late_dropped,
            "totalKeys": len(sessions),
            "totalWindows": sum(map(len, sessions)),
        }

    # -- input -------------------------------------------------------------
    def process(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        if not self._output.flush(self.outbox):
            return
        key_fn = self._key_fns[ordinal]
        timestamp_fn = self._timestamp_fns[ordinal]
        accumulate = self._accumulate[ordinal]
        timeout = self._timeout
        watermark = self._watermark
        for item in inbox.take_all():
            timestamp = timestamp_fn(item)
            if timestamp + timeout <= watermark:
                self._late_dropped += 1
                continue
            self._add_event(key_fn(item), timestamp, item, accumulate)

    def _add_event(self, key: Any, timestamp: int, item: Any, accumulate: Callable[[Any, Any], Any]) -> None:
        sessions = self._sessions.get(key)
        if sessions is None:
            sessions = self._sessions[key] = []
        end = timestamp + self._timeout
        low, high = _overlapping(sessions, timestamp, end)
        if low == high:
            sessions.insert(high, _Session(timestamp, end, accumulate(self._op.create_fn(), item)))
            self._schedule(end, key)
            return
        merged = self._merge_range(key, sessions, low, high, timestamp, end)
        merged.acc = accumulate(merged.acc, item)

    def _merge_range(
        self, key: Any, sessions: list[_Session], low: int, high: int, start: int, end: int
    ) -> _Session:
        """Merge ``sessions[low:high]`` and the interval ``[start, end)`` into ``sessions[low]``."""
        merged = sessions[low]
        for other in sessions[low + 1 : high]:
            merged.acc = self._combine(merged.acc, other.acc)
        new_end = max(sessions[high - 1].end, end)
        del sessions[low + 1 : high]
        merged.start = min(merged.start, start)
        if new_end != merged.end:
            merged.end = new_end
            self._schedule(new_end, key)
        return merged

    def _schedule(self, end: int, key: Any) -> None:
        heapq.heappush(self._deadlines, (end, next(self._sequence), key))

    # -- watermarks and completion ------------------------------------------
    def try_process_watermark(self, watermark: wm.Watermark) -> bool:
        return self._output.watermark(self.outbox, watermark, self._advance)

    def _advance(self, watermark: int) -> list[Any]:
        self._watermark = max(self._watermark, watermark)
        return self._close_until(self._watermark)

    def complete(self) -> bool:
        output = self._output
        if not self._completing:
            if not output.flush(self.outbox):
                return False
            self._completing = True
            output.items = self._close_until(_END_OF_TIME)
        return output.flush(self.outbox)

    def _close_until(self, watermark: int) -> list[Any]:
        """Remove every session whose end is at or below ``watermark``; return their outputs."""
        closed: list[tuple[_Session, Any]] = []
        deadlines = self._deadlines
        while deadlines and deadlines[0][0] <= watermark:
            _, _, key = heapq.heappop(deadlines)
            sessions = self._sessions.get(key)
            if not sessions:
                continue
            count = 0
            while count < len(sessions) and sessions[count].end <= watermark:
                closed.append((sessions[count], key))
                count += 1
            del sessions[:count]
            if not sessions:
                del self._sessions[key]
        closed.sort(key=lambda entry: (entry[0].end, entry[0].start))
        finish = self._op.finish_fn
        return self._outputs((s.start, s.end, key, finish(s.acc), False) for s, key in closed)

    def _outputs(self, results: Iterator[tuple[int, int, Any, Any, bool]]) -> list[Any]:
        shape = self._map_to_output
        outputs = [shape(*result) for result in results]
        return [out for out in outputs if out is not None]

    # -- early results -------------------------------------------------------
    def try_process(self) -> bool:
        output = self._output
        if not output.flush(self.outbox):
            return False
        if self._early_period <= 0 or self._completing:
            return True
        now = self._clock()
        if now < self._next_early:
            return True
        self._next_early = now + self._early_period
        export = self._op.export_fn
        output.items = self._outputs(
            (s.start, s.end, key, export(s.acc), True)
            for key, sessions in self._sessions.items()
            for s in sessions
        )
        return output.flush(self.outbox)

    # -- snapshots -----------------------------------------------------------
    def save_to_snapshot(self) -> bool:
        if not self._output.flush(self.outbox):
            return False
        return self._snapshot.write(self.outbox, self._snapshot_entries)

    def _snapshot_entries(self) -> list[tuple[Any, Any]]:
        copy = self._op.copy_fn
        by_key = (
            (key, tuple((s.start, s.end, s.acc) for s in sessions))
            for key, sessions in self._sessions.items()
        )
        # copies taken now, at the barrier: the member pickles them off this thread
        entries = snapshot_writer.copies(
            by_key, None if copy is None else _sessions_copy(copy), self.context.vertex_name
        )
        entries.append((SessionWatermarkKey(self.context.global_processor_index), self._watermark))
        return entries

    def restore_from_snapshot(self, inbox: inbox_mod.Inbox) -> None:
        for key, value in inbox.take_all():
            if isinstance(key, SessionWatermarkKey):
                restored = self._restored_watermark
                self._restored_watermark = value if restored is None else min(restored, value)
                continue
            for start, end, acc in value:
                self._restore_session(key, start, end, acc)

    def _restore_session(self, key: Any, start: int, end: int, acc: Any) -> None:
        sessions = self._sessions.setdefault(key, [])
        low, high = _overlapping(sessions, start, end)
        if low == high:
            sessions.insert(high, _Session(start, end, acc))
            self._schedule(end, key)
            return
        merged = self._merge_range(key, sessions, low, high, start, end)
        merged.acc = self._combine(merged.acc, acc)

    def finish_snapshot_restore(self) -> bool:
        if self._restored_watermark is not None:
            self._watermark = self._restored_watermark
            self._restored_watermark = None
        return True


def _sessions_copy(copy: Callable[[Any], Any]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """A copy of a key's saved sessions ``((start, end, acc), ...)`` that copies each accumulator."""
    if copy is agg.IDENTITY:
        return agg.IDENTITY
    return lambda sessions: tuple((start, end, copy(acc)) for start, end, acc in sessions)


def _overlapping(sessions: list[_Session], start: int, end: int) -> tuple[int, int]:
    """The index range of the sessions that overlap ``[start, end)`` (disjoint, sorted by start)."""
    high = bisect.bisect_left(sessions, end, key=_start_of)
    low = high
    while low > 0 and sessions[low - 1].end > start:
        low -= 1
    return low, high


def aggregate_to_session_window_p(
    session_timeout: int,
    key_fns: KeyFn | Sequence[KeyFn],
    timestamp_fns: TimestampFn | Sequence[TimestampFn],
    aggr_op: agg.AggregateOperation[Any, Any],
    map_to_output_fn: SessionOutputFn | None = None,
    early_results_period_ms: int = 0,
    clock: Callable[[], int] = event_time_mapper.monotonic_ms,
) -> processor.ProcessorFactory:
    """Session windows per key (Jet's ``Processors.aggregateToSessionWindowP``).

    Input ``i`` uses ``key_fns[i]``, ``timestamp_fns[i]`` and
    ``aggr_op.accumulate_fn(i)``; one callable stands for a single input.
    Emits ``map_to_output_fn(start, end, key, result, is_early)`` (a
    :class:`~jetlet.datamodel.KeyedWindowResult` by default) when the
    watermark reaches a session's end; see the module doc.

    >>> from jetlet.aggregate import counting
    >>> from jetlet.testing import verify_processor
    >>> from jetlet.core.watermark import Watermark
    >>> from jetlet.datamodel import KeyedWindowResult
    >>> p = aggregate_to_session_window_p(10, lambda e: e[0], lambda e: e[1], counting())
    >>> events = [("a", 1), ("a", 5), ("a", 30), Watermark(20)]
    >>> expected = [KeyedWindowResult(1, 15, "a", 2), Watermark(20), KeyedWindowResult(30, 40, "a", 1)]
    >>> _ = verify_processor(p).input(events).expect_output(expected)
    """
    keys = [key_fns] if callable(key_fns) else list(key_fns)
    timestamps = [timestamp_fns] if callable(timestamp_fns) else list(timestamp_fns)
    if session_timeout <= 0:
        raise ValueError(f"session_timeout must be > 0, got {session_timeout!r}")
    if len(keys) != len(timestamps):
        raise ValueError(f"{len(keys)} key functions for {len(timestamps)} timestamp functions")
    if early_results_period_ms < 0:
        raise ValueError(f"early_results_period_ms must be >= 0, got {early_results_period_ms!r}")
    aggr_op.require_combine()
    for ordinal in range(len(keys)):
        aggr_op.accumulate_fn(ordinal)
    output = map_to_output_fn if map_to_output_fn is not None else windows.keyed_window_result
    return lambda: SessionWindowP(
        session_timeout, keys, timestamps, aggr_op, output, early_results_period_ms, clock
    )
