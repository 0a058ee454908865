"""The operator's access to the Kubernetes API: a protocol and its ``kubernetes_asyncio`` implementation.

Handlers take a :class:`KubeAccess`, so tests pass a fake (plain dicts in
memory) or the real :class:`KubeApi` pointed at kmock or an API server. Every
object travels as a plain dict, as kopf hands bodies to handlers; ``apply``
creates an object or, when it exists, merge-patches it to what it should be.
"""

from __future__ import annotations

import base64
import json
import urllib.parse
from collections.abc import Mapping
from typing import Any, Protocol

from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

from jetlet_operator import builders

Obj = dict[str, Any]
_PLURALS = {
    "ConfigMap": ("api/v1", "configmaps"),
    "Secret": ("api/v1", "secrets"),
    "Service": ("api/v1", "services"),
    "ServiceAccount": ("api/v1", "serviceaccounts"),
    "Pod": ("api/v1", "pods"),
    "StatefulSet": ("apis/apps/v1", "statefulsets"),
    "PodDisruptionBudget": ("apis/policy/v1", "poddisruptionbudgets"),
    "Role": ("apis/rbac.authorization.k8s.io/v1", "roles"),
    "RoleBinding": ("apis/rbac.authorization.k8s.io/v1", "rolebindings"),
    "JetCluster": (f"apis/{builders.API_VERSION}", "jetclusters"),
    "JetJob": (f"apis/{builders.API_VERSION}", "jetjobs"),
    "JetJobSnapshot": (f"apis/{builders.API_VERSION}", "jetjobsnapshots"),
}


class KubeError(Exception):
    """An API request failed; ``status`` is the HTTP status (0: no answer)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status


class KubeAccess(Protocol):
    """What the handlers need of the Kubernetes API."""

    async def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        """The object, or None when it does not exist."""
        ...

    async def list(self, kind: str, namespace: str, label_selector: str = "") -> list[Obj]:
        """The objects of ``kind`` in ``namespace`` that match ``label_selector``."""
        ...

    async def apply(self, obj: Mapping[str, Any]) -> Obj:
        """Create ``obj``, or merge-patch the existing one to it; the object as stored."""
        ...

    async def create_if_absent(self, obj: Mapping[str, Any]) -> Obj:
        """Create ``obj`` unless an object of its name exists; the object as stored."""
        ...

    async def patch_status(self, kind: str, namespace: str, name: str, status: Mapping[str, Any]) -> Obj:
        """Merge ``status`` into the object's status (the ``status`` subresource)."""
        ...


def path_of(kind: str, namespace: str, name: str = "") -> str:
    """The API path of ``kind`` objects in ``namespace`` (of the one named ``name``)."""
    prefix, plural = _PLURALS[kind]
    path = f"/{prefix}/namespaces/{namespace}/{plural}"
    return f"{path}/{urllib.parse.quote(name)}" if name else path


def decode_secret(secret: Mapping[str, Any]) -> dict[str, str]:
    """A Secret's ``data`` decoded (``stringData`` too, as kmock keeps it)."""
    found = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
    found.update(secret.get("stringData") or {})
    return found


class KubeApi:
    """:class:`KubeAccess` over ``kubernetes_asyncio`` (a kubeconfig, in-cluster config, or a given host)."""

    def __init__(self, api_client: Any) -> None:
        self._api = api_client

    @classmethod
    async def connect(cls, host: str = "") -> KubeApi:
        """In-cluster config, else the kubeconfig (``$KUBECONFIG``); ``host``: that URL, no auth (tests)."""
        configuration = k8s_client.Configuration()
        if host:
            configuration.host = host
        else:
            try:
                k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            except k8s_config.ConfigException:
                await k8s_config.load_kube_config(client_configuration=configuration)
        return cls(k8s_client.ApiClient(configuration))

    async def close(self) -> None:
        await self._api.close()

    async def _request(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: list[tuple[str, str]] | None = None,
        content_type: str = "application/json",
    ) -> Obj:
        try:
            response = await self._api.call_api(
                path,
                method,
                query_params=query or [],
                header_params={"Content-Type": content_type, "Accept": "application/json"},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
            )
            data = await response.read()
        except k8s_client.ApiException as exc:
            raise KubeError(int(exc.status or 0), str(exc.body or exc.reason)) from None
        if response.status >= 400:  # without preloading, the client does not raise on an error status
            raise KubeError(int(response.status), data.decode(errors="replace")[:2000])
        result: Obj = json.loads(data) if data else {}
        return result

    async def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        try:
            return await self._request("GET", path_of(kind, namespace, name))
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    async def list(self, kind: str, namespace: str, label_selector: str = "") -> list[Obj]:
        query = [("labelSelector", label_selector)] if label_selector else []
        found = await self._request("GET", path_of(kind, namespace), query=query)
        items: list[Obj] = found.get("items", [])
        return items

    async def create_if_absent(self, obj: Mapping[str, Any]) -> Obj:
        metadata = obj["metadata"]
        existing = await self.get(obj["kind"], metadata["namespace"], metadata["name"])
        if existing is not None:
            return existing
        return await self._request("POST", path_of(obj["kind"], metadata["namespace"]), dict(obj))

    async def apply(self, obj: Mapping[str, Any]) -> Obj:
        metadata = obj["metadata"]
        kind, namespace, name = obj["kind"], metadata["namespace"], metadata["name"]
        try:
            return await self._request("POST", path_of(kind, namespace), dict(obj))
        except KubeError as exc:
            if exc.status != 409:
                raise
        return await self._request(
            "PATCH", path_of(kind, namespace, name), dict(obj), content_type="application/merge-patch+json"
        )

    async def patch_status(self, kind: str, namespace: str, name: str, status: Mapping[str, Any]) -> Obj:
        """Merge-patch the ``status`` subresource (the event-feed daemon's reports)."""
        return await self._request(
            "PATCH",
            path_of(kind, namespace, name) + "/status",
            {"status": dict(status)},
            content_type="application/merge-patch+json",
        )
