"""The one partition table: derived by the coordinator, installed on every member, read by all.

Theory of operation
-------------------
The coordinator derives the partition table from the live members
(:meth:`PartitionTable.assign` keeps as many partitions where they are as it
can) and installs it on every member with ``grid_table``: each member moves
the grid partitions it no longer holds to their new owners, then uses the
table. Every reader — executions (which processor owns which key), the grid
(which member holds which partition), the REST ``/cluster`` view and
readiness — reads the table installed on its own member
(:attr:`TableKeeper.current`), so there is one table, not one per reader.
A member leaving gracefully is in no new table but is sent it too: it
hands its partitions to their new owners before it goes.

A member that the membership dropped is *stale* (:meth:`TableKeeper.members_changed`)
until a table that holds it again is installed everywhere: a member learns
that it was removed and forgets its partitions (it rejoins as a new member
under the same name), and one cut off missed the writes meanwhile, so its
copies must not count. Its name may be back in the list before the
coordinator derived a table without it (dropped and admitted again within
one heartbeat); the table then still names it as owner and backup of its
old partitions, so the install sends the stale names too: every member
rebalances as if the stale ones held nothing, and the other replicas copy
the partitions to them (:meth:`~jetlet._cluster.grid.Grid.rebalance`). A
table with a stale member is never taken as installed already.

A table is *complete* once every member (those leaving too) installed it:
every transfer it called for was acknowledged. An install that failed on
some member (a member killed while the partitions move: the second of two
quick kills) leaves a table whose new replicas of a partition may never have
received it, yet every member already uses it. The keeper then keeps, per
partition, its *holders*: the replicas of the failed table that were holders
before it (they held a complete copy, received no transfer of it and dropped
nothing), and sends them with the next table, so that the members rebalance
from them (:meth:`~jetlet._cluster.grid.Grid.rebalance`) and the others
receive the partition again instead of serving their empty copies as its
primary (a restart read "snapshot N is incomplete: stage X stored K entries
but J were found"). A partition none of whose holders is a replica of the
failed table keeps that table's replicas as holders (as before: nothing
better is known). A complete install makes the table's replicas the holders
again. The holders live on the coordinator only: a member that takes over
starts from its table's replicas.

:meth:`TableKeeper.ensure` runs on a thread of its own (installing waits for
the members to move their partitions), so the coordinator thread only waits
for its future. It also serves the grid's own operations.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Sequence
from typing import Any

from jetlet import errors
from jetlet._cluster import control, grid_store, members_view, partition_table
from jetlet._cluster import grid as grid_mod
from jetlet._cluster.control import Operation

log = logging.getLogger(__name__)

INSTALL_TIMEOUT_S = 30.0


class TableKeeper:
    """Derives, installs and serves the partition table (see the module doc)."""

    def __init__(
        self,
        channel: control.ControlChannel,
        members: members_view.MembersView,
        grid: grid_mod.Grid,
        partition_count: int,
    ) -> None:
        self._channel = channel
        self._members = members
        self._grid = grid
        self._partition_count = partition_count
        self._derived: partition_table.PartitionTable | None = None
        self._queued: concurrent.futures.Future[partition_table.PartitionTable] | None = None
        self._installed_on: set[str] = set()
        """The members that took ``_derived`` (a member not yet connected gets it on a later ensure)."""
        self._listed: set[str] = set()
        """The names of the last member list (:meth:`members_changed`)."""
        self._stale: set[str] = set()
        """Members dropped from the list since a table holding them was installed everywhere."""
        self._holders: tuple[tuple[str, ...], ...] | None = None
        """Per partition, the replicas known to hold a complete copy, while the last install failed
        somewhere (None: every replica of the installed table does; see the module doc)."""
        self._lock = threading.Lock()
        self.install_lock = threading.RLock()
        """Held while a table is installed: the coordinator's own grid writes (job records, events)
        take it too, so none races a partition's transfer (executions never run during one)."""
        self._thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="jetlet-partition-table")
        channel.register(Operation.GRID_TABLE, self._install)
        channel.register(Operation.GRID, self._grid_operation)

    @property
    def current(self) -> partition_table.PartitionTable | None:
        """The table installed on this member (None before the coordinator installed one)."""
        table = self._grid.table
        return table.partitions if table is not None else None

    def ensure(self) -> concurrent.futures.Future[partition_table.PartitionTable]:
        """The table for the live members, installed on each of them (on the coordinator).

        Calls made while one is queued and not yet started share its future.
        """
        with self._lock:
            queued = self._queued
            if queued is not None and not queued.running() and not queued.done():
                return queued
            self._queued = self._thread.submit(self.ensure_now)
            return self._queued

    def ensure_now(self) -> partition_table.PartitionTable:
        """:meth:`ensure`, blocking the caller (for callers on an I/O thread).

        Only the coordinator derives tables: on any other member (one that thought itself alone a
        moment ago, say) this returns the table the coordinator installed, or raises
        :class:`~jetlet.errors.ClusterUnavailableError` while there is none.
        """
        if not self._members.is_coordinator():
            current = self.current
            if current is None:
                raise errors.ClusterUnavailableError("no partition table is installed yet", 0.2)
            return current
        members = self._members.live()
        with self._lock:
            table = self._derived
            current = self.current
            stale = set(self._stale)
            in_place = table is not None and current == table and self._installed_on >= set(table.members)
            if in_place and table is not None and list(table.members) == members and not stale & set(members):
                return table
            if current is not None and (table is None or current != table):
                table = current  # another coordinator's table (this member took over): go on from it
            table = partition_table.PartitionTable.assign(members, self._partition_count, table)
            holders = self._holders
            before = self._grid.table_for(current) if current is not None else None
        leaving = self._members.leaving()
        with self.install_lock:  # no job-store write races the partitions moving
            calls = {
                m: self._channel.call(
                    m,
                    Operation.GRID_TABLE,
                    members=list(table.members),
                    owners=list(table.owners),
                    leaving=leaving,
                    stale=sorted(stale),
                    holders=None if holders is None else [list(h) for h in holders],
                )
                for m in self._members.reachable()
            }
            installed: set[str] = set()
            for member, call in calls.items():
                try:
                    call.result(INSTALL_TIMEOUT_S)
                    installed.add(member)
                except Exception as exc:
                    log.info("member %s could not take the new partition table yet: %s", member, exc)
        with self._lock:
            self._derived = table
            self._installed_on = installed
            if installed >= set(table.members):
                self._stale -= set(table.members)  # their copies are the table's now
            if installed >= set(table.members) | set(leaving):
                self._holders = None
            elif before is not None:
                failed = self._grid.table_for(table)
                self._holders = self._holders_after_failure(before, failed, holders, stale)
        return table

    def _holders_after_failure(
        self,
        before: grid_store.ReplicaTable,
        failed: grid_store.ReplicaTable,
        holders: tuple[tuple[str, ...], ...] | None,
        stale: set[str],
    ) -> tuple[tuple[str, ...], ...]:
        """The holders once the install of ``failed`` did not complete (see the module doc)."""
        kept = []
        for partition in range(self._partition_count):
            held = before.replicas(partition) if holders is None else holders[partition]
            replicas = failed.replicas(partition)
            still = tuple(m for m in replicas if m in held and m not in stale)
            kept.append(still or replicas)
        return tuple(kept)

    def members_changed(self, names: Sequence[str]) -> None:
        """A new member list: the members it dropped are stale (see the module doc)."""
        with self._lock:
            self._stale |= self._listed - set(names)
            self._listed = set(names)

    def forget(self) -> None:
        """This member was removed from its cluster: drop its table and its stale partitions."""
        with self._lock:
            self._derived = None
            self._installed_on = set()
            self._listed = set()
            self._stale = set()
        self._grid.forget()

    def installed_everywhere(self) -> bool:
        """Whether every live member took the last derived table (on the coordinator)."""
        with self._lock:
            derived, installed = self._derived, set(self._installed_on)
            stale = set(self._stale)
        return (
            derived is not None
            and list(derived.members) == self._members.live()
            and installed >= set(derived.members)
            and not stale & set(derived.members)
        )

    def _install(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        """Follow the coordinator's new partition table: move partitions, then use it.

        Every member must rebalance from the same old table. A table this member derived for
        itself while it was alone is not the cluster's: when another member's table arrives
        (this member joined an existing cluster), it is dropped, not rebalanced from — its
        empty partitions would otherwise overwrite the cluster's copies.
        """
        table = partition_table.PartitionTable(tuple(body["members"]), tuple(body["owners"]))
        new = self._grid.table_for(table)
        old = self._grid.table
        me = self._members.member_name
        if old is not None and peer != me and old.partitions.members == (me,) and me in table.members:
            log.info("member %s drops the table it made while alone and takes %s's", me, peer)
            old = None
        stale = body.get("stale", ())
        holders = body.get("holders")
        sent = (
            self._grid.rebalance(old, new, body.get("leaving", ()), stale, holders) if old is not None else 0
        )
        self._grid.set_table(new)
        if peer != me:  # the coordinator's table holds them again (the coordinator keeps its own count)
            with self._lock:
                self._stale -= set(table.members)
        return {"sent": sent}

    def _grid_operation(self, peer: str, body: dict[str, Any]) -> dict[str, Any]:
        answer: dict[str, Any] = self._grid.handle(body["grid_op"], body["body"])
        return answer

    def close(self) -> None:
        self._thread.shutdown(wait=False, cancel_futures=True)
