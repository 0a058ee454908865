"""The ``jetlet`` command line.

* ``jetlet demo`` runs the main jobs (:mod:`jetlet.demo`): word count over the
  bundled text, then a few seconds of a streaming window job, on a local
  cluster of 3 member processes (``--members 0``: embedded, in this process);
* ``jetlet member`` runs a member process; ``jetlet cluster start`` a local
  cluster in the foreground; ``jetlet cluster``, ``submit``, ``list-jobs``,
  ``cancel``, ``suspend``, ``resume`` and ``restart`` work on a running
  cluster (:mod:`jetlet.commands`, which documents the exit codes);
* ``jetlet bench nexmark`` runs the NEXMark benchmark (:mod:`jetlet.nexmark.bench.harness`).

``jetlet member ARGS...`` hands every argument, ``--help`` included, to
:func:`jetlet.member.main` before any parsing here. The cluster-connection
flags (``-a``, ``--token``...) are accepted before the command, as Jet's
``jet -a ... list-jobs``, and after it; after it they win.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import jetlet
from jetlet import commands, demo, member
from jetlet.nexmark.bench import harness


def _demo(args: argparse.Namespace) -> int:
    settings = demo.DemoSettings(
        repeat=args.repeat,
        top=args.top,
        parallelism=args.parallelism,
        threads=args.threads,
        members=args.members,
        stream_seconds=args.stream_seconds,
        rate=args.rate,
    )
    if settings.members < 0:
        raise commands.CommandError(f"--members must be >= 0, got {settings.members}", commands.USAGE)
    return demo.run(settings)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jetlet", description="jetlet: a distributed stream and batch processor for Python."
    )
    parser.add_argument("--version", action="version", version=f"jetlet {jetlet.__version__}")
    commands.add_connection_options(parser, defaults=True)
    subcommands = parser.add_subparsers(dest="command", metavar="COMMAND")
    defaults = demo.DemoSettings()
    run_demo = subcommands.add_parser(
        "demo", help="run the main jobs (batch word count, streaming windows) on a local cluster"
    )
    run_demo.add_argument(
        "--repeat", type=int, default=defaults.repeat, help="copies of the bundled text (default 200)"
    )
    run_demo.add_argument("--top", type=int, default=defaults.top, help="how many frequent words to show")
    run_demo.add_argument(
        "--parallelism",
        type=int,
        default=defaults.parallelism,
        help="local parallelism of the computing vertices",
    )
    run_demo.add_argument(
        "--threads", type=int, default=defaults.threads, help="cooperative threads per member"
    )
    run_demo.add_argument(
        "--members", type=int, default=defaults.members, help="member processes (default 3; 0: embedded)"
    )
    run_demo.add_argument(
        "--stream-seconds",
        type=float,
        default=defaults.stream_seconds,
        help="length of the streaming job (0 skips it)",
    )
    run_demo.add_argument(
        "--rate", type=int, default=defaults.rate, help="trades per second of the streaming job"
    )
    run_demo.set_defaults(handler=_demo)
    _add_bench(subcommands)
    commands.add_commands(subcommands)
    return parser


def _add_bench(subcommands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bench = subcommands.add_parser("bench", help="benchmarks")
    benchmarks = bench.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    nexmark = benchmarks.add_parser(
        "nexmark", help="NEXMark throughput and latency of jetlet and its peers (writes bench/RESULTS.md)"
    )
    harness.add_arguments(nexmark)
    nexmark.set_defaults(bench_parser=nexmark)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    if arguments[:1] == ["member"]:  # every flag, --help included, belongs to the member
        return member.main(arguments[1:])
    parser = build_parser()
    args = parser.parse_args(arguments)
    if args.command is None:
        parser.print_help()
        return 2
    if args.command == "bench":
        return harness.run_parsed(args, " ".join(["jetlet", *arguments]), args.bench_parser)
    return commands.run(args.handler, args)


if __name__ == "__main__":
    sys.exit(main())
