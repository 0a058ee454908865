"""Members serve /metrics (Prometheus text) with Jet's metrics; job.metrics() returns the same, labelled.

One 3-member local cluster runs a windowed streaming job (tumbling and session windows over events whose
event time is the wall clock, a user counter and histogram, exactly-once snapshots); the test scrapes
every member while the job runs, then reads the final numbers through ``job.metrics()``.
"""

from __future__ import annotations

import json
import pathlib
import re
import time
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import parser

import jetlet.metrics
from jetlet import AggregateOperations, JobConfig, JobStatus, ProcessingGuarantee
from jetlet.client import Client
from jetlet.local_cluster import local_cluster
from jetlet.pipeline import Pipeline, Sinks, Sources, WindowDefinition
from jetlet.testing import wait_until

DASHBOARD = pathlib.Path(__file__).resolve().parents[2] / "charts/jetlet/dashboards/jetlet-jobs.json"
RATE = 2000
COUNT = 8000  # four seconds of events
KEYS = 10

Samples = dict[str, list[tuple[dict[str, str], float]]]

JOB_FAMILIES = [
    "jetlet_received_count_total",
    "jetlet_received_batches_total",
    "jetlet_emitted_count_total",
    "jetlet_queues_size",
    "jetlet_queues_capacity",
    "jetlet_top_observed_wm_seconds",
    "jetlet_coalesced_wm_seconds",
    "jetlet_last_forwarded_wm_seconds",
    "jetlet_last_forwarded_wm_latency_seconds",
    "jetlet_snapshot_bytes",
    "jetlet_snapshot_keys",
    "jetlet_snapshot_store_seconds",
    "jetlet_distributed_items_in_total",
    "jetlet_distributed_items_out_total",
    "jetlet_distributed_in_bytes_total",
    "jetlet_distributed_out_bytes_total",
    "jetlet_execution_start_time_seconds",
    "jetlet_late_events_dropped_total",
    "jetlet_total_windows",
    "jetlet_total_frames",
    "jetlet_total_keys",
    "jetlet_busy_time_seconds_total",
    "jetlet_longest_call_seconds",
    "jetlet_sink_latency_seconds_bucket",
    "jetlet_user_seen_total",
    "jetlet_user_key_size_bucket",
]
MEMBER_FAMILIES = [
    "jetlet_iteration_count_total",
    "jetlet_tasklet_count",
    "jetlet_jobs_submitted_total",
    "jetlet_jobs_execution_started_total",
    "jetlet_jobs_completed_successfully_total",
    "jetlet_jobs_completed_with_failure_total",
    "process_resident_memory_bytes",
    "jetlet_gc_pause_seconds_count",
]


def _event(seq: int) -> tuple[int, int]:
    return (seq % KEYS, int(time.time() * 1000))


def _count_seen(event: tuple[int, int]) -> tuple[int, int]:
    jetlet.metrics.counter("seen").inc()
    jetlet.metrics.histogram("key_size", buckets=(2, 5)).observe(event[0])
    return event


def _pipeline() -> Pipeline:
    p = Pipeline()
    events = (
        p.read_from(Sources.test_stream(RATE, _event, COUNT))
        .with_timestamps(lambda event: event[1], 50)
        .map(_count_seen)
    )
    keyed = events.grouping_key(lambda event: event[0])
    keyed.window(WindowDefinition.tumbling(200)).aggregate(AggregateOperations.counting()).write_to(
        Sinks.noop()
    )
    keyed.window(WindowDefinition.session(100)).aggregate(AggregateOperations.counting()).write_to(
        Sinks.noop()
    )
    return p


def dashboard_metrics() -> set[str]:
    """Every metric name that a query of the Grafana dashboard (or of its variables) reads."""
    board = json.loads(DASHBOARD.read_text())
    queries = [t["expr"] for panel in board["panels"] for t in panel["targets"]]
    queries += [v["definition"] for v in board["templating"]["list"] if "definition" in v]
    found = {name for q in queries for name in re.findall(r"\b((?:jetlet|process|python)_[a-z0-9_]+)\b", q)}
    assert len(found) > 20
    return found


def scrape(address: str, token: str = "") -> Samples:
    """Every sample of a member's /metrics, parsed by prometheus_client, by sample name."""
    request = urllib.request.Request(f"http://{address}/metrics")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    found: Samples = {}
    for family in parser.text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return found


