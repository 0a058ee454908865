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
from jetlet.core.processors.hash_join import JoinClause, hash_join_p
from jetlet.core.processors.session import aggregate_to_session_window_p
from jetlet.core.processors.sinks import (
    batch_callback_sink_p,
    callback_sink_p,
    list_sink_p,
    logger_sink_p,
    noop_p,
)
from jetlet.core.processors.sort import sort_p
from jetlet.core.processors.sources import source_from_generator, source_from_iterable, source_rate
from jetlet.core.processors.stateless import filter_p, flat_map_p, map_p
from jetlet.core.processors.watermarks import insert_watermarks_p
from jetlet.core.processors.windows import (
    accumulate_by_frame_p,
    aggregate_to_sliding_window_p,
    combine_to_sliding_window_p,
)

__all__ = [
    "JoinClause",
    "accumulate_by_frame_p",
    "accumulate_by_key_p",
    "accumulate_p",
    "aggregate_by_key_p",
    "aggregate_p",
    "aggregate_to_session_window_p",
    "aggregate_to_sliding_window_p",
    "batch_callback_sink_p",
    "callback_sink_p",
    "combine_by_key_p",
    "combine_p",
    "combine_to_sliding_window_p",
    "filter_p",
    "flat_map_p",
    "hash_join_p",
    "insert_watermarks_p",
    "list_sink_p",
    "logger_sink_p",
    "map_p",
    "noop_p",
    "sort_p",
    "source_from_generator",
    "source_from_iterable",
    "source_rate",
]
