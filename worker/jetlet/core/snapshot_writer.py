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

**Freezing.** The engine keeps a saved value as the bytes :func:`freeze`
makes of it at once, on the processing thread: the processor may change the
object right after. That costs a pickle per entry (about 4-9 µs for a small
object) while every tasklet of the thread waits: 10,000 keyed states stall
a member for 70-90 ms at every snapshot.

**Lending** (copy-on-write, as Flink's heap state backend snapshots): a
processor that can notice its own writes offers :class:`Lent` values under
one :class:`Loan` per snapshot instead. The engine keeps the objects, and the
member freezes them later, on the thread that stores the snapshot
(:func:`freeze_lent`). Until then, before the processor changes the state of
a key, it calls :meth:`Loan.before_change`: if the state is still lent, the
processor freezes it there and then, and changes it in place afterwards.
Each lent state is *claimed* (popped from ``Loan.unclaimed``, one atomic
step): the processor claims a state before freezing and changing it, the
store thread after freezing it (see :meth:`Loan.frozen`), so a state is never
changed while it is being frozen, and the bytes that count were taken before
any change. The processing thread pays only for the keys it touches while the
snapshot is being stored; a state is pickled twice only when both threads
reach it at once.

>>> state = {"a": [1], "b": [2]}
>>> loan = Loan(state)
>>> entries = [(key, Lent(loan)) for key in state]
>>> loan.before_change("a")  # the processor changes key "a": frozen first
>>> state["a"].append(3)
>>> [(key, thaw(value)) for key, value in freeze_lent(entries)]  # the store thread
[('a', [1]), ('b', [2])]
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from jetlet import _pickling
from jetlet.core import outbox as outbox_mod

Entry = tuple[Any, Any]


def freeze(value: Any) -> bytes:
    """A saved value as bytes, taken at once: the processor may change the object right after.

    Keys are kept as objects (they are hashable, so immutable in practice);
    values such as a ``map_stateful`` state are often mutable.
    """
    return _pickling.dumps(value)


def thaw(frozen: bytes) -> Any:
    """The value that :func:`freeze` saved."""
    return pickle.loads(frozen)


_CLAIMED = object()
CLAIM_TIMEOUT_S = 60.0
"""How long the store thread waits for the processor to finish freezing a state it claimed."""


class Loan:
    """The states a processor lent to the snapshot being stored (see the module doc)."""

    __slots__ = ("_frozen", "unclaimed")

    def __init__(self, states: Mapping[Any, Any]) -> None:
        self.unclaimed: dict[Any, Any] = dict(states)
        """The lent states no thread has frozen yet, by key; empty once the snapshot is stored."""
        self._frozen: dict[Any, bytes | BaseException] = {}

    def before_change(self, key: Any) -> None:
        """Processor side: freeze the state of ``key`` now if it is still lent."""
        value = self.unclaimed.pop(key, _CLAIMED)
        if value is _CLAIMED:
            return
        try:
            self._frozen[key] = freeze(value)
        except BaseException as exc:
            self._frozen[key] = exc
            raise

    def frozen(self, key: Any) -> bytes:
        """Store side: the state of ``key`` frozen, by this thread unless the processor claimed it.

        This side claims a state only *after* freezing it: while it freezes, the state is still
        unclaimed, so the processor cannot have changed it; if the processor claimed it meanwhile
        (to change it), what this side froze may be torn and the processor's bytes count instead.
        """
        value = self.unclaimed.get(key, _CLAIMED)
        if value is not _CLAIMED:
            frozen = freeze(value)
            if self.unclaimed.pop(key, _CLAIMED) is not _CLAIMED:
                return frozen
        deadline = time.monotonic() + CLAIM_TIMEOUT_S
        while (done := self._frozen.pop(key, None)) is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the state of key {key!r} was claimed but never frozen")
            time.sleep(0.0001)  # the processor is freezing it on its own thread
        if isinstance(done, BaseException):
            raise done
        return done


class Lent:
    """The value of a snapshot entry, lent under ``loan`` (the entry's key finds it there)."""

    __slots__ = ("loan",)

    def __init__(self, loan: Loan) -> None:
        self.loan = loan


def freeze_lent(entries: Iterable[Entry]) -> list[Entry]:
    """``entries`` with every :class:`Lent` value frozen (call it off the processing thread)."""
    return [(key, value.loan.frozen(key) if type(value) is Lent else value) for key, value in entries]


def read_back_lent(entries: Iterable[Entry]) -> list[Entry]:
    """``entries`` with every :class:`Lent` value frozen and thawed (a copy, as a restore reads it).

    For running processors outside a member (tests): the other values stay as they are.
    """
    return [(key, thaw(value.loan.frozen(key)) if type(value) is Lent else value) for key, value in entries]


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
