"""Vectorised tumbling and sliding windows over :class:`~jetlet.batches.ColumnBatch` es, keyed by a column.

``StreamStage.aggregate_batch_windows(definition, key, op, value)`` plans a
:class:`BatchWindowTransform`: as Jet's two-stage sliding windows, plus a merge of each window's
shares into one result.

* **prepare** (next to the data, local edge): each batch's rows are assigned to *frames* (one
  slide of event time, ``[end - slide, end)``, from each row's own timestamp in the batch's
  timestamp column); a frame keeps the ``(keys, values)`` columns of its rows as they came, and
  compacts them into one *partial* (unique keys, their aggregate) when it holds more than
  :data:`COMPACT_ROWS` rows. Rows below the last watermark received are late: dropped and counted
  (``lateEventsDropped``, in rows, as the engine's ``receivedCount`` counts them). When the
  watermark reaches a frame's end the frame is complete: its partial goes downstream as a
  ``(frame end, Partial)`` event, then the watermark. When the input
  turns idle (``IDLE_MESSAGE``: its source has sent nothing for ``idle_timeout_ms``), every frame
  held goes downstream at once, then the idle message: the combine leaves an idle input out of its
  watermark (as in Jet) and would close those frames' windows without their rows. The watermark
  stays where it was; rows that arrive later for a frame already sent make a new partial of the
  same frame end, which the combine adds while the frame's windows are open (later, their rows are
  late there, as any row after an idle period may be).
* **combine** (every member, distributed edge partitioned by key): each partial is split by its
  keys' partitions (:class:`PartialSplitter`, vectorised: :mod:`jetlet.batches.partitioning`,
  the row path's ``stable_hash(key) % partition_count``), so each key's partials meet on the
  processor that owns its partition, as keyed state does on the row path. A combine processor
  keeps every frame's partials; when the watermark reaches a window's end it combines the
  partials of the window's frames and emits its share of the window, ``(end,
  ColumnBatch({key: keys, name: aggregates}))``, the keys in ascending order; then it drops the
  frame that leaves the window. Windows with no rows are not emitted (as in Jet).
* **merge** (one processor in the cluster, all-to-one edge): the shares of a window from every
  combine processor (their keys are disjoint) become one ``(end, WindowResult(start, end,
  ColumnBatch({key: keys, name: aggregates})))``, keys ascending, when the watermark reaches the
  window's end (every combine processor sends its shares of a window before the watermark that
  closed it). When the stream ends, every window still open is emitted.

The aggregation of a set of rows is the same numpy routine everywhere (:func:`reduce_columns`):
integer keys in a range not much wider than the rows are aggregated densely (``bincount`` /
``ufunc.at`` over ``key - min``), other keys through ``np.unique``. ``count`` of rows becomes a
``sum`` of counts when partials are combined; ``sum`` of integers is exact (int64).

Snapshots: prepare saves its last watermark and its frames compacted to one partial each (a
restored processor takes the lowest watermark saved), under a
:class:`~jetlet.core.snapshot_keys.ProcessorKey`, so every processor of the vertex is given every
saved entry. Combine saves its frames split by partition, one entry per partition
(:class:`PartitionFrames`), restored to the processor that owns that partition then (the same
partition table as the edge's; the partition count must not change), and its next window end
under a ``ProcessorKey``: a restored processor takes the lowest (with exactly-once snapshots they
are equal: every combine processor saw the same watermarks before the barrier). Merge saves the
shares it holds and its next window end. A prepare processor keeps the frames that the
processor of its own index saved, to send when its watermark passes them, as before the restore
(its input resumes where that processor's stopped). The frames of a processor that no longer exists
(the parallelism shrank) are taken by the prepare processor of index 0, which sends them downstream
at once, before anything else (partials of any processor may be combined anywhere: they are summed
by frame end downstream). No processor may hold another's frames for its own watermark: that one
follows its own input, which need never pass them (its source may have emitted all it had before
the snapshot): such frames go downstream only when that input turns idle (above), after
``idle_timeout_ms``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from jetlet import datamodel
from jetlet._planner import transforms as tf
from jetlet.batches import partitioning as partitions
from jetlet.batches.column_batch import Column, ColumnBatch
from jetlet.core import inbox as inbox_mod
from jetlet.core import outbox as outbox_mod
from jetlet.core import processor as proc
from jetlet.core import snapshot_keys
from jetlet.core import watermark as wm

if TYPE_CHECKING:
    from jetlet._planner import planner as planner_mod
    from jetlet.pipeline import window as window_mod

Op = Literal["count", "sum", "min", "max"]
OPS: tuple[Op, ...] = ("count", "sum", "min", "max")
COMPACT_ROWS = 1 << 18
"""A prepare frame compacts its raw rows into one partial when it holds more than this many."""
_COMBINE_OP: dict[Op, Op] = {"count": "sum", "sum": "sum", "min": "min", "max": "max"}
_PREPARE_TAG = "__jetlet_batch_window_frames__"
_COMBINE_TAG = "__jetlet_batch_window_windows__"
_MERGE_TAG = "__jetlet_batch_window_shares__"


@dataclasses.dataclass(frozen=True, slots=True)
class Partial:
    """The aggregate of some rows: unique ``keys`` (ascending) and each key's ``values``."""

    keys: Column
    values: Column

    def __jetlet_rows__(self) -> int:
        """The rows the engine counts this item as: one per key."""
        return len(self.keys)


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionFrames:
    """The snapshot key of one partition's keys in a combine processor's frames."""

    partition: int

    @property
    def partition_key(self) -> int:
        """The partition itself: ``stable_hash(p) % count == p`` for ``0 <= p < count``."""
        return self.partition


