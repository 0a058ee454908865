"""Service factories: external resources that stages use (Jet's ``ServiceFactory``).

A *service* is anything a stage's function needs besides the item: a client,
a model, a connection pool. A :class:`ServiceFactory` says how to make it:

* ``create_context_fn(supplier_context)`` once per member (a shared resource);
* ``create_service_fn(processor_context, shared)`` once per processor;
* ``destroy_service_fn`` and ``destroy_context_fn`` when the job ends.

A factory marked non-cooperative (``to_non_cooperative()``, for blocking
clients) makes its stages run on threads of their own.

>>> factory = ServiceFactories.non_shared_service(lambda ctx: {"greeting": "hello"})
>>> factory.is_cooperative
True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from jetlet.core import processor as proc

C = TypeVar("C")
S = TypeVar("S")


def _no_context(_context: proc.ProcessorSupplierContext) -> None:
    return None


def _destroy_nothing(_value: Any) -> None:
    return None


@dataclasses.dataclass(frozen=True)
class ServiceFactory(Generic[C, S]):
    """How to create and destroy a service; build with :class:`ServiceFactories`."""

    create_context_fn: Callable[[proc.ProcessorSupplierContext], C]
    create_service_fn: Callable[[proc.ProcessorContext, C], S]
    destroy_service_fn: Callable[[S], object] = _destroy_nothing
    destroy_context_fn: Callable[[C], object] = _destroy_nothing
    is_cooperative: bool = True

    def to_non_cooperative(self) -> ServiceFactory[C, S]:
        """The same factory for a blocking service: its stages get threads of their own."""
        return dataclasses.replace(self, is_cooperative=False)

    def with_destroy_service_fn(self, fn: Callable[[S], object]) -> ServiceFactory[C, S]:
        return dataclasses.replace(self, destroy_service_fn=fn)

    def with_destroy_context_fn(self, fn: Callable[[C], object]) -> ServiceFactory[C, S]:
        return dataclasses.replace(self, destroy_context_fn=fn)


def _shared(_context: proc.ProcessorContext, shared: Any) -> Any:
    return shared


class ServiceFactories:
    """The two usual shapes of service (Jet's ``ServiceFactories``)."""

    @staticmethod
    def shared_service(
        create_fn: Callable[[proc.ProcessorSupplierContext], S],
        destroy_fn: Callable[[S], object] = _destroy_nothing,
    ) -> ServiceFactory[S, S]:
        """One service per member, shared by its processors (it must be thread-safe)."""
        return ServiceFactory(create_fn, _shared, destroy_context_fn=destroy_fn)

    @staticmethod
    def non_shared_service(
        create_fn: Callable[[proc.ProcessorContext], S],
        destroy_fn: Callable[[S], object] = _destroy_nothing,
    ) -> ServiceFactory[None, S]:
        """One service per processor."""
        return ServiceFactory(_no_context, lambda context, _none: create_fn(context), destroy_fn)
