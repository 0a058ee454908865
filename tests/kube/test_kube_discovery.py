"""Given a StatefulSet of jetlet members with Kubernetes discovery on a real API server, then they form one
cluster: the first pod becomes Ready alone (OrderedReady waits for it), the next ones find it by listing
pods with their service-account token, with no DNS and no ClusterIP; /ready is their readiness probe."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from kubeharness import JETLET_IMAGE, KubeCluster

from jetlet.testing import wait_until

pytestmark = pytest.mark.kube

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN = "rest-token-for-the-test"


def _rbac() -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "jet"}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "jet-discovery"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "jet-discovery"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "jet-discovery"},
            "subjects": [{"kind": "ServiceAccount", "name": "jet"}],
        },
    ]


def _members(replicas: int) -> dict[str, Any]:
    labels = {"app": "jet"}

    def field(path: str) -> dict[str, Any]:
        return {"valueFrom": {"fieldRef": {"fieldPath": path}}}

    container = {
        "name": "member",
        "image": JETLET_IMAGE,
        "args": (
            "member --name $(POD_NAME) --host $(POD_IP) --rest-port 8701 --data-port 5701"
            " --heartbeat-interval-millis 200 --failure-timeout-millis 2000"
            " --discovery kubernetes --kubernetes-label-selector app=jet"
            " --kubernetes-namespace $(POD_NAMESPACE)"
            f" --kubernetes-token-file {SA_DIR}/token --kubernetes-ca-file {SA_DIR}/ca.crt"
        ).split(),
        "env": [
            {"name": "POD_NAME", **field("metadata.name")},
            {"name": "POD_IP", **field("status.podIP")},
            {"name": "POD_NAMESPACE", **field("metadata.namespace")},
            {"name": "JETLET_TOKEN", "value": TOKEN},
            {"name": "JETLET_SECRET", "value": "cluster-secret-for-the-test"},
        ],
        "ports": [{"name": "rest", "containerPort": 8701}, {"name": "data", "containerPort": 5701}],
        "readinessProbe": {"httpGet": {"path": "/ready", "port": "rest"}, "periodSeconds": 1},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "jet", "labels": labels},
        "spec": {
            "serviceName": "jet",
            "replicas": replicas,
            "podManagementPolicy": "OrderedReady",
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": "jet",
                    "terminationGracePeriodSeconds": 5,
                    "containers": [container],
                },
            },
        },
    }


def _cluster(ip: str) -> dict[str, Any]:
    request = urllib.request.Request(
        f"http://{ip}:8701/cluster", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    with urllib.request.urlopen(request, timeout=10) as reply:
        result: dict[str, Any] = json.loads(reply.read())
        return result


def test_a_statefulset_of_members_forms_one_cluster_through_the_pod_list(
    kube: KubeCluster, kube_namespace: str
) -> None:
    kube.apply(*_rbac(), _members(3), namespace=kube_namespace)

    pods = kube.wait_ready_pods(kube_namespace, "app=jet", 3, timeout=180)

    names = [p["metadata"]["name"] for p in pods]
    assert names == ["jet-0", "jet-1", "jet-2"]
    for pod in pods:
        view = _cluster(pod["status"]["podIP"])
        log = kube.pod_log(kube_namespace, pod["metadata"]["name"])
        assert [m["name"] for m in view["members"]] == names, log
        assert view["coordinator"] == "jet-0"


def _ready(ip: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://{ip}:8701/ready", timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read())
    except OSError:
        return 0, {}


def test_without_the_role_binding_a_member_is_not_ready_and_says_why_until_it_is_granted(
    kube: KubeCluster, kube_namespace: str
) -> None:
    service_account, role, binding = _rbac()
    kube.apply(service_account, role, _members(1), namespace=kube_namespace)
    pod = kube.api().wait_for(
        f"/api/v1/namespaces/{kube_namespace}/pods/jet-0",
        lambda p: p is not None and bool(p.get("status", {}).get("podIP")),
        timeout=90,
        what="jet-0 to get an address",
    )
    ip = pod["status"]["podIP"]
    wait_until(
        lambda: _ready(ip)[1].get("missing", {}).get("membership") == "discovery fails: HTTP 403 Forbidden",
        "/ready to name the 403",
        60,
    )
    assert _ready(ip)[0] == 503

    kube.apply(binding, namespace=kube_namespace)

    kube.wait_ready_pods(kube_namespace, "app=jet", 1, timeout=90)
    status, body = _ready(ip)
    assert (status, body["coordinator"], body["missing"]) == (200, "jet-0", {})
    log = kube.pod_log(kube_namespace, "jet-0")
    assert log.count("HTTP 403 Forbidden") == 1 and "listing pods works again" in log, log
