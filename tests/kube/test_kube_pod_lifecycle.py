"""Given pods whose processes end or ignore SIGTERM, then the kubelet reports and deletes them."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from kubeharness import PYTHON_IMAGE, KubeCluster

pytestmark = pytest.mark.kube

STUBBORN = (
    "import signal, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ignoring SIGTERM', flush=True)\n"
    "time.sleep(3600)\n"
)


def _pod(name: str, code: str, grace: int = 30) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": grace,
            "containers": [{"name": "main", "image": PYTHON_IMAGE, "command": ["python3", "-c", code]}],
        },
    }


def test_an_exiting_process_fails_its_pod_with_its_exit_code(kube: KubeCluster, kube_namespace: str) -> None:
    """Given a pod whose process exits 3, then the pod is Failed with exit code 3 and its output kept."""
    kube.apply(_pod("exits", "print('bye'); raise SystemExit(3)"), namespace=kube_namespace)

    pod = kube.api().wait_for(
        f"/api/v1/namespaces/{kube_namespace}/pods/exits",
        lambda p: p["status"].get("phase") == "Failed",
        timeout=60,
    )

    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3
    assert kube.pod_log(kube_namespace, "exits").splitlines()[-1] == "bye"


def test_a_process_ignoring_sigterm_is_killed_after_the_grace_period(
    kube: KubeCluster, kube_namespace: str
) -> None:
    """Given a pod that ignores SIGTERM with a 2 s grace period, when it is deleted, then it is gone
    after the grace period (SIGKILL), its process with it."""
    path = f"/api/v1/namespaces/{kube_namespace}/pods/stubborn"
    kube.apply(_pod("stubborn", STUBBORN, grace=2), namespace=kube_namespace)
    kube.api().wait_for(
        path,
        lambda p: "ignoring SIGTERM" in kube.pod_log(kube_namespace, "stubborn").splitlines(),
        timeout=60,
    )
    pid = kube.pod_pid(kube_namespace, "stubborn")
    assert pid is not None

    started = time.monotonic()
    kube.kubectl("delete", "pod", "stubborn", "--wait=false", namespace=kube_namespace)
    kube.api().wait_for(path, lambda p: p is None, timeout=60, what="the deletion of stubborn")

    assert time.monotonic() - started >= 1.5
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
