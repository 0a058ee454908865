"""Pipeline stages: the typed, fluent face of the pipeline graph.

Every call on a stage adds a transform to the pipeline and returns a new
stage for its output; nothing runs until the pipeline is submitted. Stages
are generic in their item type, so ``BatchStage[str].map(len)`` is a
``BatchStage[int]`` to a type checker.

Stream stages after ``with_timestamps`` carry ``(timestamp, item)`` events
internally; every user function still receives and returns bare items.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Hashable, Iterable
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar

from jetlet import service as service_mod
from jetlet._planner import transforms as tf
from jetlet.aggregate import builder
from jetlet.aggregate import operation as agg
from jetlet.core import partitioning
from jetlet.core.processors.hash_join import JoinClause
from jetlet.errors import require_callable
from jetlet.pipeline import sinks as sinks_mod
from jetlet.pipeline import window as window_mod

if TYPE_CHECKING:
    from jetlet.pipeline import pipeline as pipeline_mod

T = TypeVar("T")
R = TypeVar("R")
S = TypeVar("S")
V = TypeVar("V")
K = TypeVar("K", bound=Hashable)


def _always(_item: Any) -> bool:
    return True


def _entry(key: Any, value: Any) -> tuple[Any, Any]:
    return (key, value)


def _check_callable(fn: object, stage: str, what: str) -> None:
    require_callable(fn, f"stage {stage!r}: {what}")


def _check_service(factory: object, stage: str) -> None:
    if not isinstance(factory, service_mod.ServiceFactory):
        raise TypeError(
            f"stage {stage!r}: expected a ServiceFactory (see jetlet.ServiceFactories), got {factory!r}"
        )


def _rolling(
    op: agg.AggregateOperation[Any, Any], keyed: bool
) -> tuple[Callable[[], list[Any]], Callable[..., Any], Callable[[list[Any]], list[Any]] | None]:
    """State, function and state copy of a rolling aggregation: the accumulator lives in a one-slot list.

    The copy is a new slot with the operation's copy of the accumulator (the accumulator itself when it
    is immutable); None when the operation has no ``copy_fn`` (the state is then pickled).
    """
    if not isinstance(op, agg.AggregateOperation):
        raise TypeError(f"rolling_aggregate needs an AggregateOperation, got {op!r}")
    create, accumulate, export, copy_acc = op.create_fn, op.accumulate_fn(0), op.export_fn, op.copy_fn
    copy_state: Callable[[list[Any]], list[Any]] | None = None
    if copy_acc is agg.IDENTITY:
        copy_state = list.copy
    elif copy_acc is not None:

        def copy_state(state: list[Any]) -> list[Any]:
            return [copy_acc(state[0])]

    def new_state() -> list[Any]:
        return [create()]

    if keyed:

        def step_keyed(state: list[Any], key: Any, item: Any) -> tuple[Any, Any]:
            state[0] = accumulate(state[0], item)
            return (key, export(state[0]))

        return new_state, step_keyed, copy_state

    def step(state: list[Any], item: Any) -> Any:
        state[0] = accumulate(state[0], item)
        return export(state[0])

    return new_state, step, copy_state


class _BatchMap:
    """``map_batches``' step: the user's function, with None for an empty result."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def __call__(self, batch: Any) -> Any:
        out = self.fn(batch)
        return out if out is not None and len(out) else None


