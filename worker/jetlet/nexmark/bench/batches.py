"""The record-batch path's throughput: NEXMark Q1, Q2 and Q5 on bid batches next to the row queries.

One measurement is :func:`measure`: one query on one path, unpaced, on a cluster (a local cluster
of one member process for the issue's "through the engine on one member"), measured as
:mod:`.throughput` measures the row path: after ``warmup_s``, the source vertex's event count
and the CPU seconds of the driver and every member are read twice, ``seconds`` apart. On the
batch path the event count is the source's user counter
:data:`~jetlet.nexmark.batch_source.EVENTS_METRIC` (its ``emittedCount`` counts rows, the bids):
the same event numbers as the row path's (the batch source makes only their bids: persons and
auctions, 8 % of the numbers, which Q1, Q2 and Q5 drop, are never built). Both paths' event
times follow ``FastConfig.rate`` (1 M events/s), and Q5 is the 10 s window sliding by 1 s.

:func:`main` runs both paths of each query in interleaved rounds on one cluster and prints the
median events per CPU-second (and per wall second) of each, with their ratio: run
``python bench/nexmark_batches.py --help``.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import statistics
import time
from collections.abc import Sequence
from typing import Any

from jetlet.nexmark import batch_queries, fast_generator
from jetlet.nexmark.batch_source import BATCH_EVENTS, EVENTS_METRIC, batch_nexmark_source
from jetlet.nexmark.bench import cpu, jobs, throughput
from jetlet.pipeline import Pipeline, Sinks

BATCH_SOURCE_NAME = "batch-nexmark"
QUERIES = ("q1", "q2", "q5")


def build_batch_pipeline(
    query: str, config: fast_generator.FastConfig, list_name: str, batch_events: int = BATCH_EVENTS
) -> Pipeline:
    """The measured batch-path job: bid batches, the query, the row harness's result counter."""
    pipeline = Pipeline()
    source = batch_nexmark_source(config, batch_events=batch_events)
    bids = pipeline.read_from(source).with_native_timestamps(0)
    if query == "q5":
        results = batch_queries.q5_hot_items(bids, jobs.WINDOW_MS, jobs.THROUGHPUT_SLIDE_MS)
    else:
        results = batch_queries.BATCH_QUERIES[query](bids)
    recorder = functools.partial(jobs.LatencyRecorderP, 0, 0)
    results.custom_transform(jobs.RECORDER_NAME, recorder).write_to(Sinks.list(list_name))
    return pipeline


def _counts(job: Any, meter: cpu.Meter) -> tuple[int, int, float, dict[int, float]]:
    metrics = job.metrics()
    cpu_times = meter.read()
    at = time.time()
    events = int(metrics.sum(EVENTS_METRIC, vertex=BATCH_SOURCE_NAME))
    return events, jobs.counter(metrics, jobs.RECORDER_NAME, jobs.RESULT_COUNT), at, cpu_times


