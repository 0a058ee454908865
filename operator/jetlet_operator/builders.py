"""The Kubernetes objects of a JetCluster, built by pure functions (``get_*``), tested without a cluster.

Theory of operation
-------------------
A JetCluster named ``jet`` owns, all in its namespace and all with an owner
reference to it (``controller: true``), so that deleting it deletes them
through Kubernetes' garbage collector:

==============================  =============================================================
``StatefulSet jet``             the members: stable names ``jet-0``, ``jet-1``..., ``Parallel``
                                pod management (members find each other before any is ready)
``Service jet-members``         headless, ``publishNotReadyAddresses``: the pods' DNS names
``Service jet``                 the client Service (REST port) for users inside the cluster
``ConfigMap jet-config``        ``member.json``: the Jet instance settings, read with ``--config``
``Secret jet-secret``           ``secret`` (members prove it to each other) and ``token`` (REST)
``PodDisruptionBudget jet``     at most one member down by a voluntary disruption
``ServiceAccount jet``          the members' identity, with ``Role``/``RoleBinding``
                                ``jet-discovery`` allowing it to list and watch pods
==============================  =============================================================

Each member runs ``jetlet member`` with flags only (the image's entrypoint is
``jetlet``): it binds its pod's IP, names itself after its pod, discovers the
other pods through the Kubernetes API by the cluster's label selector (or the
headless Service's DNS with ``discovery: dns``), reads its secret and token
from the mounted Secret and the instance settings from the ConfigMap. The
readiness probe is the member's ``GET /ready`` (joined, coordinator known,
partition table current), liveness its ``GET /health``. The pod template
carries a hash of the ConfigMap's data, so a change of settings rolls the pods.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from jetlet_operator import specs

GROUP = "jetlet.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
SECRET_DIR = "/etc/jetlet/secret"
CONFIG_DIR = "/etc/jetlet/config"
SNAPSHOT_DIR = "/var/lib/jetlet/snapshots"
CONFIG_KEY = "member.json"
REST_PORT = 8701
DATA_PORT = 5701
Obj = dict[str, Any]


def labels(cluster: str) -> dict[str, str]:
    """The labels of every object of the cluster ``cluster`` (the member pods' selector)."""
    return {
        "app.kubernetes.io/name": "jetlet",
        "app.kubernetes.io/instance": cluster,
        "app.kubernetes.io/component": "member",
        "app.kubernetes.io/managed-by": "jetlet-operator",
    }


def selector_labels(cluster: str) -> dict[str, str]:
    """The labels that select the member pods of ``cluster``."""
    found = labels(cluster)
    del found["app.kubernetes.io/managed-by"]
    return found


def selector(cluster: str) -> str:
    """The member pods' label selector as a string (``status.selector``, for ``kubectl scale`` and HPAs)."""
    return ",".join(f"{k}={v}" for k, v in selector_labels(cluster).items())


def names(cluster: str) -> dict[str, str]:
    """The name of each object the JetCluster ``cluster`` owns, by role."""
    return {
        "statefulset": cluster,
        "headless": f"{cluster}-members",
        "service": cluster,
        "configmap": f"{cluster}-config",
        "secret": f"{cluster}-secret",
        "pdb": cluster,
        "serviceaccount": cluster,
        "role": f"{cluster}-discovery",
    }


def owner_reference(owner: Mapping[str, Any]) -> Obj:
    """A controller owner reference to the custom resource ``owner`` (its ``apiVersion``, kind, name, uid)."""
    metadata = owner["metadata"]
    return {
        "apiVersion": owner.get("apiVersion", API_VERSION),
        "kind": owner.get("kind", "JetCluster"),
        "name": metadata["name"],
        "uid": metadata["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _metadata(owner: Mapping[str, Any], name: str) -> Obj:
    cluster = owner["metadata"]["name"]
    return {
        "name": name,
        "namespace": owner["metadata"].get("namespace", "default"),
        "labels": labels(cluster),
        "ownerReferences": [owner_reference(owner)],
    }


def member_settings(spec: specs.ClusterSpec) -> dict[str, int]:
    """The instance settings the members read from ``member.json`` (Jet's names, snake case)."""
    found = {
        "flow_control_period_millis": spec.flow_control_period_millis,
        "backup_count": spec.backup_count,
        "scale_up_delay_millis": spec.scale_up_delay_millis,
    }
    if spec.cooperative_thread_count:
        found["cooperative_thread_count"] = spec.cooperative_thread_count
    return found


def get_config_map(owner: Mapping[str, Any], spec: specs.ClusterSpec) -> Obj:
    """The ConfigMap with the members' settings file."""
    data = {CONFIG_KEY: json.dumps(member_settings(spec), indent=2, sort_keys=True)}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(owner, names(owner["metadata"]["name"])["configmap"]),
        "data": data,
    }


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode("ascii")


def get_secret(owner: Mapping[str, Any], cluster_secret: str, token: str) -> Obj:
    """The Secret with the cluster secret and the REST token (both generated by the operator)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": _metadata(owner, names(owner["metadata"]["name"])["secret"]),
        "data": {"secret": _b64(cluster_secret), "token": _b64(token)},
    }


def get_headless_service(
    owner: Mapping[str, Any], rest_port: int = REST_PORT, data_port: int = DATA_PORT
) -> Obj:
    """The headless Service: DNS names for the pods, ready or not (members find each other before Ready)."""
    cluster = owner["metadata"]["name"]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(owner, names(cluster)["headless"]),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector_labels(cluster),
            "ports": [
                {"name": "rest", "port": rest_port, "targetPort": "rest"},
                {"name": "data", "port": data_port, "targetPort": "data"},
                {"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics"},
            ],
        },
    }


def get_client_service(owner: Mapping[str, Any], rest_port: int = REST_PORT) -> Obj:
    """The client Service: the REST API of the ready members, for users inside the cluster."""
    cluster = owner["metadata"]["name"]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(owner, names(cluster)["service"]),
        "spec": {
            "type": "ClusterIP",
            "selector": selector_labels(cluster),
            "ports": [{"name": "rest", "port": rest_port, "targetPort": "rest"}],
        },
    }


def get_pod_disruption_budget(owner: Mapping[str, Any]) -> Obj:
    """At most one member down at a time by a voluntary disruption (a drain): jobs restart once per member."""
    cluster = owner["metadata"]["name"]
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _metadata(owner, names(cluster)["pdb"]),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector_labels(cluster)}},
    }


def get_service_account(owner: Mapping[str, Any]) -> Obj:
    """The members' ServiceAccount."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": _metadata(owner, names(owner["metadata"]["name"])["serviceaccount"]),
    }


def get_role(owner: Mapping[str, Any]) -> Obj:
    """The least the members need: list and watch the pods of their namespace (Kubernetes discovery)."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": _metadata(owner, names(owner["metadata"]["name"])["role"]),
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
    }


def get_role_binding(owner: Mapping[str, Any]) -> Obj:
    """Binds the discovery Role to the members' ServiceAccount."""
    cluster_names = names(owner["metadata"]["name"])
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _metadata(owner, cluster_names["role"]),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": cluster_names["role"]},
        "subjects": [{"kind": "ServiceAccount", "name": cluster_names["serviceaccount"]}],
    }


