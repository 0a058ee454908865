"""Kubernetes discovery: the other members are the pods that a label selector matches, listed through the API.

Theory of operation
-------------------
With ``discovery = "kubernetes"`` a member that is alone asks the
Kubernetes API for the pods of its cluster — a plain
``GET /api/v1/namespaces/NS/pods?labelSelector=SELECTOR`` with the pod's
service-account token, over HTTPS checked against the service-account CA —
and sends ``join`` to the REST address of each (see
``jetlet._cluster.membership``). Nothing else of Kubernetes is needed: no
``kubernetes`` package, no ClusterIP, no DNS, and no readiness, so members
find each other before any of them is Ready (a StatefulSet with ordered
start-up needs its first pod Ready before it starts the second; see
``jetlet._cluster.readiness``).

:func:`pod_addresses` turns a pod list into addresses (pure): a pod being
deleted, one that has ended (``Succeeded``/``Failed``) or one without
``status.podIP`` yet is left out; the port is ``kubernetes_rest_port`` if
set, else the pod's container port named ``kubernetes_port_name``
(``rest``), else this member's own ``rest_port`` (the members of one
StatefulSet share it).

:class:`PodDiscovery` holds what the settings resolve to (:func:`target`:
the namespace from the setting or the pod's service-account ``namespace``
file; the API server from the setting or ``KUBERNETES_SERVICE_HOST`` and
``KUBERNETES_SERVICE_PORT``, as in-cluster clients do) and the state of the
last listing. The token is read again for every listing (projected tokens
rotate). A failure — a 403 from RBAC, a 404 for a wrong namespace, an API
server that cannot be reached — yields no address, is logged once when the
state changes (not at every attempt, and without a traceback), and makes
the member wait longer before the next attempt (doubling from
``INTERVAL_S`` up to ``MAX_BACKOFF_S``); the first success after failures
is logged once too.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import logging
import pathlib
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jetlet._cluster import settings as settings_mod

_log = logging.getLogger("jetlet.discovery")

INTERVAL_S = 2.0
"""How often a member that is alone looks for the others again (DNS answers and pods change)."""
MAX_BACKOFF_S = 30.0
"""Longest wait between two listings while the Kubernetes API keeps failing."""
REQUEST_TIMEOUT_S = 5.0
"""Longest one listing may take."""
NAMESPACE_FILE = settings_mod.SERVICE_ACCOUNT_DIR + "/namespace"
"""Where a pod finds its own namespace (the service account's projected volume)."""

Pod = Mapping[str, Any]
ListPods = Callable[["Target"], list[Pod]]


class KubernetesApiError(Exception):
    """A listing failed; ``state`` is a short, stable description (what the log reports on change)."""

    def __init__(self, state: str, detail: str = "") -> None:
        super().__init__(f"{state}: {detail}" if detail else state)
        self.state = state
        self.detail = detail


@dataclasses.dataclass(frozen=True)
class Target:
    """Where and how to list the member pods: everything the settings resolve to."""

    api_server: str
    """Base URL, e.g. ``https://10.96.0.1:443``."""
    namespace: str
    label_selector: str
    token_file: str
    ca_file: str
    rest_port: int
    """Fixed REST port of every pod (0: a named container port, else ``default_port``)."""
    port_name: str
    default_port: int
    """This member's own REST port, used when a pod names none (0: such pods are left out)."""

    @property
    def url(self) -> str:
        query = urllib.parse.urlencode({"labelSelector": self.label_selector})
        namespace = urllib.parse.quote(self.namespace, safe="")
        return f"{self.api_server.rstrip('/')}/api/v1/namespaces/{namespace}/pods?{query}"


def target(
    config: settings_mod.MemberSettings,
    environ: Mapping[str, str],
    namespace_file: str = NAMESPACE_FILE,
) -> Target:
    """The listing that ``config`` asks for; ValueError naming the setting if it cannot be resolved."""
    namespace = config.kubernetes_namespace
    if not namespace:
        try:
            namespace = pathlib.Path(namespace_file).read_text().strip()
        except OSError:
            namespace = ""
    if not namespace:
        raise ValueError(
            f"setting 'kubernetes_namespace' is needed outside a pod (no {namespace_file} to read it from)"
        )
    api_server = config.kubernetes_api_server
    if not api_server:
        host, port = environ.get("KUBERNETES_SERVICE_HOST", ""), environ.get("KUBERNETES_SERVICE_PORT", "")
        if not host or not port:
            raise ValueError(
                "setting 'kubernetes_api_server' is needed outside a pod "
                "(KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set)"
            )
        api_server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    if not api_server.startswith(("https://", "http://")):
        raise ValueError(f"setting 'kubernetes_api_server' must be an http(s) URL, got {api_server!r}")
    return Target(
        api_server=api_server,
        namespace=namespace,
        label_selector=config.kubernetes_label_selector,
        token_file=config.kubernetes_token_file,
        ca_file=config.kubernetes_ca_file,
        rest_port=config.kubernetes_rest_port,
        port_name=config.kubernetes_port_name,
        default_port=config.rest_port,
    )


def _port(pod: Pod, where: Target) -> int:
    if where.rest_port:
        return where.rest_port
    for container in pod.get("spec", {}).get("containers", []) or []:
        for port in container.get("ports", []) or []:
            if port.get("name") == where.port_name and isinstance(port.get("containerPort"), int):
                return int(port["containerPort"])
    return where.default_port


def pod_addresses(pods: Sequence[Pod], where: Target) -> tuple[str, ...]:
    """The REST addresses of the pods that may be members now, in the API's order, without duplicates.

    >>> where = Target("http://k", "ns", "app=jet", "", "", 0, "rest", 8701)
    >>> pods = [{"status": {"podIP": "10.0.0.7"}}, {"status": {}}, {"status": {"podIP": "fd00::2"}}]
    >>> pod_addresses(pods, where)
    ('10.0.0.7:8701', '[fd00::2]:8701')
    """
    found: list[str] = []
    for pod in pods:
        status = pod.get("status", {}) or {}
        ip = status.get("podIP") or ""
        if not ip or pod.get("metadata", {}).get("deletionTimestamp"):
            continue
        if status.get("phase") in ("Succeeded", "Failed"):
            continue
        port = _port(pod, where)
        address = f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
        if port and address not in found:
            found.append(address)
    return tuple(found)


def list_pods(where: Target) -> list[Pod]:
    """The pods the API lists for ``where`` (blocking, at most ``REQUEST_TIMEOUT_S``); KubernetesApiError."""
    headers = {"Accept": "application/json"}
    if where.token_file:
        try:
            token = pathlib.Path(where.token_file).read_text().strip()
        except OSError as exc:
            raise KubernetesApiError(
                f"cannot read token file {where.token_file}", str(exc.strerror)
            ) from None
        headers["Authorization"] = f"Bearer {token}"
    handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({})]
    if where.api_server.startswith("https://"):
        try:
            context = ssl.create_default_context(cafile=where.ca_file or None)
        except (OSError, ssl.SSLError) as exc:
            raise KubernetesApiError(f"cannot load CA file {where.ca_file}", str(exc)) from None
        handlers.append(urllib.request.HTTPSHandler(context=context))
    opener = urllib.request.build_opener(*handlers)
    try:
        with opener.open(
            urllib.request.Request(where.url, headers=headers), timeout=REQUEST_TIMEOUT_S
        ) as reply:
            body = json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        raise KubernetesApiError(f"HTTP {exc.code} {exc.reason}", _status_message(exc)) from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        raise KubernetesApiError(f"cannot reach {where.api_server}", str(reason)) from None
    except ValueError as exc:
        raise KubernetesApiError("the API answered something other than JSON", str(exc)) from None
    items = body.get("items") if isinstance(body, dict) else None
    if not isinstance(items, list):
        raise KubernetesApiError("the API answered something other than a pod list")
    return [item for item in items if isinstance(item, dict)]


