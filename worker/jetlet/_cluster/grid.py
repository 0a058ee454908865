"""The grid: a cluster's in-memory, partitioned, replicated key/value store (Hazelcast's IMDG in miniature).

It holds job snapshots, job records and the cluster's own state. Every named
map is spread over the cluster's partitions, and every partition is kept by
``backup_count + 1`` members, so the data survives ``backup_count`` members
leaving at once. This module is the grid's network part: the placement and
a member's own store are :mod:`jetlet._cluster.grid_store`, the map files
of durable offload :mod:`jetlet._cluster.grid_files`.

Theory of operation
-------------------
*Placement.* The replicas of a partition are given by a
:class:`~jetlet._cluster.grid_store.ReplicaTable` (the owner, then the
next members in member-list order); every member derives the same table
from the same member list. A key lives in partition
``stable_hash(key) % partition_count``, or in the partition a caller names
(:meth:`Grid.put_to_partitions`). Each member keeps its copies in its
:class:`~jetlet._cluster.grid_store.GridStore` (values serialized).

*Writes.* :meth:`Grid.put` groups the entries by partition and sends every
replica holder one ``grid_put`` carrying all the partitions it holds (more
than one only when the batch is larger than ``max_batch_bytes``, so no
message outgrows a frame). A write returns only when every replica
acknowledged it, as Hazelcast's synchronous backups do; a replica that fails
or does not answer within ``timeout_s`` raises :class:`GridError` naming it.

*Reads.* :meth:`Grid.get_all` asks every member for its *primary*
partitions of the map (``grid_read``, paged by ``max_batch_bytes``) and
merges the answers: the primaries partition the key space, so nothing is
counted twice. :meth:`Grid.get_many` asks each key's primary.
:meth:`Grid.local_primary_entries` reads this member's own copy without the
network (the restore path of a job).

*Bulk operations.* ``grid_delete`` and ``grid_copy`` are sent to every
member, which deletes or copies the maps in every partition it holds, so a
copy moves no data across the network.

*Rebalancing* (Hazelcast's migration). After the member list changes, every
surviving member calls :meth:`Grid.rebalance` with the same old and new
tables. For each partition the *sender* is the first of its old replicas
that is still a member (or is leaving gracefully); it sends its copy (all
maps) to each new replica that was not an old replica (a backup promoted to
primary, or a backup that stays a backup, already has the data). A transfer
is a sequence of ``grid_migrate`` messages per receiver, sent one after the
other; the first message that carries a partition tells the receiver to
reset its copy of it (dropping anything stale), later ones add to it. When
every transfer was acknowledged the member drops the partitions it no longer
replicates. A partition whose old replicas have all left is *lost*: it is
logged, reported by :attr:`Grid.lost_partitions`, and its new replicas start
it empty; the grid never invents data for it. A *stale* member (one that the
membership dropped and that came back under the same name: it forgot its
copies when it learnt it was removed, or holds ones that missed every write
since) is no old replica: it never sends, and it receives its partitions'
copies as a new member does. A rebalance may also be given the *holders*
of each partition: the old replicas known to hold a complete copy. The
table keeper gives them after a table's migration failed midway (a member
died during it): the members that table made new replicas of a partition
may never have received it, and they must receive it again rather than
count as its copies. Writes must be quiesced while
the cluster rebalances (the coordinator rebalances before it restarts jobs):
a write racing a transfer of its partition could be overwritten by the
transfer.

*Durable offload.* :meth:`Grid.write_map_to_directory` reads a whole map
(as :meth:`Grid.get_all` does, without decoding the values) and writes it
to one checked file (:mod:`jetlet._cluster.grid_files`).
"""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from jetlet import errors
from jetlet._cluster import grid_files, grid_store
from jetlet._cluster.control import MemberUnreachableError
from jetlet._cluster.grid_store import MapStats, ReplicaTable
from jetlet._cluster.partition_table import PartitionTable
from jetlet._network import serialization
from jetlet._network.transport import PeerUnavailableError
from jetlet.core.partitioning import stable_hash

log = logging.getLogger(__name__)