def member_args(
    cluster: str,
    spec: specs.ClusterSpec,
    namespace: str,
    rest_port: int = REST_PORT,
    data_port: int = DATA_PORT,
) -> list[str]:
    """The member's command line after the image's ``jetlet`` entrypoint (``$(VAR)``: from the pod's env)."""
    args = [
        "member",
        "--name",
        "$(POD_NAME)",
        "--host",
        "$(POD_IP)",
        "--rest-port",
        str(rest_port),
        "--data-port",
        str(data_port),
        "--metrics-port",
        str(METRICS_PORT),
        "--secret-file",
        f"{SECRET_DIR}/secret",
        "--token-file",
        f"{SECRET_DIR}/token",
        "--config",
        f"{CONFIG_DIR}/{CONFIG_KEY}",
    ]
    if spec.discovery == "kubernetes":
        args += [
            "--discovery",
            "kubernetes",
            "--kubernetes-label-selector",
            selector(cluster),
            "--kubernetes-namespace",
            "$(POD_NAMESPACE)",
            "--kubernetes-token-file",
            f"{SERVICE_ACCOUNT_DIR}/token",
            "--kubernetes-ca-file",
            f"{SERVICE_ACCOUNT_DIR}/ca.crt",
        ]
    else:
        headless = names(cluster)["headless"]
        args += ["--discovery", "dns", "--members", f"dns:{headless}.{namespace}.svc:{rest_port}"]
    store = spec.raw.get("snapshotStore", {})
    if store.get("volumeClaimTemplate") or store.get("claimName"):
        args += ["--snapshot-directory", SNAPSHOT_DIR]
    return args


def config_hash(config_map: Mapping[str, Any]) -> str:
    """A short digest of a ConfigMap's data: in the pod template, so a settings change rolls the pods."""
    return hashlib.sha256(json.dumps(config_map["data"], sort_keys=True).encode()).hexdigest()[:16]


