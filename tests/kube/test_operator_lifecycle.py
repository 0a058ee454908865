"""Given the operator running under the operator token with its RBAC rules on a real control plane,
when JetClusters, JetJobs and JetJobSnapshots are applied with kubectl, then it runs them end to end.

The operator is ``python -m jetlet_operator`` (kopf), a process of the test
with the harness's ``operator`` user's kubeconfig, bound in the test's
namespace to the ClusterRole of ``operator/deploy/rbac.yaml`` and nothing
else. Members are pods of the process kubelet (``jetlet:dev`` is the
project's ``jetlet``), each on its own 127.x address; the operator reaches
them there with ``jetlet.client``. Every wait is ``kubectl wait`` or a
status read with a deadline.
"""

from __future__ import annotations

import ast
import base64
import collections
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubeharness import KubeCluster

from jetlet import client as client_mod

pytestmark = pytest.mark.kube

ROOT = Path(__file__).resolve().parents[2]
CRD_NAMES = ("jetclusters.jetlet.io", "jetjobs.jetlet.io", "jetjobsnapshots.jetlet.io")
FAST = "--heartbeat-interval-millis"  # the members' failure detection, made fast through JETLET_* env


def _rbac(kube: KubeCluster) -> list[dict[str, Any]]:
    docs = list(yaml.safe_load_all((ROOT / "operator" / "deploy" / "rbac.yaml").read_text()))
    role = next(d for d in docs if d["kind"] == "ClusterRole")
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "jetlet-operator"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": role["metadata"]["name"],
        },
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": kube.user_name("operator")}
        ],
    }
    return [role, binding]


