"""Partitioned edges for batches: one sub-batch per consumer, by hashing a key column with numpy.

A row-path partitioned edge sends each item to the consumer that owns its key's partition,
``stable_hash(key) % partition_count`` (:mod:`jetlet.core.partitioning`), through the edge's
partition table (partition -> consumer). A batch holds rows of many keys, so a batch edge splits
it instead: :func:`key_partitions` computes every row's partition at once, by the *same*
function the row path uses, so a key meets the same consumer on both paths, on every member and
after every restart (snapshots of keyed state are restored by the same partitions):

* integer and boolean columns, vectorised: ``stable_hash`` of an int is CPython's numeric hash
  (``x mod (2**61 - 1)`` with the sign kept, -1 becoming -2) as an unsigned 64-bit number; numpy
  computes exactly that on the whole column;
* any other column (strings, floats, objects): ``stable_hash`` once per *distinct* key
  (``np.unique``), mapped back to the rows in C.

:func:`split_by_target` groups a batch's row indices by consumer (one stable ``argsort``: rows
keep their order within a sub-batch), and :class:`KeyColumnSplitter` is the edge's splitter
(``Edge.partitioned_split``): ``(timestamp, ColumnBatch)`` events, or bare batches, become one
sub-batch per consumer that has rows, each with the batch's timestamp; a batch whose rows all go
to one consumer is sent whole, not copied. No Python runs per row.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from jetlet.batches.column_batch import Column, ColumnBatch
from jetlet.core import partitioning

_HASH_MODULUS = (1 << 61) - 1
"""CPython's numeric hash modulus on 64-bit builds (``sys.hash_info.modulus``)."""


def key_partitions(keys: Column, partition_count: int) -> Column:
    """Each key's partition, ``stable_hash(key) % partition_count``, as an ``intp`` array.

    >>> from jetlet.core.partitioning import stable_hash
    >>> keys = np.array([7, -1, 1 << 62, -(1 << 63)])
    >>> key_partitions(keys, 271).tolist() == [stable_hash(int(k)) % 271 for k in keys]
    True
    >>> key_partitions(np.array(["a", "b", "a"]), 271).tolist() == [stable_hash(k) % 271 for k in "aba"]
    True
    """
    kind = keys.dtype.kind
    if kind in "ib":
        signed = keys.astype(np.int64, copy=False)
        unsigned = signed.astype(np.uint64)
        negative = signed < 0
        magnitude = np.where(negative, np.uint64(0) - unsigned, unsigned) % np.uint64(_HASH_MODULUS)
        # CPython: hash(-x) = -(x mod P), and a hash of -1 becomes -2; masked to 64 bits unsigned.
        negated = np.uint64(0) - np.where(magnitude == 1, np.uint64(2), magnitude)
        hashed = np.where(negative & (magnitude != 0), negated, magnitude)
        return (hashed % np.uint64(partition_count)).astype(np.intp)
    if kind == "u":
        hashed = keys.astype(np.uint64, copy=False) % np.uint64(_HASH_MODULUS)
        return (hashed % np.uint64(partition_count)).astype(np.intp)
    unique, inverse = np.unique(keys, return_inverse=True)
    stable_hash = partitioning.stable_hash
    of_unique = np.fromiter(
        (stable_hash(key) % partition_count for key in unique.tolist()), dtype=np.intp, count=len(unique)
    )
    partitions: Column = of_unique[inverse.reshape(-1)]
    return partitions


def split_by_target(keys: Column, target_of_partition: Column) -> list[tuple[int, Column | None]]:
    """The rows of each consumer: ``(target, row indices)`` in row order, targets ascending.

    ``target_of_partition`` is the edge's partition table as an array. When every row goes to one
    consumer, the one entry's indices are None: send the batch whole.
    """
    targets = target_of_partition[key_partitions(keys, len(target_of_partition))]
    if not len(targets):
        return []
    first = targets[0]
    if (targets == first).all():
        return [(int(first), None)]
    order = np.argsort(targets, kind="stable")
    counts = np.bincount(targets)
    ends = np.cumsum(counts)
    return [
        (target, order[end - count : end])
        for target, (count, end) in enumerate(zip(counts.tolist(), ends.tolist(), strict=True))
        if count
    ]


def take_rows(batch: ColumnBatch, rows: Column) -> ColumnBatch:
    """The batch's ``rows`` (indices), every column."""
    return ColumnBatch.unchecked(
        {name: values[rows] for name, values in batch.columns.items()}, batch.timestamp
    )


@dataclasses.dataclass(frozen=True, slots=True)
class KeyColumnSplitter:
    """Splits ``(timestamp, ColumnBatch)`` events (or bare batches) by the key ``column``."""

    column: str

    def bind(self, target_of_partition: Sequence[int]) -> Callable[[Any], list[tuple[int, Any]]]:
        """The split of one item for one producer's partition table (see the module doc)."""
        table = np.asarray(target_of_partition, dtype=np.intp)
        column = self.column

        def split(item: Any) -> list[tuple[int, Any]]:
            if type(item) is tuple:
                timestamp, batch = item
                return [
                    (target, item if rows is None else (timestamp, take_rows(batch, rows)))
                    for target, rows in split_by_target(batch[column], table)
                ]
            return [
                (target, item if rows is None else take_rows(item, rows))
                for target, rows in split_by_target(item[column], table)
            ]

        return split
