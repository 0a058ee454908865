"""Throughput: the highest input rate a query sustains, approximated by an unpaced run.

Definition. A rate is *sustainable* when the pipeline keeps up with it (its latency does not grow).
The standard approximation, used here: run the source **unpaced** (it emits as fast as the
pipeline takes events, back-pressure throttling it), wait ``warmup_s``, then read the source's
``emittedCount`` (summed over every member) twice, ``seconds`` apart: events per second is the
difference over the elapsed time, and per member that divided by the member count. The events in
flight (at most the bounded queues' capacity) are the same at both reads in a steady state, so they
cancel. The recorder's result counter is read at the same moments (results per second), and so is
the CPU time of the driver and every member process (:mod:`.cpu`): CPU seconds per event beside the
wall-clock rate.

Q5 runs with the issue's 10 s window sliding by 1 s (:data:`~.jobs.THROUGHPUT_SLIDE_MS`); its
event times are those of a stream at ``FastConfig.rate`` (1 M events/s), so an unpaced run that
is slower than that falls behind in event time, which costs nothing here.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from jetlet.nexmark import fast_generator
from jetlet.nexmark.bench import cpu, jobs


@dataclasses.dataclass(frozen=True, slots=True)
class Throughput:
    """One query's unpaced run."""

    query: str
    members: int
    """0: embedded in the harness's process; else member processes of a local cluster."""
    events: int
    """Events the source emitted during the measured interval."""
    results: int
    seconds: float
    cpu_seconds: float | None = None
    """User + system CPU seconds of the driver and every member process over the interval."""
    round: int = 0
    """The harness's round this run belongs to (see :mod:`.paired`)."""

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds

    @property
    def events_per_s_per_member(self) -> float:
        return self.events_per_s / max(self.members, 1)

    @property
    def cpu_us_per_event(self) -> float | None:
        """CPU microseconds per event, all processes together (None: not measured, or no events)."""
        if self.cpu_seconds is None or not self.events:
            return None
        return self.cpu_seconds * 1e6 / self.events


def _counts(job: Any, meter: cpu.Meter) -> tuple[int, int, float, dict[int, float]]:
    metrics = job.metrics()
    cpu_times = meter.read()
    at = time.time()
    events = jobs.events_read(metrics)
    return events, jobs.counter(metrics, jobs.RECORDER_NAME, jobs.RESULT_COUNT), at, cpu_times


def measure(
    cluster: Any,
    query: str,
    members: int,
    seconds: float,
    warmup_s: float,
    round_index: int = 0,
    *,
    split: str = "auto",
) -> Throughput:
    """Run ``query`` unpaced on ``cluster`` and measure ``seconds`` after ``warmup_s`` (see the doc);
    ``split`` is the source's (``jobs.SOURCE_SPLITS``)."""
    config = fast_generator.FastConfig(base_time=int(time.time() * 1000))
    name = f"nexmark-throughput-{query}-{time.time_ns()}"
    pipeline = jobs.build_pipeline(
        query, config, paced=False, slide_ms=jobs.THROUGHPUT_SLIDE_MS, list_name=name, split=split
    )
    meter = cpu.Meter.of(jobs.member_pids(cluster))
    job = cluster.new_job(pipeline, jobs.job_config(False, name))
    try:
        jobs.sleep_until(time.time() + warmup_s)
        events0, results0, at0, cpu0 = _counts(job, meter)
        jobs.sleep_until(at0 + seconds)
        events1, results1, at1, cpu1 = _counts(job, meter)
    finally:
        jobs.stop(job)
    return Throughput(
        query, members, events1 - events0, results1 - results0, at1 - at0, cpu.used(cpu0, cpu1), round_index
    )
