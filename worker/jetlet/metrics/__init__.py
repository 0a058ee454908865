"""Metrics: the user's own (``counter``, ``gauge``, ``histogram``) and a job's (``JobMetrics``).

Inside a pipeline function or a processor::

    import jetlet.metrics

    def parse(line):
        if not line:
            jetlet.metrics.counter("empty_lines").inc()
            return None
        return line.split(",")

The counter belongs to the processor that runs ``parse``; the members serve
it on ``/metrics`` as ``jetlet_user_empty_lines_total`` (labelled by job,
vertex, processor and member) and ``job.metrics()`` returns it as the
measurement ``empty_lines`` with ``user="true"``.
"""

from jetlet.metrics.job_metrics import JobMetrics, Measurement
from jetlet.metrics.user_metrics import (
    DEFAULT_BUCKETS,
    Counter,
    Gauge,
    Histogram,
    counter,
    gauge,
    histogram,
)

__all__ = [
    "DEFAULT_BUCKETS",
    "Counter",
    "Gauge",
    "Histogram",
    "JobMetrics",
    "Measurement",
    "counter",
    "gauge",
    "histogram",
]
