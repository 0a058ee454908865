"""The coordinator's job lifecycle (Jet's ``MasterJobContext``): executions started, ended, restarted.

Theory of operation
-------------------
Everything here runs on the coordinator thread (:mod:`coordinator_thread`);
nothing waits on the network. An *execution* is one run of a job on the
members there are now:

1. :meth:`JobCoordinator.start_execution` gives it a new id, marks the job
   ``STARTING``, has the partition table installed for the live members, and
   sends every member ``init`` with the job's planned DAG and the snapshot to
   restore (the job's last one, or the exported one it starts from);
2. when every member has answered, the job is ``RUNNING`` and each member is
   sent ``start``; a member that could not be reached makes the execution
   start again without it, a member whose init could not reach another one
   (``ClusterUnavailableError``: a link reset and not reconnected yet, a
   member dying meanwhile) or that read less of the snapshot's broadcast
   state than another (a read racing a partition move,
   :func:`~jetlet._cluster.snapshot_data.short_broadcast_reads`) makes it
   start again after :data:`START_RETRY_S`
   (at most :data:`START_ATTEMPTS` times in a row), any other init error
   fails the job with every member's message;
3. each member reports ``done``; when all have, the job completes — unless
   the execution was being stopped, and then :class:`StopReason` decides:
   the job fails (or, with ``suspend_on_failure``, is suspended), is
   cancelled, is suspended, or is restarted as a new execution.

A job with ``timeout_millis`` is cancelled once it runs past it
(:mod:`~jetlet._cluster.job_timeouts`).

Member loss: the lost member's share counts as done, and a job that ran on
it restarts on the members left from its last snapshot (with
``auto_scaling`` off it is suspended instead) — unless its sinks were
granted their final commit (:mod:`~jetlet._cluster.job_ending`): then it
fails, saying why, since a restart could repeat committed output. A member that joins triggers a
rescale after ``scale_up_delay_millis`` (:mod:`~jetlet._cluster.scale_up`). A member that takes over as
coordinator loads the job records and the event log from the replicated
store and runs on every job that was running. A job with
``split_brain_protection`` starts only while the cluster holds a majority
of its last known size. A member that leaves gracefully, or this
coordinator leaving, is :mod:`~jetlet._cluster.graceful_leave`'s part: the
jobs take a terminal snapshot and run on without it.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
import os
import time
from collections.abc import Callable
from typing import Any

from jetlet import errors, records
from jetlet._cluster import (
    control,
    coordinator_thread,
    graceful_leave,
    job_ending,
    job_store,
    job_timeouts,
    members_view,
    partition_table,
    scale_up,
    snapshot_data,
    table_keeper,
    take_over,
)
from jetlet._cluster import events as events_mod
from jetlet._cluster import snapshot_coordinator as snapshots_mod
from jetlet._cluster.control import Dispatch, MemberUnreachableError, Operation
from jetlet._cluster.job_records import JobEntry, JobTable, Status, StopReason, about, named, start_problems

log = logging.getLogger(__name__)

RPC_TIMEOUT_S = 30.0
START_RETRY_S = 0.25
"""The pause before an execution whose init could not reach a member starts again."""
START_ATTEMPTS = 40
"""How many times in a row an execution starts again for that (about 10 s) before the job fails."""
_ACTIVE = (Status.RUNNING, Status.STARTING)


class JobCoordinator:
    """The lifecycle of every job this member coordinates. See the module doc."""

    def __init__(
        self,
        member_name: str,
        serial: coordinator_thread.Serial,
        channel: control.ControlChannel,
        members: members_view.MembersView,
        jobs: JobTable,
        event_log: events_mod.EventLog,
        store: job_store.JobStore,
        snapshots: snapshots_mod.SnapshotCoordinator,
        tables: table_keeper.TableKeeper,
        partition_count: int,
        scale_up_delay_s: float,
        has_quorum: Callable[[], bool] = lambda: True,
    ) -> None:
        self.member_name = member_name
        self._serial = serial
        self._channel = channel
        self._members = members
        self._jobs = jobs
        self._events = event_log
        self._store = store
        self._snapshots = snapshots
        self._tables = tables
        self._partition_count = partition_count
        self._has_quorum = has_quorum
        self._ids = itertools.count(int.from_bytes(os.urandom(5), "big") << 16)
        self._executions: dict[int, JobEntry] = {}
        self._start_attempts: dict[int, int] = {}
        """Per job: executions started again in a row because an init could not reach a member."""
        self._scale_up = scale_up.ScaleUp(serial, jobs, members, scale_up_delay_s, self._restart)
        self._left: set[str] = set()
        self._awaiting_quorum: set[int] = set()
        """Jobs with split-brain protection that wait, NOT_RUNNING, for a majority of members."""
        self._timeouts = job_timeouts.JobTimeouts(serial, jobs, self.fail)
        self.ready = True
        """False while a take-over is loading the job records (operations then answer 'retry')."""
        self._leave = graceful_leave.GracefulLeave(
            serial, jobs, snapshots, tables, self.stop, self._member_left, self._executions.get
        )
        self._take_over = take_over.TakeOver(
            member_name, serial, store, event_log, tables, self._member_left, self.adopt, self._set_ready
        )
        self._ending = job_ending.JobEnding(serial, channel, store, self._executions.get, self.fail)
        channel.register(Operation.DONE, self._on_done, Dispatch.INLINE)

    def new_id(self) -> int:
        return next(self._ids)

    def has_executions(self) -> bool:
        """Whether any execution is starting or running (the partition table must then stay put)."""
        return bool(self._executions) or self.recovering

    recovering = False
    """Set while offloaded snapshots are put back into the grid (the table must stay put then too)."""

    # -- starting an execution -----------------------------------------------------------------
    def start_execution(self, entry: JobEntry) -> None:
        """Run the job (again) on the members there are now, as a new execution."""
        if entry.config.get("split_brain_protection") and not self._has_quorum():
            self._await_quorum(entry)
            return
        if entry.final_commit:  # a coordinator that took over, say: the sinks may have committed output
            entry.failure = job_ending.cannot_restart(entry, "its execution stopped")
            self._jobs.transition(entry, Status.FAILED, entry.failure)
            return
        self._executions.pop(entry.execution_id, None)
        execution_id = self.new_id()
        entry.execution_id = execution_id
        entry.stopping = None
        entry.done = set()
        entry.final_metrics = {}
        self._executions[execution_id] = entry
        self._jobs.transition(entry, Status.STARTING)
        self._timeouts.arm(entry)
        coordinator_thread.when_done(
            self._serial, self._tables.ensure(), lambda table: self._send_init(entry, execution_id, table)
        )

    def _send_init(self, entry: JobEntry, execution_id: int, table: Any) -> None:
        if entry.execution_id != execution_id:
            return
        if isinstance(table, BaseException):
            self._start_failed(entry, execution_id, [f"the partition table could not be installed: {table}"])
            return
        assert isinstance(table, partition_table.PartitionTable)
        entry.members = tuple(table.members)
        owners = [entry.members.index(table.owner(p)) for p in range(self._partition_count)]
        source = entry.last_snapshot or entry.restore_from
        fields: dict[str, Any] = {
            "execution_id": execution_id,
            "job_id": entry.id,
            "name": entry.name,
            "definition": entry.definition,
            "config": entry.config,
            "members": list(entry.members),
            "partition_owners": owners,
            "snapshot_id_base": entry.next_snapshot_id - 1,
        }
        if source is not None:
            fields["restore"] = {"prefix": source["prefix"], "snapshot_id": source["id"]}
            problems = snapshot_data.state_mismatch(
                source, entry.vertex_names, entry.config.get("allow_dropping_state", False)
            )
            if problems:
                self._start_failed(entry, execution_id, problems)
                return
        calls = {m: self._channel.call(m, Operation.INIT, **fields) for m in entry.members}
        coordinator_thread.when_all(
            self._serial,
            calls,
            RPC_TIMEOUT_S,
            lambda outcomes: self._initialized(entry, execution_id, outcomes),
        )

    def _initialized(self, entry: JobEntry, execution_id: int, outcomes: dict[str, Any]) -> None:
        if entry.execution_id != execution_id:  # superseded meanwhile: drop what was built
            self._forget(execution_id, entry.members)
            return
        failed: dict[str, str] = {}
        unreachable: list[str] = []
        cut_off: dict[str, str] = {}
        """Members whose init could not reach another member (a link not reconnected yet)."""
        restored: dict[str, int] = {}
        broadcast_read: dict[str, dict[str, int]] = {}
        for member, outcome in outcomes.items():
            if isinstance(outcome, MemberUnreachableError):
                unreachable.append(member)
            elif isinstance(outcome, errors.ClusterUnavailableError):
                cut_off[member] = str(outcome)
            elif isinstance(outcome, BaseException):
                failed[member] = getattr(outcome, "remote_traceback", "") or str(outcome)
            else:
                for vertex, count in outcome.get("restored_counts", {}).items():
                    restored[vertex] = restored.get(vertex, 0) + count
                broadcast_read[member] = outcome.get("broadcast_counts", {})
        cut_off.update(snapshot_data.short_broadcast_reads(broadcast_read))  # a read racing a move: again
        if (unreachable or cut_off) and not failed:
            for member in unreachable:
                self._members.mark_lost(member)
            attempts = self._start_attempts.get(entry.id, 0) + 1
            if self._members.live() and attempts <= START_ATTEMPTS:
                self._start_attempts[entry.id] = attempts
                self._forget(execution_id, entry.members)
                log.warning(
                    "%s: %s at start; starting again",
                    named(entry),
                    "; ".join([*(f"{m} unreachable" for m in unreachable), *cut_off.values()]),
                    extra=about(entry),
                )
                if cut_off:  # give the links a moment to be reconnected
                    self._serial.call_later(START_RETRY_S, self._start_again, entry, execution_id)
                else:
                    self.start_execution(entry)
                return
        self._start_attempts.pop(entry.id, None)
        problems = start_problems({**failed, **cut_off})
        source = entry.last_snapshot or entry.restore_from
        if source is not None and not problems and not unreachable:
            problems += snapshot_data.incomplete_restore(source, restored)
        problems += [f"member {m} is not connected" for m in unreachable]
        if problems:
            self._start_failed(entry, execution_id, problems, "\n".join(dict.fromkeys(failed.values())))
            return
        if entry.stopping is not None:  # stopped while starting: nothing ran, apply the stop at once
            entry.done = set(entry.members)
            self._execution_ended(entry)
            return
        if entry.recovering_since is not None:
            log.info(
                "%s recovered: running again on %s from %s, %.1f s after the member loss",
                named(entry),
                ", ".join(entry.members),
                f"snapshot {entry.last_snapshot['id']}" if entry.last_snapshot else "the start",
                time.monotonic() - entry.recovering_since,
                extra=about(entry),
            )
            entry.recovering_since = None
        self._jobs.transition(entry, Status.RUNNING, "every member initialized its execution")
        for member in entry.members:
            self._channel.send(member, Operation.START, execution_id=execution_id)
        if entry.snapshots_enabled:
            self._snapshots.schedule(entry)

    def _start_again(self, entry: JobEntry, execution_id: int) -> None:
        """After :data:`START_RETRY_S`: start the execution whose init could not reach a member again."""
        if entry.execution_id != execution_id or entry.is_terminal:
            return  # superseded meanwhile (a member loss restarted it, say)
        if entry.stopping is not None:  # stopped meanwhile: nothing runs, apply the stop at once
            entry.done = set(entry.members)
            self._execution_ended(entry)
            return
        self.start_execution(entry)

    def _start_failed(self, entry: JobEntry, execution_id: int, problems: list[str], trace: str = "") -> None:
        entry.failure = "the job could not start: " + "; ".join(problems)
        entry.failure_traceback = trace
        self._executions.pop(execution_id, None)
        self._forget(execution_id, entry.members)
        self._jobs.transition(entry, Status.FAILED, entry.failure)

    def _forget(self, execution_id: int, members: tuple[str, ...]) -> None:
        for member in members:
            self._channel.send(member, Operation.FORGET, execution_id=execution_id)

    # -- stopping and ending ---------------------------------------------------------------------
    def stop(self, entry: JobEntry, reason: StopReason, message: str) -> None:
        """Cancel the current execution on every member; ``reason`` decides what follows.

        Only a failure or a cancellation stops a job whose sinks commit their final output: it
        could not run again exactly (:mod:`~jetlet._cluster.job_ending`), so it ends by itself.
        """
        if entry.stopping in (StopReason.FAIL, StopReason.CANCEL) or entry.is_terminal:
            return
        if entry.final_commit and reason not in (StopReason.FAIL, StopReason.CANCEL):
            return
        entry.stopping = reason
        self._snapshots.abort(entry, f"the execution is stopping: {message}")
        for member in entry.members:
            if member not in entry.done:
                self._channel.send(member, Operation.CANCEL, execution_id=entry.execution_id, reason=message)

    def fail(self, entry: JobEntry, message: str, trace: str, cancelled: bool = False) -> bool:
        """The first failure wins: keep its message and traceback, stop the execution; True if it won."""
        if entry.is_terminal or entry.failure:
            return False
        entry.failure, entry.failure_traceback, entry.cancelled = message, trace, cancelled
        self.stop(entry, StopReason.CANCEL if cancelled else StopReason.FAIL, message)
        return True

    def _on_done(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        self._serial.submit(self._done, body)
        return {}

    def _done(self, body: dict[str, Any]) -> None:
        entry = self._executions.get(body["execution_id"])
        if entry is None:
            return
        if "error" in body and body.get("topology"):
            # a member lost its connection to another: the job restarts (or suspends), it does not fail
            if entry.stopping is None:
                self.after_member_loss(entry, "a member lost its connection to another while the job ran")
        elif (
            "error" in body
            and not body.get("cancelled")
            and self.fail(entry, f"{body['error']} (on member {body['member']})", body.get("traceback", ""))
        ):
            entry.failure_cause = body.get("cause", b"")
        self.member_done(entry, body["execution_id"], body["member"], body.get("metrics", {}))

    def member_done(self, entry: JobEntry, execution_id: int, member: str, metrics: dict[str, Any]) -> None:
        """A member's share of an execution ended; when all have, the job ends, stops or runs again."""
        if execution_id != entry.execution_id or member in entry.done or entry.status is not Status.RUNNING:
            return
        entry.done.add(member)
        entry.final_metrics[member] = metrics
        if entry.done >= set(entry.members):
            self._execution_ended(entry)

    def _execution_ended(self, entry: JobEntry) -> None:
        execution_id = entry.execution_id
        self._executions.pop(execution_id, None)
        self._forget(execution_id, entry.members)
        self._snapshots.abort(entry, "the execution ended")
        reason, entry.stopping = entry.stopping, None
        if reason is StopReason.FAIL and entry.config.get("suspend_on_failure"):
            reason = StopReason.SUSPEND  # keep the state: the user can fix the cause and resume
            entry.suspension_cause, entry.failure = entry.failure, ""
        if reason is StopReason.HANDOVER:
            self._store.save(entry.state())  # as it is: the next coordinator runs it on
        elif reason is StopReason.RESTART:
            entry.restarts += 1
            self._events.append(
                records.EventKind.JOB_RESTARTED,
                job_id=entry.id,
                job_name=entry.name,
                reason=entry.restart_reason,
                details={"previous_members": list(entry.members)},
            )
            self.start_execution(entry)
        elif reason is StopReason.SUSPEND:
            self._jobs.transition(entry, Status.SUSPENDED, entry.suspension_cause)
        else:  # it ends: first its offloaded snapshot goes, so that no later cluster resumes it
            self._store.forget_offloaded(entry.id)
            if reason in (StopReason.FAIL, StopReason.CANCEL):
                self._jobs.transition(entry, Status.FAILED, entry.failure)
            else:
                self._jobs.transition(entry, Status.COMPLETED, "every member completed its share")

    # -- members ---------------------------------------------------------------------------------
    def after_member_loss(self, entry: JobEntry, reason: str) -> None:
        """Restart the job on the members left, from its last snapshot; without auto-scaling, suspend it."""
        if entry.status is Status.SUSPENDED or entry.is_terminal:
            return
        if entry.final_commit:
            self.fail(entry, job_ending.cannot_restart(entry, reason), "")
            return
        if not entry.config.get("auto_scaling", True):
            entry.suspension_cause = reason
            self.stop(entry, StopReason.SUSPEND, reason)
            return
        log.warning(
            "%s recovering: %s; restarting it on the members left from %s",
            named(entry),
            reason,
            f"snapshot {entry.last_snapshot['id']}" if entry.last_snapshot else "the start",
            extra=about(entry),
        )
        entry.recovering_since = time.monotonic()
        entry.restart_reason = reason
        self.stop(entry, StopReason.RESTART, reason)

    def member_lost(self, member: str, why: str) -> None:
        """``member`` is gone: restart the jobs that ran on it (its share counts as done)."""
        self._member_left(member, why)
        for entry in list(self._jobs.active()):
            if member in entry.members and entry.status in (Status.RUNNING, Status.STARTING):
                self.after_member_loss(entry, f"member {member} left the cluster while the job ran")
                self.member_done(entry, entry.execution_id, member, {})

    def members_joined(self, joined: list[str]) -> None:
        """New members: auto-scaling jobs rescale onto them after ``scale_up_delay_millis``; jobs
        waiting for a majority start once there is one."""
        for member in joined:
            self._left.discard(member)
            self._events.append(records.EventKind.MEMBER_JOINED, member=member)
            self._log_members(f"member {member} joined")
        self._scale_up.joined()
        if self._awaiting_quorum and self._has_quorum():
            waiting = [self._jobs.get(job_id) for job_id in sorted(self._awaiting_quorum)]
            self._awaiting_quorum.clear()
            for entry in waiting:
                if entry is not None and entry.status is Status.NOT_RUNNING:
                    log.info("%s: a majority is back: it runs again", named(entry), extra=about(entry))
                    self.start_execution(entry)

    def members_dropped(self) -> None:
        """The membership dropped members: jobs with split-brain protection stop unless a majority is
        left (a job restarted at once on a lost connection, while the lost were still listed, must not
        run on in a minority once the membership drops them)."""
        if self._has_quorum():
            return
        for entry in list(self._executions.values()):
            if entry.config.get("split_brain_protection") and entry.stopping is None:
                self._restart(entry, "split-brain protection: the members left are not a majority")

    def _await_quorum(self, entry: JobEntry) -> None:
        """Split-brain protection without a majority: the job waits, NOT_RUNNING, as in Jet.

        It runs again (from its last snapshot) once members join and the members present are a
        majority of the largest cluster known again; a side of a split that is a minority never
        runs it meanwhile. Failing it instead would end for good a job that the majority runs on.
        """
        self._executions.pop(entry.execution_id, None)
        self._awaiting_quorum.add(entry.id)
        reason = (
            "split-brain protection: the members present are not a majority of the largest cluster "
            f"known ({len(self._members.all())} now): the job waits for members to join"
        )
        self._jobs.transition(entry, Status.NOT_RUNNING, reason)

    def _member_left(self, member: str, why: str) -> None:
        """One ``member_left`` event per departure (a leave, then its connection dropping, is one)."""
        if member not in self._left:
            self._left.add(member)
            self._events.append(records.EventKind.MEMBER_LEFT, member=member, reason=why)
            self._log_members(f"member {member} left ({why})")

    def _log_members(self, what: str) -> None:
        """As Hazelcast logs its view: ``Members {size:3} [m1 (coordinator), m2, m3]``."""
        live = self._members.live()
        coordinator = self._members.coordinator()
        shown = ", ".join(f"{m} (coordinator)" if m == coordinator else m for m in live)
        log.info("%s; Members {size:%d} [%s]", what, len(live), shown)

    def _restart(self, entry: JobEntry, reason: str) -> None:
        entry.restart_reason = reason
        self.stop(entry, StopReason.RESTART, reason)

    # -- graceful leave (jetlet._cluster.graceful_leave) -------------------------------------------
    def member_leaving(self, member: str) -> concurrent.futures.Future[dict[str, Any]]:
        """``member`` leaves gracefully: its jobs move off it (:meth:`.GracefulLeave.member_leaving`)."""
        return self._leave.member_leaving(member)

    def hand_over(self) -> concurrent.futures.Future[dict[str, Any]]:
        """This coordinator leaves (:meth:`.GracefulLeave.hand_over`); operations answer 'retry' from now."""
        self.ready = False
        return self._leave.hand_over()

    # -- taking over (jetlet._cluster.take_over) -------------------------------------------------
    def take_over(self, old_coordinator: str) -> concurrent.futures.Future[dict[str, Any]]:
        """This member is the coordinator now (:meth:`.TakeOver.take_over`): the records loaded, jobs run on.

        The future completes once the partition table is installed for the members there are.
        """
        return self._take_over.take_over(old_coordinator)

    def _set_ready(self, ready: bool) -> None:
        self.ready = ready

    def adopt(self, states: list[dict[str, Any]], why: str) -> int:
        """Know the jobs of ``states`` (records kept elsewhere); run on those that were running."""
        resumed = 0
        for state in states:
            if self._jobs.get(state["id"]) is not None:
                continue
            entry = JobEntry.from_state(state)
            self._jobs.add(entry, persist=False)
            if not entry.is_terminal and entry.status is not Status.SUSPENDED:
                log.warning("%s: running it on (%s)", named(entry), why, extra=about(entry))
                self.start_execution(entry)
                resumed += 1
        return resumed

    def clear(self) -> None:
        """Forget every execution and timer (this member was removed from its cluster).

        Until it is back in a cluster (:meth:`rejoined`), operations asked of it answer 'retry':
        alone, it would answer from its emptied table that a running job does not exist.
        """
        self._executions.clear()
        self._left.clear()
        self._awaiting_quorum.clear()
        self._timeouts.clear()
        self._scale_up.cancel()
        self.ready = False

    def rejoined(self) -> None:
        """This member is back in a cluster: it answers again (as its coordinator, if it becomes one)."""
        self.ready = True

    def close(self) -> None:
        self._scale_up.cancel()
