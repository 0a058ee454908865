"""The built-in aggregate operations (Jet's ``AggregateOperations``).

Every factory here returns an :class:`~jetlet.aggregate.operation.AggregateOperation`
whose functions *return* the accumulator. Small accumulators are immutable
values (an ``int``, a tuple) and every function builds a new one; larger ones
are mutable objects (a list, a set, a dict, a heap) that the functions update
in place and return.

The aliasing rule every operation here follows, and that a hand-written
operation must follow to run in two stages or in a sliding window:

* ``combine(a, b)`` may mutate and return ``a``, but it leaves ``b`` unchanged
  and keeps none of ``b``'s mutable parts (it copies what it takes, item
  references excepted), so ``b`` stays usable: a sliding window later deducts
  the very frame accumulator it combined.
* ``deduct(a, b)`` may mutate and return ``a`` and leaves ``b`` unchanged.
* ``export(acc)`` returns a result that shares nothing mutable with ``acc``;
  ``finish(acc)`` is the last call on ``acc`` and may hand out its internals.

Snapshots copy accumulators cheaply (``copy_fn``, see
:class:`~jetlet.aggregate.operation.AggregateOperation`): the immutable ones
(counting, summing, averaging, linear trend, min/max by, pick any) are kept
as they are; :func:`to_list`, :func:`to_set`, :func:`top_n` and
:func:`bottom_n` copy their container (the items are shared: an aggregation
never changes its items); :func:`all_of` copies each part when every part
can be copied, and :func:`mapping`, :func:`filtering` and
:func:`flat_mapping` keep their operation's copy. The others are pickled at
the barrier.

``deduct`` exists where the fold can be undone exactly: counting, summing,
averaging, linear trend, :func:`pick_any`, :func:`reducing` given a
``deduct_fn``, and the wrappers (:func:`mapping`, :func:`filtering`,
:func:`flat_mapping`, :func:`all_of`) over operations that can deduct.

The examples fold a list with :func:`functools.reduce`, which is what a
single-stage aggregation does:

>>> from functools import reduce
>>> op = top_n(2)
>>> op.finish_fn(reduce(op.accumulate_fn(), [3, 1, 4, 1, 5], op.create_fn()))
[5, 4]
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import operator
from collections.abc import Callable, Hashable, Iterable
from typing import Any, TypeVar

from jetlet.aggregate.operation import AggregateOperation
from jetlet.errors import require_callable

T = TypeVar("T")

_Reference = tuple[Any, T] | None  # (key, item) of the best item so far, None for no items


_add: Callable[[Any, Any], Any] = operator.add
"""``a + b`` as a C function: combine and deduct run once per key per frame, so no Python frame per call."""


def _count_one(acc: int, _item: Any) -> int:
    return acc + 1


COUNT_ONE = _count_one
"""Counting's accumulate function: processors may count a run of items at once (in C) when they see it."""

ADD = _add
"""The combine function of counting and summing: processors may add inline when they see it."""


_sub: Callable[[Any, Any], Any] = operator.sub


def _identity(item: T) -> T:
    return item


def _new_dict() -> dict[Any, Any]:
    return {}


def _require_downstream(op: object, name: str = "downstream") -> AggregateOperation[Any, Any]:
    if not isinstance(op, AggregateOperation):
        raise TypeError(f"{name} must be an AggregateOperation, got {op!r}")
    if op.arity != 1:
        raise ValueError(f"{name} must aggregate a single input, but it has {op.arity} inputs")
    return op


# --------------------------------------------------------------------------- counting, summing, averaging


def counting() -> AggregateOperation[int, int]:
    """Counts items.

    >>> from functools import reduce
    >>> op = counting()
    >>> op.finish_fn(reduce(op.accumulate_fn(), "abc", op.create_fn()))
    3
    """
    return (
        AggregateOperation.with_create(int)
        .and_accumulate(_count_one)
        .and_combine(_add)
        .and_deduct(_sub)
        .and_immutable()
    )