def get_stateful_set(
    owner: Mapping[str, Any],
    spec: specs.ClusterSpec,
    default_image: str,
    rest_port: int = REST_PORT,
    data_port: int = DATA_PORT,
) -> Obj:
    """The members' StatefulSet."""
    cluster = owner["metadata"]["name"]
    namespace = owner["metadata"].get("namespace", "default")
    cluster_names = names(cluster)

    def field(path: str) -> Obj:
        return {"valueFrom": {"fieldRef": {"fieldPath": path}}}

    env: list[Obj] = [
        {"name": "POD_NAME", **field("metadata.name")},
        {"name": "POD_IP", **field("status.podIP")},
        {"name": "POD_NAMESPACE", **field("metadata.namespace")},
        *[dict(e) for e in spec.raw.get("env", [])],
    ]
    mounts = [
        {"name": "secret", "mountPath": SECRET_DIR, "readOnly": True},
        {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
    ]
    claims = []
    shared: list[Obj] = []
    store = spec.raw.get("snapshotStore", {})
    if store.get("volumeClaimTemplate"):  # a volume per member
        mounts.append({"name": "snapshots", "mountPath": SNAPSHOT_DIR})
        claims.append({"metadata": {"name": "snapshots"}, "spec": dict(store["volumeClaimTemplate"])})
    elif store.get("claimName"):  # one volume that every member mounts
        mounts.append({"name": "snapshots", "mountPath": SNAPSHOT_DIR})
        shared.append({"name": "snapshots", "persistentVolumeClaim": {"claimName": store["claimName"]}})
    container: Obj = {
        "name": "member",
        "image": spec.image or default_image,
        "imagePullPolicy": spec.image_pull_policy,
        "args": member_args(cluster, spec, namespace, rest_port, data_port),
        "env": env,
        "ports": [
            {"name": "rest", "containerPort": rest_port},
            {"name": "data", "containerPort": data_port},
            {"name": "metrics", "containerPort": METRICS_PORT},
        ],
        "readinessProbe": {
            "httpGet": {"path": "/ready", "port": "rest"},
            "periodSeconds": 5,
            "failureThreshold": 3,
        },
        "livenessProbe": {
            "httpGet": {"path": "/health", "port": "rest"},
            "initialDelaySeconds": 10,
            "periodSeconds": 10,
            "failureThreshold": 6,
        },
        "volumeMounts": mounts,
    }
    if spec.raw.get("resources"):
        container["resources"] = dict(spec.raw["resources"])
    pod_spec: Obj = {
        "serviceAccountName": cluster_names["serviceaccount"],
        "terminationGracePeriodSeconds": 45,  # the member's graceful leave takes up to 30 s
        "containers": [container],
        "volumes": [
            {"name": "secret", "secret": {"secretName": cluster_names["secret"]}},
            {"name": "config", "configMap": {"name": cluster_names["configmap"]}},
            *shared,
        ],
    }
    for key in ("nodeSelector", "affinity", "tolerations", "topologySpreadConstraints", "priorityClassName"):
        if spec.raw.get(key):
            pod_spec[key] = spec.raw[key]
    if spec.raw.get("imagePullSecrets"):
        pod_spec["imagePullSecrets"] = [{"name": s["name"]} for s in spec.raw["imagePullSecrets"]]
    statefulset_spec: Obj = {
        "serviceName": cluster_names["headless"],
        "replicas": spec.size,
        "podManagementPolicy": "Parallel",
        "selector": {"matchLabels": selector_labels(cluster)},
        "template": {
            "metadata": {
                "labels": labels(cluster),
                "annotations": {"jetlet.io/config-hash": config_hash(get_config_map(owner, spec))},
            },
            "spec": pod_spec,
        },
    }
    if claims:
        statefulset_spec["volumeClaimTemplates"] = claims
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _metadata(owner, cluster_names["statefulset"]),
        "spec": statefulset_spec,
    }


def get_cluster_objects(
    owner: Mapping[str, Any],
    spec: specs.ClusterSpec,
    default_image: str,
    rest_port: int = REST_PORT,
    data_port: int = DATA_PORT,
) -> list[Obj]:
    """Every object of the cluster except its Secret (made once, never replaced), in creation order."""
    return [
        get_service_account(owner),
        get_role(owner),
        get_role_binding(owner),
        get_config_map(owner, spec),
        get_headless_service(owner, rest_port, data_port),
        get_client_service(owner, rest_port),
        get_pod_disruption_budget(owner),
        get_stateful_set(owner, spec, default_image, rest_port, data_port),
    ]


METRICS_PORT = 9701
"""The port of the members' Prometheus ``/metrics`` (a member's own default is any free port)."""
