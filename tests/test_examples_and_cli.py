"""Given the runnable examples and the command line, when run as a user would, then they work and say so."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import jetlet
from jetlet import cli

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = {
    "word_count.py": "identical to collections.Counter",
    "word_count_dag.py": "digraph",
    "hot_items.py": "one-second steps of the sliding window",
    "enrichment_join.py": "matches a plain-Python join",
    "session_windows.py": "ann  [   0.0 s,   50.0 s) 3 clicks: /home -> /shop -> /cart",
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_runs_and_prints_its_result(name: str) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert EXAMPLES[name] in done.stdout


def test_every_example_is_tested() -> None:
    spark = {"spark_enrichment.py"}  # needs a SparkSession: tests/spark/test_spark_example.py runs it
    assert {p.name for p in (ROOT / "examples").glob("*.py")} - spark == set(EXAMPLES)


def test_cli_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])
    assert exited.value.code == 0
    assert jetlet.__version__ in capsys.readouterr().out
    assert cli.main([]) == 2
    assert "demo" in capsys.readouterr().out


def test_cli_demo_runs_both_jobs_and_verifies_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["demo", "--repeat", "2", "--stream-seconds", "1", "--rate", "2000"]) == 0
    out = capsys.readouterr().out
    assert "counts verified against a plain-Python collections.Counter: identical" in out
    assert "every one of the 2,000 trades counted in exactly one window" in out
