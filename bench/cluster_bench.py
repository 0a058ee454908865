"""Cluster benchmark: jobs on 1 and 2 member processes, and a distributed edge alone.

Every measurement runs member processes on loopback (``local_cluster``), so
1 and 2 members are compared like with like (the client, the REST calls and
the job protocol cost the same); the speed-up is the 2-member throughput over
the 1-member one. This machine has 2 cores: a member's CPU-bound work runs
on one core (CPython's GIL), so 2 members is the most that can help here.

* word count (Pipeline API) over the bundled text, counts checked against
  ``collections.Counter``;
* a sliding-window count: keyed events counted in a 1 s window sliding by
  100 ms, results checked against a plain-Python frame-based count;
* a distributed edge alone: every member's source emits ``(key, payload)``
  items partitioned over the cluster, so about half cross to the other
  member; the table gives the items and megabytes per second that crossed
  (bytes from the wire format of a packet of the same items), for three
  flow-control periods.

Run: ``python bench/cluster_bench.py [--repeats N]``.
"""

from __future__ import annotations

import collections
import sys
import time
from collections.abc import Sequence
from typing import Any

import _common
from jetlet import word_count
from jetlet._network import serialization
from jetlet.aggregate import counting
from jetlet.core import DAG, Edge, processors
from jetlet.local_cluster import local_cluster
from jetlet.pipeline import Pipeline, Sinks, Sources, WindowDefinition

TEXT_COPIES = 200
WINDOW_EVENTS = 1_000_000
WINDOW_KEYS = 100
EDGE_ITEMS = 1_000_000
PERIODS_MS = (10, 100, 1000)


def _identity(word: str) -> str:
    return word


def _word_count(client: Any, lines: list[str]) -> float:
    p = Pipeline()
    p.read_from(Sources.from_iterable(lines)).flat_map(word_count.tokenize).grouping_key(_identity).aggregate(
        counting()
    ).write_to(Sinks.map("counts"))
    started = time.perf_counter()
    client.new_job(p).join()
    return time.perf_counter() - started


