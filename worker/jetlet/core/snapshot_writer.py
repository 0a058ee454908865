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
member settles them later, on the thread that stores the snapshot
(:func:`settle_lent`). Until then, before the processor changes the state of
a key, it calls :meth:`Loan.before_change`: if the state is still lent, the
processor freezes it there and then, and changes it in place afterwards.
Each lent state is *claimed* (popped from ``Loan.unclaimed``, one atomic
step): the processor claims a state before freezing and changing it, the
store thread after freezing it (see :meth:`Loan.saved`), so a state is never
changed while it is being frozen, and the bytes that count were taken before
any change. The processing thread pays only for the keys it touches while the
snapshot is being stored; a state is pickled twice only when both threads
reach it at once.

**Cheap copies** (issue 20: pickling a small state costs about 5.8 µs, a
shallow copy 0.31). Where the processor knows how to copy a state cheaply —
a ``copy_fn`` the user gave ``map_stateful``, or an aggregate operation's
``copy_fn`` (the built-in ones have theirs; an immutable accumulator is its
own copy) — it pays only for that copy on the processing thread:

* :class:`Loan` takes a ``copy``: ``before_change`` then keeps a private copy
  of the state instead of its pickle (the store thread wraps it in a
  :class:`Copied` when it takes it), and so does the store thread for the
  states nobody claimed (a copy, then the claim: the same order as a freeze).
  This is Flink's copy-on-write heap state (its
  ``CopyOnWriteStateMap`` copies an entry the first time it is written during
  an asynchronous snapshot; the snapshot thread serializes the old version).
  The copies are pickled a group at a time with the chunk they go in
  (:mod:`jetlet._cluster.snapshot_data`), not one pickle each.
* A processor that saves values it cannot watch (aggregation and window
  accumulators) offers each one as a :class:`Copied` taken at the barrier; the
  store thread pickles it. This is Jet's order of work (the state is saved at
  the barrier, on the processing thread) with the serialization moved off it.

Either way the bytes are the state as it was at the barrier: the copy is taken
before the processor changes the state (at the barrier, or at its first change
after it), and nobody changes a copy. Without a ``copy_fn`` nothing changes:
a state is pickled on the processing thread, which is always correct.

