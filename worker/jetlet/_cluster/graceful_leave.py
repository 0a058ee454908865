"""Graceful leave on the coordinator (Jet's graceful shutdown): jobs moved off a member, or handed over.

:class:`~jetlet._cluster.job_coordinator.JobCoordinator` owns a
:class:`GracefulLeave` and delegates its ``member_leaving`` and
``hand_over`` to it; both run on the coordinator thread.

Theory of operation
-------------------
*A member leaves.* :meth:`GracefulLeave.member_leaving` records the
departure (one ``member_left`` event), and every job that is starting or
running on the member is stopped for a restart — after a *terminal*
snapshot when it runs with snapshots (the snapshot commits the sinks'
transactions, and the stop follows whatever the snapshot's outcome). The
restart installs a partition table without the member, so its partitions
and backups move off it before the job runs again. The returned future
completes when every such job runs a new execution, or is suspended or
ended — or, with no job affected, when the table without the member is
installed — or after ``timeout_s`` at the latest: the member then goes. A
job whose sinks commit their final output (:mod:`~jetlet._cluster.job_ending`)
is not stopped: it could not run again exactly, so the leave waits for it to
end. That is checked when the stop is made, after the terminal snapshot
(which may wait for one in flight, while the sinks are granted their final
commit): stopping such a job failed it.

*The coordinator leaves.* :meth:`GracefulLeave.hand_over` stops every
active job with the stop reason ``HANDOVER``, after a terminal snapshot
likewise: the execution ends on the members, and the job's record is saved
as it is (still running), for the next coordinator to run on from that
snapshot, as after a crash but losing nothing. The future completes when
every such execution has ended here (or after ``timeout_s``).

Both wait by checking the jobs on the coordinator thread every
:data:`POLL_S`: nothing blocks, and a job's state is only read there.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any

from jetlet._cluster import coordinator_thread, table_keeper
from jetlet._cluster import snapshot_coordinator as snapshots_mod
from jetlet._cluster.job_records import TERMINAL, JobEntry, JobTable, Status, StopReason

LEAVE_TIMEOUT_S = 60.0
"""Longest a graceful leave waits for the jobs to run again without the member (it then goes anyway)."""
POLL_S = 0.02
"""How often a leave checks whether the jobs it waits for have moved on."""
_ACTIVE = (Status.RUNNING, Status.STARTING)


class GracefulLeave:
    """Moves jobs off a leaving member, or hands them over when the coordinator leaves (see the module doc).

    ``stop(entry, reason, message)`` stops an execution, ``member_left(member, why)``
    records a departure, ``execution(execution_id)`` is the job running that execution
    (None once it ended): the job coordinator's own.
    """

    def __init__(
        self,
        serial: coordinator_thread.Serial,
        jobs: JobTable,
        snapshots: snapshots_mod.SnapshotCoordinator,
        tables: table_keeper.TableKeeper,
        stop: Callable[[JobEntry, StopReason, str], None],
        member_left: Callable[[str, str], None],
        execution: Callable[[int], JobEntry | None],
        timeout_s: float = LEAVE_TIMEOUT_S,
    ) -> None:
        self._serial = serial
        self._jobs = jobs
        self._snapshots = snapshots
        self._tables = tables
        self._stop = stop
        self._member_left = member_left
        self._execution = execution
        self.timeout_s = timeout_s

    def member_leaving(self, member: str) -> concurrent.futures.Future[dict[str, Any]]:
        """``member`` leaves gracefully: move its jobs off it and its partitions to the others.

        Every job running on it takes a terminal snapshot and restarts without it (the
        restart installs a table without it, so its partitions move first); the future
        completes when each of them runs again (or ended), so the member can go.
        """
        self._member_left(member, "it is leaving the cluster gracefully")
        affected = [e for e in self._jobs.active() if member in e.members and e.status in _ACTIVE]
        for entry in affected:
            entry.restart_reason = f"member {member} is leaving the cluster"
            self._stop_with_terminal_snapshot(entry, StopReason.RESTART, entry.restart_reason)
        settled = {e.id: self._running_again(e) for e in affected}
        if not affected:
            settled[0] = self._tables.ensure()  # no job: its partitions still move off it
        moved: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
        coordinator_thread.when_all(self._serial, settled, self.timeout_s, lambda _: moved.set_result({}))
        return moved

    def hand_over(self) -> concurrent.futures.Future[dict[str, Any]]:
        """This coordinator leaves gracefully: terminal snapshots, executions stopped, records kept.

        The next coordinator takes over from the records (as after a crash, but from a snapshot
        taken just now, and with nothing left running here).
        """
        affected = [e for e in self._jobs.active() if e.status in _ACTIVE]
        ended: dict[int, concurrent.futures.Future[Any]] = {}
        for entry in affected:
            ended[entry.id] = self._handed_over(entry)
            self._stop_with_terminal_snapshot(entry, StopReason.HANDOVER, "the coordinator is leaving")
        done: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
        coordinator_thread.when_all(self._serial, ended, self.timeout_s, lambda _: done.set_result({}))
        return done

    def _stop_with_terminal_snapshot(self, entry: JobEntry, reason: StopReason, message: str) -> None:
        if entry.status is Status.RUNNING and entry.snapshots_enabled and entry.stopping is None:
            self._snapshots.take(
                entry, True, lambda _problem: self._stop_unless_ending(entry, reason, message)
            )
        else:
            self._stop_unless_ending(entry, reason, message)

    def _stop_unless_ending(self, entry: JobEntry, reason: StopReason, message: str) -> None:
        """Stop the execution — unless its sinks commit their final output: it then ends by itself.

        Checked when the stop is made, not when the leave began: the terminal snapshot may wait
        for the one in flight, and meanwhile the sinks may be granted their final commit
        (:mod:`~jetlet._cluster.job_ending`); stopping it then failed the job, since it could
        not run again exactly. Once the stop is made, no final commit is granted any more.
        """
        if not entry.final_commit:
            self._stop(entry, reason, message)

    def _handed_over(self, entry: JobEntry) -> concurrent.futures.Future[Any]:
        """Completes when the entry's current execution has ended here."""
        execution_id = entry.execution_id
        return self._when(
            lambda: entry.execution_id != execution_id or self._execution(execution_id) is not entry
        )

    def _running_again(self, entry: JobEntry) -> concurrent.futures.Future[Any]:
        """Completes when the entry runs a new execution (or is suspended or ended)."""
        started = entry.execution_id
        return self._when(
            lambda: (
                (entry.execution_id != started and entry.status is Status.RUNNING)
                or entry.status in (Status.SUSPENDED, *TERMINAL)
            )
        )

    def _when(self, condition: Callable[[], bool]) -> concurrent.futures.Future[Any]:
        """A future completed (on the coordinator thread) once ``condition`` holds, checked every POLL_S."""
        reached: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def check() -> None:
            if condition():
                reached.set_result(None)
            else:
                self._serial.call_later(POLL_S, check)

        self._serial.call_later(POLL_S, check)
        return reached
