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
"""

from __future__ import annotations

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
from jetlet.local_cluster import local_cluster
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
