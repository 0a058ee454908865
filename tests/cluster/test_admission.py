"""A member with the wrong cluster secret is never admitted: it exits, owns nothing, disturbs nothing.

Issue 16 item 1: started with the right token but another secret, a member
was put in the member list, every grid read failed for as long as it ran,
and both sides logged a warning per handshake retry. Real member processes
on 127.0.0.1.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest
from member_processes import MemberProcesses

from jetlet._cluster import admission, membership
from jetlet._network import handshake
from jetlet.client import Client
from jetlet.testing import wait_until

SECRET = "the-right-cluster-secret"
DEADLINE_S = 60.0


@pytest.fixture
def processes(tmp_path: pathlib.Path) -> Iterator[MemberProcesses]:
    started = MemberProcesses(tmp_path)
    yield started
    started.stop_all()


def _names(client: Client) -> set[str]:
    return {m["name"] for m in client.request("GET", "/cluster")["members"]}


def test_a_member_with_the_wrong_secret_is_not_admitted_and_exits_disturbing_nothing(
    processes: MemberProcesses,
) -> None:
    # given a cluster of two members
    a = processes.start("a", SECRET)
    b = processes.start("b", SECRET, "--members", a.rest_address)
    client = Client(a.rest_address, processes.token)
    wait_until(lambda: _names(client) == {"a", "b"}, "a and b formed a cluster", DEADLINE_S)
    # when a member with the right token and another secret asks to join through b
    w = processes.start("w", "another-cluster-secret", "--members", b.rest_address)
    seen: set[str] = set()

    def exited_while_the_cluster_works() -> bool:
        seen.update(_names(client))
        assert client.get_map("probe") == {}  # every grid read keeps working
        return w.process.poll() is not None

    wait_until(exited_while_the_cluster_works, "the member with the wrong secret exited", DEADLINE_S)
    # then it exited non-zero saying why, and was never in the member list
    assert w.process.returncode == 3, w.log()
    assert "wrong cluster secret" in w.log()
    assert seen == {"a", "b"} and _names(Client(b.rest_address, processes.token)) == {"a", "b"}
    # and the cluster logged it in a line or two, not one per retry
    mentions = [line for m in (a, b) for line in m.log().splitlines() if "'w'" in line or "member w " in line]
    assert 1 <= len(mentions) <= 3, mentions


def test_a_member_with_the_right_secret_is_admitted_after_its_handshake(processes: MemberProcesses) -> None:
    a = processes.start("a", SECRET)
    processes.start("c", SECRET, "--members", a.rest_address)
    client = Client(a.rest_address, processes.token)
    wait_until(lambda: _names(client) == {"a", "c"}, "c joined", DEADLINE_S)
    assert "not admitted" not in a.log()


def _joiner(name: str = "w") -> membership.MemberInfo:
    return membership.MemberInfo(name, "127.0.0.1:5799", "127.0.0.1:8799", 1)


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_admission_dials_once_then_backs_off_and_logs_once_per_change() -> None:
    clock = _Clock()
    gate = admission.Admission(first_delay_s=1.0, max_delay_s=8.0, clock=clock)
    joiner = _joiner()
    assert gate.on_join(joiner, connected=False) is admission.Verdict.DIAL
    assert gate.on_join(joiner, connected=False) is admission.Verdict.WAIT  # a dial is under way
    wrong = handshake.HandshakeError("the peer refused the handshake: authentication failed: ... wrong proof")
    first = gate.on_dialed(joiner, wrong)
    assert not first.admit and first.refusal == admission.WRONG_SECRET and first.log is not None
    delays = []
    for _ in range(5):
        start = clock.now
        while gate.on_join(joiner, connected=False) is admission.Verdict.WAIT:
            clock.now += 0.25
        delays.append(clock.now - start)
        again = gate.on_dialed(joiner, wrong)
        assert again.log is None and again.refusal == admission.WRONG_SECRET  # same state: no new line
    assert delays == [1.0, 2.0, 4.0, 8.0, 8.0]
    unreachable = gate.on_dialed(joiner, ConnectionRefusedError("refused"))
    assert unreachable.refusal is None and unreachable.log is not None  # another state: one line
    assert gate.on_join(joiner, connected=True) is admission.Verdict.ADMIT


def test_admission_admits_after_a_successful_dial_and_says_so_after_failures() -> None:
    gate = admission.Admission(clock=_Clock())
    joiner = _joiner()
    assert gate.on_join(joiner, connected=False) is admission.Verdict.DIAL
    assert gate.on_dialed(joiner, None) == admission.DialOutcome(admit=True)
    assert gate.on_join(joiner, connected=False) is admission.Verdict.DIAL  # forgotten once admitted
    gate.on_dialed(joiner, OSError("unreachable"))
    assert gate.on_dialed(joiner, None).log is not None


def test_a_refusal_applies_only_to_this_lone_incarnation_from_a_real_cluster() -> None:
    joiner = _joiner("b3\nFORGED line")
    message = admission.refusal_message(joiner, admission.WRONG_SECRET, 3)
    assert admission.refusal_applies(message, joiner.uuid, alone=True) == (
        "wrong cluster secret (refused by a cluster of 3 members)"
    )
    assert admission.refusal_applies(message, "another-uuid", alone=True) is None
    assert admission.refusal_applies(message, joiner.uuid, alone=False) is None
    assert admission.refusal_applies({**message, "cluster_size": 1}, joiner.uuid, alone=True) is None
    forged = {**message, "reason": "x\nFORGED"}
    assert "\n" not in (admission.refusal_applies(forged, joiner.uuid, alone=True) or "")
