"""Live progress of a job: what ``jetlet submit --wait`` shows while it waits.

Theory of operation
-------------------
Polling and drawing are apart. :func:`follow` polls the job through the
client every ``interval`` seconds — a ``join`` long-poll of at most that
long, so the end of the job is seen at once, then the job's metrics — and
turns each poll into a :class:`Reading`: the status, the items the source
vertices emitted and the sink vertices received, the total the sources know
(the ``sourceTotalCount`` metric, which a source over a sized collection
reports), the sinks' lowest watermark, the last snapshot and the restarts.
A :class:`Screen` draws readings:

* on a terminal, one line rewritten in place (carriage return, then erase
  to the end of the line): a bar with the percentage and the items when the
  total is known (a batch job over a collection), else a status line with
  the counts, their rates, the watermark lag and the last snapshot (a
  streaming job, or a batch job whose sources do not know their total);
* elsewhere (a pipe, a file, a CI log), the same facts as a plain line with
  no escape codes, one per reading (poll every few seconds there).

"Read" is what the sources emitted, which runs ahead of the processing by
what the queues and inboxes hold (a batch of up to a queue's size per
processor): in a small job the bar reaches 100 % a moment before the job
ends. The count at the sinks is what they received.

The last reading is drawn when the job ends, and the line is ended. Rates
are measured over the readings of the last :data:`RATE_WINDOW_S` seconds, so
one slow poll does not make them jump. Only :func:`counts` knows the shape of
``job.metrics()``.

>>> reading = Reading(3.0, "RUNNING", Counts(read=1500, total=3000, at_sinks=1400), now_ms=0)
>>> bar_line(reading, (500.0, 450.0), width=80)
'RUNNING [#####-----]  50%  1,500/3,000 read  500/s  1,400 at sinks  0:03'
>>> plain_line("wordcount", reading, (500.0, 450.0))
'job wordcount: RUNNING, 1,500/3,000 items read (50%), 500 items/s, 1,400 at the sinks, elapsed 0:03'
"""

from __future__ import annotations

import collections
import dataclasses
import time
from collections.abc import Callable
from typing import Protocol, TextIO

from jetlet import errors, records
from jetlet import job as job_mod
from jetlet._cluster import dag_graph
from jetlet.core.processors import sources as source_processors
from jetlet.metrics import job_metrics

RATE_WINDOW_S = 5.0
"""Rates are the change over the readings of this many seconds."""
_MAX_LAG_S = 86_400.0
"""A watermark further than this from the wall clock is not event time in milliseconds: no lag shown."""


@dataclasses.dataclass(frozen=True)
class Counts:
    """What the job's metrics say about its progress, summed over members and processors."""

    read: int = 0
    """Items the source vertices emitted."""
    total: int | None = None
    """Items the sources emit in all, when every source processor knows (None: unknown)."""
    at_sinks: int = 0
    """Items the sink vertices received."""
    watermark: int | None = None
    """The lowest watermark the sinks observed (event time, ms); None before any."""


@dataclasses.dataclass(frozen=True)
class Reading:
    """One poll of the job."""

    elapsed_s: float
    """Seconds since the wait began."""
    status: str
    counts: Counts
    now_ms: int
    """The wall clock at the poll (for the watermark lag and the snapshot's age)."""
    snapshot: records.SnapshotInfo | None = None
    restarts: int = 0


def dag_ends(dag_dot: str) -> tuple[frozenset[str], frozenset[str]]:
    """The source vertices (no inbound edge) and the sink vertices (no outbound edge) of a DAG's DOT text.

    >>> dag_ends('digraph DAG {\\n\\t"a" [x];\\n\\t"b" [x];\\n\\t"a" -> "b" [label="unicast"];\\n}')
    (frozenset({'a'}), frozenset({'b'}))
    """
    graph = dag_graph.from_dot(dag_dot)
    vertices = {v["name"] for v in graph["vertices"]}
    with_inputs = {e["destination"] for e in graph["edges"]}
    with_outputs = {e["source"] for e in graph["edges"]}
    return frozenset(vertices - with_inputs), frozenset(vertices - with_outputs)


