"""Large items with a slow sink: a member's memory stays within its bytes bound (issue 15 item 7).

Bounded in items only, 200 KB items filled 0.6 to 1.9 GB per member (a queue
of 1,024 of them is 200 MB, a network window of 16,384 is 3 GB). With
``--max-queued-bytes`` the items waiting in one execution's queues, outbox
buckets and network windows take at most that many bytes.
"""

from __future__ import annotations

import pathlib
import time
from typing import Any

from jetlet.config import JobConfig
from jetlet.local_cluster import local_cluster
from jetlet.pipeline import Pipeline, Sources
from jetlet.pipeline.sink_builder import SinkBuilder
from jetlet.testing import wait_until

ITEM_BYTES = 200_000
BOUND = 32 * 1024 * 1024
RUN_S = 8.0
HEADROOM_MB = 160
"""A member's memory beyond its bound: the interpreter and its modules, a sink's current batch,
serialized frames in flight, and the allocator's slack."""


def _rss_mb(pid: int) -> int:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) // 1024
    raise AssertionError(f"no VmRSS for {pid}")


def _large(seq: int) -> bytes:
    return seq.to_bytes(8, "big") * (ITEM_BYTES // 8)


def _slow_receive(state: dict[str, Any], item: bytes) -> None:
    time.sleep(0.002)  # a sink that takes 500 items a second, far below what the source offers
    state["count"] += 1


def _pipeline() -> Pipeline:
    sink = SinkBuilder.sink("slow", lambda context: {"count": 0}).receive_fn(_slow_receive).build()
    p = Pipeline()
    p.read_from(Sources.test_stream(1e9, _large)).without_timestamps().rebalance().write_to(sink)
    return p


def test_given_large_items_and_a_slow_sink_then_each_member_stays_within_its_bound() -> None:
    with local_cluster(2, ["--max-queued-bytes", str(BOUND)]) as client:
        baseline = max(_rss_mb(pid) for pid in client.pids)
        job = client.new_job(_pipeline(), JobConfig(name="large-items"))
        wait_until(lambda: job.status.value == "RUNNING", "the job to run", 60)
        limit = baseline + BOUND // (1024 * 1024) + HEADROOM_MB
        peak = 0
        deadline = time.monotonic() + RUN_S
        while time.monotonic() < deadline:  # an observation span: the memory is sampled all along
            peak = max(peak, *(_rss_mb(pid) for pid in client.pids))
            assert peak <= limit, f"a member holds {peak} MB, over {limit} MB ({baseline} MB at rest)"
            time.sleep(0.1)
        assert job.status.value == "RUNNING"
        job.cancel()
