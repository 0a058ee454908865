"""Destroying a named list or map on a cluster (issue 16 item 11): it is gone everywhere, and only it.

The embedded instance had ``destroy_list``/``destroy_map``; the client now
has them too (``DELETE /lists/NAME``, ``DELETE /maps/NAME``), so a notebook
can run a job again on a clean slate.
"""

from __future__ import annotations

import pytest

from jetlet import Pipeline, Sinks, Sources
from jetlet.local_cluster import local_cluster

pytestmark = pytest.mark.timeout(120)


def _fill(cluster: object, name: str) -> None:
    p = Pipeline()
    items = p.read_from(Sources.items(*range(20)))
    items.write_to(Sinks.list(name))
    items.map(lambda i: (i, i * i)).write_to(Sinks.map(name))
    cluster.new_job(p).join(60)  # type: ignore[attr-defined]


def test_a_destroyed_list_or_map_reads_empty_and_a_longer_name_is_kept() -> None:
    with local_cluster(2) as cluster:
        _fill(cluster, "scores")
        _fill(cluster, "scores-2")  # a name the first one is a prefix of
        assert sorted(cluster.get_list("scores")) == list(range(20))
        cluster.destroy_list("scores")
        cluster.destroy_map("scores")
        assert cluster.get_list("scores") == [] and cluster.get_map("scores") == {}
        assert sorted(cluster.get_list("scores-2")) == list(range(20))
        assert cluster.get_map("scores-2") == {i: i * i for i in range(20)}
        # and a job writes the name afresh
        _fill(cluster, "scores")
        assert sorted(cluster.get_list("scores")) == list(range(20))
