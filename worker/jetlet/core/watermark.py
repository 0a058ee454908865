"""Watermarks: the event-time clock that flows through a DAG with the items.

A :class:`Watermark` with timestamp ``t`` promises that no more items with an
event time below ``t`` will follow on that stream (items that still do are
*late*). A processor with several inputs sees the *coalesced* watermark: the
minimum over its input queues, ignoring queues that declared themselves idle
with :data:`IDLE_MESSAGE` and queues that are done.
"""

from __future__ import annotations

from dataclasses import dataclass

_IDLE_TIMESTAMP = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class Watermark:
    """An event-time watermark, in the same unit as the items' timestamps."""

    timestamp: int

    def is_idle_message(self) -> bool:
        """True for :data:`IDLE_MESSAGE`, the "this input is idle" marker."""
        return self.timestamp == _IDLE_TIMESTAMP


IDLE_MESSAGE = Watermark(_IDLE_TIMESTAMP)
"""Sent by a source that has nothing to emit, so that downstream processors
exclude its stream when coalescing watermarks (Jet's ``IDLE_MESSAGE``)."""
