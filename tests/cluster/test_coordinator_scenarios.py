"""The coordinator's job lifecycle, deterministically, on an in-memory cluster (no processes, no sleeps).

Each test is a scenario from Jet's coordinator: a member lost at each phase
of an execution (init, start, running, during a snapshot, during a restart),
the coordinator lost, a member hung, a member joining during a restart. The
real control channel and coordinator parts run on in-memory fakes
(``inmemory.py``); the test decides when frames are delivered and when time
passes, so every run is the same and takes milliseconds.
"""

from __future__ import annotations

import pytest
from inmemory import InMemoryCluster

from jetlet import errors
from jetlet._cluster import durable, job_coordinator, snapshot_coordinator
from jetlet._cluster.control import Operation
from jetlet.records import EventKind

pytestmark = pytest.mark.timeout(10)

SNAPSHOTS = {"processing_guarantee": "EXACTLY_ONCE", "snapshot_interval_millis": 1000}


def running_execution(cluster: InMemoryCluster, job_id: int) -> int:
    record = cluster.record(job_id)
    assert record.status == "RUNNING", record
    return record.execution_id


def test_a_job_runs_on_every_member_and_completes_when_all_are_done() -> None:
    # given three members
    cluster = InMemoryCluster(["a", "b", "c"])
    # when a job is submitted through a member that is not the coordinator
    job = cluster.submit(at="b")
    # then every member initialized the one execution, and the job runs
    execution = running_execution(cluster, job.id)
    assert [len(cluster.nodes[m].executions.inits) for m in "abc"] == [1, 1, 1]
    # when two members finish, it still runs; when the third does, it completes
    cluster.nodes["a"].executions.complete(execution)
    cluster.nodes["b"].executions.complete(execution)
    cluster.settle()
    assert cluster.record(job.id).status == "RUNNING"
    cluster.nodes["c"].executions.complete(execution)
    cluster.settle()
    assert cluster.record(job.id).status == "COMPLETED"
    # and the event feed shows each transition in order
    statuses = [e.status for e in cluster.events() if e.kind is EventKind.JOB_STATUS]
    assert statuses == ["STARTING", "RUNNING", "COMPLETED"]
    # and its offloaded snapshot was forgotten before its record said COMPLETED (a crash between
    # the two must not leave a completed job resumable)
    assert cluster.store.forgotten == [(job.id, "RUNNING")]


def test_a_member_failing_fails_the_job_with_its_traceback_once() -> None:
    cluster = InMemoryCluster(["a", "b"])
    job = cluster.submit()
    execution = running_execution(cluster, job.id)
    # when b's share fails with the user's error
    cluster.nodes["b"].executions.complete(execution, error="Traceback ...\nValueError: bad item 7")
    cluster.settle()
    # then a's share is cancelled and the job fails with b's message and traceback
    record = cluster.record(job.id)
    assert record.status == "FAILED" and not record.cancelled
    assert record.failure == "ValueError: bad item 7 (on member b)"
    assert record.failure_traceback.count("ValueError: bad item 7") == 1
    assert cluster.nodes["a"].executions.running == {}


def test_a_member_lost_during_init_restarts_the_execution_without_it() -> None:
    cluster = InMemoryCluster(["a", "b", "c"])
    cluster.nodes["c"].executions.hung = True  # c never answers init...
    job = cluster.submit()
    assert cluster.record(job.id).status == "STARTING"
    # when c's connection drops
    cluster.kill("c")
    # then a new execution starts on a and b only, and runs
    execution = running_execution(cluster, job.id)
    latest = cluster.nodes["a"].executions.inits[-1]
    assert latest["execution_id"] == execution and latest["members"] == ["a", "b"]


def test_an_init_error_fails_the_job_naming_the_member() -> None:
    cluster = InMemoryCluster(["a", "b"])
    cluster.nodes["b"].executions.fail_init = "no module named 'missing'"
    job = cluster.submit()
    record = cluster.record(job.id)
    assert record.status == "FAILED"
    assert "member b" in record.failure and "no module named 'missing'" in record.failure


