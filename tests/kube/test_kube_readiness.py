"""Given pods with readiness probes, then their Ready condition follows the probe, not the process start."""

from __future__ import annotations

from typing import Any

import pytest
from kubeharness import PYTHON_IMAGE, KubeCluster, is_ready
from manifests import PODSERVER

pytestmark = pytest.mark.kube


def _pod(name: str, probe: dict[str, Any], ready_after: float) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {
                    "name": "web",
                    "image": PYTHON_IMAGE,
                    "command": ["python3", PODSERVER],
                    "args": ["--bind", "$(POD_IP)", "--ready-after", str(ready_after)],
                    "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                    "ports": [{"name": "http", "containerPort": 8080}],
                    "readinessProbe": probe,
                }
            ]
        },
    }


def test_ready_follows_the_http_probe(kube: KubeCluster, kube_namespace: str) -> None:
    """Given a server whose /healthz fails for its first 5 s, then it is Running and not Ready, then Ready."""
    probe = {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 1}
    kube.apply(_pod("slow", probe, ready_after=5.0), namespace=kube_namespace)
    path = f"/api/v1/namespaces/{kube_namespace}/pods/slow"

    running = kube.api().wait_for(
        path,
        lambda p: (
            p["status"].get("phase") == "Running" and "serving on" in kube.pod_log(kube_namespace, "slow")
        ),
        timeout=60,
        what="slow to be Running and serving",
    )
    assert running["status"]["phase"] == "Running" and not is_ready(running)

    ready = kube.api().wait_for(path, is_ready, timeout=60, what="slow to become Ready")
    assert ready["status"]["containerStatuses"][0]["ready"] is True


def test_ready_follows_the_tcp_probe(kube: KubeCluster, kube_namespace: str) -> None:
    """Given a TCP probe on the server's port, then the pod becomes Ready once it listens."""
    kube.apply(_pod("tcp", {"tcpSocket": {"port": 8080}, "periodSeconds": 1}, 0.0), namespace=kube_namespace)
    kube.api().wait_for(f"/api/v1/namespaces/{kube_namespace}/pods/tcp", is_ready, timeout=60)
