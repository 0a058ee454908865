"""AggregateOperations (counting, summing, averaging, to_list), the fluent builder, and the
combine/deduct algebra over seeded random data."""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Callable
from typing import Any

import pytest

from jetlet.aggregate import AggregateOperation, averaging, counting, summing, to_list

_SEEDS = range(5)


def _fold(op: AggregateOperation[Any, Any], items: list[Any], ordinal: int = 0) -> Any:
    acc = op.create_fn()
    accumulate = op.accumulate_fn(ordinal)
    for item in items:
        acc = accumulate(acc, item)
    return acc


def _random_ints(seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randint(-500, 500) for _ in range(rng.randint(0, 60))]


def _ops() -> list[tuple[str, AggregateOperation[Any, Any], Callable[[list[int]], Any]]]:
    return [
        ("counting", counting(), len),
        ("summing", summing(), sum),
        ("summing(abs)", summing(abs), lambda xs: sum(abs(x) for x in xs)),
        ("averaging", averaging(), lambda xs: sum(xs) / len(xs) if xs else math.nan),
        ("to_list", to_list(), list),
    ]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


@pytest.mark.parametrize("seed", _SEEDS)
def test_given_random_ints_when_folded_and_finished_then_equal_the_python_reference(seed: int) -> None:
    data = _random_ints(seed)
    for name, op, reference in _ops():
        acc = _fold(op, data)
        assert _same(op.export_fn(acc), reference(data)), name
        assert _same(op.finish_fn(acc), reference(data)), name


@pytest.mark.parametrize("seed", _SEEDS)
def test_given_split_data_when_combining_partials_then_equal_accumulating_everything(seed: int) -> None:
    # accumulate(a + b) == combine(acc(a), acc(b))
    data = _random_ints(seed)
    cut = random.Random(seed).randint(0, len(data))
    left, right = data[:cut], data[cut:]
    for name, op, _ in _ops():
        combine = op.require_combine()
        combined = combine(_fold(op, left), _fold(op, right))
        assert _same(op.finish_fn(combined), op.finish_fn(_fold(op, data))), name


@pytest.mark.parametrize("seed", _SEEDS)
def test_given_combined_accumulators_when_deducting_one_then_the_other_remains(seed: int) -> None:
    # deduct(combine(x, y), y) == x for the operations that can deduct
    data = _random_ints(seed)
    cut = len(data) // 3
    for op in (counting(), summing(), averaging()):
        assert op.deduct_fn is not None
        x, y = _fold(op, data[:cut]), _fold(op, data[cut:])
        assert op.deduct_fn(op.require_combine()(x, y), y) == x


def test_given_to_list_when_exported_then_later_accumulation_does_not_change_the_export() -> None:
    op = to_list()
    acc = _fold(op, [1, 2])
    exported = op.export_fn(acc)
    acc = op.accumulate_fn()(acc, 3)
    assert exported == [1, 2]
    assert op.finish_fn(acc) == [1, 2, 3]
    assert to_list().deduct_fn is None


def test_given_averaging_of_no_items_then_nan() -> None:
    assert math.isnan(averaging().finish_fn(averaging().create_fn()))


def test_given_fresh_accumulators_when_created_then_independent() -> None:
    op = to_list()
    a, b = op.create_fn(), op.create_fn()
    op.accumulate_fn()(a, "x")
    assert b == []


# -- builder ------------------------------------------------------------------------
def _min_max() -> AggregateOperation[tuple[float, float], Any]:
    return (
        AggregateOperation.with_create(lambda: (math.inf, -math.inf))
        .and_accumulate(lambda acc, x: (min(acc[0], x), max(acc[1], x)))
        .and_combine(lambda a, b: (min(a[0], b[0]), max(a[1], b[1])))
        .and_export(lambda acc: ("export", acc))
        .and_finish(lambda acc: ("finish", acc))
    )


def test_given_builder_when_each_step_added_then_the_operation_holds_those_functions() -> None:
    op = _min_max()
    acc = _fold(op, [3, -1, 7])
    assert acc == (-1, 7)
    assert op.export_fn(acc) == ("export", (-1, 7))
    assert op.finish_fn(acc) == ("finish", (-1, 7))
    assert op.require_combine()((0, 1), (-5, 0)) == (-5, 1)
    assert op.deduct_fn is None
    assert op.arity == 1


def test_given_builder_steps_when_applied_then_the_original_is_unchanged() -> None:
    base = AggregateOperation.with_create(int).and_accumulate(lambda a, x: a + x)
    snapshot = copy.copy(base)
    base.and_combine(lambda a, b: a + b).and_deduct(lambda a, b: a - b).and_export(str)
    assert base == snapshot
    assert base.combine_fn is None and base.export_fn(5) == 5


def test_given_and_then_when_exporting_and_finishing_then_fn_applies_after_both() -> None:
    op = _min_max().and_then(lambda result: (result[0].upper(), result[1]))
    acc = _fold(op, [2, 4])
    assert op.export_fn(acc) == ("EXPORT", (2, 4))
    assert op.finish_fn(acc) == ("FINISH", (2, 4))


def test_given_and_export_finish_when_built_then_both_are_the_same_fn() -> None:
    op = counting().and_export_finish(lambda n: n * 10)
    assert op.export_fn(3) == op.finish_fn(3) == 30


def test_given_per_input_accumulators_when_built_then_arity_and_lookup_follow() -> None:
    op = (
        AggregateOperation.with_create(lambda: [0, 0])
        .and_accumulate0(lambda acc, x: [acc[0] + x, acc[1]])
        .and_accumulate_at(2, lambda acc, x: [acc[0], acc[1] + x])
    )
    assert op.arity == 3
    assert _fold(op, [1, 2], 0) == [3, 0]
    assert _fold(op, [5], 2) == [0, 5]
    with pytest.raises(ValueError, match="no accumulate function for input 1"):
        op.accumulate_fn(1)
    with pytest.raises(ValueError, match="no accumulate function for input 3"):
        op.accumulate_fn(3)
    two = (
        AggregateOperation.with_create(int)
        .and_accumulate1(lambda a, x: a + x)
        .and_accumulate2(lambda a, x: a)
    )
    assert two.arity == 3 and two.accumulate_fns[0] is None


def test_given_bad_builder_arguments_when_building_then_type_error() -> None:
    with pytest.raises(TypeError, match="with_create needs a callable"):
        AggregateOperation.with_create(0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="accumulate function for input 0 must be callable"):
        AggregateOperation.with_create(int).and_accumulate("nope")  # type: ignore[arg-type]


def test_given_no_combine_when_required_then_value_error_explains_two_stages() -> None:
    with pytest.raises(ValueError, match=r"cannot run in two stages; add one with .and_combine"):
        AggregateOperation.with_create(int).and_accumulate(lambda a, x: a).require_combine()


def test_given_no_accumulate_when_asked_then_value_error() -> None:
    with pytest.raises(ValueError, match="no accumulate function for input 0"):
        AggregateOperation.with_create(int).accumulate_fn()
