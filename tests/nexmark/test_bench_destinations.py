"""``jetlet bench nexmark --quick`` prints, and writes only where ``--out`` (or ``--results``) says.

Issue 16 item 9: the README's smoke run rewrote the committed
``bench/RESULTS.md`` and, run outside the checkout, created ``bench/`` in the
current directory.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
from pathlib import Path

from jetlet.nexmark.bench import harness

RESULTS = harness.REPO_ROOT / "bench" / "RESULTS.md"


def _settings(argv: list[str], checkout_defaults: bool) -> harness.Settings:
    parser = argparse.ArgumentParser()
    harness.add_arguments(parser, checkout_defaults)
    return harness.settings_from(parser.parse_args(argv))


def test_the_command_writes_nothing_unless_told_and_the_checkout_script_writes_into_the_checkout() -> None:
    # the installed command: nothing by default, quick or not
    for argv in ([], ["--quick"]):
        chosen = _settings(argv, checkout_defaults=False)
        assert (chosen.out, chosen.results, chosen.plots) == (None, None, None)
    # --out takes the section and the plots; --results a Markdown file
    chosen = _settings(["--quick", "--out", "x", "--results", "r.md"], checkout_defaults=False)
    assert (chosen.out, chosen.results, chosen.plots) == (Path("x"), Path("r.md"), Path("x"))
    # bench/nexmark.py (make bench): the checkout's bench/, wherever it runs from, but not for --quick
    full = _settings([], checkout_defaults=True)
    assert (full.out, full.results, full.plots) == (
        harness.REPO_ROOT / "bench" / "out" / "nexmark",
        RESULTS,
        harness.REPO_ROOT / "bench",
    )
    quick = _settings(["--quick"], checkout_defaults=True)
    assert (quick.out, quick.results, quick.plots) == (None, None, None)
    assert _settings(["--no-report"], checkout_defaults=True).results is None


def test_a_quick_run_outside_the_checkout_prints_and_writes_nothing(tmp_path: Path) -> None:
    before = hashlib.sha256(RESULTS.read_bytes()).hexdigest()
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "jetlet",
            "bench",
            "nexmark",
            "--quick",
            "--queries",
            "q1",
            "--mode",
            "throughput",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "q1" in run.stdout and "events/s" in run.stdout
    assert "wrote" not in run.stdout
    assert list(tmp_path.iterdir()) == []
    assert hashlib.sha256(RESULTS.read_bytes()).hexdigest() == before
