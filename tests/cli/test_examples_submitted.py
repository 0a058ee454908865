"""Every example in examples/ runs with ``jetlet submit --wait`` on a local cluster; get-list/get-map read it.

Issue 16 items 7 and 8: three of the five examples had build functions
that needed arguments ``submit`` does not pass, and no command read a job's
results (REST answers with base64 pickles). Each example is submitted as a
user would (the real command, in a subprocess), then its results are read
with ``jetlet get-map`` / ``get-list`` as JSON and checked.
"""

from __future__ import annotations

import collections
import json
import re
import runpy
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jetlet import commands
from jetlet.datamodel import KeyedWindowResult
from jetlet.local_cluster import local_cluster
from jetlet.word_count import bundled_text

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLES = ROOT / "examples"
ENRICHMENT = runpy.run_path(str(EXAMPLES / "enrichment_join.py"))  # its tables, for the expected answer


def _word_counts() -> dict[str, int]:
    return dict(collections.Counter(re.findall(r"\w+", bundled_text().lower())))


def _revenue() -> dict[str, int]:
    names, prices = dict(ENRICHMENT["CUSTOMERS"]), {p: price for p, _, price in ENRICHMENT["PRODUCTS"]}
    expected: dict[str, int] = collections.Counter()
    for _, customer, product, quantity in ENRICHMENT["orders"]():
        expected[names.get(customer, "unknown")] += quantity * prices[product]
    return dict(expected)


def _check_hot_items(windows: Any) -> None:
    assert len(windows) > 10
    assert {"start", "end", "result"} <= set(windows[0])


def _check_sessions(sessions: Any) -> None:
    assert {"start", "end", "key", "result"} <= set(sessions[0])
    assert "ann" in {s["key"] for s in sessions}


CHECKS: dict[str, tuple[str, str, Callable[[Any], None]]] = {
    "word_count.py": ("map", "counts", lambda got: _equal(got, _word_counts())),
    "word_count_dag.py": ("map", "dag-counts", lambda got: _equal(got, _word_counts())),
    "enrichment_join.py": ("map", "revenue", lambda got: _equal(got, _revenue())),
    "hot_items.py": ("list", "hot-items", _check_hot_items),
    "session_windows.py": ("list", "sessions", _check_sessions),
}


def _equal(got: Any, expected: dict[str, int]) -> None:
    assert got == expected


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with local_cluster(2) as client:
        yield client


def jetlet_command(cluster: Any, *arguments: str) -> subprocess.CompletedProcess[str]:
    connection = ["-a", ",".join(cluster.addresses), f"--token={cluster.token}"]
    return subprocess.run(
        [sys.executable, "-m", "jetlet", *connection, *arguments],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_every_example_is_checked() -> None:
    spark = {"spark_enrichment.py"}  # drives Spark around its job: tests/spark/test_spark_example.py
    assert {p.name for p in EXAMPLES.glob("*.py")} - spark == set(CHECKS)


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_the_example_runs_with_jetlet_submit_and_its_results_read_as_json(cluster: Any, name: str) -> None:
    # when the example is submitted as it is, with no arguments
    submitted = jetlet_command(cluster, "submit", "--wait", str(EXAMPLES / name))
    # then it completes
    assert submitted.returncode == 0, submitted.stderr
    assert "completed" in submitted.stdout
    # and its results, read back by get-list / get-map, are JSON and right
    kind, sink, check = CHECKS[name]
    read = jetlet_command(cluster, f"get-{kind}", sink)
    assert read.returncode == 0, read.stderr
    check(json.loads(read.stdout))


def test_get_map_and_get_list_print_what_json_cannot_hold_as_pairs_and_strings() -> None:
    window = KeyedWindowResult(0, 10, ("a", 1), 3)
    assert commands._jsonable({(1, 2): {3}, (0, 1): None}) == [[[0, 1], None], [[1, 2], [3]]]
    assert commands._jsonable({2: "b", 1: "a"}) == {"1": "a", "2": "b"}
    assert commands._jsonable([window, b"x", object]) == [
        {"start": 0, "end": 10, "key": ["a", 1], "result": 3, "is_early": False},
        "b'x'",
        "<class 'object'>",
    ]


def test_an_unknown_list_is_empty(cluster: Any) -> None:
    read = jetlet_command(cluster, "get-list", "no-such-list")
    assert (read.returncode, json.loads(read.stdout)) == (0, [])
