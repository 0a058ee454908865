"""The operator's own metrics (Prometheus) and its HTTP endpoint: ``/metrics`` beside ``/healthz``.

Theory of operation
-------------------
Every handler runs its reconciliation inside :func:`reconciling`, which
counts it per resource kind and outcome (``ok``; ``retry``, a
``kopf.TemporaryError``: waiting for something; ``invalid``, a
``kopf.PermanentError``: a bad spec; ``error``, anything else) in
``jetlet_operator_reconciliations_total`` and times it in the histogram
``jetlet_operator_reconcile_duration_seconds``. The statuses the handlers
write are noted per resource (:func:`note_status`, :func:`forget`), and a
collector turns them into gauges at scrape time: JetJobs per phase,
JetJobSnapshots per state, JetClusters per phase, and each JetCluster's
desired size and ready members. Everything lives in one registry of its own
(:data:`REGISTRY`), not prometheus-client's global one.

:func:`serve` runs a small aiohttp server on the operator's event loop, on
the ``metrics_port`` setting: ``GET /metrics`` in the Prometheus text format
and ``GET /healthz``, 200 while the operator is alive (its event loop
answers, and the ``alive`` check passes: it holds its API client), else 503.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter as Tally
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

import kopf
import prometheus_client
from aiohttp import web
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

REGISTRY = prometheus_client.CollectorRegistry(auto_describe=True)
"""The operator's metrics (served by :func:`serve`)."""

RECONCILIATIONS = prometheus_client.Counter(
    "jetlet_operator_reconciliations",
    "Reconciliations run, by resource kind and outcome (ok, retry, invalid, error).",
    ["kind", "outcome"],
    registry=REGISTRY,
)
DURATION = prometheus_client.Histogram(
    "jetlet_operator_reconcile_duration_seconds",
    "How long one reconciliation took, by resource kind.",
    ["kind"],
    registry=REGISTRY,
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)

_statuses: dict[tuple[str, str, str], Mapping[str, Any]] = {}
"""The last status written per (kind, namespace, name)."""


@contextlib.contextmanager
def reconciling(kind: str) -> Iterator[None]:
    """Count and time one reconciliation of a ``kind`` resource by how it ends (see the module doc)."""
    started = time.monotonic()
    outcome = "error"
    try:
        yield
        outcome = "ok"
    except kopf.TemporaryError:
        outcome = "retry"
        raise
    except kopf.PermanentError:
        outcome = "invalid"
        raise
    finally:
        RECONCILIATIONS.labels(kind, outcome).inc()
        DURATION.labels(kind).observe(time.monotonic() - started)


def note_status(kind: str, namespace: str, name: str, status: Mapping[str, Any]) -> None:
    """Remember the status just written for a resource (its phase counts in the gauges)."""
    if status:
        known = _statuses.get((kind, namespace, name), {})
        _statuses[(kind, namespace, name)] = {**known, **status}


def forget(kind: str, namespace: str, name: str) -> None:
    """The resource is gone: it counts no more."""
    _statuses.pop((kind, namespace, name), None)


class _ResourceGauges(Collector):
    """Gauges of the resources' last statuses, made at scrape time."""

    def collect(self) -> Iterator[Metric]:
        statuses = dict(_statuses)
        phases = {
            "JetJob": GaugeMetricFamily("jetlet_operator_jobs", "JetJobs by phase.", labels=["phase"]),
            "JetCluster": GaugeMetricFamily(
                "jetlet_operator_clusters", "JetClusters by phase.", labels=["phase"]
            ),
            "JetJobSnapshot": GaugeMetricFamily(
                "jetlet_operator_snapshots", "JetJobSnapshots by state.", labels=["state"]
            ),
        }
        for kind, family in phases.items():
            field = "state" if kind == "JetJobSnapshot" else "phase"
            counted = Tally(str(s.get(field) or "Unknown") for (k, _, _), s in statuses.items() if k == kind)
            for phase, count in sorted(counted.items()):
                family.add_metric([phase], count)
            yield family
        size = GaugeMetricFamily(
            "jetlet_operator_cluster_size", "A JetCluster's desired members.", labels=["namespace", "cluster"]
        )
        ready = GaugeMetricFamily(
            "jetlet_operator_cluster_ready_members",
            "A JetCluster's ready members.",
            labels=["namespace", "cluster"],
        )
        for (kind, namespace, name), status in sorted(statuses.items()):
            if kind == "JetCluster":
                size.add_metric([namespace, name], float(status.get("size") or 0))
                ready.add_metric([namespace, name], float(status.get("readyMembers") or 0))
        yield size
        yield ready


REGISTRY.register(_ResourceGauges())


def exposition() -> bytes:
    """The metrics in the Prometheus text format."""
    return prometheus_client.generate_latest(REGISTRY)


@contextlib.asynccontextmanager
async def serve(port: int, alive: Callable[[], bool], host: str = "0.0.0.0") -> AsyncIterator[int]:
    """Serve ``/metrics`` and ``/healthz`` on ``host:port`` (0: any free port); yields the bound port."""

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(
            body=exposition(), headers={"Content-Type": prometheus_client.CONTENT_TYPE_LATEST}
        )

    async def healthz(_: web.Request) -> web.Response:
        ok = alive()
        return web.json_response({"status": "ok" if ok else "starting"}, status=200 if ok else 503)

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    try:
        server = site._server  # the bound port, when 0 asked for any
        sockets = getattr(server, "sockets", None) or []
        yield sockets[0].getsockname()[1] if sockets else port
    finally:
        await runner.cleanup()
