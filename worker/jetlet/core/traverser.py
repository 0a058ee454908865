"""Traversers: pull-style sequences that can pause.

A :class:`Traverser` hands out items with :meth:`Traverser.next`, which
returns ``None`` for "nothing now" (a traverser over a finite sequence keeps
returning ``None`` once exhausted). Because ``None`` is the signal, it is
never an item. Traversers are how processors emit a variable number of items
without blocking: ``AbstractProcessor.emit_from_traverser`` drains one into
the outbox for as long as the outbox has room and resumes later where it
stopped.

>>> t = traverse_items(1, 2, 3).map(lambda x: x * 10).filter(lambda x: x != 20)
>>> [t.next(), t.next(), t.next()]
[10, 30, None]
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Traverser(abc.ABC, Generic[T]):
    """A source of items where ``next()`` returning ``None`` means "nothing now"."""

    @abc.abstractmethod
    def next(self) -> T | None:
        """The next item, or None if there is none now."""

    @staticmethod
    def of(fn: Callable[[], T | None]) -> Traverser[T]:
        """A traverser whose ``next()`` calls ``fn``."""
        return _FnTraverser(fn)

    def map(self, fn: Callable[[T], R | None]) -> Traverser[R]:
        """Items transformed by ``fn``; an item mapped to None is skipped."""
        return _MapTraverser(self, fn)

    def filter(self, predicate: Callable[[T], bool]) -> Traverser[T]:
        """Only the items for which ``predicate`` is true."""
        return _FilterTraverser(self, predicate)

    def flat_map(self, fn: Callable[[T], Traverser[R]]) -> Traverser[R]:
        """Each item replaced by the items of the traverser ``fn`` returns."""
        return _FlatMapTraverser(self, fn)

    def append(self, item: T) -> Traverser[T]:
        """This traverser's items, then ``item`` (once this one returns None)."""
        return _ConcatTraverser(self, singleton(item))

    def prepend(self, item: T) -> Traverser[T]:
        """``item`` first, then this traverser's items."""
        return _ConcatTraverser(singleton(item), self)

    def on_first_null(self, action: Callable[[], object]) -> Traverser[T]:
        """Call ``action`` once, the first time ``next()`` returns None."""
        return _OnFirstNullTraverser(self, action)


class _FnTraverser(Traverser[T]):
    __slots__ = ("_fn",)

    def __init__(self, fn: Callable[[], T | None]) -> None:
        self._fn = fn

    def next(self) -> T | None:
        return self._fn()


class _IteratorTraverser(Traverser[T]):
    __slots__ = ("_it",)

    def __init__(self, iterator: Iterator[T]) -> None:
        self._it = iterator

    def next(self) -> T | None:
        for item in self._it:
            if item is None:
                raise TypeError("a traversed iterable yielded None, which jetlet reserves for 'no item'")
            return item
        return None


class _ListTraverser(Traverser[T]):
    """Over a list by index: no iterator object, and the rest is visible."""

    __slots__ = ("_items", "_pos")

    def __init__(self, items: list[T]) -> None:
        self._items = items
        self._pos = 0

    def next(self) -> T | None:
        pos = self._pos
        if pos < len(self._items):
            self._pos = pos + 1
            return self._items[pos]
        return None


class _MapTraverser(Traverser[R]):
    __slots__ = ("_fn", "_upstream")

    def __init__(self, upstream: Traverser[T], fn: Callable[[T], R | None]) -> None:
        self._upstream: Traverser[Any] = upstream
        self._fn: Callable[[Any], R | None] = fn

    def next(self) -> R | None:
        while True:
            item = self._upstream.next()
            if item is None:
                return None
            result = self._fn(item)
            if result is not None:
                return result


class _FilterTraverser(Traverser[T]):
    __slots__ = ("_predicate", "_upstream")

    def __init__(self, upstream: Traverser[T], predicate: Callable[[T], bool]) -> None:
        self._upstream = upstream
        self._predicate = predicate

    def next(self) -> T | None:
        while True:
            item = self._upstream.next()
            if item is None or self._predicate(item):
                return item


class _FlatMapTraverser(Traverser[R]):
    __slots__ = ("_current", "_fn", "_upstream")

    def __init__(self, upstream: Traverser[T], fn: Callable[[T], Traverser[R]]) -> None:
        self._upstream: Traverser[Any] = upstream
        self._fn: Callable[[Any], Traverser[R]] = fn
        self._current: Traverser[R] | None = None

    def next(self) -> R | None:
        while True:
            if self._current is not None:
                item = self._current.next()
                if item is not None:
                    return item
                self._current = None
            upstream_item = self._upstream.next()
            if upstream_item is None:
                return None
            self._current = self._fn(upstream_item)


class _ConcatTraverser(Traverser[T]):
    __slots__ = ("_first", "_second")

    def __init__(self, first: Traverser[T], second: Traverser[T]) -> None:
        self._first: Traverser[T] | None = first
        self._second = second

    def next(self) -> T | None:
        if self._first is not None:
            item = self._first.next()
            if item is not None:
                return item
            self._first = None
        return self._second.next()


class _OnFirstNullTraverser(Traverser[T]):
    __slots__ = ("_action", "_upstream")

    def __init__(self, upstream: Traverser[T], action: Callable[[], object]) -> None:
        self._upstream = upstream
        self._action: Callable[[], object] | None = action

    def next(self) -> T | None:
        item = self._upstream.next()
        if item is None and self._action is not None:
            action, self._action = self._action, None
            action()
        return item


class _EmptyTraverser(Traverser[Any]):
    def next(self) -> None:
        return None


_EMPTY = _EmptyTraverser()


def empty() -> Traverser[Any]:
    """A traverser with no items."""
    return _EMPTY


def singleton(item: T) -> Traverser[T]:
    """A traverser with exactly one item."""
    return _ListTraverser([item])


def traverse_items(*items: T) -> Traverser[T]:
    """A traverser over the given items."""
    return _ListTraverser(list(items))


def traverse_list(items: list[T]) -> Traverser[T]:
    """A traverser over a list, by index (the list is not copied)."""
    return _ListTraverser(items)


def traverse_iterable(iterable: Iterable[T]) -> Traverser[T]:
    """A traverser over any iterable (consumed lazily; None items are refused)."""
    if isinstance(iterable, list):
        return _ListTraverser(iterable)
    return _IteratorTraverser(iter(iterable))


def traverse_iterator(iterator: Iterator[T]) -> Traverser[T]:
    """A traverser over an iterator, consumed lazily."""
    return _IteratorTraverser(iterator)
