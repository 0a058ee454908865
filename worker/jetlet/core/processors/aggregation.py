"""Aggregation processors: one-stage and the two stages of distributed aggregation.

Two-stage aggregation, as Jet plans it: every member first *accumulates* its
local items per key (``accumulate_by_key_p`` behind a local partitioned
edge), then ships one partial accumulator per key over a distributed
partitioned edge to the key's owner, which *combines* them
(``combine_by_key_p``). The network then carries one item per key per member
instead of every item.

Keyed processors emit ``(key, value)`` tuples by default; pass
``map_to_output(key, value)`` to shape the result. They save their
accumulators to snapshots keyed by the grouping key, and a restore combines
accumulators that meet under the same key (which is what happens when state
from several processors is restored onto fewer).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

from jetlet.aggregate import operation as agg
from jetlet.core import inbox as inbox_mod
from jetlet.core import processor, snapshot_writer
from jetlet.core import traverser as trav

KeyFn = Callable[[Any], Hashable]
MapToOutput = Callable[[Any, Any], Any]

_MISSING = object()


def _entry(key: Any, value: Any) -> tuple[Any, Any]:
    return (key, value)


class _KeyedStateP(processor.Processor):
    """Holds ``{key: accumulator}``; emits it on completion; snapshots it."""

    def __init__(self, op: agg.AggregateOperation[Any, Any]) -> None:
        self._op = op
        self._accs: dict[Any, Any] = {}
        self._emitting: trav.Traverser[Any] | None = None
        self._snapshot = snapshot_writer.SnapshotWriter()

    def _result_traverser(self) -> trav.Traverser[Any]:
        raise TypeError(f"{type(self).__qualname__} must define its results")

    def complete(self) -> bool:
        if self._emitting is None:
            self._emitting = self._result_traverser()
        return _emit(self.outbox, self._emitting)

    def save_to_snapshot(self) -> bool:
        return self._snapshot.write(self.outbox, self._entries_to_save)

    def _entries_to_save(self) -> list[tuple[Any, Any]]:
        # copies taken now, at the barrier: the member pickles them off this thread
        return snapshot_writer.copies(self._accs.items(), self._op.copy_fn, self.context.vertex_name)

    def restore_from_snapshot(self, inbox: inbox_mod.Inbox) -> None:
        accs = self._accs
        combine = self._op.combine_fn
        for key, acc in inbox.take_all():
            if key in accs:
                if combine is None:
                    raise ValueError(f"snapshot has key {key!r} twice and the operation cannot combine")
                accs[key] = combine(accs[key], acc)
            else:
                accs[key] = acc


def _emit(outbox: Any, traverser: trav.Traverser[Any]) -> bool:
    """Emit from ``traverser`` in batches until it is exhausted (True) or the outbox is full."""
    while True:
        room = outbox.room()
        if room <= 0:
            return False
        batch = []
        for _ in range(room):
            item = traverser.next()
            if item is None:
                break
            batch.append(item)
        if batch:
            outbox.offer_batch(batch)
        if len(batch) < room:
            return True


class _AccumulateByKeyP(_KeyedStateP):
    def __init__(
        self,
        key_fns: Sequence[KeyFn],
        op: agg.AggregateOperation[Any, Any],
        finish: Callable[[Any, Any], Any] | None,
    ) -> None:
        super().__init__(op)
        self._key_fns = list(key_fns)
        self._accumulate = [op.accumulate_fn(i) for i in range(len(key_fns))]
        self._finish = finish

    def process(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        key_fn = self._key_fns[ordinal]
        accumulate = self._accumulate[ordinal]
        create = self._op.create_fn
        accs = self._accs
        get = accs.get
        missing = _MISSING
        for item in inbox.take_all():
            key = key_fn(item)
            acc = get(key, missing)
            accs[key] = accumulate(create() if acc is missing else acc, item)

    def _result_traverser(self) -> trav.Traverser[Any]:
        finish = self._finish
        if finish is None:
            return trav.traverse_iterable(list(self._accs.items()))
        op_finish = self._op.finish_fn
        return trav.traverse_iterable([finish(k, op_finish(a)) for k, a in self._accs.items()])


def accumulate_by_key_p(
    key_fns: KeyFn | Sequence[KeyFn], op: agg.AggregateOperation[Any, Any]
) -> processor.ProcessorFactory:
    """First stage: accumulate per key; on completion emit ``(key, accumulator)``.

    ``key_fns`` is one key function, or one per input for co-aggregation.
    """
    fns = [key_fns] if callable(key_fns) else list(key_fns)
    _check_arity(op, len(fns))
    return lambda: _AccumulateByKeyP(fns, op, None)


def aggregate_by_key_p(
    key_fns: KeyFn | Sequence[KeyFn],
    op: agg.AggregateOperation[Any, Any],
    map_to_output: MapToOutput = _entry,
) -> processor.ProcessorFactory:
    """Single stage: accumulate per key; on completion emit ``map_to_output(key, result)``."""
    fns = [key_fns] if callable(key_fns) else list(key_fns)
    _check_arity(op, len(fns))
    return lambda: _AccumulateByKeyP(fns, op, map_to_output)


class _CombineByKeyP(_KeyedStateP):
    def __init__(self, op: agg.AggregateOperation[Any, Any], map_to_output: MapToOutput) -> None:
        super().__init__(op)
        self._combine = op.require_combine()
        self._map_to_output = map_to_output

    def process(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        accs = self._accs
        get = accs.get
        combine = self._combine
        missing = _MISSING
        for key, partial in inbox.take_all():
            acc = get(key, missing)
            accs[key] = partial if acc is missing else combine(acc, partial)

    def _result_traverser(self) -> trav.Traverser[Any]:
        finish, shape = self._op.finish_fn, self._map_to_output
        return trav.traverse_iterable([shape(k, finish(a)) for k, a in self._accs.items()])


def combine_by_key_p(
    op: agg.AggregateOperation[Any, Any], map_to_output: MapToOutput = _entry
) -> processor.ProcessorFactory:
    """Second stage: combine ``(key, accumulator)`` partials; emit ``map_to_output(key, result)``."""
    op.require_combine()
    return lambda: _CombineByKeyP(op, map_to_output)


_GLOBAL_KEY = "__jetlet_global__"


class _AccumulateP(processor.Processor):
    """Ungrouped: one accumulator for every item of every input."""

    def __init__(self, op: agg.AggregateOperation[Any, Any], stage: str) -> None:
        self._op = op
        self._stage = stage  # "accumulate", "combine" or "aggregate"
        self._acc = op.create_fn()
        self._restored = False
        self._done = False

    def process(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        acc = self._acc
        if self._stage == "combine":
            combine = self._op.require_combine()
            for partial in inbox.take_all():
                acc = combine(acc, partial)
        else:
            acc = self._op.fold_fn(ordinal)(acc, inbox.take_all())
        self._acc = acc

    def complete(self) -> bool:
        if self._done:
            return True
        result = self._acc if self._stage == "accumulate" else self._op.finish_fn(self._acc)
        if result is None or self.outbox.offer(result):
            self._done = True
        return self._done

    def save_to_snapshot(self) -> bool:
        return self.outbox.offer_to_snapshot(_GLOBAL_KEY, self._acc)

    def restore_from_snapshot(self, inbox: inbox_mod.Inbox) -> None:
        # One saved accumulator is put back as it is; several (from processors
        # merged by a rescale) must be combined.
        for _key, acc in inbox.take_all():
            if self._restored:
                self._acc = self._op.require_combine()(self._acc, acc)
            else:
                self._acc = acc
                self._restored = True


def accumulate_p(op: agg.AggregateOperation[Any, Any]) -> processor.ProcessorFactory:
    """First stage, ungrouped: emits one partial accumulator on completion."""
    return lambda: _AccumulateP(op, "accumulate")


def combine_p(op: agg.AggregateOperation[Any, Any]) -> processor.ProcessorFactory:
    """Second stage, ungrouped: combines partials; emits the finished result."""
    op.require_combine()
    return lambda: _AccumulateP(op, "combine")


def aggregate_p(op: agg.AggregateOperation[Any, Any]) -> processor.ProcessorFactory:
    """Single stage, ungrouped: accumulates everything; emits the finished result."""
    return lambda: _AccumulateP(op, "aggregate")


def _check_arity(op: agg.AggregateOperation[Any, Any], inputs: int) -> None:
    for ordinal in range(inputs):
        op.accumulate_fn(ordinal)
