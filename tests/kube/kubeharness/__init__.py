"""A real Kubernetes control plane for the tests, with a kubelet that runs pods as local processes.

See docs/testing-on-kubernetes.md. The pytest fixtures are in tests/kube/conftest.py; by hand:
``make kube-up`` / ``make kube-down``.
"""

from .client import ApiError, AsyncKubeApi, KubeApi
from .cluster import (
    JETLET_IMAGE,
    OPERATOR_IMAGE,
    PYTHON_IMAGE,
    KubeCluster,
    default_images,
    is_ready,
    venv_bin,
)
from .controlplane import KUBE_VERSION, ControlPlane, User, default_bin_dir, ensure_binaries
from .kubelet import Image, ProcessKubelet

__all__ = [
    "JETLET_IMAGE",
    "KUBE_VERSION",
    "OPERATOR_IMAGE",
    "PYTHON_IMAGE",
    "ApiError",
    "AsyncKubeApi",
    "ControlPlane",
    "Image",
    "KubeApi",
    "KubeCluster",
    "ProcessKubelet",
    "User",
    "default_bin_dir",
    "default_images",
    "ensure_binaries",
    "is_ready",
    "venv_bin",
]
