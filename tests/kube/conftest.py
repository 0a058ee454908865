"""Fixtures for tests on a real Kubernetes control plane (docs/testing-on-kubernetes.md).

* ``kube`` (session): a started :class:`kubeharness.KubeCluster`: ``api_url``, ``ca_file``,
  ``kubeconfig(user)``, ``token(user)``, ``api(user)``, ``kubectl(...)``, ``apply(...)``,
  ``helm(...)``, ``images`` (image name -> :class:`kubeharness.Image`), ``create_namespace()``,
  ``delete_namespace()``, ``pod_log()``, ``pod_pid()``, ``wait_ready_pods()``.
* ``kube_namespace``: a fresh namespace for one test, deleted after it.

The binaries are built (``make kube-bins``) when tests from here are collected and they are
absent; only when Go or the module proxy is missing do these tests skip, with the reason.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kubeharness import KubeCluster, default_bin_dir, ensure_binaries

HERE = Path(__file__).resolve().parent
_skip_reason: list[str | None] = []


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build the binaries before any kube test runs (outside any test's timeout)."""
    if any(Path(str(item.path)).resolve().is_relative_to(HERE) for item in session.items):
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and not (default_bin_dir() / "kubectl").exists():
            reporter.write_line("tests/kube: building the Kubernetes binaries (make kube-bins)...")
        _skip_reason.append(ensure_binaries(default_bin_dir()))


@pytest.fixture(scope="session")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeCluster]:
    """The control plane and the process kubelet, for the whole session."""
    reason = _skip_reason[0] if _skip_reason else ensure_binaries(default_bin_dir())
    if reason:
        pytest.skip(reason)
    cluster = KubeCluster(tmp_path_factory.mktemp("kube"))
    try:
        cluster.start()
    except Exception as err:
        cluster.stop()
        tails = []
        for log in sorted((cluster.workdir / "logs").glob("*.log")):
            tails.append(f"--- {log}:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:]))
        raise RuntimeError(f"the Kubernetes test harness did not start: {err}\n" + "\n".join(tails)) from err
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def kube_namespace(kube: KubeCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of its own for the test, deleted after it (what is in it goes with it)."""
    name = kube.create_namespace(request.node.name.removeprefix("test_"))
    yield name
    kube.delete_namespace(name)
