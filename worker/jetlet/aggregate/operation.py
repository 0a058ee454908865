"""The :class:`AggregateOperation` value type and its fluent builder."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, Generic, TypeVar

A = TypeVar("A")
R = TypeVar("R")
R2 = TypeVar("R2")


def _identity(value: Any) -> Any:
    return value


IDENTITY = _identity
"""The default export and finish function (processors may skip calling it)."""


@dataclasses.dataclass(frozen=True)
class AggregateOperation(Generic[A, R]):
    """Functions that fold items into an accumulator of type ``A`` and export ``R``.

    Build one fluently, as in Jet::

        AggregateOperation.with_create(lambda: 0)
            .and_accumulate(lambda acc, item: acc + 1)
            .and_combine(lambda a, b: a + b)
            .and_deduct(lambda a, b: a - b)
            .and_export_finish(lambda acc: acc)

    ``and_accumulate0`` / ``and_accumulate1`` / ... give one accumulate
    function per input for co-aggregation of several streams.

    ``and_accumulate_batch(fn)`` gives, beside ``and_accumulate``, a function that folds a whole
    list of items at once (``fn(acc, items) -> acc``), so that a stage which has a batch of items
    for one accumulator calls it once instead of the accumulate function per item: where it can run
    in C (``Counter.update``, numpy), a per-item Python call goes away. :meth:`fold_fn` is what the
    processors call.

    ``and_copy(fn)`` says how to copy an accumulator cheaply (``fn(acc)``
    returns an accumulator that shares nothing the other functions will
    change), and ``and_immutable()`` that accumulators are immutable values
    (each function returns a new one): snapshots then copy accumulators on the
    processing thread, or keep them as they are, and pickle them off it.
    Without either, an accumulator is pickled at the snapshot barrier.

    ``and_collects_items()`` says that an accumulator keeps every item it is given
    (:func:`~jetlet.aggregate.to_list`): partial accumulators are then as large as the items they
    took, so a first stage next to the data would send the same items, only later and in bigger
    pieces. Keyed windows and grouped aggregations of such an operation run in one stage,
    partitioned by key (as Jet plans an operation without a combine function), instead of two.
    ``to_set`` does not say so (it drops duplicates before they would cross), nor do ``mapping``,
    ``filtering`` and ``flat_mapping`` over a collecting operation (they shrink or drop items there).
    """

    create_fn: Callable[[], A]
    accumulate_fns: tuple[Callable[[A, Any], A] | None, ...] = ()
    combine_fn: Callable[[A, A], A] | None = None
    deduct_fn: Callable[[A, A], A] | None = None
    export_fn: Callable[[A], R] = _identity
    finish_fn: Callable[[A], R] = _identity
    copy_fn: Callable[[A], A] | None = None
    """A cheap copy of an accumulator for snapshots; :data:`IDENTITY` for immutable ones; None: pickle it."""
    accumulate_batch_fn: Callable[[A, list[Any]], A] | None = None
    """Folds a list of items of input 0 at once, as the accumulate function would one by one; None: none."""
    accumulate_batch_of: Callable[[A, Any], A] | None = None
    """The accumulate function of input 0 that ``accumulate_batch_fn`` folds like: an operation rebuilt
    with another one (``filtering``, ``mapping``, a later ``and_accumulate``) no longer uses it."""
    collects_items: bool = False
    """The accumulator keeps every item (see :meth:`and_collects_items`): no first stage."""

    @staticmethod
    def with_create(create_fn: Callable[[], A]) -> AggregateOperation[A, A]:
        """Start building: ``create_fn`` makes a new, empty accumulator."""
        if not callable(create_fn):
            raise TypeError(f"with_create needs a callable, got {create_fn!r}")
        return AggregateOperation(create_fn)

    def and_accumulate(self, fn: Callable[[A, Any], A]) -> AggregateOperation[A, R]:
        """``fn(acc, item) -> acc`` for a single input."""
        return self._with_accumulate(0, fn)

    def and_accumulate0(self, fn: Callable[[A, Any], A]) -> AggregateOperation[A, R]:
        return self._with_accumulate(0, fn)

    def and_accumulate1(self, fn: Callable[[A, Any], A]) -> AggregateOperation[A, R]:
        return self._with_accumulate(1, fn)

    def and_accumulate2(self, fn: Callable[[A, Any], A]) -> AggregateOperation[A, R]:
        return self._with_accumulate(2, fn)

    def and_accumulate_at(self, ordinal: int, fn: Callable[[A, Any], A]) -> AggregateOperation[A, R]:
        """``fn(acc, item) -> acc`` for items of input ``ordinal``."""
        return self._with_accumulate(ordinal, fn)

    def _with_accumulate(self, ordinal: int, fn: Callable[[A, Any], A]) -> AggregateOperation[A, R]:
        if not callable(fn):
            raise TypeError(f"accumulate function for input {ordinal} must be callable, got {fn!r}")
        fns = list(self.accumulate_fns) + [None] * max(0, ordinal + 1 - len(self.accumulate_fns))
        fns[ordinal] = fn
        return dataclasses.replace(self, accumulate_fns=tuple(fns))

    def and_accumulate_batch(self, fn: Callable[[A, list[Any]], A]) -> AggregateOperation[A, R]:
        """``fn(acc, items) -> acc``: fold a list of items of input 0 at once.

        It must give what folding ``items`` one by one with the accumulate function gives, in
        their order; the accumulate function is still needed (a batch whose items fall in
        different windows is folded item by item).
        """
        if not callable(fn):
            raise TypeError(f"and_accumulate_batch needs a callable, got {fn!r}")
        one_by_one = self.accumulate_fns[0] if self.accumulate_fns else None
        if one_by_one is None:
            raise ValueError(
                "and_accumulate_batch folds like the accumulate function of input 0: "
                "call and_accumulate(fn) first"
            )
        return dataclasses.replace(self, accumulate_batch_fn=fn, accumulate_batch_of=one_by_one)

    def and_combine(self, fn: Callable[[A, A], A]) -> AggregateOperation[A, R]:
        """``fn(left, right) -> acc``: merge two partial accumulators."""
        return dataclasses.replace(self, combine_fn=fn)

    def and_deduct(self, fn: Callable[[A, A], A]) -> AggregateOperation[A, R]:
        """``fn(acc, other) -> acc``: undo ``combine(acc, other)`` (optional)."""
        return dataclasses.replace(self, deduct_fn=fn)

    def and_copy(self, fn: Callable[[A], A]) -> AggregateOperation[A, R]:
        """``fn(acc) -> copy``: a copy of ``acc`` that the other functions never change (snapshots)."""
        if not callable(fn):
            raise TypeError(f"and_copy needs a callable, got {fn!r}")
        return dataclasses.replace(self, copy_fn=fn)

    def and_immutable(self) -> AggregateOperation[A, R]:
        """The accumulators are immutable values (an int, a tuple): a snapshot keeps them as they are."""
        return dataclasses.replace(self, copy_fn=IDENTITY)

    def and_collects_items(self) -> AggregateOperation[A, R]:
        """Each accumulator keeps every item it takes (a list of them): combining partial
        accumulators saves nothing, so keyed windows and grouped aggregations run it in one stage."""
        return dataclasses.replace(self, collects_items=True)

    def and_export(self, fn: Callable[[A], Any]) -> AggregateOperation[A, Any]:
        """``fn(acc) -> result`` that leaves ``acc`` usable (window early results)."""
        return self._with_results(fn, self.finish_fn)

    def and_finish(self, fn: Callable[[A], Any]) -> AggregateOperation[A, Any]:
        """``fn(acc) -> result`` called once at the end; may reuse ``acc``."""
        return self._with_results(self.export_fn, fn)

    def and_export_finish(self, fn: Callable[[A], R2]) -> AggregateOperation[A, R2]:
        """Set both export and finish to ``fn``."""
        return self._with_results(fn, fn)

    def _with_results(
        self, export: Callable[[A], R2], finish: Callable[[A], R2]
    ) -> AggregateOperation[A, R2]:
        return AggregateOperation(
            self.create_fn,
            self.accumulate_fns,
            self.combine_fn,
            self.deduct_fn,
            export,
            finish,
            self.copy_fn,
            self.accumulate_batch_fn,
            self.accumulate_batch_of,
            self.collects_items,
        )

    def and_then(self, fn: Callable[[R], R2]) -> AggregateOperation[A, R2]:
        """Apply ``fn`` to the result of export and finish."""
        export, finish = self.export_fn, self.finish_fn
        return self._with_results(lambda acc: fn(export(acc)), lambda acc: fn(finish(acc)))

    @property
    def arity(self) -> int:
        """How many inputs this operation accumulates."""
        return len(self.accumulate_fns)

    def accumulate_fn(self, ordinal: int = 0) -> Callable[[A, Any], A]:
        """The accumulate function for input ``ordinal``; a clear error if there is none."""
        fn = self.accumulate_fns[ordinal] if ordinal < len(self.accumulate_fns) else None
        if fn is None:
            raise ValueError(f"this aggregate operation has no accumulate function for input {ordinal}")
        return fn

    def fold_fn(self, ordinal: int = 0) -> Callable[[A, list[Any]], A]:
        """``fold(acc, items) -> acc``: the items of input ``ordinal`` folded in, in order.

        The batch function for input 0 when there is one (:meth:`and_accumulate_batch`) and input 0's
        accumulate function is still the one it was given beside, otherwise the accumulate function
        applied by :func:`functools.reduce` (a loop in C, a call per item).
        """
        accumulate = self.accumulate_fn(ordinal)
        batch_fn = self.accumulate_batch_fn
        if ordinal == 0 and batch_fn is not None and accumulate is self.accumulate_batch_of:
            return batch_fn
        return functools.partial(_reduce, accumulate)

    def require_combine(self) -> Callable[[A, A], A]:
        """The combine function; a clear error for operations that cannot combine."""
        if self.combine_fn is None:
            raise ValueError(
                "this aggregate operation has no combine function, so it cannot run in two stages; "
                "add one with .and_combine(fn)"
            )
        return self.combine_fn


def _reduce(accumulate: Callable[[Any, Any], Any], acc: Any, items: list[Any]) -> Any:
    return functools.reduce(accumulate, items, acc)