class _BatchFilter:
    """``filter_batches``' step: the batch's rows where the user's mask holds, None when none does."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def __call__(self, batch: Any) -> Any:
        kept = batch.filter(self.fn(batch))
        return kept if len(kept) else None


class GeneralStage(Generic[T]):
    """What every stage can do."""

    def __init__(
        self, pipeline: pipeline_mod.Pipeline, transform: tf.Transform, timestamped: bool = False
    ) -> None:
        self._pipeline = pipeline
        self._transform = transform
        self._timestamped = timestamped

    @property
    def name(self) -> str:
        return self._transform.name

    @property
    def pipeline(self) -> pipeline_mod.Pipeline:
        """The pipeline this stage belongs to (Jet's ``getPipeline()``), to read another source into it."""
        return self._pipeline

    def _derive(self, transform: tf.Transform) -> Any:
        self._pipeline._connect(transform)
        return type(self)(self._pipeline, transform, self._timestamped)

    def _derive_with(self, transform: tf.Transform, *user_fns: Callable[..., Any]) -> Any:
        transform.user_fns = list(user_fns)
        return self._derive(transform)

    def _map(self, fn: Callable[[Any], Any]) -> Any:
        _check_callable(fn, self.name, "the map function")
        return self._derive_with(tf.StatelessTransform.map(self._transform, fn, self._timestamped), fn)

    def _flat_map(self, fn: Callable[[Any], Iterable[Any] | None]) -> Any:
        _check_callable(fn, self.name, "the flat_map function")
        return self._derive_with(tf.StatelessTransform.flat_map(self._transform, fn, self._timestamped), fn)

    def filter(self, predicate: Callable[[T], bool]) -> Self:
        """Keep the items for which ``predicate`` is true."""
        _check_callable(predicate, self.name, "the filter predicate")
        derived: Self = self._derive_with(
            tf.StatelessTransform.filter(self._transform, predicate, self._timestamped), predicate
        )
        return derived

    def map_batches(self, fn: Callable[[T], T | None]) -> Self:
        """Record-batch path: ``fn(batch)`` for each :class:`~jetlet.batches.ColumnBatch`, a new batch.

        ``fn`` works on whole numpy columns (``batch["price"] * 89 // 100``), so the engine's cost is
        paid once per batch; a None or empty result drops the batch. Timestamps ride along as for
        ``map`` (a batch keeps its source's timestamp, its highest event time). Example::

            bids.map_batches(lambda b: b.with_columns(price=b["price"] * 89 // 100))
        """
        _check_callable(fn, self.name, "the map_batches function")
        transform = tf.StatelessTransform.map(self._transform, _BatchMap(fn), self._timestamped)
        transform.takes_batches = transform.makes_batches = True
        derived: Self = self._derive_with(transform, fn)
        return derived

    def filter_batches(self, fn: Callable[[T], Any]) -> Self:
        """Record-batch path: keep the rows of each batch where the boolean column ``fn(batch)`` is true.

        A batch with no row left is dropped. Example:
        ``bids.filter_batches(lambda b: b["auction"] % 123 == 0)``.
        """
        _check_callable(fn, self.name, "the filter_batches function")
        transform = tf.StatelessTransform.map(self._transform, _BatchFilter(fn), self._timestamped)
        transform.takes_batches = transform.makes_batches = True
        derived: Self = self._derive_with(transform, fn)
        return derived

    def peek(self, predicate: Callable[[T], bool] = _always, to_string: Callable[[T], str] = str) -> Self:
        """Log the items (for which ``predicate`` holds) as they pass; they continue unchanged."""
        derived: Self = self._derive(
            tf.StatelessTransform.peek(self._transform, predicate, to_string, self._timestamped)
        )
        return derived

    def set_name(self, name: str) -> Self:
        """Name this stage (its vertex, its state's identity in snapshots)."""
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"set_name needs a non-empty string, got {name!r}")
        self._transform.name = name
        return self

    def set_local_parallelism(self, local_parallelism: int) -> Self:
        """Processors of this stage per member; -1 for the default."""
        if not isinstance(local_parallelism, int) or (local_parallelism < 1 and local_parallelism != -1):
            raise ValueError(
                f"stage {self.name!r}: local_parallelism must be -1 or >= 1, got {local_parallelism!r}"
            )
        self._transform.local_parallelism = local_parallelism
        return self

    def rebalance(self, key_fn: Callable[[T], Hashable] | None = None) -> Self:
        """Spread this stage's output over all processors of the cluster: round-robin, or by ``key_fn``."""
        if key_fn is not None:
            _check_callable(key_fn, self.name, "the rebalance key function")
        self._transform.rebalance = True
        self._transform.forward = False
        self._transform.broadcast = False
        if key_fn is not None:
            self._transform.rebalance_key = partitioning.EventKey(key_fn) if self._timestamped else key_fn
        return self

    def forward(self) -> Self:
        """Send processor ``i``'s output to processor ``i`` of the next stage, on the same member;
        the next stage takes this stage's parallelism (Flink's ``DataStream.forward()``).

        For a stream that its source splits by key (each processor reads its keys, as a consumer of
        a topic partitioned by key reads its partitions; Flink's ``reinterpretAsKeyedStream``): the
        next stage's processor ``i`` then sees every item of source processor ``i``'s keys, with no
        exchange between members.
        """
        self._transform.rebalance = True
        self._transform.rebalance_key = None
        self._transform.forward = True
        self._transform.broadcast = False
        return self

    def merge(self, other: GeneralStage[T]) -> Self:
        """The items of this stage and of ``other``, interleaved."""
        if other._pipeline is not self._pipeline:
            raise ValueError(f"stage {self.name!r}: cannot merge a stage of another pipeline")
        if other._timestamped != self._timestamped:
            raise ValueError(
                f"stage {self.name!r}: cannot merge a timestamped stage with one without timestamps"
            )
        derived: Self = self._derive(tf.MergeTransform([self._transform, other._transform]))
        return derived

    def broadcast(self) -> Self:
        """Send every item of this stage to every processor of the next stage, on every member
        (Flink's ``DataStream.broadcast()``): for a small stream that each processor needs whole."""
        self._transform.rebalance = True
        self._transform.rebalance_key = None
        self._transform.forward = False
        self._transform.broadcast = True
        return self

    def custom_transform(
        self, name: str, supplier: object, *others: GeneralStage[Any], watermark_stride: int | None = None
    ) -> Any:
        """Your own processor (a Core API supplier) as the next stage.

        Its input 0 is this stage; each of ``others`` is a further input (1, 2, ...), as the edges
        of a Core API vertex. Each input keeps its own routing (local unless it was rebalanced or
        broadcast), and the processor tells its inputs apart by ordinal in ``process``. The stage's
        item type is the processor's to say: annotate the variable you assign it to.

        A processor that acts on watermarks at multiples of some time (its own windows' ends, say)
        gives that time as ``watermark_stride``: the sources' watermarks are then throttled no
        coarser (:func:`jetlet._planner.planner.watermark_stride` says how). Without one, a custom
        window shorter than a second closes up to a second late in a pipeline with no windows.
        """
        if watermark_stride is not None:
            if type(watermark_stride) is not int or watermark_stride < 1:
                raise ValueError(
                    f"custom_transform {name!r}: watermark_stride must be an int >= 1, "
                    f"got {watermark_stride!r}"
                )
            if not self._timestamped:
                raise ValueError(
                    f"custom_transform {name!r}: watermark_stride needs timestamps, and stage {self.name!r} "
                    "has none (call with_timestamps, with_native_timestamps or with_ingestion_timestamps)"
                )
        for other in others:
            if not isinstance(other, GeneralStage):
                raise TypeError(
                    f"stage {self.name!r}: custom_transform takes stages as further inputs, got {other!r}"
                )
            if other._pipeline is not self._pipeline:
                raise ValueError(
                    f"stage {self.name!r}: custom_transform cannot take a stage of another pipeline"
                )
            if other._timestamped != self._timestamped:
                raise ValueError(
                    f"stage {self.name!r}: custom_transform cannot take a timestamped stage with one "
                    "without timestamps"
                )
        upstream = [self._transform, *(other._transform for other in others)]
        return self._derive(tf.CustomTransform(name, upstream, supplier, watermark_stride))

    def apply(self, fn: Callable[[Self], R]) -> R:
        """``fn(self)``: reuse a chain of stages written as a function."""
        return fn(self)

    def write_to(self, sink: sinks_mod.Sink[Any]) -> SinkStage:
        """Send this stage's items to ``sink``."""
        return self._pipeline.write_to(sink, self)

    # -- state -------------------------------------------------------------------
    def map_stateful(
        self,
        create_fn: Callable[[], S],
        fn: Callable[[S, T], R | None],
        *,
        copy_fn: Callable[[S], S] | None = None,
    ) -> Any:
        """``fn(state, item)`` with one state object for the whole stage (on one processor).

        ``copy_fn(state)``, if given, returns a copy of the state that ``fn``
        will not change (``list.copy`` for a list of immutable items, say):
        snapshots then copy the state (cheap) instead of pickling it on the
        processing thread. Without it the state is pickled, as always.
        """
        return self._stateful("map", None, create_fn, fn, copy_fn=copy_fn)

    def filter_stateful(
        self,
        create_fn: Callable[[], S],
        predicate: Callable[[S, T], bool],
        *,
        copy_fn: Callable[[S], S] | None = None,
    ) -> Self:
        """Keep the items for which ``predicate(state, item)`` holds; one global state (``copy_fn``: see
        :meth:`map_stateful`)."""
        derived: Self = self._stateful("filter", None, create_fn, predicate, copy_fn=copy_fn)
        return derived

    def flat_map_stateful(
        self,
        create_fn: Callable[[], S],
        fn: Callable[[S, T], Iterable[R] | None],
        *,
        copy_fn: Callable[[S], S] | None = None,
    ) -> Any:
        """Every item of ``fn(state, item)``; one global state (``copy_fn``: see :meth:`map_stateful`)."""
        return self._stateful("flat-map", None, create_fn, fn, copy_fn=copy_fn)

    def rolling_aggregate(self, op: agg.AggregateOperation[Any, R]) -> Any:
        """After each item, the aggregate of all items so far (one global accumulator)."""
        create_fn, fn, copy_fn = _rolling(op, keyed=False)
        return self._stateful("map", None, create_fn, fn, copy_fn=copy_fn)

    def _stateful(
        self,
        kind: str,
        key_fn: Callable[[Any], Hashable] | None,
        create_fn: Callable[[], Any],
        fn: Callable[..., Any],
        ttl: int = 0,
        on_evict_fn: Callable[[Any, Any, int], Any] | None = None,
        copy_fn: Callable[[Any], Any] | None = None,
    ) -> Any:
        _check_callable(create_fn, self.name, "the state create_fn")
        _check_callable(fn, self.name, f"the {kind}_stateful function")
        if not isinstance(ttl, int) or ttl < 0:
            raise ValueError(f"stage {self.name!r}: ttl must be an int >= 0, got {ttl!r}")
        if ttl and not self._timestamped:
            raise ValueError(
                f"stage {self.name!r}: a state ttl is measured in event time; add timestamps first"
            )
        if on_evict_fn is not None:
            _check_callable(on_evict_fn, self.name, "the on_evict function")
        if copy_fn is not None:
            _check_callable(copy_fn, self.name, "the state copy_fn")
        transform = tf.StatefulTransform(
            kind, self._transform, key_fn, create_fn, fn, self._timestamped, ttl, on_evict_fn, copy_fn
        )
        transform.user_fns = [create_fn, fn, *(f for f in (key_fn, on_evict_fn, copy_fn) if f is not None)]
        return self._derive(transform)

    # -- services ------------------------------------------------------------------
    def map_using_service(
        self, factory: service_mod.ServiceFactory[Any, V], fn: Callable[[V, T], R | None]
    ) -> Any:
        """``fn(service, item)`` for each item; the service comes from ``factory``."""
        return self._using_service("map", factory, fn, tf.map_step)

    def filter_using_service(
        self, factory: service_mod.ServiceFactory[Any, V], predicate: Callable[[V, T], bool]
    ) -> Self:
        """Keep the items for which ``predicate(service, item)`` holds."""
        derived: Self = self._using_service("filter", factory, predicate, tf.filter_step)
        return derived

    def flat_map_using_service(
        self, factory: service_mod.ServiceFactory[Any, V], fn: Callable[[V, T], Iterable[R] | None]
    ) -> Any:
        """Every item of ``fn(service, item)``."""
        return self._using_service("flat-map", factory, fn, tf.flat_map_step)

    def map_using_service_async(
        self,
        factory: service_mod.ServiceFactory[Any, V],
        fn: Callable[[V, T], Any],
        max_concurrent_ops: int = 4,
        preserve_order: bool = True,
    ) -> Any:
        """``fn(service, item)`` returns a coroutine or a future; at most ``max_concurrent_ops`` in flight."""
        _check_service(factory, self.name)
        _check_callable(fn, self.name, "the async service function")
        if not isinstance(max_concurrent_ops, int) or max_concurrent_ops < 1:
            raise ValueError(
                f"stage {self.name!r}: max_concurrent_ops must be an int >= 1, got {max_concurrent_ops!r}"
            )
        transform = tf.AsyncServiceTransform(
            self._transform, factory, fn, max_concurrent_ops, preserve_order, self._timestamped
        )
        transform.user_fns = [fn]
        return self._derive(transform)

    def _using_service(
        self,
        kind: str,
        factory: service_mod.ServiceFactory[Any, Any],
        fn: Callable[..., Any],
        make: Callable[[Callable[[Any], Any], bool], Any],
        key_fn: Callable[[Any], Hashable] | None = None,
    ) -> Any:
        _check_service(factory, self.name)
        _check_callable(fn, self.name, f"the {kind}_using_service function")
        timestamped = self._timestamped

        def make_step(service: Any) -> Any:
            return make(functools.partial(fn, service), timestamped)

        transform = tf.ServiceTransform(kind, self._transform, factory, make_step, key_fn, timestamped)
        transform.user_fns = [fn]
        return self._derive(transform)

    # -- joins ---------------------------------------------------------------------
    def hash_join(
        self,
        build: BatchStage[Any],
        clause: JoinClause,
        map_to_output: Callable[[T, Any], R],
    ) -> Any:
        """Enrich each item with the ``build`` stage's matching item (None where none matches)."""
        return self._hash_join([build], [clause], map_to_output, inner=False)

    def inner_hash_join(
        self,
        build: BatchStage[Any],
        clause: JoinClause,
        map_to_output: Callable[[T, Any], R],
    ) -> Any:
        """Like :meth:`hash_join`, but items without a match are dropped."""
        return self._hash_join([build], [clause], map_to_output, inner=True)

    def hash_join2(
        self,
        build1: BatchStage[Any],
        clause1: JoinClause,
        build2: BatchStage[Any],
        clause2: JoinClause,
        map_to_output: Callable[[T, Any, Any], R],
    ) -> Any:
        """Join two build stages at once: ``map_to_output(item, match1, match2)``."""
        return self._hash_join([build1, build2], [clause1, clause2], map_to_output, inner=False)

    def hash_join_builder(self) -> HashJoinBuilder:
        """Join any number of build stages; results come as ``map_to_output(item, ItemsByTag)``."""
        return HashJoinBuilder(self)

    def _hash_join(
        self,
        builds: list[BatchStage[Any]],
        clauses: list[JoinClause],
        map_to_output: Callable[..., Any],
        inner: bool,
    ) -> Any:
        _check_callable(map_to_output, self.name, "the join's map_to_output function")
        for build in builds:
            if not isinstance(build, BatchStage):
                raise TypeError(
                    f"stage {self.name!r}: the build side of a hash join must be a batch stage, "
                    f"got {type(build).__name__} {getattr(build, 'name', build)!r} (a stream never ends, "
                    "so it cannot be loaded into the join's table)"
                )
            if build._pipeline is not self._pipeline:
                raise ValueError(f"stage {self.name!r}: cannot join a stage of another pipeline")
        for clause in clauses:
            if not isinstance(clause, JoinClause):
                raise TypeError(f"stage {self.name!r}: expected a JoinClause, got {clause!r}")
        transform = tf.HashJoinTransform(
            self._transform,
            [build._transform for build in builds],
            clauses,
            map_to_output,
            inner,
            self._timestamped,
        )
        transform.user_fns = [map_to_output]
        return self._derive(transform)

    def _bare(self) -> tf.Transform:
        """This stage's transform, unwrapping events for consumers that take bare items."""
        if not self._timestamped:
            return self._transform
        unwrap = tf.StatelessTransform("map", self._transform, lambda batch: [item for _, item in batch])
        unwrap.takes_batches = unwrap.makes_batches = self._transform.makes_batches  # items unchanged
        self._pipeline._connect(unwrap)
        return unwrap


