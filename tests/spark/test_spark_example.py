"""``examples/spark_enrichment.py`` runs with the shared SparkSession and matches Spark's own numbers.

(The other examples run in ``tests/test_examples_and_cli.py`` as subprocesses;
this one needs a SparkSession, which takes 15-25 s to start, so it runs here,
in the test run's session.)
"""

from __future__ import annotations

import pathlib
import runpy
from typing import Any

import pytest

pytestmark = pytest.mark.spark

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "spark_enrichment.py"


def test_the_spark_enrichment_example_matches_sparks_own_join_and_aggregation(
    spark: Any, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example = runpy.run_path(str(EXAMPLE))
    assert example["run"](spark, tmp_path) is True
    out = capsys.readouterr().out
    assert "revenue per segment matches Spark's own join and aggregation" in out
    assert "unknown" in out  # orders of customers that do not exist are kept, as in Spark's left join
