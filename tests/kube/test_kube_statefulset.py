"""Given the control plane and the process kubelet, StatefulSets behave as on a real cluster."""

from __future__ import annotations

import json
import os
import signal
import urllib.request
from typing import Any

import pytest
from kubeharness import KubeCluster, is_ready
from manifests import headless_service, web_statefulset

pytestmark = pytest.mark.kube


def _get(ip: str, path: str = "/") -> Any:
    with urllib.request.urlopen(f"http://{ip}:8080{path}", timeout=5) as resp:
        return json.loads(resp.read())


def _replaced(kube: KubeCluster, namespace: str, name: str, old_uid: str) -> dict[str, Any]:
    return kube.api().wait_for(
        f"/api/v1/namespaces/{namespace}/pods/{name}",
        lambda p: p is not None and p["metadata"]["uid"] != old_uid and is_ready(p),
        timeout=60,
        what=f"a Ready replacement of {name}",
    )


def _pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_three_ready_pods_answer_on_their_own_addresses(kube: KubeCluster, kube_namespace: str) -> None:
    """Given a StatefulSet of 3 HTTP servers with a readiness probe, then 3 Ready pods, each on its own IP."""
    kube.apply(headless_service(), web_statefulset(replicas=3, ready_after=0.5), namespace=kube_namespace)

    pods = kube.wait_ready_pods(kube_namespace, "app=web", 3, timeout=90)

    assert [p["metadata"]["name"] for p in pods] == ["web-0", "web-1", "web-2"]
    ips = [p["status"]["podIP"] for p in pods]
    assert len(set(ips)) == 3 and all(ip.startswith("127.") for ip in ips), ips
    for pod, ip in zip(pods, ips, strict=True):
        assert _get(ip) == {"pod": pod["metadata"]["name"], "address": ip}
    sts = kube.api().wait_for(
        f"/apis/apps/v1/namespaces/{kube_namespace}/statefulsets/web",
        lambda s: s["status"].get("readyReplicas") == 3,
        timeout=30,
    )
    assert sts["status"]["replicas"] == 3


def test_deleted_or_killed_pods_are_replaced_and_scale_works(kube: KubeCluster, kube_namespace: str) -> None:
    """Given 3 Ready pods, when one is deleted and another's process killed, then both are replaced;
    and `kubectl scale` to 5 then 2 gives 5 then 2 Ready pods, the processes of the removed ones gone."""
    kube.apply(headless_service(), web_statefulset(replicas=3, policy="Parallel"), namespace=kube_namespace)
    pods = {p["metadata"]["name"]: p for p in kube.wait_ready_pods(kube_namespace, "app=web", 3)}

    old_pid = kube.pod_pid(kube_namespace, "web-1")
    assert old_pid is not None
    kube.kubectl("delete", "pod", "web-1", "--wait=false", namespace=kube_namespace)
    new = _replaced(kube, kube_namespace, "web-1", pods["web-1"]["metadata"]["uid"])
    assert _get(new["status"]["podIP"])["pod"] == "web-1"
    assert _pid_gone(old_pid)

    killed_pid = kube.pod_pid(kube_namespace, "web-2")
    assert killed_pid is not None
    os.killpg(killed_pid, signal.SIGKILL)
    new = _replaced(kube, kube_namespace, "web-2", pods["web-2"]["metadata"]["uid"])
    assert _get(new["status"]["podIP"])["pod"] == "web-2"

    kube.kubectl("scale", "statefulset/web", "--replicas=5", namespace=kube_namespace)
    five = kube.wait_ready_pods(kube_namespace, "app=web", 5)
    assert [p["metadata"]["name"] for p in five] == [f"web-{i}" for i in range(5)]
    pids = {name: kube.pod_pid(kube_namespace, name) for name in ("web-2", "web-3", "web-4")}

    kube.kubectl("scale", "statefulset/web", "--replicas=2", namespace=kube_namespace)
    two = kube.wait_ready_pods(kube_namespace, "app=web", 2)
    assert [p["metadata"]["name"] for p in two] == ["web-0", "web-1"]
    assert all(pid is not None and _pid_gone(pid) for pid in pids.values()), pids


def test_deleting_the_statefulset_garbage_collects_its_pods(kube: KubeCluster, kube_namespace: str) -> None:
    """Given a StatefulSet's Ready pods, when the StatefulSet is deleted, then its pods and processes go."""
    kube.apply(web_statefulset(replicas=2, policy="Parallel"), namespace=kube_namespace)
    kube.wait_ready_pods(kube_namespace, "app=web", 2)
    pids = [kube.pod_pid(kube_namespace, f"web-{i}") for i in range(2)]

    kube.kubectl("delete", "statefulset", "web", "--wait=false", namespace=kube_namespace)

    kube.api().wait_for(
        f"/api/v1/namespaces/{kube_namespace}/pods",
        lambda listing: listing["items"] == [],
        timeout=60,
        what="the garbage collection of the StatefulSet's pods",
    )
    assert all(pid is not None and _pid_gone(pid) for pid in pids), pids


def test_deleting_the_namespace_removes_everything_in_it(kube: KubeCluster) -> None:
    """Given a namespace with a StatefulSet, a Service and a ConfigMap, when it is deleted, then all go."""
    namespace = kube.create_namespace("doomed")
    try:
        kube.apply(
            headless_service(),
            web_statefulset(replicas=2, policy="Parallel"),
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"a": "1"}},
            namespace=namespace,
        )
        kube.wait_ready_pods(namespace, "app=web", 2)
        pids = [kube.pod_pid(namespace, f"web-{i}") for i in range(2)]

        kube.delete_namespace(namespace, wait=True, timeout=90)

        for kind in ("pods", "services", "configmaps"):
            assert kube.api().get(f"/api/v1/namespaces/{namespace}/{kind}")["items"] == []
        assert all(pid is not None and _pid_gone(pid) for pid in pids), pids
    finally:
        kube.delete_namespace(namespace)
