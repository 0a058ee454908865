"""The DAG: vertices (what to compute) connected by edges (how data flows).

Build one with :meth:`DAG.new_vertex` and :meth:`DAG.edge`; the engine runs a
copy of the whole DAG on every member. Mistakes that can be seen early are
refused when made (a duplicate vertex name, a second edge between the same
pair, a taken ordinal); the rest when the DAG is validated, which happens on
iteration and on submission: cycles, gaps in a vertex's ordinals, and edges
to vertices that are not in the DAG. Every error names the vertex or edge.

>>> from jetlet.core import processors
>>> dag = DAG()
>>> src = dag.new_vertex("source", processors.source_from_iterable(["a b", "b"]))
>>> words = dag.new_vertex("words", processors.flat_map_p(str.split))
>>> _ = dag.edge(Edge.between(src, words))
>>> [v.name for v in dag]
['source', 'words']
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from jetlet.core import edge as edge_mod
from jetlet.core import processor as proc

Edge = edge_mod.Edge


class DagValidationError(ValueError):
    """The DAG is malformed; the message names the vertex or edge at fault."""


class Vertex:
    """A named step of the DAG whose processors a supplier makes."""

    def __init__(self, name: str, supplier: object, local_parallelism: int = -1) -> None:
        if not isinstance(name, str) or not name:
            raise DagValidationError(f"a vertex name must be a non-empty string, got {name!r}")
        self.name = name
        self.meta_supplier = proc.as_meta_supplier(supplier, f"vertex {name!r}")
        self.local_parallelism = -1
        self.set_local_parallelism(local_parallelism)

    def set_local_parallelism(self, value: int) -> Vertex:
        """Processors of this vertex on each member; -1 means the default."""
        if not isinstance(value, int) or isinstance(value, bool) or (value < 1 and value != -1):
            raise DagValidationError(
                f"vertex {self.name!r}: local_parallelism must be -1 (default) or >= 1, got {value!r}"
            )
        self.local_parallelism = value
        return self

    def __repr__(self) -> str:
        return f"Vertex({self.name!r}, local_parallelism={self.local_parallelism})"


class DAG:
    """A directed acyclic graph of vertices and edges (Jet's ``DAG``)."""

    def __init__(self) -> None:
        self._vertices: dict[str, Vertex] = {}
        self._edges: list[Edge] = []

    def new_vertex(self, name: str, supplier: object, local_parallelism: int = -1) -> Vertex:
        """Add a vertex; ``supplier`` is a ``ProcessorMetaSupplier``, a
        ``ProcessorSupplier``, or a zero-argument callable returning a ``Processor``."""
        return self.vertex(Vertex(name, supplier, local_parallelism))

    def vertex(self, vertex: Vertex) -> Vertex:
        """Add an existing vertex."""
        if vertex.name in self._vertices:
            raise DagValidationError(f"duplicate vertex name {vertex.name!r}: vertex names must be unique")
        self._vertices[vertex.name] = vertex
        return vertex

    def edge(self, edge: Edge) -> DAG:
        """Add an edge; returns the DAG so calls can be chained."""
        if edge.dest_name is None:
            raise DagValidationError(f"{edge} has no destination: finish it with .to(vertex)")
        for end in (edge.source_name, edge.dest_name):
            if end not in self._vertices:
                raise DagValidationError(f"{edge}: vertex {end!r} is not in this DAG; add it first")
        if edge.source_name == edge.dest_name:
            raise DagValidationError(
                f"{edge} connects vertex {edge.source_name!r} to itself: a DAG has no cycles"
            )
        for existing in self._edges:
            if existing.source_name == edge.source_name and existing.dest_name == edge.dest_name:
                raise DagValidationError(
                    f"{edge}: there is already an edge from {edge.source_name!r} to {edge.dest_name!r}"
                )
            if existing.source_name == edge.source_name and existing.source_ordinal == edge.source_ordinal:
                raise DagValidationError(
                    f"{edge}: output ordinal {edge.source_ordinal} of {edge.source_name!r} is already "
                    f"used by {existing}"
                )
            if existing.dest_name == edge.dest_name and existing.dest_ordinal == edge.dest_ordinal:
                raise DagValidationError(
                    f"{edge}: input ordinal {edge.dest_ordinal} of {edge.dest_name!r} is already "
                    f"used by {existing}"
                )
        self._edges.append(edge)
        return self

    def get_vertex(self, name: str) -> Vertex:
        try:
            return self._vertices[name]
        except KeyError:
            raise KeyError(f"no vertex named {name!r} in this DAG") from None

    def vertices(self) -> list[Vertex]:
        """Vertices in insertion order."""
        return list(self._vertices.values())

    def edges(self) -> list[Edge]:
        return list(self._edges)

    def inbound_edges(self, name: str) -> list[Edge]:
        """Edges into ``name``, sorted by input ordinal."""
        return sorted((e for e in self._edges if e.dest_name == name), key=lambda e: e.dest_ordinal)

    def outbound_edges(self, name: str) -> list[Edge]:
        """Edges out of ``name``, sorted by output ordinal."""
        return sorted((e for e in self._edges if e.source_name == name), key=lambda e: e.source_ordinal)

    def __iter__(self) -> Iterator[Vertex]:
        """Vertices in topological order (sources first); validates the DAG."""
        return iter(self.validate())

    def __len__(self) -> int:
        return len(self._vertices)

    def validate(self) -> list[Vertex]:
        """Check the whole DAG; return its vertices in topological order.

        Ties are broken by insertion order, so the order is deterministic.
        """
        if not self._vertices:
            raise DagValidationError("the DAG has no vertices")
        for vertex in self._vertices.values():
            for what, ordinals in (
                ("input", [e.dest_ordinal for e in self.inbound_edges(vertex.name)]),
                ("output", [e.source_ordinal for e in self.outbound_edges(vertex.name)]),
            ):
                if ordinals != list(range(len(ordinals))):
                    raise DagValidationError(
                        f"vertex {vertex.name!r}: {what} ordinals must be 0..{len(ordinals) - 1} "
                        f"without gaps, got {ordinals}"
                    )
        return self._topological_order()

    def _topological_order(self) -> list[Vertex]:
        position = {name: i for i, name in enumerate(self._vertices)}
        in_degree = dict.fromkeys(self._vertices, 0)
        for e in self._edges:
            in_degree[e.dest_name] += 1  # type: ignore[index]
        ready = [(position[name], name) for name, degree in in_degree.items() if degree == 0]
        heapq.heapify(ready)
        order: list[Vertex] = []
        while ready:
            _, name = heapq.heappop(ready)
            order.append(self._vertices[name])
            for e in self._edges:
                if e.source_name == name:
                    dest: str = e.dest_name  # type: ignore[assignment]
                    in_degree[dest] -= 1
                    if in_degree[dest] == 0:
                        heapq.heappush(ready, (position[dest], dest))
        if len(order) < len(self._vertices):
            stuck = sorted(name for name, degree in in_degree.items() if degree > 0)
            raise DagValidationError(f"the DAG has a cycle through vertices {stuck}")
        return order

    def to_dot(self) -> str:
        """The DAG in Graphviz DOT, like Jet's ``DAG.toDotString()``."""
        lines = ["digraph DAG {"]
        for vertex in self._vertices.values():
            parallelism = "default" if vertex.local_parallelism == -1 else str(vertex.local_parallelism)
            lines.append(f'\t"{_escape(vertex.name)}" [localParallelism={parallelism}];')
        for e in self._edges:
            attributes = [f'label="{e.describe()}"']
            if e.source_ordinal or len(self.outbound_edges(e.source_name)) > 1:
                attributes.append(f"taillabel={e.source_ordinal}")
            if e.dest_ordinal or len(self.inbound_edges(e.dest_name or "")) > 1:
                attributes.append(f"headlabel={e.dest_ordinal}")
            if e.config is not None:
                attributes.append(f"queueSize={e.config.queue_size}")
            if e.priority_value:
                attributes.append(f"priority={e.priority_value}")
            lines.append(
                f'\t"{_escape(e.source_name)}" -> "{_escape(e.dest_name or "")}" [{", ".join(attributes)}];'
            )
        lines.append("}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"DAG(vertices={list(self._vertices)}, edges={len(self._edges)})"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
