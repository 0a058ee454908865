"""The Core API: DAGs of vertices and edges whose work is done by processors.

This is the layer under the Pipeline API, for when you need full control of
the DAG the engine runs (Jet's ``com.hazelcast.jet.core``). Build a
:class:`DAG`, add vertices backed by processors (see
:mod:`jetlet.core.processors` for the built-in ones), connect them with
:class:`Edge`, and submit it to an instance.
"""

from __future__ import annotations

from jetlet.core.abstract_processor import AbstractProcessor, FlatMapper
from jetlet.core.dag import DAG, DagValidationError, Vertex
from jetlet.core.edge import Edge, RoutingPolicy
from jetlet.core.inbox import Inbox
from jetlet.core.outbox import ALL_ORDINALS, Outbox
from jetlet.core.partitioning import DEFAULT_PARTITIONER, HashPartitioner, Partitioner, stable_hash
from jetlet.core.processor import (
    MetaSupplierContext,
    Processor,
    ProcessorContext,
    ProcessorMetaSupplier,
    ProcessorSupplier,
    ProcessorSupplierContext,
)
from jetlet.core.traverser import (
    Traverser,
    empty,
    singleton,
    traverse_items,
    traverse_iterable,
    traverse_iterator,
    traverse_list,
)
from jetlet.core.watermark import IDLE_MESSAGE, Watermark

__all__ = [
    "ALL_ORDINALS",
    "DAG",
    "DEFAULT_PARTITIONER",
    "IDLE_MESSAGE",
    "AbstractProcessor",
    "DagValidationError",
    "Edge",
    "FlatMapper",
    "HashPartitioner",
    "Inbox",
    "MetaSupplierContext",
    "Outbox",
    "Partitioner",
    "Processor",
    "ProcessorContext",
    "ProcessorMetaSupplier",
    "ProcessorSupplier",
    "ProcessorSupplierContext",
    "RoutingPolicy",
    "Traverser",
    "Vertex",
    "Watermark",
    "empty",
    "singleton",
    "stable_hash",
    "traverse_items",
    "traverse_iterable",
    "traverse_iterator",
    "traverse_list",
]
