"""The source-chain pass: the stateless stages right after a source run inside it (Flink's chaining).

After fusion, a chain of ``map``/``filter``/``flat_map``/``peek`` stages is one vertex, but it is
still a vertex of its own: every item the source emits crosses a queue (an offer, a poll, an inbox)
and the chain's processor is called for each batch. When a source had its event-time policy
planned into it (:mod:`jetlet._planner.source_event_time`; it then offers ``step_supplier``) and
its only consumer is a stateless stage (or a fused chain of them) with the source's parallelism
and no rebalance between them, this pass replaces the pair by one ``SourceTransform`` whose
processors run the chain's batch step over each batch they fill, after the event-time policy:
late items are dropped first, and watermarks pass by the step in place. Flink chains a source
with the operators after it the same way; Jet fuses stateless stages with each other only.

The vertex keeps the source's name. What leaves it is what left the chain; its ``emittedCount``
counts that, and the source's own metric :data:`~jetlet.core.processors.sources.READ_METRIC`
counts the items it read. A snapshot is unchanged: the chain is stateless, and the source emits
everything pending (the chain's outputs) before it saves its position.
"""

from __future__ import annotations

from jetlet._planner import graph as graph_mod
from jetlet._planner import transforms as tf
from jetlet._planner.graph import Graph, Upstream


def into_sources(graph: Graph, upstream: Upstream) -> tuple[Graph, Upstream]:
    """Return a new graph (and upstream map) with every plannable stateless stage in its source."""

    def merge(stage: tf.Transform, source: tf.SourceTransform) -> tf.SourceTransform | None:
        if (
            not isinstance(stage, (tf.StatelessTransform, tf.FusedTransform))
            or stage.takes_batches
            or source.step_supplier is None
        ):
            return None
        return source.planned_with(stage, source.step_supplier(stage.step))

    return graph_mod.merged_into_sources(graph, upstream, merge)
