"""The library of aggregate operations against plain-Python references.

Every case is an operation, a seeded generator of inputs and an independent
reference computation. For each case and seed the tests check that:

* folding all items gives the reference result;
* splitting the items into random contiguous parts, folding each part and
  combining the partials left to right gives the same result (two-stage
  aggregation);
* ``deduct(combine(x, y), y)`` gives x's result, where the operation deducts;
* ``combine(a, b)`` leaves ``b`` intact and keeps none of its state, and
  ``export`` returns a result that later accumulation does not change.
"""

from __future__ import annotations

import copy
import dataclasses
import doctest
import heapq
import itertools
import math
import pickle
import random
from collections import Counter, defaultdict
from collections.abc import Callable
from fractions import Fraction
from functools import reduce
from typing import Any

import pytest

import jetlet.aggregate as agg
from jetlet.aggregate import operations
from jetlet.core import processors
from jetlet.testing import verify_processor

Op = agg.AggregateOperation[Any, Any]
SEEDS = range(6)


# --------------------------------------------------------------------------- helpers


def fold(op: Op, items: list[Any]) -> Any:
    return reduce(op.accumulate_fn(), items, op.create_fn())


def result_of(op: Op, items: list[Any]) -> Any:
    return op.finish_fn(fold(op, items))


def random_parts(rng: random.Random, items: list[Any]) -> list[list[Any]]:
    """Contiguous parts in order, some of them empty."""
    cuts = sorted(rng.randint(0, len(items)) for _ in range(rng.randint(0, 4)))
    bounds = [0, *cuts, len(items)]
    return [items[start:end] for start, end in itertools.pairwise(bounds)]


def two_stage_result(op: Op, parts: list[list[Any]]) -> Any:
    combine = op.require_combine()
    partials = [fold(op, part) for part in parts]
    return op.finish_fn(reduce(combine, partials, op.create_fn()))


def same(expected: Any, actual: Any) -> bool:
    """Equality in which NaN equals NaN (an empty mean, a trend of one point)."""
    if isinstance(expected, float) and isinstance(actual, float) and math.isnan(expected):
        return math.isnan(actual)
    return bool(expected == actual)


def ints(rng: random.Random, low: int = -20, high: int = 20) -> list[int]:
    return [rng.randint(low, high) for _ in range(rng.randint(0, 30))]


def keyed(rng: random.Random) -> list[tuple[int, int]]:
    """``(key, serial)`` pairs: few distinct keys so that ties happen, serials tell equal keys apart."""
    return [(rng.randint(0, 4), serial) for serial in range(rng.randint(0, 30))]


def words(rng: random.Random) -> list[str]:
    return [rng.choice(["", "a", "bb", "ccc", "d", "ee"]) for _ in range(rng.randint(0, 20))]


def points(rng: random.Random) -> list[tuple[int, int]]:
    xs = [rng.randint(0, 3) for _ in range(rng.randint(0, 12))]
    return [(x, 3 * x + rng.randint(-5, 5)) for x in xs]


def first(pair: tuple[Any, Any]) -> Any:
    return pair[0]


def second(pair: tuple[Any, Any]) -> Any:
    return pair[1]


# --------------------------------------------------------------------------- references


def reference_slope(pts: list[tuple[int, int]]) -> float:
    """Least squares by hand, in exact fractions: Σ(x-x̄)(y-ȳ) / Σ(x-x̄)²."""
    if len(pts) < 2:
        return math.nan
    mean_x = Fraction(sum(x for x, _ in pts), len(pts))
    mean_y = Fraction(sum(y for _, y in pts), len(pts))
    spread = sum((x - mean_x) ** 2 for x, _ in pts)
    if spread == 0:
        return math.nan
    return float(sum((x - mean_x) * (y - mean_y) for x, y in pts) / spread)