def summing(get_value: Callable[[Any], Any] = _identity) -> AggregateOperation[Any, Any]:
    """Sums ``get_value(item)`` over the items (0 for none); works for ints and floats.

    >>> from functools import reduce
    >>> op = summing(len)
    >>> op.finish_fn(reduce(op.accumulate_fn(), ["ab", "cde"], op.create_fn()))
    5
    """
    require_callable(get_value, "get_value")
    return (
        AggregateOperation.with_create(int)
        .and_accumulate(lambda acc, item: acc + get_value(item))
        .and_combine(_add)
        .and_deduct(_sub)
        .and_immutable()
    )


def averaging(get_value: Callable[[Any], Any] = _identity) -> AggregateOperation[Any, float]:
    """The mean of ``get_value(item)``; NaN for no items.

    >>> from functools import reduce
    >>> op = averaging()
    >>> op.finish_fn(reduce(op.accumulate_fn(), [1, 2, 6], op.create_fn()))
    3.0
    """
    require_callable(get_value, "get_value")
    return (
        AggregateOperation.with_create(lambda: (0, 0))
        .and_accumulate(lambda acc, item: (acc[0] + 1, acc[1] + get_value(item)))
        .and_combine(lambda a, b: (a[0] + b[0], a[1] + b[1]))
        .and_deduct(lambda a, b: (a[0] - b[0], a[1] - b[1]))
        .and_export_finish(lambda acc: acc[1] / acc[0] if acc[0] else float("nan"))
        .and_immutable()
    )


# --------------------------------------------------------------------------- linear trend


_NO_POINTS = (0, 0, 0, 0, 0)  # (n, sum x, sum y, sum x*y, sum x*x)


def linear_trend(
    get_x: Callable[[Any], float], get_y: Callable[[Any], float]
) -> AggregateOperation[tuple[Any, ...], float]:
    """The slope of the least-squares line through the points ``(get_x(item), get_y(item))``.

    The accumulator is the tuple of sums ``(n, Σx, Σy, Σxy, Σx²)``, so combine
    and deduct are exact for integer coordinates (Python ints do not
    overflow, as Jet's ``BigInteger`` sums do not). The slope is
    ``(nΣxy - ΣxΣy) / (nΣx² - (Σx)²)``; NaN for fewer than two points or when
    every x is the same.

    >>> from functools import reduce
    >>> op = linear_trend(lambda p: p[0], lambda p: p[1])
    >>> op.finish_fn(reduce(op.accumulate_fn(), [(0, 1), (1, 3), (2, 5)], op.create_fn()))
    2.0
    """
    require_callable(get_x, "get_x")
    require_callable(get_y, "get_y")

    def accumulate(acc: tuple[Any, ...], item: Any) -> tuple[Any, ...]:
        x, y = get_x(item), get_y(item)
        n, sx, sy, sxy, sxx = acc
        return (n + 1, sx + x, sy + y, sxy + x * y, sxx + x * x)

    return (
        AggregateOperation.with_create(lambda: _NO_POINTS)
        .and_accumulate(accumulate)
        .and_combine(lambda a, b: tuple(map(_add, a, b)))
        .and_deduct(lambda a, b: tuple(map(_sub, a, b)))
        .and_export_finish(_slope)
        .and_immutable()
    )


def _slope(acc: tuple[Any, ...]) -> float:
    n, sx, sy, sxy, sxx = acc
    denominator = n * sxx - sx * sx
    if n < 2 or denominator == 0:
        return math.nan
    return float((n * sxy - sx * sy) / denominator)


# --------------------------------------------------------------------------- min_by, max_by, pick_any


