"""The report of a NEXMark run: a Markdown section of ``bench/RESULTS.md`` and two PNG plots.

:func:`section` renders the tables (throughput per query and member count with the ratios to the
plain loop and every peer; latency percentiles per run) under a header with the command, the git
commit, the machine and the date. :func:`replace_section` puts it between :data:`BEGIN` and
:data:`END` in the results file, keeping everything else (the section is appended when the markers
are missing); the markers are those of ``bench/run_all.py``'s sections, which keeps this one when it
measures the others again. :func:`plot` draws ``nexmark_throughput.png`` (events/s per member,
one bar per query and runner) and ``nexmark_latency.png`` (latency against percentile on a
"nines" axis, one curve per latency run) with matplotlib, which is optional: without it
:func:`plot` returns the reason.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import math
import os
import platform
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jetlet.nexmark.bench import latency, plain, throughput

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


def _throughput_table(results: Results) -> str:
    plain_rates = {run.query: run.events_per_s for run in results.plain_runs}
    peer_names = sorted({peer.peer for peer in results.peers})
    peer_rates = {(p.peer, p.query): p.events_per_s for p in results.peers}
    one_member = {t.query: t.events_per_s for t in results.throughputs if t.members == 1}
    headers = ["query", "members", "events/s", "events/s per member", "scaling", "plain loop", "jetlet/plain"]
    for name in peer_names:
        headers += [name, f"jetlet/{name}"]
    rows = []
    for t in results.throughputs:
        per_member = t.events_per_s_per_member
        base = one_member.get(t.query)
        scaling = f"{t.events_per_s / base:.2f}" if base and t.members > 1 else "—"
        plain_rate = plain_rates.get(t.query)
        row = [t.query, members_label(t.members), _rate(t.events_per_s), _rate(per_member), scaling]
        row += [_rate(plain_rate), _ratio(per_member, plain_rate)]
        for name in peer_names:
            peer_rate = peer_rates.get((name, t.query))
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


def section(results: Results, commit: str, now: datetime.datetime | None = None) -> str:
    """The Markdown section (markers included)."""
    when = (now or datetime.datetime.now(datetime.UTC)).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        BEGIN,
        "## NEXMark (jetlet.nexmark.bench)\n",
        f"- Command: `{results.command}`",
        f"- Commit: {commit}",
        f"- Machine: {machine()}",
        f"- Date: {when}\n",
        "Events from the fast generator (Jet paper §7.1: 10,000 keys, person:auction:bid = 1:3:46). "
        "**Throughput** is an unpaced run's events per second (source `emittedCount` over the measured "
        "interval after a warm-up), the best of `--repeats` runs (3 by default; each run is printed in "
        "the log): the standard approximation of the highest sustainable rate. "
        "1+ members are member processes of a local cluster (`embedded`: in the harness's process). "
        "Q5 in throughput runs: 10 s window sliding by 1 s, top auction. The plain loop is each query "
        "as a tight Python loop over the same events, generation included; ratios are jetlet's "
        "events/s per member over the peer's.\n",
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
    for t in results.throughputs:
        series.setdefault(f"jetlet, {members_label(t.members)}", {})[t.query] = t.events_per_s_per_member
    for run in results.plain_runs:
        series.setdefault("plain loop", {})[run.query] = run.events_per_s
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
    axes.set_title("jetlet NEXMark throughput (unpaced) and peers")
    axes.legend(fontsize="small")
