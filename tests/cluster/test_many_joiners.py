"""Clients waiting on ``join`` take nothing from other requests or from the job's snapshots.

Issue 15 item 7: 16 clients waiting on ``join`` held the REST threads (8 of
them, shared by every request) and every other request waited behind them
for up to 30 s. A long wait now holds a thread of a pool of its own. On a
2-member cluster, 24 clients join a running EXACTLY_ONCE job, half through
the coordinator, half through the other member (which forwards); while they
wait, both members answer short requests at once and the job's snapshots go
on completing; cancelling the job ends every join.
"""

from __future__ import annotations

import concurrent.futures
import pathlib
import time

from test_fault_tolerance import FAST_FAILURE, RATE, _config, _wait_for_snapshot, _windowed_count

from jetlet import ProcessingGuarantee
from jetlet._cluster import rest_requests
from jetlet.client import Client
from jetlet.local_cluster import local_cluster

JOINERS = 24  # 12 a member: more than its 8 short-request threads
SHORT_ANSWER_S = 5.0  # a loaded machine; behind the joins it took up to 30 s


def test_two_dozen_joiners_block_neither_short_requests_nor_snapshots(tmp_path: pathlib.Path) -> None:
    assert JOINERS // 2 > rest_requests.SHORT_REQUEST_THREADS  # enough to take every short-request thread
    with local_cluster(2, FAST_FAILURE) as client:
        slow = _windowed_count(str(tmp_path / "out"), RATE // 8)  # 32 s of input: it runs until cancelled
        job = client.new_job(slow, _config(ProcessingGuarantee.EXACTLY_ONCE))
        _wait_for_snapshot(client, job)
        members = [Client(address, client.token) for address in client.addresses]
        with concurrent.futures.ThreadPoolExecutor(JOINERS) as pool:
            # given 24 clients waiting for the job to end, on both members
            joins = [
                pool.submit(members[i % 2].request, "POST", f"/jobs/{job.id}/join", {"timeout": 60}, wait=60)
                for i in range(JOINERS)
            ]
            # when the job's snapshots go on meanwhile (time for every join to reach its member)
            _wait_for_snapshot(client, job, job.snapshot["count"] + 3)
            # then each member answers other requests at once
            for member in members:
                started = time.monotonic()
                assert member.get_job(job.id) is not None
                assert member.request("GET", "/jobs")["jobs"]
                assert time.monotonic() - started < SHORT_ANSWER_S
            assert not any(j.done() for j in joins), (
                "the joins' 30 s ran out first: the checks waited behind them"
            )
            job.cancel()
            ended = [j.result(timeout=60)["status"] for j in joins]
        assert ended == ["FAILED"] * JOINERS  # a cancelled job ends FAILED, as in Jet
