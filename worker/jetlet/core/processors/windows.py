"""Sliding and tumbling window aggregation by event time (Jet's ``SlidingWindowP``).

Time is cut into *frames* by a :class:`~jetlet.core.event_time.SlidingWindowPolicy`;
a window is ``frames_per_window`` consecutive frames and is named by its end
(exclusive). One processor class runs in three modes:

* ``aggregate_to_sliding_window_p`` - single stage: items in, window results out.
* ``accumulate_by_frame_p`` - first of two stages: items in, one
  ``TimestampedEntry(frame_end, key, accumulator)`` per frame and key out
  (a tumbling window of one frame that emits raw accumulators).
* ``combine_to_sliding_window_p`` - second stage: those frames in (their
  accumulators are combined), window results out.

**State.** ``frames`` maps a frame's end to ``{key: accumulator}``. An item
goes into the frame ending at ``higher_frame_ts(timestamp)`` (in the second
stage the entry's timestamp already is a frame end).

**Watermarks.** A watermark ``wm`` completes every window whose end is
``<= wm``. Windows are emitted in order, from ``next_win_to_emit`` up to
``wm``, each as ``map_to_output_fn(start, end, key, result, is_early)`` per
key (``KeyedWindowResult`` by default; None is not emitted); after a window
the frame leaving the sliding window is evicted; then ``next_win_to_emit``
becomes ``higher_frame_ts(wm)`` and the watermark is forwarded. Runs of
windows without data are skipped. An item whose frame ends before
``next_win_to_emit`` is *late*: its frame already took part in an emitted
window, so it is dropped and counted (``metrics()["lateEventsDropped"]``).
Jet does the same: a "partially late" item is dropped too.

**Cost of sliding.** With a ``deduct`` function the processor keeps a
running accumulator per key for the current window: the next window is the
current one combined with the frame entering and, after emission, deducted
by the frame leaving; keys whose accumulator equals an empty one are dropped.
That is O(keys in two frames) per slide, independent of
``frames_per_window``; results are taken with ``export``. Without ``deduct``
every window is recomputed by combining its frames into fresh accumulators
and finished with ``finish``. A tumbling window finishes its single frame.

**Early results.** With ``early_results_period_ms > 0``, ``try_process()``
emits, once per period (by an injectable millisecond clock), the exported
partial result of every incomplete window that has data, with
``is_early=True``.

**Snapshots** save every frame accumulator under ``FrameSnapshotKey(frame_end,
key)``, restored to the processor that owns the partition of ``key`` (its
``partition_key``), and ``next_win_to_emit`` under a
:class:`~jetlet.core.snapshot_keys.ProcessorKey`, which every processor
receives from every processor that saved — None from a processor that had
no watermark yet (as Jet saves ``Long.MIN_VALUE``). A restore merges
frames (combining accumulators that meet under the same frame and key), takes
the minimum ``next_win_to_emit`` over the restored processors (None, no
window emitted yet, if any saved None), drops frames that no window still to
be emitted needs, and recomputes the running window at the next emission.
(Without the None, a processor that held a frame but had seen no watermark —
its member slow to start when the first snapshot was taken — was left out of
the minimum, and the restore dropped that frame as older than the others'
``next_win``: the chaos suite's pause-coordinator seeds 6 and 2 COMPLETED
with the first window counting two thirds of its items.) A batch of windows being emitted when a snapshot
starts is emitted first (Jet's ``flushBuffers``), so state and output agree.

**Idle input.** When every input of a first stage turns idle (``IDLE_MESSAGE``: its sources
sent nothing for ``idle_timeout_ms``), it sends every frame it holds, then the idle message: the
second stage leaves an idle input out of its watermark (as in Jet) and would otherwise close those
frames' windows without them. Its own watermark stays; items that come later for a frame already
sent make a new accumulator of that frame, which the second stage combines in like any other. A
single stage holds nothing another processor waits for and forwards the idle message.

**Completion.** When every input is done (batch jobs) all remaining windows
are emitted, up to the last window that holds the newest frame.
"""

