"""A job that writes to a grid map restarts after a member's death; it does not fail (issue 15 item 7).

Before, a map sink's write that reached a member that had just died failed
the job with a grid error in 2 of 5 runs; a grid write that fails only
because members are unreachable is now a topology change, like a lost data
connection: the job restarts from its last snapshot and the map ends exact.
"""

from __future__ import annotations

import collections
import os
import signal

import pytest
from test_fault_tolerance import COUNT, FAST_FAILURE, KEYS, RATE, _config, _event, _wait_for_snapshot

from jetlet import AggregateOperations, JobStatus, ProcessingGuarantee
from jetlet._cluster import execution_member, grid
from jetlet.client import Client
from jetlet.local_cluster import local_cluster
from jetlet.pipeline import Pipeline, Sinks, Sources
from jetlet.testing import wait_until

pytestmark = pytest.mark.timeout(240)


def _counts_into_a_map() -> Pipeline:
    p = Pipeline()
    (
        p.read_from(Sources.test_stream(RATE // 2, _event, COUNT))
        .without_timestamps()
        .grouping_key(lambda event: event[0])
        .rolling_aggregate(AggregateOperations.counting())
        .write_to(Sinks.map("rolling-counts"))
    )
    return p


def test_a_grid_write_that_reaches_only_unreachable_members_is_a_topology_change() -> None:
    unreachable = grid.GridError("member m3 failed grid_put: ...", ["m3"], unreachable=True)
    refused = grid.GridError("member m3 failed grid_put: ValueError: bad", ["m3"])
    assert execution_member.is_topology_error(unreachable)
    assert not execution_member.is_topology_error(refused)
    wrapped = RuntimeError("sink failed")
    wrapped.__cause__ = unreachable
    assert execution_member.is_topology_error(wrapped)


def test_a_map_sink_job_restarts_after_a_member_dies_and_its_map_is_exact() -> None:
    with local_cluster(3, FAST_FAILURE) as client:
        survivor = Client(client.addresses[0], client.token)
        job = client.new_job(_counts_into_a_map(), _config(ProcessingGuarantee.EXACTLY_ONCE))
        _wait_for_snapshot(client, job)
        os.kill(client.pids[2], signal.SIGKILL)
        handle = survivor.get_job(job.id)
        assert handle is not None
        handle.join(120)
        assert handle.status is JobStatus.COMPLETED
        wait_until(lambda: bool(survivor.get_map("rolling-counts")), "the map", 30)
        counts = survivor.get_map("rolling-counts")
    assert counts == collections.Counter(seq % KEYS for seq in range(COUNT))
