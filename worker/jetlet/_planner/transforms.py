"""Transforms: the nodes of a pipeline graph, each able to add itself to a DAG.

A stage of the Pipeline API wraps one transform. A transform knows its
upstream transforms (its inputs, in ordinal order), its name, its local
parallelism, and whether its output is rebalanced; ``add_to_dag`` adds its
vertex or vertices and connects them through the planner.

Stream stages with timestamps carry *events*: ``(timestamp, item)`` tuples,
the Python counterpart of Jet's ``JetEvent``. Stateless steps are compiled
for that shape (``timestamped=True``) so user functions still see the bare
item, and the timestamp rides along.
"""

from __future__ import annotations

import abc
import itertools
import logging
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from jetlet.aggregate import operation as agg
from jetlet.core import processor as proc
from jetlet.core import processors
from jetlet.core.processors import chain

if TYPE_CHECKING:
    from jetlet._planner import planner as planner_mod

KeyFn = Callable[[Any], Hashable]
_sequence = itertools.count()


class Transform(abc.ABC):
    """One node of the pipeline graph."""

    def __init__(self, name: str, upstream: Sequence[Transform] = ()) -> None:
        self.name = name
        self.upstream = list(upstream)
        self.local_parallelism = -1
        self.rebalance = False
        self.rebalance_key: KeyFn | None = None
        self.sequence = next(_sequence)

    @abc.abstractmethod
    def add_to_dag(self, planner: planner_mod.Planner) -> None:
        """Add this transform's vertices and their input edges to ``planner.dag``."""

    def __lt__(self, other: Transform) -> bool:
        return self.sequence < other.sequence

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class SourceTransform(Transform):
    """Reads from a source: one vertex, no inputs."""

    def __init__(self, name: str, supplier: proc.ProcessorMetaSupplier) -> None:
        super().__init__(name)
        self.supplier = supplier

    def add_to_dag(self, planner: planner_mod.Planner) -> None:
        planner.add_vertex(self, self.name, self.local_parallelism, self.supplier)


class SinkTransform(Transform):
    """Writes to a sink: one vertex fed by every upstream stage."""

    def __init__(
        self, name: str, upstream: Sequence[Transform], supplier: proc.ProcessorMetaSupplier
    ) -> None:
        super().__init__(name, upstream)
        self.supplier = supplier

    def add_to_dag(self, planner: planner_mod.Planner) -> None:
        vertex = planner.add_vertex(self, self.name, self.local_parallelism, self.supplier)
        planner.add_edges(self, vertex)


# -- stateless -----------------------------------------------------------------


def _map_step(fn: Callable[[Any], Any], timestamped: bool) -> chain.BatchStep:
    if timestamped:
        return lambda batch: [(ts, r) for ts, item in batch if (r := fn(item)) is not None]
    return lambda batch: [r for item in batch if (r := fn(item)) is not None]


def _filter_step(fn: Callable[[Any], bool], timestamped: bool) -> chain.BatchStep:
    if timestamped:
        return lambda batch: [event for event in batch if fn(event[1])]
    return lambda batch: [item for item in batch if fn(item)]


def _flat_map_step(fn: Callable[[Any], Iterable[Any] | None], timestamped: bool) -> chain.BatchStep:
    if timestamped:
        return lambda batch: [(ts, r) for ts, item in batch for r in (fn(item) or ())]
    return lambda batch: [r for item in batch for r in (fn(item) or ())]


def _peek_step(
    predicate: Callable[[Any], bool], to_string: Callable[[Any], str], name: str, timestamped: bool
) -> chain.BatchStep:
    log = logging.getLogger(f"jetlet.peek.{name}")

    def step(batch: list[Any]) -> list[Any]:
        for element in batch:
            item = element[1] if timestamped else element
            if predicate(item):
                log.info("%s", to_string(item))
        return batch

    return step


class StatelessTransform(Transform):
    """map, filter, flat_map or peek: one batch step, fusible with its neighbours."""

    KINDS = ("map", "filter", "flat-map", "peek")

    def __init__(
        self, kind: str, upstream: Transform, step: chain.BatchStep, name: str | None = None
    ) -> None:
        if kind not in self.KINDS:
            raise ValueError(f"unknown stateless transform kind {kind!r}")
        super().__init__(name or kind, [upstream])
        self.kind = kind
        self.step = step

    @staticmethod
    def map(upstream: Transform, fn: Callable[[Any], Any], timestamped: bool) -> StatelessTransform:
        return StatelessTransform("map", upstream, _map_step(fn, timestamped))

    @staticmethod
    def filter(upstream: Transform, fn: Callable[[Any], bool], timestamped: bool) -> StatelessTransform:
        return StatelessTransform("filter", upstream, _filter_step(fn, timestamped))

    @staticmethod
    def flat_map(
        upstream: Transform, fn: Callable[[Any], Iterable[Any] | None], timestamped: bool
    ) -> StatelessTransform:
        return StatelessTransform("flat-map", upstream, _flat_map_step(fn, timestamped))

    @staticmethod
    def peek(
        upstream: Transform,
        predicate: Callable[[Any], bool],
        to_string: Callable[[Any], str],
        timestamped: bool,
    ) -> StatelessTransform:
        transform = StatelessTransform("peek", upstream, lambda batch: batch)
        transform.step = _peek_step(predicate, to_string, f"{transform.sequence}", timestamped)
        return transform

    def add_to_dag(self, planner: planner_mod.Planner) -> None:
        vertex = planner.add_vertex(
            self, self.name, planner.inherited_parallelism(self), chain.chain_p(self.step)
        )
        planner.add_edges(self, vertex)


