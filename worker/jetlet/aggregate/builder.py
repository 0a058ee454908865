"""Co-aggregation of several inputs by tags (Jet's ``aggregateOperation2/3`` and builders).

Each input ``i`` gets its own aggregate operation; the composite
accumulator is the list of the inputs' accumulators, and input ``i``'s items
only touch slot ``i``. The result is one value per input: a tuple for
:func:`aggregate_operation2` / :func:`aggregate_operation3`, a
:class:`ItemsByTag` for the builder.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar

from jetlet.aggregate import operation as agg

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Tag(Generic[T]):
    """Identifies one input of a co-aggregation and the type of its result."""

    index: int

    def __repr__(self) -> str:
        return f"Tag({self.index})"


class ItemsByTag(Mapping[Tag[Any], Any]):
    """The results of a co-aggregation, looked up by tag: ``results[tag]``."""

    def __init__(self, values: Sequence[Any]) -> None:
        self._values = list(values)

    def __getitem__(self, tag: Tag[Any]) -> Any:
        return self._values[tag.index]

    def __iter__(self) -> Iterator[Tag[Any]]:
        return (Tag(i) for i in range(len(self._values)))

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ItemsByTag) and other._values == self._values

    def __hash__(self) -> int:
        return hash(tuple(map(repr, self._values)))

    def __repr__(self) -> str:
        return f"ItemsByTag({self._values!r})"


def co_aggregate(
    ops: Sequence[agg.AggregateOperation[Any, Any]], shape: Callable[[list[Any]], Any] = tuple
) -> agg.AggregateOperation[list[Any], Any]:
    """One operation over ``len(ops)`` inputs: input ``i`` is folded by ``ops[i]``."""
    if not ops:
        raise ValueError("co-aggregation needs at least one operation")
    creates = [op.create_fn for op in ops]
    accumulates = [op.accumulate_fn(0) for op in ops]
    combines = [op.combine_fn for op in ops]
    exports = [op.export_fn for op in ops]
    finishes = [op.finish_fn for op in ops]

    def accumulate_at(i: int) -> Callable[[list[Any], Any], list[Any]]:
        inner = accumulates[i]

        def accumulate(acc: list[Any], item: Any) -> list[Any]:
            acc[i] = inner(acc[i], item)
            return acc

        return accumulate

    result: agg.AggregateOperation[list[Any], Any] = agg.AggregateOperation.with_create(
        lambda: [create() for create in creates]
    )
    for i in range(len(ops)):
        result = result.and_accumulate_at(i, accumulate_at(i))
    if all(c is not None for c in combines):

        def combine(a: list[Any], b: list[Any]) -> list[Any]:
            return [c(x, y) for c, x, y in zip(combines, a, b, strict=True)]  # type: ignore[misc]

        result = result.and_combine(combine)
    if all(op.collects_items for op in ops):
        result = result.and_collects_items()
    return result.and_export(lambda acc: shape([e(a) for e, a in zip(exports, acc, strict=True)])).and_finish(
        lambda acc: shape([f(a) for f, a in zip(finishes, acc, strict=True)])
    )


def aggregate_operation2(
    op0: agg.AggregateOperation[Any, Any], op1: agg.AggregateOperation[Any, Any]
) -> agg.AggregateOperation[list[Any], Any]:
    """Two inputs, each with its own operation; the result is ``(result0, result1)``."""
    return co_aggregate([op0, op1])


def aggregate_operation3(
    op0: agg.AggregateOperation[Any, Any],
    op1: agg.AggregateOperation[Any, Any],
    op2: agg.AggregateOperation[Any, Any],
) -> agg.AggregateOperation[list[Any], Any]:
    """Three inputs; the result is ``(result0, result1, result2)``."""
    return co_aggregate([op0, op1, op2])