def min_by(key_fn: Callable[[T], Any]) -> AggregateOperation[_Reference[T], T | None]:
    """The item with the least ``key_fn(item)``; the first seen among equals; None for no items.

    >>> from functools import reduce
    >>> op = min_by(len)
    >>> op.finish_fn(reduce(op.accumulate_fn(), ["ccc", "a", "b"], op.create_fn()))
    'a'
    """
    require_callable(key_fn, "key_fn")
    return _best_by(key_fn, operator.lt)


def max_by(key_fn: Callable[[T], Any]) -> AggregateOperation[_Reference[T], T | None]:
    """The item with the greatest ``key_fn(item)``; the first seen among equals; None for no items.

    >>> from functools import reduce
    >>> op = max_by(len)
    >>> op.finish_fn(reduce(op.accumulate_fn(), ["a", "bbb", "ccc"], op.create_fn()))
    'bbb'
    """
    require_callable(key_fn, "key_fn")
    return _best_by(key_fn, operator.gt)


def _best_by(
    key_fn: Callable[[T], Any], beats: Callable[[Any, Any], bool]
) -> AggregateOperation[_Reference[T], T | None]:
    """The accumulator is ``(key, item)`` of the best so far; a later item replaces it only if it beats it.

    ``beats(candidate_key, best_key)`` is ``operator.lt`` or ``operator.gt``: a C
    function, as it is called once per item.
    """

    def accumulate(acc: _Reference[T], item: T) -> _Reference[T]:
        key = key_fn(item)
        return (key, item) if acc is None or beats(key, acc[0]) else acc

    def combine(a: _Reference[T], b: _Reference[T]) -> _Reference[T]:
        return b if a is None or (b is not None and beats(b[0], a[0])) else a

    def result(acc: _Reference[T]) -> T | None:
        return None if acc is None else acc[1]

    empty: _Reference[T] = None
    return (
        AggregateOperation.with_create(lambda: empty)
        .and_accumulate(accumulate)
        .and_combine(combine)
        .and_export_finish(result)
        .and_immutable()
    )


def pick_any() -> AggregateOperation[tuple[Any, int], Any]:
    """Some item of the input (here the first seen); None for no items.

    The accumulator counts the items as well, as Jet's does, so it can
    deduct: deducting every item leaves None.

    >>> from functools import reduce
    >>> op = pick_any()
    >>> op.finish_fn(reduce(op.accumulate_fn(), ["x", "y"], op.create_fn()))
    'x'
    """

    def deduct(a: tuple[Any, int], b: tuple[Any, int]) -> tuple[Any, int]:
        count = a[1] - b[1]
        return (a[0] if count else None, count)

    return (
        AggregateOperation.with_create(lambda: (None, 0))
        .and_accumulate(lambda acc, item: (item if acc[1] == 0 else acc[0], acc[1] + 1))
        .and_combine(lambda a, b: (a[0] if a[1] else b[0], a[1] + b[1]))
        .and_deduct(deduct)
        .and_export_finish(lambda acc: acc[0])
        .and_immutable()
    )


# --------------------------------------------------------------------------- top_n, bottom_n


class _Descending:
    """Wraps a key so that it sorts the other way round (bottom_n keeps a heap of the greatest on top)."""

    __slots__ = ("key",)

    def __init__(self, key: Any) -> None:
        self.key = key

    def __lt__(self, other: _Descending) -> bool:
        return bool(other.key < self.key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Descending) and bool(self.key == other.key)


@dataclasses.dataclass
class _Ranking:
    """The best ``n`` items seen, as a min-heap with the *worst* kept item on top.

    An entry is ``(rank, -seq, item)``: ``rank`` is the key (wrapped in
    :class:`_Descending` for bottom_n) and ``seq`` the item's arrival number,
    so among equal keys the later arrival is worse and the first seen is kept
    (what :func:`heapq.nlargest` / :func:`heapq.nsmallest` do). ``seq`` is
    unique within a ranking, so items themselves are never compared.
    """

    heap: list[tuple[Any, int, Any]] = dataclasses.field(default_factory=list)
    seen: int = 0

    def copy(self) -> _Ranking:
        """A copy for snapshots: the heap's entries are tuples, so a new list of them is enough."""
        return _Ranking(list(self.heap), self.seen)


