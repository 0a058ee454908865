"""Large items into a slow stage: member memory under its bytes bound, and latency once the source slows.

Issue 15: bounded in items only, 200 KB items with a slow sink filled 0.6 to
1.9 GB per member and the latency grew without bound. With
``--max-queued-bytes`` the items waiting in an execution's queues, outbox
buckets and network windows take at most that many bytes, so memory stays
flat and an item waits at most about *bound / drain rate* inside the job.

The job (2 member processes on loopback, ``--max-queued-bytes`` 32 MiB): one
source processor emits 200 KB items on a schedule — ``FAST_RATE`` items a
second for the first half of the run, more than the slow stage drains, then
``SLOW_RATE``, less (the backlog of the first half dropped at the switch, as
when a producer slows down) — each stamped with the wall-clock time it entered the
job; ``rebalance`` spreads them over a slow stage (one processor a member,
``SLOW_S`` per item, so ``2 / SLOW_S`` items a second in all), which passes
on ``(entered, left)`` to an observable read by this process. Per second of
the run it reports the items through, the median and maximum *in-job
latency* (left minus entered; time the source spent behind its schedule
under back-pressure is not in it: a real source keeps that backlog outside
the job, in Kafka or a socket), and the larger member's resident memory,
sampled every 0.2 s. The figure of merit:

* peak RSS against the bound (``RSS_BOUND_MB`` per member: the interpreter,
  the bound and a stage's batch in flight);
* in the overloaded half the latency levels off (it cannot grow past what
  the bound holds); once the source is slowed it falls and stays low: the
  last 10 s of the run have a lower maximum than the first overloaded
  seconds' level, and no upward trend.

Run: ``python bench/large_items_bench.py [--seconds 60]``, or
``python bench/run_all.py --only large_items_bench``.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

import _common
from jetlet.local_cluster import local_cluster
from jetlet.pipeline import Pipeline, Sinks
from jetlet.pipeline.source_builder import SourceBuilder

ITEM_BYTES = 200_000
BOUND_BYTES = 32 * 1024 * 1024
RSS_BOUND_MB = 400
"""Each member's resident memory bound: ~60 MB of interpreter and modules, the 32 MiB bound,
and frames in flight and the allocator's slack (the chaos suite's large-items bound)."""
SLOW_S = 0.010
"""What the slow stage spends on one item: 100 items (20 MB) a second per member."""
FAST_RATE = 400
"""Items a second the source offers in the first half: twice what the two slow processors drain."""
SLOW_RATE = 100
"""Items a second in the second half: half of what they drain."""
SAMPLE_S = 0.2


class _Schedule:
    """The source's state: items emitted so far against the schedule, from the job's start."""

    def __init__(self, seconds: float) -> None:
        self.started = time.monotonic()
        self.half = seconds / 2
        self.seconds = seconds
        self.emitted = 0
        self.slowed_from: int | None = None
        self.payload = b"x" * ITEM_BYTES

    def due(self, now: float) -> int:
        elapsed = now - self.started
        if elapsed <= self.half:
            return int(elapsed * FAST_RATE)
        if self.slowed_from is None:  # the source slows: what it was behind by is dropped, not made up
            self.slowed_from = self.emitted
        return self.slowed_from + int((min(elapsed, self.seconds) - self.half) * SLOW_RATE)


def _fill(schedule: _Schedule, buffer: Any) -> None:
    now = time.monotonic()
    if now - schedule.started >= schedule.seconds:
        buffer.close()
        return
    # never more than a few items at once: behind the schedule (back-pressure), the source
    # does not burst to catch up; the backlog stays outside the job, as in a real source
    for _ in range(min(schedule.due(now) - schedule.emitted, 4)):
        buffer.add((time.time(), schedule.payload))
        schedule.emitted += 1


def _slow(item: tuple[float, bytes]) -> tuple[float, float]:
    time.sleep(SLOW_S)  # the slowness under test: a stage that takes 10 ms per item
    return (item[0], time.time())


def _pipeline(seconds: float) -> Pipeline:
    source = (
        SourceBuilder.batch("scheduled-large-items", lambda context: _Schedule(seconds))
        .fill_buffer_fn(_fill)
        .build()
    )
    p = Pipeline()
    p.read_from(source).rebalance().map(_slow).set_local_parallelism(1).write_to(Sinks.observable("latency"))
    return p


def _rss_mb(pid: int) -> float:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _measure(seconds: float) -> tuple[list[tuple[float, float]], list[tuple[float, float]], int]:
    """(entered, left) per item, (time, larger member RSS MB) samples, and the members' RSS at rest."""
    args = ["--max-queued-bytes", str(BOUND_BYTES), "--cooperative-thread-count", "1"]
    with local_cluster(2, args) as client:
        at_rest = int(max(_rss_mb(pid) for pid in client.pids))
        rss: list[tuple[float, float]] = []
        done = threading.Event()

        def sample() -> None:
            while not done.wait(SAMPLE_S):
                rss.append((time.time(), max(_rss_mb(pid) for pid in client.pids)))

        sampler = threading.Thread(target=sample, name="rss-sampler", daemon=True)
        sampler.start()
        try:
            job = client.new_job(_pipeline(seconds))
            items = [tuple(x) for x in client.get_observable("latency")]
            job.join(seconds + 120)
        finally:
            done.set()
            sampler.join()
    return items, rss, at_rest


