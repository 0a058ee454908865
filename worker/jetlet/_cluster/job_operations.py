"""What users ask of the coordinator (Jet's ``JobCoordinationService``): submit, steer, read jobs.

Theory of operation
-------------------
Every member's REST API forwards these operations to the coordinator over
the control channel (``submit``, ``cancel_job``, ``suspend_job``, ...). Here
each is a handler that runs its logic on the coordinator thread and answers
with a future, so an operation that waits — ``join``, a suspend that waits
for the terminal snapshot, the event feed's long-poll — holds no thread
while it waits. Each waits at most a bounded time and then answers with the
state it sees (the client repeats a wait that must last longer).

A member that is not the coordinator (a stale view), or a coordinator still
loading the job records after taking over, answers
:class:`~jetlet.errors.ClusterUnavailableError` with a retry delay; the
forwarding member waits for the next coordinator and asks again.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from collections.abc import Callable
from typing import Any

from jetlet import errors, job
from jetlet._cluster import control, coordinator_thread, job_coordinator, job_store, members_view
from jetlet._cluster import events as events_mod
from jetlet._cluster import snapshot_coordinator as snapshots_mod
from jetlet._cluster.control import Dispatch, Operation
from jetlet._cluster.job_records import TERMINAL, JobEntry, JobTable, Status, StopReason, about, named
from jetlet._cluster.job_service import job_config_from_dict, job_config_to_dict

log = logging.getLogger(__name__)

STATE_WAIT_S = 30.0
"""How long a suspend, resume or restart waits for the status it leads to before answering."""
CANCEL_WAIT_S = 10.0
METRICS_TIMEOUT_S = 2.0
"""Metrics are best effort: a member that does not answer in time is left out."""
MAX_EVENTS_WAIT_S = 30.0

Answer = concurrent.futures.Future[dict[str, Any]]


class JobOperations:
    """The coordinator's user-facing operations (see the module doc)."""

    def __init__(
        self,
        serial: coordinator_thread.Serial,
        channel: control.ControlChannel,
        members: members_view.MembersView,
        jobs: JobTable,
        event_log: events_mod.EventLog,
        store: job_store.JobStore,
        lifecycle: job_coordinator.JobCoordinator,
        snapshots: snapshots_mod.SnapshotCoordinator,
    ) -> None:
        self._serial = serial
        self._channel = channel
        self._members = members
        self._jobs = jobs
        self._events = event_log
        self._store = store
        self._lifecycle = lifecycle
        self._snapshots = snapshots
        table: dict[Operation, Callable[[dict[str, Any]], dict[str, Any] | Answer]] = {
            Operation.SUBMIT: self._submit,
            Operation.LIST_JOBS: lambda body: {"records": [e.record().to_dict() for e in self._jobs.all()]},
            Operation.GET_JOB: lambda body: {"record": self._jobs.find(body["key"]).record().to_dict()},
            Operation.JOIN_JOB: self._join,
            Operation.CANCEL_JOB: self._cancel,
            Operation.SUSPEND_JOB: self._suspend,
            Operation.RESUME_JOB: self._resume,
            Operation.RESTART_JOB: self._restart,
            Operation.JOB_METRICS: self._metrics,
            Operation.EXPORT_SNAPSHOT: self._export,
            Operation.LIST_SNAPSHOTS: lambda body: _mapped(
                self._store.list_exported(), lambda s: {"snapshots": s}
            ),
            Operation.DELETE_SNAPSHOT: self._delete_snapshot,
        }
        for op, handler in table.items():
            channel.register(op, self._on_coordinator_thread(handler), Dispatch.INLINE)
        channel.register(Operation.EVENTS, self._read_events, Dispatch.INLINE)

    def _on_coordinator_thread(
        self, handler: Callable[[dict[str, Any]], dict[str, Any] | Answer]
    ) -> Callable[[str, dict[str, Any]], Answer]:
        def serve(peer: str, body: dict[str, Any]) -> Answer:
            answer: Answer = concurrent.futures.Future()

            def run() -> None:
                self._check_coordinator()
                _chain(handler(body), answer)

            ran = self._serial.submit(run)
            ran.add_done_callback(lambda f: _fail_from(f, answer))
            return answer

        return serve

    def _check_coordinator(self) -> None:
        if not self._members.is_coordinator():
            raise errors.ClusterUnavailableError(
                f"{self._members.member_name} is not the coordinator ({self._members.coordinator()} is)", 0.2
            )
        if not self._lifecycle.ready:
            raise errors.ClusterUnavailableError(
                "the coordinator is taking over: its job records are loading", 0.5
            )

    # -- submitting -------------------------------------------------------------------------------
    def _submit(self, body: dict[str, Any]) -> dict[str, Any] | Answer:
        parsed = job_config_from_dict(body["config"])
        if parsed.name is not None and any(e.name == parsed.name for e in self._jobs.active()):
            raise errors.JobStateConflictError(f"a job named {parsed.name!r} is already active")
        job_id = self._lifecycle.new_id()
        name = parsed.name or job.id_to_string(job_id)
        entry = JobEntry(job_id, name, body["definition"], job_config_to_dict(parsed))
        entry.dag_dot, entry.vertex_names = body["dag_dot"], frozenset(body["vertex_names"])
        if not parsed.initial_snapshot_name:
            return self._register(entry)
        exported = self._store.exported(parsed.initial_snapshot_name)
        answer: Answer = concurrent.futures.Future()

        def start_from(found: Any) -> None:
            if isinstance(found, BaseException) or found is None:
                answer.set_exception(
                    errors.InvalidJobError(
                        "config.initial_snapshot_name",
                        f"no snapshot named {parsed.initial_snapshot_name!r} exists in this cluster",
                    )
                )
                return
            entry.restore_from = found
            entry.next_snapshot_id = found["id"] + 1
            _chain(self._register(entry), answer)

        coordinator_thread.when_done(self._serial, exported, start_from)
        return answer

    def _register(self, entry: JobEntry) -> Answer:
        """Run the new job; answer once its record is in the snapshot directory (if the cluster has one).

        From then on it survives the loss of the whole cluster (a job with no snapshot yet
        starts from the beginning: :mod:`~jetlet._cluster.durable`). Its first snapshot's
        offload waits for this write (one store thread), so its sinks commit nothing before.
        A record that cannot be written fails the job, saying why: it would be lost silently.
        """
        if any(e.name == entry.name for e in self._jobs.active()):
            raise errors.JobStateConflictError(f"a job named {entry.name!r} is already active")
        self._jobs.add(entry)
        self._lifecycle.start_execution(entry)  # its first transition logs "submitted, starting"
        answer: Answer = concurrent.futures.Future()

        def written(outcome: object) -> None:
            if isinstance(outcome, BaseException) and not entry.is_terminal:
                log.error("%s: %s", named(entry), outcome, extra=about(entry))
                why = f"its record could not be written to the snapshot directory: {outcome}"
                self._lifecycle.fail(entry, why, "")
            _set(answer, {"record": entry.record().to_dict()})

        coordinator_thread.when_done(self._serial, self._store.offload(entry.id, entry.state()), written)
        return answer

    # -- steering ---------------------------------------------------------------------------------
    def _wait(self, entry: JobEntry, statuses: frozenset[Status], timeout_s: float) -> Answer:
        """The entry's record once it reaches ``statuses``, or as it is after ``timeout_s``."""
        answer: Answer = concurrent.futures.Future()
        reached = self._jobs.wait_for(entry, statuses)
        reached.add_done_callback(lambda f: _set(answer, {"record": f.result().to_dict()}))
        if not reached.done():
            self._serial.call_later(timeout_s, lambda: _set(answer, {"record": entry.record().to_dict()}))
        return answer

    def _join(self, body: dict[str, Any]) -> Answer:
        return self._wait(self._jobs.find(body["key"]), TERMINAL, float(body["timeout"]))

    def _cancel(self, body: dict[str, Any]) -> Answer:
        entry = self._jobs.find(body["key"])
        if entry.is_terminal:
            raise errors.JobStateConflictError(f"job {entry.name!r} has already ended ({entry.status.value})")
        if entry.status in (Status.SUSPENDED, Status.NOT_RUNNING):  # nothing runs: it just ends
            entry.failure, entry.cancelled = "the job was cancelled", True
            self._jobs.transition(entry, Status.FAILED, entry.failure)
        else:
            self._lifecycle.fail(entry, "the job was cancelled", "", cancelled=True)
        return self._wait(entry, TERMINAL, CANCEL_WAIT_S)

    def _running(self, key: str, operation: str) -> JobEntry:
        entry = self._jobs.find(key)
        if entry.status is not Status.RUNNING or entry.stopping is not None:
            raise errors.JobStateConflictError(
                f"job {entry.name!r} is not running ({entry.status.value}), cannot {operation}"
            )
        if entry.final_commit:  # (jetlet._cluster.job_ending) it could not run again exactly
            raise errors.JobStateConflictError(
                f"job {entry.name!r} is committing its final output, cannot {operation}"
            )
        return entry

    def _suspend(self, body: dict[str, Any]) -> Answer:
        """Take a terminal snapshot, stop every member's execution and keep the job, SUSPENDED.

        Without a processing guarantee there is no snapshot: a resumed job starts over.
        """
        entry = self._running(body["key"], "suspend")

        def stop(problem: str | None) -> None:
            if problem is not None:
                log.warning(
                    "%s: suspending from its last snapshot: %s", named(entry), problem, extra=about(entry)
                )
            entry.suspension_cause = "suspended by the user"
            self._lifecycle.stop(entry, StopReason.SUSPEND, "the job is being suspended")

        if entry.snapshots_enabled:
            self._snapshots.take(entry, True, stop)
        else:
            stop(None)
        return self._wait(entry, frozenset({Status.SUSPENDED, *TERMINAL}), STATE_WAIT_S)

    def _resume(self, body: dict[str, Any]) -> Answer:
        entry = self._jobs.find(body["key"])
        if entry.status is not Status.SUSPENDED:
            raise errors.JobStateConflictError(f"job {entry.name!r} is not suspended ({entry.status.value})")
        self._lifecycle.start_execution(entry)
        return self._wait(entry, frozenset({Status.RUNNING, *TERMINAL}), STATE_WAIT_S)

    def _restart(self, body: dict[str, Any]) -> Answer:
        """Stop the execution and start a new one on the members there are now."""
        entry = self._running(body["key"], "restart")
        entry.restart_reason = "restarted by the user"
        self._lifecycle.stop(entry, StopReason.RESTART, "the job is being restarted")
        answer: Answer = concurrent.futures.Future()
        restarted = self._wait(entry, frozenset({Status.STARTING, *TERMINAL}), STATE_WAIT_S)

        def then(_: Answer) -> None:
            _chain(self._wait(entry, frozenset({Status.RUNNING, *TERMINAL}), STATE_WAIT_S), answer)

        restarted.add_done_callback(then)
        return answer

    def _metrics(self, body: dict[str, Any]) -> Answer:
        """Live readings of running members, final ones of members done: ``metrics`` per
        ``member/tasklet`` and ``samples``, every member's labelled measurements (``job.metrics()``)."""
        entry = self._jobs.find(body["key"])
        per_member = dict(entry.final_metrics)
        calls = {
            m: self._channel.call(m, Operation.METRICS, execution_id=entry.execution_id)
            for m in entry.members
            if m not in per_member and entry.status is Status.RUNNING
        }
        answer: Answer = concurrent.futures.Future()

        def merge(outcomes: dict[str, Any]) -> None:
            for member, outcome in outcomes.items():
                if isinstance(outcome, dict):
                    per_member[member] = outcome
            merged = {
                f"{m}/{name}": values
                for m, reading in per_member.items()
                for name, values in reading.get("value", {}).items()
            }
            measured = [sample for reading in per_member.values() for sample in reading.get("samples", ())]
            _set(answer, {"value": {"metrics": merged, "samples": measured}})

        coordinator_thread.when_all(self._serial, calls, METRICS_TIMEOUT_S, merge)
        return answer

    # -- named snapshots --------------------------------------------------------------------------
    def _export(self, body: dict[str, Any]) -> Answer:
        """Save the job's state as a named snapshot; with ``cancel``, the job then ends."""
        name, cancel = body["name"], body["cancel"]
        if not isinstance(name, str) or not name.strip() or "/" in name:
            raise errors.InvalidJobError("name", f"must be a non-empty name without '/', got {name!r}")
        entry = self._jobs.find(body["key"])
        if not entry.snapshots_enabled:
            raise errors.JobStateConflictError(
                f"job {entry.name!r} has processing guarantee NONE: it takes no snapshots to export"
            )
        answer: Answer = concurrent.futures.Future()

        def export(problem: str | None) -> None:
            if problem is not None:
                answer.set_exception(
                    errors.JetletError(f"job {entry.name!r}: the snapshot failed: {problem}")
                )
                return
            source = entry.last_snapshot
            if source is None:
                answer.set_exception(
                    errors.JobStateConflictError(f"job {entry.name!r} has no complete snapshot to export")
                )
                return
            meta = {
                **source,
                "prefix": f"exported/{name}",
                "name": name,
                "exported_time": int(time.time() * 1000),
            }

            def copied(outcome: Any) -> None:
                if isinstance(outcome, BaseException):
                    answer.set_exception(outcome)
                    return
                if cancel and not entry.is_terminal:
                    self._lifecycle.fail(entry, "the job was cancelled", "", cancelled=True)
                _set(answer, {"snapshot": meta})

            coordinator_thread.when_done(self._serial, self._store.export(source["prefix"], meta), copied)

        if entry.status is Status.RUNNING and entry.stopping is None:
            self._snapshots.take(entry, cancel, export)
        elif entry.status is Status.SUSPENDED:
            export(None)
        else:
            raise errors.JobStateConflictError(
                f"job {entry.name!r} is {entry.status.value}: only a running or suspended job can export"
            )
        return answer

    def _delete_snapshot(self, body: dict[str, Any]) -> Answer:
        name = body["name"]

        def deleted(found: bool) -> dict[str, Any]:
            if not found:
                raise errors.JobNotFoundError(f"no snapshot named {name!r}")
            return {}

        return _mapped(self._store.delete_exported(name), deleted)

    # -- the event feed ---------------------------------------------------------------------------
    def _read_events(self, peer: str, body: dict[str, Any]) -> Answer:
        since, timeout = int(body["since"]), min(float(body.get("timeout", 0)), MAX_EVENTS_WAIT_S)
        answer: Answer = concurrent.futures.Future()
        page = self._events.read_async(since)
        page.add_done_callback(lambda f: _set(answer, _page(f.result())))
        if not page.done():
            self._serial.call_later(timeout, lambda: _set(answer, _page(self._events.read(since))))
        return answer