from __future__ import annotations

import collections
import dataclasses
import operator
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from itertools import repeat
from typing import Any

from jetlet import datamodel
from jetlet.aggregate import operation as agg
from jetlet.aggregate import operations
from jetlet.core import event_time, event_time_mapper, processor, snapshot_keys, snapshot_writer
from jetlet.core import inbox as inbox_mod
from jetlet.core import outbox as outbox_mod
from jetlet.core import watermark as wm

KeyFn = Callable[[Any], Hashable]
TimestampFn = Callable[[Any], int]
MapToOutput = Callable[[int, int, Any, Any, bool], Any]
"""``fn(start, end, key, result, is_early) -> output`` (Jet's ``KeyedWindowResultFunction``)."""

_MISSING = object()
_NEXT_WIN_TAG = "__jetlet_sliding_window_next_win_to_emit__"


def keyed_window_result(start: int, end: int, key: Any, result: Any, is_early: bool) -> Any:
    """The default ``map_to_output_fn``: a :class:`~jetlet.datamodel.KeyedWindowResult`."""
    return datamodel.KeyedWindowResult(start, end, key, result, is_early)


def keyed_window_event(start: int, end: int, key: Any, result: Any, is_early: bool) -> Any:
    """The pipeline's output of a keyed window: a ``(window end, KeyedWindowResult)`` event."""
    return (end, datamodel.KeyedWindowResult(start, end, key, result, is_early))


def window_event(start: int, end: int, _key: Any, result: Any, is_early: bool) -> Any:
    """The pipeline's output of a global window: a ``(window end, WindowResult)`` event."""
    return (end, datamodel.WindowResult(start, end, result, is_early))


GLOBAL_KEY: KeyFn = ().count
"""The key of every item of a global (non-keyed) window: 0, computed in C (``().count(item)``).

Processors test for it by identity (:func:`as_global_key` first): a pickled copy, as a member
receives it with the job, is another bound method object, equal to this one but not it."""


def as_global_key(key_fn: KeyFn) -> KeyFn:
    """:data:`GLOBAL_KEY` itself for any copy of it (a member unpickles its own), else ``key_fn``."""
    if type(key_fn) is type(GLOBAL_KEY) and key_fn == GLOBAL_KEY:
        return GLOBAL_KEY
    return key_fn


_ENTRY_TIMESTAMP: TimestampFn = operator.attrgetter("timestamp")
_ENTRY_KEY: KeyFn = operator.attrgetter("key")
_ENTRY_VALUE = operator.attrgetter("value")
_EVENT_TIMESTAMP = operator.itemgetter(0)
_EVENT_ITEM = operator.itemgetter(1)

_new_tuple = tuple.__new__
"""Makes a named tuple from a tuple of its fields in C (no Python-level ``__new__`` call)."""


@dataclasses.dataclass(frozen=True, slots=True)
class FrameSnapshotKey:
    """The snapshot key of one frame accumulator; ``key`` is the grouping (partitioning) key."""

    timestamp: int
    key: Any

    @property
    def partition_key(self) -> Any:
        """The grouping key: a frame is restored where the items of its key go."""
        return self.key


class _Emission:
    """Outputs being emitted from an iterator of lists (whole windows), keeping what the outbox refused."""

    __slots__ = ("_chunks", "_held")

    def __init__(self, chunks: Iterator[list[Any]]) -> None:
        self._chunks = chunks
        self._held: list[Any] = []

    def emit(self, outbox: outbox_mod.Outbox) -> bool:
        """Emit until the iterator is exhausted (True) or the outbox is full (False)."""
        held = self._held
        while True:
            if not held:
                chunk = next(self._chunks, None)
                if chunk is None:
                    self._held = held
                    return True
                held = chunk
                continue
            taken = outbox.offer_batch(held)
            if taken < len(held):
                self._held = held[taken:]
                return False
            held = []

    def emit_to_snapshot(self, outbox: outbox_mod.Outbox) -> bool:
        """Offer ``(key, value)`` pairs to the snapshot until done (True) or full (False)."""
        while True:
            if not self._held:
                chunk = next(self._chunks, None)
                if chunk is None:
                    return True
                self._held = chunk
            for index, (key, value) in enumerate(self._held):
                if not outbox.offer_to_snapshot(key, value):
                    self._held = self._held[index:]
                    return False
            self._held = []


