"""The operator's own metrics: reconciliations by kind and outcome, their duration, resources by phase."""

from __future__ import annotations

import asyncio
import contextlib
import json
import urllib.error
import urllib.request

import kopf
import pytest
from prometheus_client.parser import text_string_to_metric_families

from jetlet_operator import metrics


def _samples() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(metrics.exposition().decode())
        for sample in family.samples
    }


def _count(kind: str, outcome: str) -> float:
    return _samples().get(
        ("jetlet_operator_reconciliations_total", (("kind", kind), ("outcome", outcome))), 0.0
    )


@pytest.mark.parametrize(
    ("raised", "outcome"),
    [
        (None, "ok"),
        (kopf.TemporaryError("waiting for members", delay=1), "retry"),
        (kopf.PermanentError("spec.size: must be >= 1"), "invalid"),
        (RuntimeError("the API server went away"), "error"),
    ],
)
def test_each_reconciliation_is_counted_by_how_it_ended(raised: Exception | None, outcome: str) -> None:
    before = _count("TestKind", outcome)
    durations = _samples().get(
        ("jetlet_operator_reconcile_duration_seconds_count", (("kind", "TestKind"),)), 0
    )

    with pytest.raises(type(raised)) if raised else contextlib.nullcontext(), metrics.reconciling("TestKind"):
        if raised is not None:
            raise raised

    assert _count("TestKind", outcome) == before + 1
    after = _samples()[("jetlet_operator_reconcile_duration_seconds_count", (("kind", "TestKind"),))]
    assert after == durations + 1


def test_resources_count_by_their_last_phase_until_they_go() -> None:
    metrics.note_status("JetJob", "ns1", "a", {"phase": "RUNNING"})
    metrics.note_status("JetJob", "ns1", "b", {"phase": "RUNNING"})
    metrics.note_status("JetJob", "ns1", "b", {"phase": "SUSPENDED", "restarts": 1})
    metrics.note_status("JetCluster", "ns1", "jet", {"phase": "Degraded", "size": 3, "readyMembers": 2})
    metrics.note_status("JetJobSnapshot", "ns1", "s", {"state": "Exported"})
    try:
        samples = _samples()
        assert samples[("jetlet_operator_jobs", (("phase", "RUNNING"),))] == 1
        assert samples[("jetlet_operator_jobs", (("phase", "SUSPENDED"),))] == 1
        assert samples[("jetlet_operator_clusters", (("phase", "Degraded"),))] == 1
        assert samples[("jetlet_operator_cluster_size", (("cluster", "jet"), ("namespace", "ns1")))] == 3
        assert (
            samples[("jetlet_operator_cluster_ready_members", (("cluster", "jet"), ("namespace", "ns1")))]
            == 2
        )
        assert samples[("jetlet_operator_snapshots", (("state", "Exported"),))] == 1
        metrics.forget("JetJob", "ns1", "b")
        assert ("jetlet_operator_jobs", (("phase", "SUSPENDED"),)) not in _samples()
    finally:
        for kind, name in (("JetJob", "a"), ("JetJob", "b"), ("JetCluster", "jet"), ("JetJobSnapshot", "s")):
            metrics.forget(kind, "ns1", name)


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_endpoint_serves_metrics_and_a_healthz_that_follows_the_check() -> None:
    alive = [False]

    async def scenario() -> tuple[tuple[int, str], tuple[int, str], tuple[int, str]]:
        async with metrics.serve(0, lambda: alive[0], host="127.0.0.1") as port:
            base = f"http://127.0.0.1:{port}"
            starting = await asyncio.to_thread(_get, base + "/healthz")
            alive[0] = True
            up = await asyncio.to_thread(_get, base + "/healthz")
            scraped = await asyncio.to_thread(_get, base + "/metrics")
            return starting, up, scraped

    starting, up, scraped = asyncio.run(scenario())

    assert starting[0] == 503 and json.loads(starting[1]) == {"status": "starting"}
    assert up == (200, json.dumps({"status": "ok"}))
    assert scraped[0] == 200 and "jetlet_operator_reconciliations_total" in scraped[1]