def reference_to_dict(pairs: list[tuple[int, int]]) -> dict[int, int]:
    merged: dict[int, int] = {}
    for key, value in pairs:
        merged[key] = merged.get(key, 0) + value
    return merged


def reference_grouping(pairs: list[tuple[int, int]]) -> dict[int, list[tuple[int, int]]]:
    groups: defaultdict[int, list[tuple[int, int]]] = defaultdict(list)
    for pair in pairs:
        groups[pair[0]].append(pair)
    return dict(groups)


def half_or_none(x: int) -> int | None:
    return x // 2 if x % 2 == 0 else None


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    make_op: Callable[[], Op]
    generate: Callable[[random.Random], list[Any]]
    reference: Callable[[list[Any]], Any]


CASES = [
    Case("counting", agg.counting, ints, len),
    Case("summing", lambda: agg.summing(abs), ints, lambda xs: sum(map(abs, xs))),
    Case("averaging", agg.averaging, ints, lambda xs: sum(xs) / len(xs) if xs else math.nan),
    Case("linear_trend", lambda: agg.linear_trend(first, second), points, reference_slope),
    Case("min_by", lambda: agg.min_by(first), keyed, lambda xs: min(xs, key=first, default=None)),
    Case("max_by", lambda: agg.max_by(first), keyed, lambda xs: max(xs, key=first, default=None)),
    Case("top_n(1)", lambda: agg.top_n(1, first), keyed, lambda xs: heapq.nlargest(1, xs, key=first)),
    Case("top_n(4)", lambda: agg.top_n(4, first), keyed, lambda xs: heapq.nlargest(4, xs, key=first)),
    Case("top_n identity", lambda: agg.top_n(3), ints, lambda xs: heapq.nlargest(3, xs)),
    Case("bottom_n(4)", lambda: agg.bottom_n(4, first), keyed, lambda xs: heapq.nsmallest(4, xs, key=first)),
    Case("bottom_n identity", lambda: agg.bottom_n(5), ints, lambda xs: heapq.nsmallest(5, xs)),
    Case("to_list", agg.to_list, ints, list),
    Case("to_set", agg.to_set, ints, set),
    Case("to_dict merging", lambda: agg.to_dict(first, second, _sum2), keyed, reference_to_dict),
    Case("grouping_by to_list", lambda: agg.grouping_by(first), keyed, reference_grouping),
    Case(
        "grouping counting",
        lambda: agg.grouping(abs, agg.counting()),
        ints,
        lambda xs: dict(Counter(map(abs, xs))),
    ),
    Case(
        "grouping_by top_n",
        lambda: agg.grouping_by(lambda x: x % 3, agg.top_n(2)),
        ints,
        lambda xs: {k: heapq.nlargest(2, [x for x in xs if x % 3 == k]) for k in {x % 3 for x in xs}},
    ),
    Case(
        "all_of",
        lambda: agg.all_of(agg.counting(), agg.summing(), agg.to_list()),
        ints,
        lambda xs: (len(xs), sum(xs), xs),
    ),
    Case(
        "all_of deducting",
        lambda: agg.all_of(agg.counting(), agg.summing()),
        ints,
        lambda xs: (len(xs), sum(xs)),
    ),
    Case("pick_any", agg.pick_any, ints, lambda xs: xs[0] if xs else None),
    Case(
        "concatenating",
        lambda: agg.concatenating(", ", "<", ">"),
        words,
        lambda ws: "<" + ", ".join(w for w in ws if w) + ">",
    ),
    Case("concatenating plain", agg.concatenating, words, "".join),
    Case(
        "reducing deducting", lambda: agg.reducing(0, abs, _sum2, _sub2), ints, lambda xs: sum(map(abs, xs))
    ),
    Case(
        "reducing max",
        lambda: agg.reducing(-math.inf, float, max),
        ints,
        lambda xs: max(xs, default=-math.inf),
    ),
    Case(
        "mapping skips None",
        lambda: agg.mapping(half_or_none, agg.to_list()),
        ints,
        lambda xs: [x // 2 for x in xs if x % 2 == 0],
    ),
    Case(
        "filtering",
        lambda: agg.filtering(lambda x: x > 0, agg.summing()),
        ints,
        lambda xs: sum(x for x in xs if x > 0),
    ),
    Case(
        "flat_mapping",
        lambda: agg.flat_mapping(lambda x: range(abs(x) % 4), agg.to_list()),
        ints,
        lambda xs: [e for x in xs for e in range(abs(x) % 4)],
    ),
]
DEDUCTING = {
    "counting",
    "summing",
    "averaging",
    "linear_trend",
    "all_of deducting",
    "pick_any",
    "reducing deducting",
    "filtering",
}


def _sum2(a: Any, b: Any) -> Any:
    return a + b


def _sub2(a: Any, b: Any) -> Any:
    return a - b


def cases_and_seeds() -> list[Any]:
    return [pytest.param(case, seed, id=f"{case.name}-{seed}") for case in CASES for seed in SEEDS]


# --------------------------------------------------------------------------- properties of every operation


@pytest.mark.parametrize(("case", "seed"), cases_and_seeds())
def test_folding_all_items_gives_the_reference_result(case: Case, seed: int) -> None:
    # given seeded items
    items = case.generate(random.Random(seed))
    # when they are folded by the operation
    actual = result_of(case.make_op(), items)
    # then the result is the plain-Python one
    assert same(case.reference(items), actual), (items, actual)


@pytest.mark.parametrize(("case", "seed"), cases_and_seeds())
def test_two_stage_aggregation_gives_the_single_stage_result(case: Case, seed: int) -> None:
    # given items split into random contiguous parts
    rng = random.Random(seed)
    items = case.generate(rng)
    parts = random_parts(rng, items)
    # when each part is folded and the partials are combined in order
    actual = two_stage_result(case.make_op(), parts)
    # then the result is the one of folding everything at once
    assert same(case.reference(items), actual), (parts, actual)


@pytest.mark.parametrize(("case", "seed"), cases_and_seeds())
def test_combine_leaves_the_right_side_intact(case: Case, seed: int) -> None:
    # given two partial accumulators
    rng = random.Random(seed)
    op = case.make_op()
    left_items, right_items, later_items = case.generate(rng), case.generate(rng), case.generate(rng)
    right = fold(op, right_items)
    # when the right one is combined into the left one, which then accumulates more items
    combined = reduce(op.accumulate_fn(), later_items, op.require_combine()(fold(op, left_items), right))
    # then the combined result covers everything and the right one still holds only its own items
    assert same(case.reference(left_items + right_items + later_items), op.export_fn(combined))
    assert same(case.reference(right_items), op.finish_fn(right))


@pytest.mark.parametrize(("case", "seed"), cases_and_seeds())
def test_an_exported_result_does_not_change_with_later_items(case: Case, seed: int) -> None:
    # given an accumulator and a result exported from it
    rng = random.Random(seed)
    op = case.make_op()
    items, later_items = case.generate(rng), case.generate(rng)
    acc = fold(op, items)
    exported = op.export_fn(acc)
    kept = copy.deepcopy(exported)
    # when more items are accumulated
    acc = reduce(op.accumulate_fn(), later_items, acc)
    # then the exported result is as it was, and the accumulator has moved on
    assert same(kept, exported)
    assert same(case.reference(items + later_items), op.finish_fn(acc))


@pytest.mark.parametrize(
    ("case", "seed"),
    [p for p in cases_and_seeds() if p.values[0].name in DEDUCTING],  # type: ignore[union-attr]
)
def test_deducting_what_was_combined_gives_the_first_result(case: Case, seed: int) -> None:
    # given accumulators x and y
    rng = random.Random(seed)
    op = case.make_op()
    assert op.deduct_fn is not None
    x_items, y_items = case.generate(rng), case.generate(rng)
    y = fold(op, y_items)
    # when y is combined into x and then deducted again
    deducted = op.deduct_fn(op.require_combine()(fold(op, x_items), y), y)
    # then the result is x's, and y is intact
    assert same(case.reference(x_items), op.finish_fn(deducted))
    assert same(case.reference(y_items), op.finish_fn(y))


@pytest.mark.parametrize(("case", "seed"), cases_and_seeds()[:: len(SEEDS)])
def test_an_accumulator_survives_pickling(case: Case, seed: int) -> None:
    # given an accumulator (snapshots and the network carry accumulators as bytes)
    rng = random.Random(seed)
    op = case.make_op()
    items, later_items = case.generate(rng), case.generate(rng)
    # when it is pickled, unpickled and used further
    restored = pickle.loads(pickle.dumps(fold(op, items)))
    # then it goes on as the original would
    assert same(
        case.reference(items + later_items), op.finish_fn(reduce(op.accumulate_fn(), later_items, restored))
    )


def test_operations_that_cannot_undo_have_no_deduct() -> None:
    # given the operations whose fold cannot be undone exactly
    names = {case.name for case in CASES} - DEDUCTING
    # then they offer no deduct, while the others do
    assert all(case.make_op().deduct_fn is None for case in CASES if case.name in names)
    assert all(case.make_op().deduct_fn is not None for case in CASES if case.name in DEDUCTING)


# --------------------------------------------------------------------------- empty inputs, specific semantics


@pytest.mark.parametrize(
    ("op", "expected"),
    [
        (agg.counting(), 0),
        (agg.summing(), 0),
        (agg.averaging(), math.nan),
        (agg.linear_trend(first, second), math.nan),
        (agg.min_by(abs), None),
        (agg.max_by(abs), None),
        (agg.top_n(3), []),
        (agg.bottom_n(3), []),
        (agg.to_list(), []),
        (agg.to_set(), set()),
        (agg.to_dict(first, second), {}),
        (agg.grouping_by(abs), {}),
        (agg.all_of(agg.counting(), agg.max_by(abs)), (0, None)),
        (agg.pick_any(), None),
        (agg.concatenating("-", "[", "]"), "[]"),
        (agg.reducing(1, int, lambda a, b: a * b), 1),
        (agg.mapping(abs, agg.summing()), 0),
        (agg.filtering(bool, agg.counting()), 0),
        (agg.flat_mapping(list, agg.to_list()), []),
    ],
)
def test_an_empty_input_gives_the_empty_result(op: Op, expected: Any) -> None:
    # given no items, when the operation finishes, then it gives its empty result
    assert same(expected, result_of(op, []))


def test_summing_floats_in_two_stages_matches_the_plain_sum() -> None:
    # given floats split in parts
    rng = random.Random(7)
    items = [rng.uniform(-1e3, 1e3) for _ in range(200)]
    # when summed in one and in two stages, then both agree with math.fsum up to rounding
    assert result_of(agg.summing(), items) == pytest.approx(math.fsum(items))
    assert two_stage_result(agg.summing(), random_parts(rng, items)) == pytest.approx(math.fsum(items))


def test_linear_trend_of_a_noisy_line_over_float_coordinates_recovers_its_slope() -> None:
    # given points near y = -0.5 x + 2 with float coordinates
    rng = random.Random(3)
    pts = [(x / 10, -0.5 * x / 10 + 2 + rng.uniform(-0.01, 0.01)) for x in range(100)]
    # when the trend is computed in two stages
    slope = two_stage_result(agg.linear_trend(first, second), random_parts(rng, pts))
    # then it is the least-squares slope
    assert slope == pytest.approx(reference_slope_float(pts), rel=1e-9)
    assert slope == pytest.approx(-0.5, abs=1e-2)


def reference_slope_float(pts: list[tuple[float, float]]) -> float:
    mean_x = sum(x for x, _ in pts) / len(pts)
    mean_y = sum(y for _, y in pts) / len(pts)
    return sum((x - mean_x) * (y - mean_y) for x, y in pts) / sum((x - mean_x) ** 2 for x, _ in pts)


def test_linear_trend_is_nan_when_every_x_is_the_same() -> None:
    # given three points on a vertical line, then the slope is undefined
    assert math.isnan(result_of(agg.linear_trend(first, second), [(1, 0), (1, 5), (1, 9)]))


def test_min_by_and_max_by_keep_the_first_of_equal_items_also_across_combine() -> None:
    # given equal keys in the left and the right partial
    op_min, op_max = agg.min_by(first), agg.max_by(first)
    left, right = [(1, "left")], [(1, "right")]
    # when combined, then the left (earlier) item is kept
    assert op_min.finish_fn(op_min.require_combine()(fold(op_min, left), fold(op_min, right))) == (1, "left")
    assert op_max.finish_fn(op_max.require_combine()(fold(op_max, left), fold(op_max, right))) == (1, "left")


def test_top_n_never_compares_the_items_themselves() -> None:
    # given items that cannot be ordered, with equal keys
    items = [{"k": 1, "v": "a"}, {"k": 1, "v": "b"}, {"k": 2, "v": "c"}, {"k": 1, "v": "d"}]
    # when the top 2 and bottom 2 are taken
    top = result_of(agg.top_n(2, lambda d: d["k"]), items)
    bottom = result_of(agg.bottom_n(2, lambda d: d["k"]), items)
    # then ties go to the first seen and no TypeError arises
    assert [d["v"] for d in top] == ["c", "a"]
    assert [d["v"] for d in bottom] == ["a", "b"]


def test_to_dict_without_merge_rejects_a_duplicate_key_naming_it() -> None:
    # given an operation that does not merge
    op = agg.to_dict(first, second)
    # when a key arrives twice, in one accumulator or across a combine, then the error names the key
    with pytest.raises(ValueError, match="duplicate key 'k'"):
        fold(op, [("k", 1), ("k", 2)])
    with pytest.raises(ValueError, match="duplicate key 'k'"):
        op.require_combine()(fold(op, [("k", 1)]), fold(op, [("k", 2)]))


def test_concatenating_adds_no_delimiter_for_empty_strings_like_jet() -> None:
    # given empty strings at the start, the middle and the end, split over two partials
    op = agg.concatenating("/")
    combined = op.require_combine()(fold(op, ["", "a", ""]), fold(op, ["", "b", ""]))
    # then the delimiter only separates the non-empty strings
    assert op.finish_fn(combined) == "a/b"


def test_pick_any_becomes_empty_when_every_item_is_deducted() -> None:
    # given an accumulator of two items
    op = agg.pick_any()
    assert op.deduct_fn is not None
    acc = fold(op, ["a", "b"])
    # when the same items are deducted, then nothing is left to pick
    assert op.finish_fn(op.deduct_fn(acc, fold(op, ["x", "y"]))) is None


def test_composites_over_an_operation_without_combine_cannot_combine() -> None:
    # given a downstream operation without combine
    no_combine = agg.AggregateOperation.with_create(int).and_accumulate(lambda acc, _item: acc + 1)
    # then grouping and all_of over it cannot combine either, and wrappers keep that
    assert agg.grouping_by(abs, no_combine).combine_fn is None
    assert agg.all_of(agg.counting(), no_combine).combine_fn is None
    assert agg.mapping(abs, no_combine).combine_fn is None


def test_all_of_two_and_three_operations_gives_tuples_of_that_size() -> None:
    # given two and three operations over the same items
    items = [4, 1, 3]
    # then the results are pairs and triples, in the order of the operations
    assert result_of(agg.all_of(agg.min_by(abs), agg.max_by(abs)), items) == (1, 4)
    assert result_of(agg.all_of(agg.counting(), agg.top_n(1), agg.to_set()), items) == (3, [4], {1, 3, 4})


# --------------------------------------------------------------------------- bad arguments


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: agg.top_n(0), ValueError, "n must be a positive int, got 0"),
        (lambda: agg.bottom_n(-2), ValueError, "n must be a positive int, got -2"),
        (lambda: agg.top_n(True), ValueError, "n must be a positive int"),
        (lambda: agg.top_n(2.5), ValueError, "n must be a positive int"),
        (lambda: agg.top_n(2, "len"), TypeError, "key_fn must be callable"),
        (lambda: agg.min_by(3), TypeError, "key_fn must be callable"),
        (lambda: agg.max_by(None), TypeError, "key_fn must be callable"),
        (lambda: agg.summing(5), TypeError, "get_value must be callable"),
        (lambda: agg.averaging("x"), TypeError, "get_value must be callable"),
        (lambda: agg.linear_trend(1, first), TypeError, "get_x must be callable"),
        (lambda: agg.linear_trend(first, 1), TypeError, "get_y must be callable"),
        (lambda: agg.to_dict(1, second), TypeError, "key_fn must be callable"),
        (lambda: agg.to_dict(first, 1), TypeError, "value_fn must be callable"),
        (lambda: agg.to_dict(first, second, 1), TypeError, "merge_fn must be callable"),
        (lambda: agg.grouping_by(1), TypeError, "key_fn must be callable"),
        (lambda: agg.grouping_by(abs, len), TypeError, "downstream must be an AggregateOperation"),
        (lambda: agg.reducing(0, 1, _sum2), TypeError, "get_value must be callable"),
        (lambda: agg.reducing(0, abs, None), TypeError, "combine_fn must be callable"),
        (lambda: agg.reducing(0, abs, _sum2, 1), TypeError, "deduct_fn must be callable"),
        (lambda: agg.mapping(1, agg.counting()), TypeError, "map_fn must be callable"),
        (lambda: agg.mapping(abs, "counting"), TypeError, "downstream must be an AggregateOperation"),
        (lambda: agg.filtering(None, agg.counting()), TypeError, "predicate must be callable"),
        (lambda: agg.flat_mapping(1, agg.to_list()), TypeError, "flat_map_fn must be callable"),
        (lambda: agg.concatenating(1), TypeError, "delimiter must be a str"),
        (lambda: agg.concatenating(",", None), TypeError, "prefix must be a str"),
        (lambda: agg.concatenating(",", "", 0), TypeError, "suffix must be a str"),
        (lambda: agg.all_of(), ValueError, "at least one operation"),
        (
            lambda: agg.all_of(agg.counting(), 5),
            TypeError,
            "all_of operation 1 must be an AggregateOperation",
        ),
    ],
)
def test_a_bad_argument_is_rejected_with_its_name(
    make: Callable[[], Any], error: type[Exception], message: str
) -> None:
    # given a bad argument, when the operation is made, then the error names the argument
    with pytest.raises(error, match=message):
        make()


