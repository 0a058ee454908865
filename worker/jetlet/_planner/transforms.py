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
import dataclasses
import itertools
import logging
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from jetlet import datamodel
from jetlet import service as service_mod
from jetlet.aggregate import operation as agg
from jetlet.core import event_time, partitioning, processors
from jetlet.core import processor as proc
from jetlet.core.processors import chain, hash_join, session, sort, stateful, watermarks, windows
from jetlet.core.processors import service as service_processors

if TYPE_CHECKING:
    from jetlet._planner import planner as planner_mod
    from jetlet.pipeline import sources as sources_mod
    from jetlet.pipeline import window as window_mod

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
        self.forward = False
        """Processor ``i``'s output goes to processor ``i`` of the next stage, which takes this stage's
        parallelism (``forward()``; sets ``rebalance`` too)."""
        self.broadcast = False
        """Its output goes to every processor of the next stage (``broadcast()``; sets ``rebalance`` too)."""
        self.sequence = next(_sequence)
        self.user_fns: list[Callable[..., Any]] = []
        """The user's functions in this transform, checked for picklability at plan time."""
        self.takes_batches = False
        """Its input items are record batches (``map_batches``...): its input edges carry batches."""
        self.makes_batches = False
        """Its output items are record batches: its output edges carry batches."""

    @abc.abstractmethod
    def add_to_dag(self, planner: planner_mod.Planner) -> None:
        """Add this transform's vertices and their input edges to ``planner.dag``."""

    def __lt__(self, other: Transform) -> bool:
        return self.sequence < other.sequence

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class SourceTransform(Transform):
    """Reads from a source: one vertex, no inputs."""

    def __init__(
        self,
        name: str,
        supplier: proc.ProcessorMetaSupplier,
        event_time_supplier: sources_mod.EventTimeSupplier | None = None,
    ) -> None:
        super().__init__(name)
        self.supplier = supplier
        self.event_time_supplier = event_time_supplier
        """The source with an event-time policy planned into it, if it can take one (see
        :mod:`jetlet._planner.source_event_time`)."""
        self.step_supplier: Callable[[chain.BatchStep], proc.ProcessorMetaSupplier] | None = None
        """This source (its event-time policy planned in) with stateless steps planned in after it,
        if it can take them (see :mod:`jetlet._planner.source_chain`)."""

    def planned_with(self, consumer: Transform, supplier: proc.ProcessorMetaSupplier) -> SourceTransform:
        """This source and its only ``consumer`` as one source of ``supplier`` (the processors with the
        consumer planned into them): it keeps this source's name and place in the planning order,
        and takes the consumer's output (its rebalance, whether it makes record batches)."""
        merged = SourceTransform(self.name, supplier)
        merged.sequence = self.sequence  # vertex names follow the planning order
        merged.local_parallelism = self.local_parallelism
        merged.rebalance, merged.rebalance_key = consumer.rebalance, consumer.rebalance_key
        merged.forward = consumer.forward
        merged.broadcast = consumer.broadcast
        merged.makes_batches = consumer.makes_batches
        return merged

    def add_to_dag(self, planner: planner_mod.Planner) -> None:
        planner.add_vertex(self, self.name, self.local_parallelism, self.supplier)


class SinkTransform(Transform):
    """Writes to a sink: one vertex fed by every upstream stage."""

    def __init__(
        self,
        name: str,
        upstream: Sequence[Transform],
        supplier: proc.ProcessorMetaSupplier,
        single_processor: bool = False,
    ) -> None:
        super().__init__(name, upstream)
        self.supplier = supplier
        self.single_processor = single_processor
        """The sink runs once in the cluster (on the first member): every item goes there."""

    def add_to_dag(self, planner: planner_mod.Planner) -> None:
        vertex = planner.add_vertex(self, self.name, self.local_parallelism, self.supplier)
        if self.single_processor:
            planner.add_edges(self, vertex, lambda edge, _: edge.all_to_one().distributed())
        else:
            planner.add_edges(self, vertex)


# -- stateless -----------------------------------------------------------------


def map_step(fn: Callable[[Any], Any], timestamped: bool) -> chain.BatchStep:
    if timestamped:
        return lambda batch: [(ts, r) for ts, item in batch if (r := fn(item)) is not None]
    return lambda batch: [r for item in batch if (r := fn(item)) is not None]


def filter_step(fn: Callable[[Any], bool], timestamped: bool) -> chain.BatchStep:
    if timestamped:
        return lambda batch: [event for event in batch if fn(event[1])]
    return lambda batch: [item for item in batch if fn(item)]


