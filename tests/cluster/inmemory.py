"""An in-memory cluster of coordinators, for deterministic tests of the control plane.

Every member runs the real control channel and the real coordinator parts
(:class:`jetlet._cluster.coordination.Coordination`: job table, event feed,
snapshot coordinator, job lifecycle, user operations) on fakes of what lies
below them:

* the network is a queue of frames between members, delivered by the test's
  pump (:meth:`InMemoryCluster.settle`), so nothing happens between two
  lines of a test unless the test lets it;
* each member's coordinator thread is a :class:`ManualSerial`: tasks run
  when pumped, timers fire when the test advances the shared clock;
* the replicated store is one :class:`MemoryStore` that outlives members
  (as the grid does while a backup is alive);
* each member's share of executions is a :class:`FakeExecutions`, which
  answers ``init``/``start``/``snapshot_start`` at once, reports ``done``
  when the test says an execution completed or when it is cancelled, and can
  be made to hang (answer nothing) or to fail.

So a scenario — a member lost during init, the coordinator lost while a
job runs, a member hung during a snapshot — is a few lines, deterministic,
and takes milliseconds.
"""

from __future__ import annotations

import collections
import concurrent.futures
import heapq
import itertools
from collections.abc import Callable
from typing import Any

from jetlet import errors, records
from jetlet._cluster import control, coordination, members_view, partition_table
from jetlet._cluster.control import Dispatch, Operation
from jetlet._network import serialization
from jetlet._network.frames import MessageType
from jetlet._network.transport import PeerUnavailableError

PARTITIONS = 11


def done(value: Any) -> concurrent.futures.Future[Any]:
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    future.set_result(value)
    return future


class Clock:
    def __init__(self) -> None:
        self.now = 0.0


class _Timer:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualSerial:
    """A coordinator thread that runs when pumped, with timers on a shared manual clock."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._tasks: collections.deque[
            tuple[concurrent.futures.Future[Any], Callable[..., Any], tuple[Any, ...]]
        ]
        self._tasks = collections.deque()
        self._timers: list[tuple[float, int, _Timer, Callable[..., Any], tuple[Any, ...]]] = []
        self._ids = itertools.count()
        self._running = False
        self.stopped = False

    def submit(self, fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        if not self.stopped:
            self._tasks.append((future, fn, args))
        return future

    def call_later(self, delay_s: float, fn: Callable[..., Any], *args: Any) -> _Timer:
        timer = _Timer()
        heapq.heappush(self._timers, (self._clock.now + delay_s, next(self._ids), timer, fn, args))
        return timer

    def in_thread(self) -> bool:
        return self._running

    def fire_due(self) -> None:
        while self._timers and self._timers[0][0] <= self._clock.now:
            _, _, timer, fn, args = heapq.heappop(self._timers)
            if not timer.cancelled:
                self.submit(fn, *args)

    def run_one(self) -> bool:
        if not self._tasks or self.stopped:
            return False
        future, fn, args = self._tasks.popleft()
        self._running = True
        try:
            future.set_result(fn(*args))
        except Exception as exc:
            future.set_exception(exc)
        finally:
            self._running = False
        return True


class ManualPool(concurrent.futures.Executor):
    """The control channel's pool, run by the pump."""

    def __init__(self) -> None:
        self.tasks: collections.deque[Callable[[], None]] = collections.deque()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def run() -> None:
            try:
                future.set_result(fn(*args, **kwargs))
            except Exception as exc:
                future.set_exception(exc)

        self.tasks.append(run)
        return future


