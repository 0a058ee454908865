"""The fusion pass: chains of stateless transforms become one vertex.

Two neighbouring stateless transforms ``a -> b`` fuse when ``a`` has exactly
one consumer (``b``), ``b`` has exactly one input (``a``), their local
parallelism is the same, and ``a`` is not rebalanced. Fusing removes a queue
hop per item and lets the chain run over each batch in one go; the vertex is
named like Jet's, ``fused(map, filter)``.
"""

from __future__ import annotations

from jetlet._planner import graph as graph_mod
from jetlet._planner import transforms as tf
from jetlet._planner.graph import Graph, Upstream


def _fusible(a: tf.Transform, b: tf.Transform, graph: Graph, upstream: Upstream) -> bool:
    return (
        isinstance(a, tf.StatelessTransform)
        and isinstance(b, tf.StatelessTransform)
        and graph[a] == [b]
        and upstream[b] == [a]
        and a.local_parallelism == b.local_parallelism
        and (not a.rebalance or a.forward)
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
    return graph_mod.replaced(graph, upstream, replacement)
