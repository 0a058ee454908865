"""By hand: ``python -m kubeharness up|down|status [--dir DIR]`` (what ``make kube-up``/``kube-down`` run).

``up`` starts a detached supervisor that runs the control plane and the process kubelet until
``down``; it prints the kubeconfig paths. Run from tests/kube (or with it on PYTHONPATH).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from . import procs
from .cluster import KubeCluster
from .controlplane import default_bin_dir, ensure_binaries


def default_dir() -> Path:
    return default_bin_dir().parent / "run"


def serve(workdir: Path) -> int:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    cluster = KubeCluster(workdir)
    try:
        cluster.start()
        info = {
            "pid": os.getpid(),
            "api_url": cluster.api_url,
            "kubectl": str(cluster.bin_dir / "kubectl"),
            "kubeconfigs": {user: cluster.kubeconfig(user) for user in cluster.plane.users},
            "workdir": str(workdir),
        }
        (workdir / "ready.json").write_text(json.dumps(info, indent=2))
        while not stop.wait(1.0):
            cluster.plane.check_alive()
    finally:
        cluster.stop()
        procs.kill_all()
        (workdir / "ready.json").unlink(missing_ok=True)
    return 0


def up(workdir: Path) -> int:
    reason = ensure_binaries(default_bin_dir())
    if reason:
        print(f"kube-up: {reason}", file=sys.stderr)
        return 1
    if (workdir / "supervisor.pid").exists() and _alive(workdir):
        print(f"kube-up: already running in {workdir}; `make kube-down` first", file=sys.stderr)
        return 1
    workdir.mkdir(parents=True, exist_ok=True)
    for stale in ("ready.json",):
        (workdir / stale).unlink(missing_ok=True)
    with open(workdir / "supervisor.log", "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kubeharness", "serve", "--dir", str(workdir)],
            cwd=str(Path(__file__).resolve().parent.parent),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    (workdir / "supervisor.pid").write_text(str(proc.pid))
    deadline = time.monotonic() + 180
    while not (workdir / "ready.json").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            print(
                f"kube-up: failed; see {workdir / 'supervisor.log'} and {workdir / 'logs'}", file=sys.stderr
            )
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
            return 1
        time.sleep(0.2)
    info = json.loads((workdir / "ready.json").read_text())
    print(f"Kubernetes API server: {info['api_url']}")
    for user, path in info["kubeconfigs"].items():
        print(f"  {user:20} {path}")
    print("Use it with:")
    print(f"  export KUBECONFIG={info['kubeconfigs']['admin']}")
    print(f"  {info['kubectl']} get nodes")
    print(f"Pod logs: {workdir}/pods/<namespace>/<pod>-<uid>/logs/; stop with: make kube-down")
    return 0


def _alive(workdir: Path) -> bool:
    try:
        os.kill(int((workdir / "supervisor.pid").read_text()), 0)
    except (OSError, ValueError):
        return False
    return True


def down(workdir: Path) -> int:
    pid_file = workdir / "supervisor.pid"
    if not pid_file.exists():
        print("kube-down: nothing running")
        return 0
    pid = int(pid_file.read_text())
    procs.signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + 40
    while procs.group_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    procs.signal_group(pid, signal.SIGKILL)
    pid_file.unlink(missing_ok=True)
    print(f"kube-down: stopped (logs stay in {workdir})")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m kubeharness")
    parser.add_argument("command", choices=["up", "down", "serve"])
    parser.add_argument("--dir", type=Path, default=default_dir(), help="state, kubeconfigs and logs")
    args = parser.parse_args()
    workdir = args.dir.resolve()
    if args.command == "serve":
        return serve(workdir)
    return up(workdir) if args.command == "up" else down(workdir)


if __name__ == "__main__":
    sys.exit(main())
