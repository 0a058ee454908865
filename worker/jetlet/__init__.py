"""jetlet: a distributed stream and batch processor for Python, on the design of Hazelcast Jet.

Build a DAG (``jetlet.core``) and run it on an instance::

    import jetlet
    with jetlet.embedded() as jet:
        jet.new_job(dag).join()
"""

from __future__ import annotations

from jetlet._embedded import EmbeddedInstance, embedded
from jetlet.aggregate import AggregateOperation
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
from jetlet.errors import JetletError, JobCancelledError, JobFailedError
from jetlet.job import Job, JobStatus

__version__ = "0.1.0"

__all__ = [
    "DAG",
    "AbstractProcessor",
    "AggregateOperation",
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
    "Outbox",
    "ProcessingGuarantee",
    "Processor",
    "ProcessorContext",
    "ProcessorMetaSupplier",
    "ProcessorSupplier",
    "Traverser",
    "Vertex",
    "Watermark",
    "__version__",
    "embedded",
]