def flat_map_step(fn: Callable[[Any], Iterable[Any] | None], timestamped: bool) -> chain.BatchStep:
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
        return StatelessTransform("map", upstream, map_step(fn, timestamped))

    @staticmethod
    def filter(upstream: Transform, fn: Callable[[Any], bool], timestamped: bool) -> StatelessTransform:
        return StatelessTransform("filter", upstream, filter_step(fn, timestamped))

    @staticmethod
    def flat_map(
        upstream: Transform, fn: Callable[[Any], Iterable[Any] | None], timestamped: bool
    ) -> StatelessTransform:
        return StatelessTransform("flat-map", upstream, flat_map_step(fn, timestamped))

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
        self.forward = parts[-1].forward
        self.broadcast = parts[-1].broadcast
        self.takes_batches = parts[0].takes_batches
        self.makes_batches = parts[-1].makes_batches

    @property
    def step(self) -> chain.BatchStep:
        """The parts' steps as one batch step."""
        return chain.compose([part.step for part in self.parts])

    def add_to_dag(self, planner: planner_mod.Planner) -> None:
        vertex = planner.add_vertex(
            self, self.name, planner.inherited_parallelism(self), chain.chain_p(self.step)
        )
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

    def __init__(
        self, name: str, upstream: Sequence[Transform], supplier: object, watermark_stride: int | None = None
    ) -> None:
        super().__init__(name, upstream)
        self.supplier = supplier
        self.watermark_stride = watermark_stride
        """How fine the processor needs watermarks (``custom_transform``'s; None: it does not say)."""

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

        upstream = planner.upstream[self]
        already_partitioned = all(
            u.rebalance and u.rebalance_key is key for u, key in zip(upstream, keys, strict=True)
        )
        # Single stage when it cannot be split (no combine) or need not be: an input already
        # rebalanced by this very key arrives at the key's owner, on its partitioned edge, and an
        # operation that collects its items would send them all on from a first stage anyway.
        if self.op.combine_fn is None or already_partitioned or self.op.collects_items:
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


# -- stateful and services -------------------------------------------------------


class StatefulTransform(Transform):
    """map/filter/flat-map with state: per key on a partitioned distributed edge, or one global state."""

    def __init__(
        self,
        kind: str,
        upstream: Transform,
        key_fn: KeyFn | None,
        create_fn: Callable[[], Any],
        fn: Callable[..., Any],
        timestamped: bool,
        ttl: int = 0,
        on_evict_fn: Callable[[Any, Any, int], Any] | None = None,
        copy_fn: Callable[[Any], Any] | None = None,
    ) -> None:
        suffix = "keyed" if key_fn is not None else "global"
        super().__init__(f"{kind}-stateful-{suffix}", [upstream])
        self.kind = kind
        self.key_fn = key_fn
        self.create_fn = create_fn
        self.fn = fn
        self.timestamped = timestamped
        self.ttl = ttl
        self.on_evict_fn = on_evict_fn
        self.copy_fn = copy_fn

    def add_to_dag(self, planner: planner_mod.Planner) -> None:
        factory = stateful.stateful_p(
            self.kind,
            self.key_fn,
            self.create_fn,
            self.fn,
            self.timestamped,
            self.ttl,
            self.on_evict_fn,
            self.copy_fn,
        )
        key_fn = self.key_fn
        if key_fn is None:
            vertex = planner.add_vertex(
                self, self.name, 1, proc.ProcessorMetaSupplier.force_total_parallelism_one(factory)
            )
            planner.add_edges(self, vertex, lambda edge, _: edge.all_to_one().distributed())
            return
        vertex = planner.add_vertex(self, self.name, self.local_parallelism, factory)
        route = _event_key(key_fn) if self.timestamped else key_fn
        planner.add_edges(self, vertex, lambda edge, _: edge.partitioned(route).distributed())


def _event_key(key_fn: KeyFn) -> KeyFn:
    return partitioning.EventKey(key_fn)


class ServiceTransform(Transform):
    """``*_using_service``: a batch step built around a service (optionally keyed)."""

    def __init__(
        self,
        kind: str,
        upstream: Transform,
        factory: service_mod.ServiceFactory[Any, Any],
        make_step: Callable[[Any], chain.BatchStep],
        key_fn: KeyFn | None = None,
        timestamped: bool = False,
    ) -> None:
        super().__init__(f"{kind}-using-service", [upstream])
        self.factory = factory
        self.make_step = make_step
        self.key_fn = key_fn
        self.timestamped = timestamped

    def add_to_dag(self, planner: planner_mod.Planner) -> None:
        vertex = planner.add_vertex(
            self,
            self.name,
            self.local_parallelism,
            service_processors.using_service_p(self.factory, self.make_step),
        )
        key_fn = self.key_fn
        if key_fn is None:
            planner.add_edges(self, vertex)
        else:
            route = _event_key(key_fn) if self.timestamped else key_fn
            planner.add_edges(self, vertex, lambda edge, _: edge.partitioned(route))


