"""Given the operator's token, the API server refuses (403) what its Role does not grant."""

from __future__ import annotations

import pytest
from kubeharness import ApiError, KubeApi, KubeCluster

pytestmark = pytest.mark.kube


def _status(call: object) -> int:
    assert callable(call)
    try:
        call()
    except ApiError as err:
        return err.status
    return 200


def _configmap(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}


def test_operator_token_is_refused_what_its_role_does_not_grant(
    kube: KubeCluster, kube_namespace: str
) -> None:
    """Given a Role granting the operator pods (read) and ConfigMaps (read, create) in one namespace,
    then it may do exactly that: 403 for Secrets, for other namespaces, and before the binding."""
    ns = kube_namespace
    operator: KubeApi = kube.api("operator")
    assert _status(lambda: operator.get(f"/api/v1/namespaces/{ns}/pods")) == 403

    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "jetlet-operator"},
        "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create"]},
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "jetlet-operator"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "jetlet-operator"},
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": kube.user_name("operator")}
        ],
    }
    kube.apply(role, binding, namespace=ns)

    operator.wait_for(f"/api/v1/namespaces/{ns}/pods", lambda listing: listing is not None, timeout=30)
    assert operator.create(f"/api/v1/namespaces/{ns}/configmaps", _configmap("made-by-operator"))
    assert _status(lambda: operator.get(f"/api/v1/namespaces/{ns}/configmaps/made-by-operator")) == 200

    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"k": "v"}}
    assert _status(lambda: operator.create(f"/api/v1/namespaces/{ns}/secrets", secret)) == 403
    assert _status(lambda: operator.get(f"/api/v1/namespaces/{ns}/secrets")) == 403
    assert _status(lambda: operator.delete(f"/api/v1/namespaces/{ns}/configmaps/made-by-operator")) == 403
    assert _status(lambda: operator.get("/api/v1/namespaces/default/pods")) == 403
    assert _status(lambda: operator.get("/api/v1/nodes")) == 403

    can_i = kube.kubectl("auth", "can-i", "create", "secrets", user="operator", namespace=ns, check=False)
    assert can_i.stdout.strip() == "no"
    can_i = kube.kubectl("auth", "can-i", "list", "pods", user="operator", namespace=ns, check=False)
    assert can_i.stdout.strip() == "yes"
    assert kube.kubectl("get", "pods", user="operator", namespace=ns).returncode == 0
