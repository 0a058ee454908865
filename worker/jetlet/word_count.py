"""The word-count DAG: the Core API's canonical example and ``make run``'s main job.

::

    source (lines) -> tokenize (flat_map) -> accumulate (per word, local partitioned edge)
                   -> combine (per word, distributed partitioned edge) -> sink

Two-stage aggregation: each member counts its own words first, so only one
partial count per word and member crosses a distributed edge.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from importlib import resources
from typing import Any

from jetlet.aggregate import counting
from jetlet.core import DAG, Edge, processors

_WORD = re.compile(r"\w+")


def tokenize(line: str) -> list[str]:
    """Lower-case words of a line (runs of letters, digits and underscores)."""
    return _WORD.findall(line.lower())


def _word(word: str) -> str:
    return word


def _entry_key(entry: tuple[str, int]) -> str:
    return entry[0]


def word_count_dag(lines: Iterable[str], sink: list[Any], local_parallelism: int = -1) -> DAG:
    """A DAG that counts the words of ``lines`` into ``sink`` as ``(word, count)`` tuples."""
    dag = DAG()
    source = dag.new_vertex("source", processors.source_from_iterable(lines))
    tokens = dag.new_vertex("tokenize", processors.flat_map_p(tokenize), local_parallelism)
    accumulate = dag.new_vertex(
        "accumulate", processors.accumulate_by_key_p(_word, counting()), local_parallelism
    )
    combine = dag.new_vertex("combine", processors.combine_by_key_p(counting()), local_parallelism)
    out = dag.new_vertex("sink", processors.list_sink_p(sink), 1)
    dag.edge(Edge.between(source, tokens))
    dag.edge(Edge.between(tokens, accumulate).partitioned(_word))
    dag.edge(Edge.between(accumulate, combine).partitioned(_entry_key).distributed())
    dag.edge(Edge.between(combine, out))
    return dag


def bundled_text() -> str:
    """Public-domain text shipped with jetlet (the Declaration of Independence and two Lincoln speeches)."""
    return resources.files("jetlet").joinpath("data/declaration.txt").read_text(encoding="utf-8")
