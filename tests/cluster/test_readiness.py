"""Given a member's membership, discovery and partition table, then /ready tells whether it can take work."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from jetlet._cluster import membership, readiness, rest
from jetlet.local_cluster import local_cluster
from jetlet.testing import wait_until

SETTLE_MS = 1000


def _info(name: str, port: int, start: int) -> membership.MemberInfo:
    return membership.MemberInfo(name, f"127.0.0.1:{port}", f"127.0.0.1:{port + 1}", start)


def _lone(seeds: tuple[str, ...] = ()) -> membership.Membership:
    local = _info("b", 20, start=2)
    view = membership.Membership(local, (), 100, SETTLE_MS, now_ms=0)
    view.set_seeds(seeds)
    return view


def _nobody(_: str) -> bool:
    return False


# ------------------------------------------------------------------ the rule (sans-IO)


def test_before_discovery_has_run_the_member_is_not_ready() -> None:
    view, ready = _lone(), readiness.Readiness(SETTLE_MS)
    report = ready.report(view, ("b",), _nobody, 0)
    assert report["ready"] is False and report["coordinator"] is None
    assert report["missing"]["membership"] == "discovery has not run yet"
    assert set(report["missing"]) == {"membership", "coordinator"}


def test_a_member_that_finds_no_one_is_ready_alone_at_once() -> None:
    view, ready = _lone(), readiness.Readiness(SETTLE_MS)
    ready.discovered(view, "", 0)
    report = ready.report(view, ("b",), _nobody, 0)
    assert report == {
        "ready": True,
        "member": "b",
        "coordinator": "b",
        "members": 1,
        "version": 1,
        "missing": {},
    }


def test_a_member_whose_seeds_do_not_admit_it_decides_to_be_alone_after_the_settle_time() -> None:
    view, ready = _lone(("127.0.0.1:31",)), readiness.Readiness(SETTLE_MS)
    ready.discovered(view, "", 100)
    ready.discovered(view, "", 600)
    report = ready.report(view, ("b",), _nobody, 1099)
    assert report["missing"]["membership"] == "asking 127.0.0.1:31 to admit it for 999 ms of 1000 ms"
    assert ready.report(view, ("b",), _nobody, 1100)["ready"] is True
    # and once decided it stays so
    assert ready.report(view, ("b",), _nobody, 1101)["ready"] is True


def test_while_discovery_fails_the_member_waits_and_says_why() -> None:
    view, ready = _lone(), readiness.Readiness(SETTLE_MS)
    for now in (0, 5000, 10000):
        ready.discovered(view, "HTTP 403 Forbidden", now)
    report = ready.report(view, ("b",), _nobody, 20000)
    assert report["missing"]["membership"] == "discovery fails: HTTP 403 Forbidden"
    # when discovery works again and finds no one, then it is ready
    ready.discovered(view, "", 20001)
    assert ready.report(view, ("b",), _nobody, 20001)["ready"] is True


def test_a_joined_member_needs_its_data_connection_to_the_coordinator_and_a_current_table() -> None:
    # given: b joined a's cluster (a is older: the coordinator)
    view, ready = _lone(("127.0.0.1:11",)), readiness.Readiness(SETTLE_MS)
    ready.discovered(view, "", 0)
    joined = membership.MemberList(2, (_info("a", 10, start=1), view.local))
    view.receive({"kind": "members", "list": joined.to_dict()}, 10)
    # then: settled at once, but not ready without a connection to a and a table of both
    report = ready.report(view, ("b",), _nobody, 10)
    assert report["coordinator"] == "a" and report["members"] == 2
    assert report["missing"] == {
        "coordinator": "no data connection to the coordinator a yet",
        "partition_table": "not yet derived from member list version 2",
    }
    assert ready.report(view, ("a", "b"), {"a"}.__contains__, 10)["ready"] is True
    # when a falls silent past the failure timeout and b is alone again, then b is still ready:
    # a cluster of one
    later = 10 + SETTLE_MS + 1
    view.tick(later)
    assert view.is_alone
    assert ready.report(view, ("b",), _nobody, later)["ready"] is True


# ------------------------------------------------------------------ real member processes

FAST = ["--heartbeat-interval-millis", "100", "--failure-timeout-millis", "1000"]


def _get(address: str, path: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://{address}{path}", timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read())


def test_members_of_a_formed_cluster_are_ready_without_a_token() -> None:
    with local_cluster(members=2, member_args=FAST) as client:
        for address, name in zip(client.addresses, ("m1", "m2"), strict=True):
            wait_until(lambda a=address: _get(a, "/ready")[0] == 200, f"{name} is ready", 30)
            status, body = _get(address, "/ready")
            assert (status, body["member"], body["coordinator"], body["members"], body["missing"]) == (
                200,
                name,
                "m1",
                2,
                {},
            )


def test_a_member_whose_seed_never_answers_is_not_ready_until_it_decides_to_be_alone() -> None:
    # given: a member whose only seed is a closed port, deciding after 8 s (long, for a loaded machine)
    args = [
        "--heartbeat-interval-millis",
        "100",
        "--failure-timeout-millis",
        "8000",
        "--members",
        "127.0.0.1:9",
    ]
    with local_cluster(members=1, member_args=args) as client:
        address = client.addresses[0]
        # then: 503 naming what is missing
        status, body = _get(address, "/ready")
        assert status == 503 and body["ready"] is False
        assert set(body["missing"]) == {"membership", "coordinator"}
        # and /health says it is alive all along
        assert _get(address, "/health")[0] == 200
        # then: it decides to be alone, and is ready
        wait_until(lambda: _get(address, "/ready")[0] == 200, "the lone member is ready", 60)
        assert _get(address, "/ready")[1]["coordinator"] == "m1"


def test_openapi_lists_ready_as_public() -> None:
    operation = rest.openapi_document()["paths"]["/ready"]["get"]
    assert "security" not in operation
    assert set(operation["responses"]) == {"200", "503"}