def counts(metrics: job_metrics.JobMetrics, sources: frozenset[str], sinks: frozenset[str]) -> Counts:
    """The progress in a job's labelled metrics (``job.metrics()``), summed over members and processors.

    A processor's ``emittedCount`` is per output ordinal and an item goes to every output, so a
    source's items read are its largest ordinal's count; when stateless stages run in the source
    (the planner's source chaining) it says what it read in ``sourceReadCount``.

    >>> M = job_metrics.Measurement
    >>> metrics = job_metrics.JobMetrics([
    ...     M("emittedCount", {"member": "m1", "vertex": "src", "proc": "0", "ordinal": "0"}, 5),
    ...     M("emittedCount", {"member": "m1", "vertex": "src", "proc": "0", "ordinal": "1"}, 5),
    ...     M("sourceTotalCount", {"member": "m1", "vertex": "src", "proc": "0"}, 9),
    ...     M("receivedCount", {"member": "m1", "vertex": "out", "proc": "0", "ordinal": "0"}, 4),
    ...     M("topObservedWm", {"member": "m1", "vertex": "out", "proc": "0"}, 70)])
    >>> counts(metrics, frozenset({"src"}), frozenset({"out"}))
    Counts(read=5, total=9, at_sinks=4, watermark=70)
    """

    def processor(m: job_metrics.Measurement) -> tuple[str, str, str]:
        return m.labels.get("member", ""), m.labels.get("vertex", ""), m.labels.get("proc", "")

    emitted: dict[tuple[str, str, str], float] = {}
    for m in metrics.filter("emittedCount"):
        if m.labels.get("vertex") in sources:
            emitted[processor(m)] = max(emitted.get(processor(m), 0), m.value)
    for m in metrics.filter(source_processors.READ_METRIC):  # stateless stages run in the source
        if m.labels.get("vertex") in sources:
            emitted[processor(m)] = m.value
    totals = {processor(m): m.value for m in metrics.filter(source_processors.TOTAL_METRIC)}
    known = bool(emitted) and all(p in totals for p in emitted)
    at_sinks = sum(m.value for m in metrics.filter("receivedCount") if m.labels.get("vertex") in sinks)
    watermarks = [m.value for m in metrics.filter("topObservedWm") if m.labels.get("vertex") in sinks]
    return Counts(
        int(sum(emitted.values())),
        int(sum(totals[p] for p in emitted)) if known else None,
        int(at_sinks),
        int(min(watermarks)) if watermarks else None,
    )


class Rates:
    """Items per second, read and at the sinks, over the readings of the last :data:`RATE_WINDOW_S`.

    The window starts with nothing counted at time 0 (the wait's start), so the first reading has a rate.
    """

    def __init__(self) -> None:
        self._window: collections.deque[tuple[float, int, int]] = collections.deque([(0.0, 0, 0)])

    def add(self, reading: Reading) -> tuple[float, float]:
        """Add a reading; the rates (read, at the sinks) since the oldest reading still in the window."""
        now = (reading.elapsed_s, reading.counts.read, reading.counts.at_sinks)
        self._window.append(now)
        while len(self._window) > 2 and now[0] - self._window[1][0] >= RATE_WINDOW_S:
            self._window.popleft()
        return _rates(self._window[0], now)


def _rates(first: tuple[float, int, int], last: tuple[float, int, int]) -> tuple[float, float]:
    span = last[0] - first[0]
    if span <= 0:
        return 0.0, 0.0
    return max(0.0, (last[1] - first[1]) / span), max(0.0, (last[2] - first[2]) / span)


def _number(value: float) -> str:
    return f"{round(value):,}"


