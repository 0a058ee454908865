"""Stateless processors: map, filter and flat_map over whole batches.

They work on the inbox a batch at a time instead of an item at a time: map
and filter are chain processors (:mod:`~jetlet.core.processors.chain`) of
one list comprehension, each chunk sized to the outputs the outbox has
room for and emitted with one ``offer_batch``. flat_map keeps the item it
is expanding at the head of the inbox until every output of it has been
emitted, so nothing is held outside the inbox when the outbox fills (and a
snapshot never misses an item).

Like Jet, a map or flat_map result of ``None`` means "no output".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from jetlet.core import inbox as inbox_mod
from jetlet.core import processor
from jetlet.core.processors import chain


def map_p(fn: Callable[[Any], Any]) -> processor.ProcessorFactory:
    """Emits ``fn(item)`` for each item; a None result emits nothing."""

    def transform(chunk: list[Any]) -> list[Any]:
        return [result for item in chunk if (result := fn(item)) is not None]

    return chain.chain_p(transform)


def filter_p(predicate: Callable[[Any], bool]) -> processor.ProcessorFactory:
    """Emits the items for which ``predicate(item)`` is true."""

    def transform(chunk: list[Any]) -> list[Any]:
        return [item for item in chunk if predicate(item)]

    return chain.chain_p(transform)


class _FlatMapP(processor.Processor):
    def __init__(self, fn: Callable[[Any], Iterable[Any] | None]) -> None:
        self._fn = fn
        self._pending: list[Any] | None = None

    def process(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        offer_batch = self.outbox.offer_batch
        fn = self._fn
        while inbox:
            pending = self._pending
            if pending is None:
                result = fn(inbox.peek())
                if result is None:
                    inbox.remove()
                    continue
                pending = result if type(result) is list else list(result)
            taken = offer_batch(pending)
            if taken < len(pending):
                self._pending = pending[taken:]
                return
            self._pending = None
            inbox.remove()


def flat_map_p(fn: Callable[[Any], Iterable[Any] | None]) -> processor.ProcessorFactory:
    """Emits every item of the iterable ``fn(item)`` (None means none)."""
    return lambda: _FlatMapP(fn)
