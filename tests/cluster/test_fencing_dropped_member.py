"""A member the membership dropped is fenced: the others refuse its requests until it rejoins.

A member paused past the failure timeout (SIGSTOP) is dropped by the others
while its connections stay open; when it runs again, its stale executions and
coordinator go on for a moment before it notices it was removed, and what
they send reaches the others: the chaos suite's pause-coordinator seed 9
COMPLETED with the map sink's counts of the moment of the pause (12,583
lost), written by the resumed member's stale map sink after the job had
ended. In-memory cluster (``inmemory.py``): deterministic, milliseconds.
"""

from __future__ import annotations

import pytest
from inmemory import InMemoryCluster

from jetlet import errors
from jetlet._cluster.control import Operation

pytestmark = pytest.mark.timeout(10)

SNAPSHOTS = {"processing_guarantee": "EXACTLY_ONCE", "snapshot_interval_millis": 1000}


def test_a_dropped_member_that_resumes_is_refused_until_it_rejoins() -> None:
    cluster = InMemoryCluster(["a", "b", "c"])
    cluster.submit(**SNAPSHOTS)
    # given c was paused past the failure timeout: the membership dropped it, its connections open
    cluster.drop("c")
    commits = list(cluster.nodes["b"].executions.commits)
    # when it resumes and sends what its stale coordinator had under way (a snapshot's commit)
    stale = cluster.nodes["c"].channel.call(
        "b", Operation.SNAPSHOT_COMMIT, execution_id=1, snapshot_id=1, success=True
    )
    cluster.settle()
    # then b refuses it, saying why, and does nothing
    assert isinstance(stale.exception(), errors.ClusterUnavailableError)
    assert "not in the cluster of b" in str(stale.exception())
    assert cluster.nodes["b"].executions.commits == commits
    # and once c has rejoined (a new member of the same name), b serves it again
    cluster.join("c")
    served = cluster.nodes["c"].channel.call(
        "b", Operation.SNAPSHOT_COMMIT, execution_id=1, snapshot_id=1, success=True
    )
    cluster.settle()
    assert served.exception() is None
