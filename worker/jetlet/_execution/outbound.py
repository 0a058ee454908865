"""Outbound collectors: route a producer's batches onto its consumers' queues.

Each producer has one collector per outbound edge, holding one queue per
consumer. The tasklet hands the collector a whole outbox bucket with
``push`` (only when the previous one is fully delivered) and then calls
``flush`` until it returns True. Routing splits the batch once:

* unicast: the whole batch to one consumer, round-robin, preferring one with room;
* isolated and all-to-one: there is exactly one queue;
* broadcast: the same list to every queue (consumers only read it);
* partitioned: one sub-list per consumer, by the partition of each item's key; with the
  edge's splitter (items of many keys, such as record batches), each item split into one part
  per consumer.

A queue that is full keeps the rest of its share pending here; that is the
backpressure the producer feels. Control items (watermarks, the done marker)
go to every queue behind the data already pending for it, so order is kept.
"""

from __future__ import annotations

import operator
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from jetlet._execution import queues
from jetlet.core import edge as edge_mod
from jetlet.core import partitioning
from jetlet.core.partitioning import EventKey


class OutboundCollector:
    """Delivers batches of one edge from one producer to the consumers' queues."""

    def __init__(
        self,
        targets: Sequence[queues.SpscQueue],
        policy: edge_mod.RoutingPolicy,
        key_fn: Callable[[Any], Hashable] | None = None,
        partitioner: partitioning.Partitioner = partitioning.DEFAULT_PARTITIONER,
        target_of_partition: Sequence[int] = (),
        splitter: partitioning.Splitter | None = None,
    ) -> None:
        if not targets:
            raise ValueError("an outbound collector needs at least one target queue")
        self._targets = list(targets)
        self._pending: list[deque[Any]] = [deque() for _ in self._targets]
        self._waiting = 0  # number of targets with something pending
        self.delivered = 0
        """Items moved into queues so far (for progress and metrics)."""
        self._next = 0
        self._policy = policy
        self._key_fn = key_fn
        self._partitioner = partitioner
        self._target_of_partition = list(target_of_partition)
        if policy is edge_mod.RoutingPolicy.PARTITIONED and len(self._targets) > 1 and splitter is not None:
            if len(self._target_of_partition) == 0:
                raise ValueError("a partitioned collector needs a partition table")
            self._split_item = splitter.bind(self._target_of_partition)
            self._split = self._split_items
        elif policy is edge_mod.RoutingPolicy.PARTITIONED and len(self._targets) > 1:
            if key_fn is None or len(self._target_of_partition) == 0:
                raise ValueError("a partitioned collector needs a key function and a partition table")
            self._split = self._split_partitioned
        elif policy is edge_mod.RoutingPolicy.BROADCAST:
            self._split = self._split_broadcast
        else:
            self._split = self._split_unicast

    @property
    def targets(self) -> list[queues.SpscQueue]:
        return self._targets

    def is_flushed(self) -> bool:
        return self._waiting == 0

    def push(self, batch: list[Any]) -> None:
        """Take a batch for delivery; call only when :meth:`is_flushed`."""
        for target, share in self._split(batch):
            self._enqueue(target, share)

    def push_control(self, item: object) -> None:
        """Send a control item to every consumer, after what is pending for it."""
        for target in range(len(self._targets)):
            self._enqueue(target, item)

    def _enqueue(self, target: int, element: Any) -> None:
        pending = self._pending[target]
        if not pending:
            self._waiting += 1
        pending.append(element)

    def flush(self) -> bool:
        """Move pending data into the queues; True when nothing is left pending."""
        if self._waiting == 0:
            return True
        for target, pending in enumerate(self._pending):
            if not pending:
                continue
            queue = self._targets[target]
            while pending:
                head = pending[0]
                if type(head) is list:
                    taken = queue.offer_batch(head)
                    self.delivered += taken
                    if taken < len(head):
                        if taken:
                            pending[0] = head[taken:]
                        break
                else:
                    queue.offer_control(head)
                pending.popleft()
            if not pending:
                self._waiting -= 1
        return self._waiting == 0

    # -- routing -----------------------------------------------------------
    def _split_unicast(self, batch: list[Any]) -> list[tuple[int, list[Any]]]:
        count = len(self._targets)
        if count == 1:
            return [(0, batch)]
        start = self._next
        chosen = start
        for step in range(count):
            candidate = (start + step) % count
            if self._targets[candidate].room() > 0:
                chosen = candidate
                break
        self._next = (chosen + 1) % count
        return [(chosen, batch)]

    def _split_broadcast(self, batch: list[Any]) -> list[tuple[int, list[Any]]]:
        return [(target, batch) for target in range(len(self._targets))]

    def _split_items(self, batch: list[Any]) -> list[tuple[int, list[Any]]]:
        split_item = self._split_item
        shares: list[list[Any]] = [[] for _ in self._targets]
        for item in batch:
            for target, part in split_item(item):
                shares[target].append(part)
        return [(target, share) for target, share in enumerate(shares) if share]

    def _split_partitioned(self, batch: list[Any]) -> list[tuple[int, list[Any]]]:
        table = self._target_of_partition
        partition_count = len(table)
        key_fn = self._key_fn
        assert key_fn is not None
        # An event's key is its item's: call the item's key function on the items directly.
        key_of, keyed = (key_fn.item_key, map(_ITEM, batch)) if type(key_fn) is EventKey else (key_fn, batch)
        shares: list[list[Any]] = [[] for _ in self._targets]
        if type(self._partitioner) is partitioning.HashPartitioner:  # the default, or a member's copy of it
            stable_hash, own_hash = partitioning.stable_hash, partitioning.OWN_HASH_INTS
            for element, item in zip(batch, keyed, strict=True):
                key = key_of(item)
                # an int in [0, 2**61 - 1) is its own stable hash: no call for the commonest key
                hashed = key if type(key) is int and 0 <= key < own_hash else stable_hash(key)
                shares[table[hashed % partition_count]].append(element)
        else:
            get_partition = self._partitioner.get_partition
            for element, item in zip(batch, keyed, strict=True):
                shares[table[get_partition(key_of(item), partition_count)]].append(element)
        return [(target, share) for target, share in enumerate(shares) if share]


_ITEM = operator.itemgetter(1)
