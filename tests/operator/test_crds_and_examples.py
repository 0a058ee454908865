"""Given the CRDs, then every example manifest validates against its schema and the bad ones are refused.

jsonschema checks what an API server's structural schema checks (types,
enums, bounds, required fields); the CEL rules need a real API server
(``tests/kube/``), so for them the tests check that the rule is there and
that the operator's own validation refuses the same spec, naming the field.
"""

from __future__ import annotations

import pathlib
from typing import Any

import jsonschema
import pytest
import yaml

from jetlet_operator import specs

ROOT = pathlib.Path(__file__).resolve().parents[2]
CRDS = {
    doc["spec"]["names"]["kind"]: doc
    for doc in (yaml.safe_load(p.read_text()) for p in (ROOT / "crds").glob("*.yaml"))
}
EXAMPLES = sorted((ROOT / "examples" / "k8s").glob("*.yaml"))
BAD = sorted((ROOT / "examples" / "k8s" / "bad").glob("*.yaml"))


def _schema(kind: str) -> dict[str, Any]:
    schema: dict[str, Any] = CRDS[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _documents(path: pathlib.Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _errors(doc: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft7Validator(_schema(doc["kind"]))
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


def test_the_three_crds_have_short_names_subresources_and_printer_columns() -> None:
    assert {kind: CRDS[kind]["spec"]["names"]["shortNames"] for kind in CRDS} == {
        "JetCluster": ["jc"],
        "JetJob": ["jj"],
        "JetJobSnapshot": ["jjs"],
    }
    for doc in CRDS.values():
        version = doc["spec"]["versions"][0]
        assert doc["spec"]["group"] == "jetlet.io" and version["name"] == "v1alpha1"
        assert version["subresources"]["status"] == {}
        assert version["additionalPrinterColumns"]
    scale = CRDS["JetCluster"]["spec"]["versions"][0]["subresources"]["scale"]
    assert scale == {
        "specReplicasPath": ".spec.size",
        "statusReplicasPath": ".status.size",
        "labelSelectorPath": ".status.selector",
    }
    selector = _schema("JetCluster")["properties"]["status"]["properties"]["selector"]
    assert selector["type"] == "string"  # kubectl scale and an HPA need a string


def test_immutable_fields_are_cel_rules() -> None:
    job_rules = _schema("JetJob")["properties"]["spec"]["x-kubernetes-validations"]
    snapshot_rules = _schema("JetJobSnapshot")["properties"]["spec"]["x-kubernetes-validations"]
    assert {r["fieldPath"] for r in job_rules} == {".clusterRef", ".name"}
    assert {r["fieldPath"] for r in snapshot_rules} == {".jetJobRef", ".name", ".cancelJob"}
    assert all("oldSelf" in r["rule"] for r in job_rules + snapshot_rules)


def test_every_description_is_there() -> None:
    def walk(node: dict[str, Any], path: str) -> list[str]:
        missing = []
        for name, child in node.get("properties", {}).items():
            if (
                path.count(".") < 2
                and "description" not in child
                and name not in ("apiVersion", "kind", "metadata")
            ):
                missing.append(f"{path}.{name}")
            missing += walk(child, f"{path}.{name}")
        return missing

    for kind in CRDS:
        assert walk(_schema(kind)["properties"]["spec"], "spec") == [], kind


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_validates_against_its_crd(path: pathlib.Path) -> None:
    for doc in _documents(path):
        if doc["apiVersion"].startswith("jetlet.io/"):
            assert _errors(doc) == [], path.name
            if doc["kind"] == "JetJob":  # and the operator can act on it
                specs.job_spec(doc["spec"], doc["metadata"]["name"])
            elif doc["kind"] == "JetCluster":
                specs.cluster_spec(doc["spec"])


BAD_REASONS = {
    "jetcluster-zero-size.yaml": ("spec.size", "minimum", "spec.size"),
    "jetjob-bad-state.yaml": ("spec.state", "is not one of", "spec.state"),
    "jetjob-no-cluster.yaml": ("spec", "'clusterRef' is a required property", "spec.clusterRef"),
    "jetjob-two-pipelines.yaml": (None, None, "spec.pipeline"),
    "jetcluster-two-snapshot-stores.yaml": (None, None, "spec.snapshotStore"),
}
CEL_RULES = {  # the rule of a bad example that only the API server's CEL can refuse: (kind, path, words)
    "jetjob-two-pipelines.yaml": ("JetJob", ("spec", "pipeline"), "exactly one"),
    "jetcluster-two-snapshot-stores.yaml": ("JetCluster", ("spec", "snapshotStore"), "not both"),
}


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.name)
def test_bad_examples_are_refused_for_the_right_reason(path: pathlib.Path) -> None:
    where, what, field = BAD_REASONS[path.name]
    (doc,) = _documents(path)
    errors = _errors(doc)
    if where is None:  # a CEL rule (the API server), and the operator's own check
        assert errors == []
        kind, (spec, field_name), words = CEL_RULES[path.name]
        rule = _schema(kind)["properties"][spec]["properties"][field_name]["x-kubernetes-validations"]
        assert words in rule[0]["message"]
    else:
        assert len(errors) == 1 and errors[0].startswith(where + ":") and what in errors[0], errors
    with pytest.raises(specs.SpecError) as refused:
        if doc["kind"] == "JetCluster":
            specs.cluster_spec(doc["spec"])
        else:
            specs.job_spec(doc["spec"], doc["metadata"]["name"])
    assert refused.value.field == field


SCHEMA_KEYWORDS = {
    "type", "description", "default", "minimum", "maximum", "enum", "items", "properties", "required",
    "minLength", "maxLength", "pattern", "format", "additionalProperties", "x-kubernetes-validations",
    "x-kubernetes-preserve-unknown-fields", "x-kubernetes-list-type", "x-kubernetes-list-map-keys",
}  # fmt: skip


def test_every_schema_node_holds_only_schema_keywords() -> None:
    """A YAML slip (an unquoted comma in a flow mapping) makes a stray key the API server refuses."""

    def stray(node: dict[str, Any], path: str) -> list[str]:
        found = [f"{path}: {key}" for key in node if key not in SCHEMA_KEYWORDS]
        for name, child in node.get("properties", {}).items():
            found += stray(child, f"{path}.{name}")
        if isinstance(node.get("items"), dict):
            found += stray(node["items"], f"{path}[]")
        return found

    for kind in CRDS:
        assert stray(_schema(kind), kind) == []
