"""Jobs across a cluster: the coordinator's job protocol and each member's share of a job.

Every member runs a :class:`ClusterJobService`; the one on the coordinator
(the oldest member) drives jobs, the others forward their REST calls to it.
Control messages are dictionaries sent as ``CONTROL`` frames over the
members' authenticated connections; a request carries an ``rpc`` number and
is answered by a ``reply`` with the same number.

The job protocol, as the Jet documents describe it:

1. the coordinator gives the job an id, fixes the member list (its order
   gives each member its index) and the partition table, and sends every
   member ``init`` with the pickled DAG; each member builds its execution
   plan (its processors, queues and the distributed edges' senders and
   receivers) and answers; every failure is collected;
2. if every member initialized, the coordinator sends ``start`` and each
   member hands its tasklets to its execution service; otherwise it sends
   ``cancel`` and the job fails with all the errors;
3. each member reports ``done`` (with the formatted traceback of its first
   error, if any); the job completes when every member is done, and on the
   first failure the coordinator cancels it everywhere and keeps the user's
   traceback;
4. a member that leaves fails the jobs it ran (restarting them from a
   snapshot comes with fault tolerance).

Suspend stops every member's execution and keeps the job (``SUSPENDED``);
resume and restart start a new *execution* of the same job on the members
there are now. Members know executions, not jobs, so a late message of an
old execution can never disturb the new one. Without snapshots (the next
issue) a new execution starts from the beginning of its sources.

Items of distributed edges travel as ``DATA`` frames (packets) and flow
control as ``FLOW_ACK`` frames, routed to the job's
:class:`~jetlet._network.tasklets.RemoteLinks`.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import itertools
import logging
import os
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jetlet import _embedded, config, errors, job
from jetlet._cluster import cluster_store, durable, job_service, partition_table, snapshot_data
from jetlet._cluster import grid as grid_mod
from jetlet._execution import execution_plan, execution_service
from jetlet._execution import snapshots as snapshots_mod
from jetlet._network import serialization
from jetlet._network import tasklets as remote
from jetlet._network.frames import MessageType
from jetlet._network.transport import PeerUnavailableError, Transport
from jetlet.core import dag as dag_mod
from jetlet.core import snapshot_writer

log = logging.getLogger(__name__)

RPC_TIMEOUT_S = 30.0
SNAPSHOT_TIMEOUT_S = 120.0
METRICS_TIMEOUT_S = 2.0
FAILOVER_WAIT_S = 5.0
"""Metrics are best effort: a member that does not answer in time is left out."""
_JOBS_MAP = "jobs"
_EXPORTED_PREFIX = "exported-meta/"
TERMINAL = {job.JobStatus.COMPLETED.value, job.JobStatus.FAILED.value}


def _format_error(error: BaseException) -> str:
    remote_trace = getattr(error, "remote_traceback", "")
    if remote_trace:
        return f"{error}\n{remote_trace}"
    return "".join(traceback.format_exception(error))


@dataclasses.dataclass
class _MemberJob:
    """This member's share of one job."""

    job_id: int
    members: tuple[str, ...]
    coordinator: str
    plan: execution_plan.ExecutionPlan
    links: remote.RemoteLinks
    tracker: execution_service.ExecutionTracker
    snapshots: snapshots_mod.MemberSnapshots | None = None
    single_processor: tuple[str, ...] = ()
    snapshot_prefixes: dict[int, str] = dataclasses.field(default_factory=dict)