def test_a_downstream_over_two_inputs_is_rejected() -> None:
    # given an operation over two inputs
    two_inputs = agg.AggregateOperation.with_create(int).and_accumulate0(_sum2).and_accumulate1(_sub2)
    # when it is used as a downstream, then the error says it needs a single input
    with pytest.raises(ValueError, match="downstream must aggregate a single input, but it has 2 inputs"):
        agg.filtering(bool, two_inputs)


# --------------------------------------------------------------------------- in processors and docs


@pytest.mark.parametrize(
    ("op", "items", "expected"),
    [
        (agg.top_n(2, first), [(3, "a"), (5, "b"), (3, "c"), (5, "d")], [(5, "b"), (5, "d")]),
        (
            agg.grouping_by(first, agg.mapping(second, agg.to_set())),
            [(1, "a"), (2, "b"), (1, "c")],
            {1: {"a", "c"}, 2: {"b"}},
        ),
        (agg.linear_trend(first, second), [(0, 0), (1, 2), (2, 4)], 2.0),
        (agg.concatenating(","), ["x", "y", "z"], "x,y,z"),
    ],
)
def test_an_aggregate_processor_with_snapshots_gives_the_reference_result(
    op: Op, items: list[Any], expected: Any
) -> None:
    # given an aggregating processor over the operation, snapshotted and restored after every item
    # when it processes the items, then it emits the expected result once
    verify_processor(processors.aggregate_p(op)).input(items).expect_output([expected]).verify()


