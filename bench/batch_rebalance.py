"""Record batches across members: NEXMark batch Q1 with its bid batches rebalanced over two members.

``.rebalance()`` after the batch source sends about half of the batches to the other member, so
the run pays the network edge's encode and decode per batch (:mod:`jetlet._network.tasklets`).
Each run first checks a bounded job (100,000 events) against plain Python, then measures an
unbounded one: after ``--warmup`` s, the source's emitted batches and the CPU seconds of the
driver and both members are read twice, ``--seconds`` apart.

``--trees A,B`` compares code trees (each a checkout's ``worker`` directory, e.g. one made with
``git archive <commit> worker | tar -x -C /tmp/before``): every round runs this script once per
tree, in turn, as a subprocess with that tree first on ``PYTHONPATH`` (the members inherit it),
and the medians and spreads of events per CPU-second are printed per tree. Without ``--trees``
it measures the code it runs on. Run ``python bench/batch_rebalance.py --help``.
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import re
import statistics
import subprocess
import sys
import time
from typing import Any

from jetlet.local_cluster import local_cluster
from jetlet.nexmark import batch_queries, fast_generator
from jetlet.nexmark.batch_source import BATCH_EVENTS, batch_nexmark_source, bid_rows
from jetlet.nexmark.bench import cpu, jobs
from jetlet.nexmark.queries import DOLLAR_TO_EURO_DENOMINATOR, DOLLAR_TO_EURO_NUMERATOR
from jetlet.pipeline import Pipeline, Sinks
from jetlet.testing import wait_until

CHECK_EVENTS = 100_000
MEMBERS = 2


def _pipeline(config: fast_generator.FastConfig, count: int | None, list_name: str) -> Pipeline:
    p = Pipeline()
    bids = p.read_from(batch_nexmark_source(config, count)).with_native_timestamps(0).rebalance()
    results = batch_queries.q1_currency_conversion(bids)
    if count is None:
        recorder = functools.partial(jobs.LatencyRecorderP, 0, 0)
        results = results.custom_transform(jobs.RECORDER_NAME, recorder)
    results.write_to(Sinks.list(list_name))
    return p


def _check(cluster: Any) -> None:
    """A bounded run's rows against plain Python's Q1 over the same events."""
    config = fast_generator.FastConfig(rate=100_000, keys=2_000)
    expected = [
        (a, b, price * DOLLAR_TO_EURO_NUMERATOR // DOLLAR_TO_EURO_DENOMINATOR, t)
        for a, b, price, t in bid_rows(fast_generator.fast_events(range(CHECK_EVENTS), config))
    ]
    job = cluster.new_job(_pipeline(config, CHECK_EVENTS, "check"))
    wait_until(
        lambda: sum(map(len, cluster.get_list("check"))) >= len(expected) or job.future.done(),
        "the check's rows",
        120,
    )
    jobs.stop(job)
    if collections.Counter(batch_queries.rows(cluster.get_list("check"))) != collections.Counter(expected):
        raise SystemExit("batch Q1 across two members differs from plain Python")


def run_once(seconds: float, warmup: float) -> float:
    """One checked, measured run on this process's code; prints and returns M events per CPU-second."""
    with local_cluster(MEMBERS) as cluster:
        _check(cluster)
        config = fast_generator.FastConfig(base_time=int(time.time() * 1000))
        name = f"batch-rebalance-{time.time_ns()}"
        meter = cpu.Meter.of(jobs.member_pids(cluster))
        job = cluster.new_job(_pipeline(config, None, name), jobs.job_config(False, name))

        def read() -> tuple[int, int, dict[int, float], float]:
            metrics = job.metrics()
            crossed = sum(v.get("distributedItemsIn", 0) for v in metrics.values())
            emitted = jobs.counter(metrics, "batch-nexmark", "emittedCount")
            return emitted * BATCH_EVENTS, crossed, meter.read(), time.time()

        try:
            jobs.sleep_until(time.time() + warmup)
            events0, crossed0, cpu0, at0 = read()
            jobs.sleep_until(at0 + seconds)
            events1, crossed1, cpu1, at1 = read()
        finally:
            jobs.stop(job)
    rate = (events1 - events0) / cpu.used(cpu0, cpu1) / 1e6
    print(
        f"RESULT {rate:.3f} M events/CPU-s, {(events1 - events0) / (at1 - at0) / 1e6:.2f} M events/s, "
        f"{crossed1 - crossed0} batches crossed members",
        flush=True,
    )
    return rate


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", default="", help="comma-separated worker directories to compare")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (with --trees)")
    parser.add_argument("--seconds", type=float, default=8.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=4.0, help="seconds before measuring")
    args = parser.parse_args(argv)
    if not args.trees:
        run_once(args.seconds, args.warmup)
        return 0
    trees = [os.path.abspath(tree) for tree in args.trees.split(",") if tree]
    rates: dict[str, list[float]] = {tree: [] for tree in trees}
    for round_index in range(args.rounds):
        for tree in trees:
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([tree, os.environ.get("PYTHONPATH", "")])}
            command = [sys.executable, __file__, "--seconds", str(args.seconds), "--warmup", str(args.warmup)]
            out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
            found = re.search(r"RESULT ([0-9.]+)", out)
            if found is None:
                raise SystemExit(f"no result from {tree}: {out}")
            rates[tree].append(float(found.group(1)))
            print(f"round {round_index} {tree}: {out.strip()}", flush=True)
    for tree, values in rates.items():
        print(
            f"{tree}: median {statistics.median(values):.2f} M events/CPU-s "
            f"(min {min(values):.2f}, max {max(values):.2f}, {len(values)} runs)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
