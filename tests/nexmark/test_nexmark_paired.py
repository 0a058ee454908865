"""The NEXMark harness's fairness: interleaved rounds, medians and spreads, paired ratios, CPU time, builds.

Issue 20 item 1: the harness compared its best of three jetlet runs with one plain-loop run taken
minutes later, so on a busy machine the ratios said more about the load than about the engine.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import sysconfig
from typing import Any

import pytest

import jetlet
from jetlet.nexmark.bench import cpu, harness, interpreter, paired, plain, report, throughput

# -- the schedule -----------------------------------------------------------------------------


def test_each_round_runs_every_contender_once_per_query_back_to_back_in_a_rotating_order() -> None:
    # given 3 contenders, 2 queries, 4 rounds
    contenders = [1, 2, "plain"]
    runs = paired.schedule(4, ["q1", "q5"], contenders)
    # then every round has every (query, contender) exactly once, and nothing else
    assert len(runs) == 4 * 2 * 3
    for index in range(4):
        in_round = [(q, c) for r, q, c in runs if r == index]
        assert sorted(map(str, in_round)) == sorted(str((q, c)) for q in ("q1", "q5") for c in contenders)
    # and a query's contenders run back to back (rounds in order, queries in order within a round)
    keys = [(r, q) for r, q, _ in runs]
    assert keys == sorted(keys, key=lambda k: (k[0], ["q1", "q5"].index(k[1])))
    # and each contender leads a round once in every 3 rounds (the order rotates)
    leaders = [runs[index * 6][2] for index in range(4)]
    assert leaders == [1, 2, "plain", 1]
    assert paired.schedule(0, ["q1"], contenders) == []


# -- medians, spreads and paired ratios -------------------------------------------------------


def test_a_spread_is_the_median_with_its_min_max_and_from_four_values_its_quartiles() -> None:
    three = paired.Spread.of([5.0, 1.0, 3.0])
    assert (three.median, three.low, three.high, three.count, three.quartiles) == (3.0, 1.0, 5.0, 3, None)
    assert three.text("{:.1f}") == "3.0 (1.0-5.0)"
    four = paired.Spread.of([4.0, 1.0, 3.0, 2.0])
    assert four.median == 2.5 and four.quartiles == (1.75, 3.25)
    assert four.text("{:.2f}") == "2.50 (1.00-4.00, IQR 1.75-3.25)"
    assert paired.Spread.of([7.0]).text("{:.0f}") == "7"
    with pytest.raises(ValueError, match="no values"):
        paired.Spread.of([])


def test_ratios_are_paired_by_round_and_rounds_without_both_give_none() -> None:
    jetlet_rates = {0: 100.0, 1: 50.0, 2: 80.0, 3: 10.0}
    plain_rates = {0: 200.0, 1: 100.0, 3: 0.0, 4: 7.0}
    assert paired.paired_ratios(jetlet_rates, plain_rates) == [0.5, 0.5]
    assert paired.paired_spread({0: 1.0}, {1: 1.0}) is None


def load_scaled_results(load: list[float]) -> report.Results:
    """Rounds whose machine load scales every contender alike: jetlet's 1 member runs at half the
    plain loop, 2 members at 1.8 times 1 member; CPU per event does not depend on the load."""
    results = report.Results("test", rounds=len(load))
    for index, factor in enumerate(load):
        seconds = 2.0
        one = 500_000 * factor * seconds
        results.throughputs.append(throughput.Throughput("q1", 1, int(one), 0, seconds, one * 2e-6, index))
        two = 1.8 * one
        results.throughputs.append(throughput.Throughput("q1", 2, int(two), 0, seconds, two * 2.5e-6, index))
        loop = 1_000_000 * factor * seconds
        results.plain_runs.append(plain.PlainRun("q1", int(loop), 0, seconds, loop * 0.8e-6, index))
    return results


def row_of(text: str, members: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.startswith(f"| q1 | {members} |"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_the_section_pairs_each_ratio_by_round_so_the_load_cancels() -> None:
    # given 3 rounds under loads 1, 0.5 and 0.2
    results = load_scaled_results([1.0, 0.5, 0.2])
    text = report.section(results, "abc123")
    header = next(line for line in text.splitlines() if line.startswith("| query"))
    columns = [cell.strip() for cell in header.strip("|").split("|")]
    one = dict(zip(columns, row_of(text, "1 member"), strict=True))
    two = dict(zip(columns, row_of(text, "2 members"), strict=True))
    # then rates are medians with their spread, over the rounds
    assert one["events/s"] == "250,000 (100,000-500,000)"
    assert two["events/s per member"] == "225,000 (90,000-450,000)"
    # and the ratios, taken per round, are the true ones with no spread (the old way, the best run
    # over a plain run in the busiest round, said 2.50)
    assert one["jetlet/plain"] == "0.50 (0.50-0.50)"
    assert two["jetlet/plain"] == "0.45 (0.45-0.45)"
    assert two["scaling"] == "1.80 (1.80-1.80)" and one["scaling"] == "—"
    # and CPU per event sits beside them: jetlet's, the loop's, and events per CPU-second over the loop's
    assert one["CPU µs/event"] == "2.00 (2.00-2.00)" and two["CPU µs/event"] == "2.50 (2.50-2.50)"
    assert one["plain CPU µs/event"] == "0.80 (0.80-0.80)"
    assert one["jetlet/plain per CPU-s"] == "0.40 (0.40-0.40)"
    assert two["jetlet/plain per CPU-s"] == "0.32 (0.32-0.32)"
    assert "3 rounds" in text


def test_a_round_missing_a_contender_pairs_only_the_rounds_that_have_both() -> None:
    # given 2 rounds, the plain loop measured only in the second (jetlet 10 % slower there)
    results = report.Results("test", rounds=2)
    results.throughputs.append(throughput.Throughput("q1", 1, 400, 0, 1.0, None, 0))
    results.throughputs.append(throughput.Throughput("q1", 1, 90, 0, 1.0, None, 1))
    results.plain_runs.append(plain.PlainRun("q1", 100, 0, 1.0, None, 1))
    cells = row_of(report.section(results, "abc"), "1 member")
    # then the ratio is that round's alone, and CPU not measured shows as none
    assert cells[8] == "0.90" and cells[4] == "—" and cells[9] == "—"


# -- CPU accounting ---------------------------------------------------------------------------


def test_cpu_used_sums_every_process_once_and_refuses_readings_that_do_not_match() -> None:
    # given a meter over the driver and two members (one listed twice), with a scripted reader
    times = {101: [1.0, 1.5], 102: [10.0, 12.25]}
    script: dict[int, list[float]] = {}

    def reader(pid: int) -> float:
        return script[pid].pop(0)

    meter = cpu.Meter.of([101, 102, 101], reader)
    driver = meter.pids[0]
    assert meter.pids[1:] == (101, 102)
    script.update({pid: list(values) for pid, values in times.items()})
    script[driver] = [3.0, 3.25]
    # when read twice
    before, after = meter.read(), meter.read()
    # then the CPU used is the sum of each process's difference
    assert cpu.used(before, after) == pytest.approx(0.5 + 2.25 + 0.25)
    # an embedded instance is the driver itself: counted once
    assert cpu.Meter.of([driver], reader).pids == (driver,)
    # readings of other processes, or time going back, are errors, not numbers
    with pytest.raises(ValueError, match="different processes"):
        cpu.used({1: 0.0}, {2: 1.0})
    with pytest.raises(ValueError, match="went back"):
        cpu.used({1: 2.0}, {1: 1.0})


BURN = """
import sys, time
sys.stdin.readline()
start = time.process_time()
while time.process_time() - start < 0.3:
    pass
