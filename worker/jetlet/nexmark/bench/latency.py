"""Latency at a fixed input rate, as the Jet paper measures it, and its percentiles.

The run: the fast source is **paced by the wall clock** at ``rate_per_member * members`` events per
second from ``base_time``, a moment :data:`START_LEAD_S` after submission (so the job is running
when the first event is due), and the generator's event times are those instants: an event's time
is its scheduled emission time. The recorder (see :mod:`.jobs`) takes, for every result whose
timestamp lies in ``[base_time + warmup_s, + seconds)``, ``time.time()`` at its arrival minus that
timestamp: for a map/filter query the triggering event's scheduled time, for a windowed one the
window's end (the instant the window could first be emitted). Results of the warm-up are counted
but not kept. After the interval plus :data:`DRAIN_S` the job is cancelled and the latencies read.

Percentiles (:func:`percentile`) are exact order statistics over every kept sample (no histogram
buckets): the ``p``-th percentile is the sample of rank ``ceil(p / 100 * n)`` (1-based) in sorted
order — the "nearest rank" definition: p99.99 of 10,000 samples is the 9,999th smallest.
A run with fewer than :data:`MIN_SAMPLES` samples is flagged by :attr:`Latency.enough`.

A query that cannot keep up with the rate shows it as latencies growing through the run; it is
reported as measured, with :attr:`Latency.behind_events` (events due but not yet emitted by the
source when the interval ended).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from typing import Any

from jetlet.nexmark import fast_generator
from jetlet.nexmark.bench import jobs

PERCENTILES = (50.0, 90.0, 99.0, 99.9, 99.99)
MIN_SAMPLES = 10_000
"""The issue's minimum number of samples for a p99.99."""
START_LEAD_S = 1.5
"""Time between submission and the first event's scheduled time."""
DRAIN_S = 1.5
"""Wait after the interval for late results and the recorder's last chunk."""


WINDOWED_QUERIES = ("q5", "q7")
"""Queries with one result per window of :data:`~.jobs.LATENCY_SLIDE_MS` in a latency run."""
LONGEST_RUN_S = 120.0
"""The most seconds a windowed query's latency run is stretched to, to have its samples."""


def seconds_for(query: str, seconds: float) -> float:
    """How long to measure ``query``: ``seconds``, or for a query with one result per window (Q5, Q7:
    100 a second with a 10 ms slide) long enough for :data:`MIN_SAMPLES` of them (at most
    :data:`LONGEST_RUN_S`). Other queries' results depend on the data; their runs are not stretched.
    """
    if query not in WINDOWED_QUERIES:
        return seconds
    needed = MIN_SAMPLES * jobs.LATENCY_SLIDE_MS / 1000 * 1.02
    return max(seconds, min(needed, LONGEST_RUN_S))


def percentile(sorted_samples: Sequence[float], p: float) -> float:
    """The nearest-rank ``p``-th percentile (0 < p <= 100) of samples sorted ascending."""
    if not sorted_samples:
        raise ValueError("no samples")
    if not 0 < p <= 100:
        raise ValueError(f"percentile must be in (0, 100], got {p}")
    rank = math.ceil(p / 100 * len(sorted_samples))
    return sorted_samples[max(rank, 1) - 1]


@dataclasses.dataclass(frozen=True, slots=True)
class Latency:
    """One query's paced run; latencies in ms."""

    query: str
    members: int
    rate_per_member: int
    snapshots: bool
    slide_ms: int
    samples: int
    results: int
    """Every result the recorder saw, warm-up and drain included."""
    percentiles: dict[float, float]
    behind_events: int
    seconds: float

    @property
    def enough(self) -> bool:
        return self.samples >= MIN_SAMPLES

    @property
    def label(self) -> str:
        snap = "snapshots 1 s" if self.snapshots else "no snapshots"
        return f"{self.query}, {self.members}m, {self.rate_per_member:,}/s/member, {snap}"


def summarize(samples: list[float]) -> dict[float, float]:
    """The :data:`PERCENTILES` of ``samples`` (sorted in place); empty when there are none."""
    samples.sort()
    return {p: percentile(samples, p) for p in PERCENTILES} if samples else {}


def measure(
    cluster: Any,
    query: str,
    members: int,
    rate_per_member: int,
    *,
    seconds: float,
    warmup_s: float,
    snapshots: bool,
    slide_ms: int = jobs.LATENCY_SLIDE_MS,
    split: str = "auto",
) -> tuple[Latency, list[float]]:
    """Run ``query`` at the fixed rate and return its summary and the sorted samples; ``split`` is
    the source's (``jobs.SOURCE_SPLITS``)."""
    rate = rate_per_member * max(members, 1)
    base = int((time.time() + START_LEAD_S) * 1000)
    config = fast_generator.FastConfig(rate=rate, base_time=base)
    record_from = base + int(warmup_s * 1000)
    record_until = record_from + int(seconds * 1000)
    name = f"nexmark-latency-{query}-{time.time_ns()}"
    pipeline = jobs.build_pipeline(
        query,
        config,
        paced=True,
        slide_ms=slide_ms,
        list_name=name,
        record=(record_from, record_until),
        split=split,
    )
    job = cluster.new_job(pipeline, jobs.job_config(snapshots, name))
    try:
        jobs.sleep_until(record_until / 1000)
        metrics = job.metrics()
        due = int((time.time() * 1000 - base) * rate / 1000)
        behind = max(due - jobs.events_read(metrics), 0)
        jobs.sleep_until(record_until / 1000 + DRAIN_S)
        results = jobs.counter(job.metrics(), jobs.RECORDER_NAME, jobs.RESULT_COUNT)
    finally:
        jobs.stop(job)
    samples = [value for chunk in cluster.get_list(name) for value in chunk]
    summary = Latency(
        query, members, rate_per_member, snapshots, slide_ms, len(samples), results,
        summarize(samples), behind, seconds,
    )  # fmt: skip
    return summary, samples