def top_n(n: int, key_fn: Callable[[Any], Any] = _identity) -> AggregateOperation[_Ranking, list[Any]]:
    """The ``n`` items with the greatest ``key_fn(item)``, greatest first; the first seen wins ties.

    The accumulator is a heap of at most ``n`` items; combining two merges
    their heaps, the left one's items counting as seen first.

    >>> from functools import reduce
    >>> op = top_n(3, key_fn=len)
    >>> op.finish_fn(reduce(op.accumulate_fn(), ["bb", "a", "dddd", "cc", "eee"], op.create_fn()))
    ['dddd', 'eee', 'bb']
    """
    return _ranking(n, key_fn, _identity, "top_n")


def bottom_n(n: int, key_fn: Callable[[Any], Any] = _identity) -> AggregateOperation[_Ranking, list[Any]]:
    """The ``n`` items with the least ``key_fn(item)``, least first; the first seen wins ties.

    >>> from functools import reduce
    >>> op = bottom_n(2)
    >>> op.finish_fn(reduce(op.accumulate_fn(), [5, 3, 9, 1], op.create_fn()))
    [1, 3]
    """
    return _ranking(n, key_fn, _Descending, "bottom_n")


def _ranking(
    n: int, key_fn: Callable[[Any], Any], rank_of: Callable[[Any], Any], name: str
) -> AggregateOperation[_Ranking, list[Any]]:
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise ValueError(f"{name}: n must be a positive int, got {n!r}")
    require_callable(key_fn, "key_fn")

    def offer(acc: _Ranking, entry: tuple[Any, int, Any]) -> None:
        if len(acc.heap) < n:
            heapq.heappush(acc.heap, entry)
        elif acc.heap[0] < entry:
            heapq.heapreplace(acc.heap, entry)

    def accumulate(acc: _Ranking, item: Any) -> _Ranking:
        acc.seen += 1
        offer(acc, (rank_of(key_fn(item)), -acc.seen, item))
        return acc

    def combine(a: _Ranking, b: _Ranking) -> _Ranking:
        for rank, negative_seq, item in b.heap:
            offer(a, (rank, negative_seq - a.seen, item))
        a.seen += b.seen
        return a

    def result(acc: _Ranking) -> list[Any]:
        return [item for _rank, _seq, item in sorted(acc.heap, reverse=True)]

    return (
        AggregateOperation.with_create(_Ranking)
        .and_accumulate(accumulate)
        .and_combine(combine)
        .and_export_finish(result)
        .and_copy(_Ranking.copy)
    )


# --------------------------------------------------------------------------- collections


def to_list() -> AggregateOperation[list[Any], list[Any]]:
    """All items in a list (in arrival order within a processor).

    >>> from functools import reduce
    >>> op = to_list()
    >>> op.finish_fn(reduce(op.accumulate_fn(), "ab", op.create_fn()))
    ['a', 'b']
    """

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
        .and_copy(list)
        .and_collects_items()
    )


def to_set() -> AggregateOperation[set[Any], set[Any]]:
    """The distinct items in a set.

    >>> from functools import reduce
    >>> op = to_set()
    >>> sorted(op.finish_fn(reduce(op.accumulate_fn(), "abba", op.create_fn())))
    ['a', 'b']
    """

    def accumulate(acc: set[Any], item: Any) -> set[Any]:
        acc.add(item)
        return acc

    def combine(a: set[Any], b: set[Any]) -> set[Any]:
        a |= b
        return a

    return (
        AggregateOperation.with_create(set)
        .and_accumulate(accumulate)
        .and_combine(combine)
        .and_export(set)
        .and_finish(lambda acc: acc)
        .and_copy(set)
    )


