"""``jetlet bench nexmark``: run the NEXMark benchmark and write its report.

The order of a run: one cluster is started for each member count of ``--members`` and
``--latency-members`` (0: embedded), all at once. Throughput is measured in ``--repeats``
interleaved rounds (:mod:`.paired`): round ``r`` runs every query on every contender — jetlet on
each member count (:mod:`.throughput`) and the plain-Python loop (:mod:`.plain`, when ``--peers``
names ``plain``) — query by query, the contenders of a query back to back in an order that
rotates from round to round, so that all of them see the same load; each run also counts the CPU
time of the driver and the member processes (:mod:`.cpu`). The report gives the medians over the
rounds with their spreads, and the ratios paired by round (jetlet over the plain loop, 2 members
over 1) — never a best-of. Then the clusters not needed for latency are stopped, and for the member
counts of ``--latency-members`` latency is measured at each rate of ``--rate`` with snapshots off
and/or on (:mod:`.latency`); then the peers of ``--peers`` run once per query
(``bench/nexmark_peers``, when this is a source checkout that has it); finally the Markdown section
is printed (:mod:`.report`), its header naming the interpreter and whether it was built with PGO and
LTO (:mod:`.interpreter`). Progress is printed as it goes, every run of every round included.
``--quick`` is a one-minute smoke run. ``--source-split`` says how the source is split among its
processors: by default Q4 and Q6 read it split by auction id (``jobs.by_auction``), every other
query by stride.

Where it writes: ``jetlet bench nexmark`` writes nothing unless told — ``--out DIR`` for the
section (``DIR/nexmark.md``) and the plots, ``--results FILE`` for a Markdown file whose NEXMark
section is replaced — so that run from an install it never creates ``bench/`` in the current
directory. ``bench/nexmark.py`` (``make bench``) defaults to the checkout's ``bench/out/nexmark``,
``bench/RESULTS.md`` and ``bench/``, anchored at the checkout, not the current directory; with
``--quick`` it too writes only where ``--out`` and ``--results`` say, so a smoke run never
replaces the committed results.

A ``--rate`` of ``half`` means 50 % of the query's throughput measured in the same run (the median
per member), the issue's example of a sustainable fixed rate.

The paired throughput table alone (5 rounds, every query on 1 and 2 members next to the plain
loop; printed, written nowhere), and the whole section into ``bench/RESULTS.md``::

    python bench/nexmark.py --mode throughput --members 1,2 --repeats 5 --peers plain --no-report
    python bench/nexmark.py --repeats 5
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jetlet.nexmark.bench import interpreter, jobs, latency, paired, plain, report, throughput

REPO_ROOT = Path(__file__).resolve().parents[4]
"""The source checkout's root (``worker/jetlet/nexmark/bench`` → repository)."""
DEFAULT_RATE = 100_000
"""Events per second per member of a latency run (the issue's target rate)."""
PLAIN = "plain"
PEER_NAMES = ("pyspark", "bytewax", "pyflink", "pyflink2", "hazelcast", "hazelcast2")
"""The peers ``--peers`` runs by default (besides the plain loop); ``bench.nexmark_peers.PEERS`` has all."""


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    """What to run; see :func:`add_arguments` for each field's flag."""

    queries: tuple[str, ...]
    mode: str
    members: tuple[int, ...]
    latency_members: tuple[int, ...]
    seconds: float
    warmup_s: float
    latency_seconds: float
    rates: tuple[str, ...]
    snapshots: str
    peers: tuple[str, ...]
    peer_events: int
    peer_timeout_s: float
    plain_seconds: float
    out: Path | None
    """Where the section (``nexmark.md``) goes (None: nowhere)."""
    results: Path | None
    plots: Path | None
    repeats: int = 1
    """Interleaved throughput rounds: each runs every query once on every contender (see the doc)."""
    stretch_windowed: bool = True
    """Measure Q5 and Q7 long enough for 10,000 window results (see ``latency.seconds_for``)."""
    source_split: str = "auto"
    """How the source is split among its processors (``jobs.SOURCE_SPLITS``): ``auto`` reads Q4 and Q6
    split by auction id, as a topic partitioned by auction; ``stride`` every query by stride."""


