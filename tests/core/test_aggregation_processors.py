"""Aggregation processors (one stage and two stages, keyed and global) against plain-Python references."""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from typing import Any

import pytest

from jetlet.aggregate import AggregateOperation, averaging, counting, summing, to_list
from jetlet.aggregate.builder import aggregate_operation2
from jetlet.core import Inbox, Outbox, Watermark, processors
from jetlet.testing import make_context, verify_processor


def _words(n: int = 80, seed: int = 99) -> list[tuple[str, int]]:
    rng = random.Random(seed)
    return [(rng.choice("abcdefg"), rng.randint(1, 100)) for _ in range(n)]


def _key(item: tuple[str, int]) -> str:
    return item[0]


def _value(item: tuple[str, int]) -> int:
    return item[1]


def _sums(items: list[tuple[str, int]]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for key, value in items:
        out[key] += value
    return dict(out)


def test_given_items_when_accumulate_by_key_p_then_emits_key_and_partial_accumulator() -> None:
    items = _words()
    expected = list(_sums(items).items())
    verify_processor(processors.accumulate_by_key_p(_key, summing(_value))).input(
        items
    ).unordered().expect_output(expected)


def test_given_partials_when_combine_by_key_p_then_emits_combined_results() -> None:
    # given partial sums from two "members"
    items = _words()
    first, second = _sums(items[:40]), _sums(items[40:])
    partials = list(first.items()) + list(second.items())
    # then combining equals summing everything
    verify_processor(processors.combine_by_key_p(summing(_value))).input(partials).unordered().expect_output(
        list(_sums(items).items())
    )


def test_given_two_stages_when_chained_by_hand_then_equal_to_one_stage() -> None:
    items = _words(120, seed=5)
    op = averaging(_value)
    halves = [items[::2], items[1::2]]
    partials: list[Any] = []
    for half in halves:
        p = processors.accumulate_by_key_p(_key, op)()
        outbox = Outbox(1)
        p.init(outbox, make_context())
        p.process(0, Inbox(half))
        assert p.complete()
        partials.extend(outbox.buckets[0])
    by_key: dict[str, list[int]] = defaultdict(list)
    for key, value in items:
        by_key[key].append(value)
    expected = [(k, sum(v) / len(v)) for k, v in by_key.items()]
    verify_processor(processors.combine_by_key_p(op)).input(partials).unordered().expect_output(expected)


def test_given_map_to_output_when_aggregate_by_key_p_then_results_are_shaped() -> None:
    items = _words()
    counts = Counter(k for k, _ in items)
    verify_processor(
        processors.aggregate_by_key_p(_key, counting(), lambda key, count: f"{key}={count}")
    ).input(items).unordered().expect_output([f"{k}={c}" for k, c in counts.items()])


def test_given_to_list_when_aggregate_by_key_p_then_each_key_lists_its_items_in_order() -> None:
    items = _words(30)
    grouped: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for item in items:
        grouped[item[0]].append(item)
    verify_processor(processors.aggregate_by_key_p(_key, to_list())).input(items).unordered().expect_output(
        list(grouped.items())
    )


def test_given_two_inputs_when_co_aggregating_by_key_then_each_input_feeds_its_slot() -> None:
    # given clicks on input 0 and purchases on input 1, keyed by user
    rng = random.Random(8)
    clicks = [(rng.choice("xyz"), 1) for _ in range(30)]
    buys = [(rng.choice("xyz"), rng.randint(1, 9)) for _ in range(20)]
    op = aggregate_operation2(counting(), summing(_value))
    expected = [
        (k, (Counter(c for c, _ in clicks)[k], _sums(buys).get(k, 0)))
        for k in set(k for k, _ in clicks + buys)
    ]
    verify_processor(processors.aggregate_by_key_p([_key, _key], op)).inputs(
        [clicks, buys]
    ).unordered().expect_output(expected)


def test_given_op_without_accumulate_for_second_input_when_building_then_refused() -> None:
    with pytest.raises(ValueError, match="no accumulate function for input 1"):
        processors.aggregate_by_key_p([_key, _key], counting())


def test_given_op_without_combine_when_combine_stage_requested_then_refused() -> None:
    op = AggregateOperation.with_create(int).and_accumulate(lambda a, _i: a + 1)
    with pytest.raises(ValueError, match="no combine function"):
        processors.combine_by_key_p(op)
    with pytest.raises(ValueError, match="no combine function"):
        processors.combine_p(op)


def test_given_snapshot_entries_with_same_key_when_restored_then_accumulators_are_combined() -> None:
    # state of two processors restored onto one
    p = processors.accumulate_by_key_p(_key, summing(_value))()
    outbox = Outbox(1)
    p.init(outbox, make_context())
    p.restore_from_snapshot(Inbox([("a", 3), ("b", 1), ("a", 4)]))
    assert p.complete()
    assert sorted(outbox.buckets[0]) == [("a", 7), ("b", 1)]


def test_given_duplicate_snapshot_key_and_no_combine_when_restored_then_error_names_key() -> None:
    op = AggregateOperation.with_create(int).and_accumulate(lambda a, _i: a + 1)
    p = processors.aggregate_by_key_p(_key, op)()
    p.init(Outbox(1), make_context())
    with pytest.raises(ValueError, match="key 'a' twice"):
        p.restore_from_snapshot(Inbox([("a", 1), ("a", 2)]))


def test_given_many_keys_and_tiny_outbox_when_completing_then_all_results_come_out() -> None:
    items = [(f"k{i}", i) for i in range(50)]
    verify_processor(processors.aggregate_by_key_p(_key, summing(_value))).input(items).expect_output(items)


def test_given_watermark_when_keyed_aggregation_then_it_is_forwarded_before_results() -> None:
    wm = Watermark(3)
    verify_processor(processors.aggregate_by_key_p(_key, counting())).input([("a", 1), wm]).expect_output(
        [wm, ("a", 1)]
    )


# -- global (ungrouped) ---------------------------------------------------------
def test_given_items_when_accumulate_p_then_emits_one_partial() -> None:
    items = _words()
    verify_processor(processors.accumulate_p(averaging(_value))).input(items).expect_output(
        [(len(items), sum(v for _, v in items))]
    )


def test_given_partials_when_combine_p_then_emits_finished_result() -> None:
    partials = [(3, 30), (1, 2), (4, 8)]
    verify_processor(processors.combine_p(averaging())).input(partials).expect_output([40 / 8])


def test_given_random_items_when_aggregate_p_then_emits_the_reference_result() -> None:
    values = [v for _, v in _words(200, seed=11)]
    verify_processor(processors.aggregate_p(summing())).input(values).expect_output([sum(values)])
    verify_processor(processors.aggregate_p(counting())).input(values).expect_output([len(values)])
    verify_processor(processors.aggregate_p(to_list())).input(values).expect_output([values])


def test_given_no_items_when_aggregate_p_then_emits_the_empty_result() -> None:
    verify_processor(processors.aggregate_p(counting())).input([]).expect_output([0])
    verify_processor(processors.aggregate_p(averaging())).input([]).output_checker(
        lambda _e, actual: len(actual) == 1 and math.isnan(actual[0])
    ).expect_output([])


def test_given_finish_returning_none_when_aggregate_p_completes_then_nothing_is_emitted() -> None:
    op = summing().and_then(lambda total: None if total == 0 else total)
    verify_processor(processors.aggregate_p(op)).input([1, -1]).expect_output([])


def test_given_two_inputs_when_aggregate_p_co_aggregates_then_each_input_feeds_its_slot() -> None:
    op = aggregate_operation2(counting(), summing())
    verify_processor(processors.aggregate_p(op)).inputs([["a", "b", "c"], [5, 6]]).expect_output([(3, 11)])
