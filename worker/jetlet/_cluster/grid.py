"""The grid: a cluster's in-memory, partitioned, replicated key/value store (Hazelcast's IMDG in miniature).

It holds job snapshots (and later users' maps and lists). Every named map is
spread over the cluster's partitions, and every partition is kept by
``backup_count + 1`` members, so the data survives ``backup_count`` members
leaving at once.

Theory of operation
-------------------
*Placement.* A :class:`ReplicaTable` extends the
:class:`~jetlet._cluster.partition_table.PartitionTable`: the replicas of
partition ``p`` are its owner (the primary) followed by the next
``min(backup_count, n - 1)`` members after the owner in member-list order,
wrapping around. Every member derives the same table from the same member
list. A key lives in partition ``stable_hash(key) % partition_count``, or in
the partition a caller names (:meth:`Grid.put_to_partitions`).

*Storage.* A member's :class:`GridStore` holds, for every partition it
replicates (primary or backup alike), map name -> ``{key: value}``. Values
are stored serialized (:mod:`jetlet._network.serialization`): the bytes are
what travels and what is written to disk, they are immutable (so a replica
on the writing member can never be changed by the caller mutating the
object it put, and copies are cheap), and their length gives the maps'
sizes. A map exists while some partition holds an entry of it.

*Writes.* :meth:`Grid.put` groups the entries by partition and sends every
replica holder one ``grid_put`` carrying all the partitions it holds (more
than one only when the batch is larger than ``max_batch_bytes``, so no
message outgrows a frame). A write returns only when every replica
acknowledged it, as Hazelcast's synchronous backups do; a replica that fails
or does not answer within ``timeout_s`` raises :class:`GridError` naming it.

*Reads.* :meth:`Grid.get_all` asks every member for its *primary*
partitions of the map (``grid_read``, paged by ``max_batch_bytes``) and
merges the answers: the primaries partition the key space, so nothing is
counted twice. :meth:`Grid.local_primary_entries` reads this member's own
copy without the network (the restore path of a job).

*Bulk operations.* ``grid_delete`` and ``grid_copy`` are sent to every
member, which deletes or copies the maps in every partition it holds, so a
copy moves no data across the network.

*Rebalancing* (Hazelcast's migration). After the member list changes, every
surviving member calls :meth:`Grid.rebalance` with the same old and new
tables. For each partition the *sender* is the first of its old replicas
that is still a member; it sends its copy (all maps) to each new replica
that was not an old replica (a backup promoted to primary, or a backup that
stays a backup, already has the data). A transfer is a sequence of
``grid_migrate`` messages per receiver, sent one after the other; the first
message that carries a partition tells the receiver to reset its copy of it
(dropping anything stale), later ones add to it. When every transfer was
acknowledged the member drops the partitions it no longer replicates. A
partition whose old replicas have all left is *lost*: it is logged, reported
by :attr:`Grid.lost_partitions`, and its new replicas start it empty; the
grid never invents data for it. Writes must be quiesced while the cluster
rebalances (the coordinator rebalances before it restarts jobs): a write
racing a transfer of its partition could be overwritten by the transfer.

*Durable offload.* :meth:`Grid.write_map_to_directory` writes a whole map to
one file, and :func:`read_map_from_directory` reads it back. The file is
written under a temporary name, flushed to disk and atomically renamed, so
a reader sees the old file or the new one, never half of one. Its layout
(big-endian)::

    magic   8 bytes  b"JLTMAP\\r\\n"
    version u16      1
    name    u16      length of the map name in bytes
    count   u64      number of entries
    payload u64      length of the payload in bytes
    crc32   u32      of everything above, the name and the payload
    the map name (UTF-8), then the payload: serialization.dumps([keys, values])

Reading checks every one of these; a missing, truncated, corrupted or
foreign file raises :class:`SnapshotDataError` naming the file and what is
wrong, never partial data. Files come from this cluster's own members, so
values are unpickled (user objects are stored as cloudpickles).
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import logging
import os
import struct
import threading
import time
import urllib.parse
import uuid
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from jetlet import errors
from jetlet._cluster.partition_table import PartitionTable
from jetlet._network import serialization
from jetlet.core.partitioning import stable_hash

log = logging.getLogger(__name__)

MAX_BACKUP_COUNT = 6
DEFAULT_MAX_BATCH_BYTES = 8 * 1024 * 1024
"""Values' bytes per message, well below the transport's 64 MiB frame limit."""
OPERATIONS = frozenset(
    {"grid_put", "grid_get", "grid_read", "grid_delete", "grid_copy", "grid_migrate", "grid_stats"}
)
"""The control operations :meth:`Grid.handle` serves."""
MAP_FILE_SUFFIX = ".jlmap"

_ENTRY_OVERHEAD = 64
"""Bytes a message is assumed to spend on an entry's key and framing, besides its value."""