def test_a_member_lost_while_running_restarts_the_job_from_its_last_snapshot() -> None:
    cluster = InMemoryCluster(["a", "b", "c"])
    job = cluster.submit(**SNAPSHOTS)
    first = running_execution(cluster, job.id)
    # given a complete snapshot
    cluster.advance(1.0)
    assert cluster.record(job.id).last_snapshot is not None
    snapshot_id = cluster.record(job.id).last_snapshot.id  # type: ignore[union-attr]
    # when b is killed
    cluster.kill("b")
    # then the job runs again as a new execution on a and c, restoring that snapshot
    second = running_execution(cluster, job.id)
    assert second != first and cluster.record(job.id).restarts == 1
    init = cluster.nodes["a"].executions.inits[-1]
    assert init["members"] == ["a", "c"]
    assert init["restore"] == {
        "prefix": f"snapshot/{job.id}/{first}/{snapshot_id}",
        "snapshot_id": snapshot_id,
    }
    kinds = [e.kind for e in cluster.events()]
    assert EventKind.MEMBER_LEFT in kinds and EventKind.JOB_RESTARTED in kinds


def test_a_member_lost_during_a_snapshot_fails_it_and_restarts_from_the_previous_one() -> None:
    cluster = InMemoryCluster(["a", "b", "c"])
    job = cluster.submit(**SNAPSHOTS)
    first = running_execution(cluster, job.id)
    cluster.advance(1.0)  # snapshot 1 completes
    # given b hangs, so snapshot 2 stays in flight
    cluster.nodes["b"].executions.hung = True
    cluster.advance(1.0)
    assert cluster.record(job.id).last_snapshot.id == 1  # type: ignore[union-attr]
    # when b's connection drops mid-snapshot
    cluster.kill("b")
    # then snapshot 2 failed (its sinks roll back), and the job restarted from snapshot 1
    execution = running_execution(cluster, job.id)
    init = cluster.nodes["a"].executions.inits[-1]
    assert init["execution_id"] == execution and init["restore"]["snapshot_id"] == 1
    assert any(
        e.kind is EventKind.SNAPSHOT_FAILED and e.details["snapshot_id"] == 2 for e in cluster.events()
    )
    assert (init["execution_id"], 2, False) not in cluster.nodes["a"].executions.commits
    assert f"snapshot/{job.id}/{first}/2" in cluster.store.deleted


def last_prefix(cluster: InMemoryCluster, job_id: int) -> str:
    """Where the job's last complete snapshot lies in the grid, as its coordinator recorded it."""
    entry = cluster.nodes[cluster.coordinator()].jobs.get(job_id)
    assert entry is not None and entry.last_snapshot is not None
    prefix: str = entry.last_snapshot["prefix"]
    return prefix


def test_the_coordinator_lost_during_a_snapshot_its_successor_never_writes_into_that_snapshots_data() -> None:
    # found by bench/chaos.py (pause-coordinator-sbp seed 6): the successor reused the snapshot id
    # of the one in flight, so its parts landed beside the stale parts of the old execution, and a
    # later restore read both (14 windows with wrong counts in a COMPLETED job)
    cluster = InMemoryCluster(["a", "b", "c"])
    job = cluster.submit(**SNAPSHOTS)
    running_execution(cluster, job.id)
    cluster.advance(1.0)  # snapshot 1 completes
    complete = last_prefix(cluster, job.id)
    # given a's next snapshot is in flight (c does not answer), a and b having stored their parts
    cluster.nodes["c"].executions.hung = True
    cluster.advance(1.0)
    in_flight = [prefix for prefix in cluster.snapshot_counts if prefix != complete]
    assert len(in_flight) == 1 and cluster.snapshot_counts[in_flight[0]] == {"aggregate": 2}
    # when the coordinator a is lost and b takes over, running the job on b and c
    cluster.nodes["c"].executions.hung = False
    cluster.crash("a")
    running_execution(cluster, job.id)
    cluster.advance(1.0)
    # then b's first complete snapshot holds the parts of its own execution only
    taken = last_prefix(cluster, job.id)
    assert taken not in (complete, in_flight[0])
    assert cluster.snapshot_counts[taken] == {"aggregate": 2}


