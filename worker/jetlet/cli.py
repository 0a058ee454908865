"""The ``jetlet`` command line.

Subcommands:

* ``jetlet demo`` runs the main jobs on an embedded instance: word count
  over the bundled text (a Pipeline API batch job), printing the most
  frequent words, the item count and the throughput; then a few seconds of a
  streaming job counting trades per ticker in tumbling event-time windows,
  printed live as each window closes.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Sequence

import jetlet
from jetlet import AggregateOperations, word_count
from jetlet.pipeline import Pipeline, Sinks, Sources, WindowDefinition


def _identity(word: str) -> str:
    return word


def _word_count(args: argparse.Namespace) -> int:
    """The batch half of the demo: word count written with the Pipeline API, verified."""
    lines = word_count.bundled_text().splitlines() * args.repeat
    words = sum(len(word_count.tokenize(line)) for line in lines)
    print(
        f"jetlet {jetlet.__version__}: word count over {len(lines):,} lines "
        f"(bundled public-domain text x{args.repeat}), {words:,} words"
    )
    p = Pipeline()
    tokens = p.read_from(Sources.from_iterable(lines, name="lines")).flat_map(word_count.tokenize)
    if args.parallelism != -1:
        tokens.set_local_parallelism(args.parallelism)
    tokens.grouping_key(_identity).aggregate(AggregateOperations.counting()).write_to(Sinks.map("counts"))
    config = jetlet.InstanceConfig(cooperative_thread_count=args.threads)
    with jetlet.embedded(config) as jet:
        started = time.perf_counter()
        jet.new_job(p).join()
        elapsed = time.perf_counter() - started
        counts = dict(jet.get_map("counts"))
    total = sum(counts.values())
    print(f"\n{'word':<16}{'count':>10}")
    for word, count in sorted(counts.items(), key=lambda e: (-e[1], e[0]))[: args.top]:
        print(f"{word:<16}{count:>10,}")
    print(f"\n{total:,} words, {len(counts):,} distinct, in {elapsed:.2f} s: {total / elapsed:,.0f} words/s")
    expected = Counter(w for line in lines for w in word_count.tokenize(line))
    if counts != expected:
        print("ERROR: the counts differ from a plain-Python Counter over the same text", file=sys.stderr)
        return 1
    print("counts verified against a plain-Python collections.Counter: identical")
    return 0


_TICKERS = ("AAPL", "AMZN", "GOOG", "MSFT", "NVDA")


def _trade(sequence: int) -> tuple[str, int]:
    return (_TICKERS[(sequence * 7 + sequence // 3) % len(_TICKERS)], sequence)


def _ticker(trade: tuple[str, int]) -> str:
    return trade[0]


def _streaming(args: argparse.Namespace) -> int:
    """The streaming half: trades at a fixed rate, counted per ticker in 1 s tumbling windows, live."""
    rate = args.rate
    count = int(rate * args.stream_seconds)
    print(
        f"\nstreaming: {rate:,} trades/s for {args.stream_seconds:g} s, counted per ticker "
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
    with jetlet.embedded() as jet:
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
    cells = "  ".join(f"{ticker} {counts.get(ticker, 0):>5,}" for ticker in _TICKERS)
    print(f"  [{clock}, +1 s)  {cells}  total {sum(counts.values()):>6,}")


def _demo(args: argparse.Namespace) -> int:
    status = _word_count(args)
    if args.stream_seconds > 0:
        status |= _streaming(args)
    return status


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jetlet", description="jetlet: a distributed stream and batch processor for Python."
    )
    parser.add_argument("--version", action="version", version=f"jetlet {jetlet.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = commands.add_parser("demo", help="run the main jobs: batch word count and a streaming window job")
    demo.add_argument("--repeat", type=int, default=200, help="copies of the bundled text (default 200)")
    demo.add_argument("--top", type=int, default=20, help="how many of the most frequent words to show")
    demo.add_argument(
        "--parallelism", type=int, default=-1, help="local parallelism of the computing vertices"
    )
    demo.add_argument("--threads", type=int, default=1, help="cooperative threads (default 1)")
    demo.add_argument(
        "--stream-seconds", type=float, default=4.0, help="length of the streaming job (0 skips it)"
    )
    demo.add_argument("--rate", type=int, default=5000, help="trades per second of the streaming job")
    demo.set_defaults(handler=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    result: int = args.handler(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