def _csv(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in _csv(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from exc
    if not values or any(value < 0 for value in values):
        raise argparse.ArgumentTypeError(f"expected integers >= 0, got {text!r}")
    return values


def add_arguments(parser: argparse.ArgumentParser, checkout_defaults: bool = False) -> None:
    """The benchmark's flags (shared by ``jetlet bench nexmark`` and ``bench/nexmark.py``).

    With ``checkout_defaults`` (``bench/nexmark.py``) a full run writes into the checkout's
    ``bench/`` by default; without (``jetlet bench nexmark``) nothing is written unless asked.
    """
    parser.add_argument("--queries", type=_csv, help="comma-separated, e.g. q1,q2,q5 (default: all)")
    parser.add_argument("--mode", choices=("throughput", "latency", "all"), default="all")
    parser.add_argument(
        "--members",
        type=_ints,
        default=(1, 2),
        help="member counts for throughput (0: embedded); default 1,2",
    )
    parser.add_argument(
        "--latency-members", type=_ints, default=(1,), help="member counts for latency runs (default 1)"
    )
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds of a throughput run")
    parser.add_argument("--warmup", type=float, default=3.0, help="warm-up seconds before measuring")
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        metavar="N",
        help="interleaved throughput rounds (default 3): each runs every query once on every member "
        "count and the plain loop, back to back; medians, spreads and per-round (paired) ratios are "
        "reported",
    )
    parser.add_argument(
        "--latency-seconds", type=float, default=15.0, help="measured seconds of a latency run (default 15)"
    )
    parser.add_argument(
        "--rate",
        type=_csv,
        default=(str(DEFAULT_RATE),),
        help="latency input rates, events/s per member, comma-separated; 'half' = 50%% of throughput",
    )
    parser.add_argument(
        "--snapshots", choices=("off", "on", "both"), default="both",
        help="latency runs without and/or with EXACTLY_ONCE snapshots every second (default both)",
    )  # fmt: skip
    parser.add_argument(
        "--peers",
        type=_csv,
        default=(PLAIN, *PEER_NAMES),
        help="plain and peers of bench/nexmark_peers, comma-separated (default "
        + ",".join((PLAIN, *PEER_NAMES))
        + ")",
    )
    parser.add_argument("--peer-events", type=int, default=500_000, help="events each peer processes")
    parser.add_argument("--peer-timeout", type=float, default=600.0, help="seconds a peer run may take")
    parser.add_argument("--plain-seconds", type=float, default=3.0, help="seconds of each plain loop")
    where = "the checkout's bench/out/nexmark (not with --quick)" if checkout_defaults else "none"
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help=f"write the section (DIR/nexmark.md) and the plots here (default: {where})",
    )
    parser.add_argument(
        "--results",
        type=Path,
        default=None,
        metavar="FILE",
        help="Markdown file whose NEXMark section to replace (default: "
        + ("the checkout's bench/RESULTS.md, not with --quick)" if checkout_defaults else "none)"),
    )
    parser.add_argument(
        "--plots", type=Path, default=None, metavar="DIR", help="directory of the PNG plots (default: --out)"
    )
    parser.add_argument(
        "--source-split",
        choices=jobs.SOURCE_SPLITS,
        default="auto",
        help="auto (default): Q4 and Q6 read the source split by auction id, as a topic partitioned by "
        "auction, and winning bids needs no exchange of bids; stride: every query reads it split by "
        "stride (Q4 and Q6 then broadcast the auctions)",
    )
    parser.add_argument("--no-report", action="store_true", help="print only; write no results or plots")
    parser.set_defaults(checkout_defaults=checkout_defaults)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a one-minute smoke run: q1,q2,q5, 1 member, short runs, no snapshots, plain peer only",
    )


