"""The event-time pass: a stage's timestamps planned into its source (as Jet plans them).

``read_from(source).with_native_timestamps(lag)`` (or ``with_timestamps``) adds a
``TimestampTransform``, which by itself becomes an ``add-timestamps`` vertex that timestamps the
source's items and inserts watermarks: one more processor, and one more queue hop for every item.
When the source can take the event-time policy itself (its ``StreamSource.event_time_supplier``,
e.g. a ``SourceBuilder`` timestamped stream) and the timestamp stage is the source's only
consumer, with the source's parallelism, this pass replaces the pair by one ``SourceTransform``
whose processors run the policy over each batch they fill: they drop late items, emit the
watermarks and the idle message themselves, and save the policy's state in their snapshots. The
vertex keeps the source's name; what leaves it is what left ``add-timestamps``.
"""

from __future__ import annotations

from jetlet._planner import graph as graph_mod
from jetlet._planner import transforms as tf
from jetlet._planner.graph import Graph, Upstream


def _plannable(stamps: tf.Transform, graph: Graph, upstream: Upstream) -> tf.SourceTransform | None:
    """The source ``stamps`` can be planned into, or None."""
    if not isinstance(stamps, tf.TimestampTransform) or len(upstream[stamps]) != 1:
        return None
    source = upstream[stamps][0]
    if (
        isinstance(source, tf.SourceTransform)
        and source.event_time_supplier is not None
        and graph[source] == [stamps]
        and not source.rebalance
        and stamps.local_parallelism in (-1, source.local_parallelism)
    ):
        return source
    return None


def into_sources(graph: Graph, upstream: Upstream, watermark_stride: int) -> tuple[Graph, Upstream]:
    """Return a new graph (and upstream map) with every plannable timestamp stage in its source.

    The pipeline's own transforms are not modified, so a pipeline can be planned any number of times.
    """
    replacement: dict[tf.Transform, tf.Transform] = {}
    for stamps in sorted(graph):
        source = _plannable(stamps, graph, upstream)
        if source is None:
            continue
        assert isinstance(stamps, tf.TimestampTransform) and source.event_time_supplier is not None
        merged = tf.SourceTransform(source.name, source.event_time_supplier(stamps.policy(watermark_stride)))
        merged.sequence = source.sequence  # the source's place in the planning order (vertex names)
        merged.local_parallelism = source.local_parallelism
        merged.rebalance, merged.rebalance_key = stamps.rebalance, stamps.rebalance_key
        replacement[source] = replacement[stamps] = merged
    return graph_mod.replaced(graph, upstream, replacement)
