"""Given two member processes with Kubernetes discovery and a Kubernetes API (kmock) serving their pods,
then they find each other by listing pods, before either pod is Ready, with no DNS and no ClusterIP.

The members get no ``--members``: the pods listed are their only way to
meet. The API first refuses them (403, as RBAC would): they keep running,
say why in ``/ready`` and log it once each; once the API answers they form
one cluster and become ready.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import kmock as km
import pytest

PODS = km.resource("v1/pods")
DEADLINE_S = 60.0


def _pod(name: str, rest_address: str, **more: Any) -> dict[str, Any]:
    host, _, port = rest_address.rpartition(":")
    return {
        "metadata": {"name": name, "namespace": "jet", "labels": {"app": "jet"}, **more},
        "spec": {"containers": [{"name": "member", "ports": [{"name": "rest", "containerPort": int(port)}]}]},
        "status": {"phase": "Running", "podIP": host, "conditions": [{"type": "Ready", "status": "False"}]},
    }


@pytest.fixture
def workdir(tmp_path: pathlib.Path) -> pathlib.Path:
    for name in ("token", "secret", "kube-token"):
        (tmp_path / name).write_text(secrets.token_urlsafe(16))
    return tmp_path


@pytest.fixture
def spawned() -> Iterator[list[subprocess.Popen[bytes]]]:
    processes: list[subprocess.Popen[bytes]] = []
    yield processes
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _spawn(name: str, workdir: pathlib.Path, api: str) -> subprocess.Popen[bytes]:
    command = [
        sys.executable, "-m", "jetlet.member",
        "--name", name, "--host", "127.0.0.1", "--rest-port", "0", "--data-port", "0",
        "--token-file", str(workdir / "token"), "--secret-file", str(workdir / "secret"),
        "--ready-file", str(workdir / f"{name}.ready"),
        "--heartbeat-interval-millis", "100", "--failure-timeout-millis", "2000",
        "--discovery", "kubernetes", "--kubernetes-api-server", api,
        "--kubernetes-namespace", "jet", "--kubernetes-label-selector", "app=jet",
        "--kubernetes-token-file", str(workdir / "kube-token"),
    ]  # fmt: skip
    with (workdir / f"{name}.log").open("wb") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def _get(address: str, path: str, token: str = "") -> tuple[int, dict[str, Any]]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(f"http://{address}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read())


async def _until(condition: Callable[[], Any], what: str) -> Any:
    """Poll ``condition`` on a worker thread (kmock serves on this loop) until it is truthy, or fail."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        result = await asyncio.to_thread(condition)
        if result:
            return result
        await asyncio.sleep(0.1)
    raise AssertionError(f"not within {DEADLINE_S} s: {what}")


def _refused(address: str) -> tuple[int, dict[str, Any]] | None:
    """``/ready``'s answer once it names a discovery failure; None before."""
    answer = _get(address, "/ready")
    return answer if "discovery fails" in str(answer[1]) else None


def _ready_record(path: pathlib.Path, process: subprocess.Popen[bytes]) -> dict[str, Any] | None:
    if process.poll() is not None:
        raise AssertionError(f"{path.stem} exited: {path.with_suffix('.log').read_text()[-2000:]}")
    return json.loads(path.read_text()) if path.exists() else None


@pytest.mark.asyncio
async def test_two_members_find_each_other_through_the_pods_the_api_lists(
    kmock: km.KubernetesEmulator, workdir: pathlib.Path, spawned: list[subprocess.Popen[bytes]]
) -> None:
    # given: an API that refuses to list pods, as RBAC does without a Role
    forbidden = {"deny": True}

    def refuse() -> None:  # None: kmock serves the pods; a km.Response would stick to the reaction
        if forbidden["deny"]:
            raise km.KubernetesError(status=403, reason="Forbidden", message="pods is forbidden")

    kmock["get /api/v1/namespaces/jet/pods"] << refuse
    token = (workdir / "token").read_text()
    # when: two members start with Kubernetes discovery
    for name in ("m1", "m2"):
        spawned.append(_spawn(name, workdir, str(kmock.url).rstrip("/")))
    records = [
        await _until(lambda n=name, p=process: _ready_record(workdir / f"{n}.ready", p), f"{name} starts")
        for name, process in zip(("m1", "m2"), spawned, strict=True)
    ]
    addresses = [r["rest_address"] for r in records]
    # then: each is alive, not ready, and says why
    for address in addresses:
        status, body = await _until(lambda a=address: _refused(a), "the refusal shows in /ready")
        assert status == 503 and body["missing"]["membership"] == "discovery fails: HTTP 403 Forbidden"
        assert (await asyncio.to_thread(_get, address, "/health"))[0] == 200
    # when: the API serves their pods (not Ready), beside a pod being deleted and one without an IP
    for name, address in zip(("m1", "m2"), addresses, strict=True):
        kmock.objects[PODS, "jet", f"jet-{name}"] = _pod(f"jet-{name}", address)
    kmock.objects[PODS, "jet", "jet-old"] = _pod(
        "jet-old", "127.0.0.1:9", deletionTimestamp="2026-01-01T00:00:00Z"
    )
    kmock.objects[PODS, "jet", "jet-new"] = {**_pod("jet-new", "127.0.0.1:9"), "status": {"phase": "Pending"}}
    forbidden["deny"] = False
    # then: they form one cluster and are ready
    for address in addresses:
        await _until(
            lambda a=address: len(_get(a, "/cluster", token)[1]["members"]) == 2, f"{address} joined"
        )
        await _until(lambda a=address: _get(a, "/ready")[0] == 200, f"{address} is ready")
    views = [(await asyncio.to_thread(_get, a, "/cluster", token))[1] for a in addresses]
    lists = [[m["name"] for m in view["members"]] for view in views]
    assert lists[0] == lists[1] and sorted(lists[0]) == ["m1", "m2"]  # the older started first leads
    # and: every listing asked for the label selector with the service-account token
    kube_token = (workdir / "kube-token").read_text()
    listings = list(kmock[PODS])
    assert listings and all(r.params == {"labelSelector": "app=jet"} for r in listings)
    assert all(r.headers["Authorization"] == f"Bearer {kube_token}" for r in listings)
    # and: the refusal was logged once per member, not at every attempt, and its end at most once (a
    # member that the other joined before its next listing has no reason to list again)
    logs = [(workdir / f"{name}.log").read_text() for name in ("m1", "m2")]
    for log in logs:
        assert log.count("HTTP 403 Forbidden") == 1, log
        assert log.count("listing pods works again") <= 1, log
        assert "Traceback" not in log
    assert any("listing pods works again" in log for log in logs), logs