class MemoryStore:
    """The replicated job store, in memory; it outlives every member (as the grid does)."""

    def __init__(self) -> None:
        self.states: dict[int, dict[str, Any]] = {}
        self.events: dict[int, records.JobEvent] = {}
        self.deleted: list[str] = []
        self.exported_meta: dict[str, dict[str, Any]] = {}
        self.offload_failure: BaseException | None = None
        """Set: every offload fails with it (a full or broken snapshot directory)."""
        self.save_fails = False
        self.forgotten: list[tuple[int, str]] = []
        """Jobs whose offloaded snapshot was forgotten, with the status their saved record had then."""
        """Set: every record save fails (the grid lost the partition's replicas, say)."""

    def save(self, state: dict[str, Any]) -> concurrent.futures.Future[bool]:
        if self.save_fails:
            return done(False)
        self.states[state["id"]] = dict(state)
        return done(True)

    def save_event(self, event: records.JobEvent) -> concurrent.futures.Future[bool]:
        self.events[event.id] = event
        return done(True)

    def load_all(self) -> concurrent.futures.Future[list[dict[str, Any]]]:
        return done([dict(s) for s in self.states.values()])

    def load_events(self) -> concurrent.futures.Future[list[records.JobEvent]]:
        return done(sorted(self.events.values(), key=lambda e: e.id))

    def flush(self, timeout_s: float) -> None:
        pass

    def delete_snapshot(self, prefix: str) -> None:
        self.deleted.append(prefix)

    def offload(self, job_id: int, state: dict[str, Any]) -> concurrent.futures.Future[None]:
        if self.offload_failure is None:
            return done(None)
        failed: concurrent.futures.Future[None] = concurrent.futures.Future()
        failed.set_exception(self.offload_failure)
        return failed

    def forget_offloaded(self, job_id: int) -> None:
        self.forgotten.append((job_id, self.states.get(job_id, {}).get("status", "")))

    def export(self, source_prefix: str, meta: dict[str, Any]) -> concurrent.futures.Future[None]:
        self.exported_meta[meta["name"]] = meta
        return done(None)

    def exported(self, name: str) -> concurrent.futures.Future[dict[str, Any] | None]:
        return done(self.exported_meta.get(name))

    def list_exported(self) -> concurrent.futures.Future[list[dict[str, Any]]]:
        return done(list(self.exported_meta.values()))

    def delete_exported(self, name: str) -> concurrent.futures.Future[bool]:
        return done(self.exported_meta.pop(name, None) is not None)


class FakeTables:
    """The partition table of the live members, installed at once."""

    def __init__(self, members: members_view.MembersView) -> None:
        self._members = members
        self.current: partition_table.PartitionTable | None = None

    def ensure(self) -> concurrent.futures.Future[partition_table.PartitionTable]:
        return done(self.ensure_now())

    def ensure_now(self) -> partition_table.PartitionTable:
        self.current = partition_table.PartitionTable.assign(self._members.live(), PARTITIONS, self.current)
        return self.current

    def installed_everywhere(self) -> bool:
        return True