def _bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _seconds(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 60 else _clock(seconds)


def _percent(counts: Counts) -> int:
    assert counts.total is not None
    return 100 if counts.total == 0 else min(100, counts.read * 100 // counts.total)


def _facts(reading: Reading) -> list[str]:
    """The streaming facts, as short phrases: watermark lag, last snapshot, restarts."""
    facts = []
    watermark = reading.counts.watermark
    if watermark is not None and 0 <= (reading.now_ms - watermark) / 1000 < _MAX_LAG_S:
        facts.append(f"watermark lag {_seconds((reading.now_ms - watermark) / 1000)}")
    snapshot = reading.snapshot
    if snapshot is not None:
        age = max(0.0, (reading.now_ms - snapshot.time) / 1000)
        size = f"{_bytes(snapshot.bytes)} in {snapshot.duration_ms} ms"
        facts.append(f"snapshot {snapshot.id} {_seconds(age)} ago ({size})")
    if reading.restarts:
        facts.append(f"{reading.restarts} restart{'s' if reading.restarts > 1 else ''}")
    return facts


def bar_line(reading: Reading, rates: tuple[float, float], width: int) -> str:
    """The terminal's line, shorter than ``width``: a bar when the total is known, else the counts
    with their rates. The bar is 10 characters wide on 80 columns, up to 30 on 100 and more."""
    counts = reading.counts
    tail = [*_facts(reading), _clock(reading.elapsed_s)]
    if counts.total is None:
        parts = [
            reading.status,
            f"{_number(counts.read)} read ({_number(rates[0])}/s)",
            f"{_number(counts.at_sinks)} at sinks ({_number(rates[1])}/s)",
        ]
    else:
        parts = [
            f"{_percent(counts):3d}%",
            f"{_number(counts.read)}/{_number(counts.total)} read",
            f"{_number(rates[0])}/s",
            f"{_number(counts.at_sinks)} at sinks",
        ]
        room = min(30, max(10, width - 70))  # the same for every reading: the bar does not jump
        filled = _percent(counts) * room // 100
        parts[0] = f"{reading.status} [{'#' * filled}{'-' * (room - filled)}] {parts[0]}"
    line = "  ".join([*parts, *tail])
    return line if len(line) < width else line[: max(0, width - 4)] + "..."


def plain_line(name: str, reading: Reading, rates: tuple[float, float]) -> str:
    """A line for a log: the same facts as :func:`bar_line`, as a sentence, no bar and no escapes."""
    counts = reading.counts
    if counts.total is not None:
        read = f"{_number(counts.read)}/{_number(counts.total)} items read ({_percent(counts)}%)"
    else:
        read = f"{_number(counts.read)} items read"
    parts = [
        read,
        f"{_number(rates[0])} items/s",
        f"{_number(counts.at_sinks)} at the sinks",
        *_facts(reading),
        f"elapsed {_clock(reading.elapsed_s)}",
    ]
    return f"job {name}: {reading.status}, " + ", ".join(parts)


class Screen:
    """Draws readings on ``out``: in place on a terminal (``tty``), else as plain lines."""

    def __init__(self, out: TextIO, name: str, tty: bool, width: int = 80) -> None:
        self._out = out
        self._name = name
        self._tty = tty
        self._width = width
        self._rates = Rates()
        self._open = False

    def show(self, reading: Reading) -> None:
        """Draw a reading of a job that runs on (rates over the last few seconds)."""
        self._draw(reading, self._rates.add(reading))

    def _draw(self, reading: Reading, rates: tuple[float, float]) -> None:
        if self._tty:
            self._out.write("\r" + bar_line(reading, rates, self._width) + "\x1b[K")
            self._open = True
        else:
            self._out.write(plain_line(self._name, reading, rates) + "\n")
        self._out.flush()

    def finish(self, reading: Reading) -> None:
        """Draw the job's last reading, with the rates over the whole wait, and end the line."""
        self._draw(
            reading, _rates((0.0, 0, 0), (reading.elapsed_s, reading.counts.read, reading.counts.at_sinks))
        )
        self.close()

    def close(self) -> None:
        """End the terminal's line (before a message, a prompt or the exit)."""
        if self._open:
            self._out.write("\n")
            self._out.flush()
            self._open = False


class Followed(Protocol):
    """What :func:`follow` needs of a job (a :class:`jetlet.client.RemoteJob` is one)."""

    @property
    def dag_dot(self) -> str: ...

    @property
    def last_record(self) -> records.JobRecord: ...

    def join(self, timeout: float | None = None) -> None: ...

    def metrics(self) -> job_metrics.JobMetrics: ...


def follow(
    job: Followed,
    screen: Screen,
    interval: float,
    clock: Callable[[], float] = time.monotonic,
    wall_ms: Callable[[], int] = lambda: int(time.time() * 1000),
) -> None:
    """Show ``job``'s progress on ``screen`` until it ends; raise what ``job.join`` raises.

    Each round is a ``join`` of at most ``interval`` seconds, then a read of the
    metrics; the last reading is drawn (and the line ended) when the job ends,
    failed or not.
    """
    sources, sinks = dag_ends(job.dag_dot)
    started = clock()

    def reading() -> Reading:
        metrics = job.metrics()
        record = job.last_record
        cancelled = record.status is job_mod.JobStatus.FAILED and record.cancelled
        status = "CANCELLED" if cancelled else record.status.value
        return Reading(
            clock() - started,
            status,
            counts(metrics, sources, sinks),
            wall_ms(),
            record.last_snapshot,
            record.restarts,
        )

    while True:
        try:
            job.join(timeout=interval)
        except TimeoutError:
            screen.show(reading())
            continue
        except (errors.JobFailedError, errors.JobCancelledError):
            screen.finish(reading())
            raise
        screen.finish(reading())
        return
