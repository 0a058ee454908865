"""A NEXMark query's latency over time: the results binned by when they arrived, to see what a snapshot does.

The latency harness (``bench/nexmark.py --mode latency``) gives percentiles over a whole run;
this shows their shape in time. One query runs paced (``--rate`` events/s, as the harness's latency
runs) on a local cluster of one member process (``--members 0``: embedded), with or without
EXACTLY_ONCE snapshots every second. A recorder in front of the sink keeps ``(arrival, latency)``
for every result (latency as the harness measures it: the arrival's wall-clock time minus the
result's timestamp), and after ``--warmup`` seconds the results of ``--seconds`` more are binned by
arrival into ``--bin-ms`` bins: one line per bin with its result count, median and highest latency.
Snapshots every second then show up as a pattern with a one-second period.

Run: ``python bench/latency_timeline.py --query q4 --snapshots on`` (``--help`` for the flags).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any

from jetlet.core import inbox as inbox_mod
from jetlet.core import processor as proc
from jetlet.nexmark import fast_generator, fast_source
from jetlet.nexmark.bench import jobs
from jetlet.pipeline import Pipeline, Sinks

FLUSH_MS = 250.0
"""How often the recorder sends what it kept to the sink."""


class ArrivalRecorderP(proc.Processor):
    """Keeps ``(arrival ms, latency ms)`` of every result; sends them as one list every :data:`FLUSH_MS`."""

    def __init__(self) -> None:
        self._kept: list[tuple[float, float]] = []
        self._last_flush = time.time() * 1000.0

    def process(self, ordinal: int, inbox: inbox_mod.Inbox) -> None:
        now = time.time() * 1000.0
        self._kept.extend([(now, now - ts) for ts, _ in inbox.take_all()])
        self._flush_if_due(now)

    def try_process(self) -> bool:
        self._flush_if_due(time.time() * 1000.0)
        return True

    def _flush_if_due(self, now: float) -> None:
        if self._kept and now - self._last_flush >= FLUSH_MS and self.outbox.offer((int(now), self._kept)):
            self._kept = []
            self._last_flush = now


@dataclasses.dataclass(frozen=True)
class Bin:
    """The results that arrived in ``[start_ms, start_ms + bin width)`` after the measured interval began."""

    start_ms: int
    count: int
    p50_ms: float
    max_ms: float


def timeline(pairs: Iterable[tuple[float, float]], begin_ms: float, span_ms: float, bin_ms: int) -> list[Bin]:
    """``(arrival, latency)`` pairs arriving in ``[begin_ms, begin_ms + span_ms)``, binned by arrival.

    >>> [(b.start_ms, b.count, b.max_ms) for b in timeline([(1000, 5), (1050, 7), (1250, 2)], 1000, 400, 100)]
    [(0, 2, 7), (200, 1, 2)]
    """
    bins: dict[int, list[float]] = {}
    for arrival, latency in pairs:
        if begin_ms <= arrival < begin_ms + span_ms:
            bins.setdefault(int((arrival - begin_ms) // bin_ms), []).append(latency)
    return [
        Bin(index * bin_ms, len(values), statistics.median(values), max(values))
        for index, values in sorted(bins.items())
    ]


def run(
    query: str, members: int, rate: int, snapshots: bool, warmup_s: float, seconds: float
) -> tuple[int, list[Any]]:
    """Run ``query`` paced for ``warmup_s + seconds``.

    Returns the stream's start (epoch ms) and the ``(arrival, latency)`` pairs.
    """
    with jobs.open_cluster(members) as cluster:
        config = fast_generator.FastConfig(
            rate=rate * max(members, 1), base_time=int((time.time() + 1) * 1000)
        )
        name = f"latency-timeline-{query}-{time.time_ns()}"
        pipeline = Pipeline()
        events = pipeline.read_from(fast_source.fast_nexmark_source(config, None, True))
        results = jobs.query_fn(query, jobs.LATENCY_SLIDE_MS)(events.with_native_timestamps(0))
        results.custom_transform("arrival-recorder", ArrivalRecorderP).write_to(Sinks.list(name))
        job = cluster.new_job(pipeline, jobs.job_config(snapshots, name))
        try:
            jobs.sleep_until(config.base_time / 1000 + warmup_s + seconds + 2 * FLUSH_MS / 1000)
        finally:
            jobs.stop(job)
        return config.base_time, [pair for chunk in cluster.get_list(name) for pair in chunk]


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python bench/latency_timeline.py", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--query", default="q4", help="the NEXMark query (default q4)")
    parser.add_argument("--members", type=int, default=1, help="member processes (0: embedded; default 1)")
    parser.add_argument("--rate", type=int, default=100_000, help="events/s per member (default 100,000)")
    parser.add_argument("--snapshots", choices=("on", "off"), default="on", help="EXACTLY_ONCE every 1 s")
    parser.add_argument("--warmup", type=float, default=6.0, help="seconds before the binned interval")
    parser.add_argument("--seconds", type=float, default=6.0, help="seconds binned")
    parser.add_argument("--bin-ms", type=int, default=100, help="bin width in ms (default 100)")
    args = parser.parse_args(argv)
    base, pairs = run(args.query, args.members, args.rate, args.snapshots == "on", args.warmup, args.seconds)
    begin = base + args.warmup * 1000
    print(
        f"# {args.query}, {args.rate:,} events/s per member, snapshots {args.snapshots}; "
        "latency ms by arrival"
    )
    for b in timeline(pairs, begin, args.seconds * 1000, args.bin_ms):
        print(f"{b.start_ms:6d} ms  results {b.count:6d}  p50 {b.p50_ms:8.1f}  max {b.max_ms:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