def test_the_docstring_examples_run_as_written() -> None:
    # given the examples in the operations' docstrings, when they run, then they all pass
    outcome = doctest.testmod(operations)
    assert outcome.attempted >= 20
    assert outcome.failed == 0


# --------------------------------------------------------------------------- a batch's fold


def _summing_prices_by_batch(calls: Counter[str]) -> agg.AggregateOperation[int, int]:
    def one(acc: int, item: tuple[str, int]) -> int:
        calls["item"] += 1
        return acc + item[1]

    def batch(acc: int, items: list[tuple[str, int]]) -> int:
        calls["batch"] += 1
        return acc + sum(map(second, items))

    return agg.AggregateOperation.with_create(int).and_accumulate(one).and_accumulate_batch(batch)


def test_a_batch_function_folds_a_list_as_the_accumulate_function_would_and_survives_the_builder() -> None:
    calls: Counter[str] = Counter()
    items = [("a", 3), ("b", 4), ("c", 5)]
    op = _summing_prices_by_batch(calls).and_combine(lambda a, b: a + b).and_export_finish(str).and_then(len)
    # the batch function is kept by every later builder step, and fold_fn is it for input 0
    assert op.fold_fn(0)(0, items) == reduce(op.accumulate_fn(0), items, 0) == 12
    assert calls == {"batch": 1, "item": 3}
    # an operation without one folds with its accumulate function, item by item
    plain = agg.AggregateOperation.with_create(int).and_accumulate(lambda acc, item: acc + item[1])
    assert plain.fold_fn(0)(1, items) == 13
    with pytest.raises(ValueError, match="no accumulate function for input 1"):
        plain.fold_fn(1)
    with pytest.raises(TypeError, match="and_accumulate_batch needs a callable, got 7"):
        plain.and_accumulate_batch(7)  # type: ignore[arg-type]