class _CoordinatedJob:
    """The coordinator's view of one job."""

    def __init__(self, job_id: int, name: str, definition: bytes, job_config: Mapping[str, Any]) -> None:
        self.id = job_id
        self.name = name
        self.definition = definition
        self.config = dict(job_config)
        self.submission_time = int(time.time() * 1000)
        self.completion_time: int | None = None
        self.status = job.JobStatus.NOT_RUNNING.value
        self.members: tuple[str, ...] = ()
        self.done: set[str] = set()
        self.failure = ""
        self.failure_traceback = ""
        self.cancelled = False
        self.dag_dot = ""
        self.execution_id = 0
        """The current execution (a job runs again after resume and restart; members know executions)."""
        self.stopping: str | None = None
        """Why the current execution is being stopped: "fail", "suspend" or "restart"."""
        self.final_metrics: dict[str, dict[str, Any]] = {}
        """Each member's metrics as it reported them when its share of the execution ended."""
        self.last_snapshot: dict[str, Any] | None = None
        """The last complete snapshot: ``id``, grid ``prefix``, entry ``counts`` per vertex, ``bytes``..."""
        self.next_snapshot_id = 1
        self.snapshotting = False
        self.snapshot_parts: dict[str, dict[str, Any]] = {}
        """Each member's report on the snapshot in progress."""
        self.snapshot_count = 0
        self.suspension_cause = ""
        self.restore_from: dict[str, Any] | None = None
        """An exported snapshot to start the first execution from (``initial_snapshot_name``)."""

    @property
    def guarantee(self) -> config.ProcessingGuarantee:
        return config.ProcessingGuarantee(self.config.get("processing_guarantee", "NONE"))

    @property
    def snapshots_enabled(self) -> bool:
        return self.guarantee is not config.ProcessingGuarantee.NONE

    def state(self) -> dict[str, Any]:
        """What a coordinator that takes over needs to run the job on (kept in the grid)."""
        return {
            "id": self.id,
            "name": self.name,
            "definition": self.definition,
            "config": self.config,
            "submission_time": self.submission_time,
            "completion_time": self.completion_time,
            "status": self.status,
            "failure": self.failure,
            "cancelled": self.cancelled,
            "dag_dot": self.dag_dot,
            "last_snapshot": self.last_snapshot,
            "next_snapshot_id": self.next_snapshot_id,
            "suspension_cause": self.suspension_cause,
            "restore_from": self.restore_from,
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> _CoordinatedJob:
        coordinated = cls(state["id"], state["name"], state["definition"], state["config"])
        coordinated.submission_time = state["submission_time"]
        coordinated.completion_time = state["completion_time"]
        coordinated.status = state["status"]
        coordinated.failure = state["failure"]
        coordinated.cancelled = state["cancelled"]
        coordinated.dag_dot = state["dag_dot"]
        coordinated.last_snapshot = state["last_snapshot"]
        coordinated.next_snapshot_id = state["next_snapshot_id"]
        coordinated.suspension_cause = state["suspension_cause"]
        coordinated.restore_from = state["restore_from"]
        return coordinated

    def record(self) -> job_service.JobRecord:
        return job_service.JobRecord(
            id=self.id,
            name=self.name,
            status=self.status,
            submission_time=self.submission_time,
            completion_time=self.completion_time,
            failure=self.failure,
            failure_traceback=self.failure_traceback,
            cancelled=self.cancelled,
            config=self.config,
            dag_dot=self.dag_dot,
            suspension_cause=self.suspension_cause,
            snapshot=_snapshot_summary(self.last_snapshot, self.snapshot_count),
        )


class ClusterJobService:
    """A :class:`~jetlet._cluster.job_service.JobService` for one member of a cluster; see the module doc."""

    def __init__(
        self,
        member_name: str,
        transport: Transport,
        member_names: Callable[[], Sequence[str]],
        instance: _embedded.EmbeddedInstance,
        flow: remote.FlowSettings | None = None,
        has_quorum: Callable[[], bool] = lambda: True,
        snapshot_directory: str = "",
    ) -> None:
        self.member_name = member_name
        self._has_quorum = has_quorum
        self.transport = transport
        self._member_names = member_names
        self.instance = instance
        self.flow = flow or remote.FlowSettings()
        self._rpc_ids = itertools.count(1)
        self._replies: dict[int, concurrent.futures.Future[dict[str, Any]]] = {}
        self._awaiting: dict[int, str] = {}
        """The member each call waits on, so that the calls to a member that is lost fail at once."""
        self._lock = threading.Condition()
        self._member_jobs: dict[int, _MemberJob] = {}
        self._jobs: dict[int, _CoordinatedJob] = {}
        self._executions: dict[int, _CoordinatedJob] = {}
        self._ids = itertools.count(int.from_bytes(os.urandom(5), "big") << 16)
        self._workers = concurrent.futures.ThreadPoolExecutor(
            16, thread_name_prefix=f"jetlet-control-{member_name}"
        )
        self._lost: set[str] = set()
        self._known_members: tuple[str, ...] = ()
        """The members at the last membership change, to tell which ones it dropped."""
        """Members whose connection dropped: left out of new executions until they are back."""
        self._table: partition_table.PartitionTable | None = None
        """The coordinator's partition table, which the grid and the executions follow."""
        settings = instance.config
        self.grid = grid_mod.Grid(
            member_name,
            self._grid_call,
            settings.partition_count,
            settings.backup_count,
            timeout_s=RPC_TIMEOUT_S,
        )
        self._scale_up_timer: threading.Timer | None = None
        self.data_store = cluster_store.ClusterDataStore(self.grid, instance.store)
        """The jobs' named lists and maps, in the grid (observables stay on the member)."""
        self.offload = durable.DurableSnapshots(snapshot_directory, self.grid) if snapshot_directory else None
        """Writes complete snapshots to a directory too, and brings them back when a cluster starts."""
        self._closed = False

    # -- the network side ------------------------------------------------------
    def on_message(self, peer: str, msg_type: MessageType, payload: bytes) -> bool:
        """Handle a frame of an authenticated peer; False if it is not for this service."""
        if msg_type in (MessageType.DATA, MessageType.FLOW_ACK):
            message = remote.decode_message(msg_type, payload)
            member_job = self._member_jobs.get(message.job_id)
            if member_job is not None:
                member_job.links.deliver(message)
            return True
        if msg_type is not MessageType.CONTROL:
            return False
        body = serialization.loads(payload)
        if not isinstance(body, dict) or ("job_op" not in body and "reply" not in body):
            return False
        if "reply" in body:
            self._awaiting.pop(body["reply"], None)
            future = self._replies.pop(body["reply"], None)
            if future is not None:
                future.set_result(body)
            return True
        self._workers.submit(self._answer, peer, body)
        return True

    def on_peer_lost(self, peer: str) -> None:
        """A member's connection dropped (called on the network thread, so nothing here blocks)."""
        with self._lock:
            was_coordinator = self._coordinator() == peer
        self._member_lost(peer, was_coordinator)

    def _member_lost(self, peer: str, was_coordinator: bool) -> None:
        """Fail the calls waiting on ``peer``, cancel the work it coordinated, and hand the rest to a worker.

        Restarting jobs and taking over wait on other members (the grid moves partitions), whose
        replies come through the thread that reports the loss: that work runs on a worker thread.
        """
        with self._lock:
            self._lost.add(peer)
            self._lock.notify_all()
            orphans = [m for m in self._member_jobs.values() if m.coordinator == peer]
        for rpc in [r for r, member in list(self._awaiting.items()) if member == peer]:
            self._unreachable(rpc, peer)
        for member_job in orphans:  # their coordinator is gone: the new one starts new executions
            member_job.tracker.cancel(f"its coordinator {peer} left the cluster")
        if self._closed or not self._is_coordinator():
            return
        if was_coordinator:
            self._workers.submit(_logged(self._take_over), peer)
        else:
            self._workers.submit(_logged(self._restart_jobs_of), peer)

    def _restart_jobs_of(self, peer: str) -> None:
        """Restart (or suspend) the running jobs that had a share on ``peer``, which is lost."""
        with self._lock:
            affected = [j for j in self._jobs.values() if peer in j.members and j.status not in TERMINAL]
        for coordinated in affected:
            self._after_member_loss(coordinated, f"member {peer} left the cluster while the job ran")
            self._member_done(coordinated, coordinated.execution_id, peer, {})

    def _after_member_loss(self, coordinated: _CoordinatedJob, reason: str) -> None:
        """Restart the job on the members left, from its last snapshot; without auto-scaling, suspend it."""
        if coordinated.status == job.JobStatus.SUSPENDED.value:
            return
        if not coordinated.config.get("auto_scaling", True):
            with self._lock:
                coordinated.suspension_cause = reason
            self._stop(coordinated, "suspend", reason)
            return
        log.warning("job %s: %s; restarting it on the members left", coordinated.name, reason)
        self._stop(coordinated, "restart", reason)

    def _retry_without_unreachable(self, coordinated: _CoordinatedJob, execution_id: int) -> bool:
        """A member went away while the execution started: start it again without that member."""
        before = set(self._lost)
        self._mark_unreachable(coordinated.members)
        if self._lost == before or not self._live_members():
            return False
        with self._lock:
            self._executions.pop(execution_id, None)
        for member in coordinated.members:
            self._send_control(member, {"job_op": "forget", "job_id": execution_id})
        self._start_execution(coordinated)
        return True

    def _mark_unreachable(self, members: Sequence[str]) -> None:
        """Count the members this coordinator has no connection to as lost."""
        with self._lock:
            for member in members:
                if member != self.member_name and not self.transport.is_connected(member):
                    self._lost.add(member)

    def on_members_changed(self, names: Sequence[str]) -> None:
        """Members changed: a member the membership dropped is lost (it may hang with its connection
        open); auto-scaling jobs use a new member after ``scale_up_delay_millis``."""
        with self._lock:
            before, self._known_members = self._known_members, tuple(names)
            coordinator = next((m for m in before if m not in self._lost), self.member_name)
            dropped = [m for m in before if m not in names and m not in self._lost]
        for member in dropped:
            log.warning("member %s was dropped from the cluster (missed heartbeats)", member)
            self._member_lost(member, member == coordinator)
        with self._lock:  # a lost member that the membership has dropped may come back as a new one
            self._lost &= set(names)
        if self._closed or not self._is_coordinator():
            return
        with self._lock:
            running = [
                j
                for j in self._jobs.values()
                if j.status == job.JobStatus.RUNNING.value and j.config.get("auto_scaling", True)
            ]
            grown = any(set(names) - set(j.members) - self._lost for j in running)
            if not grown or self._scale_up_timer is not None:
                return
            delay = self.instance.config.scale_up_delay_millis / 1000
            self._scale_up_timer = threading.Timer(delay, self._scale_up)
            self._scale_up_timer.daemon = True
            self._scale_up_timer.start()

    def _scale_up(self) -> None:
        with self._lock:
            self._scale_up_timer = None
            live = set(self._live_members())
            jobs = [
                j
                for j in self._jobs.values()
                if j.status == job.JobStatus.RUNNING.value
                and j.stopping is None
                and j.config.get("auto_scaling", True)
                and live - set(j.members)
            ]
        for coordinated in jobs:
            log.info("job %s: restarting to use the members that joined", coordinated.name)
            self._stop(coordinated, "restart", "the job is rescaled onto members that joined")

    def _take_over(self, old_coordinator: str) -> None:
        """This member is the coordinator now: load the job records from the grid and run the jobs on."""
        log.warning("coordinator %s left: %s takes over its jobs", old_coordinator, self.member_name)
        self._ensure_table()
        try:
            states = self.grid.get_all(_JOBS_MAP)
        except grid_mod.GridError as exc:
            log.error("cannot read the job records after the coordinator left: %s", exc)
            return
        restart = []
        with self._lock:
            for state in states.values():
                if state["id"] in self._jobs:
                    continue
                coordinated = _CoordinatedJob.from_state(state)
                self._jobs[coordinated.id] = coordinated
                if coordinated.status not in TERMINAL and coordinated.status != job.JobStatus.SUSPENDED.value:
                    restart.append(coordinated)
        for coordinated in restart:
            self._start_execution(coordinated)

    def recover_offloaded_jobs(self) -> int:
        """On the coordinator of a starting cluster: run on the jobs whose snapshots were offloaded."""
        if self.offload is None or not self._is_coordinator():
            return 0
        self._ensure_table()
        resumed = 0
        for job_id, state, problem in self.offload.read_all():
            with self._lock:
                if job_id in self._jobs:
                    continue
            if state is None:
                log.error("offloaded job %s cannot be read: %s", job_id, problem)
                continue
            coordinated = _CoordinatedJob.from_state(state)
            with self._lock:
                self._jobs[coordinated.id] = coordinated
            if problem is not None:  # never start from damaged state: say why, keep the job's record
                with self._lock:
                    coordinated.failure = f"its offloaded snapshot cannot be restored: {problem}"
                    coordinated.status = job.JobStatus.FAILED.value
                    coordinated.completion_time = int(time.time() * 1000)
                    self._lock.notify_all()
                continue
            if coordinated.status not in TERMINAL and coordinated.status != job.JobStatus.SUSPENDED.value:
                log.warning("job %s: resuming from its offloaded snapshot", coordinated.name)
                self._start_execution(coordinated)
                resumed += 1
        return resumed

    # -- the grid --------------------------------------------------------------------
    def _grid_call(
        self, member: str, op: str, body: dict[str, Any]
    ) -> concurrent.futures.Future[dict[str, Any]]:
        return self._call(member, "grid", grid_op=op, body=body)

    def _op_grid(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        answer: dict[str, Any] = self.grid.handle(body["grid_op"], body["body"])
        return answer

    def _op_grid_table(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        """Follow the coordinator's new partition table: move partitions, then use it."""
        table = partition_table.PartitionTable(tuple(body["members"]), tuple(body["owners"]))
        new = self.grid.table_for(table)
        old = self.grid.table
        sent = self.grid.rebalance(old, new) if old is not None else 0
        self.grid.set_table(new)
        return {"sent": sent}

    def _live_members(self) -> list[str]:
        return [m for m in self._member_names() if m not in self._lost]

    def _ensure_table(self) -> partition_table.PartitionTable:
        """The partition table for the live members; if they changed, every member moves its partitions."""
        members = self._live_members()
        with self._lock:
            table = self._table
            if table is not None and list(table.members) == members:
                return table
            if table is None and self.grid.table is not None:  # taking over: start from the grid's table
                table = self.grid.table.partitions
            table = partition_table.PartitionTable.assign(
                members, self.instance.config.partition_count, table
            )
        calls = {
            m: self._call(m, "grid_table", members=list(table.members), owners=list(table.owners))
            for m in members
        }
        for member, call in calls.items():
            try:
                reply = call.result(RPC_TIMEOUT_S)
            except concurrent.futures.TimeoutError:
                reply = {"error": "no answer"}
            if "error" in reply:
                log.error("member %s could not take the new partition table: %s", member, reply["error"])
        with self._lock:
            self._table = table
        return table

    def _send_control(self, peer: str, body: Mapping[str, Any]) -> bool:
        """Send a control message (to this member too); False if ``peer`` is not connected."""
        if peer == self.member_name:
            self._workers.submit(self._answer, peer, dict(body))
            return True
        try:
            self.transport.send(peer, MessageType.CONTROL, serialization.dumps(dict(body)))
        except PeerUnavailableError:
            log.warning("member %s is gone: %s not delivered", peer, body.get("job_op", "reply"))
            return False
        return True

    def _call(self, peer: str, op: str, **fields: Any) -> concurrent.futures.Future[dict[str, Any]]:
        rpc = next(self._rpc_ids)
        future: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
        self._replies[rpc] = future
        self._awaiting[rpc] = peer
        if not self._send_control(peer, {"job_op": op, "rpc": rpc, **fields}):
            self._unreachable(rpc, peer)
        return future

    def _unreachable(self, rpc: int, peer: str) -> None:
        """Answer a call to ``peer`` that cannot be answered any more."""
        self._awaiting.pop(rpc, None)
        future = self._replies.pop(rpc, None)
        if future is not None and not future.done():
            message = f"member {peer} is not connected"
            future.set_result({"error": message, "error_message": message})

    def _answer(self, peer: str, body: dict[str, Any]) -> None:
        op = body["job_op"]
        try:
            result = self._handle(peer, op, body)
        except Exception as exc:  # every failure goes back to the caller, with its traceback
            result = {
                "error": _format_error(exc),
                "error_type": type(exc).__name__,
                "error_message": str(exc),
                "error_field": getattr(exc, "field", ""),
            }
        rpc = body.get("rpc")
        if rpc is None:
            return
        reply = {"reply": rpc, **result}
        if peer == self.member_name:
            self._awaiting.pop(rpc, None)
            future = self._replies.pop(rpc, None)
            if future is not None:
                future.set_result(reply)
        else:
            self.transport.send(peer, MessageType.CONTROL, serialization.dumps(reply))

    def _handle(self, peer: str, op: str, body: dict[str, Any]) -> dict[str, Any]:
        handler = getattr(self, f"_op_{op}", None)
        if handler is None:
            raise ValueError(f"unknown job operation {op!r}")
        result: dict[str, Any] = handler(peer, body)
        return result

    # -- member operations (any member) ------------------------------------------
    def _op_init(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        members: tuple[str, ...] = tuple(body["members"])
        job_id: int = body["job_id"]
        dag = job_service.load_definition(body["definition"])
        job_config = job_service.job_config_from_dict(body["config"])
        index = members.index(self.member_name)
        singles = tuple(v.name for v in dag.vertices() if v.meta_supplier.is_total_parallelism_one)
        restore = body.get("restore")
        restored: dict[str, list[snapshot_data.Entries]] | None = None
        restored_counts: dict[str, int] = {}
        if restore is not None:
            parallelism = execution_plan.resolve_parallelism(dag, self.instance.config)
            owned = [p for p, owner in enumerate(body["partition_owners"]) if owner == index]
            prefix = restore["prefix"]
            restored, restored_counts = snapshot_data.route(
                self.grid.local_primary_entries(f"{prefix}/data", owned),
                self.grid.get_all(f"{prefix}/broadcast"),
                parallelism,
                singles,
                index,
            )
        links = remote.RemoteLinks(job_id, index, self._sender(members), self.flow)
        member_job_ref: list[_MemberJob] = []

        def store_part(
            snapshot_id: int, entries: dict[str, snapshot_data.Entries], error: str | None
        ) -> None:
            self._workers.submit(self._store_part, member_job_ref[0], snapshot_id, entries, error)

        member_snapshots = None
        if job_config.processing_guarantee is not config.ProcessingGuarantee.NONE:
            member_snapshots = snapshots_mod.MemberSnapshots(
                job_config.processing_guarantee is config.ProcessingGuarantee.EXACTLY_ONCE,
                0,
                store_part,
                restored_snapshot_id=body.get("snapshot_id_base", 0),
            )
        plan = execution_plan.build(
            dag,
            job_id,
            body["name"],
            job_config,
            self.instance.config,
            member_index=index,
            member_count=len(members),
            data_store=self.data_store,
            remote=links,
            partition_owners=body["partition_owners"],
            member_snapshots=member_snapshots,
            restored=restored,
        )
        if member_snapshots is not None:
            member_snapshots.set_tasklet_count(len(plan.tasklets))
        tracker = execution_service.ExecutionTracker(f"job {job_id}")
        member_job = _MemberJob(job_id, members, peer, plan, links, tracker, member_snapshots, singles)
        member_job_ref.append(member_job)
        with self._lock:
            self._member_jobs[job_id] = member_job
        return {"ok": True, "restored_counts": restored_counts}

    def _op_snapshot_start(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        member_job = self._member_jobs.get(body["job_id"])
        if member_job is None or member_job.snapshots is None:
            raise errors.JetletError(f"no execution {body['job_id']} with snapshots on {self.member_name}")
        member_job.snapshot_prefixes[body["snapshot_id"]] = body["prefix"]
        member_job.snapshots.start(body["snapshot_id"], body["terminal"])
        return {"ok": True}

    def _store_part(
        self,
        member_job: _MemberJob,
        snapshot_id: int,
        entries: dict[str, snapshot_data.Entries],
        error: str | None,
    ) -> None:
        """Store this member's part of a snapshot in the grid (with backups), then tell the coordinator."""
        started = time.monotonic()
        report: dict[str, Any] = {
            "job_op": "snapshot_done",
            "job_id": member_job.job_id,
            "snapshot_id": snapshot_id,
            "member": self.member_name,
        }
        try:
            if error is not None:
                raise errors.JetletError(error)
            prefix = member_job.snapshot_prefixes.pop(snapshot_id)
            entries = {vertex: snapshot_writer.freeze_lent(part) for vertex, part in entries.items()}
            by_partition, broadcast, counts = snapshot_data.chunks_of(
                entries, self.instance.config.partition_count, member_job.single_processor
            )
            me = self.member_name
            self.grid.put_to_partitions(
                f"{prefix}/data",
                {
                    p: [((vertex, me, p), chunk) for vertex, chunk in chunks]
                    for p, chunks in by_partition.items()
                },
            )
            if broadcast:
                self.grid.put(f"{prefix}/broadcast", [((vertex, me), chunk) for vertex, chunk in broadcast])
            size = sum(len(c) for chunks in by_partition.values() for _, c in chunks)
            report.update(counts=counts, bytes=size + sum(len(c) for _, c in broadcast))
        except Exception as exc:
            log.exception("member %s could not store its part of snapshot %d", self.member_name, snapshot_id)
            report["error"] = f"{type(exc).__name__}: {exc}"
        report["store_ms"] = int((time.monotonic() - started) * 1000)
        self._send_control(member_job.coordinator, report)

    def _op_snapshot_commit(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        member_job = self._member_jobs.get(body["job_id"])
        if member_job is None or member_job.snapshots is None:
            return {"ok": False}
        done = member_job.snapshots.commit(body["snapshot_id"], body["success"], RPC_TIMEOUT_S)
        return {"ok": done}

    def _sender(self, members: tuple[str, ...]) -> remote.Send:
        transport = self.transport
        local = self.member_name

        def send(member: int, message: object) -> None:
            name = members[member]
            if name == local:
                raise ValueError("a distributed edge must not send to its own member")
            msg_type, payload = remote.encode_message(message)
            transport.send(name, msg_type, payload)

        return send

    def _op_start(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        member_job = self._member_jobs[body["job_id"]]
        member_job.tracker.future.add_done_callback(lambda f: self._report_done(member_job, f))
        self.instance.service.submit(member_job.plan.all_tasklets(), member_job.tracker)
        return {"ok": True}

    def _report_done(self, member_job: _MemberJob, future: concurrent.futures.Future[None]) -> None:
        error = future.exception()
        member_job.plan.close_suppliers(error)
        body = {
            "job_op": "done",
            "job_id": member_job.job_id,
            "member": self.member_name,
            "metrics": _member_metrics(member_job),
        }
        if error is not None:
            body["error"] = _format_error(error)
            body["cancelled"] = isinstance(error, errors.JobCancelledError)
            body["topology"] = _is_topology_error(error)
        self._send_control(member_job.coordinator, body)

    def _op_cancel(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        member_job = self._member_jobs.get(body["job_id"])
        if member_job is not None:
            member_job.tracker.cancel(body.get("reason", "cancelled"))
        return {"ok": True}

    def _op_forget(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self._member_jobs.pop(body["job_id"], None)
        return {"ok": True}

    def _op_metrics(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        member_job = self._member_jobs.get(body["job_id"])
        return {"value": _member_metrics(member_job) if member_job is not None else {}}

    # -- coordinator operations ---------------------------------------------------
    def _coordinator(self) -> str:
        """The oldest member still reachable (the next-oldest takes over when the coordinator is lost)."""
        live = self._live_members()
        return live[0] if live else self.member_name

    def _coordinator_is_not(self, member: str) -> bool:
        return self._coordinator() != member

    def _is_coordinator(self) -> bool:
        return self._coordinator() == self.member_name

    def _forward(self, op: str, **fields: Any) -> dict[str, Any]:
        """Ask the coordinator; if it has just gone, ask the member that takes over from it."""
        for _ in range(3):
            coordinator = self._coordinator()
            call = self._call(coordinator, op, **fields)
            reply = call.result(RPC_TIMEOUT_S + fields.get("timeout", 0))
            if reply.get("error") != f"member {coordinator} is not connected":
                break
            with self._lock:  # the connection dropped: the loss is being noticed
                self._lock.wait_for(functools.partial(self._coordinator_is_not, coordinator), FAILOVER_WAIT_S)
        if "error" in reply:
            raise _remote_error(reply)
        return reply

    def _op_done(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        execution_id = body["job_id"]
        with self._lock:
            coordinated = self._executions.get(execution_id)
        if coordinated is None:
            return {}
        if "error" in body and body.get("topology"):
            # a member lost its connection to another: the job restarts (or suspends), it does not fail
            if coordinated.stopping is None:
                self._mark_unreachable(coordinated.members)
                self._after_member_loss(
                    coordinated, "a member lost its connection to another while the job ran"
                )
        elif "error" in body and not body.get("cancelled"):
            first_line = body["error"].strip().splitlines()[-1] if body["error"].strip() else "failed"
            self._fail(coordinated, f"job failed on member {body['member']}: {first_line}", body["error"])
        self._member_done(coordinated, execution_id, body["member"], body.get("metrics", {}))
        return {}

    def _member_done(
        self, coordinated: _CoordinatedJob, execution_id: int, member: str, metrics: dict[str, Any]
    ) -> None:
        """A member's share of an execution ended; when all have, the job ends, stops or runs again."""
        with self._lock:
            if execution_id != coordinated.execution_id or member in coordinated.done:
                return
            coordinated.done.add(member)
            coordinated.final_metrics[member] = metrics
            if not coordinated.done >= set(coordinated.members):
                return
            self._executions.pop(execution_id, None)
            stopping, coordinated.stopping = coordinated.stopping, None
            if (
                stopping == "fail"
                and coordinated.config.get("suspend_on_failure")
                and not coordinated.cancelled
            ):
                stopping = "suspend"  # keep the state: the user can fix the cause and resume
                coordinated.suspension_cause = coordinated.failure
                coordinated.failure = ""
            if stopping == "suspend":
                coordinated.status = job.JobStatus.SUSPENDED.value
            elif stopping != "restart":
                failed = stopping == "fail"
                coordinated.status = job.JobStatus.FAILED.value if failed else job.JobStatus.COMPLETED.value
                coordinated.completion_time = int(time.time() * 1000)
            self._lock.notify_all()
        for name in coordinated.members:
            self._send_control(name, {"job_op": "forget", "job_id": execution_id})
        if stopping != "restart":
            self._persist(coordinated)
            if self.offload is not None and coordinated.status in TERMINAL:
                self.offload.forget(coordinated.id)
        if stopping == "restart":
            self._start_execution(coordinated)

    def _stop(self, coordinated: _CoordinatedJob, why: str, reason: str) -> None:
        """Cancel the current execution on every member; ``why`` decides what happens when they are done."""
        with self._lock:
            if coordinated.stopping == "fail":
                return
            coordinated.stopping = why
            members, execution_id = coordinated.members, coordinated.execution_id
            self._lock.notify_all()
        for member in members:
            self._send_control(member, {"job_op": "cancel", "job_id": execution_id, "reason": reason})

    def _fail(self, coordinated: _CoordinatedJob, message: str, trace: str, cancelled: bool = False) -> None:
        with self._lock:
            if coordinated.status in TERMINAL or coordinated.failure:
                return
            coordinated.failure = message
            coordinated.failure_traceback = trace
            coordinated.cancelled = cancelled
        self._stop(coordinated, "fail", message)

    def _start_execution(self, coordinated: _CoordinatedJob) -> None:
        """Run the job (again) on the members there are now, as a new execution.

        A job with ``split_brain_protection`` only starts while the cluster
        holds a majority of its last known size, so the two halves of a split
        cluster never both run it.
        """
        if coordinated.config.get("split_brain_protection") and not self._has_quorum():
            with self._lock:
                coordinated.failure = (
                    "split-brain protection: the cluster has lost the majority of its last known size "
                    f"({len(self._member_names())} members now), so the job does not run"
                )
                coordinated.status = job.JobStatus.FAILED.value
                coordinated.completion_time = int(time.time() * 1000)
                self._lock.notify_all()
            return
        dag = job_service.load_definition(coordinated.definition)
        table = self._ensure_table()
        with self._lock:
            execution_id = next(self._ids)
            coordinated.execution_id = execution_id
            coordinated.members = tuple(table.members)
            coordinated.done = set()
            coordinated.final_metrics = {}
            coordinated.status = job.JobStatus.STARTING.value
            self._executions[execution_id] = coordinated
        threading.Thread(
            target=self._run_job,
            args=(coordinated, execution_id, dag),
            name=f"jetlet-coordinator-{execution_id}",
            daemon=True,
        ).start()

    def _run_job(self, coordinated: _CoordinatedJob, execution_id: int, dag: dag_mod.DAG) -> None:
        members = coordinated.members
        table = self._table
        assert table is not None and table.members == members
        owners = [members.index(table.owner(p)) for p in range(self.instance.config.partition_count)]
        source = coordinated.last_snapshot or coordinated.restore_from
        fields: dict[str, Any] = {
            "job_id": execution_id,
            "name": coordinated.name,
            "definition": coordinated.definition,
            "config": coordinated.config,
            "members": list(members),
            "partition_owners": owners,
            "snapshot_id_base": coordinated.next_snapshot_id - 1,
        }
        init_errors = []
        if source is not None:
            fields["restore"] = {"prefix": source["prefix"], "snapshot_id": source["id"]}
            init_errors += _state_mismatch(source, dag, coordinated.config.get("allow_dropping_state", False))
        calls = {} if init_errors else {member: self._call(member, "init", **fields) for member in members}
        restored_counts: dict[str, int] = {}
        for member, call in calls.items():
            try:
                reply = call.result(RPC_TIMEOUT_S)
            except concurrent.futures.TimeoutError:
                reply = {"error": f"member {member} did not answer init in {RPC_TIMEOUT_S:g} s"}
            if "error" in reply:
                init_errors.append(f"member {member}: {reply['error']}")
            for vertex, count in reply.get("restored_counts", {}).items():
                restored_counts[vertex] = restored_counts.get(vertex, 0) + count
        if source is not None and not init_errors:
            init_errors += _incomplete_restore(source, restored_counts)
        unreachable = any("is not connected" in e for e in init_errors)
        if unreachable and self._retry_without_unreachable(coordinated, execution_id):
            return
        if init_errors:
            text = "\n".join(init_errors)
            with self._lock:
                coordinated.failure = "the job could not start:\n" + text
                coordinated.failure_traceback = text
                coordinated.status = job.JobStatus.FAILED.value
                coordinated.completion_time = int(time.time() * 1000)
                self._executions.pop(execution_id, None)
                self._lock.notify_all()
            self._persist(coordinated)
            for member in members:
                self._send_control(member, {"job_op": "forget", "job_id": execution_id})
            return
        with self._lock:
            if coordinated.execution_id != execution_id:
                return
            coordinated.status = job.JobStatus.RUNNING.value
            coordinated.suspension_cause = ""
            self._lock.notify_all()
        self._persist(coordinated)
        for member in members:
            self._call(member, "start", job_id=execution_id)
        if coordinated.snapshots_enabled:
            threading.Thread(
                target=self._snapshot_periodically,
                args=(coordinated, execution_id),
                name=f"jetlet-snapshots-{execution_id}",
                daemon=True,
            ).start()

    # -- snapshots (coordinator) ---------------------------------------------------------
    def _snapshot_periodically(self, coordinated: _CoordinatedJob, execution_id: int) -> None:
        interval = coordinated.config.get("snapshot_interval_millis", 10000) / 1000
        while True:
            with self._lock:
                stopped = self._lock.wait_for(
                    lambda: (
                        self._closed
                        or coordinated.execution_id != execution_id
                        or coordinated.stopping is not None
                        or coordinated.status in TERMINAL
                    ),
                    interval,
                )
            if stopped:
                return
            self._take_snapshot(coordinated, execution_id, terminal=False)

    def _take_snapshot(self, coordinated: _CoordinatedJob, execution_id: int, terminal: bool) -> str | None:
        """Take one snapshot of the execution; return None when it is complete, else why it failed."""
        with self._lock:
            self._lock.wait_for(lambda: not coordinated.snapshotting, RPC_TIMEOUT_S)
            if coordinated.snapshotting or coordinated.execution_id != execution_id:
                return "the execution changed"
            coordinated.snapshotting = True
            snapshot_id = coordinated.next_snapshot_id
            coordinated.next_snapshot_id += 1
            coordinated.snapshot_parts = {}
            members = coordinated.members
        prefix = f"snapshot/{coordinated.id}/{snapshot_id}"
        started = time.time()
        problem: str | None = None
        try:
            calls = {
                m: self._call(
                    m,
                    "snapshot_start",
                    job_id=execution_id,
                    snapshot_id=snapshot_id,
                    terminal=terminal,
                    prefix=prefix,
                )
                for m in members
            }
            for member, call in calls.items():
                reply = call.result(RPC_TIMEOUT_S)
                if "error" in reply:
                    problem = f"member {member}: {reply.get('error_message') or reply['error']}"
            if problem is None:
                with self._lock:
                    self._lock.wait_for(
                        lambda: (
                            len(coordinated.snapshot_parts) >= len(members)
                            or coordinated.execution_id != execution_id
                        ),
                        SNAPSHOT_TIMEOUT_S,
                    )
                    parts = dict(coordinated.snapshot_parts)
                failed = [f"member {m}: {p['error']}" for m, p in parts.items() if "error" in p]
                missing = [m for m in members if m not in parts]
                if failed:
                    problem = "; ".join(failed)
                elif missing:
                    problem = f"no part from {', '.join(missing)}"
        except concurrent.futures.TimeoutError:
            problem = "a member did not answer"
        previous = coordinated.last_snapshot
        if problem is None:
            counts: dict[str, int] = {}
            for part in parts.values():
                for vertex, count in part.get("counts", {}).items():
                    counts[vertex] = counts.get(vertex, 0) + count
            with self._lock:
                coordinated.last_snapshot = {
                    "id": snapshot_id,
                    "prefix": prefix,
                    "counts": counts,
                    "bytes": sum(p.get("bytes", 0) for p in parts.values()),
                    "time": int(started * 1000),
                    "duration_ms": int((time.time() - started) * 1000),
                    "job_id": coordinated.id,
                    "job_name": coordinated.name,
                }
                coordinated.snapshot_count += 1
            self._persist(coordinated)
            if self.offload is not None:
                self.offload.write(coordinated.id, coordinated.state())
        else:
            log.warning("job %s: snapshot %d failed: %s", coordinated.name, snapshot_id, problem)
        commits = [  # the second phase: sinks commit (or roll back) what they prepared
            self._call(
                member,
                "snapshot_commit",
                job_id=execution_id,
                snapshot_id=snapshot_id,
                success=problem is None,
            )
            for member in members
        ]
        concurrent.futures.wait(commits, RPC_TIMEOUT_S)
        stale = previous["prefix"] if problem is None and previous is not None else None
        if problem is not None:
            stale = prefix
        if stale is not None:
            self._delete_snapshot_maps(stale)
        with self._lock:
            coordinated.snapshotting = False
            self._lock.notify_all()
        return problem

    def _delete_snapshot_maps(self, prefix: str) -> None:
        try:
            self.grid.delete_maps(prefix + "/")
        except grid_mod.GridError as exc:
            log.warning("could not delete snapshot data %s: %s", prefix, exc)

    def _op_snapshot_done(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            coordinated = self._executions.get(body["job_id"])
            if coordinated is not None and coordinated.snapshotting:
                coordinated.snapshot_parts[body["member"]] = body
                self._lock.notify_all()
        return {}

    def _persist(self, coordinated: _CoordinatedJob) -> None:
        """Keep the job's record in the grid, for a coordinator that takes over."""
        try:
            self.grid.put(_JOBS_MAP, [(coordinated.id, coordinated.state())])
        except grid_mod.GridError as exc:
            log.warning("job %s: its record could not be replicated: %s", coordinated.name, exc)

    def _op_submit(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        return {"record": self._submit(body["definition"], body["config"]).to_dict()}

    def _submit(self, definition: bytes, job_config: Mapping[str, Any]) -> job_service.JobRecord:
        parsed = job_service.job_config_from_dict(job_config)
        dag = job_service.load_definition(definition)
        dag.validate()
        if parsed.initial_snapshot_name:
            self._exported(parsed.initial_snapshot_name, "config.initial_snapshot_name")
        with self._lock:
            if parsed.name is not None and any(
                j.name == parsed.name and j.status not in TERMINAL for j in self._jobs.values()
            ):
                raise errors.JetletError(f"a job named {parsed.name!r} is already active")
            job_id = next(self._ids)
            coordinated = _CoordinatedJob(
                job_id,
                parsed.name or job.id_to_string(job_id),
                definition,
                job_service.job_config_to_dict(parsed),
            )
            coordinated.dag_dot = dag.to_dot()
            self._jobs[job_id] = coordinated
        if parsed.initial_snapshot_name:
            exported = self._exported(parsed.initial_snapshot_name, "config.initial_snapshot_name")
            coordinated.restore_from = exported
            coordinated.next_snapshot_id = exported["id"] + 1
        self._start_execution(coordinated)
        return coordinated.record()

    def _exported(self, name: str, field: str) -> dict[str, Any]:
        self._ensure_table()
        found = self._exported_meta(name)
        if found is None:
            raise job_service.InvalidJobRequestError(
                field, f"no snapshot named {name!r} exists in this cluster"
            )
        return found

    def _find(self, key: str) -> _CoordinatedJob:
        with self._lock:
            if key.isdigit() and int(key) in self._jobs:
                return self._jobs[int(key)]
            named = [j for j in self._jobs.values() if key in (j.name, job.id_to_string(j.id))]
        if not named:
            raise job_service.UnknownJobError(f"no job with id or name {key!r}")
        return max(named, key=lambda j: j.submission_time)

    def _op_get(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        return {"record": self._find(body["key"]).record().to_dict()}

    def _op_list(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            entries = sorted(self._jobs.values(), key=lambda j: j.submission_time)
        return {"records": [e.record().to_dict() for e in entries]}

    def _op_join(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        coordinated = self._find(body["key"])
        with self._lock:
            self._lock.wait_for(lambda: coordinated.status in TERMINAL, body["timeout"])
        return {"record": coordinated.record().to_dict()}

    def _op_cancel_job(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        coordinated = self._find(body["key"])
        with self._lock:
            if coordinated.status in TERMINAL:
                raise errors.JetletError(f"job {coordinated.name!r} has already ended ({coordinated.status})")
            if coordinated.status == job.JobStatus.SUSPENDED.value:  # nothing runs: it just ends
                coordinated.failure, coordinated.cancelled = "the job was cancelled", True
                coordinated.status = job.JobStatus.FAILED.value
                coordinated.completion_time = int(time.time() * 1000)
                self._lock.notify_all()
                return {"record": coordinated.record().to_dict()}
        self._fail(coordinated, "the job was cancelled", "", cancelled=True)
        return self._op_join(peer, {"key": body["key"], "timeout": 10.0})

    def _op_suspend(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        """Take a terminal snapshot, stop every member's execution and keep the job, SUSPENDED.

        Without a processing guarantee there is no snapshot: a resumed job starts over.
        """
        coordinated = self._running(body["key"], "suspend")
        if coordinated.snapshots_enabled:
            problem = self._take_snapshot(coordinated, coordinated.execution_id, terminal=True)
            if problem is not None:
                log.warning("job %s: suspending from its last snapshot: %s", coordinated.name, problem)
        with self._lock:
            coordinated.suspension_cause = "suspended by the user"
        self._stop(coordinated, "suspend", "the job is being suspended")
        return self._await_status(coordinated, {job.JobStatus.SUSPENDED.value, *TERMINAL})

    def _op_export_snapshot(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        """Save the job's state as a named snapshot; with ``cancel``, the job then ends."""
        name, cancel = body["name"], body["cancel"]
        if not isinstance(name, str) or not name.strip() or "/" in name:
            raise job_service.InvalidJobRequestError(
                "name", f"must be a non-empty name without '/', got {name!r}"
            )
        coordinated = self._find(body["key"])
        if not coordinated.snapshots_enabled:
            raise errors.JetletError(
                f"job {coordinated.name!r} has processing guarantee NONE: it takes no snapshots to export"
            )
        if coordinated.status == job.JobStatus.RUNNING.value and coordinated.stopping is None:
            problem = self._take_snapshot(coordinated, coordinated.execution_id, terminal=cancel)
            if problem is not None:
                raise errors.JetletError(f"job {coordinated.name!r}: the snapshot failed: {problem}")
        elif coordinated.status != job.JobStatus.SUSPENDED.value:
            raise errors.JetletError(
                f"job {coordinated.name!r} is {coordinated.status}: "
                "only a running or suspended job can export"
            )
        source = coordinated.last_snapshot
        if source is None:
            raise errors.JetletError(f"job {coordinated.name!r} has no complete snapshot to export")
        exported = {
            **source,
            "prefix": f"exported/{name}",
            "name": name,
            "exported_time": int(time.time() * 1000),
        }
        self.grid.delete_maps(f"exported/{name}/")
        for part in ("data", "broadcast"):
            self.grid.copy_map(f"{source['prefix']}/{part}", f"exported/{name}/{part}")
        self.grid.put(f"{_EXPORTED_PREFIX}{name}/meta", [("meta", exported)])
        if cancel:
            self._op_cancel_job(peer, {"key": body["key"]})
        return {"snapshot": exported}

    def _op_list_snapshots(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        self._ensure_table()
        found = [self.grid.get_all(m).get("meta") for m in self.grid.map_names(_EXPORTED_PREFIX)]
        return {"snapshots": sorted((e for e in found if e), key=lambda e: e["exported_time"])}

    def _op_delete_snapshot(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        name = body["name"]
        self._ensure_table()
        if self._exported_meta(name) is None:
            raise job_service.UnknownJobError(f"no snapshot named {name!r}")
        self.grid.delete_maps(f"{_EXPORTED_PREFIX}{name}/")
        self.grid.delete_maps(f"exported/{name}/")
        return {}

    def _exported_meta(self, name: str) -> dict[str, Any] | None:
        if not isinstance(name, str) or not name or "/" in name:
            return None
        found: dict[str, Any] | None = self.grid.get_all(f"{_EXPORTED_PREFIX}{name}/meta").get("meta")
        return found

    def _op_resume(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        coordinated = self._find(body["key"])
        if coordinated.status != job.JobStatus.SUSPENDED.value:
            raise errors.JetletError(f"job {coordinated.name!r} is not suspended ({coordinated.status})")
        self._start_execution(coordinated)
        return self._await_status(coordinated, {job.JobStatus.RUNNING.value, *TERMINAL})

    def _op_restart(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        """Stop the execution and start a new one on the members there are now."""
        coordinated = self._running(body["key"], "restart")
        old = coordinated.execution_id
        self._stop(coordinated, "restart", "the job is being restarted")
        with self._lock:
            self._lock.wait_for(
                lambda: coordinated.execution_id != old or coordinated.status in TERMINAL, RPC_TIMEOUT_S
            )
        return self._await_status(coordinated, {job.JobStatus.RUNNING.value, *TERMINAL})

    def _running(self, key: str, operation: str) -> _CoordinatedJob:
        coordinated = self._find(key)
        if coordinated.status != job.JobStatus.RUNNING.value or coordinated.stopping is not None:
            raise errors.JetletError(
                f"job {coordinated.name!r} is not running ({coordinated.status}), cannot {operation}"
            )
        return coordinated

    def _await_status(self, coordinated: _CoordinatedJob, statuses: set[str]) -> dict[str, Any]:
        with self._lock:
            self._lock.wait_for(lambda: coordinated.status in statuses, RPC_TIMEOUT_S)
            return {"record": coordinated.record().to_dict()}

    def _op_job_metrics(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        """Per ``member/tasklet``: live counters of running members, final ones of members done."""
        coordinated = self._find(body["key"])
        with self._lock:
            per_member = dict(coordinated.final_metrics)
        running = [m for m in coordinated.members if m not in per_member]
        calls = {m: self._call(m, "metrics", job_id=coordinated.execution_id) for m in running}
        for member, call in calls.items():
            try:
                per_member[member] = call.result(METRICS_TIMEOUT_S).get("value", {})
            except concurrent.futures.TimeoutError:
                continue
        merged = {
            f"{member}/{name}": values
            for member, metrics in per_member.items()
            for name, values in metrics.items()
        }
        return {"value": merged}

    def _op_read_all(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        """A named list or map, read from the grid."""
        self._ensure_table()
        if body["kind"] == "list":
            return {"value": self.data_store.read_list(body["name"])}
        return {"value": self.data_store.read_map(body["name"])}

    # -- the JobService protocol (REST calls; forwarded to the coordinator) ------------------
    def submit(self, definition: bytes, job_config: Mapping[str, Any]) -> job_service.JobRecord:
        reply = self._forward("submit", definition=definition, config=dict(job_config))
        return job_service.JobRecord.from_dict(reply["record"])

    def list_jobs(self) -> list[job_service.JobRecord]:
        return [job_service.JobRecord.from_dict(r) for r in self._forward("list")["records"]]

    def get(self, key: str) -> job_service.JobRecord:
        return job_service.JobRecord.from_dict(self._forward("get", key=key)["record"])

    def join(self, key: str, timeout: float) -> job_service.JobRecord:
        return job_service.JobRecord.from_dict(self._forward("join", key=key, timeout=timeout)["record"])

    def cancel(self, key: str) -> job_service.JobRecord:
        return job_service.JobRecord.from_dict(self._forward("cancel_job", key=key)["record"])

    def suspend(self, key: str) -> job_service.JobRecord:
        return job_service.JobRecord.from_dict(self._forward("suspend", key=key)["record"])

    def resume(self, key: str) -> job_service.JobRecord:
        return job_service.JobRecord.from_dict(self._forward("resume", key=key)["record"])

    def restart(self, key: str) -> job_service.JobRecord:
        return job_service.JobRecord.from_dict(self._forward("restart", key=key)["record"])

    def metrics(self, key: str) -> dict[str, Any]:
        value: dict[str, Any] = self._forward("job_metrics", key=key)["value"]
        return value

    def export_snapshot(self, key: str, name: str, cancel: bool) -> dict[str, Any]:
        snapshot: dict[str, Any] = self._forward("export_snapshot", key=key, name=name, cancel=cancel)[
            "snapshot"
        ]
        return snapshot

    def list_snapshots(self) -> list[dict[str, Any]]:
        snapshots: list[dict[str, Any]] = self._forward("list_snapshots")["snapshots"]
        return snapshots

    def delete_snapshot(self, name: str) -> None:
        self._forward("delete_snapshot", name=name)

    def get_list(self, name: str) -> list[Any]:
        value: list[Any] = self._forward("read_all", kind="list", name=name)["value"]
        return value

    def get_map(self, name: str) -> dict[Any, Any]:
        value: dict[Any, Any] = self._forward("read_all", kind="map", name=name)["value"]
        return value

    def observable_items(self, name: str, from_position: int, timeout: float) -> job_service.ObservableSlice:
        """Observable sinks publish on the first member of a job, the coordinator: read there."""
        reply = self._forward("observable", name=name, from_position=from_position, timeout=timeout)
        return job_service.ObservableSlice(
            reply["items"], reply["next_position"], reply["done"], reply["failure"]
        )

    def _op_observable(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        read = job_service.read_observable(
            self.instance, body["name"], body["from_position"], body["timeout"]
        )
        return {
            "items": read.items,
            "next_position": read.next_position,
            "done": read.done,
            "failure": read.error,
        }

    def close(self) -> None:
        with self._lock:
            self._closed = True
            timer, self._scale_up_timer = self._scale_up_timer, None
            self._lock.notify_all()
        if timer is not None:
            timer.cancel()
        self._workers.shutdown(wait=True, cancel_futures=True)


def _member_metrics(member_job: _MemberJob) -> dict[str, dict[str, int]]:
    """The per-processor metrics (Jet's counters and call times), plus the distributed edges' links."""
    values: dict[str, dict[str, int]] = {t.name: t.metrics() for t in member_job.plan.tasklets}
    values.update(member_job.links.metrics())
    return values


def _logged(task: Callable[..., None]) -> Callable[..., None]:
    """``task``, logging what it raises (a task in the worker pool has no one to raise to)."""

    @functools.wraps(task)
    def run(*args: Any) -> None:
        try:
            task(*args)
        except Exception:
            log.exception("%s failed", task.__name__)

    return run


def _is_topology_error(error: BaseException | None) -> bool:
    """Whether a failure comes from a lost connection to another member (a restart, not a job failure)."""
    seen = 0
    while error is not None and seen < 10:
        if isinstance(error, PeerUnavailableError):
            return True
        error = error.__cause__ or error.__context__
        seen += 1
    return False


def _snapshot_summary(last: Mapping[str, Any] | None, count: int) -> dict[str, Any]:
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


def _state_mismatch(source: Mapping[str, Any], dag: dag_mod.DAG, allow_dropping: bool) -> list[str]:
    """Stages that hold state in the snapshot but are not in the job (their state would be lost)."""
    names = {v.name for v in dag.vertices()}
    missing = sorted(v for v, count in source["counts"].items() if count and v not in names)
    if not missing or allow_dropping:
        return []
    label = f"snapshot {source.get('name') or source['id']} of job {source.get('job_name', '?')!r}"
    return [
        f"{label} holds state of stage {name!r}, which this job does not have; keep the stage's name, "
        "or set JobConfig.allow_dropping_state to start without that state"
        for name in missing
    ]


def _incomplete_restore(source: Mapping[str, Any], restored: Mapping[str, int]) -> list[str]:
    """Vertices whose restored entries do not add up to what the snapshot stored."""
    label = f"snapshot {source.get('name') or source['id']} of job {source.get('job_name', '?')!r}"
    return [
        f"{label} is incomplete: stage {vertex!r} stored {count} entries "
        f"but {restored.get(vertex, 0)} were found"
        for vertex, count in sorted(source["counts"].items())
        if restored.get(vertex, 0) != count
    ]


def _remote_error(reply: Mapping[str, Any]) -> errors.JetletError:
    """The coordinator's error as the same kind of error here (so REST answers 400/404/409 alike)."""
    kind = reply.get("error_type", "")
    message = str(reply.get("error_message") or reply["error"])
    if kind == "UnknownJobError":
        return job_service.UnknownJobError(message)
    if kind == "InvalidJobRequestError":
        field = str(reply.get("error_field", ""))
        return job_service.InvalidJobRequestError(field, message.removeprefix(f"{field}: "))
    return errors.JetletError(message)