class SlidingWindowP(processor.Processor):
    """See the module doc. Made by the three factory functions below."""

    def __init__(
        self,
        key_fns: Sequence[KeyFn],
        timestamp_fns: Sequence[TimestampFn],
        accumulate_fns: Sequence[Callable[[Any, Any], Any]],
        policy: event_time.SlidingWindowPolicy,
        op: agg.AggregateOperation[Any, Any],
        map_to_output_fn: MapToOutput | None,
        frame_timestamps: bool,
        early_results_period_ms: int,
        clock: event_time_mapper.Clock,
        events: bool = False,
    ) -> None:
        self._events = events
        self._key_fns = [as_global_key(key_fn) for key_fn in key_fns]
        self._timestamp_fns = list(timestamp_fns)
        self._accumulate_fns = list(accumulate_fns)
        self._folds = [] if frame_timestamps else [op.fold_fn(i) for i in range(len(self._accumulate_fns))]
        """Per input, a batch's fold into one accumulator (a global window's one-frame path; not the
        second stage, whose accumulate function is the combine)."""
        self._emits_frames = map_to_output_fn is None
        self._policy = policy.to_tumbling_by_frame() if self._emits_frames else policy
        self._op = op
        self._create = op.create_fn
        self._combine = op.combine_fn
        self._deduct = None if self._policy.is_tumbling else op.deduct_fn
        self._empty_acc = op.create_fn()
        self._shape: MapToOutput = map_to_output_fn or keyed_window_result
        self._frame_timestamps = frame_timestamps
        self._early_period = early_results_period_ms
        self._clock = clock
        self._frames: dict[int, dict[Any, Any]] = {}
        self._top_ts: int | None = None
        self._next_win: int | None = None
        self._sliding: dict[Any, Any] | None = None
        self._late = 0
        self._last_early_at = 0
        self._flushing: _Emission | None = None
        self._early: _Emission | None = None
        self._completing: _Emission | None = None
        self._snapshotting: _Emission | None = None
        self._restored_next: list[int | None] = []

    def init(self, outbox: outbox_mod.Outbox, context: processor.ProcessorContext) -> None:
        super().init(outbox, context)
        self._last_early_at = self._clock()

    # -- items --------------------------------------------------------------
    def process(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        if not self._early_done():
            return
        batch = inbox.take_all()
        key_fn = self._key_fns[ordinal]
        accumulate = self._accumulate_fns[ordinal]
        # Unpack in C: events into timestamps and items; the second stage's frame entries
        # into timestamps, keys and accumulators (combined straight in, no call per entry).
        items: Iterable[Any]
        if self._frame_timestamps:
            stamps: Iterable[int] = map(_ENTRY_TIMESTAMP, batch)
            keys: Iterable[Any] = map(_ENTRY_KEY, batch)
            items = map(_ENTRY_VALUE, batch)
        else:
            item_list: list[Any]
            if self._events:  # (timestamp, item) events: user functions see the item
                stamps, item_list = map(_EVENT_TIMESTAMP, batch), list(map(_EVENT_ITEM, batch))
            else:
                stamps, item_list = map(self._timestamp_fns[ordinal], batch), batch
            if accumulate is operations.COUNT_ONE:
                self._count_by_frame(stamps, item_list, key_fn)
                return
            if key_fn is GLOBAL_KEY:
                stamps = stamp_list = list(stamps)
                if self._fold_into_one_frame(stamp_list, item_list, self._folds[ordinal]):
                    return
            items, keys = item_list, map(key_fn, item_list)
        frames, create, missing, next_win = self._frames, self._create, _MISSING, self._next_win
        checked = self._frame_timestamps
        size, offset = self._policy.frame_size, self._policy.frame_offset
        top = self._top_ts
        low = high = 0  # the frame of the previous item: [low, high) has end ``high``
        frame: dict[Any, Any] = {}
        for timestamp, key, item in zip(stamps, keys, items, strict=True):
            if not low <= timestamp < high:
                frame_ts = (
                    self._checked_frame_ts(timestamp)
                    if checked
                    else (timestamp - (timestamp - offset) % size + size)
                )
                if next_win is not None and frame_ts < next_win:
                    self._late += 1
                    low = high = 0
                    continue
                low, high = (frame_ts, frame_ts + 1) if checked else (frame_ts - size, frame_ts)
                found = frames.get(frame_ts)
                if found is None:
                    found = frames[frame_ts] = {}
                    if top is None or frame_ts > top:
                        top = frame_ts
                frame = found
            acc = frame.get(key, missing)
            frame[key] = accumulate(create() if acc is missing else acc, item)
        self._top_ts = top

    def _fold_into_one_frame(
        self, stamps: list[int], items: list[Any], fold: Callable[[Any, list[Any]], Any]
    ) -> bool:
        """``process`` for a batch of a global window whose items all fall in one frame (most
        batches: a frame spans many): the frame's accumulator folds the batch in one call of the
        operation's :meth:`~jetlet.aggregate.AggregateOperation.fold_fn` (its batch function, else
        ``functools.reduce``, a loop in C) instead of a Python step per item; the items are
        accumulated in order, as one by one. Returns False, having done nothing, for a batch that
        spans frames."""
        size, offset = self._policy.frame_size, self._policy.frame_offset
        ordered = sorted(stamps)  # (the lowest and highest by one sort in C: 5 ns a stamp in order)
        highest = ordered[-1]
        frame_ts = highest - (highest - offset) % size + size
        if ordered[0] < frame_ts - size:
            return False
        if self._next_win is not None and frame_ts < self._next_win:
            self._late += len(stamps)
            return True
        frame = self._frames.get(frame_ts)
        if frame is None:
            frame = self._frames[frame_ts] = {}
            if self._top_ts is None or frame_ts > self._top_ts:
                self._top_ts = frame_ts
        key = GLOBAL_KEY(items[0])
        acc = frame.get(key, _MISSING)
        frame[key] = fold(self._create() if acc is _MISSING else acc, items)
        return True

    def _count_by_frame(self, stamps: Iterable[int], items: list[Any], key_fn: KeyFn) -> None:
        """``process`` for counting: each run of items in one frame is tallied by ``Counter.update``.

        Counting is the most common window aggregation; tallying a run of keys
        in C instead of calling ``accumulate`` and ``create`` per item makes the
        first window stage cost about what a plain ``Counter`` loop costs.
        """
        frames, next_win, top = self._frames, self._next_win, self._top_ts
        size, offset = self._policy.frame_size, self._policy.frame_offset
        low = high = 0
        run: list[Any] = []
        frame: collections.Counter[Any] = collections.Counter()
        for timestamp, item in zip(stamps, items, strict=True):
            if not low <= timestamp < high:
                if run:
                    frame.update(map(key_fn, run))
                    run = []
                frame_ts = timestamp - (timestamp - offset) % size + size
                if next_win is not None and frame_ts < next_win:
                    self._late += 1
                    low = high = 0
                    continue
                low, high = frame_ts - size, frame_ts
                found = frames.get(frame_ts)
                if found is None:
                    found = frames[frame_ts] = collections.Counter()
                    if top is None or frame_ts > top:
                        top = frame_ts
                elif type(found) is not collections.Counter:  # a frame restored from a snapshot
                    found = frames[frame_ts] = collections.Counter(found)
                frame = found
            run.append(item)
        if run:
            frame.update(map(key_fn, run))
        self._top_ts = top

    def _checked_frame_ts(self, timestamp: int) -> int:
        if self._policy.floor_frame_ts(timestamp) != timestamp:
            raise ValueError(
                f"frame timestamp {timestamp} is not a frame boundary of {self._policy}: "
                "both stages of a window aggregation must use the same SlidingWindowPolicy"
            )
        return timestamp

    # -- watermarks and completion -----------------------------------------
    def try_process_watermark(self, watermark: wm.Watermark) -> bool:
        if watermark.is_idle_message():
            return self.try_process_idle()
        if not self._early_done():
            return False
        if self._flushing is None:
            self._flushing = _Emission(self._windows_until(watermark.timestamp))
        if not self._flushing.emit(self.outbox) or not self.outbox.offer(watermark):
            return False
        self._flushing = None
        return True

    def try_process_idle(self) -> bool:
        """A first stage sends every frame it holds, then ``IDLE_MESSAGE`` (see the module doc)."""
        if not self._emits_frames:
            return self.outbox.offer(wm.IDLE_MESSAGE)
        if self._flushing is None:
            self._flushing = _Emission(self._held_frames())
        if not self._flushing.emit(self.outbox) or not self.outbox.offer(wm.IDLE_MESSAGE):
            return False
        self._flushing = None
        return True

    def _held_frames(self) -> Iterator[list[Any]]:
        """Every frame held, oldest first, as ``TimestampedEntry`` outputs, taken out of the state."""
        entry = datamodel.TimestampedEntry
        while self._frames:
            frame_end = min(self._frames)
            frame = self._frames.pop(frame_end)
            yield [_new_tuple(entry, (frame_end, key, acc)) for key, acc in frame.items()]

    def complete(self) -> bool:
        if not self._early_done():
            return False
        if self._completing is None:
            if self._top_ts is None or not self._frames:
                return True
            last_window = self._top_ts + self._policy.window_size - self._policy.frame_size
            self._completing = _Emission(self._windows_until(last_window))
        return self._completing.emit(self.outbox)

    def _windows_until(self, limit: int) -> Iterator[Any]:
        """Emit the windows ending at or before ``limit``, evicting as it goes; see the module doc."""
        frame_size = self._policy.frame_size
        frames = self._frames
        win_end = self._next_win if self._next_win is not None else _lowest(frames)
        while win_end is not None and win_end <= limit:
            if not frames:
                self._sliding = {} if self._sliding is not None else None
                break
            if not self._sliding and win_end not in frames:
                lowest = min(frames)
                if lowest > win_end:
                    win_end = lowest
                    continue
            outputs = self._window_outputs(win_end)
            self._complete_window(win_end)
            if outputs:
                yield outputs
            win_end += frame_size
            self._next_win = win_end
        after = self._policy.higher_frame_ts(limit)
        if self._next_win is None or after > self._next_win:
            self._next_win = after

    def _window_outputs(self, win_end: int) -> list[Any]:
        if self._emits_frames:
            frame = self._frames.get(win_end, {})
            entry = datamodel.TimestampedEntry
            return [_new_tuple(entry, (win_end, key, acc)) for key, acc in frame.items()]
        if self._policy.is_tumbling:
            accs, result_fn = self._frames.get(win_end, {}), self._op.finish_fn
        elif self._deduct is not None:
            accs, result_fn = self._slide_to(win_end), self._op.export_fn
        else:
            accs, result_fn = self._recompute(win_end), self._op.finish_fn
        start, shape = win_end - self._policy.window_size, self._shape
        if result_fn is not agg.IDENTITY:
            accs = {key: result_fn(acc) for key, acc in accs.items()}
        if shape is keyed_window_event:
            # The pipeline's shape, built by C iterators: no Python bytecode runs per result
            # (a window emits one result per key, so this is the window stage's hot loop).
            n = len(accs)
            keys, values = accs.keys(), accs.values()
            fields = zip(repeat(start, n), repeat(win_end, n), keys, values, repeat(False, n), strict=True)
            results = map(_new_tuple, repeat(datamodel.KeyedWindowResult, n), fields)
            return list(zip(repeat(win_end, n), results, strict=True))
        if shape is window_event:
            plain = datamodel.WindowResult
            return [(win_end, _new_tuple(plain, (start, win_end, r, False))) for r in accs.values()]
        outputs = [shape(start, win_end, key, r, False) for key, r in accs.items()]
        return [output for output in outputs if output is not None]

    def _slide_to(self, win_end: int) -> dict[Any, Any]:
        """The running window moved to end at ``win_end`` (the frame entering combined in)."""
        if self._sliding is None:
            self._sliding = self._recompute(win_end)
        else:
            entering = self._frames.get(win_end)
            if entering:
                self._patch(self._op.require_combine(), entering)
        return self._sliding

    def _complete_window(self, win_end: int) -> None:
        leaving = self._frames.pop(win_end - self._policy.window_size + self._policy.frame_size, None)
        if leaving and self._deduct is not None and self._sliding is not None:
            self._patch(self._deduct, leaving)

    def _patch(self, fn: Callable[[Any, Any], Any], frame: dict[Any, Any]) -> None:
        sliding, create, empty, missing = self._sliding, self._create, self._empty_acc, _MISSING
        assert sliding is not None
        for key, frame_acc in frame.items():
            acc = sliding.get(key, missing)
            patched = fn(create() if acc is missing else acc, frame_acc)
            if patched == empty:
                sliding.pop(key, None)
            else:
                sliding[key] = patched

    def _recompute(self, win_end: int) -> dict[Any, Any]:
        """Fresh accumulators of the window ending at ``win_end``, combined from its frames."""
        combine, create, missing = self._op.require_combine(), self._create, _MISSING
        frame_size = self._policy.frame_size
        window: dict[Any, Any] = {}
        for frame_ts in range(win_end - self._policy.window_size + frame_size, win_end + 1, frame_size):
            frame = self._frames.get(frame_ts)
            if not frame:
                continue
            for key, frame_acc in frame.items():
                acc = window.get(key, missing)
                window[key] = combine(create() if acc is missing else acc, frame_acc)
        return window

    # -- early results -------------------------------------------------------
    def try_process(self) -> bool:
        if self._early_period <= 0 or self._emits_frames:
            return True
        if self._early is None:
            now = self._clock()
            if now - self._last_early_at < self._early_period:
                return True
            self._last_early_at = now
            self._early = _Emission(iter([list(self._early_outputs())]))
        return self._early_done()

    def _early_done(self) -> bool:
        """Finish emitting early results (True), or False if the outbox is full."""
        if self._early is None:
            return True
        if not self._early.emit(self.outbox):
            return False
        self._early = None
        return True

    def _early_outputs(self) -> Iterator[Any]:
        lowest = _lowest(self._frames)
        if lowest is None or self._top_ts is None:
            return
        policy, export, shape = self._policy, self._op.export_fn, self._shape
        first = lowest if self._next_win is None else max(lowest, self._next_win)
        last = self._top_ts + policy.window_size - policy.frame_size
        for win_end in range(first, last + 1, policy.frame_size):
            accs = self._frames.get(win_end, {}) if policy.is_tumbling else self._recompute(win_end)
            start = win_end - policy.window_size
            outputs = (shape(start, win_end, key, export(acc), True) for key, acc in accs.items())
            yield from [output for output in outputs if output is not None]

    # -- snapshots -----------------------------------------------------------
    def save_to_snapshot(self) -> bool:
        if self._flushing is not None and not self._flushing.emit(self.outbox):
            return False
        if self._snapshotting is None:
            # copies taken now, at the barrier: the member pickles them off this thread
            entries = snapshot_writer.copies(
                (
                    (FrameSnapshotKey(frame_ts, key), acc)
                    for frame_ts, frame in self._frames.items()
                    for key, acc in frame.items()
                ),
                self._op.copy_fn,
                self.context.vertex_name,
            )
            key = snapshot_keys.ProcessorKey(_NEXT_WIN_TAG, self.context.global_processor_index)
            entries.append((key, self._next_win))  # None too: it holds back the restored minimum
            self._snapshotting = _Emission(iter([entries]))
        if not self._snapshotting.emit_to_snapshot(self.outbox):
            return False
        self._snapshotting = None
        return True

    def restore_from_snapshot(self, inbox: inbox_mod.Inbox) -> None:
        for key, value in inbox.take_all():
            if isinstance(key, FrameSnapshotKey):
                self._restore_frame_acc(key, value)
            elif isinstance(key, snapshot_keys.ProcessorKey) and key.tag == _NEXT_WIN_TAG:
                self._restored_next.append(value)
            else:
                raise ValueError(f"a window processor cannot restore the snapshot entry {key!r}")

    def _restore_frame_acc(self, key: FrameSnapshotKey, acc: Any) -> None:
        frame = self._frames.setdefault(key.timestamp, {})
        if key.key in frame:
            if self._combine is None:
                raise ValueError(f"snapshot has {key!r} twice and the operation cannot combine")
            frame[key.key] = self._combine(frame[key.key], acc)
        else:
            frame[key.key] = acc
        if self._top_ts is None or key.timestamp > self._top_ts:
            self._top_ts = key.timestamp

    def finish_snapshot_restore(self) -> bool:
        if self._restored_next:
            restored, self._restored_next = self._restored_next, []
            if None in restored:  # a processor had emitted no window yet: neither may this one
                self._next_win = None
                return True
            self._next_win = min(n for n in restored if n is not None)
            oldest_needed = self._next_win - self._policy.window_size + self._policy.frame_size
            for frame_ts in [ts for ts in self._frames if ts < oldest_needed]:
                del self._frames[frame_ts]
        return True

    def metrics(self) -> dict[str, int]:
        """Jet's: ``lateEventsDropped``, and the frames held now and the keys in them (``totalFrames``,
        ``totalKeys``; read from another thread: ``list()`` of a dict's values is one step under the GIL)."""
        frames = list(self._frames.values())
        keys = sum(map(len, frames))
        return {"lateEventsDropped": self._late, "totalFrames": len(frames), "totalKeys": keys}


def _lowest(frames: dict[int, Any]) -> int | None:
    return min(frames) if frames else None


# -- factories -----------------------------------------------------------------


def _as_list(fns: Any, what: str) -> list[Any]:
    listed = [fns] if callable(fns) else list(fns)
    for fn in listed:
        if not callable(fn):
            raise TypeError(f"{what} must be callables, got {fn!r}")
    return listed


def _check(
    key_fns: list[KeyFn],
    timestamp_fns: list[TimestampFn],
    policy: event_time.SlidingWindowPolicy,
    op: agg.AggregateOperation[Any, Any],
) -> list[Callable[[Any, Any], Any]]:
    if not isinstance(policy, event_time.SlidingWindowPolicy):
        raise TypeError(f"policy must be a SlidingWindowPolicy, got {type(policy).__qualname__}")
    if len(key_fns) != len(timestamp_fns):
        raise ValueError(
            f"got {len(key_fns)} key functions and {len(timestamp_fns)} timestamp functions; "
            "give one of each per input"
        )
    return [op.accumulate_fn(ordinal) for ordinal in range(len(key_fns))]


def _check_period(early_results_period_ms: int) -> None:
    if early_results_period_ms < 0:
        raise ValueError(f"early_results_period_ms must be >= 0, got {early_results_period_ms}")


def accumulate_by_frame_p(
    key_fns: KeyFn | Sequence[KeyFn],
    timestamp_fns: TimestampFn | Sequence[TimestampFn],
    policy: event_time.SlidingWindowPolicy,
    aggr_op: agg.AggregateOperation[Any, Any],
    *,
    events: bool = False,
) -> processor.ProcessorFactory:
    """First stage: per input ``i``, key ``key_fns[i](item)`` and event time ``timestamp_fns[i](item)``.

    Emits ``TimestampedEntry(frame_end, key, accumulator)`` for every frame
    the watermark completes, then the watermark. With ``events`` the inputs
    are the pipeline's ``(timestamp, item)`` events: the timestamp functions
    are not used, and the key functions and the operation see the item.
    """
    keys, stamps = _as_list(key_fns, "key_fns"), _as_list(timestamp_fns, "timestamp_fns")
    accumulate = _check(keys, stamps, policy, aggr_op)
    return lambda: SlidingWindowP(
        keys, stamps, accumulate, policy, aggr_op, None, False, 0, event_time_mapper.monotonic_ms, events
    )


def combine_to_sliding_window_p(
    policy: event_time.SlidingWindowPolicy,
    aggr_op: agg.AggregateOperation[Any, Any],
    map_to_output_fn: MapToOutput = keyed_window_result,
    *,
    early_results_period_ms: int = 0,
    clock: event_time_mapper.Clock = event_time_mapper.monotonic_ms,
) -> processor.ProcessorFactory:
    """Second stage: combines the frames of ``accumulate_by_frame_p`` into windows; emits their results."""
    if not isinstance(policy, event_time.SlidingWindowPolicy):
        raise TypeError(f"policy must be a SlidingWindowPolicy, got {type(policy).__qualname__}")
    _check_period(early_results_period_ms)
    combine = aggr_op.require_combine()  # frame accumulators are combined in as they arrive
    return lambda: SlidingWindowP(
        [_ENTRY_KEY], [_ENTRY_TIMESTAMP], [combine], policy, aggr_op, map_to_output_fn, True,
        early_results_period_ms, clock,
    )  # fmt: skip


def aggregate_to_sliding_window_p(
    key_fns: KeyFn | Sequence[KeyFn],
    timestamp_fns: TimestampFn | Sequence[TimestampFn],
    policy: event_time.SlidingWindowPolicy,
    aggr_op: agg.AggregateOperation[Any, Any],
    map_to_output_fn: MapToOutput = keyed_window_result,
    *,
    early_results_period_ms: int = 0,
    clock: event_time_mapper.Clock = event_time_mapper.monotonic_ms,
    events: bool = False,
) -> processor.ProcessorFactory:
    """Single stage: items in, window results out (see the module doc); ``events`` as in the first stage.

    >>> from jetlet.aggregate import operations
    >>> from jetlet.core import event_time
    >>> from jetlet.testing import verify_processor
    >>> events = [(1, "a"), (12, "a"), wm.Watermark(20)]
    >>> _ = verify_processor(
    ...     aggregate_to_sliding_window_p(
    ...         lambda e: e[1], lambda e: e[0], event_time.sliding_win_policy(20, 10), operations.counting()
    ...     )
    ... ).input(events).expect_output([
    ...     datamodel.KeyedWindowResult(-10, 10, "a", 1),
    ...     datamodel.KeyedWindowResult(0, 20, "a", 2),
    ...     wm.Watermark(20),
    ...     datamodel.KeyedWindowResult(10, 30, "a", 1),
    ... ])
    """
    keys, stamps = _as_list(key_fns, "key_fns"), _as_list(timestamp_fns, "timestamp_fns")
    accumulate = _check(keys, stamps, policy, aggr_op)
    _check_period(early_results_period_ms)
    if not policy.is_tumbling:
        aggr_op.require_combine()
    return lambda: SlidingWindowP(
        keys,
        stamps,
        accumulate,
        policy,
        aggr_op,
        map_to_output_fn,
        False,
        early_results_period_ms,
        clock,
        events,
    )
