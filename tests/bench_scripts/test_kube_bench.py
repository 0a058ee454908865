"""``bench/kube_bench.py`` formats its section from rounds and skips, with the reason, without the harness.

The benchmark itself runs only by hand (``python bench/run_all.py --only kube_bench``): it starts a
Kubernetes control plane, which is no part of the test suite's time.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from types import ModuleType

import pytest


def test_given_rounds_when_formatted_then_medians_maxima_and_ratios_to_the_baselines(
    load_bench: Callable[[str], ModuleType],
) -> None:
    bench = load_bench("kube_bench")
    rounds = [
        bench.Round(2.0, 1.0, 0.5, 6.0, 8.0, 3.0, 3.5, 1.0, 1.5, 9.0),
        bench.Round(4.0, 3.0, 0.7, 9.0, 12.0, 5.0, 5.5, 3.0, 3.5, 11.0),
        bench.Round(error="RoundFailed: not within 180 s: ready (seen: {})"),
    ]
    rows = {row[0]: row[1:] for row in bench.summary_rows(rounds)}

    baseline = "baseline: StatefulSet of 3 Python pods, apply → 3 pods Ready"
    assert rows[baseline] == ["3.00", "4.00", "2/3", "—"]
    assert rows["(a) JetCluster of 3, apply → condition Ready"] == ["10.00", "12.00", "2/3", "3.3x"]
    assert rows["(c) member pod deleted → new execution RUNNING (engine)"] == ["2.00", "3.00", "2/3", "1.0x"]
    section = bench.format_section(rounds, (1.5, 4.25), 9.5, ["evidence in bench/out/kube_bench/round-3.txt"])
    assert section.startswith("## ")
    assert "load average 1.5 before and 4.2 after" in section
    assert "- round 3 failed: RoundFailed: not within 180 s" in section
    assert section.count("\n| ") == 2 + len(bench.ROWS)


def test_given_no_harness_binaries_when_run_then_it_skips_with_the_reason(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, load_bench: Callable[[str], ModuleType]
) -> None:
    bench = load_bench("kube_bench")
    monkeypatch.setenv("KUBE_HARNESS_BIN_DIR", str(tmp_path))
    with pytest.raises(bench._common.BenchSkipped, match="make kube-bins"):
        bench.main(["--repeats", "1"])


def test_given_a_skipped_benchmark_when_run_all_runs_it_then_its_old_section_is_kept(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, load_bench: Callable[[str], ModuleType]
) -> None:
    run_all = load_bench("run_all")
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "gone_bench.py").write_text(
        "import _common\n\ndef main(argv):\n    raise _common.BenchSkipped('no harness here')\n"
    )
    (scripts / "fine_bench.py").write_text("def main(argv):\n    return '## Fine\\n\\nnew\\n'\n")
    output = tmp_path / "RESULTS.md"
    old = run_all.wrap_section("gone_bench", "## Gone\n\nold numbers\n", "python bench/run_all.py")
    output.write_text(run_all.merge_sections("", {"gone_bench": old}))
    monkeypatch.setattr(run_all, "BENCH_DIR", scripts)

    assert run_all.main(["--only", "gone_bench,fine_bench", "--output", str(output)]) == 0

    text = output.read_text()
    assert "old numbers" in text and "no harness here" not in text and "## Fine" in text
