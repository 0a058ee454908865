"""A member's job service on a cluster: the thin façade that wires the coordinator's parts together.

Theory of operation
-------------------
Every member builds the same parts (dependencies point down, each part gets
the callables or protocols it needs):

* :class:`~jetlet._cluster.control.ControlChannel` — the control RPC and its
  table of operations;
* :class:`~jetlet._cluster.members_view.MembersView` — live, lost and leaving
  members, and who coordinates;
* the replicated grid, its :class:`~jetlet._cluster.table_keeper.TableKeeper`
  (the one partition table) and the members' named lists and maps in it;
* :class:`~jetlet._cluster.execution_member.ExecutionMember` — this member's
  share of executions;
* on the coordinator: the :class:`~jetlet._cluster.job_records.JobTable`, the
  event feed, the :class:`~jetlet._cluster.job_store.GridJobStore`, the
  :class:`~jetlet._cluster.snapshot_coordinator.SnapshotCoordinator`, the
  :class:`~jetlet._cluster.job_coordinator.JobCoordinator` and the
  :class:`~jetlet._cluster.job_operations.JobOperations`, all driven by one
  coordinator thread. Every member has them; only the coordinator's are used,
  and a member that takes over loads the records they need.

The façade implements the REST layer's :class:`~jetlet._cluster.job_service.JobService`
protocol by forwarding each operation to the coordinator (itself included)
and riding through a coordinator change: a call to a coordinator that
vanished waits for the next one, a coordinator that answers "retry" (it is
taking over) is asked again after the delay it gave. It turns network and
membership news into the coordinator's events: a lost connection, a member
dropped, a member joined, a member leaving gracefully.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jetlet import _embedded, errors, job, records
from jetlet._cluster import (
    cluster_store,
    control,
    coordination,
    coordinator_thread,
    durable,
    execution_member,
    job_records,
    job_service,
    job_store,
    members_view,
    table_keeper,
)
from jetlet._cluster import events as events_mod
from jetlet._cluster import grid as grid_mod
from jetlet._cluster.control import MemberUnreachableError, Operation
from jetlet._network import tasklets as remote
from jetlet._network.frames import MessageType
from jetlet._network.transport import Transport

log = logging.getLogger(__name__)

RPC_TIMEOUT_S = 30.0
FAILOVER_WAIT_S = 5.0
ASK_ATTEMPTS = 6


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
        lone_take_over_delay_s: float = 0.0,
    ) -> None:
        self.member_name = member_name
        self.instance = instance
        settings = instance.config
        self.channel = control.ControlChannel(member_name, transport)
        self.members = members_view.MembersView(member_name, member_names)
        self.grid = grid_mod.Grid(
            member_name,
            lambda member, op, body: self.channel.call(member, Operation.GRID, grid_op=op, body=body),
            settings.partition_count,
            settings.backup_count,
            timeout_s=RPC_TIMEOUT_S,
        )
        self.tables = table_keeper.TableKeeper(
            self.channel, self.members, self.grid, settings.partition_count
        )
        self.data_store = cluster_store.ClusterDataStore(self.grid, instance.store)
        """The jobs' named lists and maps, in the grid (observables stay on the member)."""
        self.executions = execution_member.ExecutionMember(
            member_name,
            self.channel,
            transport.send,
            instance,
            self.grid,
            self.data_store,
            flow or remote.FlowSettings(),
        )
        self.offload = durable.DurableSnapshots(snapshot_directory, self.grid) if snapshot_directory else None
        """Writes complete snapshots to a directory too, and brings them back when a cluster starts."""
        self.store = job_store.GridJobStore(
            self.grid, self.tables.ensure_now, self.offload, self.tables.install_lock
        )
        self.serial = coordinator_thread.CoordinatorThread(f"jetlet-coordinator-{member_name}")
        self.coordination = coordination.Coordination(
            member_name,
            self.serial,
            self.channel,
            self.members,
            self.store,
            self.tables,
            settings.partition_count,
            settings.scale_up_delay_millis / 1000,
            has_quorum,
            self.executions.cancel_coordinated_by,
            transport.is_connected,
            lone_take_over_delay_s,
        )
        self.channel.register(Operation.READ_ALL, self._read_all)
        self.channel.register(Operation.DESTROY, self._destroy)
        self.channel.register(Operation.OBSERVABLE, self._observable)
        self._closed = False

    # -- the network and the membership ---------------------------------------------------------
    def on_message(self, peer: str, msg_type: MessageType, payload: bytes) -> bool:
        """Handle a frame of an authenticated peer; False if it is not for this service."""
        if msg_type in (MessageType.DATA, MessageType.FLOW_ACK):
            self.executions.on_data(msg_type, payload)
            return True
        if msg_type is MessageType.CONTROL:
            self.channel.on_frame(peer, payload)
            return True
        return False

    def on_peer_lost(self, peer: str) -> None:
        """A member's connection dropped (on the network thread: nothing here blocks)."""
        self.coordination.on_peer_lost(peer)

    def on_members_changed(self, names: Sequence[str]) -> None:
        """A new member list (see :meth:`~jetlet._cluster.coordination.Coordination.on_members_changed`)."""
        self.tables.members_changed(names)
        self.coordination.on_members_changed(names)

    def leave(self, timeout_s: float) -> bool:
        """Leave the cluster gracefully (see :meth:`~jetlet._cluster.coordination.Coordination.leave`)."""
        return self.coordination.leave(timeout_s)

    def paused(self, paused_ms: int) -> None:
        """This member itself was not running for longer than the failure timeout: hold the
        coordinator thread (whatever it coordinated must not act until it knows whether the cluster
        removed it) and stop its executions (the cluster restarts them; a stale one must not write)."""
        self.serial.hold()
        self.executions.fence_all(f"member {self.member_name} was not running for {paused_ms} ms")

    def confirmed(self) -> None:
        """After a pause, the cluster still counts this member in: the coordinator thread goes on."""
        self.serial.release()

    def removed_from_cluster(self) -> None:
        """The cluster removed this member (paused or cut off): forget, fence, and rejoin empty.

        With the coordinator thread held, its state is forgotten (the reports of the executions
        fenced next find nothing to act on, and nothing it had queued acts on stale state); the
        grid's stale partitions are dropped, never sent.
        """
        self.serial.hold()
        try:
            self.coordination.removed_from_cluster()
        finally:
            self.serial.release()
        self.tables.forget()
        self.executions.fence_all(f"member {self.member_name} was removed from the cluster")

    def tick(self) -> None:
        """Called every heartbeat (see :meth:`~jetlet._cluster.coordination.Coordination.tick`)."""
        self.coordination.tick()

    def recover_offloaded_jobs(self) -> int:
        """On the coordinator of a starting cluster: run on the jobs whose snapshots were offloaded."""
        if self.offload is None or not self.members.is_coordinator():
            return 0
        self.coordination.lifecycle.recovering = True
        try:
            return self._recover_offloaded_jobs(self.offload)
        finally:
            self.coordination.lifecycle.recovering = False

    def _recover_offloaded_jobs(self, offload: durable.DurableSnapshots) -> int:
        self.tables.ensure_now()
        states: list[dict[str, Any]] = []
        damaged: list[dict[str, Any]] = []
        for job_id, state, problem in offload.read_all():
            if state is None:  # listed as failed, named, so that it is not lost without a word
                log.error("offloaded job %s cannot be read: %s", job_id, problem)
                damaged.append(_unreadable(job_id, problem or "unreadable"))
            elif problem is not None:  # never start from damaged state: say why, keep the job's record
                damaged.append(_failed(state, f"its offloaded snapshot cannot be restored: {problem}"))
            elif (why := durable.unresumable(state)) is not None:
                log.error("offloaded job %s cannot run on: %s", job_id, why)
                damaged.append(_failed(state, f"it cannot run on in this cluster: {why}"))
            else:
                states.append(state)
        resumed: int = self.serial.submit(
            self.coordination.lifecycle.adopt, damaged + states, "resumed from its offloaded snapshot"
        ).result(RPC_TIMEOUT_S)
        return resumed

    # -- the JobService protocol (REST calls; forwarded to the coordinator) ---------------------
    def _ask(self, op: Operation, wait_s: float = 0.0, **fields: Any) -> dict[str, Any]:
        """Ask the coordinator; ride through a coordinator change (see the module doc)."""
        last: errors.JetletError | None = None
        for _ in range(ASK_ATTEMPTS):
            coordinator = self.members.coordinator()
            try:
                return self.channel.call(coordinator, op, **fields).result(RPC_TIMEOUT_S + wait_s)
            except MemberUnreachableError as exc:
                last = exc
                self.members.wait_for_coordinator_change(coordinator, FAILOVER_WAIT_S)
            except errors.ClusterUnavailableError as exc:
                last = exc
                time.sleep(exc.retry_after_s)  # a back-off between attempts, not a wait for a condition
            except concurrent.futures.TimeoutError:
                raise errors.ClusterUnavailableError(
                    f"the coordinator {coordinator} did not answer {op.value}"
                ) from None
        raise errors.ClusterUnavailableError(f"no coordinator could answer {op.value}: {last}", 1.0)

    def _record(self, op: Operation, **fields: Any) -> records.JobRecord:
        return records.JobRecord.from_dict(self._ask(op, **fields)["record"])

    def submit(self, definition: bytes, job_config: Mapping[str, Any]) -> records.JobRecord:
        dag = job_service.load_dag(definition)
        dag.validate()
        names = sorted(v.name for v in dag.vertices())
        return self._record(
            Operation.SUBMIT,
            definition=definition,
            config=dict(job_config),
            dag_dot=dag.to_dot(),
            vertex_names=names,
        )

    def list_jobs(self) -> list[records.JobRecord]:
        return [records.JobRecord.from_dict(r) for r in self._ask(Operation.LIST_JOBS)["records"]]

    def get(self, key: str) -> records.JobRecord:
        return self._record(Operation.GET_JOB, key=key)

    def join(self, key: str, timeout: float) -> records.JobRecord:
        return records.JobRecord.from_dict(
            self._ask(Operation.JOIN_JOB, timeout, key=key, timeout=timeout)["record"]
        )

    def cancel(self, key: str) -> records.JobRecord:
        return self._record(Operation.CANCEL_JOB, key=key)

    def suspend(self, key: str) -> records.JobRecord:
        return self._record(Operation.SUSPEND_JOB, key=key)

    def resume(self, key: str) -> records.JobRecord:
        return self._record(Operation.RESUME_JOB, key=key)

    def restart(self, key: str) -> records.JobRecord:
        return self._record(Operation.RESTART_JOB, key=key)

    def metrics(self, key: str) -> dict[str, Any]:
        value: dict[str, Any] = self._ask(Operation.JOB_METRICS, key=key)["value"]
        return value

    def export_snapshot(self, key: str, name: str, cancel: bool) -> dict[str, Any]:
        snapshot: dict[str, Any] = self._ask(Operation.EXPORT_SNAPSHOT, key=key, name=name, cancel=cancel)[
            "snapshot"
        ]
        return snapshot

    def list_snapshots(self) -> list[dict[str, Any]]:
        snapshots: list[dict[str, Any]] = self._ask(Operation.LIST_SNAPSHOTS)["snapshots"]
        return snapshots

    def delete_snapshot(self, name: str) -> None:
        self._ask(Operation.DELETE_SNAPSHOT, name=name)

    def events(self, since: int, timeout: float) -> concurrent.futures.Future[events_mod.EventsPage]:
        """The coordinator's feed after ``since``: a future, so a long-poll or a stream holds no thread."""
        page: concurrent.futures.Future[events_mod.EventsPage] = concurrent.futures.Future()
        call = self.channel.call(self.members.coordinator(), Operation.EVENTS, since=since, timeout=timeout)

        def done(reply: concurrent.futures.Future[dict[str, Any]]) -> None:
            error = reply.exception()
            if isinstance(error, MemberUnreachableError):
                error = errors.ClusterUnavailableError(f"the coordinator is gone: {error}", 0.5)
            if error is not None:
                page.set_exception(error)
                return
            result = reply.result()
            events = [records.JobEvent.from_dict(e) for e in result["events"]]
            page.set_result(events_mod.EventsPage(events, int(result["last_id"])))

        call.add_done_callback(done)
        return page

    def get_list(self, name: str) -> list[Any]:
        value: list[Any] = self._ask(Operation.READ_ALL, kind="list", name=name)["value"]
        return value

    def get_map(self, name: str) -> dict[Any, Any]:
        value: dict[Any, Any] = self._ask(Operation.READ_ALL, kind="map", name=name)["value"]
        return value

    def observable_items(self, name: str, from_position: int, timeout: float) -> job_service.ObservableSlice:
        """Observable sinks publish on the first member of a job, the coordinator: read there."""
        reply = self._ask(
            Operation.OBSERVABLE, timeout, name=name, from_position=from_position, timeout=timeout
        )
        return job_service.ObservableSlice(
            reply["items"], reply["next_position"], reply["done"], reply["failure"]
        )

    def destroy(self, kind: str, name: str) -> None:
        self._ask(Operation.DESTROY, kind=kind, name=name)

    def _destroy(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        """Delete a named list or map from the grid (on the coordinator, which installed the table)."""
        self.tables.ensure_now()
        if body["kind"] == "list":
            self.data_store.destroy_list(body["name"])
        else:
            self.data_store.destroy_map(body["name"])
        return {}

    def _read_all(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        """A named list or map, read from the grid."""
        self.tables.ensure_now()
        if body["kind"] == "list":
            return {"value": self.data_store.read_list(body["name"])}
        return {"value": self.data_store.read_map(body["name"])}

    def _observable(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
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
        self._closed = True
        self.coordination.close()
        self.serial.close()
        self.executions.close()
        self.channel.close()
        self.tables.close()
        self.store.close()


def _failed(state: dict[str, Any], failure: str) -> dict[str, Any]:
    """An offloaded job's record, FAILED with ``failure`` (it is listed, never run)."""
    return {**state, "status": "FAILED", "completion_time": int(time.time() * 1000), "failure": failure}


def _unreadable(job_id: int, problem: str) -> dict[str, Any]:
    """The record of an offloaded job whose own record cannot be read: FAILED, saying where and why."""
    entry = job_records.JobEntry(job_id, job.id_to_string(job_id), b"", {})
    entry.status = job_records.Status.FAILED
    entry.completion_time = int(time.time() * 1000)
    entry.failure = (
        f"its offloaded record cannot be read, so it was not resumed: {problem}. "
        "Remove that folder from the snapshot directory once it is of no more use."
    )
    return entry.state()
