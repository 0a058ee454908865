"""The end of an exactly-once execution (``jetlet._cluster.job_ending``), on the in-memory cluster.

Once the sinks are granted their final commit the job can no longer run again
exactly: only a failure or a cancellation stops it from then on, whichever
operation asked for the stop before (issue 15, item 5).
"""

from __future__ import annotations

import pytest
from inmemory import InMemoryCluster

from jetlet._cluster import job_ending, snapshot_coordinator
from jetlet._cluster.control import Operation

pytestmark = pytest.mark.timeout(10)

SNAPSHOTS = {"processing_guarantee": "EXACTLY_ONCE", "snapshot_interval_millis": 1000}


def test_a_suspend_waiting_for_a_snapshot_while_the_final_commit_is_granted_lets_the_job_end() -> None:
    cluster = InMemoryCluster(["a", "b", "c"])
    job = cluster.submit(**SNAPSHOTS)
    execution = cluster.record(job.id).execution_id
    cluster.advance(1.0)  # snapshot 1 completes
    cluster.nodes["c"].executions.hung = True  # c's part of snapshot 2 does not come
    cluster.advance(1.0)
    # when a suspend is asked (its terminal snapshot waits for snapshot 2)
    suspended = cluster.ask("a", Operation.SUSPEND_JOB, key=str(job.id))
    cluster.settle()
    # and meanwhile the sinks are granted their final commit
    granted = cluster.nodes["a"].executions.ask_to_end(execution, "final_commit")
    cluster.settle()
    assert granted.result(0) == {"granted": True}
    cluster.nodes["c"].executions.hung = False
    cluster.advance(snapshot_coordinator.RPC_TIMEOUT_S)  # snapshot 2 fails; the terminal one is refused
    # then the job is not suspended (a resume could only repeat output or fail): it ends
    assert cluster.record(job.id).status == "RUNNING"
    cluster.complete_everywhere(execution)
    assert cluster.record(job.id).status == "COMPLETED"
    assert suspended.done()
    assert all(init["execution_id"] == execution for init in cluster.nodes["a"].executions.inits)


def test_a_final_commit_whose_record_is_never_kept_waits_then_fails_the_job_saying_why() -> None:
    cluster = InMemoryCluster(["a", "b"])
    job = cluster.submit(**SNAPSHOTS)
    execution = cluster.record(job.id).execution_id
    cluster.advance(1.0)
    # given the replicated store keeps no record (its partition's replicas are gone, say)
    cluster.store.save_fails = True
    # when a's sinks ask for their final commit: not granted (a coordinator that took over would not
    # know, and run the job on), and each member asks again a moment later
    for _ in range(job_ending.SAVE_ATTEMPTS - 1):
        answer = cluster.nodes["a"].executions.ask_to_end(execution, "final_commit")
        cluster.settle()
        assert answer.result(0) == {"granted": False}
        assert cluster.record(job.id).status == "RUNNING"
    # then after SAVE_ATTEMPTS in a row the job fails, saying why, rather than wait for ever
    cluster.nodes["b"].executions.ask_to_end(execution, "final_commit")
    cluster.settle()
    record = cluster.record(job.id)
    assert record.status == "FAILED" and "record of its final commit could not be kept" in record.failure
