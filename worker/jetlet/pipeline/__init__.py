"""The Pipeline API: what jetlet users write (Jet's ``com.hazelcast.jet.pipeline``)."""

from __future__ import annotations

from jetlet.core.processors.hash_join import JoinClause
from jetlet.pipeline.pipeline import Pipeline
from jetlet.pipeline.sink_builder import SinkBuilder
from jetlet.pipeline.sinks import Sink, Sinks
from jetlet.pipeline.source_builder import SourceBuffer, SourceBuilder, TimestampedSourceBuffer
from jetlet.pipeline.sources import BatchSource, Sources, StreamSource
from jetlet.pipeline.stages import (
    AggregateBuilder,
    BatchStage,
    BatchStageWithKey,
    GeneralStage,
    GeneralStageWithKey,
    HashJoinBuilder,
    SinkStage,
    StageWithWindow,
    StreamSourceStage,
    StreamStage,
    StreamStageWithKey,
)
from jetlet.pipeline.window import WindowDefinition
from jetlet.service import ServiceFactories, ServiceFactory

__all__ = [
    "AggregateBuilder",
    "BatchSource",
    "BatchStage",
    "BatchStageWithKey",
    "GeneralStage",
    "GeneralStageWithKey",
    "HashJoinBuilder",
    "JoinClause",
    "Pipeline",
    "ServiceFactories",
    "ServiceFactory",
    "Sink",
    "SinkBuilder",
    "SinkStage",
    "Sinks",
    "SourceBuffer",
    "SourceBuilder",
    "Sources",
    "StageWithWindow",
    "StreamSource",
    "StreamSourceStage",
    "StreamStage",
    "StreamStageWithKey",
    "TimestampedSourceBuffer",
    "WindowDefinition",
]