GridCall = Callable[[str, str, dict[str, Any]], concurrent.futures.Future[dict[str, Any]]]
"""``call(member, op, body)``: send an operation to a member (this one too); the reply has
an ``"error"`` key (and optionally ``"error_message"``) on failure."""


class GridError(errors.JetletError):
    """A grid operation failed on one or more members, named in ``members``."""

    def __init__(self, message: str, members: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.members = tuple(members)


class SnapshotDataError(errors.JetletError):
    """A map file on disk cannot be used: ``path`` names it, ``reason`` says what is wrong."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(f"map file {path} is unusable: {reason}")
        self.path = Path(path)
        self.reason = reason


# --------------------------------------------------------------------------- placement


@dataclasses.dataclass(frozen=True)
class ReplicaTable:
    """Which members keep each partition: its owner, then ``backup_count`` backups (see the module doc).

    >>> table = ReplicaTable(PartitionTable.assign(["a", "b", "c"], partition_count=3), backup_count=1)
    >>> [table.replicas(p) for p in range(3)]
    [('a', 'b'), ('b', 'c'), ('c', 'a')]
    >>> sorted(table.holders_of("a"))
    [0, 2]
    """

    partitions: PartitionTable
    backup_count: int
    _replicas: tuple[tuple[str, ...], ...] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        count = self.backup_count
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_BACKUP_COUNT:
            raise ValueError(f"backup_count must be an integer from 0 to {MAX_BACKUP_COUNT}, got {count!r}")
        members = self.partitions.members
        copies = min(count, len(members) - 1) + 1
        by_owner = {
            owner: tuple(members[(index + k) % len(members)] for k in range(copies))
            for index, owner in enumerate(members)
        }
        object.__setattr__(self, "_replicas", tuple(by_owner[owner] for owner in self.partitions.owners))

    @property
    def members(self) -> tuple[str, ...]:
        return self.partitions.members

    @property
    def partition_count(self) -> int:
        return self.partitions.partition_count

    def replicas(self, partition: int) -> tuple[str, ...]:
        """The members that keep ``partition``: the owner first, then its backups."""
        return self._replicas[partition]

    def holders_of(self, member: str) -> set[int]:
        """The partitions ``member`` keeps a copy of (as primary or as backup)."""
        return {p for p, replicas in enumerate(self._replicas) if member in replicas}


class MapStats(NamedTuple):
    """A map's entry count and the serialized size of its values."""

    entries: int
    value_bytes: int


# --------------------------------------------------------------------------- one member's data


class GridStore:
    """This member's copies of partitions: partition -> map name -> {key: serialized value}.

    Local operations only, each under one lock. A map dictionary is never left
    empty, so a map is present in a partition exactly when it has an entry there.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._partitions: dict[int, dict[str, dict[Any, bytes]]] = {}

    def put(self, partition: int, map_name: str, keys: Sequence[Any], values: Sequence[bytes]) -> None:
        """Set ``keys[i]`` to ``values[i]`` in ``map_name`` of ``partition``."""
        if not keys:
            return
        with self._lock:
            maps = self._partitions.setdefault(partition, {})
            maps.setdefault(map_name, {}).update(zip(keys, values, strict=True))

    def get(self, partition: int, map_name: str, key: Any) -> bytes | None:
        """The value of ``key`` in ``map_name`` in ``partition``, or None."""
        with self._lock:
            return self._partitions.get(partition, {}).get(map_name, {}).get(key)

    def entries(self, partition: int, map_name: str) -> dict[Any, bytes]:
        """A copy of ``map_name``'s entries in ``partition`` (empty if there are none)."""
        with self._lock:
            return dict(self._partitions.get(partition, {}).get(map_name, {}))

    def partition_copy(self, partition: int) -> dict[str, dict[Any, bytes]]:
        """A copy of every map's entries in ``partition``."""
        with self._lock:
            return {name: dict(entries) for name, entries in self._partitions.get(partition, {}).items()}

    def read(
        self, map_name: str, partitions: Sequence[int], max_bytes: int
    ) -> tuple[list[Any], list[bytes], list[int]]:
        """Keys and values of whole partitions, in order, until ``max_bytes`` is reached.

        Returns the keys, the values and the partitions read (at least one if any was asked for).
        """
        keys: list[Any] = []
        values: list[bytes] = []
        done: list[int] = []
        size = 0
        with self._lock:
            for partition in partitions:
                if done and size >= max_bytes:
                    break
                entries = self._partitions.get(partition, {}).get(map_name, {})
                keys.extend(entries)
                values.extend(entries.values())
                size += sum(len(value) + _ENTRY_OVERHEAD for value in entries.values())
                done.append(partition)
        return keys, values, done

    def reset(self, partitions: Iterable[int]) -> None:
        """Forget everything in ``partitions``."""
        with self._lock:
            for partition in partitions:
                self._partitions.pop(partition, None)

    def retain(self, keep: set[int]) -> list[int]:
        """Forget every partition not in ``keep``; the ones forgotten, ascending."""
        with self._lock:
            dropped = sorted(p for p in self._partitions if p not in keep)
            for partition in dropped:
                del self._partitions[partition]
        return dropped

    def delete_maps(self, prefix: str) -> None:
        """Delete every map whose name starts with ``prefix``."""
        with self._lock:
            for maps in self._partitions.values():
                for name in [name for name in maps if name.startswith(prefix)]:
                    del maps[name]

    def copy_map(self, source: str, target: str) -> None:
        """Make ``target`` a copy of ``source`` in every partition (replacing what ``target`` held)."""
        with self._lock:
            for maps in self._partitions.values():
                entries = maps.get(source)
                if entries:
                    maps[target] = dict(entries)
                else:
                    maps.pop(target, None)

    def stats(self, prefix: str, partitions: Iterable[int]) -> dict[str, MapStats]:
        """Entry counts and value sizes of the maps named ``prefix...`` over ``partitions``."""
        totals: dict[str, tuple[int, int]] = collections.defaultdict(lambda: (0, 0))
        with self._lock:
            for partition in partitions:
                for name, entries in self._partitions.get(partition, {}).items():
                    if name.startswith(prefix):
                        count, size = totals[name]
                        totals[name] = (count + len(entries), size + sum(map(len, entries.values())))
        return {name: MapStats(*total) for name, total in totals.items()}


# --------------------------------------------------------------------------- batching


class _Batches:
    """Splits partitions' entries into messages of about ``budget`` bytes of values each.

    Each batch is ``{"reset": [partitions first carried by it], "entries": [[p, map, keys, values]]}``.
    """

    def __init__(self, budget: int) -> None:
        self._budget = budget
        self.batches: list[dict[str, Any]] = []
        self._size = 0

    def _open(self) -> None:
        self.batches.append({"reset": [], "entries": []})
        self._size = 0

    def add_partition(self, partition: int, maps: Mapping[str, Mapping[Any, bytes]]) -> None:
        if not self.batches:
            self._open()
        self.batches[-1]["reset"].append(partition)
        for name, entries in maps.items():
            group: list[Any] | None = None
            for key, value in entries.items():
                cost = len(value) + _ENTRY_OVERHEAD
                if self._size + cost > self._budget and self._size > 0:
                    self._open()
                    group = None
                if group is None:
                    group = [partition, name, [], []]
                    self.batches[-1]["entries"].append(group)
                group[2].append(key)
                group[3].append(value)
                self._size += cost


def _batches(
    parts: Iterable[tuple[int, Mapping[str, Mapping[Any, bytes]]]], budget: int
) -> list[dict[str, Any]]:
    batches = _Batches(budget)
    for partition, maps in parts:
        batches.add_partition(partition, maps)
    return batches.batches


# --------------------------------------------------------------------------- the grid


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
        self.store = GridStore()
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
        self._put_encoded(_checked_name(map_name), grouped)

    def put_to_partitions(self, map_name: str, entries: Mapping[int, Iterable[tuple[Any, Any]]]) -> None:
        """Put ``{partition: [(key, value), ...]}`` into ``map_name``; returns once every replica has them."""
        grouped: dict[int, dict[Any, bytes]] = {}
        for partition, pairs in entries.items():
            if isinstance(partition, bool) or not isinstance(partition, int):
                raise TypeError(f"a partition must be an int, got {partition!r}")
            if not 0 <= partition < self.partition_count:
                raise ValueError(f"partition {partition} is not in 0..{self.partition_count - 1}")
            grouped[partition] = {key: serialization.dumps(value) for key, value in pairs}
        self._put_encoded(_checked_name(map_name), grouped)

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
            for batch in _batches(((p, {map_name: grouped[p]}) for p in partitions), self.max_batch_bytes)
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

    def copy_map(self, source: str, target: str) -> None:
        """Make ``target`` a copy of ``source``: every member copies the partitions it holds, locally."""
        _checked_name(source)
        if _checked_name(target) == source:
            raise ValueError(f"cannot copy map {source!r} onto itself")
        table = self._current()
        body = {"source": source, "target": target}
        self._call_all("grid_copy", [(member, body) for member in table.members])

    # -- rebalancing ---------------------------------------------------------------
    def rebalance(self, old: ReplicaTable, new: ReplicaTable, leaving: Iterable[str] = ()) -> int:
        """Move partition copies from the ``old`` placement to the ``new`` one (see the module doc).

        Call it on every member of ``new`` with the same tables. Makes ``new`` the
        current table, sends this member's share of the copies and waits for their
        acknowledgements, then drops the partitions this member no longer keeps.
        Returns how many partitions this member sent. A failed transfer raises
        :class:`GridError` and drops nothing. Members ``leaving`` gracefully are in no
        replica of ``new`` but still send their copies (then drop them): nothing they
        held is lost, whatever the backup count.
        """
        self._check_table(old)
        self._check_table(new)
        self._table = new
        me = self.member_name
        members = set(new.members) | set(leaving)
        lost: list[int] = []
        receivers: dict[str, list[int]] = collections.defaultdict(list)
        for partition in range(self.partition_count):
            before = old.replicas(partition)
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
            member: _batches(((p, self.store.partition_copy(p)) for p in partitions), self.max_batch_bytes)
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
        for member, future in futures:
            try:
                reply = future.result(timeout=max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                failures[member] = f"member {member} did not answer {op} within {self.timeout_s:g} s"
            except Exception as exc:
                failures[member] = f"member {member} failed {op}: {type(exc).__name__}: {exc}"
            else:
                if "error" in reply:
                    text = str(reply.get("error_message") or reply["error"]).strip()
                    failures[member] = f"member {member} failed {op}: {text}"
                else:
                    replies.append((member, reply))
        if failures:
            raise GridError("; ".join(failures.values()), list(failures))
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
        self.store.delete_maps(body["prefix"])
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
        path = map_file_path(directory, map_name)
        entries = self._read_encoded(map_name)
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_map_file(path, map_name, entries)
        return path


def write_entries_to_directory(map_name: str, entries: Mapping[Any, Any], directory: Path | str) -> Path:
    """Write ``entries`` as the map file of ``map_name`` in ``directory`` (created if missing)."""
    path = map_file_path(directory, _checked_name(map_name))
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_map_file(path, map_name, {key: serialization.dumps(value) for key, value in entries.items()})
    return path


def _checked_name(name: str) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"a map name must be a non-empty string, got {name!r}")
    return name


# --------------------------------------------------------------------------- map files

_MAGIC = b"JLTMAP\r\n"
_VERSION = 1
_FIELDS = struct.Struct(">8sHHQQ")
_CRC = struct.Struct(">I")
_HEADER_SIZE = _FIELDS.size + _CRC.size


def map_file_path(directory: Path | str, map_name: str) -> Path:
    """The file that holds ``map_name`` in ``directory`` (the name percent-encoded, so any name is safe)."""
    return Path(directory) / (urllib.parse.quote(_checked_name(map_name), safe="") + MAP_FILE_SUFFIX)


def _write_map_file(path: Path, map_name: str, entries: Mapping[Any, bytes]) -> None:
    name = map_name.encode()
    payload = serialization.dumps([list(entries), list(entries.values())])
    fields = _FIELDS.pack(_MAGIC, _VERSION, len(name), len(entries), len(payload))
    crc = zlib.crc32(payload, zlib.crc32(name, zlib.crc32(fields)))
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(temporary, "wb") as file:
            file.write(fields + _CRC.pack(crc) + name)
            file.write(payload)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # makes the rename itself durable
    finally:
        os.close(directory)


def read_map_from_directory(directory: Path | str, map_name: str) -> dict[Any, Any]:
    """The entries of ``map_name`` as :meth:`Grid.write_map_to_directory` wrote them to ``directory``.

    Raises :class:`SnapshotDataError` if the file is missing, truncated, corrupted or holds another map.
    """
    path = map_file_path(directory, map_name)
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise SnapshotDataError(path, "the file does not exist") from exc
    except OSError as exc:
        raise SnapshotDataError(path, f"the file cannot be read: {exc}") from exc
    return _decode_map_file(path, data, map_name)


def _decode_map_file(path: Path, data: bytes, map_name: str) -> dict[Any, Any]:
    if len(data) < _HEADER_SIZE:
        raise SnapshotDataError(
            path, f"truncated: {len(data)} bytes, less than the {_HEADER_SIZE}-byte header"
        )
    magic, version, name_size, count, payload_size = _FIELDS.unpack_from(data)
    if magic != _MAGIC:
        raise SnapshotDataError(path, f"not a jetlet map file (magic {magic!r}, expected {_MAGIC!r})")
    if version != _VERSION:
        raise SnapshotDataError(path, f"format version {version} is not supported (only {_VERSION})")
    expected = _HEADER_SIZE + name_size + payload_size
    if len(data) < expected:
        raise SnapshotDataError(path, f"truncated: {len(data)} bytes where the header announces {expected}")
    if len(data) > expected:
        raise SnapshotDataError(path, f"{len(data) - expected} bytes follow the announced end of the file")
    (stored,) = _CRC.unpack_from(data, _FIELDS.size)
    computed = zlib.crc32(data[_HEADER_SIZE:], zlib.crc32(data[: _FIELDS.size]))
    if stored != computed:
        raise SnapshotDataError(path, f"CRC32 mismatch: stored {stored:08x}, computed {computed:08x}")
    name = data[_HEADER_SIZE : _HEADER_SIZE + name_size].decode(errors="replace")
    if name != map_name:
        raise SnapshotDataError(path, f"the file holds map {name!r}, not {map_name!r}")
    try:
        keys, values = serialization.loads(data[_HEADER_SIZE + name_size :])
        entries = {key: serialization.loads(value) for key, value in zip(keys, values, strict=True)}
    except (serialization.SerializationError, TypeError, ValueError) as exc:
        raise SnapshotDataError(path, f"the entries cannot be decoded: {exc}") from exc
    if len(entries) != count:
        raise SnapshotDataError(path, f"{len(entries)} distinct entries where the header announces {count}")
    return entries
