"""The process kubelet: runs the pods bound to its Node as local processes, each on its own 127.x.y.z.

It does what the control plane needs from a kubelet and no more (docs/testing-on-kubernetes.md):

* registers a Ready ``Node`` and binds every unscheduled pod to it (there is no scheduler);
* gives each pod the next address of its own ``127.<b>.0.0/16`` (``b`` chosen per kubelet);
* runs each container's ``command``/``args``, the image standing for a local command line
  (:class:`Image`), with the pod's ``env`` resolved, in the pod's directory;
* materialises ConfigMap, Secret, emptyDir, projected (service-account token, ConfigMap,
  downward API), downward API, hostPath and PVC volumes under the pod's directory. A mount path
  cannot be mounted without a container: ``<pod dir>/root/<mountPath>`` is a symlink to the volume,
  ``KUBELET_POD_ROOT`` names ``<pod dir>/root`` and every mount path found in the command, the
  args or an env value is rewritten to where it is;
* reports status: ``Running`` with the pod's IP, ``Ready`` driven by the readiness probe
  (httpGet, tcpSocket or exec), then ``Succeeded``/``Failed`` with the exit codes when the
  processes end (whatever the restart policy: the StatefulSet controller replaces the pod);
* on deletion: SIGTERM to each container's process group, SIGKILL after the grace period, then
  finishes the delete; the pod's log files stay for the test to read.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import fcntl
import json
import logging
import os
import random
import re
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from . import procs
from .client import JSON, ApiError, AsyncKubeApi
from .controlplane import write_kubeconfig

log = logging.getLogger("process-kubelet")

SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
SYSTEM_PATH = ["/usr/local/bin", "/usr/bin", "/bin"]


@dataclass
class Image:
    """What an image name stands for: its ENTRYPOINT and CMD, directories put first on PATH, and env.

    As in a container, a container's ``command`` replaces ``entrypoint`` and its ``args`` replace
    ``cmd``; a bare program name is looked up on the PATH the image gives.
    """

    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    path: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)


class ConfigError(Exception):
    """The pod cannot start yet (a missing ConfigMap or Secret, an unknown image): retried."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class ContainerRuntime:
    name: str
    spec: JSON
    log_path: Path
    process: asyncio.subprocess.Process | None = None
    started_at: str = ""
    finished_at: str = ""
    exit_code: int | None = None
    ready: bool = False
    waiting: tuple[str, str] | None = ("ContainerCreating", "")


@dataclass
class PodRuntime:
    uid: str
    namespace: str
    name: str
    pod: JSON
    directory: Path
    ip: str = ""
    containers: dict[str, ContainerRuntime] = field(default_factory=dict)
    phase: str = "Pending"
    started_at: str = ""
    deleting: bool = False
    done: bool = False
    message: str = ""
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    launched: asyncio.Event = field(default_factory=asyncio.Event)
    transitions: dict[str, tuple[str, str]] = field(default_factory=dict)
    report_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def root(self) -> Path:
        return self.directory / "root"


