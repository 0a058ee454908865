"""A job's metrics as a client sees them: measurements with real labels, merged across members.

Every measurement is a Jet metric name (``receivedCount``, ``emittedCount``,
``topObservedWm``, ... and the user's own, see :mod:`jetlet.metrics.user_metrics`),
its labels and its value. The labels are those the members serve on
``/metrics`` too: ``job_id``, ``job_name``, ``execution``, ``member``, and
where they apply ``vertex``, ``proc`` (the processor's global index),
``ordinal`` (an input or output edge), ``user`` (``"true"`` on user metrics)
and ``le`` (a histogram bucket's upper bound, on ``<name>_bucket``).
A histogram is ``<name>_bucket`` (cumulative, one per bound), ``<name>_count``
and ``<name>_sum``, the Prometheus way.

:class:`JobMetrics` also reads as the mapping that ``job.metrics()`` was
before labels (``"member/tasklet" -> {metric: value}``), so code written
against it keeps working. On the wire (REST ``GET /jobs/{job}/metrics``)
it is ``{"metrics": <that mapping>, "samples": [{"name", "labels", "value"}, ...]}``.

>>> m = JobMetrics([Measurement("receivedCount", {"vertex": "sink", "member": "m1"}, 3),
...                 Measurement("receivedCount", {"vertex": "sink", "member": "m2"}, 4)])
>>> m.sum("receivedCount", vertex="sink")
7
>>> m.by("receivedCount", "member")
{'m1': 3, 'm2': 4}
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

__all__ = ["JobMetrics", "Measurement"]


class Measurement(NamedTuple):
    """One value of one metric (Jet's ``Measurement``): its name, labels and value."""

    name: str
    labels: Mapping[str, str]
    value: float

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "labels": dict(self.labels), "value": self.value}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Measurement:
        return cls(str(data["name"]), {str(k): str(v) for k, v in data["labels"].items()}, data["value"])


class JobMetrics(Mapping[str, Mapping[str, Any]]):
    """A job's measurements, merged across members (see the module doc)."""

    def __init__(
        self, measurements: Iterable[Measurement], legacy: Mapping[str, Mapping[str, Any]] | None = None
    ) -> None:
        self.measurements = tuple(measurements)
        self._legacy = dict(legacy or {})

    @classmethod
    def from_wire(cls, body: Mapping[str, Any]) -> JobMetrics:
        """From the REST body ``{"metrics": ..., "samples": [...]}``."""
        return cls((Measurement.from_dict(s) for s in body.get("samples", ())), body.get("metrics", {}))

    def to_wire(self) -> dict[str, Any]:
        return {"metrics": self._legacy, "samples": [m.to_dict() for m in self.measurements]}

    def names(self) -> list[str]:
        """Every metric name present, sorted."""
        return sorted({m.name for m in self.measurements})

    def filter(self, name: str | None = None, **labels: str) -> list[Measurement]:
        """The measurements of ``name`` (any, if None) whose labels include ``labels``."""
        return [
            m
            for m in self.measurements
            if (name is None or m.name == name) and all(m.labels.get(k) == v for k, v in labels.items())
        ]

    def sum(self, name: str, **labels: str) -> float:
        """The sum of :meth:`filter`'s values (0 when none match)."""
        return sum(m.value for m in self.filter(name, **labels))

    def by(self, name: str, label: str, **labels: str) -> dict[str, float]:
        """:meth:`sum` grouped by the value of ``label`` (measurements without it are left out)."""
        grouped: dict[str, float] = {}
        for m in self.filter(name, **labels):
            key = m.labels.get(label)
            if key is not None:
                grouped[key] = grouped.get(key, 0) + m.value
        return grouped

    # -- the mapping of before labels: "member/tasklet" -> {metric: value} --------------------------
    def __getitem__(self, key: str) -> Mapping[str, Any]:
        return self._legacy[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._legacy)

    def __len__(self) -> int:
        return len(self._legacy)

    def __repr__(self) -> str:
        return f"JobMetrics({len(self.measurements)} measurements of {len(self.names())} metrics)"
