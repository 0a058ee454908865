"""The operator on a real Kubernetes control plane: how long `kubectl apply` takes to give a running job.

Everything runs on the project's Kubernetes test harness (``tests/kube``,
docs/testing-on-kubernetes.md): a real etcd, API server and controller
manager on 127.0.0.1, and the process kubelet that runs each pod as a local
process on its own 127.x address. The operator is ``python -m
jetlet_operator`` under the harness's ``operator`` token, bound only to the
ClusterRole of ``operator/deploy/rbac.yaml`` (as in
``tests/kube/test_operator_lifecycle.py``). The harness is started once; each
round then measures, in one namespace, one after the other:

* **baseline, pod start**: ``kubectl apply`` of a plain StatefulSet of 3 pods
  (``Parallel``, as the operator's), each a small Python HTTP server
  (``tests/kube/apps/podserver.py``) with an HTTP readiness probe, until all
  3 pods are Ready: what the harness itself needs to start 3 Python pods;
* **baseline, pod replacement**: one of those pods deleted, until its
  replacement (a new uid) is Ready;
* **(a) cluster**: ``kubectl apply`` of a JetCluster of 3 until its ``Ready``
  condition is True (3 member pods Ready: each joined the others, knows its
  coordinator and has its partition table);
* **(b) job**: ``kubectl apply`` of a JetJob with inline code (an
  EXACTLY_ONCE tumbling-window count over ``Sources.test_stream``, a
  replayable source, snapshots every 300 ms, unbounded) until the engine's job
  record says RUNNING (asked of the coordinator over REST), and until the
  JetJob's ``status.phase`` says RUNNING (the operator's report);
* **(c) restart**: once the job has a snapshot, a member pod that is not the
  coordinator is deleted (``kubectl delete pod --wait=false``: the process
  kubelet sends SIGTERM, the member leaves gracefully); "running again" is
  defined as the engine's job record showing a *new execution*: ``restarts``
  above its value before the deletion, an ``execution_id`` other than the one
  before, and status RUNNING. Also measured: until the JetJob's status shows it
  (``status.restarts`` incremented and ``phase`` RUNNING), and until the
  replacement member pod is Ready and the JetCluster is Ready with 3 members.

Every time is wall time from just before the ``kubectl`` command to the first
poll (every 50 ms, through the API server or the member's REST API) that sees
the condition, so the figures include kubectl's own start (about the same in
a row and its baseline). Between rounds everything is deleted and the next
round starts once no pod is left; the member pods' output of each round is
kept in ``bench/out/kube_bench/`` (and the evidence of a failed round).
Reported: median and max over the rounds, and the ratio of medians to the
baseline measured in the same run.

The bench needs the harness's binaries (``make kube-bins``); without them it
raises :class:`_common.BenchSkipped` with the reason (``run_all`` keeps the
section it had). It is not part of the test suite; ``tests/bench_scripts/test_kube_bench.py``
checks only its formatting.

Run: ``python bench/kube_bench.py [--repeats N]`` or
``python bench/run_all.py --only kube_bench --repeats N``.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import _common

ROOT = Path(__file__).resolve().parents[1]
KUBE_TESTS = ROOT / "tests" / "kube"
OUT = ROOT / "bench" / "out" / "kube_bench"
POLL_S = 0.05
CLUSTER_TIMEOUT_S = 180.0
STEP_TIMEOUT_S = 120.0
CRD_NAMES = ("jetclusters.jetlet.io", "jetjobs.jetlet.io", "jetjobsnapshots.jetlet.io")
JETLET = "/apis/jetlet.io/v1alpha1/namespaces/{ns}/{kind}/{name}"
MEMBER_ENV = {"JETLET_HEARTBEAT_INTERVAL_MILLIS": "200", "JETLET_FAILURE_TIMEOUT_MILLIS": "2000"}

KEYS, RATE, WINDOW_MS = 5, 400, 500
WINDOWED = f"""
from jetlet import AggregateOperations
from jetlet.pipeline import Pipeline, Sinks, Sources, WindowDefinition

def pipeline(out):
    p = Pipeline()
    (p.read_from(Sources.test_stream({RATE}, lambda seq: (seq % {KEYS}, seq)))
      .with_timestamps(lambda event: event[1], 0)
      .grouping_key(lambda event: event[0])
      .window(WindowDefinition.tumbling({WINDOW_MS}))
      .aggregate(AggregateOperations.counting())
      .map(lambda r: (r.key, r.end, r.result))
      .write_to(Sinks.files(out)))
    return p
"""


class RoundFailed(Exception):
    """A round's step did not happen within its deadline (the message says which)."""