class FakeExecutions:
    """A member's share of executions, steered by the test (see the module doc)."""

    def __init__(self, cluster: InMemoryCluster, name: str, channel: control.ControlChannel) -> None:
        self._cluster = cluster
        self.name = name
        self._channel = channel
        self.hung = False
        """Answer nothing at all (a hung process with its connection open)."""
        self.hang_init = False
        """Answer everything but ``init``."""
        self.fail_init = ""
        self.cut_off_inits = 0
        """Answer this many inits with ``ClusterUnavailableError`` (another member not reachable yet)."""
        self.short_broadcast_inits = 0
        """Answer this many restoring inits as having read one broadcast entry fewer than the others."""
        self.inits: list[dict[str, Any]] = []
        self.running: dict[int, str] = {}
        """Execution id -> its coordinator, for executions started and not ended."""
        self.commits: list[tuple[int, int, bool]] = []
        for op, handler in {
            Operation.INIT: self._init,
            Operation.START: self._start,
            Operation.CANCEL: self._cancel,
            Operation.FORGET: lambda peer, body: {},
            Operation.METRICS: lambda peer, body: {"value": {"processed": {"count": 1}}},
            Operation.SNAPSHOT_START: self._snapshot_start,
            Operation.SNAPSHOT_COMMIT: self._snapshot_commit,
        }.items():
            channel.register(op, self._unless_hung(handler), Dispatch.INLINE)

    def _unless_hung(self, handler: control.Handler) -> control.Handler:
        def serve(peer: str, body: dict[str, Any]) -> control.Result:
            if self.hung:
                return concurrent.futures.Future()  # never answered
            return handler(peer, body)

        return serve

    def _init(self, peer: str, body: dict[str, Any]) -> control.Result:
        if self.hang_init:
            return concurrent.futures.Future()
        if self.fail_init:
            raise ValueError(self.fail_init)
        if self.cut_off_inits:
            self.cut_off_inits -= 1
            raise errors.ClusterUnavailableError(f"member {self.name} cannot reach another member yet", 0.25)
        self.inits.append(body)
        restored: dict[str, int] = {}
        broadcast: dict[str, int] = {}
        restore = body.get("restore")
        if restore is not None and body["members"].index(self.name) == 0:  # the first member gets it all
            restored = dict(self._cluster.snapshot_counts.get(restore["prefix"], {}))
        if restore is not None:  # every member reads the broadcast entries: say 3 of a window stage
            broadcast = {"window": 3}
            if self.short_broadcast_inits:
                self.short_broadcast_inits -= 1
                broadcast = {"window": 2}
        self.running[body["execution_id"]] = peer
        return {"restored_counts": restored, "broadcast_counts": broadcast}

    def _start(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        return {}

    def _cancel(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        coordinator = self.running.pop(body["execution_id"], None)
        if coordinator is not None:
            self._report(
                coordinator, body["execution_id"], error="JobCancelledError: cancelled", cancelled=True
            )
        return {}

    def cancel_coordinated_by(self, coordinator: str, reason: str) -> None:
        for execution_id, by in list(self.running.items()):
            if by == coordinator:
                del self.running[execution_id]

    def _snapshot_start(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        counts = {"aggregate": 1}
        prefix_counts = self._cluster.snapshot_counts.setdefault(body["prefix"], {})
        prefix_counts["aggregate"] = prefix_counts.get("aggregate", 0) + 1
        report = {
            "execution_id": body["execution_id"],
            "snapshot_id": body["snapshot_id"],
            "member": self.name,
            "counts": counts,
            "bytes": 100,
        }
        self._channel.send(peer, Operation.SNAPSHOT_DONE, **report)
        return {}

    def _snapshot_commit(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        self.commits.append((body["execution_id"], body["snapshot_id"], body["success"]))
        return {"ok": True}

    def ask_to_end(self, execution_id: int, what: str = "end") -> concurrent.futures.Future[dict[str, Any]]:
        """Ask the coordinator for ``what``: ``end`` (this member's sources completed) or ``final_commit``
        (its sinks are about to commit their last output)."""
        return self._channel.call(
            self.running[execution_id], Operation.ENDING, execution_id=execution_id, what=what
        )

    def complete(self, execution_id: int, error: str = "") -> None:
        """This member's share of ``execution_id`` ended (with ``error``, a failure)."""
        coordinator = self.running.pop(execution_id)
        self._report(coordinator, execution_id, error=error)

    def _report(self, coordinator: str, execution_id: int, error: str = "", cancelled: bool = False) -> None:
        fields: dict[str, Any] = {"execution_id": execution_id, "member": self.name, "metrics": {}}
        if error:
            message = error.strip().splitlines()[-1]
            fields.update(error=message, traceback=error, cause=b"", cancelled=cancelled, topology=False)
        self._channel.send(coordinator, Operation.DONE, **fields)


class _Link:
    def __init__(self, cluster: InMemoryCluster, name: str) -> None:
        self._cluster = cluster
        self._name = name

    def send(self, peer: str, msg_type: MessageType, payload: bytes) -> None:
        if not self._cluster.connected(self._name, peer):
            raise PeerUnavailableError(f"member {peer} is not connected")
        self._cluster.frames.append((self._name, peer, payload))


class Node:
    """One member: the real channel and coordinator parts on fakes."""

    def __init__(self, cluster: InMemoryCluster, name: str) -> None:
        self.name = name
        self.pool = ManualPool()
        self.serial = ManualSerial(cluster.clock)
        self.channel = control.ControlChannel(name, _Link(cluster, name), pool=self.pool)
        self.members = members_view.MembersView(name, lambda: list(cluster.member_list))
        self.tables = FakeTables(self.members)
        self.executions = FakeExecutions(cluster, name, self.channel)
        self.coordination = coordination.Coordination(
            name,
            self.serial,
            self.channel,
            self.members,
            cluster.store,
            self.tables,  # type: ignore[arg-type]
            PARTITIONS,
            cluster.scale_up_delay_s,
            cluster.has_quorum,
            self.executions.cancel_coordinated_by,
            lambda peer: cluster.connected(name, peer),
        )

    @property
    def jobs(self) -> Any:
        return self.coordination.jobs


class InMemoryCluster:
    """Members, their network and the shared store; the test pumps it (see the module doc)."""

    def __init__(self, names: list[str], scale_up_delay_s: float = 10.0) -> None:
        self.clock = Clock()
        self.store = MemoryStore()
        self.scale_up_delay_s = scale_up_delay_s
        self.frames: collections.deque[tuple[str, str, bytes]] = collections.deque()
        self.alive: set[str] = set()
        self.member_list: list[str] = []
        self.largest = 0
        """The most members listed at once (split-brain protection's 'last known size')."""
        self.nodes: dict[str, Node] = {}
        self.snapshot_counts: dict[str, dict[str, int]] = {}
        self.cut: set[frozenset[str]] = set()
        """Links reset between two live members (each side sees the other's connection drop)."""
        for name in names:
            self.join(name)

    def join(self, name: str) -> Node:
        node = Node(self, name)
        self.nodes[name] = node
        self.alive.add(name)
        self.member_list.append(name)
        self.largest = max(self.largest, len(self.member_list))
        self._publish()
        return node

    def has_quorum(self) -> bool:
        """Whether the members listed are a majority of the most ever listed (``membership.has_quorum``)."""
        return len(self.member_list) > self.largest // 2

    def _publish(self) -> None:
        for name in sorted(self.alive):
            self.nodes[name].coordination.on_members_changed(list(self.member_list))
        self.settle()

    def connected(self, a: str, b: str) -> bool:
        return a in self.alive and b in self.alive and frozenset((a, b)) not in self.cut

    def cut_link(self, a: str, b: str) -> None:
        """The link between live members ``a`` and ``b`` resets (``ss -K``): frames in flight are lost."""
        self.cut.add(frozenset((a, b)))
        self.frames = collections.deque(f for f in self.frames if {f[0], f[1]} != {a, b})
        self.nodes[a].coordination.on_peer_lost(b)
        self.nodes[b].coordination.on_peer_lost(a)
        self.settle()

    def heal_link(self, a: str, b: str) -> None:
        """The two members reconnect; each notices at its next heartbeat tick."""
        self.cut.discard(frozenset((a, b)))
        for name in sorted(self.alive):
            self.nodes[name].coordination.tick()
        self.settle()

    def settle(self, limit: int = 100_000) -> None:
        """Deliver frames and run tasks until nothing is left to do."""
        for _ in range(limit):
            if self.frames:
                source, target, payload = self.frames.popleft()
                if target in self.alive:
                    self.nodes[target].channel.on_frame(source, payload)
                continue
            ran = False
            for name in sorted(self.alive):
                node = self.nodes[name]
                if node.pool.tasks:
                    node.pool.tasks.popleft()()
                    ran = True
                ran = node.serial.run_one() or ran
            if not ran:
                return
        raise AssertionError("the cluster did not settle")

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass on the shared clock: due timers fire, then everything settles."""
        self.clock.now += seconds
        for name in sorted(self.alive):
            self.nodes[name].serial.fire_due()
        self.settle()

    def kill(self, name: str) -> None:
        """``name`` dies: its connections drop at once (the membership drops it later: :meth:`drop`)."""
        self.alive.discard(name)
        self.nodes[name].serial.stopped = True
        self.frames = collections.deque(f for f in self.frames if name not in (f[0], f[1]))
        for other in sorted(self.alive):
            self.nodes[other].coordination.on_peer_lost(name)
        self.settle()

    def crash(self, name: str) -> None:
        """``name`` dies and, after its failure timeout, the membership drops it."""
        self.kill(name)
        self.drop(name)

    def drop(self, name: str) -> None:
        """The membership removes ``name`` (after its failure timeout) and publishes the new list."""
        self.member_list.remove(name)
        self._publish()

    def ask(self, at: str, op: Operation, **fields: Any) -> concurrent.futures.Future[dict[str, Any]]:
        """Call ``op`` on the coordinator as member ``at`` sees it (what a REST call does)."""
        node = self.nodes[at]
        return node.channel.call(node.members.coordinator(), op, **fields)

    def submit(self, at: str = "", **config: Any) -> records.JobRecord:
        at = at or self.member_list[0]
        reply = self.ask(
            at,
            Operation.SUBMIT,
            definition=serialization.dumps("a planned DAG"),
            config=config,
            dag_dot="digraph {}",
            vertex_names=["source", "aggregate", "sink"],
        )
        self.settle()
        return records.JobRecord.from_dict(reply.result(0)["record"])

    def record(self, job_id: int, at: str = "") -> records.JobRecord:
        reply = self.ask(at or self.coordinator(), Operation.GET_JOB, key=str(job_id))
        self.settle()
        return records.JobRecord.from_dict(reply.result(0)["record"])

    def coordinator(self) -> str:
        return next(m for m in self.member_list if m in self.alive)

    def complete_everywhere(self, execution_id: int) -> None:
        for name in sorted(self.alive):
            executions = self.nodes[name].executions
            if execution_id in executions.running:
                executions.complete(execution_id)
        self.settle()

    def events(self, at: str = "", since: int = 0) -> list[records.JobEvent]:
        reply = self.ask(at or self.coordinator(), Operation.EVENTS, since=since, timeout=0)
        self.advance(0)
        return [records.JobEvent.from_dict(e) for e in reply.result(0)["events"]]
