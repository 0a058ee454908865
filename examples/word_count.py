"""Word count with the Pipeline API over the lines of text files (a batch job).

Run it with ``python examples/word_count.py [DIRECTORY]``: it counts the
words of every ``*.txt`` file in ``DIRECTORY`` (by default, a temporary folder
holding the bundled public-domain text split into four files), prints the
twenty most frequent words, and checks the counts against
``collections.Counter``.

Or submit it to a cluster with ``jetlet submit examples/word_count.py
[DIRECTORY]`` and read the counts with ``jetlet get-map counts``. The
members read the files, so ``DIRECTORY`` must be readable by every member
(the default folder is, on a local cluster).
"""

from __future__ import annotations

import collections
import re
import sys
import tempfile
from pathlib import Path

import jetlet
from jetlet.aggregate import counting
from jetlet.pipeline import Pipeline, Sinks, Sources
from jetlet.word_count import bundled_text

WORD = re.compile(r"\w+")


def tokenize(line: str) -> list[str]:
    return WORD.findall(line.lower())


def build_pipeline(directory: Path | None = None) -> Pipeline:
    """Count the words of ``directory`` (default: the first argument, else the sample folder)."""
    if directory is None:
        directory = Path(sys.argv[1]) if sys.argv[1:] else sample_directory()
    p = Pipeline()
    (
        p.read_from(Sources.files(directory, "*.txt"))
        .flat_map(tokenize)
        .filter(lambda word: len(word) > 0)
        .grouping_key(lambda word: word)
        .aggregate(counting())
        .write_to(Sinks.map("counts"))
    )
    return p


def sample_directory() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="jetlet-wordcount-"))
    lines = bundled_text().splitlines()
    quarter = len(lines) // 4 + 1
    for index in range(4):
        chunk = lines[index * quarter : (index + 1) * quarter]
        (folder / f"part-{index}.txt").write_text("\n".join(chunk) + "\n", encoding="utf-8")
    return folder


def main(argv: list[str]) -> int:
    directory = Path(argv[0]) if argv else sample_directory()
    with jetlet.embedded() as jet:
        jet.new_job(build_pipeline(directory)).join()
        counts = dict(jet.get_map("counts"))
    for word, count in sorted(counts.items(), key=lambda e: (-e[1], e[0]))[:20]:
        print(f"{word:<16}{count:>8}")
    expected = collections.Counter(
        word
        for path in sorted(directory.glob("*.txt"))
        for line in path.read_text(encoding="utf-8").splitlines()
        for word in tokenize(line)
    )
    verdict = "identical to" if counts == expected else "DIFFERENT from"
    print(f"\n{sum(counts.values()):,} words, {len(counts):,} distinct: {verdict} collections.Counter")
    return 0 if counts == expected else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
