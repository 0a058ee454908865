"""Given kopf running the operator's handlers on kmock's in-memory Kubernetes API, then the wiring works
end to end: the finalizer is added and removed, the status is patched, Events are posted once.

kmock is a layer for wiring, not for Kubernetes semantics (no label
selectors, no validation, no garbage collection); those are proven on the
real control plane in ``tests/kube/``. Two workarounds make kopf run on it:
every object gets a ``metadata.resourceVersion`` and the bundled resources
are loaded, plus the three custom resources' discovery information.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import kmock as km
import kopf
import pytest
import pytest_asyncio

from jetlet_operator import handlers, kube

JETJOBS = km.resource("jetlet.io/v1alpha1/jetjobs")
EVENTS = km.resource("v1/events")


@kopf.on.login()
def _login(**_: Any) -> kopf.ConnectionInfo:
    return kopf.ConnectionInfo(server=handlers.STATE.login_server, insecure=True, token="kmock")  # type: ignore[attr-defined]


@pytest_asyncio.fixture
async def operator(kmock: km.KubernetesEmulator) -> AsyncIterator[km.KubernetesEmulator]:
    kmock.resources.load_bundled()
    for plural, kind in (
        ("jetclusters", "JetCluster"),
        ("jetjobs", "JetJob"),
        ("jetjobsnapshots", "JetJobSnapshot"),
    ):
        kmock.resources[f"jetlet.io/v1alpha1/{plural}"] = km.ResourceInfo(
            kind=kind,
            namespaced=True,
            verbs={"get", "list", "watch", "patch", "create", "delete"},
            subresources={"status"},
        )
    # kmock has no generateName: every Event kopf posts would be named alike and refused (409) after
    # the first, so Events are answered here and only recorded (kmock[EVENTS] holds the requests)
    kmock["post /api/v1/namespaces/default/events"] << km.Response(status=201, payload={"kind": "Event"})
    handlers.STATE.login_server = str(kmock.url).rstrip("/")  # type: ignore[attr-defined]
    handlers.STATE.api = await kube.KubeApi.connect(str(kmock.url).rstrip("/"))
    stop = asyncio.Event()
    task = asyncio.create_task(
        kopf.operator(standalone=True, clusterwide=True, stop_flag=stop)  # kmock cannot list namespaces
    )
    try:
        yield kmock
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
        if isinstance(handlers.STATE.api, kube.KubeApi):
            await handlers.STATE.api.close()
        handlers.STATE.api = None


def _jetjob(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "jetlet.io/v1alpha1",
        "kind": "JetJob",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "generation": 1,
            "resourceVersion": "1",
        },
        "spec": spec,
    }


async def _until(what: str, condition: Callable[[], bool], timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


def _exists(kmock: km.KubernetesEmulator, name: str) -> bool:
    try:
        return bool(kmock.objects[JETJOBS, "default", name])
    except (KeyError, km.KubernetesError):
        return False


def _reasons(kmock: km.KubernetesEmulator, name: str) -> list[str]:
    found = []
    for request in kmock[EVENTS]:
        body = request.data if isinstance(request.data, dict) else {}
        if body.get("involvedObject", {}).get("name") == name:
            found.append(str(body.get("reason")))
    return found


@pytest.mark.asyncio
async def test_a_jetjob_waits_for_its_cluster_with_a_finalizer_a_status_and_one_event(
    operator: km.KubernetesEmulator,
) -> None:
    kmock = operator
    kmock.objects[JETJOBS, "default", "waits"] = _jetjob(
        "waits", {"clusterRef": "jet", "pipeline": {"module": "a.b:c"}}
    )

    def current() -> dict[str, Any]:
        return dict(kmock.objects[JETJOBS, "default", "waits"])

    await _until(
        "the finalizer", lambda: "jetlet.io/finalizer" in current()["metadata"].get("finalizers", [])
    )
    await _until("the status", lambda: current().get("status", {}).get("phase") == "Pending")
    progressing = next(c for c in current()["status"]["conditions"] if c["type"] == "Progressing")
    assert (
        progressing["reason"] == "ClusterNotReady"
        and "JetCluster jet does not exist" in progressing["message"]
    )
    await _until("the Event", lambda: "WaitingForCluster" in _reasons(kmock, "waits"))
    await asyncio.sleep(0)  # (kopf retries while waiting: the Event is not posted again)
    assert _reasons(kmock, "waits").count("WaitingForCluster") == 1
    # when deleted, then the finalizer cancels nothing (no cluster) and lets it go at once
    async with aiohttp.ClientSession() as session:  # as kubectl delete does: the API marks it deleted
        url = f"{str(kmock.url).rstrip('/')}/apis/jetlet.io/v1alpha1/namespaces/default/jetjobs/waits"
        async with session.delete(url) as answer:
            assert answer.status == 200
    assert current()["metadata"].get("deletionTimestamp")  # held by the finalizer until kopf is done
    await _until("the object is gone", lambda: not _exists(kmock, "waits"))
    await _until("the CancelSkipped Event", lambda: "CancelSkipped" in _reasons(kmock, "waits"))


@pytest.mark.asyncio
async def test_an_invalid_jetjob_is_a_permanent_error_with_a_degraded_condition_naming_the_field(
    operator: km.KubernetesEmulator,
) -> None:
    kmock = operator
    kmock.objects[JETJOBS, "default", "bad"] = _jetjob("bad", {"clusterRef": "jet", "pipeline": {}})

    def status() -> dict[str, Any]:
        found: dict[str, Any] = dict(kmock.objects[JETJOBS, "default", "bad"]).get("status", {})
        return found

    await _until(
        "the Degraded condition", lambda: any(c["type"] == "Degraded" for c in status().get("conditions", []))
    )
    degraded = next(c for c in status()["conditions"] if c["type"] == "Degraded")
    assert degraded["status"] == "True" and degraded["message"].startswith("spec.pipeline:")
    await _until("the Event", lambda: "InvalidSpec" in _reasons(kmock, "bad"))
    assert _reasons(kmock, "bad").count("InvalidSpec") == 1
