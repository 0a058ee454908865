"""The main job (``jetlet demo``, ``make run``): a batch and a streaming pipeline on a local cluster.

:func:`run` starts a local cluster of ``members`` member processes on
loopback (``members=0`` runs in this process on an embedded instance
instead), then:

1. counts the words of the bundled public-domain text with the Pipeline API,
   prints the most frequent words, the item count and the throughput, and
   checks the counts against ``collections.Counter``;
2. streams trades at a fixed rate for a few seconds, counts them per ticker
   in one-second tumbling event-time windows, prints each window as it
   closes (read live from an observable), and checks that every trade was
   counted in exactly one window;
3. on a cluster, runs a streaming job with exactly-once snapshots, kills one
   member with SIGKILL midway, shows the job restarting on the members left
   from its last snapshot, and checks the committed output (a two-phase file
   sink) against plain Python: nothing lost, nothing duplicated.

It returns 0 when every check passes.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import os
import pathlib
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import jetlet
from jetlet import AggregateOperations, word_count
from jetlet.local_cluster import local_cluster
from jetlet.pipeline import Pipeline, Sinks, Sources, WindowDefinition

TICKERS = ("AAPL", "AMZN", "GOOG", "MSFT", "NVDA")
FAULT_TOLERANCE_SECONDS = 3.0
"""The fault-tolerance job streams at least this long, time for two snapshots before the kill."""


@dataclasses.dataclass(frozen=True)
class DemoSettings:
    """What ``jetlet demo`` runs; the CLI's flags."""

    repeat: int = 200
    top: int = 20
    parallelism: int = -1
    threads: int = 1
    members: int = 3
    stream_seconds: float = 4.0
    rate: int = 5000


@contextlib.contextmanager
def _instance(settings: DemoSettings) -> Iterator[Any]:
    if settings.members == 0:
        with jetlet.embedded(cooperative_thread_count=settings.threads) as jet:
            yield jet
        return
    args = ["--cooperative-thread-count", str(settings.threads)]
    with local_cluster(settings.members, args) as client:
        yield client


def run(settings: DemoSettings) -> int:
    where = (
        "an embedded instance (this process)"
        if settings.members == 0
        else f"a local cluster of {settings.members} member processes"
    )
    print(f"jetlet {jetlet.__version__}: starting {where}")
    started = time.perf_counter()
    with _instance(settings) as jet:
        print(f"ready in {time.perf_counter() - started:.1f} s\n")
        status = _word_count(jet, settings)
        if settings.stream_seconds > 0:
            status |= _streaming(jet, settings)
            if settings.members >= 2:
                status |= _fault_tolerance(jet, settings)
    return status


def _identity(word: str) -> str:
    return word


def _word_count(jet: Any, settings: DemoSettings) -> int:
    """The batch job: word count written with the Pipeline API, verified."""
    lines = word_count.bundled_text().splitlines() * settings.repeat
    words = sum(len(word_count.tokenize(line)) for line in lines)
    source = f"bundled public-domain text x{settings.repeat}"
    print(f"word count over {len(lines):,} lines ({source}), {words:,} words")
    p = Pipeline()
    tokens = p.read_from(Sources.from_iterable(lines, name="lines")).flat_map(word_count.tokenize)
    if settings.parallelism != -1:
        tokens.set_local_parallelism(settings.parallelism)
    tokens.grouping_key(_identity).aggregate(AggregateOperations.counting()).write_to(Sinks.map("counts"))
    started = time.perf_counter()
    jet.new_job(p).join()
    elapsed = time.perf_counter() - started
    counts = dict(jet.get_map("counts"))
    total = sum(counts.values())
    print(f"\n{'word':<16}{'count':>10}")
    for word, count in sorted(counts.items(), key=lambda e: (-e[1], e[0]))[: settings.top]:
        print(f"{word:<16}{count:>10,}")
    print(f"\n{total:,} words, {len(counts):,} distinct, in {elapsed:.2f} s: {total / elapsed:,.0f} words/s")
    expected = Counter(w for line in lines for w in word_count.tokenize(line))
    if counts != expected:
        print("ERROR: the counts differ from a plain-Python Counter over the same text", file=sys.stderr)
        return 1
    print("counts verified against a plain-Python collections.Counter: identical")
    return 0


