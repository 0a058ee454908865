"""The member side of executions (Jet's ``JobExecutionService``): build, run, snapshot and stop them.

Theory of operation
-------------------
Every member, the coordinator included, serves these control operations for
the coordinator:

* ``init``: unpickle the execution's DAG (planned once, at submission: a
  member never plans), restore this member's share of the snapshot it starts
  from (the entries of the partitions it owns, routed to its processors,
  and the broadcast ones; it answers how many of each it found,
  :mod:`~jetlet._cluster.snapshot_data`), and build the execution plan —
  processors, queues, and the distributed edges' senders and receivers
  over the connections to the other members;
  an init that fails only because another member cannot be reached (a link
  reset and not yet reconnected, a member dying meanwhile) answers
  ``ClusterUnavailableError``: the coordinator starts the execution again
  rather than failing the job;
* ``start``: hand the tasklets to the member's execution service; when they
  are all done the member reports ``done`` to the coordinator, with its
  metrics and, on failure, the formatted traceback of the first error;
* ``snapshot_start``: inject a snapshot barrier; when every tasklet has
  saved its state, the member stores its part in the grid (with backups) on
  a pool thread and reports ``snapshot_done``; ``snapshot_commit`` finishes
  the sinks' two-phase commit (or rolls it back);
* with exactly-once, the first source that completes asks the coordinator
  (``ending``, ``what="end"``) whether the sources may end, and the first
  sink that would commit its last output whether it may
  (``what="final_commit"``); each waits until the coordinator grants it
  (:mod:`jetlet._execution.snapshots`, *Ending*;
  :mod:`jetlet._cluster.job_ending`), asking again after
  :data:`ENDING_RETRY_S` if it did not;
* ``cancel`` stops the execution, ``forget`` drops it, ``metrics`` reads it:
  the per-tasklet counters (``value``) and the labelled measurements
  (``samples``, :mod:`jetlet._metrics.samples`), which the member's
  ``/metrics`` endpoint reads from the same executions (:meth:`ExecutionMember.views`).

Members know executions by their id, never jobs: a late message of an old
execution finds nothing and can never disturb a newer one (fencing).
``DATA`` and ``FLOW_ACK`` frames are routed to the execution's
:class:`~jetlet._network.tasklets.RemoteLinks` on the network thread. Each
distributed edge's flow control takes the instance's
``flow_control_period_millis`` and the packet size limit and receive window
multiplier of the edge's own ``EdgeConfig``, or else of the instance's
default one (:func:`edge_flow_settings`).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from jetlet import _embedded, _pickling, config, errors
from jetlet import job as job_mod
from jetlet._cluster import control, snapshot_data
from jetlet._cluster import grid as grid_mod
from jetlet._cluster.control import Dispatch, Operation
from jetlet._cluster.job_service import job_config_from_dict, load_dag
from jetlet._execution import execution_plan, execution_service, gil_yield
from jetlet._execution import snapshots as snapshots_mod
from jetlet._metrics import samples
from jetlet._network import tasklets as remote
from jetlet._network.frames import MessageType
from jetlet._network.transport import PeerUnavailableError
from jetlet.core import snapshot_writer
from jetlet.core.dag import DAG

log = logging.getLogger(__name__)

COMMIT_TIMEOUT_S = 30.0
INIT_RETRY_S = 0.25
ENDING_RETRY_S = 0.25
"""The delay after which a source asks again to end, when the coordinator did not grant it."""
"""The delay an ``init`` that could not reach another member asks the coordinator to start again after."""


def edge_flow_settings(
    dag: DAG, instance: config.InstanceConfig, base: remote.FlowSettings
) -> dict[int, remote.FlowSettings]:
    """The flow settings of each of ``dag``'s edges, by the id the execution plan gives it (its index).

    ``base`` (the member's: initial window, frame limit) with the instance's
    ``flow_control_period_millis``, and the ``packet_size_limit``, ``receive_window_multiplier`` and
    ``buffer_timeout_millis`` of the edge's own :class:`~jetlet.config.EdgeConfig`, or else of the
    instance's default one.
    """
    settings = {}
    for index, edge in enumerate(dag.edges()):
        edge_config = edge.config or instance.default_edge_config
        settings[index] = dataclasses.replace(
            base,
            flow_control_period_millis=instance.flow_control_period_millis,
            packet_size_limit=edge_config.packet_size_limit,
            receive_window_multiplier=edge_config.receive_window_multiplier,
            buffer_timeout_millis=edge_config.buffer_timeout_millis,
        )
    return settings


@dataclasses.dataclass
class MemberExecution:
    """This member's share of one execution."""

    execution_id: int
    job_id: int
    members: tuple[str, ...]
    coordinator: str
    plan: execution_plan.ExecutionPlan
    links: remote.RemoteLinks
    tracker: execution_service.ExecutionTracker
    snapshots: snapshots_mod.MemberSnapshots | None = None
    single_processor: tuple[str, ...] = ()
    snapshot_prefixes: dict[int, str] = dataclasses.field(default_factory=dict)
    job_name: str = ""
    edges: tuple[samples.EdgeInfo, ...] = ()
    start_time_ms: int = 0
    completion_time_ms: int = 0
    snapshot_sizes: dict[str, tuple[int, int]] = dataclasses.field(default_factory=dict)
    """Per vertex, (bytes, keys) this member stored of the last snapshot."""
    snapshot_store_ms: int | None = None
    """How long this member took to store its part of the last snapshot (None before the first)."""


class ExecutionMember:
    """This member's executions, served over the control channel. See the module doc."""

    def __init__(
        self,
        member_name: str,
        channel: control.ControlChannel,
        send_frame: Callable[[str, MessageType, bytes], None],
        instance: _embedded.EmbeddedInstance,
        grid: grid_mod.Grid,
        data_store: Any,
        flow: remote.FlowSettings,
    ) -> None:
        self.member_name = member_name
        self._channel = channel
        self._send_frame = send_frame
        self._instance = instance
        self._grid = grid
        self._data_store = data_store
        self._flow = flow
        self._executions: dict[int, MemberExecution] = {}
        self._lock = threading.Lock()
        self._store_pool = concurrent.futures.ThreadPoolExecutor(
            2, thread_name_prefix=f"jetlet-store-{member_name}"
        )
        channel.register(Operation.INIT, with_user_traceback(self._init))
        channel.register(Operation.START, self._start, Dispatch.INLINE)
        channel.register(Operation.CANCEL, self._cancel, Dispatch.INLINE)
        channel.register(Operation.FORGET, self._forget, Dispatch.INLINE)
        channel.register(Operation.METRICS, self._metrics, Dispatch.INLINE)
        channel.register(Operation.SNAPSHOT_START, self._snapshot_start, Dispatch.INLINE)
        channel.register(Operation.SNAPSHOT_COMMIT, self._snapshot_commit)

    def on_data(self, msg_type: MessageType, payload: bytes) -> None:
        """A packet or flow-control ack of a distributed edge (on the network thread).

        A packet is routed by its first bytes and decoded by its receiver tasklet (see
        :mod:`jetlet._network.tasklets`); an ack is decoded here.
        """
        if msg_type is MessageType.DATA:
            job_id, edge_id, source = remote.packet_route(payload)
            execution = self._executions.get(job_id)
            if execution is not None:
                execution.links.deliver_payload(edge_id, source, payload)
            return
        message = remote.decode_message(msg_type, payload)
        execution = self._executions.get(message.job_id)
        if execution is not None:
            execution.links.deliver(message, len(payload))

    def cancel_coordinated_by(self, coordinator: str, reason: str) -> None:
        """The coordinator is gone: stop its executions (the next coordinator starts new ones)."""
        with self._lock:
            orphans = [e for e in self._executions.values() if e.coordinator == coordinator]
        for execution in orphans:
            execution.tracker.cancel(reason)

    def fence_all(self, reason: str) -> None:
        """Stop every execution as after a lost connection (this member was paused or removed): its
        coordinator restarts the job if it still knows the execution, and otherwise nobody waits."""
        with self._lock:
            executions = list(self._executions.values())
        for execution in executions:
            execution.tracker.fail(PeerUnavailableError(reason), "fencing")

    def running(self) -> list[int]:
        with self._lock:
            return list(self._executions)

    # -- the operations ---------------------------------------------------------------
    def _init(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            return self._build(peer, body)
        except Exception as exc:
            if is_topology_error(exc):  # e.g. the restore read across a link not reconnected yet
                raise errors.ClusterUnavailableError(
                    f"member {self.member_name} cannot reach another member yet: {exc}", INIT_RETRY_S
                ) from exc
            raise

    def _build(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        members: tuple[str, ...] = tuple(body["members"])
        execution_id: int = body["execution_id"]
        dag = load_dag(body["definition"])
        job_config = job_config_from_dict(body["config"])
        index = members.index(self.member_name)
        singles = tuple(v.name for v in dag.vertices() if v.meta_supplier.is_total_parallelism_one)
        restore = body.get("restore")
        restored: dict[str, list[snapshot_data.Entries]] | None = None
        restored_counts: dict[str, int] = {}
        broadcast_read: dict[str, int] = {}
        if restore is not None:
            parallelism = execution_plan.resolve_parallelism(dag, self._instance.config)
            owned = [p for p, owner in enumerate(body["partition_owners"]) if owner == index]
            prefix = restore["prefix"]
            broadcast = self._grid.get_all(f"{prefix}/broadcast")
            broadcast_read = snapshot_data.broadcast_counts(broadcast)
            restored, restored_counts = snapshot_data.route(
                self._grid.local_primary_entries(f"{prefix}/data", owned),
                broadcast,
                parallelism,
                singles,
                index,
            )
        flows = edge_flow_settings(dag, self._instance.config, self._flow)
        links = remote.RemoteLinks(execution_id, index, self._sender(members), self._flow, flows)
        holder: list[MemberExecution] = []
        member_snapshots = None
        if job_config.processing_guarantee is not config.ProcessingGuarantee.NONE:
            member_snapshots = snapshots_mod.MemberSnapshots(
                job_config.processing_guarantee is config.ProcessingGuarantee.EXACTLY_ONCE,
                0,
                lambda snapshot_id, entries, error: self._store_soon(holder[0], snapshot_id, entries, error),
                restored_snapshot_id=body.get("snapshot_id_base", 0),
                ask_to_end=lambda: self._ask_to_end(holder[0], "end"),
                ask_to_commit=lambda: self._ask_to_end(holder[0], "final_commit"),
            )
        plan = execution_plan.build(
            dag,
            body["job_id"],
            body["name"],
            job_config,
            self._instance.config,
            member_index=index,
            member_count=len(members),
            data_store=self._data_store,
            remote=links,
            partition_owners=body["partition_owners"],
            member_snapshots=member_snapshots,
            restored=restored,
            execution_id=execution_id,
        )
        if member_snapshots is not None:
            member_snapshots.set_tasklet_count(len(plan.tasklets))
        tracker = execution_service.ExecutionTracker(body["name"])
        execution = MemberExecution(
            execution_id, body["job_id"], members, peer, plan, links, tracker, member_snapshots, singles
        )
        execution.job_name = body["name"]
        execution.edges = tuple(
            samples.EdgeInfo(e.source_name, e.source_ordinal, str(e.dest_name), e.dest_ordinal)
            for e in dag.edges()
        )
        holder.append(execution)
        with self._lock:
            self._executions[execution_id] = execution
        return {"restored_counts": restored_counts, "broadcast_counts": broadcast_read}

    def _start(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        execution = self._executions.get(body["execution_id"])
        if execution is None:
            raise errors.JetletError(f"no execution {body['execution_id']} on {self.member_name}")
        execution.start_time_ms = int(time.time() * 1000)
        execution.tracker.future.add_done_callback(lambda f: self._report_done(execution, f))
        self._instance.service.submit(execution.plan.all_tasklets(), execution.tracker)
        return {}

    def _report_done(self, execution: MemberExecution, future: concurrent.futures.Future[None]) -> None:
        error = future.exception()
        execution.completion_time_ms = int(time.time() * 1000)
        execution.plan.close_suppliers(error)
        fields: dict[str, Any] = {"execution_id": execution.execution_id, "member": self.member_name}
        fields["metrics"] = {"value": member_metrics(execution), "samples": self.measurements(execution)}
        if error is not None:
            fields.update(describe_failure(error))
            fields["cancelled"] = isinstance(error, errors.JobCancelledError)
            fields["topology"] = is_topology_error(error)
        self._channel.send(execution.coordinator, Operation.DONE, **fields)

    def _cancel(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        execution = self._executions.get(body["execution_id"])
        if execution is not None:
            execution.tracker.cancel(body.get("reason", "cancelled"))
        return {}

    def _forget(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self._executions.pop(body["execution_id"], None)
        return {}

    def _metrics(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        execution = self._executions.get(body["execution_id"])
        if execution is None:
            return {"value": {}, "samples": []}
        return {"value": member_metrics(execution), "samples": self.measurements(execution)}

    def view(self, execution: MemberExecution) -> samples.ExecutionView:
        """What this member's metrics read of ``execution`` (see :mod:`jetlet._metrics.samples`)."""
        labels = {
            "job_id": job_mod.id_to_string(execution.job_id),
            "job_name": execution.job_name,
            "execution": job_mod.id_to_string(execution.execution_id),
            "member": self.member_name,
        }
        return samples.ExecutionView(
            labels,
            execution.plan,
            execution.links,
            execution.edges,
            execution.members,
            execution.start_time_ms,
            execution.completion_time_ms,
            dict(execution.snapshot_sizes),
            execution.snapshot_store_ms,
        )

    def views(self) -> list[samples.ExecutionView]:
        """A view of every execution this member runs (for its ``/metrics``)."""
        with self._lock:
            executions = list(self._executions.values())
        return [self.view(e) for e in executions if e.start_time_ms]

    def measurements(self, execution: MemberExecution) -> list[dict[str, Any]]:
        """``execution``'s measurements on this member, as they travel (``Measurement.to_dict``)."""
        return [m.to_dict() for m in samples.execution_measurements(self.view(execution))]

    def _snapshot_start(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        execution = self._executions.get(body["execution_id"])
        if execution is None or execution.snapshots is None:
            raise errors.JetletError(
                f"no execution {body['execution_id']} with snapshots on {self.member_name}"
            )
        execution.snapshot_prefixes[body["snapshot_id"]] = body["prefix"]
        execution.snapshots.start(body["snapshot_id"], body["terminal"])
        return {}

    def _snapshot_commit(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        execution = self._executions.get(body["execution_id"])
        if execution is None or execution.snapshots is None:
            return {"ok": False}
        return {"ok": execution.snapshots.commit(body["snapshot_id"], body["success"], COMMIT_TIMEOUT_S)}

    def _ask_to_end(self, execution: MemberExecution, what: str) -> None:
        """Ask the coordinator for ``what`` (``end``, ``final_commit``), from a tasklet: nothing waits."""
        asked = self._channel.call(
            execution.coordinator, Operation.ENDING, execution_id=execution.execution_id, what=what
        )
        asked.add_done_callback(lambda answer: self._end_answered(execution, what, answer))

    def _end_answered(
        self, execution: MemberExecution, what: str, answer: concurrent.futures.Future[dict[str, Any]]
    ) -> None:
        assert execution.snapshots is not None
        gate = execution.snapshots.end if what == "end" else execution.snapshots.final_commit
        if answer.exception() is None and answer.result().get("granted"):
            gate.grant()
        elif answer.exception() is None and self._executions.get(execution.execution_id) is execution:
            # not yet (the record of the final commit was not replicated, say): ask again later
            timer = threading.Timer(ENDING_RETRY_S, gate.refused)
            timer.daemon = True
            timer.start()
        # a failed call: the coordinator is gone, and this execution is cancelled with it

    def _store_soon(
        self,
        execution: MemberExecution,
        snapshot_id: int,
        entries: dict[str, snapshot_data.Entries],
        error: str | None,
    ) -> None:
        self._store_pool.submit(self._store_part, execution, snapshot_id, entries, error)

    def _store_part(
        self,
        execution: MemberExecution,
        snapshot_id: int,
        entries: dict[str, snapshot_data.Entries],
        error: str | None,
    ) -> None:
        """Store this member's part of a snapshot in the grid (with backups), then tell the coordinator."""
        started = time.monotonic()
        report: dict[str, Any] = {
            "execution_id": execution.execution_id,
            "snapshot_id": snapshot_id,
            "member": self.member_name,
        }
        try:
            if error is not None:
                raise errors.JetletError(error)
            prefix = execution.snapshot_prefixes.pop(snapshot_id)
            pacer = gil_yield.Pacer()  # the store gives way to busy cooperative threads
            entries = {vertex: _settled_paced(part, pacer) for vertex, part in entries.items()}
            by_partition, broadcast, counts = snapshot_data.chunks_of(
                entries, self._instance.config.partition_count, execution.single_processor, pacer.done
            )
            me = self.member_name
            self._grid.put_to_partitions(
                f"{prefix}/data",
                {
                    p: [((vertex, me, p), chunk) for vertex, chunk in chunks]
                    for p, chunks in by_partition.items()
                },
            )
            if broadcast:
                self._grid.put(f"{prefix}/broadcast", [((vertex, me), chunk) for vertex, chunk in broadcast])
            size = sum(len(c) for chunks in by_partition.values() for _, c in chunks)
            report.update(counts=counts, bytes=size + sum(len(c) for _, c in broadcast))
            execution.snapshot_sizes = _sizes_by_vertex(by_partition, broadcast, counts)
            report["store_ms"] = execution.snapshot_store_ms = int((time.monotonic() - started) * 1000)
        except Exception as exc:
            log.exception("member %s could not store its part of snapshot %d", self.member_name, snapshot_id)
            report["error"] = f"{type(exc).__name__}: {exc}"
        self._channel.send(execution.coordinator, Operation.SNAPSHOT_DONE, **report)

    def _sender(self, members: tuple[str, ...]) -> remote.Send:
        send_frame = self._send_frame
        local = self.member_name

        def send(member: int, message: object) -> None:
            name = members[member]
            if name == local:
                raise ValueError("a distributed edge must not send to its own member")
            msg_type, payload = remote.encode_message(message)
            send_frame(name, msg_type, payload)

        return send

    def close(self) -> None:
        with self._lock:
            executions = list(self._executions.values())
        for execution in executions:
            execution.tracker.cancel("the member is shutting down")
        self._store_pool.shutdown(wait=True, cancel_futures=True)


def _settled_paced(part: snapshot_data.Entries, pacer: gil_yield.Pacer) -> snapshot_data.Entries:
    """``settle_lent(part)``, telling ``pacer`` of every :data:`~gil_yield.ENTRIES_PER_YIELD` settled."""
    settled: snapshot_data.Entries = []
    for group in snapshot_writer.settled_groups(part, gil_yield.ENTRIES_PER_YIELD):
        settled += group
        pacer.done(len(group))
    return settled


def _sizes_by_vertex(
    by_partition: dict[int, list[tuple[str, bytes]]],
    broadcast: list[tuple[str, bytes]],
    counts: dict[str, int],
) -> dict[str, tuple[int, int]]:
    """Per vertex, (bytes, keys) of a member's part of a snapshot (``snapshotBytes``, ``snapshotKeys``)."""
    sizes = dict.fromkeys(counts, 0)
    for vertex, chunk in [c for chunks in by_partition.values() for c in chunks] + list(broadcast):
        sizes[vertex] = sizes.get(vertex, 0) + len(chunk)
    return {vertex: (size, counts.get(vertex, 0)) for vertex, size in sizes.items()}


def member_metrics(execution: MemberExecution) -> dict[str, dict[str, int]]:
    """The per-processor metrics (Jet's counters and call times), plus the distributed edges' links."""
    values: dict[str, dict[str, int]] = {t.name: t.metrics() for t in execution.plan.tasklets}
    values.update(execution.links.metrics())
    return values


def with_user_traceback(handler: control.Handler) -> control.Handler:
    """``handler``, whose failure carries its traceback without jetlet's frames as ``remote_traceback``:
    a user's function that fails while an execution is built (a service's create function, a
    processor's ``init``) is reported in the user's own frames, as a failure while it runs is."""

    def run(peer: str, body: dict[str, Any]) -> Any:
        try:
            return handler(peer, body)
        except Exception as exc:
            if not getattr(exc, "remote_traceback", ""):
                exc.remote_traceback = errors.user_traceback(exc)  # type: ignore[attr-defined]
            raise

    return run


def describe_failure(error: BaseException) -> dict[str, Any]:
    """A failure for the coordinator: its message once, the user's traceback once, and the user's
    own exception pickled (``cause``, empty if it does not pickle) so a client can chain it."""
    message = str(error.args[0]) if isinstance(error, errors.JetletError) and error.args else str(error)
    trace = getattr(error, "remote_traceback", "") or errors.user_traceback(error)
    original = error.__cause__ if isinstance(error, errors.JobFailedError) and error.__cause__ else error
    try:
        cause = _pickling.cloudpickle_dumps(original)
    except Exception:
        cause = b""
    return {"error": message or type(error).__name__, "traceback": trace, "cause": cause}


def is_topology_error(error: BaseException | None) -> bool:
    """Whether a failure comes from a lost connection to another member (a restart, not a job failure)."""
    seen = 0
    while error is not None and seen < 10:
        if isinstance(error, PeerUnavailableError):
            return True
        if isinstance(error, grid_mod.GridError) and error.unreachable:  # e.g. a map sink's write
            return True
        error = error.__cause__ or error.__context__
        seen += 1
    return False
