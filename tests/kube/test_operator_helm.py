"""Given the Helm chart charts/jetlet, when it is rendered and installed on the harness's real control
plane, then it runs the operator as a Deployment under the chart's own ServiceAccount and RBAC.

Rendering (no cluster): bad values are refused naming the field; the ClusterRole carries exactly
the rules of ``operator/deploy/rbac.yaml``; the default rendering is ``operator/deploy/operator.yaml``
(the Helm-only labels aside); watched namespaces bind the rules with RoleBindings, none with a
ClusterRoleBinding; ``helm lint --strict`` passes. (The chart's CRDs equal to the top-level ones, and
its values schema, are checked without helm in ``tests/operator/test_chart_files.py``.)

On the harness (one release shared by the ordered tests below): ``helm install`` → the operator
pod (image ``jetlet-operator:dev``, the project's ``python -m jetlet_operator``) is Ready and its
``/healthz`` answers 200 at the pod's address; a JetCluster becomes Ready through it, the pod
talking to the API server with its ServiceAccount's token (the kubelet's pod kubeconfig), so the
chart's RBAC is enough; ``helm upgrade`` with another log level rolls the Deployment;
``helm uninstall`` removes the Deployment, its pod, the ServiceAccount and the RBAC objects.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubeharness import KubeCluster, default_bin_dir, ensure_binaries
from prometheus_client.parser import text_string_to_metric_families

from jetlet.testing import wait_until

pytestmark = pytest.mark.kube

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "jetlet"
RELEASE = "jetlet-operator"
"""The release name of the rendering tests, the one the docs and operator/deploy/ use."""
LIVE = "jetlet-live"
"""The installed release: its cluster-scoped ClusterRole must not meet rbac.yaml's (other tests apply it)."""
SELECTOR = f"app.kubernetes.io/name=jetlet-operator,app.kubernetes.io/instance={LIVE}"
HELM_ONLY_LABELS = ("helm.sh/chart", "app.kubernetes.io/managed-by")


# ------------------------------------------------------------------------------------ rendering


@pytest.fixture(scope="module")
def helm_bin() -> Path:
    reason = ensure_binaries(default_bin_dir())
    if reason:
        pytest.skip(reason)
    return default_bin_dir() / "helm"


