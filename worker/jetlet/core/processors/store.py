"""Sources and sinks of the member's named data structures (lists, maps, observables).

They reach the structures through ``context.data_store`` (see
:mod:`jetlet._store`), so they work wherever the job runs: the embedded
instance now, a cluster member later.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from jetlet.core import inbox as inbox_mod
from jetlet.core import processor
from jetlet.core.processors import sources


def _store(context: processor.MetaSupplierContext, what: str) -> Any:
    if context.data_store is None:
        raise RuntimeError(f"{what} needs the member's data store, but this job runs without one")
    return context.data_store


class _StoreSinkP(processor.Processor):
    def __init__(self, write: Callable[[Any, list[Any]], object]) -> None:
        self._write = write

    def process(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        self._write(_store(self.context, "a data structure sink"), inbox.take_all())

    def try_process_watermark(self, watermark: Any) -> bool:
        return True


def list_sink_p(name: str) -> processor.ProcessorFactory:
    """Appends items to the named list."""
    return lambda: _StoreSinkP(lambda store, batch: store.get_list(name).extend(batch))


def map_sink_p(
    name: str,
    key_fn: Callable[[Any], Any],
    value_fn: Callable[[Any], Any],
    merge_fn: Callable[[Any, Any], Any] | None = None,
) -> processor.ProcessorFactory:
    """Puts ``key_fn(item) -> value_fn(item)`` into the named map (``merge_fn(old, new)`` if given)."""

    def write(store: Any, batch: list[Any]) -> None:
        store.update_map(name, [(key_fn(item), value_fn(item)) for item in batch], merge_fn)

    return lambda: _StoreSinkP(write)


def map_update_sink_p(
    name: str, key_fn: Callable[[Any], Any], update_fn: Callable[[Any, Any], Any]
) -> processor.ProcessorFactory:
    """Sets ``map[key_fn(item)] = update_fn(old_value_or_None, item)`` in the named map."""

    def write(store: Any, batch: list[Any]) -> None:
        with store.lock:
            target = store.get_map(name)
            for item in batch:
                key = key_fn(item)
                target[key] = update_fn(target.get(key), item)

    return lambda: _StoreSinkP(write)


class _ObservableSinkMeta(processor.ProcessorMetaSupplier):
    """Publishes to the named observable and completes it when the job ends.

    One processor in the whole cluster, on the first member (the coordinator),
    publishes everything, so a client reads one ordered stream (the planner
    feeds it with a distributed all-to-one edge).
    """

    def preferred_local_parallelism(self) -> int:
        return 1

    def __init__(self, name: str) -> None:
        self._name = name
        self._observable: Any = None

    def init(self, context: processor.MetaSupplierContext) -> None:
        self._observable = _store(context, "Sinks.observable").get_observable(self._name)

    def get(self, member_index: int) -> processor.ProcessorSupplier:
        if member_index != 0:
            return processor.ProcessorSupplier.of(processor.Processor)
        name = self._name
        return processor.ProcessorSupplier.of(
            lambda: _StoreSinkP(lambda store, batch: store.get_observable(name).publish(batch))
        )

    def close(self, error: BaseException | None) -> None:
        if self._observable is not None:
            self._observable.complete(error)


def observable_sink_p(name: str) -> processor.ProcessorMetaSupplier:
    """Publishes items to the named observable; the job's end completes it (or fails it)."""
    return _ObservableSinkMeta(name)


def list_source_p(name: str) -> processor.ProcessorMetaSupplier:
    """The items of the named list, split among the source processors by index."""

    def read(context: processor.ProcessorContext) -> Iterator[Any]:
        items = list(_store(context, "Sources.list").get_list(name))
        return iter(items[context.global_processor_index :: context.total_parallelism])

    return sources.source_from_generator(read)