def to_dict(
    key_fn: Callable[[Any], Hashable],
    value_fn: Callable[[Any], Any],
    merge_fn: Callable[[Any, Any], Any] | None = None,
) -> AggregateOperation[dict[Any, Any], dict[Any, Any]]:
    """A dict ``{key_fn(item): value_fn(item)}`` (Jet's ``toMap``).

    Two items with the same key are an error (ValueError naming the key)
    unless ``merge_fn(old_value, new_value)`` says how to merge them.

    >>> from functools import reduce
    >>> op = to_dict(len, str.upper, merge_fn=lambda old, new: old + new)
    >>> op.finish_fn(reduce(op.accumulate_fn(), ["a", "bb", "c"], op.create_fn()))
    {1: 'AC', 2: 'BB'}
    """
    require_callable(key_fn, "key_fn")
    require_callable(value_fn, "value_fn")
    if merge_fn is not None:
        require_callable(merge_fn, "merge_fn")

    def put(acc: dict[Any, Any], key: Any, value: Any) -> None:
        if key not in acc:
            acc[key] = value
        elif merge_fn is None:
            raise ValueError(f"to_dict: duplicate key {key!r} (values {acc[key]!r} and {value!r})")
        else:
            acc[key] = merge_fn(acc[key], value)

    def accumulate(acc: dict[Any, Any], item: Any) -> dict[Any, Any]:
        put(acc, key_fn(item), value_fn(item))
        return acc

    def combine(a: dict[Any, Any], b: dict[Any, Any]) -> dict[Any, Any]:
        for key, value in b.items():
            put(a, key, value)
        return a

    return (
        AggregateOperation.with_create(dict)
        .and_accumulate(accumulate)
        .and_combine(combine)
        .and_export(dict)
        .and_finish(lambda acc: acc)
    )


def concatenating(
    delimiter: str = "", prefix: str = "", suffix: str = ""
) -> AggregateOperation[list[str], str]:
    """The string items joined: ``prefix + delimiter.join(items) + suffix``.

    As in Jet, an empty item adds no delimiter (it is as if it were absent).

    >>> from functools import reduce
    >>> op = concatenating(", ", "[", "]")
    >>> op.finish_fn(reduce(op.accumulate_fn(), ["a", "", "b"], op.create_fn()))
    '[a, b]'
    """
    for name, value in (("delimiter", delimiter), ("prefix", prefix), ("suffix", suffix)):
        if not isinstance(value, str):
            raise TypeError(f"concatenating: {name} must be a str, got {value!r}")

    def accumulate(acc: list[str], item: str) -> list[str]:
        if item:
            acc.append(item)
        return acc

    def combine(a: list[str], b: list[str]) -> list[str]:
        a.extend(b)
        return a

    def create() -> list[str]:
        return []

    return (
        AggregateOperation.with_create(create)
        .and_accumulate(accumulate)
        .and_combine(combine)
        .and_export_finish(lambda acc: prefix + delimiter.join(acc) + suffix)
    )


# --------------------------------------------------------------------------- reducing


def reducing(
    empty_value: Any,
    get_value: Callable[[Any], Any],
    combine_fn: Callable[[Any, Any], Any],
    deduct_fn: Callable[[Any, Any], Any] | None = None,
) -> AggregateOperation[Any, Any]:
    """Reduce ``get_value(item)`` with ``combine_fn``, starting from ``empty_value``.

    ``combine_fn`` must be associative and ``empty_value`` its identity; give
    ``deduct_fn`` (the inverse of ``combine_fn``) to allow deducting. The
    values should be immutable, since the accumulator is the value itself.

    >>> from functools import reduce
    >>> op = reducing(1, int, lambda a, b: a * b)
    >>> op.finish_fn(reduce(op.accumulate_fn(), ["2", "3", "7"], op.create_fn()))
    42
    """
    require_callable(get_value, "get_value")
    require_callable(combine_fn, "combine_fn")
    op: AggregateOperation[Any, Any] = (
        AggregateOperation.with_create(lambda: empty_value)
        .and_accumulate(lambda acc, item: combine_fn(acc, get_value(item)))
        .and_combine(combine_fn)
    )
    if deduct_fn is not None:
        require_callable(deduct_fn, "deduct_fn")
        op = op.and_deduct(deduct_fn)
    return op