print("done", flush=True)
sys.stdin.readline()
"""


def test_the_meter_counts_a_member_processs_cpu_time() -> None:
    # given a child process that burns 0.3 s of CPU when told, then waits
    child = subprocess.Popen(
        [sys.executable, "-c", BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        meter = cpu.Meter.of([child.pid])
        before = meter.read()
        # when it burns
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "done"
        after = meter.read()
    finally:
        child.stdin.close()
        child.wait(timeout=30)
    # then its CPU seconds are counted (psutil reads whole clock ticks: a tick may be missing)
    assert after[child.pid] - before[child.pid] >= 0.28
    assert cpu.used(before, after) >= 0.28


def test_a_plain_run_and_an_embedded_run_report_cpu_per_event() -> None:
    loop = plain.measure("q2", 0.05, round_index=4)
    assert loop.round == 4 and loop.events > 0
    assert loop.cpu_seconds is not None and loop.cpu_seconds > 0
    assert loop.cpu_us_per_event == pytest.approx(loop.cpu_seconds * 1e6 / loop.events)
    with jetlet.embedded() as jet:
        run = throughput.measure(jet, "q1", 0, seconds=0.5, warmup_s=0.3, round_index=2)
    assert run.round == 2 and run.events > 0
    assert run.cpu_seconds is not None and run.cpu_seconds > 0
    assert run.cpu_us_per_event == pytest.approx(run.cpu_seconds * 1e6 / run.events)


# -- the rounds as the harness runs them ------------------------------------------------------


def test_the_harness_runs_its_rounds_interleaved_and_tags_each_run_with_its_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given measurements that only record what ran, in which round
    ran: list[tuple[int, str, str]] = []

    def fake_jetlet(
        cluster: Any,
        query: str,
        members: int,
        seconds: float,
        warmup_s: float,
        round_index: int,
        *,
        split: str,
    ) -> throughput.Throughput:
        assert split == "auto"  # the harness passes its --source-split on
        ran.append((round_index, query, cluster))
        return throughput.Throughput(query, members, 1_000, 0, 1.0, 0.001, round_index)

    def fake_plain(query: str, seconds: float, round_index: int) -> plain.PlainRun:
        ran.append((round_index, query, "plain"))
        return plain.PlainRun(query, 2_000, 0, 1.0, 0.001, round_index)

    monkeypatch.setattr(throughput, "measure", fake_jetlet)
    monkeypatch.setattr(plain, "measure", fake_plain)
    parser = argparse.ArgumentParser()
    harness.add_arguments(parser)
    settings = harness.settings_from(
        parser.parse_args(["--queries", "q1,q5", "--repeats", "2", "--peers", "plain", "--no-report"])
    )
    results = report.Results("test", rounds=settings.repeats)
    # when the rounds run on a 1-member and a 2-member "cluster"
    harness._run_rounds(settings, {1: "one", 2: "two"}, results)
    # then round by round, query by query, every contender once, the order rotated in round 2
    assert ran == [
        (0, "q1", "one"), (0, "q1", "two"), (0, "q1", "plain"),
        (0, "q5", "one"), (0, "q5", "two"), (0, "q5", "plain"),
        (1, "q1", "two"), (1, "q1", "plain"), (1, "q1", "one"),
        (1, "q5", "two"), (1, "q5", "plain"), (1, "q5", "one"),
    ]  # fmt: skip
    assert [t.round for t in results.throughputs] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert "0.50 (0.50-0.50)" in report.section(results, "abc")


# -- the interpreter's build ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config_args", "cflags", "build"),
    [
        ("'--prefix=/x' '--enable-shared'", "-O3 -Wall", "no PGO, no LTO"),
        ("'--enable-optimizations' '--with-lto'", "-O3", "PGO+LTO"),
        ("--with-lto=full", "", "LTO"),
        ("--enable-optimizations", "", "PGO"),
        ("'--prefix=/usr'", "-O2 -flto=auto -fprofile-use -fprofile-correction", "PGO+LTO"),
        ("--enable-optimizations-not", "-fltox", "no PGO, no LTO"),
    ],
)
def test_the_build_is_read_from_the_configure_arguments_and_the_compiler_flags(
    config_args: str, cflags: str, build: str
) -> None:
    found = interpreter.Interpreter("CPython", "3.11.7", "/usr/bin/python3", config_args, cflags)
    assert found.build == build
    assert f"({build})" in found.line() and "/usr/bin/python3" in found.line()


def test_this_interpreter_is_described_alike_in_process_and_by_asking_it() -> None:
    here = interpreter.describe()
    assert here.executable == sys.executable
    assert here.config_args == str(sysconfig.get_config_var("CONFIG_ARGS") or "")
    assert interpreter.describe_executable(sys.executable) == here
    with pytest.raises((OSError, ValueError)):
        interpreter.describe_executable("/nonexistent/python")


def test_the_section_header_names_the_interpreter_and_the_build_of_each_figure() -> None:
    results = report.Results("test")
    results.interpreter = interpreter.Interpreter("CPython", "3.11.7", "/opt/py", "--with-lto", "-O3")
    results.peer_interpreters["bytewax"] = "CPython 3.11.7 (no PGO, no LTO) at `/venv/python`"
    text = report.section(results, "abc")
    assert "- Interpreter: CPython 3.11.7 (LTO) at `/opt/py`; PY_CFLAGS `-O3`" in text
    assert "the plain loop: LTO; bytewax: CPython 3.11.7 (no PGO, no LTO)" in text
