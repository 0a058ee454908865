"""Frames bounded in bytes on a real cluster (issue 15 item 6): large items cross, a too-large one fails.

With 200 KB items a sender once built a 94 MB frame; the receiver refused it
over its 64 MiB limit by dropping the connection, which split the cluster.
Before the fix the job with a 64 MiB item even COMPLETED, the item lost with
the dropped connection. (tests/network/test_network_frame_bounds.py makes a
sender queue 8 MB against a 1 MiB limit, which dropped the link before.)
"""

from __future__ import annotations

from typing import Any

import pytest

from jetlet import errors
from jetlet._network import frames
from jetlet.core import DAG, Edge, processors
from jetlet.core.processors import store
from jetlet.local_cluster import local_cluster

ITEM_BYTES = 200 * 1000
ITEMS = 800
"""160 MB in all, more than twice a frame's limit: before the fix one packet of them broke the link."""


def _key(item: tuple[int, bytes]) -> int:
    return item[0]


def _large(i: int) -> tuple[int, bytes]:
    return i, bytes([i % 251]) * ITEM_BYTES


def _too_large(i: int) -> tuple[int, bytes]:
    return i, b"x" * (frames.DEFAULT_MAX_FRAME_SIZE + 1)


def _check(item: tuple[int, bytes]) -> tuple[int, int]:
    i, payload = item
    assert payload == bytes([i % 251]) * ITEM_BYTES
    return i, len(payload)


def _size(item: tuple[int, bytes]) -> tuple[int, int]:
    return item[0], len(item[1])


def _dag(count: int, make: Any, sink: Any, check: Any = _check) -> DAG:
    dag = DAG()
    source = dag.new_vertex("source", processors.source_from_iterable(range(count)))
    big = dag.new_vertex("make", processors.map_p(make))
    check = dag.new_vertex("check", processors.map_p(check))
    out = dag.new_vertex("sink", sink, 1)
    dag.edge(Edge.between(source, big))
    dag.edge(Edge.between(big, check).partitioned(_key).distributed())
    dag.edge(Edge.between(check, out))
    return dag


def test_large_items_cross_between_members_in_frames_under_the_limit() -> None:
    with local_cluster(2) as client:
        job = client.new_job(_dag(ITEMS, _large, store.list_sink_p("sizes")))
        job.join(180)
        assert sorted(client.get_list("sizes")) == [(i, ITEM_BYTES) for i in range(ITEMS)]
        crossed = sum(v.get("distributedItemsIn", 0) for v in job.metrics().values())
        assert crossed > 0


def test_an_item_larger_than_a_frame_fails_the_job_naming_its_size_and_the_limit() -> None:
    with local_cluster(2) as client:
        job = client.new_job(_dag(4, _too_large, processors.noop_p(), _size))
        with pytest.raises(
            errors.JetletError, match=r"more than a network frame may carry \(67,108,864 bytes\)"
        ):
            job.join(180)
