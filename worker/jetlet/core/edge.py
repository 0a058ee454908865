"""Edges: how items travel from one vertex's output to another's input.

An edge connects output ``source_ordinal`` of its source vertex to input
``dest_ordinal`` of its destination. Its *routing policy* picks, for each
item, which of the destination's processors receives it:

==============  ============================================================
``UNICAST``     any one consumer with room, round-robin (the default)
``ISOLATED``    producer ``i`` always feeds consumer ``i mod n``
``PARTITIONED`` the consumer that owns the item's key's partition (or, with
                a splitter, each part of the item to the consumer of its keys)
``BROADCAST``   every consumer
``ALL_TO_ONE``  one single consumer in the whole cluster
==============  ============================================================

An edge is *local* by default (items stay on the member that produced
them); ``distributed()`` lets them cross to other members. ``priority(n)``
orders inputs: the engine exhausts every edge of a lower priority number
before it reads any edge of a higher one (hash joins read their build side
first this way).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

from jetlet import config
from jetlet.core import partitioning

if TYPE_CHECKING:
    from jetlet.core import dag


class RoutingPolicy(enum.Enum):
    UNICAST = "unicast"
    ISOLATED = "isolated"
    PARTITIONED = "partitioned"
    BROADCAST = "broadcast"
    ALL_TO_ONE = "all-to-one"


KeyFn = Callable[[Any], Hashable]


def _vertex_name(vertex: dag.Vertex | str) -> str:
    return vertex if isinstance(vertex, str) else vertex.name


class Edge:
    """A connection between two vertices; build with :meth:`between` or :meth:`from_vertex`.

    >>> from jetlet.core.dag import DAG
    >>> d = DAG()
    >>> a = d.new_vertex("a", lambda: None)
    >>> b = d.new_vertex("b", lambda: None)
    >>> Edge.between(a, b).partitioned(len).distributed()
    Edge(a:0 -> b:0, partitioned-distributed)
    """

    def __init__(self, source: str, source_ordinal: int) -> None:
        self.source_name = source
        self.source_ordinal = source_ordinal
        self.dest_name: str | None = None
        self.dest_ordinal = 0
        self.routing_policy = RoutingPolicy.UNICAST
        self.key_fn: KeyFn | None = None
        self.partitioner: partitioning.Partitioner = partitioning.DEFAULT_PARTITIONER
        self.splitter: partitioning.Splitter | None = None
        self.is_distributed = False
        self.priority_value = 0
        self.config: config.EdgeConfig | None = None
        self.carries_batches = False
        """Whether the items are record batches: the queues then hold ``batch_queue_size`` rows."""

    @staticmethod
    def between(source: dag.Vertex | str, dest: dag.Vertex | str) -> Edge:
        """An edge from ``source``'s output 0 to ``dest``'s input 0."""
        return Edge.from_vertex(source, 0).to(dest, 0)

    @staticmethod
    def from_vertex(source: dag.Vertex | str, ordinal: int = 0) -> Edge:
        """Start an edge at output ``ordinal`` of ``source``; finish it with :meth:`to`."""
        _check_ordinal(ordinal, "source ordinal")
        return Edge(_vertex_name(source), ordinal)

    def to(self, dest: dag.Vertex | str, ordinal: int = 0) -> Edge:
        """End this edge at input ``ordinal`` of ``dest``."""
        _check_ordinal(ordinal, "destination ordinal")
        self.dest_name = _vertex_name(dest)
        self.dest_ordinal = ordinal
        return self

    def unicast(self) -> Edge:
        """Each item to one consumer, round-robin among those with room (the default)."""
        return self._route(RoutingPolicy.UNICAST)

    def isolated(self) -> Edge:
        """Producer ``i`` always sends to consumer ``i mod n``: no mixing between lanes."""
        return self._route(RoutingPolicy.ISOLATED)

    def partitioned(self, key_fn: KeyFn, partitioner: partitioning.Partitioner | None = None) -> Edge:
        """Each item to the consumer that owns ``partitioner(key_fn(item))``.

        The default partitioner is stable across processes (see
        :mod:`jetlet.core.partitioning`), so a key meets the same processor on
        every member and after every restart.
        """
        if not callable(key_fn):
            raise TypeError(f"Edge {self}: partitioned() needs a callable key_fn, got {key_fn!r}")
        self._route(RoutingPolicy.PARTITIONED)
        self.key_fn = key_fn
        if partitioner is not None:
            self.partitioner = partitioner
        return self

    def partitioned_split(self, splitter: partitioning.Splitter) -> Edge:
        """Each item split by ``splitter`` into one part per consumer that owns some of its keys.

        For items that hold the rows of many keys, such as record batches
        (:class:`jetlet.batches.partitioning.KeyColumnSplitter`); the partitions are those of
        :meth:`partitioned` with the default partitioner, so a key meets the same consumer.
        """
        if not callable(getattr(splitter, "bind", None)):
            raise TypeError(f"Edge {self}: partitioned_split() needs a Splitter, got {splitter!r}")
        self._route(RoutingPolicy.PARTITIONED)
        self.splitter = splitter
        return self

    def broadcast(self) -> Edge:
        """Every item to every consumer."""
        return self._route(RoutingPolicy.BROADCAST)

    def all_to_one(self) -> Edge:
        """Every item to one single consumer in the whole cluster."""
        return self._route(RoutingPolicy.ALL_TO_ONE)

    def distributed(self) -> Edge:
        """Let items cross to consumers on other members (local-only by default)."""
        self.is_distributed = True
        return self

    def local(self) -> Edge:
        """Keep items on the member that produced them (the default)."""
        self.is_distributed = False
        return self

    def batches(self) -> Edge:
        """Mark the edge as carrying record batches (its queues hold ``EdgeConfig.batch_queue_size`` rows)."""
        self.carries_batches = True
        return self

    def priority(self, value: int) -> Edge:
        """Lower numbers are read first; inputs of equal priority are read together."""
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"Edge {self}: priority must be an int, got {value!r}")
        self.priority_value = value
        return self

    def set_config(self, edge_config: config.EdgeConfig) -> Edge:
        """Tune this edge's queues; the instance's default applies otherwise."""
        if not isinstance(edge_config, config.EdgeConfig):
            raise TypeError(f"Edge {self}: set_config() needs an EdgeConfig, got {edge_config!r}")
        self.config = edge_config
        return self

    def _route(self, policy: RoutingPolicy) -> Edge:
        self.routing_policy = policy
        self.key_fn = None
        self.splitter = None
        return self

    def describe(self) -> str:
        """The routing as Jet prints it, e.g. ``partitioned-distributed``."""
        text = self.routing_policy.value
        return f"{text}-distributed" if self.is_distributed else text

    def __repr__(self) -> str:
        return (
            f"Edge({self.source_name}:{self.source_ordinal} -> {self.dest_name}:{self.dest_ordinal}, "
            f"{self.describe()})"
        )


def _check_ordinal(ordinal: object, what: str) -> None:
    if not isinstance(ordinal, int) or isinstance(ordinal, bool) or ordinal < 0:
        raise ValueError(f"{what} must be an int >= 0, got {ordinal!r}")
