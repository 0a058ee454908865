"""Background work that gives way to the cooperative threads while they have work.

Theory of operation
-------------------
A member stores each snapshot on a thread of its own (the store thread:
settling lent states, pickling them a group at a time, writing the grid).
That thread shares the process's GIL with the cooperative threads that run
the job, and CPython hands the GIL from one thread to the other every
switch interval (the member's is 1 ms). So while a snapshot is stored, a
busy cooperative thread runs at about half its speed: for NEXMark Q4's 10,000 states the store takes
150-250 ms of CPU, spread over 400-800 ms of wall time, and every result of
that time comes out late (issue 20: Q4's p99 with snapshots every second).

A snapshot's store has no deadline of that order; the job's results do. So
the store yields: it tells a :class:`Pacer` how many entries it has done
(settled, then encoded: each entry is told of twice), and once
:data:`ENTRIES_PER_YIELD` or more were done since its last yield the pacer
calls :func:`yield_to_processing` (at most once per call), which sleeps (releasing the GIL) while any
cooperative thread of this process made progress on its last pass, up to
:data:`MAX_YIELD_S` per call. So the store runs mostly while the job waits
for input. A pacer waits in all at most :data:`WAIT_BUDGET_S`, or as long
as its work has taken if that is longer (:data:`MAX_WAIT_SHARE`): a member
busy all the time still stores every snapshot, at most a second later or in
twice the time, whatever the state's size (a store of millions of keys must
finish well within the snapshot timeout). For Q4's 10,000 states there are
about 580 yields (312 while settling, one per partition chunk while
encoding), up to 1.2 s of waits, so the budget binds only when the job is
busy through a whole store. A pacer that waited no longer than its work
took was measured to keep less of the gain (bench/RESULTS.md).

The cost: an always-busy member's snapshots, and the commits of
transactional sinks that wait for them, come up to about a second later.
A worker blocked in a long call still counts as busy; blocking tasklets
(threads of their own) never do. The
cooperative threads tell it with :func:`busy` and :func:`idle`, once per
change, not per pass.

The registry is the process's, as the GIL is: members that share a process
(tests) share it.
"""

from __future__ import annotations

import time

MAX_YIELD_S = 0.002
"""The longest one :func:`yield_to_processing` waits for busy cooperative threads."""
ENTRIES_PER_YIELD = 32
"""Snapshot entries a :class:`Pacer` lets the store do before it yields (Q4's settling: about 0.2 ms)."""
WAIT_BUDGET_S = 1.0
"""A pacer may always wait this long in all."""
MAX_WAIT_SHARE = 1.0
"""Beyond :data:`WAIT_BUDGET_S`, a pacer waits in all at most this times the time its work took."""
POLL_S = 0.0002
"""How often it looks again while they are busy."""

_busy: set[object] = set()


def busy(worker: object) -> None:
    """``worker`` (a cooperative thread's handle) made progress on its last pass."""
    _busy.add(worker)


def idle(worker: object) -> None:
    """``worker`` made no progress on its last pass (or stopped)."""
    _busy.discard(worker)


def processing_busy() -> bool:
    """Whether a cooperative thread of this process is busy."""
    return bool(_busy)


class Pacer:
    """Counts the entries background work has done and yields once :data:`ENTRIES_PER_YIELD` or more were
    done since its last yield (at most once per :meth:`done`), waiting in all at most
    :data:`WAIT_BUDGET_S` or :data:`MAX_WAIT_SHARE` times the time the work took."""

    __slots__ = ("_since", "_started", "_waited")

    def __init__(self) -> None:
        self._since = 0
        self._started = time.monotonic()
        self._waited = 0.0

    @property
    def waited_s(self) -> float:
        """How long this pacer has waited so far."""
        return self._waited

    def done(self, entries: int) -> None:
        self._since += entries
        if self._since < ENTRIES_PER_YIELD:
            return
        self._since = 0
        now = time.monotonic()
        worked = now - self._started - self._waited
        allowed = min(MAX_YIELD_S, max(WAIT_BUDGET_S, MAX_WAIT_SHARE * worked) - self._waited)
        if allowed > 0:
            self._waited += yield_to_processing(allowed) - now


def yield_to_processing(at_most_s: float = MAX_YIELD_S) -> float:
    """Sleep while a cooperative thread is busy, at most ``at_most_s``; the monotonic time after."""
    now = time.monotonic()
    if not _busy:
        return now
    deadline = now + at_most_s
    while _busy and now < deadline:
        time.sleep(POLL_S)
        now = time.monotonic()
    return now
