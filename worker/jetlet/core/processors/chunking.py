"""How many inputs a batch step takes at once: sized to the outbox's room by the step's selectivity.

Theory of operation
-------------------
A batch processor (the chain of fused maps and filters, the hash join's
probe, a stateful map) turns a chunk of its inbox into outputs with one call
and emits them with one ``offer_batch``. The chunk must not be so large that
its outputs overflow the outbox by much (what does not fit is held back,
and with it the chunk), nor so small that the per-call cost dominates.

Sizing the chunk to the outbox's room alone assumes one output per input.
That is wrong both ways: a filter that keeps one event in fifty (NEXMark
Q8's people among all events) given a room of 5 takes 5 events, emits
nothing, and goes round again: once the downstream queue backs up and the
bucket is nearly full, such a processor spends microseconds per item on
calls of a few items each. Measured on Q8 over two members, its first
stage cost 2.1 µs per event on the member whose downstream backed up
against 0.09 on the other, and the job ran no faster than on one member.

So a :class:`ChunkSizer` remembers the outputs per input of the step's last
chunk and takes ``room / that ratio`` inputs: ``room`` for a one-to-one map,
fewer for a flat-map that expands, and for a step that emitted nothing the
whole inbox, up to :data:`MAX_INPUTS_PER_ROOM` times the room. The estimate
is only an estimate; callers hold the outputs that did not fit as before.
"""

from __future__ import annotations

MAX_INPUTS_PER_ROOM = 256
"""A chunk is at most this many times the outbox's room: a step that emitted nothing last time may
expand the next chunk (a flat-map, a join's many matches), and what does not fit is held."""


class ChunkSizer:
    """How many inputs to take for the outbox's room, from the last chunk's outputs per input."""

    __slots__ = ("_inputs", "_outputs")

    def __init__(self) -> None:
        self._inputs = 1
        self._outputs = 1

    def inputs_for(self, room: int, available: int) -> int:
        """How many of ``available`` inputs (> 0) to take while the outbox has ``room`` (> 0): at
        most :data:`MAX_INPUTS_PER_ROOM` times the room, should the next chunk expand after all."""
        cap = min(available, room * MAX_INPUTS_PER_ROOM)
        if self._outputs * cap <= room * self._inputs:
            return cap
        return max(1, room * self._inputs // self._outputs)

    def observed(self, inputs: int, outputs: int) -> None:
        """The last chunk: ``inputs`` items (> 0) gave ``outputs``."""
        self._inputs = inputs
        self._outputs = outputs
