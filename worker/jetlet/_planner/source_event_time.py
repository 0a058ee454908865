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

import functools

from jetlet._planner import graph as graph_mod
from jetlet._planner import transforms as tf
from jetlet._planner.graph import Graph, Upstream


def into_sources(graph: Graph, upstream: Upstream, watermark_stride: int) -> tuple[Graph, Upstream]:
    """Return a new graph (and upstream map) with every plannable timestamp stage in its source."""

    def merge(stamps: tf.Transform, source: tf.SourceTransform) -> tf.SourceTransform | None:
        if not isinstance(stamps, tf.TimestampTransform) or source.event_time_supplier is None:
            return None
        policy = stamps.policy(watermark_stride)
        merged = source.planned_with(stamps, source.event_time_supplier(policy))
        merged.step_supplier = functools.partial(source.event_time_supplier, policy)
        return merged

    return graph_mod.merged_into_sources(graph, upstream, merge)