def _take(partial: Partial, rows: Column | None) -> Partial:
    return partial if rows is None else Partial(partial.keys[rows], partial.values[rows])


@dataclasses.dataclass(frozen=True, slots=True)
class PartialSplitter:
    """The prepare -> combine edge's splitter: ``(frame end, Partial)`` by its keys' partitions."""

    def bind(self, target_of_partition: Sequence[int]) -> Callable[[Any], list[tuple[int, Any]]]:
        table = np.asarray(target_of_partition, dtype=np.intp)

        def split(item: tuple[int, Partial]) -> list[tuple[int, Any]]:
            end, partial = item
            return [
                (target, item if rows is None else (end, _take(partial, rows)))
                for target, rows in partitions.split_by_target(partial.keys, table)
            ]

        return split


def _ufunc_at(op: Op, size: int, index: Column, values: Column) -> Column:
    if op == "sum":
        acc = np.zeros(size, dtype=np.result_type(values.dtype, np.int64))
        np.add.at(acc, index, values)
        return acc
    ufunc = np.minimum if op == "min" else np.maximum
    dtype = values.dtype
    info = np.iinfo(dtype) if dtype.kind in "iu" else np.finfo(dtype)
    acc = np.full(size, info.max if op == "min" else info.min, dtype=dtype)
    ufunc.at(acc, index, values)
    return acc


def reduce_columns(op: Op, keys: Column, values: Column | None) -> Partial:
    """Aggregate rows ``(keys, values)`` by key: ``count`` (``values`` None), ``sum``, ``min`` or ``max``.

    >>> p = reduce_columns("count", np.array([7, 3, 7, 7]), None)
    >>> p.keys.tolist(), p.values.tolist()
    ([3, 7], [1, 3])
    >>> reduce_columns("max", np.array(["b", "a", "b"]), np.array([1, 5, 4])).values.tolist()
    [5, 4]
    """
    if not len(keys):
        return Partial(keys, np.zeros(0, dtype=np.int64) if values is None else values)
    if keys.dtype.kind in "iu":
        low = int(keys.min())
        span = int(keys.max()) - low + 1
        if span <= max(4 * len(keys), 1 << 16):
            index = keys - low
            counts = np.bincount(index, minlength=span)
            present = counts > 0
            acc = counts if values is None else _ufunc_at(op, span, index, values)
            return Partial((np.flatnonzero(present) + low).astype(keys.dtype), acc[present])
    unique, inverse = np.unique(keys, return_inverse=True)
    if values is None:
        return Partial(unique, np.bincount(inverse, minlength=len(unique)))
    return Partial(unique, _ufunc_at(op, len(unique), inverse, values))


