"""etcd, kube-apiserver and kube-controller-manager on 127.0.0.1, built by ``make kube-bins``.

The API server serves TLS with a certificate from a throwaway CA (trustme), authenticates static
bearer tokens (one per :class:`User`), authorises with RBAC, and signs service-account tokens with
a throwaway RSA key, so the TokenRequest API works. The controller manager runs only the
controllers that StatefulSet and Deployment workloads need (see ``CONTROLLERS``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import trustme
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from . import procs
from .client import KubeApi

KUBE_VERSION = "v1.36.3"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kubectl", "helm")
TOOLS_DIR = Path(__file__).resolve().parent.parent / "tools"

# statefulset...podgc are what the issue asks for; root-ca-cert-publisher publishes the
# kube-root-ca.crt ConfigMap that every pod's service-account volume projects. Not nodelifecycle:
# it would evict the pods of a Node without kubelet heartbeats.
CONTROLLERS = (
    "deployment",
    "replicaset",
    "statefulset",
    "garbagecollector",
    "namespace",
    "endpointslice",
    "disruption",
    "serviceaccount",
    "podgc",
    "root-ca-cert-publisher",
)


def default_bin_dir() -> Path:
    env = os.environ.get("KUBE_HARNESS_BIN_DIR")
    if env:
        return Path(env)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "jetlet-kube" / KUBE_VERSION


def missing_binaries(bin_dir: Path) -> list[str]:
    return [name for name in BINARIES if not os.access(bin_dir / name, os.X_OK)]


def ensure_binaries(bin_dir: Path) -> str | None:
    """Build the binaries if absent; None when they are there, else why they cannot be (a skip reason).

    A build failure that is not "no Go" or "no module proxy" raises: that is a bug, not a skip.
    """
    if not missing_binaries(bin_dir):
        return None
    if shutil.which("go") is None:
        return "no Go toolchain on PATH: cannot build the Kubernetes binaries (make kube-bins)"
    result = subprocess.run(
        [str(TOOLS_DIR / "build.sh"), str(bin_dir)], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"make kube-bins failed:\n{result.stdout}\n{result.stderr[-5000:]}")
    missing = missing_binaries(bin_dir)
    if missing:
        return f"Kubernetes binaries not built ({', '.join(missing)}): {result.stderr.strip()[-500:]}"
    return None


@dataclass(frozen=True)
class User:
    """A static-token user of the API server. ``groups`` gives its rights; RBAC bindings give the rest."""

    name: str
    groups: tuple[str, ...] = ()
    token: str = field(default_factory=lambda: os.urandom(16).hex())


def default_users() -> dict[str, User]:
    """``admin`` (system:masters), ``operator`` (no rights but what a RoleBinding gives it), ``kubelet``."""
    return {
        "admin": User("admin", ("system:masters",)),
        "operator": User("jetlet-operator"),
        "kubelet": User("system:node:process-kubelet", ("system:nodes", "system:masters")),
        "controller-manager": User("system:kube-controller-manager", ("system:masters",)),
    }


class ControlPlane:
    """etcd + kube-apiserver + kube-controller-manager in ``workdir``; ``start()`` then ``stop()``."""

    def __init__(
        self, workdir: Path | None = None, bin_dir: Path | None = None, users: dict[str, User] | None = None
    ) -> None:
        self.bin_dir = bin_dir or default_bin_dir()
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="jetlet-kube-"))
        self.users = users or default_users()
        self.host = "127.0.0.1"
        self.api_port = 0
        self._procs: dict[str, subprocess.Popen[bytes]] = {}

    # ------------------------------------------------------------------ what tests use

    @property
    def api_url(self) -> str:
        return f"https://{self.host}:{self.api_port}"

    @property
    def ca_file(self) -> str:
        return str(self.workdir / "pki" / "ca.crt")

    def token(self, user: str) -> str:
        return self.users[user].token

    def kubeconfig(self, user: str = "admin") -> str:
        """The path of a kubeconfig that talks to this API server as ``user``."""
        return str(self.workdir / f"kubeconfig-{user}.json")

    def api(self, user: str = "admin") -> KubeApi:
        return KubeApi(self.api_url, self.token(user), self.ca_file)

    def binary(self, name: str) -> str:
        return str(self.bin_dir / name)

    def log_file(self, component: str) -> Path:
        return self.workdir / "logs" / f"{component}.log"

    # ------------------------------------------------------------------ lifecycle

    def start(self, timeout: float = 120.0) -> None:
        procs.install_exit_guards()
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
        self._write_pki()
        self._write_tokens_and_kubeconfigs()
        try:
            self._start_etcd(timeout)
            self._start_apiserver(timeout)
            self._start_controller_manager(timeout)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for name in ("kube-controller-manager", "kube-apiserver", "etcd"):
            proc = self._procs.pop(name, None)
            if proc is not None:
                procs.stop(proc, grace=5.0)

    def check_alive(self) -> None:
        for name, proc in self._procs.items():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited ({proc.returncode}); see {self.log_file(name)}")

    # ------------------------------------------------------------------ internals

    def _write_pki(self) -> None:
        pki = self.workdir / "pki"
        pki.mkdir(parents=True, exist_ok=True)
        ca = trustme.CA()
        ca.cert_pem.write_to_path(str(pki / "ca.crt"))
        ca.private_key_pem.write_to_path(str(pki / "ca.key"))
        server = ca.issue_cert(
            "127.0.0.1", "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"
        )
        server.private_key_pem.write_to_path(str(pki / "apiserver.key"))
        with open(pki / "apiserver.crt", "wb") as out:
            for blob in server.cert_chain_pems:
                out.write(blob.bytes())
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        (pki / "sa.key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.TraditionalOpenSSL,
                serialization.NoEncryption(),
            )
        )
        (pki / "sa.pub").write_bytes(
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )

    def _write_tokens_and_kubeconfigs(self) -> None:
        self.api_port = procs.free_port(self.host)
        lines = []
        for user in self.users.values():
            groups = ",".join(user.groups)
            lines.append(f'{user.token},{user.name},{user.name},"{groups}"')
        tokens = self.workdir / "pki" / "tokens.csv"
        tokens.write_text("\n".join(lines) + "\n")
        tokens.chmod(0o600)
        for key in self.users:
            write_kubeconfig(Path(self.kubeconfig(key)), self.api_url, self.ca_file, self.token(key), key)

    def _start_etcd(self, timeout: float) -> None:
        client, peer = procs.free_port(), procs.free_port()
        self.etcd_url = f"http://{self.host}:{client}"
        peer_url = f"http://{self.host}:{peer}"
        self._procs["etcd"] = procs.spawn(
            [
                self.binary("etcd"),
                "--name=jetlet",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=jetlet={peer_url}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
            str(self.log_file("etcd")),
        )

        def healthy() -> bool:
            self.check_alive()
            with urllib.request.urlopen(self.etcd_url + "/health", timeout=2) as resp:
                return bool(json.loads(resp.read()).get("health") == "true")

        procs.wait_until(healthy, timeout, "etcd")

    def _start_apiserver(self, timeout: float) -> None:
        pki = self.workdir / "pki"
        self._procs["kube-apiserver"] = procs.spawn(
            [
                self.binary("kube-apiserver"),
                f"--etcd-servers={self.etcd_url}",
                f"--bind-address={self.host}",
                f"--advertise-address={self.host}",
                f"--secure-port={self.api_port}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--client-ca-file={pki / 'ca.crt'}",
                f"--cert-dir={self.workdir / 'apiserver-certs'}",
                f"--token-auth-file={pki / 'tokens.csv'}",
                "--authorization-mode=RBAC",
                f"--service-account-issuer={self.api_url}",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--allow-privileged=true",
                # the default endpoint reconciler would publish 127.0.0.1 as the `kubernetes`
                # Service's endpoint, which validation refuses (loopback)
                "--endpoint-reconciler-type=none",
                "--profiling=false",
                "--v=1",
            ],
            str(self.log_file("kube-apiserver")),
        )
        api = self.api("admin")
        procs.wait_until(lambda: _readyz(api, self), timeout, "kube-apiserver")

    def _start_controller_manager(self, timeout: float) -> None:
        pki = self.workdir / "pki"
        self._procs["kube-controller-manager"] = procs.spawn(
            [
                self.binary("kube-controller-manager"),
                f"--kubeconfig={self.kubeconfig('controller-manager')}",
                f"--controllers={','.join(CONTROLLERS)}",
                f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--root-ca-file={pki / 'ca.crt'}",
                "--use-service-account-credentials=false",
                "--leader-elect=false",
                f"--bind-address={self.host}",
                f"--secure-port={procs.free_port()}",
                f"--cert-dir={self.workdir / 'kcm-certs'}",
                "--profiling=false",
                "--v=1",
            ],
            str(self.log_file("kube-controller-manager")),
        )
        api = self.api("admin")

        def default_service_account() -> bool:
            self.check_alive()
            return api.get_or_none("/api/v1/namespaces/default/serviceaccounts/default") is not None

        procs.wait_until(
            default_service_account, timeout, "kube-controller-manager (serviceaccount controller)"
        )


def _readyz(api: KubeApi, plane: ControlPlane) -> bool:
    plane.check_alive()
    req = urllib.request.Request(api.server + "/readyz", headers={"Authorization": f"Bearer {api.token}"})
    with urllib.request.urlopen(req, context=api._ssl, timeout=5) as resp:
        return bool(resp.status == 200)


def write_kubeconfig(
    path: Path, server: str, ca_file: str, token: str, user: str, namespace: str = ""
) -> None:
    """A kubeconfig (JSON is YAML) with one cluster, one user and one context, all named jetlet-test."""
    context: dict[str, str] = {"cluster": "jetlet-test", "user": user}
    if namespace:
        context["namespace"] = namespace
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "jetlet-test", "cluster": {"server": server, "certificate-authority": ca_file}}
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "jetlet-test", "context": context}],
        "current-context": "jetlet-test",
        "preferences": {},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config, indent=2))
    path.chmod(0o600)