def settings_from(args: argparse.Namespace) -> Settings:
    """The settings the parsed flags ask for (``--quick`` overrides the sizes)."""
    queries = tuple(args.queries) if args.queries else jobs.available_queries()
    unknown = [q for q in queries if q not in jobs.available_queries()]
    if unknown:
        raise ValueError(f"unknown queries {unknown}; this jetlet has {', '.join(jobs.available_queries())}")
    for rate in args.rate:
        if rate != "half" and not (rate.isdigit() and int(rate) > 0):
            raise ValueError(f"--rate takes positive integers or 'half', got {rate!r}")
    destinations = _destinations(args)
    settings = Settings(
        queries=queries,
        mode=args.mode,
        members=tuple(args.members),
        latency_members=tuple(args.latency_members),
        seconds=args.seconds,
        warmup_s=args.warmup,
        latency_seconds=args.latency_seconds,
        rates=tuple(args.rate),
        snapshots=args.snapshots,
        peers=tuple(args.peers),
        peer_events=args.peer_events,
        peer_timeout_s=args.peer_timeout,
        plain_seconds=args.plain_seconds,
        out=destinations["out"],
        results=destinations["results"],
        plots=destinations["plots"],
        repeats=args.repeats,
        source_split=args.source_split,
    )
    if settings.repeats < 1:
        raise ValueError(f"--repeats must be at least 1, got {settings.repeats}")
    if args.quick:
        settings = dataclasses.replace(
            settings,
            queries=tuple(args.queries) if args.queries else ("q1", "q2", "q5"),
            members=(1,),
            latency_members=(1,),
            seconds=2.0,
            warmup_s=1.0,
            latency_seconds=3.0,
            snapshots="off",
            peers=(PLAIN,),
            plain_seconds=1.0,
            repeats=1,
            stretch_windowed=False,
        )
    return settings


def _destinations(args: argparse.Namespace) -> dict[str, Path | None]:
    """``out``, ``results`` and ``plots``: what the flags say, else the checkout's (see the module doc)."""
    out, results, plots = args.out, args.results, args.plots
    if getattr(args, "checkout_defaults", False) and not args.quick:
        bench = REPO_ROOT / "bench"
        out = out if out is not None else bench / "out" / "nexmark"
        results = results if results is not None else bench / "RESULTS.md"
        plots = plots if plots is not None else bench
    if args.no_report:
        return {"out": None, "results": None, "plots": None}
    return {
        "out": out,
        "results": results if results is not None and str(results) else None,
        "plots": plots if plots is not None else out,
    }


def _say(text: str) -> None:
    print(text, flush=True)


def _snapshot_modes(settings: Settings) -> tuple[bool, ...]:
    return {"off": (False,), "on": (True,), "both": (False, True)}[settings.snapshots]


def _rates(settings: Settings, per_member: float | None) -> list[int]:
    """The latency rates of ``--rate``; ``half`` is half of ``per_member`` (none when not measured)."""
    rates = []
    for rate in settings.rates:
        if rate != "half":
            rates.append(int(rate))
        elif per_member is not None:
            rates.append(max(int(per_member / 2), 1))
    return rates


def _median_per_member(results: report.Results, query: str, members: int) -> float | None:
    rates = [
        t.events_per_s_per_member for t in results.throughputs if (t.query, t.members) == (query, members)
    ]
    return statistics.median(rates) if rates else None


Contender = int | str
"""A member count (jetlet) or :data:`PLAIN` (the plain loop)."""


def _contender_label(contender: Contender) -> str:
    return "plain loop" if contender == PLAIN else report.members_label(int(contender))


