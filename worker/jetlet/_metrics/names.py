"""Jet's metric names as Prometheus names: ``jetlet_`` prefix, snake_case, base units, ``_total``.

Theory of operation
-------------------
:data:`KNOWN` maps each of Jet's names that the members measure to its
Prometheus family: name, type and help, and the factor that turns the
measured unit into the base unit (microseconds and milliseconds become
seconds, as Prometheus wants). Watermarks and execution times are event
time or wall-clock milliseconds since the epoch, so they become seconds
since the epoch. A processor's own metric that is not listed (a
connector's, say) becomes a gauge of its name in snake_case; a user metric
(labelled ``user`` with its kind) becomes ``jetlet_user_<name>``, with
``_total`` for a counter.

>>> family("receivedCount", {}).name
'jetlet_received_count_total'
>>> family("busyTimeMicros", {}).scale
1e-06
>>> family("empty_lines", {"user": "counter"}).name
'jetlet_user_empty_lines_total'
>>> snake("lastForwardedWmLatency")
'last_forwarded_wm_latency'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import NamedTuple

PREFIX = "jetlet_"
HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")


class Family(NamedTuple):
    """A Prometheus metric family: its name, type (counter, gauge or histogram), help and unit scale."""

    name: str
    kind: str
    help: str
    scale: float = 1.0


_MS = 1e-3
_US = 1e-6
KNOWN: dict[str, Family] = {
    "receivedCount": Family(
        "jetlet_received_count_total", "counter", "Items (record batches: rows) received on an input edge."
    ),
    "receivedBatches": Family(
        "jetlet_received_batches_total", "counter", "Batches received on an input edge."
    ),
    "emittedCount": Family(
        "jetlet_emitted_count_total", "counter", "Items (record batches: rows) emitted to an output edge."
    ),
    "queuesSize": Family(
        "jetlet_queues_size", "gauge", "Items (record batches: rows) waiting in an input edge's queues."
    ),
    "queuesCapacity": Family(
        "jetlet_queues_capacity", "gauge", "Capacity of an input edge's queues, in items."
    ),
    "topObservedWm": Family(
        "jetlet_top_observed_wm_seconds", "gauge", "Highest watermark received on any input queue.", _MS
    ),
    "coalescedWm": Family("jetlet_coalesced_wm_seconds", "gauge", "Coalesced watermark of the inputs.", _MS),
    "lastForwardedWm": Family(
        "jetlet_last_forwarded_wm_seconds", "gauge", "Last watermark the processor emitted.", _MS
    ),
    "lastForwardedWmLatency": Family(
        "jetlet_last_forwarded_wm_latency_seconds",
        "gauge",
        "Wall-clock time minus the last emitted watermark, when it was emitted.",
        _MS,
    ),
    "snapshotBytes": Family(
        "jetlet_snapshot_bytes", "gauge", "Bytes this member stored of the vertex's last snapshot."
    ),
    "snapshotKeys": Family(
        "jetlet_snapshot_keys", "gauge", "Keys this member stored of the vertex's last snapshot."
    ),
    "snapshotStoreTime": Family(
        "jetlet_snapshot_store_seconds",
        "gauge",
        "How long this member took to store its part of the job's last snapshot: its states settled,"
        " encoded and written to the grid with their backups.",
        _MS,
    ),
    "distributedItemsIn": Family(
        "jetlet_distributed_items_in_total", "counter", "Items received from another member on an edge."
    ),
    "distributedItemsOut": Family(
        "jetlet_distributed_items_out_total", "counter", "Items sent to another member on an edge."
    ),
    "distributedBytesIn": Family(
        "jetlet_distributed_in_bytes_total",
        "counter",
        "Packet bytes received from another member on an edge.",
    ),
    "distributedBytesOut": Family(
        "jetlet_distributed_out_bytes_total", "counter", "Packet bytes sent to another member on an edge."
    ),
    "executionStartTime": Family(
        "jetlet_execution_start_time_seconds", "gauge", "When the execution started on this member.", _MS
    ),
    "executionCompletionTime": Family(
        "jetlet_execution_completion_time_seconds", "gauge", "When the execution ended on this member.", _MS
    ),
    "lateEventsDropped": Family(
        "jetlet_late_events_dropped_total",
        "counter",
        "Events dropped because they came behind the watermark.",
    ),
    "totalWindows": Family("jetlet_total_windows", "gauge", "Session windows open now."),
    "totalFrames": Family("jetlet_total_frames", "gauge", "Window frames held now."),
    "totalKeys": Family("jetlet_total_keys", "gauge", "Keys held in windows now."),
    "numInFlightOps": Family("jetlet_num_in_flight_ops", "gauge", "Asynchronous calls in flight."),
    "busyTimeMicros": Family(
        "jetlet_busy_time_seconds_total", "counter", "Time spent in calls that made progress.", _US
    ),
    "longestCallMicros": Family(
        "jetlet_longest_call_seconds", "gauge", "The longest single call so far.", _US
    ),
    "sinkLatency": Family(
        "jetlet_sink_latency_seconds",
        "histogram",
        "At a sink, wall-clock time minus each watermark it receives: the end-to-end latency of the events "
        "at that event time (docs/metrics.md).",
    ),
    "iterationCount": Family(
        "jetlet_iteration_count_total", "counter", "Passes of a cooperative worker over its tasklets."
    ),
    "taskletCount": Family("jetlet_tasklet_count", "gauge", "Tasklets a cooperative worker runs now."),
    "jobs.submitted": Family(
        "jetlet_jobs_submitted_total", "counter", "Jobs submitted while this member coordinated."
    ),
    "jobs.executionStarted": Family(
        "jetlet_jobs_execution_started_total",
        "counter",
        "Job executions started while this member coordinated.",
    ),
    "jobs.completedSuccessfully": Family(
        "jetlet_jobs_completed_successfully_total", "counter", "Jobs completed while this member coordinated."
    ),
    "jobs.completedWithFailure": Family(
        "jetlet_jobs_completed_with_failure_total", "counter", "Jobs failed while this member coordinated."
    ),
}

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def snake(name: str) -> str:
    """``camelCase`` (and dotted) names in snake_case."""
    return _CAMEL.sub("_", name).replace(".", "_").lower()


def base_name(name: str) -> str:
    """A histogram sample's metric name without its ``_bucket``, ``_count`` or ``_sum``."""
    for suffix in HISTOGRAM_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def family(name: str, labels: Mapping[str, str]) -> Family:
    """The family of the measurement ``name`` with ``labels`` (``name`` without histogram suffixes)."""
    kind = labels.get("user")
    if kind is not None:
        suffix = "_total" if kind == "counter" else ""
        return Family(f"{PREFIX}user_{snake(name)}{suffix}", kind, f"User metric {name!r}.")
    known = KNOWN.get(name)
    if known is not None:
        return known
    return Family(PREFIX + snake(name), "gauge", f"Processor metric {name!r}.")
