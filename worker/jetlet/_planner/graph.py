"""The planner's graph of transforms, and how a pass replaces groups of them by one.

A pass (fusion, the event-time pass) decides which transforms become one and hands
:func:`replaced` a map from each of them to its replacement; the graph and upstream map are
rewritten without touching the pipeline's own transforms, so a pipeline can be planned any number
of times.
"""

from __future__ import annotations

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
