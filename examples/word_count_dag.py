"""Word count with the Core API: build the DAG by hand and run it embedded.

Run it with ``python examples/word_count_dag.py [FILE ...]`` (the bundled
public-domain text when no file is given). It prints the ten most frequent
words and the DAG in Graphviz DOT.

Or submit it to a cluster with ``jetlet submit examples/word_count_dag.py
[FILE ...]`` and read the counts with ``jetlet get-map dag-counts``: the
lines travel with the job, so the files need only be on the submitting
machine.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import jetlet
from jetlet.aggregate import counting
from jetlet.core import DAG, Edge, processors
from jetlet.core.processors.store import map_sink_p

WORD = re.compile(r"\w+")


def tokenize(line: str) -> list[str]:
    return WORD.findall(line.lower())


def word(item: str) -> str:
    return item


def entry_key(entry: tuple[str, int]) -> str:
    return entry[0]


def entry_count(entry: tuple[str, int]) -> int:
    return entry[1]


def read_lines(paths: list[str]) -> list[str]:
    if not paths:
        from jetlet.word_count import bundled_text

        return bundled_text().splitlines()
    return [line for path in paths for line in Path(path).read_text(encoding="utf-8").splitlines()]


def build_dag(lines: list[str] | None = None) -> DAG:
    """Count the words of ``lines`` (default: the files named as arguments, else the bundled text)."""
    if lines is None:
        lines = read_lines(sys.argv[1:])
    dag = DAG()
    source = dag.new_vertex("source", processors.source_from_iterable(lines))
    tokens = dag.new_vertex("tokenize", processors.flat_map_p(tokenize))
    accumulate = dag.new_vertex("accumulate", processors.accumulate_by_key_p(word, counting()))
    combine = dag.new_vertex("combine", processors.combine_by_key_p(counting()))
    out = dag.new_vertex("sink", map_sink_p("dag-counts", entry_key, entry_count))
    dag.edge(Edge.between(source, tokens))
    # Stage 1: count on the member that read the words.
    dag.edge(Edge.between(tokens, accumulate).partitioned(word))
    # Stage 2: one partial count per word and member travels to the word's owner.
    dag.edge(Edge.between(accumulate, combine).partitioned(entry_key).distributed())
    dag.edge(Edge.between(combine, out))
    return dag


def main(paths: list[str]) -> None:
    dag = build_dag(read_lines(paths))
    with jetlet.embedded() as jet:
        jet.new_job(dag).join()
        counts = jet.get_map("dag-counts")
    for word_, count in sorted(counts.items(), key=lambda e: (-e[1], e[0]))[:10]:
        print(f"{word_:<12} {count}")
    print()
    print(dag.to_dot())


if __name__ == "__main__":
    main(sys.argv[1:])