def measure(
    cluster: Any, query: str, members: int, seconds: float, warmup_s: float, batch_events: int = BATCH_EVENTS
) -> throughput.Throughput:
    """Run ``query`` on the batch path, unpaced, ``batch_events`` numbers per batch, and measure
    ``seconds`` after ``warmup_s``."""
    config = fast_generator.FastConfig(base_time=int(time.time() * 1000))
    name = f"nexmark-batch-throughput-{query}-{time.time_ns()}"
    meter = cpu.Meter.of(jobs.member_pids(cluster))
    pipeline = build_batch_pipeline(query, config, name, batch_events)
    job = cluster.new_job(pipeline, jobs.job_config(False, name))
    try:
        jobs.sleep_until(time.time() + warmup_s)
        events0, results0, at0, cpu0 = _counts(job, meter)
        jobs.sleep_until(at0 + seconds)
        events1, results1, at1, cpu1 = _counts(job, meter)
    finally:
        jobs.stop(job)
    return throughput.Throughput(
        query, members, events1 - events0, results1 - results0, at1 - at0, cpu.used(cpu0, cpu1)
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Pair:
    """One round of one query: the row path's run and the batch path's at one batch size."""

    row: throughput.Throughput
    batch: throughput.Throughput
    batch_events: int = BATCH_EVENTS


def per_cpu_second(run: throughput.Throughput) -> float:
    """Events per CPU-second of a run (all measured processes together)."""
    return run.events / run.cpu_seconds if run.cpu_seconds else 0.0


def report(pairs: dict[str, list[Pair]]) -> str:
    """A Markdown table of the medians per query and batch size."""
    lines = [
        "| query | events per batch | row M events/CPU-s | batch M events/CPU-s | batch/row "
        "| row M events/s | batch M events/s |",
        "|---|---|---|---|---|---|---|",
    ]
    for query, all_runs in pairs.items():
        for size in sorted({p.batch_events for p in all_runs}):
            runs = [p for p in all_runs if p.batch_events == size]
            lines.append(_report_line(query, size, runs))
    return "\n".join(lines)


def _report_line(query: str, batch_events: int, runs: list[Pair]) -> str:
    row = statistics.median(per_cpu_second(p.row) for p in runs) / 1e6
    batch = statistics.median(per_cpu_second(p.batch) for p in runs) / 1e6
    row_wall = statistics.median(p.row.events_per_s for p in runs) / 1e6
    batch_wall = statistics.median(p.batch.events_per_s for p in runs) / 1e6
    ratio = statistics.median(per_cpu_second(p.batch) / max(per_cpu_second(p.row), 1e-9) for p in runs)
    return (
        f"| {query} | {batch_events:,} | {row:.2f} | {batch:.2f} | {ratio:.1f}x "
        f"| {row_wall:.2f} | {batch_wall:.2f} |"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Interleaved rounds of row and batch runs of Q1, Q2, Q5 on one member; prints the medians."""
    parser = argparse.ArgumentParser(prog="python bench/nexmark_batches.py", description=__doc__)
    parser.add_argument("--queries", default=",".join(QUERIES), help="comma-separated, of q1,q2,q5")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved row/batch rounds per query")
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds before measuring")
    parser.add_argument("--members", type=int, default=1, help="member processes (0: embedded)")
    parser.add_argument(
        "--batch-events",
        default=str(BATCH_EVENTS),
        help=f"event numbers per batch, comma-separated to compare sizes in the same rounds "
        f"(default {BATCH_EVENTS})",
    )
    args = parser.parse_args(argv)
    queries = [q for q in args.queries.split(",") if q]
    if unknown := set(queries) - set(QUERIES):
        parser.error(f"unknown queries {sorted(unknown)}; choose among {QUERIES}")
    sizes = _batch_sizes(parser, args.batch_events)
    pairs: dict[str, list[Pair]] = {q: [] for q in queries}
    with jobs.open_cluster(args.members) as cluster:
        for round_index in range(args.rounds):
            for query in queries:
                row = throughput.measure(cluster, query, args.members, args.seconds, args.warmup, round_index)
                # the sizes' order rotates from round to round, as the row harness's contenders do
                for size in sizes[round_index % len(sizes) :] + sizes[: round_index % len(sizes)]:
                    batch = measure(cluster, query, args.members, args.seconds, args.warmup, size)
                    pairs[query].append(Pair(row, batch, size))
                    print(
                        f"round {round_index} {query}: row {per_cpu_second(row) / 1e6:.2f} M events/CPU-s, "
                        f"batch of {size:,} {per_cpu_second(batch) / 1e6:.2f} M events/CPU-s "
                        f"(batch {batch.events} events, {batch.results} results in {batch.seconds:.1f} s)",
                        flush=True,
                    )
    print(report(pairs))
    return 0


def _batch_sizes(parser: argparse.ArgumentParser, text: str) -> list[int]:
    sizes: list[int] = []
    for part in text.split(","):
        try:
            size = int(part)
        except ValueError:
            size = 0
        if size < 1:
            parser.error(f"--batch-events: {part!r} is not a whole number >= 1")
        sizes.append(size)
    return sizes