class BatchStage(GeneralStage[T]):
    """A stage of a batch (finite) pipeline."""

    def map(self, fn: Callable[[T], R | None]) -> BatchStage[R]:
        """``fn(item)`` for each item; a None result drops the item."""
        stage: BatchStage[R] = self._map(fn)
        return stage

    def flat_map(self, fn: Callable[[T], Iterable[R] | None]) -> BatchStage[R]:
        """Every item of ``fn(item)`` for each item."""
        stage: BatchStage[R] = self._flat_map(fn)
        return stage

    def map_stateful(
        self,
        create_fn: Callable[[], S],
        fn: Callable[[S, T], R | None],
        *,
        copy_fn: Callable[[S], S] | None = None,
    ) -> BatchStage[R]:
        """``fn(state, item)`` with one state object for the whole stage (on one processor)."""
        stage: BatchStage[R] = super().map_stateful(create_fn, fn, copy_fn=copy_fn)
        return stage

    def flat_map_stateful(
        self,
        create_fn: Callable[[], S],
        fn: Callable[[S, T], Iterable[R] | None],
        *,
        copy_fn: Callable[[S], S] | None = None,
    ) -> BatchStage[R]:
        """Every item of ``fn(state, item)``; one global state."""
        stage: BatchStage[R] = super().flat_map_stateful(create_fn, fn, copy_fn=copy_fn)
        return stage

    def rolling_aggregate(self, op: agg.AggregateOperation[Any, R]) -> BatchStage[R]:
        """After each item, the aggregate of all items so far (one global accumulator)."""
        stage: BatchStage[R] = super().rolling_aggregate(op)
        return stage

    def map_using_service(
        self, factory: service_mod.ServiceFactory[Any, V], fn: Callable[[V, T], R | None]
    ) -> BatchStage[R]:
        """``fn(service, item)`` for each item; the service comes from ``factory``."""
        stage: BatchStage[R] = super().map_using_service(factory, fn)
        return stage

    def flat_map_using_service(
        self, factory: service_mod.ServiceFactory[Any, V], fn: Callable[[V, T], Iterable[R] | None]
    ) -> BatchStage[R]:
        """Every item of ``fn(service, item)``."""
        stage: BatchStage[R] = super().flat_map_using_service(factory, fn)
        return stage

    def map_using_service_async(
        self,
        factory: service_mod.ServiceFactory[Any, V],
        fn: Callable[[V, T], Any],
        max_concurrent_ops: int = 4,
        preserve_order: bool = True,
    ) -> BatchStage[Any]:
        """``fn(service, item)`` returns a coroutine or a future; at most ``max_concurrent_ops`` in flight."""
        stage: BatchStage[Any] = super().map_using_service_async(
            factory, fn, max_concurrent_ops, preserve_order
        )
        return stage

    def hash_join(
        self, build: BatchStage[Any], clause: JoinClause, map_to_output: Callable[[T, Any], R]
    ) -> BatchStage[R]:
        """Enrich each item with the ``build`` stage's matching item (None where none matches)."""
        stage: BatchStage[R] = super().hash_join(build, clause, map_to_output)
        return stage

    def inner_hash_join(
        self, build: BatchStage[Any], clause: JoinClause, map_to_output: Callable[[T, Any], R]
    ) -> BatchStage[R]:
        """Like :meth:`hash_join`, but items without a match are dropped."""
        stage: BatchStage[R] = super().inner_hash_join(build, clause, map_to_output)
        return stage

    def hash_join2(
        self,
        build1: BatchStage[Any],
        clause1: JoinClause,
        build2: BatchStage[Any],
        clause2: JoinClause,
        map_to_output: Callable[[T, Any, Any], R],
    ) -> BatchStage[R]:
        """Join two build stages at once: ``map_to_output(item, match1, match2)``."""
        stage: BatchStage[R] = super().hash_join2(build1, clause1, build2, clause2, map_to_output)
        return stage

    def sort(self, key_fn: Callable[[T], Any] | None = None, reverse: bool = False) -> BatchStage[T]:
        """All items in order of ``key_fn(item)`` (the items themselves by default), on one processor."""
        if key_fn is not None:
            _check_callable(key_fn, self.name, "the sort key function")
        transform = tf.SortTransform(self._transform, key_fn, reverse)
        transform.user_fns = [key_fn] if key_fn is not None else []
        stage: BatchStage[T] = self._derive(transform)
        return stage

    def grouping_key(self, key_fn: Callable[[T], K]) -> BatchStageWithKey[T, K]:
        """Group by ``key_fn(item)`` for keyed aggregation."""
        _check_callable(key_fn, self.name, "the grouping key function")
        return BatchStageWithKey(self, key_fn)

    def aggregate(self, op: agg.AggregateOperation[Any, R]) -> BatchStage[R]:
        """One result over all items, computed in two stages (local accumulate, global combine)."""
        stage: BatchStage[R] = self._derive(tf.AggregateTransform([self._transform], op))
        return stage

    def distinct(self) -> BatchStage[T]:
        """Each distinct item once."""
        return self.grouping_key(_identity).distinct()

    def aggregate2(
        self,
        op0: agg.AggregateOperation[Any, Any],
        stage1: BatchStage[Any],
        op1: agg.AggregateOperation[Any, Any],
    ) -> BatchStage[tuple[Any, Any]]:
        """Aggregate this stage with ``op0`` and ``stage1`` with ``op1``: one ``(result0, result1)``."""
        stage: BatchStage[tuple[Any, Any]] = self._co_aggregate([self, stage1], [op0, op1])
        return stage

    def aggregate3(
        self,
        op0: agg.AggregateOperation[Any, Any],
        stage1: BatchStage[Any],
        op1: agg.AggregateOperation[Any, Any],
        stage2: BatchStage[Any],
        op2: agg.AggregateOperation[Any, Any],
    ) -> BatchStage[tuple[Any, Any, Any]]:
        """Three stages, three operations: one ``(result0, result1, result2)``."""
        stage: BatchStage[tuple[Any, Any, Any]] = self._co_aggregate([self, stage1, stage2], [op0, op1, op2])
        return stage

    def aggregate_builder(self, op0: agg.AggregateOperation[Any, Any]) -> AggregateBuilder:
        """Co-aggregate any number of stages; results come as ``ItemsByTag``."""
        return AggregateBuilder(self, op0)

    def _co_aggregate(
        self, inputs: list[BatchStage[Any]], ops_: list[agg.AggregateOperation[Any, Any]], shape: Any = tuple
    ) -> Any:
        for other in inputs:
            if other._pipeline is not self._pipeline or other._timestamped:
                raise ValueError(
                    f"stage {self.name!r}: co-aggregated stages must be batch stages of one pipeline"
                )
        op = builder.co_aggregate(ops_, shape)
        return self._derive(tf.AggregateTransform([s._transform for s in inputs], op))


