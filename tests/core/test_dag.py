"""DAG building, topological iteration, DOT rendering and validation errors that name the culprit."""

from __future__ import annotations

import pytest

from jetlet.core import DAG, DagValidationError, Edge, Vertex, processors
from jetlet.core.processor import Processor


def _dag_with(*names: str) -> tuple[DAG, list[Vertex]]:
    dag = DAG()
    return dag, [dag.new_vertex(name, Processor) for name in names]


def test_given_new_vertex_when_added_then_it_is_retrievable_with_its_parallelism() -> None:
    dag = DAG()
    vertex = dag.new_vertex("map", processors.map_p(str.upper), local_parallelism=3)
    assert dag.get_vertex("map") is vertex
    assert vertex.local_parallelism == 3
    assert len(dag) == 1
    assert dag.vertices() == [vertex]


def test_given_unknown_name_when_get_vertex_then_key_error_names_it() -> None:
    dag, _ = _dag_with("a")
    with pytest.raises(KeyError, match="'missing'"):
        dag.get_vertex("missing")


def test_given_edges_added_in_reverse_when_iterating_then_order_is_topological() -> None:
    # given vertices inserted sink-first
    dag, (sink, mid, src) = _dag_with("sink", "mid", "src")
    dag.edge(Edge.between(mid, sink)).edge(Edge.between(src, mid))
    # when / then
    assert [v.name for v in dag] == ["src", "mid", "sink"]


def test_given_diamond_when_iterating_then_every_edge_goes_forward_and_ties_keep_insertion_order() -> None:
    dag, (a, b, c, d) = _dag_with("a", "b", "c", "d")
    dag.edge(Edge.from_vertex(a, 0).to(c)).edge(Edge.from_vertex(a, 1).to(b))
    dag.edge(Edge.from_vertex(b).to(d, 0)).edge(Edge.from_vertex(c).to(d, 1))
    order = [v.name for v in dag]
    assert order == ["a", "b", "c", "d"]
    position = {name: i for i, name in enumerate(order)}
    for edge in dag.edges():
        assert edge.dest_name is not None
        assert position[edge.source_name] < position[edge.dest_name]


def test_given_edges_when_asking_inbound_and_outbound_then_they_are_sorted_by_ordinal() -> None:
    dag, (a, b, c) = _dag_with("a", "b", "c")
    dag.edge(Edge.from_vertex(a, 1).to(c, 0)).edge(Edge.from_vertex(a, 0).to(b, 0))
    dag.edge(Edge.from_vertex(b).to(c, 1))
    assert [e.dest_name for e in dag.outbound_edges("a")] == ["b", "c"]
    assert [e.source_name for e in dag.inbound_edges("c")] == ["a", "b"]


def test_given_dag_when_to_dot_then_it_names_vertices_edges_and_routing() -> None:
    # given
    dag, (src, agg, sink) = _dag_with("source", "aggregate", "sink")
    dag.get_vertex("aggregate").set_local_parallelism(4)
    dag.edge(Edge.between(src, agg).partitioned(str).distributed())
    dag.edge(Edge.between(agg, sink).all_to_one().priority(2))
    # when
    dot = dag.to_dot()
    # then
    lines = dot.splitlines()
    assert lines[0] == "digraph DAG {" and lines[-1] == "}"
    assert '"source" [localParallelism=default];' in dot
    assert '"aggregate" [localParallelism=4];' in dot
    assert '"sink" [localParallelism=default];' in dot
    assert '"source" -> "aggregate" [label="partitioned-distributed"];' in dot
    assert '"aggregate" -> "sink" [label="all-to-one", priority=2];' in dot


def test_given_several_ordinals_and_queue_size_when_to_dot_then_ordinals_and_queue_size_are_labels() -> None:
    from jetlet.config import EdgeConfig

    dag, (a, b, c) = _dag_with("a", "b", "c")
    dag.edge(Edge.from_vertex(a, 0).to(c, 0).broadcast())
    dag.edge(Edge.from_vertex(b, 0).to(c, 1).set_config(EdgeConfig(queue_size=64)))
    dot = dag.to_dot()
    assert '"a" -> "c" [label="broadcast", headlabel=0];' in dot
    assert '"b" -> "c" [label="unicast", headlabel=1, queueSize=64];' in dot


def test_given_quote_in_vertex_name_when_to_dot_then_it_is_escaped() -> None:
    dag, _ = _dag_with('say "hi"')
    assert '"say \\"hi\\"" [localParallelism=default];' in dag.to_dot()


def test_given_duplicate_vertex_name_when_adding_then_error_names_it() -> None:
    dag, _ = _dag_with("twice")
    with pytest.raises(DagValidationError, match="duplicate vertex name 'twice'"):
        dag.new_vertex("twice", Processor)