class Operator:
    """The operator process and its log."""

    def __init__(self, kube: KubeCluster, namespace: str, log: Path) -> None:
        self.kube, self.namespace, self.log = kube, namespace, log
        env = {
            **os.environ,
            "KUBECONFIG": kube.kubeconfig("operator"),
            "JETLET_OPERATOR_NAMESPACES": namespace,
            "JETLET_OPERATOR_METRICS_PORT": "0",
            "JETLET_OPERATOR_RESYNC_SECONDS": "5",
            "JETLET_OPERATOR_CANCEL_TIMEOUT_SECONDS": "15",
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", "jetlet_operator", "--verbose"],
            env=env,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(5)


@pytest.fixture(scope="module")
def crds(kube: KubeCluster) -> None:
    kube.kubectl("apply", "-f", str(ROOT / "crds"))
    for name in CRD_NAMES:
        kube.kubectl("wait", "--for=condition=Established", f"crd/{name}", "--timeout=60s")


@pytest.fixture
def operator(kube: KubeCluster, kube_namespace: str, crds: None, tmp_path: Path) -> Iterator[Operator]:
    kube.apply(*_rbac(kube), namespace=kube_namespace)
    running = Operator(kube, kube_namespace, tmp_path / "operator.log")
    try:
        yield running
    finally:
        # the JetJobs' finalizer needs the operator: delete them (bounded) before it stops
        kube.kubectl(
            "delete",
            "jj,jjs,jc",
            "--all",
            "--wait=true",
            "--timeout=60s",
            namespace=kube_namespace,
            check=False,
            timeout=90.0,  # past kubectl's own --timeout, so a slow deletion ends kubectl, not the test
        )
        running.stop()


def _get(kube: KubeCluster, ns: str, resource: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(kube.kubectl("get", resource, "-o", "json", namespace=ns).stdout)
    return found


def _wait(kube: KubeCluster, ns: str, op: Operator, *args: str, timeout: int = 120) -> None:
    result = kube.kubectl(
        "wait", *args, f"--timeout={timeout}s", namespace=ns, check=False, timeout=timeout + 30
    )
    if result.returncode != 0:
        pods = kube.kubectl("get", "pods", "-o", "json", namespace=ns, check=False).stdout
        waiting = [
            (
                p["metadata"]["name"],
                [c.get("state") for c in p.get("status", {}).get("containerStatuses", [])],
            )
            for p in json.loads(pods or '{"items": []}')["items"]
        ]
        raise AssertionError(
            f"kubectl wait {' '.join(args)}: {result.stderr}\n{kube.describe(ns)}\n{waiting}\n"
            f"--- operator:\n{op.output()}"
        )


def _until(what: str, condition: Callable[[], bool], op: Operator, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s\n--- operator:\n{op.output()}")
        time.sleep(0.3)


def _events(kube: KubeCluster, ns: str, name: str) -> list[str]:
    listing = json.loads(kube.kubectl("get", "events", "-o", "json", namespace=ns).stdout)
    return [
        e["reason"]
        for e in sorted(listing["items"], key=lambda e: e["metadata"]["creationTimestamp"])
        if e["involvedObject"]["name"] == name
    ]


def _client(kube: KubeCluster, ns: str) -> client_mod.Client:
    secret = _get(kube, ns, "secret/jet-secret")
    token = base64.b64decode(secret["data"]["token"]).decode()
    status = _get(kube, ns, "jc/jet")["status"]
    addresses = [m["address"] for m in status["members"] if m["ready"]]
    return client_mod.connect(addresses[0], token)


def _cluster(size: int) -> dict[str, Any]:
    return {
        "apiVersion": "jetlet.io/v1alpha1",
        "kind": "JetCluster",
        "metadata": {"name": "jet"},
        "spec": {
            "size": size,
            "image": "jetlet:dev",
            "cooperativeThreadCount": 1,
            "scaleUpDelayMillis": 1000,
            "env": [
                {"name": "JETLET_HEARTBEAT_INTERVAL_MILLIS", "value": "200"},
                {"name": "JETLET_FAILURE_TIMEOUT_MILLIS", "value": "2000"},
            ],
        },
    }


KEYS, RATE, COUNT, WINDOW_MS = 5, 400, 6000, 500
WINDOWED = f"""
from jetlet import AggregateOperations
from jetlet.pipeline import Pipeline, Sinks, Sources, WindowDefinition

def pipeline(out, rate={RATE}):
    p = Pipeline()
    (p.read_from(Sources.test_stream(rate, lambda seq: (seq % {KEYS}, seq), {COUNT}))
      .with_timestamps(lambda event: event[1], 0)
      .grouping_key(lambda event: event[0])
      .window(WindowDefinition.tumbling({WINDOW_MS}))
      .aggregate(AggregateOperations.counting())
      .map(lambda r: (r.key, r.end, r.result))
      .write_to(Sinks.files(out)))
    return p
"""


def _reference() -> collections.Counter[tuple[int, int, int]]:
    counts = collections.Counter((seq % KEYS, (seq // WINDOW_MS + 1) * WINDOW_MS) for seq in range(COUNT))
    return collections.Counter((key, end, count) for (key, end), count in counts.items())


def _committed(directory: Path) -> collections.Counter[Any]:
    found: collections.Counter[Any] = collections.Counter()
    for path in directory.iterdir() if directory.exists() else ():
        if path.is_file() and not path.name.startswith("."):
            for line in path.read_text().splitlines():
                found[ast.literal_eval(line)] += 1
    return found


def test_a_cluster_and_an_exactly_once_job_survive_a_member_loss_and_are_steered_with_kubectl(
    kube: KubeCluster, kube_namespace: str, operator: Operator, tmp_path: Path
) -> None:
    ns, op = kube_namespace, operator
    # given: a JetCluster of 3, Ready
    kube.apply(_cluster(3), namespace=ns)
    _wait(kube, ns, op, "--for=condition=Ready", "jc/jet", timeout=150)
    status = _get(kube, ns, "jc/jet")["status"]
    assert status["readyMembers"] == 3 and status["phase"] == "Running" and status["coordinator"]
    assert {
        o: _get(kube, ns, o)["metadata"]["ownerReferences"][0]["kind"]
        for o in (
            "statefulset/jet",
            "service/jet-members",
            "secret/jet-secret",
            "pdb/jet",
            "role/jet-discovery",
        )
    } == {
        o: "JetCluster"
        for o in (
            "statefulset/jet",
            "service/jet-members",
            "secret/jet-secret",
            "pdb/jet",
            "role/jet-discovery",
        )
    }
    # when: an EXACTLY_ONCE windowed count is applied with its code inline
    out = tmp_path / "out"
    job = {
        "apiVersion": "jetlet.io/v1alpha1",
        "kind": "JetJob",
        "metadata": {"name": "windowed"},
        "spec": {
            "clusterRef": "jet",
            "processingGuarantee": "EXACTLY_ONCE",
            "snapshotIntervalMillis": 300,
            "pipeline": {"inline": WINDOWED, "args": {"out": str(out)}},
        },
    }
    kube.apply(job, namespace=ns)
    _wait(kube, ns, op, "--for=jsonpath={.status.phase}=RUNNING", "jj/windowed")
    _wait(kube, ns, op, "--for=condition=Ready", "jj/windowed")
    client = _client(kube, ns)
    _until("a snapshot", lambda: bool((client.get_job("windowed") or client).snapshot), op)  # type: ignore[union-attr]
    # when: a member pod is deleted mid-job
    coordinator = _get(kube, ns, "jc/jet")["status"]["coordinator"]
    victim = next(f"jet-{i}" for i in range(3) if f"jet-{i}" != coordinator)
    kube.kubectl("delete", "pod", victim, "--wait=false", namespace=ns)
    # then: the job restarts from its snapshot, completes, and its results equal the reference
    _wait(kube, ns, op, "--for=jsonpath={.status.phase}=COMPLETED", "jj/windowed", timeout=150)
    assert _committed(out) == _reference()
    _until(
        "MemberLost and JobRestarted Events",
        lambda: "MemberLost" in _events(kube, ns, "jet") and "JobRestarted" in _events(kube, ns, "windowed"),
        op,
        30,
    )
    assert _events(kube, ns, "windowed").count("Submitted") == 1
    # and: the StatefulSet replaced the pod (the same name, a new member), the cluster is Ready again
    _wait(kube, ns, op, "--for=jsonpath={.status.readyMembers}=3", "jc/jet", timeout=60)
    # when: the JetJob is deleted, then the finalizer lets it go
    kube.kubectl("delete", "jj/windowed", "--timeout=60s", namespace=ns)


def test_suspend_resume_snapshot_upgrade_scale_and_delete(
    kube: KubeCluster, kube_namespace: str, operator: Operator, tmp_path: Path
) -> None:
    ns, op = kube_namespace, operator
    kube.apply(_cluster(2), namespace=ns)
    counting = """
from jetlet import AggregateOperations
from jetlet.pipeline import Pipeline, Sinks, Sources

def pipeline(sink):
    p = Pipeline()
    (p.read_from(Sources.test_stream(100, lambda seq: 1))
      .without_timestamps()
      .rolling_aggregate(AggregateOperations.counting())
      .write_to(Sinks.list(sink)))
    return p
"""
    job = {
        "apiVersion": "jetlet.io/v1alpha1",
        "kind": "JetJob",
        "metadata": {"name": "counter"},
        "spec": {
            "clusterRef": "jet",
            "processingGuarantee": "EXACTLY_ONCE",
            "snapshotIntervalMillis": 300,
            "upgradeMode": "snapshot",
            "pipeline": {"inline": counting, "args": {"sink": "v1"}},
        },
    }
    kube.apply(job, namespace=ns)  # before the cluster is ready: it waits, saying why
    _wait(kube, ns, op, "--for=condition=Ready", "jc/jet", timeout=150)
    _wait(kube, ns, op, "--for=condition=Ready", "jj/counter")
    client = _client(kube, ns)
    _until("counting", lambda: len(client.get_list("v1")) > 20, op)
    # suspend and resume with kubectl patch
    kube.kubectl("patch", "jj/counter", "--type=merge", "-p", '{"spec":{"state":"Suspended"}}', namespace=ns)
    _wait(kube, ns, op, "--for=condition=Suspended", "jj/counter")
    kube.kubectl("patch", "jj/counter", "--type=merge", "-p", '{"spec":{"state":"Running"}}', namespace=ns)
    _wait(kube, ns, op, "--for=jsonpath={.status.phase}=RUNNING", "jj/counter")
    # a JetJobSnapshot exports
    kube.apply(
        {
            "apiVersion": "jetlet.io/v1alpha1",
            "kind": "JetJobSnapshot",
            "metadata": {"name": "counter-backup"},
            "spec": {"jetJobRef": "counter"},
        },
        namespace=ns,
    )
    _wait(kube, ns, op, "--for=jsonpath={.status.state}=Exported", "jjs/counter-backup")
    assert "counter-backup" in [s["name"] for s in client.list_snapshots()]
    # a code change with upgradeMode snapshot keeps the state
    first_id = _get(kube, ns, "jj/counter")["status"]["id"]
    kube.kubectl(
        "patch",
        "jj/counter",
        "--type=merge",
        "-p",
        '{"spec":{"pipeline":{"args":{"sink":"v2"}}}}',
        namespace=ns,
    )
    _until(
        "the upgraded job",
        lambda: (
            _get(kube, ns, "jj/counter")["status"].get("id") not in (None, first_id)
            and _get(kube, ns, "jj/counter")["status"].get("phase") == "RUNNING"
        ),
        op,
    )
    _until("the upgraded job counts", lambda: bool(client.get_list("v2")), op)
    assert client.get_list("v2")[0] > 1  # it went on from the old job's state
    assert {"SnapshotTaken", "Upgraded", "Suspended", "Resumed"} <= set(_events(kube, ns, "counter"))
    # kubectl scale rescales the cluster
    kube.kubectl("scale", "jc/jet", "--replicas=3", namespace=ns)
    _wait(kube, ns, op, "--for=jsonpath={.status.readyMembers}=3", "jc/jet", timeout=150)
    assert _get(kube, ns, "statefulset/jet")["spec"]["replicas"] == 3
    # and the running job is rescaled onto the new member (the cluster's feed, as an Event)
    _until("JobRescaled", lambda: "JobRescaled" in _events(kube, ns, "counter"), op, 60)
    # deleting the JetJob cancels the job
    job_id = _get(kube, ns, "jj/counter")["status"]["id"]
    kube.kubectl("delete", "jj/counter", "--timeout=60s", namespace=ns)
    found = client.get_job(job_id.replace("-", "")) or client.get_job("counter")
    assert found is not None and found.status.value == "FAILED"
    # deleting a JetJob whose cluster is gone finishes; deleting the JetCluster leaves nothing behind
    kube.apply({**job, "metadata": {"name": "orphan"}}, namespace=ns)
    kube.kubectl("delete", "jc/jet", "--timeout=60s", namespace=ns)
    kube.kubectl("delete", "jj/orphan", "--timeout=60s", namespace=ns)
    _until(
        "garbage collection",
        lambda: (
            kube.kubectl(
                "get",
                "statefulset,service,configmap,secret,pdb,role,rolebinding",
                "-l",
                "app.kubernetes.io/instance=jet",
                "-o",
                "name",
                namespace=ns,
            ).stdout.strip()
            == ""
        ),
        op,
        60,
    )
