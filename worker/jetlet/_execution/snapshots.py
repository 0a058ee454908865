"""A member's side of distributed snapshots (Chandy-Lamport, as Jet takes them).

The coordinator starts snapshot ``N`` by calling :meth:`MemberSnapshots.start`
on every member. Tasklets without open inputs (sources, and processors whose
inputs are all done) notice the request at their next call: they save their
state, then send a :class:`SnapshotBarrier` down every output behind the
items they emitted before it. A tasklet with inputs takes its snapshot when
the barrier has arrived on every input queue that is not done (a
:class:`BarrierAligner` counts them): with ``EXACTLY_ONCE`` a queue whose
barrier arrived is not read again until then (alignment), so the state
holds exactly the items before the barrier; with ``AT_LEAST_ONCE`` it keeps
being read, so items after the barrier may be in the state and are replayed
after a restore (duplicates, never loss).

Taking a snapshot is, for each processor: ``save_to_snapshot()`` until it
returns True (its entries are collected here, by vertex),
``snapshot_commit_prepare()`` until True (the first phase of a sink's
two-phase commit), then the barrier goes out. When every tasklet of the
member has saved snapshot ``N`` — or ended before it, with nothing left to
save — the member's part is complete and ``on_local_complete`` hands it on
(to be stored with its backups). When the coordinator has every member's
part stored it calls :meth:`commit` (the second phase), and each tasklet
calls ``snapshot_commit_finish(success)`` before it handles anything else.

A *terminal* snapshot (suspend, cancel-and-export) is the same, except that
sources stop emitting after its barrier, so nothing follows it.

*Ending* (exactly-once): a restart from a snapshot is exact only while the
snapshot holds every tasklet's state and nothing beyond it is final. Two
:class:`EndGate` permissions, each asked of the coordinator once per
execution by the first tasklet that needs it, keep it so
(:mod:`jetlet._cluster.job_ending`):

* ``end``: a source whose ``complete()`` returned True does not end (a
  tasklet that ended saves nothing into later snapshots) until granted; the
  coordinator takes no snapshot from then on. Until then it takes part in
  snapshots with its final state.
* ``final_commit``: a sink (a tasklet with inputs and no outputs) that
  received items does not call ``complete()`` — where it commits its last
  transactions, beyond every snapshot — until granted; the coordinator
  records that the job is committing its final output, and never restarts
  it from then on (a member lost then fails the job, saying why).

Without an ``ask`` (one process, no coordinator) a gate is open from the
start.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any

Entries = list[tuple[Any, Any]]
"""A processor's saved state: ``(key, value)`` pairs."""


@dataclasses.dataclass(frozen=True, slots=True)
class SnapshotBarrier:
    """The marker that separates the items before snapshot ``snapshot_id`` from those after it."""

    snapshot_id: int
    terminal: bool = False


class BarrierAligner:
    """Which input queues of one consumer have delivered the current barrier (all ordinals together).

    Queues in ``never_block`` are read on after their barrier even with
    exactly-once: the inputs of a higher priority (a hash join's build
    side) must be read to their end before the others are read at all, so
    holding them back would wait forever. Their items after the barrier can
    be in the state (at-least-once for them), which is why Jet, too, wants
    such inputs to be batch sources.
    """

    __slots__ = ("_arrived", "_blockable", "_done", "barrier", "exactly_once")

    def __init__(
        self, queue_count: int, exactly_once: bool, never_block: frozenset[int] = frozenset()
    ) -> None:
        self.exactly_once = exactly_once
        self._blockable = [i not in never_block for i in range(queue_count)]
        self._arrived = [False] * queue_count
        self._done = [False] * queue_count
        self.barrier: SnapshotBarrier | None = None
        """The barrier being aligned, once one queue brought it."""

    def arrived(self, queue_index: int, barrier: SnapshotBarrier) -> None:
        if self.barrier is not None and barrier.snapshot_id != self.barrier.snapshot_id:
            raise RuntimeError(
                f"barrier of snapshot {barrier.snapshot_id} arrived while snapshot "
                f"{self.barrier.snapshot_id} was being aligned"
            )
        self.barrier = barrier
        self._arrived[queue_index] = True

    def queue_done(self, queue_index: int) -> None:
        self._done[queue_index] = True

    def is_blocked(self, queue_index: int) -> bool:
        """True if the queue must not be read now (its barrier came; exactly-once aligns)."""
        return self.exactly_once and self._arrived[queue_index] and self._blockable[queue_index]

    @property
    def aligned(self) -> bool:
        """A barrier came, and every queue that is not done has delivered it."""
        return self.barrier is not None and all(
            a or d for a, d in zip(self._arrived, self._done, strict=True)
        )

    def reset(self) -> None:
        """The snapshot was taken: read every queue again."""
        self.barrier = None
        self._arrived = [False] * len(self._arrived)


class EndGate:
    """A permission the coordinator grants an execution once (see the module doc: *Ending*).

    The first tasklet that needs it calls ``ask`` (which must not block); the
    answer comes through :meth:`grant` or :meth:`refused` (the next tasklet to
    need it asks again). Without ``ask`` the gate is open.
    """

    def __init__(self, ask: Callable[[], None] | None) -> None:
        self.granted = ask is None
        self._ask = ask
        self._asked = False
        self._lock = threading.Lock()

    def allows(self) -> bool:
        """Whether it is granted; the first call asks for it."""
        if self.granted:
            return True
        with self._lock:
            if self._asked:
                return False
            self._asked = True
        assert self._ask is not None
        self._ask()
        return self.granted

    def grant(self) -> None:
        self.granted = True

    def refused(self) -> None:
        with self._lock:
            self._asked = False


