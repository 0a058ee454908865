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
import itertools
import logging
import os
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jetlet import _embedded, errors, job
from jetlet._cluster import job_service, partition_table
from jetlet._execution import execution_plan, execution_service
from jetlet._network import serialization
from jetlet._network import tasklets as remote
from jetlet._network.frames import MessageType
from jetlet._network.transport import PeerUnavailableError, Transport
from jetlet.core import dag as dag_mod

log = logging.getLogger(__name__)

RPC_TIMEOUT_S = 30.0
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
    ) -> None:
        self.member_name = member_name
        self._has_quorum = has_quorum
        self.transport = transport
        self._member_names = member_names
        self.instance = instance
        self.flow = flow or remote.FlowSettings()
        self._rpc_ids = itertools.count(1)
        self._replies: dict[int, concurrent.futures.Future[dict[str, Any]]] = {}
        self._lock = threading.Condition()
        self._member_jobs: dict[int, _MemberJob] = {}
        self._jobs: dict[int, _CoordinatedJob] = {}
        self._executions: dict[int, _CoordinatedJob] = {}
        self._ids = itertools.count(int.from_bytes(os.urandom(5), "big") << 16)
        self._workers = concurrent.futures.ThreadPoolExecutor(
            4, thread_name_prefix=f"jetlet-control-{member_name}"
        )

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
            future = self._replies.pop(body["reply"], None)
            if future is not None:
                future.set_result(body)
            return True
        self._workers.submit(self._answer, peer, body)
        return True

    def on_peer_lost(self, peer: str) -> None:
        """Fail the jobs the lost member took part in (fault tolerance will restart them instead)."""
        with self._lock:
            affected = [j for j in self._jobs.values() if peer in j.members and j.status not in TERMINAL]
        for coordinated in affected:
            self._fail(coordinated, f"member {peer} left the cluster while the job ran", "")
            self._member_done(coordinated, coordinated.execution_id, peer, {})

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
        if not self._send_control(peer, {"job_op": op, "rpc": rpc, **fields}):
            self._replies.pop(rpc, None)
            future.set_result(
                {
                    "error": f"member {peer} is not connected",
                    "error_message": f"member {peer} is not connected",
                }
            )
        return future

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
        index = members.index(self.member_name)
        links = remote.RemoteLinks(job_id, index, self._sender(members), self.flow)
        plan = execution_plan.build(
            dag,
            job_id,
            body["name"],
            job_service.job_config_from_dict(body["config"]),
            self.instance.config,
            member_index=index,
            member_count=len(members),
            data_store=self.instance.store,
            remote=links,
            partition_owners=body["partition_owners"],
        )
        tracker = execution_service.ExecutionTracker(f"job {job_id}")
        with self._lock:
            self._member_jobs[job_id] = _MemberJob(job_id, members, peer, plan, links, tracker)
        return {"ok": True}

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

    def _op_read_store(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        if body["kind"] == "list":
            return {"value": list(self.instance.get_list(body["name"]))}
        return {"value": dict(self.instance.get_map(body["name"]))}

    def _op_metrics(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        member_job = self._member_jobs.get(body["job_id"])
        return {"value": _member_metrics(member_job) if member_job is not None else {}}

    # -- coordinator operations ---------------------------------------------------
    def _coordinator(self) -> str:
        return self._member_names()[0]

    def _is_coordinator(self) -> bool:
        return self._coordinator() == self.member_name

    def _forward(self, op: str, **fields: Any) -> dict[str, Any]:
        reply = self._call(self._coordinator(), op, **fields).result(RPC_TIMEOUT_S + fields.get("timeout", 0))
        if "error" in reply:
            raise _remote_error(reply)
        return reply

    def _op_done(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        execution_id = body["job_id"]
        with self._lock:
            coordinated = self._executions.get(execution_id)
        if coordinated is None:
            return {}
        if "error" in body and not body.get("cancelled"):
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
            if stopping == "suspend":
                coordinated.status = job.JobStatus.SUSPENDED.value
            elif stopping != "restart":
                failed = stopping == "fail"
                coordinated.status = job.JobStatus.FAILED.value if failed else job.JobStatus.COMPLETED.value
                coordinated.completion_time = int(time.time() * 1000)
            self._lock.notify_all()
        for name in coordinated.members:
            self._send_control(name, {"job_op": "forget", "job_id": execution_id})
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
        with self._lock:
            execution_id = next(self._ids)
            coordinated.execution_id = execution_id
            coordinated.members = tuple(self._member_names())
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
        table = partition_table.PartitionTable.assign(list(members), self.instance.config.partition_count)
        owners = [members.index(table.owner(p)) for p in range(self.instance.config.partition_count)]
        fields = {
            "job_id": execution_id,
            "name": coordinated.name,
            "definition": coordinated.definition,
            "config": coordinated.config,
            "members": list(members),
            "partition_owners": owners,
        }
        calls = {member: self._call(member, "init", **fields) for member in members}
        init_errors = []
        for member, call in calls.items():
            try:
                reply = call.result(RPC_TIMEOUT_S)
            except concurrent.futures.TimeoutError:
                reply = {"error": f"member {member} did not answer init in {RPC_TIMEOUT_S:g} s"}
            if "error" in reply:
                init_errors.append(f"member {member}: {reply['error']}")
        if init_errors:
            text = "\n".join(init_errors)
            with self._lock:
                coordinated.failure = "the job could not start:\n" + text
                coordinated.failure_traceback = text
                coordinated.status = job.JobStatus.FAILED.value
                coordinated.completion_time = int(time.time() * 1000)
                self._executions.pop(execution_id, None)
                self._lock.notify_all()
            for member in members:
                self._send_control(member, {"job_op": "forget", "job_id": execution_id})
            return
        with self._lock:
            if coordinated.execution_id != execution_id:
                return
            coordinated.status = job.JobStatus.RUNNING.value
            self._lock.notify_all()
        for member in members:
            self._call(member, "start", job_id=execution_id)

    def _op_submit(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        return {"record": self._submit(body["definition"], body["config"]).to_dict()}

    def _submit(self, definition: bytes, job_config: Mapping[str, Any]) -> job_service.JobRecord:
        parsed = job_service.job_config_from_dict(job_config)
        dag = job_service.load_definition(definition)
        dag.validate()
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
        self._start_execution(coordinated)
        return coordinated.record()

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
        """Stop every member's execution and keep the job, SUSPENDED (without snapshots, state restarts)."""
        coordinated = self._running(body["key"], "suspend")
        self._stop(coordinated, "suspend", "the job is being suspended")
        return self._await_status(coordinated, {job.JobStatus.SUSPENDED.value, *TERMINAL})

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
                per_member[member] = call.result(RPC_TIMEOUT_S).get("value", {})
            except concurrent.futures.TimeoutError:
                continue
        merged = {
            f"{member}/{name}": values
            for member, metrics in per_member.items()
            for name, values in metrics.items()
        }
        return {"value": merged}

    def _op_read_all(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        calls = [
            self._call(m, "read_store", kind=body["kind"], name=body["name"]) for m in self._member_names()
        ]
        values = [call.result(RPC_TIMEOUT_S).get("value") for call in calls]
        if body["kind"] == "list":
            return {"value": [item for part in values for item in (part or [])]}
        merged: dict[Any, Any] = {}
        for part in values:
            merged.update(part or {})
        return {"value": merged}

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
        self._workers.shutdown(wait=True, cancel_futures=True)


def _member_metrics(member_job: _MemberJob) -> dict[str, dict[str, int]]:
    """Jet's per-processor counters, plus the distributed edges' senders and receivers."""
    values: dict[str, dict[str, int]] = {
        t.name: {
            "receivedCount": t.received_count,
            "emittedCount": t.emitted_count,
            "topObservedWm": t.top_observed_watermark,
            **t.processor.metrics(),
        }
        for t in member_job.plan.tasklets
    }
    values.update(member_job.links.metrics())
    return values


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
