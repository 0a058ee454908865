"""The coordinator's job records: typed status, why an execution stops, and the one transition function.

Theory of operation
-------------------
A :class:`JobEntry` is everything the coordinator knows of one job: its
planned DAG (pickled once, at submission), its config, its status and its
current *execution* (a job runs again after a restart, a resume or a member
loss; members know executions, never jobs). Entries live in a
:class:`JobTable` that only the coordinator thread touches.

Every status change goes through :meth:`JobTable.transition`, which checks it
against :data:`ALLOWED` (Jet's job states), stamps the completion time of a
terminal status, appends a ``job_status`` event to the event feed, hands the
entry to ``persist`` (the replicated job store, so that a coordinator that
takes over knows every job) and completes the futures of callers waiting for
that status. Nothing else writes ``status``.

:class:`StopReason` says what happens when the members have all stopped the
current execution (Jet's ``TerminationMode``): the job fails, is cancelled,
is suspended, or is restarted as a new execution.
"""

from __future__ import annotations

import base64
import concurrent.futures
import enum
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from jetlet import config, errors, job, records
from jetlet._cluster import events as events_mod
from jetlet._cluster import logs

log = logging.getLogger(__name__)

Status = job.JobStatus
TERMINAL = records.TERMINAL_STATUSES

ALLOWED: Mapping[Status, frozenset[Status]] = {
    Status.NOT_RUNNING: frozenset({Status.NOT_RUNNING, Status.STARTING, Status.FAILED, Status.SUSPENDED}),
    Status.STARTING: frozenset(
        {Status.STARTING, Status.RUNNING, Status.FAILED, Status.SUSPENDED, Status.NOT_RUNNING}
    ),
    Status.RUNNING: frozenset(
        {Status.STARTING, Status.SUSPENDED, Status.FAILED, Status.COMPLETED, Status.NOT_RUNNING}
    ),
    Status.SUSPENDED: frozenset({Status.STARTING, Status.FAILED}),
    Status.FAILED: frozenset(),
    Status.COMPLETED: frozenset(),
}
"""Which status may follow which (STARTING -> STARTING: an execution that lost a member before it ran;
-> NOT_RUNNING: a job with split-brain protection waiting for a majority)."""


class StopReason(enum.Enum):
    """Why the current execution is being stopped, deciding what follows when every member has stopped."""

    FAIL = "fail"
    CANCEL = "cancel"
    SUSPEND = "suspend"
    RESTART = "restart"
    HANDOVER = "handover"
    """The coordinator is leaving: the job's record is kept as it is for the next coordinator to run on."""


