"""``JobConfig.timeout_millis`` on a real local cluster (issue 15 item 8: it was ignored on a cluster).

As Jet does (and as an embedded job does here), a job that runs past its
timeout is cancelled: it ends FAILED, cancelled, with a message naming the
timeout; a suspended job past its timeout ends too; a job that ends in time
is not touched.
"""

from __future__ import annotations

import time

import pytest

import jetlet
from jetlet import JobConfig
from jetlet.local_cluster import local_cluster
from jetlet.pipeline import Pipeline, Sinks, Sources
from jetlet.testing import wait_until


def _endless(name: str) -> Pipeline:
    p = Pipeline()
    p.read_from(Sources.test_stream(100, lambda i: i)).with_ingestion_timestamps().write_to(Sinks.list(name))
    return p


def _short(name: str) -> Pipeline:
    p = Pipeline()
    p.read_from(Sources.items(*range(10))).write_to(Sinks.list(name))
    return p


def test_jobs_past_their_timeout_are_cancelled_and_a_job_ending_in_time_is_not() -> None:
    with local_cluster(2) as client:
        started = time.monotonic()
        running = client.new_job(_endless("a"), JobConfig(name="runs-on", timeout_millis=1500))
        suspended = client.new_job(_endless("b"), JobConfig(name="suspended", timeout_millis=2500))
        in_time = client.new_job(_short("c"), JobConfig(name="in-time", timeout_millis=60_000))
        wait_until(lambda: suspended.status is jetlet.JobStatus.RUNNING, "the second job to run", 30)
        suspended.suspend()
        # then the running job is cancelled once past its timeout, saying so
        with pytest.raises(jetlet.JobCancelledError, match="ran past its timeout of 1500 ms"):
            running.join(60)
        assert time.monotonic() - started >= 1.5
        assert running.status is jetlet.JobStatus.FAILED and running.last_record.cancelled
        # and the suspended one ends as well, without being resumed
        with pytest.raises(jetlet.JobCancelledError, match="ran past its timeout of 2500 ms"):
            suspended.join(60)
        # and the job that ended in time completed
        in_time.join(60)
        assert in_time.status is jetlet.JobStatus.COMPLETED
        assert sorted(client.get_list("c")) == list(range(10))
