"""Given member pods in a Kubernetes API (kmock's emulator), when listed, then they become seed addresses.

kmock serves the API in the test's event loop, so the blocking listing runs
on a worker thread (``asyncio.to_thread``), as the member runs it. kmock does
not filter by label selector: the tests check that the selector is sent, and
the real API server's filtering is tested in ``tests/kube/``.
"""

from __future__ import annotations

import asyncio
import logging
import pathlib
import socket
import ssl
from collections.abc import Iterator
from typing import Any

import kmock as km
import pytest
import trustme
from aiohttp import web

from jetlet._cluster import discovery, kube_discovery, settings

PODS = km.resource("v1/pods")


def _pod(name: str, ip: str | None, rest: int | None = 8701, **more: Any) -> dict[str, Any]:
    ports = [{"name": "data", "containerPort": 5701}]
    if rest is not None:
        ports.append({"name": "rest", "containerPort": rest})
    status: dict[str, Any] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]}
    if ip is not None:
        status["podIP"] = ip
    pod: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "jet", "labels": {"app": "jet"}},
        "spec": {"containers": [{"name": "member", "ports": ports}]},
        "status": status,
    }
    for key, value in more.items():
        pod[key] = {**pod.get(key, {}), **value}
    return pod


def _target(api: str = "http://127.0.0.1:1", **more: Any) -> kube_discovery.Target:
    fields: dict[str, Any] = {
        "api_server": api,
        "namespace": "jet",
        "label_selector": "app=jet,tier in (member)",
        "token_file": "",
        "ca_file": "",
        "rest_port": 0,
        "port_name": "rest",
        "default_port": 8701,
    }
    return kube_discovery.Target(**{**fields, **more})


def _settings(**more: Any) -> settings.MemberSettings:
    return settings.MemberSettings(discovery="kubernetes", kubernetes_label_selector="app=jet", **more)


# ------------------------------------------------------------------ pods to addresses (pure)


def test_pods_without_an_ip_being_deleted_or_ended_are_left_out_and_not_ready_ones_kept() -> None:
    pods = [
        _pod("jet-0", "10.0.0.1"),
        _pod("jet-1", None),
        _pod("jet-2", "10.0.0.3", metadata={"deletionTimestamp": "2026-11-23T00:00:00Z"}),
        _pod("jet-3", "10.0.0.4", status={"phase": "Failed"}),
        _pod("jet-4", "10.0.0.5", status={"phase": "Pending"}),
        _pod("jet-5", "fd00::6"),
        _pod("jet-0-again", "10.0.0.1"),
    ]
    assert kube_discovery.pod_addresses(pods, _target()) == (
        "10.0.0.1:8701",
        "10.0.0.5:8701",
        "[fd00::6]:8701",
    )


def test_the_port_is_the_setting_else_the_named_container_port_else_the_members_own() -> None:
    pods = [_pod("a", "10.0.0.1", rest=9001), _pod("b", "10.0.0.2", rest=None)]
    assert kube_discovery.pod_addresses(pods, _target()) == ("10.0.0.1:9001", "10.0.0.2:8701")
    assert kube_discovery.pod_addresses(pods, _target(rest_port=7000)) == ("10.0.0.1:7000", "10.0.0.2:7000")
    assert kube_discovery.pod_addresses(pods, _target(default_port=0)) == ("10.0.0.1:9001",)


# ------------------------------------------------------------------ settings


def test_in_a_pod_the_namespace_and_api_server_come_from_the_service_account_and_the_environment(
    tmp_path: pathlib.Path,
) -> None:
    namespace_file = tmp_path / "namespace"
    namespace_file.write_text("prod\n")
    environ = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    where = kube_discovery.target(_settings(), environ, str(namespace_file))
    assert (where.namespace, where.api_server) == ("prod", "https://10.96.0.1:443")
    assert where.token_file == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert where.ca_file == "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
    assert where.url == "https://10.96.0.1:443/api/v1/namespaces/prod/pods?labelSelector=app%3Djet"
    ipv6 = kube_discovery.target(
        _settings(), {**environ, "KUBERNETES_SERVICE_HOST": "fd00::1"}, str(namespace_file)
    )
    assert ipv6.api_server == "https://[fd00::1]:443"


