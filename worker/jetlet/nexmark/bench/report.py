"""The report of a NEXMark run: a Markdown section of ``bench/RESULTS.md`` and two PNG plots.

:func:`section` renders the tables (throughput per query and member count with the ratios to the
plain loop and every peer; latency percentiles per run) under a header with the command, the git
commit, the machine, the interpreter and its build (:mod:`.interpreter`) and the date. Throughput
comes in interleaved rounds (:mod:`.paired`): each cell is the median over the rounds with its
spread, rates and CPU microseconds per event alike, and the ratios (jetlet over the plain loop,
wall-clock and per CPU-second; 2 members over 1) are taken per round, then summarized the same way.
A peer (PySpark, Bytewax) runs once per query, after the rounds: its ratios are not paired.
:func:`replace_section` puts the section between :data:`BEGIN` and :data:`END` in the results file,
keeping everything else (the section is appended when the markers are missing); the markers are
those of ``bench/run_all.py``'s sections, which keeps this one when it measures the others again.
:func:`plot` draws ``nexmark_throughput.png`` (events/s per member, one bar per query and runner)
and ``nexmark_latency.png`` (latency against percentile on a "nines" axis, one curve per latency
run) with matplotlib, which is optional: without it :func:`plot` returns the reason.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import math
import os
import platform
import statistics
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jetlet.nexmark.bench import interpreter, latency, paired, plain, throughput

BEGIN = "<!-- section:nexmark -->"
END = "<!-- /section:nexmark -->"
CURVE_PERCENTILES = tuple(100 - 100 / 10 ** (k / 4) for k in range(0, 17))
"""0, 43.8, ..., 99.99 %: a quarter of a "nine" apart, for the latency curves."""


@dataclasses.dataclass(frozen=True, slots=True)
class PeerResult:
    """A peer's run of one query (the harness's view of ``bench.nexmark_peers.PeerRun``)."""

    peer: str
    query: str
    events_per_s: float | None
    note: str


@dataclasses.dataclass(slots=True)
class Results:
    """Everything one run measured."""

    command: str
    throughputs: list[throughput.Throughput] = dataclasses.field(default_factory=list)
    latencies: list[latency.Latency] = dataclasses.field(default_factory=list)
    curves: dict[str, list[tuple[float, float]]] = dataclasses.field(default_factory=dict)
    """Per latency run's label: ``(percentile, ms)`` points for the plot."""
    plain_runs: list[plain.PlainRun] = dataclasses.field(default_factory=list)
    peers: list[PeerResult] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    rounds: int = 1
    """Interleaved throughput rounds (``--repeats``)."""
    interpreter: interpreter.Interpreter = dataclasses.field(default_factory=interpreter.describe)
    """The harness's Python, which the member processes and the plain loop run too."""
    peer_interpreters: dict[str, str] = dataclasses.field(default_factory=dict)
    """Per peer: its venv's interpreter line (or why it is unknown)."""


def curve(sorted_samples: Sequence[float]) -> list[tuple[float, float]]:
    """The latency at each of :data:`CURVE_PERCENTILES` that the samples can resolve."""
    if not sorted_samples:
        return []
    usable = [p for p in CURVE_PERCENTILES if p == 0 or 100 - p >= 100 / len(sorted_samples)]
    return [(p, sorted_samples[0] if p == 0 else latency.percentile(sorted_samples, p)) for p in usable]


def git_commit(directory: Path) -> str:
    """``git rev-parse --short HEAD`` in ``directory``, or ``unknown``."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=directory, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() or "unknown"


def machine() -> str:
    """Platform, CPU count and Python version."""
    return f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


def members_label(members: int) -> str:
    return "embedded" if members == 0 else f"{members} member{'s' if members > 1 else ''}"


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def _ratio(ours: float, theirs: float | None) -> str:
    return "—" if not theirs else f"{ours / theirs:.2f}"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    align = [":---"] + ["---:"] * (len(headers) - 1)
    return "\n".join("| " + " | ".join(cells) + " |" for cells in [headers, align, *rows]) + "\n"


RATE = "{:,.0f}"
RATIO = "{:.2f}"
MICROS = "{:.2f}"


@dataclasses.dataclass(frozen=True, slots=True)
class ByRound:
    """One contender's figures of one query, by round: events/s (per member) and CPU µs per event."""

    rates: dict[int, float]
    per_member: dict[int, float]
    cpu_us: dict[int, float]


