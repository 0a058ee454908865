"""The inbox: the items a processor is given in one ``process()`` call.

The engine fills an inbox with a batch of items from one input ordinal and
calls ``Processor.process(ordinal, inbox)``. The processor removes the items
it has handled; items it leaves in the inbox are offered again in the next
call, so a processor whose outbox is full simply returns. The engine refills
the inbox only once it is empty.

Batch-minded processors take everything at once with :meth:`Inbox.take_all`;
item-minded ones use :meth:`peek` / :meth:`remove` as in Jet.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import repeat, starmap
from typing import Any


class Inbox:
    """A FIFO of items for one ``process()`` call (Jet's ``Inbox``)."""

    __slots__ = ("_items",)

    def __init__(self, items: Iterable[Any] = ()) -> None:
        self._items: deque[Any] = deque(items)

    def __len__(self) -> int:
        return len(self._items)

    def __bool__(self) -> bool:
        return bool(self._items)

    def __iter__(self) -> Iterator[Any]:
        """Iterate without removing (do not modify the inbox while iterating)."""
        return iter(self._items)

    def __repr__(self) -> str:
        return f"Inbox({list(self._items)!r})"

    def is_empty(self) -> bool:
        return not self._items

    def peek(self) -> Any:
        """The head item, or None when empty; it stays in the inbox."""
        return self._items[0] if self._items else None

    def poll(self) -> Any:
        """Remove and return the head item, or None when empty."""
        return self._items.popleft() if self._items else None

    def remove(self) -> Any:
        """Remove and return the head item; raises ``IndexError`` when empty."""
        return self._items.popleft()

    def clear(self) -> None:
        self._items.clear()

    def drain(self, consumer: Callable[[Any], object]) -> int:
        """Pass every item to ``consumer``, removing each first; return how many."""
        items = self._items
        count = 0
        while items:
            consumer(items.popleft())
            count += 1
        return count

    def drain_to(self, target: list[Any], limit: int | None = None) -> int:
        """Move up to ``limit`` items (all by default) to the end of ``target``."""
        items = self._items
        if limit is None or limit >= len(items):
            count = len(items)
            target.extend(items)
            items.clear()
            return count
        target.extend(starmap(items.popleft, repeat((), limit)))  # popleft ``limit`` times, in C
        return limit

    def discard(self, count: int) -> None:
        """Remove the first ``count`` items (at most all): those a processor has handled."""
        items = self._items
        if count >= len(items):
            items.clear()
        else:
            deque(starmap(items.popleft, repeat((), count)), maxlen=0)  # popleft ``count`` times, in C

    def take_all(self) -> list[Any]:
        """Remove and return every item as a new list (the fast path for batch processors)."""
        items = list(self._items)
        self._items.clear()
        return items

    def add_batch(self, batch: Iterable[Any]) -> None:
        """Append items; called by the engine and by test harnesses, not by processors."""
        self._items.extend(batch)