def _identity(item: Any) -> Any:
    return item


class GeneralStageWithKey(Generic[T, K]):
    """A stage grouped by a key: state, services and aggregation per key (Jet's ``GeneralStageWithKey``)."""

    def __init__(self, stage: GeneralStage[T], key_fn: Callable[[T], K]) -> None:
        self._stage = stage
        self.key_fn = key_fn

    def map_stateful(
        self,
        create_fn: Callable[[], S],
        fn: Callable[[S, K, T], R | None],
        ttl: int = 0,
        on_evict_fn: Callable[[S, K, int], R | None] | None = None,
        *,
        copy_fn: Callable[[S], S] | None = None,
    ) -> Any:
        """``fn(state, key, item)`` with one state object per key.

        With ``ttl`` (event time, timestamped streams only) a key's state is
        dropped once the watermark passes its last event by ``ttl``;
        ``on_evict_fn(state, key, watermark)`` may emit a last result.

        ``copy_fn(state)``, if given, returns a copy of a state that ``fn``
        will not change (``list.copy`` for a list of immutable items, say).
        After a snapshot barrier, the first change to a key's state then
        costs a copy (about 0.3 µs for a small object) instead of a pickle
        (about 6 µs) on the processing thread; the member pickles the copy
        later. Without it the state is pickled, which is always correct.
        """
        return self._stage._stateful("map", self.key_fn, create_fn, fn, ttl, on_evict_fn, copy_fn)

    def filter_stateful(
        self,
        create_fn: Callable[[], S],
        predicate: Callable[[S, K, T], bool],
        ttl: int = 0,
        *,
        copy_fn: Callable[[S], S] | None = None,
    ) -> Any:
        """Keep the items for which ``predicate(state, key, item)`` holds; one state per key (``copy_fn``:
        see :meth:`map_stateful`)."""
        return self._stage._stateful("filter", self.key_fn, create_fn, predicate, ttl, copy_fn=copy_fn)

    def flat_map_stateful(
        self,
        create_fn: Callable[[], S],
        fn: Callable[[S, K, T], Iterable[R] | None],
        ttl: int = 0,
        on_evict_fn: Callable[[S, K, int], Iterable[R] | None] | None = None,
        *,
        copy_fn: Callable[[S], S] | None = None,
    ) -> Any:
        """Every item of ``fn(state, key, item)``; one state per key.

        ``copy_fn``: see :meth:`map_stateful`.
        """
        return self._stage._stateful("flat-map", self.key_fn, create_fn, fn, ttl, on_evict_fn, copy_fn)

    def rolling_aggregate(self, op: agg.AggregateOperation[Any, R]) -> Any:
        """After each item, ``(key, aggregate of the key's items so far)``."""
        create_fn, fn, copy_fn = _rolling(op, keyed=True)
        return self._stage._stateful("map", self.key_fn, create_fn, fn, copy_fn=copy_fn)

    def map_using_service(
        self, factory: service_mod.ServiceFactory[Any, V], fn: Callable[[V, K, T], R | None]
    ) -> Any:
        """``fn(service, key, item)``; items of one key always meet the same processor."""
        return self._stage._using_service("map", factory, self._with_key(fn), tf.map_step, self.key_fn)

    def filter_using_service(
        self, factory: service_mod.ServiceFactory[Any, V], predicate: Callable[[V, K, T], bool]
    ) -> Any:
        """Keep the items for which ``predicate(service, key, item)`` holds."""
        return self._stage._using_service(
            "filter", factory, self._with_key(predicate), tf.filter_step, self.key_fn
        )

    def flat_map_using_service(
        self, factory: service_mod.ServiceFactory[Any, V], fn: Callable[[V, K, T], Iterable[R] | None]
    ) -> Any:
        """Every item of ``fn(service, key, item)``."""
        return self._stage._using_service(
            "flat-map", factory, self._with_key(fn), tf.flat_map_step, self.key_fn
        )

    def _with_key(self, fn: Callable[[Any, Any, Any], Any]) -> Callable[[Any, Any], Any]:
        _check_callable(fn, self._stage.name, "the service function")
        key_fn = self.key_fn

        def call(service: Any, item: Any) -> Any:
            return fn(service, key_fn(item), item)

        call.__qualname__ = getattr(fn, "__qualname__", "service function")
        return call


