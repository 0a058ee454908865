"""Built-in processors (Jet's ``Processors``, ``SourceProcessors``, ``SinkProcessors``).

Each function returns what a vertex takes: a zero-argument factory of
processors, or a meta supplier when the processor prefers a parallelism
(sources prefer one per member).
"""

from __future__ import annotations

from jetlet.core.processors.aggregation import (
    accumulate_by_key_p,
    accumulate_p,
    aggregate_by_key_p,
    aggregate_p,
    combine_by_key_p,
    combine_p,
)
from jetlet.core.processors.sinks import (
    batch_callback_sink_p,
    callback_sink_p,
    list_sink_p,
    logger_sink_p,
    noop_p,
)
from jetlet.core.processors.sources import source_from_generator, source_from_iterable, source_rate
from jetlet.core.processors.stateless import filter_p, flat_map_p, map_p

__all__ = [
    "accumulate_by_key_p",
    "accumulate_p",
    "aggregate_by_key_p",
    "aggregate_p",
    "batch_callback_sink_p",
    "callback_sink_p",
    "combine_by_key_p",
    "combine_p",
    "filter_p",
    "flat_map_p",
    "list_sink_p",
    "logger_sink_p",
    "map_p",
    "noop_p",
    "source_from_generator",
    "source_from_iterable",
    "source_rate",
]
