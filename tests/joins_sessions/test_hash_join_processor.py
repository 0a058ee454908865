"""hash_join_p: outer and inner joins of a probe stream with build-side hash tables, as Jet's HashJoinP.

The reference is a plain nested-loop join written independently of the processor.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import pytest

import jetlet
from jetlet.core import DAG, Edge, Inbox, Watermark, processors, snapshot_writer
from jetlet.core.processors.hash_join import HashJoinP, JoinClause, hash_join_p
from jetlet.testing import TestOutbox, make_context, verify_processor


def _nested_loop_join(
    probe: Sequence[Any],
    builds: Sequence[Sequence[Any]],
    clauses: Sequence[JoinClause],
    shape: Callable[..., Any],
    inner: bool,
) -> list[Any]:
    """Reference: for each probe item, every combination of matching build items, by nested loops."""
    out: list[Any] = []

    def extend(item: Any, depth: int, chosen: list[Any]) -> None:
        if depth == len(clauses):
            out.append(shape(item, *chosen))
            return
        clause = clauses[depth]
        matched = False
        for candidate in builds[depth]:
            if clause.right_key_fn(candidate) == clause.left_key_fn(item):
                matched = True
                extend(item, depth + 1, [*chosen, clause.right_projection_fn(candidate)])
        if not matched and not inner:
            extend(item, depth + 1, [*chosen, None])

    for item in probe:
        extend(item, 0, [])
    return out


def _order_key(order: tuple[str, int, int]) -> int:
    return order[1]


def _order_key2(order: tuple[str, int, int]) -> int:
    return order[2]


def _user_id(user: tuple[int, str]) -> int:
    return user[0]


def _user_name(user: tuple[int, str]) -> str:
    return user[1]


def _tuple_of(item: Any, *rights: Any) -> tuple[Any, ...]:
    return (item, *rights)


def _random_case(
    rng: random.Random, clause_count: int
) -> tuple[list[tuple[str, int, int]], list[list[tuple[int, str]]], list[JoinClause]]:
    probe = [(f"o{n}", rng.randrange(8), rng.randrange(8)) for n in range(rng.randrange(0, 40))]
    builds = [
        [(rng.randrange(10), f"b{i}-{n}") for n in range(rng.randrange(0, 15))] for i in range(clause_count)
    ]
    key_fns = [_order_key, _order_key2, _order_key]
    clauses = [JoinClause.on_keys(key_fns[i], _user_id) for i in range(clause_count)]
    if clause_count > 1:
        clauses[1] = clauses[1].project_right(_user_name)
    return probe, builds, clauses


# -- the harness: every mode, including snapshot+restore and a blocked outbox of one ------------------


def test_given_duplicate_build_keys_when_outer_join_then_one_output_per_match_and_none_for_missing() -> None:
    # given: user 1 twice on the build side, user 3 absent
    orders = [("a", 1, 0), ("b", 2, 0), ("c", 3, 0), ("d", 1, 0)]
    users = [(1, "ann"), (2, "bob"), (1, "ann2")]
    clause = JoinClause.on_keys(_order_key, _user_id).project_right(_user_name)
    # when / then
    verify_processor(hash_join_p(clause, _tuple_of)).inputs(
        [orders, users], priorities=[0, -1]
    ).expect_output(
        [
            (("a", 1, 0), "ann"),
            (("a", 1, 0), "ann2"),
            (("b", 2, 0), "bob"),
            (("c", 3, 0), None),
            (("d", 1, 0), "ann"),
            (("d", 1, 0), "ann2"),
        ]
    )


def test_given_missing_keys_when_inner_join_then_unmatched_probe_items_are_dropped() -> None:
    # given
    orders = [("a", 1, 5), ("b", 3, 5), ("c", 1, 6)]
    users = [(1, "ann")]
    cities = [(5, "rome")]
    clauses = [
        JoinClause.on_keys(_order_key, _user_id).project_right(_user_name),
        JoinClause.on_keys(_order_key2, _user_id).project_right(_user_name),
    ]
    # when / then: "b" has no user, "c" has no city
    verify_processor(hash_join_p(clauses, _tuple_of, inner=True)).inputs(
        [orders, users, cities], priorities=[0, -1, -1]
    ).expect_output([(("a", 1, 5), "ann", "rome")])


@pytest.mark.parametrize("clause_count", [1, 2, 3])
@pytest.mark.parametrize("inner", [False, True])
def test_given_random_inputs_when_joined_then_output_equals_nested_loop_reference(
    clause_count: int, inner: bool
) -> None:
    rng = random.Random(1000 * clause_count + inner)
    for _ in range(15):
        # given
        probe, builds, clauses = _random_case(rng, clause_count)
        expected = _nested_loop_join(probe, builds, clauses, _tuple_of, inner)
        # when / then
        verify_processor(hash_join_p(clauses, _tuple_of, inner=inner)).inputs(
            [probe, *builds], priorities=[0] + [-1] * clause_count
        ).expect_output(expected)


def test_given_map_to_output_returning_none_when_joined_then_that_output_is_skipped() -> None:
    # given: a mapping that drops matches of user 2
    def shape(order: Any, user: Any) -> Any:
        return None if user == (2, "bob") else (order[0], user)

    # when / then
    verify_processor(hash_join_p(JoinClause.on_keys(_order_key, _user_id), shape)).inputs(
        [[("a", 1, 0), ("b", 2, 0)], [(1, "ann"), (2, "bob")]], priorities=[0, -1]
    ).expect_output([("a", (1, "ann"))])


def test_given_timestamped_probe_when_joined_then_outputs_keep_timestamps_and_watermarks_pass() -> None:
    # given: (ts, order) events and a watermark between them
    events = [(10, ("a", 1, 0)), Watermark(10), (20, ("b", 2, 0))]
    clause = JoinClause.join_map_entries(_order_key)
    # when / then
    verify_processor(hash_join_p(clause, _tuple_of, timestamped=True)).inputs(
        [events, [(1, "ann"), (2, "bob"), (2, "bea")]], priorities=[0, -1]
    ).expect_output(
        [
            (10, (("a", 1, 0), "ann")),
            Watermark(10),
            (20, (("b", 2, 0), "bob")),
            (20, (("b", 2, 0), "bea")),
        ]
    )


# -- contract details ------------------------------------------------------------------------------------


def test_given_probe_items_joined_when_a_build_item_arrives_then_it_fails_naming_the_priority() -> None:
    # given: a processor that has already joined a probe item
    processor = HashJoinP(
        [JoinClause.on_keys(_order_key, _user_id)], _tuple_of, inner=False, timestamped=False
    )
    processor.init(TestOutbox(1, 16), make_context())
    processor.process(0, Inbox([("a", 1, 0)]))
    # when / then
    with pytest.raises(RuntimeError, match="priority"):
        processor.process(1, Inbox([(1, "ann")]))


def test_given_join_clause_when_projected_then_a_new_clause_with_the_projection_is_returned() -> None:
    # given
    clause = JoinClause.on_keys(_order_key, _user_id)
    # when
    projected = clause.project_right(_user_name)
    # then
    assert projected.right_projection_fn((1, "ann")) == "ann"
    assert clause.right_projection_fn((1, "ann")) == (1, "ann")
    assert projected.left_key_fn is clause.left_key_fn


def test_given_no_clauses_when_making_the_processor_then_it_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        hash_join_p([], _tuple_of)


# -- end to end: in a real DAG on the embedded instance ------------------------------------------------


@pytest.mark.parametrize("parallelism", [1, 4])
def test_given_a_dag_with_broadcast_build_edges_when_run_then_output_equals_reference(
    parallelism: int,
) -> None:
    # given: two build sides of duplicates and a probe side with missing keys
    rng = random.Random(parallelism)
    probe = [(f"o{n}", rng.randrange(30), rng.randrange(30)) for n in range(3000)]
    users = [(rng.randrange(25), f"u{n}") for n in range(60)]
    cities = [(rng.randrange(25), f"c{n}") for n in range(40)]
    clauses = [
        JoinClause.on_keys(_order_key, _user_id).project_right(_user_name),
        JoinClause.on_keys(_order_key2, _user_id),
    ]
    out: list[Any] = []
    dag = DAG()
    orders_v = dag.new_vertex("orders", processors.source_from_iterable(probe))
    users_v = dag.new_vertex("users", processors.source_from_iterable(users))
    cities_v = dag.new_vertex("cities", processors.source_from_iterable(cities))
    join_v = dag.new_vertex("join", hash_join_p(clauses, _tuple_of), parallelism)
    sink_v = dag.new_vertex("sink", processors.list_sink_p(out), 1)
    dag.edge(Edge.between(orders_v, join_v))
    dag.edge(Edge.from_vertex(users_v).to(join_v, 1).broadcast().priority(-1))
    dag.edge(Edge.from_vertex(cities_v).to(join_v, 2).broadcast().priority(-1))
    dag.edge(Edge.between(join_v, sink_v))
    # when
    with jetlet.embedded() as jet:
        jet.new_job(dag).join(timeout=60)
    # then
    assert Counter(out) == Counter(_nested_loop_join(probe, [users, cities], clauses, _tuple_of, inner=False))


def test_given_snapshots_of_two_processors_when_one_restores_both_then_it_loads_one_copy() -> None:
    # given: two processors with the same broadcast build side, each saving its table
    clause = JoinClause.on_keys(_order_key, _user_id)
    users = [(1, "ann"), (1, "ann2"), (2, "bob")]
    saved: list[tuple[Any, Any]] = []
    for index in (0, 1):
        processor = HashJoinP([clause], _tuple_of, inner=False, timestamped=False)
        outbox = TestOutbox(1, 16)
        processor.init(outbox, make_context(global_processor_index=index, local_parallelism=2))
        processor.process(1, Inbox(users))
        assert processor.save_to_snapshot()
        saved.extend(snapshot_writer.read_back_lent(outbox.snapshot_bucket))  # as the member stores it
    # when: one fresh processor gets both copies
    restored = HashJoinP([clause], _tuple_of, inner=False, timestamped=False)
    restored_outbox = TestOutbox(1, 16)
    restored.init(restored_outbox, make_context())
    restored.restore_from_snapshot(Inbox(saved))
    assert restored.finish_snapshot_restore()
    restored.process(0, Inbox([("a", 1, 0)]))
    # then: each match once, not twice
    assert restored_outbox.buckets[0] == [(("a", 1, 0), (1, "ann")), (("a", 1, 0), (1, "ann2"))]