def _plain_sliding_count(events: list[tuple[int, int]]) -> int:
    """How many (window, key) results a 1 s window sliding by 100 ms has: frames, add and deduct."""
    frames: dict[int, collections.Counter[int]] = collections.defaultdict(collections.Counter)
    for ts, key in events:
        frames[ts // 100 * 100 + 100][key] += 1
    window: collections.Counter[int] = collections.Counter()
    results = 0
    ends = sorted(frames)
    for end in range(ends[0], ends[-1] + 1000, 100):
        window.update(frames.get(end, {}))
        results += sum(1 for value in window.values() if value)
        leaving = frames.get(end - 900)
        if leaving:
            window.subtract(leaving)
            window = +window
    return results


def _event(i: int) -> tuple[int, int]:
    """Event ``i``: 10 per millisecond, keys spread by a multiplicative hash."""
    return (i // 10, (i * 7919) % WINDOW_KEYS)


def _events(count: int) -> list[tuple[int, int]]:
    """``(timestamp_ms, key)`` in time order."""
    return [_event(i) for i in range(count)]


def _sliding_window(client: Any, count: int, name: str) -> tuple[float, int]:
    def generate(context: Any) -> Any:  # each source processor makes its share of the events itself
        return (_event(i) for i in range(context.global_processor_index, count, context.total_parallelism))

    p = Pipeline()
    (
        p.read_from(Sources.stream_from_generator(generate, name="events"))
        .with_timestamps(lambda e: e[0], allowed_lag=2000)
        .grouping_key(lambda e: e[1])
        .window(WindowDefinition.sliding(1000, 100))
        .aggregate(counting())
        .map(lambda r: 1)
        .write_to(Sinks.list(name))
    )
    started = time.perf_counter()
    client.new_job(p).join()
    return time.perf_counter() - started, len(client.get_list(name))


def _edge_dag(count: int) -> DAG:
    dag = DAG()
    source = dag.new_vertex("source", processors.source_from_iterable(range(count)))
    sink = dag.new_vertex("sink", processors.noop_p(), 1)
    dag.edge(Edge.between(source, sink).partitioned(_identity).distributed())
    return dag


def _edge(client: Any) -> tuple[float, int]:
    started = time.perf_counter()
    job = client.new_job(_edge_dag(EDGE_ITEMS))
    job.join()
    seconds = time.perf_counter() - started
    crossed = sum(v.get("distributedItemsOut", 0) for v in job.metrics().values())
    return seconds, crossed


def _bytes_per_item() -> float:
    """Wire bytes per item of a packet of 4096 ints (the edge's items), from the real format."""
    chunk = [(0, 0, 0, list(range(10**6, 10**6 + 4096)))]
    return len(serialization.dumps([1, 0, 0, chunk])) / 4096


def main(argv: Sequence[str] = ()) -> str:
    repeats = _common.parse_repeats(argv, "Cluster benchmark (1 and 2 members on loopback)")
    lines = word_count.bundled_text().splitlines() * TEXT_COPIES
    words = sum(len(word_count.tokenize(line)) for line in lines)
    expected_counts = collections.Counter(w for line in lines for w in word_count.tokenize(line))
    events = _events(WINDOW_EVENTS)
    expected_windows = _plain_sliding_count(events)
    rows = []
    rates: dict[str, dict[int, float]] = {"word count": {}, "sliding-window count": {}}
    for members in (1, 2):
        with local_cluster(members) as client:
            wc = _common.best_time(lambda c=client: _word_count(c, lines), repeats)
            if dict(client.get_map("counts")) != expected_counts:
                raise AssertionError(f"word count on {members} members differs from Counter")
            best = float("inf")
            for run in range(repeats):
                seconds, windows = _sliding_window(client, WINDOW_EVENTS, f"windows-{run}")
                best = min(best, seconds)
                if windows != expected_windows:
                    raise AssertionError(
                        f"{windows} window results on {members} members, not {expected_windows}"
                    )
        rates["word count"][members] = words / wc
        rates["sliding-window count"][members] = WINDOW_EVENTS / best
    for name, by_members in rates.items():
        for members, rate in by_members.items():
            speedup = rate / by_members[1]
            label = f"{name}, {members} member{'s' if members > 1 else ''}"
            rows.append([label, f"{rate:,.0f}", f"{speedup:.2f}"])
    per_item = _bytes_per_item()
    edge_rows = []
    for period in PERIODS_MS:
        with local_cluster(2, ["--flow-control-period-millis", str(period)]) as client:
            best_seconds, crossed = float("inf"), 0
            for _ in range(repeats):
                seconds, crossed = _edge(client)
                best_seconds = min(best_seconds, seconds)
        items_per_s = crossed / best_seconds
        edge_rows.append(
            [f"{period} ms", f"{crossed:,}", f"{items_per_s:,.0f}", f"{items_per_s * per_item / 1e6:.1f}"]
        )
    return (
        "## Cluster (member processes on loopback)\n\n"
        f"Word count: {len(lines):,} lines, {words:,} words. Sliding-window count: {WINDOW_EVENTS:,} events, "
        f"{WINDOW_KEYS:,} keys, 1 s window sliding by 100 ms ({expected_windows:,} results, checked). "
        f"Best of {repeats}, job time (submit to join) as seen by the client; speed-up over 1 member.\n\n"
        + _common.markdown_table(["workload", "items/s", "speed-up"], rows)
        + "\nA distributed edge alone: 2 members, each source emits its half of "
        f"{EDGE_ITEMS:,} ints partitioned over both members; the items that crossed to the other member, "
        f"at {per_item:.1f} wire bytes per item, by flow-control period.\n\n"
        + _common.markdown_table(["flow-control period", "items crossed", "items/s", "MB/s"], edge_rows)
    )


if __name__ == "__main__":
    print(main(sys.argv[1:]))
