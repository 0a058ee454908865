"""The Pipeline API: what jetlet users write (Jet's ``com.hazelcast.jet.pipeline``)."""

from __future__ import annotations

from jetlet.pipeline.pipeline import Pipeline
from jetlet.pipeline.sinks import Sink, Sinks
from jetlet.pipeline.sources import BatchSource, Sources, StreamSource
from jetlet.pipeline.stages import BatchStage, BatchStageWithKey, GeneralStage, SinkStage

__all__ = [
    "BatchSource",
    "BatchStage",
    "BatchStageWithKey",
    "GeneralStage",
    "Pipeline",
    "Sink",
    "SinkStage",
    "Sinks",
    "Sources",
    "StreamSource",
]
