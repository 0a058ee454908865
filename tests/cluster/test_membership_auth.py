"""Membership is cluster-internal: a message must be signed with the cluster secret; the token is not enough.

Issue 15 (item 7): a client holding only the REST token kept a fake member
listed by posting made-up membership messages.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from jetlet._cluster import membership_auth
from jetlet.client import Client
from jetlet.local_cluster import local_cluster

SECRET = b"a-cluster-secret-of-some-length"
BODY = b'{"kind": "heartbeat", "from": "m2"}'
NOW_MS = 1_800_000_000_000


def test_a_message_signed_with_the_secret_is_genuine() -> None:
    header = membership_auth.sign(SECRET, BODY, NOW_MS)

    assert membership_auth.verify(SECRET, BODY, header, NOW_MS + 1_000) is None


@pytest.mark.parametrize(
    ("secret", "body", "header", "now_ms", "reason"),
    [
        (b"another-secret-entirely-xx", BODY, None, NOW_MS, "not signed with this cluster's secret"),
        (SECRET, BODY.replace(b"m2", b"m9"), None, NOW_MS, "not signed with this cluster's secret"),
        (SECRET, BODY, None, NOW_MS + membership_auth.WINDOW_MS + 1_000, "61 s from this member's clock"),
        (SECRET, BODY, "", NOW_MS, f"needs the {membership_auth.HEADER} header"),
        (SECRET, BODY, "t=soon,mac=00", NOW_MS, "header is malformed"),
        (SECRET, BODY, "garbage", NOW_MS, "header is malformed"),
    ],
    ids=["wrong secret", "changed body", "played back later", "no header", "bad fields", "no fields"],
)
def test_a_message_that_is_not_genuine_is_refused_with_the_reason(
    secret: bytes, body: bytes, header: str | None, now_ms: int, reason: str
) -> None:
    signed = membership_auth.sign(SECRET, BODY, NOW_MS) if header is None else header

    refused = membership_auth.verify(secret, body, signed, now_ms)

    assert refused is not None and reason in refused
    assert SECRET.decode() not in refused


@pytest.fixture(scope="module")
def cluster() -> Iterator[Client]:
    with local_cluster(2) as client:  # forming at all shows that genuine signatures pass
        yield client


def _post(client: Client, message: dict[str, object], signature: str | None) -> tuple[int, str]:
    request = urllib.request.Request(
        client.base_url + "/membership", data=json.dumps(message).encode(), method="POST"
    )
    request.add_header("Authorization", f"Bearer {client.token}")
    request.add_header("Content-Type", "application/json")
    if signature is not None:
        request.add_header(membership_auth.HEADER, signature)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _fake_member() -> dict[str, object]:
    return {
        "name": "m9",
        "data_address": "127.0.0.1:9",
        "rest_address": "127.0.0.1:9",
        "start_time": int(time.time() * 1000),
        "uuid": "fake-member-uuid",
    }


@pytest.mark.parametrize("signature", [None, "t=1,mac=" + "0" * 64], ids=["unsigned", "forged signature"])
def test_a_client_with_the_token_cannot_add_a_fake_member(cluster: Client, signature: str | None) -> None:
    members_before = [m.name for m in cluster.cluster().members]
    fake = _fake_member()
    spoofs = [
        {"kind": "join", "member": fake},
        {"kind": "members", "list": {"version": 1_000, "members": [fake]}},
        {"kind": "heartbeat", "from": "m9", "uuid": "fake-member-uuid"},
    ]

    answers = [_post(cluster, message, signature) for message in spoofs]

    assert [status for status, _ in answers] == [403, 403, 403]
    assert all("membership message" in text for _, text in answers)
    assert [m.name for m in cluster.cluster().members] == members_before == ["m1", "m2"]


def test_a_refused_signature_is_a_wrong_secret_refusal_and_a_clock_far_off_is_not() -> None:
    refusal = membership_auth.wrong_secret_refusal(
        {"error": membership_auth.NOT_SIGNED, "cluster_size": 3}, "uuid-1"
    )
    assert refusal == {
        "kind": "refused",
        "uuid": "uuid-1",
        "reason": "wrong cluster secret",
        "cluster_size": 3,
    }
    skew = membership_auth.verify(SECRET, BODY, membership_auth.sign(SECRET, BODY, NOW_MS), NOW_MS * 2)
    assert skew is not None and membership_auth.wrong_secret_refusal({"error": skew}, "uuid-1") is None


def test_refusals_are_logged_once_per_sender_address(caplog: pytest.LogCaptureFixture) -> None:
    log = membership_auth.RefusalLog()
    with caplog.at_level("WARNING"):
        for _ in range(50):
            log.note("127.0.0.9", {"kind": "join", "member": {"name": "w"}}, membership_auth.NOT_SIGNED)
        log.note("127.0.0.8", {"kind": "heartbeat", "name": "x"}, membership_auth.NOT_SIGNED)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "member 'w' from 127.0.0.9" in lines[0] and "'x'" in lines[1]
