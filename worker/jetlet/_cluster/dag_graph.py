"""A job's DAG as JSON (vertices and edges), read from the DOT text its record keeps.

Theory of operation
-------------------
A job's record carries its DAG as Graphviz DOT (``dag_dot``, written once
at submission by :meth:`jetlet.core.dag.DAG.to_dot`, and kept in the
replicated job store, so records written before this module existed have
it too). The web console draws the DAG itself and needs it structurally:
:func:`from_dot` reads that DOT back into plain JSON values. It reads only
the lines ``to_dot`` writes, one per vertex and one per edge, with names
as DOT quoted strings (``\\"`` and ``\\\\`` escaped) and attributes as
``key=value`` pairs: a vertex's ``localParallelism`` (``default`` becomes
``None``), an edge's routing ``label`` (``partitioned-distributed`` is the
``partitioned`` policy over the network), its ordinals (``taillabel``,
``headlabel``, 0 when absent), ``queueSize`` and ``priority``. A line it
cannot read raises ``ValueError`` naming the line.

>>> graph = from_dot('digraph DAG {\\n\\t"a" [localParallelism=2];\\n\\t"b" [localParallelism=default];\\n'
...                  '\\t"a" -> "b" [label="partitioned-distributed", queueSize=64];\\n}')
>>> graph["vertices"]
[{'name': 'a', 'local_parallelism': 2}, {'name': 'b', 'local_parallelism': None}]
>>> edge = graph["edges"][0]
>>> (edge["routing"], edge["distributed"], edge["queue_size"], edge["destination_ordinal"])
('partitioned', True, 64, 0)
"""

from __future__ import annotations

import re
from typing import Any

_NAME = r'"((?:[^"\\]|\\.)*)"'
_VERTEX = re.compile(rf"^{_NAME} \[(.*)\];$")
_EDGE = re.compile(rf"^{_NAME} -> {_NAME} \[(.*)\];$")
_ATTRIBUTE = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|[^,\s]+)')
_UNESCAPE = re.compile(r"\\(.)")
_DISTRIBUTED = "-distributed"


def from_dot(dot: str) -> dict[str, list[dict[str, Any]]]:
    """``{"vertices": [...], "edges": [...]}`` of a DAG's DOT text, in the order the DOT lists them."""
    vertices: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    for raw in dot.splitlines():
        line = raw.strip()
        if not line or line in ("}", "digraph DAG {"):
            continue
        if edge := _EDGE.match(line):
            edges.append(_edge(_unquote(edge[1]), _unquote(edge[2]), _attributes(edge[3])))
        elif vertex := _VERTEX.match(line):
            parallelism = _attributes(vertex[2]).get("localParallelism", "default")
            vertices.append(
                {
                    "name": _unquote(vertex[1]),
                    "local_parallelism": None if parallelism == "default" else int(parallelism),
                }
            )
        else:
            raise ValueError(f"not a line of a jetlet DAG's DOT: {line!r}")
    return {"vertices": vertices, "edges": edges}


def _edge(source: str, destination: str, attributes: dict[str, str]) -> dict[str, Any]:
    label = attributes.get("label", "unicast")
    queue_size = attributes.get("queueSize")
    return {
        "source": source,
        "source_ordinal": int(attributes.get("taillabel", 0)),
        "destination": destination,
        "destination_ordinal": int(attributes.get("headlabel", 0)),
        "routing": label.removesuffix(_DISTRIBUTED),
        "distributed": label.endswith(_DISTRIBUTED),
        "priority": int(attributes.get("priority", 0)),
        "queue_size": None if queue_size is None else int(queue_size),
    }


def _attributes(text: str) -> dict[str, str]:
    return {
        key: _unquote(value[1:-1]) if value.startswith('"') else value
        for key, value in _ATTRIBUTE.findall(text)
    }


def _unquote(text: str) -> str:
    return _UNESCAPE.sub(r"\1", text)