def test_settings_override_what_the_pod_provides() -> None:
    config = settings.load(
        {"discovery": "kubernetes", "kubernetes_label_selector": "app=x"},
        environ={
            "JETLET_KUBERNETES_NAMESPACE": "staging",
            "JETLET_KUBERNETES_API_SERVER": "http://127.0.0.1:8080",
            "JETLET_KUBERNETES_TOKEN_FILE": "",
            "JETLET_KUBERNETES_REST_PORT": "9000",
        },
    )
    where = kube_discovery.target(
        config, {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    )
    assert (where.namespace, where.api_server, where.token_file, where.rest_port) == (
        "staging",
        "http://127.0.0.1:8080",
        "",
        9000,
    )


def test_outside_a_pod_missing_settings_are_named(tmp_path: pathlib.Path) -> None:
    nowhere = str(tmp_path / "no-namespace")
    with pytest.raises(ValueError, match="'kubernetes_namespace'"):
        kube_discovery.target(_settings(), {}, nowhere)
    with pytest.raises(ValueError, match=r"'kubernetes_api_server'.*KUBERNETES_SERVICE_HOST"):
        kube_discovery.target(_settings(kubernetes_namespace="jet"), {}, nowhere)
    with pytest.raises(ValueError, match="http"):
        kube_discovery.target(_settings(kubernetes_namespace="jet", kubernetes_api_server="k8s:443"), {})


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"discovery": "consul"}, "'discovery' must be 'dns' or 'kubernetes'"),
        ({"discovery": "kubernetes"}, "'kubernetes_label_selector' is needed"),
        ({"kubernetes_rest_port": "70000"}, "'kubernetes_rest_port' must be in"),
    ],
)
def test_bad_discovery_settings_are_refused_naming_them(values: dict[str, str], message: str) -> None:
    with pytest.raises(settings.SettingsError, match=message):
        settings.load(values)


def test_the_members_entries_still_come_first_with_kubernetes_discovery() -> None:
    where = _target()
    pods = kube_discovery.PodDiscovery(where, lambda _: [_pod("a", "10.0.0.1"), _pod("b", "10.9.9.9")])
    found = discovery.Discovery(["10.9.9.9:8701", "10.0.0.0:1"], pods).seeds()
    assert found == ("10.9.9.9:8701", "10.0.0.0:1", "10.0.0.1:8701")


# ------------------------------------------------------------------ failures: logged once per state, backoff


def test_failures_are_logged_once_per_change_of_state_with_backoff_and_no_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    answers: list[Exception | list[dict[str, Any]]] = [
        *[kube_discovery.KubernetesApiError("HTTP 403 Forbidden", "pods is forbidden")] * 5,
        *[kube_discovery.KubernetesApiError("cannot reach http://k", "[Errno 111] Connection refused")] * 9,
        [_pod("a", "10.0.0.1")],
        [_pod("a", "10.0.0.1")],
    ]

    def list_pods(_: kube_discovery.Target) -> list[dict[str, Any]]:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    pods = kube_discovery.PodDiscovery(_target(), list_pods)
    caplog.set_level(logging.INFO, logger="jetlet.discovery")
    delays = []
    results = []
    for _ in range(16):
        results.append(pods.addresses())
        delays.append(pods.next_delay_s())
    assert results == [()] * 14 + [("10.0.0.1:8701",)] * 2
    assert delays[:5] == [4.0, 8.0, 16.0, 30.0, 30.0] and delays[-2:] == [2.0, 2.0]
    messages = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert len(messages) == 3, messages
    assert (
        messages[0][0] == "WARNING"
        and "pods is forbidden" in messages[0][1]
        and "'list' on 'pods'" in messages[0][1]
    )
    assert messages[1][0] == "WARNING" and "Connection refused" in messages[1][1]
    assert messages[2] == (
        "INFO",
        "kubernetes discovery: listing pods works again after 14 failure(s): 1 pod(s) found",
    )
    assert not [r for r in caplog.records if r.exc_info]


# ------------------------------------------------------------------ the HTTP request, against kmock


