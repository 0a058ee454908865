"""The user metrics API, JobMetrics, the Prometheus names and the /metrics token, without a cluster."""

from __future__ import annotations

import asyncio

import prometheus_client
import pytest
from aiohttp import test_utils
from prometheus_client import parser

import jetlet
import jetlet.metrics
from jetlet._cluster import settings
from jetlet._metrics import collector, names, server
from jetlet.metrics import JobMetrics, Measurement
from jetlet.pipeline import Pipeline, Sinks, Sources


def _tag(item: int) -> int:
    jetlet.metrics.counter("seen").inc()
    jetlet.metrics.gauge("last").set(item)
    jetlet.metrics.histogram("value", buckets=(10, 100)).observe(item)
    return item


def test_user_metrics_are_bound_to_the_processor_and_summed_per_vertex() -> None:
    # given a map stage that counts, sets a gauge and observes a histogram
    p = Pipeline()
    out: list[int] = []
    p.read_from(Sources.items(*range(1, 201))).map(_tag).set_local_parallelism(2).write_to(Sinks.to_list(out))
    with jetlet.embedded(cooperative_thread_count=2) as jet:
        # when it runs
        job = jet.new_job(p)
        job.join(10)
        metrics = job.metrics()
    # then each processor has its own metrics, labelled, and they add up per vertex
    seen = metrics.filter("seen", user="counter")
    assert seen and all(m.labels["proc"].isdigit() for m in seen)
    vertex = seen[0].labels["vertex"]
    assert metrics.sum("seen", vertex=vertex) == 200 == len(out)
    assert {m.labels["member"] for m in seen} == {"embedded"}
    assert metrics.sum("value_count", user="histogram") == 200
    assert metrics.sum("value_bucket", user="histogram", le="10.0") == 10
    assert metrics.sum("value_bucket", user="histogram", le="+Inf") == 200
    assert metrics.sum("value_sum", user="histogram") == sum(range(1, 201))
    assert max(m.value for m in metrics.filter("last", user="gauge")) <= 200
    # and Jet's own counters come with them, also in the old shape
    assert metrics.sum("receivedCount", vertex=vertex) == 200
    assert sum(v["receivedCount"] for k, v in metrics.items() if k.startswith(vertex)) == 200


def test_user_metrics_outside_a_job_and_their_mistakes() -> None:
    jetlet.metrics.counter("free").inc()  # works, read by nobody
    with pytest.raises(ValueError, match="only goes up"):
        jetlet.metrics.counter("free").inc(-1)
    with pytest.raises(TypeError, match="is a counter, not a gauge"):
        jetlet.metrics.gauge("free")
    with pytest.raises(ValueError, match="letters, digits and underscores"):
        jetlet.metrics.counter("bad name")
    with pytest.raises(ValueError, match="increasing"):
        jetlet.metrics.histogram("h", buckets=(5, 1))


def test_job_metrics_travel_and_filter() -> None:
    m = JobMetrics(
        [
            Measurement("emittedCount", {"vertex": "a", "member": "m1", "ordinal": "0"}, 5),
            Measurement("emittedCount", {"vertex": "a", "member": "m2", "ordinal": "0"}, 7),
            Measurement("receivedCount", {"vertex": "b", "member": "m1", "ordinal": "0"}, 12),
        ],
        {"m1/a#0": {"emittedCount": 5}},
    )
    back = JobMetrics.from_wire(m.to_wire())
    assert back.measurements == m.measurements and dict(back) == {"m1/a#0": {"emittedCount": 5}}
    assert back.names() == ["emittedCount", "receivedCount"]
    assert back.by("emittedCount", "member") == {"m1": 5, "m2": 7}
    assert back.sum("emittedCount") == back.sum("receivedCount", vertex="b") == 12
    assert back.filter(member="m1", vertex="b") == [m.measurements[2]]


def test_prometheus_names_follow_the_conventions() -> None:
    for jet_name, family in names.KNOWN.items():
        assert family.name.startswith("jetlet_") and family.name == family.name.lower()
        assert family.name.endswith("_total") == (family.kind == "counter"), jet_name
    assert names.family("numInFlightOps", {}).name == "jetlet_num_in_flight_ops"
    assert names.family("maxInFlight", {}) == names.Family(
        "jetlet_max_in_flight", "gauge", "Processor metric 'maxInFlight'."
    )
    assert names.family("latency", {"user": "histogram"}).name == "jetlet_user_latency"


def _registry() -> prometheus_client.CollectorRegistry:
    counts = {"jobs.submitted": 3}
    return server.registry(collector.MemberCollector(lambda: "m1", list, lambda: [(10, 2)], lambda: counts))


async def _get(token: str, *headers: dict[str, str]) -> list[tuple[int, str]]:
    """What ``GET /metrics`` answers with each of ``headers``, the endpoint set up with ``token``."""
    app = server.create_app(_registry(), token)
    answers = []
    async with test_utils.TestClient(test_utils.TestServer(app)) as client:
        for given in headers:
            response = await client.get("/metrics", headers=given)
            answers.append((response.status, await response.text()))
    return answers


TOKEN = "a-metrics-token-of-32-characters"


def test_metrics_are_open_by_default_and_need_the_token_when_one_is_set() -> None:
    [(status, text)] = asyncio.run(_get("", {}))
    assert status == 200
    families = {f.name: f for f in parser.text_string_to_metric_families(text)}
    assert families["jetlet_jobs_submitted"].samples[0].value == 3  # the parser drops _total from the family
    assert families["jetlet_iteration_count"].samples[0].labels == {"member": "m1", "worker": "0"}
    assert "process_resident_memory_bytes" in families
    none, wrong, right = asyncio.run(
        _get(TOKEN, {}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Bearer {TOKEN}"})
    )
    assert none[0] == wrong[0] == 401
    assert right[0] == 200 and "jetlet_tasklet_count" in right[1]


def test_the_metrics_port_setting() -> None:
    assert settings.load({}).metrics_port == 0
    assert settings.load({}, environ={"JETLET_METRICS_PORT": "-1"}).metrics_port == -1
    with pytest.raises(settings.SettingsError, match="metrics_port"):
        settings.load({"metrics_port": "-2"})
    loaded = settings.load({"metrics_token": TOKEN})
    assert loaded.read_metrics_token() == TOKEN and TOKEN not in repr(loaded)
