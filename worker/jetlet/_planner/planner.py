"""The planner: a pipeline's transforms become a Core DAG (Jet's ``Planner``).

Planning runs small named passes over the pipeline graph, then lets every
transform add itself to the DAG:

1. ``check``: every stage leads to a sink, nothing dangles, every user
   function can be pickled (plan-time errors name the stage and function);
2. ``watermark stride``: inserted watermarks are throttled to the gcd of the
   sliding windows' slides and of the strides that custom stages ask for (above
   1000, its largest divisor up to 1000; Jet caps it at 1000);
3. ``fuse``: chains of stateless transforms (map, filter, flat_map, peek)
   where each link has one consumer and one producer, the same parallelism
   and no rebalance between them, become one ``fused(...)`` transform that
   runs the whole chain over each batch;
4. ``event time into sources``: a timestamp stage that is its source's only
   consumer is planned into the source when the source can take an
   event-time policy (:mod:`jetlet._planner.source_event_time`), as Jet does:
   no ``add-timestamps`` vertex then;
5. ``stateless stages into sources``: a stateless stage (or fused chain) that
   is the only consumer of such a source runs inside the source's processors
   (:mod:`jetlet._planner.source_chain`), as Flink chains operators: no queue
   hop between them;
6. ``add_to_dag``: in topological order, each transform adds its vertices
   (one, or two for two-stage aggregation) and the edges from its upstream
   transforms' vertices, via :meth:`Planner.add_edges`.

With ``preserve_order`` the planner connects stateless transforms with
isolated edges and gives them their upstream vertex's parallelism, so each
lane keeps the source's order (Jet's behaviour); keyed stages and
``rebalance`` are still free to change the parallelism.
"""

from __future__ import annotations

import functools
import heapq
import math
from collections.abc import Callable, Mapping
from typing import Any

from jetlet import _pickling
from jetlet._planner import fusion, source_chain, source_event_time
from jetlet._planner import transforms as tf
from jetlet.core import dag as dag_mod
from jetlet.core import edge as edge_mod

_ROUTED = frozenset(
    {edge_mod.RoutingPolicy.PARTITIONED, edge_mod.RoutingPolicy.ALL_TO_ONE, edge_mod.RoutingPolicy.BROADCAST}
)
"""Routings a transform sets for an input because it needs them (see :meth:`Planner.add_edges`)."""


class PlanningError(ValueError):
    """The pipeline cannot be planned; the message names the stage."""