def _run_rounds(settings: Settings, clusters: dict[int, Any], results: report.Results) -> None:
    """The interleaved throughput rounds (see the module doc) on ``clusters`` and the plain loop."""
    contenders: list[Contender] = [*clusters]
    if PLAIN in settings.peers:
        contenders.append(PLAIN)
        for query in settings.queries:
            if query not in plain.PLAIN_QUERIES:
                results.notes.append(f"plain loop: none written for {query} yet")
                _say(f"  plain {query}: no plain loop")
    if not contenders:
        return
    order = ", ".join(_contender_label(c) for c in contenders)
    _say(f"throughput: {settings.repeats} interleaved round(s) of {order} ...")
    for index, query, contender in paired.schedule(settings.repeats, settings.queries, contenders):
        where = (
            f"  round {index + 1}/{settings.repeats} {query} {_contender_label(contender)}"
            f" (load {report.load_average()})"
        )
        if contender == PLAIN:
            if query in plain.PLAIN_QUERIES:
                loop = plain.measure(query, settings.plain_seconds, index)
                results.plain_runs.append(loop)
                _say(f"{where}: {loop.events_per_s:,.0f} events/s, {_micros(loop.cpu_us_per_event)}")
            continue
        members = int(contender)
        run = throughput.measure(
            clusters[members], query, members, settings.seconds, settings.warmup_s, index,
            split=settings.source_split,
        )  # fmt: skip
        results.throughputs.append(run)
        _say(
            f"{where}: {run.events_per_s:,.0f} events/s ({run.events_per_s_per_member:,.0f} per member), "
            f"{_micros(run.cpu_us_per_event)}, {run.results:,} results"
        )


def _micros(value: float | None) -> str:
    return "CPU not measured" if value is None else f"{value:.2f} CPU µs/event"


def _run_clusters(settings: Settings, results: report.Results) -> None:
    """Start the clusters, run the throughput rounds, stop those latency does not need, run latency."""
    do_throughput = settings.mode in ("throughput", "all")
    throughput_members = settings.members if do_throughput else ()
    latency_members = settings.latency_members if settings.mode in ("latency", "all") else ()
    with contextlib.ExitStack() as every:
        clusters: dict[int, tuple[contextlib.ExitStack, Any]] = {}
        for members in dict.fromkeys((*throughput_members, *latency_members)):
            _say(f"starting {report.members_label(members)} ...")
            own = every.enter_context(contextlib.ExitStack())
            clusters[members] = (own, own.enter_context(jobs.open_cluster(members)))
        if do_throughput:
            _run_rounds(settings, {m: clusters[m][1] for m in throughput_members}, results)
        for members, (own, _) in clusters.items():
            if members not in latency_members:
                own.close()
        for members in latency_members:
            cluster = clusters[members][1]
            for query in settings.queries:
                for rate in _rates(settings, _median_per_member(results, query, members)):
                    for snapshots in _snapshot_modes(settings):
                        _latency_run(settings, cluster, query, members, rate, snapshots, results)


def _latency_run(
    settings: Settings,
    cluster: Any,
    query: str,
    members: int,
    rate: int,
    snapshots: bool,
    results: report.Results,
) -> None:
    run, samples = latency.measure(
        cluster, query, members, rate,
        seconds=_latency_seconds(settings, query), warmup_s=settings.warmup_s,
        snapshots=snapshots, split=settings.source_split,
    )  # fmt: skip
    results.latencies.append(run)
    results.curves[run.label] = report.curve(samples)
    shown = ", ".join(f"p{p:g} {ms:.1f}" for p, ms in run.percentiles.items()) or "no samples"
    flag = "" if run.enough else " (fewer than 10,000 samples)"
    _say(
        f"  latency {run.label}: {run.samples:,} samples{flag}: {shown} ms; "
        f"source behind {run.behind_events:,}"
    )


def _latency_seconds(settings: Settings, query: str) -> float:
    if not settings.stretch_windowed:
        return settings.latency_seconds
    return latency.seconds_for(query, settings.latency_seconds)


def _peer_module() -> Any:
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    return importlib.import_module("bench.nexmark_peers")