class ProcessKubelet:
    """Start with :meth:`start` (it runs its own event loop in a thread), stop with :meth:`stop`."""

    def __init__(
        self,
        api_url: str,
        token: str,
        ca_file: str,
        workdir: Path,
        images: dict[str, Image],
        node_name: str = "process-kubelet",
        max_probe_period: float = 1.0,
        max_grace_period: float = 30.0,
    ) -> None:
        self.api_url = api_url
        self.token = token
        self.ca_file = ca_file
        self.workdir = Path(workdir)
        self.images = images
        self.node_name = node_name
        self.max_probe_period = max_probe_period
        self.max_grace_period = max_grace_period
        self.api_host, _, port = api_url.removeprefix("https://").partition(":")
        self.api_port = int(port or 443)
        self.subnet, self._subnet_lock = _claim_subnet()
        self._next_ip = 1
        self.pods: dict[str, PodRuntime] = {}  # by uid
        self.latest: dict[tuple[str, str], PodRuntime] = {}  # (namespace, name) -> last incarnation
        self._bound: set[str] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopping: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._api: AsyncKubeApi | None = None
        self._probe_session: aiohttp.ClientSession | None = None
        self._last_env: dict[tuple[str, str], dict[str, str]] = {}

    # ------------------------------------------------------------------ thread API

    def start(self, timeout: float = 30.0) -> None:
        procs.install_exit_guards()
        (self.workdir / "pods").mkdir(parents=True, exist_ok=True)
        self._thread = threading.Thread(target=self._run_thread, name="process-kubelet", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError("process kubelet did not register its node")
        if self._error is not None:
            raise RuntimeError("process kubelet failed to start") from self._error

    def stop(self, timeout: float = 30.0) -> None:
        """Kill every pod's processes and end the event loop (the pods stay in the API)."""
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None and thread.is_alive() and self._stopping is not None:
            loop.call_soon_threadsafe(self._stopping.set)
            thread.join(timeout)
        for rt in list(self.pods.values()):
            for c in rt.containers.values():
                if c.process is not None:
                    procs.signal_group(c.process.pid, signal.SIGKILL)
                    procs.unregister(c.process.pid)
        if self._subnet_lock >= 0:
            os.close(self._subnet_lock)  # releases the flock
            self._subnet_lock = -1

    def pod_runtime(self, namespace: str, name: str) -> PodRuntime | None:
        return self.latest.get((namespace, name))

    def pod_log(self, namespace: str, name: str, container: str | None = None) -> str:
        """The output so far of a pod's container (the first if not named), of its latest incarnation;
        ``""`` until the pod has started here (so a test can wait for a line)."""
        rt = self.latest.get((namespace, name))
        containers = list(rt.containers.values()) if rt is not None else []
        chosen = [c for c in containers if container in (None, c.name)]
        if not chosen:
            return ""
        path = chosen[0].log_path
        return path.read_text(errors="replace") if path.exists() else ""

    def pod_pid(self, namespace: str, name: str, container: str | None = None) -> int | None:
        rt = self.latest.get((namespace, name))
        containers = list(rt.containers.values()) if rt is not None else []
        chosen = [c for c in containers if container in (None, c.name)]
        if not chosen:
            return None
        c = chosen[0]
        return c.process.pid if c.process is not None and c.exit_code is None else None

    def _run_thread(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main())
        except BaseException as err:
            self._error = err
            log.exception("process kubelet crashed")
        finally:
            self._ready.set()
            loop.close()

    # ------------------------------------------------------------------ main loop

    async def _main(self) -> None:
        self._stopping = asyncio.Event()
        async with AsyncKubeApi(self.api_url, self.token, self.ca_file) as api:
            self._api = api
            self._probe_session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False))
            try:
                await self._register_node()
                self._ready.set()
                watcher = asyncio.create_task(self._watch_pods())
                await self._stopping.wait()
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
                await self._kill_all()
            finally:
                await self._probe_session.close()

    @property
    def api(self) -> AsyncKubeApi:
        assert self._api is not None
        return self._api

    async def _register_node(self) -> None:
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.node_name,
                "labels": {"kubernetes.io/hostname": self.node_name, "kubernetes.io/os": "linux"},
            },
        }
        try:
            await self.api.create("/api/v1/nodes", node)
        except ApiError as err:
            if err.status != 409:
                raise
        stamp = now()
        resources = {"cpu": "64", "memory": "256Gi", "pods": "1000", "ephemeral-storage": "100Gi"}
        status = {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "process kubelet is posting ready status",
                    "lastHeartbeatTime": stamp,
                    "lastTransitionTime": stamp,
                }
            ],
            "addresses": [
                {"type": "InternalIP", "address": "127.0.0.1"},
                {"type": "Hostname", "address": self.node_name},
            ],
            "capacity": resources,
            "allocatable": resources,
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": "process-kubelet",
                "containerRuntimeVersion": "process://",
                "osImage": "",
                "kernelVersion": "",
                "kubeProxyVersion": "",
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
            },
        }
        await self.api.patch(f"/api/v1/nodes/{self.node_name}/status", {"status": status})

    async def _watch_pods(self) -> None:
        while True:
            try:
                listing = await self.api.get("/api/v1/pods")
                seen = set()
                for pod in listing["items"]:
                    seen.add(pod["metadata"]["uid"])
                    self._reconcile(pod)
                for uid, rt in list(self.pods.items()):
                    if uid not in seen and not rt.done:
                        self._forget(rt)
                rv = listing["metadata"]["resourceVersion"]
                async for event in self.api.watch("/api/v1/pods", rv, timeout_seconds=30):
                    kind, obj = event.get("type"), event.get("object", {})
                    if kind in ("ADDED", "MODIFIED"):
                        self._reconcile(obj)
                    elif kind == "DELETED":
                        gone = self.pods.get(obj["metadata"]["uid"])
                        if gone is not None and not gone.done:
                            self._forget(gone)
                    elif kind == "ERROR":
                        break  # e.g. 410 Gone: list again
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("pod watch failed; listing again")
                await asyncio.sleep(0.5)

    def _reconcile(self, pod: JSON) -> None:
        meta, spec = pod["metadata"], pod.get("spec", {})
        uid = meta["uid"]
        node = spec.get("nodeName", "")
        phase = pod.get("status", {}).get("phase", "Pending")
        if not node:
            if meta.get("deletionTimestamp") or uid in self._bound:
                return
            if spec.get("schedulerName", "default-scheduler") != "default-scheduler":
                return
            self._bound.add(uid)
            self._spawn(self._bind(meta["namespace"], meta["name"], uid))
            return
        if node != self.node_name:
            return
        rt = self.pods.get(uid)
        if meta.get("deletionTimestamp"):
            if rt is None:
                self._spawn(self._finish_delete(meta["namespace"], meta["name"], uid))
            elif not rt.deleting:
                rt.deleting = True
                rt.pod = pod
                grace = meta.get("deletionGracePeriodSeconds")
                self._spawn(self._terminate(rt, float(30 if grace is None else grace)))
            return
        if rt is None and phase not in ("Succeeded", "Failed"):
            rt = PodRuntime(
                uid=uid,
                namespace=meta["namespace"],
                name=meta["name"],
                pod=pod,
                directory=self.workdir / "pods" / meta["namespace"] / f"{meta['name']}-{uid[:8]}",
            )
            self.pods[uid] = rt
            self.latest[(rt.namespace, rt.name)] = rt
            rt.tasks.append(self._spawn(self._run_pod(rt)))
        elif rt is not None:
            rt.pod = pod

    def _spawn(self, coro: Any) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)
        task.add_done_callback(_log_task_error)
        return task

    async def _bind(self, namespace: str, name: str, uid: str) -> None:
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": self.node_name},
        }
        try:
            await self.api.create(f"/api/v1/namespaces/{namespace}/pods/{name}/binding", binding)
        except ApiError as err:
            if err.status not in (404, 409, 422):
                self._bound.discard(uid)
                raise

    # ------------------------------------------------------------------ one pod

    def _allocate_ip(self) -> str:
        n = self._next_ip
        self._next_ip += 1
        return f"127.{self.subnet}.{n // 254}.{n % 254 + 1}"

    async def _run_pod(self, rt: PodRuntime) -> None:
        rt.ip = self._allocate_ip()
        rt.started_at = now()
        spec = rt.pod["spec"]
        for c in spec.get("containers", []):
            rt.containers[c["name"]] = ContainerRuntime(
                c["name"], c, rt.directory / "logs" / f"{c['name']}.log"
            )
        (rt.directory / "logs").mkdir(parents=True, exist_ok=True)
        try:
            while True:  # until the pod can start (its ConfigMaps and Secrets exist) or is deleted
                if rt.deleting:
                    return
                try:
                    launches = await self._prepare(rt)
                    break
                except Exception as err:
                    reason = err.reason if isinstance(err, ConfigError) else "CreateContainerError"
                    if not isinstance(err, ConfigError):
                        log.warning("pod %s/%s cannot start yet: %s", rt.namespace, rt.name, err)
                    for c in rt.containers.values():
                        c.waiting = (reason, str(err))
                    await self._report(rt)
                    await asyncio.sleep(1.0)
            for c, argv, env in launches:
                if rt.deleting:
                    break
                await self._launch(rt, c, argv, env)
        finally:
            rt.launched.set()
        if rt.deleting:
            return
        rt.phase = "Running"
        await self._report(rt)
        waits = []
        for c in rt.containers.values():
            probe = c.spec.get("readinessProbe")
            if probe:
                rt.tasks.append(self._spawn(self._probe_loop(rt, c, probe)))
            else:
                c.ready = c.exit_code is None
            waits.append(self._wait_container(rt, c))
        await self._report(rt)
        await asyncio.gather(*waits)
        if rt.deleting:
            return
        codes = [c.exit_code for c in rt.containers.values()]
        rt.phase = "Succeeded" if all(code == 0 for code in codes) else "Failed"
        rt.done = True
        await self._report(rt)

    async def _launch(
        self, rt: PodRuntime, c: ContainerRuntime, argv: list[str], env: dict[str, str]
    ) -> None:
        with open(c.log_path, "ab") as out:
            out.write(f"# process-kubelet: {json.dumps(argv)}\n".encode())
            out.flush()
            try:
                c.process = await asyncio.create_subprocess_exec(
                    *procs.guarded_argv(argv),
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=out,
                    stderr=asyncio.subprocess.STDOUT,
                    cwd=str(rt.root),
                    env=env,
                    start_new_session=True,
                )
            except OSError as err:
                out.write(f"# process-kubelet: cannot start: {err}\n".encode())
                c.exit_code, c.finished_at, c.waiting = 128, now(), None
                return
        procs.register(c.process.pid)
        c.started_at, c.waiting = now(), None

    async def _wait_container(self, rt: PodRuntime, c: ContainerRuntime) -> None:
        if c.process is not None and c.exit_code is None:
            code = await c.process.wait()
            c.exit_code = 128 - code if code < 0 else code
            c.finished_at = now()
            c.ready = False
            procs.signal_group(c.process.pid, signal.SIGKILL)  # what it left behind
            procs.unregister(c.process.pid)
        restart_policy = rt.pod["spec"].get("restartPolicy", "Always")
        if restart_policy != "Never" and not rt.deleting:
            # nothing restarts a container here: the pod ends with its first container
            for other in rt.containers.values():
                if other.process is not None and other.exit_code is None:
                    procs.signal_group(other.process.pid, signal.SIGTERM)
        if not rt.deleting:
            await self._report(rt)

    async def _terminate(self, rt: PodRuntime, grace: float) -> None:
        for task in rt.tasks[1:]:  # the probes; the pod's own task sees rt.deleting
            task.cancel()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(rt.launched.wait(), 30.0)
        running = [c for c in rt.containers.values() if c.process is not None and c.exit_code is None]
        for c in running:
            assert c.process is not None
            procs.signal_group(c.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + min(grace, self.max_grace_period)
        for c in running:
            assert c.process is not None
            try:
                await asyncio.wait_for(c.process.wait(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                procs.signal_group(c.process.pid, signal.SIGKILL)
                await c.process.wait()
            code = c.process.returncode or 0
            c.exit_code = 128 - code if code < 0 else code
            procs.signal_group(c.process.pid, signal.SIGKILL)
            procs.unregister(c.process.pid)
        rt.done = True
        await self._finish_delete(rt.namespace, rt.name, rt.uid)

    def _forget(self, rt: PodRuntime) -> None:
        """The pod is gone from the API (force-deleted): kill what is left."""
        rt.deleting = rt.done = True
        for task in rt.tasks:
            task.cancel()
        for c in rt.containers.values():
            if c.process is not None:
                procs.signal_group(c.process.pid, signal.SIGKILL)
                procs.unregister(c.process.pid)

    async def _finish_delete(self, namespace: str, name: str, uid: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": uid},
        }
        with contextlib.suppress(ApiError):
            await _retrying(lambda: self.api.delete(f"/api/v1/namespaces/{namespace}/pods/{name}", body))

    async def _kill_all(self) -> None:
        for rt in list(self.pods.values()):
            for task in rt.tasks:
                task.cancel()
            for c in rt.containers.values():
                if c.process is not None and c.exit_code is None:
                    procs.signal_group(c.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 3.0
        for rt in list(self.pods.values()):
            for c in rt.containers.values():
                if c.process is None:
                    continue
                if c.exit_code is None:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(c.process.wait(), max(0.0, deadline - time.monotonic()))
                procs.signal_group(c.process.pid, signal.SIGKILL)
                procs.unregister(c.process.pid)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(c.process.wait(), 5.0)

    # ------------------------------------------------------------------ status

    def _condition(self, rt: PodRuntime, kind: str, value: bool) -> JSON:
        status = "True" if value else "False"
        previous = rt.transitions.get(kind)
        if previous is None or previous[0] != status:
            rt.transitions[kind] = (status, now())
        return {"type": kind, "status": status, "lastTransitionTime": rt.transitions[kind][1]}

    def _container_status(self, c: ContainerRuntime) -> JSON:
        state: JSON
        if c.exit_code is not None:
            state = {
                "terminated": {
                    "exitCode": c.exit_code,
                    "reason": "Completed" if c.exit_code == 0 else "Error",
                    "startedAt": c.started_at or None,
                    "finishedAt": c.finished_at or now(),
                }
            }
        elif c.process is not None:
            state = {"running": {"startedAt": c.started_at}}
        else:
            reason, message = c.waiting or ("ContainerCreating", "")
            state = {"waiting": {"reason": reason, "message": message}}
        return {
            "name": c.name,
            "image": c.spec.get("image", ""),
            "imageID": "",
            "containerID": f"process://{c.process.pid}" if c.process is not None else "",
            "ready": c.ready,
            "started": c.process is not None and c.exit_code is None,
            "restartCount": 0,
            "state": state,
        }

    async def _report(self, rt: PodRuntime) -> None:
        async with rt.report_lock:
            if rt.deleting and rt.phase != "Pending":
                return
            ready = (
                rt.phase == "Running"
                and bool(rt.containers)
                and all(c.ready and c.exit_code is None for c in rt.containers.values())
            )
            status: JSON = {
                "phase": rt.phase,
                "hostIP": "127.0.0.1",
                "hostIPs": [{"ip": "127.0.0.1"}],
                "startTime": rt.started_at,
                "conditions": [
                    self._condition(rt, "PodScheduled", True),
                    self._condition(rt, "PodReadyToStartContainers", rt.phase != "Pending"),
                    self._condition(rt, "Initialized", True),
                    self._condition(rt, "ContainersReady", ready),
                    self._condition(rt, "Ready", ready),
                ],
                "containerStatuses": [self._container_status(c) for c in rt.containers.values()],
            }
            if rt.ip and rt.phase != "Pending":
                status["podIP"] = rt.ip
                status["podIPs"] = [{"ip": rt.ip}]
            patch = {"metadata": {"uid": rt.uid}, "status": status}
            try:
                await _retrying(
                    lambda: self.api.patch(f"/api/v1/namespaces/{rt.namespace}/pods/{rt.name}/status", patch)
                )
            except ApiError as err:
                if err.status not in (404, 409, 422):
                    raise

    # ------------------------------------------------------------------ readiness

    async def _probe_loop(self, rt: PodRuntime, c: ContainerRuntime, probe: JSON) -> None:
        period = min(float(probe.get("periodSeconds", 10)), self.max_probe_period)
        await asyncio.sleep(min(float(probe.get("initialDelaySeconds", 0)), self.max_probe_period))
        success_needed = int(probe.get("successThreshold", 1))
        failure_needed = int(probe.get("failureThreshold", 3))
        successes = failures = 0
        while c.exit_code is None and not rt.deleting:
            ok = await self._probe_once(rt, c, probe)
            successes, failures = (successes + 1, 0) if ok else (0, failures + 1)
            if not c.ready and successes >= success_needed:
                c.ready = True
                await self._report(rt)
            elif c.ready and failures >= failure_needed:
                c.ready = False
                await self._report(rt)
            await asyncio.sleep(period)

    async def _probe_once(self, rt: PodRuntime, c: ContainerRuntime, probe: JSON) -> bool:
        timeout = float(probe.get("timeoutSeconds", 1))
        try:
            if "httpGet" in probe:
                spec = probe["httpGet"]
                host = spec.get("host") or rt.ip
                port = _port(spec["port"], c.spec)
                scheme = spec.get("scheme", "HTTP").lower()
                headers = {h["name"]: h["value"] for h in spec.get("httpHeaders", [])}
                url = f"{scheme}://{host}:{port}{spec.get('path', '/')}"
                assert self._probe_session is not None
                async with self._probe_session.get(
                    url, headers=headers, timeout=aiohttp.ClientTimeout(total=timeout)
                ) as resp:
                    return 200 <= resp.status < 400
            if "tcpSocket" in probe:
                spec = probe["tcpSocket"]
                host = spec.get("host") or rt.ip
                _, writer = await asyncio.wait_for(
                    asyncio.open_connection(host, _port(spec["port"], c.spec)), timeout
                )
                writer.close()
                return True
            if "exec" in probe:
                env = dict(os.environ) if c.process is None else self._last_env.get((rt.uid, c.name), {})
                proc = await asyncio.create_subprocess_exec(
                    *probe["exec"]["command"],
                    cwd=str(rt.root),
                    env=env,
                    stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.DEVNULL,
                    start_new_session=True,
                )
                try:
                    return await asyncio.wait_for(proc.wait(), timeout) == 0
                except TimeoutError:
                    procs.signal_group(proc.pid, signal.SIGKILL)
                    await proc.wait()
                    return False
        except (OSError, TimeoutError, aiohttp.ClientError):
            return False
        return False  # grpc probes are not supported

    # ------------------------------------------------------------------ preparing a pod

    async def _prepare(self, rt: PodRuntime) -> list[tuple[ContainerRuntime, list[str], dict[str, str]]]:
        """Volumes, env and argv of every container; ConfigError when something is missing."""
        pod, spec = rt.pod, rt.pod["spec"]
        cache: dict[tuple[str, str], JSON | None] = {}

        async def lookup(kind: str, name: str) -> JSON | None:
            if (kind, name) not in cache:
                try:
                    cache[kind, name] = await self.api.get(f"/api/v1/namespaces/{rt.namespace}/{kind}/{name}")
                except ApiError as err:
                    if err.status != 404:
                        raise
                    cache[kind, name] = None
            return cache[kind, name]

        async def data_of(kind: str, name: str, optional: bool) -> dict[str, bytes] | None:
            obj = await lookup(kind, name)
            if obj is None:
                if optional:
                    return None
                if kind == "configmaps" and name == "kube-root-ca.crt":
                    return {"ca.crt": Path(self.ca_file).read_bytes()}  # not yet published
                raise ConfigError("CreateContainerConfigError", f'{kind[:-1]} "{name}" not found')
            out = {}
            if kind == "secrets":
                for key, value in (obj.get("data") or {}).items():
                    out[key] = base64.b64decode(value)
            else:
                for key, value in (obj.get("data") or {}).items():
                    out[key] = value.encode()
                for key, value in (obj.get("binaryData") or {}).items():
                    out[key] = base64.b64decode(value)
            return out

        shutil.rmtree(rt.directory / "volumes", ignore_errors=True)
        shutil.rmtree(rt.root, ignore_errors=True)
        volumes_dir = rt.directory / "volumes"
        volumes_dir.mkdir(parents=True)
        rt.root.mkdir(parents=True)
        volume_paths: dict[str, Path] = {}
        sa_token = ""
        for volume in spec.get("volumes", []):
            name = volume["name"]
            target = volumes_dir / name
            if "hostPath" in volume:
                volume_paths[name] = Path(volume["hostPath"]["path"])
                continue
            if "persistentVolumeClaim" in volume:
                claim = volume["persistentVolumeClaim"]["claimName"]
                target = self.workdir / "pvc" / rt.namespace / claim
                target.mkdir(parents=True, exist_ok=True)
                volume_paths[name] = target
                continue
            target.mkdir()
            volume_paths[name] = target
            if "emptyDir" in volume:
                continue
            files: dict[str, bytes] = {}
            if "configMap" in volume or "secret" in volume:
                kind = "configmaps" if "configMap" in volume else "secrets"
                source = volume.get("configMap") or volume["secret"]
                obj_name = source.get("name") or source.get("secretName", "")
                data = await data_of(kind, obj_name, bool(source.get("optional")))
                files.update(_project(data or {}, source.get("items")))
            elif "downwardAPI" in volume:
                files.update(_downward(pod, rt.ip, volume["downwardAPI"].get("items", [])))
            elif "projected" in volume:
                for src in volume["projected"].get("sources", []):
                    if "serviceAccountToken" in src:
                        tok = await self._token(rt, src["serviceAccountToken"])
                        sa_token = sa_token or tok
                        files[src["serviceAccountToken"]["path"]] = tok.encode()
                    elif "configMap" in src or "secret" in src:
                        kind = "configmaps" if "configMap" in src else "secrets"
                        source = src.get("configMap") or src["secret"]
                        data = await data_of(kind, source["name"], bool(source.get("optional")))
                        files.update(_project(data or {}, source.get("items")))
                    elif "downwardAPI" in src:
                        files.update(_downward(pod, rt.ip, src["downwardAPI"].get("items", [])))
            for rel, content in files.items():
                path = target / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(content)

        kubeconfig = ""
        if sa_token:
            kubeconfig = str(rt.directory / "kubeconfig.json")
            write_kubeconfig(
                Path(kubeconfig), self.api_url, self.ca_file, sa_token, "pod", namespace=rt.namespace
            )
        (rt.directory / "home").mkdir(exist_ok=True)

        launches = []
        for c in rt.containers.values():
            image = self.images.get(c.spec.get("image", ""))
            if image is None:
                raise ConfigError(
                    "ErrImagePull", f"image {c.spec.get('image')!r} is not mapped to a local command"
                )
            mounts: dict[str, Path] = {}
            for mount in c.spec.get("volumeMounts", []):
                source = volume_paths.get(mount["name"])
                if source is None:
                    raise ConfigError("CreateContainerConfigError", f"no volume {mount['name']!r}")
                if mount.get("subPath"):
                    source = source / mount["subPath"]
                link = rt.root / mount["mountPath"].lstrip("/")
                link.parent.mkdir(parents=True, exist_ok=True)
                if not link.is_symlink():
                    link.symlink_to(source)
                mounts[mount["mountPath"].rstrip("/") or "/"] = link
            rewrite = _path_rewriter(mounts)
            env: dict[str, str] = {
                "PATH": ":".join([*image.path, *SYSTEM_PATH]),
                "HOME": str(rt.directory / "home"),
                "LANG": "C.UTF-8",
                "HOSTNAME": rt.name,
                "KUBERNETES_SERVICE_HOST": self.api_host,
                "KUBERNETES_SERVICE_PORT": str(self.api_port),
                "KUBELET_POD_ROOT": str(rt.root),
                "KUBELET_POD_IP": rt.ip,
            }
            if kubeconfig:
                env["KUBECONFIG"] = kubeconfig
            env.update(image.env)
            await self._resolve_env(rt, c.spec, env, data_of, rewrite)
            command = [_expand(arg, env) for arg in c.spec.get("command") or []]
            args = [_expand(arg, env) for arg in c.spec.get("args") or []]
            argv = (command or list(image.entrypoint)) + (args or ([] if command else list(image.cmd)))
            argv = [rewrite(arg) for arg in argv]
            if not argv:
                raise ConfigError("CreateContainerConfigError", "no command: neither the pod nor the image")
            if "/" not in argv[0]:
                found = shutil.which(argv[0], path=env["PATH"])
                if found is None:
                    raise ConfigError("CreateContainerError", f"{argv[0]!r} not found on {env['PATH']}")
                argv[0] = found
            self._last_env[(rt.uid, c.name)] = env
            launches.append((c, argv, env))
        return launches

    async def _resolve_env(
        self,
        rt: PodRuntime,
        container: JSON,
        env: dict[str, str],
        data_of: Callable[[str, str, bool], Any],
        rewrite: Callable[[str], str],
    ) -> None:
        for source in container.get("envFrom", []):
            prefix = source.get("prefix", "")
            if "configMapRef" in source or "secretRef" in source:
                kind = "configmaps" if "configMapRef" in source else "secrets"
                ref = source.get("configMapRef") or source["secretRef"]
                data = await data_of(kind, ref["name"], bool(ref.get("optional")))
                for key, value in (data or {}).items():
                    env[prefix + key] = value.decode(errors="replace")
        for var in container.get("env", []):
            name = var["name"]
            if "valueFrom" not in var:
                env[name] = rewrite(_expand(var.get("value", ""), env))
                continue
            source = var["valueFrom"]
            if "fieldRef" in source:
                env[name] = _field(rt.pod, rt.ip, source["fieldRef"]["fieldPath"])
            elif "configMapKeyRef" in source or "secretKeyRef" in source:
                kind = "configmaps" if "configMapKeyRef" in source else "secrets"
                ref = source.get("configMapKeyRef") or source["secretKeyRef"]
                data = await data_of(kind, ref["name"], bool(ref.get("optional")))
                if data is None or ref["key"] not in data:
                    if ref.get("optional"):
                        continue
                    raise ConfigError(
                        "CreateContainerConfigError", f"key {ref['key']!r} not in {kind[:-1]} {ref['name']!r}"
                    )
                env[name] = data[ref["key"]].decode(errors="replace")
            elif "resourceFieldRef" in source:
                env[name] = "0"

    async def _token(self, rt: PodRuntime, source: JSON) -> str:
        account = rt.pod["spec"].get("serviceAccountName") or "default"
        spec: JSON = {
            "expirationSeconds": int(source.get("expirationSeconds", 3607)),
            "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": rt.name, "uid": rt.uid},
        }
        if source.get("audience"):
            spec["audiences"] = [source["audience"]]
        request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
        path = f"/api/v1/namespaces/{rt.namespace}/serviceaccounts/{account}/token"
        try:
            answer = await self.api.create(path, request)
        except ApiError as err:
            if err.status == 404:
                raise ConfigError(
                    "CreateContainerConfigError", f"service account {account!r} not found"
                ) from err
            raise
        return str(answer["status"]["token"])


# ---------------------------------------------------------------------- helpers


def _claim_subnet() -> tuple[int, int]:
    """A second octet no other harness on this machine uses, held by an flock until this process ends."""
    directory = Path(tempfile.gettempdir()) / "jetlet-kube-subnets"
    directory.mkdir(exist_ok=True)
    candidates = list(range(100, 251))
    random.shuffle(candidates)
    for octet in candidates:
        fd = os.open(directory / f"{octet}.lock", os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        return octet, fd
    raise RuntimeError("no free 127.x.0.0/16 for pod addresses")


async def _retrying(call: Callable[[], Awaitable[Any]], attempts: int = 10) -> Any:
    """``await call()``, again after a network error or a timeout, ``attempts`` times at most."""
    for attempt in range(attempts):
        try:
            return await call()
        except (aiohttp.ClientError, TimeoutError) as err:
            if attempt == attempts - 1:
                raise
            log.warning("API call failed (%s); retrying", err)
            await asyncio.sleep(0.5)
    return None


def _log_task_error(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("process kubelet task failed", exc_info=task.exception())


def _port(port: Any, container: JSON) -> int:
    if isinstance(port, int) or str(port).isdigit():
        return int(port)
    for p in container.get("ports", []):
        if p.get("name") == port:
            return int(p["containerPort"])
    raise ValueError(f"no container port named {port!r}")


_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def _expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion: a defined variable is replaced, ``$$`` is a ``$``."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))

    return _VAR.sub(replace, text)


def _path_rewriter(mounts: dict[str, Path]) -> Callable[[str], str]:
    """Rewrites each mount path in a string (at its start or after ``=``/``:``) to where it is."""
    if not mounts:
        return lambda text: text
    ordered = sorted(mounts, key=len, reverse=True)
    pattern = re.compile(
        r"(?:(?<=^)|(?<=[=:,\s]))(" + "|".join(re.escape(m) for m in ordered) + r")(?=/|$|[:,\s])"
    )
    return lambda text: pattern.sub(lambda m: str(mounts[m.group(1)]), text)


def _project(data: dict[str, bytes], items: list[JSON] | None) -> dict[str, bytes]:
    if not items:
        return dict(data)
    return {item["path"]: data[item["key"]] for item in items if item["key"] in data}


def _field(pod: JSON, ip: str, path: str) -> str:
    meta, spec = pod["metadata"], pod["spec"]
    simple = {
        "metadata.name": meta["name"],
        "metadata.namespace": meta["namespace"],
        "metadata.uid": meta["uid"],
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.podIP": ip,
        "status.podIPs": ip,
        "status.hostIP": "127.0.0.1",
        "status.hostIPs": "127.0.0.1",
    }
    if path in simple:
        return str(simple[path])
    match = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
    if match:
        return str((meta.get(match.group(1)) or {}).get(match.group(2), ""))
    if path in ("metadata.labels", "metadata.annotations"):
        values = meta.get(path.split(".")[1]) or {}
        return "\n".join(f'{k}="{v}"' for k, v in sorted(values.items()))
    raise ConfigError("CreateContainerConfigError", f"unsupported fieldRef {path!r}")


def _downward(pod: JSON, ip: str, items: list[JSON]) -> dict[str, bytes]:
    return {
        item["path"]: _field(pod, ip, item["fieldRef"]["fieldPath"]).encode()
        for item in items
        if "fieldRef" in item
    }
