"""``AbstractProcessor``: the convenient base for hand-written processors.

It implements ``process(ordinal, inbox)`` by calling an item hook for each
item until the hook returns False (the item stays in the inbox and is offered
again next time): ``try_process0(item)`` ... ``try_process4(item)`` for
ordinals 0 to 4, and ``try_process_item(ordinal, item)`` for any ordinal.
Jet overloads one name, ``tryProcess``, for the per-item hook and the
no-argument idle hook; Python has no overloading, so the per-item hook is
``try_process_item`` and ``try_process()`` keeps the engine's meaning.

Emitting: ``try_emit`` offers one item; ``emit_from_traverser`` drains a
:class:`~jetlet.core.traverser.Traverser` into the outbox and remembers the
item that did not fit, so the same traverser can be passed again next call.
:class:`FlatMapper` packages that pattern for "one item in, many out".
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from jetlet.core import inbox as inbox_mod
from jetlet.core import outbox as outbox_mod
from jetlet.core import processor
from jetlet.core import traverser as trav

T = TypeVar("T")
R = TypeVar("R")


class AbstractProcessor(processor.Processor):
    """A processor with per-item hooks and traverser-based emission."""

    _pending_item: Any = None
    _pending_traverser: trav.Traverser[Any] | None = None
    _pending_snapshot_item: Any = None

    @property
    def logger(self) -> logging.Logger:
        return self.context.logger

    def init(self, outbox: outbox_mod.Outbox, context: processor.ProcessorContext) -> None:
        super().init(outbox, context)
        self.on_init(context)

    def on_init(self, context: processor.ProcessorContext) -> None:
        """Override to set up state once the context is known (Jet's ``init(Context)``)."""

    def process(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        hook = self._item_hook(ordinal)
        while inbox:
            if not hook(inbox.peek()):
                return
            inbox.remove()

    def _item_hook(self, ordinal: int) -> Callable[[Any], bool]:
        if 0 <= ordinal <= 4:
            name = f"try_process{ordinal}"
            if getattr(type(self), name) is not getattr(AbstractProcessor, name):
                hook: Callable[[Any], bool] = getattr(self, name)
                return hook
        return lambda item: self.try_process_item(ordinal, item)

    def try_process_item(self, ordinal: int, item: Any) -> bool:
        """Handle one item from input ``ordinal``; return False to get it again later."""
        raise TypeError(
            f"{type(self).__qualname__} received an item on input {ordinal} but overrides neither "
            f"try_process{ordinal}() nor try_process_item()"
        )

    def try_process0(self, item: Any) -> bool:
        return self.try_process_item(0, item)

    def try_process1(self, item: Any) -> bool:
        return self.try_process_item(1, item)

    def try_process2(self, item: Any) -> bool:
        return self.try_process_item(2, item)

    def try_process3(self, item: Any) -> bool:
        return self.try_process_item(3, item)

    def try_process4(self, item: Any) -> bool:
        return self.try_process_item(4, item)

    def try_emit(self, item: Any, ordinal: outbox_mod.Ordinals = outbox_mod.ALL_ORDINALS) -> bool:
        """Offer ``item`` to the outbox; False when it is full."""
        return self.outbox.offer(item, ordinal)

    def try_emit_to_snapshot(self, key: Any, value: Any) -> bool:
        """Offer one key/value pair of state to the snapshot; False when full."""
        return self.outbox.offer_to_snapshot(key, value)

    def emit_from_traverser(
        self, traverser: trav.Traverser[Any], ordinal: outbox_mod.Ordinals = outbox_mod.ALL_ORDINALS
    ) -> bool:
        """Emit items from ``traverser`` until it returns None (True) or the outbox is full (False).

        Pass the same traverser again after a False: the item that did not
        fit is kept here and emitted first.
        """
        offer = self.outbox.offer
        item = self._pending_item if self._pending_traverser is traverser else traverser.next()
        while item is not None:
            if not offer(item, ordinal):
                self._pending_traverser = traverser
                self._pending_item = item
                return False
            item = traverser.next()
        self._pending_traverser = None
        self._pending_item = None
        return True

    def emit_from_traverser_to_snapshot(self, traverser: trav.Traverser[tuple[Any, Any]]) -> bool:
        """Like :meth:`emit_from_traverser`, for ``(key, value)`` pairs into the snapshot."""
        entry = self._pending_snapshot_item if self._pending_snapshot_item is not None else traverser.next()
        while entry is not None:
            if not self.outbox.offer_to_snapshot(entry[0], entry[1]):
                self._pending_snapshot_item = entry
                return False
            entry = traverser.next()
        self._pending_snapshot_item = None
        return True

    def flat_mapper(
        self,
        fn: Callable[[T], trav.Traverser[R]],
        ordinal: outbox_mod.Ordinals = outbox_mod.ALL_ORDINALS,
    ) -> FlatMapper[T, R]:
        """A :class:`FlatMapper` that emits through this processor's outbox."""
        return FlatMapper(self, fn, ordinal)


class FlatMapper(Generic[T, R]):
    """Emits the traverser ``fn(item)`` for each item, resuming when the outbox was full.

    ``try_process(item)`` returns True once every output of ``item`` is
    emitted; until then, call it again with the same item.
    """

    def __init__(
        self,
        owner: AbstractProcessor,
        fn: Callable[[T], trav.Traverser[R]],
        ordinal: outbox_mod.Ordinals = outbox_mod.ALL_ORDINALS,
    ) -> None:
        self._owner = owner
        self._fn = fn
        self._ordinal = ordinal
        self._traverser: trav.Traverser[R] | None = None

    def try_process(self, item: T) -> bool:
        if self._traverser is None:
            self._traverser = self._fn(item)
        if self._owner.emit_from_traverser(self._traverser, self._ordinal):
            self._traverser = None
            return True
        return False
