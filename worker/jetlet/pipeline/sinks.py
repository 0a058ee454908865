"""Pipeline sinks (Jet's ``Sinks``): where a pipeline's results go."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from jetlet.core import processor as proc
from jetlet.core import processors

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Sink(Generic[T]):
    """A named sink of items of type ``T``."""

    name: str
    supplier: proc.ProcessorMetaSupplier


class Sinks:
    """Factories of the built-in sinks."""

    @staticmethod
    def to_list(target: list[Any]) -> Sink[Any]:
        """Appends results to a list of this process (embedded instance only)."""
        return Sink("listSink", proc.ProcessorMetaSupplier.of(processors.list_sink_p(target)))

    @staticmethod
    def logger(to_string: Callable[[Any], str] = str, level: int = logging.INFO) -> Sink[Any]:
        """Logs each result with the processor's logger."""
        return Sink(
            "loggerSink", proc.ProcessorMetaSupplier.of(processors.logger_sink_p(to_string, level), 1)
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