def _status_message(error: urllib.error.HTTPError) -> str:
    """The ``message`` of the Kubernetes ``Status`` in an error reply (what RBAC says is missing)."""
    try:
        status = json.loads(error.read())
        return str(status.get("message", "")) if isinstance(status, dict) else ""
    except (OSError, ValueError):
        return ""


_HINTS = {
    "HTTP 401": "the service-account token was refused",
    "HTTP 403": "the service account needs 'list' on 'pods' in this namespace (a Role and a RoleBinding)",
    "HTTP 404": "is the namespace right?",
}


class PodDiscovery:
    """Lists the member pods and keeps the state of the last listing (for the log and the backoff)."""

    def __init__(self, where: Target, list_pods: ListPods = list_pods) -> None:
        self.where = where
        self._list = list_pods
        self.failures = 0
        """Listings failed in a row."""
        self.state = ""
        """The last failure's ``KubernetesApiError.state``; empty while listings succeed."""

    def addresses(self) -> tuple[str, ...]:
        """The member pods' REST addresses now; none while the API fails (logged once per state)."""
        try:
            pods = self._list(self.where)
        except KubernetesApiError as exc:
            self.failures += 1
            if exc.state != self.state:
                hint = next((h for code, h in _HINTS.items() if exc.state.startswith(code)), "")
                _log.warning(
                    "kubernetes discovery: listing pods %r in namespace %r failed: %s%s; trying again later",
                    self.where.label_selector,
                    self.where.namespace,
                    exc,
                    f" ({hint})" if hint else "",
                )
                self.state = exc.state
            return ()
        found = pod_addresses(pods, self.where)
        if self.state:
            _log.info(
                "kubernetes discovery: listing pods works again after %d failure(s): %d pod(s) found",
                self.failures,
                len(found),
            )
        self.failures, self.state = 0, ""
        return found

    def next_delay_s(self) -> float:
        """The wait before the next listing: ``INTERVAL_S`` doubled per failure, at most ``MAX_BACKOFF_S``."""
        return float(min(MAX_BACKOFF_S, INTERVAL_S * 2 ** min(self.failures, 16)))