def _page(page: events_mod.EventsPage) -> dict[str, Any]:
    return {"events": [e.to_dict() for e in page.events], "last_id": page.last_id}


def _set(future: Answer, value: dict[str, Any]) -> None:
    if not future.done():
        future.set_result(value)


def _fail_from(ran: concurrent.futures.Future[None], answer: Answer) -> None:
    error = (
        ran.exception() if not ran.cancelled() else errors.ClusterUnavailableError("the coordinator stopped")
    )
    if error is not None and not answer.done():
        answer.set_exception(error)


def _chain(result: dict[str, Any] | Answer, answer: Answer) -> None:
    if not isinstance(result, concurrent.futures.Future):
        _set(answer, result)
        return

    def copy(done: Answer) -> None:
        if answer.done():
            return
        error = done.exception()
        if error is not None:
            answer.set_exception(error)
        else:
            answer.set_result(done.result())

    result.add_done_callback(copy)


def _mapped(future: concurrent.futures.Future[Any], fn: Callable[[Any], dict[str, Any]]) -> Answer:
    answer: Answer = concurrent.futures.Future()

    def done(f: concurrent.futures.Future[Any]) -> None:
        try:
            _set(answer, fn(f.result()))
        except Exception as exc:
            if not answer.done():
                answer.set_exception(exc)

    future.add_done_callback(done)
    return answer
