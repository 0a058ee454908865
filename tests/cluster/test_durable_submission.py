"""A job is in the snapshot directory from its submission, not from its first snapshot's offload.

Found by ``bench/chaos.py`` (cluster-crash-durable seed 15): the whole cluster
was killed while the job's first snapshot was being written to the
directory; the new cluster found nothing of the job there and it was lost
without a word. The submission now answers once the job's record is written
(``jetlet._cluster.durable``), and a record that cannot be written fails the
job, saying why. The coordinator's side on the in-memory cluster of
``inmemory.py`` (no processes); the whole-cluster crash on member processes.
"""

from __future__ import annotations

import ast
import collections
import concurrent.futures
import os
import pathlib
import signal
from typing import Any

import pytest
from inmemory import InMemoryCluster

import jetlet
from jetlet import JobConfig, ProcessingGuarantee
from jetlet._cluster import durable
from jetlet.local_cluster import local_cluster
from jetlet.pipeline import Pipeline, Sinks, Sources
from jetlet.testing import wait_until

SNAPSHOTS = {"processing_guarantee": "EXACTLY_ONCE", "snapshot_interval_millis": 1000}


def _recording_offloads(cluster: InMemoryCluster) -> list[tuple[int, int | None]]:
    """``(job id, last snapshot id)`` of every offload the coordinator asks of the store, in order."""
    offloads: list[tuple[int, int | None]] = []
    offload = cluster.store.offload

    def record(job_id: int, state: dict[str, Any]) -> concurrent.futures.Future[None]:
        offloads.append((job_id, state["last_snapshot"]["id"] if state["last_snapshot"] else None))
        return offload(job_id, state)

    cluster.store.offload = record  # type: ignore[method-assign]
    return offloads


@pytest.mark.timeout(10)
def test_a_submitted_job_is_offloaded_before_its_first_snapshot() -> None:
    cluster = InMemoryCluster(["a", "b"])
    offloads = _recording_offloads(cluster)

    job = cluster.submit(**SNAPSHOTS)

    assert offloads == [(job.id, None)]  # its record, before any snapshot
    cluster.advance(1.0)
    assert offloads == [(job.id, None), (job.id, 1)]  # then each complete snapshot, after it


@pytest.mark.timeout(10)
def test_a_job_whose_record_cannot_be_written_to_the_directory_fails_saying_why() -> None:
    cluster = InMemoryCluster(["a", "b"])
    cluster.store.offload_failure = durable.OffloadError(
        "job 7: the record could not be offloaded: disk full"
    )

    job = cluster.submit(**SNAPSHOTS)

    record = cluster.record(job.id)
    assert record.status == "FAILED"
    assert "could not be written to the snapshot directory" in record.failure
    assert "disk full" in record.failure


KEYS = 5
RATE = 1500
COUNT = 3000  # two seconds of input


def _event(seq: int) -> tuple[int, int]:
    return (seq % KEYS, seq)


def _running_count(state: list[int], key: int, event: tuple[int, int]) -> tuple[int, int, int]:
    state[0] += 1
    return (key, event[1], state[0])


def _committed(directory: pathlib.Path) -> collections.Counter[Any]:
    """Every line of every committed file (temporary ones start with a dot)."""
    found: collections.Counter[Any] = collections.Counter()
    for path in directory.iterdir():
        if path.is_file() and not path.name.startswith("."):
            found.update(ast.literal_eval(line) for line in path.read_text().splitlines())
    return found


@pytest.mark.timeout(120)
def test_a_job_with_no_snapshot_yet_survives_the_whole_cluster_and_runs_from_the_beginning(
    tmp_path: pathlib.Path,
) -> None:
    out = tmp_path / "out"
    args = ["--heartbeat-interval-millis", "100", "--snapshot-directory", str(tmp_path / "snapshots")]
    p = Pipeline()
    (
        p.read_from(Sources.test_stream(RATE, _event, COUNT))
        .without_timestamps()
        .grouping_key(lambda event: event[0])
        .map_stateful(lambda: [0], _running_count)
        .write_to(Sinks.files(str(out)))
    )
    # a snapshot interval the job never reaches: it has no snapshot when the cluster is lost
    config = JobConfig(
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE, snapshot_interval_millis=600_000
    )
    with local_cluster(2, args) as client:
        job = client.new_job(p, config)
        job_id = job.id
        wait_until(lambda: job.status is jetlet.JobStatus.RUNNING, "the job to run", 30)
        for pid in client.pids:
            os.kill(pid, signal.SIGKILL)
    assert not _committed(out), "an exactly-once sink committed output before any snapshot"
    with local_cluster(2, args) as client:
        wait_until(lambda: client.get_job(job_id) is not None, "the job resumed from the directory", 30)
        resumed = client.get_job(job_id)
        assert resumed is not None
        resumed.join(60)
        assert resumed.status is jetlet.JobStatus.COMPLETED
    found = _committed(out)  # every item once, the running counts of each key exactly 1..n
    assert collections.Counter((key, seq) for key, seq, _ in found.elements()) == collections.Counter(
        _event(seq) for seq in range(COUNT)
    )
    for key in range(KEYS):
        assert sorted(n for k, _, n in found.elements() if k == key) == list(range(1, COUNT // KEYS + 1))