**One entry per loan.** A processor offers its loan as a single entry,
``(None, Lent(loan))``, which stands for the states of every key it lent;
:func:`settle_lent` turns it into an entry per key on the store thread. An
entry per key, offered one at a time into the outbox and copied into the
tasklet's list, cost the processing thread 0.5-0.7 µs per key at every
barrier (5-7 ms for NEXMark Q4's 10,000 states, bench/snapshot_copy_bench.py)
and three tuples per key for the young generation of the garbage collector.

>>> loan = Loan({"a": [1]}, copy=list.copy)
>>> entries = [(None, Lent(loan)), ("total", Copied(7))]
>>> loan.before_change("a")  # a copy now (0.3 µs), its pickle later
>>> [(key, read_back(value)) for key, value in settle_lent(entries)]
[('a', [1]), ('total', 7)]

>>> state = {"a": [1], "b": [2]}
>>> loan = Loan(state)
>>> entries = [(None, Lent(loan))]
>>> loan.before_change("a")  # the processor changes key "a": frozen first
>>> state["a"].append(3)
>>> [(key, read_back(value)) for key, value in settle_lent(entries)]  # the store thread
[('a', [1]), ('b', [2])]
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from jetlet import _pickling
from jetlet.aggregate import operation as agg
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

    __slots__ = ("_copy", "_frozen", "keys", "unclaimed")

    def __init__(self, states: Mapping[Any, Any], copy: Callable[[Any], Any] | None = None) -> None:
        self.unclaimed: dict[Any, Any] = dict(states)
        """The lent states no thread has frozen yet, by key; empty once the snapshot is stored."""
        self.keys: list[Any] = list(self.unclaimed)
        """Every key lent (the snapshot holds one entry for each)."""
        self._frozen: dict[Any, Any] = {}
        """What the processor took of the states it claimed: bytes, or with a ``copy`` the bare copy
        (wrapped in a :class:`Copied` on the store thread: one object less per key for the young
        generation while the snapshot is stored), or a :class:`_Failed`."""
        self._copy = copy

    def before_change(self, key: Any) -> None:
        """Processor side: freeze (or with a ``copy``, copy) the state of ``key`` now if it is still lent."""
        value = self.unclaimed.pop(key, _CLAIMED)
        if value is _CLAIMED:
            return
        copy = self._copy
        try:
            self._frozen[key] = freeze(value) if copy is None else copy(value)
        except BaseException as exc:
            self._frozen[key] = _Failed(exc)
            raise

    def saved(self, key: Any) -> bytes | Copied:
        """Store side: the state of ``key`` frozen (or with a ``copy``, copied), by this thread unless
        the processor claimed it.

        This side claims a state only *after* freezing or copying it: meanwhile the state is still
        unclaimed, so the processor cannot have changed it; if the processor claimed it meanwhile
        (to change it), what this side took may be torn and the processor's version counts instead.
        """
        value = self.unclaimed.get(key, _CLAIMED)
        if value is not _CLAIMED:
            copy = self._copy
            saved = freeze(value) if copy is None else Copied(copy(value))
            if self.unclaimed.pop(key, _CLAIMED) is not _CLAIMED:
                return saved
        deadline = time.monotonic() + CLAIM_TIMEOUT_S
        while (done := self._frozen.pop(key, _CLAIMED)) is _CLAIMED:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the state of key {key!r} was claimed but never frozen")
            time.sleep(0.0001)  # the processor is freezing it on its own thread
        if type(done) is _Failed:
            raise done.error
        return done if self._copy is None else Copied(done)


class _Failed:
    """A freeze or copy that failed on the processing thread (which raised it there too)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class Copied:
    """The value of a snapshot entry as a private copy taken at or after the barrier, before any change.

    Nothing changes it any more, so the member pickles it later, off the processing thread.
    """

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def copies(entries: Iterable[Entry], copy_fn: Callable[[Any], Any] | None, stage: str) -> list[Entry]:
    """``entries`` to save now, each value as a :class:`Copied` made by ``copy_fn``.

    ``copy_fn`` is an aggregate operation's: :data:`~jetlet.aggregate.operation.IDENTITY` (immutable
    values) keeps the values themselves; None leaves them as they are, to be pickled at once. A
    failing ``copy_fn`` raises a :class:`CopyError` naming ``stage``.
    """
    if copy_fn is None:
        return list(entries)
    if copy_fn is agg.IDENTITY:
        return [(key, Copied(value)) for key, value in entries]
    try:
        return [(key, Copied(copy_fn(value))) for key, value in entries]
    except Exception as exc:
        raise CopyError(stage, exc) from exc


class CopyError(RuntimeError):
    """A state's ``copy_fn`` failed while a snapshot was being taken."""

    def __init__(self, stage: str, cause: BaseException) -> None:
        super().__init__(
            f"stage {stage!r}: the copy_fn of its state failed while taking a snapshot: "
            f"{type(cause).__name__}: {cause}"
        )
        self.stage = stage


class Lent:
    """The value of the one snapshot entry, ``(None, Lent(loan))``, that stands for every state ``loan``
    lent: :func:`settle_lent` makes it an entry per key."""

    __slots__ = ("loan",)

    def __init__(self, loan: Loan) -> None:
        self.loan = loan


SETTLE_GROUP = 1024
"""Entries :func:`settle_lent` settles per group (any size gives the same entries)."""


def settled_groups(entries: Iterable[Entry], size: int) -> Iterator[list[Entry]]:
    """``entries`` settled (off the processing thread), at most ``size`` at a time: a :class:`Lent`
    entry becomes one entry per key of its loan, its state frozen bytes or, with the loan's ``copy``,
    a :class:`Copied`; the other entries stay as they are. Nothing in them changes any more."""
    group: list[Entry] = []
    for key, value in entries:
        if type(value) is not Lent:
            group.append((key, value))
            if len(group) >= size:
                yield group
                group = []
            continue
        if group:
            yield group
            group = []
        saved, keys = value.loan.saved, value.loan.keys
        for start in range(0, len(keys), size):
            yield [(k, saved(k)) for k in keys[start : start + size]]
    if group:
        yield group


def settle_lent(entries: Iterable[Entry]) -> list[Entry]:
    """Every entry of :func:`settled_groups`, in one list."""
    return [entry for group in settled_groups(entries, SETTLE_GROUP) for entry in group]


def read_back(settled: bytes | Copied) -> Any:
    """A settled value as a restore reads it (a copy goes through pickle, as the member stores it)."""
    return thaw(settled if isinstance(settled, bytes) else freeze(settled.value))


def read_back_lent(entries: Iterable[Entry]) -> list[Entry]:
    """``entries`` with every :class:`Lent` and :class:`Copied` value settled and read back (as a
    restore reads it).

    For running processors outside a member (tests): the other values stay as they are.
    """
    read: list[Entry] = []
    for key, value in entries:
        if type(value) is Lent:
            read += [(k, read_back(v)) for k, v in settle_lent([(key, value)])]
        else:
            read.append((key, read_back(value) if type(value) is Copied else value))
    return read


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