class Planner:
    """Builds one DAG from one pipeline graph."""

    def __init__(self, graph: dict[tf.Transform, list[tf.Transform]], preserve_order: bool = False) -> None:
        self.graph = graph
        self.upstream: dict[tf.Transform, list[tf.Transform]] = {t: list(t.upstream) for t in graph}
        """Each transform's inputs as planned (fusion rewires these, never the transforms)."""
        self.preserve_order = preserve_order
        self.dag = dag_mod.DAG()
        self.vertex_of: dict[tf.Transform, dag_mod.Vertex] = {}
        self._next_output: dict[str, int] = {}
        self.watermark_stride = MAXIMUM_WATERMARK_GAP
        """The throttling frame of inserted watermarks (see :func:`watermark_stride`)."""
        self._names: set[str] = set()

    def create_dag(self) -> dag_mod.DAG:
        self._check()
        self.watermark_stride = watermark_stride(self.graph)
        self.graph, self.upstream = fusion.fuse(self.graph, self.upstream)
        self.graph, self.upstream = source_event_time.into_sources(
            self.graph, self.upstream, self.watermark_stride
        )
        self.graph, self.upstream = source_chain.into_sources(self.graph, self.upstream)
        for transform in topological_order(self.graph, self.upstream):
            transform.add_to_dag(self)
        return self.dag

    def _check(self) -> None:
        for transform, downstream in self.graph.items():
            if not downstream and not isinstance(transform, tf.SinkTransform):
                raise PlanningError(
                    f"stage {transform.name!r} leads to no sink: add .write_to(sink) after it, or remove it"
                )
            for fn in transform.user_fns:
                _check_picklable(transform, fn)

    def unique_name(self, name: str) -> str:
        """``name``, or ``name-2``, ``name-3``... if a vertex already has it."""
        candidate = name
        index = 2
        while candidate in self._names:
            candidate = f"{name}-{index}"
            index += 1
        self._names.add(candidate)
        return candidate

    def add_vertex(
        self, transform: tf.Transform, name: str, local_parallelism: int, supplier: object
    ) -> dag_mod.Vertex:
        """Add a vertex for ``transform`` (the last one added is the one downstream edges leave)."""
        vertex = self.dag.new_vertex(self.unique_name(name), supplier, local_parallelism)
        self.vertex_of[transform] = vertex
        return vertex

    def add_edges(
        self,
        transform: tf.Transform,
        to_vertex: dag_mod.Vertex,
        configure: Callable[[edge_mod.Edge, int], object] | None = None,
    ) -> None:
        """Connect every upstream transform's vertex to ``to_vertex``, input ordinal = upstream index.

        ``configure(edge, ordinal)`` sets the routing the transform needs. A
        transform that routes an input by key, to one processor or to every
        processor keeps that routing: an upstream's ``rebalance`` does not
        change it (a keyed state must see every item of its key), and an
        upstream's ``broadcast()`` there is a planning error. Any other input
        takes the upstream's rebalance or broadcast, else isolated under
        ``preserve_order``, else local unicast. An edge that carries record
        batches (its upstream makes them, or its transform takes them, or passes
        them on unchanged to one that does: a timestamp stage) is marked so, for
        its queues' capacity in rows.
        """
        for ordinal, upstream in enumerate(self.upstream[transform]):
            edge = self.edge_from(upstream, to_vertex, ordinal)
            if configure is not None:
                configure(edge, ordinal)
            routed = edge.routing_policy in _ROUTED
            if upstream.broadcast and routed and edge.routing_policy is not edge_mod.RoutingPolicy.BROADCAST:
                raise PlanningError(
                    f"stage {upstream.name!r} is broadcast into stage {transform.name!r}, which routes "
                    f"its input {edge.routing_policy.value}: broadcast() feeds only stages that take "
                    "their input from anywhere (map, filter, a custom transform...)"
                )
            if upstream.forward and routed:
                raise PlanningError(
                    f"stage {upstream.name!r} is forwarded into stage {transform.name!r}, which routes "
                    f"its input {edge.routing_policy.value}: forward() feeds only stages that take "
                    "their input from anywhere (map, filter, a custom transform...)"
                )
            if upstream.rebalance and not routed:
                if upstream.broadcast:
                    edge.broadcast().distributed()
                elif upstream.forward:
                    edge.isolated()
                    self._take_parallelism(upstream, transform, to_vertex)
                elif upstream.rebalance_key is None:
                    edge.unicast().distributed()
                else:
                    edge.partitioned(upstream.rebalance_key).distributed()
            elif configure is None and self.preserve_order:
                edge.isolated()
            if upstream.makes_batches or self._feeds_batches(transform):
                edge.batches()
            self.dag.edge(edge)

    def _take_parallelism(
        self, upstream: tf.Transform, transform: tf.Transform, vertex: dag_mod.Vertex
    ) -> None:
        """A ``forward()``-ed input gives ``vertex`` its parallelism (processor ``i`` feeds processor
        ``i``); a stage whose parallelism may differ (asked for, or its supplier's preference against
        the default) cannot be planned."""
        wanted = self._parallelism_of(self.vertex_of[upstream])
        own = self._parallelism_of(vertex)
        if own not in (-1, wanted):
            upstream_says = "the default" if wanted == -1 else str(wanted)
            raise PlanningError(
                f"stage {upstream.name!r} is forwarded into stage {transform.name!r}, whose local "
                f"parallelism is {own}: forward() needs the forwarded stage's, {upstream_says} (set "
                "the same local parallelism on both)"
            )
        vertex.set_local_parallelism(wanted)

    def _feeds_batches(self, transform: tf.Transform) -> bool:
        """Whether ``transform`` takes record batches, or passes its items unchanged to one that does."""
        if transform.takes_batches:
            return True
        if isinstance(transform, tf.TimestampTransform):
            return any(self._feeds_batches(after) for after in self.graph.get(transform, ()))
        return False

    def edge_from(
        self, upstream: tf.Transform, to_vertex: dag_mod.Vertex, dest_ordinal: int
    ) -> edge_mod.Edge:
        """A new edge from ``upstream``'s vertex's next free output to ``to_vertex``."""
        edge = self.edge_from_vertex(self.vertex_of[upstream], to_vertex)
        return edge.to(to_vertex, dest_ordinal)

    def edge_from_vertex(self, from_vertex: dag_mod.Vertex, to_vertex: dag_mod.Vertex) -> edge_mod.Edge:
        """A new edge between two vertices this transform added itself (e.g. prepare -> combine)."""
        source_ordinal = self._next_output.get(from_vertex.name, 0)
        self._next_output[from_vertex.name] = source_ordinal + 1
        return edge_mod.Edge.from_vertex(from_vertex, source_ordinal).to(to_vertex, 0)

    def inherited_parallelism(self, transform: tf.Transform) -> int:
        """Under ``preserve_order``, the parallelism a stateless transform must take from upstream."""
        inputs = self.upstream[transform]
        if not self.preserve_order or not inputs or transform.local_parallelism != -1:
            return transform.local_parallelism
        return self._parallelism_of(self.vertex_of[inputs[0]])

    @staticmethod
    def _parallelism_of(vertex: dag_mod.Vertex) -> int:
        """The parallelism ``vertex`` asks for: its own, else its supplier's preference (-1: the default)."""
        if vertex.local_parallelism != -1:
            return vertex.local_parallelism
        return vertex.meta_supplier.preferred_local_parallelism()