def _run_peers(settings: Settings, results: report.Results) -> None:
    peers = [peer for peer in settings.peers if peer != PLAIN]
    if not peers:
        return
    try:
        module = _peer_module()
    except ImportError as exc:
        results.notes.append(
            f"peers {', '.join(peers)} not run: bench/nexmark_peers is not available ({exc})"
        )
        _say(f"  peers not run: {exc}")
        return
    for peer in peers:
        for query in settings.queries:
            _say(f"  {peer} {query} ({settings.peer_events:,} events) ...")
            try:
                run = module.run_peer(peer, query, settings.peer_events, settings.peer_timeout_s)
            except Exception as exc:  # a peer's failure is a result of the run, not the end of it
                results.peers.append(report.PeerResult(peer, query, None, f"failed: {exc!r}"[:300]))
                _say(f"    failed: {exc!r}")
                continue
            rate = run.events_per_s if run.expressible else None
            results.peers.append(report.PeerResult(peer, query, rate, run.note or ""))
            shown = f"{rate:,.0f} events/s" if rate else "not expressible"
            _say(f"    {shown} {run.note or ''}")
        results.peer_interpreters[peer] = _peer_interpreter(peer)


def _peer_interpreter(peer: str) -> str:
    """The interpreter line of ``peer``'s venv (a Java peer: its JVM and versions), or why it is unknown."""
    try:
        if peer in getattr(_peer_module(), "HAZELCAST_PEERS", {}):
            return str(importlib.import_module("bench.nexmark_peers.hazelcast_runner").runtime_line())
        venvs = importlib.import_module("bench.nexmark_peers.venvs")
        return interpreter.describe_executable(str(venvs.venv_python(peer))).line()
    except (ImportError, OSError, ValueError) as exc:
        return f"unknown ({exc})"


def run(settings: Settings, command: str) -> report.Results:
    """Measure everything ``settings`` asks for and write the report; returns the results."""
    started = time.time()
    results = report.Results(command, rounds=settings.repeats)
    _say(f"interpreter: {results.interpreter.line()}")
    split = [q for q in settings.queries if jobs.by_auction(q, settings.source_split)]
    if split:
        note = (
            f"{', '.join(q.upper() for q in split)} read the source split by auction id, as a topic "
            "partitioned by auction (--source-split auto; 'stride' reads every query by stride)"
        )
        results.notes.append(note)
        _say(note)
    _run_clusters(settings, results)
    if settings.mode in ("throughput", "all"):
        _run_peers(settings, results)
    _write(settings, results)
    _say(f"done in {time.time() - started:,.0f} s")
    return results


def _write(settings: Settings, results: report.Results) -> None:
    plots: list[str] = []
    if settings.plots is not None:
        settings.plots.mkdir(parents=True, exist_ok=True)
        try:
            plots = report.plot(results, settings.plots)
        except ImportError:
            message = "matplotlib is not installed: no plots (pip install matplotlib, or the bench extra)"
            results.notes.append(message)
            _say(message)
    text = report.section(results, report.git_commit(REPO_ROOT))
    if settings.out is not None:
        settings.out.mkdir(parents=True, exist_ok=True)
        (settings.out / "nexmark.md").write_text(text, encoding="utf-8")
        _say(f"wrote {settings.out / 'nexmark.md'}")
    if settings.results is not None:
        report.write_results(settings.results, text)
        _say(f"wrote {settings.results}")
    for path in plots:
        _say(f"wrote {path}")
    print(text, flush=True)


def main(
    argv: Sequence[str] | None = None, prog: str = "jetlet bench nexmark", checkout_defaults: bool = False
) -> int:
    """Parse ``argv`` and run; exit status 0, or 2 for a usage error."""
    parser = argparse.ArgumentParser(
        prog=prog, description="NEXMark throughput and latency of jetlet and peers"
    )
    add_arguments(parser, checkout_defaults)
    arguments = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(arguments)
    return run_parsed(args, " ".join([prog, *arguments]), parser)


def run_parsed(args: argparse.Namespace, command: str, parser: argparse.ArgumentParser) -> int:
    """Run with flags already parsed (the ``jetlet`` command line's entry)."""
    try:
        settings = settings_from(args)
    except ValueError as exc:
        parser.error(str(exc))
    run(settings, command)
    return 0
