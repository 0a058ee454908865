"""Stable partitioning: the same key lands in the same partition in every process.

Python's built-in ``hash()`` of ``str`` and ``bytes`` is salted per process
(``PYTHONHASHSEED``), so two members hashing the same key with it would route
it to different partitions and split its state. :func:`stable_hash` is a pure
function of the key's *value*:

* ``str`` and ``bytes``: CRC-32 of the (UTF-8) bytes;
* ``int``, ``bool`` and ``float``: CPython's numeric hash, which is not salted
  and is the same on every 64-bit platform (so ``1``, ``1.0`` and ``True``,
  which are equal dictionary keys, also share a partition);
* ``None``: a constant;
* ``tuple``, and frozen dataclasses (as the tuple of their fields): a
  combination of the elements' stable hashes;
* ``Enum`` members: the stable hash of their value;
* ``datetime``, ``date``, ``time``: the stable hash of their ISO text.

Any other type is refused with a ``TypeError`` that names it: silently
falling back to a salted hash would corrupt keyed state across members. A
class can opt in by defining ``__jetlet_hash__(self) -> int``.

The partition of a key is ``stable_hash(key) % partition_count`` (271 by
default, as in Jet); one partition table maps partitions to processors.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import sys
import zlib
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Protocol

from jetlet import config

DEFAULT_PARTITION_COUNT = config.DEFAULT_PARTITION_COUNT

_MASK64 = (1 << 64) - 1
_NONE_HASH = 0x5BD1E995


def stable_hash(key: object) -> int:
    """Return a non-negative hash of ``key`` that is identical in every process.

    >>> stable_hash("jet") == stable_hash("jet")
    True
    >>> stable_hash(("auction", 7)) >= 0
    True
    """
    kind = type(key)
    if kind is str:
        return zlib.crc32(key.encode())  # type: ignore[attr-defined]
    if kind is int or kind is bool:
        return hash(key) & _MASK64
    return _stable_hash_slow(key)


_NAN_HASH = zlib.crc32(b"nan")


def _stable_hash_slow(key: object) -> int:
    if key is None:
        return _NONE_HASH
    if isinstance(key, bytes | bytearray | memoryview):
        return zlib.crc32(key)
    if isinstance(key, str):
        return zlib.crc32(key.encode())
    if isinstance(key, enum.Enum):
        return stable_hash(key.value)
    if isinstance(key, float) and key != key:
        return _NAN_HASH  # hash(nan) depends on the object's identity since Python 3.10
    if isinstance(key, int | float):
        return hash(key) & _MASK64
    if isinstance(key, tuple):
        return _combine(key)
    if isinstance(key, datetime.date | datetime.time):
        return zlib.crc32(key.isoformat().encode())
    custom = getattr(key, "__jetlet_hash__", None)
    if custom is not None:
        return int(custom()) & _MASK64
    if dataclasses.is_dataclass(key) and not isinstance(key, type):
        params = getattr(type(key), "__dataclass_params__", None)
        if params is not None and params.frozen:
            values = tuple(getattr(key, f.name) for f in dataclasses.fields(key))
            return _combine((type(key).__qualname__, *values))
    raise TypeError(
        f"cannot partition by a key of type {type(key).__qualname__!r}: its hash is not stable "
        "across processes. Use str, bytes, int, float, bool, None, tuples of these, an Enum, "
        "a datetime, a frozen dataclass, or define __jetlet_hash__()"
    )


def _combine(values: tuple[object, ...]) -> int:
    result = 0x345678
    for value in values:
        result = ((result * 1000003) ^ stable_hash(value)) & _MASK64
    return result


OWN_HASH_INTS = sys.hash_info.modulus
"""Every int in ``[0, OWN_HASH_INTS)`` (2**61 - 1 on 64-bit CPython) is its own :func:`stable_hash`,
so a partitioned edge takes it as it is, without a call."""


class EventKey:
    """The partition key of a ``(timestamp, item)`` event: ``item_key(item)``.

    A class rather than a lambda so that a partitioned edge can call ``item_key`` on the items
    themselves (one call of the user's key function per item instead of two).
    """

    __slots__ = ("item_key",)

    def __init__(self, item_key: Callable[[Any], Any]) -> None:
        self.item_key = item_key

    def __call__(self, event: tuple[int, Any]) -> Any:
        return self.item_key(event[1])

    def __reduce__(self) -> tuple[Any, ...]:
        return (EventKey, (self.item_key,))


class Partitioner(Protocol):
    """Maps a key to a partition in ``range(partition_count)``.

    Implementations must be deterministic across processes and machines.
    """

    def get_partition(self, key: Hashable, partition_count: int) -> int: ...


class Splitter(Protocol):
    """Routes an item that holds the rows of many keys (a batch) over a partitioned edge.

    ``bind(target_of_partition)`` is called once per producer with the edge's partition table
    (partition -> consumer index); the function it returns splits one item into
    ``[(consumer, part), ...]``, each part holding the rows whose key's partition that consumer
    owns. The partition of a key must be ``stable_hash(key) % partition_count`` (as
    :class:`HashPartitioner` gives), so keyed state restored by partition meets its rows.
    Splitters must pickle (the edge is shipped to every member).
    """

    def bind(self, target_of_partition: Sequence[int]) -> Callable[[Any], list[tuple[int, Any]]]: ...


class HashPartitioner:
    """The default partitioner: ``stable_hash(key) % partition_count``."""

    def get_partition(self, key: Hashable, partition_count: int) -> int:
        return stable_hash(key) % partition_count

    def __repr__(self) -> str:
        return "HashPartitioner()"


DEFAULT_PARTITIONER = HashPartitioner()