def total(samples: Samples, name: str, **labels: str) -> float:
    return sum(v for at, v in samples.get(name, []) if all(at.get(k) == w for k, w in labels.items()))


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Client, list[str]]]:
    with local_cluster(members=3) as client:
        members = client.request("GET", "/cluster")["members"]
        yield client, [m["metrics_address"] for m in members]


def test_a_windowed_job_is_measured_on_every_member_and_adds_up(cluster: tuple[Client, list[str]]) -> None:
    client, addresses = cluster
    assert len(addresses) == 3 and all(addresses)
    config = JobConfig(
        name="metered", processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE, snapshot_interval_millis=300
    )
    job = client.new_job(_pipeline(), config)

    # while it runs: every member serves the job's metrics; snapshots are measured
    first: list[Samples] = []

    def running_everywhere() -> bool:
        first[:] = [scrape(a) for a in addresses]
        # a member's coalesced watermark appears with its first watermark, which may follow its first item
        return all(
            total(s, "jetlet_received_count_total", job_name="metered") > 0
            and s.get("jetlet_coalesced_wm_seconds")
            for s in first
        ) and any(total(s, "jetlet_snapshot_bytes", job_name="metered") > 0 for s in first)

    wait_until(running_everywhere, "every member measures the job and a snapshot is stored")
    later: list[Samples] = []

    def advanced() -> bool:
        later[:] = [scrape(a) for a in addresses]
        return all(
            total(b, "jetlet_received_count_total") > total(a, "jetlet_received_count_total")
            and max(v for _, v in b["jetlet_coalesced_wm_seconds"])
            > max(v for _, v in a["jetlet_coalesced_wm_seconds"])
            for a, b in zip(first, later, strict=True)
        )

    wait_until(advanced, "counts and watermarks advance between scrapes")
    merged: Samples = {}
    for samples in later:
        for name, values in samples.items():
            merged.setdefault(name, []).extend(values)
    missing = [name for name in JOB_FAMILIES + MEMBER_FAMILIES if name not in merged]
    assert not missing
    assert not dashboard_metrics() - merged.keys()  # the Grafana dashboard queries only what members serve
    for labels, _ in merged["jetlet_received_count_total"]:
        assert {"job_id", "job_name", "execution", "vertex", "proc", "ordinal", "member"} <= labels.keys()
    assert {labels["member"] for labels, _ in merged["jetlet_emitted_count_total"]} == {"m1", "m2", "m3"}
    # what was read before cannot exceed what was emitted after (the scrapes are not simultaneous)
    assert sum(total(s, "jetlet_received_count_total") for s in first) <= sum(
        total(s, "jetlet_emitted_count_total") for s in later
    )
    # the event time is the wall clock, so a watermark is within seconds of now
    assert all(abs(time.time() - v) < 30 for _, v in merged["jetlet_coalesced_wm_seconds"])
    assert total(merged, "jetlet_sink_latency_seconds_count") > 0
    assert total(merged, "jetlet_jobs_submitted_total") >= 1

    # at the end: the final numbers, merged across members, add up exactly
    job.join(timeout=60)
    assert job.status is JobStatus.COMPLETED
    final = job.metrics()
    assert set(final.by("emittedCount", "member")) == {"m1", "m2", "m3"}
    sources = {
        m.labels["vertex"] for m in final.filter("emittedCount") if m.labels["vertex"].startswith("test")
    }
    assert sum(final.sum("emittedCount", vertex=v) for v in sources) == COUNT
    assert final.sum("seen", user="counter") == COUNT
    assert final.sum("key_size_count", user="histogram") == COUNT
    assert final.sum("emittedCount") == final.sum("receivedCount")  # every item emitted is received once
    assert final.sum("distributedItemsOut") == final.sum("distributedItemsIn") > 0
    assert final.sum("snapshotBytes") > 0 and final.sum("snapshotKeys") > 0
    assert set(final.by("snapshotStoreTime", "member")) == {"m1", "m2", "m3"}  # each stored its part
    assert all(m.value > 0 for m in final.filter("executionCompletionTime"))
    # the old shape still reads: "member/tasklet" -> counters
    assert sum(v.get("receivedCount", 0) for v in final.values()) == final.sum("receivedCount")

    def coordinator_counted() -> bool:
        return total(scrape(addresses[0]), "jetlet_jobs_completed_successfully_total") >= 1

    wait_until(coordinator_counted, "the coordinator counts the completed job")
