"""Observables: results streamed from a running job to the client (Jet's ``Observable``).

A job writes to ``Sinks.observable(name)``; the client reads
``instance.get_observable(name)`` while the job runs, either by iterating
(blocking until the next result, ending when the job completes, raising if it
failed) or by registering callbacks. An observable keeps every result it has
published, so a reader that arrives late still sees them all, in order.

>>> obs = Observable("demo")
>>> obs.publish([1, 2]); obs.complete()
>>> list(obs)
[1, 2]
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")

OnNext = Callable[[Any], object]
OnError = Callable[[BaseException], object]
OnComplete = Callable[[], object]


class Observable(Generic[T]):
    """An ordered, append-only stream of results with completion."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._items: list[T] = []
        self._done = False
        self._error: BaseException | None = None
        self._changed = threading.Condition()
        self._observers: dict[int, tuple[OnNext, OnError | None, OnComplete | None]] = {}
        self._ids = itertools.count(1)

    def publish(self, items: list[T]) -> None:
        """Append results (called by the sink)."""
        if not items:
            return
        with self._changed:
            if self._done:
                raise RuntimeError(f"observable {self.name!r} is already complete")
            self._items.extend(items)
            observers = list(self._observers.values())
            self._changed.notify_all()
        for on_next, _, _ in observers:
            for item in items:
                on_next(item)

    def complete(self, error: BaseException | None = None) -> None:
        """Mark the end: normal, or failed with ``error`` (called when the job ends)."""
        with self._changed:
            if self._done:
                return
            self._done = True
            self._error = error
            observers = list(self._observers.values())
            self._changed.notify_all()
        for _, on_error, on_complete in observers:
            if error is not None and on_error is not None:
                on_error(error)
            elif error is None and on_complete is not None:
                on_complete()

    def add_observer(
        self, on_next: OnNext, on_error: OnError | None = None, on_complete: OnComplete | None = None
    ) -> int:
        """Call ``on_next`` for every result (those already published first); return an id."""
        with self._changed:
            observer_id = next(self._ids)
            self._observers[observer_id] = (on_next, on_error, on_complete)
            backlog = list(self._items)
            done, error = self._done, self._error
        for item in backlog:
            on_next(item)
        if done:
            if error is not None and on_error is not None:
                on_error(error)
            elif error is None and on_complete is not None:
                on_complete()
        return observer_id

    def remove_observer(self, observer_id: int) -> None:
        with self._changed:
            self._observers.pop(observer_id, None)

    def items(self) -> list[T]:
        """The results published so far."""
        with self._changed:
            return list(self._items)

    @property
    def is_done(self) -> bool:
        return self._done

    def iterate(self, timeout: float | None = None) -> Iterator[T]:
        """Every result in order, waiting for more until completion.

        Raises ``TimeoutError`` if ``timeout`` seconds pass with no new result,
        and the job's error if it failed.
        """
        position = 0
        while True:
            with self._changed:
                arrived = self._changed.wait_for(functools.partial(self._has_news, position), timeout)
                if not arrived:
                    raise TimeoutError(f"observable {self.name!r}: no result for {timeout} s")
                batch = self._items[position:]
                done, error = self._done, self._error
            yield from batch
            position += len(batch)
            if done and position >= len(self._items):
                if error is not None:
                    raise error
                return

    def _has_news(self, position: int) -> bool:
        return position < len(self._items) or self._done

    def __iter__(self) -> Iterator[T]:
        return self.iterate()

    def __repr__(self) -> str:
        state = "done" if self._done else "open"
        return f"Observable({self.name!r}, {len(self._items)} items, {state})"
