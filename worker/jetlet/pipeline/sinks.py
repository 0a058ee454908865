"""Pipeline sinks (Jet's ``Sinks``): where a pipeline's results go.

A sink is a named processor meta supplier; ``Pipeline.write_to`` (or a
stage's ``write_to``) makes it the vertex that consumes a stage's items.
Custom sinks come from :class:`~jetlet.pipeline.sink_builder.SinkBuilder`.
"""

from __future__ import annotations

import builtins
import codecs
import dataclasses
import logging
import os
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from jetlet.core import processor as proc
from jetlet.core import processors
from jetlet.core.processors import file_sink, store
from jetlet.errors import require_callable


def _first(item: Any) -> Any:
    return item[0]


def _second(item: Any) -> Any:
    return item[1]


T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Sink(Generic[T]):
    """A named sink of items of type ``T``; ``single_processor`` sinks get every item of the cluster."""

    name: str
    supplier: proc.ProcessorMetaSupplier
    single_processor: bool = False


class Sinks:
    """Factories of the built-in sinks."""

    @staticmethod
    def list(name: str) -> Sink[Any]:
        """Appends results to the instance's named list (``instance.get_list(name)``)."""
        return Sink(f"listSink({name})", store.list_sink_p(name))

    @staticmethod
    def map(
        name: str,
        key_fn: Callable[[Any], Any] = _first,
        value_fn: Callable[[Any], Any] = _second,
    ) -> Sink[Any]:
        """Puts results into the named map: ``(key, value)`` tuples by default, replacing old values."""
        return Sink(f"mapSink({name})", store.map_sink_p(name, key_fn, value_fn))

    @staticmethod
    def map_with_merging(
        name: str,
        merge_fn: Callable[[Any, Any], Any],
        key_fn: Callable[[Any], Any] = _first,
        value_fn: Callable[[Any], Any] = _second,
    ) -> Sink[Any]:
        """Like :meth:`map`, but ``merge_fn(old, new)`` where the key already has a value."""
        return Sink(
            f"mapWithMergingSink({name})",
            store.map_sink_p(name, key_fn, value_fn, merge_fn),
        )

    @staticmethod
    def map_with_updating(
        name: str, update_fn: Callable[[Any, Any], Any], key_fn: Callable[[Any], Any] = _first
    ) -> Sink[Any]:
        """``update_fn(old_value_or_None, item)`` becomes the key's value."""
        return Sink(
            f"mapWithUpdatingSink({name})",
            store.map_update_sink_p(name, key_fn, update_fn),
        )

    @staticmethod
    def observable(name: str) -> Sink[Any]:
        """Streams results to clients reading ``instance.get_observable(name)``."""
        return Sink(f"observableSink({name})", store.observable_sink_p(name), single_processor=True)

    @staticmethod
    def to_list(target: builtins.list[Any]) -> Sink[Any]:
        """Appends results to a list of this process (embedded instance only)."""
        return Sink("listSink", proc.ProcessorMetaSupplier.of(processors.list_sink_p(target)))

    @staticmethod
    def logger(to_string: Callable[[Any], str] = str, level: int = logging.INFO) -> Sink[Any]:
        """Logs each result with the processor's logger."""
        return Sink(
            "loggerSink", proc.ProcessorMetaSupplier.of(processors.logger_sink_p(to_string, level), 1)
        )

    @staticmethod
    def files(
        directory: str | os.PathLike[str], to_string_fn: Callable[[Any], str] = str, encoding: str = "utf-8"
    ) -> Sink[Any]:
        """Each sink processor writes ``to_string_fn(item)`` lines to its own file ``directory/<index>``.

        ``<index>`` is the processor's global index; the directory is
        created if missing and an older file of the same name is replaced.
        In an EXACTLY_ONCE job the sink is transactional instead: each
        processor writes files ``directory/<index>-<execution>-<sequence>``, each
        committed (made visible under that name) once the snapshot after its
        items is complete, and it leaves uncommitted ones under temporary
        names starting with a dot (see :mod:`jetlet.core.processors.file_sink`).
        """
        if not isinstance(directory, str | os.PathLike) or not os.fspath(directory):
            raise ValueError(f"Sinks.files: directory must be a non-empty path, got {directory!r}")
        require_callable(to_string_fn, "Sinks.files: to_string_fn")
        try:
            codecs.lookup(encoding)
        except (LookupError, TypeError) as exc:
            raise ValueError(f"Sinks.files: encoding {encoding!r} is not a known codec") from exc
        path = os.fspath(directory)
        return Sink(
            f"filesSink({path})",
            proc.ProcessorMetaSupplier.of(file_sink.write_file_p(str(path), to_string_fn, encoding)),
        )

    @staticmethod
    def noop() -> Sink[Any]:
        """Discards everything."""
        return Sink("noop", proc.ProcessorMetaSupplier.of(processors.noop_p()))

    @staticmethod
    def from_callback(
        fn: Callable[[Any], object], name: str = "callbackSink", cooperative: bool = True
    ) -> Sink[Any]:
        """Calls ``fn(item)`` for every result (``cooperative=False`` if it may block)."""
        return Sink(name, proc.ProcessorMetaSupplier.of(processors.callback_sink_p(fn, cooperative)))