@pytest.mark.parametrize("failing", ["offload", "record"])
def test_a_snapshot_whose_record_was_not_kept_is_not_committed_by_the_sinks(failing: str) -> None:
    cluster = InMemoryCluster(["a", "b"])
    job = cluster.submit(**SNAPSHOTS)
    execution = running_execution(cluster, job.id)
    # given the snapshot directory fails (full, say), or the record is not replicated
    if failing == "offload":
        cluster.store.offload_failure = durable.OffloadError("snapshot 1 could not be offloaded: disk full")
    else:
        cluster.store.save_fails = True
    cluster.advance(1.0)
    # then the snapshot is the job's last one, but the sinks keep its transactions pending: a
    # restart from the record before it, or a cluster resumed from the directory, must not find
    # its output committed
    assert cluster.record(job.id).last_snapshot.id == 1  # type: ignore[union-attr]
    assert (execution, 1, False) in cluster.nodes["a"].executions.commits
    assert (execution, 1, True) not in cluster.nodes["a"].executions.commits
    # when it works again, the next snapshot commits (and takes the pending ones along)
    cluster.store.offload_failure = None
    cluster.store.save_fails = False
    cluster.advance(1.0)
    assert (execution, 2, True) in cluster.nodes["a"].executions.commits


def test_an_init_that_cannot_reach_another_member_yet_starts_the_execution_again() -> None:
    # found by bench/chaos.py (link-reset seed 15, two-kills-backup1 seed 8): a restart's init read
    # the snapshot across a link reset a moment before and not yet reconnected (or from a member
    # dying 0.25 s after the first), and the job FAILED although the cluster could run it
    cluster = InMemoryCluster(["a", "b", "c"])
    job = cluster.submit(**SNAPSHOTS)
    first = running_execution(cluster, job.id)
    cluster.advance(1.0)
    # given b's next two inits cannot reach another member yet
    cluster.nodes["b"].executions.cut_off_inits = 2
    # when c is lost and the job restarts
    cluster.crash("c")
    # then the job does not fail: it starts again a moment later, and again, then runs on a and b
    assert cluster.record(job.id).status == "STARTING"
    cluster.advance(0.3)
    assert cluster.record(job.id).status == "STARTING"
    cluster.advance(0.3)
    second = running_execution(cluster, job.id)
    assert second != first and cluster.nodes["a"].executions.inits[-1]["members"] == ["a", "b"]


def test_an_init_that_never_reaches_the_other_members_fails_the_job_saying_why() -> None:
    cluster = InMemoryCluster(["a", "b"])
    job = cluster.submit(**SNAPSHOTS)
    running_execution(cluster, job.id)
    cluster.advance(1.0)
    cluster.nodes["b"].executions.cut_off_inits = 1000
    cluster.crash("a")
    for _ in range(job_coordinator.START_ATTEMPTS + 1):
        cluster.advance(job_coordinator.START_RETRY_S)
    record = cluster.record(job.id)
    assert record.status == "FAILED" and "cannot reach another member yet" in record.failure


def test_a_member_lost_during_a_restart_starts_the_job_again_on_the_rest() -> None:
    cluster = InMemoryCluster(["a", "b", "c"])
    job = cluster.submit(**SNAPSHOTS)
    running_execution(cluster, job.id)
    cluster.advance(1.0)
    # given c will not answer the restart's init
    cluster.nodes["c"].executions.hang_init = True
    cluster.kill("b")  # the restart begins; c hangs in its init
    assert cluster.record(job.id).status == "STARTING"
    # when c is lost too
    cluster.kill("c")
    # then the job runs on a alone, from the same snapshot
    execution = running_execution(cluster, job.id)
    init = cluster.nodes["a"].executions.inits[-1]
    assert init["execution_id"] == execution and init["members"] == ["a"]
    assert init["restore"]["snapshot_id"] == 1


