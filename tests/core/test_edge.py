"""Edge construction: ordinals, routing policies, distribution, priority, config, bad arguments."""

from __future__ import annotations

from collections.abc import Hashable

import pytest

from jetlet.config import EdgeConfig
from jetlet.core import DAG, DEFAULT_PARTITIONER, Edge, RoutingPolicy
from jetlet.core.processor import Processor


class _FirstCharPartitioner:
    def get_partition(self, key: Hashable, partition_count: int) -> int:
        return ord(str(key)[0]) % partition_count


@pytest.fixture
def dag() -> DAG:
    d = DAG()
    d.new_vertex("a", Processor)
    d.new_vertex("b", Processor)
    return d


def test_given_between_when_built_then_ordinals_are_zero_and_routing_is_local_unicast(dag: DAG) -> None:
    edge = Edge.between(dag.get_vertex("a"), dag.get_vertex("b"))
    assert (edge.source_name, edge.source_ordinal, edge.dest_name, edge.dest_ordinal) == ("a", 0, "b", 0)
    assert edge.routing_policy is RoutingPolicy.UNICAST
    assert edge.is_distributed is False
    assert edge.priority_value == 0
    assert edge.config is None
    assert edge.key_fn is None
    assert repr(edge) == "Edge(a:0 -> b:0, unicast)"


def test_given_from_vertex_to_with_ordinals_when_built_then_both_ordinals_are_kept(dag: DAG) -> None:
    edge = Edge.from_vertex(dag.get_vertex("a"), 2).to(dag.get_vertex("b"), 3)
    assert (edge.source_ordinal, edge.dest_ordinal) == (2, 3)
    assert repr(edge) == "Edge(a:2 -> b:3, unicast)"


def test_given_names_instead_of_vertices_when_built_then_names_are_used() -> None:
    edge = Edge.between("x", "y")
    assert (edge.source_name, edge.dest_name) == ("x", "y")


@pytest.mark.parametrize(
    ("configure", "policy", "text"),
    [
        (Edge.unicast, RoutingPolicy.UNICAST, "unicast"),
        (Edge.isolated, RoutingPolicy.ISOLATED, "isolated"),
        (Edge.broadcast, RoutingPolicy.BROADCAST, "broadcast"),
        (Edge.all_to_one, RoutingPolicy.ALL_TO_ONE, "all-to-one"),
    ],
)
def test_given_routing_method_when_called_then_policy_and_description_follow(
    configure: object, policy: RoutingPolicy, text: str
) -> None:
    edge = configure(Edge.between("a", "b"))  # type: ignore[operator]
    assert edge.routing_policy is policy
    assert edge.describe() == text
    assert edge.distributed().describe() == f"{text}-distributed"
    assert edge.local().describe() == text


def test_given_partitioned_without_partitioner_when_built_then_default_partitioner_and_key_fn_are_set() -> (
    None
):
    edge = Edge.between("a", "b").partitioned(len)
    assert edge.routing_policy is RoutingPolicy.PARTITIONED
    assert edge.key_fn is len
    assert edge.partitioner is DEFAULT_PARTITIONER


def test_given_partitioned_with_partitioner_when_built_then_it_is_used() -> None:
    custom = _FirstCharPartitioner()
    edge = Edge.between("a", "b").partitioned(str, custom)
    assert edge.partitioner is custom
    assert edge.partitioner.get_partition("abc", 271) == ord("a")


def test_given_partitioned_edge_when_rerouted_then_key_fn_is_dropped() -> None:
    edge = Edge.between("a", "b").partitioned(len).broadcast()
    assert edge.routing_policy is RoutingPolicy.BROADCAST
    assert edge.key_fn is None


def test_given_priority_and_config_when_set_then_kept_and_chainable() -> None:
    cfg = EdgeConfig(queue_size=16)
    edge = Edge.between("a", "b").priority(-5).set_config(cfg).distributed()
    assert edge.priority_value == -5
    assert edge.config is cfg
    assert edge.config.queue_size == 16
    assert edge.is_distributed


@pytest.mark.parametrize("bad", [-1, 1.0, "0", True, None])
def test_given_bad_source_ordinal_when_building_then_value_error(bad: object) -> None:
    with pytest.raises(ValueError, match="source ordinal must be an int >= 0"):
        Edge.from_vertex("a", bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-3, 2.5, False])
def test_given_bad_destination_ordinal_when_building_then_value_error(bad: object) -> None:
    with pytest.raises(ValueError, match="destination ordinal must be an int >= 0"):
        Edge.from_vertex("a").to("b", bad)  # type: ignore[arg-type]


def test_given_non_callable_key_fn_when_partitioned_then_type_error_names_edge() -> None:
    with pytest.raises(TypeError, match=r"Edge\(a:0 -> b:0.*callable key_fn"):
        Edge.between("a", "b").partitioned("not callable")  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [1.5, "1", True])
def test_given_non_int_priority_when_set_then_type_error(bad: object) -> None:
    with pytest.raises(TypeError, match="priority must be an int"):
        Edge.between("a", "b").priority(bad)  # type: ignore[arg-type]


def test_given_non_edge_config_when_set_config_then_type_error() -> None:
    with pytest.raises(TypeError, match="needs an EdgeConfig"):
        Edge.between("a", "b").set_config({"queue_size": 4})  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, -1])
def test_given_bad_queue_size_when_building_edge_config_then_refused(bad: int) -> None:
    with pytest.raises((ValueError, TypeError), match="queue_size"):
        EdgeConfig(queue_size=bad)
