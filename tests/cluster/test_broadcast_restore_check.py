"""An execution does not run from a snapshot that one of its members read only in part.

Every member reads the whole broadcast map of the snapshot it restores (the
``next_win`` of window stages, watermarks, sources' positions, sinks'
transactions), but the coordinator's count of the restored entries saw only
member 0's read. A member whose read raced a partition move restored those
minima over fewer processors and could drop a window's items as late, the job
completing with wrong counts. Now every member reports its read
(:func:`~jetlet._cluster.snapshot_data.broadcast_counts`) and the coordinator
starts the execution again when one falls short. In-memory cluster
(``inmemory.py``): deterministic, milliseconds.
"""

from __future__ import annotations

import pytest
from inmemory import InMemoryCluster

from jetlet._cluster import job_coordinator, snapshot_data
from jetlet.core.snapshot_writer import Copied, freeze

pytestmark = pytest.mark.timeout(10)

SNAPSHOTS = {"processing_guarantee": "EXACTLY_ONCE", "snapshot_interval_millis": 1000}


def running_execution(cluster: InMemoryCluster, job_id: int) -> int:
    record = cluster.record(job_id)
    assert record.status == "RUNNING", record
    return record.execution_id


def test_a_member_that_read_part_of_the_broadcast_state_makes_the_execution_start_again() -> None:
    cluster = InMemoryCluster(["a", "b", "c"])
    job = cluster.submit(**SNAPSHOTS)
    first = running_execution(cluster, job.id)
    cluster.advance(1.0)  # snapshot 1 completes
    # given b's next restore reads one broadcast entry fewer than a's (not member 0: uncounted before)
    cluster.nodes["b"].executions.short_broadcast_inits = 1
    # when c is lost and the job restarts from snapshot 1
    cluster.crash("c")
    # then the execution does not run from that read: it starts again a moment later, and runs
    assert cluster.record(job.id).status == "STARTING"
    cluster.advance(job_coordinator.START_RETRY_S)
    second = running_execution(cluster, job.id)
    restarts = [init for init in cluster.nodes["b"].executions.inits if init.get("restore")]
    assert second != first and len(restarts) == 2
    assert {init["execution_id"] for init in restarts} == {restarts[0]["execution_id"], second}


def test_a_read_that_stays_short_fails_the_job_saying_why() -> None:
    cluster = InMemoryCluster(["a", "b", "c"])
    job = cluster.submit(**SNAPSHOTS)
    running_execution(cluster, job.id)
    cluster.advance(1.0)
    # given b's restores read one broadcast entry short every time
    cluster.nodes["b"].executions.short_broadcast_inits = 1000
    # when c is lost and the job restarts, then it fails after the bounded restarts, saying why
    cluster.crash("c")
    for _ in range(job_coordinator.START_ATTEMPTS + 1):
        cluster.advance(job_coordinator.START_RETRY_S)
    record = cluster.record(job.id)
    assert record.status == "FAILED" and "read only part of the snapshot's broadcast state" in record.failure


def test_short_broadcast_reads_names_each_member_that_read_less_than_another() -> None:
    read = {"a": {"src": 3, "win": 6}, "b": {"src": 3, "win": 4}, "c": {"win": 6}}
    problems = snapshot_data.short_broadcast_reads(read)
    assert sorted(problems) == ["b", "c"]
    assert "'win': 4 of 6 entries" in problems["b"] and "'src': 0 of 3 entries" in problems["c"]
    assert snapshot_data.short_broadcast_reads({"a": {"win": 6}, "b": {"win": 6}}) == {}


def test_broadcast_counts_reads_the_entry_counts_from_the_chunk_headers() -> None:
    chunks = {
        ("win", "m1"): snapshot_data.encode([("k", freeze(1)), ("l", Copied(2))]),
        ("win", "m2"): snapshot_data.encode([("k", freeze(3))]),
        ("src", "m1"): snapshot_data.encode([("p", freeze(0))]),
    }
    assert snapshot_data.broadcast_counts(chunks) == {"win": 3, "src": 1}