def jetlet_by_round(results: Results) -> dict[tuple[str, int], ByRound]:
    """Per ``(query, members)``, in the order of the table (member counts, then queries, as first run)."""
    members = dict.fromkeys(t.members for t in results.throughputs)
    queries = dict.fromkeys(t.query for t in results.throughputs)
    grouped: dict[tuple[str, int], ByRound] = {
        (q, m): ByRound({}, {}, {}) for m in members for q in queries
        if any(t.query == q and t.members == m for t in results.throughputs)
    }  # fmt: skip
    for t in results.throughputs:
        figures = grouped[(t.query, t.members)]
        figures.rates[t.round] = t.events_per_s
        figures.per_member[t.round] = t.events_per_s_per_member
        if t.cpu_us_per_event is not None:
            figures.cpu_us[t.round] = t.cpu_us_per_event
    return grouped


def plain_by_round(results: Results) -> dict[str, ByRound]:
    """Per query, the plain loop's figures by round."""
    grouped: dict[str, ByRound] = {}
    for run in results.plain_runs:
        figures = grouped.setdefault(run.query, ByRound({}, {}, {}))
        figures.rates[run.round] = figures.per_member[run.round] = run.events_per_s
        if run.cpu_us_per_event is not None:
            figures.cpu_us[run.round] = run.cpu_us_per_event
    return grouped


def _spread(values: dict[int, float], number: str) -> str:
    return paired.Spread.of(values.values()).text(number) if values else "—"


def _paired(numerators: dict[int, float], denominators: dict[int, float]) -> str:
    spread = paired.paired_spread(numerators, denominators)
    return "—" if spread is None else spread.text(RATIO)


def _throughput_table(results: Results) -> str:
    plain_figures = plain_by_round(results)
    peer_names = sorted({peer.peer for peer in results.peers})
    peer_rates = {(p.peer, p.query): p.events_per_s for p in results.peers}
    jetlet_figures = jetlet_by_round(results)
    headers = ["query", "members", "events/s", "events/s per member", "CPU µs/event", "scaling"]
    headers += ["plain loop", "plain CPU µs/event", "jetlet/plain", "jetlet/plain per CPU-s"]
    for name in peer_names:
        headers += [name, f"jetlet/{name}"]
    rows = []
    for (query, members), figures in jetlet_figures.items():
        one = jetlet_figures.get((query, 1))
        scaling = _paired(figures.rates, one.rates) if one is not None and members > 1 else "—"
        row = [query, members_label(members), _spread(figures.rates, RATE)]
        row += [_spread(figures.per_member, RATE), _spread(figures.cpu_us, MICROS), scaling]
        loop = plain_figures.get(query, ByRound({}, {}, {}))
        row += [_spread(loop.rates, RATE), _spread(loop.cpu_us, MICROS)]
        row += [_paired(figures.per_member, loop.rates), _paired(loop.cpu_us, figures.cpu_us)]
        per_member = statistics.median(figures.per_member.values())
        for name in peer_names:
            peer_rate = peer_rates.get((name, query))
            row += [_rate(peer_rate) if peer_rate else "not expressible/run", _ratio(per_member, peer_rate)]
        rows.append(row)
    return _table(headers, rows)


