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

The member (aiohttp, the coordinator), the demo's jobs and the benchmark
harness are imported only by the commands that run them, so a client
command starts in a fraction of a second. Ctrl-C ends any command with
status 130 and one line on stderr, never a traceback. ``python -m jetlet``
is this command line too.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import jetlet
from jetlet import commands

DEMO_DEFAULTS = {
    "repeat": 200,
    "top": 20,
    "parallelism": -1,
    "threads": 1,
    "members": 3,
    "stream_seconds": 4.0,
    "rate": 5000,
}
"""``jetlet demo``'s defaults: :class:`jetlet.demo.DemoSettings`' (a test keeps them equal)."""


def _demo(args: argparse.Namespace) -> int:
    from jetlet import demo

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


def build_parser(bench: bool = True) -> argparse.ArgumentParser:
    """The whole command line; ``bench=False`` leaves out the benchmark's flags (and its imports)."""
    parser = argparse.ArgumentParser(
        prog="jetlet", description="jetlet: a distributed stream and batch processor for Python."
    )
    parser.add_argument("--version", action="version", version=f"jetlet {jetlet.__version__}")
    commands.add_connection_options(parser, defaults=True)
    subcommands = parser.add_subparsers(dest="command", metavar="COMMAND")
    defaults = argparse.Namespace(**DEMO_DEFAULTS)
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
    _add_bench(subcommands, bench)
    commands.add_commands(subcommands)
    return parser


def _add_bench(subcommands: argparse._SubParsersAction[argparse.ArgumentParser], full: bool) -> None:
    """The ``bench`` command; its flags (the harness, which imports every query) only when ``full``."""
    bench = subcommands.add_parser("bench", help="benchmarks")
    benchmarks = bench.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    nexmark = benchmarks.add_parser(
        "nexmark", help="NEXMark throughput and latency of jetlet and its peers (see --help for --out)"
    )
    if full:
        from jetlet.nexmark.bench import harness

        harness.add_arguments(nexmark)
    nexmark.set_defaults(bench_parser=nexmark)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    try:
        return _main(arguments)
    except KeyboardInterrupt:
        print("jetlet: interrupted", file=sys.stderr)
        return commands.INTERRUPTED
    except BrokenPipeError:  # `jetlet get-map NAME | head`: the reader has all it wants
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0


def _main(arguments: list[str]) -> int:
    if arguments[:1] == ["member"]:  # every flag, --help included, belongs to the member
        from jetlet import member

        return member.main(arguments[1:])
    parser = build_parser(bench=arguments[:1] == ["bench"])
    args = parser.parse_args(arguments)
    if args.command is None:
        parser.print_help()
        return 2
    if args.command == "bench":
        from jetlet.nexmark.bench import harness

        return harness.run_parsed(args, " ".join(["jetlet", *arguments]), args.bench_parser)
    return commands.run(args.handler, args)


if __name__ == "__main__":
    sys.exit(main())
