"""The chain processor: one or more stateless steps applied to whole batches.

A *batch step* is a function ``list -> list`` (a map, a filter, a flat-map,
a peek, or several of them composed by the planner's fusion pass). The
processor takes as many items from the inbox as the outbox has room for
the outputs of (:mod:`~jetlet.core.processors.chunking`: a filter that keeps
one item in fifty takes fifty times the room), runs the step once over that
chunk and emits the result with one ``offer_batch``.

The chunk is copied out of the inbox (in C) and its items stay there until
the step's outputs are all emitted: a step may emit more items than it was
given (flat-map), and the outputs that do not fit stay pending in the
processor. That keeps the engine's invariant that a processor holds nothing
that its inbox does not show: an empty inbox always means "everything taken
in is out", which is the moment snapshots are taken.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from jetlet.core import inbox as inbox_mod
from jetlet.core import processor
from jetlet.core.processors import chunking

BatchStep = Callable[[list[Any]], list[Any]]


class ChainP(processor.Processor):
    """Runs a batch step over chunks of the inbox sized to the outbox's room for their outputs."""

    def __init__(self, step: BatchStep, cooperative: bool = True) -> None:
        self._step = step
        self._cooperative = cooperative
        self._pending: list[Any] | None = None
        self._sizer = chunking.ChunkSizer()
        self._chunk_size = 0
        """The inbox items whose outputs are pending (they leave the inbox once those are out)."""

    def is_cooperative(self) -> bool:
        return self._cooperative

    def process(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        outbox = self.outbox
        pending = self._pending
        if pending is not None:
            taken = outbox.offer_batch(pending)
            if taken < len(pending):
                self._pending = pending[taken:]
                return
            self._pending = None
            inbox.discard(self._chunk_size)  # the chunk, held back until its outputs were out
        step = self._step
        sizer = self._sizer
        while inbox:
            room = outbox.room()
            if room <= 0:
                return
            available = len(inbox)
            count = sizer.inputs_for(room, available)
            out = step(list(inbox) if count == available else list(itertools.islice(inbox, count)))
            sizer.observed(count, len(out))
            if out:
                taken = outbox.offer_batch(out)
                if taken < len(out):
                    self._pending = out[taken:]
                    self._chunk_size = count
                    return
            inbox.discard(count)


def chain_p(step: BatchStep, cooperative: bool = True) -> processor.ProcessorFactory:
    """A processor factory running ``step`` over batches (see the module doc)."""
    return lambda: ChainP(step, cooperative)


def compose(steps: list[BatchStep]) -> BatchStep:
    """One batch step that runs ``steps`` in order, stopping early on an empty batch."""
    if len(steps) == 1:
        return steps[0]

    def composed(batch: list[Any]) -> list[Any]:
        for step in steps:
            batch = step(batch)
            if not batch:
                return batch
        return batch

    return composed