def test_the_coordinator_lost_another_member_takes_over_and_runs_the_job_on() -> None:
    cluster = InMemoryCluster(["a", "b", "c"])
    job = cluster.submit(**SNAPSHOTS)
    running_execution(cluster, job.id)
    cluster.advance(1.0)
    events_before = cluster.events()
    # when the coordinator a dies: its connections drop, and the others keep it as coordinator
    # until the membership drops it (a dropped connection is not a dead member)
    cluster.kill("a")
    assert cluster.nodes["b"].members.coordinator() == "a"
    assert cluster.nodes["b"].executions.inits[-1]["members"] == ["a", "b", "c"]
    cluster.drop("a")
    # then b loads the records from the replicated store and runs the job on b and c
    assert cluster.coordinator() == "b"
    execution = running_execution(cluster, job.id)
    init = cluster.nodes["b"].executions.inits[-1]
    assert init["execution_id"] == execution and init["members"] == ["b", "c"]
    # and b's event feed continues a's, with the take-over in it
    events = cluster.events(at="b")
    assert [e.id for e in events[: len(events_before)]] == [e.id for e in events_before]
    assert any(e.kind is EventKind.COORDINATOR_CHANGED and e.member == "b" for e in events)
    assert [e.id for e in events] == list(range(1, len(events) + 1))


def test_a_hung_member_fails_the_snapshot_after_its_timeout_and_the_job_restarts_once_dropped() -> None:
    cluster = InMemoryCluster(["a", "b", "c"])
    job = cluster.submit(**SNAPSHOTS)
    running_execution(cluster, job.id)
    cluster.nodes["c"].executions.hung = True  # connected, but answering nothing
    cluster.advance(1.0)
    # when the snapshot timeout passes
    cluster.advance(snapshot_coordinator.SNAPSHOT_TIMEOUT_S)
    # then the snapshot failed
    failed = [e for e in cluster.events() if e.kind is EventKind.SNAPSHOT_FAILED]
    assert failed and "c" in failed[0].reason
    # and once the membership drops c, the job restarts without it
    cluster.drop("c")
    running_execution(cluster, job.id)
    assert cluster.nodes["a"].executions.inits[-1]["members"] == ["a", "b"]


def test_a_member_joining_during_a_restart_is_used_after_the_scale_up_delay() -> None:
    cluster = InMemoryCluster(["a", "b", "c"], scale_up_delay_s=10.0)
    job = cluster.submit(**SNAPSHOTS)
    running_execution(cluster, job.id)
    cluster.advance(1.0)
    cluster.nodes["c"].executions.hang_init = True
    cluster.kill("b")  # a restart on a and c begins; c hangs in init
    # when d joins during the restart
    cluster.join("d")
    cluster.kill("c")
    first = running_execution(cluster, job.id)
    assert cluster.nodes["a"].executions.inits[-1]["members"] == ["a", "d"]
    # then, once the scale-up delay passes, nothing more happens (d is already in)
    cluster.advance(10.0)
    assert cluster.record(job.id).execution_id == first
    # and a member joining a running job makes it rescale after the delay, not before
    cluster.join("e")
    cluster.advance(5.0)
    assert cluster.record(job.id).execution_id == first
    cluster.advance(5.0)
    assert cluster.nodes["a"].executions.inits[-1]["members"] == ["a", "d", "e"]


def test_suspend_takes_a_terminal_snapshot_and_resume_restores_it() -> None:
    cluster = InMemoryCluster(["a", "b"])
    job = cluster.submit(**SNAPSHOTS)
    running_execution(cluster, job.id)
    suspended = cluster.ask("b", Operation.SUSPEND_JOB, key=str(job.id))
    cluster.settle()
    assert suspended.result(0)["record"]["status"] == "SUSPENDED"
    last = cluster.record(job.id).last_snapshot
    assert last is not None and last.id == 1
    resumed = cluster.ask("b", Operation.RESUME_JOB, key=str(job.id))
    cluster.settle()
    assert resumed.result(0)["record"]["status"] == "RUNNING"
    assert cluster.nodes["b"].executions.inits[-1]["restore"]["snapshot_id"] == 1


