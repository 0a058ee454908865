"""A local cluster of member processes on loopback: forms, runs a job, survives a kill, leaves nothing."""

from __future__ import annotations

import collections
import os
import signal

import psutil
import pytest

import jetlet
from jetlet import AggregateOperations, Pipeline, Sinks, Sources, member
from jetlet.local_cluster import local_cluster
from jetlet.testing import wait_until

FAST = ["--heartbeat-interval-millis", "100", "--failure-timeout-millis", "1000"]
WORDS = ["to", "be", "or", "not", "to", "be"]


def test_given_three_members_when_used_and_one_killed_then_the_cluster_adapts_and_nothing_is_left() -> None:
    with local_cluster(members=3, member_args=FAST) as client:
        pids = client.pids
        # then: one cluster of three, one coordinator, every partition owned
        view = client.cluster()
        assert len(view.members) == 3 and len(pids) == 3
        assert [m.name for m in view.members if m.is_coordinator] == [view.coordinator] == ["m1"]
        assert sorted(p for ps in view.partitions.values() for p in ps) == list(range(271))
        # when: a job is submitted
        p = Pipeline()
        p.read_from(Sources.items(*WORDS)).grouping_key(str).aggregate(
            AggregateOperations.counting()
        ).write_to(Sinks.map("counts"))
        client.new_job(p, jetlet.JobConfig(name="wc")).join(timeout=30)
        assert client.get_map("counts") == dict(collections.Counter(WORDS))
        # when: a member is killed
        os.kill(pids[2], signal.SIGKILL)
        wait_until(lambda: len(client.cluster().members) == 2, "the dead member is removed", 20)
        assert [m.name for m in client.cluster().members] == ["m1", "m2"]
    # then: no member process is left
    assert not [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]


def test_given_an_error_in_the_body_when_leaving_then_every_member_is_stopped() -> None:
    pids: tuple[int, ...] = ()
    with pytest.raises(RuntimeError, match="boom"), local_cluster(members=2, member_args=FAST) as client:
        pids = client.pids
        raise RuntimeError("boom")
    assert len(pids) == 2
    assert not [pid for pid in pids if psutil.pid_exists(pid)]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--token", "t" * 16], "cluster secret"),
        (["--secret", "s" * 16], "REST token"),
        (["--token", "t" * 16, "--secret", "s" * 16, "--queue-size", "many"], "'queue_size' from flags"),
        (["--token", "t"], "'token' (from --token or JETLET_TOKEN) must be at least 16 characters"),
    ],
)
def test_given_incomplete_settings_when_a_member_starts_then_it_exits_2_naming_the_problem(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert member.main(argv) == 2
    assert message in capsys.readouterr().err
