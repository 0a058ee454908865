"""Given a real local jetlet cluster (member processes) behind an in-memory Kubernetes API, when JetJobs
are reconciled, then their jobs are submitted, steered and reported as the spec says.

The reconcile functions are the ones kopf's handlers call; here they are
called as plain functions, again and again as kopf would (each call observes,
decides and acts once), until the status shows what the test waits for, with
a deadline.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from operator_fakes import FakeKube, jet_cluster, member_pod

from jetlet import client as client_mod
from jetlet.local_cluster import local_cluster
from jetlet_operator import builders, conditions, reconcile, settings

CONFIG = settings.OperatorSettings(cancel_timeout_seconds=20, client_timeout_seconds=10)
STREAM = """
from jetlet import AggregateOperations
from jetlet.pipeline import Pipeline, Sinks, Sources

def pipeline(sink="counts", rate=200):
    p = Pipeline()
    (p.read_from(Sources.test_stream(rate, lambda seq: 1))
      .without_timestamps()
      .rolling_aggregate(AggregateOperations.counting())
      .write_to(Sinks.list(sink)))
    return p
"""
WORDS = """
from jetlet import AggregateOperations
from jetlet.pipeline import Pipeline, Sinks, Sources

def pipeline(lines=("a b a",), sink="words"):
    p = Pipeline()
    (p.read_from(Sources.items(*lines))
      .flat_map(str.split)
      .grouping_key(lambda w: w)
      .aggregate(AggregateOperations.counting())
      .write_to(Sinks.list(sink)))
    return p
"""
FAILING = """
from jetlet.pipeline import Pipeline, Sinks, Sources