@pytest.mark.asyncio
async def test_pods_are_listed_in_the_namespace_by_label_selector_with_the_bearer_token(
    kmock: km.KubernetesEmulator, tmp_path: pathlib.Path
) -> None:
    # given: member pods in namespace jet, and a pod of another namespace
    kmock.objects[PODS, "jet", "jet-0"] = _pod("jet-0", "10.0.0.1")
    kmock.objects[PODS, "jet", "jet-1"] = _pod("jet-1", "10.0.0.2", rest=9000)
    kmock.objects[PODS, "other", "x-0"] = {**_pod("x-0", "10.0.1.1"), "metadata": {"name": "x-0"}}
    token = tmp_path / "token"
    token.write_text("sa-token-1\n")
    where = _target(str(kmock.url), token_file=str(token))
    # when
    found = await asyncio.to_thread(kube_discovery.PodDiscovery(where).addresses)
    # then: the namespace's pods, asked for by label selector with the token
    assert found == ("10.0.0.1:8701", "10.0.0.2:9000")
    request = kmock[PODS][-1]
    assert request.params == {"labelSelector": "app=jet,tier in (member)"}
    assert request.headers["Authorization"] == "Bearer sa-token-1"
    # when the token is rotated, then the next listing sends the new one
    token.write_text("sa-token-2")
    await asyncio.to_thread(kube_discovery.list_pods, where)
    assert kmock[PODS][-1].headers["Authorization"] == "Bearer sa-token-2"


@pytest.mark.asyncio
async def test_a_403_from_rbac_and_an_unreachable_api_are_reported_with_their_cause(
    kmock: km.KubernetesEmulator,
) -> None:
    forbidden = {
        "kind": "Status",
        "code": 403,
        "message": 'pods is forbidden: User "system:serviceaccount:jet:default" cannot list resource "pods"',
    }
    kmock["get /api/v1/namespaces/jet/pods"] << km.Response(status=403, payload=forbidden)
    with pytest.raises(kube_discovery.KubernetesApiError) as denied:
        await asyncio.to_thread(kube_discovery.list_pods, _target(str(kmock.url)))
    assert denied.value.state == "HTTP 403 Forbidden"
    assert "cannot list resource" in denied.value.detail
    with pytest.raises(kube_discovery.KubernetesApiError, match="cannot reach") as unreachable:
        await asyncio.to_thread(kube_discovery.list_pods, _target(f"http://127.0.0.1:{_closed_port()}"))
    assert unreachable.value.state.startswith("cannot reach http://127.0.0.1:")


def test_a_missing_token_file_is_a_failure_not_a_crash(tmp_path: pathlib.Path) -> None:
    pods = kube_discovery.PodDiscovery(_target(token_file=str(tmp_path / "none")))
    assert pods.addresses() == ()
    assert pods.state.startswith("cannot read token file")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ------------------------------------------------------------------ HTTPS checked against the CA file


@pytest.fixture
def ca_files(tmp_path: pathlib.Path) -> Iterator[tuple[str, ssl.SSLContext]]:
    ca = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server)
    ca_file = tmp_path / "ca.crt"
    ca.cert_pem.write_to_path(str(ca_file))
    yield str(ca_file), server


@pytest.mark.asyncio
async def test_over_https_the_api_server_is_checked_against_the_ca_file(
    ca_files: tuple[str, ssl.SSLContext],
) -> None:
    ca_file, server_context = ca_files

    async def pods(request: web.Request) -> web.Response:
        return web.json_response({"kind": "PodList", "items": [_pod("jet-0", "10.0.0.1")]})

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/jet/pods", pods)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_context)
    await site.start()
    try:
        port = runner.addresses[0][1]
        where = _target(f"https://127.0.0.1:{port}", ca_file=ca_file)
        assert await asyncio.to_thread(kube_discovery.list_pods, where) == [_pod("jet-0", "10.0.0.1")]
        # and with the system's CAs instead, the server's certificate is refused
        with pytest.raises(kube_discovery.KubernetesApiError, match="CERTIFICATE_VERIFY_FAILED"):
            await asyncio.to_thread(kube_discovery.list_pods, _target(f"https://127.0.0.1:{port}"))
    finally:
        await runner.cleanup()


@pytest.mark.asyncio
async def test_an_api_that_hangs_up_mid_answer_is_a_failure_not_a_crash() -> None:
    async def half_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"it')
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(half_answer, "127.0.0.1", 0)
    async with server:
        port = server.sockets[0].getsockname()[1]
        pods = kube_discovery.PodDiscovery(_target(f"http://127.0.0.1:{port}"))
        assert await asyncio.to_thread(pods.addresses) == ()
        assert pods.state == f"cannot reach http://127.0.0.1:{port}"
