"""Writing a processor's state to a snapshot across as many calls as the outbox needs.

``save_to_snapshot`` may be called again and again until it returns True:
each call offers what fits and must resume exactly where the last one
stopped. :class:`SnapshotWriter` does that bookkeeping once for every
processor: the first call takes the entries to save (built from the state
as it is at that moment), later calls continue from the entry that did not
fit, and the call that offers the last one returns True and forgets them.

>>> outbox = outbox_mod.Outbox(1, capacity=1)
>>> writer = SnapshotWriter()
>>> writer.write(outbox, lambda: [("a", 1), ("b", 2)])  # room for one entry
False
>>> outbox.snapshot_bucket.clear()  # the engine took it
>>> writer.write(outbox, lambda: [])  # resumes with ("b", 2); the new list is not asked for
True
>>> outbox.snapshot_bucket
[('b', 2)]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from jetlet.core import outbox as outbox_mod

Entry = tuple[Any, Any]


class SnapshotWriter:
    """Offers ``(key, value)`` entries to a snapshot, resuming where a full outbox stopped it."""

    __slots__ = ("_entries", "_unsaved")

    def __init__(self) -> None:
        self._entries: Iterator[Entry] | None = None
        self._unsaved: Entry | None = None

    @property
    def in_progress(self) -> bool:
        """True between a call that could not finish and the one that does."""
        return self._entries is not None

    def write(self, outbox: outbox_mod.Outbox, entries: Callable[[], Iterable[Entry]]) -> bool:
        """Offer the entries (made by ``entries()`` on the first call); True when all are offered."""
        if self._entries is None:
            self._entries = iter(entries())
            self._unsaved = None
        offer = outbox.offer_to_snapshot
        entry = self._unsaved if self._unsaved is not None else next(self._entries, None)
        while entry is not None:
            if not offer(entry[0], entry[1]):
                self._unsaved = entry
                return False
            entry = next(self._entries, None)
        self._entries = None
        self._unsaved = None
        return True
