"""Sorting: collect every item, emit them in order when the input is done (Jet's ``SortP``).

Theory of operation. ``process`` only appends to a list. The first
``complete()`` call sorts it (Python's sort is stable: items with equal keys
keep their arrival order) and every call emits the next chunk, as much as the
outbox takes, so a full outbox only pauses the emission.

A total order needs one processor to see every item: the planner runs
``sort_p`` with total parallelism one (``ProcessorMetaSupplier.
force_total_parallelism_one``) behind an all-to-one distributed edge.

Snapshots save the items not yet emitted in chunks of
:data:`SNAPSHOT_CHUNK` under :class:`SortChunkKey` entries, broadcast keys
(:mod:`jetlet.core.snapshot_keys`): a restore gives every processor every
chunk, and processor ``j`` of ``m`` keeps the chunks that processor ``k``
saved where ``k % m == j`` (with total parallelism one, the only processor
keeps them all), so every item is restored exactly once whatever the new
parallelism. It concatenates its chunks in their saved order (by processor,
then chunk), so arrival order (and with it stability) survives.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from jetlet.core import inbox as inbox_mod
from jetlet.core import processor, snapshot_keys

SNAPSHOT_CHUNK = 1024
"""How many items one snapshot entry holds."""


@dataclasses.dataclass(frozen=True, order=True)
class SortChunkKey(snapshot_keys.BroadcastKey):
    """Snapshot key of one chunk of collected items (restored to every processor, which picks its own)."""

    processor_index: int
    chunk: int


class SortP(processor.Processor):
    """Collects everything, then emits it sorted by ``key_fn`` (the items themselves by default)."""

    def __init__(self, key_fn: Callable[[Any], Any] | None, reverse: bool) -> None:
        self._key_fn = key_fn
        self._reverse = reverse
        self._items: list[Any] = []
        self._sorted = False
        self._position = 0
        self._restored: dict[SortChunkKey, list[Any]] = {}
        self._unsaved: list[tuple[SortChunkKey, list[Any]]] = []
        self._saving = False

    def process(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        inbox.drain_to(self._items)

    def complete(self) -> bool:
        items = self._items
        if not self._sorted:
            items.sort(key=self._key_fn, reverse=self._reverse)
            self._sorted = True
        outbox = self.outbox
        while self._position < len(items):
            room = outbox.room()
            if room <= 0:
                return False
            end = min(len(items), self._position + room)
            self._position += outbox.offer_batch(items[self._position : end])
        return True

    def save_to_snapshot(self) -> bool:
        if not self._saving:
            index = self.context.global_processor_index
            rest = self._items[self._position :]
            self._unsaved = [
                (SortChunkKey(index, n), rest[start : start + SNAPSHOT_CHUNK])
                for n, start in enumerate(range(0, len(rest), SNAPSHOT_CHUNK))
            ]
            self._unsaved.reverse()
            self._saving = True
        while self._unsaved:
            key, chunk = self._unsaved[-1]
            if not self.outbox.offer_to_snapshot(key, chunk):
                return False
            self._unsaved.pop()
        self._saving = False
        return True

    def restore_from_snapshot(self, inbox: inbox_mod.Inbox) -> None:
        mine, count = self.context.global_processor_index, self.context.total_parallelism
        for key, chunk in inbox.take_all():
            if not isinstance(key, SortChunkKey):
                raise ValueError(f"sort_p cannot restore the snapshot entry {key!r}")
            if key.processor_index % count == mine:
                self._restored[key] = chunk

    def finish_snapshot_restore(self) -> bool:
        for key in sorted(self._restored):
            self._items.extend(self._restored[key])
        self._restored = {}
        return True


def sort_p(key_fn: Callable[[Any], Any] | None = None, reverse: bool = False) -> processor.ProcessorFactory:
    """Emits all its input sorted by ``key_fn`` (natural order without one), in ``complete()``.

    Run it with total parallelism one behind an all-to-one edge, as the
    planner does, to sort the whole stream; with more processors each sorts
    only its share.

    >>> from jetlet.testing import verify_processor
    >>> words = ["ccc", "a", "bb", "d"]
    >>> _ = verify_processor(sort_p(len)).input(words).expect_output(["a", "d", "bb", "ccc"])
    """
    if key_fn is not None and not callable(key_fn):
        raise TypeError(f"sort_p: key_fn must be callable or None, got {key_fn!r}")
    return lambda: SortP(key_fn, reverse)
