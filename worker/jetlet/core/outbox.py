"""The outbox: where a processor puts what it emits.

An outbox has one bounded *bucket* per outbound edge (ordinal) and one
bucket for snapshot state. ``offer`` returns False when the bucket is full:
the processor must then return from its callback and offer the same item
again in a later call (the engine drains the buckets between calls). Items
move downstream as whole buckets, so the per-item cost is one list append.

Offering to several ordinals is all-or-nothing: either every target bucket
takes the item or none does, so a retry never duplicates it.

Control items (watermarks) are never mixed into a bucket with data: a
watermark is accepted only into an empty bucket, and the bucket takes no more
data until the engine has forwarded it. That keeps order without scanning.

Beyond Jet's API, :meth:`Outbox.offer_batch` accepts a whole list and says
how many items it took, which lets batch processors emit in one step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jetlet.core import watermark as wm

ALL_ORDINALS = -1
"""Pass as ``ordinal`` to offer an item to every outbound edge."""

Ordinals = int | Sequence[int]

DEFAULT_BUCKET_CAPACITY = 1024
"""How many items a bucket holds before ``offer`` refuses (one batch)."""


class Outbox:
    """Bounded per-ordinal buckets plus a snapshot bucket (Jet's ``Outbox``)."""

    __slots__ = ("_all", "_capacities", "_capacity", "_limits", "buckets", "controls", "snapshot_bucket")

    def __init__(self, bucket_count: int, capacity: int = DEFAULT_BUCKET_CAPACITY) -> None:
        if bucket_count < 0 or capacity < 1:
            raise ValueError(f"bad outbox shape: {bucket_count} buckets of capacity {capacity}")
        self._capacity = capacity
        self.buckets: list[list[Any]] = [[] for _ in range(bucket_count)]
        """Data waiting to be forwarded, per ordinal. The engine replaces a
        drained bucket with a new list (a bucket is handed downstream whole)."""
        self.controls: list[wm.Watermark | None] = [None] * bucket_count
        """A watermark waiting to be forwarded, per ordinal."""
        self._limits: list[int] = [capacity] * bucket_count
        self._capacities: list[int] = [capacity] * bucket_count
        """Each bucket's own capacity: ``capacity``, or less for large items (:meth:`fit_bucket`)."""
        self._all = tuple(range(bucket_count))
        self.snapshot_bucket: list[tuple[Any, Any]] = []

    def bucket_count(self) -> int:
        return len(self.buckets)

    def capacity(self) -> int:
        return self._capacity

    def _targets(self, ordinal: Ordinals) -> Sequence[int]:
        if isinstance(ordinal, int):
            return self._all if ordinal == ALL_ORDINALS else (ordinal,)
        return ordinal

    def offer(self, item: Any, ordinal: Ordinals = ALL_ORDINALS) -> bool:
        """Add ``item`` to the bucket(s) of ``ordinal``; False if any is full.

        ``ordinal`` is one ordinal, a sequence of them, or ``ALL_ORDINALS``
        (the default). ``None`` is not an item (it means "nothing" everywhere
        in the API) and is refused with ``TypeError``.
        """
        if ordinal == ALL_ORDINALS and len(self.buckets) == 1:
            bucket = self.buckets[0]
            if len(bucket) < self._limits[0]:
                if type(item) is wm.Watermark:
                    return self._offer_watermark(item, (0,))
                if item is None:
                    raise TypeError("None cannot be emitted: it means 'no item' in jetlet")
                bucket.append(item)
                return True
            return False
        targets = self._targets(ordinal)
        limits = self._limits
        for target in targets:
            if len(self.buckets[target]) >= limits[target]:
                return False
        if type(item) is wm.Watermark:
            return self._offer_watermark(item, targets)
        if item is None:
            raise TypeError("None cannot be emitted: it means 'no item' in jetlet")
        for target in targets:
            self.buckets[target].append(item)
        return True

    def _offer_watermark(self, watermark: wm.Watermark, targets: Sequence[int]) -> bool:
        for target in targets:
            if self.buckets[target] or self.controls[target] is not None:
                return False
        for target in targets:
            self.controls[target] = watermark
            self._limits[target] = 0
        return True

    def offer_batch(self, items: list[Any], ordinal: Ordinals = ALL_ORDINALS) -> int:
        """Add a prefix of ``items`` to the bucket(s); return how many were taken.

        With several target ordinals, each takes the same prefix. The caller
        keeps the rest and offers it again later.
        """
        targets = self._targets(ordinal)
        if not targets:
            return len(items)
        room = min(self._limits[t] - len(self.buckets[t]) for t in targets)
        if room <= 0:
            return 0
        taken = items if len(items) <= room else items[:room]
        for target in targets:
            self.buckets[target].extend(taken)
        return len(taken)

    def room(self, ordinal: Ordinals = ALL_ORDINALS) -> int:
        """How many more items the bucket(s) of ``ordinal`` take now (the smallest room)."""
        targets = self._targets(ordinal)
        if not targets:
            return self._capacity
        return max(0, min(self._limits[t] - len(self.buckets[t]) for t in targets))

    def has_room(self, ordinal: int = ALL_ORDINALS) -> bool:
        """True if an item offered to ``ordinal`` now would be accepted."""
        return all(len(self.buckets[t]) < self._limits[t] for t in self._targets(ordinal))

    def offer_to_snapshot(self, key: Any, value: Any) -> bool:
        """Add one key/value pair of the processor's state to the snapshot."""
        if len(self.snapshot_bucket) >= self._capacity:
            return False
        self.snapshot_bucket.append((key, value))
        return True

    def take_control(self, ordinal: int) -> wm.Watermark | None:
        """Engine side: remove the pending watermark of ``ordinal`` and reopen its bucket."""
        control = self.controls[ordinal]
        if control is not None:
            self.controls[ordinal] = None
            self._limits[ordinal] = self._capacities[ordinal]
        return control

    def bucket_capacity(self, ordinal: int) -> int:
        """How many items the bucket of ``ordinal`` holds (see :meth:`fit_bucket`)."""
        return self._capacities[ordinal]

    def fit_bucket(self, ordinal: int, items: int) -> None:
        """Engine side: let the bucket of ``ordinal`` hold ``items`` (1 to the outbox's capacity) from now
        on: fewer for large items, so that a bucket stays within the bytes its queues may hold."""
        capacity = max(1, min(self._capacity, items))
        self._capacities[ordinal] = capacity
        if self._limits[ordinal]:  # 0 while a watermark waits: take_control restores it
            self._limits[ordinal] = capacity

    def is_empty(self) -> bool:
        """True when nothing is waiting to be forwarded."""
        return not any(self.buckets) and all(c is None for c in self.controls) and not self.snapshot_bucket