class _LocalSnapshot:
    __slots__ = ("entries", "error", "saved")

    def __init__(self) -> None:
        self.saved: set[int] = set()
        self.entries: dict[str, Entries] = {}
        self.error: str | None = None


LocalCompletion = Callable[[int, dict[str, Entries], "str | None"], None]
"""``(snapshot_id, entries by vertex, error or None)``: this member's part of a snapshot is done."""


class MemberSnapshots:
    """One execution's snapshots on one member: requests, collected state, completion, commit.

    Tasklets are known by their index in the execution (``0 .. tasklet_count - 1``).
    """

    def __init__(
        self,
        exactly_once: bool,
        tasklet_count: int,
        on_local_complete: LocalCompletion,
        restored_snapshot_id: int = 0,
        ask_to_end: Callable[[], None] | None = None,
        ask_to_commit: Callable[[], None] | None = None,
    ) -> None:
        self.exactly_once = exactly_once
        self.end = EndGate(ask_to_end)
        """Sources that completed may end (see the module doc: *Ending*)."""
        self.final_commit = EndGate(ask_to_commit)
        """Sinks may call ``complete()``, committing their last transactions (*Ending*)."""
        self.requested = SnapshotBarrier(restored_snapshot_id)
        """The latest snapshot the coordinator started (sources compare their own with it)."""
        self.commit_id = restored_snapshot_id
        """The latest snapshot whose second phase was ordered; ``commit_success`` is its outcome."""
        self.commit_success = True
        self._tasklets = tasklet_count
        self._ended: dict[int, int] = {}
        self._final: dict[int, tuple[str, Entries]] = {}
        """The final state of sources that ended, by tasklet (see :meth:`tasklet_ended`)."""
        self._snapshots: dict[int, _LocalSnapshot] = {}
        self._committed: dict[int, set[int]] = {}
        self._on_local_complete = on_local_complete
        self._lock = threading.Condition()

    def set_tasklet_count(self, count: int) -> None:
        """How many tasklets take part (known once the execution plan is built)."""
        with self._lock:
            self._tasklets = count

    # -- the coordinator's side ----------------------------------------------
    def start(self, snapshot_id: int, terminal: bool = False) -> None:
        """Begin snapshot ``snapshot_id``; tasklets pick it up at their next call."""
        with self._lock:
            if snapshot_id <= self.requested.snapshot_id:
                raise ValueError(
                    f"snapshot {snapshot_id} is not newer than snapshot {self.requested.snapshot_id}"
                )
            self._snapshots[snapshot_id] = _LocalSnapshot()
            self.requested = SnapshotBarrier(snapshot_id, terminal)
        self._check(snapshot_id)

    def commit(self, snapshot_id: int, success: bool, timeout: float) -> bool:
        """Order the second phase; wait (up to ``timeout``) until every tasklet finished it or ended."""
        with self._lock:
            self.commit_success = success
            self.commit_id = snapshot_id
            return self._lock.wait_for(
                lambda: len(self._committed.get(snapshot_id, set()) | self._ended.keys()) >= self._tasklets,
                timeout,
            )

    # -- the tasklets' side ------------------------------------------------------
    def saved(self, snapshot_id: int, tasklet: int, vertex: str, entries: Entries) -> None:
        """Tasklet ``tasklet`` has saved its state for ``snapshot_id`` and sent the barrier on."""
        with self._lock:
            local = self._snapshots.get(snapshot_id)
            if local is None:
                return
            local.saved.add(tasklet)
            if entries:
                local.entries.setdefault(vertex, []).extend(entries)
        self._check(snapshot_id)

    def failed(self, snapshot_id: int, error: str) -> None:
        """Saving failed on this member: the snapshot must not be declared complete."""
        with self._lock:
            local = self._snapshots.get(snapshot_id)
            if local is not None and local.error is None:
                local.error = error

    def committed(self, snapshot_id: int, tasklet: int) -> None:
        with self._lock:
            self._committed.setdefault(snapshot_id, set()).add(tasklet)
            self._lock.notify_all()

    def tasklet_ended(
        self, tasklet: int, last_snapshot_id: int, vertex: str = "", final: Entries | None = None
    ) -> None:
        """A tasklet finished; it saves nothing after ``last_snapshot_id``, but a source's ``final``
        state (the position it ended at) goes into every later snapshot for it: a restore from one
        then finds the source ended (with none, it would replay it from the start)."""
        with self._lock:
            self._ended[tasklet] = last_snapshot_id
            if final:
                self._final[tasklet] = (vertex, final)
            pending = list(self._snapshots)
            self._lock.notify_all()
        for snapshot_id in pending:
            self._check(snapshot_id)

    def _check(self, snapshot_id: int) -> None:
        with self._lock:
            local = self._snapshots.get(snapshot_id)
            if local is None or len(local.saved | self._ended.keys()) < self._tasklets:
                return
            del self._snapshots[snapshot_id]
            for tasklet, (vertex, final) in self._final.items():
                if tasklet not in local.saved and self._ended[tasklet] < snapshot_id:
                    local.entries.setdefault(vertex, []).extend(final)
        self._on_local_complete(snapshot_id, local.entries, local.error)
