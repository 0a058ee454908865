"""jetlet: a distributed stream and batch processor for Python, on the design of Hazelcast Jet.

Write a pipeline (``jetlet.pipeline``) or build a DAG (``jetlet.core``) and
run it on an instance:

>>> import jetlet
>>> from jetlet import AggregateOperations, Pipeline, Sinks, Sources
>>> p = Pipeline()
>>> _ = p.read_from(Sources.items("a", "b", "a")).grouping_key(str).aggregate(
...     AggregateOperations.counting()
... ).write_to(Sinks.map("counts"))
>>> with jetlet.embedded() as jet:
...     jet.new_job(p).join()
...     sorted(jet.get_map("counts").items())
[('a', 2), ('b', 1)]

The names here are loaded on first use (``import jetlet`` itself loads
almost nothing, so the command line starts fast); ``from jetlet import
Pipeline`` and ``jetlet.Pipeline`` work as usual.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Eager: the module and the function share the name, and a lazy name would lose to the submodule.
from jetlet.local_cluster import local_cluster

if TYPE_CHECKING:
    from jetlet import aggregate as AggregateOperations
    from jetlet._embedded import EmbeddedInstance, embedded
    from jetlet.aggregate import AggregateOperation
    from jetlet.client import connect
    from jetlet.config import EdgeConfig, InstanceConfig, JobConfig, ProcessingGuarantee
    from jetlet.core import (
        DAG,
        AbstractProcessor,
        Edge,
        Inbox,
        Outbox,
        Processor,
        ProcessorContext,
        ProcessorMetaSupplier,
        ProcessorSupplier,
        Traverser,
        Vertex,
        Watermark,
    )
    from jetlet.datamodel import KeyedWindowResult, WindowResult
    from jetlet.errors import JetletError, JobCancelledError, JobFailedError
    from jetlet.job import Job, JobStatus
    from jetlet.pipeline import (
        BatchSource,
        BatchStage,
        JoinClause,
        Pipeline,
        ServiceFactories,
        ServiceFactory,
        Sink,
        Sinks,
        Sources,
        StreamSource,
        StreamStage,
        WindowDefinition,
    )

_LAZY: dict[str, str] = {
    "AggregateOperations": "jetlet.aggregate",
    "EmbeddedInstance": "jetlet._embedded",
    "embedded": "jetlet._embedded",
    "AggregateOperation": "jetlet.aggregate",
    "connect": "jetlet.client",
    "EdgeConfig": "jetlet.config",
    "InstanceConfig": "jetlet.config",
    "JobConfig": "jetlet.config",
    "ProcessingGuarantee": "jetlet.config",
    "DAG": "jetlet.core",
    "AbstractProcessor": "jetlet.core",
    "Edge": "jetlet.core",
    "Inbox": "jetlet.core",
    "Outbox": "jetlet.core",
    "Processor": "jetlet.core",
    "ProcessorContext": "jetlet.core",
    "ProcessorMetaSupplier": "jetlet.core",
    "ProcessorSupplier": "jetlet.core",
    "Traverser": "jetlet.core",
    "Vertex": "jetlet.core",
    "Watermark": "jetlet.core",
    "KeyedWindowResult": "jetlet.datamodel",
    "WindowResult": "jetlet.datamodel",
    "JetletError": "jetlet.errors",
    "JobCancelledError": "jetlet.errors",
    "JobFailedError": "jetlet.errors",
    "Job": "jetlet.job",
    "JobStatus": "jetlet.job",
    "BatchSource": "jetlet.pipeline",
    "BatchStage": "jetlet.pipeline",
    "JoinClause": "jetlet.pipeline",
    "Pipeline": "jetlet.pipeline",
    "ServiceFactories": "jetlet.pipeline",
    "ServiceFactory": "jetlet.pipeline",
    "Sink": "jetlet.pipeline",
    "Sinks": "jetlet.pipeline",
    "Sources": "jetlet.pipeline",
    "StreamSource": "jetlet.pipeline",
    "StreamStage": "jetlet.pipeline",
    "WindowDefinition": "jetlet.pipeline",
}
"""Each public name loaded on first use, and the module that defines it."""


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'jetlet' has no attribute {name!r}")
    module = importlib.import_module(module_name)
    value = module if name == "AggregateOperations" else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__version__ = "0.1.0"

__all__ = [
    "DAG",
    "AbstractProcessor",
    "AggregateOperation",
    "AggregateOperations",
    "BatchSource",
    "BatchStage",
    "Edge",
    "EdgeConfig",
    "EmbeddedInstance",
    "Inbox",
    "InstanceConfig",
    "JetletError",
    "Job",
    "JobCancelledError",
    "JobConfig",
    "JobFailedError",
    "JobStatus",
    "JoinClause",
    "KeyedWindowResult",
    "Outbox",
    "Pipeline",
    "ProcessingGuarantee",
    "Processor",
    "ProcessorContext",
    "ProcessorMetaSupplier",
    "ProcessorSupplier",
    "ServiceFactories",
    "ServiceFactory",
    "Sink",
    "Sinks",
    "Sources",
    "StreamSource",
    "StreamStage",
    "Traverser",
    "Vertex",
    "Watermark",
    "WindowDefinition",
    "WindowResult",
    "__version__",
    "connect",
    "embedded",
    "local_cluster",
]