class JobEntry:
    """The coordinator's record of one job (mutated on the coordinator thread only)."""

    def __init__(self, job_id: int, name: str, definition: bytes, job_config: Mapping[str, Any]) -> None:
        self.id = job_id
        self.name = name
        self.definition = definition
        """The planned DAG, cloudpickled once at submission; members unpickle it, nobody plans again."""
        self.config = dict(job_config)
        self.submission_time = int(time.time() * 1000)
        self.completion_time: int | None = None
        self.status = Status.NOT_RUNNING
        self.failure = ""
        self.failure_traceback = ""
        self.failure_cause = b""
        """The user's own exception, cloudpickled (empty if it did not pickle)."""
        self.cancelled = False
        self.dag_dot = ""
        self.suspension_cause = ""
        self.restarts = 0
        self.execution_id = 0
        self.members: tuple[str, ...] = ()
        self.done: set[str] = set()
        self.stopping: StopReason | None = None
        self.final_metrics: dict[str, dict[str, Any]] = {}
        """Each member's metrics as it reported them when its share of the execution ended (``value``:
        per tasklet, ``samples``: the labelled measurements)."""
        self.last_snapshot: dict[str, Any] | None = None
        """The last complete snapshot: ``id``, grid ``prefix``, entry ``counts`` per vertex, ``bytes``..."""
        self.next_snapshot_id = 1
        self.snapshot_count = 0
        self.final_commit = False
        """Its sinks were granted their final commit: no more snapshots, the job never restarts
        (``jetlet._cluster.job_ending``)."""
        self.restore_from: dict[str, Any] | None = None
        """An exported snapshot to start the first execution from (``initial_snapshot_name``)."""
        self.vertex_names: frozenset[str] = frozenset()
        """The DAG's vertices (to check that a snapshot's state has somewhere to go)."""
        self.restart_reason = ""
        self.recovering_since: float | None = None
        """When (``time.monotonic()``) a member loss made the job restart; None once it runs again."""
        self.waiters: list[tuple[frozenset[Status], concurrent.futures.Future[records.JobRecord]]] = []

    @property
    def guarantee(self) -> config.ProcessingGuarantee:
        return config.ProcessingGuarantee(self.config.get("processing_guarantee", "NONE"))

    @property
    def snapshots_enabled(self) -> bool:
        return self.guarantee is not config.ProcessingGuarantee.NONE

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL

    def state(self) -> dict[str, Any]:
        """What a coordinator that takes over needs to run the job on (kept in the replicated store)."""
        return {
            "id": self.id,
            "name": self.name,
            "definition": self.definition,
            "config": self.config,
            "submission_time": self.submission_time,
            "completion_time": self.completion_time,
            "status": self.status.value,
            "failure": self.failure,
            "failure_traceback": self.failure_traceback,
            "failure_cause": self.failure_cause,
            "cancelled": self.cancelled,
            "dag_dot": self.dag_dot,
            "last_snapshot": self.last_snapshot,
            "next_snapshot_id": self.next_snapshot_id,
            "snapshot_count": self.snapshot_count,
            "suspension_cause": self.suspension_cause,
            "restore_from": self.restore_from,
            "restarts": self.restarts,
            "vertex_names": sorted(self.vertex_names),
            "final_commit": self.final_commit,
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> JobEntry:
        entry = cls(state["id"], state["name"], state["definition"], state["config"])
        entry.submission_time = state["submission_time"]
        entry.completion_time = state["completion_time"]
        entry.status = Status(state["status"])
        entry.failure = state["failure"]
        entry.failure_traceback = state.get("failure_traceback", "")
        entry.failure_cause = state.get("failure_cause", b"")
        entry.cancelled = state["cancelled"]
        entry.dag_dot = state["dag_dot"]
        entry.last_snapshot = state["last_snapshot"]
        entry.next_snapshot_id = state["next_snapshot_id"]
        entry.snapshot_count = state.get("snapshot_count", 0)
        entry.suspension_cause = state["suspension_cause"]
        entry.restore_from = state["restore_from"]
        entry.restarts = state.get("restarts", 0)
        entry.vertex_names = frozenset(state.get("vertex_names", ()))
        entry.final_commit = state.get("final_commit", False)
        return entry

    def record(self) -> records.JobRecord:
        return records.JobRecord(
            id=self.id,
            name=self.name,
            status=self.status,
            submission_time=self.submission_time,
            completion_time=self.completion_time,
            failure=self.failure,
            failure_traceback=self.failure_traceback,
            failure_cause=base64.b64encode(self.failure_cause).decode("ascii"),
            cancelled=self.cancelled,
            config=self.config,
            dag_dot=self.dag_dot,
            suspension_cause=self.suspension_cause,
            snapshot=snapshot_summary(self.last_snapshot, self.snapshot_count),
            restarts=self.restarts,
            execution_id=self.execution_id,
        )


JOB_COUNTS = (
    "jobs.submitted",
    "jobs.executionStarted",
    "jobs.completedSuccessfully",
    "jobs.completedWithFailure",
)
"""The names of :attr:`JobTable.counts` (Jet's)."""
_COUNTED_STATUS = {
    Status.STARTING: "jobs.executionStarted",
    Status.COMPLETED: "jobs.completedSuccessfully",
    Status.FAILED: "jobs.completedWithFailure",
}


class JobTable:
    """Every job the coordinator knows; the only place where a job's status changes."""

    def __init__(
        self,
        events: events_mod.EventLog,
        persist: Callable[[JobEntry], None],
        now_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self._entries: dict[int, JobEntry] = {}
        self._events = events
        self._persist = persist
        self._now_ms = now_ms
        self.counts = dict.fromkeys(JOB_COUNTS, 0)
        """Jet's cluster metrics, counted by this member while it coordinates: jobs submitted here,
        executions started, jobs completed successfully or with a failure."""

    def add(self, entry: JobEntry, persist: bool = True) -> None:
        """A job submitted to this coordinator (``persist``) or loaded by a take-over (not counted)."""
        self._entries[entry.id] = entry
        if persist:
            self.counts["jobs.submitted"] += 1
            self._persist(entry)

    def clear(self) -> None:
        """Forget every job (this member was removed from its cluster: its records are stale)."""
        for entry in self._entries.values():
            for _, future in entry.waiters:
                if not future.done():
                    future.set_exception(errors.ClusterUnavailableError("this member left its cluster", 1.0))
        self._entries.clear()

    def get(self, job_id: int) -> JobEntry | None:
        return self._entries.get(job_id)

    def all(self) -> list[JobEntry]:
        """Every job, oldest submission first."""
        return sorted(self._entries.values(), key=lambda e: e.submission_time)

    def active(self) -> Iterable[JobEntry]:
        return (e for e in self._entries.values() if not e.is_terminal)

    def find(self, key: str) -> JobEntry:
        """A job by decimal id, id string or name (the newest of that name); JobNotFoundError if none."""
        if key.isdigit() and int(key) in self._entries:
            return self._entries[int(key)]
        named = [e for e in self._entries.values() if key in (e.name, job.id_to_string(e.id))]
        if not named:
            raise errors.JobNotFoundError(f"no job with id or name {key!r}")
        return max(named, key=lambda e: e.submission_time)

    def transition(self, entry: JobEntry, status: Status, reason: str = "") -> None:
        """Move ``entry`` to ``status``: checked, stamped, announced, persisted, and its waiters told."""
        previous = entry.status
        if status not in ALLOWED[previous]:
            raise errors.JobStateConflictError(
                f"job {entry.name!r} cannot go from {previous.value} to {status.value}"
            )
        entry.status = status
        counted = _COUNTED_STATUS.get(status)
        if counted is not None:
            self.counts[counted] += 1
        if status in TERMINAL:
            entry.completion_time = self._now_ms()
        if status is Status.RUNNING:
            entry.suspension_cause = ""
        if status not in (Status.STARTING, Status.RUNNING):
            entry.recovering_since = None  # a recovery that ends suspended or failed is no later 'recovered'
        self._events.append(
            records.EventKind.JOB_STATUS,
            job_id=entry.id,
            job_name=entry.name,
            status=status.value,
            previous_status=previous.value,
            reason=reason,
        )
        _log_transition(entry, previous, status, reason)
        self._persist(entry)
        self.notify(entry)

    def notify(self, entry: JobEntry) -> None:
        """Complete the waiters whose status the entry has reached."""
        waiters, entry.waiters = entry.waiters, []
        for statuses, future in waiters:  # a waiter's callback may add a new waiter meanwhile
            if entry.status not in statuses:
                entry.waiters.append((statuses, future))
            elif not future.done():
                future.set_result(entry.record())

    def wait_for(
        self, entry: JobEntry, statuses: Iterable[Status]
    ) -> concurrent.futures.Future[records.JobRecord]:
        """A future of the entry's record, completed when it reaches one of ``statuses``."""
        wanted = frozenset(statuses)
        future: concurrent.futures.Future[records.JobRecord] = concurrent.futures.Future()
        if entry.status in wanted:
            future.set_result(entry.record())
        else:
            entry.waiters.append((wanted, future))
        return future


def named(entry: JobEntry) -> str:
    """How a log line names the job: ``job NAME (ID)``, or ``job ID`` for a job named by its id."""
    return logs.label(entry.name, job.id_to_string(entry.id))


def about(entry: JobEntry, traceback: str = "") -> dict[str, Any]:
    """The ``extra`` of a log line about the job: its id and name (``jetlet._cluster.logs``)."""
    return logs.job(job.id_to_string(entry.id), entry.name, traceback)


def _log_transition(entry: JobEntry, previous: Status, status: Status, reason: str) -> None:
    """One line per transition on the coordinator; a failure's traceback once, with the failure."""
    name = named(entry)
    if status is Status.FAILED and entry.cancelled:
        log.info("%s CANCELLED (was %s)", name, previous.value, extra=about(entry))
    elif status is Status.FAILED:
        trace = entry.failure_traceback.strip()
        shown = trace if trace not in entry.failure else ""
        log.error("%s FAILED: %s", name, entry.failure, extra=about(entry, shown))
    elif status is Status.STARTING and previous is Status.NOT_RUNNING:
        log.info("%s submitted, starting", name, extra=about(entry))
    elif status is Status.STARTING:
        execution = job.id_to_string(entry.execution_id)
        why = reason or previous.value
        log.info("%s starting execution %s (%s)", name, execution, why, extra=about(entry))
    elif status is Status.SUSPENDED:
        log.info("%s SUSPENDED: %s", name, entry.suspension_cause or reason, extra=about(entry))
    else:
        log.info("%s %s%s", name, status.value, f" ({reason})" if reason else "", extra=about(entry))


def snapshot_summary(last: Mapping[str, Any] | None, count: int) -> dict[str, Any]:
    if last is None:
        return {"count": count}
    return {
        "id": last["id"],
        "time": last["time"],
        "bytes": last["bytes"],
        "entries": sum(last["counts"].values()),
        "duration_ms": last["duration_ms"],
        "count": count,
    }


def start_problems(failed: Mapping[str, str]) -> list[str]:
    """The members that could not initialize an execution, those that failed alike named together
    with the last line of their traceback (the error), so a fault of every member is said once.

    >>> start_problems({"m1": "Traceback...\\nValueError: x", "m2": "Traceback...\\nValueError: x"})
    ['members m1, m2: ValueError: x']
    """
    alike: dict[str, list[str]] = {}
    for member, trace in failed.items():
        alike.setdefault(trace, []).append(member)
    problems = []
    for trace, members in alike.items():
        error = next((line for line in reversed(trace.strip().splitlines()) if line.strip()), "failed")
        problems.append(f"member{'s' if len(members) > 1 else ''} {', '.join(sorted(members))}: {error}")
    return problems
