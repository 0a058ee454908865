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
from jetlet.core.processors import store

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
    return _counting_dag(lines, processors.list_sink_p(sink), 1, local_parallelism)


def _counting_dag(lines: Iterable[str], sink: object, sink_parallelism: int, local_parallelism: int) -> DAG:
    dag = DAG()
    source = dag.new_vertex("source", processors.source_from_iterable(lines))
    tokens = dag.new_vertex("tokenize", processors.flat_map_p(tokenize), local_parallelism)
    accumulate = dag.new_vertex(
        "accumulate", processors.accumulate_by_key_p(_word, counting()), local_parallelism
    )
    combine = dag.new_vertex("combine", processors.combine_by_key_p(counting()), local_parallelism)
    out = dag.new_vertex("sink", sink, sink_parallelism)
    dag.edge(Edge.between(source, tokens))
    dag.edge(Edge.between(tokens, accumulate).partitioned(_word))
    dag.edge(Edge.between(accumulate, combine).partitioned(_entry_key).distributed())
    dag.edge(Edge.between(combine, out))
    return dag


def _entry_count(entry: tuple[str, int]) -> int:
    return entry[1]


def word_count_job(text: str = "", map_name: str = "word_counts", local_parallelism: int = -1) -> DAG:
    """A DAG that counts the words of ``text`` (default: :func:`bundled_text`) into the map ``map_name``.

    Its arguments are plain JSON values, so it serves as a job entrypoint in
    the worker image: ``POST /jobs`` with ``{"entrypoint":
    "jetlet.word_count:word_count_job", "arguments": {"map_name": "counts"}}``.

    >>> import collections, jetlet
    >>> with jetlet.embedded() as jet:
    ...     jet.new_job(word_count_job("to be or not to be", "counts")).join()
    ...     jet.get_map("counts") == collections.Counter(tokenize("to be or not to be"))
    True
    """
    lines = (text or bundled_text()).splitlines()
    sink = store.map_sink_p(map_name, _entry_key, _entry_count)
    return _counting_dag(lines, sink, -1, local_parallelism)


def bundled_text() -> str:
    """Public-domain text shipped with jetlet (the Declaration of Independence and two Lincoln speeches)."""
    return resources.files("jetlet").joinpath("data/declaration.txt").read_text(encoding="utf-8")
