"""Traversers: next() returns None for "nothing now"; map, filter, flat_map, append, prepend, helpers."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any, TypeVar

import pytest

from jetlet.core import (
    Traverser,
    empty,
    singleton,
    traverse_items,
    traverse_iterable,
    traverse_iterator,
    traverse_list,
)

T = TypeVar("T")


def _drain(traverser: Traverser[T]) -> list[T]:
    out: list[T] = []
    while (item := traverser.next()) is not None:
        out.append(item)
    return out


def test_given_exhausted_traverser_when_next_again_then_keeps_returning_none() -> None:
    t = traverse_items(1, 2)
    assert [t.next(), t.next(), t.next(), t.next()] == [1, 2, None, None]


def test_given_empty_and_singleton_when_drained_then_nothing_and_exactly_one() -> None:
    assert empty().next() is None
    assert _drain(singleton("x")) == ["x"]


def test_given_traverser_of_fn_when_fn_returns_none_then_later_items_still_come() -> None:
    # given a source with a temporary gap ("nothing now", not "done")
    values = iter([1, None, 2])
    t = Traverser.of(lambda: next(values, None))
    # when / then
    assert [t.next(), t.next(), t.next(), t.next()] == [1, None, 2, None]


def test_given_random_ints_when_map_filter_flat_map_then_matches_plain_python() -> None:
    rng = random.Random(7)
    data = [rng.randint(-50, 50) for _ in range(500)]
    got = _drain(
        traverse_list(data)
        .map(lambda x: x * 3)
        .filter(lambda x: x % 2 == 0)
        .flat_map(lambda x: traverse_items(*([x] * (abs(x) % 4))))
    )
    expected = [y for x in data if (x * 3) % 2 == 0 for y in [x * 3] * (abs(x * 3) % 4)]
    assert got == expected


def test_given_map_returning_none_when_drained_then_those_items_are_skipped() -> None:
    assert _drain(traverse_items(1, 2, 3, 4).map(lambda x: x if x % 2 else None)) == [1, 3]


def test_given_flat_map_with_empty_inner_traversers_when_drained_then_they_are_skipped() -> None:
    t = traverse_items(0, 2, 0, 1).flat_map(lambda n: traverse_list(list(range(n))))
    assert _drain(t) == [0, 1, 0]


def test_given_append_and_prepend_when_drained_then_items_frame_the_traverser() -> None:
    assert _drain(traverse_items(2, 3).append(4).prepend(1)) == [1, 2, 3, 4]
    assert _drain(empty().append("only")) == ["only"]


def test_given_on_first_null_when_drained_twice_then_action_runs_once() -> None:
    calls: list[str] = []
    t = traverse_items(1).on_first_null(lambda: calls.append("done"))
    assert t.next() == 1 and calls == []
    assert t.next() is None and t.next() is None
    assert calls == ["done"]


def test_given_list_traverser_when_list_grows_then_new_items_are_seen() -> None:
    # traverse_list does not copy: the rest of the list stays visible
    items = [1]
    t = traverse_list(items)
    assert t.next() == 1 and t.next() is None
    items.append(2)
    assert t.next() == 2


def test_given_generator_when_traversed_then_consumed_lazily() -> None:
    pulled: list[int] = []

    def gen() -> Iterator[int]:
        for i in range(3):
            pulled.append(i)
            yield i

    t = traverse_iterable(gen())
    assert pulled == []
    assert t.next() == 0 and pulled == [0]
    assert _drain(t) == [1, 2]


@pytest.mark.parametrize("source", [range(5), (x for x in range(5)), {0: "a", 1: "b"}, "ab", [0, 1]])
def test_given_any_iterable_when_traverse_iterable_then_matches_list(source: Any) -> None:
    expected = list(source) if not hasattr(source, "__next__") else [0, 1, 2, 3, 4]
    assert _drain(traverse_iterable(source)) == expected


def test_given_iterator_when_traverse_iterator_then_yields_all() -> None:
    assert _drain(traverse_iterator(iter("xyz"))) == ["x", "y", "z"]


def test_given_iterable_yielding_none_when_traversed_then_type_error() -> None:
    t = traverse_iterable(iter([1, None]))
    assert t.next() == 1
    with pytest.raises(TypeError, match="yielded None"):
        t.next()


def test_given_module_doc_example_when_run_then_holds() -> None:
    t = traverse_items(1, 2, 3).map(lambda x: x * 10).filter(lambda x: x != 20)
    assert [t.next(), t.next(), t.next()] == [10, 30, None]
