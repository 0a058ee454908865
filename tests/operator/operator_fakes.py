"""A Kubernetes API in memory for the handlers' tests: plain dicts, label selectors honoured."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from jetlet_operator import builders

Obj = dict[str, Any]


class FakeKube:
    """:class:`jetlet_operator.kube.KubeAccess` over a dict keyed by (kind, namespace, name)."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], Obj] = {}
        self.applied: list[str] = []

    def put(self, obj: Mapping[str, Any]) -> Obj:
        stored = copy.deepcopy(dict(obj))
        metadata = stored.setdefault("metadata", {})
        metadata.setdefault("namespace", "default")
        self.objects[(stored["kind"], metadata["namespace"], metadata["name"])] = stored
        return stored

    def remove(self, kind: str, namespace: str, name: str) -> None:
        self.objects.pop((kind, namespace, name), None)

    async def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        found = self.objects.get((kind, namespace, name))
        return copy.deepcopy(found) if found is not None else None

    async def list(self, kind: str, namespace: str, label_selector: str = "") -> list[Obj]:
        wanted = dict(part.split("=", 1) for part in label_selector.split(",") if part)
        found = []
        for (k, ns, _), obj in sorted(self.objects.items()):
            labels = obj["metadata"].get("labels") or {}
            if k == kind and ns == namespace and all(labels.get(a) == b for a, b in wanted.items()):
                found.append(copy.deepcopy(obj))
        return found

    async def apply(self, obj: Mapping[str, Any]) -> Obj:
        self.applied.append(f"{obj['kind']}/{obj['metadata']['name']}")
        return self.put(obj)

    async def patch_status(self, kind: str, namespace: str, name: str, status: Mapping[str, Any]) -> Obj:
        stored = self.objects[(kind, namespace, name)]
        merged = {**stored.get("status", {}), **copy.deepcopy(dict(status))}
        stored["status"] = {k: v for k, v in merged.items() if v is not None}
        return copy.deepcopy(stored)

    async def create_if_absent(self, obj: Mapping[str, Any]) -> Obj:
        key = (obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"])
        if key in self.objects:
            return copy.deepcopy(self.objects[key])
        return self.put(obj)


def member_pod(cluster: str, index: int, address: str, ready: bool = True) -> Obj:
    """A member pod of ``cluster`` whose REST API is at ``address`` (host:port)."""
    host, port = address.rsplit(":", 1)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{cluster}-{index}",
            "namespace": "default",
            "labels": builders.labels(cluster),
        },
        "spec": {"containers": [{"name": "member", "ports": [{"name": "rest", "containerPort": int(port)}]}]},
        "status": {
            "phase": "Running",
            "podIP": host,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def jet_cluster(name: str = "jet", uid: str = "uid-jet", size: int = 2) -> Obj:
    return {
        "apiVersion": builders.API_VERSION,
        "kind": "JetCluster",
        "metadata": {"name": name, "namespace": "default", "uid": uid, "generation": 1},
        "spec": {"size": size},
    }