# --------------------------------------------------------------------------- composition


def mapping(
    map_fn: Callable[[Any], Any], downstream: AggregateOperation[Any, Any]
) -> AggregateOperation[Any, Any]:
    """Feed ``map_fn(item)`` to ``downstream``; as in Jet, an item that maps to None is skipped.

    >>> from functools import reduce
    >>> op = mapping(len, summing())
    >>> op.finish_fn(reduce(op.accumulate_fn(), ["ab", "cde"], op.create_fn()))
    5
    """
    require_callable(map_fn, "map_fn")
    inner = _require_downstream(downstream).accumulate_fn()

    def accumulate(acc: Any, item: Any) -> Any:
        mapped = map_fn(item)
        return acc if mapped is None else inner(acc, mapped)

    return dataclasses.replace(downstream, accumulate_fns=(accumulate,), collects_items=False)


def filtering(
    predicate: Callable[[Any], bool], downstream: AggregateOperation[Any, Any]
) -> AggregateOperation[Any, Any]:
    """Feed ``downstream`` only the items for which ``predicate(item)`` is true.

    >>> from functools import reduce
    >>> op = filtering(lambda x: x % 2 == 0, counting())
    >>> op.finish_fn(reduce(op.accumulate_fn(), [1, 2, 3, 4], op.create_fn()))
    2
    """
    require_callable(predicate, "predicate")
    inner = _require_downstream(downstream).accumulate_fn()

    def accumulate(acc: Any, item: Any) -> Any:
        return inner(acc, item) if predicate(item) else acc

    return dataclasses.replace(downstream, accumulate_fns=(accumulate,), collects_items=False)


def flat_mapping(
    flat_map_fn: Callable[[Any], Iterable[Any]], downstream: AggregateOperation[Any, Any]
) -> AggregateOperation[Any, Any]:
    """Feed ``downstream`` every element of the iterable ``flat_map_fn(item)``.

    >>> from functools import reduce
    >>> op = flat_mapping(str.split, to_list())
    >>> op.finish_fn(reduce(op.accumulate_fn(), ["a b", "", "c"], op.create_fn()))
    ['a', 'b', 'c']
    """
    require_callable(flat_map_fn, "flat_map_fn")
    inner = _require_downstream(downstream).accumulate_fn()

    def accumulate(acc: Any, item: Any) -> Any:
        for element in flat_map_fn(item):
            acc = inner(acc, element)
        return acc

    return dataclasses.replace(downstream, accumulate_fns=(accumulate,), collects_items=False)


