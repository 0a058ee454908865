"""Helpers shared by the benchmark scripts: timing with best-of-N and Markdown tables.

Every ``*_bench.py`` measures jetlet against a plain-Python baseline doing the
same work in the same process and run, and reports the ratio, so results from
different machines can be compared. Timings are the best of ``--repeats``
runs: the minimum is the run least disturbed by the rest of the machine.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Callable, Sequence

from jetlet import word_count

DEFAULT_REPEATS = 3


class BenchSkipped(Exception):
    """A benchmark cannot run on this machine (the message says why); ``run_all`` keeps its old section."""


def parse_repeats(argv: Sequence[str], description: str) -> int:
    """The ``--repeats`` flag (how many times each measurement runs; the best counts)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--repeats", type=int, default=DEFAULT_REPEATS, help="runs per measurement (best wins)"
    )
    repeats: int = parser.parse_args(list(argv)).repeats
    if repeats < 1:
        parser.error(f"--repeats must be >= 1, got {repeats}")
    return repeats


def best_time(run: Callable[[], object], repeats: int) -> float:
    """The shortest wall time, in seconds, of ``repeats`` calls of ``run``."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub-flavoured Markdown table (first column left-aligned, the others right-aligned)."""
    align = [":---"] + ["---:"] * (len(headers) - 1)
    lines = [headers, align, *rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines) + "\n"


def rate(items: int, seconds: float) -> str:
    """Items per second, rounded to three significant figures with a thousands separator."""
    per_second = items / seconds
    return f"{float(f'{per_second:.3g}'):,.0f}"


def plain_word_count(lines: list[str]) -> Counter[str]:
    """The word count a careful Python programmer writes: ``Counter.update`` over the tokenized lines."""
    counts: Counter[str] = Counter()
    tokenize = word_count.tokenize
    for line in lines:
        counts.update(tokenize(line))
    return counts


def result_row(name: str, items: int, seconds: float, plain_seconds: float) -> list[str]:
    """A table row: items/s, best milliseconds, and throughput as a fraction of the plain loop's."""
    return [name, rate(items, seconds), f"{seconds * 1000:,.0f}", f"{plain_seconds / seconds:.2f}"]