def _latency_table(results: Results) -> str:
    headers = ["query", "members", "events/s per member", "snapshots", "samples"]
    headers += [f"p{p:g} ms" for p in latency.PERCENTILES] + ["source behind (events)"]
    rows = []
    for run in results.latencies:
        slide = f" (slide {run.slide_ms} ms)" if run.query == "q5" else ""
        samples = f"{run.samples:,}" + ("" if run.enough else " (< 10,000)")
        row = [run.query + slide, members_label(run.members), f"{run.rate_per_member:,}"]
        row += ["every 1 s, EXACTLY_ONCE" if run.snapshots else "off", samples]
        row += [f"{run.percentiles[p]:.1f}" if run.percentiles else "—" for p in latency.PERCENTILES]
        row.append(f"{run.behind_events:,}")
        rows.append(row)
    return _table(headers, rows)


def _peer_notes(results: Results) -> str:
    lines = [f"- {p.peer} {p.query}: {p.note}" for p in results.peers if p.note]
    return ("\n" + "\n".join(lines) + "\n") if lines else ""


def load_average(path: str = "/proc/loadavg") -> str:
    """The 1-, 5- and 15-minute load averages as the kernel gives them, or "not known" off Linux."""
    try:
        with open(path, encoding="ascii") as loadavg:
            return " ".join(loadavg.read().split()[:3])
    except OSError:
        return "not known"


def section(results: Results, commit: str, now: datetime.datetime | None = None) -> str:
    """The Markdown section (markers included)."""
    when = (now or datetime.datetime.now(datetime.UTC)).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        BEGIN,
        "## NEXMark (jetlet.nexmark.bench)\n",
        f"- Command: `{results.command}`",
        f"- Commit: {commit}",
        f"- Machine: {machine()}",
        f"- Interpreter: {results.interpreter.line()}",
        f"- Builds used: jetlet (harness and member processes) and the plain loop: "
        f"{results.interpreter.build}" + _peer_builds(results),
        f"- Date: {when}\n",
        "Events from the fast generator (Jet paper §7.1: 10,000 keys, person:auction:bid = 1:3:46). "
        "**Throughput** is an unpaced run's events per second (source `emittedCount` over the measured "
        "interval after a warm-up): the standard approximation of the highest sustainable rate. "
        f"The runs are interleaved: {_rounds(results.rounds)}, each running every query on every "
        "contender (jetlet on each member count, the plain loop) back to back, the contenders' order "
        "rotating from round to round, so that a query's contenders share the machine's load. Each "
        "cell is the median over the rounds, with the minimum and maximum (and the interquartile range "
        "from 4 rounds) in brackets; every run is printed in the log, with the load average before "
        "it. Ratios are paired: taken per round, then their median and spread. **CPU µs/event** is "
        "the user + system CPU time of the driver and every member process over the measured "
        "interval, per event (the plain loop: its own process); *jetlet/plain per CPU-s* is "
        "jetlet's events per CPU-second over the plain "
        "loop's, *jetlet/plain* the wall-clock events/s per member over the loop's, *scaling* the "
        "events/s over the 1-member run of the same round. "
        "1+ members are member processes of a local cluster (`embedded`: in the harness's process). "
        "Q5 in throughput runs: 10 s window sliding by 1 s, top auction. The plain loop is each query "
        "as a tight Python loop over the same events, generation included. PySpark and Bytewax run "
        "once per query after the rounds (their ratio uses jetlet's median, unpaired).\n",
    ]
    if results.throughputs:
        parts.append(_throughput_table(results))
        parts.append("![NEXMark throughput per member](nexmark_throughput.png)\n")
    if results.latencies:
        parts.append(
            "**Latency** at a fixed rate paced by the wall clock: from each event's scheduled time "
            "(= its event time) to the arrival of the result it triggers at the sink (window results: "
            "from the window's end); nearest-rank percentiles over every result of the measured "
            "interval. Map/filter latencies include < 1 ms of timestamp rounding.\n"
        )
        parts.append(_latency_table(results))
        parts.append("![NEXMark latency percentiles](nexmark_latency.png)\n")
    if results.notes:
        parts.append("\n".join(f"- {note}" for note in results.notes) + "\n")
    parts.append(_peer_notes(results))
    parts.append(END)
    return "\n".join(part for part in parts if part) + "\n"


