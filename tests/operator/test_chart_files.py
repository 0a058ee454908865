"""Given the Helm chart charts/jetlet and the plain manifest operator/deploy/operator.yaml, then (without
helm or a cluster) their CRDs are the top-level ones, the chart's default values satisfy its schema
and bad ones do not, and the manifest's settings are real ``JETLET_OPERATOR_*`` names giving the
operator's own defaults.

What needs the helm binary (rendering, the RBAC rules, the manifest equal to the rendering) is in
``tests/kube/test_operator_helm.py``.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import jsonschema
import pytest
import yaml

from jetlet_operator import settings as settings_mod

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "jetlet"


def _values() -> dict[str, Any]:
    values: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text())
    return values


def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads((CHART / "values.schema.json").read_text()))


def test_the_charts_crds_are_the_top_level_crds_byte_for_byte() -> None:
    top = {p.name: p.read_bytes() for p in (ROOT / "crds").glob("*.yaml")}
    chart = {p.name: p.read_bytes() for p in (CHART / "crds").glob("*.yaml")}
    assert len(top) == 3 and chart == top, "copy crds/*.yaml to charts/jetlet/crds/"


def test_the_default_values_satisfy_the_schema() -> None:
    assert [e.message for e in _validator().iter_errors(_values())] == []


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("replicas",), "1", "replicas"),
        (("replicas",), 3, "replicas"),
        (("logLevel",), "info", "logLevel"),
        (("image", "repository"), "Jetlet Operator", "image.repository"),
        (("image", "pullPolicy"), "Sometimes", "image.pullPolicy"),
        (("metricsPort",), 0, "metricsPort"),
        (("resyncSeconds",), 0, "resyncSeconds"),
    ],
)
def test_a_bad_value_is_refused_at_its_field(path: tuple[str, ...], value: object, field: str) -> None:
    values = _values()
    target = values
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    errors = [".".join(map(str, e.absolute_path)) for e in _validator().iter_errors(values)]
    assert errors == [field]


def test_the_plain_manifest_sets_real_settings_to_the_operators_defaults() -> None:
    docs = [d for d in yaml.safe_load_all((ROOT / "operator" / "deploy" / "operator.yaml").read_text()) if d]
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert all(name.startswith(settings_mod.ENV_PREFIX) for name in env)
    assert settings_mod.from_environ(env) == settings_mod.OperatorSettings()
    assert container["ports"][0]["containerPort"] == settings_mod.OperatorSettings().metrics_port
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"] == {"type": "Recreate"}