@dataclasses.dataclass
class Round:
    """One round's times in seconds (None: not reached) and, if it failed, why."""

    pods_ready: float | None = None
    pod_replaced: float | None = None
    statefulset_made: float | None = None
    member_pods_ready: float | None = None
    cluster_ready: float | None = None
    job_running_engine: float | None = None
    job_running_status: float | None = None
    restarted_engine: float | None = None
    restarted_status: float | None = None
    members_back: float | None = None
    error: str = ""


ROWS: tuple[tuple[str, str, str], ...] = (
    # (field, label, the baseline field its ratio is taken against, or "")
    ("pods_ready", "baseline: StatefulSet of 3 Python pods, apply → 3 pods Ready", ""),
    ("statefulset_made", "(a) JetCluster of 3, apply → the operator made its StatefulSet", ""),
    ("member_pods_ready", "(a) JetCluster of 3, apply → 3 member pods Ready", "pods_ready"),
    ("cluster_ready", "(a) JetCluster of 3, apply → condition Ready", "pods_ready"),
    ("job_running_engine", "(b) JetJob apply → engine job RUNNING", "pods_ready"),
    ("job_running_status", "(b) JetJob apply → JetJob status.phase RUNNING", "pods_ready"),
    ("pod_replaced", "baseline: a pod deleted → its replacement Ready", ""),
    ("restarted_engine", "(c) member pod deleted → new execution RUNNING (engine)", "pod_replaced"),
    ("restarted_status", "(c) member pod deleted → JetJob restarts+1, RUNNING", "pod_replaced"),
    ("members_back", "member pod deleted → replacement Ready, JetCluster Ready (3)", "pod_replaced"),
)


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def summary_rows(rounds: Sequence[Round]) -> list[list[str]]:
    """The table: per measurement, median, max and rounds measured, and its median over its baseline's."""
    medians: dict[str, float | None] = {}
    rows = []
    for field, label, baseline in ROWS:
        values = [v for v in (getattr(r, field) for r in rounds) if v is not None]
        medians[field] = statistics.median(values) if values else None
        base = medians.get(baseline) if baseline else None
        mine = medians[field]
        ratio = f"{mine / base:.1f}x" if mine is not None and base else "—"
        rows.append(
            [
                label,
                _seconds(mine),
                _seconds(max(values) if values else None),
                f"{len(values)}/{len(rounds)}",
                ratio,
            ]
        )
    return rows


def format_section(
    rounds: Sequence[Round],
    load: tuple[float, float],
    harness_start_s: float,
    notes: Sequence[str] = (),
) -> str:
    """The Markdown section for RESULTS.md (``run_all`` adds the date, machine, commit and command)."""
    table = _common.markdown_table(
        ["measurement (seconds)", "median", "max", "rounds", "vs baseline (median)"], summary_rows(rounds)
    )
    failures = [f"- round {i + 1} failed: {r.error}" for i, r in enumerate(rounds) if r.error]
    extra = [f"- {note}" for note in notes]
    bullets = "\n".join(failures + extra)
    return (
        "## The operator on the Kubernetes test harness: apply to Ready, to RUNNING, a member lost\n\n"
        f"{len(rounds)} rounds on the harness of `tests/kube` (real etcd, kube-apiserver and "
        "kube-controller-manager v1.36.3 on 127.0.0.1; pods are local processes of the process "
        f"kubelet; the harness started in {harness_start_s:.1f} s). The operator runs under its RBAC-bound "
        "token. Times are from just before the `kubectl` command to the first 50 ms poll that sees the "
        "condition. Members: `cooperativeThreadCount: 1`, heartbeat 200 ms, failure timeout 2 s. The "
        "job: EXACTLY_ONCE tumbling-window count over `Sources.test_stream` (400 items/s, 5 keys), "
        'snapshots every 300 ms. "Running again" (c) is the engine\'s job record with `restarts` above '
        "its value before the deletion, a different `execution_id` and status RUNNING; the victim is a "
        "member that is not the coordinator, deleted once the job has a snapshot (SIGTERM: a graceful "
        "leave). The baselines are a plain StatefulSet of 3 Python HTTP servers with a readiness probe, "
        "measured in the same rounds; (b) has no baseline of its own and is set against the pod start.\n\n"
        + table
        + f"\nOne-minute load average {load[0]:.1f} before and {load[1]:.1f} after, on 2 cores that other "
        "sessions were using for their own tests at the same time: the absolute times carry that noise, "
        "the ratios less so.\n" + (f"\n{bullets}\n" if bullets else "")
    )