def _trade(sequence: int) -> tuple[str, int]:
    return (TICKERS[(sequence * 7 + sequence // 3) % len(TICKERS)], sequence)


def _ticker(trade: tuple[str, int]) -> str:
    return trade[0]


def _streaming(jet: Any, settings: DemoSettings) -> int:
    """The streaming job: trades at a fixed rate, counted per ticker in 1 s tumbling windows, live."""
    rate = settings.rate
    count = int(rate * settings.stream_seconds)
    print(
        f"\nstreaming: {rate:,} trades/s for {settings.stream_seconds:g} s, counted per ticker "
        "in 1 s tumbling windows (event time = ingestion time), printed as each window closes"
    )
    p = Pipeline()
    (
        p.read_from(Sources.test_stream(rate, _trade, count))
        .with_ingestion_timestamps()
        .grouping_key(_ticker)
        .window(WindowDefinition.tumbling(1000))
        .aggregate(AggregateOperations.counting())
        .write_to(Sinks.observable("trades-per-second"))
    )
    job = jet.new_job(p)
    by_window: dict[int, dict[str, int]] = {}
    counted = 0
    for result in jet.get_observable("trades-per-second"):
        counted += result.result
        by_window.setdefault(result.start, {})[result.key] = result.result
        for start in sorted(w for w in by_window if w < result.start):
            _print_window(start, by_window.pop(start))
    for start in sorted(by_window):
        _print_window(start, by_window[start])
    job.join()
    if counted != count:
        print(f"ERROR: the windows counted {counted:,} trades of {count:,}", file=sys.stderr)
        return 1
    print(f"every one of the {count:,} trades counted in exactly one window")
    return 0


def _print_window(start: int, counts: dict[str, int]) -> None:
    clock = time.strftime("%H:%M:%S", time.localtime(start / 1000))
    cells = "  ".join(f"{ticker} {counts.get(ticker, 0):>5,}" for ticker in TICKERS)
    print(f"  [{clock}, +1 s)  {cells}  total {sum(counts.values()):>6,}")


def _fault_tolerance(client: Any, settings: DemoSettings) -> int:
    """Exactly-once through a member's death: kill the last member midway, then check the output."""
    rate = settings.rate
    count = int(rate * max(settings.stream_seconds, FAULT_TOLERANCE_SECONDS))
    victim = len(client.pids) - 1
    print(
        f"\nfault tolerance: {count:,} trades at {rate:,}/s, counted per ticker in 1 s event-time windows, "
        "exactly-once (a snapshot every 500 ms), written by a two-phase file sink;\n"
        f"member m{victim + 1} is killed midway"
    )
    with tempfile.TemporaryDirectory(prefix="jetlet-demo-") as tmp:
        out = pathlib.Path(tmp)
        p = Pipeline()
        (
            p.read_from(Sources.test_stream(rate, _trade, count))
            .with_timestamps(_trade_time(rate), 0)
            .grouping_key(_ticker)
            .window(WindowDefinition.tumbling(1000))
            .aggregate(AggregateOperations.counting())
            .map(_window_line)
            .write_to(Sinks.files(str(out)))
        )
        job_config = jetlet.JobConfig(
            name="exactly-once trades",
            processing_guarantee=jetlet.ProcessingGuarantee.EXACTLY_ONCE,
            snapshot_interval_millis=500,
        )
        job = client.new_job(p, job_config)
        started = time.monotonic()
        while job.snapshot.get("count", 0) < 2 and not job.status.is_terminal:
            time.sleep(0.05)
        if job.status.is_terminal:
            print(f"ERROR: the job ended ({job.status.name}) before the kill", file=sys.stderr)
            return 1
        before = job.snapshot
        os.kill(client.pids[victim], signal.SIGKILL)
        killed = time.monotonic()
        print(
            f"  {killed - started:4.1f} s  killed member m{victim + 1} (SIGKILL); the last complete snapshot "
            f"is #{before.get('id')} ({before.get('entries', 0)} entries, {before.get('bytes', 0):,} bytes)"
        )
        while job.snapshot.get("id", 0) <= before.get("id", 0) and not job.status.is_terminal:
            time.sleep(0.05)
        members = sorted({name.split("/")[0] for name in job.metrics()})
        print(
            f"  {time.monotonic() - started:4.1f} s  the job runs again on {', '.join(members)}, "
            f"restored from snapshot #{before.get('id')}: "
            f"its next snapshot completed {time.monotonic() - killed:.1f} s after the kill"
        )
        job.join()
        found: Counter[tuple[int, str, int]] = Counter()
        for path in out.iterdir():
            if path.is_file() and not path.name.startswith("."):
                found.update(ast.literal_eval(line) for line in path.read_text().splitlines())
    expected = Counter(
        (window_end, ticker, n)
        for (window_end, ticker), n in Counter(
            ((seq * 1000 // rate // 1000 + 1) * 1000, _trade(seq)[0]) for seq in range(count)
        ).items()
    )
    print(
        f"  {time.monotonic() - started:4.1f} s  the job completed: {len(found):,} window results committed"
    )
    if found != expected:
        lost, extra = sum((expected - found).values()), sum((found - expected).values())
        print(f"ERROR: {lost} window results lost, {extra} duplicated or wrong", file=sys.stderr)
        return 1
    print("window results verified against plain Python: identical, nothing lost, nothing duplicated")
    return 0


def _trade_time(rate: int) -> Any:
    def timestamp(trade: tuple[str, int]) -> int:
        return trade[1] * 1000 // rate

    return timestamp


def _window_line(result: Any) -> tuple[int, str, int]:
    return (result.end, result.key, result.result)
