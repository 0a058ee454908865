"""The chain processor: one or more stateless steps applied to whole batches.

A *batch step* is a function ``list -> list`` (a map, a filter, a flat-map,
a peek, or several of them composed by the planner's fusion pass). The
processor takes as many items from the inbox as the outbox has room for,
runs the step once over that chunk and emits the result with one
``offer_batch``.

A step may emit more items than it was given (flat-map). The outputs that
do not fit stay pending in the processor; to keep the engine's invariant
that a processor holds nothing that its inbox does not show, the chunk's last
input item stays at the head of the inbox until the pending outputs are
all emitted. So an empty inbox always means "everything taken in is out",
which is the moment snapshots are taken.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jetlet.core import inbox as inbox_mod
from jetlet.core import processor

BatchStep = Callable[[list[Any]], list[Any]]


class ChainP(processor.Processor):
    """Runs a batch step over chunks of the inbox sized to the outbox's room."""

    def __init__(self, step: BatchStep, cooperative: bool = True) -> None:
        self._step = step
        self._cooperative = cooperative
        self._pending: list[Any] | None = None

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
            inbox.remove()  # the chunk's last item, held back until its outputs were out
        step = self._step
        while inbox:
            room = outbox.room()
            if room <= 0:
                return
            chunk: list[Any] = []
            inbox.drain_to(chunk, min(room, len(inbox)) - 1)
            chunk.append(inbox.peek())
            out = step(chunk)
            if out:
                taken = outbox.offer_batch(out)
                if taken < len(out):
                    self._pending = out[taken:]
                    return
            inbox.remove()


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
