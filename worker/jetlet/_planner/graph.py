"""The planner's graph of transforms, and how a pass replaces groups of them by one.

A pass (fusion, the event-time pass) decides which transforms become one and hands
:func:`replaced` a map from each of them to its replacement; the graph and upstream map are
rewritten without touching the pipeline's own transforms, so a pipeline can be planned any number
of times.
"""

from __future__ import annotations

from collections.abc import Callable

from jetlet._planner import transforms as tf

Graph = dict[tf.Transform, list[tf.Transform]]
"""Each transform's downstream transforms."""
Upstream = dict[tf.Transform, list[tf.Transform]]
"""Each transform's upstream transforms, in input-ordinal order."""


def replaced(
    graph: Graph, upstream: Upstream, replacement: dict[tf.Transform, tf.Transform]
) -> tuple[Graph, Upstream]:
    """A new graph and upstream map where every key of ``replacement`` is its value.

    The transforms replaced by one node are a chain: the edges between them disappear, the node
    takes the downstream of all of them and the upstream of the first (in the graph's order).
    """
    if not replacement:
        return graph, upstream
    new_graph: Graph = {}
    new_upstream: Upstream = {}
    for transform, downstream in graph.items():
        node = replacement.get(transform, transform)
        targets = [replacement.get(d, d) for d in downstream]
        existing = new_graph.setdefault(node, [])
        existing.extend(t for t in targets if t is not node and t not in existing)
        inputs = [replacement.get(u, u) for u in upstream[transform]]
        if node is transform or node not in new_upstream:
            new_upstream[node] = [u for u in inputs if u is not node]
    return new_graph, new_upstream


def merged_into_sources(
    graph: Graph,
    upstream: Upstream,
    merge: Callable[[tf.Transform, tf.SourceTransform], tf.SourceTransform | None],
) -> tuple[Graph, Upstream]:
    """A new graph (and upstream map) in which every stage with a :func:`sole_source` for which
    ``merge(stage, source)`` gives a source is replaced, with its source, by that source. The
    pipeline's own transforms are not modified, so a pipeline can be planned any number of times."""
    replacement: dict[tf.Transform, tf.Transform] = {}
    for stage in sorted(graph):
        source = sole_source(stage, graph, upstream)
        merged = None if source is None else merge(stage, source)
        if source is not None and merged is not None:
            replacement[source] = replacement[stage] = merged
    return replaced(graph, upstream, replacement)


def sole_source(stage: tf.Transform, graph: Graph, upstream: Upstream) -> tf.SourceTransform | None:
    """The source ``stage`` reads alone, when the two could run as one vertex: ``stage`` has that one
    input, is its only consumer, has its parallelism (or inherits it), and the source is not
    rebalanced (but forwarded: processor ``i`` feeds processor ``i``, as in one vertex). None otherwise."""
    if len(upstream[stage]) != 1:
        return None
    source = upstream[stage][0]
    if (
        isinstance(source, tf.SourceTransform)
        and graph[source] == [stage]
        and (not source.rebalance or source.forward)
        and stage.local_parallelism in (-1, source.local_parallelism)
    ):
        return source
    return None