def test_given_cycle_when_validating_then_error_names_the_vertices_on_it() -> None:
    # given a -> b -> c -> b (cycle through b and c)
    dag, (a, b, c) = _dag_with("a", "b", "c")
    dag.edge(Edge.between(a, b)).edge(Edge.between(b, c)).edge(Edge.from_vertex(c).to(b, 1))
    # when / then
    with pytest.raises(DagValidationError, match=r"cycle through vertices \['b', 'c'\]"):
        dag.validate()
    with pytest.raises(DagValidationError, match="cycle"):
        list(dag)


def test_given_self_loop_when_adding_edge_then_error_names_the_vertex() -> None:
    dag, (a,) = _dag_with("loop")
    with pytest.raises(DagValidationError, match="'loop' to itself"):
        dag.edge(Edge.between(a, a))


def test_given_two_edges_between_same_pair_when_adding_then_error_names_both_ends() -> None:
    dag, (a, b) = _dag_with("a", "b")
    dag.edge(Edge.from_vertex(a, 0).to(b, 0))
    with pytest.raises(DagValidationError, match="already an edge from 'a' to 'b'"):
        dag.edge(Edge.from_vertex(a, 1).to(b, 1))


def test_given_taken_output_ordinal_when_adding_then_error_names_vertex_and_ordinal() -> None:
    dag, (a, b, c) = _dag_with("a", "b", "c")
    dag.edge(Edge.between(a, b))
    with pytest.raises(DagValidationError, match="output ordinal 0 of 'a' is already used"):
        dag.edge(Edge.between(a, c))


def test_given_taken_input_ordinal_when_adding_then_error_names_vertex_and_ordinal() -> None:
    dag, (a, b, c) = _dag_with("a", "b", "c")
    dag.edge(Edge.between(a, c))
    with pytest.raises(DagValidationError, match="input ordinal 0 of 'c' is already used"):
        dag.edge(Edge.between(b, c))


def test_given_gap_in_input_ordinals_when_validating_then_error_names_vertex_and_ordinals() -> None:
    dag, (a, b) = _dag_with("a", "b")
    dag.edge(Edge.from_vertex(a, 0).to(b, 1))
    with pytest.raises(
        DagValidationError, match=r"vertex 'b': input ordinals must be 0..0 without gaps, got \[1\]"
    ):
        dag.validate()


def test_given_gap_in_output_ordinals_when_validating_then_error_names_vertex() -> None:
    dag, (a, b, c) = _dag_with("a", "b", "c")
    dag.edge(Edge.from_vertex(a, 0).to(b)).edge(Edge.from_vertex(a, 2).to(c))
    with pytest.raises(DagValidationError, match=r"vertex 'a': output ordinals .* got \[0, 2\]"):
        list(dag)


def test_given_edge_to_missing_vertex_when_adding_then_error_names_the_missing_vertex() -> None:
    dag, (a,) = _dag_with("a")
    with pytest.raises(DagValidationError, match="vertex 'ghost' is not in this DAG"):
        dag.edge(Edge.between(a, "ghost"))


def test_given_unfinished_edge_when_adding_then_error_asks_for_destination() -> None:
    dag, (a,) = _dag_with("a")
    with pytest.raises(DagValidationError, match="no destination"):
        dag.edge(Edge.from_vertex(a))


def test_given_empty_dag_when_validating_then_refused() -> None:
    with pytest.raises(DagValidationError, match="no vertices"):
        DAG().validate()


@pytest.mark.parametrize("bad", [0, -2, -100, True, 1.5])
def test_given_bad_parallelism_when_creating_vertex_then_error_names_vertex(bad: object) -> None:
    with pytest.raises(DagValidationError, match="vertex 'v': local_parallelism must be -1"):
        DAG().new_vertex("v", Processor, local_parallelism=bad)  # type: ignore[arg-type]


def test_given_vertex_when_setting_bad_parallelism_later_then_error_names_vertex() -> None:
    _, (v,) = _dag_with("late")
    with pytest.raises(DagValidationError, match="vertex 'late'"):
        v.set_local_parallelism(0)
    assert v.set_local_parallelism(-1).local_parallelism == -1


@pytest.mark.parametrize("bad", ["", None, 5])
def test_given_bad_vertex_name_when_creating_then_refused(bad: object) -> None:
    with pytest.raises(DagValidationError, match="non-empty string"):
        DAG().new_vertex(bad, Processor)  # type: ignore[arg-type]


def test_given_processor_instance_when_creating_vertex_then_error_explains_factory() -> None:
    with pytest.raises(TypeError, match="vertex 'x': got a Processor instance"):
        DAG().new_vertex("x", Processor())


def test_given_non_callable_supplier_when_creating_vertex_then_error_names_type() -> None:
    with pytest.raises(TypeError, match=r"vertex 'x': expected a ProcessorMetaSupplier.*got int"):
        DAG().new_vertex("x", 42)