class FusedTransform(Transform):
    """A chain of stateless transforms run as one vertex: ``fused(map, filter)``."""

    def __init__(self, parts: Sequence[StatelessTransform]) -> None:
        names = [part.name for part in parts]
        super().__init__(f"fused({', '.join(names)})")
        self.parts = list(parts)
        self.local_parallelism = parts[0].local_parallelism
        self.rebalance = parts[-1].rebalance
        self.rebalance_key = parts[-1].rebalance_key

    def add_to_dag(self, planner: planner_mod.Planner) -> None:
        step = chain.compose([part.step for part in self.parts])
        vertex = planner.add_vertex(self, self.name, planner.inherited_parallelism(self), chain.chain_p(step))
        planner.add_edges(self, vertex)


class MergeTransform(Transform):
    """The union of several stages: items pass through unchanged."""

    def __init__(self, upstream: Sequence[Transform]) -> None:
        super().__init__("merge", upstream)

    def add_to_dag(self, planner: planner_mod.Planner) -> None:
        vertex = planner.add_vertex(self, self.name, self.local_parallelism, chain.chain_p(_identity_step))
        planner.add_edges(self, vertex)


def _identity_step(batch: list[Any]) -> list[Any]:
    return batch


class CustomTransform(Transform):
    """A user's own processor as a stage (``custom_transform``)."""

    def __init__(self, name: str, upstream: Sequence[Transform], supplier: object) -> None:
        super().__init__(name, upstream)
        self.supplier = supplier

    def add_to_dag(self, planner: planner_mod.Planner) -> None:
        vertex = planner.add_vertex(self, self.name, self.local_parallelism, self.supplier)
        planner.add_edges(self, vertex)


# -- aggregation ---------------------------------------------------------------


def _entry_key(entry: tuple[Any, Any]) -> Any:
    return entry[0]


class AggregateTransform(Transform):
    """Ungrouped aggregation in two stages: accumulate locally, combine on one processor."""

    def __init__(self, upstream: Sequence[Transform], op: agg.AggregateOperation[Any, Any]) -> None:
        super().__init__("aggregate", upstream)
        self.op = op

    def add_to_dag(self, planner: planner_mod.Planner) -> None:
        if self.op.combine_fn is None:
            vertex = planner.add_vertex(
                self,
                self.name,
                1,
                proc.ProcessorMetaSupplier.force_total_parallelism_one(processors.aggregate_p(self.op)),
            )
            planner.add_edges(self, vertex, lambda edge, _: edge.all_to_one().distributed())
            return
        prepare = planner.add_vertex(
            self, f"{self.name}-prepare", self.local_parallelism, processors.accumulate_p(self.op)
        )
        planner.add_edges(self, prepare)
        combine = planner.add_vertex(
            self,
            self.name,
            1,
            proc.ProcessorMetaSupplier.force_total_parallelism_one(processors.combine_p(self.op)),
        )
        planner.dag.edge(planner.edge_from_vertex(prepare, combine).all_to_one().distributed())


class GroupAggregateTransform(Transform):
    """Grouped (co-)aggregation in two stages; emits ``map_to_output(key, result)``."""

    def __init__(
        self,
        upstream: Sequence[Transform],
        key_fns: Sequence[KeyFn],
        op: agg.AggregateOperation[Any, Any],
        map_to_output: Callable[[Any, Any], Any],
        name: str = "group-and-aggregate",
    ) -> None:
        super().__init__(name, upstream)
        if len(key_fns) != len(self.upstream):
            raise ValueError(f"{name}: {len(key_fns)} key functions for {len(self.upstream)} inputs")
        self.key_fns = list(key_fns)
        self.op = op
        self.map_to_output = map_to_output

    def add_to_dag(self, planner: planner_mod.Planner) -> None:
        keys = self.key_fns

        def partition_by_key(edge: Any, ordinal: int) -> None:
            edge.partitioned(keys[ordinal])

        if self.op.combine_fn is None:
            vertex = planner.add_vertex(
                self,
                self.name,
                self.local_parallelism,
                processors.aggregate_by_key_p(keys, self.op, self.map_to_output),
            )
            planner.add_edges(
                self, vertex, lambda edge, ordinal: partition_by_key(edge.distributed(), ordinal)
            )
            return
        prepare = planner.add_vertex(
            self,
            f"{self.name}-prepare",
            self.local_parallelism,
            processors.accumulate_by_key_p(keys, self.op),
        )
        planner.add_edges(self, prepare, partition_by_key)
        combine = planner.add_vertex(
            self,
            self.name,
            self.local_parallelism,
            processors.combine_by_key_p(self.op, self.map_to_output),
        )
        planner.dag.edge(planner.edge_from_vertex(prepare, combine).partitioned(_entry_key).distributed())