class BatchStageWithKey(GeneralStageWithKey[T, K]):
    """A batch stage grouped by a key: aggregate or deduplicate per key."""

    _stage: BatchStage[T]

    def __init__(self, stage: BatchStage[T], key_fn: Callable[[T], K]) -> None:
        super().__init__(stage, key_fn)

    def aggregate(
        self, op: agg.AggregateOperation[Any, R], map_to_output: Callable[[K, R], Any] = _entry
    ) -> BatchStage[Any]:
        """Per key, the result of ``op``: ``(key, result)`` tuples by default."""
        stage = self._stage
        transform = tf.GroupAggregateTransform([stage._transform], [self.key_fn], op, map_to_output)
        result: BatchStage[Any] = stage._derive(transform)
        return result

    def aggregate2(
        self,
        op0: agg.AggregateOperation[Any, Any],
        stage1: BatchStageWithKey[Any, K],
        op1: agg.AggregateOperation[Any, Any],
    ) -> BatchStage[tuple[K, tuple[Any, Any]]]:
        """Per key, this stage's items folded by ``op0`` and ``stage1``'s by ``op1``: ``(key, (r0, r1))``."""
        stage: BatchStage[tuple[K, tuple[Any, Any]]] = self._co_aggregate([self, stage1], [op0, op1], tuple)
        return stage

    def aggregate3(
        self,
        op0: agg.AggregateOperation[Any, Any],
        stage1: BatchStageWithKey[Any, K],
        op1: agg.AggregateOperation[Any, Any],
        stage2: BatchStageWithKey[Any, K],
        op2: agg.AggregateOperation[Any, Any],
    ) -> BatchStage[tuple[K, tuple[Any, Any, Any]]]:
        """Per key, three stages folded by three operations: ``(key, (r0, r1, r2))``."""
        stage: BatchStage[tuple[K, tuple[Any, Any, Any]]] = self._co_aggregate(
            [self, stage1, stage2], [op0, op1, op2], tuple
        )
        return stage

    def aggregate_builder(self, op0: agg.AggregateOperation[Any, Any]) -> AggregateBuilder:
        """Co-aggregate any number of keyed stages; results come as ``(key, ItemsByTag)``."""
        return AggregateBuilder(self, op0)

    def _co_aggregate(
        self,
        inputs: list[BatchStageWithKey[Any, Any]],
        ops_: list[agg.AggregateOperation[Any, Any]],
        shape: Any,
        map_to_output: Callable[[Any, Any], Any] = _entry,
    ) -> Any:
        stage = self._stage
        for other in inputs:
            if other._stage._pipeline is not stage._pipeline:
                raise ValueError(f"stage {stage.name!r}: co-aggregated stages must be in one pipeline")
        transform = tf.GroupAggregateTransform(
            [s._stage._transform for s in inputs],
            [s.key_fn for s in inputs],
            builder.co_aggregate(ops_, shape),
            map_to_output,
        )
        return stage._derive(transform)

    def distinct(self) -> BatchStage[T]:
        """The first item seen of each key."""
        stage = self._stage
        transform = tf.GroupAggregateTransform(
            [stage._transform], [self.key_fn], _FIRST, _value, name="distinct"
        )
        result: BatchStage[T] = stage._derive(transform)
        return result


