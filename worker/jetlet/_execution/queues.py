"""Bounded single-producer single-consumer queues that move items in batches.

Every (producer, consumer) pair of tasklets on a local edge has its own
queue, so each queue has exactly one writer thread and one reader thread.
The queue is a ``collections.deque`` of *batches* (lists) and *control items*
(watermarks, the done marker); ``deque.append`` and ``deque.popleft`` are
atomic in CPython, so neither side takes a lock.

The capacity is counted in items with two monotonic counters, each written by
one side only: the producer's ``_added`` and the consumer's ``_removed``. A
record batch counts as the rows it holds (:func:`~jetlet._execution.sizing.rows_of`,
both sides compute it of the same list), so a batch of 1,024 rows fills a
queue of capacity 1,024; a queue takes as many batches as their rows leave
room for, and an empty queue always takes one.
The producer computes the size as ``_added - _removed``; a stale ``_removed``
only makes the queue look fuller than it is, so the capacity is never
exceeded, and the high-water mark (what the producer saw) is an upper bound.
One batch costs one append and one counter update, whatever its length.
Control items are counted the same way (``_controls_added`` by the producer,
``_controls_taken`` by the consumer), so a consumer can tell that one waits
in the queue (:meth:`SpscQueue.holds_control`) without looking through it.
A queue whose consumer is a blocking sink's thread also sets that thread's
``consumer_wake`` event, so the thread can park between inputs instead of
polling (:mod:`~jetlet._execution.execution_service`).

With ``max_bytes`` the queue is bounded in bytes as well (estimated by
:func:`~jetlet._execution.sizing.item_bytes`, once per batch): a batch goes in
only as far as the bytes already queued leave room, except that an empty
queue always takes one item, however large. Only the producer keeps the byte
count: it notes the running totals of items and bytes at each batch it adds,
and drops the notes the consumer's ``_removed`` has passed (the consumer
removes whole batches), so neither side takes a lock here either. Items
light enough that a full queue of them stays within ``max_bytes`` (most
streams) need no byte count: they are weighed once per
:data:`LIGHT_BATCHES` batches of one type, the batches between go by the
item bound alone, and the count starts (with what is queued) when a weighed
batch is heavier. So a batch of much heavier items of the same type can slip
in by the item bound until the next weighing.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any, Final

from jetlet._execution.sizing import batch_rows, item_bytes, rows_of


class _DoneItem:
    """The marker a producer sends when it will send nothing more."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "DONE_ITEM"


DONE_ITEM: Final = _DoneItem()
LIGHT_BATCHES = 32
"""Batches of items light enough that a full queue of them stays within ``max_bytes`` that a queue
takes without weighing each (the next one of that type is weighed again)."""


