"""A member with seeds does not resume a snapshot directory's jobs while it is still alone.

Found by the chaos suite (``bench/chaos.py``, cluster-crash-durable seed 2):
after the whole cluster crashed, a new cluster started on the same snapshot
directory; its second member, started with ``--members`` naming the first,
was alone for a moment, saw itself as the coordinator of a cluster of one and
resumed the job, while the first member resumed it too. Two executions wrote
the same output, and the job COMPLETED with 2,108 records lost and 1,480
duplicated. Now a member with seeds waits to join; only the coordinator of the
cluster it joins resumes the jobs.
"""

from __future__ import annotations

import os
import pathlib
import signal
import socket

import pytest
from member_processes import MemberProcesses
from test_fault_tolerance import (
    FAST_FAILURE,
    _check_stateful,
    _committed,
    _config,
    _stateful_map,
    _wait_for_snapshot,
)

import jetlet
from jetlet import ProcessingGuarantee
from jetlet.client import Client
from jetlet.local_cluster import local_cluster
from jetlet.testing import wait_until

pytestmark = pytest.mark.timeout(240)

SECRET = "a-cluster-secret-of-the-test"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_a_joiner_alone_for_a_while_leaves_the_directorys_jobs_to_the_coordinator(
    tmp_path: pathlib.Path,
) -> None:
    directory, out = tmp_path / "snapshots", tmp_path / "out"
    durable = [*FAST_FAILURE, "--snapshot-directory", str(directory)]
    # given a job offloaded to the directory by a cluster that then crashed whole
    with local_cluster(1, durable) as crashed:
        job = crashed.new_job(_stateful_map(str(out)), _config(ProcessingGuarantee.EXACTLY_ONCE))
        _wait_for_snapshot(crashed, job, 2)
        os.kill(crashed.pids[0], signal.SIGKILL)
    members = MemberProcesses(tmp_path)
    try:
        # when a member told to join m1 starts on that directory while m1 is not up yet
        m1_port = _free_port()
        joiner = members.start("m2", SECRET, "--members", f"127.0.0.1:{m1_port}", *durable)
        wait_until(lambda: "still alone after" in joiner.log(), "the joiner to say it is still alone", 60)
        # and m1 starts (a member without seeds: the cluster's first)
        first = members.start("m1", SECRET, "--rest-port", str(m1_port), *durable)
        client = Client(first.rest_address, members.token)
        wait_until(lambda: client.get_job(job.id) is not None, "the job to be resumed", 60)
        resumed = client.get_job(job.id)
        assert resumed is not None
        resumed.join(120)
        assert resumed.status is jetlet.JobStatus.COMPLETED
        # then the joiner did not run the job on its own, and the output is exactly once
        assert "resumed 1 job(s)" not in joiner.log(), joiner.log()
        assert "resumed 1 job(s)" in first.log()
    finally:
        members.stop_all()
    _check_stateful(_committed(out))
