"""Processors that call a service: ``*_using_service`` and ``map_using_service_async``.

The processor supplier creates the factory's shared *context* once per
member (in ``init``) and destroys it when the job ends; each processor
creates its own service in ``init`` and destroys it in ``close``.

The synchronous form builds a batch step around the service and runs it
exactly like :class:`~jetlet.core.processors.chain.ChainP`.

The asynchronous form calls ``fn(service, item)``, which returns a
``concurrent.futures.Future`` or a coroutine (run on one asyncio loop thread
per processor), keeps at most ``max_concurrent_ops`` in flight, and emits
results in input order (``preserve_order=True``) or as they complete. An
item whose call is still in flight is held in the processor, so the
processor reports itself busy by leaving a marker in the inbox (as
``ChainP`` does) until everything taken in has been emitted.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any

from jetlet import service as service_mod
from jetlet.core import inbox as inbox_mod
from jetlet.core import processor
from jetlet.core.processors import chain


class _ServiceSupplier(processor.ProcessorSupplier):
    """Creates the member-wide service context; makes processors that share it."""

    def __init__(
        self,
        factory: service_mod.ServiceFactory[Any, Any],
        make: Callable[[service_mod.ServiceFactory[Any, Any], Any], processor.Processor],
    ) -> None:
        self._factory = factory
        self._make = make
        self._context: Any = None
        self._has_context = False

    def init(self, context: processor.ProcessorSupplierContext) -> None:
        self._context = self._factory.create_context_fn(context)
        self._has_context = True

    def get(self, count: int) -> list[processor.Processor]:
        return [self._make(self._factory, self._context) for _ in range(count)]

    def close(self, error: BaseException | None) -> None:
        if self._has_context:
            self._has_context = False
            self._factory.destroy_context_fn(self._context)


class _ServiceChainP(chain.ChainP):
    def __init__(
        self,
        factory: service_mod.ServiceFactory[Any, Any],
        shared: Any,
        make_step: Callable[[Any], chain.BatchStep],
    ) -> None:
        super().__init__(lambda batch: batch, factory.is_cooperative)
        self._factory = factory
        self._shared = shared
        self._make_step = make_step
        self._service: Any = None
        self._has_service = False

    def init(self, outbox: Any, context: processor.ProcessorContext) -> None:
        super().init(outbox, context)
        self._service = self._factory.create_service_fn(context, self._shared)
        self._has_service = True
        self._step = self._make_step(self._service)

    def close(self) -> None:
        if self._has_service:
            self._has_service = False
            self._factory.destroy_service_fn(self._service)


def map_using_service_async_p(
    factory: service_mod.ServiceFactory[Any, Any],
    fn: Callable[[Any, Any], Any],
    max_concurrent_ops: int = 4,
    preserve_order: bool = True,
    timestamped: bool = False,
) -> processor.ProcessorMetaSupplier:
    """Emits the results of ``fn(service, item)`` (a future or a coroutine); None results are dropped."""
    if max_concurrent_ops < 1:
        raise ValueError(f"max_concurrent_ops must be >= 1, got {max_concurrent_ops}")
    return processor.ProcessorMetaSupplier.of(
        _ServiceSupplier(
            factory,
            lambda f, shared: _AsyncServiceP(f, shared, fn, max_concurrent_ops, preserve_order, timestamped),
        )
    )


def using_service_p(
    factory: service_mod.ServiceFactory[Any, Any], make_step: Callable[[Any], chain.BatchStep]
) -> processor.ProcessorMetaSupplier:
    """A chain processor whose batch step is ``make_step(service)``."""
    return processor.ProcessorMetaSupplier.of(
        _ServiceSupplier(factory, lambda f, shared: _ServiceChainP(f, shared, make_step))
    )


class _AsyncServiceP(processor.Processor):
    """Calls ``fn(service, item)`` asynchronously with bounded concurrency."""

    def __init__(
        self,
        factory: service_mod.ServiceFactory[Any, Any],
        shared: Any,
        fn: Callable[[Any, Any], Any],
        max_concurrent_ops: int,
        preserve_order: bool,
        timestamped: bool,
    ) -> None:
        self._factory = factory
        self._shared = shared
        self._fn = fn
        self._max = max_concurrent_ops
        self._ordered = preserve_order
        self._timestamped = timestamped
        self._in_flight: collections.deque[tuple[int, concurrent.futures.Future[Any]]] = collections.deque()
        self._ready: list[Any] = []
        self._service: Any = None
        self._has_service = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None

    def init(self, outbox: Any, context: processor.ProcessorContext) -> None:
        super().init(outbox, context)
        self._service = self._factory.create_service_fn(context, self._shared)
        self._has_service = True

    def metrics(self) -> dict[str, int]:
        """Jet's ``numInFlightOps``: calls started and not yet emitted."""
        return {"numInFlightOps": len(self._in_flight)}

    def _submit(self, item: Any) -> concurrent.futures.Future[Any]:
        result = self._fn(self._service, item)
        if isinstance(result, concurrent.futures.Future):
            return result
        if asyncio.iscoroutine(result):
            return asyncio.run_coroutine_threadsafe(result, self._event_loop())
        raise TypeError(
            f"map_using_service_async: the function must return a concurrent.futures.Future or a "
            f"coroutine, got {type(result).__qualname__}"
        )

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=loop.run_forever, name=f"jetlet-async-{self.context.vertex_name}", daemon=True
            )
            thread.start()
            self._loop, self._loop_thread = loop, thread
        return self._loop

    def _collect(self) -> None:
        """Move finished calls to the ready list, in order or as they complete."""
        in_flight = self._in_flight
        if self._ordered:
            while in_flight and in_flight[0][1].done():
                ts, future = in_flight.popleft()
                self._ready_add(ts, future.result())
        else:
            for entry in [e for e in in_flight if e[1].done()]:
                in_flight.remove(entry)
                self._ready_add(entry[0], entry[1].result())

    def _ready_add(self, ts: int, result: Any) -> None:
        if result is not None:
            self._ready.append((ts, result) if self._timestamped else result)

    def _emit(self) -> bool:
        if self._ready:
            taken = self.outbox.offer_batch(self._ready)
            self._ready = self._ready[taken:]
        return not self._ready

    def process(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        self._collect()
        self._emit()
        took = False
        while inbox and inbox.peek() is not _HELD and len(self._in_flight) < self._max:
            self._take(inbox.remove())
            took = True
            if not inbox:  # keep the inbox non-empty while this processor holds items
                inbox.add_batch([_HELD])
        if took:  # results that are already there leave in this call (progress the caller can see)
            self._collect()
            self._emit()
        if inbox and inbox.peek() is _HELD and not self._in_flight and not self._ready:
            inbox.remove()

    def _take(self, element: Any) -> None:
        ts, item = element if self._timestamped else (0, element)
        self._in_flight.append((ts, self._submit(item)))

    def try_process(self) -> bool:
        self._collect()
        return self._emit()

    def complete(self) -> bool:
        self._collect()
        return self._emit() and not self._in_flight

    def close(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._loop_thread is not None:
                self._loop_thread.join(5)
            self._loop.close()
            self._loop = None
        if self._has_service:
            self._has_service = False
            self._factory.destroy_service_fn(self._service)


_HELD = object()
"""Stands in the inbox for the items still in flight, so the inbox is not empty until they are out."""