def _rounds(rounds: int) -> str:
    return "one round" if rounds == 1 else f"{rounds} rounds"


def _peer_builds(results: Results) -> str:
    return "".join(f"; {peer}: {line}" for peer, line in sorted(results.peer_interpreters.items()))


def replace_section(text: str, new_section: str) -> str:
    """``text`` with the part between the markers replaced by ``new_section`` (appended if absent)."""
    begin, end = text.find(BEGIN), text.find(END)
    if begin == -1 or end == -1 or end < begin:
        separator = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
        return text + separator + new_section
    tail = text[end + len(END) :]
    return text[:begin] + new_section.rstrip("\n") + tail


def write_results(path: Path, new_section: str) -> None:
    """Replace (or add) the section in the file at ``path`` (created if missing)."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    path.write_text(replace_section(text, new_section), encoding="utf-8")


def plot(results: Results, directory: Path) -> list[str]:
    """Write the PNG plots into ``directory``; returns their paths, or raises ImportError."""
    matplotlib = importlib.import_module("matplotlib")  # optional: only the benchmark needs it
    matplotlib.use("Agg")
    plt = importlib.import_module("matplotlib.pyplot")

    written = []
    if results.throughputs:
        figure, axes = plt.subplots(figsize=(10, 5))
        _throughput_bars(axes, results)
        path = directory / "nexmark_throughput.png"
        figure.tight_layout()
        figure.savefig(path, dpi=110)
        plt.close(figure)
        written.append(str(path))
    if results.curves:
        figure, axes = plt.subplots(figsize=(12, 6))
        colors: dict[str, Any] = {}  # one color per query; dashed with snapshots
        palette = plt.get_cmap("tab10")
        for label, points in results.curves.items():
            color = colors.setdefault(label.split(",")[0], palette(len(colors) % 10))
            axes.plot(
                [_nines(p) for p, _ in points], [ms for _, ms in points], marker=".", label=label,
                color=color, linestyle="-" if "no snapshots" in label else "--",
            )  # fmt: skip
        ticks = [0.0, 50.0, 90.0, 99.0, 99.9, 99.99]
        axes.set_xticks([_nines(p) for p in ticks], [f"{p:g}" for p in ticks])
        axes.set_xlabel("percentile")
        axes.set_ylabel("latency (ms)")
        axes.set_yscale("log")
        axes.set_title("jetlet NEXMark latency at a fixed input rate")
        axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
        path = directory / "nexmark_latency.png"
        figure.tight_layout()
        figure.savefig(path, dpi=110)
        plt.close(figure)
        written.append(str(path))
    return written


def _nines(p: float) -> float:
    return -math.log10(max(100 - p, 1e-6) / 100)


def _throughput_bars(axes: Any, results: Results) -> None:
    series: dict[str, dict[str, float]] = {}
    for (query, members), figures in jetlet_by_round(results).items():
        series.setdefault(f"jetlet, {members_label(members)}", {})[query] = statistics.median(
            figures.per_member.values()
        )
    for query, loop in plain_by_round(results).items():
        series.setdefault("plain loop", {})[query] = statistics.median(loop.rates.values())
    for peer in results.peers:
        if peer.events_per_s:
            series.setdefault(peer.peer, {})[peer.query] = peer.events_per_s
    query_names = sorted({q for values in series.values() for q in values}, key=lambda q: int(q[1:]))
    width = 0.8 / max(len(series), 1)
    for index, (label, values) in enumerate(series.items()):
        xs = [i + index * width for i, q in enumerate(query_names) if q in values]
        axes.bar(xs, [values[q] for q in query_names if q in values], width, label=label)
    axes.set_xticks([i + 0.4 - width / 2 for i in range(len(query_names))], query_names)
    axes.set_ylabel("events/s per member")
    axes.set_yscale("log")
    axes.set_title("jetlet NEXMark throughput (unpaced, medians of interleaved rounds) and peers")
    axes.legend(fontsize="small")