def _value(_key: Any, value: Any) -> Any:
    return value


def _keep_first(acc: Any, item: Any) -> Any:
    return item if acc is None else acc


_FIRST: agg.AggregateOperation[Any, Any] = (
    agg.AggregateOperation.with_create(lambda: None).and_accumulate(_keep_first).and_combine(_keep_first)
)
"""The first item seen (the planner's distinct)."""


class AggregateBuilder:
    """Collects stages and their operations for one co-aggregation (Jet's aggregate builders)."""

    def __init__(
        self, first: BatchStage[Any] | BatchStageWithKey[Any, Any], op0: agg.AggregateOperation[Any, Any]
    ):
        self._stages: list[Any] = [first]
        self._ops = [op0]

    def tag0(self) -> builder.Tag[Any]:
        """The tag of the stage that started the builder."""
        return builder.Tag(0)

    def add(self, stage: Any, op: agg.AggregateOperation[Any, Any]) -> builder.Tag[Any]:
        """Add a stage (keyed like the first one, if it is keyed) with its own operation."""
        if type(stage) is not type(self._stages[0]):
            raise TypeError("aggregate_builder: every stage must be keyed, or none")
        self._stages.append(stage)
        self._ops.append(op)
        return builder.Tag(len(self._stages) - 1)

    def build(self) -> BatchStage[Any]:
        """The co-aggregating stage: ``ItemsByTag`` results (per key: ``(key, ItemsByTag)``)."""
        first = self._stages[0]
        stage: BatchStage[Any] = first._co_aggregate(self._stages, self._ops, builder.ItemsByTag)
        return stage