def pipeline():
    p = Pipeline()
    p.read_from(Sources.items(1, 2)).map(lambda x: x // 0).write_to(Sinks.list("never"))
    return p
"""


@pytest.fixture(scope="module")
def cluster() -> Iterator[client_mod.Client]:
    with local_cluster(2) as client:
        yield client


@pytest.fixture
def kube(cluster: client_mod.Client) -> FakeKube:
    api = FakeKube()
    api.put(jet_cluster())
    api.put(builders.get_secret({"kind": "JetCluster", **jet_cluster()}, "unused", cluster.token))
    for index, address in enumerate(cluster.addresses):
        api.put(member_pod("jet", index, address))
    return api


class JetJob:
    """A JetJob resource in the fake API, reconciled as kopf would (status kept, Events collected)."""

    def __init__(self, kube: FakeKube, name: str, spec: dict[str, Any]) -> None:
        self.kube, self.name = kube, name
        self.spec: dict[str, Any] = {"clusterRef": "jet", **spec}
        self.status: dict[str, Any] = {}
        self.events: list[tuple[str, str, str]] = []
        self.generation = 1
        kube.put(
            {
                "apiVersion": builders.API_VERSION,
                "kind": "JetJob",
                "metadata": {"name": name, "generation": 1},
                "spec": dict(self.spec),
            }
        )

    def edit(self, **changes: Any) -> None:
        """Change the spec, as ``kubectl patch`` does: a new generation, the status kept."""
        self.spec.update(changes)
        self.generation += 1
        stored = self.kube.objects[("JetJob", "default", self.name)]
        stored["spec"] = dict(self.spec)
        stored["metadata"]["generation"] = self.generation

    async def reconcile(self) -> reconcile.Outcome:
        outcome = await reconcile.reconcile_job(
            self.name, "default", self.spec, self.status, self.generation, self.kube, CONFIG
        )
        assert not outcome.invalid, outcome.invalid
        self.status = outcome.status
        self.events += outcome.events
        return outcome

    async def until(
        self, condition: Callable[[dict[str, Any]], bool], what: str, timeout: float = 60
    ) -> None:
        deadline = time.monotonic() + timeout
        while not condition(self.status):
            assert time.monotonic() < deadline, f"{what}: status {self.status}"
            await self.reconcile()
            if not condition(self.status):
                await asyncio.sleep(0.2)

    def reasons(self) -> list[str]:
        return [reason for _, reason, _ in self.events]


def phase(value: str) -> Callable[[dict[str, Any]], bool]:
    return lambda status: status.get("phase") == value


@pytest.mark.asyncio
async def test_inline_code_is_submitted_once_and_completes(
    kube: FakeKube, cluster: client_mod.Client
) -> None:
    job = JetJob(kube, "inline-words", {"pipeline": {"inline": WORDS, "args": {"sink": "inline-words"}}})
    await job.until(phase("COMPLETED"), "the job completes")
    assert sorted(cluster.get_list("inline-words")) == [("a", 2), ("b", 1)]
    assert job.reasons().count("Submitted") == 1
    assert conditions.is_true(job.status["conditions"], "Ready")
    await job.reconcile()  # a retry posts nothing new and submits nothing
    assert job.reasons().count("Submitted") == 1 and len(cluster.get_jobs()) >= 1


@pytest.mark.asyncio
async def test_configmap_code_waits_for_its_configmap_then_runs(
    kube: FakeKube, cluster: client_mod.Client
) -> None:
    job = JetJob(
        kube,
        "cm-words",
        {"pipeline": {"configMapRef": {"name": "code", "key": "job.py"}, "args": {"sink": "cm-words"}}},
    )
    outcome = await job.reconcile()
    assert outcome.retry_after and "ConfigMap code" in (
        job.status["conditions"][0]["message"] + str(job.events)
    )
    kube.put(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "code"}, "data": {"job.py": WORDS}}
    )
    await job.until(phase("COMPLETED"), "the job completes")
    assert sorted(cluster.get_list("cm-words")) == [("a", 2), ("b", 1)]


@pytest.mark.asyncio
async def test_module_code_runs_and_a_bad_module_is_a_permanent_error_naming_the_field(
    kube: FakeKube, cluster: client_mod.Client
) -> None:
    job = JetJob(
        kube,
        "module-words",
        {
            "pipeline": {
                "module": "jetlet.word_count:word_count_job",
                "args": {"text": "x y x", "map_name": "module-words"},
            }
        },
    )
    await job.until(phase("COMPLETED"), "the job completes")
    assert cluster.get_map("module-words") == {"x": 2, "y": 1}
    bad = await reconcile.reconcile_job(
        "bad-module",
        "default",
        {"clusterRef": "jet", "pipeline": {"module": "no_such.module:fn"}},
        {},
        1,
        kube,
        CONFIG,
    )
    assert "spec.pipeline.module" in bad.invalid
    assert [r for _, r, _ in bad.events] == ["InvalidSpec"]
    assert conditions.is_true(bad.status["conditions"], "Degraded")


@pytest.mark.asyncio
async def test_suspend_resume_restart_and_cancel(kube: FakeKube, cluster: client_mod.Client) -> None:
    job = JetJob(kube, "steered", {"pipeline": {"inline": STREAM, "args": {"sink": "steered"}}})
    await job.until(phase("RUNNING"), "the job runs")
    job.edit(state="Suspended")
    await job.until(phase("SUSPENDED"), "the job is suspended")
    assert conditions.is_true(job.status["conditions"], "Suspended")
    # a reconciliation with an older copy of the status (kopf's, the feed daemon's) reads it afresh
    stale = await reconcile.reconcile_job("steered", "default", job.spec, {}, 1, kube, CONFIG)
    assert stale.events == [] and stale.decision is not None and stale.decision.action.value == "Nothing"
    assert kube.objects[("JetJob", "default", "steered")]["status"]["suspendedByOperator"] is True
    job.edit(state="Running")
    await job.until(phase("RUNNING"), "the job runs again")
    job.edit(restartNonce=1)
    await job.until(lambda s: s.get("restartNonce") == 1 and s.get("phase") == "RUNNING", "restarted")
    job.edit(state="Canceled")
    await job.until(phase("FAILED"), "the job is canceled")
    actions = [r for r in job.reasons() if r != "Running"]  # "Running": the job's own transitions
    assert actions == ["Submitted", "Suspended", "Resumed", "JobRestarted", "Canceled"], job.events
    assert "Running" in job.reasons()
    assert not conditions.is_true(job.status["conditions"], "Degraded")  # a cancel is not a failure


@pytest.mark.asyncio
async def test_an_upgrade_with_upgrade_mode_snapshot_keeps_the_state(
    kube: FakeKube, cluster: client_mod.Client
) -> None:
    job = JetJob(
        kube,
        "counter",
        {
            "upgradeMode": "snapshot",
            "snapshotIntervalMillis": 200,
            "processingGuarantee": "EXACTLY_ONCE",
            "pipeline": {"inline": STREAM, "args": {"sink": "counter-v1"}},
        },
    )
    await job.until(phase("RUNNING"), "the job runs")
    deadline = time.monotonic() + 30
    while len(cluster.get_list("counter-v1")) < 50:
        assert time.monotonic() < deadline, "the job counts"
        await asyncio.sleep(0.1)
    first_id = job.status["id"]
    job.edit(pipeline={"inline": STREAM, "args": {"sink": "counter-v2"}})
    await job.until(lambda s: s.get("id") != first_id and s.get("phase") == "RUNNING", "upgraded")
    assert "Upgraded" in job.reasons() and "SnapshotTaken" in job.reasons()
    assert job.status["lastSnapshot"]["name"] == "counter-upgrade-g2"
    deadline = time.monotonic() + 30
    while not cluster.get_list("counter-v2"):
        assert time.monotonic() < deadline, "the upgraded job counts"
        await asyncio.sleep(0.1)
    # then: the new job's count goes on from the old one's state, not from 1
    assert cluster.get_list("counter-v2")[0] > 1
    job.edit(state="Canceled")
    await job.until(phase("FAILED"), "canceled")


@pytest.mark.asyncio
async def test_restart_policy_retries_then_ends_in_a_terminal_failed_condition(kube: FakeKube) -> None:
    job = JetJob(
        kube,
        "failing",
        {
            "pipeline": {"inline": FAILING},
            "restartPolicy": {"type": "OnFailure", "maxRetries": 1, "backoffSeconds": 0},
        },
    )
    await job.until(lambda s: conditions.is_true(s.get("conditions"), "Failed"), "failed for good")
    assert job.reasons().count("Submitted") == 1
    assert job.reasons().count("JobRestarted") == 1
    assert job.reasons().count("Failed") == 1
    assert "ZeroDivisionError" in job.status["failureText"]
    for _ in range(2):  # then nothing more happens
        await job.reconcile()
    assert job.reasons().count("Failed") == 1 and job.status["retries"] == 1


@pytest.mark.asyncio
async def test_a_jetjobsnapshot_exports_and_the_finalizer_cancels(
    kube: FakeKube, cluster: client_mod.Client
) -> None:
    job = JetJob(
        kube,
        "exported",
        {
            "processingGuarantee": "AT_LEAST_ONCE",
            "pipeline": {"inline": STREAM, "args": {"sink": "exported"}},
        },
    )
    await job.until(phase("RUNNING"), "the job runs")
    outcome = await reconcile.reconcile_snapshot(
        "exported-backup", "default", {"jetJobRef": "exported"}, {}, 1, kube, CONFIG
    )
    assert outcome.status["state"] == "Exported", outcome.status
    assert [r for _, r, _ in outcome.events] == ["SnapshotTaken"]
    assert "exported-backup" in [s["name"] for s in cluster.list_snapshots()]
    events = await reconcile.finalize_job("exported", "default", job.spec, kube, CONFIG)
    assert [r for _, r, _ in events] == ["Canceled"]
    record = cluster.get_job("exported")
    assert record is not None and record.status.value == "FAILED"


@pytest.mark.asyncio
async def test_the_finalizer_does_not_hang_when_the_cluster_is_gone(kube: FakeKube) -> None:
    kube.remove("JetCluster", "default", "jet")
    started = time.monotonic()
    events = await reconcile.finalize_job(
        "orphan", "default", {"clusterRef": "jet", "pipeline": {"module": "a:b"}}, kube, CONFIG
    )
    assert [r for _, r, _ in events] == ["CancelSkipped"] and time.monotonic() - started < 5