def test_operations_refused_name_the_problem_with_a_typed_error() -> None:
    cluster = InMemoryCluster(["a", "b"])
    job = cluster.submit()
    execution = running_execution(cluster, job.id)
    cluster.complete_everywhere(execution)
    for op, error in (
        (Operation.RESUME_JOB, errors.JobStateConflictError),
        (Operation.CANCEL_JOB, errors.JobStateConflictError),
    ):
        reply = cluster.ask("b", op, key=str(job.id))
        cluster.settle()
        with pytest.raises(error, match=str(job.name)):
            reply.result(0)
    missing = cluster.ask("b", Operation.GET_JOB, key="nope")
    cluster.settle()
    with pytest.raises(errors.JobNotFoundError, match="nope"):
        missing.result(0)


def test_a_reset_link_to_the_coordinator_makes_no_second_coordinator_and_heals() -> None:
    cluster = InMemoryCluster(["a", "b", "c"], scale_up_delay_s=10.0)
    job = cluster.submit(**SNAPSHOTS)
    running_execution(cluster, job.id)
    cluster.advance(1.0)
    # when the link between the coordinator a and b resets (both stay alive and members)
    cluster.cut_link("a", "b")
    # then b does not take over: a stays the only coordinator, with the job's record
    assert [cluster.nodes[m].members.coordinator() for m in "abc"] == ["a", "a", "a"]
    # and b stopped its share (fenced: a restarts the job without it, nothing may run twice)
    assert cluster.nodes["b"].executions.running == {}
    assert not any(e.kind is EventKind.COORDINATOR_CHANGED for e in cluster.events(at="a"))
    assert cluster.nodes["b"].jobs.all() == []
    # and a restarts the job without b, from its last snapshot
    execution = running_execution(cluster, job.id)
    assert cluster.nodes["a"].executions.inits[-1]["members"] == ["a", "c"]
    # when the link heals, b counts again and the job rescales onto it after the delay
    cluster.heal_link("a", "b")
    cluster.advance(10.0)
    assert cluster.record(job.id).execution_id != execution
    assert cluster.nodes["a"].executions.inits[-1]["members"] == ["a", "b", "c"]


def test_a_member_lost_after_the_final_commit_was_granted_fails_the_job_instead_of_repeating_output() -> None:
    # found by bench/chaos.py (two-kills-backup1 seed 16, issue 15 item 5): members whose sinks had
    # committed their last output in complete() finished, then a member was lost, and the job
    # restarted from its last snapshot and COMPLETED with 2,937 items committed twice
    cluster = InMemoryCluster(["a", "b", "c"])
    job = cluster.submit(**SNAPSHOTS)
    execution = running_execution(cluster, job.id)
    cluster.advance(1.0)  # snapshot 1 completes
    inits = len(cluster.nodes["a"].executions.inits)
    # when a's sources completed (granted at once), then its sinks are about to commit their last
    # output: that is kept in the replicated record first, then granted
    ended = cluster.nodes["a"].executions.ask_to_end(execution)
    cluster.settle()
    assert ended.result(0) == {"granted": True}
    granted = cluster.nodes["a"].executions.ask_to_end(execution, "final_commit")
    cluster.settle()
    assert granted.result(0) == {"granted": True}
    assert cluster.store.states[job.id]["final_commit"] is True
    # and no snapshot is taken from then on
    cluster.advance(3.0)
    assert cluster.record(job.id).last_snapshot.id == 1  # type: ignore[union-attr]
    # when a and b finish their share (their sinks committed their last output) and c is lost
    cluster.nodes["a"].executions.complete(execution)
    cluster.nodes["b"].executions.complete(execution)
    cluster.settle()
    cluster.kill("c")
    # then the job fails, saying why, and no execution starts again
    record = cluster.record(job.id)
    assert record.status == "FAILED", record
    assert "member c" in record.failure and "final output" in record.failure, record.failure
    assert "snapshot 1" in record.failure
    assert len(cluster.nodes["a"].executions.inits) == inits


