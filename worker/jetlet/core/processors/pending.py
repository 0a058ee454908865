"""Outputs a processor made that its outbox had no room for, and a watermark's own outputs.

Theory of operation
-------------------
A processor that makes many outputs at once (a chunk's results, the windows or states a watermark
closes) offers them with one ``offer_batch``; what does not fit waits in :class:`PendingOutput`
and goes first on the processor's next call, before anything new, so the order is kept.

A watermark that closes state is the delicate case: the engine offers the same watermark again
until the processor accepts it, and the state must be closed once, not on every offer, and its
outputs must all be out before the watermark, which promises that nothing earlier follows.
:meth:`PendingOutput.watermark` does that: it flushes what waits, makes the watermark's outputs
once (it remembers the watermark object it made them for), flushes them, and offers the
watermark itself last.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jetlet.core import outbox as outbox_mod
from jetlet.core import watermark as wm


class PendingOutput:
    """Outputs waiting for room in the outbox; see the module doc."""

    __slots__ = ("_watermark", "items")

    def __init__(self) -> None:
        self.items: list[Any] = []
        """What waits, in order (a processor may set it to a new list of outputs when it is empty)."""
        self._watermark: wm.Watermark | None = None

    def flush(self, outbox: outbox_mod.Outbox) -> bool:
        """Offer what waits; True when nothing does any more."""
        items = self.items
        if not items:
            return True
        taken = outbox.offer_batch(items)
        self.items = items[taken:] if taken < len(items) else []
        return not self.items

    def watermark(
        self,
        outbox: outbox_mod.Outbox,
        watermark: wm.Watermark,
        outputs_of: Callable[[int], list[Any]] | None,
    ) -> bool:
        """Offer what waits, then ``outputs_of(watermark.timestamp)`` (called once per watermark;
        None: a processor with nothing to close), then the watermark; True when all are out."""
        if not self.flush(outbox):
            return False
        if outputs_of is not None and self._watermark is not watermark:
            self._watermark = watermark
            self.items = outputs_of(watermark.timestamp)
            if not self.flush(outbox):
                return False
        if not outbox.offer(watermark):
            return False
        self._watermark = None
        return True
