"""The coordinator's parts on one member, and how they react to members coming, going and leaving.

Theory of operation
-------------------
Every member holds a :class:`Coordination`: the job table, the event feed,
the snapshot coordinator, the job lifecycle and the user operations, all
driven by one coordinator thread (a :class:`~jetlet._cluster.coordinator_thread.Serial`).
Only the coordinator's is used; the others wait, empty, until their member
takes over.

It turns what the network and the membership report into the coordinator's
events. A member whose connection dropped (:meth:`Coordination.on_peer_lost`)
is left out of new executions and the coordinator restarts the jobs that ran
on it at once; when its connection is back while the list still holds it
(a reset link), it counts again and jobs rescale onto it. The coordinator is
declared gone only by the membership (:meth:`Coordination.on_members_changed`,
after its failure timeout): then its executions everywhere are cancelled and
the next-oldest member takes over. So a reset link never makes two members
coordinate. A member that takes over *alone* (its failure detector dropped
every other member) waits ``lone_take_over_delay_s`` first: if it was the
one cut off, its join to the others is answered ``removed`` meanwhile (see
:mod:`jetlet._cluster.membership`) and it starts over instead of running the
cluster's jobs beside the cluster; if the others did die, it takes over a
few heartbeats late. Members that joined make auto-scaling jobs rescale. A member
that announces a graceful leave (``leaving``) is left out of new executions
at once.

:class:`~jetlet._cluster.cluster_service.ClusterJobService` builds it on the
real grid, transport and thread; the deterministic tests build it on
in-memory fakes (``tests/cluster/inmemory.py``), so both run the same code.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from jetlet import records
from jetlet._cluster import (
    control,
    coordinator_thread,
    job_coordinator,
    job_operations,
    job_records,
    job_store,
    members_view,
    table_keeper,
)
from jetlet._cluster import events as events_mod
from jetlet._cluster import snapshot_coordinator as snapshots_mod
from jetlet._cluster.control import Operation

log = logging.getLogger(__name__)


class Coordination:
    """The coordinator's parts on one member (see the module doc)."""

    def __init__(
        self,
        member_name: str,
        serial: coordinator_thread.Serial,
        channel: control.ControlChannel,
        members: members_view.MembersView,
        store: job_store.JobStore,
        tables: table_keeper.TableKeeper,
        partition_count: int,
        scale_up_delay_s: float,
        has_quorum: Callable[[], bool],
        coordinator_lost: Callable[[str, str], None],
        is_connected: Callable[[str], bool],
        lone_take_over_delay_s: float = 0.0,
    ) -> None:
        self.member_name = member_name
        self.lone_take_over_delay_s = lone_take_over_delay_s
        """How long a member that dropped every other member waits before it takes their jobs over."""
        self.serial = serial
        self.channel = channel
        self.members = members
        self.store = store
        self.tables = tables
        self._coordinator_lost = coordinator_lost
        self._is_connected = is_connected
        self._rejoining = False
        """Set when the cluster removed this member: it takes nothing over until it is back in one."""
        self._handled: set[str] = set()
        """Members whose loss the coordinator already acted on (a later drop by the membership is no news)."""
        self.event_log = events_mod.EventLog(persist=self._persist_event)
        self.jobs = job_records.JobTable(self.event_log, lambda entry: _ignore(store.save(entry.state())))
        self.snapshots = snapshots_mod.SnapshotCoordinator(serial, channel, self.jobs, self.event_log, store)
        self.lifecycle = job_coordinator.JobCoordinator(
            member_name,
            serial,
            channel,
            members,
            self.jobs,
            self.event_log,
            store,
            self.snapshots,
            tables,
            partition_count,
            scale_up_delay_s,
            has_quorum,
        )
        self.operations = job_operations.JobOperations(
            serial, channel, members, self.jobs, self.event_log, store, self.lifecycle, self.snapshots
        )
        channel.register(Operation.LEAVING, self._on_leaving, control.Dispatch.INLINE)
        self._closed = False

    def _persist_event(self, event: records.JobEvent) -> concurrent.futures.Future[bool] | None:
        return self.store.save_event(event) if self.members.is_coordinator() else None

    def on_peer_lost(self, peer: str) -> None:
        """A member's connection dropped (on the network thread: nothing here blocks).

        Calls waiting on it fail, and it is left out of new executions until its connection is
        back. The coordinator restarts the jobs that ran on it at once. The loss of the
        *coordinator's* connection changes nothing else: a reset link is not a dead member, and
        only the membership decides that the coordinator is gone (see ``on_members_changed``).
        """
        self.channel.peer_lost(peer)
        news = self.members.mark_lost(peer)
        if self.members.coordinator() == peer:
            if news:
                log.warning("the connection to the coordinator %s dropped: reconnecting", peer)
                # fence: the coordinator restarts its jobs without this member, so nothing of theirs
                # may run on here (it would duplicate what the new execution produces)
                self._coordinator_lost(peer, f"the connection to its coordinator {peer} dropped")
            return
        if news and peer not in self._handled:
            self._handled.add(peer)
            self._handle_loss(peer, "its connection dropped", False)

    def on_members_changed(self, names: Sequence[str]) -> None:
        """A new member list: the dropped members are lost (they may hang with their connection open)."""
        for member in names:  # a member in the list (again, after it rejoined) is served
            self.channel.unfence(member)
        if self._rejoining:
            self.members.members_changed(names)
            if len(names) > 1 and self.member_name in names:
                self._rejoining = False
                self.serial.submit(self.lifecycle.rejoined)
                log.info("member %s is back in a cluster of %d", self.member_name, len(names))
            return
        before = self.members.known()
        leaving = {m for m in before if self.members.is_leaving(m)}
        coordinator_before = next((m for m in before if m not in leaving), None)
        dropped, joined = self.members.members_changed(names)
        if (
            coordinator_before in dropped
            and coordinator_before not in leaving
            and self.members.is_coordinator()
        ):
            self.lifecycle.ready = False  # at once: no operation may answer from the empty table meanwhile
        for member in dropped:
            self.channel.fence(member)  # it may be paused, not dead: nothing it sends is served now
            handled = member in self._handled or member in leaving
            self._handled.discard(member)
            if not handled:
                log.warning("member %s was dropped from the cluster (missed heartbeats)", member)
                self._handle_loss(member, "the membership dropped it", member == coordinator_before)
        joined = [m for m in joined if m != self.member_name]
        if self.members.is_coordinator() and not self._closed:
            self.serial.submit(self._install_table_if_idle)
            if dropped:
                self.serial.submit(self.lifecycle.members_dropped)
            if joined and before:
                self.serial.submit(self.lifecycle.members_joined, joined)

    def removed_from_cluster(self) -> None:
        """The cluster removed this member (it was paused or cut off): forget the coordinator's state.

        Its records, events and snapshots in flight are stale (the coordinator that took over has
        the replicated ones), and until it is back in a cluster it takes nothing over: alone, it
        would otherwise start the cluster's jobs a second time.
        """
        self._rejoining = True
        self._handled.clear()
        self.members.clear()
        self.lifecycle.clear()  # the caller holds the coordinator thread
        self.snapshots.clear()
        self.jobs.clear()
        self.event_log.clear()

    def tick(self) -> None:
        """Called every heartbeat: lost members whose connection is back count again (a rescale
        uses them, as after a join), and the coordinator installs the table on members that missed it."""
        if self._closed or self._rejoining:
            return
        back = [
            m for m in self.members.lost_in_list() if self._is_connected(m) and self.members.found_again(m)
        ]
        for member in back:
            self._handled.discard(member)
            log.info("member %s is reachable again", member)
        if not self.members.is_coordinator():
            return
        if back:
            self.serial.submit(self.lifecycle.members_joined, back)
        if not self.tables.installed_everywhere():
            self.serial.submit(self._install_table_if_idle)

    def _install_table_if_idle(self) -> None:
        """Install the table for the current members now, unless an execution runs.

        Partitions must not move under a running execution's writes (a write racing the
        transfer of its partition could be lost), so while jobs run the table changes only
        when an execution (re)starts: the restart after a member loss, the rescale after a
        join. Readiness of a member that joined a busy cluster waits for that rescale.
        """
        if not self.lifecycle.has_executions():
            self.tables.ensure()

    def _handle_loss(self, peer: str, why: str, was_coordinator: bool) -> None:
        if self._closed:
            return
        if was_coordinator:  # its executions stop: the next coordinator starts new ones
            self._coordinator_lost(peer, f"its coordinator {peer} left the cluster")
        if not self.members.is_coordinator():
            return
        if was_coordinator and self.lone_take_over_delay_s > 0 and self.members.all() == [self.member_name]:
            self.serial.call_later(self.lone_take_over_delay_s, self._take_over_alone, peer)
        elif was_coordinator:
            self.serial.submit(self.lifecycle.take_over, peer)
        else:
            self.serial.submit(self.lifecycle.member_lost, peer, why)

    def _take_over_alone(self, peer: str) -> None:
        """Take over from ``peer`` unless this member learnt meanwhile that the cluster goes on
        without it (it was removed, or another list that it belongs to names another coordinator)."""
        if self._closed or self._rejoining or not self.members.is_coordinator():
            log.info(
                "member %s does not take over from %s: the cluster goes on without it", self.member_name, peer
            )
            return
        self.lifecycle.take_over(peer)

    def _on_leaving(self, peer: str, body: dict[str, Any]) -> control.Result:
        """``peer`` leaves gracefully; the coordinator answers once it may go (its jobs and data moved)."""
        was_coordinator = self.members.coordinator() == peer
        self.members.mark_leaving(peer)
        if (
            self._closed
            or self._rejoining
            or self.members.is_leaving(self.member_name)
            or not self.members.is_coordinator()
        ):
            return {}  # a member that is leaving takes nothing over (the whole cluster may be stopping)
        log.info("member %s is leaving gracefully: moving its jobs and partitions off it", peer)
        answer: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()

        def move_off() -> None:
            moved = self.lifecycle.take_over(peer) if was_coordinator else self.lifecycle.member_leaving(peer)
            moved.add_done_callback(lambda f: answer.set_result({}) if not answer.done() else None)

        self.serial.submit(move_off)
        return answer

    def leave(self, timeout_s: float) -> bool:
        """This member leaves gracefully (SIGTERM); True if the cluster confirmed in time.

        A coordinator first hands its jobs over (terminal snapshots, executions stopped, records
        replicated). Then every other member is told; the coordinator answers once this member's
        jobs run elsewhere and its partitions moved, and the member may exit.
        """
        deadline = time.monotonic() + timeout_s
        others = [m for m in self.members.reachable() if m != self.member_name]
        staying = [m for m in others if not self.members.is_leaving(m)]
        if not staying:  # alone, or the whole cluster is stopping: nobody to hand anything to
            for member in others:
                self.channel.send(member, Operation.LEAVING)
            return True
        if self.members.is_coordinator() and self.jobs.all():
            handed = self.serial.submit(self.lifecycle.hand_over)
            try:
                handed.result(timeout_s).result(max(0.0, deadline - time.monotonic()))
                self.store.flush(max(0.0, deadline - time.monotonic()))
            except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
                log.warning("the jobs could not be handed over within %g s; leaving anyway", timeout_s)
        self.members.mark_leaving(self.member_name)
        calls = [self.channel.call(m, Operation.LEAVING) for m in others]
        pending = set(calls)
        while pending and time.monotonic() < deadline:  # until answered, or every other is leaving too
            _, pending = concurrent.futures.wait(pending, min(0.1, max(0.0, deadline - time.monotonic())))
            if all(self.members.is_leaving(m) or self.members.is_lost(m) for m in others):
                break
        if pending and time.monotonic() >= deadline:
            log.warning("the cluster did not confirm the leave within %g s; leaving anyway", timeout_s)
        return not pending

    def close(self) -> None:
        self._closed = True
        self.lifecycle.close()
        self.event_log.close()


def _ignore(_: object) -> None:
    """Job transitions are replicated in order without waiting (a snapshot's completion waits instead)."""