def _kube_modules() -> Any:
    """The harness package (``tests/kube/kubeharness``), or BenchSkipped with why it cannot run."""
    sys.path.insert(0, str(KUBE_TESTS))
    import kubeharness

    missing = kubeharness.controlplane.missing_binaries(kubeharness.default_bin_dir())
    if missing:
        raise _common.BenchSkipped(
            f"the Kubernetes harness binaries are missing in {kubeharness.default_bin_dir()} "
            f"({', '.join(missing)}): build them with `make kube-bins`"
        )
    return kubeharness


def _rbac(kube: Any) -> list[dict[str, Any]]:
    import yaml

    docs = list(yaml.safe_load_all((ROOT / "operator" / "deploy" / "rbac.yaml").read_text()))
    role = next(d for d in docs if d["kind"] == "ClusterRole")
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "jetlet-operator"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": role["metadata"]["name"],
        },
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": kube.user_name("operator")}
        ],
    }
    return [role, binding]


def _start_operator(kube: Any, namespace: str, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "KUBECONFIG": kube.kubeconfig("operator"),
        "JETLET_OPERATOR_NAMESPACES": namespace,
        "JETLET_OPERATOR_METRICS_PORT": "0",
        "JETLET_OPERATOR_RESYNC_SECONDS": "5",
        "JETLET_OPERATOR_CANCEL_TIMEOUT_SECONDS": "15",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "jetlet_operator"],
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(5)


def _jet_cluster() -> dict[str, Any]:
    return {
        "apiVersion": "jetlet.io/v1alpha1",
        "kind": "JetCluster",
        "metadata": {"name": "jet"},
        "spec": {
            "size": 3,
            "image": "jetlet:dev",
            "cooperativeThreadCount": 1,
            "scaleUpDelayMillis": 1000,
            "env": [{"name": k, "value": v} for k, v in MEMBER_ENV.items()],
        },
    }


def _jet_job(out: Path) -> dict[str, Any]:
    return {
        "apiVersion": "jetlet.io/v1alpha1",
        "kind": "JetJob",
        "metadata": {"name": "windowed"},
        "spec": {
            "clusterRef": "jet",
            "processingGuarantee": "EXACTLY_ONCE",
            "snapshotIntervalMillis": 300,
            "pipeline": {"inline": WINDOWED, "args": {"out": str(out)}},
        },
    }


def _first_times(start: float, conditions: dict[str, Callable[[], bool]], timeout: float) -> dict[str, float]:
    """Poll every condition not yet seen true until all are; seconds since ``start`` for each.

    Raises RoundFailed naming those not seen within ``timeout``. A condition that raises counts as false.
    """
    seen: dict[str, float] = {}
    while True:
        for name, condition in conditions.items():
            if name in seen:
                continue
            try:
                holds = condition()
            except Exception:
                holds = False
            if holds:
                seen[name] = time.perf_counter() - start
        if len(seen) == len(conditions):
            return seen
        if time.perf_counter() - start > timeout:
            missing = sorted(set(conditions) - set(seen))
            raise RoundFailed(f"not within {timeout:.0f} s: {', '.join(missing)} (seen: {seen})")
        time.sleep(POLL_S)


