"""The ``jetlet`` command line.

Subcommands:

* ``jetlet demo`` runs the main job: word count over the bundled text on an
  embedded instance, printing the most frequent words, the item count and
  the throughput.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Sequence

import jetlet
from jetlet import word_count


def _demo(args: argparse.Namespace) -> int:
    lines = word_count.bundled_text().splitlines() * args.repeat
    words = sum(len(word_count.tokenize(line)) for line in lines)
    print(
        f"jetlet {jetlet.__version__}: word count over {len(lines):,} lines "
        f"(bundled public-domain text x{args.repeat}), {words:,} words"
    )
    counts: list[tuple[str, int]] = []
    config = jetlet.InstanceConfig(cooperative_thread_count=args.threads)
    with jetlet.embedded(config) as jet:
        started = time.perf_counter()
        job = jet.new_job(word_count.word_count_dag(lines, counts, args.parallelism))
        job.join()
        elapsed = time.perf_counter() - started
    total = sum(count for _, count in counts)
    print(f"\n{'word':<16}{'count':>10}")
    for word, count in sorted(counts, key=lambda e: (-e[1], e[0]))[: args.top]:
        print(f"{word:<16}{count:>10,}")
    print(f"\n{total:,} words, {len(counts):,} distinct, in {elapsed:.2f} s: {total / elapsed:,.0f} words/s")
    expected = Counter(w for line in lines for w in word_count.tokenize(line))
    if dict(counts) != expected:
        print("ERROR: the counts differ from a plain-Python Counter over the same text", file=sys.stderr)
        return 1
    print("counts verified against a plain-Python collections.Counter: identical")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jetlet", description="jetlet: a distributed stream and batch processor for Python."
    )
    parser.add_argument("--version", action="version", version=f"jetlet {jetlet.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = commands.add_parser("demo", help="run the main job: word count on an embedded instance")
    demo.add_argument("--repeat", type=int, default=200, help="copies of the bundled text (default 200)")
    demo.add_argument("--top", type=int, default=20, help="how many of the most frequent words to show")
    demo.add_argument(
        "--parallelism", type=int, default=-1, help="local parallelism of the computing vertices"
    )
    demo.add_argument("--threads", type=int, default=1, help="cooperative threads (default 1)")
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
