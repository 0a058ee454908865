"""Sink processors: where items leave a DAG.

Sinks consume whole batches. ``list_sink_p`` and ``callback_sink_p`` run in
the member's process, so they suit the embedded instance and tests; sinks
that reach outside systems belong in the pipeline layer's ``Sinks``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from jetlet.core import inbox as inbox_mod
from jetlet.core import processor


class _BatchSinkP(processor.Processor):
    def __init__(self, consume: Callable[[list[Any]], object], cooperative: bool = True) -> None:
        self._consume = consume
        self._cooperative = cooperative

    def is_cooperative(self) -> bool:
        return self._cooperative

    def process(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        self._consume(inbox.take_all())

    def try_process_watermark(self, watermark: Any) -> bool:
        return True


def list_sink_p(target: list[Any]) -> processor.ProcessorFactory:
    """Appends every item to ``target`` (a list in this process)."""
    return lambda: _BatchSinkP(target.extend)


def callback_sink_p(fn: Callable[[Any], object], cooperative: bool = True) -> processor.ProcessorFactory:
    """Calls ``fn(item)`` for each item; pass ``cooperative=False`` if ``fn`` may block."""

    def consume(batch: list[Any]) -> None:
        for item in batch:
            fn(item)

    return lambda: _BatchSinkP(consume, cooperative)


def batch_callback_sink_p(
    fn: Callable[[list[Any]], object], cooperative: bool = True
) -> processor.ProcessorFactory:
    """Calls ``fn(batch)`` with each batch of items (a new list each time)."""
    return lambda: _BatchSinkP(fn, cooperative)


def logger_sink_p(
    to_string: Callable[[Any], str] = str, level: int = logging.INFO
) -> processor.ProcessorFactory:
    """Logs each item with the processor's logger."""

    class _LoggerSinkP(_BatchSinkP):
        def __init__(self) -> None:
            super().__init__(self._log)

        def _log(self, batch: list[Any]) -> None:
            log = self.context.logger
            for item in batch:
                log.log(level, "%s", to_string(item))

    return _LoggerSinkP


def noop_p() -> processor.ProcessorFactory:
    """Consumes and discards everything."""
    return lambda: _BatchSinkP(lambda batch: None)