class _Round:
    """One round on the harness (see the module doc); fills a :class:`Round`."""

    def __init__(self, kube: Any, harness: Any, namespace: str, workdir: Path, index: int) -> None:
        self.kube, self.harness, self.ns, self.index = kube, harness, namespace, index
        self.api = kube.api()
        self.workdir = workdir
        self.result = Round()

    def _get(self, kind: str, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self.api.get(JETLET.format(ns=self.ns, kind=kind, name=name))
        return found

    def _pods(self, selector: str) -> list[dict[str, Any]]:
        pods: list[dict[str, Any]] = self.kube.pods(self.ns, selector)
        return pods

    def _ready_pods(self, selector: str, count: int) -> bool:
        pods = [p for p in self._pods(selector) if not p["metadata"].get("deletionTimestamp")]
        return len(pods) == count and all(self.harness.is_ready(p) for p in pods)

    def _replaced(self, name: str, old_uid: str) -> bool:
        pod = self.api.get_or_none(f"/api/v1/namespaces/{self.ns}/pods/{name}")
        return bool(pod and pod["metadata"]["uid"] != old_uid and self.harness.is_ready(pod))

    def baseline(self) -> None:
        from manifests import headless_service, web_statefulset

        start = time.perf_counter()
        self.kube.apply(headless_service(), web_statefulset(replicas=3, policy="Parallel"), namespace=self.ns)
        times = _first_times(start, {"ready": lambda: self._ready_pods("app=web", 3)}, STEP_TIMEOUT_S)
        self.result.pods_ready = times["ready"]
        old_uid = self.api.get(f"/api/v1/namespaces/{self.ns}/pods/web-1")["metadata"]["uid"]
        start = time.perf_counter()
        self.kube.kubectl("delete", "pod", "web-1", "--wait=false", namespace=self.ns)
        times = _first_times(start, {"replaced": lambda: self._replaced("web-1", old_uid)}, STEP_TIMEOUT_S)
        self.result.pod_replaced = times["replaced"]
        self.kube.kubectl("delete", "statefulset/web", "service/web", "--wait=false", namespace=self.ns)

    def _cluster_ready(self) -> bool:
        status = self._get("jetclusters", "jet").get("status") or {}
        return any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
        )

    def _client(self) -> Any:
        from jetlet import client as client_mod

        secret = self.api.get(f"/api/v1/namespaces/{self.ns}/secrets/jet-secret")
        token = base64.b64decode(secret["data"]["token"]).decode()
        found: list[str] = []

        def coordinator_listed() -> bool:  # the operator asks for the coordinator after Ready
            status = self._get("jetclusters", "jet")["status"]
            found[:] = [m["address"] for m in status["members"] if m["pod"] == status.get("coordinator")]
            return bool(found)

        _first_times(time.perf_counter(), {"the coordinator in the status": coordinator_listed}, 30)
        return client_mod.connect(found[0], token, timeout=3.0)

    def cluster_and_job(self) -> None:
        start = time.perf_counter()
        self.kube.apply(_jet_cluster(), namespace=self.ns)
        statefulset = f"/apis/apps/v1/namespaces/{self.ns}/statefulsets/jet"
        times = _first_times(
            start,
            {
                "statefulset": lambda: self.api.get_or_none(statefulset) is not None,
                "pods": lambda: self._ready_pods("app.kubernetes.io/instance=jet", 3),
                "ready": self._cluster_ready,
            },
            CLUSTER_TIMEOUT_S,
        )
        self.result.statefulset_made = times["statefulset"]
        self.result.member_pods_ready = times["pods"]
        self.result.cluster_ready = times["ready"]
        client = self._client()

        def engine_record() -> dict[str, Any]:
            job = client.get_job("windowed")
            if job is None:
                return {}
            record = job.last_record
            return {
                "status": record.status.value,
                "restarts": record.restarts,
                "execution_id": record.execution_id,
                "snapshot": record.snapshot,
            }

        def job_status() -> dict[str, Any]:
            return self._get("jetjobs", "windowed").get("status") or {}

        out = self.workdir / f"out-{self.index}"
        start = time.perf_counter()
        self.kube.apply(_jet_job(out), namespace=self.ns)
        times = _first_times(
            start,
            {
                "engine": lambda: engine_record().get("status") == "RUNNING",
                "status": lambda: job_status().get("phase") == "RUNNING",
            },
            STEP_TIMEOUT_S,
        )
        self.result.job_running_engine, self.result.job_running_status = times["engine"], times["status"]
        _first_times(time.perf_counter(), {"a snapshot": lambda: bool(engine_record()["snapshot"])}, 60)
        before = engine_record()
        restarts, execution = before["restarts"], before["execution_id"]
        _first_times(
            time.perf_counter(),
            {"the JetJob status caught up": lambda: job_status().get("restarts", 0) == restarts},
            30,
        )
        cluster = self._get("jetclusters", "jet")["status"]
        victim = next(m["pod"] for m in cluster["members"] if m["pod"] != cluster["coordinator"])
        old_uid = self.api.get(f"/api/v1/namespaces/{self.ns}/pods/{victim}")["metadata"]["uid"]

        def restarted_engine() -> bool:
            now = engine_record()
            return bool(
                now["restarts"] > restarts and now["execution_id"] != execution and now["status"] == "RUNNING"
            )

        def restarted_status() -> bool:
            now = job_status()
            return bool(now.get("restarts", 0) > restarts and now.get("phase") == "RUNNING")

        def members_back() -> bool:
            status = self._get("jetclusters", "jet").get("status") or {}
            back = self._replaced(victim, old_uid) and status.get("readyMembers") == 3
            return back and self._cluster_ready()

        start = time.perf_counter()
        self.kube.kubectl("delete", "pod", victim, "--wait=false", namespace=self.ns)
        times = _first_times(
            start,
            {"engine": restarted_engine, "status": restarted_status, "members": members_back},
            STEP_TIMEOUT_S,
        )
        self.result.restarted_engine = times["engine"]
        self.result.restarted_status = times["status"]
        self.result.members_back = times["members"]

    def evidence(self) -> str:
        """What the namespace, the members and the operator showed (for a failed round)."""
        parts = [self.kube.describe(self.ns)]
        for pod in self._pods("app.kubernetes.io/instance=jet"):
            name, ip = pod["metadata"]["name"], pod.get("status", {}).get("podIP")
            ready = "?"
            if ip:
                try:
                    with urllib.request.urlopen(f"http://{ip}:8701/ready", timeout=3) as resp:
                        ready = resp.read().decode()
                except Exception as exc:
                    body = getattr(exc, "read", None)
                    ready = body().decode() if callable(body) else repr(exc)
            log = self.kube.pod_log(self.ns, name)
            parts.append(f"--- {name} {ip} /ready: {ready}\n{log[-8000:]}")
        return "\n".join(parts)

    def save_logs(self) -> None:
        """The member pods' output (latest incarnations) into ``bench/out/kube_bench/`` (raw output)."""
        OUT.mkdir(parents=True, exist_ok=True)
        for pod in self._pods("app.kubernetes.io/instance=jet"):
            name = pod["metadata"]["name"]
            (OUT / f"round-{self.index + 1}-{name}.log").write_text(self.kube.pod_log(self.ns, name))

    def clean(self) -> None:
        self.kube.kubectl(
            *("delete", "jj,jc", "--all", "--wait=true", "--timeout=90s"),
            namespace=self.ns,
            check=False,
            timeout=120,
        )
        self.kube.kubectl(
            "delete", "statefulset,service", "--all", "--wait=false", namespace=self.ns, check=False
        )
        _first_times(time.perf_counter(), {"no pod left": lambda: not self._pods("")}, STEP_TIMEOUT_S)


