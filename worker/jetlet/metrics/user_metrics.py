"""User-defined metrics: counters, gauges and histograms bound to the processor that runs the code.

Theory of operation
-------------------
Every processor of a running job has one :class:`ProcessorMetrics`: a
dictionary of metrics by name. The engine binds it to the calling thread
(:func:`bind`, one thread-local store) before each call of the processor's
tasklet, so :func:`counter`, :func:`gauge` and :func:`histogram` called from
a pipeline function or a processor find the metric of *that* processor (the
first call creates it). The member reads every processor's metrics when it is
scraped or asked for a job's metrics and labels them with the job, vertex,
processor index and member, as it does Jet's own metrics; summed per vertex
they are Jet's user metrics.

A metric is written by one thread only (the one running its processor) and
read by another: plain attribute updates, no locks, so a reader sees a
recent value, never a torn one. Outside any processor (a function tried in
a plain test) the calls work on a registry nobody reads.

>>> c = counter("dropped")
>>> c.inc(); c.inc(2); c.value
3
>>> h = histogram("size", buckets=(1, 10))
>>> h.observe(5); h.observe(50); (h.counts, h.count, h.sum)
([0, 1, 1], 2, 55)
"""

from __future__ import annotations

import bisect
import re
import threading
from collections.abc import Sequence

__all__ = [
    "DEFAULT_BUCKETS",
    "Counter",
    "Gauge",
    "Histogram",
    "ProcessorMetrics",
    "bind",
    "counter",
    "gauge",
    "histogram",
]

DEFAULT_BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Prometheus's default histogram buckets (upper bounds; a last, infinite one is implied)."""

_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


class Counter:
    """A number that only goes up (``inc``)."""

    __slots__ = ("name", "value")

    def __init__(self, name: str) -> None:
        self.name = name
        self.value: float = 0

    def inc(self, amount: float = 1) -> None:
        if amount < 0:
            raise ValueError(f"counter {self.name!r} only goes up: inc({amount!r})")
        self.value += amount


class Gauge:
    """A number that goes up and down (``set``, ``inc``, ``dec``)."""

    __slots__ = ("name", "value")

    def __init__(self, name: str) -> None:
        self.name = name
        self.value: float = 0

    def set(self, value: float) -> None:
        self.value = value

    def inc(self, amount: float = 1) -> None:
        self.value += amount

    def dec(self, amount: float = 1) -> None:
        self.value -= amount


class Histogram:
    """Observations counted in buckets by upper bound (``counts[i]`` is the i-th bucket alone, not
    cumulative; the last one is the implied infinite bucket), with their count and sum."""

    __slots__ = ("buckets", "count", "counts", "name", "sum")

    def __init__(self, name: str, buckets: Sequence[float] = DEFAULT_BUCKETS) -> None:
        bounds = tuple(float(b) for b in buckets)
        if not bounds or list(bounds) != sorted(set(bounds)):
            raise ValueError(f"histogram {name!r}: buckets must be increasing and not empty, got {buckets!r}")
        self.name = name
        self.buckets = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.count = 0
        self.sum: float = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.count += 1
        self.sum += value


Metric = Counter | Gauge | Histogram


class ProcessorMetrics:
    """One processor's user metrics by name (see the module doc)."""

    __slots__ = ("metrics",)

    def __init__(self) -> None:
        self.metrics: dict[str, Metric] = {}

    def snapshot(self) -> list[Metric]:
        """The metrics now (safe to call from another thread than the writer's)."""
        return list(self.metrics.values())


BOUND = threading.local()
"""``BOUND.registry`` is the registry of the processor this thread runs now; the engine sets it before
each tasklet call (one attribute store: cheaper than calling :func:`bind`)."""
_unread = ProcessorMetrics()


def bind(registry: ProcessorMetrics) -> None:
    """Make ``registry`` the one this thread's metric calls use."""
    BOUND.registry = registry


def _find(name: str, kind: type[Metric]) -> Metric | None:
    registry: ProcessorMetrics = getattr(BOUND, "registry", _unread)
    found = registry.metrics.get(name)
    if found is None:
        if not _NAME.fullmatch(name):
            raise ValueError(
                f"metric name {name!r} must be letters, digits and underscores, not a digit first"
            )
        return None
    if type(found) is not kind:
        raise TypeError(f"metric {name!r} is a {type(found).__name__.lower()}, not a {kind.__name__.lower()}")
    return found


def _register(metric: Metric) -> None:
    registry: ProcessorMetrics = getattr(BOUND, "registry", _unread)
    registry.metrics[metric.name] = metric


def counter(name: str) -> Counter:
    """The counter ``name`` of the processor running this code (created at the first call).

    >>> counter("seen").inc()
    """
    found = _find(name, Counter)
    if found is None:
        found = Counter(name)
        _register(found)
    assert type(found) is Counter
    return found


def gauge(name: str) -> Gauge:
    """The gauge ``name`` of the processor running this code (created at the first call)."""
    found = _find(name, Gauge)
    if found is None:
        found = Gauge(name)
        _register(found)
    assert type(found) is Gauge
    return found


def histogram(name: str, buckets: Sequence[float] = DEFAULT_BUCKETS) -> Histogram:
    """The histogram ``name`` of the processor running this code; ``buckets`` (upper bounds) apply
    when the first call creates it."""
    found = _find(name, Histogram)
    if found is None:
        found = Histogram(name, buckets)
        _register(found)
    assert type(found) is Histogram
    return found
