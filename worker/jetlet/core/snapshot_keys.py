"""Snapshot keys: how a saved entry finds its processor when a job is restored.

A processor saves its state as ``(key, value)`` entries. When a job starts
from a snapshot — possibly on a different number of members or processors
than the one that saved it — every entry is given to the processor that will
own it now (Jet's rule):

* an entry whose key is a :class:`BroadcastKey` goes to *every* processor of
  the vertex (state that is not tied to a key: a source's offsets, a
  processor's watermark, a copy of a broadcast hash table); the processor
  picks what it needs in ``finish_snapshot_restore``;
* any other entry goes to the processor that receives that key over a
  partitioned edge: partition ``stable_hash(partition_key_of(key)) %
  partition_count``, owned by one member, and there by local processor
  ``partition % local_parallelism`` — the same rule that the partitioned
  edges route items by, so restored state meets its items.

A key object that is not itself the grouping key (a window frame's key
holds the frame's timestamp too) says which part is, with a
``partition_key`` attribute (:class:`PartitionAware`).

>>> partition_or_broadcast(("k", 1), 271) == partition_of(("k", 1), 271)
True
>>> partition_or_broadcast(ProcessorKey("offsets", 0), 271) is None
True
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol, runtime_checkable

from jetlet.core import partitioning


class BroadcastKey:
    """Base of snapshot keys whose entries are restored to every processor of their vertex."""

    __slots__ = ()


@dataclasses.dataclass(frozen=True, order=True, slots=True)
class ProcessorKey(BroadcastKey):
    """The state of one processor that is not tied to a key (``tag`` names what it is)."""

    tag: str
    processor_index: int


@runtime_checkable
class PartitionAware(Protocol):
    """A snapshot key whose partition is that of its ``partition_key``."""

    @property
    def partition_key(self) -> Any: ...


_PLAIN_KEY_TYPES = frozenset({int, str, bytes, tuple, float, bool, type(None)})
"""Key types that have no ``partition_key``: checked first, as a snapshot may hold millions of keys."""


def partition_key_of(key: Any) -> Any:
    """What a snapshot key is partitioned by: its ``partition_key`` if it has one, else itself.

    (``getattr``, not ``isinstance(key, PartitionAware)``: a runtime protocol check costs
    microseconds a key.)
    """
    if type(key) in _PLAIN_KEY_TYPES:
        return key
    return getattr(key, "partition_key", key)


def partition_of(key: Any, partition_count: int) -> int:
    """The partition of a (non-broadcast) snapshot key."""
    return partitioning.stable_hash(partition_key_of(key)) % partition_count


def partition_or_broadcast(key: Any, partition_count: int) -> int | None:
    """The partition that ``key``'s entry is restored by, or None for a broadcast key (every processor)."""
    if isinstance(key, BroadcastKey):
        return None
    return partition_of(key, partition_count)
