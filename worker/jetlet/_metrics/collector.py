"""The member's Prometheus collector: its executions' measurements, read at scrape time.

Theory of operation
-------------------
:class:`MemberCollector` is a ``prometheus_client`` custom collector. On
each scrape it asks the member for a view of every execution it runs
(:func:`jetlet._metrics.samples.execution_measurements`: plain reads of the
engine's counters, no message to another member), for its cooperative
workers' passes and tasklets, and for the job counts it kept while it
coordinated; it names them the Prometheus way (:mod:`jetlet._metrics.names`)
and groups them into families. Every sample carries the ``member`` label;
job samples carry ``job_id``, ``job_name``, ``execution`` and where they
apply ``vertex``, ``proc``, ``ordinal`` and ``peer``. (The label is
``job_name``/``job_id``, not ``job``: Prometheus gives ``job`` to the scrape
target.) A user metric's ``user`` label is dropped: its family name says it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from jetlet._metrics import names, samples
from jetlet.metrics.job_metrics import Measurement


class MemberCollector(Collector):
    """Collects one member's job, worker and cluster metrics (see the module doc)."""

    def __init__(
        self,
        member: Callable[[], str],
        views: Callable[[], Sequence[samples.ExecutionView]],
        worker_stats: Callable[[], Sequence[tuple[int, int]]],
        job_counts: Callable[[], Mapping[str, int]],
    ) -> None:
        self._member = member
        self._views = views
        self._worker_stats = worker_stats
        self._job_counts = job_counts

    def measurements(self) -> list[Measurement]:
        """Everything this member measures now, with Jet's names."""
        member = {"member": self._member()}
        out: list[Measurement] = []
        for view in self._views():
            out.extend(samples.execution_measurements(view))
        for index, (iterations, tasklets) in enumerate(self._worker_stats()):
            labels = {**member, "worker": str(index)}
            out.append(Measurement("iterationCount", labels, iterations))
            out.append(Measurement("taskletCount", labels, tasklets))
        for name, count in self._job_counts().items():
            out.append(Measurement(name, member, count))
        return out

    def collect(self) -> Iterator[Metric]:
        return iter(families(self.measurements()))


def families(measured: Iterable[Measurement]) -> list[Metric]:
    """``measured`` grouped into Prometheus families, values in base units."""
    found: dict[str, tuple[names.Family, Metric]] = {}
    for m in measured:
        base = names.base_name(m.name)
        kind = m.labels.get("user")
        family = names.family(base if (kind == "histogram" or base in names.KNOWN) else m.name, m.labels)
        entry = found.get(family.name)
        if entry is None:
            stem = family.name.removesuffix("_total") if family.kind == "counter" else family.name
            entry = found[family.name] = (family, Metric(stem, family.help, family.kind))
        metric = entry[1]
        labels = {k: v for k, v in m.labels.items() if k != "user"}
        if family.kind == "counter":
            sample = metric.name + "_total"
        elif family.kind == "histogram":
            sample = metric.name + m.name[len(base) :]
        else:
            sample = metric.name
        scale = family.scale if family.kind != "histogram" or sample.endswith("_sum") else 1.0
        metric.add_sample(sample, labels, float(m.value) * scale)
    return [metric for _, metric in found.values()]