class SpscQueue:
    """A bounded queue of batches between one producer and one consumer."""

    __slots__ = (
        "_added",
        "_batches",
        "_bytes_added",
        "_bytes_gone",
        "_controls_added",
        "_controls_taken",
        "_light",
        "_light_type",
        "_light_weight",
        "_marks",
        "_removed",
        "capacity",
        "consumer_wake",
        "high_water_mark",
        "max_bytes",
        "name",
    )

    def __init__(self, capacity: int, name: str = "", max_bytes: int = 0) -> None:
        if capacity < 1:
            raise ValueError(f"queue capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self.name = name
        self.max_bytes = max_bytes
        """Most bytes (estimated) queued at once; 0: bounded in items only."""
        self._batches: deque[Any] = deque()
        self._added = 0
        self._removed = 0
        self._controls_added = 0
        self._controls_taken = 0
        self.high_water_mark = 0
        self._bytes_added = 0
        self._bytes_gone = 0
        self._marks: deque[tuple[int, int]] = deque()
        self._light = 0
        """Batches still to take without weighing them (items light enough: the item bound is stricter)."""
        self._light_type: type | None = None
        self._light_weight = 0
        self.consumer_wake: threading.Event | None = None
        """Set whenever something is enqueued, when the consumer parks on it (a blocking sink's thread)."""

    # -- producer side ---------------------------------------------------
    def room(self) -> int:
        return self.capacity - (self._added - self._removed)

    def offer_batch(self, items: list[Any]) -> int:
        """Enqueue a prefix of ``items`` that fits; return its length.

        The queue keeps the list itself when all of it fits: the caller must
        not modify it afterwards.
        """
        queued = self._added - self._removed
        room = self.capacity - queued
        if room <= 0:
            return 0
        rows = batch_rows(items)
        if rows is not None:
            return self._offer_rows(items, rows, queued, room)
        weight = 0
        if self.max_bytes:
            first = items[0]
            if self._light and type(first) is self._light_type:
                self._light -= 1
            else:
                weight = self._weigh(first, queued)
                if weight:
                    fits = self._fits(weight, queued)
                    if fits <= 0:
                        return 0
                    room = min(room, fits)
        count = len(items)
        if count > room:
            return self._enqueue(items[:room], room, weight, room)
        return self._enqueue(items, count, weight, count)

    def _offer_rows(self, items: list[Any], rows: list[int], queued: int, room: int) -> int:
        """``offer_batch`` of record batches: as many as their rows leave room for (one when empty).

        Also bounded by ``max_bytes`` when set, each batch weighed as its first (no light mode).
        """
        count, taken_rows = 0, 0
        for held in rows:
            if taken_rows + held > room and (count or queued):
                break
            count += 1
            taken_rows += held
        weight = item_bytes(items[0]) or 1 if self.max_bytes else 0
        if weight:
            fits = self._fits(weight, queued)
            if fits <= 0:
                return 0
            if fits < count:
                count, taken_rows = fits, sum(rows[:fits])
        if count == 0:
            return 0
        return self._enqueue(items if count == len(items) else items[:count], taken_rows, weight, count)

    def _fits(self, weight: int, queued: int) -> int:
        """How many more elements of ``weight`` bytes ``max_bytes`` leaves room for (one when empty)."""
        if queued:
            return (self.max_bytes - self.queued_bytes()) // weight
        return max(1, self.max_bytes // weight)

    def _enqueue(self, batch: list[Any], units: int, weight: int, count: int) -> int:
        """Append ``batch`` (``count`` elements of ``weight`` bytes each, ``units`` items or rows against
        the capacity), move the counters and the high-water mark; return ``count``."""
        self._batches.append(batch)
        wake = self.consumer_wake
        if wake is not None and not wake.is_set():
            wake.set()
        added = self._added + units
        self._added = added
        if weight:
            self._bytes_added += weight * count
            self._marks.append((added, self._bytes_added))
        size = added - self._removed
        if size > self.high_water_mark:
            self.high_water_mark = size
        return count

    def _weigh(self, first: Any, queued: int) -> int:
        """The weight of a batch's items, or 0 when a full queue of them stays within ``max_bytes``
        (then the next :data:`LIGHT_BATCHES` batches of that type are not weighed)."""
        weight = item_bytes(first) or 1
        if weight * self.capacity <= self.max_bytes and not self.queued_bytes():
            self._light, self._light_type, self._light_weight = LIGHT_BATCHES, type(first), weight
            return 0
        if self._light_type is not None:  # out of the light mode: count what it queued
            self._bytes_added += queued * self._light_weight
            self._marks.append((self._added, self._bytes_added))
            self._light, self._light_type = 0, None
        return weight

    def queued_bytes(self) -> int:
        """Bytes (estimated) queued now, as the producer sees it (an upper bound)."""
        removed, marks = self._removed, self._marks
        while marks and marks[0][0] <= removed:
            self._bytes_gone = marks.popleft()[1]
        return self._bytes_added - self._bytes_gone

    def offer_control(self, item: object) -> None:
        """Enqueue a control item; they do not count against the capacity."""
        self._batches.append(item)
        self._controls_added += 1
        wake = self.consumer_wake
        if wake is not None and not wake.is_set():
            wake.set()

    # -- consumer side ---------------------------------------------------
    def poll(self) -> Any:
        """The next batch (a list) or control item, or None if empty."""
        try:
            element = self._batches.popleft()
        except IndexError:
            return None
        if type(element) is list:
            self._removed += rows_of(element)
        else:
            self._controls_taken += 1
        return element

    def holds_control(self) -> bool:
        """Whether a control item (a watermark, a barrier, the done marker) waits in the queue (consumer
        side)."""
        return self._controls_added > self._controls_taken  # (taken may count one before added does)

    def size(self) -> int:
        """Items in the queue now (approximate when read from a third thread)."""
        return self._added - self._removed

    def __repr__(self) -> str:
        return f"SpscQueue({self.name!r}, {self.size()}/{self.capacity})"
