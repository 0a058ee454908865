"""A whole test cluster: the control plane, the process kubelet, and what tests do with them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .client import ApiError, KubeApi
from .controlplane import ControlPlane, User, default_bin_dir
from .kubelet import Image, ProcessKubelet

REPO = Path(__file__).resolve().parents[3]
JETLET_IMAGE = "jetlet:dev"
PYTHON_IMAGE = "python:3.11-slim"
OPERATOR_IMAGE = "jetlet-operator:dev"


def venv_bin() -> str:
    """The bin directory of the project's virtualenv (the one running the tests if there is none)."""
    candidate = REPO / ".venv" / "bin"
    return str(candidate if candidate.is_dir() else Path(sys.executable).parent)


def default_images() -> dict[str, Image]:
    """``jetlet:dev`` runs the project's ``jetlet`` CLI, ``python:3.11-slim`` its Python,
    ``jetlet-operator:dev`` (the Helm chart's default image) ``python -m jetlet_operator``; all unbuffered."""
    env = {"PYTHONUNBUFFERED": "1"}
    return {
        JETLET_IMAGE: Image(entrypoint=["jetlet"], path=[venv_bin()], env=env),
        PYTHON_IMAGE: Image(entrypoint=["python3"], path=[venv_bin()], env=env),
        OPERATOR_IMAGE: Image(entrypoint=["python", "-m", "jetlet_operator"], path=[venv_bin()], env=env),
    }


class KubeCluster:
    """The control plane and the process kubelet, started together (see docs/testing-on-kubernetes.md)."""

    def __init__(
        self,
        workdir: Path,
        bin_dir: Path | None = None,
        images: dict[str, Image] | None = None,
        users: dict[str, User] | None = None,
    ) -> None:
        self.workdir = Path(workdir)
        self.plane = ControlPlane(self.workdir, bin_dir or default_bin_dir(), users)
        self.images: dict[str, Image] = default_images() if images is None else images
        self.kubelet: ProcessKubelet | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self.plane.start()
        try:
            self.kubelet = ProcessKubelet(
                self.plane.api_url,
                self.plane.token("kubelet"),
                self.plane.ca_file,
                self.workdir,
                self.images,
            )
            self.kubelet.start()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self.kubelet is not None:
            self.kubelet.stop()
        self.plane.stop()

    # ------------------------------------------------------------------ addresses and users

    @property
    def api_url(self) -> str:
        return self.plane.api_url

    @property
    def ca_file(self) -> str:
        return self.plane.ca_file

    @property
    def bin_dir(self) -> Path:
        return self.plane.bin_dir

    def kubeconfig(self, user: str = "admin") -> str:
        return self.plane.kubeconfig(user)

    def token(self, user: str = "admin") -> str:
        return self.plane.token(user)

    def user_name(self, user: str) -> str:
        """The name RBAC knows ``user`` by (``operator`` is ``jetlet-operator``)."""
        return self.plane.users[user].name

    def api(self, user: str = "admin") -> KubeApi:
        return self.plane.api(user)

    # ------------------------------------------------------------------ tools

    def kubectl(
        self,
        *args: str,
        user: str = "admin",
        namespace: str | None = None,
        stdin: str | None = None,
        check: bool = True,
        timeout: float = 60.0,
    ) -> subprocess.CompletedProcess[str]:
        """Run the built kubectl as ``user``; raises with its output when ``check`` and it fails."""
        argv = [str(self.bin_dir / "kubectl"), f"--kubeconfig={self.kubeconfig(user)}"]
        if namespace:
            argv.append(f"--namespace={namespace}")
        result = subprocess.run(
            [*argv, *args], input=stdin, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
            )
        return result

    def apply(self, *objects: dict[str, Any], namespace: str | None = None, user: str = "admin") -> str:
        """``kubectl apply`` the objects (a List); kubectl's output."""
        doc = {"apiVersion": "v1", "kind": "List", "items": list(objects)}
        return self.kubectl("apply", "-f", "-", user=user, namespace=namespace, stdin=json.dumps(doc)).stdout

    def helm(
        self, *args: str, user: str = "admin", timeout: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "KUBECONFIG": self.kubeconfig(user),
            "HELM_CACHE_HOME": str(self.workdir / "helm" / "cache"),
            "HELM_CONFIG_HOME": str(self.workdir / "helm" / "config"),
            "HELM_DATA_HOME": str(self.workdir / "helm" / "data"),
        }
        return subprocess.run(
            [str(self.bin_dir / "helm"), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            check=False,
        )

    # ------------------------------------------------------------------ namespaces

    def create_namespace(self, hint: str = "test") -> str:
        """A new namespace named after ``hint``, once its ``default`` ServiceAccount exists."""
        base = re.sub(r"[^a-z0-9-]+", "-", hint.lower()).strip("-")[:40].strip("-") or "test"
        name = f"{base}-{os.urandom(3).hex()}"
        api = self.api()
        api.create(
            "/api/v1/namespaces",
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "labels": {"jetlet-test": "1"}},
            },
        )
        api.wait_for(
            f"/api/v1/namespaces/{name}/serviceaccounts/default",
            lambda sa: sa is not None,
            timeout=30,
            what=f"the default ServiceAccount of {name}",
        )
        return name

    def delete_namespace(self, name: str, wait: bool = False, timeout: float = 60.0) -> None:
        try:
            self.api().delete(f"/api/v1/namespaces/{name}")
        except ApiError as err:
            if err.status != 404:
                raise
        if wait:
            self.api().wait_for(
                f"/api/v1/namespaces/{name}",
                lambda ns: ns is None,
                timeout=timeout,
                what=f"deletion of {name}",
            )

    # ------------------------------------------------------------------ pods

    def pod_log(self, namespace: str, name: str, container: str | None = None) -> str:
        assert self.kubelet is not None
        return self.kubelet.pod_log(namespace, name, container)

    def pod_pid(self, namespace: str, name: str, container: str | None = None) -> int | None:
        assert self.kubelet is not None
        return self.kubelet.pod_pid(namespace, name, container)

    def pods(self, namespace: str, selector: str = "") -> list[dict[str, Any]]:
        query = f"?labelSelector={selector}" if selector else ""
        items: list[dict[str, Any]] = self.api().get(f"/api/v1/namespaces/{namespace}/pods{query}")["items"]
        return items

    def wait_ready_pods(
        self, namespace: str, selector: str, count: int, timeout: float = 90.0
    ) -> list[dict[str, Any]]:
        """Wait until exactly ``count`` pods match, all Ready and none terminating; those pods."""
        deadline = time.monotonic() + timeout
        while True:
            pods = self.pods(namespace, selector)
            live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
            if len(pods) == count and len(live) == count and all(is_ready(p) for p in live):
                return sorted(live, key=lambda p: str(p["metadata"]["name"]))
            if time.monotonic() >= deadline:
                state = [(p["metadata"]["name"], p.get("status", {}).get("phase"), is_ready(p)) for p in pods]
                raise TimeoutError(
                    f"{count} ready pods ({selector}) in {namespace} not seen in {timeout}s: {state}"
                )
            time.sleep(0.2)

    def describe(self, namespace: str) -> str:
        """Everything in a namespace and the harness's logs' tails: for assertion messages."""
        out = self.kubectl("get", "all,events", "-o", "wide", namespace=namespace, check=False)
        return out.stdout + out.stderr


def is_ready(pod: dict[str, Any]) -> bool:
    conditions: Sequence[dict[str, Any]] = pod.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