def combine_partials(op: Op, partials: list[Partial]) -> Partial:
    """One partial from several of the aggregation ``op`` (counts are summed)."""
    if len(partials) == 1:
        return partials[0]
    keys = np.concatenate([p.keys for p in partials])
    values = np.concatenate([p.values for p in partials])
    return reduce_columns(_COMBINE_OP[op], keys, values)


def top_k(result: ColumnBatch, column: str, k: int = 1) -> list[tuple[Any, Any]]:
    """The ``k`` rows with the highest ``column``, best first (ties: the higher key), as ``(key, value)``.

    ``result`` is a window's result: its first column the key, ``column`` the aggregate.

    >>> top_k(ColumnBatch({"a": np.array([1, 2, 3]), "count": np.array([5, 9, 9])}), "count", 2)
    [(3, 9), (2, 9)]
    """
    keys = result[result.names[0]]
    values = result[column]
    if k == 1 and len(values):
        best = values.max()
        at = np.flatnonzero(values == best)[-1]  # keys ascend: the last of the best has the higher key
        return [(keys[at].item(), values[at].item())]
    order = np.lexsort((keys, values))[::-1][:k]
    return list(zip(keys[order].tolist(), values[order].tolist(), strict=True))


@dataclasses.dataclass(frozen=True, slots=True)
class Spec:
    """What both processors need: the windows, the key and value columns, the aggregation."""

    size: int
    slide: int
    key: str
    op: Op
    value: str | None
    name: str
    """The result's aggregate column."""

    def frame_end(self, timestamps: Column) -> Column:
        ends: Column = timestamps - timestamps % self.slide + self.slide
        return ends


def _drain(outbox: outbox_mod.Outbox, pending: list[Any]) -> bool:
    """Offer ``pending``'s items in order, removing each one taken; False when the outbox is full."""
    while pending:
        if not outbox.offer(pending[0]):
            return False
        pending.pop(0)
    return True


class _Frame:
    """One frame on the prepare side: raw ``(keys, values)`` chunks and compacted partials."""

    __slots__ = ("chunks", "partials", "rows")

    def __init__(self) -> None:
        self.chunks: list[tuple[Column, Column | None]] = []
        self.partials: list[Partial] = []
        self.rows = 0

    def add(self, keys: Column, values: Column | None, op: Op) -> None:
        self.chunks.append((keys, values))
        self.rows += len(keys)
        if self.rows > COMPACT_ROWS:
            self.partials = [self.partial(op)]
            self.chunks, self.rows = [], 0

    def partial(self, op: Op) -> Partial:
        parts = list(self.partials)
        if self.chunks:
            keys = np.concatenate([c[0] for c in self.chunks])
            raw = [c[1] for c in self.chunks]
            values: Column | None = None if raw[0] is None else np.concatenate(raw)  # type: ignore[arg-type]
            parts.append(reduce_columns(op, keys, values))
        return combine_partials(op, parts)


