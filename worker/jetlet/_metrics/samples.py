"""One execution's measurements on this member, with Jet's names and real labels.

Theory of operation
-------------------
Nothing here runs on the data path: the engine keeps plain counters where it
already does its work, once per batch (items and batches read per input,
items delivered per output, bytes per packet, passes per worker) or once per
watermark, and :func:`execution_measurements` reads them when someone asks —
a Prometheus scrape of this member, the coordinator gathering a job's
metrics, or the member reporting an execution's final numbers. The reader is
another thread than the writers; every value is one attribute read, so a
reading is recent, never torn.

Every measurement carries ``job_id``, ``job_name``, ``execution`` and
``member``; a processor's add ``vertex`` and ``proc`` (the global processor
index, Jet's ``proc``), and per edge ``ordinal``; a distributed edge's add
``peer`` (the member at the other end). Watermarks are event-time
milliseconds; a measurement is left out while its watermark is unknown.
User metrics (:mod:`jetlet.metrics.user_metrics`) carry ``user``: their
kind. A histogram is ``<name>_bucket`` (cumulative, labelled ``le``),
``<name>_count`` and ``<name>_sum``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

from jetlet._execution import execution_plan, inbound
from jetlet._execution.processor_tasklet import ProcessorTasklet
from jetlet._execution.progress import call_times
from jetlet._network import tasklets as remote
from jetlet.metrics import user_metrics
from jetlet.metrics.job_metrics import Measurement

Labels = Mapping[str, str]


@dataclasses.dataclass(frozen=True)
class EdgeInfo:
    """What a distributed edge's counters are labelled with: its ends' vertices and ordinals."""

    source: str
    source_ordinal: int
    dest: str
    dest_ordinal: int


@dataclasses.dataclass
class ExecutionView:
    """What :func:`execution_measurements` reads of one execution on this member."""

    labels: Labels
    """``job_id``, ``job_name``, ``execution`` and ``member``."""
    plan: execution_plan.ExecutionPlan
    links: remote.RemoteLinks | None = None
    edges: Sequence[EdgeInfo] = ()
    """The DAG's edges by id (the execution plan's numbering)."""
    members: Sequence[str] = ()
    """The execution's members by index."""
    start_time_ms: int = 0
    completion_time_ms: int = 0
    snapshot_sizes: Mapping[str, tuple[int, int]] = dataclasses.field(default_factory=dict)
    """Per vertex, (bytes, keys) this member stored in the last snapshot."""
    snapshot_store_ms: int | None = None
    """How long this member took to store its part of the last snapshot (None before the first)."""


def execution_measurements(view: ExecutionView) -> list[Measurement]:
    """Every measurement of ``view``'s execution (see the module doc)."""
    base = dict(view.labels)
    out: list[Measurement] = []
    if view.start_time_ms:
        out.append(Measurement("executionStartTime", base, view.start_time_ms))
    if view.completion_time_ms:
        out.append(Measurement("executionCompletionTime", base, view.completion_time_ms))
    for tasklet in view.plan.tasklets:
        out.extend(tasklet_measurements(tasklet, base))
    for vertex, (size, keys) in view.snapshot_sizes.items():
        labels = {**base, "vertex": vertex}
        out.append(Measurement("snapshotBytes", labels, size))
        out.append(Measurement("snapshotKeys", labels, keys))
    if view.snapshot_store_ms is not None:
        out.append(Measurement("snapshotStoreTime", base, view.snapshot_store_ms))
    if view.links is not None:
        out.extend(_link_measurements(view.links.counters(), view.edges, view.members, base))
    return out


def tasklet_measurements(tasklet: ProcessorTasklet, base: Labels) -> list[Measurement]:
    """One processor's counters, watermarks, call times, own metrics and user metrics."""
    labels = {**base, "vertex": tasklet.vertex_name, "proc": str(tasklet.context.global_processor_index)}
    out: list[Measurement] = []
    for stream in tasklet.streams:
        at = {**labels, "ordinal": str(stream.ordinal)}
        size, capacity = stream.queued()
        out.append(Measurement("receivedCount", at, stream.received_items))
        out.append(Measurement("receivedBatches", at, stream.received_batches))
        out.append(Measurement("queuesSize", at, size))
        out.append(Measurement("queuesCapacity", at, capacity))
    for ordinal, count in enumerate(tasklet.emitted):
        out.append(Measurement("emittedCount", {**labels, "ordinal": str(ordinal)}, count))
    for name, value in (
        ("topObservedWm", tasklet.top_observed),
        ("coalescedWm", tasklet.coalesced_watermark),
        ("lastForwardedWm", tasklet.last_forwarded_watermark),
    ):
        if value != inbound.NO_WATERMARK:
            out.append(Measurement(name, labels, value))
    if tasklet.last_forwarded_watermark != inbound.NO_WATERMARK:
        out.append(Measurement("lastForwardedWmLatency", labels, tasklet.last_forwarded_latency_ms))
    for name, value in call_times(tasklet).items():
        out.append(Measurement(name, labels, value))
    for name, value in tasklet.processor.metrics().items():
        out.append(Measurement(name, labels, value))
    if tasklet.sink_latency is not None:
        out.extend(histogram_measurements(tasklet.sink_latency, labels))
    for metric in tasklet.user_metrics.snapshot():
        kind = type(metric).__name__.lower()
        user = {**labels, "user": kind}
        if isinstance(metric, user_metrics.Histogram):
            out.extend(histogram_measurements(metric, user))
        else:
            out.append(Measurement(metric.name, user, metric.value))
    return out


def histogram_measurements(histogram: user_metrics.Histogram, labels: Labels) -> list[Measurement]:
    """``<name>_bucket`` per bound (cumulative, ``le``), ``<name>_count`` and ``<name>_sum``."""
    counts = list(histogram.counts)  # one copy: the writer may go on meanwhile
    out: list[Measurement] = []
    running = 0
    for bound, count in zip([*histogram.buckets, float("inf")], counts, strict=True):
        running += count
        out.append(Measurement(f"{histogram.name}_bucket", {**labels, "le": _bound_text(bound)}, running))
    out.append(Measurement(f"{histogram.name}_count", labels, running))
    out.append(Measurement(f"{histogram.name}_sum", labels, histogram.sum))
    return out


def _bound_text(bound: float) -> str:
    """A bucket bound as Prometheus writes it (``0.5``, ``1.0``, ``+Inf``)."""
    return "+Inf" if bound == float("inf") else repr(float(bound))


def _link_measurements(
    counters: Iterable[remote.LinkCounters], edges: Sequence[EdgeInfo], members: Sequence[str], base: Labels
) -> list[Measurement]:
    out: list[Measurement] = []
    for link in counters:
        peer = members[link.member] if link.member < len(members) else str(link.member)
        labels = dict(base, peer=peer)
        if link.edge_id < len(edges):
            edge = edges[link.edge_id]
            vertex, ordinal = (
                (edge.source, edge.source_ordinal) if link.outbound else (edge.dest, edge.dest_ordinal)
            )
            labels.update(vertex=vertex, ordinal=str(ordinal))
        direction = "Out" if link.outbound else "In"
        out.append(Measurement(f"distributedItems{direction}", labels, link.items))
        out.append(Measurement(f"distributedBytes{direction}", labels, link.bytes))
    return out
