"""A member whose failure detector dropped every other member takes over only after a delay.

Chaos pause-coordinator seed 44 (a loaded machine): m2 stopped hearing m1 and
m3 and dropped both while they dropped m2; m2, alone, took the job over at once
and ran it from its start beside the cluster's execution, until the job FAILED
(one side deleted the other's temporary files). A lone member now waits
``lone_take_over_delay_s`` (a few heartbeats): if it was the one cut off, its
join is answered ``removed`` meanwhile and it starts over instead; if the others
did die, it takes over late by that much. Deterministic, on the in-memory
cluster (``inmemory.py``) as the coordinator scenarios are.
"""

from __future__ import annotations

import pytest
from inmemory import InMemoryCluster

from jetlet import errors
from jetlet._cluster.control import Operation

SNAPSHOTS = {"processing_guarantee": "EXACTLY_ONCE", "snapshot_interval_millis": 1000}
DELAY_S = 0.3


def _running_on_two(delay_s: float) -> tuple[InMemoryCluster, int, int]:
    cluster = InMemoryCluster(["a", "b"])
    cluster.nodes["b"].coordination.lone_take_over_delay_s = delay_s
    job = cluster.submit(**SNAPSHOTS)
    record = cluster.record(job.id)
    assert record.status == "RUNNING", record
    cluster.advance(1.0)
    return cluster, job.id, len(cluster.nodes["b"].executions.inits)


def test_a_lone_member_that_learns_it_was_removed_within_the_delay_runs_nothing() -> None:
    # given a job running on a and b, and b's failure detector dropping a: b is alone
    cluster, _, inits = _running_on_two(DELAY_S)
    cluster.crash("a")
    assert cluster.nodes["b"].members.is_coordinator()
    # when, within the delay, b's join is answered 'removed' (a goes on without it)
    cluster.advance(DELAY_S / 3)
    cluster.nodes["b"].coordination.removed_from_cluster()
    cluster.advance(3 * DELAY_S)
    # then b never started an execution of the cluster's job, nor keeps the job
    assert len(cluster.nodes["b"].executions.inits) == inits
    assert cluster.nodes["b"].executions.running == {}
    assert cluster.nodes["b"].jobs.all() == []


def test_a_lone_member_whose_others_died_takes_over_after_the_delay() -> None:
    # given a job running on a and b, and a dead: b is alone
    cluster, job_id, inits = _running_on_two(DELAY_S)
    cluster.crash("a")
    # when less than the delay passed, b has not taken over
    cluster.advance(DELAY_S / 2)
    assert len(cluster.nodes["b"].executions.inits) == inits
    # then once it passed, b runs the job on from its records
    cluster.advance(DELAY_S)
    record = cluster.record(job_id, at="b")
    assert record.status == "RUNNING", record
    assert cluster.nodes["b"].executions.inits[-1]["members"] == ["b"]


def test_a_member_removed_from_its_cluster_answers_retry_not_no_such_job_until_it_is_back() -> None:
    # given a job running on a and b, and b told that the cluster removed it (it forgets the
    # coordinator's state and is alone, rejoining): chaos two-kills-backup2 seed 5, where the
    # client asking the removed ex-coordinator got 404 for a running job
    cluster, job_id, _ = _running_on_two(DELAY_S)
    cluster.crash("a")
    cluster.nodes["b"].coordination.removed_from_cluster()
    cluster.settle()
    # when a client asks b about the job, b answers 'retry later' (503), never 'no such job'
    asked = cluster.ask("b", Operation.GET_JOB, key=str(job_id))
    cluster.settle()
    with pytest.raises(errors.ClusterUnavailableError):
        asked.result(0)
    # and once b is in a cluster again, it answers again
    cluster.nodes["b"].coordination.on_members_changed(["c", "b"])
    cluster.settle()
    assert cluster.nodes["b"].coordination.lifecycle.ready


def test_a_protected_job_waits_for_a_majority_and_runs_again_when_members_join() -> None:
    # given a job with split-brain protection on a, b, c, and b and c lost: a alone is a minority
    # (chaos pause-coordinator-sbp seed 20 under load: the job FAILED for good there)
    cluster = InMemoryCluster(["a", "b", "c"])
    job = cluster.submit(split_brain_protection=True, **SNAPSHOTS)
    assert cluster.record(job.id).status == "RUNNING"
    cluster.crash("b")
    cluster.crash("c")
    cluster.advance(1.0)
    # then it does not run, nor fail: it waits, NOT_RUNNING, and says why
    record = cluster.record(job.id)
    assert record.status == "NOT_RUNNING", record
    reasons = [e.reason for e in cluster.events() if e.job_id == job.id and e.status == "NOT_RUNNING"]
    assert any("split-brain protection" in r for r in reasons), reasons
    assert cluster.nodes["a"].executions.running == {}
    # when a member joins (a majority again: 2 of the 3 known), then it runs again
    cluster.join("d")
    cluster.advance(1.0)
    record = cluster.record(job.id)
    assert record.status == "RUNNING", record
    assert cluster.nodes["d"].executions.inits[-1]["members"] == ["a", "d"]