class AccumulateFramesP(proc.Processor):
    """The prepare vertex: rows into frames, a frame's partial out when the watermark passes its end."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.frames: dict[int, _Frame] = {}
        self.watermark = -(1 << 63)
        self.late = 0
        self._pending: list[Any] = []
        self._restored_watermarks: list[int] = []
        self._restored_foreign: dict[int, list[Partial]] = {}
        """Frames of processors that no longer exist (restored into index 0): sent before anything else."""

    def process(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        spec = self.spec
        for _timestamp, batch in inbox.take_all():
            times = batch.timestamps()
            keys = batch[spec.key]
            values = None if spec.value is None else batch[spec.value]
            if not len(times):
                continue
            first = int(times.min())
            if first < self.watermark:
                on_time = times >= self.watermark
                self.late += len(times) - int(on_time.sum())
                times, keys = times[on_time], keys[on_time]
                values = None if values is None else values[on_time]
                if not len(times):
                    continue
                first = int(times.min())
            last = int(times.max())
            if first - first % spec.slide == last - last % spec.slide:
                self._frame(first - first % spec.slide + spec.slide).add(keys, values, spec.op)
                continue
            ends = spec.frame_end(times)
            for end in np.unique(ends).tolist():
                mask = ends == end
                self._frame(end).add(keys[mask], None if values is None else values[mask], spec.op)

    def _frame(self, end: int) -> _Frame:
        frame = self.frames.get(end)
        if frame is None:
            frame = self.frames[end] = _Frame()
        return frame

    def try_process_watermark(self, watermark: wm.Watermark) -> bool:
        if watermark.is_idle_message():
            return self.try_process_idle()
        if not self._pending:
            self.watermark = max(self.watermark, watermark.timestamp)
            self._pending = [*self._flush(self.watermark), watermark]
        return _drain(self.outbox, self._pending)

    def try_process_idle(self) -> bool:
        """Every frame held goes downstream before ``IDLE_MESSAGE``: see the module doc."""
        if not self._pending:
            self._pending = [*self._flush(1 << 62), wm.IDLE_MESSAGE]
        return _drain(self.outbox, self._pending)

    def _flush(self, up_to: int) -> list[tuple[int, Partial]]:
        out = []
        for end in sorted(e for e in self.frames if e <= up_to):
            out.append((end, self.frames.pop(end).partial(self.spec.op)))
        return out

    def complete(self) -> bool:
        if not self._pending:
            self._pending = list(self._flush(1 << 62))
        return _drain(self.outbox, self._pending)

    def save_to_snapshot(self) -> bool:
        saved = {end: frame.partial(self.spec.op) for end, frame in self.frames.items()}
        key = snapshot_keys.ProcessorKey(_PREPARE_TAG, self.context.global_processor_index)
        return self.outbox.offer_to_snapshot(key, (self.watermark, saved))

    def restore_from_snapshot(self, inbox: inbox_mod.Inbox) -> None:
        index = self.context.global_processor_index
        for key, (watermark, saved) in inbox.take_all():
            self._restored_watermarks.append(watermark)
            if key.processor_index == index:
                for end, partial in saved.items():
                    self._frame(end).partials.append(partial)
            elif index == 0 and key.processor_index >= self.context.total_parallelism:
                for end, partial in saved.items():
                    self._restored_foreign.setdefault(end, []).append(partial)

    def finish_snapshot_restore(self) -> bool:
        if self._restored_watermarks:  # the lowest: never drop a row another processor accepted
            self.watermark = min(self._restored_watermarks)
            self._restored_watermarks = []
        if self._restored_foreign:  # not held for this processor's watermark: see the module doc
            op, foreign = self.spec.op, self._restored_foreign
            self._pending = [(end, combine_partials(op, foreign[end])) for end in sorted(foreign)]
            self._restored_foreign = {}
        return _drain(self.outbox, self._pending)

    def metrics(self) -> dict[str, int]:
        return {"lateEventsDropped": self.late}


class CombineToWindowsP(proc.Processor):
    """The combine vertex: its keys' frame partials into windows, its share of each out at the watermark."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.frames: dict[int, list[Partial]] = {}
        self.next_end = -(1 << 63)
        self._pending: list[Any] = []
        self._saving: list[tuple[Any, Any]] | None = None
        self._restored_ends: list[int] = []

    def process(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        for end, partial in inbox.take_all():
            self.frames.setdefault(end, []).append(partial)

    def try_process_watermark(self, watermark: wm.Watermark) -> bool:
        if not self._pending:
            self._pending = [*self._windows(watermark.timestamp), watermark]
        return _drain(self.outbox, self._pending)

    def complete(self) -> bool:
        if not self._pending:
            last = max(self.frames, default=-(1 << 63))
            self._pending = list(self._windows(last + self.spec.size - self.spec.slide))
        return _drain(self.outbox, self._pending)

    def _windows(self, up_to: int) -> list[tuple[int, ColumnBatch]]:
        spec, frames, out = self.spec, self.frames, []
        for stale in [e for e in frames if e + spec.size - spec.slide < self.next_end]:
            del frames[stale]  # arrived after every window it belongs to was emitted
        while frames:
            end = max(self.next_end, min(frames))
            if end > up_to:
                break
            window = [
                p for e in range(end - spec.size + spec.slide, end + 1, spec.slide) for p in frames.get(e, ())
            ]
            if window:
                merged = combine_partials(spec.op, window)
                out.append(
                    (end, ColumnBatch.unchecked({spec.key: merged.keys, spec.name: merged.values}, None))
                )
            frames.pop(end - spec.size + spec.slide, None)
            self.next_end = end + spec.slide
        # the next window is after the watermark even without frames here: every combine processor
        # then saves the same next window end (they see the same watermarks), see the module doc
        self.next_end = max(self.next_end, up_to - up_to % spec.slide + spec.slide)
        return out

    def save_to_snapshot(self) -> bool:
        if self._saving is None:
            self._saving = self._snapshot_entries()
        saving = self._saving
        while saving:
            key, value = saving[-1]
            if not self.outbox.offer_to_snapshot(key, value):
                return False
            saving.pop()
        self._saving = None
        return True

    def _snapshot_entries(self) -> list[Any]:
        op, count = self.spec.op, self.context.partition_count
        by_partition: dict[int, dict[int, Partial]] = {}
        for end, parts in self.frames.items():
            partial = combine_partials(op, parts)
            of_key = partitions.key_partitions(partial.keys, count)
            order = np.argsort(of_key, kind="stable")
            cuts = np.flatnonzero(np.diff(of_key[order])) + 1
            for rows in np.split(order, cuts) if len(order) else []:
                partition = int(of_key[rows[0]])
                by_partition.setdefault(partition, {})[end] = _take(partial, rows)
        entries: list[tuple[Any, Any]] = [(PartitionFrames(p), frames) for p, frames in by_partition.items()]
        entries.append(
            (snapshot_keys.ProcessorKey(_COMBINE_TAG, self.context.global_processor_index), self.next_end)
        )
        return entries

    def restore_from_snapshot(self, inbox: inbox_mod.Inbox) -> None:
        for key, value in inbox.take_all():
            if isinstance(key, snapshot_keys.ProcessorKey):
                self._restored_ends.append(value)
                continue
            for end, partial in value.items():
                self.frames.setdefault(end, []).append(partial)

    def finish_snapshot_restore(self) -> bool:
        if self._restored_ends:
            self.next_end = min(self._restored_ends)
            self._restored_ends = []
        return True


class MergeWindowsP(proc.Processor):
    """The merge vertex: every combine processor's share of a window into one window result."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.shares: dict[int, list[ColumnBatch]] = {}
        self.next_end = -(1 << 63)
        self._pending: list[Any] = []

    def process(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        for end, share in inbox.take_all():
            if end >= self.next_end:  # else: a window already emitted, sent again after a restore
                self.shares.setdefault(end, []).append(share)

    def try_process_watermark(self, watermark: wm.Watermark) -> bool:
        if not self._pending:
            self._pending = [*self._windows(watermark.timestamp), watermark]
        return _drain(self.outbox, self._pending)

    def complete(self) -> bool:
        if not self._pending:
            self._pending = self._windows(max(self.shares, default=-(1 << 63)))
        return _drain(self.outbox, self._pending)

    def _windows(self, up_to: int) -> list[tuple[int, Any]]:
        spec, out = self.spec, []
        for end in sorted(e for e in self.shares if e <= up_to):
            shares = self.shares.pop(end)
            result = shares[0] if len(shares) == 1 else _by_key(spec.key, ColumnBatch.concat(shares))
            out.append((end, datamodel.WindowResult(end - spec.size, end, result)))
            self.next_end = end + spec.slide
        return out

    def save_to_snapshot(self) -> bool:
        key = snapshot_keys.ProcessorKey(_MERGE_TAG, self.context.global_processor_index)
        return self.outbox.offer_to_snapshot(key, (self.next_end, self.shares))

    def restore_from_snapshot(self, inbox: inbox_mod.Inbox) -> None:
        for _key, (next_end, shares) in inbox.take_all():
            self.next_end = max(self.next_end, next_end)
            for end, listed in shares.items():
                self.shares.setdefault(end, []).extend(listed)


def _by_key(key: str, batch: ColumnBatch) -> ColumnBatch:
    order = np.argsort(batch[key], kind="stable")
    return ColumnBatch.unchecked({name: values[order] for name, values in batch.columns.items()}, None)


class BatchWindowTransform(tf.Transform):
    """The planner's node of ``aggregate_batch_windows``: prepare (local), combine (by key), merge (one)."""

    def __init__(self, upstream: tf.Transform, window: window_mod.WindowDefinition, spec: Spec) -> None:
        super().__init__("batch-window", [upstream])
        self.takes_batches = True
        self.window = window
        """Read by the planner for the watermark stride (a window closes on a slide boundary)."""
        self.spec = spec

    def add_to_dag(self, planner: planner_mod.Planner) -> None:
        spec = self.spec
        prepare = planner.add_vertex(
            self, f"{self.name}-prepare", self.local_parallelism, _factory(AccumulateFramesP, spec)
        )
        planner.add_edges(self, prepare)
        combine = planner.add_vertex(
            self, f"{self.name}-combine", self.local_parallelism, _factory(CombineToWindowsP, spec)
        )
        edge = planner.edge_from_vertex(prepare, combine)
        planner.dag.edge(edge.partitioned_split(PartialSplitter()).distributed().batches())
        merge = planner.add_vertex(
            self,
            self.name,
            1,
            proc.ProcessorMetaSupplier.force_total_parallelism_one(_factory(MergeWindowsP, spec)),
        )
        planner.dag.edge(planner.edge_from_vertex(combine, merge).all_to_one().distributed().batches())


@dataclasses.dataclass(frozen=True, slots=True)
class _factory:  # a picklable ``lambda: cls(spec)``
    cls: Callable[[Spec], proc.Processor]
    spec: Spec

    def __call__(self) -> proc.Processor:
        return self.cls(self.spec)


def window_spec(
    window: window_mod.WindowDefinition, key: str, op: str, value: str | None, name: str | None
) -> Spec:
    """Check the arguments of ``aggregate_batch_windows`` and make the processors' :class:`Spec`."""
    if window.kind != "sliding":
        raise ValueError(f"batch windows are tumbling or sliding, not {window.kind}")
    if window.early_results_period_millis:
        raise ValueError("batch windows emit no early results")
    if op not in OPS:
        raise ValueError(f"op must be one of {OPS}, got {op!r}")
    if (op == "count") != (value is None):
        raise ValueError("count takes no value column; sum, min and max need one")
    if not isinstance(key, str):
        raise TypeError(f"key must be a column name, got {key!r}")
    return Spec(window.size, window.slide, key, op, value, name or op)