DEFAULT_MAX_BATCH_BYTES = 8 * 1024 * 1024
"""Values' bytes per message, well below the transport's 64 MiB frame limit."""
OPERATIONS = frozenset(
    {"grid_put", "grid_get", "grid_read", "grid_delete", "grid_copy", "grid_migrate", "grid_stats"}
)
"""The control operations :meth:`Grid.handle` serves."""

GridCall = Callable[[str, str, dict[str, Any]], concurrent.futures.Future[dict[str, Any]]]
"""``call(member, op, body)``: send an operation to a member (this one too); the reply has
an ``"error"`` key (and optionally ``"error_message"``) on failure."""


class GridError(errors.JetletError):
    """A grid operation failed on one or more members, named in ``members``."""

    def __init__(self, message: str, members: Sequence[str] = (), unreachable: bool = False) -> None:
        super().__init__(message)
        self.members = tuple(members)
        self.unreachable = unreachable
        """Every member that failed was unreachable (lost or not answering): a topology change, after
        which the job restarts, not a fault of the job."""


class Grid:
    """One member's view of the grid: its :class:`GridStore` and the operations across members.

    ``call`` sends an operation to a member (see :data:`GridCall`); every member's
    :meth:`handle` must serve the :data:`OPERATIONS` it receives. Writes, reads and
    bulk operations use the table last given to :meth:`set_table` (or :meth:`rebalance`).
    """

    def __init__(
        self,
        member_name: str,
        call: GridCall,
        partition_count: int,
        backup_count: int,
        timeout_s: float = 30.0,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
    ) -> None:
        if isinstance(partition_count, bool) or not isinstance(partition_count, int) or partition_count < 1:
            raise ValueError(f"partition_count must be a positive integer, got {partition_count!r}")
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s!r}")
        if max_batch_bytes < 1:
            raise ValueError(f"max_batch_bytes must be positive, got {max_batch_bytes!r}")
        self.member_name = member_name
        self.partition_count = partition_count
        self.backup_count = backup_count
        self.timeout_s = timeout_s
        self.max_batch_bytes = max_batch_bytes
        self.store = grid_store.GridStore()
        self._call = call
        self._table: ReplicaTable | None = None
        self._lost: tuple[int, ...] = ()
        self._handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "grid_put": self._op_put,
            "grid_read": self._op_read,
            "grid_delete": self._op_delete,
            "grid_copy": self._op_copy,
            "grid_migrate": self._op_migrate,
            "grid_stats": self._op_stats,
            "grid_get": self._op_get,
        }

    # -- the table -----------------------------------------------------------------
    def table_for(self, partitions: PartitionTable) -> ReplicaTable:
        """The replica table of ``partitions`` with this grid's backup count."""
        return ReplicaTable(partitions, self.backup_count)

    @property
    def table(self) -> ReplicaTable | None:
        """The current replica table (None until :meth:`set_table`)."""
        return self._table

    def forget(self) -> None:
        """Drop the table and every partition copy: this member was removed from its cluster, so what
        it holds is stale and must never be sent to anyone (it rejoins empty, as a new member)."""
        self._table = None
        self.store = grid_store.GridStore()

    def set_table(self, table: ReplicaTable) -> None:
        """Use ``table`` for the operations from now on (no data moves: see :meth:`rebalance`)."""
        self._check_table(table)
        self._table = table

    def _check_table(self, table: ReplicaTable) -> None:
        if table.partition_count != self.partition_count:
            raise ValueError(
                f"the table has {table.partition_count} partitions, the grid {self.partition_count}"
            )
        if table.backup_count != self.backup_count:
            raise ValueError(f"the table has {table.backup_count} backups, the grid {self.backup_count}")

    def _current(self) -> ReplicaTable:
        if self._table is None:
            raise GridError(f"member {self.member_name} has no partition table yet")
        return self._table

    @property
    def lost_partitions(self) -> tuple[int, ...]:
        """The partitions the latest :meth:`rebalance` found without a surviving replica, ascending."""
        return self._lost

    # -- writes --------------------------------------------------------------------
    def put(self, map_name: str, entries: Mapping[Any, Any] | Iterable[tuple[Any, Any]]) -> None:
        """Put entries into ``map_name``, each in its key's partition; returns once every replica has them."""
        pairs = entries.items() if isinstance(entries, Mapping) else entries
        grouped: dict[int, dict[Any, bytes]] = collections.defaultdict(dict)
        for key, value in pairs:
            grouped[stable_hash(key) % self.partition_count][key] = serialization.dumps(value)
        self._put_encoded(grid_store.checked_map_name(map_name), grouped)

    def put_to_partitions(self, map_name: str, entries: Mapping[int, Iterable[tuple[Any, Any]]]) -> None:
        """Put ``{partition: [(key, value), ...]}`` into ``map_name``; returns once every replica has them."""
        grouped: dict[int, dict[Any, bytes]] = {}
        for partition, pairs in entries.items():
            if isinstance(partition, bool) or not isinstance(partition, int):
                raise TypeError(f"a partition must be an int, got {partition!r}")
            if not 0 <= partition < self.partition_count:
                raise ValueError(f"partition {partition} is not in 0..{self.partition_count - 1}")
            grouped[partition] = {key: serialization.dumps(value) for key, value in pairs}
        self._put_encoded(grid_store.checked_map_name(map_name), grouped)

    def _put_encoded(self, map_name: str, grouped: Mapping[int, dict[Any, bytes]]) -> None:
        table = self._current()
        by_holder: dict[str, list[int]] = collections.defaultdict(list)
        for partition, entries in grouped.items():
            if entries:
                for member in table.replicas(partition):
                    by_holder[member].append(partition)
        requests = [
            (member, {"entries": batch["entries"]})
            for member, partitions in by_holder.items()
            for batch in grid_store.batches(
                ((p, {map_name: grouped[p]}) for p in partitions), self.max_batch_bytes
            )
        ]
        self._call_all("grid_put", requests)

    # -- reads ---------------------------------------------------------------------
    def get_all(self, map_name: str) -> dict[Any, Any]:
        """Every entry of ``map_name``, merged from each member's primary partitions."""
        return {key: serialization.loads(value) for key, value in self._read_encoded(map_name).items()}

    def _read_encoded(self, map_name: str) -> dict[Any, bytes]:
        table = self._current()
        pending = {m: list(table.partitions.partitions_of(m)) for m in table.members}
        pending = {member: partitions for member, partitions in pending.items() if partitions}
        result: dict[Any, bytes] = {}
        while pending:
            requests = [
                (member, {"map": map_name, "partitions": partitions, "max_bytes": self.max_batch_bytes})
                for member, partitions in pending.items()
            ]
            for member, reply in self._call_all("grid_read", requests):
                result.update(zip(reply["keys"], reply["values"], strict=True))
                done = set(reply["done"])
                rest = [p for p in pending[member] if p not in done]
                if len(rest) == len(pending[member]):
                    raise GridError(f"member {member} read none of the partitions asked for", [member])
                if rest:
                    pending[member] = rest
                else:
                    del pending[member]
        return result

    def get_many(self, map_name: str, keys: Iterable[Any]) -> dict[Any, Any]:
        """The entries of ``keys`` that ``map_name`` holds, each read from its partition's primary."""
        table = self._current()
        by_owner: dict[str, list[Any]] = collections.defaultdict(list)
        for key in keys:
            by_owner[table.partitions.owner(stable_hash(key) % self.partition_count)].append(key)
        requests = [(owner, {"map": map_name, "keys": wanted}) for owner, wanted in by_owner.items()]
        found: dict[Any, Any] = {}
        for _member, reply in self._call_all("grid_get", requests):
            found.update(
                (key, serialization.loads(value))
                for key, value in zip(reply["keys"], reply["values"], strict=True)
            )
        return found

    def local_primary_entries(self, map_name: str, partitions: Iterable[int]) -> dict[int, dict[Any, Any]]:
        """This member's copy of ``map_name`` in ``partitions`` (which it must replicate); no network.

        A partition listed in :attr:`lost_partitions` reads as empty: check that first.
        """
        wanted = list(partitions)
        foreign = sorted(set(wanted) - self._current().holders_of(self.member_name))
        if foreign:
            raise GridError(f"member {self.member_name} does not replicate partitions {foreign}")
        return {
            partition: {
                key: serialization.loads(value)
                for key, value in self.store.entries(partition, map_name).items()
            }
            for partition in wanted
        }

    def map_stats(self, prefix: str = "") -> dict[str, MapStats]:
        """Entry counts and value sizes of the maps whose names start with ``prefix``."""
        table = self._current()
        requests = [
            (member, {"prefix": prefix, "partitions": list(table.partitions.partitions_of(member))})
            for member in table.members
        ]
        totals: dict[str, MapStats] = {}
        for _member, reply in self._call_all("grid_stats", requests):
            for name, (count, size) in reply["maps"].items():
                before = totals.get(name, MapStats(0, 0))
                totals[name] = MapStats(before.entries + count, before.value_bytes + size)
        return totals

    def map_names(self, prefix: str = "") -> list[str]:
        """The names of the maps with entries whose names start with ``prefix``, sorted."""
        return sorted(self.map_stats(prefix))

    # -- bulk operations -----------------------------------------------------------
    def delete_maps(self, prefix: str) -> None:
        """Delete, on every member, every map whose name starts with ``prefix``."""
        table = self._current()
        self._call_all("grid_delete", [(member, {"prefix": prefix}) for member in table.members])

    def delete_map(self, name: str) -> None:
        """Delete, on every member, the map ``name`` (only that one)."""
        table = self._current()
        body = {"prefix": grid_store.checked_map_name(name), "exact": True}
        self._call_all("grid_delete", [(member, body) for member in table.members])

    def copy_map(self, source: str, target: str) -> None:
        """Make ``target`` a copy of ``source``: every member copies the partitions it holds, locally."""
        grid_store.checked_map_name(source)
        if grid_store.checked_map_name(target) == source:
            raise ValueError(f"cannot copy map {source!r} onto itself")
        table = self._current()
        body = {"source": source, "target": target}
        self._call_all("grid_copy", [(member, body) for member in table.members])

    # -- rebalancing ---------------------------------------------------------------
    def rebalance(
        self,
        old: ReplicaTable,
        new: ReplicaTable,
        leaving: Iterable[str] = (),
        stale: Iterable[str] = (),
        holders: Sequence[Sequence[str]] | None = None,
    ) -> int:
        """Move partition copies from the ``old`` placement to the ``new`` one (see the module doc).

        Call it on every member of ``new`` with the same tables. Makes ``new`` the
        current table, sends this member's share of the copies and waits for their
        acknowledgements, then drops the partitions this member no longer keeps.
        Returns how many partitions this member sent. A failed transfer raises
        :class:`GridError` and drops nothing. Members ``leaving`` gracefully are in no
        replica of ``new`` but still send their copies (then drop them): nothing they
        held is lost, whatever the backup count. Members ``stale`` count as no old replica
        (their copies are gone or out of date): they receive, as new members do. ``holders``
        (per partition), when given, are the old replicas that hold a complete copy; the others
        receive, as new members do.
        """
        self._check_table(old)
        self._check_table(new)
        self._table = new
        me = self.member_name
        members = set(new.members) | set(leaving)
        gone = set(stale)
        lost: list[int] = []
        receivers: dict[str, list[int]] = collections.defaultdict(list)
        for partition in range(self.partition_count):
            replicas = old.replicas(partition) if holders is None else holders[partition]
            before = [member for member in replicas if member not in gone]
            survivors = [member for member in before if member in members]
            if not survivors:
                lost.append(partition)
            elif survivors[0] == me:
                for member in new.replicas(partition):
                    if member not in before:
                        receivers[member].append(partition)
        self._lost = tuple(lost)
        if lost:
            log.error(
                "%d partitions of the grid are lost (every replica left the cluster): %s", len(lost), lost
            )
        queues = {
            member: grid_store.batches(
                ((p, self.store.partition_copy(p)) for p in partitions), self.max_batch_bytes
            )
            for member, partitions in receivers.items()
        }
        while queues:  # one message per receiver per round: a reset always precedes its additions
            self._call_all("grid_migrate", [(member, batches.pop(0)) for member, batches in queues.items()])
            queues = {member: batches for member, batches in queues.items() if batches}
        dropped = self.store.retain(new.holders_of(me) - set(lost))
        if dropped:
            log.debug("member %s dropped partitions %s", me, dropped)
        return len({p for partitions in receivers.values() for p in partitions})

    # -- the network ---------------------------------------------------------------
    def _call_all(
        self, op: str, requests: Sequence[tuple[str, dict[str, Any]]]
    ) -> list[tuple[str, dict[str, Any]]]:
        """Send every request at once and wait for all; GridError naming every member that failed."""
        futures: list[tuple[str, concurrent.futures.Future[dict[str, Any]]]] = []
        for member, body in requests:
            try:
                future = self._call(member, op, body)
            except Exception as exc:  # a send that fails at once is a failure of that member
                future = concurrent.futures.Future()
                future.set_exception(exc)
            futures.append((member, future))
        deadline = time.monotonic() + self.timeout_s
        replies: list[tuple[str, dict[str, Any]]] = []
        failures: dict[str, str] = {}
        unreachable = True
        for member, future in futures:
            try:
                reply = future.result(timeout=max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                failures[member] = f"member {member} did not answer {op} within {self.timeout_s:g} s"
            except Exception as exc:
                failures[member] = f"member {member} failed {op}: {type(exc).__name__}: {exc}"
                unreachable = unreachable and isinstance(exc, (MemberUnreachableError, PeerUnavailableError))
            else:
                if "error" in reply:
                    text = str(reply.get("error_message") or reply["error"]).strip()
                    failures[member] = f"member {member} failed {op}: {text}"
                    unreachable = False
                else:
                    replies.append((member, reply))
        if failures:
            raise GridError("; ".join(failures.values()), list(failures), unreachable)
        return replies

    def handle(self, op: str, body: dict[str, Any]) -> dict[str, Any]:
        """Serve an incoming grid operation (one of :data:`OPERATIONS`); extra body keys are ignored."""
        handler = self._handlers.get(op)
        if handler is None:
            raise ValueError(f"unknown grid operation {op!r}")
        return handler(body)

    def _op_put(self, body: dict[str, Any]) -> dict[str, Any]:
        for partition, name, keys, values in body["entries"]:
            self.store.put(partition, name, keys, values)
        return {}

    def _op_get(self, body: dict[str, Any]) -> dict[str, Any]:
        name, count = body["map"], self.partition_count
        keys, values = [], []
        for key in body["keys"]:
            value = self.store.get(stable_hash(key) % count, name, key)
            if value is not None:
                keys.append(key)
                values.append(value)
        return {"keys": keys, "values": values}

    def _op_read(self, body: dict[str, Any]) -> dict[str, Any]:
        keys, values, done = self.store.read(body["map"], body["partitions"], body["max_bytes"])
        return {"keys": keys, "values": values, "done": done}

    def _op_delete(self, body: dict[str, Any]) -> dict[str, Any]:
        self.store.delete_maps(body["prefix"], exact=bool(body.get("exact")))
        return {}

    def _op_copy(self, body: dict[str, Any]) -> dict[str, Any]:
        self.store.copy_map(body["source"], body["target"])
        return {}

    def _op_migrate(self, body: dict[str, Any]) -> dict[str, Any]:
        self.store.reset(body["reset"])
        return self._op_put(body)

    def _op_stats(self, body: dict[str, Any]) -> dict[str, Any]:
        stats = self.store.stats(body["prefix"], body["partitions"])
        return {"maps": {name: list(values) for name, values in stats.items()}}

    # -- durable offload -----------------------------------------------------------
    def write_map_to_directory(self, map_name: str, directory: Path | str) -> Path:
        """Write all of ``map_name`` to its file in ``directory`` (created if missing); the file's path."""
        path = grid_files.map_file_path(directory, map_name)
        entries = self._read_encoded(map_name)
        path.parent.mkdir(parents=True, exist_ok=True)
        grid_files.write_map_file(path, map_name, entries)
        return path
