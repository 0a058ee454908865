"""Garbage-collector pauses as a Prometheus histogram (``jetlet_gc_pause_seconds``, by generation).

Theory of operation
-------------------
CPython calls every function in ``gc.callbacks`` when a collection starts
and when it stops; the time between the two is a pause of every thread
(the collector holds the GIL). :class:`GcPauses` records it into one
histogram per generation. The callbacks are the process's, so the first
:meth:`GcPauses.install` adds one and the last :meth:`GcPauses.uninstall`
removes it (members in one process, as in tests, share it). Cost: two
calls of a small function per collection; while jobs run, the engine
collects only when the heap has grown (``jetlet._execution.gc_policy``).
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from jetlet.metrics import user_metrics

BUCKETS = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0)
"""Upper bounds of the pause histogram, in seconds."""


class GcPauses(Collector):
    """The process's collector pauses; see the module doc."""

    def __init__(self) -> None:
        self.histograms = [user_metrics.Histogram(f"gen{g}", BUCKETS) for g in range(3)]
        self._started = 0.0
        self._users = 0
        self._lock = threading.Lock()

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.histograms[info["generation"]].observe(time.perf_counter() - self._started)

    def install(self) -> None:
        with self._lock:
            self._users += 1
            if self._users == 1:
                gc.callbacks.append(self._on_gc)

    def uninstall(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0:
                gc.callbacks.remove(self._on_gc)

    def collect(self) -> Iterator[Metric]:
        metric = Metric(
            "jetlet_gc_pause_seconds", "Pauses of the garbage collector, by generation.", "histogram"
        )
        for generation, histogram in enumerate(self.histograms):
            counts = list(histogram.counts)
            labels = {"generation": str(generation)}
            running = 0
            for bound, count in zip([*histogram.buckets, float("inf")], counts, strict=True):
                running += count
                le = "+Inf" if bound == float("inf") else repr(bound)
                metric.add_sample("jetlet_gc_pause_seconds_bucket", {**labels, "le": le}, running)
            metric.add_sample("jetlet_gc_pause_seconds_count", labels, running)
            metric.add_sample("jetlet_gc_pause_seconds_sum", labels, histogram.sum)
        yield metric


PROCESS = GcPauses()
"""The one recorder of this process."""
