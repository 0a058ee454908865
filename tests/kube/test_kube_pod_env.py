"""Given a pod with env from fields, a ConfigMap and a Secret mounted too, then its process sees them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubeharness import PYTHON_IMAGE, KubeApi, KubeCluster
from manifests import DUMP

pytestmark = pytest.mark.kube

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def _pod() -> dict[str, Any]:
    def field(path: str) -> dict[str, Any]:
        return {"fieldRef": {"fieldPath": path}}

    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "dump", "labels": {"app": "dump"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": PYTHON_IMAGE,
                    "command": ["python3", DUMP],
                    "args": ["/etc/config/app.properties", "/etc/secret/password", "/etc/single/mode"],
                    "env": [
                        {"name": "PLAIN", "value": "plain value"},
                        {"name": "POD_NAME", "valueFrom": field("metadata.name")},
                        {"name": "POD_NAMESPACE", "valueFrom": field("metadata.namespace")},
                        {"name": "POD_UID", "valueFrom": field("metadata.uid")},
                        {"name": "POD_IP", "valueFrom": field("status.podIP")},
                        {"name": "NODE_NAME", "valueFrom": field("spec.nodeName")},
                        {"name": "APP_LABEL", "valueFrom": field("metadata.labels['app']")},
                        {
                            "name": "MODE",
                            "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}},
                        },
                        {
                            "name": "PASSWORD",
                            "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}},
                        },
                        {"name": "GREETING", "value": "hello $(POD_NAME)"},
                        {"name": "CONFIG_FILE", "value": "/etc/config/app.properties"},
                    ],
                    "volumeMounts": [
                        {"name": "config", "mountPath": "/etc/config"},
                        {"name": "secret", "mountPath": "/etc/secret", "readOnly": True},
                        {"name": "config", "mountPath": "/etc/single/mode", "subPath": "mode"},
                        {"name": "scratch", "mountPath": "/scratch"},
                    ],
                }
            ],
            "volumes": [
                {"name": "config", "configMap": {"name": "settings"}},
                {"name": "secret", "secret": {"secretName": "creds"}},
                {"name": "scratch", "emptyDir": {}},
            ],
        },
    }


def test_pod_env_and_mounted_configmap_and_secret_are_what_the_spec_says(
    kube: KubeCluster, kube_namespace: str
) -> None:
    """Given a ConfigMap, a Secret and a pod using them as env and volumes, when it runs to completion,
    then its env and files are the pod spec's, and its service-account token authenticates it."""
    ns = kube_namespace
    settings = {"app.properties": "color=blue\nsize=3\n", "mode": "fast"}
    kube.apply(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": settings},
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "creds"},
            "stringData": {"password": "s3cr=t"},
        },
        namespace=ns,
    )
    kube.apply(_pod(), namespace=ns)

    pod = kube.api().wait_for(
        f"/api/v1/namespaces/{ns}/pods/dump",
        lambda p: p["status"].get("phase") in ("Succeeded", "Failed"),
        timeout=60,
        what="the dump pod to finish",
    )
    output = kube.pod_log(ns, "dump")
    assert pod["status"]["phase"] == "Succeeded", output
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    seen = json.loads(output.strip().splitlines()[-1])
    env, files = seen["env"], seen["files"]

    assert env["PLAIN"] == "plain value"
    assert env["POD_NAME"] == "dump" == env["HOSTNAME"]
    assert env["POD_NAMESPACE"] == ns
    assert env["POD_UID"] == pod["metadata"]["uid"]
    assert env["POD_IP"] == pod["status"]["podIP"] and env["POD_IP"].startswith("127.")
    assert env["NODE_NAME"] == pod["spec"]["nodeName"] == "process-kubelet"
    assert env["APP_LABEL"] == "dump"
    assert env["MODE"] == "fast"
    assert env["PASSWORD"] == "s3cr=t"
    assert env["GREETING"] == "hello dump"
    api_host, api_port = kube.api_url.removeprefix("https://").split(":")
    assert (env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"]) == (api_host, api_port)

    root = env["KUBELET_POD_ROOT"]
    assert seen["cwd"] == root
    assert env["CONFIG_FILE"] == f"{root}/etc/config/app.properties"
    assert files == {
        f"{root}/etc/config/app.properties": settings["app.properties"],
        f"{root}/etc/secret/password": "s3cr=t",
        f"{root}/etc/single/mode": "fast",
    }
    assert Path(root, "scratch").is_dir()

    token = Path(root, SA_DIR.lstrip("/"), "token").read_text()
    assert Path(root, SA_DIR.lstrip("/"), "namespace").read_text() == ns
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    as_pod = KubeApi(kube.api_url, token, str(Path(root, SA_DIR.lstrip("/"), "ca.crt")))
    answer = as_pod.create("/apis/authentication.k8s.io/v1/selfsubjectreviews", review)
    assert answer["status"]["userInfo"]["username"] == f"system:serviceaccount:{ns}:default"
    assert Path(env["KUBECONFIG"]).is_file()