def _helm(helm_bin: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """helm without a cluster, its own directories under ``tmp_path``."""
    env = {**os.environ, **{f"HELM_{k}_HOME": str(tmp_path / k.lower()) for k in ("CACHE", "CONFIG", "DATA")}}
    return subprocess.run(
        [str(helm_bin), *args], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def _template(helm_bin: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return _helm(helm_bin, tmp_path, "template", RELEASE, str(CHART), "--namespace", "jetlet-system", *args)


def _rendered(helm_bin: Path, tmp_path: Path, *args: str) -> dict[tuple[str, str], dict[str, Any]]:
    result = _template(helm_bin, tmp_path, *args)
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    return {(d["kind"], d["metadata"].get("namespace", "")): d for d in docs}


def _without_helm_labels(obj: Any) -> Any:
    """``obj`` with the Helm-only labels and every ``metadata.namespace`` taken out (recursively)."""
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            if key == "labels" and isinstance(value, dict):
                value = {k: v for k, v in value.items() if k not in HELM_ONLY_LABELS}
            if key == "metadata" and isinstance(value, dict):
                value = {k: v for k, v in value.items() if k != "namespace"}
            out[key] = _without_helm_labels(value)
        return out
    if isinstance(obj, list):
        return [_without_helm_labels(v) for v in obj]
    return obj


@pytest.mark.parametrize(
    ("setting", "field", "complaint"),
    [
        ("replicas=two", "/replicas", "want integer"),
        ("replicas=2", "/replicas", "maximum"),
        ("logLevel=LOUD", "/logLevel", "must be one of"),
        ("image.repository=Not An Image", "/image/repository", "does not match pattern"),
        ("image.tag=a:b", "/image/tag", "does not match pattern"),
        ("metricsPort=70000", "/metricsPort", "maximum"),
        ("watchNamespaces[0]=Not_A_Namespace", "/watchNamespaces/0", "does not match pattern"),
        ("replica=1", "additional properties 'replica'", "not allowed"),
    ],
)
def test_bad_values_are_refused_naming_the_field(
    helm_bin: Path, tmp_path: Path, setting: str, field: str, complaint: str
) -> None:
    result = _template(helm_bin, tmp_path, "--set", setting)
    assert result.returncode != 0, result.stdout
    assert field in result.stderr and complaint in result.stderr, result.stderr


def test_the_chart_carries_the_rules_of_rbac_yaml_and_renders_operator_yaml(
    helm_bin: Path, tmp_path: Path
) -> None:
    rendered = _rendered(helm_bin, tmp_path)
    deploy = ROOT / "operator" / "deploy"
    plain = {d["kind"]: d for d in yaml.safe_load_all((deploy / "rbac.yaml").read_text()) if d}
    plain |= {d["kind"]: d for d in yaml.safe_load_all((deploy / "operator.yaml").read_text()) if d}
    # rbac.yaml has no labels: its rules and bindings are the chart's
    role, binding = rendered[("ClusterRole", "")], rendered[("ClusterRoleBinding", "")]
    assert role["rules"] == plain["ClusterRole"]["rules"]
    assert role["metadata"]["name"] == plain["ClusterRole"]["metadata"]["name"]
    assert {k: binding[k] for k in ("roleRef", "subjects")} == {
        k: plain["ClusterRoleBinding"][k] for k in ("roleRef", "subjects")
    }
    for kind in ("ServiceAccount", "Deployment"):
        assert _without_helm_labels(rendered[(kind, "jetlet-system")]) == plain[kind], kind
    assert set(rendered) == {
        ("ServiceAccount", "jetlet-system"),
        ("ClusterRole", ""),
        ("ClusterRoleBinding", ""),
        ("Deployment", "jetlet-system"),
    }


def test_watched_namespaces_get_role_bindings_and_the_operator_watches_only_them(
    helm_bin: Path, tmp_path: Path
) -> None:
    rendered = _rendered(helm_bin, tmp_path, "--set", "watchNamespaces={team-a,team-b}")
    bindings = {ns: d for (kind, ns), d in rendered.items() if kind == "RoleBinding"}
    assert set(bindings) == {"team-a", "team-b"}
    assert not any(kind == "ClusterRoleBinding" for kind, _ in rendered)
    assert bindings["team-a"]["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": RELEASE,
    }
    assert bindings["team-a"]["subjects"] == [
        {"kind": "ServiceAccount", "name": RELEASE, "namespace": "jetlet-system"}
    ]
    container = rendered[("Deployment", "jetlet-system")]["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["JETLET_OPERATOR_NAMESPACES"] == "team-a,team-b"


def test_helm_lint_strict_passes(helm_bin: Path, tmp_path: Path) -> None:
    result = _helm(helm_bin, tmp_path, "lint", "--strict", str(CHART))
    assert result.returncode == 0 and "0 chart(s) failed" in result.stdout, result.stdout + result.stderr


# ------------------------------------------------------------------------------------ installed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))  # the operator binds 0.0.0.0: on the harness all pods share ports
        port: int = s.getsockname()[1]
        return port


class Release:
    """The installed release: its namespace (also the watched one), metrics port and install output."""

    def __init__(self, kube: KubeCluster, namespace: str, port: int) -> None:
        self.kube, self.namespace, self.port = kube, namespace, port
        self.install_output = ""

    def helm(self, *args: str) -> subprocess.CompletedProcess[str]:
        result = self.kube.helm(*args, "--namespace", self.namespace)
        assert result.returncode == 0, f"helm {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
        return result

    def pods(self) -> list[dict[str, Any]]:
        return self.kube.pods(self.namespace, SELECTOR)

    def ready_pod(self, timeout: float = 60) -> dict[str, Any]:
        """The one operator pod, once it is Ready and no other is left."""
        try:
            return self.kube.wait_ready_pods(self.namespace, SELECTOR, 1, timeout=timeout)[0]
        except TimeoutError as err:
            raise AssertionError(f"{err}\n{self.kube.describe(self.namespace)}\n{self.logs()}") from err

    def logs(self) -> str:
        names = [p["metadata"]["name"] for p in self.pods()]
        return "\n".join(f"--- {n}:\n{self.kube.pod_log(self.namespace, n)[-4000:]}" for n in names)


@pytest.fixture(scope="module")
def release(kube: KubeCluster) -> Iterator[Release]:
    ns = kube.create_namespace("operator-helm")
    installed = Release(kube, ns, _free_port())
    try:
        installed.install_output = installed.helm(
            "install",
            LIVE,
            str(CHART),
            "--set",
            f"watchNamespaces={{{ns}}}",
            "--set",
            f"metricsPort={installed.port}",
            "--set",
            "resyncSeconds=5",
        ).stdout
        yield installed
    finally:
        # JetClusters carry kopf's finalizer: delete them while the operator runs
        kube.kubectl("delete", "jc", "--all", "--wait=true", "--timeout=60s", namespace=ns, check=False)
        kube.helm("uninstall", LIVE, "--namespace", ns, "--wait", "--timeout=60s")
        kube.delete_namespace(ns)


def test_helm_install_runs_the_operator_ready_with_its_healthz(kube: KubeCluster, release: Release) -> None:
    ns = release.namespace
    assert "STATUS: deployed" in release.install_output
    assert f"It watches the namespace(s) {ns}." in release.install_output
    pod = release.ready_pod()
    container = pod["spec"]["containers"][0]
    assert container["image"] == "jetlet-operator:dev" and pod["spec"]["serviceAccountName"] == LIVE
    with urllib.request.urlopen(
        f"http://{pod['status']['podIP']}:{release.port}/healthz", timeout=5
    ) as answer:
        assert answer.status == 200
        assert json.loads(answer.read()) == {"status": "ok"}
    # the operator's process talks to the API server as the chart's ServiceAccount, nothing more
    assert _api_user_of(kube, pod) == f"system:serviceaccount:{ns}:{LIVE}"


def _api_user_of(kube: KubeCluster, pod: dict[str, Any]) -> str:
    """Whom the API server takes the pod's process for: its KUBECONFIG's token, self-reviewed."""
    pid = kube.pod_pid(pod["metadata"]["namespace"], pod["metadata"]["name"])
    assert pid is not None
    variables = Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0")
    kubeconfig = dict(v.split("=", 1) for v in variables if "=" in v)["KUBECONFIG"]
    token = json.loads(Path(kubeconfig).read_text())["users"][0]["user"]["token"]
    review = urllib.request.Request(
        f"{kube.api_url}/apis/authentication.k8s.io/v1/selfsubjectreviews",
        data=json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    tls = ssl.create_default_context(cafile=kube.ca_file)
    with urllib.request.urlopen(review, context=tls, timeout=10) as answer:
        user: str = json.loads(answer.read())["status"]["userInfo"]["username"]
        return user


def _jet_cluster() -> dict[str, Any]:
    return {
        "apiVersion": "jetlet.io/v1alpha1",
        "kind": "JetCluster",
        "metadata": {"name": "jet"},
        "spec": {"size": 1, "image": "jetlet:dev", "cooperativeThreadCount": 1},
    }


def test_a_jetcluster_becomes_ready_through_the_operator_pod(kube: KubeCluster, release: Release) -> None:
    ns = release.namespace
    release.ready_pod()
    kube.apply(_jet_cluster(), namespace=ns)
    waited = kube.kubectl(
        "wait", "--for=condition=Ready", "jc/jet", "--timeout=90s", namespace=ns, check=False
    )
    assert waited.returncode == 0, f"{waited.stderr}\n{kube.describe(ns)}\n{release.logs()}"
    status = kube.api().get(f"/apis/jetlet.io/v1alpha1/namespaces/{ns}/jetclusters/jet")["status"]
    assert status["phase"] == "Running" and status["readyMembers"] == 1
    sts = kube.api().get(f"/apis/apps/v1/namespaces/{ns}/statefulsets/jet")
    assert sts["metadata"]["ownerReferences"][0]["kind"] == "JetCluster"
    # and the operator's own metrics, beside /healthz, count the reconciliations and the cluster
    operator = release.ready_pod()
    url = f"http://{operator['status']['podIP']}:{release.port}/metrics"

    def scraped() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        with urllib.request.urlopen(url, timeout=5) as answer:
            text = answer.read().decode()
        return {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        }

    wait_until(
        lambda: scraped().get(("jetlet_operator_clusters", (("phase", "Running"),))) == 1.0,
        "the operator's metrics to count the Running cluster",
        timeout=30,
    )
    samples = scraped()
    assert (
        samples[("jetlet_operator_reconciliations_total", (("kind", "JetCluster"), ("outcome", "ok")))] >= 1
    )
    assert samples[("jetlet_operator_cluster_ready_members", (("cluster", "jet"), ("namespace", ns)))] == 1
    assert samples[("jetlet_operator_reconcile_duration_seconds_count", (("kind", "JetCluster"),))] >= 1


def test_helm_upgrade_with_another_log_level_rolls_the_deployment(
    kube: KubeCluster, release: Release
) -> None:
    ns = release.namespace
    before = release.ready_pod()
    kube.apply(_jet_cluster(), namespace=ns)
    release.helm("upgrade", LIVE, str(CHART), "--reuse-values", "--set", "logLevel=DEBUG")
    wait_until(
        lambda: [p["metadata"]["uid"] for p in release.pods()] not in ([], [before["metadata"]["uid"]]),
        "a new operator pod",
        timeout=60,
    )
    after = release.ready_pod()
    assert after["metadata"]["uid"] != before["metadata"]["uid"]
    env = {e["name"]: e.get("value") for e in after["spec"]["containers"][0]["env"]}
    assert env["JETLET_OPERATOR_LOG_LEVEL"] == "DEBUG"
    deployment = kube.api().get(f"/apis/apps/v1/namespaces/{ns}/deployments/{LIVE}")
    assert deployment["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    # the new operator still answers for the cluster: a resize is carried out
    kube.kubectl("scale", "jc/jet", "--replicas=2", namespace=ns)
    waited = kube.kubectl(
        "wait",
        "--for=jsonpath={.status.readyMembers}=2",
        "jc/jet",
        "--timeout=90s",
        namespace=ns,
        check=False,
    )
    assert waited.returncode == 0, f"{waited.stderr}\n{kube.describe(ns)}\n{release.logs()}"


def test_helm_uninstall_removes_the_deployment_and_the_rbac(kube: KubeCluster, release: Release) -> None:
    ns = release.namespace
    release.ready_pod()
    kube.kubectl("delete", "jc", "--all", "--wait=true", "--timeout=60s", namespace=ns)
    api = kube.api()
    installed = [
        f"/apis/apps/v1/namespaces/{ns}/deployments/{LIVE}",
        f"/api/v1/namespaces/{ns}/serviceaccounts/{LIVE}",
        f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{LIVE}",
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings/{LIVE}",
    ]
    assert all(api.get_or_none(path) for path in installed)
    release.helm("uninstall", LIVE, "--wait", "--timeout=60s")
    assert {path: api.get_or_none(path) for path in installed} == dict.fromkeys(installed)
    wait_until(lambda: not release.pods(), "the operator pod is gone", timeout=60)
    assert api.get_or_none(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{LIVE}") is None
