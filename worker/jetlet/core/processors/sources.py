"""Source processors: where items enter a DAG.

A source has no inputs: the engine calls ``complete()`` until it returns
True, and the source emits a batch per call. Parallel sources split the work
by their global processor index: processor ``i`` of ``n`` takes items
``i, i + n, i + 2n, ...``, so the whole cluster emits each item exactly once.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from jetlet.core import processor

BATCH = 1024


class _IteratorSourceP(processor.Processor):
    """Emits the items of an iterator in outbox-sized batches."""

    def __init__(
        self, make_iterator: Callable[[processor.ProcessorContext], Iterable[Any]], cooperative: bool
    ):
        self._make_iterator = make_iterator
        self._cooperative = cooperative
        self._iterator: Iterator[Any] | None = None
        self._pending: list[Any] = []
        self.emitted = 0

    def is_cooperative(self) -> bool:
        return self._cooperative

    def init(self, outbox: Any, context: processor.ProcessorContext) -> None:
        super().init(outbox, context)
        self._iterator = iter(self._make_iterator(context))

    def complete(self) -> bool:
        outbox = self.outbox
        if self._pending:
            taken = outbox.offer_batch(self._pending)
            self.emitted += taken
            self._pending = self._pending[taken:]
            if self._pending:
                return False
        assert self._iterator is not None
        room = outbox.room()
        if room <= 0:
            return False
        batch = list(itertools.islice(self._iterator, room))
        if not batch:
            return True
        if None in batch:
            raise TypeError("a source yielded None, which jetlet reserves for 'no item'")
        taken = outbox.offer_batch(batch)
        self.emitted += taken
        if taken < len(batch):
            self._pending = batch[taken:]
        return False


def source_from_iterable(items: Iterable[Any]) -> processor.ProcessorMetaSupplier:
    """Emits the items of ``items``, split among the processors by index.

    With one processor per member (the preferred parallelism), processor ``i``
    of ``n`` takes every ``n``-th item starting at ``i`` of a re-iterable
    collection (a list, a range). A one-shot iterator (a generator) cannot be
    shared that way, so processor 0 emits all of it and the others nothing.
    """
    one_shot = iter(items) is items

    def make(context: processor.ProcessorContext) -> Iterable[Any]:
        n = context.total_parallelism
        index = context.global_processor_index
        if one_shot:
            return items if index == 0 else ()
        return itertools.islice(items, index, None, n) if n > 1 else items

    return processor.ProcessorMetaSupplier.of(
        lambda: _IteratorSourceP(make, True), preferred_local_parallelism=1
    )


def source_from_generator(
    generate: Callable[[processor.ProcessorContext], Iterable[Any]], cooperative: bool = True
) -> processor.ProcessorMetaSupplier:
    """Emits what ``generate(context)`` yields; each processor calls it once.

    Use ``context.global_processor_index`` and ``context.total_parallelism``
    to make each processor produce its own slice. Pass ``cooperative=False``
    if producing an item may block (reading a socket, a slow file).
    """
    return processor.ProcessorMetaSupplier.of(
        lambda: _IteratorSourceP(generate, cooperative), preferred_local_parallelism=1
    )


class _RateSourceP(processor.Processor):
    """Emits ``item_fn(sequence)`` at a fixed total rate, for ``count`` items or forever."""

    def __init__(self, rate: float, item_fn: Callable[[int], Any], count: int | None) -> None:
        self._rate = rate
        self._item_fn = item_fn
        self._count = count
        self._next_seq = 0
        self._stride = 1
        self._start = 0.0

    def init(self, outbox: Any, context: processor.ProcessorContext) -> None:
        super().init(outbox, context)
        self._next_seq = context.global_processor_index
        self._stride = context.total_parallelism
        self._start = time.monotonic()

    def complete(self) -> bool:
        # Sequence s is due at start + s / rate (the total rate across processors).
        due_until = int((time.monotonic() - self._start) * self._rate)
        if self._count is not None:
            due_until = min(due_until, self._count - 1)
        outbox = self.outbox
        room = outbox.room()
        seq, stride, item_fn = self._next_seq, self._stride, self._item_fn
        batch: list[Any] = []
        while seq <= due_until and len(batch) < room:
            batch.append(item_fn(seq))
            seq += stride
        if batch:
            outbox.offer_batch(batch)
        self._next_seq = seq
        return self._count is not None and seq >= self._count


def source_rate(
    rate: float, item_fn: Callable[[int], Any] = lambda seq: seq, count: int | None = None
) -> processor.ProcessorMetaSupplier:
    """Emits ``item_fn(0)``, ``item_fn(1)``, ... at ``rate`` items per second in total.

    Stops after ``count`` items, or never when ``count`` is None.
    """
    if rate <= 0:
        raise ValueError(f"source_rate: rate must be > 0 items per second, got {rate!r}")
    if count is not None and count < 0:
        raise ValueError(f"source_rate: count must be >= 0 or None, got {count!r}")
    return processor.ProcessorMetaSupplier.of(
        lambda: _RateSourceP(rate, item_fn, count), preferred_local_parallelism=1
    )
