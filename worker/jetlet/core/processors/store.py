"""Sources and sinks of the member's named data structures (lists, maps, observables).

They reach the structures through ``context.data_store`` (see
:mod:`jetlet._store`), so they work wherever the job runs: on an embedded
instance's own store, or on a cluster member, whose lists and maps live in
the replicated grid. The sinks' processors are cooperative unless the store
says its writes block (the grid waits for backups): then each runs on a
thread of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jetlet.core import inbox as inbox_mod
from jetlet.core import processor
from jetlet.core.processors import sources


def _store(context: processor.MetaSupplierContext, what: str) -> Any:
    if context.data_store is None:
        raise RuntimeError(f"{what} needs the member's data store, but this job runs without one")
    return context.data_store


class _StoreSinkP(processor.Processor):
    def __init__(self, write: Callable[[Any, list[Any]], object], cooperative: bool = True) -> None:
        self._write = write
        self._cooperative = cooperative

    def is_cooperative(self) -> bool:
        return self._cooperative

    def process(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        self._write(_store(self.context, "a data structure sink"), inbox.take_all())

    def try_process_watermark(self, watermark: Any) -> bool:
        return True


class _StoreSinkSupplier(processor.ProcessorSupplier):
    """Makes sink processors that are cooperative unless the member's store blocks (a cluster's grid)."""

    def __init__(self, write: Callable[[Any, list[Any]], object]) -> None:
        self._write = write
        self._cooperative = True

    def init(self, context: processor.ProcessorSupplierContext) -> None:
        self._cooperative = not getattr(context.data_store, "blocking", False)

    def get(self, count: int) -> list[processor.Processor]:
        return [_StoreSinkP(self._write, self._cooperative) for _ in range(count)]


def _sink(write: Callable[[Any, list[Any]], object]) -> processor.ProcessorMetaSupplier:
    return processor.ProcessorMetaSupplier.of(_StoreSinkSupplier(write))


def list_sink_p(name: str) -> processor.ProcessorMetaSupplier:
    """Appends items to the named list."""
    return _sink(lambda store, batch: store.append_list(name, batch))


def map_sink_p(
    name: str,
    key_fn: Callable[[Any], Any],
    value_fn: Callable[[Any], Any],
    merge_fn: Callable[[Any, Any], Any] | None = None,
) -> processor.ProcessorMetaSupplier:
    """Puts ``key_fn(item) -> value_fn(item)`` into the named map (``merge_fn(old, new)`` if given)."""

    def write(store: Any, batch: list[Any]) -> None:
        store.update_map(name, [(key_fn(item), value_fn(item)) for item in batch], merge_fn)

    return _sink(write)


def map_update_sink_p(
    name: str, key_fn: Callable[[Any], Any], update_fn: Callable[[Any, Any], Any]
) -> processor.ProcessorMetaSupplier:
    """Sets ``map[key_fn(item)] = update_fn(old_value_or_None, item)`` in the named map."""
    return _sink(lambda store, batch: store.update_map_with(name, batch, key_fn, update_fn))


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
    """The items of the named list, split among the source processors by index (replayable, rescalable)."""
    return sources.source_from_collection(lambda context: _store(context, "Sources.list").read_list(name))
