"""Pipeline stages: the typed, fluent face of the pipeline graph.

Every call on a stage adds a transform to the pipeline and returns a new
stage for its output; nothing runs until the pipeline is submitted. Stages
are generic in their item type, so ``BatchStage[str].map(len)`` is a
``BatchStage[int]`` to a type checker.

Stream stages after ``with_timestamps`` carry ``(timestamp, item)`` events
internally; every user function still receives and returns bare items.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar

from jetlet._planner import transforms as tf
from jetlet.aggregate import operation as agg
from jetlet.pipeline import sinks as sinks_mod

if TYPE_CHECKING:
    from jetlet.pipeline import pipeline as pipeline_mod

T = TypeVar("T")
R = TypeVar("R")
K = TypeVar("K", bound=Hashable)


def _always(_item: Any) -> bool:
    return True


def _entry(key: Any, value: Any) -> tuple[Any, Any]:
    return (key, value)


def _check_callable(fn: object, stage: str, what: str) -> None:
    if not callable(fn):
        raise TypeError(f"stage {stage!r}: {what} must be callable, got {fn!r}")


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

    def _derive(self, transform: tf.Transform) -> Any:
        self._pipeline._connect(transform)
        return type(self)(self._pipeline, transform, self._timestamped)

    def _map(self, fn: Callable[[Any], Any]) -> Any:
        _check_callable(fn, self.name, "the map function")
        return self._derive(tf.StatelessTransform.map(self._transform, fn, self._timestamped))

    def _flat_map(self, fn: Callable[[Any], Iterable[Any] | None]) -> Any:
        _check_callable(fn, self.name, "the flat_map function")
        return self._derive(tf.StatelessTransform.flat_map(self._transform, fn, self._timestamped))

    def filter(self, predicate: Callable[[T], bool]) -> Self:
        """Keep the items for which ``predicate`` is true."""
        _check_callable(predicate, self.name, "the filter predicate")
        derived: Self = self._derive(
            tf.StatelessTransform.filter(self._transform, predicate, self._timestamped)
        )
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
        if key_fn is not None:
            self._transform.rebalance_key = (lambda e: key_fn(e[1])) if self._timestamped else key_fn
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

    def custom_transform(self, name: str, supplier: object) -> Self:
        """Your own processor (a Core API supplier) as the next stage."""
        derived: Self = self._derive(tf.CustomTransform(name, [self._transform], supplier))
        return derived

    def apply(self, fn: Callable[[Self], R]) -> R:
        """``fn(self)``: reuse a chain of stages written as a function."""
        return fn(self)

    def write_to(self, sink: sinks_mod.Sink[Any]) -> SinkStage:
        """Send this stage's items to ``sink``."""
        return self._pipeline.write_to(sink, self)

    def _bare(self) -> tf.Transform:
        """This stage's transform, unwrapping events for consumers that take bare items."""
        if not self._timestamped:
            return self._transform
        unwrap = tf.StatelessTransform("map", self._transform, lambda batch: [item for _, item in batch])
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


def _identity(item: Any) -> Any:
    return item


class BatchStageWithKey(Generic[T, K]):
    """A batch stage grouped by a key: aggregate or deduplicate per key."""

    def __init__(self, stage: BatchStage[T], key_fn: Callable[[T], K]) -> None:
        self._stage = stage
        self.key_fn = key_fn

    def aggregate(
        self, op: agg.AggregateOperation[Any, R], map_to_output: Callable[[K, R], Any] = _entry
    ) -> BatchStage[Any]:
        """Per key, the result of ``op``: ``(key, result)`` tuples by default."""
        stage = self._stage
        transform = tf.GroupAggregateTransform([stage._transform], [self.key_fn], op, map_to_output)
        result: BatchStage[Any] = stage._derive(transform)
        return result

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