def test_an_ungrouped_aggregation_folds_each_inbox_with_the_batch_function() -> None:
    calls: Counter[str] = Counter()
    items = [("a", i) for i in range(50)]
    # when the aggregating processor takes the items (the harness gives them in batches and one by
    # one, snapshotting between), then the sum is the reference's and no item went one by one
    op = _summing_prices_by_batch(calls).and_combine(lambda a, b: a + b)
    verify_processor(processors.aggregate_p(op)).input(items).expect_output([sum(range(50))]).verify()
    assert calls["batch"] > 0 and calls["item"] == 0


def test_an_operation_rebuilt_with_another_accumulate_function_no_longer_uses_the_batch_function() -> None:
    calls: Counter[str] = Counter()
    items = [("a", 3), ("b", 4), ("c", 5)]
    with_batch = _summing_prices_by_batch(calls)
    # filtering (as mapping and flat_mapping) puts its own accumulate function in front: the fold
    # must filter, not sum every item through the batch function
    filtered = agg.filtering(lambda item: item[0] != "b", with_batch)
    assert filtered.fold_fn(0)(0, items) == 8
    # so does a later and_accumulate
    counted = with_batch.and_accumulate(lambda acc, _item: acc + 1)
    assert counted.fold_fn(0)(0, items) == 3
    assert calls["batch"] == 0
    with pytest.raises(ValueError, match=r"call and_accumulate\(fn\) first"):
        agg.AggregateOperation.with_create(int).and_accumulate_batch(lambda acc, items: acc)