class AsyncServiceTransform(Transform):
    """``map_using_service_async``: bounded in-flight calls returning futures or coroutines."""

    def __init__(
        self,
        upstream: Transform,
        factory: service_mod.ServiceFactory[Any, Any],
        fn: Callable[[Any, Any], Any],
        max_concurrent_ops: int,
        preserve_order: bool,
        timestamped: bool,
    ) -> None:
        super().__init__("map-using-service-async", [upstream])
        self.supplier = service_processors.map_using_service_async_p(
            factory, fn, max_concurrent_ops, preserve_order, timestamped
        )

    def add_to_dag(self, planner: planner_mod.Planner) -> None:
        vertex = planner.add_vertex(self, self.name, self.local_parallelism, self.supplier)
        planner.add_edges(self, vertex)


# -- event time and windows -------------------------------------------------------


def _event_time(event: tuple[int, Any]) -> int:
    return event[0]


def _on_items(op: agg.AggregateOperation[Any, Any]) -> agg.AggregateOperation[Any, Any]:
    """``op`` with every accumulate function applied to the item of a ``(ts, item)`` event."""

    def unwrap(fn: Callable[[Any, Any], Any] | None) -> Callable[[Any, Any], Any] | None:
        if fn is None:
            return None
        return lambda acc, event: fn(acc, event[1])

    return dataclasses.replace(op, accumulate_fns=tuple(unwrap(fn) for fn in op.accumulate_fns))


WRAP_AS_EVENT = event_time.wrap_as_event
"""The default wrap function: ``(timestamp, item)`` events."""


class TimestampTransform(Transform):
    """Gives a stream event time: wraps items as ``(ts, item)`` events and inserts watermarks."""

    def __init__(
        self,
        upstream: Transform,
        timestamp_fn: Callable[[Any], int],
        allowed_lag: int,
        wrap_fn: Callable[[Any, int], Any] | None = event_time.wrap_as_event,
    ) -> None:
        super().__init__("add-timestamps", [upstream])
        self.timestamp_fn = timestamp_fn
        self.allowed_lag = allowed_lag
        self.wrap_fn = wrap_fn
        """How an item and its timestamp become an event; None for items that already are events."""

    def policy(self, watermark_stride: int) -> event_time.EventTimePolicy:
        """The event-time policy of this stage, its watermarks throttled to ``watermark_stride``."""
        return event_time.EventTimePolicy(
            timestamp_fn=self.timestamp_fn,
            allowed_lag=self.allowed_lag,
            wrap_fn=self.wrap_fn,
            watermark_throttling_frame_size=watermark_stride,
        )

    def add_to_dag(self, planner: planner_mod.Planner) -> None:
        policy = self.policy(planner.watermark_stride)
        upstream = planner.vertex_of[planner.upstream[self][0]]
        parallelism = self.local_parallelism
        if parallelism == -1:
            parallelism = upstream.local_parallelism
        if parallelism == -1:
            parallelism = upstream.meta_supplier.preferred_local_parallelism()
        vertex = planner.add_vertex(self, self.name, parallelism, watermarks.insert_watermarks_p(policy))
        planner.add_edges(self, vertex, lambda edge, _: edge.isolated())


def _frame_key(entry: datamodel.TimestampedEntry[Any, Any]) -> Any:
    return entry.key


