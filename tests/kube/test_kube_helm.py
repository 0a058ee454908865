"""Given the built helm, a local chart installs into a test namespace on the harness's API server."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubeharness import KubeCluster

pytestmark = pytest.mark.kube

CHART = """\
apiVersion: v2
name: demo
version: 0.1.0
"""
TEMPLATE = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
data:
  greeting: {{ .Values.greeting | quote }}
"""


def test_helm_installs_a_chart(kube: KubeCluster, kube_namespace: str, tmp_path: Path) -> None:
    """Given a chart of one ConfigMap, when helm installs it with a value, then the ConfigMap holds it."""
    chart = tmp_path / "demo"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(CHART)
    (chart / "values.yaml").write_text('greeting: "hello"\n')
    (chart / "templates" / "configmap.yaml").write_text(TEMPLATE)

    result = kube.helm("install", "first", str(chart), "--namespace", kube_namespace, "--set", "greeting=hi")

    assert result.returncode == 0, result.stdout + result.stderr
    settings = kube.api().get(f"/api/v1/namespaces/{kube_namespace}/configmaps/first-settings")
    assert settings["data"] == {"greeting": "hi"}
    listed = kube.helm("list", "--namespace", kube_namespace, "--short")
    assert listed.stdout.split() == ["first"], listed.stdout + listed.stderr
