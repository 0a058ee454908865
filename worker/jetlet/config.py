"""Settings with Hazelcast Jet's names and defaults, validated on construction.

Every setting object is a frozen dataclass: build it once, share it freely.
A value out of range raises :class:`ValueError` naming the field, at the
moment the object is made, never later at run time.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


def _require(condition: bool, owner: str, name: str, value: object, rule: str) -> None:
    if not condition:
        raise ValueError(f"{owner}.{name} must be {rule}, got {value!r}")


def _require_int(owner: str, name: str, value: object, minimum: int, maximum: int | None = None) -> None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= minimum
    rule = f"an integer >= {minimum}"
    if maximum is not None:
        ok = ok and value <= maximum  # type: ignore[operator]
        rule = f"an integer in [{minimum}, {maximum}]"
    _require(ok, owner, name, value, rule)


DEFAULT_PARTITION_COUNT = 271
"""Jet's default partition count: a prime, so keys spread evenly."""


class ProcessingGuarantee(enum.Enum):
    """What a job promises about each item's effect on state and sinks after a failure."""

    NONE = "NONE"
    AT_LEAST_ONCE = "AT_LEAST_ONCE"
    EXACTLY_ONCE = "EXACTLY_ONCE"


@dataclass(frozen=True)
class EdgeConfig:
    """Tuning of one edge: the local queues and the network stream behind it."""

    queue_size: int = 1024
    """Capacity, in items, of each single-producer single-consumer queue (a record batch counts as
    its rows)."""
    batch_queue_size: int = 32_768
    """Capacity, in rows, of each queue of an edge that carries record batches (the planner marks
    those): 32 batches of 1,024 rows. With ``queue_size`` a queue would hold one batch, and each hop
    would hand batches over one at a time (measured: 3 to 4 times the CPU per event)."""
    packet_size_limit: int = 16384
    """Most items in one network packet of a distributed edge (a packet larger than a network
    frame is split further)."""
    receive_window_multiplier: int = 3
    """The receive window's target is this times what was processed in one
    flow-control period."""
    buffer_timeout_millis: int = 10
    """Longest a partial packet of a distributed edge waits for more items before it is sent
    (Flink's buffer timeout, 100 ms there); a packet of three quarters of the sender's queues, or
    one with a watermark, a barrier or the end of the stream behind it, is sent at once. 0: every
    pass of the sender sends what is queued (the lowest latency between members)."""

    def __post_init__(self) -> None:
        _require_int("EdgeConfig", "queue_size", self.queue_size, 1)
        _require_int("EdgeConfig", "batch_queue_size", self.batch_queue_size, 1)
        _require_int("EdgeConfig", "packet_size_limit", self.packet_size_limit, 1)
        _require_int("EdgeConfig", "receive_window_multiplier", self.receive_window_multiplier, 1)
        _require_int("EdgeConfig", "buffer_timeout_millis", self.buffer_timeout_millis, 0)


@dataclass(frozen=True)
class InstanceConfig:
    """Settings of one member (Jet's ``InstanceConfig``)."""

    cooperative_thread_count: int = 1
    """Threads that run cooperative tasklets. CPython runs one thread of Python
    at a time, so more than one rarely helps: scale with more members."""
    flow_control_period_millis: int = 100
    """How often a receiver acknowledges data and resizes its window."""
    backup_count: int = 1
    """Backups of every partition of the snapshot store (0 to 6)."""
    scale_up_delay_millis: int = 10000
    """Wait after a member joins before jobs are restarted to use it."""
    partition_count: int = DEFAULT_PARTITION_COUNT
    """Partitions of the key space; the same on every member."""
    max_queued_bytes: int = 256 * 1024 * 1024
    """Most bytes (estimated) of items that wait between the processors of one job's execution on
    this member: in its queues and in flight on its distributed edges, each queue and each network
    sender holding an equal share. Bounds memory when items are large; small items meet the
    queues' item counts first."""
    default_edge_config: EdgeConfig = field(default_factory=EdgeConfig)
    """Used by every edge that has no config of its own."""

    def __post_init__(self) -> None:
        _require_int("InstanceConfig", "cooperative_thread_count", self.cooperative_thread_count, 1)
        _require_int("InstanceConfig", "flow_control_period_millis", self.flow_control_period_millis, 1)
        _require_int("InstanceConfig", "backup_count", self.backup_count, 0, 6)
        _require_int("InstanceConfig", "scale_up_delay_millis", self.scale_up_delay_millis, 0)
        _require_int("InstanceConfig", "partition_count", self.partition_count, 1)
        _require_int("InstanceConfig", "max_queued_bytes", self.max_queued_bytes, 1)
        _require(
            isinstance(self.default_edge_config, EdgeConfig),
            "InstanceConfig",
            "default_edge_config",
            self.default_edge_config,
            "an EdgeConfig",
        )


@dataclass(frozen=True)
class JobConfig:
    """Settings of one job (Jet's ``JobConfig``)."""

    name: str | None = None
    """Unique among active jobs when set; shown in listings and metrics."""
    processing_guarantee: ProcessingGuarantee = ProcessingGuarantee.NONE
    snapshot_interval_millis: int = 10000
    auto_scaling: bool = True
    suspend_on_failure: bool = False
    split_brain_protection: bool = False
    initial_snapshot_name: str | None = None
    """Start from this exported snapshot (its stateful stages are matched by name)."""
    allow_dropping_state: bool = False
    """Start from a snapshot that holds state of stages this job lacks (that state is dropped)."""
    timeout_millis: int = 0
    """Cancel the job after this long; 0 means never."""
    arguments: Mapping[str, Any] = field(default_factory=dict)
    """Free-form arguments, readable by processors through their context."""

    def __post_init__(self) -> None:
        if self.name is not None:
            _require(
                isinstance(self.name, str) and bool(self.name.strip()),
                "JobConfig",
                "name",
                self.name,
                "a non-empty string or None",
            )
        _require(
            isinstance(self.processing_guarantee, ProcessingGuarantee),
            "JobConfig",
            "processing_guarantee",
            self.processing_guarantee,
            "a ProcessingGuarantee",
        )
        _require_int("JobConfig", "snapshot_interval_millis", self.snapshot_interval_millis, 1)
        _require_int("JobConfig", "timeout_millis", self.timeout_millis, 0)
        _require(isinstance(self.arguments, Mapping), "JobConfig", "arguments", self.arguments, "a mapping")
        object.__setattr__(self, "arguments", MappingProxyType(dict(self.arguments)))
