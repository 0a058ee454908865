"""Given the CRDs on a real API server, then they install, the examples are accepted, the bad ones and
edits of immutable fields are refused by the schema and the CEL rules, and /scale works on a JetCluster.

No operator runs here: this is what ``kubectl apply`` alone does with the CRDs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kubeharness import KubeCluster

pytestmark = pytest.mark.kube

ROOT = Path(__file__).resolve().parents[2]
CRD_NAMES = ("jetclusters.jetlet.io", "jetjobs.jetlet.io", "jetjobsnapshots.jetlet.io")


@pytest.fixture(scope="module")
def crds(kube: KubeCluster) -> None:
    kube.kubectl("apply", "-f", str(ROOT / "crds"))
    for name in CRD_NAMES:
        kube.kubectl("wait", "--for=condition=Established", f"crd/{name}", "--timeout=60s")


def test_the_examples_are_accepted_and_printed_with_short_names(
    kube: KubeCluster, kube_namespace: str, crds: None
) -> None:
    out = kube.kubectl("apply", "-f", str(ROOT / "examples" / "k8s"), namespace=kube_namespace).stdout
    assert (
        "jetcluster.jetlet.io/jet created" in out and "jetjobsnapshot.jetlet.io/clicks-backup created" in out
    )
    listed = kube.kubectl("get", "jj", namespace=kube_namespace).stdout
    assert listed.split("\n")[0].split() == ["NAME", "CLUSTER", "STATE", "PHASE", "RESTARTS", "AGE"]
    # then: the API server filled the schema's defaults
    job = json.loads(kube.kubectl("get", "jj/word-count", "-o", "json", namespace=kube_namespace).stdout)
    assert job["spec"]["state"] == "Running" and job["spec"]["upgradeMode"] == "stateless"
    assert job["spec"]["restartPolicy"] == {"type": "Never", "maxRetries": 3, "backoffSeconds": 10}
    assert kube.kubectl("get", "jc,jjs", namespace=kube_namespace).returncode == 0


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        (
            "jetcluster-zero-size.yaml",
            "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1",
        ),
        ("jetjob-bad-state.yaml", 'spec.state: Unsupported value: "Paused"'),
        ("jetjob-no-cluster.yaml", "spec.clusterRef: Required value"),
        ("jetjob-two-pipelines.yaml", "spec.pipeline needs exactly one of inline, configMapRef and module"),
        (
            "jetcluster-two-snapshot-stores.yaml",
            "snapshotStore: give claimName or volumeClaimTemplate, not both",
        ),
    ],
)
def test_bad_manifests_are_refused_naming_the_field(
    kube: KubeCluster, kube_namespace: str, crds: None, manifest: str, message: str
) -> None:
    path = ROOT / "examples" / "k8s" / "bad" / manifest
    refused = kube.kubectl("apply", "-f", str(path), namespace=kube_namespace, check=False)
    assert refused.returncode != 0 and message in refused.stderr, refused.stderr


def test_immutable_fields_cannot_be_edited_and_scale_works(
    kube: KubeCluster, kube_namespace: str, crds: None
) -> None:
    ns = kube_namespace
    kube.kubectl("apply", "-f", str(ROOT / "examples" / "k8s" / "jetjob-module.yaml"), namespace=ns)
    kube.kubectl("apply", "-f", str(ROOT / "examples" / "k8s" / "jetjobsnapshot.yaml"), namespace=ns)
    for resource, patch, message in [
        ("jj/word-count-module", {"spec": {"clusterRef": "other"}}, "spec.clusterRef is immutable"),
        ("jj/word-count-module", {"spec": {"name": "renamed"}}, "spec.name is immutable"),
        ("jjs/clicks-backup", {"spec": {"jetJobRef": "other"}}, "spec.jetJobRef is immutable"),
    ]:
        refused = kube.kubectl(
            "patch", resource, "--type=merge", "-p", json.dumps(patch), namespace=ns, check=False
        )
        assert refused.returncode != 0 and message in refused.stderr, refused.stderr
    # a mutable field can be edited
    kube.kubectl(
        "patch", "jj/word-count-module", "--type=merge", "-p", '{"spec":{"state":"Suspended"}}', namespace=ns
    )
    # the scale subresource edits spec.size
    kube.kubectl("apply", "-f", str(ROOT / "examples" / "k8s" / "jetcluster.yaml"), namespace=ns)
    kube.kubectl("scale", "jc/jet", "--replicas=4", namespace=ns)
    size = kube.kubectl("get", "jc/jet", "-o", "jsonpath={.spec.size}", namespace=ns).stdout
    assert size == "4"