class StreamStage(GeneralStage[T]):
    """A stage of a streaming (possibly infinite) pipeline."""

    def map(self, fn: Callable[[T], R | None]) -> StreamStage[R]:
        """``fn(item)`` for each item; a None result drops the item."""
        stage: StreamStage[R] = self._map(fn)
        return stage

    def flat_map(self, fn: Callable[[T], Iterable[R] | None]) -> StreamStage[R]:
        """Every item of ``fn(item)`` for each item."""
        stage: StreamStage[R] = self._flat_map(fn)
        return stage

    @property
    def has_timestamps(self) -> bool:
        return self._timestamped

    def map_stateful(
        self,
        create_fn: Callable[[], S],
        fn: Callable[[S, T], R | None],
        *,
        copy_fn: Callable[[S], S] | None = None,
    ) -> StreamStage[R]:
        """``fn(state, item)`` with one state object for the whole stage (on one processor)."""
        stage: StreamStage[R] = super().map_stateful(create_fn, fn, copy_fn=copy_fn)
        return stage

    def flat_map_stateful(
        self,
        create_fn: Callable[[], S],
        fn: Callable[[S, T], Iterable[R] | None],
        *,
        copy_fn: Callable[[S], S] | None = None,
    ) -> StreamStage[R]:
        """Every item of ``fn(state, item)``; one global state."""
        stage: StreamStage[R] = super().flat_map_stateful(create_fn, fn, copy_fn=copy_fn)
        return stage

    def rolling_aggregate(self, op: agg.AggregateOperation[Any, R]) -> StreamStage[R]:
        """After each item, the aggregate of all items so far (one global accumulator)."""
        stage: StreamStage[R] = super().rolling_aggregate(op)
        return stage

    def map_using_service(
        self, factory: service_mod.ServiceFactory[Any, V], fn: Callable[[V, T], R | None]
    ) -> StreamStage[R]:
        """``fn(service, item)`` for each item; the service comes from ``factory``."""
        stage: StreamStage[R] = super().map_using_service(factory, fn)
        return stage

    def flat_map_using_service(
        self, factory: service_mod.ServiceFactory[Any, V], fn: Callable[[V, T], Iterable[R] | None]
    ) -> StreamStage[R]:
        """Every item of ``fn(service, item)``."""
        stage: StreamStage[R] = super().flat_map_using_service(factory, fn)
        return stage

    def map_using_service_async(
        self,
        factory: service_mod.ServiceFactory[Any, V],
        fn: Callable[[V, T], Any],
        max_concurrent_ops: int = 4,
        preserve_order: bool = True,
    ) -> StreamStage[Any]:
        """``fn(service, item)`` returns a coroutine or a future; at most ``max_concurrent_ops`` in flight."""
        stage: StreamStage[Any] = super().map_using_service_async(
            factory, fn, max_concurrent_ops, preserve_order
        )
        return stage

    def hash_join(
        self, build: BatchStage[Any], clause: JoinClause, map_to_output: Callable[[T, Any], R]
    ) -> StreamStage[R]:
        """Enrich each item with the ``build`` stage's matching item (None where none matches)."""
        stage: StreamStage[R] = super().hash_join(build, clause, map_to_output)
        return stage

    def inner_hash_join(
        self, build: BatchStage[Any], clause: JoinClause, map_to_output: Callable[[T, Any], R]
    ) -> StreamStage[R]:
        """Like :meth:`hash_join`, but items without a match are dropped."""
        stage: StreamStage[R] = super().inner_hash_join(build, clause, map_to_output)
        return stage

    def hash_join2(
        self,
        build1: BatchStage[Any],
        clause1: JoinClause,
        build2: BatchStage[Any],
        clause2: JoinClause,
        map_to_output: Callable[[T, Any, Any], R],
    ) -> StreamStage[R]:
        """Join two build stages at once: ``map_to_output(item, match1, match2)``."""
        stage: StreamStage[R] = super().hash_join2(build1, clause1, build2, clause2, map_to_output)
        return stage

    def grouping_key(self, key_fn: Callable[[T], K]) -> StreamStageWithKey[T, K]:
        """Group by ``key_fn(item)`` for keyed state, services and windows."""
        _check_callable(key_fn, self.name, "the grouping key function")
        return StreamStageWithKey(self, key_fn)

    def window(self, definition: window_mod.WindowDefinition) -> StageWithWindow[T]:
        """Cut the stream into event-time windows (needs timestamps)."""
        _check_window(self, definition)
        return StageWithWindow(self, definition, None)

    def aggregate_batch_windows(
        self,
        definition: window_mod.WindowDefinition,
        key: str,
        op: str = "count",
        value: str | None = None,
        name: str | None = None,
    ) -> StreamStage[Any]:
        """Record-batch path: per tumbling or sliding window, ``op`` of column ``value`` per ``key``.

        The items are :class:`~jetlet.batches.ColumnBatch` es with a timestamp column; ``op`` is
        ``"count"`` (rows, no ``value``), ``"sum"``, ``"min"`` or ``"max"``. Each row falls in the
        windows of its own timestamp. Each window gives one ``WindowResult(start, end, batch)`` with
        ``batch`` the columns ``key`` (ascending) and ``name`` (default: ``op``), vectorised with numpy
        (see :mod:`jetlet.batches.windows`; needs numpy). Example: bids per auction every second over
        10 s, ``bids.aggregate_batch_windows(WindowDefinition.sliding(10_000, 1_000), "auction")``.
        """
        _check_window(self, definition)
        from jetlet.batches import windows as batch_windows  # numpy is imported only when used

        spec = batch_windows.window_spec(definition, key, op, value, name)
        stage: StreamStage[Any] = self._derive(
            batch_windows.BatchWindowTransform(self._transform, definition, spec)
        )
        return stage


def _check_window(stage: GeneralStage[Any], definition: object) -> None:
    if not isinstance(definition, window_mod.WindowDefinition):
        raise TypeError(f"stage {stage.name!r}: window() needs a WindowDefinition, got {definition!r}")
    if not stage._timestamped:
        raise ValueError(
            f"stage {stage.name!r} has no timestamps, so it cannot be windowed: call "
            "with_timestamps(fn, lag), with_native_timestamps(lag) or with_ingestion_timestamps() "
            "on the source stage"
        )


class StreamStageWithKey(GeneralStageWithKey[T, K]):
    """A stream stage grouped by a key."""

    _stage: StreamStage[T]

    def __init__(self, stage: StreamStage[T], key_fn: Callable[[T], K]) -> None:
        super().__init__(stage, key_fn)

    def window(self, definition: window_mod.WindowDefinition) -> StageWithWindow[T]:
        """Per key, cut the stream into event-time windows."""
        _check_window(self._stage, definition)
        return StageWithWindow(self._stage, definition, self.key_fn)


class StageWithWindow(Generic[T]):
    """A windowed stream stage, global or per key (Jet's ``StageWithWindow``/``StageWithKeyAndWindow``).

    Results are :class:`~jetlet.datamodel.WindowResult` (global) or
    :class:`~jetlet.datamodel.KeyedWindowResult` (per key), with the window's
    start and end; downstream their timestamp is the window's end.
    """

    def __init__(
        self,
        stage: StreamStage[T],
        definition: window_mod.WindowDefinition,
        key_fn: Callable[[T], Hashable] | None,
    ) -> None:
        self._stage = stage
        self.definition = definition
        self.key_fn = key_fn

    def aggregate(self, op: agg.AggregateOperation[Any, R]) -> StreamStage[Any]:
        """Per window (and key), the result of ``op``."""
        return self._aggregate([self], [op], single=True)

    def aggregate2(
        self,
        op0: agg.AggregateOperation[Any, Any],
        stage1: StreamStage[Any] | StreamStageWithKey[Any, Any],
        op1: agg.AggregateOperation[Any, Any],
    ) -> StreamStage[Any]:
        """Co-aggregate with ``stage1`` in the same windows: results ``(result0, result1)``."""
        return self._aggregate([self, self._peer(stage1)], [op0, op1])

    def aggregate3(
        self,
        op0: agg.AggregateOperation[Any, Any],
        stage1: StreamStage[Any] | StreamStageWithKey[Any, Any],
        op1: agg.AggregateOperation[Any, Any],
        stage2: StreamStage[Any] | StreamStageWithKey[Any, Any],
        op2: agg.AggregateOperation[Any, Any],
    ) -> StreamStage[Any]:
        """Co-aggregate three streams in the same windows: ``(result0, result1, result2)``."""
        return self._aggregate([self, self._peer(stage1), self._peer(stage2)], [op0, op1, op2])

    def distinct(self) -> StreamStage[T]:
        """The distinct items of each window (per key: the first item of each key)."""
        key_fn = self.key_fn
        windowed = self if key_fn is not None else StageWithWindow(self._stage, self.definition, _identity)
        results = windowed._aggregate([windowed], [_FIRST], single=True, keyed_output=True)
        stage: StreamStage[T] = results.map(_result_of)
        return stage

    def _peer(self, other: StreamStage[Any] | StreamStageWithKey[Any, Any]) -> StageWithWindow[Any]:
        if isinstance(other, StreamStageWithKey):
            if self.key_fn is None:
                raise TypeError("aggregate2/3 of a global window takes stream stages without a grouping key")
            return StageWithWindow(other._stage, self.definition, other.key_fn)
        if self.key_fn is not None:
            raise TypeError("aggregate2/3 of a keyed window takes stages grouped by a key (grouping_key)")
        if not isinstance(other, StreamStage):
            raise TypeError(f"expected a stream stage, got {other!r}")
        _check_window(other, self.definition)
        return StageWithWindow(other, self.definition, None)

    def _aggregate(
        self,
        inputs: list[StageWithWindow[Any]],
        ops_: list[agg.AggregateOperation[Any, Any]],
        single: bool = False,
        keyed_output: bool = False,
    ) -> StreamStage[Any]:
        stage = self._stage
        for other in inputs:
            if other._stage._pipeline is not stage._pipeline:
                raise ValueError(f"stage {stage.name!r}: co-aggregated stages must be in one pipeline")
        op = ops_[0] if single else builder.co_aggregate(ops_, tuple)
        if not isinstance(op, agg.AggregateOperation):
            raise TypeError(f"stage {stage.name!r}: aggregate needs an AggregateOperation, got {op!r}")
        keyed = self.key_fn is not None or keyed_output
        key_fns = [other.key_fn for other in inputs] if keyed else None
        transform = tf.WindowAggregateTransform(
            [other._stage._transform for other in inputs],
            key_fns,  # type: ignore[arg-type]
            self.definition,
            op,
        )
        result: StreamStage[Any] = stage._derive(transform)
        return result


