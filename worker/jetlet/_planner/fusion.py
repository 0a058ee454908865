"""The fusion pass: chains of stateless transforms become one vertex.

Two neighbouring stateless transforms ``a -> b`` fuse when ``a`` has exactly
one consumer (``b``), ``b`` has exactly one input (``a``), their local
parallelism is the same, and ``a`` is not rebalanced. Fusing removes a queue
hop per item and lets the chain run over each batch in one go; the vertex is
named like Jet's, ``fused(map, filter)``.
"""

from __future__ import annotations

from jetlet._planner import transforms as tf

Graph = dict[tf.Transform, list[tf.Transform]]
"""Each transform's downstream transforms."""
Upstream = dict[tf.Transform, list[tf.Transform]]
"""Each transform's upstream transforms, in input-ordinal order."""


def _fusible(a: tf.Transform, b: tf.Transform, graph: Graph, upstream: Upstream) -> bool:
    return (
        isinstance(a, tf.StatelessTransform)
        and isinstance(b, tf.StatelessTransform)
        and graph[a] == [b]
        and upstream[b] == [a]
        and a.local_parallelism == b.local_parallelism
        and not a.rebalance
    )


def fuse(graph: Graph, upstream: Upstream) -> tuple[Graph, Upstream]:
    """Return a new graph (and upstream map) where each maximal fusible chain is one ``FusedTransform``.

    The pipeline's own transforms are not modified, so a pipeline can be
    planned any number of times.
    """
    replacement: dict[tf.Transform, tf.Transform] = {}
    for head in sorted(graph):
        if head in replacement or not isinstance(head, tf.StatelessTransform):
            continue
        if upstream[head] and _fusible(upstream[head][0], head, graph, upstream):
            continue  # not the head of its chain
        chain: list[tf.StatelessTransform] = [head]
        while len(graph[chain[-1]]) == 1:
            following = graph[chain[-1]][0]
            if not isinstance(following, tf.StatelessTransform) or not _fusible(
                chain[-1], following, graph, upstream
            ):
                break
            chain.append(following)
        if len(chain) > 1:
            fused = tf.FusedTransform(chain)
            for part in chain:
                replacement[part] = fused
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