class WindowAggregateTransform(Transform):
    """Windowed (co-)aggregation of timestamped streams, per key or global.

    Sliding and tumbling windows run in two stages as in Jet: frames are
    accumulated next to the data (local partitioned edge), then combined into
    windows by key (distributed partitioned edge) and emitted when the
    watermark passes each window's end. Session windows run in one stage,
    partitioned by key; so do windows of an operation without a combine
    function (on one processor for a global window), and keyed windows of
    one that collects its items (``to_list``: a first stage would ship every
    item anyway, in per-frame lists pickled whole, and twice the partial
    accumulators when a key's items come from two members). Results are
    ``(window end, WindowResult)`` events, or ``KeyedWindowResult`` per key.
    """

    def __init__(
        self,
        upstream: Sequence[Transform],
        key_fns: Sequence[KeyFn] | None,
        window: window_mod.WindowDefinition,
        op: agg.AggregateOperation[Any, Any],
        name: str | None = None,
    ) -> None:
        default = f"{window.kind}-window" if key_fns is None else f"{window.kind}-window-by-key"
        super().__init__(name or default, upstream)
        self.keyed = key_fns is not None
        self.item_key_fns: list[KeyFn] = (
            list(key_fns) if key_fns is not None else [windows.GLOBAL_KEY] * len(self.upstream)
        )
        """Key functions of the items (the sliding-window processors take events and unwrap them)."""
        self.key_fns = [_event_key(fn) for fn in self.item_key_fns]
        """Key functions of the ``(timestamp, item)`` events (for routing and session windows)."""
        self.window = window
        self.item_op = op
        self.op = _on_items(op)

    def _output(self) -> Callable[[int, int, Any, Any, bool], tuple[int, Any]]:
        return windows.keyed_window_event if self.keyed else windows.window_event

    def _route(self, edge: Any, ordinal: int) -> None:
        if self.keyed:
            edge.partitioned(self.key_fns[ordinal]).distributed()
        else:
            edge.all_to_one().distributed()

    def _parallelism(self) -> tuple[int, Callable[[Any], Any]]:
        if self.keyed:
            return self.local_parallelism, lambda supplier: supplier
        return 1, proc.ProcessorMetaSupplier.force_total_parallelism_one

    def add_to_dag(self, planner: planner_mod.Planner) -> None:
        window = self.window
        timestamp_fns = [_event_time] * len(self.upstream)
        early = window.early_results_period_millis
        parallelism, wrap = self._parallelism()
        if window.kind == "session":
            vertex = planner.add_vertex(
                self,
                self.name,
                parallelism,
                wrap(
                    session.aggregate_to_session_window_p(
                        window.gap,
                        self.key_fns,
                        timestamp_fns,
                        self.op,
                        self._output(),
                        early_results_period_ms=early,
                    )
                ),
            )
            planner.add_edges(self, vertex, self._route)
            return
        policy = event_time.sliding_win_policy(window.size, window.slide)
        if self.item_op.combine_fn is None or (self.keyed and self.item_op.collects_items):
            vertex = planner.add_vertex(
                self,
                self.name,
                parallelism,
                wrap(
                    windows.aggregate_to_sliding_window_p(
                        self.item_key_fns,
                        timestamp_fns,
                        policy,
                        self.item_op,
                        self._output(),
                        early_results_period_ms=early,
                        events=True,
                    )
                ),
            )
            planner.add_edges(self, vertex, self._route)
            return
        prepare = planner.add_vertex(
            self,
            f"{self.name}-prepare",
            self.local_parallelism,
            windows.accumulate_by_frame_p(
                self.item_key_fns, timestamp_fns, policy, self.item_op, events=True
            ),
        )
        keys = self.key_fns
        if self.keyed:
            planner.add_edges(self, prepare, lambda edge, ordinal: edge.partitioned(keys[ordinal]))
        else:  # one global key: every prepare processor accumulates its share of the frames
            planner.add_edges(self, prepare)
        combine = planner.add_vertex(
            self,
            self.name,
            parallelism,
            wrap(
                windows.combine_to_sliding_window_p(
                    policy, self.item_op, self._output(), early_results_period_ms=early
                )
            ),
        )
        edge = planner.edge_from_vertex(prepare, combine)
        if self.keyed:
            edge.partitioned(_frame_key).distributed()
        else:
            edge.all_to_one().distributed()
        planner.dag.edge(edge)


# -- joins and sorting ---------------------------------------------------------------


class HashJoinTransform(Transform):
    """Hash join: build sides broadcast to every processor with priority, probe side local."""

    def __init__(
        self,
        probe: Transform,
        builds: Sequence[Transform],
        clauses: Sequence[hash_join.JoinClause],
        map_to_output: Callable[..., Any],
        inner: bool,
        timestamped: bool,
    ) -> None:
        super().__init__("inner-hash-join" if inner else "hash-join", [probe, *builds])
        self.clauses = list(clauses)
        self.map_to_output = map_to_output
        self.inner = inner
        self.timestamped = timestamped

    def add_to_dag(self, planner: planner_mod.Planner) -> None:
        supplier = hash_join.hash_join_p(
            self.clauses, self.map_to_output, inner=self.inner, timestamped=self.timestamped
        )
        vertex = planner.add_vertex(self, self.name, planner.inherited_parallelism(self), supplier)

        def route(edge: Any, ordinal: int) -> None:
            if ordinal > 0:
                edge.broadcast().distributed().priority(-1)
            elif planner.preserve_order:
                edge.isolated()

        planner.add_edges(self, vertex, route)


class SortTransform(Transform):
    """Sorts all items on one processor of the cluster."""

    def __init__(self, upstream: Transform, key_fn: Callable[[Any], Any] | None, reverse: bool) -> None:
        super().__init__("sort", [upstream])
        self.key_fn = key_fn
        self.reverse = reverse

    def add_to_dag(self, planner: planner_mod.Planner) -> None:
        vertex = planner.add_vertex(
            self,
            self.name,
            1,
            proc.ProcessorMetaSupplier.force_total_parallelism_one(sort.sort_p(self.key_fn, self.reverse)),
        )
        planner.add_edges(self, vertex, lambda edge, _: edge.all_to_one().distributed())
