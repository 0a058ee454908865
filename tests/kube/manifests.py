"""Manifests the kube tests share: a StatefulSet of small HTTP servers and its headless Service."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubeharness import PYTHON_IMAGE

APPS = Path(__file__).resolve().parent / "apps"
PODSERVER = str(APPS / "podserver.py")
DUMP = str(APPS / "dump.py")


def web_statefulset(
    name: str = "web", replicas: int = 3, policy: str = "OrderedReady", ready_after: float = 0.0
) -> dict[str, Any]:
    """``replicas`` pods of apps/podserver.py on their pod IP, port 8080, Ready by an HTTP probe."""
    labels = {"app": name}
    container = {
        "name": "web",
        "image": PYTHON_IMAGE,
        "command": ["python3", PODSERVER],
        "args": ["--bind", "$(POD_IP)", "--port", "8080", "--ready-after", str(ready_after)],
        "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        "ports": [{"name": "http", "containerPort": 8080}],
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 1},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "serviceName": name,
            "replicas": replicas,
            "podManagementPolicy": policy,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"terminationGracePeriodSeconds": 5, "containers": [container]},
            },
        },
    }


def headless_service(name: str = "web") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {"app": name},
            "ports": [{"name": "http", "port": 8080}],
        },
    }
