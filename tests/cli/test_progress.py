"""The progress that ``jetlet submit --wait`` draws (jetlet.progress), without a cluster.

Given made-up readings (or a fake job), when the screen draws them on a terminal or
on a pipe, then the terminal gets one line redrawn in place with a bar, and the pipe
gets plain lines with the same facts and no escape codes.
"""

from __future__ import annotations

import io
from typing import Any

import pytest

import jetlet
from jetlet import Pipeline, Sinks, Sources, errors, job, progress, records
from jetlet.metrics.job_metrics import JobMetrics, Measurement

DOT = """digraph DAG {
\t"items" [localParallelism=default];
\t"map" [localParallelism=default];
\t"listSink(out)" [localParallelism=default];
\t"items" -> "map" [label="unicast"];
\t"map" -> "listSink(out)" [label="unicast"];
}"""


def _measure(name: str, member: str, vertex: str, value: float, ordinal: str | None = None) -> Measurement:
    labels = {"job_id": "0a1b", "member": member, "vertex": vertex, "proc": member[-1]}
    if ordinal is not None:
        labels["ordinal"] = ordinal
    return Measurement(name, labels, value)


def _metrics(
    read: int, at_sinks: int, total: int | None = 8000, watermark: int | None = None, known: int = 2
) -> JobMetrics:
    """Two members' measurements: the source's share of each (on two outputs), a map, the sink's."""
    found = []
    for index, member in enumerate(("m1", "m2")):
        found += [_measure("emittedCount", member, "items", read // 2, o) for o in ("0", "1")]
        if total is not None and index < known:
            found.append(_measure("sourceTotalCount", member, "items", total // 2))
        found += [
            _measure("receivedCount", member, "map", 99, "0"),
            _measure("emittedCount", member, "map", 99, "0"),
        ]
        found.append(_measure("receivedCount", member, "listSink(out)", at_sinks // 2, "0"))
        if watermark is not None:
            found.append(_measure("topObservedWm", member, "listSink(out)", watermark + index))
    return JobMetrics(found)


def test_counts_sum_the_sources_and_sinks_of_the_dag() -> None:
    sources, sinks = progress.dag_ends(DOT)
    assert (sources, sinks) == (frozenset({"items"}), frozenset({"listSink(out)"}))
    # an item goes to every output of the source: read once, not once per output
    assert progress.counts(_metrics(4000, 3000), sources, sinks) == progress.Counts(4000, 8000, 3000, None)
    # a total only when every source processor knows its share
    assert progress.counts(_metrics(4000, 3000, known=1), sources, sinks).total is None
    # the lowest watermark a sink saw; none while the sinks saw none
    assert progress.counts(_metrics(2, 2, watermark=1234), sources, sinks).watermark == 1234
    assert progress.counts(_metrics(2, 2), sources, sinks).watermark is None


def test_names_with_quotes_and_slashes_are_read_back() -> None:
    dot = 'digraph DAG {\n\t"a \\"x\\"" [p];\n\t"b/c" [p];\n\t"a \\"x\\"" -> "b/c" [label="unicast"];\n}'
    sources, sinks = progress.dag_ends(dot)
    assert (sources, sinks) == (frozenset({'a "x"'}), frozenset({"b/c"}))
    metrics = JobMetrics(
        [_measure("receivedCount", "m1", "b/c", 3, "0"), _measure("emittedCount", "m1", 'a "x"', 4, "0")]
    )
    assert progress.counts(metrics, sources, sinks) == progress.Counts(4, None, 3, None)


def _reading(elapsed: float, read: int, total: int | None = 8000, **more: Any) -> progress.Reading:
    counts = progress.Counts(read, total, more.pop("at_sinks", read // 2), more.pop("watermark", None))
    return progress.Reading(elapsed, more.pop("status", "RUNNING"), counts, more.pop("now_ms", 0), **more)


def test_a_terminal_gets_one_line_redrawn_with_a_bar() -> None:
    out = io.StringIO()
    screen = progress.Screen(out, "wc", tty=True, width=80)
    screen.show(_reading(1.0, 2000))
    screen.show(_reading(2.0, 4000))
    screen.finish(_reading(3.0, 8000, status="COMPLETED", at_sinks=8000))
    text = out.getvalue()
    lines = text.split("\r")[1:]
    assert len(lines) == 3 and text.endswith("\n") and text.count("\n") == 1
    assert all(line.rstrip("\n").endswith("\x1b[K") for line in lines)
    assert lines[0].startswith("RUNNING [##--------]  25%  2,000/8,000 read  2,000/s  1,000 at sinks  0:01")
    assert lines[1].startswith("RUNNING [#####-----]  50%  4,000/8,000 read  2,000/s")
    # the last line: 100 %, the rate over the whole wait
    assert lines[2].startswith("COMPLETED [##########] 100%  8,000/8,000 read  2,667/s  8,000 at sinks  0:03")
    assert all(len(line.removesuffix("\n").removesuffix("\x1b[K")) < 80 for line in lines)


def test_a_pipe_gets_plain_lines_with_the_same_facts() -> None:
    out = io.StringIO()
    screen = progress.Screen(out, "wc", tty=False)
    screen.show(_reading(5.0, 4000))
    screen.finish(_reading(6.5, 8000, status="COMPLETED", at_sinks=8000))
    screen.close()  # nothing more: the line is ended
    assert out.getvalue().splitlines() == [
        "job wc: RUNNING, 4,000/8,000 items read (50%), 800 items/s, 2,000 at the sinks, elapsed 0:05",
        "job wc: COMPLETED, 8,000/8,000 items read (100%), 1,231 items/s, 8,000 at the sinks, elapsed 0:06",
    ]
    assert "\x1b" not in out.getvalue() and "\r" not in out.getvalue()


def test_a_streaming_job_shows_rates_watermark_lag_and_the_last_snapshot() -> None:
    snapshot = records.SnapshotInfo(id=7, time=50_000, bytes=12_800, entries=40, duration_ms=35)
    now = 60_000
    out = io.StringIO()
    screen = progress.Screen(out, "trades", tty=True, width=160)
    screen.show(_reading(10.0, 50_000, total=None, watermark=now - 1500, now_ms=now, snapshot=snapshot))
    screen.show(_reading(12.0, 56_000, total=None, watermark=now - 1200, now_ms=now + 2000, restarts=1))
    first, second = out.getvalue().split("\r")[1:]
    assert first.startswith(
        "RUNNING  50,000 read (5,000/s)  25,000 at sinks (2,500/s)  watermark lag 1.5 s  "
        "snapshot 7 10.0 s ago (12.5 KB in 35 ms)  0:10"
    )
    # the rates over the last seconds only: 6,000 more read in 2 s (the window holds the start too)
    assert "56,000 read (4,667/s)" in second and "watermark lag 3.2 s" in second and "1 restart" in second
    plain = progress.plain_line("trades", _reading(10.0, 50_000, total=None), (5000.0, 2500.0))
    assert plain == "job trades: RUNNING, 50,000 items read, 5,000 items/s, 25,000 at the sinks, elapsed 0:10"


def test_rates_forget_readings_older_than_the_window() -> None:
    rates = progress.Rates()
    assert rates.add(_reading(1.0, 1000)) == (1000.0, 500.0)
    rates.add(_reading(2.0, 2000))
    for second in range(3, 20):
        latest = rates.add(_reading(float(second), 2000 + (second - 2) * 100))
    assert latest[0] == pytest.approx(100.0)  # the burst of the first seconds is forgotten


class _FakeJob:
    """A job that runs for ``rounds`` joins, then ends with ``ending`` (None: completed)."""

    dag_dot = DOT

    def __init__(self, rounds: int, ending: BaseException | None = None) -> None:
        self.rounds = rounds
        self.ending = ending
        self.joins: list[float | None] = []
        self.status = job.JobStatus.RUNNING

    @property
    def last_record(self) -> records.JobRecord:
        cancelled = isinstance(self.ending, errors.JobCancelledError)
        return records.JobRecord(1, "fake", self.status, 0, None, "", "", cancelled, {}, DOT)

    def join(self, timeout: float | None = None) -> None:
        self.joins.append(timeout)
        if len(self.joins) <= self.rounds:
            raise TimeoutError("still running")
        if self.ending is None:
            self.status = job.JobStatus.COMPLETED
            return
        self.status = job.JobStatus.FAILED
        raise self.ending

    def metrics(self) -> JobMetrics:
        return _metrics(2000 * len(self.joins), 1000 * len(self.joins))


def test_follow_polls_until_the_job_ends_and_draws_its_end() -> None:
    ticks = iter(range(100))
    fake = _FakeJob(rounds=2)
    out = io.StringIO()
    progress.follow(fake, progress.Screen(out, "fake", tty=False), 1.5, clock=lambda: float(next(ticks)))
    assert fake.joins == [1.5, 1.5, 1.5]
    lines = out.getvalue().splitlines()
    assert [line.split(",")[0] for line in lines] == ["job fake: RUNNING"] * 2 + ["job fake: COMPLETED"]
    assert "6,000/8,000 items read (75%)" in lines[-1]


@pytest.mark.parametrize(
    ("ending", "shown"),
    [(errors.JobFailedError("boom"), "FAILED"), (errors.JobCancelledError("by a user"), "CANCELLED")],
)
def test_follow_draws_a_failed_or_cancelled_end_then_raises(ending: BaseException, shown: str) -> None:
    out = io.StringIO()
    with pytest.raises(type(ending)):
        progress.follow(_FakeJob(rounds=0, ending=ending), progress.Screen(out, "fake", tty=True), 1.0)
    assert out.getvalue().startswith(f"\r{shown} [") and out.getvalue().endswith("\n")


def test_a_narrow_terminal_gets_a_cut_line_that_still_fits() -> None:
    line = progress.bar_line(_reading(3.0, 1500, total=3000), (500.0, 450.0), width=40)
    assert line == "RUNNING [#####-----]  50%  1,500/3,0..." and len(line) < 40


@pytest.mark.parametrize(
    ("source", "total"),
    [
        (lambda: Sources.items(*range(10)), 10),
        (lambda: Sources.from_iterable(range(7)), 7),
        (lambda: Sources.from_iterable(iter(range(5))), None),  # a one-shot iterator: unknown
    ],
)
def test_a_source_over_a_sized_collection_reports_its_total(source: Any, total: int | None) -> None:
    p = Pipeline()
    p.read_from(source()).write_to(Sinks.noop())
    with jetlet.embedded(jetlet.InstanceConfig(cooperative_thread_count=2)) as jet:
        done = jet.new_job(p)
        done.join()
        metrics = done.metrics()
    dag = p.to_dag()
    sources, sinks = progress.dag_ends(dag.to_dot())
    counts = progress.counts(metrics, sources, sinks)
    assert counts.total == total and counts.read == counts.at_sinks == (total or 5)