def _per_second(
    items: list[tuple[float, float]], rss: list[tuple[float, float]]
) -> list[tuple[int, int, float, float, float]]:
    """(second, items, median latency, max latency, max RSS MB) per second of the run, by exit time."""
    start = min(entered for entered, _ in items)
    seconds: dict[int, list[float]] = {}
    for entered, left in items:
        seconds.setdefault(int(left - start), []).append(left - entered)
    memory: dict[int, float] = {}
    for at, mb in rss:
        second = int(at - start)
        memory[second] = max(memory.get(second, 0.0), mb)
    return [
        (s, len(lat), statistics.median(lat), max(lat), memory.get(s, 0.0))
        for s, lat in sorted(seconds.items())
    ]


def main(argv: Sequence[str] = ()) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seconds", type=float, default=60.0, help="length of the run (half fast, half slow)"
    )
    parser.add_argument("--repeats", type=int, default=1, help="ignored (one long run)")
    args = parser.parse_args(list(argv))
    items, rss, at_rest = _measure(args.seconds)
    rows = _per_second(items, rss)
    half = int(args.seconds / 2)
    fast_tail = [r for r in rows if half - 10 <= r[0] < half]
    slow_tail = [r for r in rows if r[0] >= args.seconds - 10]
    peak = max(mb for _, mb in rss)
    fast_level = max(r[3] for r in fast_tail)
    slow_level = max(r[3] for r in slow_tail)
    slope = statistics.linear_regression([r[0] for r in slow_tail], [r[2] for r in slow_tail]).slope
    table = _common.markdown_table(
        ["second", "items", "latency median s", "latency max s", "larger member RSS MB"],
        [[str(s), str(n), f"{med:.3f}", f"{mx:.3f}", f"{mb:.0f}"] for s, n, med, mx, mb in rows],
    )
    verdict_memory = "within" if peak <= RSS_BOUND_MB else "OVER"
    verdict_latency = "falls and stays low" if slow_level < fast_level and slope < 0.01 else "DOES NOT settle"
    markdown = (
        "## Large items into a slow stage (`large_items_bench.py`)\n\n"
        f"{len(items):,} items of {ITEM_BYTES // 1000} KB through 2 member processes on loopback "
        f"(`--max-queued-bytes {BOUND_BYTES}`, one cooperative thread each), {args.seconds:.0f} s: "
        f"the source offers {FAST_RATE} items/s for the first half, {SLOW_RATE}/s after; a stage of "
        f"one processor a member takes {SLOW_S * 1000:.0f} ms an item ({2 / SLOW_S:.0f}/s in all). "
        "Latency: from entering the job to leaving the slow stage, per second of exit time. "
        f"Machine: {platform.platform()}, {os.cpu_count()} CPUs.\n\n"
        f"- Memory: peak {peak:.0f} MB for the larger member ({at_rest} MB at rest), "
        f"bound {RSS_BOUND_MB} MB: **{verdict_memory}**.\n"
        f"- Latency: max {fast_level:.2f} s over the last 10 overloaded seconds, {slow_level:.2f} s "
        f"over the last 10 slowed seconds (median trend {slope * 1000:+.1f} ms/s): **{verdict_latency}**.\n\n"
        f"{table}\n"
    )
    print(markdown)
    return markdown


if __name__ == "__main__":
    main(sys.argv[1:])