def topological_order(
    graph: dict[tf.Transform, list[tf.Transform]], upstream: dict[tf.Transform, list[tf.Transform]]
) -> list[tf.Transform]:
    """Transforms with every upstream before its downstream; ties in creation order."""
    in_degree = {t: len(upstream[t]) for t in graph}
    ready = [(t.sequence, t) for t, degree in in_degree.items() if degree == 0]
    heapq.heapify(ready)
    order: list[tf.Transform] = []
    while ready:
        _, transform = heapq.heappop(ready)
        order.append(transform)
        for downstream in graph[transform]:
            in_degree[downstream] -= 1
            if in_degree[downstream] == 0:
                heapq.heappush(ready, (downstream.sequence, downstream))
    if len(order) != len(graph):
        raise PlanningError("the pipeline has a cycle")
    return order


def plan(graph: dict[tf.Transform, list[tf.Transform]], preserve_order: bool = False) -> dag_mod.DAG:
    """Plan a pipeline graph into a DAG."""
    return Planner(dict(graph), preserve_order).create_dag()


MAXIMUM_WATERMARK_GAP = 1000
"""Jet's cap (in timestamp units) on how far apart emitted watermarks may be."""


def watermark_stride(graph: Mapping[tf.Transform, object]) -> int:
    """How coarse watermarks may be: the gcd of the sliding windows' slides and of the custom stages'
    ``watermark_stride``; above 1000, its largest divisor that is at most 1000.

    Watermarks are throttled to this stride, since a window can only close on
    a slide boundary: finer watermarks would cost work and change nothing. Jet
    caps the gcd at 1000 instead, so a slide of 1.5 s (throttled to 1 s) holds
    every other window until the next whole second; a divisor keeps every
    slide boundary a watermark.

    >>> [_at_most_a_second(g) for g in (10, 1000, 1500, 2000, 1009)]
    [10, 1000, 750, 1000, 1]
    """
    slides: list[int] = [
        window.slide
        for t in graph
        if (window := getattr(t, "window", None)) is not None and window.kind == "sliding"
    ]
    slides += [t.watermark_stride for t in graph if isinstance(t, tf.CustomTransform) and t.watermark_stride]
    if not slides:
        return MAXIMUM_WATERMARK_GAP
    return _at_most_a_second(functools.reduce(math.gcd, slides))


def _at_most_a_second(stride: int) -> int:
    """``stride``, or its largest divisor that is at most :data:`MAXIMUM_WATERMARK_GAP`."""
    return next(d for d in range(min(stride, MAXIMUM_WATERMARK_GAP), 0, -1) if stride % d == 0)


def _check_picklable(transform: tf.Transform, fn: Callable[..., Any]) -> None:
    """Functions travel to member processes as cloudpickle; find the ones that cannot, at plan time."""
    try:
        _pickling.cloudpickle_dumps(fn)
    except Exception as exc:  # cloudpickle raises whatever the captured object's pickling raises
        name = getattr(fn, "__qualname__", repr(fn))
        raise PlanningError(
            f"stage {transform.name!r}: function {name!r} cannot be pickled ({type(exc).__name__}: {exc}). "
            "Jobs ship their functions to member processes; create locks, files, sockets and clients "
            "inside the function or in a ServiceFactory instead of capturing them"
        ) from exc
