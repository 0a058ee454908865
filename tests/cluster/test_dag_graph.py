"""A job's DAG as JSON: read back from the DOT its record keeps, equal to the DAG it was written from."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

import jetlet
from jetlet import client, config
from jetlet._cluster import dag_graph, job_service, rest
from jetlet.core import DAG, Edge, processors

TOKEN = "dag-graph-test-token"


def _reference(dag: DAG) -> dict[str, list[dict[str, Any]]]:
    """The JSON the console expects, straight from the DAG object (not through DOT)."""
    return {
        "vertices": [
            {"name": v.name, "local_parallelism": None if v.local_parallelism == -1 else v.local_parallelism}
            for v in dag.vertices()
        ],
        "edges": [
            {
                "source": e.source_name,
                "source_ordinal": e.source_ordinal,
                "destination": e.dest_name,
                "destination_ordinal": e.dest_ordinal,
                "routing": e.routing_policy.value,
                "distributed": e.is_distributed,
                "priority": e.priority_value,
                "queue_size": None if e.config is None else e.config.queue_size,
            }
            for e in dag.edges()
        ],
    }


def _rich_dag() -> DAG:
    """Every routing, distributed edges, ordinals, a priority, an edge config, awkward names."""
    dag = DAG()
    source = dag.new_vertex("source", processors.source_from_iterable([1, 2]), 1)
    odd = dag.new_vertex('say "hi" \\ -> there', processors.map_p(str))
    side = dag.new_vertex("side", processors.map_p(str), 3)
    join = dag.new_vertex("join", processors.map_p(str))
    sink = dag.new_vertex("sink", processors.noop_p())
    dag.edge(Edge.from_vertex(source, 0).to(odd).partitioned(str).distributed())
    dag.edge(Edge.from_vertex(source, 1).to(side).broadcast().distributed().priority(-1))
    dag.edge(Edge.between(odd, join).isolated())
    dag.edge(Edge.from_vertex(side).to(join, 1).all_to_one().set_config(config.EdgeConfig(queue_size=64)))
    dag.edge(Edge.between(join, sink))
    return dag


def test_given_a_dag_with_every_kind_of_edge_when_read_from_its_dot_then_it_equals_the_dag() -> None:
    dag = _rich_dag()
    assert dag_graph.from_dot(dag.to_dot()) == _reference(dag)


def test_given_a_one_vertex_dag_then_no_edges() -> None:
    dag = DAG()
    dag.new_vertex("only", processors.source_from_iterable([]))
    assert dag_graph.from_dot(dag.to_dot()) == {
        "vertices": [{"name": "only", "local_parallelism": None}],
        "edges": [],
    }


def test_given_a_line_it_does_not_know_then_it_says_which() -> None:
    with pytest.raises(ValueError, match="rankdir=LR"):
        dag_graph.from_dot("digraph DAG {\n\trankdir=LR;\n}")


def test_given_a_submitted_job_when_asking_rest_for_its_dag_then_the_json_of_its_dag() -> None:
    service = job_service.EmbeddedJobService(jetlet.embedded())
    server = rest.RestServer(rest.create_app(service, dict, TOKEN))
    host, port = server.start("127.0.0.1", 0)
    try:
        dag = DAG()
        source = dag.new_vertex("numbers", processors.source_from_iterable(range(3)))
        sink = dag.new_vertex("drop", processors.noop_p(), 2)
        dag.edge(Edge.between(source, sink).partitioned(str))
        job = client.connect(f"{host}:{port}", TOKEN).new_job(dag)
        request = urllib.request.Request(
            f"http://{host}:{port}/jobs/{job.id}/dag", headers={"Authorization": f"Bearer {TOKEN}"}
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert json.loads(answer.read()) == _reference(dag)
        job.join()
    finally:
        server.stop()
        service.close()
