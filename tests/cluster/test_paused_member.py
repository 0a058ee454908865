"""A member paused past the failure timeout (SIGSTOP, then SIGCONT) is fenced, rejoins, and nothing is
lost or duplicated (issue 15, item 4).

The cluster removes the paused member and restarts the job without it; when
the member runs again it notices its own pause and stops its stale
executions before they write anything more, learns from the coordinator that
it was removed, forgets its state (a paused coordinator forgets its job
records: the member that took over has the replicated ones) and joins again
as a new member. The job's committed output is compared with plain Python.
"""

from __future__ import annotations

import os
import pathlib
import signal

import pytest
from test_fault_tolerance import (
    FAST_FAILURE,
    RATE,
    _committed,
    _config,
    _wait_for_snapshot,
    _windowed_count,
    _windowed_reference,
)

from jetlet import ProcessingGuarantee
from jetlet.client import connect
from jetlet.local_cluster import local_cluster
from jetlet.records import EventKind
from jetlet.testing import wait_until

pytestmark = pytest.mark.timeout(240)


@pytest.mark.parametrize("paused", [2, 0], ids=["a-member", "the-coordinator"])
def test_a_paused_member_is_fenced_rejoins_and_the_results_stay_exact(
    tmp_path: pathlib.Path, paused: int
) -> None:
    out = tmp_path / "out"
    with local_cluster(3, FAST_FAILURE) as client:
        observer = connect(client.addresses[1], client.token)
        name = next(m.name for m in client.cluster().members if m.rest_address == client.addresses[paused])
        job = client.new_job(_windowed_count(str(out), RATE // 2), _config(ProcessingGuarantee.EXACTLY_ONCE))
        _wait_for_snapshot(client, job)
        # when the member is paused well past the failure timeout (1.5 s), then resumed
        os.kill(client.pids[paused], signal.SIGSTOP)
        try:
            wait_until(lambda: len(observer.cluster().members) == 2, f"the cluster to remove {name}", 60)
        finally:
            os.kill(client.pids[paused], signal.SIGCONT)
        # then it joins again as a member of the one cluster, which has one coordinator
        clients = [connect(address, client.token) for address in client.addresses]

        def one_cluster() -> bool:
            views = [c.cluster() for c in clients]
            return len({v.coordinator for v in views}) == 1 and all(len(v.members) == 3 for v in views)

        wait_until(one_cluster, f"{name} to join again and every member to agree on one coordinator", 60)
        observer.get_job(job.id).join(120)  # type: ignore[union-attr]
        events = list(observer.events(timeout=0.5))
        assert any(e.kind is EventKind.MEMBER_LEFT and e.member == name for e in events)
    # and the output is exactly plain Python's: the stale execution wrote nothing more
    assert _committed(out) == _windowed_reference()