def test_a_member_lost_after_a_source_completed_restarts_the_job_exactly_from_its_last_snapshot() -> None:
    cluster = InMemoryCluster(["a", "b", "c"])
    job = cluster.submit(**SNAPSHOTS)
    first = running_execution(cluster, job.id)
    cluster.advance(1.0)
    ended = cluster.nodes["b"].executions.ask_to_end(execution_id=first)
    cluster.settle()
    assert ended.result(0) == {"granted": True}
    cluster.advance(3.0)  # snapshots go on: other sources (a stream beside a batch side input) run on
    taken = cluster.record(job.id).last_snapshot.id  # type: ignore[union-attr]
    assert taken > 1
    # when c is lost before any sink began its final commit
    cluster.kill("c")
    # then the job restarts from its last snapshot (nothing beyond it is committed), and takes more
    second = running_execution(cluster, job.id)
    assert second != first and cluster.nodes["a"].executions.inits[-1]["restore"]["snapshot_id"] == taken
    cluster.advance(1.0)
    assert cluster.record(job.id).last_snapshot.id > taken  # type: ignore[union-attr]
    # and an end asked by the stale execution is refused
    stale = cluster.nodes["a"].channel.call("a", Operation.ENDING, execution_id=first, what="final_commit")
    cluster.settle()
    assert stale.result(0) == {"granted": False}
    assert cluster.store.states[job.id]["final_commit"] is False


def test_a_coordinator_that_takes_over_during_the_final_commit_fails_the_job() -> None:
    cluster = InMemoryCluster(["a", "b", "c"])
    job = cluster.submit(**SNAPSHOTS)
    execution = running_execution(cluster, job.id)
    cluster.advance(1.0)
    granted = cluster.nodes["b"].executions.ask_to_end(execution, "final_commit")
    cluster.settle()
    assert granted.result(0) == {"granted": True}
    # when the coordinator a is lost while the sinks commit their final output
    cluster.crash("a")
    # then b, taking over from the records, fails it rather than run it on from snapshot 1
    record = cluster.record(job.id)
    assert record.status == "FAILED" and "final output" in record.failure, record
    assert all(init["execution_id"] == execution for init in cluster.nodes["b"].executions.inits)


def test_a_member_leaving_while_the_sinks_are_granted_their_final_commit_lets_the_job_end() -> None:
    # found by tests/cluster/test_graceful_leave.py (SIGTERM once the sources ended): the leave's
    # terminal snapshot waited for the one in flight, the sinks were granted their final commit
    # meanwhile, and the stop that followed the (refused) terminal snapshot failed the job, which
    # could not run again exactly; a graceful leave must never fail a job
    cluster = InMemoryCluster(["a", "b", "c"])
    job = cluster.submit(**SNAPSHOTS)
    execution = running_execution(cluster, job.id)
    cluster.advance(1.0)  # snapshot 1 completes
    cluster.nodes["c"].executions.hung = True  # c's part of snapshot 2 does not come
    cluster.advance(1.0)
    # when c leaves gracefully (its terminal snapshot waits for snapshot 2)
    leaving = cluster.nodes["c"].channel.call("a", Operation.LEAVING)
    cluster.settle()
    # and meanwhile a's sinks are granted their final commit
    granted = cluster.nodes["a"].executions.ask_to_end(execution, "final_commit")
    cluster.settle()
    assert granted.result(0) == {"granted": True}
    cluster.nodes["c"].executions.hung = False
    cluster.advance(snapshot_coordinator.RPC_TIMEOUT_S)  # snapshot 2 fails; the terminal one is refused
    # then the job is not stopped: it ends on every member, c's leave waiting for it
    assert cluster.record(job.id).status == "RUNNING" and not leaving.done()
    for member in "abc":
        cluster.nodes[member].executions.complete(execution)
    cluster.settle()
    cluster.advance(1.0)
    assert cluster.record(job.id).status == "COMPLETED"
    assert leaving.done()
    assert all(init["execution_id"] == execution for init in cluster.nodes["a"].executions.inits)