def _progress(text: str) -> None:
    print(f"[kube_bench] {text}", file=sys.stderr, flush=True)


def measure(repeats: int) -> tuple[list[Round], float, list[str]]:
    """Start the harness and the operator, run ``repeats`` rounds; the rounds, the harness's start time
    and notes (where the failed rounds' evidence is)."""
    harness = _kube_modules()
    sys.path.insert(0, str(KUBE_TESTS))
    workdir = Path(tempfile.mkdtemp(prefix="jetlet-kube-bench-"))
    kube = harness.KubeCluster(workdir)
    rounds: list[Round] = []
    notes: list[str] = []
    start = time.perf_counter()
    kube.start()
    harness_start_s = time.perf_counter() - start
    operator = None
    try:
        kube.kubectl("apply", "-f", str(ROOT / "crds"))
        for name in CRD_NAMES:
            kube.kubectl("wait", "--for=condition=Established", f"crd/{name}", "--timeout=60s")
        namespace = kube.create_namespace("kube-bench")
        kube.apply(*_rbac(kube), namespace=namespace)
        operator = _start_operator(kube, namespace, workdir / "operator.log")
        for index in range(repeats):
            _progress(f"round {index + 1}/{repeats}")
            one = _Round(kube, harness, namespace, workdir, index)
            try:
                one.baseline()
                one.cluster_and_job()
            except Exception as exc:
                one.result.error = f"{type(exc).__name__}: {exc}"[:400]
                OUT.mkdir(parents=True, exist_ok=True)
                path = OUT / f"round-{index + 1}.txt"
                operator_log = (workdir / "operator.log").read_text(errors="replace")[-20000:]
                path.write_text(f"{exc}\n{one.evidence()}\n--- operator:\n{operator_log}\n")
                notes.append(f"the evidence of round {index + 1} is in bench/out/kube_bench/{path.name}")
            rounds.append(one.result)
            _progress(f"  {one.result}")
            try:
                one.save_logs()
                one.clean()
            except Exception as exc:
                notes.append(f"cleaning up after round {index + 1} failed, no more rounds: {exc}"[:400])
                break
    finally:
        if operator is not None:
            _stop(operator)
        kube.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return rounds, harness_start_s, notes


def main(argv: Sequence[str] = ()) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=_common.DEFAULT_REPEATS, help="rounds")
    args = parser.parse_args(list(argv))
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    load_before = os.getloadavg()[0]
    rounds, harness_start_s, notes = measure(args.repeats)
    return format_section(rounds, (load_before, os.getloadavg()[0]), harness_start_s, notes)


if __name__ == "__main__":
    try:
        print(main(sys.argv[1:]))
    except _common.BenchSkipped as skipped:
        print(f"kube_bench skipped: {skipped}")
