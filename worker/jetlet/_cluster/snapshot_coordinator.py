"""The coordinator's side of snapshots (Jet's ``MasterSnapshotContext``): start, collect, commit.

Theory of operation
-------------------
For a job with a processing guarantee, a snapshot is taken every
``snapshot_interval_millis`` while its execution runs, and on demand (a
terminal one before suspend, one for an export). One snapshot of a job is in
flight at a time; a request made meanwhile waits for it to finish.

Taking snapshot *n* of execution *e* (all on the coordinator thread):

1. ``snapshot_start`` to every member: each injects a barrier into its sources;
2. each member reports ``snapshot_done`` once every tasklet saved its state
   and the member stored its part in the grid (with backups) under
   ``snapshot/<job>/<e>/<n>`` (the execution is in the name: a coordinator
   that takes over numbers on from the last *complete* snapshot, so its *n*
   may be that of one in flight when the old coordinator was lost, whose
   parts the old execution stored; the two must never mix); a part with an
   error, a member that fails to answer, the execution changing, or
   :data:`SNAPSHOT_TIMEOUT_S` passing fail the snapshot;
3. a complete snapshot becomes the job's ``last_snapshot`` (replicated with
   its record, offloaded to the durable directory if one is set) and an
   event; then ``snapshot_commit`` tells the members' sinks to commit what
   they prepared (or, for a failed snapshot, to roll it back), and the data
   of the superseded (or failed) snapshot is deleted.

Every stage runs as a step on the coordinator thread, triggered by replies
(``when_all``) or reports: nothing waits on the network.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

from jetlet import records
from jetlet._cluster import control, coordinator_thread, job_records, job_store
from jetlet._cluster import events as events_mod
from jetlet._cluster.control import Dispatch, Operation
from jetlet._cluster.job_records import JobEntry, Status, about, named

log = logging.getLogger(__name__)

RPC_TIMEOUT_S = 30.0
SNAPSHOT_TIMEOUT_S = 120.0

Done = Callable[[str | None], None]
"""Told ``None`` when the snapshot completed, else why it failed."""


@dataclasses.dataclass
class _InFlight:
    job_id: int
    execution_id: int
    snapshot_id: int
    prefix: str
    members: tuple[str, ...]
    terminal: bool
    started: float
    then: list[Done]
    parts: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    timeout: coordinator_thread.Cancellable | None = None
    finished: bool = False


class SnapshotCoordinator:
    """Snapshots of every job this member coordinates. See the module doc."""

    def __init__(
        self,
        serial: coordinator_thread.Serial,
        channel: control.ControlChannel,
        jobs: job_records.JobTable,
        event_log: events_mod.EventLog,
        store: job_store.JobStore,
    ) -> None:
        self._serial = serial
        self._channel = channel
        self._jobs = jobs
        self._events = event_log
        self._store = store
        self._in_flight: dict[int, _InFlight] = {}
        self._queued: dict[int, list[tuple[bool, Done]]] = {}
        channel.register(Operation.SNAPSHOT_DONE, self._on_part, Dispatch.INLINE)

    def clear(self) -> None:
        """Forget the snapshots in flight (this member is no coordinator any more)."""
        for flight in self._in_flight.values():
            flight.finished = True
            if flight.timeout is not None:
                flight.timeout.cancel()
        self._in_flight.clear()
        self._queued.clear()

    # -- scheduling ---------------------------------------------------------------------
    def schedule(self, entry: JobEntry) -> None:
        """The execution started: take a snapshot every interval while it runs."""
        interval = entry.config.get("snapshot_interval_millis", 10000) / 1000
        self._serial.call_later(interval, self._due, entry, entry.execution_id)

    def _due(self, entry: JobEntry, execution_id: int) -> None:
        if not self._runs(entry, execution_id):
            return
        self.take(entry, False, lambda _: self.schedule(entry) if self._runs(entry, execution_id) else None)

    def _runs(self, entry: JobEntry, execution_id: int) -> bool:
        return (
            self._jobs.get(entry.id) is entry  # (a member that left its cluster forgot its jobs)
            and entry.execution_id == execution_id
            and entry.status is Status.RUNNING
            and entry.stopping is None
            and not entry.final_commit
        )

    # -- one snapshot -------------------------------------------------------------------
    def take(self, entry: JobEntry, terminal: bool, then: Done) -> None:
        """Take a snapshot of the current execution (after the one in flight); ``then(problem)`` after."""
        if entry.final_commit:  # (jetlet._cluster.job_ending) the job ends, it never restarts
            then("the job is ending: its sinks commit their final output")
            return
        if entry.id in self._in_flight:
            self._queued.setdefault(entry.id, []).append((terminal, then))
            return
        snapshot_id = entry.next_snapshot_id
        entry.next_snapshot_id += 1
        flight = _InFlight(
            entry.id,
            entry.execution_id,
            snapshot_id,
            f"snapshot/{entry.id}/{entry.execution_id}/{snapshot_id}",
            entry.members,
            terminal,
            time.time(),
            [then],
        )
        self._in_flight[entry.id] = flight
        self._events.append(
            records.EventKind.SNAPSHOT_STARTED,
            job_id=entry.id,
            job_name=entry.name,
            details={"snapshot_id": snapshot_id, "terminal": terminal},
        )
        calls = {
            m: self._channel.call(
                m,
                Operation.SNAPSHOT_START,
                execution_id=flight.execution_id,
                snapshot_id=snapshot_id,
                terminal=terminal,
                prefix=flight.prefix,
            )
            for m in flight.members
        }
        coordinator_thread.when_all(self._serial, calls, RPC_TIMEOUT_S, lambda o: self._started(flight, o))

    def _started(self, flight: _InFlight, outcomes: dict[str, Any]) -> None:
        failed = [f"member {m}: {o}" for m, o in outcomes.items() if isinstance(o, BaseException)]
        if failed:
            self._finish(flight, "; ".join(failed))
            return
        if not flight.finished and flight.timeout is None:
            flight.timeout = self._serial.call_later(SNAPSHOT_TIMEOUT_S, self._timed_out, flight)
            self._check_parts(flight)

    def _on_part(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        self._serial.submit(self._part, body)
        return {}

    def _part(self, body: dict[str, Any]) -> None:
        flight = next(
            (
                f
                for f in self._in_flight.values()
                if f.execution_id == body["execution_id"] and f.snapshot_id == body["snapshot_id"]
            ),
            None,
        )
        if flight is None or flight.finished:
            return
        flight.parts[body["member"]] = body
        if flight.timeout is not None:
            self._check_parts(flight)

    def _check_parts(self, flight: _InFlight) -> None:
        failed = [f"member {m}: {p['error']}" for m, p in flight.parts.items() if "error" in p]
        if failed:
            self._finish(flight, "; ".join(failed))
        elif all(m in flight.parts for m in flight.members):
            self._finish(flight, None)

    def _timed_out(self, flight: _InFlight) -> None:
        missing = [m for m in flight.members if m not in flight.parts]
        self._finish(flight, f"no part from {', '.join(missing)} within {SNAPSHOT_TIMEOUT_S:g} s")

    def abort(self, entry: JobEntry, reason: str) -> None:
        """The execution is stopping or changed: the snapshot in flight fails (its sinks roll back)."""
        flight = self._in_flight.get(entry.id)
        if flight is not None and not flight.finished:
            self._finish(flight, reason)

    def _finish(self, flight: _InFlight, problem: str | None) -> None:
        if flight.finished:
            return
        flight.finished = True
        if flight.timeout is not None:
            flight.timeout.cancel()
        entry = self._jobs.get(flight.job_id)
        if entry is not None and entry.execution_id != flight.execution_id and problem is None:
            problem = "the execution changed"
        stale: str | None = flight.prefix
        kept: concurrent.futures.Future[Any] | None = None
        if problem is None and entry is not None:
            stale = entry.last_snapshot["prefix"] if entry.last_snapshot else None
            kept = self._complete(entry, flight)
        elif entry is not None:
            log.warning(
                "%s: snapshot %d failed: %s", named(entry), flight.snapshot_id, problem, extra=about(entry)
            )
            self._events.append(
                records.EventKind.SNAPSHOT_FAILED,
                job_id=entry.id,
                job_name=entry.name,
                reason=problem or "",
                details={"snapshot_id": flight.snapshot_id},
            )
        if kept is None:
            self._commit(flight, problem, stale)
        else:  # the sinks commit only once the record naming this snapshot is replicated (and offloaded)
            coordinator_thread.when_done(
                self._serial,
                kept,
                lambda outcomes: self._commit(flight, self._unkept(flight, outcomes), stale),
            )

    def _unkept(self, flight: _InFlight, outcomes: object) -> str | None:
        """Why the record of a completed snapshot was not kept (replicated, offloaded), or None.

        Then the sinks must not commit: a restart or a resumed cluster would start from the
        record before, and repeat what they committed. Their transactions stay pending, and the
        next snapshot's commit takes them along (or a restore from this one does).
        """
        found = outcomes.items() if isinstance(outcomes, dict) else [("record", outcomes)]
        problems = [
            f"{what}: {'not replicated' if outcome is False else outcome}"
            for what, outcome in found
            if isinstance(outcome, BaseException) or outcome is False
        ]
        if not problems:
            return None
        problem = "its record was not kept (" + "; ".join(problems) + ")"
        log.warning(
            "job %s: snapshot %d: %s; the sinks keep its transactions pending",
            flight.job_id,
            flight.snapshot_id,
            problem,
        )
        return problem

    def _commit(self, flight: _InFlight, problem: str | None, stale: str | None) -> None:
        commits = {  # the second phase: sinks commit (or roll back) what they prepared
            m: self._channel.call(
                m,
                Operation.SNAPSHOT_COMMIT,
                execution_id=flight.execution_id,
                snapshot_id=flight.snapshot_id,
                success=problem is None,
            )
            for m in flight.members
        }
        coordinator_thread.when_all(
            self._serial, commits, RPC_TIMEOUT_S, lambda _: self._committed(flight, problem, stale)
        )

    def _complete(self, entry: JobEntry, flight: _InFlight) -> concurrent.futures.Future[Any]:
        """Make the snapshot the job's last one; the future completes when that is replicated."""
        counts: dict[str, int] = {}
        for part in flight.parts.values():
            for vertex, count in part.get("counts", {}).items():
                counts[vertex] = counts.get(vertex, 0) + count
        duration_ms = int((time.time() - flight.started) * 1000)
        size = sum(p.get("bytes", 0) for p in flight.parts.values())
        store_ms = max((p.get("store_ms", 0) for p in flight.parts.values()), default=0)
        entry.last_snapshot = {
            "id": flight.snapshot_id,
            "prefix": flight.prefix,
            "counts": counts,
            "bytes": size,
            "time": int(flight.started * 1000),
            "duration_ms": duration_ms,
            "job_id": entry.id,
            "job_name": entry.name,
        }
        entry.snapshot_count += 1
        log.info(
            "%s: snapshot %d completed: %d bytes, %d keys, in %d ms (the slowest member's store %d ms)%s",
            named(entry),
            flight.snapshot_id,
            size,
            sum(counts.values()),
            duration_ms,
            store_ms,
            " (terminal)" if flight.terminal else "",
            extra=about(entry),
        )
        state = entry.state()
        replicated = self._store.save(state)
        offloaded = self._store.offload(entry.id, state)
        self._events.append(
            records.EventKind.SNAPSHOT_COMPLETED,
            job_id=entry.id,
            job_name=entry.name,
            details={
                "snapshot_id": flight.snapshot_id,
                "bytes": size,
                "keys": sum(counts.values()),
                "duration_ms": duration_ms,
                "store_ms": store_ms,
                "terminal": flight.terminal,
            },
        )
        both: concurrent.futures.Future[Any] = concurrent.futures.Future()
        coordinator_thread.when_all(
            self._serial,
            {"record": replicated, "offload": offloaded},
            RPC_TIMEOUT_S * 4,
            lambda outcomes: both.set_result(outcomes),
        )
        return both

    def _committed(self, flight: _InFlight, problem: str | None, stale: str | None) -> None:
        if stale is not None:
            self._store.delete_snapshot(stale)
        if self._in_flight.get(flight.job_id) is flight:
            del self._in_flight[flight.job_id]
        for then in flight.then:
            then(problem)
        queued = self._queued.pop(flight.job_id, [])
        entry = self._jobs.get(flight.job_id)
        if not queued or entry is None:
            return
        if entry.status is not Status.RUNNING or entry.stopping is not None:
            for _, waiting in queued:
                waiting("the execution is no longer running")
            return
        terminal, then = queued[0]
        self.take(entry, terminal, then)
        self._queued.setdefault(entry.id, []).extend(queued[1:])
