"""The Pipeline: a graph of stages that the planner turns into a Core DAG.

>>> from jetlet.pipeline import Pipeline, Sources, Sinks
>>> out = []
>>> p = Pipeline()
>>> p.read_from(Sources.items(1, 2, 3)).map(lambda x: x * 10).write_to(Sinks.to_list(out))
SinkStage('listSink')
>>> print(p.to_dot())
digraph DAG {
        "items" [localParallelism=default];
        "map" [localParallelism=default];
        "listSink" [localParallelism=default];
        "items" -> "map" [label="unicast"];
        "map" -> "listSink" [label="unicast"];
}
"""

from __future__ import annotations

from typing import Any, TypeVar, overload

from jetlet._planner import planner as planner_mod
from jetlet._planner import transforms as tf
from jetlet.core import dag as dag_mod
from jetlet.pipeline import sinks as sinks_mod
from jetlet.pipeline import sources as sources_mod
from jetlet.pipeline import stages

T = TypeVar("T")


class Pipeline:
    """A pipeline under construction; submit it with ``instance.new_job(pipeline)``."""

    def __init__(self) -> None:
        self._graph: dict[tf.Transform, list[tf.Transform]] = {}
        self._preserve_order = False

    @staticmethod
    def create() -> Pipeline:
        return Pipeline()

    @overload
    def read_from(self, source: sources_mod.BatchSource[T]) -> stages.BatchStage[T]: ...

    @overload
    def read_from(self, source: sources_mod.StreamSource[T]) -> stages.StreamSourceStage[T]: ...

    def read_from(self, source: Any) -> Any:
        """Start a branch at ``source``."""
        if isinstance(source, sources_mod.BatchSource):
            transform = tf.SourceTransform(source.name, source.supplier)
            self._connect(transform)
            return stages.BatchStage(self, transform)
        if isinstance(source, sources_mod.StreamSource):
            transform = tf.SourceTransform(source.name, source.supplier, source.event_time_supplier)
            self._connect(transform)
            return stages.StreamSourceStage(self, transform, source.native_timestamps, source.emits_events)
        raise TypeError(f"read_from needs a BatchSource or a StreamSource, got {type(source).__qualname__}")

    def write_to(self, sink: sinks_mod.Sink[Any], *stages_: stages.GeneralStage[Any]) -> stages.SinkStage:
        """End the given stages at one sink (several stages merge into it)."""
        if not isinstance(sink, sinks_mod.Sink):
            raise TypeError(f"write_to needs a Sink, got {type(sink).__qualname__}")
        if not stages_:
            raise ValueError("write_to needs at least one stage")
        transform = tf.SinkTransform(
            sink.name, [s._bare() for s in stages_], sink.supplier, sink.single_processor
        )
        self._connect(transform)
        return stages.SinkStage(transform)

    def set_preserve_order(self, value: bool) -> Pipeline:
        """Keep each source lane's order through stateless stages (isolated edges)."""
        self._preserve_order = bool(value)
        return self

    def is_preserve_order(self) -> bool:
        return self._preserve_order

    def _connect(self, transform: tf.Transform) -> None:
        self._graph.setdefault(transform, [])
        for upstream in transform.upstream:
            self._graph[upstream].append(transform)

    def to_dag(self) -> dag_mod.DAG:
        """Plan the pipeline into a Core DAG (a new DAG each time)."""
        if not self._graph:
            raise planner_mod.PlanningError("the pipeline is empty: start it with read_from(source)")
        return planner_mod.plan(self._graph, self._preserve_order)

    def to_dot(self) -> str:
        """The planned DAG in Graphviz DOT."""
        return self.to_dag().to_dot()

    def __repr__(self) -> str:
        return f"Pipeline({len(self._graph)} transforms)"