def _result_of(window_result: Any) -> Any:
    return window_result.result


class HashJoinBuilder:
    """Joins any number of build stages to one probe stage (Jet's ``HashJoinBuilder``)."""

    def __init__(self, probe: GeneralStage[Any]) -> None:
        self._probe = probe
        self._builds: list[BatchStage[Any]] = []
        self._clauses: list[JoinClause] = []

    def add(self, build: BatchStage[Any], clause: JoinClause) -> builder.Tag[Any]:
        """Add a build stage and how it joins; its matches come under the returned tag."""
        self._builds.append(build)
        self._clauses.append(clause)
        return builder.Tag(len(self._builds) - 1)

    def build(self, map_to_output: Callable[[Any, builder.ItemsByTag], Any]) -> Any:
        """The joined stage: ``map_to_output(item, ItemsByTag)`` per probe item."""
        if not self._builds:
            raise ValueError(f"stage {self._probe.name!r}: hash_join_builder needs at least one add()")

        def to_output(item: Any, *matches: Any) -> Any:
            return map_to_output(item, builder.ItemsByTag(matches))

        return self._probe._hash_join(self._builds, self._clauses, to_output, inner=False)


class StreamSourceStage(Generic[T]):
    """A stream source just read: say how its items get timestamps (Jet's ``StreamSourceStage``).

    A source that *emits events* (a timestamped ``SourceBuilder`` source)
    already produces ``(timestamp, item)`` pairs: its native timestamps are
    kept as they are, and any other choice first unwraps the items.
    """

    def __init__(
        self,
        pipeline: pipeline_mod.Pipeline,
        transform: tf.Transform,
        native_timestamps: Callable[[T], int] | None,
        emits_events: bool = False,
    ) -> None:
        self._pipeline = pipeline
        self._transform = transform
        self._native = native_timestamps
        self._emits_events = emits_events

    def with_timestamps(self, timestamp_fn: Callable[[T], int], allowed_lag: int) -> StreamStage[T]:
        """Event time from ``timestamp_fn(item)``; items may arrive up to ``allowed_lag`` late."""
        _check_callable(timestamp_fn, self._transform.name, "the timestamp function")
        return self._timestamped(self._items(), timestamp_fn, allowed_lag, tf.WRAP_AS_EVENT)

    def with_native_timestamps(self, allowed_lag: int) -> StreamStage[T]:
        """Event time as the source itself assigns it."""
        if self._native is None:
            raise ValueError(
                f"source {self._transform.name!r} has no native timestamps; use with_timestamps(fn, lag) "
                "or with_ingestion_timestamps()"
            )
        if self._emits_events:
            return self._timestamped(self._transform, self._native, allowed_lag, None)
        return self.with_timestamps(self._native, allowed_lag)

    def with_ingestion_timestamps(self) -> StreamStage[T]:
        """Event time = the wall-clock time (ms) when the item enters the pipeline."""
        return self.with_timestamps(_now_millis, 0)

    def without_timestamps(self) -> StreamStage[T]:
        """No event time: windows are not available downstream."""
        return StreamStage(self._pipeline, self._items(), timestamped=False)

    def _items(self) -> tf.Transform:
        """The source's bare items (unwrapped from events for a source that emits events)."""
        if not self._emits_events:
            return self._transform
        unwrap = tf.StatelessTransform.map(self._transform, _event_item, timestamped=False)
        self._pipeline._connect(unwrap)
        return unwrap

    def _timestamped(
        self,
        upstream: tf.Transform,
        timestamp_fn: Callable[[Any], int],
        allowed_lag: int,
        wrap_fn: Callable[[Any, int], Any] | None,
    ) -> StreamStage[T]:
        if not isinstance(allowed_lag, int) or allowed_lag < 0:
            raise ValueError(
                f"stage {self._transform.name!r}: allowed_lag must be an int >= 0, got {allowed_lag!r}"
            )
        transform = tf.TimestampTransform(upstream, timestamp_fn, allowed_lag, wrap_fn)
        transform.user_fns = [timestamp_fn]
        self._pipeline._connect(transform)
        return StreamStage(self._pipeline, transform, timestamped=True)


def _event_item(event: tuple[int, Any]) -> Any:
    return event[1]


def _now_millis(_item: Any) -> int:
    return time.time_ns() // 1_000_000


class SinkStage:
    """The end of a branch: a sink."""

    def __init__(self, transform: tf.SinkTransform) -> None:
        self._transform = transform

    @property
    def name(self) -> str:
        return self._transform.name

    def set_local_parallelism(self, local_parallelism: int) -> SinkStage:
        self._transform.local_parallelism = local_parallelism
        return self

    def set_name(self, name: str) -> SinkStage:
        self._transform.name = name
        return self
