"""``bench/engine_ab.py``: an A/B of two trees, one after the other or side by side on pinned cores."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from types import ModuleType

import pytest

pytestmark = pytest.mark.timeout(180)


def test_a_side_by_side_run_is_pinned_to_the_core_it_was_given(
    load_bench: Callable[[str], ModuleType],
) -> None:
    bench = load_bench("engine_ab")
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.fail("this test needs two cores (the machine kind has two)")
    # a run whose script prints the cores it may use, as the real run prints its rate
    script = "import json, os\nprint(json.dumps(sorted(os.sched_getaffinity(0))[0] + 0.5))"
    runs = [bench._start(bench.REPO, "q1", 0.1, core, script) for core in cores[:2]]
    assert [bench._rate_of(run) for run in runs] == [cores[0] + 0.5, cores[1] + 0.5]
    failing = bench._start(bench.REPO, "q1", 0.1, cores[0], "raise SystemExit('no such query')")
    with pytest.raises(RuntimeError, match="a run failed \\(exit 1\\): no such query"):
        bench._rate_of(failing)


def test_an_a_a_run_side_by_side_measures_both_trees_each_round(
    load_bench: Callable[[str], ModuleType],
) -> None:
    bench = load_bench("engine_ab")
    # when this tree's HEAD is measured against this tree, two rounds of Q1, side by side
    table = bench.main(
        ["--before", "HEAD", "--rounds", "2", "--seconds", "0.5", "--queries", "q1", "--side-by-side"]
    )
    # then the table has Q1's medians (events per CPU-second) and one ratio per round
    assert "2 side-by-side rounds" in table
    row = next(line for line in table.splitlines() if line.startswith("| Q1 |"))
    before, after, per_round = (cell.strip() for cell in row.strip("|").split("|")[1:])
    assert int(before.replace(",", "")) > 10_000 and int(after.replace(",", "")) > 10_000
    assert len(re.findall(r"[+-]\d+\.\d", per_round)) == 2