def grouping_by(
    key_fn: Callable[[Any], Hashable], downstream: AggregateOperation[Any, Any] | None = None
) -> AggregateOperation[dict[Any, Any], dict[Any, Any]]:
    """A dict ``{key: downstream result over the items with that key}`` (Jet's ``groupingBy``).

    ``downstream`` defaults to :func:`to_list`. The operation can combine if
    ``downstream`` can; a key that only the right side has is combined into
    a fresh accumulator, so the result keeps none of the right side's state.

    >>> from functools import reduce
    >>> op = grouping_by(len, counting())
    >>> op.finish_fn(reduce(op.accumulate_fn(), ["a", "bb", "c"], op.create_fn()))
    {1: 2, 2: 1}
    """
    require_callable(key_fn, "key_fn")
    down = to_list() if downstream is None else _require_downstream(downstream)
    create, inner, down_combine = down.create_fn, down.accumulate_fn(), down.combine_fn
    export, finish = down.export_fn, down.finish_fn

    def accumulate(acc: dict[Any, Any], item: Any) -> dict[Any, Any]:
        key = key_fn(item)
        acc[key] = inner(acc[key] if key in acc else create(), item)
        return acc

    def results(result_fn: Callable[[Any], Any]) -> Callable[[dict[Any, Any]], dict[Any, Any]]:
        return lambda acc: {key: result_fn(value) for key, value in acc.items()}

    op = (
        AggregateOperation.with_create(_new_dict)
        .and_accumulate(accumulate)
        .and_export(results(export))
        .and_finish(results(finish))
    )
    if down_combine is None:
        return op

    def combine(a: dict[Any, Any], b: dict[Any, Any]) -> dict[Any, Any]:
        for key, value in b.items():
            a[key] = down_combine(a[key] if key in a else create(), value)
        return a

    return op.and_combine(combine)


grouping = grouping_by
"""Alias of :func:`grouping_by`."""


def all_of(*ops: AggregateOperation[Any, Any]) -> AggregateOperation[list[Any], tuple[Any, ...]]:
    """Run every operation over the same items; the result is the tuple of their results.

    Jet's ``allOf(op1, op2)`` / ``allOf(op1, op2, op3)`` and its builder in
    one. It can combine (deduct) if every operation can.

    >>> from functools import reduce
    >>> op = all_of(counting(), summing(), max_by(abs))
    >>> op.finish_fn(reduce(op.accumulate_fn(), [3, -7, 2], op.create_fn()))
    (3, -2, -7)
    """
    if not ops:
        raise ValueError("all_of needs at least one operation")
    checked = [_require_downstream(op, f"all_of operation {i}") for i, op in enumerate(ops)]
    creates = [op.create_fn for op in checked]
    accumulates = [op.accumulate_fn() for op in checked]
    exports = [op.export_fn for op in checked]
    finishes = [op.finish_fn for op in checked]

    def accumulate(acc: list[Any], item: Any) -> list[Any]:
        for i, inner in enumerate(accumulates):
            acc[i] = inner(acc[i], item)
        return acc

    result = (
        AggregateOperation.with_create(lambda: [create() for create in creates])
        .and_accumulate(accumulate)
        .and_export(lambda acc: tuple(e(a) for e, a in zip(exports, acc, strict=True)))
        .and_finish(lambda acc: tuple(f(a) for f, a in zip(finishes, acc, strict=True)))
    )
    combines = [op.combine_fn for op in checked]
    if all(fn is not None for fn in combines):
        result = result.and_combine(_pairwise(combines))
    deducts = [op.deduct_fn for op in checked]
    if all(fn is not None for fn in deducts):
        result = result.and_deduct(_pairwise(deducts))
    copies = [op.copy_fn for op in checked]
    if all(fn is not None for fn in copies):
        result = result.and_copy(_each_copied(copies))
    return result


def _each_copied(fns: list[Callable[[Any], Any] | None]) -> Callable[[list[Any]], list[Any]]:
    """A copy of :func:`all_of`'s accumulator: a new list of each operation's copy of its own."""
    copy_fns = [fn for fn in fns if fn is not None]

    def copy(acc: list[Any]) -> list[Any]:
        return [fn(a) for fn, a in zip(copy_fns, acc, strict=True)]

    return copy


def _pairwise(fns: list[Callable[[Any, Any], Any] | None]) -> Callable[[list[Any], list[Any]], list[Any]]:
    """``(a, b) -> a`` with ``a[i] = fns[i](a[i], b[i])``: combine or deduct slot by slot."""

    def apply(a: list[Any], b: list[Any]) -> list[Any]:
        for i, fn in enumerate(fns):
            a[i] = fn(a[i], b[i])  # type: ignore[misc]
        return a

    return apply
