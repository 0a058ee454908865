"""The built-in aggregate operations (Jet's ``AggregateOperations``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jetlet.aggregate.operation import AggregateOperation


def _add(a: Any, b: Any) -> Any:
    return a + b


def _sub(a: Any, b: Any) -> Any:
    return a - b


def counting() -> AggregateOperation[int, int]:
    """Counts items."""
    return (
        AggregateOperation.with_create(int)
        .and_accumulate(lambda acc, _item: acc + 1)
        .and_combine(_add)
        .and_deduct(_sub)
    )


def summing(get_value: Callable[[Any], Any] = lambda item: item) -> AggregateOperation[Any, Any]:
    """Sums ``get_value(item)`` over the items (0 for none)."""
    return (
        AggregateOperation.with_create(int)
        .and_accumulate(lambda acc, item: acc + get_value(item))
        .and_combine(_add)
        .and_deduct(_sub)
    )


def averaging(get_value: Callable[[Any], Any] = lambda item: item) -> AggregateOperation[Any, float]:
    """The mean of ``get_value(item)``; NaN for no items."""
    return (
        AggregateOperation.with_create(lambda: (0, 0))
        .and_accumulate(lambda acc, item: (acc[0] + 1, acc[1] + get_value(item)))
        .and_combine(lambda a, b: (a[0] + b[0], a[1] + b[1]))
        .and_deduct(lambda a, b: (a[0] - b[0], a[1] - b[1]))
        .and_export_finish(lambda acc: acc[1] / acc[0] if acc[0] else float("nan"))
    )


def to_list() -> AggregateOperation[list[Any], list[Any]]:
    """All items in a list (in arrival order within a processor)."""

    def accumulate(acc: list[Any], item: Any) -> list[Any]:
        acc.append(item)
        return acc

    def combine(a: list[Any], b: list[Any]) -> list[Any]:
        a.extend(b)
        return a

    return (
        AggregateOperation.with_create(list)
        .and_accumulate(accumulate)
        .and_combine(combine)
        .and_export(list)
        .and_finish(lambda acc: acc)
    )
