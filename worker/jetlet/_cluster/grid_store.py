"""The grid's placement and one member's share of it: which members keep a partition, what a member holds.

Used by :mod:`jetlet._cluster.grid`, which does the network part (writes to
every replica, reads from the primaries, rebalancing).

Theory of operation
-------------------
*Placement.* A :class:`ReplicaTable` extends the
:class:`~jetlet._cluster.partition_table.PartitionTable`: the replicas of
partition ``p`` are its owner (the primary) followed by the next
``min(backup_count, n - 1)`` members after the owner in member-list order,
wrapping around. Every member derives the same table from the same member
list.

*Storage.* A member's :class:`GridStore` holds, for every partition it
replicates (primary or backup alike), map name -> ``{key: value}``. Values
are stored serialized (:mod:`jetlet._network.serialization`): the bytes are
what travels and what is written to disk, they are immutable (so a replica
on the writing member can never be changed by the caller mutating the
object it put, and copies are cheap), and their length gives the maps'
sizes. A map exists while some partition holds an entry of it. Every
operation of the store is local and takes its one lock.

*Batching.* :func:`batches` splits partitions' entries into messages of
about a byte budget of values each (every entry is counted as its value's
length plus :data:`ENTRY_OVERHEAD`), so that no message outgrows a frame.
A batch names the partitions it is the first to carry (``"reset"``), which
a migration's receiver uses to drop its stale copy before adding to it.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from jetlet._cluster.partition_table import PartitionTable

MAX_BACKUP_COUNT = 6

ENTRY_OVERHEAD = 64
"""Bytes a message is assumed to spend on an entry's key and framing, besides its value."""


def checked_map_name(name: str) -> str:
    """``name`` if it can name a map (a non-empty string); ValueError otherwise."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"a map name must be a non-empty string, got {name!r}")
    return name


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
                size += sum(len(value) + ENTRY_OVERHEAD for value in entries.values())
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

    def delete_maps(self, prefix: str, exact: bool = False) -> None:
        """Delete every map whose name starts with ``prefix`` (with ``exact``, the map of that name)."""
        with self._lock:
            for maps in self._partitions.values():
                for name in [
                    name for name in maps if name == prefix or (not exact and name.startswith(prefix))
                ]:
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
                cost = len(value) + ENTRY_OVERHEAD
                if self._size + cost > self._budget and self._size > 0:
                    self._open()
                    group = None
                if group is None:
                    group = [partition, name, [], []]
                    self.batches[-1]["entries"].append(group)
                group[2].append(key)
                group[3].append(value)
                self._size += cost


def batches(
    parts: Iterable[tuple[int, Mapping[str, Mapping[Any, bytes]]]], budget: int
) -> list[dict[str, Any]]:
    """The entries of ``parts`` (partition, its maps) as messages of about ``budget`` bytes of values.

    >>> [len(batch["entries"]) for batch in batches([(0, {"m": {"k": b"x" * 100, "j": b"y"}})], 150)]
    [1, 1]
    """
    split = _Batches(budget)
    for partition, maps in parts:
        split.add_partition(partition, maps)
    return split.batches
