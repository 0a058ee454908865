"""Core engine benchmark: jetlet DAGs on one embedded member against plain-Python loops.

Two workloads, each measured in the same run as a plain loop doing the same work:

* word count: the word-count DAG (:mod:`jetlet.word_count`) at local
  parallelism 1 and 4, and on 2 cooperative threads, against
  ``collections.Counter`` over the same tokenized lines;
* map + filter: ``source -> map -> filter -> sink`` over integers against a
  loop that maps, filters and appends.

Each line reports items per second (words, or source integers) for the best
of ``--repeats`` runs, and the engine's throughput as a fraction of the plain
loop's. Only the job (submit to join) is timed; the instance is started
before. Results are checked against the plain loop's, so a fast wrong answer
cannot pass. Run: ``python bench/core_bench.py [--repeats N]``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import _common
import jetlet
from jetlet import word_count
from jetlet.core import DAG, Edge, processors

WORD_COUNT_TEXT_COPIES = 400
MAP_FILTER_ITEMS = 2_000_000


def _timed_engine_word_count(lines: list[str], local_parallelism: int, threads: int, repeats: int) -> float:
    expected = _common.plain_word_count(lines)
    out: list[tuple[str, int]] = []

    def run() -> None:
        out.clear()
        jet.new_job(word_count.word_count_dag(lines, out, local_parallelism)).join()

    with jetlet.embedded(cooperative_thread_count=threads) as jet:
        seconds = _common.best_time(run, repeats)
    if dict(out) != expected:
        raise AssertionError(f"word count at parallelism {local_parallelism} differs from Counter")
    return seconds


def _double(n: int) -> int:
    return n * 3


def _is_even(n: int) -> bool:
    return n % 2 == 0


def _plain_map_filter(count: int) -> list[int]:
    out: list[int] = []
    for n in range(count):
        tripled = _double(n)
        if _is_even(tripled):
            out.append(tripled)
    return out


def _map_filter_dag(count: int, out: list[int]) -> DAG:
    dag = DAG()
    source = dag.new_vertex("source", processors.source_from_iterable(range(count)))
    mapped = dag.new_vertex("map", processors.map_p(_double), 1)
    kept = dag.new_vertex("filter", processors.filter_p(_is_even), 1)
    sink = dag.new_vertex("sink", processors.list_sink_p(out), 1)
    dag.edge(Edge.between(source, mapped))
    dag.edge(Edge.between(mapped, kept))
    dag.edge(Edge.between(kept, sink))
    return dag


def _timed_engine_map_filter(count: int, repeats: int) -> float:
    out: list[int] = []

    def run() -> None:
        out.clear()
        jet.new_job(_map_filter_dag(count, out)).join()

    with jetlet.embedded() as jet:
        seconds = _common.best_time(run, repeats)
    if out != _plain_map_filter(count):
        raise AssertionError("the map/filter DAG's output differs from the plain loop's")
    return seconds


def main(argv: Sequence[str] = ()) -> str:
    """Run the benchmark and return its Markdown section (a heading and a table)."""
    repeats = _common.parse_repeats(argv, __doc__.splitlines()[0] if __doc__ else "core benchmark")
    lines = word_count.bundled_text().splitlines() * WORD_COUNT_TEXT_COPIES
    words = sum(len(word_count.tokenize(line)) for line in lines)
    plain_wc = _common.best_time(lambda: _common.plain_word_count(lines), repeats)
    rows = [
        ["word count: plain `Counter` loop", _common.rate(words, plain_wc), f"{plain_wc * 1000:,.0f}", "1.00"]
    ]
    for label, parallelism, threads in (
        ("lp 1", 1, 1),
        ("lp 4", 4, 1),
        ("lp 1, 2 threads", 1, 2),
        ("lp 4, 2 threads", 4, 2),
    ):
        seconds = _timed_engine_word_count(lines, parallelism, threads, repeats)
        rows.append(_common.result_row(f"word count: DAG, {label}", words, seconds, plain_wc))
    plain_mf = _common.best_time(lambda: _plain_map_filter(MAP_FILTER_ITEMS), repeats)
    rows.append(
        [
            "map+filter: plain loop",
            _common.rate(MAP_FILTER_ITEMS, plain_mf),
            f"{plain_mf * 1000:,.0f}",
            "1.00",
        ]
    )
    rows.append(
        _common.result_row(
            "map+filter: DAG", MAP_FILTER_ITEMS, _timed_engine_map_filter(MAP_FILTER_ITEMS, repeats), plain_mf
        )
    )
    table = _common.markdown_table(["workload", "items/s", "best ms", "engine/plain"], rows)
    return (
        "## Core engine (one embedded member)\n\n"
        f"Word count: {len(lines):,} lines, {words:,} words. Map+filter: {MAP_FILTER_ITEMS:,} integers. "
        f"Best of {repeats}; `engine/plain` is the engine's throughput over the plain loop's.\n\n" + table
    )


if __name__ == "__main__":
    print(main(sys.argv[1:]))
